# shellcheck shell=bash
# Helpers for the end-to-end tests (sourced). Each test gets the state dir made
# by setup.sh as $1: the cluster (STATE/cluster), the operator's token, and the
# operators the tests start (their pids live in STATE/cluster/pids so that
# e2e/cluster/down stops them too).
set -euo pipefail

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$E2E_DIR/../.." && pwd)
STATE=${1:?usage: $0 STATE_DIR}
CLUSTER=$STATE/cluster
NS=lockstep-system
if [[ -f $CLUSTER/env ]]; then
  # shellcheck disable=SC1091
  . "$CLUSTER/env"
  export KUBECONFIG
  PATH=$LOCKSTEP_K8S_BIN:$PATH
fi
OPERATOR=${LOCKSTEP_OPERATOR:-$REPO/build/ci/operator/lockstep-operator}

say() { echo "[e2e $(date +%H:%M:%S)] $*" >&2; }
fail() { say "FAIL: $*"; exit 1; }
pass() { say "PASS: $*"; }

# find_bin VAR REL: the binary $VAR names, else REL under $LOCKSTEP_BUILD_DIR,
# build/dev or build/ci (fails naming the build target).
find_bin() {
  local v=${!1:-} d
  if [[ -z $v ]]; then
    for d in ${LOCKSTEP_BUILD_DIR:+"$LOCKSTEP_BUILD_DIR"} "$REPO/build/dev" "$REPO/build/ci"; do
      if [[ -x $d/$2 ]]; then v=$d/$2 && break; fi
    done
  fi
  [[ -n $v && -x $v ]] || fail "$2 not built (cmake --build --preset dev --target ${2##*/})"
  echo "$v"
}

# wait_for DESCRIPTION TIMEOUT_S COMMAND...: polls until COMMAND succeeds.
wait_for() {
  local desc=$1 timeout=$2; shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "timed out after ${timeout}s waiting for: $desc"
    sleep 0.2
  done
}

# The GPU nodes as a sorted list.
gpu_nodes() { kubectl get nodes -l nvidia.com/gpu.present=true -o name | sed 's|node/||' | sort; }
healths() { kubectl get fabrichealth -o name | sed 's|.*/||' | sort; }
healths_match_gpu_nodes() { [[ "$(healths)" == "$(gpu_nodes)" && -n "$(healths)" ]]; }

# start_operator NAME [FLAGS...]: runs the operator as the chart's ServiceAccount
# (token from setup.sh), in the background. Its log: STATE/operator-NAME.log.
start_operator() {
  local name=$1; shift
  local log=$STATE/operator-$name.log
  if [[ -f $CLUSTER/pids/operator-$name.pid ]]; then stop_operator "$name" TERM; fi
  : >"$log"
  setsid "$OPERATOR" --server="$LOCKSTEP_APISERVER" --token-file="$STATE/operator.token" \
    --certificate-authority="$LOCKSTEP_CA_CERT" --namespace=$NS --identity="$name" \
    --metrics-addr=127.0.0.1:0 --health-addr=127.0.0.1:0 \
    --agent-service-account=lockstep-agent --probe-key-secret=lockstep-probe-key "$@" \
    >"$log" 2>&1 </dev/null &
  echo $! >"$CLUSTER/pids/operator-$name.pid"
  wait_for "operator $name serving" 30 grep -q '"msg":"serving"' "$log"
}

operator_pid() { cat "$CLUSTER/pids/operator-$1.pid"; }
operator_alive() { kill -0 "$(operator_pid "$1")" 2>/dev/null; }

# stop_operator NAME [SIGNAL]: signals it and waits until it has exited.
stop_operator() {
  local name=$1 sig=${2:-TERM} pid
  pid=$(operator_pid "$name")
  kill -"$sig" "$pid" 2>/dev/null || true
  wait_for "operator $name to exit" 30 bash -c "! kill -0 $pid"
  rm -f "$CLUSTER/pids/operator-$name.pid"
}

# operator_port NAME metrics|health
operator_port() {
  grep -m1 '"msg":"serving"' "$STATE/operator-$1.log" | sed -E "s/.*\"$2_port\":\"([0-9]+)\".*/\1/"
}

# operator_metric NAME PROMQL-ISH-PREFIX: sums the samples whose line starts with it.
operator_metric() {
  curl -fsS "http://127.0.0.1:$(operator_port "$1" metrics)/metrics" |
    awk -v p="$2" 'index($0, p) == 1 { s += $NF } END { printf "%d\n", s }'
}

lease_holder() { kubectl -n $NS get lease lockstep-operator -o jsonpath='{.spec.holderIdentity}'; }
