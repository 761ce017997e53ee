#include "lockstep/coordinator/kube_adapters.h"

#include <algorithm>
#include <cctype>
#include <random>

#include "lockstep/common/log.h"
#include "lockstep/kube/gvr.h"
#include "lockstep/kube/object_meta.h"

namespace lockstep::coordinator {
namespace {

using kube::Json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

milliseconds Until(Clock::time_point t) {
  auto d = std::chrono::duration_cast<milliseconds>(t - Clock::now());
  return std::max(d, milliseconds(0));
}

std::string RandomSuffix() {
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::mt19937_64 rng(kube::RandomSeed());
  std::string s;
  for (int i = 0; i < 5; ++i) s += kChars[rng() % 36];
  return s;
}

bool DnsLabel(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
      return false;
    }
  }
  return s.front() != '-' && s.back() != '-';
}

// Labels and annotations by which a job's controller (JobSet, batch Job, the
// Kubeflow operators) would take a pod for its own.
bool ControllerKey(const std::string& key) {
  for (const char* prefix : {"jobset.sigs.k8s.io/", "batch.kubernetes.io/", "training.kubeflow.org/",
                             "trainer.kubeflow.org/", "kubeflow.org/"}) {
    if (key.rfind(prefix, 0) == 0) return true;
  }
  return key == "job-name" || key == "controller-uid";
}

void DropControllerKeys(Json& map) {
  if (!map.is_object()) return;
  for (auto it = map.begin(); it != map.end();) {
    if (ControllerKey(it.key())) {
      it = map.erase(it);
    } else {
      ++it;
    }
  }
}

// Sets env `name` in a container (replacing an existing one).
void SetEnv(Json& container, const std::string& name, Json entry) {
  entry["name"] = name;
  Json& env = container["env"];
  if (!env.is_array()) env = Json::array();
  for (auto it = env.begin(); it != env.end();) {
    if (it->is_object() && it->value("name", "") == name) {
      it = env.erase(it);
    } else {
      ++it;
    }
  }
  env.push_back(std::move(entry));
}

void RemoveEnv(Json& container, const std::string& name) {
  Json& env = container["env"];
  if (!env.is_array()) return;
  for (auto it = env.begin(); it != env.end();) {
    if (it->is_object() && it->value("name", "") == name) {
      it = env.erase(it);
    } else {
      ++it;
    }
  }
}

std::string PodPhase(const Json& pod) { return kube::GetString(pod, {"status", "phase"}); }

}  // namespace

bool Transient(const Error& e) {
  switch (e.code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kAlreadyExists:
    case ErrorCode::kConflict:
    case ErrorCode::kNotFound:
      return false;
    default:
      return true;  // kUnavailable (5xx, 429, network), kUnauthorized (403 includes quota), kGone, kInternal
  }
}

// --- WorkerLoop ---

void WorkerLoop::Start(milliseconds period, std::function<milliseconds()> body) {
  Stop();
  {
    std::lock_guard l(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this, period, body = std::move(body)] {
    std::unique_lock l(mu_);
    while (!stop_) {
      woken_ = false;
      l.unlock();
      milliseconds next = std::min(body(), period);
      l.lock();
      cv_.wait_for(l, next, [this] { return stop_ || woken_; });
    }
  });
}

void WorkerLoop::Wake() {
  std::lock_guard l(mu_);
  woken_ = true;
  cv_.notify_all();
}

void WorkerLoop::Stop() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

// --- KubeSpareLauncher ---

Status KubeSpareLauncher::Check(const KubeSpareOptions& o) {
  if (!DnsLabel(o.job, 40)) {
    return InvalidArgument("--job \"" + o.job +
                           "\" must be a DNS label of at most 40 characters (lowercase letters, digits, '-') in "
                           "Kubernetes mode: it names the spare pods");
  }
  const Json& t = o.pod_template;
  if (!t.is_object()) return InvalidArgument("the spare pod template must be a JSON object (a Pod)");
  if (t.contains("kind") && t["kind"] != "Pod") {
    return InvalidArgument("the spare pod template must be a Pod (kind is " + t["kind"].dump() + ")");
  }
  const Json* containers = kube::FindPath(t, {"spec", "containers"});
  if (!containers || !containers->is_array() || containers->empty()) {
    return InvalidArgument("the spare pod template has no spec.containers");
  }
  return Status::Ok();
}

