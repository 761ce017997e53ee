// A fake NVML: a shared library exporting the NVML symbols the agent uses,
// loaded by tests through the same dlopen path as libnvidia-ml.so.1. Its GPUs
// are described by the file named in $FAKE_NVML_STATE, re-read on every
// call, so a test raises a temperature or injects an Xid by rewriting it.
// No file (or $FAKE_NVML_STATE unset): nvmlInit_v2 fails with
// NVML_ERROR_DRIVER_NOT_LOADED. Built twice: lockstep_fake_nvml (every
// symbol) and lockstep_fake_nvml_minimal (FAKE_NVML_MINIMAL: no row
// remapping, PCIe replay, NVLink or event symbols, and clock event reasons
// only under their pre-r535 name nvmlDeviceGetCurrentClocksThrottleReasons,
// as an old driver).
//
// The file, one key=value per line ('#' comments), every key optional:
//   init=0                       nvmlInit_v2's return value
//   driver=550.54.15
//   gpus=2                       device count
//   gpu.N.uuid=GPU-...  gpu.N.name=...  gpu.N.bus=00000000:3B:00.0
//   gpu.N.lost=1                 nvmlDeviceGetHandleByIndex_v2: GPU_IS_LOST
//   gpu.N.temp=45  gpu.N.slowdown=88  gpu.N.shutdown=92
//   gpu.N.ecc.corrected.volatile=0 (.aggregate, ecc.uncorrected.*)
//   gpu.N.remap.correctable=0 gpu.N.remap.uncorrectable=0 gpu.N.remap.pending=0 gpu.N.remap.failed=0
//   gpu.N.retired.sbe=0  gpu.N.retired.dbe=0  gpu.N.pcie_replays=0
//   gpu.N.nvlinks=4              links 0..3 exist and are active
//   gpu.N.nvlink.L.replay=0 (.recovery, .crc_flit, .crc_data)
//   gpu.N.ecc_mode=1  gpu.N.ecc_mode_pending=1   ECC mode now and after a reset
//   gpu.N.persistence=1          persistence mode
//   gpu.N.sm_clock=1980  gpu.N.sm_clock_max=1980   MHz
//   gpu.N.clocks_event_reasons=0x8   nvmlClocksEventReason* bits (hex or decimal)
//   gpu.N.unsupported=temp,ecc,remap,retired,pcie,nvlink,events,uuid,ecc_mode,
//                     persistence,clocks,reasons
//                                 those calls return NVML_ERROR_NOT_SUPPORTED
//   xid.K=N:79                   event K (any integer): Xid 79 on GPU N.
//                                 An event set sees the events whose K is
//                                 above the largest K present when it was
//                                 created, each once.
// Unknown keys are ignored. A GPU's values default to a healthy H100.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "nvml_abi.h"

