#include "lockstep/agent/audit/node_audit_runner.h"

#include "lockstep/audit/node_audit.h"
#include "lockstep/common/log.h"
#include "lockstep/kube/gvr.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/kube/time_format.h"

namespace lockstep::agent::audit {

namespace la = lockstep::audit;

NodeAuditRunner::NodeAuditRunner(kube::KubeApi& api, Clock& clock, NodeChecksFn checks, NodeAuditRunnerOptions options,
                                 metrics::Registry& registry)
    : api_(api),
      clock_(clock),
      checks_(std::move(checks)),
      options_(std::move(options)),
      informer_(api, kube::gvr::kNodeAudits,
                kube::InformerOptions{.label_selector = std::string(la::kAuditNodeLabel) + "=" + options_.node_name,
                                      .watch_timeout_seconds = options_.watch_timeout_seconds,
                                      .seed = options_.informer_seed}),
      runs_(registry.Counter("lockstep_agent_node_audits_total",
                             "NodeAudits this agent ran, by result (completed, error, write_error)", {"result"})) {
  for (const char* r : {"completed", "error", "write_error"}) runs_.Inc({r}, 0);
  auto mark = [this] {
    std::lock_guard<std::mutex> l(mu_);
    dirty_ = true;
    cv_.notify_all();
  };
  informer_.AddEventHandlers({.on_add = [mark](const kube::ObjectPtr&) { mark(); },
                              .on_update = [mark](const kube::ObjectPtr&, const kube::ObjectPtr&) { mark(); }});
}

NodeAuditRunner::~NodeAuditRunner() { Stop(); }

void NodeAuditRunner::Start() {
  informer_.Start();
  thread_ = std::thread([this] { Loop(); });
}

void NodeAuditRunner::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  informer_.Stop();
}

void NodeAuditRunner::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    cv_.wait(l, [this] { return dirty_ || stop_; });
    if (stop_) break;
    dirty_ = false;
    l.unlock();
    RunPending();
    l.lock();
    // A write that failed left its NodeAudit pending: try again later.
    if (pending_retry_ && !stop_) {
      cv_.wait_for(l, options_.retry, [this] { return stop_; });
      dirty_ = true;
    }
  }
}

int NodeAuditRunner::RunPending() {
  int written = 0;
  pending_retry_ = false;
  for (const kube::ObjectPtr& na : informer_.store().List()) {
    if (kube::GetString(*na, {"spec", "nodeName"}) != options_.node_name) continue;
    if (!kube::GetString(*na, {"status", "phase"}).empty() || written_.count(kube::Uid(*na))) continue;
    std::vector<std::string> modules;
    if (const kube::Json* m = kube::FindPath(*na, {"spec", "requiredModules"}); m && m->is_array()) {
      for (const kube::Json& s : *m) {
        if (s.is_string()) modules.push_back(s.get<std::string>());
      }
    }
    auto checks = checks_(modules);
    const std::string now = kube::FormatRfc3339(clock_.Wall());
    kube::Json status = checks.ok() ? la::CompletedNodeAuditStatus(*checks, now)
                                    : la::ErrorNodeAuditStatus(checks.error().message, now);
    auto r = api_.MergePatch(kube::gvr::kNodeAudits, "", kube::Name(*na), {{"status", status}}, "status");
    if (!r.ok()) {
      runs_.Inc({"write_error"});
      if (r.code() != ErrorCode::kNotFound) pending_retry_ = true;
      log::Warn("cannot write the NodeAudit's status; retrying",
                {{"nodeaudit", kube::Name(*na)}, {"error", r.error().ToString()}});
      continue;
    }
    written_.insert(kube::Uid(*na));
    runs_.Inc({checks.ok() ? "completed" : "error"});
    log::Info("node audit ran", {{"nodeaudit", kube::Name(*na)},
                                 {"verdict", status.value("verdict", "Error")},
                                 {"failed", std::to_string(status.value("failed", 0))}});
    ++written;
  }
  return written;
}

}  // namespace lockstep::agent::audit
