"""The shared primitives and the V3.2 operators through the Python package, against independent vectorised NumPy
formulations of docs/OPERATORS.md, on small random cases and a few adversarial ones:

- rope_tables (§2.5.2): the V3.2 and V4 presets, plain RoPE, the YaRN `lo == hi` branch, positions up to
  2^31 - 1 (strided), fp32 tables within 2e-7 of the fp64 cos / sin of the fp32 angle, bf16 tables equal to
  that value rounded once (ties excepted); out-of-range positions (ERR_INDEX, nothing written);
- rope_apply (§2.5.3): the three modes, inverse, offsets, arbitrary (not pair-consistent) tables, bf16 and fp32
  tables, NaN / Inf in x, in place; bit-exact;
- quant_q8 (§2.7): several groups, bf16 and fp32 x, all-zero / tiny / NaN / Inf / rint-tie groups;
- nd_to_fractal_nz / fractal_nz_to_nd (§2.11): every dtype, leading dimensions, against a NumPy reshape of the
  layout, round trip byte-exact with garbage in the NZ padding;
- cache_store (§2.8) into int8 caches with fp32 and fp16 scales, padding -1 and a strided cache_index, rows
  nobody addresses bit-identical, repeated / out-of-range slots (ERR_INDEX, nothing written);
- mla_prolog_v32 (§4.1): bf16 and int8 wq_b, split_bf16, split_int8 and packed_int8 caches, a zero token, padding
  tokens, NaN in the norm weights (Q8 groups holding NaN: zeros and scale NaN);
- indexer_prolog_v32 (§4.2): int8 and bf16, Sylvester and random (non-symmetric) Hadamard matrices or none, an
  all-zero key, fp16 weights overflowing to Inf;
- sparse_attention_v32 (§4.5): the whole chain in NumPy (both prologs, the indexer scores and top-k, the
  attention), with a token that sees no key, padding -1 in cache_index and garbage in unused block-table
  columns; topk_indices by compare_topk, out / lse against the attention over the library's own top-k (or,
  as §4.5 allows when that fails, over the library's own stage-1 results); the caches it writes; the fused call
  equal, byte for byte, to the four stand-alone operators run in sequence;
- empty work (V10): T = 0 calls of these operators return OK with 0-row outputs and unchanged caches.

The kv_layout of some calls is left to the package's inference from the caches given (dsops.h, `infer`).

Every comparison uses the tolerances of the operator's section with compare_close / compare_topk of §1.8.
"""
import math

import numpy as np
import pytest

import dsops
from numpy_spec import BF16, bf, bits, f32, rbf, rng, rot, sylvester

V32_SOFTMAX_SCALE = np.float32(192 ** -0.5 * (0.1 * math.log(40) + 1) ** 2)
V32_WEIGHTS_SCALE = np.float32(1 / math.sqrt(64 * 128))


# ---- numbers ------------------------------------------------------------------------------------------------

def rfp16(x):
    """The fp32 value of fp16(x) (round to nearest even, subnormals kept, |x| >= 65520 -> Inf)."""
    with np.errstate(over="ignore"):
        return np.asarray(x, np.float32).astype(np.float16).astype(np.float32)


def mm(a, b):
    """An fp32 result of a sum of products (lin / dot of §2.2, Hadamard of §2.6): summed in fp64, rounded once."""
    return (np.asarray(a, np.float64) @ np.asarray(b, np.float64)).astype(np.float32)


# ---- §1.8 ---------------------------------------------------------------------------------------------------

def compare_close(out, ref, atol, rtol, ratio):
    """-> (ok, text): §1.8 compare_close on values widened to fp64."""
    o = np.asarray(f32(out), np.float64)
    r = np.asarray(f32(ref), np.float64)
    if o.shape != r.shape:
        return False, "shape %s != %s" % (o.shape, r.shape)
    both = np.isfinite(o) & np.isfinite(r)
    same_kind = (np.isnan(o) & np.isnan(r)) | (np.isinf(o) & np.isinf(r) & (np.sign(o) == np.sign(r)))
    with np.errstate(invalid="ignore"):
        excess = np.where(both, np.abs(o - r) - (atol + rtol * np.abs(r)), np.where(same_kind, -1.0, np.inf))
    fail = excess > 0
    n, allowed = int(fail.sum()), int(math.floor(ratio * o.size + 0.5))
    text = "%d of %d elements beyond %g / %g (allowed %d)" % (n, o.size, atol, rtol, allowed)
    if n:
        w = np.unravel_index(int(np.argmax(excess)), o.shape)
        text += "; worst at %s: got %r, expected %r" % (tuple(int(i) for i in w), o[w], r[w])
    return n <= allowed, text


def assert_close(name, out, ref, tol):
    ok, text = compare_close(out, ref, *tol)
    assert ok, "%s: %s" % (name, text)


def compare_topk(out, scores, n, max_miss=1):
    """§1.8 compare_topk of one row of the library against the reference scores of the n visible keys, with the
    refinements of its note: distinct valid indices in [0, n), near ties (within 1e-4 max|I| of the last
    reference score) not counted as misses. -> (ok, text)."""
    K = out.shape[0]
    m = min(max(n, 0), K)
    if np.any(out[:m] == -1) or np.any(out[m:] != -1):
        return False, "expected %d valid entries then -1, got %s" % (m, out.tolist())
    v = out[:m].astype(np.int64)
    if np.any(v < 0) or np.any(v >= n) or len(set(v.tolist())) != m:
        return False, "valid entries are not %d distinct indices in [0, %d): %s" % (m, n, v.tolist())
    if m == 0:
        return True, ""
    order = np.argsort(-scores[:n].astype(np.float64), kind="stable")[:m]
    last = scores[order[-1]]
    finite = scores[:n][np.isfinite(scores[:n])]
    slack = 1e-4 * (np.abs(finite).max() if finite.size else 0.0)
    miss = [int(i) for i in set(v.tolist()) - set(order.tolist()) if not abs(scores[i] - last) <= slack]
    return len(miss) <= max_miss, "indices %s not in the reference top-%d" % (miss, m)


# ---- NumPy formulations of §2 -------------------------------------------------------------------------------

def np_rope_freq(base, yarn, factor, L0, beta_fast, beta_slow):
    """freq_j of §2.5.2 (fp32), and (lo, hi) when yarn."""
    theta = np.float32(base)
    j = np.arange(32)
    pw = (np.float64(theta) ** (2.0 * j / 64.0)).astype(np.float32)         # fp64 power, rounded once
    freq = (np.float32(1) / pw).astype(np.float32)
    if not yarn:
        return freq, None

    def corr(beta):
        return 64 * math.log(L0 / (2 * math.pi * beta)) / (2 * math.log(base))

    lo = max(math.floor(corr(beta_fast)), 0)
    hi = min(math.ceil(corr(beta_slow)), 63)
    if lo == hi:
        hi = hi + 0.001
    rho = np.clip((j - lo) / (hi - lo), 0, 1).astype(np.float32)             # fp64 ramp, rounded once
    one = np.float32(1)
    a1 = freq * (one - rho)
    a2 = (freq / np.float32(factor)) * rho
    return (a1 + a2).astype(np.float32), (lo, hi)


def np_rope_tables(positions, freq, layout):
    """fp64 cos / sin [T, 64] of the fp32 angles fp32(fp32(p) * freq_j)."""
    ang = (positions.astype(np.float32)[:, None] * freq[None, :]).astype(np.float32).astype(np.float64)
    c, s = np.cos(ang), np.sin(ang)
    if layout == "pairs":
        return np.repeat(c, 2, axis=1), np.repeat(s, 2, axis=1)
    return np.concatenate([c, c], axis=1), np.concatenate([s, s], axis=1)


def bf16_once(v):
    """fp64 -> the nearest bf16 value (fp64), ties to even, one rounding (normal range)."""
    m, e = np.frexp(v)
    return np.ldexp(np.rint(m * 256.0), e - 8)


