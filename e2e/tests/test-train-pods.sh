#!/usr/bin/env bash
# Training in real pods on real nodes (issue 23 §4): a TrainingJob with 4 ranks + 1 hot
# spare runs e2e/workloads/migration_train.py (lockstep_train, torch 1.13, gloo over the
# pods' network) from the lockstep-train image (images/build --train) on 2 real GPU
# nodes; its coordinator pod (lockstep-coordinator --kube) runs on a real CPU node; the
# operator runs here as a process (--coordinator-address pod-ip: the test cluster has
# no DNS and no Service proxy; pods reach pods on other nodes by their IPs, the nodes
# route each other's pod subnets). Rank 2's process is SIGKILLed from the host (its pid
# from the node's containerd) after it committed a step. Checks:
#  - the job finishes: every rank's final pod Succeeded, rank 0 wrote the final hash;
#  - 0 committed steps lost and none committed twice: for each rank, the steps its
#    pods committed are 0..STEPS-1, each once;
#  - rank 0, 1 and 3 keep their pods (same UIDs) with restart count 0;
#  - a spare pod took rank 2 over (labelled lockstep.dev/rank=2, its log has the steps
#    after the kill), and the killed pod is gone;
#  - the final parameters equal a fault-free run of the same script, seed and world
#    size (plain torch DDP, 4 local processes, Debian's torch: the image's) bit for bit.
# Prints the time from the kill to the next committed full-size step, as a table and a
# JSON line (lockstep.kill.{fault_to_step_s,lost_steps,healthy_restarts,bit_identical}).
# Needs root (real nodes) and the images (built here into the build tree, cached).
. "$(dirname "$0")/lib.sh"
[[ $(id -u) -eq 0 ]] || fail "needs root (namespaces, cgroups, containerd)"
command -v jq >/dev/null || fail "needs jq"
BIN=${LOCKSTEP_K8S_BIN:-$("$REPO/scripts/install-k8s-tools" | tail -n1)}
export LOCKSTEP_K8S_BIN=$BIN
OPERATOR=$(find_bin LOCKSTEP_OPERATOR operator/lockstep-operator)
# shellcheck source=../cluster/lib.sh
. "$REPO/e2e/cluster/lib.sh"
app_version=$(chart_app_version)
STEPS=${TRAIN_PODS_STEPS:-160}
KILL_AT=${TRAIN_PODS_KILL_AT:-50}          # rank 2 is killed once it committed this step
ARGS=(--mode lockstep --steps "$STEPS" --hidden 64 --layers 3 --batch 16 --seed 11 --min-step-s 0.1)
JOB=tp
TNS=train
WORK=$STATE/train-pods
RDIR=$STATE/train-pods-cluster
K() { "$BIN/kubectl" --kubeconfig "$RDIR/kubeconfig" "$@"; }
mkdir -p "$STATE"
rm -rf "$WORK" && mkdir -p "$WORK"

# 1. Images: the three of images/build plus lockstep-train (cached in the build tree).
build_dir=${LOCKSTEP_BUILD_DIR:-$REPO/build/ci}
images_dir=$build_dir/images
T0=$SECONDS
"$REPO/images/build" --build-dir "$build_dir" --out "$images_dir" --train >"$WORK/images.log" 2>&1 ||
  fail "images/build --train failed: $(tail -5 "$WORK/images.log")"
TRAIN_TAR=$images_dir/lockstep-train-$app_version.oci.tar
COORD_TAR=$images_dir/lockstep-coordinator-$app_version.oci.tar
[[ -f $TRAIN_TAR && -f $COORD_TAR ]] || fail "no image archives in $images_dir"
TRAIN_IMAGE=ghcr.io/lockstep/lockstep-train:$app_version
sizes=$(jq -r '.[] | select(.name == "lockstep-train") | "\(.archive_bytes) \(.rootfs_tar_bytes)"' "$images_dir/images.json")
say "images ready in $((SECONDS - T0))s (lockstep-train: archive $((${sizes% *} >> 20)) MiB, root filesystem $((${sizes#* } >> 20)) MiB)"

