#include "netlab/routes.h"

#include <algorithm>
#include <map>

namespace lockstep::netlab {
namespace {

constexpr const char* kBogusMac = "02:00:5e:00:53:ff";  // documentation MAC: where --silent sends frames

std::string Str(int v) { return std::to_string(v); }

struct Attachment {
  std::string ip;
  int leaf;
  std::string link;
};

// Every host rail: its address, the leaf it hangs off and its link.
std::vector<Attachment> Attachments(const Topology& t) {
  std::vector<Attachment> out;
  for (const auto& h : t.hosts) {
    for (const auto& r : h.rails) out.push_back({r.ip, std::stoi(r.leaf.substr(1)), r.link});
  }
  return out;
}

// Host addresses: per host, its attached rails as (leaf, leaf interface,
// rail ip, link).
struct HostLink {
  int leaf;
  std::string leaf_if, rail_ip, link;
};

std::vector<HostLink> HostLinks(const Host& h) {
  std::vector<HostLink> out;
  for (const auto& r : h.rails) out.push_back({std::stoi(r.leaf.substr(1)), r.leaf_if, r.ip, r.link});
  return out;
}

// The static-ECMP baseline users configure: the host subnet over every rail,
// sourced from the host address (kernel defaults otherwise).
std::string HostEcmpRoute(const Topology& t, const Host& h) {
  if (h.rails.size() == 1) {
    const auto& r = h.rails[0];
    return "route replace " + t.host_subnet + " via " + r.gateway + " dev " + r.ifname + " onlink src " + h.addr +
           " proto static";
  }
  std::string line = "route replace " + t.host_subnet + " src " + h.addr + " proto static";
  for (const auto& r : h.rails) line += " nexthop via " + r.gateway + " dev " + r.ifname + " onlink";
  return line;
}

NsCommands HostCommands(const Topology& t, const Host& h) {
  NsCommands c{h.ns, {}, {}};
  for (const auto& r : h.rails) {
    const std::string via = " via " + r.gateway + " dev " + r.ifname + " onlink src " + r.ip;
    c.apply.push_back("route replace " + r.subnet + via + " proto static");
    c.apply.push_back("route replace " + t.subnet + via + " table " + Str(100 + r.rail) + " proto static");
  }
  if (!h.addr.empty()) c.apply.push_back(HostEcmpRoute(t, h));
  return c;
}

class Fabric {
 public:
  Fabric(const Topology& t, const LabState& s)
      : t_(t), s_(s), pre_(SubnetPrefix(t.subnet)), leaves_(int(t.leaves.size())), spines_(int(t.spines.size())),
        attach_(Attachments(t)) {}

  bool Up(int l, int s) const { return LinkUp(s_, "l" + Str(l) + "s" + Str(s)); }

  NsCommands LeafCommands(int li) const {
    NsCommands c{t_.leaves[li].ns, {}, {}};
    for (int s = 0; s < spines_; ++s) {
      if (Up(li, s)) {
        c.apply.push_back("nexthop replace id " + Str(1 + s) + " via " + pre_ + "." + Str(128 + li) + "." +
                          Str(2 * s) + " dev s" + Str(s));
      } else {
        c.cleanup.push_back("nexthop del id " + Str(1 + s));
      }
    }
    std::map<int, int> groups;  // far leaf -> its group id
    for (int m = 0; m < leaves_; ++m) {
      if (m == li) continue;
      std::string members;
      for (int s = 0; s < spines_; ++s) {
        if (Up(li, s) && Up(m, s)) members += (members.empty() ? "" : "/") + Str(1 + s);
      }
      if (members.empty()) {
        c.cleanup.push_back("nexthop del id " + Str(1000 + m));
      } else {
        groups[m] = 1000 + m;
        c.apply.push_back("nexthop replace id " + Str(1000 + m) + " group " + members);
      }
    }
    for (const auto& a : attach_) {
      if (!LinkUp(s_, a.link)) {
        c.apply.push_back(Unreachable(a.ip));
      } else if (a.leaf == li) {
        c.apply.push_back("route replace " + a.ip + "/32 dev " + a.link + " scope link proto static");
      } else if (groups.count(a.leaf)) {
        c.apply.push_back("route replace " + a.ip + "/32 nhid " + Str(groups[a.leaf]) + " proto static");
      } else {
        c.apply.push_back(Unreachable(a.ip));
      }
    }
    for (int h = 0; h < int(t_.hosts.size()); ++h) LeafHostAddr(li, h, c);
    return c;
  }

