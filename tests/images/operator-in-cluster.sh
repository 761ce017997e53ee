#!/usr/bin/env bash
# The operator from its image, against the hermetic control plane (the e2e
# fixture: 8 GPU + 2 CPU kwok nodes, chart installed): runc runs the image's
# entrypoint as the chart's pod does (uid 65532 from the image, no capabilities,
# no new privileges, read-only root), with the chart's ServiceAccount token and
# the cluster CA mounted read-only; host network, since the API server listens
# on 127.0.0.1. It must take the Lease, render the agent DaemonSet with the
# agent image's name, create one FabricHealth per GPU node (so TLS through the
# image's libcurl/OpenSSL works), and on SIGTERM exit 0 and release the Lease.
#   operator-in-cluster.sh STATE_DIR     (root; env as e2e/tests: LOCKSTEP_BUILD_DIR)
. "$(dirname "$0")/../../e2e/tests/lib.sh"

build_dir=${LOCKSTEP_BUILD_DIR:?LOCKSTEP_BUILD_DIR must name the CMake build tree}
app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$REPO/charts/lockstep/Chart.yaml")
work=$STATE/operator-image
id="lockstep-images-operator-$$"
runc_pid=""
cleanup_image() {
  [[ -z $runc_pid ]] || { runc kill "$id" KILL 2>/dev/null; wait "$runc_pid" 2>/dev/null; }
  runc delete --force "$id" >/dev/null 2>&1 || true
  rm -rf "$work"  # bundle, layout and the copied token
}
trap cleanup_image EXIT

# Only this operator: stop the ones earlier tests left running.
for f in "$CLUSTER"/pids/operator-*.pid; do
  [[ -e $f ]] || continue
  n=${f##*/operator-}; stop_operator "${n%.pid}" TERM
done

# The image (cached between runs in the build tree).
"$REPO/images/build" --build-dir "$build_dir" --out "$build_dir/images" >"$STATE/images-build.log" 2>&1 ||
  fail "images/build failed: $(tail -5 "$STATE/images-build.log")"
ref="ghcr.io/lockstep/lockstep-operator:$app_version"
rm -rf "$work"; mkdir -p "$work/oci" "$work/secrets"
tar -xf "$build_dir/images/lockstep-operator-$app_version.oci.tar" -C "$work/oci"
umoci unpack --image "$work/oci:$ref" "$work/bundle" >/dev/null || fail "umoci unpack $ref"

# What a pod would mount: the token and the CA, readable by the image's user only.
cp "$STATE/operator.token" "$work/secrets/token"
cp "$LOCKSTEP_CA_CERT" "$work/secrets/ca.crt"
chown -R 65532:65532 "$work/secrets"; chmod 0500 "$work/secrets"; chmod 0400 "$work/secrets"/*
agent_image="ghcr.io/lockstep/lockstep-agent:$app_version"
jq --arg s "$work/secrets" --arg server "$LOCKSTEP_APISERVER" --arg agent "$agent_image" '
    .process.terminal = false
  | .process.args += ["--server=" + $server, "--token-file=/var/run/lockstep/token",
                      "--certificate-authority=/var/run/lockstep/ca.crt", "--namespace=lockstep-system",
                      "--identity=image", "--leader-elect=true", "--leader-election-id=lockstep-operator",
                      "--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0",
                      "--agent-service-account=lockstep-agent", "--agent-image=" + $agent,
                      "--probe-key-secret=lockstep-probe-key"]
  | .process.capabilities = {bounding: [], effective: [], permitted: [], inheritable: [], ambient: []}
  | .process.noNewPrivileges = true
  | .root.readonly = true
  | .mounts += [{destination: "/var/run/lockstep", type: "bind", source: $s, options: ["rbind", "ro"]}]
  | .linux.namespaces |= map(select(.type != "network"))' \
  "$work/bundle/config.json" >"$work/config.json" && mv "$work/config.json" "$work/bundle/config.json"
[[ $(jq -r .process.user.uid "$work/bundle/config.json") == 65532 ]] || fail "the image does not run as 65532"

log=$STATE/operator-image.log
runc run --bundle "$work/bundle" "$id" >"$log" 2>&1 </dev/null &
runc_pid=$!
wait_for "the operator in its image serving" 60 grep -q '"msg":"serving"' "$log"
pass "operator runs from its image as uid 65532 with no capabilities"
wait_for "the image's operator holds the Lease" 60 bash -c "[[ \$(kubectl -n $NS get lease lockstep-operator -o jsonpath='{.spec.holderIdentity}') == image ]]"
pass "operator in its image is the leader"
wait_for "agent DaemonSet" 60 kubectl -n $NS get daemonset lockstep-agent-default
got=$(kubectl -n $NS get daemonset lockstep-agent-default -o jsonpath='{.spec.template.spec.containers[0].image}')
[[ $got == "$agent_image" ]] || fail "the DaemonSet runs '$got', expected $agent_image"
wait_for "one FabricHealth per GPU node" 60 healths_match_gpu_nodes
pass "operator in its image reconciles: DaemonSet with $agent_image, a FabricHealth per GPU node"

runc kill "$id" TERM
rc=0; wait "$runc_pid" || rc=$?
runc_pid=""
[[ $rc -eq 0 ]] || fail "the operator exited $rc after SIGTERM: $(tail -3 "$log")"
holder=$(kubectl -n $NS get lease lockstep-operator -o jsonpath='{.spec.holderIdentity}')
[[ $holder != image ]] || fail "the Lease is still held by the stopped operator"
pass "SIGTERM to the operator (PID 1) exits 0 and releases the Lease"
