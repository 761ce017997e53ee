// AgentConfig: the node agent's configuration, parsed from agent.yaml (the
// operator renders it into a ConfigMap; standalone installs write it by hand)
// and overridden by command-line flags. Parsing is strict: unknown keys and
// out-of-range values are InvalidArgument errors naming the key and the
// allowed range. Pure (no file access); thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/common/result.h"

namespace lockstep::agent {

struct HostPort {
  std::string host;  // IPv4 literal
  int port = 0;
  std::string ToString() const { return host + ":" + std::to_string(port); }
  bool operator==(const HostPort&) const = default;
};

struct PeerConfig {
  std::string name;
  std::string address;  // IPv4 literal
  int port = 0;         // 0 = the agent's probe.port
  std::string public_key{};  // optional: its Ed25519 node key, base64 (verifies its gossip)
  bool operator==(const PeerConfig&) const = default;
};

struct AgentConfig {
  std::string policy = "default";
  std::string node_name;
  struct {
    int port = 7311;  // 0 = pick a free port (tests)
    int interval_ms = 20;
    int peers_per_node = 16;
    int miss_threshold = 3;
  } probe;
  struct {
    bool enabled = true;
    int window_seconds = 2;
    bool discipline_host_clock = false;
    int64_t max_error_bound_ns = 1000;
    int64_t asymmetry_allowance_ns = 100;  // added to every error bound (see the CRD)
  } clock_sync;
  struct {
    bool enabled = true;
    int readmit_after_seconds = 2;
    int max_hold_down_seconds = 300;
  } failover;
  int flap_alert_per_hour = 8;
  bool load_balancing = true;
  std::string probe_key_file = "/etc/lockstep/probe-key/key";
  // This node's Ed25519 signing key (32 raw bytes); "" = a fresh key pair at
  // every start (published in FabricHealth status.nodePublicKey).
  std::string node_key_file;
  HostPort health_addr{"0.0.0.0", 9610};
  HostPort time_api_addr{"127.0.0.1", 9611};
  std::string bind_address = "0.0.0.0";  // probe socket; flag only
  std::vector<PeerConfig> peers;
};

// Parses agent.yaml text. `source` names the file in error messages.
Result<AgentConfig> ParseAgentConfig(const std::string& yaml_text, const std::string& source);

// Parses a peers file: either a YAML list of {name, address[, port]} or a map
// with a single `peers:` key holding that list.
Result<std::vector<PeerConfig>> ParsePeers(const std::string& yaml_text, const std::string& source);

// Parses "a.b.c.d:port" (port 0..65535). `what` names the key in errors.
Result<HostPort> ParseHostPort(const std::string& text, const std::string& what);

// Checks what only holds after flags were applied: a node name is set, peer
// names are unique and do not collide on the wire.
Status ValidateAgentConfig(const AgentConfig& config);

}  // namespace lockstep::agent
