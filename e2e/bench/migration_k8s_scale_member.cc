#include "migration_k8s_scale_member.h"

#include <chrono>
#include <cmath>

#include <nlohmann/json.hpp>

#include "migration_http.h"

namespace lockstep::bench {
namespace {

using nlohmann::json;

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

json Parse(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  return j.is_object() ? j : json::object();
}

}  // namespace

SimMember::SimMember(MemberOptions options) : options_(std::move(options)) {}

SimMember::~SimMember() { Stop(); }

void SimMember::Start() {
  thread_ = std::thread([this] { Run(); });
}

void SimMember::Stop() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SimMember::Kill() {
  {
    std::lock_guard l(mu_);
    killed_ = true;
  }
  cv_.notify_all();
}

void SimMember::PeerError() {
  {
    std::lock_guard l(mu_);
    peer_error_ = true;
  }
  cv_.notify_all();
}

void SimMember::Nap(double seconds) {
  std::unique_lock l(mu_);
  cv_.wait_for(l, std::chrono::duration<double>(std::max(0.0, seconds)),
               [&] { return stop_.load() || killed_.load() || peer_error_.load(); });
}

void SimMember::Run() {
  std::string url;
  while (!Done() && (url = options_.url()).empty()) Nap(0.05);
  auto call = [&](const std::string& method, const std::string& path, const json& body, double timeout_s) {
    ++calls_;
    auto r = migration::HttpCall(method, url + path, body.is_null() ? "" : body.dump(), timeout_s);
    if (r.status != 200 && r.status != 202) ++failed_calls_;
    return r;
  };
  json reg = {{"member", options_.id},
              {"role", options_.rank >= 0 ? "rank" : "spare"},
              {"host", options_.host},
              {"store_port", 4000},
              {"pid", 100},
              {"pod_name", options_.pod},
              {"pod_uid", options_.uid}};
  if (options_.rank >= 0) reg["rank"] = options_.rank;
  while (!Done()) {
    auto r = call("POST", "/v1/register", reg, 3.0);
    if (r.status == 200) break;
    if (r.status == 400 || r.status == 409) {  // refused: nothing this member can do
      ended_ = true;
      return;
    }
    Nap(0.2);
  }
  registered_ = true;
  int64_t formed = -1;  // the generation it last formed
  bool training = false;
  double step = 0, last = Now();
  auto report = [&](int64_t committed, const char* reason) {
    call("POST", "/v1/report",
         {{"member", options_.id}, {"generation", formed}, {"committed_step", committed}, {"reason", reason}}, 3.0);
    training = false;
  };
  while (!Done()) {
    if (!training) {
      peer_error_ = false;  // nothing to abort
      auto r = call("GET", "/v1/plan?member=" + options_.id + "&wait_ms=1000&generation=" + std::to_string(formed),
                    nullptr, 3.0);
      if (r.status != 200) {
        Nap(0.2);
        continue;
      }
      json plan = Parse(r.body);
      const std::string action = plan.value("action", "");
      if (action == "exit") break;
      const int64_t g = plan.value("generation", int64_t{-1});
      if (action == "train" && g > formed) {
        formed = g;
        rank_ = plan.value("rank", -1);
        step = static_cast<double>(plan.value("resume_step", int64_t{0}));
        last = Now();
        training = true;  // heartbeats in the new generation at once: it joined
      } else {
        if (!plan.contains("held_ms")) Nap(0.02);
        continue;
      }
    }
    const double now = Now();
    step += (now - last) * options_.steps_per_s;
    last = now;
    auto hb = call(
        "POST", "/v1/heartbeat",
        {{"member", options_.id}, {"generation", formed}, {"step", static_cast<int64_t>(step)}, {"state", "training"}},
        3.0);
    if (hb.status == 409 || hb.status == 404) {
      training = false;
      continue;
    }
    if (hb.status == 200) {
      json reply = Parse(hb.body);
      const std::string directive = reply.value("directive", "none");
      if (directive == "exit") break;
      if (directive == "abort") {
        report(static_cast<int64_t>(step), "error");
        continue;
      }
      if (directive == "pause") {
        const int64_t at = reply.value("pause_at_step", static_cast<int64_t>(step));
        while (!Done() && !peer_error_.load() && step < static_cast<double>(at)) {
          Nap((static_cast<double>(at) - step) / options_.steps_per_s);
          const double t = Now();
          step += (t - last) * options_.steps_per_s;
          last = t;
        }
        if (Done()) break;
        if (peer_error_.exchange(false)) {
          report(static_cast<int64_t>(step), "error");
        } else {
          report(at, "pause");
        }
        continue;
      }
      if (reply.value("generation", formed) > formed) {
        training = false;  // a newer generation: the plan says what to do
        continue;
      }
    }
    Nap(options_.heartbeat_interval_s);
    if (!Done() && peer_error_.exchange(false)) report(static_cast<int64_t>(step), "error");
  }
  ended_ = true;
  rank_ = -1;
}

}  // namespace lockstep::bench
