#include <catch2/catch.hpp>

#include <cmath>

#include "lockstep/agent/net/virtual_clock.h"
#include "sim_node_clock.h"

namespace lockstep::agent {
namespace {

using test::ManualNodeClock;

TEST_CASE("VirtualClock applies offset and drift exactly", "[daemonset][vclock]") {
  ManualNodeClock base;
  const int64_t b0 = base.NowNs();
  VirtualClock v(base, {.offset_ns = 5'000'000, .drift_ppb = 20'000, .wander_ppb = 0, .seed = 1});
  REQUIRE(v.NowNs() == b0 + 5'000'000);
  base.Set(b0 + 1'000'000'000);  // 1 s later: +20 us of drift
  REQUIRE(v.NowNs() == b0 + 1'000'000'000 + 5'000'000 + 20'000);
  REQUIRE(v.TrueOffsetNs(b0 + 1'000'000'000) == 5'020'000);
  REQUIRE(v.TrueDriftPpb(b0) == 20'000);
  // Kernel stamps go through the same transform.
  REQUIRE(v.FromKernelRealtime(b0 + 500'000'000) == b0 + 500'000'000 + 5'000'000 + 10'000);
}

TEST_CASE("VirtualClock wander is a seeded, bounded random walk", "[daemonset][vclock]") {
  ManualNodeClock base;
  const int64_t b0 = base.NowNs();
  VirtualClockParams p{.offset_ns = 0, .drift_ppb = 49'000, .wander_ppb = 500, .seed = 7};
  VirtualClock a(base, p), b(base, p);
  VirtualClock c(base, {.offset_ns = 0, .drift_ppb = 49'000, .wander_ppb = 500, .seed = 8});
  bool differs = false;
  int64_t prev = a.Transform(b0);
  for (int64_t t = 250'000'000; t <= 600'000'000'000; t += 250'000'000) {  // 10 minutes
    const int64_t x = b0 + t;
    REQUIRE(a.Transform(x) == b.Transform(x));  // same seed, same walk
    differs |= a.Transform(x) != c.Transform(x);
    REQUIRE(std::fabs(a.TrueDriftPpb(x)) <= VirtualClock::kMaxDriftPpb + 1e-6);
    REQUIRE(a.Transform(x) > prev);  // still a clock: monotonic
    prev = a.Transform(x);
  }
  REQUIRE(differs);
  // Queries in the past are answered from the kept history, consistently.
  REQUIRE(a.Transform(b0 + 1'000'000'000) == b.Transform(b0 + 1'000'000'000));
}

TEST_CASE("virtual clock specs parse and reject out-of-range values", "[daemonset][vclock]") {
  auto p = ParseVirtualClockSpec("offset_ns=-100000000,drift_ppb=50000,wander=2.5,seed=9");
  REQUIRE(p.ok());
  REQUIRE(*p == VirtualClockParams{-100'000'000, 50'000, 2.5, 9});
  REQUIRE(ParseVirtualClockSpec("")->offset_ns == 0);
  REQUIRE(ParseVirtualClockSpec("offset_ns=100000001").error().message.find("between -100000000 and 100000000") !=
          std::string::npos);
  REQUIRE(ParseVirtualClockSpec("drift_ppb=60000").error().message.find("between -50000 and 50000") !=
          std::string::npos);
  REQUIRE_FALSE(ParseVirtualClockSpec("wander=-1").ok());
  REQUIRE(ParseVirtualClockSpec("skew=1").error().message.find("unknown key \"skew\"") != std::string::npos);
  REQUIRE_FALSE(ParseVirtualClockSpec("offset_ns").ok());
}

}  // namespace
}  // namespace lockstep::agent
