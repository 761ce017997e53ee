#include <catch2/catch.hpp>

#include <set>
#include <thread>

#include "eventually.h"
#include "fake_clock.h"
#include "lockstep/kube/work_queue.h"

namespace lockstep::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST_CASE("work queue de-duplicates queued keys and keeps FIFO order", "[kube][workqueue]") {
  FakeClock clock;
  WorkQueue q(clock);
  q.Add("a");
  q.Add("b");
  q.Add("a");
  CHECK(q.Len() == 2);
  CHECK(q.TryGet() == "a");
  CHECK(q.TryGet() == "b");
  CHECK_FALSE(q.TryGet());
}

TEST_CASE("a key being processed is not handed out again until Done", "[kube][workqueue]") {
  FakeClock clock;
  WorkQueue q(clock);
  q.Add("a");
  auto k = q.TryGet();
  REQUIRE(k == "a");
  q.Add("a");  // changed while processing: remembered, not queued
  CHECK(q.Len() == 0);
  CHECK_FALSE(q.TryGet());
  q.Add("a");
  q.Done("a");  // re-queued once
  CHECK(q.Len() == 1);
  CHECK(q.TryGet() == "a");
  q.Done("a");
  CHECK(q.Len() == 0);
}

TEST_CASE("AddAfter waits for the clock and keeps the earliest time", "[kube][workqueue]") {
  FakeClock clock;
  WorkQueue q(clock);
  q.AddAfter("a", seconds(10));
  q.AddAfter("a", seconds(3));
  q.AddAfter("a", seconds(20));
  q.AddAfter("b", Nanos(0));  // immediate
  CHECK(q.WaitingLen() == 1);
  CHECK(q.NextReadyIn() == seconds(3));
  CHECK(q.TryGet() == "b");
  CHECK_FALSE(q.TryGet());
  clock.Advance(milliseconds(2999));
  CHECK_FALSE(q.TryGet());
  clock.Advance(milliseconds(1));
  CHECK(q.TryGet() == "a");
  CHECK(q.WaitingLen() == 0);
}

TEST_CASE("per-item exponential backoff 5ms -> 1000s and Forget", "[kube][workqueue]") {
  ItemExponentialRateLimiter rl;
  CHECK(rl.When("k") == milliseconds(5));
  CHECK(rl.When("k") == milliseconds(10));
  CHECK(rl.When("k") == milliseconds(20));
  CHECK(rl.When("other") == milliseconds(5));
  CHECK(rl.NumRequeues("k") == 3);
  for (int i = 0; i < 40; ++i) (void)rl.When("k");
  CHECK(rl.When("k") == seconds(1000));
  rl.Forget("k");
  CHECK(rl.NumRequeues("k") == 0);
  CHECK(rl.When("k") == milliseconds(5));
}

TEST_CASE("token bucket allows a burst of 100 then 10 qps", "[kube][workqueue]") {
  FakeClock clock;
  TokenBucketRateLimiter rl(clock, 10, 100);
  for (int i = 0; i < 100; ++i) REQUIRE(rl.When("k" + std::to_string(i)) == Nanos(0));
  CHECK(rl.When("x") == milliseconds(100));
  CHECK(rl.When("y") == milliseconds(200));  // reservations stack up
  clock.Advance(seconds(1));                 // refills 10 tokens, 2 already spent
  for (int i = 0; i < 8; ++i) REQUIRE(rl.When("z") == Nanos(0));
  CHECK(rl.When("z") == milliseconds(100));
}

TEST_CASE("AddRateLimited applies the default limiter with the fake clock", "[kube][workqueue]") {
  FakeClock clock;
  WorkQueue q(clock);
  q.AddRateLimited("k");
  CHECK_FALSE(q.TryGet());
  clock.Advance(milliseconds(5));
  REQUIRE(q.TryGet() == "k");
  q.AddRateLimited("k");  // second failure: 10ms
  q.Done("k");
  clock.Advance(milliseconds(9));
  CHECK_FALSE(q.TryGet());
  clock.Advance(milliseconds(1));
  REQUIRE(q.TryGet() == "k");
  CHECK(q.NumRequeues("k") == 2);
  q.Forget("k");
  q.Done("k");
  CHECK(q.NumRequeues("k") == 0);
  q.AddRateLimited("k");
  CHECK(q.NextReadyIn() == milliseconds(5));
}

TEST_CASE("depth observer and shutdown", "[kube][workqueue]") {
  FakeClock clock;
  WorkQueue q(clock);
  size_t depth = 99;
  q.SetDepthObserver([&](size_t n) { depth = n; });
  q.Add("a");
  q.Add("b");
  CHECK(depth == 2);
  (void)q.TryGet();
  CHECK(depth == 1);
  q.ShutDown();
  CHECK(q.ShuttingDown());
  CHECK_FALSE(q.Get());  // returns at once after shutdown
  q.Add("c");
  CHECK(q.Len() == 1);  // ignored
}

TEST_CASE("blocking Get wakes for adds and shutdown and keeps one worker per key", "[kube][workqueue]") {
  SystemClock& clock = SystemClock::Instance();
  WorkQueue q(clock);
  std::mutex mu;
  std::set<std::string> in_flight;
  std::atomic<int> processed{0};
  std::atomic<bool> overlap{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      while (auto key = q.Get()) {
        {
          std::lock_guard l(mu);
          if (!in_flight.insert(*key).second) overlap = true;
        }
        std::this_thread::yield();
        {
          std::lock_guard l(mu);
          in_flight.erase(*key);
        }
        processed++;
        q.Done(*key);
      }
    });
  }
  for (int i = 0; i < 2000; ++i) q.Add("key-" + std::to_string(i % 5));
  q.AddAfter("late", milliseconds(20));
  REQUIRE(testing::Eventually([&] { return q.Len() == 0 && q.WaitingLen() == 0 && processed >= 6; }));
  q.ShutDown();
  for (auto& t : workers) t.join();
  CHECK_FALSE(overlap);
}

}  // namespace
}  // namespace lockstep::kube
