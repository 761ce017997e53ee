// NtpBaseline: an NTP-style offset estimate from the same probes, kept only to
// compare against (never used to discipline a clock).
//
// Probes are matched into request/response exchanges: a forward probe
// (t1 = tx on a, t2 = rx on b) and the next reverse probe b sent after it
// received that one (t3 = tx on b, t4 = rx on a), within max_hold_ns. As NTP
// does, offset = ((t2 - t1) + (t3 - t4)) / 2 assumes the two one-way delays are
// equal, delay = (t4 - t1) - (t3 - t2), and of the last `last_n` (8) exchanges
// the one with the minimum delay wins. Any asymmetric queueing that the minimum
// does not filter out biases the offset by half the asymmetry.
//
// Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <span>

#include "lockstep/common/result.h"

namespace lockstep::clocksync {

struct NtpProbe {
  int64_t tx_ns = 0;  // sender's clock
  int64_t rx_ns = 0;  // receiver's clock
};

struct NtpOptions {
  uint32_t last_n = 8;
  int64_t max_hold_ns = 1'000'000;  // a response must leave b within 1 ms
};

struct NtpEstimate {
  double offset_ns = 0;  // c_b - c_a
  int64_t at_ns = 0;     // a's clock, midpoint of the winning exchange
  double delay_ns = 0;   // its round-trip delay
  uint32_t exchanges = 0;
};

// forward: a->b probes; reverse: b->a probes. Errors: NotFound if no exchange
// can be formed.
Result<NtpEstimate> NtpBaseline(std::span<const NtpProbe> forward,
                                std::span<const NtpProbe> reverse,
                                const NtpOptions& options = {});

}  // namespace lockstep::clocksync
