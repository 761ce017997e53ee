#!/usr/bin/env bash
# lockstep-coordinator --kube against a real API server (its own hermetic cluster,
# e2e/cluster/up, 1 kwok GPU node + 1 kwok CPU node; the coordinator runs here as a
# local process with --kubeconfig). Members are played with curl, their pods are
# kwok pods. Checks, in order:
#  1. spare pods appear at the requested pool size (--spares 2) from the start, named
#     <job>-spare-<n>-<suffix>, labelled lockstep.dev/job and lockstep.dev/role=spare,
#     with LOCKSTEP_COORDINATOR/LOCKSTEP_ROLE and the downward-API LOCKSTEP_POD_NAME/UID,
#     and without the template's owner reference, JobSet/batch/Kubeflow labels or node;
#  2. a spare pod deleted is replaced (the pool is kept at 2);
#  3. two ranks join with their pod names and uids; rank 1's pod had been deleted and
#     recreated under the same name (as a Job would) after the uid it sends was read:
#     the coordinator declares the member dead (pod replaced) and its fence (uid
#     precondition) leaves the new pod alone;
#  4. rank 0 keeps heartbeating but does not report the failure within the report
#     grace: it is declared hung (dead) and its pod is deleted;
#  5. the state ConfigMap holds the members with their pods; a restarted coordinator
#     continues from it (same members and generation, its spare pods adopted, none added);
#  6. triggers and status (a second job, mtrig, with a TrainingJob and the operator's
#     empty state ConfigMap): a rank pod annotated lockstep.dev/migrate=now gets a planned
#     migration in GET /v1/migrations (once); after the re-form the spare's pod carries
#     lockstep.dev/rank=1, the old pod is deleted after --leave-grace, the TrainingJob's
#     status shows generation, migrations and lastMigration, and an Event RankMigrated
#     is recorded on it.
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || fail "needs jq"
command -v curl >/dev/null || fail "needs curl"
COORD=$(find_bin LOCKSTEP_COORDINATOR_BIN migration/lockstep-coordinator)
BIN=${LOCKSTEP_K8S_BIN:-$("$REPO/scripts/install-k8s-tools" | tail -n1)}
export LOCKSTEP_K8S_BIN=$BIN
KDIR=$STATE/migration-kube-cluster
WORK=$STATE/migration-kube
JOB=mkube
MNS=training
K() { "$BIN/kubectl" --kubeconfig "$KDIR/kubeconfig" "$@"; }
mkdir -p "$STATE"
rm -rf "$WORK" && mkdir -p "$WORK"
"$REPO/e2e/cluster/down" "$KDIR" --purge >/dev/null 2>&1 || true
COORD_PID= BEAT_PID=
cleanup() {
  local rc=$?
  [[ -n $BEAT_PID ]] && kill "$BEAT_PID" 2>/dev/null
  [[ -n $COORD_PID ]] && kill "$COORD_PID" 2>/dev/null && wait "$COORD_PID" 2>/dev/null
  if ((rc != 0)); then
    for f in "$WORK"/coordinator-*.log; do
      [[ -f $f ]] && { say "last lines of $f:"; tail -n 25 "$f" >&2; }
    done
  fi
  "$REPO/e2e/cluster/down" "$KDIR" --purge >&2 || rc=1
  exit "$rc"
}
trap cleanup EXIT

T0=$SECONDS
"$REPO/e2e/cluster/up" --nodes 1 --cpu-nodes 1 --dir "$KDIR" >/dev/null
say "cluster up in $((SECONDS - T0))s"
T1=$SECONDS
K create namespace $MNS >/dev/null

