#include <catch2/catch.hpp>

#include <mutex>
#include <thread>
#include <vector>

#include "lockstep/common/pi_mutex.h"

namespace lockstep {
namespace {

TEST_CASE("PiMutex excludes: four threads' increments under it all count", "[common]") {
  PiMutex mu;
  long counter = 0;  // GUARDED_BY(mu)
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50'000; ++i) {
        std::lock_guard lock(mu);
        ++counter;
      }
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE(counter == 200'000);
}

TEST_CASE("PiMutex try_lock fails while another thread holds it, succeeds after", "[common]") {
  PiMutex mu;
  std::unique_lock held(mu);
  bool got = true;
  std::thread([&] { got = mu.try_lock(); }).join();
  REQUIRE_FALSE(got);
  held.unlock();
  std::thread([&] {
    got = mu.try_lock();
    if (got) mu.unlock();
  }).join();
  REQUIRE(got);
}

}  // namespace
}  // namespace lockstep
