#!/usr/bin/env bash
# The operator's web page (issue 26 §4) in headless Chromium (Debian's
# chromium) against the cluster, served by a second operator replica on
# standby (--web-addr: every replica serves the page from its own caches):
#   - three lockstep-agents stand in for gpu-node-0..2 (as in e2e.fleet-audit,
#     on audit trees holding only a front end with a default route, missing on
#     gpu-node-1) and
#     FleetAudit e2e-web-audit audits them (gpu-node-1 fails);
#   - gpu-node-3 and gpu-node-4 get rail conditions as an agent with two fabric
#     rails writes them (Rail-rail0/Rail-rail1; real fabric rails need netlab
#     and root: e2e.fabric-kube), and gpu-node-3's rail1 goes down and back up
#     while the page's replica watches (the flap timeline's recorded transition);
#   - TrainingJob web-e2e/demo (2 ranks, 1 spare) runs on kwok, and two
#     migrations are reported in its status as its coordinator writes them.
# The agents are then stopped (statuses stay as they are) and the page is
# loaded with `chromium --headless --dump-dom` (and --screenshot): its DOM must
# match the objects kubectl reads: every FabricHealth's row, phase and rail
# states, the rails-up total, each clock error bound, gpu-node-3's rail1 down
# and up in the flap timeline, the audit and each node's verdict, the job and
# each rank's pod and node, both migrations. The probe key appears neither in the page nor in
# api/view; methods other than GET get 405. Screenshots stay in
# STATE/web-page/ (page.png, page-narrow.png) with the DOM (page.html).
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || fail "needs jq"
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[[ -n $CHROMIUM ]] || fail "needs chromium (scripts/setup installs Debian's chromium)"
AGENT=$(find_bin LOCKSTEP_AGENT daemonset/lockstep-agent)
NODES=(gpu-node-0 gpu-node-1 gpu-node-2)
RAIL_NODES=(gpu-node-3 gpu-node-4)
TJ=web-e2e
OUT=$STATE/web-page
rm -rf "$OUT" && mkdir -p "$OUT"
PIDS=()

agent_owned() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF "$OUT/"; }
stop_agents() {
  for pid in "${PIDS[@]}"; do
    if agent_owned "$pid"; then
      kill -TERM "$pid" 2>/dev/null || true
      wait_for "agent $pid to exit" 15 bash -c "! kill -0 $pid"
    fi
  done
  PIDS=()
}
cleanup() {
  stop_agents
  # Keep the artefacts (page.html, the screenshots, view.json, cluster.json), not the
  # key, the tokens or the browser profile.
  rm -rf "$OUT/probe-key" "$OUT"/gpu-node-*/token "$OUT/chromium-profile"
  if [[ -f $CLUSTER/pids/operator-web.pid ]]; then stop_operator web TERM; fi
  kubectl delete fleetaudit e2e-web-audit --wait=true >/dev/null 2>&1 || true
  kubectl delete namespace $TJ --wait=true --timeout=60s >/dev/null 2>&1 || true
  kubectl label nodes "${NODES[@]}" lockstep.dev/web-e2e- >/dev/null 2>&1 || true
  kubectl delete fabrichealth "${NODES[@]}" "${RAIL_NODES[@]}" --wait=true >/dev/null 2>&1 || true
  wait_for "the operator to recreate the FabricHealths" 60 healths_match_gpu_nodes
}
trap cleanup EXIT

# The chart (installed by setup.sh) exposes the page only through a ClusterIP Service.
svc=$(kubectl -n $NS get service lockstep-web -o json)
[[ $(jq -r .spec.type <<<"$svc") == ClusterIP && $(jq -r '.spec.ports[0].targetPort' <<<"$svc") == web ]] ||
  fail "Service lockstep-web: $(jq -c .spec <<<"$svc")"
kubectl -n $NS get deployment lockstep-operator -o json |
  jq -e '.spec.template.spec.containers[0] | (.args | index("--web-addr=:8082")) and
    (.ports | any(.name == "web" and .containerPort == 8082))' >/dev/null ||
  fail "the operator Deployment does not serve the page on port web (8082)"
pass "the chart: Service lockstep-web (ClusterIP) -> container port web 8082, --web-addr=:8082"

