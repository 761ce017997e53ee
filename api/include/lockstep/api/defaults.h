// The defaults and well-known values of the operator-agent contract, defined
// once. The CRDs (crds/) and the chart keep their literal defaults;
// tests/api/crd_defaults_test.cc checks that they equal these. Constants only.
#pragma once

#include <cstdint>

namespace lockstep::api {

// Node agent ports.
inline constexpr int kProbePort = 7311;    // UDP probe port (FabricPolicy spec.probe.port)
inline constexpr int kHealthPort = 9610;   // /healthz, /readyz, /metrics (agent.yaml healthAddr)
inline constexpr int kTimeApiPort = 9611;  // fabric-time API on loopback (agent.yaml timeApiAddr)
inline constexpr int kFabricProbePort = 7312;  // UDP path probes, one per rail x peer (agent.yaml fabric.port)
// Fabric paths probed per (rail, peer) (agent.yaml fabric.pathsPerRail): path
// i > 0 leaves from UDP source port fabric.port + 1 + i, so the fabric's ECMP
// hash (the 5-tuple) spreads them over its spines. A peer's traffic on a rail
// hashes onto one of those paths, so a fault on one spine is seen only by a
// probe that hashes onto it: with S spines and K paths, a given spine is
// probed with probability 1 - (1 - 1/S)^K, 94% at 2 spines and 4 paths
// (both spines: 1 - 2^(1-K), 88%). Paths beyond the pinned one ride the idle
// rotation (probe.idlePathIntervalMs), so they cost idle probes only.
inline constexpr int kFabricPathsPerRail = 4;
inline constexpr int kMaxFabricPathsPerRail = 16;
inline constexpr char kFabricHostInterface[] = "host0";  // where the host address lives (fabric.hostInterface)
inline constexpr char kHealthHost[] = "0.0.0.0";
inline constexpr char kTimeApiHost[] = "127.0.0.1";

// The nodes a FabricPolicy selects by default, and the taint it tolerates.
inline constexpr char kDefaultNodeSelectorKey[] = "nvidia.com/gpu.present";
inline constexpr char kDefaultNodeSelectorValue[] = "true";
inline constexpr char kGpuTaintKey[] = "nvidia.com/gpu";

// FabricPolicy spec defaults (crds/lockstep.dev_fabricpolicies.yaml).
inline constexpr int kProbeIntervalMs = 20;
inline constexpr int kPeersPerNode = 16;
inline constexpr int kClockSyncWindowSeconds = 2;
inline constexpr int64_t kMaxErrorBoundNs = 1000;
inline constexpr int64_t kAsymmetryAllowanceNs = 100;
inline constexpr char kAgentImage[] = "ghcr.io/lockstep/lockstep-agent:0.1.0";
inline constexpr char kAgentImagePullPolicy[] = "IfNotPresent";
inline constexpr char kAgentPriorityClassName[] = "system-node-critical";
// The NCCL plugin's host directories (spec.agent.ncclPluginHostPath,
// spec.agent.ncclSocketHostPath): the DaemonSet's init container copies
// libnccl-net-lockstep.so from the agent image into the first, the agent
// serves its plugin endpoint (nccl.sock) in the second; training pods mount both.
inline constexpr char kNcclPluginHostPath[] = "/opt/lockstep/nccl";
inline constexpr char kNcclSocketHostPath[] = "/run/lockstep";

// Fabric failover (spec.probe.pathIntervalMs, spec.probe.missThreshold,
// spec.failover, spec.flapAlertPerHour). With jittered 14 ms path probes, 3
// misses and urgent probes after a miss, a dead path is declared down within
// 43.8 ms (<= 50 ms); see fabric/include/lockstep/fabric/options.h for the
// arithmetic.
inline constexpr int kPathProbeIntervalMs = 14;
inline constexpr int kMissThreshold = 3;
// Tiered probing (fabric/include/lockstep/fabric/probe_tiers.h): paths that
// carry no traffic are probed in a rotation, each at least every this many
// ms (detection on them within 623 ms with idle ticks); 0 probes every
// path every pathIntervalMs. spec.probe.idlePathIntervalMs, agent.yaml
// probe.idlePathIntervalMs. A node with no fast path ticks every
// kIdleTickMs instead of every pathIntervalMs (0: never; between 2 x
// pathIntervalMs and idlePathIntervalMs / 2). spec.probe.idleTickMs.
inline constexpr int kIdlePathIntervalMs = 500;
inline constexpr int kIdleTickMs = 100;
inline constexpr int kReadmitAfterSeconds = 2;   // clean period before a recovered path carries traffic
inline constexpr int kMaxHoldDownSeconds = 300;  // cap of the exponential hold-down of flapping paths
inline constexpr int kHoldDownDecaySeconds = 60;  // each this long up lowers a path's hold-down level by one
inline constexpr int kFlapAlertPerHour = 8;

// Bounds shared by the CRD schema, the operator and the agent.
inline constexpr int kMinProbePort = 1024;  // in a FabricPolicy; agent.yaml also accepts 0 (tests)
inline constexpr int kMaxProbeIntervalMs = 60000;
inline constexpr int kMaxPeersPerNode = 64;
inline constexpr int kMaxWindowSeconds = 60;
inline constexpr int64_t kMaxMaxErrorBoundNs = 1'000'000'000;
inline constexpr int64_t kMaxAsymmetryAllowanceNs = 1'000'000;
inline constexpr int kMaxMissThreshold = 100;
inline constexpr int kMaxReadmitAfterSeconds = 3600;
inline constexpr int kMaxMaxHoldDownSeconds = 86400;
inline constexpr int kMaxHoldDownDecaySeconds = 86400;
inline constexpr int kMaxFlapAlertPerHour = 10000;
inline constexpr int kMaxRails = 16;  // spec.rails

// Latency SLAs (FabricPolicy spec.latency, agent.yaml latency:): a path's
// one-way delay p99 above its SLA is a breach, judged once the path's stats
// window holds minSamples delays.
inline constexpr int kLatencyMinSamples = 50;
inline constexpr int kMaxLatencyMinSamples = 10000;
inline constexpr int64_t kMaxOneWayDelayP99Micros = 10'000'000;  // 10 s

// A FabricPolicy's name is the value of the label lockstep.dev/policy on its
// agent objects and FabricHealths, and of app.kubernetes.io/instance: a label
// value holds at most 63 characters. (The objects named lockstep-agent-<policy>
// are DNS subdomains of up to 253 and are not the limit.)
inline constexpr int kMaxPolicyNameLength = 63;
inline constexpr char kPolicyLabel[] = "lockstep.dev/policy";
inline constexpr char kAgentObjectPrefix[] = "lockstep-agent-";

// Where the agent finds its files in the pod the operator renders.
inline constexpr char kAgentConfigDir[] = "/etc/lockstep";
inline constexpr char kAgentConfigKey[] = "agent.yaml";
inline constexpr char kProbeKeyDir[] = "/etc/lockstep/probe-key";
inline constexpr char kProbeKeyFile[] = "/etc/lockstep/probe-key/key";

// TrainingJob spec defaults (crds/lockstep.dev_trainingjobs.yaml).
inline constexpr int kTrainingJobSpares = 1;
inline constexpr int kMigrationMaxConcurrent = 1;
inline constexpr int kHeartbeatIntervalMs = 500;
inline constexpr int kHeartbeatTimeoutMs = 3000;
inline constexpr int kHangTimeoutSeconds = 10;
inline constexpr int kGpuTempCelsius = 90;
inline constexpr int kEccSingleBitPerHour = 100;
// "<job>-coordinator-state" (the coordinator's state ConfigMap, 18 more
// characters) stays within 63.
inline constexpr int kMaxTrainingJobNameLength = 45;
inline constexpr char kCoordinatorImage[] = "ghcr.io/lockstep/lockstep-coordinator:0.1.0";
inline constexpr char kCoordinatorClusterRole[] = "lockstep-coordinator";

// GPU health in the agent (FabricPolicy spec.gpu, agent.yaml gpu:). Mode
// Auto reads GPUs through NVML where the driver is, Required also reports a
// node without one as unhealthy, Disabled reads nothing. The early-warning
// defaults are the TrainingJob's (kGpuTempCelsius, kEccSingleBitPerHour,
// DefaultEarlyWarningXids) plus the margin to the slowdown threshold.
inline constexpr char kGpuModeAuto[] = "Auto";
inline constexpr char kGpuModeRequired[] = "Required";
inline constexpr char kGpuModeDisabled[] = "Disabled";
inline constexpr int kGpuPollIntervalSeconds = 10;
inline constexpr int kMaxGpuPollIntervalSeconds = 3600;
inline constexpr int kGpuSlowdownMarginCelsius = 5;
inline constexpr int kMaxGpuSlowdownMarginCelsius = 50;
inline constexpr int kMinGpuTempCelsius = 30;  // spec.earlyWarning.gpuTempCelsius bounds (both CRDs)
inline constexpr int kMaxGpuTempCelsius = 150;
inline constexpr int kMaxEccSingleBitPerHour = 1'000'000;
inline constexpr int kMaxEarlyWarningXids = 128;

}  // namespace lockstep::api
