#!/usr/bin/env bash
# ctest fixture cleanup: stops the operators and the cluster.
. "$(dirname "$0")/lib.sh"
"$REPO/e2e/cluster/down" "$CLUSTER" --purge
