#!/usr/bin/env bash
# The `nccl-plugin` benchmark (root, netlab; not a ctest entry).
#
# Failover: each scenario runs twice on a fresh 2-rail lab (rail layout) with
# one rank per host, through the same harness (nccl-harness) and plugin:
#   lockstep  a lockstep-agent per host serving the plugin's endpoint, the
#             plugin striping over both rails (it parks a stream whose path
#             the agent reports down, re-admits it after the hold-down);
#   static    no agent (LOCKSTEP_NCCL_AGENT_SOCKET=off), rail 0 only, one
#             stream per connection: what NCCL's own socket transport does
#             over static routing;
#   noagent   (ARMS="... noagent") striping over both rails without the agent:
#             the plugin's own missing-ack timeout alone.
# Scenarios (a few seconds into the run):
#   cut       h1's rail-0 link fails silently (no reset, no carrier loss), for good;
#   flap      h1's rail-0 link flaps silently: 4 x (500 ms down, 1 s up);
#   rail      the whole of rail 0 goes down (leaf l0, every link: carrier
#             loss) and comes back 3 s later;
#   alltoall  4 hosts, an all-to-all instead of the ring; h1's rail-0 link cut silently.
# Per arm: survived (every rank's result exact, no step of the collective
# longer than TIMEOUT: a hang),
# stall_ms (the slowest iteration less the median one, the worse rank),
# bytes_lost (0 when it survived: every element is checked; null when not),
# fault_stall_ms (the longest iteration running when the fault began, less
# the median before it: stall_ms on a loaded machine is often a load spike
# elsewhere in the run), park_ms (netlab's change of the link - the
# moment before its command, an upper bound - to the second
# stream parked, one per rank: detection plus reaction), parked_by (the
# agent's verdict or the plugin's missing-ack timeout),
# full_throughput_ms (from the last fault event - the link's return where
# it returns - until the first of 5 iterations in a row each within 1.25x
# the median before the fault; null if that never happened).
#
# Overhead (OVERHEAD_RUNS, default 3, alternating): no fault, an unshaped
# lab, the ring through the plugin with the agents and striping over both
# rails against one stream on rail 0 without the agent. overhead_percent is
# the striped arm's throughput loss against the single stream, median over
# runs (negative: striping was faster); cpu_percent the same for CPU
# seconds per byte.
#
# Contention (CONTENTION_RUNS, default 2, alternating): a leaf-spine lab (4
# hosts, 1 rail, 2 leaves, 2 spines, fixed hash seed) whose four leaf-spine
# links are tbf-limited to 100 Mbit/s each way; two jobs' all-to-all at once
# (A: h0-h1, B: h2-h3, each pair across the spines). Listen ports are fixed
# (LOCKSTEP_NCCL_LISTEN_PORTS) and source ports are found with `netlab path`
# so that every flow of both jobs hashes onto spine s0 (port S0) or s1 (S1):
#   ecmp     one stream per connection from S0: static ECMP put both jobs
#            on one spine;
#   striped  two streams per connection pinned to S0 and S1 (the plugin's
#            striping over ECMP paths; no agent, so no traffic control).
# Both arms use 64 KiB chunks and 4 in flight per stream
# (CONTENTION_CHUNK_BYTES, CONTENTION_WINDOW; the defaults 512 KiB x 8 give
# fewer chunks to spread over the streams). contention.throughput_ratio_vs_ecmp:
# the median aggregate (A + B) of striped over that of ecmp; per-job Mbit/s.
# p99_owd_us and rebalance_ms need the agents (clock sync, traffic control)
# and are null here.
#
# Prints a table and one JSON line.
#   e2e/bench/nccl-plugin.sh [STATE_DIR]   ($NETLAB, $LOCKSTEP_AGENT,
#   $NCCL_HARNESS, $NCCL_PLUGIN, else those of build/dev or build/ci;
#   SCENARIOS="cut flap rail alltoall", ARMS="lockstep static", ITERS,
#   TIMEOUT, OVERHEAD_RUNS=0 to skip the overhead runs)
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
[[ -n ${RECOMPUTE:-} ]] || { rm -rf "$OUT" && mkdir -p "$OUT"; }
ITERS=${ITERS:-120}
TIMEOUT=${TIMEOUT:-20}  # a step (ring step, all-to-all) longer than this is a hang
SCENARIOS=${SCENARIOS:-cut flap rail alltoall}
ARMS=${ARMS:-lockstep static}
OVERHEAD_RUNS=${OVERHEAD_RUNS:-3}
CONTENTION_RUNS=${CONTENTION_RUNS:-2}
CONTENTION_TC=${CONTENTION_TC:-1}
PIDS=()
LAB=""
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  [[ -z $LAB ]] || "$NETLAB" down --name "$LAB" >/dev/null 2>&1 || true
}
trap cleanup EXIT

