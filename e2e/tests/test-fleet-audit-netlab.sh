#!/usr/bin/env bash
# The fleet audit's back-end network checks over a real fabric (no cluster;
# needs root for network namespaces): a netlab lab of 4 hosts x 2 rails,
# rail-optimized (rail r on leaf r), with two faults seeded:
#  - h2's rail 0 cabled to leaf l1 (`netlab up --miswire h2r0:l1`): the
#    fabric routes to it where it is, so only the topology shows it;
#  - h1's rail-0 link shaped to 2 Mbit/s in both directions under 2.6 Mbit/s of
#    load each way: a slow link (every delay through it in milliseconds).
# One standalone lockstep-agent per host probes every rail x peer; then
# `lockstep-agent audit --fabric ... --trace` runs on every host (path state
# and one-way delays from the running agent, TTL-limited UDP traces out of
# every rail to every peer's host address and rail addresses over 4 source
# ports) and `lockstep-agent audit judge` judges the four hosts as a pool.
# Asserts: h2 fails backend.rail_leaf for rail0 (and nothing but topology),
# h1 fails backend.latency_* on rail0 (and nothing but its rail0 pairs), h0
# and h3 pass (their pairs towards h1's link attributed to it), and
# the routes name the leaves and both spines.
# $NETLAB, $LOCKSTEP_AGENT: the binaries (else the build dir's).
. "$(dirname "$0")/lib.sh"
[[ $(id -u) -eq 0 ]] || fail "needs root (network namespaces)"
command -v jq >/dev/null || fail "needs jq"
NETLAB=$(find_bin NETLAB e2e/netlab/netlab)
AGENT=$(find_bin LOCKSTEP_AGENT daemonset/lockstep-agent)
LAB=fa$$
LAB=${LAB:0:10}
OUT=$STATE/fleet-audit-netlab
rm -rf "$OUT" && mkdir -p "$OUT"
HOSTS=${AUDIT_HOSTS:-4}  # e2e/bench/audit.sh sets more
PPR=4  # fabric.pathsPerRail (the agent's default): paths per rail and peer
((HOSTS >= 4)) || fail "AUDIT_HOSTS must be at least 4"
PIDS=()

cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  "$NETLAB" down --name "$LAB" >/dev/null 2>&1 || true
}
trap cleanup EXIT

"$NETLAB" up --name "$LAB" --hosts $HOSTS --rails 2 --leaves 2 --spines 2 --layout rail --miswire h2r0:l1 \
  >"$OUT/netlab.log" 2>&1 || fail "netlab up failed: $(cat "$OUT/netlab.log")"
TOPO=$(tail -n 1 "$OUT/netlab.log")
[[ -f $TOPO ]] || TOPO=/run/netlab/$LAB/topology.json
ns() { echo "$LAB-h$1"; }
addr() { jq -r ".hosts[$1].addr" "$TOPO"; }
railip() { jq -r ".hosts[$1].rails[$2].ip" "$TOPO"; }
gw() { jq -r ".leaves[$1].gateway" "$TOPO"; }
# Routers and hosts answer every probe (Linux rate-limits ICMP errors per
# destination: 6, then 1/s; a switch's control plane polices them too, the
# tracer paces its probes, but 4 hosts tracing at once would be limited here).
for n in $(jq -r '.hosts[].ns, .leaves[].ns, .spines[].ns' "$TOPO"); do
  ip netns exec "$n" sysctl -qw net.ipv4.icmp_ratelimit=0
done

# The slow link (loaded once every path is up): h1r0 at 2 Mbit/s both ways, overloaded at 2.6 Mbit/s each way:
# the data queue stays full, so the bucket is always empty and every probe
# (CS6, ahead of the data, netlab/README) waits for the data packet tbf holds
# (1000 B: 4 ms): milliseconds each way, short of the 18.4 ms that would lose
# it (at 1 Mbit/s with twice the load the paths went down: a dead link, not a
# slow one).
"$NETLAB" shape --name "$LAB" h1r0 --rate 2mbit --dir both >>"$OUT/netlab.log" 2>&1 || fail "netlab shape failed"
# A front end every host has (a fake root: the netlab hosts have no default
# route; the audit's sysfs checks are covered by daemonset_audit_tests).
ROOT=$OUT/root
mkdir -p "$ROOT/proc/net" "$ROOT/sys/class/net/eth0"
printf 'Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\neth0\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\neth0\t0001A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n' >"$ROOT/proc/net/route"
echo up >"$ROOT/sys/class/net/eth0/operstate"
echo 1500 >"$ROOT/sys/class/net/eth0/mtu"

