// The transport port of the NCCL plugin: what the ABI adapter (plugin/) needs
// from a transport, in NCCL's terms but as C++ values. Implemented by the
// sockets transport (sockets/) and the verbs transport (verbs/: RC QPs per
// rail over rdma-core).
//
// Contracts (NCCL's ext-net ones):
// - Nothing blocks. Connect returns a PendingConnection that is polled until it
//   yields the connection; Listener::Accept returns null until a peer arrived.
// - Send/Recv may answer "not now" (nullopt): the caller tries again later.
// - Completion is polled with Test, which also makes progress on the wire.
// - A buffer passed to Send/Recv stays the caller's until Test says done.
// Errors: kInvalidArgument (bad handle, bad settings, misuse), kUnavailable
// (the network or the peer failed), kInternal (the peer broke the protocol).
// Thread-compatible: one thread at a time per object; distinct connections may
// be used from distinct threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "lockstep/common/result.h"

namespace lockstep::nccl {

using RequestId = uint64_t;

// What getProperties reports for one device.
struct DeviceProperties {
  std::string name;    // e.g. "lockstep[127.0.0.1+127.0.0.2]"
  int speed_mbps = 0;  // summed over the rails it stripes over
  int rails = 0;
  int streams = 0;  // streams per connection
  uint64_t guid = 0;
};

struct TestResult {
  bool done = false;
  size_t size = 0;  // bytes sent or received, once done
};

class SendConnection {
 public:
  virtual ~SendConnection() = default;
  virtual Result<std::optional<RequestId>> Send(const void* data, size_t size, int tag) = 0;
  // Done once the peer has acknowledged every byte of the message.
  virtual Result<TestResult> Test(RequestId id) = 0;
};

class RecvConnection {
 public:
  virtual ~RecvConnection() = default;
  virtual Result<std::optional<RequestId>> Recv(void* data, size_t capacity, int tag) = 0;
  virtual Result<TestResult> Test(RequestId id) = 0;
};

class Listener {
 public:
  virtual ~Listener() = default;
  // A connection whose streams have all arrived, or null (poll again).
  virtual Result<std::unique_ptr<RecvConnection>> Accept() = 0;
};

class PendingConnection {
 public:
  virtual ~PendingConnection() = default;
  // The connection once every stream is up, or null (poll again).
  virtual Result<std::unique_ptr<SendConnection>> Poll() = 0;
};

// Warnings for the operator (the adapter forwards them to NCCL's logger).
using WarnFn = std::function<void(const std::string&)>;

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int Devices() const = 0;
  virtual DeviceProperties Properties(int dev) const = 0;
  // Writes the connection handle (kHandleBytes) for peers to connect to.
  virtual Result<std::unique_ptr<Listener>> Listen(int dev, uint8_t* handle) = 0;
  virtual Result<std::unique_ptr<PendingConnection>> Connect(int dev, const uint8_t* handle) = 0;
};

}  // namespace lockstep::nccl
