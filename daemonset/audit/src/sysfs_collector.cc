#include "lockstep/agent/audit/sysfs_collector.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

namespace lockstep::agent::audit {
namespace {

namespace fs = std::filesystem;
using lockstep::audit::GpuFacts;
using lockstep::audit::NetInterface;
using lockstep::audit::NodeFacts;
using lockstep::audit::PcieBridge;
using lockstep::audit::PcieLink;
using lockstep::audit::RdmaPort;

std::optional<std::string> ReadFile(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
}

// The first line, without surrounding spaces.
std::optional<std::string> ReadLine(const fs::path& p) {
  auto text = ReadFile(p);
  if (!text) return std::nullopt;
  std::string s = text->substr(0, text->find('\n'));
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t b = 0;
  while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  return s.substr(b);
}

template <typename T>
std::optional<T> ReadNumber(const fs::path& p) {
  auto s = ReadLine(p);
  if (!s || s->empty()) return std::nullopt;
  try {
    size_t used = 0;
    long long v = std::stoll(*s, &used, 0);
    if (used != s->size() || v < 0) return std::nullopt;
    return static_cast<T>(v);
  } catch (...) {  // std::stoll on garbage: not a number
    return std::nullopt;
  }
}

std::vector<std::string> List(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    out.push_back(it->path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// "TOTAL_ERR_FATAL 3" in an aer_dev_* file.
std::optional<uint64_t> AerTotal(const fs::path& p) {
  auto text = ReadFile(p);
  if (!text) return std::nullopt;
  std::istringstream in(*text);
  std::string key;
  uint64_t v;
  while (in >> key >> v) {
    if (key.rfind("TOTAL_ERR_", 0) == 0) return v;
  }
  return std::nullopt;
}

// "0000:3b:00.0".
bool IsBdf(const std::string& s) {
  static const std::regex kBdf("[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-7]");
  return std::regex_match(s, kBdf);
}

// The bridges above `bdf`, root port first: the BDFs in the path that
// sys/bus/pci/devices/<bdf> links to (".../pci0000:00/0000:00:01.0/0000:01:00.0/<bdf>").
std::vector<PcieBridge> Upstream(const fs::path& pci, const std::string& bdf) {
  std::error_code ec;
  const fs::path target = fs::read_symlink(pci / bdf, ec);
  if (ec) return {};
  std::vector<std::string> chain;
  for (const fs::path& part : target) {
    if (IsBdf(part.string())) chain.push_back(part.string());
  }
  if (chain.empty() || chain.back() != bdf) return {};
  chain.pop_back();
  std::vector<PcieBridge> out;
  for (const std::string& b : chain) {
    PcieBridge bridge{.bdf = b};
    auto config = ReadFile(pci / b / "config");
    if (config && config->size() > 0x100) {
      bridge.config_readable = true;
      bridge.acs_control = AcsControl(*config);
    }
    out.push_back(std::move(bridge));
  }
  return out;
}

PcieLink ReadLink(const fs::path& dev, std::string bdf, std::string role, bool is_gpu) {
  PcieLink l{.bdf = std::move(bdf), .role = std::move(role), .is_gpu = is_gpu};
  l.upstream = Upstream(dev.parent_path(), l.bdf);
  if (auto s = ReadLine(dev / "current_link_speed")) l.speed_gts = ParseLinkSpeed(*s);
  if (auto s = ReadLine(dev / "max_link_speed")) l.max_speed_gts = ParseLinkSpeed(*s);
  l.width = ReadNumber<int>(dev / "current_link_width");
  l.max_width = ReadNumber<int>(dev / "max_link_width");
  // A width of 0 or 255 is what sysfs shows for a link it cannot read.
  if (l.width && (*l.width == 0 || *l.width == 255)) l.width.reset();
  l.aer_correctable = AerTotal(dev / "aer_dev_correctable");
  l.aer_nonfatal = AerTotal(dev / "aer_dev_nonfatal");
  l.aer_fatal = AerTotal(dev / "aer_dev_fatal");
  if (auto n = ReadLine(dev / "numa_node")) {
    try {
      const int v = std::stoi(*n);
      if (v >= 0) l.numa_node = v;
    } catch (...) {  // not a number: no NUMA node
    }
  }
  return l;
}

// Routes from proc/net/route: the default route's interface, and per
// interface the connected subnets ("10.0.1.0/24").
struct Routes {
  std::optional<std::string> default_interface;
  std::map<std::string, std::vector<std::string>> subnets;
};

std::string Ipv4FromHex(uint32_t le) {
  return std::to_string(le & 255) + "." + std::to_string((le >> 8) & 255) + "." + std::to_string((le >> 16) & 255) +
         "." + std::to_string(le >> 24);
}

Routes ReadRoutes(const fs::path& file) {
  Routes r;
  auto text = ReadFile(file);
  if (!text) return r;
  std::istringstream in(*text);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    char iface[64];
    unsigned dest, gw, flags, refcnt, use, metric, mask;
    if (std::sscanf(line.c_str(), "%63s %x %x %x %u %u %u %x", iface, &dest, &gw, &flags, &refcnt, &use, &metric,
                    &mask) != 8) {
      continue;
    }
    if (!(flags & 1)) continue;  // RTF_UP
    if (dest == 0 && mask == 0) {
      if (!r.default_interface) r.default_interface = iface;
    } else if (gw == 0) {
      r.subnets[iface].push_back(Ipv4FromHex(dest) + "/" + std::to_string(__builtin_popcount(mask)));
    }
  }
  return r;
}

NetInterface ReadInterface(const fs::path& root, const std::string& name, const Routes& routes) {
  NetInterface i{.name = name};
  const fs::path dir = root / "sys/class/net" / name;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return i;
  i.present = true;
  i.operstate = ReadLine(dir / "operstate").value_or("unknown");
  i.mtu = ReadNumber<int>(dir / "mtu");
  if (auto it = routes.subnets.find(name); it != routes.subnets.end()) i.ipv4 = it->second;
  return i;
}

// The PCI function behind a net device (sys/class/net/<if>/device), or "".
std::string NetDeviceBdf(const fs::path& root, const std::string& name) {
  std::error_code ec;
  fs::path target = fs::read_symlink(root / "sys/class/net" / name / "device", ec);
  if (ec) return "";
  return target.filename().string();
}

// The first version-looking suffix of <prefix><version> in the library directories.
std::optional<std::string> LibraryVersion(const fs::path& root, const std::string& prefix) {
  static const char* kDirs[] = {
      "usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu", "usr/lib64", "usr/lib", "usr/local/lib",
      "lib/x86_64-linux-gnu"};
  std::optional<std::string> best;
  for (const char* d : kDirs) {
    for (const std::string& f : List(root / d)) {
      if (f.rfind(prefix, 0) != 0) continue;
      std::string v = f.substr(prefix.size());
      // The longest (most specific) version: libnccl.so.2.21.5 over libnccl.so.2.
      if (!v.empty() && std::isdigit(static_cast<unsigned char>(v[0])) && (!best || v.size() > best->size())) best = v;
    }
    if (best) return best;
  }
  return best;
}

std::optional<std::string> CudaVersion(const fs::path& root) {
  auto text = ReadFile(root / "usr/local/cuda/version.json");
  if (!text) return std::nullopt;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  const auto* v =
      j.contains("cuda") && j["cuda"].is_object() && j["cuda"].contains("version") ? &j["cuda"]["version"] : nullptr;
  if (!v || !v->is_string()) return std::nullopt;
  return v->get<std::string>();
}

// The kernel log's Xids: /dev/kmsg read without blocking (one record per
// read; EAGAIN at its end), or a plain file of that name in a fake tree.
std::optional<std::vector<lockstep::audit::XidEvent>> ReadXids(const fs::path& root) {
  const int fd = open((root / "dev/kmsg").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[8192];
  for (int records = 0; records < 1000000; ++records) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
      if (text.empty() || text.back() != '\n') text += '\n';
      continue;
    }
    if (n < 0 && errno == EPIPE) continue;  // a record was overwritten: go on
    break;                                  // EAGAIN (the end), 0 (a file's end), or an error
  }
  close(fd);
  std::vector<lockstep::audit::XidEvent> out;
  static const std::regex kXid(R"(NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+))");
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, kXid)) continue;
    std::string pci = m[1].str();
    std::transform(pci.begin(), pci.end(), pci.begin(), [](unsigned char c) { return std::tolower(c); });
    try {
      out.push_back({pci, std::stoi(m[2].str())});
    } catch (...) {  // an out-of-range code: not an Xid
    }
  }
  return out;
}

