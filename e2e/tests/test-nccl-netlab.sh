#!/usr/bin/env bash
# The NCCL plugin on a netlab fabric with the node agents (no cluster; needs
# root for network namespaces): 2 hosts x 2 rails (rail layout), one
# lockstep-agent per host namespace serving the plugin's endpoint
# (--nccl-socket, one socket file per host), and nccl-harness running a ring
# all-reduce with one rank in each host namespace, the plugin taking its rails
# from the agent. While it runs, h1's rail-0 link dies silently (no reset, no
# carrier loss: TCP alone would sit in retransmission): the agents' probes say
# the path is down, the plugin parks the stream on it and moves its chunks to
# rail 1, and the all-reduce finishes with an exact result. Asserts: the
# harness passes; a rank logged the park naming the agent's verdict; h0's
# agent shows the job's connection, its failover and in-band one-way delays
# at GET /nccl. Then the same cut without the agents: the plugin's
# missing-ack timeout parks the stream and the ring finishes. Every wait is a generous upper bound; the lab, the agents and
# the harness are always torn down. $NETLAB, $LOCKSTEP_AGENT, $NCCL_HARNESS,
# $NCCL_PLUGIN (else those of $LOCKSTEP_BUILD_DIR, build/dev or build/ci).
. "$(dirname "$0")/lib.sh"
[[ $(id -u) -eq 0 ]] || fail "needs root (network namespaces)"
command -v jq >/dev/null || fail "needs jq"
command -v curl >/dev/null || fail "needs curl"
NETLAB=$(find_bin NETLAB e2e/netlab/netlab)
AGENT=$(find_bin LOCKSTEP_AGENT daemonset/lockstep-agent)
HARNESS=$(find_bin NCCL_HARNESS nccl/nccl-harness)
PLUGIN=$(find_bin NCCL_PLUGIN nccl/libnccl-net-lockstep.so)
LAB=nc$$
LAB=${LAB:0:10}
OUT=$STATE/nccl-netlab
rm -rf "$OUT" && mkdir -p "$OUT"
HOSTS=2
PIDS=()

cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  "$NETLAB" down --name "$LAB" >/dev/null 2>&1 || true
}
trap cleanup EXIT

"$NETLAB" up --name "$LAB" --hosts $HOSTS --rails 2 --layout rail >"$OUT/netlab.log" 2>&1 || fail "netlab up failed: $(cat "$OUT/netlab.log")"
TOPO=$(tail -n 1 "$OUT/netlab.log")
[[ -f $TOPO ]] || TOPO=/run/netlab/$LAB/topology.json
PPR=4  # fabric.pathsPerRail (the agent's default): paths per rail and peer
ns() { echo "$LAB-h$1"; }
addr() { jq -r ".hosts[$1].addr" "$TOPO"; }
rail0() { jq -r ".hosts[$1].rails[0].ip" "$TOPO"; }

head -c 32 /dev/urandom | base64 >"$OUT/key"
peers=""
for h in $(seq 0 $((HOSTS - 1))); do
  peers+="  - {name: h$h, address: $(rail0 "$h"), hostAddress: $(addr "$h")}"$'\n'
done
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
  ip netns exec "$(ns "$h")" "$AGENT" run --config "$OUT/h$h.yaml" --nccl-socket "$OUT/h$h.sock" >>"$OUT/h$h.log" 2>&1 &
  PIDS+=($!)
done