now() { date +%s.%N; }

# lab_up DIR HOSTS: a 2-rail lab (rail layout) named $LAB; sets TOPO.
lab_up() {
  LAB=nb$$$RANDOM
  LAB=${LAB:0:10}
  "$NETLAB" up --name "$LAB" --hosts "$2" --rails 2 --layout rail >"$1/netlab.log" 2>&1 || fail "netlab up failed"
  TOPO=$(tail -n 1 "$1/netlab.log")
}
lab_down() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
  "$NETLAB" down --name "$LAB" >/dev/null 2>&1 || true
  LAB=""
}
ns() { echo "$LAB-h$1"; }

# agents_up DIR HOSTS [RAILS]: a lockstep-agent per host (socket DIR/h<i>.sock), all paths up.
agents_up() {
  local dir=$1 hosts=$2 nrails=${3:-2} h peers="" railnames="rail0"
  ((nrails == 2)) && railnames="rail0, rail1"
  head -c 32 /dev/urandom | base64 >"$dir/key"
  for ((h = 0; h < hosts; h++)); do
    peers+="  - {name: h$h, address: $(jq -r ".hosts[$h].rails[0].ip" "$TOPO"), hostAddress: $(jq -r ".hosts[$h].addr" "$TOPO")}"$'\n'
  done
  for ((h = 0; h < hosts; h++)); do
    printf 'nodeName: h%s\nprobeKeyFile: %s\nhealthAddr: 127.0.0.1:9610\ntimeApiAddr: 127.0.0.1:9611\nfabric:\n  rails: [%s]\npeers:\n%s' \
      "$h" "$dir/key" "$railnames" "$peers" >"$dir/h$h.yaml"
    ip netns exec "$(ns "$h")" "$AGENT" run --config "$dir/h$h.yaml" --nccl-socket "$dir/h$h.sock" >>"$dir/h$h.log" 2>&1 &
    PIDS+=($!)
  done
  all_up() {
    local h
    for ((h = 0; h < hosts; h++)); do
      ip netns exec "$(ns "$h")" "$AGENT" fabric status --addr 127.0.0.1:9611 --json |
        jq -e --argjson n $((nrails * (hosts - 1))) '[.paths[].state] | length == $n and all(. == "up")' >/dev/null || return 1
    done
  }
  wait_for "every path up" 90 all_up
}

# harness_start DIR ARM HOSTS PATTERN: the harness in the background (HPID).
harness_start() {
  local dir=$1 arm=$2 hosts=$3 pattern=$4 h sockets="" rails netns=""
  for ((h = 0; h < hosts; h++)); do
    netns+=${netns:+,}$(ns "$h")
    sockets+=${sockets:+,}$([[ $arm == lockstep ]] && echo "$dir/h$h.sock" || echo off)
  done
  case $arm in
    lockstep) rails=agent ;;
    noagent) rails=rail0,rail1 ;;  # interface names: each rank resolves its own namespace's addresses
    *) rails=rail0 ;;
  esac
  mkdir -p "$dir/timeline"
  "$HARNESS" --plugin "$PLUGIN" --ranks "$hosts" --netns "$netns" --agent-sockets "$sockets" --rails "$rails" \
    --job bench --pattern "$pattern" --elems 2097152 --iters "$ITERS" --msg-bytes 262144 --timeout-s "$TIMEOUT" --run-timeout-s 600 \
    --timeline-dir "$dir/timeline" >"$dir/harness.log" 2>&1 &
  HPID=$!
}

