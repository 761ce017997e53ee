// NcclEndpoint: the node agent's side of the NCCL plugin's local protocol
// (nccl/core's agent_wire.h), on the LineHandler port (the binary serves it
// on a Unix socket, UnixLineServer).
//
// To the plugins: their path verdicts and fabric time (`query` -> the
// AgentState the source builds: fabric/'s path states, usable as
// fabric::Usable says, keyed by rail address and peer host address; the
// clock-sync offset against CLOCK_MONOTONIC_RAW while LOCKED).
// From the plugins: per-stream reports (`stream` lines), turned into metrics
// per job and connection, with bounded label sets:
//   lockstep_nccl_bytes_total{job,peer,rail,direction}   counter
//   lockstep_nccl_owd_seconds{job,peer,rail,quantile}     gauge (receivers' in-band one-way delay, 0.5 / 0.99)
//   lockstep_nccl_failovers_total{job}                    counter (streams lost or parked)
//   lockstep_nccl_rebalances_total{job}                   counter (traffic control weight changes)
//   lockstep_nccl_streams{job,state}                      gauge (up, parked, down, contended)
//   lockstep_nccl_connections{job,direction}              gauge
//   lockstep_nccl_clients                                 gauge (plugin processes connected)
//   lockstep_nccl_label_overflow_total                    counter (reports folded into "other")
// At most max_jobs jobs, max_peers peers and max_rails rails get their own
// label value; the rest are "other". The peer is the peer's host address
// when the plugin knows it (senders), else the stream's remote address.
// Jobs() gives the per-job summary for GET /nccl.
//
// Memory: per client its job; per open connection one record per stream
// (at most max_connections connections; reports beyond are counted, not kept).
// Thread-compatible (the line server's thread); Jobs() takes the lock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/agent/ports/line_handler.h"
#include "lockstep/common/clock.h"
#include "lockstep/common/metrics.h"
#include "lockstep/nccl/agent_wire.h"

namespace lockstep::agent {

struct NcclEndpointOptions {
  // Queries within this long of the last answer get the same answer (every
  // plugin process asks every 100 ms; the state is the fabric status, copied
  // and converted). Needs the clock (constructor).
  Nanos state_ttl = std::chrono::milliseconds(50);
  size_t max_jobs = 16;
  size_t max_peers = 256;
  size_t max_rails = 16;
  size_t max_connections = 4096;
};

class NcclEndpoint final : public LineHandler {
 public:
  using StateSource = std::function<nccl::AgentState()>;  // thread-safe
  // REQUIRES: registry outlives the endpoint.
  // `clock` (may be null: no reuse of answers) must outlive the endpoint.
  NcclEndpoint(StateSource source, metrics::Registry& registry, NcclEndpointOptions options = {},
               const Clock* clock = nullptr);

  void OnOpen(LineClient client) override;
  std::string OnLine(LineClient client, const std::string& line) override;
  void OnClose(LineClient client) override;

  // Per job: connections, bytes sent and received, streams by state,
  // failovers, rebalances, and per peer/rail the latest one-way delays.
  nlohmann::json Jobs() const;
  size_t connections() const;

 private:
  struct StreamLast {
    uint64_t bytes = 0;
    std::string state;
    std::string peer, rail;
  };
  struct Conn {
    LineClient client = 0;
    std::string job;
    bool send = true;
    uint64_t failovers = 0, rebalances = 0;
    std::map<int, StreamLast> streams{};
  };
  void Apply(LineClient client, const nccl::StreamReport& r);
  void Forget(LineClient client, uint64_t conn);  // both directions
  std::string Bounded(std::set<std::string>& seen, size_t max, const std::string& value);

  StateSource source_;
  NcclEndpointOptions o_;
  const Clock* clock_;
  std::string answer_;  // the last query's reply (the endpoint's thread only)
  MonoTime answered_at_{};
  mutable std::mutex mu_;
  std::map<LineClient, std::string> jobs_;  // client -> job (from hello)
  // By connection id and direction: both ends of a connection share its id,
  // and both may be in one process (or on one node).
  std::map<std::pair<uint64_t, bool>, Conn> conns_;
  std::set<std::string> seen_jobs_, seen_peers_, seen_rails_;
  struct Delay {
    int64_t p50 = 0, p99 = 0;
  };
  std::map<std::string, std::map<std::string, Delay>> delays_;       // job -> "peer/rail" -> latest
  std::map<std::string, std::pair<uint64_t, uint64_t>> job_bytes_;   // job -> (sent, received)
  std::map<std::string, std::pair<uint64_t, uint64_t>> job_events_;  // job -> (failovers, rebalances)

  metrics::Family& bytes_;
  metrics::Family& owd_;
  metrics::Family& failovers_;
  metrics::Family& rebalances_;
  metrics::Family& streams_;
  metrics::Family& connections_;
  metrics::Family& clients_;
  metrics::Family& overflow_;
};

// The AgentState for the plugins from the fabric service's status
// (FabricService::StatusJson: host_address, peers' host addresses, paths'
// rail, peer, path and state; `rails`: each rail's address in rail order,
// host order as RailInfo keeps it) and the clock: `locked` and `offset_ns`
// (fabric time - CLOCK_MONOTONIC_RAW). A path is usable when fabric::Usable
// says so for its state. Pure. A status without fabric failover (null) gives
// no rails and no paths.
nccl::AgentState NcclStateFromFabric(const nlohmann::json& fabric_status, const std::vector<uint32_t>& rails,
                                     bool locked, int64_t offset_ns, int64_t bound_ns);

}  // namespace lockstep::agent
