#!/usr/bin/env bash
# Fleet audit in Kubernetes mode (issue 26 §1): three lockstep-agents stand in
# for the agents of the kwok GPU nodes gpu-node-0..2 (each as the chart's agent
# ServiceAccount with a token bound to its node, on the agent.yaml the
# operator rendered), each reading a fake sysfs/procfs tree built here
# ($LOCKSTEP_AUDIT_ROOT: two GPUs, a front end, two RoCE rails with RDMA
# devices, each GPU and rail NIC under a PCIe switch whose bridges have config
# spaces), and two GPUs from the fake NVML library (tests/support/fake_nvml,
# a state file per agent). gpu-node-1's second GPU link is downtrained to x8,
# its rail1 MTU is 1500 where its pool has 9000, NVML reports HW slowdown on
# its GPU 1, and ACS P2P redirect is on at its rail0 NIC's downstream port.
# Asserts:
#  1. a FleetAudit with bad fields is rejected with the CRD's message;
#  2. FleetAudit "e2e-audit" selecting the three nodes completes: Nodes 3,
#     Passed 2, Failed 1; status.failedNodes names gpu-node-1 with
#     pcie.link_width[gpu1] (x8, expected x16) and backend.mtu[rail1] (1500,
#     expected 9000: the pool's majority), node.clocks_throttle[gpu1]
#     (hw_slowdown) and pcie.acs[gpu0] (redirect), and nothing else fails
#     (the two others pass every check); `kubectl get fleetaudit` shows the
#     columns; one NodeAudit per node holds its checks;
#  3. the AUDIT column of `kubectl get fabrichealth`: Fail on gpu-node-1,
#     Pass on the two others; a Warning Event AuditFailed on gpu-node-1's
#     FabricHealth.
# The FabricHealths are handed back fresh at the end (the operator recreates them).
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || fail "needs jq"
AGENT=$(find_bin LOCKSTEP_AGENT daemonset/lockstep-agent)
FAKE_NVML=$(find_bin LOCKSTEP_FAKE_NVML tests/daemonset/liblockstep_fake_nvml.so)
operator_alive a || start_operator a
NODES=(gpu-node-0 gpu-node-1 gpu-node-2)
BAD=gpu-node-1
OUT=$STATE/fleet-audit
rm -rf "$OUT" && mkdir -p "$OUT"
PIDS=()

agent_owned() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF "$OUT/"; }
cleanup() {
  kubectl get fleetaudit e2e-audit -o json 2>/dev/null | jq -c .status >&2 || true
  for pid in "${PIDS[@]}"; do
    if agent_owned "$pid"; then
      kill -TERM "$pid" 2>/dev/null || true
      wait_for "agent $pid to exit" 15 bash -c "! kill -0 $pid"
    fi
  done
  kubectl delete fleetaudit e2e-audit --wait=true >/dev/null 2>&1 || true
  kubectl label nodes "${NODES[@]}" lockstep.dev/audit-e2e- >/dev/null 2>&1 || true
  kubectl delete fabrichealth "${NODES[@]}" --wait=true >/dev/null 2>&1 || true
  wait_for "the operator to recreate the FabricHealths" 60 healths_match_gpu_nodes
}
trap cleanup EXIT

