#include "lockstep/agent/runtime/agent_http.h"

#include <memory>

namespace lockstep::agent {

std::string TimeJson(const TimeReading& r) {
  nlohmann::json j = {{"earliest_ns", r.earliest_ns},
                      {"latest_ns", r.latest_ns},
                      {"now_ns", r.now_ns},
                      {"state", ClockSyncStateName(r.state)},
                      {"error_bound_ns", r.error_bound_ns}};
  return j.dump() + "\n";
}

nlohmann::json StatusJson(const std::string& node, const ClockStatus& s, const std::optional<GroundTruth>& truth) {
  nlohmann::json j = {{"node", node},
                      {"state", ClockSyncStateName(s.reading.state)},
                      {"local_ns", s.reading.local_ns},
                      {"now_ns", s.reading.now_ns},
                      {"offset_ns", s.reading.offset_ns},
                      {"drift_ppb", s.model.valid ? s.model.drift * 1e9 : 0.0},
                      {"error_bound_ns", s.reading.error_bound_ns},
                      {"peers", s.estimate.peers},
                      {"probe_targets", s.peers},
                      {"pure_probe_fraction", s.estimate.pure_fraction},
                      {"pairs_last_window", s.estimate.pairs},
                      {"graph_nodes", s.estimate.graph_nodes},
                      {"graph_edges", s.estimate.graph_edges},
                      {"windows", s.windows},
                      {"last_window_valid", s.estimate.valid},
                      {"last_window_error_bound_ns", s.estimate.error_bound_ns},
                      {"since_model_ns", s.since_model_ns}};
  if (truth) {
    j["virtual_clock"] = {{"local_ns", truth->local_ns},
                          {"true_offset_ns", truth->true_offset_ns},
                          {"true_drift_ppb", truth->true_drift_ppb}};
  }
  return j;
}

void RegisterHealthRoutes(HttpServer& server, metrics::Registry& registry, std::function<bool()> ready,
                          std::function<void()> before_metrics) {
  server.Handle("/healthz", [](const HttpRequest&) { return HttpResponse{200, "text/plain", "ok\n"}; });
  server.Handle("/readyz", [ready = std::move(ready)](const HttpRequest&) {
    return ready() ? HttpResponse{200, "text/plain", "ready\n"} : HttpResponse{503, "text/plain", "not ready\n"};
  });
  server.Handle("/metrics", [&registry, before = std::move(before_metrics)](const HttpRequest&) {
    if (before) before();
    return HttpResponse{200, "text/plain; version=0.0.4", registry.Render()};
  });
}

void RegisterTimeRoutes(HttpServer& server, TimeApiSource source) {
  auto src = std::make_shared<TimeApiSource>(std::move(source));
  server.Handle("/time", [src](const HttpRequest& req) {
    if (req.method != "GET") return HttpResponse{405, "text/plain", "GET only\n"};
    return HttpResponse{200, "application/json", TimeJson(src->status(std::nullopt).reading)};
  });
  server.Handle("/status", [src](const HttpRequest& req) {
    if (req.method != "GET") return HttpResponse{405, "text/plain", "GET only\n"};
    std::optional<GroundTruth> truth = src->truth ? src->truth() : std::nullopt;
    ClockStatus s = src->status(truth ? std::optional<int64_t>(truth->local_ns) : std::nullopt);
    return HttpResponse{200, "application/json", StatusJson(src->node_name, s, truth).dump() + "\n"};
  });
  server.Handle("/fabric", [src](const HttpRequest& req) {
    if (req.method != "GET") return HttpResponse{405, "text/plain", "GET only\n"};
    if (!src->fabric) {
      return HttpResponse{404, "text/plain",
                          "fabric failover is not configured on this agent (agent.yaml fabric.rails is empty)\n"};
    }
    return HttpResponse{200, "application/json", src->fabric().dump() + "\n"};
  });
  server.Handle("/nccl", [src](const HttpRequest& req) {
    if (req.method != "GET") return HttpResponse{405, "text/plain", "GET only\n"};
    if (!src->nccl) {
      return HttpResponse{404, "text/plain", "the NCCL plugin endpoint is off (--nccl-socket \"\")\n"};
    }
    return HttpResponse{200, "application/json", nlohmann::json{{"jobs", src->nccl()}}.dump() + "\n"};
  });
}

}  // namespace lockstep::agent
