#!/usr/bin/env bash
# A real lockstep-coordinator scraped by a real Prometheus, for the jobs and
# migrations dashboard (no root, no cluster; seconds). The coordinator runs a
# 2-rank job whose members this script plays over the HTTP API (real `sleep`
# processes stand in for their pids, as in tests/migration/binary_test.cc):
# generation 0 forms; a planned migration moves rank 1 onto a registered
# spare; the spare's process is killed, the coordinator starts a cold spare
# with --spare-command and re-forms. Then every lockstep_migration_* series
# the dashboard reads exists, and:
#  - the dashboard's queries use only metrics and labels this scrape exported;
#  - tests/dashboards/scraped-series.json ("coordinator") records nothing it
#    did not export.
#   coordinator-scrape.sh COORDINATOR DASHBOARD_LINT   (skips, 77, without prometheus)
set -euo pipefail
COORD=$1 LINT=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
fail() { echo "FAIL $*" >&2; exit 1; }
pass() { echo "PASS $*"; }
# shellcheck source=series.sh
. "$here/series.sh"
command -v prometheus >/dev/null || { echo "SKIP: needs Debian's prometheus (scripts/setup)"; exit 77; }
for tool in curl jq; do command -v $tool >/dev/null || fail "needs $tool"; done

tmp=$(mktemp -d /tmp/lockstep-coord-scrape-XXXXXX)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  [[ -f $tmp/cold.pid ]] && kill "$(cat "$tmp/cold.pid")" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "FAIL at line $LINENO; coordinator log:" >&2; tail -n 20 "$tmp/coordinator.log" >&2' ERR
wait_for() {  # wait_for WHAT SECONDS CMD...: polls CMD every 0.1 s
  local what=$1 secs=$2 i
  shift 2
  for ((i = 0; i < secs * 10; i++)); do
    if "$@"; then return 0; fi
    sleep 0.1
  done
  fail "timed out after ${secs}s waiting for $what"
}

# The cold spare: registers itself with its own pid, then becomes `sleep`.
cat >"$tmp/spare.sh" <<SH
echo \$\$ >"$tmp/cold.pid"
curl -sf -m 5 --noproxy '*' -d "{\"member\":\"cold-\$\$\",\"role\":\"spare\",\"host\":\"127.0.0.1\",\"store_port\":29700,\"pid\":\$\$}" "\$LOCKSTEP_COORDINATOR/v1/register" >/dev/null
exec sleep 600
SH
"$COORD" --job dashboards --world-size 2 --listen 127.0.0.1:0 --port-file "$tmp/port" --state-file "$tmp/state.json" \
  --heartbeat-timeout 60s --report-grace 60s --spares 0 --fence none --spare-command "/bin/sh $tmp/spare.sh" >"$tmp/coordinator.log" 2>&1 &
PIDS+=($!)
wait_for "the coordinator's port file" 10 test -s "$tmp/port"
URL=http://127.0.0.1:$(cat "$tmp/port")
post() { curl -sf --noproxy '*' -d "$2" "$URL$1"; }
state() { curl -sf --noproxy '*' "$URL/v1/state"; }
member() { state | jq -r --arg m "$1" '.members[] | select(.id == $m) | .status'; }
generation_is() { [[ $(state | jq -r .generation) == "$1" ]]; }
reg() {  # reg MEMBER ROLE RANK PID
  local rank=""
  [[ $3 -ge 0 ]] && rank=",\"rank\":$3"
  post /v1/register "{\"member\":\"$1\",\"role\":\"$2\"$rank,\"host\":\"127.0.0.1\",\"store_port\":$((29500 + $3 + 1)),\"pid\":$4}" >/dev/null
}
hb() { post /v1/heartbeat "{\"member\":\"$1\",\"generation\":$2,\"step\":$3,\"state\":\"training\"}"; }

sleep 600 & PIDS+=($!); p0=$!
sleep 600 & PIDS+=($!); p1=$!
sleep 600 & PIDS+=($!); ps=$!
reg m0 rank 0 "$p0"
reg m1 rank 1 "$p1"
reg s0 spare -1 "$ps"
generation_is 0 || fail "generation 0 did not form: $(state)"
hb m0 0 10 >/dev/null
hb m1 0 10 >/dev/null

