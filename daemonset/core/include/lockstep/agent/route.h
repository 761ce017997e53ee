// Host routes as values: IPv4 prefixes, nexthops, the routes the agent owns
// and interface states, with their parsing and formatting. The vocabulary of
// the RouteActuator port (lockstep/agent/ports/route_actuator.h) and of the
// pure planning over it (route_reconcile.h, fabric_setup.h). Plain values:
// thread-compatible.
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "lockstep/common/result.h"

namespace lockstep::agent {

// The routing protocol number on every route the agent owns (`ip route show
// proto 211`). Naming it in /etc/iproute2/rt_protos.d/ is optional.
inline constexpr uint8_t kProtoLockstep = 211;
inline constexpr uint32_t kMainTable = 254;  // RT_TABLE_MAIN
// TCP's minimum retransmission timeout on owned routes (Linux default: 200 ms),
// so a stream moved to a healthy rail retransmits soon after the move.
inline constexpr std::chrono::milliseconds kDefaultRtoMin{10};

// An IPv4 prefix, address in host byte order.
struct Ipv4Prefix {
  uint32_t address = 0;
  uint8_t length = 32;
  // "10.0.200.2" (a /32) or "10.0.200.0/24"; host bits must be zero.
  static Result<Ipv4Prefix> Parse(std::string_view text);
  std::string ToString() const;  // "10.0.200.2/32"
  auto operator<=>(const Ipv4Prefix&) const = default;
};

// Parses a dotted IPv4 address into host byte order / formats one.
Result<uint32_t> ParseIpv4(std::string_view text);
std::string FormatIpv4(uint32_t address);

struct Nexthop {
  uint32_t gateway = 0;   // host byte order; 0: on-link, no gateway
  std::string interface;  // e.g. "rail1"
  // RTNH_F_ONLINK: the gateway is reachable on the interface even though no
  // connected subnet covers it (a leaf's /32 gateway, as in netlab).
  bool onlink = false;
  auto operator<=>(const Nexthop&) const = default;
};

// A route the agent owns. Two owned routes with the same destination are the
// same kernel route (one table, priority 0, tos 0).
struct OwnedRoute {
  Ipv4Prefix destination;
  Nexthop nexthop;
  uint32_t source = 0;  // preferred source address; 0: none
  // Locked RTAX_RTO_MIN; 0: none (the kernel default applies).
  std::chrono::milliseconds rto_min = kDefaultRtoMin;
  bool operator==(const OwnedRoute&) const = default;
  // "10.0.200.2/32 via 10.0.1.254 dev rail1 src 10.0.200.1 rto_min 10ms"
  std::string ToString() const;
};

struct InterfaceState {
  std::string name;
  int index = 0;
  bool up = false;  // administratively up and running (carrier/operstate up)
  bool operator==(const InterfaceState&) const = default;
};

}  // namespace lockstep::agent
