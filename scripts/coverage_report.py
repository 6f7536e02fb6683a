#!/usr/bin/env python3
"""Branch coverage of the validation code, from gcov's JSON files (gcc -ftest-coverage, gcov -j -b).

Usage: coverage_report.py BUILD_DIR SOURCE_DIR [--list N]

Validation code is every function of src/io/ (the file readers), of src/core/tensor.c (the shared tensor
checks) and src/ops/sequences.c, and in the operator files of src/ops/ the functions whose names say they
check: check*, *validate*, derive*, parse*, plan_sequences. A branch counts as covered when it was taken at
least once. Prints one line per file, the total, and the N functions with the most untaken branches."""
import gzip
import json
import os
import re
import subprocess
import sys
from collections import defaultdict

CHECKING = re.compile(r"(^|_)(check|validate|derive|parse)|plan_sequences")


def is_validation(path, function):
    if path.startswith("src/io/") or path in ("src/core/tensor.c", "src/ops/sequences.c"):
        return True
    return path.startswith("src/ops/") and CHECKING.search(function) is not None


def main():
    build, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    listing = int(sys.argv[sys.argv.index("--list") + 1]) if "--list" in sys.argv else 15
    notes = []
    for root, _, files in os.walk(build):
        notes += [os.path.join(root, f) for f in files if f.endswith(".gcda")]
    work = os.path.join(build, "gcov-json")
    os.makedirs(work, exist_ok=True)
    for n in notes:
        subprocess.run(["gcov", "-j", "-b", "-o", os.path.dirname(n), n], cwd=work, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    per_file = defaultdict(lambda: [0, 0])       # path -> [taken, total]
    per_function = defaultdict(lambda: [0, 0])   # (path, function) -> [taken, total]
    seen = set()
    for name in sorted(os.listdir(work)):
        if not name.endswith(".gcov.json.gz"):
            continue
        with gzip.open(os.path.join(work, name)) as f:
            data = json.load(f)
        for entry in data["files"]:
            path = os.path.relpath(os.path.join(data["current_working_directory"], entry["file"]), source)
            if not (path.startswith("src/") and path.endswith(".c")):
                continue
            for line in entry["lines"]:
                fn = line.get("function_name", "")
                key = (path, fn, line["line_number"])
                if key in seen or not is_validation(path, fn):
                    continue
                seen.add(key)
                for b in line["branches"]:
                    taken = 1 if b["count"] > 0 else 0
                    per_file[path][0] += taken
                    per_file[path][1] += 1
                    per_function[(path, fn)][0] += taken
                    per_function[(path, fn)][1] += 1
    if not per_file:
        sys.exit("no coverage data: build with --coverage and run the tests first")
    taken = sum(v[0] for v in per_file.values())
    total = sum(v[1] for v in per_file.values())
    print(f"{'file':40s} {'taken':>7s} {'branches':>9s} {'%':>6s}")
    for path in sorted(per_file):
        t, n = per_file[path]
        print(f"{path:40s} {t:7d} {n:9d} {100.0 * t / n:6.1f}")
    print(f"{'validation code, all files':40s} {taken:7d} {total:9d} {100.0 * taken / total:6.1f}")
    worst = sorted(per_function.items(), key=lambda kv: kv[1][0] - kv[1][1])[:listing]
    print(f"\nfunctions with the most untaken branches:")
    for (path, fn), (t, n) in worst:
        print(f"  {path}:{fn}: {n - t} of {n} untaken")


if __name__ == "__main__":
    main()