# fake_tree DIR WIDTH MTU ACS: a node's sysfs/procfs (GPU 1's link width, rail1's
# MTU, the ACS control register of rail0's downstream port). GPU i and rail i
# sit under switch i: root port 0000:0i:01.0, upstream port 0000:1i:00.0,
# downstream ports 0000:2i:00.0 (GPU) and 0000:2i:01.0 (NIC).
fake_tree() {
  local d=$1 width=$2 mtu=$3 acs=$4 i
  w() { mkdir -p "$(dirname "$d/$1")" && printf '%s\n' "$2" >"$d/$1"; }
  under() { # under BDF BRIDGE...: sys/bus/pci/devices/BDF links into sys/devices/pci0000:00/BRIDGE/.../BDF
    local bdf=$1 path=devices/pci0000:00
    shift
    for b in "$@"; do path=$path/$b; done
    mkdir -p "$d/sys/$path/$bdf" "$d/sys/bus/pci/devices"
    ln -s "../../../$path/$bdf" "$d/sys/bus/pci/devices/$bdf"
  }
  bridge() { # bridge BDF ACSCTL: 4 KiB config space, an ACS extended capability at 0x100
    local ctl
    ctl=$(printf '\\x%02x' "$2")
    mkdir -p "$d/sys/bus/pci/devices/$1"
    { head -c 256 /dev/zero; printf "\\x0d\\x00\\x01\\x00\\x5f\\x00$ctl\\x00"; head -c 3832 /dev/zero; } \
      >"$d/sys/bus/pci/devices/$1/config"
  }
  local gpus=(0000:17:00.0 0000:3b:00.0)
  for i in 0 1; do
    under "${gpus[$i]}" 0000:0$i:01.0 0000:1$i:00.0 0000:2$i:00.0
    under 0000:8$i:00.0 0000:0$i:01.0 0000:1$i:00.0 0000:2$i:01.0
    bridge 0000:0$i:01.0 0x01; bridge 0000:1$i:00.0 0x00; bridge 0000:2$i:00.0 0x01
    bridge 0000:2$i:01.0 "$([[ $i == 0 ]] && echo "$acs" || echo 0x01)"
  done
  pci() { # pci BDF VENDOR CLASS SPEED WIDTH MAXWIDTH
    local p=sys/bus/pci/devices/$1
    w $p/vendor "$2"; w $p/class "$3"
    w $p/current_link_speed "$4 GT/s PCIe"; w $p/max_link_speed "$4 GT/s PCIe"
    w $p/current_link_width "$5"; w $p/max_link_width "$6"
    w $p/aer_dev_fatal "TOTAL_ERR_FATAL 0"; w $p/aer_dev_nonfatal "TOTAL_ERR_NONFATAL 0"
    w $p/aer_dev_correctable "TOTAL_ERR_COR 0"
  }
  w proc/sys/kernel/osrelease 6.1.0-18-amd64
  w proc/modules "nvidia_peermem 16384 0 - Live 0x0"
  w sys/module/nvidia/version 550.54.15
  pci 0000:17:00.0 0x10de 0x030200 32.0 16 16
  pci 0000:3b:00.0 0x10de 0x030200 32.0 "$width" 16
  mkdir -p "$d/proc/net"
  printf 'Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n' >"$d/proc/net/route"
  printf 'eth0\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n' >>"$d/proc/net/route"
  printf 'eth0\t0001A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n' >>"$d/proc/net/route"
  w sys/class/net/eth0/operstate up; w sys/class/net/eth0/mtu 1500
  for i in 0 1; do
    pci 0000:8$i:00.0 0x15b3 0x020000 16.0 16 16
    w sys/class/net/rail$i/operstate up
    w sys/class/net/rail$i/mtu "$([[ $i == 1 ]] && echo "$mtu" || echo 9000)"
    ln -s ../../../bus/pci/devices/0000:8$i:00.0 "$d/sys/class/net/rail$i/device"
    printf 'rail%s\t000%s000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n' $i $i >>"$d/proc/net/route"
    local ib=sys/class/infiniband/mlx5_$i
    w $ib/device/net/rail$i/ifindex $((5 + i))
    w $ib/ports/1/state "4: ACTIVE"; w $ib/ports/1/link_layer Ethernet; w $ib/ports/1/rate "200 Gb/sec (4X HDR)"
    w $ib/ports/1/gids/3 0000:0000:0000:0000:0000:ffff:0a00:0${i}07
    w $ib/ports/1/gid_attrs/types/3 "RoCE v2"; w $ib/ports/1/gid_attrs/ndevs/3 rail$i
  done
}

# 1. Bad fields are rejected with a message.
cat >"$OUT/bad.yaml" <<'YAML'
apiVersion: lockstep.dev/v1alpha1
kind: FleetAudit
metadata: {name: e2e-bad}
spec:
  medianTolerancePercent: 0
  expectations: [{check: MTU, value: "9000"}]
