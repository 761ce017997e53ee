#include "lockstep/coordinator/coordinator.h"

#include <algorithm>
#include <type_traits>

#include "lockstep/common/log.h"
#include "lockstep/migration/api.h"
#include "lockstep/migration/state_json.h"

namespace lockstep::coordinator {
namespace m = lockstep::migration;
using nlohmann::json;

namespace {

HttpResponse Json(int status, const json& body) {
  return HttpResponse{status, "application/json", body.dump() + "\n"};
}

HttpResponse Err(const Error& e) {
  return HttpResponse{m::HttpStatus(e), "application/json", m::ErrorBody(e)};
}

HttpResponse MethodNotAllowed(const HttpRequest& req, const char* allowed) {
  return Err(InvalidArgument(req.method + " " + req.path + " is not supported (use " + allowed + ")"));
}

bool Durable(const m::Event& e) {
  return !std::holds_alternative<m::Heartbeat>(e) && !std::holds_alternative<m::PlanPolled>(e) &&
         !std::holds_alternative<m::Tick>(e);
}

}  // namespace

Coordinator::Coordinator(m::JobState initial, bool restored, CoordinatorPorts ports, CoordinatorOptions options)
    : ports_(ports), options_(options), restored_(restored), state_(std::move(initial)) {
  if (!ports_.clock) ports_.clock = &SystemClock::Instance();
  if (ports_.registry) {
    auto& r = *ports_.registry;
    generation_ = &r.Gauge("lockstep_migration_generation", "Current generation of the job (-1 before the first).");
    members_ = &r.Gauge("lockstep_migration_members", "Members by state (rank, spare, dead, exited).", {"state"});
    failures_ = &r.Counter("lockstep_migration_failures_total", "Failures detected, by cause.", {"cause"});
    migrations_ = &r.Counter("lockstep_migration_migrations_total", "Completed migrations, by kind.", {"kind"});
    generations_ = &r.Counter("lockstep_migration_generations_total", "Generations decided, by kind.", {"kind"});
    recovery_ = &r.Gauge("lockstep_migration_last_recovery_seconds",
                         "Failure detected (or migration requested) to the next generation complete, last one.");
    spares_requested_ = &r.Counter("lockstep_migration_spares_requested_total", "Spare processes started.");
    terminal_ = &r.Gauge("lockstep_migration_terminal", "1 when the job cannot continue.");
    waiting_spare_ = &r.Gauge("lockstep_migration_ranks_waiting_for_spare",
                              "Dead ranks waiting for a spare; exhausted=\"true\" when no spare will be started "
                              "(no --spare-command, or its launches stopped).",
                              {"exhausted"});
    requests_ = &r.Counter("lockstep_migration_http_requests_total", "API calls by path and status.",
                           {"path", "status"});
  }
}

Coordinator::~Coordinator() { Stop(); }

double Coordinator::Now() const {
  return std::chrono::duration<double>(ports_.clock->Wall().time_since_epoch()).count();
}

m::JobState Coordinator::Snapshot() const {
  std::lock_guard lock(mu_);
  return state_;
}

m::Outcome Coordinator::Apply(const m::Event& event) {
  std::lock_guard lock(mu_);
  return ApplyLocked(event, false);
}

m::Outcome Coordinator::ApplyLocked(const m::Event& event, bool persist_always) {
  std::vector<m::Event> queue{event};
  m::Outcome first;
  bool changed = persist_always;
  for (size_t i = 0; i < queue.size() && i < 64; ++i) {
    m::Outcome out = m::Decide(state_, queue[i], Now());
    if (!out.status.ok()) {
      if (i == 0) first = out;
      continue;
    }
    state_ = out.state;
    changed = changed || Durable(queue[i]) || !out.actions.empty();
    std::vector<m::Event> follow;
    Perform(out.actions, follow);
    queue.insert(queue.end(), follow.begin(), follow.end());
    if (i == 0) first = std::move(out);
  }
  if (changed) Persist();
  UpdateGauges();
  if (!waiters_.empty()) WakePlanWaiters();
  return first;
}

void Coordinator::WakePlanWaiters() {
  bool any = false;
  for (PlanWaiter* w : waiters_) {
    if (!w->ready && m::PlanIsNews(PlanFor(w->member), w->known_generation)) {
      w->ready = true;
      any = true;
    }
  }
  if (any) plan_cv_.notify_all();
}

int Coordinator::HeldPlanPolls() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(waiters_.size());
}

