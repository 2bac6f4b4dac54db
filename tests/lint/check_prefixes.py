#!/usr/bin/env python3
"""Prefix lint: every external symbol of a product library carries its
module's prefix, so modules cannot clash and a reader can tell from a name
which module owns it.

usage: check_prefixes.py BUILD_ROOT SOURCE_ROOT PREFIX_TABLE

The libraries come from the build's own target list (meson-info), so a new
library is checked without being registered here: every static library a
meson.build outside tests/ and bench/ defines must have a line in
PREFIX_TABLE, or the lint fails. Executables named in the table are checked
the same way over everything linked into them statically.
"""
import json
import os
import subprocess
import sys

# What the C runtime and the linker define in every executable; names with a
# leading underscore are the implementation's (sanitizers, libFuzzer, crt).
EXE_RUNTIME = {"main", "data_start"}


def read_table(path):
    table = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].split()
            if not line:
                continue
            if len(line) < 2:
                sys.exit(f"{path}:{n}: want '<target> <prefix>...'")
            table[line[0]] = tuple(line[1:])
    return table


def product_targets(build_root, source_root):
    with open(os.path.join(build_root, "meson-info", "intro-targets.json"),
              encoding="utf-8") as f:
        targets = json.load(f)
    skip = tuple(os.path.join(source_root, d) + os.sep
                 for d in ("tests", "bench"))
    for t in targets:
        product = not t["defined_in"].startswith(skip)
        yield t["name"], t["type"], t["filename"][0], product


def external_symbols(path):
    out = subprocess.run(["nm", "-g", "--defined-only", path],
                         capture_output=True, text=True, check=True).stdout
    obj = os.path.basename(path)
    for line in out.splitlines():
        f = line.split()
        if len(f) == 1 and f[0].endswith(":"):
            obj = os.path.basename(f[0][:-1])
        elif len(f) == 3 and "@" not in f[2]:
            # name@VERSION: a shared library's (libc's stdout copied into
            # the executable), not ours.
            yield obj, f[2]


def check(name, kind, path, prefixes):
    bad = 0
    upper = tuple(p.upper() for p in prefixes)
    for obj, sym in external_symbols(path):
        if sym.startswith(("_", ".")):
            continue
        if kind == "executable" and sym in EXE_RUNTIME:
            continue
        if sym.startswith(prefixes):
            continue
        # Constants are UPPER_SNAKE with the prefix (STORE_META_CODEC_SEG).
        if sym.isupper() and sym.startswith(upper):
            continue
        print(f"{name}: {obj} exports '{sym}' without the prefix "
              f"{' or '.join(prefixes)}: make it static or prefix it")
        bad += 1
    return bad


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    build_root, source_root, table_path = sys.argv[1:]
    table = read_table(table_path)
    seen = set()
    bad = 0
    for name, kind, path, product in product_targets(build_root, source_root):
        if name in table:
            seen.add(name)
            if not os.path.exists(path):
                print(f"{name}: {path} is not built (build first)")
                bad += 1
                continue
            bad += check(name, kind, path, table[name])
        elif kind == "static library" and product:
            print(f"{name}: static library with no line in {table_path}: "
                  "add its module prefix there")
            bad += 1
    for name in sorted(set(table) - seen):
        print(f"{name}: in {table_path} but not a target of this build: "
              "remove or rename its line")
        bad += 1
    if bad:
        print(f"{bad} problem(s)")
        return 1
    print(f"prefixes ok: {len(seen)} targets checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
