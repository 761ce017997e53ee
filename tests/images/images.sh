#!/usr/bin/env bash
# The container images, end to end: images/build makes the three OCI archives
# (operator, agent, coordinator) from the binaries of BUILD_DIR; then, for each archive:
#   - the layout is intact (every blob's sha256 is its name) and names the image
#     <prefix>/<name>:<appVersion> for containerd (io.containerd.image.name) and
#     podman/skopeo (org.opencontainers.image.ref.name);
#   - the config: Entrypoint, User (the operator and the coordinator non-root,
#     as the chart's runAsUser says; the agent root, which its capabilities
#     need), labels;
#   - umoci unpacks it and every ELF file in the root filesystem resolves all its
#     libraries inside the image (ld.so --list in a chroot), libibverbs providers
#     included;
#   - runc runs the image's entrypoint as the config says: --help exits 0, and
#     `lockstep-agent version` prints the appVersion;
#   - the agent runs from its image as the DaemonSet runs it (PID 1, only
#     CAP_NET_ADMIN, read-only root, /run/lockstep mounted), serves /healthz and
#     the NCCL plugin's socket, stops on SIGTERM;
#   - the NCCL plugin is in the agent image, and the DaemonSet's init container
#     (install-nccl-plugin, no capabilities) copies it to a mounted directory;
#   - the coordinator runs from its image as the operator's coordinator Pod runs
#     it: the Pod's `command` (read from operator/src/trainingjob_objects.cc)
#     found on the image's PATH, uid 65532, no capabilities, read-only root; it
#     serves /healthz, /readyz and /metrics, writes its state, stops on SIGTERM;
# and a second images/build with the same inputs is a cache hit that leaves the
# archives byte for byte as they were, while --force rebuilds the same digests.
#   tests/images/images.sh BUILD_DIR   (needs root, umoci, runc, jq, curl, iproute2)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build_dir="${1:?usage: images.sh BUILD_DIR (a configured CMake tree, e.g. build/ci)}"
source "$root/tests/chart/lib.sh"  # ok, bad, summary

for tool in umoci runc jq; do
  command -v "$tool" >/dev/null || { echo "FAIL $tool is missing: run scripts/setup"; exit 1; }
done
[[ "$(id -u)" -eq 0 ]] || { echo "FAIL needs root (runc, files owned by uid 0)"; exit 1; }

tmp="$(mktemp -d /tmp/lockstep-images-test.XXXXXX)"
ids=()
netns=""
coord_netns=""
cleanup() {
  local id
  for id in "${ids[@]}"; do runc delete --force "$id" >/dev/null 2>&1 || true; done
  [[ -z "$netns" ]] || ip netns del "$netns" 2>/dev/null || true
  [[ -z "$coord_netns" ]] || ip netns del "$coord_netns" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

app_version="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$root/charts/lockstep/Chart.yaml")"
prefix="ghcr.io/lockstep"
out="$tmp/out"

# 1. Build.
if "$root/images/build" --build-dir "$build_dir" --out "$out" >"$tmp/build1.out" 2>"$tmp/build1.err"; then
  ok "images/build"
else
  cat "$tmp/build1.err"; bad "images/build failed"; summary; exit 1
fi
grep -E '^(image|lockstep-)' "$tmp/build1.err"

blob() { echo "$1/blobs/sha256/${2#sha256:}"; }  # blob LAYOUT DIGEST -> path