# result DIR RC FAULT_START FAULT_END HOSTS: DIR/result.json from the harness's output and timelines.
result() {
  local dir=$1 rc=$2 fault_start=$3 fault_end=$4 hosts=$5
  python3 - "$dir" "$rc" "$fault_start" "$fault_end" "$hosts" <<'PY'
import json, statistics, sys, glob
d, rc, fault_start, fault_end, hosts = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
oks = [json.loads(l) for l in open(d + "/harness.log") if l.startswith("{") and '"ok":true' in l]
r = {"survived": False, "stall_ms": None, "bytes_lost": None, "full_throughput_ms": None}
if rc == 0 and len(oks) == hosts:
    r["survived"] = True
    r["bytes_lost"] = 0
    r["stall_ms"] = round(max(o["max_iter_ms"] - o["median_iter_ms"] for o in oks), 1)
    r["median_iter_ms"] = round(statistics.median(o["median_iter_ms"] for o in oks), 1)
    r["bus_gbps"] = round(statistics.median(o["bus_gbps"] for o in oks), 3)
    # Time back to full throughput, the slowest rank.
    worst = 0.0
    for f in glob.glob(d + "/timeline/rank*.tsv"):
        rows = [tuple(map(float, l.split()[1:])) for l in open(f)]
        before = [ms for (t, ms) in rows if t + ms / 1e3 < fault_start]  # finished before the first event
        base = statistics.median(before) if before else statistics.median(ms for _, ms in rows)
        after = [(t, ms) for (t, ms) in rows if t >= fault_end]
        back = None
        for i in range(len(after) - 4):
            if all(ms <= 1.25 * base for _, ms in after[i:i + 5]):
                back = (after[i][0] - fault_end) * 1e3
                break
        if back is None:
            worst = None
            break
        worst = max(worst, back)
    r["full_throughput_ms"] = None if worst is None else round(worst, 1)
    # Nearer the fault than stall_ms (which on a loaded machine is often a
    # load spike far from it): the longest iteration running while the fault
    # began, less the median before it, the worse rank.
    fs = []
    for f in glob.glob(d + "/timeline/rank*.tsv"):
        rows = [tuple(map(float, l.split()[1:])) for l in open(f)]
        before = [ms for (t, ms) in rows if t + ms / 1e3 < fault_start]
        base = statistics.median(before) if before else statistics.median(ms for _, ms in rows)
        hit = [ms for (t, ms) in rows if t <= fault_start + 1.0 and t + ms / 1e3 >= fault_start]
        if hit:
            fs.append(max(hit) - base)
    r["fault_stall_ms"] = round(max(fs), 1) if fs else None
# Detection and reaction: the link's change (netlab's own stamp) to the last
# stream parked for it (either rank), whichever of the agent's verdict or the
# plugin's missing-ack timeout came first.
import re
# netlab logs "(changed at B, after A)": the link changed between A and B;
# measured from A, the earlier (an upper bound, as netlab's README asks).
changes = [float(m.group(1)) for m in re.finditer(r"changed at [0-9.]+, after ([0-9.]+)", open(d + "/netlab.log").read())]
changes = sorted(c for c in changes if c >= fault_start - 1)
parks = [float(l.split()[0]) for l in open(d + "/harness.log") if " parked: " in l and l.split()[0][0].isdigit()]
parks = [t for t in parks if changes and t >= fault_start]
r["park_ms"] = round((max(parks[:2]) - changes[0]) * 1e3, 1) if changes and parks else None
r["parked_by"] = sorted({"ack timeout" if "TCP acknowledgement" in l else "agent" for l in open(d + "/harness.log")
                          if " parked: " in l})
json.dump(r, open(d + "/result.json", "w"))
PY
}

