#!/usr/bin/env python3
"""End-to-end check of `dsops run sparse_flash_attention_v32` against the reference oracle.

For every KV layout (split_bf16, split_int8, packed_int8) the script builds a problem with numpy (several
sequences, MTP S=2, a few heads, -1 and out-of-range top-k entries, a lonely token, permuted block tables,
NaN-poisoned cache rows that no token uses), writes it as a safetensors file by hand, and runs

    dsops run sparse_flash_attention_v32 --in IN --out OUT --set softmax_scale=...
    dsops_ref_run sparse_flash_attention_v32 --in IN --out REF ...

It compares `out` and `lse` with compare_close of docs/OPERATORS.md section 1.8 (out 1e-4 / 0.005 / 0.005;
lse 1e-6 / 8.01/65536 / 0.005, non-finite values must coincide), checks lonely tokens exactly (out = 0,
lse = +Inf), checks the oracle against an independent numpy evaluation of the spec, checks that thread
counts give identical bytes, and checks that bad invocations exit non-zero without creating or
touching OUT.

usage: run_sfa_check.py --tool PATH/dsops --ref PATH/dsops_ref_run [--workdir DIR] [--keep] [--verbose]
Prints "N passed, N failed" last and exits non-zero on failure.
"""

import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runcheck  # noqa: E402
from runcheck import (case_checks, check_run_help, paged_block_table, both_accept, BF16_NAN, bad_calls,  # noqa: E402
                      bf16_from_f32, compare_close, f32_from_bf16, ref_run, round_bf16, run, tool_runs, write_mutated,
                      write_safetensors)

OP = "sparse_flash_attention_v32"
OUT_TOL = (1e-4, 0.005, 0.005)
OUT_TOL_TILED = (5e-4, 5e-4, 0.005)
LSE_TOL = (1e-6, 8.01 / 65536, 0.005)

# ---- problems -------------------------------------------------------------------------------------


class Problem:
    pass


