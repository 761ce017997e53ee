// Kubernetes objects as values: Json (the API's own wire form) and Gvr, the
// group/version/resource that names a REST collection, with the resources
// Lockstep uses. Pure value types; thread-compatible (the constants are
// immutable after static initialisation).
#pragma once

#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

namespace lockstep::kube {

using Json = nlohmann::json;

// Group/version/resource, e.g. {"apps", "v1", "daemonsets", true}.
// group is "" for the core API.
struct Gvr {
  std::string group{};
  std::string version{};
  std::string resource{};  // plural, lower case
  bool namespaced = true;
  std::string kind{};      // for apply bodies and events, e.g. "DaemonSet"

  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
  bool operator<(const Gvr& o) const { return std::tie(group, version, resource) < std::tie(o.group, o.version, o.resource); }
  bool operator==(const Gvr& o) const { return group == o.group && version == o.version && resource == o.resource; }
};

// Well-known resources.
namespace gvr {
extern const Gvr kNodes;
extern const Gvr kPods;
extern const Gvr kConfigMaps;
extern const Gvr kSecrets;
extern const Gvr kEvents;
extern const Gvr kDaemonSets;
extern const Gvr kLeases;
extern const Gvr kServices;
extern const Gvr kServiceAccounts;
extern const Gvr kRoleBindings;
extern const Gvr kFabricPolicies;
extern const Gvr kFabricHealths;
extern const Gvr kTrainingJobs;
extern const Gvr kPodDisruptionBudgets;
// Kubeflow (Trainer v2 on JobSet, and the v1 training-operator).
extern const Gvr kTrainJobs;    // trainer.kubeflow.org/v1alpha1
extern const Gvr kPyTorchJobs;  // kubeflow.org/v1
extern const Gvr kJobSets;      // jobset.x-k8s.io/v1alpha2
extern const Gvr kFleetAudits;  // the fleet audit (operator) and one node's part of it (its agent)
extern const Gvr kNodeAudits;
}  // namespace gvr

}  // namespace lockstep::kube
