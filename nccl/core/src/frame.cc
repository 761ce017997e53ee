#include "lockstep/nccl/frame.h"

#include <cstring>

namespace lockstep::nccl {

void PutU16(uint8_t* p, uint16_t v) {
  for (int i = 0; i < 2; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void PutU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t GetU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint32_t Checksum32(const uint8_t* p, size_t n) {
  uint32_t h = 0x811c9dc5u;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x01000193u;
  }
  return h;
}

namespace {

// The last four bytes of every frame hold the checksum of the bytes before them.
template <size_t N>
void Seal(std::array<uint8_t, N>& b) {
  PutU32(b.data() + N - 4, Checksum32(b.data(), N - 4));
}

Status CheckFrame(const uint8_t* b, size_t n, uint32_t magic, const char* what) {
  if (GetU32(b) != magic) return InvalidArgument(std::string(what) + ": bad magic (not a Lockstep NCCL frame)");
  if (GetU32(b + n - 4) != Checksum32(b, n - 4)) return InvalidArgument(std::string(what) + ": checksum mismatch");
  return Status::Ok();
}

}  // namespace

std::array<uint8_t, kDataHeaderBytes> EncodeDataHeader(const DataHeader& h) {
  std::array<uint8_t, kDataHeaderBytes> b{};
  PutU32(&b[0], kDataMagic);
  PutU16(&b[4], h.stream);
  PutU32(&b[8], h.len);
  PutU32(&b[12], static_cast<uint32_t>(h.tag));
  PutU64(&b[16], h.seq);
  PutU64(&b[24], h.msg);
  PutU64(&b[32], h.offset);
  PutU64(&b[40], h.msg_size);
  PutU64(&b[48], h.send_ns);
  Seal(b);
  return b;
}

Result<DataHeader> DecodeDataHeader(const uint8_t* b) {
  if (Status s = CheckFrame(b, kDataHeaderBytes, kDataMagic, "data frame"); !s.ok()) return s.error();
  DataHeader h;
  h.stream = GetU16(&b[4]);
  h.len = GetU32(&b[8]);
  h.tag = static_cast<int32_t>(GetU32(&b[12]));
  h.seq = GetU64(&b[16]);
  h.msg = GetU64(&b[24]);
  h.offset = GetU64(&b[32]);
  h.msg_size = GetU64(&b[40]);
  h.send_ns = GetU64(&b[48]);
  if (h.len > kMaxChunkBytes) return InvalidArgument("data frame: chunk of " + std::to_string(h.len) + " bytes");
  if (h.msg_size > kMaxMessageBytes) return InvalidArgument("data frame: message of " + std::to_string(h.msg_size));
  if (h.offset > h.msg_size || h.len > h.msg_size - h.offset) {
    return InvalidArgument("data frame: chunk [" + std::to_string(h.offset) + ", +" + std::to_string(h.len) +
                           ") outside its message of " + std::to_string(h.msg_size) + " bytes");
  }
  return h;
}

std::array<uint8_t, kAckBytes> EncodeAck(const AckFrame& a) {
  std::array<uint8_t, kAckBytes> b{};
  PutU32(&b[0], kAckMagic);
  PutU64(&b[4], a.cum_seq);
  PutU64(&b[12], a.credit);
  PutU16(&b[20], a.has_owd ? 1 : 0);
  PutU16(&b[22], a.owd_stream);
  PutU64(&b[24], static_cast<uint64_t>(a.owd_ns));
  Seal(b);
  return b;
}

Result<AckFrame> DecodeAck(const uint8_t* b) {
  if (Status s = CheckFrame(b, kAckBytes, kAckMagic, "ack frame"); !s.ok()) return s.error();
  AckFrame a{.cum_seq = GetU64(&b[4]), .credit = GetU64(&b[12])};
  const uint16_t flags = GetU16(&b[20]);
  if (flags > 1) return InvalidArgument("ack frame: unknown flags " + std::to_string(flags));
  a.has_owd = flags == 1;
  if (a.has_owd) {
    a.owd_stream = GetU16(&b[22]);
    a.owd_ns = static_cast<int64_t>(GetU64(&b[24]));
  }
  return a;
}

std::array<uint8_t, kHelloBytes> EncodeHello(const Hello& h) {
  std::array<uint8_t, kHelloBytes> b{};
  PutU32(&b[0], kHelloMagic);
  PutU16(&b[4], h.stream);
  PutU16(&b[6], h.nstreams);
  PutU64(&b[8], h.listen_token);
  PutU64(&b[16], h.conn_id);
  Seal(b);
  return b;
}

Result<Hello> DecodeHello(const uint8_t* b) {
  if (Status s = CheckFrame(b, kHelloBytes, kHelloMagic, "hello"); !s.ok()) return s.error();
  Hello h{.listen_token = GetU64(&b[8]), .conn_id = GetU64(&b[16]), .stream = GetU16(&b[4]), .nstreams = GetU16(&b[6])};
  if (h.nstreams == 0 || h.nstreams > kMaxStreams || h.stream >= h.nstreams) {
    return InvalidArgument("hello: stream " + std::to_string(h.stream) + " of " + std::to_string(h.nstreams));
  }
  return h;
}

}  // namespace lockstep::nccl
