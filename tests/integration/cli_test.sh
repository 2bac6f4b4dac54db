#!/usr/bin/env bash
# CLI integration test: keel pub/sub/req/reply/bench against a real keeld.
# usage: cli_test.sh KEEL     env KEELD=<keeld binary> (unset: skip, exit 77)
# KEEL_TEST_NATS_SERVER=<nats-server binary> runs it against nats-server
# instead, to tell a CLI bug from a server bug.
#
# Every wait is a bounded poll on a condition (a ports file, a "ready" line);
# every process is started here and stopped by its PID.
set -uo pipefail

KEEL=${1:?usage: cli_test.sh KEEL}
POLL_TRIES=400 # x 0.025 s = 10 s for any one condition
TMP=$(mktemp -d)
SERVER_PID=
BG_PIDS=()
PASS=0
FAIL=0

cleanup() {
  local p
  for p in "${BG_PIDS[@]}" $SERVER_PID; do
    kill "$p" 2>/dev/null
  done
  rm -rf "$TMP"
}
trap cleanup EXIT

# poll_for CMD...: run CMD until it succeeds, at most POLL_TRIES times.
poll_for() {
  local i
  for ((i = 0; i < POLL_TRIES; i++)); do
    "$@" && return 0
    sleep 0.025
  done
  return 1
}

start_server() {
  local name
  if [[ -n ${KEELD:-} && -x ${KEELD} ]]; then
    name=keeld
    mkdir -p "$TMP/data"
    "$KEELD" -a 127.0.0.1 -p 0 -m 0 -sd "$TMP/data" \
      --ports_file_dir "$TMP" 2>"$TMP/server.log" &
  elif [[ -n ${KEEL_TEST_NATS_SERVER:-} ]]; then
    name=nats-server
    "$KEEL_TEST_NATS_SERVER" -a 127.0.0.1 -p -1 --ports_file_dir "$TMP" \
      2>"$TMP/server.log" &
  else
    echo "keeld is not built yet: skipping the CLI integration test"
    exit 77
  fi
  SERVER_PID=$!
  SERVER_NAME=$name
  local ports="$TMP/${name}_${SERVER_PID}.ports"
  if ! poll_for test -s "$ports"; then
    echo "$name wrote no ports file; its log:" >&2
    cat "$TMP/server.log" >&2
    exit 1
  fi
  NATS_URL=$(grep -o 'nats://[^"]*' "$ports" | head -n1)
  export NATS_URL
}

# Start `keel ARGS` in the background; stdout/stderr to $TMP/NAME.{out,err}.
bg_keel() {
  local name=$1
  shift
  timeout 20 "$KEEL" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
  BG_PIDS+=($!)
  LAST_PID=$!
}

check() { # check "behaviour sentence" test_function
  local desc=$1
  shift
  if "$@"; then
    echo "ok - $desc"
    PASS=$((PASS + 1))
  else
    echo "not ok - $desc"
    FAIL=$((FAIL + 1))
  fi
}

t_pub_sub_round_trip() {
  bg_keel sub sub cli.rt --count 2 --raw
  local pid=$LAST_PID
  poll_for grep -q Subscribed "$TMP/sub.err" || return 1
  "$KEEL" pub cli.rt one 2>/dev/null || return 1
  "$KEEL" pub cli.rt two 2>/dev/null || return 1
  wait "$pid" || return 1
  [[ $(cat "$TMP/sub.out") == $'one\ntwo' ]]
}

t_headers_and_wildcards() {
  bg_keel hsub sub 'cli.h.>' --count 1
  local pid=$LAST_PID
  poll_for grep -q Subscribed "$TMP/hsub.err" || return 1
  "$KEEL" pub cli.h.a.b body -H 'X-Keel: yes' 2>/dev/null || return 1
  wait "$pid" || return 1
  grep -q '^\[#1\] Received on "cli.h.a.b"' "$TMP/hsub.out" &&
    grep -q '^X-Keel: yes$' "$TMP/hsub.out" && grep -q '^body$' "$TMP/hsub.out"
}

