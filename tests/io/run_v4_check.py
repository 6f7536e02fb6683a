#!/usr/bin/env python3
"""End-to-end check of `dsops run` for the DeepSeek-V4 prologs and the compressor (docs/OPERATORS.md 3.3 - 3.5).

    dsops run mla_prolog_v4     --in IN --out OUT [--set eps_cq=... eps_ckv=... eps_qh=... rope_mode=... ...]
    dsops run indexer_prolog_v4 --in IN --out OUT [--set weights_scale=... rope_mode=... rope_inverse=...]
    dsops run compressor        --in IN --out OUT [--set D=... ratio=... overlap=... rotate=... out_layout=...]

Small random problems (H 256, Q 128; MLA N 4, D 128; indexer NI 4, DI 128 and NI 2, DI 64; compressor
c4a-like D 128 R 4 C 2, c4li-like with a Hadamard, c128a-like R 16 C 1 with a ring state) go through both
`dsops run` and `dsops_ref_run` (the oracles); every output is compared with the tolerances of the spec,
the states' rows at the call's positions with 1e-3 / 1e-3 / 0 and every other state row must be
bit-identical to IN (rows that no position of the call needs hold NaN, rows the call overwrites hold NaN
too, so that a stale read shows). Compressor cases mix sequences whose start_pos closes windows (window 0
without a previous half, windows that need pre-call state) with sequences that close none, in both output
layouts; unfilled rows of `out` must be zero. The oracle itself is checked against an independent numpy
evaluation (qr, kv, q of the MLA prolog; the indexer weights; compressor entries and state rows).
--threads 1 and 3 must give identical bytes. One malformed call per operator (and a few for the
compressor's shape-derived parameters) must exit 1 with the status and a message naming the field, without
creating or touching OUT.

usage: run_v4_check.py --tool PATH/dsops --ref PATH/dsops_ref_run [--workdir DIR] [--keep] [--verbose]
Prints "N passed, N failed" last and exits non-zero on failure.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runcheck  # noqa: E402
from runcheck import (case_checks, check_run_help, THREADS, bad_calls, bf16_from_f32, compare_close,  # noqa: E402
                      compare_outputs, f32_from_bf16, np_q8, np_rmsnorm, np_rope_apply, param_value, params_of,
                      run_both, sylvester, ub, values, wq_b_entries, write_safetensors)

MLA, IDX, CMP = "mla_prolog_v4", "indexer_prolog_v4", "compressor"

# tolerances (atol, rtol, ratio) of spec 3.3 - 3.5
TOL_BF16 = (1e-4, 2.0 ** -7, 0.005)      # q, kv, bf16 qr, compressor out
TOL_I8 = (1, 0, 0)                        # int8 qr, q_idx
TOL_QR_SCALE = (2.5e-5, 0.005, 0.005)
TOL_FP16 = (1e-4, 0.007825, 0.005)        # q_idx_scale, weights
TOL_STATE = (1e-3, 1e-3, 0)

H, Q = 256, 128


def vals_of(e):
    """float32 values of an IN entry (bf16 bits or float32)."""
    return f32_from_bf16(e[1]) if isinstance(e, tuple) else e.astype(np.float32)


def maybe_bf16(arr, dtype):
    return ("BF16", bf16_from_f32(arr)) if dtype == "bf16" else arr.astype(np.float32)


def rope_tables(rng, rows, dtype):
    ang = rng.uniform(0, 2 * np.pi, (rows, 64))
    return maybe_bf16(np.cos(ang).astype(np.float32), dtype), maybe_bf16(np.sin(ang).astype(np.float32), dtype)


def lin32(x, w):
    """lin() of spec 2.2 with an fp64 sum rounded once to fp32."""
    return (x.astype(np.float64) @ w.astype(np.float64).T).astype(np.float32)


def rms32(v, w, eps):
    """Unrounded fp32 RMSNorm (spec 2.3) of v [T, W]; w may be None."""
    d = v.astype(np.float64)
    y = (d / np.sqrt((d * d).sum(axis=1, keepdims=True) / v.shape[1] + eps)).astype(np.float32)
    return y if w is None else (y * w.astype(np.float32)).astype(np.float32)


def rope_tail(y_bits, cos, sin, mode, inverse):
    """Rotates the last 64 of every row of y [T, N, W] (bf16 bits) with the per-row tables -> bf16 bits."""
    W = y_bits.shape[-1]
    return np_rope_apply(f32_from_bf16(y_bits), cos, sin, W - 64, mode, inverse)


# ---- running both programs ------------------------------------------------------------------------


def run_v4(chk, args, work, op, c, t, compare):
    """The oracle once and `dsops run` with --threads 1 and 3 (see run_both); the first OUT is compared with
    compare(label, got, ref), and its metadata must equal the oracle run's. -> (ref, rmeta) or (None, None)."""
    def check(label, extra, got, meta, ref, rmeta):
        if extra[1] == "1":
            compare(label, got, ref)
            chk.check(params_of(meta) == params_of(rmeta), label + ": OUT's metadata (operator, parameters) "
                      "equals the oracle run's", "(%s vs %s)" % (meta, rmeta))

    return run_both(chk, args, work, op, c["name"], t, c.get("sets", []), c.get("meta"), check, THREADS)


