// Check: one audited value of one node, with its verdict. The same value type
// carries a node's raw observation (the local verdict of absolute rules, and
// how the value is to be compared with its pool) and, after JudgePools, the
// final result. Thread-compatible values.
//
// Check ids are stable ("pcie.link_width", "backend.mtu"): tools, alerts and
// per-pool expectations name them. `subject` says which part of the node
// ("gpu0", "rail1", "nic:eth1", "mlx5_0/1"; "" for the node as a whole).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace lockstep::audit {

enum class Verdict {
  kPass,
  kFail,
  kNotPresent,  // the hardware or software is absent on this node: not a failure
};

// "Pass", "Fail", "NotPresent".
const char* VerdictName(Verdict v);
std::optional<Verdict> ParseVerdict(const std::string& name);

// How a value is compared with the same check of the other nodes in its pool.
enum class PoolRule {
  kNone,      // the local verdict alone
  kMajority,  // the pool's majority value (a strict majority) is expected
  kMedian,    // `number` within the tolerance of the pool's median
  kUpper,     // `number` not above the pool's median by more than the tolerance (counters)
  kSlow,      // `number` (a delay) not above the pool's typical delay x latency_factor + latency_slack (pool.h)
};

const char* PoolRuleName(PoolRule r);
std::optional<PoolRule> ParsePoolRule(const std::string& name);

struct Check {
  std::string id;                  // stable check id
  std::string subject{};           // which part of the node; "" for the node
  std::string observed{};          // the value as read, as text
  std::optional<double> number{};  // the numeric value (kMedian, kUpper)
  std::string expected{};          // what passes; "" when nothing specific
  Verdict verdict = Verdict::kPass;
  std::string message{};  // why it failed or is not present
  PoolRule pool = PoolRule::kNone;
  // The pool column this check is compared in, when not its subject: checks
  // of the same id and column are compared across subjects (every pair of a
  // rail: "rail0"; every rail on one leaf: the leaf's address). "" = subject.
  std::string column{};
  bool operator==(const Check&) const = default;
};

// "pcie.link_width[gpu2]" (or the id alone without a subject).
std::string CheckKey(const Check& c);

// The category of a check id: its part before the first '.' ("pcie").
std::string Category(const std::string& id);

struct Counts {
  int passed = 0, failed = 0, not_present = 0;
  bool operator==(const Counts&) const = default;
};
Counts CountVerdicts(const std::vector<Check>& checks);

// Fail when any check failed, else Pass (NotPresent checks do not fail a node).
Verdict OverallVerdict(const std::vector<Check>& checks);

}  // namespace lockstep::audit
