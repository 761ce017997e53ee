// Eventually(): polls a condition until it holds or a deadline passes. For
// tests of components that run their own threads (informers, controllers),
// where waiting for a condition is the only option; never a fixed sleep.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace lockstep::kube::testing {

inline bool Eventually(const std::function<bool()>& cond,
                       std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace lockstep::kube::testing
