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
//     T = I(1+j) + kAckSlack = 15.4 + 3 = 18.4 ms  (AckTimeout, I = 14 ms)
// A miss that leaves a path short of down confirms at once: the path gets an
// urgent probe, which the peer acknowledges as soon as it arrives (its
// prober wakes for it: the agent sends urgent probes to the peer's urgent
// port), and which is a miss urgent_timeout (U) after it left. So after a
// fault the next probe leaves within I(1+j), it is declared missed T after
// it left, and N-1 urgent probes follow, one after each miss:
//     worst case = I(1+j) + T + (N-1) * U = 15.4 + 18.4 + 2 * 5 = 43.8 ms
// (WorstCaseDetection; <= 50 ms goal). A path still needs N probes lost in a
// row to go down, and a single lost probe only makes it suspect. Without the
// confirmation N probes a whole gap apart would take N * I(1+j) + T (64 ms
// at 14 ms; the 10 ms interval this replaced needed 47 ms for 100 packets/s
// per path).
// Load: 71 packets/s per path each way (urgent probes only after a miss);
// at 4 hosts x 2 rails (3 peers per rail) 214 packets/s per rail each way,
// 82 B each at the IP layer (54 B payload, version 3 with the epoch), 120 B
// on the wire: 140 / 205 kbit/s per rail each way, 0.070% / 0.103% of a 200
// Mbit/s link (docs/benchmarks.md, "Probe cost", measured at 46 B).
#pragma once

#include <chrono>
#include <string>

#include "lockstep/common/clock.h"
#include "lockstep/common/result.h"

namespace lockstep::fabric {

using namespace std::chrono_literals;

// Added to the longest probe gap for the reply timeout (see above).
inline constexpr Nanos kAckSlack = 3ms;

// A node ticks fast (every probe_interval) for this long after it read a
// peer's fast probe (one without the slow flag): the peer judges its fast
// probes with reply_timeout, which assumes our next tick is one fast gap
// away. The sender judges the first IdleAckTimeout of a run of fast probes
// on a path (and of the run after a miss) as slow ones (PathMonitor), so a
// peer still on idle ticks when the run starts has time to read one.
inline constexpr Nanos kFastTickHold = 2s;

// An urgent probe's ack leaves as soon as the peer's prober has read the
// probe: the round trip plus two wake-ups, which 5 ms covers with room on a
// busy host (a round trip in a data centre is tens of microseconds).
inline constexpr Nanos kUrgentAckTimeout = 5ms;

struct FabricOptions {
  // Probing (per path).
  Nanos probe_interval = 14ms;  // mean gap between two probes of one path
  double jitter = 0.1;          // each gap is uniform in interval * [1 - jitter, 1 + jitter]
  Nanos reply_timeout = 18400us;  // a probe without an ack this long after it left is a miss (AckTimeout)
  Nanos urgent_timeout = kUrgentAckTimeout;  // the same for an urgent probe, acked on arrival
  int miss_threshold = 3;       // consecutive misses that make a path down

  // Tiered probing (probe_tiers.h): only the paths that carry traffic, have
  // no verdict yet or lost a probe recently are probed every interval; the
  // others ("idle") in a rotation, each at least every idle_interval
  // (WorstCaseDetectionIdle: 623 ms at the defaults, idle_tick below). A path that lost a
  // probe or saw a late ack while it delivered stays fast for promote_for.
  // idle_interval 0: every path at every tick (no tiers).
  Nanos idle_interval = 500ms;
  Nanos promote_for = 10s;
  // Idle ticks (probe_schedule.h): while no path of this node is fast and no
  // peer's fast probe arrived for kFastTickHold, the prober ticks every
  // idle_tick (jittered) instead of every probe_interval, and sends the
  // rotation's probes in those few batches. Idle probes carry the wire's
  // slow flag (fabric_probe.h): the peer may ack them at its own idle tick,
  // so they are judged with IdleAckTimeout (113 ms at the defaults), and
  // an idle path is declared down within WorstCaseDetectionIdle (623 ms).
  // Fast paths keep WorstCaseDetection (43.8 ms). 0: the prober ticks
  // every probe_interval whatever its tiers (the design before 2026-11-29
  // afternoon; idle probes then judged with reply_timeout, 528.4 ms).
  Nanos idle_tick = 100ms;