# The template: what an operator would copy from a rank's pod, controller parts included.
cat >"$WORK/spare.json" <<'EOF'
{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "mkube-node-0-1-abcde", "generateName": "mkube-node-0-1-",
   "labels": {"app": "mkube", "jobset.sigs.k8s.io/jobset-name": "mkube", "batch.kubernetes.io/job-name": "mkube-node-0",
              "trainer.kubeflow.org/trainjob-ancestor-step": "trainer", "training.kubeflow.org/replica-type": "worker"},
   "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "mkube-node-0",
                        "uid": "5f0e3c43-0000-4000-8000-000000000001", "controller": true}]},
 "spec": {"nodeName": "node-that-is-gone", "restartPolicy": "OnFailure",
   "tolerations": [{"operator": "Exists"}],
   "containers": [{"name": "trainer", "image": "lockstep/train:dev",
     "env": [{"name": "PET_NODE_RANK", "value": "1"}, {"name": "KEEP", "value": "yes"}]}]}}
EOF

start_coordinator() {
  local log=$WORK/coordinator-$1.log
  rm -f "$WORK/port"
  "$COORD" --kube --kubeconfig "$KDIR/kubeconfig" --namespace $MNS --job $JOB --world-size 2 --spares 2 \
    --spare-pod-template "$WORK/spare.json" --state-configmap $JOB-state --listen 127.0.0.1:0 \
    --port-file "$WORK/port" --heartbeat-timeout 2s --report-grace 3s --join-timeout 60s \
    --advertise-url http://coordinator.example:7000 >"$log" 2>&1 </dev/null &
  COORD_PID=$!
  wait_for "coordinator $1 serving" 20 grep -q '"msg":"serving"' "$log"
  URL=http://127.0.0.1:$(cat "$WORK/port")
}
api() {
  if (($# > 2)); then
    curl -sf -X "$1" -H 'Content-Type: application/json' -d "$3" "$URL$2"
  else
    curl -sf -X "$1" "$URL$2"
  fi
}
member_status() { api GET /v1/state | jq -r --arg m "$1" '.members[] | select(.id == $m) | .status'; }
spares() { K -n $MNS get pods -l lockstep.dev/job=$JOB,lockstep.dev/role=spare -o json; }
spare_count_is() { [[ $(spares | jq '.items | length') == "$1" ]]; }

# --- 1. spare pods from the start, their shape ---------------------------------------
start_coordinator 1
wait_for "2 spare pods" 20 spare_count_is 2
sleep 1.5
spare_count_is 2 || fail "more than 2 spare pods: $(spares | jq -c '[.items[].metadata.name]')"
SP=$(spares)
echo "$SP" | jq -e --arg job $JOB '[.items[].metadata.name | test("^" + $job + "-spare-[0-9]+-[a-z0-9]{5}$")] | all' \
  >/dev/null || fail "spare pod names: $(echo "$SP" | jq -c '[.items[].metadata.name]')"
echo "$SP" | jq -e '[.items[] | .metadata.labels == {"app": "mkube", "lockstep.dev/job": "mkube", "lockstep.dev/role": "spare"}] | all' \
  >/dev/null || fail "spare pod labels: $(echo "$SP" | jq -c '.items[0].metadata.labels')"
echo "$SP" | jq -e '[.items[] | (.metadata.ownerReferences // []) == []] | all' >/dev/null ||
  fail "spare pods have owner references"
echo "$SP" | jq -e '[.items[] | .spec.restartPolicy == "Never" and .spec.nodeName != "node-that-is-gone"] | all' \
  >/dev/null || fail "spare pod spec: $(echo "$SP" | jq -c '.items[0].spec | {restartPolicy, nodeName}')"
ENV=$(echo "$SP" | jq -c '.items[0].spec.containers[0].env | map({(.name): (.value // .valueFrom.fieldRef.fieldPath)}) | add')
[[ $ENV == '{"KEEP":"yes","LOCKSTEP_COORDINATOR":"http://coordinator.example:7000","LOCKSTEP_ROLE":"spare","LOCKSTEP_POD_NAME":"metadata.name","LOCKSTEP_POD_UID":"metadata.uid"}' ]] ||
  fail "spare pod env: $ENV"
SPARE_NAMES=$(echo "$SP" | jq -r '[.items[].metadata.name] | sort | join(" ")')
pass "2 spare pods from the start, shaped for Lockstep and nothing of the job's controller ($SPARE_NAMES)"

# --- 2. a spare pod deleted is replaced -----------------------------------------------
GONE=${SPARE_NAMES%% *}
K -n $MNS delete pod "$GONE" --grace-period=0 --force >/dev/null 2>&1
replaced() { local n; n=$(spares | jq -r '[.items[].metadata.name] | sort | join(" ")'); [[ $(wc -w <<<"$n") == 2 && $n != *"$GONE"* ]]; }
wait_for "the deleted spare pod replaced" 15 replaced
SPARE_NAMES=$(spares | jq -r '[.items[].metadata.name] | sort | join(" ")')
pass "spare pod $GONE deleted and replaced; the pool is kept at 2 ($SPARE_NAMES)"


# --- 3. ranks join with their pods; a recreated pod of the same name survives the fence
rank_pod() {
  K -n $MNS apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "$1", "labels": {"app": "mkube-rank"}},
 "spec": {"tolerations": [{"operator": "Exists"}], "containers": [{"name": "trainer", "image": "lockstep/train:dev"}]}}
EOF
  wait_for "pod $1 running" 20 bash -c "[[ \$('$BIN/kubectl' --kubeconfig '$KDIR/kubeconfig' -n $MNS get pod $1 -o jsonpath='{.status.phase}') == Running ]]"
  K -n $MNS get pod "$1" -o jsonpath='{.metadata.uid}'
}
UID0=$(rank_pod $JOB-node-0-0)
UID1=$(rank_pod $JOB-node-0-1)
# Rank 1's pod is replaced between the moment its uid was read and the fence (a fixed
# order: the uid precondition, not timing, must keep the new pod).
K -n $MNS delete pod $JOB-node-0-1 --grace-period=0 --force >/dev/null 2>&1
NEW1=$(rank_pod $JOB-node-0-1)
[[ $NEW1 != "$UID1" ]] || fail "the recreated pod has the old uid"
for r in 0 1; do
  uid=UID$r
  api POST /v1/register "{\"member\":\"m$r\",\"role\":\"rank\",\"rank\":$r,\"host\":\"10.9.0.$r\",\"store_port\":4000,\"pid\":100,\"pod_name\":\"$JOB-node-0-$r\",\"pod_uid\":\"${!uid}\"}" \
    >/dev/null || fail "register m$r"
