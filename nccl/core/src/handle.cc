#include "lockstep/nccl/handle.h"

#include <cstring>
#include <string>

#include "lockstep/nccl/frame.h"

namespace lockstep::nccl {

namespace {
constexpr size_t kRailsAt = 16;
constexpr size_t kHostAt = 80;
constexpr size_t kCheckAt = 84;
constexpr size_t kStageAt = 88;
}  // namespace

void EncodeHandle(const ListenHandle& h, uint8_t* out) {
  std::memset(out, 0, kHandleBytes);
  PutU32(out, kHandleMagic);
  PutU16(out + 4, kHandleVersion);
  PutU16(out + 6, static_cast<uint16_t>(h.rails.size()));
  PutU64(out + 8, h.token);
  for (size_t i = 0; i < h.rails.size() && i < kMaxRails; ++i) {
    uint8_t* r = out + kRailsAt + 8 * i;
    std::memcpy(r, h.rails[i].ipv4.data(), 4);
    PutU16(r + 4, h.rails[i].port);
  }
  std::memcpy(out + kHostAt, h.host.data(), 4);
  PutU32(out + kCheckAt, Checksum32(out, kCheckAt));
}

Result<ListenHandle> DecodeHandle(const uint8_t* b) {
  if (b == nullptr) return InvalidArgument("connection handle: null");
  if (GetU32(b) != kHandleMagic) {
    return InvalidArgument("connection handle: not a Lockstep handle (bad magic; was it made by another NCCL plugin?)");
  }
  if (GetU16(b + 4) != kHandleVersion) {
    return InvalidArgument("connection handle: version " + std::to_string(GetU16(b + 4)) + ", this plugin speaks " +
                           std::to_string(kHandleVersion) + " (mixed plugin versions in one job?)");
  }
  if (GetU32(b + kCheckAt) != Checksum32(b, kCheckAt)) return InvalidArgument("connection handle: checksum mismatch");
  ListenHandle h;
  h.token = GetU64(b + 8);
  std::memcpy(h.host.data(), b + kHostAt, 4);
  const uint16_t n = GetU16(b + 6);
  if (n == 0 || n > kMaxRails) return InvalidArgument("connection handle: " + std::to_string(n) + " rails");
  for (uint16_t i = 0; i < n; ++i) {
    const uint8_t* r = b + kRailsAt + 8 * i;
    RailEndpoint e;
    std::memcpy(e.ipv4.data(), r, 4);
    e.port = GetU16(r + 4);
    if (e.port == 0) return InvalidArgument("connection handle: rail " + std::to_string(i) + " has port 0");
    h.rails.push_back(e);
  }
  return h;
}

uint64_t ConnectStage(const uint8_t* handle) { return GetU64(handle + kStageAt); }
void SetConnectStage(uint8_t* handle, uint64_t stage) { PutU64(handle + kStageAt, stage); }

}  // namespace lockstep::nccl
