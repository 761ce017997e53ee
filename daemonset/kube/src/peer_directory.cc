#include "lockstep/agent/kube/peer_directory.h"

#include <algorithm>
#include <cstddef>

#include "lockstep/agent/config.h"
#include "lockstep/agent/route.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/kube/time_format.h"

namespace lockstep::agent {
namespace {

using kube::Json;

std::optional<WallTime> ReportTime(const Json& health) {
  std::string t = kube::GetString(health, {"status", "lastReportTime"});
  if (t.empty()) return std::nullopt;
  auto parsed = kube::ParseRfc3339(t);
  if (!parsed.ok()) return std::nullopt;
  return *parsed;
}

std::optional<Endpoint> FirstProbeAddress(const Json& health) {
  const Json* list = kube::FindPath(health, {"status", "probeAddresses"});
  if (!list || !list->is_array()) return std::nullopt;
  for (const Json& a : *list) {
    if (!a.is_string()) continue;
    if (auto ep = ParseProbeAddress(a.get<std::string>()); ep.ok()) return *ep;
  }
  return std::nullopt;
}

}  // namespace

Result<Endpoint> ParseProbeAddress(const std::string& text) {
  auto hp = ParseHostPort(text, "probe address");
  if (!hp.ok()) return hp.error();
  if (hp->port == 0) return InvalidArgument("probe address \"" + text + "\" has port 0");
  return Endpoint::Parse(hp->host, hp->port);
}

std::optional<std::string> NodeInternalIp(const Json& node) {
  const Json* addrs = kube::FindPath(node, {"status", "addresses"});
  if (!addrs || !addrs->is_array()) return std::nullopt;
  for (const Json& a : *addrs) {
    if (!a.is_object() || a.value("type", "") != "InternalIP" || !a.contains("address") || !a["address"].is_string()) {
      continue;
    }
    std::string ip = a["address"].get<std::string>();
    if (Endpoint::Parse(ip, 1).ok()) return ip;  // IPv4 only for now
  }
  return std::nullopt;
}

PeerDirectory BuildPeerDirectory(const std::vector<Json>& healths,
                                 const std::map<std::string, std::string>& node_addresses,
                                 const DirectoryOptions& o) {
  std::vector<const Json*> mine;
  std::vector<WallTime> reports;
  for (const Json& h : healths) {
    if (kube::GetString(h, {"metadata", "labels", kPolicyLabel}) != o.policy || kube::Name(h).empty()) continue;
    mine.push_back(&h);
    if (auto t = ReportTime(h)) reports.push_back(*t);
  }
  // The reference "now" of the policy: the (upper) median report time.
  std::optional<WallTime> reference;
  if (!reports.empty()) {
    auto mid = reports.begin() + static_cast<std::ptrdiff_t>(reports.size() / 2);
    std::nth_element(reports.begin(), mid, reports.end());
    reference = *mid;
  }
  PeerDirectory d;
  for (const Json* h : mine) {
    const std::string name = kube::Name(*h);
    if (name == o.self) continue;
    std::optional<Endpoint> ep = FirstProbeAddress(*h);
    d.known.push_back({name, NodeIdFromName(name), ep.value_or(Endpoint{}),
                       kube::GetString(*h, {"status", "nodePublicKey"})});
    const std::string host = kube::GetString(*h, {"status", "hostAddress"});
    if (!host.empty() && ParseIpv4(host).ok()) d.host_addresses[name] = host;
    if (kube::FindPath(*h, {"metadata", "deletionTimestamp"})) continue;
    auto reported = ReportTime(*h);
    if (reported && reference && *reference - *reported > o.stale_after) continue;  // its agent is gone
    if (!ep && o.node_address_fallback) {
      auto it = node_addresses.find(name);
      if (it == node_addresses.end()) {
        d.need_node_address.push_back(name);
        continue;
      }
      auto node_ep = Endpoint::Parse(it->second, o.probe_port);
      if (node_ep.ok() && o.probe_port > 0) ep = *node_ep;
    }
    if (ep) d.candidates.push_back({name, NodeIdFromName(name), *ep, d.known.back().public_key});
  }
  // Known nodes are probed back at their published endpoint only; a node
  // found through its Node address is known at that address.
  for (PeerTarget& k : d.known) {
    if (k.endpoint.port != 0) continue;
    for (const PeerTarget& c : d.candidates) {
      if (c.name == k.name) k.endpoint = c.endpoint;
    }
  }
  auto by_name = [](const PeerTarget& a, const PeerTarget& b) { return a.name < b.name; };
  std::sort(d.candidates.begin(), d.candidates.end(), by_name);
  std::sort(d.known.begin(), d.known.end(), by_name);
  std::sort(d.need_node_address.begin(), d.need_node_address.end());
  return d;
}

}  // namespace lockstep::agent
