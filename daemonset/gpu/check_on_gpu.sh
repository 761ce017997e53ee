#!/bin/sh
# Reads this machine's GPUs through the real NVIDIA driver (libnvidia-ml.so.1)
# with the agent's own NVML adapter and prints the JSON it reports. For a
# machine with an NVIDIA GPU and driver; needs only the built binary (glibc
# >= 2.34, libstdc++ from GCC >= 11), no compiler and no package registry.
#
#   daemonset/gpu/check_on_gpu.sh [BINARY]
#
# BINARY: lockstep-gpu-status (built to build/<preset>/daemonset/gpu/), or
# lockstep-agent (then its `gpu-status` subcommand runs). Default: $BINARY,
# else lockstep-gpu-status next to this script, in build/*/daemonset/gpu/,
# or on PATH. Exit 0 when the binary ran (with or without a driver: "no
# NVIDIA driver" is a result too); 1 when it is missing or failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-${BINARY:-}}
if [ -z "$bin" ]; then
  for c in "$here/lockstep-gpu-status" "$here"/../../build/*/daemonset/gpu/lockstep-gpu-status; do
    if [ -x "$c" ]; then bin=$c; break; fi
  done
fi
[ -z "$bin" ] && bin=$(command -v lockstep-gpu-status 2>/dev/null || true)
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "check_on_gpu: no lockstep-gpu-status binary (give its path)" >&2
  exit 1
fi
case "$(basename "$bin")" in
  lockstep-agent*) set -- "$bin" gpu-status --json ;;
  *) set -- "$bin" --json ;;
esac

echo "== host: $(uname -srm), $(ldd --version 2>/dev/null | head -n 1)"
if command -v nvidia-smi >/dev/null 2>&1; then
  echo "== nvidia-smi -L"
  nvidia-smi -L 2>&1 | head -n 16
fi
echo "== $*"
unset LOCKSTEP_NVML_LIBRARY  # the real driver's library, as the agent loads it
out=$("$@")
rc=$?
printf '%s\n' "$out"
if [ $rc -ne 0 ]; then
  echo "check_on_gpu: $1 exited $rc" >&2
  exit 1
fi
if command -v python3 >/dev/null 2>&1; then
  printf '%s\n' "$out" | python3 -c '
import json, sys
j = json.load(sys.stdin)
if not j.get("available"):
    print("== summary: no NVIDIA driver:", j.get("reason"))
    sys.exit(0)
print("== summary: driver %s, %d GPU(s), Xid events %s, verdict %s" % (
    j["driverVersion"], len(j["gpus"]), "on" if j["xidEvents"] else "off", j["verdict"]["state"]))
for g in j["gpus"]:
    print("   GPU %d %s %s: %s C (slowdown %s C), not available: %s" % (
        g["index"], g.get("uuid"), g.get("name"), g.get("temperatureC"), g.get("slowdownC"),
        ", ".join(g.get("notAvailable", [])) or "-"))
    reasons = g.get("clocksEventReasons")
    print("     ECC %s (pending %s), persistence %s, SM clock %s of %s MHz, clock event reasons %s" % (
        g.get("eccMode"), g.get("eccModePending"), g.get("persistenceMode"), g.get("smClockMHz"),
        g.get("smClockMaxMHz"), "-" if reasons is None else hex(reasons)))
' || { echo "check_on_gpu: the output is not the expected JSON" >&2; exit 1; }
fi
exit 0
