#include <algorithm>

#include <catch2/catch.hpp>

#include "good_node.h"
#include "lockstep/audit/checks.h"

namespace lockstep::audit {
namespace {

using testing::GoodNode;

const Check* Find(const std::vector<Check>& checks, const std::string& id, const std::string& subject = "") {
  auto it =
      std::find_if(checks.begin(), checks.end(), [&](const Check& c) { return c.id == id && c.subject == subject; });
  return it == checks.end() ? nullptr : &*it;
}

TEST_CASE("a healthy node passes every local check", "[audit]") {
  auto checks = RunChecks(GoodNode());
  for (const Check& c : checks) {
    INFO(CheckKey(c) << " " << c.message);
    CHECK(c.verdict != Verdict::kFail);
  }
  // Absent software (no CUDA toolkit, no NCCL) is NotPresent, not a failure.
  REQUIRE(Find(checks, "software.cuda")->verdict == Verdict::kNotPresent);
  REQUIRE(Find(checks, "software.nccl")->verdict == Verdict::kNotPresent);
  REQUIRE(Find(checks, "node.gpu_count")->observed == "2");
  REQUIRE(Find(checks, "backend.subnet", "rail1")->observed == "10.0.1.0/24");
  REQUIRE(Find(checks, "backend.rdma_state", "rail0")->verdict == Verdict::kPass);
}

TEST_CASE("a downtrained PCIe link fails with the observed and expected width", "[audit]") {
  NodeFacts f = GoodNode();
  f.pcie[1].width = 8;
  auto checks = RunChecks(f);
  const Check* c = Find(checks, "pcie.link_width", "gpu1");
  REQUIRE(c != nullptr);
  REQUIRE(c->verdict == Verdict::kFail);
  REQUIRE(c->observed == "x8");
  REQUIRE(c->expected == "x16");
  REQUIRE(c->message.find("0000:11:00.0") != std::string::npos);
  REQUIRE(Find(checks, "pcie.link_width", "gpu0")->verdict == Verdict::kPass);
}

TEST_CASE("a NIC below its maximum link speed fails, a GPU's lower speed is left to the pool", "[audit]") {
  NodeFacts f = GoodNode();
  f.pcie[0].speed_gts = 2.5;  // gpu0, idle
  f.pcie[2].speed_gts = 8;    // nic:rail0
  auto checks = RunChecks(f);
  REQUIRE(Find(checks, "pcie.link_speed", "gpu0")->verdict == Verdict::kPass);
  REQUIRE(Find(checks, "pcie.link_speed", "gpu0")->pool == PoolRule::kMajority);
  const Check* nic = Find(checks, "pcie.link_speed", "nic:rail0");
  REQUIRE(nic->verdict == Verdict::kFail);
  REQUIRE(nic->observed == "8 GT/s");
  REQUIRE(nic->expected == "16 GT/s");
}

TEST_CASE("a pending or failed row remap and uncorrected ECC errors fail", "[audit]") {
  NodeFacts f = GoodNode();
  f.gpus[0].remap_pending = true;
  f.gpus[1].remap_failed = true;
  f.gpus[1].ecc_uncorrected_volatile = 2;
  auto checks = RunChecks(f);
  REQUIRE(Find(checks, "memory.row_remap_pending", "gpu0")->verdict == Verdict::kFail);
  REQUIRE(Find(checks, "memory.row_remap_pending", "gpu1")->verdict == Verdict::kPass);
  REQUIRE(Find(checks, "memory.row_remap_failed", "gpu1")->verdict == Verdict::kFail);
  const Check* ecc = Find(checks, "memory.ecc_uncorrected_volatile", "gpu1");
  REQUIRE(ecc->verdict == Verdict::kFail);
  REQUIRE(ecc->observed == "2");
  REQUIRE(ecc->expected == "0");
}

TEST_CASE("fatal AER errors fail, correctable ones go to the pool", "[audit]") {
  NodeFacts f = GoodNode();
  f.pcie[0].aer_fatal = 1;
  f.pcie[0].aer_correctable = 500;
  auto checks = RunChecks(f);
  REQUIRE(Find(checks, "pcie.aer_fatal", "gpu0")->verdict == Verdict::kFail);
  REQUIRE(Find(checks, "pcie.aer_correctable", "gpu0")->verdict == Verdict::kPass);
  REQUIRE(Find(checks, "pcie.aer_correctable", "gpu0")->pool == PoolRule::kUpper);
}

TEST_CASE("a node without GPUs, RDMA or AER counters gets NotPresent, never a failure", "[audit]") {
  NodeFacts f;
  f.kernel = "6.1.0";
  f.nvml_unavailable = "no NVIDIA driver (libnvidia-ml.so.1: cannot open shared object file)";
  f.default_route_interface = "eth0";
  f.frontend = NetInterface{.name = "eth0", .present = true, .operstate = "up", .mtu = 1500, .ipv4 = {"10.1.1.1/16"}};
  f.pcie.push_back(PcieLink{.bdf = "0000:00:03.0", .role = "nic:eth0"});  // no link files (a virtual NIC)
  auto checks = RunChecks(f);
  for (const Check& c : checks) {
    INFO(CheckKey(c));
    CHECK(c.verdict != Verdict::kFail);
  }
  REQUIRE(Find(checks, "node.gpu_count")->verdict == Verdict::kNotPresent);
  REQUIRE(Find(checks, "node.gpu_count")->message.find("no NVIDIA driver") != std::string::npos);
  REQUIRE(Find(checks, "pcie.link_width", "nic:eth0")->verdict == Verdict::kNotPresent);
  REQUIRE(Find(checks, "pcie.aer_fatal", "nic:eth0")->verdict == Verdict::kNotPresent);
  REQUIRE(Find(checks, "software.nvidia_driver")->verdict == Verdict::kNotPresent);
}

TEST_CASE("a required module that is missing fails, another is NotPresent", "[audit]") {
  NodeFacts f = GoodNode();
  f.modules["nvidia_peermem"] = false;
  f.modules["ib_umad"] = false;
  auto checks = RunChecks(f, {.required_modules = {"nvidia_peermem"}});
  REQUIRE(Find(checks, "software.module", "nvidia_peermem")->verdict == Verdict::kFail);
  REQUIRE(Find(checks, "software.module", "ib_umad")->verdict == Verdict::kNotPresent);
  REQUIRE(Find(checks, "software.module", "mlx5_core")->verdict == Verdict::kPass);
}

TEST_CASE("a rail that is down, missing or without an address fails", "[audit]") {
  NodeFacts f = GoodNode();
  f.rails[0].operstate = "down";
  f.rails[1].ipv4.clear();
  auto checks = RunChecks(f, {.rails_configured = true});
  REQUIRE(Find(checks, "backend.up", "rail0")->verdict == Verdict::kFail);
  REQUIRE(Find(checks, "backend.subnet", "rail1")->verdict == Verdict::kFail);
  f = GoodNode();
  f.rails[1].present = false;
  REQUIRE(Find(RunChecks(f, {.rails_configured = true}), "backend.nic_present", "rail1")->verdict == Verdict::kFail);
  REQUIRE(Find(RunChecks(f), "backend.nic_present", "rail1")->verdict == Verdict::kNotPresent);
}

TEST_CASE("an RDMA port that is not active or has no RoCE v2 GID fails", "[audit]") {
  NodeFacts f = GoodNode();
  f.rdma[0].state = "DOWN";
  f.rdma[1].rocev2_gid_index.reset();
  auto checks = RunChecks(f);
  REQUIRE(Find(checks, "backend.rdma_state", "rail0")->verdict == Verdict::kFail);
  REQUIRE(Find(checks, "backend.rdma_state", "rail0")->observed == "DOWN");
  REQUIRE(Find(checks, "backend.rocev2_gid", "rail1")->verdict == Verdict::kFail);
  f.rdma[1].link_layer = "InfiniBand";
  REQUIRE(Find(RunChecks(f), "backend.rocev2_gid", "rail1")->verdict == Verdict::kNotPresent);
}

TEST_CASE("no default route fails the front end", "[audit]") {
  NodeFacts f = GoodNode();
  f.default_route_interface.reset();
  REQUIRE(Find(RunChecks(f), "frontend.default_route")->verdict == Verdict::kFail);
  f = GoodNode();
  f.frontend->ipv4.clear();
  REQUIRE(Find(RunChecks(f), "frontend.address", "eth0")->verdict == Verdict::kFail);
}

TEST_CASE("ECC mode now and after the next reset, persistence and the maximum SM clock go to the pool", "[audit]") {
  NodeFacts f = GoodNode();
  auto checks = RunChecks(f);
  REQUIRE(Find(checks, "memory.ecc_mode", "gpu0")->observed == "enabled");
  REQUIRE(Find(checks, "memory.ecc_mode_pending", "gpu0")->observed == "enabled");
  REQUIRE(Find(checks, "memory.ecc_mode_pending", "gpu0")->pool == PoolRule::kMajority);
  REQUIRE(Find(checks, "node.persistence_mode", "gpu1")->observed == "enabled");
  REQUIRE(Find(checks, "node.persistence_mode", "gpu1")->pool == PoolRule::kMajority);
  REQUIRE(Find(checks, "node.sm_clock_max", "gpu1")->observed == "1980 MHz");
  f.gpus[1].ecc_pending = false;
  f.gpus[0].persistence_mode.reset();
  f.gpus[0].ecc_enabled.reset();
  f.gpus[0].ecc_pending.reset();
  checks = RunChecks(f);
  const Check* pending = Find(checks, "memory.ecc_mode_pending", "gpu1");
  REQUIRE(pending->observed == "disabled");
  REQUIRE(pending->verdict == Verdict::kPass);  // the pool decides
  REQUIRE(pending->message == "ECC turns off at the next GPU reset or reboot");
  REQUIRE(Find(checks, "node.persistence_mode", "gpu0")->verdict == Verdict::kNotPresent);
  REQUIRE(Find(checks, "memory.ecc_mode", "gpu0")->verdict == Verdict::kNotPresent);
  REQUIRE(Find(checks, "memory.ecc_mode_pending", "gpu0")->verdict == Verdict::kNotPresent);
}

TEST_CASE("clock event reasons: HW and thermal slowdowns fail, idle and power cap do not", "[audit]") {
  NodeFacts f = GoodNode();
  auto checks = RunChecks(f);
  const Check* c = Find(checks, "node.clocks_throttle", "gpu0");
  REQUIRE(c->verdict == Verdict::kPass);
  REQUIRE(c->observed == "none");
  f.gpus[0].clocks_event_reasons = 0x1 | 0x4;  // idle, software power cap
  checks = RunChecks(f);
  REQUIRE(Find(checks, "node.clocks_throttle", "gpu0")->observed == "gpu_idle,sw_power_cap");
  REQUIRE(Find(checks, "node.clocks_throttle", "gpu0")->verdict == Verdict::kPass);
  for (uint64_t bit : {0x8, 0x20, 0x40, 0x80}) {
    CAPTURE(bit);
    f.gpus[1].clocks_event_reasons = bit | 0x4;
    f.gpus[1].sm_clock_mhz = 1005;
    checks = RunChecks(f);
    c = Find(checks, "node.clocks_throttle", "gpu1");
    REQUIRE(c->verdict == Verdict::kFail);
    REQUIRE(c->pool == PoolRule::kNone);  // absolute: a slowed GPU fails whatever its pool shows
    REQUIRE(c->message.find("(SM clock 1005 of 1980 MHz)") != std::string::npos);
    REQUIRE(c->number == 1005);
  }
  f.gpus[1].clocks_event_reasons = 0x8 | 0x40 | 0x10000;
  checks = RunChecks(f);
  c = Find(checks, "node.clocks_throttle", "gpu1");
  REQUIRE(c->observed == "hw_slowdown,hw_thermal_slowdown,0x10000");
  REQUIRE(c->message.rfind("clocks held down by hw_slowdown,hw_thermal_slowdown (SM clock", 0) == 0);
  f.gpus[1].clocks_event_reasons.reset();
  f.gpus[1].sm_clock_max_mhz.reset();
  checks = RunChecks(f);
  REQUIRE(Find(checks, "node.clocks_throttle", "gpu1")->verdict == Verdict::kNotPresent);
  REQUIRE(Find(checks, "node.sm_clock_max", "gpu1")->verdict == Verdict::kNotPresent);
}

TEST_CASE("ACS redirect between a GPU and its nearest NIC fails, elsewhere it does not", "[audit]") {
  NodeFacts f = GoodNode();
  REQUIRE(Find(RunChecks(f), "pcie.acs", "gpu0")->observed == "off");
  REQUIRE(Find(RunChecks(f), "pcie.acs", "gpu0")->verdict == Verdict::kPass);
  // Redirect on the root port above the shared switch: not on the P2P path.
  f.pcie[0].upstream[0].acs_control = 0x1d;
  f.pcie[2].upstream[0].acs_control = 0x1d;
  REQUIRE(Find(RunChecks(f), "pcie.acs", "gpu0")->verdict == Verdict::kPass);
  // Request redirect on the NIC's downstream port: the GPU's writes to the NIC go up.
  f.pcie[2].upstream[2].acs_control = kAcsSourceValidation | kAcsRequestRedirect;
  auto checks = RunChecks(f);
  const Check* c = Find(checks, "pcie.acs", "gpu0");
  REQUIRE(c->verdict == Verdict::kFail);
  REQUIRE(c->observed == "redirect");
  REQUIRE(c->message.find("0000:40:01.0 (ACSCtl 0x0005: ReqRedir+ CmpltRedir-) between gpu0 and nic:rail0") !=
          std::string::npos);
  REQUIRE(Find(checks, "pcie.acs", "gpu1")->verdict == Verdict::kPass);  // its own switch, with rail1
  // A bridge on the path whose config space is not readable: not present.
  f = GoodNode();
  f.pcie[1].upstream[2].config_readable = false;
  checks = RunChecks(f);
  c = Find(checks, "pcie.acs", "gpu1");
  REQUIRE(c->verdict == Verdict::kNotPresent);
  REQUIRE(c->message.find("0000:41:00.0") != std::string::npos);
  // No bridge in sysfs (a flat virtual bus), no NIC, no shared switch.
  f = GoodNode();
  f.pcie[0].upstream.clear();
  REQUIRE(Find(RunChecks(f), "pcie.acs", "gpu0")->verdict == Verdict::kNotPresent);
  f.pcie.resize(2);
  REQUIRE(Find(RunChecks(f), "pcie.acs", "gpu1")->message == "no rail NIC");
  f = GoodNode();
  f.pcie[1].upstream = testing::SwitchPath(7, 0);
  checks = RunChecks(f);
  c = Find(checks, "pcie.acs", "gpu1");
  REQUIRE(c->observed == "no shared switch");
  REQUIRE(c->verdict == Verdict::kPass);
  REQUIRE(c->pool == PoolRule::kMajority);
}

TEST_CASE("the API server's name: resolved passes, unresolved fails, an IP or none is not present", "[audit]") {
  NodeFacts f = GoodNode();
  auto checks = RunChecks(f);
  const Check* c = Find(checks, "frontend.api_dns");
  REQUIRE(c->verdict == Verdict::kPass);
  REQUIRE(c->observed == "192.168.1.2");
  f.api_server->addresses.clear();
  f.api_server->error = "Name or service not known";
  checks = RunChecks(f);
  c = Find(checks, "frontend.api_dns");
  REQUIRE(c->verdict == Verdict::kFail);
  REQUIRE(c->message == "the API server's name api.cluster.example does not resolve: Name or service not known");
  f.api_server = ApiServerName{.host = "10.96.0.1", .is_address = true};
  REQUIRE(Find(RunChecks(f), "frontend.api_dns")->verdict == Verdict::kNotPresent);
  f.api_server.reset();
  REQUIRE(Find(RunChecks(f), "frontend.api_dns")->verdict == Verdict::kNotPresent);
}

TEST_CASE("check ids and subjects are unique within a node", "[audit]") {
  auto checks = RunChecks(GoodNode());
  std::vector<std::string> keys;
  for (const Check& c : checks) keys.push_back(CheckKey(c));
  std::sort(keys.begin(), keys.end());
  REQUIRE(std::adjacent_find(keys.begin(), keys.end()) == keys.end());
}

}  // namespace
}  // namespace lockstep::audit
