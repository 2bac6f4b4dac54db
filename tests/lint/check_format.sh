#!/usr/bin/env bash
# Lint: every C source and header in the modules is clang-formatted.
# Fix with: clang-format -i <file>
set -euo pipefail
cd "$(dirname "$0")/../.."
files=$(git ls-files -- '*.c' '*.h' 2>/dev/null || find include server raft store snapshot client tests -name '*.[ch]')
[[ -n $files ]] || { echo "no sources"; exit 0; }
bad=0
for f in $files; do
  [[ -f $f ]] || continue
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f (run clang-format -i $f)"
    bad=1
  fi
done
exit $bad
