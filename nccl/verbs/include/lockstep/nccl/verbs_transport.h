// VerbsTransport: the RDMA transport of the NCCL plugin (an adapter on the
// transport port, transport.h), over rdma-core through the VerbsApi port.
//
// A connection is one RC QP per rail (the primaries) plus, with `standby`, one
// standby QP on another rail (rail 1 when there are two or more; with one rail
// the same port with another GRH flow label, i.e. another RoCEv2 UDP source
// port and so, where the fabric hashes it elsewhere, another ECMP path). The
// standby is connected and has its receives posted from the start but carries
// nothing until a primary fails, so failover costs no connection setup.
//
// Data path (host memory, NCCL_PTR_HOST): the pure StripeSender/StripeReceiver
// of the sockets transport cut messages into sequenced chunks; each chunk is
// one IBV_WR_SEND of a 64-byte DataHeader plus payload, copied into a
// registered send slot, and lands in one of the receiver's registered receive
// slots, from which the payload is copied into NCCL's buffer (or dropped: a
// duplicate). Acks (cumulative sequence + credit) come back as 40-byte sends
// on any live QP. One copy on each side: registered NCCL buffers and RDMA
// WRITE are a later slice.
//
// Failover: a send that completes with an error (IBV_WC_RETRY_EXC_ERR, then
// IBV_WC_WR_FLUSH_ERR for the rest, or any other error) takes its QP out of
// the connection: its unacknowledged chunks are replayed, lowest sequence
// first, on the QPs left, the standby among them. `path_failed` (the agent's
// path verdicts) parks a primary the same way while its rail is failed and
// re-admits it after; the standby is parked again once every primary is back.
// The plugin asks the node agent about (the rail's address from its RoCE GID,
// the peer's host address from the handle), as the sockets transport does.
// The receiver deduplicates by sequence number, so every byte is delivered
// once and in order. A connection fails (kUnavailable) only when no QP is left.
//
// Connection setup: the listener's handle (handle.h's format, one "rail": the
// bootstrap TCP endpoint) names a TCP socket on `bootstrap_ipv4`; the
// connector sends its QPs (number, PSN, LID, GID, port, MTU) and the listener
// answers with its own and its receive slots (count and size: the sender's
// window and chunk never exceed them). Both sides then move their QPs
// INIT -> RTR -> RTS. Every step is non-blocking (Poll/Accept return null
// until done). The TCP connection stays open: over it a failed QP is
// re-created at both ends (rearm_after_ms, with backoff, only while
// path_failed does not report its path failed) and re-admitted.
//
// Memory per connection and QP: send slots (window x (64 + chunk) bytes at the
// sender), receive slots (window x (64 + chunk) at the receiver), 16 ack slots
// of 40 bytes at the sender and one at the receiver, one CQ. All registered.
// Thread-compatible per object.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/nccl/agent_wire.h"
#include "lockstep/nccl/stripe_sender.h"
#include "lockstep/nccl/transport.h"
#include "lockstep/nccl/verbs_api.h"

namespace lockstep::nccl {

struct VerbsRailSpec {
  std::string device;  // e.g. mlx5_0
  int port = 1;
  bool operator==(const VerbsRailSpec&) const = default;
};

// One primary QP's path, as the health hook sees it.
struct VerbsPath {
  int rail = 0;                        // local rail index
  std::array<uint8_t, 4> rail_ipv4{};  // from an IPv4-mapped (RoCE) GID; 0 on InfiniBand
  std::array<uint8_t, 4> peer_host{};  // from the listener's handle; 0 when it had no agent
};

struct VerbsTransportConfig {
  std::vector<VerbsRailSpec> rails;  // empty: port 1 of every device, up to kMaxRails
  int gid_index = 0;                 // the GID table entry (RoCEv2 IPv4 GIDs are often index 3)
  StripeOptions stripe{.chunk_bytes = 64 * 1024, .window_per_stream = 8};
  bool standby = true;
  std::array<uint8_t, 4> bootstrap_ipv4{127, 0, 0, 1};  // where listeners take the QP exchange
  size_t max_outstanding = 64;                          // requests per connection
  int rail_speed_mbps = 100000;                         // reported per rail
  // Path health (the node agent's verdicts), polled by the sender for each
  // primary QP; true: do not use it. Null: errors on the wire only.
  std::function<bool(const VerbsPath&)> path_failed;
  // This node's host address for the listen handle (the agent's name for the
  // node, so connectors can ask about their paths to it); null or 0: none.
  std::function<std::array<uint8_t, 4>()> host;
  // A QP that failed is re-created (both ends, over the QP exchange's TCP
  // connection, kept open) this long after its failure, doubling while it
  // keeps failing (at most 16x), and only while `path_failed` does not say
  // its path is failed; 0: never.
  int rearm_after_ms = 1000;
  // Reports of each connection end's QPs, at most once a second, from inside
  // its calls (the plugin forwards them to the node agent); `closed` when the
  // end is gone. Null: none.
  std::function<void(uint64_t conn, bool send, std::vector<StreamReport> qps)> report;
  std::function<void(uint64_t conn, bool send)> closed;
  // Fabric time in ns (the agent's clock sync; 0 while not locked). With it,
  // chunks carry send stamps and receivers report each QP's one-way delay
  // (p50/p99 of the last 256). Null: no stamps.
  std::function<uint64_t()> fabric_now_ns;
  // Expected events (a QP parked or re-admitted on the agent's word); null:
  // they go to the WarnFn. Failures always go to the WarnFn.
  WarnFn info;
};

// Settings from the environment:
//   LOCKSTEP_NCCL_VERBS_DEVICES     comma-separated DEVICE[:PORT] (default: port 1 of every device)
//   LOCKSTEP_NCCL_VERBS_GID_INDEX   0..255 (default 0)
//   LOCKSTEP_NCCL_VERBS_STANDBY     1 or 0 (default 1)
//   LOCKSTEP_NCCL_VERBS_REARM_MS    0..600000 (default 1000; 0: failed QPs are not re-created)
// A bad value is an InvalidArgument naming the variable, the value and the range.
Result<VerbsTransportConfig> VerbsConfigFromEnv(const std::function<const char*(const char*)>& env);

// Opens the configured devices. Unavailable with a sentence that starts "no
// RDMA device: " when there is none (the library lists no device, a
// configured device is absent, or its port is not active).
Result<std::unique_ptr<Transport>> MakeVerbsTransport(const VerbsApi& api, VerbsTransportConfig config, WarnFn warn);

}  // namespace lockstep::nccl
