// PeerDiscovery: keeps the clock-sync peer set in step with the FabricHealth
// objects of our policy. An Informer watches FabricHealths labelled
// lockstep.dev/policy=<policy>; Tick() rebuilds the PeerDirectory when the
// informer saw a change, picks peers_per_node of the candidates by rendezvous
// hashing (SelectPeerNames: a node joining or leaving changes at most one
// choice) and calls on_change when the chosen set or the known set differs
// from the last one handed over. Node InternalIPs for the fallback are looked
// up on demand (GET node) and cached; failed lookups are retried after
// node_retry.
//
// Thread-safety: Start()/Stop() (or ListOnce()) from the owner; Tick() and
// SelfNodeAddress() from one thread (the agent's kube thread); Synced() from
// any thread.
//
//   PeerDiscovery d(api, clock, {.directory = {.self = "n1", .policy = "default"}},
//                   [&](const PeerSet& s) { service.SetPeers(s.selected, s.known); }, registry);
//   d.Start();
//   every 250 ms: d.Tick();
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/agent/fabric_setup.h"
#include "lockstep/agent/kube/peer_directory.h"
#include "lockstep/common/clock.h"
#include "lockstep/common/metrics.h"
#include "lockstep/kube/informer.h"

namespace lockstep::agent {

struct PeerDiscoveryOptions {
  DirectoryOptions directory;
  int peers_per_node = 16;
  uint64_t seed = 1;
  Nanos node_retry = std::chrono::seconds(60);
  size_t max_node_lookups_per_tick = 32;
  uint64_t informer_seed = 1;  // jitter of the informer's backoff
};

struct PeerSet {
  std::vector<PeerTarget> selected;  // by name
  std::vector<PeerTarget> known;     // by name
  std::map<std::string, std::string> host_addresses;  // fabric host addresses (PeerDirectory)
  bool operator==(const PeerSet&) const = default;
};

// Fabric failover's peers in a peer set: it probes the same peers clock
// sync selected (rendezvous, peers_per_node), those that publish a host
// address, and answers every known node with one (a node another agent
// selected may not have selected it back).
struct FabricPeerSet {
  std::vector<FabricPeer> probed;  // by name
  std::vector<FabricPeer> known;   // by name
  bool operator==(const FabricPeerSet&) const = default;
};
FabricPeerSet FabricPeersOf(const PeerSet& set);

class PeerDiscovery {
 public:
  using OnChange = std::function<void(const PeerSet&)>;

  // REQUIRES: api, clock and registry outlive the discovery.
  PeerDiscovery(kube::KubeApi& api, Clock& clock, PeerDiscoveryOptions options, OnChange on_change,
                metrics::Registry& registry);
  ~PeerDiscovery();  // Stop()s
  PeerDiscovery(const PeerDiscovery&) = delete;
  PeerDiscovery& operator=(const PeerDiscovery&) = delete;

  void Start();
  void Stop();
  bool Synced() const { return informer_.HasSynced(); }
  // Lists our policy's FabricHealths once on the calling thread, in place of
  // Start()'s list/watch thread; the next Tick() sees the result. For tests
  // that drive discovery step by step. REQUIRES: not started.
  Status ListOnce() { return informer_.ListOnce(); }

  void Tick();
  // This node's InternalIP (a GET of our Node, cached; retried after node_retry).
  std::optional<std::string> SelfNodeAddress();
  // The last set handed to on_change.
  const std::optional<PeerSet>& applied() const { return applied_; }

 private:
  // Looks `name` up unless cached or waiting for a retry; true if an address was added.
  bool LookupNode(const std::string& name, MonoTime now);

  kube::KubeApi& api_;
  Clock& clock_;
  const PeerDiscoveryOptions options_;
  OnChange on_change_;
  kube::Informer informer_;
  std::atomic<bool> dirty_{true};
  std::map<std::string, std::string> node_addresses_;
  std::map<std::string, MonoTime> node_retry_at_;
  std::optional<MonoTime> next_lookup_;  // pending fallback lookups
  std::optional<PeerSet> applied_;
  metrics::Family& candidates_;
  metrics::Family& known_;
  metrics::Family& changes_;
};

}  // namespace lockstep::agent