head -c 32 /dev/urandom | base64 >"$OUT/key"
peers=""
for h in $(seq 0 $((HOSTS - 1))); do
  peers+="  - {name: h$h, address: $(railip "$h" 0), hostAddress: $(addr "$h")}"$'\n'
done
# Default probing: idle paths ride idle ticks (~100 ms), and their peers ack them at
# their own idle tick; the round trips leave that hold out (ack_held, fabric_probe.h).
for h in $(seq 0 $((HOSTS - 1))); do
  cat >"$OUT/h$h.yaml" <<YAML
nodeName: h$h
probeKeyFile: $OUT/key
healthAddr: 127.0.0.1:9610
timeApiAddr: 127.0.0.1:9611
fabric:
  rails: [rail0, rail1]
  pathsPerRail: $PPR
peers:
$peers
YAML
  ip netns exec "$(ns "$h")" "$AGENT" run --config "$OUT/h$h.yaml" >>"$OUT/h$h.log" 2>&1 &
  PIDS+=($!)
done

status() { ip netns exec "$(ns "$1")" "$AGENT" fabric status --addr 127.0.0.1:9611 --json; }
all_paths_up() {
  local h
  for h in $(seq 0 $((HOSTS - 1))); do
    status "$h" | jq -e --argjson n $(((HOSTS - 1) * 2 * PPR)) '[.paths[].state] | length == $n and all(. == "up" or . == "suspect")' >/dev/null || return 1
  done
}
wait_for "every agent's fabric status answers" 30 status 0
wait_for "every path up on every host" 60 all_paths_up
"$NETLAB" loadgen sink --ns "$(ns 0)" --bind "$(railip 0 0):9100" --duration 120 >"$OUT/sink0.json" 2>&1 &
PIDS+=($!)
"$NETLAB" loadgen sink --ns "$(ns 1)" --bind "$(railip 1 0):9100" --duration 120 >"$OUT/sink1.json" 2>&1 &
PIDS+=($!)
sleep 0.3
"$NETLAB" loadgen send --ns "$(ns 1)" --bind "$(railip 1 0)" --to "$(railip 0 0):9100" --rate 2600kbit --size 1000 \
  --on-ms 1000 --off-ms 1 --duration 120 >"$OUT/load10.json" 2>&1 &
PIDS+=($!)
"$NETLAB" loadgen send --ns "$(ns 0)" --bind "$(railip 0 0)" --to "$(railip 1 0):9100" --rate 2600kbit --size 1000 \
  --on-ms 1000 --off-ms 1 --duration 120 >"$OUT/load01.json" 2>&1 &
PIDS+=($!)
sleep 8  # the agents' delay windows fill with the slow link's samples
pass "4 agents: every path up (h2r0 miswired onto l1, h1r0 slow)"

# Round trips of the paths that do not cross h1's slow rail-0 link: the network's
# (hundreds of microseconds here), though most are idle paths whose acks the peer
# held to its idle tick (up to ~110 ms; when the wire cut the hold at 65.535 ms,
# their p99 read 20-42 ms).
for h in $(seq 0 $((HOSTS - 1))); do status "$h" >"$OUT/status-h$h.json"; done
jq -s '[.[] | .node as $n | .paths[] | select(.rtt_p99_ns != null)
        | select(.rail != 0 or ($n != "h1" and .peer != "h1"))
        | {node: $n, rail, peer, rtt_p99_ns, rtt_samples}]' "$OUT"/status-h*.json >"$OUT/rtt.json"
