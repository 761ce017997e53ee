// The fleet audit's collectors on fake sysfs/procfs trees built here, and
// `lockstep-agent audit` through the real dlopen of the fake NVML library.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fake_gpu_source.h"
#include "fake_sysfs.h"
#include "lockstep/agent/audit/audit_command.h"
#include "lockstep/agent/audit/sysfs_collector.h"
#include "lockstep/audit/checks.h"
#include "lockstep/audit/pool.h"

namespace lockstep::agent::audit {
namespace {

using lockstep::audit::Check;
using lockstep::audit::NodeFacts;
using lockstep::audit::Verdict;
using testing::FakeSysfs;

// A healthy node: two GPUs, a front end, two RoCE rails.
void HealthyNode(FakeSysfs& sys) {
  sys.AddGpu("0000:17:00.0");
  sys.AddGpu("0000:3b:00.0");
  sys.AddFrontEnd("eth0");
  sys.AddRail("rail0", "0000:81:00.0", "mlx5_0", "0000000A", "00FFFFFF");
  sys.AddRail("rail1", "0000:82:00.0", "mlx5_1", "0001000A", "00FFFFFF");
  sys.Write("sys/module/nvidia/version", "550.54.15\n");
  sys.Write("usr/local/cuda/version.json", R"({"cuda": {"name": "CUDA SDK", "version": "12.4.1"}})");
  sys.Write("usr/lib/x86_64-linux-gnu/libnccl.so.2", "");
  sys.Write("usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5", "");
  sys.Write("usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0", "");
}

const Check* Find(const std::vector<Check>& checks, const std::string& id, const std::string& subject = "") {
  auto it =
      std::find_if(checks.begin(), checks.end(), [&](const Check& c) { return c.id == id && c.subject == subject; });
  return it == checks.end() ? nullptr : &*it;
}

TEST_CASE("the collectors read a healthy fake tree", "[audit]") {
  FakeSysfs sys;
  HealthyNode(sys);
  NodeFacts f = CollectFacts({.root = sys.root()}, nullptr);
  REQUIRE(f.kernel == "6.1.0-18-amd64");
  REQUIRE(f.nvidia_driver == "550.54.15");
  REQUIRE(f.cuda == "12.4.1");
  REQUIRE(f.nccl == "2.21.5");
  REQUIRE(f.rdma_core == "1.14.44.0");
  REQUIRE(f.modules.at("nvidia_peermem"));
  REQUIRE_FALSE(f.modules.at("mlx5_core"));
  REQUIRE(f.default_route_interface == "eth0");
  REQUIRE(f.frontend->ipv4 == std::vector<std::string>{"192.168.1.0/24"});
  REQUIRE(f.rails.size() == 2);  // discovered from the RDMA devices
  REQUIRE(f.rails[1].name == "rail1");
  REQUIRE(f.rails[1].mtu == 9000);
  REQUIRE(f.rails[1].ipv4 == std::vector<std::string>{"10.0.1.0/24"});
  REQUIRE(f.rdma.size() == 2);
  REQUIRE(f.rdma[0].state == "ACTIVE");
  REQUIRE(f.rdma[0].rate_gbps == 200);
  REQUIRE(f.rdma[0].rocev2_gid_index == 3);
  REQUIRE(f.rdma[0].net_device == "rail0");
  REQUIRE(f.pcie.size() == 4);  // two GPUs, two NICs
  REQUIRE(f.pcie[0].role == "gpu0");
  REQUIRE(f.pcie[0].is_gpu);
  REQUIRE(f.pcie[0].speed_gts == 32);
  REQUIRE(f.pcie[0].aer_correctable == 0);
  REQUIRE(f.pcie[3].role == "nic:rail1");
  REQUIRE(f.nvml_unavailable == "NVML not loaded");

  auto checks = lockstep::audit::RunChecks(f);
  for (const Check& c : checks) {
    INFO(lockstep::audit::CheckKey(c) << ": " << c.message);
    CHECK(c.verdict != Verdict::kFail);
  }
}

TEST_CASE("faults seeded in the fake tree fail the checks that read them", "[audit]") {
  FakeSysfs sys;
  HealthyNode(sys);
  sys.Write("sys/bus/pci/devices/0000:3b:00.0/current_link_width", "8\n");
  sys.Write("sys/bus/pci/devices/0000:82:00.0/current_link_speed", "8.0 GT/s PCIe\n");
  sys.Write("sys/bus/pci/devices/0000:17:00.0/aer_dev_fatal", "Undefined 0\nTOTAL_ERR_FATAL 2\n");
  sys.Write("sys/class/net/rail0/operstate", "down\n");
  sys.Write("sys/class/infiniband/mlx5_1/ports/1/state", "1: DOWN\n");
  auto checks = lockstep::audit::RunChecks(CollectFacts({.root = sys.root()}, nullptr));
  REQUIRE(Find(checks, "pcie.link_width", "gpu1")->verdict == Verdict::kFail);
  REQUIRE(Find(checks, "pcie.link_width", "gpu1")->observed == "x8");
  REQUIRE(Find(checks, "pcie.link_width", "gpu0")->verdict == Verdict::kPass);
  REQUIRE(Find(checks, "pcie.link_speed", "nic:rail1")->verdict == Verdict::kFail);
  REQUIRE(Find(checks, "pcie.aer_fatal", "gpu0")->observed == "2");
  REQUIRE(Find(checks, "pcie.aer_fatal", "gpu0")->verdict == Verdict::kFail);
  REQUIRE(Find(checks, "backend.up", "rail0")->verdict == Verdict::kFail);
  REQUIRE(Find(checks, "backend.rdma_state", "rail1")->observed == "DOWN");
}

TEST_CASE("an empty tree gives NotPresent and no failure but the missing default route", "[audit]") {
  FakeSysfs sys;
  sys.Remove("proc");
  NodeFacts f = CollectFacts({.root = sys.root()}, nullptr);
  REQUIRE_FALSE(f.kernel);
  REQUIRE(f.gpus.empty());
  REQUIRE(f.pcie.empty());
  REQUIRE(f.rdma.empty());
  for (const Check& c : lockstep::audit::RunChecks(f)) {
    INFO(lockstep::audit::CheckKey(c));
    if (c.id == "frontend.default_route") {
      CHECK(c.verdict == Verdict::kFail);
    } else {
      CHECK(c.verdict != Verdict::kFail);
    }
  }
}

TEST_CASE("garbage in sysfs files is not a value and not a crash", "[audit]") {
  FakeSysfs sys;
  HealthyNode(sys);
  sys.Write("sys/bus/pci/devices/0000:17:00.0/current_link_width", "wide\n");
  sys.Write("sys/bus/pci/devices/0000:17:00.0/max_link_speed", "Unknown\n");
  sys.Write("sys/class/net/rail0/mtu", "-1\n");
  sys.Write("sys/class/infiniband/mlx5_0/ports/1/rate", "fast\n");
  sys.Write("usr/local/cuda/version.json", "{not json");
  sys.Write("proc/net/route", "Iface\nbroken line\n");
  NodeFacts f = CollectFacts({.root = sys.root()}, nullptr);
  REQUIRE_FALSE(f.pcie[0].width);
  REQUIRE_FALSE(f.pcie[0].max_speed_gts);
  REQUIRE_FALSE(f.rails[0].mtu);
  REQUIRE_FALSE(f.rdma[0].rate_gbps);
  REQUIRE_FALSE(f.cuda);
  REQUIRE_FALSE(f.default_route_interface);
  auto checks = lockstep::audit::RunChecks(f);
  REQUIRE(Find(checks, "pcie.link_width", "gpu0")->verdict == Verdict::kNotPresent);
  REQUIRE(Find(checks, "backend.rdma_rate", "rail0")->verdict == Verdict::kNotPresent);
}

TEST_CASE("configured rails: a missing NIC fails, NVML's GPUs give the memory checks", "[audit]") {
  FakeSysfs sys;
  HealthyNode(sys);
  testing::FakeGpuSource gpus;
  gpus.SetGpus(2);
  gpus.snapshot.gpus[0].pci_bus_id = "00000000:17:00.0";
  gpus.snapshot.gpus[1].pci_bus_id = "00000000:3B:00.0";
  gpus.snapshot.gpus[1].remapped_rows->pending = true;
  NodeFacts f = CollectFacts({.root = sys.root(), .rails = {"rail0", "rail1", "rail2"}}, &gpus);
  REQUIRE(f.gpus.size() == 2);
  REQUIRE_FALSE(f.nvml_unavailable);
  REQUIRE(f.pcie[1].role == "gpu1");  // matched by bus id
  auto checks = lockstep::audit::RunChecks(f, {.rails_configured = true});
  REQUIRE(Find(checks, "backend.nic_present", "rail2")->verdict == Verdict::kFail);
  REQUIRE(Find(checks, "memory.row_remap_pending", "gpu1")->verdict == Verdict::kFail);
  REQUIRE(Find(checks, "memory.row_remap_pending", "gpu0")->verdict == Verdict::kPass);
  REQUIRE(Find(checks, "node.gpu_count")->observed == "2");

  gpus.unavailable = "no NVIDIA driver (libnvidia-ml.so.1: cannot open shared object file)";
  f = CollectFacts({.root = sys.root()}, &gpus);
  REQUIRE(f.nvml_unavailable == gpus.unavailable);
  REQUIRE(f.nvidia_driver == "550.54.15");  // from /sys/module/nvidia/version
}

TEST_CASE("parsers of sysfs values", "[audit]") {
  REQUIRE(ParseLinkSpeed("32.0 GT/s PCIe") == 32);
  REQUIRE(ParseLinkSpeed("2.5 GT/s") == 2.5);
  REQUIRE_FALSE(ParseLinkSpeed("Unknown"));
  REQUIRE(ParseRdmaRate("400 Gb/sec (4X NDR)") == 400);
  REQUIRE_FALSE(ParseRdmaRate("0 Gb/sec"));
  REQUIRE(SysfsBdf("00000000:3B:00.0") == "0000:3b:00.0");
}

TEST_CASE("lockstep-agent audit: exit 1 and the failing check first on a bad node, 0 on a good one", "[audit]") {
  FakeSysfs sys;
  HealthyNode(sys);
  std::string out;
  REQUIRE(AuditMain({"--root", sys.root(), "--no-nvml"}, out) == 0);
  REQUIRE(out.find("audit Pass (0 failed,") != std::string::npos);
  sys.Write("sys/class/net/rail1/mtu", "1500\n");
  out.clear();
  REQUIRE(AuditMain({"--root", sys.root(), "--no-nvml", "--expect", "backend.mtu=9000", "--node", "h3"}, out) == 1);
  REQUIRE(out.rfind("Fail       backend.mtu[rail1]", 0) == 0);
  REQUIRE(out.find("audit h3 Fail (1 failed,") != std::string::npos);
  out.clear();
  REQUIRE(AuditMain({"--root", sys.root(), "--no-nvml", "--json", "--require-module", "mlx5_core"}, out) == 1);
  auto j = nlohmann::json::parse(out);
  REQUIRE(j["verdict"] == "Fail");
  REQUIRE(j["failed"] == 1);
  out.clear();
  REQUIRE(AuditMain({"--expect", "nothing"}, out) == 2);
  REQUIRE(AuditMain({"--bogus"}, out) == 2);
}

TEST_CASE("lockstep-agent audit reads GPUs through the fake NVML library", "[audit]") {
  FakeSysfs sys;
  HealthyNode(sys);
  const std::string state = sys.root() + "/fake-nvml-state";
  std::ofstream(state) << "driver=550.54.15\ngpus=2\ngpu.0.bus=00000000:17:00.0\ngpu.1.bus=00000000:3B:00.0\n"
                          "gpu.1.remap.pending=1\ngpu.0.clocks_event_reasons=0x40\ngpu.0.sm_clock=1200\n";
  ::setenv("FAKE_NVML_STATE", state.c_str(), 1);
  std::string out;
  int rc = AuditMain({"--root", sys.root(), "--library", FAKE_NVML_LIBRARY, "--json"}, out);
  ::unsetenv("FAKE_NVML_STATE");
  REQUIRE(rc == 1);
  auto j = nlohmann::json::parse(out);
  bool pending = false, thermal = false, ecc_mode = false;
  for (const auto& c : j["checks"]) {
    if (c["id"] == "memory.row_remap_pending" && c["subject"] == "gpu1") pending = c["verdict"] == "Fail";
    if (c["id"] == "node.gpu_count") REQUIRE(c["observed"] == "2");
    if (c["id"] == "node.clocks_throttle" && c["subject"] == "gpu0") {
      thermal = c["verdict"] == "Fail" && c["observed"] == "hw_thermal_slowdown" &&
                c["message"].get<std::string>().find("SM clock 1200 of 1980 MHz") != std::string::npos;
    }
    if (c["id"] == "memory.ecc_mode" && c["subject"] == "gpu1") ecc_mode = c["observed"] == "enabled";
  }
  REQUIRE(pending);
  REQUIRE(thermal);
  REQUIRE(ecc_mode);
}

}  // namespace
}  // namespace lockstep::agent::audit

