// The fleet audit's network collectors: the fabric agent's status parsed into
// path observations, traces driven through the RouteTracer port, the real
// UDP tracer on loopback, and `lockstep-agent audit --fabric-status` and
// `audit judge` on files written here.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "lockstep/agent/audit/audit_command.h"
#include "lockstep/agent/audit/network_collector.h"

namespace lockstep::agent::audit {
namespace {

namespace la = lockstep::audit;
using nlohmann::json;

json FabricStatus() {
  return json::parse(R"({
    "paths": [
      {"peer": "h1", "rail": 0, "interface": "rail0", "state": "up", "loss": 0.0,
       "owd_p50_ns": 31000, "owd_p99_ns": 70000, "rtt_p50_ns": 90000, "rtt_p99_ns": 150000,
       "owd_samples": 640, "window_samples": 700},
      {"peer": "h1", "rail": 1, "interface": "rail1", "state": "down", "loss": 0.75,
       "owd_p50_ns": null, "owd_p99_ns": null, "rtt_p50_ns": 80000, "rtt_p99_ns": 120000,
       "owd_samples": 0, "window_samples": 40},
      {"peer": "h3", "rail": 0, "interface": "rail0", "state": "up", "loss": 0.0,
       "owd_p50_ns": null, "owd_p99_ns": null, "rtt_p50_ns": 80000, "rtt_p99_ns": 120000,
       "owd_samples": 0, "window_samples": 40, "rtt_samples": 37},
      {"peer": "h2", "rail": 0, "interface": "rail0", "state": "unknown",
       "owd_p50_ns": null, "owd_p99_ns": null, "rtt_p50_ns": null, "rtt_p99_ns": null}],
    "peers": [{"peer": "h1", "host_address": "10.0.200.2", "via": "rail0"},
              {"peer": "h2", "host_address": "10.0.200.3", "via": "ecmp"}]})");
}

TEST_CASE("the fabric status gives the paths, one-way delays first, and the rails and peers to trace", "[audit]") {
  la::NetworkFacts n;
  PathsFromFabricStatus(FabricStatus(), n);
  REQUIRE(n.paths.size() == 4);
  CHECK(n.paths[0] ==
        la::PathObservation{.rail = 0, .peer = "h1", .state = "up", .p50_us = 31, .p99_us = 70, .delay_samples = 640});
  CHECK(n.paths[1].state == "down");
  CHECK(n.paths[1].loss == 0.75);
  CHECK(n.paths[1].p50_us == 40);  // half the round trip
  CHECK_FALSE(n.paths[1].one_way);
  CHECK(n.paths[1].delay_samples == 10);  // no rtt_samples (an older agent): the replies among 40 probes
  CHECK(n.paths[2].delay_samples == 37);  // the round trips the agent counted
  CHECK_FALSE(n.paths[3].p50_us);
  CHECK_FALSE(n.paths[3].delay_samples);  // an agent that does not say
  CHECK(RailsFromFabricStatus(FabricStatus()).size() == 2);
  CHECK(RailsFromFabricStatus(FabricStatus())[1].interface == "rail1");
  CHECK(TargetsFromFabricStatus(FabricStatus()) ==
        std::vector<TraceTarget>{{"h1", "10.0.200.2"}, {"h2", "10.0.200.3"}});
  la::NetworkFacts none;
  PathsFromFabricStatus(json::parse(R"({"rails": []})"), none);
  CHECK(none.paths_unavailable);
}

struct FakeTracer : RouteTracer {
  std::vector<std::string> calls;
  la::RouteTrace Trace(const TraceRail& rail, const TraceTarget& target, int port, const TraceOptions&) override {
    calls.push_back(rail.interface + ">" + target.address + ":" + std::to_string(port));
    return {.rail = rail.rail,
            .peer = target.peer,
            .target = target.address,
            .source_port = port,
            .hops = {"10.0.100." + std::to_string(rail.rail + 1), target.address},
            .reached = true};
  }
};

TEST_CASE("every rail x target x source port is traced, extra targets too", "[audit]") {
  FakeTracer tracer;
  TraceOptions o;
  o.source_ports = 3;
  const json status = FabricStatus();
  la::NetworkFacts n = CollectNetwork(&status, "", true, {{"h1", "10.0.1.2"}}, tracer, o);
  CHECK(tracer.calls.size() == 2 * 3 * 3);
  CHECK(tracer.calls.front() == "rail0>10.0.200.2:47000");
  CHECK(n.traces.size() == 18);
  CHECK_FALSE(n.traces_unavailable);
  FakeTracer few;
  o.max_targets = 1;
  o.spread = "h0";
  la::NetworkFacts one = CollectNetwork(&status, "", true, {{"h1", "10.0.1.2"}}, few, o);
  CHECK(few.calls.size() == 2 * 1 * 3);  // one target per rail
  o.max_targets = 0;
  la::NetworkFacts untraced = CollectNetwork(&status, "", false, {}, tracer, o);
  CHECK(untraced.traces.empty());
  CHECK(untraced.traces_unavailable);
  CHECK(untraced.paths.size() == 4);
  la::NetworkFacts absent = CollectNetwork(nullptr, "connection refused", true, {}, tracer, o);
  CHECK(absent.paths_unavailable == "connection refused");
  CHECK(tracer.calls.size() == 18);  // nothing traced without a status
}

TEST_CASE("the UDP tracer reaches a local address in one hop and an unknown interface gives nothing", "[audit]") {
  if (geteuid() != 0) {
    WARN("not root: SO_BINDTODEVICE may be refused; skipped");
    return;
  }
  UdpRouteTracer tracer;
  TraceOptions o;
  o.timeout = std::chrono::milliseconds(500);
  la::RouteTrace t = tracer.Trace({0, "lo"}, {"self", "127.0.0.1"}, 47999, o);
  CHECK(t.reached);
  CHECK(t.hops == std::vector<std::string>{"127.0.0.1"});
  la::RouteTrace none = tracer.Trace({0, "no-such-if0"}, {"self", "127.0.0.1"}, 47998, o);
  CHECK_FALSE(none.reached);
  CHECK(none.hops.empty());
}

std::string WriteFile(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string p = dir + "/" + name;
  std::ofstream(p) << text;
  return p;
}

TEST_CASE("audit --fabric-status, then audit judge over the nodes' files", "[audit]") {
  const std::string dir = std::filesystem::temp_directory_path() / ("audit-net-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  // Four nodes; n1's rail0 is slow towards everyone.
  std::vector<std::string> files;
  for (int i = 0; i < 4; ++i) {
    json status = {{"paths", json::array()}, {"peers", json::array()}};
    for (int p = 0; p < 4; ++p) {
      if (p == i) continue;
      for (int r = 0; r < 2; ++r) {
        const bool slow = r == 0 && (i == 1 || p == 1);
        status["paths"].push_back({{"peer", "n" + std::to_string(p)},
                                   {"rail", r},
                                   {"interface", "rail" + std::to_string(r)},
                                   {"state", "up"},
                                   {"owd_p50_ns", slow ? 3e6 : 30e3 + 1e3 * p},
                                   {"owd_p99_ns", slow ? 9e6 : 80e3}});
      }
    }
    const std::string sf = WriteFile(dir, "status" + std::to_string(i) + ".json", status.dump());
    std::string out;
    const int rc = AuditMain(
        {"--root", dir + "/empty", "--no-nvml", "--json", "--node", "n" + std::to_string(i), "--fabric-status", sf},
        out);
    CHECK(rc == 1);  // alone: the empty tree has no default route
    files.push_back(WriteFile(dir, "n" + std::to_string(i) + ".json", out));
  }
  std::string out;
  std::vector<std::string> args = {"judge", "--json"};
  args.insert(args.end(), files.begin(), files.end());
  CHECK(AuditMain(args, out) == 1);
  const json verdicts = json::parse(out);
  REQUIRE(verdicts.size() == 4);
  for (const json& v : verdicts) {
    int latency_failures = 0;
    for (const json& c : v["checks"]) {
      if (c["verdict"] == "Fail" && c["id"].get<std::string>().rfind("backend.latency", 0) == 0) ++latency_failures;
    }
    INFO(v["node"]);
    CHECK(latency_failures == (v["node"] == "n1" ? 6 : 0));
  }
  std::string text;
  CHECK(AuditMain({"judge", files[0], files[2]}, text) == 1);
  CHECK(text.find("== n0") != std::string::npos);
  std::string bad;
  CHECK(AuditMain({"judge", dir + "/missing.json"}, bad) == 2);
  CHECK(AuditMain({"--trace-target", "nope"}, bad) == 2);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lockstep::agent::audit
