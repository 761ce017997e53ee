#include "dashboard_lint.h"

#include <regex>

#include "promql_refs.h"

namespace lockstep::dashboards {
namespace {

using nlohmann::json;

constexpr int kMinSchemaVersion = 36;  // Grafana 9.x+: datasource objects with uid
const char* const kDatasource = "${datasource}";

std::string Join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& v : s) out += (out.empty() ? "" : ", ") + v;
  return out;
}

class Linter {
 public:
  Linter(const std::string& name, const Catalogue& catalogue) : name_(name), catalogue_(catalogue) {}

  void Ok(const std::string& what) { result_.findings.push_back({true, name_ + ": " + what}); }
  void Bad(const std::string& what) { result_.findings.push_back({false, name_ + ": " + what}); }

  // Checks the metrics and labels one query refers to.
  void Query(const std::string& where, const std::string& raw, const std::set<std::string>& legend_labels) {
    std::set<std::string> used_vars;
    const std::string promql = SubstituteGrafana(raw, &used_vars);
    for (const auto& v : used_vars) {
      if (!vars_.count(v)) Bad(where + ": uses $" + v + ", which no template variable defines");
    }
    auto refs = ExtractRefs(promql);
    if (!refs.ok()) {
      Bad(where + ": cannot read `" + raw + "`: " + refs.error().message);
      return;
    }
    result_.expressions.push_back({where, promql});
    if (refs->selectors.empty()) Bad(where + ": selects no metric: `" + raw + "`");
    std::set<std::string> available = refs->created;
    bool all_known = true;
    for (const Selector& sel : refs->selectors) {
      result_.metrics_used.insert(sel.metric);
      auto it = catalogue_.find(sel.metric);
      if (it == catalogue_.end()) {
        Bad(where + ": metric " + sel.metric + " is not in any real scrape");
        all_known = false;
        continue;
      }
      available.insert(it->second.begin(), it->second.end());
      for (const auto& label : sel.matchers) {
        if (!it->second.count(label)) {
          Bad(where + ": " + sel.metric + " has no label " + label + " in a real scrape (it has: " + Join(it->second) +
              ")");
          all_known = false;
        }
      }
    }
    if (!all_known) return;
    std::set<std::string> needed = refs->grouping;
    needed.insert(refs->sources.begin(), refs->sources.end());
    needed.insert(legend_labels.begin(), legend_labels.end());
    for (const auto& label : needed) {
      if (!available.count(label)) {
        Bad(where + ": label " + label + " (grouping, label function or legend) is on none of its metrics: `" + raw +
            "`");
        all_known = false;
      }
    }
    if (all_known) ++queries_ok_;
  }

  void Variables(const json& d) {
    const json* list = nullptr;
    if (d.contains("templating") && d["templating"].is_object() && d["templating"].contains("list") &&
        d["templating"]["list"].is_array()) {
      list = &d["templating"]["list"];
    }
    if (!list) {
      Bad("no templating.list");
      return;
    }
    bool datasource = false;
    for (const json& v : *list) {
      const std::string name = v.value("name", "");
      if (name.empty()) {
        Bad("a template variable without a name");
        continue;
      }
      vars_.insert(name);
      if (name == "datasource" && v.value("type", "") == "datasource" && v.value("query", "") == "prometheus") {
        datasource = true;
      }
    }
    if (datasource) Ok("a Prometheus datasource variable ${datasource}");
    else Bad("no template variable {name: datasource, type: datasource, query: prometheus}");
    static const std::regex kLabelValues(R"(^\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$)");
    static const std::regex kQueryResult(R"(^\s*query_result\((.*)\)\s*$)");
    for (const json& v : *list) {
      if (v.value("type", "") != "query") continue;
      const std::string name = v.value("name", "");
      std::string q;
      if (v.contains("query") && v["query"].is_string()) q = v["query"];
      if (v.contains("query") && v["query"].is_object()) q = v["query"].value("query", "");
      if (v.contains("datasource") &&
          (!v["datasource"].is_object() || v["datasource"].value("uid", "") != kDatasource)) {
        Bad("variable " + name + ": datasource is not " + std::string(kDatasource));
      }
      std::smatch m;
      const std::string where = "variable " + name;
      if (std::regex_match(q, m, kLabelValues)) {
        Query(where, m[1].str(), {m[2].str()});
      } else if (std::regex_match(q, m, kQueryResult)) {
        Query(where, m[1].str(), {});
      } else {
        Bad(where + ": query must be label_values(<selector>, <label>) or query_result(<expr>), got `" + q + "`");
      }
    }
  }

