#!/usr/bin/env bash
# clocksync-seeds: the clock-sync testbed (build/<preset>/e2e/bench/clocksync)
# run once per seed, with fabric probing off and (--fabric-too) on, and every
# scenario's figures summed up over the runs: the median and the range of
# Lockstep's p50/p99, chrony's p99, the chrony/Lockstep p99 ratio, the samples
# outside their bounds (summed) and the times to first sync. Ends with ONE
# JSON line. Needs root; run from the repository root.
#
#   sudo e2e/bench/clocksync-seeds.sh [--seeds 1,2,3] [--fabric-too] [--build build/ci] [-- CLOCKSYNC_ARGS...]
#
# Each run's own JSON line and log stay in the work directory it prints.
set -euo pipefail
seeds=1,2,3
fabric_too=0
build=build/ci
extra=()
while (($#)); do
  case "$1" in
    --seeds) seeds="$2"; shift 2 ;;
    --fabric-too) fabric_too=1; shift ;;
    --build) build="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "clocksync-seeds: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
bin="$build/e2e/bench/clocksync"
[[ -x "$bin" ]] || { echo "clocksync-seeds: $bin not built (cmake --build $build --target clocksync)" >&2; exit 2; }
command -v jq >/dev/null || { echo "clocksync-seeds: needs jq" >&2; exit 2; }
work=$(mktemp -d /tmp/clocksync-seeds-XXXXXX)
echo "clocksync-seeds: runs in $work" >&2

modes=(off)
((fabric_too)) && modes+=(on)
IFS=, read -r -a seed_list <<<"$seeds"
for mode in "${modes[@]}"; do
  for s in "${seed_list[@]}"; do
    args=(--seed "$s" "${extra[@]}")
    [[ $mode == on ]] && args+=(--fabric)
    load=$(cut -d' ' -f1 /proc/loadavg)
    echo "clocksync-seeds: seed $s, fabric $mode (load $load)" >&2
    if ! "$bin" "${args[@]}" >"$work/run-$mode-$s.out" 2>"$work/run-$mode-$s.log"; then
      echo "clocksync-seeds: seed $s fabric $mode failed (see $work/run-$mode-$s.log)" >&2
      continue
    fi
    tail -n1 "$work/run-$mode-$s.out" | jq -c --arg mode "$mode" --argjson seed "$s" --argjson load "$load" \
      '{fabric: $mode, seed: $seed, load_before: $load, scenarios: .scenarios}' >>"$work/runs.jsonl"
  done
done
[[ -s "$work/runs.jsonl" ]] || { echo "clocksync-seeds: no run finished" >&2; exit 1; }

# Per (fabric, scenario): median [min..max] over the runs.
summary=$(jq -s -c '
  def med: sort | if length == 0 then null elif length % 2 == 1 then .[length/2|floor]
           else (.[length/2-1] + .[length/2]) / 2 end;
  def r2: if . == null then null else (. * 100 | round / 100) end;
  def stat(f): [.[] | f | select(. != null)] | {median: (med | r2), min: min, max: max, n: length};
  [.[] as $r | $r.scenarios[] | . + {fabric: $r.fabric, seed: $r.seed, load_before: $r.load_before}]
  | group_by([.fabric, .scenario])
  | map({fabric: .[0].fabric, scenario: .[0].scenario, runs: length,
         seeds: [.[].seed], load_before: [.[].load_before],
         p50_ns: stat(.p50_error_ns), p99_ns: stat(.p99_error_ns), max_ns: stat(.max_error_ns),
         chrony_p99_ns: stat(.chrony_p99_error_ns), chrony_over_lockstep_p99: stat(.chrony_p99_over_p99),
         outside_bounds: ([.[].bound_violations] | add), pairs: ([.[].pairs_scored // 0] | add),
         lockstep_first_sync_s: stat(.time_to_first_sync_s.lockstep),
         chrony_first_sync_s: stat(.time_to_first_sync_s.chrony),
         p99_le_300ns_runs: ([.[] | select(.p99_error_ns != null and .p99_error_ns <= 300)] | length)})' \
  "$work/runs.jsonl")

fmt() { jq -r "$1"' | if .median == null then "-" else "\(.median|.*10|round/10) [\(.min|.*10|round/10)..\(.max|.*10|round/10)]" end'; }
printf '\n%-6s %-22s %4s %-24s %-24s %-24s %-20s %8s %-16s %-16s\n' fabric scenario runs "p50 ns" "p99 ns" "chrony p99 ns" \
  "chrony/Lockstep p99" outside "first sync s" "chrony sync s"
n=$(jq length <<<"$summary")
for ((k = 0; k < n; k++)); do
  row=$(jq -c ".[$k]" <<<"$summary")
  printf '%-6s %-22s %4s %-24s %-24s %-24s %-20s %8s %-16s %-16s\n' \
    "$(jq -r .fabric <<<"$row")" "$(jq -r .scenario <<<"$row")" "$(jq -r .runs <<<"$row")" \
    "$(jq .p50_ns <<<"$row" | fmt .)" "$(jq .p99_ns <<<"$row" | fmt .)" "$(jq .chrony_p99_ns <<<"$row" | fmt .)" \
    "$(jq .chrony_over_lockstep_p99 <<<"$row" | fmt .)" "$(jq -r .outside_bounds <<<"$row")" \
    "$(jq .lockstep_first_sync_s <<<"$row" | fmt .)" "$(jq .chrony_first_sync_s <<<"$row" | fmt .)"
done
echo
jq -c -n --argjson s "$summary" --arg commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  --arg seeds "$seeds" '{benchmark: "clocksync-seeds", commit: $commit, seeds: ($seeds | split(",") | map(tonumber)),
   statistic: "median [min..max] over the runs", scenarios: $s}'
