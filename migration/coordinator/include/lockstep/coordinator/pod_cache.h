// PodCache: the job's pods (label lockstep.dev/job=<job> in one namespace)
// kept by one informer (a list, then a watch), so that the coordinator's pod
// workers (KubePodProbe, KubeSpareLauncher, KubeJobSync) read them without
// polling the API server: a job at rest costs no API request at all.
//
// view() is a KubeApi for those workers: a List of pods in the namespace
// whose label selector is equality terms only ("a=b,c=d") and includes
// lockstep.dev/job=<job> is answered from the cache; every other call goes to
// the real API. Pods created through view() are listed at once, before the
// watch brings them (read your own writes: the spare launcher would otherwise
// take a pod it just created for a deleted one), until the watch has them or
// a minute passed. Before the informer's first list, such a List is
// Unavailable (the workers treat it as a failed list: no verdict).
//
// OnChange callbacks (registered before Start) run on the informer's thread
// after each pod event: they should only wake a worker. Thread-safe.
//
//   PodCache cache(api, "training", "job-1");
//   cache.OnChange([&] { probe.Wake(); });
//   cache.Start();
//   cache.WaitSynced(std::chrono::seconds(30));
//   KubePodProbe probe(cache.view(), ...);
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/kube/informer.h"
#include "lockstep/kube/kube_api.h"

namespace lockstep::coordinator {

// "a=b,c==d" -> {{a,b},{c,d}}; nullopt for anything else (set-based terms,
// !=, existence) and for an empty selector.
std::optional<std::map<std::string, std::string>> EqualitySelector(const std::string& selector);

class PodCache {
 public:
  // REQUIRES: `api` outlives the cache.
  PodCache(kube::KubeApi& api, std::string ns, std::string job);
  ~PodCache();  // stops the informer
  PodCache(const PodCache&) = delete;
  PodCache& operator=(const PodCache&) = delete;

  // REQUIRES: before Start().
  void OnChange(std::function<void()> callback);
  void Start();
  void Stop();  // ends the watch; no OnChange callback runs after it returns
  // True once the first list is in (false: `timeout` passed first).
  bool WaitSynced(std::chrono::milliseconds timeout) const;
  bool HasSynced() const { return informer_.HasSynced(); }
  // The KubeApi the pod workers use (valid as long as the cache).
  kube::KubeApi& view();

 private:
  class View;
  friend class View;
  // The List of `selector` from the cache (plus pods created through view()).
  Result<kube::Json> ListCached(const std::map<std::string, std::string>& selector);
  void Created(const kube::Json& pod);

  kube::KubeApi& api_;
  const std::string ns_, job_;
  kube::Informer informer_;
  std::unique_ptr<View> view_;
  std::mutex mu_;
  // Pods created through view() that the watch may not have brought yet.
  std::map<std::string, std::pair<kube::Json, std::chrono::steady_clock::time_point>> created_;  // GUARDED_BY(mu_)
};

}  // namespace lockstep::coordinator
