// AgentLink: the plugin's side of the node agent's local endpoint (an adapter:
// a Unix stream socket speaking agent_wire.h's lines).
//
// What it gives the connections:
//   - the agent's path verdicts (fabric/'s states, hold-down included) as an
//     AgentState snapshot with a generation number that grows on each change;
//   - fabric time: CLOCK_MONOTONIC_RAW plus the agent's offset, while the
//     agent's clock sync is LOCKED (else 0: chunks go unstamped);
// and what it takes from them: one StreamReport per stream per connection,
// written to the agent every report_every.
//
// Never blocks NCCL: Start() (at init) waits at most connect_timeout for the
// first state; afterwards every call is non-blocking and Poll() does its I/O
// only when due and only if no other thread is doing it (try_lock). Without
// an agent (no socket, refused, a malformed reply, the agent going away) the
// link says so once through `info` and the plugin carries on without
// verdicts or fabric time (the first slice's behaviour); it tries again every
// retry_every and says when it is back.
//
// Memory: at most kMaxAgentLine x 128 bytes buffered each way, one report
// record per stream of each open connection (at most max_connections).
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lockstep/nccl/agent_wire.h"
#include "lockstep/nccl/transport.h"

namespace lockstep::nccl {

struct AgentLinkOptions {
  std::string socket_path = kDefaultAgentSocket;
  std::string job = "unknown";
  int connect_timeout_ms = 200;
  // How often the plugin asks for the agent's verdicts: a path the agent
  // finds down is parked at most this much later (LOCKSTEP_NCCL_AGENT_POLL_MS).
  int query_every_ms = 10;
  int report_every_ms = 1000;
  int retry_every_ms = 5000;
  size_t max_connections = 1024;
};

// From the environment:
//   LOCKSTEP_NCCL_AGENT_SOCKET  the agent's socket (default /run/lockstep/nccl.sock; "off": no agent)
//   LOCKSTEP_JOB                the job name in reports (else LOCKSTEP_NCCL_JOB, else "unknown")
//   LOCKSTEP_NCCL_AGENT_POLL_MS how often to ask for the agent's verdicts (1..1000, default 10)
// nullopt when the agent is turned off; InvalidArgument for a bad poll interval.
Result<std::optional<AgentLinkOptions>> AgentLinkOptionsFromEnv(const std::function<const char*(const char*)>& env);

class AgentLink {
 public:
  AgentLink(AgentLinkOptions options, WarnFn info, WarnFn warn);
  ~AgentLink();
  AgentLink(const AgentLink&) = delete;
  AgentLink& operator=(const AgentLink&) = delete;

  // Connects and waits (at most connect_timeout) for the first state; logs
  // one line either way. True when the agent answered.
  bool Start();
  // Non-blocking progress when due: reconnect, query, read, report.
  void Poll();

  bool connected() const { return connected_.load(); }
  // The latest state (empty paths and no fabric time when not connected).
  std::shared_ptr<const AgentState> State() const;
  uint64_t generation() const { return generation_.load(); }
  // Fabric time now in ns while the agent's clock sync is LOCKED, else 0.
  uint64_t FabricNowNs() const;

  // The latest reports of one end (`send`) of connection `conn` (replacing
  // the previous ones; both ends of a connection share its id).
  void Report(uint64_t conn, bool send, std::vector<StreamReport> streams);
  // That end of the connection is gone (a close line goes to the agent once both are).
  void Close(uint64_t conn, bool send);

  void Info(const std::string& m) const {
    if (info_) info_(m);
  }
  const AgentLinkOptions& options() const { return o_; }

 private:
  bool Connect();                     // REQUIRES io_mu_
  void Drop(const std::string& why);  // REQUIRES io_mu_
  bool ReadLines();                   // REQUIRES io_mu_; false when the link dropped
  void Flush();                       // REQUIRES io_mu_
  void Queue(const std::string& s);   // REQUIRES io_mu_
  void Adopt(AgentState s);

  AgentLinkOptions o_;
  WarnFn info_, warn_;

  std::mutex io_mu_;  // the socket and its buffers
  int fd_ = -1;
  std::string in_, out_;
  AgentStateReader reader_;
  bool query_outstanding_ = false;
  int64_t next_query_ns_ = 0, next_report_ns_ = 0, next_retry_ns_ = 0;
  bool said_absent_ = false;
  std::atomic<int64_t> next_due_ns_{0};

  mutable std::mutex mu_;  // state and reports
  std::shared_ptr<const AgentState> state_;
  std::map<std::pair<uint64_t, bool>, std::vector<StreamReport>> reports_;
  std::vector<uint64_t> closed_;
  std::atomic<bool> connected_{false};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> locked_{false};
  std::atomic<int64_t> offset_ns_{0};
};

// CLOCK_MONOTONIC_RAW in ns (the agent's local clock).
int64_t RawNowNs();

}  // namespace lockstep::nccl
