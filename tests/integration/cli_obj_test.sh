#!/usr/bin/env bash
# CLI integration test of keel object against a real keeld: every verb
# (add, put, get, ls, info, del/rm, seal, watch; `keel obj` as the nats
# CLI's short name) with its output and exit code, -H headers and
# --metadata, a
# 3 MiB object in 128 KiB chunks got back byte for byte, a replaced object's
# chunks purged, a deleted object's chunks purged and its meta marked, and
# the refusals: a corrupt object (digest mismatch), a missing bucket or
# object, a file or object replaced without --force, bad names and flags.
# The progress bar shows on a terminal (script(1) gives one) and nowhere
# else. (tests/js/obj_cli.test.mjs checks interop with @nats-io/obj.)
# usage: cli_obj_test.sh KEEL     env KEELD=<keeld binary> (unset: skip, 77)
#
# Every wait is a bounded poll on a condition; keeld is started here and
# stopped by its PID.
set -uo pipefail

KEEL=${1:?usage: cli_obj_test.sh KEEL}
KEEL=$(realpath "$KEEL") # one test runs keel from another directory
POLL_TRIES=400 # x 0.025 s = 10 s for any one condition
TMP=$(mktemp -d)
CLI_TEST_NAME="the CLI object store test"
# shellcheck source=cli_lib.sh
. "$(dirname "$0")/cli_lib.sh"

BIG=$TMP/big.bin
head -c $((3 * 1024 * 1024)) /dev/urandom >"$BIG"
BIG_SHA=$(sha256sum "$BIG" | cut -d' ' -f1)

messages() { # messages STREAM: the count in its state
  "$KEEL" stream info "$1" --json >"$TMP/si.json" &&
    json_get "$TMP/si.json" 'j["state"]["messages"]'
}

t_add_sets_ttl_size_and_description() {
  "$KEEL" object add FILES --ttl 1h --max-bucket-size 64MiB --replicas 1 \
    --description 'test files' >"$TMP/add.out" 2>&1 || return 1
  grep -q 'Bucket Name: *FILES' "$TMP/add.out" &&
    grep -q 'Description: *test files' "$TMP/add.out" &&
    grep -q 'TTL: *1h0m' "$TMP/add.out" &&
    grep -q 'Maximum Bucket Size: *64.0 MiB' "$TMP/add.out" &&
    grep -q 'JetStream Stream: *OBJ_FILES' "$TMP/add.out" || return 1
  "$KEEL" object info FILES --json >"$TMP/info.json" || return 1
  [[ $(json_get "$TMP/info.json" 'j["config"]["max_age"]') == 3600000000000 &&
    $(json_get "$TMP/info.json" 'j["config"]["max_bytes"]') == 67108864 &&
    $(json_get "$TMP/info.json" 'j["config"]["allow_rollup_hdrs"]') == True &&
    $(json_get "$TMP/info.json" 'j["config"]["discard"]') == new &&
    $(json_get "$TMP/info.json" 'sorted(j["config"]["subjects"])') == \
    "['\$O.FILES.C.>', '\$O.FILES.M.>']" ]]
}

t_put_chunks_and_digests_a_large_file() {
  "$KEEL" object put FILES "$BIG" --name big.bin >"$TMP/put.out" \
    2>"$TMP/put.err" || return 1
  [[ ! -s $TMP/put.err ]] || return 1 # no progress bar into a file
  grep -q 'Object information for FILES > big.bin' "$TMP/put.out" &&
    grep -q 'Size: *3.0 MiB' "$TMP/put.out" &&
    grep -q 'Chunks: *24$' "$TMP/put.out" &&
    grep -q "Digest: *SHA-256 $BIG_SHA\$" "$TMP/put.out" || return 1
  [[ $(messages OBJ_FILES) == 25 ]] # 24 chunks and the meta
}

t_get_writes_the_same_bytes() {
  "$KEEL" object get FILES big.bin -O "$TMP/got.bin" >"$TMP/get.out" ||
    return 1
  grep -q "^Wrote: 3.0 MiB to $TMP/got.bin in " "$TMP/get.out" &&
    cmp -s "$BIG" "$TMP/got.bin" || return 1
  "$KEEL" object get FILES big.bin -O - | cmp -s "$BIG" - || return 1
  mkdir -p "$TMP/cwd" &&
    (cd "$TMP/cwd" && "$KEEL" object get FILES big.bin >/dev/null) &&
    cmp -s "$BIG" "$TMP/cwd/big.bin"
}

