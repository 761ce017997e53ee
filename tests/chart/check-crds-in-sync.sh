#!/usr/bin/env bash
# The top-level crds/ is the source of truth; charts/lockstep/crds/ must hold
# exact copies (Helm installs CRDs only from the chart's own crds/ folder).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
src="$root/crds"
dst="$root/charts/lockstep/crds"

status=0
for f in "$src"/*.yaml; do
  name="$(basename "$f")"
  if [[ ! -f "$dst/$name" ]]; then
    echo "FAIL charts/lockstep/crds/$name is missing; run: cp crds/$name charts/lockstep/crds/" >&2
    status=1
  elif ! diff -u "$f" "$dst/$name" >/dev/null; then
    diff -u "$f" "$dst/$name" | head -40 >&2 || true
    echo "FAIL charts/lockstep/crds/$name differs from crds/$name (the source of truth); run: cp crds/$name charts/lockstep/crds/" >&2
    status=1
  fi
done
for f in "$dst"/*.yaml; do
  name="$(basename "$f")"
  if [[ ! -f "$src/$name" ]]; then
    echo "FAIL charts/lockstep/crds/$name has no source in crds/; add it there or delete it from the chart" >&2
    status=1
  fi
done
if [[ $status -eq 0 ]]; then
  echo "PASS chart CRDs are in sync with crds/"
fi
exit $status
