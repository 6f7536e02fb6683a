#!/usr/bin/env python3
"""Every CI-sized named case of the registry (`dsops bench --list`) through the file interface, one generic loop:
no operator is named here.

Per case whose work and bytes stay under --max-work / --max-bytes (and, for an operator with none, its smallest):

    dsops case NAME --inputs IN       the case's call as a file: inputs, in-out tensors, parameters (metadata)
    dsops run OP --in IN --out OUT    at --threads 1 and 3: the same bytes in every tensor of OUT
    dsops case NAME --check OUT       OUT against the oracle at the operator's tolerance (the family's check in
                                      harness/, the one `dsops bench --check` and tests/test_cases.c use)
    dsops_ref_run OP --in IN ...      the oracle through the same file path: the same tensors, dtypes and shapes,
                                      judged the same way (unless the judge is the library's own stages: the
                                      fused layer, which tests/test_dia.c holds against the oracle chain)

and, once per operator: OUT with every floating-point element changed must be refused (so that the judge is
seen to fail); calls with an unknown tensor in IN, an unknown --set name or preset, --threads 0 or an unknown
--isa fail in both programs without writing OUT; OUT fed back as IN gives the same OUT (the outputs stored in
IN are ignored, OUT's metadata is read back); OUT may name IN.

The per-operator checks beside this file (run_*_check.py) keep what is particular to one operator: its
parameters on the command line, metadata and errors.

usage: run_cases_check.py --tool PATH/dsops --ref PATH/dsops_ref_run [--workdir DIR] [--keep] [--verbose]
                          [--max-work W] [--max-bytes B]
Prints "N passed, N failed" last and exits non-zero on failure.
"""

import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runcheck  # noqa: E402
from runcheck import bad_calls, read_safetensors, run, write_safetensors  # noqa: E402

# What a case may cost to be run here (the oracle runs twice, single-threaded): FLOP or OP, and bytes.
MAX_WORK = 6e8
MAX_BYTES = 3e7
FLOAT_TAGS = ("BF16", "F16", "F32")


def ci_cases(chk, args):
    """[(name, operator word of the list)] of every CI case, in the registry's order."""
    r = run([args.tool, "bench", "--list"], args.verbose)
    chk.check(r.returncode == 0, "dsops bench --list succeeds", r.stderr.strip())
    cases = []
    for line in r.stdout.splitlines():
        words = line.split()
        if len(words) >= 2 and "(not in CI)" not in line:
            cases.append((words[0], words[1]))
    chk.check(len(cases) > 0, "the registry lists CI cases")
    return cases


def write_inputs(chk, args, name, path, limits):
    """`dsops case NAME --inputs path` -> ("case", op, work, bytes, judge) when written, ("skipped", None, work,
    bytes, None) when over the limits, None when it failed."""
    r = run([args.tool, "case", name, "--inputs", path] + limits, args.verbose)
    if not chk.check(r.returncode == 0, name + ": dsops case --inputs succeeds", r.stderr.strip()):
        return None
    w = r.stdout.replace(",", "").split()
    if w[:1] == ["skipped"]:  # skipped NAME: work W bytes B
        return "skipped", None, float(w[3]), float(w[5]), None
    chk.check(w[0] == "case" and w[1] == name and os.path.exists(path), name + ": IN written", r.stdout.strip())
    return "case", w[3], float(w[5]), float(w[7]), w[9]


def judged(args, name, path):
    r = run([args.tool, "case", name, "--check", path], args.verbose)
    return r.returncode, (r.stderr or r.stdout).strip()


def tensor_bytes(chk, path):
    t, meta = read_safetensors(path)
    if meta and "isa" in meta:
        chk.tiers.add(meta["isa"])
    return {n: (tag, a.shape, a.tobytes()) for n, (tag, a) in t.items()}


def refused_when_changed(chk, args, work, name, out):
    """OUT with every element of its floating-point tensors moved far away must fail the judge (the checks allow
    a few elements outside the tolerance, and compare only the rows a call writes of a cache)."""
    t, meta = read_safetensors(out)
    changed = []
    for n in sorted(t):
        tag, a = t[n]
        if tag == "F32":
            t[n] = (tag, np.full(a.shape, 12345.0, np.float32))
        elif tag in ("BF16", "F16"):  # their bits: 0x4800 is 2^17 in bf16, 8.0 in fp16
            t[n] = (tag, np.full(a.shape, 0x4800, np.uint16))
        else:
            continue
        changed.append(n)
    bad = os.path.join(work, name + ".changed.safetensors")
    write_safetensors(bad, t, meta)
    rc, text = judged(args, name, bad)
    chk.check(rc == 1 and changed, "%s: OUT with %s changed is refused" % (name, ", ".join(changed)), text)


