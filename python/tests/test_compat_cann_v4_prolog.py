"""dsops.compat._cann_v4_prolog (the PyPTO hc_pre and V4 MLA prologs) over the vendor test files' cases, with
their shapes, data distributions and comparison rule, against (a) dsops's own call with the vendor's settings
and (b) a NumPy formulation of the vendor's documented math and golden functions, written here."""
import functools

import numpy as np
import pytest

import dsops
from dsops.compat import cann as v4  # the V4 PyPTO calls, reached as the vendor tests reach them
from test_compat_cann import sinkhorn  # the Sinkhorn steps of the AscendC op's reference, here in fp32

BF16 = dsops.bfloat16
F32 = np.float32
pytestmark = pytest.mark.skipif(BF16 is None, reason="ml_dtypes is needed for bf16 arrays")


def vendor_compare(got, want, atol, rtol, ratio=0.005, name=""):
    """The vendor's rule, in exact arithmetic: no NaN / Inf; an element fails when |got − want| > atol +
    rtol·|want|; at most round(ratio · size) may fail."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert g.shape == w.shape, (name, g.shape, w.shape)
    assert np.isfinite(g).all(), f"{name}: NaN or Inf"
    bad = int((np.abs(g - w) > atol + rtol * np.abs(w)).sum())
    limit = round(ratio * w.size)
    assert bad <= limit, f"{name}: {bad} of {w.size} outside atol {atol} / rtol {rtol} (at most {limit})"


def fails_vendor_compare(got, want, atol, rtol, ratio=0.005):
    try:
        vendor_compare(got, want, atol, rtol, ratio)
    except AssertionError:
        return True
    return False


def same_bytes(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def to_torch(torch, a):
    a = np.ascontiguousarray(a)
    return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16) if a.dtype == BF16 else torch.from_numpy(a)


def from_torch(torch, t):
    return t.view(torch.int16).numpy().view(BF16) if t.dtype == torch.bfloat16 else t.numpy()


# ---- hc_pre -------------------------------------------------------------------------------------------------

Y_TOL, GATE_TOL = (1e-4, 0.0078125), (2.5e-5, 0.005)   # the vendor test: y; post and comb


def hc_pre_golden(x, fn, scale, base, hc=4, iters=20, eps=1e-6):
    """The documented math in fp32 (the vendor golden's precision): RMS denominator sqrt(mean(x²) + eps) over
    all hc·h inputs; mixes = (x · hc_fnᵀ) / rms; pre = σ(·) + eps, post = 2σ(·); comb: row softmax, + eps,
    column normalisation, then iters − 1 rounds of row and column normalisations with + eps in the
    denominators; y = Σ_i pre_i · x_i rounded to bf16."""
    T = x.shape[0]
    eps = F32(eps)
    xf = x.astype(F32).reshape(T, -1)
    mix = (xf @ fn.astype(F32).T) / np.sqrt((xf * xf).sum(-1, keepdims=True) / F32(xf.shape[1]) + eps)
    with np.errstate(over="ignore"):
        sig = lambda v: F32(1) / (F32(1) + np.exp(-v))
        pre = sig(mix[:, :hc] * scale[0] + base[:hc]) + eps
        post = F32(2) * sig(mix[:, hc:2 * hc] * scale[1] + base[hc:2 * hc])
    c = sinkhorn((mix[:, 2 * hc:] * scale[2] + base[2 * hc:]).reshape(T, hc, hc), iters, eps)
    y = (pre[:, :, None] * xf.reshape(T, hc, -1)).sum(1)
    return y.astype(BF16), post, c


def hc_data(rng, t, h=4096, hc=4, x_range=1.0, fn_scale=1.0):
    """The vendor test's data: x bf16, hc_fn, hc_scale and hc_base fp32, all uniform in (−1, 1)."""
    M = (2 + hc) * hc
    return (rng.uniform(-x_range, x_range, (t, hc, h)).astype(BF16),
            (rng.uniform(-1, 1, (M, hc * h)) * fn_scale).astype(F32), rng.uniform(-1, 1, 3).astype(F32),
            rng.uniform(-1, 1, M).astype(F32))


@pytest.mark.parametrize("entry,t", [("hc_pre_pypto", 16), ("hc_pre_kernel", 127), ("hc_pre_kernel_prefill", 127)])
def test_hc_pre_vendor_cases(entry, t):
    """test_hc_pre_inmodel(16) through the torch-op wrapper and test_hc_pre(127) through the decode kernel entry
    (and through the prefill entry, which the vendor test reaches with is_trans=True)."""
    x, fn, scale, base = hc_data(np.random.default_rng(t), t)
    if entry == "hc_pre_pypto":
        y, post, comb = v4.hc_pre_pypto(x, fn, scale, base, 4, 20, 1e-6)
    else:
        y, post, comb = np.zeros((t, 4096), BF16), np.zeros((t, 4), F32), np.zeros((t, 4, 4), F32)
        assert getattr(v4, entry)(x, fn, scale, base, y, post, comb) is None
    assert y.dtype == BF16 and post.dtype == F32 and comb.dtype == F32
    ry, rpost, rcomb = hc_pre_golden(x, fn, scale, base)
    vendor_compare(y.astype(F32), ry.astype(F32), *Y_TOL, name="y")
    vendor_compare(post, rpost, *GATE_TOL, name="post")
    vendor_compare(comb, rcomb, *GATE_TOL, name="comb")
    native = dsops.hc_pre(x=x, hc_fn=fn, hc_scale=scale, hc_base=base, sinkhorn_iters=20, norm_eps=1e-6,
                          hc_eps=1e-6)
    for got, name in ((y, "y"), (post, "post"), (comb, "comb")):
        assert same_bytes(got, native[name]), name


def test_hc_pre_one_eps_and_iterations():
    """hc_eps is also the RMS denominator's eps and hc_sinkhorn_iters the number of Sinkhorn rounds: with an eps
    that dominates the mean square, mapping hc_eps onto dsops's hc_eps alone (norm_eps left at 1e-6) fails the
    vendor's rule, as does the default iteration count; the prefill entry ignores hc_eps, as the vendor's does."""
    rng = np.random.default_rng(3)
    x, fn, scale, base = hc_data(rng, 24, h=512, x_range=0.2, fn_scale=1 / np.sqrt(4 * 512))
    eps, iters = 0.05, 2
    y, post, comb = v4.hc_pre_pypto(x, fn, scale, base, 4, iters, eps)
    ry, rpost, rcomb = hc_pre_golden(x, fn, scale, base, iters=iters, eps=eps)
    vendor_compare(y.astype(F32), ry.astype(F32), *Y_TOL, name="y")
    vendor_compare(post, rpost, *GATE_TOL, name="post")
    vendor_compare(comb, rcomb, *GATE_TOL, name="comb")
    split = dsops.hc_pre(x=x, hc_fn=fn, hc_scale=scale, hc_base=base, sinkhorn_iters=iters, norm_eps=1e-6,
                         hc_eps=eps)
    assert fails_vendor_compare(split["post"], rpost, *GATE_TOL)
    assert fails_vendor_compare(split["y"].astype(F32), ry.astype(F32), *Y_TOL)
    assert fails_vendor_compare(v4.hc_pre_pypto(x, fn, scale, base, 4, 20, eps)[2], rcomb, *GATE_TOL)
    out = np.zeros((24, 512), BF16), np.zeros((24, 4), F32), np.zeros((24, 4, 4), F32)
    v4.hc_pre_kernel_prefill(x, fn, scale, base, *out, 4, iters, eps)
    py, ppost, pcomb = hc_pre_golden(x, fn, scale, base, iters=iters, eps=1e-6)
    vendor_compare(out[0].astype(F32), py.astype(F32), *Y_TOL, name="prefill y")
    vendor_compare(out[1], ppost, *GATE_TOL, name="prefill post")
    vendor_compare(out[2], pcomb, *GATE_TOL, name="prefill comb")


def test_hc_pre_torch_prepare_and_errors():
    torch = pytest.importorskip("torch")
    x, fn, scale, base = hc_data(np.random.default_rng(4), 5, h=256)
    want = v4.hc_pre_pypto(x, fn, scale, base)
    got = v4.hc_pre(to_torch(torch, x), *(torch.from_numpy(a) for a in (fn, scale, base)))
    assert all(isinstance(g, torch.Tensor) for g in got) and got[0].dtype == torch.bfloat16
    for g, w in zip(got, want):
        assert same_bytes(from_torch(torch, g), w)
    outs = torch.zeros((5, 256), dtype=torch.bfloat16), torch.zeros((5, 4)), torch.zeros((5, 4, 4))
    v4.hc_pre_kernel(to_torch(torch, x), torch.from_numpy(fn), torch.from_numpy(scale), torch.from_numpy(base), *outs)
    for g, w in zip(outs, want):
        assert same_bytes(from_torch(torch, g), w)
    p = v4.hc_pre_pypto.prepare(x, fn, scale, base)
    for g, w in zip(v4.hc_pre_pypto(x, fn, scale, base, prepared=p), want):
        assert same_bytes(g, w)
    with pytest.raises(ValueError, match="prepared"):
        v4.hc_pre_pypto(x, fn.copy(), scale, base, prepared=p)
    with pytest.raises(ValueError, match="hc_mult"):
        v4.hc_pre_pypto(x, fn, scale, base, hc_mult=2)
    with pytest.raises(TypeError):
        v4.hc_pre_pypto(x.astype(F32), fn, scale, base)


# ---- MLA prolog ---------------------------------------------------------------------------------------------

OUT_TOL = (1e-4, 0.0078125)       # q, kv and bf16 qr; ratio 0.005
QR_TOL = (1, 0, 0)                # int8 qr: every element within 1
QR_SCALE_TOL = (2.5e-5, 0.005)    # qr_scale; ratio 0.005
FLASH = dict(H=4096, Q=1024, N=64, D=512)


def rms(v, eps, gamma=None):
    v = v.astype(F32)
    out = v / np.sqrt((v * v).mean(-1, keepdims=True) + F32(eps))
    return out if gamma is None else out * gamma.astype(F32)


def rope_interleaved(v, cos, sin):
    """The vendor's rotation of the rope slice: pairs (2j, 2j+1) are gathered into halves, rotated as
    [−x2, x1], scattered back; y = x·cos + rotated·sin elementwise in fp32, then bf16."""
    v = v.astype(F32)
    rotated = np.empty_like(v)
    rotated[..., 0::2], rotated[..., 1::2] = -v[..., 1::2], v[..., 0::2]
    return (v * cos + rotated * sin).astype(BF16)


def quant_rows(v, axis=-1):
    """The vendor's symmetric int8 quantiser: scale 127 / amax along axis, round half to even, dequantisation
    scale 1 / scale."""
    sq = F32(127) / np.abs(v).max(axis=axis, keepdims=True)
    return np.rint(v * sq).astype(np.int8), (F32(1) / sq).astype(F32)


def mla_golden(d, eps=1e-6, qr_from=None):
    """The vendor golden's chain. bf16 wq_b: every matmul rounded to bf16, qr = bf16(RMSNorm · gamma_cq). int8
    wq_b: fp32 x · wq_a and x · wkv, qr the per-token int8 of RMSNorm · gamma_cq, the int32 product dequantised
    by qr_scale then by wq_b_scale. Then a weightless per-head RMSNorm in fp32 rounded to bf16, RMSNorm(kv) ·
    gamma_ckv to bf16, and the interleaved rotation of the last 64 dims of each q head and of kv.
    qr_from = (qr, qr_scale [t, 1]): the int8 chain continues from these instead of its own."""
    x, T = d["x"].astype(F32), d["x"].shape[0]
    D = d["gamma_ckv"].shape[0]
    cos, sin = d["cos"].astype(F32), d["sin"].astype(F32)
    out = {}
    if d["wq_b"].dtype == np.int8:
        qr, qr_scale = quant_rows(rms(x @ d["wq_a"].astype(F32), eps, d["gamma_cq"]))
        out["qr_scale"] = qr_scale
        if qr_from is not None:
            out["qr"] = qr
            qr, qr_scale = qr_from
        # the int8 products summed in a float type that holds every partial sum exactly
        Q = qr.shape[1]
        acc_t = F32 if Q * 127 * 127 < 2 ** 24 else np.float64
        acc = (qr.astype(acc_t) @ d["wq_b"].astype(acc_t)).astype(F32)
        qb = (acc * qr_scale) * d["wq_b_scale"].reshape(1, -1)
        kv = rms(x @ d["wkv"].astype(F32), eps, d["gamma_ckv"]).astype(BF16)
    else:
        qr = rms((x @ d["wq_a"].astype(F32)).astype(BF16), eps, d["gamma_cq"]).astype(BF16)
        qb = (qr.astype(F32) @ d["wq_b"].astype(F32)).astype(BF16)
        kv = rms((x @ d["wkv"].astype(F32)).astype(BF16), eps, d["gamma_ckv"]).astype(BF16)
    q = rms(qb.reshape(T, -1, D), eps).astype(BF16)
    q[..., -64:] = rope_interleaved(q[..., -64:], cos[:, None], sin[:, None])
    kv[..., -64:] = rope_interleaved(kv[..., -64:], cos, sin)
    out.setdefault("qr", qr)
    out.update(q=q, kv=kv)
    return out


@functools.lru_cache(maxsize=None)
def mla_weights(int8, H, Q, N, D, seed=5):
    """The vendor test's weights: wq_a, wq_b, wkv bf16 uniform in (−0.1, 0.1); gamma_cq, gamma_ckv bf16 uniform
    in (−1, 1); int8: wq_b quantised per column (amax over q_lora_rank), wq_b_scale [n·d, 1]."""
    rng = np.random.default_rng(seed)
    w = dict(wq_a=rng.uniform(-0.1, 0.1, (H, Q)).astype(BF16), wq_b=rng.uniform(-0.1, 0.1, (Q, N * D)).astype(BF16),
             wkv=rng.uniform(-0.1, 0.1, (H, D)).astype(BF16), gamma_cq=rng.uniform(-1, 1, Q).astype(BF16),
             gamma_ckv=rng.uniform(-1, 1, D).astype(BF16))
    if int8:
        w["wq_b"], scale = quant_rows(w["wq_b"].astype(F32), axis=0)
        w["wq_b_scale"] = scale.reshape(N * D, 1)
    return w


def mla_data(t, int8, H, Q, N, D, seed=0):
    """Per call: token_x bf16 uniform in (−1, 1); cos, sin [t, 64] bf16 uniform in (−1, 1), independent per
    element as in the vendor test."""
    rng = np.random.default_rng(seed + t)
    d = dict(mla_weights(int8, H, Q, N, D))
    d.update(x=rng.uniform(-1, 1, (t, H)).astype(BF16), cos=rng.uniform(-1, 1, (t, 64)).astype(BF16),
             sin=rng.uniform(-1, 1, (t, 64)).astype(BF16))
    return d


def weight_form(d, form):
    """(wq_a, wq_b, wkv, weight_format) as the caller hands them: ND, NZ blocks, or NZ bytes in [in, out]."""
    ws = [d["wq_a"], d["wq_b"], d["wkv"]]
    if form == "NZ blocks":
        return [dsops.nd_to_fractal_nz(nd=a)["nz"] for a in ws] + [None]
    if form == "NZ bytes":
        return [dsops.nd_to_fractal_nz(nd=a)["nz"].reshape(a.shape) for a in ws] + ["NZ"]
    return ws + [None]


def call_mla(d, entry, form, eps=1e-6):
    """Through the entry the vendor case uses; returns the outputs as the graph entries return them."""
    wq_a, wq_b, wkv, fmt = weight_form(d, form)
    t, int8 = d["x"].shape[0], d["wq_b"].dtype == np.int8
    N_D, Q, D = d["wq_b"].shape[1], d["gamma_cq"].shape[0], d["gamma_ckv"].shape[0]
    if entry == "graph":
        if int8:
            return v4.mla_prolog_quant_pypto(d["x"], wq_a, wq_b, wkv, d["cos"], d["sin"], d["gamma_cq"],
                                             d["gamma_ckv"], d["wq_b_scale"], weight_format=fmt)
        assert eps == 1e-6
        return v4.mla_prolog_pypto(d["x"], wq_a, wq_b, wkv, d["cos"], d["sin"], d["gamma_cq"], d["gamma_ckv"],
                                   weight_format=fmt)
    # eager: outputs allocated by the caller, attrs / configs records
    q, kv = np.zeros((t, N_D // D, D), BF16), np.zeros((t, D), BF16)
    configs = v4.MlaPrologV4Configs(unroll_list=[128, 64, 32, 16, 1], cube_l1_reuse_setting={2: 4})
    if int8:
        qr, qs = np.zeros((t, Q), np.int8), np.zeros((t, 1), F32)
        r = v4.mla_prolog_v4(d["x"], wq_a, wq_b, wkv, d["gamma_cq"], d["gamma_ckv"], d["cos"], d["sin"],
                             d["wq_b_scale"], q, kv, qr, qs, v4.MlaPrologV4Attrs(eps=eps), configs,
                             v4.MlaTileConfigs(), weight_format=fmt)
        outs = q, kv, qr, qs
    else:
        qr = np.zeros((t, Q), BF16)
        r = v4.mla_prolog_v4(d["x"], wq_a, wq_b, wkv, d["gamma_cq"], d["gamma_ckv"], d["cos"], d["sin"], q, kv,
                             qr, v4.MlaPrologV4Attrs(eps=eps, layout_query="TND", layout_key="PA_BSND"), configs,
                             weight_format=fmt)
        outs = q, kv, qr
    assert r is None
    return outs


@functools.lru_cache(maxsize=None)
def out_in(int8, H, Q, N, D):
    """The cached weights in dsops's [out, in] form."""
    w = mla_weights(int8, H, Q, N, D)
    return {k: np.ascontiguousarray(w[k].T) for k in ("wq_a", "wq_b", "wkv")}


def native_mla(d, eps=1e-6, **params):
    """dsops's own call with the weights in its [out, in] form."""
    Q, D = d["wq_a"].shape[1], d["wkv"].shape[1]
    kw = dict(out_in(d["wq_b"].dtype == np.int8, d["x"].shape[1], Q, d["wq_b"].shape[1] // D, D), x=d["x"],
              gamma_cq=d["gamma_cq"], gamma_ckv=d["gamma_ckv"], rope_cos=d["cos"], rope_sin=d["sin"], eps_cq=eps,
              eps_ckv=eps, eps_qh=eps)
    if d["wq_b"].dtype == np.int8:
        kw["wq_b_scale"] = d["wq_b_scale"].reshape(-1)
    kw.update(params)
    return dsops.mla_prolog_v4(**kw)


def check_mla(d, outs, eps=1e-6):
    int8 = d["wq_b"].dtype == np.int8
    t, Q, D = d["x"].shape[0], d["gamma_cq"].shape[0], d["gamma_ckv"].shape[0]
    N = d["wq_b"].shape[1] // D
    q, kv, qr = outs[:3]
    assert q.shape == (t, N, D) and q.dtype == BF16 and kv.shape == (t, D) and kv.dtype == BF16
    assert qr.shape == (t, Q) and qr.dtype == (np.int8 if int8 else BF16)
    ref = mla_golden(d, eps)
    if int8:
        vendor_compare(qr, ref["qr"], *QR_TOL, name="qr")
        assert outs[3].shape == (t, 1) and outs[3].dtype == F32
        vendor_compare(outs[3], ref["qr_scale"], *QR_SCALE_TOL, name="qr_scale")
        # the vendor's qr rule lets an element near a rounding tie move by 1 (fp32 sums in another order), and
        # that shifts every q value of its token by more than q's tolerance: q is checked from the returned qr
        moved = np.any(qr != ref["qr"], axis=1)
        if moved.any():
            ref["q"][moved] = mla_golden(d, eps, qr_from=(qr, outs[3]))["q"][moved]
    vendor_compare(q.astype(F32), ref["q"].astype(F32), *OUT_TOL, name="q")
    vendor_compare(kv.astype(F32), ref["kv"].astype(F32), *OUT_TOL, name="kv")
    if not int8:
        vendor_compare(qr.astype(F32), ref["qr"].astype(F32), *OUT_TOL, name="qr")
    native = native_mla(d, eps)
    assert same_bytes(q, native["q"]) and same_bytes(kv, native["kv"]) and same_bytes(qr, native["qr"])
    if int8:
        assert same_bytes(outs[3].reshape(t), native["qr_scale"])


MLA_CASES = [
    # vendor file, vendor test, t, int8 wq_b, entry, weights
    ("test_mla_prolog_pypto", "test_t16_pa_nd_bf16", 16, False, "graph", "ND"),
    ("test_mla_prolog_pypto", "test_t16_pa_nd_bf16_eager", 16, False, "eager", "ND"),
    ("test_mla_prolog_quant_pypto", "test_t4_pa_nd_bf16", 4, True, "graph", "NZ bytes"),
    ("test_mla_prolog_quant_pypto", "test_t4_pa_nd_bf16_eager", 4, True, "eager", "NZ blocks"),
    ("test_mla_prolog_quant_pypto", "test_t16_pa_nd_bf16", 16, True, "graph", "NZ bytes"),
    ("test_mla_prolog_quant_pypto", "test_t16_pa_nd_bf16_eager", 16, True, "eager", "NZ blocks"),
    ("test_mla_prolog_quant_pypto", "test_t512_pa_nd_bf16", 512, True, "graph", "NZ bytes"),
]


@pytest.mark.parametrize("file,case,t,int8,entry,form", MLA_CASES, ids=[f"{c[0]}::{c[1]}" for c in MLA_CASES])
def test_mla_prolog_vendor_cases(file, case, t, int8, entry, form):
    """The vendor's cases at the V4-Flash sizes (h 4096, q_lora_rank 1024, 64 heads of 512, rope 64); the int8
    file's weights are NZ on the device, here NZ bytes in [in, out] tensors (graph entry) or NZ blocks (eager)."""
    d = mla_data(t, int8, **FLASH)
    check_mla(d, call_mla(d, entry, form))


SMALL = dict(H=256, Q=64, N=2, D=128)


@pytest.mark.parametrize("int8", [False, True])
@pytest.mark.parametrize("form", ["ND", "NZ blocks", "NZ bytes"])
def test_mla_prolog_small_shapes(int8, form):
    """Shapes the vendor op refuses and dsops takes, every weight form, both entries."""
    d = mla_data(5, int8, **SMALL)
    check_mla(d, call_mla(d, "graph", form))
    check_mla(d, call_mla(d, "eager", form))


@pytest.mark.parametrize("int8", [False, True])
def test_mla_prolog_mapping_is_checked(int8):
    """The reference tells the vendor's settings from their neighbours: attrs.eps reaches all three RMSNorms
    (an eps of the size of the mean squares), and the rotation is interleaved pairs, not halves, not
    interleaved-in-halves-out, not the inverse rotation."""
    d = mla_data(6, int8, **SMALL)
    eps = 0.25
    check_mla(d, call_mla(d, "eager", "ND", eps=eps), eps=eps)
    ref, ref_default = mla_golden(d, eps), mla_golden(d)
    got = call_mla(d, "eager", "ND", eps=eps)
    for i, name in enumerate(("q", "kv")):
        assert fails_vendor_compare(got[i].astype(F32), ref_default[name].astype(F32), *OUT_TOL), name
    for one in ("eps_cq", "eps_ckv", "eps_qh"):  # each of dsops's three epsilons must take the vendor's one
        other = native_mla(d, eps, **{one: 1e-6})
        assert any(fails_vendor_compare(other[n].astype(F32), ref[n].astype(F32), *OUT_TOL) for n in ("q", "kv")), one
        if int8 and one == "eps_cq":
            assert fails_vendor_compare(other["qr_scale"], ref["qr_scale"].reshape(-1), *QR_SCALE_TOL)
    ref = mla_golden(d)
    for params in (dict(rope_mode="half"), dict(rope_mode="interleaved_in_half_out"), dict(rope_inverse=True)):
        other = native_mla(d, **params)
        for name in ("q", "kv"):
            assert fails_vendor_compare(other[name].astype(F32), ref[name].astype(F32), *OUT_TOL), (params, name)


def test_mla_prolog_torch():
    torch = pytest.importorskip("torch")
    for int8 in (False, True):
        d = mla_data(3, int8, **SMALL)
        want = call_mla(d, "graph", "NZ bytes")
        wq_a, wq_b, wkv, fmt = weight_form(d, "NZ bytes")
        args = [to_torch(torch, a) for a in (d["x"], wq_a, wq_b, wkv, d["cos"], d["sin"], d["gamma_cq"],
                                             d["gamma_ckv"])]
        if int8:
            got = v4.mla_prolog_quant(*args, to_torch(torch, d["wq_b_scale"]), weight_format=fmt)
        else:
            got = v4.mla_prolog(*args, weight_format=fmt)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert isinstance(g, torch.Tensor) and same_bytes(from_torch(torch, g), w)
        # the eager entry writes torch outputs in place
        t, Q, D = 3, SMALL["Q"], SMALL["D"]
        outs = [torch.zeros((t, SMALL["N"], D), dtype=torch.bfloat16), torch.zeros((t, D), dtype=torch.bfloat16),
                torch.zeros((t, Q), dtype=torch.int8 if int8 else torch.bfloat16)]
        attrs, configs = v4.MlaPrologV4Attrs(eps=1e-6), v4.MlaPrologV4Configs()
        head = args[:4] + [args[6], args[7], args[4], args[5]]
        if int8:
            outs.append(torch.zeros((t, 1)))
            v4.mla_prolog_v4(*head, to_torch(torch, d["wq_b_scale"]), *outs, attrs, configs, v4.MlaTileConfigs(),
                             weight_format=fmt)
        else:
            v4.mla_prolog_v4(*head, *outs, attrs, configs, weight_format=fmt)
        for g, w in zip(outs, want):
            assert same_bytes(from_torch(torch, g), w)


def test_mla_prolog_prepare_and_errors():
    """.prepare converts and packs the weights once; calls given the same weight objects reuse them and give the
    plain call's bytes; other weight objects are refused; wrong dtypes and rope widths are rejected."""
    for int8 in (False, True):
        d = mla_data(4, int8, **SMALL)
        wq_a, wq_b, wkv, fmt = weight_form(d, "NZ blocks")
        head = (d["x"], wq_a, wq_b, wkv, d["cos"], d["sin"], d["gamma_cq"], d["gamma_ckv"])
        tail = (d["wq_b_scale"],) if int8 else ()
        entry = v4.mla_prolog_quant_pypto if int8 else v4.mla_prolog_pypto
        p = entry.prepare(*head, *tail)
        assert isinstance(p, v4.PreparedWeights)
        for g, w in zip(entry(*head, *tail, prepared=p), entry(*head, *tail)):
            assert same_bytes(g, w)
        with pytest.raises(ValueError, match="prepared"):
            entry(d["x"], wq_a.copy(), *head[2:], *tail, prepared=p)
        with pytest.raises(TypeError):  # the other variant's weights
            (v4.mla_prolog_pypto(*head) if int8 else
             v4.mla_prolog_quant_pypto(*head, np.ones((wq_b.size, 1), F32)))
    narrow = d["cos"][:, :32].copy()
    with pytest.raises(NotImplementedError, match="64"):
        v4.mla_prolog_quant_pypto(d["x"], wq_a, wq_b, wkv, narrow, narrow, d["gamma_cq"], d["gamma_ckv"],
                                  d["wq_b_scale"])
