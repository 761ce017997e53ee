// Tiered probing (probe_tiers.h): which paths a tick probes, the idle
// rotation's budget and bound, promotion on a loss or a late ack, and the
// detection it gives through PathMonitor.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "fabric_sim.h"
#include "lockstep/fabric/options.h"
#include "lockstep/fabric/path_monitor.h"
#include "lockstep/fabric/probe_tiers.h"

namespace lockstep::fabric {
namespace {

using testing::At;

std::vector<TierFacts> Up(size_t n) { return std::vector<TierFacts>(n, TierFacts{.state = PathState::kUp}); }

// Ticks at jittered gaps like the schedule's (interval * [1 - j, 1 + j]).
struct Ticker {
  explicit Ticker(const FabricOptions& o, uint64_t seed) : schedule(o.probe_interval, o.jitter, seed) {}
  Time Next() { return now += schedule.NextGap(); }
  ProbeSchedule schedule;
  Time now = At(0ms);
};

TEST_CASE("probe tiers: off probes every path at every tick", "[fabric][tiers]") {
  FabricOptions o;
  o.idle_interval = 0ms;
  REQUIRE(Validate(o).ok());
  ProbeTiers t(o);
  REQUIRE_FALSE(t.enabled());
  std::vector<uint32_t> out;
  for (int tick = 0; tick < 5; ++tick) {
    out.clear();
    t.Plan(At(tick * 14ms), Up(10), out);
    REQUIRE(out.size() == 10);
    REQUIRE(t.fast() == 10);
    REQUIRE(t.tier(3) == Tier::kFast);
  }
  REQUIRE(WorstCaseDetectionIdle(o) == WorstCaseDetection(o));
}

TEST_CASE("probe tiers: traffic, unknown and suspect paths are probed at every tick, idle ones within the budget",
          "[fabric][tiers]") {
  FabricOptions o;  // 14 ms +-10%, idle every 500 ms
  ProbeTiers t(o);
  auto facts = Up(128);
  facts[5].carries_traffic = true;
  facts[9].state = PathState::kUnknown;
  facts[77].state = PathState::kSuspect;
  Ticker ticker(o, 1);
  std::vector<uint32_t> out;
  std::map<uint32_t, Time> last;
  Nanos longest_idle_gap{0};
  size_t most_idle_in_a_tick = 0;
  // share: 125 idle x ~14 ms / 500 ms = 3.5 a tick, at most 4 (15.4 ms).
  const size_t share = 4;
  for (int tick = 0; tick < 2000; ++tick) {  // ~28 s
    const Time now = ticker.Next();
    out.clear();
    t.Plan(now, facts, out);
    std::set<uint32_t> probed(out.begin(), out.end());
    REQUIRE(probed.size() == out.size());  // no path twice
    REQUIRE(probed.contains(5));
    REQUIRE(probed.contains(9));
    REQUIRE(probed.contains(77));
    REQUIRE(t.fast() == 3);
    REQUIRE(t.tier(5) == Tier::kTraffic);
    REQUIRE(t.tier(9) == Tier::kVerdict);
    REQUIRE(t.tier(77) == Tier::kVerdict);
    REQUIRE(t.tier(0) == Tier::kIdle);
    if (tick == 0) {
      REQUIRE(out.size() == 128);  // never probed: all at the first tick
    } else {
      most_idle_in_a_tick = std::max(most_idle_in_a_tick, out.size() - 3);
    }
    for (uint32_t id : out) {
      if (auto it = last.find(id); it != last.end() && IsFast(t.tier(id)) == false) {
        longest_idle_gap = std::max(longest_idle_gap, now - it->second);
      }
      last[id] = now;
    }
  }
  INFO("longest idle gap " << longest_idle_gap.count() << " ns, most idle probes in a tick " << most_idle_in_a_tick);
  // Every idle path at least every idle_interval; no tick beyond the share
  // plus the ones that fell due (here: never more than twice the share).
  REQUIRE(longest_idle_gap <= o.idle_interval);
  REQUIRE(most_idle_in_a_tick <= 2 * share);
  // And the rotation is not needlessly fast: ~125 paths / 4 a tick x 14 ms.
  REQUIRE(longest_idle_gap >= 350ms);
}

TEST_CASE("probe tiers: a few idle paths are not probed at every tick", "[fabric][tiers]") {
  FabricOptions o;
  ProbeTiers t(o);
  Ticker ticker(o, 4);
  std::vector<uint32_t> out;
  size_t probes = 0;
  const int ticks = 3571;  // ~50 s
  for (int tick = 0; tick < ticks; ++tick) {
    out.clear();
    t.Plan(ticker.Next(), Up(6), out);
    if (tick > 0) probes += out.size();
  }
  const double per_s = static_cast<double>(probes) / std::chrono::duration<double>(ticker.now - At(0ms)).count();
  INFO("idle probes/s " << per_s);
  CHECK(per_s >= 6 / 0.5 * 0.9);  // 12/s: each of 6 paths every ~500 ms
  CHECK(per_s <= 6 / 0.5 * 1.2);  // not 71/s (one at every tick)
}

TEST_CASE("probe tiers: the budget bound holds when the idle set changes every tick", "[fabric][tiers]") {
  FabricOptions o;
  o.idle_interval = 200ms;
  ProbeTiers t(o);
  std::mt19937_64 rng(3);
  Ticker ticker(o, 2);
  std::vector<uint32_t> out;
  std::vector<Time> last(64, At(0ms));
  std::vector<bool> was_idle(64, false);
  Nanos worst{0};
  for (int tick = 0; tick < 5000; ++tick) {
    auto facts = Up(64);
    for (int k = 0; k < 8; ++k) facts[rng() % 64].carries_traffic = true;  // traffic moves around
    const Time now = ticker.Next();
    out.clear();
    t.Plan(now, facts, out);
    std::vector<bool> probed(64, false);
    for (uint32_t id : out) probed[id] = true;
    for (uint32_t id = 0; id < 64; ++id) {
      if (facts[id].carries_traffic) REQUIRE(probed[id]);
      if (probed[id]) {
        if (tick > 0) worst = std::max(worst, now - last[id]);
        last[id] = now;
      }
    }
  }
  REQUIRE(worst <= o.idle_interval);
}

TEST_CASE("probe tiers: a loss or a late ack while delivering promotes a path for promote_for, a dead one is not",
          "[fabric][tiers]") {
  FabricOptions o;
  o.promote_for = 2s;
  ProbeTiers t(o);
  auto facts = Up(4);
  std::vector<uint32_t> out;
  t.Plan(At(0ms), facts, out);  // first tick: every path once
  out.clear();
  t.Plan(At(14ms), facts, out);
  REQUIRE(t.fast() == 0);
  // Path 1 lost a probe (still up), path 2 saw a late ack, path 3 went down
  // and keeps missing.
  facts[1].misses = 1;
  facts[2].late_replies = 1;
  facts[3].state = PathState::kDown;
  facts[3].misses = 3;
  out.clear();
  t.Plan(At(28ms), facts, out);
  CHECK(t.tier(1) == Tier::kPromoted);
  CHECK(t.tier(2) == Tier::kPromoted);
  CHECK(t.tier(3) == Tier::kIdle);
  CHECK(std::count(out.begin(), out.end(), 1u) == 1);
  CHECK(std::count(out.begin(), out.end(), 2u) == 1);
  // Fast at every tick until promote_for after the last rise.
  for (Time now = At(42ms); now < At(28ms) + 2s; now += 14ms) {
    facts[3].misses += 1;  // a dead path's misses promote nothing
    out.clear();
    t.Plan(now, facts, out);
    REQUIRE(std::count(out.begin(), out.end(), 1u) == 1);
    REQUIRE(std::count(out.begin(), out.end(), 2u) == 1);
    REQUIRE(t.tier(3) == Tier::kIdle);
  }
  out.clear();
  t.Plan(At(28ms) + 2s, facts, out);
  CHECK(t.tier(1) == Tier::kIdle);
  CHECK(t.tier(2) == Tier::kIdle);
  // Another loss promotes again.
  facts[1].misses = 2;
  out.clear();
  t.Plan(At(3s), facts, out);
  CHECK(t.tier(1) == Tier::kPromoted);
}

TEST_CASE("probe tiers: renumbering keeps each path's history and probes new paths at once", "[fabric][tiers]") {
  FabricOptions o;
  ProbeTiers t(o);
  auto facts = Up(3);
  std::vector<uint32_t> out;
  t.Plan(At(0ms), facts, out);
  facts[2].misses = 1;
  out.clear();
  t.Plan(At(14ms), facts, out);
  REQUIRE(t.tier(2) == Tier::kPromoted);
  // A path inserted before it: old 2 is now 3, new 0.
  t.Renumber({-1, 0, 1, 2});
  facts.insert(facts.begin(), TierFacts{.state = PathState::kUp});
  out.clear();
  t.Plan(At(28ms), facts, out);
  CHECK(t.tier(3) == Tier::kPromoted);                 // its history moved with it
  CHECK(std::count(out.begin(), out.end(), 0u) == 1);  // never probed: now
  CHECK(std::count(out.begin(), out.end(), 3u) == 1);
}

TEST_CASE("options: idle_interval is 0 or at least two probe intervals, and its detection bound", "[fabric][tiers]") {
  FabricOptions o;
  CHECK(Validate(o).ok());
  CHECK(WorstCaseDetection(o) == 43800us);
  // Idle ticks (100 ms): an idle probe may be acked at the peer's idle tick.
  CHECK(IdleTicks(o));
  CHECK(IdleAckTimeout(o) == 113000us);          // 18.4 + (100 - 14) x 1.1
  CHECK(WorstCaseDetectionIdle(o) == 623000us);  // 500 + 113 + 2 x 5
  o.idle_tick = 0ms;                             // ticks every probe_interval
  CHECK_FALSE(IdleTicks(o));
  CHECK(IdleAckTimeout(o) == o.reply_timeout);
  CHECK(WorstCaseDetectionIdle(o) == 528400us);  // 500 + 18.4 + 2 x 5
  // idle_tick: 0 or between two probe intervals and half the idle interval.
  for (auto [tick, ok] : {std::pair{27ms, false}, {28ms, true}, {250ms, true}, {251ms, false}}) {
    o.idle_tick = tick;
    INFO(tick.count());
    CHECK(Validate(o).ok() == ok);
  }
  o.idle_tick = 100ms;
  o.idle_interval = 27ms;
  CHECK_FALSE(Validate(o).ok());
  o.idle_tick = 0ms;
  o.idle_interval = 28ms;
  CHECK(Validate(o).ok());
  o.idle_interval = 0ms;  // no tiers: the idle tick is not used
  o.idle_tick = 100ms;
  CHECK(Validate(o).ok());
  CHECK_FALSE(IdleTicks(o));
  o.idle_interval = 28ms;
  o.idle_tick = 0ms;
  o.idle_interval = 61s;
  CHECK_FALSE(Validate(o).ok());
}

// Through PathMonitor on the simulator: 16 peers x 8 rails, one peer active.
struct Lab {
  explicit Lab(FabricOptions o, std::function<bool(const PathKey&, Time)> delivers) : m(o, 11), sim(m, delivers) {
    for (int i = 0; i < 16; ++i) peers.push_back("p" + std::to_string(i));
    paths = EnumeratePaths(8, peers);
    m.SetActivePeers(std::set<std::string>{"p3"});
    sim.Tiered(true);
  }
  PathMonitor m;
  testing::FabricSim sim;
  std::vector<std::string> peers;
  std::vector<PathKey> paths;
};

TEST_CASE("tiered monitor: the active peer's pinned path is probed at every tick, the rest in the rotation",
          "[fabric][tiers]") {
  FabricOptions o;
  Lab lab(o, [](const PathKey&, Time) { return true; });
  lab.sim.Start(lab.paths);
  lab.sim.RunUntil(At(2s));
  REQUIRE(lab.m.tiers().fast() == 1);  // p3's home path
  const PathKey pinned = *lab.m.Pin("p3");
  REQUIRE(lab.m.PathTier(*lab.m.Find(pinned)) == Tier::kTraffic);
  const int before = lab.sim.probes_sent();
  lab.sim.RunUntil(At(12s));
  // 10 s: the fast path at ~71/s and 127 idle paths at least every 500 ms
  // (the rotation: ceil(127 x 15.4 / 500) = 4 a tick, ~286/s).
  const double per_s = (lab.sim.probes_sent() - before) / 10.0;
  INFO("probes/s " << per_s);
  CHECK(per_s > 71 + 127 * 2);
  CHECK(per_s < 71 + 4 * 76);  // against 128 x 71 = 9,143 untiered
  // A peer becoming active: its pinned path is fast at the next tick.
  lab.m.SetActivePeers(std::set<std::string>{"p3", "p7"});
  lab.sim.RunUntil(At(12s) + 20ms);
  CHECK(lab.m.tiers().fast() == 2);
  // Every peer active (the default): one pinned path each.
  lab.m.SetActivePeers(std::nullopt);
  lab.sim.RunUntil(At(12s) + 40ms);
  CHECK(lab.m.tiers().fast() == 16);
}

TEST_CASE("tiered monitor: every path of a rail under a latency SLA is fast, the other rails stay tiered",
          "[fabric][tiers]") {
  FabricOptions o;
  Lab lab(o, [](const PathKey&, Time) { return true; });
  lab.m.SetAlwaysFastRails(false, {1});
  lab.sim.Start(lab.paths);
  lab.sim.RunUntil(At(2s));
  int rail1_fast = 0, other_fast = 0;
  for (const PathKey& k : lab.paths) {
    const bool fast = IsFast(lab.m.PathTier(*lab.m.Find(k)));
    (k.rail == 1 ? rail1_fast : other_fast) += fast ? 1 : 0;
  }
  CHECK(rail1_fast == 16);  // every peer's rail-1 path, active or not
  CHECK(other_fast <= 1);   // p3's pinned path, unless it is on rail 1
  CHECK(lab.m.tiers().fast() == static_cast<size_t>(rail1_fast + other_fast));
  lab.m.SetAlwaysFastRails(true, {});
  lab.sim.RunUntil(At(2s) + 20ms);
  CHECK(lab.m.tiers().fast() == 128);
  lab.m.SetAlwaysFastRails(false, {});
  lab.sim.RunUntil(At(2s) + 40ms);
  CHECK(lab.m.tiers().fast() == 1);
}

TEST_CASE(
    "tiered monitor: detection within WorstCaseDetection on an active path, WorstCaseDetectionIdle on an "
    "idle one, and the idle path is promoted",
    "[fabric][tiers]") {
  FabricOptions o;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    // Fault times spread over the rotation.
    const Time fault = At(3s) + Nanos(static_cast<int64_t>(seed) * 37'123'457);
    PathKey active_path, idle_path{.rail = 5, .peer = "p9", .index = 0};
    bool know_active = false;
    Lab lab(o, [&](const PathKey& p, Time t) {
      if (t < fault) return true;
      return !((know_active && p == active_path) || p == idle_path);
    });
    lab.sim.Start(lab.paths);
    lab.sim.RunUntil(At(2s));
    active_path = *lab.m.Pin("p3");
    know_active = true;
    if (lab.m.Pin("p9") == idle_path) idle_path.rail = 6;  // not p9's pinned path either
    lab.sim.RunUntil(fault - 1ms);
    REQUIRE(lab.m.PathTier(*lab.m.Find(idle_path)) == Tier::kIdle);
    REQUIRE(lab.m.PathTier(*lab.m.Find(active_path)) == Tier::kTraffic);
    lab.sim.RunUntil(fault + 1s);
    auto active_down = lab.sim.FirstTransition(active_path, PathState::kDown, fault);
    auto idle_down = lab.sim.FirstTransition(idle_path, PathState::kDown, fault);
    INFO("seed " << seed);
    REQUIRE(active_down);
    REQUIRE(idle_down);
    CHECK(*active_down - fault <= WorstCaseDetection(o));
    CHECK(*idle_down - fault <= WorstCaseDetectionIdle(o));
    // After its first miss the idle path asked for urgent confirmation at
    // once: down within the confirmations, not a rotation later.
    auto idle_suspect = lab.sim.FirstTransition(idle_path, PathState::kSuspect, fault);
    REQUIRE(idle_suspect);
    CHECK(*idle_down - *idle_suspect <= (o.miss_threshold - 1) * o.urgent_timeout);
  }
}

TEST_CASE("tiered monitor: a lossy idle path is promoted to fast probing at the next tick", "[fabric][tiers]") {
  FabricOptions o;
  PathKey lossy{.rail = 2, .peer = "p1", .index = 0};
  int sent_lossy = 0;
  Lab lab(o, [&](const PathKey& p, Time t) {
    // One probe of `lossy` in the 4th second is lost, the rest delivered.
    if (p == lossy && t >= At(4s) && sent_lossy++ == 0) return false;
    return true;
  });
  lab.sim.Start(lab.paths);
  lab.sim.RunUntil(At(3s));
  if (lab.m.Pin("p1") == lossy) lossy.rail = 3;  // not p1's pinned path
  lab.sim.RunUntil(At(4s));
  const PathId id = *lab.m.Find(lossy);
  REQUIRE(lab.m.PathTier(id) == Tier::kIdle);
  lab.sim.RunUntil(At(5s));
  REQUIRE(sent_lossy >= 1);
  auto suspect = lab.sim.FirstTransition(lossy, PathState::kSuspect, At(4s));
  REQUIRE(suspect);
  CHECK(lab.m.PathTier(id) == Tier::kPromoted);
  CHECK(lab.m.State(lossy) == PathState::kUp);  // one loss: confirmed up again
  // promote_for (10 s) after the loss, idle again.
  lab.sim.RunUntil(*suspect + o.promote_for + 100ms);
  CHECK(lab.m.PathTier(id) == Tier::kIdle);
}


// Idle ticks (options.h, idle_tick): a node with no fast path wakes every
// ~100 ms, not every 14 ms. The peer is modelled as on idle ticks too: it
// acks a slow probe at its next idle tick (up to 110 ms later), a fast one
// at its next fast tick once it has read a fast probe in the last
// kFastTickHold, else at its next idle tick.
struct IdlePeer {
  explicit IdlePeer(uint64_t seed) : rng(seed) {}
  Nanos operator()(const PathKey&, Time sent, bool slow) {
    auto upto = [&](Nanos d) { return Nanos(std::uniform_int_distribution<int64_t>(0, d.count())(rng)); };
    // A fast probe read while on fast ticks is acked within a fast gap; one
    // read on idle ticks at the next idle tick. Either holds fast ticks.
    const Nanos hold = !slow && sent < fast_until ? upto(15400us) : upto(110ms);
    if (!slow) fast_until = std::max(fast_until, sent + hold + kFastTickHold);
    return hold;
  }
  std::mt19937_64 rng;
  Time fast_until{};
};

TEST_CASE("idle ticks: the rotation rides ticks ~100 ms apart and still probes each idle path within idle_interval",
          "[fabric][tiers]") {
  FabricOptions o;
  ProbeTiers t(o);
  ProbeSchedule schedule(o.probe_interval, o.jitter, 3, o.idle_tick);
  std::vector<uint32_t> out;
  std::vector<Time> last(128, At(0ms));
  Nanos longest{0};
  size_t probes = 0;
  Time now = At(0ms);
  for (int tick = 0; tick < 600; ++tick) {  // ~60 s
    out.clear();
    t.Plan(now, Up(128), out, false);
    REQUIRE(t.next_slow());  // nothing fast, nothing held: the next tick is an idle one
    for (uint32_t id : out) {
      if (tick > 0) longest = std::max(longest, now - last[id]);
      last[id] = now;
    }
    if (tick > 0) probes += out.size();
    now += schedule.NextIdleGap();
  }
  const double per_s = static_cast<double>(probes) / std::chrono::duration<double>(now - At(0ms)).count();
  INFO("longest gap " << longest.count() << " ns, idle probes/s " << per_s);
  CHECK(longest <= o.idle_interval);
  CHECK(per_s >= 128 / 0.5);
  CHECK(per_s <= 128 / 0.3);
  // A fast path, or a hold: the next tick is a fast one.
  auto facts = Up(128);
  facts[7].carries_traffic = true;
  out.clear();
  t.Plan(now, facts, out, false);
  CHECK_FALSE(t.next_slow());
  out.clear();
  t.Plan(now + 15ms, Up(128), out, true);
  CHECK_FALSE(t.next_slow());
}

TEST_CASE("idle ticks: the schedule's idle gaps stay within the jitter bounds, and Hurry pulls a far tick in",
          "[fabric][tiers]") {
  ProbeSchedule s(14ms, 0.1, 5, 100ms);
  Time now = At(0ms);
  s.Start(now);
  now = *s.NextTick();
  for (int i = 0; i < 1000; ++i) {
    REQUIRE(s.Due(now));
    s.Advance(now, true);
    REQUIRE(s.slow());
    const Nanos gap = *s.NextTick() - now;
    REQUIRE(gap >= 90ms);
    REQUIRE(gap <= 110ms);
    now = *s.NextTick();
  }
  s.Advance(now, true);
  s.Hurry(now + 1ms);
  CHECK_FALSE(s.slow());
  CHECK(*s.NextTick() <= now + 1ms + 15400us);
  // No idle interval configured: a slow advance is a fast gap.
  ProbeSchedule fast(14ms, 0.1, 5);
  fast.Start(At(0ms));
  const Time t = *fast.NextTick();
  fast.Advance(t, true);
  CHECK_FALSE(fast.slow());
  CHECK(*fast.NextTick() - t <= 15400us);
}

TEST_CASE("idle ticks: with no fast path the prober wakes ~10 times a second, every idle path is still probed "
          "within idle_interval, and acks held to the peer's idle tick are no misses",
          "[fabric][tiers]") {
  for (Nanos tick : {100ms, 0ms}) {
    FabricOptions o;
    o.idle_tick = tick;
    Lab lab(o, [](const PathKey&, Time) { return true; });
    lab.m.SetActivePeers(std::set<std::string>{});  // no traffic: every path idle once it has a verdict
    IdlePeer peer(9);
    if (tick > 0ms) lab.sim.PeerHold(std::ref(peer));
    lab.sim.Start(lab.paths);
    lab.sim.RunUntil(At(2s));
    REQUIRE(lab.m.tiers().fast() == 0);
    const int wakeups = lab.sim.wakeups(), sent = lab.sim.probes_sent(), slow = lab.sim.slow_sent();
    const size_t transitions = lab.sim.transitions().size();
    lab.sim.RunUntil(At(12s));
    const double wake_per_s = (lab.sim.wakeups() - wakeups) / 10.0;
    const double probes_per_s = (lab.sim.probes_sent() - sent) / 10.0;
    INFO("idle tick " << tick.count() << " ns: wake-ups/s " << wake_per_s << ", probes/s " << probes_per_s);
    if (tick > 0ms) {
      CHECK(wake_per_s <= 12);                                   // ~10 (90-110 ms gaps), against ~71
      CHECK(lab.sim.slow_sent() - slow == lab.sim.probes_sent() - sent);  // every one an idle probe
      CHECK(probes_per_s < 128 / 0.3);                           // the rotation aims at ~375 ms
    } else {
      CHECK(wake_per_s >= 60);
      CHECK(lab.sim.slow_sent() == 0);
    }
    CHECK(probes_per_s > 128 / 0.5);  // every path at least every 500 ms (the gaps: the next test)
    // No miss, no state change: the acks held to the peer's idle tick came in time.
    CHECK(lab.sim.transitions().size() == transitions);
    for (const PathView& v : lab.m.Paths(lab.sim.now())) {
      REQUIRE(v.state == PathState::kUp);
      REQUIRE(v.stats.probes_sent > 0);
    }
  }
}

TEST_CASE("idle ticks: delays leave out the time the peer held its acks to its idle tick", "[fabric][tiers]") {
  // Every path idle, the peer acking each probe at its idle tick (up to
  // 110 ms later) and saying so in the ack: each path's round trip is the
  // network's (2 x 50 us) and its one-way delay 50 us, whatever the hold.
  FabricOptions o;
  Lab lab(o, [](const PathKey&, Time) { return true; });
  lab.m.SetActivePeers(std::set<std::string>{});
  IdlePeer peer(5);
  lab.sim.PeerHold(std::ref(peer));
  lab.sim.Acks(true);
  lab.sim.Start(lab.paths);
  lab.sim.RunUntil(At(12s));
  REQUIRE(lab.m.OnIdleTicks());
  for (const PathView& v : lab.m.Paths(lab.sim.now())) {
    INFO(v.path.rail << "/" << v.path.peer);
    REQUIRE(v.state == PathState::kUp);
    CHECK(v.stats.rtt_samples >= 15);  // every ~500 ms over the 10 s window
    CHECK(v.stats.rtt_samples == v.stats.owd_samples);
    CHECK(v.stats.rtt_p50 == 100us);
    CHECK(v.stats.rtt_p99 == 100us);
    CHECK(v.stats.owd_p99 == 50us);
  }
}

TEST_CASE("idle ticks: a path turning fast is acked without a miss by a peer on idle ticks, then detection is "
          "WorstCaseDetection on it and WorstCaseDetectionIdle on an idle path",
          "[fabric][tiers]") {
  FabricOptions o;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    const Time active_at = At(3s) + Nanos(static_cast<int64_t>(seed) * 7'654'321);
    const Time fault = At(5s) + Nanos(static_cast<int64_t>(seed) * 41'234'567);
    PathKey active_path, idle_path{.rail = 5, .peer = "p9", .index = 0};
    bool know_active = false;
    Lab lab(o, [&](const PathKey& p, Time t) {
      if (t < fault) return true;
      return !((know_active && p == active_path) || p == idle_path);
    });
    lab.m.SetActivePeers(std::set<std::string>{});
    IdlePeer peer(seed);
    lab.sim.PeerHold(std::ref(peer));
    lab.sim.Start(lab.paths);
    lab.sim.RunUntil(active_at);
    INFO("seed " << seed);
    REQUIRE(lab.m.tiers().fast() == 0);
    REQUIRE(lab.m.OnIdleTicks());
    const size_t before = lab.sim.transitions().size();
    // Traffic to p3 starts: its pinned path is fast from the next tick; the
    // peer reads the first fast probe only at its idle tick.
    active_path = *lab.m.Pin("p3");
    know_active = true;
    if (lab.m.Pin("p9") == idle_path) idle_path.rail = 6;
    lab.m.SetActivePeers(std::set<std::string>{"p3"});
    const int wakeups = lab.sim.wakeups();
    lab.sim.RunUntil(active_at + 1s);
    CHECK(lab.m.PathTier(*lab.m.Find(active_path)) == Tier::kTraffic);
    CHECK_FALSE(lab.m.OnIdleTicks());
    CHECK(lab.sim.wakeups() - wakeups >= 60);       // fast ticks again
    CHECK(lab.sim.transitions().size() == before);  // no miss on the path turning fast
    lab.sim.RunUntil(fault + 1s);
    auto active_down = lab.sim.FirstTransition(active_path, PathState::kDown, fault);
    auto idle_down = lab.sim.FirstTransition(idle_path, PathState::kDown, fault);
    REQUIRE(active_down);
    REQUIRE(idle_down);
    CHECK(*active_down - fault <= WorstCaseDetection(o));
    CHECK(*idle_down - fault <= WorstCaseDetectionIdle(o));
  }
}

