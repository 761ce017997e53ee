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
#   sudo e2e/bench/fabric-probe-cost.sh --paths 6,32,128 [--seconds 15]
#        [--load 100mbit] [--link-mbit 200] [--interval-ms 14] [--no-base]
#        [--clock-sync on,off] [--tiering on,off,all,tick0] [--detect] [--paths-per-rail 4]
#
# --tiering (with --paths): the probe tiers of each phase (default on):
#   on   tiered probing as shipped (probe.idlePathIntervalMs 500, trafficAware:
#        a peer is active while its TCP connections move bytes; the sweep has
#        no TCP traffic, so every path of h0 is idle: probed in the rotation);
#   off  probe.idlePathIntervalMs: 0, every path every interval (the design
#        before tiering: the baseline);
#   all  trafficAware: false, every peer active: its pinned path fast (the
#        worst case for a node that talks to every peer);
#   tick0 tiered, probe.idleTickMs: 0: the prober ticks every pathIntervalMs
#        whatever its tiers (tiered probing before idle ticks, 2026-11-29).
# "on" is tiered probing with idle ticks (probe.idleTickMs 100): a node with
# no fast path wakes every ~100 ms and its idle probes carry the slow flag.
# Each mode runs the clock-sync phases; rows carry "tiering", and h0's
# fast_paths / idle_paths (lockstep_fabric_probe_tier_paths) at the window's
# end, fast_paths_at_start at its start (a path promoted by a loss stays fast
# for 10 s: more probes than the idle rotation's in the window).
# --detect (with --paths): after the last scale's tiering-on phase, a TCP
# flow from h0 to h1..h3 (1 kB every 50 ms: active peers), then a silent
# link failure (netlab link hXrR down --silent) of h1..h3's pinned rails
# (active paths) and of a rail of h4..h6 that is not their pin (idle
# paths), one at a time: detection = h0's "down" log line minus the time
# before netlab's command (detect_active_ms, detect_idle_ms in the JSON).
# --paths: the scale sweep (issue 22 section 3), the probing cost measured
# directly on one agent. Paths per agent = peers x rails (a path is a rail
# to the same rail of a peer, fabric::EnumeratePaths): 6 = 3 peers x 2 rails,
# 32 = 4 x 8, 128 = 16 x 8 (production: 16 peers x 8 rails); or PEERSxRAILS.
# Per scale, one lab (--layout rail, one leaf per rail, one spine: a probe
# crosses one router namespace; threaded NAPI as --napi-threads; no
# shapers) of PEERS + 1 hosts. The measured agent h0 lists every host; each
# peer h1..hN runs the same agent binary listing h0 and itself, so it probes
# and acks h0's paths on every rail (and clock-syncs with h0) but not the
# other peers': h0 sends and receives exactly what it would in a full mesh,
# and the 2-core machine does not carry 16 more agents' meshes. Phases
# (agents started afresh for each, every path of h0 up, then 5 s):
#   base: clock sync only (no fabric:), quiet: the old marginal figure
#         (agent with fabric minus this) on the clock_sync true, quiet row;
#   clock sync on, fabric on: a quiet window, then a loaded one;
#   clock sync off (clockSync.enabled false on every agent), fabric on:
#         quiet, then loaded. The prober runs alone on its thread.
# (--clock-sync on or off runs only that one of the last two.)
# Load: UDP (netlab-loadgen, 1200 B) at --load (default 100mbit) each way
# between h0 and h1 on rail 0, so h0's send path and its rail0 receive path
# carry data while it probes. Per window, of h0 only, from schedstat (exact
# ns): prober_cpu_percent = the ls-fabric thread (with clock sync on it also
# carries clock sync's sends and reads: one loop); rx_path_percent = h0's
# rails' napi threads times the probes' share of the packets they received
# (probes sent to h0, from the peers' metrics, over the rails' rx_packets);
# host_probe_percent = their sum; agent_cpu_percent = all its threads. Wire:
# tx/rx bytes of h0's rail devices (/sys/class/net/rail*/statistics, L2:
# Ethernet header included) over the window, quiet windows only (null under
# load): wire_kbps_per_node (sent), and per rail each way with the 24 B a
# packet of preamble, FCS and gap a real wire adds, as a share of
# --link-mbit (wire_link_percent). With clock sync on the rails also carry
# clock sync's packets (rail 0), so the probes' own figure is the clock
# sync off row. udp_rcvbuf_errors: h0's UDP datagrams dropped for a full
# socket buffer in the window (/proc/net/snmp; _lab: since the lab was built).
# paths_up_at_start/_end: h0's paths up (a prober that cannot keep its paths
# up is measured anyway after 45 s). Paths per agent: h0's metrics
# (path_state series). A table,
# then one JSON line with "rows". The 1-minute load average with each row.
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
SECONDS_SET=0
HOSTS=4
INTERVAL_MS=
LOAD=
QUEUE_MS=5
PLAIN=0
ONE_HOP=0
MISSES=
NAPI_THREADS=0
BASE=1  # 0: --no-base, the fabric phase alone
PATHS_LIST=  # --paths: the scale sweep
LINK_MBIT=200  # --paths: the link rate the wire figures are a share of
CLOCK_MODES=on,off  # --paths: the clock-sync phases to run (on, off or both)
TIER_MODES=on  # --paths: the probe tiers (on, off, all, tick0; see above)
PPR=4  # --paths-per-rail: the agents' fabric.pathsPerRail (their default, api::kFabricPathsPerRail)
DETECT=0
PERF=0  # 1: perf record agent h0, 2: strace -c it (both slow it down)
while (($#)); do
  case $1 in
    --seconds) SECONDS_RUN=$2; SECONDS_SET=1; shift 2 ;;
    --hosts) HOSTS=$2; shift 2 ;;
    --interval-ms) INTERVAL_MS=$2; shift 2 ;;
    --load) LOAD=$2; shift 2 ;;
    --plain-tbf) PLAIN=1; shift ;;
    --one-hop) ONE_HOP=1; shift ;;
    --napi-threads) NAPI_THREADS=1; shift ;;
    --no-base) BASE=0; shift ;;
    --misses) MISSES=$2; shift 2 ;;
    --paths) PATHS_LIST=$2; shift 2 ;;
    --link-mbit) LINK_MBIT=$2; shift 2 ;;
    --clock-sync) CLOCK_MODES=$2; shift 2 ;;
    --tiering) TIER_MODES=$2; shift 2 ;;
    --paths-per-rail) PPR=$2; shift 2 ;;
    --detect) DETECT=1; shift ;;
    --queue-ms) QUEUE_MS=$2; shift 2 ;;
    --perf) PERF=1; shift ;;
    --strace) PERF=2; shift ;;
    -h|--help) sed -n "2,$(($(grep -n '^set -euo' "$0" | cut -d: -f1) - 1))p" "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ -n $PATHS_LIST ]]; then
  [[ $SECONDS_SET == 1 ]] || SECONDS_RUN=15
  ((ONE_HOP || NAPI_THREADS || PLAIN || PERF)) && { echo "--paths builds its own labs (one hop, threaded NAPI): no --one-hop, --napi-threads, --plain-tbf, --perf, --strace" >&2; exit 2; }
