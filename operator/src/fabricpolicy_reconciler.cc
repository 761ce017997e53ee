#include "lockstep/operator/fabricpolicy_reconciler.h"

#include "lockstep/common/log.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/kube/time_format.h"
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
                                               Clock& clock, OperatorSettings settings)
    : api_(api), caches_(caches), events_(events), clock_(clock), settings_(std::move(settings)) {}

std::string FabricPolicyReconciler::ApplyChild(const kube::Gvr& gvr, const kube::Store& cache, Json obj,
                                               bool* changed) {
  const std::string hash = StableHash(kube::DumpJson(obj));
  obj["metadata"]["annotations"][kAppliedHashAnnotation] = hash;
  const std::string name = kube::Name(obj);
  if (auto cached = cache.Get(settings_.namespace_name, name);
      cached && kube::GetString(*cached, {"metadata", "annotations", kAppliedHashAnnotation}) == hash) {
    return "";
  }
  auto r = api_.Apply(gvr, settings_.namespace_name, name, obj, {.field_manager = "lockstep-operator", .force = true});
  if (!r.ok()) return gvr.kind + " " + settings_.namespace_name + "/" + name + ": " + r.error().message;
  *changed = true;
  return "";
}

ReconcileResult FabricPolicyReconciler::Reconcile(const std::string& key) {
  kube::ObjectPtr policy = caches_.policies.Get("", key);
  if (!policy || kube::FindPath(*policy, {"metadata", "deletionTimestamp"})) {
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
  if (!spec.ok()) {
    in.spec_error = spec.error().message;
  } else {
    PolicyRef ref{key, kube::Uid(*policy)};
    in.apply_error = ApplyChild(kube::gvr::kConfigMaps, caches_.configmaps,
                                RenderAgentConfigMap(ref, *spec, settings_), &changed);
    if (in.apply_error.empty()) {
      in.apply_error = ApplyChild(kube::gvr::kDaemonSets, caches_.daemonsets,
                                  RenderAgentDaemonSet(ref, *spec, settings_), &changed);
    }
  }
  kube::ObjectPtr ds = caches_.daemonsets.Get(settings_.namespace_name, AgentObjectName(key));
  in.daemonset = ds.get();

  Json status = ComputePolicyStatus(in);
  const Json old_status = policy->contains("status") ? (*policy)["status"] : Json::object();
  if (status != old_status) {
    if (!in.spec_error.empty() && !kube::FindPath(old_status, {"conditions"})) {
      events_.Warning(*policy, "InvalidSpec", in.spec_error);
    }
    Json patch = {{"metadata", {{"resourceVersion", kube::ResourceVersion(*policy)}}}, {"status", status}};
    auto r = api_.MergePatch(kube::gvr::kFabricPolicies, "", key, patch, "status");
    if (!r.ok() && r.code() != ErrorCode::kNotFound) return ReconcileResult::Fail(r.error());
  }
  if (changed) {
    events_.Normal(*policy, "AgentApplied", "applied agent ConfigMap and DaemonSet " + AgentObjectName(key));
    log::Info("applied agent objects", {{"policy", key}});
  }
  if (!in.apply_error.empty()) {
    events_.Warning(*policy, "ApplyFailed", in.apply_error);
    return ReconcileResult::Fail(Unavailable(in.apply_error));
  }
  return ReconcileResult::Done();
}

}  // namespace lockstep::op
