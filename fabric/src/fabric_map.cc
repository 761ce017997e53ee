#include "lockstep/fabric/fabric_map.h"

namespace lockstep::fabric {

std::string ToString(const Link& link) { return link.from + ">" + link.to; }

std::string RailEnd(const std::string& host, int rail) { return host + "/rail" + std::to_string(rail); }

void FabricMap::SetLeaf(const std::string& host, int rail, const std::string& leaf) { leaf_[{host, rail}] = leaf; }

void FabricMap::SetSpine(const std::string& source, const PathKey& path, const std::string& spine) {
  spine_[{source, path}] = spine;
}

void FabricMap::SetRoute(const std::string& source, const PathKey& path, std::vector<Link> links) {
  route_[{source, path}] = std::move(links);
}

std::optional<std::string> FabricMap::LeafOf(const std::string& host, int rail) const {
  auto it = leaf_.find({host, rail});
  if (it == leaf_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> FabricMap::SpineOf(const std::string& source, const PathKey& path) const {
  auto it = spine_.find({source, path});
  if (it == spine_.end()) return std::nullopt;
  return it->second;
}

std::vector<Link> FabricMap::Route(const std::string& source, const PathKey& path) const {
  if (auto it = route_.find({source, path}); it != route_.end()) return it->second;
  const auto from_leaf = LeafOf(source, path.rail);
  if (!from_leaf) return {};
  const std::string src = RailEnd(source, path.rail), dst = RailEnd(path.peer, path.rail);
  const auto to_leaf = LeafOf(path.peer, path.rail);
  if (!to_leaf) return {{src, *from_leaf}};
  if (*from_leaf == *to_leaf) return {{src, *from_leaf}, {*from_leaf, dst}};
  const std::string spine = SpineOf(source, path).value_or("*");
  return {{src, *from_leaf}, {*from_leaf, spine}, {spine, *to_leaf}, {*to_leaf, dst}};
}

FabricMap LayoutMap(const std::vector<std::string>& hosts, int rails, int leaves, RailLayout layout,
                    const std::string& leaf_prefix) {
  FabricMap map;
  if (rails < 1 || leaves < 1) return map;
  const bool rail_layout = layout == RailLayout::kRail && leaves % rails == 0;
  const int groups = leaves / rails;
  const int n = static_cast<int>(hosts.size());
  for (int h = 0; h < n; ++h) {
    for (int r = 0; r < rails; ++r) {
      const int leaf = rail_layout ? (h * groups / n) * rails + r : (h + r) % leaves;
      map.SetLeaf(hosts[h], r, leaf_prefix + std::to_string(leaf));
    }
  }
  return map;
}

}  // namespace lockstep::fabric
