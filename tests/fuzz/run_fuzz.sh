#!/usr/bin/env bash
# Run one libFuzzer target for a bounded time on its checked-in seed corpus.
# New inputs go to a temporary directory, never into the source tree.
# usage: run_fuzz.sh BINARY SEED_CORPUS_DIR SECONDS
set -euo pipefail
bin=$1 seeds=$2 secs=$3
# Undefined behaviour is a bug like a crash: stop at the first report.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# libFuzzer exits 77 on a crash by default, which meson reads as "skipped":
# a found bug must fail the test.
args=(-max_total_time="$secs" -seed=1 -print_final_stats=1 -rss_limit_mb=2048
      -error_exitcode=1 -timeout_exitcode=1 -artifact_prefix="$work/")
[[ -d $seeds ]] && args+=("$work" "$seeds")
rc=0
"$bin" "${args[@]}" || rc=$?
if [[ $rc != 0 ]]; then
  for f in "$work"/crash-* "$work"/leak-* "$work"/timeout-*; do
    [[ -f $f ]] && { echo "reproducer $f (base64):"; base64 -w0 "$f"; echo; }
  done
fi
exit $rc
