#include "lockstep/operator/apply_outcome.h"

#include <utility>
#include <vector>

namespace lockstep::op {
namespace {

bool EmptyValue(const Json& v) {
  return v.is_null() || (v.is_string() && v.get_ref<const std::string&>().empty()) ||
         ((v.is_array() || v.is_object()) && v.empty());
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

bool LiveCovers(const Json& live, const Json& desired) {
  if (desired.is_object()) {
    if (!live.is_object()) return EmptyValue(desired) && live.is_null();
    for (auto it = desired.begin(); it != desired.end(); ++it) {
      auto l = live.find(it.key());
      if (l == live.end()) {
        if (!EmptyValue(it.value())) return false;
      } else if (!LiveCovers(*l, it.value())) {
        return false;
      }
    }
    return true;
  }
  if (desired.is_array()) {
    if (!live.is_array()) return desired.empty() && live.is_null();
    if (live.size() < desired.size()) return false;
    for (size_t i = 0; i < desired.size(); ++i) {
      if (!LiveCovers(live[i], desired[i])) return false;
    }
    return true;
  }
  if (live.is_null()) return EmptyValue(desired);
  if (desired.is_number() && live.is_number()) return desired == live;  // 1 == 1.0
  return desired == live;
}

std::string InvalidFieldPath(const std::string& message) {
  const std::string marker = "is invalid: ";
  size_t at = message.find(marker);
  if (at == std::string::npos) return "";
  size_t start = at + marker.size();
  if (start < message.size() && message[start] == '[') ++start;
  size_t end = message.find(": ", start);
  if (end == std::string::npos) return "";
  std::string path = message.substr(start, end - start);
  if (path.empty() || path.find(' ') != std::string::npos) return "";
  return path;
}

std::string PolicyFieldForAgentPath(const std::string& kind, const std::string& path) {
  static const std::vector<std::pair<std::string, std::string>> kDaemonSet = {
      {"spec.template.spec.containers[0].image", "spec.agent.image"},
      {"spec.template.spec.containers[0].imagePullPolicy", "spec.agent.imagePullPolicy"},
      {"spec.template.spec.containers[0].resources", "spec.agent.resources"},
      {"spec.template.spec.containers[0].ports[1]", "spec.probe.port"},
      {"spec.template.spec.initContainers[0].image", "spec.agent.image"},
      {"spec.template.spec.initContainers[0].imagePullPolicy", "spec.agent.imagePullPolicy"},
      {"spec.template.spec.initContainers[0].resources", "spec.agent.resources"},
      {"spec.template.spec.priorityClassName", "spec.agent.priorityClassName"},
      {"spec.template.spec.tolerations", "spec.tolerations"},
      {"spec.template.spec.affinity", "spec.nodeSelector"},
      {"spec.template.metadata.labels", "metadata.name"},
      {"spec.selector", "metadata.name"},
      {"metadata.name", "metadata.name"},
      {"metadata.labels", "metadata.name"},
  };
  static const std::vector<std::pair<std::string, std::string>> kConfigMap = {
      {"metadata.name", "metadata.name"},
      {"metadata.labels", "metadata.name"},
  };
  for (const auto& [prefix, field] : kind == "DaemonSet" ? kDaemonSet : kConfigMap) {
    if (path == prefix || StartsWith(path, prefix + ".") || StartsWith(path, prefix + "[")) return field;
  }
  return "";
}

std::string DescribeRejectedApply(const std::string& kind, const std::string& name, const std::string& message) {
  const std::string path = InvalidFieldPath(message);
  const std::string field = PolicyFieldForAgentPath(kind, path);
  std::string out = field.empty() ? std::string("spec") : field;
  out += ": the API server rejected the agent " + kind + " " + name;
  if (!path.empty()) out += " (field " + path + ")";
  out += ": " + message + "; fix " + (field.empty() ? std::string("the policy") : field) +
         " (the operator retries only when the policy changes or after a long pause)";
  return out;
}

}  // namespace lockstep::op
