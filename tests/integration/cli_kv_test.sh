#!/usr/bin/env bash
# CLI integration test of keel kv against a real keeld: every verb (add,
# put, get, create, update, del, purge, history, keys, watch, ls, info, rm)
# with its output and exit code, and the refusals: create of a key that has
# a value, update with a wrong revision, a missing bucket or key; and
# keel bench kv's refusal of a bad mode or flag.
# usage: cli_kv_test.sh KEEL     env KEELD=<keeld binary> (unset: skip, 77)
#
# Every wait is a bounded poll on a condition; keeld is started here and
# stopped by its PID.
set -uo pipefail

KEEL=${1:?usage: cli_kv_test.sh KEEL}
POLL_TRIES=400 # x 0.025 s = 10 s for any one condition
TMP=$(mktemp -d)
CLI_TEST_NAME="the CLI KV test"
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"

t_add_sets_history_ttl_and_sizes() {
  "$KEEL" kv add CFG --history 5 --ttl 1h --max-value-size 1KiB \
    --replicas 1 >"$TMP/add.out" 2>&1 || return 1
  grep -q 'History Kept: *5' "$TMP/add.out" &&
    grep -q 'TTL: *1h0m' "$TMP/add.out" &&
    grep -q 'Backing Stream: *KV_CFG' "$TMP/add.out" || return 1
  "$KEEL" kv info CFG --json >"$TMP/info.json" || return 1
  [[ $(json_get "$TMP/info.json" 'j["config"]["max_msgs_per_subject"]') == 5 &&
    $(json_get "$TMP/info.json" 'j["config"]["max_age"]') == 3600000000000 &&
    $(json_get "$TMP/info.json" 'j["config"]["max_msg_size"]') == 1024 ]]
}

t_put_get_and_raw() {
  [[ $("$KEEL" kv put CFG color red) == red ]] || return 1
  [[ $(printf blue | "$KEEL" kv put CFG color) == blue ]] || return 1
  "$KEEL" kv get CFG color >"$TMP/get.out" || return 1
  grep -q '^CFG > color revision: 2 created @ ' "$TMP/get.out" &&
    [[ $(tail -n1 "$TMP/get.out") == blue ]] || return 1
  [[ $("$KEEL" kv get CFG color --raw) == blue &&
    $("$KEEL" kv get CFG color --revision 1 --raw) == red ]]
}

t_create_refuses_a_key_with_a_value() {
  local rc=0
  [[ $("$KEEL" kv create CFG shape round) == round ]] || return 1
  "$KEEL" kv create CFG shape square 2>"$TMP/create.err" || rc=$?
  [[ $rc == 1 ]] && grep -q 'key shape already has a value' "$TMP/create.err" &&
    [[ $("$KEEL" kv get CFG shape --raw) == round ]]
}

t_update_checks_the_revision() {
  local rc=0
  "$KEEL" kv update CFG color green 1 2>"$TMP/upd.err" || rc=$?
  [[ $rc == 1 ]] && grep -q 'key color is at revision 2, not 1' \
    "$TMP/upd.err" || return 1
  [[ $("$KEEL" kv get CFG color --raw) == blue ]] || return 1
  [[ $("$KEEL" kv update CFG color green 2) == green &&
    $("$KEEL" kv get CFG color --raw) == green ]] || return 1
  rc=0
  "$KEEL" kv update CFG color x notanumber 2>/dev/null || rc=$?
  [[ $rc == 2 ]]
}

t_history_lists_every_revision() {
  "$KEEL" kv history CFG color >"$TMP/hist.out" || return 1
  head -n1 "$TMP/hist.out" | grep -q 'Key *Revision *Op *Created' &&
    grep -Eq '^color +1 +PUT .* red$' "$TMP/hist.out" &&
    grep -Eq '^color +2 +PUT .* blue$' "$TMP/hist.out" &&
    grep -Eq '^color +4 +PUT .* green$' "$TMP/hist.out"
}