bool Coordinator::WaitHeldPlanPolls(int n, std::chrono::milliseconds limit) const {
  std::unique_lock lock(mu_);
  return held_cv_.wait_for(lock, limit, [&] { return static_cast<int>(waiters_.size()) == n; });
}

void Coordinator::Drain() {
  {
    std::lock_guard lock(mu_);
    draining_ = true;
  }
  plan_cv_.notify_all();
}

void Coordinator::Perform(const m::Actions& actions, std::vector<m::Event>& follow) {
  const std::string& job = state_.config.job;
  for (const auto& action : actions) {
    std::visit(
        [&](const auto& a) {
          using A = std::decay_t<decltype(a)>;
          if constexpr (std::is_same_v<A, m::Fence>) {
            MemberRef ref{a.member, a.host, a.pid, "", ""};
            if (const m::Member* mem = state_.Find(a.member)) {
              ref.pod_name = mem->pod_name;
              ref.pod_uid = mem->pod_uid;
            }
            if (options_.keep_restarted_pods && options_.pid_check && ports_.probe && !ports_.probe->LocalOnly()) {
              // The probe keeps watching the member's pod (asked every tick) until the grace is over.
              (void)ports_.probe->Gone(ref);
              deferred_fences_.push_back({ref, a.reason, ports_.clock->Monotonic() + options_.restart_grace});
              log::Info("fence deferred", {{"job", job},
                                           {"member", a.member},
                                           {"pod", ref.pod_name},
                                           {"why", a.reason},
                                           {"grace_ms", std::to_string(options_.restart_grace.count())}});
              // Recorded in the state (saved with this change): a restarted coordinator still fences it.
              const double grace_s = std::chrono::duration<double>(options_.restart_grace).count();
              follow.push_back(m::FenceChanged{a.member, m::FenceChanged::What::kDeferred, Now() + grace_s,
                                               "deferred by the restart grace"});
              return;
            }
            FenceNow(ref, a.reason, job);
          } else if constexpr (std::is_same_v<A, m::RequestSpare>) {
            if (!ports_.launcher) {
              log::Warn("spare needed but no --spare-command", {{"job", job}, {"why", a.reason}});
              follow.push_back(m::SpareProcessExited{0, "not started: no --spare-command", ""});
              return;
            }
            auto spare = ports_.launcher->Launch();
            if (spares_requested_) spares_requested_->Inc();
            if (!spare.ok()) {
              log::Error("starting a spare failed", {{"job", job}, {"error", spare.error().message}});
              follow.push_back(m::SpareProcessExited{0, "not started: " + spare.error().message, ""});
            } else {
              log::Info("spare started", {{"job", job}, {"spare", spare->ToString()}, {"why", a.reason}});
            }
          } else if constexpr (std::is_same_v<A, m::Notice>) {
            std::vector<log::Field> fields{{"job", job}};
            for (const auto& [k, v] : a.fields) fields.emplace_back(k, v);
            log::Write(a.what == "terminal" ? log::Level::kError : log::Level::kInfo, a.what, fields);
            if (!ports_.registry) return;
            if (a.what == "failure_detected") failures_->Inc({a.Field("category")});
            if (a.what == "generation_decided") generations_->Inc({a.Field("kind")});
            if (a.what == "migration_done") migrations_->Inc({a.Field("kind")});
            if (a.what == "generation_complete" && !a.Field("recovery_s").empty()) {
              recovery_->Set(std::stod(a.Field("recovery_s")));
            }
          } else if constexpr (std::is_same_v<A, m::Terminal>) {
            if (terminal_) terminal_->Set(1);
          }
        },
        action);
  }
}

void Coordinator::FenceNow(const MemberRef& ref, const std::string& reason, const std::string& job) {
  Status s = ports_.fencer ? ports_.fencer->Fence(ref) : Status::Ok();
  std::vector<log::Field> fields{{"job", job}, {"member", ref.member}, {"pid", std::to_string(ref.pid)},
                                 {"host", ref.host}};
  if (!ref.pod_name.empty()) fields.emplace_back("pod", ref.pod_name);
  fields.emplace_back("why", reason);
  fields.emplace_back("result", s.ok() ? "done" : s.error().message);
  log::Write(s.ok() ? log::Level::kInfo : log::Level::kWarn, "fence", fields);
}

