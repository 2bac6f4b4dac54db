#!/usr/bin/env python3
"""Lint: code and docs cite the design documents that are in the repository.

Comments, strings and docs may cite docs/design.md and docs/protocol.md
by section (docs/design.md §4.7 R3, docs/protocol.md §2.8) and decision
records by number (docs/decisions/0015). This fails on a citation of a
document that is not in the repository (DESIGN.md, PROTOCOL.md, TRACES,
FAULTS.md, shared/..., README design notes), and on a section, rule or
decision that the cited document does not have. It also fails when
docs/architecture.md names a function or file the code no longer has.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SELF = os.path.relpath(os.path.abspath(__file__), ROOT)
CODE = re.compile(r"(\.(c|h|sh|py|mjs|js|build|md)|/(dev|cluster|faults|"
                  r"faults-powerloss|rolling-restart|bench-vs-nats))$")
SKIP = ("tests/js/node_modules/", "tests/fuzz/corpus/", "build/", ".git/")

# Documents that are not in the repository, however spelled.
GONE = [
    (re.compile(r"\bDESIGN(\.md)?\s*§|\bDESIGN\.md"), "DESIGN.md"),
    (re.compile(r"\bPROTOCOL(\.md)?\s*§|\bPROTOCOL\.md"), "PROTOCOL.md"),
    (re.compile(r"\bTRACES\b"), "TRACES.md"),
    (re.compile(r"\bFAULTS\.md|\bSTYLE\.md"), "FAULTS.md/STYLE.md"),
    (re.compile(r"\bshared/[A-Za-z]"), "shared/"),
    (re.compile(r"\b(README |design )notes? \d"), "README design notes"),
]
CITE = re.compile(r"docs/(design|protocol)\.md\s+§\s*(\d+(?:\.\d+)?)"
                  r"(?:\s*[-–]\s*(\d+(?:\.\d+)?))?"
                  r"(?:\s*,?\s+([DMRSA]\d)(?:\s*[-–]\s*([DMRSA]\d))?)?")
DECISION = re.compile(r"docs/decisions/(\d{4})(-[a-z0-9-]+\.md)?")
# A line break inside a comment: newline, indent, comment leader.
JOIN = re.compile(r"\s*\n\s*(?:\*(?!/)|#|//)?\s*")


WORD = re.compile(r"\b[a-z_][a-z0-9_]*\b")
# Docs that name functions and files of the code: each name must exist.
NAMED = ["docs/architecture.md"]


def names_unknown(words):
    """Backticked identifiers and paths in NAMED that the code lacks."""
    out = []
    for doc in NAMED:
        path = os.path.join(ROOT, doc)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for name in sorted(set(re.findall(r"`([a-z_][a-z0-9_]*)`", text))):
            if "_" in name and name not in words:
                out.append(f"{doc} names `{name}`, which no code has: "
                           f"update the doc")
        for p in sorted(set(re.findall(r"\b((?:server|store|raft|snapshot|"
                                       r"client|common|tests|include)"
                                       r"/[A-Za-z0-9_/.*-]*[A-Za-z0-9_*])",
                                       text))):
            if "*" not in p and not os.path.exists(os.path.join(ROOT, p)):
                out.append(f"{doc} names {p}, which does not exist: "
                           f"update the doc")
    return out


def files():
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
        names = out.split()
    except (OSError, subprocess.CalledProcessError):
        names = []
        for d, _, fs in os.walk(ROOT):
            for f in fs:
                names.append(os.path.relpath(os.path.join(d, f), ROOT))
    for n in sorted(names):
        if CODE.search(n) and n != SELF and not n.startswith(SKIP):
            yield n


def doc_index(name):
    """Sections ("4.7", "4") and rule ids ("R3") of docs/<name>.md."""
    path = os.path.join(ROOT, "docs", name + ".md")
    secs, rules = set(), set()
    if not os.path.exists(path):
        return secs, rules  # every citation of it fails below
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"#{2,4} (\d+(?:\.\d+)?)\.? ", line)
            if m:
                secs.add(m.group(1))
            for r in re.findall(r"\*\*([DMRSA]\d)\. ", line):
                rules.add(r)
    return secs, rules


def main():
    docs = {n: doc_index(n) for n in ("design", "protocol")}
    records = os.listdir(os.path.join(ROOT, "docs", "decisions"))
    decided = {f[:4] for f in records}
    bad = []
    words = set()
    for n in files():
        path = os.path.join(ROOT, n)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        for rx, what in GONE:
            for m in rx.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{n}:{line}: cites {what}, which is not in the "
                           f"repository: cite docs/design.md or "
                           f"docs/protocol.md by section")
        words.update(WORD.findall(text))
        flat = JOIN.sub(" ", text)
        for m in CITE.finditer(flat):
            secs, rules = docs[m.group(1)]
            for s in (m.group(2), m.group(3)):
                if s is not None and s not in secs:
                    bad.append(f"{n}: docs/{m.group(1)}.md has no §{s} "
                               f"(cited as \"{m.group(0)}\")")
            for r in (m.group(4), m.group(5)):
                if r is not None and r not in rules:
                    bad.append(f"{n}: docs/{m.group(1)}.md has no rule {r} "
                               f"(cited as \"{m.group(0)}\")")
        for m in DECISION.finditer(flat):
            if m.group(1) not in decided:
                bad.append(f"{n}: no docs/decisions/{m.group(1)}-*.md")
            elif m.group(2) and m.group(1) + m.group(2) not in records:
                bad.append(f"{n}: no docs/decisions/{m.group(1)}"
                           f"{m.group(2)} (renumbered or renamed?)")
    bad += names_unknown(words)
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
