"""The DeepSeek-V4 operators of the Python package against independent, vectorised NumPy formulations of
docs/OPERATORS.md, on small random cases and a few adversarial ones:

  hc_pre (§3.1)             y, post, pre, comb; a zero token; an ill-conditioned case compares y and post only
  hc_post (§3.2)            bf16 / fp32 streams and gates; out as the exact alias of residual (in place)
  mla_prolog_v4 (§3.3)      bf16 and int8 wq_b; int8 q recomputed from the library's own qr / qr_scale
  compressor (§3.4)         c4a, c4li (Hadamard, row_per_seq), c128a; windows closing from fresh projections
                            and from pre-call state, sequences that close none, a call that closes none, a
                            ring state; state rows the call does not write stay bit-identical (NaN-poisoned)
  indexer_prolog_v4 (§3.5)  q_idx, q_idx_scale, weights; a head that quantises to zero
  lightning_indexer (§3.6)  int8, cmp_ratio 4: compare_topk with max_miss 1 (near ties excused), the order,
                            the -1 / -Inf tails, the scores; an exact problem with ties demands identical rows
  sas (§3.7, §2.10)         dsops.swa, dsops.cfa, dsops.scfa with their presets and with overridden
                            parameters; p_mode normalised, tiled, fp32; sinks finite and +-Inf; lonely
                            queries (L <= 0, nothing visible, every sparse index skipped)
  T = 0                     every operator accepts an empty call (the compressor still zeroes out), with
                            zero-size arrays as NumPy builds them (all strides 0) and as views

Tolerances are those of the reference, judged with compare_close (§1.8). The NumPy code sums in fp64 and
rounds to fp32 where the reference sums in fp32, and applies every bf16 / fp16 / int8 rounding point.
"""
import numpy as np
import pytest

import dsops
from numpy_spec import BF16, bf, bits, f32, rbf, rng, rot, sylvester

F32 = np.float32
F64 = np.float64

TOL_BF16 = (1e-4, 2.0 ** -7, 0.005)       # hc_pre y, mla q / kv / bf16 qr, compressor out, sas normalised / fp32
TOL_GATE = (2.5e-5, 0.005, 0.005)         # hc_pre post, pre, comb
TOL_POST_BF16 = (1e-4, 2.0 ** -7, 0)      # hc_post bf16 out
TOL_POST_F32 = (1e-4, 1e-5, 0)            # hc_post fp32 out
TOL_I8 = (1, 0, 0)                        # int8 qr, q_idx
TOL_QR_SCALE = (2.5e-5, 0.005, 0.005)
TOL_FP16 = (1e-4, 0.007825, 0.005)        # q_idx_scale, weights
TOL_CMP_ROT = (1e-3, 2.0 ** -7, 0.005)    # compressor out with rotate
TOL_STATE = (1e-3, 1e-3, 0)               # compressor states at the call's positions
TOL_SCORE = (1e-4, 1e-4, 0.005)           # lightning_indexer topk_scores
TOL_TILED = (5e-4, 5e-4, 0.005)           # sas tiled
TOL_LSE = (1e-6, 8.01 / 65536, 0.005)
V4_SCALE = F32(512 ** -0.5)


# ---- numeric helpers ----------------------------------------------------------------------------------------

def lin(a, w):
    """lin(a, W) of §2.2 for rows a [..., K] and W [N, K]: an fp64 sum rounded once to fp32."""
    return (f32(a).astype(F64) @ f32(w).astype(F64).T).astype(F32)


def rmsnorm(v, w, eps):
    """§2.3 over the last axis in fp32 (the sum of squares in fp64, rounded): (v / r) * w."""
    v = f32(v)
    ms = ((v.astype(F64) ** 2).sum(-1, keepdims=True) / v.shape[-1]).astype(F32)
    y = v / np.sqrt(ms + F32(eps))
    return y * f32(w) if w is not None else y


def rope_tail(y, c, s, mode="interleaved", inverse=False):
    """y (bf16 values) with its last 64 elements replaced by bf16(rot(...))."""
    out = f32(y).copy()
    out[..., -64:] = rbf(rot(out[..., -64:], c, s, mode, inverse))
    return out


def q8(v):
    """§2.7 per row of the last axis (finite data) -> (int8 q, fp32 scale)."""
    v = f32(v)
    amax = np.abs(v).max(-1)
    with np.errstate(divide="ignore"):
        sq = F32(127) / amax
    zero = (amax == 0) | np.isinf(sq)
    sq = np.where(zero, F32(1), sq).astype(F32)
    q = np.where(zero[..., None], 0, np.rint(v * sq[..., None])).astype(np.int8)
    return q, np.where(zero, F32(0), F32(1) / sq).astype(F32)


def hadamard_apply(u, hm):
    """§2.6: bf16(sum_k u[k] * Hm[k][j]) over the last axis of u."""
    return rbf((f32(u).astype(F64) @ f32(hm).astype(F64)).astype(F32))


def tables(r, rows, dtype):
    """Arbitrary (not pair-consistent) rotary tables [rows, 64]: a wrong table index shows."""
    c = np.cos(r.uniform(0, 2 * np.pi, (rows, 64))).astype(F32)
    s = np.sin(r.uniform(0, 2 * np.pi, (rows, 64))).astype(F32)
    return (bf(c), bf(s)) if dtype == "bf16" else (c, s)


def as_dtype(x, dtype):
    return bf(x) if dtype == "bf16" else f32(x)


def compare_close(got, ref, tol, what):
    """compare_close of §1.8 (the dtype is checked by the caller)."""
    atol, rtol, ratio = tol
    g = np.asarray(f32(got), F64)
    r = np.asarray(f32(ref), F64)
    assert g.shape == r.shape, f"{what}: shape {g.shape} != {r.shape}"
    fin = np.isfinite(g) & np.isfinite(r)
    same = (np.isnan(g) & np.isnan(r)) | (np.isinf(g) & np.isinf(r) & (g == r))
    err = np.abs(np.where(fin, g, 0) - np.where(fin, r, 0))
    lim = atol + rtol * np.abs(np.where(fin, r, 0))
    bad = np.where(fin, err > lim, ~same)
    n, allowed = int(bad.sum()), int(np.floor(ratio * bad.size + 0.5))
    if n > allowed:
        w = np.unravel_index(int(np.argmax(np.where(fin, err - lim, np.inf))), g.shape)
        raise AssertionError(f"{what}: {n} of {bad.size} elements beyond {atol} / {rtol} (allowed {allowed}); "
                             f"worst at {tuple(int(i) for i in w)}: got {g[w]!r}, expected {r[w]!r}")


def check_out(res, name, dtype, shape):
    assert name in res, f"{name} missing from the result ({sorted(res)})"
    x = res[name]
    assert x.dtype == dtype and x.shape == tuple(shape), f"{name}: {x.dtype} {x.shape}, expected {dtype} {shape}"
    return x


# ---- §3.1 hc_pre --------------------------------------------------------------------------------------------

