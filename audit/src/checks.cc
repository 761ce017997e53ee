#include "lockstep/audit/checks.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "lockstep/audit/network_checks.h"

namespace lockstep::audit {
namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Check NotPresent(std::string id, std::string subject, std::string why, PoolRule pool = PoolRule::kNone) {
  return Check{.id = std::move(id),
               .subject = std::move(subject),
               .observed = "not present",
               .verdict = Verdict::kNotPresent,
               .message = std::move(why),
               .pool = pool};
}

// A value compared with the pool's majority; absent: NotPresent (also
// compared, so one node without what its pool has fails).
Check Majority(std::string id, std::string subject, const std::optional<std::string>& value, std::string absent) {
  if (!value) return NotPresent(std::move(id), std::move(subject), std::move(absent), PoolRule::kMajority);
  return Check{.id = std::move(id), .subject = std::move(subject), .observed = *value, .pool = PoolRule::kMajority};
}

// Passes when `ok`; otherwise fails with `message`.
Check Absolute(std::string id, std::string subject, std::string observed, std::string expected, bool ok,
               std::string message) {
  return Check{.id = std::move(id),
               .subject = std::move(subject),
               .observed = std::move(observed),
               .expected = std::move(expected),
               .verdict = ok ? Verdict::kPass : Verdict::kFail,
               .message = ok ? "" : std::move(message)};
}

// A counter: zero passes (when `must_be_zero`) or compared with the pool's median.
Check Counter(std::string id, std::string subject, const std::optional<uint64_t>& value, bool must_be_zero,
              const std::string& what) {
  if (!value) return NotPresent(std::move(id), std::move(subject), what + " not reported");
  if (must_be_zero) {
    return Absolute(std::move(id), std::move(subject), std::to_string(*value), "0", *value == 0,
                    what + ": " + std::to_string(*value) + " (expected 0)");
  }
  return Check{.id = std::move(id),
               .subject = std::move(subject),
               .observed = std::to_string(*value),
               .number = static_cast<double>(*value),
               .pool = PoolRule::kUpper};
}

void Software(const NodeFacts& f, const CheckOptions& o, std::vector<Check>& out) {
  out.push_back(Majority("software.kernel", "", f.kernel, "/proc/sys/kernel/osrelease not readable"));
  out.push_back(Majority("software.nvidia_driver", "", f.nvidia_driver, "no NVIDIA driver"));
  out.push_back(Majority("software.cuda", "", f.cuda, "no CUDA toolkit found"));
  out.push_back(Majority("software.nccl", "", f.nccl, "no libnccl found"));
  out.push_back(Majority("software.rdma_core", "", f.rdma_core, "no libibverbs found"));
  const std::set<std::string> required(o.required_modules.begin(), o.required_modules.end());
  std::set<std::string> names;
  for (const auto& [name, loaded] : f.modules) names.insert(name);
  names.insert(required.begin(), required.end());
  for (const std::string& name : names) {
    auto it = f.modules.find(name);
    const bool loaded = it != f.modules.end() && it->second;
    if (loaded) {
      out.push_back(Check{.id = "software.module", .subject = name, .observed = "loaded", .pool = PoolRule::kMajority});
    } else if (required.count(name)) {
      out.push_back(Absolute("software.module", name, "not loaded", "loaded", false,
                             "module " + name + " is not loaded (required): modprobe " + name));
    } else {
      out.push_back(Check{.id = "software.module",
                          .subject = name,
                          .observed = "not loaded",
                          .verdict = Verdict::kNotPresent,
                          .message = "module " + name + " is not loaded",
                          .pool = PoolRule::kMajority});
    }
  }
}

void Memory(const NodeFacts& f, std::vector<Check>& out) {
  for (const GpuFacts& g : f.gpus) {
    const std::string s = "gpu" + std::to_string(g.index);
    if (g.error) {
      out.push_back(
          Absolute("memory.readable", s, "error", "readable", false, "NVML cannot read the GPU: " + *g.error));
      continue;
    }
    if (g.ecc_enabled) {
      out.push_back(Check{.id = "memory.ecc_mode",
                          .subject = s,
                          .observed = *g.ecc_enabled ? "enabled" : "disabled",
                          .pool = PoolRule::kMajority});
    } else {
      out.push_back(NotPresent("memory.ecc_mode", s, "ECC mode not reported (a GPU without ECC, or the driver)"));
    }
    // The mode after the next reset: a node about to change it differs from its pool.
    if (g.ecc_pending) {
      Check c{.id = "memory.ecc_mode_pending",
              .subject = s,
              .observed = *g.ecc_pending ? "enabled" : "disabled",
              .pool = PoolRule::kMajority};
      if (g.ecc_enabled && *g.ecc_enabled != *g.ecc_pending) {
        c.message = std::string("ECC turns ") + (*g.ecc_pending ? "on" : "off") + " at the next GPU reset or reboot";
      }
      out.push_back(std::move(c));
    } else {
      out.push_back(NotPresent("memory.ecc_mode_pending", s, "pending ECC mode not reported"));
    }
    if (g.remap_pending) {
      out.push_back(Absolute("memory.row_remap_pending", s, *g.remap_pending ? "true" : "false", "false",
                             !*g.remap_pending, "a row remap is pending: reset the GPU (drain the node first)"));
    } else {
      out.push_back(NotPresent("memory.row_remap_pending", s, "row remapping not reported (pre-Ampere GPU or driver)"));
    }
    if (g.remap_failed) {
      out.push_back(Absolute("memory.row_remap_failed", s, *g.remap_failed ? "true" : "false", "false",
                             !*g.remap_failed, "a row remap failed: the GPU needs service"));
    } else {
      out.push_back(NotPresent("memory.row_remap_failed", s, "row remapping not reported (pre-Ampere GPU or driver)"));
    }
    out.push_back(Counter("memory.ecc_uncorrected_volatile", s, g.ecc_uncorrected_volatile, true,
                          "uncorrected ECC errors since the driver loaded"));
    out.push_back(Counter("memory.ecc_corrected_volatile", s, g.ecc_corrected_volatile, false,
                          "corrected ECC errors since the driver loaded"));
    out.push_back(Counter("memory.ecc_uncorrected_aggregate", s, g.ecc_uncorrected_aggregate, false,
                          "uncorrected ECC errors over the GPU's life"));
    out.push_back(Counter("memory.retired_pages", s, g.retired_pages, false, "retired pages"));
  }
}

void Pcie(const NodeFacts& f, std::vector<Check>& out) {
  for (const PcieLink& l : f.pcie) {
    const std::string s = l.role.empty() ? l.bdf : l.role;
    const std::string at = " (" + l.bdf + ")";
    if (l.width && l.max_width) {
      out.push_back(Absolute("pcie.link_width", s, "x" + std::to_string(*l.width), "x" + std::to_string(*l.max_width),
                             *l.width >= *l.max_width,
                             "link downtrained to x" + std::to_string(*l.width) + " of x" +
                                 std::to_string(*l.max_width) + at + ": reseat the card or check the riser"));
    } else {
      out.push_back(NotPresent("pcie.link_width", s, "link width not in sysfs" + at));
    }
    if (l.speed_gts && l.max_speed_gts) {
      if (l.is_gpu) {
        // An idle GPU lowers its link speed to save power: compare with the
        // pool's GPUs rather than with the maximum.
        out.push_back(Check{.id = "pcie.link_speed",
                            .subject = s,
                            .observed = Num(*l.speed_gts) + " GT/s",
                            .pool = PoolRule::kMajority});
      } else {
        out.push_back(
            Absolute("pcie.link_speed", s, Num(*l.speed_gts) + " GT/s", Num(*l.max_speed_gts) + " GT/s",
                     *l.speed_gts >= *l.max_speed_gts,
                     "link trained at " + Num(*l.speed_gts) + " GT/s of " + Num(*l.max_speed_gts) + " GT/s" + at));
      }
    } else {
      out.push_back(NotPresent("pcie.link_speed", s, "link speed not in sysfs" + at));
    }
    out.push_back(Counter("pcie.aer_fatal", s, l.aer_fatal, true, "fatal AER errors" + at));
    out.push_back(Counter("pcie.aer_nonfatal", s, l.aer_nonfatal, true, "non-fatal AER errors" + at));
    out.push_back(Counter("pcie.aer_correctable", s, l.aer_correctable, false, "correctable AER errors" + at));
  }
  for (const GpuFacts& g : f.gpus) {
    if (g.error) continue;
    out.push_back(Counter("pcie.replays", "gpu" + std::to_string(g.index), g.pcie_replays, false, "PCIe replays"));
  }
}

// nvmlClocksEventReason* bits (NVML's values) and how the audit names them.
struct ClockReason {
  uint64_t bit;
  const char* name;
  bool fails;  // the GPU is slowed by its hardware or its temperature
};
constexpr ClockReason kClockReasons[] = {
    {0x1, "gpu_idle", false},
    {0x2, "applications_clocks_setting", false},
    {0x4, "sw_power_cap", false},
    {0x8, "hw_slowdown", true},
    {0x10, "sync_boost", false},
    {0x20, "sw_thermal_slowdown", true},
    {0x40, "hw_thermal_slowdown", true},
    {0x80, "hw_power_brake_slowdown", true},
    {0x100, "display_clock_setting", false},
};

// Persistence mode, the SM clock's maximum (the pool's majority) and the
// clock event reasons now (absolute: a GPU slowed by its hardware or its
// temperature fails, whatever its pool shows).
void GpuClocks(const NodeFacts& f, std::vector<Check>& out) {
  for (const GpuFacts& g : f.gpus) {
    if (g.error) continue;
    const std::string s = "gpu" + std::to_string(g.index);
    if (g.persistence_mode) {
      out.push_back(Check{.id = "node.persistence_mode",
                          .subject = s,
                          .observed = *g.persistence_mode ? "enabled" : "disabled",
                          .pool = PoolRule::kMajority});
    } else {
      out.push_back(NotPresent("node.persistence_mode", s, "persistence mode not reported"));
    }
    if (g.sm_clock_max_mhz) {
      out.push_back(Check{.id = "node.sm_clock_max",
                          .subject = s,
                          .observed = std::to_string(*g.sm_clock_max_mhz) + " MHz",
                          .number = static_cast<double>(*g.sm_clock_max_mhz),
                          .pool = PoolRule::kMajority});
    } else {
      out.push_back(NotPresent("node.sm_clock_max", s, "maximum SM clock not reported"));
    }
    if (!g.clocks_event_reasons) {
      out.push_back(NotPresent("node.clocks_throttle", s, "clock event reasons not reported"));
      continue;
    }
    std::string active, failing;
    uint64_t known = 0;
    for (const ClockReason& r : kClockReasons) {
      known |= r.bit;
      if (!(*g.clocks_event_reasons & r.bit)) continue;
      active += (active.empty() ? "" : ",") + std::string(r.name);
      if (r.fails) failing += (failing.empty() ? "" : ",") + std::string(r.name);
    }
    if (const uint64_t other = *g.clocks_event_reasons & ~known; other != 0) {
      char hex[24];
      std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(other));
      active += (active.empty() ? "" : ",") + std::string(hex);
    }
    std::string clock;
    if (g.sm_clock_mhz && g.sm_clock_max_mhz) {
      clock = " (SM clock " + std::to_string(*g.sm_clock_mhz) + " of " + std::to_string(*g.sm_clock_max_mhz) + " MHz)";
    }
    Check c = Absolute("node.clocks_throttle", s, active.empty() ? "none" : active,
                       "no HW/thermal slowdown or power brake", failing.empty(),
                       "clocks held down by " + failing + clock +
                           ": the GPU protects itself (cooling, power supply or an external power brake)");
    if (g.sm_clock_mhz) c.number = *g.sm_clock_mhz;
    out.push_back(std::move(c));
  }
}

