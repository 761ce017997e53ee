#include "lockstep/nccl/agent_wire.h"

#include <cerrno>
#include <cstdlib>

namespace lockstep::nccl {

namespace {

bool IsOkToken(const std::string& s) {
  for (char c : s) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\0') return false;
  }
  return true;
}

Result<uint64_t> U64(const AgentLine& l, const std::string& key) {
  auto it = l.kv.find(key);
  if (it == l.kv.end()) return InvalidArgument(l.verb + ": missing " + key);
  const std::string& v = it->second;
  char* end = nullptr;
  errno = 0;
  unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || v[0] == '-' || errno != 0 || *end != '\0') {
    return InvalidArgument(l.verb + ": " + key + " is not a number (got \"" + v + "\")");
  }
  return static_cast<uint64_t>(x);
}

Result<int64_t> I64(const AgentLine& l, const std::string& key) {
  auto it = l.kv.find(key);
  if (it == l.kv.end()) return InvalidArgument(l.verb + ": missing " + key);
  const std::string& v = it->second;
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || errno != 0 || *end != '\0') {
    return InvalidArgument(l.verb + ": " + key + " is not a number (got \"" + v + "\")");
  }
  return static_cast<int64_t>(x);
}

Result<std::optional<int64_t>> OptI64(const AgentLine& l, const std::string& key) {
  auto it = l.kv.find(key);
  if (it != l.kv.end() && it->second == "-") return std::optional<int64_t>();
  Result<int64_t> v = I64(l, key);
  if (!v.ok()) return v.error();
  return std::optional<int64_t>(*v);
}

Result<Ipv4> Addr(const AgentLine& l, const std::string& key) {
  auto it = l.kv.find(key);
  if (it == l.kv.end()) return InvalidArgument(l.verb + ": missing " + key);
  std::optional<Ipv4> a = ParseIpv4(it->second);
  if (!a) return InvalidArgument(l.verb + ": " + key + " is not an IPv4 address (got \"" + it->second + "\")");
  return *a;
}

Result<bool> Flag(const AgentLine& l, const std::string& key) {
  Result<uint64_t> v = U64(l, key);
  if (!v.ok()) return v.error();
  if (*v > 1) return InvalidArgument(l.verb + ": " + key + " must be 0 or 1");
  return *v == 1;
}

std::string Opt(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "-"; }

}  // namespace

std::string Ipv4String(const Ipv4& a) {
  return std::to_string(a[0]) + "." + std::to_string(a[1]) + "." + std::to_string(a[2]) + "." + std::to_string(a[3]);
}

std::optional<Ipv4> ParseIpv4(const std::string& s) {
  Ipv4 a{};
  size_t pos = 0;
  for (int i = 0; i < 4; ++i) {
    if (pos >= s.size() || s[pos] < '0' || s[pos] > '9') return std::nullopt;
    int v = 0, digits = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9' && digits < 4) {
      v = v * 10 + (s[pos++] - '0');
      ++digits;
    }
    if (digits > 3 || v > 255) return std::nullopt;
    a[i] = static_cast<uint8_t>(v);
    if (i < 3) {
      if (pos >= s.size() || s[pos] != '.') return std::nullopt;
      ++pos;
    }
  }
  if (pos != s.size()) return std::nullopt;
  return a;
}

Result<AgentLine> ParseAgentLine(const std::string& line) {
  if (line.size() > kMaxAgentLine) return InvalidArgument("agent line longer than " + std::to_string(kMaxAgentLine));
  AgentLine out;
  size_t pos = 0;
  bool first = true;
  while (pos < line.size()) {
    size_t sp = line.find(' ', pos);
    std::string tok = line.substr(pos, sp == std::string::npos ? std::string::npos : sp - pos);
    pos = sp == std::string::npos ? line.size() : sp + 1;
    if (tok.empty()) continue;
    if (first) {
      if (tok.find('=') != std::string::npos) return InvalidArgument("agent line: no verb");
      out.verb = tok;
      first = false;
      continue;
    }
    size_t eq = tok.find('=');
    if (eq == std::string::npos || eq == 0) return InvalidArgument("agent line: \"" + tok + "\" is not key=value");
    if (!out.kv.emplace(tok.substr(0, eq), tok.substr(eq + 1)).second) {
      return InvalidArgument("agent line: " + tok.substr(0, eq) + " given twice");
    }
  }
  if (out.verb.empty()) return InvalidArgument("agent line: empty");
  return out;
}

std::string FormatAgentLine(const AgentLine& line) {
  std::string s = line.verb;
  for (const auto& [k, v] : line.kv) {
    if (!IsOkToken(k) || !IsOkToken(v)) continue;
    s += " " + k + "=" + v;
  }
  return s + "\n";
}

std::optional<bool> AgentState::Usable(const Ipv4& rail, const Ipv4& peer) const {
  std::optional<bool> out;
  for (const AgentPath& p : paths) {
    if (p.rail == rail && p.peer == peer) out = out.value_or(false) || p.usable;  // any usable index
  }
  return out;
}

std::string EncodeAgentState(const AgentState& s) {
  std::string out = FormatAgentLine(AgentLine{"state",
                                              {{"v", "1"},
                                               {"locked", s.locked ? "1" : "0"},
                                               {"offset_ns", std::to_string(s.offset_ns)},
                                               {"bound_ns", std::to_string(s.bound_ns)},
                                               {"host", Ipv4String(s.host)}}});
  for (const Ipv4& r : s.rails) out += FormatAgentLine(AgentLine{"rail", {{"addr", Ipv4String(r)}}});
  for (const AgentPath& p : s.paths) {
    out += FormatAgentLine(AgentLine{"path",
                                     {{"rail", Ipv4String(p.rail)},
                                      {"peer", Ipv4String(p.peer)},
                                      {"index", std::to_string(p.index)},
                                      {"state", p.state.empty() ? "unknown" : p.state},
                                      {"usable", p.usable ? "1" : "0"}}});
  }
  return out + "end\n";
}

