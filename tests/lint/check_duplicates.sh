#!/usr/bin/env bash
# Repetition in product code stays at or under the ceiling in
# tests/lint/dup_product_max (tools/dup-product counts the pairs
# `duplicates` finds outside tests/, tools/, bench/ and docs/). The ceiling
# is a ratchet: lower it when a fold lands, never raise it to let new
# repetition in; fold it into one helper instead.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if ! command -v duplicates >/dev/null; then
  echo "check_duplicates: the duplicates command is not on PATH: skipped"
  exit 77
fi
max=$(grep -v '^#' "$root/tests/lint/dup_product_max" | head -n1)
exec "$root/tools/dup-product" --max "$max" --most 20
