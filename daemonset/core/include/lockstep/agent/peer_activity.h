// PeerActivity: which fabric peers this node's traffic uses, from its TCP
// connections (tiered probing, lockstep/fabric/probe_tiers.h: only the paths
// traffic uses are probed fast). Values in (each connection's remote address
// and bytes moved so far, now), decisions out (is a peer active). A peer is
// active while one of its connections moved bytes within `hold` (training
// traffic comes in steps with pauses between them; a pause shorter than hold
// keeps the peer's paths fast). A connection seen for the first time with
// bytes already moved counts as moving now. Pure: no sockets, no clock.
// Thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "lockstep/common/clock.h"

namespace lockstep::agent {

// One TCP connection (ports/traffic_source.h lists them).
struct TcpFlow {
  uint64_t cookie = 0;  // the kernel's socket cookie: stable for the connection's life
  uint32_t remote = 0;  // the peer's IPv4 address, host byte order
  uint16_t remote_port = 0;
  uint64_t bytes = 0;   // acked + received so far
};

class PeerActivity {
 public:
  explicit PeerActivity(Nanos hold) : hold_(hold) {}

  // The node's connections at `now` (every one, not only the peers').
  // REQUIRES: now does not go back.
  void Update(MonoTime now, const std::vector<TcpFlow>& flows);

  // A connection to `remote` moved bytes within hold of `now`.
  bool Active(uint32_t remote, MonoTime now) const;

 private:
  Nanos hold_;
  std::map<uint64_t, uint64_t> bytes_;  // cookie -> bytes at the last Update
  std::map<uint32_t, MonoTime> moved_;  // remote -> the last Update that saw bytes move
};

}  // namespace lockstep::agent
