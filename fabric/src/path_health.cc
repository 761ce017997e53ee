#include "lockstep/fabric/path_health.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace lockstep::fabric {
namespace {

constexpr size_t kMaxOutstanding = 64;
constexpr size_t kMaxRecentlyMissed = 64;
constexpr size_t kMaxWindowSamples = 1 << 16;

// Nearest-rank p50 and p99 of a non-empty vector (reordered). The p99 is
// selected among the elements above the p50 only (nth_element leaves them
// there): a quarter less work than two selections over the whole window.
std::pair<Nanos, Nanos> P50P99(std::vector<Nanos>& v) {
  auto rank = [&](double q) { return std::min(static_cast<size_t>(q * static_cast<double>(v.size())), v.size() - 1); };
  const size_t r50 = rank(0.5), r99 = rank(0.99);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(r50), v.end());
  if (r99 > r50) {
    std::nth_element(v.begin() + static_cast<std::ptrdiff_t>(r50) + 1, v.begin() + static_cast<std::ptrdiff_t>(r99),
                     v.end());
  }
  return {v[r50], v[r99]};
}

}  // namespace

PathHealth::PathHealth(PathKey key, const FabricOptions& options)
    : key_(std::move(key)), options_(options), idle_reply_timeout_(IdleAckTimeout(options)) {}

void PathHealth::OnProbeSent(uint64_t seq, Time sent, bool urgent, bool slow) {
  ++totals_.probes_sent;
  if (outstanding_.size() >= kMaxOutstanding) {
    std::vector<Transition> ignored;  // REQUIRES says tick; keep memory bounded anyway
    recently_missed_.push_back(outstanding_.front().seq);
    outstanding_.pop_front();
    Miss(sent, ignored);
  }
  const Nanos timeout = urgent ? options_.urgent_timeout : slow ? idle_reply_timeout_ : options_.reply_timeout;
  outstanding_.push_back({seq, sent, sent + timeout, urgent});
}

bool PathHealth::TakeUrgent() { return std::exchange(urgent_, false); }

std::deque<PathHealth::Outstanding>::const_iterator PathHealth::FirstDeadline() const {
  // A handful are outstanding (one per interval, plus urgent probes whose
  // timeout is shorter than that of regular probes sent before them).
  return std::min_element(outstanding_.begin(), outstanding_.end(),
                          [](const Outstanding& a, const Outstanding& b) { return a.deadline < b.deadline; });
}

std::vector<Transition> PathHealth::OnReply(const Reply& reply) {
  std::vector<Transition> out = Tick(reply.received);
  auto it = std::find_if(outstanding_.begin(), outstanding_.end(),
                         [&](const Outstanding& o) { return o.seq == reply.seq; });
  if (it == outstanding_.end()) {
    auto late = std::find(recently_missed_.begin(), recently_missed_.end(), reply.seq);
    if (late == recently_missed_.end()) {
      ++totals_.unmatched_replies;
      return out;
    }
    ++totals_.late_replies;
    // Its one-way delay is real (a queue longer than the reply timeout):
    // without it a path's delays would only ever show the probes that beat
    // the timeout, and congestion would look like loss alone.
    if (reply.one_way_delay) Record({reply.received, false, *reply.one_way_delay, Nanos(-1), true});
    return out;
  }
  const Nanos rtt = std::max(Nanos(0), reply.received - it->sent);
  const Time sent = it->sent;
  const bool urgent = it->urgent;
  outstanding_.erase(it);
  ++totals_.replies;
  Record({reply.received, false, reply.one_way_delay.value_or(Nanos(-1)), rtt});
  if (urgent && misses_in_a_row_ > 0) {
    urgent_ = false;  // answered; it clears nothing (see the header)
    return out;
  }
  ForgetBeforeFirstDelivery(sent);
  Deliver(reply.received, out);
  return out;
}

