#!/usr/bin/env bash
# Benchmark `audit` (issue 26 §5), the netlab part: a full audit of N netlab
# hosts (default 4; more with --hosts) with one miswired rail (h2) and one
# slow link (h1) seeded, run by e2e/tests/test-fleet-audit-netlab.sh (which
# also asserts the verdicts). Prints a table and one JSON line:
#   nodes, audit_seconds (every host's `lockstep-agent audit --fabric --trace`
#   at once, wall), bad_node_flagged {miswired_rail, slow_link}, false_flags
#   (good hosts failed), agent_audit_cpu_seconds_mean (user + system per
#   host), node_audit_status_bytes_max (a host's checks as JSON: what its
#   NodeAudit status carries); congested_link_named and congestion_detect_ms
#   are another benchmark's (null here).
# The API side at 1000 nodes: build/<preset>/e2e/bench/audit-judge.
# Needs root; $NETLAB and $LOCKSTEP_AGENT or a build dir as the test does.
set -euo pipefail
HOSTS=4
while (($#)); do
  case $1 in
    --hosts) HOSTS=$2; shift 2 ;;
    *) echo "usage: $0 [--hosts N]" >&2; exit 2 ;;
  esac
done
HERE=$(cd "$(dirname "$0")" && pwd)
STATE=$(mktemp -d /tmp/audit-bench.XXXXXX)
AUDIT_HOSTS=$HOSTS "$HERE/../tests/test-fleet-audit-netlab.sh" "$STATE" >&2
R=$STATE/fleet-audit-netlab/result.json
jq -r '"nodes                        \(.nodes)",
       "audit_seconds (wall)         \(.audit_seconds)",
       "miswired rail flagged        \(.bad_node_flagged.miswired_rail)",
       "slow link flagged            \(.bad_node_flagged.slow_link)",
       "false flags                  \(.false_flags)",
       "audit CPU per host (s)       \(.agent_audit_cpu_seconds_mean)",
       "NodeAudit checks JSON (B)    \(.node_audit_status_bytes_max)"' "$R"
cat "$R"
rm -rf "$STATE"
