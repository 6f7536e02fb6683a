#!/usr/bin/env python3
"""End-to-end check of `dsops run lightning_indexer` against the reference oracle.

The script builds indexer problems with numpy (int8 variant with fp16 scales and weights, bf16 variant;
several sequences with MTP S=2, one sequence without tokens in the call; permuted block tables whose
unneeded columns hold garbage; cmp_ratio 1, 4 and 2; rows with fewer visible keys than K, rows with none;
NaN-poisoned cache rows that no token sees), writes them as safetensors files and runs

    dsops run lightning_indexer --in IN --out OUT --set topk=K ...
    dsops_ref_run lightning_indexer --in IN --out REF --set topk=K ...

It compares the outputs as docs/OPERATORS.md section 3.6 asks: per row the number of leading valid entries is
equal and the tails are exactly -1 (scores -Inf); at most 1 index of the tool's row is absent from the
reference row (compare_topk, max_miss 1); topk_scores with compare_close 1e-4 / 1e-4 / 0.005 where both
rows hold the same index. The oracle itself is compared the same way with an independent numpy
evaluation of the spec. Thread counts must give identical bytes, and bad invocations (among them a
missing `--set topk`) must exit non-zero without creating or touching OUT.

usage: run_li_check.py --tool PATH/dsops --ref PATH/dsops_ref_run [--workdir DIR] [--keep] [--verbose]
Prints "N passed, N failed" last and exits non-zero on failure.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runcheck  # noqa: E402
from runcheck import (case_checks, check_run_help, paged_block_table, both_accept, BF16_NAN, bad_calls,  # noqa: E402
                      bf16_from_f32, compare_close, f32_from_bf16, ref_run, run, tool_runs, write_mutated,
                      write_safetensors)

OP = "lightning_indexer"
SCORE_TOL = (1e-4, 1e-4, 0.005)
FP16_NAN = np.float16(np.nan)

# ---- problems -------------------------------------------------------------------------------------


class Problem:
    pass


def build_problem(rng, variant, S, seqused, NI, DI, BS, R):
    """A lightning_indexer problem with compress ratio R. Returns a Problem with .tensors (file
    contents), .n (visible keys per token), .rows (per token: cache rows of keys 0 .. n-1) and the values
    an independent evaluation needs."""
    p = Problem()
    p.variant, p.NI, p.DI, p.R = variant, NI, DI, R
    B = len(S)
    T = sum(S)
    cu = np.zeros(B + 1, dtype=np.int32)
    cu[1:] = np.cumsum(S)
    n = []
    need = []  # keys each sequence needs (the most any of its tokens sees)
    for b in range(B):
        m = 0
        for i in range(S[b]):
            L = seqused[b] - (S[b] - 1 - i)
            n.append(max(L, 0) // R)
            m = max(m, n[-1])
        need.append(m)
    block_table, NB = paged_block_table(rng, need, BS, 2, 2, lambda NB: (-1, NB, 1 << 30, -7))
    rows = []
    touched = np.zeros(NB * BS, dtype=bool)
    t = 0
    for b in range(B):
        for i in range(S[b]):
            j = np.arange(n[t])
            r = block_table[b, j // BS].astype(np.int64) * BS + j % BS
            rows.append(r)
            touched[r] = True
            t += 1
    p.T, p.n, p.rows = T, n, rows
    nrows = NB * BS

    tensors = {}
    if variant == "int8":
        qf = rng.standard_normal((T, NI, DI)).astype(np.float32)
        qs = (np.abs(qf).max(axis=2) / 127).astype(np.float16)
        q8 = np.clip(np.rint(qf / qs.astype(np.float32)[:, :, None]), -128, 127).astype(np.int8)
        if T > 0:
            q8[0, 0, :3] = [-128, 127, -128]
        w = (rng.standard_normal((T, NI)) * NI ** -0.5).astype(np.float16)
        kf = rng.standard_normal((nrows, DI)).astype(np.float32)
        ks = (np.abs(kf).max(axis=1) / 127).astype(np.float16)
        k8 = np.clip(np.rint(kf / ks.astype(np.float32)[:, None]), -128, 127).astype(np.int8)
        ks[~touched] = FP16_NAN
        tensors["q_idx"] = q8
        tensors["q_idx_scale"] = qs
        tensors["weights"] = w
        tensors["key_cache"] = k8.reshape(NB, BS, DI)
        tensors["key_scale_cache"] = ks.reshape(NB, BS)
        p.q8, p.qs, p.w, p.k8, p.ks = q8, qs, w, k8, ks
    else:
        q = bf16_from_f32(rng.standard_normal((T, NI, DI)).astype(np.float32))
        w = bf16_from_f32((rng.standard_normal((T, NI)) * NI ** -0.5).astype(np.float32))
        kc = bf16_from_f32((0.5 * rng.standard_normal((nrows, DI))).astype(np.float32))
        kc[~touched] = BF16_NAN
        tensors["q_idx"] = ("BF16", q)
        tensors["weights"] = ("BF16", w)
        tensors["key_cache"] = ("BF16", kc.reshape(NB, BS, DI))
        p.q, p.w, p.kc = f32_from_bf16(q), f32_from_bf16(w), f32_from_bf16(kc)
    tensors["block_table"] = block_table
    tensors["cu_seqlens_q"] = cu
    tensors["seqused_kv"] = np.array(seqused, dtype=np.int32)
    p.tensors = tensors
    return p


def numpy_scores(p, t):
    """Index scores I[0 .. n_t-1] of token t, evaluated from spec 3.6 (fp64 where the spec sums in fp32)."""
    r = p.rows[t]
    if p.variant == "int8":
        ws = (p.qs[t].astype(np.float32) * p.w[t].astype(np.float32)).astype(np.float16).astype(np.float64)
        dot = p.q8[t].astype(np.int64) @ p.k8[r].astype(np.int64).T                     # [NI, n]
        d = (np.maximum(dot, 0).astype(np.float32) * np.float32(2.0 ** -11)).astype(np.float16)
        s = (ws[:, None] * d.astype(np.float64)).sum(axis=0).astype(np.float32)
        return s * p.ks[r].astype(np.float32)
    dot = (p.q[t].astype(np.float64) @ p.kc[r].astype(np.float64).T).astype(np.float32)  # [NI, n]
    s = (np.maximum(dot, 0).astype(np.float64) * p.w[t].astype(np.float64)[:, None]).sum(axis=0)
    return s.astype(np.float32)


def numpy_reference(p, K):
    idx = np.full((p.T, K), -1, dtype=np.int32)
    sc = np.full((p.T, K), -np.inf, dtype=np.float32)
    for t in range(p.T):
        s = numpy_scores(p, t)
        order = np.lexsort((np.arange(len(s)), -s.astype(np.float64)))[:K]
        idx[t, :len(order)] = order
        sc[t, :len(order)] = s[order]
    return idx, sc


# ---- comparisons ----------------------------------------------------------------------------------


def leading_valid(row):
    bad = np.nonzero(row == -1)[0]
    return int(bad[0]) if len(bad) else len(row)


def compare_topk(out, ref, max_miss=1):
    """spec 1.8 per row -> (ok, text)."""
    if out.shape != ref.shape:
        return False, "shape %s != %s" % (out.shape, ref.shape)
    for t in range(out.shape[0]):
        no, nr = leading_valid(out[t]), leading_valid(ref[t])
        if no != nr:
            return False, "row %d: %d leading valid entries, reference %d" % (t, no, nr)
        if np.any(out[t, no:] != -1) or np.any(ref[t, nr:] != -1):
            return False, "row %d: an entry after the leading valid ones is not -1" % t
        miss = set(out[t, :no].tolist()) - set(ref[t, :nr].tolist())
        if len(miss) > max_miss:
            return False, "row %d: %d indices absent from the reference (%s)" % (t, len(miss), sorted(miss)[:8])
    return True, "%d rows" % out.shape[0]


def common_scores(oi, os_, ri, rs):
    """Score pairs where both rows hold the same index."""
    a, b = [], []
    for t in range(oi.shape[0]):
        rmap = {int(j): float(v) for j, v in zip(ri[t], rs[t]) if j != -1}
        for j, v in zip(oi[t], os_[t]):
            if j != -1 and int(j) in rmap:
                a.append(float(v))
                b.append(rmap[int(j)])
    return np.array(a, dtype=np.float32), np.array(b, dtype=np.float32)


def row_rules(idx, sc, n, K):
    """Exact per-row rules of spec 2.9 with respect to the implementation's own scores -> (ok, text)."""
    for t in range(idx.shape[0]):
        m = min(n[t], K)
        v = idx[t, :m]
        if np.any(idx[t, m:] != -1):
            return False, "row %d: entries after the first %d are not all -1" % (t, m)
        if not np.all(np.isneginf(sc[t, m:])):
            return False, "row %d: padded scores are not all -Inf" % t
        if np.any(v < 0) or np.any(v >= n[t]) or len(set(v.tolist())) != m:
            return False, "row %d: indices not %d distinct values in [0, %d)" % (t, m, n[t])
        s = sc[t, :m].astype(np.float64)
        if np.any(np.isnan(s)):
            return False, "row %d: NaN score of a visible key" % t
        if np.any(s[1:] > s[:-1]) or np.any((s[1:] == s[:-1]) & (v[1:] < v[:-1])):
            return False, "row %d: not in decreasing score order (ties by increasing index)" % t
    return True, ""