std::string Coordinator::NextProcessInPod(const MemberRef& ref) const {
  if (ref.pod_uid.empty()) return "";
  for (const auto& [id, mem] : state_.members) {
    if (id != ref.member && mem.status == m::MemberStatus::kAlive && mem.pod_uid == ref.pod_uid) return id;
  }
  return "";
}

void Coordinator::RunDeferredFences() {
  const std::string job = state_.config.job;
  const MonoTime now = ports_.clock->Monotonic();
  std::vector<m::FenceChanged> settled;  // applied after the loop: applying may defer more fences
  for (auto it = deferred_fences_.begin(); it != deferred_fences_.end();) {
    auto how = ports_.probe->Gone(it->ref);
    // A process that registered from the member's pod since: its container restarted in
    // place (also when the restart happened while this coordinator was down, before the
    // probe's first sight of the pod, so that the probe saw no restart count rise).
    const std::string next = NextProcessInPod(it->ref);
    if ((how && ports_.probe->PodStays(it->ref)) || !next.empty()) {
      // Its process is gone and the pod runs the next one (which joins as a spare).
      std::string result = (how ? *how : "member " + next + " registered from the pod") + ": the pod stays";
      log::Info("fence skipped", {{"job", job},
                                  {"member", it->ref.member},
                                  {"pod", it->ref.pod_name},
                                  {"why", it->reason},
                                  {"result", result}});
      settled.push_back({it->ref.member, m::FenceChanged::What::kSkipped, 0, "skipped: " + result});
    } else if (how || now >= it->due) {
      std::string why = it->reason + (how ? "; " + *how : "; still running after the restart grace");
      FenceNow(it->ref, why, job);
      settled.push_back({it->ref.member, m::FenceChanged::What::kDone, 0, "done: " + why});
    } else {
      ++it;
      continue;
    }
    it = deferred_fences_.erase(it);
  }
  for (const auto& e : settled) ApplyLocked(e, false);
}

void Coordinator::RestoreDeferredFences() {
  const std::string job = state_.config.job;
  const bool can_defer =
      options_.keep_restarted_pods && options_.pid_check && ports_.probe && !ports_.probe->LocalOnly();
  // The probe judges a pod only after its first look at it (polls of about a second):
  // a fence whose grace ran out while the coordinator was down waits a little for it.
  const auto floor = std::min(options_.restart_grace, std::chrono::milliseconds(3000));
  std::vector<m::FenceChanged> settled;
  for (const auto& [id, mem] : state_.members) {
    if (mem.fence_due <= 0) continue;
    const MemberRef ref{id, mem.host, mem.pid, mem.pod_name, mem.pod_uid};
    if (!can_defer) {
      FenceNow(ref, mem.gone_reason + "; deferred before the coordinator restarted", job);
      settled.push_back({id, m::FenceChanged::What::kDone, 0, "done at a restart: deferred before it"});
      continue;
    }
    const auto left = std::chrono::milliseconds(static_cast<int64_t>((mem.fence_due - Now()) * 1000));
    const auto wait = std::clamp(left, floor, options_.restart_grace);
    (void)ports_.probe->Gone(ref);
    deferred_fences_.push_back({ref, mem.gone_reason, ports_.clock->Monotonic() + wait});
    log::Info("fence deferred", {{"job", job},
                                 {"member", id},
                                 {"pod", ref.pod_name},
                                 {"why", mem.gone_reason},
                                 {"grace_ms", std::to_string(wait.count())},
                                 {"restored", "yes"}});
  }
  for (const auto& e : settled) ApplyLocked(e, false);
}

void Coordinator::Persist() {
  if (!ports_.store) return;
  std::string text = m::StateToJson(state_).dump(1) + "\n";
  if (text == last_saved_) return;
  const int64_t generation = state_.generation();
  if (saver_running_) {
    // The saver writes it, outside mu_; a snapshot it has not started on yet is replaced.
    last_saved_ = text;
    {
      std::lock_guard l(save_mu_);
      save_next_ = std::move(text);
      save_next_generation_ = generation;
      save_retry_ = false;
    }
    save_cv_.notify_all();
    return;
  }
  Status s = ports_.store->Save(text);
  if (s.ok()) last_saved_ = std::move(text);
  SaveEnded(generation, s);
}