KubeSpareLauncher::KubeSpareLauncher(kube::KubeApi& api, KubeSpareOptions options)
    : api_(api), options_(std::move(options)), suffix_(options_.suffix.empty() ? RandomSuffix() : options_.suffix) {}

KubeSpareLauncher::~KubeSpareLauncher() { loop_.Stop(); }

void KubeSpareLauncher::SetCoordinatorUrl(std::string url) {
  std::lock_guard l(mu_);
  options_.coordinator_url = std::move(url);
}

Json KubeSpareLauncher::SparePod(const std::string& name) const {
  Json pod = options_.pod_template;
  pod["apiVersion"] = "v1";
  pod["kind"] = "Pod";
  pod.erase("status");
  Json& meta = pod["metadata"];
  if (!meta.is_object()) meta = Json::object();
  for (const char* k :
       {"generateName", "resourceVersion", "uid", "creationTimestamp", "ownerReferences", "managedFields",
        "deletionTimestamp", "deletionGracePeriodSeconds", "finalizers", "generation", "selfLink"}) {
    meta.erase(k);
  }
  meta["name"] = name;
  meta["namespace"] = options_.ns;
  DropControllerKeys(meta["labels"]);
  DropControllerKeys(meta["annotations"]);
  if (meta["annotations"].empty()) meta.erase("annotations");
  meta["labels"][kJobLabel] = options_.job;
  meta["labels"][kRoleLabel] = "spare";
  Json& spec = pod["spec"];
  spec.erase("nodeName");  // scheduled like the job's pods, not pinned to the template's node
  // A spare that ends is replaced by a new pod (Reap), not restarted in place
  // under the same name as a second member.
  spec["restartPolicy"] = "Never";
  std::lock_guard l(mu_);
  for (Json& c : spec["containers"]) {
    for (const char* stale : {"LOCKSTEP_RANK", "PET_NODE_RANK", "RANK"}) RemoveEnv(c, stale);
    SetEnv(c, "LOCKSTEP_COORDINATOR", Json{{"value", options_.coordinator_url}});
    SetEnv(c, "LOCKSTEP_ROLE", Json{{"value", "spare"}});
    SetEnv(c, "LOCKSTEP_POD_NAME", Json{{"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}});
    SetEnv(c, "LOCKSTEP_POD_UID", Json{{"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.uid"}}}}}});
  }
  return pod;
}

void KubeSpareLauncher::Start() {
  // Spare pods of this job that an earlier coordinator created: their end is
  // reported too (it may still count them as starting).
  auto list = api_.List(
      kube::gvr::kPods, options_.ns,
      kube::ListOptions{.label_selector = std::string(kJobLabel) + "=" + options_.job + "," + kRoleLabel + "=spare"});
  if (list.ok()) {
    std::lock_guard l(mu_);
    for (const Json& p : (*list)["items"]) {
      std::string phase = PodPhase(p);
      if (phase != "Failed" && phase != "Succeeded") created_.insert(kube::Name(p));
    }
    if (!created_.empty()) {
      log::Info("adopted spare pods", {{"job", options_.job}, {"count", std::to_string(created_.size())}});
    }
  } else {
    log::Warn("listing spare pods failed (retried every poll)", {{"error", list.error().message}});
  }
  loop_.Start(options_.poll_interval, [this] { return Round(); });
}

Result<SpareHandle> KubeSpareLauncher::Launch() {
  std::string name;
  {
    std::lock_guard l(mu_);
    name = options_.job + "-spare-" + std::to_string(counter_++) + "-" + suffix_;
  }
  PendingPod p{name, SparePod(name), kube::Backoff(options_.backoff, kube::RandomSeed()), Clock::now(), false};
  {
    std::lock_guard l(mu_);
    pending_.push_back(std::move(p));
  }
  loop_.Wake();
  return SpareHandle{0, name};
}

std::vector<SpareLauncher::Exited> KubeSpareLauncher::Reap() {
  std::lock_guard l(mu_);
  return std::exchange(exited_, {});
}

size_t KubeSpareLauncher::Pending() const {
  std::lock_guard l(mu_);
  return pending_.size();
}