TEST_CASE("idle ticks: a peer's fast probe holds fast ticks for kFastTickHold, then the prober goes back to idle ticks",
          "[fabric][tiers]") {
  FabricOptions o;
  Lab lab(o, [](const PathKey&, Time) { return true; });
  lab.m.SetActivePeers(std::set<std::string>{});
  lab.sim.Start(lab.paths);
  lab.sim.RunUntil(At(3s));
  REQUIRE(lab.m.OnIdleTicks());
  const Time read = lab.sim.now();
  lab.m.HoldFastTicks(read, read + kFastTickHold);
  CHECK(*lab.m.NextWakeup() <= read + 15400us);  // pulled in
  int wakeups = lab.sim.wakeups();
  lab.sim.RunUntil(read + kFastTickHold - 20ms);
  CHECK_FALSE(lab.m.OnIdleTicks());
  CHECK(lab.sim.wakeups() - wakeups >= 2 * 60);  // ~71/s for 2 s
  lab.sim.RunUntil(read + kFastTickHold + 200ms);
  CHECK(lab.m.OnIdleTicks());
  wakeups = lab.sim.wakeups();
  lab.sim.RunUntil(read + kFastTickHold + 1200ms);
  CHECK(lab.sim.wakeups() - wakeups <= 12);
}
TEST_CASE(
    "idle ticks: peers starting after us cost no miss once their paths are up: the idle probe rate from the "
    "first seconds on",
    "[fabric][tiers]") {
  // The agents of a fabric start one after the other. Our first probes to a
  // peer not started yet are lost; with idle ticks they are judged for up
  // to IdleAckTimeout (113 ms: the first of a fast run), so many of them
  // time out after the peer's first ack brought the path up, and the late
  // acks of those missed before come in after it too. Judged as losses of
  // the path that now delivers (or a miss before it came up seen by the
  // first plan after), each promoted every path of that peer to fast
  // probing for promote_for (10 s), with a suspect for each loss (measured
  // on netlab: 6 paths sent 39 probes/s against 17 for the first ~10 s,
  // which fabric-probe-cost's 6- and 32-path rows measured on a quiet
  // machine, where the peers start within our first 100 ms).
  FabricOptions o;
  for (const Nanos start : {30ms, 60ms, 100ms}) {
    for (const bool acks : {false, true}) {
      INFO("peers start " << start.count() << " ns after us, " << (acks ? "acks" : "replies"));
      Lab lab(o, [&](const PathKey&, Time t) { return t >= At(start); });
      lab.m.SetActivePeers(std::set<std::string>{});  // no traffic: every path idle once up
      IdlePeer peer(3);
      lab.sim.PeerHold(std::ref(peer));
      lab.sim.Acks(acks);
      lab.sim.Start(lab.paths);
      lab.sim.RunUntil(At(3s));
      for (const PathView& v : lab.m.Paths(lab.sim.now())) REQUIRE(v.state == PathState::kUp);
      int suspects = 0;
      for (const Transition& t : lab.sim.transitions()) suspects += t.to == PathState::kSuspect ? 1 : 0;
      CHECK(suspects == 0);  // up (or down until the peer started, then back), never a loss once up
      for (PathId id = 0; id < lab.m.size(); ++id) {
        if (IsFast(lab.m.PathTier(id))) {
          const PathView v = lab.m.Paths(lab.sim.now())[id];
          UNSCOPED_INFO("fast " << v.path.peer << "/" << v.path.rail << " " << ToString(lab.m.PathTier(id)) << " "
                                << ToString(v.state) << " level " << v.hold_down_level);
        }
      }
      CHECK(lab.m.tiers().fast() == 0);
      CHECK(lab.m.OnIdleTicks());
      const int sent = lab.sim.probes_sent();
      lab.sim.RunUntil(At(13s));
      const double probes_per_s = (lab.sim.probes_sent() - sent) / 10.0;
      INFO("probes/s " << probes_per_s);
      CHECK(probes_per_s < 128 / 0.3);  // the idle rotation (~375 ms a path), not ~71 a promoted path
      CHECK(probes_per_s > 128 / 0.5);
    }
  }
}

}  // namespace
}  // namespace lockstep::fabric
