#!/usr/bin/env bash
# fabric-congestion: how fast the agents' congestion localisation flags a
# congested leaf-spine link, and whether it names the right one (issue 26,
# section 5). A netlab lab (--hosts, default 8, x 2 rails, rail-optimised:
# 2 groups x 2 rails = 4 leaves, 2 spines), one standalone lockstep-agent
# per host probing every peer on every rail, each given the fabric's map with
# --fabric-topology: the leaves from topology.json and, for every probed path
# (host address to host address, UDP 7312 -> 7312, leaving on rail r), its
# route as the lab's FIBs resolve it (`netlab path --oif rail<r>`: ECMP path
# discovery, which the agents themselves do not do yet).
#
# Phases:
#   1. every agent up, clock sync LOCKED and every path carrying one-way
#      delays; then --calm seconds with background load (UDP, netlab-loadgen,
#      --flows flows from h0's rail 0 to a host of the other group, together
#      --load) on an unshaped fabric: any link or bad path flagged then is a
#      false flag;
#   2. congestion starts: a single-FIFO tbf (--rate, --queue-ms of queue; no
#      priority band, so the CS6 probes queue with the data, as on a fabric
#      whose probes share the data class) on l0's port to s0 (link l0s0,
#      direction up: l0 -> s0), the load still running. Detection = the first
#      agent's "fabric link congested" log line (its own timestamp) minus the
#      time just before the tbf went on; the link it names must be l0>s0.
# Prints a table (phase, flags) and one JSON line with congested_link_named
# (the first link flagged after the start is l0>s0), congestion_detect_ms,
# false_flags (links or bad paths flagged in the calm phase), wrong_links
# (links other than l0>s0 flagged during congestion), nodes_flagging.
#
#   e2e/bench/fabric-congestion.sh [--hosts 8] [--calm 20] [--timeout 30] [--rate 20mbit]
#        [--queue-ms 20] [--load 60mbit] [--flows 16] [--smoke]
# --smoke: --calm 5: a quicker check that the chain works, not a figure.
# Root (network namespaces). $NETLAB and $LOCKSTEP_AGENT override the
# binaries (default build/ci, else build/dev).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HOSTS=8 CALM=20 TIMEOUT=30 RATE=20mbit QUEUE_MS=20 LOAD=60mbit FLOWS=16 SMOKE=0
while (($#)); do
  case $1 in
    --hosts) HOSTS=$2; shift 2 ;;
    --calm) CALM=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --queue-ms) QUEUE_MS=$2; shift 2 ;;
    --load) LOAD=$2; shift 2 ;;
    --flows) FLOWS=$2; shift 2 ;;
    --smoke) SMOKE=1 CALM=5; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $(id -u) -eq 0 ]] || { echo "needs root (network namespaces)" >&2; exit 1; }
((HOSTS >= 4 && HOSTS % 2 == 0)) || { echo "--hosts must be even and at least 4" >&2; exit 2; }
pick() {  # pick NAME RELPATH: $NAME, else build/ci, else build/dev
  local v=${!1:-}
  if [[ -n $v ]]; then echo "$v"; elif [[ -x $ROOT/build/ci/$2 ]]; then echo "$ROOT/build/ci/$2"; else echo "$ROOT/build/dev/$2"; fi
}
NETLAB=$(pick NETLAB e2e/netlab/netlab)
AGENT=$(pick LOCKSTEP_AGENT daemonset/lockstep-agent)
LOADGEN=$(dirname "$NETLAB")/netlab-loadgen
for b in "$NETLAB" "$AGENT" "$LOADGEN"; do [[ -x $b ]] || { echo "missing $b (build it first)" >&2; exit 1; }; done
command -v jq >/dev/null || { echo "needs jq" >&2; exit 1; }

LAB=fcong$$
LAB=${LAB:0:10}
OUT=$(mktemp -d /tmp/fabric-congestion.XXXXXX)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  "$NETLAB" down --name "$LAB" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# 2 groups x 2 rails: leaves l0 l1 (group 0: h0..h(n/2-1)), l2 l3 (group 1); spines s0 s1.
"$NETLAB" up --name "$LAB" --hosts "$HOSTS" --rails 2 --leaves 4 --spines 2 --layout rail >"$OUT/netlab.log" 2>&1 ||
  { echo "netlab up failed: $(tail -n 5 "$OUT/netlab.log")" >&2; exit 1; }
TOPO=$(tail -n 1 "$OUT/netlab.log")
[[ -f $TOPO ]] || { echo "no topology.json from netlab up" >&2; exit 1; }

