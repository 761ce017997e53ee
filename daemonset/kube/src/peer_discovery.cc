#include "lockstep/agent/kube/peer_discovery.h"

#include <algorithm>
#include <set>

#include "lockstep/agent/peer_selection.h"
#include "lockstep/common/log.h"
#include "lockstep/kube/object_meta.h"

namespace lockstep::agent {
namespace {

std::string Names(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

FabricPeerSet FabricPeersOf(const PeerSet& set) {
  FabricPeerSet out;
  auto add = [&](const std::vector<PeerTarget>& from, std::vector<FabricPeer>& to) {
    for (const PeerTarget& p : from) {
      auto it = set.host_addresses.find(p.name);
      if (it == set.host_addresses.end()) continue;
      auto addr = ParseIpv4(it->second);
      if (addr.ok()) to.push_back({p.name, p.id, *addr});
    }
  };
  add(set.selected, out.probed);
  add(set.known, out.known);
  return out;
}

PeerDiscovery::PeerDiscovery(kube::KubeApi& api, Clock& clock, PeerDiscoveryOptions options, OnChange on_change,
                             metrics::Registry& registry)
    : api_(api),
      clock_(clock),
      options_(std::move(options)),
      on_change_(std::move(on_change)),
      informer_(api, kube::gvr::kFabricHealths,
                kube::InformerOptions{.label_selector = std::string(kPolicyLabel) + "=" + options_.directory.policy,
                                      .watch_timeout_seconds = 1800,
                                      .seed = options_.informer_seed}),
      candidates_(registry.Gauge("lockstep_agent_discovered_peers",
                                 "Peers of this node's policy that can be probed (fresh, with an address)")),
      known_(registry.Gauge("lockstep_agent_known_nodes", "FabricHealths in this node's policy, other than its own")),
      changes_(registry.Counter("lockstep_agent_peer_set_changes_total", "Times the probe peer set changed")) {
  auto mark = [this] { dirty_ = true; };
  informer_.AddEventHandlers({.on_add = [mark](const kube::ObjectPtr&) { mark(); },
                              .on_update = [mark](const kube::ObjectPtr&, const kube::ObjectPtr&) { mark(); },
                              .on_delete = [mark](const kube::ObjectPtr&) { mark(); }});
}

PeerDiscovery::~PeerDiscovery() { Stop(); }

void PeerDiscovery::Start() { informer_.Start(); }

void PeerDiscovery::Stop() { informer_.Stop(); }

bool PeerDiscovery::LookupNode(const std::string& name, MonoTime now) {
  if (node_addresses_.contains(name)) return false;
  if (auto it = node_retry_at_.find(name); it != node_retry_at_.end() && now < it->second) return false;
  auto node = api_.Get(kube::gvr::kNodes, "", name);
  std::optional<std::string> ip = node.ok() ? NodeInternalIp(*node) : std::nullopt;
  if (!ip) {
    node_retry_at_[name] = now + options_.node_retry;
    log::Debug("no InternalIP for node yet", {{"node", name},
                                              {"error", node.ok() ? "no IPv4 InternalIP" : node.error().message}});
    return false;
  }
  node_retry_at_.erase(name);
  node_addresses_[name] = *ip;
  return true;
}

std::optional<std::string> PeerDiscovery::SelfNodeAddress() {
  const std::string& self = options_.directory.self;
  LookupNode(self, clock_.Monotonic());
  auto it = node_addresses_.find(self);
  return it == node_addresses_.end() ? std::nullopt : std::optional<std::string>(it->second);
}

void PeerDiscovery::Tick() {
  if (!informer_.HasSynced()) return;
  const MonoTime now = clock_.Monotonic();
  const bool lookups_due = next_lookup_ && now >= *next_lookup_;
  if (!dirty_.exchange(false) && !lookups_due) return;
  std::vector<kube::Json> objects;
  for (const kube::ObjectPtr& o : informer_.store().List()) objects.push_back(*o);
  PeerDirectory dir = BuildPeerDirectory(objects, node_addresses_, options_.directory);
  next_lookup_.reset();
  if (!dir.need_node_address.empty()) {
    bool added = false;
    size_t n = 0;
    for (const std::string& name : dir.need_node_address) {
      if (n++ >= options_.max_node_lookups_per_tick) break;
      added |= LookupNode(name, now);
    }
    if (added) dir = BuildPeerDirectory(objects, node_addresses_, options_.directory);
    if (!dir.need_node_address.empty()) next_lookup_ = now + std::chrono::seconds(1);
  }
  candidates_.Set(static_cast<double>(dir.candidates.size()));
  known_.Set(static_cast<double>(dir.known.size()));

  std::vector<std::string> names;
  for (const PeerTarget& p : dir.candidates) names.push_back(p.name);
  std::vector<std::string> chosen =
      SelectPeerNames(names, options_.directory.self, options_.peers_per_node, options_.seed);
  PeerSet set;
  set.known = std::move(dir.known);
  set.host_addresses = std::move(dir.host_addresses);
  for (const PeerTarget& p : dir.candidates) {
    if (std::binary_search(chosen.begin(), chosen.end(), p.name)) set.selected.push_back(p);
  }
  if (applied_ && *applied_ == set) return;
  std::set<std::string> before, after;
  if (applied_) {
    for (const PeerTarget& p : applied_->selected) before.insert(p.name + "@" + p.endpoint.ToString());
  }
  for (const PeerTarget& p : set.selected) after.insert(p.name + "@" + p.endpoint.ToString());
  std::vector<std::string> added, removed;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(), std::back_inserter(added));
  std::set_difference(before.begin(), before.end(), after.begin(), after.end(), std::back_inserter(removed));
  if (!added.empty() || !removed.empty()) {
    changes_.Inc();
    log::Info("probe peers changed", {{"peers", std::to_string(set.selected.size())},
                                      {"added", Names(added)},
                                      {"removed", Names(removed)},
                                      {"known", std::to_string(set.known.size())}});
  }
  on_change_(set);
  applied_ = std::move(set);
}

}  // namespace lockstep::agent