def np_q8(v, G):
    """§2.7 over groups of G along the last axis -> (q int8 [..., W], scale fp32 [..., W/G])."""
    v = f32(v)
    g = v.reshape(v.shape[:-1] + (v.shape[-1] // G, G))
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        finite = np.isfinite(g).all(-1)
        amax = np.where(np.isfinite(g), np.abs(g), np.float32(0)).max(-1).astype(np.float32)
        sq = (np.float32(127) / amax).astype(np.float32)
        ok = finite & (amax != 0) & np.isfinite(sq)
        sqs = np.where(ok, sq, np.float32(1)).astype(np.float32)
        q = np.rint((np.where(np.isfinite(g), g, 0) * sqs[..., None]).astype(np.float32))
        q = np.where(ok[..., None], q, 0).astype(np.int8).reshape(v.shape)
        scale = np.where(ok, np.float32(1) / sqs, np.float32(0)).astype(np.float32)
        scale = np.where(finite, scale, np.float32(np.nan)).astype(np.float32)
    return q, scale


def np_rmsnorm(v, gamma, eps):
    """§2.3 in fp32 (the sum of squares in fp64, rounded once)."""
    v = f32(v)
    ms = (np.sum(np.float64(v) * v, axis=-1, keepdims=True).astype(np.float32) / np.float32(v.shape[-1]))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.sqrt(ms + np.float32(eps))
        return ((v / r) * f32(gamma)).astype(np.float32)


def np_layernorm(v, gamma, beta, eps):
    """§2.4 in fp32 (sums in fp64, rounded once)."""
    v = f32(v)
    n = np.float32(v.shape[-1])
    mu = np.sum(np.float64(v), -1, keepdims=True).astype(np.float32) / n
    d = (v - mu).astype(np.float32)
    var = np.sum(np.float64(d) * d, -1, keepdims=True).astype(np.float32) / n
    return ((d / np.sqrt(var + np.float32(eps))) * f32(gamma) + f32(beta)).astype(np.float32)


# ---- rope_tables (§2.5.2) -----------------------------------------------------------------------------------

POSITIONS = np.array([0, 1, 2, 3, 7, 100, 4095, 4096, 65535, 123457, 2 ** 24 + 1, 2 ** 30 + 3, 2 ** 31 - 1],
                     np.int64)

ROPE_TABLE_CASES = {
    "v32": dict(preset="v32", kw={}, params=(10000, 1, 40, 4096, 32, 1), layout="halves", lohi=(10, 23)),
    "v4": dict(preset="v4_flash", kw={}, params=(160000, 1, 16, 65536, 32, 1), layout="pairs", lohi=(15, 25)),
    "plain": dict(preset="v4_flash", kw=dict(yarn=0, base=10000.0), params=(10000, 0, 16, 65536, 32, 1),
                  layout="pairs", lohi=None),
    # corr(beta_slow) in (-1, 0] and corr(beta_fast) < 0: lo = hi = 0, so hi becomes 0.001
    "lo_eq_hi": dict(preset="v32", kw=dict(yarn_beta_fast=1400.0, yarn_beta_slow=700.0, yarn_factor=3.0),
                     params=(10000, 1, 3.0, 4096, 1400.0, 700.0), layout="halves", lohi=(0, 0.001)),
}


@pytest.mark.parametrize("case", sorted(ROPE_TABLE_CASES))
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_rope_tables(case, dtype):
    c = ROPE_TABLE_CASES[case]
    pos_buf = np.zeros(2 * len(POSITIONS), np.int64)
    pos_buf[::2] = POSITIONS
    positions = pos_buf[::2]                                   # a strided view ("any stride")
    r = dsops.rope_tables(positions=positions, preset=c["preset"], dtype=dtype, **c["kw"])
    cos, sin = r["cos"], r["sin"]
    want_dt = np.dtype(np.float32) if dtype == "fp32" else BF16
    assert cos.dtype == want_dt and sin.dtype == want_dt and cos.shape == (len(POSITIONS), 64) == sin.shape
    freq, lohi = np_rope_freq(*c["params"])
    assert lohi == c["lohi"]
    C, S = np_rope_tables(POSITIONS, freq, c["layout"])
    for name, got, ref in (("cos", cos, C), ("sin", sin, S)):
        if dtype == "fp32":
            err = np.abs(got.astype(np.float64) - ref)
            assert err.max() <= 2e-7, "%s: max |err| %g at %s" % (name, err.max(), np.unravel_index(err.argmax(),
                                                                                                  err.shape))
        else:
            g = got.astype(np.float64)
            once = bf16_once(ref)
            tie = (ref.astype(np.float32).view(np.uint32) & 0xFFFF) == 0x8000
            ok = (g == once) | (tie & (g == f32(bf(ref.astype(np.float32)))))
            w = np.argwhere(~ok)
            assert ok.all(), "%s: %d elements differ, first at %s: got %r, expected %r" % (
                name, len(w), tuple(w[0]), g[tuple(w[0])], once[tuple(w[0])])


@pytest.mark.parametrize("bad", [2 ** 31, -1])
def test_rope_tables_position_out_of_range(bad):
    cos = np.full((3, 64), 7.0, np.float32)
    sin = np.full((3, 64), 7.0, np.float32)
    with pytest.raises(dsops.IndexError):
        dsops.rope_tables(positions=np.array([1, bad, 2], np.int64), cos=cos, sin=sin)
    assert np.all(cos == 7) and np.all(sin == 7)


# ---- rope_apply (§2.5.3) ------------------------------------------------------------------------------------

def rope_apply_case(seed, T=5, N=3, W=160, table_dtype="bf16"):
    r = rng(seed)
    x = bf(r.uniform(-4, 4, (T, N, W)))
    # NaN / Inf / -0 inside and outside every possible 64-wide slice
    x[0, 0, 5] = np.nan
    x[1, 1, 70] = np.inf
    x[2, 2, 100] = -np.inf
    x[3, 0, 150] = np.nan
    x[4, 2, 0] = -0.0
    c = r.uniform(-1.5, 1.5, (T, 64)).astype(np.float32)     # arbitrary tables: no pair shares its entries
    s = r.uniform(-1.5, 1.5, (T, 64)).astype(np.float32)
    if table_dtype == "bf16":
        c, s = bf(c), bf(s)
    return x, c, s


def np_rope_apply(x, c, s, offset, mode, inverse):
    y = f32(x).copy()
    y[..., offset:offset + 64] = rot(f32(x)[..., offset:offset + 64], f32(c)[:, None, :], f32(s)[:, None, :],
                                     mode, inverse)
    return y


def assert_rope_apply(y, x, c, s, offset, mode, inverse):
    assert y.dtype == BF16 and y.shape == x.shape
    ref = bf(np_rope_apply(x, c, s, offset, mode, inverse))
    inside = np.zeros(x.shape, bool)
    inside[..., offset:offset + 64] = True
    # outside the slice: a bit copy of x (NaN payloads included)
    assert np.array_equal(y.view(np.uint16)[~inside], x.view(np.uint16)[~inside])
    gv, rv = f32(y)[inside], f32(ref)[inside]
    nan = np.isnan(rv)
    assert np.array_equal(np.isnan(gv), nan), "NaN pattern differs inside the rotated slice"
    diff = np.flatnonzero(y.view(np.uint16)[inside][~nan] != ref.view(np.uint16)[inside][~nan])
    assert diff.size == 0, "%d rotated elements differ; first: got %r, expected %r" % (
        diff.size, gv[~nan][diff[0]], rv[~nan][diff[0]])


@pytest.mark.parametrize("mode", ["interleaved", "half", "interleaved_in_half_out"])
@pytest.mark.parametrize("inverse", [0, 1])
@pytest.mark.parametrize("table_dtype", ["bf16", "fp32"])
def test_rope_apply(mode, inverse, table_dtype):
    x, c, s = rope_apply_case(11, table_dtype=table_dtype)
    for offset in (0, 64, 96):
        y = dsops.rope_apply(x=x, rope_cos=c, rope_sin=s, rope_offset=offset, rope_mode=mode,
                             rope_inverse=inverse)["y"]
        assert_rope_apply(y, x, c, s, offset, mode, inverse)


def test_rope_apply_in_place_and_default_mode():
    x, c, s = rope_apply_case(12)
    x0 = x.copy()
    r = dsops.rope_apply(x=x, rope_cos=c, rope_sin=s, y=x, rope_offset=32)    # y = x exactly; mode interleaved
    assert r["y"] is x
    assert_rope_apply(x, x0, c, s, 32, "interleaved", 0)


# ---- quant_q8 (§2.7) ----------------------------------------------------------------------------------------

Q_TOL = (1, 0, 0)
SCALE_TOL = (2.5e-5, 0.005, 0)


def q8_input(seed, R, W, dtype):
    r = rng(seed)
    x = (r.standard_normal((R, W)) * r.uniform(0.01, 100, (R, 1))).astype(np.float32)
    x[1, :] = 0                                     # all-zero groups: zeros, scale 0
    x[2, :] = 1e-38                                 # 127 / amax overflows: zeros, scale 0
    x[2, ::2] = -1e-38
    x[3, 3] = np.nan                                # NaN in the first group: zeros, scale NaN
    x[3, W - 1] = np.inf                            # Inf in the last group
    x[4, :] = np.tile(np.array([254, 1, 3, -1, -3, 5, 127, -254], np.float32), W // 8)  # sq 0.5: rint ties
    x[5, :] = -0.0
    x[5, 0] = 2.0 ** -100
    return bf(x) if dtype == "bf16" else x


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("G", [8, 64, 256])
def test_quant_q8(dtype, G):
    x = q8_input(21, 7, 256, dtype)
    r = dsops.quant_q8(x=x, group=G)
    q, sc = r["q"], r["scale"]
    assert q.dtype == np.int8 and q.shape == x.shape and sc.dtype == np.float32 and sc.shape == (7, 256 // G)
    rq, rs = np_q8(f32(x), G)
    assert_close("q", q, rq, Q_TOL)
    assert_close("scale", sc, rs, SCALE_TOL)
    # edge groups are exact requirements (§1.7): zeros with scale 0, or zeros with scale NaN
    qg, sg = q.reshape(7, -1, G), sc
    for row in (1, 2):                              # all zero; 127 / amax = +Inf
        assert np.all(qg[row] == 0) and np.all(sg[row] == 0), "row %d" % row
    bad = ~np.isfinite(f32(x[3]).reshape(-1, G)).all(-1)
    assert bad[0] and bad[-1]
    assert np.all(qg[3][bad] == 0) and np.all(np.isnan(sg[3][bad])) and not np.isnan(sg[3][~bad]).any()
    assert np.all(qg[5][1:] == 0) and np.all(sg[5][1:] == 0)      # -0 groups
    assert qg[5][0][0] == 127 and sg[5][0] == np.float32(1) / np.float32(np.float32(127) / np.float32(2.0 ** -100))


def test_quant_q8_bad_group():
    x = bf(np.ones((2, 48)))
    with pytest.raises(dsops.ParamError):
        dsops.quant_q8(x=x, group=5)
    with pytest.raises(dsops.ParamError):
        dsops.quant_q8(x=x, group=0)


# ---- FRACTAL_NZ (§2.11) ------------------------------------------------------------------------------------

def np_nd_to_nz(nd):
    """[..., R, C] -> [..., ceil(C / C0), 16 ceil(R / 16), C0], C0 = 32 bytes / element, padding zero."""
    *lead, R, C = nd.shape
    C0 = 32 // nd.dtype.itemsize
    C1, RP = -(-C // C0), -(-R // 16) * 16
    padded = np.zeros((*lead, RP, C1 * C0), nd.dtype)
    padded[..., :R, :C] = nd
    return np.ascontiguousarray(np.moveaxis(padded.reshape(*lead, RP, C1, C0), -2, -3))


@pytest.mark.parametrize("dtype", [BF16, np.float16, np.float32, np.int8, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("shape", [(100, 30), (3, 16, 32), (2, 2, 17, 5)])
def test_fractal_nz_round_trip(dtype, shape):
    r = rng(31)
    nd = r.integers(-100, 100, shape).astype(np.float32).astype(dtype)
    nz = dsops.nd_to_fractal_nz(nd=nd)["nz"]
    want = np_nd_to_nz(nd)
    assert nz.shape == want.shape and nz.dtype == want.dtype
    assert nz.tobytes() == want.tobytes()
    noisy = nz.copy()
    *lead, R, C = shape
    noisy[..., R:, :] = 77                                      # padding rows: never read back
    back = dsops.fractal_nz_to_nd(nz=noisy, rows=R, cols=C)["nd"]
    assert back.shape == nd.shape and back.tobytes() == nd.tobytes()


def test_fractal_nz_example_and_errors():
    nz = dsops.nd_to_fractal_nz(nd=bf(np.ones((100, 30))))["nz"]
    assert nz.shape == (2, 112, 16)                             # the layout's worked example
    with pytest.raises(dsops.ShapeError):
        dsops.fractal_nz_to_nd(nz=np.zeros((2, 20, 16), np.float16), rows=20, cols=30)  # 20 rows: not 16-aligned


# ---- cache_store with an int8 cache (§2.8) ------------------------------------------------------------------

def int8_cache(seed, NB, BS, W, G, scale_dtype):
    r = rng(seed)
    cache = r.integers(-128, 128, (NB, BS, W), dtype=np.int8)
    shape = (NB, BS) if G == W else (NB, BS, W // G)
    sc = r.uniform(-1, 1, shape).astype(scale_dtype)
    sc.reshape(NB * BS, -1)[::5] = np.nan          # rows nobody addresses must keep even NaN bits
    return cache, sc


@pytest.mark.parametrize("scale_dtype", [np.float32, np.float16])
@pytest.mark.parametrize("G", [0, 64, 128])
def test_cache_store_int8(scale_dtype, G):
    NB, BS, W, T = 4, 8, 256, 6
    Geff = G or W
    r = rng(31)
    src = r.standard_normal((T, W)).astype(np.float32) * 3
    src[1] = 0                                      # all-zero token: zeros, scale 0
    src[3, 70] = np.nan                             # NaN in one group only
    src[4, 3] = -np.inf
    src = bf(src)
    ci_buf = np.full((T, 3), 99, np.int64)
    ci_buf[:, 1] = [5, 17, -1, 31, 0, -7]           # padding -1 (and another negative): not stored
    ci = ci_buf[:, 1]                               # a strided view
    cache, sc = int8_cache(32, NB, BS, W, Geff, scale_dtype)
    before, before_sc = cache.copy(), sc.copy()
    res = dsops.cache_store(src=src, cache_index=ci, cache=cache, cache_scale=sc, group=G)
    assert res["cache"] is cache and res["cache_scale"] is sc
    rq, rs = np_q8(f32(src), Geff)
    if scale_dtype == np.float16:
        rs = rfp16(rs)
    flat, fsc = cache.reshape(NB * BS, W), sc.reshape(NB * BS, -1)
    want, want_sc = before.reshape(NB * BS, W).copy(), f32(before_sc.reshape(NB * BS, -1))
    hit = ci >= 0
    want[ci[hit]], want_sc[ci[hit]] = rq[hit], rs[hit]
    assert_close("cache", flat[ci[hit]], want[ci[hit]], Q_TOL)
    assert_close("cache_scale", fsc[ci[hit]], want_sc[ci[hit]], SCALE_TOL)
    assert np.all(flat[17] == 0) and np.all(fsc[17] == 0)
    g70 = 70 // Geff
    assert np.all(flat[31].reshape(-1, Geff)[g70] == 0) and np.isnan(fsc[31, g70])
    other = np.setdiff1d(np.arange(NB * BS), ci[hit])
    assert np.array_equal(bits(flat[other]), bits(before.reshape(NB * BS, W)[other]))
    assert np.array_equal(bits(fsc[other]), bits(before_sc.reshape(NB * BS, -1)[other]))


@pytest.mark.parametrize("ci", [[3, 9, 3], [3, 32, 1]])
def test_cache_store_bad_slots_write_nothing(ci):
    cache, sc = int8_cache(33, 4, 8, 128, 128, np.float32)
    before, before_sc = cache.copy(), sc.copy()
    with pytest.raises(dsops.IndexError):
        dsops.cache_store(src=bf(np.ones((3, 128))), cache_index=np.array(ci, np.int64), cache=cache,
                          cache_scale=sc)
    assert np.array_equal(cache, before) and np.array_equal(bits(sc), bits(before_sc))


# ---- mla_prolog_v32 (§4.1) ----------------------------------------------------------------------------------

TOL_Q = (0.005, 2.0 ** -7, 0.005)              # q_nope, q_rope
TOL_I8 = (1, 0, 0.005)                          # int8 qr, cached int8 latent, cached int8 indexer key
TOL_BF = (1e-4, 2.0 ** -7, 0.005)               # bf16 qr, cached bf16 latent / rope, bf16 q_idx / keys / weights
TOL_QR_SCALE = (2.5e-5, 0.005, 0.005)
TOL_KV_SCALE = (2.5e-5, 0.005, 0)


def q8_weight(w_bf16):
    """An int8 weight with one scale per output row: Q8 of a bf16 weight (the way int8 checkpoints come)."""
    q, s = np_q8(f32(w_bf16), w_bf16.shape[-1])
    return q, s[:, 0].copy()


def random_tables(r, T, dtype):
    ang = r.uniform(0, 2 * np.pi, (T, 64))
    c, s = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    return (bf(c), bf(s)) if dtype == "bf16" else (c, s)


def distinct_rows(r, T, rows, pad=()):
    ci = r.choice(rows, size=T, replace=False).astype(np.int64)
    ci[list(pad)] = -1
    return ci


def latent_caches(r, layout, NB, BS, Dc):
    """Prior cache contents (random, with NaN) for a kv layout."""
    if layout == "split_bf16":
        kv = bf(r.uniform(-1, 1, (NB, BS, Dc)))
        kv[0, 1] = np.nan
        return dict(kv_cache=kv, kr_cache=bf(r.uniform(-1, 1, (NB, BS, 64))))
    if layout == "split_int8":
        sc = r.uniform(0, 0.01, (NB, BS, Dc // 128)).astype(np.float32)
        sc[0, 1] = np.nan
        return dict(kv_cache=r.integers(-128, 128, (NB, BS, Dc), dtype=np.int8), kv_scale_cache=sc,
                    kr_cache=bf(r.uniform(-1, 1, (NB, BS, 64))))
    return dict(kv_packed=r.integers(0, 256, (NB, BS, 656), dtype=np.uint8))


def mla_case(seed, i8, layout, T=8, H=256, Q=128, N=4, Dqn=32, Dc=128, NB=6, BS=16, tables="bf16",
             gammas="bf16", pad=(2, 5), zero_token=3):
    r = rng(seed)
    if layout == "packed_int8":
        Dc = 512
    a = dict(x=bf(r.uniform(-1, 1, (T, H))), wq_a=bf(r.uniform(-0.1, 0.1, (Q, H))),
             w_uk=bf(r.uniform(-0.1, 0.1, (N, Dqn, Dc))), wkv_a=bf(r.uniform(-0.1, 0.1, (Dc + 64, H))))
    if zero_token is not None:
        a["x"][zero_token] = 0
    g1, g2 = r.uniform(0.5, 1.5, Q).astype(np.float32), r.uniform(0.5, 1.5, Dc).astype(np.float32)
    a["gamma_cq"], a["gamma_ckv"] = (bf(g1), bf(g2)) if gammas == "bf16" else (g1, g2)
    wq_b = bf(r.uniform(-0.1, 0.1, (N * (Dqn + 64), Q)))
    if i8:
        a["wq_b"], a["wq_b_scale"] = q8_weight(wq_b)
    else:
        a["wq_b"] = wq_b
    a["rope_cos"], a["rope_sin"] = random_tables(r, T, tables)
    a["cache_index"] = distinct_rows(r, T, NB * BS, pad)
    a.update(latent_caches(r, layout, NB, BS, Dc))
    return a


def np_mla(a, eps_cq=1e-6, eps_ckv=1e-6, rope_mode="interleaved_in_half_out", rope_inverse=False):
    """§4.1 steps 1-7 for every token at once -> dict of q_nope, q_rope, qr (, qr_scale), ckv, krope (fp32 values
    of the bf16 / int8 results)."""
    x = f32(a["x"])
    T = x.shape[0]
    N, Dqn, Dc = a["w_uk"].shape
    G = Dqn + 64
    c, s = f32(a["rope_cos"]), f32(a["rope_sin"])
    A = rbf(mm(x, f32(a["wq_a"]).T))
    cq = rbf(np_rmsnorm(A, a["gamma_cq"], eps_cq))
    out = {}
    if a["wq_b"].dtype == np.int8:
        qr, qs = np_q8(cq, cq.shape[-1])                                    # one group over all Q values
        il = qr.astype(np.int64) @ a["wq_b"].astype(np.int64).T              # exact
        with np.errstate(invalid="ignore"):
            qb = rbf((il.astype(np.float32) * qs) * a["wq_b_scale"][None, :])
        out["qr"], out["qr_scale"] = qr, qs[:, 0]
    else:
        qb = rbf(mm(cq, f32(a["wq_b"]).T))
        out["qr"] = cq
    qb = qb.reshape(T, N, G)
    out["q_nope"] = rbf(np.einsum("thi,hic->thc", np.float64(qb[..., :Dqn]),
                                  np.float64(f32(a["w_uk"]))).astype(np.float32))
    out["q_rope"] = rbf(rot(qb[..., Dqn:], c[:, None], s[:, None], rope_mode, rope_inverse))
    kva = rbf(mm(x, f32(a["wkv_a"]).T))
    out["ckv"] = rbf(np_rmsnorm(kva[:, :Dc], a["gamma_ckv"], eps_ckv))
    out["krope"] = rbf(rot(kva[:, Dc:], c, s, rope_mode, rope_inverse))
    return out


def packed_fields(rows):
    """packed_int8 rows [n, 656] uint8 -> int8 latent [n, 512], rope values [n, 64], scales [n, 4]."""
    rows = np.ascontiguousarray(rows)
    return (rows[:, :512].view(np.int8), f32(rows[:, 512:640].copy().view("<u2").view(BF16)),
            rows[:, 640:656].copy().view("<f4").astype(np.float32))


def check_latent_caches(layout, got, before, ref, ci):
    """The rows at cache_index with the §4.1 tolerances, every other row bit-identical to its prior bytes."""
    hit = ci[ci >= 0]
    q, s = np_q8(ref["ckv"][ci >= 0], 128) if layout != "split_bf16" else (None, None)
    for name in got:
        g = got[name].reshape(-1, got[name].shape[-1])
        b = before[name].reshape(g.shape)
        other = np.setdiff1d(np.arange(g.shape[0]), hit)
        assert np.array_equal(bits(g[other]), bits(b[other])), name + ": rows not addressed changed"
        if name == "kv_packed":
            lat, rope, sc = packed_fields(g[hit])
            assert_close("kv_packed latent", lat, q, TOL_I8)
            assert_close("kv_packed rope", rope, ref["krope"][ci >= 0], TOL_BF)
            assert_close("kv_packed scales", sc, s, TOL_KV_SCALE)
        elif name == "kr_cache":
            assert_close(name, g[hit], ref["krope"][ci >= 0], TOL_BF)
        elif name == "kv_scale_cache":
            assert_close(name, g[hit], s, TOL_KV_SCALE)
        elif layout == "split_int8":
            assert_close(name, g[hit], q, TOL_I8)
        else:
            assert_close(name, g[hit], ref["ckv"][ci >= 0], TOL_BF)


MLA_CASES = {
    "bf16_split_bf16": dict(i8=False, layout="split_bf16", kw={}),
    "int8_split_int8": dict(i8=True, layout="split_int8", kw={}),          # kv_layout inferred from the caches
    "bf16_split_int8_fp32": dict(i8=False, layout="split_int8", kw=dict(kv_layout="split_int8", eps_cq=1e-5),
                                 build=dict(tables="fp32", gammas="fp32")),
    "int8_split_bf16_inverse": dict(i8=True, layout="split_bf16",
                                    kw=dict(rope_mode="interleaved", rope_inverse=1, eps_ckv=0.0),
                                    build=dict(zero_token=None)),
    "int8_packed_int8": dict(i8=True, layout="packed_int8", kw=dict(kv_layout="packed_int8", rope_mode="half"),
                           build=dict(T=5, pad=(1,))),
}


@pytest.mark.parametrize("case", sorted(MLA_CASES))
def test_mla_prolog_v32(case):
    c = MLA_CASES[case]
    a = mla_case(41, c["i8"], c["layout"], **c.get("build", {}))
    caches = [n for n in ("kv_cache", "kv_scale_cache", "kr_cache", "kv_packed") if n in a]
    before = {n: a[n].copy() for n in caches}
    r = dsops.mla_prolog_v32(**a, **c["kw"])
    T, N, Dc = a["x"].shape[0], a["w_uk"].shape[0], a["w_uk"].shape[2]
    assert r["q_nope"].dtype == BF16 and r["q_nope"].shape == (T, N, Dc)
    assert r["q_rope"].dtype == BF16 and r["q_rope"].shape == (T, N, 64)
    assert r["qr"].dtype == (np.int8 if c["i8"] else BF16) and r["qr"].shape == (T, a["wq_a"].shape[0])
    assert ("qr_scale" in r) == c["i8"]
    for n in caches:
        assert r[n] is a[n]
    kw = c["kw"]
    ref = np_mla(a, kw.get("eps_cq", 1e-6), kw.get("eps_ckv", 1e-6), kw.get("rope_mode", "interleaved_in_half_out"),
                 bool(kw.get("rope_inverse", 0)))
    assert_close("q_nope", r["q_nope"], ref["q_nope"], TOL_Q)
    assert_close("q_rope", r["q_rope"], ref["q_rope"], TOL_Q)
    assert_close("qr", r["qr"], ref["qr"], TOL_I8 if c["i8"] else TOL_BF)
    if c["i8"]:
        assert r["qr_scale"].dtype == np.float32 and r["qr_scale"].shape == (T,)
        assert_close("qr_scale", r["qr_scale"], ref["qr_scale"], TOL_QR_SCALE)
    check_latent_caches(c["layout"], {n: a[n] for n in caches}, before, ref, a["cache_index"])
    zt = c.get("build", {}).get("zero_token", 3)
    if zt is not None:   # x = 0: cq = 0 and ckv = 0 exactly (eps > 0): Q8 stores zeros with scale 0 (§2.7)
        assert np.all(f32(r["q_nope"][zt]) == 0) and np.all(f32(r["q_rope"][zt]) == 0)
        assert np.all(f32(r["qr"][zt]) == 0)
        if c["i8"]:
            assert r["qr_scale"][zt] == 0
        row = a["cache_index"][zt]
        if row >= 0 and c["layout"] == "split_int8":
            assert np.all(a["kv_cache"].reshape(-1, Dc)[row] == 0) and np.all(a["kv_scale_cache"].reshape(
                -1, Dc // 128)[row] == 0)


def test_mla_prolog_v32_nan_groups():
    """NaN in gamma_cq / gamma_ckv enters every token through the element-wise RMSNorm weight: the int8 qr
    (one Q8 group) becomes zeros with qr_scale NaN and q_rope NaN; the cached latent's first 128-group zeros with
    scale NaN, its second group normal (§4.1 edge cases, §2.7)."""
    a = mla_case(42, True, "split_int8", Dc=256, zero_token=None)
    a["gamma_cq"][7] = np.nan
    a["gamma_ckv"][3] = np.nan
    before = {n: a[n].copy() for n in ("kv_cache", "kv_scale_cache", "kr_cache")}
    r = dsops.mla_prolog_v32(kv_layout="split_int8", **a)
    ref = np_mla(a)
    assert np.all(r["qr"] == 0) and np.all(np.isnan(r["qr_scale"]))
    assert np.all(np.isnan(f32(r["q_rope"])))
    ci = a["cache_index"]
    hit = ci[ci >= 0]
    kv, ks = a["kv_cache"].reshape(-1, 256), a["kv_scale_cache"].reshape(-1, 2)
    assert np.all(kv[hit, :128] == 0) and np.all(np.isnan(ks[hit, 0]))
    check_latent_caches("split_int8", {n: a[n] for n in before}, before, ref, ci)


def test_mla_prolog_v32_bad_cache_index_writes_nothing():
    a = mla_case(43, True, "split_int8")
    a["cache_index"][1] = a["cache_index"][0]
    before = {n: a[n].copy() for n in ("kv_cache", "kv_scale_cache", "kr_cache")}
    with pytest.raises(dsops.IndexError):
        dsops.mla_prolog_v32(kv_layout="split_int8", **a)
    for n, b in before.items():
        assert np.array_equal(bits(a[n]), bits(b))


# ---- indexer_prolog_v32 (§4.2) ------------------------------------------------------------------------------

TOL_QIDX_I8 = (1, 0, 0)
TOL_FP16_SCALE = (2.5e-5, 0, 0.005)            # q_idx_scale, cached key scale
TOL_W_FP16 = (2.5e-5, 2.0 ** -10, 0.005)


def idx_case(seed, i8, T=8, H=256, Q=128, NI=4, DI=64, NB=6, BS=16, hadamard="sylvester", had_dtype="bf16",
             norms="bf16", tables="bf16", pad=(2, 6), zero_token=None, zero_beta=False):
    r = rng(seed)
    a = dict(x=bf(r.uniform(-1, 1, (T, H))), idx_wk=bf(r.uniform(-0.2, 0.2, (DI, H))),
             weights_proj=bf(r.uniform(-0.2, 0.2, (NI, H))))
    if zero_token is not None:
        a["x"][zero_token] = 0
    if i8:
        cq = bf(r.uniform(-1, 1, (T, Q)))
        a["qr"], qs = np_q8(f32(cq), Q)
        a["qr_scale"] = qs[:, 0].copy()
        a["idx_wq_b"], a["idx_wq_b_scale"] = q8_weight(bf(r.uniform(-0.2, 0.2, (NI * DI, Q))))
    else:
        a["qr"] = bf(r.uniform(-1, 1, (T, Q)))
        a["idx_wq_b"] = bf(r.uniform(-0.2, 0.2, (NI * DI, Q)))
    g, b = r.uniform(0.5, 1.5, DI).astype(np.float32), r.uniform(-0.5, 0.5, DI).astype(np.float32)
    if zero_beta:
        b[:] = 0
    a["ln_gamma_k"], a["ln_beta_k"] = (bf(g), bf(b)) if norms == "bf16" else (g, b)
    a["rope_cos"], a["rope_sin"] = random_tables(r, T, tables)
    if hadamard is not None:
        for n in ("hadamard_q", "hadamard_k"):
            m = sylvester(DI) if hadamard == "sylvester" else r.uniform(-0.2, 0.2, (DI, DI)).astype(np.float32)
            a[n] = bf(m) if had_dtype == "bf16" else m
    a["cache_index"] = distinct_rows(r, T, NB * BS, pad)
    if i8:
        a["idx_k_cache"] = r.integers(-128, 128, (NB, BS, DI), dtype=np.int8)
        ks = r.uniform(0, 0.01, (NB, BS)).astype(np.float16)
        ks[0, :3] = np.nan
        a["idx_k_scale_cache"] = ks
    else:
        k = bf(r.uniform(-1, 1, (NB, BS, DI)))
        k[0, :3] = np.nan
        a["idx_k_cache"] = k
    return a


def np_idx(a, ln_eps=1e-6, weights_scale=V32_WEIGHTS_SCALE, rope_mode="half", rope_inverse=False):
    """§4.2 for every token at once -> q_idx (, q_idx_scale), weights, key (int8 / bf16 values) (, key_scale)."""
    x = f32(a["x"])
    T = x.shape[0]
    DI = a["idx_wk"].shape[0]
    NI = a["idx_wq_b"].shape[0] // DI
    c, s = f32(a["rope_cos"]), f32(a["rope_sin"])
    i8 = a["idx_wq_b"].dtype == np.int8
    if i8:
        il = a["qr"].astype(np.int64) @ a["idx_wq_b"].astype(np.int64).T
        qb = rbf((il.astype(np.float32) * a["qr_scale"][:, None]) * a["idx_wq_b_scale"][None, :])
    else:
        qb = rbf(mm(f32(a["qr"]), f32(a["idx_wq_b"]).T))
    u = qb.reshape(T, NI, DI).copy()
    u[..., :64] = rbf(rot(u[..., :64], c[:, None], s[:, None], rope_mode, rope_inverse))
    hq, hk = a.get("hadamard_q"), a.get("hadamard_k")
    q = rbf(mm(u, f32(hq))) if hq is not None else u                       # v·Hm: sum over the matrix rows
    k = rbf(np_layernorm(mm(x, f32(a["idx_wk"]).T), a["ln_gamma_k"], a["ln_beta_k"], ln_eps))
    k[:, :64] = rbf(rot(k[:, :64], c, s, rope_mode, rope_inverse))
    k = rbf(mm(k, f32(hk))) if hk is not None else k
    w = rbf(mm(x, f32(a["weights_proj"]).T)) * np.float32(weights_scale)
    out = {}
    if i8:
        out["q_idx"], qs = np_q8(q, DI)
        out["q_idx_scale"] = rfp16(qs[..., 0])
        out["key"], ks = np_q8(k, DI)
        out["key_scale"] = rfp16(ks[:, 0])
        out["weights"] = rfp16(w)
    else:
        out["q_idx"], out["key"], out["weights"] = q, k, rbf(w)
    return out


def check_idx_caches(a, before, ref):
    ci = a["cache_index"]
    hit = ci[ci >= 0]
    i8 = a["idx_k_cache"].dtype == np.int8
    kc = a["idx_k_cache"].reshape(-1, a["idx_k_cache"].shape[-1])
    other = np.setdiff1d(np.arange(kc.shape[0]), hit)
    assert np.array_equal(bits(kc[other]), bits(before["idx_k_cache"].reshape(kc.shape)[other]))
    assert_close("idx_k_cache", kc[hit], ref["key"][ci >= 0], TOL_I8 if i8 else TOL_BF)
    if i8:
        ks = a["idx_k_scale_cache"].reshape(-1)
        assert np.array_equal(bits(ks[other]), bits(before["idx_k_scale_cache"].reshape(-1)[other]))
        assert_close("idx_k_scale_cache", ks[hit], ref["key_scale"][ci >= 0], TOL_FP16_SCALE)


IDX_CASES = {
    "int8": dict(i8=True, kw={}, build=dict(zero_token=4, zero_beta=True)),
    "int8_di128_random_hadamard": dict(
        i8=True, kw=dict(ln_eps=1e-5, rope_mode="interleaved_in_half_out", weights_scale=6e4),
        build=dict(NI=2, DI=128, hadamard="random", had_dtype="fp32", norms="fp32", tables="fp32")),
    "bf16_dia": dict(i8=False, kw=dict(weights_scale=1.0, rope_mode="interleaved_in_half_out"),
                     build=dict(hadamard=None)),
    "bf16_random_hadamard_inverse": dict(i8=False, kw=dict(rope_mode="interleaved", rope_inverse=1),
                                         build=dict(hadamard="random")),
}


@pytest.mark.parametrize("case", sorted(IDX_CASES))
def test_indexer_prolog_v32(case):
    c = IDX_CASES[case]
    a = idx_case(51, c["i8"], **c["build"])
    caches = [n for n in ("idx_k_cache", "idx_k_scale_cache") if n in a]
    before = {n: a[n].copy() for n in caches}
    r = dsops.indexer_prolog_v32(**a, **c["kw"])
    T, DI = a["x"].shape[0], a["idx_wk"].shape[0]
    NI = a["idx_wq_b"].shape[0] // DI
    assert r["q_idx"].dtype == (np.int8 if c["i8"] else BF16) and r["q_idx"].shape == (T, NI, DI)
    assert r["weights"].dtype == (np.float16 if c["i8"] else BF16) and r["weights"].shape == (T, NI)
    assert ("q_idx_scale" in r) == c["i8"]
    kw = c["kw"]
    ref = np_idx(a, kw.get("ln_eps", 1e-6), np.float32(kw.get("weights_scale", V32_WEIGHTS_SCALE)),
                 kw.get("rope_mode", "half"), bool(kw.get("rope_inverse", 0)))
    if c["i8"]:
        assert_close("q_idx", r["q_idx"], ref["q_idx"], TOL_QIDX_I8)
        assert r["q_idx_scale"].dtype == np.float16 and r["q_idx_scale"].shape == (T, NI)
        assert_close("q_idx_scale", r["q_idx_scale"], ref["q_idx_scale"], TOL_FP16_SCALE)
        assert_close("weights", r["weights"], ref["weights"], TOL_W_FP16)
    else:
        assert_close("q_idx", r["q_idx"], ref["q_idx"], TOL_BF)
        assert_close("weights", r["weights"], ref["weights"], TOL_BF)
    check_idx_caches(a, before, ref)
    if "weights_scale" in kw and kw["weights_scale"] > 1e4:        # |weights| >= 65520 became Inf in fp16
        assert np.isinf(f32(r["weights"])).any() and np.isfinite(f32(r["weights"])).any()
    zt = c["build"].get("zero_token")
    if zt is not None and a["cache_index"][zt] >= 0:               # x = 0, beta = 0: an all-zero key, scale 0
        row = a["cache_index"][zt]
        assert np.all(a["idx_k_cache"].reshape(-1, DI)[row] == 0) and a["idx_k_scale_cache"].reshape(-1)[row] == 0
        assert np.all(f32(r["weights"][zt]) == 0)


# ---- sparse_attention_v32 (§4.5) ----------------------------------------------------------------------------

OUT_TOL = (1e-4, 0.005, 0.005)
LSE_TOL = (1e-6, 8.01 / 65536, 0.005)


def dia_case(seed, i8, layout, S=(2, 1, 2), seqused=(40, 130, 1), H=128, Q=64, N=2, Dqn=16, Dc=128, NI=4, DI=64,
             BS=16):
    """Several sequences (MTP S 1-2); the last one has seqused 1 < S = 2, so its first token sees no key and has
    no position (cache_index -1). cache_index[t] = slot(b, p_t) through a permuted block table whose unused
    columns hold garbage."""
    r = rng(seed)
    B, T = len(S), sum(S)
    blocks = [(u + BS - 1) // BS for u in seqused]
    MB, NB = max(blocks) + 2, sum(blocks) + 1
    perm = r.permutation(NB)
    bt = np.full((B, MB), -1, np.int32)
    k = 0
    for b in range(B):
        bt[b, :blocks[b]] = perm[k:k + blocks[b]]
        bt[b, blocks[b]:] = [-1, NB, 1 << 30][b % 3]
        k += blocks[b]
    cu = np.concatenate([[0], np.cumsum(S)]).astype(np.int32)
    seq = np.repeat(np.arange(B), S)
    i = np.arange(T) - cu[seq]
    L = np.asarray(seqused)[seq] - (np.asarray(S)[seq] - 1 - i)
    p = L - 1
    ci = np.where(p >= 0, bt[seq, np.maximum(p, 0) // BS].astype(np.int64) * BS + np.maximum(p, 0) % BS, -1)
    a = dict(x=bf(r.uniform(-1, 1, (T, H))), cu_seqlens_q=cu, seqused_kv=np.array(seqused, np.int32),
             block_table=bt, cache_index=ci.astype(np.int64))
    a["rope_cos"], a["rope_sin"] = random_tables(r, T, "bf16")
    a["wq_a"] = bf(r.uniform(-0.1, 0.1, (Q, H)))
    a["gamma_cq"] = bf(r.uniform(0.5, 1.5, Q))
    wq_b = bf(r.uniform(-0.1, 0.1, (N * (Dqn + 64), Q)))
    if i8:
        a["wq_b"], a["wq_b_scale"] = q8_weight(wq_b)
        a["idx_wq_b"], a["idx_wq_b_scale"] = q8_weight(bf(r.uniform(-0.2, 0.2, (NI * DI, Q))))
        a["hadamard_q"] = a["hadamard_k"] = sylvester(DI)
    else:
        a["wq_b"] = wq_b
        a["idx_wq_b"] = bf(r.uniform(-0.2, 0.2, (NI * DI, Q)))
    a["w_uk"] = bf(r.uniform(-0.1, 0.1, (N, Dqn, Dc)))
    a["wkv_a"] = bf(r.uniform(-0.1, 0.1, (Dc + 64, H)))
    a["gamma_ckv"] = bf(r.uniform(0.5, 1.5, Dc))
    a["idx_wk"] = bf(r.uniform(-0.2, 0.2, (DI, H)))
    a["weights_proj"] = bf(r.uniform(-0.2, 0.2, (NI, H)))
    a["ln_gamma_k"] = bf(r.uniform(0.5, 1.5, DI))
    a["ln_beta_k"] = bf(r.uniform(-0.5, 0.5, DI))
    rows = NB * BS
    lat = r.uniform(-1, 1, (rows, Dc)).astype(np.float32)
    if layout == "split_bf16":
        a["kv_cache"] = bf(lat).reshape(NB, BS, Dc)
    else:
        q, s = np_q8(lat, 128)
        a["kv_cache"], a["kv_scale_cache"] = q.reshape(NB, BS, Dc), s.reshape(NB, BS, Dc // 128)
    a["kr_cache"] = bf(r.uniform(-1, 1, (NB, BS, 64)))
    kf = (r.uniform(-1, 1, (rows, DI)) * r.uniform(0.05, 1, (rows, 1))).astype(np.float32)  # key scales vary
    if i8:
        q, s = np_q8(kf, DI)
        a["idx_k_cache"], a["idx_k_scale_cache"] = q.reshape(NB, BS, DI), rfp16(s[:, 0]).astype(
            np.float16).reshape(NB, BS)
    else:
        a["idx_k_cache"] = bf(kf).reshape(NB, BS, DI)
    return a, seq, L


def logical_rows(a, seq, idx):
    """Cache rows slot(b, idx) of logical positions idx [T, n] (only meaningful where idx is valid)."""
    BS = a["kr_cache"].shape[1]
    bt = a["block_table"]
    col = np.clip(idx // BS, 0, bt.shape[1] - 1)
    return bt[seq[:, None], col].astype(np.int64) * BS + idx % BS


def np_li_scores(q_idx, q_idx_scale, weights, key_cache, key_scale, rows, valid):
    """§3.6 index scores I [T, n] of the keys at cache rows `rows` (-inf where not valid)."""
    DI = key_cache.shape[-1]
    rows = np.where(valid, rows, 0)
    keys = key_cache.reshape(-1, DI)[rows]                                    # [T, n, DI]
    if q_idx.dtype == np.int8:
        dots = np.einsum("thd,tjd->thj", q_idx.astype(np.int64), keys.astype(np.int64))          # exact
        d = rfp16(np.maximum(dots, 0).astype(np.float32) * np.float32(2 ** -11))
        ws = rfp16(f32(q_idx_scale) * f32(weights))
        I = np.einsum("th,thj->tj", np.float64(ws), np.float64(d)).astype(np.float32)
        I = (I * f32(key_scale).reshape(-1)[rows]).astype(np.float32)
    else:
        dots = np.einsum("thd,tjd->thj", np.float64(f32(q_idx)), np.float64(f32(keys))).astype(np.float32)
        I = np.einsum("thj,th->tj", np.float64(np.maximum(dots, 0)), np.float64(f32(weights))).astype(np.float32)
    return np.where(valid, I, -np.inf).astype(np.float32)


def latent_keys(kv_cache, kv_scale_cache, kr_cache):
    """Every cache row as a dequantised key [rows, Dc + 64] (§4.4 step 3)."""
    Dc = kv_cache.shape[-1]
    if kv_cache.dtype == np.int8:
        g = kv_cache.reshape(-1, Dc // 128, 128).astype(np.float32) * kv_scale_cache.reshape(-1, Dc // 128, 1)
        kn = rbf(g.reshape(-1, Dc))
    else:
        kn = f32(kv_cache).reshape(-1, Dc)
    return np.concatenate([kn, f32(kr_cache).reshape(-1, kr_cache.shape[-1])], axis=1)


def np_sfa(q_nope, q_rope, keys, a, seq, L, topk, scale):
    """§4.4 with p_mode normalised over every token and head at once -> out [T, N, Dc] (fp32 values of bf16),
    lse [T, N]."""
    T, K = topk.shape
    Dc = q_nope.shape[-1]
    cnt = np.clip(L, 0, K)
    used = (np.arange(K)[None, :] < cnt[:, None]) & (topk >= 0) & (topk < a["seqused_kv"][seq][:, None])
    rows = np.where(used, logical_rows(a, seq, np.where(used, topk, 0)), 0)
    ke = keys[rows]                                                           # [T, K, Dqk]
    q = np.concatenate([f32(q_nope), f32(q_rope)], axis=-1)                   # [T, N, Dqk]
    s = (np.einsum("tnd,tkd->tnk", np.float64(q), np.float64(ke)).astype(np.float32) * np.float32(scale))
    s = np.where(used[:, None, :], s, -np.inf).astype(np.float32)
    m = s.max(-1, keepdims=True)
    lonely = ~np.isfinite(m)
    ms = np.where(lonely, 0, m)
    w = np.exp(np.float64(s - ms)).astype(np.float32)                         # exp(-inf) = 0 for unused entries
    l = w.sum(-1, keepdims=True, dtype=np.float64).astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        P = rbf(w / l)
        out = rbf(np.einsum("tnk,tkd->tnd", np.float64(P), np.float64(ke[..., :Dc])).astype(np.float32))
        lse = (m + np.log(np.float64(l)).astype(np.float32))[..., 0]
    out = np.where(lonely, np.float32(0), out)
    lse = np.where(lonely[..., 0], np.float32(np.inf), lse)
    return out, lse


@pytest.mark.parametrize("variant", ["bf16_split_bf16", "int8_split_int8"])
def test_sparse_attention_v32(variant):
    i8 = variant.startswith("int8")
    layout = "split_int8" if i8 else "split_bf16"
    K = 16
    a, seq, L = dia_case(61, i8, layout)
    caches = [n for n in ("kv_cache", "kv_scale_cache", "kr_cache", "idx_k_cache", "idx_k_scale_cache") if n in a]
    before = {n: a[n].copy() for n in caches}
    r = dsops.sparse_attention_v32(topk=K, **a)                              # kv_layout inferred from the caches
    T, N, Dc = a["x"].shape[0], a["w_uk"].shape[0], a["w_uk"].shape[2]
    assert r["out"].dtype == BF16 and r["out"].shape == (T, N, Dc)
    assert r["topk_indices"].dtype == np.int32 and r["topk_indices"].shape == (T, K)
    assert r["lse"].dtype == np.float32 and r["lse"].shape == (T, N)

    # the NumPy chain: stage 1 and 2 (their cache rows), stage 3 (scores of the visible keys), stage 4
    mla = np_mla(a)
    idx = np_idx(dict(a, qr=bf(mla["qr"]) if not i8 else mla["qr"], qr_scale=mla.get("qr_scale")))
    ci = a["cache_index"]
    exp_caches = {n: before[n].copy() for n in caches}
    hit, rws = ci >= 0, ci[ci >= 0]
    if i8:
        q, s = np_q8(mla["ckv"][hit], 128)
        exp_caches["kv_cache"].reshape(-1, Dc)[rws] = q
        exp_caches["kv_scale_cache"].reshape(-1, Dc // 128)[rws] = s
        exp_caches["idx_k_cache"].reshape(-1, a["idx_k_cache"].shape[-1])[rws] = idx["key"][hit]
        exp_caches["idx_k_scale_cache"].reshape(-1)[rws] = idx["key_scale"][hit]
    else:
        exp_caches["kv_cache"].reshape(-1, Dc)[rws] = bf(mla["ckv"][hit])
        exp_caches["idx_k_cache"].reshape(-1, a["idx_k_cache"].shape[-1])[rws] = bf(idx["key"][hit])
    exp_caches["kr_cache"].reshape(-1, 64)[rws] = bf(mla["krope"][hit])

    # caches: the written rows with the §4.1 / §4.2 tolerances, the others bit-identical
    for n in caches:
        g, e, b = (x.reshape(x.shape[0] * x.shape[1], -1) for x in (a[n], exp_caches[n], before[n]))
        other = np.setdiff1d(np.arange(g.shape[0]), rws)
        assert np.array_equal(bits(g[other]), bits(b[other])), n + ": rows not addressed changed"
        tol = {"kv_scale_cache": TOL_KV_SCALE, "idx_k_scale_cache": TOL_FP16_SCALE}.get(
            n, TOL_I8 if g.dtype == np.int8 else TOL_BF)
        assert_close(n, g[rws], e[rws], tol)

    # stage 3: compare_topk against the reference scores (max_miss 1)
    nmax = int(max(L.max(), 1))
    j = np.broadcast_to(np.arange(nmax), (T, nmax))
    valid = j < np.maximum(L, 0)[:, None]
    I = np_li_scores(idx["q_idx"], idx.get("q_idx_scale"), idx["weights"], exp_caches["idx_k_cache"],
                     exp_caches.get("idx_k_scale_cache"), np.where(valid, logical_rows(a, seq, j), 0), valid)
    topk = r["topk_indices"]
    for t in range(T):
        ok, text = compare_topk(topk[t], I[t], int(max(L[t], 0)))
        assert ok, "topk_indices row %d: %s" % (t, text)

    # a token that sees no key: a row of -1, out +0, lse +Inf (exact)
    lonely = np.flatnonzero(L <= 0)
    assert lonely.size == 1
    assert np.all(topk[lonely] == -1) and np.all(r["out"][lonely].view(np.uint16) == 0)
    assert np.all(np.isposinf(r["lse"][lonely]))

    # stage 4 on the library's own top-k: the reference chain's queries and caches; failing that, once more on
    # the library's own stage-1 results (its q_nope / q_rope and its stored cache rows), as §4.5 allows
    keys = latent_keys(exp_caches["kv_cache"], exp_caches.get("kv_scale_cache"), exp_caches["kr_cache"])
    out, lse = np_sfa(mla["q_nope"], mla["q_rope"], keys, a, seq, L, topk, V32_SOFTMAX_SCALE)
    ok1, t1 = compare_close(r["out"], out, *OUT_TOL)
    ok2, t2 = compare_close(r["lse"], lse, *LSE_TOL)
    names = {n for n, _, _ in dsops.operators["mla_prolog_v32"].tensors}
    own = dsops.mla_prolog_v32(kv_layout=layout, **{k: (before[k].copy() if k in before else v)
                                                    for k, v in a.items() if k in names})
    keys = latent_keys(a["kv_cache"], a.get("kv_scale_cache"), a["kr_cache"])
    out2, lse2 = np_sfa(own["q_nope"], own["q_rope"], keys, a, seq, L, topk, V32_SOFTMAX_SCALE)
    ok1b, t1b = compare_close(r["out"], out2, *OUT_TOL)
    ok2b, t2b = compare_close(r["lse"], lse2, *LSE_TOL)
    assert (ok1 and ok2) or (ok1b and ok2b), "out: %s / %s; lse: %s / %s" % (t1, t1b, t2, t2b)


def test_sparse_attention_v32_equals_the_four_stages():
    """§4.5: each stage computes exactly what the stand-alone operator computes: the fused call gives the bytes of
    mla_prolog_v32 -> indexer_prolog_v32 -> lightning_indexer -> sparse_flash_attention_v32 (caches included)."""
    a, seq, L = dia_case(62, True, "split_int8")
    K = 16
    b = {k: v.copy() for k, v in a.items()}
    fused = dsops.sparse_attention_v32(topk=K, kv_layout="split_int8", **a)

    def only(op, d):
        names = {n for n, _, _ in dsops.operators[op].tensors}
        return {k: v for k, v in d.items() if k in names}

    s1 = dsops.mla_prolog_v32(kv_layout="split_int8", **only("mla_prolog_v32", b))
    s2 = dsops.indexer_prolog_v32(**only("indexer_prolog_v32", dict(b, qr=s1["qr"], qr_scale=s1["qr_scale"])))
    s3 = dsops.lightning_indexer(topk=K, q_idx=s2["q_idx"], q_idx_scale=s2["q_idx_scale"], weights=s2["weights"],
                                 key_cache=b["idx_k_cache"], key_scale_cache=b["idx_k_scale_cache"],
                                 block_table=b["block_table"], cu_seqlens_q=b["cu_seqlens_q"],
                                 seqused_kv=b["seqused_kv"])
    s4 = dsops.sparse_flash_attention_v32(q_nope=s1["q_nope"], q_rope=s1["q_rope"], key_nope=b["kv_cache"],
                                          key_nope_scale=b["kv_scale_cache"], key_rope=b["kr_cache"],
                                          topk_indices=s3["topk_indices"], block_table=b["block_table"],
                                          cu_seqlens_q=b["cu_seqlens_q"], seqused_kv=b["seqused_kv"],
                                          kv_layout="split_int8")
    assert np.array_equal(fused["topk_indices"], s3["topk_indices"])
    assert np.array_equal(bits(fused["out"]), bits(s4["out"])) and np.array_equal(bits(fused["lse"]), bits(s4["lse"]))
    for n in ("kv_cache", "kv_scale_cache", "kr_cache", "idx_k_cache", "idx_k_scale_cache"):
        assert np.array_equal(bits(a[n]), bits(b[n])), n


# ---- empty work (V10) ---------------------------------------------------------------------------------------

def empty_calls():
    """(operator, keyword arguments with T = 0 views of the token-major tensors, names of its in-out tensors)."""
    calls = {}
    x = bf(np.ones((3, 2, 128)))
    tab = bf(np.ones((3, 64)))
    calls["rope_apply"] = (dsops.rope_apply, dict(x=x[:0], rope_cos=tab[:0], rope_sin=tab[:0]), ())
    calls["rope_tables"] = (dsops.rope_tables, dict(positions=np.arange(3, dtype=np.int64)[:0]), ())
    calls["quant_q8"] = (dsops.quant_q8, dict(x=x[:0, 0], group=64), ())
    cache, sc = int8_cache(71, 2, 4, 128, 128, np.float32)
    calls["cache_store"] = (dsops.cache_store, dict(src=x[:0, 0], cache_index=np.zeros(3, np.int64)[:0],
                                                    cache=cache, cache_scale=sc), ("cache", "cache_scale"))
    tok = ("x", "rope_cos", "rope_sin", "cache_index", "qr", "qr_scale")
    a = mla_case(72, True, "split_int8")
    calls["mla_prolog_v32"] = (dsops.mla_prolog_v32, {k: (v[:0] if k in tok else v) for k, v in a.items()},
                               ("kv_cache", "kv_scale_cache", "kr_cache"))
    a = idx_case(73, True)
    calls["indexer_prolog_v32"] = (dsops.indexer_prolog_v32, {k: (v[:0] if k in tok else v) for k, v in a.items()},
                                   ("idx_k_cache", "idx_k_scale_cache"))
    a, _, _ = dia_case(74, True, "split_int8", S=(2,), seqused=(20,))
    a = {k: (v[:0] if k in tok else v) for k, v in a.items()}
    a["cu_seqlens_q"] = np.zeros(2, np.int32)
    calls["sparse_attention_v32"] = (dsops.sparse_attention_v32, dict(a, topk=8),
                                     ("kv_cache", "kv_scale_cache", "kr_cache", "idx_k_cache", "idx_k_scale_cache"))
    return calls


@pytest.mark.parametrize("op", ["rope_apply", "rope_tables", "quant_q8", "cache_store", "mla_prolog_v32",
                                "indexer_prolog_v32", "sparse_attention_v32"])
def test_empty_call_is_valid(op):
    """V10 / §2 / §4.1 / §4.2: T = 0 is a valid call: it returns OK, its outputs have 0 rows, no cache changes.
    (NumPy gives an empty array all-zero strides; the package must still describe it with a unit innermost
    stride, §1.3, for its own output allocations too.)"""
    f, kw, inout = empty_calls()[op]
    before = {n: kw[n].copy() for n in inout}
    r = f(**kw)
    for n, v in r.items():
        if n not in inout:
            assert v.shape[0] == 0, n
    for n in inout:
        assert np.array_equal(bits(kw[n]), bits(before[n])), n
