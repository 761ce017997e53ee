#include "netlab/topology.h"

#include <algorithm>
#include <cctype>
#include <regex>

#include "netlab/parse.h"

namespace lockstep::netlab {
namespace {

using nlohmann::ordered_json;

std::string Str(int v) { return std::to_string(v); }

// An IPv4 address in dotted quad form, without leading zeros (as Python's
// ipaddress accepts it), in host byte order.
Result<uint32_t> ParseIpv4(const std::string& s) {
  uint32_t addr = 0;
  size_t pos = 0;
  for (int i = 0; i < 4; ++i) {
    const size_t end = i < 3 ? s.find('.', pos) : s.size();
    if (end == std::string::npos) return InvalidArgument("bad address");
    const std::string octet = s.substr(pos, end - pos);
    if (!AllDigits(octet) || octet.size() > 3 || (octet.size() > 1 && octet[0] == '0')) {
      return InvalidArgument("bad address");
    }
    const int v = std::stoi(octet);
    if (v > 255) return InvalidArgument("bad address");
    addr = addr << 8 | static_cast<uint32_t>(v);
    pos = end + 1;
  }
  return addr;
}

// True when the /16 at `net` lies inside one of the IPv4 ranges Python's
// ipaddress calls private (the ones wide enough to hold a /16).
bool PrivateSlash16(uint32_t net) {
  struct Range {
    uint32_t base;
    int len;
  };
  static constexpr Range kPrivate[] = {
      {0x00000000, 8},  {0x0a000000, 8},  {0x7f000000, 8},  {0xa9fe0000, 16},
      {0xac100000, 12}, {0xc0a80000, 16}, {0xc6120000, 15}, {0xf0000000, 4},
  };
  return std::any_of(std::begin(kPrivate), std::end(kPrivate), [net](const Range& r) {
    const uint32_t mask = ~uint32_t{0} << (32 - r.len);
    return (net & mask) == r.base;
  });
}

Endpoint EndpointFromJson(const nlohmann::json& j) {
  return {j.at("node").get<std::string>(), j.at("ns").get<std::string>(), j.at("if").get<std::string>(),
          j.at("ip").get<std::string>()};
}

ordered_json ToJson(const Endpoint& e) {
  return {{"node", e.node}, {"ns", e.ns}, {"if", e.ifname}, {"ip", e.ip}};
}

Topology FromJsonOrThrow(const nlohmann::json& j) {
  Topology t;
  t.schema = j.at("schema").get<std::string>();
  t.name = j.at("name").get<std::string>();
  t.index = j.at("index").get<int>();
  t.subnet = j.at("subnet").get<std::string>();
  t.layout = j.at("layout").get<std::string>();
  t.dir = j.at("dir").get<std::string>();
  t.host_subnet = j.value("host_subnet", "");
  const auto& p = j.at("params");
  t.params = {p.at("hosts").get<int>(), p.at("rails").get<int>(), p.at("leaves").get<int>(),
              p.at("spines").get<int>()};
  for (const auto& r : j.at("rails")) t.rails.push_back({r.at("rail").get<int>(), r.at("subnet").get<std::string>()});
  for (const auto& h : j.at("hosts")) {
    Host host{h.at("name").get<std::string>(), h.at("ns").get<std::string>(), {}, h.value("addr", ""),
              h.value("addr_if", "")};
    for (const auto& r : h.at("rails")) {
      host.rails.push_back({r.at("rail").get<int>(), r.at("if").get<std::string>(), r.at("ip").get<std::string>(),
                            r.at("subnet").get<std::string>(), r.at("gateway").get<std::string>(),
                            r.at("leaf").get<std::string>(), r.at("leaf_if").get<std::string>(),
                            r.at("link").get<std::string>()});
    }
    t.hosts.push_back(std::move(host));
  }
  for (const auto& l : j.at("leaves")) {
    t.leaves.push_back({l.at("name").get<std::string>(), l.at("ns").get<std::string>(),
                        l.at("gateway").get<std::string>()});
  }
  for (const auto& s : j.at("spines")) t.spines.push_back({s.at("name").get<std::string>(), s.at("ns").get<std::string>()});
  for (const auto& l : j.at("links")) {
    t.links.push_back({l.at("name").get<std::string>(), l.at("kind").get<std::string>(), EndpointFromJson(l.at("a")),
                       EndpointFromJson(l.at("b"))});
  }
  t.hash_policy = j.value("hash_policy", 3);
  t.hash_seed = j.value("hash_seed", int64_t{1});
  return t;
}

}  // namespace

std::string SubnetPrefix(const std::string& subnet) {
  const auto first = subnet.find('.');
  return subnet.substr(0, subnet.find('.', first + 1));
}

int LeafOf(int h, int r, const Params& p, const std::string& layout) {
  if (layout == "striped") return (h + r) % p.leaves;
  const int groups = p.leaves / p.rails;  // rail-optimized: one leaf per (group, rail)
  return (h * groups / p.hosts) * p.rails + r;
}

bool ValidLabName(const std::string& name) {
  if (name.empty() || name.size() > 10 || name[0] < 'a' || name[0] > 'z') return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); });
}

