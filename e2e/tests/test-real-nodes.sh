#!/usr/bin/env bash
# Real nodes (e2e/cluster/up --real-nodes): its own cluster with 2 real GPU nodes, 1 real
# CPU node (kubelet + containerd + runc, each in its own network namespace) and 1 kwok
# CPU node. Checks, in order:
#  1. the real nodes registered as system:node:<name>, Ready, with the GPU labels, taint
#     and capacity of the kwok GPU nodes (CPU node: none of them);
#  2. a pod with the locally built pause image (imagePullPolicy Never) runs; its init
#     container runs the agent image; `kubectl logs` and `kubectl exec` work;
#  3. `helm install` with the local images: the operator runs in pods on the real CPU
#     node with its in-cluster ServiceAccount and takes the Lease; the agent DaemonSet's
#     pods run on both real GPU nodes and on no CPU node, lock their clocks with each
#     other and make their FabricHealths Ready; `kubectl logs` shows the agent's log;
#     deleting the leader's pod hands the Lease to the other replica; a killed agent
#     container is restarted and its FabricHealth goes on (reported again, LOCKED);
#  4. `down` leaves nothing: processes, cgroups, network namespaces, veths, mounts,
#     /run/containerd, /var/log/containers, /var/lib/cni, iptables chains.
# With a netlab binary ($NETLAB, or found in the build tree) the GPU nodes live in the
# host namespaces of a 2-host netlab fabric: the agents probe each other at the hosts'
# fabric addresses over the rails, and `down` hands the lab's namespaces back clean.
# Prints what it measured (kubelet start -> Ready, idle kubelet+containerd per node,
# pod Ready after apply, helm install -> agents LOCKED) as a table and one JSON line.
# Needs root, and the images (built here with images/build into the build tree).
. "$(dirname "$0")/lib.sh"
[[ $(id -u) -eq 0 ]] || fail "needs root (namespaces, cgroups, containerd)"
command -v jq >/dev/null || fail "needs jq"
BIN=${LOCKSTEP_K8S_BIN:-$("$REPO/scripts/install-k8s-tools" | tail -n1)}
export LOCKSTEP_K8S_BIN=$BIN
K() { "$BIN/kubectl" --kubeconfig "$RDIR/kubeconfig" "$@"; }

# shellcheck source=../cluster/lib.sh
. "$REPO/e2e/cluster/lib.sh"  # local_image_archives, helm_local_image_args, locked_fabrichealths
app_version=$(chart_app_version)
mkdir -p "$STATE"
# LOCKSTEP_IMAGES_DIR: archives made elsewhere; else images/build in the build tree (cached).
images_dir=${LOCKSTEP_IMAGES_DIR:-}
if [[ -z $images_dir ]]; then
  build_dir=${LOCKSTEP_BUILD_DIR:-$REPO/build/ci}
  images_dir=$build_dir/images
  local_image_archives "$build_dir" "$images_dir" "$STATE/real-nodes-images.log" >/dev/null ||
    fail "images/build failed: $(tail -5 "$STATE/real-nodes-images.log")"
fi
AGENT_TAR=$images_dir/lockstep-agent-$app_version.oci.tar
OPERATOR_TAR=$images_dir/lockstep-operator-$app_version.oci.tar
COORDINATOR_TAR=$images_dir/lockstep-coordinator-$app_version.oci.tar  # the operator's TrainingJob coordinator Pods
[[ -f $AGENT_TAR && -f $OPERATOR_TAR && -f $COORDINATOR_TAR ]] || fail "no image archives in $images_dir"
AGENT_IMAGE=ghcr.io/lockstep/lockstep-agent:$app_version
PAUSE_IMAGE=$(cat "$BIN/pause.ref")

NETLAB=${NETLAB:-}
if [[ -z $NETLAB ]]; then
  for d in ${LOCKSTEP_BUILD_DIR:+"$LOCKSTEP_BUILD_DIR"} "$REPO/build/dev" "$REPO/build/ci"; do
    [[ -x $d/e2e/netlab/netlab ]] && { NETLAB=$d/e2e/netlab/netlab; break; }
  done
fi
LAB=rnodes$$
LAB=${LAB:0:10}
TOPO=""

RDIR=$STATE/real-nodes-cluster
ID=$(printf '%s' "$RDIR" | sha256sum | cut -c1-6)  # as e2e/cluster/real-nodes names things
"$REPO/e2e/cluster/down" "$RDIR" --purge >/dev/null 2>&1 || true
shared_before=$(ls -d /run/containerd /var/log/containers /var/log/pods /var/lib/cni /var/lib/kubelet 2>/dev/null || true)
down_done=0
cleanup() {
  ((down_done)) || "$REPO/e2e/cluster/down" "$RDIR" >&2 || true
  [[ -n $TOPO ]] && "$NETLAB" down --name "$LAB" >/dev/null 2>&1 || true
}
trap cleanup EXIT

