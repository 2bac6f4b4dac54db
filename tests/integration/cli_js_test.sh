#!/usr/bin/env bash
# CLI integration test of the JetStream commands against a real keeld:
# keel stream add|ls|info|edit|get|purge|rm|backup|restore and
# keel consumer add|ls|info|next|rm — exit codes, --json that parses,
# human output with the expected fields, and a 100,000-message backup and
# restore round trip.
# usage: cli_js_test.sh KEEL     env KEELD=<keeld binary> (unset: skip, 77)
#
# Every wait is a bounded poll on a condition; keeld is started here and
# stopped by its PID.
set -uo pipefail

KEEL=${1:?usage: cli_js_test.sh KEEL}
POLL_TRIES=400 # x 0.025 s = 10 s for any one condition
ROUND_TRIP_MSGS=${KEEL_TEST_BACKUP_MSGS:-100000}
TMP=$(mktemp -d)
CLI_TEST_NAME="the CLI JetStream test"
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"

t_stream_add_prints_config_and_json() {
  "$KEEL" stream add ORDERS --subjects 'orders.>' --max-msgs 1000 \
    --max-age 7d --fsync group >"$TMP/add.out" 2>&1 || return 1
  grep -q '^Stream ORDERS created' "$TMP/add.out" &&
    grep -q 'Subjects: *orders.>' "$TMP/add.out" &&
    grep -q 'Max Messages: *1,000' "$TMP/add.out" &&
    grep -q 'Max Age: *7d0h' "$TMP/add.out" || return 1
  "$KEEL" stream info ORDERS --json >"$TMP/info.json" || return 1
  [[ $(json_get "$TMP/info.json" 'j["config"]["max_msgs"]') == 1000 ]]
}

mirror_caught_up() {
  "$KEEL" stream info MIRRORED --json >"$TMP/mi.json" 2>/dev/null &&
    [[ $(json_get "$TMP/mi.json" 'j["state"]["messages"]') == \
      "$(json_get "$TMP/oi.json" 'j["state"]["messages"]')" ]]
}

lonely_says_not_found() {
  "$KEEL" stream info LONELY 2>/dev/null >"$TMP/l.out" &&
    grep -q 'Error: *stream not found (10059)' "$TMP/l.out"
}

t_stream_info_shows_the_mirror() {
  echo '{"mirror":{"name":"ORDERS"}}' >"$TMP/mirror.json"
  "$KEEL" stream add MIRRORED --config "$TMP/mirror.json" >/dev/null ||
    return 1
  echo '{"mirror":{"name":"NOWHERE"}}' >"$TMP/nowhere.json"
  "$KEEL" stream add LONELY --config "$TMP/nowhere.json" >/dev/null ||
    return 1
  "$KEEL" stream info ORDERS --json >"$TMP/oi.json" || return 1
  poll_for mirror_caught_up || return 1
  "$KEEL" stream info MIRRORED >"$TMP/m.out" || return 1
  grep -q '^Mirror:' "$TMP/m.out" && grep -q 'Origin: *ORDERS' "$TMP/m.out" &&
    grep -q 'Lag: *0' "$TMP/m.out" || {
    cat "$TMP/m.out"
    return 1
  }
  poll_for lonely_says_not_found || return 1
  # A mirror's archive is not restored: a mirror takes no publishes.
  "$KEEL" stream backup MIRRORED "$TMP/mirror.bak" >/dev/null || return 1
  local rc=0
  "$KEEL" stream restore "$TMP/mirror.bak" --name MCOPY 2>"$TMP/mr.err" ||
    rc=$?
  [[ $rc == 1 ]] && grep -q 'takes no publishes' "$TMP/mr.err" || {
    echo "rc $rc"
    cat "$TMP/mr.err"
    return 1
  }
  rc=0
  "$KEEL" stream info MCOPY 2>/dev/null || rc=$?
  [[ $rc == 1 ]] || return 1
  "$KEEL" stream rm MIRRORED --force >/dev/null &&
    "$KEEL" stream rm LONELY --force >/dev/null
}

sourced_caught_up() {
  "$KEEL" stream info SOURCED --json >"$TMP/si.json" 2>/dev/null &&
    [[ $(json_get "$TMP/si.json" 'j["state"]["messages"]') == \
      "$(json_get "$TMP/oi.json" 'j["state"]["messages"]')" ]]
}

