#!/usr/bin/env bash
# The migration benchmark's torchft arm, a smoke run (no Kubernetes, no root): quick mode,
# 100 steps, one SIGKILL of replica group 2 at step 10, TorchFT 0.2.0 on torch 2.x from
# scripts/install-torchft's cached environment (scripts/setup installs it), and its
# fault-free reference ddp_torch2. Asserts from the JSON line what TorchFT does by design:
# training completed without the group, which its torchrun restarted and which healed from
# a live peer and committed again (recover_s), no committed step computed again, no
# healthy group restarted, and the failed group's batches dropped (skipped_samples > 0).
# No timing asserts. Binaries as test-migration.sh.
# Not a ctest entry: it took 2 min 55 s with the load average at 24 (torch 2.x starts
# slowly: ddp_torch2 alone 63 s for 100 steps of 0.2 s); run it by hand:
#   LOCKSTEP_BUILD_DIR=build/ci e2e/tests/test-migration-torchft.sh /tmp/e2e-state
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || fail "needs jq"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
"$REPO/scripts/install-torchft" --print >/dev/null || fail "no torchft environment: run scripts/setup"
BENCH=$(find_bin MIGRATION_BENCH e2e/bench/migration)
OUT=$STATE/migration-torchft
rm -rf "$OUT" && mkdir -p "$OUT"
say "migration --quick --arms torchft --steps 100 --schedule kill:2@10 (logs in $OUT)"
if ! timeout 300 "$BENCH" --quick --arms torchft --steps 100 --schedule kill:2@10 --workdir "$OUT/work" \
    >"$OUT/result.txt" 2>"$OUT/log.txt"; then
  tail -n 30 "$OUT/log.txt" >&2
  cat "$OUT/result.txt" >&2
  fail "the migration benchmark failed (logs in $OUT)"
fi
grep -v '^{' "$OUT/result.txt" >&2
line=$(tail -n 1 "$OUT/result.txt")
ref=$(jq -c '.arms.ddp_torch2' <<<"$line")
tft=$(jq -c '.arms.torchft' <<<"$line")
jq -e '.ran and .completed and .final_step == 99' <<<"$ref" >/dev/null || fail "ddp_torch2 did not complete: $ref"
jq -e '.ran and .completed and .time_to_n_steps_s > 0' <<<"$tft" >/dev/null || fail "torchft did not complete training: $tft"
jq -e '.reference == "ddp_torch2" and (.bit_identical | type) == "boolean"' <<<"$tft" >/dev/null ||
  fail "torchft was not compared with ddp_torch2: $tft"
jq -e '[.faults[].kind] == ["kill"] and .faults[0].resume_s != null and .faults[0].recover_s != null' <<<"$tft" >/dev/null ||
  fail "torchft: the killed group did not come back, or training did not go on: $tft"
jq -e '.ranks_never_back == [] and .final_step == 99' <<<"$tft" >/dev/null ||
  fail "torchft: not every group committed the last step: $tft"
jq -e '.lost_steps == 0 and (.step_went_back | not) and .healthy_restarts == 0' <<<"$tft" >/dev/null ||
  fail "torchft recomputed committed steps or restarted a healthy group: $tft"
jq -e '.skipped_samples > 0 and .skipped_samples % 16 == 0' <<<"$tft" >/dev/null ||
  fail "torchft: the failed group's batches were not counted as skipped: $tft"
pass "torchft: SIGKILL of a group, training went on without it ($(jq -r .faults[0].resume_s <<<"$tft") s) and it healed back ($(jq -r .faults[0].recover_s <<<"$tft") s); $(jq -r .skipped_samples <<<"$tft") samples skipped; bit-identical to ddp_torch2: $(jq -r .bit_identical <<<"$tft")"
