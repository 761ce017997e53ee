#!/usr/bin/env bash
# CPU cost of an idle hot spare waiting in the pool, and of the coordinator serving it:
# a coordinator (world size 4, no ranks, so generation 0 never forms) and SPARES spare
# processes of the migration benchmark's workload (e2e/workloads/migration_train.py, the
# 5.25M-parameter model built and tracked, then waiting in job.steps()). After the spares
# registered and SETTLE seconds passed, the run time of each process (all threads,
# /proc/PID/task/*/schedstat) and its context switches are read, then again WINDOW
# seconds later. Prints a table and one JSON line.
#   python/bench/idle_spare_cost.sh COORDINATOR_BIN [WINDOW=30] [SPARES=1] [SETTLE=10]
set -euo pipefail
BIN=${1:?usage: idle_spare_cost.sh path/to/lockstep-coordinator [window_s] [spares] [settle_s]}
WINDOW=${2:-30} SPARES=${3:-1} SETTLE=${4:-10}
PY=${LOCKSTEP_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PYLIB=${LOCKSTEP_TRAIN_PYTHONPATH:-$ROOT/python}   # the lockstep_train to measure
TMP=$(mktemp -d /tmp/lockstep-idle-spare.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT

"$BIN" --job idle-spare --world-size 4 --listen 127.0.0.1:0 --port-file "$TMP/port" \
  --state-file "$TMP/state.json" --log-level warn > "$TMP/coord.log" 2>&1 & COORD=$!; PIDS+=($COORD)
for _ in $(seq 500); do [ -s "$TMP/port" ] && break; sleep 0.02; done
URL=http://127.0.0.1:$(cat "$TMP/port")
SP=()
for i in $(seq "$SPARES"); do
  LOCKSTEP_COORDINATOR=$URL LOCKSTEP_ROLE=spare PYTHONPATH=$PYLIB \
    "$PY" "$ROOT/e2e/workloads/migration_train.py" --mode lockstep --log "$TMP/train.jsonl" \
    > "$TMP/spare$i.log" 2>&1 & SP+=($!); PIDS+=($!)
done
for _ in $(seq 1200); do   # until every spare registered (import torch, build the model)
  n=$(grep -c '"lib_event":"registered"' "$TMP/train.jsonl" 2>/dev/null || true)
  [ "${n:-0}" -ge "$SPARES" ] && break; sleep 0.1
done
sleep "$SETTLE"

# run_ns ctx_switches of a process, summed over its threads.
sample() {
  local pid=$1 run=0 cs=0 t
  for t in /proc/"$pid"/task/*; do
    run=$((run + $(cut -d' ' -f1 "$t/schedstat")))
    cs=$((cs + $(awk '/ctxt_switches/ {s += $2} END {print s}' "$t/status")))
  done
  echo "$run $cs"
}
declare -A R0 C0
for p in "$COORD" "${SP[@]}"; do read -r R0[$p] C0[$p] < <(sample "$p"); done
sleep "$WINDOW"
printf '%-12s %8s %14s %14s\n' process pid cpu_%_of_core wakeups_per_s
JSON="" TOTAL=0
for p in "$COORD" "${SP[@]}"; do
  read -r r c < <(sample "$p")
  cpu=$(awk -v a="${R0[$p]}" -v b="$r" -v w="$WINDOW" 'BEGIN {printf "%.3f", (b - a) / 1e9 / w * 100}')
  wk=$(awk -v a="${C0[$p]}" -v b="$c" -v w="$WINDOW" 'BEGIN {printf "%.1f", (b - a) / w}')
  name=spare; [ "$p" = "$COORD" ] && name=coordinator
  printf '%-12s %8s %14s %14s\n' "$name" "$p" "$cpu" "$wk"
  JSON+="${JSON:+,}{\"process\":\"$name\",\"cpu_percent\":$cpu,\"switches_per_s\":$wk}"
  TOTAL=$(awk -v t="$TOTAL" -v c="$cpu" 'BEGIN {printf "%.3f", t + c}')
done
echo "{\"bench\":\"lockstep_idle_spare_cost\",\"window_s\":$WINDOW,\"spares\":$SPARES,\"total_cpu_percent\":$TOTAL,\"processes\":[$JSON],\"loadavg\":\"$(cut -d' ' -f1-3 /proc/loadavg)\"}"
