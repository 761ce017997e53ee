// EventRecorder: writes core/v1 Events about objects ("kubectl describe"
// shows them). Repeats of the same (object, type, reason, message) within
// `aggregation_window` patch the existing Event's count and lastTimestamp
// instead of creating a new one.
//
// Events about cluster-scoped objects go to namespace "default" (as the API
// requires). Never fails the caller: API errors are logged and counted (FailureCount(),
// lockstep_kube_events_failed_total). Calls are synchronous (one API request).
// Thread-safe.
//
//   EventRecorder events(api, clock, {.component = "lockstep-operator"});
//   events.Warning(policy, "InvalidSpec", "spec.probe.intervalMs must be 1..60000 (got 0)");
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "lockstep/common/clock.h"
#include "lockstep/common/metrics.h"
#include "lockstep/kube/kube_api.h"

namespace lockstep::kube {

struct EventRecorderOptions {
  std::string component = "lockstep-operator";  // source.component / reportingComponent
  std::string host{};                             // source.host, e.g. the node name
  Nanos aggregation_window = std::chrono::minutes(5);
  size_t max_tracked = 4096;                    // aggregation cache bound
  metrics::Registry* registry = nullptr;        // optional; must outlive the recorder
};

class EventRecorder {
 public:
  enum class Type { kNormal, kWarning };

  // REQUIRES: api and clock outlive the recorder.
  EventRecorder(KubeApi& api, Clock& clock, EventRecorderOptions options = {});

  // `object` is the involved object as read from the API (apiVersion, kind,
  // metadata.name/namespace/uid are used). reason is UpperCamelCase.
  void Record(const Json& object, Type type, const std::string& reason, const std::string& message);
  void Normal(const Json& object, const std::string& reason, const std::string& message) {
    Record(object, Type::kNormal, reason, message);
  }
  void Warning(const Json& object, const std::string& reason, const std::string& message) {
    Record(object, Type::kWarning, reason, message);
  }

  uint64_t FailureCount() const { return failures_.load(); }
  uint64_t SentCount() const { return sent_.load(); }

 private:
  using Key = std::tuple<std::string, std::string, std::string, std::string>;  // uid|key, type, reason, message
  struct Seen {
    std::string ns{};
    std::string name{};   // the Event's name
    int64_t count = 0;
    MonoTime last{};
  };
  void Forget(const Key& key);
  void Prune(MonoTime now);  // REQUIRES: mu_ held

  KubeApi& api_;
  Clock& clock_;
  const EventRecorderOptions options_;
  std::atomic<uint64_t> failures_{0};
  std::atomic<uint64_t> sent_{0};
  std::atomic<uint64_t> seq_{0};
  metrics::Family* failed_metric_ = nullptr;

  std::mutex mu_;
  std::map<Key, Seen> seen_;  // GUARDED_BY(mu_)
};

}  // namespace lockstep::kube
