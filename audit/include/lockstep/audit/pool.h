// JudgePools: every node's checks judged against its pool (the nodes of the
// same kind: the same value of the pool label), then against the optional
// per-pool expectations. Pure. Why the pool: absolute thresholds are the
// main source of false alarms (an idle GPU's link speed, a fleet's MTU), so
// a value is expected to be what most of its peers have (kMajority) or near
// their median (kMedian, kUpper).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lockstep/audit/check.h"

namespace lockstep::audit {

struct NodeChecks {
  std::string node;
  std::string pool;  // nodes with the same pool are compared; "" is a pool too
  std::vector<Check> checks;
};

struct PoolOptions {
  // kMedian, kUpper: how far from the pool's median a value may be, as a
  // fraction of the median (0.1 = 10%).
  double median_tolerance = 0.10;
  // kUpper: an absolute allowance above that (counters whose median is 0).
  double upper_slack = 10;
  // kSlow (one-way delays in us): a delay fails above the pool's typical delay x
  // latency_factor + latency_slack. Delays are noisy and skewed (a loaded
  // host adds its scheduling delay), so the band is wide: a slow link adds
  // milliseconds where a healthy pair has tens of microseconds.
  double latency_factor = 3;
  double latency_slack = 200;
  // Expectations by check id ("backend.mtu") or id and subject
  // ("backend.mtu[rail0]"): the observed value must equal it, whatever the pool
  // says. Keyed by pool; the key "" applies to every pool.
  std::map<std::string, std::map<std::string, std::string>> expectations{};
};

struct NodeVerdict {
  std::string node;
  std::string pool;
  std::vector<Check> checks;  // judged
  Counts counts{};
  Verdict verdict = Verdict::kPass;
};

// One NodeVerdict per input node, in input order.
//
// Pair checks (subject "rail<r>/<peer>": backend.connectivity and the
// latency checks) are then attributed: a failed pair towards a peer whose
// own pairs on that rail mostly fail, from a node whose pairs on that rail
// mostly pass, is the peer's fault (its link) and passes here with a message
// naming the peer; so one slow or dead link flags the node it belongs to,
// not every node that talks to it.
std::vector<NodeVerdict> JudgePools(const std::vector<NodeChecks>& nodes, const PoolOptions& options = {});

// Judged against nothing but the expectations (one node: lockstep-agent audit).
NodeVerdict JudgeAlone(const NodeChecks& node, const PoolOptions& options = {});

// The fleet's summary: nodes, how many passed and failed, and per failing
// check id the number of nodes and the first `max_nodes` of their names.
struct CheckSummary {
  std::string id;
  int nodes_failed = 0;
  std::vector<std::string> nodes{};
};
struct FleetSummary {
  int nodes = 0, passed = 0, failed = 0;
  std::vector<CheckSummary> failing_checks{};  // by id
};
FleetSummary Summarize(const std::vector<NodeVerdict>& verdicts, size_t max_nodes = 10);

}  // namespace lockstep::audit
