// AckBook: the fabric prober's ack bookkeeping, both directions. Pure:
// values in, decisions out (no sockets, no threads, no clock: every time is
// an argument). FabricService owns one and does the IO around it.
//
//   Received side: per peer path (the peer's 32-bit wire id, its rail and
//   path index; WirePath) an AckWindow of what to acknowledge, the
//   interface its probes arrive on and whether a probe of ours can carry
//   its ack (one leaving by that interface on the peer's same path index).
//   Per known peer: the latest boot epoch seen (freshness: fabric_probe.h,
//   "Replays") and the urgent reply budget.
//   Sent side: our watched paths as the peers' acks name them (OurPath).
//
// OnPacket judges an authenticated packet addressed to us: stale, replayed,
// a peer restart (only a changed epoch starts the peer's ack windows again),
// an urgent reply granted or limited. Carry picks the ack a probe of ours
// takes along (it retraces the links of the probes it acknowledges); TakeAckOnly
// lists the acks that must leave alone.
//
// Entries are a sorted vector (a peer's paths adjacent): the prober wakes
// with cold caches, and a map's nodes cost a miss each.
//
// Thread-compatible.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "lockstep/agent/fabric_probe.h"
#include "lockstep/common/clock.h"
#include "lockstep/fabric/ack_window.h"
#include "lockstep/fabric/path_monitor.h"

namespace lockstep::agent {

// A path as the wire names it: a node's 32-bit wire id, a rail and a path
// index of that node (a peer's path, or ours as a peer's ack names it).
struct WirePath {
  uint32_t node = 0;  // WireNodeId
  int rail = 0;
  int index = 0;
  auto operator<=>(const WirePath&) const = default;
};

struct AckBookOptions {
  Nanos stats_window{};             // a peer path silent this long is forgotten; a peer's older epoch let in
  Nanos probe_interval{};           // the urgent reply budget refills per interval
  int miss_threshold = 3;           // (the budget: twice what a peer's paths can ask for)
  std::vector<int> rail_ifindex{};  // our rails' interfaces, by rail
  // The longest idle tick gap, idle_tick x (1 + jitter) (options.h): a
  // received path whose acks leave alone and whose probes are all idle ones
  // needs a wake-up this often (the peer judges them with IdleAckTimeout).
  // 0: idle ticks off.
  Nanos idle_wake{};
};

class AckBook {
 public:
  explicit AckBook(AckBookOptions options);

  // The peers whose probes we answer, by wire id (unique). Peers that stay
  // keep their epoch and urgent budget; the ack state of the others is dropped.
  void SetKnown(const std::vector<uint32_t>& ids);
  // The index of a known peer in SetKnown's list, or -1.
  int PeerIndex(uint32_t node) const;

  // Our watched paths as the peers' acks name them (rebuilt when the
  // monitor's paths change); refreshes which received paths our probes carry.
  void SetOurPaths(std::map<WirePath, fabric::PathId> ours);
  // Our path an ack names, if we watch it.
  std::optional<fabric::PathId> OurPath(const WirePath& path) const;

  // An authenticated packet addressed to us from a known peer.
  struct Packet {
    uint32_t sender = 0;
    uint64_t epoch = 0;
    int rail = 0;  // the sender's (with seq)
    int index = 0;
    std::optional<uint32_t> seq;         // its probe; none: ack-only
    MonoTime received{};                 // kernel receive time
    int ifindex = 0;                     // where it arrived
    bool urgent = false;                 // flagged urgent (to our urgent socket)
    std::optional<Nanos> one_way_delay;  // of its probe (clock sync LOCKED at both ends)
    bool slow = false;                   // its probe carries the slow flag (an idle path's: acked at our idle tick)
  };
  struct Verdict {
    std::optional<FabricDrop> drop;  // kStale or kReplayed: nothing of it is used, its ack included
    bool restarted = false;          // a changed epoch after an earlier one: the peer's ack windows start again
    bool older_epoch = false;        // with restarted: the new epoch is older (its clock went back)
    bool urgent_limited = false;     // an urgent probe past the peer's budget: its ack waits for the next packet
  };
  // REQUIRES: PeerIndex(p.sender) >= 0. `now`: this wake-up.
  Verdict OnPacket(const Packet& p, MonoTime now);

  // Sending one batch: first BeginBatch, then Carry per regular probe, then TakeAckOnly.
  void BeginBatch();
  struct Carried {
    std::optional<fabric::AckField> ack;
    int rail = 0;  // the peer path it is for
    int index = 0;
  };
  // The ack a probe of ours to `dest` leaving by `ifindex` on path index
  // `index` carries: of a peer path whose probes arrive on that interface
  // (the same index first, else the first in key order) not carried yet in
  // this batch. Marks it acked.
  std::optional<Carried> Carry(uint32_t dest, int ifindex, int index, MonoTime now);
  struct AckOnly {
    int peer = 0;         // PeerIndex
    WirePath path;        // the peer path acked
    int ifindex = 0;      // leaves where its probes arrive
    bool urgent = false;  // flagged urgent (wakes the peer's prober)
    std::optional<fabric::AckField> ack;
  };
  // The acks no probe of this batch carried, appended to `out`: every urgent
  // one; at a tick every pending one; between ticks the pending ones no
  // probe of ours can carry. Marks them acked.
  void TakeAckOnly(bool tick, MonoTime now, std::vector<AckOnly>& out);

  // An ack-only packet is due between ticks (one no probe of ours can carry, or an urgent one).
  bool AckOnlyDue() const;
  // How soon the prober must wake for the received paths no probe of ours
  // can carry (their probes wait unread in the socket until a wake-up, and
  // their acks leave alone then): every probe interval while one of them had
  // a fast probe within kFastTickHold (the peer judges it with its reply
  // timeout), every idle_wake when their probes are idle ones (the peer
  // waits IdleAckTimeout for those acks: a node on idle ticks wakes no more
  // often than its idle ticks for them), nullopt without such paths.
  std::optional<Nanos> AckOnlyWake(MonoTime now) const;
  // Forgets the paths silent for a stats window.
  void DropQuiet(MonoTime now);

  size_t size() const { return entries_.size(); }  // received paths kept

 private:
  struct Entry {
    fabric::AckWindow window;
    int ifindex = 0;           // where its probes arrive (ack-only packets leave there)
    bool has_carrier = false;  // HasCarrier for this ifindex and our paths
    bool carried = false;      // a probe of this batch carries its ack
    bool urgent = false;       // an urgent probe arrived: ack it at once, flagged urgent
    MonoTime fast_until{};     // a fast probe arrived: the peer judges our acks with its fast timeout until then
  };
  struct Peer {
    uint64_t epoch = 0;  // the latest seen; 0: none yet
    double urgent_tokens = 0;
    MonoTime urgent_refilled{};
    MonoTime last_accepted{};  // its latest packet that passed the freshness checks
  };
  using Entries = std::vector<std::pair<WirePath, Entry>>;
  Entries::iterator AtOrAfter(const WirePath& key);
  bool HasCarrier(const WirePath& key, int ifindex) const;
  bool TakeUrgentReply(Peer& peer, MonoTime now);

  AckBookOptions options_;
  Entries entries_;
  std::vector<uint32_t> known_;  // wire ids
  std::vector<Peer> peers_;      // parallel to known_
  std::map<WirePath, fabric::PathId> ours_;
};

}  // namespace lockstep::agent
