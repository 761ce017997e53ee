#!/usr/bin/env bash
# The chart's PrometheusRule against real scrapes (needs root for network
# namespaces, and Debian's prometheus for prometheus and promtool): every alert
# expression is evaluated by a real Prometheus that scrapes a real operator or
# real agents, and each alert must go active (pending: every rule has a `for`)
# when, and only when, its condition really holds:
#  - the rules render from the chart and pass `promtool check rules`;
#  - agents: two standalone agents with fabric failover on a netlab lab (2
#    hosts x 2 rails); a Prometheus inside h1's namespace scrapes h1's agent as
#    the PodMonitor would (label node=h1). Rendered with clockErrorBoundNs=1
#    and flapsPerHour=1 so that real values cross them: LockstepClockUnsynced
#    goes active; nothing else does while the fabric is healthy; h1's rail-0
#    link silently down makes LockstepRailDown{rail="rail0"} active, and it
#    clears once the link is back and the rail re-admitted; one flap does not
#    make LockstepFabricFlapping active, a second one does (2 > 1);
#  - operator: a Prometheus in the root namespace scrapes a real operator as
#    the ServiceMonitor would (job = the chart's metrics Service):
#    LockstepOperatorDown stays inactive while it is up and goes active once it
#    is stopped;
#  - dashboards: what both Prometheus servers hold after the faults above (the
#    agents' series with the PodMonitor's node label, the operator's) is the
#    real scrape the chart's fleet, fabric paths and clock sync dashboards are
#    held against (dashboard-lint), and tests/dashboards/scraped-series.json
#    (sections agents, operator) must record nothing it lacks (rerun with
#    LOCKSTEP_UPDATE_SCRAPED_SERIES=1 to record it).
# Asserts behaviour, never durations (every wait is a generous upper bound).
. "$(dirname "$0")/lib.sh"
[[ $(id -u) -eq 0 ]] || fail "needs root (network namespaces)"
for tool in jq helm prometheus promtool curl; do
  command -v $tool >/dev/null || fail "needs $tool (scripts/setup installs Debian's prometheus)"
done
NETLAB=$(find_bin NETLAB e2e/netlab/netlab)
AGENT=$(find_bin LOCKSTEP_AGENT daemonset/lockstep-agent)
LINT=$(find_bin DASHBOARD_LINT tests/dashboards/dashboard-lint)
# shellcheck source=../../tests/dashboards/series.sh
. "$REPO/tests/dashboards/series.sh"
OUT=$STATE/alert-rules
rm -rf "$OUT" && mkdir -p "$OUT"
LAB=ar$$
LAB=${LAB:0:10}
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  "$NETLAB" down --name "$LAB" >/dev/null 2>&1 || true
  if [[ -f $CLUSTER/pids/operator-alerts.pid ]]; then stop_operator alerts TERM || true; fi
}
trap cleanup EXIT

# 1. The rules, as the chart renders them (the PrometheusRule's spec is a rule file).
render() {
  helm template lockstep "$REPO/charts/lockstep" --namespace $NS --set prometheusRule.enabled=true \
    --show-only templates/prometheusrule.yaml "$@" | sed -n '/^spec:/,$p' | tail -n +2 | sed 's/^  //'
}
render >"$OUT/rules-default.yaml"
render --set prometheusRule.clockErrorBoundNs=1 --set prometheusRule.flapsPerHour=1 >"$OUT/rules.yaml"
promtool check rules "$OUT/rules-default.yaml" "$OUT/rules.yaml" >"$OUT/promtool.log" 2>&1 ||
  fail "promtool rejects the chart's rules: $(cat "$OUT/promtool.log")"
