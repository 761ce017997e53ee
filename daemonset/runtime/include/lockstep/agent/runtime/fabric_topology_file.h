// The fabric topology an agent may be given (lockstep-agent run
// --fabric-topology FILE): the leaf each node's rails hang off and, where
// ECMP path discovery (or the fabric's manager) knows it, the spine a path
// crosses. Congestion localisation names links with it
// (congestion_publisher.h). JSON:
//
//   {"leaves": {"h0": ["l0", "l1"], "h1": ["l1", "l0"]},       // rail order
//    "spines": [{"from": "h0", "to": "h1", "rail": 0, "path": 0, "spine": "s1"}],
//    "routes": [{"from": "h0", "to": "h2", "rail": 0, "path": 0,
//                "nodes": ["h0/rail0", "l0", "s1", "l3", "h2/rail1"]}]}
//
// "spines" and "routes" are optional; a route (what a traceroute of the
// path found: every node it crosses, its ends included) wins over leaves and
// spines. Names are 1 to 63 characters of [A-Za-z0-9._-] ("/" too in a
// route's nodes).
// Pure; errors (InvalidArgument) name the field.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/common/result.h"
#include "lockstep/fabric/fabric_map.h"

namespace lockstep::agent {

Result<fabric::FabricMap> ParseFabricTopology(const nlohmann::json& j, const std::string& source);

// Reads and parses `text` (the file's contents).
Result<fabric::FabricMap> ParseFabricTopologyText(const std::string& text, const std::string& source);

}  // namespace lockstep::agent
