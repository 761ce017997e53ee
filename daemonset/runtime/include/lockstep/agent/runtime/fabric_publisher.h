// FabricPublisher: what the fabric service tells the world. The per-path,
// per-peer and per-rail gauges and counters, the `fabric status` snapshot
// (GET /fabric), the view FabricHealth reports, the flap alerts raised, and
// the log lines of path state changes, rail flaps and prober stalls.
//
// The service thread feeds it (OnDecisions, NoteStall, CountAnswered) and
// calls Publish when Due: every publish_every (the percentiles are a visible
// part of the prober's user time) and at most kChangePublishGap after a
// change of path state or pin. The snapshot, the health view and the alerts
// are read from any thread.
//
// Latency SLAs (fabric::LatencySla) are judged at each publish from the
// paths' one-way delay p99 over the stats window: the SLA in force and the
// breach flag per path are gauges, the summary goes into the health view
// (LatencyWithinSLA) and new breaches due an Event into TakeLatencyBreaches.
//
// Thread-safety: StatusJson(), Health(), TakeFlapAlerts() and
// TakeLatencyBreaches() from any thread; the rest from the service thread.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/agent/fabric_setup.h"
#include "lockstep/agent/runtime/congestion_publisher.h"
#include "lockstep/common/clock.h"
#include "lockstep/common/metrics.h"
#include "lockstep/fabric/latency_sla.h"
#include "lockstep/fabric/options.h"
#include "lockstep/fabric/path_monitor.h"

namespace lockstep::agent {

// One local rail as FabricHealth reports it (from fabric::RailView).
struct FabricRailHealth {
  std::string name{};  // the rail's interface
  int paths = 0;       // one per probed peer
  int usable = 0;      // up or suspect
  int failed = 0;      // down or recovering
  bool down = false;   // every path with a verdict failed (and at least one did)
  int flaps_last_hour = 0;
  bool alerting = false;                    // flaps above flapAlertPerHour
  std::vector<std::string> failed_peers{};  // peers whose path on this rail is down or recovering, by name
  bool operator==(const FabricRailHealth&) const = default;
};

// The latency SLAs as of the last publish (fabric::LatencySummary, with
// names): what the LatencyWithinSLA condition says.
struct FabricLatencyView {
  fabric::LatencyVerdict verdict = fabric::LatencyVerdict::kNoSla;
  int with_sla = 0, judged = 0, breaches = 0;  // paths
  int min_samples = 0;                         // the policy's minSamples
  // kBreach: the path furthest above its SLA.
  std::string worst_peer{}, worst_rail{};
  Nanos worst_p99{}, worst_sla{};
  bool operator==(const FabricLatencyView&) const = default;
};

// A path's new latency SLA breach that asks for an Event (at most one per
// path per 10 minutes; fabric::LatencySla).
struct FabricLatencyBreach {
  std::string peer{}, rail{};
  Nanos owd_p99{}, sla{};
  int samples = 0;
};

// What FabricHealth needs from the service: one entry per configured rail,
// in rail order, as of the last publish (publish_every, 1 s, and at once
// after a change).
struct FabricHealthView {
  std::vector<FabricRailHealth> rails{};
  int flaps_last_hour = 0;              // all rails
  std::optional<WallTime> last_flap{};  // wall clock when the latest flap was seen
  int peers = 0;                        // peers probed
  // The prober's stalls (fabric::StallView): persistent while one was
  // judged (beyond the excuse budget) within the last stall window.
  bool prober_stalled = false;
  uint64_t stalls = 0, stalls_judged = 0;  // since the start
  FabricLatencyView latency{};
  FabricCongestionView congestion{};
  bool operator==(const FabricHealthView&) const = default;
};

// A rail's flap alert as raised (once per raise; see fabric::FlapAlert).
struct FabricFlapAlert {
  std::string rail{};
  int flaps_last_hour = 0;
  int threshold = 0;  // flapAlertPerHour
};

class FabricPublisher {
 public:
  // The references (the service's options) must outlive the publisher.
  // `latency`: the paths' latency SLAs (none by default).
  FabricPublisher(const std::string& self_name, const FabricSetup& setup, const fabric::FabricOptions& fabric,
                  std::chrono::nanoseconds publish_every, const Clock& clock, metrics::Registry& registry,
                  fabric::LatencySlaOptions latency = {}, fabric::FabricMap topology = {},
                  fabric::CongestionOptions congestion = {});

