#!/usr/bin/env bash
# The real Kubeflow controllers (e2e/cluster/up --kubeflow: JobSet, Trainer v2, the v1
# training-operator, built from their Go modules) in their own cluster of 4 kwok GPU
# nodes and 1 kwok CPU node. Checks, in order:
#  1. a TrainJob (torch-distributed runtime, 4 nodes, 8 GPUs per node, GPU toleration
#     through a runtimePatch) becomes a JobSet, one Indexed Job and 4 Running pods
#     <job>-node-0-<i>-xxxxx on 4 different GPU nodes, with the jobset.sigs.k8s.io/* and
#     batch.kubernetes.io/* labels, hostname <job>-node-0-<i>, subdomain <job>, env
#     PET_NNODES=4, PET_NODE_RANK (the completion index), PET_MASTER_ADDR=<job>-node-0-0.<job>,
#     PET_MASTER_PORT=29500, and the owner chain pod -> Job -> JobSet -> TrainJob;
#  2. deleting the pod of index 1: the Job recreates index 1 (new pod, new UID), counts the
#     lost pod as failed, the JobSet does not restart, the other pods keep their UIDs and
#     the TrainJob is not Failed;
#  3. a PyTorchJob (1 master + 3 workers) gets pods <job>-master-0, <job>-worker-<i> with the
#     training.kubeflow.org/* labels and MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK;
#  4. deleting worker 1: the operator recreates <job>-worker-1 under the same name (new UID),
#     the other pods keep their UIDs and the job is neither Failed nor restarted as a whole.
# What each controller did is written to STATE/kubeflow-behaviour.txt (e2e/cluster/README.md,
# "Kubeflow controllers", records it). A cold build of the controllers runs first (minutes).
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || fail "needs jq"
BIN=${LOCKSTEP_K8S_BIN:-$("$REPO/scripts/install-k8s-tools" | tail -n1)}
export LOCKSTEP_K8S_BIN=$BIN
KDIR=$STATE/kubeflow-cluster
OUT=$STATE/kubeflow-behaviour.txt
K() { "$BIN/kubectl" --kubeconfig "$KDIR/kubeconfig" "$@"; }
mkdir -p "$STATE"
"$REPO/e2e/cluster/down" "$KDIR" --purge >/dev/null 2>&1 || true
cleanup() {
  local rc=$?
  if ((rc != 0)) && [[ -d $KDIR/logs ]]; then
    for c in jobset trainer training-operator; do
      say "last lines of $c.log:"; tail -n 15 "$KDIR/logs/$c.log" >&2 || true
    done
  fi
  "$REPO/e2e/cluster/down" "$KDIR" --purge >&2 || rc=1
  exit "$rc"
}
trap cleanup EXIT

t0=$SECONDS
"$REPO/e2e/cluster/up" --dir "$KDIR" --nodes 4 --cpu-nodes 1 --kubeflow >/dev/null
say "cluster + kubeflow controllers up in $((SECONDS - t0))s"
. "$KDIR/env"
: >"$OUT"
record() { echo "$*" | tee -a "$OUT" >&2; }
record "controllers: jobset v$LOCKSTEP_JOBSET_VERSION, trainer v$LOCKSTEP_TRAINER_VERSION, training-operator v$LOCKSTEP_TRAINING_OPERATOR_VERSION, kube-apiserver $LOCKSTEP_K8S_VERSION"

# jsonpath helpers
pods_json() { K get pods -n default -l "$1" -o json; }
count_running() { pods_json "$1" | jq '[.items[] | select(.status.phase == "Running" and .metadata.deletionTimestamp == null)] | length'; }
running_is() { [[ $(count_running "$1") == "$2" ]]; }

# ---- 1. TrainJob ---------------------------------------------------------------------
TJ=tj
K apply -f - >/dev/null <<EOF
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: $TJ
  namespace: default