Result<std::optional<AgentState>> AgentStateReader::Feed(const std::string& text) {
  Result<AgentLine> line = ParseAgentLine(text);
  if (!line.ok()) return line.error();
  const AgentLine& l = *line;
  if (l.verb == "state") {
    Result<bool> locked = Flag(l, "locked");
    Result<int64_t> off = I64(l, "offset_ns");
    Result<int64_t> bound = I64(l, "bound_ns");
    Result<Ipv4> host = Addr(l, "host");
    if (!locked.ok()) return locked.error();
    if (!off.ok()) return off.error();
    if (!bound.ok()) return bound.error();
    if (!host.ok()) return host.error();
    cur_ = AgentState{.locked = *locked, .offset_ns = *off, .bound_ns = *bound, .host = *host};
    in_state_ = true;
    return std::optional<AgentState>();
  }
  if (!in_state_) return InvalidArgument("agent: \"" + l.verb + "\" before \"state\"");
  if (l.verb == "rail") {
    Result<Ipv4> a = Addr(l, "addr");
    if (!a.ok()) return a.error();
    if (cur_.rails.size() >= 64) return InvalidArgument("agent: too many rails");
    cur_.rails.push_back(*a);
    return std::optional<AgentState>();
  }
  if (l.verb == "path") {
    Result<Ipv4> rail = Addr(l, "rail");
    Result<Ipv4> peer = Addr(l, "peer");
    Result<uint64_t> index = U64(l, "index");
    Result<bool> usable = Flag(l, "usable");
    if (!rail.ok()) return rail.error();
    if (!peer.ok()) return peer.error();
    if (!index.ok()) return index.error();
    if (!usable.ok()) return usable.error();
    if (cur_.paths.size() >= kMaxAgentPaths)
      return InvalidArgument("agent: more than " + std::to_string(kMaxAgentPaths) + " paths");
    auto st = l.kv.find("state");
    cur_.paths.push_back(AgentPath{.rail = *rail,
                                   .peer = *peer,
                                   .index = static_cast<int>(*index & 0xffff),
                                   .state = st == l.kv.end() ? "unknown" : st->second,
                                   .usable = *usable});
    return std::optional<AgentState>();
  }
  if (l.verb == "end") {
    in_state_ = false;
    return std::optional<AgentState>(std::move(cur_));
  }
  return InvalidArgument("agent: unknown line \"" + l.verb + "\"");
}

std::string EncodeStreamReport(const StreamReport& r) {
  return FormatAgentLine(AgentLine{"stream",
                                   {{"conn", std::to_string(r.conn)},
                                    {"dir", r.send ? "send" : "recv"},
                                    {"stream", std::to_string(r.stream)},
                                    {"rail", Ipv4String(r.rail)},
                                    {"remote", Ipv4String(r.remote)},
                                    {"peer", Ipv4String(r.peer)},
                                    {"bytes", std::to_string(r.bytes)},
                                    {"chunks", std::to_string(r.chunks)},
                                    {"owd_p50_ns", Opt(r.owd_p50_ns)},
                                    {"owd_p99_ns", Opt(r.owd_p99_ns)},
                                    {"failovers", std::to_string(r.failovers)},
                                    {"rebalances", std::to_string(r.rebalances)},
                                    {"state", r.state.empty() ? "up" : r.state}}});
}

Result<StreamReport> DecodeStreamReport(const AgentLine& l) {
  if (l.verb != "stream") return InvalidArgument("not a stream report: \"" + l.verb + "\"");
  StreamReport r;
  Result<uint64_t> conn = U64(l, "conn");
  if (!conn.ok()) return conn.error();
  r.conn = *conn;
  auto dir = l.kv.find("dir");
  if (dir == l.kv.end() || (dir->second != "send" && dir->second != "recv")) {
    return InvalidArgument("stream: dir must be send or recv");
  }
  r.send = dir->second == "send";
  Result<uint64_t> stream = U64(l, "stream");
  if (!stream.ok()) return stream.error();
  if (*stream >= 64) return InvalidArgument("stream: index " + std::to_string(*stream) + " out of range");
  r.stream = static_cast<int>(*stream);
  for (auto [key, dst] : {std::pair{"rail", &r.rail}, std::pair{"remote", &r.remote}, std::pair{"peer", &r.peer}}) {
    Result<Ipv4> a = Addr(l, key);
    if (!a.ok()) return a.error();
    *dst = *a;
  }
  for (auto [key, dst] : {std::pair{"bytes", &r.bytes}, std::pair{"chunks", &r.chunks},
                          std::pair{"failovers", &r.failovers}, std::pair{"rebalances", &r.rebalances}}) {
    Result<uint64_t> v = U64(l, key);
    if (!v.ok()) return v.error();
    *dst = *v;
  }
  Result<std::optional<int64_t>> p50 = OptI64(l, "owd_p50_ns");
  Result<std::optional<int64_t>> p99 = OptI64(l, "owd_p99_ns");
  if (!p50.ok()) return p50.error();
  if (!p99.ok()) return p99.error();
  r.owd_p50_ns = *p50;
  r.owd_p99_ns = *p99;
  auto st = l.kv.find("state");
  r.state = st == l.kv.end() ? "up" : st->second;
  if (r.state != "up" && r.state != "parked" && r.state != "down" && r.state != "contended") {
    return InvalidArgument("stream: unknown state \"" + r.state + "\"");
  }
  return r;
}

}  // namespace lockstep::nccl
