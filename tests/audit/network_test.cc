// The back-end network checks (connectivity, latency, topology) and their
// judgement against the pool: a fleet of four nodes x two rails with a
// rail-optimized fabric (rail r on leaf r, two spines), one fault seeded at a
// time on one node; the node it belongs to is flagged and no other.
#include <functional>

#include <catch2/catch.hpp>

#include "good_node.h"
#include "lockstep/audit/audit_json.h"
#include "lockstep/audit/checks.h"
#include "lockstep/audit/pool.h"

namespace lockstep::audit {
namespace {

constexpr int kNodes = 4;

std::string Name(int n) { return "n" + std::to_string(n); }
std::string Leaf(int r) { return "10.0.100." + std::to_string(r + 1); }
std::string HostAddr(int n) { return "10.0.200." + std::to_string(n + 1); }
std::string RailIp(int n, int r) { return "10.0." + std::to_string(r) + "." + std::to_string(n + 1); }

// Node `self`'s network as the agent and the tracer would report it on a
// healthy fabric: every path up at ~30 us, traces to each peer's host address
// (one leaf hop) and to its other rail's address (leaf, spine by port, leaf).
NetworkFacts GoodNetwork(int self) {
  NetworkFacts n;
  for (int p = 0; p < kNodes; ++p) {
    if (p == self) continue;
    for (int r = 0; r < 2; ++r) {
      n.paths.push_back({.rail = r, .peer = Name(p), .state = "up", .p50_us = 30.0 + p + r, .p99_us = 70.0 + 3 * p});
      for (int port = 0; port < 4; ++port) {
        n.traces.push_back({.rail = r,
                            .peer = Name(p),
                            .target = HostAddr(p),
                            .source_port = 40000 + port,
                            .hops = {Leaf(r), HostAddr(p)},
                            .reached = true});
        n.traces.push_back(
            {.rail = r,
             .peer = Name(p),
             .target = RailIp(p, 1 - r),
             .source_port = 40000 + port,
             .hops = {Leaf(r), "10.0.128." + std::to_string(2 * (port % 2)), Leaf(1 - r), RailIp(p, 1 - r)},
             .reached = true});
      }
    }
  }
  return n;
}

using Fault = std::function<void(int node, NetworkFacts&)>;

std::vector<NodeVerdict> Judge(const Fault& fault) {
  std::vector<NodeChecks> nodes;
  for (int i = 0; i < kNodes; ++i) {
    NodeFacts f = testing::GoodNode();
    f.network = GoodNetwork(i);
    if (fault) fault(i, *f.network);
    nodes.push_back({Name(i), "h100", RunChecks(f)});
  }
  return JudgePools(nodes);
}

const Check* Find(const NodeVerdict& v, const std::string& id, const std::string& subject) {
  for (const Check& c : v.checks) {
    if (c.id == id && c.subject == subject) return &c;
  }
  return nullptr;
}

std::vector<std::string> Failed(const NodeVerdict& v) {
  std::vector<std::string> out;
  for (const Check& c : v.checks) {
    if (c.verdict == Verdict::kFail) out.push_back(CheckKey(c));
  }
  return out;
}

// Every path touching `node`'s rail `rail`, from either end.
void OnLink(int node, int rail, int self, NetworkFacts& n, const std::function<void(PathObservation&)>& f) {
  for (PathObservation& p : n.paths) {
    if (p.rail == rail && (self == node || p.peer == Name(node))) f(p);
  }
}

TEST_CASE("a healthy fabric passes every network check on every node", "[audit][network]") {
  for (const NodeVerdict& v : Judge(nullptr)) {
    INFO(v.node);
    CHECK(Failed(v).empty());
    CHECK(v.verdict == Verdict::kPass);
    const int peer = v.node == "n0" ? 1 : 0;
    const Check* route = Find(v, "backend.route", "rail0/" + Name(peer) + "@" + HostAddr(peer));
    REQUIRE(route);
    CHECK(route->verdict == Verdict::kPass);
    CHECK(route->observed == "10.0.100.1 > " + HostAddr(peer));
    CHECK(route->number == 1);
    const Check* across = Find(v, "backend.route", "rail0/" + Name(peer) + "@" + RailIp(peer, 1));
    REQUIRE(across);
    CHECK(across->observed == "10.0.100.1 > {10.0.128.0,10.0.128.2} > 10.0.100.2 > " + RailIp(peer, 1));
    CHECK(across->number == 2);
    const Check* spines = Find(v, "backend.spines", "rail1");
    REQUIRE(spines);
    CHECK(spines->observed == "2");
    const Check* leaf = Find(v, "backend.rail_leaf", "rail1@10.0.100.2");
    REQUIRE(leaf);
    CHECK(leaf->verdict == Verdict::kPass);
    CHECK(Find(v, "backend.rail_leaves", "")->observed == "distinct");
  }
}

TEST_CASE("a p99 over fewer than 100 samples is reported, not judged, over enough it is", "[audit][network]") {
  // One pair's tail: a single probe the scheduler held up 3 ms.
  auto spike = [](int samples) {
    return Judge([samples](int self, NetworkFacts& n) {
      for (PathObservation& p : n.paths) p.delay_samples = 640;
      if (self != 2) return;
      for (PathObservation& p : n.paths) {
        if (p.rail == 0 && p.peer == "n0") {
          p.p99_us = 3000;
          p.delay_samples = samples;
        }
      }
    });
  };
  for (const NodeVerdict& v : spike(40)) {
    INFO(v.node);
    CHECK(Failed(v).empty());
    if (v.node != "n2") continue;
    const Check* c = Find(v, "backend.latency_p99", "rail0/n0");
    REQUIRE(c);
    CHECK(c->observed == "3000 us");
    CHECK(c->message == "not judged: 40 samples (a p99 needs 100)");
  }
  for (const NodeVerdict& v : spike(kMinP99Samples)) {
    INFO(v.node);
    CHECK(Failed(v) ==
          (v.node == "n2" ? std::vector<std::string>{"backend.latency_p99[rail0/n0]"} : std::vector<std::string>{}));
  }
}

TEST_CASE("a slow link flags its node, not the nodes whose paths cross it", "[audit][network]") {
  auto out = Judge([](int self, NetworkFacts& n) {
    OnLink(1, 0, self, n, [](PathObservation& p) {
      p.p50_us = 2500;
      p.p99_us = 9000;
    });
  });
  for (const NodeVerdict& v : out) {
    INFO(v.node);
    if (v.node == "n1") {
      CHECK(v.verdict == Verdict::kFail);
      const Check* c = Find(v, "backend.latency_p50", "rail0/n0");
      REQUIRE(c);
      CHECK(c->verdict == Verdict::kFail);
      CHECK(c->observed == "2500 us");
      CHECK(c->expected.rfind("<= ", 0) == 0);
      CHECK(Find(v, "backend.latency_p99", "rail0/n3")->verdict == Verdict::kFail);
      CHECK(Find(v, "backend.latency_p50", "rail1/n0")->verdict == Verdict::kPass);
    } else {
      CHECK(Failed(v).empty());
      const Check* c = Find(v, "backend.latency_p50", "rail0/n1");
      REQUIRE(c);
      CHECK(c->verdict == Verdict::kPass);
      CHECK(c->message.find("attributed to n1's rail0") != std::string::npos);
    }
  }
}

TEST_CASE("a path lost over a slow link is the slow link's node's fault", "[audit][network]") {
  auto out = Judge([](int self, NetworkFacts& n) {
    OnLink(1, 0, self, n, [](PathObservation& p) {
      p.p50_us = 2500;
      p.p99_us = 9000;
    });
    if (self == 0) {
      for (PathObservation& p : n.paths) {
        if (p.rail == 0 && p.peer == "n1") p.state = "down";
      }
    }
  });
  for (const NodeVerdict& v : out) {
    INFO(v.node);
    CHECK((v.verdict == Verdict::kFail) == (v.node == "n1"));
  }
  const Check* c = Find(out[0], "backend.connectivity", "rail0/n1");
  REQUIRE(c);
  CHECK(c->verdict == Verdict::kPass);
  CHECK(c->observed == "down");
}

TEST_CASE("a dead link flags its node's connectivity, not its peers'", "[audit][network]") {
  auto out = Judge([](int self, NetworkFacts& n) {
    OnLink(2, 1, self, n, [](PathObservation& p) {
      p.state = "down";
      p.p50_us.reset();
      p.p99_us.reset();
    });
  });
  for (const NodeVerdict& v : out) {
    INFO(v.node);
    if (v.node == "n2") {
      CHECK(Failed(v) == std::vector<std::string>{"backend.connectivity[rail1/n0]", "backend.connectivity[rail1/n1]",
                                                  "backend.connectivity[rail1/n3]"});
    } else {
      CHECK(Failed(v).empty());
      CHECK(Find(v, "backend.connectivity", "rail1/n2")->observed == "down");
      CHECK(Find(v, "backend.latency_p50", "rail1/n2")->verdict == Verdict::kNotPresent);
    }
  }
}

TEST_CASE("a rail cabled to another rail's leaf is flagged, the rest of the fleet is not", "[audit][network]") {
  auto out = Judge([](int self, NetworkFacts& n) {
    if (self != 3) return;
    for (RouteTrace& t : n.traces) {
      if (t.rail == 0) t.hops[0] = Leaf(1);
    }
  });
  for (const NodeVerdict& v : out) {
    INFO(v.node);
    if (v.node == "n3") {
      CHECK(Failed(v) == std::vector<std::string>{"backend.rail_leaf[rail0@10.0.100.2]", "backend.rail_leaves"});
      const Check* c = Find(v, "backend.rail_leaf", "rail0@10.0.100.2");
      CHECK(c->expected == "rail1");
      CHECK(Find(v, "backend.rail_leaves", "")->observed == "shared (10.0.100.2: rail0 rail1)");
    } else {
      CHECK(Failed(v).empty());
    }
  }
}

TEST_CASE("a rail that sees fewer spines than its pool is flagged", "[audit][network]") {
  auto out = Judge([](int self, NetworkFacts& n) {
    if (self != 0) return;
    for (RouteTrace& t : n.traces) {
      if (t.rail == 1 && t.hops.size() == 4) t.hops[1] = "10.0.128.0";
    }
  });
  for (const NodeVerdict& v : out) {
    INFO(v.node);
    if (v.node == "n0") {
      CHECK(Failed(v) == std::vector<std::string>{"backend.spines[rail1]"});
      CHECK(Find(v, "backend.spines", "rail1")->observed == "1");
    } else {
      CHECK(Failed(v).empty());
    }
  }
}

TEST_CASE("between two nodes a slow pair flags both ends: nothing to attribute it with", "[audit][network]") {
  std::vector<NodeChecks> nodes;
  for (int i = 0; i < 2; ++i) {
    NodeFacts f = testing::GoodNode();
    NetworkFacts n;
    n.paths.push_back({.rail = 0, .peer = Name(1 - i), .state = "up", .p50_us = 30, .p99_us = 60});
    n.paths.push_back({.rail = 1, .peer = Name(1 - i), .state = "up", .p50_us = 3000, .p99_us = 9000});
    n.paths.push_back({.rail = 0, .peer = "n9", .state = "up", .p50_us = 31, .p99_us = 62});
    n.paths.push_back({.rail = 1, .peer = "n9", .state = "up", .p50_us = 29, .p99_us = 58});
    f.network = n;
    nodes.push_back({Name(i), "", RunChecks(f)});
  }
  for (const NodeVerdict& v : JudgePools(nodes)) {
    INFO(v.node);
    CHECK(Find(v, "backend.latency_p50", "rail1/" + Name(v.node == "n0" ? 1 : 0))->verdict == Verdict::kFail);
  }
}

TEST_CASE("no path state and no traces are not present, never a failure", "[audit][network]") {
  NodeFacts f = testing::GoodNode();
  for (const Check& c : RunChecks(f)) CHECK(c.verdict != Verdict::kFail);
  NetworkFacts n;
  n.paths_unavailable = "no fabric agent answered";
  n.traces_unavailable = "tracing not asked for";
  n.paths.push_back({.rail = 0, .peer = "n1", .state = "unknown"});
  f.network = n;
  auto checks = RunChecks(f);
  for (const Check& c : checks) CHECK(c.verdict != Verdict::kFail);
  n.paths_unavailable.reset();
  f.network = n;
  bool unknown = false;
  for (const Check& c : RunChecks(f)) {
    if (c.id == "backend.connectivity" && c.subject == "rail0/n1") {
      unknown = true;
      CHECK(c.verdict == Verdict::kNotPresent);
    }
  }
  CHECK(unknown);
}

TEST_CASE("half round trips are labelled and a trace that never arrives is not present", "[audit][network]") {
  NodeFacts f = testing::GoodNode();
  NetworkFacts n;
  n.paths.push_back({.rail = 0, .peer = "n1", .state = "up", .p50_us = 40, .p99_us = 80, .one_way = false});
  n.traces.push_back({.rail = 0, .peer = "n1", .target = "10.0.200.2", .hops = {"10.0.100.1", "*", "*"}});
  f.network = n;
  bool latency = false, route = false;
  for (const Check& c : RunChecks(f)) {
    if (c.id == "backend.latency_p50") {
      latency = true;
      CHECK(c.observed == "40 us (half round trip: clock sync not locked)");
      CHECK(c.column == "rail0");
      CHECK(c.pool == PoolRule::kSlow);
    }
    if (c.id == "backend.route") {
      route = true;
      CHECK(c.verdict == Verdict::kNotPresent);
    }
  }
  CHECK(latency);
  CHECK(route);
}

TEST_CASE("the column and the slow rule survive the NodeAudit's JSON", "[audit][network]") {
  Check c{.id = "backend.latency_p99",
          .subject = "rail0/n1",
          .observed = "70 us",
          .number = 70,
          .pool = PoolRule::kSlow,
          .column = "rail0"};
  auto j = ChecksToJson({c});
  CHECK(j[0]["column"] == "rail0");
  CHECK(j[0]["rule"] == "slow");
  auto back = ChecksFromJson(j);
  REQUIRE(back.ok());
  CHECK(back->front() == c);
}

}  // namespace
}  // namespace lockstep::audit
