# Shared by the keel CLI tests that run against one keeld (cli_js_test.sh,
# cli_kv_test.sh): source it after setting KEEL, POLL_TRIES and TMP. A
# test's own background process kept in WATCH_PID is stopped on exit too.
# It starts keeld with -p 0 (its ports file in $TMP), exports NATS_URL,
# stops keeld by its PID on exit, and gives poll_for, check and json_get.
# usage: CLI_TEST_NAME="the CLI KV test"; . "$(dirname "$0")/cli_lib.sh"

SERVER_PID=
WATCH_PID=
PASS=0
FAIL=0

cli_cleanup() {
  [[ -n $WATCH_PID ]] && kill "$WATCH_PID" 2>/dev/null
  [[ -n $SERVER_PID ]] && kill "$SERVER_PID" 2>/dev/null
  rm -rf "$TMP"
}
trap cli_cleanup EXIT

poll_for() { # poll_for CMD...: true once CMD is, within POLL_TRIES x 25 ms
  local i
  for ((i = 0; i < POLL_TRIES; i++)); do
    "$@" && return 0
    sleep 0.025
  done
  return 1
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

# json_get FILE EXPR: evaluate a python expression on the parsed JSON `j`.
json_get() {
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"
}

# Stop keeld, print the tally, and succeed only when nothing failed.
cli_finish() {
  kill "$SERVER_PID" 2>/dev/null
  wait "$SERVER_PID" 2>/dev/null
  SERVER_PID=
  echo "$PASS passed, $FAIL failed"
  [[ $FAIL == 0 ]]
}

if [[ -z ${KEELD:-} || ! -x ${KEELD} ]]; then
  echo "keeld is not built yet: skipping ${CLI_TEST_NAME:-the CLI test}"
  exit 77
fi
mkdir -p "$TMP/data"
"$KEELD" -a 127.0.0.1 -p 0 -m 0 -sd "$TMP/data" --ports_file_dir "$TMP" \
  2>"$TMP/server.log" &
SERVER_PID=$!
if ! poll_for test -s "$TMP/keeld_${SERVER_PID}.ports"; then
  echo "keeld wrote no ports file; its log:" >&2
  cat "$TMP/server.log" >&2
  exit 1
fi
NATS_URL=$(grep -o 'nats://[^"]*' "$TMP/keeld_${SERVER_PID}.ports" | head -n1)
export NATS_URL