done
[[ $(api GET /v1/state | jq '.generation') == 0 ]] || fail "generation 0 did not form"
touch "$WORK/beat-m0" "$WORK/beat-m1"
(while true; do
  for m in m0 m1; do
    [[ -f $WORK/beat-$m ]] && api POST /v1/heartbeat "{\"member\":\"$m\",\"generation\":0,\"step\":1,\"state\":\"training\"}" >/dev/null 2>&1
  done
  sleep 0.3
done) &
BEAT_PID=$!
wait_for "m1 declared dead (its pod was replaced)" 10 bash -c "[[ \$(curl -sf $URL/v1/state | jq -r '.members[] | select(.id==\"m1\") | .status') == dead ]]"
wait_for "the fence of m1 done" 10 grep -q "is a newer pod (uid is not $UID1): left alone" "$WORK/coordinator-1.log"
sleep 1
[[ $(K -n $MNS get pod $JOB-node-0-1 -o jsonpath='{.metadata.uid}') == "$NEW1" ]] ||
  fail "the recreated pod $JOB-node-0-1 did not survive m1's fence"
api GET /v1/state | jq -e '.members[] | select(.id=="m1") | .fenced and (.gone_reason | test("replaced"))' >/dev/null ||
  fail "m1: $(api GET /v1/state | jq -c '.members[] | select(.id=="m1") | {status, fenced, gone_reason}')"
pass "m1 dead when its pod was replaced; the fence's uid precondition left the new pod alone"

