// The subset of the NVML C ABI the agent uses, declared here because no
// NVIDIA headers are installed where the agent builds. Values and layouts are
// NVML's documented ones (nvml.h, NVML API Reference); the static_asserts
// pin the two structs whose layout the library writes into. Internal to
// lockstep_agent_gpu_nvml and the fake NVML in tests/support/fake_nvml.
//
// Every function is looked up with dlsym by the name in its comment; none is
// linked, so the agent starts on a node without the driver.
#pragma once

#include <cstddef>

extern "C" {

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;

// nvmlReturn_t values.
enum : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_UNKNOWN = 999,
};

// nvmlTemperatureSensors_t, nvmlTemperatureThresholds_t.
enum : unsigned { NVML_TEMPERATURE_GPU = 0 };
enum : unsigned { NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1 };
// nvmlMemoryErrorType_t, nvmlEccCounterType_t.
enum : unsigned { NVML_MEMORY_ERROR_TYPE_CORRECTED = 0, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1 };
enum : unsigned { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 };
// nvmlPageRetirementCause_t.
enum : unsigned {
  NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
  NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
};
// nvmlEnableState_t.
enum : unsigned { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };
// nvmlClockType_t.
enum : unsigned { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
// nvmlNvLinkErrorCounter_t.
enum : unsigned {
  NVML_NVLINK_ERROR_DL_REPLAY = 0,
  NVML_NVLINK_ERROR_DL_RECOVERY = 1,
  NVML_NVLINK_ERROR_DL_CRC_FLIT = 2,
  NVML_NVLINK_ERROR_DL_CRC_DATA = 3
};

inline constexpr unsigned NVML_NVLINK_MAX_LINKS = 18;
inline constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x8ULL;
inline constexpr unsigned NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
inline constexpr unsigned NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
inline constexpr unsigned NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;

// nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 fills it.
typedef struct nvmlPciInfo_st {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];  // "00000000:3B:00.0"
} nvmlPciInfo_t;

// nvmlEventData_t as nvmlEventSetWait_v2 fills it. eventData holds the Xid
// for nvmlEventTypeXidCriticalError (999: an unknown Xid).
typedef struct nvmlEventData_st {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

}  // extern "C"

static_assert(sizeof(nvmlPciInfo_t) == 68 && offsetof(nvmlPciInfo_t, busId) == 36, "nvmlPciInfo_t layout");
static_assert(sizeof(nvmlEventData_t) == 32 && offsetof(nvmlEventData_t, eventData) == 16, "nvmlEventData_t layout");

namespace lockstep::agent::gpu::nvml {

// Function pointer types, one per symbol (its name in the comment).
using InitFn = nvmlReturn_t (*)();                                          // nvmlInit_v2
using ShutdownFn = nvmlReturn_t (*)();                                      // nvmlShutdown
using ErrorStringFn = const char* (*)(nvmlReturn_t);                        // nvmlErrorString
using DriverVersionFn = nvmlReturn_t (*)(char*, unsigned);                  // nvmlSystemGetDriverVersion
using DeviceCountFn = nvmlReturn_t (*)(unsigned*);                          // nvmlDeviceGetCount_v2
using HandleByIndexFn = nvmlReturn_t (*)(unsigned, nvmlDevice_t*);          // nvmlDeviceGetHandleByIndex_v2
using StringFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned);           // nvmlDeviceGetUUID, nvmlDeviceGetName
using PciInfoFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*);           // nvmlDeviceGetPciInfo_v3
using TemperatureFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned*);  // nvmlDeviceGetTemperature
using ThresholdFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned*);    // nvmlDeviceGetTemperatureThreshold
using TotalEccFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned,
                                    unsigned long long*);  // nvmlDeviceGetTotalEccErrors
using RemappedRowsFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*, unsigned*,
                                        unsigned*);  // nvmlDeviceGetRemappedRows
using RetiredPagesFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned*,
                                        unsigned long long*);               // nvmlDeviceGetRetiredPages
using PcieReplayFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*);             // nvmlDeviceGetPcieReplayCounter
using NvLinkStateFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned*);  // nvmlDeviceGetNvLinkState
using NvLinkErrorFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned,
                                       unsigned long long*);             // nvmlDeviceGetNvLinkErrorCounter
using EccModeFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*);  // nvmlDeviceGetEccMode
using EnableStateFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*);         // nvmlDeviceGetPersistenceMode
using ClockFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned*);     // nvmlDeviceGet{,Max}ClockInfo
// nvmlDeviceGetCurrentClocksEventReasons (r535+), nvmlDeviceGetCurrentClocksThrottleReasons (older).
using ClocksReasonsFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
using EventSetCreateFn = nvmlReturn_t (*)(nvmlEventSet_t*);  // nvmlEventSetCreate
using RegisterEventsFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long,
                                          nvmlEventSet_t);                            // nvmlDeviceRegisterEvents
using EventSetWaitFn = nvmlReturn_t (*)(nvmlEventSet_t, nvmlEventData_t*, unsigned);  // nvmlEventSetWait_v2
using EventSetFreeFn = nvmlReturn_t (*)(nvmlEventSet_t);                              // nvmlEventSetFree

}  // namespace lockstep::agent::gpu::nvml
