#!/usr/bin/env bash
# ctest fixture: a hermetic cluster (8 GPU + 2 CPU kwok nodes), the chart
# installed with helm, and a ServiceAccount token for the operator.
#   setup.sh STATE_DIR
. "$(dirname "$0")/lib.sh"

[[ -x $OPERATOR ]] || fail "operator binary not found at $OPERATOR (build first)"
if [[ -d $CLUSTER ]]; then "$REPO/e2e/cluster/down" "$CLUSTER" --purge || true; fi
mkdir -p "$STATE"
"$REPO/e2e/cluster/up" --nodes 8 --cpu-nodes 2 --dir "$CLUSTER" >/dev/null
. "$CLUSTER/env"
export KUBECONFIG PATH=$LOCKSTEP_K8S_BIN:$PATH

helm install lockstep "$REPO/charts/lockstep" --namespace $NS --create-namespace \
  --set operator.replicas=1 >"$STATE/helm-install.log"
kubectl -n $NS create token lockstep-operator --duration=4h >"$STATE/operator.token"
say "cluster ready in $CLUSTER"
