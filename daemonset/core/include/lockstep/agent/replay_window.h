// ReplayWindow: an IPsec-style sliding window over one sender's packet
// sequence numbers. Accepts a sequence once; rejects repeats and anything
// older than kSize behind the highest accepted. A jump forward (a restarted
// sender) just slides the window. Pure; thread-compatible.
#pragma once

#include <array>
#include <cstdint>

namespace lockstep::agent {

class ReplayWindow {
 public:
  static constexpr uint64_t kSize = 1024;

  // Returns true and records `seq` if it is new and inside the window.
  bool Accept(uint64_t seq);
  uint64_t highest() const { return highest_; }

 private:
  bool Test(uint64_t seq) const { return (bits_[(seq % kSize) / 64] >> (seq % 64)) & 1u; }
  void Set(uint64_t seq) { bits_[(seq % kSize) / 64] |= uint64_t{1} << (seq % 64); }
  void Clear(uint64_t seq) { bits_[(seq % kSize) / 64] &= ~(uint64_t{1} << (seq % 64)); }

  bool empty_ = true;
  uint64_t highest_ = 0;
  std::array<uint64_t, kSize / 64> bits_{};
};

}  // namespace lockstep::agent
