// LintDashboard: Grafana's required fields and the queries against a catalogue
// of scraped series. Each defect is seeded into a good dashboard alone.
#include <catch2/catch.hpp>
#include <functional>

#include "dashboard_lint.h"

namespace lockstep::dashboards {
namespace {

using nlohmann::json;

const Catalogue kCatalogue = {
    {"lockstep_fabric_rail_down", {"instance", "job", "node", "rail"}},
    {"lockstep_agent_info", {"instance", "job", "node", "policy", "version"}},
};

json Panel(int id, int x, int y, const std::string& expr, const std::string& legend = "") {
  json target = {{"refId", "A"}, {"expr", expr}, {"datasource", {{"type", "prometheus"}, {"uid", "${datasource}"}}}};
  if (!legend.empty()) target["legendFormat"] = legend;
  return {{"id", id},
          {"type", "timeseries"},
          {"title", "panel " + std::to_string(id)},
          {"gridPos", {{"x", x}, {"y", y}, {"w", 12}, {"h", 8}}},
          {"datasource", {{"type", "prometheus"}, {"uid", "${datasource}"}}},
          {"targets", json::array({target})}};
}

json Good() {
  return {{"uid", "lockstep-test"},
          {"title", "Lockstep / Test"},
          {"schemaVersion", 39},
          {"templating",
           {{"list", json::array({{{"name", "datasource"}, {"type", "datasource"}, {"query", "prometheus"}},
                                  {{"name", "node"},
                                   {"type", "query"},
                                   {"datasource", {{"type", "prometheus"}, {"uid", "${datasource}"}}},
                                   {"query", {{"query", "label_values(lockstep_agent_info, node)"}}}}})}}},
          {"panels", json::array({{{"id", 1},
                                   {"type", "row"},
                                   {"title", "Rails"},
                                   {"gridPos", {{"x", 0}, {"y", 0}, {"w", 24}, {"h", 1}}},
                                   {"panels", json::array()}},
                                  Panel(2, 0, 1, R"(max by (node, rail) (lockstep_fabric_rail_down{node=~"$node"}))",
                                        "{{node}} {{rail}}"),
                                  Panel(3, 12, 1, R"(count by (version) (lockstep_agent_info))")})}};
}

std::string Failures(const LintResult& r) {
  std::string out;
  for (const auto& f : r.findings) {
    if (!f.ok) out += f.what + "\n";
  }
  return out;
}

TEST_CASE("lint: a good dashboard passes and yields its queries for promtool", "[dashboards]") {
  LintResult r = LintDashboard("good.json", Good(), kCatalogue);
  INFO(Failures(r));
  CHECK(r.ok());
  REQUIRE(r.expressions.size() == 3);  // the variable's selector and two panels
  CHECK(r.expressions[1].promql == R"(max by (node, rail) (lockstep_fabric_rail_down{node=~".+"}))");
  json rules = RuleFile(r.expressions);
  CHECK(rules["groups"][0]["rules"].size() == 3);
  CHECK(rules["groups"][0]["rules"][2]["record"] == "dashboard_query_2");
  CHECK(r.metrics_used == std::set<std::string>{"lockstep_agent_info", "lockstep_fabric_rail_down"});
}

// Applies one defect to a good dashboard and expects one failure mentioning `needle`.
void ExpectFailure(const std::function<void(json&)>& defect, const std::string& needle) {
  json d = Good();
  defect(d);
  LintResult r = LintDashboard("bad.json", d, kCatalogue);
  INFO(needle << "\n" << Failures(r));
  CHECK_FALSE(r.ok());
  CHECK(Failures(r).find(needle) != std::string::npos);
}

TEST_CASE("lint: a metric or label no scrape exported is named", "[dashboards]") {
  ExpectFailure([](json& d) { d["panels"][1]["targets"][0]["expr"] = "lockstep_fabric_rails_down"; },
                "metric lockstep_fabric_rails_down is not in any real scrape");
  ExpectFailure([](json& d) { d["panels"][1]["targets"][0]["expr"] = R"(lockstep_fabric_rail_down{peer="a"})"; },
                "lockstep_fabric_rail_down has no label peer");
  ExpectFailure([](json& d) { d["panels"][2]["targets"][0]["expr"] = "sum by (peer) (lockstep_agent_info)"; },
                "label peer (grouping, label function or legend) is on none of its metrics");
  ExpectFailure([](json& d) { d["panels"][2]["targets"][0]["legendFormat"] = "{{quantile}}"; }, "label quantile");
  ExpectFailure(
      [](json& d) { d["templating"]["list"][1]["query"]["query"] = "label_values(lockstep_agent_info, rail)"; },
      "variable node");
}

TEST_CASE("lint: variables must be defined and the datasource templated", "[dashboards]") {
  ExpectFailure([](json& d) { d["panels"][1]["targets"][0]["expr"] = R"(lockstep_fabric_rail_down{rail=~"$rail"})"; },
                "uses $rail, which no template variable defines");
  ExpectFailure([](json& d) { d["templating"]["list"].erase(0); }, "no template variable {name: datasource");
  ExpectFailure([](json& d) { d["panels"][2]["datasource"]["uid"] = "prometheus"; }, "panel 3 (panel 3): datasource");
  ExpectFailure([](json& d) { d["templating"]["list"][1]["query"]["query"] = "label_values(node)"; },
                "query must be label_values(<selector>, <label>)");
}

TEST_CASE("lint: Grafana's required fields and the grid", "[dashboards]") {
  ExpectFailure([](json& d) { d.erase("uid"); }, "uid must be");
  ExpectFailure([](json& d) { d["uid"] = std::string(41, 'a'); }, "uid must be");
  ExpectFailure([](json& d) { d.erase("title"); }, "no title");
  ExpectFailure([](json& d) { d["schemaVersion"] = 16; }, "schemaVersion");
  ExpectFailure([](json& d) { d["panels"] = json::array(); }, "no panels");
  ExpectFailure([](json& d) { d["panels"][2]["id"] = 2; }, "duplicate panel id");
  ExpectFailure([](json& d) { d["panels"][2].erase("id"); }, "without an integer id");
  ExpectFailure([](json& d) { d["panels"][2]["gridPos"]["x"] = 13; }, "x + w <= 24");
  ExpectFailure([](json& d) { d["panels"][2]["gridPos"]["x"] = 6; }, "overlaps panel 2");
  ExpectFailure([](json& d) { d["panels"][2]["targets"] = json::array(); }, "no targets");
  ExpectFailure([](json& d) { d["panels"][2]["targets"][0].erase("expr"); }, "no expr");
  ExpectFailure([](json& d) { d["panels"][2]["targets"][0]["expr"] = "sum(lockstep_agent_info"; }, "cannot read");
}

TEST_CASE("lint: a catalogue merges its sources, a malformed one is an error", "[dashboards]") {
  std::string error;
  Catalogue c = CatalogueFromJson(
      json::parse(R"({"sources": {"a": {"up": ["job"]}, "b": {"up": ["instance"], "x": []}}})"), &error);
  CHECK(error.empty());
  CHECK(c.at("up") == std::set<std::string>{"instance", "job"});
  CHECK(c.count("x") == 1);
  CHECK(CatalogueFromJson(json::parse(R"({"metrics": {"up": ["job"]}})"), &error).empty());
  CHECK(error.find("\"sources\"") != std::string::npos);
  error.clear();
  CHECK(CatalogueFromJson(json::parse(R"({"sources": {"a": {"up": "job"}}})"), &error).empty());
  CHECK(error.find("sources.a.up") != std::string::npos);
}

}  // namespace
}  // namespace lockstep::dashboards