operator_alive a || start_operator a
a_leads() { [[ $(lease_holder) == a ]]; }
wait_for "operator a to hold the lease" 30 a_leads
start_operator web --web-addr=127.0.0.1:0
wait_for "the web page served" 10 grep -q '"msg":"serving the web page"' "$STATE/operator-web.log"
PORT=$(grep -m1 '"msg":"serving the web page"' "$STATE/operator-web.log" | sed -E 's/.*"port":"([0-9]+)".*/\1/')
URL=http://127.0.0.1:$PORT
wait_for "a FabricHealth per GPU node" 60 healths_match_gpu_nodes

# --- agents, rails, a job, an audit ---
policy=$(kubectl get fabrichealth gpu-node-0 -o jsonpath='{.metadata.labels.lockstep\.dev/policy}')
kubectl -n $NS get configmap "lockstep-agent-$policy" -o jsonpath='{.data.agent\.yaml}' >"$OUT/agent.yaml"
(umask 077 && kubectl -n $NS get secret lockstep-probe-key -o jsonpath='{.data.key}' | base64 -d >"$OUT/probe-key")
for node in "${NODES[@]}"; do
  mkdir -p "$OUT/$node/root/proc/net"
  # A default route on all but gpu-node-1: its audit fails frontend.default_route.
  if [[ $node != gpu-node-1 ]]; then
    printf 'Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n' \
      >"$OUT/$node/root/proc/net/route"
    printf 'eth0\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n' >>"$OUT/$node/root/proc/net/route"
    printf 'eth0\t0001A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n' >>"$OUT/$node/root/proc/net/route"
    mkdir -p "$OUT/$node/root/sys/class/net/eth0"
    echo up >"$OUT/$node/root/sys/class/net/eth0/operstate"
    echo 1500 >"$OUT/$node/root/sys/class/net/eth0/mtu"
  fi
  kubectl -n $NS create token lockstep-agent --duration=1h --bound-object-kind=Node --bound-object-name="$node" \
    >"$OUT/$node/token"
  LOCKSTEP_AUDIT_ROOT=$OUT/$node/root LOCKSTEP_NVML_LIBRARY=$OUT/no-nvml.so setsid "$AGENT" \
    --config "$OUT/agent.yaml" --node-name "$node" --server "$LOCKSTEP_APISERVER" --token-file "$OUT/$node/token" \
    --certificate-authority "$LOCKSTEP_CA_CERT" --bind-address 127.0.0.1 --probe-port 0 \
    --health-addr 127.0.0.1:0 --time-api-addr 127.0.0.1:0 --probe-key-file "$OUT/probe-key" \
    --node-address-fallback=false --report-interval 2 >"$OUT/$node/agent.log" 2>&1 </dev/null &
  PIDS+=($!)
done

# rails NODE PHASE UP RAIL0 RAIL1 TIME: the status an agent with rails rail0 and rail1 writes
# (RAILn is "True RailUp" or "False RailDown").
rails() {
  local node=$1 phase=$2 up=$3 t=$6 r0 r1
  read -r -a r0 <<<"$4"
  read -r -a r1 <<<"$5"
  kubectl patch fabrichealth "$node" --subresource=status --type=merge -p "$(jq -nc \
    --arg phase "$phase" --argjson up "$up" --arg t "$t" --arg node "$node" \
    --arg s0 "${r0[0]}" --arg why0 "${r0[1]}" --arg s1 "${r1[0]}" --arg why1 "${r1[1]}" '{status: {
      phase: $phase, nodeName: $node, lastReportTime: $t, railsUp: $up, railsTotal: 2, flapsLastHour: 1,
      conditions: [
        {type: "Ready", status: (if $phase == "Healthy" then "True" else "False" end), reason: $phase,
         message: "e2e.web-page", lastTransitionTime: $t},
        {type: "Rail-rail0", status: $s0, reason: $why0, message: "rail0 \($why0)", lastTransitionTime: $t},
        {type: "Rail-rail1", status: $s1, reason: $why1, message: "rail1 \($why1)", lastTransitionTime: $t}]}}')" \
    >/dev/null
}
t0=$(date -u -d '-2 min' +%Y-%m-%dT%H:%M:%SZ)
t1=$(date -u -d '-1 min' +%Y-%m-%dT%H:%M:%SZ)
t2=$(date -u +%Y-%m-%dT%H:%M:%SZ)
rails gpu-node-4 Degraded 1 "True RailUp" "False RailDown" "$t0"
rails gpu-node-3 Healthy 2 "True RailUp" "True RailUp" "$t0"
seen() { curl -fsS "$URL/api/view" | jq -e "$1" >/dev/null; }
wait_for "the page's replica to see gpu-node-3's rails" 30 \
  seen '.nodes[] | select(.name == "gpu-node-3") | .rails | length == 2'
