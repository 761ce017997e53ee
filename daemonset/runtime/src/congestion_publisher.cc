#include "lockstep/agent/runtime/congestion_publisher.h"

#include <algorithm>
#include <utility>

#include "lockstep/agent/route.h"
#include "lockstep/common/log.h"

namespace lockstep::agent {
namespace {

constexpr size_t kMaxFindings = 256;

std::string Join(const std::vector<fabric::Link>& links) {
  std::string out;
  for (const fabric::Link& l : links) out += (out.empty() ? "" : ",") + fabric::ToString(l);
  return out;
}

nlohmann::json NsOrNull(std::optional<Nanos> d) {
  return d ? nlohmann::json(static_cast<int64_t>(d->count())) : nlohmann::json(nullptr);
}

std::string Us(std::optional<Nanos> d) {
  return d ? std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(*d).count()) : "-";
}

std::string RailLabel(const FabricSetup& setup, int rail) {
  return rail >= 0 && rail < static_cast<int>(setup.rails.size()) ? setup.rails[rail].name : std::to_string(rail);
}

}  // namespace

CongestionPublisher::CongestionPublisher(std::string self, const FabricSetup& setup, fabric::FabricMap topology,
                                         fabric::CongestionOptions options, metrics::Registry& registry)
    : self_(std::move(self)),
      setup_(setup),
      map_(std::move(topology)),
      topology_given_(map_.rails_known() > 0),
      locator_(options),
      congested_(registry.Gauge("lockstep_fabric_link_congested",
                                "1 while the link is flagged congested: the one-way delays (or loss) of the paths "
                                "that cross it rose above their own baselines together; 0 after it cleared",
                                {"link"})),
      bad_(registry.Gauge("lockstep_fabric_path_bad",
                          "1 while the path's one-way delay (or loss) rose above its baseline alone (no congested "
                          "link explains it)",
                          {"peer", "rail"})),
      rising_(registry.Gauge("lockstep_fabric_paths_rising",
                             "Paths whose one-way delay or loss is above their own baseline (congestion judge)")) {
  // A rail the topology does not place: its uplink, to the leaf named by its
  // gateway (one gateway per leaf on an L3 fabric).
  for (size_t r = 0; r < setup_.rails.size(); ++r) {
    const int rail = static_cast<int>(r);
    if (map_.LeafOf(self_, rail)) continue;
    const uint32_t gw = setup_.rails[r].gateway.gateway;
    map_.SetLeaf(self_, rail, gw ? "gw-" + FormatIpv4(gw) : setup_.rails[r].name + "-leaf");
  }
  rising_.Set(0);
}

std::vector<fabric::Link> CongestionPublisher::LinksOf(const fabric::PathKey& path) const {
  return map_.Route(self_, path);
}

