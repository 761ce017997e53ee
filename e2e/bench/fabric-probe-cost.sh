#!/usr/bin/env bash
# fabric-probe-cost: what the agents' fabric probing costs, measured so that
# the figure survives a loaded machine. A netlab lab like the fabric
# benchmark's (4 hosts x 2 rails, 200 Mbit/s host links, 5 ms queues), one
# standalone lockstep-agent per host, no workload. Once every path is up it
# samples, over --seconds, per agent and per thread (/proc/<pid>/task/*/stat):
# user and system CPU seconds, and from the agent's metrics the probe packets
# it sent (probes, each carrying its ack, + ack-only packets; symmetric
# probing, fabric_probe.h). It prints CPU per second of wall time (share of
# a core) and CPU microseconds per probe packet (robust to load: a loaded
# machine stretches wall time, not the work per packet), and one JSON line.
#
#   sudo e2e/bench/fabric-probe-cost.sh [--seconds 20] [--hosts 4] [--interval-ms 10]
#        [--misses 3] [--load 250mbit [--plain-tbf] [--queue-ms 5]] [--one-hop]
#
# --load: during the window, UDP at that rate from h0 (rail0) to h1 (rail0),
# over the 200 Mbit/s link: a congested queue that h0's probes share. The
# paths declared down in the window are false alarms. --plain-tbf: shape with
# a single-FIFO tbf as before the CS6 priority band (netlab's shapers now
# have one), to compare. --queue-ms: the host links' queue (tbf latency).
#
# In netlab a packet's whole trip through the emulated fabric (veths, leaf and
# spine namespaces, shapers) runs in the sending thread's softirq and is
# charged to its system time, so "sys" overstates the cost on real NICs; the
# script also reports a "null" arm: the same packet rate sent by a plain UDP
# sender (netlab-loadgen is not used; `ping -f` would differ), so skip it and
# compare with the user time, which is the agent's own work.
# --one-hop: the smallest fabric netlab builds instead (`--layout rail`: rail r
# of every host on leaf r, so a probe crosses one router namespace and no
# spine; no shapers), which leaves the sender charged with one emulated hop
# instead of three hops and six shaper passes: closer to what a host pays on
# real NICs, where switches forward. No --load with it (nothing to congest).
# $NETLAB and $LOCKSTEP_AGENT override the binaries (default build/dev).
set -euo pipefail
SECONDS_RUN=20
HOSTS=4
INTERVAL_MS=
LOAD=
QUEUE_MS=5
PLAIN=0
ONE_HOP=0
MISSES=
PERF=0  # 1: perf record agent h0, 2: strace -c it (both slow it down)
while (($#)); do
  case $1 in
    --seconds) SECONDS_RUN=$2; shift 2 ;;
    --hosts) HOSTS=$2; shift 2 ;;
    --interval-ms) INTERVAL_MS=$2; shift 2 ;;
    --load) LOAD=$2; shift 2 ;;
    --plain-tbf) PLAIN=1; shift ;;
    --one-hop) ONE_HOP=1; shift ;;
    --misses) MISSES=$2; shift 2 ;;
    --queue-ms) QUEUE_MS=$2; shift 2 ;;
    --perf) PERF=1; shift ;;
    --strace) PERF=2; shift ;;
    -h|--help) sed -n 2,20p "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
((ONE_HOP)) && [[ -n $LOAD ]] && { echo "--one-hop has no shapers: --load would congest nothing" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "needs root (network namespaces)" >&2; exit 1; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NETLAB=${NETLAB:-$ROOT/build/dev/e2e/netlab/netlab}
AGENT=${LOCKSTEP_AGENT:-$ROOT/build/dev/daemonset/lockstep-agent}
LAB=fpc$$
LAB=${LAB:0:10}
OUT=$(mktemp -d /tmp/fabric-probe-cost.XXXXXX)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  "$NETLAB" down --name "$LAB" >/dev/null 2>&1 || true
}
trap cleanup EXIT

if ((ONE_HOP)); then
  "$NETLAB" up --name "$LAB" --hosts "$HOSTS" --rails 2 --layout rail >"$OUT/netlab.log" 2>&1
else
  "$NETLAB" up --name "$LAB" --hosts "$HOSTS" --rails 2 --link-rate 200mbit >"$OUT/netlab.log" 2>&1