t_stream_info_shows_the_sources() {
  echo '{"sources":[{"name":"ORDERS"},{"name":"NOWHERE"}]}' \
    >"$TMP/sources.json"
  "$KEEL" stream add SOURCED --config "$TMP/sources.json" >/dev/null ||
    return 1
  "$KEEL" stream info ORDERS --json >"$TMP/oi.json" || return 1
  poll_for sourced_caught_up || return 1
  "$KEEL" stream info SOURCED >"$TMP/s.out" || return 1
  grep -q '^Source 1:' "$TMP/s.out" && grep -q 'Origin: *ORDERS' "$TMP/s.out" &&
    grep -q '^Source 2:' "$TMP/s.out" &&
    grep -q 'Origin: *NOWHERE' "$TMP/s.out" || {
    cat "$TMP/s.out"
    return 1
  }
  # A sourced stream's archive is not restored: its messages carry the
  # origins' subjects.
  "$KEEL" stream backup SOURCED "$TMP/sourced.bak" >/dev/null || return 1
  local rc=0
  "$KEEL" stream restore "$TMP/sourced.bak" --name SCOPY 2>"$TMP/sr.err" ||
    rc=$?
  [[ $rc == 1 ]] && grep -q 'which sources ORDERS and others' "$TMP/sr.err" || {
    echo "rc $rc"
    cat "$TMP/sr.err"
    return 1
  }
  "$KEEL" stream rm SOURCED --force >/dev/null
}

t_stream_add_from_config_file() {
  echo '{"subjects":["cfg.*"],"max_bytes":1048576}' >"$TMP/cfg.json"
  "$KEEL" stream add FROMFILE --config "$TMP/cfg.json" --json \
    >"$TMP/ff.json" || return 1
  [[ $(json_get "$TMP/ff.json" 'j["config"]["max_bytes"]') == 1048576 ]]
}

t_stream_ls_lists_both_in_a_table() {
  "$KEEL" pub orders.new hello --count 3 >/dev/null 2>&1 || return 1
  "$KEEL" stream ls >"$TMP/ls.out" || return 1
  head -n1 "$TMP/ls.out" | grep -q 'Name *Subjects *Messages *Bytes' &&
    grep -Eq '^ORDERS +orders.> +3 ' "$TMP/ls.out" &&
    grep -q '^FROMFILE' "$TMP/ls.out" || return 1
  "$KEEL" stream ls --json >"$TMP/ls.json" || return 1
  [[ $(json_get "$TMP/ls.json" 'len(j)') == 2 ]]
}

t_stream_edit_changes_one_field() {
  "$KEEL" stream edit ORDERS --max-msgs 5000 >/dev/null || return 1
  "$KEEL" stream info ORDERS --json >"$TMP/e.json" || return 1
  [[ $(json_get "$TMP/e.json" 'j["config"]["max_msgs"]') == 5000 &&
    $(json_get "$TMP/e.json" 'j["config"]["subjects"][0]') == 'orders.>' ]]
}

t_stream_get_prints_the_message() {
  "$KEEL" pub orders.hdr body-with-header -H 'X-Trace: 7' >/dev/null 2>&1 ||
    return 1
  "$KEEL" stream get ORDERS 4 >"$TMP/get.out" || return 1
  grep -q 'orders.hdr' "$TMP/get.out" && grep -q '^X-Trace: 7' "$TMP/get.out" &&
    grep -q '^body-with-header$' "$TMP/get.out" || return 1
  "$KEEL" stream get ORDERS --last-for orders.new --json >"$TMP/get.json" ||
    return 1
  [[ $(json_get "$TMP/get.json" 'j["message"]["seq"]') == 3 ]]
}

t_missing_stream_exits_1_with_hint() {
  local rc=0
  "$KEEL" stream info NOPE 2>"$TMP/nope.err" || rc=$?
  [[ $rc == 1 ]] && grep -q 'stream not found' "$TMP/nope.err" &&
    grep -q "keel stream ls" "$TMP/nope.err"
}

t_usage_errors_exit_2() {
  local rc1=0 rc2=0 rc3=0
  "$KEEL" stream 2>/dev/null || rc1=$?
  "$KEEL" stream add 2>/dev/null || rc2=$?
  "$KEEL" stream add X --retention forever 2>/dev/null || rc3=$?
  [[ $rc1 == 2 && $rc2 == 2 && $rc3 == 2 ]]
}

