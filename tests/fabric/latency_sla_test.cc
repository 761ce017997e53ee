// LatencySla: every rule of the latency SLA decision (latency_sla.h).
#include "lockstep/fabric/latency_sla.h"

#include <catch2/catch.hpp>

namespace lockstep::fabric {
namespace {

using namespace std::chrono_literals;

const PathKey kA{0, "node-a", 0};
const PathKey kB{1, "node-a", 0};
const PathKey kC{0, "node-b", 0};

Time At(Nanos t) { return Time{} + t; }

LatencySlaOptions Sla100us() {
  LatencySlaOptions o;
  o.all_rails = 100us;
  o.min_samples = 50;
  return o;
}

LatencySample Sample(const PathKey& p, Nanos p99, int samples = 100) { return {p, p99, samples}; }

TEST_CASE("latency SLA: the rail's override, else the policy-wide SLA, else none", "[fabric]") {
  LatencySlaOptions o;
  REQUIRE_FALSE(SlaFor(o, 0));
  REQUIRE_FALSE(LatencySla(o).enabled());
  o.per_rail[1] = 20us;
  REQUIRE_FALSE(SlaFor(o, 0));
  REQUIRE(SlaFor(o, 1) == 20us);
  o.all_rails = 100us;
  REQUIRE(SlaFor(o, 0) == 100us);
  REQUIRE(SlaFor(o, 1) == 20us);
  REQUIRE(LatencySla(o).enabled());
}

TEST_CASE("latency SLA: without one nothing is judged and the summary says NoSLA", "[fabric]") {
  LatencySla sla({});
  LatencyDecisions d = sla.Judge(At(1s), true, {Sample(kA, 5ms)});
  REQUIRE(d.paths.size() == 1);
  REQUIRE(d.paths[0].verdict == LatencyVerdict::kNoSla);
  REQUIRE_FALSE(d.paths[0].breach());
  REQUIRE(d.breaches.empty());
  REQUIRE(d.summary.verdict == LatencyVerdict::kNoSla);
  REQUIRE(d.summary.with_sla == 0);
}

TEST_CASE("latency SLA: a path above its SLA breaches once it has minSamples delays", "[fabric]") {
  LatencySla sla(Sla100us());
  LatencyDecisions d = sla.Judge(At(1s), true, {Sample(kA, 150us, 49)});
  REQUIRE(d.paths[0].verdict == LatencyVerdict::kNotEnoughSamples);
  REQUIRE(d.breaches.empty());
  REQUIRE(d.summary.verdict == LatencyVerdict::kNotEnoughSamples);
  d = sla.Judge(At(2s), true, {LatencySample{kA, std::nullopt, 0}});
  REQUIRE(d.paths[0].verdict == LatencyVerdict::kNotEnoughSamples);

  d = sla.Judge(At(3s), true, {Sample(kA, 150us, 50)});
  REQUIRE(d.paths[0].verdict == LatencyVerdict::kBreach);
  REQUIRE(d.breaches.size() == 1);
  REQUIRE(d.breaches[0].path == kA);
  REQUIRE(d.breaches[0].owd_p99 == 150us);
  REQUIRE(d.breaches[0].sla == 100us);
  REQUIRE(d.breaches[0].notify);
  REQUIRE(d.summary.verdict == LatencyVerdict::kBreach);
  REQUIRE(d.summary.breaches == 1);
  // Still above: in breach, but not a new one.
  d = sla.Judge(At(4s), true, {Sample(kA, 160us)});
  REQUIRE(d.paths[0].breach());
  REQUIRE(d.breaches.empty());
}

TEST_CASE("latency SLA: at the SLA is within it", "[fabric]") {
  LatencySla sla(Sla100us());
  LatencyDecisions d = sla.Judge(At(1s), true, {Sample(kA, 100us)});
  REQUIRE(d.paths[0].verdict == LatencyVerdict::kWithin);
  REQUIRE(d.breaches.empty());
  REQUIRE(d.summary.verdict == LatencyVerdict::kWithin);
  REQUIRE(d.summary.judged == 1);
}

TEST_CASE("latency SLA: a breach clears only below 90% of the SLA (hysteresis)", "[fabric]") {
  LatencySla sla(Sla100us());
  REQUIRE(sla.Judge(At(1s), true, {Sample(kA, 120us)}).paths[0].breach());
  REQUIRE(sla.Judge(At(2s), true, {Sample(kA, 100us)}).paths[0].breach());  // back at the SLA: still in breach
  REQUIRE(sla.Judge(At(3s), true, {Sample(kA, 90us)}).paths[0].breach());   // 90% is not below 90%
  LatencyDecisions d = sla.Judge(At(4s), true, {Sample(kA, 89us)});
  REQUIRE(d.paths[0].verdict == LatencyVerdict::kWithin);
  REQUIRE(d.summary.verdict == LatencyVerdict::kWithin);
  // Between 90% and 100% a path within stays within.
  REQUIRE(sla.Judge(At(5s), true, {Sample(kA, 95us)}).paths[0].verdict == LatencyVerdict::kWithin);
}

TEST_CASE("latency SLA: never judged while the node's clock is not LOCKED", "[fabric]") {
  LatencySla sla(Sla100us());
  LatencyDecisions d = sla.Judge(At(1s), false, {Sample(kA, 500us)});
  REQUIRE(d.paths[0].verdict == LatencyVerdict::kClockNotLocked);
  REQUIRE(d.breaches.empty());
  REQUIRE(d.summary.verdict == LatencyVerdict::kClockNotLocked);
  // In breach, then the lock is lost: not judged, the flag reads 0.
  REQUIRE(sla.Judge(At(2s), true, {Sample(kA, 500us)}).breaches.size() == 1);
  d = sla.Judge(At(3s), false, {Sample(kA, 500us)});
  REQUIRE_FALSE(d.paths[0].breach());
  REQUIRE(d.summary.breaches == 0);
  REQUIRE(d.summary.verdict == LatencyVerdict::kClockNotLocked);
}

TEST_CASE("latency SLA: at most one Event per path per 10 minutes", "[fabric]") {
  LatencySla sla(Sla100us());
  Nanos t = 1s;
  auto breach_then_clear = [&] {
    LatencyDecisions d = sla.Judge(At(t += 1s), true, {Sample(kA, 200us), Sample(kC, 50us)});
    REQUIRE(d.breaches.size() == 1);
    const bool notify = d.breaches[0].notify;
    REQUIRE(sla.Judge(At(t += 1s), true, {Sample(kA, 50us), Sample(kC, 50us)}).paths[0].verdict ==
            LatencyVerdict::kWithin);
    return notify;
  };
  REQUIRE(breach_then_clear());        // the first breach: an Event
  REQUIRE_FALSE(breach_then_clear());  // flapping around the SLA: breaches, no Events
  REQUIRE_FALSE(breach_then_clear());
  t = 1s + 10min;  // 10 minutes after the first Event
  REQUIRE(breach_then_clear());
  // Another path has its own budget.
  LatencyDecisions d = sla.Judge(At(t += 1s), true, {Sample(kA, 50us), Sample(kC, 200us)});
  REQUIRE(d.breaches.size() == 1);
  REQUIRE(d.breaches[0].path == kC);
  REQUIRE(d.breaches[0].notify);
}

TEST_CASE("latency SLA: the ECMP paths of one rail to one peer share one Event", "[fabric]") {
  LatencySla sla(Sla100us());
  const PathKey a1{0, "node-a", 1}, a2{0, "node-a", 2};
  // Three paths of (node-a, rail 0) breach at once: three breaches, one Event.
  LatencyDecisions d = sla.Judge(At(1s), true, {Sample(kA, 200us), Sample(a1, 300us), Sample(a2, 250us)});
  REQUIRE(d.breaches.size() == 3);
  CHECK(std::count_if(d.breaches.begin(), d.breaches.end(), [](const LatencyBreach& b) { return b.notify; }) == 1);
  // Another rail of the same peer has its own Event.
  d = sla.Judge(At(2s), true, {Sample(kA, 200us), Sample(a1, 300us), Sample(a2, 250us), Sample(kB, 200us)});
  REQUIRE(d.breaches.size() == 1);
  CHECK(d.breaches[0].path == kB);
  CHECK(d.breaches[0].notify);
  // The peer gone, then back: its rail's Event budget starts again.
  sla.Judge(At(3s), true, {Sample(kC, 50us)});
  d = sla.Judge(At(4s), true, {Sample(a1, 300us)});
  REQUIRE(d.breaches.size() == 1);
  CHECK(d.breaches[0].notify);
}

TEST_CASE("latency SLA: a path that is not judged loses its breach and starts again within", "[fabric]") {
  LatencySla sla(Sla100us());
  REQUIRE(sla.Judge(At(1s), true, {Sample(kA, 200us)}).breaches.size() == 1);
  LatencyDecisions d = sla.Judge(At(2s), true, {Sample(kA, 200us, 10)});  // the window thinned out
  REQUIRE(d.paths[0].verdict == LatencyVerdict::kNotEnoughSamples);
  REQUIRE(d.summary.verdict == LatencyVerdict::kNotEnoughSamples);
  d = sla.Judge(At(3s), true, {Sample(kA, 95us)});  // judged again: within (no breach to clear)
  REQUIRE(d.paths[0].verdict == LatencyVerdict::kWithin);
  d = sla.Judge(At(4s), true, {Sample(kA, 200us)});
  REQUIRE(d.breaches.size() == 1);
  REQUIRE_FALSE(d.breaches[0].notify);  // within 10 minutes of the first Event
}

TEST_CASE("latency SLA: per-rail SLAs, and the summary names the path furthest above its SLA", "[fabric]") {
  LatencySlaOptions o = Sla100us();
  o.per_rail[1] = 10us;
  LatencySla sla(o);
  // kA: 150 us against 100 (1.5x); kB (rail 1): 20 us against 10 (2x); kC within.
  LatencyDecisions d = sla.Judge(At(1s), true, {Sample(kA, 150us), Sample(kB, 20us), Sample(kC, 80us)});
  REQUIRE(d.paths[1].sla == 10us);
  REQUIRE(d.breaches.size() == 2);
  REQUIRE(d.summary.verdict == LatencyVerdict::kBreach);
  REQUIRE(d.summary.with_sla == 3);
  REQUIRE(d.summary.judged == 3);
  REQUIRE(d.summary.breaches == 2);
  REQUIRE(d.summary.worst);
  REQUIRE(d.summary.worst->path == kB);
  REQUIRE(d.summary.worst->owd_p99 == 20us);
}

TEST_CASE("latency SLA: only the per-rail SLA: other rails are not judged", "[fabric]") {
  LatencySlaOptions o;
  o.per_rail[1] = 10us;
  LatencySla sla(o);
  LatencyDecisions d = sla.Judge(At(1s), true, {Sample(kA, 150us), Sample(kB, 5us)});
  REQUIRE(d.paths[0].verdict == LatencyVerdict::kNoSla);
  REQUIRE(d.paths[1].verdict == LatencyVerdict::kWithin);
  REQUIRE(d.summary.with_sla == 1);
  REQUIRE(d.summary.verdict == LatencyVerdict::kWithin);
  // No paths yet (no peers): nothing to judge.
  REQUIRE(sla.Judge(At(2s), true, {}).summary.verdict == LatencyVerdict::kNotEnoughSamples);
}

TEST_CASE("latency SLA: paths that leave are forgotten, Event times included", "[fabric]") {
  LatencySla sla(Sla100us());
  REQUIRE(sla.Judge(At(1s), true, {Sample(kA, 200us)}).breaches[0].notify);
  REQUIRE(sla.Judge(At(2s), true, {Sample(kC, 50us)}).paths.size() == 1);  // kA's peer left
  LatencyDecisions d = sla.Judge(At(3s), true, {Sample(kA, 200us)});
  REQUIRE(d.breaches.size() == 1);
  REQUIRE(d.breaches[0].notify);
}

}  // namespace
}  // namespace lockstep::fabric