void PathHealth::ForgetBeforeFirstDelivery(Time sent) {
  if (state_ != PathState::kUnknown && state_ != PathState::kDown) return;
  std::erase_if(outstanding_, [&](const Outstanding& o) { return o.sent < sent; });
  // Its misses so far came while it did not deliver: a late ack for one of
  // them is no late ack of the path that now delivers (which would promote it).
  recently_missed_.clear();
}

std::vector<Transition> PathHealth::OnAck(const AckField& ack, Time received) {
  std::vector<Transition> out = Tick(received);
  bool delivered = false, urgent_only = true;
  std::optional<Time> first_sent;  // the earliest probe it delivers (outstanding_ is in send order)
  for (auto it = outstanding_.begin(); it != outstanding_.end();) {
    const auto seq = static_cast<uint32_t>(it->seq);
    if (!Acked(ack, seq)) {
      ++it;
      continue;
    }
    Nanos owd(-1), rtt(-1);  // samples only for the latest seq (the one the ack's fields describe)
    if (seq == ack.seq) {
      // Less the peer's hold; none when the hold is unknown or longer than
      // the round trip (an inconsistent sample, not a zero delay).
      if (ack.held && received - it->sent >= *ack.held) rtt = received - it->sent - *ack.held;
      owd = ack.one_way_delay.value_or(Nanos(-1));
    }
    if (!first_sent) first_sent = it->sent;
    urgent_only = urgent_only && it->urgent;
    it = outstanding_.erase(it);
    ++totals_.replies;
    Record({received, false, owd, rtt});
    delivered = true;
  }
  if (delivered && urgent_only && misses_in_a_row_ > 0) {
    urgent_ = false;  // answered; it clears nothing (see the header)
  } else if (delivered) {
    ForgetBeforeFirstDelivery(*first_sent);
    Deliver(received, out);
  } else if (auto late = std::find_if(recently_missed_.begin(), recently_missed_.end(),
                                      [&](uint64_t s) { return static_cast<uint32_t>(s) == ack.seq; });
             late != recently_missed_.end()) {
    ++totals_.late_replies;
    recently_missed_.erase(late);  // counted once, though later acks repeat it
    if (ack.one_way_delay) Record({received, false, *ack.one_way_delay, Nanos(-1), true});  // as in OnReply
  }
  return out;
}

void PathHealth::Excuse(Time from, Time now) {
  for (Outstanding& o : outstanding_) {
    if (o.deadline >= from && o.deadline <= now) o.deadline = now + (o.deadline - o.sent);
  }
}

std::vector<Transition> PathHealth::Tick(Time now) {
  std::vector<Transition> out;
  for (;;) {
    // The earliest timed event at or before now.
    std::optional<Time> miss_at, readmit_at = ReadmitAt(), decay_at = DecayAt();
    const auto first = FirstDeadline();
    if (first != outstanding_.end()) miss_at = first->deadline;
    Time next = Time::max();
    for (const auto& t : {miss_at, readmit_at, decay_at}) {
      if (t && *t < next) next = *t;
    }
    if (next > now) break;
    if (miss_at && *miss_at == next) {
      recently_missed_.push_back(first->seq);
      if (recently_missed_.size() > kMaxRecentlyMissed) recently_missed_.pop_front();
      outstanding_.erase(first);
      Miss(next, out);
    } else if (readmit_at && *readmit_at == next) {
      clean_since_.reset();
      decay_anchor_ = next;
      Move(PathState::kUp, next, out);
    } else {
      --level_;
      decay_anchor_ = next;
    }
  }
  while (!window_.empty() && window_.front().at <= now - options_.stats_window) window_.pop_front();
  return out;
}

void PathHealth::Miss(Time at, std::vector<Transition>& out) {
  ++totals_.misses;
  Record({at, true, Nanos(-1), Nanos(0)});
  ++misses_in_a_row_;
  const bool threshold = misses_in_a_row_ >= options_.miss_threshold;
  switch (state_) {
    case PathState::kUnknown:
      if (threshold) Move(PathState::kDown, at, out);
      break;
    case PathState::kUp:
    case PathState::kSuspect:
      Move(threshold ? PathState::kDown : PathState::kSuspect, at, out);
      break;
    case PathState::kRecovering:
      clean_since_.reset();
      if (threshold) Move(PathState::kDown, at, out);
      break;
    case PathState::kDown:
      break;
  }
  // Confirm at once rather than a whole gap later (see the header).
  urgent_ = state_ == PathState::kSuspect || state_ == PathState::kRecovering;
}

