#include "lockstep/agent/runtime/fabric_topology_file.h"

#include <algorithm>

namespace lockstep::agent {
namespace {

bool ValidName(const nlohmann::json& v, bool slash = false) {
  if (!v.is_string()) return false;
  const std::string& s = v.get_ref<const std::string&>();
  return !s.empty() && s.size() <= 63 && std::all_of(s.begin(), s.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-' || (slash && c == '/');
  });
}

// A spine or route entry's path: from, to, rail (0-63) and path (>= 0).
Result<std::pair<std::string, fabric::PathKey>> EntryPath(const nlohmann::json& s, const std::string& at) {
  if (!s.is_object() || !ValidName(s.value("from", nlohmann::json())) || !ValidName(s.value("to", nlohmann::json()))) {
    return InvalidArgument(at + " needs from and to node names");
  }
  const nlohmann::json rail = s.value("rail", nlohmann::json(0)), path = s.value("path", nlohmann::json(0));
  if (!rail.is_number_integer() || rail.get<int>() < 0 || rail.get<int>() > 63 || !path.is_number_integer() ||
      path.get<int>() < 0) {
    return InvalidArgument(at + ": rail must be 0 to 63 and path 0 or more");
  }
  return std::pair{s["from"].get<std::string>(),
                   fabric::PathKey{rail.get<int>(), s["to"].get<std::string>(), path.get<int>()}};
}

}  // namespace

Result<fabric::FabricMap> ParseFabricTopology(const nlohmann::json& j, const std::string& source) {
  const auto bad = [&](const std::string& what) -> Result<fabric::FabricMap> {
    return InvalidArgument(source + ": " + what);
  };
  if (!j.is_object()) return bad("must be a JSON object with \"leaves\"");
  for (const auto& [key, _] : j.items()) {
    if (key != "leaves" && key != "spines" && key != "routes") {
      return bad("unknown field \"" + key + "\" (leaves, spines, routes)");
    }
  }
  if (!j.contains("leaves") || !j["leaves"].is_object()) {
    return bad("leaves must be an object: node name -> [leaf of rail 0, leaf of rail 1, ...]");
  }
  fabric::FabricMap map;
  for (const auto& [node, rails] : j["leaves"].items()) {
    if (!ValidName(nlohmann::json(node))) return bad("leaves: \"" + node + "\" is not a node name");
    if (!rails.is_array() || rails.empty() || rails.size() > 64) {
      return bad("leaves." + node + " must be a list of 1 to 64 leaf names, one per rail");
    }
    for (size_t r = 0; r < rails.size(); ++r) {
      if (!ValidName(rails[r])) return bad("leaves." + node + "[" + std::to_string(r) + "] is not a leaf name");
      map.SetLeaf(node, static_cast<int>(r), rails[r].get<std::string>());
    }
  }
  if (j.contains("spines")) {
    const nlohmann::json& spines = j["spines"];
    if (!spines.is_array()) return bad("spines must be a list of {from, to, rail, path, spine}");
    for (size_t i = 0; i < spines.size(); ++i) {
      const nlohmann::json& s = spines[i];
      const std::string at = "spines[" + std::to_string(i) + "]";
      auto p = EntryPath(s, at);
      if (!p.ok()) return bad(p.error().message);
      if (!ValidName(s.value("spine", nlohmann::json()))) return bad(at + " needs a spine name");
      map.SetSpine(p->first, p->second, s["spine"].get<std::string>());
    }
  }
  if (j.contains("routes")) {
    const nlohmann::json& routes = j["routes"];
    if (!routes.is_array()) return bad("routes must be a list of {from, to, rail, path, nodes}");
    for (size_t i = 0; i < routes.size(); ++i) {
      const nlohmann::json& s = routes[i];
      const std::string at = "routes[" + std::to_string(i) + "]";
      auto p = EntryPath(s, at);
      if (!p.ok()) return bad(p.error().message);
      const nlohmann::json nodes = s.value("nodes", nlohmann::json());
      if (!nodes.is_array() || nodes.size() < 2 || nodes.size() > 16 ||
          !std::all_of(nodes.begin(), nodes.end(), [](const nlohmann::json& n) { return ValidName(n, true); })) {
        return bad(at + ".nodes must list 2 to 16 node names, its ends included");
      }
      std::vector<fabric::Link> links;
      for (size_t k = 0; k + 1 < nodes.size(); ++k) {
        links.push_back({nodes[k].get<std::string>(), nodes[k + 1].get<std::string>()});
      }
      map.SetRoute(p->first, p->second, std::move(links));
    }
  }
  return map;
}

Result<fabric::FabricMap> ParseFabricTopologyText(const std::string& text, const std::string& source) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(source + ": not valid JSON");
  return ParseFabricTopology(j, source);
}

}  // namespace lockstep::agent
