#!/usr/bin/env bash
# fabric-trace-carrier: where the time goes between a carrier loss under a
# TCP stream and the stream flowing again, with the agents failing it over.
# A netlab lab of 2 hosts x 2 rails (200 Mbit/s host links, 5 ms queues, the
# CS6 band), an agent per host, bulk-stream h0 -> h1 on host addresses. The
# link the stream leaves h0 by loses carrier (netlab link down); around it the
# kernel's own tracepoints are recorded system-wide (perf): tcp_retransmit_skb
# (every retransmission of the stream, with its timing), kfree_skb (every drop
# and its reason), neigh_update; `ip monitor route` in h0 shows when the pin
# moved. It prints one timeline in ms from the fault: agent detection and pin,
# route change, drops by reason, each retransmission, and when the receiver
# saw data again (the sink logs bytes per 10 ms).
#
#   sudo e2e/bench/fabric-trace-carrier.sh [--rto-min-ms 10] [--keep]
#
# $NETLAB, $LOCKSTEP_AGENT, $BULK_STREAM override the binaries (build/dev).
set -euo pipefail
KEEP=0
ANCHOR=0
FLUSH_MS=
while (($#)); do
  case $1 in
    --keep) KEEP=1; shift ;;
    --anchor) ANCHOR=1; shift ;;
    --flush-neigh-ms) FLUSH_MS=$2; shift 2 ;;
    -h|--help) sed -n 2,17p "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $(id -u) -eq 0 ]] || { echo "needs root (network namespaces, perf)" >&2; exit 1; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NETLAB=${NETLAB:-$ROOT/build/dev/e2e/netlab/netlab}
AGENT=${LOCKSTEP_AGENT:-$ROOT/build/dev/daemonset/lockstep-agent}
BULK=${BULK_STREAM:-$ROOT/build/dev/e2e/workloads/bulk-stream}
LAB=ftc$$
LAB=${LAB:0:10}
OUT=$(mktemp -d /tmp/fabric-trace-carrier.XXXXXX)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  "$NETLAB" down --name "$LAB" >/dev/null 2>&1 || true
  ((KEEP)) || rm -rf "$OUT"
}
trap cleanup EXIT

"$NETLAB" up --name "$LAB" --hosts 2 --rails 2 --link-rate 200mbit >"$OUT/netlab.log" 2>&1
TOPO=$(tail -n 1 "$OUT/netlab.log")
for h in 0 1; do
  for r in 0 1; do "$NETLAB" shape --name "$LAB" "h${h}r$r" --rate 200mbit --latency 5ms --dir both >/dev/null 2>&1; done
done
head -c 32 /dev/urandom | base64 >"$OUT/key"
A0=$(jq -r '.hosts[0].addr' "$TOPO")
A1=$(jq -r '.hosts[1].addr' "$TOPO")
peers=""
for h in 0 1; do
  peers+="  - {name: h$h, address: $(jq -r ".hosts[$h].rails[0].ip" "$TOPO"), hostAddress: $(jq -r ".hosts[$h].addr" "$TOPO")}"$'\n'
done
for h in 0 1; do
  printf 'nodeName: h%s\nprobeKeyFile: %s\nhealthAddr: 127.0.0.1:9610\ntimeApiAddr: 127.0.0.1:9611\nfabric:\n  rails: [rail0, rail1]\npeers:\n%s' \
    "$h" "$OUT/key" "$peers" >"$OUT/h$h.yaml"
  ip netns exec "$LAB-h$h" "$AGENT" run --config "$OUT/h$h.yaml" >"$OUT/h$h.log" 2>&1 &
  PIDS+=($!)
done
for _ in $(seq 1 150); do
  n=$(ip netns exec "$LAB-h0" ip -j route show proto 211 | jq length)
  ((n > 0)) && break
  sleep 0.2
done
ip netns exec "$LAB-h1" "$BULK" sink --bind "$A1:5201" --log "$OUT/sink.jsonl" --duration 20 >/dev/null 2>&1 &
PIDS+=($!)
sleep 0.3
ip netns exec "$LAB-h0" "$BULK" send --to "$A1:5201" --bind "$A0" --duration 15 >/dev/null 2>"$OUT/send.err" &
PIDS+=($!)
sleep 3
if ((ANCHOR)); then  # experiment: keep each rail's pin route attributes alive in an unused table
  ip netns exec "$LAB-h0" ip -j route show | jq -r '.[] | select(.nexthops) | .nexthops[] | "\(.gateway) \(.dev)"' |
    while read -r gw dev; do
      ip netns exec "$LAB-h0" ip route add "198.18.0.${dev#rail}/32" via "$gw" dev "$dev" onlink src "$A0" proto 211 table 2110 rto_min lock 10ms
    done
  ip netns exec "$LAB-h0" ip route show table 2110 >"$OUT/anchors.txt"
