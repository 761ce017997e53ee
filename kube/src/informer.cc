#include "lockstep/kube/informer.h"

#include "lockstep/common/log.h"
#include "lockstep/kube/object_meta.h"
#include "watch_decoder.h"

namespace lockstep::kube {

Informer::Informer(KubeApi& api, Gvr gvr, InformerOptions options)
    : api_(api), gvr_(std::move(gvr)), options_(std::move(options)), seed_(options_.seed.value_or(RandomSeed())) {}

Status Informer::ListOnce() { return ListAndReplace(); }

Informer::~Informer() { Stop(); }

void Informer::AddEventHandlers(EventHandlers handlers) { handlers_.push_back(std::move(handlers)); }

void Informer::Start() { thread_ = std::thread([this] { Run(); }); }

void Informer::Stop() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string Informer::ResourceVersion() const {
  std::lock_guard l(mu_);
  return resource_version_;
}

void Informer::SetResourceVersion(std::string rv) {
  if (rv.empty()) return;
  std::lock_guard l(mu_);
  resource_version_ = std::move(rv);
}

void Informer::Pause(Nanos d) {
  std::unique_lock l(mu_);
  cv_.wait_for(l, d, [&] { return stop_.load(); });
}

void Informer::Run() {
  Backoff backoff(options_.backoff, seed_);
  bool need_list = true;
  int gone_streak = 0;
  while (!stop_) {
    if (need_list) {
      if (Status s = ListAndReplace(); !s) {
        if (stop_) break;
        Nanos d = backoff.Next();
        log::Warn("informer list failed; retrying",
                  {{"resource", gvr_.resource}, {"error", s.error().ToString()},
                   {"retry_ms", std::to_string(d.count() / 1'000'000)}});
        Pause(d);
        continue;
      }
      need_list = false;
    }
    WatchOptions wo;
    wo.label_selector = options_.label_selector;
    wo.field_selector = options_.field_selector;
    wo.resource_version = ResourceVersion();
    wo.timeout_seconds = options_.watch_timeout_seconds;
    bool got_events = false;
    watch_error_.reset();
    Status s = api_.Watch(gvr_, options_.ns, wo,
                          [&](const WatchEvent& ev) {
                            got_events = true;
                            return HandleEvent(ev);
                          },
                          stop_);
    if (stop_) break;
    if (s.ok() && watch_error_) s = *watch_error_;
    if (got_events) {
      backoff.Reset();
      gone_streak = 0;
    }
    if (s.ok()) {
      if (!got_events) Pause(backoff.Next());  // an empty stream: do not spin
      continue;
    }
    if (s.code() == ErrorCode::kGone) {
      log::Info("informer resourceVersion expired; relisting",
                {{"resource", gvr_.resource}, {"resource_version", wo.resource_version}});
      need_list = true;
      if (++gone_streak > 1) Pause(backoff.Next());
      continue;
    }
    Nanos d = backoff.Next();
    log::Warn("informer watch failed; retrying",
              {{"resource", gvr_.resource}, {"error", s.error().ToString()},
               {"retry_ms", std::to_string(d.count() / 1'000'000)}});
    Pause(d);
  }
}

Status Informer::ListAndReplace() {
  std::map<std::string, ObjectPtr> items;
  ListOptions lo;
  lo.label_selector = options_.label_selector;
  lo.field_selector = options_.field_selector;
  lo.limit = options_.page_size;
  std::string rv;
  bool fell_back = false;
  while (true) {
    if (stop_) return Unavailable("stopped");
    auto page = api_.List(gvr_, options_.ns, lo);
    if (!page) {
      if (page.code() == ErrorCode::kGone && !lo.continue_token.empty() && !fell_back) {
        // The continue token expired mid-listing: fall back to one full list.
        fell_back = true;
        lo.limit = 0;
        lo.continue_token.clear();
        items.clear();
        continue;
      }
      return page.error();
    }
    if (const Json* list = FindPath(*page, {"items"}); list != nullptr && list->is_array()) {
      for (const Json& item : *list) {
        if (!item.is_object()) continue;
        Json obj = item;  // list items may omit apiVersion/kind
        if (!obj.contains("apiVersion")) obj["apiVersion"] = gvr_.ApiVersion();
        if (!obj.contains("kind") && !gvr_.kind.empty()) obj["kind"] = gvr_.kind;
        std::string key = ObjectKey(obj);
        items[key] = std::make_shared<const Json>(std::move(obj));
      }
    }
    rv = GetString(*page, {"metadata", "resourceVersion"});
    lo.continue_token = GetString(*page, {"metadata", "continue"});
    if (lo.continue_token.empty()) break;
  }
  std::map<std::string, ObjectPtr> old = store_.Replace(items);
  SetResourceVersion(rv);
  for (const auto& [key, obj] : items) {
    auto it = old.find(key);
    for (const EventHandlers& h : handlers_) {
      if (it == old.end()) {
        if (h.on_add) h.on_add(obj);
      } else if (kube::ResourceVersion(*it->second) != kube::ResourceVersion(*obj) && h.on_update) {
        h.on_update(it->second, obj);
      }
    }
  }
  for (const auto& [key, obj] : old) {
    if (items.count(key) != 0) continue;
    for (const EventHandlers& h : handlers_) {
      if (h.on_delete) h.on_delete(obj);
    }
  }
  lists_.fetch_add(1);
  synced_ = true;
  return Status::Ok();
}

bool Informer::HandleEvent(const WatchEvent& ev) {
  if (ev.type == "BOOKMARK") {
    SetResourceVersion(kube::ResourceVersion(ev.object));
    return true;
  }
  if (ev.type == "ERROR") {
    watch_error_ = internal::WatchErrorEvent(ev);
    return false;
  }
  if (!ev.object.is_object()) return true;
  std::string key = ObjectKey(ev.object);
  std::string rv = kube::ResourceVersion(ev.object);
  if (ev.type == "ADDED" || ev.type == "MODIFIED") {
    auto obj = std::make_shared<const Json>(ev.object);
    ObjectPtr old = store_.Upsert(key, obj);
    for (const EventHandlers& h : handlers_) {
      if (old == nullptr) {
        if (h.on_add) h.on_add(obj);
      } else if (h.on_update) {
        h.on_update(old, obj);
      }
    }
    SetResourceVersion(rv);  // after the handlers, so a caught-up informer has queued its work
  } else if (ev.type == "DELETED") {
    store_.Erase(key);
    auto last = std::make_shared<const Json>(ev.object);
    for (const EventHandlers& h : handlers_) {
      if (h.on_delete) h.on_delete(last);
    }
    SetResourceVersion(rv);
  } else {
    log::Warn("informer: unknown watch event type", {{"resource", gvr_.resource}, {"type", ev.type}});
  }
  return true;
}

}  // namespace lockstep::kube