t_consumer_add_ls_info_next_rm() {
  "$KEEL" consumer add ORDERS worker --filter 'orders.new' \
    >"$TMP/cadd.out" || return 1
  grep -q 'Mode: *pull' "$TMP/cadd.out" &&
    grep -q 'Unprocessed: *3' "$TMP/cadd.out" || return 1
  "$KEEL" consumer ls ORDERS >"$TMP/cls.out" || return 1
  grep -Eq '^worker +pull +explicit' "$TMP/cls.out" || return 1
  "$KEEL" consumer next ORDERS worker --count 2 >"$TMP/next.out" || return 1
  [[ $(grep -c '^hello$' "$TMP/next.out") == 2 ]] || return 1
  "$KEEL" consumer info ORDERS worker --json >"$TMP/ci.json" || return 1
  [[ $(json_get "$TMP/ci.json" 'j["num_pending"]') == 1 ]] || return 1
  poll_for consumer_acked || return 1
  "$KEEL" consumer rm ORDERS worker --force >/dev/null || return 1
  local rc=0
  "$KEEL" consumer info ORDERS worker 2>/dev/null || rc=$?
  [[ $rc == 1 ]]
}

consumer_acked() {
  "$KEEL" consumer info ORDERS worker --json >"$TMP/ca.json" &&
    [[ $(json_get "$TMP/ca.json" 'j["ack_floor"]["stream_seq"]') == 2 ]]
}

t_rm_without_terminal_needs_force() {
  local rc=0
  "$KEEL" stream rm FROMFILE </dev/null 2>"$TMP/rm.err" || rc=$?
  [[ $rc == 2 ]] && grep -q -- '--force' "$TMP/rm.err" || return 1
  "$KEEL" stream rm FROMFILE --force >/dev/null || return 1
  "$KEEL" stream purge ORDERS --force >"$TMP/purge.out" || return 1
  grep -q 'Purged 4 messages' "$TMP/purge.out"
}

# keel pub --jetstream waits for every copy's ack: the stream holds them
# all when it returns (checked anyway).
big_has_all() {
  "$KEEL" stream info BIG --json >"$TMP/big.json" 2>/dev/null &&
    [[ $(json_get "$TMP/big.json" 'j["state"]["messages"]') == "$1" ]]
}

t_backup_restore_round_trip() {
  "$KEEL" stream add BIG --subjects 'big.>' >/dev/null || return 1
  "$KEEL" pub big.h with-header -H "X-Seq: first" --jetstream >/dev/null 2>&1 || return 1
  "$KEEL" pub big.data 0123456789abcdef --jetstream \
    --count $((ROUND_TRIP_MSGS - 1)) >/dev/null 2>&1 || return 1
  big_has_all "$ROUND_TRIP_MSGS" || return 1
  local t0=$SECONDS
  "$KEEL" stream backup BIG "$TMP/big.bak" >"$TMP/bak.out" || return 1
  grep -Eq "^Backed up [0-9,]+ messages of stream BIG" "$TMP/bak.out" ||
    return 1
  "$KEEL" stream info BIG --json >"$TMP/before.json" || return 1
  "$KEEL" stream rm BIG --force >/dev/null || return 1
  "$KEEL" stream restore "$TMP/big.bak" >"$TMP/restore.out" || {
    cat "$TMP/restore.out"
    return 1
  }
  echo "# backup + restore of $ROUND_TRIP_MSGS messages: $((SECONDS - t0)) s"
  "$KEEL" stream info BIG --json >"$TMP/after.json" || return 1
  for k in messages bytes first_seq last_seq; do
    [[ $(json_get "$TMP/before.json" "j['state']['$k']") == \
      $(json_get "$TMP/after.json" "j['state']['$k']") ]] || return 1
  done
  "$KEEL" stream get BIG 1 >"$TMP/first.out" || return 1
  grep -q '^X-Seq: first' "$TMP/first.out" &&
    grep -q '^with-header$' "$TMP/first.out"
}

t_corrupt_archive_is_refused() {
  cp "$TMP/big.bak" "$TMP/bad.bak"
  printf '\xff' | dd of="$TMP/bad.bak" bs=1 seek=200 conv=notrunc 2>/dev/null
  local rc=0
  "$KEEL" stream restore "$TMP/bad.bak" --name BAD 2>"$TMP/bad.err" || rc=$?
  [[ $rc == 1 ]] && grep -q 'checksum' "$TMP/bad.err" || return 1
  # Nothing was created from a bad archive.
  rc=0
  "$KEEL" stream info BAD 2>/dev/null || rc=$?
  [[ $rc == 1 ]]
}

