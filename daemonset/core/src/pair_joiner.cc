#include "lockstep/agent/pair_joiner.h"

#include <algorithm>

namespace lockstep::agent {

void PairJoiner::OnLocalTx(NodeId peer, uint64_t pair_seq, int index, int64_t tx_ns) {
  if (index < 0 || index > 1) return;
  PeerState& p = peers_[peer];
  Outgoing& o = p.out[pair_seq];
  o.tx.ns[index] = tx_ns;
  o.tx.have[index] = true;
  Trim(p.out);
}

void PairJoiner::OnProbe(NodeId peer, const ProbeBody& probe, int64_t rx_ns) {
  PeerState& p = peers_[peer];
  // Stamps of an older pair, carried in this one.
  if (probe.prev_valid && probe.prev_pair_seq != probe.pair_seq) {
    auto it = p.in.find(probe.prev_pair_seq);
    if (it != p.in.end() && !it->second.tx) {
      it->second.tx = probe.prev_tx_ns;
      MaybeJoinIncoming(peer, it->first, it->second);
    }
  }
  if (!p.in.empty() && probe.pair_seq < p.in.begin()->first && p.in.size() >= max_) return;  // too old
  Incoming& in = p.in[probe.pair_seq];
  if (in.rx.have[probe.index]) return;  // a duplicate (replay protection makes this rare)
  in.rx.ns[probe.index] = rx_ns;
  in.rx.have[probe.index] = true;
  if (in.rx.both() && !in.reported) {
    in.reported = true;
    p.owed.push_back({probe.pair_seq, {in.rx.ns[0], in.rx.ns[1]}});
    if (p.owed.size() > max_) p.owed.erase(p.owed.begin());
  }
  MaybeJoinIncoming(peer, probe.pair_seq, in);
  Trim(p.in);
}

void PairJoiner::MaybeJoinIncoming(NodeId peer, uint64_t seq, Incoming& in) {
  if (in.joined || !in.tx || !in.rx.both()) return;
  in.joined = true;
  ready_.push_back({peer, self_, seq, (*in.tx)[0], in.rx.ns[0], (*in.tx)[1], in.rx.ns[1]});
}

void PairJoiner::OnReport(NodeId peer, const ReportBody& report) {
  auto pit = peers_.find(peer);
  if (pit == peers_.end()) return;
  for (const RxRecord& r : report.rx) {
    if (r.rx_ns[0] == 0 || r.rx_ns[1] == 0) continue;
    auto it = pit->second.out.find(r.pair_seq);
    if (it == pit->second.out.end() || !it->second.tx.both() || it->second.joined) continue;
    it->second.joined = true;
    const Half& tx = it->second.tx;
    ready_.push_back({self_, peer, r.pair_seq, tx.ns[0], r.rx_ns[0], tx.ns[1], r.rx_ns[1]});
  }
}

std::optional<PrevTx> PairJoiner::TakePrevTx(NodeId peer) {
  auto pit = peers_.find(peer);
  if (pit == peers_.end()) return std::nullopt;
  auto& out = pit->second.out;
  for (auto it = out.rbegin(); it != out.rend(); ++it) {
    if (it->second.carried) break;  // everything older was carried or superseded
    if (it->second.tx.both()) {
      it->second.carried = true;
      return PrevTx{it->first, {it->second.tx.ns[0], it->second.tx.ns[1]}};
    }
  }
  return std::nullopt;
}

std::vector<RxRecord> PairJoiner::TakeRxRecords(NodeId peer, size_t max) {
  auto pit = peers_.find(peer);
  if (pit == peers_.end()) return {};
  auto& owed = pit->second.owed;
  size_t n = std::min(max, owed.size());
  std::vector<RxRecord> out(owed.begin(), owed.begin() + static_cast<ptrdiff_t>(n));
  owed.erase(owed.begin(), owed.begin() + static_cast<ptrdiff_t>(n));
  return out;
}

size_t PairJoiner::PendingRxRecords(NodeId peer) const {
  auto pit = peers_.find(peer);
  return pit == peers_.end() ? 0 : pit->second.owed.size();
}

std::vector<CodedPair> PairJoiner::TakeReady() {
  std::vector<CodedPair> out;
  out.swap(ready_);
  return out;
}

void PairJoiner::Forget(NodeId peer) { peers_.erase(peer); }

void PairJoiner::RetainOnly(const std::unordered_set<NodeId>& keep) {
  for (auto it = peers_.begin(); it != peers_.end();) it = keep.contains(it->first) ? std::next(it) : peers_.erase(it);
}

}  // namespace lockstep::agent
