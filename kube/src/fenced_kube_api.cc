#include "lockstep/kube/fenced_kube_api.h"

namespace lockstep::kube {

std::optional<Error> FencedKubeApi::Check(const char* verb, const Gvr& r, const std::string& name) {
  if (!fence_ || fence_()) return std::nullopt;
  refused_.fetch_add(1);
  return Unavailable(std::string(verb) + " " + r.resource + " \"" + name +
                     "\" refused: this process is not the leader (lease lost or not renewed in time); "
                     "the current leader will reconcile it");
}

Result<Json> FencedKubeApi::Get(const Gvr& r, const std::string& ns, const std::string& name) {
  return inner_.Get(r, ns, name);
}

Result<Json> FencedKubeApi::List(const Gvr& r, const std::string& ns, const ListOptions& opts) {
  return inner_.List(r, ns, opts);
}

Result<Json> FencedKubeApi::Create(const Gvr& r, const std::string& ns, const Json& obj) {
  std::string name = obj.is_object() && obj.contains("metadata") ? obj["metadata"].value("name", "") : "";
  if (auto e = Check("create", r, name)) return *e;
  return inner_.Create(r, ns, obj);
}

Result<Json> FencedKubeApi::Update(const Gvr& r, const std::string& ns, const Json& obj,
                                   const std::string& subresource) {
  std::string name = obj.is_object() && obj.contains("metadata") ? obj["metadata"].value("name", "") : "";
  if (auto e = Check("update", r, name)) return *e;
  return inner_.Update(r, ns, obj, subresource);
}

Result<Json> FencedKubeApi::MergePatch(const Gvr& r, const std::string& ns, const std::string& name,
                                       const Json& patch, const std::string& subresource) {
  if (auto e = Check("patch", r, name)) return *e;
  return inner_.MergePatch(r, ns, name, patch, subresource);
}

Result<Json> FencedKubeApi::Apply(const Gvr& r, const std::string& ns, const std::string& name, const Json& obj,
                                  const ApplyOptions& opts, const std::string& subresource) {
  if (auto e = Check("apply", r, name)) return *e;
  return inner_.Apply(r, ns, name, obj, opts, subresource);
}

Status FencedKubeApi::Delete(const Gvr& r, const std::string& ns, const std::string& name,
                             const std::string& uid_precondition, std::optional<int64_t> grace_period_seconds) {
  if (auto e = Check("delete", r, name)) return *e;
  return inner_.Delete(r, ns, name, uid_precondition, grace_period_seconds);
}

Status FencedKubeApi::Watch(const Gvr& r, const std::string& ns, const WatchOptions& opts,
                            const WatchHandler& handler, const std::atomic<bool>& stop) {
  return inner_.Watch(r, ns, opts, handler, stop);
}

}  // namespace lockstep::kube