  // The monitor's decisions: transitions logged, flaps and alerts counted
  // (and logged); any decision is published soon (Due).
  void OnDecisions(const fabric::Decisions& d);
  // A late wake-up: counted; a warning at most every 10 s.
  void NoteStall(MonoTime now, std::chrono::nanoseconds stalled, fabric::Stall verdict);
  // An ack-only packet sent to `peer` (into the counter at the next Publish).
  void CountAnswered(const std::string& peer) { ++answered_pending_[peer]; }
  // Removes the series of the peers not in `names` (at 10k nodes, peers
  // come and go; their gauges would otherwise report the last state
  // forever). Returns the peers removed.
  std::vector<std::string> ForgetPeersExcept(const std::vector<std::string>& names);

  // The number of paths watched: a change is published at most every
  // ChangeGap() (1 ms a path, at least 20 ms): a publish costs about as
  // much per path as a probe tick, and in a flap storm every path changes.
  void SetPathCount(size_t paths) { paths_ = paths; }
  std::chrono::nanoseconds ChangeGap() const;

  // Periodically, or soon after a change.
  bool Due(MonoTime now) const;
  // Gauges, counters, the status snapshot and the health view as of `now`;
  // the latency SLAs are judged here (`clock_locked`: this node's clock
  // sync is LOCKED, so its one-way delays are meaningful).
  void Publish(MonoTime now, const fabric::PathMonitor& monitor, bool clock_locked = false);

  nlohmann::json StatusJson() const;
  FabricHealthView Health() const;
  std::vector<FabricFlapAlert> TakeFlapAlerts();
  // The latency SLA breaches that ask for an Event since the last call.
  std::vector<FabricLatencyBreach> TakeLatencyBreaches();
  // Links flagged congested and paths rising alone since the last call
  // (congestion_publisher.h).
  std::vector<CongestionFinding> TakeCongestionFindings() { return congestion_.TakeFindings(); }

 private:
  std::string RailName(int rail) const;  // the interface, or the number for a rail we do not have

  const std::string& self_name_;
  const FabricSetup& setup_;
  const fabric::FabricOptions& fabric_;
  std::chrono::nanoseconds publish_every_;
  const Clock& clock_;

  MonoTime next_publish_{};
  MonoTime last_publish_{};
  bool changed_ = false;            // a transition or route action since the last publish
  size_t paths_ = 0;                // SetPathCount
  MonoTime transition_log_window_{};  // transition lines: at most kTransitionLogs per second
  int transition_logs_ = 0;           // lines (not into down) written in the current second
  uint64_t transitions_unlogged_ = 0;  // transitions beyond that, summed up in one line
  bool stalled_published_ = false;  // prober_stalled as of the last publish
  struct Published {
    fabric::PathStats totals;
    std::optional<fabric::PathState> state;  // the state gauges are set only when it changes
  };
  std::map<fabric::PathKey, Published> published_totals_;
  std::map<std::string, uint64_t> answered_pending_;  // ack-only packets sent since the last Publish, per peer
  std::optional<WallTime> last_flap_wall_;
  MonoTime next_stall_log_{};               // stall warnings: at most one per kStallLogEvery
  std::chrono::nanoseconds worst_stall_{};  // the longest since the last warning
  int stalls_unlogged_ = 0;
  int judged_unlogged_ = 0;

  mutable std::mutex mu_;
  nlohmann::json status_;                              // GUARDED_BY(mu_)
  FabricHealthView health_;                            // GUARDED_BY(mu_)
  std::vector<FabricFlapAlert> alerts_raised_;         // GUARDED_BY(mu_)
  std::vector<FabricLatencyBreach> latency_breaches_;  // GUARDED_BY(mu_)
  fabric::LatencySla latency_;

  metrics::Family& state_;
  metrics::Family& loss_;
  metrics::Family& owd_;
  metrics::Family& rtt_;
  metrics::Family& sent_;
  metrics::Family& replies_;
  metrics::Family& misses_;
  metrics::Family& peer_rail_;
  metrics::Family& flaps_window_;
  metrics::Family& flaps_total_;
  metrics::Family& alerts_;
  metrics::Family& rail_down_;
  metrics::Family& answered_;
  metrics::Family& stalls_;
  metrics::Family& stalls_judged_;
  metrics::Family& prober_stalled_;
  metrics::Family& owd_sla_;
  metrics::Family& latency_breach_;
  CongestionPublisher congestion_;  // congestion localisation over this node's paths, at each publish
};

}  // namespace lockstep::agent