def check_shapes(chk, label, out, want):
    """want: name -> (tag, shape)."""
    ok = all(n in out and out[n][0] == dt and tuple(out[n][1].shape) == tuple(s) for n, (dt, s) in want.items())
    chk.check(ok, label + ": OUT holds %s with the derived dtypes and shapes" % ", ".join(sorted(want)),
              str({n: (v[0], v[1].shape) for n, v in out.items()}))


# ---- mla_prolog_v4 --------------------------------------------------------------------------------


def build_mla(rng, c):
    T, N, D, i8 = c["T"], c.get("N", 4), c.get("D", 128), c["variant"] == "int8"
    t = {"x": ub(rng, (T, H)), "wq_a": ub(rng, (Q, H), 0.1)}
    t["gamma_cq"] = maybe_bf16(rng.uniform(0.5, 1.5, Q).astype(np.float32), c.get("gamma", "bf16"))
    t.update(wq_b_entries(rng, N * D, Q, i8))
    t["wkv"] = ub(rng, (D, H), 0.1)
    t["gamma_ckv"] = maybe_bf16(rng.uniform(0.5, 1.5, D).astype(np.float32), c.get("gamma", "bf16"))
    t["rope_cos"], t["rope_sin"] = rope_tables(rng, T, c.get("tables", "bf16"))
    return t, dict(T=T, N=N, D=D, i8=i8)


def numpy_mla(t, info, eps_cq, eps_ckv, eps_qh, mode, inverse):
    """Spec 3.3 in numpy -> dict of expected values (float64)."""
    T, N, D, i8 = info["T"], info["N"], info["D"], info["i8"]
    x = vals_of(t["x"])
    cos, sin = vals_of(t["rope_cos"]), vals_of(t["rope_sin"])
    a = lin32(x, vals_of(t["wq_a"]))
    e = {}
    if i8:
        cq = rms32(a, vals_of(t["gamma_cq"]), eps_cq)
        qr, s = np_q8(cq, Q)
        e["qr"], e["qr_scale"] = qr.astype(np.float64), s[:, 0].astype(np.float64)
        acc = qr.astype(np.int64) @ t["wq_b"].astype(np.int64).T
        qb = ((acc.astype(np.float32) * s[:, :1]).astype(np.float32) * t["wq_b_scale"][None, :]).astype(np.float32)
    else:
        qr_bits = np_rmsnorm(f32_from_bf16(bf16_from_f32(a)), vals_of(t["gamma_cq"]), eps_cq)
        e["qr"] = f32_from_bf16(qr_bits).astype(np.float64)
        qb = f32_from_bf16(bf16_from_f32(lin32(f32_from_bf16(qr_bits), vals_of(t["wq_b"]))))
    qn = bf16_from_f32(rms32(qb.reshape(T * N, D), None, eps_qh)).reshape(T, N, D)
    e["q"] = f32_from_bf16(rope_tail(qn, cos, sin, mode, inverse)).astype(np.float64)
    ka = lin32(x, vals_of(t["wkv"]))
    if not i8:
        ka = f32_from_bf16(bf16_from_f32(ka))
    kn = np_rmsnorm(ka, vals_of(t["gamma_ckv"]), eps_ckv).reshape(T, 1, D)
    e["kv"] = f32_from_bf16(rope_tail(kn, cos, sin, mode, inverse)).reshape(T, D).astype(np.float64)
    return e