# --- 4. a rank declared dead (hung: no report) gets its pod deleted -------------------
wait_for "m0 declared dead (hung: no report within the grace)" 10 bash -c "[[ \$(curl -sf $URL/v1/state | jq -r '.members[] | select(.id==\"m0\") | .status') == dead ]]"
wait_for "m0's pod deleted" 10 bash -c "! '$BIN/kubectl' --kubeconfig '$KDIR/kubeconfig' -n $MNS get pod $JOB-node-0-0 >/dev/null 2>&1"
grep -q "deleted pod $JOB-node-0-0" "$WORK/coordinator-1.log" || fail "no fence log line for m0's pod"
[[ $(api GET /v1/state | jq -r '.members[] | select(.id=="m0") | .gone_cause') == hung ]] ||
  fail "m0: $(api GET /v1/state | jq -c '.members[] | select(.id=="m0") | {gone_cause, gone_reason}')"
pass "m0 dead (hung: heartbeating, no report); its pod deleted (grace 0, uid precondition)"
kill "$BEAT_PID" && BEAT_PID=

# --- 5. the state ConfigMap; a restart continues from it -----------------------------
CM=$(K -n $MNS get configmap $JOB-state -o json)
echo "$CM" | jq -e --arg u "$UID0" '.data["state.json"] | fromjson | .members[] | select(.id=="m0") | .pod_name == "mkube-node-0-0" and .pod_uid == $u and .status == "dead"' \
  >/dev/null || fail "state ConfigMap: $(echo "$CM" | jq -c '.data["state.json"] | fromjson | .members')"
BEFORE=$(api GET /v1/state | jq -c '{generation, members: [.members[] | {id, status, pod_name}]}')
kill -TERM "$COORD_PID" && wait "$COORD_PID" || true
COORD_PID=
start_coordinator 2
grep -q '"restored":"yes"' "$WORK/coordinator-2.log" || fail "the restarted coordinator did not restore its state"
AFTER=$(api GET /v1/state | jq -c '{generation, members: [.members[] | {id, status, pod_name}]}')
[[ $AFTER == "$BEFORE" ]] || fail "state after the restart: $AFTER (before: $BEFORE)"
grep '"msg":"adopted spare pods"' "$WORK/coordinator-2.log" | grep -q '"count":"2"' ||
  fail "the spare pods were not adopted"
sleep 2
spare_count_is 2 || fail "spare pods after the restart: $(spares | jq -c '[.items[].metadata.name]')"
[[ $(spares | jq -r '[.items[].metadata.name] | sort | join(" ")') == "$SPARE_NAMES" ]] ||
  fail "the restart changed the spare pods"
pass "state in ConfigMap $JOB-state; the restarted coordinator continued from it and kept its 2 spare pods"
kill -TERM "$COORD_PID" && wait "$COORD_PID" || true
COORD_PID=

# --- 6. triggers and status: lockstep.dev/migrate=now on a rank's pod ----------------
TJ=mtrig
K apply -f "$REPO/crds/lockstep.dev_trainingjobs.yaml" >/dev/null
K wait --for condition=established crd/trainingjobs.lockstep.dev --timeout=30s >/dev/null
K -n $MNS apply -f - >/dev/null <<EOF
{"apiVersion": "lockstep.dev/v1alpha1", "kind": "TrainingJob", "metadata": {"name": "$TJ"},
 "spec": {"replicas": 2, "spares": 1,
          "template": {"spec": {"containers": [{"name": "trainer", "image": "lockstep/train:dev"}]}}}}
EOF
TJ_UID=$(K -n $MNS get trainingjob $TJ -o jsonpath='{.metadata.uid}')
# What the operator applies: the state ConfigMap with metadata only, owned by the job.
K -n $MNS apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "ConfigMap",
 "metadata": {"name": "$TJ-coordinator-state", "labels": {"lockstep.dev/job": "$TJ"},
   "ownerReferences": [{"apiVersion": "lockstep.dev/v1alpha1", "kind": "TrainingJob", "name": "$TJ",
                        "uid": "$TJ_UID", "controller": true}]}}
