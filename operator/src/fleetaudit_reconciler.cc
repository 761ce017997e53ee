#include "lockstep/operator/fleetaudit_reconciler.h"

#include "lockstep/common/log.h"
#include "lockstep/kube/gvr.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/operator/fleetaudit_plan.h"

namespace lockstep::op {

FleetAuditReconciler::FleetAuditReconciler(kube::KubeApi& api, FleetAuditCaches caches, kube::EventRecorder& events,
                                           Clock& clock, Nanos status_interval)
    : api_(api), caches_(caches), events_(events), clock_(clock), status_interval_(status_interval) {}

kube::ReconcileResult FleetAuditReconciler::Reconcile(const std::string& key) {
  kube::ObjectPtr fa = caches_.audits.GetByKey(key);
  if (!fa) {
    std::lock_guard<std::mutex> l(mu_);
    last_status_write_.erase(key);
    return kube::ReconcileResult::Done();
  }
  const std::string name = kube::Name(*fa);
  std::vector<kube::ObjectPtr> nodes = caches_.nodes.List();
  std::vector<kube::ObjectPtr> node_audits = caches_.node_audits.List([&](const kube::Json& o) {
    return kube::GetString(o, {"metadata", "labels", kFleetAuditLabel}) == name;
  });
  FleetAuditView view{.audit = *fa, .now = clock_.Wall()};
  for (const auto& n : nodes) view.nodes.push_back(n.get());
  for (const auto& na : node_audits) view.node_audits.push_back(na.get());
  for (const auto& h : caches_.healths.List()) view.agents.insert(kube::Name(*h));
  FleetAuditPlan plan = PlanFleetAudit(view);

  for (const kube::Json& obj : plan.create) {
    auto r = api_.Create(kNodeAudits, "", obj);
    if (!r.ok() && r.code() != ErrorCode::kAlreadyExists) return kube::ReconcileResult::Fail(r.error());
  }
  for (const AuditMirror& m : plan.mirrors) {
    auto r = api_.MergePatch(kube::gvr::kFabricHealths, "", m.node, {{"status", m.status_patch}}, "status");
    if (!r.ok() && r.code() != ErrorCode::kNotFound) return kube::ReconcileResult::Fail(r.error());
  }

  const kube::Json* old = kube::FindPath(*fa, {"status"});
  if (!old || *old != plan.status) {
    const MonoTime now = clock_.Monotonic();
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = last_status_write_.find(key);
      if (!plan.completed && it != last_status_write_.end() && now - it->second < status_interval_) {
        return kube::ReconcileResult::After(status_interval_ - (now - it->second));
      }
      last_status_write_[key] = now;
    }
    auto r = api_.MergePatch(kFleetAudits, "", name, {{"status", plan.status}}, "status");
    if (!r.ok()) {
      if (r.code() == ErrorCode::kNotFound) return kube::ReconcileResult::Done();
      return kube::ReconcileResult::Fail(r.error());
    }
  }
  for (const FleetAuditEvent& e : plan.events) {
    kube::ObjectPtr on = e.node.empty() ? fa : caches_.healths.Get("", e.node);
    if (!on) continue;
    events_.Record(*on, e.warning ? kube::EventRecorder::Type::kWarning : kube::EventRecorder::Type::kNormal, e.reason,
                   e.message);
  }
  if (plan.completed) {
    log::Info("fleet audit completed", {{"fleetaudit", name},
                                        {"failed", std::to_string(plan.status.value("failed", 0))},
                                        {"nodes", std::to_string(plan.status.value("nodes", 0))}});
  }
  if (plan.requeue_after) return kube::ReconcileResult::After(*plan.requeue_after);
  return kube::ReconcileResult::Done();
}

}  // namespace lockstep::op