fi
DEV=$(ip netns exec "$LAB-h0" ip -j route get "$A1" from "$A0" | jq -r '.[0].dev')
LINK="h0r${DEV#rail}"
ip netns exec "$LAB-h0" ip -ts monitor route >"$OUT/routes.txt" 2>&1 &
PIDS+=($!)
perf record -a -q -g -k CLOCK_MONOTONIC -o "$OUT/perf.data" -e sched:sched_process_exec -e tcp:tcp_retransmit_skb -e skb:kfree_skb -e neigh:neigh_update \
  -- sleep 2.5 >/dev/null 2>&1 &
PERF_PID=$!
sleep 0.8
date +%s.%N >"$OUT/marker"  # its exec in the trace maps perf's clock to the wall clock
ip netns exec "$LAB-h0" ss -tin dst "$A1" >"$OUT/ss-before.txt"
"$NETLAB" link --name "$LAB" "$LINK" down 2>"$OUT/link.txt"
if [[ -n $FLUSH_MS ]]; then  # experiment: what the agent could do at failover
  sleep "$(awk -v m="$FLUSH_MS" 'BEGIN {print m / 1000}')"
  ip -n "$LAB-h0" neigh show dev "$DEV" >"$OUT/neigh-flushed.txt"
  ip -n "$LAB-h0" neigh flush dev "$DEV"
fi
for i in $(seq 1 12); do
  sleep 0.05
  echo "== +$((i * 50)) ms" >>"$OUT/ss-after.txt"
  ip netns exec "$LAB-h0" ss -tinm dst "$A1" >>"$OUT/ss-after.txt"
  ip netns exec "$LAB-h0" tc -s qdisc show dev "$DEV" >>"$OUT/ss-after.txt"
  if ((i == 2 || i == 12)); then  # neighbours and routes to h0's host address everywhere
    for ns in $(ip netns list | awk -v l="$LAB-" 'index($1, l) == 1 {print $1}'); do
      echo "== +$((i * 50)) ms $ns" >>"$OUT/fabric-state.txt"
      ip -n "$ns" neigh show >>"$OUT/fabric-state.txt"
      ip -n "$ns" route get "$A0" >>"$OUT/fabric-state.txt" 2>&1 || true
    done
  fi
done
wait "$PERF_PID" || true
"$NETLAB" link --name "$LAB" "$LINK" up >/dev/null 2>&1
FAULT=$(grep -o 'after [0-9.]*' "$OUT/link.txt" | awk '{print $2}')
echo "fault: $LINK (h0's $DEV) lost carrier at $FAULT (netlab's ip command start); work dir $OUT"
# perf stamps are CLOCK_MONOTONIC: the marker's exec (of `date`) maps them to
# the wall clock it printed (to within a fraction of a ms).
MARK=$(perf script -i "$OUT/perf.data" -F time,event,trace 2>/dev/null | awk '/sched_process_exec/ && /filename=\/usr\/bin\/date/ {t = $1; sub(":", "", t); print t; exit}' || true)
OFFSET=$(awk -v w="$(cat "$OUT/marker")" -v m="$MARK" 'BEGIN {printf "%.6f", w - m}')
{
  perf script -i "$OUT/perf.data" -F time,event,trace 2>/dev/null |
    awk -v off="$OFFSET" -v f="$FAULT" -v a1="$A1" '
      { t = $1; sub(":", "", t); ms = (t + off - f) * 1000 }
      /tcp_retransmit_skb/ && index($0, a1) { printf "%8.1f ms  retransmit %s\n", ms, $4; next }
      /kfree_skb/ && !/reason: NOT_SPECIFIED/ && ms > -50 && ms < 1200 { n[int(ms / 50) * 50 " " $NF]++; next }
      /neigh_update/ && ms > -50 && ms < 1200 { printf "%8.1f ms  neigh %s\n", ms, $0 }
      END { for (k in n) { split(k, p, " "); printf "%8.1f ms  drops x%d (50 ms bucket) %s\n", p[1], n[k], p[2] } }'
  jq -r --argjson f "$FAULT" 'select(.ts >= $f - 0.05 and .ts < $f + 1.5 and (.msg == "fabric path state changed" or (.msg | startswith("pinned")))) |
    "\((.ts - $f) * 1000 | . * 10 | round / 10) ms  agent h0: \(.msg) \(.path // .route // "") \(.to // "")"' "$OUT/h0.log" 2>/dev/null || true
  jq -r --argjson f "$FAULT" 'select(.t > $f - 0.05 and .t < $f + 1.5) | "\((.t - $f) * 1000 | . * 10 | round / 10) ms  sink bytes in the 10 ms ending here: \(.bytes)"' \
    "$OUT/sink.jsonl" | awk '{ if ($NF == 0 && last != 0) print; else if ($NF != 0 && last == 0) print; last = $NF }'
} | sort -n -k1,1 >"$OUT/timeline.txt"
cat "$OUT/timeline.txt"
echo "route changes in h0 (ip monitor):"
cat "$OUT/routes.txt"
