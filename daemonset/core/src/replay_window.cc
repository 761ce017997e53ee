#include "lockstep/agent/replay_window.h"

namespace lockstep::agent {

bool ReplayWindow::Accept(uint64_t seq) {
  if (empty_) {
    empty_ = false;
    highest_ = seq;
    Set(seq);
    return true;
  }
  if (seq > highest_) {
    uint64_t shift = seq - highest_;
    if (shift >= kSize) {
      bits_.fill(0);
    } else {
      for (uint64_t s = highest_ + 1; s <= seq; ++s) Clear(s);
    }
    highest_ = seq;
    Set(seq);
    return true;
  }
  if (highest_ - seq >= kSize) return false;
  if (Test(seq)) return false;
  Set(seq);
  return true;
}

}  // namespace lockstep::agent