t_keys_lists_the_live_keys() {
  "$KEEL" kv keys CFG | sort >"$TMP/keys.out" || return 1
  [[ $(tr '\n' ' ' <"$TMP/keys.out") == 'color shape ' ]]
}

t_del_keeps_history_purge_drops_it() {
  local rc=0
  "$KEEL" kv del CFG shape 2>/dev/null || rc=$?
  [[ $rc == 2 ]] || return 1 # no terminal to ask: needs --force
  "$KEEL" kv del CFG shape -f >/dev/null || return 1
  rc=0
  "$KEEL" kv get CFG shape 2>"$TMP/del.err" || rc=$?
  [[ $rc == 1 ]] && grep -q 'key shape not found' "$TMP/del.err" || return 1
  "$KEEL" kv history CFG shape >"$TMP/dh.out" || return 1
  grep -Eq '^shape +[0-9]+ +PUT' "$TMP/dh.out" &&
    grep -Eq '^shape +[0-9]+ +DEL' "$TMP/dh.out" || return 1
  "$KEEL" kv purge CFG color --force >/dev/null || return 1
  "$KEEL" kv history CFG color >"$TMP/ph.out" || return 1
  [[ $(grep -c '^color' "$TMP/ph.out") == 1 ]] &&
    grep -Eq '^color +[0-9]+ +PURGE' "$TMP/ph.out" || return 1
  [[ $("$KEEL" kv keys CFG) == 'No keys found in bucket' ]]
}

watch_saw() { grep -qs "$1" "$TMP/watch.out"; }

t_watch_prints_values_then_changes() {
  "$KEEL" kv put CFG w.one 1 >/dev/null || return 1
  "$KEEL" kv watch CFG 'w.*' --count 3 >"$TMP/watch.out" 2>&1 &
  WATCH_PID=$!
  poll_for watch_saw 'PUT CFG > w.one: 1$' || return 1
  "$KEEL" kv put CFG w.two 2 >/dev/null || return 1
  "$KEEL" kv put CFG other 9 >/dev/null || return 1
  "$KEEL" kv del CFG w.one -f >/dev/null || return 1
  poll_for watch_saw 'DEL CFG > w.one$' || return 1
  wait "$WATCH_PID" || return 1
  WATCH_PID=
  grep -q 'PUT CFG > w.two: 2$' "$TMP/watch.out" &&
    ! grep -q 'other' "$TMP/watch.out"
}

t_ls_lists_buckets_only() {
  "$KEEL" stream add PLAIN --subjects 'plain.>' >/dev/null || return 1
  "$KEEL" kv add SECOND >/dev/null || return 1
  "$KEEL" kv ls >"$TMP/ls.out" || return 1
  head -n1 "$TMP/ls.out" | grep -q 'Bucket *History *Values *Size' &&
    grep -Eq '^CFG +5 ' "$TMP/ls.out" && grep -Eq '^SECOND +1 ' "$TMP/ls.out" &&
    ! grep -q PLAIN "$TMP/ls.out" || return 1
  "$KEEL" kv ls --json >"$TMP/ls.json" || return 1
  [[ $(json_get "$TMP/ls.json" 'sorted(j)') == "['CFG', 'SECOND']" ]]
}

t_missing_bucket_exits_1_with_hint() {
  local rc=0
  "$KEEL" kv get NOPE k 2>"$TMP/nope.err" || rc=$?
  [[ $rc == 1 ]] && grep -q 'bucket NOPE not found' "$TMP/nope.err" &&
    grep -q "keel kv ls" "$TMP/nope.err"
}

t_bad_flags_exit_2() {
  local rc1=0 rc2=0 rc3=0 rc4=0
  "$KEEL" kv 2>/dev/null || rc1=$?
  "$KEEL" kv add X --history 65 2>/dev/null || rc2=$?
  "$KEEL" kv put CFG 2>/dev/null || rc3=$?
  "$KEEL" kv add X --storage tape 2>/dev/null || rc4=$?
  [[ $rc1 == 2 && $rc2 == 2 && $rc3 == 2 && $rc4 == 2 ]]
}

