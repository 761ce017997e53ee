// Well-known resources and REST path construction.
#include "lockstep/kube/gvr.h"
#include "lockstep/kube/paths.h"

namespace lockstep::kube {
namespace gvr {
const Gvr kNodes{"", "v1", "nodes", false, "Node"};
const Gvr kPods{"", "v1", "pods", true, "Pod"};
const Gvr kConfigMaps{"", "v1", "configmaps", true, "ConfigMap"};
const Gvr kSecrets{"", "v1", "secrets", true, "Secret"};
const Gvr kEvents{"", "v1", "events", true, "Event"};
const Gvr kDaemonSets{"apps", "v1", "daemonsets", true, "DaemonSet"};
const Gvr kLeases{"coordination.k8s.io", "v1", "leases", true, "Lease"};
const Gvr kServices{"", "v1", "services", true, "Service"};
const Gvr kServiceAccounts{"", "v1", "serviceaccounts", true, "ServiceAccount"};
const Gvr kRoleBindings{"rbac.authorization.k8s.io", "v1", "rolebindings", true, "RoleBinding"};
const Gvr kFabricPolicies{"lockstep.dev", "v1alpha1", "fabricpolicies", false, "FabricPolicy"};
const Gvr kFabricHealths{"lockstep.dev", "v1alpha1", "fabrichealths", false, "FabricHealth"};
const Gvr kTrainingJobs{"lockstep.dev", "v1alpha1", "trainingjobs", true, "TrainingJob"};
const Gvr kPodDisruptionBudgets{"policy", "v1", "poddisruptionbudgets", true, "PodDisruptionBudget"};
const Gvr kTrainJobs{"trainer.kubeflow.org", "v1alpha1", "trainjobs", true, "TrainJob"};
const Gvr kPyTorchJobs{"kubeflow.org", "v1", "pytorchjobs", true, "PyTorchJob"};
const Gvr kJobSets{"jobset.x-k8s.io", "v1alpha2", "jobsets", true, "JobSet"};
const Gvr kFleetAudits{"lockstep.dev", "v1alpha1", "fleetaudits", false, "FleetAudit"};
const Gvr kNodeAudits{"lockstep.dev", "v1alpha1", "nodeaudits", false, "NodeAudit"};
}  // namespace gvr

std::string UrlEncode(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

std::string ResourcePath(const Gvr& r, std::string_view ns, std::string_view name,
                         std::string_view subresource) {
  std::string p = r.group.empty() ? "/api/" + r.version : "/apis/" + r.group + "/" + r.version;
  if (r.namespaced && !ns.empty()) p += "/namespaces/" + UrlEncode(ns);
  p += "/" + r.resource;
  if (!name.empty()) {
    p += "/" + UrlEncode(name);
    if (!subresource.empty()) p += "/" + UrlEncode(subresource);
  }
  return p;
}

QueryBuilder& QueryBuilder::Add(std::string_view key, std::string_view value) {
  if (value.empty()) return *this;
  if (!q_.empty()) q_ += '&';
  q_ += UrlEncode(key);
  q_ += '=';
  q_ += UrlEncode(value);
  return *this;
}

}  // namespace lockstep::kube
