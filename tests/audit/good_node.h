// A healthy node's facts (two H100s, two RoCE rails), shared by the audit tests.
// GPU i and rail NIC i sit under one PCIe switch (root port 0000:2i:00.0,
// upstream port 0000:3i:00.0, downstream ports 0000:4i:00.0 and 0000:4i:01.0)
// with ACS source validation on and no P2P redirect.
#pragma once

#include "lockstep/audit/node_facts.h"

namespace lockstep::audit::testing {

// The bridges above downstream port `port` of switch `sw`.
inline std::vector<PcieBridge> SwitchPath(int sw, int port) {
  const std::string n = std::to_string(sw);
  return {PcieBridge{.bdf = "0000:2" + n + ":00.0", .config_readable = true, .acs_control = kAcsSourceValidation},
          PcieBridge{.bdf = "0000:3" + n + ":00.0", .config_readable = true},
          PcieBridge{.bdf = "0000:4" + n + ":0" + std::to_string(port) + ".0",
                     .config_readable = true,
                     .acs_control = kAcsSourceValidation}};
}

inline NodeFacts GoodNode() {
  NodeFacts f;
  f.kernel = "6.1.0-18-amd64";
  f.nvidia_driver = "550.54.15";
  f.rdma_core = "1.14.44.0";
  f.modules = {{"nvidia", true}, {"nvidia_peermem", true}, {"mlx5_core", true}};
  for (unsigned i = 0; i < 2; ++i) {
    GpuFacts g;
    g.index = i;
    g.bus_id = "00000000:1" + std::to_string(i) + ":00.0";
    g.ecc_enabled = true;
    g.ecc_pending = true;
    g.persistence_mode = true;
    g.sm_clock_mhz = 1980;
    g.sm_clock_max_mhz = 1980;
    g.clocks_event_reasons = 0;
    g.remap_pending = false;
    g.remap_failed = false;
    g.ecc_corrected_volatile = 0;
    g.ecc_uncorrected_volatile = 0;
    g.ecc_corrected_aggregate = 3;
    g.ecc_uncorrected_aggregate = 0;
    g.retired_pages = 0;
    g.pcie_replays = 0;
    f.gpus.push_back(g);
    f.pcie.push_back(PcieLink{.bdf = "0000:1" + std::to_string(i) + ":00.0",
                              .role = "gpu" + std::to_string(i),
                              .is_gpu = true,
                              .speed_gts = 32,
                              .max_speed_gts = 32,
                              .width = 16,
                              .max_width = 16,
                              .aer_correctable = 0,
                              .aer_nonfatal = 0,
                              .aer_fatal = 0,
                              .numa_node = static_cast<int>(i),
                              .upstream = SwitchPath(static_cast<int>(i), 0)});
  }
  f.default_route_interface = "eth0";
  f.frontend =
      NetInterface{.name = "eth0", .present = true, .operstate = "up", .mtu = 1500, .ipv4 = {"192.168.1.7/24"}};
  for (int r = 0; r < 2; ++r) {
    const std::string name = "rail" + std::to_string(r);
    f.rails.push_back(NetInterface{.name = name,
                                   .present = true,
                                   .operstate = "up",
                                   .mtu = 9000,
                                   .ipv4 = {"10.0." + std::to_string(r) + ".7/24"}});
    f.pcie.push_back(PcieLink{.bdf = "0000:8" + std::to_string(r) + ":00.0",
                              .role = "nic:" + name,
                              .speed_gts = 16,
                              .max_speed_gts = 16,
                              .width = 16,
                              .max_width = 16,
                              .numa_node = r,
                              .upstream = SwitchPath(r, 1)});
    f.rdma.push_back(RdmaPort{.device = "mlx5_" + std::to_string(r),
                              .port = 1,
                              .state = "ACTIVE",
                              .link_layer = "Ethernet",
                              .rate_gbps = 200,
                              .net_device = name,
                              .rocev2_gid_index = 3,
                              .firmware = "28.39.1002"});
  }
  f.xids = std::vector<XidEvent>{{"0000:10:00", 13}};  // an application error: not critical
  f.nameservers = std::vector<std::string>{"10.96.0.10"};
  f.api_server = ApiServerName{.host = "api.cluster.example", .addresses = {"192.168.1.2"}};
  return f;
}

}  // namespace lockstep::audit::testing
