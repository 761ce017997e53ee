#include <functional>

#include <catch2/catch.hpp>

#include "good_node.h"
#include "lockstep/audit/checks.h"
#include "lockstep/audit/pool.h"

namespace lockstep::audit {
namespace {

using testing::GoodNode;

struct Fault {
  const char* name;
  const char* check;    // the id that must fail on the bad node
  const char* subject;  // and its subject
  std::function<void(NodeFacts&)> apply;
};

std::vector<NodeChecks> Fleet(int n, int bad, const std::function<void(NodeFacts&)>& fault, std::string pool = "h100") {
  std::vector<NodeChecks> nodes;
  for (int i = 0; i < n; ++i) {
    NodeFacts f = GoodNode();
    if (i == bad) fault(f);
    nodes.push_back({"node" + std::to_string(i), pool, RunChecks(f)});
  }
  return nodes;
}

const Check* Find(const NodeVerdict& v, const std::string& id, const std::string& subject) {
  for (const Check& c : v.checks) {
    if (c.id == id && c.subject == subject) return &c;
  }
  return nullptr;
}

TEST_CASE("one bad node among good ones is flagged, per fault kind, and no good node is", "[audit]") {
  const std::vector<Fault> faults = {
      {"downtrained GPU link", "pcie.link_width", "gpu1", [](NodeFacts& f) { f.pcie[1].width = 8; }},
      {"downtrained NIC link", "pcie.link_speed", "nic:rail1", [](NodeFacts& f) { f.pcie[3].speed_gts = 8; }},
      {"GPU link slower than its pool's", "pcie.link_speed", "gpu0", [](NodeFacts& f) { f.pcie[0].speed_gts = 2.5; }},
      {"pending row remap", "memory.row_remap_pending", "gpu0", [](NodeFacts& f) { f.gpus[0].remap_pending = true; }},
      {"failed row remap", "memory.row_remap_failed", "gpu1", [](NodeFacts& f) { f.gpus[1].remap_failed = true; }},
      {"uncorrected ECC", "memory.ecc_uncorrected_volatile", "gpu1",
       [](NodeFacts& f) { f.gpus[1].ecc_uncorrected_volatile = 1; }},
      {"ECC off", "memory.ecc_mode", "gpu0", [](NodeFacts& f) { f.gpus[0].ecc_enabled = false; }},
      {"many retired pages", "memory.retired_pages", "gpu0", [](NodeFacts& f) { f.gpus[0].retired_pages = 64; }},
      {"corrected AER storm", "pcie.aer_correctable", "gpu1", [](NodeFacts& f) { f.pcie[1].aer_correctable = 5000; }},
      {"wrong rail MTU", "backend.mtu", "rail1", [](NodeFacts& f) { f.rails[1].mtu = 1500; }},
      {"wrong front-end MTU", "frontend.mtu", "eth0", [](NodeFacts& f) { f.frontend->mtu = 9000; }},
      {"rail in another subnet", "backend.subnet", "rail0", [](NodeFacts& f) { f.rails[0].ipv4 = {"10.9.0.7/24"}; }},
      {"rail down", "backend.up", "rail0", [](NodeFacts& f) { f.rails[0].operstate = "down"; }},
      {"missing module", "software.module", "nvidia_peermem",
       [](NodeFacts& f) { f.modules["nvidia_peermem"] = false; }},
      {"other driver", "software.nvidia_driver", "", [](NodeFacts& f) { f.nvidia_driver = "535.104.05"; }},
      {"other kernel", "software.kernel", "", [](NodeFacts& f) { f.kernel = "5.15.0-91-generic"; }},
      {"missing GPU", "node.gpu_count", "", [](NodeFacts& f) { f.gpus.pop_back(); }},
      {"RDMA port at half rate", "backend.rdma_rate", "rail1", [](NodeFacts& f) { f.rdma[1].rate_gbps = 100; }},
      {"RDMA port down", "backend.rdma_state", "rail0", [](NodeFacts& f) { f.rdma[0].state = "DOWN"; }},
      {"InfiniBand among RoCE", "backend.rdma_link_layer", "rail0",
       [](NodeFacts& f) { f.rdma[0].link_layer = "InfiniBand"; }},
      {"other NIC firmware", "software.nic_firmware", "rail1", [](NodeFacts& f) { f.rdma[1].firmware = "28.36.1010"; }},
      {"GPU on another NUMA node", "node.numa", "gpu1", [](NodeFacts& f) { f.pcie[1].numa_node = 0; }},
      {"no rail NIC on a GPU's NUMA node", "node.gpu_nic_numa", "gpu1", [](NodeFacts& f) { f.pcie[3].numa_node = 0; }},
      {"GPU fell off the bus (Xid 79)", "memory.xid", "gpu1",
       [](NodeFacts& f) {
         f.xids->push_back({"0000:11:00", 79});
       }},
      {"no nameserver", "frontend.dns", "", [](NodeFacts& f) { f.nameservers->clear(); }},
      {"ECC turns off at the next reset", "memory.ecc_mode_pending", "gpu1",
       [](NodeFacts& f) { f.gpus[1].ecc_pending = false; }},
      {"persistence mode off", "node.persistence_mode", "gpu0",
       [](NodeFacts& f) { f.gpus[0].persistence_mode = false; }},
      {"lower maximum SM clock", "node.sm_clock_max", "gpu1", [](NodeFacts& f) { f.gpus[1].sm_clock_max_mhz = 1755; }},
      {"HW slowdown", "node.clocks_throttle", "gpu1",
       [](NodeFacts& f) {
         f.gpus[1].clocks_event_reasons = 0x8;
         f.gpus[1].sm_clock_mhz = 1005;
       }},
      {"HW thermal slowdown", "node.clocks_throttle", "gpu0",
       [](NodeFacts& f) { f.gpus[0].clocks_event_reasons = 0x40; }},
      {"ACS redirect on the GPU-NIC path", "pcie.acs", "gpu1",
       [](NodeFacts& f) { f.pcie[1].upstream[2].acs_control = 0x1d; }},
      {"GPU under no switch with a NIC", "pcie.acs", "gpu1",
       [](NodeFacts& f) { f.pcie[1].upstream = testing::SwitchPath(7, 0); }},
      {"API server name does not resolve", "frontend.api_dns", "",
       [](NodeFacts& f) {
         f.api_server->addresses.clear();
         f.api_server->error = "Name or service not known";
       }},
  };
  for (const Fault& fault : faults) {
    SECTION(fault.name) {
      auto verdicts = JudgePools(Fleet(6, 4, fault.apply));
      REQUIRE(verdicts.size() == 6);
      for (const NodeVerdict& v : verdicts) {
        INFO(v.node);
        if (v.node == "node4") {
          REQUIRE(v.verdict == Verdict::kFail);
          const Check* c = Find(v, fault.check, fault.subject);
          REQUIRE(c != nullptr);
          REQUIRE(c->verdict == Verdict::kFail);
          REQUIRE_FALSE(c->message.empty());
        } else {
          for (const Check& c : v.checks) {
            INFO(CheckKey(c) << ": " << c.message);
            CHECK(c.verdict != Verdict::kFail);
          }
          REQUIRE(v.verdict == Verdict::kPass);
        }
      }
      FleetSummary s = Summarize(verdicts);
      REQUIRE(s.nodes == 6);
      REQUIRE(s.failed == 1);
      REQUIRE(s.passed == 5);
      REQUIRE_FALSE(s.failing_checks.empty());
      bool named = false;
      for (const CheckSummary& cs : s.failing_checks) {
        named = named || (cs.id == fault.check && cs.nodes == std::vector<std::string>{"node4"});
      }
      REQUIRE(named);
    }
  }
}

TEST_CASE("the pool's majority value is what a deviating node is told to have", "[audit]") {
  auto verdicts = JudgePools(Fleet(5, 2, [](NodeFacts& f) { f.rails[1].mtu = 1500; }));
  const Check* c = Find(verdicts[2], "backend.mtu", "rail1");
  REQUIRE(c->observed == "1500");
  REQUIRE(c->expected == "9000");
  REQUIRE(c->message == "pool h100: 4 of 5 nodes have 9000, this node 1500");
}

TEST_CASE("pools are judged apart: another kind of node is not compared with this one", "[audit]") {
  auto a = Fleet(
      3, -1, [](NodeFacts&) {}, "h100");
  std::vector<NodeChecks> b;
  for (int i = 0; i < 3; ++i) {
    NodeFacts f = GoodNode();
    f.rails[0].mtu = 4200;  // every a100 node: its pool's value
    b.push_back({"a" + std::to_string(i), "a100", RunChecks(f)});
  }
  a.insert(a.end(), b.begin(), b.end());
  for (const NodeVerdict& v : JudgePools(a)) {
    INFO(v.node << " " << v.pool);
    REQUIRE(v.verdict == Verdict::kPass);
  }
}

TEST_CASE("without a strict majority no value is taken as the pool's", "[audit]") {
  auto nodes = Fleet(2, 1, [](NodeFacts& f) { f.rails[1].mtu = 1500; });
  for (const NodeVerdict& v : JudgePools(nodes)) REQUIRE(v.verdict == Verdict::kPass);
}

TEST_CASE("an expectation overrides the pool: a whole pool with the wrong MTU fails", "[audit]") {
  PoolOptions o;
  o.expectations["h100"]["backend.mtu"] = "4200";
  o.expectations[""]["backend.mtu[rail1]"] = "9000";  // a subject-specific one for every pool
  auto verdicts = JudgePools(Fleet(3, -1, [](NodeFacts&) {}), o);
  for (const NodeVerdict& v : verdicts) {
    REQUIRE(v.verdict == Verdict::kFail);
    const Check* c = Find(v, "backend.mtu", "rail0");
    REQUIRE(c->verdict == Verdict::kFail);
    REQUIRE(c->expected == "4200");
    REQUIRE(Find(v, "backend.mtu", "rail1")->verdict == Verdict::kFail);  // the pool's key is looked up first
  }
  o.expectations["h100"].erase("backend.mtu");
  for (const NodeVerdict& v : JudgePools(Fleet(3, -1, [](NodeFacts&) {}), o)) { REQUIRE(v.verdict == Verdict::kPass); }
}

TEST_CASE("kMedian fails a value outside the tolerance around the pool's median", "[audit]") {
  std::vector<NodeChecks> nodes;
  for (double v : {100.0, 102.0, 98.0, 101.0, 70.0}) {
    nodes.push_back(
        {"n" + std::to_string(nodes.size()),
         "p",
         {Check{.id = "node.clock_mhz", .observed = std::to_string(v), .number = v, .pool = PoolRule::kMedian}}});
  }
  auto verdicts = JudgePools(nodes, {.median_tolerance = 0.05});
  for (size_t i = 0; i < 4; ++i) REQUIRE(verdicts[i].verdict == Verdict::kPass);
  REQUIRE(verdicts[4].verdict == Verdict::kFail);
  REQUIRE(verdicts[4].checks[0].expected == "100 +- 5");
}

TEST_CASE("JudgeAlone applies only the expectations", "[audit]") {
  NodeFacts f = GoodNode();
  NodeChecks n{"solo", "", RunChecks(f)};
  REQUIRE(JudgeAlone(n).verdict == Verdict::kPass);
  PoolOptions o;
  o.expectations[""]["software.nvidia_driver"] = "560.35.03";
  NodeVerdict v = JudgeAlone(n, o);
  REQUIRE(v.verdict == Verdict::kFail);
  REQUIRE(v.counts.failed == 1);
}

}  // namespace
}  // namespace lockstep::audit