void Coordinator::SaveEnded(int64_t generation, const Status& s) {
  // A failed save hands the generation out too: training goes on (the saver retries).
  saved_generation_ = std::max(saved_generation_, generation);
  if (!s.ok()) {
    if (!save_failed_) log::Error("saving the state failed (training goes on)", {{"error", s.error().message}});
    save_failed_ = true;
  } else {
    if (save_failed_) log::Info("saving the state works again", {{"job", state_.config.job}});
    save_failed_ = false;
  }
  if (!waiters_.empty()) WakePlanWaiters();
}

void Coordinator::SaverLoop() {
  using std::chrono::milliseconds;
  milliseconds backoff(200);
  std::unique_lock l(save_mu_);
  for (;;) {
    // Stopping: a new snapshot is written once more, a failing one is left to Stop().
    if (save_stop_ && (!save_next_ || save_retry_)) break;
    if (!save_next_) {
      save_cv_.wait(l);
      continue;
    }
    if (save_retry_ && std::chrono::steady_clock::now() < save_due_) {
      save_cv_.wait_until(l, save_due_);
      continue;
    }
    std::string text = std::move(*save_next_);
    save_next_.reset();
    save_retry_ = false;
    const int64_t generation = save_next_generation_;
    save_busy_ = true;
    l.unlock();
    Status s = ports_.store->Save(text);
    {
      std::lock_guard lock(mu_);
      SaveEnded(generation, s);
    }
    l.lock();
    save_busy_ = false;
    if (s.ok()) {
      backoff = milliseconds(200);
    } else if (!save_next_) {  // tried again later unless a newer snapshot came meanwhile
      save_next_ = std::move(text);
      save_next_generation_ = generation;
      save_retry_ = true;
      save_due_ = std::chrono::steady_clock::now() + backoff;
      backoff = std::min(backoff * 2, milliseconds(5000));
    }
    save_cv_.notify_all();
  }
  save_cv_.notify_all();
}

void Coordinator::StartSaver() {
  if (!ports_.store) return;
  std::lock_guard lock(mu_);
  if (saver_running_) return;
  {
    std::lock_guard l(save_mu_);
    save_stop_ = false;
  }
  saver_running_ = true;
  saver_ = std::thread([this] { SaverLoop(); });
}

void Coordinator::StopSaver() {
  {
    std::lock_guard l(save_mu_);
    save_stop_ = true;
  }
  save_cv_.notify_all();
  if (saver_.joinable()) saver_.join();
  std::lock_guard lock(mu_);
  saver_running_ = false;
  std::lock_guard l(save_mu_);
  if (save_next_) {
    // Not written (its save failed, or it came after the saver's last round):
    // the next Persist() writes the state at once.
    save_next_.reset();
    save_retry_ = false;
    last_saved_.clear();
  }
}

bool Coordinator::WaitSaved(std::chrono::milliseconds limit) const {
  std::unique_lock l(save_mu_);
  return save_cv_.wait_for(l, limit, [this] { return (!save_next_ || save_retry_) && !save_busy_; });
}

json Coordinator::PlanFor(const std::string& member) const {
  json plan = m::PlanReply(state_, member);
  if (ports_.store && state_.generation() > saved_generation_ && plan.value("action", "") == "train") {
    // Decided but not saved yet: a coordinator restarted now would not know it.
    json wait{{"generation", plan["generation"]}, {"world_size", plan["world_size"]}, {"action", "wait"}};
    wait["reason"] = "generation " + std::to_string(state_.generation()) + " is being saved";
    return wait;
  }
  return plan;
}

void Coordinator::UpdateGauges() {
  if (!ports_.registry) return;
  generation_->Set(static_cast<double>(state_.generation()));
  double rank = 0, spare = 0, dead = 0, exited = 0;
  for (const auto& [id, mem] : state_.members) {
    if (mem.status == m::MemberStatus::kDead) ++dead;
    else if (mem.status == m::MemberStatus::kExited) ++exited;
    else if (state_.RankOf(id) >= 0) ++rank;
    else ++spare;
  }
  members_->Set({"rank"}, rank);
  members_->Set({"spare"}, spare);
  members_->Set({"dead"}, dead);
  members_->Set({"exited"}, exited);
  terminal_->Set(state_.phase == m::Phase::kTerminal ? 1 : 0);
  double waiting = 0;
  if (state_.phase == m::Phase::kWaitingSpare) {
    for (const auto& id : state_.current()->members) waiting += state_.Alive(id) ? 0 : 1;
  }
  waiting_spare_->Set({"true"}, state_.spares_exhausted ? waiting : 0);
  waiting_spare_->Set({"false"}, state_.spares_exhausted ? 0 : waiting);
}

