// TrainingJob (lockstep.dev/v1alpha1, crds/lockstep.dev_trainingjobs.yaml):
// spec and status as plain values with the CRD's defaults, and their JSON
// conversions (the operator's TrainingJob controller reads them); the types
// keep the CRD and the code in step. Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/api/condition.h"
#include "lockstep/api/defaults.h"
#include "lockstep/common/result.h"

namespace lockstep::api {

using Json = nlohmann::json;

struct MigrationSpec {
  bool on_failure = true;
  bool on_early_warning = true;
  bool on_drain = true;
  int max_concurrent = kMigrationMaxConcurrent;  // 1..64
  bool operator==(const MigrationSpec&) const = default;
};

struct DetectionSpec {
  int heartbeat_interval_ms = kHeartbeatIntervalMs;  // 10..60000
  int heartbeat_timeout_ms = kHeartbeatTimeoutMs;    // 100..600000, > interval
  int hang_timeout_seconds = kHangTimeoutSeconds;    // 1..86400
  bool operator==(const DetectionSpec&) const = default;
};

std::vector<int> DefaultEarlyWarningXids();  // 48, 63, 64, 74, 79, 92, 94, 95

struct EarlyWarningSpec {
  int gpu_temp_celsius = kGpuTempCelsius;             // 30..150
  int ecc_single_bit_per_hour = kEccSingleBitPerHour;  // 1..1e6
  std::vector<int> xids = DefaultEarlyWarningXids();  // each 1..65535, a set
  bool operator==(const EarlyWarningSpec&) const = default;
};

struct TrainingJobSpec {
  int replicas = 1;  // required, 1..4096
  int spares = kTrainingJobSpares;  // 0..64
  // Exactly one of template (a corev1.PodTemplateSpec with containers),
  // pytorchJobRef (a Kubeflow PyTorchJob) and trainJobRef (a Kubeflow TrainJob).
  std::optional<Json> pod_template;
  std::optional<std::string> pytorch_job_ref;  // pytorchJobRef.name
  std::optional<std::string> train_job_ref;    // trainJobRef.name
  MigrationSpec migration;
  DetectionSpec detection;
  EarlyWarningSpec early_warning;
  bool operator==(const TrainingJobSpec&) const = default;
};

struct MigrationRecord {
  std::optional<int> rank;
  std::optional<std::string> from_pod, to_pod, reason, start_time, complete_time;
  std::optional<int64_t> duration_ms;
  bool operator==(const MigrationRecord&) const = default;
};

struct TrainingJobStatus {
  std::optional<std::string> phase;  // Pending, Running, Migrating, Degraded, Failed, Succeeded
  std::optional<int64_t> observed_generation, generation;
  std::optional<int> ready_replicas, available_spares, migrations;
  std::optional<MigrationRecord> last_migration;
  std::vector<Condition> conditions;
  bool operator==(const TrainingJobStatus&) const = default;
};

// Checks metadata.name: at most 45 characters (names derived from it, the
// longest "<job>-coordinator-state", stay within 63).
Status ValidateTrainingJobName(const std::string& name);

// Parses spec (replicas is required). Errors name the job and the field.
Result<TrainingJobSpec> ParseTrainingJobSpec(const std::string& job_name, const Json& spec);
Result<TrainingJobStatus> ParseTrainingJobStatus(const std::string& job_name, const Json& status);

Json ToJson(const TrainingJobSpec& spec);
Json ToJson(const TrainingJobStatus& status);

}  // namespace lockstep::api
