#!/usr/bin/env bash
# The migration-k8s-scale benchmark, small (3 TrainingJobs of 4 ranks + 1 spare on 20
# kwok GPU nodes, its own cluster; ~40 s): every job settles, every failure (2 rank pods
# deleted, 1 node cordoned) ends with the spare recorded in the TrainingJob's status,
# and while nothing fails neither the coordinators (they watch their job's pods) nor
# the operator make a request other than lease renewals.
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || fail "needs jq"
BENCH=$(find_bin MIGRATION_K8S_SCALE_BIN e2e/bench/migration-k8s-scale)
export LOCKSTEP_K8S_BIN=${LOCKSTEP_K8S_BIN:-$("$REPO/scripts/install-k8s-tools" | tail -n1)}
OUT=$STATE/migration-k8s-scale-smoke.out
mkdir -p "$STATE"
# The bench's cluster daemons outlive a killed bench: it runs under a timeout
# shorter than ctest's (SIGTERM, so the script lives on) with its temporary
# directory its own, and whatever cluster it left is stopped on the way out
# (a short path: the cluster's unix sockets live under it).
TMP_ROOT=$(mktemp -d /tmp/lockstep-smoke.XXXXXX)
stop_left_clusters() {
  local d
  for d in "$TMP_ROOT"/lockstep-operator-scale.*/cluster; do
    [[ -d $d ]] && "$REPO/e2e/cluster/down" "$d" --purge >/dev/null 2>&1
  done
  rm -rf "$TMP_ROOT"
}
trap stop_left_clusters EXIT
rc=0
(cd "$REPO" && TMPDIR=$TMP_ROOT timeout 230 "$BENCH" --jobs 3 --nodes 20 --idle-seconds 10 --failure-timeout 30) >"$OUT" || rc=$?
((rc == 0)) || { cat "$OUT" >&2; fail "the benchmark failed (exit $rc$( ((rc == 124)) && echo ': timed out after 230 s'))"; }
J=$(tail -n1 "$OUT")
echo "$J" | jq -e '.settled_jobs == 3 and .failures == 3 and .failures_never_recorded == 0' >/dev/null ||
  fail "not every job settled or failure was recorded: $J"
echo "$J" | jq -e '.failure_to_spare_p99_ms > 0' >/dev/null || fail "no failure -> spare time: $J"
echo "$J" | jq -e '.idle_coordinator_requests_per_min == 0 and .idle_operator_non_lease_requests_per_min == 0' \
  >/dev/null || fail "requests while idle: $(grep '^idle' "$OUT")"
pass "3 jobs settled, 3 failures recorded (p50 $(echo "$J" | jq .failure_to_spare_p50_ms) ms, p99 $(echo "$J" | jq .failure_to_spare_p99_ms) ms); no idle request but lease renewals"
