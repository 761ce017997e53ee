#!/usr/bin/env bash
# Offline checks of the CRDs and the Helm chart:
#   - chart CRDs in sync with crds/;
#   - kubectl parses crds/ and the rendered chart (client-side, no cluster);
#   - helm lint --strict with default and non-default values;
#   - helm template renders, twice identically (no key material or other
#     per-render randomness), and rejects bad values with a clear message;
#   - the RBAC the chart grants is what the code uses (see the README's
#     "Permissions").
# helm and kubectl come from $LOCKSTEP_BIN or PATH. Exits non-zero on any problem.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=lib.sh
source "$here/lib.sh"

helm="$(find_tool helm)"
kubectl="$(find_tool kubectl)"
if [[ -z "$helm" || -z "$kubectl" ]]; then
  echo "FAIL helm and kubectl are needed: put them in \$LOCKSTEP_BIN (scripts/install-k8s-tools) or on PATH" \
       "(found helm='${helm}', kubectl='${kubectl}')" >&2
  exit 1
fi
echo "using $("$helm" version --short 2>/dev/null) ($helm), kubectl $("$kubectl" version --client 2>/dev/null | head -1) ($kubectl)"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# Never talk to a cluster: an empty kubeconfig, and only --local/offline commands.
export KUBECONFIG="$tmp/kubeconfig"
printf 'apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n' > "$KUBECONFIG"
export HELM_CACHE_HOME="$tmp/helm-cache" HELM_CONFIG_HOME="$tmp/helm-config" HELM_DATA_HOME="$tmp/helm-data"

chart="$root/charts/lockstep"

# 1. CRD copies.
if out="$("$here/check-crds-in-sync.sh" 2>&1)"; then ok "crd sync"; else echo "$out"; bad "crd sync"; fi

# 2. kubectl parses every CRD (client side).
kparse() { # kparse LABEL FILE-OR-DIR
  local out
  if out="$("$kubectl" annotate --local --dry-run=client -o name -f "$2" lockstep.dev/lint=ok 2>&1)"; then
    ok "kubectl parses $1: $(echo "$out" | tr '\n' ' ')"
  else
    bad "kubectl cannot parse $1: $out"
  fi
}
kparse crds/ "$root/crds"
count="$(ls "$root"/crds/*.yaml | wc -l)"
[[ "$count" -eq 5 ]] && ok "crds/ holds 5 CRDs" || bad "crds/ holds $count CRDs, expected 5"

# 3. helm lint --strict, with several value sets.
value_sets=(
  "defaults|"
  "everything-on|--set metrics.serviceMonitor.enabled=true --set prometheusRule.enabled=true --set operator.logLevel=debug"
  "existing-secret|--set probeKey.existingSecret=my-key"
  "no-policy|--set defaultPolicy.create=false --set agent.restrictToOwnNode=false --set operator.leaderElect=false --set operator.replicas=1"
  "web-off|--set web.enabled=false"
  "kubeflow|--set kubeflow.trainJob.enabled=true --set kubeflow.pytorchJob.enabled=true"
  "custom-policy|--set defaultPolicy.name=rails --set defaultPolicy.spec.probe.intervalMs=10 --set defaultPolicy.spec.agent.image=registry.local/agent:dev --set agent.serviceAccountName=custom-agent"
)
for vs in "${value_sets[@]}"; do
  name="${vs%%|*}"; args="${vs#*|}"
  # shellcheck disable=SC2086
  if out="$("$helm" lint --strict "$chart" $args 2>&1)"; then
    ok "helm lint --strict ($name)"
  else
    echo "$out"; bad "helm lint --strict ($name)"
  fi
  # shellcheck disable=SC2086
  if "$helm" template lockstep "$chart" --namespace lockstep-system $args > "$tmp/$name.yaml" 2> "$tmp/$name.err"; then
    ok "helm template ($name)"
    kparse "rendered chart ($name)" "$tmp/$name.yaml"
    # A GitOps tool renders on every sync: a second render must be identical,
    # or each sync would change (e.g. rotate a key) what is in the cluster.
    # shellcheck disable=SC2086
    "$helm" template lockstep "$chart" --namespace lockstep-system $args > "$tmp/$name.again.yaml" 2>&1
    # The one exception: the pod webhook's certificate (kubeflow.webhook),
    # made by genCA when no install exists yet (lookup finds the Secret of an
    # install and keeps it; docs/migration.md says what GitOps users set).
    mask() { sed -E 's/^(  (tls\.crt|tls\.key|ca\.crt)|      caBundle): .*/\1: <generated>/' "$1"; }
    if diff -u <(mask "$tmp/$name.yaml") <(mask "$tmp/$name.again.yaml") > "$tmp/$name.diff"; then
      ok "helm template twice renders identical output ($name)"
    else
      head -40 "$tmp/$name.diff"; bad "helm template renders differently each time ($name)"
    fi
  else
    cat "$tmp/$name.err"; bad "helm template ($name)"
  fi
