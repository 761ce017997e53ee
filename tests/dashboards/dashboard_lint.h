// Offline checks of Grafana dashboard JSON against what Grafana needs and
// against the series a real scrape exported. Pure: JSON values in, findings
// out (no files, no processes). Thread-compatible.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockstep::dashboards {

// metric name -> every label name its scraped series carried (target labels
// such as node, job and instance included).
using Catalogue = std::map<std::string, std::set<std::string>>;

// {"sources": {"<scrape>": {"name": ["label", ...]}}} as
// tests/dashboards/scraped-series.json holds it, the sources merged. Throws
// nothing: a malformed catalogue is an empty one plus `error`.
Catalogue CatalogueFromJson(const nlohmann::json& j, std::string* error);

struct Finding {
  bool ok;
  std::string what;  // "<dashboard file>: <what was checked or what is wrong>"
};

struct Expression {
  std::string where;   // "<uid> panel 3 (Rails up) target A"
  std::string promql;  // Grafana variables substituted
};

struct LintResult {
  std::vector<Finding> findings;
  std::vector<Expression> expressions;  // every query, for promtool
  std::set<std::string> metrics_used;   // every metric a query selects
  bool ok() const;
};

// Checks one dashboard: the fields Grafana requires (uid, title, schemaVersion,
// panels with unique ids and a gridPos inside the 24-column grid, no two
// top-level panels overlapping), a ${datasource} variable that every panel and
// target uses, every variable a query uses defined, and every metric and label
// each expression, legend and variable query uses present in `catalogue`.
LintResult LintDashboard(const std::string& name, const nlohmann::json& dashboard, const Catalogue& catalogue);

// A Prometheus rule file (JSON, which promtool reads as YAML) with one
// recording rule per expression, so that `promtool check rules` parses them.
nlohmann::json RuleFile(const std::vector<Expression>& expressions);

}  // namespace lockstep::dashboards
