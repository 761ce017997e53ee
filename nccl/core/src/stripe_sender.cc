#include "lockstep/nccl/stripe_sender.h"

#include <algorithm>
#include <string>

namespace lockstep::nccl {

Status ValidateStripeOptions(const StripeOptions& o, int nstreams) {
  if (nstreams < 1 || nstreams > kMaxStreams) {
    return InvalidArgument("streams per connection must be between 1 and " + std::to_string(kMaxStreams) + " (got " +
                           std::to_string(nstreams) + ")");
  }
  if (o.chunk_bytes < 1 || o.chunk_bytes > kMaxChunkBytes) {
    return InvalidArgument("chunk size must be between 1 and " + std::to_string(kMaxChunkBytes) + " bytes (got " +
                           std::to_string(o.chunk_bytes) + ")");
  }
  if (o.window_per_stream < 1 || uint64_t{o.window_per_stream} * nstreams > kMaxReceiveWindow) {
    return InvalidArgument("chunks in flight per stream must be between 1 and " +
                           std::to_string(kMaxReceiveWindow / nstreams) + " for " + std::to_string(nstreams) +
                           " streams (got " + std::to_string(o.window_per_stream) + ")");
  }
  return Status::Ok();
}

StripeSender::StripeSender(int nstreams, StripeOptions options)
    : options_(options),
      up_(nstreams, true),
      parked_(nstreams, false),
      limit_(nstreams, options.window_per_stream),
      inflight_count_(nstreams, 0) {}

Result<uint64_t> StripeSender::Post(uint64_t size, int32_t tag) {
  if (size > kMaxMessageBytes) return InvalidArgument("message of " + std::to_string(size) + " bytes is too large");
  msgs_.push_back(Message{.size = size, .tag = tag});
  return base_ + msgs_.size() - 1;
}

Status StripeSender::OnAck(const AckFrame& ack) {
  if (ack.cum_seq > next_seq_) {
    return Internal("ack for chunk " + std::to_string(ack.cum_seq) + " but only " + std::to_string(next_seq_) +
                    " were sent (peer protocol error)");
  }
  if (ack.credit > posted() + (1u << 20)) return Internal("credit " + std::to_string(ack.credit) + " out of range");
  credit_ = std::max(credit_, ack.credit);
  if (ack.cum_seq <= acked_) return Status::Ok();
  acked_ = ack.cum_seq;
  for (auto it = inflight_.begin(); it != inflight_.end() && it->first < acked_;) {
    if (it->second.stream >= 0) --inflight_count_[it->second.stream];
    retransmit_.erase(it->first);
    it = inflight_.erase(it);
  }
  PopDone();
  return Status::Ok();
}

void StripeSender::PopDone() {
  // Keep the message being cut (cursor_) and everything after it.
  while (!msgs_.empty() && msgs_.front().cut && msgs_.front().last_seq < acked_ && base_ < cursor_) {
    msgs_.pop_front();
    ++base_;
  }
}

void StripeSender::StreamDown(int stream) {
  if (stream < 0 || stream >= streams() || !up_[stream]) return;
  up_[stream] = false;
  Requeue(stream);
}

void StripeSender::StreamUp(int stream) {
  if (stream < 0 || stream >= streams() || up_[stream]) return;
  up_[stream] = true;
  parked_[stream] = false;
  inflight_count_[stream] = 0;
}

void StripeSender::Requeue(int stream) {
  for (auto& [seq, chunk] : inflight_) {
    if (chunk.stream == stream) {
      chunk.stream = -1;
      retransmit_.insert(seq);
    }
  }
  inflight_count_[stream] = 0;
}

void StripeSender::Park(int stream) {
  if (stream < 0 || stream >= streams() || !up_[stream] || parked_[stream]) return;
  parked_[stream] = true;
  Requeue(stream);
}

void StripeSender::Unpark(int stream) {
  if (stream < 0 || stream >= streams()) return;
  parked_[stream] = false;
}

void StripeSender::SetLimit(int stream, uint32_t limit) {
  if (stream < 0 || stream >= streams()) return;
  limit_[stream] = std::clamp<uint32_t>(limit, 1, options_.window_per_stream);
}

int StripeSender::StreamsUsable() const {
  int n = 0;
  for (int s = 0; s < streams(); ++s) n += up_[s] && !parked_[s] ? 1 : 0;
  return n;
}

std::optional<Chunk> StripeSender::Next(int stream) {
  if (stream < 0 || stream >= streams() || !up_[stream] || parked_[stream]) return std::nullopt;
  if (inflight_count_[stream] >= limit_[stream]) return std::nullopt;
  if (!retransmit_.empty()) {
    Chunk& c = inflight_.at(*retransmit_.begin());
    retransmit_.erase(retransmit_.begin());
    c.stream = stream;
    ++inflight_count_[stream];
    ++retransmitted_;
    return c;
  }
  if (cursor_ >= posted() || cursor_ >= credit_) return std::nullopt;
  if (next_seq_ >= acked_ + kMaxReceiveWindow) return std::nullopt;
  Message& m = msgs_[cursor_ - base_];
  const uint64_t len = std::min<uint64_t>(options_.chunk_bytes, m.size - m.next_offset);
  Chunk c{.seq = next_seq_++,
          .msg = cursor_,
          .offset = m.next_offset,
          .len = static_cast<uint32_t>(len),
          .msg_size = m.size,
          .tag = m.tag,
          .stream = stream};
  m.next_offset += len;
  if (m.next_offset == m.size) {
    m.cut = true;
    m.last_seq = c.seq;
    ++cursor_;
  }
  inflight_.emplace(c.seq, c);
  ++inflight_count_[stream];
  ++chunks_sent_;
  return c;
}

bool StripeSender::Done(uint64_t msg) const {
  if (msg < base_) return true;
  if (msg - base_ >= msgs_.size()) return false;
  const Message& m = msgs_[msg - base_];
  return m.cut && m.last_seq < acked_;
}

int StripeSender::StreamsUp() const { return static_cast<int>(std::count(up_.begin(), up_.end(), true)); }

}  // namespace lockstep::nccl
