#!/usr/bin/env bash
# Least privilege against the real API server (RBAC, TokenRequest, the
# ValidatingAdmissionPolicy plugin):
#   - the probe key Secret: the chart renders none, the operator creates it;
#   - an agent token bound to no node may not write any FabricHealth; a token
#     bound to node X (Node-bound, or its pod's) writes X's status, not Y's;
#     the same for NodeAudits (spec.nodeName X);
#   - the agent and operator ServiceAccounts hold only the verbs the code uses;
#   - the agent DaemonSet: RuntimeDefault seccomp, no capability added.
# Status writes here are server-side dry runs: admission runs, nothing is stored.
. "$(dirname "$0")/lib.sh"

operator_alive a || start_operator a
wait_for "one FabricHealth per GPU node" 60 healths_match_gpu_nodes

# --- the probe key ---
wait_for "Secret lockstep-probe-key" 30 kubectl -n $NS get secret lockstep-probe-key
[[ $(kubectl -n $NS get secret lockstep-probe-key -o jsonpath='{.data.key}' | base64 -d | wc -c) -eq 32 ]] ||
  fail "the probe key Secret must hold 32 bytes in data.key"
[[ $(kubectl -n $NS get secret lockstep-probe-key -o jsonpath='{.metadata.labels.app\.kubernetes\.io/managed-by}') == lockstep-operator ]] ||
  fail "the probe key Secret was not created by the operator (the chart must render no key material)"
key_before=$(kubectl -n $NS get secret lockstep-probe-key -o jsonpath='{.data.key}')
start_operator rbac-restart  # a standby: it only ensures the Secret and waits for the lease
stop_operator rbac-restart
[[ $(kubectl -n $NS get secret lockstep-probe-key -o jsonpath='{.data.key}') == "$key_before" ]] ||
  fail "an operator start changed the existing probe key"
pass "the operator created the probe key Secret (32 bytes) and a restart kept it"

# --- as the agent, with its own tokens (not the admin's client certificate) ---
printf 'apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n' >"$STATE/no-credentials.kubeconfig"
as_token() { # as_token TOKEN KUBECTL-ARGS...
  local tok=$1; shift
  kubectl --kubeconfig="$STATE/no-credentials.kubeconfig" --server="$LOCKSTEP_APISERVER" \
    --certificate-authority="$LOCKSTEP_CA_CERT" --token="$tok" "$@"
}
write_status() { # write_status TOKEN NODE -> kubectl's output; fails when the write is refused
  as_token "$1" patch fabrichealth "$2" --subresource=status --type=merge --dry-run=server \
    -p "{\"status\":{\"lastReportTime\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\"}}" 2>&1
}
expect_denied() { # expect_denied LABEL MESSAGE-REGEX TOKEN NODE
  local out
  if out=$(write_status "$3" "$4"); then fail "$1: the write was allowed ($out)"; fi
  grep -Eq -- "$2" <<<"$out" || fail "$1: denied, but not with /$2/: $out"
  say "denied as expected: $1: $out"
}
expect_allowed() { # expect_allowed LABEL TOKEN NODE
  local out
  out=$(write_status "$2" "$3") || fail "$1: $out"
}
agent=lockstep-agent

unbound=$(kubectl -n $NS create token $agent --duration=10m)
as_token "$unbound" get fabrichealth gpu-node-0 -o name >/dev/null ||
  fail "the agent's token must authenticate and read FabricHealths (RBAC)"
expect_denied "a token bound to no node writes gpu-node-0" "carries no node name" "$unbound" gpu-node-0
pass "an agent token bound to no node may not write any FabricHealth"

node0=$(kubectl -n $NS create token $agent --duration=10m --bound-object-kind=Node --bound-object-name=gpu-node-0)
expect_allowed "the gpu-node-0 token writes gpu-node-0" "$node0" gpu-node-0
expect_denied "the gpu-node-0 token writes gpu-node-1" "may only write FabricHealth gpu-node-0, not gpu-node-1" \
  "$node0" gpu-node-1
