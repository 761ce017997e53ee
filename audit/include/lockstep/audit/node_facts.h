// NodeFacts: what the collectors read from one node (sysfs, procfs, the
// library directories and NVML), as plain values. An empty optional or list
// means "not there" (no NVIDIA driver, no RDMA device, no AER counters); the
// checks turn absence into NotPresent, never into a failure of their own.
// Thread-compatible values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/audit/network_facts.h"

namespace lockstep::audit {

// A PCIe bridge above a device (a root port, a switch's upstream or
// downstream port), with its ACS Control register (the ACS extended
// capability of its config space, sys/bus/pci/devices/<bdf>/config).
struct PcieBridge {
  std::string bdf;
  // false: the extended config space could not be read (it needs
  // CAP_SYS_ADMIN: an unprivileged read sees the first 64 bytes).
  bool config_readable = false;
  // The ACS Control register; nullopt when readable and the bridge has no
  // ACS capability (then it redirects nothing).
  std::optional<uint16_t> acs_control{};
  bool operator==(const PcieBridge&) const = default;
};

// ACS Control bits (PCIe base spec, 7.7.8.3).
inline constexpr uint16_t kAcsSourceValidation = 0x01, kAcsTranslationBlocking = 0x02, kAcsRequestRedirect = 0x04,
                          kAcsCompletionRedirect = 0x08, kAcsUpstreamForwarding = 0x10, kAcsEgressControl = 0x20,
                          kAcsDirectTranslatedP2p = 0x40;

// A PCIe function's link (/sys/bus/pci/devices/<bdf>/{current,max}_link_*,
// aer_dev_{correctable,fatal,nonfatal}).
struct PcieLink {
  std::string bdf;   // "0000:17:00.0"
  std::string role;  // "gpu0", "nic:eth1": how checks name it
  bool is_gpu = false;
  std::optional<double> speed_gts{}, max_speed_gts{};                      // GT/s
  std::optional<int> width{}, max_width{};                                 // lanes
  std::optional<uint64_t> aer_correctable{}, aer_nonfatal{}, aer_fatal{};  // TOTAL_ERR_*
  std::optional<int> numa_node{};  // numa_node; nullopt when absent or -1 (no NUMA)
  // The bridges between the root complex and this function, root port first
  // (from the sysfs device path); empty when sysfs shows none.
  std::vector<PcieBridge> upstream{};
  bool operator==(const PcieLink&) const = default;
};

// An NVIDIA GPU as NVML reports it (the subset the audit judges).
struct GpuFacts {
  unsigned index = 0;
  std::string bus_id{};
  std::optional<std::string> error{};                // NVML could not read the GPU at all
  std::optional<bool> ecc_enabled{}, ecc_pending{};  // ECC mode now, and after the next reset
  std::optional<bool> persistence_mode{};
  std::optional<uint32_t> sm_clock_mhz{}, sm_clock_max_mhz{};
  std::optional<uint64_t> clocks_event_reasons{};  // NVML's nvmlClocksEventReason* bits
  std::optional<bool> remap_pending{}, remap_failed{};
  std::optional<uint64_t> ecc_corrected_volatile{}, ecc_uncorrected_volatile{};
  std::optional<uint64_t> ecc_corrected_aggregate{}, ecc_uncorrected_aggregate{};
  std::optional<uint64_t> retired_pages{};  // single- plus double-bit
  std::optional<uint64_t> pcie_replays{};
  bool operator==(const GpuFacts&) const = default;
};

// A network interface (/sys/class/net/<name>, the addresses from the kernel).
struct NetInterface {
  std::string name;
  bool present = false;
  std::string operstate{};  // "up", "down", "unknown", ...
  std::optional<int> mtu{};
  std::vector<std::string> ipv4{};  // "10.0.1.5/24"
  bool operator==(const NetInterface&) const = default;
};

// One port of an RDMA device (/sys/class/infiniband/<dev>/ports/<n>).
struct RdmaPort {
  std::string device;  // "mlx5_0"
  int port = 1;
  std::string state{};                    // "ACTIVE" (from "4: ACTIVE")
  std::string link_layer{};               // "Ethernet", "InfiniBand"
  std::optional<double> rate_gbps{};      // from "200 Gb/sec (4X HDR)"
  std::string net_device{};               // the netdev behind it ("" when none)
  std::optional<int> rocev2_gid_index{};  // the first RoCE v2 GID with an IPv4-mapped address
  std::string firmware{};                 // the device's fw_ver ("" when absent)
  bool operator==(const RdmaPort&) const = default;
};

// The API server's host name and what it resolves to (frontend.api_dns).
struct ApiServerName {
  std::string host;         // from the kubeconfig or the in-cluster environment
  bool is_address = false;  // an IP address: nothing to resolve
  std::vector<std::string> addresses{};
  std::string error{};  // why it did not resolve
  bool operator==(const ApiServerName&) const = default;
};

// One NVIDIA Xid from the kernel log ("NVRM: Xid (PCI:0000:3b:00): 79, ...").
struct XidEvent {
  std::string pci;  // "0000:3b:00" as the driver prints it
  int code = 0;
  bool operator==(const XidEvent&) const = default;
};

struct NodeFacts {
  std::optional<std::string> kernel{};            // /proc/sys/kernel/osrelease
  std::optional<std::string> nvidia_driver{};     // NVML, else /sys/module/nvidia/version
  std::optional<std::string> cuda{};              // the CUDA toolkit's version.json, when present
  std::optional<std::string> nccl{};              // libnccl.so.<version>
  std::optional<std::string> rdma_core{};         // libibverbs.so.<version>
  std::map<std::string, bool> modules{};          // watched module -> loaded (/proc/modules)
  std::optional<std::string> nvml_unavailable{};  // why NVML could not be read (no driver, ...)
  std::vector<GpuFacts> gpus{};
  std::vector<PcieLink> pcie{};                          // GPUs and rail NICs
  std::optional<std::string> default_route_interface{};  // /proc/net/route
  std::optional<NetInterface> frontend{};                // the default route's interface
  std::vector<NetInterface> rails{};                     // back-end NICs in rail order
  std::vector<RdmaPort> rdma{};
  // The kernel log's Xids (nullopt: the log could not be read).
  std::optional<std::vector<XidEvent>> xids{};
  // /etc/resolv.conf's nameservers (nullopt: no resolv.conf).
  std::optional<std::vector<std::string>> nameservers{};
  // The API server's name resolved (nullopt: no API server known).
  std::optional<ApiServerName> api_server{};
  // nccl-tests' all_reduce_perf, when found ("" when not).
  std::string nccl_tests{};
  // The back-end network over the real fabric (connectivity, latency,
  // topology); nullopt: not collected (the checks say NotPresent).
  std::optional<NetworkFacts> network{};
  bool operator==(const NodeFacts&) const = default;
};

}  // namespace lockstep::audit