MLA_CASES = [
    dict(name="mla4_bf16", variant="bf16", T=5),
    dict(name="mla4_int8", variant="int8", T=7, gamma="fp32", tables="fp32",
         sets=["eps_qh=1e-5", "rope_inverse=true"], meta={"eps_cq": "1e-5"}),
    dict(name="mla4_int8_pro_n3", variant="int8", T=3, N=3, D=192, sets=["preset=v4_pro", "rope_mode=half"]),
]


def check_mla(chk, args, work, rng, c):
    t, info = build_mla(rng, c)
    T, N, D, i8 = info["T"], info["N"], info["D"], info["i8"]
    tols = {"q": TOL_BF16, "kv": TOL_BF16, "qr": TOL_I8 if i8 else TOL_BF16}
    if i8:
        tols["qr_scale"] = TOL_QR_SCALE
    ref, rmeta = run_v4(chk, args, work, MLA, c, t, lambda label, got, ref: compare_outputs(chk, label, got, ref, tols))
    if ref is None:
        return
    name = c["name"]
    want = {"q": ("BF16", (T, N, D)), "kv": ("BF16", (T, D)), "qr": ("I8" if i8 else "BF16", (T, Q))}
    if i8:
        want["qr_scale"] = ("F32", (T,))
    check_shapes(chk, name, ref, want)
    if not i8:
        chk.check("qr_scale" not in ref, name + ": no qr_scale in OUT for bf16 wq_b")
    eps = [float(param_value(c, n, "1e-6")) for n in ("eps_cq", "eps_ckv", "eps_qh")]
    mode = param_value(c, "rope_mode", "interleaved")
    inverse = param_value(c, "rope_inverse", "false") == "true"
    chk.check(rmeta.get("rope_mode") == mode and rmeta.get("rope_inverse") == ("true" if inverse else "false"),
              name + ": metadata rope_mode / rope_inverse", str(rmeta))
    e = numpy_mla(t, info, eps[0], eps[1], eps[2], mode, inverse)
    for n in sorted(e):
        if n in ref:
            ok, text = compare_close(values(*ref[n]), e[n], *tols[n])
            chk.check(ok, "%s: oracle %s vs numpy" % (name, n), text)


# ---- indexer_prolog_v4 ----------------------------------------------------------------------------


def build_idx(rng, c):
    T, NI, DI = c["T"], c.get("NI", 4), c.get("DI", 128)
    t = {"qr": rng.integers(-127, 128, (T, Q), dtype=np.int8),
         "qr_scale": rng.uniform(1e-3, 2e-2, T).astype(np.float32),
         "x": ub(rng, (T, H)),
         "idx_wq_b": rng.integers(-127, 128, (NI * DI, Q), dtype=np.int8),
         "idx_wq_b_scale": rng.uniform(-0.01, 0.01, NI * DI).astype(np.float32),
         "weights_proj": ub(rng, (NI, H))}
    t["rope_cos"], t["rope_sin"] = rope_tables(rng, T, c.get("tables", "bf16"))
    t["hadamard"] = maybe_bf16(sylvester(DI), c.get("hadamard", "bf16"))
    return t, dict(T=T, NI=NI, DI=DI)


IDX_CASES = [
    dict(name="idxp4_ni4_di128", T=6),
    dict(name="idxp4_ni2_di64_vendor", T=5, NI=2, DI=64, hadamard="fp32", tables="fp32",
         sets=["rope_inverse=true"], meta={"weights_scale": "0.5"}),
]