pass "a token bound to node gpu-node-0 writes gpu-node-0's FabricHealth status and not gpu-node-1's"

# NodeAudits: the agent patches the status of its own node's only (the
# chart's agent-own-nodeaudits policy; RBAC alone would let it write any).
for n in gpu-node-0 gpu-node-1; do
  kubectl apply -f - >/dev/null <<YAML || fail "cannot create NodeAudit rbac.$n"
apiVersion: lockstep.dev/v1alpha1
kind: NodeAudit
metadata: {name: rbac.$n}
spec: {fleetAudit: rbac, nodeName: $n}
YAML
done
# A bare PATCH (dry run), as the agent writes it: `kubectl patch` would first GET the
# status subresource, which the agent's RBAC (patch only) rightly refuses.
write_audit() { # write_audit TOKEN NODEAUDIT -> the API server's answer; fails when refused
  local out
  out=$(curl -sS -w '\n%{http_code}' --cacert "$LOCKSTEP_CA_CERT" -H "Authorization: Bearer $1" \
    -H 'Content-Type: application/merge-patch+json' -X PATCH \
    "$LOCKSTEP_APISERVER/apis/lockstep.dev/v1alpha1/nodeaudits/$2/status?dryRun=All" \
    -d '{"status":{"phase":"Error","error":"rbac test"}}' 2>&1) || { echo "$out"; return 1; }
  head -n -1 <<<"$out"
  [[ $(tail -n 1 <<<"$out") == 2?? ]]
}
out=$(write_audit "$node0" rbac.gpu-node-0) || fail "the gpu-node-0 token cannot write NodeAudit rbac.gpu-node-0: $out"
if out=$(write_audit "$node0" rbac.gpu-node-1); then fail "the gpu-node-0 token wrote NodeAudit rbac.gpu-node-1 ($out)"; fi
grep -q "may only write its own node's NodeAudits, not rbac.gpu-node-1" <<<"$out" || fail "denied, but not by the policy: $out"
if out=$(write_audit "$unbound" rbac.gpu-node-0); then fail "a token bound to no node wrote a NodeAudit ($out)"; fi
grep -q "carries no node name" <<<"$out" || fail "denied, but not by the policy: $out"
kubectl delete nodeaudit rbac.gpu-node-0 rbac.gpu-node-1 >/dev/null
pass "a token bound to gpu-node-0 writes gpu-node-0's NodeAudit status, not gpu-node-1's; an unbound token neither"

# The credentials a real agent has: its pod's token, which carries the pod's node.
agent_pod_on() {
  kubectl -n $NS get pods -l app.kubernetes.io/name=lockstep-agent --field-selector "spec.nodeName=$1" \
    -o jsonpath='{.items[0].metadata.name}'
}
wait_for "an agent pod on gpu-node-2" 60 bash -c "[[ -n \$(kubectl -n $NS get pods -l app.kubernetes.io/name=lockstep-agent --field-selector spec.nodeName=gpu-node-2 -o name) ]]"
pod=$(agent_pod_on gpu-node-2)
pod_token=$(kubectl -n $NS create token $agent --duration=10m --bound-object-kind=Pod --bound-object-name="$pod")
expect_allowed "the token of pod $pod writes gpu-node-2" "$pod_token" gpu-node-2
expect_denied "the token of pod $pod writes gpu-node-3" "may only write FabricHealth gpu-node-2, not gpu-node-3" \
  "$pod_token" gpu-node-3
pass "an agent pod's token writes its own node's FabricHealth status and not another's"