void PathHealth::Deliver(Time at, std::vector<Transition>& out) {
  misses_in_a_row_ = 0;
  urgent_ = false;
  switch (state_) {
    case PathState::kUnknown:
    case PathState::kSuspect:
      decay_anchor_ = state_ == PathState::kUnknown ? at : decay_anchor_;
      Move(PathState::kUp, at, out);
      break;
    case PathState::kDown:
      clean_since_ = at;
      Move(PathState::kRecovering, at, out);
      break;
    case PathState::kRecovering:
      if (!clean_since_) clean_since_ = at;
      break;
    case PathState::kUp:
      break;
  }
}

void PathHealth::Move(PathState to, Time at, std::vector<Transition>& out) {
  if (to == state_) return;
  const bool flap = to == PathState::kDown && state_ != PathState::kUnknown;
  if (flap && level_ < HoldDownLevelCap(options_)) ++level_;
  if (to == PathState::kDown) clean_since_.reset();
  out.push_back({key_, state_, to, at, flap});
  state_ = to;
}

std::optional<Time> PathHealth::ReadmitAt() const {
  if (state_ != PathState::kRecovering || !clean_since_) return std::nullopt;
  return *clean_since_ + RequiredCleanPeriod(options_, level_);
}

std::optional<Time> PathHealth::DecayAt() const {
  if (level_ <= 0 || (state_ != PathState::kUp && state_ != PathState::kSuspect)) return std::nullopt;
  return decay_anchor_ + options_.hold_down_decay;
}

std::optional<Time> PathHealth::NextDeadline() const {
  std::optional<Time> best;
  std::optional<Time> miss_at;
  if (const auto first = FirstDeadline(); first != outstanding_.end()) miss_at = first->deadline;
  for (const auto& t : {miss_at, ReadmitAt(), DecayAt()}) {
    if (t && (!best || *t < *best)) best = t;
  }
  return best;
}

void PathHealth::Record(Sample s) {
  window_.push_back(s);
  if (window_.size() > kMaxWindowSamples) window_.pop_front();
}

PathStats PathHealth::Stats(Time now) const {
  PathStats s = totals_;
  std::vector<Nanos> owd, rtt;
  owd.reserve(window_.size());
  rtt.reserve(window_.size());
  int lost = 0;
  for (const Sample& x : window_) {
    if (x.at <= now - options_.stats_window || x.at > now) continue;
    if (x.late) {  // its miss is in the window already
      if (x.owd >= Nanos(0)) owd.push_back(x.owd);
      continue;
    }
    ++s.window_samples;
    if (x.lost) {
      ++lost;
      continue;
    }
    if (x.rtt >= Nanos(0)) rtt.push_back(x.rtt);
    if (x.owd >= Nanos(0)) owd.push_back(x.owd);
  }
  if (s.window_samples > 0) s.loss = static_cast<double>(lost) / s.window_samples;
  s.owd_samples = static_cast<int>(owd.size());
  s.rtt_samples = static_cast<int>(rtt.size());
  if (!owd.empty()) std::tie(s.owd_p50, s.owd_p99) = P50P99(owd);
  if (!rtt.empty()) std::tie(s.rtt_p50, s.rtt_p99) = P50P99(rtt);
  return s;
}

std::optional<Nanos> PathHealth::RankingDelay(Time now) const {
  PathStats s = Stats(now);
  if (s.owd_p50) return s.owd_p50;
  if (s.rtt_p50) return *s.rtt_p50 / 2;
  return std::nullopt;
}

}  // namespace lockstep::fabric

