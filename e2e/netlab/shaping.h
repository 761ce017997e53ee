// `netlab shape`: which ends of a link a direction means, and the tc commands
// for a shaper (pure; the caller runs them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "netlab/state.h"
#include "netlab/topology.h"

namespace lockstep::netlab {

// "egress" and "ingress" are aliases of "up" and "down"; others pass through.
std::string ShapeDirection(const std::string& dir);

// The egress ends a direction shapes: up = end a, down = end b, both = a and b.
// key names the shaper in state.json: "LINK:up" or "LINK:down".
struct ShapeEnd {
  std::string key;
  Endpoint end;
};
std::vector<ShapeEnd> ShapeEnds(const Link& lk, const std::string& dir);

// The bucket when --burst is not given: ~1 ms at the rate, at least 3028 bytes.
int64_t DefaultBurst(double rate_bps);

// The shaper for one end (latency only applies to tbf).
Shaper MakeShaper(const Endpoint& e, const std::string& qdisc, double rate_bps, int64_t burst_bytes,
                  const std::string& latency);

// tc commands that install the shaper as the root qdisc (tbf, or htb with one
// class), with a strict-priority band for DSCP CS6 (network control: the
// agents' fabric probes) under it; see shaping.cc.
std::vector<std::vector<std::string>> ShapeArgvs(const Shaper& s);

// tc command that removes whatever root qdisc the end has.
std::vector<std::string> ClearShapeArgv(const Endpoint& e);

}  // namespace lockstep::netlab
