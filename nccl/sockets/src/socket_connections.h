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
#include "lockstep/nccl/agent_link.h"
#include "lockstep/nccl/delay_stats.h"
#include "lockstep/nccl/frame.h"
#include "lockstep/nccl/stripe_receiver.h"
#include "lockstep/nccl/stripe_sender.h"
#include "lockstep/nccl/traffic_control.h"
#include "lockstep/nccl/transport.h"

namespace lockstep::nccl {

// Who a connection is, for the agent's verdicts and the reports.
struct ConnIdentity {
  uint64_t id = 0;                   // the connection id of the hellos (the same at both ends)
  std::vector<Ipv4> local{};         // per stream: the local rail address it leaves from
  std::vector<Ipv4> remote{};        // per stream: the peer's address it goes to
  Ipv4 peer_host{};                  // the peer's host address (from the handle; 0 unknown)
  std::shared_ptr<AgentLink> agent;  // null: no agent
};

// How often the sender's traffic control looks at the delays.
inline constexpr int64_t kTrafficControlEveryNs = 50'000'000;
// A receiver repeats its current ack this often (on the next stream each
// time) while receives are open and for kAckRefreshForNs after the last change.
inline constexpr int64_t kAckRefreshNs = 20'000'000;
inline constexpr int64_t kAckRefreshForNs = 1'000'000'000;
// Acks carry a stream's delay only if it had a sample this recently.
inline constexpr int64_t kDelayFreshNs = 200'000'000;
// How often the sender looks at its streams' TCP acks (AckStalled).
inline constexpr int64_t kStallCheckEveryNs = 10'000'000;
// How often connections hand their reports to the agent link.
inline constexpr int64_t kReportEveryNs = 500'000'000;

class SocketSendConnection final : public SendConnection {
 public:
  // REQUIRES: fds.size() == nstreams, options valid for it.
  SocketSendConnection(std::vector<Fd> fds, StripeOptions options, size_t max_outstanding, WarnFn warn,
                       ConnIdentity who = {}, TrafficControlOptions tc = {}, int ack_timeout_ms = 0);
  ~SocketSendConnection() override;

  Result<std::optional<RequestId>> Send(const void* data, size_t size, int tag) override;
  Result<TestResult> Test(RequestId id) override;

  const StripeSender& sender() const { return sender_; }
  const TrafficControl& traffic() const { return tc_; }

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
  // Finishes the stream's partial chunk, then takes and writes at most one
  // more; true when it took one and wrote all of it (it may take another).
  bool WriteChunk(int s);
  void Fail(int s, const std::string& why);
  void Steer();                   // the agent's verdicts, stalled streams, traffic control and reports, when due
  bool CheckStalls(int64_t now);  // true when a stream's stalled state changed
  void Gate();                    // park and re-admit by the agent's verdicts and the stalls

  std::vector<Stream> streams_;
  StripeSender sender_;
  StripeOptions options_;
  ConnIdentity who_;
  TrafficControl tc_;
  uint64_t agent_gen_ = 0;
  int rr_ = 0;  // the stream that takes the first chunk of the next round
  int ack_timeout_ms_ = 0;
  std::vector<bool> stalled_;             // AckStalled, per stream
  std::vector<int64_t> in_flight_since_;  // per stream: since when TCP has had data in flight (0: none)
  bool regate_ = false;                   // a stream failed: gate the others again
  int64_t next_stall_check_ns_ = 0;
  std::vector<std::optional<int64_t>> owd_;       // the latest delay per stream from acks, since the last update
  std::vector<std::optional<int64_t>> last_owd_;  // the latest ever (reports)
  std::vector<uint64_t> bytes_, chunks_;
  uint64_t failovers_ = 0;
  int64_t next_tc_ns_ = 0, next_report_ns_ = 0;
  std::deque<Message> msgs_;  // by message index from msgs_base_
  uint64_t msgs_base_ = 0;
  size_t open_ = 0;
  size_t max_outstanding_;
  WarnFn warn_;
  std::string last_error_;
};

class SocketRecvConnection final : public RecvConnection {
 public:
  SocketRecvConnection(std::vector<Fd> fds, size_t max_outstanding, WarnFn warn, ConnIdentity who = {});
  ~SocketRecvConnection() override;

  Result<std::optional<RequestId>> Recv(void* data, size_t capacity, int tag) override;
  Result<TestResult> Test(RequestId id) override;

  const StripeReceiver& receiver() const { return receiver_; }
  const DelayStats& delays(int stream) const { return delays_[stream]; }

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
  void ReportIfDue();

  std::vector<Stream> streams_;
  StripeReceiver receiver_;
  ConnIdentity who_;
  std::vector<DelayStats> delays_;
  std::vector<int64_t> delay_at_;  // when each stream's last delay sample was taken (raw ns)
  std::vector<uint64_t> bytes_, chunks_;
  uint64_t failovers_ = 0;
  int owd_rr_ = 0;  // whose delay the next ack carries (round robin)
  int64_t last_ack_ns_ = 0, refresh_until_ns_ = 0;
  int64_t next_report_ns_ = 0;
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
