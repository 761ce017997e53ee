// StripeReceiver: the receiving half of a striped connection, as a pure state
// machine (values in, decisions out; no sockets, threads or clocks).
//
// Receives are posted in NCCL's order (Post); the credit sent back is the
// number posted, so a sender only cuts chunks for a posted receive. A chunk
// header says where its payload goes (OnHeader: place at msg/offset, or
// discard a copy already received); once its payload is read, OnPayload counts
// it exactly once. Messages complete in order: message m is complete when all
// of its bytes and every earlier message are. Deduplication is by sequence:
// below the cumulative ack, or in the set of chunks received above it.
//
// Memory: one record per posted, unreleased receive, plus at most
// kMaxReceiveWindow sequence numbers above the cumulative ack.
// Thread-compatible: one thread at a time.
#pragma once

#include <cstdint>
#include <deque>
#include <set>

#include "lockstep/common/result.h"
#include "lockstep/nccl/frame.h"
#include "lockstep/nccl/stripe_sender.h"

namespace lockstep::nccl {

struct Placement {
  bool discard = false;  // a copy of a chunk already received: read and drop it
  uint64_t msg = 0;
  uint64_t offset = 0;
  uint32_t len = 0;
  bool operator==(const Placement&) const = default;
};

class StripeReceiver {
 public:
  // A receive of up to `capacity` bytes for a message with `tag`; returns its
  // index, the same index the sender gives the matching message.
  uint64_t Post(uint64_t capacity, int32_t tag);

  // Where the payload of the chunk with header `h` goes. Errors (the peer broke
  // the protocol): a message not posted, larger than its receive, a tag other
  // than the receive's, a sequence beyond the receive window.
  Result<Placement> OnHeader(const DataHeader& h);

  // The payload of `h` has been read in full (after OnHeader said where).
  // Returns true when it was new (counted), false for a duplicate.
  bool OnPayload(const DataHeader& h);

  // REQUIRES: msg was posted and not released.
  bool Complete(uint64_t msg) const;
  uint64_t Size(uint64_t msg) const;     // bytes received, once Complete
  uint64_t LastSeq(uint64_t msg) const;  // the highest seq of its chunks, once Complete

  // NCCL has been told `msg` completed; its record can go (in order).
  void Release(uint64_t msg);

  // True when the chunk with this sequence number has been counted.
  bool Has(uint64_t seq) const { return seq < cum_seq_ || above_.count(seq) > 0; }

  AckFrame Ack() const { return {.cum_seq = cum_seq_, .credit = posted()}; }
  uint64_t posted() const { return base_ + msgs_.size(); }
  uint64_t duplicates() const { return duplicates_; }

 private:
  struct Message {
    uint64_t capacity = 0;
    int32_t tag = 0;
    bool seen = false;  // a chunk arrived: size is known
    uint64_t size = 0;
    uint64_t received = 0;
    uint64_t last_seq = 0;
    bool released = false;
  };
  bool Full(const Message& m) const { return m.seen && m.received == m.size; }

  std::deque<Message> msgs_;  // receives base_, base_ + 1, ...
  uint64_t base_ = 0;
  uint64_t cum_seq_ = 0;
  std::set<uint64_t> above_;  // received seqs > cum_seq_
  uint64_t duplicates_ = 0;
};

}  // namespace lockstep::nccl
