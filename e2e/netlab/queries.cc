#include "netlab/commands.h"

#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "netlab/lab.h"
#include "netlab/parse.h"
#include "netlab/shell.h"

namespace lockstep::netlab {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// One line of JSON with ", " and ": " separators, as `path --json` has
// always printed it (Python's json.dumps style).
std::string JsonLine(const ordered_json& j) {
  std::string s;
  if (j.is_array()) {
    for (const auto& v : j) s += (s.empty() ? "" : ", ") + JsonLine(v);
    return "[" + s + "]";
  }
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) s += (s.empty() ? "" : ", ") + json(k).dump(-1, ' ', true) + ": " + JsonLine(v);
    return "{" + s + "}";
  }
  return j.dump(-1, ' ', true);
}

// The command's output as a JSON array; empty if it is anything else.
json JsonArray(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_array() ? j : json::array();
}

// obj[key] if it is a non-negative integer, else 0.
int64_t Counter(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number_integer()) return 0;
  return obj[key].get<int64_t>();
}

// stats64.tx of `ip -s -j link` (an empty object when absent).
json Tx(const json& stats64) {
  return stats64.is_object() && stats64.contains("tx") ? stats64["tx"] : json::object();
}

// The other end of the link behind (namespace, interface), and the link's name.
struct Peer {
  const Endpoint* end;
  std::string link;
};
using Peers = std::map<std::pair<std::string, std::string>, Peer>;

Peers PeersOf(const Topology& t) {
  Peers peers;
  for (const auto& lk : t.links) {
    peers[{lk.a.ns, lk.a.ifname}] = {&lk.b, lk.name};
    peers[{lk.b.ns, lk.b.ifname}] = {&lk.a, lk.name};
  }
  return peers;
}

struct Trace {
  std::vector<std::string> hops, links;
  bool reachable = false;
};

// Follows the FIB hop by hop: each router is asked with `ip route get ... iif`
// for the 5-tuple, so its multipath hash decides as for a real packet.
// A flow's end: the host and the address used (a rail's or the host address).
struct FlowEnd {
  const Host* host;
  std::string ip;
};

// "h3", "h3r1" or a rail IP; "h3a" or a host address.
Result<FlowEnd> FindFlowEnd(const Topology& t, const std::string& spec) {
  if (const auto h = FindHostAddr(t, spec); h.ok()) return FlowEnd{*h, (*h)->addr};
  const auto r = FindEndpoint(t, spec);
  if (!r.ok()) return NotFound("no host rail or host address " + Quoted(spec) + " (use h3, h3r1, h3a or an IP)");
  return FlowEnd{r->host, r->rail->ip};
}

// `oif`: the source host's interface (a rail-bound socket), "" for its FIB's choice.
Result<Trace> TraceFlow(const Peers& peers, const FlowEnd& src, const FlowEnd& dst, const std::string& proto,
                        int sport, int dport, const std::string& oif) {
  Trace tr{{src.host->name}, {}, false};
  std::string ns = src.host->ns, iif;
  for (int hop = 0; hop < 16; ++hop) {
    std::vector<std::string> cmd = {"ip", "-n", ns, "-j", "route", "get", dst.ip, "from", src.ip};
    if (!iif.empty()) cmd.insert(cmd.end(), {"iif", iif});
    if (hop == 0 && !oif.empty()) cmd.insert(cmd.end(), {"oif", oif});
    cmd.insert(cmd.end(), {"ipproto", proto, "sport", std::to_string(sport), "dport", std::to_string(dport)});
    const auto r = Run(cmd);
    if (!r.ok()) return r.error();
    if (r->rc != 0) {
      tr.hops.push_back("UNREACHABLE(" + Strip(r->err) + ")");
      break;
    }
    const json routes = JsonArray(r->out);
    if (routes.empty() || !routes[0].is_object()) return Internal(Join(cmd, " ") + ": unexpected output");
    const json& rt = routes[0];
    const std::string type = rt.value("type", "");
    if (type == "local" || (ns == dst.host->ns && !iif.empty())) break;
    if (type == "unreachable" || type == "blackhole" || type == "prohibit") {
      std::string upper = type;
      std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
      tr.hops.push_back(upper);
      break;
    }
    const auto it = peers.find({ns, rt.value("dev", "")});
    if (it == peers.end()) return Internal(ns + " routes " + dst.ip + " out of " + rt.value("dev", "?") + ", not a lab link");
    tr.links.push_back(it->second.link);
    tr.hops.push_back(it->second.end->node);
    ns = it->second.end->ns;
    iif = it->second.end->ifname;
  }
  tr.reachable = tr.hops.back() == dst.host->name;
  return tr;
}

