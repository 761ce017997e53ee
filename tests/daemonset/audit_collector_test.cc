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
                          "gpu.1.remap.pending=1\n";
  ::setenv("FAKE_NVML_STATE", state.c_str(), 1);
  std::string out;
  int rc = AuditMain({"--root", sys.root(), "--library", FAKE_NVML_LIBRARY, "--json"}, out);
  ::unsetenv("FAKE_NVML_STATE");
  REQUIRE(rc == 1);
  auto j = nlohmann::json::parse(out);
  bool pending = false;
  for (const auto& c : j["checks"]) {
    if (c["id"] == "memory.row_remap_pending" && c["subject"] == "gpu1") pending = c["verdict"] == "Fail";
    if (c["id"] == "node.gpu_count") REQUIRE(c["observed"] == "2");
  }
  REQUIRE(pending);
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