spec:
  runtimeRef:
    name: torch-distributed
  trainer:
    numNodes: 4
    command: ["torchrun", "/workspace/train.py"]
    resourcesPerNode:
      limits:
        nvidia.com/gpu: "8"
  runtimePatches:
  - manager: lockstep.dev/e2e
    trainingRuntimeSpec:
      template:
        spec:
          replicatedJobs:
          - name: node
            template:
              spec:
                template:
                  metadata:
                    labels:
                      lockstep.dev/kwok-keep-running: "true"
                  spec:
                    tolerations:
                    - key: nvidia.com/gpu
                      operator: Exists
                      effect: NoSchedule
EOF
SEL="jobset.sigs.k8s.io/jobset-name=$TJ"
wait_for "JobSet $TJ" 60 K get jobset -n default "$TJ"
wait_for "Job $TJ-node-0" 60 K get job -n default "$TJ-node-0"
wait_for "4 Running pods of $TJ" 120 running_is "$SEL" 4
pj=$(pods_json "$SEL")
echo "$pj" >"$STATE/kubeflow-trainjob-pods.json"
nodes=$(echo "$pj" | jq -r '[.items[].spec.nodeName] | unique | join(" ")')
record "TrainJob $TJ: pods $(echo "$pj" | jq -r '[.items[].metadata.name] | sort | join(" ")') on $nodes"
[[ $(wc -w <<<"$nodes") == 4 ]] || fail "the 4 pods are not on 4 nodes: $nodes"
for n in $nodes; do
  [[ $n == gpu-node-* ]] || fail "pod on $n, not a GPU node"
  [[ $(K get node "$n" -o jsonpath='{.metadata.annotations.kwok\.x-k8s\.io/node}') == fake ]] || fail "$n is not a kwok node"
done
uid_tj=$(K get trainjob -n default "$TJ" -o jsonpath='{.metadata.uid}')
uid_js=$(K get jobset -n default "$TJ" -o jsonpath='{.metadata.uid}')
uid_job=$(K get job -n default "$TJ-node-0" -o jsonpath='{.metadata.uid}')
[[ $(K get jobset -n default "$TJ" -o jsonpath='{.metadata.ownerReferences[0].uid}') == "$uid_tj" ]] ||
  fail "JobSet $TJ is not owned by the TrainJob"
[[ $(K get job -n default "$TJ-node-0" -o jsonpath='{.metadata.ownerReferences[0].uid}') == "$uid_js" ]] ||
  fail "Job $TJ-node-0 is not owned by the JobSet"