t_req_gets_reply() {
  bg_keel reply reply cli.svc pong --count 1
  local pid=$LAST_PID
  poll_for grep -q Listening "$TMP/reply.err" || return 1
  local out
  out=$("$KEEL" req cli.svc ping) || return 1
  wait "$pid" || return 1
  [[ $out == pong ]] && grep -q '^ping$' "$TMP/reply.out"
}

t_req_without_responder_exits_1() {
  local rc=0
  "$KEEL" req cli.nobody x 2>"$TMP/nr.err" || rc=$?
  [[ $rc == 1 ]] && grep -q 'no responders' "$TMP/nr.err"
}

t_unknown_flag_exits_2() {
  local rc1=0 rc2=0
  "$KEEL" --bogus 2>"$TMP/bogus.err" || rc1=$?
  "$KEEL" pub cli.x --bogus 2>>"$TMP/bogus.err" || rc2=$?
  [[ $rc1 == 2 && $rc2 == 2 && $(wc -l <"$TMP/bogus.err") == 2 ]]
}

t_no_server_exits_1_with_hint() {
  local rc=0
  # Port 1 is privileged and unused: connecting is refused at once.
  "$KEEL" pub cli.x hi -s nats://127.0.0.1:1 2>"$TMP/noserver.err" || rc=$?
  [[ $rc == 1 ]] && grep -q 'cannot connect to nats://127.0.0.1:1' \
    "$TMP/noserver.err" && grep -q 'is keeld running' "$TMP/noserver.err"
}

t_bench_pubsub_loses_nothing() {
  "$KEEL" bench pubsub cli.bench --msgs 20000 --size 64 --sub 2 --json \
    >"$TMP/bench.json" 2>"$TMP/bench.err" || { cat "$TMP/bench.err"; return 1; }
  grep -q '"lost":0,"dropped":0,"slow_consumers":0' "$TMP/bench.json"
}

t_bench_req_reports_percentiles() {
  "$KEEL" bench req cli.breq --msgs 500 --size 16 >"$TMP/breq.out" \
    2>"$TMP/breq.err" || return 1
  grep -q 'latency *p50 .* p90 .* p99 .* max' "$TMP/breq.out"
}

t_queue_group_shares_messages() {
  bg_keel q1 sub cli.q --queue workers --raw
  local p1=$LAST_PID
  bg_keel q2 sub cli.q --queue workers --raw
  local p2=$LAST_PID
  poll_for grep -q Subscribed "$TMP/q1.err" || return 1
  poll_for grep -q Subscribed "$TMP/q2.err" || return 1
  "$KEEL" pub cli.q m --count 20 2>/dev/null || return 1
  # Both members run until killed: wait until 20 lines arrived in total.
  poll_for eval '[[ $(cat "$TMP/q1.out" "$TMP/q2.out" | wc -l) -ge 20 ]]'
  local rc=$?
  kill "$p1" "$p2"
  wait "$p1" "$p2" 2>/dev/null
  [[ $rc == 0 && $(cat "$TMP/q1.out" "$TMP/q2.out" | wc -l) == 20 ]]
}

t_bench_sub_counts_a_separate_bench_pub() {
  bg_keel bsub bench sub cli.bs --msgs 5000 --size 32 --sub 2 --json
  local pid=$LAST_PID
  poll_for grep -q ready "$TMP/bsub.err" || return 1
  "$KEEL" bench pub cli.bs --msgs 5000 --size 32 >/dev/null || return 1
  wait "$pid" || return 1
  grep -q '"sub_msgs_per_s"' "$TMP/bsub.out" &&
    grep -q '"lost":0,' "$TMP/bsub.out"
}

