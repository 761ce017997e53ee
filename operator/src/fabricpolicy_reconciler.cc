#include "lockstep/operator/fabricpolicy_reconciler.h"

#include "lockstep/common/log.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/kube/time_format.h"
#include "lockstep/operator/apply_outcome.h"
#include "lockstep/operator/policy_status.h"

namespace lockstep::op {

using kube::ReconcileResult;

std::vector<PolicyView> PolicyViews(const kube::Store& policies) {
  std::vector<PolicyView> views;
  for (const auto& p : policies.List()) {
    if (kube::FindPath(*p, {"metadata", "deletionTimestamp"})) continue;
    PolicyView v = ToPolicyView(*p);
    // A policy whose spec does not parse selects nothing (and says so).
    if (!ParsePolicySpec(v.name, p->contains("spec") ? (*p)["spec"] : Json()).ok()) v.node_selector = nullptr;
    views.push_back(std::move(v));
  }
  return views;
}

FabricPolicyReconciler::FabricPolicyReconciler(kube::KubeApi& api, PolicyCaches caches, kube::EventRecorder& events,
                                               Clock& clock, OperatorSettings settings,
                                               PolicyReconcilerOptions options)
    : api_(api),
      caches_(caches),
      events_(events),
      clock_(clock),
      settings_(std::move(settings)),
      options_(options) {}

Status FabricPolicyReconciler::ApplyChild(const kube::Gvr& gvr, const kube::Store& cache, Json obj, bool* changed) {
  obj["metadata"]["annotations"][kAppliedHashAnnotation] = StableHash(kube::DumpJson(obj));
  const std::string name = kube::Name(obj);
  // Converge on the live object, not on a hash we left on it: an edit of any
  // field we set (the annotation untouched) is applied back.
  kube::ObjectPtr cached = cache.Get(settings_.namespace_name, name);
  if (cached && LiveCovers(*cached, obj)) return Status();
  auto r = api_.Apply(gvr, settings_.namespace_name, name, obj, {.field_manager = "lockstep-operator", .force = true});
  if (!r.ok()) return r.error();
  // An apply the server found to change nothing (a value it normalises, say)
  // keeps the resourceVersion: no event for it.
  if (!cached || kube::ResourceVersion(*r) != kube::ResourceVersion(*cached)) *changed = true;
  return Status();
}

Nanos FabricPolicyReconciler::StatusWait(const std::string& key) {
  std::lock_guard l(mu_);
  auto it = last_status_write_.find(key);
  if (it == last_status_write_.end()) return Nanos(0);
  return options_.status_interval - (clock_.Monotonic() - it->second);
}

void FabricPolicyReconciler::StatusWritten(const std::string& key) {
  std::lock_guard l(mu_);
  last_status_write_[key] = clock_.Monotonic();
}

ReconcileResult FabricPolicyReconciler::Reconcile(const std::string& key) {
  kube::ObjectPtr policy = caches_.policies.Get("", key);
  if (!policy || kube::FindPath(*policy, {"metadata", "deletionTimestamp"})) {
    std::lock_guard l(mu_);
    last_status_write_.erase(key);
    return ReconcileResult::Done();  // children go with their owner (garbage collection)
  }
  const std::string now = kube::FormatRfc3339(clock_.Wall());
  const Json spec_json = policy->contains("spec") ? (*policy)["spec"] : Json();
  auto spec = ParsePolicySpec(key, spec_json);

  PolicyStatusInput in;
  in.policy = policy.get();
  in.now = now;
  in.policies = PolicyViews(caches_.policies);
  auto nodes = caches_.nodes.List();
  for (const auto& n : nodes) in.nodes.push_back(n.get());

  bool changed = false;
  bool rejected = false;  // the API server found a child invalid
  if (!spec.ok()) {
    in.spec_error = spec.error().message;
  } else {
    PolicyRef ref{key, kube::Uid(*policy)};
    const std::string name = AgentObjectName(key);
    Status s = ApplyChild(kube::gvr::kConfigMaps, caches_.configmaps, RenderAgentConfigMap(ref, *spec, settings_),
                          &changed);
    std::string kind = "ConfigMap";
    if (s.ok()) {
      kind = "DaemonSet";
      s = ApplyChild(kube::gvr::kDaemonSets, caches_.daemonsets, RenderAgentDaemonSet(ref, *spec, settings_),
                     &changed);
    }
    if (!s.ok() && s.code() == ErrorCode::kInvalidArgument) {
      rejected = true;
      in.spec_error = DescribeRejectedApply(kind, settings_.namespace_name + "/" + name, s.error().message);
    } else if (!s.ok()) {
      in.apply_error = kind + " " + settings_.namespace_name + "/" + name + ": " + s.error().message;
    }
  }
  kube::ObjectPtr ds = caches_.daemonsets.Get(settings_.namespace_name, AgentObjectName(key));
  in.daemonset = ds.get();

  Json status = ComputePolicyStatus(in);
  const Json old_status = policy->contains("status") ? (*policy)["status"] : Json::object();
  Nanos status_wait{0};
  if (status != old_status) status_wait = StatusWait(key);
  if (status != old_status && status_wait <= Nanos(0)) {
    if (!in.spec_error.empty() && !kube::FindPath(old_status, {"conditions"})) {
      events_.Warning(*policy, rejected ? "InvalidAgentObject" : "InvalidSpec", in.spec_error);
    }
    Json patch = {{"metadata", {{"resourceVersion", kube::ResourceVersion(*policy)}}}, {"status", status}};
    auto r = api_.MergePatch(kube::gvr::kFabricPolicies, "", key, patch, "status");
    if (!r.ok() && r.code() != ErrorCode::kNotFound) return ReconcileResult::Fail(r.error());
    if (r.ok()) StatusWritten(key);
  }
  if (changed) {
    events_.Normal(*policy, "AgentApplied", "applied agent ConfigMap and DaemonSet " + AgentObjectName(key));
    log::Info("applied agent objects", {{"policy", key}});
  }
  if (!in.apply_error.empty()) {
    events_.Warning(*policy, "ApplyFailed", in.apply_error);
    return ReconcileResult::Fail(Unavailable(in.apply_error));
  }
  if (rejected) {
    log::Warn("agent objects rejected by the API server", {{"policy", key}, {"error", in.spec_error}});
    Nanos after = options_.invalid_retry;
    if (status_wait > Nanos(0) && status_wait < after) after = status_wait;
    return ReconcileResult::After(after);
  }
  // A status change held back by the interval is written when it ends.
  if (status_wait > Nanos(0)) return ReconcileResult::After(status_wait);
  return ReconcileResult::Done();
}

}  // namespace lockstep::op
