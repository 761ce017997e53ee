#include "lockstep/agent/runtime/nccl_endpoint.h"

#include <algorithm>

#include "lockstep/fabric/path.h"

namespace lockstep::agent {

namespace {

constexpr const char* kStates[] = {"up", "parked", "down", "contended"};

std::optional<nccl::Ipv4> HostOrderToIpv4(uint32_t a) {
  if (a == 0) return std::nullopt;
  return nccl::Ipv4{static_cast<uint8_t>(a >> 24), static_cast<uint8_t>(a >> 16), static_cast<uint8_t>(a >> 8),
                    static_cast<uint8_t>(a)};
}

std::optional<fabric::PathState> ParseState(const std::string& s) {
  for (fabric::PathState st : {fabric::PathState::kUnknown, fabric::PathState::kUp, fabric::PathState::kSuspect,
                               fabric::PathState::kDown, fabric::PathState::kRecovering}) {
    if (s == fabric::ToString(st)) return st;
  }
  return std::nullopt;
}

}  // namespace

nccl::AgentState NcclStateFromFabric(const nlohmann::json& status, const std::vector<uint32_t>& rails, bool locked,
                                     int64_t offset_ns, int64_t bound_ns) {
  nccl::AgentState s{.locked = locked, .offset_ns = offset_ns, .bound_ns = bound_ns};
  if (!status.is_object()) return s;
  if (auto h = nccl::ParseIpv4(status.value("host_address", std::string()))) s.host = *h;
  std::vector<nccl::Ipv4> rail_addr;
  for (uint32_t r : rails) {
    rail_addr.push_back(HostOrderToIpv4(r).value_or(nccl::Ipv4{}));
    if (r != 0) s.rails.push_back(rail_addr.back());
  }
  std::map<std::string, nccl::Ipv4> peer_host;
  if (status.contains("peers") && status["peers"].is_array()) {
    for (const auto& p : status["peers"]) {
      if (!p.is_object()) continue;
      if (auto a = nccl::ParseIpv4(p.value("host_address", std::string()))) peer_host[p.value("peer", "")] = *a;
    }
  }
  if (status.contains("paths") && status["paths"].is_array()) {
    for (const auto& p : status["paths"]) {
      if (!p.is_object() || s.paths.size() >= nccl::kMaxAgentPaths) continue;
      const int rail = p.value("rail", -1);
      auto peer = peer_host.find(p.value("peer", ""));
      if (rail < 0 || rail >= static_cast<int>(rail_addr.size()) || rail_addr[rail] == nccl::Ipv4{} ||
          peer == peer_host.end()) {
        continue;
      }
      const std::string state = p.value("state", "unknown");
      const std::optional<fabric::PathState> st = ParseState(state);
      s.paths.push_back(nccl::AgentPath{.rail = rail_addr[rail],
                                        .peer = peer->second,
                                        .index = p.value("path", 0),
                                        .state = state,
                                        // fabric/'s verdict; an unknown path (not probed to a verdict yet) is
                                        // not refused: the plugin keeps using it as without an agent.
                                        .usable = !st || !fabric::Failed(*st)});
    }
  }
  return s;
}

NcclEndpoint::NcclEndpoint(StateSource source, metrics::Registry& registry, NcclEndpointOptions options,
                           const Clock* clock)
    : source_(std::move(source)),
      o_(options),
      clock_(clock),
      bytes_(registry.Counter("lockstep_nccl_bytes_total", "Bytes carried by the NCCL plugin's connections",
                              {"job", "peer", "rail", "direction"})),
      owd_(registry.Gauge("lockstep_nccl_owd_seconds",
                          "In-band one-way delay measured by the NCCL plugin's receivers (fabric time)",
                          {"job", "peer", "rail", "quantile"})),
      failovers_(registry.Counter("lockstep_nccl_failovers_total",
                                  "NCCL plugin streams lost or parked (their chunks moved to other streams)", {"job"})),
      rebalances_(registry.Counter("lockstep_nccl_rebalances_total",
                                   "NCCL plugin traffic control weight changes (contended paths)", {"job"})),
      streams_(registry.Gauge("lockstep_nccl_streams", "NCCL plugin streams by state", {"job", "state"})),
      connections_(registry.Gauge("lockstep_nccl_connections", "Open NCCL plugin connections", {"job", "direction"})),
      clients_(registry.Gauge("lockstep_nccl_clients", "NCCL plugin processes connected to the agent")),
      overflow_(registry.Counter("lockstep_nccl_label_overflow_total",
                                 "NCCL plugin reports whose job, peer or rail was folded into \"other\"")) {
  clients_.Set(0);
}

std::string NcclEndpoint::Bounded(std::set<std::string>& seen, size_t max, const std::string& value) {
  if (seen.count(value) > 0) return value;
  if (seen.size() < max) {
    seen.insert(value);
    return value;
  }
  overflow_.Inc();
  return "other";
}

void NcclEndpoint::OnOpen(LineClient client) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_[client] = Bounded(seen_jobs_, o_.max_jobs, "unknown");
  clients_.Set(static_cast<double>(jobs_.size()));
}