namespace lockstep::agent::audit {
namespace {

TEST_CASE("NUMA, NIC firmware, Xids, nameservers and nccl-tests from a fake tree", "[audit]") {
  FakeSysfs sys;
  HealthyNode(sys);
  sys.Write("sys/bus/pci/devices/0000:17:00.0/numa_node", "0\n");
  sys.Write("sys/bus/pci/devices/0000:3b:00.0/numa_node", "1\n");
  sys.Write("sys/bus/pci/devices/0000:81:00.0/numa_node", "0\n");
  sys.Write("sys/bus/pci/devices/0000:82:00.0/numa_node", "0\n");  // both NICs on node 0
  sys.Write("sys/class/infiniband/mlx5_0/fw_ver", "28.39.1002\n");
  sys.Write("sys/class/infiniband/mlx5_1/fw_ver", "28.36.1010\n");
  sys.Write("dev/kmsg",
            "6,100,5000,-;NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n"
            "4,101,6000,-;NVRM: Xid (PCI:0000:3B:00): 79, pid=1234, GPU has fallen off the bus.\n"
            "4,102,7000,-;NVRM: Xid (PCI:0000:17:00): 13, pid=77, Graphics Exception\n"
            "4,103,7100,-;NVRM: Xid (PCI:0000:17:00): 13, pid=77, Graphics Exception\n");
  sys.Write("etc/resolv.conf", "search cluster.local\nnameserver 10.96.0.10\nnameserver 10.96.0.11\n");
  const NodeFacts f = CollectFacts({.root = sys.root()}, nullptr);
  REQUIRE(f.xids);
  CHECK(f.xids->size() == 3);
  CHECK(f.xids->front() == lockstep::audit::XidEvent{"0000:3b:00", 79});
  auto checks = lockstep::audit::RunChecks(f);
  CHECK(Find(checks, "software.nic_firmware", "rail0")->observed == "28.39.1002");
  CHECK(Find(checks, "software.nic_firmware", "rail1")->observed == "28.36.1010");
  CHECK(Find(checks, "node.numa", "gpu1")->observed == "numa1");
  CHECK(Find(checks, "node.gpu_nic_numa", "gpu0")->verdict == Verdict::kPass);
  CHECK(Find(checks, "node.gpu_nic_numa", "gpu1")->verdict == Verdict::kFail);
  CHECK(Find(checks, "memory.xid", "gpu1")->verdict == Verdict::kFail);
  CHECK(Find(checks, "memory.xid", "gpu1")->observed == "79 x1");
  CHECK(Find(checks, "memory.xid", "gpu0")->verdict == Verdict::kPass);
  CHECK(Find(checks, "memory.xid", "gpu0")->observed == "13 x2");
  CHECK(Find(checks, "frontend.dns", "")->observed == "10.96.0.10,10.96.0.11");
  CHECK(Find(checks, "frontend.dns", "")->verdict == Verdict::kPass);
  const Check* nccl = Find(checks, "nccl.all_reduce", "");
  CHECK(nccl->verdict == Verdict::kNotPresent);
  CHECK(nccl->message == "no GPU on this node");  // no NVML here: no GPU facts

  sys.Write("etc/resolv.conf", "search cluster.local\n");
  sys.Write("usr/local/bin/all_reduce_perf", "");
  sys.Write("sys/bus/pci/devices/0000:3b:00.0/numa_node", "-1\n");
  NodeFacts g = CollectFacts({.root = sys.root()}, nullptr);
  g.gpus.push_back({.index = 0});
  checks = lockstep::audit::RunChecks(g);
  CHECK(Find(checks, "frontend.dns", "")->verdict == Verdict::kFail);
  CHECK(Find(checks, "node.numa", "gpu1")->verdict == Verdict::kNotPresent);
  CHECK(Find(checks, "nccl.all_reduce", "")->message.find("/usr/local/bin/all_reduce_perf") != std::string::npos);
}

}  // namespace
}  // namespace lockstep::agent::audit

