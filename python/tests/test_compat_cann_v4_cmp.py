"""dsops.compat._cann_v4_cmp (the PyPTO compressor and the V4 int8 indexer prolog) over the vendor test files'
cases, with their shapes, data distributions and comparison rules, against (a) dsops's own operator called
with the mapped parameters (the same bytes) and (b) NumPy formulations written here from the vendor's
documented semantics: the compressor token by token (store the projections, pool a window when it closes),
the prolog as its formula."""
import numpy as np
import pytest

import dsops
from dsops.compat import cann as v4  # the V4 PyPTO calls, reached as the vendor tests reach them

BF16 = dsops.bfloat16
F32 = np.float32
pytestmark = pytest.mark.skipif(BF16 is None, reason="ml_dtypes is needed for bf16 arrays")


def rb(a):
    """Rounded to bf16 (nearest even), as fp32."""
    return np.asarray(a, F32).astype(BF16).astype(F32)


def f32(a):
    return np.asarray(a).astype(F32)


def same_bytes(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def rope_interleaved(v, c, s, inverse=False):
    """Rotation of interleaved pairs (2j, 2j + 1) over the last axis (64): y = v·cos + [−v1, v0]·sin per pair,
    in fp32 (with bf16 operands the products are exact); inverse negates sin."""
    v, c, s = f32(v), f32(c), f32(s)
    if inverse:
        s = -s
    partner = np.empty_like(v)
    partner[..., 0::2], partner[..., 1::2] = -v[..., 1::2], v[..., 0::2]
    return v * c + partner * s


# ---- compressor_pypto -----------------------------------------------------------------------------------------

def compressor_reference(x, kv_state, score_state, kv_table, sc_table, sin, cos, wkv, wgate, ape, weight, hadamard,
                         start_pos, R, rotate, eps=1e-6):
    """The vendor's documented order, token by token: store the token's fp32 projections (the logit with ape of
    its place in the window) in the paged states; when its position closes a window, pool the window's rows as
    they are now in the states (ratio 4: the previous window's low half, none for window 0, and its own high
    half; ratio 128: the window itself) with softmax weights per channel, round to bf16, RMSNorm (eps 1e-6) to
    bf16, rotate the last 64 dims with the output row's tables, and with rotate multiply by hadamard. Output row
    b per sequence when S ≤ R, else the entries packed by sequence. Returns (out, kv_state, score_state)."""
    B, S, H = x.shape
    D = weight.shape[0]
    W = kv_state.shape[-1]
    C = W // D
    bs = kv_state.shape[1]
    kv_state, score_state = kv_state.copy(), score_state.copy()
    kvp = (f32(x).reshape(B * S, H).astype(np.float64) @ f32(wkv).T.astype(np.float64)).astype(F32).reshape(B, S, W)
    scp = (f32(x).reshape(B * S, H).astype(np.float64) @ f32(wgate).T.astype(np.float64)).astype(F32).reshape(B, S, W)
    NO = min(B * S, B * S // R + B)
    out = np.zeros((NO, D), F32)
    row = 0
    for b in range(B):
        def slot(state, table, u):
            return state[table[b, u // bs], u % bs]
        for i in range(S):
            p = int(start_pos[b]) + i
            kv_state[kv_table[b, p // bs], p % bs] = kvp[b, i]
            score_state[sc_table[b, p // bs], p % bs] = scp[b, i] + ape[p % R]
            if (p + 1) % R:
                continue
            k = p // R
            own = range(k * R, k * R + R)
            a = [slot(kv_state, kv_table, u)[W - D:] for u in own]
            z = [slot(score_state, sc_table, u)[W - D:] for u in own]
            if C == 2 and k > 0:
                prev = range(k * R - R, k * R)
                a = [slot(kv_state, kv_table, u)[:D] for u in prev] + a
                z = [slot(score_state, sc_table, u)[:D] for u in prev] + z
            a, z = np.array(a, np.float64), np.array(z, np.float64)
            e = np.exp(z - z.max(0))
            y = rb((a * e).sum(0) / e.sum(0))
            y = rb(y / np.sqrt((y.astype(np.float64) ** 2).mean() + eps) * f32(weight))
            r = b if S <= R else row
            y[D - 64:] = rb(rope_interleaved(y[D - 64:], cos[r], sin[r]))
            if rotate:
                y = rb(y.astype(np.float64) @ f32(hadamard).astype(np.float64))
            out[r] = y
            row += 1
    return out, kv_state, score_state


def vendor_tables(B, R, cols=100):
    """The vendor test's block tables: ratio 4, every column of sequence b names block 1 + 2b (a 128-row ring);
    ratio 128, columns alternate between blocks 1 + 2b and 2 + 2b."""
    base = 1 + 2 * np.arange(B, dtype=np.int32)[:, None]
    return (base + np.zeros(cols, np.int32)) if R == 4 else (base + np.arange(cols, dtype=np.int32) % 2)


def compressor_case(rng, B, S, D, R, rotate, start, H=4096, score_table=None):
    """The vendor test's data: everything uniform in [0, 1) (hadamard scaled by D^-1/2), weight ones, zero
    states of table.max() + 1 blocks of 128 rows. score_table: other blocks for the logit state (the vendor
    passes one table for both)."""
    C = 2 if R == 4 else 1
    NO = min(B * S, B * S // R + B)
    u = lambda *shape: rng.random(shape)
    table = vendor_tables(B, R)
    sc_table = table if score_table is None else score_table
    nb = int(max(table.max(), sc_table.max())) + 1
    return dict(x=u(B, S, H).astype(BF16), kv_state=np.zeros((nb, 128, C * D), F32),
                score_state=np.zeros((nb, 128, C * D), F32), kv_block_table=table, score_block_table=sc_table,
                sin=u(NO, 64).astype(BF16), cos=u(NO, 64).astype(BF16), wkv=u(C * D, H).astype(BF16),
                wgate=u(C * D, H).astype(BF16), ape=u(R, C * D).astype(F32), weight=np.ones(D, BF16),
                hadamard=(u(D, D) * D ** -0.5).astype(BF16), start_pos=np.asarray(start, np.int32), ratio=R,
                rope_head_dim=64, rotate=rotate)


ARGS = ("x", "kv_state", "score_state", "kv_block_table", "score_block_table", "sin", "cos", "wkv", "wgate", "ape",
        "weight", "hadamard", "start_pos", "ratio", "rope_head_dim", "rotate")


def fill_history(rng, d, span):
    """Pre-call state rows as an earlier call would have left them: the projections of random tokens at the
    `span` positions before each sequence's start (never below 0)."""
    B, _, H = d["x"].shape
    bs = d["kv_state"].shape[1]
    R = d["ratio"]
    for b in range(B):
        p0 = int(d["start_pos"][b])
        us = np.arange(max(0, p0 - span), p0)
        if not len(us):
            continue
        xh = f32(rng.random((len(us), H)).astype(BF16))
        kv = xh @ f32(d["wkv"]).T
        sc = xh @ f32(d["wgate"]).T + d["ape"][us % R]
        d["kv_state"][d["kv_block_table"][b, us // bs], us % bs] = kv
        d["score_state"][d["score_block_table"][b, us // bs], us % bs] = sc


def call_compressor(d, **kw):
    d = dict(d, kv_state=d["kv_state"].copy(), score_state=d["score_state"].copy())
    out = v4.compressor_pypto(*(d[k] for k in ARGS), **kw)
    return out, d["kv_state"], d["score_state"]


def call_native_compressor(d):
    """dsops.compressor itself with the vendor's settings written out."""
    B, S, H = d["x"].shape
    D = d["weight"].shape[0]
    kv, sc = d["kv_state"].copy(), d["score_state"].copy()
    out = np.full((min(B * S, B * S // d["ratio"] + B), D), np.nan, F32).astype(BF16)  # every row must be written
    extra = dict(hadamard=d["hadamard"]) if d["rotate"] else {}
    dsops.compressor(x=d["x"].reshape(B * S, H), cu_seqlens_q=np.arange(B + 1, dtype=np.int32) * S,
                     start_pos=d["start_pos"], wkv=d["wkv"], wgate=d["wgate"], ape=d["ape"], norm_weight=d["weight"],
                     rope_cos=d["cos"], rope_sin=d["sin"], kv_state=kv, score_state=sc,
                     kv_state_block_table=d["kv_block_table"], score_state_block_table=d["score_block_table"],
                     out=out, norm_eps=1e-6, rope_mode="interleaved", rope_inverse=0,
                     out_layout="row_per_seq" if S <= d["ratio"] else "packed", **extra)
    return out, kv, sc


def check_compressor(d):
    """The vendor test's rule (every element: out within 1e-4 + 2^-7·|ref|, states within 1e-3 + 1e-3·|ref|)
    against the reference, and the bytes of dsops's own call."""
    out, kv, sc = call_compressor(d)
    B, S, _ = d["x"].shape
    D = d["weight"].shape[0]
    assert out.dtype == BF16 and out.shape == (min(B * S, B * S // d["ratio"] + B), D)
    ref, rkv, rsc = compressor_reference(*(d[k] for k in ARGS[:12]), d["start_pos"], d["ratio"], d["rotate"])
    np.testing.assert_allclose(f32(out), ref, rtol=2 ** -7, atol=1e-4)
    np.testing.assert_allclose(kv, rkv, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(sc, rsc, rtol=1e-3, atol=1e-3)
    nout, nkv, nsc = call_native_compressor(d)
    same_bytes(out, nout)
    same_bytes(kv, nkv)
    same_bytes(sc, nsc)
    return out, ref


# the vendor's three cases: b 64, s 2, H 4096; c128a from position 8192 (no window closes), c4a from position 2
# (window 0 closes), c4 indexer (D 128, rotate) from position 1 (no window closes)
@pytest.mark.parametrize("name,R,D,rotate,start", [
    ("test_comp_128", 128, 512, False, 8192),
    ("test_comp_4", 4, 512, False, 2),
    ("test_comp_indexer", 4, 128, True, 1),
])
def test_compressor_pypto_vendor_cases(name, R, D, rotate, start):
    rng = np.random.default_rng(42)
    d = compressor_case(rng, 64, 2, D, R, rotate, [start] * 64)
    out, ref = check_compressor(d)
    closes = (start % R) + 2 >= R
    assert np.any(f32(out) != 0) == closes  # zero rows exactly where no window closes


# further cases, not in the vendor file: windows that do close for every variant, at mixed positions, with
# pre-call state rows from earlier tokens and the logit state paged by another table than the value state
@pytest.mark.parametrize("R,D,rotate,S,start", [
    (128, 512, False, 2, [8190, 8189, 126, 300, 255, 0]),
    (128, 512, False, 4, [8188, 124, 125, 1]),
    (4, 512, False, 3, [0, 1, 2, 3, 4, 5, 6, 9, 14, 101]),
    (4, 128, True, 4, [0, 1, 2, 3, 4, 5, 6, 7, 8, 126]),
    (4, 128, True, 1, [3, 7, 2, 127]),
])
def test_compressor_pypto_closing_windows(R, D, rotate, S, start):
    rng = np.random.default_rng(S * 100 + len(start))
    B = len(start)
    table = vendor_tables(B, R)
    d = compressor_case(rng, B, S, D, R, rotate, start, score_table=table + 2 * B)
    fill_history(rng, d, 2 * R - 1)
    out, ref = check_compressor(d)
    closing = [(p % R) + S >= R for p in start]
    assert [bool(np.any(ref[b] != 0)) for b in range(B)] == closing


def test_compressor_pypto_packed_when_s_exceeds_ratio():
    """S > ratio (beyond the vendor's S ≤ 4 with ratio 4): several windows per sequence, packed by sequence;
    start_pos None means 0."""
    rng = np.random.default_rng(5)
    d = compressor_case(rng, 3, 9, 512, 4, False, [0, 2, 5], H=1024)
    fill_history(rng, d, 7)
    out, ref = check_compressor(d)
    assert np.all(f32(out[:6]) != 0) and np.all(f32(out[6:]) == 0)  # 2 windows each, 9 rows
    z = dict(d, start_pos=np.zeros(3, np.int32))
    out0, _, _ = call_compressor(z)
    same_bytes(out0, call_compressor(dict(z, start_pos=None))[0])


def test_compressor_pypto_argument_roles():
    """Each argument plays the vendor's role: swapping sin and cos, the two block tables, or wkv and wgate, or
    rotating the other way round breaks the agreement with the reference."""
    rng = np.random.default_rng(8)
    start = [3, 7, 2, 11]
    d = compressor_case(rng, 4, 2, 128, 4, True, start, H=512, score_table=vendor_tables(4, 4) + 8)
    d["sin"] = (rng.random(d["sin"].shape) * 2 - 1).astype(BF16)  # not all positive, so the sign matters
    fill_history(rng, d, 7)
    out, ref = check_compressor(d)

    def agrees(got):
        return np.allclose(f32(got), ref, rtol=2 ** -7, atol=1e-4)
    assert agrees(out)
    assert not agrees(call_compressor(dict(d, sin=d["cos"], cos=d["sin"]))[0])
    assert not agrees(call_compressor(dict(d, wkv=d["wgate"], wgate=d["wkv"]))[0])
    swapped = dict(d, kv_block_table=d["score_block_table"], score_block_table=d["kv_block_table"])
    _, kv, _ = call_compressor(swapped)
    assert not np.allclose(kv, compressor_reference(*(d[k] for k in ARGS[:12]), d["start_pos"], 4, True)[1])
    inv = dict(d, sin=(-f32(d["sin"])).astype(BF16))  # the inverse rotation
    assert not agrees(call_compressor(inv)[0])


def test_compressor_pypto_limits():
    d = compressor_case(np.random.default_rng(1), 2, 1, 128, 4, True, [3, 0], H=64)
    with pytest.raises(NotImplementedError):
        call_compressor(dict(d, rope_head_dim=32))
    with pytest.raises(ValueError):
        call_compressor(dict(d, hadamard=None))
    out, _, _ = call_compressor(dict(d, hadamard=None, rotate=False))  # hadamard unused without rotate
    assert out.shape == (2, 128)


def test_compressor_pypto_prepared():
    d = compressor_case(np.random.default_rng(3), 4, 2, 512, 4, False, [2, 3, 6, 0], H=256)
    p = v4.compressor_pypto.prepare(*(d[k] for k in ARGS))
    plain = call_compressor(d)
    prep = call_compressor(d, prepared=p)
    for a, b in zip(plain, prep):
        same_bytes(a, b)
    with pytest.raises(ValueError, match="prepared"):
        call_compressor(dict(d, wkv=d["wkv"].copy()), prepared=p)


def test_compressor_pypto_torch():
    torch = pytest.importorskip("torch")
    d = compressor_case(np.random.default_rng(4), 3, 3, 128, 4, True, [1, 2, 7], H=256)
    want = call_compressor(d)

    def tt(a):
        a = np.asarray(a)
        return torch.from_numpy(a.copy().view(np.int16)).view(torch.bfloat16) if a.dtype == BF16 \
            else torch.from_numpy(a.copy())
    t = {k: tt(v) if isinstance(v, np.ndarray) else v for k, v in d.items()}
    got = v4.compressor_pypto(*(t[k] for k in ARGS))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16
    same_bytes(got.view(torch.int16).numpy(), want[0].view(np.int16))
    same_bytes(t["kv_state"].numpy(), want[1])  # the torch states updated in place
    same_bytes(t["score_state"].numpy(), want[2])


# ---- quant_lightning_indexer_prolog ------------------------------------------------------------------------------

def quantise_rows(v):
    """Per row (last axis): scale 127 / amax in fp32, values rounded to nearest even, dequantisation scale the
    fp32 reciprocal of that scale."""
    v = f32(v)
    sq = (F32(127.0) / np.abs(v).max(-1, keepdims=True)).astype(F32)
    return np.rint(v * sq).astype(np.int8), (F32(1.0) / sq).astype(F32)


def prolog_case(rng, t, Q=1024, N=64, D=128, H=4096):
    """The vendor test's data: qr and idx_wq_b drawn as integers in [−1, 1) and quantised (qr per token,
    idx_wq_b per output column), x U[−1, 1), weights_proj U[−0.1, 0.1), cos, sin, hadamard U[−1, 1), bf16."""
    qr, qr_scale = quantise_rows(rng.integers(-1, 1, (t, Q)))
    wt, w_scale = quantise_rows(rng.integers(-1, 1, (N * D, Q)))
    u = lambda lo, hi, *shape: rng.uniform(lo, hi, shape).astype(BF16)
    return dict(qr=qr, idx_wq_b=np.ascontiguousarray(wt.T), x=u(-1, 1, t, H), weights_proj=u(-0.1, 0.1, H, N),
                cos=u(-1, 1, t, 64), sin=u(-1, 1, t, 64), hadamard=u(-1, 1, D, D), qr_scale=qr_scale,
                idx_wq_b_scale=w_scale)


PROLOG_ARGS = ("qr", "idx_wq_b", "x", "weights_proj", "cos", "sin", "hadamard", "qr_scale", "idx_wq_b_scale")


def prolog_reference(d, inverse=True):
    """The vendor's formula: q = bf16(((qr @ idx_wq_b) · qr_scale) · idx_wq_b_scale) per head of D, the last 64
    dims rotated by the opposite angle, q @ hadamard rounded to bf16, int8 per head; weights =
    fp16(bf16(x @ weights_proj) · N^-1/2 · D^-1/2). Returns (q, weights, q_scale)."""
    T = d["qr"].shape[0]
    D = d["hadamard"].shape[0]
    N = d["idx_wq_b"].shape[1] // D
    # int8 × int8 products summed in fp32: every partial sum here is an integer below 2^24, so exact
    acc = f32(d["qr"]) @ f32(d["idx_wq_b"])
    q = rb((acc * d["qr_scale"].reshape(T, 1)).astype(F32) * d["idx_wq_b_scale"].reshape(1, -1)).reshape(T, N, D)
    q[..., D - 64:] = rb(rope_interleaved(q[..., D - 64:], d["cos"][:, None], d["sin"][:, None], inverse))
    q = rb(q.astype(np.float64) @ f32(d["hadamard"]).astype(np.float64))
    q8, qs = quantise_rows(q)
    w = rb(f32(d["x"]).astype(np.float64) @ f32(d["weights_proj"]).astype(np.float64))
    w = (w * F32(N ** -0.5) * F32(D ** -0.5)).astype(np.float16)
    return q8, w, qs[..., 0].astype(np.float16)


def vendor_compare(got, want, atol, rtol, max_ratio=0.005):
    """The vendor test's rule: no NaN / Inf; an element fails when |got − want| > atol + rtol·|want|; at most
    round(max_ratio · n) elements fail."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert g.shape == w.shape
    assert np.all(np.isfinite(g))
    bad = np.abs(g - w) > atol + rtol * np.abs(w)
    return bad.sum() <= round(max_ratio * w.size)


def nz_bytes(a):
    """NZ bytes in an array of the ND shape, as the vendor casts idx_wq_b and weights_proj."""
    return dsops.nd_to_fractal_nz(nd=a)["nz"].reshape(a.shape)


def native_prolog(d):
    """dsops.indexer_prolog_v4 itself with the vendor's settings written out."""
    T = d["qr"].shape[0]
    D = d["hadamard"].shape[0]
    N = d["weights_proj"].shape[1]
    r = dsops.indexer_prolog_v4(qr=d["qr"], qr_scale=d["qr_scale"].reshape(T), x=d["x"],
                                idx_wq_b=np.ascontiguousarray(d["idx_wq_b"].T), idx_wq_b_scale=d["idx_wq_b_scale"].reshape(-1),
                                weights_proj=np.ascontiguousarray(d["weights_proj"].T), rope_cos=d["cos"],
                                rope_sin=d["sin"], hadamard=d["hadamard"], weights_scale=N ** -0.5 * D ** -0.5,
                                rope_mode="interleaved", rope_inverse=1)
    return r["q_idx"], r["weights"], r["q_idx_scale"]


def check_prolog(got, d):
    q, w, qs = got
    T, N, D = d["qr"].shape[0], d["weights_proj"].shape[1], d["hadamard"].shape[0]
    assert q.shape == (T, N, D) and q.dtype == np.int8
    assert w.shape == (T, N) and w.dtype == np.float16 and qs.shape == (T, N) and qs.dtype == np.float16
    rq, rw, rqs = prolog_reference(d)
    assert vendor_compare(q, rq, 1e-4, 0.005)
    assert vendor_compare(w, rw, 1e-4, 0.007825)
    assert vendor_compare(qs, rqs, 1e-4, 0.007825)
    for a, b in zip(got, native_prolog(d)):
        same_bytes(a, b)


# the vendor's cases: t 64, 128, 256 (b 64 with 1, 2, 4 tokens each) through the kernel entry with NZ weights,
# and t 511 through the graph entry (also with NZ weights); Q 1024, 64 heads of 128, H 4096
@pytest.mark.parametrize("name,t", [("test_indexer_prolog_quant_b64_s1", 64), ("test_indexer_prolog_quant_b64_s2", 128),
                                    ("test_indexer_prolog_quant_b64_s4", 256), ("test_indexer_prolog_quant_graph", 511)])
def test_quant_lightning_indexer_prolog_vendor_cases(name, t):
    d = prolog_case(np.random.default_rng(42), t)
    args = [d[k] for k in PROLOG_ARGS]
    args[1], args[3] = nz_bytes(d["idx_wq_b"]), nz_bytes(d["weights_proj"])
    if name.endswith("graph"):
        got = v4.npu_quant_lightning_indexer_prolog(*args, weight_format="NZ")
    else:
        got = (np.zeros((t, 64, 128), np.int8), np.zeros((t, 64), np.float16), np.zeros((t, 64), np.float16))
        assert v4.quant_lightning_indexer_prolog_kernel(*args, *got, v4.IndexerPrologQuantConfig([128, 64, 32, 16, 8, 1]),
                                                        weight_format="NZ") is None
    check_prolog(got, d)


@pytest.mark.parametrize("weights", ["ND", "NZ blocks", "NZ bytes"])
def test_quant_lightning_indexer_prolog_weight_formats(weights):
    d = prolog_case(np.random.default_rng(7), 64)
    args = [d[k] for k in PROLOG_ARGS]
    fmt = None
    if weights == "NZ blocks":
        args[1], args[3] = (dsops.nd_to_fractal_nz(nd=args[i])["nz"] for i in (1, 3))
    elif weights == "NZ bytes":
        args[1], args[3], fmt = nz_bytes(args[1]), nz_bytes(args[3]), "NZ"
    check_prolog(v4.quant_lightning_indexer_prolog(*args, weight_format=fmt), d)


def test_quant_lightning_indexer_prolog_argument_roles():
    """With scales and tables that tell the arguments apart, the result agrees with the vendor's formula
    (inverse rotation, outputs ordered q, weights, q_scale) and not with a forward rotation, swapped cos / sin,
    swapped scales, or the other order of the two fp16 outputs."""
    rng = np.random.default_rng(9)
    d = prolog_case(rng, 32, Q=256, N=8, D=128, H=512)
    d["qr_scale"] = (rng.uniform(0.5, 2, d["qr_scale"].shape) / 127).astype(F32)
    d["idx_wq_b_scale"] = (rng.uniform(0.5, 2, d["idx_wq_b_scale"].shape) / 127).astype(F32)
    got = v4.quant_lightning_indexer_prolog(*(d[k] for k in PROLOG_ARGS))
    check_prolog(got, d)
    forward = prolog_reference(d, inverse=False)
    assert not vendor_compare(got[0], forward[0], 1e-4, 0.005)
    swapped = prolog_reference(dict(d, cos=d["sin"], sin=d["cos"]))
    assert not vendor_compare(got[0], swapped[0], 1e-4, 0.005)
    assert not vendor_compare(got[1], got[2], 1e-4, 0.007825)
    mixed = v4.quant_lightning_indexer_prolog(*(dict(d, qr_scale=d["idx_wq_b_scale"][:32],
                                                     idx_wq_b_scale=np.resize(d["qr_scale"], d["idx_wq_b_scale"].shape))[k]
                                                for k in PROLOG_ARGS))
    assert not vendor_compare(mixed[2], got[2], 1e-4, 0.007825)


def test_quant_lightning_indexer_prolog_limits():
    d = prolog_case(np.random.default_rng(2), 4, Q=64, N=2, D=128, H=64)
    with pytest.raises(NotImplementedError):
        v4.quant_lightning_indexer_prolog(*(dict(d, cos=d["cos"][:, :32], sin=d["sin"][:, :32])[k] for k in PROLOG_ARGS))
    with pytest.raises(ValueError):  # outputs written in place must be contiguous
        v4.quant_lightning_indexer_prolog_kernel(*(d[k] for k in PROLOG_ARGS), np.zeros((4, 128, 2), np.int8).transpose(0, 2, 1),
                                                 np.zeros((4, 2), np.float16), np.zeros((4, 2), np.float16))


def test_quant_lightning_indexer_prolog_prepared():
    d = prolog_case(np.random.default_rng(6), 16, Q=256, N=16, D=128, H=512)
    args = [d[k] for k in PROLOG_ARGS]
    args[1], args[3] = nz_bytes(d["idx_wq_b"]), nz_bytes(d["weights_proj"])
    p = v4.quant_lightning_indexer_prolog.prepare(*args, weight_format="NZ")
    plain = v4.quant_lightning_indexer_prolog(*args, weight_format="NZ")
    for a, b in zip(plain, v4.npu_quant_lightning_indexer_prolog(*args, weight_format="NZ", prepared=p)):
        same_bytes(a, b)
    outs = (np.zeros((16, 16, 128), np.int8), np.zeros((16, 16), np.float16), np.zeros((16, 16), np.float16))
    v4.quant_lightning_indexer_prolog_kernel(*args, *outs, weight_format="NZ", prepared=p)
    for a, b in zip(plain, outs):
        same_bytes(a, b)
    args[1] = args[1].copy()
    with pytest.raises(ValueError, match="prepared"):
        v4.quant_lightning_indexer_prolog(*args, weight_format="NZ", prepared=p)


def test_quant_lightning_indexer_prolog_torch():
    torch = pytest.importorskip("torch")
    d = prolog_case(np.random.default_rng(12), 48, Q=128, N=16, D=128, H=256)
    args = [d[k] for k in PROLOG_ARGS]
    args[1], args[3] = nz_bytes(d["idx_wq_b"]), nz_bytes(d["weights_proj"])
    want = v4.quant_lightning_indexer_prolog(*args, weight_format="NZ")

    def tt(a):
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16) if a.dtype == BF16 else torch.from_numpy(a)
    got = v4.quant_lightning_indexer_prolog(*(tt(a) for a in args), weight_format="NZ")
    assert [g.dtype for g in got] == [torch.int8, torch.float16, torch.float16]
    for g, w in zip(got, want):
        same_bytes(g.numpy(), w)
    outs = (torch.zeros(48, 16, 128, dtype=torch.int8), torch.zeros(48, 16, dtype=torch.float16),
            torch.zeros(48, 16, dtype=torch.float16))
    v4.quant_lightning_indexer_prolog_kernel(*(tt(a) for a in args), *outs, weight_format="NZ")
    for g, w in zip(outs, want):  # written in place into the torch tensors
        same_bytes(g.numpy(), w)
