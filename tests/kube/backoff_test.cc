#include <catch2/catch.hpp>

#include "lockstep/kube/backoff.h"

namespace lockstep::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST_CASE("backoff delays grow exponentially and are capped", "[kube][backoff]") {
  BackoffPolicy p{milliseconds(100), seconds(1), 2.0, 0.5};
  CHECK(BackoffDelay(p, 0, 0.0) == milliseconds(100));
  CHECK(BackoffDelay(p, 1, 0.0) == milliseconds(200));
  CHECK(BackoffDelay(p, 3, 0.0) == milliseconds(800));
  CHECK(BackoffDelay(p, 4, 0.0) == seconds(1));
  CHECK(BackoffDelay(p, 400, 0.0) == seconds(1));
  // Jitter adds up to 50% on top.
  CHECK(BackoffDelay(p, 0, 0.5) == milliseconds(125));
  CHECK(BackoffDelay(p, 10, 0.999) < milliseconds(1500));
}

TEST_CASE("seeded backoff is deterministic and resets", "[kube][backoff]") {
  BackoffPolicy p{milliseconds(10), seconds(10), 2.0, 0.2};
  Backoff a(p, 7), b(p, 7);
  for (int i = 0; i < 5; ++i) {
    Nanos da = a.Next();
    CHECK(da == b.Next());
    Nanos base = BackoffDelay(p, i, 0.0);
    CHECK(da >= base);
    CHECK(da < base + base / 5 + Nanos(1));
  }
  CHECK(a.attempts() == 5);
  a.Reset();
  CHECK(a.Next() < milliseconds(13));
}

}  // namespace
}  // namespace lockstep::kube