# The fabric's map: leaves per host rail, and each probed path's route.
T0=$(date +%s.%N)
: >"$OUT/routes.jsonl"
for a in $(seq 0 $((HOSTS - 1))); do
  for b in $(seq 0 $((HOSTS - 1))); do
    ((a == b)) && continue
    for r in 0 1; do
      "$NETLAB" path --name "$LAB" "h${a}a" "h${b}a" --sport 7312 --dport 7312 --oif "rail$r" --json |
        jq -c --arg from "h$a" --arg to "h$b" --argjson rail "$r" '
          select(.reachable) |
          (.links[-1] | capture("r(?<r>[0-9]+)$").r) as $arr |
          {from: $from, to: $to, rail: $rail, path: 0,
           nodes: ([$from + "/rail\($rail)"] + .nodes[1:-1] + [$to + "/rail" + $arr])}' >>"$OUT/routes.jsonl"
    done
  done
done
jq -n --slurpfile t "$TOPO" --slurpfile routes "$OUT/routes.jsonl" '
  {leaves: ($t[0].hosts | map({key: .name, value: (.rails | sort_by(.rail) | map(.leaf))}) | from_entries),
   routes: $routes}' >"$OUT/topology.json"
ROUTES=$(wc -l <"$OUT/routes.jsonl")
# Paths whose route crosses l0 -> s0 (the link to congest), per source host.
jq -r 'select([.nodes[:-1], .nodes[1:]] | transpose | any(. == ["l0", "s0"])) | .from' "$OUT/routes.jsonl" |
  sort | uniq -c >"$OUT/crossing"
CROSSING=$(awk '{s += $1} END {print s + 0}' "$OUT/crossing")
MAX_PER_NODE=$(awk 'BEGIN {m = 0} $1 > m {m = $1} END {print m}' "$OUT/crossing")
echo "map: $ROUTES routes discovered in $(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s; $CROSSING paths cross l0>s0 (most from one node: $MAX_PER_NODE)" >&2
((MAX_PER_NODE >= 2)) || echo "warning: no node has 2 paths over l0>s0 (min_paths): the link cannot be named" >&2

head -c 32 /dev/urandom | base64 >"$OUT/key"
peers=""
for h in $(seq 0 $((HOSTS - 1))); do
  peers+="  - {name: h$h, address: $(jq -r ".hosts[$h].rails[0].ip" "$TOPO"), hostAddress: $(jq -r ".hosts[$h].addr" "$TOPO")}"$'\n'
done
for h in $(seq 0 $((HOSTS - 1))); do
  printf 'nodeName: h%s\nprobeKeyFile: %s\nhealthAddr: 127.0.0.1:9610\ntimeApiAddr: 127.0.0.1:9611\nfabric:\n  rails: [rail0, rail1]\nprobe:\n  idlePathIntervalMs: 0\npeers:\n%s' \
    "$h" "$OUT/key" "$peers" >"$OUT/h$h.yaml"
  ip netns exec "$LAB-h$h" "$AGENT" run --config "$OUT/h$h.yaml" --fabric-topology "$OUT/topology.json" \
    >"$OUT/h$h.log" 2>&1 &
  PIDS+=($!)
done
ready() {  # every agent: every path up with one-way delays (clock sync LOCKED)
  local h
  for h in $(seq 0 $((HOSTS - 1))); do
    ip netns exec "$LAB-h$h" "$AGENT" fabric status --addr 127.0.0.1:9611 --json 2>/dev/null |
      jq -e --argjson n $((2 * (HOSTS - 1))) '[.paths[] | select(.state == "up" and .owd_p50_ns != null)] | length == $n' \
        >/dev/null || return 1
  done
}
for _ in $(seq 1 240); do ready && break; sleep 0.5; done
ready || { echo "the agents did not get every path up with one-way delays in 120 s; logs in $OUT" >&2; exit 1; }

# Background load from h0 rail 0 (l0) to the other group's first host: its
# flows hash over both spines (with 16 flows, about half cross l0 -> s0).
DST_HOST=$((HOSTS / 2))
DST=$(jq -r ".hosts[$DST_HOST].rails[0].ip" "$TOPO")
SRC=$(jq -r '.hosts[0].rails[0].ip' "$TOPO")
DURATION=$((CALM + TIMEOUT + 10))
ip netns exec "$LAB-h$DST_HOST" "$LOADGEN" sink --bind "$DST:9999" --duration $((DURATION + 2)) >"$OUT/sink.log" 2>&1 &
PIDS+=($!)
ip netns exec "$LAB-h0" "$LOADGEN" send --to "$DST:9999" --bind "$SRC" --sport 41000 --flows "$FLOWS" --rate "$LOAD" \
  --duration "$DURATION" >"$OUT/send.log" 2>&1 &