  NsCommands SpineCommands(int si) const {
    NsCommands c{t_.spines[si].ns, {}, {}};
    for (int l = 0; l < leaves_; ++l) {
      if (Up(l, si)) {
        c.apply.push_back("nexthop replace id " + Str(1 + l) + " via " + pre_ + "." + Str(128 + l) + "." +
                          Str(2 * si + 1) + " dev l" + Str(l));
      } else {
        c.cleanup.push_back("nexthop del id " + Str(1 + l));
      }
    }
    for (const auto& a : attach_) {
      if (Up(a.leaf, si) && LinkUp(s_, a.link)) {
        c.apply.push_back("route replace " + a.ip + "/32 nhid " + Str(1 + a.leaf) + " proto static");
      } else {
        c.apply.push_back(Unreachable(a.ip));
      }
    }
    for (int h = 0; h < int(t_.hosts.size()); ++h) SpineHostAddr(si, h, c);
    return c;
  }

 private:
  // Group ids for host addresses: 2000 + host index (leaf and spine).
  static int HostGroup(int h) { return 2000 + h; }

  // The leaves where host h has a live link (what BGP would have learned).
  std::vector<int> LeavesWith(int h) const {
    std::vector<int> out;
    for (const auto& hl : HostLinks(t_.hosts[h])) {
      if (LinkUp(s_, hl.link) && std::find(out.begin(), out.end(), hl.leaf) == out.end()) out.push_back(hl.leaf);
    }
    return out;
  }

  // A leaf reaches host h's address over its own live links to h (via the
  // rail address, which answers ARP), else over every spine that reaches a
  // leaf that has it.
  void LeafHostAddr(int li, int h, NsCommands& c) const {
    const Host& host = t_.hosts[h];
    if (host.addr.empty()) return;
    std::vector<std::string> direct;
    for (const auto& hl : HostLinks(host)) {
      if (hl.leaf == li && LinkUp(s_, hl.link)) direct.push_back("via " + hl.rail_ip + " dev " + hl.leaf_if + " onlink");
    }
    const std::string route = "route replace " + host.addr + "/32";
    if (direct.size() == 1) {
      c.apply.push_back(route + " " + direct[0] + " proto static");
      c.cleanup.push_back("nexthop del id " + Str(HostGroup(h)));
      return;
    }
    if (direct.size() > 1) {
      std::string line = route + " proto static";
      for (const auto& d : direct) line += " nexthop " + d;
      c.apply.push_back(line);
      c.cleanup.push_back("nexthop del id " + Str(HostGroup(h)));
      return;
    }
    const std::vector<int> with = LeavesWith(h);
    std::string members;
    for (int s = 0; s < spines_; ++s) {
      const bool reaches = std::any_of(with.begin(), with.end(), [&](int m) { return Up(m, s); });
      if (Up(li, s) && reaches) members += (members.empty() ? "" : "/") + Str(1 + s);
    }
    if (members.empty()) {
      c.apply.push_back(Unreachable(host.addr));
      c.cleanup.push_back("nexthop del id " + Str(HostGroup(h)));
      return;
    }
    c.apply.push_back("nexthop replace id " + Str(HostGroup(h)) + " group " + members);
    c.apply.push_back(route + " nhid " + Str(HostGroup(h)) + " proto static");
  }

  // A spine routes host h's address to every leaf that has it (multipath).
  void SpineHostAddr(int si, int h, NsCommands& c) const {
    const Host& host = t_.hosts[h];
    if (host.addr.empty()) return;
    std::string members;
    for (int l : LeavesWith(h)) {
      if (Up(l, si)) members += (members.empty() ? "" : "/") + Str(1 + l);
    }
    if (members.empty()) {
      c.apply.push_back(Unreachable(host.addr));
      c.cleanup.push_back("nexthop del id " + Str(HostGroup(h)));
      return;
    }
    c.apply.push_back("nexthop replace id " + Str(HostGroup(h)) + " group " + members);
    c.apply.push_back("route replace " + host.addr + "/32 nhid " + Str(HostGroup(h)) + " proto static");
  }

  static std::string Unreachable(const std::string& ip) { return "route replace unreachable " + ip + "/32 proto static"; }

