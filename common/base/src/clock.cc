#include "lockstep/common/clock.h"

namespace lockstep {

SystemClock& SystemClock::Instance() {
  static SystemClock clock;
  return clock;
}

}  // namespace lockstep