def build_problem(rng, layout, B, S, seqused, N, Dc, Dr, K, BS, with_topk_length):
    """A sparse_flash_attention_v32 problem. Returns a Problem with .tensors (file contents) and
    .used (per token: list of cache rows attended, in order), .keys ([rows, Dc+Dr] float32 values)."""
    p = Problem()
    p.layout, p.N, p.Dc, p.Dr, p.K = layout, N, Dc, Dr, K
    T = sum(S)
    cu = np.zeros(B + 1, dtype=np.int32)
    cu[1:] = np.cumsum(S)
    block_table, NB = paged_block_table(rng, seqused, BS, 1, 3)

    topk = np.full((T, K), -1, dtype=np.int32)
    topk_length = np.zeros(T, dtype=np.int32)
    lonely_all_minus_one = None
    for b in range(B):
        for i in range(S[b]):
            t = int(cu[b]) + i
            L = seqused[b] - (S[b] - 1 - i)
            n = min(K, max(L, 0))
            if n > 0:
                sel = rng.choice(L, size=n, replace=False).astype(np.int32)
                # some skipped entries: -1 and values >= seqused_kv
                for j in range(n):
                    r = rng.random()
                    if r < 0.08:
                        sel[j] = -1
                    elif r < 0.12:
                        sel[j] = seqused[b] + int(rng.integers(0, 50))
                    elif r < 0.16 and j > 0:
                        sel[j] = sel[j - 1]  # duplicates count as often as they occur
                topk[t, :n] = sel
            # entries beyond cnt are never read: put values there that would be invalid if used
            if n < K:
                topk[t, n:] = rng.integers(-5, 1 << 30, size=K - n)
            topk_length[t] = n if not with_topk_length else int(rng.integers(0, K + 1))
    # one token whose entries are all -1 (lonely even though it sees tokens)
    t_last = T - 1
    topk[t_last, :] = -1
    lonely_all_minus_one = t_last

    # per token: used rows in order
    used = []
    for b in range(B):
        for i in range(S[b]):
            t = int(cu[b]) + i
            L = seqused[b] - (S[b] - 1 - i)
            cnt = min(K, max(L, 0))
            if with_topk_length:
                cnt = min(cnt, int(topk_length[t]))
            rows = []
            for j in range(cnt):
                idx = int(topk[t, j])
                if 0 <= idx < seqused[b]:
                    rows.append(int(block_table[b, idx // BS]) * BS + idx % BS)
            used.append(rows)
    p.used = used
    p.lonely = [t for t in range(T) if not used[t]]
    assert lonely_all_minus_one in p.lonely
    touched = np.zeros(NB * BS, dtype=bool)
    for rows in used:
        touched[rows] = True

    q_nope = bf16_from_f32(rng.standard_normal((T, N, Dc)).astype(np.float32))
    q_rope = bf16_from_f32(rng.standard_normal((T, N, Dr)).astype(np.float32))
    tensors = {"q_nope": ("BF16", q_nope), "q_rope": ("BF16", q_rope)}
    rows = NB * BS
    rope = bf16_from_f32(rng.standard_normal((rows, Dr)).astype(np.float32))
    rope[~touched] = BF16_NAN
    if layout == "split_bf16":
        nope = bf16_from_f32((0.5 * rng.standard_normal((rows, Dc))).astype(np.float32))
        nope[~touched] = BF16_NAN
        kn = f32_from_bf16(nope)
        tensors["key_nope"] = ("BF16", nope.reshape(NB, BS, Dc))
        tensors["key_rope"] = ("BF16", rope.reshape(NB, BS, Dr))
    else:
        q8 = rng.integers(-128, 128, size=(rows, Dc)).astype(np.int8)
        q8[0, :4] = [-128, 127, 0, -1]
        scale = (rng.random((rows, Dc // 128)) * 0.02 + 0.001).astype(np.float32)
        scale[~touched] = np.nan
        if rows > 1:
            scale[1, 0] = 0.0  # an all-zero group
        kn = round_bf16(q8.astype(np.float32) * np.repeat(scale, 128, axis=1))
        if layout == "split_int8":
            tensors["key_nope"] = q8.reshape(NB, BS, Dc)
            tensors["key_nope_scale"] = scale.reshape(NB, BS, Dc // 128)
            tensors["key_rope"] = ("BF16", rope.reshape(NB, BS, Dr))
        else:
            assert Dc == 512 and Dr == 64
            packed = np.zeros((rows, 656), dtype=np.uint8)
            packed[:, :512] = q8.view(np.uint8)
            packed[:, 512:640] = rope.astype("<u2").view(np.uint8).reshape(rows, 128)
            packed[:, 640:656] = scale.astype("<f4").view(np.uint8).reshape(rows, 16)
            tensors["kv_packed"] = packed.reshape(NB, BS, 656)
    p.keys = np.concatenate([kn, f32_from_bf16(rope)], axis=1)  # [rows, Dc+Dr] values of K
    tensors["topk_indices"] = topk
    if with_topk_length:
        tensors["topk_length"] = topk_length
    tensors["block_table"] = block_table
    tensors["cu_seqlens_q"] = cu
    tensors["seqused_kv"] = np.array(seqused, dtype=np.int32)
    p.tensors = tensors
    p.q = np.concatenate([f32_from_bf16(q_nope), f32_from_bf16(q_rope)], axis=2)  # [T, N, Dqk]
    p.T = T
    return p


def numpy_reference(p, scale, p_mode):
    """Independent evaluation of spec 4.4 / 2.10 for p_mode normalised or fp32 (fp64 dot products,
    fp32 rounding at the spec's points)."""
    T, N, Dc = p.T, p.N, p.Dc
    out = np.zeros((T, N, Dc), dtype=np.float32)
    lse = np.full((T, N), np.inf, dtype=np.float32)
    sc = np.float32(scale)
    for t in range(T):
        rows = p.used[t]
        if not rows:
            continue
        Kmat = p.keys[rows].astype(np.float64)                       # [n, Dqk]
        s = (p.q[t].astype(np.float64) @ Kmat.T).astype(np.float32) * sc  # [N, n]
        m = s.max(axis=1)
        w = np.exp((s - m[:, None]).astype(np.float32))
        l = w.astype(np.float64).sum(axis=1).astype(np.float32)
        P = (w / l[:, None]).astype(np.float32)
        if p_mode == "normalised":
            P = round_bf16(P)
        out[t] = round_bf16((P.astype(np.float64) @ Kmat[:, :Dc]).astype(np.float32))
        lse[t] = (m + np.log(l)).astype(np.float32)
    return out, lse


def out_lse(t):
    """out (float32 values) and lse of OUT's tensors."""
    out = f32_from_bf16(t["out"][1]) if "out" in t else None
    lse = t["lse"][1].astype(np.float32) if "lse" in t else None
    return out, lse


CASES = [
    # name, layout, B, S, seqused, N, Dc, Dr, K, BS, topk_length, extra --set, layout via
    dict(name="split_bf16", layout="split_bf16", B=3, S=[2, 2, 2], seqused=[37, 130, 1], N=3, Dc=160, Dr=32,
         K=24, BS=16, topk_length=False, sets=[], layout_via="infer"),
    dict(name="split_bf16_topk_length_fp32", layout="split_bf16", B=2, S=[2, 1], seqused=[20, 70], N=2, Dc=128,
         Dr=64, K=40, BS=8, topk_length=True, sets=["p_mode=fp32"], layout_via="set"),
    dict(name="split_int8", layout="split_int8", B=3, S=[2, 2, 2], seqused=[45, 9, 1], N=4, Dc=256, Dr=64, K=32,
         BS=8, topk_length=False, sets=[], layout_via="metadata"),
    dict(name="split_int8_tiled", layout="split_int8", B=2, S=[2, 2], seqused=[100, 33], N=2, Dc=128, Dr=64,
         K=48, BS=16, topk_length=False, sets=["p_mode=tiled", "p_tile=8"], layout_via="infer"),
    dict(name="packed_int8", layout="packed_int8", B=2, S=[2, 2], seqused=[70, 1], N=3, Dc=512, Dr=64, K=32, BS=32,
         topk_length=True, sets=[], layout_via="infer"),
]

VENDOR_SCALE = 576 ** -0.5


def check_case(chk, args, work, rng, c):
    p = build_problem(rng, c["layout"], c["B"], c["S"], c["seqused"], c["N"], c["Dc"], c["Dr"], c["K"], c["BS"],
                      c["topk_length"])
    inp = os.path.join(work, c["name"] + ".in.safetensors")
    meta = {"softmax_scale": "1.0"}  # overridden by --set below (--set wins)
    if c["layout_via"] == "metadata":
        meta["kv_layout"] = c["layout"]
    write_safetensors(inp, p.tensors, meta)
    sets = ["softmax_scale=%r" % VENDOR_SCALE] + c["sets"]
    if c["layout_via"] == "set":
        sets.append("kv_layout=" + c["layout"])
    p_mode = "normalised"
    for s in c["sets"]:
        if s.startswith("p_mode="):
            p_mode = s.split("=", 1)[1]
    tol = OUT_TOL_TILED if p_mode == "tiled" else OUT_TOL

    rt, rmeta = ref_run(chk, args, c["name"], OP, inp, os.path.join(work, c["name"] + ".ref.safetensors"), sets)
    if rt is None:
        return
    rout, rlse = out_lse(rt)
    chk.check(rmeta.get("kv_layout") == c["layout"], c["name"] + ": kv_layout resolved to " + c["layout"],
              "(metadata says %r)" % rmeta.get("kv_layout"))
    chk.check(rmeta.get("softmax_scale") is not None and
              abs(float(rmeta["softmax_scale"]) - VENDOR_SCALE) < 1e-7, c["name"] + ": --set wins over metadata")
    chk.check(rt["out"][0] == "BF16" and rt["out"][1].shape == (p.T, p.N, p.Dc)
              and rt["lse"][0] == "F32" and rt["lse"][1].shape == (p.T, p.N),
              c["name"] + ": OUT holds out [T,N,Dc] BF16 and lse [T,N] F32")

    # lonely tokens exactly
    lon = p.lonely
    chk.check(len(lon) > 0 and np.all(rout[lon] == 0) and np.all(np.isposinf(rlse[lon])),
              c["name"] + ": oracle lonely tokens %s give out = 0, lse = +Inf" % lon)

    # oracle vs an independent numpy evaluation
    if p_mode in ("normalised", "fp32"):
        nout, nlse = numpy_reference(p, VENDOR_SCALE, p_mode)
        ok, text = compare_close(rout, nout, *OUT_TOL)
        chk.check(ok, c["name"] + ": oracle out vs numpy", text)
        ok, text = compare_close(rlse, nlse, *LSE_TOL)
        chk.check(ok, c["name"] + ": oracle lse vs numpy", text)

    def compare(label, extra, t, meta):
        out, lse = out_lse(t)
        ok, text = compare_close(out, rout, *tol)
        chk.check(ok, label + ": out vs oracle", text)
        ok, text = compare_close(lse, rlse, *LSE_TOL)
        chk.check(ok, label + ": lse vs oracle", text)
        chk.check(np.all(out[lon] == 0) and np.all(np.isposinf(lse[lon])), label + ": lonely tokens exact")

    tool_runs(chk, args, work, c["name"], OP, inp, sets, compare)


def check_errors(chk, args, work, rng):
    """Bad invocations: non-zero exit, a 'dsops run: <STATUS>:' line, OUT neither created nor touched."""
    p = build_problem(rng, "split_bf16", 2, [2, 1], [30, 17], 2, 128, 64, 16, 16, False)
    good = os.path.join(work, "err.in.safetensors")
    write_safetensors(good, p.tensors)

    def variant(name, mutate, meta=None):
        return write_mutated(work, name, p.tensors, mutate, meta)

    missing_q_rope = variant("missing", lambda t: t.pop("q_rope"))
    f32_q = variant("dtype", lambda t: t.__setitem__("q_nope", f32_from_bf16(t["q_nope"][1])))
    bt = p.tensors["block_table"].copy()
    bt[0, :2] = 9999  # the blocks of sequence 0, which its tokens use
    bad_block = variant("block", lambda t: t.__setitem__("block_table", bt))
    bad_meta = variant("meta", lambda t: None, {"p_mode": "sideways"})
    truncated = os.path.join(work, "err_truncated.safetensors")
    with open(good, "rb") as f:
        data = f.read()
    with open(truncated, "wb") as f:
        f.write(data[: len(data) // 2])
    garbage = os.path.join(work, "err_garbage.safetensors")
    with open(garbage, "wb") as f:
        g = b'{"a": [1, 2'
        f.write(struct.pack("<Q", len(g)) + g)
    lying = os.path.join(work, "err_lying.safetensors")
    with open(lying, "wb") as f:
        f.write(struct.pack("<Q", 1 << 40) + b"{}")

    op = OP
    # runcheck.bad_calls rows (label, argv, status): alike in shape in every run_*_check.py, each its operator's own
    cases = [
        ("truncated file", [op, "--in", truncated], "DSOPS_RUN_ERR_IO"),
        ("JSON garbage", [op, "--in", garbage], "DSOPS_RUN_ERR_IO"),
        ("header length beyond the file", [op, "--in", lying], "DSOPS_RUN_ERR_IO"),
        ("missing IN", [op, "--in", os.path.join(work, "nope.safetensors")], "DSOPS_RUN_ERR_IO"),
        ("unknown operator", ["sparse_flash_attention_v33", "--in", good], "DSOPS_RUN_ERR_USAGE"),
        ("unknown option", [op, "--in", good, "--frobnicate"], "DSOPS_RUN_ERR_USAGE"),
        ("--set without =", [op, "--in", good, "--set", "softmax_scale"], "DSOPS_RUN_ERR_USAGE"),
        ("unknown --set name", [op, "--in", good, "--set", "softmax_scal=0.1"], "DSOPS_ERR_PARAM"),
        ("bad enum spelling", [op, "--in", good, "--set", "p_mode=exact"], "DSOPS_ERR_PARAM"),
        ("bad metadata enum", [op, "--in", bad_meta], "DSOPS_ERR_PARAM"),
        ("non-numeric scale", [op, "--in", good, "--set", "softmax_scale=abc"], "DSOPS_ERR_PARAM"),
        ("non-finite scale", [op, "--in", good, "--set", "softmax_scale=inf"], "DSOPS_ERR_PARAM"),
        ("p_tile 0", [op, "--in", good, "--set", "p_mode=tiled", "--set", "p_tile=0"], "DSOPS_ERR_PARAM"),
        ("preset without this operator", [op, "--in", good, "--set", "preset=v4_flash"], "DSOPS_ERR_PARAM"),
        ("missing required tensor", [op, "--in", missing_q_rope], "DSOPS_ERR_NULL"),
        ("dtype mismatch", [op, "--in", f32_q], "DSOPS_ERR_DTYPE"),
        ("layout tensors missing", [op, "--in", good, "--set", "kv_layout=packed_int8"], "DSOPS_ERR_NULL"),
        ("block outside [0, NB)", [op, "--in", bad_block], "DSOPS_ERR_INDEX"),
    ]
    bad_calls(chk, args, work, cases, leftovers=True)

    # empty work (T = 0, and B = 0): valid, outputs with zero rows; no scale given: the V3.2 default
    for B in (1, 0):
        N, Dc, Dr, K, BS = 2, 128, 64, 8, 16
        t = {"q_nope": ("BF16", np.zeros((0, N, Dc), np.uint16)), "q_rope": ("BF16", np.zeros((0, N, Dr), np.uint16)),
             "key_nope": ("BF16", np.zeros((2, BS, Dc), np.uint16)),
             "key_rope": ("BF16", np.zeros((2, BS, Dr), np.uint16)),
             "topk_indices": np.zeros((0, K), np.int32), "block_table": np.zeros((B, 2), np.int32),
             "cu_seqlens_q": np.zeros(B + 1, np.int32), "seqused_kv": np.full(B, 5, np.int32)}
        both_accept(chk, args, work, "empty%d" % B,
                    "empty work with B = %d gives empty outputs and the preset's scale" % B, op, t,
                    lambda o, m: (o["out"][1].shape == (0, N, Dc) and o["lse"][1].shape == (0, N) and
                                  abs(float(m.get("softmax_scale", "0")) - 0.13523378) < 1e-6))
    # missing --out is a usage error
    r = run([args.tool, "run", op, "--in", good], args.verbose)
    chk.check(r.returncode != 0 and "DSOPS_RUN_ERR_USAGE" in r.stderr, "missing --out -> usage error")
    # --help works
    check_run_help(chk, args, ("sparse_flash_attention_v32", "kv_layout"), "the operator and its parameters")
    # unknown tensors, --threads, --isa, presets, OUT fed back as IN and OUT == IN: tests/io/run_cases_check.py,
    # for every operator


if __name__ == "__main__":
    sys.exit(runcheck.main(__doc__, "sfa", 3202, case_checks((check_case, CASES), errors=check_errors)))
