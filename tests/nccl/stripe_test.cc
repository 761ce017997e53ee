// StripeSender and StripeReceiver, alone and together over a simulated set of
// streams (FIFO queues, like TCP) on which streams fail at random: every byte
// arrives once, in order, in its own receive, and nothing hangs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <deque>
#include <random>
#include <vector>

#include "lockstep/nccl/stripe_receiver.h"
#include "lockstep/nccl/stripe_sender.h"

using namespace lockstep::nccl;

namespace {
DataHeader HeaderOf(const Chunk& c) {
  return DataHeader{.stream = static_cast<uint16_t>(c.stream),
                    .len = c.len,
                    .tag = c.tag,
                    .seq = c.seq,
                    .msg = c.msg,
                    .offset = c.offset,
                    .msg_size = c.msg_size};
}
}  // namespace

TEST_CASE("messages are cut in order into chunks with connection-wide sequence numbers", "[nccl]") {
  StripeSender s(2, {.chunk_bytes = 100, .window_per_stream = 8});
  REQUIRE(*s.Post(250, 7) == 0);
  REQUIRE(*s.Post(0, 8) == 1);
  REQUIRE(s.OnAck({.cum_seq = 0, .credit = 2}).ok());
  std::vector<Chunk> got;
  while (auto c = s.Next(static_cast<int>(got.size() % 2))) got.push_back(*c);
  REQUIRE(got.size() == 4);
  REQUIRE(got[0] == Chunk{.seq = 0, .msg = 0, .offset = 0, .len = 100, .msg_size = 250, .tag = 7, .stream = 0});
  REQUIRE(got[1] == Chunk{.seq = 1, .msg = 0, .offset = 100, .len = 100, .msg_size = 250, .tag = 7, .stream = 1});
  REQUIRE(got[2] == Chunk{.seq = 2, .msg = 0, .offset = 200, .len = 50, .msg_size = 250, .tag = 7, .stream = 0});
  // A zero-byte message still sends one (empty) chunk, so the receiver completes it.
  REQUIRE(got[3] == Chunk{.seq = 3, .msg = 1, .offset = 0, .len = 0, .msg_size = 0, .tag = 8, .stream = 1});
}

TEST_CASE("no chunk is cut before the receiver has posted the receive", "[nccl]") {
  StripeSender s(1, {.chunk_bytes = 10, .window_per_stream = 8});
  (void)s.Post(30, 0);
  (void)s.Post(30, 0);
  REQUIRE_FALSE(s.Next(0).has_value());
  REQUIRE(s.OnAck({.cum_seq = 0, .credit = 1}).ok());
  int n = 0;
  while (auto c = s.Next(0)) {
    REQUIRE(c->msg == 0);
    ++n;
  }
  REQUIRE(n == 3);
}

TEST_CASE("a stream has at most window_per_stream chunks unacknowledged", "[nccl]") {
  StripeSender s(2, {.chunk_bytes = 1, .window_per_stream = 3});
  (void)s.Post(100, 0);
  REQUIRE(s.OnAck({.cum_seq = 0, .credit = 1}).ok());
  int n = 0;
  while (s.Next(0)) ++n;
  REQUIRE(n == 3);
  REQUIRE(s.InFlight(0) == 3);
  REQUIRE(s.Next(1).has_value());  // the other stream still has room
  REQUIRE(s.OnAck({.cum_seq = 2, .credit = 1}).ok());
  REQUIRE(s.InFlight(0) == 1);
  REQUIRE(s.Next(0).has_value());
}

TEST_CASE("a failed stream's unacknowledged chunks go first, lowest sequence first, to a healthy stream", "[nccl]") {
  StripeSender s(2, {.chunk_bytes = 10, .window_per_stream = 4});
  (void)s.Post(80, 0);
  REQUIRE(s.OnAck({.cum_seq = 0, .credit = 1}).ok());
  for (int i = 0; i < 4; ++i) {
    REQUIRE(s.Next(0)->seq == static_cast<uint64_t>(2 * i));
    REQUIRE(s.Next(1)->seq == static_cast<uint64_t>(2 * i + 1));
  }
  REQUIRE(s.OnAck({.cum_seq = 1, .credit = 1}).ok());  // seq 0 arrived
  s.StreamDown(0);
  REQUIRE(s.StreamsUp() == 1);
  REQUIRE_FALSE(s.Next(0).has_value());                // a down stream gets nothing
  REQUIRE(s.OnAck({.cum_seq = 2, .credit = 1}).ok());  // stream 1 now has 3 in flight
  auto c = s.Next(1);
  REQUIRE(c->seq == 2);  // stream 0's lowest unacknowledged
  REQUIRE(c->offset == 20);
  REQUIRE(c->stream == 1);
  REQUIRE(s.chunks_retransmitted() == 1);
  REQUIRE_FALSE(s.Done(0));
}