// Per link: packets and bytes each end sent, and each end's egress drops
// (the root qdisc's, such as tbf, plus the device's).
Result<ordered_json> ReadCounters(const Topology& t) {
  std::map<std::string, std::map<std::string, json>> stats;       // namespace -> interface -> stats64
  std::map<std::string, std::map<std::string, int64_t>> qdrops;  // namespace -> interface -> root qdisc drops
  for (const auto& ns : AllNamespaces(t)) {
    const auto links = Run({"ip", "-n", ns, "-j", "-s", "link", "show"});
    if (!links.ok()) return links.error();
    for (const auto& i : links->rc == 0 ? JsonArray(links->out) : json::array()) {
      if (i.is_object()) stats[ns][i.value("ifname", "")] = i.value("stats64", json::object());
    }
    const auto qdiscs = Run({"tc", "-n", ns, "-s", "-j", "qdisc", "show"});
    if (!qdiscs.ok()) return qdiscs.error();
    for (const auto& q : qdiscs->rc == 0 ? JsonArray(qdiscs->out) : json::array()) {
      if (q.is_object() && q.value("root", json(false)) == true && q.contains("dev") && q["dev"].is_string()) {
        qdrops[ns][q["dev"].get<std::string>()] = Counter(q, "drops");
      }
    }
  }
  ordered_json res = ordered_json::object();
  for (const auto& lk : t.links) {
    const json a = Tx(stats[lk.a.ns][lk.a.ifname]);
    const json b = Tx(stats[lk.b.ns][lk.b.ifname]);
    const int64_t qa = qdrops[lk.a.ns][lk.a.ifname], qb = qdrops[lk.b.ns][lk.b.ifname];
    res[lk.name] = {{"up_packets", Counter(a, "packets")},     {"up_bytes", Counter(a, "bytes")},
                    {"down_packets", Counter(b, "packets")},   {"down_bytes", Counter(b, "bytes")},
                    {"a_tx_dropped", Counter(a, "dropped") + qa}, {"b_tx_dropped", Counter(b, "dropped") + qb},
                    {"a_qdisc_dropped", qa},                 {"b_qdisc_dropped", qb}};
  }
  return res;
}

std::string Padded(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

// The arguments after an optional leading "--".
std::vector<std::string> AfterDashes(const std::vector<std::string>& rest) {
  if (!rest.empty() && rest[0] == "--") return {rest.begin() + 1, rest.end()};
  return rest;
}

// $NETLAB_LOADGEN, else netlab-loadgen beside this binary (same build dir).
Result<std::string> LoadgenPath() {
  const char* env = std::getenv("NETLAB_LOADGEN");
  std::string path;
  if (env != nullptr && *env != '\0') {
    path = env;
  } else {
    char self[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n < 0) return Internal(std::string("readlink /proc/self/exe: ") + std::strerror(errno));
    const std::string exe(self, size_t(n));
    path = exe.substr(0, exe.rfind('/') + 1) + "netlab-loadgen";
  }
  if (::access(path.c_str(), X_OK) != 0) {
    return NotFound("no netlab-loadgen at " + path +
                    "; build it (cmake --build --preset dev --target netlab-loadgen) or set NETLAB_LOADGEN");
  }
  return path;
}

[[noreturn]] void ExecOrDie(const std::vector<std::string>& argv, bool search_path) {
  std::vector<char*> cargv;
  for (const auto& s : argv) cargv.push_back(const_cast<char*>(s.c_str()));
  cargv.push_back(nullptr);
  std::fflush(stdout);
  if (search_path) {
    ::execvp(cargv[0], cargv.data());
  } else {
    ::execv(cargv[0], cargv.data());
  }
  Log("cannot run " + argv[0] + ": " + std::strerror(errno));
  std::exit(1);
}

}  // namespace