YAML
if kubectl apply -f "$OUT/bad.yaml" >"$OUT/bad.out" 2>&1; then fail "a FleetAudit with bad fields was accepted"; fi
grep -q 'spec.medianTolerancePercent' "$OUT/bad.out" && grep -q 'spec.expectations\[0\].check' "$OUT/bad.out" ||
  { cat "$OUT/bad.out" >&2; fail "the rejection does not name the bad fields"; }
pass "a FleetAudit with bad fields is rejected: $(head -c 300 "$OUT/bad.out")"

wait_for "a FabricHealth per GPU node" 60 healths_match_gpu_nodes
policy=$(kubectl get fabrichealth gpu-node-0 -o jsonpath='{.metadata.labels.lockstep\.dev/policy}')
kubectl -n $NS get configmap "lockstep-agent-$policy" -o jsonpath='{.data.agent\.yaml}' >"$OUT/agent.yaml"
(umask 077 && kubectl -n $NS get secret lockstep-probe-key -o jsonpath='{.data.key}' | base64 -d >"$OUT/probe-key")
for node in "${NODES[@]}"; do
  mkdir -p "$OUT/$node"
  printf 'gpus=2\ngpu.0.bus=00000000:17:00.0\ngpu.1.bus=00000000:3B:00.0\n' >"$OUT/$node/nvml.state"
  if [[ $node == "$BAD" ]]; then
    fake_tree "$OUT/$node/root" 8 1500 0x1d
    printf 'gpu.1.clocks_event_reasons=0x8\ngpu.1.sm_clock=1005\n' >>"$OUT/$node/nvml.state"
  else
    fake_tree "$OUT/$node/root" 16 9000 0x01
  fi
  kubectl -n $NS create token lockstep-agent --duration=1h --bound-object-kind=Node --bound-object-name="$node" \
    >"$OUT/$node/token"
  LOCKSTEP_AUDIT_ROOT=$OUT/$node/root LOCKSTEP_NVML_LIBRARY=$FAKE_NVML FAKE_NVML_STATE=$OUT/$node/nvml.state setsid "$AGENT" \
    --config "$OUT/agent.yaml" --node-name "$node" --server "$LOCKSTEP_APISERVER" --token-file "$OUT/$node/token" \
    --certificate-authority "$LOCKSTEP_CA_CERT" --bind-address 127.0.0.1 --probe-port 0 \
    --health-addr 127.0.0.1:0 --time-api-addr 127.0.0.1:0 --probe-key-file "$OUT/probe-key" \
    --node-address-fallback=false --report-interval 2 >"$OUT/$node/agent.log" 2>&1 </dev/null &
  PIDS+=($!)
done
for node in "${NODES[@]}"; do
  wait_for "agent start on $node" 20 grep -q '"msg":"lockstep-agent started"' "$OUT/$node/agent.log"
done

# 2. The audit.
kubectl label nodes "${NODES[@]}" lockstep.dev/audit-e2e=yes --overwrite >/dev/null
start=$SECONDS
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: lockstep.dev/v1alpha1
kind: FleetAudit
metadata: {name: e2e-audit}
spec:
  nodeSelector: {lockstep.dev/audit-e2e: "yes"}
  timeoutSeconds: 120
YAML
fa_is() { kubectl get fleetaudit e2e-audit -o json | jq -e ".status as \$s | $1" >/dev/null; }
wait_for "FleetAudit e2e-audit Completed" 90 fa_is '$s.phase == "Completed"'
elapsed=$((SECONDS - start))
fa_is '$s.nodes == 3 and $s.passed == 2 and $s.failed == 1 and $s.pending == 0' ||
  fail "FleetAudit counts: $(kubectl get fleetaudit e2e-audit -o json | jq -c '.status | {nodes, passed, failed, pending}')"
