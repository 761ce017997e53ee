# shellcheck shell=bash
# Shared helpers for e2e/cluster/{up,down,add-nodes,restart-apiserver}. Sourced, not run.

cluster_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cluster_repo=$(cd "$cluster_here/../.." && pwd)

log() { echo "[cluster $(date +%H:%M:%S)] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Directory holding the cached binaries (builds them on first use).
# LOCKSTEP_K8S_BIN overrides (must contain all binaries).
cluster_bin_dir() {
	if [[ -n "${LOCKSTEP_K8S_BIN:-}" ]]; then echo "$LOCKSTEP_K8S_BIN"; return; fi
	"$cluster_repo/scripts/install-k8s-tools" | tail -n1
}

# ---- ports ----------------------------------------------------------------------
# Ports are picked at random in [20000, 32767] (below Linux's ephemeral range, so an
# outgoing connection cannot grab a port between its choice and its bind), skipping
# every port present in /proc/net/tcp{,6} in any state and every port claimed by
# another live cluster in the registry ${TMPDIR:-/tmp}/lockstep-ports/<port>.
# Allocation runs under a global flock, so concurrent `up`s never pick the same port.
port_registry() { echo "${TMPDIR:-/tmp}/lockstep-ports"; }

# Both read /proc/net/tcp* with awk: bash's `read` on a /proc seq file re-reads it for
# every line (seek back after each buffered read), which took 85 s with 4000 sockets.
# port(ADDR): the decimal port of a hex "ADDR:PORT" (mawk has no strtonum).
awk_port='function port(a,   h, i, n) { sub(/.*:/, "", a); n = 0
	for (i = 1; i <= length(a); i++) n = n * 16 + index("0123456789ABCDEF", toupper(substr(a, i, 1))) - 1
	return n }'
used_ports() {
	local f
	for f in /proc/net/tcp /proc/net/tcp6; do
		[[ -r $f ]] && awk "$awk_port"' $1 != "sl" { print port($2) }' "$f"
	done | sort -un
}

# Ports in LISTEN state (st == 0A).
listen_ports() {
	local f
	for f in /proc/net/tcp /proc/net/tcp6; do
		[[ -r $f ]] && awk "$awk_port"' $4 == "0A" { print port($2) }' "$f"
	done | sort -un
}

# port_listening PORT (no pipe into grep -q: with pipefail, SIGPIPE would make it fail)
port_listening() {
	local l
	l=$(listen_ports)
	[[ $'\n'$l$'\n' == *$'\n'"$1"$'\n'* ]]
}