rails gpu-node-3 Degraded 1 "True RailUp" "False RailDown" "$t1"
wait_for "the page's replica to see gpu-node-3's rail1 down" 30 \
  seen '.nodes[] | select(.name == "gpu-node-3") | .rails[1].state == "down"'
rails gpu-node-3 Healthy 2 "True RailUp" "True RailUp" "$t2"

ns_gone() { ! kubectl get namespace $TJ >/dev/null 2>&1; }
wait_for "namespace $TJ of an earlier run to be gone" 60 ns_gone
kubectl create namespace $TJ >/dev/null
kubectl apply -f - >/dev/null <<YAML
apiVersion: lockstep.dev/v1alpha1
kind: TrainingJob
metadata: {name: demo, namespace: $TJ}
spec:
  replicas: 2
  spares: 1
  template:
    spec:
      nodeSelector: {nvidia.com/gpu.present: "true"}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers: [{name: train, image: trainer:e2e}]
YAML

for node in "${NODES[@]}"; do
  wait_for "agent start on $node" 20 grep -q '"msg":"lockstep-agent started"' "$OUT/$node/agent.log"
done
kubectl label nodes "${NODES[@]}" lockstep.dev/web-e2e=yes --overwrite >/dev/null
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: lockstep.dev/v1alpha1
kind: FleetAudit
metadata: {name: e2e-web-audit}
spec:
  nodeSelector: {lockstep.dev/web-e2e: "yes"}
  timeoutSeconds: 60
YAML
fa_done() { [[ $(kubectl get fleetaudit e2e-web-audit -o jsonpath='{.status.phase}') == Completed ]]; }
wait_for "FleetAudit e2e-web-audit Completed" 90 fa_done
tj_ready() { [[ $(kubectl -n $TJ get trainingjob demo -o jsonpath='{.status.readyReplicas}') == 2 ]]; }
wait_for "TrainingJob demo with 2 ready ranks" 60 tj_ready
# Two migrations as the job's coordinator reports them (a merge patch of migrations and
# lastMigration; the coordinator pod does not run on kwok): the page's replica records
# the first, the status holds the second.
migrated() { # migrated N RANK FROM TO REASON
  local t; t=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  kubectl -n $TJ patch trainingjob demo --subresource=status --type=merge -p "$(jq -nc --argjson n "$1" \
    --argjson rank "$2" --arg from "$3" --arg to "$4" --arg why "$5" --arg t "$t" '{status: {migrations: $n,
      lastMigration: {rank: $rank, fromPod: $from, toPod: $to, reason: $why, startTime: $t, completeTime: $t,
                      durationMs: 2100}}}')" >/dev/null
}
migrated 1 0 demo-rank-0 demo-spare-0 PodFailed
wait_for "the page's replica to see the first migration" 30 seen '.jobs[0].migrationHistory | length == 1'
migrated 2 1 demo-rank-1 demo-spare-1 NodeDrain

# Freeze the agents' statuses: what kubectl reads next is what the page must show.
stop_agents

# --- the page ---
chromium() {
  "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --no-default-browser-check --disable-background-networking --disable-component-update --disable-sync \
    --disable-extensions --disable-default-apps --user-data-dir="$OUT/chromium-profile" \
    --virtual-time-budget=10000 "$@" 2>>"$OUT/chromium.log"
}
{
  kubectl get fabrichealth -o json
  kubectl get fleetaudit e2e-web-audit -o json
  kubectl get nodeaudits -l lockstep.dev/fleet-audit=e2e-web-audit -o json
  kubectl -n $TJ get trainingjob demo -o json
  kubectl -n $TJ get pods -l lockstep.dev/job=demo -o json
} | jq -s '{healths: .[0].items, audit: .[1], nodeAudits: .[2].items, job: .[3], pods: .[4].items}' \
  >"$OUT/cluster.json"
