#include "lockstep/kube/event_recorder.h"

#include <cstdio>

#include "lockstep/common/log.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/kube/time_format.h"

namespace lockstep::kube {
namespace {
constexpr size_t kMaxMessage = 1024;

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
  return buf;
}
}  // namespace

EventRecorder::EventRecorder(KubeApi& api, Clock& clock, EventRecorderOptions options)
    : api_(api), clock_(clock), options_(std::move(options)) {
  if (options_.registry != nullptr) {
    failed_metric_ = &options_.registry->Counter("lockstep_kube_events_failed_total",
                                                 "Events that could not be written to the API");
  }
}

void EventRecorder::Prune(MonoTime now) {
  for (auto it = seen_.begin(); it != seen_.end();) {
    it = now - it->second.last >= options_.aggregation_window ? seen_.erase(it) : std::next(it);
  }
  if (seen_.size() >= options_.max_tracked) seen_.clear();
}

void EventRecorder::Forget(const Key& key) {
  std::lock_guard l(mu_);
  seen_.erase(key);
}

void EventRecorder::Record(const Json& object, Type type, const std::string& reason, const std::string& message) {
  const std::string type_name = type == Type::kWarning ? "Warning" : "Normal";
  std::string msg = message.size() > kMaxMessage ? message.substr(0, kMaxMessage - 3) + "..." : message;
  std::string obj_ns = Namespace(object), obj_name = Name(object), uid = Uid(object);
  Key key{uid.empty() ? ObjectKey(obj_ns, obj_name) : uid, type_name, reason, msg};
  MonoTime now = clock_.Monotonic();
  const std::string ts = FormatRfc3339(clock_.Wall());
  auto fail = [&](const Error& e) {
    failures_.fetch_add(1);
    if (failed_metric_ != nullptr) failed_metric_->Inc();
    log::Warn("event not recorded", {{"object", ObjectKey(obj_ns, obj_name)}, {"reason", reason},
                                     {"error", e.ToString()}});
  };

  std::optional<Seen> repeat;
  {
    std::lock_guard l(mu_);
    auto it = seen_.find(key);
    if (it != seen_.end() && now - it->second.last < options_.aggregation_window) {
      it->second.count += 1;
      it->second.last = now;
      repeat = it->second;
    }
  }
  if (repeat) {
    Json patch = {{"count", repeat->count}, {"lastTimestamp", ts}};
    auto r = api_.MergePatch(gvr::kEvents, repeat->ns, repeat->name, patch);
    if (r) {
      sent_.fetch_add(1);
      return;
    }
    Forget(key);
    if (r.code() != ErrorCode::kNotFound) return fail(r.error());
    // The Event expired (events have a TTL): create a fresh one below.
  }

  Seen seen;
  seen.ns = obj_ns.empty() ? "default" : obj_ns;
  seen.name = (obj_name.empty() ? std::string("unknown") : obj_name) + "." +
              Hex(static_cast<uint64_t>(clock_.Wall().time_since_epoch().count()) + seq_.fetch_add(1));
  seen.count = 1;
  seen.last = now;
  Json involved = {{"apiVersion", GetString(object, {"apiVersion"})},
                   {"kind", GetString(object, {"kind"})},
                   {"name", obj_name}};
  if (!obj_ns.empty()) involved["namespace"] = obj_ns;
  if (!uid.empty()) involved["uid"] = uid;
  if (std::string rv = ResourceVersion(object); !rv.empty()) involved["resourceVersion"] = rv;
  Json source = {{"component", options_.component}};
  if (!options_.host.empty()) source["host"] = options_.host;
  Json ev = {{"apiVersion", "v1"},
             {"kind", "Event"},
             {"metadata", {{"name", seen.name}, {"namespace", seen.ns}}},
             {"involvedObject", involved},
             {"reason", reason},
             {"message", msg},
             {"type", type_name},
             {"source", source},
             {"reportingComponent", options_.component},
             {"reportingInstance", options_.host.empty() ? options_.component : options_.host},
             {"firstTimestamp", ts},
             {"lastTimestamp", ts},
             {"count", 1}};
  auto r = api_.Create(gvr::kEvents, seen.ns, ev);
  if (!r) return fail(r.error());
  sent_.fetch_add(1);
  std::lock_guard l(mu_);
  Prune(now);
  seen_[key] = std::move(seen);
}

}  // namespace lockstep::kube
