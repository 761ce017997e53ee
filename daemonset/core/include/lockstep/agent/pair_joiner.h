// PairJoiner: assembles complete coded probe pairs (both TX stamps on the
// sender's clock, both RX stamps on the receiver's clock) for the edges of
// this node, in both directions, from what arrives piecemeal:
//
//   self -> peer: our kernel TX stamps (OnLocalTx) + the peer's RX stamps that
//                 come back in its reports (OnReport)
//   peer -> self: our RX stamps (OnProbe) + the peer's TX stamps, which it
//                 carries in its next pair to us (ProbeBody::prev_*)
//
// It also tells the engine what to put on the wire: the TX stamps to carry in
// our next pair to a peer (TakePrevTx) and the RX records to report back
// (TakeRxRecords). State per peer is bounded (oldest pairs are forgotten).
// Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lockstep/agent/probe_packet.h"

namespace lockstep::agent {

// One complete coded pair on a directed edge.
struct CodedPair {
  NodeId src = 0;
  NodeId dst = 0;
  uint64_t pair_seq = 0;
  int64_t tx0_ns = 0, rx0_ns = 0;  // first packet: src clock at send, dst clock at receive
  int64_t tx1_ns = 0, rx1_ns = 0;
  bool operator==(const CodedPair&) const = default;
};

struct PrevTx {
  uint64_t pair_seq = 0;
  std::array<int64_t, 2> tx_ns{0, 0};
};

class PairJoiner {
 public:
  explicit PairJoiner(NodeId self, size_t max_pairs_per_peer = 512) : self_(self), max_(max_pairs_per_peer) {}

  // Our kernel TX stamp for packet `index` of our pair `pair_seq` to `peer`.
  void OnLocalTx(NodeId peer, uint64_t pair_seq, int index, int64_t tx_ns);
  // An authenticated probe from `peer`, received at rx_ns (our clock).
  void OnProbe(NodeId peer, const ProbeBody& probe, int64_t rx_ns);
  // An authenticated report from `peer` (its RX stamps of our pairs).
  void OnReport(NodeId peer, const ReportBody& report);

  // The newest of our pairs to `peer` whose two TX stamps are known and not
  // yet carried, marking it carried.
  std::optional<PrevTx> TakePrevTx(NodeId peer);
  // Up to `max` RX records owed to `peer` (oldest first), removing them.
  std::vector<RxRecord> TakeRxRecords(NodeId peer, size_t max);
  size_t PendingRxRecords(NodeId peer) const;
  // Complete pairs assembled since the last call.
  std::vector<CodedPair> TakeReady();

  // Drops all state about a peer that went away.
  void Forget(NodeId peer);
  // Forgets every peer not in `keep` (nodes discovery no longer knows).
  void RetainOnly(const std::unordered_set<NodeId>& keep);
  size_t tracked_peers() const { return peers_.size(); }

 private:
  struct Half {
    int64_t ns[2] = {0, 0};
    bool have[2] = {false, false};
    bool both() const { return have[0] && have[1]; }
  };
  struct Outgoing {  // our pairs to the peer: our TX stamps
    Half tx;
    bool carried = false;
    bool joined = false;
  };
  struct Incoming {  // the peer's pairs to us: our RX stamps, its TX stamps
    Half rx;
    std::optional<std::array<int64_t, 2>> tx;
    bool reported = false;
    bool joined = false;
  };
  struct PeerState {
    std::map<uint64_t, Outgoing> out;
    std::map<uint64_t, Incoming> in;
    std::vector<RxRecord> owed;
  };
  template <typename Map>
  void Trim(Map& m) {
    while (m.size() > max_) m.erase(m.begin());
  }
  void MaybeJoinIncoming(NodeId peer, uint64_t seq, Incoming& in);

  NodeId self_;
  size_t max_;
  std::unordered_map<NodeId, PeerState> peers_;
  std::vector<CodedPair> ready_;
};

}  // namespace lockstep::agent
