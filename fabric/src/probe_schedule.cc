#include "lockstep/fabric/probe_schedule.h"

#include <cassert>

namespace lockstep::fabric {

ProbeSchedule::ProbeSchedule(Nanos interval, double jitter, uint64_t seed)
    : interval_(interval), jitter_(jitter), rng_(seed) {
  assert(interval.count() > 0 && jitter >= 0 && jitter < 1);
}

Nanos ProbeSchedule::NextGap() {
  if (jitter_ == 0) return interval_;
  std::uniform_real_distribution<double> u(1 - jitter_, 1 + jitter_);
  return Nanos(static_cast<int64_t>(static_cast<double>(interval_.count()) * u(rng_)));
}

void ProbeSchedule::Add(const PathKey& path, Time now) {
  if (due_.contains(path)) return;
  if (!next_tick_) {
    std::uniform_int_distribution<int64_t> phase(0, interval_.count() - 1);
    next_tick_ = now + Nanos(phase(rng_));
  }
  const Time due = *next_tick_;  // with the others (at once if their tick is overdue)
  due_.emplace(path, due);
  queue_.emplace(due, path);
}

void ProbeSchedule::Remove(const PathKey& path) {
  auto it = due_.find(path);
  if (it == due_.end()) return;
  queue_.erase({it->second, path});
  due_.erase(it);
  if (due_.empty()) next_tick_.reset();
}

std::vector<PathKey> ProbeSchedule::TakeDue(Time now) {
  std::vector<PathKey> out;
  if (queue_.empty() || queue_.begin()->first > now) return out;
  // Taken nodes are re-inserted (no allocation per probe), so collect them first.
  taken_.clear();
  while (!queue_.empty() && queue_.begin()->first <= now) taken_.push_back(queue_.extract(queue_.begin()));
  // One tick for all: a gap after the latest due time taken (paths that were
  // due at different times, say after a late Add, line up from here on).
  Time next = taken_.back().value().first + NextGap();
  if (next <= now) next = now + NextGap();  // a whole gap late: no burst
  next_tick_ = next;
  out.reserve(taken_.size());
  for (auto& node : taken_) {
    node.value().first = next;
    due_.find(node.value().second)->second = next;
    out.push_back(node.value().second);
    queue_.insert(std::move(node));
  }
  taken_.clear();
  return out;
}

std::optional<Time> ProbeSchedule::DueAt(const PathKey& path) const {
  auto it = due_.find(path);
  if (it == due_.end()) return std::nullopt;
  return it->second;
}

std::optional<Time> ProbeSchedule::NextDue() const {
  if (queue_.empty()) return std::nullopt;
  return queue_.begin()->first;
}

}  // namespace lockstep::fabric
