#!/usr/bin/env bash
# migration-k8s (issue 23 §4): live rank migration of a TrainingJob on real kubelet +
# containerd nodes, training really running (4 ranks + 1 hot spare pod, torch 1.13 gloo,
# e2e/workloads/migration_train.py from the lockstep-train image). It runs
# e2e/tests/test-train-pods.sh, which asserts everything it reports (job finished, no
# step lost or twice, healthy pods kept, bit identity with a fault-free DDP run), with
# one job per trigger, and reports per trigger the time from the fault to the next
# full-size committed step (the spare's first step: every rank took part).
#
#   sudo e2e/bench/migration-k8s.sh [--state DIR] [--steps N] [--rounds N] [--triggers LIST]
#
# Triggers (--triggers, comma-separated; default all), each in its own job, one after the
# other, in one cluster; the JSON key is lockstep.<key>:
#   kill      kill-rank2          the rank's process SIGKILLed from the host (pid from the node's containerd)
#   delete    delete-rank1        the rank's pod deleted (kubectl delete pod, grace 1 s)
#   kill0     kill-rank0          rank 0's process SIGKILLed
#   drain     drain-rank1         `kubectl drain` of rank 1's node (planned; every rank there moves)
#   notready  notready-rank2      the kubelet of rank 2's node stopped (SIGSTOP): NotReady after the
#                                 node-monitor-grace-period (50 s in the test cluster), then unplanned
#   drain-op  drain-rank1+op      the drain with the operator SIGKILLed once it annotated (restarted 3 s later)
#   kill-coord kill-rank2+coord   the kill with the coordinator's process SIGKILLed 1 s after it
# Not measured (issue 23): the GPU early warning on a real node, TrainJob/PyTorchJob, the
# coordinator's pod deleted (its pod IP is the ranks' address here: no DNS, no Service
# proxy), and the kubeflow_default arm (the same fault under Kubeflow's own behaviour).
# --steps (default 900): the NotReady verdict alone takes 50 s, so the jobs train long
# enough for it (0.1 s a step at least).
# Output: a table (one row per trigger and round) and one JSON line
#   {"lockstep": {"<trigger>": {fault_to_step_s, lost_steps, healthy_restarts,
#    bit_identical, rounds: [...]}}, "train_image": {...}}
# fault_to_step_s is the median over rounds; rounds lists every round's value.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
state=/tmp/lockstep-migration-k8s steps=900 rounds=1 triggers=kill,delete,kill0,drain,notready,drain-op,kill-coord
while (($#)); do
  case $1 in
    --state) state=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --triggers) triggers=$2; shift 2 ;;
    -h | --help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "migration-k8s: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $(id -u) -eq 0 ]] || { echo "migration-k8s: needs root (real nodes)" >&2; exit 1; }
declare -A fault=([kill]="k kill:2@40" [delete]="d delete:1@40" [kill0]="z kill:0@40" [drain]="r drain:1@40"
  [notready]="n notready:2@40" [drain-op]="o drain:1@40+op" [kill-coord]="c kill:2@40+coord")
IFS=, read -ra picked <<<"$triggers"
scen=""
for ((i = 0; i < rounds; i++)); do
  for t in "${picked[@]}"; do
    [[ -n ${fault[$t]:-} ]] || { echo "migration-k8s: unknown trigger $t (${!fault[*]})" >&2; exit 2; }
    f=${fault[$t]}
    scen+="${scen:+;}${f%% *}$i ${f#* }"
  done
done
mkdir -p "$state"
out=$state/migration-k8s.out
TRAIN_PODS_STEPS=$steps TRAIN_PODS_SCENARIOS=$scen "$repo/e2e/tests/test-train-pods.sh" "$state" | tee "$out" >/dev/null
json=$(tail -n 1 "$out")
# The test's JSON has one key per trigger and job round (the last round wins a key):
# take every round from its "results" list instead.
jq -e '.results' <<<"$json" >/dev/null || { echo "migration-k8s: no results in the test's output" >&2; exit 1; }
printf '%-14s %6s %16s %11s %17s %14s\n' trigger round fault_to_step_s lost_steps healthy_restarts bit_identical
jq -r '.results[] | "\(.trigger) \(.job) \(.fault_to_step_s) \(.lost_steps) \(.healthy_restarts) \(.bit_identical)"' <<<"$json" |
  awk '{ printf "%-14s %6s %16s %11s %17s %14s\n", $1, $2, $3, $4, $5, $6 }'
jq -c '{lockstep: (.results | group_by(.trigger) | map({key: .[0].trigger, value: {
          fault_to_step_s: (map(.fault_to_step_s) | sort | .[(length - 1) / 2 | floor]),
          lost_steps: (map(.lost_steps) | add), healthy_restarts: (map(.healthy_restarts) | add),
          bit_identical: (map(.bit_identical) | all), rounds: map(.fault_to_step_s)}}) | from_entries),
        train_image: .train_image}' <<<"$json"