# cluster_alive DIR: does DIR still own a live process (or a running `up`)?
cluster_alive() {
	local dir=$1 f pid
	[[ -d $dir ]] || return 1
	for f in "$dir"/pids/*.pid "$dir"/state/up.pid; do
		[[ -f $f ]] || continue
		pid=$(cat "$f" 2>/dev/null) || continue
		[[ -n $pid ]] && proc_alive "$pid" && return 0
	done
	return 1
}

# alloc_ports DIR N: prints N free ports, one per line, and claims them for DIR.
alloc_ports() {
	local dir=$1 n=$2 reg used p owner got=0 tries=0
	reg=$(port_registry)
	mkdir -p "$reg"
	(
		flock 8
		used=" $(used_ports | tr '\n' ' ') "
		while (( got < n )); do
			(( ++tries < 5000 )) || { echo "no free port found" >&2; exit 1; }
			p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 12768 ))
			[[ $used == *" $p "* ]] && continue
			if [[ -f $reg/$p ]]; then
				owner=$(cat "$reg/$p" 2>/dev/null || true)
				if [[ $owner != "$dir" ]] && cluster_alive "$owner"; then continue; fi
			fi
			echo "$dir" >"$reg/$p"
			used+="$p "
			echo "$p"
			got=$((got + 1))
		done
	) 8>"$reg/.lock"
}

release_ports() {
	local dir=$1 reg f
	reg=$(port_registry)
	[[ -d $reg ]] || return 0
	for f in "$reg"/[0-9]*; do
		[[ -f $f && "$(cat "$f" 2>/dev/null)" == "$dir" ]] && rm -f "$f"
	done
	return 0
}

# ---- processes --------------------------------------------------------------------
# start_proc DIR NAME CMD...: runs CMD in its own session/process group, logs to
# DIR/logs/NAME.log, records the pid (== pgid) in DIR/pids/NAME.pid and the command
# line in DIR/cmd/NAME (for restarts).
start_proc() {
	local dir=$1 name=$2; shift 2
	mkdir -p "$dir/logs" "$dir/pids" "$dir/cmd"
	printf '%q ' "$@" >"$dir/cmd/$name"
	setsid "$@" </dev/null >>"$dir/logs/$name.log" 2>&1 &
	echo $! >"$dir/pids/$name.pid"
}

# restart_proc DIR NAME: re-run the recorded command line.
restart_proc() {
	local dir=$1 name=$2 cmd
	cmd=$(cat "$dir/cmd/$name")
	echo "---- restart $(date -u +%FT%TZ) ----" >>"$dir/logs/$name.log"
	eval "setsid $cmd </dev/null >>\"\$dir/logs/\$name.log\" 2>&1 &"
	echo $! >"$dir/pids/$name.pid"
}

# proc_owned DIR PID: PID is alive and its command line mentions DIR (guards
# against pid reuse).
proc_owned() {
	local dir=$1 pid=$2
	[[ -r /proc/$pid/cmdline ]] || return 1
	local args
	args=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
	[[ $args == *"$dir"* ]]
}

# group_pids PGID: live (non-zombie) pids in that process group.
group_pids() {
	ps -e -o pid=,pgid=,stat= 2>/dev/null | awk -v g="$1" '$2 == g && $3 !~ /^Z/ { print $1 }'
}

# proc_alive PID: exists and is not a zombie (a zombie still answers kill -0).
proc_alive() {
	local st
	st=$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n $st && $st != Z ]]
}

# stop_proc DIR NAME [GRACE_SECONDS]: TERM the process group, KILL after grace.
stop_proc() {
	local dir=$1 name=$2 grace=${3:-10} pidf pid
	pidf="$dir/pids/$name.pid"
	[[ -f $pidf ]] || return 0
	pid=$(cat "$pidf")
	[[ -n $pid ]] || { rm -f "$pidf"; return 0; }
	gone() { [[ -z "$(group_pids "$pid")" ]] && ! proc_alive "$pid"; }
	# Signal only what is still ours: the recorded group, or the pid if its command
	# line still names DIR (guards against pid reuse).
	if [[ -n "$(group_pids "$pid")" ]] || proc_owned "$dir" "$pid"; then
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
		local deadline=$((SECONDS + grace))
		while ((SECONDS < deadline)); do
			gone && break
			sleep 0.05
		done
		if ! gone; then
			log "$name did not stop within ${grace}s; sending KILL"
			kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
			deadline=$((SECONDS + 5))
			while ((SECONDS < deadline)); do
				gone && break
				sleep 0.05
			done
		fi
	fi
	if ! gone; then
		log "WARNING: $name (pgid $pid) still has processes: $(group_pids "$pid" | tr '\n' ' ')"
		return 1
	fi
	rm -f "$pidf"
}

proc_running() {
	local dir=$1 name=$2 pid
	pid=$(cat "$dir/pids/$name.pid" 2>/dev/null) || return 1
	proc_alive "$pid"
}

# kubectl against the cluster in DIR.
kc() { "$BIN/kubectl" --kubeconfig "$DIR/kubeconfig" "$@"; }

# wait_apiserver DIR TIMEOUT: poll /readyz.
wait_apiserver() {
	local dir=$1 timeout=${2:-120} t0=$SECONDS
	while (( SECONDS - t0 < timeout )); do
		if "$BIN/kubectl" --kubeconfig "$dir/kubeconfig" --request-timeout=5s get --raw=/readyz >/dev/null 2>&1; then
			return 0
		fi
		proc_running "$dir" kube-apiserver || {
			log "kube-apiserver exited; last log lines:"; tail -n 30 "$dir/logs/kube-apiserver.log" >&2; return 1; }
		sleep 0.3
	done
	log "kube-apiserver not ready after ${timeout}s"; tail -n 30 "$dir/logs/kube-apiserver.log" >&2
	return 1
}

# ---- nodes --------------------------------------------------------------------------
# nodes_yaml_chunks OUTDIR CHUNKS IDX0 PREFIX START COUNT GPUS IP0: writes COUNT
# kwok-managed fake Nodes PREFIX-START.. round-robin into OUTDIR/chunk-<k>.yaml
# (continuing the round robin at overall index IDX0), in one awk process.
# GPUS > 0: GPU node (label nvidia.com/gpu.present=true, taint
# nvidia.com/gpu=present:NoSchedule, nvidia.com/gpu capacity); GPUS = 0: CPU-only node.
# Node number IP0+j gets InternalIP 10.254.<n/250>.<n%250+1>: a label only (kwok keeps
# the addresses it is given); nothing ever sends traffic to it.
nodes_yaml_chunks() {
	local out=$1 chunks=$2 idx0=$3 prefix=$4 start=$5 count=$6 gpus=$7 ip0=$8
	awk -v out="$out" -v chunks="$chunks" -v idx0="$idx0" -v prefix="$prefix" \
		-v start="$start" -v count="$count" -v gpus="$gpus" -v ip0="$ip0" 'BEGIN {
		for (j = 0; j < count; j++) {
			name = prefix "-" (start + j); n = ip0 + j
			ip = "10.254." int(n / 250) "." (n % 250 + 1)
			f = out "/chunk-" ((idx0 + j) % chunks) ".yaml"
			printf "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n", name >> f
			printf "  annotations:\n    kwok.x-k8s.io/node: fake\n    node.alpha.kubernetes.io/ttl: \"0\"\n" >> f
			printf "  labels:\n    type: kwok\n    kubernetes.io/hostname: %s\n", name >> f
			printf "    kubernetes.io/os: linux\n    kubernetes.io/arch: amd64\n" >> f
			if (gpus > 0) {
				printf "    nvidia.com/gpu.present: \"true\"\n    nvidia.com/gpu.count: \"%d\"\n", gpus >> f
				printf "spec:\n  taints:\n  - key: nvidia.com/gpu\n    value: present\n    effect: NoSchedule\n" >> f
				res = sprintf("{cpu: \"96\", memory: 1024Gi, pods: \"110\", ephemeral-storage: 2Ti, nvidia.com/gpu: \"%d\"}", gpus)
			} else {
				printf "spec: {}\n" >> f
				res = "{cpu: \"32\", memory: 128Gi, pods: \"110\", ephemeral-storage: 500Gi}"
			}
			printf "status:\n  capacity: %s\n  allocatable: %s\n", res, res >> f
			printf "  addresses:\n  - {type: InternalIP, address: %s}\n  - {type: Hostname, address: %s}\n", ip, name >> f
		}
	}'
}

# next_node_ips DIR COUNT: prints the first index of COUNT consecutive node addresses
# reserved in DIR (so every node of a cluster gets its own InternalIP).
next_node_ips() {
	local dir=$1 count=$2 first
	(
		flock 7
		first=$(cat "$dir/state/node-ip-next" 2>/dev/null || echo 0)
		echo $((first + count)) >"$dir/state/node-ip-next"
		echo "$first"
	) 7>"$dir/state/node-ip.lock"
}

# ---- Lockstep on real nodes (scripts/demo and e2e/tests/test-real-nodes.sh) ------------
# chart_app_version: the chart's appVersion, the tag images/build gives the images.
chart_app_version() {
	sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$cluster_repo/charts/lockstep/Chart.yaml"
}

# local_image_archives BUILD_DIR OUT_DIR LOG: images/build from BUILD_DIR's binaries into
# OUT_DIR (cached: seconds when nothing changed; its output goes to LOG); prints the agent's,
# the operator's and then the coordinator's OCI archive (the operator's per-TrainingJob
# coordinator Pod), one per line, for `up --real-node-image`. Root only.
local_image_archives() {
	local build=$1 out=$2 logf=$3 v a o c
	"$cluster_repo/images/build" --build-dir "$build" --out "$out" >"$logf" 2>&1 ||
		{ log "images/build failed (log: $logf):"; tail -n 5 "$logf" >&2; return 1; }
	v=$(chart_app_version)
	a=$out/lockstep-agent-$v.oci.tar o=$out/lockstep-operator-$v.oci.tar c=$out/lockstep-coordinator-$v.oci.tar
	[[ -f $a && -f $o && -f $c ]] || { log "images/build wrote no $a / $o / $c (log: $logf)"; return 1; }
	printf '%s\n%s\n%s\n' "$a" "$o" "$c"
}

# helm_local_image_args: `helm install` flags for images imported into the real nodes'
# containerd (never pulled) with the operator on a real node (label type=real; a kwok
# node runs nothing). The agent DaemonSet goes to every GPU node, kwok ones included.
helm_local_image_args() {
	echo --set operator.nodeSelector.type=real --set operator.image.pullPolicy=Never --set agent.image.pullPolicy=Never
}

# locked_fabrichealths KUBECTL...: names of the FabricHealths whose clock is LOCKED,
# sorted, space-separated (KUBECTL: the kubectl command line to use).
locked_fabrichealths() {
	"$@" get fabrichealth -o json |
		jq -r '[.items[] | select(.status.clock.state == "LOCKED") | .metadata.name] | sort | join(" ")'
}
