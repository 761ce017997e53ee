#!/usr/bin/env bash
# A Kubeflow TrainJob protected by one annotation, on real nodes, next to the real
# Kubeflow controllers (issue 23 §4): e2e/cluster/up --real-nodes 2 --real-cpu-nodes 1
# --kubeflow (JobSet, Trainer v2, training-operator built from their Go modules), the
# chart with kubeflow.trainJob.enabled (the TrainingJob controller and the pod webhook),
# the operator here as a process (--kubeflow-trainjobs, --webhook-addr on 127.0.0.1, the
# chart's MutatingWebhookConfiguration pointed at it by URL: the test cluster has no
# Service proxy; --coordinator-address pod-ip: no DNS either).
# The job: a TrainJob (torch-distributed runtime, numNodes 4) annotated
# lockstep.dev/fault-tolerance: enabled, lockstep.dev/spares: "1", running
# e2e/workloads/migration_train.py (lockstep_train, gloo over the pods' network) from the
# lockstep-train image, the pod placement through a runtimePatches entry. It is created
# suspended and resumed once its coordinator pod has an IP (pod-ip mode: the webhook
# refuses a rank pod until then; not needed with the coordinator Service).
# Fault: rank 2's process SIGKILLed from the host (its pid from the node's containerd)
# once it committed step KILL_AT. The kubelet restarts the container in place
# (restartPolicy OnFailure); the coordinator does not delete that pod
# (--keep-restarted-pods), the hot spare pod takes rank 2, and the restarted process,
# still LOCKSTEP_RANK=2, joins as a spare (docs/migration.md, "Kubeflow jobs").
# Checks:
#  - the webhook labelled the 4 JobSet pods lockstep.dev/job, role=rank, rank=<index> and
#    gave them LOCKSTEP_* (read back from the API server);
#  - the spare pod took rank 2 over; the restarted process in rank 2's pod registered as
#    a spare, never trained, and exited 0 at the end;
#  - the job finishes: every rank's last holder logged its end, the TrainJob is Complete
#    (not Failed), the JobSet never restarted (status.restarts 0), the Job counted no
#    failed pod and every index Succeeded (rank 2's pod too: its spare exited 0);
#  - 0 committed steps lost, none twice (as e2e.train-pods counts them);
#  - every healthy rank's pod keeps its UID with restart count 0;
#  - the final parameters equal a fault-free run (plain DDP, 4 local processes) bit for bit.
#  - the spare pods are owned by the TrainingJob only, with none of the labels the
#    Kubeflow, JobSet or Job controllers select their pods by.
# Then, in the TrainJob (KF_MIGRATION_HANG=0: not), a hang: rank 1's process SIGSTOPped
# from the host once it committed step HANG_AT, its pod still Running. The coordinator
# takes it for dead (no heartbeat), a spare takes rank 1 at once, and the fence (deleting
# the pod) is deferred by the restart grace (--keep-restarted-pods: a container seen
# restarted meanwhile would be spared) and done when the grace is over, the container
# still running. Checks: "fence deferred", then "fence" ("still running after the restart
# grace") at least 10 s later in the coordinator's log, the pod deleted after it, the new
# holder's first step before it; the Job counts that one failed pod (failed 1, not 0),
# recreates index 1, whose process joins as a spare and exits 0 (4 indexes Succeeded);
# JobSet restarts 0, TrainJob Complete; ranks 0 and 3 keep their pods; steps and bits as
# above over rank 1's two holders.
# Then the same, on the same cluster, for a PyTorchJob (v1 training-operator 1.9.3;
# Worker-only, 4 workers, restartPolicy OnFailure): no Restarting condition, 4 workers
# succeeded and none failed, one pod per replica index (rank 2's the original, restarted
# in place), Succeeded. KF_MIGRATION_KINDS picks the jobs (default "trainjob pytorchjob";
# "trainjob" or "pytorchjob" alone).
# Needs root (real nodes), the images (built here, cached) and the Kubeflow controllers
# (scripts/install-kubeflow-tools, cached).
. "$(dirname "$0")/lib.sh"
[[ $(id -u) -eq 0 ]] || fail "needs root (namespaces, cgroups, containerd)"
command -v jq >/dev/null || fail "needs jq"
command -v openssl >/dev/null || fail "needs openssl"
BIN=${LOCKSTEP_K8S_BIN:-$("$REPO/scripts/install-k8s-tools" | tail -n1)}
export LOCKSTEP_K8S_BIN=$BIN
OPERATOR=$(find_bin LOCKSTEP_OPERATOR operator/lockstep-operator)
# shellcheck source=../cluster/lib.sh
. "$REPO/e2e/cluster/lib.sh"
app_version=$(chart_app_version)
STEPS=${KF_MIGRATION_STEPS:-200}
KILL_AT=${KF_MIGRATION_KILL_AT:-40}
VICTIM=2
HANG_AT=${KF_MIGRATION_HANG_AT:-100}
HANG_RANK=1
HANG=${KF_MIGRATION_HANG:-1}
KINDS=${KF_MIGRATION_KINDS:-trainjob pytorchjob}
ARGS=(--mode lockstep --steps "$STEPS" --hidden 64 --layers 3 --batch 16 --seed 11 --min-step-s 0.15)
TNS=train
TJ=kfm
WORK=$STATE/kubeflow-migration
# Short: the kubelet binds unix sockets under it (108-byte limit with the clone's path).
RDIR=$STATE/kfm
K() { "$BIN/kubectl" --kubeconfig "$RDIR/kubeconfig" "$@"; }
mkdir -p "$STATE"
rm -rf "$WORK" && mkdir -p "$WORK"