EOF
trig_pod() { # trig_pod NAME ROLE [RANK]: a pod of job mtrig labelled as the operator does; prints its uid
  local labels="\"lockstep.dev/job\": \"$TJ\", \"lockstep.dev/role\": \"$2\""
  [[ -n ${3:-} ]] && labels+=", \"lockstep.dev/rank\": \"$3\""
  K -n $MNS apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "$1", "labels": {$labels}},
 "spec": {"tolerations": [{"operator": "Exists"}], "containers": [{"name": "trainer", "image": "lockstep/train:dev"}]}}
EOF
  wait_for "pod $1 running" 20 bash -c "[[ \$('$BIN/kubectl' --kubeconfig '$KDIR/kubeconfig' -n $MNS get pod $1 -o jsonpath='{.status.phase}') == Running ]]"
  K -n $MNS get pod "$1" -o jsonpath='{.metadata.uid}'
}
TU0=$(trig_pod $TJ-rank-0 rank 0)
TU1=$(trig_pod $TJ-rank-1 rank 1)
TUS=$(trig_pod $TJ-spare-0 spare)
LOG3=$WORK/coordinator-3.log
rm -f "$WORK/port"
"$COORD" --kube --kubeconfig "$KDIR/kubeconfig" --namespace $MNS --job $TJ --world-size 2 --spares 1 \
  --state-configmap $TJ-coordinator-state --listen 127.0.0.1:0 --port-file "$WORK/port" \
  --heartbeat-timeout 5s --report-grace 5s --join-timeout 60s --leave-grace 3s >"$LOG3" 2>&1 </dev/null &
COORD_PID=$!
wait_for "coordinator 3 serving" 20 grep -q '"msg":"serving"' "$LOG3"
URL=http://127.0.0.1:$(cat "$WORK/port")
for r in 0 1; do
  uid=TU$r
  api POST /v1/register "{\"member\":\"m$r\",\"role\":\"rank\",\"rank\":$r,\"host\":\"10.8.0.$r\",\"store_port\":4000,\"pid\":100,\"pod_name\":\"$TJ-rank-$r\",\"pod_uid\":\"${!uid}\"}" \
    >/dev/null || fail "register m$r"
done
api POST /v1/register "{\"member\":\"s0\",\"role\":\"spare\",\"host\":\"10.8.0.9\",\"store_port\":4000,\"pid\":100,\"pod_name\":\"$TJ-spare-0\",\"pod_uid\":\"$TUS\"}" \
  >/dev/null || fail "register s0"
# Heartbeats: "<generation> <step> <members...>" in $WORK/beat; s0 waits as a spare until it holds a rank.
echo "0 1 m0 m1" >"$WORK/beat"
(while true; do
  read -r g st ms <"$WORK/beat"
  for m in $ms; do
    api POST /v1/heartbeat "{\"member\":\"$m\",\"generation\":$g,\"step\":$st,\"state\":\"training\"}" >/dev/null 2>&1
  done
  [[ $ms == *s0* ]] || api POST /v1/heartbeat '{"member":"s0","generation":-1,"step":0,"state":"waiting"}' >/dev/null 2>&1
  sleep 0.3
done) &
BEAT_PID=$!
wait_for "generation 0 of $TJ complete" 10 bash -c "curl -sf $URL/v1/state | jq -e '.history[-1].status == \"complete\"'"
K -n $MNS annotate pod $TJ-rank-1 lockstep.dev/migrate=now lockstep.dev/migrate-reason="e2e: move rank 1" >/dev/null
planned() { api GET /v1/migrations | jq -e '[.[] | select(.rank == 1 and .kind == "planned" and .reason == "e2e: move rank 1")] | length == 1'; }
wait_for "a planned migration of rank 1 in GET /v1/migrations" 10 planned
grep -q '"msg":"migration requested by pod annotation"' "$LOG3" || fail "no log line for the annotation's request"
pass "pod $TJ-rank-1 annotated lockstep.dev/migrate=now: a planned migration of rank 1 in GET /v1/migrations"
# The ranks pause at the step asked for; s0 takes rank 1 in generation 1.
# (The coordinator sets the pause on its next round, not inside the request.)
pause_set() { [[ $(api GET /v1/state | jq -r '.transition.pause_at_step') =~ ^[0-9]+$ ]]; }
wait_for "a pause step for the planned migration" 10 pause_set ||
  fail "no pause step: $(api GET /v1/state | jq -c '{phase, transition}')"
