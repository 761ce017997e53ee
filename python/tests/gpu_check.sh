#!/usr/bin/env bash
# The lockstep_train tests on a machine with a CUDA GPU and its own torch (not CI: CI has
# no GPU). Runs, with that machine's python3:
#   1. the unit tests (protocol, state with the CPU/CUDA fingerprint check, reducer, job);
#   2. the migration tests (real coordinator, kill/stop/planned/pre-emptive moves, each
#      checked bit for bit against a fault-free DDP run) on the CPU, then with the model,
#      optimizer state and batches on the GPU (LOCKSTEP_TEST_DEVICE=cuda; gloo with
#      CUDA tensors: one GPU cannot hold several NCCL ranks);
#   3. the faults-during-recovery sample (test_faults) on the CPU.
# Each part's log goes to $OUT (or ./gpu-check-logs); the summary ends with one JSON line.
#   LOCKSTEP_COORDINATOR_BIN=path/to/lockstep-coordinator python/tests/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-$PWD/gpu-check-logs}
mkdir -p "$OUT"
PY=${LOCKSTEP_PYTHON:-python3}
: "${LOCKSTEP_COORDINATOR_BIN:?set LOCKSTEP_COORDINATOR_BIN}"
export LOCKSTEP_COORDINATOR_BIN LOCKSTEP_UNDER_CTEST=1 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export CUBLAS_WORKSPACE_CONFIG=:4096:8   # deterministic cuBLAS: the bit-identity checks need it
# lockstep_train from this checkout (that machine's torch, nothing installed there).
export PYTHONPATH=${LOCKSTEP_TRAIN_PYTHONPATH:-$(cd .. && pwd)}${PYTHONPATH:+:$PYTHONPATH}

"$PY" - <<'EOF' | tee "$OUT/env.txt"
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no device")
EOF

declare -A rc secs
part() {  # name, timeout, [VAR=value...] -- tests...
  local name=$1 limit=$2; shift 2
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  local t0=$SECONDS
  env "${envs[@]}" timeout "$limit" "$PY" -m unittest -v "$@" >"$OUT/$name.log" 2>&1
  rc[$name]=$?
  secs[$name]=$((SECONDS - t0))
  echo "$name: rc ${rc[$name]} in ${secs[$name]} s: $(grep -E '^(OK|FAILED)' "$OUT/$name.log" | tail -1)"
}
part unit 240 -- test_protocol test_state test_reduce test_job
part migration_cpu 140 -- test_migration
part migration_cuda 160 LOCKSTEP_TEST_DEVICE=cuda -- test_migration
part faults_cpu 140 -- test_faults
printf '{"check":"lockstep_train-gpu","torch":"%s"' "$(awk '{print $2}' "$OUT/env.txt")"
for n in unit migration_cpu migration_cuda faults_cpu; do printf ',"%s":{"rc":%s,"s":%s}' "$n" "${rc[$n]}" "${secs[$n]}"; done
echo "}"
