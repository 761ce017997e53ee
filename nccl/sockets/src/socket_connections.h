// The two ends of an established striped connection over TCP streams:
// SocketSendConnection (NCCL's sendComm) and SocketRecvConnection (recvComm).
// See socket_transport.h for the design and the memory bound.
// Thread-compatible.
#pragma once

#include <array>
#include <deque>
#include <string>
#include <vector>

#include "fd.h"
#include "lockstep/nccl/frame.h"
#include "lockstep/nccl/stripe_receiver.h"
#include "lockstep/nccl/stripe_sender.h"
#include "lockstep/nccl/transport.h"

namespace lockstep::nccl {

class SocketSendConnection final : public SendConnection {
 public:
  // REQUIRES: fds.size() == nstreams, options valid for it.
  SocketSendConnection(std::vector<Fd> fds, StripeOptions options, size_t max_outstanding, WarnFn warn);

  Result<std::optional<RequestId>> Send(const void* data, size_t size, int tag) override;
  Result<TestResult> Test(RequestId id) override;

  const StripeSender& sender() const { return sender_; }

 private:
  struct Stream {
    Fd fd;
    bool writing = false;
    std::array<uint8_t, kDataHeaderBytes> hdr{};
    size_t hdr_off = 0;
    const uint8_t* payload = nullptr;
    size_t len = 0;
    size_t off = 0;
    std::array<uint8_t, kAckBytes> ack{};
    size_t ack_off = 0;
  };
  struct Message {
    const uint8_t* data = nullptr;
    size_t size = 0;
    bool reported = false;
  };
  Status Progress();
  Status ReadAcks(int s);
  void WriteChunks(int s);
  void Fail(int s, const std::string& why);

  std::vector<Stream> streams_;
  StripeSender sender_;
  std::deque<Message> msgs_;  // by message index from msgs_base_
  uint64_t msgs_base_ = 0;
  size_t open_ = 0;
  size_t max_outstanding_;
  WarnFn warn_;
  std::string last_error_;
};

class SocketRecvConnection final : public RecvConnection {
 public:
  SocketRecvConnection(std::vector<Fd> fds, size_t max_outstanding, WarnFn warn);

  Result<std::optional<RequestId>> Recv(void* data, size_t capacity, int tag) override;
  Result<TestResult> Test(RequestId id) override;

  const StripeReceiver& receiver() const { return receiver_; }

 private:
  struct Stream {
    Fd fd;
    std::array<uint8_t, kDataHeaderBytes> hdr{};
    size_t hdr_off = 0;
    bool in_payload = false;
    DataHeader h;
    Placement place;
    size_t poff = 0;
    std::array<uint8_t, kAckBytes> out{};
    size_t out_off = 0;
    size_t out_len = 0;
    uint64_t out_cum = 0;
  };
  struct Message {
    uint8_t* data = nullptr;
    bool reported = false;
  };
  Status Progress();
  Status ReadChunks(int s);
  void FlushAcks();
  bool WriteAck(int s);  // false when the stream failed
  void Fail(int s, const std::string& why);

  std::vector<Stream> streams_;
  StripeReceiver receiver_;
  std::deque<Message> msgs_;
  uint64_t msgs_base_ = 0;
  size_t open_ = 0;
  size_t max_outstanding_;
  WarnFn warn_;
  bool ack_dirty_ = false;
  bool ack_broadcast_ = false;
  int ack_hint_ = 0;
  uint64_t ack_written_cum_ = 0;  // the cumulative ack the sender can have read
  std::vector<uint8_t> scratch_;  // duplicate payloads are read into it and dropped
  std::string last_error_;
};

}  // namespace lockstep::nccl
