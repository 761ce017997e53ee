// FakeFabricNetwork / FakeFabricSocket: an in-memory fabric for FabricSocket
// tests. Each socket is one host with a host address and rails whose
// interfaces have ifindex rail + 1. A datagram sent out of rail r arrives at
// the host owning the destination address on its rail r (a same-rail
// fabric), or with Stripe(n) on rail (r + 1) % n when the two hosts' address
// parities differ (a striped fabric: one host's rail 0 and another's rail 1
// share a leaf, as in e2e/netlab), unless the sender's rail or the
// receiver's arrival rail is cut, or the sender's (rail, path index) is
// (CutPath: one fabric path dropping what that host sends on it, a gray
// spine as its probes' source port hashes). Every send is logged (`sent`);
// one sent to another port than the destination's is lost (nothing
// listens), and one with the wire's urgent flag arrives marked urgent (as
// UdpFabricSocket's kernel program steers it). Time is the test's FakeClock
// (datagrams arrive at once). With urgent_first a Poll returns the urgent
// datagrams before the regular ones, as UdpFabricSocket reads them.
// Thread-compatible.
#pragma once

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "lockstep/agent/fabric_probe.h"
#include "lockstep/agent/ports/fabric_socket.h"
#include "lockstep/common/clock.h"

namespace lockstep::agent {

// The urgent flag, read as UdpFabricSocket's kernel program reads it.
inline bool Urgent(const std::vector<uint8_t>& bytes) {
  return bytes.size() > kFabricFlagsOffset && (bytes[kFabricFlagsOffset] & kFabricUrgentFlag) != 0;
}


class FakeFabricSocket;

class FakeFabricNetwork {
 public:
  explicit FakeFabricNetwork(const Clock& clock) : clock_(clock) {}
  void Attach(uint32_t host_address, FakeFabricSocket* socket) { hosts_[host_address] = socket; }
  // Cuts (or restores) rail `rail` of the host with this address, both ways.
  void Cut(uint32_t host_address, int rail, bool cut = true) {
    if (cut) cuts_.insert({host_address, rail});
    else cuts_.erase({host_address, rail});
  }
  bool IsCut(uint32_t host_address, int rail) const { return cuts_.contains({host_address, rail}); }
  // Drops (or stops dropping) what the host sends on fabric path `path` of `rail` (FabricSend.path).
  void CutPath(uint32_t host_address, int rail, int path, bool cut = true) {
    if (cut) path_cuts_.insert({host_address, rail, path});
    else path_cuts_.erase({host_address, rail, path});
  }
  void Stripe(int rails) { stripe_ = rails; }
  // The rail a datagram sent out of `rail` by `from` arrives on at `to`.
  int ArrivalRail(uint32_t from, uint32_t to, int rail) const {
    return stripe_ > 0 && (from % 2) != (to % 2) ? (rail + 1) % stripe_ : rail;
  }
  void Deliver(uint32_t from_host, int rail, uint32_t dest, int port, std::vector<uint8_t> bytes, int path = 0);
  // Raw injection (a forged or malformed datagram) to the host at `dest`, on rail `rail`.
  void Inject(uint32_t dest, int rail, std::vector<uint8_t> bytes, uint32_t claimed_source);
  const Clock& clock() const { return clock_; }

 private:
  const Clock& clock_;
  std::map<uint32_t, FakeFabricSocket*> hosts_;
  std::set<std::pair<uint32_t, int>> cuts_;
  std::set<std::tuple<uint32_t, int, int>> path_cuts_;
  int stripe_ = 0;
};

class FakeFabricSocket final : public FabricSocket {
 public:
  struct Sent {
    uint32_t dest = 0;
    int port = 0;
    int ifindex = 0;
    uint32_t source = 0;
    bool urgent = false;  // the wire's urgent flag
    int path = 0;
  };
  FakeFabricSocket(FakeFabricNetwork& net, uint32_t host_address, int port = 7312)
      : net_(net), host_(host_address), port_(port) {
    net.Attach(host_address, this);
  }
  Status SendVia(std::span<const uint8_t> bytes, uint32_t dest, int port, int ifindex, uint32_t source) override {
    std::vector<uint8_t> copy(bytes.begin(), bytes.end());
    sent.push_back({dest, port, ifindex, source, Urgent(copy), 0});
    net_.Deliver(host_, ifindex - 1, dest, port, std::move(copy));
    return Status::Ok();
  }
  size_t SendBatch(std::span<FabricSend> sends) override {
    for (FabricSend& s : sends) {
      std::vector<uint8_t> copy(s.bytes.begin(), s.bytes.end());
      sent.push_back({s.dest, s.port, s.ifindex, s.source, Urgent(copy), s.path});
      net_.Deliver(host_, s.ifindex - 1, s.dest, s.port, std::move(copy), s.path);
      s.sent = true;
    }
    return 0;
  }
  Status Poll(std::chrono::nanoseconds wait, std::vector<FabricDatagram>& out) override {
    last_wait = wait;
    if (urgent_first) {
      std::stable_partition(inbox.begin(), inbox.end(), [](const FabricDatagram& d) { return d.urgent; });
    }
    while (!inbox.empty()) {
      out.push_back(std::move(inbox.front()));
      inbox.pop_front();
    }
    return Status::Ok();
  }
  int port() const override { return port_; }
  void ReserveReceive(size_t datagrams) override { reserved = datagrams; }

  std::deque<FabricDatagram> inbox;
  bool urgent_first = false;
  size_t reserved = 0;  // the last ReserveReceive
  std::chrono::nanoseconds last_wait{};  // what the last Poll would have slept at most
  std::vector<Sent> sent;

 private:
  FakeFabricNetwork& net_;
  uint32_t host_;
  int port_;
};

inline void FakeFabricNetwork::Deliver(uint32_t from_host, int rail, uint32_t dest, int port,
                                       std::vector<uint8_t> bytes, int path) {
  auto it = hosts_.find(dest);
  const int arrival = ArrivalRail(from_host, dest, rail);
  if (it == hosts_.end() || IsCut(from_host, rail) || IsCut(dest, arrival)) return;
  if (path_cuts_.contains({from_host, rail, path})) return;
  if (port != it->second->port()) return;
  FabricDatagram d{.source = from_host, .ifindex = arrival + 1, .received = clock_.Monotonic(), .urgent = Urgent(bytes)};
  d.Assign(bytes);
  it->second->inbox.push_back(d);
}

inline void FakeFabricNetwork::Inject(uint32_t dest, int rail, std::vector<uint8_t> bytes, uint32_t claimed_source) {
  auto it = hosts_.find(dest);
  if (it == hosts_.end()) return;
  FabricDatagram d{.source = claimed_source, .ifindex = rail + 1, .received = clock_.Monotonic(), .urgent = Urgent(bytes)};
  d.Assign(bytes);
  it->second->inbox.push_back(d);
}

}  // namespace lockstep::agent