t_connection_flags_go_before_the_command() {
  local url=$NATS_URL
  (
    unset NATS_URL
    "$KEEL" -s "$url" stream ls >"$TMP/pre.out" 2>&1 &&
      "$KEEL" --server "$url" stream ls --json >"$TMP/pre.json" &&
      "$KEEL" stream --server="$url" info ORDERS >/dev/null &&
      "$KEEL" --server "$url" --timeout 2s cluster status --json \
        >"$TMP/cs.json"
  ) || return 1
  grep -q '^ORDERS ' "$TMP/pre.out" &&
    json_get "$TMP/pre.json" 'len(j)' >/dev/null &&
    json_get "$TMP/cs.json" 'type(j).__name__' >/dev/null || return 1
  # Only connection flags may lead; any other is a usage error that says so.
  local rc=0
  "$KEEL" --json stream ls 2>"$TMP/lead.err" || rc=$?
  [[ $rc == 2 ]] && grep -q 'before the command' "$TMP/lead.err"
}

t_api_errors_reach_the_user_as_sentences() {
  local rc=0
  "$KEEL" consumer next ORDERS nosuch --timeout 2s 2>"$TMP/nc.err" || rc=$?
  [[ $rc == 1 ]] && grep -q 'consumer not found' "$TMP/nc.err" || {
    cat "$TMP/nc.err"
    return 1
  }
  rc=0
  "$KEEL" consumer next NOSUCH c --timeout 2s 2>"$TMP/ns.err" || rc=$?
  [[ $rc == 1 ]] && grep -q 'stream not found' "$TMP/ns.err" || return 1
  # A 409 status ends the pull with the server's words and a hint.
  "$KEEL" req '$JS.API.CONSUMER.CREATE.ORDERS.small' \
    '{"stream_name":"ORDERS","config":{"durable_name":"small","ack_policy":"explicit","max_batch":1}}' \
    >/dev/null || return 1
  rc=0
  "$KEEL" consumer next ORDERS small --count 3 --timeout 2s \
    2>"$TMP/409.err" || rc=$?
  "$KEEL" consumer rm ORDERS small --force >/dev/null
  [[ $rc == 1 ]] && grep -q '409' "$TMP/409.err" &&
    grep -q 'lower --count' "$TMP/409.err" || {
    cat "$TMP/409.err"
    return 1
  }
  "$KEEL" consumer add ORDERS pushy --deliver pushy.out >/dev/null || return 1
  rc=0
  "$KEEL" consumer next ORDERS pushy 2>"$TMP/push.err" || rc=$?
  "$KEEL" consumer rm ORDERS pushy --force >/dev/null
  [[ $rc == 2 ]] && grep -q 'push consumer' "$TMP/push.err"
}

check "stream add prints the config and stream info --json parses" \
  t_stream_add_prints_config_and_json
check "stream add --config FILE.json takes the file's fields" \
  t_stream_add_from_config_file
check "stream ls prints an aligned table and --json an array" \
  t_stream_ls_lists_both_in_a_table
check "stream edit changes only the flags given" t_stream_edit_changes_one_field
check "stream get prints subject, headers and body" \
  t_stream_get_prints_the_message
check "a missing stream exits 1 and says how to list streams" \
  t_missing_stream_exits_1_with_hint
check "usage errors exit 2" t_usage_errors_exit_2
check "consumer add, ls, next (acks), info and rm" \
  t_consumer_add_ls_info_next_rm
check "connection flags work before the command and between its words" \
  t_connection_flags_go_before_the_command
check "a missing stream or consumer, a 409 or a push consumer fails keel consumer next with the server's sentence" \
  t_api_errors_reach_the_user_as_sentences
check "stream info shows a mirror's origin, lag and error; its archive is not restored" \
  t_stream_info_shows_the_mirror
check "stream info shows each source's origin; its archive is not restored" \
  t_stream_info_shows_the_sources
check "rm and purge need --force without a terminal" \
  t_rm_without_terminal_needs_force
check "backup and restore of $ROUND_TRIP_MSGS messages keep every message" \
  t_backup_restore_round_trip
check "a corrupted archive is refused before anything is created" \
  t_corrupt_archive_is_refused

cli_finish