void Coordinator::Tick() {
  std::lock_guard lock(mu_);
  std::vector<m::Event> events;
  if (ports_.launcher) {
    for (const auto& e : ports_.launcher->Reap()) {
      log::Info("spare exited", {{"job", state_.config.job}, {"spare", e.spare.ToString()}, {"how", e.how}});
      for (const auto& [id, mem] : state_.members) {
        if (mem.status != m::MemberStatus::kAlive) continue;
        bool same = e.spare.pod.empty()
                        ? mem.pid == e.spare.pid && ports_.local && ports_.local->Contains(mem.host)
                        : mem.pod_name == e.spare.pod;
        if (same) events.push_back(m::ProcessGone{id, e.how, !e.spare.pod.empty()});
      }
      events.push_back(m::SpareProcessExited{e.spare.pid, e.how, e.spare.pod});
    }
  }
  if (options_.pid_check && ports_.probe && (ports_.local || !ports_.probe->LocalOnly())) {
    for (const auto& [id, mem] : state_.members) {
      if (mem.status != m::MemberStatus::kAlive) continue;
      if (ports_.probe->LocalOnly() && !ports_.local->Contains(mem.host)) continue;
      const MemberRef ref{id, mem.host, mem.pid, mem.pod_name, mem.pod_uid};
      if (auto how = ports_.probe->Gone(ref)) {
        const bool keep = options_.keep_restarted_pods && ports_.probe->PodStays(ref);
        events.push_back(m::ProcessGone{id, *how, !ports_.probe->LocalOnly() && !keep});
      }
    }
  }
  for (const auto& e : events) ApplyLocked(e, false);
  ApplyLocked(m::Tick{}, false);
  if (!deferred_fences_.empty()) RunDeferredFences();
}

void Coordinator::Begin() {
  std::lock_guard lock(mu_);
  if (begun_) return;
  begun_ = true;
  if (restored_) {
    log::Info("state restored", {{"job", state_.config.job},
                                 {"generation", std::to_string(state_.generation())},
                                 {"phase", m::PhaseName(state_.phase)},
                                 {"members", std::to_string(state_.members.size())}});
    ApplyLocked(m::Restarted{}, true);
    RestoreDeferredFences();
  } else {
    Persist();
  }
  UpdateGauges();
}

void Coordinator::Start() {
  Begin();
  StartSaver();
  {
    std::lock_guard l(stop_mu_);
    stop_ = false;
  }
  {
    std::lock_guard lock(mu_);
    draining_ = false;
  }
  ticker_ = std::thread([this] {
    std::unique_lock l(stop_mu_);
    while (!stop_) {
      l.unlock();
      Tick();
      if (ports_.probe && options_.pid_check) {
        // Wakes at once when a watched local process exits; Stop() waits up to a tick.
        ports_.probe->Wait(options_.tick_interval);
        l.lock();
      } else {
        l.lock();
        stop_cv_.wait_for(l, options_.tick_interval, [this] { return stop_; });
      }
    }
  });
}

