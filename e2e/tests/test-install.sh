#!/usr/bin/env bash
# helm install + the operator (as the chart's ServiceAccount): agent pods on every
# GPU node and on no CPU node, one FabricHealth per GPU node, readable columns.
. "$(dirname "$0")/lib.sh"

start_operator a
wait_for "agent DaemonSet" 60 kubectl -n $NS get daemonset lockstep-agent-default
wait_for "one FabricHealth per GPU node" 60 healths_match_gpu_nodes

agent_nodes() {
  kubectl -n $NS get pods -l app.kubernetes.io/name=lockstep-agent -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort
}
all_gpu_nodes_have_running_agents() {
  [[ "$(agent_nodes)" == "$(gpu_nodes)" ]] &&
    [[ $(kubectl -n $NS get pods -l app.kubernetes.io/name=lockstep-agent --field-selector=status.phase=Running -o name | wc -l) -eq 8 ]]
}
wait_for "agent pods Running on exactly the 8 GPU nodes" 120 all_gpu_nodes_have_running_agents
agent_nodes | grep -q '^cpu-node' && fail "an agent pod landed on a CPU-only node"
pass "agents run on the 8 GPU nodes and no CPU node"

# The operator creates each FabricHealth, then writes its first status (READY Unknown,
# PHASE Pending: no agent has reported; kwok agents never do) in a second request.
fresh_status_written() { kubectl get fabrichealth gpu-node-0 --no-headers | grep -q 'Unknown .*Pending'; }
wait_for "gpu-node-0's FabricHealth says its agent has not reported" 30 fresh_status_written
out=$(kubectl get fabrichealth)
echo "$out" >&2
head -1 <<<"$out" | grep -Eq '^NAME +NODE +READY +PHASE +RAILS-UP +RAILS +FLAPS/H +CLOCK-ERR-NS +AUDIT +GPU +AGE' ||
  fail "kubectl get fabrichealth columns: $(head -1 <<<"$out")"
[[ $(grep -c '^gpu-node-' <<<"$out") -eq 8 ]] || fail "expected 8 FabricHealth rows"
grep -q 'gpu-node-0 .*Unknown .*Pending' <<<"$out" || fail "a fresh FabricHealth must say the agent has not reported"
pass "kubectl get fabrichealth shows 8 rows with the expected columns"

policy_ready() { [[ $(kubectl get fabricpolicy default -o jsonpath='{.status.nodes}') == 8/8 ]]; }
wait_for "FabricPolicy default reports 8/8 ready" 120 policy_ready
# Captured first: under pipefail, `kubectl ... | head -1` fails when head exits
# before kubectl's last write (SIGPIPE), as it did once on a loaded machine.
policies=$(kubectl get fabricpolicy)
echo "$policies" >&2
head -1 <<<"$policies" | grep -Eq '^NAME +NODES +READY +AGE' || fail "fabricpolicy columns: $(head -1 <<<"$policies")"
[[ $(kubectl get fabricpolicy default -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]] ||
  fail "FabricPolicy Ready condition"
pass "FabricPolicy status: 8/8 nodes, Ready"

# The operator acted with the chart's ServiceAccount, whose RBAC is least privilege.
[[ $(kubectl -n $NS get daemonset lockstep-agent-default -o jsonpath='{.metadata.managedFields[0].manager}') == lockstep-operator ]] ||
  fail "DaemonSet not applied by the lockstep-operator field manager"
as_sa=(--as=system:serviceaccount:$NS:lockstep-operator)
can_i() { kubectl auth can-i "${as_sa[@]}" "$@" 2>/dev/null || true; }
[[ $(can_i create daemonsets -n $NS) == yes ]] || fail "operator may not create its DaemonSets"
[[ $(can_i create daemonsets -n kube-system) == no ]] || fail "operator may create DaemonSets outside its namespace"
[[ $(can_i delete nodes) == no ]] || fail "operator may delete nodes"
[[ $(can_i get secrets -n $NS) == no ]] || fail "operator may read every Secret"
pass "operator runs with least-privilege RBAC"