fi
TOPO=$(tail -n 1 "$OUT/netlab.log")
for h in $(seq 0 $((HOSTS - 1))); do
  ((ONE_HOP)) && break
  for r in 0 1; do
    "$NETLAB" shape --name "$LAB" "h${h}r$r" --rate 200mbit --latency "${QUEUE_MS}ms" --dir both >/dev/null
    if ((PLAIN)); then  # one FIFO, as netlab shaped before the priority band
      ip netns exec "$LAB-h$h" tc qdisc replace dev "rail$r" root pfifo_fast
      ip netns exec "$LAB-h$h" tc qdisc replace dev "rail$r" root handle 1: tbf rate 200mbit burst 25000 latency "${QUEUE_MS}ms"
      leaf=$(jq -r ".links[] | select(.name == \"h${h}r$r\") | .b.ns" "$TOPO")
      lif=$(jq -r ".links[] | select(.name == \"h${h}r$r\") | .b.if" "$TOPO")
      ip netns exec "$leaf" tc qdisc replace dev "$lif" root pfifo_fast
      ip netns exec "$leaf" tc qdisc replace dev "$lif" root handle 1: tbf rate 200mbit burst 25000 latency "${QUEUE_MS}ms"
    fi
  done
done
head -c 32 /dev/urandom | base64 >"$OUT/key"
peers=""
for h in $(seq 0 $((HOSTS - 1))); do
  peers+="  - {name: h$h, address: $(jq -r ".hosts[$h].rails[0].ip" "$TOPO"), hostAddress: $(jq -r ".hosts[$h].addr" "$TOPO")}"$'\n'
done
declare -a APID
for h in $(seq 0 $((HOSTS - 1))); do
  {
    printf 'nodeName: h%s\nprobeKeyFile: %s\nhealthAddr: 127.0.0.1:9610\ntimeApiAddr: 127.0.0.1:9611\nfabric:\n  rails: [rail0, rail1]\n' "$h" "$OUT/key"
    if [[ -n $INTERVAL_MS || -n $MISSES ]]; then printf 'probe:\n'; fi
    if [[ -n $INTERVAL_MS ]]; then printf '  pathIntervalMs: %s\n' "$INTERVAL_MS"; fi
    if [[ -n $MISSES ]]; then printf '  missThreshold: %s\n' "$MISSES"; fi
    printf 'peers:\n%s' "$peers"
  } >"$OUT/h$h.yaml"
  ip netns exec "$LAB-h$h" "$AGENT" run --config "$OUT/h$h.yaml" >"$OUT/h$h.log" 2>&1 &
  APID[$h]=$!
  PIDS+=($!)
done
up() {  # every path of every agent up
  local h
  for h in $(seq 0 $((HOSTS - 1))); do
    ip netns exec "$LAB-h$h" "$AGENT" fabric status --addr 127.0.0.1:9611 --json 2>/dev/null |
      jq -e '(.paths | length > 0) and all(.paths[]; .state == "up")' >/dev/null || return 1
  done
}
for _ in $(seq 1 300); do up && break; sleep 0.2; done
up || { echo "paths did not come up; logs in $OUT" >&2; exit 1; }
sleep 2

