#include "lockstep/audit/network_checks.h"

#include <cstdio>
#include <map>
#include <set>
#include <string_view>

namespace lockstep::audit {
namespace {

std::string Rail(int r) { return "rail" + std::to_string(r); }

std::string Us(double us) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.0f us", us);
  return buf;
}

Check Missing(std::string id, std::string subject, std::string why) {
  return Check{.id = std::move(id),
               .subject = std::move(subject),
               .observed = "not present",
               .verdict = Verdict::kNotPresent,
               .message = std::move(why)};
}

void Connectivity(const NetworkFacts& n, std::vector<Check>& out) {
  if (n.paths_unavailable) {
    out.push_back(Missing("backend.connectivity", "", *n.paths_unavailable));
    out.push_back(Missing("backend.latency_p50", "", *n.paths_unavailable));
    return;
  }
  if (n.paths.empty()) {
    out.push_back(Missing("backend.connectivity", "", "the fabric agent watches no peer"));
    return;
  }
  for (const PathObservation& p : n.paths) {
    const std::string s = Rail(p.rail) + "/" + p.peer;
    if (p.state == "unknown") {
      out.push_back(Missing("backend.connectivity", s, "not probed to a verdict yet"));
    } else {
      const bool ok = p.state == "up" || p.state == "suspect";
      out.push_back(Check{
          .id = "backend.connectivity",
          .subject = s,
          .observed = p.state,
          .expected = "up",
          .verdict = ok ? Verdict::kPass : Verdict::kFail,
          .message =
              ok ? "" : "no probe answered out of " + Rail(p.rail) + " to " + p.peer + " (path " + p.state + ")"});
    }
    const std::string how = p.one_way ? "" : " (half round trip: clock sync not locked)";
    for (const auto& [id, v] :
         {std::pair{"backend.latency_p50", p.p50_us}, std::pair{"backend.latency_p99", p.p99_us}}) {
      if (!v) {
        out.push_back(Missing(id, s, "no delay samples on this path"));
        continue;
      }
      if (std::string_view(id) == "backend.latency_p99" && p.delay_samples && *p.delay_samples < kMinP99Samples) {
        // Reported, not judged: the tail of a few dozen samples is scheduling noise.
        out.push_back(Check{.id = id,
                            .subject = s,
                            .observed = Us(*v) + how,
                            .number = *v,
                            .message = "not judged: " + std::to_string(*p.delay_samples) + " samples (a p99 needs " +
                                       std::to_string(kMinP99Samples) + ")"});
        continue;
      }
      out.push_back(Check{.id = id,
                          .subject = s,
                          .observed = Us(*v) + how,
                          .number = *v,
                          .pool = PoolRule::kSlow,
                          .column = Rail(p.rail)});
    }
  }
}

// "a > {b,c} > d": each TTL's answers over the traces' source ports.
std::string RouteText(const std::vector<const RouteTrace*>& traces) {
  size_t depth = 0;
  for (const RouteTrace* t : traces) depth = std::max(depth, t->hops.size());
  std::string out;
  for (size_t i = 0; i < depth; ++i) {
    std::set<std::string> at;
    for (const RouteTrace* t : traces) at.insert(i < t->hops.size() ? t->hops[i] : "-");
    if (!out.empty()) out += " > ";
    if (at.size() == 1) {
      out += *at.begin();
      continue;
    }
    out += "{";
    bool first = true;
    for (const std::string& a : at) {
      out += (first ? "" : ",") + a;
      first = false;
    }
    out += "}";
  }
  return out;
}

void Topology(const NetworkFacts& n, std::vector<Check>& out) {
  if (n.traces_unavailable) {
    out.push_back(Missing("backend.rail_leaf", "", *n.traces_unavailable));
    return;
  }
  if (n.traces.empty()) {
    out.push_back(Missing("backend.rail_leaf", "", "no route traced"));
    return;
  }
  // rail -> "peer@target" -> traces (one per source port)
  std::map<int, std::map<std::string, std::vector<const RouteTrace*>>> by_rail;
  for (const RouteTrace& t : n.traces) by_rail[t.rail][t.peer + "@" + t.target].push_back(&t);
  std::map<std::string, std::set<int>> rails_on_leaf;
  for (const auto& [rail, peers] : by_rail) {
    std::set<std::string> leaves, spines;
    bool cross_leaf = false;
    for (const auto& [to, traces] : peers) {
      int reached = 0;
      std::set<std::vector<std::string>> paths;
      for (const RouteTrace* t : traces) {
        if (!t->hops.empty() && t->hops[0] != "*" && t->hops[0] != t->target) leaves.insert(t->hops[0]);
        if (t->reached) {
          ++reached;
          paths.insert(t->hops);
        }
        // Leaf, spine, leaf, target: the second hop is a spine.
        if (t->reached && t->hops.size() >= 4) {
          cross_leaf = true;
          if (t->hops[1] != "*") spines.insert(t->hops[1]);
        }
      }
      const std::string s = Rail(rail) + "/" + to;
      if (reached == 0) {
        out.push_back(
            Missing("backend.route", s,
                    "no trace reached " + traces.front()->target + " (ICMP filtered or rate-limited on the way)"));
      } else {
        out.push_back(Check{.id = "backend.route",
                            .subject = s,
                            .observed = RouteText(traces),
                            .number = static_cast<double>(paths.size())});
      }
    }
    if (leaves.empty()) {
      out.push_back(Missing("backend.rail_leaf", Rail(rail), "the first hop sent no ICMP time exceeded"));
    }
    for (const std::string& leaf : leaves) {
      rails_on_leaf[leaf].insert(rail);
      // Compared per leaf: the rail most of the leaf's ports serve is expected
      // (rail-optimized: a leaf serves one rail), so a rail cabled to another
      // rail's leaf fails, whatever rack the leaf is in.
      out.push_back(Check{.id = "backend.rail_leaf",
                          .subject = Rail(rail) + "@" + leaf,
                          .observed = Rail(rail),
                          .pool = PoolRule::kMajority,
                          .column = leaf});
    }
    if (cross_leaf) {
      out.push_back(Check{.id = "backend.spines",
                          .subject = Rail(rail),
                          .observed = std::to_string(spines.size()),
                          .number = static_cast<double>(spines.size()),
                          .pool = PoolRule::kMajority});
    } else {
      out.push_back(Missing("backend.spines", Rail(rail), "no traced route crosses a spine"));
    }
  }
  std::string shared;
  for (const auto& [leaf, rails] : rails_on_leaf) {
    if (rails.size() < 2) continue;
    shared += (shared.empty() ? "" : "; ") + leaf + ":";
    for (int r : rails) shared += " " + Rail(r);
  }
  out.push_back(Check{.id = "backend.rail_leaves",
                      .observed = shared.empty() ? "distinct" : "shared (" + shared + ")",
                      .pool = PoolRule::kMajority});
}

}  // namespace

void NetworkChecks(const NodeFacts& facts, std::vector<Check>& out) {
  if (!facts.network) {
    out.push_back(Missing("backend.connectivity", "", "the fabric's path state was not collected"));
    out.push_back(Missing("backend.rail_leaf", "", "routes were not traced"));
    return;
  }
  Connectivity(*facts.network, out);
  Topology(*facts.network, out);
}

}  // namespace lockstep::audit
