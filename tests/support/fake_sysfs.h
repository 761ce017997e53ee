// FakeSysfs: a fake sysfs/procfs tree in a fresh temporary directory (removed
// at destruction), shaped as the audit's collectors read it
// (daemonset/audit/sysfs_collector.h). Helpers add a healthy device; a test
// then overwrites one file to seed a fault.
//
//   FakeSysfs sys;
//   sys.AddGpu("0000:17:00.0");
//   sys.Write("sys/bus/pci/devices/0000:17:00.0/current_link_width", "8");
//   CollectFacts({.root = sys.root()}, nullptr);
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::testing {

class FakeSysfs {
 public:
  FakeSysfs() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fake-sysfs-XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
    Write("proc/sys/kernel/osrelease", "6.1.0-18-amd64\n");
    Write("proc/modules", "nvidia_peermem 16384 0 - Live 0x0\nnvidia 1234 1 nvidia_peermem, Live 0x0\n");
    Write("proc/net/route", "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n");
  }
  ~FakeSysfs() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  FakeSysfs(const FakeSysfs&) = delete;
  FakeSysfs& operator=(const FakeSysfs&) = delete;

  const std::string& root() const { return root_; }

  void Write(const std::string& rel, const std::string& content) {
    auto p = std::filesystem::path(root_) / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << content;
  }
  void Append(const std::string& rel, const std::string& content) {
    std::ofstream(std::filesystem::path(root_) / rel, std::ios::app) << content;
  }
  void Link(const std::string& rel, const std::string& target) {
    auto p = std::filesystem::path(root_) / rel;
    std::filesystem::create_directories(p.parent_path());
    std::filesystem::create_symlink(target, p);
  }
  void Remove(const std::string& rel) { std::filesystem::remove_all(std::filesystem::path(root_) / rel); }

  // Places function `bdf` below `bridges` (root port first) as a real node
  // shows it: sys/bus/pci/devices/<bdf> a link to
  // sys/devices/pci0000:00/<bridge>/.../<bdf>. Call before AddPci (AddGpu, AddRail).
  void PlaceUnder(const std::string& bdf, const std::vector<std::string>& bridges) {
    std::string dir = "devices/pci0000:00/";
    for (const std::string& b : bridges) dir += b + "/";
    dir += bdf;
    std::filesystem::create_directories(std::filesystem::path(root_) / "sys" / dir);
    Link("sys/bus/pci/devices/" + bdf, "../../../" + dir);
  }

  // A bridge's config space (`size` bytes: 4096 as root sees it, 64 as an
  // unprivileged reader does) with an AER extended capability at 0x100 and,
  // when `acs_control` is set, an ACS one at 0x148 with that control register.
  void AddBridge(const std::string& bdf, std::optional<uint16_t> acs_control, size_t size = 4096) {
    std::string config(4096, '\0');
    auto put32 = [&config](size_t at, uint32_t v) {
      for (int i = 0; i < 4; ++i) config[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
    };
    put32(0x00, 0x10de15b3u);                                              // vendor/device
    put32(0x100, 0x0001u | 1u << 16 | (acs_control ? 0x148u : 0u) << 20);  // AER, next: ACS or the end
    if (acs_control) {
      put32(0x148, 0x000du | 1u << 16);                      // ACS, the last capability
      put32(0x14c, 0x005fu | uint32_t{*acs_control} << 16);  // capability (all), control
    }
    config.resize(size);
    const auto p = std::filesystem::path(root_) / "sys/bus/pci/devices" / bdf / "config";
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << config;
  }

  // A PCIe function with its link at the maximum and no AER errors.
  void AddPci(const std::string& bdf, const std::string& vendor, const std::string& cls, const std::string& speed,
              int width) {
    const std::string d = "sys/bus/pci/devices/" + bdf + "/";
    Write(d + "vendor", vendor + "\n");
    Write(d + "class", cls + "\n");
    Write(d + "current_link_speed", speed + " PCIe\n");
    Write(d + "max_link_speed", speed + " PCIe\n");
    Write(d + "current_link_width", std::to_string(width) + "\n");
    Write(d + "max_link_width", std::to_string(width) + "\n");
    Write(d + "aer_dev_correctable", "RxErr 0\nBadTLP 0\nTOTAL_ERR_COR 0\n");
    Write(d + "aer_dev_fatal", "Undefined 0\nTOTAL_ERR_FATAL 0\n");
    Write(d + "aer_dev_nonfatal", "Undefined 0\nTOTAL_ERR_NONFATAL 0\n");
  }
  void AddGpu(const std::string& bdf) { AddPci(bdf, "0x10de", "0x030200", "32.0 GT/s", 16); }

  // A NIC with a PCI function, an address in `subnet` (a connected route),
  // and an RDMA device (RoCE v2 GID at index 3) on port 1.
  void AddRail(const std::string& name, const std::string& bdf, const std::string& rdma_dev,
               const std::string& subnet_hex_le, const std::string& mask_hex_le, int mtu = 9000) {
    AddPci(bdf, "0x15b3", "0x020000", "16.0 GT/s", 16);
    Write("sys/class/net/" + name + "/operstate", "up\n");
    Write("sys/class/net/" + name + "/mtu", std::to_string(mtu) + "\n");
    Link("sys/class/net/" + name + "/device", "../../../bus/pci/devices/" + bdf);
    Append("proc/net/route", name + "\t" + subnet_hex_le + "\t00000000\t0001\t0\t0\t0\t" + mask_hex_le + "\t0\t0\t0\n");
    const std::string ib = "sys/class/infiniband/" + rdma_dev + "/";
    Write(ib + "device/net/" + name + "/ifindex", "5\n");
    const std::string p = ib + "ports/1/";
    Write(p + "state", "4: ACTIVE\n");
    Write(p + "link_layer", "Ethernet\n");
    Write(p + "rate", "200 Gb/sec (4X HDR)\n");
    for (int i = 0; i < 4; ++i) {
      const bool v2 = i == 3 || i == 1;
      Write(p + "gids/" + std::to_string(i),
            i < 2 ? "fe80:0000:0000:0000:0000:0000:0000:0001\n" : "0000:0000:0000:0000:0000:ffff:0a00:0107\n");
      Write(p + "gid_attrs/types/" + std::to_string(i), v2 ? "RoCE v2\n" : "IB/RoCE v1\n");
      Write(p + "gid_attrs/ndevs/" + std::to_string(i), name + "\n");
    }
  }

  // The default route through `name` (with 192.168.1.0/24 on it).
  void AddFrontEnd(const std::string& name, int mtu = 1500) {
    Write("sys/class/net/" + name + "/operstate", "up\n");
    Write("sys/class/net/" + name + "/mtu", std::to_string(mtu) + "\n");
    Append("proc/net/route", name + "\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n");
    Append("proc/net/route", name + "\t0001A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n");
  }

 private:
  std::string root_;
};

}  // namespace lockstep::testing
