#include "lockstep/api/training_job.h"

#include <set>

#include "json_reader.h"

namespace lockstep::api {
namespace {

std::string Context(const std::string& name) { return "TrainingJob \"" + name + "\": "; }

void ReadInt32(JsonReader& r, const Json& obj, const char* key, const std::string& path, std::optional<int>& out) {
  std::optional<int64_t> v;
  r.OptInt(obj, key, path, 0, INT32_MAX, v);
  if (v) out = static_cast<int>(*v);
}

}  // namespace

std::vector<int> DefaultEarlyWarningXids() { return {48, 63, 64, 74, 79, 92, 94, 95}; }

Status ValidateTrainingJobName(const std::string& name) {
  if (name.size() > static_cast<size_t>(kMaxTrainingJobNameLength)) {
    return InvalidArgument(Context(name) + "metadata.name must be at most " +
                           std::to_string(kMaxTrainingJobNameLength) +
                           " characters so that the names derived from it (pods, the coordinator's \"<name>-coordinator-state\") "
                           "stay within 63; choose a shorter name");
  }
  return Status::Ok();
}

Result<TrainingJobSpec> ParseTrainingJobSpec(const std::string& name, const Json& spec) {
  if (Status s = ValidateTrainingJobName(name); !s.ok()) return s.error();
  if (!spec.is_object()) return InvalidArgument(Context(name) + "spec is required");
  TrainingJobSpec t;
  JsonReader r(Context(name));
  if (!JsonReader::Get(spec, "replicas")) r.Fail("spec.replicas is required (the number of ranks, 1..4096)");
  r.Int(spec, "replicas", "spec.replicas", 1, 4096, t.replicas);
  r.Int(spec, "spares", "spec.spares", 0, 64, t.spares);
  if (const Json* tpl = JsonReader::Get(spec, "template")) {
    const Json* pod_spec = tpl->is_object() ? JsonReader::Get(*tpl, "spec") : nullptr;
    const Json* containers = pod_spec && pod_spec->is_object() ? JsonReader::Get(*pod_spec, "containers") : nullptr;
    if (!containers || !containers->is_array() || containers->empty()) {
      r.Fail("spec.template.spec.containers must list at least one container (a corev1.PodTemplateSpec)");
    }
    t.pod_template = *tpl;
  }
  if (JsonReader::Get(spec, "pytorchJobRef")) {
    const Json& ref = r.Object(spec, "pytorchJobRef", "spec.pytorchJobRef");
    std::string job;
    if (!JsonReader::Get(ref, "name")) r.Fail("spec.pytorchJobRef.name is required");
    r.String(ref, "name", "spec.pytorchJobRef.name", job, false, 253);
    t.pytorch_job_ref = job;
  }
  if (JsonReader::Get(spec, "trainJobRef")) {
    const Json& ref = r.Object(spec, "trainJobRef", "spec.trainJobRef");
    std::string job;
    if (!JsonReader::Get(ref, "name")) r.Fail("spec.trainJobRef.name is required");
    r.String(ref, "name", "spec.trainJobRef.name", job, false, 253);
    t.train_job_ref = job;
  }
  const int sources = t.pod_template.has_value() + t.pytorch_job_ref.has_value() + t.train_job_ref.has_value();
  if (r.ok() && sources != 1) {
    r.Fail("exactly one of spec.template, spec.pytorchJobRef or spec.trainJobRef must be set: use template to let "
           "Lockstep run the ranks, pytorchJobRef to protect an existing Kubeflow PyTorchJob or trainJobRef a "
           "Kubeflow TrainJob");
  }
  const Json& m = r.Object(spec, "migration", "spec.migration");
  r.Bool(m, "onFailure", "spec.migration.onFailure", t.migration.on_failure);
  r.Bool(m, "onEarlyWarning", "spec.migration.onEarlyWarning", t.migration.on_early_warning);
  r.Bool(m, "onDrain", "spec.migration.onDrain", t.migration.on_drain);
  r.Int(m, "maxConcurrent", "spec.migration.maxConcurrent", 1, 64, t.migration.max_concurrent);
  const Json& d = r.Object(spec, "detection", "spec.detection");
  r.Int(d, "heartbeatIntervalMs", "spec.detection.heartbeatIntervalMs", 10, 60000, t.detection.heartbeat_interval_ms);
  r.Int(d, "heartbeatTimeoutMs", "spec.detection.heartbeatTimeoutMs", 100, 600000, t.detection.heartbeat_timeout_ms);
  r.Int(d, "hangTimeoutSeconds", "spec.detection.hangTimeoutSeconds", 1, 86400, t.detection.hang_timeout_seconds);
  if (r.ok() && t.detection.heartbeat_timeout_ms <= t.detection.heartbeat_interval_ms) {
    r.Fail("spec.detection.heartbeatTimeoutMs must be greater than spec.detection.heartbeatIntervalMs; raise the "
           "timeout or lower the interval");
  }
  const Json& e = r.Object(spec, "earlyWarning", "spec.earlyWarning");
  r.Int(e, "gpuTempCelsius", "spec.earlyWarning.gpuTempCelsius", 30, 150, t.early_warning.gpu_temp_celsius);
  r.Int(e, "eccSingleBitPerHour", "spec.earlyWarning.eccSingleBitPerHour", 1, 1'000'000,
        t.early_warning.ecc_single_bit_per_hour);
  if (JsonReader::Get(e, "xids")) {
    const Json& xids = r.Array(e, "xids", "spec.earlyWarning.xids");
    if (xids.size() > 128) r.Fail("spec.earlyWarning.xids must have at most 128 entries");
    t.early_warning.xids.clear();
    std::set<int> seen;
    for (size_t i = 0; i < xids.size() && r.ok(); ++i) {
      int x = 0;
      r.Int(Json{{"x", xids[i]}}, "x", "spec.earlyWarning.xids[" + std::to_string(i) + "]", 1, 65535, x);
      if (r.ok() && !seen.insert(x).second) r.Fail("spec.earlyWarning.xids lists " + std::to_string(x) + " twice");
      t.early_warning.xids.push_back(x);
    }
  }
  if (!r.ok()) return InvalidArgument(r.error());
  return t;
}

Result<TrainingJobStatus> ParseTrainingJobStatus(const std::string& name, const Json& status) {
  TrainingJobStatus s;
  JsonReader r(Context(name));
  r.OptEnum(status, "phase", "status.phase", {"Pending", "Running", "Migrating", "Degraded", "Failed", "Succeeded"},
            s.phase);
  r.OptInt(status, "observedGeneration", "status.observedGeneration", 0, INT64_MAX, s.observed_generation);
  r.OptInt(status, "generation", "status.generation", 0, INT64_MAX, s.generation);
  ReadInt32(r, status, "readyReplicas", "status.readyReplicas", s.ready_replicas);
  ReadInt32(r, status, "availableSpares", "status.availableSpares", s.available_spares);
  ReadInt32(r, status, "migrations", "status.migrations", s.migrations);
  if (JsonReader::Get(status, "lastMigration")) {
    const Json& m = r.Object(status, "lastMigration", "status.lastMigration");
    MigrationRecord& rec = s.last_migration.emplace();
    ReadInt32(r, m, "rank", "status.lastMigration.rank", rec.rank);
    r.OptString(m, "fromPod", "status.lastMigration.fromPod", rec.from_pod, 253);
    r.OptString(m, "toPod", "status.lastMigration.toPod", rec.to_pod, 253);
    r.OptString(m, "reason", "status.lastMigration.reason", rec.reason, 1024);
    r.OptString(m, "startTime", "status.lastMigration.startTime", rec.start_time);
    r.OptString(m, "completeTime", "status.lastMigration.completeTime", rec.complete_time);
    r.OptInt(m, "durationMs", "status.lastMigration.durationMs", 0, INT64_MAX, rec.duration_ms);
  }
  ReadConditions(r, status, "status.conditions", s.conditions);
  if (!r.ok()) return InvalidArgument(r.error());
  return s;
}

Json ToJson(const TrainingJobSpec& t) {
  Json j = {{"replicas", t.replicas},
            {"spares", t.spares},
            {"migration", {{"onFailure", t.migration.on_failure},
                           {"onEarlyWarning", t.migration.on_early_warning},
                           {"onDrain", t.migration.on_drain},
                           {"maxConcurrent", t.migration.max_concurrent}}},
            {"detection", {{"heartbeatIntervalMs", t.detection.heartbeat_interval_ms},
                           {"heartbeatTimeoutMs", t.detection.heartbeat_timeout_ms},
                           {"hangTimeoutSeconds", t.detection.hang_timeout_seconds}}},
            {"earlyWarning", {{"gpuTempCelsius", t.early_warning.gpu_temp_celsius},
                              {"eccSingleBitPerHour", t.early_warning.ecc_single_bit_per_hour},
                              {"xids", t.early_warning.xids}}}};
  if (t.pod_template) j["template"] = *t.pod_template;
  if (t.pytorch_job_ref) j["pytorchJobRef"] = {{"name", *t.pytorch_job_ref}};
  if (t.train_job_ref) j["trainJobRef"] = {{"name", *t.train_job_ref}};
  return j;
}

Json ToJson(const TrainingJobStatus& s) {
  Json j = Json::object();
  if (s.phase) j["phase"] = *s.phase;
  if (s.observed_generation) j["observedGeneration"] = *s.observed_generation;
  if (s.generation) j["generation"] = *s.generation;
  if (s.ready_replicas) j["readyReplicas"] = *s.ready_replicas;
  if (s.available_spares) j["availableSpares"] = *s.available_spares;
  if (s.migrations) j["migrations"] = *s.migrations;
  if (s.last_migration) {
    const MigrationRecord& m = *s.last_migration;
    Json l = Json::object();
    if (m.rank) l["rank"] = *m.rank;
    if (m.from_pod) l["fromPod"] = *m.from_pod;
    if (m.to_pod) l["toPod"] = *m.to_pod;
    if (m.reason) l["reason"] = *m.reason;
    if (m.start_time) l["startTime"] = *m.start_time;
    if (m.complete_time) l["completeTime"] = *m.complete_time;
    if (m.duration_ms) l["durationMs"] = *m.duration_ms;
    j["lastMigration"] = l;
  }
  if (!s.conditions.empty()) j["conditions"] = ToJson(s.conditions);
  return j;
}

}  // namespace lockstep::api