def np_hc_pre(x, hc_fn, hc_scale, hc_base, iters, norm_eps, hc_eps):
    T, HC, H = x.shape
    xs = f32(x)
    xf = xs.reshape(T, HC * H)
    ms = ((xf.astype(F64) ** 2).sum(1) / (HC * H)).astype(F32)
    r = np.sqrt(ms + F32(norm_eps))
    with np.errstate(divide="ignore", invalid="ignore"):
        mix = lin(xf, hc_fn) / r[:, None]
    sc, base, eps = f32(hc_scale), f32(hc_base), F32(hc_eps)

    def sig(z):
        with np.errstate(over="ignore"):
            return F32(1) / (F32(1) + np.exp(-z))

    pre = sig(mix[:, :HC] * sc[0] + base[:HC]) + eps
    post = F32(2) * sig(mix[:, HC:2 * HC] * sc[1] + base[HC:2 * HC])
    A = (mix[:, 2 * HC:] * sc[2] + base[2 * HC:]).reshape(T, HC, HC)
    A = np.exp(A - A.max(2, keepdims=True))
    A = A / A.sum(2, keepdims=True, dtype=F64).astype(F32) + eps
    A = A / (A.sum(1, keepdims=True, dtype=F64).astype(F32) + eps)
    for _ in range(iters - 1):
        A = A / (A.sum(2, keepdims=True, dtype=F64).astype(F32) + eps)
        A = A / (A.sum(1, keepdims=True, dtype=F64).astype(F32) + eps)
    acc = pre[:, 0, None] * xs[:, 0]
    for i in range(1, HC):                                       # step 9: fp32, i ascending
        acc = acc + pre[:, i, None] * xs[:, i]
    return dict(y=rbf(acc), post=post, pre=pre, comb=A)


HC_PRE_CASES = [
    # name, T, HC, H, parameters, well-conditioned
    ("flash_defaults", 6, 4, 128, {}, True),
    ("pro_hc3_eps_iters7", 5, 3, 64, dict(preset="v4_pro", sinkhorn_iters=7, norm_eps=1e-5, hc_eps=1e-3), True),
    ("one_iteration", 3, 2, 96, dict(sinkhorn_iters=1), True),
    ("vendor_ill_conditioned", 4, 4, 1024, {}, False),
]


@pytest.mark.parametrize("name,T,HC,H,params,good", HC_PRE_CASES, ids=[c[0] for c in HC_PRE_CASES])
def test_hc_pre(name, T, HC, H, params, good):
    r = rng(11 + T)
    M = (2 + HC) * HC
    x = bf(r.uniform(-1, 2, (T, HC, H)))
    if good:
        x[1] = 0                                                   # an all-zero token: gates from hc_base alone
        hc_fn = (r.uniform(-1, 1, (M, HC * H)) / np.sqrt(HC * H)).astype(F32)
        hc_scale = r.uniform(0.5, 2, 3).astype(F32)
    else:                                                          # the vendor's data: comb logits ~1e3
        hc_fn = r.uniform(-1, 1, (M, HC * H)).astype(F32)
        hc_scale = r.uniform(0.5, 2, 3).astype(F32)
    hc_base = r.uniform(-1, 1, M).astype(F32)
    res = dsops.hc_pre(x=x, hc_fn=hc_fn, hc_scale=hc_scale, hc_base=hc_base, **params)
    p = {k: v for k, v in params.items() if k != "preset"}
    ref = np_hc_pre(x, hc_fn, hc_scale, hc_base, p.get("sinkhorn_iters", 20), p.get("norm_eps", 1e-6),
                    p.get("hc_eps", 1e-6))
    compare_close(check_out(res, "y", BF16, (T, H)), ref["y"], TOL_BF16, "y")
    compare_close(check_out(res, "post", F32, (T, HC)), ref["post"], TOL_GATE, "post")
    check_out(res, "comb", F32, (T, HC, HC))
    check_out(res, "pre", F32, (T, HC))
    if good:    # §3.1: comb (and pre) only on well-conditioned data
        compare_close(res["pre"], ref["pre"], TOL_GATE, "pre")
        compare_close(res["comb"], ref["comb"], TOL_GATE, "comb")
        assert np.all(f32(res["y"][1]) == 0)
        with np.errstate(over="ignore"):
            gate = F32(1) / (F32(1) + np.exp(-f32(hc_base[:HC])))
        compare_close(res["pre"][1], gate + F32(p.get("hc_eps", 1e-6)), TOL_GATE, "pre of the zero token")


# ---- §3.2 hc_post -------------------------------------------------------------------------------------------

def np_hc_post(x, residual, post, comb):
    xf, rf, pf, cf = f32(x), f32(residual), f32(post), f32(comb)
    acc = cf[:, 0, :, None] * rf[:, 0, None, :]                 # [T, j, d], i = 0
    for i in range(1, rf.shape[1]):                             # fp32, i ascending
        acc = acc + cf[:, i, :, None] * rf[:, i, None, :]
    return pf[:, :, None] * xf[:, None, :] + acc


HC_POST_CASES = [("bf16", "bf16", 7, 4, 256), ("bf16", "fp32", 5, 4, 128), ("fp32", "fp32", 6, 3, 64),
                 ("fp32", "bf16", 4, 2, 96)]


@pytest.mark.parametrize("xdt,gdt,T,HC,H", HC_POST_CASES)
def test_hc_post(xdt, gdt, T, HC, H):
    r = rng(21 + H)
    x = as_dtype(r.uniform(-10, 10, (T, H)), xdt)
    residual = as_dtype(r.uniform(-10, 10, (T, HC, H)), xdt)
    post = as_dtype(r.uniform(0, 2, (T, HC)), gdt)
    comb = as_dtype(r.uniform(0, 1, (T, HC, HC)), gdt)
    res = dsops.hc_post(x=x, residual=residual, post=post, comb=comb)
    odt, tol = (BF16, TOL_POST_BF16) if xdt == "bf16" else (F32, TOL_POST_F32)
    ref = np_hc_post(x, residual, post, comb)
    out = check_out(res, "out", odt, (T, HC, H))
    compare_close(out, rbf(ref) if xdt == "bf16" else ref, tol, "out")
    # out as the exact alias of residual: every stream of (t, d) is read before any is written
    inplace = residual.copy()
    r2 = dsops.hc_post(x=x, residual=inplace, post=post, comb=comb, out=inplace)
    assert r2["out"] is inplace
    assert np.array_equal(bits(inplace), bits(out))


# ---- §3.3 mla_prolog_v4 -------------------------------------------------------------------------------------

def mla4_case(seed, T, H, Q, N, D, int8, gdt="bf16", tdt="bf16"):
    r = rng(seed)
    x = r.uniform(-1, 1, (T, H))
    x[1] = 0                                                       # a zero token: qr = 0 (scale 0), q = 0, kv = 0
    a = dict(x=bf(x), wq_a=bf(r.uniform(-0.1, 0.1, (Q, H))), gamma_cq=as_dtype(r.uniform(0.5, 1.5, Q), gdt),
             wkv=bf(r.uniform(-0.1, 0.1, (D, H))), gamma_ckv=as_dtype(r.uniform(0.5, 1.5, D), gdt))
    wq_b = rbf(r.uniform(-0.1, 0.1, (N * D, Q)))
    if int8:
        a["wq_b"], a["wq_b_scale"] = q8(wq_b)
    else:
        a["wq_b"] = bf(wq_b)
    a["rope_cos"], a["rope_sin"] = tables(r, T, tdt)
    return a