RTT_MAX_US=$(jq '[.[].rtt_p99_ns] | max / 1000 | floor' "$OUT/rtt.json")
jq -e --argjson n $(((HOSTS * (HOSTS - 1) * 2 - (HOSTS - 1) * 2) * PPR)) 'length == $n' "$OUT/rtt.json" >/dev/null ||
  fail "paths without round trips: $(jq -c . "$OUT/rtt.json")"
jq -e 'all(.rtt_p99_ns < 5000000)' "$OUT/rtt.json" >/dev/null ||
  fail "round trips of healthy paths include held acks: $(jq -c '[.[] | select(.rtt_p99_ns >= 5000000)]' "$OUT/rtt.json")"
pass "healthy paths' round-trip p99 at most $RTT_MAX_US us ($(jq length "$OUT/rtt.json") paths, idle ticks on)"

T0=$(date +%s.%N)
for h in $(seq 0 $((HOSTS - 1))); do
  targets=()
  for p in $(seq 0 $((HOSTS - 1))); do
    ((p == h)) && continue
    targets+=(--trace-target "h$p=$(railip "$p" 0)" --trace-target "h$p=$(railip "$p" 1)")
  done
  # CPU of the audit process (user and system seconds) in h$h.time.
  (
    TIMEFORMAT='%3U %3S'
    { time ip netns exec "$(ns "$h")" "$AGENT" audit --root "$ROOT" --no-nvml --node "h$h" --fabric 127.0.0.1:9611 \
      --trace --trace-ports 4 "${targets[@]}" --json >"$OUT/h$h.json" 2>"$OUT/h$h.audit.err"; } 2>"$OUT/h$h.time"
  ) &
done
wait_audits() { ! pgrep -f "$AGENT audit --root $ROOT" >/dev/null; }
wait_for "every host's audit finished" 60 wait_audits
T1=$(date +%s.%N)
for h in $(seq 0 $((HOSTS - 1))); do
  jq -e '.checks | length > 0' "$OUT/h$h.json" >/dev/null || fail "h$h's audit wrote no checks: $(cat "$OUT/h$h.audit.err")"
done
FILES=()
for h in $(seq 0 $((HOSTS - 1))); do FILES+=("$OUT/h$h.json"); done
"$AGENT" audit judge --json "${FILES[@]}" >"$OUT/judged.json" && fail "the judge passed a fleet with two faults"
"$AGENT" audit judge "${FILES[@]}" >"$OUT/judged.txt" || true
SECONDS_AUDIT=$(echo "$T1 - $T0" | bc)
pass "audit of $HOSTS hosts with traces in $SECONDS_AUDIT s"
# The numbers e2e/bench/audit.sh reports (written before the assertions).
jq -c --argjson hosts "$HOSTS" --arg secs "$SECONDS_AUDIT" --arg l1 "$(gw 1)" \
  --argjson cpu "$(cat "$OUT"/h*.time | awk '{s += $1 + $2} END {printf "%.3f", s / NR}')" \
  --argjson bytes "$(for f in "${FILES[@]}"; do jq -c .checks "$f" | wc -c; done | sort -n | tail -1)" '
  (map({(.node): .}) | add) as $v |
  {nodes: $hosts, audit_seconds: ($secs | tonumber),
   bad_node_flagged: {miswired_rail: ($v.h2.checks | any(.id == "backend.rail_leaf" and .subject == "rail0@" + $l1 and .verdict == "Fail")),
                      slow_link: ($v.h1.checks | any((.id | startswith("backend.latency")) and (.subject | startswith("rail0/")) and .verdict == "Fail"))},
   false_flags: [.[] | select(.node != "h1" and .node != "h2" and .verdict == "Fail")] | length,
   agent_audit_cpu_seconds_mean: $cpu, node_audit_status_bytes_max: $bytes,
   congested_link_named: null, congestion_detect_ms: null}' "$OUT/judged.json" >"$OUT/result.json"

failed() { jq -r --arg n "$1" '.[] | select(.node == $n) | [.checks[] | select(.verdict == "Fail") | .id + "[" + (.subject // "") + "]"] | join(" ")' "$OUT/judged.json"; }
verdict() { jq -r --arg n "$1" '.[] | select(.node == $n) | .verdict' "$OUT/judged.json"; }
show() { echo "h0: $(failed h0) | h1: $(failed h1) | h2: $(failed h2) | h3: $(failed h3)"; }

