#!/usr/bin/env bash
# GPU health in Kubernetes mode: one lockstep-agent stands in for the agent of
# the kwok GPU node gpu-node-0, as the chart's agent ServiceAccount with a
# token bound to that node, on the agent.yaml the operator rendered for its
# policy (gpu.pollIntervalSeconds lowered to 1 for the test). It reads two GPUs
# from the fake NVML built here (tests/support/fake_nvml, loaded through the
# agent's own dlopen path: $LOCKSTEP_NVML_LIBRARY), whose state file the test
# rewrites. Asserts:
#  1. FabricHealth gpu-node-0: GPUHealthy True (Healthy), status.gpu.state
#     Healthy with both devices; `kubectl get fabrichealth` shows column GPU;
#  2. GPU 1 at 93 C: GPUHealthy False, reason EarlyWarning, the message names
#     GPU 1, its temperature and the threshold; devices[1].temperatureCelsius 93;
#  3. cooled down, then Xid 79 on GPU 0: the message names GPU 0 and Xid 79,
#     devices[0].xids [79].
# Every wait is a generous upper bound (reports every 2 s, reads every 1 s).
# The FabricHealth is handed back fresh at the end (the operator recreates it).
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || fail "needs jq"
AGENT=$(find_bin LOCKSTEP_AGENT daemonset/lockstep-agent)
FAKE_NVML=$(find_bin LOCKSTEP_FAKE_NVML tests/daemonset/liblockstep_fake_nvml.so)
operator_alive a || start_operator a
NODE=gpu-node-0
OUT=$STATE/gpu-health
rm -rf "$OUT" && mkdir -p "$OUT"
AGENT_PID=

agent_owned() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF "$OUT/"; }
cleanup() {
  show 2>/dev/null || true  # what the FabricHealth said last, for a failed wait
  if [[ -n $AGENT_PID ]] && agent_owned "$AGENT_PID"; then
    kill -TERM "$AGENT_PID" 2>/dev/null || true
    wait_for "the agent to exit" 15 bash -c "! kill -0 $AGENT_PID"
  fi
  kubectl delete fabrichealth "$NODE" --wait=true >/dev/null 2>&1 || true
  wait_for "the operator to recreate the FabricHealths" 60 healths_match_gpu_nodes
}
trap cleanup EXIT

wait_for "a FabricHealth per GPU node" 60 healths_match_gpu_nodes
policy=$(kubectl get fabrichealth $NODE -o jsonpath='{.metadata.labels.lockstep\.dev/policy}')
kubectl -n $NS get configmap "lockstep-agent-$policy" -o jsonpath='{.data.agent\.yaml}' >"$OUT/agent.yaml"
grep -q '^gpu:' "$OUT/agent.yaml" || fail "the operator's agent.yaml has no gpu: section ($OUT/agent.yaml)"
grep -q '  mode: Auto' "$OUT/agent.yaml" || fail "gpu.mode is not Auto by default ($OUT/agent.yaml)"
sed -i 's/^  pollIntervalSeconds: .*/  pollIntervalSeconds: 1/' "$OUT/agent.yaml"
(umask 077 && kubectl -n $NS get secret lockstep-probe-key -o jsonpath='{.data.key}' | base64 -d >"$OUT/probe-key")
kubectl -n $NS create token lockstep-agent --duration=1h --bound-object-kind=Node --bound-object-name=$NODE \
  >"$OUT/token"

STATE_FILE=$OUT/nvml.state
printf 'gpus=2\ngpu.0.uuid=GPU-zero\ngpu.1.uuid=GPU-one\n' >"$STATE_FILE"
LOCKSTEP_NVML_LIBRARY=$FAKE_NVML FAKE_NVML_STATE=$STATE_FILE setsid "$AGENT" --config "$OUT/agent.yaml" \
  --node-name $NODE --server "$LOCKSTEP_APISERVER" --token-file "$OUT/token" \
  --certificate-authority "$LOCKSTEP_CA_CERT" --bind-address 127.0.0.1 --probe-port 0 \
  --health-addr 127.0.0.1:0 --time-api-addr 127.0.0.1:0 --probe-key-file "$OUT/probe-key" \
  --node-address-fallback=false --report-interval 2 >"$OUT/agent.log" 2>&1 </dev/null &
AGENT_PID=$!

# gpu_is JQ: the FabricHealth's status satisfies the jq filter JQ ($c: conditions by type).
gpu_is() {
  kubectl get fabrichealth $NODE -o json |
    jq -e '.status as $s | (($s.conditions // []) | map({key: .type, value: .}) | from_entries) as $c | '"$1" \
      >/dev/null
}
show() { kubectl get fabrichealth $NODE -o json | jq -c '{gpu: .status.gpu, cond: (.status.conditions // [] | map(select(.type == "GPUHealthy")))}' >&2; }

wait_for "agent start" 20 grep -q '"msg":"lockstep-agent started"' "$OUT/agent.log"
wait_for "GPUHealthy True on $NODE" 60 gpu_is \
  '$c.GPUHealthy.status == "True" and $c.GPUHealthy.reason == "Healthy" and $s.gpu.state == "Healthy"
   and ($s.gpu.devices | map(.uuid)) == ["GPU-zero", "GPU-one"] and $s.gpu.driverVersion == "550.54.15"'
kubectl get fabrichealth $NODE >"$OUT/fh.txt"
# GPU is the column before AGE (empty columns before it leave no field for awk).
awk 'NR == 1 { header = ($(NF - 1) == "GPU") } $1 == "gpu-node-0" { v = $(NF - 1) }
  END { exit !(header && v == "Healthy") }' "$OUT/fh.txt" || { cat "$OUT/fh.txt" >&2; fail "column GPU not Healthy"; }
pass "$NODE: GPUHealthy True, status.gpu with both GPUs, kubectl get fabrichealth shows GPU Healthy"

printf 'gpu.1.temp=93\n' >>"$STATE_FILE"
wait_for "GPUHealthy False for GPU 1's temperature" 30 gpu_is \
  '$c.GPUHealthy.status == "False" and $c.GPUHealthy.reason == "EarlyWarning"
   and ($c.GPUHealthy.message | contains("GPU 1 (GPU-one) temperature 93 C >= 90 C"))
   and $s.gpu.state == "Warning" and $s.gpu.devices[1].temperatureCelsius == 93 and $s.gpu.warnings == 1'
pass "GPU 1 at 93 C: GPUHealthy False (EarlyWarning) naming GPU 1, its temperature and the threshold"

sed -i 's/^gpu.1.temp=93$/gpu.1.temp=50/' "$STATE_FILE"
printf 'xid.1=0:79\n' >>"$STATE_FILE"
wait_for "GPUHealthy False for Xid 79 on GPU 0" 30 gpu_is \
  '$c.GPUHealthy.status == "False" and $c.GPUHealthy.message == "GPU 0 (GPU-zero) Xid 79"
   and $s.gpu.devices[0].xids == [79] and $s.gpu.devices[1].state == "Healthy"'
pass "Xid 79 on GPU 0: GPUHealthy False naming GPU 0 and the Xid, devices[0].xids [79]"
grep -q '"msg":"GPU early warning"' "$OUT/agent.log" || fail "the agent did not log the early warning"
if grep -q 'NVML cannot be read' "$OUT/agent.log"; then fail "the agent could not read the fake NVML"; fi