t_help_lists_the_verbs() {
  "$KEEL" --help | grep -q '^  kv ' || return 1
  "$KEEL" kv --help >"$TMP/help.out" || return 1
  local v
  for v in add put get create update del purge history keys watch ls info rm; do
    grep -q "^  kv $v " "$TMP/help.out" || return 1
  done
}

t_rm_deletes_the_bucket() {
  local rc=0
  "$KEEL" kv rm SECOND 2>/dev/null || rc=$?
  [[ $rc == 2 ]] || return 1
  "$KEEL" kv rm SECOND -f >/dev/null || return 1
  rc=0
  "$KEEL" kv info SECOND 2>/dev/null || rc=$?
  [[ $rc == 1 ]]
}

t_bench_kv_refuses_bad_modes_and_flags() {
  local rc1=0 rc2=0 rc3=0
  "$KEEL" bench kv del BENCHKV 2>"$TMP/bkv.err" || rc1=$?
  grep -q "unknown kv bench mode 'del' (put or get)" "$TMP/bkv.err" || return 1
  "$KEEL" bench kv put BENCHKV --keys 0 2>/dev/null || rc2=$?
  "$KEEL" bench kv get BENCHKV --clients 0 2>/dev/null || rc3=$?
  [[ $rc1 == 2 && $rc2 == 2 && $rc3 == 2 ]]
}

# A short real run: the text report's two lines and the JSON object's
# latency fields (cli_bench_lat_print prints both); the bench deletes its
# bucket after.
t_bench_kv_reports_rate_and_latency() {
  "$KEEL" bench kv put BENCHKV --msgs 50 --keys 10 >"$TMP/bkv.out" ||
    return 1
  grep -q '^kv put: 50 ops of 128 B in .* from 1 clients over 10 keys (R1): ' \
    "$TMP/bkv.out" &&
    grep -q '^  latency p50 .* us, p90 .* us, p99 .* us, max .* us, mean .* us$' \
      "$TMP/bkv.out" || return 1
  "$KEEL" bench kv get BENCHKV --msgs 40 --keys 10 --json >"$TMP/bkv.json" ||
    return 1
  [[ $(json_get "$TMP/bkv.json" 'j["mode"], j["ops"]') == 'kv_get 40' &&
    $(json_get "$TMP/bkv.json" \
      'all(j[k] >= 0 for k in ("p50_us", "p90_us", "p99_us", "max_us", "mean_us"))') == True ]]
}

check "kv add sets history, TTL and max value size; kv info --json shows them" \
  t_add_sets_history_ttl_and_sizes
check "kv put (argument or stdin) and kv get (header, --raw, --revision)" \
  t_put_get_and_raw
check "kv create refuses a key that has a value and keeps it" \
  t_create_refuses_a_key_with_a_value
check "kv update refuses a wrong revision and takes the right one" \
  t_update_checks_the_revision
check "kv history lists every revision with its value" \
  t_history_lists_every_revision
check "kv keys lists the keys with a value" t_keys_lists_the_live_keys
check "kv del leaves a marker in the history, kv purge only the marker" \
  t_del_keeps_history_purge_drops_it
check "kv watch KEY prints the values, then changes, of matching keys" \
  t_watch_prints_values_then_changes
check "kv ls lists the buckets and not other streams" t_ls_lists_buckets_only
check "a missing bucket exits 1 and says how to list buckets" \
  t_missing_bucket_exits_1_with_hint
check "bad flags and missing arguments exit 2" t_bad_flags_exit_2
check "keel --help and keel kv --help list the verbs" t_help_lists_the_verbs
check "kv rm needs --force without a terminal and deletes the bucket" \
  t_rm_deletes_the_bucket
check "bench kv refuses an unknown mode and out-of-range flags (exit 2)" \
  t_bench_kv_refuses_bad_modes_and_flags
check "bench kv put and get report the rate and the latency percentiles" \
  t_bench_kv_reports_rate_and_latency

cli_finish
