#include "lockstep/fabric/ack_window.h"

#include <algorithm>

namespace lockstep::fabric {

void AckWindow::OnReceive(uint32_t seq, Time received, std::optional<Nanos> one_way_delay) {
  pending_ = true;
  if (!latest_) {
    latest_ = seq;
    bitmap_ = 0;
    received_ = received;
    owd_ = one_way_delay;
    return;
  }
  const uint32_t ahead = seq - *latest_;  // modulo 2^32
  if (ahead == 0) return;                 // a duplicate
  if (ahead < (1u << 31)) {               // newer: shift the window
    // The old latest becomes bit ahead - 1, old bit i bit ahead + i.
    bitmap_ = ahead > kAckBitmapBits
                  ? 0
                  : static_cast<uint32_t>((static_cast<uint64_t>(bitmap_) << ahead) | (uint64_t{1} << (ahead - 1)));
    latest_ = seq;
    received_ = std::max(received_, received);
    owd_ = one_way_delay;
    return;
  }
  const uint32_t behind = *latest_ - seq;
  if (behind <= kAckBitmapBits) {
    bitmap_ |= 1u << (behind - 1);  // late (reordered): acknowledged in the bitmap
    return;
  }
  // Far behind: the peer restarted (its seqs begin again); forget the old window.
  latest_ = seq;
  bitmap_ = 0;
  received_ = received;
  owd_ = one_way_delay;
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