void KubeSpareLauncher::RunOnce(bool force_list) {
  if (force_list) last_list_ = {};
  Round();
}

milliseconds KubeSpareLauncher::Round() {
  // Creations that are due, one API call each, outside the lock.
  std::vector<PendingPod> due;
  {
    std::lock_guard l(mu_);
    auto now = Clock::now();
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->due <= now) {
        due.push_back(std::move(*it));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (PendingPod& p : due) {
    auto made = api_.Create(kube::gvr::kPods, options_.ns, p.pod);
    std::string refused;
    if (made.ok()) {
      log::Info("spare pod created", {{"job", options_.job}, {"pod", p.name}, {"uid", kube::Uid(*made)}});
    } else if (made.error().code == ErrorCode::kAlreadyExists && p.failed_before) {
      // An earlier attempt that timed out may have created it: ours if it carries our labels.
      auto got = api_.Get(kube::gvr::kPods, options_.ns, p.name);
      if (got.ok() && kube::GetString(*got, {"metadata", "labels", kJobLabel}) == options_.job) {
        made = *got;
      } else {
        refused = made.error().message;
      }
    } else if (!Transient(made.error())) {
      refused = made.error().message;
    }
    std::lock_guard l(mu_);
    if (made.ok()) {
      created_.insert(p.name);
    } else if (!refused.empty()) {
      log::Error("spare pod refused", {{"job", options_.job}, {"pod", p.name}, {"error", refused}});
      exited_.push_back({SpareHandle{0, p.name}, "not created: " + refused});
    } else {
      // Transient: the spare stays "starting" and is tried again; it is not a failed start.
      auto wait = p.backoff.Next();
      if (!p.failed_before) {
        log::Warn("creating a spare pod failed, retrying with backoff",
                  {{"job", options_.job}, {"pod", p.name}, {"error", made.error().message}});
      }
      p.failed_before = true;
      p.due = Clock::now() + wait;
      pending_.push_back(std::move(p));
    }
  }
  // The spare pods that ended, at most once per poll interval. Listed by job
  // only: a spare that took a rank is relabelled role=rank (KubeJobSync) and
  // is still the launcher's to report when it ends.
  bool any_created;
  {
    std::lock_guard l(mu_);
    any_created = !created_.empty();
  }
  auto next_list = last_list_ + options_.poll_interval;
  if (any_created && Clock::now() >= next_list) {
    last_list_ = Clock::now();
    next_list = last_list_ + options_.poll_interval;
    auto list = api_.List(kube::gvr::kPods, options_.ns,
                          kube::ListOptions{.label_selector = std::string(kJobLabel) + "=" + options_.job});
    if (!list.ok()) {
      if (!list_failed_)
        log::Warn("listing spare pods failed", {{"job", options_.job}, {"error", list.error().message}});
      list_failed_ = true;
    } else {
      list_failed_ = false;
      std::map<std::string, const Json*> by_name;
      for (const Json& p : (*list)["items"]) by_name[kube::Name(p)] = &p;
      std::lock_guard l(mu_);
      for (auto it = created_.begin(); it != created_.end();) {
        auto found = by_name.find(*it);
        std::string how;
        if (found == by_name.end()) {
          how = "pod deleted";
        } else if (std::string phase = PodPhase(*found->second); phase == "Failed" || phase == "Succeeded") {
          how = "pod " + phase;
          std::string reason = kube::GetString(*found->second, {"status", "reason"});
          if (!reason.empty()) how += " (" + reason + ")";
        }
        if (how.empty()) {
          ++it;
          continue;
        }
        exited_.push_back({SpareHandle{0, *it}, how});
        it = created_.erase(it);
      }
    }
  }
  std::lock_guard l(mu_);
  milliseconds sleep = options_.poll_interval;
  if (!created_.empty()) sleep = std::min(sleep, Until(next_list));
  for (const auto& p : pending_) sleep = std::min(sleep, Until(p.due));
  return sleep;
}

// --- KubePodFencer ---

KubePodFencer::KubePodFencer(kube::KubeApi& api, KubeFencerOptions options) : api_(api), options_(std::move(options)) {}

KubePodFencer::~KubePodFencer() { loop_.Stop(); }

void KubePodFencer::Start() {
  loop_.Start(milliseconds(1000), [this] { return Round(); });
}

Status KubePodFencer::Fence(const MemberRef& m) {
  if (m.pod_name.empty() && m.host.empty()) {
    return InvalidArgument("cannot fence member " + m.member + ": no pod name and no host (only marked dead)");
  }
  {
    std::lock_guard l(mu_);
    tasks_.push_back(Task{m, kube::Backoff(options_.backoff, kube::RandomSeed()), Clock::now()});
  }
  loop_.Wake();
  return Status::Ok();
}

size_t KubePodFencer::Pending() const {
  std::lock_guard l(mu_);
  return tasks_.size();
}

std::vector<std::string> KubePodFencer::Results() const {
  std::lock_guard l(mu_);
  return results_;
}

void KubePodFencer::RunOnce() { Round(); }

bool KubePodFencer::Attempt(const MemberRef& m, std::string& result) {
  std::string name = m.pod_name, uid = m.pod_uid;
  if (name.empty()) {
    // No pod name (a library that does not send it): the pod with the member's IP.
    auto list = api_.List(kube::gvr::kPods, options_.ns, kube::ListOptions{.field_selector = "status.podIP=" + m.host});
    if (!list.ok()) {
      result = "listing pods by IP " + m.host + ": " + list.error().message;
      return !Transient(list.error());
    }
    std::vector<const Json*> live;
    for (const Json& p : (*list)["items"]) {
      std::string phase = PodPhase(p);
      if (phase != "Failed" && phase != "Succeeded") live.push_back(&p);
    }
    if (live.size() != 1) {
      result = "no single pod with IP " + m.host + " (" + std::to_string(live.size()) + " found): nothing deleted";
      return true;
    }
    name = kube::Name(*live[0]);
    uid = kube::Uid(*live[0]);
  }
  Status s = api_.Delete(kube::gvr::kPods, options_.ns, name, uid, int64_t{0});
  if (s.ok()) {
    result = "deleted pod " + name;
    return true;
  }
  if (s.error().code == ErrorCode::kNotFound) {
    result = "pod " + name + " already gone";
    return true;
  }
  if (s.error().code == ErrorCode::kConflict) {
    result = "pod " + name + " is a newer pod (uid is not " + uid + "): left alone";
    return true;
  }
  result = "deleting pod " + name + ": " + s.error().message;
  return !Transient(s.error());
}

milliseconds KubePodFencer::Round() {
  std::vector<Task> due;
  {
    std::lock_guard l(mu_);
    auto now = Clock::now();
    for (auto it = tasks_.begin(); it != tasks_.end();) {
      if (it->due <= now) {
        due.push_back(std::move(*it));
        it = tasks_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (Task& t : due) {
    std::string result;
    bool done = Attempt(t.member, result);
    std::lock_guard l(mu_);
    if (done) {
      log::Info("fenced", {{"member", t.member.member}, {"result", result}});
      results_.push_back(result);
    } else {
      auto wait = t.backoff.Next();
      if (t.backoff.attempts() == 1)
        log::Warn("fencing failed, retrying with backoff", {{"member", t.member.member}, {"error", result}});
      t.due = Clock::now() + wait;
      tasks_.push_back(std::move(t));
    }
  }
  std::lock_guard l(mu_);
  milliseconds sleep(1000);
  for (const auto& t : tasks_) sleep = std::min(sleep, Until(t.due));
  return sleep;
}

// --- KubePodProbe ---

KubePodProbe::KubePodProbe(kube::KubeApi& api, std::string ns, milliseconds poll_interval, std::string label_selector)
    : api_(api), ns_(std::move(ns)), poll_interval_(poll_interval), label_selector_(std::move(label_selector)) {}

KubePodProbe::~KubePodProbe() { loop_.Stop(); }

void KubePodProbe::Start() {
  loop_.Start(poll_interval_, [this] {
    RunOnce();
    return poll_interval_;
  });
}

std::optional<std::string> KubePodProbe::Gone(const MemberRef& m) {
  if (m.pod_name.empty() && m.host.empty()) return std::nullopt;
  std::lock_guard l(mu_);
  auto [it, fresh] = watched_.try_emplace(m.member);
  it->second.asked = true;
  if (fresh || it->second.ref.pod_name != m.pod_name || it->second.ref.pod_uid != m.pod_uid ||
      it->second.ref.host != m.host) {
    it->second = Watched{m, true, std::nullopt, {}, false};  // re-registered in another pod: start over
  }
  return it->second.gone;
}

bool KubePodProbe::PodStays(const MemberRef& m) {
  std::lock_guard l(mu_);
  auto it = watched_.find(m.member);
  return it != watched_.end() && it->second.gone && it->second.pod_stays;
}

std::optional<std::string> KubePodProbe::Verdict(Watched& w, const Json* pod) {
  const MemberRef& m = w.ref;
  if (!pod) {
    if (m.pod_name.empty()) return std::nullopt;  // matched by IP only: no pod is no evidence
    return "pod " + m.pod_name + " was deleted";
  }
  std::string name = kube::Name(*pod);
  if (!m.pod_uid.empty() && kube::Uid(*pod) != m.pod_uid) {
    return "pod " + name + " was replaced (uid " + kube::Uid(*pod) + ", the member's was " + m.pod_uid + ")";
  }
  std::string phase = PodPhase(*pod);
  if (phase == "Failed" || phase == "Succeeded") {
    std::string reason = kube::GetString(*pod, {"status", "reason"});
    return "pod " + name + " is " + phase + (reason.empty() ? "" : " (" + reason + ")");
  }
  if (kube::FindPath(*pod, {"metadata", "deletionTimestamp"})) return "pod " + name + " is being deleted";
  const Json* statuses = kube::FindPath(*pod, {"status", "containerStatuses"});
  if (statuses && statuses->is_array()) {
    for (const Json& cs : *statuses) {
      std::string c = cs.value("name", "");
      if (const Json* term = kube::FindPath(cs, {"state", "terminated"}); term && term->is_object()) {
        std::string reason = term->value("reason", "");
        w.pod_stays = true;
        return "container " + c + " of pod " + name + " terminated (exit code " +
               std::to_string(term->value("exitCode", 0)) + (reason.empty() ? "" : ", " + reason) + ")";
      }
      int64_t restarts = cs.value("restartCount", int64_t{0});
      auto [it, fresh] = w.restarts.try_emplace(c, restarts);
      if (!fresh && restarts > it->second) {
        w.pod_stays = true;
        return "container " + c + " of pod " + name + " restarted (restart count " + std::to_string(restarts) + ")";
      }
    }
  }
  return std::nullopt;
}

void KubePodProbe::RunOnce() {
  {
    std::lock_guard l(mu_);
    for (auto it = watched_.begin(); it != watched_.end();) {
      if (!it->second.asked) {
        it = watched_.erase(it);  // no longer an alive member
      } else {
        it->second.asked = false;
        ++it;
      }
    }
    if (watched_.empty()) return;
  }
  auto list = api_.List(kube::gvr::kPods, ns_, kube::ListOptions{.label_selector = label_selector_});
  if (!list.ok()) {
    if (!list_failed_) log::Warn("listing pods failed (members are not checked)", {{"error", list.error().message}});
    list_failed_ = true;
    return;
  }
  list_failed_ = false;
  if (!label_selector_.empty()) {
    // Members' pods the selector did not bring (no job label, or not cached
    // yet): read each, outside the lock. Gone from the API is gone.
    std::set<std::string> listed, missing;
    for (const Json& p : (*list)["items"]) listed.insert(kube::Name(p));
    {
      std::lock_guard l(mu_);
      for (const auto& [id, w] : watched_) {
        if (!w.gone && !w.ref.pod_name.empty() && !listed.count(w.ref.pod_name)) missing.insert(w.ref.pod_name);
      }
    }
    for (const std::string& name : missing) {
      auto got = api_.Get(kube::gvr::kPods, ns_, name);
      if (got.ok()) {
        (*list)["items"].push_back(std::move(*got));
      } else if (got.error().code != ErrorCode::kNotFound) {
        if (!list_failed_) log::Warn("reading a member's pod failed", {{"pod", name}, {"error", got.error().message}});
        list_failed_ = true;
        return;
      }
    }
  }
  std::map<std::string, const Json*> by_name, by_ip;
  for (const Json& p : (*list)["items"]) {
    by_name[kube::Name(p)] = &p;
    std::string ip = kube::GetString(p, {"status", "podIP"}), phase = PodPhase(p);
    if (!ip.empty() && (by_ip.count(ip) == 0 || (phase != "Failed" && phase != "Succeeded"))) by_ip[ip] = &p;
  }
  std::lock_guard l(mu_);
  for (auto& [id, w] : watched_) {
    if (w.gone) continue;
    const Json* pod = nullptr;
    if (!w.ref.pod_name.empty()) {
      auto it = by_name.find(w.ref.pod_name);
      if (it != by_name.end()) pod = it->second;
    } else if (auto it = by_ip.find(w.ref.host); it != by_ip.end()) {
      pod = it->second;
    }
    w.pod_stays = false;
    w.gone = Verdict(w, pod);
    if (w.gone) w.asked = true;  // kept until the coordinator asks
  }
}

// --- ConfigMapStateStore ---

ConfigMapStateStore::ConfigMapStateStore(kube::KubeApi& api, ConfigMapStoreOptions options)
    : api_(api), options_(std::move(options)) {}

Status ConfigMapStateStore::Save(const std::string& text) {
  std::lock_guard l(mu_);
  std::string what = "configmap " + options_.ns + "/" + options_.name;
  Error last = Internal("no attempt");
  milliseconds delay = options_.retry_delay;
  const auto deadline = Clock::now() + options_.deadline;
  for (int attempt = 0; attempt < options_.attempts && (attempt == 0 || Clock::now() < deadline); ++attempt) {
    if (attempt > 0 && Transient(last)) {
      std::this_thread::sleep_for(delay);
      delay *= 2;
    }
    if (!last_) {
      auto got = api_.Get(kube::gvr::kConfigMaps, options_.ns, options_.name);
      if (got.ok()) {
        last_ = *got;
      } else if (got.error().code == ErrorCode::kNotFound) {
        Json cm = {{"apiVersion", "v1"},
                   {"kind", "ConfigMap"},
                   {"metadata",
                    {{"name", options_.name}, {"namespace", options_.ns}, {"labels", {{kJobLabel, options_.job}}}}},
                   {"data", {{kStateKey, text}}}};
        auto made = api_.Create(kube::gvr::kConfigMaps, options_.ns, cm);
        if (made.ok()) {
          last_ = *made;
          return Status::Ok();
        }
        last = made.error();  // AlreadyExists: someone created it; read it next time
        continue;
      } else {
        last = got.error();
        continue;
      }
    }
    Json cm = *last_;
    cm["data"][kStateKey] = text;
    auto put = api_.Update(kube::gvr::kConfigMaps, options_.ns, cm);
    if (put.ok()) {
      last_ = *put;
      return Status::Ok();
    }
    last = put.error();
    if (last.code == ErrorCode::kConflict || last.code == ErrorCode::kNotFound) last_.reset();  // re-read
  }
  return Unavailable("saving the state in " + what + ": " + last.message);
}

Result<std::optional<std::string>> ConfigMapStateStore::Load() {
  std::lock_guard l(mu_);
  Error last = Internal("no attempt");
  milliseconds delay = options_.retry_delay;
  const auto deadline = Clock::now() + options_.deadline;
  for (int attempt = 0; attempt < options_.attempts && (attempt == 0 || Clock::now() < deadline); ++attempt) {
    if (attempt > 0) {
      std::this_thread::sleep_for(delay);
      delay *= 2;
    }
    auto got = api_.Get(kube::gvr::kConfigMaps, options_.ns, options_.name);
    if (got.ok()) {
      last_ = *got;
      const Json* v = kube::FindPath(*got, {"data", kStateKey});
      if (!v || !v->is_string()) return std::optional<std::string>();
      return std::optional<std::string>(v->get<std::string>());
    }
    if (got.error().code == ErrorCode::kNotFound) return std::optional<std::string>();
    last = got.error();
    if (!Transient(last)) break;
  }
  return Unavailable("reading the state from configmap " + options_.ns + "/" + options_.name + ": " + last.message);
}

}  // namespace lockstep::coordinator
