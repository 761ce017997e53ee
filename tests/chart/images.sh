#!/usr/bin/env bash
# The chart names the images images/build makes: by default
# ghcr.io/lockstep/lockstep-{operator,agent}:<appVersion> with IfNotPresent (and
# the operator's --coordinator-image ghcr.io/lockstep/lockstep-coordinator:<appVersion>), and
# --set of a local image (repository, tag, pullPolicy Never) reaches every place
# an image is named: the operator's container, its --agent-image flag, and the
# default FabricPolicy's spec.agent (from which the operator renders the agent
# DaemonSet). Offline: helm template only. helm comes from $LOCKSTEP_BIN or PATH.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=lib.sh
source "$here/lib.sh"

helm="$(find_tool helm)"
[[ -n "$helm" ]] || { echo "FAIL helm is needed: put it in \$LOCKSTEP_BIN (scripts/install-k8s-tools) or on PATH"; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export KUBECONFIG="$tmp/kubeconfig" HELM_CACHE_HOME="$tmp/c" HELM_CONFIG_HOME="$tmp/f" HELM_DATA_HOME="$tmp/d"
chart="$root/charts/lockstep"
app_version="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$chart/Chart.yaml")"
[[ -n "$app_version" ]] && ok "Chart.yaml appVersion $app_version" || bad "no appVersion in Chart.yaml"

render() { # render NAME ARGS... -> $tmp/NAME.yaml
  local name="$1"; shift
  if "$helm" template lockstep "$chart" --namespace lockstep-system "$@" >"$tmp/$name.yaml" 2>"$tmp/$name.err"; then
    ok "helm template ($name)"
  else
    cat "$tmp/$name.err"; bad "helm template ($name)"
  fi
}
# The operator container's fields, and the FabricPolicy's spec.agent fields.
operator_field() { # operator_field FILE FIELD -> value in the operator container
  awk -v f="$2" '/^kind: Deployment$/ { d = 1 } /^---/ { d = 0 }
    d && $1 == "-" && $2 == "name:" && $3 == "operator" { c = 1 }
    d && c && $1 == f":" { sub(/^[^:]*: */, ""); gsub(/"/, ""); print; exit }' "$1"
}
policy_agent_field() { # policy_agent_field FILE FIELD -> spec.agent.FIELD of the FabricPolicy
  awk -v f="$2" '/^kind: FabricPolicy$/ { p = 1 } /^---/ { p = 0; a = 0 }
    p && /^  agent:$/ { a = 1; next } p && a && /^  [^ ]/ { a = 0 }
    p && a && $1 == f":" { sub(/^[^:]*: */, ""); gsub(/"/, ""); print; exit }' "$1"
}
expect_eq() { # expect_eq LABEL GOT WANT
  [[ "$2" == "$3" ]] && ok "$1: $3" || bad "$1: got '$2', expected '$3'"
}
check() { # check RENDER OPERATOR-IMAGE AGENT-IMAGE PULL-POLICY
  local f="$tmp/$1.yaml"
  expect_eq "$1: operator image" "$(operator_field "$f" image)" "$2"
  expect_eq "$1: operator imagePullPolicy" "$(operator_field "$f" imagePullPolicy)" "$4"
  if grep -qxE -- " +- --agent-image=$3" "$f"; then ok "$1: operator --agent-image=$3"; else bad "$1: no --agent-image=$3 in the render"; fi
  expect_eq "$1: FabricPolicy spec.agent.image" "$(policy_agent_field "$f" image)" "$3"
  expect_eq "$1: FabricPolicy spec.agent.imagePullPolicy" "$(policy_agent_field "$f" imagePullPolicy)" "$4"
}

# Defaults: the names images/build gives its archives, tag = appVersion.
render defaults
check defaults "ghcr.io/lockstep/lockstep-operator:$app_version" "ghcr.io/lockstep/lockstep-agent:$app_version" IfNotPresent

# A locally built image, imported into the nodes' containerd: never pulled.
render local \
  --set operator.image.repository=localhost/lockstep-operator --set-string operator.image.tag=dev \
  --set operator.image.pullPolicy=Never \
  --set agent.image.repository=localhost/lockstep-agent --set-string agent.image.tag=dev \
  --set agent.image.pullPolicy=Never
check local localhost/lockstep-operator:dev localhost/lockstep-agent:dev Never

# Repository only: the tag stays the appVersion (images/build --repository-prefix).
render prefix --set operator.image.repository=registry.local:5000/lockstep/lockstep-operator \
  --set agent.image.repository=registry.local:5000/lockstep/lockstep-agent
check prefix "registry.local:5000/lockstep/lockstep-operator:$app_version" \
  "registry.local:5000/lockstep/lockstep-agent:$app_version" IfNotPresent

# A numeric-looking tag given with --set stays the string typed (1.10, not 1.1).
render numeric-tag --set operator.image.tag=1.10 --set agent.image.tag=1.10 --set coordinator.image.tag=1.10
expect_eq "numeric-tag: operator image" "$(operator_field "$tmp/numeric-tag.yaml" image)" "ghcr.io/lockstep/lockstep-operator:1.10"
expect_eq "numeric-tag: FabricPolicy spec.agent.image" "$(policy_agent_field "$tmp/numeric-tag.yaml" image)" "ghcr.io/lockstep/lockstep-agent:1.10"
grep -qxE -- " +- --coordinator-image=ghcr.io/lockstep/lockstep-coordinator:1\.10" "$tmp/numeric-tag.yaml" &&
  ok "numeric-tag: --coordinator-image=ghcr.io/lockstep/lockstep-coordinator:1.10" || bad "numeric-tag: the coordinator's tag is not 1.10"

# The coordinator image of each TrainingJob: the operator's --coordinator-image flag.
grep -qxE -- " +- --coordinator-image=ghcr.io/lockstep/lockstep-coordinator:$app_version" "$tmp/defaults.yaml" &&
  ok "defaults: --coordinator-image tagged with the appVersion" || bad "defaults: no --coordinator-image with the appVersion"
render coordinator --set coordinator.image.repository=localhost/lockstep-coordinator --set-string coordinator.image.tag=dev
grep -qxE -- " +- --coordinator-image=localhost/lockstep-coordinator:dev" "$tmp/coordinator.yaml" &&
  ok "coordinator: --coordinator-image=localhost/lockstep-coordinator:dev" || bad "coordinator: coordinator.image does not reach --coordinator-image"

# The images run the operator as 65532 (images/build); the chart must agree.
grep -qE '^ +runAsUser: 65532$' "$tmp/defaults.yaml" && ok "operator pod runAsUser 65532 (the image's nonroot user)" \
  || bad "operator pod runAsUser is not 65532, the image's user"
summary
