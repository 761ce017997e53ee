#include "lockstep/coordinator/pod_cache.h"

#include <thread>

#include "lockstep/kube/object_meta.h"

namespace lockstep::coordinator {

using kube::Json;

namespace {

constexpr const char* kJobLabelKey = "lockstep.dev/job";
constexpr std::chrono::seconds kCreatedKeep{60};

std::string Trim(const std::string& s) {
  const auto b = s.find_first_not_of(' ');
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(' ') - b + 1);
}

}  // namespace

std::optional<std::map<std::string, std::string>> EqualitySelector(const std::string& selector) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start <= selector.size()) {
    size_t comma = selector.find(',', start);
    if (comma == std::string::npos) comma = selector.size();
    const std::string term = selector.substr(start, comma - start);
    start = comma + 1;
    if (term.find('!') != std::string::npos || term.find('(') != std::string::npos) return std::nullopt;
    const size_t eq = term.find('=');
    if (eq == std::string::npos) return std::nullopt;
    const size_t value_at = eq + 1 < term.size() && term[eq + 1] == '=' ? eq + 2 : eq + 1;
    const std::string key = Trim(term.substr(0, eq)), value = Trim(term.substr(value_at));
    if (key.empty() || value.find('=') != std::string::npos) return std::nullopt;
    out[key] = value;
  }
  if (out.empty()) return std::nullopt;
  return out;
}

// The KubeApi of the pod workers: cached pod lists, everything else passed on.
class PodCache::View final : public kube::KubeApi {
 public:
  explicit View(PodCache& cache) : cache_(cache) {}
  Result<Json> Get(const kube::Gvr& r, const std::string& ns, const std::string& name) override {
    return cache_.api_.Get(r, ns, name);
  }
  Result<Json> List(const kube::Gvr& r, const std::string& ns, const kube::ListOptions& opts) override {
    if (r == kube::gvr::kPods && ns == cache_.ns_ && opts.field_selector.empty() && opts.resource_version.empty() &&
        opts.continue_token.empty()) {
      auto selector = EqualitySelector(opts.label_selector);
      if (selector) {
        auto job = selector->find(kJobLabelKey);
        if (job != selector->end() && job->second == cache_.job_) return cache_.ListCached(*selector);
      }
    }
    return cache_.api_.List(r, ns, opts);
  }
  Result<Json> Create(const kube::Gvr& r, const std::string& ns, const Json& obj) override {
    auto made = cache_.api_.Create(r, ns, obj);
    if (made.ok() && r == kube::gvr::kPods && ns == cache_.ns_) cache_.Created(*made);
    return made;
  }
  Result<Json> Update(const kube::Gvr& r, const std::string& ns, const Json& obj,
                      const std::string& subresource) override {
    return cache_.api_.Update(r, ns, obj, subresource);
  }
  Result<Json> MergePatch(const kube::Gvr& r, const std::string& ns, const std::string& name, const Json& patch,
                          const std::string& subresource) override {
    return cache_.api_.MergePatch(r, ns, name, patch, subresource);
  }
  Result<Json> Apply(const kube::Gvr& r, const std::string& ns, const std::string& name, const Json& obj,
                     const kube::ApplyOptions& opts, const std::string& subresource) override {
    return cache_.api_.Apply(r, ns, name, obj, opts, subresource);
  }
  Status Delete(const kube::Gvr& r, const std::string& ns, const std::string& name, const std::string& uid,
                std::optional<int64_t> grace) override {
    return cache_.api_.Delete(r, ns, name, uid, grace);
  }
  Status Watch(const kube::Gvr& r, const std::string& ns, const kube::WatchOptions& opts,
               const kube::WatchHandler& handler, const std::atomic<bool>& stop) override {
    return cache_.api_.Watch(r, ns, opts, handler, stop);
  }

 private:
  PodCache& cache_;
};

PodCache::PodCache(kube::KubeApi& api, std::string ns, std::string job)
    : api_(api),
      ns_(std::move(ns)),
      job_(std::move(job)),
      informer_(api, kube::gvr::kPods, {.ns = ns_, .label_selector = std::string(kJobLabelKey) + "=" + job_}),
      view_(std::make_unique<View>(*this)) {
  // Any event about a pod means the watch caught up with it: stop adding our copy.
  auto seen = [this](const kube::ObjectPtr& o) {
    std::lock_guard l(mu_);
    created_.erase(kube::Name(*o));
  };
  informer_.AddEventHandlers({.on_add = seen,
                              .on_update = [seen](const kube::ObjectPtr&, const kube::ObjectPtr& o) { seen(o); },
                              .on_delete = seen});
}

PodCache::~PodCache() { informer_.Stop(); }

void PodCache::OnChange(std::function<void()> callback) {
  auto call = [callback](const kube::ObjectPtr&) { callback(); };
  informer_.AddEventHandlers({.on_add = call,
                              .on_update = [callback](const kube::ObjectPtr&, const kube::ObjectPtr&) { callback(); },
                              .on_delete = call});
}

void PodCache::Start() { informer_.Start(); }

void PodCache::Stop() { informer_.Stop(); }

bool PodCache::WaitSynced(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!informer_.HasSynced()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

kube::KubeApi& PodCache::view() { return *view_; }

void PodCache::Created(const Json& pod) {
  std::lock_guard l(mu_);
  // Already brought by the watch (its event ran before we got here): nothing to add.
  if (kube::ObjectPtr known = informer_.store().Get(ns_, kube::Name(pod));
      known && kube::Uid(*known) == kube::Uid(pod)) {
    return;
  }
  created_[kube::Name(pod)] = {pod, std::chrono::steady_clock::now()};
}

Result<Json> PodCache::ListCached(const std::map<std::string, std::string>& selector) {
  if (!informer_.HasSynced()) return Unavailable("the pod cache has not listed the job's pods yet");
  auto matches = [&](const Json& p) {
    const Json* labels = kube::FindPath(p, {"metadata", "labels"});
    for (const auto& [k, v] : selector) {
      if (!labels || !labels->is_object() || !labels->contains(k) || !(*labels)[k].is_string() ||
          (*labels)[k].get<std::string>() != v) {
        return false;
      }
    }
    return true;
  };
  Json items = Json::array();
  std::map<std::string, bool> listed;
  for (const kube::ObjectPtr& p : informer_.store().List([&](const Json& p) { return matches(p); })) {
    listed[kube::Name(*p)] = true;
    items.push_back(*p);
  }
  {
    std::lock_guard l(mu_);
    const auto now = std::chrono::steady_clock::now();
    for (auto it = created_.begin(); it != created_.end();) {
      if (now - it->second.second > kCreatedKeep) {
        it = created_.erase(it);
        continue;
      }
      if (!listed.count(it->first) && matches(it->second.first)) items.push_back(it->second.first);
      ++it;
    }
  }
  return Json{{"apiVersion", "v1"},
              {"kind", "PodList"},
              {"metadata", {{"resourceVersion", informer_.ResourceVersion()}}},
              {"items", std::move(items)}};
}

}  // namespace lockstep::coordinator