def check_idx(chk, args, work, rng, c):
    t, info = build_idx(rng, c)
    T, NI, DI = info["T"], info["NI"], info["DI"]
    tols = {"q_idx": TOL_I8, "q_idx_scale": TOL_FP16, "weights": TOL_FP16}
    ref, rmeta = run_v4(chk, args, work, IDX, c, t, lambda label, got, ref: compare_outputs(chk, label, got, ref, tols))
    if ref is None:
        return
    name = c["name"]
    check_shapes(chk, name, ref, {"q_idx": ("I8", (T, NI, DI)), "q_idx_scale": ("F16", (T, NI)),
                                  "weights": ("F16", (T, NI))})
    ws = float(param_value(c, "weights_scale", repr(float(np.float32(1.0 / np.sqrt(64.0 * 128.0))))))
    w = (f32_from_bf16(bf16_from_f32(lin32(vals_of(t["x"]), vals_of(t["weights_proj"])))) * np.float32(ws))
    ok, text = compare_close(values(*ref["weights"]), w.astype(np.float32).astype(np.float16).astype(np.float64),
                             *TOL_FP16)
    chk.check(ok, name + ": oracle weights vs numpy", text)
    chk.check(rmeta.get("rope_inverse") == param_value(c, "rope_inverse", "false"), name + ": metadata rope_inverse",
              str(rmeta))


# ---- compressor -----------------------------------------------------------------------------------


