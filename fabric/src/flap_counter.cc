#include "lockstep/fabric/flap_counter.h"

#include <algorithm>

namespace lockstep::fabric {

bool FlapCounter::Record(Time at) {
  Advance(at);
  if (static_cast<int>(flaps_.size()) >= kMaxKept) flaps_.pop_front();
  flaps_.push_back(at);
  if (!alerting_ && static_cast<int>(flaps_.size()) > alert_above_) {
    alerting_ = true;
    return true;
  }
  return false;
}

void FlapCounter::Advance(Time now) {
  while (!flaps_.empty() && flaps_.front() <= now - window_) flaps_.pop_front();
  if (alerting_ && static_cast<int>(flaps_.size()) <= alert_above_) alerting_ = false;
}

int FlapCounter::Count(Time now) const {
  auto first = std::upper_bound(flaps_.begin(), flaps_.end(), now - window_);
  auto last = std::upper_bound(flaps_.begin(), flaps_.end(), now);
  return static_cast<int>(last - first);
}

std::optional<Time> FlapCounter::last() const {
  if (flaps_.empty()) return std::nullopt;
  return flaps_.back();
}

}  // namespace lockstep::fabric