# 1. Images (cached in the build tree).
build_dir=${LOCKSTEP_BUILD_DIR:-$REPO/build/ci}
images_dir=$build_dir/images
T0=$SECONDS
"$REPO/images/build" --build-dir "$build_dir" --out "$images_dir" --train >"$WORK/images.log" 2>&1 ||
  fail "images/build --train failed: $(tail -5 "$WORK/images.log")"
TRAIN_TAR=$images_dir/lockstep-train-$app_version.oci.tar
COORD_TAR=$images_dir/lockstep-coordinator-$app_version.oci.tar
[[ -f $TRAIN_TAR && -f $COORD_TAR ]] || fail "no image archives in $images_dir"
TRAIN_IMAGE=ghcr.io/lockstep/lockstep-train:$app_version
say "images ready in $((SECONDS - T0))s"

"$REPO/e2e/cluster/down" "$RDIR" --purge >/dev/null 2>&1 || true
OP_PID= REF_PIDS=() LOG_PIDS=()
cleanup() {
  local rc=$?
  for p in "${LOG_PIDS[@]}" "${REF_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  if [[ -n $OP_PID ]]; then kill "$OP_PID" 2>/dev/null && wait "$OP_PID" 2>/dev/null || true; fi
  if ((rc != 0)); then
    [[ -f $WORK/operator.log ]] && { say "last lines of the operator's log:"; tail -n 15 "$WORK/operator.log" >&2; }
    K -n $TNS get pods -o wide >&2 2>/dev/null || true
    K -n $TNS get trainjob,jobset,job -o wide >&2 2>/dev/null || true
    # The coordinator's whole log stays in $WORK; its decisions (every failure, plan and
    # generation, not only the last lines) go to the output.
    K -n $TNS logs -l lockstep.dev/role=coordinator --tail=-1 >"$WORK/coordinator.log" 2>/dev/null || true
    say "the coordinator's decisions:"
    grep -E 'failure_detected|generation_complete|migrat|relabel|deleted|registered_as_spare|error|warn' \
      "$WORK/coordinator.log" | cut -c1-400 | head -n 40 >&2 || true
    for c in jobset trainer; do
      [[ -f $RDIR/logs/$c.log ]] && { say "last lines of $c.log:"; tail -n 8 "$RDIR/logs/$c.log" >&2; }
    done
  fi
  "$REPO/e2e/cluster/down" "$RDIR" >&2 || rc=1
  exit "$rc"
}
trap cleanup EXIT

# 2. The fault-free reference, here, while the cluster starts: plain DDP, 4 processes.
ref_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ref_args=("${ARGS[@]}")
ref_args[1]=ddp
for r in 0 1 2 3; do
  hash_args=()
  [[ $r == 0 ]] && hash_args=(--hash-file "$WORK/ref.sha256")
  RANK=$r WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=$ref_port nice -n 5 /usr/bin/python3 \
    "$REPO/e2e/workloads/migration_train.py" "${ref_args[@]}" --min-step-s 0 --log "$WORK/ref.jsonl" \
    "${hash_args[@]}" >/dev/null 2>"$WORK/ref-$r.err" &
  REF_PIDS+=($!)
done

# 3. The cluster: 2 real GPU nodes (ranks, spares), 1 real CPU node (the coordinator),
#    and the Kubeflow controllers.
T0=$SECONDS
"$REPO/e2e/cluster/up" --dir "$RDIR" --nodes 0 --cpu-nodes 0 --real-nodes 2 --real-cpu-nodes 1 \
  --real-node-image "$TRAIN_TAR" --real-node-image "$COORD_TAR" --kubeflow >"$WORK/up.log" 2>&1 ||
  fail "cluster up: $(tail -5 "$WORK/up.log")"
say "cluster with 3 real nodes and the Kubeflow controllers up in $((SECONDS - T0))s"

# 4. The chart (CRDs, RBAC, the webhook configuration) with the TrainJob support on; the
#    operator runs here and serves the webhook on 127.0.0.1 with a certificate for that IP.
"$BIN/helm" --kubeconfig "$RDIR/kubeconfig" install lockstep "$REPO/charts/lockstep" -n lockstep-system \
  --create-namespace --set operator.replicas=0 --set kubeflow.trainJob.enabled=true \
  --set kubeflow.pytorchJob.enabled=true >"$WORK/helm.log" 2>&1 ||
  fail "helm install: $(tail -3 "$WORK/helm.log")"