  void Panels(const json& d) {
    if (!d.contains("panels") || !d["panels"].is_array() || d["panels"].empty()) {
      Bad("no panels");
      return;
    }
    std::vector<std::pair<const json*, bool>> all;  // panel, top level
    for (const json& p : d["panels"]) {
      all.push_back({&p, true});
      if (p.is_object() && p.contains("panels") && p["panels"].is_array()) {
        for (const json& inner : p["panels"]) all.push_back({&inner, false});
      }
    }
    std::set<long> ids;
    struct Box {
      long x, y, w, h;
      std::string title;
    };
    std::vector<Box> boxes;
    int queries = 0;
    for (const auto& [pp, top] : all) {
      const json& p = *pp;
      if (!p.is_object() || !p.contains("id") || !p["id"].is_number_integer()) {
        Bad("a panel without an integer id: " + p.dump().substr(0, 80));
        continue;
      }
      const long id = p["id"];
      const std::string title = p.value("title", "");
      const std::string type = p.value("type", "");
      const std::string where = "panel " + std::to_string(id) + " (" + title + ")";
      if (!ids.insert(id).second) Bad(where + ": duplicate panel id");
      if (type.empty()) Bad(where + ": no type");
      if (title.empty()) Bad(where + ": no title");
      const json g = p.value("gridPos", json());
      auto field = [&](const char* k) -> long {
        return g.is_object() && g.contains(k) && g[k].is_number_integer() ? g[k].get<long>() : -1;
      };
      const long x = field("x"), y = field("y"), w = field("w"), h = field("h");
      if (x < 0 || y < 0 || w < 1 || h < 1 || w > 24 || x + w > 24) {
        Bad(where + ": gridPos must have integer x, y >= 0, h >= 1 and 1 <= w, x + w <= 24: " + g.dump());
      } else if (top) {
        for (const Box& b : boxes) {
          if (x < b.x + b.w && b.x < x + w && y < b.y + b.h && b.y < y + h) {
            Bad(where + ": gridPos overlaps " + b.title);
          }
        }
        boxes.push_back({x, y, w, h, where});
      }
      if (type == "row") continue;
      if (!p.contains("datasource") || !p["datasource"].is_object() ||
          p["datasource"].value("uid", "") != kDatasource) {
        Bad(where + ": datasource must be {type: prometheus, uid: ${datasource}}");
      }
      if (!p.contains("targets") || !p["targets"].is_array() || p["targets"].empty()) {
        Bad(where + ": no targets");
        continue;
      }
      std::set<std::string> refids;
      for (const json& t : p["targets"]) {
        const std::string ref = t.value("refId", "");
        const std::string expr = t.value("expr", "");
        if (ref.empty() || !refids.insert(ref).second) Bad(where + ": a target without a unique refId");
        if (expr.empty()) {
          Bad(where + " target " + ref + ": no expr");
          continue;
        }
        if (t.contains("datasource") &&
            (!t["datasource"].is_object() || t["datasource"].value("uid", "") != kDatasource)) {
          Bad(where + " target " + ref + ": datasource is not ${datasource}");
        }
        ++queries;
        Query(where + " target " + ref, expr, LegendLabels(t.value("legendFormat", "")));
      }
    }
    Ok(std::to_string(all.size()) + " panels with unique ids and gridPos in the grid, " + std::to_string(queries) +
       " queries");
  }

  LintResult Run(const json& d) {
    if (!d.is_object()) {
      Bad("not a JSON object");
      return std::move(result_);
    }
    const std::string uid = d.value("uid", "");
    static const std::regex kUid("^[A-Za-z0-9_-]{1,40}$");
    if (std::regex_match(uid, kUid)) Ok("uid " + uid);
    else Bad("uid must be 1-40 characters of [A-Za-z0-9_-], got \"" + uid + "\"");
    if (d.value("title", "").empty()) Bad("no title");
    else Ok("title \"" + d.value("title", "") + "\"");
    if (d.contains("schemaVersion") && d["schemaVersion"].is_number_integer() &&
        d["schemaVersion"].get<int>() >= kMinSchemaVersion) {
      Ok("schemaVersion " + std::to_string(d["schemaVersion"].get<int>()));
    } else {
      Bad("schemaVersion must be an integer >= " + std::to_string(kMinSchemaVersion));
    }
    if (d.contains("id") && !d["id"].is_null()) Bad("id must be null or absent (Grafana assigns it on import)");
    Variables(d);
    Panels(d);
    const size_t total = result_.expressions.size();
    if (queries_ok_ == total && total > 0) {
      Ok("every metric and label of its " + std::to_string(total) + " queries is in a real scrape");
    }
    return std::move(result_);
  }

 private:
  std::string name_;
  const Catalogue& catalogue_;
  std::set<std::string> vars_;
  size_t queries_ok_ = 0;
  LintResult result_;
};

}  // namespace

bool LintResult::ok() const {
  for (const auto& f : findings) {
    if (!f.ok) return false;
  }
  return true;
}

Catalogue CatalogueFromJson(const json& j, std::string* error) {
  Catalogue c;
  if (!j.is_object() || !j.contains("sources") || !j["sources"].is_object()) {
    if (error) *error = "the catalogue has no \"sources\" object";
    return c;
  }
  for (const auto& [source, metrics] : j["sources"].items()) {
    if (!metrics.is_object()) {
      if (error) *error = "sources." + source + " is not an object of metric names";
      return {};
    }
    for (const auto& [name, labels] : metrics.items()) {
      if (!labels.is_array()) {
        if (error) *error = "sources." + source + "." + name + " is not an array of label names";
        return {};
      }
      auto& set = c[name];
      for (const auto& l : labels) {
        if (l.is_string()) set.insert(l.get<std::string>());
      }
    }
  }
  return c;
}

LintResult LintDashboard(const std::string& name, const json& dashboard, const Catalogue& catalogue) {
  return Linter(name, catalogue).Run(dashboard);
}

json RuleFile(const std::vector<Expression>& expressions) {
  json rules = json::array();
  for (size_t i = 0; i < expressions.size(); ++i) {
    rules.push_back({{"record", "dashboard_query_" + std::to_string(i)},
                     {"expr", expressions[i].promql},
                     {"labels", {{"where", expressions[i].where}}}});
  }
  return {{"groups", json::array({{{"name", "dashboards"}, {"rules", rules}}})}};
}

}  // namespace lockstep::dashboards