std::optional<std::vector<std::string>> ReadNameservers(const fs::path& root) {
  auto text = ReadFile(root / "etc/resolv.conf");
  if (!text) return std::nullopt;
  std::vector<std::string> out;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::string key, value;
    if (l >> key >> value && key == "nameserver") out.push_back(value);
  }
  return out;
}

std::string FindNcclTests(const fs::path& root) {
  for (const char* d : {"usr/local/bin", "usr/bin", "opt/nccl-tests/build", "usr/local/nccl-tests/build"}) {
    std::error_code ec;
    if (fs::exists(root / d / "all_reduce_perf", ec)) return "/" + std::string(d) + "/all_reduce_perf";
  }
  return "";
}

void ReadRdma(const fs::path& root, NodeFacts& f) {
  const fs::path ib = root / "sys/class/infiniband";
  for (const std::string& dev : List(ib)) {
    const std::string firmware = ReadLine(ib / dev / "fw_ver").value_or("");
    const std::vector<std::string> netdevs = List(ib / dev / "device/net");
    for (const std::string& port : List(ib / dev / "ports")) {
      const fs::path p = ib / dev / "ports" / port;
      RdmaPort r{.device = dev, .firmware = firmware};
      try {
        r.port = std::stoi(port);
      } catch (...) {  // not a port number: not a port
        continue;
      }
      std::string state = ReadLine(p / "state").value_or("");
      r.state = state.find(": ") == std::string::npos ? state : state.substr(state.find(": ") + 2);
      r.link_layer = ReadLine(p / "link_layer").value_or("");
      if (auto rate = ReadLine(p / "rate")) r.rate_gbps = ParseRdmaRate(*rate);
      std::vector<std::string> gids = List(p / "gids");
      std::sort(gids.begin(), gids.end(), [](const std::string& a, const std::string& b) {
        return a.size() != b.size() ? a.size() < b.size() : a < b;
      });
      for (const std::string& idx : gids) {
        const std::string gid = ReadLine(p / "gids" / idx).value_or("");
        const std::string type = ReadLine(p / "gid_attrs/types" / idx).value_or("");
        // An IPv4-mapped GID: ::ffff:a.b.c.d.
        if (type == "RoCE v2" && gid.rfind("0000:0000:0000:0000:0000:ffff:", 0) == 0) {
          try {
            r.rocev2_gid_index = std::stoi(idx);
          } catch (...) {  // not an index
            continue;
          }
          if (r.net_device.empty()) r.net_device = ReadLine(p / "gid_attrs/ndevs" / idx).value_or("");
          break;
        }
      }
      if (r.net_device.empty() && !netdevs.empty()) r.net_device = netdevs.front();
      f.rdma.push_back(std::move(r));
    }
  }
}

