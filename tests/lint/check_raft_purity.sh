#!/usr/bin/env bash
# Raft purity lint: the core is a pure state machine (docs/design.md §3), so its
# objects may reference only memory and allocation functions and the
# sanitizer runtimes. The codec object may also call msgpack-c. The shared
# ASSERT (include/keel/assert.h, always on) prints to stderr and aborts on a
# broken invariant: its four symbols are the only other ones allowed.
# usage: check_raft_purity.sh libkeel_raft.a
set -euo pipefail
lib=$1
allow='^(memcpy|memmove|memset|memcmp|malloc|calloc|realloc|free|__asan_.*|__ubsan_.*|__sanitizer_.*|__sancov_.*|__stack_chk_fail|__tsan_.*|_GLOBAL_OFFSET_TABLE_|abort|fprintf|fflush|stderr)$'
bad=0
obj=
declare -A defined
while read -r _ _ name; do
  [[ -n ${name:-} ]] && defined[$name]=1
done < <(nm --defined-only "$lib" 2>/dev/null | awk 'NF == 3')
while read -r line; do
  case $line in
    '') continue ;;
    *:) obj=${line%:}; continue ;;
  esac
  sym=${line##* }
  sym=${sym%%@*}
  # The core's own cross-object references are defined in the archive.
  if [[ -n ${defined[$sym]:-} ]]; then
    continue
  fi
  if [[ $sym =~ $allow ]]; then
    continue
  fi
  # The codec: msgpack-c, and what msgpack-c's inline functions and the
  # shared keel_err() (error.h) use.
  if [[ $obj == *codec* && $sym =~ ^(msgpack_.*|vsnprintf|ntohs|ntohl|__assert_fail)$ ]]; then
    continue
  fi
  echo "impure symbol in $obj: $sym"
  bad=1
done < <(nm -u "$lib")
if [[ $bad == 0 ]]; then
  echo "raft core is pure: $(nm -u "$lib" | grep -c . || true) references checked"
fi
exit $bad