void Coordinator::Stop() {
  Drain();
  {
    std::lock_guard l(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  StopSaver();
  std::lock_guard lock(mu_);
  Persist();
}

void Coordinator::AddHandlers(HttpServer& server) {
  for (const char* path : {"/v1/register", "/v1/plan", "/v1/heartbeat", "/v1/report", "/v1/migrations", "/v1/state",
                           "/healthz", "/readyz", "/metrics"}) {
    server.Handle(path, [this](const HttpRequest& req) {
      HttpResponse r = Serve(req);
      if (requests_) requests_->Inc({req.path, std::to_string(r.status)});
      return r;
    });
  }
}

HttpResponse Coordinator::Serve(const HttpRequest& req) {
  const std::string& p = req.path;
  if (p == "/healthz" || p == "/readyz") return HttpResponse{200, "text/plain", "ok\n"};
  if (p == "/metrics") {
    {
      std::lock_guard lock(mu_);
      UpdateGauges();
    }
    return HttpResponse{200, "text/plain; version=0.0.4", ports_.registry ? ports_.registry->Render() : ""};
  }
  if (p == "/v1/state") {
    if (req.method != "GET") return MethodNotAllowed(req, "GET");
    std::lock_guard lock(mu_);
    json j = m::StateToJson(state_);
    j["now"] = Now();
    return Json(200, j);
  }
  if (p == "/v1/plan") return ServePlan(req);
  if (p == "/v1/migrations" && req.method == "GET") {
    std::lock_guard lock(mu_);
    return Json(200, m::MigrationsReply(state_));
  }
  if (req.method != "POST") return MethodNotAllowed(req, "POST");
  if (p == "/v1/register") {
    auto ev = m::ParseRegister(req.body);
    if (!ev.ok()) return Err(ev.error());
    std::lock_guard lock(mu_);
    auto out = ApplyLocked(*ev, false);
    if (!out.status.ok()) return Err(out.status.error());
    log::Info("registered", {{"job", state_.config.job}, {"member", ev->member}, {"role", m::RoleName(ev->role)},
                             {"rank", std::to_string(ev->rank)}, {"pid", std::to_string(ev->pid)},
                             {"host", ev->host}, {"store_port", std::to_string(ev->store_port)}});
    return Json(200, m::RegisterReply(state_, ev->member));
  }
  if (p == "/v1/heartbeat") {
    auto ev = m::ParseHeartbeat(req.body);
    if (!ev.ok()) return Err(ev.error());
    std::lock_guard lock(mu_);
    auto out = ApplyLocked(*ev, false);
    if (!out.status.ok()) return Err(out.status.error());
    return Json(200, m::HeartbeatReply(state_, ev->member));
  }
  if (p == "/v1/report") {
    auto ev = m::ParseReport(req.body);
    if (!ev.ok()) return Err(ev.error());
    std::lock_guard lock(mu_);
    auto out = ApplyLocked(*ev, false);
    if (!out.status.ok()) return Err(out.status.error());
    log::Info("report", {{"job", state_.config.job}, {"member", ev->member},
                         {"generation", std::to_string(ev->generation)},
                         {"committed_step", std::to_string(ev->committed_step)}, {"reason", ev->reason},
                         {"error", ev->error}});
    return Json(200, json::object());
  }
  if (p == "/v1/migrations") {
    auto ev = m::ParseMigration(req.body);
    if (!ev.ok()) return Err(ev.error());
    std::lock_guard lock(mu_);
    auto out = ApplyLocked(*ev, false);
    if (!out.status.ok()) return Err(out.status.error());
    return Json(202, m::MigrationReply(state_, out.created_id));
  }
  return Err(NotFound("no such path: " + p));
}

// GET /v1/plan, a long poll with wait_ms (docs/migration.md): the sign of life
// counts when the request arrives; the reply is the plan when it was answered,
// with "held_ms" when the poll was held.
HttpResponse Coordinator::ServePlan(const HttpRequest& req) {
  if (req.method != "GET") return MethodNotAllowed(req, "GET");
  auto q = m::ParsePlanQuery(req.query);
  if (!q.ok()) return Err(q.error());
  std::unique_lock lock(mu_);
  auto out = ApplyLocked(m::PlanPolled{q->member}, false);
  if (!out.status.ok()) return Err(out.status.error());
  json plan = PlanFor(q->member);
  auto wait = std::min({std::chrono::milliseconds(q->wait_ms), options_.max_plan_wait,
                        std::chrono::milliseconds(static_cast<int64_t>(state_.config.heartbeat_timeout_s * 500))});
  if (wait.count() <= 0 || draining_ || static_cast<int>(waiters_.size()) >= options_.max_held_plan_polls ||
      m::PlanIsNews(plan, q->known_generation)) {
    return Json(200, plan);
  }
  PlanWaiter self{q->member, q->known_generation, false};
  waiters_.push_back(&self);
  held_cv_.notify_all();
  const auto t0 = std::chrono::steady_clock::now();
  plan_cv_.wait_until(lock, t0 + wait, [&] { return self.ready || draining_; });
  waiters_.erase(std::find(waiters_.begin(), waiters_.end(), &self));
  held_cv_.notify_all();
  plan = PlanFor(q->member);
  plan["held_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  return Json(200, plan);
}

}  // namespace lockstep::coordinator