lockstep::audit::ApiServerName ResolveApiServer(const CollectOptions& o) {
  lockstep::audit::ApiServerName n{.host = ApiServerHost(o.api_server)};
  n.is_address = IsIpAddress(n.host);
  if (n.is_address || n.host.empty()) return n;
  auto addresses = o.resolve ? o.resolve(n.host) : ResolveHost(n.host);
  if (addresses.ok()) {
    n.addresses = *addresses;
  } else {
    n.error = addresses.error().message;
  }
  return n;
}

}  // namespace

std::string ApiServerHost(const std::string& server) {
  std::string s = server;
  if (const size_t scheme = s.find("://"); scheme != std::string::npos) s = s.substr(scheme + 3);
  s = s.substr(0, s.find_first_of("/?#"));
  if (const size_t at = s.rfind('@'); at != std::string::npos) s = s.substr(at + 1);
  if (!s.empty() && s[0] == '[') return s.substr(1, s.find(']') == std::string::npos ? s.npos : s.find(']') - 1);
  // One colon: host:port; more: a bare IPv6 address.
  if (const size_t colon = s.find(':'); colon != std::string::npos && s.find(':', colon + 1) == std::string::npos) {
    s = s.substr(0, colon);
  }
  return s;
}

bool IsIpAddress(const std::string& host) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