def np_mla4(a, eps_cq=1e-6, eps_ckv=1e-6, eps_qh=1e-6, mode="interleaved", inverse=False, lib_qr=None):
    """§3.3 -> dict of expected values; lib_qr = (qr, qr_scale) of the library feeds q in the int8 variant.
    (Its first lines read the dimensions like test_v32_prims.np_idx, in shape only: each from its own weights.)"""
    x = f32(a["x"])
    T = x.shape[0]
    D = a["wkv"].shape[0]
    N = a["wq_b"].shape[0] // D
    c, s = f32(a["rope_cos"]), f32(a["rope_sin"])
    int8 = a["wq_b"].dtype == np.int8
    e = {}
    if int8:
        cq = rmsnorm(lin(x, a["wq_a"]), a["gamma_cq"], eps_cq)
        e["qr"], e["qr_scale"] = q8(cq)
        qr, sc = lib_qr if lib_qr is not None else (e["qr"], e["qr_scale"])
        acc = (qr.astype(np.int64) @ a["wq_b"].astype(np.int64).T).astype(F32)
        qb = (acc * f32(sc)[:, None]) * f32(a["wq_b_scale"])[None, :]
        ka = lin(x, a["wkv"])
    else:
        e["qr"] = rbf(rmsnorm(rbf(lin(x, a["wq_a"])), a["gamma_cq"], eps_cq))
        qb = rbf(lin(e["qr"], a["wq_b"]))
        ka = rbf(lin(x, a["wkv"]))
    qn = rbf(rmsnorm(qb.reshape(T, N, D), None, eps_qh))
    e["q"] = rope_tail(qn, c[:, None], s[:, None], mode, inverse)
    e["kv"] = rope_tail(rbf(rmsnorm(ka, a["gamma_ckv"], eps_ckv)), c, s, mode, inverse)
    return e


MLA4_CASES = [
    # name, T, H, Q, N, D, int8, gamma dtype, table dtype, parameters
    ("bf16_flash", 5, 128, 64, 2, 128, False, "bf16", "bf16", {}),
    ("int8_flash", 6, 128, 64, 2, 128, True, "bf16", "bf16", {}),
    ("int8_pro_half_inverse", 4, 96, 80, 3, 192, True, "fp32", "fp32",
     dict(preset="v4_pro", eps_qh=1e-5, eps_cq=1e-5, rope_mode="half", rope_inverse=True)),
    ("bf16_iiho", 3, 64, 48, 1, 96, False, "fp32", "bf16", dict(eps_ckv=1e-4, rope_mode="interleaved_in_half_out")),
]


@pytest.mark.parametrize("name,T,H,Q,N,D,int8,gdt,tdt,params", MLA4_CASES, ids=[c[0] for c in MLA4_CASES])
def test_mla_prolog_v4(name, T, H, Q, N, D, int8, gdt, tdt, params):
    a = mla4_case(31 + T, T, H, Q, N, D, int8, gdt, tdt)
    res = dsops.mla_prolog_v4(**a, **params)
    kw = dict(eps_cq=params.get("eps_cq", 1e-6), eps_ckv=params.get("eps_ckv", 1e-6),
              eps_qh=params.get("eps_qh", 1e-6), mode=params.get("rope_mode", "interleaved"),
              inverse=params.get("rope_inverse", False))
    q = check_out(res, "q", BF16, (T, N, D))
    kv = check_out(res, "kv", BF16, (T, D))
    if int8:
        qr = check_out(res, "qr", np.int8, (T, Q))
        qs = check_out(res, "qr_scale", F32, (T,))
        ref = np_mla4(a, **kw)
        compare_close(qr, ref["qr"], TOL_I8, "qr")
        compare_close(qs, ref["qr_scale"], TOL_QR_SCALE, "qr_scale")
        ref = np_mla4(a, lib_qr=(qr, qs), **kw)                   # §3.3: q from the library's own qr
        assert np.all(qr[1] == 0) and qs[1] == 0
    else:
        qr = check_out(res, "qr", BF16, (T, Q))
        assert "qr_scale" not in res
        ref = np_mla4(a, **kw)
        compare_close(qr, ref["qr"], TOL_BF16, "qr")
    compare_close(q, ref["q"], TOL_BF16, "q")
    compare_close(kv, ref["kv"], TOL_BF16, "kv")
    assert np.all(f32(q[1]) == 0) and np.all(f32(kv[1]) == 0)


# ---- §3.4 compressor ----------------------------------------------------------------------------------------

