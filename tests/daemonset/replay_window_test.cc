#include <catch2/catch.hpp>

#include "lockstep/agent/replay_window.h"

namespace lockstep::agent {
namespace {

TEST_CASE("ReplayWindow accepts each sequence once", "[daemonset][replay]") {
  ReplayWindow w;
  REQUIRE(w.Accept(100));
  REQUIRE_FALSE(w.Accept(100));
  REQUIRE(w.Accept(102));
  REQUIRE(w.Accept(101));  // reordered, inside the window
  REQUIRE_FALSE(w.Accept(101));
  REQUIRE(w.highest() == 102);
}

TEST_CASE("ReplayWindow rejects sequences older than the window", "[daemonset][replay]") {
  ReplayWindow w;
  REQUIRE(w.Accept(5000));
  REQUIRE_FALSE(w.Accept(5000 - ReplayWindow::kSize));
  REQUIRE(w.Accept(5000 - ReplayWindow::kSize + 1));
}

TEST_CASE("ReplayWindow slides on jumps, including a restarted sender", "[daemonset][replay]") {
  ReplayWindow w;
  for (uint64_t s = 1; s <= 3000; ++s) REQUIRE(w.Accept(s));
  REQUIRE(w.Accept(1'000'000'000));  // restart: sequence starts at wall-clock ns
  REQUIRE_FALSE(w.Accept(2999));
  REQUIRE(w.Accept(1'000'000'000 - 5));
  // Bits cleared by a small slide do not let old entries back in.
  REQUIRE(w.Accept(1'000'000'010));
  REQUIRE_FALSE(w.Accept(1'000'000'000));
  REQUIRE_FALSE(w.Accept(1'000'000'000 - 5));
}

}  // namespace
}  // namespace lockstep::agent