Result<std::vector<std::string>> ResolveHost(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0) {
    return Unavailable(rc == EAI_SYSTEM ? std::string(std::strerror(errno)) : std::string(gai_strerror(rc)));
  }
  std::vector<std::string> out;
  for (const addrinfo* a = res; a; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* addr = nullptr;
    if (a->ai_family == AF_INET) addr = &reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr;
    if (a->ai_family == AF_INET6) addr = &reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr;
    if (!addr || !inet_ntop(a->ai_family, addr, text, sizeof text)) continue;
    if (std::find(out.begin(), out.end(), text) == out.end()) out.emplace_back(text);
  }
  freeaddrinfo(res);
  if (out.empty()) return Unavailable("no address");
  return out;
}

std::optional<uint16_t> AcsControl(const std::string& config) {
  auto byte = [&config](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(config[i])); };
  size_t off = 0x100;
  // Extended capabilities: a list from 0x100, each header's bits 31:20 the
  // next offset (0: the end); at most a few dozen in 4 KiB.
  for (int n = 0; n < 64 && off >= 0x100 && off + 8 <= config.size(); ++n) {
    const uint32_t header = byte(off) | byte(off + 1) << 8 | byte(off + 2) << 16 | byte(off + 3) << 24;
    if (header == 0 || header == 0xffffffffu) break;
    if ((header & 0xffff) == 0x000d) return static_cast<uint16_t>(byte(off + 6) | byte(off + 7) << 8);  // ACS
    off = (header >> 20) & 0xffc;
  }
  return std::nullopt;
}

std::optional<double> ParseLinkSpeed(const std::string& text) {
  double v = 0;
  if (std::sscanf(text.c_str(), "%lf GT/s", &v) != 1 || v <= 0) return std::nullopt;
  return v;
}

std::optional<double> ParseRdmaRate(const std::string& text) {
  double v = 0;
  if (std::sscanf(text.c_str(), "%lf Gb/sec", &v) != 1 || v <= 0) return std::nullopt;
  return v;
}