wh=$WORK/webhook
mkdir -p "$wh"
(
  cd "$wh"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=lockstep-e2e-webhook-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign"
  openssl req -newkey rsa:2048 -nodes -keyout tls.key -out tls.csr -subj "/CN=127.0.0.1"
  printf 'subjectAltName = IP:127.0.0.1\nextendedKeyUsage = serverAuth\n' >tls.ext
  openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile tls.ext -out tls.crt
) >"$WORK/openssl.log" 2>&1 || fail "webhook certificate: $(tail -3 "$WORK/openssl.log")"
wh_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
whc=lockstep-pods
K get mutatingwebhookconfiguration $whc -o json >"$WORK/webhook-chart.json" || fail "the chart made no webhook configuration"
[[ $(jq -r '[.webhooks[].name] | join(" ")' "$WORK/webhook-chart.json") == "trainjob-pods.lockstep.dev pytorchjob-pods.lockstep.dev" ]] ||
  fail "the chart's pod webhooks: $(jq -c '[.webhooks[].name]' "$WORK/webhook-chart.json")"
K patch mutatingwebhookconfiguration $whc --type=json -p "$(jq -nc --arg url "https://127.0.0.1:$wh_port/mutate-pods" \
  --arg ca "$(base64 -w0 "$wh/ca.crt")" '[0, 1] | map({op: "replace", path: "/webhooks/\(.)/clientConfig", value: {url: $url, caBundle: $ca}})')" \
  >/dev/null || fail "pointing the webhooks at the operator"
setsid "$OPERATOR" --kubeconfig "$RDIR/kubeconfig" --namespace lockstep-system --leader-elect=false \
  --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 --coordinator-address pod-ip \
  --coordinator-image "ghcr.io/lockstep/lockstep-coordinator:$app_version" --kubeflow-trainjobs --kubeflow-pytorchjobs \
  --webhook-addr "127.0.0.1:$wh_port" --webhook-cert-dir "$wh" >"$WORK/operator.log" 2>&1 </dev/null &
OP_PID=$!
wait_for "the operator serving the webhook" 30 grep -q '"msg":"serving the pod admission webhook"' "$WORK/operator.log"
K create namespace $TNS >/dev/null
args_json=$(printf '%s\n' /opt/lockstep/migration_train.py "${ARGS[@]}" | jq -R . | jq -sc .)
for p in "${REF_PIDS[@]}"; do wait "$p" || fail "the reference DDP run failed: $(tail -3 "$WORK"/ref-*.err)"; done
REF_PIDS=()
REF=$(cat "$WORK/ref.sha256")

