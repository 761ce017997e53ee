// What NVML reports about this node's GPUs, as plain values: one GpuSample per
// GPU per read, and the Xid events seen since the last drain. A field the
// driver does not report (an old driver without the symbol, or
// NVML_ERROR_NOT_SUPPORTED on this GPU) is empty and named in
// `not_available`; it is not an error. Thread-compatible values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::agent::gpu {

// ECC error counts (nvmlDeviceGetTotalEccErrors). Volatile: since the
// driver last loaded; aggregate: the GPU's lifetime.
struct EccCounts {
  std::optional<uint64_t> corrected_volatile{}, uncorrected_volatile{};
  std::optional<uint64_t> corrected_aggregate{}, uncorrected_aggregate{};
  bool operator==(const EccCounts&) const = default;
};

// Row remapping (Ampere and later; nvmlDeviceGetRemappedRows).
struct RemappedRows {
  uint32_t correctable = 0;    // rows remapped for correctable errors
  uint32_t uncorrectable = 0;  // rows remapped for uncorrectable errors
  bool pending = false;        // a remap waits for a GPU reset
  bool failed = false;         // a remap failed at some point
  bool operator==(const RemappedRows&) const = default;
};

// One active NVLink's error counters (nvmlDeviceGetNvLinkErrorCounter).
struct NvLinkErrors {
  unsigned link = 0;
  std::optional<uint64_t> replay{}, recovery{}, crc_flit{}, crc_data{};
  bool operator==(const NvLinkErrors&) const = default;
};

struct GpuSample {
  unsigned index = 0;  // NVML's device index
  std::string uuid{};  // "GPU-..." ("" when not available)
  std::string name{};  // "NVIDIA H100 80GB HBM3"
  std::string pci_bus_id{};
  // Set when the GPU could not be read at all (e.g. "GPU is lost"); the
  // other fields are then empty.
  std::optional<std::string> error{};
  std::optional<int> temperature_c{};  // GPU core
  std::optional<int> slowdown_c{};     // the driver slows the GPU down from here
  std::optional<int> shutdown_c{};     // the GPU shuts down from here
  EccCounts ecc{};
  std::optional<RemappedRows> remapped_rows{};
  std::optional<uint32_t> retired_pages_single_bit{};  // retired for multiple single-bit errors
  std::optional<uint32_t> retired_pages_double_bit{};  // retired for a double-bit error
  std::optional<uint32_t> pcie_replays{};
  // ECC mode (nvmlDeviceGetEccMode): current, and pending (after the next
  // reboot or GPU reset). Empty on GPUs without ECC.
  std::optional<bool> ecc_mode{}, ecc_mode_pending{};
  std::optional<bool> persistence_mode{};  // nvmlDeviceGetPersistenceMode
  // SM clock now and its maximum, MHz (nvmlDeviceGetClockInfo,
  // nvmlDeviceGetMaxClockInfo with NVML_CLOCK_SM).
  std::optional<uint32_t> sm_clock_mhz{}, sm_clock_max_mhz{};
  // Why the clocks are held down now: nvmlClocksEventReason* bits
  // (nvmlDeviceGetCurrentClocksEventReasons, else the older
  // nvmlDeviceGetCurrentClocksThrottleReasons); kClocksEvent* below.
  std::optional<uint64_t> clocks_event_reasons{};
  // Active links only; empty when the GPU has none or NVLink is not
  // available (then "nvlink" is in not_available).
  std::vector<NvLinkErrors> nvlinks{};
  std::vector<std::string> not_available{};  // field names, e.g. "remapped_rows"
  bool operator==(const GpuSample&) const = default;
};

// nvmlClocksEventReason* (nvml.h; formerly nvmlClocksThrottleReason*).
inline constexpr uint64_t kClocksEventGpuIdle = 0x1;
inline constexpr uint64_t kClocksEventApplicationsClocksSetting = 0x2;
inline constexpr uint64_t kClocksEventSwPowerCap = 0x4;
inline constexpr uint64_t kClocksEventHwSlowdown = 0x8;
inline constexpr uint64_t kClocksEventSyncBoost = 0x10;
inline constexpr uint64_t kClocksEventSwThermalSlowdown = 0x20;
inline constexpr uint64_t kClocksEventHwThermalSlowdown = 0x40;
inline constexpr uint64_t kClocksEventHwPowerBrakeSlowdown = 0x80;
inline constexpr uint64_t kClocksEventDisplayClockSetting = 0x100;

// One read of every GPU.
struct GpuSnapshot {
  std::string driver_version{};
  std::vector<GpuSample> gpus{};
  bool operator==(const GpuSnapshot&) const = default;
};

// An Xid (nvmlEventTypeXidCriticalError) reported for a GPU.
struct XidEvent {
  unsigned gpu_index = 0;
  std::string uuid{};
  uint64_t xid = 0;  // 999: the driver's "unknown Xid"
  bool operator==(const XidEvent&) const = default;
};

// "GPU 2 (GPU-5c6d...)": how messages name a GPU.
std::string GpuLabel(unsigned index, const std::string& uuid);

}  // namespace lockstep::agent::gpu