P=$(api GET /v1/state | jq -r '.transition.pause_at_step')
echo "0 1" >"$WORK/beat"
for m in m0 m1; do
  api POST /v1/report "{\"member\":\"$m\",\"generation\":0,\"committed_step\":$P,\"reason\":\"pause\"}" >/dev/null ||
    fail "pause report of $m"
done
[[ $(api GET /v1/state | jq -c '.history[-1].members') == '["m0","s0"]' ]] ||
  fail "generation 1: $(api GET /v1/state | jq -c '.history[-1] | {number, members}')"
echo "1 $P m0 s0" >"$WORK/beat"
wait_for "generation 1 complete" 10 bash -c "curl -sf $URL/v1/state | jq -e '.history[-1].status == \"complete\"'"
holder() { [[ $(K -n $MNS get pods -l lockstep.dev/rank=1 -o jsonpath='{.items[*].metadata.name}') == "$TJ-spare-0" ]]; }
wait_for "kubectl get pods -l lockstep.dev/rank=1 finds the spare's pod only" 10 holder
[[ $(K -n $MNS get pod $TJ-spare-0 -o jsonpath='{.metadata.labels.lockstep\.dev/role}') == rank ]] ||
  fail "the spare's pod is not labelled role=rank"
pass "the spare's pod $TJ-spare-0 carries lockstep.dev/role=rank, lockstep.dev/rank=1"
status_done() {
  K -n $MNS get trainingjob $TJ -o json | jq -e --arg from $TJ-rank-1 --arg to $TJ-spare-0 \
    '.status.generation == 1 and .status.migrations == 1 and .status.lastMigration.rank == 1 and
     .status.lastMigration.fromPod == $from and .status.lastMigration.toPod == $to and
     .status.lastMigration.reason == "e2e: move rank 1" and .status.lastMigration.durationMs >= 0 and
     (.status.lastMigration.completeTime | length) > 0'
}
wait_for "TrainingJob $TJ status: generation 1, 1 migration, lastMigration" 15 status_done
event() {
  K -n $MNS get events --field-selector involvedObject.name=$TJ,reason=RankMigrated -o json |
    jq -e --arg m "rank 1 moved from pod $TJ-rank-1 to pod $TJ-spare-0 in " '[.items[] | select(.message | startswith($m))] | length == 1'
}
wait_for "an Event RankMigrated on TrainingJob $TJ" 10 event
pass "TrainingJob $TJ: $(K -n $MNS get trainingjob $TJ -o json | jq -c '.status | {generation, migrations, lastMigration}'); Event RankMigrated"
wait_for "the old pod $TJ-rank-1 deleted after --leave-grace" 15 bash -c "! '$BIN/kubectl' --kubeconfig '$KDIR/kubeconfig' -n $MNS get pod $TJ-rank-1 >/dev/null 2>&1"
sleep 1.5
[[ $(api GET /v1/migrations | jq length) == 1 ]] || fail "the annotation was acted on more than once: $(api GET /v1/migrations | jq -c .)"
K -n $MNS get configmap $TJ-coordinator-state -o json |
  jq -e '.data["state.json"] | fromjson | .history | length == 2' >/dev/null || fail "state not in the operator's ConfigMap"
pass "the migrated-away pod deleted after --leave-grace; one migration for the annotation; state in the operator's ConfigMap"
kill "$BEAT_PID" && BEAT_PID=
say "test body $((SECONDS - T1))s"

