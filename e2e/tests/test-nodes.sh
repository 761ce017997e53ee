#!/usr/bin/env bash
# Node lifecycle: a node added later gets its FabricHealth; a node deleted or
# relabelled out of the policy loses it.
. "$(dirname "$0")/lib.sh"
operator_alive a || start_operator a

"$REPO/e2e/cluster/add-nodes" "$CLUSTER" --gpu 1 --prefix late >/dev/null
wait_for "FabricHealth for the late node" 30 kubectl get fabrichealth late-0
pass "a node added later gets its FabricHealth"

kubectl delete node late-0 >/dev/null
wait_for "FabricHealth of the deleted node to go" 30 bash -c "! kubectl get fabrichealth late-0"
pass "a deleted node loses its FabricHealth"

kubectl label node gpu-node-7 nvidia.com/gpu.present- >/dev/null
wait_for "FabricHealth of the unselected node to go" 30 bash -c "! kubectl get fabrichealth gpu-node-7"
kubectl label node gpu-node-7 nvidia.com/gpu.present=true >/dev/null
wait_for "FabricHealth back when the node matches again" 30 kubectl get fabrichealth gpu-node-7
pass "relabelling a node out of and back into the policy follows it"
