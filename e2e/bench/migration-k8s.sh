#!/usr/bin/env bash
# migration-k8s (issue 23 §4): live rank migration of a TrainingJob on real kubelet +
# containerd nodes, training really running (4 ranks + 1 hot spare pod, torch 1.13 gloo,
# e2e/workloads/migration_train.py from the lockstep-train image). It runs
# e2e/tests/test-train-pods.sh, which asserts everything it reports (job finished, no
# step lost or twice, healthy pods kept, bit identity with a fault-free DDP run), with
# one job per trigger, and reports per trigger the time from the fault to the next
# full-size committed step (the spare's first step: every rank took part).
#
#   sudo e2e/bench/migration-k8s.sh [--state DIR] [--steps N] [--rounds N]
#
# Triggers measured (each in its own job, one after the other, in one cluster):
#   kill-rank2    the rank's process SIGKILLed from the host (pid from the node's containerd)
#   delete-rank1  the rank's pod deleted (kubectl delete pod, grace 1 s)
#   kill-rank0    rank 0's process SIGKILLed
# Not measured yet (issue 23): kubelet stopped (NotReady), drain, GPU early warning,
# TrainJob/PyTorchJob, and the kubeflow_default arm (the same fault under Kubeflow's
# own behaviour without Lockstep).
# Output: a table (one row per trigger and round) and one JSON line
#   {"lockstep": {"<trigger>": {fault_to_step_s, lost_steps, healthy_restarts,
#    bit_identical, rounds: [...]}}, "train_image": {...}}
# fault_to_step_s is the median over rounds.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
state=/tmp/lockstep-migration-k8s steps=160 rounds=1
while (($#)); do
  case $1 in
    --state) state=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -h | --help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "migration-k8s: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $(id -u) -eq 0 ]] || { echo "migration-k8s: needs root (real nodes)" >&2; exit 1; }
scen=""
for ((i = 0; i < rounds; i++)); do
  scen+="${scen:+;}k$i kill:2@40;d$i delete:1@40;z$i kill:0@40"
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