// ACS on the path between each GPU and its nearest rail NIC (the one that
// shares the most bridges with it). P2P request/completion redirect on a
// bridge below their common switch sends GPUDirect P2P/RDMA up through the
// root complex. Compared with the pool too (a node whose GPU shares no
// switch with a NIC, where its pool's do, is cabled or slotted otherwise).
void Acs(const NodeFacts& f, std::vector<Check>& out) {
  constexpr uint16_t kRedirect = kAcsRequestRedirect | kAcsCompletionRedirect;
  for (const PcieLink& g : f.pcie) {
    if (!g.is_gpu) continue;
    const std::string s = g.role.empty() ? g.bdf : g.role;
    if (g.upstream.empty()) {
      out.push_back(NotPresent("pcie.acs", s, "no PCIe bridge above " + g.bdf + " in sysfs"));
      continue;
    }
    const PcieLink* nic = nullptr;
    size_t shared = 0;
    for (const PcieLink& n : f.pcie) {
      if (n.is_gpu) continue;
      size_t k = 0;
      while (k < g.upstream.size() && k < n.upstream.size() && g.upstream[k].bdf == n.upstream[k].bdf) ++k;
      if (!nic || k > shared) {
        nic = &n;
        shared = k;
      }
    }
    if (!nic) {
      out.push_back(NotPresent("pcie.acs", s, "no rail NIC"));
      continue;
    }
    const std::string pair = s + " and " + (nic->role.empty() ? nic->bdf : nic->role);
    if (shared == 0) {
      out.push_back(
          Check{.id = "pcie.acs",
                .subject = s,
                .observed = "no shared switch",
                .message = pair + " share no PCIe bridge: GPUDirect RDMA between them crosses the root complex",
                .pool = PoolRule::kMajority});
      continue;
    }
    std::string redirect, unreadable;
    for (const PcieLink* side : {&g, nic}) {
      for (size_t i = shared; i < side->upstream.size(); ++i) {
        const PcieBridge& b = side->upstream[i];
        if (!b.config_readable) {
          unreadable += (unreadable.empty() ? "" : ", ") + b.bdf;
        } else if (b.acs_control && (*b.acs_control & kRedirect)) {
          char bits[64];
          std::snprintf(bits, sizeof bits, " (ACSCtl 0x%04x: ReqRedir%c CmpltRedir%c)", *b.acs_control,
                        *b.acs_control & kAcsRequestRedirect ? '+' : '-',
                        *b.acs_control & kAcsCompletionRedirect ? '+' : '-');
          redirect += (redirect.empty() ? "" : ", ") + b.bdf + bits;
        }
      }
    }
    if (!redirect.empty()) {
      out.push_back(Check{.id = "pcie.acs",
                          .subject = s,
                          .observed = "redirect",
                          .expected = "off",
                          .verdict = Verdict::kFail,
                          .message = "ACS P2P redirect on " + redirect + " between " + pair +
                                     ": GPUDirect P2P/RDMA goes through the root complex; turn ACS off on those "
                                     "ports (BIOS, or setpci ECAP_ACS+6.w=0)",
                          .pool = PoolRule::kMajority});
    } else if (!unreadable.empty()) {
      out.push_back(NotPresent("pcie.acs", s,
                               "the PCI config space of " + unreadable + " is not readable (needs CAP_SYS_ADMIN)"));
    } else {
      out.push_back(
          Check{.id = "pcie.acs", .subject = s, .observed = "off", .expected = "off", .pool = PoolRule::kMajority});
    }
  }
}

