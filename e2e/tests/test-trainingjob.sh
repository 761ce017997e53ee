#!/usr/bin/env bash
# The TrainingJob controller against the real API server, kwok nodes and the
# kube-controller-manager's garbage collector, with the operator running as
# the chart's ServiceAccount (so the chart's RBAC is what is exercised):
#   - invalid TrainingJobs are rejected with a message naming the field;
#   - a job with 2 replicas + 1 spare gets its rank pods (labels, env,
#     restartPolicy Never), the coordinator pod (flags, ConfigMap, RBAC bound
#     in the job's namespace only), its Service and the spare pod manifest;
#   - status readyReplicas=2 and phase Running once kwok runs the pods;
#     `kubectl get trainingjob` shows RANKS, SPARES, MIGRATIONS, LAST;
#   - migration triggers: the ranks' PodDisruptionBudget (maxUnavailable 0)
#     refuses a drain's eviction; with spares standing in for the coordinator's,
#     GPUHealthy False on rank 0's FabricHealth annotates it early-warning, and
#     the cordon of rank 1's node annotates it drain once a spare is free
#     (MigrationBlocked NoSpare until then);
#   - a pytorchJobRef to a PyTorchJob that is not there (the operator does not
#     watch PyTorchJobs here) is reported, naming the field, nothing created;
#   - a template the API server rejects as a Pod: status names the field;
#   - deleting the job garbage-collects everything it owns.
. "$(dirname "$0")/lib.sh"

operator_alive a || start_operator a
TJ=tj-e2e
kubectl get namespace $TJ >/dev/null 2>&1 || kubectl create namespace $TJ >/dev/null

# --- invalid TrainingJobs ---
# expect_rejected NAME SPEC_YAML MESSAGE_REGEX
expect_rejected() {
  local name=$1 spec=$2 want=$3 out
  if out=$(kubectl apply -f - 2>&1 <<YAML
apiVersion: lockstep.dev/v1alpha1
kind: TrainingJob
metadata: {name: $name, namespace: $TJ}
spec:
$spec
YAML
  ); then
    kubectl -n $TJ delete trainingjob "$name" >/dev/null 2>&1 || true
    fail "$name was accepted"
  fi
  grep -Eq -- "$want" <<<"$out" || fail "$name: message does not name the field: $out"
  say "rejected $name: $(grep -Eo -- "$want.*" <<<"$out" | head -c 200)"
}
good_template="  template: {spec: {containers: [{name: train, image: trainer:e2e}]}}"
expect_rejected zero-replicas "  replicas: 0
$good_template" "spec.replicas"
expect_rejected no-containers "  replicas: 2
  template: {spec: {containers: []}}" "spec.template.spec.containers"
expect_rejected both-sources "  replicas: 2
  pytorchJobRef: {name: x}
$good_template" "exactly one of spec.template, spec.pytorchJobRef or spec.trainJobRef"
expect_rejected a-training-job-name-of-forty-six-characters-xy "  replicas: 1
$good_template" "metadata.name must be at most 45 characters"
[[ -z $(kubectl -n $TJ get trainingjobs -o name) ]] || fail "an invalid TrainingJob was stored"
pass "invalid TrainingJobs are rejected with the field named"

# --- a job with 2 ranks and 1 spare ---
t0=$SECONDS
kubectl apply -f - >/dev/null <<YAML
apiVersion: lockstep.dev/v1alpha1
kind: TrainingJob
metadata: {name: demo, namespace: $TJ}
spec:
  replicas: 2
  spares: 1
  migration: {maxConcurrent: 2}  # rank 1 may move while rank 0 is moving (the triggers below)
  template:
    metadata: {labels: {team: e2e}}
    spec:
      nodeSelector: {nvidia.com/gpu.present: "true"}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers: [{name: train, image: trainer:e2e, env: [{name: KEEP, value: "1"}]}]
