// The operator's wiring, as a library that the binary and the tests share:
// informers, the two controllers with their update filters and watch
// mappings, leader election and the write fence. BuildOperator() builds it
// against any KubeApi and Clock (CurlKubeApi + SystemClock in the binary,
// FakeKubeApi + FakeClock in tests); the binary adds flags, HTTP endpoints and
// signal handling around it.
//
// Data flow (see docs/architecture.md):
//   policies  -> policy controller (own key; and all  health controller (all nodes+healths;
//                policies on generation/deletion)
//                                                       generation/deletion changes only)
//   nodes     -> policy controller (all policies)      health controller (own key)
//                 both: labels/deletion changes only (heartbeats filtered out)
//   healths   -> policy controller (its policy label; labels/deletion only)
//                                                      health controller (own key; status-only
//                                                       updates, i.e. agent reports, filtered out)
//   agent DaemonSets, ConfigMaps -> policy controller (owner policy)
//   trainingjobs -> trainingjob controller (own key; status-only updates filtered out)
//   pods labelled lockstep.dev/job -> trainingjob controller (the label's job)
//   a job's ServiceAccount, RoleBinding, ConfigMap, Service -> trainingjob controller (owner job)
// Every write goes through a FencedKubeApi: with leader election on, writes
// pass only while this process holds a lease renewed within the renew
// deadline (on the injected clock). Standby controllers hold keys back
// without work until leadership starts (Controller::GateOpened).
//
// Thread-safety: Start/Stop from one owning thread; the accessors are for
// tests and endpoints and are safe while running.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "lockstep/common/clock.h"
#include "lockstep/common/metrics.h"
#include "lockstep/kube/controller.h"
#include "lockstep/kube/event_recorder.h"
#include "lockstep/kube/fenced_kube_api.h"
#include "lockstep/kube/informer.h"
#include "lockstep/kube/kube_api.h"
#include "lockstep/kube/leader_elector.h"
#include "lockstep/operator/fabrichealth_reconciler.h"
#include "lockstep/operator/fabricpolicy_reconciler.h"
#include "lockstep/operator/kubeflow_reconciler.h"
#include "lockstep/operator/fleetaudit_reconciler.h"
#include "lockstep/operator/trainingjob_reconciler.h"

namespace lockstep::op {

struct OperatorOptions {
  OperatorSettings settings{};
  int workers = 4;                   // reconcile workers per controller
  int watch_timeout_seconds = 1800;  // watches resume from the last resourceVersion after this
  bool leader_elect = true;
  // lease_namespace defaults to settings.namespace_name; identity must be set
  // when leader_elect is on.
  kube::LeaderElectionConfig election{.lease_name = "lockstep-operator"};
  PolicyReconcilerOptions policy{};
  TrainingJobSettings training_jobs{};
  // Protect annotated Kubeflow jobs (kubeflow_reconciler.h): watch TrainJobs
  // (and their JobSets) / PyTorchJobs. Off unless their CRDs are installed
  // (an informer of a missing resource never syncs).
  bool kubeflow_trainjobs = false;
  bool kubeflow_pytorchjobs = false;
  metrics::Registry* registry = nullptr;  // optional; must outlive the operator
};

class Operator {
 public:
  // Use BuildOperator(). REQUIRES: api and clock outlive the operator.
  Operator(kube::KubeApi& api, Clock& clock, OperatorOptions options);
  ~Operator();  // Stop()s
  Operator(const Operator&) = delete;
  Operator& operator=(const Operator&) = delete;

  // Starts informers, controllers and (if enabled) the elector.
  void Start();
  // Stops controllers, releases the lease, stops informers. Idempotent.
  void Stop();

  bool IsLeader() const { return !elector_ || elector_->IsLeader(); }
  // Leadership was lost (the binary exits: a fresh process re-syncs cleanly).
  bool Lost() const { return lost_.load(); }
  bool Synced() const {
    return policy_ctl_.Synced() && health_ctl_.Synced() && job_ctl_.Synced() && audit_ctl_.Synced() &&
           (!trainjob_ctl_ || trainjob_ctl_->Synced()) && (!pytorchjob_ctl_ || pytorchjob_ctl_->Synced());
  }

