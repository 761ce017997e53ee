#include "lockstep/clocksync/clock_discipline.h"

#include <cmath>

namespace lockstep::clocksync {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// base + delta with delta rounded away from zero (bounds only ever widen).
int64_t SaturatingAdd(int64_t base, double delta) {
  const double v = static_cast<double>(base) + delta;
  if (!(v > static_cast<double>(kMin))) return kMin;
  if (!(v < static_cast<double>(kMax))) return kMax;
  const double rounded = delta < 0 ? std::floor(delta) : std::ceil(delta);
  return base + static_cast<int64_t>(rounded);
}

}  // namespace

const char* ClockStateName(ClockState state) {
  switch (state) {
    case ClockState::kFreerun: return "FREERUN";
    case ClockState::kLocked: return "LOCKED";
    case ClockState::kHoldover: return "HOLDOVER";
  }
  return "UNKNOWN";
}

int64_t ToFabric(const NodeModel& model, int64_t local_ns) {
  // Solve L = F + offset + drift * (F - t_ref) for F.
  const double since = static_cast<double>(local_ns - model.t_ref_ns);
  return model.t_ref_ns + static_cast<int64_t>(std::llround((since - model.offset_ns) / (1.0 + model.drift)));
}

ClockDiscipline::ClockDiscipline(const DisciplineOptions& options) : options_(options) {}

bool ClockDiscipline::Update(const NodeModel& model, int64_t now_local_ns) {
  if (!model.valid || !(model.error_bound_ns <= options_.lock_threshold_ns)) return false;
  if (has_model_ && model.t_ref_ns <= model_.t_ref_ns) return false;
  if (!has_model_ && model.track_windows != 0 && model.track_windows < options_.lock_min_track_windows) return false;
  model_ = model;
  has_model_ = true;
  adopted_local_ns_ = now_local_ns;
  return true;
}

ClockState ClockDiscipline::State(int64_t local_ns) const {
  if (!has_model_) return ClockState::kFreerun;
  const int64_t since = local_ns - adopted_local_ns_;
  if (since <= options_.holdover_after_ns) return ClockState::kLocked;
  if (since <= options_.max_holdover_ns) return ClockState::kHoldover;
  return ClockState::kFreerun;
}

double ClockDiscipline::BoundAfter(double elapsed_ns) const {
  const double dt = std::abs(elapsed_ns);
  const double dt_s = dt * 1e-9;
  return model_.error_bound_ns + options_.bound_sigmas * model_.drift_sigma * dt +
         options_.wander_ppb * 1e-9 * dt + 0.5 * options_.wander_ramp_ppb_per_s * dt_s * dt_s;
}

TimeReading ClockDiscipline::Now(int64_t local_ns) const {
  TimeReading r;
  r.state = State(local_ns);
  r.fabric_ns = has_model_ ? ToFabric(model_, local_ns) : local_ns;
  if (r.state == ClockState::kFreerun) {
    r.error_bound_ns = kInf;
    r.earliest_ns = kMin;
    r.latest_ns = kMax;
    return r;
  }
  r.error_bound_ns = BoundAfter(static_cast<double>(r.fabric_ns - model_.t_ref_ns));
  r.earliest_ns = SaturatingAdd(r.fabric_ns, -r.error_bound_ns);
  r.latest_ns = SaturatingAdd(r.fabric_ns, r.error_bound_ns);
  return r;
}

}  // namespace lockstep::clocksync