# --- RBAC: only the verbs the code uses ---
check_can() { # check_can WHO EXPECTED(yes|no) CAN-I-ARGS...
  local who=$1 want=$2 got; shift 2
  if [[ $who == agent ]]; then
    got=$(as_token "$node0" auth can-i "$@" 2>/dev/null || true)
  else
    got=$(kubectl auth can-i --as=system:serviceaccount:$NS:lockstep-operator "$@" 2>/dev/null || true)
  fi
  [[ $got == "$want" ]] || fail "$who: can-i $* is '$got', expected $want"
}
check_can agent yes get fabrichealths
check_can agent yes watch fabrichealths
check_can agent yes patch fabrichealths --subresource=status
check_can agent no update fabrichealths
check_can agent no create fabrichealths
check_can agent no delete fabrichealths
check_can agent yes get nodes
check_can agent no list nodes
check_can agent no list fabricpolicies
check_can agent no get configmaps -n $NS
check_can agent no create events -n $NS
check_can agent yes create events -n default  # flap alerts, about its (cluster-scoped) FabricHealth
check_can agent no delete events -n default
check_can agent no get secrets -n $NS
pass "agent RBAC: read FabricHealths and a Node, write FabricHealth status and Events in default; nothing else"

# TrainingJobs (any namespace): rank and coordinator pods created, deleted
# and patched (the migrate annotation), the coordinator's objects and the
# ranks' PodDisruptionBudget server-side applied, the coordinator role bound.
check_can operator yes create pods -n default
check_can operator yes delete pods -n default
check_can operator yes list pods
check_can operator no update pods -n default
check_can operator yes patch pods -n default
check_can operator no create pods --subresource=eviction -n default
check_can operator yes patch poddisruptionbudgets -n default
check_can operator yes list poddisruptionbudgets -A
check_can operator no delete poddisruptionbudgets -n default
check_can operator no update poddisruptionbudgets -n default
check_can operator yes list trainingjobs -A
check_can operator no update trainingjobs -n default
check_can operator yes patch trainingjobs --subresource=status -n default
check_can operator yes patch services -n default
check_can operator no delete services -n default
check_can operator yes patch rolebindings -n default
check_can operator no delete rolebindings -n default
check_can operator yes bind clusterroles/lockstep-coordinator
check_can operator no bind clusterroles/cluster-admin
check_can operator no escalate clusterroles/lockstep-coordinator
check_can operator no update fabricpolicies
check_can operator no patch fabricpolicies
check_can operator yes patch fabricpolicies --subresource=status
check_can operator yes list fabricpolicies
check_can operator yes create fabrichealths
check_can operator no patch fabrichealths
check_can operator yes patch daemonsets -n $NS
check_can operator no delete daemonsets -n $NS
check_can operator no delete configmaps -n $NS
check_can operator yes get secrets/lockstep-probe-key -n $NS
check_can operator no get secrets/other -n $NS
check_can operator no list secrets -n $NS
check_can operator yes create secrets -n $NS
check_can operator yes update leases/lockstep-operator -n $NS
check_can operator no update leases/other -n $NS
check_can operator no create events.events.k8s.io -n $NS
pass "operator RBAC: TrainingJob pods and coordinator objects only; no FabricPolicy spec writes, object deletes or other Secrets"

# --- the agent pods ---
ds() { kubectl -n $NS get daemonset lockstep-agent-default -o jsonpath="$1"; }
[[ $(ds '{.spec.template.spec.securityContext.seccompProfile.type}') == RuntimeDefault ]] ||
  fail "agent pods must run with seccompProfile RuntimeDefault"
# NET_ADMIN only: fabric failover (on by default) installs the agent's own routes.
[[ $(ds '{.spec.template.spec.containers[0].securityContext.capabilities.add}') == '["NET_ADMIN"]' ]] ||
  fail "agent container must add only NET_ADMIN (got $(ds '{.spec.template.spec.containers[0].securityContext.capabilities.add}'))"
[[ $(ds '{.spec.template.spec.containers[0].securityContext.capabilities.drop}') == '["ALL"]' ]] ||
  fail "agent container must drop ALL capabilities"
pass "agent pods: RuntimeDefault seccomp, all capabilities dropped, only NET_ADMIN added"
