#include "lockstep/audit/pool.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

namespace lockstep::audit {
namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string PoolName(const std::string& pool) { return pool.empty() ? "pool" : "pool " + pool; }

// The checks of one pool with the same key, across its nodes.
struct Column {
  std::vector<Check*> checks;
  std::vector<const void*> owners;  // the node of each check
};

void JudgeMajority(const std::string& pool, Column& col) {
  std::map<std::string, int> counts;
  for (const Check* c : col.checks) ++counts[c->observed];
  const int n = static_cast<int>(col.checks.size());
  auto best =
      std::max_element(counts.begin(), counts.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  if (best == counts.end() || best->second * 2 <= n) return;  // no strict majority: nothing to compare with
  for (Check* c : col.checks) {
    if (c->verdict == Verdict::kFail || c->observed == best->first) continue;
    c->expected = best->first;
    c->verdict = Verdict::kFail;
    c->message = PoolName(pool) + ": " + std::to_string(best->second) + " of " + std::to_string(n) + " nodes have " +
                 best->first + ", this node " + c->observed;
  }
}

void JudgeMedian(const std::string& pool, Column& col, const PoolOptions& o, bool upper_only) {
  std::vector<double> v;
  for (const Check* c : col.checks) {
    if (c->number) v.push_back(*c->number);
  }
  if (v.empty()) return;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  const double median = v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
  const double allowed = std::abs(median) * o.median_tolerance + (upper_only ? o.upper_slack : 0);
  for (Check* c : col.checks) {
    if (!c->number || c->verdict == Verdict::kFail) continue;
    const double d = *c->number - median;
    if (upper_only ? d <= allowed : std::abs(d) <= allowed) continue;
    c->expected = (upper_only ? "<= " : "") + Num(median + (upper_only ? allowed : 0)) +
                  (upper_only ? "" : " +- " + Num(allowed));
    c->verdict = Verdict::kFail;
    c->message = PoolName(pool) + ": median " + Num(median) + " over " + std::to_string(v.size()) +
                 " nodes, this node " + c->observed;
  }
}

// The lower median (of an even count, the lower middle value).
double LowerMedian(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

// Delays: the pool's typical delay is the lower median over the nodes of
// each node's lower median in the column. One bad link touches half the
// pairs of a small fleet (its node's, and every pair towards it), so a plain
// median over pairs would sit between fast and slow; over nodes, only the
// bad link's node is off.
void JudgeSlow(const std::string& pool, Column& col, const PoolOptions& o) {
  std::map<const void*, std::vector<double>> by_node;
  for (size_t i = 0; i < col.checks.size(); ++i) {
    if (col.checks[i]->number) by_node[col.owners[i]].push_back(*col.checks[i]->number);
  }
  if (by_node.empty()) return;
  std::vector<double> medians;
  for (const auto& [node, v] : by_node) medians.push_back(LowerMedian(v));
  const double typical = LowerMedian(medians);
  const double allowed = typical * o.latency_factor + o.latency_slack;
  for (Check* c : col.checks) {
    if (!c->number || c->verdict == Verdict::kFail || *c->number <= allowed) continue;
    c->expected = "<= " + Num(allowed);
    c->verdict = Verdict::kFail;
    c->message = PoolName(pool) + ": typical " + Num(typical) + " over " + std::to_string(by_node.size()) +
                 " nodes (x" + Num(o.latency_factor) + " + " + Num(o.latency_slack) + "), this pair " + c->observed;
  }
}

// "rail0/h1" -> {"rail0", "h1"}; nullopt when the subject is not a pair.
std::optional<std::pair<std::string, std::string>> Pair(const Check& c) {
  if (c.subject.rfind("rail", 0) != 0) return std::nullopt;
  const size_t slash = c.subject.find('/');
  if (slash == std::string::npos || slash + 1 >= c.subject.size()) return std::nullopt;
  return std::make_pair(c.subject.substr(0, slash), c.subject.substr(slash + 1));
}

bool IsPairCheck(const Check& c) {
  return (c.id == "backend.connectivity" || c.id == "backend.latency_p50" || c.id == "backend.latency_p99") &&
         Pair(c).has_value();
}

// A node's link on a rail is bad when most of its pairs on that rail fail
// one of the pair checks (dead or lossy: connectivity; slow: the delays).
void AttributePairs(std::vector<NodeVerdict>& out) {
  // (id, node, rail) -> {failed, total}
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<int, int>> own;
  for (const NodeVerdict& v : out) {
    for (const Check& c : v.checks) {
      if (!IsPairCheck(c) || c.verdict == Verdict::kNotPresent) continue;
      auto& n = own[{c.id, v.node, Pair(c)->first}];
      n.first += c.verdict == Verdict::kFail;
      ++n.second;
    }
  }
  std::set<std::pair<std::string, std::string>> bad;  // (node, rail)
  for (const auto& [key, n] : own) {
    if (n.first * 2 > n.second) bad.insert({std::get<1>(key), std::get<2>(key)});
  }
  for (NodeVerdict& v : out) {
    for (Check& c : v.checks) {
      if (!IsPairCheck(c) || c.verdict != Verdict::kFail) continue;
      const auto [rail, peer] = *Pair(c);
      if (bad.count({v.node, rail}) || !bad.count({peer, rail})) continue;
      c.verdict = Verdict::kPass;
      c.message = "attributed to " + peer + "'s " + rail + " (most of its pairs on " + rail + " fail): " + c.message;
    }
  }
}

const std::string* Expectation(const PoolOptions& o, const std::string& pool, const Check& c) {
  for (const std::string& p : {pool, std::string()}) {
    auto it = o.expectations.find(p);
    if (it == o.expectations.end()) continue;
    for (const std::string& key : {CheckKey(c), c.id}) {
      auto e = it->second.find(key);
      if (e != it->second.end()) return &e->second;
    }
  }
  return nullptr;
}

void ApplyExpectations(const PoolOptions& o, const std::string& pool, std::vector<Check>& checks) {
  for (Check& c : checks) {
    const std::string* want = Expectation(o, pool, c);
    if (!want) continue;
    c.expected = *want;
    if (c.observed == *want) {
      c.verdict = Verdict::kPass;
      c.message.clear();
    } else {
      c.verdict = Verdict::kFail;
      c.message =
          "expected " + *want + " (the audit's expectation for " + PoolName(pool) + "), this node " + c.observed;
    }
  }
}

NodeVerdict Finish(NodeVerdict v) {
  v.counts = CountVerdicts(v.checks);
  v.verdict = OverallVerdict(v.checks);
  return v;
}

}  // namespace

std::vector<NodeVerdict> JudgePools(const std::vector<NodeChecks>& nodes, const PoolOptions& options) {
  std::vector<NodeVerdict> out;
  out.reserve(nodes.size());
  for (const NodeChecks& n : nodes) out.push_back({n.node, n.pool, n.checks, {}, Verdict::kPass});
  // pool -> key -> column
  std::map<std::string, std::map<std::string, Column>> columns;
  for (NodeVerdict& v : out) {
    for (Check& c : v.checks) {
      if (c.pool == PoolRule::kNone) continue;
      Column& col = columns[v.pool][c.column.empty() ? CheckKey(c) : c.id + "{" + c.column + "}"];
      col.checks.push_back(&c);
      col.owners.push_back(&v);
    }
  }
  for (auto& [pool, keys] : columns) {
    for (auto& [key, col] : keys) {
      switch (col.checks.front()->pool) {
        case PoolRule::kMajority:
          JudgeMajority(pool, col);
          break;
        case PoolRule::kMedian:
          JudgeMedian(pool, col, options, false);
          break;
        case PoolRule::kUpper:
          JudgeMedian(pool, col, options, true);
          break;
        case PoolRule::kSlow:
          JudgeSlow(pool, col, options);
          break;
        case PoolRule::kNone:
          break;
      }
    }
  }
  AttributePairs(out);
  for (NodeVerdict& v : out) {
    ApplyExpectations(options, v.pool, v.checks);
    v = Finish(std::move(v));
  }
  return out;
}

NodeVerdict JudgeAlone(const NodeChecks& node, const PoolOptions& options) {
  NodeVerdict v{node.node, node.pool, node.checks, {}, Verdict::kPass};
  ApplyExpectations(options, v.pool, v.checks);
  return Finish(std::move(v));
}

FleetSummary Summarize(const std::vector<NodeVerdict>& verdicts, size_t max_nodes) {
  FleetSummary s;
  std::map<std::string, CheckSummary> by_id;
  for (const NodeVerdict& v : verdicts) {
    ++s.nodes;
    if (v.verdict == Verdict::kFail) {
      ++s.failed;
    } else {
      ++s.passed;
    }
    std::vector<std::string> ids;
    for (const Check& c : v.checks) {
      if (c.verdict == Verdict::kFail && std::find(ids.begin(), ids.end(), c.id) == ids.end()) ids.push_back(c.id);
    }
    for (const std::string& id : ids) {
      CheckSummary& cs = by_id[id];
      cs.id = id;
      ++cs.nodes_failed;
      if (cs.nodes.size() < max_nodes) cs.nodes.push_back(v.node);
    }
  }
  for (auto& [id, cs] : by_id) s.failing_checks.push_back(std::move(cs));
  return s;
}

}  // namespace lockstep::audit