status() { ip netns exec "$(ns "$1")" "$AGENT" fabric status --addr 127.0.0.1:9611 --json; }
nccl() { ip netns exec "$(ns "$1")" curl -sf http://127.0.0.1:9611/nccl; }
all_paths_up() {
  local h
  for h in $(seq 0 $((HOSTS - 1))); do
    status "$h" | jq -e --argjson n $((2 * PPR)) '[.paths[].state] | length == $n and all(. == "up")' >/dev/null || return 1
  done
}
wait_for "every agent's fabric status answers" 30 status 0
wait_for "every path up on every host" 60 all_paths_up
wait_for "h1's NCCL endpoint" 10 test -S "$OUT/h1.sock"
# Fabric time (the chunks' stamps) needs clock sync LOCKED at both ends.
locked() { ip netns exec "$(ns "$1")" curl -sf http://127.0.0.1:9611/time | jq -e '.state == "LOCKED"'; }
wait_for "clock sync LOCKED on h0" 90 locked 0
wait_for "clock sync LOCKED on h1" 90 locked 1

# A ring all-reduce long enough to cut a link in the middle of it. The
# plugin's own missing-ack timeout is off here: this run is about the agent's
# verdicts (the second run below is about the timeout).
# The cut waits for the ring to be iterating (the harness's per-iteration
# timeline) and the run is long enough that it is still running then: an
# unloaded machine does ~50 iterations a second, a loaded one far fewer.
iters_done() { [[ -f $1/rank0.tsv ]] && wc -l <"$1/rank0.tsv" || echo 0; }
iterating() { (($(iters_done "$1") >= 10)); }
mkdir -p "$OUT/timeline" "$OUT/timeline-noagent"
LOCKSTEP_NCCL_ACK_TIMEOUT_MS=0 "$HARNESS" --plugin "$PLUGIN" --ranks 2 --netns "$(ns 0),$(ns 1)" --agent-sockets "$OUT/h0.sock,$OUT/h1.sock" \
  --rails agent --job e2e-ring --elems 2097152 --iters 600 --msg-bytes 262144 --timeout-s 150 --run-timeout-s 280 \
  --timeline-dir "$OUT/timeline" >"$OUT/harness.log" 2>&1 &
HPID=$!
PIDS+=($HPID)
job_running() { nccl 0 | jq -e '.jobs[] | select(.job == "e2e-ring" and .connections >= 2)'; }
wait_for "the job's connections at h0's agent" 30 job_running
grep -q "node agent at $OUT/h0.sock: $((2 * PPR)) paths, 2 rails" "$OUT/harness.log" || fail "rank 0 did not find its agent: $(head -5 "$OUT/harness.log")"
wait_for "the ring iterating" 60 iterating "$OUT/timeline"

"$NETLAB" link --name "$LAB" h1r0 down --silent >>"$OUT/netlab.log" 2>&1
at_cut=$(iters_done "$OUT/timeline")
parked() { grep -q "parked: the node agent says its path to $(addr 1) is down" "$OUT/harness.log"; }
wait_for "the stream on h1's dead rail parked" 30 parked
wait "$HPID" || fail "the all-reduce failed across the link cut: $(tail -20 "$OUT/harness.log")"
grep -q '"ok":true' "$OUT/harness.log" || fail "no rank reported a result"
((at_cut < 600)) || fail "the ring had finished before the cut ($at_cut iterations): nothing was tested"
failovers() { nccl 0 | jq -e '.jobs[] | select(.job == "e2e-ring") | .failovers >= 1'; }
wait_for "h0's agent counted the failover" 10 failovers
nccl 0 | jq -e '.jobs[] | select(.job == "e2e-ring") | .owd_ns | length >= 1' >/dev/null ||
  fail "no in-band one-way delay at h0's agent: $(nccl 0)"
"$NETLAB" link --name "$LAB" h1r0 up >>"$OUT/netlab.log" 2>&1

# Without the agents: the same cut, found by the plugin's missing-ack timeout
# alone (before it, this run hung: TCP retransmits into a black hole).
"$HARNESS" --plugin "$PLUGIN" --ranks 2 --netns "$(ns 0),$(ns 1)" --agent-sockets off,off --rails rail0,rail1 \
  --job e2e-ring-noagent --elems 2097152 --iters 600 --msg-bytes 262144 --timeout-s 30 --run-timeout-s 200 \
  --timeline-dir "$OUT/timeline-noagent" >"$OUT/harness-noagent.log" 2>&1 &
HPID=$!
PIDS+=($HPID)
wait_for "the ring (no agents) iterating" 60 iterating "$OUT/timeline-noagent"
"$NETLAB" link --name "$LAB" h1r0 down --silent >>"$OUT/netlab.log" 2>&1
at_cut=$(iters_done "$OUT/timeline-noagent")
wait "$HPID" || fail "without the agents the all-reduce failed across the link cut: $(tail -20 "$OUT/harness-noagent.log")"
((at_cut < 600)) || fail "without the agents the ring had finished before the cut ($at_cut iterations): nothing was tested"
[[ $(grep -c '"ok":true' "$OUT/harness-noagent.log") -eq 2 ]] || fail "without the agents: not every rank reported"
grep -q "parked: no TCP acknowledgement" "$OUT/harness-noagent.log" ||
  fail "without the agents no stream was parked by the missing-ack timeout: $(grep -i park "$OUT/harness-noagent.log")"
pass "ring all-reduce exact across a silent link cut; the agent's verdict parked the stream ($(grep -o '"bus_gbps":[0-9.]*' "$OUT/harness.log" | head -1)), and without the agents the missing-ack timeout did"
