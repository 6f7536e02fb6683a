#!/usr/bin/env python3
"""Checks that the repository is self-contained: every § citation and rule ID (V1-V10, A1-A7) that code and
documents use resolves to an anchor of docs/OPERATORS.md; every quoted section of docs/CASES.md ('CASES.md
"lightning_indexer, V3.2 configuration"') exists there; no file points outside the repository (a path through
../, or to a specification file the repository does not hold); every relative Markdown link resolves.
usage: scripts/check_refs.py [REPO_ROOT]    exit 0: all resolve; 1: the failures are listed."""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
SOURCES = ("include", "src", "ref", "tests", "tools", "bench", "harness", "python", "scripts", "docs", ".ci")
SUFFIXES = (".c", ".h", ".py", ".md", ".sh", ".txt", "run")
RULES = ["V%d" % i for i in range(1, 11)] + ["A%d" % i for i in range(1, 8)]


def files():
    yield os.path.join(ROOT, "README.md")
    yield os.path.join(ROOT, "CMakeLists.txt")
    for top in SOURCES:
        for d, subdirs, names in os.walk(os.path.join(ROOT, top)):
            subdirs[:] = [s for s in subdirs if not s.startswith("build")]
            for n in names:
                if n.endswith(SUFFIXES):
                    yield os.path.join(d, n)


def anchors(path):
    with open(path, encoding="utf-8") as f:
        return set(re.findall(r'<a id="([^"]+)"></a>', f.read()))


def headings(path):
    with open(path, encoding="utf-8") as f:
        return {m.strip().lower() for m in re.findall(r"^#+\s+(.*)$", f.read(), re.M)}


def main():
    ops, cases = os.path.join(ROOT, "docs", "OPERATORS.md"), os.path.join(ROOT, "docs", "CASES.md")
    bad = []
    for must in (ops, cases):
        if not os.path.exists(must):
            bad.append(f"{os.path.relpath(must, ROOT)} is missing")
    if bad:
        print("\n".join(bad))
        return 1
    have, case_sections = anchors(ops), headings(cases)
    bad += [f"docs/OPERATORS.md: rule {r} has no anchor" for r in RULES if r not in have]
    outside = re.compile(r"\.\./shared|shared/(spec|seeds|peers)|\bspec/[A-Z]+\.md|(?<![\w/])(OPS|MODELS|PEERS)\.md")
    section = re.compile(r"§\s?(\d+(?:\.\d+)*)")
    quoted = re.compile(r'CASES\.md,?\s+"([^"]+)"')
    link = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")
    seen = 0
    for path in files():
        rel = os.path.relpath(path, ROOT)
        if rel == os.path.join("scripts", "check_refs.py"):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for no, line in enumerate(text.splitlines(), 1):
            for m in section.finditer(line):
                seen += 1
                if "s" + m.group(1) not in have:
                    bad.append(f"{rel}:{no}: §{m.group(1)} has no anchor s{m.group(1)} in docs/OPERATORS.md")
            for m in quoted.finditer(line):
                if m.group(1).strip().lower() not in case_sections:
                    bad.append(f'{rel}:{no}: docs/CASES.md has no section "{m.group(1)}"')
            if outside.search(line):
                bad.append(f"{rel}:{no}: points outside the repository: {line.strip()[:100]}")
            if rel.endswith(".md"):
                for m in link.finditer(line):
                    target = m.group(1)
                    if re.match(r"[a-z]+:", target):
                        continue
                    if not os.path.exists(os.path.normpath(os.path.join(os.path.dirname(path), target))):
                        bad.append(f"{rel}:{no}: link to {target} does not resolve")
    for b in bad:
        print(b)
    print(f"check_refs: {seen} § citations, {len(RULES)} rules, {len(have)} anchors; "
          f"{'all resolve' if not bad else str(len(bad)) + ' problem(s)'}")
    return 1 if bad else 0


sys.exit(main())
