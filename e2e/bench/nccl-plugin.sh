#!/usr/bin/env bash
# The `nccl-plugin` benchmark, first scenario (root, netlab): failover of a
# ring all-reduce through the plugin when a link fails silently, with the
# node agents (the plugin parks the stream on the agent's verdict) and
# without them (LOCKSTEP_NCCL_AGENT_SOCKET=off: the first slice, socket errors
# only). 2 hosts x 2 rails, one rank per host; h1's rail-0 link goes down
# --silent a few seconds into the run. Per arm: survived (exact result within
# the timeout), stall_ms (the slowest iteration less the median one),
# bytes_lost (0 when the result is exact: every element is checked). Prints a
# table and one JSON line. Not a ctest entry.
#   e2e/bench/nccl-plugin.sh [STATE_DIR]   ($NETLAB, $LOCKSTEP_AGENT,
#   $NCCL_HARNESS, $NCCL_PLUGIN, else those of build/dev or build/ci)
# Left for later: flapping links, a whole rail down, the contention scenario
# (tbf spine links, fixed ECMP seed) and the overhead scenario.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
STATE=${1:-/tmp/lockstep-bench-nccl}
. "$REPO/e2e/tests/lib.sh"
[[ $(id -u) -eq 0 ]] || fail "needs root (network namespaces)"
NETLAB=$(find_bin NETLAB e2e/netlab/netlab)
AGENT=$(find_bin LOCKSTEP_AGENT daemonset/lockstep-agent)
HARNESS=$(find_bin NCCL_HARNESS nccl/nccl-harness)
PLUGIN=$(find_bin NCCL_PLUGIN nccl/libnccl-net-lockstep.so)
OUT=$STATE/nccl-plugin
rm -rf "$OUT" && mkdir -p "$OUT"
ITERS=${ITERS:-120}
TIMEOUT=${TIMEOUT:-60}
PIDS=()
LAB=""
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  [[ -z $LAB ]] || "$NETLAB" down --name "$LAB" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# run_arm NAME AGENTS(1|0): one lab, agents (or none), the harness, a silent cut.
run_arm() {
  local name=$1 with_agents=$2 h
  LAB=nb$$${name:0:2}
  LAB=${LAB:0:10}
  local dir=$OUT/$name
  mkdir -p "$dir"
  "$NETLAB" up --name "$LAB" --hosts 2 --rails 2 --layout rail >"$dir/netlab.log" 2>&1 || fail "netlab up failed"
  local topo
  topo=$(tail -n 1 "$dir/netlab.log")
  ns() { echo "$LAB-h$1"; }
  addr() { jq -r ".hosts[$1].addr" "$topo"; }
  rail() { jq -r ".hosts[$1].rails[$2].ip" "$topo"; }
  local sockets=off,off rails
  if ((with_agents)); then
    head -c 32 /dev/urandom | base64 >"$dir/key"
    local peers=""
    for h in 0 1; do peers+="  - {name: h$h, address: $(rail "$h" 0), hostAddress: $(addr "$h")}"$'\n'; done
    for h in 0 1; do
      printf 'nodeName: h%s\nprobeKeyFile: %s\nhealthAddr: 127.0.0.1:9610\ntimeApiAddr: 127.0.0.1:9611\nfabric:\n  rails: [rail0, rail1]\npeers:\n%s' \
        "$h" "$dir/key" "$peers" >"$dir/h$h.yaml"
      ip netns exec "$(ns "$h")" "$AGENT" run --config "$dir/h$h.yaml" --nccl-socket "$dir/h$h.sock" >>"$dir/h$h.log" 2>&1 &
      PIDS+=($!)
    done
    all_up() {
      local h
      for h in 0 1; do
        ip netns exec "$(ns "$h")" "$AGENT" fabric status --addr 127.0.0.1:9611 --json |
          jq -e '[.paths[].state] | length == 2 and all(. == "up")' >/dev/null || return 1
      done
    }
    wait_for "every path up" 60 all_up
    sockets="$dir/h0.sock,$dir/h1.sock"
    rails=agent
  else
    rails=rail0,rail1  # interface names: each rank resolves its own namespace's addresses
  fi
  "$HARNESS" --plugin "$PLUGIN" --ranks 2 --netns "$(ns 0),$(ns 1)" --agent-sockets "$sockets" --rails "$rails" \
    --job bench --elems 2097152 --iters "$ITERS" --msg-bytes 262144 --timeout-s "$TIMEOUT" >"$dir/harness.log" 2>&1 &
  local hpid=$!
  sleep 3
  "$NETLAB" link --name "$LAB" h1r0 down --silent >>"$dir/netlab.log" 2>&1
  local rc=0
  wait "$hpid" || rc=$?
  local survived=false stall=null
  if ((rc == 0)) && [[ $(grep -c '"ok":true' "$dir/harness.log") -eq 2 ]]; then
    survived=true
    stall=$(grep '"ok":true' "$dir/harness.log" | jq -s 'map(.max_iter_ms - .median_iter_ms) | max | . * 10 | round / 10')
  fi
  # Exact results are checked element by element: nothing lost when it survived.
  echo "{\"survived\":$survived,\"stall_ms\":$stall,\"bytes_lost\":$([[ $survived == true ]] && echo 0 || echo null)}" >"$dir/result.json"
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
  "$NETLAB" down --name "$LAB" >/dev/null 2>&1 || true
  LAB=""
}

run_arm agent 1
run_arm no-agent 0
printf '%-34s %-9s %-9s %-10s\n' scenario survived stall_ms bytes_lost
for arm in agent no-agent; do
  r=$OUT/$arm/result.json
  printf '%-34s %-9s %-9s %-10s\n' "silent link cut ($arm)" "$(jq -r .survived "$r")" "$(jq -r .stall_ms "$r")" \
    "$(jq -r .bytes_lost "$r")"
done
jq -cn --slurpfile a "$OUT/agent/result.json" --slurpfile b "$OUT/no-agent/result.json" \
  '{benchmark: "nccl-plugin", failover: {silent_cut: $a[0], silent_cut_no_agent: $b[0]}}'
