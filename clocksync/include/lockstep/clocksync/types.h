// Probe records: the only input the clock-sync library takes from the network.
//
// Units: every timestamp is an int64 count of nanoseconds on the clock that took
// it (no epoch is assumed; CLOCK_MONOTONIC_RAW or CLOCK_REALTIME both work as long
// as one node always uses the same clock). Fitted quantities are doubles in
// nanoseconds; drifts are dimensionless (ns per ns; 1e-6 == 1 ppm).
//
// Plain value types; thread-compatible.
#pragma once

#include <cstdint>

namespace lockstep::clocksync {

// A node's index in the probe graph. Ids should be small and dense (the agent
// uses its node index): solutions are vectors indexed by NodeId. Must be below
// kMaxNodeId. Ids are never remapped, so a node that disappears simply has no
// estimate in later windows.
using NodeId = uint32_t;
inline constexpr NodeId kMaxNodeId = (1u << 31) - 1;

// The Huygens window: call Estimator::Solve this often (and size probing so
// each edge gets ~10 coded pairs per direction per window).
inline constexpr int64_t kDefaultWindowNs = 2'000'000'000;

// One timestamped probe, as the transport sees it.
//
// A coded probe pair is two probes sent back to back (a few microseconds apart)
// from src to dst with the same pair_seq and index_in_pair 0 then 1. The sender
// stamps tx_local_ns on its own clock at send, the receiver stamps rx_local_ns
// on its own clock at receive. The intended spacing is not needed: the purity
// filter compares the receive spacing with the *stamped* send spacing.
struct ProbeSample {
  NodeId src = 0;
  NodeId dst = 0;
  int64_t tx_local_ns = 0;  // src's clock at send
  int64_t rx_local_ns = 0;  // dst's clock at receive
  uint32_t pair_seq = 0;    // unique per (src, dst) within a window
  uint8_t index_in_pair = 0;  // 0 or 1
};

// Both probes of one coded pair, already matched (see Estimator::AddSample for
// the matching of individual ProbeSamples).
struct ProbePair {
  NodeId src = 0;
  NodeId dst = 0;
  int64_t tx0_ns = 0, rx0_ns = 0;  // first probe: src clock at send, dst clock at receive
  int64_t tx1_ns = 0, rx1_ns = 0;  // second probe
};

}  // namespace lockstep::clocksync