// The API server's name resolves (when it is a name).
void ApiDns(const NodeFacts& f, std::vector<Check>& out) {
  if (!f.api_server) {
    out.push_back(NotPresent("frontend.api_dns", "", "no API server known (no kubeconfig, not in a cluster)"));
  } else if (f.api_server->is_address) {
    out.push_back(NotPresent("frontend.api_dns", "",
                             "the API server is addressed by IP (" + f.api_server->host + "): no name to resolve"));
  } else {
    std::string list;
    for (const std::string& a : f.api_server->addresses) list += (list.empty() ? "" : ",") + a;
    out.push_back(Absolute("frontend.api_dns", "", list.empty() ? "unresolved" : list,
                           "an address for " + f.api_server->host, !list.empty(),
                           "the API server's name " + f.api_server->host + " does not resolve" +
                               (f.api_server->error.empty() ? "" : ": " + f.api_server->error)));
  }
}

void NodeLevel(const NodeFacts& f, std::vector<Check>& out) {
  if (f.nvml_unavailable && f.gpus.empty()) {
    out.push_back(NotPresent("node.gpu_count", "", *f.nvml_unavailable, PoolRule::kMajority));
    return;
  }
  Check c{.id = "node.gpu_count", .observed = std::to_string(f.gpus.size()), .pool = PoolRule::kMajority};
  if (f.gpus.empty()) {
    c.verdict = Verdict::kNotPresent;
    c.message = "no GPU";
  }
  out.push_back(std::move(c));
}