namespace lockstep::agent::audit {
namespace {

// GPU i and rail NIC i under one PCIe switch (root port, upstream port, two
// downstream ports), placed as sysfs links before the devices are added.
void SwitchedNode(FakeSysfs& sys) {
  sys.PlaceUnder("0000:17:00.0", {"0000:00:01.0", "0000:15:00.0", "0000:16:00.0"});
  sys.PlaceUnder("0000:81:00.0", {"0000:00:01.0", "0000:15:00.0", "0000:16:01.0"});
  sys.PlaceUnder("0000:3b:00.0", {"0000:00:03.0", "0000:39:00.0", "0000:3a:00.0"});
  sys.PlaceUnder("0000:82:00.0", {"0000:00:03.0", "0000:39:00.0", "0000:3a:01.0"});
  HealthyNode(sys);
  sys.AddBridge("0000:00:01.0", 0x1d);  // redirect on the root port: above the shared switch, not on the path
  sys.AddBridge("0000:00:03.0", 0x1d);
  sys.AddBridge("0000:15:00.0", std::nullopt);
  sys.AddBridge("0000:39:00.0", std::nullopt);
  sys.AddBridge("0000:16:00.0", 0x01);  // source validation only
  sys.AddBridge("0000:16:01.0", 0x01);
  sys.AddBridge("0000:3a:00.0", std::nullopt);  // no ACS capability: redirects nothing
  sys.AddBridge("0000:3a:01.0", std::nullopt);
}

TEST_CASE("ACS on the GPU-NIC path from the bridges' config space in a fake tree", "[audit]") {
  FakeSysfs sys;
  SwitchedNode(sys);
  NodeFacts f = CollectFacts({.root = sys.root()}, nullptr);
  REQUIRE(f.pcie.size() == 4);
  const auto& up = f.pcie[0].upstream;
  REQUIRE(up.size() == 3);
  CHECK(up[0] == lockstep::audit::PcieBridge{"0000:00:01.0", true, 0x1d});
  CHECK(up[1] == lockstep::audit::PcieBridge{"0000:15:00.0", true, std::nullopt});
  CHECK(up[2] == lockstep::audit::PcieBridge{"0000:16:00.0", true, 0x01});
  CHECK(f.pcie[2].role == "nic:rail0");
  CHECK(f.pcie[2].upstream.back().bdf == "0000:16:01.0");
  auto checks = lockstep::audit::RunChecks(f);
  CHECK(Find(checks, "pcie.acs", "gpu0")->observed == "off");
  CHECK(Find(checks, "pcie.acs", "gpu1")->observed == "off");
  CHECK(Find(checks, "pcie.acs", "gpu1")->verdict == Verdict::kPass);

  // P2P request and completion redirect on the NIC's downstream port.
  sys.AddBridge("0000:16:01.0", 0x1d);
  checks = lockstep::audit::RunChecks(CollectFacts({.root = sys.root()}, nullptr));
  const Check* c = Find(checks, "pcie.acs", "gpu0");
  REQUIRE(c->verdict == Verdict::kFail);
  CHECK(c->message.find("0000:16:01.0 (ACSCtl 0x001d: ReqRedir+ CmpltRedir+) between gpu0 and nic:rail0") !=
        std::string::npos);
  CHECK(Find(checks, "pcie.acs", "gpu1")->verdict == Verdict::kPass);

  // Read unprivileged: 64 bytes of config space, not the ACS capability.
  sys.AddBridge("0000:16:01.0", 0x1d, 64);
  checks = lockstep::audit::RunChecks(CollectFacts({.root = sys.root()}, nullptr));
  c = Find(checks, "pcie.acs", "gpu0");
  CHECK(c->verdict == Verdict::kNotPresent);
  CHECK(c->message.find("0000:16:01.0 is not readable") != std::string::npos);
}

TEST_CASE("ACS: a tree without device links, and capability lists that loop or end early", "[audit]") {
  FakeSysfs sys;
  HealthyNode(sys);  // devices as plain directories: no path to the root complex
  auto checks = lockstep::audit::RunChecks(CollectFacts({.root = sys.root()}, nullptr));
  CHECK(Find(checks, "pcie.acs", "gpu0")->verdict == Verdict::kNotPresent);
  std::string config(4096, '\0');
  CHECK_FALSE(AcsControl(config));  // no extended capability
  config[0x100] = 0x01;             // AER whose next pointer is itself (0x100)
  config[0x103] = 0x10;
  CHECK_FALSE(AcsControl(config));
  config[0x103] = 0x14;  // next 0x140: ACS with control 0x0004
  config[0x140] = 0x0d;
  config[0x146] = 0x04;
  CHECK(AcsControl(config) == 0x0004);
  CHECK_FALSE(AcsControl(config.substr(0, 0x144)));  // cut short
}

TEST_CASE("NVML's ECC mode, persistence, clocks and clock event reasons reach the checks", "[audit]") {
  FakeSysfs sys;
  HealthyNode(sys);
  testing::FakeGpuSource gpus;
  gpus.SetGpus(2);
  for (auto& g : gpus.snapshot.gpus) {
    g.ecc_mode = true;
    g.ecc_mode_pending = true;
    g.persistence_mode = true;
    g.sm_clock_mhz = 1980;
    g.sm_clock_max_mhz = 1980;
    g.clocks_event_reasons = 0;
  }
  gpus.snapshot.gpus[1].ecc_mode_pending = false;
  gpus.snapshot.gpus[1].persistence_mode = false;
  gpus.snapshot.gpus[1].sm_clock_mhz = 1005;
  gpus.snapshot.gpus[1].clocks_event_reasons = gpu::kClocksEventHwPowerBrakeSlowdown;
  NodeFacts f = CollectFacts({.root = sys.root()}, &gpus);
  REQUIRE(f.gpus.size() == 2);
  CHECK(f.gpus[1].ecc_enabled == true);
  CHECK(f.gpus[1].ecc_pending == false);
  CHECK(f.gpus[1].persistence_mode == false);
  CHECK(f.gpus[1].sm_clock_mhz == 1005u);
  CHECK(f.gpus[1].sm_clock_max_mhz == 1980u);
  auto checks = lockstep::audit::RunChecks(f);
  CHECK(Find(checks, "memory.ecc_mode", "gpu1")->observed == "enabled");
  CHECK(Find(checks, "memory.ecc_mode_pending", "gpu1")->observed == "disabled");
  CHECK(Find(checks, "node.persistence_mode", "gpu1")->observed == "disabled");
  const Check* c = Find(checks, "node.clocks_throttle", "gpu1");
  CHECK(c->verdict == Verdict::kFail);
  CHECK(c->observed == "hw_power_brake_slowdown");
  CHECK(Find(checks, "node.clocks_throttle", "gpu0")->verdict == Verdict::kPass);
  // A driver without these calls: not present, not a failure.
  gpus.SetGpus(1);
  checks = lockstep::audit::RunChecks(CollectFacts({.root = sys.root()}, &gpus));
  for (const char* id : {"memory.ecc_mode", "memory.ecc_mode_pending", "node.persistence_mode", "node.sm_clock_max",
                         "node.clocks_throttle"}) {
    CAPTURE(id);
    CHECK(Find(checks, id, "gpu0")->verdict == Verdict::kNotPresent);
  }
}

TEST_CASE("the API server's name: parsed from its URL, resolved, an IP not resolved", "[audit]") {
  CHECK(ApiServerHost("https://api.lab.example:6443") == "api.lab.example");
  CHECK(ApiServerHost("https://api.lab.example") == "api.lab.example");
  CHECK(ApiServerHost("https://user@api.lab.example:6443/prefix?x=1") == "api.lab.example");
  CHECK(ApiServerHost("https://[fd00::1]:6443") == "fd00::1");
  CHECK(ApiServerHost("10.96.0.1") == "10.96.0.1");
  CHECK(ApiServerHost("fd00::1") == "fd00::1");
  CHECK(IsIpAddress("10.96.0.1"));
  CHECK(IsIpAddress("fd00::1"));
  CHECK_FALSE(IsIpAddress("api.lab.example"));

  FakeSysfs sys;
  HealthyNode(sys);
  std::vector<std::string> asked;
  CollectOptions o{.root = sys.root(), .api_server = "https://api.lab.example:6443"};
  o.resolve = [&asked](const std::string& host) -> Result<std::vector<std::string>> {
    asked.push_back(host);
    if (host == "api.lab.example") return std::vector<std::string>{"10.0.0.5", "fd00::5"};
    return Unavailable("Name or service not known");
  };
  auto checks = lockstep::audit::RunChecks(CollectFacts(o, nullptr));
  CHECK(asked == std::vector<std::string>{"api.lab.example"});
  CHECK(Find(checks, "frontend.api_dns")->verdict == Verdict::kPass);
  CHECK(Find(checks, "frontend.api_dns")->observed == "10.0.0.5,fd00::5");
  o.api_server = "https://api.gone.example:6443";
  checks = lockstep::audit::RunChecks(CollectFacts(o, nullptr));
  const Check* c = Find(checks, "frontend.api_dns");
  CHECK(c->verdict == Verdict::kFail);
  CHECK(c->message == "the API server's name api.gone.example does not resolve: Name or service not known");
  o.api_server = "https://10.96.0.1:443";
  checks = lockstep::audit::RunChecks(CollectFacts(o, nullptr));
  CHECK(asked.size() == 2);  // an IP is not resolved
  CHECK(Find(checks, "frontend.api_dns")->verdict == Verdict::kNotPresent);
  o.api_server = "";
  checks = lockstep::audit::RunChecks(CollectFacts(o, nullptr));
  CHECK(Find(checks, "frontend.api_dns")->message == "no API server known (no kubeconfig, not in a cluster)");

  // The real resolver on a name every host knows (/etc/hosts).
  auto local = ResolveHost("localhost");
  REQUIRE(local.ok());
  CHECK((std::find(local->begin(), local->end(), "127.0.0.1") != local->end() ||
         std::find(local->begin(), local->end(), "::1") != local->end()));
}

TEST_CASE("lockstep-agent audit --api-server: a name resolved, an IP not present", "[audit]") {
  FakeSysfs sys;
  HealthyNode(sys);
  auto api_dns = [&sys](const std::string& server) {
    std::string out;
    REQUIRE(AuditMain({"--root", sys.root(), "--no-nvml", "--json", "--api-server", server}, out) == 0);
    const auto j = nlohmann::json::parse(out);
    for (const auto& c : j["checks"]) {
      if (c["id"] == "frontend.api_dns") return c;
    }
    FAIL("no frontend.api_dns");
    return nlohmann::json();
  };
  CHECK(api_dns("https://localhost:6443")["verdict"] == "Pass");
  CHECK(api_dns("https://10.96.0.1:443")["verdict"] == "NotPresent");
}

}  // namespace
}  // namespace lockstep::agent::audit