  // Fills every informer's store synchronously (Informer::ListOnce), running
  // the controllers' handlers. For tests that call Reconcile() directly.
  // REQUIRES: not started.
  Status ListOnce();

  kube::Informer& policies() { return policies_; }
  kube::Informer& nodes() { return nodes_; }
  kube::Informer& healths() { return healths_; }
  kube::Informer& daemonsets() { return daemonsets_; }
  kube::Informer& configmaps() { return configmaps_; }
  kube::Informer& trainingjobs() { return jobs_; }
  kube::Informer& job_pods() { return job_pods_; }
  kube::Informer* kubeflow_trainjobs() { return trainjobs_.get(); }  // null unless watched
  kube::Informer* kubeflow_pytorchjobs() { return pytorchjobs_.get(); }
  kube::Informer* jobsets() { return jobsets_.get(); }
  KubeflowJobReconciler* trainjob_reconciler() { return trainjob_reconciler_.get(); }
  KubeflowJobReconciler* pytorchjob_reconciler() { return pytorchjob_reconciler_.get(); }
  kube::Informer& fleet_audits() { return fleet_audits_; }
  kube::Informer& node_audits() { return node_audits_; }
  FabricPolicyReconciler& policy_reconciler() { return policy_reconciler_; }
  FabricHealthReconciler& health_reconciler() { return health_reconciler_; }
  TrainingJobReconciler& trainingjob_reconciler() { return job_reconciler_; }
  FleetAuditReconciler& fleetaudit_reconciler() { return audit_reconciler_; }
  kube::Controller& policy_controller() { return policy_ctl_; }
  kube::Controller& health_controller() { return health_ctl_; }
  kube::Controller& trainingjob_controller() { return job_ctl_; }
  kube::Controller& fleetaudit_controller() { return audit_ctl_; }
  kube::LeaderElector* elector() { return elector_.get(); }  // null without leader election
  const kube::FencedKubeApi& fenced_api() const { return fenced_; }
  const OperatorOptions& options() const { return options_; }

 private:
  void Wire();
  void WireKubeflow();
  std::vector<kube::Informer*> Informers();

  const OperatorOptions options_;
  metrics::Registry own_registry_;
  metrics::Registry& registry_;
  std::unique_ptr<kube::LeaderElector> elector_;  // writes the Lease through the raw API
  kube::FencedKubeApi fenced_;                    // every other write
  kube::Informer policies_, nodes_, healths_, daemonsets_, configmaps_;
  // TrainingJobs and what they own, in every namespace.
  kube::Informer jobs_, job_pods_, job_serviceaccounts_, job_rolebindings_, job_configmaps_, job_services_, job_pdbs_;
  // Kubeflow jobs (null unless options_.kubeflow_*): before job_reconciler_, which reads their stores.
  std::unique_ptr<kube::Informer> trainjobs_, pytorchjobs_, jobsets_;
  // FleetAudits and their NodeAudits (fleetaudit_plan.h).
  kube::Informer fleet_audits_, node_audits_;
  NodeJobIndex node_jobs_;  // from job_pods_' events; read by the Node and FabricHealth mappers
  kube::EventRecorder events_;
  FabricPolicyReconciler policy_reconciler_;
  FabricHealthReconciler health_reconciler_;
  TrainingJobReconciler job_reconciler_;
  FleetAuditReconciler audit_reconciler_;
  kube::Controller policy_ctl_, health_ctl_, job_ctl_, audit_ctl_;
  std::unique_ptr<KubeflowJobReconciler> trainjob_reconciler_, pytorchjob_reconciler_;
  std::unique_ptr<kube::Controller> trainjob_ctl_, pytorchjob_ctl_;
  std::atomic<bool> lost_{false};
  bool started_ = false;
};

// Validates `options` (workers, election timings and identity) and builds the
// operator. Errors say which option is wrong.
Result<std::unique_ptr<Operator>> BuildOperator(kube::KubeApi& api, Clock& clock, OperatorOptions options);

}  // namespace lockstep::op
