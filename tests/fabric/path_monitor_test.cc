// The whole decision core on simulated time: probes, replies, faults, routes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>

#include "fabric_sim.h"

namespace lockstep::fabric {
namespace {

using testing::At;
using testing::FabricSim;

// Which (rail, peer) links are cut, as a function of time.
struct Faults {
  std::vector<std::tuple<Time, Time, int, std::string>> cuts;  // [from, to), rail, peer ("" = every peer)
  bool Delivers(const PathKey& p, Time t) const {
    for (const auto& [from, to, rail, peer] : cuts) {
      if (t >= from && t < to && p.rail == rail && (peer.empty() || peer == p.peer)) return false;
    }
    return true;
  }
};

FabricOptions Ecmp() {
  FabricOptions o;
  o.pin_home = false;
  return o;
}

TEST_CASE("ECMP mode: a cut rail is detected within the worst case, the peer moves, and comes back after re-admission", "[fabric]") {
  PathMonitor m(Ecmp(), 1);
  Faults f{{{At(1s), At(3s), 0, "b"}}};
  FabricSim sim(m, [&](const PathKey& p, Time t) { return f.Delivers(p, t); });
  sim.Start(EnumeratePaths(2, {"b", "c"}));
  sim.RunUntil(At(1s) - 1ns);
  REQUIRE(m.State({0, "b", 0}) == PathState::kUp);
  REQUIRE(sim.routes().empty());  // all healthy: ECMP

  sim.RunUntil(At(1200ms));
  std::vector<RailView> rails = m.Rails(At(1200ms));
  REQUIRE(rails[0].failed == 1);  // only b's path on rail 0: the rail itself is not down
  REQUIRE(rails[0].usable == 1);
  REQUIRE_FALSE(rails[0].down);
  const Time down = *sim.FirstTransition({0, "b", 0}, PathState::kDown, At(1s));
  REQUIRE(down - At(1s) <= WorstCaseDetection(m.options()));
  REQUIRE(sim.routes() == std::map<std::string, PathKey>{{"b", {1, "b", 0}}});
  REQUIRE(m.Pin("b") == PathKey{1, "b", 0});
  REQUIRE_FALSE(m.Pin("c"));

  // Repaired at 3 s: recovering at the first reply, re-admitted 2 s later, unpinned.
  sim.RunUntil(At(4900ms));
  REQUIRE(m.State({0, "b", 0}) == PathState::kRecovering);
  REQUIRE(sim.routes().size() == 1);
  sim.RunUntil(At(5100ms));
  const Time up = *sim.FirstTransition({0, "b", 0}, PathState::kUp, At(3s));
  REQUIRE(up - At(3s) >= 2s);
  // The first probe after the repair and its ack, or a probe lost just before
  // the repair timing out after it and restarting the clean period:
  REQUIRE(up - At(3s) <= 2s + 16ms + m.options().reply_timeout);
  REQUIRE(sim.routes().empty());
  REQUIRE(sim.route_changes() == 2);
  // One peer's path, not the whole rail: a path flap, no rail flap.
  REQUIRE(m.FlapsInWindow(At(5100ms)) == 0);
  REQUIRE_FALSE(m.LastFlap());
  for (const PathView& v : m.Paths(At(5100ms))) REQUIRE(v.flaps_in_window == (v.path == PathKey{0, "b", 0} ? 1 : 0));
}

TEST_CASE("urgent probes keep detection within the worst case wherever the fault falls, without them it takes gaps more", "[fabric]") {
  // 300 cuts of one path at times spread over a probe gap, each in a fresh
  // monitor and simulation: the slowest detection with urgent probes is
  // within WorstCaseDetection; an agent that ignores them needs up to
  // N gaps + the ack timeout.
  Nanos worst_with{0}, worst_without{0};
  for (int i = 0; i < 300; ++i) {
    for (bool urgent : {true, false}) {
      PathMonitor m(FabricOptions{}, static_cast<uint64_t>(i + 1));
      const Time cut = At(1s) + i * 53us;
      Faults f{{{cut, At(5s), 0, "b"}}};
      FabricSim sim(m, [&](const PathKey& p, Time t) { return f.Delivers(p, t); });
      sim.SendUrgent(urgent);
      sim.Start(EnumeratePaths(2, {"b"}));
      sim.RunUntil(At(1200ms));
      const Nanos took = *sim.FirstTransition({0, "b", 0}, PathState::kDown, cut) - cut;
      Nanos& worst = urgent ? worst_with : worst_without;
      worst = std::max(worst, took);
      REQUIRE(sim.urgent_sent() == (urgent ? 2 : 0));  // N - 1 for the one fault
    }
  }
  const FabricOptions o;
  REQUIRE(worst_with <= WorstCaseDetection(o));
  REQUIRE(worst_with > WorstCaseDetection(o) - 5ms);  // the bound is tight
  REQUIRE(worst_without > WorstCaseDetection(o) + 10ms);
  REQUIRE(worst_without <= 3 * 15400us + o.reply_timeout);
}

TEST_CASE("home pins: every peer is pinned to its home path, moves off it when it fails, and returns when it is re-admitted", "[fabric]") {
  PathMonitor m(FabricOptions{}, 1);
  const std::vector<std::string> peers = {"b", "c", "d", "e", "f", "g"};
  std::map<std::string, PathKey> home;
  for (const std::string& p : peers) {
    home[p] = *HomePath("", p, {{{0, p, 0}, PathState::kUp, {}}, {{1, p, 0}, PathState::kUp, {}}});
  }
  std::set<int> home_rails;
  for (const auto& [p, k] : home) home_rails.insert(k.rail);
  REQUIRE(home_rails.size() == 2);  // six peers spread over both rails
  // Cut each peer's home link from 1 s to 3 s.
  Faults f;
  for (const auto& [p, k] : home) f.cuts.emplace_back(At(1s), At(3s), k.rail, p);
  FabricSim sim(m, [&](const PathKey& p, Time t) { return f.Delivers(p, t); });
  sim.Start(EnumeratePaths(2, peers));
  sim.RunUntil(At(1s) - 1ns);
  REQUIRE(sim.routes() == home);  // all healthy: home, not ECMP
  REQUIRE(sim.route_changes() == 6);

  sim.RunUntil(At(1200ms));
  for (const auto& [p, k] : home) {
    INFO(p);
    REQUIRE(sim.routes().at(p) == PathKey{1 - k.rail, p, 0});
    const Time down = *sim.FirstTransition(k, PathState::kDown, At(1s));
    REQUIRE(down - At(1s) <= WorstCaseDetection(m.options()));
  }
  REQUIRE(sim.route_changes() == 12);

  // Repaired at 3 s, re-admitted after the clean period: back home (the
  // repaired path is reused), one more move per peer, nothing else.
  sim.RunUntil(At(4900ms));
  for (const auto& [p, k] : home) REQUIRE(sim.routes().at(p) != k);
  sim.RunUntil(At(5100ms));
  REQUIRE(sim.routes() == home);
  REQUIRE(sim.route_changes() == 18);
}

TEST_CASE("one link flapping is counted once per flap for its rail, and alerts once above the threshold", "[fabric]") {
  FabricOptions o;
  o.readmit_after = 100ms;  // so the flaps below are separate downs
  PathMonitor m(o, 2);
  Faults f;
  // Rail 0 of this host flaps 12 times: cut 200 ms, then 800 ms up.
  for (int i = 0; i < 12; ++i) f.cuts.emplace_back(At(i * 1s + 500ms), At(i * 1s + 700ms), 0, "");
  FabricSim sim(m, [&](const PathKey& p, Time t) { return f.Delivers(p, t); });
  sim.Start(EnumeratePaths(2, {"b", "c", "d"}));
  sim.RunUntil(At(13s));
  REQUIRE(m.RailFlaps(0, At(13s)) == 12);  // not 36: the three paths fail together
  REQUIRE(m.RailFlaps(1, At(13s)) == 0);
  std::vector<RailView> rails = m.Rails(At(13s));
  REQUIRE(rails.size() == 2);
  REQUIRE(rails[0].flaps_in_window == 12);
  REQUIRE(rails[0].alerting);
  REQUIRE_FALSE(rails[1].alerting);
  REQUIRE(sim.alerts().size() == 1);
  REQUIRE(sim.alerts()[0].rail == 0);
  REQUIRE(sim.alerts()[0].flaps_in_window == 9);
  for (const PathView& v : m.Paths(At(13s))) REQUIRE(v.flaps_in_window == (v.path.rail == 0 ? 12 : 0));
}

TEST_CASE("a peer's link flapping is a path flap, not a flap of our rail: no alert here", "[fabric]") {
  FabricOptions o;
  o.readmit_after = 100ms;
  PathMonitor m(o, 2);
  Faults f;
  // Peer c's rail-0 link flaps 12 times; b and d stay reachable on rail 0.
  for (int i = 0; i < 12; ++i) f.cuts.emplace_back(At(i * 1s + 500ms), At(i * 1s + 700ms), 0, "c");
  FabricSim sim(m, [&](const PathKey& p, Time t) { return f.Delivers(p, t); });
  sim.Start(EnumeratePaths(2, {"b", "c", "d"}));
  sim.RunUntil(At(13s));
  REQUIRE(m.RailFlaps(0, At(13s)) == 0);
  REQUIRE(m.FlapsInWindow(At(13s)) == 0);
  REQUIRE_FALSE(m.LastFlap());
  REQUIRE(sim.alerts().empty());
  for (const PathView& v : m.Paths(At(13s))) {
    INFO(v.path.peer << " rail " << v.path.rail);
    REQUIRE(v.flaps_in_window == (v.path.rail == 0 && v.path.peer == "c" ? 12 : 0));
  }
  for (const RailView& r : m.Rails(At(13s))) REQUIRE_FALSE(r.alerting);
}

TEST_CASE("a rail that is dead from the start does not flap, once it delivered, going down is a flap", "[fabric]") {
  PathMonitor m(FabricOptions{}, 4);
  Faults f{{{At(0s), At(2s), 0, ""}, {At(5s), At(6s), 0, ""}}};
  FabricSim sim(m, [&](const PathKey& p, Time t) { return f.Delivers(p, t); });
  sim.Start(EnumeratePaths(2, {"b", "c"}));
  sim.RunUntil(At(1900ms));
  REQUIRE(m.Rails(At(1900ms))[0].down);
  REQUIRE(m.RailFlaps(0, At(1900ms)) == 0);
  sim.RunUntil(At(5500ms));
  REQUIRE(m.RailFlaps(0, At(5500ms)) == 1);
  REQUIRE(m.LastFlap().has_value());
  REQUIRE(*m.LastFlap() >= At(5s));
}

TEST_CASE("adopted pins are kept until the paths have a verdict, then planned like our own", "[fabric]") {
  PathMonitor m(FabricOptions{}, 3);
  m.AdoptPin("b", {1, "b", 0});  // left behind by the previous agent while rail 0 was broken
  Faults f{{{At(0s), At(1h), 0, "b"}}};
  FabricSim sim(m, [&](const PathKey& p, Time t) { return f.Delivers(p, t); });
  sim.Start(EnumeratePaths(2, {"b"}));
  sim.RunUntil(At(1s));
  REQUIRE(sim.route_changes() == 0);  // never unpinned in between
  REQUIRE(m.Pin("b") == PathKey{1, "b", 0});
  REQUIRE(m.State({0, "b", 0}) == PathState::kDown);
}

TEST_CASE("alternating failures of two rails move the route once per failure, never back and forth", "[fabric]") {
  FabricOptions o = Ecmp();
  o.readmit_after = 500ms;
  o.max_hold_down = 1s;
  PathMonitor m(o, 4);
  Faults f;
  // Rail 0 and rail 1 take turns failing for 300 ms, 200 ms apart.
  for (int i = 0; i < 10; ++i) f.cuts.emplace_back(At(i * 500ms + 100ms), At(i * 500ms + 400ms), i % 2, "");
  FabricSim sim(m, [&](const PathKey& p, Time t) { return f.Delivers(p, t); });
  sim.Start(EnumeratePaths(2, {"b"}));
  sim.RunUntil(At(8s));
  int downs = 0;
  for (const Transition& t : sim.transitions()) downs += t.to == PathState::kDown;
  REQUIRE(downs == 10);
  REQUIRE(sim.route_changes() <= downs + 1);
  REQUIRE(sim.routes().empty());  // both re-admitted at the end
}

// Property: under a random fault schedule, every peer with a delivering path
// has a route that does not rely on a failed path, and routes change no more
// often than path states.
TEST_CASE("random faults: peers with a working path are always routed, and routes do not oscillate", "[fabric]") {
  for (uint64_t seed : {11u, 12u, 13u, 14u, 15u, 16u, 17u, 18u, 19u, 20u}) {
    const bool pin_home = seed % 2 == 0;
    INFO("seed " << seed << (pin_home ? ", home pins" : ", ECMP mode"));
    std::mt19937_64 rng(seed);
    const std::vector<std::string> peers = {"b", "c", "d"};
    FabricOptions o;
    o.pin_home = pin_home;
    o.readmit_after = 300ms;
    o.max_hold_down = 3s;
    PathMonitor m(o, seed);
    Faults f;
    std::uniform_int_distribution<int> rail(0, 2), peer(-1, 2), start_ms(0, 59'000), len_ms(5, 3000);
    for (int i = 0; i < 60; ++i) {  // links and whole rails cut at random, overlapping
      Time from = At(std::chrono::milliseconds(start_ms(rng)));
      int p = peer(rng);
      f.cuts.emplace_back(from, from + std::chrono::milliseconds(len_ms(rng)), rail(rng), p < 0 ? "" : peers[p]);
    }
    std::map<std::string, std::optional<PathKey>> last_route;
    // One-way delays of 20..80 us per path, fixed per seed.
    std::map<PathKey, Nanos> delay;
    std::uniform_int_distribution<int> us(20, 80);
    for (const PathKey& p : EnumeratePaths(3, peers)) delay[p] = std::chrono::microseconds(us(rng));
    FabricSim sim(m, [&](const PathKey& p, Time t) { return f.Delivers(p, t); },
                  [&](const PathKey& p) { return delay.at(p); });
    sim.after_step = [&](const FabricSim& s) {
      for (const std::string& peer_name : peers) {
        std::vector<PathState> states;
        for (int r = 0; r < 3; ++r) states.push_back(m.State({r, peer_name, 0}));
        auto route = s.routes().find(peer_name);
        std::optional<PathKey> now_route;
        if (route != s.routes().end()) now_route = route->second;
        // No needless moves: a pin leaves its path only when that path failed,
        // or, with home pins, to go home once every path delivers again.
        std::optional<PathKey>& before = last_route[peer_name];
        if (before && now_route && *before != *now_route && Usable(m.State(*before))) {
          std::vector<PathChoice> all;
          for (int r = 0; r < 3; ++r) all.push_back({{r, peer_name, 0}, states[r], {}});
          REQUIRE(pin_home);
          REQUIRE(*now_route == *HomePath("", peer_name, all));
          REQUIRE(std::all_of(states.begin(), states.end(), Usable));
        }
        before = now_route;
        const bool any_usable = std::any_of(states.begin(), states.end(), Usable);
        const bool any_failed = std::any_of(states.begin(), states.end(), Failed);
        if (route != s.routes().end()) {
          // A route to a dead path only while no path delivers (the pin stays: ECMP is no better).
          if (m.State(route->second) == PathState::kDown) REQUIRE_FALSE(any_usable);
          if (any_usable) REQUIRE(Usable(m.State(route->second)));
        } else if (any_usable) {
          // With home pins a peer with a working path has a route once every
          // path has a verdict (before that, at start, static ECMP carries it).
          const bool all_known = std::none_of(states.begin(), states.end(),
                                              [](PathState st) { return st == PathState::kUnknown; });
          REQUIRE_FALSE((pin_home && all_known));
          REQUIRE_FALSE(any_failed);  // unpinned only while no path is failed
        }
      }
    };
    sim.Start(EnumeratePaths(3, peers));
    sim.RunUntil(At(70s));
    std::map<std::string, int> states_per_peer;
    for (const Transition& t : sim.transitions()) ++states_per_peer[t.path.peer];
    int total_states = 0;
    for (const auto& [p, n] : states_per_peer) total_states += n;
    // Every route change follows a state change (home pins add the first
    // pin of each peer).
    REQUIRE(sim.route_changes() <= total_states + (pin_home ? 3 : 0));
    REQUIRE(sim.route_changes() > 0);
    // The end: every cut is over and every path re-admitted, so ECMP again,
    // or every peer at home.
    if (pin_home) {
      for (const std::string& p : peers) {
        std::vector<PathChoice> paths;
        for (int r = 0; r < 3; ++r) paths.push_back({{r, p, 0}, PathState::kUp, {}});
        REQUIRE(sim.routes().at(p) == *HomePath("", p, paths));
      }
    } else {
      REQUIRE(sim.routes().empty());
    }
    for (const PathView& v : m.Paths(At(70s))) REQUIRE(v.state == PathState::kUp);
  }
}

TEST_CASE("dropping a peer's paths unpins it, failover disabled pins nothing", "[fabric]") {
  PathMonitor m(FabricOptions{}, 5);
  Faults f{{{At(0s), At(1h), 0, ""}}};
  FabricSim sim(m, [&](const PathKey& p, Time t) { return f.Delivers(p, t); });
  sim.Start(EnumeratePaths(2, {"b", "c"}));
  sim.RunUntil(At(200ms));
  REQUIRE(sim.routes().size() == 2);
  REQUIRE(m.Rails(At(200ms))[0].down);  // every path of rail 0 failed
  REQUIRE_FALSE(m.Rails(At(200ms))[1].down);
  Decisions d = m.SetPaths(EnumeratePaths(2, {"c"}), At(200ms));
  REQUIRE(d.actions == std::vector<RouteAction>{UnpinPeer{"b"}});
  REQUIRE(m.Paths(At(200ms)).size() == 2);

  FabricOptions off;
  off.failover_enabled = false;
  PathMonitor observer(off, 6);
  FabricSim sim2(observer, [&](const PathKey& p, Time t) { return f.Delivers(p, t); });
  sim2.Start(EnumeratePaths(2, {"b"}));
  sim2.RunUntil(At(200ms));
  REQUIRE(observer.State({0, "b", 0}) == PathState::kDown);
  REQUIRE(sim2.route_changes() == 0);
}

TEST_CASE("a machine-wide stall longer than the urgent timeout declares nothing down, a shorter lateness excuses nothing", "[fabric]") {
  // Every path delivers (acks 1 ms after a probe leaves) until the whole
  // machine stalls for 40 ms: nothing is sent or answered in it, and the
  // peers, catching up, answer what was sent until 12 ms after it only then
  // (longer than the urgent timeout). Without the excuse that silence is
  // three misses of every path; with it, none.
  for (const bool excuse : {false, true}) {
    PathMonitor m(FabricOptions{}, 7);
    const std::vector<PathKey> paths = EnumeratePaths(2, {"b", "c"});
    const Time stall_from = At(500ms), stall_to = At(540ms), caught_up = stall_to + 12ms;
    auto acked_at = [&](Time sent) {
      const Time t = sent + 1ms;
      return t >= stall_from && t < caught_up ? caught_up : t;
    };
    Time now = At(0ms);
    (void)m.SetPaths(paths, now);
    uint64_t seq = 0;
    std::map<PathId, std::vector<std::pair<uint64_t, Time>>> pending;  // probes not yet acked: seq, sent
    int downs = 0, misses = 0;
    auto take = [&](const Decisions& d) {
      for (const Transition& t : d.transitions) downs += t.to == PathState::kDown ? 1 : 0;
    };
    while (now < At(1000ms)) {
      const Time due = *m.NextWakeup();
      now = due > stall_from && due < stall_to ? stall_to : due;  // frozen in the stall
      if (excuse) (void)m.ExcuseStall(due, now);
      for (auto& [path, probes] : pending) {
        for (const auto& [s, sent] : probes) {
          if (acked_at(sent) <= now) take(m.OnReply(path, {s, acked_at(sent), std::nullopt}));
        }
        std::erase_if(probes, [&](const auto& p) { return acked_at(p.second) <= now; });
      }
      take(m.Tick(now));
      if (m.TakeProbeTick(now)) {
        for (PathId p = 0; p < m.size(); ++p) {
          m.OnProbeSent(p, ++seq, now);
          pending[p].push_back({seq, now});
        }
      }
      for (PathId p : m.TakeUrgent()) {
        m.OnProbeSent(p, ++seq, now, true);
        pending[p].push_back({seq, now});
      }
    }
    for (const PathView& v : m.Paths(now)) misses += int(v.stats.misses);
    INFO("excuse: " << excuse << ", misses: " << misses);
    if (excuse) {
      REQUIRE(downs == 0);
      REQUIRE(misses == 0);
    } else {
      REQUIRE(downs == int(paths.size()));
    }
  }
  PathMonitor m(FabricOptions{}, 7);
  (void)m.SetPaths(EnumeratePaths(1, {"b"}), At(0ms));
  REQUIRE(m.ExcuseStall(At(10ms), At(10ms) + FabricOptions{}.urgent_timeout) == Stall::kNone);
  REQUIRE(m.ExcuseStall(At(10ms), At(10ms) + FabricOptions{}.urgent_timeout + 1ns) == Stall::kExcused);
}

TEST_CASE("stall excuses have a budget per sliding window, beyond it stalls are judged and persistent",
          "[fabric]") {
  FabricOptions o;
  o.stall_excuses = 3;
  o.stall_window = 10s;
  PathMonitor m(o, 7);
  (void)m.SetPaths(EnumeratePaths(1, {"b"}), At(0ms));
  auto stall = [&](Time due) { return m.ExcuseStall(due, due + 20ms); };
  CHECK(stall(At(1s)) == Stall::kExcused);
  CHECK(stall(At(2s)) == Stall::kExcused);
  CHECK(stall(At(3s)) == Stall::kExcused);
  CHECK_FALSE(m.Stalls(At(3s)).persistent);
  CHECK(stall(At(4s)) == Stall::kJudged);  // the budget is spent
  CHECK(stall(At(10s)) == Stall::kJudged);
  StallView v = m.Stalls(At(10s) + 20ms);
  CHECK(v.stalls == 5);
  CHECK(v.judged == 2);
  CHECK(v.persistent);
  CHECK(v.last_judged == At(10s) + 20ms);
  // The first excuse (1 s) slid out of the window: one more is excused.
  CHECK(stall(At(11s)) == Stall::kExcused);
  CHECK(stall(At(11s) + 100ms) == Stall::kJudged);
  // No judged stall for a whole window: no longer persistent.
  CHECK(m.Stalls(At(21s)).persistent);
  CHECK_FALSE(m.Stalls(At(21s) + 200ms).persistent);
  // Zero: never excused.
  FabricOptions never = o;
  never.stall_excuses = 0;
  PathMonitor n(never, 7);
  (void)n.SetPaths(EnumeratePaths(1, {"b"}), At(0ms));
  CHECK(n.ExcuseStall(At(1s), At(1s) + 20ms) == Stall::kJudged);
  CHECK(std::string(ToString(Stall::kJudged)) == "judged");
}

TEST_CASE("a real failure while the prober is late at every wake-up is still detected within the stated bound",
          "[fabric]") {
  // The prober wakes 8 ms after every due time (more than the 5 ms urgent
  // timeout: every wake-up is a stall) and excuses each stall it may. Every
  // path acks 1 ms after a probe leaves until one path dies at 2 s. Without
  // a budget (the control: one larger than the stalls) the excuse restarts
  // every timeout forever and the dead path is never declared down; with it
  // the path goes down within WorstCaseDetectionStalled, and nothing
  // healthy does.
  const Nanos late = 8ms;
  const std::vector<PathKey> paths = EnumeratePaths(2, {"b", "c"});
  const PathKey dead{0, "b", 0};
  const Time fail_at = At(2s);
  struct Outcome {
    std::optional<Time> dead_down;
    int other_downs = 0, judged = 0;
    bool persistent = false;
    PathState dead_state = PathState::kUnknown;
  };
  auto run = [&](const FabricOptions& o) {
    PathMonitor m(o, 7);
    Outcome out;
    (void)m.SetPaths(paths, At(0ms));
    Time now = At(0ms);
    uint64_t seq = 0;
    std::map<PathId, std::vector<std::pair<uint64_t, Time>>> pending;  // probes the peer acks: seq, sent
    auto take = [&](const Decisions& d) {
      for (const Transition& t : d.transitions) {
        if (t.to != PathState::kDown) continue;
        if (t.path == dead && t.at >= fail_at) {
          if (!out.dead_down) out.dead_down = t.at;
        } else {
          ++out.other_downs;
        }
      }
    };
    auto send = [&](PathId p, bool urgent) {
      m.OnProbeSent(p, ++seq, now, urgent);
      if (!(m.Key(p) == dead && now >= fail_at)) pending[p].push_back({seq, now});
    };
    while (now < At(4s)) {
      const Time due = *m.NextWakeup();
      now = std::max(now, due + late);
      out.judged += m.ExcuseStall(due, now) == Stall::kJudged ? 1 : 0;
      for (auto& [path, probes] : pending) {
        for (const auto& [s, sent] : probes) {
          if (sent + 1ms <= now) take(m.OnReply(path, {s, sent + 1ms, std::nullopt}));
        }
        std::erase_if(probes, [&](const auto& p) { return p.second + 1ms <= now; });
      }
      take(m.Tick(now));
      if (m.TakeProbeTick(now)) {
        for (PathId p = 0; p < m.size(); ++p) send(p, false);
      }
      for (PathId p : m.TakeUrgent()) send(p, true);
    }
    out.persistent = m.Stalls(now).persistent;
    out.dead_state = m.State(dead);
    return out;
  };
  FabricOptions o;
  REQUIRE(Validate(o).ok());
  const Outcome bounded = run(o);
  const Nanos bound = WorstCaseDetectionStalled(o, late);
  const double bound_ms = std::chrono::duration<double, std::milli>(bound).count();
  INFO("bound " << bound_ms << " ms");
  REQUIRE(bounded.dead_down);
  CHECK(*bounded.dead_down - fail_at <= bound);
  CHECK(bound < 250ms);  // 207.8 ms at the defaults
  CHECK(bounded.other_downs == 0);
  CHECK(bounded.judged > 0);
  CHECK(bounded.persistent);
  CHECK(bounded.dead_state == PathState::kDown);

  FabricOptions unbounded = o;  // what ExcuseStall did before it had a budget
  unbounded.stall_excuses = 1000;
  const Outcome control = run(unbounded);
  CHECK_FALSE(control.dead_down);  // no transition, so no failover (PathHealth drops its
                                   // oldest probe as a silent miss at 64 outstanding)
  CHECK(control.judged == 0);
}

TEST_CASE("paths are numbered in key order, SetPaths renumbers them and keeps what it keeps", "[fabric]") {
  PathMonitor m(FabricOptions{}, 7);
  (void)m.SetPaths(EnumeratePaths(2, {"b", "c"}), At(0ms));
  REQUIRE(m.size() == 4);
  for (PathId id = 0; id < m.size(); ++id) {
    REQUIRE(m.Find(m.Key(id)) == id);
    if (id > 0) REQUIRE(m.Key(id - 1) < m.Key(id));
  }
  REQUIRE_FALSE(m.Find({0, "a", 0}));
  REQUIRE_FALSE(m.Watches({0, "a", 0}));

  // c on rail 0 goes up, then misses a probe: suspect, and it asks for an urgent probe.
  const PathKey c0{0, "c", 0};
  m.OnProbeSent(*m.Find(c0), 1, At(0ms));
  (void)m.OnAck(*m.Find(c0), {1, 0, std::nullopt, 0ms}, At(1ms));
  REQUIRE(m.State(c0) == PathState::kUp);
  m.OnProbeSent(*m.Find(c0), 2, At(10ms));
  (void)m.Tick(At(10ms) + m.options().reply_timeout);
  REQUIRE(m.State(c0) == PathState::kSuspect);

  // a joins (before c in key order), b on rail 1 leaves: c keeps its state,
  // its urgent request and its probe outstanding, under its new id.
  std::vector<PathKey> paths = EnumeratePaths(2, {"a", "b", "c"});
  std::erase(paths, PathKey{1, "b", 0});
  (void)m.SetPaths(paths, At(30ms));
  REQUIRE(m.size() == 5);
  REQUIRE_FALSE(m.Find({1, "b", 0}));
  const PathId c0_id = *m.Find(c0);
  REQUIRE(m.Key(c0_id) == c0);
  REQUIRE(m.State(c0) == PathState::kSuspect);
  REQUIRE(m.TakeUrgent() == std::vector<PathId>{c0_id});
  m.OnProbeSent(c0_id, 3, At(31ms), true);
  (void)m.OnAck(c0_id, {3, 0, std::nullopt, 0ms}, At(32ms));
  REQUIRE(m.State(c0) == PathState::kSuspect);  // an urgent ack alone clears nothing (path_health.h)
  m.OnProbeSent(c0_id, 4, At(40ms));
  (void)m.OnAck(c0_id, {4, 0, std::nullopt, 0ms}, At(41ms));
  REQUIRE(m.State(c0) == PathState::kUp);
  REQUIRE(m.State({0, "a", 0}) == PathState::kUnknown);
}

}  // namespace
}  // namespace lockstep::fabric