# failover SCENARIO ARM
failover() {
  local scenario=$1 arm=$2 hosts=2 pattern=ring
  local dir=$OUT/$scenario/$arm
  mkdir -p "$dir"
  [[ $scenario == alltoall ]] && hosts=4 && pattern=alltoall
  lab_up "$dir" $hosts
  [[ $arm == lockstep ]] && agents_up "$dir" $hosts
  harness_start "$dir" "$arm" $hosts $pattern
  sleep 3
  local t0 t_end
  t0=$(now)
  case $scenario in
    cut | alltoall)
      "$NETLAB" link --name "$LAB" h1r0 down --silent >>"$dir/netlab.log" 2>&1
      t_end=$t0
      ;;
    flap)
      "$NETLAB" link --name "$LAB" h1r0 flap --count 4 --period-ms 1500 --down-ms 500 --silent >>"$dir/netlab.log" 2>&1
      t_end=$(now)
      ;;
    rail)
      "$NETLAB" link --name "$LAB" l0 down >>"$dir/netlab.log" 2>&1
      sleep 3
      "$NETLAB" link --name "$LAB" l0 up >>"$dir/netlab.log" 2>&1
      t_end=$(now)
      ;;
  esac
  echo "$t0 $t_end" >"$dir/fault_times"
  local rc=0
  wait "$HPID" || rc=$?
  result "$dir" $rc "$t0" "$t_end" $hosts
  lab_down
}

# overhead RUN ARM: no fault; the harness's throughput and CPU.
overhead() {
  local dir=$OUT/overhead/$2-$1
  mkdir -p "$dir"
  lab_up "$dir" 2
  [[ $2 == lockstep ]] && agents_up "$dir" 2
  harness_start "$dir" "$2" 2 ring
  local rc=0
  wait "$HPID" || rc=$?
  ((rc == 0)) || fail "overhead run $dir failed"
  jq -s '{bus_gbps: (map(.bus_gbps) | add / length), cpu_s: (map(.cpu_s) | add),
          bytes: (.[0].elems * 8 * .[0].iters)}' <(grep '"ok":true' "$dir/harness.log") >"$dir/result.json"
  lab_down
}

# contention_setup DIR: the leaf-spine lab, shaped; sets S0 and S1.
contention_setup() {
  local dir=$1 l
  LAB=nc$$$RANDOM
  LAB=${LAB:0:10}
  "$NETLAB" up --name "$LAB" --hosts 4 --rails 1 --leaves 2 --spines 2 --layout striped --hash-seed 1 \
    >"$dir/netlab.log" 2>&1 || fail "netlab up failed"
  TOPO=$(tail -n 1 "$dir/netlab.log")
  for l in l0s0 l0s1 l1s0 l1s1; do
    "$NETLAB" shape --name "$LAB" "$l" --rate 100mbit --dir both >>"$dir/netlab.log" 2>&1 || fail "shaping $l failed"
  done
  local ip0 ip1 ip2 ip3
  ip0=$(jq -r '.hosts[0].rails[0].ip' "$TOPO")
  ip1=$(jq -r '.hosts[1].rails[0].ip' "$TOPO")
  ip2=$(jq -r '.hosts[2].rails[0].ip' "$TOPO")
  ip3=$(jq -r '.hosts[3].rails[0].ip' "$TOPO")
  spine() { "$NETLAB" path --name "$LAB" "$1" "$2" --sport "$3" --dport "$4" --proto tcp --json | jq -r '.nodes[2]'; }
  # Rank 0 dials rank 1's listener for it (the range's first port), rank 1
  # rank 0's (the second: rank 0's first listener is its own, unused).
  all_on() {
    local sp=$2
    [[ $(spine "$ip0" "$ip1" "$sp" 40000) == "$1" && $(spine "$ip1" "$ip0" "$sp" 40001) == "$1" &&
      $(spine "$ip2" "$ip3" "$sp" 40000) == "$1" && $(spine "$ip3" "$ip2" "$sp" 40001) == "$1" ]]
  }
  S0="" S1=""
  local p
  for ((p = 30000; p < 30400; p++)); do all_on s0 $p && S0=$p && break; done
  for ((p = 31000; p < 31400; p++)); do all_on s1 $p && S1=$p && break; done
  [[ -n $S0 && -n $S1 ]] || fail "no source ports found that put every flow on one spine"
  echo "S0=$S0 S1=$S1" >"$dir/ports"
}

