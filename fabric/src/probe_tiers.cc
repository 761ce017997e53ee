#include "lockstep/fabric/probe_tiers.h"

#include <algorithm>
#include <cmath>

namespace lockstep::fabric {

const char* ToString(Tier tier) {
  switch (tier) {
    case Tier::kFast:
      return "fast";
    case Tier::kTraffic:
      return "traffic";
    case Tier::kVerdict:
      return "verdict";
    case Tier::kPromoted:
      return "promoted";
    case Tier::kIdle:
      return "idle";
  }
  return "?";
}

namespace {
Nanos LongestGap(Nanos interval, double jitter) {
  return Nanos(std::llround(static_cast<double>(interval.count()) * (1 + jitter)));
}
}  // namespace

ProbeTiers::ProbeTiers(const FabricOptions& options)
    : fast_gap_(LongestGap(options.probe_interval, options.jitter)),
      longest_gap_(IdleTicks(options) ? std::max(fast_gap_, LongestGap(options.idle_tick, options.jitter)) : fast_gap_),
      idle_interval_(options.idle_interval),
      promote_for_(options.promote_for),
      idle_ticks_(IdleTicks(options)) {}

void ProbeTiers::Renumber(const std::vector<int64_t>& keep) {
  std::vector<Path> old = std::move(paths_);
  paths_.assign(keep.size(), Path{});
  for (size_t i = 0; i < keep.size(); ++i) {
    if (keep[i] >= 0 && static_cast<size_t>(keep[i]) < old.size()) paths_[i] = old[static_cast<size_t>(keep[i])];
  }
  fast_ =
      static_cast<size_t>(std::count_if(paths_.begin(), paths_.end(), [](const Path& p) { return IsFast(p.tier); }));
  if (cursor_ >= paths_.size()) cursor_ = 0;
}

void ProbeTiers::Plan(Time now, const std::vector<TierFacts>& facts, std::vector<uint32_t>& out, bool hold_fast) {
  if (paths_.size() != facts.size()) paths_.resize(facts.size());
  fast_ = 0;
  idle_.clear();
  for (uint32_t id = 0; id < facts.size(); ++id) {
    Path& p = paths_[id];
    const TierFacts& f = facts[id];
    const bool rose = f.misses > p.misses || f.late_replies > p.late;
    const bool delivering = f.state == PathState::kUp || f.state == PathState::kSuspect;
    p.misses = f.misses;
    p.late = f.late_replies;
    // A rise while it delivered, at this plan and the last one: not the
    // misses of a path that came up since (its probes lost before the peer
    // answered at all, e.g. a peer starting after us).
    if (rose && delivering && p.delivering) p.promoted_until = now + promote_for_;
    p.delivering = delivering;
    if (!enabled()) {
      p.tier = Tier::kFast;
    } else if (f.carries_traffic) {
      p.tier = Tier::kTraffic;
    } else if (f.state == PathState::kUnknown || f.state == PathState::kSuspect) {
      p.tier = Tier::kVerdict;
    } else if (now < p.promoted_until) {
      p.tier = Tier::kPromoted;
    } else {
      p.tier = Tier::kIdle;
    }
    if (IsFast(p.tier)) ++fast_;
    if (IsFast(p.tier) || !p.probed) {
      out.push_back(id);
      p.probed = true;
      p.last_probed = now;
    } else {
      idle_.push_back(id);
    }
  }
  // The next tick: an idle one (up to idle_tick(1 + j) away) when nothing is fast.
  next_slow_ = idle_ticks_ && !hold_fast && fast_ == 0;
  const Nanos next_gap = next_slow_ ? longest_gap_ : fast_gap_;
  const Nanos elapsed = last_plan_ ? std::min(now - *last_plan_, longest_gap_) : Nanos(0);
  last_plan_ = now;
  if (idle_.empty()) {
    credit_ = 0;
    return;
  }
  // The rotation's share: idle paths / idle_interval a second, as a credit
  // that grows with the time since the last tick (a few idle paths get a
  // probe every few ticks, not one at every tick). The due rule below keeps
  // the bound whatever the credit.
  // The rotation aims a little inside the bound (a tick gap and a fast
  // gap: two gaps without idle ticks), so that paths rarely fall due together.
  const size_t n = idle_.size();
  const Nanos period = std::max(idle_interval_ - next_gap - fast_gap_, idle_interval_ / 2);
  credit_ = std::min(
      credit_ + static_cast<double>(n) * static_cast<double>(elapsed.count()) / static_cast<double>(period.count()),
      static_cast<double>(n));
  const auto share = static_cast<size_t>(credit_);
  size_t taken = 0;
  // Due: the next tick (at most longest_gap away) would be too late.
  for (uint32_t id : idle_) {
    Path& p = paths_[id];
    if (now + next_gap > p.last_probed + idle_interval_) {
      out.push_back(id);
      p.last_probed = now;
      ++taken;
    }
  }
  // Round robin from the cursor (an id: the idle set changes between ticks).
  auto start = std::lower_bound(idle_.begin(), idle_.end(), static_cast<uint32_t>(cursor_));
  size_t pos = static_cast<size_t>(start - idle_.begin());
  for (size_t seen = 0; seen < n && taken < share; ++seen, ++pos) {
    const uint32_t id = idle_[pos % n];
    Path& p = paths_[id];
    cursor_ = id + 1;
    if (p.last_probed == now) continue;  // due above
    out.push_back(id);
    p.last_probed = now;
    ++taken;
  }
  credit_ = std::max(0.0, credit_ - static_cast<double>(taken));
  if (cursor_ >= paths_.size()) cursor_ = 0;
}

}  // namespace lockstep::fabric
