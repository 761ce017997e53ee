#include "lockstep/operator/trainingjob_triggers.h"

#include <algorithm>

#include "lockstep/api/fabric_health.h"
#include "lockstep/kube/conditions.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/operator/trainingjob_objects.h"

namespace lockstep::op {
namespace {

bool Cordoned(const Json& node) {
  const Json* u = kube::FindPath(node, {"spec", "unschedulable"});
  return u && u->is_boolean() && u->get<bool>();
}

// The integer at d[key], if it is one.
std::optional<int64_t> IntField(const Json& d, const char* key) {
  auto it = d.find(key);
  if (it == d.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

std::string Describe(const std::vector<MigrationTrigger>& ts) {
  std::string out;
  for (const MigrationTrigger& t : ts) {
    out += (out.empty() ? "" : "; ") + std::string("rank ") + std::to_string(t.rank) + " (pod " + t.pod + ", " +
           t.trigger + ": " + t.reason + ")";
  }
  return out;
}

}  // namespace

std::string NodeNotReadyReason(const Json& node) {
  const Json* status = kube::FindPath(node, {"status"});
  const Json* c = status ? kube::FindCondition(*status, "Ready") : nullptr;
  if (!c) return "";
  const std::string st = c->value("status", "");
  if (st == "True") return "";
  std::string reason = "node " + kube::Name(node) + " NotReady";
  const std::string why = c->value("reason", "");
  reason += " (" + (why.empty() ? "Ready " + st : why) + ")";
  return reason;
}

std::string EarlyWarningReason(const Json& health, const api::EarlyWarningSpec& ew) {
  const std::string node = kube::Name(health);
  const Json* devices = kube::FindPath(health, {"status", "gpu", "devices"});
  bool readings = false;
  if (devices && devices->is_array()) {
    for (const Json& d : *devices) {
      if (!d.is_object()) continue;
      const std::string gpu = "GPU " + std::to_string(IntField(d, "index").value_or(0));
      const auto temp = IntField(d, "temperatureCelsius");
      const auto ecc = IntField(d, "eccSingleBitPerHour");
      const auto xids = d.find("xids");
      readings = readings || temp || ecc || (xids != d.end() && xids->is_array());
      if (temp && *temp >= ew.gpu_temp_celsius) {
        return gpu + " at " + std::to_string(*temp) + " C >= " + std::to_string(ew.gpu_temp_celsius) + " C on node " +
               node;
      }
      if (ecc && *ecc >= ew.ecc_single_bit_per_hour) {
        return gpu + " at " + std::to_string(*ecc) +
               " corrected ECC errors/hour >= " + std::to_string(ew.ecc_single_bit_per_hour) + " on node " + node;
      }
      if (xids != d.end() && xids->is_array()) {
        for (const Json& x : *xids) {
          if (x.is_number_integer() && std::count(ew.xids.begin(), ew.xids.end(), x.get<int>()) > 0) {
            return gpu + " reported Xid " + std::to_string(x.get<int>()) + " on node " + node;
          }
        }
      }
    }
  }
  if (readings) return "";  // the job's thresholds decide where the readings are there
  const Json* status = kube::FindPath(health, {"status"});
  const Json* c = status ? kube::FindCondition(*status, api::kGpuConditionType) : nullptr;
  if (!c || c->value("status", "") != "False") return "";
  std::string reason = "node " + node + " " + api::kGpuConditionType + " False";
  if (!c->value("reason", "").empty()) reason += " (" + c->value("reason", "") + ")";
  if (!c->value("message", "").empty()) reason += ": " + c->value("message", "");
  return reason;
}

MigrationTriggerPlan PlanMigrationTriggers(const MigrationTriggerInput& in) {
  const api::TrainingJobSpec& spec = *in.spec;
  MigrationTriggerPlan plan;
  int available_spares = 0, in_flight = 0;
  std::vector<MigrationTrigger> wanted;
  // A spare on a node that is cordoned or whose GPUs warn would only have to
  // move again: it is no spare to move to.
  auto not_ready = [&](const std::string& node) {
    auto n = in.nodes.find(node);
    return n != in.nodes.end() && n->second ? NodeNotReadyReason(*n->second) : std::string();
  };
  // A spare on a node that is cordoned, NotReady or whose GPUs warn would
  // only have to move again: it is no spare to move to.
  auto usable_node = [&](const std::string& node) {
    auto n = in.nodes.find(node);
    if (n != in.nodes.end() && n->second && (Cordoned(*n->second) || !NodeNotReadyReason(*n->second).empty())) {
      return false;
    }
    auto h = in.healths.find(node);
    return h == in.healths.end() || !h->second || EarlyWarningReason(*h->second, spec.early_warning).empty();
  };
  auto annotation = [](const Json& p) {
    const Json* a = kube::FindPath(p, {"metadata", "annotations", kMigrateAnnotation});
    return a && a->is_string() ? a->get<std::string>() : std::string(a ? "?" : "");
  };
  for (const Json* p : in.pods) {
    const std::string role = PodRole(*p);
    if (role != kRoleSpare && role != kRoleRank) continue;
    if (IsDeleting(*p)) continue;
    const std::string phase = PodPhase(*p);
    if (phase == "Succeeded" || phase == "Failed") continue;
    const std::string node = kube::GetString(*p, {"spec", "nodeName"});
    const int rank = role == kRoleRank ? PodRank(*p) : -1;
    if (role == kRoleRank && (rank < 0 || rank >= spec.replicas)) continue;
    const std::string value = annotation(*p);
    // Unplanned: the node stopped answering. Rank and spare pods alike, over
    // any other value, never held back.
    if (const std::string why = node.empty() ? "" : not_ready(node); !why.empty()) {
      if (value != kTriggerNodeNotReady) {
        plan.annotate.push_back({kube::Name(*p), rank, kTriggerNodeNotReady, why, kube::ResourceVersion(*p)});
      }
      continue;
    }
    if (role == kRoleSpare) {
      if (phase == "Running" && usable_node(node)) ++available_spares;
      continue;
    }
    if (!value.empty()) {
      if (value != kTriggerNodeNotReady) ++in_flight;
      continue;
    }
    if (node.empty()) continue;
    MigrationTrigger t{kube::Name(*p), rank, "", "", kube::ResourceVersion(*p)};
    auto n = in.nodes.find(node);
    if (spec.migration.on_drain && n != in.nodes.end() && n->second && Cordoned(*n->second)) {
      t.trigger = kTriggerDrain;
      t.reason = "node " + node + " cordoned";
    } else if (auto h = in.healths.find(node); spec.migration.on_early_warning && h != in.healths.end() && h->second) {
      t.reason = EarlyWarningReason(*h->second, spec.early_warning);
      if (!t.reason.empty()) t.trigger = kTriggerEarlyWarning;
    }
    if (!t.trigger.empty()) wanted.push_back(std::move(t));
  }
  std::sort(wanted.begin(), wanted.end(),
            [](const MigrationTrigger& a, const MigrationTrigger& b) { return a.rank < b.rank; });
  const int by_spares = std::max(0, available_spares - in_flight);
  const int by_concurrency = std::max(0, spec.migration.max_concurrent - in_flight);
  const size_t budget = static_cast<size_t>(std::min(by_spares, by_concurrency));
  std::sort(plan.annotate.begin(), plan.annotate.end(),
            [](const MigrationTrigger& a, const MigrationTrigger& b) { return a.rank < b.rank; });
  for (size_t i = 0; i < wanted.size(); ++i) { (i < budget ? plan.annotate : plan.held).push_back(wanted[i]); }
  if (plan.held.empty()) return plan;
  const std::string what = Describe(plan.held);
  if (by_spares <= by_concurrency) {
    plan.blocked_reason = "NoSpare";
    std::string why = spec.spares == 0 ? "spec.spares is 0"
                                       : std::to_string(available_spares) + " of " + std::to_string(spec.spares) +
                                             " spares running on a usable node, " + std::to_string(in_flight) +
                                             " migrations in flight";
    plan.blocked_message = "no spare to move to (" + why + "), held: " + what +
                           "; each moves once a spare runs, and a drain of its node waits until then "
                           "(the job's PodDisruptionBudget)";
  } else {
    plan.blocked_reason = "MaxConcurrent";
    plan.blocked_message = std::to_string(in_flight) + " migrations in flight (spec.migration.maxConcurrent " +
                           std::to_string(spec.migration.max_concurrent) + "): " + what + " moves after them";
  }
  return plan;
}

Json MigrationAnnotationPatch(const MigrationTrigger& t) {
  return {{"metadata",
           {{"resourceVersion", t.resource_version},
            {"annotations", {{kMigrateAnnotation, t.trigger}, {kMigrateReasonAnnotation, t.reason}}}}}};
}

}  // namespace lockstep::op