check_image() { # check_image NAME USER
  local name="$1" want_user="$2" ref="$prefix/$1:$app_version"
  local archive="$out/$name-$app_version.oci.tar" layout="$tmp/$name/oci" bundle="$tmp/$name/bundle"
  [[ -f "$archive" ]] && ok "$name: archive $name-$app_version.oci.tar" || { bad "$name: no archive $archive"; return; }
  mkdir -p "$layout"
  tar -xf "$archive" -C "$layout" || { bad "$name: archive does not untar"; return; }
  if [[ "$(jq -r .imageLayoutVersion "$layout/oci-layout")" == 1.0.0 ]]; then ok "$name: OCI layout 1.0.0"; else bad "$name: oci-layout missing or wrong"; fi
  local f sum corrupt=0
  for f in "$layout"/blobs/sha256/*; do
    sum="$(sha256sum "$f" | cut -d' ' -f1)"
    [[ "$sum" == "$(basename "$f")" ]] || { corrupt=1; bad "$name: blob $(basename "$f") has sha256 $sum"; }
  done
  [[ $corrupt -eq 0 ]] && ok "$name: every blob matches its digest"

  local n; n="$(jq '.manifests | length' "$layout/index.json")"
  [[ "$n" == 1 ]] && ok "$name: one manifest" || bad "$name: $n manifests in index.json"
  local ann
  ann="$(jq -r '.manifests[0].annotations["org.opencontainers.image.ref.name"]' "$layout/index.json")"
  [[ "$ann" == "$ref" ]] && ok "$name: ref.name $ref" || bad "$name: ref.name is '$ann', expected $ref"
  ann="$(jq -r '.manifests[0].annotations["io.containerd.image.name"]' "$layout/index.json")"
  [[ "$ann" == "$ref" ]] && ok "$name: io.containerd.image.name $ref" || bad "$name: io.containerd.image.name is '$ann'"

  local manifest config
  manifest="$(blob "$layout" "$(jq -r '.manifests[0].digest' "$layout/index.json")")"
  config="$(blob "$layout" "$(jq -r '.config.digest' "$manifest")")"
  expect_json() { # expect_json LABEL JQ-FILTER EXPECTED
    local got; got="$(jq -c "$2" "$config")"
    [[ "$got" == "$3" ]] && ok "$name: $1 $3" || bad "$name: $1 is $got, expected $3"
  }
  expect_json "entrypoint" '.config.Entrypoint' "[\"/usr/local/bin/$name\"]"
  expect_json "user" '.config.User' "\"$want_user\""
  expect_json "os/arch" '[.os, .architecture]' '["linux","amd64"]'
  expect_json "label version = appVersion" '.config.Labels["org.opencontainers.image.version"]' "\"$app_version\""
  expect_json "label title" '.config.Labels["org.opencontainers.image.title"]' "\"$name\""
  expect_json "label ref.name" '.config.Labels["org.opencontainers.image.ref.name"]' "\"$ref\""
  expect_json "labels revision/created/description present" \
    '[.config.Labels | ."org.opencontainers.image.revision", ."org.opencontainers.image.created", ."org.opencontainers.image.description" | length > 0]' \
    '[true,true,true]'
  expect_json "one layer" '.rootfs.diff_ids | length' 1

  # Unpack as a runtime would (umoci: the image config becomes config.json).
  if umoci unpack --image "$layout:$ref" "$bundle" >"$tmp/$name.unpack" 2>&1; then
    ok "$name: umoci unpacks $ref"
  else
    cat "$tmp/$name.unpack"; bad "$name: umoci unpack failed"; return
  fi
  local rootfs="$bundle/rootfs" uid="${want_user%%:*}"
  [[ "$(jq -r '.process.user.uid' "$bundle/config.json")" == "$uid" ]] && ok "$name: runs as uid $uid" \
    || bad "$name: config.json runs as uid $(jq -r '.process.user.uid' "$bundle/config.json"), expected $uid"
  grep -q "^[^:]*:x:$uid:" "$rootfs/etc/passwd" && ok "$name: uid $uid has an /etc/passwd entry" \
    || bad "$name: uid $uid not in the image's /etc/passwd"

  # Every ELF file loads with the image's libraries only.
  local elf missing=0 count=0
  while IFS= read -r elf; do
    count=$((count + 1))
    local rel="/${elf#"$rootfs"/}"
    local listing; listing="$(chroot "$rootfs" /lib64/ld-linux-x86-64.so.2 --list "$rel" 2>&1)"
    if [[ $? -ne 0 ]] || grep -q 'not found' <<<"$listing"; then
      missing=1; bad "$name: $rel does not load in the image: $(grep 'not found' <<<"$listing" | head -3 | tr -s '\n\t ' ' ')"
    fi
  done < <(find "$rootfs" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec sh -c 'head -c4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
  [[ $missing -eq 0 && $count -gt 5 ]] && ok "$name: all $count ELF files resolve their libraries inside the image"
  if [[ "$name" == lockstep-agent ]]; then
    local providers; providers="$(ls "$rootfs"/usr/lib/x86_64-linux-gnu/libibverbs/*.so 2>/dev/null | wc -l)"
    local drivers; drivers="$(ls "$rootfs"/etc/libibverbs.d/*.driver 2>/dev/null | wc -l)"
    [[ $providers -gt 0 && $drivers -gt 0 ]] && ok "agent: $providers libibverbs providers and $drivers /etc/libibverbs.d entries" \
      || bad "agent: libibverbs providers ($providers) or /etc/libibverbs.d ($drivers) missing"
  fi
  [[ -s "$rootfs/etc/ssl/certs/ca-certificates.crt" ]] && ok "$name: CA bundle for libcurl" || bad "$name: no CA bundle"

  # Run the entrypoint with runc, as the image config says (read-only root).
  run_in_image() { # run_in_image ID ARGS... -> stdout; returns the container's exit code
    local id="$1"; shift
    jq --argjson extra "$(printf '%s\n' "$@" | jq -R . | jq -sc .)" \
      '.process.terminal = false | .process.args += $extra | .root.readonly = true' \
      "$bundle/config.json" >"$bundle/config.json.new" && mv "$bundle/config.json.new" "$bundle/config.json"
    timeout 120 runc run --bundle "$bundle" "$id" 2>"$tmp/$id.err"
  }
  local id="lockstep-images-test-$$-${name#lockstep-}" outp rc
  cp "$bundle/config.json" "$bundle/config.json.orig"
  ids+=("$id-help" "$id-version")  # runc run deletes them on exit; cleanup if it did not
  outp="$(run_in_image "$id-help" --help)"; rc=$?
  if [[ $rc -eq 0 ]] && grep -q "$name" <<<"$outp"; then
    ok "$name: runc run $name --help exits 0"
  else
    cat "$tmp/$id-help.err"; bad "$name: runc run --help exited $rc: $outp"
  fi
  if [[ "$name" == lockstep-agent ]]; then
    cp "$bundle/config.json.orig" "$bundle/config.json"
    outp="$(run_in_image "$id-version" version)"; rc=$?
    [[ $rc -eq 0 && "$outp" == "lockstep-agent $app_version" ]] && ok "agent: lockstep-agent version in the image is the appVersion ($outp)" \
      || bad "agent: version exited $rc with '$outp', expected 'lockstep-agent $app_version'"
  fi
}

check_image lockstep-operator 65532:65532
check_image lockstep-agent 0:0
check_image lockstep-coordinator 65532:65532

# The agent really runs from its image, as the DaemonSet runs it: PID 1, root
# with only CAP_NET_ADMIN, read-only root filesystem, its config and probe key
# mounted read-only; standalone mode in a network namespace of this test. It
# serves /healthz and /metrics, and SIGTERM (what the kubelet sends) stops it
# with exit 0.
agent_run() {
  local bundle="$tmp/lockstep-agent/bundle" id="lockstep-images-test-$$-agent-run"
  [[ -f "$bundle/config.json.orig" ]] || { bad "agent run: no unpacked bundle"; return; }
  netns="lockstep-images-$$"
  ip netns add "$netns" && ip -n "$netns" link set lo up || { bad "agent run: cannot create netns $netns"; return; }
  mkdir -p "$tmp/agent-etc"
  printf "%032d" 7 >"$tmp/agent-etc/probe-key"  # a fixed 32-byte key: nothing random
  printf 'nodeName: n0\nprobeKeyFile: /etc/lockstep/probe-key\npeers:\n  - {name: n1, address: "127.0.0.1:7399"}\n' \
    >"$tmp/agent-etc/agent.yaml"
  mkdir -p "$tmp/agent-run-lockstep"  # the DaemonSet's /run/lockstep hostPath
  jq --arg etc "$tmp/agent-etc" --arg run "$tmp/agent-run-lockstep" --arg ns "/run/netns/$netns" '
      .process.terminal = false
    | .process.args += ["run", "--config=/etc/lockstep/agent.yaml", "--health-addr=127.0.0.1:0",
                        "--bind-address=127.0.0.1", "--probe-port=0"]
    | .process.capabilities = {bounding: ["CAP_NET_ADMIN"], effective: ["CAP_NET_ADMIN"], permitted: ["CAP_NET_ADMIN"]}
    | .root.readonly = true
    | .mounts += [{destination: "/etc/lockstep", type: "bind", source: $etc, options: ["rbind", "ro"]},
                  {destination: "/run/lockstep", type: "bind", source: $run, options: ["rbind", "rw"]}]
    | .linux.namespaces |= map(if .type == "network" then . + {path: $ns} else . end)' \
    "$bundle/config.json.orig" >"$bundle/config.json"
  ids+=("$id")
  runc run --bundle "$bundle" "$id" >"$tmp/agent-run.out" 2>"$tmp/agent-run.err" &
  local runc_pid=$! addr="" i
  for ((i = 0; i < 300; i++)); do  # until it logs its health address (or exits)
    addr="$(grep -o '"health_addr":"[^"]*"' "$tmp/agent-run.err" 2>/dev/null | head -1 | cut -d'"' -f4)"
    [[ -n "$addr" ]] && break
    kill -0 "$runc_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [[ -z "$addr" ]]; then
    cat "$tmp/agent-run.err"; bad "agent run: did not start in its image"
  else
    ok "agent run: started in its image (health $addr)"
    local pid1; pid1="$(runc state "$id" 2>/dev/null | jq -r .pid)"
    local h; h="$(nsenter --net="/run/netns/$netns" curl -s -o /dev/null -w '%{http_code}' "http://$addr/healthz")"
    [[ "$h" == 200 ]] && ok "agent run: /healthz 200 from the container" || bad "agent run: /healthz answered '$h'"
    grep -q <<<"$(nsenter --net="/run/netns/$netns" curl -s "http://$addr/metrics")" '^lockstep_agent_info{' \
      && ok "agent run: /metrics has lockstep_agent_info" || bad "agent run: /metrics lacks lockstep_agent_info"
    [[ "$(cut -d' ' -f1 "/proc/$pid1/stat" 2>/dev/null)" == "$pid1" ]] \
      && grep -q '^CapEff:.*0000000000001000$' "/proc/$pid1/status" \
      && ok "agent run: the process has only CAP_NET_ADMIN" \
      || bad "agent run: capabilities $(grep CapEff "/proc/$pid1/status" 2>/dev/null)"
    # The NCCL plugin's endpoint on the mounted /run/lockstep (its default
    # --nccl-socket), a socket any uid may connect to.
    [[ -S "$tmp/agent-run-lockstep/nccl.sock" && "$(stat -c %a "$tmp/agent-run-lockstep/nccl.sock")" == 666 ]] \
      && ok "agent run: serves the NCCL plugin's socket on the mounted /run/lockstep (0666)" \
      || bad "agent run: no NCCL socket in /run/lockstep: $(ls -la "$tmp/agent-run-lockstep")"
    runc kill "$id" TERM
  fi
  local rc=0
  wait "$runc_pid" || rc=$?
  [[ -n "$addr" && $rc -eq 0 ]] && ok "agent run: SIGTERM to PID 1 stops it with exit 0" \
    || { [[ -z "$addr" ]] || bad "agent run: exit $rc after SIGTERM: $(tail -3 "$tmp/agent-run.err")"; }
}
agent_run

# The NCCL plugin ships in the agent image and the DaemonSet's init container
# (operator/src/agent_objects.cc: `install-nccl-plugin --to=/host-nccl`, root
# without capabilities, read-only root, the hostPath mounted) copies it out:
# the plugin is there, exports NCCL's tables, and the copy on the "host" is
# byte for byte the image's.
nccl_plugin_install() {
  local bundle="$tmp/lockstep-agent/bundle" id="lockstep-images-test-$$-nccl-install"
  local in_image="$bundle/rootfs/usr/local/lib/lockstep/libnccl-net-lockstep.so"
  [[ -f "$bundle/config.json.orig" ]] || { bad "nccl plugin: no unpacked agent bundle"; return; }
  if [[ -f "$in_image" ]]; then
    ok "nccl plugin: /usr/local/lib/lockstep/libnccl-net-lockstep.so is in the agent image ($(stat -c %s "$in_image") bytes)"
  else
    bad "nccl plugin: not in the agent image"; return
  fi
  local syms; syms="$(readelf --dyn-syms --wide "$in_image" | awk '$7 != "UND" && $5 == "GLOBAL" { print $8 }' | sort | tr '\n' ' ')"
  grep -q 'ncclNetPlugin_v10' <<<"$syms" && grep -q 'ncclNetPlugin_v8' <<<"$syms" \
    && ok "nccl plugin: exports $syms" || bad "nccl plugin: its exports are '$syms'"
  local args; args="$(grep -o '"install-nccl-plugin", std::string("--to=") + kNcclPluginMountDir' "$root/operator/src/agent_objects.cc")"
  local mount; mount="$(sed -n 's/^constexpr const char\* kNcclPluginMountDir = "\([^"]*\)";/\1/p' "$root/operator/src/agent_objects.cc")"
  [[ -n "$args" && -n "$mount" ]] || { bad "nccl plugin: no init container arguments in operator/src/agent_objects.cc"; return; }
  mkdir -p "$tmp/host-nccl"
  jq --arg host "$tmp/host-nccl" --arg mount "$mount" '
      .process.terminal = false
    | .process.args += ["install-nccl-plugin", "--to=" + $mount]
    | .process.capabilities = {bounding: [], effective: [], permitted: []}
    | .process.noNewPrivileges = true
    | .root.readonly = true
    | .mounts += [{destination: $mount, type: "bind", source: $host, options: ["rbind", "rw"]}]' \
    "$bundle/config.json.orig" >"$bundle/config.json"
  ids+=("$id")
  local outp rc=0
  outp="$(timeout 60 runc run --bundle "$bundle" "$id" 2>"$tmp/nccl-install.err")" || rc=$?
  if [[ $rc -eq 0 ]] && cmp -s "$in_image" "$tmp/host-nccl/libnccl-net-lockstep.so"; then
    ok "nccl plugin: the init container copies it to the host directory ($outp)"
  else
    cat "$tmp/nccl-install.err"; bad "nccl plugin: install-nccl-plugin exited $rc ('$outp'); host dir: $(ls -la "$tmp/host-nccl")"
  fi
  [[ "$(stat -c %a "$tmp/host-nccl/libnccl-net-lockstep.so" 2>/dev/null)" == 644 ]] \
    && ok "nccl plugin: mode 0644 on the host (training pods of any uid load it)" \
    || bad "nccl plugin: mode $(stat -c %a "$tmp/host-nccl/libnccl-net-lockstep.so" 2>/dev/null) on the host"
  [[ "$(ls -A "$tmp/host-nccl" | wc -l)" == 1 ]] && ok "nccl plugin: nothing else left in the host directory" \
    || bad "nccl plugin: host directory holds $(ls -A "$tmp/host-nccl" | tr '\n' ' ')"
}
nccl_plugin_install

# The coordinator really runs from its image, as the operator's coordinator Pod
# runs it: the Pod's `command` replaces the entrypoint and is looked up on the
# image's PATH, uid 65532 (the image's user: the Pod sets none), no
# capabilities, read-only root. Without --kube (no API server here) its state
# goes to a file on a writable mount, as a volume would hold it. It serves
# /healthz, /readyz and /metrics, writes the job's state, and SIGTERM stops it
# with exit 0.
coordinator_run() {
  local bundle="$tmp/lockstep-coordinator/bundle" id="lockstep-images-test-$$-coordinator-run"
  [[ -f "$bundle/config.json.orig" ]] || { bad "coordinator run: no unpacked bundle"; return; }
  local cmd
  cmd="$(grep -o '{"command", Json::array({"[^"]*"})}' "$root/operator/src/trainingjob_objects.cc" | cut -d'"' -f4)"
  [[ -n "$cmd" ]] || { bad "coordinator run: no coordinator Pod command in operator/src/trainingjob_objects.cc"; return; }
  coord_netns="lockstep-imgc-$$"
  ip netns add "$coord_netns" && ip -n "$coord_netns" link set lo up || { bad "coordinator run: cannot create netns $coord_netns"; return; }
  mkdir -p "$tmp/coord-state" && chown 65532:65532 "$tmp/coord-state"
  jq --arg cmd "$cmd" --arg state "$tmp/coord-state" --arg ns "/run/netns/$coord_netns" '
      .process.terminal = false
    | .process.args = [$cmd, "--job", "x", "--world-size", "1", "--listen", "127.0.0.1:0",
                       "--state-file", "/var/lib/lockstep/state.json"]
    | .process.capabilities = {bounding: [], effective: [], permitted: []}
    | .process.noNewPrivileges = true
    | .root.readonly = true
    | .mounts += [{destination: "/var/lib/lockstep", type: "bind", source: $state, options: ["rbind", "rw"]}]
    | .linux.namespaces |= map(if .type == "network" then . + {path: $ns} else . end)' \
    "$bundle/config.json.orig" >"$bundle/config.json"
  ids+=("$id")
  runc run --bundle "$bundle" "$id" >"$tmp/coord-run.out" 2>"$tmp/coord-run.err" &
  local runc_pid=$! url="" i
  for ((i = 0; i < 300; i++)); do  # until it logs the URL it serves (or exits)
    url="$(grep -o '"url":"[^"]*"' "$tmp/coord-run.out" "$tmp/coord-run.err" 2>/dev/null | head -1 | cut -d'"' -f4)"
    [[ -n "$url" ]] && break
    kill -0 "$runc_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [[ -z "$url" ]]; then
    cat "$tmp/coord-run.out" "$tmp/coord-run.err"; bad "coordinator run: '$cmd' did not start in its image"
  else
    ok "coordinator run: the Pod's command '$cmd' starts from the image's PATH ($url)"
    local pid1 p h; pid1="$(runc state "$id" 2>/dev/null | jq -r .pid)"
    for p in /healthz /readyz; do
      h="$(nsenter --net="/run/netns/$coord_netns" curl -s -o /dev/null -w '%{http_code}' "$url$p")"
      [[ "$h" == 200 ]] && ok "coordinator run: $p 200 from the container" || bad "coordinator run: $p answered '$h'"
    done
    grep -q <<<"$(nsenter --net="/run/netns/$coord_netns" curl -s "$url/metrics")" '^lockstep_migration_generation ' \
      && ok "coordinator run: /metrics has lockstep_migration_generation" || bad "coordinator run: /metrics lacks lockstep_migration_generation"
    grep -q '^Uid:[[:space:]]*65532[[:space:]]' "/proc/$pid1/status" && grep -q '^CapEff:[[:space:]]*0000000000000000$' "/proc/$pid1/status" \
      && ok "coordinator run: the process runs as uid 65532 with no capabilities" \
      || bad "coordinator run: $(grep -E '^(Uid|CapEff)' "/proc/$pid1/status" 2>/dev/null | tr -s '\n\t' '  ')"
    [[ "$(jq -r '.config.job // .job // empty' "$tmp/coord-state/state.json" 2>/dev/null)" == x ]] \
      && ok "coordinator run: job x's state written to the mounted state file" \
      || bad "coordinator run: no state of job x in the state file: $(head -c 200 "$tmp/coord-state/state.json" 2>&1)"
    runc kill "$id" TERM
  fi
  local rc=0
  wait "$runc_pid" || rc=$?
  [[ -n "$url" && $rc -eq 0 ]] && ok "coordinator run: SIGTERM to PID 1 stops it with exit 0" \
    || { [[ -z "$url" ]] || bad "coordinator run: exit $rc after SIGTERM: $(tail -3 "$tmp/coord-run.err")"; }
}
coordinator_run

# The chart runs the operator as the image's non-root user.
if grep -qE '^ +runAsUser: 65532$' "$root/charts/lockstep/templates/deployment.yaml"; then
  ok "chart's operator runAsUser 65532 = the operator image's user"
else
  bad "chart's operator runAsUser is not the image's user 65532"
fi

# 2. Cache: same inputs -> "cache hit", archives untouched; --force -> same digests.
sums_before="$(sha256sum "$out"/*.oci.tar)"
if "$root/images/build" --build-dir "$build_dir" --out "$out" >/dev/null 2>"$tmp/build2.err"; then
  hits="$(grep -c 'cache hit' "$tmp/build2.err")"
  [[ "$hits" == 3 ]] && ok "second images/build: cache hit for all three images" || { cat "$tmp/build2.err"; bad "second images/build: $hits cache hits, expected 3"; }
  [[ "$(sha256sum "$out"/*.oci.tar)" == "$sums_before" ]] && ok "cache hit leaves the archives unchanged" \
    || bad "the archives changed on a cache hit"
else
  cat "$tmp/build2.err"; bad "second images/build failed"
fi
digests_before="$(jq -r '.[].manifest' "$out/images.json")"
if "$root/images/build" --build-dir "$build_dir" --out "$out" --force >/dev/null 2>"$tmp/build3.err"; then
  grep -q 'cache hit' "$tmp/build3.err" && bad "--force still hit the cache"
  [[ "$(jq -r '.[].manifest' "$out/images.json")" == "$digests_before" ]] \
    && ok "--force rebuilds identical manifests (reproducible archives)" \
    || bad "--force built different manifests: $(jq -r '.[].manifest' "$out/images.json" | tr '\n' ' ') vs $(echo $digests_before)"
else
  cat "$tmp/build3.err"; bad "images/build --force failed"
fi

# 3. Bad input: a clear message, nothing built.
if msg="$("$root/images/build" --build-dir "$build_dir" --out "$out" --tag 'bad tag' 2>&1)"; then
  bad "images/build accepted the tag 'bad tag'"
else
  grep -q "not a valid image tag" <<<"$msg" && ok "a bad tag is rejected with a message" || bad "bad tag: unclear message: $msg"
fi

jq -c '.[] | {name, archive_bytes, rootfs_tar_bytes}' "$out/images.json"
summary
