#!/usr/bin/env python3
"""Build step: the JetStream API error table as C.

Reads srv_js_errors.json (one object a row: constant, code, error_code,
description, an optional comment; nats-server keeps its errors the same
way, in server/errors.json) and writes the SRV_JS_ERRORS(X) list that
srv_js_err.h expands into the enum and srv_js_err.c into the table.
Usage: gen_js_errors.py INPUT.json OUTPUT.h (meson runs it at build time:
server/jetstream/meson.build). A row it cannot carry exactly fails the
build with the row and what to fix.
"""
import json
import re
import sys

CONSTANT = re.compile(r"^SRV_JS_E[A-Z0-9_]+$")
KEYS = {"constant", "code", "error_code", "description", "comment"}


def fail(path, i, why):
    sys.exit(f"{path}: row {i + 1}: {why}")


def check(path, rows):
    if not isinstance(rows, list) or not rows:
        sys.exit(f"{path}: expected a non-empty JSON array of error rows")
    seen = set()
    for i, r in enumerate(rows):
        if not isinstance(r, dict) or not KEYS >= set(r) or \
                not {"constant", "code", "error_code", "description"} <= set(r):
            fail(path, i, f"use the keys {sorted(KEYS)} (comment optional)")
        if not isinstance(r["constant"], str) or \
                not CONSTANT.match(r["constant"]) or r["constant"] in seen:
            fail(path, i, "constant must be a new SRV_JS_E<NAME> (A-Z 0-9 _)")
        seen.add(r["constant"])
        for k, lo in (("code", 300), ("error_code", 10000)):
            if type(r[k]) is not int or not lo <= r[k] <= 99999:
                fail(path, i, f"{k} must be a whole number from {lo}")
        d = r["description"]
        # A C string literal carries printable ASCII as JSON writes it.
        if not isinstance(d, str) or not all(" " <= ch <= "~" for ch in d):
            fail(path, i, "description must be printable ASCII text")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: gen_js_errors.py INPUT.json OUTPUT.h")
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8") as f:
        rows = json.load(f)
    check(src, rows)
    out = [
        "/* Generated from server/jetstream/srv_js_errors.json by",
        " * gen_js_errors.py at build time: edit the JSON, not this file. */",
        "#define SRV_JS_ERRORS(X) \\",
    ]
    for r in rows:
        out.append(f"    X({r['constant']}, {r['code']}, {r['error_code']}, "
                   f"{json.dumps(r['description'])}) \\")
    out[-1] = out[-1][:-2]
    with open(dst, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
