// CollectFacts: the fleet audit's collectors (adapters). They read a node's
// facts (audit::NodeFacts) from a sysfs/procfs root given as a path ("/" on
// a node; a fake tree in tests) and its GPUs from the GpuSource port
// (NvmlGpuSource, NVML by dlopen). Absent files, devices and libraries leave
// the fact empty (the checks say NotPresent); nothing here fails the
// collection.
//
// What is read, under `root`:
//   proc/sys/kernel/osrelease, proc/modules, proc/net/route (the default
//   route's interface, and each interface's connected IPv4 subnets: the
//   kernel's prefix routes, so a fake tree needs no address API)
//   sys/module/nvidia/version (without NVML)
//   sys/bus/pci/devices/<bdf>/{vendor,class,current_link_speed,max_link_speed,
//     current_link_width,max_link_width,aer_dev_correctable,aer_dev_fatal,
//     aer_dev_nonfatal}: NVIDIA display/3D functions are the GPUs, in BDF order
//   sys/class/net/<if>/{operstate,mtu,device -> the PCI function}
//   sys/class/infiniband/<dev>/ports/<n>/{state,link_layer,rate,gids/<i>,
//     gid_attrs/types/<i>,gid_attrs/ndevs/<i>}, <dev>/device/net/<if>
//   usr/local/cuda/version.json; libnccl.so.<v> and libibverbs.so.<v> in the
//   usual library directories
//   sys/bus/pci/devices/<bdf>/numa_node (GPUs and rail NICs),
//   sys/class/infiniband/<dev>/fw_ver (NIC firmware), dev/kmsg (Xids since
//   boot: "NVRM: Xid (PCI:<bus>): <code>", read without blocking; needs
//   CAP_SYSLOG, else NotPresent), etc/resolv.conf (nameservers), and
//   nccl-tests' all_reduce_perf in usr/local/bin, usr/bin, opt/nccl-tests/build
//   sys/bus/pci/devices/<bdf> as a link into sys/devices/pci<domain:bus>/...:
//     the bridges above each GPU and rail NIC, and each bridge's config (its
//     ACS extended capability's control register; beyond the first 256
//     bytes only with CAP_SYS_ADMIN, else "not readable")
//   the API server's host name resolved (options.api_server, options.resolve)
//
// Thread-compatible: a plain function; the GpuSource is used by one caller.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lockstep/agent/gpu/gpu_source.h"
#include "lockstep/audit/node_facts.h"

namespace lockstep::agent::audit {

inline const std::vector<std::string> kWatchedModules = {"nvidia",  "nvidia_uvm", "nvidia_peermem",
                                                         "ib_core", "ib_uverbs",  "mlx5_core"};

struct CollectOptions {
  std::string root = "/";
  // Rail NICs in rail order; empty: the net devices of the RDMA devices, by name.
  std::vector<std::string> rails{};
  std::vector<std::string> modules = kWatchedModules;
  // The API server: a URL ("https://api.example:6443") or a host; "" when
  // none is known (frontend.api_dns is then NotPresent).
  std::string api_server{};
  // Resolves a host name to its addresses; empty: getaddrinfo (blocking,
  // the resolver's own timeouts). Tests inject one.
  std::function<Result<std::vector<std::string>>(const std::string& host)> resolve{};
};

// `gpus` may be null (no NVML): the GPU facts then come from sysfs alone.
lockstep::audit::NodeFacts CollectFacts(const CollectOptions& options, gpu::GpuSource* gpus);

// "32.0 GT/s PCIe" -> 32; "Unknown" -> nullopt.
std::optional<double> ParseLinkSpeed(const std::string& text);
// "200 Gb/sec (4X HDR)" -> 200.
std::optional<double> ParseRdmaRate(const std::string& text);
// "https://[fd00::1]:6443/x" -> "fd00::1"; "api.example:6443" -> "api.example".
std::string ApiServerHost(const std::string& server);
// Whether `host` is an IPv4 or IPv6 address.
bool IsIpAddress(const std::string& host);
// getaddrinfo: the host's addresses (IPv4 and IPv6, each once, in the
// resolver's order), or Unavailable with gai_strerror's reason.
Result<std::vector<std::string>> ResolveHost(const std::string& host);
// The ACS Control register from a function's config space (the bytes of
// sys/bus/pci/devices/<bdf>/config): nullopt when it has no ACS extended
// capability. REQUIRES: config.size() > 0x100 (the extended space).
std::optional<uint16_t> AcsControl(const std::string& config);

// "00000000:3B:00.0" (NVML) -> "0000:3b:00.0" (sysfs).
std::string SysfsBdf(const std::string& nvml_bus_id);

}  // namespace lockstep::agent::audit