YAML
wait_for "rank pods demo-rank-0 and demo-rank-1" 30 kubectl -n $TJ get pod demo-rank-0 demo-rank-1
wait_for "coordinator pod" 30 kubectl -n $TJ get pod demo-coordinator

pod_json=$(kubectl -n $TJ get pod demo-rank-1 -o json)
env_of() { jq -r --arg n "$2" '.spec.containers[0].env[] | select(.name == $n) | (.value // .valueFrom.fieldRef.fieldPath)' <<<"$1"; }
[[ $(jq -r '.metadata.labels["lockstep.dev/job"]' <<<"$pod_json") == demo ]] || fail "rank pod lacks lockstep.dev/job=demo"
[[ $(jq -r '.metadata.labels["lockstep.dev/role"]' <<<"$pod_json") == rank ]] || fail "rank pod lacks lockstep.dev/role=rank"
[[ $(jq -r '.metadata.labels["lockstep.dev/rank"]' <<<"$pod_json") == 1 ]] || fail "rank pod lacks lockstep.dev/rank=1"
[[ $(jq -r '.metadata.labels.team' <<<"$pod_json") == e2e ]] || fail "rank pod lost the template's labels"
[[ $(jq -r '.spec.restartPolicy' <<<"$pod_json") == Never ]] || fail "rank pod restartPolicy is not Never"
[[ $(jq -r '.metadata.ownerReferences[0].kind + "/" + (.metadata.ownerReferences[0].controller|tostring)' <<<"$pod_json") == TrainingJob/true ]] ||
  fail "rank pod is not controlled by its TrainingJob"