  // Re-admission: a recovered path carries traffic again after a clean period
  // (no miss) of readmit_after * 2^(level-1), capped at max_hold_down, where
  // level counts recent downs (up to HoldDownLevelCap); each hold_down_decay
  // spent up lowers it by one. docs/architecture.md "Re-admission and
  // hold-down" gives the policy's reasons.
  Nanos readmit_after = 2s;
  Nanos max_hold_down = 300s;
  Nanos hold_down_decay = 60s;

  // Flaps (transitions into down from a path that delivered) over a sliding
  // window; an alert when a rail has more than flap_alert_per_hour.
  Nanos flap_window = 1h;
  int flap_alert_per_hour = 8;

  // Loss and one-way delay percentiles (metrics, failover ranking) over this window.
  Nanos stats_window = 10s;

  // Stalls (PathMonitor::ExcuseStall): a wake-up later than urgent_timeout
  // restarts the probe timeouts that fell in it, at most stall_excuses times
  // per sliding stall_window; beyond that budget the stall is judged (its
  // timeouts are misses), so a prober that is always late still detects a
  // failure (WorstCaseDetectionStalled), and the agent reports the
  // persistent stalls (FabricHealth condition ProberStalled, an alert).
  // One stall of a whole machine now and then (a paused VM, a busy kernel)
  // stays excused. 0: never excuse.
  int stall_excuses = 5;
  Nanos stall_window = 10s;

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

// The reply timeout symmetric probing needs at this interval and jitter:
// the longest gap I(1+j) (the peer's ack rides on its next probe) plus kAckSlack.
Nanos AckTimeout(Nanos probe_interval, double jitter);

// The longest time from a path failing to it being declared down (see above).
Nanos WorstCaseDetection(const FabricOptions& options);

// The reply timeout of a probe the peer may ack at its idle tick (an idle
// path's, or the first of a fast run: PathMonitor): reply_timeout plus the
// idle tick's longest gap beyond the fast one,
//   reply_timeout + (idle_tick - probe_interval)(1 + j) = 18.4 + 86 x 1.1 = 113 ms
// at the defaults; reply_timeout when idle ticks are off (idle_tick 0 or no tiers).
Nanos IdleAckTimeout(const FabricOptions& options);
// Whether the prober may tick every idle_tick (tiers on and idle_tick > 0).
bool IdleTicks(const FabricOptions& options);

// The same for an idle path (probe_tiers.h): its next probe leaves within
// idle_interval instead of one gap, and is judged with IdleAckTimeout:
//   idle_interval + T_idle + (N-1) * U = 500 + 113 + 2 * 5 = 623 ms at the defaults
// (528.4 ms with idle_tick 0). WorstCaseDetection when tiering is off.
Nanos WorstCaseDetectionIdle(const FabricOptions& options);

// The same for a prober that wakes up to `lateness` late every time (every
// wake-up a stall when lateness > urgent_timeout): each send and verdict
// comes up to `lateness` late (N + 1 of them on the way to down), and at most
// stall_excuses excused stalls (the budget per stall_window, which must be
// longer than this) each put a verdict off by up to lateness + reply_timeout:
//   WorstCaseDetection + (N + 1) * lateness + stall_excuses * (lateness + reply_timeout)
// 43.8 + 4 * 8 + 5 * 26.4 = 207.8 ms at the defaults and 8 ms late.
Nanos WorstCaseDetectionStalled(const FabricOptions& options, Nanos lateness);

// The clean period a recovering path with this hold-down level needs
// (level >= 1 after its first down): readmit_after * 2^(level-1), at most
// max(readmit_after, max_hold_down).
Nanos RequiredCleanPeriod(const FabricOptions& options, int level);

// The lowest hold-down level whose clean period is the cap (9 at the defaults:
// 2 s * 2^8 >= 300 s). A path's level stops rising there, so any burst of flaps,
// ten or a thousand, is forgiven after at most this many hold_down_decay periods
// up (9 minutes at the defaults).
int HoldDownLevelCap(const FabricOptions& options);

}  // namespace lockstep::fabric
