#!/usr/bin/env bash
# Fabric failover in Kubernetes mode (needs root for network namespaces): a
# netlab lab of 4 hosts x 2 rails (rail-optimized), one lockstep-agent per host
# namespace in Kubernetes mode, each standing in for the agent of a kwok GPU
# node (gpu-node-0..3) of the hermetic cluster, as the chart's agent
# ServiceAccount with a token bound to its node. The agents find their fabric
# peers through their FabricHealths (status.hostAddress) and report their
# rails there. Asserts behaviour, never durations (every wait is a generous
# upper bound):
#  1. every FabricHealth shows railsUp 2 / railsTotal 2, its host address and
#     a True condition per rail; `kubectl get fabrichealth` shows the columns;
#  2. h1's rail0 link dies silently: gpu-node-1 shows railsUp 1, Ready False,
#     phase Degraded, Rail-rail0 False naming its peers; the others keep 2/2
#     (their rail0 still delivers to the other peers) and name gpu-node-1;
#  3. the link comes back: 2/2 again, flapsLastHour >= 1, lastFlapTime set;
#  4. with the policy's flapAlertPerHour lowered to 2, two more flaps raise
#     exactly one Warning Event FabricFlapAlert for rail0 on gpu-node-1's
#     FabricHealth (edge-triggered: one Event per raise, count 1);
#  5. latency SLAs (spec.latency; the agents restart on the re-rendered
#     agent.yaml, as the DaemonSet's config-hash roll would restart them): a
#     generous SLA (1 s) makes every FabricHealth's LatencyWithinSLA True and
#     the paths' lockstep_fabric_path_latency_breach 0; an impossible one on
#     rail1 (1 us) makes it False naming a rail1 path, raises one Warning
#     Event FabricLatencySLABreach per rail1 path (count 1), and sets the
#     breach gauge of rail1's paths to 1 (rail0's stay 0).
#
# How agents in namespaces reach the API server: it listens on the root
# namespace's 127.0.0.1 only. netlab-relay opens a listener on 127.0.0.1:<port
# of the API server> *inside* each host namespace and forwards to the root
# namespace's 127.0.0.1:<port>, so the agents use the cluster's own URL and CA
# unchanged (the certificate names IP:127.0.0.1) and no address, route or
# interface is added anywhere. Everything is torn down on exit; the policy
# gets its flapAlertPerHour back and the FabricHealths are handed back fresh
# (the operator recreates them, Pending) as later tests expect.
. "$(dirname "$0")/lib.sh"
[[ $(id -u) -eq 0 ]] || fail "needs root (network namespaces)"
command -v jq >/dev/null || fail "needs jq"
NETLAB=$(find_bin NETLAB e2e/netlab/netlab)
RELAY=$(find_bin NETLAB_RELAY e2e/netlab/netlab-relay)
AGENT=$(find_bin LOCKSTEP_AGENT daemonset/lockstep-agent)
operator_alive a || start_operator a
LAB=fk$$
LAB=${LAB:0:10}
OUT=$STATE/fabric-kube
rm -rf "$OUT" && mkdir -p "$OUT"
HOSTS=4
X=1  # the host whose rail0 link fails
POLICY=default
ALERT_AT=2  # flapAlertPerHour for this test
PIDS=()
RELAY_PID=
OLD_ALERT=$(kubectl get fabricpolicy $POLICY -o jsonpath='{.spec.flapAlertPerHour}')
APIPORT=${LOCKSTEP_APISERVER##*:}
APIPORT=${APIPORT%%/*}
[[ $APIPORT =~ ^[0-9]+$ ]] || fail "cannot read the API server port from $LOCKSTEP_APISERVER"

node() { echo "gpu-node-$1"; }
ns() { echo "$LAB-h$1"; }
TOPO=
addr() { jq -r ".hosts[$1].addr" "$TOPO"; }
fh() { kubectl get fabrichealth "$(node "$1")" -o json; }
alert_events() {  # the FabricFlapAlert Events about gpu-node-$1's rail0, as a JSON array
  kubectl -n default get events --field-selector "reason=FabricFlapAlert,involvedObject.name=$(node "$1")" -o json |
    jq '[.items[] | select(.involvedObject.kind == "FabricHealth" and (.message | contains("rail rail0 ")))]'
}

cleanup() {
  local rc=$? p
  if ((rc != 0)); then
    kubectl get fabrichealth >&2 || true
    for p in $(seq 0 $((HOSTS - 1))); do
      echo "--- $(node "$p") status: $(kubectl get fabrichealth "$(node "$p")" -o jsonpath='{.status}' 2>/dev/null)" >&2
      echo "--- h$p log tail:" >&2 && tail -n 8 "$OUT/h$p.log" >&2 2>/dev/null || true
    done
  fi
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  if [[ -n $RELAY_PID ]]; then kill -TERM "$RELAY_PID" 2>/dev/null || true; wait "$RELAY_PID" 2>/dev/null || true; fi
  "$NETLAB" down --name "$LAB" >/dev/null 2>&1 || true
  if [[ -n $OLD_ALERT ]]; then
    kubectl patch fabricpolicy $POLICY --type merge -p "{\"spec\":{\"flapAlertPerHour\":$OLD_ALERT}}" >/dev/null 2>&1 || true
  else
    kubectl patch fabricpolicy $POLICY --type json -p '[{"op":"remove","path":"/spec/flapAlertPerHour"}]' \
      >/dev/null 2>&1 || true
  fi
  # spec.latency first: its rails must be in spec.rails (a CEL rule), so emptying spec.rails
  # while it names rail1 is refused.
  kubectl patch fabricpolicy $POLICY --type json -p '[{"op":"remove","path":"/spec/latency"}]' >/dev/null 2>&1 || true
  kubectl patch fabricpolicy $POLICY --type merge -p '{"spec":{"rails":[]}}' >/dev/null 2>&1 || true
  # Tests after this one (e2e.gpu-health) run an agent on the policy's rendered agent.yaml:
  # hand it back without this test's rails.
  config_restored() {
    local y
    y=$(kubectl -n $NS get configmap "lockstep-agent-$POLICY" -o jsonpath='{.data.agent\.yaml}') &&
      ! grep -q '^  rails: \[rail0' <<<"$y"
  }
  wait_for "the operator to render the policy without this test's rails" 60 config_restored
  kubectl -n default delete events --field-selector reason=FabricFlapAlert >/dev/null 2>&1 || true
  kubectl -n default delete events --field-selector reason=FabricLatencySLABreach >/dev/null 2>&1 || true
  kubectl delete fabrichealth --all --wait=true >/dev/null 2>&1 || true
  wait_for "the operator to recreate the FabricHealths" 60 healths_match_gpu_nodes
  exit $rc
}
trap cleanup EXIT

wait_for "a FabricHealth per GPU node" 60 healths_match_gpu_nodes
for h in $(seq 0 $((HOSTS - 1))); do
  [[ $(kubectl get fabrichealth "$(node "$h")" -o jsonpath='{.metadata.labels.lockstep\.dev/policy}') == "$POLICY" ]] ||
    fail "$(node "$h") is not selected by FabricPolicy $POLICY"
done
kubectl -n default delete events --field-selector reason=FabricFlapAlert >/dev/null 2>&1 || true

# The policy names the nodes' rails (spec.rails) and lowers the flap alert
# threshold; the operator re-renders agent.yaml, which the agents run as is.
kubectl patch fabricpolicy $POLICY --type merge \
  -p "{\"spec\":{\"flapAlertPerHour\":$ALERT_AT,\"rails\":[\"rail0\",\"rail1\"],\"hostInterface\":\"host0\"}}" >/dev/null
config_rendered() {
  kubectl -n $NS get configmap "lockstep-agent-$POLICY" -o jsonpath='{.data.agent\.yaml}' >"$OUT/agent.yaml" &&
    grep -qx "flapAlertPerHour: $ALERT_AT" "$OUT/agent.yaml" && grep -qx '  rails: \[rail0, rail1\]' "$OUT/agent.yaml" &&
    grep -qx '  hostInterface: host0' "$OUT/agent.yaml"
}
wait_for "the operator to render the policy's rails and flapAlertPerHour into ConfigMap lockstep-agent-$POLICY" 60 config_rendered
(umask 077 && kubectl -n $NS get secret lockstep-probe-key -o jsonpath='{.data.key}' | base64 -d >"$OUT/probe-key")
[[ -s $OUT/probe-key ]] || fail "Secret $NS/lockstep-probe-key has no key"

"$NETLAB" up --name "$LAB" --hosts $HOSTS --rails 2 --layout rail >"$OUT/netlab.log" 2>&1 ||
  fail "netlab up failed: $(cat "$OUT/netlab.log")"
TOPO=$(tail -n 1 "$OUT/netlab.log")
[[ -f $TOPO ]] || TOPO=/run/netlab/$LAB/topology.json

listens=()
for h in $(seq 0 $((HOSTS - 1))); do listens+=(--listen "$(ns "$h")=127.0.0.1:$APIPORT"); done
"$RELAY" --to "127.0.0.1:$APIPORT" "${listens[@]}" >"$OUT/relay.out" 2>"$OUT/relay.log" &
RELAY_PID=$!
wait_for "netlab-relay listening in every host namespace" 10 grep -qx ready "$OUT/relay.out"

for h in $(seq 0 $((HOSTS - 1))); do
  kubectl -n $NS create token lockstep-agent --duration=1h --bound-object-kind=Node \
    --bound-object-name="$(node "$h")" >"$OUT/h$h.token"
done
start_agents() {  # one agent per host namespace, on $OUT/agent.yaml as the operator rendered it
  local h
  for h in $(seq 0 $((HOSTS - 1))); do
    ip netns exec "$(ns "$h")" "$AGENT" run --config "$OUT/agent.yaml" --node-name "$(node "$h")" \
      --server "$LOCKSTEP_APISERVER" --token-file "$OUT/h$h.token" --certificate-authority "$LOCKSTEP_CA_CERT" \
      --bind-address "$(addr "$h")" --node-address-fallback=false --report-interval 2 \
      --probe-key-file "$OUT/probe-key" >>"$OUT/h$h.log" 2>&1 </dev/null &
    PIDS+=($!)
  done
}
stop_agents() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}
start_agents

# status_is H JQ-EXPR: gpu-node-H's FabricHealth satisfies the jq expression
# (over .status, with $c the conditions by type).
status_is() {
  fh "$1" | jq -e --arg addr "$(addr "$1")" \
    '.status as $s | (($s.conditions // []) | map({key: .type, value: .}) | from_entries) as $c | '"$2" >/dev/null
}
all_up() {
  local h
  for h in $(seq 0 $((HOSTS - 1))); do
    status_is "$h" '$s.railsUp == 2 and $s.railsTotal == 2 and $s.hostAddress == $addr
      and $c["Rail-rail0"].status == "True" and $c["Rail-rail1"].status == "True"
      and $c["Rail-rail0"].reason == "RailUp" and $c["Rail-rail1"].reason == "RailUp"' || return 1
  done
}
wait_for "every FabricHealth at railsUp 2/2 with its host address and both rails' conditions True" 120 all_up
kubectl get fabrichealth >"$OUT/fh.txt"
cat "$OUT/fh.txt" >&2
awk -v n=$HOSTS 'NR == 1 { for (c = 1; c <= NF; c++) { if ($c == "RAILS-UP") up = c; if ($c == "RAILS") tot = c }; next }
  $1 ~ /^gpu-node-/ { split($1, p, "-"); if (p[3] < n) { rows++; if ($up != 2 || $tot != 2) bad = 1 } }
  END { exit !(up && tot && rows == n && !bad) }' "$OUT/fh.txt" ||
  fail "kubectl get fabrichealth does not show 2 of 2 rails up for the $HOSTS nodes"
pass "$HOSTS Kubernetes-mode agents in netlab namespaces: every FabricHealth railsUp 2/2, hostAddress, Rail-rail0/1 True"

# --- a silent link failure ---
"$NETLAB" link --name "$LAB" "h${X}r0" down --silent >>"$OUT/netlab.log" 2>&1
x_down() {
  status_is $X '$s.railsUp == 1 and $s.railsTotal == 2 and $s.phase == "Degraded"
    and $c.Ready.status == "False" and $c.Ready.reason == "RailDown"
    and $c["Rail-rail0"].status == "False" and $c["Rail-rail0"].reason == "RailDown"
    and $c["Rail-rail1"].status == "True"'
}
wait_for "$(node $X): railsUp 1, Ready False, Rail-rail0 False" 60 x_down
msg=$(fh $X | jq -r '.status.conditions[] | select(.type == "Rail-rail0") | .message')
for h in $(seq 0 $((HOSTS - 1))); do
  ((h == X)) && continue
  [[ $msg == *"$(node "$h")"* ]] || fail "Rail-rail0 of $(node $X) does not name peer $(node "$h"): $msg"
done
others_name_x() {
  local h
  for h in $(seq 0 $((HOSTS - 1))); do
    ((h == X)) && continue
    status_is "$h" '$s.railsUp == 2 and $c["Rail-rail0"].status == "True" and $c["Rail-rail0"].reason == "PathsDown"
      and ($c["Rail-rail0"].message | contains("'"$(node $X)"'"))' || return 1
  done
}
wait_for "the other nodes: 2/2 rails up, rail0 naming $(node $X)'s failed path" 60 others_name_x
pass "h${X}r0 silently down: $(node $X) railsUp 1, Ready False (RailDown), phase Degraded, Rail-rail0 False naming its peers; the others 2/2"

"$NETLAB" link --name "$LAB" "h${X}r0" up >>"$OUT/netlab.log" 2>&1
x_back() {
  status_is $X '$s.railsUp == 2 and $c["Rail-rail0"].status == "True" and $s.flapsLastHour >= 1
    and ($s.lastFlapTime // "") != ""'
}
wait_for "$(node $X) back at 2/2 with the flap counted" 60 x_back
flaps=$(fh $X | jq -r .status.flapsLastHour)
pass "h${X}r0 back: $(node $X) railsUp 2/2, flapsLastHour $flaps, lastFlapTime $(fh $X | jq -r .status.lastFlapTime)"
# (No assertion that no alert exists yet: on a busy machine an agent that is
# starved of CPU for a few probe intervals sees every one of its paths fail,
# which counts as a flap of its rails; the alert is edge-triggered, so it is
# still one Event.)

# --- flapping above flapAlertPerHour ---
fabric_status() { ip netns exec "$(ns "$1")" "$AGENT" fabric status --addr 127.0.0.1:9611 --json; }
rail0_down() { fabric_status $X | jq -e '.rails[0].down == true' >/dev/null; }
paths_up() { fabric_status $X | jq -e '[.paths[].state] | length == 6 * 4 and all(. == "up")' >/dev/null; }  # 3 peers x 2 rails x fabric.pathsPerRail 4 (the default)
wait_for "every path of h$X up" 60 paths_up
for _ in $(seq 1 $ALERT_AT); do
  "$NETLAB" link --name "$LAB" "h${X}r0" down --silent >>"$OUT/netlab.log" 2>&1
  wait_for "h$X's agent to see rail0 down" 30 rail0_down
  "$NETLAB" link --name "$LAB" "h${X}r0" up >>"$OUT/netlab.log" 2>&1
  wait_for "every path of h$X up again (after the hold-down)" 120 paths_up
done
one_alert() { [[ $(alert_events $X | jq 'length == 1 and .[0].type == "Warning" and .[0].count == 1') == true ]]; }
wait_for "one Warning Event FabricFlapAlert on FabricHealth $(node $X)" 60 one_alert
kubectl -n default get events --field-selector reason=FabricFlapAlert >&2
status_is $X '$s.flapsLastHour > '$ALERT_AT || fail "$(node $X): flapsLastHour not above $ALERT_AT after $((ALERT_AT + 1)) flaps"
sleep 5  # no second Event for the same raise (reports keep coming every 2 s)
one_alert || fail "more than one FabricFlapAlert Event (or a repeat) for one alert: $(alert_events $X | jq -c '[.[] | {count, message}]')"
pass "$((ALERT_AT + 1)) flaps of h${X}r0 with flapAlertPerHour $ALERT_AT: one Warning Event FabricFlapAlert on FabricHealth $(node $X)"

# --- latency SLAs ---
metrics() { ip netns exec "$(ns "$1")" curl -fsS http://127.0.0.1:9610/metrics; }
# apply_latency JSON GREP: the policy's spec.latency, rendered (GREP matches a
# line of agent.yaml), then the agents restarted on it.
apply_latency() {
  kubectl patch fabricpolicy $POLICY --type merge -p "{\"spec\":{\"latency\":$1}}" >/dev/null
  LATENCY_LINE=$2
  wait_for "the operator to render spec.latency ($2) into agent.yaml" 60 latency_rendered
  stop_agents
  start_agents
}
latency_rendered() {
  kubectl -n $NS get configmap "lockstep-agent-$POLICY" -o jsonpath='{.data.agent\.yaml}' >"$OUT/agent.yaml" &&
    grep -q -- "$LATENCY_LINE" "$OUT/agent.yaml"
}
latency_is() {  # every node's LatencyWithinSLA has status $1
  local h
  for h in $(seq 0 $((HOSTS - 1))); do
    status_is "$h" '$c.LatencyWithinSLA.status == "'"$1"'"' || return 1
  done
}
latency_report() {
  local h
  for h in $(seq 0 $((HOSTS - 1))); do
    echo "$(node "$h"): $(fh "$h" | jq -c '.status.conditions[]? | select(.type == "LatencyWithinSLA") | {status, reason, message}')" >&2
  done
}
no_sla() {
  local h
  for h in $(seq 0 $((HOSTS - 1))); do
    status_is "$h" '$c.LatencyWithinSLA.status == "Unknown" and $c.LatencyWithinSLA.reason == "NoSLA"' || return 1
  done
}
no_sla || { latency_report; fail "without spec.latency every LatencyWithinSLA should be Unknown (NoSLA)"; }
apply_latency '{"oneWayDelayP99Micros":1000000}' 'oneWayDelayP99Micros: 1000000'
wait_for "every FabricHealth LatencyWithinSLA True with a 1 s SLA" 120 latency_is True
latency_report
metrics 0 >"$OUT/metrics-generous.txt"
grep -q '^lockstep_fabric_path_owd_sla_seconds{peer="gpu-node-1",rail="rail1"} 1$' "$OUT/metrics-generous.txt" ||
  fail "h0 does not export the 1 s SLA of path rail1 -> gpu-node-1: $(grep owd_sla "$OUT/metrics-generous.txt")"
n=$(grep -c '^lockstep_fabric_path_latency_breach{.*} 0$' "$OUT/metrics-generous.txt")
((n == 2 * (HOSTS - 1))) && ! grep -q '^lockstep_fabric_path_latency_breach{.*} 1$' "$OUT/metrics-generous.txt" ||
  fail "h0: expected $((2 * (HOSTS - 1))) paths with lockstep_fabric_path_latency_breach 0, got $n"
pass "spec.latency 1 s: every FabricHealth LatencyWithinSLA True; h0 exports the SLA and breach 0 on its $n paths"

breach_events() {
  kubectl -n default get events --field-selector reason=FabricLatencySLABreach -o json |
    jq '[.items[] | select(.involvedObject.kind == "FabricHealth" and .type == "Warning" and (.message | contains("fabric path rail1 -> ")))]'
}
some_breach_event() { [[ $(breach_events | jq 'length >= 1') == true ]]; }
apply_latency '{"oneWayDelayP99Micros":1000000,"rails":[{"name":"rail1","oneWayDelayP99Micros":1}]}' 'name: rail1'
breached() {
  local h
  for h in $(seq 0 $((HOSTS - 1))); do
    status_is "$h" '$c.LatencyWithinSLA.status == "False" and $c.LatencyWithinSLA.reason == "SLABreached"
      and ($c.LatencyWithinSLA.message | startswith("path rail1 -> "))' || return 1
  done
}
wait_for "every FabricHealth LatencyWithinSLA False (SLABreached) naming a rail1 path with a 1 us SLA on rail1" 120 breached
latency_report
# One Event per path (each node's HOSTS-1 rail1 paths), each raised once:
# the agents rate-limit them to one per path per 10 minutes.
all_breach_events() { [[ $(breach_events | jq "length == $((HOSTS * (HOSTS - 1)))") == true ]]; }
wait_for "Warning Events FabricLatencySLABreach naming rail1 paths" 60 some_breach_event
wait_for "one Warning Event FabricLatencySLABreach per rail1 path ($((HOSTS * (HOSTS - 1))))" 60 all_breach_events
sleep 5  # reports go on every 2 s: no further Event, no repeat
all_breach_events && [[ $(breach_events | jq 'all(.count == 1)') == true ]] ||
  fail "FabricLatencySLABreach Events repeated: $(breach_events | jq -c '[.[] | {count, message}]')"
kubectl -n default get events --field-selector reason=FabricLatencySLABreach >&2
metrics 0 >"$OUT/metrics-impossible.txt"
r1=$(grep -c '^lockstep_fabric_path_latency_breach{peer="[^"]*",rail="rail1"} 1$' "$OUT/metrics-impossible.txt")
r0=$(grep -c '^lockstep_fabric_path_latency_breach{peer="[^"]*",rail="rail0"} 0$' "$OUT/metrics-impossible.txt")
((r1 == HOSTS - 1 && r0 == HOSTS - 1)) ||
  fail "h0: expected breach 1 on its $((HOSTS - 1)) rail1 paths and 0 on its rail0 paths: $(grep latency_breach "$OUT/metrics-impossible.txt")"
awk '$1 == "lockstep_fabric_path_owd_sla_seconds{peer=\"gpu-node-1\",rail=\"rail1\"}" && $2 > 0.99e-6 && $2 < 1.01e-6 { ok = 1 }
  END { exit !ok }' "$OUT/metrics-impossible.txt" ||
  fail "h0 does not export the 1 us SLA of rail1: $(grep owd_sla "$OUT/metrics-impossible.txt")"
pass "spec.latency.rails rail1 1 us: LatencyWithinSLA False (SLABreached) on every node, one Warning Event FabricLatencySLABreach per rail1 path ($(breach_events | jq length)), h0's rail1 paths breach 1, rail0 paths 0"
