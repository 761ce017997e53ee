#include "fake_kube_api.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "lockstep/kube/label_selector.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/kube/time_format.h"

namespace lockstep::kube {
namespace {

constexpr size_t kMaxLog = 100'000;
constexpr auto kWatchPoll = std::chrono::milliseconds(5);

std::string Qualified(const Gvr& r) { return r.group.empty() ? r.resource : r.resource + "." + r.group; }

Error NotFoundError(const Gvr& r, const std::string& name) {
  return NotFound(Qualified(r) + " \"" + name + "\" not found");
}

Error ConflictError(const Gvr& r, const std::string& name) {
  return Conflict("Operation cannot be fulfilled on " + Qualified(r) + " \"" + name +
                  "\": the object has been modified; please apply your changes to the latest version and try again");
}

std::optional<uint64_t> ParseRv(const std::string& s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

bool HasFinalizers(const Json& obj) {
  const Json* f = FindPath(obj, {"metadata", "finalizers"});
  return f != nullptr && f->is_array() && !f->empty();
}

// A merge patch that deletes the fields present in `before` and absent in
// `after` (recursing into objects present in both).
Json RemovedFields(const Json& before, const Json& after) {
  Json patch = Json::object();
  if (!before.is_object()) return patch;
  for (const auto& [k, v] : before.items()) {
    auto it = after.is_object() ? after.find(k) : after.end();
    if (!after.is_object() || it == after.end()) {
      patch[k] = nullptr;
    } else if (v.is_object() && it->is_object()) {
      Json sub = RemovedFields(v, *it);
      if (!sub.empty()) patch[k] = std::move(sub);
    }
  }
  return patch;
}

// Field selectors: "a.b=v", "a.b==v", "a.b!=v", comma-separated.
struct FieldTerm {
  std::vector<std::string> path;
  std::string value;
  bool negate;
};

Result<std::vector<FieldTerm>> ParseFieldSelector(const std::string& s) {
  std::vector<FieldTerm> terms;
  size_t start = 0;
  while (start < s.size()) {
    size_t comma = s.find(',', start);
    std::string term = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? s.size() : comma + 1;
    FieldTerm t;
    size_t op = term.find("!=");
    size_t len = 2;
    t.negate = op != std::string::npos;
    if (!t.negate) {
      op = term.find("==");
      if (op == std::string::npos) {
        op = term.find('=');
        len = 1;
      }
    }
    if (op == std::string::npos || op == 0) return InvalidArgument("invalid field selector \"" + s + "\"");
    std::string path = term.substr(0, op);
    t.value = term.substr(op + len);
    for (size_t p = 0; p <= path.size();) {
      size_t dot = path.find('.', p);
      t.path.push_back(path.substr(p, dot == std::string::npos ? std::string::npos : dot - p));
      if (dot == std::string::npos) break;
      p = dot + 1;
    }
    terms.push_back(std::move(t));
  }
  return terms;
}

bool FieldsMatch(const std::vector<FieldTerm>& terms, const Json& obj) {
  for (const FieldTerm& t : terms) {
    const Json* cur = &obj;
    for (const std::string& k : t.path) {
      if (cur == nullptr || !cur->is_object()) {
        cur = nullptr;
        break;
      }
      auto it = cur->find(k);
      cur = it == cur->end() ? nullptr : &*it;
    }
    std::string v = cur == nullptr || cur->is_null() ? "" : cur->is_string() ? cur->get<std::string>() : cur->dump();
    if ((v == t.value) == t.negate) return false;
  }
  return true;
}

std::pair<std::string, std::string> KeyFor(const Gvr& r, const std::string& ns, const std::string& name) {
  return {r.namespaced ? ns : "", name};
}

}  // namespace

struct FakeKubeApi::Watcher {
  Gvr gvr;
  std::string ns;
  LabelSelector labels;
  std::vector<FieldTerm> fields;
  bool bookmarks = false;
  uint64_t cursor = 0;
  std::deque<std::pair<uint64_t, WatchEvent>> bookmarks_pending;  // rv ascending
  bool closed = false;
  bool gone = false;