for i in 0 1 2 3; do
  p=$(echo "$pj" | jq -c --arg i "$i" '.items[] | select(.metadata.labels["batch.kubernetes.io/job-completion-index"] == $i)')
  [[ -n $p ]] || fail "no pod with completion index $i"
  name=$(jq -r .metadata.name <<<"$p")
  [[ $name =~ ^$TJ-node-0-$i-[a-z0-9]{5}$ ]] || fail "pod name $name is not $TJ-node-0-$i-xxxxx"
  lbl() { jq -r --arg k "$1" '.metadata.labels[$k] // "<none>"' <<<"$p"; }
  [[ $(lbl jobset.sigs.k8s.io/jobset-name) == "$TJ" ]] || fail "$name: jobset-name label"
  [[ $(lbl jobset.sigs.k8s.io/replicatedjob-name) == node ]] || fail "$name: replicatedjob-name label"
  [[ $(lbl jobset.sigs.k8s.io/job-index) == 0 ]] || fail "$name: job-index label"
  [[ $(lbl jobset.sigs.k8s.io/restart-attempt) == 0 ]] || fail "$name: restart-attempt label"
  [[ $(lbl batch.kubernetes.io/job-name) == "$TJ-node-0" ]] || fail "$name: batch job-name label"
  [[ $(lbl batch.kubernetes.io/controller-uid) == "$uid_job" ]] || fail "$name: controller-uid label"
  [[ $(jq -r '.metadata.ownerReferences[0].uid' <<<"$p") == "$uid_job" ]] || fail "$name: not owned by the Job"
  [[ $(jq -r .spec.hostname <<<"$p") == "$TJ-node-0-$i" ]] || fail "$name: hostname $(jq -r .spec.hostname <<<"$p")"
  [[ $(jq -r .spec.subdomain <<<"$p") == "$TJ" ]] || fail "$name: subdomain $(jq -r .spec.subdomain <<<"$p")"
  env_of() { # NAME: the value, or the fieldRef path for valueFrom
    jq -r --arg n "$1" '[.spec.containers[] | select(.name == "node") | .env[]? | select(.name == $n)][0]
      | if . == null then "<unset>" elif .value != null then .value else "fieldRef:" + .valueFrom.fieldRef.fieldPath end' <<<"$p"
  }
  [[ $(env_of PET_NNODES) == 4 ]] || fail "$name: PET_NNODES=$(env_of PET_NNODES)"
  rank=$(env_of PET_NODE_RANK)
  [[ $rank == "$i" || $rank == *"batch.kubernetes.io/job-completion-index"* ]] || fail "$name: PET_NODE_RANK=$rank"
  [[ $(env_of PET_MASTER_ADDR) == "$TJ-node-0-0.$TJ" ]] || fail "$name: PET_MASTER_ADDR=$(env_of PET_MASTER_ADDR)"
  [[ $(env_of PET_MASTER_PORT) == 29500 ]] || fail "$name: PET_MASTER_PORT=$(env_of PET_MASTER_PORT)"
  if ((i == 0)); then
    record "  pod labels: $(jq -c '.metadata.labels' <<<"$p")"
    record "  pod annotations: $(jq -c '.metadata.annotations // {}' <<<"$p")"
    record "  env: $(jq -c '[.spec.containers[] | select(.name == "node") | .env[]? | {(.name): (.value // .valueFrom.fieldRef.fieldPath)}] | add' <<<"$p")"
    record "  restartPolicy $(jq -r .spec.restartPolicy <<<"$p"), resources $(jq -c '.spec.containers[0].resources' <<<"$p"), finalizers $(jq -c '.metadata.finalizers // []' <<<"$p")"
    record "  Job: $(K get job -n default "$TJ-node-0" -o json | jq -c '{completionMode: .spec.completionMode, completions: .spec.completions, parallelism: .spec.parallelism, backoffLimit: .spec.backoffLimit, backoffLimitPerIndex: .spec.backoffLimitPerIndex, podReplacementPolicy: .spec.podReplacementPolicy, podFailurePolicy: .spec.podFailurePolicy}')"
    record "  JobSet: $(K get jobset -n default "$TJ" -o json | jq -c '{failurePolicy: .spec.failurePolicy, successPolicy: .spec.successPolicy, network: .spec.network}')"
  fi
done
step=$(echo "$pj" | jq -r '[.items[] | .metadata.labels["trainer.kubeflow.org/trainjob-ancestor-step"] // "<none>"] | unique | join(",")')
[[ $step == trainer ]] && record "  every pod carries trainer.kubeflow.org/trainjob-ancestor-step=trainer" ||
  record "  pods do NOT carry trainer.kubeflow.org/trainjob-ancestor-step (it is on the Job: $(K get job -n default "$TJ-node-0" -o jsonpath='{.metadata.labels.trainer\.kubeflow\.org/trainjob-ancestor-step}'))"
pass "TrainJob $TJ: JobSet, Indexed Job and 4 pods with the labels and env"

