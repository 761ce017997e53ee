#!/usr/bin/env bash
# Two FabricPolicies selecting the same node: reported as a conflict on the
# node's FabricHealth and on both policies, not fought over.
. "$(dirname "$0")/lib.sh"
operator_alive a || start_operator a
wait_for "converged" 60 healths_match_gpu_nodes

kubectl label node gpu-node-0 pool=special >/dev/null
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: lockstep.dev/v1alpha1
kind: FabricPolicy
metadata:
  name: special
spec:
  nodeSelector: {matchLabels: {pool: special}}
YAML
conflict_reported() {
  [[ $(kubectl get fabrichealth gpu-node-0 -o jsonpath='{.status.conditions[?(@.type=="PolicyConflict")].status}') == True ]] &&
    [[ $(kubectl get fabricpolicy special -o jsonpath='{.status.conflictingNodes}') == 1 ]] &&
    [[ $(kubectl get fabricpolicy default -o jsonpath='{.status.conditions[?(@.type=="Degraded")].reason}') == NodeConflict ]]
}
wait_for "the conflict is reported on the FabricHealth and both policies" 30 conflict_reported
# The node keeps the policy it already had; nothing flips back and forth.
[[ $(kubectl get fabrichealth gpu-node-0 -o jsonpath='{.metadata.labels.lockstep\.dev/policy}') == default ]] ||
  fail "the node changed policy"
rv1=$(kubectl get fabrichealth gpu-node-0 -o jsonpath='{.metadata.resourceVersion}')
sleep 3
rv2=$(kubectl get fabrichealth gpu-node-0 -o jsonpath='{.metadata.resourceVersion}')
[[ $rv1 == "$rv2" ]] || fail "the FabricHealth keeps being rewritten ($rv1 -> $rv2)"
kubectl get fabrichealth gpu-node-0 -o jsonpath='{.status.conditions[?(@.type=="PolicyConflict")].message}{"\n"}' >&2
pass "a node selected by two policies is reported as a conflict, without flapping"

kubectl delete fabricpolicy special >/dev/null
kubectl label node gpu-node-0 pool- >/dev/null
cleared() {
  [[ $(kubectl get fabrichealth gpu-node-0 -o jsonpath='{.status.conditions[?(@.type=="PolicyConflict")].status}') == False ]] &&
    [[ $(kubectl get fabricpolicy default -o jsonpath='{.status.conditions[?(@.type=="Degraded")].status}') == False ]]
}
wait_for "the conflict clears" 30 cleared
[[ -z $(kubectl -n $NS get daemonset lockstep-agent-special -o name 2>/dev/null) ]] ||
  wait_for "the special policy's DaemonSet is garbage collected" 60 bash -c "! kubectl -n $NS get daemonset lockstep-agent-special"
pass "deleting the second policy clears the conflict and its agent objects"