PIDS+=($!)
CALM_FROM=$(date +%s.%N)
sleep "$CALM"
START=$(date +%s.%N)
# The congestion: one FIFO tbf on l0's port towards s0 (no priority band).
ip netns exec "$LAB-l0" tc qdisc replace dev s0 root handle 1: tbf rate "$RATE" burst 25000 latency "${QUEUE_MS}ms"

# flags FROM TO: "ts kind what node" for every congestion log line in [FROM, TO).
flags() {
  local h
  for h in $(seq 0 $((HOSTS - 1))); do
    jq -r --arg h "h$h" --argjson from "$1" --argjson to "$2" '
      select(.ts? != null and .ts >= $from and .ts < $to) |
      if .msg | startswith("fabric link congested") then "\(.ts) link \(.link) \($h)"
      elif .msg | startswith("fabric path delay rose alone") then "\(.ts) path \(.path) \($h)"
      else empty end' "$OUT/h$h.log" 2>/dev/null || true
  done | sort -n
}
DEADLINE=$(awk -v s="$START" -v t="$TIMEOUT" 'BEGIN {printf "%.3f", s + t}')
while :; do
  NOW=$(date +%s.%N)
  flags "$START" 1e12 | grep -q ' link ' && break
  awk -v n="$NOW" -v d="$DEADLINE" 'BEGIN {exit !(n >= d)}' && break
  sleep 0.2
done
sleep 2  # the other nodes' flags and anything wrongly named
END=$(date +%s.%N)
flags "$CALM_FROM" "$START" >"$OUT/flags-calm"
flags "$START" "$END" >"$OUT/flags-congested"
FIRST=$(grep -m1 ' link ' "$OUT/flags-congested" || true)
if [[ -n $FIRST ]]; then
  DETECT_MS=$(awk -v s="$START" -v t="${FIRST%% *}" 'BEGIN {printf "%.0f", (t - s) * 1000}')
  FIRST_LINK=$(awk '{print $3}' <<<"$FIRST")
else
  DETECT_MS=null FIRST_LINK=""
fi
NAMED=false
[[ $FIRST_LINK == "l0>s0" ]] && NAMED=true
FALSE_FLAGS=$(wc -l <"$OUT/flags-calm")
WRONG=$(awk '$2 == "link" && $3 != "l0>s0"' "$OUT/flags-congested" | wc -l)
BAD_PATHS=$(awk '$2 == "path"' "$OUT/flags-congested" | wc -l)
NODES=$(awk '$2 == "link" && $3 == "l0>s0" {print $4}' "$OUT/flags-congested" | sort -u | wc -l)
NODES_CROSSING=$(wc -l <"$OUT/crossing")
SENT=$(jq -r '.bytes // empty' "$OUT/send.log" 2>/dev/null | tail -n 1)

printf '%-12s %-8s %s\n' phase flags detail
printf '%-12s %-8s %s\n' calm "$FALSE_FLAGS" "$(awk '{print $2 "=" $3 "@" $4}' "$OUT/flags-calm" | sort -u | tr '\n' ' ')"
printf '%-12s %-8s %s\n' congested "$(wc -l <"$OUT/flags-congested")" \
  "first: ${FIRST_LINK:-none} after ${DETECT_MS} ms; l0>s0 named by $NODES of the $NODES_CROSSING nodes with paths over it; other links $WRONG, bad paths $BAD_PATHS"
echo "logs: $OUT" >&2
echo "{\"benchmark\":\"fabric-congestion\",\"hosts\":$HOSTS,\"rails\":2,\"leaves\":4,\"spines\":2,\"layout\":\"rail\",\"congested\":\"l0>s0 (tbf $RATE, ${QUEUE_MS} ms FIFO)\",\"load\":\"udp $LOAD, $FLOWS flows h0 rail0 -> h$DST_HOST\",\"calm_s\":$CALM,\"paths_over_link\":$CROSSING,\"congested_link_named\":$NAMED,\"congestion_detect_ms\":$DETECT_MS,\"first_link\":\"$FIRST_LINK\",\"nodes_flagging\":$NODES,\"nodes_with_paths_over_link\":$NODES_CROSSING,\"wrong_links\":$WRONG,\"bad_paths_during\":$BAD_PATHS,\"false_flags\":$FALSE_FLAGS,\"smoke\":$([[ $SMOKE == 1 ]] && echo true || echo false)}"