nlohmann::json CongestionPublisher::Observe(const std::vector<fabric::PathView>& views) {
  std::vector<fabric::PathDelays> paths;
  std::map<std::string, fabric::PathKey> keys;
  paths.reserve(views.size());
  for (const fabric::PathView& v : views) {
    const std::string id = fabric::ToString(v.path);
    keys[id] = v.path;
    paths.push_back({id, LinksOf(v.path), v.stats.owd_p50, v.stats.owd_p99, v.stats.owd_samples, v.stats.loss});
  }
  const fabric::CongestionReport report = locator_.Judge(paths);
  rising_.Set(report.rising);

  std::vector<CongestionFinding> found;
  std::set<std::string> flagged;
  nlohmann::json links = nlohmann::json::array();
  for (const fabric::LinkCongestion& c : report.links) {
    std::vector<std::string> names;
    for (const fabric::Link& l : c.links) names.push_back(fabric::ToString(l));
    for (const std::string& n : names) {
      flagged.insert(n);
      ever_flagged_.insert(n);
      congested_.Set({n}, 1);
    }
    const bool fresh = !flagged_.count(names.front());
    if (fresh) {
      log::Warn("fabric link congested: the one-way delays of the paths crossing it rose together",
                {{"link", Join(c.links)},
                 {"rising_paths", std::to_string(c.rising_paths.size())},
                 {"paths", std::to_string(c.paths)}});
      found.push_back({.kind = CongestionFinding::Kind::kLinkCongested,
                       .links = names,
                       .rising = static_cast<int>(c.rising_paths.size()),
                       .paths = c.paths});
    }
    links.push_back(
        {{"links", names}, {"rising", c.rising_paths.size()}, {"paths", c.paths}, {"rising_paths", c.rising_paths}});
  }
  for (const std::string& n : flagged_) {
    if (flagged.count(n)) continue;
    congested_.Set({n}, 0);
    log::Info("fabric link no longer congested", {{"link", n}});
  }
  flagged_ = std::move(flagged);

  std::map<std::string, fabric::PathKey> bad_now;
  nlohmann::json bad = nlohmann::json::array();
  for (const fabric::BadPath& b : report.bad_paths) {
    const fabric::PathKey& key = keys.at(b.id);
    bad_now[b.id] = key;
    bad_.Set({key.peer, RailLabel(setup_, key.rail)}, 1);
    if (!bad_now_.count(b.id)) {
      log::Warn("fabric path delay rose alone (no congested link explains it)", {{"path", b.id},
                                                                                 {"owd_p50_us", Us(b.p50)},
                                                                                 {"baseline_p50_us", Us(b.base_p50)},
                                                                                 {"owd_p99_us", Us(b.p99)},
                                                                                 {"baseline_p99_us", Us(b.base_p99)}});
      found.push_back({.kind = CongestionFinding::Kind::kBadPath,
                       .path = b.id,
                       .p50 = b.p50.value_or(Nanos(0)),
                       .base_p50 = b.base_p50.value_or(Nanos(0))});
    }
    bad.push_back({{"path", b.id},
                   {"owd_p50_ns", NsOrNull(b.p50)},
                   {"owd_p99_ns", NsOrNull(b.p99)},
                   {"baseline_p50_ns", NsOrNull(b.base_p50)},
                   {"baseline_p99_ns", NsOrNull(b.base_p99)},
                   {"loss", b.loss}});
  }
  for (const auto& [id, key] : bad_now_) {
    if (bad_now.count(id)) continue;
    if (keys.count(id)) {
      bad_.Set({key.peer, RailLabel(setup_, key.rail)}, 0);
    } else {
      bad_.Remove({key.peer, RailLabel(setup_, key.rail)});  // the peer is gone: its series too
    }
  }
  bad_now_ = std::move(bad_now);

  if (!found.empty()) {
    std::lock_guard lock(mu_);
    for (CongestionFinding& f : found) {
      if (findings_.size() < kMaxFindings) findings_.push_back(std::move(f));
    }
  }
  return {{"topology", topology_given_ ? "given" : "uplinks only"},
          {"judged", report.judged},
          {"rising", report.rising},
          {"congested_links", links},
          {"bad_paths", bad}};
}

FabricCongestionView CongestionViewOf(const nlohmann::json& block) {
  FabricCongestionView v{.judged = block.value("judged", 0)};
  for (const auto& c : block.value("congested_links", nlohmann::json::array())) {
    for (const auto& l : c.value("links", nlohmann::json::array())) v.links.push_back(l.get<std::string>());
  }
  for (const auto& b : block.value("bad_paths", nlohmann::json::array())) v.bad_paths.push_back(b.value("path", ""));
  std::sort(v.links.begin(), v.links.end());
  std::sort(v.bad_paths.begin(), v.bad_paths.end());
  return v;
}

std::vector<CongestionFinding> CongestionPublisher::TakeFindings() {
  std::lock_guard lock(mu_);
  return std::exchange(findings_, {});
}

}  // namespace lockstep::agent