"$REPO/e2e/cluster/down" "$RDIR" --purge >/dev/null 2>&1 || true
OP_PID= REF_PIDS=() LOG_PIDS=()
cleanup() {
  local rc=$?
  for p in "${LOG_PIDS[@]}" "${REF_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  if [[ -n $OP_PID ]]; then kill "$OP_PID" 2>/dev/null && wait "$OP_PID" 2>/dev/null || true; fi
  if ((rc != 0)); then
    [[ -f $WORK/operator.log ]] && { say "last lines of the operator's log:"; tail -n 15 "$WORK/operator.log" >&2; }
    K -n $TNS get pods -o wide >&2 2>/dev/null || true
    K -n $TNS logs $JOB-coordinator --tail=25 >&2 2>/dev/null || true
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
    "$REPO/e2e/workloads/migration_train.py" "${ref_args[@]}" --log "$WORK/ref.jsonl" "${hash_args[@]}" \
    >/dev/null 2>"$WORK/ref-$r.err" &
  REF_PIDS+=($!)
done

# 3. The cluster: 2 real GPU nodes (ranks, spares), 1 real CPU node (the coordinator).
T0=$SECONDS
"$REPO/e2e/cluster/up" --dir "$RDIR" --nodes 0 --cpu-nodes 0 --real-nodes 2 --real-cpu-nodes 1 \
  --real-node-image "$TRAIN_TAR" --real-node-image "$COORD_TAR" >"$WORK/up.log" 2>&1 ||
  fail "cluster up: $(tail -5 "$WORK/up.log")"
say "cluster with 3 real nodes up in $((SECONDS - T0))s"
# The chart for the CRDs and RBAC (the coordinator's ClusterRole); the operator runs here.
"$BIN/helm" --kubeconfig "$RDIR/kubeconfig" install lockstep "$REPO/charts/lockstep" -n lockstep-system \
  --create-namespace --set operator.replicas=0 >"$WORK/helm.log" 2>&1 || fail "helm install: $(tail -3 "$WORK/helm.log")"
setsid "$OPERATOR" --kubeconfig "$RDIR/kubeconfig" --namespace lockstep-system --leader-elect=false \
  --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 --coordinator-address pod-ip \
  --coordinator-image "ghcr.io/lockstep/lockstep-coordinator:$app_version" >"$WORK/operator.log" 2>&1 </dev/null &
OP_PID=$!
K create namespace $TNS >/dev/null
args_json=$(printf '%s\n' /opt/lockstep/migration_train.py "${ARGS[@]}" | jq -R . | jq -sc .)
K apply -f - >/dev/null <<EOF
{"apiVersion": "lockstep.dev/v1alpha1", "kind": "TrainingJob",
 "metadata": {"name": "$JOB", "namespace": "$TNS"},
 "spec": {"replicas": 4, "spares": 1,
   "template": {"spec": {
     "nodeSelector": {"nvidia.com/gpu.present": "true"},
     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
     "terminationGracePeriodSeconds": 1,
     "containers": [{"name": "train", "image": "$TRAIN_IMAGE", "imagePullPolicy": "Never",
       "args": $args_json,
       "env": [{"name": "LOCKSTEP_HANG_TIMEOUT", "value": "10"}],
       "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}}}]}}}}
EOF
T1=$SECONDS
rank_pod_json() { K -n $TNS get pods -l "lockstep.dev/job=$JOB,lockstep.dev/rank=$1" -o json; }
all_ranks_running() {
  local r
  for r in 0 1 2 3; do
    [[ $(K -n $TNS get pod $JOB-rank-$r -o jsonpath='{.status.phase}' 2>/dev/null) == Running ]] || return 1
  done
}
wait_for "the coordinator pod and 4 rank pods Running" 120 all_ranks_running
say "4 rank pods Running $((SECONDS - T1))s after the TrainingJob ($(K -n $TNS get pods -o wide --no-headers | awk '{print $1 "@" $7 "(" $6 ")"}' | tr '\n' ' '))"
declare -A UID0 NODE0
for r in 0 1 2 3; do
  UID0[$r]=$(K -n $TNS get pod $JOB-rank-$r -o jsonpath='{.metadata.uid}')
  NODE0[$r]=$(K -n $TNS get pod $JOB-rank-$r -o jsonpath='{.spec.nodeName}')
  K -n $TNS logs -f $JOB-rank-$r >"$WORK/rank-$r.jsonl" 2>"$WORK/rank-$r.logerr" &
  LOG_PIDS+=($!)
done

# 4. SIGKILL rank 2's process once it committed step KILL_AT: its pid from the node's containerd.
committed() { grep -q "\"event\":\"step\",\"rank\":$1,\"step\":$2," "$WORK/rank-$1.jsonl"; }
wait_for "rank 2 committed step $KILL_AT" 180 committed 2 "$KILL_AT"
cid=$(K -n $TNS get pod $JOB-rank-2 -o jsonpath='{.status.containerStatuses[0].containerID}')
cid=${cid#containerd://}
sock=$RDIR/nodes/${NODE0[2]}/containerd.sock
pid=$(ctr --address "$sock" -n k8s.io tasks ls | awk -v c="$cid" '$1 == c { print $2 }')
[[ $pid =~ ^[0-9]+$ ]] || fail "no pid for rank 2's container $cid on ${NODE0[2]}"
grep -q migration_train.py "/proc/$pid/cmdline" || fail "pid $pid is not the training script: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
T_KILL=$(date +%s.%N)
kill -KILL "$pid"
say "SIGKILLed rank 2 (pid $pid, pod $JOB-rank-2 on ${NODE0[2]}) after its step $KILL_AT"

# 5. A spare takes rank 2 over; the job finishes.
taken_over() { rank_pod_json 2 | jq -e --arg j $JOB '[.items[] | select(.metadata.name | startswith($j + "-spare-"))] | length == 1'; }
wait_for "a spare pod labelled rank 2" 60 taken_over
NEW2=$(rank_pod_json 2 | jq -r --arg j $JOB '.items[] | select(.metadata.name | startswith($j + "-spare-")) | .metadata.name')
K -n $TNS logs -f "$NEW2" >"$WORK/rank-2-new.jsonl" 2>"$WORK/rank-2-new.logerr" &
LOG_PIDS+=($!)
say "spare pod $NEW2 holds rank 2"
ended() { grep -q '"event":"end"' "$WORK/rank-$1.jsonl"; }
for r in 0 1 3; do wait_for "rank $r finished" 240 ended $r; done
wait_for "the new rank 2 finished" 60 grep -q '"event":"end"' "$WORK/rank-2-new.jsonl"
pod_done() { [[ $(K -n $TNS get pod "$1" -o jsonpath='{.status.phase}') == Succeeded ]]; }
for p in $JOB-rank-0 $JOB-rank-1 $JOB-rank-3 "$NEW2"; do wait_for "pod $p Succeeded" 30 pod_done "$p"; done
T_END=$SECONDS
for p in "${LOG_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
LOG_PIDS=()
pass "the job finished: ranks 0, 1, 3 and the spare holding rank 2 Succeeded ($((T_END - T1))s after the TrainingJob)"

# 6. Steps: each rank's committed steps 0..STEPS-1, each once (rank 2: old pod + spare).
cat "$WORK/rank-2.jsonl" "$WORK/rank-2-new.jsonl" >"$WORK/rank-2-all.jsonl"
lost_total=0 dup_total=0
for r in 0 1 2 3; do
  f=$WORK/rank-$r.jsonl
  [[ $r == 2 ]] && f=$WORK/rank-2-all.jsonl
  read -r n uniq lost <<<"$(jq -sr --argjson r $r --argjson n "$STEPS" \
    '[.[] | select(.event == "step" and .rank == $r) | .step] as $s
     | "\($s | length) \($s | unique | length) \([range($n)] - $s | length)"' "$f")"
  ((lost == 0)) || fail "rank $r: $lost of $STEPS steps never committed"
  ((n == uniq)) || fail "rank $r: $((n - uniq)) steps committed twice"
  lost_total=$((lost_total + lost)) dup_total=$((dup_total + n - uniq))
done
last_old=$(jq -s '[.[] | select(.event == "step") | .step] | max' "$WORK/rank-2.jsonl")
first_new=$(jq -s '[.[] | select(.event == "step") | .step] | min' "$WORK/rank-2-new.jsonl")
((first_new == last_old + 1)) || fail "rank 2: the killed pod's last step $last_old, the spare's first $first_new"
pass "0 committed steps lost, none twice: each rank committed steps 0..$((STEPS - 1)) once; rank 2 steps 0..$last_old in $JOB-rank-2, $first_new.. in $NEW2"

# 7. Healthy ranks kept their pods; the killed one is gone.
healthy_restarts=0
for r in 0 1 3; do
  j=$(K -n $TNS get pod $JOB-rank-$r -o json)
  [[ $(jq -r .metadata.uid <<<"$j") == "${UID0[$r]}" ]] || fail "rank $r's pod was replaced"
  rc=$(jq '[.status.containerStatuses[].restartCount] | add' <<<"$j")
  healthy_restarts=$((healthy_restarts + rc))
  [[ $rc == 0 ]] || fail "rank $r's container restarted $rc times"
  [[ $(jq -r '.metadata.labels["lockstep.dev/rank"]' <<<"$j") == "$r" ]] || fail "rank $r's pod lost its rank label"
done
gone() { ! K -n $TNS get pod $JOB-rank-2 -o name 2>/dev/null | grep -q .; }
wait_for "the killed rank 2 pod deleted (fenced)" 30 gone
pass "ranks 0, 1, 3 kept their pods (same UIDs, 0 restarts); $JOB-rank-2 was deleted, $NEW2 took rank 2"

# 8. Bit identity with the fault-free reference.
for p in "${REF_PIDS[@]}"; do wait "$p" || fail "the reference DDP run failed: $(tail -3 "$WORK"/ref-*.err)"; done
REF_PIDS=()
ref=$(cat "$WORK/ref.sha256")
got=$(jq -sr '[.[] | select(.event == "end" and .rank == 0)][0].sha256' "$WORK/rank-0.jsonl")
[[ $got == "$ref" ]] || fail "final parameters differ from the fault-free run: $got != $ref"
pass "final parameters equal the fault-free DDP run bit for bit (sha256 ${ref:0:16})"

# 9. Kill -> next committed full-size step (the spare's first step: every rank took part).
t_step=$(jq -s '[.[] | select(.event == "step") | .t] | min' "$WORK/rank-2-new.jsonl")
t_any=$(jq -s --argjson k "$T_KILL" '[.[] | select(.event == "step" and .t > $k) | .t] | min' "$WORK/rank-0.jsonl")
fault_to_step=$(awk -v a="$T_KILL" -v b="$t_step" 'BEGIN { printf "%.2f", b - a }')
rank0_next=$(awk -v a="$T_KILL" -v b="$t_any" 'BEGIN { printf "%.2f", b - a }')
printf '%-34s %s\n' "metric" "value" \
  "image lockstep-train archive/rootfs" "$((${sizes% *} >> 20)) / $((${sizes#* } >> 20)) MiB" \
  "kill -> next full-size step" "${fault_to_step} s" \
  "kill -> rank 0's next step" "${rank0_next} s" \
  "lost steps / steps twice" "$lost_total / $dup_total" \
  "healthy rank restarts" "$healthy_restarts" >&2
jq -nc --argjson f "$fault_to_step" --argjson l "$lost_total" --argjson h "$healthy_restarts" \
  --argjson a "${sizes% *}" --argjson t "${sizes#* }" \
  '{lockstep: {kill: {fault_to_step_s: $f, lost_steps: $l, healthy_restarts: $h, bit_identical: true}},
    train_image: {archive_bytes: $a, rootfs_bytes: $t}}'
