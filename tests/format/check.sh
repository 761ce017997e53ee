#!/usr/bin/env bash
# The `format` test: every .cc/.h file under the folders below must be left
# unchanged by clang-format 14 with the repository's .clang-format, apart from
# the files listed in tests/format/not-yet-formatted.txt (files that predate the
# check; take a file off the list when you format it). New files in these
# folders are checked from the start.
#   tests/format/check.sh <clang-format binary or ""> <source root>
# Exits 77 (skipped) when clang-format 14 is missing (scripts/setup installs it).
set -euo pipefail
FOLDERS=(common migration nccl tests/nccl audit tests/audit daemonset/audit)

clang_format=${1:-}
root=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
if [[ -z "$clang_format" || ! -x "$clang_format" ]]; then
  echo "SKIPPED: clang-format-14 not found (scripts/setup installs it)"
  exit 77
fi
cd "$root"
declare -A skip=()
while read -r f; do
  [[ -z "$f" || "$f" == \#* ]] || skip[$f]=1
done < tests/format/not-yet-formatted.txt

files=()
while IFS= read -r f; do
  [[ -n "${skip[$f]:-}" ]] || files+=("$f")
done < <(find "${FOLDERS[@]}" -type f \( -name '*.cc' -o -name '*.h' \) | sort)

if ! "$clang_format" --dry-run --Werror "${files[@]}"; then
  echo "format: the files above differ from .clang-format; run: $clang_format -i <file>" >&2
  exit 1
fi
echo "format: ${#files[@]} files formatted (${#skip[@]} on the not-yet-formatted list)"
