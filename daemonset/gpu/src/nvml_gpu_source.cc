#include "lockstep/agent/gpu/nvml_gpu_source.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <map>

#include "nvml_abi.h"

namespace lockstep::agent::gpu {
namespace {

using namespace lockstep::agent::gpu::nvml;  // NOLINT: the function pointer types

constexpr unsigned kMaxXidsPerDrain = 1024;

}  // namespace

// The library handle, the symbols found in it, and what NVML handed out.
// Destruction releases them in reverse order of acquisition.
struct NvmlGpuSource::Api {
  void* lib = nullptr;
  bool initialised = false;
  nvmlEventSet_t events = nullptr;
  std::map<nvmlDevice_t, unsigned> registered;  // devices whose Xids the event set carries

  InitFn init = nullptr;
  ShutdownFn shutdown = nullptr;
  ErrorStringFn error_string = nullptr;
  DriverVersionFn driver_version = nullptr;
  DeviceCountFn device_count = nullptr;
  HandleByIndexFn handle_by_index = nullptr;
  StringFn uuid = nullptr, name = nullptr;
  PciInfoFn pci_info = nullptr;
  TemperatureFn temperature = nullptr;
  ThresholdFn threshold = nullptr;
  TotalEccFn total_ecc = nullptr;
  RemappedRowsFn remapped_rows = nullptr;
  RetiredPagesFn retired_pages = nullptr;
  PcieReplayFn pcie_replay = nullptr;
  NvLinkStateFn nvlink_state = nullptr;
  NvLinkErrorFn nvlink_error = nullptr;
  EccModeFn ecc_mode = nullptr;
  EnableStateFn persistence_mode = nullptr;
  ClockFn clock_info = nullptr, max_clock_info = nullptr;
  ClocksReasonsFn clocks_reasons = nullptr;
  EventSetCreateFn event_set_create = nullptr;
  RegisterEventsFn register_events = nullptr;
  EventSetWaitFn event_set_wait = nullptr;
  EventSetFreeFn event_set_free = nullptr;

  ~Api() {
    if (events && event_set_free) event_set_free(events);
    if (initialised) shutdown();
    if (lib) dlclose(lib);
  }

  template <typename Fn>
  void Bind(Fn& fn, const char* symbol) {
    fn = reinterpret_cast<Fn>(dlsym(lib, symbol));
  }

  std::string Describe(nvmlReturn_t r) const {
    const char* s = error_string ? error_string(r) : nullptr;
    return (s ? std::string(s) : std::string("NVML error")) + " (" + std::to_string(r) + ")";
  }

  // Ok, or why the whole read failed. Sets `out` when ok.
  Status Open(const std::string& library) {
    dlerror();
    // RTLD_NODELETE: the driver's library stays mapped after dlclose (what it
    // may have started keeps its code), as processes that load NVML once do.
    lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!lib) {
      const char* e = dlerror();
      return Unavailable("no NVIDIA driver (" + std::string(e ? e : library.c_str()) + ")");
    }
    Bind(init, "nvmlInit_v2");
    Bind(shutdown, "nvmlShutdown");
    Bind(device_count, "nvmlDeviceGetCount_v2");
    Bind(handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
    if (!init || !shutdown || !device_count || !handle_by_index) {
      return Unavailable("no usable NVIDIA driver (" + library +
                         " lacks nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2 or "
                         "nvmlDeviceGetHandleByIndex_v2: a driver older than NVML 5.319?)");
    }
    Bind(error_string, "nvmlErrorString");
    Bind(driver_version, "nvmlSystemGetDriverVersion");
    Bind(uuid, "nvmlDeviceGetUUID");
    Bind(name, "nvmlDeviceGetName");
    Bind(pci_info, "nvmlDeviceGetPciInfo_v3");
    Bind(temperature, "nvmlDeviceGetTemperature");
    Bind(threshold, "nvmlDeviceGetTemperatureThreshold");
    Bind(total_ecc, "nvmlDeviceGetTotalEccErrors");
    Bind(remapped_rows, "nvmlDeviceGetRemappedRows");
    Bind(retired_pages, "nvmlDeviceGetRetiredPages");
    Bind(pcie_replay, "nvmlDeviceGetPcieReplayCounter");
    Bind(nvlink_state, "nvmlDeviceGetNvLinkState");
    Bind(nvlink_error, "nvmlDeviceGetNvLinkErrorCounter");
    Bind(ecc_mode, "nvmlDeviceGetEccMode");
    Bind(persistence_mode, "nvmlDeviceGetPersistenceMode");
    Bind(clock_info, "nvmlDeviceGetClockInfo");
    Bind(max_clock_info, "nvmlDeviceGetMaxClockInfo");
    // The new name first; drivers before r535 export only the old one.
    Bind(clocks_reasons, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!clocks_reasons) Bind(clocks_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
    Bind(event_set_create, "nvmlEventSetCreate");
    Bind(register_events, "nvmlDeviceRegisterEvents");
    Bind(event_set_wait, "nvmlEventSetWait_v2");
    Bind(event_set_free, "nvmlEventSetFree");
    if (nvmlReturn_t r = init(); r != NVML_SUCCESS) {
      return Unavailable("NVIDIA driver present but NVML failed to initialise: " + Describe(r));
    }
    initialised = true;
    RegisterXids();
    return Status::Ok();
  }

  void RegisterXids() {
    if (!event_set_create || !register_events || !event_set_wait || !event_set_free) return;
    if (event_set_create(&events) != NVML_SUCCESS) {
      events = nullptr;
      return;
    }
    unsigned count = 0;
    if (device_count(&count) != NVML_SUCCESS) return;
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t d = nullptr;
      if (handle_by_index(i, &d) != NVML_SUCCESS) continue;
      if (register_events(d, nvmlEventTypeXidCriticalError, events) == NVML_SUCCESS) registered[d] = i;
    }
  }