  bool Matches(const Gvr& r, const std::string& obj_ns, const Json& obj) const {
    return r == gvr && (ns.empty() || obj_ns == ns) && labels.MatchesObject(obj) && FieldsMatch(fields, obj);
  }
};

FakeKubeApi::FakeKubeApi(Clock& clock) : clock_(clock) {}

FakeKubeApi::~FakeKubeApi() {
  std::unique_lock l(mu_);
  for (Watcher* w : watchers_) w->closed = true;
  cv_.notify_all();
  cv_.wait(l, [&] { return watchers_.empty(); });
}

std::optional<Error> FakeKubeApi::BeginLocked(Call call) {
  counts_[call.verb]++;
  calls_.push_back(call);
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    if (it->remaining > 0 && (!it->verb || *it->verb == call.verb)) {
      Error e{it->code, it->message + " (" + VerbName(call.verb) + " " + call.resource + ")"};
      if (--it->remaining == 0) faults_.erase(it);
      return e;
    }
  }
  if (hook_) return hook_(call);
  return std::nullopt;
}

bool FakeKubeApi::HasStatusLocked(const Gvr& r) const {
  if (auto it = status_subresource_.find(r); it != status_subresource_.end()) return it->second;
  if (r.group.empty() && (r.resource == "configmaps" || r.resource == "secrets" || r.resource == "events" ||
                          r.resource == "serviceaccounts")) {
    return false;
  }
  return r.resource != "leases";
}

std::string FakeKubeApi::NowLocked() const { return FormatRfc3339(clock_.Wall()); }

void FakeKubeApi::AppendLogLocked(LogEvent ev) {
  log_.push_back(std::move(ev));
  while (log_.size() > kMaxLog) {
    min_rv_ = log_.front().rv;
    log_.pop_front();
  }
  cv_.notify_all();
}

Json FakeKubeApi::CommitLocked(const Gvr& r, const Key& key, Json obj, const char* type) {
  obj["metadata"]["resourceVersion"] = std::to_string(++rv_);
  Objs(r)[key] = obj;
  AppendLogLocked({rv_, r, key.first, type, obj});
  return obj;
}

Result<Json> FakeKubeApi::CreateLocked(const Gvr& r, std::string ns, Json o) {
  if (!o.is_object()) return InvalidArgument("create " + Qualified(r) + ": body is not an object");
  if (!o["metadata"].is_object()) o["metadata"] = Json::object();
  Json& md = o["metadata"];
  std::string name = Name(o);
  if (name.empty()) {
    std::string prefix = GetString(o, {"metadata", "generateName"});
    if (prefix.empty()) return InvalidArgument(Qualified(r) + ": metadata.name or generateName is required");
    char suffix[16];
    std::snprintf(suffix, sizeof suffix, "%05llx", static_cast<unsigned long long>(uid_seq_ + 1) & 0xFFFFF);
    name = prefix + suffix;
    md["name"] = name;
  }
  std::string obj_ns = Namespace(o);
  if (r.namespaced) {
    if (ns.empty()) ns = obj_ns;
    if (ns.empty()) return InvalidArgument(Qualified(r) + " \"" + name + "\": namespace is required");
    if (!obj_ns.empty() && obj_ns != ns) {
      return InvalidArgument("the namespace of the provided object does not match the namespace sent on the request");
    }
    md["namespace"] = ns;
  } else {
    md.erase("namespace");
    ns.clear();
  }
  Key key{ns, name};
  if (Objs(r).count(key) != 0) {
    return Error{ErrorCode::kAlreadyExists, Qualified(r) + " \"" + name + "\" already exists"};
  }
  char uid[64];
  std::snprintf(uid, sizeof uid, "00000000-0000-4000-8000-%012llx", static_cast<unsigned long long>(++uid_seq_));
  md["uid"] = uid;
  md["creationTimestamp"] = NowLocked();
  md["generation"] = 1;
  md.erase("resourceVersion");
  md.erase("deletionTimestamp");
  if (!o.contains("apiVersion")) o["apiVersion"] = r.ApiVersion();
  if (!o.contains("kind") && !r.kind.empty()) o["kind"] = r.kind;
  return CommitLocked(r, key, std::move(o), "ADDED");
}

Result<Json> FakeKubeApi::WriteLocked(const Gvr& r, const Key& key, Json desired, const std::string& sub,
                                      const std::string& expected_rv) {
  auto& objs = Objs(r);
  auto it = objs.find(key);
  if (it == objs.end()) return NotFoundError(r, key.second);
  const Json cur = it->second;
  const bool has_status = HasStatusLocked(r);
  if (!sub.empty() && !(sub == "status" && has_status)) {
    return NotFound(Qualified(r) + " \"" + key.second + "\": no subresource \"" + sub + "\"");
  }
  if (!desired.is_object()) return InvalidArgument(Qualified(r) + " \"" + key.second + "\": body is not an object");
  if (!expected_rv.empty() && expected_rv != ResourceVersion(cur)) return ConflictError(r, key.second);
  Json next;
  if (sub == "status") {
    next = cur;
    if (desired.contains("status")) {
      next["status"] = desired["status"];
    } else {
      next.erase("status");
    }
  } else {
    next = std::move(desired);
    if (!next["metadata"].is_object()) next["metadata"] = Json::object();
    for (const char* k : {"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                          "generation", "namespace", "name", "resourceVersion"}) {
      if (const Json* v = FindPath(cur, {"metadata", k}); v != nullptr) {
        next["metadata"][k] = *v;
      } else {
        next["metadata"].erase(k);
      }
    }
    if (has_status) {
      if (cur.contains("status")) {
        next["status"] = cur["status"];
      } else {
        next.erase("status");
      }
    }
    if (!next.contains("apiVersion") && cur.contains("apiVersion")) next["apiVersion"] = cur["apiVersion"];
    if (!next.contains("kind") && cur.contains("kind")) next["kind"] = cur["kind"];
    Json a = next, b = cur;
    a.erase("metadata");
    b.erase("metadata");
    if (has_status) {
      a.erase("status");
      b.erase("status");
    }
    if (a != b) next["metadata"]["generation"] = Generation(cur) + 1;
  }
  next["metadata"]["resourceVersion"] = ResourceVersion(cur);
  if (next == cur) return cur;  // no-op write: no new version, no event
  if (FindPath(next, {"metadata", "deletionTimestamp"}) != nullptr && !HasFinalizers(next)) {
    return RemoveLocked(r, key, std::move(next));
  }
  return CommitLocked(r, key, std::move(next), "MODIFIED");
}

Json FakeKubeApi::RemoveLocked(const Gvr& r, const Key& key, Json last) {
  Objs(r).erase(key);
  last["metadata"]["resourceVersion"] = std::to_string(++rv_);
  std::string uid = Uid(last);
  for (auto a = applied_.begin(); a != applied_.end();) {
    const auto& [ag, ans, aname, asub, amgr] = a->first;
    a = (ag == r && ans == key.first && aname == key.second) ? applied_.erase(a) : std::next(a);
  }
  AppendLogLocked({rv_, r, key.first, "DELETED", last});
  if (gc_ && !uid.empty()) CollectGarbageLocked(uid);
  return last;
}

void FakeKubeApi::CollectGarbageLocked(const std::string& owner_uid) {
  std::vector<std::pair<Gvr, Key>> dependents;
  for (const auto& [gvr, objs] : objects_) {
    for (const auto& [key, obj] : objs) {
      const Json* refs = FindPath(obj, {"metadata", "ownerReferences"});
      if (refs == nullptr || !refs->is_array()) continue;
      for (const Json& ref : *refs) {
        if (GetString(ref, {"uid"}) == owner_uid) {
          dependents.emplace_back(gvr, key);
          break;
        }
      }
    }
  }
  for (const auto& [gvr, key] : dependents) (void)DeleteLocked(gvr, key, "");
}

Status FakeKubeApi::DeleteLocked(const Gvr& r, const Key& key, const std::string& uid_precondition) {
  auto& objs = Objs(r);
  auto it = objs.find(key);
  if (it == objs.end()) return NotFoundError(r, key.second);
  if (!uid_precondition.empty() && Uid(it->second) != uid_precondition) {
    return Conflict("Precondition failed: UID in precondition: " + uid_precondition +
                    ", UID in object meta: " + Uid(it->second));
  }
  if (HasFinalizers(it->second)) {
    if (FindPath(it->second, {"metadata", "deletionTimestamp"}) == nullptr) {
      Json next = it->second;
      next["metadata"]["deletionTimestamp"] = NowLocked();
      next["metadata"]["deletionGracePeriodSeconds"] = 0;
      CommitLocked(r, key, std::move(next), "MODIFIED");
    }
    return Status::Ok();
  }
  RemoveLocked(r, key, it->second);
  return Status::Ok();
}

// --- KubeApi ---

Result<Json> FakeKubeApi::Get(const Gvr& r, const std::string& ns, const std::string& name) {
  std::lock_guard l(mu_);
  if (auto e = BeginLocked({Verb::kGet, r.resource, ns, name, "", ""})) return *e;
  auto& objs = Objs(r);
  auto it = objs.find(KeyFor(r, ns, name));
  if (it == objs.end()) return NotFoundError(r, name);
  return it->second;
}

Result<Json> FakeKubeApi::List(const Gvr& r, const std::string& ns, const ListOptions& opts) {
  std::lock_guard l(mu_);
  if (auto e = BeginLocked({Verb::kList, r.resource, ns, "", "", ""})) return *e;
  auto labels = LabelSelector::Parse(opts.label_selector);
  if (!labels) return labels.error();
  auto fields = ParseFieldSelector(opts.field_selector);
  if (!fields) return fields.error();
  uint64_t list_rv = rv_;
  std::optional<Key> after;
  if (!opts.continue_token.empty()) {
    // Token: "<list rv>|<ns>|<name>" of the last item returned.
    size_t a = opts.continue_token.find('|');
    size_t b = a == std::string::npos ? a : opts.continue_token.find('|', a + 1);
    auto rv = a == std::string::npos ? std::nullopt : ParseRv(opts.continue_token.substr(0, a));
    if (!rv || b == std::string::npos) return InvalidArgument("invalid continue token");
    if (*rv < min_rv_) {
      return Error{ErrorCode::kGone, "The provided continue parameter is too old to display a consistent list result."};
    }
    list_rv = *rv;
    after = Key{opts.continue_token.substr(a + 1, b - a - 1), opts.continue_token.substr(b + 1)};
  }
  Json items = Json::array();
  std::string cont;
  for (const auto& [key, obj] : Objs(r)) {
    if (after && !(*after < key)) continue;
    if (r.namespaced && !ns.empty() && key.first != ns) continue;
    if (!labels->MatchesObject(obj) || !FieldsMatch(*fields, obj)) continue;
    if (opts.limit > 0 && static_cast<int>(items.size()) == opts.limit) {
      const Json& last = items.back();
      cont = std::to_string(list_rv) + "|" + Namespace(last) + "|" + Name(last);
      break;
    }
    items.push_back(obj);
  }
  Json md = {{"resourceVersion", std::to_string(list_rv)}};
  if (!cont.empty()) md["continue"] = cont;
  return Json{{"apiVersion", r.ApiVersion()}, {"kind", r.kind + "List"}, {"metadata", md}, {"items", items}};
}

Result<Json> FakeKubeApi::Create(const Gvr& r, const std::string& ns, const Json& obj) {
  std::lock_guard l(mu_);
  std::string n = r.namespaced && ns.empty() ? Namespace(obj) : ns;
  if (auto e = BeginLocked({Verb::kCreate, r.resource, n, Name(obj), "", ""})) return *e;
  return CreateLocked(r, n, obj);
}

Result<Json> FakeKubeApi::Update(const Gvr& r, const std::string& ns, const Json& obj, const std::string& sub) {
  std::lock_guard l(mu_);
  std::string name = Name(obj);
  std::string n = r.namespaced ? (ns.empty() ? Namespace(obj) : ns) : "";
  if (auto e = BeginLocked({Verb::kUpdate, r.resource, n, name, sub, ""})) return *e;
  if (name.empty()) return InvalidArgument("update " + Qualified(r) + ": metadata.name is required");
  return WriteLocked(r, {n, name}, obj, sub, ResourceVersion(obj));
}

Result<Json> FakeKubeApi::MergePatch(const Gvr& r, const std::string& ns, const std::string& name,
                                     const Json& patch, const std::string& sub) {
  std::lock_guard l(mu_);
  if (auto e = BeginLocked({Verb::kPatch, r.resource, ns, name, sub, ""})) return *e;
  if (!patch.is_object()) return InvalidArgument("patch " + Qualified(r) + ": patch is not an object");
  Key key = KeyFor(r, ns, name);
  auto it = Objs(r).find(key);
  if (it == Objs(r).end()) return NotFoundError(r, name);
  Json desired = it->second;
  desired.merge_patch(patch);
  return WriteLocked(r, key, std::move(desired), sub, GetString(patch, {"metadata", "resourceVersion"}));
}

Result<Json> FakeKubeApi::Apply(const Gvr& r, const std::string& ns, const std::string& name, const Json& obj,
                                const ApplyOptions& opts, const std::string& sub) {
  std::lock_guard l(mu_);
  std::string n = r.namespaced ? (ns.empty() ? Namespace(obj) : ns) : "";
  if (auto e = BeginLocked({Verb::kApply, r.resource, n, name, sub, opts.field_manager})) return *e;
  if (!obj.is_object()) return InvalidArgument("apply " + Qualified(r) + ": body is not an object");
  if (opts.field_manager.empty()) return InvalidArgument("apply " + Qualified(r) + ": fieldManager is required");
  if (!Name(obj).empty() && Name(obj) != name) {
    return InvalidArgument("apply " + Qualified(r) + ": metadata.name does not match the request");
  }
  Json body = obj;
  body["metadata"]["name"] = name;
  if (r.namespaced) body["metadata"]["namespace"] = n;
  Key key{n, name};
  auto applied_key = std::make_tuple(r, n, name, sub, opts.field_manager);
  auto it = Objs(r).find(key);
  if (it == Objs(r).end()) {
    if (!sub.empty()) return NotFoundError(r, name);
    auto created = CreateLocked(r, n, body);
    if (created) applied_[applied_key] = body;
    return created;
  }
  Json patch = Json::object();
  if (auto prev = applied_.find(applied_key); prev != applied_.end()) patch = RemovedFields(prev->second, body);
  patch.merge_patch(body);
  Json desired = it->second;
  desired.merge_patch(patch);
  auto written = WriteLocked(r, key, std::move(desired), sub, ResourceVersion(obj));
  if (written) applied_[applied_key] = body;
  return written;
}

Status FakeKubeApi::Delete(const Gvr& r, const std::string& ns, const std::string& name,
                           const std::string& uid_precondition, std::optional<int64_t> grace_period_seconds) {
  std::lock_guard l(mu_);
  if (auto e = BeginLocked({Verb::kDelete, r.resource, ns, name, "", ""})) return *e;
  deletes_.push_back(DeleteRecord{r.resource, ns, name, uid_precondition, grace_period_seconds});
  return DeleteLocked(r, KeyFor(r, ns, name), uid_precondition);
}

Status FakeKubeApi::Watch(const Gvr& r, const std::string& ns, const WatchOptions& opts, const WatchHandler& handler,
                          const std::atomic<bool>& stop) {
  Watcher w;
  std::vector<WatchEvent> initial;
  {
    std::lock_guard l(mu_);
    if (auto e = BeginLocked({Verb::kWatch, r.resource, ns, "", "", ""})) return *e;
    auto labels = LabelSelector::Parse(opts.label_selector);
    if (!labels) return labels.error();
    auto fields = ParseFieldSelector(opts.field_selector);
    if (!fields) return fields.error();
    w.gvr = r;
    w.ns = r.namespaced ? ns : "";
    w.labels = std::move(*labels);
    w.fields = std::move(*fields);
    w.bookmarks = opts.allow_bookmarks;
    if (opts.resource_version.empty() || opts.resource_version == "0") {
      w.cursor = rv_;
      for (const auto& [key, obj] : Objs(r)) {
        if (w.Matches(r, key.first, obj)) initial.push_back({"ADDED", obj});
      }
    } else {
      auto rv = ParseRv(opts.resource_version);
      if (!rv) return InvalidArgument("invalid resourceVersion \"" + opts.resource_version + "\"");
      if (*rv < min_rv_) {
        return Error{ErrorCode::kGone, "too old resource version: " + opts.resource_version + " (" +
                                           std::to_string(min_rv_) + ")"};
      }
      w.cursor = *rv;
    }
    watchers_.insert(&w);
    cv_.notify_all();
  }
  Status result;
  bool keep = true;
  for (const WatchEvent& ev : initial) {
    if (stop.load() || !(keep = handler(ev))) break;
  }
  while (keep && !stop.load()) {
    std::vector<WatchEvent> batch;
    bool end = false;
    {
      std::unique_lock l(mu_);
      cv_.wait_for(l, kWatchPoll, [&] {
        return stop.load() || w.closed || w.gone || !w.bookmarks_pending.empty() ||
               (!log_.empty() && log_.back().rv > w.cursor);
      });
      if (stop.load()) break;
      if (w.gone) {
        result = Error{ErrorCode::kGone, "watch of " + Qualified(r) + ": resourceVersion expired (410)"};
        break;
      }
      auto it = std::upper_bound(log_.begin(), log_.end(), w.cursor,
                                 [](uint64_t rv, const LogEvent& ev) { return rv < ev.rv; });
      for (; it != log_.end(); ++it) {
        while (!w.bookmarks_pending.empty() && w.bookmarks_pending.front().first < it->rv) {
          batch.push_back(std::move(w.bookmarks_pending.front().second));
          w.bookmarks_pending.pop_front();
        }
        if (w.Matches(it->gvr, it->ns, it->object)) batch.push_back({it->type, it->object});
        w.cursor = it->rv;
      }
      for (auto& [rv, ev] : w.bookmarks_pending) batch.push_back(std::move(ev));
      w.bookmarks_pending.clear();
      end = w.closed;
    }
    for (const WatchEvent& ev : batch) {
      if (stop.load() || !(keep = handler(ev))) break;
    }
    if (end) break;
  }
  std::lock_guard l(mu_);
  watchers_.erase(&w);
  cv_.notify_all();
  return result;
}

// --- Faults and control ---

void FakeKubeApi::FailNext(int n, ErrorCode code, std::optional<Verb> verb, std::string message) {
  std::lock_guard l(mu_);
  if (n > 0) faults_.push_back({n, code, verb, std::move(message)});
}

void FakeKubeApi::ClearFaults() {
  std::lock_guard l(mu_);
  faults_.clear();
}

void FakeKubeApi::SetFaultHook(FaultHook hook) {
  std::lock_guard l(mu_);
  hook_ = std::move(hook);
}

void FakeKubeApi::ExpireResourceVersions() {
  std::lock_guard l(mu_);
  min_rv_ = rv_;
  log_.clear();
  for (Watcher* w : watchers_) w->gone = true;
  cv_.notify_all();
}

void FakeKubeApi::CloseWatches() {
  std::lock_guard l(mu_);
  for (Watcher* w : watchers_) w->closed = true;
  cv_.notify_all();
}

void FakeKubeApi::SendBookmarks() {
  std::lock_guard l(mu_);
  for (Watcher* w : watchers_) {
    if (!w->bookmarks) continue;
    Json obj = {{"apiVersion", w->gvr.ApiVersion()},
                {"kind", w->gvr.kind},
                {"metadata", {{"resourceVersion", std::to_string(rv_)}}}};
    w->bookmarks_pending.emplace_back(rv_, WatchEvent{"BOOKMARK", std::move(obj)});
  }
  cv_.notify_all();
}

void FakeKubeApi::SetStatusSubresource(const Gvr& r, bool enabled) {
  std::lock_guard l(mu_);
  status_subresource_[r] = enabled;
}

void FakeKubeApi::SetGarbageCollection(bool enabled) {
  std::lock_guard l(mu_);
  gc_ = enabled;
}

// --- Inspection ---

uint64_t FakeKubeApi::CallCount() const {
  std::lock_guard l(mu_);
  uint64_t n = 0;
  for (const auto& [v, c] : counts_) n += c;
  return n;
}

uint64_t FakeKubeApi::CallCount(Verb v) const {
  std::lock_guard l(mu_);
  auto it = counts_.find(v);
  return it == counts_.end() ? 0 : it->second;
}

uint64_t FakeKubeApi::WriteCount() const {
  std::lock_guard l(mu_);
  uint64_t n = 0;
  for (const auto& [v, c] : counts_) {
    if (v != Verb::kGet && v != Verb::kList && v != Verb::kWatch) n += c;
  }
  return n;
}

std::vector<FakeKubeApi::Call> FakeKubeApi::Calls() const {
  std::lock_guard l(mu_);
  return calls_;
}

std::vector<FakeKubeApi::DeleteRecord> FakeKubeApi::Deletes() const {
  std::lock_guard l(mu_);
  return deletes_;
}

void FakeKubeApi::ClearCalls() {
  std::lock_guard l(mu_);
  calls_.clear();
  counts_.clear();
}

size_t FakeKubeApi::ActiveWatches() const {
  std::lock_guard l(mu_);
  return watchers_.size();
}

bool FakeKubeApi::WaitForWatches(size_t n, Nanos timeout) const {
  std::unique_lock l(mu_);
  return cv_.wait_for(l, timeout, [&] { return watchers_.size() >= n; });
}

std::string FakeKubeApi::CurrentResourceVersion() const {
  std::lock_guard l(mu_);
  return std::to_string(rv_);
}

std::vector<Json> FakeKubeApi::Objects(const Gvr& r) const {
  std::lock_guard l(mu_);
  std::vector<Json> out;
  if (auto it = objects_.find(r); it != objects_.end()) {
    for (const auto& [key, obj] : it->second) out.push_back(obj);
  }
  return out;
}

std::optional<Json> FakeKubeApi::Peek(const Gvr& r, const std::string& ns, const std::string& name) const {
  std::lock_guard l(mu_);
  auto it = objects_.find(r);
  if (it == objects_.end()) return std::nullopt;
  auto o = it->second.find(KeyFor(r, ns, name));
  if (o == it->second.end()) return std::nullopt;
  return o->second;
}

}  // namespace lockstep::kube
