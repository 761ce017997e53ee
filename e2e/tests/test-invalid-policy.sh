#!/usr/bin/env bash
# Invalid FabricPolicies are rejected by the API server with a clear message.
. "$(dirname "$0")/lib.sh"

# expect_rejected NAME SPEC_YAML MESSAGE_REGEX
expect_rejected() {
  local name=$1 spec=$2 want=$3 out
  if out=$(kubectl apply -f - 2>&1 <<YAML
apiVersion: lockstep.dev/v1alpha1
kind: FabricPolicy
metadata:
  name: $name
spec:
$spec
YAML
  ); then
    kubectl delete fabricpolicy "$name" >/dev/null 2>&1 || true
    fail "$name was accepted"
  fi
  grep -Eq "$want" <<<"$out" || fail "$name: message does not say what is wrong: $out"
  say "rejected $name: $(grep -Eo "$want.*" <<<"$out" | head -c 200)"
}

expect_rejected zero-interval "  probe: {intervalMs: 0}" "spec.probe.intervalMs"
expect_rejected negative-peers "  probe: {peersPerNode: -1}" "spec.probe.peersPerNode"
expect_rejected huge-bound "  clockSync: {maxErrorBoundNs: 2000000000}" "spec.clockSync.maxErrorBoundNs"
expect_rejected bad-label-key "  nodeSelector: {matchLabels: {'bad key': x}}" "every key must be a label key"
expect_rejected bad-operator "  nodeSelector: {matchExpressions: [{key: a, operator: Near}]}" "Unsupported value: \"Near\""
expect_rejected in-without-values "  nodeSelector: {matchExpressions: [{key: a, operator: In}]}" "values"
expect_rejected bad-port "  probe: {port: 80}" "spec.probe.port"
expect_rejected unknown-field "  probe: {intervalMillis: 5}" "unknown field|intervalMillis"
expect_rejected bad-type "  clockSync: {enabled: lots}" "spec.clockSync.enabled"
[[ -z $(kubectl get fabricpolicy -o name | grep -v '/default$' || true) ]] || fail "an invalid policy was stored"
pass "invalid FabricPolicies are rejected with clear messages"

# A policy the CRD accepts but the API server cannot turn into a DaemonSet (a
# toleration key that is no label key): Degraded, the spec field named, and
# not retried hot.
operator_alive a || start_operator a
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: lockstep.dev/v1alpha1
kind: FabricPolicy
metadata:
  name: ds-rejected
spec:
  nodeSelector: {matchLabels: {lockstep.dev/e2e-none: "true"}}
  tolerations: [{key: "bad key!", operator: Exists}]
YAML
degraded_named() {
  [[ $(kubectl get fabricpolicy ds-rejected -o jsonpath='{.status.conditions[?(@.type=="Degraded")].message}') == spec.tolerations:* ]]
}
wait_for "the rejected DaemonSet is reported on the policy" 30 degraded_named
applies1=$(operator_metric a 'lockstep_kube_requests_total{verb="apply"')
sleep 3
applies2=$(operator_metric a 'lockstep_kube_requests_total{verb="apply"')
(( applies2 - applies1 <= 2 )) || fail "the rejected DaemonSet is retried hot ($((applies2 - applies1)) applies in 3 s)"
say "$(kubectl get fabricpolicy ds-rejected -o jsonpath='{.status.conditions[?(@.type=="Degraded")].message}' | head -c 300)"
kubectl delete fabricpolicy ds-rejected >/dev/null
pass "a policy the API server cannot turn into a DaemonSet is Degraded with the field named, not retried hot"