Status ValidateLab(const std::string& name, const Params& p, const std::string& layout) {
  if (!ValidLabName(name)) {
    return InvalidArgument("--name must match [a-z][a-z0-9]{0,9} (namespace names are NAME-h12 etc.)");
  }
  const struct {
    const char* what;
    int value, max;
  } counts[] = {{"hosts", p.hosts, kMaxHosts},
                {"rails", p.rails, kMaxRails},
                {"leaves", p.leaves, kMaxLeaves},
                {"spines", p.spines, kMaxSpines}};
  for (const auto& c : counts) {
    if (c.value < 1 || c.value > c.max) return InvalidArgument("--" + std::string(c.what) + " must be 1.." + Str(c.max));
  }
  if (layout == "rail" && p.leaves % p.rails != 0) {
    return InvalidArgument("--layout rail needs --leaves to be a multiple of --rails");
  }
  return Status::Ok();
}

Result<std::string> ParseLabSubnet(const std::string& subnet) {
  const Error bad = InvalidArgument("--subnet must be a private /16, e.g. 10.77.0.0/16");
  const auto slash = subnet.find('/');
  if (slash == std::string::npos || subnet.substr(slash + 1) != "16") return bad;
  const Result<uint32_t> net = ParseIpv4(subnet.substr(0, slash));
  if (!net.ok() || (*net & 0xffff) != 0 || !PrivateSlash16(*net)) return bad;
  return subnet;
}

Topology BuildTopology(const std::string& name, int index, const std::string& subnet, const Params& p,
                       const std::string& layout, const std::string& lab_dir) {
  const std::string pre = SubnetPrefix(subnet);
  Topology t;
  t.name = name;
  t.index = index;
  t.subnet = subnet;
  t.layout = layout;
  t.dir = lab_dir;
  t.host_subnet = pre + ".200.0/24";
  t.params = p;
  for (int r = 0; r < p.rails; ++r) t.rails.push_back({r, pre + "." + Str(r) + ".0/24"});
  for (int l = 0; l < p.leaves; ++l) {
    t.leaves.push_back({"l" + Str(l), name + "-l" + Str(l), pre + ".100." + Str(l + 1)});
  }
  for (int s = 0; s < p.spines; ++s) t.spines.push_back({"s" + Str(s), name + "-s" + Str(s)});
  for (int h = 0; h < p.hosts; ++h) {
    Host host{"h" + Str(h), name + "-h" + Str(h), {}, pre + ".200." + Str(h + 1), "host0"};
    for (int r = 0; r < p.rails; ++r) {
      const int l = LeafOf(h, r, p, layout);
      const std::string link = "h" + Str(h) + "r" + Str(r);
      const std::string ip = pre + "." + Str(r) + "." + Str(h + 1);
      const std::string gw = pre + ".100." + Str(l + 1);
      host.rails.push_back({r, "rail" + Str(r), ip, t.rails[r].subnet, gw, "l" + Str(l), link, link});
      t.links.push_back({link, "host", {host.name, host.ns, "rail" + Str(r), ip}, {"l" + Str(l), t.leaves[l].ns, link, gw}});
    }
    t.hosts.push_back(std::move(host));
  }
  for (int l = 0; l < p.leaves; ++l) {
    for (int s = 0; s < p.spines; ++s) {
      const std::string net = pre + "." + Str(128 + l) + ".";
      t.links.push_back({"l" + Str(l) + "s" + Str(s), "fabric",
                         {"l" + Str(l), t.leaves[l].ns, "s" + Str(s), net + Str(2 * s + 1)},
                         {"s" + Str(s), t.spines[s].ns, "l" + Str(l), net + Str(2 * s)}});
    }
  }
  return t;
}

Status Miswire(Topology& t, const std::string& spec) {
  const auto colon = spec.find(':');
  const Status bad = InvalidArgument("--miswire wants LINK:LEAF, e.g. h2r0:l1 (got " + spec + ")");
  if (colon == std::string::npos) return bad;
  const std::string link = spec.substr(0, colon), leaf = spec.substr(colon + 1);
  auto l = std::find_if(t.leaves.begin(), t.leaves.end(), [&](const Leaf& x) { return x.name == leaf; });
  if (l == t.leaves.end()) return InvalidArgument("--miswire: no leaf " + leaf);
  for (Host& h : t.hosts) {
    for (HostRail& r : h.rails) {
      if (r.link != link) continue;
      r.leaf = l->name;
      r.gateway = l->gateway;
      for (Link& lk : t.links) {
        if (lk.name == link) lk.b = {l->name, l->ns, link, l->gateway};
      }
      return Status::Ok();
    }
  }
  return InvalidArgument("--miswire: no host link " + link);
}

