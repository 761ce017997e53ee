#!/usr/bin/env bash
# Restart the API server under a running operator: it reconnects and keeps working.
. "$(dirname "$0")/lib.sh"
start_operator r
wait_for "r leads" 40 bash -c "[[ \$(kubectl -n $NS get lease lockstep-operator -o jsonpath='{.spec.holderIdentity}') == r ]]"
wait_for "converged" 60 healths_match_gpu_nodes

"$REPO/e2e/cluster/restart-apiserver" "$CLUSTER" --down-for 3 >/dev/null
operator_alive r || fail "the operator died while the API server was down"
"$REPO/e2e/cluster/add-nodes" "$CLUSTER" --gpu 1 --prefix after-restart >/dev/null
wait_for "FabricHealth for a node added after the restart" 60 kubectl get fabrichealth after-restart-0
kubectl delete node after-restart-0 >/dev/null
wait_for "and its removal" 30 bash -c "! kubectl get fabrichealth after-restart-0"
operator_alive r || fail "the operator exited"
pass "the operator survived an API server restart and kept reconciling"
stop_operator r TERM