mapfile -t ALERT_NAMES < <(grep -oP '^\s+- alert: \K\S+' "$OUT/rules.yaml")
((${#ALERT_NAMES[@]} >= 5)) || fail "expected at least 5 alerts in the chart, got: ${ALERT_NAMES[*]}"
pass "the chart's ${#ALERT_NAMES[@]} alerts (${ALERT_NAMES[*]}) render and pass promtool check rules"
JOB=$(grep -oP 'up\{job="\K[^"]+' "$OUT/rules.yaml") || fail "LockstepOperatorDown does not select the metrics Service's job"

# start_prometheus NAME PORT SCRAPE_CONFIGS [NETNS]: a Prometheus on 127.0.0.1:PORT
# evaluating rules.yaml every second.
start_prometheus() {
  local name=$1 port=$2 scrape=$3 netns=${4:-}
  cat >"$OUT/$name.yml" <<YAML
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [$OUT/rules.yaml]
scrape_configs:
$scrape
YAML
  local cmd=(prometheus --config.file="$OUT/$name.yml" --storage.tsdb.path="$OUT/$name-data"
    --web.listen-address=127.0.0.1:"$port" --log.level=warn)
  if [[ -n $netns ]]; then cmd=(ip netns exec "$netns" "${cmd[@]}"); fi
  "${cmd[@]}" >"$OUT/$name.log" 2>&1 &
  PIDS+=($!)
}
# active PORT ALERT [LABEL=VALUE] [NETNS]: the alert is pending or firing.
active() {
  local port=$1 alert=$2 match=${3:-} netns=${4:-} q
  q="ALERTS{alertname=\"$alert\"${match:+,${match%%=*}=\"${match#*=}\"}}"
  local cmd=(curl -sf --get "http://127.0.0.1:$port/api/v1/query" --data-urlencode "query=$q")
  if [[ -n $netns ]]; then cmd=(ip netns exec "$netns" "${cmd[@]}"); fi
  "${cmd[@]}" | jq -e '.data.result | length > 0' >/dev/null
}
# active_alerts PORT [NETNS]: the names of the active alerts, sorted, space-separated.
active_alerts() {
  local cmd=(curl -sf --get "http://127.0.0.1:$1/api/v1/query" --data-urlencode "query=ALERTS")
  if [[ -n ${2:-} ]]; then cmd=(ip netns exec "$2" "${cmd[@]}"); fi
  "${cmd[@]}" | jq -r '[.data.result[].metric.alertname] | unique | join(" ")'
}
scraped() {  # scraped PORT JOB [NETNS]: the target is up
  local cmd=(curl -sf --get "http://127.0.0.1:$1/api/v1/query" --data-urlencode "query=up{job=\"$2\"} == 1")
  if [[ -n ${3:-} ]]; then cmd=(ip netns exec "$3" "${cmd[@]}"); fi
  "${cmd[@]}" | jq -e '.data.result | length > 0' >/dev/null
}
free_port() {  # a TCP port nothing listens on in this namespace
  local p
  for p in $(shuf -i 20000-40000 -n 50); do
    if ! ss -Hltn "sport = :$p" | grep -q .; then echo "$p" && return; fi
  done
  fail "no free port"
}

# 2. Agents: two standalone agents with fabric failover on a netlab lab.
"$NETLAB" up --name "$LAB" --hosts 2 --rails 2 --layout rail >"$OUT/netlab.log" 2>&1 ||
  fail "netlab up failed: $(cat "$OUT/netlab.log")"
TOPO=$(tail -n 1 "$OUT/netlab.log")
[[ -f $TOPO ]] || TOPO=/run/netlab/$LAB/topology.json
ns() { echo "$LAB-h$1"; }
head -c 32 /dev/urandom | base64 >"$OUT/key"
peers=""
for h in 0 1; do
  peers+="  - {name: h$h, address: $(jq -r ".hosts[$h].rails[0].ip" "$TOPO"), hostAddress: $(jq -r ".hosts[$h].addr" "$TOPO")}"$'\n'
done
for h in 0 1; do
  cat >"$OUT/h$h.yaml" <<YAML
nodeName: h$h
probeKeyFile: $OUT/key
healthAddr: 127.0.0.1:9610
timeApiAddr: 127.0.0.1:9611
fabric:
  rails: [rail0, rail1]
peers:
$peers
YAML
  ip netns exec "$(ns "$h")" "$AGENT" run --config "$OUT/h$h.yaml" >"$OUT/h$h.log" 2>&1 &
  PIDS+=($!)
done
AGENT_PROM=9690
start_prometheus agents $AGENT_PROM "  - job_name: lockstep-agent
    static_configs: [{targets: ['127.0.0.1:9610'], labels: {node: h1}}]" "$(ns 1)"
h1_paths_up() {  # h1's agent reports every path up
  ip netns exec "$(ns 1)" "$AGENT" fabric status --addr 127.0.0.1:9611 --json |
    jq -e '[.paths[].state] | length == 2 * 4 and all(. == "up")' >/dev/null
}
wait_for "h1's agent scraped by Prometheus" 60 scraped $AGENT_PROM lockstep-agent "$(ns 1)"
wait_for "every path of h1 up" 60 h1_paths_up
wait_for "LockstepClockUnsynced active (the real error bound is above the 1 ns threshold)" 60 \
  active $AGENT_PROM LockstepClockUnsynced node=h1 "$(ns 1)"
sleep 3  # several evaluations with a healthy fabric
# (LockstepOperatorDown is right to be active here: this Prometheus scrapes no operator.)
[[ $(active_alerts $AGENT_PROM "$(ns 1)") == "LockstepClockUnsynced LockstepOperatorDown" ]] ||
  fail "alerts active while the fabric is healthy: $(active_alerts $AGENT_PROM "$(ns 1)")"
pass "agents: LockstepClockUnsynced evaluates on the real error bound; no fabric alert while every path is up"

rail0_down_cleared() { ! active $AGENT_PROM LockstepRailDown rail=rail0 "$(ns 1)"; }
"$NETLAB" link --name "$LAB" h1r0 down --silent >>"$OUT/netlab.log" 2>&1
wait_for "LockstepRailDown{rail=rail0} active for h1" 60 active $AGENT_PROM LockstepRailDown rail=rail0 "$(ns 1)"
! active $AGENT_PROM LockstepRailDown rail=rail1 "$(ns 1)" || fail "LockstepRailDown is active for the healthy rail1"
"$NETLAB" link --name "$LAB" h1r0 up >>"$OUT/netlab.log" 2>&1
wait_for "LockstepRailDown cleared after re-admission" 60 rail0_down_cleared
wait_for "every path of h1 up again" 60 h1_paths_up
sleep 3  # several evaluations after the first flap
! active $AGENT_PROM LockstepFabricFlapping rail=rail0 "$(ns 1)" || fail "LockstepFabricFlapping active after 1 flap (threshold 1)"
pass "h1r0 silently down: LockstepRailDown{node=h1, rail=rail0} active (rail1 not), cleared after re-admission; 1 flap: no LockstepFabricFlapping"

"$NETLAB" link --name "$LAB" h1r0 down --silent >>"$OUT/netlab.log" 2>&1
wait_for "LockstepFabricFlapping{rail=rail0} active for h1" 60 active $AGENT_PROM LockstepFabricFlapping rail=rail0 "$(ns 1)"
! active $AGENT_PROM LockstepFabricFlapping rail=rail1 "$(ns 1)" || fail "LockstepFabricFlapping is active for the stable rail1"
"$NETLAB" link --name "$LAB" h1r0 up >>"$OUT/netlab.log" 2>&1
wait_for "LockstepRailDown cleared after the second re-admission" 60 rail0_down_cleared
pass "second flap: LockstepFabricFlapping{node=h1, rail=rail0} active (2 > 1), not for rail1"
# What the agents' Prometheus holds now: every path, rail, flap, failover and clock series.
wait_for "h1's failover route changes scraped" 30 series_has $AGENT_PROM lockstep_fabric_route_changes_total "$(ns 1)"
series_catalogue $AGENT_PROM "$(ns 1)" >"$OUT/series-agents.json"

# 3. Operator: scraped as the ServiceMonitor would (job = the metrics Service,
# namespace = the release namespace: labels prometheus-operator adds).
# Only the leader reconciles (and so exports lockstep_reconcile_duration_seconds):
# the suite's shared operator "a" steps aside (later tests start it again).
if operator_alive a; then stop_operator a TERM; fi
start_operator alerts
log=$STATE/operator-alerts.log
wait_for "operator alerts leads" 60 grep -q '"msg":"became leader"' "$log"
MPORT=$(grep '"msg":"serving"' "$log" | head -n 1 | jq -r .metrics_port)
[[ $MPORT =~ ^[0-9]+$ ]] || fail "no metrics port in the operator's log"
OP_PROM=$(free_port)
start_prometheus operator "$OP_PROM" "  - job_name: $JOB
    static_configs: [{targets: ['127.0.0.1:$MPORT'], labels: {namespace: $NS}}]"
wait_for "the operator scraped by Prometheus" 60 scraped "$OP_PROM" "$JOB"
sleep 3
! active "$OP_PROM" LockstepOperatorDown || fail "LockstepOperatorDown active while the operator is scraped"
wait_for "the operator's reconciles scraped" 30 series_has "$OP_PROM" lockstep_reconcile_duration_seconds_bucket
series_catalogue "$OP_PROM" >"$OUT/series-operator.json"
stop_operator alerts TERM
wait_for "LockstepOperatorDown active once the operator is gone" 60 active "$OP_PROM" LockstepOperatorDown
pass "operator: LockstepOperatorDown inactive while job $JOB is up, active once the operator stopped"

# 4. The dashboards against these real scrapes.
jq -n --slurpfile a "$OUT/series-agents.json" --slurpfile o "$OUT/series-operator.json" \
  '{sources: {agents: $a[0], operator: $o[0]}}' >"$OUT/catalogue.json"
D=$REPO/charts/lockstep/dashboards
"$LINT" --catalogue "$OUT/catalogue.json" --used-out "$OUT/used.json" "$D/lockstep-fleet.json" "$D/lockstep-fabric-paths.json" \
  "$D/lockstep-clock-sync.json" >"$OUT/dashboard-lint.log" 2>&1 ||
  fail "a dashboard uses what these real scrapes did not export: $(grep -v '^PASS' "$OUT/dashboard-lint.log")"
pass "fleet, fabric paths, clock sync dashboards: every metric and label is in these real scrapes"
check_scraped_section agents "$OUT/series-agents.json" "$OUT/used.json"
check_scraped_section operator "$OUT/series-operator.json" "$OUT/used.json"
pass "scraped-series.json (agents, operator) holds only what these real scrapes exported"
