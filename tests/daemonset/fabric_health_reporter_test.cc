// FabricHealthReporter against the in-memory API server on simulated time:
// waits for the operator's object, writes only its own object's status with a
// resourceVersion precondition, keeps the operator's condition, reports on
// state changes at once (at most one write per interval), skips heartbeat-only writes, and backs off on errors.
#include <catch2/catch.hpp>

#include "fake_clock.h"
#include "fake_kube_api.h"
#include "lockstep/agent/kube/fabric_health_reporter.h"
#include "lockstep/kube/object_meta.h"

namespace lockstep::agent {
namespace {

using kube::Json;

using namespace std::chrono_literals;
using Outcome = FabricHealthReporter::Outcome;
using kube::gvr::kFabricHealths;

struct Fixture {
  FakeClock clock;
  kube::FakeKubeApi api{clock};
  metrics::Registry registry;
  AgentReport report;
  FabricHealthReporter reporter{api, clock, [this] { return report; },
                                ReporterOptions{.node_name = "gpu-node-0"}, registry};

  Fixture() {
    report.node_name = "gpu-node-0";
    report.probe_addresses = {"127.0.0.1:40000"};
    report.rails_up = report.rails_total = 1;
  }
  // What the operator does (health_plan.cc): create, then initialise status.
  void OperatorCreates(const std::string& conflict_status = "False") {
    Json obj = {{"apiVersion", "lockstep.dev/v1alpha1"},
                {"kind", "FabricHealth"},
                {"metadata", {{"name", "gpu-node-0"}, {"labels", {{"lockstep.dev/policy", "default"}}}}}};
    REQUIRE(api.Create(kFabricHealths, "", obj).ok());
    OperatorSetsConflict(conflict_status, true);
  }
  void OperatorSetsConflict(const std::string& status, bool pending = false) {
    Json st = Status();
    st["nodeName"] = "gpu-node-0";
    st["policy"] = "default";
    if (pending) st["phase"] = "Pending";
    Json conds = Json::array();
    for (const Json& c : st.value("conditions", Json::array())) {
      if (c["type"] != "PolicyConflict") conds.push_back(c);
    }
    conds.push_back({{"type", "PolicyConflict"}, {"status", status}, {"reason", status == "True" ? "MultiplePolicies" : "SinglePolicy"},
                     {"message", "m"}, {"lastTransitionTime", "2026-01-01T00:00:00Z"}});
    st["conditions"] = conds;
    REQUIRE(api.MergePatch(kFabricHealths, "", "gpu-node-0", {{"status", st}}, "status").ok());
  }
  Json Status() const {
    auto o = api.Peek(kFabricHealths, "", "gpu-node-0");
    return o && o->contains("status") ? (*o)["status"] : Json::object();
  }
  Json Cond(const std::string& type) const {
    for (const Json& c : Status().value("conditions", Json::array())) {
      if (c["type"] == type) return c;
    }
    return nullptr;
  }
  void Lock(int64_t bound = 80) {
    report.clock.state = ClockSyncState::kLocked;
    report.clock.has_model = true;
    report.clock.error_bound_ns = bound;
    report.clock.peers = 7;
  }
};

TEST_CASE("reporter waits for the operator's FabricHealth, then writes its status", "[daemonset][kube]") {
  Fixture f;
  REQUIRE(f.reporter.Tick() == Outcome::kNotFound);
  REQUIRE(f.api.WriteCount() == 0);
  f.clock.Advance(1s);
  REQUIRE(f.reporter.Tick() == Outcome::kNotDue);  // retried after the interval, not hammered
  f.OperatorCreates();
  f.clock.Advance(9s);
  REQUIRE(f.reporter.Tick() == Outcome::kWritten);
  Json s = f.Status();
  REQUIRE(s["phase"] == "Pending");  // not locked yet
  REQUIRE(s["probeAddresses"] == Json::array({"127.0.0.1:40000"}));
  REQUIRE(s["policy"] == "default");
  REQUIRE(s.contains("lastReportTime"));
  REQUIRE(f.Cond("Ready")["reason"] == "ClockNotLocked");
  REQUIRE(f.Cond("PolicyConflict")["reason"] == "SinglePolicy");
  // Only our own object's status subresource was written.
  for (const auto& c : f.api.Calls()) {
    if (c.verb == kube::Verb::kPatch) {
      REQUIRE(c.name == "gpu-node-0");
      REQUIRE(c.subresource == "status");
    }
  }
  REQUIRE(f.registry.Render().find("lockstep_agent_health_reports_total{result=\"not_found\"} 1") != std::string::npos);
}

TEST_CASE("a clock state change is reported at once, otherwise every interval", "[daemonset][kube]") {
  Fixture f;
  f.OperatorCreates();
  REQUIRE(f.reporter.Tick() == Outcome::kWritten);
  f.clock.Advance(10s);
  REQUIRE(f.reporter.Tick() == Outcome::kUnchanged);  // nothing new: no write, next report due in 10 s
  f.clock.Advance(1s);
  REQUIRE(f.reporter.Tick() == Outcome::kNotDue);
  f.Lock();
  REQUIRE(f.reporter.Tick() == Outcome::kWritten);  // immediately (the last write is older than the interval)
  REQUIRE(f.Status()["phase"] == "Healthy");
  REQUIRE(f.Status()["clockErrorBoundNs"] == 80);
  REQUIRE(f.Status()["clock"]["state"] == "LOCKED");
  REQUIRE(f.Cond("Ready")["status"] == "True");
  f.report.clock.error_bound_ns = 95;
  f.clock.Advance(5s);
  REQUIRE(f.reporter.Tick() == Outcome::kNotDue);  // same state: wait for the interval
  f.clock.Advance(5s);
  REQUIRE(f.reporter.Tick() == Outcome::kWritten);
  REQUIRE(f.Status()["clockErrorBoundNs"] == 95);
}

TEST_CASE("a GPU early warning is reported at once, subject to the interval", "[daemonset][kube][gpu]") {
  Fixture f;
  f.Lock();
  GpuReport healthy{.condition = {"GPUHealthy", "True", "Healthy", "1 GPU within the early-warning thresholds"}};
  healthy.status.state = "Healthy";
  f.report.gpu = healthy;
  f.OperatorCreates();
  REQUIRE(f.reporter.Tick() == Outcome::kWritten);
  REQUIRE(f.Cond("GPUHealthy")["status"] == "True");
  REQUIRE(f.Status()["gpu"]["state"] == "Healthy");
  f.clock.Advance(10s);
  REQUIRE(f.reporter.Tick() == Outcome::kUnchanged);
  f.clock.Advance(2s);
  GpuReport hot{.condition = {"GPUHealthy", "False", "EarlyWarning", "GPU 0 (GPU-zero) Xid 79"}};
  hot.status.state = "Warning";
  hot.status.warnings = 1;
  hot.status.devices.resize(1);
  hot.status.devices[0].uuid = "GPU-zero";
  hot.status.devices[0].state = "Warning";
  hot.status.devices[0].xids = {79};
  f.report.gpu = hot;
  REQUIRE(f.reporter.Tick() == Outcome::kWritten);  // at once, 12 s after the last write
  REQUIRE(f.Cond("GPUHealthy")["status"] == "False");
  REQUIRE(f.Cond("GPUHealthy")["reason"] == "EarlyWarning");
  REQUIRE(f.Cond("GPUHealthy")["message"] == "GPU 0 (GPU-zero) Xid 79");
  REQUIRE(f.Status()["gpu"]["devices"][0]["xids"] == Json::array({79}));
  REQUIRE(f.Cond("Ready")["status"] == "True");  // the fabric and the clock are fine
  // It cools down 3 s later: written when the interval since the last write is over.
  f.clock.Advance(3s);
  f.report.gpu = healthy;
  REQUIRE(f.reporter.Tick() == Outcome::kNotDue);
  f.clock.Advance(7s);
  REQUIRE(f.reporter.Tick() == Outcome::kWritten);
  REQUIRE(f.Cond("GPUHealthy")["status"] == "True");
}

TEST_CASE("writes that would only move lastReportTime wait for the heartbeat", "[daemonset][kube]") {
  Fixture f;
  f.OperatorCreates();
  f.Lock();
  REQUIRE(f.reporter.Tick() == Outcome::kWritten);
  const uint64_t writes = f.api.WriteCount();
  const Json first = f.Status();
  f.clock.Advance(10s);
  REQUIRE(f.reporter.Tick() == Outcome::kUnchanged);
  f.clock.Advance(10s);
  REQUIRE(f.reporter.Tick() == Outcome::kUnchanged);
  REQUIRE(f.api.WriteCount() == writes);
  f.clock.Advance(10s);  // 30 s since the last write
  REQUIRE(f.reporter.Tick() == Outcome::kWritten);
  REQUIRE(f.Status()["lastReportTime"] != first["lastReportTime"]);
}

TEST_CASE("the operator's writes in between are kept (409, re-read, retry)", "[daemonset][kube]") {
  Fixture f;
  f.OperatorCreates();
  f.Lock();
  REQUIRE(f.reporter.Tick() == Outcome::kWritten);
  // The operator sees a second policy select the node.
  f.OperatorSetsConflict("True");
  f.clock.Advance(10s);
  f.report.clock.error_bound_ns = 70;
  const uint64_t patches = f.api.CallCount(kube::Verb::kPatch);
  REQUIRE(f.reporter.Tick() == Outcome::kWritten);
  REQUIRE(f.api.CallCount(kube::Verb::kPatch) == patches + 2);  // the stale write, then the retry
  REQUIRE(f.Cond("PolicyConflict")["status"] == "True");
  REQUIRE(f.Cond("Ready")["status"] == "True");
  REQUIRE(f.Status()["clockErrorBoundNs"] == 70);
  REQUIRE(f.Status()["phase"] == "Healthy");
}

TEST_CASE("API errors back off and recover, endless conflicts give up for a while", "[daemonset][kube]") {
  Fixture f;
  f.OperatorCreates();
  f.api.FailNext(3, ErrorCode::kUnavailable);
  REQUIRE(f.reporter.Tick() == Outcome::kError);
  REQUIRE(f.reporter.Tick() == Outcome::kNotDue);  // backing off (~1 s)
  f.clock.Advance(1500ms);
  REQUIRE(f.reporter.Tick() == Outcome::kError);
  f.clock.Advance(1500ms);
  REQUIRE(f.reporter.Tick() == Outcome::kNotDue);  // ~2 s now
  f.clock.Advance(1500ms);
  REQUIRE(f.reporter.Tick() == Outcome::kError);
  f.clock.Advance(6s);
  REQUIRE(f.reporter.Tick() == Outcome::kWritten);

  f.clock.Advance(10s);  // past the interval: a state change is written at once
  f.Lock();
  f.api.FailNext(100, ErrorCode::kConflict, kube::Verb::kPatch);
  REQUIRE(f.reporter.Tick() == Outcome::kConflict);
  REQUIRE(f.reporter.Tick() == Outcome::kNotDue);
  f.api.ClearFaults();
  f.clock.Advance(2s);
  REQUIRE(f.reporter.Tick() == Outcome::kWritten);
  REQUIRE(f.Status()["phase"] == "Healthy");
}

TEST_CASE("a deleted and recreated FabricHealth is picked up again", "[daemonset][kube]") {
  Fixture f;
  f.OperatorCreates();
  REQUIRE(f.reporter.Tick() == Outcome::kWritten);
  REQUIRE(f.api.Delete(kFabricHealths, "", "gpu-node-0").ok());
  f.clock.Advance(10s);
  REQUIRE(f.reporter.Tick() == Outcome::kUnchanged);  // nothing to write: the cached copy is not re-read
  f.clock.Advance(20s);
  REQUIRE(f.reporter.Tick() == Outcome::kNotFound);  // the heartbeat write finds it gone
  f.OperatorCreates();
  f.clock.Advance(10s);
  REQUIRE(f.reporter.Tick() == Outcome::kWritten);
  REQUIRE(f.Status()["nodeName"] == "gpu-node-0");
}

}  // namespace
}  // namespace lockstep::agent
