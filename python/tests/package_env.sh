#!/usr/bin/env bash
# ctest fixtures of the Python tests (python/CMakeLists.txt): lockstep_train as users
# get it, a wheel built from python/ and installed into a virtual environment in the
# build directory, which the tests then run with (they import the installed package).
#   package_env.sh wheel  DIR   build the wheel into DIR/dist (from a copy of python/, so
#                               nothing is written into the source tree), check what it holds
#   package_env.sh torch1 DIR   DIR/venv-torch1: Debian's python3 with its site-packages
#                               (Debian's torch 1.13, numpy) + the wheel
#   package_env.sh torch2 DIR   DIR/venv-torch2: the same python3 without them; a .pth puts
#                               scripts/install-torch2's cached environment (the pinned
#                               torch 2.x) on its path; + the wheel
#   package_env.sh run-torch1|run-torch2 DIR ARGS...   run that venv's python with ARGS
# Offline: the wheel is built with Debian's setuptools (no build isolation) and installed
# by Debian's pip (the venvs have none of their own) without dependencies (torch is there).
set -euo pipefail
what=${1:?usage: package_env.sh wheel|torch1|torch2 DIR}
dir=${2:?usage: package_env.sh wheel|torch1|torch2 DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/.." && pwd)
repo=$(cd "$src/.." && pwd)
PY=${LOCKSTEP_VENV_PYTHON:-/usr/bin/python3}
mkdir -p "$dir"

wheel_file() {
  local w; w=$(ls "$dir"/dist/lockstep_train-*.whl 2>/dev/null | head -n1)
  [[ -n "$w" ]] || { echo "package_env.sh: no wheel in $dir/dist (the fixture python.wheel builds it)" >&2; exit 1; }
  echo "$w"
}

install_into() {  # venv: install the wheel, then check which lockstep_train and torch it imports
  local venv=$1 w; w=$(wheel_file)
  "$PY" -m pip --python "$venv/bin/python" install -q --no-deps --no-index --force-reinstall \
    --disable-pip-version-check "$w"
  (cd / && "$venv/bin/python" - "$src" <<'PY'
import importlib.metadata, os, sys
import torch, lockstep_train as ls
f = os.path.realpath(ls.__file__)
assert not f.startswith(os.path.realpath(sys.argv[1]) + os.sep), "imported from the source tree: " + f
assert importlib.metadata.version("lockstep-train") == ls.__version__
print("package_env.sh: %s: lockstep_train %s from %s, torch %s"
      % (sys.prefix, ls.__version__, os.path.dirname(f), torch.__version__))
PY
  )
}

case "$what" in
  run-torch1|run-torch2)
    py="$dir/venv-${what#run-}/bin/python"
    [[ -x "$py" ]] || { echo "package_env.sh: no $py (the fixture python.venv.${what#run-} makes it)" >&2; exit 1; }
    shift 2
    exec "$py" "$@"
    ;;
  wheel)
    rm -rf "$dir/src" "$dir/dist"
    mkdir -p "$dir/src"
    cp -r "$src/pyproject.toml" "$src/README.md" "$src/lockstep_train" "$dir/src/"
    find "$dir/src" -name __pycache__ -prune -exec rm -rf {} +
    "$PY" -m pip wheel -q --no-deps --no-build-isolation --disable-pip-version-check -w "$dir/dist" "$dir/src"
    w=$(wheel_file)
    "$PY" - "$w" "$src/lockstep_train" <<'PY'
import ast, os, sys, zipfile
whl, pkg = sys.argv[1], sys.argv[2]
names = set(zipfile.ZipFile(whl).namelist())
want = {"lockstep_train/" + f for f in os.listdir(pkg) if f.endswith(".py") or f == "py.typed"}
missing = sorted(want - names)
assert not missing, "the wheel lacks %s" % missing
assert not any(n.startswith(("tests/", "bench/")) for n in names), "the wheel holds tests"
init = ast.parse(open(os.path.join(pkg, "__init__.py")).read())
version = next(n.value.value for n in init.body if isinstance(n, ast.Assign)
               and getattr(n.targets[0], "id", "") == "__version__")
assert os.path.basename(whl).startswith("lockstep_train-%s-py3-none-any" % version), whl
print("package_env.sh: %s (%d files, py.typed, version %s)" % (os.path.basename(whl), len(names), version))
PY
    ;;
  torch1)
    rm -rf "$dir/venv-torch1"
    "$PY" -m venv --without-pip --system-site-packages "$dir/venv-torch1"
    install_into "$dir/venv-torch1"
    ;;
  torch2)
    env=$("$repo/scripts/install-torch2" --print | tail -n1)
    rm -rf "$dir/venv-torch2"
    "$PY" -m venv --without-pip "$dir/venv-torch2"
    site=$("$dir/venv-torch2/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
    env_site=$("$env/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
    echo "$env_site" > "$site/lockstep-torch2.pth"
    install_into "$dir/venv-torch2"
    ;;
  *) echo "package_env.sh: unknown $what" >&2; exit 2 ;;
esac
