#include <catch2/catch.hpp>

#include "lockstep/agent/realtime_mapper.h"

namespace lockstep::agent {
namespace {

TEST_CASE("RealtimeMapper interpolates through a slewing realtime clock", "[daemonset][mapper]") {
  // REALTIME runs 500 ppm fast against MONOTONIC_RAW (a maximal NTP slew).
  RealtimeMapper m;
  const int64_t rt0 = 1'700'000'000'000'000'000, raw0 = 5'000'000'000;
  auto rt_at = [&](int64_t raw) { return rt0 + (raw - raw0) + (raw - raw0) / 2000; };
  for (int64_t raw = raw0; raw <= raw0 + 200'000'000; raw += 1'000'000) m.AddSample(rt_at(raw), raw);
  // Between samples: exact to rounding.
  const int64_t raw = raw0 + 150'500'000;
  REQUIRE(std::llabs(m.ToRaw(rt_at(raw)) - raw) <= 1);
  // Just past the newest sample: extrapolated with the recent rate.
  const int64_t later = raw0 + 200'300'000;
  REQUIRE(std::llabs(m.ToRaw(rt_at(later)) - later) <= 1);
  // Ignoring the slew would have been off by 75 us here.
  REQUIRE(std::llabs((rt_at(raw) - rt0 + raw0) - raw) > 70'000);
}

TEST_CASE("RealtimeMapper resets when realtime is stepped", "[daemonset][mapper]") {
  RealtimeMapper m;
  m.AddSample(1'000'000'000'000, 10'000'000);
  m.AddSample(1'000'001'000'000, 11'000'000);
  m.AddSample(900'000'000'000, 12'000'000);  // stepped back 100 s
  REQUIRE(m.ToRaw(900'000'500'000) == 12'500'000);
}

}  // namespace
}  // namespace lockstep::agent
