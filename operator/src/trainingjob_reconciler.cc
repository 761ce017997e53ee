#include "lockstep/operator/trainingjob_reconciler.h"

#include "lockstep/common/log.h"
#include "lockstep/kube/conditions.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/kube/time_format.h"
#include "lockstep/operator/apply_outcome.h"

namespace lockstep::op {

using kube::ReconcileResult;

std::vector<std::string> TrainingJobKeysForPod(const Json& pod) {
  std::string job = kube::GetString(pod, {"metadata", "labels", kJobLabel});
  if (job.empty()) return {};
  return {kube::ObjectKey(kube::Namespace(pod), job)};
}

std::vector<std::string> TrainingJobKeysForKubeflowJob(const kube::Store& jobs, const char* ref_field,
                                                       const Json& kubeflow_job) {
  const std::string ns = kube::Namespace(kubeflow_job), name = kube::Name(kubeflow_job);
  std::vector<std::string> keys;
  for (const auto& j : jobs.List([&](const Json& j) {
         return kube::Namespace(j) == ns && kube::GetString(j, {"spec", ref_field, "name"}) == name;
       })) {
    keys.push_back(kube::ObjectKey(*j));
  }
  return keys;
}

namespace {
std::string NodeOf(const Json& pod) { return kube::GetString(pod, {"spec", "nodeName"}); }
}  // namespace

void NodeJobIndex::Add(const Json& pod) {
  const std::string node = NodeOf(pod);
  auto keys = TrainingJobKeysForPod(pod);
  if (node.empty() || keys.empty()) return;
  std::lock_guard l(mu_);
  ++jobs_[node][keys[0]];
}

void NodeJobIndex::Remove(const Json& pod) {
  const std::string node = NodeOf(pod);
  auto keys = TrainingJobKeysForPod(pod);
  if (node.empty() || keys.empty()) return;
  std::lock_guard l(mu_);
  auto n = jobs_.find(node);
  if (n == jobs_.end()) return;
  auto j = n->second.find(keys[0]);
  if (j == n->second.end()) return;
  if (--j->second <= 0) n->second.erase(j);
  if (n->second.empty()) jobs_.erase(n);
}

void NodeJobIndex::Update(const Json& old_pod, const Json& new_pod) {
  Remove(old_pod);
  Add(new_pod);
}

std::vector<std::string> NodeJobIndex::JobsOn(const std::string& node) const {
  std::lock_guard l(mu_);
  std::vector<std::string> out;
  auto n = jobs_.find(node);
  if (n == jobs_.end()) return out;
  for (const auto& [key, count] : n->second) out.push_back(key);
  return out;
}

TrainingJobReconciler::TrainingJobReconciler(kube::KubeApi& api, TrainingJobCaches caches, kube::EventRecorder& events,
                                             Clock& clock, metrics::Registry& registry, TrainingJobSettings settings)
    : api_(api),
      caches_(caches),
      events_(events),
      clock_(clock),
      pods_(registry.Counter("lockstep_trainingjob_pods_total",
                             "Pods the TrainingJob controller created or deleted, by role (rank, coordinator, spare)",
                             {"role", "action"})),
      triggers_(registry.Counter("lockstep_trainingjob_migration_triggers_total",
                                 "Rank pods the TrainingJob controller annotated lockstep.dev/migrate, by trigger "
                                 "(drain: the node was cordoned; early-warning: its GPU health)",
                                 {"trigger"})),
      settings_(std::move(settings)) {}

Status TrainingJobReconciler::ApplyChild(const Json& obj, bool* changed) {
  const std::string kind = obj.value("kind", "");
  const kube::Gvr* gvr = nullptr;
  const kube::Store* cache = nullptr;
  if (kind == "ServiceAccount") gvr = &kube::gvr::kServiceAccounts, cache = &caches_.serviceaccounts;
  if (kind == "RoleBinding") gvr = &kube::gvr::kRoleBindings, cache = &caches_.rolebindings;
  if (kind == "ConfigMap") gvr = &kube::gvr::kConfigMaps, cache = &caches_.configmaps;
  if (kind == "Service") gvr = &kube::gvr::kServices, cache = &caches_.services;
  if (kind == "PodDisruptionBudget") gvr = &kube::gvr::kPodDisruptionBudgets, cache = &caches_.pdbs;
  if (!gvr) return Internal("no resource for kind " + kind);
  const std::string ns = kube::Namespace(obj), name = kube::Name(obj);
  kube::ObjectPtr cached = cache->Get(ns, name);
  if (cached && LiveCovers(*cached, obj)) return Status();
  auto r = api_.Apply(*gvr, ns, name, obj, {.field_manager = "lockstep-operator", .force = true});
  if (!r.ok()) return Error{r.code(), kind + " " + ns + "/" + name + ": " + r.error().message};
  *changed = true;
  return Status();
}

ReconcileResult TrainingJobReconciler::Reconcile(const std::string& key) {
  kube::ObjectPtr job = caches_.jobs.GetByKey(key);
  if (!job || kube::FindPath(*job, {"metadata", "deletionTimestamp"})) {
    return ReconcileResult::Done();  // its objects go with it (garbage collection)
  }
  const std::string ns = kube::Namespace(*job), name = kube::Name(*job);
  TrainingJobInput in;
  in.job = job.get();
  in.now = kube::FormatRfc3339(clock_.Wall());
  auto pods = caches_.pods.List([&](const Json& p) {
    return kube::Namespace(p) == ns && kube::GetString(p, {"metadata", "labels", kJobLabel}) == name;
  });
  std::vector<kube::ObjectPtr> held;  // keeps the nodes and FabricHealths alive for the plan
  for (const auto& p : pods) {
    in.pods.push_back(p.get());
    const std::string node = kube::GetString(*p, {"spec", "nodeName"});
    if (node.empty() || in.nodes.count(node)) continue;
    if (kube::ObjectPtr n = caches_.nodes.Get("", node)) in.nodes[node] = held.emplace_back(n).get();
    if (kube::ObjectPtr h = caches_.healths.Get("", node)) in.healths[node] = held.emplace_back(h).get();
    if (!in.nodes.count(node)) in.nodes[node] = nullptr;  // looked up once
  }
  kube::ObjectPtr kubeflow_job, jobset;  // kept alive for the plan
  std::string unwatched;                  // the flag that would make the operator watch the referenced kind
  if (std::string ref = kube::GetString(*job, {"spec", "trainJobRef", "name"}); !ref.empty()) {
    if (caches_.trainjobs) {
      kubeflow_job = caches_.trainjobs->Get(ns, ref);
    } else {
      unwatched = "--kubeflow-trainjobs (chart value kubeflow.trainJob.enabled)";
    }
    if (kubeflow_job && caches_.jobsets) jobset = caches_.jobsets->Get(ns, ref);
    if (jobset && !ControlledBy(*jobset, *kubeflow_job)) jobset = nullptr;
  } else if (std::string pref = kube::GetString(*job, {"spec", "pytorchJobRef", "name"}); !pref.empty()) {
    if (caches_.pytorchjobs) {
      kubeflow_job = caches_.pytorchjobs->Get(ns, pref);
    } else {
      unwatched = "--kubeflow-pytorchjobs (chart value kubeflow.pytorchJob.enabled)";
    }
  }
  in.kubeflow_job = kubeflow_job.get();
  in.jobset = jobset.get();
  TrainingJobPlan plan = PlanTrainingJob(in, settings_);
  if (!plan.kubeflow_missing.empty() && !unwatched.empty()) {
    plan.kubeflow_missing += " (this operator does not watch that kind: turn on " + unwatched + ")";
    Json conds = plan.status["conditions"];
    plan.status["conditions"] = kube::SetCondition(conds, {"Ready", "False", "KubeflowJobNotFound", plan.kubeflow_missing},
                                                   kube::Generation(*job), in.now);
  }

  Status failed;
  bool applied = false;
  for (const Json& obj : plan.apply) {
    if (Status s = ApplyChild(obj, &applied); !s.ok()) {
      failed = s;
      break;
    }
  }
  std::vector<std::string> created;
  std::string rejected;  // a pod the API server found invalid: reported, retried slowly
  if (failed.ok()) {
    for (const Json& pod : plan.create_pods) {
      auto r = api_.Create(kube::gvr::kPods, ns, pod);
      if (r.ok() || r.code() == ErrorCode::kAlreadyExists) {
        if (r.ok()) {
          created.push_back(kube::Name(pod));
          pods_.Inc({kube::GetString(pod, {"metadata", "labels", kRoleLabel}), "created"});
        }
        continue;
      }
      if (r.code() == ErrorCode::kInvalidArgument) {
        rejected = DescribeRejectedPod(pod, r.error().message);
        plan.status = WithRejectedPod(plan.status, rejected, kube::Generation(*job), in.now);
      } else {
        failed = Error{r.code(), "Pod " + ns + "/" + kube::Name(pod) + ": " + r.error().message};
      }
      break;
    }
  }
  if (failed.ok()) {
    for (const std::string& pod : plan.delete_pods) {
      kube::ObjectPtr cached = caches_.pods.Get(ns, pod);
      Status s = api_.Delete(kube::gvr::kPods, ns, pod);
      if (s.ok()) {
        pods_.Inc({cached ? kube::GetString(*cached, {"metadata", "labels", kRoleLabel}) : "", "deleted"});
      }
      if (!s.ok() && s.code() != ErrorCode::kNotFound) {
        failed = Error{s.code(), "deleting Pod " + ns + "/" + pod + ": " + s.error().message};
        break;
      }
    }
  }

  std::vector<std::string> triggered;
  if (failed.ok()) {
    for (const MigrationTrigger& t : plan.annotate) {
      auto r = api_.MergePatch(kube::gvr::kPods, ns, t.pod, MigrationAnnotationPatch(t));
      if (r.ok()) {
        triggers_.Inc({t.trigger});
        triggered.push_back((t.rank >= 0 ? "rank " + std::to_string(t.rank) : std::string("spare")) + " (pod " + t.pod +
                            "): " + t.trigger + ", " + t.reason);
        continue;
      }
      if (r.code() == ErrorCode::kNotFound) continue;  // gone already: nothing to move
      failed = Error{r.code(), "annotating Pod " + ns + "/" + t.pod + ": " + r.error().message};
      break;
    }
  }

  const Json old_status = job->contains("status") ? (*job)["status"] : Json::object();
  if (plan.status != old_status) {
    const Json* ready = kube::FindCondition(old_status, "Ready");
    const bool newly_invalid = !plan.spec_error.empty() && kube::GetString(old_status, {"phase"}).empty();
    const bool newly_missing =
        !plan.kubeflow_missing.empty() && !(ready && ready->value("reason", "") == "KubeflowJobNotFound");
    if (newly_invalid) events_.Warning(*job, "InvalidSpec", plan.spec_error);
    if (!rejected.empty() && !(ready && ready->value("reason", "") == "InvalidTemplate")) {
      events_.Warning(*job, "InvalidTemplate", rejected);
    }
    if (newly_missing) events_.Warning(*job, "KubeflowJobNotFound", plan.kubeflow_missing);
    // Only the keys this plan changed, without a resourceVersion precondition:
    // the job's coordinator writes its own keys (generation, migrations,
    // lastMigration) beside ours, so a precondition conflicted (409) whenever it
    // wrote between our read and our write, and sending its keys from our
    // (possibly older) copy could undo its newer values.
    Json changed = Json::object();
    for (auto it = plan.status.begin(); it != plan.status.end(); ++it) {
      if (!old_status.contains(it.key()) || old_status[it.key()] != it.value()) changed[it.key()] = it.value();
    }
    auto r = api_.MergePatch(kube::gvr::kTrainingJobs, ns, name, Json{{"status", changed}}, "status");
    if (!r.ok() && r.code() != ErrorCode::kNotFound && failed.ok()) failed = r.error();
  }
  if (applied) log::Info("applied coordinator objects", {{"trainingjob", key}});
  for (const std::string& t : triggered) {
    events_.Normal(*job, "MigrationTriggered", "annotated " + t);
    log::Info("migration triggered", {{"trainingjob", key}, {"pod", t}});
  }
  if (!created.empty()) {
    std::string list;
    for (const auto& c : created) list += (list.empty() ? "" : ", ") + c;
    events_.Normal(*job, "CreatedPods", "created pods " + list);
    log::Info("created pods", {{"trainingjob", key}, {"pods", list}});
  }
  if (!failed.ok()) {
    log::Warn("trainingjob reconcile failed", {{"trainingjob", key}, {"error", failed.error().message}});
    // A conflict is a stale cache (usually our own status write not seen
    // yet): retried at once, nothing to tell the user.
    if (failed.code() != ErrorCode::kConflict) events_.Warning(*job, "ReconcileFailed", failed.error().message);
    return ReconcileResult::Fail(failed.error());
  }
  if (!rejected.empty()) {
    log::Warn("a pod of the job was rejected by the API server", {{"trainingjob", key}, {"error", rejected}});
    return ReconcileResult::After(kInvalidRetry);
  }
  // Not retried hot: the Kubeflow job appearing enqueues the key (the wiring).
  if (!plan.kubeflow_missing.empty()) return ReconcileResult::After(kKubeflowRetry);
  return ReconcileResult::Done();
}

}  // namespace lockstep::op
