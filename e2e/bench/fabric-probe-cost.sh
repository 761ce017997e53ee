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
#        [--napi-threads] [--no-base]
#
# Two phases on the same lab. "base": first every agent runs without the
# config's `fabric:` section (clock sync only; same peers, ports, key and
# probe settings); once clock sync has run a few seconds (every agent's
# metrics show coded pairs, then 5 s) each agent's CPU, all threads, and its
# rails' napi time are sampled over --seconds (with the same --load, if
# any), and the agents are stopped. "fabric": the agents with `fabric:`,
# sampled as described below. The probing cost is the MARGINAL one, fabric
# minus base: clock sync and the prober share the agent's threads and
# wake-ups (clock sync's sends run on the prober's thread, "ls-fabric"), so
# no thread's time is the probing's alone (host_probe_percent below counts
# that thread whole), and what probing costs is what the `fabric:` section
# adds to the same agent on the same lab.
# marginal_agent_percent = cpu_exact_percent - base_cpu_exact_percent (all
# threads, exact); with --napi-threads also marginal_napi_percent =
# rx_napi_percent - base_rx_napi_percent; probe_marginal_percent is their
# sum (the agent's alone without --napi-threads), and
# probe_marginal_percent_mean its mean over the agents. The two phases run
# one after the other, so the difference also carries the machine's drift
# between them (on a shared VM: compare several runs). --no-base skips the
# base phase (and these fields), for speed.
#
# CPU is read two ways: user and system ticks (/proc/.../stat: sampled at
# the scheduler tick, 250 Hz here, so a thread that runs ~100 us per wake-up
# is charged a whole 4 ms tick now and then: +-10-15% over 30 s) and the
# exact run time the scheduler accounted (/proc/.../schedstat, ns; same scope,
# in-context softirq included, as this kernel has no IRQ_TIME_ACCOUNTING).
# Shares and per-packet figures ("exact") are from the latter.
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
# --napi-threads: every veth of the lab gets GRO (so veth runs NAPI) and
# threaded NAPI: a packet a thread sends stops being its work where a real
# NIC's would (the driver queues it, the wire and the switches do the rest).
# The routers' forwarding runs in their own napi/* kernel threads (the
# switches' work, not the host's); each host's receive path (IP, UDP, the
# socket queue) runs in the napi threads of its rail devices, which are
# counted as the host's. These also receive the clock-sync packets (rail 0)
# and ARP, so the probes are charged the napi time in proportion to their
# share of the packets the rails received (rx_packets; the probes sent to
# the host, from the other agents' metrics): "host" (host_probe_percent) =
# prober thread + that share of its rails' napi threads; host_upper_percent
# charges them all of it (the figure before 2026-11-26 18:30 UTC).
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
NAPI_THREADS=0
BASE=1  # 0: --no-base, the fabric phase alone
PERF=0  # 1: perf record agent h0, 2: strace -c it (both slow it down)
while (($#)); do
  case $1 in
    --seconds) SECONDS_RUN=$2; shift 2 ;;
    --hosts) HOSTS=$2; shift 2 ;;
    --interval-ms) INTERVAL_MS=$2; shift 2 ;;
    --load) LOAD=$2; shift 2 ;;
    --plain-tbf) PLAIN=1; shift ;;
    --one-hop) ONE_HOP=1; shift ;;
    --napi-threads) NAPI_THREADS=1; shift ;;
    --no-base) BASE=0; shift ;;
    --misses) MISSES=$2; shift 2 ;;
    --queue-ms) QUEUE_MS=$2; shift 2 ;;
    --perf) PERF=1; shift ;;
    --strace) PERF=2; shift ;;
    -h|--help) sed -n 2,74p "$0"; exit 0 ;;
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
BASE_PIDS=()  # the base phase's agents (and load), until it stops them
cleanup() {
  local p
  for p in "${BASE_PIDS[@]}" "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${BASE_PIDS[@]}" "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
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
declare -a NAPI_PIDS  # per host: the napi kthreads of its rail devices
if ((NAPI_THREADS)); then
  command -v ethtool >/dev/null || { echo "--napi-threads needs ethtool (scripts/setup installs it)" >&2; exit 1; }
  napi_on() {  # napi_on NS: GRO + threaded NAPI on every veth of namespace NS
    local i
    for i in $(ip -n "$1" -o link show type veth | awk -F': ' '{sub(/@.*/, "", $2); print $2}'); do
      # veth hands a packet to the peer's NAPI only if the sending device
      # does no TSO (else the packet takes the backlog, in the sender's
      # softirq): TSO off, GRO (the NAPI) on, on every link of the lab.
      ip netns exec "$1" ethtool -K "$i" tso off gro on >/dev/null
      ip netns exec "$1" sh -c "echo 1 >/sys/class/net/$i/threaded"
    done
  }
  napi_list() { ps -e -o pid=,comm= | awk '$2 ~ /^napi\// {print $1}' | sort; }
  before=$(napi_list)
  for ns in $(ip netns list | awk '{print $1}' | grep "^$LAB-" | grep -v "^$LAB-h[0-9]*$"); do napi_on "$ns"; done
  for h in $(seq 0 $((HOSTS - 1))); do  # one host at a time: its new kthreads are its rails'
    mark=$(napi_list)
    napi_on "$LAB-h$h"
    NAPI_PIDS[h]=$(comm -13 <(echo "$mark") <(napi_list) | tr '\n' ' ')
    [[ -n ${NAPI_PIDS[$h]// } ]] || { echo "no napi thread appeared for h$h's rails" >&2; exit 1; }
  done
  # Switches do not share the hosts' cores, and a host's receive softirq
  # runs above its threads: the lab's napi threads run SCHED_FIFO (1), so a
  # busy machine delays the emulated fabric no more than the prober.
  for p in $(comm -13 <(echo "$before") <(napi_list)); do chrt -f -p 1 "$p"; done
fi
head -c 32 /dev/urandom | base64 >"$OUT/key"
peers=""
for h in $(seq 0 $((HOSTS - 1))); do
  peers+="  - {name: h$h, address: $(jq -r ".hosts[$h].rails[0].ip" "$TOPO"), hostAddress: $(jq -r ".hosts[$h].addr" "$TOPO")}"$'\n'
done
declare -a APID
config() {  # config H FABRIC: host H's agent.yaml, with the fabric: section if FABRIC is 1
  printf 'nodeName: h%s\nprobeKeyFile: %s\nhealthAddr: 127.0.0.1:9610\ntimeApiAddr: 127.0.0.1:9611\n' "$1" "$OUT/key"
  if (($2)); then printf 'fabric:\n  rails: [rail0, rail1]\n'; fi
  if [[ -n $INTERVAL_MS || -n $MISSES ]]; then printf 'probe:\n'; fi
  if [[ -n $INTERVAL_MS ]]; then printf '  pathIntervalMs: %s\n' "$INTERVAL_MS"; fi
  if [[ -n $MISSES ]]; then printf '  missThreshold: %s\n' "$MISSES"; fi
  printf 'peers:\n%s' "$peers"
}
# start_agents PREFIX FABRIC LIST: one agent per host ($OUT/PREFIXhH.yaml and
# .log), pids in APID and appended to the array named LIST (killed on exit).
start_agents() {
  local h
  local -n agent_pids=$3
  for h in $(seq 0 $((HOSTS - 1))); do
    config "$h" "$2" >"$OUT/$1h$h.yaml"
    ip netns exec "$LAB-h$h" "$AGENT" run --config "$OUT/$1h$h.yaml" >"$OUT/$1h$h.log" 2>&1 &
    APID[h]=$!
    agent_pids+=($!)
  done
}
start_load() {  # start_load LIST: --load's sink and sender for one window, pids appended to LIST
  local -n load_pids=$1
  [[ -n $LOAD ]] || return 0
  H1=$(jq -r '.hosts[1].rails[0].ip' "$TOPO")
  ip netns exec "$LAB-h1" "$(dirname "$NETLAB")/netlab-loadgen" sink --bind "$H1:9999" --duration $((SECONDS_RUN + 2)) >/dev/null 2>&1 &
  load_pids+=($!)
  ip netns exec "$LAB-h0" "$(dirname "$NETLAB")/netlab-loadgen" send --to "$H1:9999" \
    --bind "$(jq -r '.hosts[0].rails[0].ip' "$TOPO")" --rate "$LOAD" --duration "$SECONDS_RUN" >/dev/null 2>&1 &
  load_pids+=($!)
}
gone() {  # gone PID: the process has exited (a zombie not yet reaped counts)
  local st
  st=$(sed 's/^.*) //' /proc/"$1"/stat 2>/dev/null | cut -d' ' -f1) || return 0
  [[ -z $st || $st == Z ]]
}
stop_pids() {  # stop_pids PID...: SIGTERM, 10 s to exit (then SIGKILL), reaped
  local p
  for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "$@"; do
    for _ in $(seq 1 100); do gone "$p" && break; sleep 0.1; done
    gone "$p" || { echo "pid $p ignored SIGTERM for 10 s: SIGKILL" >&2; kill -KILL "$p" 2>/dev/null || true; }
    wait "$p" 2>/dev/null || true
  done
}
# The agents' ports (probe 7311, fabric 7312 and its urgent port 7313,
# health 9610, time API 9611) and the load sink's (9999 on h1).
ports_free() {
  local h
  for h in $(seq 0 $((HOSTS - 1))); do
    [[ -z $(ip netns exec "$LAB-h$h" ss -Hlntu '( sport = :7311 or sport = :7312 or sport = :7313 or sport = :9610 or sport = :9611 or sport = :9999 )') ]] || return 1
  done
}

# The agent's pid is the ip-netns-exec child (exec replaces it).
CLK=$(getconf CLK_TCK)
# threads PID: "name utime stime run_ns runs" per thread name (ticks, ticks,
# exact ns, times it was scheduled in: its wake-ups, preemptions aside)
threads() {
  local t
  for t in /proc/"$1"/task/*; do
    read -r ns _ runs <"$t/schedstat" 2>/dev/null || continue
    awk -v c="$(cat "$t/comm")" -v ns="$ns" -v runs="$runs" \
      '{sub(/^.*\) /, ""); print c, $12, $13, ns, runs}' "$t/stat" 2>/dev/null
  done | awk '{u[$1]+=$2; s[$1]+=$3; x[$1]+=$4; r[$1]+=$5} END {for (n in u) printf "%s %d %d %.0f %d\n", n, u[n], s[n], x[n], r[n]}'
}
napi_ns() {  # napi_ns H: exact run time (ns) of host H's rail napi threads
  local p sum=0
  for p in ${NAPI_PIDS[$1]:-}; do sum=$((sum + $(cut -d' ' -f1 /proc/"$p"/schedstat))); done
  echo "$sum"
}
snapshot() {  # snapshot I: per host, its agent's (APID) metrics, threads, napi time and rails' rx packets
  local h
  for h in $(seq 0 $((HOSTS - 1))); do
    threads "${APID[$h]}" >"$OUT/t$1-h$h"
    napi_ns "$h" >"$OUT/n$1-h$h"
    ip netns exec "$LAB-h$h" curl -s http://127.0.0.1:9610/metrics >"$OUT/m$1-h$h"
    ip netns exec "$LAB-h$h" sh -c 'cat /sys/class/net/rail*/statistics/rx_packets' |
      awk '{s += $1} END {print s}' >"$OUT/r$1-h$h"
  done
}
# delta A B H: per thread name of host H's agent, "name utime stime run_ns
# runs" of snapshot B minus snapshot A.
delta() {
  awk 'NR == FNR {u[$1] = $2; s[$1] = $3; x[$1] = $4; r[$1] = $5; next} {print $1, $2 - u[$1], $3 - s[$1], $4 - x[$1], $5 - r[$1]}' \
    "$OUT/t$1-h$3" "$OUT/t$2-h$3"
}
alive() {  # alive: every agent in APID still runs
  local h
  for h in $(seq 0 $((HOSTS - 1))); do
    gone "${APID[$h]}" && { echo "agent h$h exited during the window; logs in $OUT" >&2; return 1; }
  done
  return 0
}

# Phase "base": clock sync only (no fabric: section), so that the probing is
# charged what the fabric section adds to the same agent.
declare -a BASE_CPU BASE_NAPI
if ((BASE)); then
  AGENT_ID=$(stat -L -c '%d %i %Y %s' "$AGENT")  # the fabric phase must run the same binary
  start_agents base- 0 BASE_PIDS
  clock_running() {  # every agent's metrics answer and show coded pairs with its peers
    local h
    for h in $(seq 0 $((HOSTS - 1))); do
      ip netns exec "$LAB-h$h" curl -sf http://127.0.0.1:9610/metrics 2>/dev/null |
        awk '/^lockstep_probe_pairs_total\{direction="inbound"\}/ {s += $NF} END {exit !(s > 0)}' || return 1
    done
  }
  for _ in $(seq 1 300); do clock_running && break; sleep 0.2; done
  clock_running || { echo "base phase: clock sync did not start; logs in $OUT" >&2; exit 1; }
  sleep 5
  snapshot b0
  BT0=$(date +%s.%N)
  start_load BASE_PIDS
  sleep "$SECONDS_RUN"
  BT1=$(date +%s.%N)
  snapshot b1
  alive
  BASE_LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
  BW=$(awk -v t0="$BT0" -v t1="$BT1" 'BEGIN {print t1 - t0}')
  for h in $(seq 0 $((HOSTS - 1))); do
    delta b0 b1 "$h" >"$OUT/d-base-h$h"
    BASE_CPU[h]=$(awk -v w="$BW" '{x += $4} END {printf "%.6f", 100*x/1e9/w}' "$OUT/d-base-h$h")
    BASE_NAPI[h]=$(awk -v a="$(cat "$OUT/nb0-h$h")" -v b="$(cat "$OUT/nb1-h$h")" -v w="$BW" 'BEGIN {printf "%.6f", 100*(b-a)/1e9/w}')
  done
  stop_pids "${BASE_PIDS[@]}"
  BASE_PIDS=()
  # Same ports for the fabric phase: the base agents' sockets must be gone.
  for _ in $(seq 1 100); do ports_free && break; sleep 0.1; done
  ports_free || { echo "base phase: ports still bound after its agents exited" >&2; exit 1; }
fi

# Phase "fabric": the agents with the fabric: section.
if ((BASE)) && [[ $(stat -L -c '%d %i %Y %s' "$AGENT") != "$AGENT_ID" ]]; then
  echo "$AGENT changed during the base phase (rebuilt?): fabric - base would compare two binaries" >&2; exit 1
fi
start_agents "" 1 PIDS
up() {  # every path of every agent up
  local h
  for h in $(seq 0 $((HOSTS - 1))); do
    ip netns exec "$LAB-h$h" "$AGENT" fabric status --addr 127.0.0.1:9611 --json 2>/dev/null |
      jq -e '(.paths | length > 0) and all(.paths[]; .state == "up")' >/dev/null || return 1
  done
}
for _ in $(seq 1 300); do up && break; sleep 0.2; done
up || { echo "paths did not come up; logs in $OUT" >&2; exit 1; }
sleep 5  # as the base phase: both start sampling ~5 s into their agents' clock sync

# Probe packets (probes + ack-only: lockstep_fabric_probes_answered_total)
# in snapshot I that agent H sent (sent_by), or that the others sent to H
# (sent_to: what H's rails received).
sent_by() {
  awk '/^lockstep_fabric_probes_(sent|answered)_total/ {s += $NF} END {printf "%d\n", s}' "$OUT/m$1-h$2"
}
sent_to() {
  local h s=0
  for h in $(seq 0 $((HOSTS - 1))); do
    ((h == $2)) && continue
    s=$((s + $(awk -v p="peer=\"h$2\"" '/^lockstep_fabric_probes_(sent|answered)_total/ && index($0, p) {s += $NF}
                END {printf "%d\n", s}' "$OUT/m$1-h$h")))
  done
  echo "$s"
}
snapshot 0
T0=$(date +%s.%N)
start_load PIDS
if ((PERF == 2)); then
  timeout -s INT "$SECONDS_RUN" strace -c -f -p "${APID[0]}" -o "$OUT/strace.txt" >/dev/null 2>&1 || true
elif ((PERF)); then
  perf record -g -o "$OUT/perf.data" -p "${APID[0]}" -- sleep "$SECONDS_RUN" >/dev/null 2>&1 || true
else
  sleep "$SECONDS_RUN"
fi
T1=$(date +%s.%N)
snapshot 1
alive
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
# Paths declared down during the window (no link failed: false alarms).
DOWNS=$(cat "$OUT"/h*.log | jq -r --argjson t0 "$T0" --argjson t1 "$T1" \
  'select(.msg == "fabric path state changed" and .to == "down" and .ts >= $t0 and .ts <= $t1) | .path' 2>/dev/null | wc -l)

printf '%-4s %-24s %8s %8s %9s %9s %12s %8s %8s\n' host thread "user %" "sys %" "ticks %" "exact %" "exact us/pk" "runs/s" "us/run"
json="{\"benchmark\":\"fabric-probe-cost\",\"hosts\":$HOSTS,\"seconds\":$SECONDS_RUN,\"load\":\"${LOAD:-none}\",\"plain_tbf\":$PLAIN,\"one_hop\":$ONE_HOP,\"napi_threads\":$NAPI_THREADS,\"queue_ms\":$QUEUE_MS,\"false_downs\":$DOWNS,\"loadavg\":\"$LOADAVG\",\"agents\":["
sep=""
MARGINALS=""
W=$(awk -v t0="$T0" -v t1="$T1" 'BEGIN {print t1 - t0}')
for h in $(seq 0 $((HOSTS - 1))); do
  pk=$(( $(sent_by 1 "$h") - $(sent_by 0 "$h") ))
  napi=$(( $(cat "$OUT/n1-h$h") - $(cat "$OUT/n0-h$h") ))
  rx=$(( $(cat "$OUT/r1-h$h") - $(cat "$OUT/r0-h$h") ))  # every packet its rails received
  rxp=$(( $(sent_to 1 "$h") - $(sent_to 0 "$h") ))     # of which probes
  # The napi threads' share that is the probes': theirs of the packets
  # received (the rest is clock sync and ARP), at most all of it.
  share=$(awk -v a="$rxp" -v b="$rx" 'BEGIN {s = (b > 0 ? a / b : 1); printf "%.4f", (s > 1 ? 1 : s)}')
  # Per thread name: the differences of "name utime stime run_ns runs" between t0 and t1.
  delta 0 1 "$h" >"$OUT/d-h$h"
  awk -v h="h$h" -v clk="$CLK" -v w="$W" -v pk="$pk" -v napi="$napi" -v share="$share" -v has_napi="$NAPI_THREADS" '
    {printf "%-4s %-24s %8.2f %8.2f %9.2f %9.2f %12.2f %8.1f %8.1f\n", h, $1, 100*$2/clk/w, 100*$3/clk/w, 100*($2+$3)/clk/w,
       100*$4/1e9/w, (pk > 0 ? $4/1e3/pk : 0), $5/w, ($5 > 0 ? $4/1e3/$5 : 0)}
    END {if (has_napi) {
       printf "%-4s %-24s %8s %8s %9s %9.2f %12.2f\n", h, "napi (its rails), all", "-", "-", "-",
         100*napi/1e9/w, (pk > 0 ? napi/1e3/pk : 0)
       printf "%-4s %-24s %8s %8s %9s %9.2f %12.2f\n", h, sprintf("napi, probes (%.0f%%)", 100*share), "-", "-", "-",
         100*share*napi/1e9/w, (pk > 0 ? share*napi/1e3/pk : 0)}}' "$OUT/d-h$h"
  if ((BASE)); then  # base phase, this phase (agent: all threads) and the difference
    awk -v h="h$h" -v w="$W" -v napi="$napi" -v bc="${BASE_CPU[h]}" -v bn="${BASE_NAPI[h]}" -v has_napi="$NAPI_THREADS" '
      {x += $4}
      END {
        c = 100*x/1e9/w; n = 100*napi/1e9/w
        if (has_napi) {
          printf "%-4s %-28s agent %7.3f%%   rails\047 napi %7.3f%%\n", h, "base (clock sync only):", bc, bn
          printf "%-4s %-28s agent %7.3f%%   rails\047 napi %7.3f%%\n", h, "fabric (with fabric:):", c, n
          printf "%-4s %-28s agent %+7.3f%% + napi %+7.3f%% = probes %.3f%% of a core\n", h, "marginal (fabric - base):", c-bc, n-bn, c-bc+n-bn
        } else {
          printf "%-4s %-28s agent %7.3f%%\n", h, "base (clock sync only):", bc
          printf "%-4s %-28s agent %7.3f%%\n", h, "fabric (with fabric:):", c
          printf "%-4s %-28s agent %+7.3f%% = probes %.3f%% of a core\n", h, "marginal (fabric - base):", c-bc, c-bc
        }}' "$OUT/d-h$h"
  fi
  line=$(awk -v clk="$CLK" -v w="$W" -v pk="$pk" -v napi="$napi" -v share="$share" -v rx="$rx" -v has_napi="$NAPI_THREADS" \
             -v has_base="$BASE" -v bc="${BASE_CPU[h]:-0}" -v bn="${BASE_NAPI[h]:-0}" '
    {u += $2; s += $3; x += $4} $1 == "ls-fabric" {pr = $4; prun = $5}
    END {
      printf "{\"cpu_percent\":%.2f,\"user_percent\":%.2f,\"sys_percent\":%.2f,\"cpu_exact_percent\":%.3f,", 100*(u+s)/clk/w, 100*u/clk/w, 100*s/clk/w, 100*x/1e9/w
      printf "\"prober_exact_percent\":%.3f,\"prober_runs_per_s\":%.1f,\"packets_per_s\":%.0f,\"cpu_us_per_packet\":%.2f,\"user_us_per_packet\":%.2f,\"prober_us_per_packet\":%.2f", 100*pr/1e9/w, prun/w, pk/w, 1e6*(u+s)/clk/pk, 1e6*u/clk/pk, pr/1e3/pk
      if (has_napi) printf ",\"rx_packets_per_s\":%.0f,\"rx_probe_share\":%.3f,\"rx_napi_percent\":%.3f,\"host_probe_percent\":%.3f,\"host_upper_percent\":%.3f",
        rx/w, share, 100*napi/1e9/w, 100*(pr+share*napi)/1e9/w, 100*(pr+napi)/1e9/w
      if (has_base) {  # marginal: this phase minus the base phase (clock sync only)
        ma = 100*x/1e9/w - bc; mn = 100*napi/1e9/w - bn
        printf ",\"base_cpu_exact_percent\":%.3f", bc
        if (has_napi) printf ",\"base_rx_napi_percent\":%.3f,\"marginal_agent_percent\":%.3f,\"marginal_napi_percent\":%.3f,\"probe_marginal_percent\":%.3f", bn, ma, mn, ma + mn
        else printf ",\"marginal_agent_percent\":%.3f,\"probe_marginal_percent\":%.3f", ma, ma
      }
      printf "}"}' "$OUT/d-h$h")
  echo "h$h all: $line"
  json+="$sep$line"
  sep=","
  if ((BASE)); then MARGINALS+=" $(jq -r .probe_marginal_percent <<<"$line")"; fi
done
tail=""
if ((BASE)); then
  MEAN=$(awk '{for (i = 1; i <= NF; i++) s += $i} END {printf "%.3f", (NF ? s / NF : 0)}' <<<"$MARGINALS")
  echo "base phase (clock sync only): ${BW}s window, load average $BASE_LOADAVG; probe marginal (fabric - base), mean over agents: $MEAN% of a core"
  tail=",\"base_loadavg\":\"$BASE_LOADAVG\",\"probe_marginal_percent_mean\":$MEAN"
fi
echo "paths declared down in the window: $DOWNS (load: ${LOAD:-none}, plain tbf: $PLAIN)"
echo "load average: $LOADAVG; logs: $OUT"
((PERF == 2)) && cat "$OUT/strace.txt"
((PERF == 1)) && echo "perf data: $OUT/perf.data (perf report -i $OUT/perf.data)"
echo "$json]$tail}"