# ---- 2. delete the pod of index 1 ------------------------------------------------------
uids_before=$(echo "$pj" | jq -r '.items[] | "\(.metadata.labels["batch.kubernetes.io/job-completion-index"]) \(.metadata.uid)"' | sort)
victim=$(echo "$pj" | jq -r '.items[] | select(.metadata.labels["batch.kubernetes.io/job-completion-index"] == "1") | .metadata.name')
victim_uid=$(echo "$pj" | jq -r '.items[] | select(.metadata.labels["batch.kubernetes.io/job-completion-index"] == "1") | .metadata.uid')
t1=$SECONDS
K delete pod -n default "$victim" --wait=false >/dev/null
index1_replaced() {
  pods_json "$SEL" | jq -e --arg u "$victim_uid" '[.items[] | select(.metadata.labels["batch.kubernetes.io/job-completion-index"] == "1"
    and .metadata.uid != $u and .status.phase == "Running")] | length == 1' >/dev/null
}
wait_for "index 1 recreated" 60 index1_replaced
dt=$((SECONDS - t1))
wait_for "4 Running pods after the delete" 60 running_is "$SEL" 4
pa=$(pods_json "$SEL")
new=$(echo "$pa" | jq -r '.items[] | select(.metadata.labels["batch.kubernetes.io/job-completion-index"] == "1") | "\(.metadata.name) on \(.spec.nodeName), restart-attempt \(.metadata.labels["jobset.sigs.k8s.io/restart-attempt"])"')
for i in 0 2 3; do
  b=$(awk -v i="$i" '$1 == i {print $2}' <<<"$uids_before")
  a=$(echo "$pa" | jq -r --arg i "$i" '.items[] | select(.metadata.labels["batch.kubernetes.io/job-completion-index"] == $i) | .metadata.uid')
  [[ $a == "$b" ]] || fail "index $i's pod changed (UID $b -> $a) after index 1 was deleted"
done
job_failed() { local f; f=$(K get job -n default "$TJ-node-0" -o jsonpath='{.status.failed}'); echo "${f:-0}"; }
job_counted_lost_pod() { (($(job_failed) >= 1)); }
wait_for "the Job to count the lost pod" 30 job_counted_lost_pod
js_restarts=$(K get jobset -n default "$TJ" -o jsonpath='{.status.restarts}')
tj_failed=$(K get trainjob -n default "$TJ" -o json | jq -r '[.status.conditions[]? | select(.type == "Failed" and .status == "True")] | length')
record "delete $victim (index 1): the Job recreated index 1 as $new after ${dt}s; Job status.failed=$(job_failed) (backoffLimit $(K get job -n default "$TJ-node-0" -o jsonpath='{.spec.backoffLimit}')); JobSet status.restarts=${js_restarts:-0}; TrainJob Failed conditions: $tj_failed; indexes 0,2,3 kept their pods (same UIDs)"
record "  TrainJob conditions: $(K get trainjob -n default "$TJ" -o json | jq -c '[.status.conditions[]? | {type, status, reason}]')"
[[ ${js_restarts:-0} == 0 ]] || fail "the JobSet restarted (restarts=$js_restarts)"
[[ $tj_failed == 0 ]] || fail "the TrainJob is Failed"
pass "deleted index 1: recreated at the same index, counted as a Job failure, no JobSet restart"

# ---- 3. PyTorchJob ---------------------------------------------------------------------
PJ=pj
K apply -f - >/dev/null <<EOF
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: $PJ
  namespace: default
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template: &tmpl
        spec:
          tolerations:
          - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
          containers:
          - name: pytorch
            image: pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime
            command: ["python3", "/workspace/train.py"]
    Worker:
      replicas: 3
      restartPolicy: OnFailure
      template: *tmpl
