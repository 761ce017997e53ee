// FabricSim: drives a PathMonitor the way the agent will, on simulated time,
// against a fault schedule (which paths deliver when). A probe is answered
// after the path's round trip when the path delivers both when the probe
// leaves and when the reply arrives. It applies route actions to a routing
// table (what a RouteActuator would hold) and counts state and route changes.
// Deterministic; header-only, test-only.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "lockstep/fabric/path_monitor.h"

namespace lockstep::fabric::testing {

using namespace std::chrono_literals;

inline Time T0() { return Time{} + 1h; }
inline Time At(Nanos d) { return T0() + d; }

class FabricSim {
 public:
  using Delivers = std::function<bool(const PathKey&, Time)>;
  using Delay = std::function<Nanos(const PathKey&)>;  // one-way delay; the round trip is twice it

  FabricSim(PathMonitor& m, Delivers delivers, Delay delay = [](const PathKey&) { return Nanos(50us); })
      : m_(m), delivers_(std::move(delivers)), delay_(std::move(delay)) {}

  Time now() const { return now_; }
  const std::map<std::string, PathKey>& routes() const { return routes_; }
  int state_changes() const { return state_changes_; }
  int route_changes() const { return route_changes_; }
  const std::vector<Transition>& transitions() const { return transitions_; }
  const std::vector<FlapAlert>& alerts() const { return alerts_; }
  // Called after every step (invariant checks).
  std::function<void(const FabricSim&)> after_step;
  // False: ignore the monitor's requests for urgent probes (as an agent
  // without them would), to compare.
  void SendUrgent(bool on) { urgent_ = on; }
  // True: probe what the monitor's tiers pick at each tick (probe_tiers.h)
  // instead of every path.
  void Tiered(bool on) { tiered_ = on; }
  int probes_sent() const { return probes_sent_; }
  int slow_sent() const { return slow_sent_; }
  // Distinct times the monitor asked to run at (the prober's wake-ups).
  int wakeups() const { return wakeups_; }
  // How long the peer holds its ack of a probe (its next tick: idle ticks,
  // options.h), by path, send time and whether the probe was a slow one.
  using Hold = std::function<Nanos(const PathKey&, Time, bool)>;
  void PeerHold(Hold hold) { hold_ = std::move(hold); }
  // True: answer with the peer's acknowledgement (PathMonitor::OnAck, as the
  // agent does: it names the hold, which the round trip leaves out) instead
  // of a reply (OnReply: the hold counts into the round trip).
  void Acks(bool on) { acks_ = on; }
  int urgent_sent() const { return urgent_sent_; }

  void Start(const std::vector<PathKey>& paths) { Apply(m_.SetPaths(paths, now_)); }

  // Runs every event up to and including `end`.
  void RunUntil(Time end) {
    for (int guard = 0; guard < 100'000'000; ++guard) {
      Time next = Time::max();
      if (auto w = m_.NextWakeup()) next = *w;
      const Time wake = next;
      if (!inflight_.empty() && inflight_.begin()->first < next) next = inflight_.begin()->first;
      if (next > end) break;
      if (next > now_) {
        now_ = next;
        // A reply's arrival wakes no agent (it waits in the socket): only
        // the monitor's own wake-ups count.
        if (next == wake) ++wakeups_;
      }
      while (!inflight_.empty() && inflight_.begin()->first <= now_) {
        auto [path, reply, held] = inflight_.begin()->second;
        inflight_.erase(inflight_.begin());
        // A reply for a path no longer watched is dropped (as the agent drops it).
        if (auto id = m_.Find(path); id && delivers_(path, now_)) {
          if (acks_) {
            const AckField ack{
                .seq = static_cast<uint32_t>(reply.seq), .one_way_delay = reply.one_way_delay, .held = held};
            Apply(m_.OnAck(*id, ack, now_));
          } else {
            Apply(m_.OnReply(*id, reply));
          }
        }
      }
      Apply(m_.Tick(now_));
      if (tiered_) {
        if (m_.TakeProbeTick(now_, tick_)) {
          for (PathId p : tick_) Send(p, false);
        }
      } else if (m_.TakeProbeTick(now_)) {
        for (PathId p = 0; p < m_.size(); ++p) Send(p, false);
      }
      if (urgent_) {
        for (PathId p : m_.TakeUrgent()) Send(p, true);
      }
      if (after_step) after_step(*this);
    }
    now_ = end;
    Apply(m_.Tick(now_));
  }

  // The first transition of `path` into `to` at or after `since`.
  std::optional<Time> FirstTransition(const PathKey& path, PathState to, Time since) const {
    for (const Transition& t : transitions_) {
      if (t.path == path && t.to == to && t.at >= since) return t.at;
    }
    return std::nullopt;
  }

 private:
  void Apply(const Decisions& d) {
    for (const Transition& t : d.transitions) transitions_.push_back(t);
    state_changes_ += static_cast<int>(d.transitions.size());
    for (const FlapAlert& a : d.alerts) alerts_.push_back(a);
    for (const RouteAction& a : d.actions) {
      ++route_changes_;
      if (const auto* pin = std::get_if<PinPeer>(&a)) routes_[pin->peer] = pin->path;
      else routes_.erase(std::get<UnpinPeer>(a).peer);
    }
  }

  void Send(PathId id, bool urgent) {
    const bool slow = !urgent && m_.SlowProbe(id);
    m_.OnProbeSent(id, ++seq_, now_, urgent);
    const PathKey& p = m_.Key(id);
    urgent_sent_ += urgent ? 1 : 0;
    slow_sent_ += slow ? 1 : 0;
    ++probes_sent_;
    if (!delivers_(p, now_)) return;
    const Nanos d = delay_(p);
    const Nanos held = hold_ && !urgent ? hold_(p, now_, slow) : Nanos(0);
    inflight_.emplace(now_ + 2 * d + held, std::make_tuple(p, Reply{seq_, now_ + 2 * d + held, d}, held));
  }

  PathMonitor& m_;
  Delivers delivers_;
  Delay delay_;
  Time now_ = T0();
  uint64_t seq_ = 0;
  std::multimap<Time, std::tuple<PathKey, Reply, Nanos>> inflight_;  // and the peer's hold
  std::map<std::string, PathKey> routes_;
  std::vector<Transition> transitions_;
  std::vector<FlapAlert> alerts_;
  int state_changes_ = 0, route_changes_ = 0;
  bool urgent_ = true;
  int urgent_sent_ = 0;
  bool tiered_ = false;
  std::vector<PathId> tick_;
  int probes_sent_ = 0;
  int slow_sent_ = 0;
  int wakeups_ = 0;
  Hold hold_;
  bool acks_ = false;
};

}  // namespace lockstep::fabric::testing
