// FencedKubeApi: a KubeApi decorator that refuses writes while a fence is
// closed. The operator wraps its API in one whose fence is "this process holds
// the lease and renewed it within the renew deadline" (LeaderElector::IsLeader,
// which reads the injected clock), so a reconcile that is still running when
// leadership is lost, or when renewals stop, cannot write afterwards.
//
//  - Reads (Get, List, Watch) always pass through.
//  - Writes (Create, Update, MergePatch, Apply, Delete) check the fence first and
//    fail with kUnavailable "not the leader" when it is closed; they reach the
//    inner API otherwise. (The check and the write are not atomic: a write that
//    passed the check just before the lease expired can still land, as with
//    client-go; the renew deadline is shorter than the lease for that reason.)
//  - Refused() counts refused writes.
//
// Thread-safe if the inner API and the fence function are.
#pragma once

#include <atomic>
#include <functional>
#include <optional>

#include "lockstep/kube/kube_api.h"

namespace lockstep::kube {

class FencedKubeApi final : public KubeApi {
 public:
  // true: writes may proceed.
  using Fence = std::function<bool()>;

  // REQUIRES: inner outlives the decorator; fence is thread-safe.
  FencedKubeApi(KubeApi& inner, Fence fence) : inner_(inner), fence_(std::move(fence)) {}

  Result<Json> Get(const Gvr& r, const std::string& ns, const std::string& name) override;
  Result<Json> List(const Gvr& r, const std::string& ns, const ListOptions& opts) override;
  Result<Json> Create(const Gvr& r, const std::string& ns, const Json& obj) override;
  Result<Json> Update(const Gvr& r, const std::string& ns, const Json& obj,
                      const std::string& subresource = "") override;
  Result<Json> MergePatch(const Gvr& r, const std::string& ns, const std::string& name, const Json& patch,
                          const std::string& subresource = "") override;
  Result<Json> Apply(const Gvr& r, const std::string& ns, const std::string& name, const Json& obj,
                     const ApplyOptions& opts, const std::string& subresource = "") override;
  Status Delete(const Gvr& r, const std::string& ns, const std::string& name,
                const std::string& uid_precondition = "",
                std::optional<int64_t> grace_period_seconds = std::nullopt) override;
  Status Watch(const Gvr& r, const std::string& ns, const WatchOptions& opts, const WatchHandler& handler,
               const std::atomic<bool>& stop) override;

  uint64_t Refused() const { return refused_.load(); }

 private:
  // nullopt when the fence is open, else the error to return.
  std::optional<Error> Check(const char* verb, const Gvr& r, const std::string& name);

  KubeApi& inner_;
  const Fence fence_;
  std::atomic<uint64_t> refused_{0};
};

}  // namespace lockstep::kube
