// Big-endian wire helpers for the probe codec. WireWriter appends to a buffer;
// WireReader reads from a span and latches a failure flag instead of reading
// past the end (callers check ok() once). Pure; thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace lockstep::agent {

class WireWriter {
 public:
  explicit WireWriter(std::vector<uint8_t>& out) : out_(out) {}
  void U8(uint8_t v) { out_.push_back(v); }
  void U16(uint16_t v) { Put(v, 2); }
  void U32(uint32_t v) { Put(v, 4); }
  void U64(uint64_t v) { Put(v, 8); }
  void I64(int64_t v) { Put(static_cast<uint64_t>(v), 8); }
  void Bytes(std::span<const uint8_t> v) { out_.insert(out_.end(), v.begin(), v.end()); }
  // Overwrites a u16 at `pos` (REQUIRES: pos + 2 <= size).
  void PatchU16(size_t pos, uint16_t v) {
    out_[pos] = static_cast<uint8_t>(v >> 8);
    out_[pos + 1] = static_cast<uint8_t>(v);
  }

 private:
  void Put(uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t>& out_;
};

class WireReader {
 public:
  explicit WireReader(std::span<const uint8_t> in) : in_(in) {}
  uint8_t U8() { return static_cast<uint8_t>(Get(1)); }
  uint16_t U16() { return static_cast<uint16_t>(Get(2)); }
  uint32_t U32() { return static_cast<uint32_t>(Get(4)); }
  uint64_t U64() { return Get(8); }
  int64_t I64() { return static_cast<int64_t>(Get(8)); }
  // Fills `out` (zeros if the input is too short; ok() turns false).
  void Bytes(std::span<uint8_t> out) {
    for (uint8_t& b : out) b = U8();
  }
  bool ok() const { return ok_; }
  size_t remaining() const { return ok_ ? in_.size() - pos_ : 0; }

 private:
  uint64_t Get(size_t n) {
    if (!ok_ || in_.size() - pos_ < n) {
      ok_ = false;
      return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v = (v << 8) | in_[pos_ + i];
    pos_ += n;
    return v;
  }
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace lockstep::agent