void FrontEnd(const NodeFacts& f, std::vector<Check>& out) {
  if (!f.default_route_interface) {
    out.push_back(Absolute("frontend.default_route", "", "none", "present", false,
                           "no default route (/proc/net/route): the node cannot reach the API server"));
    return;
  }
  const std::string& dev = *f.default_route_interface;
  out.push_back(Absolute("frontend.default_route", "", dev, "present", true, ""));
  if (!f.frontend || !f.frontend->present) {
    out.push_back(Absolute("frontend.up", dev, "missing", "up", false, "the default route's interface is missing"));
    return;
  }
  const NetInterface& i = *f.frontend;
  out.push_back(Absolute("frontend.up", dev, i.operstate, "up", i.operstate == "up" || i.operstate == "unknown",
                         "interface " + dev + " is " + i.operstate));
  if (i.mtu) {
    out.push_back(
        Check{.id = "frontend.mtu", .subject = dev, .observed = std::to_string(*i.mtu), .pool = PoolRule::kMajority});
  }
  out.push_back(Absolute("frontend.address", dev, i.ipv4.empty() ? "none" : i.ipv4.front(), "an IPv4 address",
                         !i.ipv4.empty(), "interface " + dev + " has no IPv4 address"));
}

// "10.0.1.5/24" -> "10.0.1.0/24"; "" when not an IPv4 CIDR.
std::string Subnet(const std::string& cidr) {
  unsigned a, b, c, d, p;
  char tail;
  if (std::sscanf(cidr.c_str(), "%u.%u.%u.%u/%u%c", &a, &b, &c, &d, &p, &tail) != 5) return "";
  if (a > 255 || b > 255 || c > 255 || d > 255 || p > 32) return "";
  const uint32_t ip = (a << 24) | (b << 16) | (c << 8) | d;
  const uint32_t mask = p == 0 ? 0 : ~uint32_t{0} << (32 - p);
  const uint32_t n = ip & mask;
  return std::to_string(n >> 24) + "." + std::to_string((n >> 16) & 255) + "." + std::to_string((n >> 8) & 255) + "." +
         std::to_string(n & 255) + "/" + std::to_string(p);
}

