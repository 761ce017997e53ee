#include "lockstep/operator/operator_runtime.h"

#include "lockstep/common/log.h"
#include "lockstep/api/fabric_health.h"
#include "lockstep/kube/conditions.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/operator/fleetaudit_plan.h"

namespace lockstep::op {
namespace {

constexpr char kOwnedSelector[] = "app.kubernetes.io/managed-by=lockstep-operator";

kube::InformerOptions AllObjects(const OperatorOptions& o) {
  return {.watch_timeout_seconds = o.watch_timeout_seconds};
}

// Pods of TrainingJobs (ranks, spares the coordinator made, the coordinator).
kube::InformerOptions JobPods(const OperatorOptions& o) {
  return {.label_selector = kJobLabel, .watch_timeout_seconds = o.watch_timeout_seconds};
}

// What the TrainingJob controller applies, in every namespace.
kube::InformerOptions JobOwned(const OperatorOptions& o) {
  return {.label_selector = std::string(kJobLabel) + "," + kOwnedSelector,
          .watch_timeout_seconds = o.watch_timeout_seconds};
}

kube::InformerOptions Owned(const OperatorOptions& o) {
  return {.ns = o.settings.namespace_name,
          .label_selector = kOwnedSelector,
          .watch_timeout_seconds = o.watch_timeout_seconds};
}

bool Cordoned(const kube::Json& node) {
  const kube::Json* u = kube::FindPath(node, {"spec", "unschedulable"});
  return u && u->is_boolean() && u->get<bool>();
}

}  // namespace

Operator::Operator(kube::KubeApi& api, Clock& clock, OperatorOptions options)
    : options_(std::move(options)),
      registry_(options_.registry != nullptr ? *options_.registry : own_registry_),
      elector_(!options_.leader_elect
                   ? nullptr
                   : std::make_unique<kube::LeaderElector>(
                         api, clock, options_.election,
                         kube::LeaderCallbacks{
                             .on_started_leading =
                                 [this] {
                                   log::Info("became leader", {{"identity", options_.election.identity}});
                                   // Keys a standby held back are reconciled now.
                                   policy_ctl_.GateOpened();
                                   health_ctl_.GateOpened();
                                   job_ctl_.GateOpened();
                                   if (trainjob_ctl_) trainjob_ctl_->GateOpened();
                                   if (pytorchjob_ctl_) pytorchjob_ctl_->GateOpened();
                                   audit_ctl_.GateOpened();
                                 },
                             .on_stopped_leading =
                                 [this](bool was_lost) {
                                   if (!was_lost) return;
                                   log::Error("lost leadership", {{"identity", options_.election.identity}});
                                   lost_ = true;
                                 },
                             .on_new_leader =
                                 [](const std::string& h) {
                                   log::Info("observed leader", {{"holder", h}});
                                 }})),
      fenced_(api, [this] { return IsLeader(); }),
      policies_(api, kube::gvr::kFabricPolicies, AllObjects(options_)),
      nodes_(api, kube::gvr::kNodes, AllObjects(options_)),
      healths_(api, kube::gvr::kFabricHealths, AllObjects(options_)),
      daemonsets_(api, kube::gvr::kDaemonSets, Owned(options_)),
      configmaps_(api, kube::gvr::kConfigMaps, Owned(options_)),
      jobs_(api, kube::gvr::kTrainingJobs, AllObjects(options_)),
      job_pods_(api, kube::gvr::kPods, JobPods(options_)),
      job_serviceaccounts_(api, kube::gvr::kServiceAccounts, JobOwned(options_)),
      job_rolebindings_(api, kube::gvr::kRoleBindings, JobOwned(options_)),
      job_configmaps_(api, kube::gvr::kConfigMaps, JobOwned(options_)),
      job_services_(api, kube::gvr::kServices, JobOwned(options_)),
      job_pdbs_(api, kube::gvr::kPodDisruptionBudgets, JobOwned(options_)),
      trainjobs_(options_.kubeflow_trainjobs
                     ? std::make_unique<kube::Informer>(api, kube::gvr::kTrainJobs, AllObjects(options_))
                     : nullptr),
      pytorchjobs_(options_.kubeflow_pytorchjobs
                       ? std::make_unique<kube::Informer>(api, kube::gvr::kPyTorchJobs, AllObjects(options_))
                       : nullptr),
      jobsets_(options_.kubeflow_trainjobs
                   ? std::make_unique<kube::Informer>(api, kube::gvr::kJobSets, AllObjects(options_))
                   : nullptr),
      fleet_audits_(api, kFleetAudits, AllObjects(options_)),
      node_audits_(api, kNodeAudits,
                   {.label_selector = kFleetAuditLabel, .watch_timeout_seconds = options_.watch_timeout_seconds}),
      events_(fenced_, clock, {.component = "lockstep-operator", .registry = &registry_}),
      policy_reconciler_(fenced_, {policies_.store(), nodes_.store(), daemonsets_.store(), configmaps_.store()},
                         events_, clock, options_.settings, options_.policy),
      health_reconciler_(fenced_, {policies_.store(), nodes_.store(), healths_.store()}, clock),
      job_reconciler_(
          fenced_,
          {jobs_.store(), job_pods_.store(), job_serviceaccounts_.store(), job_rolebindings_.store(),
           job_configmaps_.store(), job_services_.store(), job_pdbs_.store(), nodes_.store(), healths_.store(),
           trainjobs_ ? &trainjobs_->store() : nullptr, pytorchjobs_ ? &pytorchjobs_->store() : nullptr,
           jobsets_ ? &jobsets_->store() : nullptr},
          events_, clock, registry_, options_.training_jobs),
      audit_reconciler_(fenced_, {fleet_audits_.store(), node_audits_.store(), nodes_.store(), healths_.store()},
                        events_, clock),
      policy_ctl_(policy_reconciler_, clock,
                  {.name = "fabricpolicy",
                   .workers = options_.workers,
                   .registry = &registry_,
                   .gate = elector_ ? std::function<bool()>([this] { return IsLeader(); }) : nullptr}),
      health_ctl_(health_reconciler_, clock,
                  {.name = "fabrichealth",
                   .workers = options_.workers,
                   .registry = &registry_,
                   .gate = elector_ ? std::function<bool()>([this] { return IsLeader(); }) : nullptr}),
      job_ctl_(job_reconciler_, clock,
               {.name = "trainingjob",
                .workers = options_.workers,
                .registry = &registry_,
                .gate = elector_ ? std::function<bool()>([this] { return IsLeader(); }) : nullptr}),
      audit_ctl_(audit_reconciler_, clock,
                 {.name = "fleetaudit",
                  .workers = 1,
                  .registry = &registry_,
                  .gate = elector_ ? std::function<bool()>([this] { return IsLeader(); }) : nullptr}) {
  auto kubeflow_controller = [&](KubeflowKind kind, kube::Informer& jobs, kube::Informer* jobsets,
                                 std::unique_ptr<KubeflowJobReconciler>& r, std::unique_ptr<kube::Controller>& c,
                                 const char* name) {
    r = std::make_unique<KubeflowJobReconciler>(
        kind, fenced_, KubeflowCaches{jobs.store(), jobs_.store(), jobsets ? &jobsets->store() : nullptr}, events_);
    c = std::make_unique<kube::Controller>(
        *r, clock,
        kube::ControllerOptions{.name = name,
                                .workers = options_.workers,
                                .registry = &registry_,
                                .gate = elector_ ? std::function<bool()>([this] { return IsLeader(); }) : nullptr});
  };
  if (trainjobs_) {
    kubeflow_controller(KubeflowKind::kTrainJob, *trainjobs_, jobsets_.get(), trainjob_reconciler_, trainjob_ctl_,
                        "kubeflow-trainjob");
  }
  if (pytorchjobs_) {
    kubeflow_controller(KubeflowKind::kPyTorchJob, *pytorchjobs_, nullptr, pytorchjob_reconciler_, pytorchjob_ctl_,
                        "kubeflow-pytorchjob");
  }
  Wire();
  WireKubeflow();
}

Operator::~Operator() { Stop(); }

void Operator::Wire() {
  kube::Controller& p = policy_ctl_;
  p.For(policies_);
  // A policy's conflicts depend on every other policy's selector: a policy
  // added, deleted or respecified re-evaluates all of them (not their status
  // writes, which would loop every policy through every other).
  p.Watches(
      policies_, [this](const kube::Json&) { return policies_.store().Keys(); }, kube::GenerationOrDeletionChanged);
  p.Owns(daemonsets_, kube::gvr::kFabricPolicies);
  p.Owns(configmaps_, kube::gvr::kFabricPolicies);
  // Both controllers read only a node's labels (and whether it is going away):
  // status heartbeats are filtered out before they reach a queue.
  p.Watches(
      nodes_, [this](const kube::Json&) { return policies_.store().Keys(); }, kube::LabelsOrDeletionChanged);
  // A FabricHealth coming, going or changing policy label; its status (the
  // agents' reports) is nothing the policy status reads.
  p.Watches(
      healths_,
      [](const kube::Json& h) {
        std::string policy = kube::GetString(h, {"metadata", "labels", "lockstep.dev/policy"});
        return policy.empty() ? std::vector<std::string>{} : std::vector<std::string>{policy};
      },
      kube::LabelsOrDeletionChanged);

  kube::Controller& h = health_ctl_;
  h.For(nodes_, kube::LabelsOrDeletionChanged);
  // The agents report on their FabricHealth every few seconds per node: those
  // status-only updates carry nothing the health reconciler plans from.
  h.For(healths_, kube::SpecOrMetadataChanged);
  // Every node's plan depends on every policy's selector, not on policy status
  // (which changes as agents roll out: without the filter, each status write
  // would queue every node ahead of the new ones).
  h.Watches(
      policies_,
      [this](const kube::Json&) {
        std::vector<std::string> keys = nodes_.store().Keys();
        for (auto& k : healths_.store().Keys()) keys.push_back(k);
        return keys;
      },
      kube::GenerationOrDeletionChanged);

  kube::Controller& j = job_ctl_;
  // The job's own status writes carry nothing it plans from.
  j.For(jobs_, kube::SpecOrMetadataChanged);
  // Every pod change of a job (phase, deletion; spares the coordinator made).
  j.Watches(job_pods_, TrainingJobKeysForPod);
  for (kube::Informer* i : {&job_serviceaccounts_, &job_rolebindings_, &job_configmaps_, &job_services_, &job_pdbs_}) {
    j.Owns(*i, kube::gvr::kTrainingJobs);
  }
  // The migration triggers: a node cordoned (or uncordoned), NotReady (or
  // Ready again) or its GPU
  // health changing enqueues the jobs with a pod there (the index, kept from
  // the job pods' events, spares scanning every pod).
  job_pods_.AddEventHandlers(
      {.on_add = [this](const kube::ObjectPtr& p) { node_jobs_.Add(*p); },
       .on_update = [this](const kube::ObjectPtr& o, const kube::ObjectPtr& n) { node_jobs_.Update(*o, *n); },
       .on_delete = [this](const kube::ObjectPtr& p) { node_jobs_.Remove(*p); }});
  j.Watches(
      nodes_, [this](const kube::Json& n) { return node_jobs_.JobsOn(kube::Name(n)); },
      [](const kube::Json& o, const kube::Json& n) {
        return Cordoned(o) != Cordoned(n) || NodeNotReadyReason(o).empty() != NodeNotReadyReason(n).empty();
      });
  j.Watches(
      healths_, [this](const kube::Json& h) { return node_jobs_.JobsOn(kube::Name(h)); },
      [](const kube::Json& o, const kube::Json& n) {
        const kube::Json* og = kube::FindPath(o, {"status", "gpu"});
        const kube::Json* ng = kube::FindPath(n, {"status", "gpu"});
        const kube::Json* oc = kube::FindPath(o, {"status"});
        const kube::Json* nc = kube::FindPath(n, {"status"});
        const kube::Json* ocond = oc ? kube::FindCondition(*oc, api::kGpuConditionType) : nullptr;
        const kube::Json* ncond = nc ? kube::FindCondition(*nc, api::kGpuConditionType) : nullptr;
        auto same = [](const kube::Json* a, const kube::Json* b) { return a == b || (a && b && *a == *b); };
        return !same(og, ng) || !same(ocond, ncond);
      });

  kube::Controller& a = audit_ctl_;
  // The audit's own status writes carry nothing it plans from.
  a.For(fleet_audits_, kube::SpecOrMetadataChanged);
  // An agent's result (or a NodeAudit deleted) re-judges its FleetAudit.
  a.Watches(node_audits_, [](const kube::Json& na) {
    std::string audit = kube::GetString(na, {"metadata", "labels", kFleetAuditLabel});
    return audit.empty() ? std::vector<std::string>{} : std::vector<std::string>{audit};
  });
}

void Operator::WireKubeflow() {
  kube::Controller& j = job_ctl_;
  // A referenced Kubeflow job appearing, changing or going (and a TrainJob's JobSet).
  if (trainjobs_) {
    j.Watches(*trainjobs_, [this](const kube::Json& k) {
      return TrainingJobKeysForKubeflowJob(jobs_.store(), "trainJobRef", k);
    });
    j.Watches(*jobsets_, [this](const kube::Json& js) {
      return TrainingJobKeysForKubeflowJob(jobs_.store(), "trainJobRef", js);
    });
    kube::Controller& t = *trainjob_ctl_;
    // Annotations are metadata: an edit re-plans; the Kubeflow controller's status writes do not.
    t.For(*trainjobs_, kube::SpecOrMetadataChanged);
    t.Owns(jobs_, kube::gvr::kTrainJobs);
    t.Owns(*jobsets_, kube::gvr::kTrainJobs);
  }
  if (pytorchjobs_) {
    j.Watches(*pytorchjobs_, [this](const kube::Json& k) {
      return TrainingJobKeysForKubeflowJob(jobs_.store(), "pytorchJobRef", k);
    });
    kube::Controller& p = *pytorchjob_ctl_;
    p.For(*pytorchjobs_, kube::SpecOrMetadataChanged);
    p.Owns(jobs_, kube::gvr::kPyTorchJobs);
  }
}

std::vector<kube::Informer*> Operator::Informers() {
  std::vector<kube::Informer*> all = {&policies_,         &nodes_,          &healths_,      &daemonsets_,
                                      &configmaps_,       &jobs_,           &job_pods_,     &job_serviceaccounts_,
                                      &job_rolebindings_, &job_configmaps_, &job_services_, &job_pdbs_,
                                      &fleet_audits_,     &node_audits_};
  for (kube::Informer* i : {trainjobs_.get(), pytorchjobs_.get(), jobsets_.get()}) {
    if (i) all.push_back(i);
  }
  return all;
}

Status Operator::ListOnce() {
  for (kube::Informer* i : Informers()) {
    if (Status s = i->ListOnce(); !s.ok()) return s;
  }
  return Status();
}

void Operator::Start() {
  if (started_) return;
  started_ = true;
  for (kube::Informer* i : Informers()) i->Start();
  policy_ctl_.Start();
  health_ctl_.Start();
  job_ctl_.Start();
  if (trainjob_ctl_) trainjob_ctl_->Start();
  if (pytorchjob_ctl_) pytorchjob_ctl_->Start();
  audit_ctl_.Start();
  if (elector_) elector_->Start();
}

void Operator::Stop() {
  policy_ctl_.Stop();
  health_ctl_.Stop();
  job_ctl_.Stop();
  if (trainjob_ctl_) trainjob_ctl_->Stop();
  if (pytorchjob_ctl_) pytorchjob_ctl_->Stop();
  audit_ctl_.Stop();
  if (elector_) elector_->Stop();  // releases the lease so a successor starts at once
  for (kube::Informer* i : Informers()) i->Stop();
}

Result<std::unique_ptr<Operator>> BuildOperator(kube::KubeApi& api, Clock& clock, OperatorOptions options) {
  if (options.workers < 1 || options.workers > 64) {
    return InvalidArgument("workers must be between 1 and 64 (got " + std::to_string(options.workers) + ")");
  }
  if (options.settings.namespace_name.empty()) return InvalidArgument("the operator namespace must not be empty");
  if (options.leader_elect) {
    kube::LeaderElectionConfig& e = options.election;
    if (e.lease_namespace.empty()) e.lease_namespace = options.settings.namespace_name;
    if (e.lease_name.empty()) return InvalidArgument("the leader election lease name must not be empty");
    if (e.identity.empty()) return InvalidArgument("leader election needs an identity (e.g. the pod name)");
    if (!(e.retry_period < e.renew_deadline && e.renew_deadline < e.lease_duration)) {
      return InvalidArgument("need retry period < renew deadline < lease duration");
    }
  }
  return std::make_unique<Operator>(api, clock, std::move(options));
}

}  // namespace lockstep::op
