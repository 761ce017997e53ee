#!/usr/bin/env bash
# Unit tests of the chart's alert rules (seconds; no cluster, no Prometheus
# server): the PrometheusRule rendered with the default values goes through
# `promtool test rules` with tests/chart/alerts.test.yaml, which for every
# alert has series that must make it fire (after its `for`) and series that
# must not (at the threshold, below it, or above it for less than `for`).
# Also checks that every alert the chart renders has both kinds of case.
# e2e.alert-rules evaluates the same rules against real scrapes.
#   alert-rules-unit.sh   (helm from $LOCKSTEP_BIN or PATH; promtool from Debian's prometheus)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=lib.sh
source "$here/lib.sh"
helm="$(find_tool helm)"
if [[ -z "$helm" ]] || ! command -v promtool > /dev/null || ! command -v jq > /dev/null; then
  echo "FAIL needs helm (\$LOCKSTEP_BIN or PATH), promtool (Debian's prometheus) and jq" >&2; exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export HELM_CACHE_HOME="$tmp/helm-cache" HELM_CONFIG_HOME="$tmp/helm-config" HELM_DATA_HOME="$tmp/helm-data"

# The PrometheusRule's spec is a rule file.
"$helm" template lockstep "$root/charts/lockstep" --namespace lockstep-system --set prometheusRule.enabled=true \
  --show-only templates/prometheusrule.yaml | sed -n '/^spec:/,$p' | tail -n +2 | sed 's/^  //' > "$tmp/rules.yaml"
cp "$here/alerts.test.yaml" "$tmp/"
if out="$(cd "$tmp" && promtool test rules alerts.test.yaml 2>&1)"; then
  ok "promtool test rules: $(grep -c 'alertname:' "$tmp/alerts.test.yaml") alert cases pass"
else
  echo "$out"; bad "promtool test rules"
fi

# Every alert has a case where it fires and one where it must not.
mapfile -t alerts < <(grep -oP '^\s+- alert: \K\S+' "$tmp/rules.yaml")
[[ ${#alerts[@]} -ge 5 ]] && ok "${#alerts[@]} alerts in the chart" || bad "only ${#alerts[@]} alerts rendered"
cases="$(awk '/alertname:/ { name = $NF } /exp_alerts:/ { print name, ($0 ~ /\[\]/ ? "silent" : "fires") }' "$tmp/alerts.test.yaml" | sort -u)"
for a in "${alerts[@]}"; do
  if grep -qx "$a fires" <<< "$cases" && grep -qx "$a silent" <<< "$cases"; then
    ok "$a: cases where it fires and where it does not"
  else
    bad "$a lacks a case where it fires or one where it must stay silent"
  fi
done
summary
