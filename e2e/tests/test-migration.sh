#!/usr/bin/env bash
# Live rank migration with real PyTorch processes (no Kubernetes fixture, no
# root): the migration benchmark (<build>/e2e/bench/migration) in quick mode
# on the lockstep_hot arm (4 ranks + 1 hot spare, lockstep-coordinator,
# python/lockstep_train) with a SIGKILL of rank 2, a SIGSTOP of rank 1 and a
# planned migration of rank 0, plus the fault-free reference arm(s). Asserts
# from its JSON line: training completed (every rank committed the last step),
# no committed step was computed again, no healthy rank restarted, and the final
# parameters equal the fault-free reference bit for bit. No timing asserts.
# Binaries: $MIGRATION_BENCH, else e2e/bench/migration of $LOCKSTEP_BUILD_DIR,
# build/dev or build/ci; the coordinator: $LOCKSTEP_COORDINATOR_BIN, else the
# one of the same build dir. The state dir ($1) only holds the logs.
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || fail "needs jq"
[[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c 'import torch' 2>/dev/null ||
  fail "needs Debian's PyTorch (python3-torch) in /usr/bin/python3"
BENCH=$(find_bin MIGRATION_BENCH e2e/bench/migration)
LOCKSTEP_COORDINATOR_BIN=$(find_bin LOCKSTEP_COORDINATOR_BIN migration/lockstep-coordinator)
export LOCKSTEP_COORDINATOR_BIN
OUT=$STATE/migration
rm -rf "$OUT" && mkdir -p "$OUT"
ARMS=${MIGRATION_TEST_ARMS:-ddp,lockstep_hot}
say "migration --quick --arms $ARMS --faults kill,stop,planned (logs in $OUT)"
if ! timeout 600 "$BENCH" --quick --arms "$ARMS" --faults kill,stop,planned --workdir "$OUT/work" \
    >"$OUT/result.txt" 2>"$OUT/log.txt"; then
  tail -n 30 "$OUT/log.txt" >&2
  cat "$OUT/result.txt" >&2
  fail "the migration benchmark failed (logs in $OUT)"
fi
grep -v '^{' "$OUT/result.txt" >&2
line=$(tail -n 1 "$OUT/result.txt")
hot=$(jq -c '.arms.lockstep_hot' <<<"$line")
jq -e '.ran and .completed' <<<"$hot" >/dev/null || fail "lockstep_hot did not complete training: $hot"
jq -e '.final_step == 119 and (.faults | length) == 3' <<<"$hot" >/dev/null ||
  fail "lockstep_hot: not every rank reached the last step or a fault is missing: $hot"
# Every fault happened and was recovered from: kill and stop each with a detection
# time, all three with a recovery time; the planned move reached "done" (it has no
# detection: it is requested).
jq -e '[.faults[].kind] == ["kill","stop","planned"]' <<<"$hot" >/dev/null ||
  fail "lockstep_hot: the faults injected are not kill, stop, planned: $hot"
jq -e 'all(.faults[]; .recover_s != null and (.kind == "planned" or .detect_s != null))' <<<"$hot" >/dev/null ||
  fail "lockstep_hot: a fault was never detected or never recovered from: $hot"
jq -e '.faults[] | select(.kind == "planned") | .note | test("^migration [^ ]+ done, paused after step")' \
  <<<"$hot" >/dev/null || fail "lockstep_hot: the planned migration did not complete: $hot"
jq -e '.faults[] | select(.kind == "planned") | .stall_s != null and .stall_s <= .recover_s' <<<"$hot" >/dev/null ||
  fail "lockstep_hot: the planned migration has no stall from its paused step boundary: $hot"
jq -e '.lost_steps == 0 and (.step_went_back | not)' <<<"$hot" >/dev/null || fail "lockstep_hot lost committed steps: $hot"
jq -e '.healthy_restarts == 0' <<<"$hot" >/dev/null || fail "lockstep_hot restarted healthy ranks: $hot"
jq -e '.bit_identical == true' <<<"$hot" >/dev/null ||
  fail "lockstep_hot's final parameters differ from the fault-free reference ($(jq -r .reference <<<"$hot")): $hot"
pass "SIGKILL, SIGSTOP and a planned migration: training completed, 0 lost steps, 0 healthy restarts, final parameters bit-identical to $(jq -r .reference <<<"$hot")"
