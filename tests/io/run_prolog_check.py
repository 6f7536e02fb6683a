#!/usr/bin/env python3
"""End-to-end check of `dsops run mla_prolog_v32` and `dsops run indexer_prolog_v32` (docs/OPERATORS.md 4.1, 4.2).

The script builds small prolog problems with numpy (H 256, Q 128; MLA: N 4, Dqn 32, Dc 128 or 512 for
packed_int8; indexer: NI 4, DI 64 or NI 2, DI 128), with caches random in every row (NaN in some rows no
token writes), distinct cache rows for the tokens and a few tokens with cache_index -1, writes them as
safetensors files and runs

    dsops run <prolog> --in IN --out OUT [--set ...]
    dsops_ref_run <prolog> --in IN --out REF [--set ...]

Both variants of each prolog are covered (bf16 / int8 wq_b; bf16 / int8 indexer), and the three kv layouts
of the MLA prolog (given by inference, --set and IN's metadata). Every output and every in-out cache is
compared with the tolerances of sections 4.1 / 4.2: the addressed cache rows with compare_close (packed_int8
rows field by field), every other row bit-identical to IN. Outputs of one variant only (qr_scale,
q_idx_scale: int8) must be absent from OUT for the other variant. A few oracle values are checked against
an independent numpy evaluation (qr / qr_scale, the normalised latent of split_bf16 rows, the indexer
weights). Thread counts must give identical bytes, and malformed calls (a repeated or out-of-range
cache_index, a missing layout cache, bad parameters) must exit non-zero without creating or touching OUT.

usage: run_prolog_check.py --tool PATH/dsops --ref PATH/dsops_ref_run [--workdir DIR] [--keep] [--verbose]
Prints "N passed, N failed" last and exits non-zero on failure.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runcheck  # noqa: E402
from runcheck import (case_checks, check_run_help, both_accept, bad_calls, bf16_from_f32, compare_close,  # noqa: E402
                      compare_outputs, f32_from_bf16, latent_caches, np_q8, np_rmsnorm, packed_int8_fields,
                      param_value, q8_rows, run_both, sylvester, ub, values, wq_b_entries, write_mutated)

MLA = "mla_prolog_v32"
IDX = "indexer_prolog_v32"

# tolerances (atol, rtol, ratio) of spec 4.1 / 4.2
TOL_Q = (0.005, 2.0 ** -7, 0.005)          # q_nope, q_rope
TOL_I8 = (1, 0, 0.005)                      # int8 qr, int8 latent rows, int8 indexer keys
TOL_BF16 = (1e-4, 2.0 ** -7, 0.005)         # bf16 qr, bf16 latent / kr rows, bf16 keys, bf16 q_idx and weights
TOL_QR_SCALE = (2.5e-5, 0.005, 0.005)
TOL_KV_SCALE = (2.5e-5, 0.005, 0)
TOL_Q_IDX_I8 = (1, 0, 0)
TOL_FP16_SCALE = (2.5e-5, 0, 0.005)         # q_idx_scale, key scales
TOL_W_FP16 = (2.5e-5, 2.0 ** -10, 0.005)

H, Q = 256, 128


def rope_tables(rng, T, dtype):
    ang = rng.uniform(0, 2 * np.pi, (T, 64))
    c, s = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    if dtype == "bf16":
        return ("BF16", bf16_from_f32(c)), ("BF16", bf16_from_f32(s))
    return c, s


def cache_rows(rng, T, NB, BS, negatives=2):
    """Distinct cache rows for the tokens, `negatives` of them -1 (not stored)."""
    rows = rng.choice(NB * BS, size=T, replace=False).astype(np.int64)
    if negatives:
        rows[rng.choice(T, size=negatives, replace=False)] = -1
    return rows


def poison_rows(rng, rows_total, ci, count=3):
    """Some rows no token writes (to hold NaN)."""
    free = np.setdiff1d(np.arange(rows_total), ci[ci >= 0])
    return rng.choice(free, size=min(count, len(free)), replace=False)


# ---- problems -------------------------------------------------------------------------------------


def build_mla(rng, variant, layout, T, N=4, Dqn=32, gamma_dtype="bf16", table_dtype="bf16", NB=6, BS=16):
    Dc = 512 if layout == "packed_int8" else 128
    i8 = variant == "int8"
    t = {}
    t["x"] = ub(rng, (T, H))
    t["wq_a"] = ub(rng, (Q, H), 0.1)
    g = rng.uniform(-1, 1, Q).astype(np.float32)
    t["gamma_cq"] = ("BF16", bf16_from_f32(g)) if gamma_dtype == "bf16" else g
    NG = N * (Dqn + 64)
    t.update(wq_b_entries(rng, NG, Q, i8))
    t["w_uk"] = ub(rng, (N, Dqn, Dc), 0.1)
    t["wkv_a"] = ub(rng, (Dc + 64, H), 0.1)
    g = rng.uniform(-1, 1, Dc).astype(np.float32)
    t["gamma_ckv"] = ("BF16", bf16_from_f32(g)) if gamma_dtype == "bf16" else g
    t["rope_cos"], t["rope_sin"] = rope_tables(rng, T, table_dtype)
    ci = cache_rows(rng, T, NB, BS)
    t["cache_index"] = ci
    rows = NB * BS
    bad = poison_rows(rng, rows, ci)
    lat = rng.uniform(-1, 1, (rows, Dc)).astype(np.float32)
    rope = bf16_from_f32(rng.uniform(-1, 1, (rows, 64)).astype(np.float32))
    rope[bad] = 0x7FC0
    t.update(latent_caches(layout, lat, rope, NB, BS, bad))
    return t, dict(T=T, N=N, Dc=Dc, i8=i8)


def build_idx(rng, variant, T, NI=4, DI=64, hadamard="bf16", norm_dtype="bf16", table_dtype="bf16", NB=6, BS=16):
    i8 = variant == "int8"
    t = {}
    t["x"] = ub(rng, (T, H))
    if i8:
        t["qr"] = rng.integers(-128, 128, (T, Q), dtype=np.int8)
        t["qr_scale"] = rng.uniform(1e-3, 2e-2, T).astype(np.float32)
        t["idx_wq_b"] = rng.integers(-128, 128, (NI * DI, Q), dtype=np.int8)
        t["idx_wq_b_scale"] = rng.uniform(-0.01, 0.01, NI * DI).astype(np.float32)
    else:
        t["qr"] = ub(rng, (T, Q))
        t["idx_wq_b"] = ub(rng, (NI * DI, Q), 0.2)
    t["idx_wk"] = ub(rng, (DI, H))
    t["weights_proj"] = ub(rng, (NI, H))
    if norm_dtype == "bf16":
        t["ln_gamma_k"] = ub(rng, (DI,))
        t["ln_beta_k"] = ub(rng, (DI,), 0.5)
    else:
        t["ln_gamma_k"] = rng.uniform(-1, 1, DI).astype(np.float32)
        t["ln_beta_k"] = rng.uniform(-0.5, 0.5, DI).astype(np.float32)
    t["rope_cos"], t["rope_sin"] = rope_tables(rng, T, table_dtype)
    if hadamard is not None:
        hm = sylvester(DI)
        for n in ("hadamard_q", "hadamard_k"):
            t[n] = ("BF16", bf16_from_f32(hm)) if hadamard == "bf16" else hm.copy()
    ci = cache_rows(rng, T, NB, BS)
    t["cache_index"] = ci
    rows = NB * BS
    bad = poison_rows(rng, rows, ci)
    kf = rng.uniform(-1, 1, (rows, DI)).astype(np.float32)
    if i8:
        q, s = q8_rows(kf, DI)
        sc = s[:, 0].astype(np.float16)
        sc[bad] = np.float16(np.nan)
        t["idx_k_cache"] = q.reshape(NB, BS, DI)
        t["idx_k_scale_cache"] = sc.reshape(NB, BS)
    else:
        k = bf16_from_f32(kf)
        k[bad] = 0x7FC0
        t["idx_k_cache"] = ("BF16", k.reshape(NB, BS, DI))
    return t, dict(T=T, NI=NI, DI=DI, i8=i8)


# ---- comparisons ----------------------------------------------------------------------------------


def tensor_of(t, name):
    """(tag, array) of an IN entry."""
    e = t[name]
    if isinstance(e, tuple):
        return e
    return None, e


def compare_cache(chk, label, name, inp, got, ref):
    """Rows at cache_index: compare_close with the spec tolerances (packed rows field by field); every other
    row bit-identical to IN, in both OUT and REF."""
    ci = inp["cache_index"]
    _, before = tensor_of(inp, name)
    gtag, g = got[name]
    rtag, r = ref[name]
    if not chk.check(gtag == rtag and g.shape == before.shape and r.shape == before.shape,
                     "%s: %s has the dtype and shape of IN" % (label, name), "(%s %s)" % (gtag, g.shape)):
        return
    nrows = before.shape[0] * before.shape[1]
    b2, g2, r2 = before.reshape(nrows, -1), g.reshape(nrows, -1), r.reshape(nrows, -1)
    hit = ci[ci >= 0]
    other = np.setdiff1d(np.arange(nrows), hit)
    chk.check(g2[other].tobytes() == b2[other].tobytes() and r2[other].tobytes() == b2[other].tobytes(),
              "%s: %s rows not addressed are bit-identical to IN" % (label, name))
    if name == "kv_packed":
        parts = zip(("latent", "rope", "scales"), packed_int8_fields(g2[hit]), packed_int8_fields(r2[hit]),
                    (TOL_I8, TOL_BF16, TOL_KV_SCALE))
        for what, a, b, tol in parts:
            ok, text = compare_close(a.astype(np.float64), b.astype(np.float64), *tol)
            chk.check(ok, "%s: kv_packed %s rows vs oracle" % (label, what), text)
        return
    if name in ("kv_scale_cache",):
        tol = TOL_KV_SCALE
    elif name == "idx_k_scale_cache":
        tol = TOL_FP16_SCALE
    elif gtag == "I8":
        tol = TOL_I8
    else:
        tol = TOL_BF16
    ok, text = compare_close(values(gtag, g2[hit]), values(rtag, r2[hit]), *tol)
    chk.check(ok, "%s: %s rows vs oracle" % (label, name), text)


# ---- independent numpy values ---------------------------------------------------------------------


def np_lin_bf16(x_bits, w_bits):
    """bf16(x W^T) with fp64 sums rounded to fp32 first."""
    y = (f32_from_bf16(x_bits).astype(np.float64) @ f32_from_bf16(w_bits).astype(np.float64).T).astype(np.float32)
    return f32_from_bf16(bf16_from_f32(y))


def gamma_values(e):
    return f32_from_bf16(e[1]) if isinstance(e, tuple) else e.astype(np.float32)


def numpy_mla_checks(chk, label, t, ref, info, eps_cq, eps_ckv, layout):
    a = np_lin_bf16(t["x"][1], t["wq_a"][1])
    cq = np_rmsnorm(a, gamma_values(t["gamma_cq"]), eps_cq)
    if info["i8"]:
        q, s = np_q8(f32_from_bf16(cq), Q)
        ok, text = compare_close(ref["qr"][1].astype(np.float64), q.astype(np.float64), *TOL_I8)
        chk.check(ok, label + ": oracle qr vs numpy Q8(cq)", text)
        ok, text = compare_close(ref["qr_scale"][1], s[:, 0], *TOL_QR_SCALE)
        chk.check(ok, label + ": oracle qr_scale vs numpy", text)
    else:
        ok, text = compare_close(f32_from_bf16(ref["qr"][1]), f32_from_bf16(cq), *TOL_BF16)
        chk.check(ok, label + ": oracle qr vs numpy cq", text)
    if layout == "split_bf16":
        Dc = info["Dc"]
        kva = np_lin_bf16(t["x"][1], t["wkv_a"][1])
        ckv = f32_from_bf16(np_rmsnorm(kva[:, :Dc], gamma_values(t["gamma_ckv"]), eps_ckv))
        ci = t["cache_index"]
        kv = f32_from_bf16(ref["kv_cache"][1]).reshape(-1, Dc)
        ok, text = compare_close(kv[ci[ci >= 0]], ckv[ci >= 0], *TOL_BF16)
        chk.check(ok, label + ": oracle kv_cache rows vs numpy RMSNorm latent", text)


def numpy_idx_checks(chk, label, t, ref, info, weights_scale):
    w = np_lin_bf16(t["x"][1], t["weights_proj"][1]) * np.float32(weights_scale)
    w = w.astype(np.float32)
    if info["i8"]:
        expect = w.astype(np.float16).astype(np.float64)
        tol = TOL_W_FP16
    else:
        expect = f32_from_bf16(bf16_from_f32(w)).astype(np.float64)
        tol = TOL_BF16
    ok, text = compare_close(values(*ref["weights"]), expect, *tol)
    chk.check(ok, label + ": oracle weights vs numpy", text)


# ---- cases ----------------------------------------------------------------------------------------

MLA_CASES = [
    dict(name="mla_bf16_split_bf16", variant="bf16", layout="split_bf16", T=12, via="infer", sets=[], meta={}),
    dict(name="mla_int8_split_int8", variant="int8", layout="split_int8", T=12, via="metadata",
         sets=["eps_cq=1e-5", "eps_ckv=1e-5"], meta={"rope_mode": "half"}, gamma="fp32"),
    dict(name="mla_int8_packed_int8", variant="int8", layout="packed_int8", T=10, via="set",
         sets=["rope_mode=interleaved", "rope_inverse=true"], meta={}, tables="fp32"),
    dict(name="mla_bf16_split_int8", variant="bf16", layout="split_int8", T=9, via="infer",
         sets=["rope_mode=interleaved_in_half_out"], meta={}),
    dict(name="mla_bf16_packed_int8", variant="bf16", layout="packed_int8", T=6, via="infer", sets=["eps_cq=0"], meta={}),
]

IDX_CASES = [
    dict(name="idx_int8", variant="int8", T=12, hadamard="bf16", sets=[], meta={}),
    dict(name="idx_int8_r2_dq128", variant="int8", T=10, NI=2, DI=128, hadamard="fp32", norm="fp32",
         sets=["ln_eps=1e-5"], meta={"rope_mode": "interleaved_in_half_out"}, tables="fp32"),
    dict(name="idx_bf16_dia", variant="bf16", T=12, hadamard=None,
         sets=["weights_scale=1", "rope_mode=interleaved_in_half_out"], meta={}),
    dict(name="idx_bf16_hadamard", variant="bf16", T=9, hadamard="bf16",
         sets=["rope_mode=interleaved", "rope_inverse=true"], meta={}),
]


def check_mla_case(chk, args, work, rng, c):
    t, info = build_mla(rng, c["variant"], c["layout"], c["T"], gamma_dtype=c.get("gamma", "bf16"),
                        table_dtype=c.get("tables", "bf16"))
    T, N, Dc, i8 = info["T"], info["N"], info["Dc"], info["i8"]
    meta = dict(c["meta"])
    sets = list(c["sets"])
    if c["via"] == "metadata":
        meta["kv_layout"] = c["layout"]
    elif c["via"] == "set":
        sets.append("kv_layout=" + c["layout"])
    caches = [n for n in ("kv_cache", "kv_scale_cache", "kr_cache", "kv_packed") if n in t]
    outs = ["q_nope", "q_rope", "qr"] + (["qr_scale"] if i8 else [])
    eps_cq = float(param_value(c, "eps_cq", "1e-6"))
    eps_ckv = float(param_value(c, "eps_ckv", "1e-6"))
    name = c["name"]

    def check_ref(ref, rmeta):
        shapes = {"q_nope": ("BF16", (T, N, Dc)), "q_rope": ("BF16", (T, N, 64)),
                  "qr": ("I8" if i8 else "BF16", (T, Q))}
        if i8:
            shapes["qr_scale"] = ("F32", (T,))
        ok = all(n in ref and ref[n][0] == dt and ref[n][1].shape == s for n, (dt, s) in shapes.items())
        chk.check(ok, name + ": OUT holds q_nope, q_rope, qr%s with the derived shapes" % (", qr_scale" if i8 else ""))
        if not i8:
            chk.check("qr_scale" not in ref, name + ": no qr_scale in OUT for bf16 wq_b")
        chk.check(all(n in ref for n in caches), name + ": OUT holds every cache of the layout")
        chk.check(rmeta.get("kv_layout") == c["layout"], name + ": kv_layout resolved to " + c["layout"],
                  "(%r)" % rmeta.get("kv_layout"))
        want_mode = param_value(c, "rope_mode", "interleaved_in_half_out")
        chk.check(rmeta.get("rope_mode") == want_mode, name + ": rope_mode = " + want_mode,
                  "(%r)" % rmeta.get("rope_mode"))
        numpy_mla_checks(chk, name, t, ref, info, eps_cq, eps_ckv, c["layout"])

    tols = {"q_nope": TOL_Q, "q_rope": TOL_Q, "qr": TOL_I8 if i8 else TOL_BF16}
    if i8:
        tols["qr_scale"] = TOL_QR_SCALE

    def compare(label, extra, got, meta, ref, rmeta):
        compare_outputs(chk, label, got, ref, tols)
        for n in caches:
            compare_cache(chk, label, n, t, got, ref)

    assert sorted(tols) == sorted(outs)
    ref, rmeta = run_both(chk, args, work, MLA, name, t, sets, meta, compare)
    if ref is not None:
        check_ref(ref, rmeta)


def check_idx_case(chk, args, work, rng, c):
    t, info = build_idx(rng, c["variant"], c["T"], NI=c.get("NI", 4), DI=c.get("DI", 64), hadamard=c["hadamard"],
                        norm_dtype=c.get("norm", "bf16"), table_dtype=c.get("tables", "bf16"))
    T, NI, DI, i8 = info["T"], info["NI"], info["DI"], info["i8"]
    caches = [n for n in ("idx_k_cache", "idx_k_scale_cache") if n in t]
    weights_scale = float(param_value(c, "weights_scale", repr(float(np.float32(1.0 / np.sqrt(64.0 * 128.0))))))
    name = c["name"]

    def check_ref(ref, rmeta):
        shapes = {"q_idx": ("I8" if i8 else "BF16", (T, NI, DI)), "weights": ("F16" if i8 else "BF16", (T, NI))}
        if i8:
            shapes["q_idx_scale"] = ("F16", (T, NI))
        ok = all(n in ref and ref[n][0] == dt and ref[n][1].shape == s for n, (dt, s) in shapes.items())
        chk.check(ok, name + ": OUT holds q_idx, weights%s with the derived shapes" % (", q_idx_scale" if i8 else ""))
        if not i8:
            chk.check("q_idx_scale" not in ref, name + ": no q_idx_scale in OUT for the bf16 variant")
        chk.check(all(n in ref for n in caches), name + ": OUT holds the indexer key cache%s" %
                  (" and its scales" if i8 else ""))
        want_mode = param_value(c, "rope_mode", "half")
        chk.check(rmeta.get("rope_mode") == want_mode, name + ": rope_mode = " + want_mode,
                  "(%r)" % rmeta.get("rope_mode"))
        numpy_idx_checks(chk, name, t, ref, info, weights_scale)

    if i8:
        tols = {"q_idx": TOL_Q_IDX_I8, "q_idx_scale": TOL_FP16_SCALE, "weights": TOL_W_FP16}
    else:
        tols = {"q_idx": TOL_BF16, "weights": TOL_BF16}

    def compare(label, extra, got, meta, ref, rmeta):
        compare_outputs(chk, label, got, ref, tols)
        for n in caches:
            compare_cache(chk, label, n, t, got, ref)

    ref, rmeta = run_both(chk, args, work, IDX, name, t, c["sets"], c["meta"], compare)
    if ref is not None:
        check_ref(ref, rmeta)


# ---- malformed calls ------------------------------------------------------------------------------


def check_errors(chk, args, work, rng):
    """Malformed calls: non-zero exit, a 'dsops run: <STATUS>:' line, OUT neither created nor touched."""
    tm, _ = build_mla(rng, "int8", "split_int8", 6)
    ti, _ = build_idx(rng, "int8", 6)

    def variant(base, name, mutate):
        return write_mutated(work, name, base, mutate)

    def dup_of(t):
        ci = t["cache_index"].copy()
        pos = np.flatnonzero(ci >= 0)
        ci[pos[1]] = ci[pos[0]]
        return ci

    def far_of(t):
        ci = t["cache_index"].copy()
        ci[np.flatnonzero(ci >= 0)[-1]] = 1 << 40
        return ci

    mla_good = variant(tm, "mla_good", lambda v: None)
    mla_dup = variant(tm, "mla_dup", lambda v: v.__setitem__("cache_index", dup_of(tm)))
    mla_far = variant(tm, "mla_far", lambda v: v.__setitem__("cache_index", far_of(tm)))
    mla_no_kr = variant(tm, "mla_no_kr", lambda v: v.pop("kr_cache"))
    mla_f32_x = variant(tm, "mla_f32_x", lambda v: v.__setitem__("x", f32_from_bf16(v["x"][1])))
    idx_good = variant(ti, "idx_good", lambda v: None)
    idx_dup = variant(ti, "idx_dup", lambda v: v.__setitem__("cache_index", dup_of(ti)))
    idx_no_had = variant(ti, "idx_no_had", lambda v: v.pop("hadamard_k"))
    idx_no_scale = variant(ti, "idx_no_scale", lambda v: v.pop("idx_k_scale_cache"))
    # runcheck.bad_calls rows (label, argv, status): alike in shape in every run_*_check.py, each its operator's own
    cases = [
        ("mla: cache_index repeated", [MLA, "--in", mla_dup], "DSOPS_ERR_INDEX"),
        ("mla: cache_index beyond NB*BS", [MLA, "--in", mla_far], "DSOPS_ERR_INDEX"),
        ("mla: split_int8 without kr_cache", [MLA, "--in", mla_no_kr], "DSOPS_ERR_NULL"),
        ("mla: kv_layout=packed_int8 with Dc 128", [MLA, "--in", mla_good, "--set", "kv_layout=packed_int8"],
         "DSOPS_ERR_SHAPE"),
        ("mla: kv_layout=split_bf16 with I8 caches", [MLA, "--in", mla_good, "--set", "kv_layout=split_bf16"],
         "DSOPS_ERR_DTYPE"),
        ("mla: F32 x", [MLA, "--in", mla_f32_x], "DSOPS_ERR_DTYPE"),
        ("mla: bad rope_mode spelling", [MLA, "--in", mla_good, "--set", "rope_mode=halves"], "DSOPS_ERR_PARAM"),
        ("mla: negative eps", [MLA, "--in", mla_good, "--set", "eps_cq=-1"], "DSOPS_ERR_PARAM"),
        ("mla: preset without this operator", [MLA, "--in", mla_good, "--set", "preset=v4_flash"], "DSOPS_ERR_PARAM"),
        ("mla: unknown --set name", [MLA, "--in", mla_good, "--set", "ln_eps=1e-6"], "DSOPS_ERR_PARAM"),
        ("idx: cache_index repeated", [IDX, "--in", idx_dup], "DSOPS_ERR_INDEX"),
        ("idx: int8 without hadamard_k", [IDX, "--in", idx_no_had], "DSOPS_ERR_NULL"),
        ("idx: int8 without idx_k_scale_cache", [IDX, "--in", idx_no_scale], "DSOPS_ERR_NULL"),
        ("idx: weights_scale inf", [IDX, "--in", idx_good, "--set", "weights_scale=inf"], "DSOPS_ERR_PARAM"),
        ("idx: bad rope_inverse", [IDX, "--in", idx_good, "--set", "rope_inverse=maybe"], "DSOPS_ERR_PARAM"),
        ("idx: unknown --set name", [IDX, "--in", idx_good, "--set", "kv_layout=split_bf16"], "DSOPS_ERR_PARAM"),
    ]
    bad_calls(chk, args, work, cases)

    # no tokens: valid, outputs with zero rows, caches unchanged
    for op, base, drop in ((MLA, tm, ()), (IDX, ti, ())):
        t = {}
        for n, e in base.items():
            tag, arr = tensor_of(base, n)
            if n in ("x", "qr", "rope_cos", "rope_sin", "cache_index", "qr_scale"):
                arr = arr[:0]
            t[n] = (tag, arr) if tag else arr
        first, cache = ("q_nope", "kv_cache") if op == MLA else ("q_idx", "idx_k_cache")
        both_accept(chk, args, work, "empty_" + op, op + " with no tokens gives empty outputs and unchanged caches",
                    op, t, lambda o, m: (o[first][1].shape[0] == 0 and
                                         o[cache][1].tobytes() == tensor_of(base, cache)[1].tobytes()))
    check_run_help(chk, args, (MLA, IDX, "eps_ckv", "weights_scale", "qr_scale"), "both prologs and their parameters")


if __name__ == "__main__":
    sys.exit(runcheck.main(__doc__, "prolog", 4142, case_checks((check_mla_case, MLA_CASES),
                                                                (check_idx_case, IDX_CASES), errors=check_errors)))