EOF
PSEL="training.kubeflow.org/job-name=$PJ"
wait_for "4 Running pods of PyTorchJob $PJ" 120 running_is "$PSEL" 4
pp=$(pods_json "$PSEL")
echo "$pp" >"$STATE/kubeflow-pytorchjob-pods.json"
record "PyTorchJob $PJ: pods $(echo "$pp" | jq -r '[.items[].metadata.name] | sort | join(" ")')"
uid_pj=$(K get pytorchjob -n default "$PJ" -o jsonpath='{.metadata.uid}')
for spec in master:0:0 worker:0:1 worker:1:2 worker:2:3; do
  IFS=: read -r type idx rank <<<"$spec"
  name=$PJ-$type-$idx
  p=$(echo "$pp" | jq -c --arg n "$name" '.items[] | select(.metadata.name == $n)')
  [[ -n $p ]] || fail "no pod $name"
  lbl() { jq -r --arg k "$1" '.metadata.labels[$k] // "<none>"' <<<"$p"; }
  [[ $(lbl training.kubeflow.org/job-name) == "$PJ" ]] || fail "$name: job-name label"
  [[ $(lbl training.kubeflow.org/replica-type) == "$type" ]] || fail "$name: replica-type label $(lbl training.kubeflow.org/replica-type)"
  [[ $(lbl training.kubeflow.org/replica-index) == "$idx" ]] || fail "$name: replica-index label"
  [[ $(lbl training.kubeflow.org/operator-name) == pytorchjob-controller ]] || fail "$name: operator-name label $(lbl training.kubeflow.org/operator-name)"
  [[ $(jq -r '.metadata.ownerReferences[0].uid' <<<"$p") == "$uid_pj" ]] || fail "$name: not owned by the PyTorchJob"
  env_of() { jq -r --arg n "$1" '[.spec.containers[] | select(.name == "pytorch") | .env[]? | select(.name == $n)][0] | .value // "<unset>"' <<<"$p"; }
  [[ $(env_of MASTER_ADDR) == "$PJ-master-0" ]] || fail "$name: MASTER_ADDR=$(env_of MASTER_ADDR)"
  [[ $(env_of WORLD_SIZE) == 4 ]] || fail "$name: WORLD_SIZE=$(env_of WORLD_SIZE)"
  [[ $(env_of RANK) == "$rank" ]] || fail "$name: RANK=$(env_of RANK)"
  [[ $(env_of MASTER_PORT) =~ ^[0-9]+$ ]] || fail "$name: MASTER_PORT=$(env_of MASTER_PORT)"
  if [[ $name == "$PJ-worker-0" ]]; then
    record "  pod labels: $(jq -c '.metadata.labels' <<<"$p")"
    record "  env: $(jq -c '[.spec.containers[] | select(.name == "pytorch") | .env[]? | {(.name): (.value // .valueFrom.fieldRef.fieldPath)}] | add' <<<"$p")"
    record "  init containers: $(jq -c '[.spec.initContainers[]? | {name, image}]' <<<"$p"), restartPolicy $(jq -r .spec.restartPolicy <<<"$p")"
  fi
done
pass "PyTorchJob $PJ: master-0 and worker-0..2 with the labels and env"

# ---- 4. delete worker 1 ----------------------------------------------------------------
uids_before=$(echo "$pp" | jq -r '.items[] | "\(.metadata.name) \(.metadata.uid)"' | sort)
victim_uid=$(awk -v n="$PJ-worker-1" '$1 == n {print $2}' <<<"$uids_before")
t1=$SECONDS
K delete pod -n default "$PJ-worker-1" --wait=false >/dev/null
worker1_replaced() {
  K get pod -n default "$PJ-worker-1" -o json 2>/dev/null |
    jq -e --arg u "$victim_uid" '.metadata.uid != $u and .status.phase == "Running"' >/dev/null
}
wait_for "$PJ-worker-1 recreated" 60 worker1_replaced
dt=$((SECONDS - t1))
pa=$(pods_json "$PSEL")
for n in "$PJ-master-0" "$PJ-worker-0" "$PJ-worker-2"; do
  b=$(awk -v n="$n" '$1 == n {print $2}' <<<"$uids_before")
  a=$(echo "$pa" | jq -r --arg n "$n" '.items[] | select(.metadata.name == $n) | .metadata.uid')
  [[ $a == "$b" ]] || fail "$n changed (UID $b -> $a) after $PJ-worker-1 was deleted"
done
st=$(K get pytorchjob -n default "$PJ" -o json)
record "delete $PJ-worker-1: the operator recreated $PJ-worker-1 (same name, new UID) after ${dt}s; master-0, worker-0, worker-2 kept their UIDs"
record "  PyTorchJob status: replicaStatuses $(jq -c '.status.replicaStatuses' <<<"$st"), conditions $(jq -c '[.status.conditions[]? | {type, status, reason}]' <<<"$st")"
[[ $(jq -r '[.status.conditions[]? | select(.type == "Failed" and .status == "True")] | length' <<<"$st") == 0 ]] ||
  fail "the PyTorchJob is Failed"
pass "deleted $PJ-worker-1: recreated under the same name, other pods untouched"

say "behaviour recorded in $OUT"
