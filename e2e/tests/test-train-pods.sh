#!/usr/bin/env bash
# Training in real pods on real nodes (issue 23 §4): TrainingJobs of 4 ranks + a hot
# spare pod per fault (1 for tpa, 2 for tpb) run e2e/workloads/migration_train.py (lockstep_train, torch 1.13, gloo over the
# pods' network) from the lockstep-train image (images/build --train) on 2 real GPU
# nodes; each job's coordinator pod (lockstep-coordinator --kube) runs on a real CPU node;
# the operator runs here as a process (--coordinator-address pod-ip: the test cluster has
# no DNS and no Service proxy; pods reach pods on other nodes by their IPs, the nodes
# route each other's pod subnets). Faults, one job after the other (TRAIN_PODS_SCENARIOS):
#   tpa: rank 2's process SIGKILLed from the host (its pid from the node's containerd)
#        once it committed step 50;
#   tpb: rank 1's pod deleted at step 40, then rank 0's process SIGKILLed at step 110.
# More fault kinds (e2e.train-pods-faults runs them: TRAIN_PODS_SCENARIOS, more steps):
#   drain:R@S     `kubectl drain` of rank R's node (planned: the operator annotates the
#                 node's rank pods drain, each rank moves to a spare first and its old
#                 pod's eviction then passes the PodDisruptionBudget; every rank there
#                 moves; the node is uncordoned afterwards);
#   notready:R@S  the kubelet of rank R's node stopped (SIGSTOP): the node lifecycle
#                 controller marks it NotReady (node-monitor-grace-period, 50 s here),
#                 the operator annotates its pods node-not-ready, the coordinator takes
#                 their members for dead and deletes their pods (fenced; the processes
#                 run on, unseen by the kubelet, and are rejected by generation); the
#                 kubelet is resumed (SIGCONT) once the job finished;
#   a fault may end in +op (the operator SIGKILLed once the first pod is annotated
#   lockstep.dev/migrate, restarted 3 s later) or +coord (the coordinator's process
#   SIGKILLed 0.3 s after the fault (TRAIN_PODS_COORD_DELAY), in the middle of the
#   migration, restarted in place by its kubelet: the coordinator pod
#   cannot be deleted here, as the ranks were given its pod IP (no DNS, no Service
#   proxy) and a new pod gets another one).
# A node fault moves every rank on that node (the healthy ranks are the others).
# Before each fault the test waits for a spare pod registered with the coordinator (hot:
# torch imported; the pool is refilled after each migration).
# Checks for each job:
#  - it finishes: the last pod of every rank Succeeded, rank 0 logged the final hash;
#  - 0 committed steps lost and none committed twice: every rank's pods committed steps
#    0..STEPS-1 in order, none twice, a gap only where the next state came from a
#    replica (state_synced; counted as adopted);
#  - every healthy rank keeps its pod (same UID) with restart count 0;
#  - a spare pod took each faulted rank over (labelled lockstep.dev/rank=R, its log has
#    the steps after the fault), and the faulted pods are gone (fenced);
#  - the final parameters equal a fault-free run of the same script, seed and world size
#    (plain torch DDP, 4 local processes, Debian's torch: the image's) bit for bit.
# Prints, per fault, the time from the fault to the spare's first committed step (every
# rank takes part: a full-size step) as a table and a JSON line
# (lockstep.<kind>-rank<R>.{fault_to_step_s,lost_steps,healthy_restarts,bit_identical}).
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
TNS=train
NAME=${TRAIN_PODS_NAME:-train-pods}  # the state directories' name (short: containerd's socket path under it must fit 104 bytes)
WORK=$STATE/$NAME
RDIR=$STATE/$NAME-cluster
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
OP_PID= REF_PIDS=() LOG_PIDS=() STOPPED_KUBELETS=()
cleanup() {
  local rc=$?
  for p in "${STOPPED_KUBELETS[@]}"; do kill -CONT "$p" 2>/dev/null || true; done
  for p in "${LOG_PIDS[@]}" "${REF_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  if [[ -n $OP_PID ]]; then kill "$OP_PID" 2>/dev/null && wait "$OP_PID" 2>/dev/null || true; fi
  if ((rc != 0)); then
    [[ -f $WORK/operator.log ]] && { say "last lines of the operator's log:"; tail -n 15 "$WORK/operator.log" >&2; }
    K -n $TNS get pods -o wide >&2 2>/dev/null || true
    K -n $TNS logs -l lockstep.dev/role=coordinator --tail=25 >&2 2>/dev/null || true
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
start_operator() {
  setsid "$OPERATOR" --kubeconfig "$RDIR/kubeconfig" --namespace lockstep-system --leader-elect=false \
    --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 --coordinator-address pod-ip \
    --coordinator-image "ghcr.io/lockstep/lockstep-coordinator:$app_version" >>"$WORK/operator.log" 2>&1 </dev/null &
  OP_PID=$!
}
start_operator
K create namespace $TNS >/dev/null
args_json=$(printf '%s\n' /opt/lockstep/migration_train.py "${ARGS[@]}" | jq -R . | jq -sc .)
for p in "${REF_PIDS[@]}"; do wait "$p" || fail "the reference DDP run failed: $(tail -3 "$WORK"/ref-*.err)"; done
REF_PIDS=()
REF=$(cat "$WORK/ref.sha256")
RESULTS=()  # one JSON object per fault: {"trigger":..,"job":..,"fault_to_step_s":..,...}

pod_phase() { K -n $TNS get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
# events FILE: the workload's JSON lines of a pod's log (the library also writes plain
# lines to stderr, e.g. "lockstep: waiting for a spare").
events() { grep '^{' "$1" || true; }
pod_gone() { ! K -n $TNS get pod "$1" -o name 2>/dev/null | grep -q .; }

# run_job JOB FAULT...: a TrainingJob JOB (4 ranks, one hot spare per fault) from the training image;
# each FAULT is kill:RANK@STEP (SIGKILL of the process holding RANK, from the host, once
# it committed STEP) or delete:RANK@STEP (its pod deleted); then every check above.
run_job() {
  local job=$1
  shift
  local faults=("$@") w r f kind rank step
  w=$WORK/$job
  mkdir -p "$w"
  K apply -f - >/dev/null <<EOF
{"apiVersion": "lockstep.dev/v1alpha1", "kind": "TrainingJob",
 "metadata": {"name": "$job", "namespace": "$TNS"},
 "spec": {"replicas": 4, "spares": ${#faults[@]},
   "template": {"spec": {
     "nodeSelector": {"nvidia.com/gpu.present": "true"},
     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
     "terminationGracePeriodSeconds": 1,
     "containers": [{"name": "train", "image": "$TRAIN_IMAGE", "imagePullPolicy": "Never",
       "args": $args_json,
       "env": [{"name": "LOCKSTEP_HANG_TIMEOUT", "value": "10"}],
       "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}}}]}}}}
EOF
  local t1=$SECONDS
  all_ranks_running() {
    local r
    for r in 0 1 2 3; do [[ $(pod_phase "$job-rank-$r") == Running ]] || return 1; done
  }
  wait_for "$job: 4 rank pods Running" 120 all_ranks_running
  say "$job: 4 rank pods Running $((SECONDS - t1))s after the TrainingJob ($(K -n $TNS get pods -l lockstep.dev/job=$job -o wide --no-headers | awk '{print $1 "@" $7 "(" $6 ")"}' | tr '\n' ' '))"
  # HOLDERS[r]: the pods that held rank r, in order; each one's log streams to $w/<pod>.jsonl.
  declare -A UIDS HOLDERS FAULTED STREAM
  stream() {
    K -n $TNS logs -f "$1" >"$w/$1.jsonl" 2>"$w/$1.logerr" &
    LOG_PIDS+=($!)
    STREAM[$1]=$!
  }
  for r in 0 1 2 3; do
    UIDS[$r]=$(K -n $TNS get pod $job-rank-$r -o jsonpath='{.metadata.uid}')
    HOLDERS[$r]=$job-rank-$r
    stream $job-rank-$r
  done
  holder() { local h=${HOLDERS[$1]}; echo "${h##* }"; }
  committed() { grep -q "\"event\":\"step\",\"rank\":$1,\"step\":$2," "$w/$(holder "$1").jsonl"; }
  new_holder() { # new_holder RANK OLD_POD: the one spare pod now labelled with RANK
    K -n $TNS get pods -l "lockstep.dev/job=$job,lockstep.dev/rank=$1" -o json |
      jq -er --arg j "$job" --arg old "$2" '[.items[] | select(.metadata.name != $old and (.metadata.name | startswith($j + "-spare-")))
        | .metadata.name] | if length == 1 then .[0] else empty end'
  }
  # spare_registered [NODE]: a spare pod (not on NODE) registered with the coordinator.
  spare_registered() {
    local p
    for p in $(K -n $TNS get pods -l "lockstep.dev/job=$job,lockstep.dev/role=spare" -o name); do
      [[ -n ${1:-} && $(K -n $TNS get "$p" -o jsonpath='{.spec.nodeName}') == "$1" ]] && continue
      K -n $TNS logs "$p" 2>/dev/null | grep -q '"lib_event":"registered"' && return 0
    done
    return 1
  }
  node_of() { K -n $TNS get pod "$1" -o jsonpath='{.spec.nodeName}'; }
  # container_pid POD: the host pid of the pod's first container, from its node's containerd.
  container_pid() {
    local node cid
    node=$(node_of "$1")
    cid=$(K -n $TNS get pod "$1" -o jsonpath='{.status.containerStatuses[0].containerID}')
    cid=${cid#containerd://}
    ctr --address "$RDIR/nodes/$node/containerd.sock" -n k8s.io tasks ls | awk -v c="$cid" '$1 == c { print $2 }'
  }
  annotated_on() { # annotated_on NODE: a job pod on NODE carries lockstep.dev/migrate
    K -n $TNS get pods -l "lockstep.dev/job=$job" -o json |
      jq -e --arg n "$1" '[.items[] | select(.spec.nodeName == $n and .metadata.annotations["lockstep.dev/migrate"] != null)] | length > 0' >/dev/null
  }
  node_ready() { [[ $(K get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]; }
  local old t_fault how node pid last nh t_step first fts extra v cpod cuid cpid t_coord drain_pid= kubelet_pid= nr_node=
  local -a victims
  declare -A OLD OLDUID
  for f in "${faults[@]}"; do
    extra=
    if [[ $f == *+* ]]; then extra=${f#*+} f=${f%%+*}; fi
    kind=${f%%:*} rank=${f#*:} rank=${rank%@*} step=${f#*@}
    old=$(holder "$rank")
    node=$(node_of "$old")
    if [[ $kind == drain || $kind == notready ]]; then
      # A node fault needs a spare on another node. The scheduler puts spares on the
      # node with fewer pods, which is often rank R's: when every registered spare is
      # there, the fault goes to the node of a rank on another node that has a spare
      # elsewhere (said so; the trigger's key names the rank it took).
      wait_for "$job: a spare pod registered with the coordinator" 120 spare_registered
      if ! spare_registered "$node"; then
        for r in 0 1 2 3; do
          [[ $(node_of "$(holder $r)") != "$node" ]] && spare_registered "$(node_of "$(holder $r)")" || continue
          say "$job: every registered spare runs on $node (rank $rank's node): the $kind goes to rank $r's node $(node_of "$(holder $r)") instead"
          rank=$r
          old=$(holder "$rank")
          node=$(node_of "$old")
          break
        done
      fi
    fi
    # The ranks the fault takes: the named one, and for a node fault every rank there.
    victims=("$rank")
    if [[ $kind == drain || $kind == notready ]]; then
      for r in 0 1 2 3; do
        [[ $r != "$rank" && $(node_of "$(holder $r)") == "$node" ]] && victims+=("$r")
      done
      ((${#victims[@]} < 4)) || fail "$job: all 4 ranks run on $node: a $kind of it leaves no replica"
    fi
    # A hot spare first, off the faulted node (the pool is refilled after each migration;
    # a new spare pod imports torch and registers in ~5-30 s on this loaded machine).
    wait_for "$job: a spare pod registered with the coordinator" 120 spare_registered "$([[ ${#victims[@]} -gt 1 || $kind == drain || $kind == notready ]] && echo "$node")"
    wait_for "$job: rank $rank committed step $step" 180 committed "$rank" "$step"
    for v in "${victims[@]}"; do
      OLD[$v]=$(holder "$v")
      OLDUID[$v]=$(K -n $TNS get pod "${OLD[$v]}" -o jsonpath='{.metadata.uid}')
    done
    if [[ $extra == coord ]]; then
      # Found before the fault, so that the kill lands in the middle of the migration
      # (a hot spare commits its first step ~1.5 s after a rank's process is killed).
      cpod=$(K -n $TNS get pods -l "lockstep.dev/job=$job,lockstep.dev/role=coordinator" -o jsonpath='{.items[0].metadata.name}')
      cuid=$(K -n $TNS get pod "$cpod" -o jsonpath='{.metadata.uid}')
      cpid=$(container_pid "$cpod")
      [[ $cpid =~ ^[0-9]+$ ]] || fail "$job: no pid for the coordinator pod $cpod"
    fi
    case $kind in
      kill)
        # The rank's process, from the host: its pid from the node's containerd.
        pid=$(container_pid "$old")
        [[ $pid =~ ^[0-9]+$ ]] || fail "$job: no pid for $old's container on $node"
        grep -q migration_train.py "/proc/$pid/cmdline" || fail "pid $pid is not the training script: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
        t_fault=$(date +%s.%N)
        kill -KILL "$pid"
        how="SIGKILLed rank $rank's process (pid $pid, pod $old on $node)" ;;
      delete)
        t_fault=$(date +%s.%N)
        K -n $TNS delete pod "$old" --wait=false >/dev/null
        how="deleted rank $rank's pod $old" ;;
      drain)
        t_fault=$(date +%s.%N)
        K drain "$node" --ignore-daemonsets --delete-emptydir-data --force --timeout=300s >"$w/drain-$node.log" 2>&1 &
        drain_pid=$!
        how="kubectl drain $node (ranks ${victims[*]} there)" ;;
      notready)
        kubelet_pid=$(cat "$RDIR/pids/real-$node.pid")
        [[ $(cat "/proc/$kubelet_pid/comm" 2>/dev/null) == kubelet ]] || fail "$job: pid $kubelet_pid is not $node's kubelet"
        t_fault=$(date +%s.%N)
        kill -STOP "$kubelet_pid"
        STOPPED_KUBELETS+=("$kubelet_pid") nr_node=$node
        how="stopped the kubelet of $node (SIGSTOP, pid $kubelet_pid; ranks ${victims[*]} there)" ;;
      *) fail "unknown fault $f (kill, delete, drain or notready:RANK@STEP[+op|+coord])" ;;
    esac
    last=$(events "$w/$old.jsonl" | jq -s '[.[] | select(.event == "step") | .step] | max')
    say "$job: $how after rank $rank's step $last"
    case $extra in
      "") ;;
      op)
        # The operator SIGKILLed in the middle: once it annotated a pod (node faults), else at once.
        [[ $kind == drain || $kind == notready ]] && wait_for "$job: the operator annotated a pod on $node" 120 annotated_on "$node"
        kill -KILL "$OP_PID" && wait "$OP_PID" 2>/dev/null || true
        say "$job: operator SIGKILLed $(awk -v a="$t_fault" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s after the fault; restarted 3 s later"
        sleep 3
        start_operator ;;
      coord)
        sleep "${TRAIN_PODS_COORD_DELAY:-0.3}"
        kill -KILL "$cpid"
        t_coord=$(date +%s.%N)
        say "$job: the coordinator's process SIGKILLed $(awk -v a="$t_fault" -v b="$t_coord" 'BEGIN { printf "%.2f", b - a }')s after the fault (pod $cpod, pid $cpid)" ;;
      *) fail "unknown fault suffix +$extra (+op or +coord)" ;;
    esac
    for v in "${victims[@]}"; do
      wait_for "$job: a spare pod labelled rank $v" 240 new_holder "$v" "${OLD[$v]}"
      nh=$(new_holder "$v" "${OLD[$v]}")
      HOLDERS[$v]+=" $nh"
      FAULTED[$v]=1
      stream "$nh"
      [[ $v == "$rank" ]] || { say "$job: spare pod $nh holds rank $v (on $node too)"; continue; }
      wait_for "$job: $nh committed a step" 120 grep -q '"event":"step"' "$w/$nh.jsonl"
      t_step=$(events "$w/$nh.jsonl" | jq -s '[.[] | select(.event == "step") | .t] | min')
      first=$(events "$w/$nh.jsonl" | jq -s '[.[] | select(.event == "step") | .step] | min')
      fts=$(awk -v a="$t_fault" -v b="$t_step" 'BEGIN { printf "%.2f", b - a }')
      say "$job: spare pod $nh holds rank $rank; its first step ($first) committed ${fts}s after the fault"
      RESULTS+=("$(jq -nc --arg t "$kind-rank$rank${extra:++$extra}" --argjson f "$fts" --arg job "$job" '{trigger: $t, job: $job, fault_to_step_s: $f}')")
    done
    if [[ $extra == coord ]]; then
      [[ $(K -n $TNS get pod "$cpod" -o jsonpath='{.metadata.uid}') == "$cuid" ]] || fail "$job: the coordinator pod was replaced"
      # The kubelet reports the restart on its next status update (seconds).
      coord_restarted() { [[ $(K -n $TNS get pod "$cpod" -o jsonpath='{.status.containerStatuses[0].restartCount}') -ge 1 ]]; }
      wait_for "$job: the coordinator's container restarted" 60 coord_restarted
      local clog_now
      clog_now=$(K -n $TNS logs "$cpod")  # not piped into grep -q: pipefail would fail on kubectl's SIGPIPE
      grep -q '"msg":"state restored"' <<<"$clog_now" || fail "$job: the restarted coordinator did not restore its state"
      if awk -v a="$t_coord" -v b="$t_step" 'BEGIN { exit !(a < b) }'; then
        pass "$job: the coordinator restarted in place (pod $cpod), killed in the middle of the migration (before the spare's first step), and carried on"
      else
        pass "$job: the coordinator restarted in place (pod $cpod) and carried on (killed after the spare's first step: the migration was over)"
      fi
    fi
    if [[ $kind == drain ]]; then
      # Planned: each rank there was asked to move by the drain annotation, not failed.
      local clog
      clog=$(K -n $TNS logs -l "lockstep.dev/job=$job,lockstep.dev/role=coordinator" --tail=-1 2>/dev/null)
      for v in "${victims[@]}"; do
        grep 'migration requested by pod annotation' <<<"$clog" | grep -q "${OLD[$v]}" ||
          fail "$job: no planned migration for ${OLD[$v]} in the coordinator's log"
      done
      wait_for "$job: kubectl drain $node finished" 240 bash -c "! kill -0 $drain_pid 2>/dev/null"
      wait "$drain_pid" || fail "$job: kubectl drain $node failed: $(tail -3 "$w/drain-$node.log")"
      K uncordon "$node" >/dev/null
      pass "$job: kubectl drain $node finished: ranks ${victims[*]} moved first (planned, by the drain annotation), then their pods were evicted; uncordoned"
    fi
  done

  # The job finishes: every rank's last holder ends and Succeeded.
  ended() { grep -q '"event":"end"' "$w/$(holder "$1").jsonl"; }
  succeeded() { [[ $(pod_phase "$(holder "$1")") == Succeeded ]]; }
  for r in 0 1 2 3; do wait_for "$job: rank $r finished" 240 ended $r; done
  for r in 0 1 2 3; do wait_for "$job: rank $r's pod $(holder $r) Succeeded" 30 succeeded $r; done
  local t_end=$SECONDS p
  if [[ -n $nr_node ]]; then
    # The pods on the stopped kubelet's node: their log streams (through that kubelet)
    # stalled; their whole logs are in the node's pod log directory (CRI format). Then
    # the kubelet goes on (it ends the fenced pods' containers) and the node is Ready.
    for v in "${!OLD[@]}"; do
      p=${OLD[$v]}
      [[ -d $RDIR/nodes/$nr_node/pod-logs/${TNS}_${p}_${OLDUID[$v]} ]] || continue
      kill "${STREAM[$p]}" 2>/dev/null || true
      cat "$RDIR/nodes/$nr_node/pod-logs/${TNS}_${p}_${OLDUID[$v]}"/train/*.log |
        sed -E 's/^[^ ]+ (stdout|stderr) [FP] //' >"$w/$p.jsonl"
    done
    kill -CONT "$kubelet_pid"
    STOPPED_KUBELETS=()
    wait_for "$job: $nr_node Ready again" 120 node_ready "$nr_node"
  fi
  for p in "${LOG_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  LOG_PIDS=()
  pass "$job: finished, the last pod of every rank Succeeded ($((t_end - t1))s after the TrainingJob)"

  # Steps, per rank over its pods in order (the step events and the library's
  # state_synced events): no step committed twice, none skipped, ending at STEPS-1. A
  # gap is allowed only where the pod's state was then synced from a replica at the
  # gap's end (lib event state_synced at the next step): the step was committed by the
  # job and this replica received it instead of computing it (a survivor whose step's
  # collective was aborted by the re-form while others committed it; a killed pod whose
  # last committed step never reached its log, the kill falling between the optimizer
  # step and the log line or the fence ending the log stream). Counted as adopted.
  # A holder on a node whose kubelet was stopped is taken for dead while its process runs
  # on (unseen; its pod deleted, its generation ended): it may commit a step locally that
  # no survivor holds (its peers there took part; the survivor's collective was aborted),
  # and the next generation resumes from the survivor, before that step. Such steps, at or
  # after the step the next holder's state was synced to, are discarded work of a fenced
  # member, not committed by the job: counted (discarded_steps), not failed. Elsewhere a
  # step logged twice fails.
  local lost_total=0 dup_total=0 adopted=0 discarded=0 h res
  for r in 0 1 2 3; do
    : >"$w/rank-$r.jsonl"
    for h in ${HOLDERS[$r]}; do
      events "$w/$h.jsonl" >>"$w/rank-$r.jsonl"
      [[ -n $nr_node && -n ${OLDUID[$r]:-} && $h == "${OLD[$r]}" ]] && echo '{"event":"fenced_alive"}' >>"$w/rank-$r.jsonl"
    done
    res=$(jq -sc --argjson r $r '
      reduce (.[] | select((.event == "step" and .rank == $r) or (.event == "lib" and .lib_event == "state_synced")
                           or .event == "fenced_alive")) as $e
        ({last: -1, sync: null, lost: 0, dup: 0, adopted: 0, discarded: 0, rewind: false};
         if $e.event == "fenced_alive" then .rewind = true
         elif $e.event == "lib" and .rewind and $e.step <= .last then
           .discarded += (.last - $e.step + 1) | .last = $e.step - 1 | .rewind = false | .sync = $e.step
         elif $e.event == "lib" then .sync = $e.step | .rewind = false
         else
           (if $e.step <= .last then .dup += 1
            elif $e.step == .last + 1 then .
            elif .sync == $e.step then .adopted += ($e.step - .last - 1)
            else .lost += ($e.step - .last - 1) end)
           | .last = ([.last, $e.step] | max) | .sync = null
         end)' "$w/rank-$r.jsonl") || fail "$job: rank $r's logs do not parse ($w/rank-$r.jsonl)"
    [[ $(jq .dup <<<"$res") == 0 ]] || fail "$job: rank $r: steps committed twice: $res"
    [[ $(jq .lost <<<"$res") == 0 ]] || fail "$job: rank $r: steps skipped: $res"
    [[ $(jq .last <<<"$res") == $((STEPS - 1)) ]] || fail "$job: rank $r ended at step $(jq .last <<<"$res")"
    adopted=$((adopted + $(jq .adopted <<<"$res")))
    discarded=$((discarded + $(jq .discarded <<<"$res")))
  done
  pass "$job: 0 committed steps lost, none twice: every rank's pods committed steps 0..$((STEPS - 1)) in order ($adopted received by a state sync at a re-form; $discarded run by fenced members on the stopped node past the survivors' step, discarded)"

  # Healthy ranks kept their pods; every faulted rank's earlier pods are gone (fenced).
  local healthy_restarts=0 j rc
  for r in 0 1 2 3; do
    if [[ -n ${FAULTED[$r]:-} ]]; then
      for h in ${HOLDERS[$r]% *}; do wait_for "$job: $h deleted (fenced)" 30 pod_gone "$h"; done
      continue
    fi
    j=$(K -n $TNS get pod $job-rank-$r -o json)
    [[ $(jq -r .metadata.uid <<<"$j") == "${UIDS[$r]}" ]] || fail "$job: rank $r's pod was replaced"
    rc=$(jq '[.status.containerStatuses[].restartCount] | add' <<<"$j")
    healthy_restarts=$((healthy_restarts + rc))
    [[ $rc == 0 ]] || fail "$job: rank $r's container restarted $rc times"
  done
  pass "$job: healthy ranks kept their pods (same UIDs, 0 restarts); faulted ranks' old pods deleted; holders: $(for r in 0 1 2 3; do echo -n "$r=[${HOLDERS[$r]}] "; done)"

  # Bit identity with the fault-free reference (rank 0's last holder logs the hash).
  local got
  got=$(jq -sr '[.[] | select(.event == "end" and .rank == 0)][-1].sha256' "$w/rank-0.jsonl")
  [[ $got =~ ^[0-9a-f]{64}$ ]] || fail "$job: rank 0 logged no final hash"
  [[ $got == "$REF" ]] || fail "$job: final parameters differ from the fault-free run: $got != $REF"
  pass "$job: final parameters equal the fault-free DDP run bit for bit (sha256 ${REF:0:16})"
  local i
  for ((i = 0; i < ${#RESULTS[@]}; i++)); do
    RESULTS[i]=$(jq -c --arg job "$job" --argjson l "$lost_total" --argjson h "$healthy_restarts" --argjson nl "$adopted" \
      --argjson d "$discarded" \
      'if .job == $job then . + {lost_steps: $l, healthy_restarts: $h, bit_identical: true, adopted_steps: $nl, discarded_steps: $d} else . end' <<<"${RESULTS[i]}")
  done
  # Give the real nodes' CPU back before the next job.
  K -n $TNS delete trainingjob "$job" --wait=false >/dev/null
}

# TRAIN_PODS_SCENARIOS: jobs separated by ';' or ',', each "NAME FAULT..." (default: rank 2's
# process killed; then rank 1's pod deleted and, later, rank 0's process killed).
SCENARIOS=${TRAIN_PODS_SCENARIOS:-"tpa kill:2@$KILL_AT;tpb delete:1@40 kill:0@110"}
IFS=';,' read -ra jobs <<<"$SCENARIOS"
for spec in "${jobs[@]}"; do
  read -ra words <<<"$spec"
  run_job "${words[@]}"
done

printf '%-6s %-14s %17s %11s %17s\n' job trigger fault_to_step_s lost_steps healthy_restarts >&2
for r in "${RESULTS[@]}"; do
  jq -r '"\(.job) \(.trigger) \(.fault_to_step_s) \(.lost_steps) \(.healthy_restarts)"' <<<"$r" |
    awk '{ printf "%-6s %-14s %17s %11s %17s\n", $1, $2, $3, $4, $5 }' >&2
done
say "image lockstep-train: archive $((${sizes% *} >> 20)) MiB, root filesystem $((${sizes#* } >> 20)) MiB"
printf '%s\n' "${RESULTS[@]}" | jq -sc --argjson a "${sizes% *}" --argjson t "${sizes#* }" \
  '{lockstep: (map({key: .trigger, value: del(.trigger, .job)}) | from_entries),
    train_image: {archive_bytes: $a, rootfs_bytes: $t}, results: .}'