void BackEnd(const NodeFacts& f, const CheckOptions& o, std::vector<Check>& out) {
  for (size_t r = 0; r < f.rails.size(); ++r) {
    const NetInterface& i = f.rails[r];
    const std::string s = "rail" + std::to_string(r);
    if (!i.present) {
      if (o.rails_configured) {
        out.push_back(Absolute("backend.nic_present", s, "missing", i.name, false,
                               "rail NIC " + i.name + " is missing (/sys/class/net/" + i.name + ")"));
      } else {
        out.push_back(NotPresent("backend.nic_present", s, "no NIC " + i.name));
      }
      continue;
    }
    out.push_back(Absolute("backend.nic_present", s, i.name, i.name, true, ""));
    out.push_back(
        Absolute("backend.up", s, i.operstate, "up", i.operstate == "up", "rail NIC " + i.name + " is " + i.operstate));
    if (i.mtu) {
      out.push_back(
          Check{.id = "backend.mtu", .subject = s, .observed = std::to_string(*i.mtu), .pool = PoolRule::kMajority});
    } else {
      out.push_back(NotPresent("backend.mtu", s, "MTU not readable"));
    }
    const std::string subnet = i.ipv4.empty() ? "" : Subnet(i.ipv4.front());
    if (subnet.empty()) {
      out.push_back(Absolute("backend.subnet", s, "none", "an IPv4 address", false,
                             "rail NIC " + i.name + " has no IPv4 address"));
    } else {
      out.push_back(Check{.id = "backend.subnet", .subject = s, .observed = subnet, .pool = PoolRule::kMajority});
    }
  }
  for (const RdmaPort& p : f.rdma) {
    std::string s = p.device + "/" + std::to_string(p.port);
    for (size_t r = 0; r < f.rails.size(); ++r) {
      if (!p.net_device.empty() && f.rails[r].name == p.net_device) s = "rail" + std::to_string(r);
    }
    out.push_back(Absolute("backend.rdma_state", s, p.state, "ACTIVE", p.state == "ACTIVE",
                           p.device + " port " + std::to_string(p.port) + " is " + p.state));
    out.push_back(
        Check{.id = "backend.rdma_link_layer", .subject = s, .observed = p.link_layer, .pool = PoolRule::kMajority});
    if (p.rate_gbps) {
      out.push_back(Check{.id = "backend.rdma_rate",
                          .subject = s,
                          .observed = Num(*p.rate_gbps) + " Gb/s",
                          .number = *p.rate_gbps,
                          .pool = PoolRule::kMajority});
    } else {
      out.push_back(NotPresent("backend.rdma_rate", s, "rate not in sysfs"));
    }
    if (p.link_layer == "Ethernet") {
      if (p.rocev2_gid_index) {
        out.push_back(Check{.id = "backend.rocev2_gid",
                            .subject = s,
                            .observed = std::to_string(*p.rocev2_gid_index),
                            .pool = PoolRule::kMajority});
      } else {
        out.push_back(
            Absolute("backend.rocev2_gid", s, "none", "a RoCE v2 GID with an IPv4 address", false,
                     p.device + " port " + std::to_string(p.port) +
                         " has no RoCE v2 GID with an IPv4 address: the NIC has no address or RoCE v2 is off"));
      }
    } else {
      out.push_back(NotPresent("backend.rocev2_gid", s, "link layer " + p.link_layer + " (not RoCE)"));
    }
  }
}