key_b64=$(base64 -w0 <"$OUT/probe-key")

check_page() {
  chromium --dump-dom "$URL/?refresh=0" >"$OUT/page.html"
  curl -fsS "$URL/api/view" >"$OUT/view.json"
  python3 - "$OUT/page.html" "$OUT/cluster.json" "$key_b64" "$OUT/view.json" <<'PY'
import html.parser, json, sys
page, cluster, key, view = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3], open(sys.argv[4]).read()
text = open(page).read()

class Dom(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(); self.els = []; self.stack = []
    def handle_starttag(self, tag, attrs):
        e = {"tag": tag, "attrs": dict(attrs), "text": "", "parents": list(self.stack)}
        self.els.append(e)
        if tag not in ("meta", "link", "br", "img", "input"): self.stack.append(e)
    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()["tag"] == tag: break
    def handle_data(self, data):
        for e in self.stack: e["text"] += data
dom = Dom(); dom.feed(text)
errors = []
def find(**want):
    return [e for e in dom.els if all(e["attrs"].get(k.replace("_", "-")) == v for k, v in want.items())]
def expect(ok, what):
    if not ok: errors.append(what)

body = [e for e in dom.els if e["tag"] == "body"]
expect(body and body[0]["attrs"].get("data-state") == "ready", "body data-state is not ready")
state = {"True": {"PathsDown": "degraded"}, "False": {}}
up = total = 0
for h in cluster["healths"]:
    name, s = h["metadata"]["name"], h.get("status", {})
    rows = find(data_node=name)
    rows = [r for r in rows if r["tag"] == "tr" and any(p["attrs"].get("id") == "fleet-table" for p in r["parents"])]
    expect(len(rows) == 1, f"no fleet row for {name}")
    if not rows: continue
    expect(rows[0]["attrs"].get("data-phase") == s.get("phase", ""), f"{name}: phase {rows[0]['attrs'].get('data-phase')} != {s.get('phase')}")
    up += s.get("railsUp", 0); total += s.get("railsTotal", 0)
    for c in s.get("conditions", []):
        if not c["type"].startswith("Rail-"): continue
        rail = c["type"][5:]
        want = "up" if c["status"] == "True" and c.get("reason") != "PathsDown" else "degraded" if c["status"] == "True" else "down" if c["status"] == "False" else "unknown"
        cells = [e for e in dom.els if e["tag"] == "td" and e["attrs"].get("data-rail") == rail and rows[0] in e["parents"]]
        expect(len(cells) == 1 and cells[0]["attrs"].get("data-state") == want, f"{name} {rail}: want {want}, page {[x['attrs'] for x in cells]}")
    bound = s.get("clock", {}).get("errorBoundNs")
    if bound is not None:
        expect(find(data_clock_node=name, data_bound_ns=str(bound)), f"{name}: clock bound {bound} not shown")
rails_card = find(id="summary-rails")
expect(rails_card and rails_card[0]["text"].endswith(f"{up} / {total}"), f"rails up card {rails_card and rails_card[0]['text']!r}, want {up} / {total}")
expect(total >= 4, f"only {total} rails in the cluster")
flaps = {e["attrs"].get("data-state") for e in find(data_flap_node="gpu-node-3", data_flap_rail="rail1")}
expect({"down", "up"} <= flaps, f"gpu-node-3 rail1 flap timeline shows {flaps}, want down and up")

a = cluster["audit"]
expect(find(data_audit=a["metadata"]["name"], data_phase=a["status"]["phase"]), "the FleetAudit is not shown Completed")
expect(len(cluster["nodeAudits"]) == 3, f"{len(cluster['nodeAudits'])} NodeAudits")
verdicts = {}
for na in cluster["nodeAudits"]:
    node, verdict = na["spec"]["nodeName"], na.get("status", {}).get("verdict", "")
    verdicts[node] = verdict
    expect(find(data_node_audit=node, data_verdict=verdict), f"node audit {node}: verdict {verdict} not shown")
for na in cluster["nodeAudits"]:
    for c in na.get("status", {}).get("checks", []):
        if c.get("verdict") == "Fail":
            expect(find(data_check=c["id"], data_verdict="Fail"), f"failed check {c['id']} of {na['spec']['nodeName']} not shown")
expect(set(verdicts.values()) == {"Pass", "Fail"}, f"verdicts {verdicts}: want a Pass and a Fail to tell apart")

j = cluster["job"]
jobs = find(data_job=f"{j['metadata']['namespace']}/{j['metadata']['name']}")
expect(jobs and jobs[0]["attrs"].get("data-phase") == j["status"].get("phase"), f"job row {jobs and jobs[0]['attrs']} vs phase {j['status'].get('phase')}")
ranks = 0
for p in cluster["pods"]:
    labels = p["metadata"]["labels"]
    if labels.get("lockstep.dev/role") == "rank":
        ranks += 1
        expect(find(data_rank=labels["lockstep.dev/rank"], data_pod=p["metadata"]["name"], data_node=p["spec"].get("nodeName", "")),
               f"rank pod {p['metadata']['name']} on {p['spec'].get('nodeName')} not shown")
    elif labels.get("lockstep.dev/role") == "spare":
        expect(find(data_spare=p["metadata"]["name"]), f"spare pod {p['metadata']['name']} not shown")
expect(ranks == 2, f"{ranks} rank pods")
moved = sorted(e["attrs"].get("data-migration-rank") for e in dom.els if e["tag"] == "tr" and "data-migration-rank" in e["attrs"])
expect(j["status"].get("migrations") == 2 and moved == ["0", "1"], f"migrations {j['status'].get('migrations')}, page rows for ranks {moved}, want 0 and 1")
expect(key not in text and key not in view, "the probe key is on the page")
print(f"nodes {len(cluster['healths'])}, rails {up}/{total}, audit verdicts {verdicts}, ranks {ranks}")
for e in errors: print("MISMATCH:", e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY
}
tries=0
until summary=$(check_page 2>"$OUT/check.err"); do
  ((++tries < 3)) || { cat "$OUT/check.err" >&2; fail "the page does not match the cluster (STATE/web-page/page.html)"; }
  sleep 1
done
pass "the page matches the cluster: $summary; gpu-node-3's rail1 down and up in the flap timeline"

# The whole page in one tall window (every section), and a narrow one.
chromium --window-size=1400,2200 --screenshot="$OUT/page.png" "$URL/?refresh=0" >/dev/null
chromium --window-size=900,1600 --screenshot="$OUT/page-narrow.png" "$URL/?refresh=0" >/dev/null
for png in page.png page-narrow.png; do
  [[ $(head -c 8 "$OUT/$png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "$png is not a PNG"
  (($(stat -c %s "$OUT/$png") > 20000)) || fail "$png is nearly empty"
done
pass "screenshots: $OUT/page.png ($(stat -c %s "$OUT/page.png") bytes), $OUT/page-narrow.png"

# The audit tree's drill-down: every check of a node, as its NodeAudit holds them.
for na in $(jq -r '.nodeAudits[].metadata.name' "$OUT/cluster.json"); do
  want=$(jq --arg n "$na" '.nodeAudits[] | select(.metadata.name == $n) | .status.checks | length' "$OUT/cluster.json")
  got=$(curl -fsS "$URL/api/nodeaudit?name=$na" | jq '[.areas[].checks[]] | length')
  [[ $got == "$want" && $want -gt 0 ]] || fail "api/nodeaudit?name=$na: $got checks, the NodeAudit holds $want"
done
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/api/nodeaudit?name=e2e-web-audit.no-such-node")
[[ $code == 404 ]] || fail "api/nodeaudit of a missing NodeAudit answered $code, want 404"
pass "drill-down: api/nodeaudit gives every check of each NodeAudit; a missing one 404"

for m in POST PUT DELETE; do
  code=$(curl -s -o /dev/null -w '%{http_code}' -X $m "$URL/api/view")
  [[ $code == 405 ]] || fail "$m /api/view answered $code, want 405"
done
pass "read-only: POST, PUT and DELETE get 405"