done

# 4. Contract checks on the default render.
r="$tmp/defaults.yaml"
expect() { # expect LABEL PATTERN FILE
  if grep -qE -- "$2" "$3"; then ok "$1"; else bad "$1: no line matches /$2/ in the render"; fi
}
expect "operator arg --namespace"             '^ +- --namespace=\$\(POD_NAMESPACE\)$' "$r"
expect "operator arg --leader-elect"          '^ +- --leader-elect=true$' "$r"
expect "operator arg --leader-election-id"     '^ +- --leader-election-id=lockstep-operator$' "$r"
expect "operator arg --metrics-addr"          '^ +- --metrics-addr=:8080$' "$r"
expect "operator arg --health-addr"           '^ +- --health-addr=:8081$' "$r"
expect "operator arg --agent-service-account" '^ +- --agent-service-account=lockstep-agent$' "$r"
expect "operator arg --agent-image"           '^ +- --agent-image=ghcr.io/lockstep/lockstep-agent:0.1.0$' "$r"
expect "operator arg --probe-key-secret"      '^ +- --probe-key-secret=lockstep-probe-key$' "$r"
expect "operator arg --log-level"             '^ +- --log-level=info$' "$r"
expect "operator arg --web-addr"              '^ +- --web-addr=:8082$' "$r"
expect "web page Service <fullname>-web"       '^  name: lockstep-web$' "$r"
if grep -A12 -E '^  name: lockstep-web$' "$r" | grep -qE '^  type: ClusterIP$'; then
  ok "the web page's Service is ClusterIP"
else
  bad "the web page's Service must be ClusterIP (reached with kubectl port-forward)"
fi
if grep -qE -- '--web-addr|name: lockstep-web$' "$tmp/web-off.yaml"; then
  bad "web.enabled=false must render neither --web-addr nor the web Service"
else
  ok "web.enabled=false renders neither --web-addr nor the web Service"