# contention_run DIR ARM: both jobs at once; DIR/ARM.json with per-job Mbit/s.
# Arms: ecmp (both one stream on s0), striped (both on s0 and s1), mixed (A
# striped, B one stream on s0) and mixed-tc (the same with A's ranks on the
# agents: in-band delays and traffic control).
contention_run() {
  local dir=$1 arm=$2 j pids=()
  for j in A B; do
    local n0=0 n1=1 spr=1 ports=$S0 sockets=off,off
    [[ $j == B ]] && n0=2 n1=3
    if [[ $arm == striped || ($j == A && $arm == mixed*) ]]; then spr=2 ports=$S0,$S1; fi
    [[ $j == A && $arm == mixed-tc ]] && sockets=$dir/../h0.sock,$dir/../h1.sock
    LOCKSTEP_NCCL_CHUNK_BYTES=${CONTENTION_CHUNK_BYTES:-65536} LOCKSTEP_NCCL_WINDOW=${CONTENTION_WINDOW:-4} \
      LOCKSTEP_NCCL_LISTEN_PORTS=40000-40009 \
      LOCKSTEP_NCCL_SOURCE_PORTS=$ports LOCKSTEP_NCCL_STREAMS_PER_RAIL=$spr \
      "$HARNESS" --plugin "$PLUGIN" --ranks 2 --netns "$LAB-h$n0,$LAB-h$n1" --agent-sockets "$sockets" --rails rail0 \
      --job "$j" --pattern alltoall --elems 524288 --iters 30 --msg-bytes 262144 --timeout-s 60 --run-timeout-s 300 \
      >"$dir/$arm-$j.log" 2>&1 &
    pids+=($!)
  done
  for j in "${pids[@]}"; do wait "$j" || fail "contention run $arm failed: $(tail -3 "$dir/$arm-A.log" "$dir/$arm-B.log")"; done
  local p99=null rebalance=null
  if [[ $arm == mixed-tc ]]; then
    # The job's in-band p99 one-way delay (the agents' view, worst path) and
    # the first window change of traffic control after the job started.
    p99=$(for h in 0 1; do ip netns exec "$LAB-h$h" curl -sf http://127.0.0.1:9611/nccl; done |
      jq -s '[.[].jobs[]? | select(.job == "A") | .owd_ns[]?.p99] | if length > 0 then max / 1000 | round else null end')
    local t_start t_tc
    t_start=$(grep -m1 'sockets transport' "$dir/$arm-A.log" | cut -d' ' -f1)
    t_tc=$(grep -m1 ') contended: ' "$dir/$arm-A.log" | cut -d' ' -f1 || true)
    [[ -n $t_tc && -n $t_start ]] && rebalance=$(echo "($t_tc - $t_start) * 1000" | bc -l | xargs printf '%.0f')
  fi
  jq -n --slurpfile a <(grep '"ok":true' "$dir/$arm-A.log") --slurpfile b <(grep '"ok":true' "$dir/$arm-B.log") \
    --argjson p99 "$p99" --argjson rb "$rebalance" \
    '{a_mbps: ($a | map(.bus_gbps) | add / length * 1000), b_mbps: ($b | map(.bus_gbps) | add / length * 1000)}
     | .total_mbps = .a_mbps + .b_mbps | .p99_owd_us = $p99 | .rebalance_ms = $rb' >"$dir/$arm.json"
}