lab_args=()
if [[ -n $NETLAB && -x $NETLAB ]]; then
  "$NETLAB" up --name "$LAB" --hosts 2 --rails 2 >"$STATE/real-nodes-netlab.log" 2>&1 || fail "netlab up: $(cat "$STATE/real-nodes-netlab.log")"
  TOPO=$(tail -n 1 "$STATE/real-nodes-netlab.log")
  [[ -f $TOPO ]] || TOPO=/run/netlab/$LAB/topology.json
  lab_args=(--real-nodes-netlab "$TOPO")
  lab_before=$(for h in 0 1; do nsenter --net="/run/netns/$LAB-h$h" sh -c 'ip -o addr; ip route; cat /proc/sys/net/ipv4/ip_forward'; done)
  say "netlab fabric $LAB (2 hosts x 2 rails): the real GPU nodes live in its host namespaces"
fi
say "up: 2 real GPU + 1 real CPU + 1 kwok CPU node"
"$REPO/e2e/cluster/up" --dir "$RDIR" --nodes 0 --cpu-nodes 1 --real-nodes 2 --real-cpu-nodes 1 \
  --real-node-image "$AGENT_TAR" --real-node-image "$OPERATOR_TAR" --real-node-image "$COORDINATOR_TAR" ${lab_args[@]+"${lab_args[@]}"} >"$STATE/real-nodes-up.log" 2>&1 ||
  fail "up failed: $(tail -20 "$STATE/real-nodes-up.log")"
# shellcheck disable=SC1091
. "$RDIR/env"