t_bench_sub_fails_when_messages_are_missing() {
  bg_keel bmiss bench sub cli.bm --msgs 1000 --size 8 --stall 300ms
  local pid=$LAST_PID
  poll_for grep -q ready "$TMP/bmiss.err" || return 1
  "$KEEL" bench pub cli.bm --msgs 500 --size 8 >/dev/null || return 1
  local rc=0
  wait "$pid" || rc=$?
  [[ $rc == 1 ]] && grep -q 'no progress' "$TMP/bmiss.err"
}

t_passwd_prints_a_salted_hash() {
  local a b rc=0
  a=$(printf 'pw\n' | "$KEEL" passwd --iterations 1000) || return 1
  b=$(printf 'pw\n' | "$KEEL" passwd --iterations 1000) || return 1
  "$KEEL" passwd --bogus 2>/dev/null || rc=$?
  # Same password, fresh salt each time: the hashes differ.
  [[ $a == '$pbkdf2-sha256$i=1000$'* && $b == '$pbkdf2-sha256$i=1000$'* &&
    $a != "$b" && $rc == 2 ]]
}

t_server_exits_0_on_sigterm() {
  [[ $SERVER_NAME == keeld ]] || return 0 # nats-server exits 1 by design
  kill -TERM "$SERVER_PID"
  local rc=0
  wait "$SERVER_PID" || rc=$?
  SERVER_PID=
  [[ $rc == 0 ]]
}

start_server
t_bad_subjects_are_refused_before_sending() {
  local rc=0
  "$KEEL" pub 'bad subj' x 2>"$TMP/bs.err" || rc=$?
  [[ $rc == 2 ]] && grep -q 'white space' "$TMP/bs.err" || return 1
  rc=0
  "$KEEL" pub 'a.*' x 2>"$TMP/bs.err" || rc=$?
  [[ $rc == 2 ]] && grep -q 'wildcards' "$TMP/bs.err" || return 1
  rc=0
  "$KEEL" sub 'a..b' 2>"$TMP/bs.err" || rc=$?
  [[ $rc == 2 ]] && grep -q 'empty token' "$TMP/bs.err"
}

t_connection_flags_before_the_command() {
  local url=$NATS_URL
  (unset NATS_URL && "$KEEL" -s "$url" pub lead.x hi 2>"$TMP/lead.err") &&
    grep -q 'Published 1 message' "$TMP/lead.err" || return 1
  local rc=0
  "$KEEL" -s 2>"$TMP/lead.err" || rc=$?
  [[ $rc == 2 ]] && grep -q 'needs a value' "$TMP/lead.err"
}

check "keel sub prints what keel pub sends, in order" t_pub_sub_round_trip
check "keel sub shows headers and matches > wildcards" t_headers_and_wildcards
check "keel req prints the reply of keel reply" t_req_gets_reply
check "keel req without a responder exits 1 saying so" \
  t_req_without_responder_exits_1
check "an unknown flag is a one-line usage error with exit 2" \
  t_unknown_flag_exits_2
check "keel pub with no server exits 1 and says what to do" \
  t_no_server_exits_1_with_hint
check "keel bench pubsub delivers every message" t_bench_pubsub_loses_nothing
check "keel bench req prints latency percentiles" \
  t_bench_req_reports_percentiles
check "queue group members share messages, each delivered once" \
  t_queue_group_shares_messages
check "keel bench sub counts what a separate keel bench pub sends" \
  t_bench_sub_counts_a_separate_bench_pub
check "keel bench sub exits 1 when messages never arrive" \
  t_bench_sub_fails_when_messages_are_missing
check "keel passwd prints a salted PBKDF2 hash; a bad flag exits 2" \
  t_passwd_prints_a_salted_hash
check "a bad subject is a usage error naming what is wrong" \
  t_bad_subjects_are_refused_before_sending
check "connection flags may come before the command" \
  t_connection_flags_before_the_command
check "the server exits 0 on SIGTERM" t_server_exits_0_on_sigterm
echo "cli: $PASS ok, $FAIL not ok"
[[ $FAIL == 0 ]]
