#!/usr/bin/env bash
# Faults during a recovery (issue 20), every scenario of python/tests/support/fault_matrix.py
# over several seeds: 4 ranks and 2 hot spares (Adam, gloo) with the real coordinator; a rank
# dies, and during the recovery a second member is killed or stopped at a chosen phase. Each
# run is checked bit for bit against fault-free DDP and for steps committed once; the table
# gives the time from the first failure detected to training again after both. One JSON line.
#   python/bench/faults.sh COORDINATOR_BIN [SEEDS=3]
set -euo pipefail
BIN=$(realpath "${1:?usage: faults.sh path/to/lockstep-coordinator [seeds]}")
cd "$(dirname "$0")/../tests"
# The lockstep_train to measure: this checkout's (the workers import it by name).
export PYTHONPATH=${LOCKSTEP_TRAIN_PYTHONPATH:-$(cd .. && pwd)}${PYTHONPATH:+:$PYTHONPATH}
exec "${LOCKSTEP_PYTHON:-/usr/bin/python3}" -c 'import sys; from support import fault_matrix; sys.exit(fault_matrix.main())' \
  "$BIN" --seeds "${2:-3}"
