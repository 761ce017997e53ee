#!/usr/bin/env bash
# Fabric failover, standalone agents (no Kubernetes; needs root for network
# namespaces): a netlab lab of 3 hosts x 2 rails (rail-optimized: rail r of
# every host on leaf r), one lockstep-agent per host namespace with agent.yaml
# fabric.rails and each peer's hostAddress. Asserts behaviour, never durations (every wait is a
# generous upper bound):
#  1. every path comes up and every host pins each peer to the pair's home
#     rail (ip -j route show proto 211), the same rail from both ends;
#  2. h1's link on the rail that is home to {h0, h1} dies silently (netlab
#     link h1r<R> down --silent): every pair with h1 is pinned onto the other
#     rail from both ends, the {h0, h2} pair stays home, and ping and a TCP
#     transfer between host addresses work;
#  3. an agent restarted during the failover keeps its pin (adopted);
#  4. the link comes back: after the clean period every pair is back on its
#     home rail (the repaired rail is reused); the flap is counted in the
#     metrics.
# The lab and the agents are always torn down. $NETLAB: the netlab binary,
# $LOCKSTEP_AGENT: the agent (else those of $LOCKSTEP_BUILD_DIR, build/dev
# or build/ci). The state dir ($1) holds the configs and logs.
. "$(dirname "$0")/lib.sh"
[[ $(id -u) -eq 0 ]] || fail "needs root (network namespaces)"
command -v jq >/dev/null || fail "needs jq"
NETLAB=$(find_bin NETLAB e2e/netlab/netlab)
AGENT=$(find_bin LOCKSTEP_AGENT daemonset/lockstep-agent)
LAB=ff$$
LAB=${LAB:0:10}
OUT=$STATE/fabric-failover
rm -rf "$OUT" && mkdir -p "$OUT"
HOSTS=3
PPR=4  # fabric.pathsPerRail (the agent's default): paths per rail and peer
PIDS=()

cleanup() {
  local rc=$? p h
  if ((rc != 0)); then  # what the hosts had pinned, for the failure report
    for h in $(seq 0 $((HOSTS - 1))); do echo "h$h pins: $(pins "$h" 2>/dev/null | tr '\n' ',')" >&2; done
  fi
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  "$NETLAB" down --name "$LAB" >/dev/null 2>&1 || true
}
trap cleanup EXIT

"$NETLAB" up --name "$LAB" --hosts $HOSTS --rails 2 --layout rail >"$OUT/netlab.log" 2>&1 || fail "netlab up failed: $(cat "$OUT/netlab.log")"
TOPO=$(tail -n 1 "$OUT/netlab.log")
[[ -f $TOPO ]] || TOPO=/run/netlab/$LAB/topology.json
ns() { echo "$LAB-h$1"; }
addr() { jq -r ".hosts[$1].addr" "$TOPO"; }
rail0() { jq -r ".hosts[$1].rails[0].ip" "$TOPO"; }

head -c 32 /dev/urandom | base64 >"$OUT/key"
peers=""
for h in $(seq 0 $((HOSTS - 1))); do
  peers+="  - {name: h$h, address: $(rail0 "$h"), hostAddress: $(addr "$h")}"$'\n'
done
start_agent() {  # start_agent H: runs the agent of host H in its namespace
  local h=$1
  ip netns exec "$(ns "$h")" "$AGENT" run --config "$OUT/h$h.yaml" >>"$OUT/h$h.log" 2>&1 &
  AGENT_PID[$h]=$!
  PIDS+=($!)
}
declare -a AGENT_PID
for h in $(seq 0 $((HOSTS - 1))); do
  cat >"$OUT/h$h.yaml" <<YAML
nodeName: h$h
probeKeyFile: $OUT/key
healthAddr: 127.0.0.1:9610
timeApiAddr: 127.0.0.1:9611
fabric:
  rails: [rail0, rail1]
  pathsPerRail: $PPR
peers:
$peers
YAML
  start_agent "$h"
done

# fabric status of host H as JSON.
status() { ip netns exec "$(ns "$1")" "$AGENT" fabric status --addr 127.0.0.1:9611 --json; }
# The owned routes of host H as "dst dev" lines, sorted.
pins() { ip netns exec "$(ns "$1")" ip -j route show proto 211 | jq -r '.[] | "\(.dst) \(.dev)"' | sort; }
all_paths_up() {
  local h
  for h in $(seq 0 $((HOSTS - 1))); do
    status "$h" | jq -e --argjson n "$((2 * 2 * PPR))" '[.paths[].state] | length == $n and all(. == "up")' >/dev/null || return 1
  done
}
expect_pins() {  # expect_pins H "dst dev" ...: host H's owned routes are exactly these
  local h=$1; shift
  [[ "$(pins "$h")" == "$(printf '%s\n' "$@" | sort)" ]]
}
declare -A HOME_RAIL  # HOME_RAIL[i,j]: the rail h_i pins h_j to while every path is healthy
all_pinned_home() {  # every host pins both peers, and both ends of each pair agree
  local i j dev
  for i in $(seq 0 $((HOSTS - 1))); do
    [[ $(pins "$i" | wc -l) -eq $((HOSTS - 1)) ]] || return 1
    for j in $(seq 0 $((HOSTS - 1))); do
      ((i == j)) && continue
      dev=$(pins "$i" | awk -v d="$(addr "$j")/32" '$1 == d || $1 == substr(d, 1, length(d) - 3) {print $2}')
      [[ -n $dev ]] || return 1
      HOME_RAIL[$i,$j]=$dev
    done
  done
  for i in $(seq 0 $((HOSTS - 1))); do
    for j in $(seq 0 $((HOSTS - 1))); do
      ((i == j)) || [[ ${HOME_RAIL[$i,$j]} == "${HOME_RAIL[$j,$i]}" ]] || return 1
    done
  done
}
home_pins() {
  expect_pins 0 "$(addr 1) ${HOME_RAIL[0,1]}" "$(addr 2) ${HOME_RAIL[0,2]}" &&
    expect_pins 1 "$(addr 0) ${HOME_RAIL[1,0]}" "$(addr 2) ${HOME_RAIL[1,2]}" &&
    expect_pins 2 "$(addr 0) ${HOME_RAIL[2,0]}" "$(addr 1) ${HOME_RAIL[2,1]}"
}
failover_pins() {  # every pair with h1 on $OTHER from both ends; {h0, h2} at home
  expect_pins 0 "$(addr 1) $OTHER" "$(addr 2) ${HOME_RAIL[0,2]}" &&
    expect_pins 2 "$(addr 1) $OTHER" "$(addr 0) ${HOME_RAIL[2,0]}" &&
    expect_pins 1 "$(addr 0) $OTHER" "$(addr 2) $OTHER"
}
host_traffic_flows() {  # ping and a TCP transfer from h0's host address to h1's
  ip netns exec "$(ns 0)" ping -q -c 5 -i 0.1 -W 1 -I "$(addr 0)" "$(addr 1)" >/dev/null || return 1
  local got
  ip netns exec "$(ns 1)" timeout 10 /usr/bin/python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5201)); s.listen(1); c, _ = s.accept(); n = 0
