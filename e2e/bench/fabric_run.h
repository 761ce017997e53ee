// The fabric benchmark's runner: one arm of one scenario on a fresh netlab
// lab (4 hosts x 2 rails, rate-limited host links) with the real workloads
// (the DDP loop on every host, a TCP bulk stream h0 -> h1, both on host
// addresses), faults on the link the stream really uses, and the score.
// Single-threaded; throws Fatal / Interrupted (clocksync_proc.h) and always
// tears its lab down.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fabric_score.h"
#include "netlab/topology.h"

namespace lockstep::bench::fabric {

struct Tools {
  std::string netlab, bulk_stream, python, ddp_loop;
};

struct Options {
  int hosts = 4;
  std::string link_rate = "200mbit";  // every host link, both directions (netlab up --link-rate)
  int hidden = 128, batch = 32;       // the DDP loop's MLP (~82k parameters: ~60 ms steps here)
  int queue_ms = 5;                   // tbf queue of every host link (netlab shape --latency)
  bool napi_threads = true;           // the lab forwards in napi threads (netlab up --napi-threads)
  double hang_s = 1800;               // the loop's collective timeout (gloo's default); "hung" if reached
  double fault_s = 20;                // how long a long fault lasts (> hang_s: a stalled baseline fails)
  double flap_down_s = 7, flap_up_s = 0.5;  // one flap of the flap scenario's 10 (see Scenarios)
  double warmup_s = 4;                // steady workloads before the first fault
  int paths_per_rail = 4;             // the agents' fabric.pathsPerRail (api::kFabricPathsPerRail)
  std::string workdir;                // logs of every run
};

// A running lab as arms see it.
struct LabInfo {
  std::string name;
  netlab::Topology topo;
  std::string log_prefix;  // WORKDIR/SCENARIO-ARM: where the run's logs go
  std::string faulted_link;  // set before the first fault
  // The probe paths ("peer/railN" of a host's agent) whose probes or acks
  // cross the faulted link, by the lab's FIB before the fault; only for arms
  // with a report (the agent arm).
  std::vector<PathRef> affected;
  std::vector<double> faults;  // every fault (each down of a flap train), wall seconds
};

// One way of handling faults. The workloads and faults are the same for every
// arm; an arm only adds what runs beside them (the agent arm: one agent per
// host namespace, started before the workloads and stopped after them).
struct Arm {
  std::string name;
  bool implemented = true;
  std::string note;  // why it did not run
  std::function<void(const LabInfo&)> start, stop;
  // Measurements of the arm itself over the run (the agent arm: detection
  // time, CPU, memory, probe bandwidth), taken after the observation window
  // (fault and end are wall-clock seconds) and before stop.
  std::function<nlohmann::ordered_json(const LabInfo&, double fault, double end)> report;
};

// Which link a fault hits, found from the stream's path (netlab path, i.e. the
// FIB, for its real 5-tuple): the sender's rail link or the receiver's.
// kReceiverLink: the receiver's link its traffic back to the sender leaves by;
// kReceiverInLink: the receiver's link the stream arrives on (the far side of
// the fabric for the sender); kFabricLink: the leaf-spine link the stream
// crosses first.
enum class Role { kSenderLink, kReceiverLink, kReceiverInLink, kFabricLink };

struct Action {
  double at = 0;  // seconds after the first action
  Role role = Role::kSenderLink;
  std::string what;  // "down", "silent", "up", or "flap": a whole train (`netlab link ... flap`)
  std::string one_way = {};          // silent: "up" or "down" drops that direction only (netlab --one-way)
  int count = 0;                     // flap: down/up cycles
  double period_s = 0, down_s = 0;   // flap: from one down to the next; from a down to its up
};

struct Scenario {
  std::string name, what;
  std::vector<Action> actions;
  double observe_s = 0;      // after the first action
  bool check_reuse = false;  // is the repaired link carrying traffic again?
  int leaves = 2;            // the lab's leaves (4: some host pairs share no leaf, their traffic crosses a spine)
  int stream_to = 1;         // the stream's receiver (host index); h0 sends
};

std::vector<Scenario> Scenarios(const Options& o);

struct ArmResult {
  std::string arm;
  bool ran = false;
  std::string note;
  std::string link;              // the faulted link
  std::string stream_path;       // links of the stream's 5-tuple (FIB)
  std::string busiest_link;      // the sender's host link with the most bytes (counters)
  std::optional<bool> reused;    // check_reuse: the repaired link carried the stream again
  double reused_mbytes = 0;
  std::string stream_path_at_end;  // check_reuse: the stream's path (FIB) at the end of observation
  bool path_checked = true;     // FIB and counters agreed on the stream's sender link
  double fault_lag_ms = 0;       // `netlab link ... down` asked -> netlab's `ip` command started
  double stream_rto_ms = 0;      // the stream socket's RTO just before the fault (ss), 0: unknown
  double fault_spread_ms = 0;    // how long that `ip` command took (the fault is somewhere in it)
  // A flap action: the timing the train achieved (netlab's "achieved": down
  // and up periods, cycle lengths, lateness, span), null without one.
  nlohmann::ordered_json flap_timing;
  Score score;
  nlohmann::ordered_json arm_report;  // Arm::report's measurements (null without)
};

ArmResult RunArm(const Tools& tools, const Options& o, const Scenario& sc, const Arm& arm);

// The agents' probe paths ({host, "peer/railN/pathI"}) whose probes (path
// I's source port: fabric.port for path 0, fabric.port + I after it, to
// fabric.port, host address to host address out of the rail) or whose acks
// (the peer's probes of the same index back out of the interface they
// arrived on) cross `link`, by `netlab path` for their 5-tuples in the lab
// as it is now.
std::vector<PathRef> AffectedPaths(const Tools& t, const LabInfo& info, const std::string& link,
                                   int paths_per_rail = 1);

// The static_tuned arm's hosts: ignore_routes_with_linkdown=1 (a rail that
// lost carrier leaves the ECMP hash) and rto_min 10ms on the ECMP route (as
// docs/benchmarks.md's tcp-resume section recommends).
void TuneStaticHosts(const LabInfo& info);

}  // namespace lockstep::bench::fabric
