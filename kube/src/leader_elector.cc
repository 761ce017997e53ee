#include "lockstep/kube/leader_elector.h"

#include <cmath>
#include <vector>

#include "lockstep/common/log.h"
#include "lockstep/kube/object_meta.h"
#include "lockstep/kube/time_format.h"

namespace lockstep::kube {
namespace {

int64_t CeilSeconds(Nanos d) {
  return static_cast<int64_t>(std::ceil(std::chrono::duration<double>(d).count()));
}

}  // namespace

LeaderElector::LeaderElector(KubeApi& api, Clock& clock, LeaderElectionConfig config, LeaderCallbacks callbacks)
    : api_(api), clock_(clock), config_(std::move(config)), callbacks_(std::move(callbacks)) {}

LeaderElector::~LeaderElector() { Stop(); }

LeaderElector::Record LeaderElector::ParseRecord(const Json& lease) {
  Record r;
  r.holder = GetString(lease, {"spec", "holderIdentity"});
  r.duration_seconds = GetInt(lease, {"spec", "leaseDurationSeconds"});
  r.acquire_time = GetString(lease, {"spec", "acquireTime"});
  r.renew_time = GetString(lease, {"spec", "renewTime"});
  r.transitions = GetInt(lease, {"spec", "leaseTransitions"});
  return r;
}

Json LeaderElector::BuildLease(const Json& base, const Record& rec) const {
  Json lease = base.is_object() ? base : Json::object();
  lease["apiVersion"] = "coordination.k8s.io/v1";
  lease["kind"] = "Lease";
  if (!lease["metadata"].is_object()) lease["metadata"] = Json::object();
  lease["metadata"]["name"] = config_.lease_name;
  lease["metadata"]["namespace"] = config_.lease_namespace;
  if (!lease["spec"].is_object()) lease["spec"] = Json::object();
  Json& spec = lease["spec"];
  spec["holderIdentity"] = rec.holder;
  spec["leaseDurationSeconds"] = rec.duration_seconds;
  spec["acquireTime"] = rec.acquire_time;
  spec["renewTime"] = rec.renew_time;
  spec["leaseTransitions"] = rec.transitions;
  return lease;
}

void LeaderElector::Observe(const Json& lease, MonoTime now) {
  Record rec = ParseRecord(lease);
  observed_lease_ = lease;
  if (!has_observed_ || !(rec == observed_)) {
    observed_ = std::move(rec);
    observed_time_ = now;
    has_observed_ = true;
  }
}

bool LeaderElector::TryAcquireOrRenew(MonoTime now, bool leading) {
  const std::string& ns = config_.lease_namespace;
  const std::string ts = FormatMicroTime(clock_.Wall());
  const int64_t duration_s = CeilSeconds(config_.lease_duration);

  // Fast path: renew the version we last wrote, without a read.
  if (leading && has_observed_ && observed_.holder == config_.identity) {
    Record rec = observed_;
    rec.renew_time = ts;
    rec.duration_seconds = duration_s;
    auto updated = api_.Update(gvr::kLeases, ns, BuildLease(observed_lease_, rec));
    if (updated) {
      Observe(*updated, now);
      return true;
    }
    if (updated.code() != ErrorCode::kConflict) {
      log::Warn("lease renewal failed", {{"lease", config_.lease_name}, {"error", updated.error().ToString()}});
      return false;
    }
  }

  auto got = api_.Get(gvr::kLeases, ns, config_.lease_name);
  if (!got) {
    if (got.code() != ErrorCode::kNotFound) {
      log::Warn("lease read failed", {{"lease", config_.lease_name}, {"error", got.error().ToString()}});
      return false;
    }
    Record rec{config_.identity, duration_s, ts, ts, 0};
    auto created = api_.Create(gvr::kLeases, ns, BuildLease(Json::object(), rec));
    if (!created) {
      log::Info("lease create lost a race", {{"lease", config_.lease_name}, {"error", created.error().ToString()}});
      return false;
    }
    Observe(*created, now);
    return true;
  }
  Observe(*got, now);
  const Record cur = observed_;
  if (!cur.holder.empty() && cur.holder != config_.identity) {
    Nanos held_for = cur.duration_seconds > 0 ? Nanos(std::chrono::seconds(cur.duration_seconds))
                                              : config_.lease_duration;
    if (now < observed_time_ + held_for) return false;  // held by another and not expired
  }
  Record rec;
  rec.holder = config_.identity;
  rec.duration_seconds = duration_s;
  rec.renew_time = ts;
  if (cur.holder == config_.identity) {
    rec.acquire_time = cur.acquire_time.empty() ? ts : cur.acquire_time;
    rec.transitions = cur.transitions;
  } else {
    rec.acquire_time = ts;
    rec.transitions = cur.transitions + 1;
  }
  auto updated = api_.Update(gvr::kLeases, ns, BuildLease(*got, rec));
  if (!updated) {
    log::Info("lease update failed", {{"lease", config_.lease_name}, {"error", updated.error().ToString()}});
    return false;
  }
  Observe(*updated, now);
  return true;
}

bool LeaderElector::Poll() {
  std::vector<std::function<void()>> fire;
  {
    std::lock_guard op(op_mu_);
    bool leading;
    {
      std::lock_guard l(mu_);
      if (state_ == State::kEnded) return false;
      leading = state_ == State::kLeader;
    }
    MonoTime now = clock_.Monotonic();
    std::string before = observed_.holder;
    bool had = has_observed_;
    bool ok = TryAcquireOrRenew(now, leading);
    if (has_observed_ && (!had || observed_.holder != before) && callbacks_.on_new_leader) {
      fire.push_back([cb = callbacks_.on_new_leader, h = observed_.holder] { cb(h); });
    }
    std::lock_guard l(mu_);
    holder_ = observed_.holder;
    if (state_ == State::kCandidate && ok) {
      state_ = State::kLeader;
      last_renew_ = now;
      log::Info("acquired leadership", {{"lease", config_.lease_name}, {"identity", config_.identity}});
      if (callbacks_.on_started_leading) fire.push_back(callbacks_.on_started_leading);
    } else if (state_ == State::kLeader) {
      bool other = has_observed_ && !observed_.holder.empty() && observed_.holder != config_.identity;
      if (ok) {
        last_renew_ = now;
      } else if (other || now - last_renew_ >= config_.renew_deadline) {
        state_ = State::kEnded;
        lost_ = true;
        log::Error("lost leadership", {{"lease", config_.lease_name},
                                       {"identity", config_.identity},
                                       {"holder", observed_.holder}});
        if (callbacks_.on_stopped_leading) {
          fire.push_back([cb = callbacks_.on_stopped_leading] { cb(true); });
        }
        cv_.notify_all();
      }
    }
  }
  for (auto& f : fire) f();
  return IsLeader();
}

void LeaderElector::Release() {
  std::function<void()> fire;
  {
    std::lock_guard op(op_mu_);
    {
      std::lock_guard l(mu_);
      if (state_ != State::kLeader) {
        state_ = State::kEnded;
        return;
      }
    }
    const std::string ts = FormatMicroTime(clock_.Wall());
    Record rec = observed_;
    rec.holder = "";
    rec.duration_seconds = 1;
    rec.acquire_time = ts;
    rec.renew_time = ts;
    auto updated = api_.Update(gvr::kLeases, config_.lease_namespace, BuildLease(observed_lease_, rec));
    if (!updated) {
      log::Warn("lease release failed; a successor will wait for expiry",
                {{"lease", config_.lease_name}, {"error", updated.error().ToString()}});
    } else {
      Observe(*updated, clock_.Monotonic());
      log::Info("released leadership", {{"lease", config_.lease_name}, {"identity", config_.identity}});
    }
    std::lock_guard l(mu_);
    state_ = State::kEnded;
    holder_ = observed_.holder;
    if (callbacks_.on_stopped_leading) fire = [cb = callbacks_.on_stopped_leading] { cb(false); };
  }
  if (fire) fire();
}

void LeaderElector::Start() { thread_ = std::thread([this] { Run(); }); }

void LeaderElector::Run() {
  while (true) {
    Poll();
    std::unique_lock l(mu_);
    if (stop_ || state_ == State::kEnded) return;
    cv_.wait_for(l, config_.retry_period, [&] { return stop_; });
    if (stop_) return;
  }
}

void LeaderElector::Stop() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  Release();
}

bool LeaderElector::IsLeader() const {
  std::lock_guard l(mu_);
  return state_ == State::kLeader && clock_.Monotonic() - last_renew_ < config_.renew_deadline;
}

bool LeaderElector::Lost() const {
  std::lock_guard l(mu_);
  return lost_;
}

std::string LeaderElector::Holder() const {
  std::lock_guard l(mu_);
  return holder_;
}

}  // namespace lockstep::kube