// Xids that mean the GPU needs attention before a long job (NVIDIA's Xid
// catalogue): double-bit ECC, row remapping, NVLink, fallen off the bus,
// contained/uncontained ECC, GSP errors.
bool CriticalXid(int code) {
  for (int c : {48, 63, 64, 74, 79, 92, 94, 95, 119, 120}) {
    if (code == c) return true;
  }
  return false;
}

void Extra(const NodeFacts& f, std::vector<Check>& out) {
  // NIC firmware per rail: the pool's majority.
  for (const RdmaPort& p : f.rdma) {
    std::string s = p.device + "/" + std::to_string(p.port);
    for (size_t r = 0; r < f.rails.size(); ++r) {
      if (!p.net_device.empty() && f.rails[r].name == p.net_device) s = "rail" + std::to_string(r);
    }
    if (p.firmware.empty()) {
      out.push_back(NotPresent("software.nic_firmware", s, p.device + " reports no fw_ver", PoolRule::kMajority));
    } else {
      out.push_back(
          Check{.id = "software.nic_firmware", .subject = s, .observed = p.firmware, .pool = PoolRule::kMajority});
    }
  }
  // NUMA: each device's node against its pool; each GPU with a rail NIC on its node.
  std::set<int> nic_nodes;
  bool any_nic = false;
  for (const PcieLink& l : f.pcie) {
    if (l.is_gpu) continue;
    any_nic = true;
    if (l.numa_node) nic_nodes.insert(*l.numa_node);
  }
  for (const PcieLink& l : f.pcie) {
    const std::string s = l.role.empty() ? l.bdf : l.role;
    if (!l.numa_node) {
      out.push_back(NotPresent("node.numa", s, "no NUMA node in sysfs (" + l.bdf + ")"));
      continue;
    }
    out.push_back(Check{.id = "node.numa",
                        .subject = s,
                        .observed = "numa" + std::to_string(*l.numa_node),
                        .pool = PoolRule::kMajority});
    if (!l.is_gpu) continue;
    if (!any_nic || nic_nodes.empty()) {
      out.push_back(NotPresent("node.gpu_nic_numa", s, "no rail NIC with a NUMA node"));
      continue;
    }
    const bool ok = nic_nodes.count(*l.numa_node) > 0;
    out.push_back(Absolute("node.gpu_nic_numa", s, "numa" + std::to_string(*l.numa_node),
                           "a rail NIC on the same NUMA node", ok,
                           "no rail NIC on the GPU's NUMA node " + std::to_string(*l.numa_node) +
                               ": its traffic crosses the socket interconnect"));
  }
  // Xids since boot, per GPU.
  if (!f.xids) {
    out.push_back(NotPresent("memory.xid", "", "the kernel log is not readable (CAP_SYSLOG)"));
  } else {
    std::map<std::string, std::map<int, int>> by_gpu;  // subject -> code -> count
    for (const PcieLink& l : f.pcie) {
      if (l.is_gpu) by_gpu[l.role];
    }
    for (const XidEvent& x : *f.xids) {
      std::string s = "pci:" + x.pci;
      for (const PcieLink& l : f.pcie) {
        if (l.is_gpu && l.bdf.rfind(x.pci, 0) == 0) s = l.role;
      }
      ++by_gpu[s][x.code];
    }
    for (const auto& [s, codes] : by_gpu) {
      std::string seen, critical;
      int total = 0;
      for (const auto& [code, n] : codes) {
        seen += (seen.empty() ? "" : ", ") + std::to_string(code) + " x" + std::to_string(n);
        if (CriticalXid(code)) critical += (critical.empty() ? "" : ", ") + std::to_string(code);
        total += n;
      }
      out.push_back(Absolute("memory.xid", s, seen.empty() ? "none" : seen, "no critical Xid", critical.empty(),
                             "critical Xid " + critical + " since boot: drain and check the GPU"));
      out.back().number = total;
    }
  }
  // DNS: the front end needs a resolver to reach the API server by name.
  if (!f.nameservers) {
    out.push_back(NotPresent("frontend.dns", "", "no /etc/resolv.conf"));
  } else {
    std::string list;
    for (const std::string& n : *f.nameservers) list += (list.empty() ? "" : ",") + n;
    out.push_back(Absolute("frontend.dns", "", list.empty() ? "none" : list, "a nameserver", !list.empty(),
                           "/etc/resolv.conf names no nameserver: the API server's name does not resolve"));
  }
  // NCCL: nccl-tests are not run by the audit yet; say why.
  std::string why;
  if (f.gpus.empty()) {
    why = "no GPU on this node";
  } else if (f.nccl_tests.empty()) {
    why = "nccl-tests (all_reduce_perf) not installed";
  } else {
    why = "nccl-tests found (" + f.nccl_tests + ") but the audit does not run them yet";
  }
  out.push_back(NotPresent("nccl.all_reduce", "", why));
}

}  // namespace

std::vector<Check> RunChecks(const NodeFacts& facts, const CheckOptions& options) {
  std::vector<Check> out;
  Software(facts, options, out);
  Memory(facts, out);
  Pcie(facts, out);
  Acs(facts, out);
  NodeLevel(facts, out);
  GpuClocks(facts, out);
  FrontEnd(facts, out);
  ApiDns(facts, out);
  BackEnd(facts, options, out);
  Extra(facts, out);
  NetworkChecks(facts, out);
  return out;
}

}  // namespace lockstep::audit