fi
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
cleanup() {
  local p
  for p in "${BASE_PIDS[@]}" "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${BASE_PIDS[@]}" "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  "$NETLAB" down --name "$LAB" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# --paths: the scale sweep (see the header). One lab per scale, the measured
# agent h0 and its peers h1..hN (the same binary, each probing h0 alone).
if [[ -n $PATHS_LIST ]]; then
  # scale_of P: "PEERS RAILS" for a path count, or for "PEERSxRAILS"
  scale_of() {
    case $1 in
      *x*) echo "${1%x*} ${1#*x}" ;;
      6) echo "3 2" ;;
      32) echo "4 8" ;;
      128) echo "16 8" ;;
      *) if (($1 % 8 == 0)); then echo "$(($1 / 8)) 8"; elif (($1 % 2 == 0)); then echo "$(($1 / 2)) 2"; else echo "$1 1"; fi ;;
    esac
  }
  command -v ethtool >/dev/null || { echo "--paths needs ethtool (scripts/setup installs it)" >&2; exit 1; }
  SWEEP_LOAD=${LOAD:-100mbit}
  : >"$OUT/rows"
  # sconfig H FABRIC CLOCK [TIER]: agent.yaml of host H (star: h0 lists every host,
  # the others h0 and themselves)
  sconfig() {
    local r rails="" h
    for r in $(seq 0 $((RAILS - 1))); do rails+="${rails:+, }rail$r"; done
    printf 'nodeName: h%s\nprobeKeyFile: %s\nhealthAddr: 127.0.0.1:9610\ntimeApiAddr: 127.0.0.1:9611\n' "$1" "$OUT/key"
    (($2)) && printf 'fabric:\n  rails: [%s]\n  pathsPerRail: %s\n' "$rails" "$PPR"
    (($3)) || printf 'clockSync:\n  enabled: false\n'
    printf 'probe:\n'
    case ${4:-on} in
      off) printf '  idlePathIntervalMs: 0\n' ;;
      all) printf '  trafficAware: false\n' ;;
      tick0) printf '  idleTickMs: 0\n' ;;
    esac
    if [[ -n $INTERVAL_MS ]]; then printf '  pathIntervalMs: %s\n' "$INTERVAL_MS"; fi
    if [[ -n $MISSES ]]; then printf '  missThreshold: %s\n' "$MISSES"; fi
    printf 'peers:\n'
    for h in $(seq 0 $((HOSTS - 1))); do
      (($1 == 0 || h == 0 || h == $1)) || continue
      printf '  - {name: h%s, address: %s, hostAddress: %s}\n' "$h" \
        "$(jq -r ".hosts[$h].rails[0].ip" "$TOPO")" "$(jq -r ".hosts[$h].addr" "$TOPO")"
    done
  }
  sports_free() {
    local h
    for h in $(seq 0 $((HOSTS - 1))); do
      [[ -z $(ip netns exec "$LAB-h$h" ss -Hlntu '( sport = :7311 or sport = :7312 or sport = :7313 or sport = :9610 or sport = :9611 or sport = :9999 )') ]] || return 1
    done
  }
  metrics() { ip netns exec "$LAB-h$1" curl -s http://127.0.0.1:9610/metrics; }
  # ssnap I: h0's threads, its rails' napi time, its metrics, its rails'
  # counters ("tx_bytes tx_packets rx_bytes rx_packets", summed) and the probe
  # packets its peers sent to it (their metrics)
  ssnap() {
    local h f s=0
    threads "$A0" >"$OUT/st$1"
    local ns=0 p
    for p in $H0_NAPI; do ns=$((ns + $(cut -d' ' -f1 /proc/"$p"/schedstat))); done
    echo "$ns" >"$OUT/sn$1"
    metrics 0 >"$OUT/sm$1"
    for f in tx_bytes tx_packets rx_bytes rx_packets; do
      ip netns exec "$LAB-h0" sh -c "cat /sys/class/net/rail*/statistics/$f" | awk '{s += $1} END {printf "%d ", s}'
    done >"$OUT/sc$1"
    for h in $(seq 1 $((HOSTS - 1))); do
      s=$((s + $(metrics "$h" | awk '/^lockstep_fabric_probes_(sent|answered)_total/ && index($0, "peer=\"h0\"") {s += $NF} END {printf "%d\n", s}')))
    done
    echo "$s" >"$OUT/sp$1"
    # h0's UDP receive-buffer overflows (all sockets of the namespace: the agent's)
    ip netns exec "$LAB-h0" awk '$1 == "Udp:" && !h {for (i = 2; i <= NF; i++) c[$i] = i; h = 1; next}
      $1 == "Udp:" {print $c["RcvbufErrors"]}' /proc/net/snmp >"$OUT/su$1"
  }
  sload() {  # sload LIST: UDP at SWEEP_LOAD each way between h0 and h1 on rail 0, for one window
    local -n lp=$1
    local a0 a1
    a0=$(jq -r '.hosts[0].rails[0].ip' "$TOPO"); a1=$(jq -r '.hosts[1].rails[0].ip' "$TOPO")
    ip netns exec "$LAB-h1" "$(dirname "$NETLAB")/netlab-loadgen" sink --bind "$a1:9999" --duration $((SECONDS_RUN + 3)) >/dev/null 2>&1 &
    lp+=($!)
    ip netns exec "$LAB-h0" "$(dirname "$NETLAB")/netlab-loadgen" sink --bind "$a0:9999" --duration $((SECONDS_RUN + 3)) >/dev/null 2>&1 &
    lp+=($!)
    sleep 0.3
    ip netns exec "$LAB-h0" "$(dirname "$NETLAB")/netlab-loadgen" send --to "$a1:9999" --bind "$a0" --rate "$SWEEP_LOAD" --duration "$SECONDS_RUN" >/dev/null 2>&1 &
    lp+=($!)
    ip netns exec "$LAB-h1" "$(dirname "$NETLAB")/netlab-loadgen" send --to "$a0:9999" --bind "$a1" --rate "$SWEEP_LOAD" --duration "$SECONDS_RUN" >/dev/null 2>&1 &
    lp+=($!)
  }
  # swindow FABRIC CLOCK LOADED: one window on h0; a row in $OUT/rows (FABRIC 1)
  # or the base figure in $OUT/base (FABRIC 0)
  swindow() {
    local lpids=() la0 la1 t0 t1 downs
    la0=$(cut -d' ' -f1 /proc/loadavg)
    ssnap 0
    t0=$(date +%s.%N)
    (($3)) && sload lpids
    sleep "$SECONDS_RUN"
    t1=$(date +%s.%N)
    ssnap 1
    gone "$A0" && { echo "agent h0 exited during the window; logs in $OUT" >&2; exit 1; }
    # h0's metrics at both ends of each window, kept: sm{0,1}-PATHS-TIER-cs{0,1}-load{0,1}
    if (($1)); then
      cp "$OUT/sm0" "$OUT/sm0-$((PEERS * RAILS))-$TIER-cs$2-load$3"
      cp "$OUT/sm1" "$OUT/sm1-$((PEERS * RAILS))-$TIER-cs$2-load$3"
    fi
    ((${#lpids[@]})) && stop_pids "${lpids[@]}"
    la1=$(cut -d' ' -f1 /proc/loadavg)
    delta_s() { awk 'NR == FNR {x[$1] = $4; r[$1] = $5; next} {print $1, $4 - x[$1], $5 - r[$1]}' "$OUT/st0" "$OUT/st1"; }
    if ! (($1)); then
      delta_s | awk -v w="$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" '{x += $2} END {printf "%.4f\n", 100*x/1e9/w}' >"$OUT/base"
      return
    fi
    downs=$(jq -r --argjson t0 "$t0" --argjson t1 "$t1" \
      'select(.msg == "fabric path state changed" and .to == "down" and .ts >= $t0 and .ts <= $t1) | .path' "$OUT/s-h0.log" 2>/dev/null | wc -l)
    local npaths upend pk0 pk1
    # the agent's own count: one path_state series per state and path
    npaths=$(grep -c '^lockstep_fabric_path_state{.*state="up"' "$OUT/sm1" || true)
    upend=$(grep -c '^lockstep_fabric_path_state{.*state="up"} 1$' "$OUT/sm1" || true)
    pk0=$(awk '/^lockstep_fabric_probes_(sent|answered)_total/ {s += $NF} END {printf "%d", s}' "$OUT/sm0")
    pk1=$(awk '/^lockstep_fabric_probes_(sent|answered)_total/ {s += $NF} END {printf "%d", s}' "$OUT/sm1")
    delta_s | awk -v t0="$t0" -v t1="$t1" -v paths="$npaths" -v ppr="$PPR" -v peers="$PEERS" -v rails="$RAILS" -v cs="$2" -v ld="$3" \
        -v load="$SWEEP_LOAD" -v pk="$((pk1 - pk0))" -v napi0="$(cat "$OUT/sn0")" -v napi1="$(cat "$OUT/sn1")" \
        -v c0="$(cat "$OUT/sc0")" -v c1="$(cat "$OUT/sc1")" -v rxp="$(($(cat "$OUT/sp1") - $(cat "$OUT/sp0")))" \
        -v la0="$la0" -v la1="$la1" -v downs="$downs" -v base="$(cat "$OUT/base" 2>/dev/null || echo null)" -v link="$LINK_MBIT" -v upstart="$UP_AT_START" -v upend="$upend" \
        -v rcvbuf="$(($(cat "$OUT/su1") - $(cat "$OUT/su0")))" -v rcvbuf_total="$(cat "$OUT/su1")" -v tier="$TIER" \
        -v fast="$(awk '/^lockstep_fabric_probe_tier_paths\{tier="fast"\}/ {print $NF}' "$OUT/sm1")" \
        -v fast0="$(awk '/^lockstep_fabric_probe_tier_paths\{tier="fast"\}/ {print $NF}' "$OUT/sm0")" \
        -v idle="$(awk '/^lockstep_fabric_probe_tier_paths\{tier="idle"\}/ {print $NF}' "$OUT/sm1")" '
      {x += $2} $1 == "ls-fabric" {pr = $2; runs = $3}
      END {
        w = t1 - t0; split(c0, a, " "); split(c1, b, " ")
        txb = b[1] - a[1]; txp = b[2] - a[2]; rxb = b[3] - a[3]; rxk = b[4] - a[4]
        share = (rxk > 0 ? rxp / rxk : 1); if (share > 1) share = 1
        napi = (napi1 - napi0) / 1e9 / w * 100
        printf "{\"paths_per_agent\":%d,\"paths_per_rail\":%d,\"peers\":%d,\"rails\":%d,\"clock_sync\":%s,\"load\":\"%s\",", paths, ppr, peers, rails, (cs ? "true" : "false"), (ld ? "udp " load " each way h0<->h1 rail0" : "none")
        printf "\"tiering\":\"%s\",\"fast_paths\":%s,\"fast_paths_at_start\":%s,\"idle_paths\":%s,", tier, (fast == "" ? "null" : fast), (fast0 == "" ? "null" : fast0), (idle == "" ? "null" : idle)
        printf "\"loadavg_1m\":%s,\"loadavg_1m_start\":%s,\"seconds\":%.1f,", la1, la0, w
        printf "\"prober_cpu_percent\":%.3f,\"rx_path_percent\":%.3f,\"host_probe_percent\":%.3f,", 100*pr/1e9/w, share*napi, 100*pr/1e9/w + share*napi
        printf "\"rx_napi_all_percent\":%.3f,\"rx_probe_share\":%.3f,\"agent_cpu_percent\":%.3f,", napi, share, 100*x/1e9/w
        printf "\"prober_runs_per_s\":%.1f,\"packets_per_s\":%.0f,\"prober_us_per_packet\":%.2f,", runs/w, pk/w, (pk > 0 ? pr/1e3/pk : 0)
        if (ld) printf "\"wire_kbps_per_node\":null,\"wire_rx_kbps_per_node\":null,\"wire_link_percent\":null,\"wire_link_percent_100g\":null,"
        else {
          # L2 bytes counted by the rails; +24 B a packet (preamble, FCS, gap) on a real wire
          tx = 8*txb/w/1e3; l1 = 8*(txb + 24*txp)/w/1e3
          printf "\"wire_kbps_per_node\":%.1f,\"wire_rx_kbps_per_node\":%.1f,\"wire_tx_packets_per_s\":%.0f,", tx, 8*rxb/w/1e3, txp/w
          printf "\"wire_l1_kbps_per_rail\":%.1f,\"wire_link_percent\":%.4f,\"link_mbit\":%s,", l1/rails, 100*l1/rails/(link*1e3), link
          printf "\"wire_link_percent_100g\":%.6f,", 100*l1/rails/1e8
        }
        printf "\"false_downs\":%d,\"paths_up_at_start\":%d,\"paths_up_at_end\":%d,\"udp_rcvbuf_errors\":%d,\"udp_rcvbuf_errors_lab\":%d", downs, upstart, upend, rcvbuf, rcvbuf_total
        if (cs && !ld && base != "null") printf ",\"base_agent_percent\":%.3f,\"marginal_agent_percent\":%.3f", base, 100*x/1e9/w - base
        printf "}\n"}' >>"$OUT/rows"
    tail -n 1 "$OUT/rows" | jq -c '{paths_per_agent, tiering, fast_paths, clock_sync, load, loadavg_1m, prober_cpu_percent, host_probe_percent, wire_kbps_per_node, false_downs}' >&2
  }
  # sphase FABRIC CLOCK [TIER]: agents on every host, then h0's windows (quiet, loaded)
  sphase() {
    local h
    TIER=${3:-on}
    for h in $(seq 0 $((HOSTS - 1))); do
      sconfig "$h" "$1" "$2" "$TIER" >"$OUT/s-h$h.yaml"
      ip netns exec "$LAB-h$h" "$AGENT" run --config "$OUT/s-h$h.yaml" >"$OUT/s-h$h.log" 2>&1 &
      PIDS+=($!)
      ((h == 0)) && A0=$!
    done
    # Ready: every path of h0 up (fabric), or clock sync running (base). A
    # prober that cannot keep its paths up (seen at 128 paths on a loaded
    # 2-core VM) is measured anyway after 45 s, once h0 has all its paths:
    # the row says how many were up (paths_up_at_start) and the false downs.
    local ready=0 up=-1 deadline=$((SECONDS + 45))
    while ((SECONDS < deadline)); do
      if (($1)); then
        up=$(ip netns exec "$LAB-h0" "$AGENT" fabric status --addr 127.0.0.1:9611 --json 2>/dev/null |
          jq --argjson n "$((PEERS * RAILS * PPR))" 'if (.paths | length) == $n then [.paths[] | select(.state == "up")] | length else -1 end' 2>/dev/null) || up=-1
        ((up == PEERS * RAILS * PPR)) && ready=1
      else
        metrics 0 2>/dev/null | awk '/^lockstep_probe_pairs_total\{direction="inbound"\}/ {s += $NF} END {exit !(s > 0)}' && ready=1
      fi
      ((ready)) && break
      sleep 0.2
    done
    if ! ((ready)) && ! (($1 && ${up:--1} >= 0)); then
      echo "agents not ready ($PEERS peers x $RAILS rails, fabric $1, clock sync $2); logs in $OUT" >&2; exit 1
    fi
    ((ready)) || echo "h0: only $up of $((PEERS * RAILS * PPR)) paths up after 45 s; measuring anyway" >&2
    UP_AT_START=${up:--1}
    sleep 5
    swindow "$1" "$2" 0
    (($1)) && swindow "$1" "$2" 1
    ((${DETECT_NOW:-0})) && sdetect
    stop_pids "${PIDS[@]}"
    PIDS=()
    for _ in $(seq 1 100); do sports_free && break; sleep 0.1; done
    sports_free || { echo "ports still bound after the agents exited" >&2; exit 1; }
  }
  # sdetect: detection on active and idle paths of h0 (see --detect)
  sdetect() {
    local h a0 r rail t line after down flows=() PY
    PY=$(command -v /usr/bin/python3 || command -v python3)
    a0=$(jq -r '.hosts[0].addr' "$TOPO")
    ((PEERS >= 6)) || { echo "--detect needs 6 peers or more" >&2; return; }
    for h in 1 2 3; do
      ip netns exec "$LAB-h$h" "$PY" -c 'import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((sys.argv[1], 5001)); s.listen(1)
c,_=s.accept()
while c.recv(65536): pass' "$(jq -r ".hosts[$h].addr" "$TOPO")" >/dev/null 2>&1 &
      flows+=($!)
    done
    sleep 0.5
    for h in 1 2 3; do
      ip netns exec "$LAB-h0" "$PY" -c 'import socket,sys,time
while True:  # until the sink listens (python starts slowly on a loaded machine)
    try:
        s = socket.create_connection((sys.argv[1], 5001), source_address=(sys.argv[2], 0)); break
    except OSError: time.sleep(0.1)
while True: s.sendall(b"x"*1000); time.sleep(0.05)' "$(jq -r ".hosts[$h].addr" "$TOPO")" "$a0" >/dev/null 2>&1 &
      flows+=($!)
    done
    # python starts slowly on a loaded machine: wait for the 3 connections,
    # then for the prober's once-a-second look
    for _ in $(seq 1 300); do
      (($(ip netns exec "$LAB-h0" ss -Htn state established '( dport = :5001 )' | wc -l) >= 3)) && break
      sleep 0.1
    done
    sleep 2.5
    metrics 0 | grep -E '^lockstep_fabric_(active_peers|probe_tier_paths)' >&2
    echo "h0's TCP connections: $(ip netns exec "$LAB-h0" ss -Htn state established | wc -l)" >&2
    : >"$OUT/detect"
    for h in 1 2 3 4 5 6; do
      # h0's pin for hH: the rail its /32 route leaves by
      rail=$(ip netns exec "$LAB-h0" ip -j route show proto 211 | jq -r --arg d "$(jq -r ".hosts[$h].addr" "$TOPO")" '.[] | select(.dst == $d) | .dev' | sed 's/^rail//')
      [[ -n $rail ]] || { echo "h0 has no pin for h$h" >&2; continue; }
      if ((h <= 3)); then r=$rail; kind=active; else r=$(((rail + 1) % RAILS)); kind=idle; fi
      t=$(date +%s.%N)
      line=$("$NETLAB" link --name "$LAB" "h${h}r$r" down --silent 2>&1 | grep -o 'after [0-9.]*' | head -n1)
      after=${line#after }; after=${after:-$t}
      sleep 1.5
      down=$(jq -r --argjson t0 "$after" --arg p "h$h/rail$r/path0" \
        'select(.msg == "fabric path state changed" and .to == "down" and .path == $p and .ts >= $t0) | .ts' "$OUT/s-h0.log" 2>/dev/null | head -n1)
      "$NETLAB" link --name "$LAB" "h${h}r$r" up >/dev/null 2>&1
      echo "$kind h$h rail$r after=$after down=${down:-none}" >&2
      [[ -n $down ]] && awk -v k="$kind" -v a="$after" -v d="$down" 'BEGIN {printf "%s %.1f\n", k, (d - a) * 1000}' >>"$OUT/detect"
      sleep 1
    done
    stop_pids "${flows[@]}"
  }
  head -c 32 /dev/urandom | base64 >"$OUT/key"
  LAST_SPEC=${PATHS_LIST##*,}
  for spec in ${PATHS_LIST//,/ }; do
    read -r PEERS RAILS <<<"$(scale_of "$spec")"
    HOSTS=$((PEERS + 1))
    echo "== $spec paths: $PEERS peers x $RAILS rails ($(date -u +%H:%M:%S), load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    # rail-optimised, one group: every probe crosses one leaf, no spine, no shaper
    "$NETLAB" up --name "$LAB" --hosts "$HOSTS" --rails "$RAILS" --layout rail --leaves "$RAILS" --spines 1 \
      --replace >"$OUT/netlab-$spec.log" 2>&1
    TOPO=$(tail -n 1 "$OUT/netlab-$spec.log")
    # Threaded NAPI everywhere (as --napi-threads), h0 last: its new threads are its rails'.
    before=$(napi_list)
    for ns in $(ip netns list | awk '{print $1}' | grep "^$LAB-" | grep -v "^$LAB-h0$"); do napi_on "$ns"; done
    mark=$(napi_list)
    napi_on "$LAB-h0"
    H0_NAPI=$(comm -13 <(echo "$mark") <(napi_list) | tr '\n' ' ')
    [[ -n ${H0_NAPI// } ]] || { echo "no napi thread appeared for h0's rails" >&2; exit 1; }
    # (a thread that vanished since, another lab's going down meanwhile, is no error)
    for p in $(comm -13 <(echo "$before") <(napi_list)); do chrt -f -p 1 "$p" 2>/dev/null || [[ ! -d /proc/$p ]]; done
    rm -f "$OUT/base"
    ((BASE)) && sphase 0 1
    for tier in ${TIER_MODES//,/ }; do
      [[ ,$CLOCK_MODES, == *,on,* ]] && sphase 1 1 "$tier"
      DETECT_NOW=0
      ((DETECT)) && [[ $spec == "$LAST_SPEC" && $tier == on ]] && DETECT_NOW=1
      [[ ,$CLOCK_MODES, == *,off,* ]] && sphase 1 0 "$tier"
      DETECT_NOW=0
    done
    "$NETLAB" down --name "$LAB" >/dev/null 2>&1
  done
  printf '\n%-4s %5s %-6s %-5s %-5s %6s %8s %8s %8s %8s %8s %7s %9s %8s %6s %7s %9s\n' tier paths scale clock load "load1" "prober%" "rx%" "host%" "agent%" "pk/s" "runs/s" "wire kb/s" "link%" downs "up/end" "marginal"
  jq -r '[.tiering, .paths_per_agent, "\(.peers)x\(.rails)", (if .clock_sync then "on" else "off" end), (if .load == "none" then "quiet" else "udp" end),
          .loadavg_1m, .prober_cpu_percent, .rx_path_percent, .host_probe_percent, .agent_cpu_percent, .packets_per_s, .prober_runs_per_s,
          (.wire_kbps_per_node // "-"), (.wire_link_percent // "-"), .false_downs, .paths_up_at_end, (.marginal_agent_percent // "-")] | @tsv' "$OUT/rows" |
    awk -F'\t' '{printf "%-4s %5s %-6s %-5s %-5s %6s %8.3f %8.3f %8.3f %8.3f %8s %7s %9s %8s %6s %7s %9s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17}'
  echo "logs: $OUT" >&2
  echo "{\"benchmark\":\"fabric-probe-cost\",\"mode\":\"paths\",\"paths\":\"$PATHS_LIST\",\"seconds\":$SECONDS_RUN,\"interval_ms\":${INTERVAL_MS:-null},\"load\":\"udp $SWEEP_LOAD each way h0<->h1 rail0\",\"link_mbit\":$LINK_MBIT,\"layout\":\"rail, one leaf hop, threaded napi\",\"measured\":\"h0 (its peers probe only h0)\",\"tiering\":\"$TIER_MODES\",\"detect_active_ms\":$(awk '$1 == "active" {print $2}' "$OUT/detect" 2>/dev/null | jq -s -c .),\"detect_idle_ms\":$(awk '$1 == "idle" {print $2}' "$OUT/detect" 2>/dev/null | jq -s -c .),\"rows\":$(jq -s -c . "$OUT/rows")}"
  exit 0
fi

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
# The agents' ports (probe 7311, fabric 7312 and its urgent port 7313,
# health 9610, time API 9611) and the load sink's (9999 on h1).
ports_free() {
  local h
  for h in $(seq 0 $((HOSTS - 1))); do
    [[ -z $(ip netns exec "$LAB-h$h" ss -Hlntu '( sport = :7311 or sport = :7312 or sport = :7313 or sport = :9610 or sport = :9611 or sport = :9999 )') ]] || return 1
  done
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