def topk_outputs(t):
    """(tag, array) of topk_indices and of topk_scores in OUT's tensors, (None, None) for an absent one."""
    return t.get("topk_indices", (None, None)), t.get("topk_scores", (None, None))


# ---- cases ----------------------------------------------------------------------------------------

CASES = [
    # topk_via: "set" (--set topk=K), "metadata" (IN's __metadata__), "both" (metadata wrong, --set wins)
    dict(name="int8_r1", variant="int8", S=[2, 2, 2], seqused=[70, 12, 1], NI=4, DI=64, BS=16, K=32,
         sets=[], R=1, topk_via="set"),
    dict(name="int8_v4_flash", variant="int8", S=[2, 0, 2, 1, 2], seqused=[150, 900, 6, 30, 4], NI=8, DI=128,
         BS=8, K=16, sets=["preset=v4_flash"], R=4, topk_via="set"),
    dict(name="int8_v4_pro_r2", variant="int8", S=[2, 1, 2], seqused=[61, 1, 12], NI=3, DI=96, BS=4, K=20,
         sets=["preset=v4_pro", "cmp_ratio=2"], R=2, topk_via="both"),
    dict(name="bf16_r1", variant="bf16", S=[2, 2, 1], seqused=[90, 20, 0], NI=3, DI=128, BS=16, K=24,
         sets=[], R=1, topk_via="metadata"),
    dict(name="bf16_r4", variant="bf16", S=[2, 1, 2], seqused=[300, 100, 2], NI=4, DI=64, BS=16, K=64,
         sets=["cmp_ratio=4"], R=4, topk_via="both"),
]


