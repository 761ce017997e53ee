#!/usr/bin/env bash
# Offline checks of the chart's Grafana dashboards (charts/lockstep/dashboards)
# and of their ConfigMap (seconds; no cluster, no Grafana):
#   - each is dashboard JSON with what Grafana needs (uid, title, schemaVersion,
#     panels with unique ids and a gridPos in the grid, a ${datasource}
#     variable every panel uses) and every metric and label its queries,
#     legends and variables use is in tests/dashboards/scraped-series.json,
#     the catalogue of real scrapes (dashboard-lint; e2e.alert-rules and
#     dashboards.coordinator-scrape keep that catalogue true);
#   - every query parses: promtool check rules on them as recording rules;
#   - grafanaDashboards.enabled renders one ConfigMap labelled
#     grafana_dashboard: "1" whose keys are the files and whose values equal
#     them as JSON; label, namespace and annotations follow the values; the
#     default renders none.
#   dashboards.sh DASHBOARD_LINT   (helm and kubectl from $LOCKSTEP_BIN or PATH)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=lib.sh
source "$here/lib.sh"
lint="${1:?usage: dashboards.sh DASHBOARD_LINT}"
helm="$(find_tool helm)"
kubectl="$(find_tool kubectl)"
for t in "$helm" "$kubectl" "$(command -v promtool)" "$(command -v jq)"; do
  [[ -n "$t" ]] || { echo "FAIL needs helm, kubectl (\$LOCKSTEP_BIN or PATH), promtool (Debian's prometheus) and jq" >&2; exit 1; }
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export KUBECONFIG="$tmp/kubeconfig"
printf 'apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n' > "$KUBECONFIG"
export HELM_CACHE_HOME="$tmp/helm-cache" HELM_CONFIG_HOME="$tmp/helm-config" HELM_DATA_HOME="$tmp/helm-data"
chart="$root/charts/lockstep"
files=("$chart"/dashboards/*.json)

# 1. Grafana's fields, and metrics and labels against the real scrapes.
if "$lint" --catalogue "$root/tests/dashboards/scraped-series.json" --rules-out "$tmp/queries.json" "${files[@]}" \
    > "$tmp/lint.txt" 2>&1; then
  ok "dashboard-lint: ${#files[@]} dashboards ($(grep -c '^PASS' "$tmp/lint.txt") checks)"
else
  grep -v '^PASS' "$tmp/lint.txt"; bad "dashboard-lint"
fi
n="$(jq '.groups[0].rules | length' "$tmp/queries.json" 2>/dev/null || echo 0)"
[[ "$n" -ge 60 ]] && ok "$n queries collected" || bad "only $n queries collected from ${#files[@]} dashboards"

# 2. Every query parses (as a recording rule).
if out="$(promtool check rules "$tmp/queries.json" 2>&1)"; then
  ok "promtool parses all $n queries"
else
  echo "$out"; bad "promtool rejects a dashboard query"
fi

# 3. The ConfigMap.
render() { "$helm" template lockstep "$chart" --namespace lockstep-system "$@"; }
tojson() { "$kubectl" annotate --local --dry-run=client -o json -f "$1" lockstep.dev/lint=ok; }
if render > "$tmp/default.yaml" 2>&1 && ! grep -q 'grafana_dashboard' "$tmp/default.yaml"; then
  ok "off by default: no dashboards ConfigMap"
else
  bad "the default render has a dashboards ConfigMap (or failed)"
fi
if render --set grafanaDashboards.enabled=true --show-only templates/grafana-dashboards.yaml > "$tmp/cm.yaml" 2>&1 &&
   tojson "$tmp/cm.yaml" > "$tmp/cm.json" 2> "$tmp/cm.err"; then
  ok "grafanaDashboards.enabled renders a ConfigMap kubectl reads"
  [[ "$(jq -r '.kind + " " + .metadata.name + " " + .metadata.namespace + " " + .metadata.labels.grafana_dashboard' "$tmp/cm.json")" == \
     "ConfigMap lockstep-dashboards lockstep-system 1" ]] &&
    ok "ConfigMap lockstep-dashboards in the release namespace, labelled grafana_dashboard: \"1\"" ||
    bad "ConfigMap name, namespace or label: $(jq -c .metadata "$tmp/cm.json")"
  keys="$(jq -r '.data | keys | join(" ")' "$tmp/cm.json")"
  want="$(for f in "${files[@]}"; do basename "$f"; done | sort | tr '\n' ' ' | sed 's/ $//')"
  [[ "$keys" == "$want" ]] && ok "one key per dashboard file: $keys" || bad "ConfigMap keys '$keys', files '$want'"
  for f in "${files[@]}"; do
    k="$(basename "$f")"
    if diff <(jq -S . "$f") <(jq -r --arg k "$k" '.data[$k]' "$tmp/cm.json" | jq -S .) > "$tmp/diff" 2>&1; then
      ok "ConfigMap $k equals the file as JSON"
    else
      head -20 "$tmp/diff"; bad "ConfigMap $k differs from $f"
    fi
  done
  size="$(wc -c < "$tmp/cm.json")"
  [[ "$size" -lt 900000 ]] && ok "ConfigMap is $size bytes (under the 1 MiB object limit)" || bad "ConfigMap is $size bytes"
else
  cat "$tmp/cm.yaml" "$tmp/cm.err"; bad "grafanaDashboards.enabled does not render a ConfigMap kubectl reads"
fi
if render --set grafanaDashboards.enabled=true --set grafanaDashboards.namespace=monitoring \
     --set grafanaDashboards.label=dashboards --set grafanaDashboards.labelValue=lockstep \
     --set grafanaDashboards.annotations.grafana_folder=Lockstep --set grafanaDashboards.labels.team=infra \
     --show-only templates/grafana-dashboards.yaml > "$tmp/custom.yaml" 2>&1 &&
   tojson "$tmp/custom.yaml" > "$tmp/custom.json" 2>&1 &&
   jq -e '.metadata.namespace == "monitoring" and .metadata.labels.dashboards == "lockstep"
          and (.metadata.labels | has("grafana_dashboard") | not) and .metadata.labels.team == "infra"
          and .metadata.annotations.grafana_folder == "Lockstep"' "$tmp/custom.json" > /dev/null; then
  ok "namespace, label, labelValue, labels and annotations follow the values"
else
  cat "$tmp/custom.yaml" | head -20; bad "custom namespace/label/annotations"
fi
if out="$("$helm" lint --strict "$chart" --set grafanaDashboards.enabled=true 2>&1)"; then
  ok "helm lint --strict with grafanaDashboards.enabled"
else
  echo "$out"; bad "helm lint --strict with grafanaDashboards.enabled"
fi
if out="$(render --set grafanaDashboards.label='bad label' 2>&1)"; then
  bad "a label with a space was accepted"
elif grep -q 'label' <<< "$out"; then
  ok "a bad label name is rejected by the values schema"
else
  echo "$out"; bad "a bad label name is rejected without naming it"
fi

summary
