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
  std::uniform_int_distribution<int64_t> phase(0, interval_.count() - 1);
  due_.emplace(path, now + Nanos(phase(rng_)));
}

void ProbeSchedule::Remove(const PathKey& path) { due_.erase(path); }

std::vector<PathKey> ProbeSchedule::TakeDue(Time now) {
  std::vector<PathKey> out;
  for (auto& [path, due] : due_) {
    if (due > now) continue;
    out.push_back(path);
    Time next = due + NextGap();
    if (next <= now) next = now + NextGap();  // a whole gap late: no burst
    due = next;
  }
  return out;
}

std::optional<Time> ProbeSchedule::DueAt(const PathKey& path) const {
  auto it = due_.find(path);
  if (it == due_.end()) return std::nullopt;
  return it->second;
}

std::optional<Time> ProbeSchedule::NextDue() const {
  std::optional<Time> best;
  for (const auto& [path, due] : due_) {
    if (!best || due < *best) best = due;
  }
  return best;
}

}  // namespace lockstep::fabric