  const Topology& t_;
  const LabState& s_;
  const std::string pre_;
  const int leaves_, spines_;
  const std::vector<Attachment> attach_;
};

Sysctls CommonSysctls() {
  return {{"net.ipv6.conf.all.disable_ipv6", "1"},
          {"net.ipv6.conf.default.disable_ipv6", "1"},
          {"net.ipv4.conf.all.rp_filter", "0"},
          {"net.ipv4.conf.default.rp_filter", "0"},
          {"net.ipv4.conf.all.ignore_routes_with_linkdown", "1"},
          {"net.ipv4.conf.default.ignore_routes_with_linkdown", "1"},
          {"net.ipv4.conf.all.accept_redirects", "0"},
          {"net.ipv4.conf.default.accept_redirects", "0"},
          {"net.ipv4.conf.all.send_redirects", "0"},
          {"net.ipv4.conf.default.send_redirects", "0"}};
}

}  // namespace

std::vector<NsCommands> ConvergeCommands(const Topology& t, const LabState& s) {
  std::vector<NsCommands> out;
  for (const auto& h : t.hosts) out.push_back(HostCommands(t, h));
  const Fabric fabric(t, s);
  for (int l = 0; l < int(t.leaves.size()); ++l) out.push_back(fabric.LeafCommands(l));
  for (int sp = 0; sp < int(t.spines.size()); ++sp) out.push_back(fabric.SpineCommands(sp));
  return out;
}

std::vector<std::string> NetnsAddCommands(const Topology& t) {
  std::vector<std::string> out;
  for (const auto& ns : AllNamespaces(t)) out.push_back("netns add " + ns);
  return out;
}

std::vector<std::string> VethCommands(const Topology& t) {
  std::vector<std::string> out;
  for (const auto& lk : t.links) {
    out.push_back("link add " + lk.a.ifname + " netns " + lk.a.ns + " type veth peer name " + lk.b.ifname +
                  " netns " + lk.b.ns);
  }
  return out;
}

std::vector<NsCommands> AddressCommands(const Topology& t, const std::string& host_if_kind) {
  std::vector<NsCommands> out;
  std::map<std::string, size_t> at;  // namespace -> index in out
  for (const auto& ns : AllNamespaces(t)) {
    at[ns] = out.size();
    out.push_back({ns, {"link set lo up"}, {}});
  }
  for (const auto& lk : t.links) {
    const std::string plen = lk.kind == "fabric" ? "/31" : "/32";
    for (const Endpoint* e : {&lk.a, &lk.b}) {
      auto& lines = out[at[e->ns]].apply;
      lines.push_back("addr add " + e->ip + plen + " dev " + e->ifname);
      lines.push_back("link set " + e->ifname + " up");
    }
  }
  for (const auto& h : t.hosts) {
    for (const auto& r : h.rails) {
      out[at[h.ns]].apply.push_back("rule add from " + r.ip + " lookup " + Str(100 + r.rail) + " pref " +
                                    Str(1000 + r.rail));
    }
    if (h.addr.empty()) continue;
    out[at[h.ns]].apply.insert(out[at[h.ns]].apply.end(),
                               {"link add " + h.addr_if + " type " + host_if_kind, "addr add " + h.addr + "/32 dev " + h.addr_if,
                                "link set " + h.addr_if + " up"});
  }
  return out;
}

Sysctls HostSysctls() {
  // Hosts keep the kernel default ignore_routes_with_linkdown=0, as users'
  // hosts do: a multipath nexthop whose rail lost carrier stays in the hash,
  // so flows hashed onto it stall (the static-ECMP baseline of the fabric
  // benchmark). Routers ignore such routes, as a routing daemon would.
  Sysctls v = CommonSysctls();
  for (auto& [name, value] : v) {
    if (name.find("ignore_routes_with_linkdown") != std::string::npos) value = "0";
  }
  v.insert(v.end(), {{"net.ipv4.ip_forward", "0"},
                     {"net.ipv4.conf.all.arp_ignore", "1"},
                     {"net.ipv4.conf.default.arp_ignore", "1"},
                     {"net.ipv4.conf.all.arp_announce", "2"},
                     {"net.ipv4.conf.default.arp_announce", "2"}});
  return v;
}

Sysctls RouterSysctls(const Topology& t, bool kernel_has_seed) {
  // Policy 3 with fields 0x37 hashes exactly the 5-tuple (src/dst IP, proto,
  // src/dst port), as a switch does. Policy 1 would reuse the sender
  // socket's random skb->hash when it has one (connected UDP, TCP), making a
  // flow's spine random per socket instead of a function of its ports.
  // A fixed seed (kernel >= 6.11) makes the port -> spine mapping the same
  // in every lab and every boot; otherwise it is random.
  Sysctls v = CommonSysctls();
  v.emplace_back("net.ipv4.ip_forward", "1");
  v.emplace_back("net.ipv4.fib_multipath_hash_policy", Str(t.hash_policy));
  if (t.hash_policy == 3) v.emplace_back("net.ipv4.fib_multipath_hash_fields", "0x37");
  if (kernel_has_seed) v.emplace_back("net.ipv4.fib_multipath_hash_seed", std::to_string(t.hash_seed));
  return v;
}

std::vector<std::pair<std::string, std::string>> SilentCommands(const Link& lk, bool on, const std::string& one_way) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [near, far] : {std::pair{&lk.a, &lk.b}, std::pair{&lk.b, &lk.a}}) {
    if (on && one_way == "up" && near != &lk.a) continue;
    if (on && one_way == "down" && near != &lk.b) continue;
    out.emplace_back(near->ns, on ? "neigh replace " + far->ip + " lladdr " + kBogusMac + " dev " + near->ifname +
                                        " nud permanent"
                                  : "neigh del " + far->ip + " dev " + near->ifname);
  }
  return out;
}

}  // namespace lockstep::netlab
