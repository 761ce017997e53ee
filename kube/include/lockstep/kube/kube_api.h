// KubeApi: the port through which all Kubernetes API traffic flows.
// Objects are Json (lockstep/kube/gvr.h, the API's own wire form). Implementations:
// CurlKubeApi (libcurl, real API server) and tests/support/fake_kube_api.h.
// Implementations are thread-safe; Watch() blocks the calling thread.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>

#include "lockstep/common/result.h"
#include "lockstep/kube/gvr.h"

namespace lockstep::kube {

struct ListOptions {
  std::string label_selector{};
  std::string field_selector{};
  std::string resource_version{};  // "" = most recent (quorum read)
  int limit = 0;                 // 0 = no paging
  std::string continue_token{};
};

struct WatchOptions {
  std::string label_selector{};
  std::string field_selector{};
  std::string resource_version{};  // resume point
  bool allow_bookmarks = true;
  int timeout_seconds = 300;     // server closes the stream after this
};

// One watch event: type is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.
struct WatchEvent {
  std::string type{};
  Json object{};
};

// Returns false to stop the watch.
using WatchHandler = std::function<bool(const WatchEvent&)>;

struct ApplyOptions {
  std::string field_manager = "lockstep-operator";
  bool force = true;
};

class KubeApi {
 public:
  virtual ~KubeApi() = default;

  // ns is ignored for cluster-scoped resources; "" lists across all namespaces.
  virtual Result<Json> Get(const Gvr& r, const std::string& ns, const std::string& name) = 0;
  // Returns the List object: {"metadata":{"resourceVersion":..,"continue":..},"items":[..]}.
  virtual Result<Json> List(const Gvr& r, const std::string& ns, const ListOptions& opts) = 0;
  virtual Result<Json> Create(const Gvr& r, const std::string& ns, const Json& obj) = 0;
  // PUT; subresource "" or "status". Fails with kConflict on a stale resourceVersion.
  virtual Result<Json> Update(const Gvr& r, const std::string& ns, const Json& obj,
                              const std::string& subresource = "") = 0;
  // JSON merge patch (RFC 7386).
  virtual Result<Json> MergePatch(const Gvr& r, const std::string& ns, const std::string& name,
                                  const Json& patch, const std::string& subresource = "") = 0;
  // Server-side apply with a field manager.
  virtual Result<Json> Apply(const Gvr& r, const std::string& ns, const std::string& name, const Json& obj,
                             const ApplyOptions& opts, const std::string& subresource = "") = 0;
  // Deletes; NotFound is reported as kNotFound. uid_precondition guards against
  // deleting a newer object of the same name (a mismatch is kConflict).
  // grace_period_seconds: DeleteOptions.gracePeriodSeconds (nullopt: the
  // object's default; 0: a pod is removed at once, its containers killed).
  virtual Status Delete(const Gvr& r, const std::string& ns, const std::string& name,
                        const std::string& uid_precondition = "",
                        std::optional<int64_t> grace_period_seconds = std::nullopt) = 0;
  // Streams events to `handler` until the server ends the stream, the handler
  // returns false, `stop` becomes true, or an error occurs. An expired
  // resourceVersion yields kGone (from the HTTP status or an ERROR event with 410).
  virtual Status Watch(const Gvr& r, const std::string& ns, const WatchOptions& opts,
                       const WatchHandler& handler, const std::atomic<bool>& stop) = 0;
};

}  // namespace lockstep::kube
