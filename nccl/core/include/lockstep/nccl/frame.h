// The wire frames of the NCCL plugin's striped connections, as values.
//
// A connection is several TCP streams (one or more per rail). The sender cuts
// each NCCL message into chunks; every chunk carries a connection-wide sequence
// number, its message index, its offset and the message's size, so a chunk can
// arrive on any stream, be retransmitted on another after a failure, and still
// land at its place exactly once. The receiver answers with cumulative acks
// that also carry its receive credit (how many receives NCCL has posted) and,
// when chunks carry fabric-time stamps, the one-way delay the receiver measures
// on the stream the ack travels back on (the sender's traffic control reads it).
//
//   DataHeader (64 bytes) + payload  sender -> receiver
//   AckFrame   (40 bytes)            receiver -> sender
//   Hello      (40 bytes)            connector -> listener, once per stream
//
// All integers little-endian. Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "lockstep/common/result.h"

namespace lockstep::nccl {

inline constexpr uint32_t kDataMagic = 0x4453'4b4cu;   // "LKSD"
inline constexpr uint32_t kAckMagic = 0x4153'4b4cu;    // "LKSA"
inline constexpr uint32_t kHelloMagic = 0x4853'4b4cu;  // "LKSH"
inline constexpr size_t kDataHeaderBytes = 64;
inline constexpr size_t kAckBytes = 40;
inline constexpr size_t kHelloBytes = 40;
// Bounds a peer cannot exceed (a frame outside them is a protocol error).
inline constexpr uint32_t kMaxChunkBytes = 16u << 20;
inline constexpr uint64_t kMaxMessageBytes = 1ull << 40;  // NCCL_MAX_NET_SIZE_BYTES
inline constexpr uint16_t kMaxStreams = 64;

struct DataHeader {
  uint16_t stream = 0;    // the stream it was sent on (informational)
  uint32_t len = 0;       // payload bytes that follow
  int32_t tag = 0;        // NCCL's tag of the message
  uint64_t seq = 0;       // connection-wide chunk sequence number
  uint64_t msg = 0;       // message index on this connection (0, 1, ...)
  uint64_t offset = 0;    // byte offset of the payload inside the message
  uint64_t msg_size = 0;  // the message's total size
  uint64_t send_ns = 0;   // sender's timestamp in fabric time (ns); 0 = none (no agent clock)
  bool operator==(const DataHeader&) const = default;
};

struct AckFrame {
  uint64_t cum_seq = 0;  // every chunk with seq < cum_seq has been received
  uint64_t credit = 0;   // receives posted for messages < credit
  // The smoothed one-way delay of data on `owd_stream` (the stream this ack is
  // written on), in ns; meaningful only with has_owd (chunks carried stamps).
  bool has_owd = false;
  uint16_t owd_stream = 0;
  int64_t owd_ns = 0;
  bool operator==(const AckFrame&) const = default;
};

struct Hello {
  uint64_t listen_token = 0;  // from the handle: which listener this is for
  uint64_t conn_id = 0;       // chosen by the connector, same on all its streams
  uint16_t stream = 0;        // this stream's index
  uint16_t nstreams = 0;      // how many streams the connection has
  bool operator==(const Hello&) const = default;
};

std::array<uint8_t, kDataHeaderBytes> EncodeDataHeader(const DataHeader& h);
// Checks magic, checksum and bounds (len <= kMaxChunkBytes, offset + len <= msg_size,
// msg_size <= kMaxMessageBytes).
Result<DataHeader> DecodeDataHeader(const uint8_t* bytes);

std::array<uint8_t, kAckBytes> EncodeAck(const AckFrame& a);
Result<AckFrame> DecodeAck(const uint8_t* bytes);

std::array<uint8_t, kHelloBytes> EncodeHello(const Hello& h);
// Checks magic, checksum and 0 <= stream < nstreams <= kMaxStreams.
Result<Hello> DecodeHello(const uint8_t* bytes);

// Little-endian helpers shared with the handle codec.
void PutU16(uint8_t* p, uint16_t v);
void PutU32(uint8_t* p, uint32_t v);
void PutU64(uint8_t* p, uint64_t v);
uint16_t GetU16(const uint8_t* p);
uint32_t GetU32(const uint8_t* p);
uint64_t GetU64(const uint8_t* p);
// FNV-1a 32 over `n` bytes (detects garbage and truncation, not attackers).
uint32_t Checksum32(const uint8_t* p, size_t n);

}  // namespace lockstep::nccl
