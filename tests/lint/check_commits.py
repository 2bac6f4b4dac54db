#!/usr/bin/env python3
"""Lint: commit messages read like a changelog.

Every commit after BASE (the tip of main when this check was added; the
history before it cannot be rewritten) must have a subject of at most 72
characters, and any further detail in a body separated from the subject
by a blank line. Skipped (exit 77) without git or without that history,
e.g. in a source tarball or a shallow clone.
"""
import os
import subprocess
import sys

BASE = "801cec5e93cbd078a6f48ebf22efa344a83ca67a"
SUBJECT_MAX = 72
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def git(*args):
    return subprocess.run(["git", "-C", ROOT] + list(args), check=True,
                          capture_output=True, text=True).stdout


def main():
    try:
        git("rev-parse", "--git-dir")
        git("cat-file", "-e", BASE + "^{commit}")
        git("merge-base", "--is-ancestor", BASE, "HEAD")
    except (OSError, subprocess.CalledProcessError):
        print(f"skipped: no git history containing {BASE[:12]}")
        return 77
    log = git("log", "--no-merges", "--format=%H%x00%B%x01",
              f"{BASE}..HEAD")
    bad = 0
    for rec in log.split("\x01"):
        rec = rec.strip("\n")
        if not rec:
            continue
        sha, _, msg = rec.partition("\x00")
        lines = msg.strip("\n").split("\n")
        subject = lines[0]
        if len(subject) > SUBJECT_MAX:
            print(f"{sha[:12]}: subject is {len(subject)} characters "
                  f"(at most {SUBJECT_MAX}): {subject[:60]}...")
            bad += 1
        if len(lines) > 1 and lines[1].strip() != "":
            print(f"{sha[:12]}: no blank line between the subject and the "
                  f"body: put the detail in a body after a blank line")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