fa_is '$s.failedNodes | length == 1 and .[0].node == "gpu-node-1"
  and (.[0].failures | any(.check == "pcie.link_width" and .subject == "gpu1" and .observed == "x8" and .expected == "x16"))
  and (.[0].failures | any(.check == "backend.mtu" and .subject == "rail1" and .observed == "1500" and .expected == "9000"))
  and (.[0].failures | any(.check == "node.clocks_throttle" and .subject == "gpu1" and .observed == "hw_slowdown"))
  and (.[0].failures | any(.check == "pcie.acs" and .subject == "gpu0" and .observed == "redirect"))
  and (.[0].failures | length == 4)' ||
  fail "failedNodes: $(kubectl get fleetaudit e2e-audit -o json | jq -c .status.failedNodes)"
# The NodeAudit holds the agent's local verdicts (the pool's are the FleetAudit's):
# the bad node fails the absolute ones among its seeded faults, and nothing else;
# the NVML-read and ACS checks ran and passed on the good ones.
failed=$(kubectl get nodeaudit e2e-audit.$BAD -o json |
  jq -r '[.status.checks[] | select(.verdict == "Fail") | "\(.id)[\(.subject)]"] | sort | join(" ")')
[[ $failed == "node.clocks_throttle[gpu1] pcie.acs[gpu0] pcie.link_width[gpu1]" ]] || fail "$BAD fails locally: $failed"
kubectl get nodeaudit e2e-audit.gpu-node-0 -o json | jq -e '[.status.checks[] | select(
  (.id == "node.clocks_throttle" or .id == "node.persistence_mode" or .id == "memory.ecc_mode" or .id == "pcie.acs")
  and .verdict == "Pass")] | length == 8' >/dev/null ||
  fail "gpu-node-0's GPU mode, clock and ACS checks: $(kubectl get nodeaudit e2e-audit.gpu-node-0 -o json |
    jq -c '[.status.checks[] | select(.id | test("clocks|persistence|ecc_mode|acs"))]')"
kubectl get fleetaudit >"$OUT/fa.txt"
awk 'NR == 1 { ok = ($2 == "PHASE" && $3 == "NODES" && $4 == "PASSED" && $5 == "FAILED") }
  $1 == "e2e-audit" { row = ($2 == "Completed" && $3 == 3 && $4 == 2 && $5 == 1) }
  END { exit !(ok && row) }' "$OUT/fa.txt" || { cat "$OUT/fa.txt" >&2; fail "kubectl get fleetaudit columns"; }
[[ $(kubectl get nodeaudits -l lockstep.dev/fleet-audit=e2e-audit -o name | wc -l) == 3 ]] || fail "not 3 NodeAudits"
n=$(kubectl get nodeaudit e2e-audit.gpu-node-0 -o json | jq '.status.checks | length')
((n > 20)) || fail "NodeAudit e2e-audit.gpu-node-0 holds $n checks"
pass "FleetAudit completed in ${elapsed}s: 3 nodes, 2 passed, gpu-node-1 failed (pcie.link_width[gpu1] x8, backend.mtu[rail1] 1500 against its pool's 9000, node.clocks_throttle[gpu1] hw_slowdown from NVML, pcie.acs[gpu0] redirect); $n checks per NodeAudit"

# 3. The AUDIT column and the Event.
for node in "${NODES[@]}"; do
  want=Pass
  [[ $node == "$BAD" ]] && want=Fail
  got=$(kubectl get fabrichealth "$node" -o jsonpath='{.status.auditResult}')
  [[ $got == "$want" ]] || fail "FabricHealth $node auditResult $got, want $want"
done
kubectl get fabrichealth "${NODES[@]}" >"$OUT/fh.txt"
grep -q 'AUDIT' "$OUT/fh.txt" && grep -E '^gpu-node-1 ' "$OUT/fh.txt" | grep -qw Fail ||
  { cat "$OUT/fh.txt" >&2; fail "kubectl get fabrichealth does not show AUDIT Fail for gpu-node-1"; }
wait_for "Event AuditFailed on gpu-node-1" 20 bash -c \
  "kubectl get events -A --field-selector reason=AuditFailed,involvedObject.name=gpu-node-1 -o name | grep -q ."
pass "AUDIT column: Fail on gpu-node-1, Pass on gpu-node-0 and gpu-node-2; Event AuditFailed on gpu-node-1"
