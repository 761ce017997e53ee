// What a PromQL expression refers to: the metric names it selects, the label
// names its matchers, groupings and label functions use, and the labels it
// creates (label_replace, label_join, count_values). Pure (string in, value
// out); thread-compatible.
//
// It is not a PromQL parser: syntax is promtool's job (tests/chart/dashboards.sh
// runs `promtool check rules` on the same expressions). It tokenizes, skips
// strings, durations and numbers, and reads names by their position, which is
// enough to hold a dashboard's queries against the series a real scrape
// exports. Expressions must not carry Grafana variables: SubstituteGrafana
// first.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/common/result.h"

namespace lockstep::dashboards {

struct Selector {
  std::string metric;              // from the name or a __name__="..." matcher
  std::set<std::string> matchers;  // label names in its {...}, __name__ excluded
};

struct PromqlRefs {
  std::vector<Selector> selectors;
  std::set<std::string> grouping;  // by, without, on, ignoring, group_left, group_right
  std::set<std::string> sources;   // label_replace / label_join source labels
  std::set<std::string> created;   // label_replace / label_join destination, count_values label
};

// REQUIRES: Grafana variables already substituted. InvalidArgument for what
// cannot be read: unbalanced brackets, an unterminated string, a selector
// without a metric name, a __name__ regex (which a name check cannot follow).
Result<PromqlRefs> ExtractRefs(std::string_view expr);

// Replaces Grafana's variables in a query with PromQL that means the same to a
// parser: $__rate_interval, $__interval and $__range (and their ${...} forms)
// become 5m; any other $var, ${var}, ${var:fmt} or [[var]] becomes `.+` (the
// variables sit inside regex matchers: =~"$node"). Returns the names of the
// non-builtin variables seen in `vars`.
std::string SubstituteGrafana(std::string_view query, std::set<std::string>* vars);

// The label names a legend format refers to: {{node}} {{ rail }}.
std::set<std::string> LegendLabels(std::string_view legend);

}  // namespace lockstep::dashboards
