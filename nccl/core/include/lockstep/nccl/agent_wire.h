// The local protocol between the NCCL plugin and the node agent, as values.
//
// A Unix stream socket (default /run/lockstep/nccl.sock), lines of
// space-separated key=value tokens after a verb; at most kMaxAgentLine bytes
// a line, no spaces inside values. The plugin writes:
//
//   hello v=1 job=<job> pid=<pid>
//   query                       -> the agent answers with an AgentState:
//       state v=1 locked=<0|1> offset_ns=<fabric - CLOCK_MONOTONIC_RAW> bound_ns=<n> host=<ipv4>
//       rail addr=<ipv4>        (one per rail of the agent, in rail order)
//       path rail=<ipv4> peer=<ipv4> index=<i> state=<up|down|...> usable=<0|1>
//       end
//   stream conn=<id> dir=<send|recv> stream=<s> rail=<ipv4> remote=<ipv4> peer=<ipv4>
//          bytes=<n> chunks=<n> owd_p50_ns=<n|-> owd_p99_ns=<n|-> failovers=<n>
//          rebalances=<n> state=<up|parked|down|contended>
//                               (one per stream of each connection, every second)
//   close conn=<id>
//
// `path` lines are the agent's fabric/ verdicts (PathMonitor's states;
// usable = fabric::Usable, the agent's hold-down included) keyed by the
// agent's rail address and the peer's host address (the address the plugin
// finds in a listen handle). The agent never writes unless asked.
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/common/result.h"

namespace lockstep::nccl {

inline constexpr size_t kMaxAgentLine = 512;
inline constexpr size_t kMaxAgentPaths = 4096;
inline constexpr char kDefaultAgentSocket[] = "/run/lockstep/nccl.sock";

using Ipv4 = std::array<uint8_t, 4>;  // network order

std::string Ipv4String(const Ipv4& a);
std::optional<Ipv4> ParseIpv4(const std::string& s);

// One line: a verb and its key=value tokens.
struct AgentLine {
  std::string verb;
  std::map<std::string, std::string> kv;
  bool operator==(const AgentLine&) const = default;
};
// Without the trailing newline. Errors: too long, a token without '=', an
// empty verb, a repeated key.
Result<AgentLine> ParseAgentLine(const std::string& line);
// REQUIRES: no spaces, '=' or newlines inside keys, none of spaces or newlines in values.
std::string FormatAgentLine(const AgentLine& line);  // with the trailing newline

struct AgentPath {
  Ipv4 rail{};  // the agent's rail address (the plugin's rail of the same address)
  Ipv4 peer{};  // the peer's host address
  int index = 0;
  std::string state;  // fabric::ToString(PathState)
  bool usable = true;
  bool operator==(const AgentPath&) const = default;
};

struct AgentState {
  bool locked = false;    // clock sync LOCKED: offset is fabric time
  int64_t offset_ns = 0;  // fabric time - CLOCK_MONOTONIC_RAW, at the agent
  int64_t bound_ns = 0;   // the error bound of fabric time
  Ipv4 host{};            // this node's host address (0: fabric failover off)
  std::vector<Ipv4> rails{};
  std::vector<AgentPath> paths{};
  bool operator==(const AgentState&) const = default;

  // The path's verdict; nullopt when the agent does not watch it.
  std::optional<bool> Usable(const Ipv4& rail, const Ipv4& peer) const;
};

// The reply to `query`: state, rail..., path..., end (every line with its newline).
std::string EncodeAgentState(const AgentState& s);

// Reads an AgentState from lines fed one at a time (without newlines).
class AgentStateReader {
 public:
  // Returns the state once `end` arrived; nullopt while more lines are due.
  // Errors: a malformed line, a line out of order, too many paths.
  Result<std::optional<AgentState>> Feed(const std::string& line);

 private:
  bool in_state_ = false;
  AgentState cur_;
};

struct StreamReport {
  uint64_t conn = 0;
  bool send = true;
  int stream = 0;
  Ipv4 rail{};
  Ipv4 remote{};
  Ipv4 peer{};  // the peer's host address; 0 unknown
  uint64_t bytes = 0;
  uint64_t chunks = 0;
  std::optional<int64_t> owd_p50_ns, owd_p99_ns;
  uint64_t failovers = 0;
  uint64_t rebalances = 0;
  std::string state = "up";  // up, parked, down, contended
  bool operator==(const StreamReport&) const = default;
};

std::string EncodeStreamReport(const StreamReport& r);
Result<StreamReport> DecodeStreamReport(const AgentLine& line);

}  // namespace lockstep::nccl