TEST_CASE("a message is done only once its last chunk is acknowledged", "[nccl]") {
  StripeSender s(1, {.chunk_bytes = 10, .window_per_stream = 8});
  (void)s.Post(20, 0);
  REQUIRE(s.OnAck({.cum_seq = 0, .credit = 1}).ok());
  (void)s.Next(0);
  (void)s.Next(0);
  REQUIRE(s.OnAck({.cum_seq = 1, .credit = 1}).ok());
  REQUIRE_FALSE(s.Done(0));
  REQUIRE(s.OnAck({.cum_seq = 2, .credit = 1}).ok());
  REQUIRE(s.Done(0));
}

TEST_CASE("an ack for chunks never sent is a protocol error", "[nccl]") {
  StripeSender s(1, {});
  REQUIRE_FALSE(s.OnAck({.cum_seq = 5, .credit = 0}).ok());
}

TEST_CASE("options outside their bounds are refused with the range", "[nccl]") {
  REQUIRE(ValidateStripeOptions({.chunk_bytes = 0, .window_per_stream = 1}, 1).code() ==
          lockstep::ErrorCode::kInvalidArgument);
  REQUIRE_FALSE(ValidateStripeOptions({.chunk_bytes = 1, .window_per_stream = 65}, 64).ok());
  REQUIRE_FALSE(ValidateStripeOptions({}, 0).ok());
  REQUIRE(ValidateStripeOptions({}, 4).ok());
}

TEST_CASE("the receiver places chunks, drops copies it has, and completes messages in order", "[nccl]") {
  StripeReceiver r;
  REQUIRE(r.Post(20, 1) == 0);
  REQUIRE(r.Post(10, 2) == 1);
  REQUIRE(r.Ack() == AckFrame{.cum_seq = 0, .credit = 2});
  DataHeader m1{.len = 10, .tag = 2, .seq = 2, .msg = 1, .offset = 0, .msg_size = 10};
  REQUIRE(*r.OnHeader(m1) == Placement{.msg = 1, .offset = 0, .len = 10});
  REQUIRE(r.OnPayload(m1));
  REQUIRE_FALSE(r.Complete(1));  // message 0 is not complete yet
  DataHeader a{.len = 10, .tag = 1, .seq = 0, .msg = 0, .offset = 0, .msg_size = 20};
  DataHeader b{.len = 10, .tag = 1, .seq = 1, .msg = 0, .offset = 10, .msg_size = 20};
  REQUIRE(r.OnPayload(a));
  REQUIRE(r.OnHeader(a)->discard);  // a retransmitted copy
  REQUIRE_FALSE(r.OnPayload(a));
  REQUIRE(r.duplicates() == 1);
  REQUIRE(r.OnPayload(b));
  REQUIRE(r.Complete(0));
  REQUIRE(r.Complete(1));
  REQUIRE(r.Size(0) == 20);
  REQUIRE(r.LastSeq(0) == 1);
  REQUIRE(r.Ack().cum_seq == 3);
}

TEST_CASE("the receiver refuses chunks that break the protocol", "[nccl]") {
  StripeReceiver r;
  (void)r.Post(10, 5);
  auto too_big = r.OnHeader({.len = 4, .tag = 5, .seq = 0, .msg = 0, .offset = 0, .msg_size = 11});
  REQUIRE(too_big.code() == lockstep::ErrorCode::kInvalidArgument);
  REQUIRE(too_big.error().message.find("does not fit") != std::string::npos);
  REQUIRE_FALSE(r.OnHeader({.len = 4, .tag = 6, .seq = 0, .msg = 0, .offset = 0, .msg_size = 10}).ok());
  REQUIRE_FALSE(r.OnHeader({.len = 4, .tag = 5, .seq = 0, .msg = 1, .offset = 0, .msg_size = 10}).ok());
  REQUIRE_FALSE(r.OnHeader({.len = 4, .tag = 5, .seq = kMaxReceiveWindow, .msg = 0, .offset = 0, .msg_size = 10}).ok());
}

