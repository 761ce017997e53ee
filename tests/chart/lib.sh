# Shared by the chart test scripts: find helm and kubectl, count results.
# Binaries come from $LOCKSTEP_BIN (a directory; scripts/install-k8s-tools
# fills it) or PATH.

find_tool() { # find_tool NAME -> prints the path or nothing
  local name="$1" dir="${LOCKSTEP_BIN:-}"
  if [[ -n "$dir" ]]; then
    for c in "$dir/$name" "$dir/$name/$name"; do
      if [[ -f "$c" && -x "$c" ]]; then echo "$c"; return 0; fi
    done
  fi
  command -v "$name" 2>/dev/null || true
}

passed=0
failed=0
ok()  { passed=$((passed + 1)); echo "PASS $*"; }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }
summary() {
  echo "$passed passed, $failed failed"
  [[ $failed -eq 0 ]]
}