bool IsLabNamespace(const std::string& lab, const std::string& ns) {
  const std::string head = lab + "-";
  if (ns.size() < head.size() + 2 || ns.compare(0, head.size(), head) != 0) return false;
  const char kind = ns[head.size()];
  return (kind == 'h' || kind == 'l' || kind == 's') && AllDigits(ns.substr(head.size() + 1));
}

std::vector<std::string> AllNamespaces(const Topology& t) {
  std::vector<std::string> out;
  for (const auto& h : t.hosts) out.push_back(h.ns);
  for (const auto& l : t.leaves) out.push_back(l.ns);
  for (const auto& s : t.spines) out.push_back(s.ns);
  return out;
}

const Link* FindLink(const Topology& t, const std::string& name) {
  for (const auto& lk : t.links) {
    if (lk.name == name) return &lk;
  }
  return nullptr;
}

Result<std::string> NodeNamespace(const Topology& t, const std::string& name) {
  for (const auto& h : t.hosts) {
    if (h.name == name) return h.ns;
  }
  for (const auto& l : t.leaves) {
    if (l.name == name) return l.ns;
  }
  for (const auto& s : t.spines) {
    if (s.name == name) return s.ns;
  }
  return NotFound("no node " + Quoted(name));
}

Result<std::vector<std::string>> ResolveLinks(const Topology& t, const std::string& what) {
  if (FindLink(t, what) != nullptr) return std::vector<std::string>{what};
  if (NodeNamespace(t, what).ok()) {  // a node: all its links
    std::vector<std::string> out;
    for (const auto& lk : t.links) {
      if (lk.a.node == what || lk.b.node == what) out.push_back(lk.name);
    }
    return out;
  }
  return NotFound("no link or node " + Quoted(what) +
                  "; links look like h0r1 (host 0 rail 1) or l0s1 (leaf 0 - spine 1)");
}

Result<RailRef> FindEndpoint(const Topology& t, const std::string& spec) {
  static const std::regex re(R"(^h(\d+)(?:r(\d+))?$)");
  std::smatch m;
  const bool named = std::regex_match(spec, m, re);
  const std::string host = named ? "h" + m[1].str() : "";
  const Result<long long> rail = ParseInt(named && m[2].matched ? m[2].str() : "0");
  for (const auto& h : t.hosts) {
    for (const auto& hr : h.rails) {
      if ((named && rail.ok() && h.name == host && hr.rail == *rail) || hr.ip == spec) return RailRef{&h, &hr};
    }
  }
  return NotFound("no host rail " + Quoted(spec) + " (use h3, h3r1 or an IP)");
}

Result<const Host*> FindHostAddr(const Topology& t, const std::string& spec) {
  for (const auto& h : t.hosts) {
    if (!h.addr.empty() && (spec == h.addr || spec == h.name + "a")) return &h;
  }
  return NotFound("no host address " + Quoted(spec) + " (use h3a or a 10.B.200.x address)");
}

ordered_json ToJson(const Topology& t) {
  ordered_json j = {{"schema", t.schema},
                    {"name", t.name},
                    {"index", t.index},
                    {"subnet", t.subnet},
                    {"layout", t.layout},
                    {"dir", t.dir},
                    {"params",
                     {{"hosts", t.params.hosts},
                      {"rails", t.params.rails},
                      {"leaves", t.params.leaves},
                      {"spines", t.params.spines}}},
                    {"rails", ordered_json::array()},
                    {"hosts", ordered_json::array()},
                    {"leaves", ordered_json::array()},
                    {"spines", ordered_json::array()},
                    {"links", ordered_json::array()}};
  for (const auto& r : t.rails) j["rails"].push_back({{"rail", r.rail}, {"subnet", r.subnet}});
  for (const auto& h : t.hosts) {
    ordered_json rails = ordered_json::array();
    for (const auto& r : h.rails) {
      rails.push_back({{"rail", r.rail},
                       {"if", r.ifname},
                       {"ip", r.ip},
                       {"subnet", r.subnet},
                       {"gateway", r.gateway},
                       {"leaf", r.leaf},
                       {"leaf_if", r.leaf_if},
                       {"link", r.link}});
    }
    j["hosts"].push_back({{"name", h.name}, {"ns", h.ns}, {"rails", rails}, {"addr", h.addr}, {"addr_if", h.addr_if}});
  }
  for (const auto& l : t.leaves) j["leaves"].push_back({{"name", l.name}, {"ns", l.ns}, {"gateway", l.gateway}});
  for (const auto& s : t.spines) j["spines"].push_back({{"name", s.name}, {"ns", s.ns}});
  for (const auto& l : t.links) {
    j["links"].push_back({{"name", l.name}, {"kind", l.kind}, {"a", ToJson(l.a)}, {"b", ToJson(l.b)}});
  }
  j["host_subnet"] = t.host_subnet;
  j["hash_policy"] = t.hash_policy;
  j["hash_seed"] = t.hash_seed;
  return j;
}

Result<Topology> TopologyFromJson(const nlohmann::json& j) {
  try {
    return FromJsonOrThrow(j);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("bad topology.json: ") + e.what());
  }
}

}  // namespace lockstep::netlab