# ---- 1. nodes ------------------------------------------------------------------------
REAL_GPU="real-gpu-0 real-gpu-1"
for n in real-gpu-0 real-gpu-1 real-cpu-0; do
  j=$(K get node "$n" -o json) || fail "node $n not registered"
  [[ $(jq -r '.status.conditions[] | select(.type == "Ready") | .status' <<<"$j") == True ]] || fail "$n not Ready"
  [[ $(jq -r '.status.nodeInfo.containerRuntimeVersion' <<<"$j") == containerd://* ]] || fail "$n: runtime is not containerd"
  [[ $(jq -r '.status.nodeInfo.kubeletVersion' <<<"$j") == "$LOCKSTEP_K8S_VERSION" ]] ||
    fail "$n: kubelet $(jq -r '.status.nodeInfo.kubeletVersion' <<<"$j") is not the control plane's $LOCKSTEP_K8S_VERSION"
  ip=$(jq -r '.status.addresses[] | select(.type == "InternalIP") | .address' <<<"$j")
  [[ $ip == "$(cat "$RDIR/nodes/$n/ip")" ]] || fail "$n: InternalIP $ip is not its namespace's address"
  if [[ $n == real-gpu-* ]]; then
    [[ $(jq -r '.metadata.labels["nvidia.com/gpu.present"]' <<<"$j") == true ]] || fail "$n: no nvidia.com/gpu.present label"
    [[ $(jq -r '.status.capacity["nvidia.com/gpu"]' <<<"$j") == 8 ]] || fail "$n: no nvidia.com/gpu capacity"
    [[ $(jq -r '.spec.taints[] | select(.key == "nvidia.com/gpu") | .effect' <<<"$j") == NoSchedule ]] || fail "$n: no GPU taint"
  else
    [[ $(jq -r '.metadata.labels["nvidia.com/gpu.present"] // "none"' <<<"$j") == none ]] || fail "$n: a CPU node with a GPU label"
  fi
done
# The node's identity: its certificate names system:node:<name> in system:nodes.
subj=$(openssl x509 -in "$RDIR/pki/node-real-gpu-0.crt" -noout -subject -nameopt RFC2253)
[[ $subj == *"CN=system:node:real-gpu-0"* && $subj == *"O=system:nodes"* ]] || fail "node certificate subject: $subj"
openssl verify -CAfile "$RDIR/pki/ca.crt" "$RDIR/pki/node-real-gpu-0.crt" >/dev/null || fail "node certificate not signed by the cluster CA"
# The node authenticates with it (the kubelet renews its Lease as that user).
node_lease() { [[ $(K -n kube-node-lease get lease real-gpu-0 -o 'jsonpath={.spec.holderIdentity}') == real-gpu-0 ]]; }
wait_for "the node Lease of real-gpu-0" 60 node_lease
pass "3 real nodes Ready as system:node:<name> with kubelet $LOCKSTEP_K8S_VERSION and the kwok nodes' GPU labels, taint and capacity"

# ---- 2. a pod: local pause image, agent image as init container, logs and exec ------
cat >"$STATE/real-nodes-pod.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: rn-pause, namespace: default}
spec:
  nodeName: real-gpu-1
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  shareProcessNamespace: true   # pause is then not PID 1 and says so on stderr: a log line
  initContainers:
  - {name: version, image: "$AGENT_IMAGE", imagePullPolicy: Never, args: [version]}
  containers:
  - {name: pause, image: "$PAUSE_IMAGE", imagePullPolicy: Never}
EOF
t0=$(date +%s.%N)
K apply -f "$STATE/real-nodes-pod.yaml" >/dev/null
wait_for "pod rn-pause Ready" 120 K wait --for=condition=Ready pod/rn-pause --timeout=2s
pod_ready_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
[[ $(K get pod rn-pause -o 'jsonpath={.status.containerStatuses[0].containerID}') == containerd://* ]] ||
  fail "rn-pause runs no containerd container"
grep -q "pause should be the first process" <<<"$(K logs rn-pause -c pause)" || fail "kubectl logs rn-pause: $(K logs rn-pause -c pause 2>&1)"
[[ -n $(K logs rn-pause -c version) ]] || fail "kubectl logs of the agent image's init container is empty"
[[ $(K exec rn-pause -c pause -- /pause -v) == *"$(sed 's/.*://' <<<"$PAUSE_IMAGE")"* ]] || fail "kubectl exec /pause -v"
pass "pod with the local pause image Running on real-gpu-1 ${pod_ready_s}s after apply; init container ran the agent image; logs and exec work"
K delete pod rn-pause --wait=true --timeout=60s >/dev/null

# ---- 3. helm install with the local images --------------------------------------------
NSP=lockstep-system
t0=$(date +%s.%N)
# shellcheck disable=SC2046
"$BIN/helm" --kubeconfig "$RDIR/kubeconfig" install lockstep "$REPO/charts/lockstep" -n $NSP --create-namespace \
  $(helm_local_image_args) >"$STATE/real-nodes-helm.log" 2>&1 || fail "helm install: $(tail -5 "$STATE/real-nodes-helm.log")"
all_locked() { [[ $(locked_fabrichealths K) == "$REAL_GPU" ]]; }
wait_for "both real GPU nodes' agents LOCKED" 180 all_locked
locked_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
agents=$(K -n $NSP get pods -l app.kubernetes.io/component=agent -o json)
[[ $(jq -r '[.items[] | select(.status.phase == "Running") | .spec.nodeName] | sort | join(" ")' <<<"$agents") == "$REAL_GPU" ]] ||
  fail "agent pods run on: $(jq -r '[.items[] | .spec.nodeName + "=" + .status.phase] | join(" ")' <<<"$agents") (want exactly $REAL_GPU)"
jq -e 'all(.items[]; .status.containerStatuses[0].containerID | startswith("containerd://"))' <<<"$agents" >/dev/null ||
  fail "an agent pod runs no containerd container"
for f in $REAL_GPU; do
  [[ $(K get fabrichealth "$f" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}') == True ]] || fail "FabricHealth $f not Ready"
done
apod=$(jq -r '.items[0].metadata.name' <<<"$agents")
grep -q '"reporting to FabricHealth"' <<<"$(K -n $NSP logs "$apod")" || fail "kubectl logs $apod shows no agent log"
ops=$(K -n $NSP get pods -l app.kubernetes.io/component=operator -o json)
[[ $(jq -r '[.items[] | select(.status.phase == "Running") | .spec.nodeName] | unique | join(" ")' <<<"$ops") == real-cpu-0 ]] ||
  fail "operator pods not Running on real-cpu-0: $(jq -r '[.items[] | .spec.nodeName + "=" + .status.phase] | join(" ")' <<<"$ops")"
holder=$(K -n $NSP get lease lockstep-operator -o 'jsonpath={.spec.holderIdentity}')
jq -e --arg h "$holder" 'any(.items[]; .metadata.name == $h)' <<<"$ops" >/dev/null || fail "Lease holder '$holder' is not an operator pod"
if [[ -n $TOPO ]]; then
  # The agents' peers are the lab hosts' fabric addresses, and probes crossed the rails.
  for h in 0 1; do
    addr=$(jq -r ".hosts[$h].addr" "$TOPO")
    [[ $(K get node "real-gpu-$h" -o 'jsonpath={.status.addresses[?(@.type=="InternalIP")].address}') == "$addr" ]] ||
      fail "real-gpu-$h's InternalIP is not the lab host address $addr"
  done
  rail_pkts=$("$NETLAB" counters --name "$LAB" | jq '[to_entries[] | select(.key | test("^h[0-9]+r")) | .value.up_packets] | add')
  ((rail_pkts > 100)) || fail "only $rail_pkts packets crossed the lab's host links"
  pass "agents in the netlab host namespaces probe each other at the lab's host addresses ($rail_pkts packets up the host links)"
fi
pass "helm install: operator pods on real-cpu-0 ($holder leads), agents Running on $REAL_GPU only, LOCKED and Ready ${locked_s}s after install; kubectl logs works"

# Deleting the leader's pod hands the Lease over to the other replica.
K -n $NSP delete pod "$holder" --wait=false >/dev/null
new_leader() { # a live operator pod other than the deleted one holds the Lease
  local h
  h=$(K -n $NSP get lease lockstep-operator -o 'jsonpath={.spec.holderIdentity}')
  [[ -n $h && $h != "$holder" ]] &&
    K -n $NSP get pods -l app.kubernetes.io/component=operator -o json |
    jq -e --arg h "$h" 'any(.items[]; .metadata.name == $h and .status.phase == "Running")' >/dev/null
}
wait_for "the other operator replica to take the Lease" 120 new_leader
pass "deleting the leader's pod $holder handed the Lease to $(K -n $NSP get lease lockstep-operator -o 'jsonpath={.spec.holderIdentity}')"

# Killing an agent container: the kubelet restarts it and its FabricHealth goes on.
apod=$(K -n $NSP get pods -l app.kubernetes.io/component=agent --field-selector spec.nodeName=real-gpu-0 -o name | sed 's|.*/||')
cid=$(K -n $NSP get pod "$apod" -o 'jsonpath={.status.containerStatuses[0].containerID}')
restarts0=$(K -n $NSP get pod "$apod" -o 'jsonpath={.status.containerStatuses[0].restartCount}')
ctr --address "$RDIR/nodes/real-gpu-0/containerd.sock" -n k8s.io tasks kill -s SIGKILL "${cid#containerd://}" >/dev/null ||
  fail "ctr tasks kill of the agent container on real-gpu-0"
t_kill=$(date -u +%Y-%m-%dT%H:%M:%SZ)
restarted() {
  local j
  j=$(K -n $NSP get pod "$apod" -o json)
  jq -e --argjson r "$restarts0" '.status.containerStatuses[0] | .restartCount > $r and .state.running != null' <<<"$j" >/dev/null
}
wait_for "the killed agent container to restart" 120 restarted
reported_after_kill() {
  local t
  t=$(K get fabrichealth real-gpu-0 -o 'jsonpath={.status.lastReportTime}')
  [[ $t > $t_kill ]] && [[ $(K get fabrichealth real-gpu-0 -o 'jsonpath={.status.clock.state}') == LOCKED ]]
}
wait_for "FabricHealth real-gpu-0 reported again and LOCKED after the restart" 180 reported_after_kill
pass "killed agent container on real-gpu-0 restarted by the kubelet; its FabricHealth is reported again and LOCKED"

# ---- measurements --------------------------------------------------------------------
# Idle cost of each real node (agents running on the GPU nodes): the kubelet, its
# containerd, and the node's shims (anonymous RSS now: the binaries' text is shared by all
# nodes; CPU over 10 s). Containers not counted.
kubelet_of() { cat "$RDIR/pids/real-$1.pid"; }
containerd_of() { pgrep -P "$(kubelet_of "$1")" -x containerd || true; }
shims_of() { pgrep -f "containerd-shim-runc-v2 .*$RDIR/nodes/$1/containerd.sock" || true; }
cpu_ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo $t; }
rss_mib() { local t=0 p; for p in "$@"; do t=$((t + $(awk '/^RssAnon/ { print $2 }' "/proc/$p/status" 2>/dev/null || echo 0))); done; echo $((t / 1024)); }
declare -A c0
for n in real-gpu-0 real-gpu-1 real-cpu-0; do
  # shellcheck disable=SC2046
  c0[$n]=$(cpu_ticks $(kubelet_of "$n") $(containerd_of "$n") $(shims_of "$n"))
done
sleep 10
hz=$(getconf CLK_TCK)
rows="" json="["
while IFS=$'\t' read -r n _ _ ready_s; do
  k=$(kubelet_of "$n") c=$(containerd_of "$n") sh=$(shims_of "$n")
  # shellcheck disable=SC2086
  cpu=$(awk -v a="${c0[$n]}" -v b="$(cpu_ticks $k $c $sh)" -v hz="$hz" 'BEGIN { printf "%.1f", (b - a) / hz / 10 * 100 }')
  # shellcheck disable=SC2086
  mk=$(rss_mib $k) mc=$(rss_mib $c) ms=$(rss_mib $sh) nshim=$(wc -w <<<"$sh")
  rows+=$(printf '%-12s %8s %8s %11s %10s %6s %8s' "$n" "$ready_s" "$mk" "$mc" "$ms($nshim)" "$((mk + mc + ms))" "$cpu")$'\n'
  json+=$(printf '%s{"node":"%s","kubelet_ready_s":%s,"rss_mib":{"kubelet":%d,"containerd":%d,"shims":%d,"total":%d},"shims":%d,"idle_cpu_pct":%s}' \
    "$([[ $json == "[" ]] || echo ,)" "$n" "$ready_s" "$mk" "$mc" "$ms" "$((mk + mc + ms))" "$nshim" "$cpu")
done <"$RDIR/state/real-nodes.tsv"
json+="]"
{
  echo "real nodes (uptime: $(uptime | sed 's/.*load/load/'))"
  printf '%-12s %8s %8s %11s %10s %6s %8s\n' node "Ready s" "kubelet" "containerd" "shims(n)" "total" "CPU %"
  printf '%s' "$rows"
  echo "(Ready s: kubelet start -> Node Ready; anonymous RSS in MiB; CPU % of one core over 10 s, idle)"
  echo "pod Ready after apply: ${pod_ready_s}s; helm install -> agents LOCKED: ${locked_s}s"
  echo "{\"bench\":\"real-nodes\",\"nodes\":$json,\"pod_ready_after_apply_s\":$pod_ready_s,\"helm_install_to_locked_s\":$locked_s,\"loadavg\":\"$(cut -d' ' -f1-3 /proc/loadavg)\"}"
} | tee "$STATE/real-nodes-bench.txt" >&2

# ---- 4. down leaves nothing ------------------------------------------------------------
"$BIN/helm" --kubeconfig "$RDIR/kubeconfig" uninstall lockstep -n $NSP >/dev/null 2>&1 || true
down_done=1
"$REPO/e2e/cluster/down" "$RDIR" >"$STATE/real-nodes-down.log" 2>&1 || fail "down failed: $(tail -10 "$STATE/real-nodes-down.log")"
left=""
for p in /proc/[0-9]*; do
  a=$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null) || continue
  [[ $a == *"$RDIR/"* ]] && left+=" ${p#/proc/}"
done
[[ -z $left ]] || fail "processes of the cluster survive down:$left"
if grep -q " $RDIR/" /proc/self/mountinfo; then fail "mounts under $RDIR survive down"; fi
for h in /sys/fs/cgroup/*/; do
  compgen -G "${h}lockstep-$ID-*" >/dev/null && fail "cgroups ${h}lockstep-$ID-* survive down"
done
compgen -G "/run/netns/lsrn-$ID-*" >/dev/null && fail "network namespaces lsrn-$ID-* survive down"
[[ $(ip -o link show) == *"lsrn$ID"* ]] && fail "veths lsrn$ID* survive down"
grep -q '^:KUBE-' <<<"$(iptables-save 2>/dev/null)" && fail "KUBE-* iptables chains in the root namespace"
shared_after=$(ls -d /run/containerd /var/log/containers /var/log/pods /var/lib/cni /var/lib/kubelet 2>/dev/null || true)
[[ $shared_after == "$shared_before" ]] || fail "host paths changed: before '$shared_before', after '$shared_after'"
if [[ -n $TOPO ]]; then
  lab_after=$(for h in 0 1; do nsenter --net="/run/netns/$LAB-h$h" sh -c 'ip -o addr; ip route; cat /proc/sys/net/ipv4/ip_forward'; done)
  [[ $lab_after == "$lab_before" ]] || fail "the lab's host namespaces differ after down: $(diff <(echo "$lab_before") <(echo "$lab_after"))"
  for h in 0 1; do
    [[ $(nsenter --net="/run/netns/$LAB-h$h" iptables-save 2>/dev/null) != *KUBE-* ]] || fail "KUBE-* iptables left in $LAB-h$h"
  done
  "$NETLAB" down --name "$LAB" >/dev/null 2>&1 || fail "netlab down"
  TOPO="" TOPO_DONE=" (and the netlab host namespaces as they were)"
fi
rm -rf "$RDIR"
pass "down left no process, mount, cgroup, network namespace, veth, iptables chain or host path${TOPO_DONE:-}"