while True:
    b = c.recv(65536)
    if not b: break
    n += len(b)
c.sendall(str(n).encode()); c.close()' "$(addr 1)" &
  local srv=$!
  sleep 0.3
  got=$(ip netns exec "$(ns 0)" timeout 10 /usr/bin/python3 -c '
import socket, sys
c = socket.create_connection((sys.argv[2], 5201), timeout=5, source_address=(sys.argv[1], 0))
c.sendall(b"x" * 4000000); c.shutdown(socket.SHUT_WR); print(c.recv(64).decode())' "$(addr 0)" "$(addr 1)") || true
  wait $srv 2>/dev/null || true
  [[ $got == 4000000 ]]
}

wait_for "every agent's fabric status answers" 30 status 0
wait_for "every path up on every host" 60 all_paths_up
wait_for "every pair pinned to its home rail from both ends" 30 all_pinned_home
grep -q "no RDMA device present" "$OUT/h0.log" || fail "the agent did not say whether RDMA devices are present"
pass "3 agents: all $((3 * 2 * 2 * PPR)) paths up ($PPR per rail and peer), every pair pinned home ({h0,h1} ${HOME_RAIL[0,1]}, {h0,h2} ${HOME_RAIL[0,2]}, {h1,h2} ${HOME_RAIL[1,2]})"

DEAD=${HOME_RAIL[0,1]}
if [[ $DEAD == rail0 ]]; then OTHER=rail1; else OTHER=rail0; fi
"$NETLAB" link --name "$LAB" "h1r${DEAD#rail}" down --silent >>"$OUT/netlab.log" 2>&1
wait_for "pins around the dead h1r${DEAD#rail} link" 30 failover_pins
status 0 | jq -e --arg a "$(addr 1)" --arg r "$OTHER" '.peers[] | select(.host_address == $a) | .via == $r' >/dev/null ||
  fail "fabric status of h0 does not show h1's traffic on $OTHER: $(status 0 | jq -c .peers)"
# The fault is real: h0's $DEAD no longer reaches h1 (its leaf's only link to h1 is the dead one).
if ip netns exec "$(ns 0)" ping -q -c 3 -i 0.1 -W 1 -I "$DEAD" "$(addr 1)" >/dev/null 2>&1; then
  fail "h1 is still reachable through h0's $DEAD: the silent link failure did not happen"
fi
for i in 1 2 3; do host_traffic_flows && break; ((i < 3)) || fail "h0 -> h1 host-address traffic does not flow during the failover"; done
pass "h1r${DEAD#rail} silently down: every pair with h1 moved to $OTHER from both ends, {h0,h2} stayed home; ping and TCP flow"

kill "${AGENT_PID[0]}" && wait "${AGENT_PID[0]}" 2>/dev/null || true
expect_pins 0 "$(addr 1) $OTHER" "$(addr 2) ${HOME_RAIL[0,2]}" || fail "stopping the agent removed its working pins: $(pins 0)"
start_agent 0
wait_for "the restarted agent answers" 30 status 0
grep -q "adopted a pin from the previous run" "$OUT/h0.log" || fail "the restarted agent did not adopt its pin"
expect_pins 0 "$(addr 1) $OTHER" "$(addr 2) ${HOME_RAIL[0,2]}" || fail "h0's pins changed across the restart: $(pins 0)"
# (h1 and h2 saw every path to h0 fail while it was gone; they kept their pins.)
wait_for "the failover pins after the restart" 30 failover_pins
pass "an agent restarted during the failover kept and adopted its pin"

"$NETLAB" link --name "$LAB" "h1r${DEAD#rail}" up >>"$OUT/netlab.log" 2>&1
wait_for "every pair back home after the clean period" 60 home_pins
wait_for "every path up again" 30 all_paths_up
host_traffic_flows || fail "host-address traffic does not flow after re-admission"
flaps=$(ip netns exec "$(ns 1)" curl -s 127.0.0.1:9610/metrics |
  awk -v r="$DEAD" '$1 == "lockstep_fabric_flaps_total{rail=\"" r "\"}" {print $2}')
[[ ${flaps:-0} != 0 ]] || fail "h1 counted no flap on $DEAD"
pass "h1r${DEAD#rail} back: re-admitted after the clean period, every pair back on its home rail; flaps counted ($flaps)"
