// CongestionPublisher: always-on congestion localisation over this node's
// paths (fabric::CongestionLocator). At each fabric publish it takes every
// path's window (one-way delay p50/p99, loss), maps the path onto the links
// it crosses (the topology given to the agent, --fabric-topology; without
// one, or for a rail it does not list, the rail's uplink to its gateway),
// and publishes:
//   lockstep_fabric_link_congested{link}   1 while the link is flagged
//                                          (bounded: the links of this
//                                          node's paths that were ever
//                                          flagged; 0 once cleared)
//   lockstep_fabric_path_bad{peer,rail}    1 while the path rises alone
//   lockstep_fabric_paths_rising           paths above their baseline
// the "congestion" block of `lockstep-agent fabric status`, a log line per
// link flagged or cleared and per bad path, and the new findings for an
// Event (TakeFindings).
//
// Thread-safety: Observe() from the service thread (the publisher's);
// TakeFindings() from any thread.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/agent/fabric_setup.h"
#include "lockstep/common/metrics.h"
#include "lockstep/fabric/congestion.h"
#include "lockstep/fabric/fabric_map.h"
#include "lockstep/fabric/path_monitor.h"

namespace lockstep::agent {

// A link newly flagged congested, or a path newly bad: what an Event says.
struct CongestionFinding {
  enum class Kind { kLinkCongested, kBadPath };
  Kind kind = Kind::kLinkCongested;
  std::vector<std::string> links{};  // kLinkCongested: the link (or links the probes cannot tell apart)
  int rising = 0, paths = 0;         // kLinkCongested: its rising paths of those judged
  std::string path{};                // kBadPath: "<peer>/rail<r>/path<i>"
  Nanos p50{}, base_p50{};           // kBadPath
};

// Congestion localisation as of the last publish: what the FabricCongested
// condition says (CongestionViewOf: from Observe's status block).
struct FabricCongestionView {
  int judged = 0;                        // paths judged against their baselines
  std::vector<std::string> links{};      // flagged congested ("l0>s0"), sorted
  std::vector<std::string> bad_paths{};  // rising alone ("<peer>/rail<r>/path<i>"), sorted
  bool operator==(const FabricCongestionView&) const = default;
};
FabricCongestionView CongestionViewOf(const nlohmann::json& status_block);

class CongestionPublisher {
 public:
  // `topology`: the fabric's map as far as known (may be empty). REQUIRES:
  // registry outlives the publisher.
  CongestionPublisher(std::string self, const FabricSetup& setup, fabric::FabricMap topology,
                      fabric::CongestionOptions options, metrics::Registry& registry);

  // One round over every path's current view; returns the status block.
  nlohmann::json Observe(const std::vector<fabric::PathView>& views);

  // The findings raised since the last call (at most 256 kept).
  std::vector<CongestionFinding> TakeFindings();

  // The links this node's path crosses (its topology, or its uplink).
  std::vector<fabric::Link> LinksOf(const fabric::PathKey& path) const;

 private:
  std::string self_;
  FabricSetup setup_;
  fabric::FabricMap map_;
  bool topology_given_;
  fabric::CongestionLocator locator_;
  metrics::Family& congested_;
  metrics::Family& bad_;
  metrics::Family& rising_;
  std::set<std::string> flagged_;                   // link labels now set to 1
  std::set<std::string> ever_flagged_;              // link labels exported (kept at 0 after)
  std::map<std::string, fabric::PathKey> bad_now_;  // by id
  std::mutex mu_;
  std::vector<CongestionFinding> findings_;  // GUARDED_BY(mu_)
};

}  // namespace lockstep::agent
