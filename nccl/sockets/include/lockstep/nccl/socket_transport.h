// SocketTransport: the sockets transport of the NCCL plugin (an adapter on the
// transport port). A connection is `rails x streams_per_rail` TCP streams;
// stream i leaves from rail (i mod rails)'s address (bind before connect, so
// the kernel sends it out of that rail) to the peer's listener on rail
// (i mod peer rails). Every socket is non-blocking; nothing here blocks or
// starts a thread: progress is made inside Send/Recv/Test/Poll/Accept calls,
// which NCCL's proxy thread makes continuously.
//
// Striping, acks and failover are the pure StripeSender/StripeReceiver; this
// file moves their chunks through sockets. A stream that errors or reaches EOF
// is closed and its unacknowledged chunks move to the others; the connection
// fails (kUnavailable) only when no stream is left.
//
// Memory per connection: the sockets' kernel buffers, 64 bytes of header and
// 24 bytes of ack per stream, the StripeSender's window
// (streams x window_per_stream descriptors of 48 bytes), one record per
// outstanding request (at most max_outstanding), and a 64 KiB scratch buffer
// per receiving connection for discarding duplicate payloads. No data copies:
// chunks are written from and read into NCCL's buffers.
// Thread-compatible per object (NCCL drives each comm from one thread).
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/nccl/agent_link.h"
#include "lockstep/nccl/stripe_sender.h"
#include "lockstep/nccl/traffic_control.h"
#include "lockstep/nccl/transport.h"

namespace lockstep::nccl {

struct Rail {
  std::string name;               // as configured: an address or an interface name
  std::array<uint8_t, 4> ipv4{};  // network byte order
};

struct SocketTransportConfig {
  std::vector<Rail> rails;  // 1..kMaxRails
  int streams_per_rail = 1;
  StripeOptions stripe;
  int rail_speed_mbps = 10000;  // reported per rail in getProperties
  size_t max_outstanding = 64;  // requests per connection (NCCL uses up to 32)
  int connect_timeout_ms = 30000;
  TrafficControlOptions traffic{};  // the sender's contention policy (needs the agent's fabric time)
  // ECMP path pinning (a fabric hashes the 5-tuple): stream i of every
  // connection leaves from source_ports[i] (SO_REUSEPORT, so connections to
  // other peers or listeners share it); listeners take the first free port
  // of [listen_port_lo, listen_port_hi]. Empty / 0: the kernel's choice.
  std::vector<uint16_t> source_ports{};
  uint16_t listen_port_lo = 0, listen_port_hi = 0;
  int ack_timeout_ms = 60;  // AckStalled's timeout (0: off), with or without the agent
};

// Settings from the environment (`env` is getenv or a test's map):
//   LOCKSTEP_NCCL_RAILS              comma-separated IPv4 addresses or interface names
//                                    (default: the first up, non-loopback IPv4
//                                    interface, else 127.0.0.1)
//   LOCKSTEP_NCCL_STREAMS_PER_RAIL   1..8 (default 1)
//   LOCKSTEP_NCCL_CHUNK_BYTES        4096..16777216 (default 524288)
//   LOCKSTEP_NCCL_WINDOW             chunks in flight per stream (default 8)
//   LOCKSTEP_NCCL_RAIL_SPEED_MBPS    reported speed per rail (default 10000)
//   LOCKSTEP_NCCL_SOURCE_PORTS       comma-separated source ports, one per stream index (1024..65535)
//   LOCKSTEP_NCCL_LISTEN_PORTS       P or P1-P2: the listeners' ports (1024..65535)
//   LOCKSTEP_NCCL_ACK_TIMEOUT_MS     park a stream without TCP acks this long (0..60000, default 60; 0 off)
// A bad value is an InvalidArgument naming the variable, the value and the range.
Result<SocketTransportConfig> SocketConfigFromEnv(const std::function<const char*(const char*)>& env);

// `agent` (may be null): the node agent's link. With it, handles carry the
// agent's host address, senders park streams whose path the agent reports
// down and re-admit them when it reports them usable, chunks are stamped in
// fabric time, receivers measure one-way delays, senders shift chunks off
// contended streams, and every connection reports to the agent.
std::unique_ptr<Transport> MakeSocketTransport(SocketTransportConfig config, WarnFn warn,
                                               std::shared_ptr<AgentLink> agent = nullptr);

}  // namespace lockstep::nccl
