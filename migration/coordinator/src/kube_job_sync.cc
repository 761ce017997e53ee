#include "lockstep/coordinator/kube_job_sync.h"

#include <cmath>

#include "lockstep/common/log.h"
#include "lockstep/kube/gvr.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/kube/time_format.h"

namespace lockstep::coordinator {
namespace m = lockstep::migration;
using kube::Json;
using std::chrono::milliseconds;

namespace {

std::map<std::string, std::string> StringMap(const Json& obj, std::initializer_list<std::string_view> path) {
  std::map<std::string, std::string> out;
  const Json* j = kube::FindPath(obj, path);
  if (!j || !j->is_object()) return out;
  for (auto it = j->begin(); it != j->end(); ++it) {
    if (it->is_string()) out[it.key()] = it->get<std::string>();
  }
  return out;
}

m::PodView View(const Json& pod) {
  m::PodView v;
  v.name = kube::Name(pod);
  v.uid = kube::Uid(pod);
  v.labels = StringMap(pod, {"metadata", "labels"});
  v.annotations = StringMap(pod, {"metadata", "annotations"});
  v.phase = kube::GetString(pod, {"status", "phase"});
  const Json* del = kube::FindPath(pod, {"metadata", "deletionTimestamp"});
  v.deleting = del && !del->is_null();
  return v;
}

std::string Rfc3339(double unix_seconds) {
  auto d = std::chrono::duration_cast<WallTime::duration>(std::chrono::duration<double>(unix_seconds));
  return kube::FormatRfc3339(WallTime(d));
}

int64_t DurationMs(const m::RankMove& mv) {
  return std::max<int64_t>(0, std::llround((mv.complete - mv.start) * 1000));
}

Json PodOrNull(const std::string& pod) { return pod.empty() ? Json(nullptr) : Json(pod); }

}  // namespace

KubeJobSync::KubeJobSync(kube::KubeApi& api, Coordinator& coordinator, Clock& clock, KubeJobSyncOptions options,
                         metrics::Registry* registry, kube::EventRecorder* events)
    : api_(api),
      coordinator_(coordinator),
      clock_(clock),
      options_(std::move(options)),
      events_(events),
      status_backoff_(options_.backoff, kube::RandomSeed()) {
  if (registry) {
    trigger_requests_ = &registry->Counter(
        "lockstep_migration_trigger_requests_total",
        "Migrations asked for by the pod annotation lockstep.dev/migrate, by value and result (accepted, refused).",
        {"value", "result"});
    trigger_unknown_ = &registry->Counter("lockstep_migration_trigger_unknown_total",
                                          "Pod annotations lockstep.dev/migrate with a value that is not now, drain, "
                                          "early-warning or node-not-ready (reported, not acted on).");
    status_failures_ = &registry->Counter("lockstep_migration_status_write_failures_total",
                                          "Failed writes of the TrainingJob's status (retried with backoff).");
  }
}

KubeJobSync::~KubeJobSync() { Stop(); }

void KubeJobSync::Start() {
  loop_.Start(options_.poll_interval, [this] {
    RunOnce();
    return options_.poll_interval;
  });
}

void KubeJobSync::Stop() { loop_.Stop(); }

double KubeJobSync::Now() const { return std::chrono::duration<double>(clock_.Wall().time_since_epoch()).count(); }

void KubeJobSync::RunOnce() {
  std::lock_guard l(run_mu_);
  auto list = api_.List(kube::gvr::kPods, options_.ns,
                        kube::ListOptions{.label_selector = std::string(kJobLabel) + "=" + options_.job});
  if (!list.ok()) {
    if (!list_failed_)
      log::Warn("listing the job's pods failed", {{"job", options_.job}, {"error", list.error().message}});
    list_failed_ = true;
  } else {
    if (list_failed_) log::Info("listing the job's pods works again", {{"job", options_.job}});
    list_failed_ = false;
    std::vector<m::PodView> pods;
    for (const Json& p : (*list)["items"]) pods.push_back(View(p));
    Triggers(pods);
    Upkeep(pods);
  }
  if (!options_.training_job.empty()) {
    m::JobState s = coordinator_.Snapshot();
    WriteStatus(s);
    RecordEvents(s);
  }
}

void KubeJobSync::Triggers(const std::vector<m::PodView>& pods) {
  m::TriggerDecision d = m::DecideTriggers(pods, coordinator_.Snapshot(), remembered_);
  remembered_ = std::move(d.remember);
  for (const auto& u : d.unknown) {
    unknown_.fetch_add(1);
    if (trigger_unknown_) trigger_unknown_->Inc();
    log::Warn("unknown migration trigger ignored", {{"job", options_.job},
                                                    {"pod", u.pod},
                                                    {"annotation", std::string(m::kMigrateAnnotation) + "=" + u.value},
                                                    {"expected", "now, drain, early-warning or node-not-ready"}});
  }
  for (const auto& r : d.requests) {
    if (r.gone) {
      // Unplanned: the member is dead (the pod checks' path), its pod fenced.
      m::Outcome out = coordinator_.Apply(*r.gone);
      requested_.fetch_add(1);
      if (trigger_requests_) trigger_requests_->Inc({r.value, out.status.ok() ? "accepted" : "refused"});
      log::Write(out.status.ok() ? log::Level::kInfo : log::Level::kWarn,
                 "member taken for dead: its pod's node is NotReady",
                 {{"job", options_.job},
                  {"pod", r.pod},
                  {"member", r.member},
                  {"rank", r.request.rank >= 0 ? std::to_string(r.request.rank) : std::string("spare")},
                  {"reason", r.gone->how},
                  {"result", out.status.ok() ? std::string("fenced") : out.status.error().message}});
      continue;
    }
    // The path POST /v1/migrations takes.
    m::Outcome out = coordinator_.Apply(r.request);
    requested_.fetch_add(1);
    if (trigger_requests_) trigger_requests_->Inc({r.value, out.status.ok() ? "accepted" : "refused"});
    std::vector<log::Field> fields{{"job", options_.job},    {"pod", r.pod},
                                   {"member", r.member},     {"rank", std::to_string(r.request.rank)},
                                   {"kind", r.request.kind}, {"reason", r.request.reason}};
    if (out.status.ok()) {
      fields.emplace_back("id", out.created_id);
      log::Write(log::Level::kInfo, "migration requested by pod annotation", fields);
    } else {
      fields.emplace_back("error", out.status.error().message);
      log::Write(log::Level::kWarn, "migration asked for by pod annotation was refused", fields);
    }
  }
}

void KubeJobSync::Upkeep(const std::vector<m::PodView>& pods) {
  m::PodUpkeep u = m::DecidePodUpkeep(pods, coordinator_.Snapshot(), Now(), options_.leave_grace_s);
  auto failed = [&](const std::string& pod, const std::string& what, const Error& e) {
    std::string msg = what + ": " + e.message;
    if (pod_failures_[pod] != msg) log::Warn("pod upkeep failed (retried)", {{"pod", pod}, {"error", msg}});
    pod_failures_[pod] = msg;
  };
  for (const auto& p : u.labels) {
    Json labels = {{m::kPodRoleLabel, p.role}};
    labels[m::kRankLabel] = p.rank >= 0 ? Json(std::to_string(p.rank)) : Json(nullptr);
    // The uid in the patch makes it a precondition: a newer pod of that name refuses it.
    Json patch = {{"metadata", {{"uid", p.pod_uid}, {"labels", labels}}}};
    auto r = api_.MergePatch(kube::gvr::kPods, options_.ns, p.pod, patch);
    if (!r.ok()) {
      if (r.error().code != ErrorCode::kNotFound) failed(p.pod, "labelling it " + p.role, r.error());
      continue;
    }
    pod_failures_.erase(p.pod);
    log::Info("pod relabelled", {{"job", options_.job},
                                 {"pod", p.pod},
                                 {"role", p.role},
                                 {"rank", p.rank >= 0 ? std::to_string(p.rank) : std::string("none")}});
  }
  for (const auto& d : u.deletes) {
    Status s = api_.Delete(kube::gvr::kPods, options_.ns, d.pod, d.pod_uid);
    if (!s.ok() && s.error().code != ErrorCode::kNotFound && s.error().code != ErrorCode::kConflict) {
      failed(d.pod, "deleting it", s.error());
      continue;
    }
    pod_failures_.erase(d.pod);
    if (s.ok()) log::Info("migrated-away pod deleted", {{"job", options_.job}, {"pod", d.pod}, {"why", d.why}});
  }
}

Json KubeJobSync::StatusPatch(const m::JobState& s) {
  Json status = Json::object();
  if (s.generation() >= 0) status["generation"] = s.generation();
  int64_t done = 0;
  const m::RankMove* last = nullptr;
  std::vector<m::RankMove> moves = m::RankMoves(s);
  for (const auto& mv : moves) {
    if (mv.complete <= 0) continue;
    ++done;
    last = &mv;
  }
  status["migrations"] = done;
  if (last) {
    status["lastMigration"] = {{"rank", last->rank},
                               {"fromPod", PodOrNull(last->from_pod)},
                               {"toPod", PodOrNull(last->to_pod)},
                               {"reason", last->reason.substr(0, 1024)},
                               {"startTime", Rfc3339(last->start)},
                               {"completeTime", Rfc3339(last->complete)},
                               {"durationMs", DurationMs(*last)}};
  }
  return status;
}

void KubeJobSync::WriteStatus(const m::JobState& s) {
  Json want = StatusPatch(s);
  if (status_written_ && *status_written_ == want) return;
  if (clock_.Monotonic() < status_due_) return;
  auto r = api_.MergePatch(kube::gvr::kTrainingJobs, options_.ns, options_.training_job, {{"status", want}}, "status");
  if (r.ok()) {
    if (status_failed_) log::Info("writing the job's status works again", {{"trainingjob", options_.training_job}});
    status_failed_ = false;
    status_written_ = want;
    status_backoff_.Reset();
    status_due_ = {};
    status_writes_.fetch_add(1);
    return;
  }
  if (status_failures_) status_failures_->Inc();
  Nanos wait = status_backoff_.Next();
  status_due_ = clock_.Monotonic() + wait;
  if (!status_failed_) {
    log::Warn("writing the job's status failed (retried with backoff; training goes on)",
              {{"trainingjob", options_.ns + "/" + options_.training_job}, {"error", r.error().message}});
  }
  status_failed_ = true;
}

void KubeJobSync::RecordEvents(const m::JobState& s) {
  std::vector<m::RankMove> moves = m::RankMoves(s);
  if (!moves_seen_) {
    // Moves completed before this coordinator started were announced by an earlier one.
    for (const auto& mv : moves) {
      if (mv.complete > 0) moves_announced_.insert({mv.generation, mv.rank});
    }
    moves_seen_ = true;
    return;
  }
  if (!events_) return;
  for (const auto& mv : moves) {
    if (mv.complete <= 0 || moves_announced_.count({mv.generation, mv.rank})) continue;
    if (!job_object_) {
      auto job = api_.Get(kube::gvr::kTrainingJobs, options_.ns, options_.training_job);
      if (!job.ok()) return;  // the next round tries again (the status write logs API trouble)
      job_object_ = *job;
    }
    const std::string from = mv.from_pod.empty() ? "member " + mv.from_member : "pod " + mv.from_pod;
    const std::string to = mv.to_pod.empty() ? "member " + mv.to_member : "pod " + mv.to_pod;
    events_->Normal(*job_object_, "RankMigrated",
                    "rank " + std::to_string(mv.rank) + " moved from " + from + " to " + to + " in " +
                        std::to_string(DurationMs(mv)) + " ms (" + mv.kind + ": " + mv.reason + ")");
    moves_announced_.insert({mv.generation, mv.rank});
    events_recorded_.fetch_add(1);
  }
}

}  // namespace lockstep::coordinator
