#include "lockstep/kube/controller.h"

#include <exception>

#include "lockstep/common/log.h"
#include "lockstep/kube/object_meta.h"

namespace lockstep::kube {

std::optional<std::string> ControllerOwnerKey(const Json& obj, const Gvr& owner) {
  const Json* refs = FindPath(obj, {"metadata", "ownerReferences"});
  if (refs == nullptr || !refs->is_array()) return std::nullopt;
  for (const Json& ref : *refs) {
    const Json* is_controller = FindPath(ref, {"controller"});
    if (is_controller == nullptr || !is_controller->is_boolean() || !is_controller->get<bool>()) continue;
    if (GetString(ref, {"kind"}) != owner.kind) continue;
    std::string api_version = GetString(ref, {"apiVersion"});
    size_t slash = api_version.find('/');
    std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
    if (group != owner.group) continue;
    std::string name = GetString(ref, {"name"});
    if (name.empty()) return std::nullopt;
    return owner.namespaced ? ObjectKey(Namespace(obj), name) : name;
  }
  return std::nullopt;
}

Controller::Controller(Reconciler& reconciler, Clock& clock, ControllerOptions options)
    : reconciler_(reconciler), clock_(clock), options_(std::move(options)), queue_(clock) {
  metrics::Registry& reg = options_.registry != nullptr ? *options_.registry : own_registry_;
  total_ = &reg.Counter("lockstep_reconcile_total", "Reconciles by controller and result", {"controller", "result"});
  errors_ = &reg.Counter("lockstep_reconcile_errors_total", "Reconciles that returned an error", {"controller"});
  duration_ = &reg.Histogram("lockstep_reconcile_duration_seconds", "Time spent in Reconcile", {"controller"},
                             metrics::DefaultSecondsBuckets());
  depth_ = &reg.Gauge("lockstep_workqueue_depth", "Keys ready in the work queue", {"controller"});
  depth_->Set({options_.name}, 0);
  queue_.SetDepthObserver([g = depth_, name = options_.name](size_t n) { g->Set({name}, static_cast<double>(n)); });
}

Controller::~Controller() { Stop(); }

void Controller::Track(Informer& informer) {
  for (const Informer* i : informers_) {
    if (i == &informer) return;
  }
  informers_.push_back(&informer);
}

void Controller::EnqueueAll(const std::vector<std::string>& keys) {
  for (const std::string& k : keys) {
    if (!k.empty()) queue_.Add(k);
  }
}

namespace {

bool MetadataChanged(const Json& old_obj, const Json& new_obj, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    const Json* a = FindPath(old_obj, {"metadata", key});
    const Json* b = FindPath(new_obj, {"metadata", key});
    if ((a == nullptr) != (b == nullptr) || (a != nullptr && *a != *b)) return true;
  }
  return false;
}

}  // namespace

bool LabelsOrDeletionChanged(const Json& old_obj, const Json& new_obj) {
  return MetadataChanged(old_obj, new_obj, {"labels", "deletionTimestamp"});
}

bool GenerationOrDeletionChanged(const Json& old_obj, const Json& new_obj) {
  return MetadataChanged(old_obj, new_obj, {"generation", "deletionTimestamp"});
}

bool SpecOrMetadataChanged(const Json& old_obj, const Json& new_obj) {
  auto strip = [](Json o) {
    if (!o.is_object()) return o;
    o.erase("status");
    if (auto m = o.find("metadata"); m != o.end() && m->is_object()) {
      m->erase("resourceVersion");
      m->erase("managedFields");
    }
    return o;
  };
  return strip(old_obj) != strip(new_obj);
}

void Controller::For(Informer& informer, UpdateFilter filter) {
  Watches(informer, [](const Json& o) { return std::vector<std::string>{ObjectKey(o)}; }, std::move(filter));
}

void Controller::Owns(Informer& informer, const Gvr& owner) {
  Watches(informer, [owner](const Json& obj) {
    auto key = ControllerOwnerKey(obj, owner);
    return key ? std::vector<std::string>{*key} : std::vector<std::string>{};
  });
}

