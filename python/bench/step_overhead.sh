#!/usr/bin/env bash
# Steady-state step time of lockstep_train (coordinator, heartbeats, DDP-layout gradient
# reduction without overlap) against plain DistributedDataParallel, same model and data,
# arms interleaved so that machine load hits both alike. Prints a table and one JSON line.
#   python/bench/step_overhead.sh COORDINATOR_BIN [WORLD=4] [HIDDEN=1024] [STEPS=30] [ROUNDS=2]
set -euo pipefail
BIN=${1:?usage: step_overhead.sh path/to/lockstep-coordinator [world] [hidden] [steps] [rounds]}
WORLD=${2:-4} HIDDEN=${3:-1024} STEPS=${4:-30} ROUNDS=${5:-2}
PY=${LOCKSTEP_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
WORKER=$HERE/../tests/support/train_worker.py
TMP=$(mktemp -d /tmp/lockstep-pylib-bench.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
median_of() { grep -h '"end"' "$@" | sed 's/.*"median_step_s": \([0-9.e-]*\).*/\1/' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
hash_of() { grep -h '"end"' "$@" | sed 's/.*"hash": "\([0-9a-f]*\)".*/\1/' | sort -u; }

run_ddp() {  # $1 = output prefix
  local port; port=$(free_port); local ps=()
  for r in $(seq 0 $((WORLD - 1))); do
    LOCKSTEP_RANK=$r LOCKSTEP_WORLD_SIZE=$WORLD "$PY" "$WORKER" --mode ddp --steps "$STEPS" \
      --hidden "$HIDDEN" --port "$port" > "$1.$r" 2>/dev/null & ps+=($!); PIDS+=($!)
  done
  wait "${ps[@]}"
}

run_lockstep() {
  "$BIN" --job pylib-bench --world-size "$WORLD" --listen 127.0.0.1:0 --port-file "$TMP/port" \
    --state-file "$TMP/state.json" --log-level warn > "$TMP/coord.log" 2>&1 & local c=$!; PIDS+=($c)
  for _ in $(seq 500); do [ -s "$TMP/port" ] && break; sleep 0.02; done
  local ps=()
  for r in $(seq 0 $((WORLD - 1))); do
    LOCKSTEP_COORDINATOR=http://127.0.0.1:$(cat "$TMP/port") LOCKSTEP_ROLE=rank LOCKSTEP_RANK=$r \
      LOCKSTEP_WORLD_SIZE=$WORLD "$PY" "$WORKER" --mode lockstep --steps "$STEPS" --hidden "$HIDDEN" --quiet \
      > "$1.$r" 2>/dev/null & ps+=($!); PIDS+=($!)
  done
  wait "${ps[@]}"
  kill "$c"; wait "$c" 2>/dev/null || true; rm -f "$TMP/port" "$TMP/state.json"
}

for i in $(seq "$ROUNDS"); do
  run_ddp "$TMP/ddp$i"
  run_lockstep "$TMP/ls$i"
done
D=$(median_of "$TMP"/ddp*); L=$(median_of "$TMP"/ls*)
HD=$(hash_of "$TMP"/ddp*); HL=$(hash_of "$TMP"/ls*)
SAME=false; [ "$HD" = "$HL" ] && [ "$(echo "$HD" | wc -l)" = 1 ] && SAME=true
OVER=$(awk -v d="$D" -v l="$L" 'BEGIN {printf "%.2f", (l - d) / d * 100}')
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
printf '%-22s %12s\n' arm median_step_s
printf '%-22s %12.4f\n' ddp "$D" lockstep_train "$L"
printf 'overhead %s %%, final params identical: %s, world %s, hidden %s, steps %s x %s rounds, load %s\n' \
  "$OVER" "$SAME" "$WORLD" "$HIDDEN" "$STEPS" "$ROUNDS" "$LOAD"
printf '{"bench":"lockstep_train_step_overhead","ddp_step_s":%s,"lockstep_step_s":%s,"overhead_percent":%s,"bit_identical":%s,"world":%s,"hidden":%s,"steps":%s,"rounds":%s,"loadavg":"%s"}\n' \
  "$D" "$L" "$OVER" "$SAME" "$WORLD" "$HIDDEN" "$STEPS" "$ROUNDS" "$LOAD"
