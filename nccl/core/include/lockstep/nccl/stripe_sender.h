// StripeSender: the sending half of a striped connection, as a pure state
// machine (values in, decisions out; no sockets, threads or clocks).
//
// NCCL messages are cut into chunks lazily, in order, each with the next
// connection-wide sequence number. A stream asks for its next chunk when it can
// write (Next(stream)): faster streams pull more chunks, and a stream has at
// most `window_per_stream` unacknowledged chunks. A chunk of message m is only
// cut once the receiver's credit says NCCL has posted the receive for m, so
// every byte that arrives has a buffer waiting for it.
//
// Failover: StreamDown(s) moves every unacknowledged chunk sent on s to the
// retransmit queue; Next() hands those out first, lowest sequence first, on
// any stream still up. The receiver drops copies it already has (by sequence),
// so a chunk that did arrive before the stream died is delivered once.
//
// Steering (traffic control and the node agent's path health): SetLimit(s, n)
// caps a stream's window below window_per_stream (a contended path carries
// less); Park(s) takes a stream that is still open out of use (the agent says
// its path is down) and queues its unacknowledged chunks for the others, like
// StreamDown; Unpark(s) re-admits it (the agent's hold-down is over).
// A message is done when the cumulative ack passes its last chunk: the caller's
// buffer is needed until then (retransmits are read from it; nothing is copied).
//
// Memory: O(nstreams * window_per_stream) chunk descriptors (48 bytes each) plus
// one small record per message not yet acknowledged.
// Thread-compatible: one thread at a time.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "lockstep/common/result.h"
#include "lockstep/nccl/frame.h"

namespace lockstep::nccl {

// How far past the cumulative ack a receiver accepts chunks; a sender never
// has more than this many chunks unacknowledged.
inline constexpr uint64_t kMaxReceiveWindow = 4096;

struct StripeOptions {
  uint32_t chunk_bytes = 512 * 1024;  // 1 .. kMaxChunkBytes
  uint32_t window_per_stream = 8;     // chunks in flight per stream, >= 1
};

// REQUIRES nothing; says what is wrong with `o` for `nstreams` streams.
Status ValidateStripeOptions(const StripeOptions& o, int nstreams);

struct Chunk {
  uint64_t seq = 0;
  uint64_t msg = 0;
  uint64_t offset = 0;
  uint32_t len = 0;
  uint64_t msg_size = 0;
  int32_t tag = 0;
  int stream = -1;  // the stream it is (or was last) in flight on; -1: queued for retransmit
  bool operator==(const Chunk&) const = default;
};

class StripeSender {
 public:
  // REQUIRES: ValidateStripeOptions(options, nstreams).ok()
  StripeSender(int nstreams, StripeOptions options);

  // A message of `size` bytes (<= kMaxMessageBytes); returns its index (0, 1, ...).
  Result<uint64_t> Post(uint64_t size, int32_t tag);

  // The receiver's cumulative ack and credit. Stale acks are ignored; an ack for
  // chunks never sent is a protocol error.
  Status OnAck(const AckFrame& ack);

  // Stream `stream` failed or closed: it gets no more chunks, and its
  // unacknowledged chunks are queued for retransmission on the others.
  void StreamDown(int stream);
  // A stream that was down is back (a transport re-created it): it takes
  // chunks again, starting with an empty window.
  void StreamUp(int stream);

  // Parked: open but unused (see the top). Park of a parked or down stream,
  // Unpark of an unparked one: no-ops.
  void Park(int stream);
  void Unpark(int stream);
  bool IsParked(int stream) const { return parked_[stream]; }
  // REQUIRES: 1 <= limit; values above window_per_stream mean window_per_stream.
  void SetLimit(int stream, uint32_t limit);
  uint32_t Limit(int stream) const { return limit_[stream]; }
  // Up and not parked.
  int StreamsUsable() const;

  // The next chunk to write on `stream` (retransmits first), recorded as in
  // flight there; nullopt when the stream is down, its window is full, or
  // nothing is sendable (no message, no credit, receive window full).
  std::optional<Chunk> Next(int stream);

  // True when every chunk of `msg` is acknowledged. REQUIRES: msg was posted.
  bool Done(uint64_t msg) const;

  int streams() const { return static_cast<int>(up_.size()); }
  int StreamsUp() const;
  bool IsUp(int stream) const { return up_[stream]; }
  size_t InFlight(int stream) const { return inflight_count_[stream]; }
  size_t Unacknowledged() const { return inflight_.size(); }
  uint64_t acked() const { return acked_; }
  uint64_t chunks_sent() const { return chunks_sent_; }
  uint64_t chunks_retransmitted() const { return retransmitted_; }
  uint64_t posted() const { return base_ + msgs_.size(); }

 private:
  struct Message {
    uint64_t size = 0;
    int32_t tag = 0;
    uint64_t next_offset = 0;
    bool cut = false;  // every chunk generated
    uint64_t last_seq = 0;
  };
  void PopDone();

  StripeOptions options_;
  void Requeue(int stream);  // its unacknowledged chunks to the retransmit queue

  std::vector<bool> up_;
  std::vector<bool> parked_;
  std::vector<uint32_t> limit_;
  std::vector<size_t> inflight_count_;
  std::deque<Message> msgs_;  // messages base_, base_ + 1, ...
  uint64_t base_ = 0;
  uint64_t cursor_ = 0;  // the message being cut
  uint64_t next_seq_ = 0;
  uint64_t acked_ = 0;
  uint64_t credit_ = 0;
  std::map<uint64_t, Chunk> inflight_;  // unacknowledged, by seq
  std::set<uint64_t> retransmit_;       // seqs in inflight_ waiting for a stream
  uint64_t chunks_sent_ = 0;
  uint64_t retransmitted_ = 0;
};

}  // namespace lockstep::nccl
