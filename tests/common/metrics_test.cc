#include <catch2/catch.hpp>

#include "lockstep/common/metrics.h"

namespace lockstep::metrics {
namespace {

TEST_CASE("counters and gauges render in Prometheus text format", "[common]") {
  Registry r;
  auto& c = r.Counter("lockstep_reconcile_total", "Reconciles.", {"controller", "result"});
  c.Inc({"policy", "success"});
  c.Inc({"policy", "success"});
  c.Inc({"policy", "error"});
  r.Gauge("lockstep_queue_depth", "Depth.").Set(7);
  std::string text = r.Render();
  REQUIRE(text.find("# TYPE lockstep_reconcile_total counter\n") != std::string::npos);
  REQUIRE(text.find("lockstep_reconcile_total{controller=\"policy\",result=\"success\"} 2\n") != std::string::npos);
  REQUIRE(text.find("lockstep_reconcile_total{controller=\"policy\",result=\"error\"} 1\n") != std::string::npos);
  REQUIRE(text.find("lockstep_queue_depth 7\n") != std::string::npos);
  REQUIRE(c.Get({"policy", "success"}) == 2);
}

TEST_CASE("histograms are cumulative with +Inf, sum and count", "[common]") {
  Registry r;
  auto& h = r.Histogram("d_seconds", "Durations.", {"c"}, {0.1, 1});
  h.Observe({"x"}, 0.05);
  h.Observe({"x"}, 0.5);
  h.Observe({"x"}, 5);
  std::string text = r.Render();
  REQUIRE(text.find("d_seconds_bucket{c=\"x\",le=\"0.10000000000000001\"} 1\n") != std::string::npos);
  REQUIRE(text.find("d_seconds_bucket{c=\"x\",le=\"1\"} 2\n") != std::string::npos);
  REQUIRE(text.find("d_seconds_bucket{c=\"x\",le=\"+Inf\"} 3\n") != std::string::npos);
  REQUIRE(text.find("d_seconds_count{c=\"x\"} 3\n") != std::string::npos);
}

TEST_CASE("label values are escaped and series can be removed", "[common]") {
  Registry r;
  auto& g = r.Gauge("g", "G.", {"node"});
  g.Set({"a\"b"}, 1);
  REQUIRE(r.Render().find("g{node=\"a\\\"b\"} 1") != std::string::npos);
  g.Remove({"a\"b"});
  REQUIRE(r.Render().find("g{") == std::string::npos);
}

}  // namespace
}  // namespace lockstep::metrics
