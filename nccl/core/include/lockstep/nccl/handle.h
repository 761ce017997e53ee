// The connection handle NCCL exchanges out of band between ranks
// (NCCL_NET_HANDLE_MAXSIZE = 128 bytes), as a value.
//
//   [0, 4)    magic "LKSN"          [4, 6)  version (2)     [6, 8)  rail count
//   [8, 16)   listen token (random per listen; hellos must carry it)
//   [16, 80)  up to 8 rails: IPv4 address (network order), port, 2 reserved
//   [80, 84)  the listener's host address (network order; 0 = unknown): the
//             node agent names peers by it, so the connector can find its
//             paths' health (version 2; version 1 had none and a 24-byte ack)
//   [84, 88)  checksum of [0, 84)
//   [88, 96)  connect stage: 0 as written by listen; connect() keeps the id of its
//             pending connection here between its non-blocking calls (NCCL passes
//             the same handle buffer again), as NCCL's own socket transport does.
//
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "lockstep/common/result.h"

namespace lockstep::nccl {

inline constexpr size_t kHandleBytes = 128;
inline constexpr uint32_t kHandleMagic = 0x4e53'4b4cu;  // "LKSN"
inline constexpr uint16_t kHandleVersion = 2;
inline constexpr size_t kMaxRails = 8;

struct RailEndpoint {
  std::array<uint8_t, 4> ipv4{};  // network byte order, as in sockaddr_in
  uint16_t port = 0;              // host byte order
  bool operator==(const RailEndpoint&) const = default;
};

struct ListenHandle {
  uint64_t token = 0;
  std::vector<RailEndpoint> rails{};  // 1..kMaxRails
  std::array<uint8_t, 4> host{};      // the listener's host address (agent's name for the node); 0 = unknown
  bool operator==(const ListenHandle&) const = default;
};

// REQUIRES: 1 <= rails.size() <= kMaxRails. Writes all kHandleBytes of `out`.
void EncodeHandle(const ListenHandle& h, uint8_t* out);
// Any bytes: a foreign or damaged handle is an InvalidArgument, never a crash.
Result<ListenHandle> DecodeHandle(const uint8_t* bytes);

uint64_t ConnectStage(const uint8_t* handle);
void SetConnectStage(uint8_t* handle, uint64_t stage);

}  // namespace lockstep::nccl