# A planned migration of rank 1: pause at the step the coordinator names, report, re-form.
post /v1/migrations '{"rank":1,"kind":"planned","reason":"dashboards test"}' >/dev/null
pause_step() { hb m0 0 10 | jq -e '.directive == "pause"' >/dev/null; }
wait_for "the pause directive" 10 pause_step
P=$(hb m1 0 10 | jq -r .pause_at_step)
[[ $P =~ ^[0-9]+$ ]] || fail "no pause_at_step in the heartbeat reply"
for m in m0 m1; do
  hb $m 0 "$P" >/dev/null
  post /v1/report "{\"member\":\"$m\",\"generation\":0,\"committed_step\":$P,\"reason\":\"pause\"}" >/dev/null
done
wait_for "generation 1 (s0 takes rank 1)" 10 generation_is 1
hb m0 1 "$P" >/dev/null
hb s0 1 "$P" >/dev/null
migration_done() { curl -sf --noproxy '*' "$URL/v1/migrations" | jq -e '.[0].state == "done"' >/dev/null; }
wait_for "the planned migration done" 10 migration_done
pass "planned migration of rank 1 done (pause at step $P, generation 1)"

# s0's process dies: a failure; m0 reports; a cold spare is started and re-forms generation 2.
kill "$ps"
s0_dead() { [[ $(member s0) == dead ]]; }
wait_for "s0 dead (pid gone)" 10 s0_dead
post /v1/report "{\"member\":\"m0\",\"generation\":1,\"committed_step\":$P,\"reason\":\"error\",\"error\":\"peer gone\"}" >/dev/null
wait_for "generation 2 with a cold spare" 20 generation_is 2
cold=$(state | jq -r '.history[2].members[1]')
[[ $cold == cold-* ]] || fail "rank 1 of generation 2 is $cold, not the cold spare"
hb m0 2 "$P" >/dev/null
hb "$cold" 2 "$P" >/dev/null
complete2() { state | jq -e '.history[2].status == "complete"' >/dev/null; }
wait_for "generation 2 complete" 10 complete2
pass "failure of rank 1 (pid gone): cold spare $cold started and generation 2 complete"

# Prometheus scrapes it, with the labels Prometheus itself adds (job, instance).
PROM_PORT=""
for p in $(shuf -i 20000-40000 -n 50); do
  if ! ss -Hltn "sport = :$p" | grep -q .; then PROM_PORT=$p && break; fi
done
[[ -n $PROM_PORT ]] || fail "no free port for Prometheus"
cat >"$tmp/prometheus.yml" <<YAML
global: {scrape_interval: 1s}
scrape_configs:
  - job_name: lockstep-coordinator
    static_configs: [{targets: ['127.0.0.1:$(cat "$tmp/port")']}]
YAML
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
  --web.listen-address=127.0.0.1:$PROM_PORT --log.level=warn >"$tmp/prometheus.log" 2>&1 &
PIDS+=($!)
scraped() {
  series_has $PROM_PORT lockstep_migration_migrations_total && series_has $PROM_PORT lockstep_migration_failures_total &&
    series_has $PROM_PORT lockstep_migration_spares_requested_total
}
wait_for "Prometheus to scrape the coordinator ($(tail -n 3 "$tmp/prometheus.log" 2>/dev/null))" 30 scraped
series_catalogue $PROM_PORT >"$tmp/live.json"
pass "Prometheus scraped $(jq '[keys[] | select(startswith("lockstep_migration_"))] | length' "$tmp/live.json") lockstep_migration_* metrics"

jq '{sources: {coordinator: .}}' "$tmp/live.json" >"$tmp/catalogue.json"
"$LINT" --catalogue "$tmp/catalogue.json" --used-out "$tmp/used.json" "$root/charts/lockstep/dashboards/lockstep-jobs-migrations.json" ||
  fail "the jobs and migrations dashboard uses what this real coordinator scrape did not export"
pass "every metric and label of the jobs and migrations dashboard is in this real scrape"
check_scraped_section coordinator "$tmp/live.json" "$tmp/used.json"
pass "scraped-series.json (coordinator) holds only what this real scrape exported"