# The agent's pid is the ip-netns-exec child (exec replaces it).
CLK=$(getconf CLK_TCK)
threads() {  # threads PID: "name utime stime" per thread, ticks
  local t
  for t in /proc/"$1"/task/*; do
    awk -v c="$(cat "$t/comm")" '{sub(/^.*\) /, ""); print c, $12, $13}' "$t/stat" 2>/dev/null | tr ' ' '\t' | sed 's/\t/ /g'
  done | awk '{u[$1]+=$2; s[$1]+=$3} END {for (n in u) print n, u[n], s[n]}'
}
packets() {  # packets sent by agent H: probes + ack-only (lockstep_fabric_probes_answered_total)
  ip netns exec "$LAB-h$1" curl -s http://127.0.0.1:9610/metrics |
    awk '/^lockstep_fabric_probes_(sent|answered)_total/ {s += $NF} END {printf "%d\n", s}'
}
for h in $(seq 0 $((HOSTS - 1))); do
  threads "${APID[$h]}" >"$OUT/t0-h$h"
  packets "$h" >"$OUT/p0-h$h"
done
T0=$(date +%s.%N)
if [[ -n $LOAD ]]; then
  H1=$(jq -r '.hosts[1].rails[0].ip' "$TOPO")
  ip netns exec "$LAB-h1" "$(dirname "$NETLAB")/netlab-loadgen" sink --bind "$H1:9999" --duration $((SECONDS_RUN + 2)) >/dev/null 2>&1 &
  PIDS+=($!)
  ip netns exec "$LAB-h0" "$(dirname "$NETLAB")/netlab-loadgen" send --to "$H1:9999" \
    --bind "$(jq -r '.hosts[0].rails[0].ip' "$TOPO")" --rate "$LOAD" --duration "$SECONDS_RUN" >/dev/null 2>&1 &
  PIDS+=($!)
fi
if ((PERF == 2)); then
  timeout -s INT "$SECONDS_RUN" strace -c -f -p "${APID[0]}" -o "$OUT/strace.txt" >/dev/null 2>&1 || true
elif ((PERF)); then
  perf record -g -o "$OUT/perf.data" -p "${APID[0]}" -- sleep "$SECONDS_RUN" >/dev/null 2>&1 || true
else
  sleep "$SECONDS_RUN"
fi
T1=$(date +%s.%N)
for h in $(seq 0 $((HOSTS - 1))); do
  threads "${APID[$h]}" >"$OUT/t1-h$h"
  packets "$h" >"$OUT/p1-h$h"
done
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
# Paths declared down during the window (no link failed: false alarms).
DOWNS=$(cat "$OUT"/h*.log | jq -r --argjson t0 "$T0" --argjson t1 "$T1" \
  'select(.msg == "fabric path state changed" and .to == "down" and .ts >= $t0 and .ts <= $t1) | .path' 2>/dev/null | wc -l)

printf '%-4s %-18s %10s %10s %10s %12s\n' host thread "user %" "sys %" "total %" "us/packet"
json="{\"benchmark\":\"fabric-probe-cost\",\"hosts\":$HOSTS,\"seconds\":$SECONDS_RUN,\"load\":\"${LOAD:-none}\",\"plain_tbf\":$PLAIN,\"one_hop\":$ONE_HOP,\"queue_ms\":$QUEUE_MS,\"false_downs\":$DOWNS,\"loadavg\":\"$LOADAVG\",\"agents\":["
sep=""
for h in $(seq 0 $((HOSTS - 1))); do
  pk=$(( $(cat "$OUT/p1-h$h") - $(cat "$OUT/p0-h$h") ))
  while read -r name u s; do
    read -r _ u0 s0 < <(grep "^$name " "$OUT/t0-h$h" || echo "$name 0 0")
    awk -v h="h$h" -v n="$name" -v du=$((u - u0)) -v ds=$((s - s0)) -v clk="$CLK" -v t0="$T0" -v t1="$T1" -v pk="$pk" \
      'BEGIN {w = t1 - t0; printf "%-4s %-18s %10.2f %10.2f %10.2f %12.2f\n", h, n, 100*du/clk/w, 100*ds/clk/w, 100*(du+ds)/clk/w, (pk > 0 ? 1e6*(du+ds)/clk/pk : 0)}'
  done <"$OUT/t1-h$h"
  read -r tu ts < <(awk '{u += $2; s += $3} END {print u, s}' "$OUT/t1-h$h")
  read -r tu0 ts0 < <(awk '{u += $2; s += $3} END {print u, s}' "$OUT/t0-h$h")
  line=$(awk -v du=$((tu - tu0)) -v ds=$((ts - ts0)) -v clk="$CLK" -v t0="$T0" -v t1="$T1" -v pk="$pk" \
    'BEGIN {w = t1 - t0; printf "{\"cpu_percent\":%.2f,\"user_percent\":%.2f,\"sys_percent\":%.2f,\"packets_per_s\":%.0f,\"cpu_us_per_packet\":%.2f,\"user_us_per_packet\":%.2f}", 100*(du+ds)/clk/w, 100*du/clk/w, 100*ds/clk/w, pk/w, 1e6*(du+ds)/clk/pk, 1e6*du/clk/pk}')
  echo "h$h all: $line"
  json+="$sep$line"
  sep=","
done
echo "paths declared down in the window: $DOWNS (load: ${LOAD:-none}, plain tbf: $PLAIN)"
echo "load average: $LOADAVG; logs: $OUT"
((PERF == 2)) && cat "$OUT/strace.txt"
((PERF == 1)) && echo "perf data: $OUT/perf.data (perf report -i $OUT/perf.data)"
echo "$json]}"
