// `lockstep-agent clock status`: queries a running agent's time API.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "lockstep/agent/net/http_get.h"

namespace lockstep::agent {

int ClockStatusCommand(const CommandLine& cl) {
  auto addr = ParseHostPort(cl.status_addr, "--addr");
  if (!addr.ok()) {
    std::fprintf(stderr, "lockstep-agent: %s\n", addr.error().message.c_str());
    return kExitUsage;
  }
  auto reply = HttpGet(addr->host, addr->port, "/status");
  if (!reply.ok()) {
    std::fprintf(stderr, "lockstep-agent clock status: %s\n", reply.error().message.c_str());
    return kExitFailure;
  }
  if (reply->status != 200) {
    std::fprintf(stderr, "lockstep-agent clock status: %s answered HTTP %d\n", cl.status_addr.c_str(), reply->status);
    return kExitFailure;
  }
  nlohmann::json j = nlohmann::json::parse(reply->body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    std::fprintf(stderr, "lockstep-agent clock status: %s did not answer JSON\n", cl.status_addr.c_str());
    return kExitFailure;
  }
  if (cl.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  auto num = [&](const char* k) { return j.value(k, nlohmann::json(0)).get<double>(); };
  std::string targets;
  for (const auto& p : j.value("probe_targets", nlohmann::json::array())) {
    targets += (targets.empty() ? "" : ", ") + p.get<std::string>();
  }
  std::printf("node:                %s\n", j.value("node", "").c_str());
  std::printf("state:               %s\n", j.value("state", "").c_str());
  std::printf("offset:              %.1f ns (local - fabric)\n", num("offset_ns"));
  std::printf("drift:               %.3f ppb\n", num("drift_ppb"));
  if (num("error_bound_ns") >= 9.2e18) {
    std::printf("error bound:         unbounded\n");
  } else {
    std::printf("error bound:         %.0f ns\n", num("error_bound_ns"));
  }
  std::printf("peers:               %.0f fitted (%s)\n", num("peers"), targets.empty() ? "none" : targets.c_str());
  std::printf("pure probe fraction: %.3f (%.0f pairs last window)\n", num("pure_probe_fraction"),
              num("pairs_last_window"));
  std::printf("graph:               %.0f nodes, %.0f edges\n", num("graph_nodes"), num("graph_edges"));
  double since = num("since_model_ns");
  if (since >= 0) std::printf("model age:           %.3f s\n", since / 1e9);
  if (j.contains("virtual_clock")) {
    std::printf("virtual clock:       true offset %lld ns, true drift %.3f ppb\n",
                static_cast<long long>(j["virtual_clock"].value("true_offset_ns", int64_t{0})),
                j["virtual_clock"].value("true_drift_ppb", 0.0));
  }
  return kExitOk;
}

}  // namespace lockstep::agent