# 5. run_job KIND NAME: the job as a user submits it, plus the annotation (and, here,
#    suspend), then the fault and every check; KIND trainjob or pytorchjob.
RESULTS=()
events() { grep '^{' "$1" || true; }
run_job() {
  local kind=$1 TJ=$2
  local SEL IDX_LABEL KRES DONE_COND ref_field
  if [[ $kind == trainjob ]]; then
    SEL="jobset.sigs.k8s.io/jobset-name=$TJ" IDX_LABEL=batch.kubernetes.io/job-completion-index KRES=trainjob
    DONE_COND=Complete ref_field=trainJobRef
    K apply -f - >/dev/null <<EOF
{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
 "metadata": {"name": "$TJ", "namespace": "$TNS",
   "annotations": {"lockstep.dev/fault-tolerance": "enabled", "lockstep.dev/spares": "1"}},
 "spec": {"suspend": true, "runtimeRef": {"name": "torch-distributed"},
   "trainer": {"numNodes": 4, "image": "$TRAIN_IMAGE", "command": ["/usr/bin/python3"], "args": $args_json,
     "env": [{"name": "LOCKSTEP_HANG_TIMEOUT", "value": "10"}],
     "resourcesPerNode": {"requests": {"cpu": "10m", "memory": "64Mi"}}},
   "runtimePatches": [{"manager": "lockstep.dev/e2e", "trainingRuntimeSpec": {"template": {"spec": {
     "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {
       "nodeSelector": {"nvidia.com/gpu.present": "true"},
       "terminationGracePeriodSeconds": 1,
       "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}}}}]}}}}]}}
EOF
  else
    # Worker-only (no Master: the v1 operator then adds no init-pytorch container, which
    # waits for the master's DNS name; the test cluster has no DNS).
    SEL="training.kubeflow.org/job-name=$TJ" IDX_LABEL=training.kubeflow.org/replica-index KRES=pytorchjob
    DONE_COND=Succeeded ref_field=pytorchJobRef
    K apply -f - >/dev/null <<EOF
{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
 "metadata": {"name": "$TJ", "namespace": "$TNS",
   "annotations": {"lockstep.dev/fault-tolerance": "enabled", "lockstep.dev/spares": "1"}},
 "spec": {"runPolicy": {"suspend": true, "cleanPodPolicy": "None"},
   "pytorchReplicaSpecs": {"Worker": {"replicas": 4, "restartPolicy": "OnFailure", "template": {"spec": {
     "nodeSelector": {"nvidia.com/gpu.present": "true"},
     "terminationGracePeriodSeconds": 1,
     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
     "containers": [{"name": "pytorch", "image": "$TRAIN_IMAGE", "command": ["/usr/bin/python3"], "args": $args_json,
       "env": [{"name": "LOCKSTEP_HANG_TIMEOUT", "value": "10"}],
       "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}}}]}}}}}}
EOF
  fi
  local t1=$SECONDS
  wait_for "TrainingJob $TJ (made by the operator)" 60 K -n $TNS get trainingjob $TJ
  [[ $(K -n $TNS get trainingjob $TJ -o jsonpath="{.spec.$ref_field.name} {.spec.replicas} {.spec.spares}") == "$TJ 4 1" ]] ||
    fail "TrainingJob $TJ: $(K -n $TNS get trainingjob $TJ -o jsonpath='{.spec}')"
  coord_ip() { K -n $TNS get pod "$TJ-coordinator" -o jsonpath='{.status.podIP}' 2>/dev/null | grep -q .; }
  wait_for "the coordinator pod's IP" 120 coord_ip
  if [[ $kind == trainjob ]]; then
    K -n $TNS patch trainjob $TJ --type=merge -p '{"spec":{"suspend":false}}' >/dev/null
  else
    K -n $TNS patch pytorchjob $TJ --type=merge -p '{"spec":{"runPolicy":{"suspend":false}}}' >/dev/null
  fi
  running_ranks() {
    [[ $(K -n $TNS get pods -l "$SEL" -o json |
      jq '[.items[] | select(.status.phase == "Running" and .metadata.deletionTimestamp == null)] | length') == 4 ]]
  }
  wait_for "4 Running pods of $KRES $TJ" 180 running_ranks
  say "$TJ: 4 rank pods Running $((SECONDS - t1))s after the $KRES"

  # The webhook's work, read back from the API server.
  local pj p r
  pj=$(K -n $TNS get pods -l "$SEL" -o json)
  echo "$pj" >"$WORK/$TJ-rank-pods.json"
  declare -A POD UIDS
  for r in 0 1 2 3; do
    p=$(jq -c --arg i $r --arg l "$IDX_LABEL" '.items[] | select(.metadata.labels[$l] == $i)' <<<"$pj")
    [[ -n $p ]] || fail "$TJ: no pod with index $r"
    POD[$r]=$(jq -r .metadata.name <<<"$p")
    UIDS[$r]=$(jq -r .metadata.uid <<<"$p")
    [[ $(jq -r '.metadata.labels["lockstep.dev/job"] + " " + .metadata.labels["lockstep.dev/role"] + " " + .metadata.labels["lockstep.dev/rank"]' <<<"$p") == "$TJ rank $r" ]] ||
      fail "${POD[$r]}: not labelled by the webhook: $(jq -c .metadata.labels <<<"$p")"
    env_of() { jq -r --arg n "$1" '.spec.containers[0].env[] | select(.name == $n) | .value // .valueFrom.fieldRef.fieldPath' <<<"$p"; }
    [[ $(env_of LOCKSTEP_RANK) == "$r" && $(env_of LOCKSTEP_ROLE) == rank && $(env_of LOCKSTEP_WORLD_SIZE) == 4 ]] ||
      fail "${POD[$r]}: LOCKSTEP_* env: $(jq -c '.spec.containers[0].env' <<<"$p")"
    [[ $(env_of LOCKSTEP_COORDINATOR) =~ ^http://[0-9.]+:8470$ && $(env_of LOCKSTEP_POD_UID) == metadata.uid ]] ||
      fail "${POD[$r]}: coordinator URL / pod uid env"
  done
  pass "$TJ: the webhook made the 4 pods of $KRES $TJ ranks 0..3 of TrainingJob $TJ (labels and LOCKSTEP_* env, no pod spec edit)"

  # Logs: each pod's container streams to $WORK/<pod>[.<n>].jsonl (n: its restart count).
  declare -A STREAMING=()
  stream() {
    K -n $TNS logs -f "$1" >"$WORK/$2.jsonl" 2>"$WORK/$2.logerr" &
    LOG_PIDS+=($!)
    STREAMING[$2]=1
  }
  for r in 0 1 2 3; do stream "${POD[$r]}" "${POD[$r]}"; done
  committed() { grep -q "\"event\":\"step\",\"rank\":$1,\"step\":$2," "$WORK/$3.jsonl"; }
  spare_registered() {
    local p
    for p in $(K -n $TNS get pods -l "lockstep.dev/job=$TJ,lockstep.dev/role=spare" -o name); do
      K -n $TNS logs "$p" 2>/dev/null | grep -q '"lib_event":"registered"' && return 0
    done
    return 1
  }
  wait_for "$TJ: a hot spare pod registered with the coordinator" 180 spare_registered
  # Spares live outside the Kubeflow job's ownership: owned by the TrainingJob only, and
  # no label its controllers select, adopt or count pods by.
  local spares_json bad
  spares_json=$(K -n $TNS get pods -l "lockstep.dev/job=$TJ,lockstep.dev/role=spare" -o json)
  bad=$(jq -c '[.items[] | select(
      ([.metadata.ownerReferences[]? | select(.kind != "TrainingJob")] | length > 0) or
      ([.metadata.labels // {} | keys[] | select(test("^(jobset[.]sigs[.]k8s[.]io|batch[.]kubernetes[.]io|training[.]kubeflow[.]org|trainer[.]kubeflow[.]org)/") or . == "job-name" or . == "controller-uid")] | length > 0))
    | {name: .metadata.name, owners: .metadata.ownerReferences, labels: .metadata.labels}]' <<<"$spares_json")
  [[ $bad == "[]" ]] || fail "$TJ: spare pods inside the $KRES's ownership: $bad"
  pass "$TJ: the spare pods are owned by TrainingJob $TJ only and carry none of the Kubeflow/JobSet/Job labels"
  local old=${POD[$VICTIM]}
  wait_for "$TJ: rank $VICTIM committed step $KILL_AT" 180 committed $VICTIM $KILL_AT "$old"

  # 6. The fault: rank 2's process, SIGKILLed from the host.
  local node cid pid t_fault last nh t_step fts role
  node=$(K -n $TNS get pod "$old" -o jsonpath='{.spec.nodeName}')
  cid=$(K -n $TNS get pod "$old" -o jsonpath='{.status.containerStatuses[0].containerID}')
  cid=${cid#containerd://}
  pid=$(ctr --address "$RDIR/nodes/$node/containerd.sock" -n k8s.io tasks ls | awk -v c="$cid" '$1 == c { print $2 }')
  [[ $pid =~ ^[0-9]+$ ]] || fail "no pid for $old's container $cid on $node"
  grep -q migration_train.py "/proc/$pid/cmdline" || fail "pid $pid is not the training script: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
  t_fault=$(date +%s.%N)
  kill -KILL "$pid"
  last=$(events "$WORK/$old.jsonl" | jq -s '[.[] | select(.event == "step") | .step] | max')
  say "$TJ: SIGKILLed rank $VICTIM's process (pid $pid, pod $old on $node) after its step $last"
  new_holder() {
    K -n $TNS get pods -l "lockstep.dev/job=$TJ,lockstep.dev/rank=$VICTIM" -o json |
      jq -er --arg j "$TJ" '[.items[] | select(.metadata.name | startswith($j + "-spare-")) | .metadata.name]
        | if length == 1 then .[0] else empty end'
  }
  wait_for "$TJ: a spare pod labelled rank $VICTIM" 60 new_holder
  nh=$(new_holder)
  stream "$nh" "$nh"
  wait_for "$TJ: $nh committed a step" 60 grep -q '"event":"step"' "$WORK/$nh.jsonl"
  t_step=$(events "$WORK/$nh.jsonl" | jq -s '[.[] | select(.event == "step") | .t] | min')
  fts=$(awk -v a="$t_fault" -v b="$t_step" 'BEGIN { printf "%.2f", b - a }')
  say "$TJ: spare pod $nh holds rank $VICTIM; its first step committed ${fts}s after the fault"
  # The kubelet restarts the killed container in the same pod; its process asks for rank 2
  # again and joins as a spare.
  restarted() {
    [[ $(K -n $TNS get pod "$old" -o json | jq -r '.status.containerStatuses[0] | "\(.restartCount) \(.state.running != null)"') == "1 true" ]]
  }
  wait_for "$TJ: $old's container restarted in place" 60 restarted
  [[ $(K -n $TNS get pod "$old" -o jsonpath='{.metadata.uid}') == "${UIDS[$VICTIM]}" ]] || fail "$old was replaced, not restarted"
  stream "$old" "$old.1"
  wait_for "$TJ: the restarted process in $old registered" 120 grep -q '"lib_event":"registered"' "$WORK/$old.1.jsonl"
  role=$(events "$WORK/$old.1.jsonl" | jq -rs '[.[] | select(.lib_event == "registered")][0].role')
  [[ $role == spare ]] || fail "$TJ: the restarted process in $old registered as $role, not as a spare"
  pass "$TJ: the restarted process in rank $VICTIM's pod $old (still LOCKSTEP_RANK=$VICTIM) joined as a spare, the pod was not deleted"

  # 6b. A hang (TrainJob): rank 1's process SIGSTOPped, its pod Running; the fence waits.
  local hang=0 hung h1=${POD[$HANG_RANK]} idx1="" hang_fts=0 hang_fence_s=0
  [[ $kind == trainjob && $HANG == 1 ]] && hang=1
  if ((hang)); then
    hung=${POD[$HANG_RANK]}
    wait_for "$TJ: rank $HANG_RANK committed step $HANG_AT" 180 committed $HANG_RANK $HANG_AT "$hung"
    local hnode hcid hpid t_stop t_h1 t_fence t_deferred t_gone dead_line fence_line
    hnode=$(K -n $TNS get pod "$hung" -o jsonpath='{.spec.nodeName}')
    hcid=$(K -n $TNS get pod "$hung" -o jsonpath='{.status.containerStatuses[0].containerID}')
    hcid=${hcid#containerd://}
    hpid=$(ctr --address "$RDIR/nodes/$hnode/containerd.sock" -n k8s.io tasks ls | awk -v c="$hcid" '$1 == c { print $2 }')
    [[ $hpid =~ ^[0-9]+$ ]] || fail "no pid for $hung's container $hcid on $hnode"
    grep -q migration_train.py "/proc/$hpid/cmdline" || fail "pid $hpid is not the training script"
    local hlast
    t_stop=$(date +%s.%N)
    kill -STOP "$hpid"
    hlast=$(events "$WORK/$hung.jsonl" | jq -s '[.[] | select(.event == "step") | .step] | max')
    say "$TJ: SIGSTOPped rank $HANG_RANK's process (pid $hpid, pod $hung on $hnode) after its step $hlast"
    # Late (the spare in rank 2's pod slow to register): too few steps left to see the
    # new holder train before the job ends; raise KF_MIGRATION_STEPS.
    ((hlast < STEPS - 20)) || fail "$TJ: the hang came at step $hlast of $STEPS: too late to check"
    # The new holder: a streamed process other than the hung one that commits a step of
    # rank 1 (a spare pod, or the spare in rank 2's restarted pod: whichever registered first).
    stream_spares() {
      local p
      # Running ones only: a log followed before its container started ends at once.
      for p in $(K -n $TNS get pods -l "lockstep.dev/job=$TJ,lockstep.dev/role" -o json |
        jq -r '.items[] | select(.status.phase == "Running") | .metadata.name'); do
        [[ $p == "$TJ-spare-"* && -z ${STREAMING[$p]:-} ]] && stream "$p" "$p"
      done
      return 0
    }
    holder_of() {
      local f n
      stream_spares
      for n in "${!STREAMING[@]}"; do
        [[ $n == "$hung" ]] && continue
        grep -q "\"event\":\"step\",\"rank\":$1," "$WORK/$n.jsonl" && { echo "$n"; return 0; }
      done
      return 1
    }
    wait_for "$TJ: another process committing steps of rank $HANG_RANK" 90 holder_of $HANG_RANK
    h1=$(holder_of $HANG_RANK)
    t_h1=$(events "$WORK/$h1.jsonl" | jq -s --argjson r $HANG_RANK '[.[] | select(.event == "step" and .rank == $r) | .t] | min')
    # The hung pod is deleted once the grace is over (the container never restarts).
    pod_gone() { ! K -n $TNS get pod "$hung" -o json | jq -e '.metadata.deletionTimestamp == null' >/dev/null; }
    wait_for "$TJ: the hung pod $hung fenced (deleted)" 90 pod_gone
    t_gone=$(date +%s.%N)
    K -n $TNS logs "$TJ-coordinator" --tail=-1 >"$WORK/$TJ-coordinator-hang.log" 2>/dev/null || true
    coord_json() { grep -h '^{' "$WORK/$TJ-coordinator-hang.log" | jq -c --arg p "$hung" "select(.pod == \$p) | $1"; }
    dead_line=$(grep -h '^{' "$WORK/$TJ-coordinator-hang.log" | jq -c --arg r $HANG_RANK 'select(.msg == "member_dead" and .rank == $r)' | head -n1)
    [[ -n $dead_line ]] || fail "$TJ: the coordinator logged no member_dead for rank $HANG_RANK"
    # A stopped process stops heartbeating (heartbeat_timeout); a stuck training thread
    # whose heartbeat thread lives on would be "hung". Either way not a pod the probe saw end.
    jq -e '.cause == "heartbeat_timeout" or .cause == "hung"' <<<"$dead_line" >/dev/null ||
      fail "$TJ: rank $HANG_RANK taken for dead as: $dead_line"
    t_deferred=$(coord_json 'select(.msg == "fence deferred") | .ts' | head -n1)
    fence_line=$(coord_json 'select(.msg == "fence")' | head -n1)
    [[ -n $t_deferred ]] || fail "$TJ: no \"fence deferred\" for $hung in the coordinator's log"
    [[ -n $fence_line ]] || fail "$TJ: no \"fence\" for $hung in the coordinator's log"
    [[ -z $(coord_json 'select(.msg == "fence skipped")') ]] || fail "$TJ: the fence of the hung $hung was skipped"
    t_fence=$(jq -r .ts <<<"$fence_line")
    jq -e '(.why | test("still running after the restart grace")) and .result == "done"' <<<"$fence_line" >/dev/null ||
      fail "$TJ: the hung pod's fence: $fence_line"
    awk -v d="$t_deferred" -v f="$t_fence" -v h="$t_h1" -v s="$t_stop" -v g="$t_gone" \
      'BEGIN { exit !(f - d >= 10 && f - d < 14 && h < f && d > s && g >= f) }' ||
      fail "$TJ: hang timeline (s after the SIGSTOP): deferred $t_deferred, new holder's first step $t_h1, fence $t_fence, pod gone seen $t_gone (stop $t_stop)"
    hang_fts=$(awk -v h="$t_h1" -v s="$t_stop" 'BEGIN { printf "%.2f", h - s }')
    hang_fence_s=$(awk -v f="$t_fence" -v s="$t_stop" 'BEGIN { printf "%.2f", f - s }')
    HANG_TIMES=$(awk -v d="$t_deferred" -v f="$t_fence" -v h="$t_h1" -v s="$t_stop" \
      'BEGIN { printf "dead and fence deferred %.2f s, the new holder'"'"'s first step %.2f s, the fence (its pod'"'"'s delete) %.2f s after the SIGSTOP", d - s, h - s, f - s }')
    pass "$TJ: hung rank $HANG_RANK ($(jq -r '.cause + ": " + .reason' <<<"$dead_line")): $h1 took the rank at once, $hung fenced only after the 10 s restart grace: $HANG_TIMES"
  fi

  # 7. The job finishes.
  ended() { grep -q '"event":"end"' "$WORK/$1.jsonl"; }
  for r in 0 1 3; do
    if ((hang)) && [[ $r == "$HANG_RANK" ]]; then
      wait_for "$TJ: rank $r finished (on $h1)" 300 ended "$h1"
    else
      wait_for "$TJ: rank $r finished" 300 ended "${POD[$r]}"
    fi
  done
  wait_for "$TJ: rank $VICTIM finished (on $nh)" 300 ended "$nh"
  cond() { K -n $TNS get $KRES $TJ -o json | jq -e --arg t "$1" '.status.conditions // [] | any(.type == $t and .status == "True")'; }
  wait_for "$KRES $TJ $DONE_COND" 120 cond $DONE_COND
  local t_end=$SECONDS how_kf
  for p in "${LOG_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  LOG_PIDS=()
  ! cond Failed >/dev/null || fail "$KRES $TJ is Failed"
  if [[ $kind == trainjob ]]; then
    local js job
    js=$(K -n $TNS get jobset $TJ -o json)
    [[ $(jq '.status.restarts // 0' <<<"$js") == 0 ]] || fail "JobSet $TJ restarted: $(jq -c .status <<<"$js")"
    job=$(K -n $TNS get job $TJ-node-0 -o json)
    # The fenced hung pod is the one failed pod the Job counts (its index recreated).
    [[ $(jq '.status.failed // 0' <<<"$job") == "$hang" && $(jq '.status.succeeded // 0' <<<"$job") == 4 ]] ||
      fail "Job $TJ-node-0: $(jq -c '{failed: .status.failed, succeeded: .status.succeeded}' <<<"$job") (want failed $hang)"
    how_kf="TrainJob Complete (not Failed), JobSet restarts 0, Job failed $hang and 4 indexes Succeeded"
  else
    local st
    st=$(K -n $TNS get pytorchjob $TJ -o json)
    ! jq -e '.status.conditions // [] | any(.type == "Restarting")' <<<"$st" >/dev/null ||
      fail "PyTorchJob $TJ restarted: $(jq -c .status.conditions <<<"$st")"
    echo "$st" >"$WORK/$TJ-pytorchjob.json"
    [[ $(jq '.status.replicaStatuses.Worker.failed // 0' <<<"$st") == 0 &&
      $(jq '.status.replicaStatuses.Worker.succeeded // 0' <<<"$st") == 4 ]] ||
      fail "PyTorchJob $TJ: $(jq -c .status.replicaStatuses <<<"$st")"
    # The training-operator recreates a missing index: still exactly one pod per index,
    # rank 2's the original one (its container restarted in place).
    local wp
    wp=$(K -n $TNS get pods -l "$SEL" -o json)
    [[ $(jq -c --arg l "$IDX_LABEL" '[.items[].metadata.labels[$l]] | sort' <<<"$wp") == '["0","1","2","3"]' ]] ||
      fail "PyTorchJob $TJ's worker pods: $(jq -c '[.items[] | {name: .metadata.name, uid: .metadata.uid, phase: .status.phase}]' <<<"$wp")"
    how_kf="PyTorchJob Succeeded (not Failed), never Restarting, 4 workers succeeded and none failed, one pod per index"
  fi
  [[ $(K -n $TNS get pod "$old" -o jsonpath='{.status.phase}') == Succeeded ]] || fail "$old did not succeed"
  local spares_done="$old's spare exited 0"
  if [[ $h1 == "$old.1" ]]; then
    # The spare in rank 2's restarted pod took rank 1 at the hang: it trained, then ended.
    spares_done="$old's spare trained as rank $HANG_RANK and ended"
  else
    events "$WORK/$old.1.jsonl" | jq -se '[.[] | select(.event == "step")] | length == 0' >/dev/null ||
      fail "the restarted process in $old trained"
    events "$WORK/$old.1.jsonl" | jq -se 'any(.lib_event == "exit")' >/dev/null || fail "the spare in $old was not told to exit"
  fi
  if ((hang)); then
    # The Job recreated the fenced index: one pod at index 1 now, not the hung one; its
    # process (LOCKSTEP_RANK=1, while rank 1 is held) joined as a spare and exited 0.
    local ip
    ip=$(K -n $TNS get pods -l "$SEL,$IDX_LABEL=$HANG_RANK" -o json)
    [[ $(jq '.items | length' <<<"$ip") == 1 && $(jq -r '.items[0].metadata.name' <<<"$ip") != "$hung" &&
      $(jq -r '.items[0].status.phase' <<<"$ip") == Succeeded ]] ||
      fail "$TJ: index $HANG_RANK's pods: $(jq -c '[.items[] | {name: .metadata.name, phase: .status.phase}]' <<<"$ip")"
    idx1=$(jq -r '.items[0].metadata.name' <<<"$ip")
    K -n $TNS logs "$idx1" >"$WORK/$idx1.jsonl" 2>/dev/null || fail "$TJ: no log of $idx1"
    [[ $(events "$WORK/$idx1.jsonl" | jq -rs '[.[] | select(.lib_event == "registered")][0].role') == spare ]] ||
      fail "$TJ: the process in the recreated $idx1 did not register as a spare"
    events "$WORK/$idx1.jsonl" | jq -se '[.[] | select(.event == "step")] | length == 0' >/dev/null ||
      fail "$TJ: the process in the recreated $idx1 trained"
    spares_done+=", the recreated index-$HANG_RANK pod $idx1's spare exited 0"
  fi
  pass "$TJ: $how_kf, $((t_end - t1))s after the job was created ($spares_done)"

  # 8. Steps, per rank over its holders (as e2e.train-pods counts them).
  declare -A HOLDERS=([0]=${POD[0]} [1]=${POD[1]} [2]="$old $nh" [3]=${POD[3]})
  ((hang)) && HOLDERS[$HANG_RANK]="${POD[$HANG_RANK]} $h1"
  local adopted=0 res h
  for r in 0 1 2 3; do
    : >"$WORK/$TJ-rank-$r.jsonl"
    for h in ${HOLDERS[$r]}; do events "$WORK/$h.jsonl" >>"$WORK/$TJ-rank-$r.jsonl"; done
    res=$(jq -sc --argjson r $r '
      reduce (.[] | select((.event == "step" and .rank == $r) or (.event == "lib" and .lib_event == "state_synced"))) as $e
        ({last: -1, sync: null, lost: 0, dup: 0, adopted: 0};
         if $e.event == "lib" then .sync = $e.step
         else
           (if $e.step <= .last then .dup += 1
            elif $e.step == .last + 1 then .
            elif .sync == $e.step then .adopted += ($e.step - .last - 1)
            else .lost += ($e.step - .last - 1) end)
           | .last = ([.last, $e.step] | max) | .sync = null
         end)' "$WORK/$TJ-rank-$r.jsonl") || fail "$TJ: rank $r's logs do not parse ($WORK/$TJ-rank-$r.jsonl)"
    [[ $(jq .dup <<<"$res") == 0 ]] || fail "$TJ: rank $r: steps committed twice: $res"
    [[ $(jq .lost <<<"$res") == 0 ]] || fail "$TJ: rank $r: steps skipped: $res"
    [[ $(jq .last <<<"$res") == $((STEPS - 1)) ]] || fail "$TJ: rank $r ended at step $(jq .last <<<"$res")"
    adopted=$((adopted + $(jq .adopted <<<"$res")))
  done
  pass "$TJ: 0 committed steps lost, none twice: every rank committed steps 0..$((STEPS - 1)) in order ($adopted received by a state sync at the re-form)"

  # 9. Healthy ranks kept their pods; bit identity.
  local j rc got healthy=(0 1 3)
  ((hang)) && healthy=(0 3)
  for r in "${healthy[@]}"; do
    j=$(K -n $TNS get pod "${POD[$r]}" -o json)
    [[ $(jq -r .metadata.uid <<<"$j") == "${UIDS[$r]}" ]] || fail "$TJ: rank $r's pod was replaced"
    rc=$(jq '[.status.containerStatuses[].restartCount] | add' <<<"$j")
    [[ $rc == 0 ]] || fail "$TJ: rank $r's container restarted $rc times"
  done
  pass "$TJ: healthy ranks ${healthy[*]} kept their pods (same UIDs, 0 restarts)"
  got=$(jq -sr '[.[] | select(.event == "end" and .rank == 0)][-1].sha256' "$WORK/$TJ-rank-0.jsonl")
  [[ $got =~ ^[0-9a-f]{64}$ ]] || fail "$TJ: rank 0 logged no final hash"
  [[ $got == "$REF" ]] || fail "$TJ: final parameters differ from the fault-free run: $got != $REF"
  pass "$TJ: final parameters equal the fault-free DDP run bit for bit (sha256 ${REF:0:16})"
  RESULTS+=("$(jq -nc --arg k "$kind" --argjson f "$fts" --argjson a "$adopted" \
    '{key: ($k + ".kill-rank2"), value: {fault_to_step_s: $f, lost_steps: 0, healthy_restarts: 0, bit_identical: true, adopted_steps: $a}}')")
  if ((hang)); then
    RESULTS+=("$(jq -nc --arg k "$kind" --argjson f "$hang_fts" --argjson d "$hang_fence_s" \
      '{key: ($k + ".hang-rank1"), value: {fault_to_step_s: $f, fence_after_s: $d, lost_steps: 0, healthy_restarts: 0, bit_identical: true}}')")
  fi
  # The coordinator's log stays in $WORK; how it took rank 2's old member for dead (the
  # pod probe first, or a peer's error first and then "hung": its fence deferred, then
  # skipped since the pod stays) goes to the output.
  K -n $TNS logs "$TJ-coordinator" --tail=-1 >"$WORK/$TJ-coordinator.log" 2>/dev/null || true
  say "$TJ: the coordinator on rank $VICTIM's first member: $(grep -h '^{' "$WORK/$TJ-coordinator.log" | jq -rc --arg r $VICTIM --arg p "$old" '
    select((.msg == "member_dead" and .rank == $r and .generation == "0") or
      ((.msg | test("^fence")) and ((.pod // "") == $p or ((.result // "") | endswith(" " + $p)))))
    | .msg + ": " + (.reason // .result // .why // "")' 2>/dev/null | paste -sd ';' -)"
  # Give the real nodes' CPU back before the next job.
  K -n $TNS delete $KRES "$TJ" --wait=false >/dev/null
}

for kind in $KINDS; do
  case $kind in
    trainjob) run_job trainjob kfm ;;
    pytorchjob) run_job pytorchjob kfp ;;
    *) fail "KF_MIGRATION_KINDS: unknown kind $kind (trainjob, pytorchjob)" ;;
  esac
done
printf '%s\n' "${RESULTS[@]}" | jq -sc '{lockstep: from_entries}'
