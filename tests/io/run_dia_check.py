#!/usr/bin/env python3
"""End-to-end check of `dsops run sparse_attention_v32` (docs/OPERATORS.md section 4.5) against the oracle chain.

The script builds small fused-layer problems with numpy (bf16 and int8 variants; split_bf16, split_int8 and
packed_int8 latent caches; several sequences with MTP S 1-2, one shorter than K; random caches for the history
and cache_index[t] = slot(b, p_t) through a permuted block table whose unneeded columns hold garbage), writes
them as safetensors files and runs

    dsops run sparse_attention_v32 --in IN --out OUT [--set topk=K] ...
    dsops_ref_run sparse_attention_v32 --in IN --out REF [--set topk=K] ...

dsops_ref_run runs the reference of every stage in sequence. The outputs are compared as section 4.5 asks:
topk_indices with compare_topk (max_miss 1); the in-out caches, which OUT must hold, with the stages'
tolerances (sections 4.1, 4.2); out and lse with the section 4.4 tolerances on the tokens whose top-k row
equals the reference row (a near-tie flip legitimately changes a whole row). Thread counts must give
identical bytes, and bad invocations must exit non-zero without creating OUT.

usage: run_dia_check.py --tool PATH/dsops --ref PATH/dsops_ref_run [--workdir DIR] [--keep] [--verbose]
Prints "N passed, N failed" last and exits non-zero on failure.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runcheck  # noqa: E402
from runcheck import (case_checks, check_run_help, paged_block_table, bad_calls, bf16_from_f32,  # noqa: E402
                      compare_close, f32_from_bf16, latent_caches, packed_int8_fields, q8_rows, read_safetensors,
                      ref_run, run, sylvester, tool_runs, ub, values, wq_b_entries, write_mutated, write_safetensors)

OP = "sparse_attention_v32"
OUT_TOL = (1e-4, 0.005, 0.005)
LSE_TOL = (1e-6, 8.01 / 65536, 0.005)
TOL_INT8 = (1, 0, 0.005)
TOL_BF16 = (1e-4, 2.0 ** -7, 0.005)
TOL_SCALE = (2.5e-5, 0.005, 0.005)


def build_problem(rng, variant, layout, S, seqused, K, H=128, Q=64, N=2, Dqn=16, NI=2, DI=64, BS=16):
    Dc = 512 if layout == "packed_int8" else 128
    B, T = len(S), sum(S)
    i8 = variant == "int8"
    bt, NB = paged_block_table(rng, seqused, BS, 2, 1, lambda NB: (-1, NB, 1 << 30))
    cu = np.zeros(B + 1, np.int32)
    cu[1:] = np.cumsum(S)
    ci = []
    for b in range(B):
        for i in range(S[b]):
            p = seqused[b] - S[b] + i
            ci.append(int(bt[b, p // BS]) * BS + p % BS)
    rows = NB * BS

    t = {}
    t["x"] = ub(rng, (T, H))
    t["cu_seqlens_q"] = cu
    t["seqused_kv"] = np.array(seqused, np.int32)
    t["block_table"] = bt
    t["cache_index"] = np.array(ci, np.int64)
    t["rope_cos"] = ub(rng, (T, 64), 0.1)
    t["rope_sin"] = ub(rng, (T, 64), 0.1)
    t["wq_a"] = ub(rng, (Q, H), 0.1)
    t["gamma_cq"] = ub(rng, (Q,))
    NG = N * (Dqn + 64)
    t.update(wq_b_entries(rng, NG, Q, i8))
    t["w_uk"] = ub(rng, (N, Dqn, Dc), 0.1)
    t["wkv_a"] = ub(rng, (Dc + 64, H), 0.1)
    t["gamma_ckv"] = ub(rng, (Dc,))
    if i8:
        t["idx_wq_b"] = rng.integers(-128, 128, (NI * DI, Q), dtype=np.int8)
        t["idx_wq_b_scale"] = rng.uniform(-0.01, 0.01, NI * DI).astype(np.float32)
        t["hadamard_q"] = sylvester(DI)
        t["hadamard_k"] = sylvester(DI)
    else:
        t["idx_wq_b"] = ub(rng, (NI * DI, Q))
    t["idx_wk"] = ub(rng, (DI, H))
    t["weights_proj"] = ub(rng, (NI, H))
    t["ln_gamma_k"] = np.ones(DI, np.float32)
    t["ln_beta_k"] = np.zeros(DI, np.float32)
    lat = rng.uniform(-1, 1, (rows, Dc)).astype(np.float32)
    rope = bf16_from_f32(rng.uniform(-1, 1, (rows, 64)).astype(np.float32))
    t.update(latent_caches(layout, lat, rope, NB, BS))
    kf = rng.uniform(-1, 1, (rows, DI)).astype(np.float32)
    if i8:
        q, s = q8_rows(kf, DI)
        t["idx_k_cache"] = q.reshape(NB, BS, DI)
        t["idx_k_scale_cache"] = s[:, 0].astype(np.float16).reshape(NB, BS)
    else:
        t["idx_k_cache"] = ("BF16", bf16_from_f32(kf).reshape(NB, BS, DI))
    L = []
    for b in range(B):
        for i in range(S[b]):
            L.append(seqused[b] - (S[b] - 1 - i))
    return t, L, T, N, Dc


def compare_topk(out, ref, L, max_miss=1):
    for t in range(out.shape[0]):
        m = min(L[t], out.shape[1])
        no = int(np.sum(out[t] != -1))
        nr = int(np.sum(ref[t] != -1))
        if no != m or nr != m or np.any(out[t, m:] != -1) or np.any(ref[t, m:] != -1):
            return False, "row %d: %d / %d valid entries, expected %d then -1" % (t, no, nr, m)
        v = out[t, :m]
        if np.any(v < 0) or np.any(v >= L[t]) or len(set(v.tolist())) != m:
            return False, "row %d: indices not %d distinct values in [0, %d)" % (t, m, L[t])
        miss = set(v.tolist()) - set(ref[t, :m].tolist())
        if len(miss) > max_miss:
            return False, "row %d: %d indices absent from the reference" % (t, len(miss))
    return True, ""


def compare_caches(chk, label, got, ref, names):
    for n in names:
        gtag, g = got[n]
        rtag, r = ref[n]
        if n == "kv_packed":
            parts = zip(("latent", "rope", "scales"), packed_int8_fields(g.reshape(-1, 656)),
                        packed_int8_fields(r.reshape(-1, 656)), (TOL_INT8, TOL_BF16, TOL_SCALE))
            for what, a, b, tol in parts:
                ok, text = compare_close(a.astype(np.float64), b.astype(np.float64), *tol)
                chk.check(ok, "%s: kv_packed %s vs oracle chain" % (label, what), text)
            continue
        tol = TOL_INT8 if gtag == "I8" else TOL_BF16 if gtag == "BF16" else TOL_SCALE
        ok, text = compare_close(values(gtag, g), values(rtag, r), *tol)
        chk.check(ok and gtag == rtag, "%s: %s vs oracle chain" % (label, n), text)


CASES = [
    dict(name="bf16_split_bf16", variant="bf16", layout="split_bf16", S=[2, 1, 2], seqused=[40, 130, 3], K=16,
         sets=["weights_scale=1", "topk=16"]),
    dict(name="bf16_split_int8", variant="bf16", layout="split_int8", S=[1, 2], seqused=[70, 9], K=24,
         sets=["topk=24", "mla_eps_cq=1e-5", "mla_eps_ckv=1e-5", "idx_rope_mode=interleaved_in_half_out"]),
    dict(name="int8_split_int8", variant="int8", layout="split_int8", S=[2, 2, 1], seqused=[20, 200, 1], K=32,
         sets=["topk=32"]),
    dict(name="int8_packed_int8", variant="int8", layout="packed_int8", S=[2, 1], seqused=[50, 17], K=16,
         sets=["topk=16", "p_mode=tiled", "p_tile=7"]),
]


def check_case(chk, args, work, rng, c):
    t, L, T, N, Dc = build_problem(rng, c["variant"], c["layout"], c["S"], c["seqused"], c["K"])
    name, K = c["name"], c["K"]
    inp = os.path.join(work, name + ".in.safetensors")
    write_safetensors(inp, t)
    cache_names = [n for n in ("kv_cache", "kv_scale_cache", "kr_cache", "kv_packed", "idx_k_cache",
                               "idx_k_scale_cache") if n in t]
    ref, rmeta = ref_run(chk, args, name, OP, inp, os.path.join(work, name + ".ref.safetensors"), c["sets"])
    if ref is None:
        return
    ok = (ref["out"][0] == "BF16" and ref["out"][1].shape == (T, N, Dc) and ref["topk_indices"][1].shape == (T, K)
          and ref["lse"][1].shape == (T, N) and all(n in ref for n in cache_names))
    if not chk.check(ok, name + ": OUT holds out, topk_indices, lse and every cache"):
        return
    chk.check(rmeta.get("topk") == str(K) and rmeta.get("kv_layout") == c["layout"],
              name + ": metadata topk = %d, kv_layout = %s" % (K, c["layout"]),
              "(%r, %r)" % (rmeta.get("topk"), rmeta.get("kv_layout")))
    ok, text = compare_topk(ref["topk_indices"][1], ref["topk_indices"][1], L, 0)
    chk.check(ok, name + ": oracle rows have min(L, K) valid entries then -1", text)

    def compare(label, extra, got, meta):
        if not chk.check(all(n in got for n in ["out", "topk_indices", "lse"] + cache_names),
                         label + ": OUT holds every output and cache"):
            return False
        gi, ri = got["topk_indices"][1], ref["topk_indices"][1]
        ok, text = compare_topk(gi, ri, L)
        chk.check(ok, label + ": topk_indices vs oracle chain (compare_topk, max_miss 1)", text)
        same = [i for i in range(T) if np.array_equal(gi[i], ri[i])]
        chk.check(len(same) > 0, label + ": some token has the reference top-k row")
        go, ro = f32_from_bf16(got["out"][1]), f32_from_bf16(ref["out"][1])
        ok, text = compare_close(go[same], ro[same], *OUT_TOL)
        chk.check(ok, label + ": out vs oracle chain on %d of %d tokens" % (len(same), T), text)
        ok, text = compare_close(got["lse"][1][same], ref["lse"][1][same], *LSE_TOL)
        chk.check(ok, label + ": lse vs oracle chain", text)
        compare_caches(chk, label, got, ref, cache_names)

    tool_runs(chk, args, work, name, OP, inp, c["sets"], compare)


def check_errors(chk, args, work, rng):
    t, L, T, N, Dc = build_problem(rng, "int8", "split_int8", [2, 1], [30, 17], 8)
    good = os.path.join(work, "err.in.safetensors")
    write_safetensors(good, t)

    def variant(name, mutate):
        return write_mutated(work, name, t, mutate)

    bt = t["block_table"].copy()
    bt[0, 0] = 9999  # the first block of sequence 0: every token of it needs it
    bad_block = variant("block", lambda v: v.__setitem__("block_table", bt))
    no_wqb = variant("no_wq_b", lambda v: v.pop("wq_b"))
    no_had = variant("no_had", lambda v: v.pop("hadamard_q"))
    f32_x = variant("f32_x", lambda v: v.__setitem__("x", f32_from_bf16(v["x"][1]).astype(np.float32)))
    dup = t["cache_index"].copy()
    dup[1] = dup[0]
    dup_ci = variant("dup", lambda v: v.__setitem__("cache_index", dup))
    # runcheck.bad_calls rows (label, argv, status): alike in shape in every run_*_check.py, each its operator's own
    cases = [
        ("topk 0", [OP, "--in", good, "--set", "topk=0"], "DSOPS_ERR_PARAM"),
        ("topk beyond 2^24", [OP, "--in", good, "--set", "topk=16777217"], "DSOPS_ERR_UNSUPPORTED"),
        ("unknown --set name", [OP, "--in", good, "--set", "eps_cq=1e-5"], "DSOPS_ERR_PARAM"),
        ("bad enum", [OP, "--in", good, "--set", "idx_rope_mode=sideways"], "DSOPS_ERR_PARAM"),
        ("softmax_scale inf", [OP, "--in", good, "--set", "softmax_scale=inf"], "DSOPS_ERR_PARAM"),
        ("missing wq_b", [OP, "--in", no_wqb], "DSOPS_ERR_NULL"),
        ("int8 without hadamard_q", [OP, "--in", no_had], "DSOPS_ERR_NULL"),
        ("F32 x", [OP, "--in", f32_x], "DSOPS_ERR_DTYPE"),
        ("needed block outside [0, NB)", [OP, "--in", bad_block], "DSOPS_ERR_INDEX"),
        ("cache_index repeated", [OP, "--in", dup_ci], "DSOPS_ERR_INDEX"),
    ]
    bad_calls(chk, args, work, cases, existing_out=False)
    # topk defaults to 2048
    out_path = os.path.join(work, "default_k.safetensors")
    r = run([args.tool, "run", OP, "--in", good, "--out", out_path], args.verbose)
    ok = r.returncode == 0
    if ok:
        o, m = read_safetensors(out_path)
        ok = o["topk_indices"][1].shape == (T, 2048) and m.get("topk") == "2048"
    chk.check(ok, "topk defaults to 2048 (topk_indices [T, 2048])", r.stderr.strip())
    check_run_help(chk, args, (OP, "idx_rope_mode"), "sparse_attention_v32 and its parameters")


if __name__ == "__main__":
    sys.exit(runcheck.main(__doc__, "dia", 4505, case_checks((check_case, CASES), errors=check_errors)))