L0=$(gw 0)
L1=$(gw 1)
# Miswired: h2's rail0 on l1, which serves rail1.
[[ $(verdict h2) == Fail ]] || fail "h2 (rail0 miswired onto l1) not flagged: $(show)"
[[ " $(failed h2) " == *" backend.rail_leaf[rail0@$L1] "* ]] || fail "h2's backend.rail_leaf[rail0@$L1] did not fail: $(show)"
for c in $(failed h2); do
  [[ $c == backend.rail_leaf* || $c == "backend.rail_leaves[]" ]] || fail "h2 fails $c besides its topology: $(show)"
done
jq -e --arg l "$L1" '.[] | select(.node == "h2") | .checks[] | select(.id == "backend.rail_leaf" and .subject == "rail0@" + $l) | .expected == "rail1"' "$OUT/judged.json" >/dev/null ||
  fail "h2's rail_leaf failure does not expect rail1"
pass "miswired rail flagged: h2 $(failed h2)"

# Slow link: h1's rail0 pairs.
[[ $(verdict h1) == Fail ]] || fail "h1 (slow rail0 link) not flagged: $(show)"
[[ $(failed h1) == *"backend.latency_p50[rail0/"* ]] || fail "h1's rail0 delays not flagged: $(show)"
for c in $(failed h1); do
  # An overloaded link also loses a probe now and then: its paths may be
  # recovering (connectivity) as well as slow; both are h1's rail0.
  [[ $c == backend.latency_p*"[rail0/"* || $c == "backend.connectivity[rail0/"* ]] ||
    fail "h1 fails $c besides its slow link: $(show)"
done
slow=$(jq -r '.[] | select(.node == "h1") | .checks[] | select(.id == "backend.latency_p50" and .subject == "rail0/h0") | .observed' "$OUT/judged.json")
pass "slow link flagged: h1 $(failed h1) (rail0/h0 p50 $slow)"

# The good hosts, and the attribution of their pairs towards h1's link.
for h in $(seq 0 $((HOSTS - 1))); do
  ((h == 1 || h == 2)) && continue
  [[ $(verdict "h$h") == Pass ]] || fail "good host h$h flagged: $(show)"
done
jq -e '.[] | select(.node == "h0") | .checks[] | select(.id == "backend.connectivity" and .subject == "rail0/h1") | .verdict == "Pass"' "$OUT/judged.json" >/dev/null || fail "h0's rail0/h1 path not up"
# Topology as seen: h0's rail0 on l0, rail1 on l1, both spines crossed.
jq -e --arg a "$L0" --arg b "$L1" '.[] | select(.node == "h0") | [.checks[] | select(.id == "backend.rail_leaf") | .subject] | sort == (["rail0@" + $a, "rail1@" + $b] | sort)' "$OUT/judged.json" >/dev/null ||
  fail "h0's rails are not seen on their leaves: $(jq -c '.[] | select(.node == "h0") | [.checks[] | select(.id == "backend.rail_leaf")]' "$OUT/judged.json")"
jq -e '.[] | select(.node == "h0") | [.checks[] | select(.id == "backend.spines") | .observed] == ["2", "2"]' "$OUT/judged.json" >/dev/null ||
  fail "h0's cross-leaf traces did not see both spines: $(jq -c '.[] | select(.node == "h0") | [.checks[] | select(.id == "backend.spines")]' "$OUT/judged.json")"
route=$(jq -r --arg t "$(railip 3 1)" '.[] | select(.node == "h0") | .checks[] | select(.id == "backend.route" and .subject == "rail0/h3@" + $t) | .observed' "$OUT/judged.json")
# leaf (its host-port gateway), either spine, l1 (its spine-facing address), target
[[ $route == "$L0 > {"*","*"} > {"*","*"} > $(railip 3 1)" ]] || fail "h0 rail0 -> h3 rail1 not traced over both spines: $route"
pass "good hosts (all but h1 and h2) pass; h0 rail0 -> h3 rail1: $route"
