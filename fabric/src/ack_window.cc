#include "lockstep/fabric/ack_window.h"

#include <algorithm>

namespace lockstep::fabric {

const char* ToString(Receipt r) {
  switch (r) {
    case Receipt::kNew: return "new";
    case Receipt::kLate: return "late";
    case Receipt::kDuplicate: return "duplicate";
    case Receipt::kStale: return "stale";
  }
  return "unknown";
}

Receipt AckWindow::OnReceive(uint32_t seq, Time received, std::optional<Nanos> one_way_delay) {
  if (!latest_) {
    latest_ = seq;
    bitmap_ = 0;
    received_ = received;
    owd_ = one_way_delay;
    pending_ = true;
    return Receipt::kNew;
  }
  const uint32_t ahead = seq - *latest_;  // modulo 2^32
  if (ahead == 0) return Receipt::kDuplicate;
  if (ahead < kMaxSeqAdvance) {  // newer: shift the window
    // The old latest becomes bit ahead - 1, old bit i bit ahead + i.
    bitmap_ = ahead > kAckBitmapBits
                  ? 0
                  : static_cast<uint32_t>((static_cast<uint64_t>(bitmap_) << ahead) | (uint64_t{1} << (ahead - 1)));
    latest_ = seq;
    received_ = std::max(received_, received);
    owd_ = one_way_delay;
    pending_ = true;
    return Receipt::kNew;
  }
  const uint32_t behind = *latest_ - seq;
  // Before the window (or far ahead, which modulo 2^32 is long ago): never
  // "the peer restarted" (a replay of an old probe would say so); see Reset.
  if (behind > kAckBitmapBits) return Receipt::kStale;
  const uint32_t bit = 1u << (behind - 1);
  if ((bitmap_ & bit) != 0) return Receipt::kDuplicate;
  bitmap_ |= bit;  // late (reordered): acknowledged in the bitmap
  pending_ = true;
  return Receipt::kLate;
}

std::optional<AckField> AckWindow::Ack(Time now) const {
  if (!latest_) return std::nullopt;
  return AckField{*latest_, bitmap_, owd_, std::max(Nanos(0), now - received_)};
}

bool Acked(const AckField& ack, uint32_t seq) {
  const uint32_t behind = ack.seq - seq;
  if (behind == 0) return true;
  return behind <= kAckBitmapBits && (ack.bitmap >> (behind - 1) & 1u) != 0;
}

}  // namespace lockstep::fabric