def file_rules(chk, args, work, name, inp, op, out):
    """What `dsops run` does with any operator's files (once per operator): calls that must fail without writing
    OUT, OUT fed back as IN (the outputs stored there are ignored, its metadata is read), OUT may be IN."""
    t, meta = read_safetensors(inp)
    extra = os.path.join(work, name + ".extra.safetensors")
    write_safetensors(extra, dict(t, no_such_tensor=np.zeros(2, np.float32)), meta)
    bad_calls(chk, args, work, [
        ("%s: unknown tensor in IN" % name, [op, "--in", extra], "DSOPS_ERR_PARAM", "no_such_tensor"),
        ("%s: unknown --set name" % name, [op, "--in", inp, "--set", "no_such_param=1"], "DSOPS_ERR_PARAM"),
        ("%s: unknown preset" % name, [op, "--in", inp, "--set", "preset=v5"], "DSOPS_ERR_PARAM"),
        ("%s: bad --threads" % name, [op, "--in", inp, "--threads", "0"], "DSOPS_ERR_PARAM"),
        ("%s: bad --isa" % name, [op, "--in", inp, "--isa", "avx1024"], "DSOPS_ERR_PARAM"),
    ], existing_out=False, leftovers=True)
    first, first_meta = read_safetensors(out)
    merged = dict(t)
    merged.update({n: v for n, v in first.items() if n not in t})  # the outputs; in-out tensors keep IN's state
    fed = os.path.join(work, name + ".fed.safetensors")
    write_safetensors(fed, merged, dict(first_meta, threads="7"))
    second = os.path.join(work, name + ".second.safetensors")
    r = run([args.tool, "run", op, "--in", fed, "--out", second], args.verbose)
    chk.check(r.returncode == 0 and tensor_bytes(chk, second) == tensor_bytes(chk, out),
              name + ": OUT fed back as IN gives the same OUT (outputs in IN ignored)", r.stderr.strip())
    same = os.path.join(work, name + ".same.safetensors")
    shutil.copy(inp, same)
    r = run([args.tool, "run", op, "--in", same, "--out", same, "--threads", "1"], args.verbose)
    chk.check(r.returncode == 0 and tensor_bytes(chk, same) == tensor_bytes(chk, out), name + ": OUT may be IN",
              r.stderr.strip())


def run_case(chk, args, work, name, inp, op, judge, refuse):
    outs = []
    for threads in ("1", "3"):
        out = os.path.join(work, "%s.t%s.safetensors" % (name, threads))
        r = run([args.tool, "run", op, "--in", inp, "--out", out, "--threads", threads], args.verbose)
        if not chk.check(r.returncode == 0, "%s: dsops run %s --threads %s succeeds" % (name, op, threads),
                         r.stderr.strip()):
            return
        outs.append(out)
    chk.check(tensor_bytes(chk, outs[0]) == tensor_bytes(chk, outs[1]),
              name + ": --threads 1 and 3 write the same tensors and bytes")
    rc, text = judged(args, name, outs[0])
    chk.check(rc == 0, "%s: dsops run agrees with the %s" % (name, judge), text)
    if refuse:
        refused_when_changed(chk, args, work, name, outs[0])
        file_rules(chk, args, work, name, inp, op, outs[0])
    ref = os.path.join(work, name + ".ref.safetensors")
    r = run([args.ref, op, "--in", inp, "--out", ref], args.verbose)
    if not chk.check(r.returncode == 0, "%s: dsops_ref_run %s succeeds" % (name, op), r.stderr.strip()):
        return
    shapes = {n: (v[0], v[1]) for n, v in tensor_bytes(chk, outs[0]).items()}
    chk.check({n: (v[0], v[1]) for n, v in tensor_bytes(chk, ref).items()} == shapes,
              name + ": the oracle's OUT holds the same tensors, dtypes and shapes")
    if judge == "oracle":  # else the judge is bit for bit against the library's own stages, not the oracle's
        rc, text = judged(args, name, ref)
        chk.check(rc == 0, name + ": the oracle through the file agrees with the oracle", text)


def checks(chk, args, work, rng):
    limits = ["--max-work", str(args.max_work), "--max-bytes", str(args.max_bytes)]
    cases = ci_cases(chk, args)
    ran, smallest, refused = set(), {}, set()

    def one(name, word, lim):
        inp = os.path.join(work, name + ".in.safetensors")
        got = write_inputs(chk, args, name, inp, lim)
        if got and got[0] == "skipped":
            size = (got[2], got[3])
            if word not in smallest or size < smallest[word][0]:
                smallest[word] = (size, name)
        elif got:
            ran.add(word)
            run_case(chk, args, work, name, inp, got[1], got[4], word not in refused)
            refused.add(word)
        if not args.keep:
            for f in os.listdir(work):
                if f.startswith(name + "."):
                    os.remove(os.path.join(work, f))

    for name, word in cases:
        one(name, word, limits)
    # an operator whose every case is over the limits: its smallest, whatever its size
    for word in sorted(set(smallest) - ran):
        one(smallest[word][1], word, [])
    words = sorted({w for _, w in cases})
    chk.check(sorted(ran) == words, "every operator of the registry ran", "ran %s of %s" % (sorted(ran), words))


if __name__ == "__main__":
    extra = [("--max-work", float, MAX_WORK), ("--max-bytes", float, MAX_BYTES)]
    sys.exit(runcheck.main(__doc__, "cases", 2026, checks, extra))