t_get_refuses_to_replace_a_file_without_force() {
  local rc=0
  printf keep >"$TMP/keep.bin"
  "$KEEL" object get FILES big.bin -O "$TMP/keep.bin" 2>"$TMP/keep.err" ||
    rc=$?
  [[ $rc == 2 && $(cat "$TMP/keep.bin") == keep ]] &&
    grep -q 'add --force' "$TMP/keep.err" || return 1
  "$KEEL" object get FILES big.bin -O "$TMP/keep.bin" -f >/dev/null &&
    cmp -s "$BIG" "$TMP/keep.bin"
}

t_put_replaces_and_purges_the_old_chunks() {
  local rc=0
  printf 'small one' >"$TMP/small.txt"
  "$KEEL" object put FILES "$TMP/small.txt" --name big.bin \
    2>"$TMP/rep.err" >/dev/null || rc=$?
  [[ $rc == 2 ]] && grep -q 'refusing to replace object big.bin' \
    "$TMP/rep.err" || return 1
  "$KEEL" object put FILES "$TMP/small.txt" --name big.bin -f \
    >/dev/null || return 1
  [[ $(messages OBJ_FILES) == 2 ]] || return 1 # one chunk, one meta
  [[ $("$KEEL" object get FILES big.bin -O -) == 'small one' ]] || return 1
  "$KEEL" object put FILES "$BIG" --name big.bin -f >/dev/null &&
    [[ $(messages OBJ_FILES) == 25 ]]
}

t_put_reads_stdin_with_a_name() {
  local rc=0
  printf 'from stdin' | "$KEEL" object put FILES --name notes/a.txt \
    >/dev/null || return 1
  [[ $("$KEEL" object get FILES notes/a.txt -O -) == 'from stdin' ]] ||
    return 1
  printf x | "$KEEL" object put FILES 2>"$TMP/noname.err" || rc=$?
  [[ $rc == 2 ]] && grep -q -- '--name' "$TMP/noname.err"
}

t_ls_lists_objects_and_buckets() {
  "$KEEL" object ls FILES >"$TMP/ls.out" || return 1
  head -n1 "$TMP/ls.out" | grep -q 'Name *Size *Time' &&
    grep -Eq '^big.bin +3.0 MiB ' "$TMP/ls.out" &&
    grep -Eq '^notes/a.txt +10 B ' "$TMP/ls.out" || return 1
  [[ $("$KEEL" object ls FILES --names | sort | tr '\n' ' ') == \
    'big.bin notes/a.txt ' ]] || return 1
  "$KEEL" stream add PLAIN --subjects 'plain.>' >/dev/null || return 1
  "$KEEL" kv add SOMEKV >/dev/null || return 1
  "$KEEL" object add SECOND >/dev/null || return 1
  [[ $("$KEEL" object ls SECOND) == 'No entries found' ]] || return 1
  "$KEEL" object ls >"$TMP/lsb.out" || return 1
  head -n1 "$TMP/lsb.out" | grep -q 'Bucket *Description *Created *Size' &&
    grep -Eq '^FILES +test files ' "$TMP/lsb.out" &&
    grep -Eq '^SECOND ' "$TMP/lsb.out" &&
    ! grep -Eq 'PLAIN|SOMEKV' "$TMP/lsb.out" || return 1
  "$KEEL" object ls --json >"$TMP/ls.json" || return 1
  [[ $(json_get "$TMP/ls.json" 'sorted(j)') == "['FILES', 'SECOND']" ]]
}

t_put_names_a_file_without_its_dot_slash() {
  (cd "$TMP" && "$KEEL" object put SECOND ./small.txt >/dev/null) &&
    [[ $("$KEEL" object ls SECOND --names) == small.txt ]]
}

