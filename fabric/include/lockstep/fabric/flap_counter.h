// FlapCounter: flaps over a sliding window (an hour by default) and an
// edge-triggered alert: Record returns true once when the count rises above
// the threshold, and the alert re-arms only after the count has fallen back
// to the threshold or below (flaps sliding out of the window).
// Keeps at most kMaxKept flap times (the count saturates there).
// Thread-compatible.
#pragma once

#include <deque>
#include <optional>

#include "lockstep/fabric/path.h"

namespace lockstep::fabric {

class FlapCounter {
 public:
  static constexpr int kMaxKept = 100000;

  // REQUIRES: window > 0, alert_above >= 1.
  FlapCounter(Nanos window, int alert_above) : window_(window), alert_above_(alert_above) {}

  // A flap at `at` (times must not go back). True when this flap raises the
  // alert (the count crossed above the threshold and the alert was armed).
  bool Record(Time at);

  // Drops flaps older than the window and re-arms the alert when the count
  // is back at or below the threshold.
  void Advance(Time now);

  // Flaps in (now - window, now].
  int Count(Time now) const;
  bool alerting() const { return alerting_; }
  std::optional<Time> last() const;

 private:
  Nanos window_;
  int alert_above_;
  bool alerting_ = false;
  std::deque<Time> flaps_;
};

}  // namespace lockstep::fabric