  std::string ReadString(StringFn fn, nvmlDevice_t d, unsigned size) const {
    if (!fn) return "";
    std::string buf(size, '\0');
    if (fn(d, buf.data(), size) != NVML_SUCCESS) return "";
    buf.resize(std::strlen(buf.c_str()));
    return buf;
  }

  GpuSample ReadGpu(unsigned index) const;
};

namespace {

// A field read: ok, or "not available" (missing symbol, NOT_SUPPORTED or any
// other per-field error; the GPU as a whole is judged by GetHandle).
bool Ok(nvmlReturn_t r) { return r == NVML_SUCCESS; }

}  // namespace

GpuSample NvmlGpuSource::Api::ReadGpu(unsigned index) const {
  GpuSample g;
  g.index = index;
  nvmlDevice_t d = nullptr;
  if (nvmlReturn_t r = handle_by_index(index, &d); r != NVML_SUCCESS) {
    g.error = Describe(r);
    return g;
  }
  auto missing = [&g](const char* field) { g.not_available.emplace_back(field); };
  g.uuid = ReadString(uuid, d, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
  if (g.uuid.empty()) missing("uuid");
  g.name = ReadString(name, d, NVML_DEVICE_NAME_V2_BUFFER_SIZE);
  if (nvmlPciInfo_t pci{}; pci_info && Ok(pci_info(d, &pci))) {
    g.pci_bus_id.assign(pci.busId, strnlen(pci.busId, sizeof pci.busId));
  }

  unsigned v = 0;
  if (temperature && Ok(temperature(d, NVML_TEMPERATURE_GPU, &v))) g.temperature_c = static_cast<int>(v);
  else missing("temperature");
  if (threshold && Ok(threshold(d, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &v))) g.slowdown_c = static_cast<int>(v);
  else missing("slowdown_threshold");
  if (threshold && Ok(threshold(d, NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, &v))) g.shutdown_c = static_cast<int>(v);
  else missing("shutdown_threshold");

  auto ecc = [&](unsigned type, unsigned counter, std::optional<uint64_t>& out) {
    unsigned long long n = 0;
    if (total_ecc && Ok(total_ecc(d, type, counter, &n))) out = n;
  };
  ecc(NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, g.ecc.corrected_volatile);
  ecc(NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, g.ecc.uncorrected_volatile);
  ecc(NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC, g.ecc.corrected_aggregate);
  ecc(NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, g.ecc.uncorrected_aggregate);
  if (g.ecc == EccCounts{}) missing("ecc");

  unsigned corr = 0, unc = 0, pending = 0, failed = 0;
  if (remapped_rows && Ok(remapped_rows(d, &corr, &unc, &pending, &failed))) {
    g.remapped_rows = RemappedRows{corr, unc, pending != 0, failed != 0};
  } else {
    missing("remapped_rows");
  }

  // The count comes back in `pages` with SUCCESS (it fit) or INSUFFICIENT_SIZE.
  auto retired = [&](unsigned cause, std::optional<uint32_t>& out) {
    if (!retired_pages) return;
    unsigned long long addresses[64];
    unsigned pages = 64;
    nvmlReturn_t r = retired_pages(d, cause, &pages, addresses);
    if (r == NVML_SUCCESS || r == NVML_ERROR_INSUFFICIENT_SIZE) out = pages;
  };
  retired(NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, g.retired_pages_single_bit);
  retired(NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, g.retired_pages_double_bit);
  if (!g.retired_pages_single_bit && !g.retired_pages_double_bit) missing("retired_pages");

  if (pcie_replay && Ok(pcie_replay(d, &v))) g.pcie_replays = v;
  else missing("pcie_replays");

  unsigned ecc_now = 0, ecc_next = 0;
  if (ecc_mode && Ok(ecc_mode(d, &ecc_now, &ecc_next))) {
    g.ecc_mode = ecc_now == NVML_FEATURE_ENABLED;
    g.ecc_mode_pending = ecc_next == NVML_FEATURE_ENABLED;
  } else {
    missing("ecc_mode");
  }
  if (persistence_mode && Ok(persistence_mode(d, &v))) g.persistence_mode = v == NVML_FEATURE_ENABLED;
  else missing("persistence_mode");
  if (clock_info && Ok(clock_info(d, NVML_CLOCK_SM, &v))) g.sm_clock_mhz = v;
  if (max_clock_info && Ok(max_clock_info(d, NVML_CLOCK_SM, &v))) g.sm_clock_max_mhz = v;
  if (!g.sm_clock_mhz || !g.sm_clock_max_mhz) missing("sm_clock");
  if (unsigned long long reasons = 0; clocks_reasons && Ok(clocks_reasons(d, &reasons))) {
    g.clocks_event_reasons = reasons;
  } else {
    missing("clocks_event_reasons");
  }

  bool any_link_answered = false;
  for (unsigned link = 0; nvlink_state && link < NVML_NVLINK_MAX_LINKS; ++link) {
    unsigned active = NVML_FEATURE_DISABLED;
    if (!Ok(nvlink_state(d, link, &active))) continue;  // no such link on this GPU
    any_link_answered = true;
    if (active != NVML_FEATURE_ENABLED) continue;
    NvLinkErrors e{.link = link};
    auto counter = [&](unsigned which, std::optional<uint64_t>& out) {
      unsigned long long n = 0;
      if (nvlink_error && Ok(nvlink_error(d, link, which, &n))) out = n;
    };
    counter(NVML_NVLINK_ERROR_DL_REPLAY, e.replay);
    counter(NVML_NVLINK_ERROR_DL_RECOVERY, e.recovery);
    counter(NVML_NVLINK_ERROR_DL_CRC_FLIT, e.crc_flit);
    counter(NVML_NVLINK_ERROR_DL_CRC_DATA, e.crc_data);
    g.nvlinks.push_back(e);
  }
  if (!any_link_answered) missing("nvlink");
  return g;
}

NvmlOptions NvmlOptionsFromEnv() {
  NvmlOptions o;
  if (const char* lib = std::getenv(kNvmlLibraryEnv); lib && *lib) o.library = lib;
  return o;
}

NvmlGpuSource::NvmlGpuSource(NvmlOptions options) : api_(std::make_unique<Api>()) {
  status_ = api_->Open(options.library);
}

NvmlGpuSource::~NvmlGpuSource() = default;

bool NvmlGpuSource::xid_events() const { return api_->events && !api_->registered.empty(); }

Result<GpuSnapshot> NvmlGpuSource::Read() {
  if (!status_.ok()) return status_.error();
  GpuSnapshot s;
  if (api_->driver_version) {
    char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
    if (api_->driver_version(buf, sizeof buf) == NVML_SUCCESS) s.driver_version.assign(buf, strnlen(buf, sizeof buf));
  }
  unsigned count = 0;
  if (nvmlReturn_t r = api_->device_count(&count); r != NVML_SUCCESS) {
    return Unavailable("NVML cannot count GPUs: " + api_->Describe(r));
  }
  for (unsigned i = 0; i < count; ++i) s.gpus.push_back(api_->ReadGpu(i));
  return s;
}

std::vector<XidEvent> NvmlGpuSource::DrainXids() {
  std::vector<XidEvent> out;
  if (!status_.ok() || !xid_events()) return out;
  for (unsigned n = 0; n < kMaxXidsPerDrain; ++n) {
    nvmlEventData_t e{};
    if (api_->event_set_wait(api_->events, &e, 0) != NVML_SUCCESS) break;  // TIMEOUT: none pending
    if ((e.eventType & nvmlEventTypeXidCriticalError) == 0) continue;
    auto it = api_->registered.find(e.device);
    if (it == api_->registered.end()) continue;  // not a device we registered: nothing to attribute it to
    out.push_back({.gpu_index = it->second,
                   .uuid = api_->ReadString(api_->uuid, e.device, NVML_DEVICE_UUID_V2_BUFFER_SIZE),
                   .xid = e.eventData});
  }
  return out;
}

}  // namespace lockstep::agent::gpu