t_info_shows_an_object() {
  "$KEEL" object info FILES big.bin >"$TMP/oi.out" || return 1
  grep -q "Digest: *SHA-256 $BIG_SHA\$" "$TMP/oi.out" &&
    grep -q 'Chunks: *24$' "$TMP/oi.out" || return 1
  "$KEEL" object info FILES big.bin --json >"$TMP/oi.json" || return 1
  [[ $(json_get "$TMP/oi.json" 'j["size"]') == 3145728 &&
    $(json_get "$TMP/oi.json" 'j["options"]["max_chunk_size"]') == 131072 &&
    $(json_get "$TMP/oi.json" 'j["deleted"]') == False ]]
}

t_get_refuses_a_digest_mismatch() {
  local rc=0
  # Rewrite big.bin's meta (same chunks) with the digest of other bytes.
  "$KEEL" object info FILES big.bin --json >"$TMP/m.json" || return 1
  local subj body
  subj=$(python3 -c 'import base64; print("$O.FILES.M." +
    base64.urlsafe_b64encode(b"big.bin").decode())')
  body=$(python3 -c 'import base64, hashlib, json, sys
m = json.load(open(sys.argv[1]))
d = base64.urlsafe_b64encode(hashlib.sha256(b"other").digest()).decode()
m["digest"] = "SHA-256=" + d
print(json.dumps(m))' "$TMP/m.json")
  "$KEEL" pub --jetstream "$subj" "$body" -H 'Nats-Rollup: sub' \
    >/dev/null || return 1
  "$KEEL" object get FILES big.bin -O "$TMP/bad.bin" 2>"$TMP/bad.err" ||
    rc=$?
  [[ $rc == 1 ]] && grep -q 'object big.bin is corrupt' "$TMP/bad.err" &&
    grep -q 'no file was written' "$TMP/bad.err" || return 1
  # Neither the target nor a temporary file is left behind.
  [[ ! -e $TMP/bad.bin ]] && ! compgen -G "$TMP/bad.bin.*" >/dev/null
}

t_rm_purges_chunks_and_marks_deleted() {
  local rc=0
  "$KEEL" object rm FILES big.bin 2>/dev/null || rc=$?
  [[ $rc == 2 ]] || return 1 # no terminal to ask: needs --force
  [[ $("$KEEL" object rm FILES big.bin -f) == 'Removed FILES > big.bin' ]] ||
    return 1
  "$KEEL" object info FILES big.bin >"$TMP/del.out" || return 1
  grep -q 'Deleted: *true' "$TMP/del.out" || return 1
  # big.bin's meta, and notes/a.txt's chunk and meta.
  [[ $(messages OBJ_FILES) == 3 ]] || return 1
  rc=0
  "$KEEL" object get FILES big.bin -O "$TMP/gone" 2>"$TMP/gone.err" || rc=$?
  [[ $rc == 1 ]] && grep -q 'object big.bin was deleted' "$TMP/gone.err" &&
    [[ $("$KEEL" object ls FILES --names) == notes/a.txt ]]
}

t_headers_and_metadata_reach_the_meta_and_the_stream() {
  local rc=0 before
  "$KEEL" object add META --metadata owner=ops --metadata 'tier=cold one' \
    >/dev/null || return 1
  "$KEEL" object info META --json >"$TMP/md.json" || return 1
  [[ $(json_get "$TMP/md.json" 'j["config"]["metadata"]["owner"]') == ops &&
    $(json_get "$TMP/md.json" 'j["config"]["metadata"]["tier"]') == \
    'cold one' ]] || return 1
  "$KEEL" object put META "$TMP/small.txt" --name h.txt \
    -H 'Content-Type: text/plain' -H 'X-A:1' -H 'X-A:2' >/dev/null || return 1
  "$KEEL" object info META h.txt --json >"$TMP/h.json" || return 1
  [[ $(json_get "$TMP/h.json" 'j["headers"]') == \
    "{'Content-Type': ['text/plain'], 'X-A': ['1', '2']}" ]] || return 1
  # A bad header is refused before a chunk is written.
  before=$(messages OBJ_META)
  "$KEEL" object put META "$TMP/small.txt" --name bad.txt -H 'nokey' \
    2>"$TMP/hbad.err" >/dev/null || rc=$?
  [[ $rc == 2 ]] && grep -q "header 'nokey' must look like Key:Value" \
    "$TMP/hbad.err" && [[ $(messages OBJ_META) == "$before" ]] || return 1
  rc=0
  "$KEEL" object add META2 --metadata '=x' 2>"$TMP/mbad.err" || rc=$?
  [[ $rc == 2 ]] && grep -q "must look like Key=Value" "$TMP/mbad.err"
}

t_no_progress_draws_nothing_on_a_terminal() {
  script -qec "'$KEEL' object put FILES '$BIG' --name np.bin -f --no-progress" \
    "$TMP/np.log" >/dev/null || return 1
  grep -q 'Object information for FILES > np.bin' "$TMP/np.log" &&
    ! grep -q '100%' "$TMP/np.log" || return 1
  script -qec "'$KEEL' object get FILES np.bin -O '$TMP/np.bin' -f --no-progress" \
    "$TMP/np2.log" >/dev/null || return 1
  ! grep -q '100%' "$TMP/np2.log" && cmp -s "$BIG" "$TMP/np.bin"
}

t_obj_short_name_and_del_verb() {
  "$KEEL" obj ls FILES --names >"$TMP/short.out" || return 1
  grep -qx 'w.txt' "$TMP/short.out" || return 1
  "$KEEL" str ls 2>&1 | grep -q OBJ_FILES || return 1
  [[ $("$KEEL" object del FILES w.txt -f) == 'Removed FILES > w.txt' ]] &&
    ! "$KEEL" obj ls FILES --names | grep -qx 'w.txt'
}

t_seal_refuses_puts_and_deletes() {
  local rc=0
  "$KEEL" object seal META 2>/dev/null || rc=$?
  [[ $rc == 2 ]] || return 1 # no terminal to ask: needs --force
  "$KEEL" object seal META -f >"$TMP/seal.out" || return 1
  grep -q '^META has been sealed$' "$TMP/seal.out" &&
    grep -q 'Sealed: *true' "$TMP/seal.out" || return 1
  rc=0
  "$KEEL" object put META "$TMP/small.txt" --name after.txt \
    2>"$TMP/sput.err" >/dev/null || rc=$?
  [[ $rc == 1 ]] || return 1
  rc=0
  "$KEEL" object del META h.txt -f 2>"$TMP/sdel.err" >/dev/null || rc=$?
  [[ $rc == 1 ]] || return 1
  # What it held is still there.
  "$KEEL" object get META h.txt -O - | cmp -s "$TMP/small.txt" -
}

watch_saw() { grep -qs "$1" "$TMP/watch.out"; }

t_watch_prints_objects_then_changes() {
  "$KEEL" object watch FILES --count 3 >"$TMP/watch.out" 2>&1 &
  WATCH_PID=$!
  # The current meta of each object first (big.bin's says deleted).
  poll_for watch_saw 'PUT FILES > notes/a.txt: 10 B in 1 chunks$' || return 1
  printf 'watched' | "$KEEL" object put FILES --name w.txt >/dev/null ||
    return 1
  poll_for watch_saw 'PUT FILES > w.txt: 7 B in 1 chunks$' || return 1
  wait "$WATCH_PID" || return 1
  WATCH_PID=
  grep -q 'DEL FILES > big.bin$' "$TMP/watch.out"
}

t_progress_bar_only_on_a_terminal() {
  # script(1) runs keel on a pseudo-terminal: stderr is a TTY there.
  script -qec "'$KEEL' object put FILES '$BIG' --name tty.bin -f" \
    "$TMP/tty.log" >/dev/null || return 1
  grep -q '100%  3,145,728/3,145,728 bytes' "$TMP/tty.log" || return 1
  script -qec "'$KEEL' object get FILES tty.bin -O '$TMP/tty.bin' -f" \
    "$TMP/tty2.log" >/dev/null || return 1
  grep -q '100%  3,145,728/3,145,728 bytes' "$TMP/tty2.log" &&
    cmp -s "$BIG" "$TMP/tty.bin" || return 1
  # The same get into a pipe draws nothing.
  "$KEEL" object get FILES tty.bin -O - 2>"$TMP/pipe.err" | cmp -s "$BIG" - &&
    [[ ! -s $TMP/pipe.err ]]
}

t_missing_bucket_or_object_exits_1_with_hint() {
  local rc1=0 rc2=0
  "$KEEL" object get NOPE x 2>"$TMP/nope.err" || rc1=$?
  [[ $rc1 == 1 ]] && grep -q 'bucket NOPE not found' "$TMP/nope.err" &&
    grep -q "keel object add NOPE" "$TMP/nope.err" || return 1
  "$KEEL" object info FILES none 2>"$TMP/none.err" || rc2=$?
  [[ $rc2 == 1 ]] && grep -q 'object none not found in bucket FILES' \
    "$TMP/none.err" && grep -q "keel object ls FILES" "$TMP/none.err"
}

t_bad_names_and_flags_exit_2() {
  local rc1=0 rc2=0 rc3=0 rc4=0 rc5=0
  "$KEEL" object 2>/dev/null || rc1=$?
  "$KEEL" object add 'bad.name' 2>/dev/null || rc2=$?
  "$KEEL" object add X --replicas 7 2>/dev/null || rc3=$?
  "$KEEL" object get FILES 2>/dev/null || rc4=$?
  "$KEEL" object put FILES "$TMP/small.txt" --name '' 2>/dev/null || rc5=$?
  [[ $rc1 == 2 && $rc2 == 2 && $rc3 == 2 && $rc4 == 2 && $rc5 == 2 ]]
}

t_help_lists_the_verbs() {
  "$KEEL" --help | grep -q '^  object ' || return 1
  "$KEEL" object --help >"$TMP/help.out" || return 1
  local v
  for v in add put get ls info del rm seal watch; do
    grep -q "^  object $v " "$TMP/help.out" || return 1
  done
}

t_rm_deletes_the_bucket() {
  local rc=0
  "$KEEL" object rm SECOND 2>/dev/null || rc=$?
  [[ $rc == 2 ]] || return 1
  [[ $("$KEEL" object rm SECOND -f) == 'Deleted bucket SECOND' ]] || return 1
  rc=0
  "$KEEL" object info SECOND 2>/dev/null || rc=$?
  [[ $rc == 1 ]] &&
    [[ $("$KEEL" object ls --names | sort | tr '\n' ' ') == 'FILES META ' ]]
}

check "object add sets TTL, size, description; info --json shows the stream" \
  t_add_sets_ttl_size_and_description
check "object put stores 3 MiB as 24 chunks and a meta with its SHA-256" \
  t_put_chunks_and_digests_a_large_file
check "object get writes the same bytes (-O FILE, -O -, default name)" \
  t_get_writes_the_same_bytes
check "object get refuses to replace a file without --force" \
  t_get_refuses_to_replace_a_file_without_force
check "object put replaces an object (with --force) and purges its chunks" \
  t_put_replaces_and_purges_the_old_chunks
check "object put reads stdin when given --name" t_put_reads_stdin_with_a_name
check "object ls lists the objects, or the buckets and no other stream" \
  t_ls_lists_objects_and_buckets
check "object put FILE names the object FILE without a leading ./" \
  t_put_names_a_file_without_its_dot_slash
check "object info BUCKET NAME shows size, chunks and digest" \
  t_info_shows_an_object
check "object get refuses an object whose bytes do not match its digest" \
  t_get_refuses_a_digest_mismatch
check "object rm purges the chunks and leaves a deleted meta" \
  t_rm_purges_chunks_and_marks_deleted
check "object watch prints the objects, then each put and delete" \
  t_watch_prints_objects_then_changes
check "put and get draw a progress bar on a terminal only" \
  t_progress_bar_only_on_a_terminal
check "put and get with --no-progress draw none, even on a terminal" \
  t_no_progress_draws_nothing_on_a_terminal
check "put -H and add --metadata reach the object meta and the stream" \
  t_headers_and_metadata_reach_the_meta_and_the_stream
check "keel obj is keel object (str: stream); object del deletes like rm" \
  t_obj_short_name_and_del_verb
check "object seal needs --force, then refuses puts and deletes" \
  t_seal_refuses_puts_and_deletes
check "a missing bucket or object exits 1 and says how to list them" \
  t_missing_bucket_or_object_exits_1_with_hint
check "bad names, flags and missing arguments exit 2" \
  t_bad_names_and_flags_exit_2
check "keel --help and keel object --help list the verbs" \
  t_help_lists_the_verbs
check "object rm BUCKET needs --force without a terminal and deletes it" \
  t_rm_deletes_the_bucket

cli_finish
