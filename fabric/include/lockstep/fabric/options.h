// FabricOptions: the numbers the fabric decision core runs on, with their
// defaults and why. The FabricPolicy's typed settings become these through
// FabricOptionsFromConfig (lockstep/fabric/config.h, target
// lockstep_fabric_config). Plain values; thread-compatible.
//
// Probing is symmetric (ack_window.h): each end sends one packet per path per
// interval, carrying its own probe and the acknowledgement of the other
// end's. An ack therefore leaves with the peer's next packet, up to one
// jittered gap I(1+j) after our probe arrived, and the reply timeout covers
// that gap plus a slack for the network and late wake-ups:
//     T = I(1+j) + kAckSlack = 11 + 3 = 14 ms  (AckTimeout)
// Detection at the defaults (I = 10 ms, j = 10%, N = 3 misses): after a
// fault the next probe leaves within I(1+j), the N-th lost one (N-1) gaps
// later, and it is declared missed T after it left, so
//     worst case = N * I * (1 + j) + T = 33 + 14 = 47 ms  (<= 50 ms goal)
// (WorstCaseDetection computes it). A single lost probe only makes a path
// suspect. Load: 100 packets/s per path each way; at 4 hosts x 2 rails (3
// peers per rail) 300 packets/s per rail each way, 74 B each at the IP
// layer (46 B payload), 112 B on the wire: 178 / 269 kbit/s per rail each
// way, 0.089% / 0.13% of a 200 Mbit/s link (docs/benchmarks.md, "Probe cost").
#pragma once

#include <chrono>
#include <string>

#include "lockstep/common/clock.h"
#include "lockstep/common/result.h"

namespace lockstep::fabric {

using namespace std::chrono_literals;

struct FabricOptions {
  // Probing (per path).
  Nanos probe_interval = 10ms;  // mean gap between two probes of one path
  double jitter = 0.1;          // each gap is uniform in interval * [1 - jitter, 1 + jitter]
  Nanos reply_timeout = 14ms;   // a probe without an ack this long after it left is a miss (AckTimeout)
  int miss_threshold = 3;       // consecutive misses that make a path down

  // Re-admission: a recovered path carries traffic again after a clean period
  // (no miss) of readmit_after * 2^(level-1), capped at max_hold_down, where
  // level counts recent downs; each hold_down_decay spent up lowers it by one.
  Nanos readmit_after = 2s;
  Nanos max_hold_down = 300s;
  Nanos hold_down_decay = 60s;

  // Flaps (transitions into down from a path that delivered) over a sliding
  // window; an alert when a rail has more than flap_alert_per_hour.
  Nanos flap_window = 1h;
  int flap_alert_per_hour = 8;

  // Loss and one-way delay percentiles (metrics, failover ranking) over this window.
  Nanos stats_window = 10s;

  // False: health and metrics only, no route actions (every pin is removed).
  bool failover_enabled = true;

  // True: every peer is always pinned, to its home path while all its paths
  // are healthy (HomePath: a stable spread of peers over the paths), so the
  // route in force when a path dies is already the agent's own, with its
  // settings (on Linux rto_min 10ms: TCP retransmits on the kernel's 200 ms
  // minimum otherwise, whatever the new route says; measured by
  // e2e/bench/tcp-resume). False: healthy peers are left to the fabric's
  // static ECMP and only failed-over peers are pinned.
  bool pin_home = true;

  // This host's name. A home path hashes the pair {self, peer}, so both ends
  // of a pair choose the same rail and a pair's traffic shares its fate.
  std::string self;
};

// InvalidArgument naming the field and the allowed range, e.g.
// "fabric options: miss_threshold must be between 1 and 100 (got 0)".
Status Validate(const FabricOptions& options);

// Added to the longest probe gap for the reply timeout (see above).
inline constexpr Nanos kAckSlack = 3ms;

// The reply timeout symmetric probing needs at this interval and jitter:
// the longest gap I(1+j) (the peer's ack rides on its next probe) plus kAckSlack.
Nanos AckTimeout(Nanos probe_interval, double jitter);

// The longest time from a path failing to it being declared down (see above).
Nanos WorstCaseDetection(const FabricOptions& options);

// The clean period a recovering path with this hold-down level needs
// (level >= 1 after its first down): readmit_after * 2^(level-1), at most
// max(readmit_after, max_hold_down).
Nanos RequiredCleanPeriod(const FabricOptions& options, int level);

}  // namespace lockstep::fabric