def check_case(chk, args, work, rng, c):
    p = build_problem(rng, c["variant"], c["S"], c["seqused"], c["NI"], c["DI"], c["BS"], c["R"])
    K = c["K"]
    name = c["name"]
    assert any(x < K for x in p.n) and any(x == 0 for x in p.n), name + ": case lacks short or empty rows"
    inp = os.path.join(work, name + ".in.safetensors")
    meta = {}
    sets = list(c["sets"])
    if c["topk_via"] in ("set", "both"):
        sets.append("topk=%d" % K)
    if c["topk_via"] in ("metadata", "both"):
        meta["topk"] = str(K if c["topk_via"] == "metadata" else K + 5)
    write_safetensors(inp, p.tensors, meta)

    rt, rmeta = ref_run(chk, args, name, OP, inp, os.path.join(work, name + ".ref.safetensors"), sets)
    if rt is None:
        return
    (ritag, ri), (rstag, rs) = topk_outputs(rt)
    chk.check(ritag == "I32" and ri.shape == (p.T, K) and rstag == "F32" and rs.shape == (p.T, K),
              name + ": OUT holds topk_indices [T,K] I32 and topk_scores [T,K] F32",
              "(%s %s, %s %s)" % (ritag, None if ri is None else ri.shape, rstag, None if rs is None else rs.shape))
    if ri is None or ri.shape != (p.T, K) or rs is None or rs.shape != (p.T, K):
        return
    chk.check(rmeta.get("topk") == str(K) and rmeta.get("cmp_ratio") == str(c["R"]),
              name + ": metadata topk = %d, cmp_ratio = %d" % (K, c["R"]),
              "(topk %r, cmp_ratio %r)" % (rmeta.get("topk"), rmeta.get("cmp_ratio")))
    ok, text = row_rules(ri, rs, p.n, K)
    chk.check(ok, name + ": oracle rows follow spec 2.9 (counts, -1 / -Inf tails, order)", text)

    # the oracle against an independent numpy evaluation
    ni, ns = numpy_reference(p, K)
    ok, text = compare_topk(ri, ni)
    chk.check(ok, name + ": oracle topk_indices vs numpy", text)
    a, b = common_scores(ri, rs, ni, ns)
    ok, text = compare_close(a, b, *SCORE_TOL)
    chk.check(ok and len(a) > 0, name + ": oracle topk_scores vs numpy (common indices)", text)

    def compare(label, extra, t, meta):
        (itag, oi), (stag, osc) = topk_outputs(t)
        if not chk.check(itag == "I32" and stag == "F32" and oi.shape == (p.T, K) and osc.shape == (p.T, K),
                         label + ": output dtypes and shapes"):
            return False
        ok, text = row_rules(oi, osc, p.n, K)
        chk.check(ok, label + ": rows follow spec 2.9 (counts, -1 / -Inf tails, order)", text)
        ok, text = compare_topk(oi, ri)
        chk.check(ok, label + ": topk_indices vs oracle (compare_topk, max_miss 1)", text)
        a, b = common_scores(oi, osc, ri, rs)
        ok, text = compare_close(a, b, *SCORE_TOL)
        chk.check(ok and len(a) > 0, label + ": topk_scores vs oracle (common indices)", text)

    tool_runs(chk, args, work, name, OP, inp, sets, compare)


