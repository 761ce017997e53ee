#!/usr/bin/env bash
# Steady-state step time of lockstep_train (coordinator, heartbeats, DDP-layout gradient
# reduction overlapped with backward) against plain DistributedDataParallel, same model
# and data. The arms alternate in ABBA order (ddp first in odd rounds, lockstep first in
# even ones) so that a load trend hits both alike; each round gives one ratio (median
# step time of lockstep over ddp, each the mean over ranks of their median step time),
# and the overhead is the median of the rounds' ratios. Prints a table and one JSON line.
#   python/bench/step_overhead.sh COORDINATOR_BIN [WORLD=4] [HIDDEN=1024] [STEPS=30] [ROUNDS=2]
set -euo pipefail
BIN=${1:?usage: step_overhead.sh path/to/lockstep-coordinator [world] [hidden] [steps] [rounds]}
WORLD=${2:-4} HIDDEN=${3:-1024} STEPS=${4:-30} ROUNDS=${5:-2}
PY=${LOCKSTEP_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
WORKER=$HERE/../tests/support/train_worker.py
# The lockstep_train to measure: this checkout's (the worker imports it by name).
export PYTHONPATH=${LOCKSTEP_TRAIN_PYTHONPATH:-$(cd "$HERE/.." && pwd)}${PYTHONPATH:+:$PYTHONPATH}
TMP=$(mktemp -d /tmp/lockstep-pylib-bench.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
median_of() { grep -h '"ev": "end"' "$@" | sed 's/.*"median_step_s": \([0-9.e-]*\).*/\1/' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
hash_of() { grep -h '"ev": "end"' "$@" | sed 's/.*"hash": "\([0-9a-f]*\)".*/\1/' | sort -u; }

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

mean_of() {  # FIELD FILES...: the mean over ranks
  local f=$1; shift
  grep -h '"ev": "end"' "$@" | sed "s/.*\"$f\": \([0-9.e-]*\).*/\1/" | awk '{s+=$1} END {printf "%.6f", s/NR}'
}
pct() { awk -v d="$1" -v l="$2" 'BEGIN {printf "%.2f", (l - d) / d * 100}'; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else printf "%.2f", (a[NR/2]+a[NR/2+1])/2}'; }
RATIOS=() CPU_RATIOS=()
printf '%-6s %12s %12s %10s %14s %14s %10s\n' round ddp_step_s ls_step_s overhead_% ddp_cpu_step_s ls_cpu_step_s cpu_%
for i in $(seq "$ROUNDS"); do
  if [ $((i % 2)) = 1 ]; then run_ddp "$TMP/ddp$i"; run_lockstep "$TMP/ls$i"
  else run_lockstep "$TMP/ls$i"; run_ddp "$TMP/ddp$i"; fi
  d=$(mean_of median_step_s "$TMP/ddp$i".*); l=$(mean_of median_step_s "$TMP/ls$i".*)
  dc=$(mean_of cpu_per_step_s "$TMP/ddp$i".*); lc=$(mean_of cpu_per_step_s "$TMP/ls$i".*)
  r=$(pct "$d" "$l"); rc=$(pct "$dc" "$lc")
  RATIOS+=("$r"); CPU_RATIOS+=("$rc")
  printf '%-6s %12s %12s %10s %14s %14s %10s\n' "$i" "$d" "$l" "$r" "$dc" "$lc" "$rc"
done
ROUND_MEDIAN=$(printf '%s\n' "${RATIOS[@]}" | median)
CPU_MEDIAN=$(printf '%s\n' "${CPU_RATIOS[@]}" | median)
ROUND_MIN=$(printf '%s\n' "${RATIOS[@]}" | sort -g | head -1); ROUND_MAX=$(printf '%s\n' "${RATIOS[@]}" | sort -g | tail -1)
# The reductions alone, in the same processes (python/bench/reducer_interleaved.py).
port=$(free_port)
for r in $(seq 0 $((WORLD - 1))); do
  "$PY" "$HERE/reducer_interleaved.py" "$r" "$WORLD" "$port" $((2 * ROUNDS)) "$HIDDEN" > "$TMP/inter.$r" 2>/dev/null & PIDS+=($!)
done
wait
INTER=$(cat "$TMP/inter.0")
D=$(median_of "$TMP"/ddp*); L=$(median_of "$TMP"/ls*)
HD=$(hash_of "$TMP"/ddp*); HL=$(hash_of "$TMP"/ls*)
SAME=false; [ "$HD" = "$HL" ] && [ "$(echo "$HD" | wc -l)" = 1 ] && SAME=true
POOLED=$(awk -v d="$D" -v l="$L" 'BEGIN {printf "%.2f", (l - d) / d * 100}')
OVER=$ROUND_MEDIAN
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
printf '%-22s %12s\n' arm median_step_s
printf '%-22s %12.4f\n' ddp "$D" lockstep_train "$L"
printf 'step-time overhead %s %% (median of %s rounds; min %s, max %s; pooled medians %s %%); CPU per step %s %% (median of rounds); final params identical: %s, world %s, hidden %s, steps %s, load %s\n' \
  "$OVER" "$ROUNDS" "$ROUND_MIN" "$ROUND_MAX" "$POOLED" "$CPU_MEDIAN" "$SAME" "$WORLD" "$HIDDEN" "$STEPS" "$LOAD"
jq -r '"same processes, interleaved blocks of 5 steps (\(.steps_per_arm) steps per arm), against DDP: overlapped reducer CPU \(.arms.overlap.cpu_percent) %, wall \(.arms.overlap.wall_percent) %; reducer after backward CPU \(.arms.after_backward.cpu_percent) %, wall \(.arms.after_backward.wall_percent) %; parameters equal to DDP: \(.ddp_equals_overlap)"' <<<"$INTER"
printf '{"bench":"lockstep_train_step_overhead","interleaved":%s,' "$INTER"
printf '"ddp_step_s":%s,"lockstep_step_s":%s,"overhead_percent":%s,"round_overhead_percent":[%s],"pooled_overhead_percent":%s,"cpu_overhead_percent":%s,"round_cpu_overhead_percent":[%s],"bit_identical":%s,"world":%s,"hidden":%s,"steps":%s,"rounds":%s,"loadavg":"%s"}\n' \
  "$D" "$L" "$OVER" "$(IFS=,; echo "${RATIOS[*]}")" "$POOLED" "$CPU_MEDIAN" "$(IFS=,; echo "${CPU_RATIOS[*]}")" "$SAME" "$WORLD" "$HIDDEN" "$STEPS" "$ROUNDS" "$LOAD"
