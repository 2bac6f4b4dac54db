#!/usr/bin/env python3
"""Lint: no product file includes a header from a layer above its own.

Reads the layer ranks from tests/lint/layers.txt, the #include "..." lines
of every .c/.h under those folders, and fails naming the file, the header
and the rule for each include that reaches up (or sideways into a sibling
of the same rank). `--scc` also prints the largest strongly connected
component of the file graph (a .c depends on every header it includes, a
header on the headers it includes and on its own .c): a circle of files
that cannot be read, built or tested apart.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def load_layers(path):
    layers = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2 or not parts[0].isdigit():
                sys.exit(f"{path}:{n}: expected 'RANK FOLDER', got {line!r}")
            layers.append((parts[1].rstrip("/"), int(parts[0])))
    # Longest folder first: server/replica wins over a rule for server.
    layers.sort(key=lambda p: -len(p[0]))
    return layers


def layer_of(layers, rel):
    for folder, rank in layers:
        if rel == folder or rel.startswith(folder + "/"):
            return folder, rank
    return None, None


def product_files(root, layers):
    files = []
    for folder, _ in layers:
        top = os.path.join(root, folder)
        if os.path.isfile(top):
            files.append(folder)
            continue
        for d, _, names in os.walk(top):
            for name in names:
                if name.endswith((".c", ".h")):
                    rel = os.path.relpath(os.path.join(d, name), root)
                    if layer_of(layers, rel)[0] == folder:
                        files.append(rel)
    return sorted(set(files))


def resolve(rel, header, by_name, root):
    """The repository file an #include "header" names: the includer's own
    folder first (as the compiler looks), else the one product header of
    that name (include/ holds "keel/x.h" paths). None: not ours."""
    local = os.path.normpath(os.path.join(os.path.dirname(rel), header))
    if os.path.isfile(os.path.join(root, local)):
        return local
    inc = os.path.join("include", header)
    if os.path.isfile(os.path.join(root, inc)):
        return inc
    found = by_name.get(os.path.basename(header), [])
    return found[0] if len(found) == 1 else None


def graph(root, layers):
    files = product_files(root, layers)
    by_name = {}
    for f in files:
        if f.endswith(".h"):
            by_name.setdefault(os.path.basename(f), []).append(f)
    edges = {f: [] for f in files}
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8") as src:
            text = src.read()
        for m in INCLUDE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            target = resolve(f, m.group(1), by_name, root)
            if target is not None and target != f:
                edges[f].append((target, m.group(1), line))
    return files, edges


def violations(layers, edges):
    bad = []
    for f, outs in edges.items():
        folder, rank = layer_of(layers, f)
        for target, header, line in outs:
            tfolder, trank = layer_of(layers, target)
            if tfolder is None or tfolder == folder or trank < rank:
                continue
            how = "a higher" if trank > rank else "a sibling"
            bad.append(
                f"{f}:{line}: includes \"{header}\" ({target}) from {how} "
                f"layer: {folder} (rank {rank}) may include only its own "
                f"folder and layers below rank {rank}, not {tfolder} "
                f"(rank {trank}). Move the declaration down or have "
                f"{tfolder} register a hook into {folder} "
                f"(tests/lint/layers.txt)")
    return bad


def largest_scc(files, edges):
    adj = {f: [t for t, _, _ in edges[f]] for f in files}
    for f in files:
        if f.endswith(".h"):
            c = f[:-2] + ".c"
            if c in adj:
                adj[f].append(c)
    # Tarjan's algorithm, iterative (the graph has hundreds of nodes).
    index, low, on, stack, comps, n = {}, {}, set(), [], [], 0
    for start in files:
        if start in index:
            continue
        work = [(start, iter(adj[start]))]
        index[start] = low[start] = n
        n += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = n
                    n += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(adj[nxt])))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(sorted(comp))
    return max(comps, key=len) if comps else []


def main():
    root = os.path.normpath(os.path.join(os.path.dirname(__file__), "../.."))
    layers = load_layers(os.path.join(root, "tests/lint/layers.txt"))
    files, edges = graph(root, layers)
    if "--scc" in sys.argv:
        comp = largest_scc(files, edges)
        print(f"largest strongly connected component: {len(comp)} files")
        for f in comp:
            print(f"  {f}")
    bad = violations(layers, edges)
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} include(s) against the layer rule")
        return 1
    print(f"{len(files)} files, no include reaches up a layer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