namespace {

// Sender and receiver joined by `nstreams` FIFO links; streams fail at random.
struct Sim {
  struct Link {
    bool up = true;
    std::deque<Chunk> data{};     // sender -> receiver
    std::deque<AckFrame> acks{};  // receiver -> sender
  };

  Sim(int nstreams, StripeOptions o, uint64_t seed) : sender(nstreams, o), links(nstreams), rng(seed) {}

  void Run(int nmsgs, int max_failures, uint32_t chunk_bytes) {
    // Messages of random sizes and tags; receives of at least that size.
    for (int i = 0; i < nmsgs; ++i) {
      const uint64_t size = rng() % 4 == 0 ? rng() % 3 : rng() % (chunk_bytes * 6);
      std::vector<uint8_t> d(size);
      for (auto& x : d) x = static_cast<uint8_t>(rng());
      sent.push_back(std::move(d));
      tags.push_back(static_cast<int32_t>(rng() % 1000));
    }
    int posted = 0, recv_posted = 0, failures = 0;
    long steps = 0;
    for (; steps < 2'000'000; ++steps) {
      if (posted == nmsgs && recv_posted == nmsgs && AllDone()) break;
      const int action = static_cast<int>(rng() % 100);
      const int s = static_cast<int>(rng() % links.size());
      if (action < 5 && posted < nmsgs) {
        if (*sender.Post(sent[posted].size(), tags[posted]) != static_cast<uint64_t>(posted)) FAIL("message index");
        ++posted;
      } else if (action < 10 && recv_posted < nmsgs) {
        const uint64_t cap = sent[recv_posted].size() + rng() % 3;
        recv.emplace_back(cap, 0xAA);
        if (receiver.Post(cap, tags[recv_posted]) != static_cast<uint64_t>(recv_posted)) FAIL("receive index");
        ++recv_posted;
        SendAck(s);
      } else if (action < 40) {
        if (auto c = sender.Next(s)) links[s].data.push_back(*c);
      } else if (action < 75) {
        Deliver(s);
      } else if (steer && action < 78) {
        // The agent's verdicts and traffic control: park, re-admit, limit.
        if (sender.IsParked(s)) {
          sender.Unpark(s);
          ++unparks;
        } else if (links[s].up && sender.StreamsUsable() > 1 && rng() % 2 == 0) {
          sender.Park(s);
          ++parks;
        } else {
          sender.SetLimit(s, 1 + static_cast<uint32_t>(rng() % 8));
        }
      } else if (action < 99) {
        if (links[s].up && !links[s].acks.empty()) {
          if (!sender.OnAck(links[s].acks.front()).ok()) FAIL("ack refused");
          links[s].acks.pop_front();
        }
      } else if (failures < max_failures && links[s].up && sender.StreamsUp() > 1 &&
                 (sender.StreamsUsable() > 1 || sender.IsParked(s))) {
        // The stream dies: whatever was on the wire is lost both ways.
        links[s] = Link{.up = false};
        sender.StreamDown(s);
        ++failures;
        for (size_t k = 0; k < links.size(); ++k) SendAck(static_cast<int>(k));
      }
      if (sender.Unacknowledged() > links.size() * 8) FAIL("more chunks unacknowledged than the windows allow");
    }
    INFO("steps " << steps);
    REQUIRE(AllDone());  // no hang
    for (int i = 0; i < nmsgs; ++i) {
      REQUIRE(receiver.Size(i) == sent[i].size());
      REQUIRE(std::equal(sent[i].begin(), sent[i].end(), recv[i].begin()));
    }
    this->failures = failures;
  }

  void Deliver(int s) {
    Link& l = links[s];
    if (!l.up || l.data.empty()) return;
    const Chunk c = l.data.front();
    l.data.pop_front();
    const DataHeader h = HeaderOf(c);
    auto p = receiver.OnHeader(h);
    if (!p.ok()) FAIL(p.error().message);
    if (!p->discard) {
      std::copy_n(sent[c.msg].begin() + static_cast<long>(c.offset), c.len,
                  recv[c.msg].begin() + static_cast<long>(p->offset));
    }
    receiver.OnPayload(h);
    SendAck(s);
  }