[[ $(env_of "$pod_json" LOCKSTEP_COORDINATOR) == http://demo-coordinator.$TJ.svc:8470 ]] || fail "LOCKSTEP_COORDINATOR: $(env_of "$pod_json" LOCKSTEP_COORDINATOR)"
[[ $(env_of "$pod_json" LOCKSTEP_ROLE) == rank ]] || fail "LOCKSTEP_ROLE"
[[ $(env_of "$pod_json" LOCKSTEP_RANK) == 1 ]] || fail "LOCKSTEP_RANK"
[[ $(env_of "$pod_json" LOCKSTEP_WORLD_SIZE) == 2 ]] || fail "LOCKSTEP_WORLD_SIZE"
[[ $(env_of "$pod_json" LOCKSTEP_POD_NAME) == metadata.name ]] || fail "LOCKSTEP_POD_NAME"
[[ $(env_of "$pod_json" LOCKSTEP_POD_UID) == metadata.uid ]] || fail "LOCKSTEP_POD_UID"
[[ $(env_of "$pod_json" KEEP) == 1 ]] || fail "the template's own env was dropped"
# spec.detection's defaults, as the API server filled them in.
[[ $(env_of "$pod_json" LOCKSTEP_HEARTBEAT_INTERVAL) == 0.5 && $(env_of "$pod_json" LOCKSTEP_HANG_TIMEOUT) == 10 ]] ||
  fail "LOCKSTEP_HEARTBEAT_INTERVAL / LOCKSTEP_HANG_TIMEOUT from spec.detection"
pass "rank pods: labels, owner, restartPolicy Never and the rank environment"

coord=$(kubectl -n $TJ get pod demo-coordinator -o json)
args=$(jq -r '.spec.containers[0].args | join(" ")' <<<"$coord")
[[ $args == "--job demo --world-size 2 --listen 0.0.0.0:8470 --advertise-url http://demo-coordinator.$TJ.svc:8470 --kube --namespace $TJ --spares 1 --spare-pod-template /etc/lockstep/spare-pod.json --state-configmap demo-coordinator-state --fence kube --pid-check off --heartbeat-timeout 3000ms" ]] ||
  fail "coordinator args: $args"
[[ $(jq -r '.spec.serviceAccountName' <<<"$coord") == demo-coordinator ]] || fail "coordinator ServiceAccount"
[[ $(jq -r '.spec.volumes[0].configMap.name' <<<"$coord") == demo-coordinator ]] || fail "coordinator ConfigMap volume"
[[ $(kubectl -n $TJ get service demo-coordinator -o jsonpath='{.spec.ports[0].port}') == 8470 ]] || fail "Service port"
[[ $(kubectl -n $TJ get service demo-coordinator -o jsonpath='{.spec.selector.lockstep\.dev/role}') == coordinator ]] ||
  fail "Service selector"
spare=$(kubectl -n $TJ get configmap demo-coordinator -o jsonpath='{.data.spare-pod\.json}')
[[ $(jq -r '.metadata.generateName + " " + .metadata.labels["lockstep.dev/role"]' <<<"$spare") == "demo-spare- spare" ]] ||
  fail "spare-pod.json: $(head -c 300 <<<"$spare")"
[[ $(env_of "$spare" LOCKSTEP_ROLE) == spare ]] || fail "the spare manifest's LOCKSTEP_ROLE"
# The spare manifest is a Pod the API server accepts (what the coordinator will create).
jq --arg n demo-spare-dryrun 'del(.metadata.generateName) | .metadata.name = $n' <<<"$spare" |
  kubectl create --dry-run=server -f - >/dev/null || fail "the API server rejects spare-pod.json"
[[ $(kubectl -n $TJ get configmap demo-coordinator-state -o jsonpath='{.metadata.ownerReferences[0].kind}') == TrainingJob ]] ||
  fail "the coordinator's state ConfigMap is not owned by the job"
[[ $(kubectl -n $TJ get rolebinding demo-coordinator -o jsonpath='{.roleRef.name}') == lockstep-coordinator ]] ||
  fail "RoleBinding roleRef"
can() { kubectl auth can-i --as=system:serviceaccount:$TJ:demo-coordinator "$@" 2>/dev/null || true; }
[[ $(can create pods -n $TJ) == yes && $(can delete pods -n $TJ) == yes && $(can update configmaps -n $TJ) == yes ]] ||
  fail "the coordinator cannot manage pods and its state ConfigMap in its namespace"
[[ $(can create pods -n default) == no && $(can get secrets -n $TJ) == no ]] ||
  fail "the coordinator has rights beyond its namespace's pods, ConfigMaps and Events"
pass "coordinator: pod with the job's flags, ConfigMap with spare-pod.json, Service :8470, RBAC in its namespace only"

running() {
  [[ $(kubectl -n $TJ get trainingjob demo -o jsonpath='{.status.phase}/{.status.readyReplicas}') == Running/2 ]]
}
wait_for "TrainingJob demo Running with readyReplicas=2" 60 running
[[ $(kubectl -n $TJ get trainingjob demo -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]] ||
  fail "Ready condition is not True"
out=$(kubectl -n $TJ get trainingjob demo)
echo "$out" >&2
head -1 <<<"$out" | grep -Eq '^NAME +REPLICAS +RANKS +SPARES +MIGRATIONS +LAST +PHASE +AGE' ||
  fail "kubectl get trainingjob columns: $(head -1 <<<"$out")"
pass "TrainingJob demo Running, readyReplicas 2, $((SECONDS - t0)) s after create"

# --- migration triggers: the PodDisruptionBudget, early-warning, drain ---
t0=$SECONDS
node0=$(kubectl -n $TJ get pod demo-rank-0 -o jsonpath='{.spec.nodeName}')
node1=$(kubectl -n $TJ get pod demo-rank-1 -o jsonpath='{.spec.nodeName}')
triggers_cleanup() {
  kubectl uncordon "$node1" >/dev/null 2>&1 || true
  if [[ -n ${warned:-} ]]; then
    kubectl delete fabrichealth "$node0" --wait=true >/dev/null 2>&1 || true
    wait_for "the operator to recreate the FabricHealths" 60 healths_match_gpu_nodes
  fi
}
trap triggers_cleanup EXIT
[[ $(kubectl -n $TJ get pdb demo-ranks -o jsonpath='{.spec.maxUnavailable}/{.spec.selector.matchLabels.lockstep\.dev/role}/{.metadata.ownerReferences[0].kind}') == 0/rank/TrainingJob ]] ||
  fail "PodDisruptionBudget demo-ranks: $(kubectl -n $TJ get pdb demo-ranks -o json 2>&1 | head -c 400)"
# make_spare NAME: a spare as the coordinator makes it (from its spare-pod.json),
# run by kwok; kept off the ranks' nodes (a spare on a cordoned or warned node
# is no spare to move to).
make_spare() {
  jq --arg n "$1" --arg n0 "$node0" --arg n1 "$node1" 'del(.metadata.generateName) | .metadata.name = $n |
    .spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms =
      [{matchExpressions: [{key: "kubernetes.io/hostname", operator: "NotIn", values: [$n0, $n1]}]}]' <<<"$spare" |
    kubectl -n $TJ create -f - >/dev/null
}
migrate_of() { kubectl -n $TJ get pod "$1" -o jsonpath='{.metadata.annotations.lockstep\.dev/migrate}'; }
annotated() { [[ $(migrate_of "$1") == "$2" ]]; }  # annotated POD TRIGGER
blocked() {  # blocked STATUS/REASON
  [[ $(kubectl -n $TJ get trainingjob demo -o jsonpath='{.status.conditions[?(@.type=="MigrationBlocked")].status}/{.status.conditions[?(@.type=="MigrationBlocked")].reason}') == "$1" ]]
}
spares() { [[ $(kubectl -n $TJ get trainingjob demo -o jsonpath='{.status.availableSpares}') == "$1" ]]; }
triggered() { operator_metric a "lockstep_trainingjob_migration_triggers_total{trigger=\"$1\"}"; }
drains0=$(triggered drain) warnings0=$(triggered early-warning)
make_spare demo-spare-e2e-a
wait_for "one spare available" 30 spares 1
# No agent runs here: the test writes what an agent reports for rank 0's node.
warned=1
kubectl patch fabrichealth "$node0" --subresource=status --type=merge -p \
  '{"status":{"conditions":[{"type":"GPUHealthy","status":"False","reason":"EarlyWarning","message":"GPU 0 (GPU-e2e) Xid 79","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}' >/dev/null
wait_for "demo-rank-0 annotated early-warning" 10 annotated demo-rank-0 early-warning
reason=$(kubectl -n $TJ get pod demo-rank-0 -o jsonpath='{.metadata.annotations.lockstep\.dev/migrate-reason}')
[[ $reason == "node $node0 GPUHealthy False (EarlyWarning): GPU 0 (GPU-e2e) Xid 79" ]] || fail "early-warning reason: $reason"
pass "GPUHealthy False on $node0: demo-rank-0 annotated early-warning ($reason)"

# The drain cordons rank 1's node, then its eviction is refused (the PDB):
# the one spare is taken by rank 0's migration, so nothing is annotated and
# the job says why.
if out=$(kubectl drain "$node1" --pod-selector=lockstep.dev/job=demo,lockstep.dev/role=rank --ignore-daemonsets \
  --timeout=3s 2>&1); then
  fail "kubectl drain evicted a rank pod: $out"
fi
grep -q "disruption budget" <<<"$out" || fail "the drain failed, but not on the PodDisruptionBudget: $(tail -c 400 <<<"$out")"
kubectl -n $TJ get pod demo-rank-1 >/dev/null || fail "demo-rank-1 was evicted"
wait_for "MigrationBlocked True (NoSpare)" 10 blocked True/NoSpare
[[ -z $(migrate_of demo-rank-1) ]] || fail "demo-rank-1 annotated without a spare: $(migrate_of demo-rank-1)"
msg=$(kubectl -n $TJ get trainingjob demo -o jsonpath='{.status.conditions[?(@.type=="MigrationBlocked")].message}')
pass "drain of $node1: eviction refused by the PodDisruptionBudget, MigrationBlocked: $(head -c 200 <<<"$msg")"

make_spare demo-spare-e2e-b
wait_for "demo-rank-1 annotated drain" 30 annotated demo-rank-1 drain
reason=$(kubectl -n $TJ get pod demo-rank-1 -o jsonpath='{.metadata.annotations.lockstep\.dev/migrate-reason}')
[[ $reason == "node $node1 cordoned" ]] || fail "drain reason: $reason"
wait_for "MigrationBlocked False" 10 blocked False/NotBlocked
[[ $(migrate_of demo-rank-0) == early-warning ]] || fail "demo-rank-0's annotation was changed: $(migrate_of demo-rank-0)"
[[ $(triggered drain)/$(triggered early-warning) == $((drains0 + 1))/$((warnings0 + 1)) ]] ||
  fail "lockstep_trainingjob_migration_triggers_total: drain $drains0 -> $(triggered drain), early-warning $warnings0 -> $(triggered early-warning)"
triggers_cleanup
warned=
trap - EXIT
pass "a second spare: demo-rank-1 annotated drain ($reason), MigrationBlocked False, $((SECONDS - t0)) s for the triggers"

# --- pytorchJobRef to a missing PyTorchJob: reported, nothing created, not retried hot ---
kubectl apply -f - >/dev/null <<YAML
apiVersion: lockstep.dev/v1alpha1
kind: TrainingJob
metadata: {name: bert, namespace: $TJ}
spec: {replicas: 2, pytorchJobRef: {name: bert}}
YAML
unsupported() {
  [[ $(kubectl -n $TJ get trainingjob bert -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}') == KubeflowJobNotFound ]]
}
wait_for "the pytorchJobRef job reported as not found" 30 unsupported
msg=$(kubectl -n $TJ get trainingjob bert -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')
[[ $msg == spec.pytorchJobRef.name* ]] || fail "the condition does not name spec.pytorchJobRef.name: $msg"
[[ -z $(kubectl -n $TJ get pods -l lockstep.dev/job=bert -o name) ]] || fail "pods were created for the pytorchJobRef job"
kubectl -n $TJ delete trainingjob bert >/dev/null
pass "a pytorchJobRef to a missing PyTorchJob is reported ($msg)"

# --- a template the CRD lets through but the API server rejects as a Pod ---
kubectl apply -f - >/dev/null <<YAML
apiVersion: lockstep.dev/v1alpha1
kind: TrainingJob
metadata: {name: badpod, namespace: $TJ}
spec: {replicas: 1, spares: 0, template: {spec: {containers: [{name: Bad_Name, image: trainer:e2e}]}}}
YAML
rejected() {
  [[ $(kubectl -n $TJ get trainingjob badpod -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}') == InvalidTemplate ]]
}
wait_for "the rejected rank pod reported on the job" 30 rejected
msg=$(kubectl -n $TJ get trainingjob badpod -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')
[[ $msg == spec.template.spec.containers\[0\].name:* ]] || fail "the condition does not name the template field: $msg"
kubectl -n $TJ get events --field-selector involvedObject.name=badpod,reason=InvalidTemplate -o name | grep -q . ||
  fail "no InvalidTemplate Event on the job"
kubectl -n $TJ delete trainingjob badpod >/dev/null
pass "a rank pod the API server rejects is reported on the job with the field named ($(head -c 160 <<<"$msg"))"

# --- deleting the job garbage-collects what it owns ---
kubectl -n $TJ delete trainingjob demo >/dev/null
gone() {
  [[ -z $(kubectl -n $TJ get pods,services,configmaps,serviceaccounts,rolebindings,poddisruptionbudgets -l lockstep.dev/job=demo -o name) ]]
}
# The garbage collector learns of the TrainingJob kind on its 30 s discovery resync, so
# soon after the cluster starts this takes up to ~35 s: allow 90.
wait_for "the job's pods, Service, ConfigMap, ServiceAccount, RoleBinding and PodDisruptionBudget garbage-collected" 90 gone
kubectl delete namespace $TJ --wait=false >/dev/null
pass "deleting the TrainingJob garbage-collected everything it owned"
