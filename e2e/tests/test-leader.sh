#!/usr/bin/env bash
# Two replicas: only the leader writes; kill it and the other takes over within
# the lease.
. "$(dirname "$0")/lib.sh"
for n in a a2; do [[ -f $CLUSTER/pids/operator-$n.pid ]] && stop_operator $n TERM; done

start_operator one
wait_for "one is the leader" 30 bash -c "[[ \$(kubectl -n $NS get lease lockstep-operator -o jsonpath='{.spec.holderIdentity}') == one ]]"
start_operator two
wait_for "two has synced its caches" 30 curl -fsS "http://127.0.0.1:$(operator_port two health)/readyz"

"$REPO/e2e/cluster/add-nodes" "$CLUSTER" --gpu 1 --prefix leader >/dev/null
wait_for "the leader handles a new node" 30 kubectl get fabrichealth leader-0
writes_by_two=$(( $(operator_metric two 'lockstep_kube_requests_total{verb="create"') +
                  $(operator_metric two 'lockstep_kube_requests_total{verb="apply"') +
                  $(operator_metric two 'lockstep_kube_requests_total{verb="patch"') +
                  $(operator_metric two 'lockstep_kube_requests_total{verb="delete"') ))
[[ $writes_by_two -eq 0 ]] || fail "the standby replica wrote $writes_by_two times"
# A standby sets keys aside until it leads: no reconcile runs, none is retried.
reconciles_by_two=$(operator_metric two 'lockstep_reconcile_total{')
[[ $reconciles_by_two -eq 0 ]] || fail "the standby replica ran $reconciles_by_two reconciles"
[[ $(operator_metric one 'lockstep_operator_leader') -eq 1 && $(operator_metric two 'lockstep_operator_leader') -eq 0 ]] ||
  fail "leader gauge"
pass "only the leader writes"

t0=$SECONDS
stop_operator one KILL
wait_for "two takes over" 30 bash -c "[[ \$(kubectl -n $NS get lease lockstep-operator -o jsonpath='{.spec.holderIdentity}') == two ]]"
took=$((SECONDS - t0))
((took <= 19)) || fail "takeover took ${took}s (lease 15 s + retry 2 s)"
kubectl delete node leader-0 >/dev/null
wait_for "the new leader handles a deletion" 30 bash -c "! kubectl get fabrichealth leader-0"
pass "the standby took over ${took}s after the leader died (lease 15 s)"

# A graceful stop releases the lease at once.
start_operator three
stop_operator two TERM
t0=$SECONDS
wait_for "three takes over after a release" 15 bash -c "[[ \$(kubectl -n $NS get lease lockstep-operator -o jsonpath='{.spec.holderIdentity}') == three ]]"
pass "after a graceful stop the successor led within $((SECONDS - t0))s"
stop_operator three TERM