Result<int> CmdPath(const Args& a) {
  const auto lab = LoadLab(a.Get("name"));
  if (!lab.ok()) return lab.error();
  const auto src = FindFlowEnd(lab->topo, a.Get("src"));
  if (!src.ok()) return src.error();
  const auto dst = FindFlowEnd(lab->topo, a.Get("dst"));
  if (!dst.ok()) return dst.error();
  const auto dports = ParsePortRange(a.Get("dport"));
  if (!dports.ok()) return dports.error();
  const auto sports = ParsePortRange(a.Get("sport"));
  if (!sports.ok()) return sports.error();
  const Peers peers = PeersOf(lab->topo);
  bool all_ok = true;
  for (int sport = sports->lo; sport <= sports->hi; ++sport) {
    for (int dport = dports->lo; dport <= dports->hi; ++dport) {
      const auto tr = TraceFlow(peers, *src, *dst, a.Get("proto"), sport, dport, a.Get("oif"));
      if (!tr.ok()) return tr.error();
      all_ok = all_ok && tr->reachable;
      if (a.Flag("json")) {
        const ordered_json line = {{"from", src->ip}, {"to", dst->ip}, {"sport", sport},
                                   {"dport", dport},        {"nodes", tr->hops},   {"links", tr->links},
                                   {"reachable", tr->reachable}};
        std::printf("%s\n", JsonLine(line).c_str());
      } else {
        std::printf("%d->%d: %s   links: %s\n", sport, dport, Join(tr->hops, " -> ").c_str(),
                    Join(tr->links, " ").c_str());
      }
    }
  }
  return all_ok ? 0 : 1;
}

Result<int> CmdCounters(const Args& a) {
  const auto lab = LoadLab(a.Get("name"));
  if (!lab.ok()) return lab.error();
  auto counters = ReadCounters(lab->topo);
  if (!counters.ok()) return counters.error();
  ordered_json out = *counters;
  if (!a.Get("links").empty()) {
    std::set<std::string> want;
    std::stringstream list(a.Get("links"));
    for (std::string l; std::getline(list, l, ',');) want.insert(l);
    out = ordered_json::object();
    for (const auto& [k, v] : counters->items()) {
      if (want.count(k)) out[k] = v;
    }
  }
  std::printf("%s\n", out.dump(1, ' ', true).c_str());
  return 0;
}

Result<int> CmdShow(const Args& a) {
  const auto lab = LoadLab(a.Get("name"));
  if (!lab.ok()) return lab.error();
  const Topology& t = lab->topo;
  std::printf("lab %s (index %d, %s, layout %s): %s\n", t.name.c_str(), t.index, t.subnet.c_str(), t.layout.c_str(),
              JoinPath(t.dir, "topology.json").c_str());
  for (const auto& h : t.hosts) {
    std::vector<std::string> rails;
    for (const auto& r : h.rails) rails.push_back(r.ifname + "=" + r.ip + "->" + r.leaf);
    std::printf("  %s %s %s\n", Padded(h.name, 4).c_str(), Padded(h.ns, 12).c_str(), Join(rails, "  ").c_str());
  }
  std::vector<std::string> bad, shapers;
  for (const auto& [k, v] : lab->state.links) {
    if (v != "up") bad.push_back(k + "=" + v);
  }
  for (const auto& [k, v] : lab->state.shapes) shapers.push_back(k + "=" + v.qdisc + "@" + std::to_string(v.rate_bps));
  std::printf("  links not up: %s\n", bad.empty() ? "none" : Join(bad, ", ").c_str());
  std::printf("  shapers: %s\n", shapers.empty() ? "none" : Join(shapers, ", ").c_str());
  return 0;
}

Result<int> CmdList(const Args&) {
  for (const auto& [index, name] : UsedIndexes()) {
    std::printf("%s\tindex %d\t%s\n", name.c_str(), index, JoinPath(LabDir(name), "topology.json").c_str());
  }
  return 0;
}

Result<int> CmdExec(const Args& a) {
  const auto lab = LoadLab(a.Get("name"));
  if (!lab.ok()) return lab.error();
  const auto ns = NodeNamespace(lab->topo, a.Get("node"));
  if (!ns.ok()) return ns.error();
  const std::vector<std::string> cmd = AfterDashes(a.rest);
  if (cmd.empty()) return InvalidArgument("exec: no command");
  std::vector<std::string> argv = {"ip", "netns", "exec", *ns};
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  ExecOrDie(argv, /*search_path=*/true);
}

Result<int> CmdLoadgen(const Args& a) {
  const auto path = LoadgenPath();
  if (!path.ok()) return path.error();
  std::vector<std::string> argv = AfterDashes(a.rest);
  if (argv.empty()) {
    std::printf("%s\n", path->c_str());
    return 0;
  }
  argv.insert(argv.begin(), *path);
  ExecOrDie(argv, /*search_path=*/false);
}

}  // namespace lockstep::netlab
