#!/usr/bin/env bash
# keel's help texts, usage errors and exit codes, byte for byte: every
# command and sub-command's --help (its flags, their order and their help),
# each command group's listing, and the exit code and message of an unknown
# verb. The tables behind them are built from X-macros and shared flag
# tables (client/cli.h); this golden file catches a row that a fold moved,
# dropped or gave to the wrong verb. No server is needed.
# usage: cli_help_test.sh KEEL [--write]   (--write regenerates the golden
#        file, tests/integration/cli_help.golden, after an intended change)
set -uo pipefail

KEEL=${1:?usage: cli_help_test.sh KEEL [--write]}
GOLDEN="$(dirname "$0")/cli_help.golden"
TMP=$(mktemp -d)
# Nothing here may reach a server: a port nothing listens on.
export NATS_URL=nats://127.0.0.1:1
trap 'rm -rf "$TMP"' EXIT

# One block per command line: the words, the exit code, stdout then stderr.
show() {
  local rc=0
  "$KEEL" "$@" </dev/null >"$TMP/out" 2>"$TMP/err" || rc=$?
  printf '=== keel %s (exit %d)\n' "$*" "$rc"
  cat "$TMP/out"
  printf -- '--- stderr\n'
  cat "$TMP/err"
}

# The verbs a group's listing names ("  stream add   Create ...").
verbs_of() { # verbs_of WORDS...
  "$KEEL" "$@" --help 2>/dev/null |
    sed -n "s/^  $*  *\([a-z][a-z-]*\)  .*/\1/p"
}

dump() {
  show --help
  local top group v
  top=$("$KEEL" --help | sed -n 's/^  \([a-z]*\)  .*/\1/p')
  for group in $top; do
    show "$group" --help
    show "$group"
    [[ -n $(verbs_of "$group") ]] && show "$group" no-such-verb
    for v in $(verbs_of "$group"); do
      show "$group" "$v" --help
      for w in $(verbs_of "$group" "$v"); do
        show "$group" "$v" "$w" --help
      done
    done
  done
  # Modes with their own parser behind one word.
  for v in "bench js pub" "bench js fetch" "bench js push" \
    "bench js mirror" "bench kv put" "bench kv get" "bench js" "bench kv"; do
    # shellcheck disable=SC2086
    show $v --help
  done
  show stream add --no-such-flag
  show bench js pub --no-such-flag
  # A bench's ranges, checked before it connects (cli_bench_ranges).
  show bench js pub X --size 9MiB
  show bench kv put B --keys 0
}

if [[ ${2:-} == --write ]]; then
  dump >"$GOLDEN"
  echo "wrote $GOLDEN"
  exit 0
fi
dump >"$TMP/now"
if ! diff -u "$GOLDEN" "$TMP/now" >"$TMP/diff"; then
  head -n 80 "$TMP/diff"
  echo "not ok - keel's help texts and usage errors are as in $GOLDEN"
  exit 1
fi
echo "ok - keel's help texts and usage errors are as in $GOLDEN ($(grep -c '^=== ' "$GOLDEN") command lines)"
