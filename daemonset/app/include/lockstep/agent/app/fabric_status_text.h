// The text `lockstep-agent fabric status` prints from GET /fabric's JSON
// (FabricService::StatusJson): a summary, a rails table, a paths table
// (state, loss, one-way delay and round-trip p50/p99, probes) and a peers
// table (which path carries each peer's traffic: static ECMP or a pin, with
// its route). Missing fields print as "-". Pure; thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace lockstep::agent {

std::string FormatFabricStatus(const nlohmann::json& status);

}  // namespace lockstep::agent
