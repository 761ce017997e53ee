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

#include "fake_kube_api.h"
#include "lockstep/kube/informer.h"

namespace lockstep::kube {
namespace {

std::vector<Nanos> Delays(uint64_t seed) {
  Backoff b({.initial = std::chrono::milliseconds(800), .max = std::chrono::seconds(30), .jitter = 1.0}, seed);
  std::vector<Nanos> out;
  for (int i = 0; i < 8; ++i) out.push_back(b.Next());
  return out;
}

TEST_CASE("informers' backoff jitter differs per instance unless seeded", "[kube][backoff]") {
  FakeKubeApi api;
  Informer a(api, gvr::kNodes), b(api, gvr::kNodes);
  // Processes restarted together (say, every operator replica after an API
  // server outage) must not relist in step: the default seed is random.
  CHECK(a.backoff_seed() != b.backoff_seed());
  CHECK(Delays(a.backoff_seed()) != Delays(b.backoff_seed()));
  CHECK(RandomSeed() != RandomSeed());

  Informer c(api, gvr::kNodes, {.seed = 7}), d(api, gvr::kNodes, {.seed = 7});
  CHECK(c.backoff_seed() == 7);
  CHECK(Delays(c.backoff_seed()) == Delays(d.backoff_seed()));
}

}  // namespace
}  // namespace lockstep::kube
