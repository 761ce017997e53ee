// dashboard-lint: checks Grafana dashboard JSON files offline (dashboard_lint.h)
// against a catalogue of really scraped series, and writes their queries as a
// rule file for `promtool check rules`. Prints PASS/FAIL lines; exit status 1
// on any FAIL, 2 on bad arguments or unreadable files.
//   dashboard-lint --catalogue scraped-series.json [--rules-out F] [--used-out F] DASHBOARD.json...
#include <fstream>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "dashboard_lint.h"

namespace {

bool ReadJson(const std::string& path, nlohmann::json& out, std::string& error) {
  std::ifstream f(path);
  if (!f) {
    error = "cannot open " + path;
    return false;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  out = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded()) {
    error = path + " is not valid JSON";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace lockstep::dashboards;
  std::string catalogue_path, rules_out, used_out;
  std::vector<std::string> files;
  CLI::App app{"dashboard-lint: Grafana dashboards against real scrapes (tests/dashboards)"};
  app.add_option("--catalogue", catalogue_path, "scraped series: {\"sources\": {scrape: {name: [labels]}}}")
      ->required();
  app.add_option("--rules-out", rules_out, "write every query here as a Prometheus rule file (for promtool)");
  app.add_option("--used-out", used_out, "write the metrics the queries select here (a JSON array)");
  app.add_option("dashboards", files, "dashboard JSON files")->required();
  CLI11_PARSE(app, argc, argv);

  nlohmann::json cat_json;
  std::string error;
  if (!ReadJson(catalogue_path, cat_json, error)) {
    std::cerr << "dashboard-lint: " << error << "\n";
    return 2;
  }
  Catalogue catalogue = CatalogueFromJson(cat_json, &error);
  if (!error.empty() || catalogue.empty()) {
    std::cerr << "dashboard-lint: " << catalogue_path << ": " << (error.empty() ? "no metrics" : error) << "\n";
    return 2;
  }
  bool ok = true;
  std::vector<Expression> all;
  std::set<std::string> used;
  std::set<std::string> uids, titles;
  for (const auto& path : files) {
    nlohmann::json d;
    if (!ReadJson(path, d, error)) {
      std::cout << "FAIL " << error << "\n";
      ok = false;
      continue;
    }
    std::string name = path.substr(path.find_last_of('/') + 1);
    LintResult r = LintDashboard(name, d, catalogue);
    if (d.is_object() && !uids.insert(d.value("uid", "")).second) {
      r.findings.push_back({false, name + ": uid " + d.value("uid", "") + " is used by another dashboard"});
    }
    if (d.is_object() && !titles.insert(d.value("title", "")).second) {
      r.findings.push_back({false, name + ": title is used by another dashboard"});
    }
    for (const auto& f : r.findings) std::cout << (f.ok ? "PASS " : "FAIL ") << f.what << "\n";
    ok = ok && r.ok();
    all.insert(all.end(), r.expressions.begin(), r.expressions.end());
    used.insert(r.metrics_used.begin(), r.metrics_used.end());
  }
  if (!rules_out.empty()) {
    std::ofstream out(rules_out);
    out << RuleFile(all).dump(1) << "\n";
    if (!out) {
      std::cerr << "dashboard-lint: cannot write " << rules_out << "\n";
      return 2;
    }
  }
  if (!used_out.empty()) {
    std::ofstream out(used_out);
    out << nlohmann::json(used).dump() << "\n";
    if (!out) {
      std::cerr << "dashboard-lint: cannot write " << used_out << "\n";
      return 2;
    }
  }
  return ok ? 0 : 1;
}
