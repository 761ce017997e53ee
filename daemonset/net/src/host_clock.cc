#include "lockstep/agent/net/host_clock.h"

#include <sys/timex.h>
#include <time.h>

#include <cerrno>
#include <cstring>

namespace lockstep::agent {

int64_t AdjtimexHostClock::RealtimeNs() const {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

Status AdjtimexHostClock::Apply(const HostClockAdjustment& adj, int64_t error_bound_ns) {
  if (adj.kind == HostClockAdjustment::Kind::kNone) return Status::Ok();
  timex tx{};
  tx.modes = ADJ_NANO | ADJ_ESTERROR | ADJ_MAXERROR;
  tx.esterror = static_cast<long>(error_bound_ns / 1000);
  tx.maxerror = static_cast<long>(error_bound_ns / 1000);
  if (adj.kind == HostClockAdjustment::Kind::kStep) {
    tx.modes |= ADJ_SETOFFSET;
    int64_t c = adj.correction_ns;
    tx.time.tv_sec = c / 1'000'000'000;
    tx.time.tv_usec = c % 1'000'000'000;  // nanoseconds with ADJ_NANO
    if (tx.time.tv_usec < 0) {
      tx.time.tv_sec -= 1;
      tx.time.tv_usec += 1'000'000'000;
    }
  } else {
    tx.modes |= ADJ_OFFSET | ADJ_STATUS;
    tx.status = STA_PLL | STA_NANO;
    tx.offset = static_cast<long>(adj.correction_ns);
  }
  if (::clock_adjtime(CLOCK_REALTIME, &tx) < 0) {
    if (errno == EPERM) {
      return Error{ErrorCode::kUnauthorized,
                   "cannot discipline the host clock: permission denied (clock_adjtime needs CAP_SYS_TIME; "
                   "grant it or set clockSync.disciplineHostClock: false)"};
    }
    return Unavailable(std::string("clock_adjtime: ") + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace lockstep::agent
