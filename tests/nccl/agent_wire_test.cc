// The plugin <-> node agent line protocol: round trips and malformed input.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "lockstep/nccl/agent_wire.h"

using namespace lockstep::nccl;

namespace {
lockstep::Result<std::optional<AgentState>> FeedAll(AgentStateReader& r, const std::string& text) {
  std::istringstream in(text);
  std::string line;
  lockstep::Result<std::optional<AgentState>> last = std::optional<AgentState>();
  while (std::getline(in, line)) {
    last = r.Feed(line);
    if (!last.ok()) return last;
  }
  return last;
}
}  // namespace

TEST_CASE("an agent state round-trips through its lines", "[nccl][agent]") {
  AgentState s{.locked = true, .offset_ns = -123456789, .bound_ns = 900, .host = {10, 0, 0, 5}};
  s.rails = {{10, 1, 0, 5}, {10, 2, 0, 5}};
  s.paths = {
      AgentPath{.rail = {10, 1, 0, 5}, .peer = {10, 0, 0, 6}, .index = 0, .state = "up", .usable = true},
      AgentPath{.rail = {10, 2, 0, 5}, .peer = {10, 0, 0, 6}, .index = 0, .state = "recovering", .usable = false}};
  AgentStateReader r;
  auto got = FeedAll(r, EncodeAgentState(s));
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  REQUIRE(**got == s);
  REQUIRE((*got)->Usable({10, 2, 0, 5}, {10, 0, 0, 6}) == false);
  REQUIRE((*got)->Usable({10, 1, 0, 5}, {10, 0, 0, 6}) == true);
  REQUIRE_FALSE((*got)->Usable({10, 3, 0, 5}, {10, 0, 0, 6}).has_value());
  // A second state on the same reader replaces the first.
  s.paths.clear();
  got = FeedAll(r, EncodeAgentState(s));
  REQUIRE(**got == s);
}

TEST_CASE("malformed agent lines are errors, never crashes", "[nccl][agent]") {
  REQUIRE_FALSE(ParseAgentLine("").ok());
  REQUIRE_FALSE(ParseAgentLine("k=v").ok());
  REQUIRE_FALSE(ParseAgentLine("state novalue").ok());
  REQUIRE_FALSE(ParseAgentLine("state a=1 a=2").ok());
  REQUIRE_FALSE(ParseAgentLine(std::string(kMaxAgentLine + 1, 'x')).ok());
  AgentStateReader r;
  REQUIRE_FALSE(r.Feed("path rail=1.2.3.4 peer=1.2.3.5 index=0 usable=1").ok());  // before state
  REQUIRE_FALSE(r.Feed("state v=1 locked=2 offset_ns=0 bound_ns=0 host=0.0.0.0").ok());
  REQUIRE_FALSE(r.Feed("state v=1 locked=1 offset_ns=x bound_ns=0 host=0.0.0.0").ok());
  REQUIRE(r.Feed("state v=1 locked=1 offset_ns=5 bound_ns=0 host=0.0.0.0").ok());
  REQUIRE_FALSE(r.Feed("path rail=1.2.3 peer=1.2.3.5 index=0 usable=1").ok());
  REQUIRE_FALSE(r.Feed("path rail=1.2.3.256 peer=1.2.3.5 index=0 usable=1").ok());
  REQUIRE_FALSE(r.Feed("bogus").ok());
  REQUIRE_FALSE(ParseIpv4("01.2.3.4.5").has_value());
  REQUIRE_FALSE(ParseIpv4("1.2.3.4 ").has_value());
  REQUIRE(ParseIpv4("255.0.10.1") == Ipv4{255, 0, 10, 1});
}

TEST_CASE("stream reports round-trip and are validated", "[nccl][agent]") {
  StreamReport r{.conn = 77,
                 .send = false,
                 .stream = 3,
                 .rail = {10, 1, 0, 5},
                 .remote = {10, 1, 0, 6},
                 .peer = {10, 0, 0, 6},
                 .bytes = 1ull << 40,
                 .chunks = 99,
                 .owd_p50_ns = 12000,
                 .owd_p99_ns = std::nullopt,
                 .failovers = 2,
                 .rebalances = 1,
                 .state = "contended"};
  std::string line = EncodeStreamReport(r);
  REQUIRE(line.back() == '\n');
  line.pop_back();
  auto parsed = ParseAgentLine(line);
  REQUIRE(parsed.ok());
  auto back = DecodeStreamReport(*parsed);
  REQUIRE(back.ok());
  REQUIRE(*back == r);
  auto bad = *parsed;
  bad.kv["state"] = "weird";
  REQUIRE_FALSE(DecodeStreamReport(bad).ok());
  bad = *parsed;
  bad.kv["stream"] = "64";
  REQUIRE_FALSE(DecodeStreamReport(bad).ok());
  bad = *parsed;
  bad.kv.erase("bytes");
  REQUIRE_FALSE(DecodeStreamReport(bad).ok());
}
