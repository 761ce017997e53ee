// ExtractRefs / SubstituteGrafana / LegendLabels: what a dashboard query
// refers to, read from PromQL the way tests/chart/dashboards.sh needs it.
#include <catch2/catch.hpp>

#include "promql_refs.h"

namespace lockstep::dashboards {
namespace {

using Names = std::set<std::string>;

PromqlRefs Refs(const std::string& e) {
  auto r = ExtractRefs(e);
  INFO(e << ": " << (r.ok() ? "" : r.error().message));
  REQUIRE(r.ok());
  return *r;
}

Names Metrics(const PromqlRefs& r) {
  Names out;
  for (const auto& s : r.selectors) out.insert(s.metric);
  return out;
}

TEST_CASE("refs: a selector inside rate and an aggregation with by before its argument", "[dashboards]") {
  auto r = Refs(R"(sum by (node, rail) (rate(lockstep_fabric_flaps_total{node=~".+", rail!="x"}[5m])))");
  REQUIRE(r.selectors.size() == 1);
  CHECK(r.selectors[0].metric == "lockstep_fabric_flaps_total");
  CHECK(r.selectors[0].matchers == Names{"node", "rail"});
  CHECK(r.grouping == Names{"node", "rail"});
  CHECK(r.created.empty());
}

TEST_CASE("refs: binary operators with on, group_left, bool, offset and keywords are not metrics", "[dashboards]") {
  auto r = Refs("max(a_total) by (x) / on (y) group_left (z) b_seconds offset 5m > bool 3 and c unless d or inf");
  CHECK(Metrics(r) == Names{"a_total", "b_seconds", "c", "d"});
  CHECK(r.grouping == Names{"x", "y", "z"});
  auto g = Refs("a * on (node) group_left b");
  CHECK(Metrics(g) == Names{"a", "b"});
  CHECK(g.grouping == Names{"node"});
}

TEST_CASE("refs: histogram_quantile over buckets, subqueries and the @ modifier", "[dashboards]") {
  auto r = Refs("histogram_quantile(0.99, sum without (instance) (rate(h_bucket{le!=\"\"}[5m:30s] @ end())))");
  CHECK(Metrics(r) == Names{"h_bucket"});
  CHECK(r.grouping == Names{"instance"});
  CHECK(r.selectors[0].matchers == Names{"le"});
}

TEST_CASE("refs: label functions create and read labels", "[dashboards]") {
  auto r = Refs(R"x(label_replace(up{job="a"}, "dst", "$1", "src", "(.*)"))x");
  CHECK(r.created == Names{"dst"});
  CHECK(r.sources == Names{"src"});
  auto j = Refs(R"(label_join(x, "both", "-", "a", "b"))");
  CHECK(j.created == Names{"both"});
  CHECK(j.sources == Names{"a", "b"});
  auto c = Refs(R"(count_values("version", lockstep_agent_info))");
  CHECK(c.created == Names{"version"});
  CHECK(Metrics(c) == Names{"lockstep_agent_info"});
}

TEST_CASE("refs: strings are never names and __name__ selects the metric", "[dashboards]") {
  auto r = Refs(R"x(x{a="sum(y) by (z)", b='q{w}', c=`r`} + {__name__="up", job="j"})x");
  CHECK(Metrics(r) == Names{"x", "up"});
  CHECK(r.grouping.empty());
  CHECK(r.selectors[1].matchers == Names{"job"});
}

TEST_CASE("refs: what cannot be checked is an error with a message", "[dashboards]") {
  for (const char* bad :
       {"sum(x", "x)", R"({job="a"})", R"({__name__=~"lockstep_.*"})", R"(x{a="b)", "x{a}", "rate(x[5m)"}) {
    auto r = ExtractRefs(bad);
    INFO(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
    CHECK_FALSE(r.error().message.empty());
  }
}

TEST_CASE("substitute: Grafana's intervals become durations, variables become .+", "[dashboards]") {
  Names vars;
  CHECK(SubstituteGrafana(R"(rate(x{node=~"$node", rail=~"${rail:regex}", p=~"[[peer]]"}[$__rate_interval]))", &vars) ==
        R"(rate(x{node=~".+", rail=~".+", p=~".+"}[5m]))");
  CHECK(vars == Names{"node", "rail", "peer"});
  vars.clear();
  CHECK(SubstituteGrafana("increase(x[${__range}]) / $__interval", &vars) == "increase(x[5m]) / 5m");
  CHECK(vars.empty());
  CHECK(SubstituteGrafana("x{a=\"$1\"} costs $ 3", &vars) == "x{a=\"$1\"} costs $ 3");
  CHECK(vars.empty());
}

TEST_CASE("legend: the labels of {{...}}", "[dashboards]") {
  CHECK(LegendLabels("{{node}} {{ rail }} -> {{peer}} p99") == Names{"node", "rail", "peer"});
  CHECK(LegendLabels("total").empty());
}

}  // namespace
}  // namespace lockstep::dashboards
