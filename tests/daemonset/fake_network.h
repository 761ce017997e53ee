// FakeNetwork: an in-memory datagram network on simulated time for
// ProbeTransport users. Each link has a one-way base delay plus seeded random
// jitter and, with some probability, queueing delay; links are FIFO. Kernel
// timestamps are the true (FakeClock) send and arrival instants mapped through
// each node's NodeClock, exactly like the real adapter maps CLOCK_REALTIME.
// Single-threaded (the test drives the clock and every node's RunOnce).
#pragma once

#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "lockstep/agent/ports/node_clock.h"
#include "lockstep/agent/ports/probe_transport.h"
#include "sim_node_clock.h"

namespace lockstep::agent::test {

struct LinkModel {
  int64_t base_delay_ns = 10'000;
  double jitter_mean_ns = 50;       // exponential
  double queue_probability = 0.1;   // per packet
  int64_t queue_max_ns = 40'000;    // uniform extra delay when queued
};

class FakeNetwork {
 public:
  FakeNetwork(const Clock& clock, uint64_t seed, LinkModel model = {})
      : clock_(clock), rng_(seed), model_(model) {}

  std::unique_ptr<ProbeTransport> Attach(Endpoint ep, const NodeClock& node_clock);
  // A node that is down neither sends nor receives.
  void SetDown(Endpoint ep, bool down) {
    if (down) {
      down_.insert(ep);
    } else {
      down_.erase(ep);
    }
  }
  // Per-direction extra base delay (asymmetry).
  void SetExtraDelay(Endpoint from, Endpoint to, int64_t ns) { extra_[{from, to}] = ns; }
  // The last datagram delivered to `to` (for replay tests).
  const std::vector<uint8_t>& last_delivered(Endpoint to) { return last_[to]; }

 private:
  friend class FakeTransport;
  struct InFlight {
    int64_t arrive_ns;
    Endpoint from;
    std::vector<uint8_t> bytes;
  };
  void Enqueue(Endpoint from, Endpoint to, std::span<const uint8_t> bytes, int64_t send_ns) {
    if (down_.contains(from) || down_.contains(to)) return;
    std::exponential_distribution<double> jitter(1.0 / model_.jitter_mean_ns);
    double queue = 0;
    if (std::uniform_real_distribution<double>(0, 1)(rng_) < model_.queue_probability) {
      queue = std::uniform_real_distribution<double>(0, static_cast<double>(model_.queue_max_ns))(rng_);
    }
    int64_t arrive = send_ns + model_.base_delay_ns + extra_[{from, to}] +
                     static_cast<int64_t>(jitter(rng_) + queue);
    int64_t& fifo = link_last_[{from, to}];
    arrive = std::max(arrive, fifo + 1);
    fifo = arrive;
    queues_[to].push_back({arrive, from, std::vector<uint8_t>(bytes.begin(), bytes.end())});
  }

  const Clock& clock_;
  std::mt19937_64 rng_;
  LinkModel model_;
  std::set<Endpoint> down_;
  std::map<std::pair<Endpoint, Endpoint>, int64_t> extra_, link_last_;
  std::map<Endpoint, std::vector<InFlight>> queues_;
  std::map<Endpoint, std::vector<uint8_t>> last_;
};

class FakeTransport final : public ProbeTransport {
 public:
  FakeTransport(FakeNetwork& net, Endpoint ep, const NodeClock& node_clock)
      : net_(net), ep_(ep), node_clock_(node_clock) {}

  Endpoint local() const override { return ep_; }
  Result<uint32_t> Send(const Endpoint& to, std::span<const uint8_t> bytes) override {
    return SendAt(to, bytes, TrueNs(net_.clock_));
  }
  Result<std::array<uint32_t, 2>> SendPair(const Endpoint& to, std::span<const uint8_t> a,
                                            std::span<const uint8_t> b, std::chrono::nanoseconds spacing) override {
    int64_t now = TrueNs(net_.clock_);
    uint32_t ia = *SendAt(to, a, now);
    uint32_t ib = *SendAt(to, b, now + spacing.count());
    return std::array<uint32_t, 2>{ia, ib};
  }
  Status Poll(std::chrono::nanoseconds, TransportEvents& out) override {
    const int64_t now = TrueNs(net_.clock_);
    auto& q = net_.queues_[ep_];
    std::stable_sort(q.begin(), q.end(), [](const auto& x, const auto& y) { return x.arrive_ns < y.arrive_ns; });
    size_t n = 0;
    while (n < q.size() && q[n].arrive_ns <= now) {
      if (!net_.down_.contains(ep_)) {
        out.received.push_back({q[n].from, q[n].bytes, node_clock_.FromKernelRealtime(q[n].arrive_ns), true});
        net_.last_[ep_] = q[n].bytes;
      }
      ++n;
    }
    q.erase(q.begin(), q.begin() + static_cast<ptrdiff_t>(n));
    std::vector<std::pair<uint32_t, int64_t>> later;
    for (const auto& [id, when] : tx_) {
      if (when <= now) {
        out.tx_stamps.push_back({id, node_clock_.FromKernelRealtime(when)});
      } else {
        later.push_back({id, when});
      }
    }
    tx_.swap(later);
    return Status::Ok();
  }

 private:
  Result<uint32_t> SendAt(const Endpoint& to, std::span<const uint8_t> bytes, int64_t when) {
    uint32_t id = next_id_++;
    tx_.push_back({id, when});
    net_.Enqueue(ep_, to, bytes, when);
    return id;
  }
  FakeNetwork& net_;
  Endpoint ep_;
  const NodeClock& node_clock_;
  uint32_t next_id_ = 0;
  std::vector<std::pair<uint32_t, int64_t>> tx_;
};

inline std::unique_ptr<ProbeTransport> FakeNetwork::Attach(Endpoint ep, const NodeClock& node_clock) {
  return std::make_unique<FakeTransport>(*this, ep, node_clock);
}

}  // namespace lockstep::agent::test