def paged(r, need, BS, ring=False, spare=2):
    """A block table [B, MB] covering the logical positions need[b] (sets) on distinct physical blocks (ring:
    every column of a sequence on one block); columns no needed position uses hold junk. -> (table, NB)."""
    B = len(need)
    MB = max([max(n) // BS + 1 for n in need if n] + [1]) + 1
    cols = [sorted({p // BS for p in n}) for n in need]
    n_phys = sum(1 for c in cols if c) if ring else sum(len(c) for c in cols)
    NB = n_phys + spare
    perm = r.permutation(NB)
    table = np.where(r.random((B, MB)) < 0.5, -1, r.integers(NB, 1 << 20, (B, MB))).astype(np.int32)
    k = 0
    for b in range(B):
        for j in cols[b]:
            table[b, j] = perm[k]
            if not ring:
                k += 1
        if ring and cols[b]:
            k += 1
    return table, NB


def cmp_windows(st, S, R):
    return np.arange(st // R, (st + S) // R)


def cmp_case(seed, D, R, C, seqs, BS, BS2=None, rotate=False, ring=False, layout="packed", extra_rows=0, H=64,
             ndt="bf16", tdt="bf16", hdt="bf16", share_table=False):
    """A compressor problem. States hold NaN in every row except those of the pre-call candidates of
    closing windows, so that a stale or misplaced read shows."""
    r = rng(seed)
    B = len(seqs)
    st = np.array([p for p, _ in seqs], np.int32)
    S = np.array([s for _, s in seqs], np.int32)
    cu = np.concatenate([[0], np.cumsum(S)]).astype(np.int32)
    T = int(cu[-1])
    counts = [len(cmp_windows(p, s, R)) for p, s in seqs]
    reads, need = [], []
    for p, s in seqs:
        ks = cmp_windows(p, s, R)
        u = (ks[:, None] * R + np.arange(-R if C == 2 else 0, R)[None]).ravel()
        reads.append(sorted({int(v) for v in u if 0 <= v < p}))
        need.append(set(reads[-1]) | set(range(p, p + s)))
    a = dict(x=bf(r.uniform(-1, 1, (T, H))), cu_seqlens_q=cu, start_pos=st,
             wkv=bf(r.uniform(-1, 1, (C * D, H)) * H ** -0.5), wgate=bf(r.uniform(-1, 1, (C * D, H)) * H ** -0.5),
             ape=r.uniform(-1, 1, (R, C * D)).astype(F32), norm_weight=as_dtype(r.uniform(0.5, 1.5, D), ndt))
    if rotate:
        a["hadamard"] = as_dtype(sylvester(D), hdt)
    NO = (sum(counts) if layout == "packed" else B) + extra_rows
    a["rope_cos"], a["rope_sin"] = tables(r, NO, tdt)
    geo = {}
    for name, bs, lo in (("kv_state", BS, -1.0), ("score_state", BS2 or BS, -2.0)):
        if share_table and name == "score_state":
            table, NB = geo["kv_state"]
        else:
            table, NB = paged(r, need, bs, ring)
        state = np.full((NB * bs, C * D), np.nan, F32)
        for b in range(B):
            for u in reads[b]:
                state[table[b, u // bs] * bs + u % bs] = r.uniform(lo, 1.0, C * D)
        a[name] = state.reshape(NB, bs, C * D)
        a[name + "_block_table"] = table
        geo[name] = (table, NB)
    return a


def np_compressor(a, eps=1e-6, mode="interleaved", inverse=False, layout="packed"):
    """§3.4 -> (out [NO, D], out_count [B], {state name: (slots, expected rows)}), vectorised per sequence."""
    x = f32(a["x"])
    D = a["norm_weight"].shape[0]
    R, CD = a["ape"].shape
    C = CD // D
    cu, st = a["cu_seqlens_q"].astype(np.int64), a["start_pos"].astype(np.int64)
    B = len(st)
    S = np.diff(cu)
    pos = np.concatenate([np.arange(st[b], st[b] + S[b]) for b in range(B)] + [np.zeros(0, np.int64)])
    kvp = lin(x, a["wkv"])
    scp = lin(x, a["wgate"]) + a["ape"][pos % R]
    pre = {}
    for name in ("kv_state", "score_state"):
        bs = a[name].shape[1]
        tab = a[name + "_block_table"].astype(np.int64)
        pre[name] = (a[name].reshape(-1, CD).copy(), tab, bs)

    def rows_of(name, fresh, b, u):
        """Value / logit rows of positions u (any shape, all >= 0) of sequence b."""
        flat, tab, bs = pre[name]
        old = u < st[b]
        uo = np.where(old, u, 0)
        slot = tab[b, uo // bs] * bs + uo % bs
        tok = np.clip(cu[b] + u - st[b], 0, max(len(fresh) - 1, 0))
        return np.where(old[..., None], flat[np.where(old, slot, 0)], fresh[tok] if len(fresh) else 0)

    pooled, out_rows, counts = [], [], []
    for b in range(B):
        ks = cmp_windows(st[b], S[b], R)
        counts.append(len(ks))
        if len(ks) == 0:
            continue
        own = ks[:, None] * R + np.arange(R)[None]                       # [n, R]
        if C == 2:
            prev = own - R
            u = np.concatenate([prev, own], 1)
            ok = u >= 0
            uu = np.where(ok, u, 0)
            va, vz = rows_of("kv_state", kvp, b, uu), rows_of("score_state", scp, b, uu)
            va = np.concatenate([va[:, :R, :D], va[:, R:, D:]], 1)       # previous window low, own window high
            vz = np.concatenate([vz[:, :R, :D], vz[:, R:, D:]], 1)
        else:
            ok = np.ones(own.shape, bool)
            va, vz = rows_of("kv_state", kvp, b, own), rows_of("score_state", scp, b, own)
        z = np.where(ok[..., None], vz, -np.inf).astype(F32)
        va = np.where(ok[..., None], va, 0).astype(F32)
        e = np.exp(z - z.max(1, keepdims=True))
        P = e / e.sum(1, keepdims=True, dtype=F64).astype(F32)
        pooled.append((va.astype(F64) * P).sum(1).astype(F32))
        base = sum(counts[:-1])
        out_rows += [b] * len(ks) if layout == "row_per_seq" else list(range(base, base + len(ks)))
    NO = a["rope_cos"].shape[0]
    out = np.zeros((NO, D), F32)
    if pooled:
        rows = np.array(out_rows)
        y = rbf(rmsnorm(rbf(np.concatenate(pooled)), a["norm_weight"], eps))
        y = rope_tail(y, f32(a["rope_cos"])[rows], f32(a["rope_sin"])[rows], mode, inverse)
        if "hadamard" in a:
            y = hadamard_apply(y, a["hadamard"])
        out[rows] = y
    states = {}
    for name, fresh in (("kv_state", kvp), ("score_state", scp)):
        _, tab, bs = pre[name]
        bidx = np.repeat(np.arange(B), S)
        slots = tab[bidx, pos // bs] * bs + pos % bs
        last = len(slots) - 1 - np.unique(slots[::-1], return_index=True)[1]   # a later position wins a row
        states[name] = (slots[last], fresh[last])
    return out, np.array(counts, np.int32), states


CMP_CASES = [
    # c4a: prefill closing windows 0 (no previous half) and 1; a pair closing window 1 from pre-call state; a
    # decode token closing window 3 from state; a token closing nothing; an empty sequence; one spare row
    dict(name="c4a_packed", D=512, R=4, C=2, seqs=[(0, 9), (6, 2), (15, 1), (2, 1), (5, 0)], BS=8, BS2=4,
         extra_rows=1),
    # c4li: Hadamard (bf16 Sylvester), the vendor's row_per_seq layout, explicit parameters agreeing with the
    # shapes, fp32 norm weight and tables, one table array for both states
    dict(name="c4li_row_per_seq", D=128, R=4, C=2, rotate=True, seqs=[(3, 1), (1, 1), (254, 2)], BS=16,
         layout="row_per_seq", ndt="fp32", tdt="fp32", share_table=True,
         params=dict(out_layout="row_per_seq", D=128, ratio=4, overlap=True, rotate=True)),
    # c4li prefill with an fp32 Hadamard
    dict(name="c4li_prefill_fp32_hadamard", D=128, R=4, C=2, rotate=True, hdt="fp32", seqs=[(0, 13), (9, 4)],
         BS=4),
    # c128a: window 0 from 126 pre-call positions; a sequence closing none; a prefill closing window 0
    dict(name="c128a_packed", D=512, R=128, C=1, seqs=[(126, 3), (20, 3), (0, 130)], BS=32, BS2=64,
         params=dict(norm_eps=1e-5, rope_inverse=True)),
    # prefill on a ring of 8 state rows per sequence: the later position wins a shared row
    dict(name="c4a_ring", D=512, R=4, C=2, seqs=[(0, 10), (0, 6)], BS=8, ring=True, params=dict(rope_mode="half")),
    # a call in which no window closes: out is all zero, out_count 0, the states still take the rows
    dict(name="c4a_none_closes", D=512, R=4, C=2, seqs=[(1, 2), (6, 1)], BS=4, extra_rows=2),
]


@pytest.mark.parametrize("c", CMP_CASES, ids=[c["name"] for c in CMP_CASES])
def test_compressor(c):
    c = dict(c)
    name, params = c.pop("name"), c.pop("params", {})
    a = cmp_case(41 + len(name), **c)
    before = {k: a[k].copy() for k in ("kv_state", "score_state")}
    garbage = np.full((a["rope_cos"].shape[0], c["D"]), 7, BF16)     # out rows without an entry must be zeroed
    res = dsops.compressor(out=garbage, **a, **params)
    assert res["kv_state"] is a["kv_state"] and res["score_state"] is a["score_state"]
    ref, counts, states = np_compressor(a, params.get("norm_eps", 1e-6), params.get("rope_mode", "interleaved"),
                                        params.get("rope_inverse", False), c.get("layout", "packed"))
    out = check_out(res, "out", BF16, ref.shape)
    cnt = check_out(res, "out_count", np.int32, counts.shape)
    assert cnt.tolist() == counts.tolist()
    compare_close(out, ref, TOL_CMP_ROT if c.get("rotate") else TOL_BF16, "out")
    empty = ~np.any(ref != 0, axis=1)
    assert np.all(out[empty].view(np.uint16) == 0), "rows of out without an entry are not +0"
    CD = a["ape"].shape[1]
    for sname, (slots, rows) in states.items():
        got, old = a[sname].reshape(-1, CD), before[sname].reshape(-1, CD)
        compare_close(got[slots], rows, TOL_STATE, sname)
        other = np.setdiff1d(np.arange(got.shape[0]), slots)
        assert np.array_equal(bits(got[other]), bits(old[other])), f"{sname}: rows the call does not write changed"


# ---- §3.5 indexer_prolog_v4 ---------------------------------------------------------------------------------

def np_idx4(a, weights_scale=None, mode="interleaved", inverse=False):
    T, Q = a["qr"].shape
    DI = a["hadamard"].shape[0]
    NI = a["weights_proj"].shape[0]
    acc = (a["qr"].astype(np.int64) @ a["idx_wq_b"].astype(np.int64).T).astype(F32)
    qb = rbf((acc * f32(a["qr_scale"])[:, None]) * f32(a["idx_wq_b_scale"])[None, :]).reshape(T, NI, DI)
    u = rope_tail(qb, f32(a["rope_cos"])[:, None], f32(a["rope_sin"])[:, None], mode, inverse)
    q, s = q8(hadamard_apply(u, a["hadamard"]))
    ws = F32(1 / np.sqrt(64 * 128)) if weights_scale is None else F32(weights_scale)
    w = rbf(lin(a["x"], a["weights_proj"]))
    with np.errstate(over="ignore"):
        return dict(q_idx=q, q_idx_scale=s.astype(np.float16), weights=(w * ws).astype(np.float16))


IDX4_CASES = [
    # name, T, NI, DI, Q, H, hadamard (sylvester / random), hadamard dtype, table dtype, parameters
    ("ni4_di128_defaults", 6, 4, 128, 64, 64, "sylvester", "bf16", "bf16", {}),
    ("ni2_di64_vendor", 5, 2, 64, 96, 48, "random", "fp32", "fp32", dict(rope_inverse=True, weights_scale=0.5)),
    ("ni3_di128_half_overflow", 4, 3, 128, 32, 64, "sylvester", "fp32", "bf16",
     dict(rope_mode="half", weights_scale=4e4)),
]


@pytest.mark.parametrize("name,T,NI,DI,Q,H,hk,hdt,tdt,params", IDX4_CASES, ids=[c[0] for c in IDX4_CASES])
def test_indexer_prolog_v4(name, T, NI, DI, Q, H, hk, hdt, tdt, params):
    r = rng(51 + T)
    a = dict(qr=r.integers(-127, 128, (T, Q), dtype=np.int8), qr_scale=r.uniform(1e-3, 2e-2, T).astype(F32),
             x=bf(r.uniform(-1, 1, (T, H))), idx_wq_b=r.integers(-127, 128, (NI * DI, Q), dtype=np.int8),
             idx_wq_b_scale=r.uniform(-0.01, 0.01, NI * DI).astype(F32), weights_proj=bf(r.uniform(-1, 1, (NI, H))))
    a["idx_wq_b_scale"][DI:2 * DI] = 0                            # head 1 quantises an all-zero hq: q 0, scale 0
    a["rope_cos"], a["rope_sin"] = tables(r, T, tdt)
    hm = sylvester(DI) if hk == "sylvester" else r.uniform(-1, 1, (DI, DI)) / np.sqrt(DI)
    a["hadamard"] = as_dtype(hm, hdt)
    res = dsops.indexer_prolog_v4(**a, **params)
    ref = np_idx4(a, params.get("weights_scale"), params.get("rope_mode", "interleaved"),
                  params.get("rope_inverse", False))
    compare_close(check_out(res, "q_idx", np.int8, (T, NI, DI)), ref["q_idx"], TOL_I8, "q_idx")
    compare_close(check_out(res, "q_idx_scale", np.float16, (T, NI)), ref["q_idx_scale"], TOL_FP16, "q_idx_scale")
    compare_close(check_out(res, "weights", np.float16, (T, NI)), ref["weights"], TOL_FP16, "weights")
    assert np.all(res["q_idx"][:, 1] == 0) and np.all(res["q_idx_scale"][:, 1] == 0)
    if params.get("weights_scale", 0) > 1e4:
        assert np.isinf(ref["weights"]).any() and np.isfinite(ref["weights"]).any()


# ---- §3.6 lightning_indexer (V4: int8, cmp_ratio 4) ---------------------------------------------------------

def li_case(seed, S, seqused, NI, DI, BS, R, distinct_keys=None):
    """Compressed indexer keys of ratio R; fp16 key scales NaN in every row that no token sees."""
    r = rng(seed)
    B = len(S)
    cu = np.concatenate([[0], np.cumsum(S)]).astype(np.int32)
    T = int(cu[-1])
    nmax = [max([max(seqused[b] - (S[b] - 1 - i), 0) // R for i in range(S[b])] + [0]) for b in range(B)]
    table, NB = paged(r, [set(range(n)) for n in nmax], BS)
    qf = r.standard_normal((T, NI, DI))
    qs = (np.abs(qf).max(2) / 127).astype(np.float16)
    a = dict(q_idx=np.clip(np.rint(qf / f32(qs)[..., None]), -127, 127).astype(np.int8), q_idx_scale=qs,
             weights=(r.standard_normal((T, NI)) * NI ** -0.5).astype(np.float16), block_table=table,
             cu_seqlens_q=cu, seqused_kv=np.array(seqused, np.int32))
    keys = r.integers(-127, 128, (NB * BS, DI), dtype=np.int8)
    ks = r.uniform(1e-3, 1e-2, NB * BS).astype(np.float16)
    if distinct_keys:                       # few distinct (key, scale) pairs: exact ties between entries
        pick = r.integers(0, distinct_keys, NB * BS)
        keys, ks = keys[pick], ks[pick]
    seen = np.zeros(NB * BS, bool)
    for b in range(B):
        j = np.arange(nmax[b])
        seen[table[b, j // BS].astype(np.int64) * BS + j % BS] = True
    ks[~seen] = np.float16(np.nan)
    a["key_cache"], a["key_scale_cache"] = keys.reshape(NB, BS, DI), ks.reshape(NB, BS)
    return a


def np_li_scores(a, R):
    """I [T, nmax] of §3.6 (int8 variant) for every token, -Inf past n_t; and n [T]."""
    cu, used = a["cu_seqlens_q"].astype(np.int64), a["seqused_kv"].astype(np.int64)
    T = a["q_idx"].shape[0]
    NB, BS, DI = a["key_cache"].shape
    t = np.arange(T)
    b = np.searchsorted(cu, t, side="right") - 1
    L = used[b] - (cu[b + 1] - 1 - t)
    n = np.maximum(L, 0) // R
    j = np.arange(max(int(n.max()) if T else 0, 1))
    valid = j[None] < n[:, None]
    jj = np.where(valid, j[None], 0)
    rows = np.where(valid, a["block_table"].astype(np.int64)[b[:, None], jj // BS] * BS + jj % BS, 0)
    keys = a["key_cache"].reshape(-1, DI)[rows].astype(np.int64)                        # [T, n, DI]
    dot = np.einsum("thd,tjd->thj", a["q_idx"].astype(np.int64), keys)                  # exact
    d = (np.maximum(dot, 0).astype(F32) * F32(2.0 ** -11)).astype(np.float16).astype(F32)
    ws = (f32(a["q_idx_scale"]) * f32(a["weights"])).astype(np.float16).astype(F32)
    s = np.einsum("th,thj->tj", ws.astype(F64), d.astype(F64)).astype(F32)
    with np.errstate(invalid="ignore"):
        I = s * f32(a["key_scale_cache"].reshape(-1))[rows]
    return np.where(valid, I, -np.inf).astype(F32), n


def check_topk(res, a, R, K, max_miss=1, exact=False):
    """compare_topk of §1.8 with the refinements of its note; the order; the tails; the scores."""
    I, n = np_li_scores(a, R)
    T = len(n)
    idx = check_out(res, "topk_indices", np.int32, (T, K))
    sc = check_out(res, "topk_scores", F32, (T, K))
    got_s, ref_s = [], []
    for t in range(T):
        m = min(int(n[t]), K)
        row, srow = idx[t], sc[t]
        nvalid = int(np.argmax(row == -1)) if np.any(row == -1) else K
        assert nvalid == m and np.all(row[m:] == -1), f"token {t}: {nvalid} valid entries, expected {m}: {row}"
        assert np.all(np.isneginf(srow[m:])), f"token {t}: scores after the valid entries are not -Inf"
        sel = row[:m]
        assert len(set(sel.tolist())) == m and np.all((sel >= 0) & (sel < n[t])), f"token {t}: {sel}"
        order = np.lexsort((np.arange(n[t]), -I[t, :n[t]].astype(F64)))
        want = order[:m]
        if exact:
            assert np.array_equal(sel, want), f"token {t}: {sel.tolist()} != {want.tolist()}"
            assert np.array_equal(srow[:m], I[t, want]), f"token {t}: scores differ"
            continue
        if m == 0:
            continue
        # the library's own order: scores non-increasing, equal scores by increasing index
        assert np.all((srow[:m - 1] > srow[1:m]) | ((srow[:m - 1] == srow[1:m]) & (sel[:-1] < sel[1:]))), \
            f"token {t}: entries not in score order"
        fin = I[t, :n[t]]
        tie = 1e-4 * np.abs(fin[np.isfinite(fin)]).max()
        last = I[t, want[-1]]
        miss = [i for i in sel if i not in set(want.tolist()) and abs(I[t, i] - last) > tie]
        assert len(miss) <= max_miss, f"token {t}: indices {miss} are not in the reference top-{m}"
        both = np.isin(sel, want)
        got_s.append(srow[:m][both])
        ref_s.append(I[t, sel[both]])
    if got_s:
        compare_close(np.concatenate(got_s), np.concatenate(ref_s), TOL_SCORE, "topk_scores")


def test_lightning_indexer_v4():
    """Several sequences (MTP pair, more keys than K, fewer, none; one without tokens), cmp_ratio 4 from the
    V4 preset; key scales NaN where no token looks."""
    K = 32
    a = li_case(61, S=[2, 1, 3, 0], seqused=[300, 41, 2, 17], NI=8, DI=64, BS=16, R=4)
    res = dsops.lightning_indexer(topk=K, preset="v4_flash", **a)
    check_topk(res, a, 4, K)
    assert np.all(res["topk_indices"][3:6] == -1)                # L = 0, 1, 2 < 4: no compressed entry


def test_lightning_indexer_v4_explicit_ratio_bs7():
    K = 20
    a = li_case(62, S=[1, 2, 1], seqused=[88, 130, 4], NI=4, DI=128, BS=7, R=4)
    res = dsops.lightning_indexer(topk=K, cmp_ratio=4, **a)
    check_topk(res, a, 4, K)


def test_lightning_indexer_v4_exact_ties():
    """NI = 2: every score is exact in any summation order (one fp32 addition of two exact products, then one
    product), and few distinct keys give exact ties (zeros included): identical rows, ties by index."""
    K = 8
    a = li_case(63, S=[3, 1], seqused=[60, 23], NI=2, DI=64, BS=16, R=4, distinct_keys=5)
    res = dsops.lightning_indexer(topk=K, cmp_ratio=4, **a)
    I, _ = np_li_scores(a, 4)
    assert len(np.unique(I[np.isfinite(I)])) < np.isfinite(I).sum()        # the case has ties
    check_topk(res, a, 4, K, max_miss=0, exact=True)


# ---- §3.7 sas (swa, cfa, scfa) ------------------------------------------------------------------------------

VARIANTS = {"swa": dict(win_size=128, cmp_mode="none", cmp_ratio=1, p_mode="normalised", p_tile=128),
            "cfa": dict(win_size=128, cmp_mode="dense", cmp_ratio=128, p_mode="tiled", p_tile=128),
            "scfa": dict(win_size=128, cmp_mode="sparse", cmp_ratio=4, p_mode="normalised", p_tile=128)}


def sas_case(seed, variant, params, S, seqused, N, D, BSW=16, BSC=4, K=None, topk_length=False, sinks=None,
             all_skipped=False):
    """A sas problem: pools with NaN in every row that no token reads, block tables with junk where no
    needed position lies; sparse indices with -1, negative, out-of-range and duplicate values."""
    r = rng(seed)
    p = dict(VARIANTS[variant], **params)
    win, mode, R = p["win_size"], p["cmp_mode"], p["cmp_ratio"]
    B = len(S)
    cu = np.concatenate([[0], np.cumsum(S)]).astype(np.int32)
    T = int(cu[-1])
    toks = [(b, int(cu[b]) + i, seqused[b] - (S[b] - 1 - i)) for b in range(B) for i in range(S[b])]
    a = dict(q=bf(2 * r.standard_normal((T, N, D))), cu_seqlens_q=cu, seqused_kv=np.array(seqused, np.int32))
    wneed, cneed = [set() for _ in range(B)], [set() for _ in range(B)]
    for b, t, L in toks:
        w = min(max(L, 0), win)
        wneed[b].update(range(L - w, L))
        if mode == "dense":
            cneed[b].update(range(max(L, 0) // R))
    if mode == "sparse":
        ind = np.zeros((T, K), np.int32)
        for b, t, L in toks:
            NC = seqused[b] // R
            for j in range(K):
                u = r.random()
                ind[t, j] = (r.integers(0, NC) if u < 0.66 and NC > 0 else -1 if u < 0.76 else
                             NC + r.integers(0, 3) if u < 0.84 else 1 << 30 if u < 0.88 else -7 if u < 0.92 else
                             ind[t, j - 1] if j > 0 else -1)
        tl = r.integers(0, K + 1, T).astype(np.int32)
        for b, t, L in toks:
            cnt = min(K, max(L, 0) // R, int(tl[t]) if topk_length else K)
            if 0 < max(L, 0) // R < seqused[b] // R:
                ind[t, 0] = seqused[b] // R - 1   # valid for the sequence, past the token's causal count: used
            if all_skipped and t == 0:
                ind[t, :cnt] = -1
            cneed[b].update(int(i) for i in ind[t, :cnt] if 0 <= i < seqused[b] // R)
        a["cmp_indices"] = ind
        if topk_length:
            a["cmp_topk_length"] = tl

    def pool(need, BS):
        table, NB = paged(r, need, BS)
        vals = bf(r.uniform(-1, 1, (NB * BS, D)))
        used = np.zeros(NB * BS, bool)
        for b in range(B):
            for q in need[b]:
                used[table[b, q // BS] * BS + q % BS] = True
        vals[~used] = np.nan
        return vals.reshape(NB, BS, D), table

    if win > 0:
        a["ori_kv"], a["ori_block_table"] = pool(wneed, BSW)
    if mode != "none":
        a["cmp_kv"], a["cmp_block_table"] = pool(cneed, BSC)
    if sinks is not None:
        s = r.standard_normal(N).astype(F32)
        if sinks == "inf":
            s[0], s[-1] = np.inf, -np.inf
        a["sinks"] = s
    return a, p


def gather(pool, table, b, idx, valid):
    """Rows of logical entries idx [T, n] of the sequences b [T] in a paged pool (fp32; 0 where not valid)."""
    NB, BS, D = pool.shape
    ii = np.where(valid, idx, 0).astype(np.int64)
    slot = table.astype(np.int64)[b[:, None], ii // BS] * BS + ii % BS
    rows = f32(pool).reshape(-1, D)[np.where(valid, slot, 0)]
    return np.where(valid[..., None], rows, F32(0))


def np_sas(a, p, scale=V4_SCALE):
    """§3.7 / §2.10 for all tokens and heads at once: key lists padded (window part, then the compressed
    part, each left-aligned) with a mask. -> (out [T, N, D] fp32 of bf16 values, lse [T, N])."""
    q = f32(a["q"])
    T, N, D = q.shape
    cu, used = a["cu_seqlens_q"].astype(np.int64), a["seqused_kv"].astype(np.int64)
    win, mode, R, p_mode, tile = p["win_size"], p["cmp_mode"], p["cmp_ratio"], p["p_mode"], p["p_tile"]
    t = np.arange(T)
    b = np.searchsorted(cu, t, side="right") - 1
    L = used[b] - (cu[b + 1] - 1 - t)
    Lp = np.maximum(L, 0)
    parts, masks = [], []
    if win > 0:
        w = np.minimum(Lp, win)
        c = np.arange(win)[None]
        valid = c < w[:, None]
        parts.append(gather(a["ori_kv"], a["ori_block_table"], b, L[:, None] - w[:, None] + c, valid))
        masks.append(valid)
    if mode != "none":
        ncmp = Lp // R
        if mode == "dense":
            idx = np.arange(max(int(ncmp.max()), 1))[None].repeat(T, 0)
            valid = idx < ncmp[:, None]
        else:
            ind = a["cmp_indices"].astype(np.int64)
            K = ind.shape[1]
            cnt = np.minimum(K, ncmp)
            if "cmp_topk_length" in a:
                cnt = np.minimum(cnt, a["cmp_topk_length"].astype(np.int64))
            valid = (np.arange(K)[None] < cnt[:, None]) & (ind >= 0) & (ind < (used[b] // R)[:, None])
            order = np.argsort(~valid, axis=1, kind="stable")            # the used entries, in list order
            idx, valid = np.take_along_axis(ind, order, 1), np.take_along_axis(valid, order, 1)
        parts.append(gather(a["cmp_kv"], a["cmp_block_table"], b, idx, valid))
        masks.append(valid)
    keys, mask = np.concatenate(parts, 1), np.concatenate(masks, 1)       # [T, n, D], [T, n]
    k64 = keys.astype(F64)
    s = np.einsum("tnd,tld->tnl", q.astype(F64), k64).astype(F32) * F32(scale)     # A1
    s = np.where(mask[:, None, :], s, -np.inf).astype(F32)
    sinks = a.get("sinks")
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if p_mode == "tiled":                                                     # A5
            nw = win if win > 0 else 0
            bounds = ([0, nw] if nw else [0]) + list(range(nw + tile, s.shape[2], tile)) + [s.shape[2]]
            bounds = sorted(set(bounds))
            m = np.full((T, N), -np.inf, F32)
            l = np.zeros((T, N), F32)
            O = np.zeros((T, N, D), F32)
            for lo, hi in zip(bounds[:-1], bounds[1:]):
                st = s[:, :, lo:hi]
                mn = np.maximum(m, st.max(2))
                alpha = np.where(np.isneginf(m), F32(0), np.exp(m - mn)).astype(F32)
                live = ~np.isneginf(mn)
                wv = np.where(mask[:, None, lo:hi] & live[..., None], np.exp(st - np.where(live, mn, 0)[..., None]),
                              F32(0)).astype(F32)
                l = (l * alpha + wv.sum(2, dtype=F64).astype(F32)).astype(F32)
                pv = np.einsum("tnl,tld->tnd", rbf(wv).astype(F64), k64[:, lo:hi]).astype(F32)
                O = (O * alpha[..., None] + pv).astype(F32)
                m = mn
            lonely = np.isneginf(m)
            ms = np.where(lonely, F32(0), m)
            den = l + (np.exp(sinks[None] - ms) if sinks is not None else F32(0))
            out = rbf(O / den[..., None])
        else:                                                                     # A4, A6
            m = s.max(2)
            lonely = np.isneginf(m)
            ms = np.where(lonely, F32(0), m)
            wv = np.where(mask[:, None, :], np.exp(s - ms[..., None]), F32(0)).astype(F32)
            l = wv.sum(2, dtype=F64).astype(F32)
            den = l + (np.exp(sinks[None] - ms) if sinks is not None else F32(0))
            P = (wv / den[..., None]).astype(F32)
            if p_mode == "normalised":
                P = rbf(P)
            out = rbf(np.einsum("tnl,tld->tnd", P.astype(F64), k64).astype(F32))
        lse = (ms + np.log(l)).astype(F32)                                         # A7
    out[lonely] = 0                                                               # A2
    lse[lonely] = np.inf
    return out, lse, lonely


SAS_CASES = [
    # name, entry, parameters given, S, seqused, N, D, extra builder arguments
    ("swa_defaults", "swa", {}, [3, 2, 1], [140, 1, 50], 4, 512, dict(BSW=16, sinks="finite")),
    ("swa_short_window_inf_sinks", "swa", dict(win_size=6, softmax_scale=0.09), [3, 2], [40, 9], 3, 128,
     dict(BSW=5, sinks="inf")),
    ("cfa_defaults", "cfa", {}, [2, 1], [300, 129], 2, 512, dict(BSW=16, BSC=3, sinks="finite")),
    ("cfa_ratio4_tile3", "cfa", dict(cmp_ratio=4, win_size=5, p_tile=3), [3, 2], [37, 2], 4, 256,
     dict(BSW=5, BSC=3, sinks="inf")),
    ("cfa_nowin_normalised", "cfa", dict(cmp_ratio=3, win_size=0, p_mode="normalised", softmax_scale=0.07),
     [2, 2], [14, 2], 2, 128, dict(BSC=5)),
    ("scfa_defaults", "scfa", {}, [4, 2, 1], [50, 3, 200], 3, 512, dict(BSW=16, BSC=4, K=16)),
    ("scfa_fp32_topk_length", "scfa", dict(win_size=4, p_mode="fp32"), [3, 1], [61, 17], 2, 192,
     dict(BSW=7, BSC=5, K=12, topk_length=True, sinks="finite")),
    ("scfa_tiled_tile5", "scfa", dict(win_size=3, p_mode="tiled", p_tile=5), [3, 2], [160, 90], 2, 128,
     dict(BSW=4, BSC=8, K=40, sinks="finite")),
    ("scfa_nowin_tiled_all_skipped", "scfa", dict(win_size=0, p_mode="tiled", p_tile=2), [2, 2], [30, 5], 4, 128,
     dict(BSC=3, K=6, sinks="inf", all_skipped=True)),
]


@pytest.mark.parametrize("name,entry,params,S,seqused,N,D,extra", SAS_CASES, ids=[c[0] for c in SAS_CASES])
def test_sas(name, entry, params, S, seqused, N, D, extra):
    a, p = sas_case(71 + len(name), entry, params, S, seqused, N, D, **extra)
    res = getattr(dsops, entry)(**a, **params)
    T = sum(S)
    out = check_out(res, "out", BF16, (T, N, D))
    lse = check_out(res, "lse", F32, (T, N))
    ref, rlse, lonely = np_sas(a, p, F32(params.get("softmax_scale", V4_SCALE)))
    compare_close(out, ref, TOL_TILED if p["p_mode"] == "tiled" else TOL_BF16, "out")
    compare_close(lse, rlse, TOL_LSE, "lse")
    # lonely queries exactly: out +0, lse +Inf (A2)
    assert np.all(out[lonely].view(np.uint16) == 0) and np.all(np.isposinf(lse[lonely]))
    if extra.get("sinks") == "inf":      # a +Inf sink gives out = 0; lse never depends on the sink
        assert np.all(f32(out[:, 0]) == 0)
    if name in ("swa_defaults", "cfa_nowin_normalised", "scfa_nowin_tiled_all_skipped"):
        assert lonely.any(), "the case was meant to hold a lonely query"


def test_sas_variant_from_tensors_matches_named_entry():
    """dsops.sas without a variant takes scfa from cmp_indices (§1.9) and gives the bytes of dsops.scfa."""
    a, _ = sas_case(80, "scfa", {}, [2, 1], [45, 90], 2, 256, K=8)
    named = dsops.scfa(**a)
    plain = dsops.sas(**a)
    assert np.array_equal(bits(named["out"]), bits(plain["out"])) and np.array_equal(bits(named["lse"]),
                                                                                     bits(plain["lse"]))


# ---- T = 0 --------------------------------------------------------------------------------------------------

def empty(shape, dtype):
    """A zero-size array with row-major strides. NumPy (2.x) gives every zero-size array zero strides, which
    the library rejects for row tensors (§1.3, innermost stride 1); see test_empty_call_numpy_*."""
    dense = int(np.prod([n for n in shape if n] or [1]))
    return np.ndarray(shape, dtype, buffer=np.zeros(dense, dtype))


def test_empty_calls():
    """V10: with T = 0 every operator validates, returns zero-row outputs and writes nothing else; the
    compressor still zeroes every row of out and writes out_count. Zero-size tensors (outputs included) are
    passed with row-major strides."""
    r = rng(90)
    res = dsops.hc_pre(x=empty((0, 4, 64), BF16), hc_fn=np.zeros((24, 256), F32), hc_scale=np.ones(3, F32),
                       hc_base=np.zeros(24, F32), y=empty((0, 64), BF16), post=empty((0, 4), F32),
                       comb=empty((0, 4, 4), F32), pre=empty((0, 4), F32))
    assert res["y"].shape == (0, 64) and res["comb"].shape == (0, 4, 4)
    res = dsops.hc_post(x=empty((0, 64), BF16), residual=empty((0, 4, 64), BF16), post=empty((0, 4), F32),
                        comb=empty((0, 4, 4), F32), out=empty((0, 4, 64), BF16))
    assert res["out"].shape == (0, 4, 64)
    a = mla4_case(91, 2, 64, 32, 2, 128, True)
    a.update(x=empty((0, 64), BF16), rope_cos=empty((0, 64), BF16), rope_sin=empty((0, 64), BF16))
    res = dsops.mla_prolog_v4(q=empty((0, 2, 128), BF16), kv=empty((0, 128), BF16), qr=empty((0, 32), np.int8),
                              qr_scale=empty((0,), F32), **a)
    assert res["q"].shape == (0, 2, 128) and res["qr"].shape == (0, 32) and res["qr_scale"].shape == (0,)
    res = dsops.indexer_prolog_v4(qr=empty((0, 32), np.int8), qr_scale=empty((0,), F32), x=empty((0, 16), BF16),
                                  idx_wq_b=np.ones((128, 32), np.int8), idx_wq_b_scale=np.ones(128, F32),
                                  weights_proj=bf(np.ones((2, 16))), rope_cos=empty((0, 64), F32),
                                  rope_sin=empty((0, 64), F32), hadamard=sylvester(64),
                                  q_idx=empty((0, 2, 64), np.int8), q_idx_scale=empty((0, 2), np.float16),
                                  weights=empty((0, 2), np.float16))
    assert res["q_idx"].shape == (0, 2, 64) and res["weights"].shape == (0, 2)
    a = li_case(92, S=[0], seqused=[40], NI=2, DI=64, BS=16, R=4)
    a.update(q_idx=empty((0, 2, 64), np.int8), q_idx_scale=empty((0, 2), np.float16),
             weights=empty((0, 2), np.float16))
    res = dsops.lightning_indexer(topk=16, cmp_ratio=4, topk_indices=empty((0, 16), np.int32),
                                  topk_scores=empty((0, 16), F32), **a)
    assert res["topk_indices"].shape == (0, 16)
    for entry in ("swa", "cfa", "scfa"):
        a, p = sas_case(93, entry, dict(cmp_ratio=4), [0], [9], 2, 128, K=4)
        a["q"] = empty((0, 2, 128), BF16)
        if "cmp_indices" in a:
            a["cmp_indices"] = empty((0, 4), np.int32)
        res = getattr(dsops, entry)(out=empty((0, 2, 128), BF16), lse=empty((0, 2), F32), cmp_ratio=4, **a)
        assert res["out"].shape == (0, 2, 128) and res["lse"].shape == (0, 2)
    a = cmp_case(94, D=128, R=4, C=2, seqs=[(4, 0), (7, 0)], BS=8, extra_rows=3)
    a["x"] = empty((0, 64), BF16)
    for k in ("kv_state", "score_state"):   # no row is read or written: random everywhere
        a[k] = r.uniform(-1, 1, a[k].shape).astype(F32)
    before = {k: a[k].copy() for k in ("kv_state", "score_state")}
    garbage = np.full((3, 128), 7, BF16)
    res = dsops.compressor(out=garbage, **a)
    assert np.all(garbage.view(np.uint16) == 0) and res["out_count"].tolist() == [0, 0]
    for k in before:
        assert np.array_equal(bits(a[k]), bits(before[k]))


# NumPy gives every zero-size array all-zero strides; the package must describe such arrays row-major, or a
# T = 0 call (valid by V10) would be refused for its innermost stride.
def test_empty_call_numpy_inputs():
    """T = 0 with inputs as NumPy builds them (np.zeros((0, HC, H)))."""
    res = dsops.hc_pre(x=np.zeros((0, 4, 64), BF16), hc_fn=np.zeros((24, 256), F32), hc_scale=np.ones(3, F32),
                       hc_base=np.zeros(24, F32))
    assert res["y"].shape == (0, 64)


def test_empty_call_numpy_outputs():
    """T = 0 with row-major-strided inputs but the outputs left to the wrapper."""
    a, _ = sas_case(95, "swa", {}, [0], [9], 2, 128)
    a["q"] = empty((0, 2, 128), BF16)
    res = dsops.swa(**a)
    assert res["out"].shape == (0, 2, 128)
