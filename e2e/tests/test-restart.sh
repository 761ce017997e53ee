#!/usr/bin/env bash
# Kill the operator, change the world while it is down, start it again: no
# duplicates, state converges.
. "$(dirname "$0")/lib.sh"
operator_alive a || start_operator a
wait_for "converged before the kill" 60 healths_match_gpu_nodes

stop_operator a KILL
"$REPO/e2e/cluster/add-nodes" "$CLUSTER" --gpu 2 --prefix restart >/dev/null
kubectl delete fabrichealth gpu-node-3 >/dev/null
# The old leader's lease must expire (15 s) before the new process may lead.
start_operator a2
wait_for "converged after restart" 60 healths_match_gpu_nodes
[[ $(kubectl -n $NS get daemonset -l app.kubernetes.io/name=lockstep-agent -o name | wc -l) -eq 1 ]] ||
  fail "duplicate agent DaemonSets"
[[ $(kubectl -n $NS get configmap -l app.kubernetes.io/name=lockstep-agent -o name | wc -l) -eq 1 ]] ||
  fail "duplicate agent ConfigMaps"
pass "after a kill -9 and restart the operator converged without duplicates"

kubectl delete node restart-0 restart-1 >/dev/null
wait_for "healths follow the deletions" 30 healths_match_gpu_nodes
stop_operator a2 TERM