contention_json=null
if [[ -z ${RECOMPUTE:-} ]] && ((CONTENTION_RUNS > 0)); then
  mkdir -p "$OUT/contention"
  contention_setup "$OUT/contention"
  for ((i = 0; i < CONTENTION_RUNS; i++)); do
    mkdir -p "$OUT/contention/$i"
    contention_run "$OUT/contention/$i" ecmp
    contention_run "$OUT/contention/$i" striped
  done
  if ((CONTENTION_TC)); then
    # The agents (clock sync: in-band delays) for traffic control.
    agents_up "$OUT/contention" 4 1
    tc_locked() {
      local h
      for h in 0 1; do
        ip netns exec "$LAB-h$h" curl -sf http://127.0.0.1:9611/time | jq -e '.state == "LOCKED"' >/dev/null || return 1
      done
    }
    wait_for "clock sync LOCKED on h0 and h1" 120 tc_locked
    for ((i = 0; i < CONTENTION_RUNS; i++)); do
      contention_run "$OUT/contention/$i" mixed
      contention_run "$OUT/contention/$i" mixed-tc
    done
  fi
  lab_down
  contention_json=$(for ((i = 0; i < CONTENTION_RUNS; i++)); do
    (cd "$OUT/contention/$i" && jq -cs '{ecmp: .[0], striped: .[1], mixed: .[2], mixed_tc: .[3]}' ecmp.json striped.json \
      $( ((CONTENTION_TC)) && echo mixed.json mixed-tc.json))
  done | jq -cs 'def med: sort | .[length / 2 | floor];
    {runs: ., throughput_ratio_vs_ecmp: ((map(.striped.total_mbps) | med) / (map(.ecmp.total_mbps) | med) * 100 | round / 100),
     ecmp_mbps: (map(.ecmp.total_mbps) | med | round), striped_mbps: (map(.striped.total_mbps) | med | round),
     mixed_mbps: (map(.mixed.total_mbps // empty) | if length > 0 then med | round else null end),
     mixed_tc_mbps: (map(.mixed_tc.total_mbps // empty) | if length > 0 then med | round else null end),
     p99_owd_us: (map(.mixed_tc.p99_owd_us // empty) | if length > 0 then med else null end),
     rebalance_ms: (map(.mixed_tc.rebalance_ms // empty) | if length > 0 then med else null end)}')
  echo "contention: $contention_json"
fi

if [[ -n ${RECOMPUTE:-} ]]; then
  # RECOMPUTE=1: the results again from a finished run's files (no lab).
  for s in $SCENARIOS; do
    for a in $ARMS; do
      d=$OUT/$s/$a
      read -r t0 t_end <"$d/fault_times"
      rc=1
      [[ $(jq -r .survived "$d/result.json") == true ]] && rc=0
      result "$d" $rc "$t0" "$t_end" "$(grep -c '"rank"' "$d/harness.log" || true)"
    done
  done
else
  for s in $SCENARIOS; do
    for a in $ARMS; do failover "$s" "$a"; done
  done
  for ((i = 0; i < OVERHEAD_RUNS; i++)); do
    overhead "$i" lockstep
    overhead "$i" static
  done
fi

printf '%-10s %-9s %-9s %-9s %-10s %-15s %-8s %-18s\n' scenario arm survived stall_ms bytes_lost fault_stall_ms park_ms full_throughput_ms
for s in $SCENARIOS; do
  for a in $ARMS; do
    r=$OUT/$s/$a/result.json
    printf '%-10s %-9s %-9s %-9s %-10s %-15s %-8s %-18s\n' "$s" "$a" "$(jq -r .survived "$r")" \
      "$(jq -r .stall_ms "$r")" "$(jq -r .bytes_lost "$r")" "$(jq -r .fault_stall_ms "$r")" "$(jq -r .park_ms "$r")" \
      "$(jq -r .full_throughput_ms "$r")"
  done
done
failover_json=$(for s in $SCENARIOS; do
  for a in $ARMS; do
    key=$s
    [[ $a == lockstep ]] || key=$s.$a
    jq -c --arg k "$key" '{($k): .}' "$OUT/$s/$a/result.json"
  done
done | jq -cs 'add // {}')
overhead_json=null
if ((OVERHEAD_RUNS > 0)); then
  overhead_json=$(for ((i = 0; i < OVERHEAD_RUNS; i++)); do
    jq -cn --slurpfile a "$OUT/overhead/lockstep-$i/result.json" --slurpfile b "$OUT/overhead/static-$i/result.json" \
      '{striped_gbps: $a[0].bus_gbps, single_gbps: $b[0].bus_gbps,
        loss: (100 * (1 - $a[0].bus_gbps / $b[0].bus_gbps)),
        cpu: (100 * ($a[0].cpu_s / $a[0].bytes) / ($b[0].cpu_s / $b[0].bytes) - 100)}'
  done | jq -cs 'def med: sort | .[length / 2 | floor];
    {runs: ., overhead_percent: (map(.loss) | med * 10 | round / 10), cpu_percent: (map(.cpu) | med * 10 | round / 10)}')
  echo "overhead: $overhead_json"
fi
jq -cn --argjson f "$failover_json" --argjson o "$overhead_json" --argjson c "$contention_json" \
  '{benchmark: "nccl-plugin", failover: $f, contention: $c, overhead_percent: ($o.overhead_percent // null),
    overhead: $o}'