std::string NcclEndpoint::OnLine(LineClient client, const std::string& text) {
  Result<nccl::AgentLine> line = nccl::ParseAgentLine(text);
  if (!line.ok()) return "";  // malformed input from a local process: ignored (the plugin never sends it)
  if (line->verb == "query") {
    if (clock_ == nullptr) return nccl::EncodeAgentState(source_());
    const MonoTime now = clock_->Monotonic();
    if (answer_.empty() || now - answered_at_ >= o_.state_ttl) {
      answer_ = nccl::EncodeAgentState(source_());
      answered_at_ = now;
    }
    return answer_;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (line->verb == "hello") {
    auto job = line->kv.find("job");
    jobs_[client] = Bounded(seen_jobs_, o_.max_jobs, job == line->kv.end() ? "unknown" : job->second);
  } else if (line->verb == "stream") {
    Result<nccl::StreamReport> r = nccl::DecodeStreamReport(*line);
    if (r.ok()) Apply(client, *r);
  } else if (line->verb == "close") {
    auto c = line->kv.find("conn");
    if (c != line->kv.end()) Forget(client, std::strtoull(c->second.c_str(), nullptr, 10));
  }
  return "";
}

void NcclEndpoint::Apply(LineClient client, const nccl::StreamReport& r) {
  auto it = conns_.find({r.conn, r.send});
  if (it == conns_.end()) {
    if (conns_.size() >= o_.max_connections) {
      overflow_.Inc();
      return;
    }
    it = conns_.emplace(std::pair{r.conn, r.send}, Conn{.client = client, .job = jobs_[client], .send = r.send}).first;
    connections_.Inc({it->second.job, r.send ? "send" : "recv"});
  }
  Conn& c = it->second;
  if (c.client != client) return;  // another process's id: ignore
  const std::string dir = r.send ? "send" : "recv";
  StreamLast& last = c.streams[r.stream];
  if (last.peer.empty()) {
    const nccl::Ipv4 peer = r.peer != nccl::Ipv4{} ? r.peer : r.remote;
    last.peer = Bounded(seen_peers_, o_.max_peers, nccl::Ipv4String(peer));
    last.rail = Bounded(seen_rails_, o_.max_rails, nccl::Ipv4String(r.rail));
  }
  if (r.bytes > last.bytes) {
    bytes_.Inc({c.job, last.peer, last.rail, dir}, static_cast<double>(r.bytes - last.bytes));
    auto& jb = job_bytes_[c.job];
    (r.send ? jb.first : jb.second) += r.bytes - last.bytes;
  }
  last.bytes = std::max(last.bytes, r.bytes);
  if (last.state != r.state) {
    if (!last.state.empty()) streams_.Inc({c.job, last.state}, -1);
    streams_.Inc({c.job, r.state}, 1);
    last.state = r.state;
  }
  auto& ev = job_events_[c.job];
  if (r.failovers > c.failovers) {
    failovers_.Inc({c.job}, static_cast<double>(r.failovers - c.failovers));
    ev.first += r.failovers - c.failovers;
    c.failovers = r.failovers;
  }
  if (r.rebalances > c.rebalances) {
    rebalances_.Inc({c.job}, static_cast<double>(r.rebalances - c.rebalances));
    ev.second += r.rebalances - c.rebalances;
    c.rebalances = r.rebalances;
  }
  if (!r.send && r.owd_p50_ns && r.owd_p99_ns) {
    owd_.Set({c.job, last.peer, last.rail, "0.5"}, static_cast<double>(*r.owd_p50_ns) * 1e-9);
    owd_.Set({c.job, last.peer, last.rail, "0.99"}, static_cast<double>(*r.owd_p99_ns) * 1e-9);
    delays_[c.job][last.peer + "/" + last.rail] = Delay{*r.owd_p50_ns, *r.owd_p99_ns};
  }
}

void NcclEndpoint::Forget(LineClient client, uint64_t conn) {
  for (bool send : {true, false}) {
    auto it = conns_.find({conn, send});
    if (it == conns_.end() || it->second.client != client) continue;
    for (const auto& [s, last] : it->second.streams) {
      if (!last.state.empty()) streams_.Inc({it->second.job, last.state}, -1);
    }
    connections_.Inc({it->second.job, send ? "send" : "recv"}, -1);
    conns_.erase(it);
  }
}

void NcclEndpoint::OnClose(LineClient client) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> gone;
  for (const auto& [key, c] : conns_) {
    if (c.client == client) gone.push_back(key.first);
  }
  for (uint64_t id : gone) Forget(client, id);
  jobs_.erase(client);
  clients_.Set(static_cast<double>(jobs_.size()));
}

size_t NcclEndpoint::connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return conns_.size();
}

nlohmann::json NcclEndpoint::Jobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, nlohmann::json> jobs;
  auto job_of = [&](const std::string& j) -> nlohmann::json& {
    nlohmann::json& o = jobs[j];
    if (o.is_null()) {
      o = {{"job", j}, {"connections", 0}, {"streams", nlohmann::json::object()}};
      for (const char* st : kStates) o["streams"][st] = 0;
    }
    return o;
  };
  for (const auto& [id, c] : conns_) {
    nlohmann::json& o = job_of(c.job);
    o["connections"] = o["connections"].get<int>() + 1;
    for (const auto& [s, last] : c.streams) {
      if (!last.state.empty()) o["streams"][last.state] = o["streams"][last.state].get<int>() + 1;
    }
  }
  for (const auto& [j, b] : job_bytes_) {
    nlohmann::json& o = job_of(j);
    o["bytes_sent"] = b.first;
    o["bytes_received"] = b.second;
  }
  for (const auto& [j, e] : job_events_) {
    nlohmann::json& o = job_of(j);
    o["failovers"] = e.first;
    o["rebalances"] = e.second;
  }
  for (const auto& [j, paths] : delays_) {
    nlohmann::json& o = job_of(j);
    for (const auto& [path, d] : paths) o["owd_ns"][path] = {{"p50", d.p50}, {"p99", d.p99}};
  }
  nlohmann::json out = nlohmann::json::array();
  for (auto& [j, o] : jobs) out.push_back(std::move(o));
  return out;
}

}  // namespace lockstep::agent