void Controller::Watches(Informer& informer, KeyMapper map, UpdateFilter filter) {
  Track(informer);
  auto m = std::make_shared<KeyMapper>(std::move(map));
  informer.AddEventHandlers({
      .on_add = [this, m](const ObjectPtr& o) { EnqueueAll((*m)(*o)); },
      .on_update =
          [this, m, filter = std::move(filter)](const ObjectPtr& old_obj, const ObjectPtr& o) {
            if (filter && !filter(*old_obj, *o)) return;
            EnqueueAll((*m)(*old_obj));
            EnqueueAll((*m)(*o));
          },
      .on_delete = [this, m](const ObjectPtr& o) { EnqueueAll((*m)(*o)); },
  });
}

void Controller::GateOpened() {
  std::set<std::string> held;
  {
    std::lock_guard l(mu_);
    held.swap(held_);
  }
  for (const std::string& k : held) queue_.Add(k);
}

size_t Controller::HeldLen() const {
  std::lock_guard l(mu_);
  return held_.size();
}

bool Controller::Synced() const {
  for (const Informer* i : informers_) {
    if (!i->HasSynced()) return false;
  }
  return true;
}

void Controller::Start() {
  int n = options_.workers > 0 ? options_.workers : 1;
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { Worker(); });
}

void Controller::Stop() {
  {
    std::lock_guard l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  queue_.ShutDown();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

void Controller::Worker() {
  {
    std::unique_lock l(mu_);
    while (!Synced()) {
      if (cv_.wait_for(l, options_.sync_poll, [&] { return stopping_; })) return;
    }
  }
  while (auto key = queue_.Get()) Process(*key);
}

bool Controller::ProcessOne() {
  auto key = queue_.TryGet();
  if (!key) return false;
  Process(*key);
  return true;
}

bool Controller::HoldIfGateClosed(const std::string& key) {
  if (!options_.gate) return false;
  // Checked and recorded under mu_ so that GateOpened() (which runs after the
  // gate opens) either sees this key or this check sees the open gate.
  std::unique_lock l(mu_);
  if (options_.gate()) return false;
  held_.insert(key);
  l.unlock();
  queue_.Forget(key);
  return true;
}

void Controller::Process(const std::string& key) {
  const std::string& name = options_.name;
  if (HoldIfGateClosed(key)) {
    queue_.Done(key);
    return;
  }
  MonoTime start = clock_.Monotonic();
  ReconcileResult r;
  try {
    r = reconciler_.Reconcile(key);
  } catch (const std::exception& e) {
    r = ReconcileResult::Fail(Internal(std::string("reconcile threw: ") + e.what()));
  } catch (...) {
    r = ReconcileResult::Fail(Internal("reconcile threw a non-standard exception"));
  }
  duration_->Observe({name}, std::chrono::duration<double>(clock_.Monotonic() - start).count());
  if (r.error && HoldIfGateClosed(key)) {
    // Leadership was lost while this key was reconciled (its writes were
    // refused): hold it for GateOpened() rather than back it off, so that a
    // stretch without the lease cannot push keys minutes into the future.
    total_->Inc({name, "error"});
    errors_->Inc({name});
  } else if (r.error) {
    total_->Inc({name, "error"});
    errors_->Inc({name});
    queue_.AddRateLimited(key);
    auto level = r.error->code == ErrorCode::kConflict ? log::Level::kDebug : log::Level::kWarn;
    log::Write(level, "reconcile failed; requeued",
               {{"controller", name}, {"key", key}, {"error", r.error->ToString()},
                {"retries", std::to_string(queue_.NumRequeues(key))}});
  } else if (r.requeue) {
    total_->Inc({name, "requeue"});
    queue_.AddRateLimited(key);
  } else if (r.requeue_after && *r.requeue_after > Nanos(0)) {
    total_->Inc({name, "requeue_after"});
    queue_.Forget(key);
    queue_.AddAfter(key, *r.requeue_after);
  } else {
    total_->Inc({name, "success"});
    queue_.Forget(key);
  }
  queue_.Done(key);
}

}  // namespace lockstep::kube
