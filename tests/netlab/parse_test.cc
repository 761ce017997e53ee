#include <catch2/catch.hpp>

#include "netlab/parse.h"
#include "netlab/shaping.h"

namespace lockstep::netlab {
namespace {

TEST_CASE("rates: bits per second with k/m/g", "[netlab]") {
  CHECK(*ParseRate("100mbit") == 100e6);
  CHECK(*ParseRate("1.5G") == 1.5e9);
  CHECK(*ParseRate("800k") == 800e3);
  CHECK(*ParseRate("10mbps") == 10e6);
  CHECK(*ParseRate("64") == 64);
  CHECK(ParseRate("fast").error().message == "bad rate 'fast' (e.g. 100mbit)");
  for (const char* bad : {"", "100mb", "-5", "1e6", "100 mbit", "1.mbit"}) {
    INFO(bad);
    CHECK_FALSE(ParseRate(bad).ok());
  }
}

TEST_CASE("sizes: bytes, or bits with a bit suffix", "[netlab]") {
  CHECK(*ParseSize("16kb") == 16000);
  CHECK(*ParseSize("1500") == 1500);
  CHECK(*ParseSize("64kbit") == 8000);
  CHECK(*ParseSize("1.5M") == 1.5e6);
  CHECK(ParseSize("16kib").error().message == "bad size '16kib'");
}

TEST_CASE("port ranges: one port or P1-P2, at most 4096", "[netlab]") {
  CHECK(ParsePortRange("40000")->lo == 40000);
  CHECK(ParsePortRange("40000")->hi == 40000);
  CHECK(ParsePortRange("40000-40063")->hi == 40063);
  CHECK(ParsePortRange("0-4095").ok());
  CHECK(ParsePortRange("65535").ok());
  CHECK(ParsePortRange("65536").error().message == "bad port or range '65536' (e.g. 40000 or 40000-40063)");
  for (const char* bad : {"0-4096", "5-4", "a", "1-", "-1", "", "1-2-3", "99999999999999999999"}) {
    INFO(bad);
    CHECK_FALSE(ParsePortRange(bad).ok());
  }
}

TEST_CASE("numbers for the command line", "[netlab]") {
  CHECK(*ParseInt("42") == 42);
  CHECK(*ParseInt("-1") == -1);
  CHECK_FALSE(ParseInt("4x").ok());
  CHECK_FALSE(ParseInt("").ok());
  CHECK_FALSE(ParseInt("99999999999999999999").ok());
  CHECK(*ParseFloat("2.5") == 2.5);
  CHECK_FALSE(ParseFloat("2.5ms").ok());
}

TEST_CASE("Python-style quoting in messages", "[netlab]") {
  CHECK(Quoted("h9") == "'h9'");
  CHECK(Quoted("it's") == "\"it's\"");
  CHECK(Quoted("a\\b") == "'a\\\\b'");
}

TEST_CASE("shaping: directions, default burst and tc commands", "[netlab]") {
  CHECK(ShapeDirection("egress") == "up");
  CHECK(ShapeDirection("ingress") == "down");
  CHECK(ShapeDirection("both") == "both");
  const Link lk{"l0s0", "fabric", {"l0", "lab-l0", "s0", "10.77.128.1"}, {"s0", "lab-s0", "l0", "10.77.128.0"}};
  const auto both = ShapeEnds(lk, "both");
  REQUIRE(both.size() == 2);
  CHECK(both[0].key == "l0s0:up");
  CHECK(both[0].end.ns == "lab-l0");
  CHECK(both[1].key == "l0s0:down");
  CHECK(both[1].end.ns == "lab-s0");
  CHECK(ShapeEnds(lk, "down").size() == 1);

  CHECK(DefaultBurst(100e6) == 12500);  // 1 ms at 100 Mbit/s
  CHECK(DefaultBurst(10e6) == 3028);    // never below two full frames

  using Argv = std::vector<std::string>;
  const Shaper tbf = MakeShaper(lk.a, "tbf", 10e6, 3028, "20ms");
  CHECK(tbf.latency == "20ms");
  // tbf shapes; under it an htb at twice the rate only orders: CS6 (the
  // agents' probes) in band 10:1 first, the rest in 10:2, each band a bfifo
  // as deep as tbf's queue (10 Mbit/s x 20 ms + 3028 = 28028 bytes).
  const auto t = ShapeArgvs(tbf);
  REQUIRE(t.size() == 8);
  CHECK(t[0] == Argv{"tc", "-n", "lab-l0", "qdisc", "replace", "dev", "s0", "root", "pfifo_fast"});
  CHECK(t[1] == Argv{"tc", "-n", "lab-l0", "qdisc", "replace", "dev", "s0", "root", "handle", "1:", "tbf", "rate",
                     "10000000", "burst", "3028", "latency", "20ms"});
  CHECK(t[2] == Argv{"tc", "-n", "lab-l0", "qdisc", "replace", "dev", "s0", "parent", "1:1", "handle", "10:", "htb",
                     "default", "2"});
  CHECK(t[3] == Argv{"tc", "-n", "lab-l0", "class", "replace", "dev", "s0", "parent", "10:", "classid", "10:1", "htb",
                     "rate", "20000000", "ceil", "20000000", "burst", "3028", "prio", "0", "quantum", "1514"});
  CHECK(t[4][13] == "20000000");
  CHECK(t[4][18] == "prio");
  CHECK(t[4][19] == "1");
  CHECK(t[5] == Argv{"tc", "-n", "lab-l0", "qdisc", "replace", "dev", "s0", "parent", "10:1", "handle", "11:", "bfifo",
                     "limit", "28028"});
  CHECK(t[6][8] == "10:2");
  CHECK(t[6].back() == "28028");
  CHECK(t[7] == Argv{"tc", "-n", "lab-l0", "filter", "replace", "dev", "s0", "parent", "10:", "protocol", "ip", "prio",
                     "1", "handle", "800::800", "u32", "match", "ip", "dsfield", "0xc0", "0xfc", "flowid", "10:1"});
  const Shaper htb = MakeShaper(lk.b, "htb", 1.5e9, 62500, "50ms");
  CHECK_FALSE(htb.latency.has_value());
  const auto h = ShapeArgvs(htb);
  REQUIRE(h.size() == 6);
  CHECK(h[1] == Argv{"tc", "-n", "lab-s0", "qdisc", "replace", "dev", "l0", "root", "handle", "1:", "htb", "default",
                     "12"});
  CHECK(h[2] == Argv{"tc", "-n", "lab-s0", "class", "replace", "dev", "l0", "parent", "1:", "classid", "1:10", "htb",
                     "rate", "1500000000", "ceil", "1500000000", "burst", "62500", "quantum", "1514"});
  CHECK(h[3][10] == "1:11");
  CHECK(h[3][19] == "0");
  CHECK(h[4][10] == "1:12");
  CHECK(h[5].back() == "1:11");
  CHECK(ClearShapeArgv(lk.a) == Argv{"tc", "-n", "lab-l0", "qdisc", "del", "dev", "s0", "root"});
}

}  // namespace
}  // namespace lockstep::netlab