namespace {

constexpr unsigned kMaxGpus = 64;

struct FakeDevice {
  unsigned index;
};
FakeDevice g_devices[kMaxGpus];

using State = std::map<std::string, std::string>;

State Load() {
  State s;
  const char* path = std::getenv("FAKE_NVML_STATE");
  if (!path) return s;
  std::ifstream in(path);
  if (!in) return s;
  s["__present"] = "1";
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    s[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return s;
}

std::string Get(const State& s, const std::string& key, const std::string& def) {
  auto it = s.find(key);
  return it == s.end() ? def : it->second;
}
unsigned long long Num(const State& s, const std::string& key, unsigned long long def) {
  auto it = s.find(key);
  return it == s.end() ? def : std::strtoull(it->second.c_str(), nullptr, 10);
}
std::string GpuKey(unsigned i, const char* field) { return "gpu." + std::to_string(i) + "." + field; }

unsigned Count(const State& s) {
  auto n = static_cast<unsigned>(Num(s, "gpus", 1));
  return n > kMaxGpus ? kMaxGpus : n;
}

// The device's index, or -1 when the handle is not one of ours or is past
// the current count.
int IndexOf(const State& s, nvmlDevice_t d) {
  auto* p = reinterpret_cast<FakeDevice*>(d);
  if (p < g_devices || p >= g_devices + kMaxGpus) return -1;
  unsigned i = p->index;
  return i < Count(s) ? static_cast<int>(i) : -1;
}

bool Unsupported(const State& s, unsigned i, const char* what) {
  std::string list = "," + Get(s, GpuKey(i, "unsupported"), "") + ",";
  return list.find("," + std::string(what) + ",") != std::string::npos;
}

nvmlReturn_t CopyString(const std::string& v, char* out, unsigned length) {
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  if (v.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, v.c_str(), v.size() + 1);
  return NVML_SUCCESS;
}

int g_init_count = 0;  // nvmlInit_v2 and nvmlShutdown nest, as NVML's do

// Resolves a device for a per-device call: the state, the index, or an error.
#define FAKE_DEVICE(s, i, d)                              \
  State s = Load();                                       \
  if (g_init_count <= 0) return NVML_ERROR_UNINITIALIZED; \
  int i = IndexOf(s, d);                                  \
  if (i < 0) return NVML_ERROR_INVALID_ARGUMENT;

}  // namespace

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlInit_v2() {
  State s = Load();
  if (!s.count("__present")) return NVML_ERROR_DRIVER_NOT_LOADED;
  auto r = static_cast<nvmlReturn_t>(Num(s, "init", 0));
  if (r == NVML_SUCCESS) ++g_init_count;
  return r;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlShutdown() {
  if (g_init_count <= 0) return NVML_ERROR_UNINITIALIZED;
  --g_init_count;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    default:
      return "Unknown Error";
  }
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned length) {
  return CopyString(Get(Load(), "driver", "550.54.15"), version, length);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) {
  State s = Load();
  if (g_init_count <= 0) return NVML_ERROR_UNINITIALIZED;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = Count(s);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index,
                                                                                  nvmlDevice_t* device) {
  State s = Load();
  if (g_init_count <= 0) return NVML_ERROR_UNINITIALIZED;
  if (!device || index >= Count(s)) return NVML_ERROR_INVALID_ARGUMENT;
  if (Num(s, GpuKey(index, "lost"), 0)) return NVML_ERROR_GPU_IS_LOST;
  g_devices[index].index = index;
  *device = reinterpret_cast<nvmlDevice_t>(&g_devices[index]);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* out, unsigned length) {
  FAKE_DEVICE(s, i, d);
  if (Unsupported(s, i, "uuid")) return NVML_ERROR_NOT_SUPPORTED;
  char def[64];
  std::snprintf(def, sizeof def, "GPU-fake-%04d", i);
  return CopyString(Get(s, GpuKey(i, "uuid"), def), out, length);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* out, unsigned length) {
  FAKE_DEVICE(s, i, d);
  return CopyString(Get(s, GpuKey(i, "name"), "NVIDIA H100 80GB HBM3"), out, length);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* pci) {
  FAKE_DEVICE(s, i, d);
  if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
  char def[32];
  std::snprintf(def, sizeof def, "00000000:%02X:00.0", 0x18 + i);
  *pci = nvmlPciInfo_t{};
  std::snprintf(pci->busId, sizeof pci->busId, "%s", Get(s, GpuKey(i, "bus"), def).c_str());
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, unsigned sensor,
                                                                             unsigned* temp) {
  FAKE_DEVICE(s, i, d);
  if (Unsupported(s, i, "temp")) return NVML_ERROR_NOT_SUPPORTED;
  if (sensor != NVML_TEMPERATURE_GPU || !temp) return NVML_ERROR_INVALID_ARGUMENT;
  *temp = static_cast<unsigned>(Num(s, GpuKey(i, "temp"), 40));
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t d, unsigned which,
                                                                                      unsigned* temp) {
  FAKE_DEVICE(s, i, d);
  if (Unsupported(s, i, "temp")) return NVML_ERROR_NOT_SUPPORTED;
  if (!temp) return NVML_ERROR_INVALID_ARGUMENT;
  if (which == NVML_TEMPERATURE_THRESHOLD_SLOWDOWN) *temp = static_cast<unsigned>(Num(s, GpuKey(i, "slowdown"), 88));
  else if (which == NVML_TEMPERATURE_THRESHOLD_SHUTDOWN)
    *temp = static_cast<unsigned>(Num(s, GpuKey(i, "shutdown"), 92));
  else return NVML_ERROR_NOT_SUPPORTED;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, unsigned type,
                                                                                unsigned counter,
                                                                                unsigned long long* count) {
  FAKE_DEVICE(s, i, d);
  if (Unsupported(s, i, "ecc")) return NVML_ERROR_NOT_SUPPORTED;
  if (type > 1 || counter > 1 || !count) return NVML_ERROR_INVALID_ARGUMENT;
  std::string key = std::string("ecc.") + (type == NVML_MEMORY_ERROR_TYPE_CORRECTED ? "corrected" : "uncorrected") +
                    (counter == NVML_VOLATILE_ECC ? ".volatile" : ".aggregate");
  *count = Num(s, GpuKey(i, key.c_str()), 0);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t d, unsigned cause,
                                                                              unsigned* page_count,
                                                                              unsigned long long* addresses) {
  FAKE_DEVICE(s, i, d);
  if (Unsupported(s, i, "retired")) return NVML_ERROR_NOT_SUPPORTED;
  if (cause > 1 || !page_count) return NVML_ERROR_INVALID_ARGUMENT;
  auto n = static_cast<unsigned>(Num(s, GpuKey(i, cause == 0 ? "retired.sbe" : "retired.dbe"), 0));
  if (n > *page_count) {
    *page_count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned k = 0; k < n && addresses; ++k) addresses[k] = 0x1000ULL * (k + 1);
  *page_count = n;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t d, unsigned* current,
                                                                         unsigned* pending) {
  FAKE_DEVICE(s, i, d);
  if (Unsupported(s, i, "ecc_mode")) return NVML_ERROR_NOT_SUPPORTED;
  if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
  *current = Num(s, GpuKey(i, "ecc_mode"), 1) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  *pending = Num(s, GpuKey(i, "ecc_mode_pending"), *current) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, unsigned* mode) {
  FAKE_DEVICE(s, i, d);
  if (Unsupported(s, i, "persistence")) return NVML_ERROR_NOT_SUPPORTED;
  if (!mode) return NVML_ERROR_INVALID_ARGUMENT;
  *mode = Num(s, GpuKey(i, "persistence"), 1) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

static nvmlReturn_t SmClock(nvmlDevice_t d, unsigned type, unsigned* mhz, const char* key) {
  FAKE_DEVICE(s, i, d);
  if (Unsupported(s, i, "clocks")) return NVML_ERROR_NOT_SUPPORTED;
  if (!mhz || type > NVML_CLOCK_MEM) return NVML_ERROR_INVALID_ARGUMENT;
  if (type != NVML_CLOCK_SM) return NVML_ERROR_NOT_SUPPORTED;  // only the SM clock is faked
  *mhz = static_cast<unsigned>(Num(s, GpuKey(i, key), 1980));
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, unsigned type,
                                                                           unsigned* mhz) {
  return SmClock(d, type, mhz, "sm_clock");
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, unsigned type,
                                                                              unsigned* mhz) {
  return SmClock(d, type, mhz, "sm_clock_max");
}

static nvmlReturn_t ClocksReasons(nvmlDevice_t d, unsigned long long* reasons) {
  FAKE_DEVICE(s, i, d);
  if (Unsupported(s, i, "reasons")) return NVML_ERROR_NOT_SUPPORTED;
  if (!reasons) return NVML_ERROR_INVALID_ARGUMENT;
  *reasons = std::strtoull(Get(s, GpuKey(i, "clocks_event_reasons"), "0").c_str(), nullptr, 0);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(
    nvmlDevice_t d, unsigned long long* reasons) {
  return ClocksReasons(d, reasons);
}

#ifndef FAKE_NVML_MINIMAL

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(
    nvmlDevice_t d, unsigned long long* reasons) {
  return ClocksReasons(d, reasons);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned* corr,
                                                                              unsigned* unc, unsigned* pending,
                                                                              unsigned* failed) {
  FAKE_DEVICE(s, i, d);
  if (Unsupported(s, i, "remap")) return NVML_ERROR_NOT_SUPPORTED;
  if (!corr || !unc || !pending || !failed) return NVML_ERROR_INVALID_ARGUMENT;
  *corr = static_cast<unsigned>(Num(s, GpuKey(i, "remap.correctable"), 0));
  *unc = static_cast<unsigned>(Num(s, GpuKey(i, "remap.uncorrectable"), 0));
  *pending = static_cast<unsigned>(Num(s, GpuKey(i, "remap.pending"), 0));
  *failed = static_cast<unsigned>(Num(s, GpuKey(i, "remap.failed"), 0));
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t d, unsigned* value) {
  FAKE_DEVICE(s, i, d);
  if (Unsupported(s, i, "pcie")) return NVML_ERROR_NOT_SUPPORTED;
  if (!value) return NVML_ERROR_INVALID_ARGUMENT;
  *value = static_cast<unsigned>(Num(s, GpuKey(i, "pcie_replays"), 0));
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned link,
                                                                             unsigned* active) {
  FAKE_DEVICE(s, i, d);
  if (Unsupported(s, i, "nvlink")) return NVML_ERROR_NOT_SUPPORTED;
  if (!active || link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  if (link >= Num(s, GpuKey(i, "nvlinks"), 0)) return NVML_ERROR_NOT_SUPPORTED;  // as a GPU without that link
  *active = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t d, unsigned link,
                                                                                    unsigned counter,
                                                                                    unsigned long long* value) {
  FAKE_DEVICE(s, i, d);
  if (Unsupported(s, i, "nvlink")) return NVML_ERROR_NOT_SUPPORTED;
  static const char* const kNames[] = {"replay", "recovery", "crc_flit", "crc_data"};
  if (!value || counter > 3 || link >= Num(s, GpuKey(i, "nvlinks"), 0)) return NVML_ERROR_INVALID_ARGUMENT;
  std::string key = "nvlink." + std::to_string(link) + "." + kNames[counter];
  *value = Num(s, GpuKey(i, key.c_str()), 0);
  return NVML_SUCCESS;
}

// An event set: the GPUs registered and the events already delivered.
struct nvmlEventSet_st {
  long long baseline = 0;      // events with K at or below were there before the set
  std::set<long long> seen{};  // events delivered
  std::set<unsigned> gpus{};
};

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  State s = Load();
  if (g_init_count <= 0) return NVML_ERROR_UNINITIALIZED;
  if (!set) return NVML_ERROR_INVALID_ARGUMENT;
  auto* e = new nvmlEventSet_st;
  for (const auto& [key, value] : s) {
    if (key.rfind("xid.", 0) == 0) e->baseline = std::max(e->baseline, std::atoll(key.c_str() + 4));
  }
  *set = e;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types,
                                                                             nvmlEventSet_t set) {
  FAKE_DEVICE(s, i, d);
  if (Unsupported(s, i, "events")) return NVML_ERROR_NOT_SUPPORTED;
  if (!set || types != nvmlEventTypeXidCriticalError) return NVML_ERROR_INVALID_ARGUMENT;
  set->gpus.insert(static_cast<unsigned>(i));
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                                                        unsigned /*timeout_ms*/) {
  State s = Load();
  if (g_init_count <= 0) return NVML_ERROR_UNINITIALIZED;
  if (!set || !data) return NVML_ERROR_INVALID_ARGUMENT;
  std::map<long long, std::string> pending;  // in K order
  for (const auto& [key, value] : s) {
    if (key.rfind("xid.", 0) != 0) continue;
    long long k = std::atoll(key.c_str() + 4);
    if (k > set->baseline && !set->seen.count(k)) pending[k] = value;
  }
  for (const auto& [k, value] : pending) {
    unsigned gpu = static_cast<unsigned>(std::strtoul(value.c_str(), nullptr, 10));
    auto colon = value.find(':');
    set->seen.insert(k);
    if (colon == std::string::npos || !set->gpus.count(gpu) || gpu >= Count(s)) continue;
    g_devices[gpu].index = gpu;
    *data = nvmlEventData_t{};
    data->device = reinterpret_cast<nvmlDevice_t>(&g_devices[gpu]);
    data->eventType = nvmlEventTypeXidCriticalError;
    data->eventData = std::strtoull(value.c_str() + colon + 1, nullptr, 10);
    data->gpuInstanceId = 0xFFFFFFFFu;
    data->computeInstanceId = 0xFFFFFFFFu;
    return NVML_SUCCESS;
  }
  return NVML_ERROR_TIMEOUT;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  delete set;
  return NVML_SUCCESS;
}

#endif  // FAKE_NVML_MINIMAL

}  // extern "C"
