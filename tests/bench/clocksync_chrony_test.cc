#include <catch2/catch.hpp>

#include "clocksync_chrony.h"

namespace lockstep::bench {
namespace {

// Real `chronyc -c tracking` lines of chrony 4.3 (client synced, server, client before its first sync).
constexpr const char* kClient =
    "0AC70001,10.199.0.1,2,1795533882.345404623,0.000000751,0.000000001,0.000000010,0.012,0.000,0.054,"
    "0.000002171,0.000001181,0.1,Normal\n";
constexpr const char* kServer =
    "7F7F0101,,1,1795533849.367036054,0.000000000,0.000000000,0.000000000,0.000,0.000,0.000,0.000000000,"
    "0.000000000,0.0,Normal";
constexpr const char* kUnsynced =
    "00000000,,0,0.000000000,0.000000000,0.000000000,0.000000000,0.000,0.000,0.000,1.000000000,1.000000000,0.0,"
    "Not synchronised";

ChronyTracking T(double err_ns, double bound_ns = 1000, int stratum = 2) {
  ChronyTracking t;
  t.stratum = stratum;
  t.system_time_s = err_ns * 1e-9;
  t.root_dispersion_s = bound_ns * 1e-9;
  t.leap = stratum ? "Normal" : "Not synchronised";
  return t;
}

TEST_CASE("chronyc tracking CSV: the correction is the error, root delay/2 + dispersion the bound", "[bench]") {
  auto c = ParseChronyTracking(kClient);
  REQUIRE(c.has_value());
  CHECK(c->ref_id == "0AC70001");
  CHECK(c->stratum == 2);
  CHECK(c->Synced());
  CHECK(c->ErrorNs() == Approx(751));
  CHECK(c->last_offset_s == Approx(1e-9));
  CHECK(c->BoundNs() == Approx(2171.0 / 2 + 1181));
  auto s = ParseChronyTracking(kServer);
  REQUIRE(s.has_value());
  CHECK(s->Synced());
  CHECK(s->ErrorNs() == 0);
  auto u = ParseChronyTracking(kUnsynced);
  REQUIRE(u.has_value());
  CHECK_FALSE(u->Synced());
  CHECK_FALSE(ParseChronyTracking("").has_value());
  CHECK_FALSE(ParseChronyTracking("506 Cannot talk to daemon").has_value());
  CHECK_FALSE(ParseChronyTracking("a,b,c,d,e,f,g,h,i,j,k,l,m,Normal").has_value());
}

TEST_CASE("chrony configs: -x friendly, own socket and pid file, no drift file", "[bench]") {
  std::string server = ChronyServerConfig("/w/chrony-h0");
  CHECK(server.find("local stratum 1\n") != std::string::npos);
  CHECK(server.find("allow\n") != std::string::npos);
  CHECK(server.find("cmdport 0\n") != std::string::npos);
  CHECK(server.find("bindcmdaddress /w/chrony-h0/chronyd.sock\n") != std::string::npos);
  CHECK(server.find("pidfile /w/chrony-h0/chronyd.pid\n") != std::string::npos);
  std::string client = ChronyClientConfig("10.77.0.1", "/w/chrony-h3", -4);
  CHECK(client.find("server 10.77.0.1 iburst minpoll -4 maxpoll -4 xleave\n") != std::string::npos);
  CHECK(client.find("port 0\n") != std::string::npos);
  CHECK(client.find("bindcmdaddress /w/chrony-h3/chronyd.sock\n") != std::string::npos);
  CHECK(client.find("log tracking measurements statistics\n") != std::string::npos);
  for (const std::string& c : {server, client}) {
    CHECK(c.find("driftfile") == std::string::npos);
    CHECK(c.find("rtc") == std::string::npos);
  }
}

TEST_CASE("chrony is scored over every synchronised pair, server included", "[bench]") {
  // Server 0 (error 0), clients 1 and 2 at +300 and -100 ns; client 3 not yet synced.
  ChronyRound r1 = {{0, T(0, 0, 1)}, {1, T(300)}, {2, T(-100)}, {3, T(5000, 1000, 0)}};
  // Second round: client 2 is 2500 ns off, beyond its bound (1000) + the server's (0).
  ChronyRound r2 = {{0, T(0, 0, 1)}, {1, T(300)}, {2, T(2500)}};
  ChronyScore s = ScoreChrony({r1, r2}, 0);
  CHECK(s.samples == 7);
  CHECK(s.unsynced_samples == 1);
  CHECK(s.pairs == 6);  // 3 + 3
  // pairs: 300, 100, 400 | 300, 2500, 2200
  CHECK(*s.max_ns == Approx(2500));
  CHECK(*s.p50_ns == Approx(350));
  CHECK(s.violations == 2);  // 2500 > 0 + 1000 and 2200 > 1000 + 1000
  CHECK(*s.client_max_ns == Approx(2500));
  CHECK(*s.client_p50_ns == Approx(300));
  ChronyScore none = ScoreChrony({}, 0);
  CHECK(none.pairs == 0);
  CHECK_FALSE(none.p99_ns.has_value());
}

}  // namespace
}  // namespace lockstep::bench
