// PolicySpec: a FabricPolicy's spec as typed values, with the CRD's defaults.
// The API server applies the same defaults and bounds (crds/); parsing them again
// here keeps the operator safe against objects written under an older schema.
// Pure; thread-compatible.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/common/result.h"

namespace lockstep::op {

using Json = nlohmann::json;

struct ProbeSettings {
  int interval_ms = 20;
  int peers_per_node = 16;
  int miss_threshold = 3;
  int port = 7311;
};

struct ClockSyncSettings {
  bool enabled = true;
  int window_seconds = 2;
  bool discipline_host_clock = false;
  int max_error_bound_ns = 1000;
  int asymmetry_allowance_ns = 100;
};

struct FailoverSettings {
  bool enabled = true;
  int readmit_after_seconds = 2;
  int max_hold_down_seconds = 300;
};

struct AgentSettings {
  std::string image = "ghcr.io/lockstep/lockstep-agent:0.1.0";
  std::string image_pull_policy = "IfNotPresent";
  std::string priority_class_name = "system-node-critical";
  Json resources = {{"requests", {{"cpu", "50m"}, {"memory", "64Mi"}}}, {"limits", {{"memory", "128Mi"}}}};
};

struct PolicySpec {
  Json node_selector = {{"matchLabels", {{"nvidia.com/gpu.present", "true"}}}};  // metav1.LabelSelector
  Json tolerations = Json::array({{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}});
  ProbeSettings probe;
  ClockSyncSettings clock_sync;
  FailoverSettings failover;
  int flap_alert_per_hour = 8;
  bool load_balancing = true;
  AgentSettings agent;
};

// Parses spec (may be null or partial). Errors name the policy and the field:
//   FabricPolicy "default": spec.probe.intervalMs must be between 1 and 60000 (got 0)
Result<PolicySpec> ParsePolicySpec(const std::string& policy_name, const Json& spec);

}  // namespace lockstep::op
