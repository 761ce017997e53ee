#!/usr/bin/env bash
# Validates the CRDs, the sample custom resources in samples/ and the rendered
# chart with the kube-apiserver's own validation code (crdcheck/, Go, built
# once and cached):
#   - CRDs: structural schema, defaults, CEL compile and cost budget;
#   - samples: defaulting, OpenAPI and CEL outcomes against '# expect' headers;
#   - chart: built-in kinds decode strictly, the default FabricPolicy passes
#     its CRD, the agent ValidatingAdmissionPolicy compiles and allows/denies
#     as intended; values.schema.json lists FabricPolicy.spec's fields.
# Needs go (modules from the Go module proxy on first build) and helm
# ($LOCKSTEP_BIN or PATH). The first build takes a few minutes; later runs
# reuse ${LOCKSTEP_CACHE:-~/.cache/lockstep}/crdcheck/<source hash>.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=lib.sh
source "$here/lib.sh"

if ! command -v go >/dev/null 2>&1; then
  echo "FAIL go is needed to build tests/chart/crdcheck (install Go >= 1.24)" >&2
  exit 1
fi
helm="$(find_tool helm)"
if [[ -z "$helm" ]]; then
  echo "FAIL helm is needed: put it in \$LOCKSTEP_BIN (scripts/install-k8s-tools) or on PATH" >&2
  exit 1
fi

src="$here/crdcheck"
hash="$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go | sha256sum | cut -c1-16)"
cache="${LOCKSTEP_CACHE:-$HOME/.cache/lockstep}/crdcheck/$hash"
bin="$cache/crdcheck"
if [[ ! -x "$bin" ]]; then
  echo "building crdcheck into $cache (first run: a few minutes)"
  mkdir -p "$cache"
  if ! (cd "$src" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go build -trimpath -o "$bin.tmp" .) ; then
    echo "FAIL could not build tests/chart/crdcheck" >&2
    exit 1
  fi
  mv "$bin.tmp" "$bin"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export HELM_CACHE_HOME="$tmp/helm-cache" HELM_CONFIG_HOME="$tmp/helm-config" HELM_DATA_HOME="$tmp/helm-data"
ns=lockstep-system
chart="$root/charts/lockstep"
args=()
render() { # render NAME HELM-ARGS...
  local name="$1"; shift
  if ! "$helm" template lockstep "$chart" --namespace "$ns" "$@" > "$tmp/$name.yaml"; then
    echo "FAIL helm template ($name)" >&2
    exit 1
  fi
  args+=(-manifests "$tmp/$name.yaml")
}
render everything --set metrics.serviceMonitor.enabled=true --set prometheusRule.enabled=true
render custom-policy --set defaultPolicy.spec.probe.intervalMs=10 --set defaultPolicy.spec.probe.peersPerNode=8 \
  --set defaultPolicy.spec.clockSync.disciplineHostClock=true --set defaultPolicy.spec.clockSync.maxErrorBoundNs=5000 \
  --set-json 'defaultPolicy.spec.tolerations=[{"operator":"Exists"}]'

exec "$bin" -samples "$here/samples" "${args[@]}" \
  -agent-user "system:serviceaccount:$ns:lockstep-agent" \
  -values-schema "$chart/values.schema.json" \
  "$root"/crds/*.yaml