fi
expect "agent ServiceAccount <fullname>-agent" '^  name: lockstep-agent$' "$r"
expect "default FabricPolicy"                  '^kind: FabricPolicy$' "$r"
if grep -qE '^kind: DaemonSet$' "$tmp"/*.yaml; then
  bad "the chart must not render the agent DaemonSet (the operator creates it from each FabricPolicy)"
else
  ok "no agent DaemonSet in the chart"
fi
# The one Secret allowed: the pod webhook's TLS certificate (kubeflow.webhook, off by default).
if cat "$tmp"/*.yaml | grep -A6 -E '^kind: Secret$' | grep -E '^  name: ' | grep -vqE -- '-webhook-cert$'; then
  bad "the chart must not render a Secret (the operator creates the probe key; see README \"Probe key\")"
else
  ok "no Secret (no key material) in the chart but the pod webhook's certificate"
fi
if grep -qE '^kind: Secret$' "$r"; then bad "the default install renders a Secret"; else ok "no Secret by default"; fi
expect "custom agent SA flows to the operator" '^ +- --agent-service-account=custom-agent$' "$tmp/custom-policy.yaml"
expect "custom policy keeps user image"        '^    image: registry.local/agent:dev$' "$tmp/custom-policy.yaml"
expect "existing secret flows to the operator" '^ +- --probe-key-secret=my-key$' "$tmp/existing-secret.yaml"
if grep -q '^kind: FabricPolicy$' "$tmp/no-policy.yaml"; then bad "defaultPolicy.create=false must not render a FabricPolicy"; else ok "defaultPolicy.create=false renders no FabricPolicy"; fi

# 5. Bad values are rejected with a message that says what to do.
reject() { # reject LABEL EXPECTED-MESSAGE-REGEX ARGS...
  local label="$1" msg="$2"; shift 2
  local out
  if out="$("$helm" template lockstep "$chart" "$@" 2>&1)"; then
    bad "$label: helm template accepted it"
  elif echo "$out" | grep -qE -- "$msg"; then
    ok "$label rejected"
  else
    bad "$label: rejected, but the message lacks /$msg/: $out"
  fi
}
reject "removed probeKey.create" "additional properties|additionalProperties|not allowed" --set probeKey.create=true
reject "bad existingSecret"    "existingSecret" --set probeKey.existingSecret=Not_A_Name
reject "unknown top-level key" "additional properties|additionalProperties|not allowed" --set bogus=1
reject "unknown operator key"  "additional properties|additionalProperties|not allowed" --set operator.bogus=1
reject "bad log level"         "logLevel" --set operator.logLevel=loud
reject "bad pull policy"       "pullPolicy" --set agent.image.pullPolicy=Sometimes
reject "unknown policy field"  "spec|propertyNames|bogus" --set defaultPolicy.spec.bogus=1

# 6. RBAC: only what the code calls (README "Permissions").
rbac_rules() { # rbac_rules FILE KIND NAME -> the rules of that Role/ClusterRole, one "resources verbs [names]" line each
  awk -v kind="$2" -v name="$3" '
    /^---/ { in_obj = 0; in_rules = 0 }
    $0 == "kind: " kind { k = 1; next }
    /^kind: / { k = 0 }
    k && $0 == "  name: " name { in_obj = 1 }
    in_obj && /^rules:/ { in_rules = 1; next }
    in_rules && /^  - apiGroups:/ { if (line != "") print line; line = "" }
    in_rules && /^    resources:/ { line = $2 }
    in_rules && /^    resourceNames:/ { names = $2 }
    in_rules && /^    verbs:/ { sub(/^    verbs: /, ""); line = line " " $0; if (names != "") line = line " names=" names; names = "" }
    END { if (line != "") print line }' "$1" | sed 's/"//g'
}
expect_rules() { # expect_rules LABEL FILE KIND NAME EXPECTED-LINES
  local got
  got="$(rbac_rules "$2" "$3" "$4")"
  if [[ "$got" == "$5" ]]; then ok "$1"; else bad "$1: got
$got
expected
$5"; fi
}
expect_rules "operator ClusterRole" "$r" ClusterRole lockstep-operator "[fabricpolicies] [get, list, watch]
[fabricpolicies/status] [get, update, patch]
[fabricpolicies/finalizers] [update]
[fabrichealths] [get, list, watch, create, update, delete]
[fabrichealths/status] [get, update, patch]
[fleetaudits] [get, list, watch]
[fleetaudits/status] [patch]
[nodeaudits] [get, list, watch, create]
[nodes] [get, list, watch]
[events] [create, patch]
[trainingjobs] [get, list, watch]
[trainingjobs/status] [update, patch]
[pods] [get, list, watch, create, delete, patch]
[poddisruptionbudgets] [get, list, watch, create, patch]
[services] [get, list, watch, create, patch]
[configmaps] [get, list, watch, create, patch]
[serviceaccounts] [get, list, watch, create, patch]
[rolebindings] [get, list, watch, create, patch]
[clusterroles] [bind] names=[lockstep-coordinator]"
expect_rules "coordinator ClusterRole (bound per TrainingJob by the operator)" "$r" ClusterRole lockstep-coordinator \
"[pods] [get, list, watch, create, patch, delete]
[configmaps] [get, create, update, patch]
[events] [create, patch]
[trainingjobs] [get]
[trainingjobs/status] [patch]"
expect_rules "operator Role" "$r" Role lockstep-operator "[daemonsets] [get, list, watch, create, patch]
[configmaps] [get, list, watch, create, patch]
[leases] [create]
[leases] [get, update] names=[lockstep-operator]
[secrets] [get] names=[lockstep-probe-key]
[secrets] [create]"
expect_rules "operator Role with probeKey.existingSecret (no create secrets)" "$tmp/existing-secret.yaml" Role lockstep-operator \
"[daemonsets] [get, list, watch, create, patch]
[configmaps] [get, list, watch, create, patch]
[leases] [create]
[leases] [get, update] names=[lockstep-operator]
[secrets] [get] names=[my-key]"
expect_rules "operator Kubeflow ClusterRole (kubeflow.* enabled)" "$tmp/kubeflow.yaml" ClusterRole lockstep-operator-kubeflow \
"[trainingjobs] [create, patch, delete]
[trainjobs] [get, list, watch]
[jobsets] [get, list, watch]
[pytorchjobs] [get, list, watch]"
expect "the pod webhook is served on its port" '^ +- --webhook-addr=:9443$' "$tmp/kubeflow.yaml"
expect "the pod webhook ignores its own failures" '^    failurePolicy: Ignore$' "$tmp/kubeflow.yaml"
expect "the pod webhook sends only a TrainJob's trainer pods" '^        - key: jobset.sigs.k8s.io/replicatedjob-name$' "$tmp/kubeflow.yaml"
expect "the pod webhook sends only a PyTorchJob's pods" '^        - key: training.kubeflow.org/job-name$' "$tmp/kubeflow.yaml"
if grep -q MutatingWebhookConfiguration "$r"; then bad "the default install has a webhook"; else ok "no webhook by default"; fi
expect "kubeflow.trainJob.enabled flows to the operator" '^ +- --kubeflow-trainjobs$' "$tmp/kubeflow.yaml"
expect "kubeflow.pytorchJob.enabled flows to the operator" '^ +- --kubeflow-pytorchjobs$' "$tmp/kubeflow.yaml"
if [[ -z "$(rbac_rules "$r" ClusterRole lockstep-operator-kubeflow)" ]]; then
  ok "no Kubeflow permissions by default"
else
  bad "the default install grants Kubeflow permissions"
fi
expect_rules "agent ClusterRole" "$r" ClusterRole lockstep-agent "[fabrichealths] [get, list, watch]
[fabrichealths/status] [get, update, patch]
[nodeaudits] [get, list, watch]
[nodeaudits/status] [patch]
[nodes] [get]"
expect_rules "agent Role for flap alert Events (namespace default only)" "$r" Role lockstep-agent-events \
  "[events] [create, patch]"
if [[ -z "$(rbac_rules "$r" Role lockstep-agent)" ]]; then
  ok "no namespaced Role for the agent (it reads its config and key from volumes)"
else
  bad "the agent has a namespaced Role: $(rbac_rules "$r" Role lockstep-agent)"
fi
unused=0
for f in "$tmp"/*.yaml; do
  if grep -qE 'events\.k8s\.io|resources: \[(deployments|jobs)[],]|resources: \[secrets/' "$f"; then
    bad "$(basename "$f"): grants events.k8s.io, deployments, jobs or a secrets subresource, which no code uses"; unused=1
  fi
done
[[ $unused -eq 1 ]] || ok "no events.k8s.io, deployments or jobs permissions in any render"
expect "operator arg --coordinator-image"        '^ +- --coordinator-image=ghcr.io/lockstep/lockstep-coordinator:0.1.0$' "$r"
expect "operator arg --coordinator-cluster-role" '^ +- --coordinator-cluster-role=lockstep-coordinator$' "$r"
expect "operator pod seccompProfile RuntimeDefault" '^        seccompProfile:$' "$r"

summary