  // On stream s, or the next one up (as the socket transport does).
  void SendAck(int s) {
    for (size_t k = 0; k < links.size(); ++k) {
      Link& l = links[(static_cast<size_t>(s) + k) % links.size()];
      if (l.up) {
        l.acks.push_back(receiver.Ack());
        return;
      }
    }
  }

  bool AllDone() const {
    for (size_t i = 0; i < sent.size(); ++i) {
      if (i >= recv.size() || !sender.Done(i) || !receiver.Complete(i)) return false;
    }
    return true;
  }

  StripeSender sender;
  StripeReceiver receiver;
  std::vector<Link> links;
  std::mt19937_64 rng;
  std::vector<std::vector<uint8_t>> sent, recv;
  std::vector<int32_t> tags;
  int failures = 0;
  bool steer = false;
  int parks = 0, unparks = 0;
};

}  // namespace

TEST_CASE("every byte arrives once and in order with random sizes and no failures", "[nccl][property]") {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Sim sim(3, {.chunk_bytes = 64, .window_per_stream = 4}, seed);
    sim.Run(40, 0, 64);
    REQUIRE(sim.receiver.duplicates() == 0);
  }
}

TEST_CASE("every byte arrives once and in order while streams fail at random", "[nccl][property]") {
  uint64_t retransmitted = 0;
  int failures = 0;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    const int nstreams = 2 + static_cast<int>(seed % 4);
    Sim sim(nstreams, {.chunk_bytes = 32, .window_per_stream = 1 + static_cast<uint32_t>(seed % 8)}, seed);
    sim.Run(60, nstreams - 1, 32);
    retransmitted += sim.sender.chunks_retransmitted();
    failures += sim.failures;
  }
  REQUIRE(failures > 40);      // the property ran with failures in it
  REQUIRE(retransmitted > 0);  // and failover had work to do
}

TEST_CASE("every byte arrives once and in order while streams are parked, re-admitted and limited",
          "[nccl][property]") {
  int parks = 0, unparks = 0;
  uint64_t retransmitted = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const int nstreams = 2 + static_cast<int>(seed % 3);
    Sim sim(nstreams, {.chunk_bytes = 32, .window_per_stream = 8}, seed);
    sim.steer = true;
    sim.Run(50, static_cast<int>(seed % 2), 32);
    parks += sim.parks;
    unparks += sim.unparks;
    retransmitted += sim.sender.chunks_retransmitted();
  }
  REQUIRE(parks > 100);
  REQUIRE(unparks > 100);
  REQUIRE(retransmitted > 0);
}

TEST_CASE("a parked stream gets no chunks and hands its unacknowledged ones to the others", "[nccl]") {
  StripeSender s(2, {.chunk_bytes = 10, .window_per_stream = 4});
  (void)s.Post(100, 0);
  REQUIRE(s.OnAck({.cum_seq = 0, .credit = 1}).ok());
  auto a = s.Next(0);
  auto b = s.Next(1);
  REQUIRE(a->seq == 0);
  REQUIRE(b->seq == 1);
  s.Park(0);
  REQUIRE(s.IsParked(0));
  REQUIRE(s.StreamsUp() == 2);
  REQUIRE(s.StreamsUsable() == 1);
  REQUIRE_FALSE(s.Next(0).has_value());
  auto again = s.Next(1);
  REQUIRE(again->seq == 0);  // the parked stream's chunk, resent first
  REQUIRE(again->stream == 1);
  s.Unpark(0);
  REQUIRE(s.Next(0)->seq == 2);
}

TEST_CASE("a stream's limit caps its window and the others carry the rest", "[nccl]") {
  StripeSender s(2, {.chunk_bytes = 1, .window_per_stream = 4});
  (void)s.Post(100, 0);
  REQUIRE(s.OnAck({.cum_seq = 0, .credit = 1}).ok());
  s.SetLimit(0, 1);
  REQUIRE(s.Limit(0) == 1);
  int on0 = 0, on1 = 0;
  while (s.Next(0)) ++on0;
  while (s.Next(1)) ++on1;
  REQUIRE(on0 == 1);
  REQUIRE(on1 == 4);
  s.SetLimit(0, 100);  // above the window: the window
  REQUIRE(s.Limit(0) == 4);
}
