#include "lockstep/nccl/stripe_receiver.h"

#include <algorithm>
#include <string>

namespace lockstep::nccl {

uint64_t StripeReceiver::Post(uint64_t capacity, int32_t tag) {
  msgs_.push_back(Message{.capacity = capacity, .tag = tag});
  return posted() - 1;
}

Result<Placement> StripeReceiver::OnHeader(const DataHeader& h) {
  if (Has(h.seq)) return Placement{.discard = true};
  if (h.seq >= cum_seq_ + kMaxReceiveWindow) {
    return Internal("chunk " + std::to_string(h.seq) + " beyond the receive window (acked up to " +
                    std::to_string(cum_seq_) + ")");
  }
  if (h.msg < base_ || h.msg >= posted()) {
    return Internal("chunk for message " + std::to_string(h.msg) + " but receives " + std::to_string(base_) + ".." +
                    std::to_string(posted()) + " are posted (peer ignored the credit)");
  }
  Message& m = msgs_[h.msg - base_];
  if (h.msg_size > m.capacity) {
    return InvalidArgument("message " + std::to_string(h.msg) + " of " + std::to_string(h.msg_size) +
                           " bytes does not fit its receive of " + std::to_string(m.capacity) + " bytes");
  }
  if (h.tag != m.tag) {
    return InvalidArgument("message " + std::to_string(h.msg) + " has tag " + std::to_string(h.tag) +
                           " but its receive was posted with tag " + std::to_string(m.tag));
  }
  if (m.seen && m.size != h.msg_size) {
    return Internal("message " + std::to_string(h.msg) + " announced as " + std::to_string(m.size) + " then " +
                    std::to_string(h.msg_size) + " bytes");
  }
  m.seen = true;
  m.size = h.msg_size;
  return Placement{.msg = h.msg, .offset = h.offset, .len = h.len};
}

bool StripeReceiver::OnPayload(const DataHeader& h) {
  if (Has(h.seq) || h.msg < base_ || h.msg >= posted()) {
    ++duplicates_;
    return false;
  }
  above_.insert(h.seq);
  while (!above_.empty() && *above_.begin() == cum_seq_) {
    above_.erase(above_.begin());
    ++cum_seq_;
  }
  Message& m = msgs_[h.msg - base_];
  m.seen = true;
  m.size = h.msg_size;
  m.received += h.len;
  m.last_seq = std::max(m.last_seq, h.seq);
  return true;
}

bool StripeReceiver::Complete(uint64_t msg) const {
  if (msg < base_) return true;
  if (msg >= posted()) return false;
  for (uint64_t i = base_; i <= msg; ++i) {
    if (!Full(msgs_[i - base_])) return false;
  }
  return true;
}

uint64_t StripeReceiver::Size(uint64_t msg) const {
  return msg >= base_ && msg < posted() ? msgs_[msg - base_].received : 0;
}

uint64_t StripeReceiver::LastSeq(uint64_t msg) const {
  return msg >= base_ && msg < posted() ? msgs_[msg - base_].last_seq : 0;
}

void StripeReceiver::Release(uint64_t msg) {
  if (msg < base_ || msg >= posted()) return;
  msgs_[msg - base_].released = true;
  while (!msgs_.empty() && msgs_.front().released && Full(msgs_.front())) {
    msgs_.pop_front();
    ++base_;
  }
}

}  // namespace lockstep::nccl