std::string SysfsBdf(const std::string& nvml_bus_id) {
  std::string s = nvml_bus_id;
  // NVML: an 8-digit domain; sysfs: 4 digits.
  if (s.size() == 16 && s.rfind("0000", 0) == 0) s = s.substr(4);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

NodeFacts CollectFacts(const CollectOptions& o, gpu::GpuSource* gpus) {
  const fs::path root = o.root;
  NodeFacts f;
  f.kernel = ReadLine(root / "proc/sys/kernel/osrelease");

  std::set<std::string> loaded;
  if (auto text = ReadFile(root / "proc/modules")) {
    std::istringstream in(*text);
    std::string line;
    while (std::getline(in, line)) loaded.insert(line.substr(0, line.find(' ')));
  }
  for (const std::string& m : o.modules) f.modules[m] = loaded.count(m) > 0;

  // GPUs: NVML first; sysfs finds their PCI functions either way.
  std::map<std::string, unsigned> nvml_index;  // sysfs BDF -> NVML index
  if (gpus) {
    auto snap = gpus->Read();
    if (snap.ok()) {
      if (!snap->driver_version.empty()) f.nvidia_driver = snap->driver_version;
      for (const gpu::GpuSample& s : snap->gpus) {
        GpuFacts g{.index = s.index, .bus_id = s.pci_bus_id, .error = s.error};
        if (s.remapped_rows) {
          g.remap_pending = s.remapped_rows->pending;
          g.remap_failed = s.remapped_rows->failed;
        }
        g.ecc_corrected_volatile = s.ecc.corrected_volatile;
        g.ecc_uncorrected_volatile = s.ecc.uncorrected_volatile;
        g.ecc_corrected_aggregate = s.ecc.corrected_aggregate;
        g.ecc_uncorrected_aggregate = s.ecc.uncorrected_aggregate;
        if (s.retired_pages_single_bit || s.retired_pages_double_bit) {
          g.retired_pages = uint64_t{s.retired_pages_single_bit.value_or(0)} + s.retired_pages_double_bit.value_or(0);
        }
        if (s.pcie_replays) g.pcie_replays = *s.pcie_replays;
        g.ecc_enabled = s.ecc_mode;
        g.ecc_pending = s.ecc_mode_pending;
        g.persistence_mode = s.persistence_mode;
        g.sm_clock_mhz = s.sm_clock_mhz;
        g.sm_clock_max_mhz = s.sm_clock_max_mhz;
        g.clocks_event_reasons = s.clocks_event_reasons;
        if (!s.pci_bus_id.empty()) nvml_index[SysfsBdf(s.pci_bus_id)] = s.index;
        f.gpus.push_back(std::move(g));
      }
    } else {
      f.nvml_unavailable = snap.error().message;
    }
  } else {
    f.nvml_unavailable = "NVML not loaded";
  }
  if (!f.nvidia_driver) f.nvidia_driver = ReadLine(root / "sys/module/nvidia/version");

  const fs::path pci = root / "sys/bus/pci/devices";
  unsigned next_gpu = 0;
  for (const std::string& bdf : List(pci)) {
    const std::string vendor = ReadLine(pci / bdf / "vendor").value_or("");
    const std::string cls = ReadLine(pci / bdf / "class").value_or("");
    // NVIDIA (0x10de), display controller: VGA (0x0300) or 3D (0x0302).
    if (vendor != "0x10de" || !(cls.rfind("0x0300", 0) == 0 || cls.rfind("0x0302", 0) == 0)) continue;
    auto it = nvml_index.find(bdf);
    const unsigned index = it != nvml_index.end() ? it->second : next_gpu;
    ++next_gpu;
    f.pcie.push_back(ReadLink(pci / bdf, bdf, "gpu" + std::to_string(index), true));
  }

  const Routes routes = ReadRoutes(root / "proc/net/route");
  f.default_route_interface = routes.default_interface;
  if (routes.default_interface) f.frontend = ReadInterface(root, *routes.default_interface, routes);

  ReadRdma(root, f);
  std::vector<std::string> rails = o.rails;
  if (rails.empty()) {
    std::set<std::string> seen;
    for (const RdmaPort& p : f.rdma) {
      if (!p.net_device.empty() && seen.insert(p.net_device).second) rails.push_back(p.net_device);
    }
    std::sort(rails.begin(), rails.end());
  }
  for (const std::string& name : rails) {
    f.rails.push_back(ReadInterface(root, name, routes));
    const std::string bdf = NetDeviceBdf(root, name);
    if (!bdf.empty()) f.pcie.push_back(ReadLink(pci / bdf, bdf, "nic:" + name, false));
  }

  f.cuda = CudaVersion(root);
  f.nccl = LibraryVersion(root, "libnccl.so.");
  f.rdma_core = LibraryVersion(root, "libibverbs.so.");
  f.xids = ReadXids(root);
  f.nameservers = ReadNameservers(root);
  f.nccl_tests = FindNcclTests(root);
  if (!o.api_server.empty()) f.api_server = ResolveApiServer(o);
  return f;
}

}  // namespace lockstep::agent::audit