def check_errors(chk, args, work, rng):
    """Bad invocations: non-zero exit, a 'dsops run: <STATUS>:' line, OUT neither created nor touched."""
    p = build_problem(rng, "int8", [2, 1], [30, 17], 2, 32, 8, 1)
    pb = build_problem(rng, "bf16", [2, 1], [30, 17], 2, 32, 8, 1)
    good = os.path.join(work, "err.in.safetensors")
    write_safetensors(good, p.tensors)

    def variant(name, base, mutate, meta=None):
        return write_mutated(work, name, base.tensors, mutate, meta)

    no_weights = variant("no_weights", p, lambda t: t.pop("weights"))
    no_qscale = variant("no_qscale", p, lambda t: t.pop("q_idx_scale"))
    f32_weights = variant("f32_weights", p, lambda t: t.__setitem__("weights", t["weights"].astype(np.float32)))
    mixed = variant("mixed", p, lambda t: t.__setitem__("key_cache", pb.tensors["key_cache"]))
    bf16_scaled = variant("bf16_scaled", pb, lambda t: t.__setitem__("q_idx_scale", p.tensors["q_idx_scale"]))
    rank2 = variant("rank2", p, lambda t: t.__setitem__("q_idx", t["q_idx"].reshape(t["q_idx"].shape[0], -1)))
    bt = p.tensors["block_table"].copy()
    bt[0, 0] = 9999  # the first block of sequence 0, which its tokens see
    bad_block = variant("block", p, lambda t: t.__setitem__("block_table", bt))
    bt_narrow = p.tensors["block_table"][:, :4].copy()  # the columns sequence 0 needs (30 keys, BS 8)
    bt_narrow[1, 3] = 0

    def narrow(t):
        t["block_table"] = bt_narrow
        t["seqused_kv"] = np.array([30, 33], np.int32)  # sequence 1 now needs column 4 of 4

    beyond = variant("beyond_mb", p, narrow)
    bad_cu = variant("cu", p, lambda t: t.__setitem__("cu_seqlens_q", np.array([0, 3, 2], np.int32)))
    meta_zero = variant("meta_zero", p, lambda t: None, {"topk": "0"})

    k = ["--set", "topk=8"]
    # runcheck.bad_calls rows (label, argv, status): alike in shape in every run_*_check.py, each its operator's own
    cases = [
        ("missing --set topk", [OP, "--in", good], "DSOPS_RUN_ERR_USAGE"),
        ("missing --set topk with other --set", [OP, "--in", good, "--set", "cmp_ratio=1"], "DSOPS_RUN_ERR_USAGE"),
        ("topk 0", [OP, "--in", good, "--set", "topk=0"], "DSOPS_ERR_PARAM"),
        ("topk negative", [OP, "--in", good, "--set", "topk=-3"], "DSOPS_ERR_PARAM"),
        ("topk not a number", [OP, "--in", good, "--set", "topk=abc"], "DSOPS_ERR_PARAM"),
        ("topk 0 in metadata", [OP, "--in", meta_zero], "DSOPS_ERR_PARAM"),
        ("topk beyond 2^24", [OP, "--in", good, "--set", "topk=16777217"], "DSOPS_ERR_UNSUPPORTED"),
        ("unknown --set name", [OP, "--in", good, "--set", "top_k=8"], "DSOPS_ERR_PARAM"),
        ("cmp_ratio 0", [OP, "--in", good, "--set", "cmp_ratio=0"] + k, "DSOPS_ERR_PARAM"),
        ("missing weights", [OP, "--in", no_weights] + k, "DSOPS_ERR_NULL"),
        ("int8 without q_idx_scale", [OP, "--in", no_qscale] + k, "DSOPS_ERR_NULL"),
        ("F32 weights", [OP, "--in", f32_weights] + k, "DSOPS_ERR_DTYPE"),
        ("int8 q_idx with a bf16 key_cache", [OP, "--in", mixed] + k, "DSOPS_ERR_DTYPE"),
        ("bf16 variant given q_idx_scale", [OP, "--in", bf16_scaled] + k, "DSOPS_ERR_PARAM"),
        ("q_idx of rank 2", [OP, "--in", rank2] + k, "DSOPS_ERR_SHAPE"),
        ("visible block outside [0, NB)", [OP, "--in", bad_block] + k, "DSOPS_ERR_INDEX"),
        ("visible key beyond the block table", [OP, "--in", beyond] + k, "DSOPS_ERR_INDEX"),
        ("cu_seqlens_q decreasing", [OP, "--in", bad_cu] + k, "DSOPS_ERR_INDEX"),
    ]
    bad_calls(chk, args, work, cases, leftovers=True)
    r = run([args.tool, "run", OP, "--in", good, "--out", os.path.join(work, "never.safetensors")], args.verbose)
    chk.check(r.returncode == 2 and "topk" in r.stderr, "missing topk: exit code 2 and a message naming topk",
              "(rc %d, stderr %r)" % (r.returncode, r.stderr.strip()))

    # empty work (T = 0, and B = 0): valid, outputs with zero rows
    for B in (1, 0):
        NI, DI, BS, K = 2, 32, 8, 5
        t = {"q_idx": np.zeros((0, NI, DI), np.int8), "q_idx_scale": np.zeros((0, NI), np.float16),
             "weights": np.zeros((0, NI), np.float16), "key_cache": np.zeros((2, BS, DI), np.int8),
             "key_scale_cache": np.zeros((2, BS), np.float16), "block_table": np.zeros((B, 2), np.int32),
             "cu_seqlens_q": np.zeros(B + 1, np.int32), "seqused_kv": np.full(B, 5, np.int32)}
        both_accept(chk, args, work, "empty%d" % B,
                    "empty work with B = %d gives [0, K] outputs, cmp_ratio 1 by default" % B, OP, t,
                    lambda o, m: (o["topk_indices"][1].shape == (0, K) and o["topk_scores"][1].shape == (0, K) and
                                  m.get("cmp_ratio") == "1"), ["topk=%d" % K])
    # --help names the operator and its required parameter
    check_run_help(chk, args, ("lightning_indexer", "topk", "cmp_ratio"), "lightning_indexer, topk and cmp_ratio")
    # unknown presets, OUT fed back as IN (topk then comes from OUT's metadata): tests/io/run_cases_check.py


if __name__ == "__main__":
    sys.exit(runcheck.main(__doc__, "li", 3206, case_checks((check_case, CASES), errors=check_errors)))