def windows(start, S, R):
    """Indices k of the windows that close in positions [start, start + S)."""
    return list(range(start // R, (start + S) // R))


def candidates(k, R, C):
    """(position, half) pairs of window k in order; half 0 reads channels [0, D), half 1 [D, 2D)."""
    cur = [(u, 1 if C == 2 else 0) for u in range(k * R, k * R + R)]
    prev = [(u, 0) for u in range((k - 1) * R, k * R) if u >= 0] if C == 2 else []
    return prev + cur


class Geometry:
    """Paged state geometry of one compressor problem: a table per state."""

    def __init__(self, rng, seqs, needed, BS, ring, spare=2):
        B = len(seqs)
        MB = max((max(n) // BS + 1) if n else 1 for n in needed)
        table = np.full((B, MB), -1, dtype=np.int32)
        phys = []
        for b in range(B):
            for j in sorted({p // BS for p in needed[b]}):
                phys.append((b, j))
        if ring:  # every logical block of a sequence on one physical block
            owners = sorted({b for b, _ in phys})
            ids = rng.permutation(len(owners) + spare)
            for b, j in phys:
                table[b, j] = ids[owners.index(b)]
            self.NB = len(owners) + spare
        else:
            ids = rng.permutation(len(phys) + spare)
            for i, (b, j) in enumerate(phys):
                table[b, j] = ids[i]
            self.NB = len(phys) + spare
        self.table, self.BS = table, BS

    def slot(self, b, p):
        return int(self.table[b, p // self.BS]) * self.BS + p % self.BS


def build_cmp(rng, c):
    D, R, C, rotate = c["D"], c["R"], c["C"], c.get("rotate", False)
    seqs = c["seqs"]  # (start_pos, S_b)
    B, T = len(seqs), sum(s for _, s in seqs)
    cu = np.concatenate([[0], np.cumsum([s for _, s in seqs])]).astype(np.int32)
    counts = [len(windows(st, s, R)) for st, s in seqs]
    # positions each sequence needs: its own (written) and the pre-call candidates of closing windows
    needed, reads = [], []
    for st, s in seqs:
        pre = sorted({u for k in windows(st, s, R) for u, _ in candidates(k, R, C) if u < st})
        reads.append(pre)
        needed.append(sorted(set(pre) | set(range(st, st + s))))
    gk = Geometry(rng, seqs, needed, c["BS"], c.get("ring", False))
    gs = Geometry(rng, seqs, needed, c.get("BS2", c["BS"]), c.get("ring", False))
    NO = sum(counts) + c.get("extra_rows", 0) if c.get("layout", "packed") == "packed" else B + c.get("extra_rows", 0)
    t = {"x": ub(rng, (T, H)), "cu_seqlens_q": cu, "start_pos": np.array([st for st, _ in seqs], dtype=np.int32)}
    t["wkv"] = ub(rng, (C * D, H), H ** -0.5)
    t["wgate"] = ub(rng, (C * D, H), H ** -0.5)
    t["ape"] = rng.uniform(-1, 1, (R, C * D)).astype(np.float32)
    t["norm_weight"] = maybe_bf16(rng.uniform(0.5, 1.5, D).astype(np.float32), c.get("norm", "bf16"))
    if rotate:
        t["hadamard"] = maybe_bf16(sylvester(D), c.get("hadamard", "bf16"))
    t["rope_cos"], t["rope_sin"] = rope_tables(rng, NO, c.get("tables", "bf16"))
    # states: NaN everywhere, random values in the rows of pre-call candidates (what the call reads)
    states = {}
    for name, g, lo in (("kv_state", gk, -1.0), ("score_state", gs, -2.0)):
        st = np.full((g.NB * g.BS, C * D), np.nan, dtype=np.float32)
        for b in range(B):
            for u in reads[b]:
                st[g.slot(b, u)] = rng.uniform(lo, 1.0, C * D).astype(np.float32)
        states[name] = st.reshape(g.NB, g.BS, C * D)
    t["kv_state"], t["score_state"] = states["kv_state"], states["score_state"]
    t["kv_state_block_table"], t["score_state_block_table"] = gk.table, gs.table
    return t, dict(B=B, T=T, D=D, R=R, C=C, NO=NO, seqs=seqs, counts=counts, gk=gk, gs=gs, cu=cu)


def numpy_cmp(t, info, eps, mode, inverse, layout):
    """Spec 3.4 in numpy -> (out [NO, D] float64, out_count, kv rows, score rows: slot -> expected row)."""
    D, R, C, NO = info["D"], info["R"], info["C"], info["NO"]
    x = vals_of(t["x"])
    kvp = lin32(x, vals_of(t["wkv"]))
    scp = lin32(x, vals_of(t["wgate"]))
    pos = np.concatenate([np.arange(st, st + s) for st, s in info["seqs"]])
    scp = (scp + t["ape"][pos % R]).astype(np.float32)
    kv0, sc0 = t["kv_state"].reshape(-1, C * D), t["score_state"].reshape(-1, C * D)
    gk, gs = info["gk"], info["gs"]
    entries = []  # (row, pooled fp32 [D])
    for b, (st, s) in enumerate(info["seqs"]):
        t0 = info["cu"][b]

        def kv_sc(u):
            if u >= st:
                return kvp[t0 + u - st], scp[t0 + u - st]
            return kv0[gk.slot(b, u)], sc0[gs.slot(b, u)]

        for k in windows(st, s, R):
            cand = candidates(k, R, C)
            a = np.array([kv_sc(u)[0][h * D:(h + 1) * D] for u, h in cand], dtype=np.float64)
            z = np.array([kv_sc(u)[1][h * D:(h + 1) * D] for u, h in cand], dtype=np.float64)
            e = np.exp(z - z.max(axis=0))
            pooled = ((a * e).sum(axis=0) / e.sum(axis=0)).astype(np.float32)
            row = b if layout == "row_per_seq" else len(entries)
            entries.append((row, pooled))
    out = np.zeros((NO, D), dtype=np.float64)
    if entries:
        rows = [r for r, _ in entries]
        y = f32_from_bf16(bf16_from_f32(np.stack([p for _, p in entries])))
        y = np_rmsnorm(y, vals_of(t["norm_weight"]), eps).reshape(len(rows), 1, D)
        cos, sin = vals_of(t["rope_cos"])[rows], vals_of(t["rope_sin"])[rows]
        y = f32_from_bf16(rope_tail(y, cos, sin, mode, inverse)).reshape(len(rows), D)
        if "hadamard" in t:
            y = f32_from_bf16(bf16_from_f32(lin32(y, vals_of(t["hadamard"]).T)))
        out[rows] = y
    kv_rows, sc_rows = {}, {}
    for b, (st, s) in enumerate(info["seqs"]):  # ascending positions: a later one wins a shared ring row
        for i in range(s):
            kv_rows[gk.slot(b, st + i)] = kvp[info["cu"][b] + i]
            sc_rows[gs.slot(b, st + i)] = scp[info["cu"][b] + i]
    return out, np.array(info["counts"], dtype=np.int32), kv_rows, sc_rows


CMP_CASES = [
    # c4a-like: prefill closing windows 0 (no previous half) and 1; a decode pair closing window 1 from
    # pre-call state; a token that closes nothing; one spare row of out (must be zero)
    dict(name="cmp_c4a_packed", D=128, R=4, C=2, BS=8, BS2=4, seqs=[(0, 9), (6, 2), (13, 1)], extra_rows=1),
    # c4li-like: Hadamard, row_per_seq (the vendor layout), explicit parameters that agree with the shapes
    dict(name="cmp_c4li_row_per_seq", D=128, R=4, C=2, rotate=True, BS=16, seqs=[(3, 1), (1, 1), (254, 2)],
         layout="row_per_seq", sets=["out_layout=row_per_seq", "D=128", "ratio=4", "overlap=true", "rotate=true"],
         norm="fp32", tables="fp32"),
    # c128a-like: no overlap; one window from 14 pre-call positions, one sequence closing nothing
    dict(name="cmp_c128a_packed", D=128, R=16, C=1, BS=8, seqs=[(14, 2), (20, 3)], hadamard="fp32",
         meta={"norm_eps": "1e-5", "rope_inverse": "true"}),
    # c128a-like prefill on a ring of 8 rows per sequence: later positions win the shared state rows
    dict(name="cmp_c128a_ring_row_per_seq", D=128, R=16, C=1, BS=8, seqs=[(0, 20), (5, 11)], ring=True,
         layout="row_per_seq", meta={"out_layout": "row_per_seq"}, sets=["rope_mode=half"]),
]


def check_cmp(chk, args, work, rng, c):
    t, info = build_cmp(rng, c)
    layout = param_value(c, "out_layout", "packed")
    name = c["name"]

    def compare_states(label, got, ref):
        for sname, g in (("kv_state", info["gk"]), ("score_state", info["gs"])):
            before = t[sname].reshape(-1, info["C"] * info["D"])
            if not chk.check(sname in got and got[sname][0] == "F32" and got[sname][1].shape == t[sname].shape,
                             "%s: OUT holds %s with the shape of IN" % (label, sname)):
                continue
            gv, rv = got[sname][1].reshape(before.shape), ref[sname][1].reshape(before.shape)
            hit = sorted({g.slot(b, st + i) for b, (st, s) in enumerate(info["seqs"]) for i in range(s)})
            other = np.setdiff1d(np.arange(before.shape[0]), hit)
            chk.check(gv[other].tobytes() == before[other].tobytes(),
                      "%s: %s rows the call does not write are bit-identical to IN" % (label, sname))
            ok, text = compare_close(gv[hit], rv[hit], *TOL_STATE)
            chk.check(ok, "%s: %s rows of the call's positions vs oracle" % (label, sname), text)

    def compare(label, got, ref):
        compare_outputs(chk, label, got, ref, {"out": TOL_BF16})
        chk.check("out_count" in got and got["out_count"][1].tobytes() == ref["out_count"][1].tobytes(),
                  label + ": out_count equals the oracle's")
        compare_states(label, got, ref)

    ref, rmeta = run_v4(chk, args, work, CMP, c, t, compare)
    if ref is None:
        return
    check_shapes(chk, name, ref, {"out": ("BF16", (info["NO"], info["D"])), "out_count": ("I32", (info["B"],)),
                                  "kv_state": ("F32", t["kv_state"].shape),
                                  "score_state": ("F32", t["score_state"].shape)})
    want = {"D": str(info["D"]), "ratio": str(info["R"]), "overlap": "true" if info["C"] == 2 else "false",
            "rotate": "true" if "hadamard" in t else "false", "out_layout": layout}
    chk.check(all(rmeta.get(k) == v for k, v in want.items()), name + ": metadata D, ratio, overlap, rotate, "
              "out_layout from the shapes", "(%s)" % {k: rmeta.get(k) for k in want})
    eps = float(param_value(c, "norm_eps", "1e-6"))
    mode = param_value(c, "rope_mode", "interleaved")
    inverse = param_value(c, "rope_inverse", "false") == "true"
    out, counts, kv_rows, sc_rows = numpy_cmp(t, info, eps, mode, inverse, layout)
    chk.check(ref["out_count"][1].tolist() == counts.tolist(), name + ": oracle out_count = " + str(counts.tolist()),
              str(ref["out_count"][1].tolist()))
    filled = np.any(out != 0, axis=1)
    rv = values(*ref["out"])
    chk.check(not np.any(rv[~filled]), name + ": oracle out rows without an entry are zero")
    ok, text = compare_close(rv, out, *TOL_BF16)
    chk.check(ok, name + ": oracle out vs numpy", text)
    for sname, rows in (("kv_state", kv_rows), ("score_state", sc_rows)):
        slots = sorted(rows)
        got = ref[sname][1].reshape(-1, info["C"] * info["D"])[slots]
        ok, text = compare_close(got, np.stack([rows[s] for s in slots]), *TOL_STATE)
        chk.check(ok, "%s: oracle %s rows vs numpy" % (name, sname), text)


# ---- malformed calls ------------------------------------------------------------------------------


def check_errors(chk, args, work, rng):
    """Exit 1, 'dsops run: <STATUS>:' and the field's name on stderr; OUT neither created nor touched."""
    tm, _ = build_mla(rng, dict(variant="int8", T=3))
    tm.pop("wq_b_scale")
    ti, _ = build_idx(rng, dict(T=3, NI=2, DI=64))
    tc, _ = build_cmp(rng, dict(D=128, R=4, C=2, BS=8, seqs=[(0, 9)]))
    tc1, _ = build_cmp(rng, dict(D=128, R=4, C=2, BS=8, seqs=[(0, 9), (3, 1)], layout="row_per_seq"))
    files = {}
    for key, t in (("mla", tm), ("idx", ti), ("cmp", tc), ("cmp1", tc1)):
        files[key] = os.path.join(work, "err_%s.safetensors" % key)
        write_safetensors(files[key], t)
    cases = [
        ("mla_prolog_v4: int8 wq_b without wq_b_scale", [MLA, "--in", files["mla"]], "DSOPS_ERR_NULL", "wq_b_scale"),
        ("indexer_prolog_v4: weights_scale inf", [IDX, "--in", files["idx"], "--set", "weights_scale=inf"],
         "DSOPS_ERR_PARAM", "weights_scale"),
        ("compressor: ratio=8 with 4 rows of ape", [CMP, "--in", files["cmp"], "--set", "ratio=8"],
         "DSOPS_ERR_PARAM", "ratio"),
        ("compressor: overlap=false with C = 2", [CMP, "--in", files["cmp"], "--set", "overlap=false"],
         "DSOPS_ERR_PARAM", "overlap"),
        ("compressor: row_per_seq with two windows in a sequence",
         [CMP, "--in", files["cmp1"], "--set", "out_layout=row_per_seq"], "DSOPS_ERR_SHAPE", "row_per_seq"),
    ]
    bad_calls(chk, args, work, cases, exit_code=1)
    check_run_help(chk, args, (MLA, IDX, CMP, "eps_qh", "weights_scale", "out_layout", "score_state_block_table"),
                   "the three operators, their tensors and parameters")


if __name__ == "__main__":
    sys.exit(runcheck.main(__doc__, "v4", 4404, case_checks((check_mla, MLA_CASES), (check_idx, IDX_CASES),
                                                            (check_cmp, CMP_CASES), errors=check_errors)))
