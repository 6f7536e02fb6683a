"""dsops.compat.cann against a NumPy formulation of the vendor operators, written here from their documented
semantics, over the vendor test files' cases (shapes, data distributions, comparison rule)."""
import numpy as np
import pytest

import dsops
from dsops.compat import cann

BF16 = dsops.bfloat16
pytestmark = pytest.mark.skipif(BF16 is None, reason="ml_dtypes is needed for bf16 arrays")


def paged_keys(rng, lens, block_size, D):
    """The vendor test's cache: each sequence's keys in a random permutation of whole blocks, −1 in unused table
    entries; returns (key [block_num, block_size, 1, D] bf16, block_table, the keys as rows per sequence)."""
    need = [-(-int(n) // block_size) for n in lens]
    perm = rng.permutation(sum(need)).astype(np.int32)
    table = np.full((len(lens), max(need + [1])), -1, np.int32)
    key = rng.standard_normal((max(sum(need), 1), block_size, 1, D)).astype(BF16)
    rows, used = [], 0
    for b, n in enumerate(need):
        table[b, :n] = perm[used:used + n]
        used += n
        rows.append(key[table[b, :n], :, 0].reshape(-1, D)[:lens[b]].astype(np.float32))
    return key, table, rows


def index_topk(q, w, rows, S1, K, causal):
    """[B, S1, K] reference positions (−1 past the keys a token sees) and the scores they were chosen by."""
    B = q.shape[0]
    idx = np.full((B, S1, K), -1, np.int64)
    scores = []
    for b in range(B):
        s = np.einsum("shd,nd->shn", q[b].astype(np.float32), rows[b])
        score = (np.maximum(s, 0) * w[b].astype(np.float32)[:, :, None]).sum(1)  # [S1, L]
        scores.append(score)
        for t in range(S1):
            n = len(rows[b]) - (S1 - 1 - t) if causal else len(rows[b])
            n = max(n, 0)
            order = np.argsort(-score[t, :n], kind="stable")[:K]
            idx[b, t, :len(order)] = order
    return idx, scores


def assert_topk(got, want, S1):
    """The vendor test's rule: per token at most one position outside the reference set; the −1 tail exact."""
    assert got.dtype == np.int32
    B = got.shape[0]
    for b in range(B):
        for t in range(S1):
            g, r = got[b, t, 0], want[b, t]
            np.testing.assert_array_equal(g == -1, r == -1)
            valid = g[g >= 0]
            assert len(set(valid.tolist())) == len(valid)
            assert len(set(valid.tolist()) - set(r[r >= 0].tolist())) <= 1


# the vendor's cases (DynamicIndexerTopk): b 4 s1 1 at 64K keys; b 48 s1 4 over mixed lengths (here divided by 16,
# as the CI-sized registry case v32_li_bf16_b48_s4_mixed_ci); b 2 s1 3 at 122 keys; and the example's b 32 s1 3
MIXED = [128 * 1024, 64 * 1024, 64 * 1024 + 111, 32 * 1024 + 11, 16 * 1024 + 1, 8 * 1024 + 2, 2 * 1024 + 7,
         1024 + 5, 512 * 4, 256, 127, 32]


@pytest.mark.parametrize("B,S1,lens", [
    (4, 1, [64 * 1024] * 4),
    (48, 4, [max(n // 16, 1) for n in MIXED] * 4),
    (2, 3, [122, 122]),
    (32, 3, "random"),
])
def test_npu_lightning_indexer_pto(B, S1, lens):
    rng = np.random.default_rng(B * 10 + S1)
    N1, D, bs, K = 64, 128, 128, 2048
    if lens == "random":
        lens = rng.integers(1, 8193, B).tolist()
    q = rng.standard_normal((B, S1, N1, D)).astype(BF16)
    w = rng.standard_normal((B, S1, N1)).astype(BF16)
    key, table, rows = paged_keys(rng, lens, bs, D)
    got = cann.npu_lightning_indexer_pto(q, key, w, actual_seq_lengths_key=np.array(lens, np.int32),
                                         block_table=table, sparse_count=K)
    assert got.shape == (B, S1, 1, K)
    want, _ = index_topk(q, w, rows, S1, K, causal=True)
    assert_topk(got, want, S1)


def test_npu_lightning_indexer_pto_no_mask():
    rng = np.random.default_rng(1)
    B, S1, N1, D, bs, K = 3, 2, 8, 64, 16, 40
    lens = [37, 1, 300]
    q = rng.standard_normal((B, S1, N1, D)).astype(BF16)
    w = rng.standard_normal((B, S1, N1)).astype(BF16)
    key, table, rows = paged_keys(rng, lens, bs, D)
    got = cann.npu_lightning_indexer_pto(q, key, w, actual_seq_lengths_key=np.array(lens, np.int32),
                                         block_table=table, sparse_count=K, sparse_mode=0)
    want, _ = index_topk(q, w, rows, S1, K, causal=False)
    assert_topk(got, want, S1)
    with pytest.raises(ValueError):
        cann.npu_lightning_indexer_pto(q, key, w, actual_seq_lengths_key=np.array(lens, np.int32),
                                       block_table=table, sparse_mode=1)


def test_npu_lightning_indexer_pto_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    B, S1, N1, D, bs = 2, 2, 4, 32, 8
    lens = [20, 5]
    q = rng.standard_normal((B, S1, N1, D)).astype(BF16)
    w = rng.standard_normal((B, S1, N1)).astype(BF16)
    key, table, _ = paged_keys(rng, lens, bs, D)
    want = cann.npu_lightning_indexer_pto(q, key, w, actual_seq_lengths_key=np.array(lens, np.int32),
                                          block_table=table, sparse_count=16)
    t = lambda a: torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    got = cann.npu_lightning_indexer_pto(t(q), t(key), t(w), actual_seq_lengths_key=torch.tensor(lens, dtype=torch.int32),
                                         block_table=torch.from_numpy(table), sparse_count=16)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.int32
    np.testing.assert_array_equal(got.numpy(), want)


# ---- npu_lightning_indexer_prolog_pto ---------------------------------------------------------------------------

def bf16(a):
    return np.asarray(a, np.float32).astype(BF16).astype(np.float32)


def rope_interleaved_in_half_out(v, cos, sin):
    """The vendor build's rotation of the first 64 dims: pairs (2j, 2j+1) regrouped as halves, then
    y = x·cos + rotate_half(x)·sin with rotate_half(x) = [−x2, x1]; bf16 result."""
    r = v[..., :64]
    x = np.concatenate([r[..., 0::2], r[..., 1::2]], axis=-1)
    rot = np.concatenate([-x[..., 32:], x[..., :32]], axis=-1)
    return np.concatenate([bf16(x * cos + rot * sin), v[..., 64:]], axis=-1)


def quant_int8(v):
    """Per row: scale 127 / amax, values rounded to nearest even, dequantisation scale its inverse as fp16."""
    s = 127.0 / np.abs(v).max(axis=-1, keepdims=True)
    return np.rint(v * s).astype(np.int8), (1.0 / s).astype(np.float16)[..., 0]


def indexer_prolog_reference(d):
    T, N, D = d["T"], d["N"], d["D"]
    q = (d["q_norm"].astype(np.int64) @ d["wq_b"].astype(np.int64)).astype(np.float32)
    q = bf16(q * d["q_norm_scale"] * d["wq_b_scale"].reshape(1, -1)).reshape(T, N, D)
    q = rope_interleaved_in_half_out(q, d["cos"][:, None].astype(np.float32), d["sin"][:, None].astype(np.float32))
    q = bf16(q @ d["hadamard_q"].astype(np.float32))
    q8, qs = quant_int8(q)
    k = d["x"].astype(np.float32) @ d["wk"].astype(np.float32)
    mean = k.mean(-1, keepdims=True)
    var = ((k - mean) ** 2).mean(-1, keepdims=True)
    k = bf16((k - mean) / np.sqrt(var + 1e-6) * d["gamma"].astype(np.float32) + d["beta"].astype(np.float32))
    k = rope_interleaved_in_half_out(k, d["cos"].astype(np.float32), d["sin"].astype(np.float32))
    k8, ks = quant_int8(bf16(k @ d["hadamard_k"].astype(np.float32)))
    w = (bf16(d["x"].astype(np.float32) @ d["w_proj"].astype(np.float32)) * (N ** -0.5) * (D ** -0.5)).astype(np.float16)
    return q8, qs, w, k8, ks


def assert_vendor_close(got, want):
    """The vendor test's rule: np.isclose(rtol 0.005, atol 1e-4) on at least 99.5 % of the elements."""
    ok = np.isclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=0.005, atol=1e-4, equal_nan=True)
    assert ok.mean() >= 0.995, f"{(~ok).sum()} of {ok.size} outside"


def prolog_data(rng, B, S1, S2, H=7168, Q=1536, N=64, D=128, bs=128):
    """The vendor test's data: x U(-1, 1); q_norm int8 U[-128, 128); scales U(-1, 1); weights U(-1, 1); random
    rotation angles; 'Hadamard' matrices U(-1, 1); caches of random int8 / fp16 with whole blocks permuted; each
    sequence's S1 new tokens at its last positions."""
    T = B * S1
    u = lambda *shape: rng.uniform(-1, 1, shape)
    ang = rng.uniform(0, 2 * np.pi, (T, 64))
    need = -(-S2 // bs)
    perm = rng.permutation(B * need)
    table = perm.reshape(B, need)
    pos = np.arange(S2 - S1, S2)
    index = (table[:, pos // bs] * bs + pos % bs).reshape(T).astype(np.int64)
    return dict(T=T, N=N, D=D, x=u(T, H).astype(BF16), q_norm=rng.integers(-128, 128, (T, Q)).astype(np.int8),
                q_norm_scale=u(T, 1).astype(np.float32), wq_b=rng.integers(-128, 128, (Q, N * D)).astype(np.int8),
                wq_b_scale=u(N * D, 1).astype(np.float32), wk=u(H, D).astype(BF16), w_proj=u(H, N).astype(BF16),
                gamma=np.ones(D, BF16), beta=np.zeros(D, BF16), cos=np.cos(ang).astype(BF16),
                sin=np.sin(ang).astype(BF16), hadamard_q=u(D, D).astype(BF16), hadamard_k=u(D, D).astype(BF16),
                k_cache=rng.integers(-128, 128, (B * need, bs, 1, D)).astype(np.int8),
                k_scale_cache=u(B * need, bs, 1).astype(np.float16), index=index)


def call_prolog(d, nz):
    """nz: False (ND weights), True (NZ blocks) or "bytes" (NZ bytes in ND-shaped arrays, as the vendor's files)."""
    if nz == "bytes":
        w = lambda a: dsops.nd_to_fractal_nz(nd=a)["nz"].reshape(a.shape)
    else:
        w = (lambda a: dsops.nd_to_fractal_nz(nd=a)["nz"]) if nz else (lambda a: a)
    return cann.npu_lightning_indexer_prolog_pto(
        d["x"], d["q_norm"], d["q_norm_scale"], w(d["wq_b"]), d["wq_b_scale"], w(d["wk"]), w(d["w_proj"]),
        d["gamma"], d["beta"], d["cos"], d["sin"], d["hadamard_q"], d["hadamard_k"], d["k_cache"],
        d["k_scale_cache"], d["index"], 1e-6, weight_format="NZ" if nz == "bytes" else None)


@pytest.mark.parametrize("nz", [True, False, "bytes"])
def test_npu_lightning_indexer_prolog_pto(nz):
    """The vendor test's case: b 4, s1 2 over 64K cached tokens, H 7168, q_lora_rank 1536, 64 heads of 128."""
    rng = np.random.default_rng(11)
    d = prolog_data(rng, B=4, S1=2, S2=64 * 1024)
    old_cache, old_scales = d["k_cache"].copy(), d["k_scale_cache"].copy()
    q8, qs, w = call_prolog(d, nz)
    rq8, rqs, rw, rk8, rks = indexer_prolog_reference(d)
    assert q8.shape == (d["T"], 64, 128) and q8.dtype == np.int8
    assert qs.shape == (d["T"], 64) and qs.dtype == np.float16 and w.dtype == np.float16
    assert_vendor_close(q8, rq8)
    assert_vendor_close(qs, rqs)
    assert_vendor_close(w, rw)
    rows = d["index"]
    flat, flat_s = d["k_cache"].reshape(-1, 128), d["k_scale_cache"].reshape(-1)
    assert_vendor_close(flat[rows], rk8)
    assert_vendor_close(flat_s[rows], rks)
    others = np.setdiff1d(np.arange(flat.shape[0]), rows)  # every other row keeps its bytes
    np.testing.assert_array_equal(flat[others], old_cache.reshape(-1, 128)[others])
    np.testing.assert_array_equal(flat_s[others].view(np.uint16), old_scales.reshape(-1)[others].view(np.uint16))


def test_npu_lightning_indexer_prolog_pto_torch():
    torch = pytest.importorskip("torch")
    d = prolog_data(np.random.default_rng(12), B=2, S1=3, S2=300, H=256, Q=64, N=4, bs=16)
    t = dict(d, k_cache=d["k_cache"].copy(), k_scale_cache=d["k_scale_cache"].copy())
    want = call_prolog(d, nz=True)

    def tt(a):
        a = np.asarray(a)
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16) if a.dtype == BF16 else torch.from_numpy(a)
    t = {k: tt(v) if isinstance(v, np.ndarray) else v for k, v in t.items()}
    got = call_prolog(t, nz=False)
    for g, w in zip(got, want):
        assert isinstance(g, torch.Tensor)
        np.testing.assert_array_equal(g.numpy(), w)
    np.testing.assert_array_equal(t["k_cache"].numpy(), d["k_cache"])  # the torch cache updated in place


# ---- sparse_flash_attention_quant_d / _p ------------------------------------------------------------------------

def sfa_data(rng, B, N, S1, lens, int8, bs=128, topk=2048):
    """The vendor test file's data: q, latent and rope U(-1, 1) bf16; the latent quantised per 128 values with scale
    amax / 127 (int8 cases); whole blocks in a random permutation; a sequence of L ≤ topk tokens lists 0 … L − 1
    then zeros, a longer one a random permutation of its positions."""
    need = [-(-n // bs) for n in lens]
    nb = sum(need)
    perm = rng.permutation(nb).astype(np.int32)
    table = np.full((B, max(need)), -1, np.int32)
    used = 0
    for b, n in enumerate(need):
        table[b, :n] = perm[used:used + n]
        used += n
    lists = np.zeros((B, S1, topk), np.int32)
    for b, L in enumerate(lens):
        for s in range(S1):
            lists[b, s, :min(L, topk)] = np.arange(L) if L < topk else rng.permutation(L)[:topk]
    q = rng.uniform(-1, 1, (B, S1, N, 576)).astype(BF16)
    kn = rng.uniform(-1, 1, (nb * bs, 4, 128)).astype(BF16).astype(np.float32)
    scales = np.maximum(np.abs(kn).max(-1, keepdims=True), 1e-8) / 127.0
    kn8 = np.clip(np.rint(kn / scales), -128, 127).astype(np.int8)
    return dict(q=q, kn=(kn8 if int8 else kn.astype(BF16)).reshape(nb * bs, 512),
                scales=scales.astype(np.float32).reshape(nb * bs, 4), kr=rng.uniform(-1, 1, (nb * bs, 64)).astype(BF16),
                lists=lists.reshape(B * S1, topk), table=table, lens=np.array(lens, np.int32), bs=bs, topk=topk)


def sfa_reference(d, scale, tile=2048):
    """Per query: its first min(L − (S1 − 1 − s), topk) list entries; K = [latent ; rope], V = latent (int8:
    bf16(int8 · scale)); online softmax over tiles of `tile` keys with bf16 probabilities in P·V; bf16 out."""
    B, S1, N, _ = d["q"].shape
    kn = d["kn"].astype(np.float32)
    if d["kn"].dtype == np.int8:
        kn = bf16(kn.reshape(-1, 4, 128) * d["scales"][..., None]).reshape(-1, 512)
    kr, bs = d["kr"].astype(np.float32), d["bs"]
    out = np.zeros((B, S1, N, 512), np.float32)
    for b in range(B):
        for s in range(S1):
            cnt = min(max(int(d["lens"][b]) - S1 + 1 + s, 0), d["topk"])
            idx = d["lists"][b * S1 + s, :cnt]
            rows = d["table"][b, idx // bs] * bs + idx % bs
            K, V = np.concatenate([kn[rows], kr[rows]], -1), kn[rows]
            S = d["q"][b, s].astype(np.float32) @ K.T * np.float32(scale)
            m, l, O = None, None, None
            for t0 in range(0, cnt, tile):
                St = S[:, t0:t0 + tile]
                mt = St.max(-1, keepdims=True)
                mn = mt if m is None else np.maximum(m, mt)
                w = np.exp(St - mn)
                Ot = bf16(w) @ V[t0:t0 + tile]
                if m is None:
                    l, O = w.sum(-1, keepdims=True), Ot
                else:
                    a = np.exp(m - mn)
                    l, O = l * a + w.sum(-1, keepdims=True), O * a + Ot
                m = mn
            if cnt:
                out[b, s] = O / l
    return out.astype(BF16)


@pytest.mark.parametrize("name,B,S1,lens,int8", [
    ("sfa_bf16_b4_s2_seq64K_total_int8_d", 4, 2, [65536, 16381, 666, 15], True),
    ("sfa_bf16_b4_s2_seq64K_per_int8_d", 4, 2, [65536] * 4, True),
    ("sfa_bf16_b1_s256_seq2047_int8_p", 1, 256, [2047], True),
    ("bf16 keys, a short sequence (not a vendor case)", 2, 3, [3000, 2], False),
])
def test_sparse_flash_attention_quant(name, B, S1, lens, int8):
    N = 128 if B * S1 < 256 else 16  # the prefill case with 16 of its 128 heads, to keep the NumPy side quick
    rng = np.random.default_rng(len(name))
    d = sfa_data(rng, B, N, S1, lens, int8)
    scale = 576 ** -0.5
    out = np.zeros((B, S1, N, 512), BF16)
    entry = cann.sparse_flash_attention_quant_p if name.endswith("_p") else cann.sparse_flash_attention_quant_d
    got = entry(d["q"][..., :512].reshape(-1, 512), d["q"][..., 512:].reshape(-1, 64), d["kn"], d["kr"], d["scales"],
                d["lists"], d["table"], d["lens"], out, N, 1, scale, d["topk"], d["bs"], d["table"].shape[1],
                cann.SaTileShapeConfig())
    assert got is out
    assert_vendor_close(out.astype(np.float32), sfa_reference(d, scale).astype(np.float32))


def test_sparse_flash_attention_quant_torch():
    torch = pytest.importorskip("torch")
    d = sfa_data(np.random.default_rng(9), 2, 4, 2, [300, 40], True, bs=16, topk=64)
    args = [d["q"][..., :512].reshape(-1, 512), d["q"][..., 512:].reshape(-1, 64), d["kn"], d["kr"], d["scales"],
            d["lists"], d["table"], d["lens"]]
    want = np.zeros((2, 2, 4, 512), BF16)
    cann.sparse_flash_attention_quant_d(*args, want, 4, 1, 0.05, 64, 16, d["table"].shape[1])

    def tt(a):
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16) if a.dtype == BF16 \
            else torch.from_numpy(np.ascontiguousarray(a))
    out = torch.zeros((2, 2, 4, 512), dtype=torch.bfloat16)
    got = cann.sparse_flash_attention_quant_d(*[tt(a) for a in args], out, 4, 1, 0.05, 64, 16, d["table"].shape[1])
    assert got is out
    np.testing.assert_array_equal(out.view(torch.int16).numpy(), want.view(np.int16))


# ---- npu_hc_pre / npu_hc_post -------------------------------------------------------------------------------------

def vendor_relative_pass(got, want, thd=0.005, pct=0.005):
    """The AscendC test files' rule: an element fails when it differs by thd or more and by more than thd relative to
    max(|got|, |want|, 2^-14 / thd); at most a fraction pct of the elements may fail."""
    got, want = np.asarray(got, np.float64).ravel(), np.asarray(want, np.float64).ravel()
    a = np.abs(got - want)
    rel = np.where(a < thd, a, a / np.maximum(np.maximum(np.abs(got), np.abs(want)), 2.0 ** -14 / thd))
    return (rel > thd).mean() <= pct


def hc_pre_reference(x, fn, scale, base, hc=4, iters=20, eps=1e-6):
    """The mHC pre-processing in float64: RMS-scaled mixes, sigmoid gates, softmax + Sinkhorn (columns first)."""
    T = x.shape[0]
    xf = x.astype(np.float64).reshape(T, -1)
    mixes = (xf @ fn.astype(np.float64).T) / np.sqrt((xf ** 2).mean(-1, keepdims=True) + eps)
    sig = lambda v: 1 / (1 + np.exp(-v))
    pre = sig(mixes[:, :hc] * scale[0] + base[:hc]) + eps
    post = 2 * sig(mixes[:, hc:2 * hc] * scale[1] + base[hc:2 * hc])
    c = sinkhorn(mixes[:, 2 * hc:].reshape(T, hc, hc) * scale[2] + base[2 * hc:].reshape(hc, hc), iters, eps)
    y = (pre[:, :, None] * x.astype(np.float64)).sum(1)
    return y, post, c


def sinkhorn(c, iters, eps):
    """comb from its logits [T, hc, hc], in their precision: row softmax + eps, a column normalisation, then
    iters − 1 rounds of row and column normalisations with eps in the denominators."""
    c = np.exp(c - c.max(-1, keepdims=True))
    c = c / c.sum(-1, keepdims=True) + eps
    c = c / (c.sum(-2, keepdims=True) + eps)
    for _ in range(iters - 1):
        c = c / (c.sum(-1, keepdims=True) + eps)
        c = c / (c.sum(-2, keepdims=True) + eps)
    return c


@pytest.mark.parametrize("shape", [(1, 192, 4, 4096), (1, 192, 4, 7168), (1, 4, 4096), (128, 4, 7168), (777, 4, 4096)])
def test_npu_hc_pre(shape):
    """The vendor test file's cases (b 1, s 192, d 4096 and 7168; bs 1 and 128) and one odd token count, with its
    data: everything uniform in (0, 2)."""
    rng = np.random.default_rng(shape[-3] + shape[-1])
    x = rng.uniform(0, 2, shape).astype(BF16)
    fn = rng.uniform(0, 2, (24, 4 * shape[-1])).astype(np.float32)
    scale, base = rng.uniform(0, 2, 3).astype(np.float32), rng.uniform(0, 2, 24).astype(np.float32)
    y, post, comb = cann.npu_hc_pre(x, fn, scale, base)
    lead = shape[:-2]
    assert y.shape == lead + (shape[-1],) and y.dtype == BF16
    assert post.shape == lead + (4,) and comb.shape == lead + (4, 4) and comb.dtype == np.float32
    ry, rpost, rcomb = hc_pre_reference(x.reshape(-1, 4, shape[-1]), fn, scale.astype(np.float64), base.astype(np.float64))
    assert vendor_relative_pass(y.astype(np.float32).reshape(-1, shape[-1]), ry)
    assert vendor_relative_pass(post.reshape(-1, 4), rpost)
    assert vendor_relative_pass(comb.reshape(-1, 4, 4), rcomb, pct=0.02)


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("shape", [(1, 192, 4, 4096), (64, 4, 7168), (5, 3, 100)])
def test_npu_hc_post(shape, dtype):
    rng = np.random.default_rng(len(shape) + shape[-1])
    dt = BF16 if dtype == "bf16" else np.float32
    d, hc, lead = shape[-1], shape[-2], shape[:-2]
    x = rng.uniform(-1, 1, lead + (d,)).astype(dt)
    res = rng.uniform(-1, 1, shape).astype(dt)
    post = rng.uniform(0, 2, lead + (hc,)).astype(np.float32)
    comb = rng.uniform(0, 1, lead + (hc, hc)).astype(np.float32)
    y = cann.npu_hc_post(x, res, post, comb)
    assert y.shape == shape and y.dtype == dt
    want = post[..., None] * x[..., None, :].astype(np.float64) + \
        (comb[..., None].astype(np.float64) * res[..., :, None, :].astype(np.float64)).sum(-3)
    assert vendor_relative_pass(y.astype(np.float32), want)


def test_npu_hc_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    x = rng.uniform(0, 2, (3, 4, 256)).astype(BF16)
    fn, scale, base = (rng.uniform(0, 2, s).astype(np.float32) for s in ((24, 1024), 3, 24))
    want = cann.npu_hc_pre(x, fn, scale, base)
    tx = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
    got = cann.npu_hc_pre(tx, torch.from_numpy(fn), torch.from_numpy(scale), torch.from_numpy(base))
    assert got[0].dtype == torch.bfloat16
    np.testing.assert_array_equal(got[0].view(torch.int16).numpy(), want[0].view(np.int16))
    np.testing.assert_array_equal(got[2].numpy(), want[2])
    out = cann.npu_hc_post(got[0], tx, got[1], got[2])
    np.testing.assert_array_equal(out.view(torch.int16).numpy(), cann.npu_hc_post(want[0], x, want[1], want[2]).view(np.int16))


# ---- npu_quant_lightning_indexer ----------------------------------------------------------------------------------

def quant_li_reference(q, qs, w, keys, ks, S1, ratio, causal, K):
    """The vendor's documented score Σ_h w_h · ReLU(sQ_h · sK_j · (Q_h · K_j)) in float64 over each token's visible
    compressed keys; returns per token (positions in decreasing score, all scores)."""
    rows = []
    for b in range(len(keys)):
        dots = np.einsum("shd,nd->shn", q[b].astype(np.float64), keys[b].astype(np.float64))
        score = (w[b].astype(np.float64)[:, :, None] * np.maximum(
            qs[b].astype(np.float64)[:, :, None] * ks[b].astype(np.float64)[None, None, :] * dots, 0)).sum(1)
        L_all = keys[b].shape[0] * ratio
        for s in range(S1):
            L = (L_all - (S1 - 1 - s)) if causal else L_all
            n = max(L, 0) // ratio
            order = np.argsort(-score[s, :n], kind="stable")[:K]
            rows.append((order, score[s, :n]))
    return rows


def assert_quant_topk(got, ref, K, rel=2e-3):
    """Valid entries first, −1 after; each position outside the reference's top-K must score within rel of the
    reference's K-th score (fp16 roundings of the int8 arithmetic move near-ties)."""
    for g, (order, score) in zip(got.reshape(-1, K), ref):
        valid = g[g >= 0]
        assert len(valid) == len(order) and np.all(g[len(valid):] == -1)
        assert len(set(valid.tolist())) == len(valid)
        if len(order) == 0:
            continue
        kth = score[order[-1]]
        for j in set(valid.tolist()) - set(order.tolist()):
            assert abs(score[j] - kth) <= rel * abs(kth), (j, score[j], kth)


@pytest.mark.parametrize("s2,K,mode,ratio", [(512, 512, 0, 1), (512, 512, 3, 4), (8192, 512, 3, 4),
                                             (8192, 2048, 3, 1)])
def test_npu_quant_lightning_indexer(s2, K, mode, ratio):
    """The vendor documentation's examples (b 24, s1 4, 512 keys; sparse_mode 0 with ratio 1, 3 with ratio 4) and
    the same data over 8192 tokens, where the top-k is a real selection; its data: int8 from uniform(−128, 127),
    scales uniform(0, 10), weights uniform(0, 0.01), a block table of consecutive blocks."""
    rng = np.random.default_rng(s2 + K + mode)
    b, s1, n1, d, bs = 24 if s2 == 512 else 4, 4, 64, 128, 128
    nblk = -(-s2 // bs)
    table = np.arange(b * nblk, dtype=np.int32).reshape(b, nblk)
    key = rng.uniform(-128, 127, (b * nblk, bs, 1, d)).astype(np.int8)
    kscale = rng.uniform(0, 10, (b * nblk, bs, 1)).astype(np.float16)
    q = rng.uniform(-128, 127, (b, s1, n1, d)).astype(np.int8)
    qscale = rng.uniform(0, 10, (b, s1, n1)).astype(np.float16)
    w = rng.uniform(0, 0.01, (b, s1, n1)).astype(np.float16)
    lens = np.full(b, s2 * ratio, np.int32)  # original tokens: s2 compressed keys each
    idx, values = cann.npu_quant_lightning_indexer(
        q, key, w, qscale, kscale, actual_seq_lengths_query=np.full(b, s1, np.int32), actual_seq_lengths_key=lens,
        block_table=table, layout_query="BSND", layout_key="PA_BSND", sparse_count=K, sparse_mode=mode,
        cmp_ratio=ratio)
    assert values is None and idx.shape == (b, s1, 1, K) and idx.dtype == np.int32
    keys = [key[table[i], :, 0].reshape(-1, d)[:s2] for i in range(b)]
    kss = [kscale[table[i], :, 0].reshape(-1)[:s2] for i in range(b)]
    ref = quant_li_reference(q, qscale, w, keys, kss, s1, ratio, mode == 3, K)
    assert_quant_topk(idx, ref, K)
    # TND: the same tokens as one run of prefix sums
    tnd, _ = cann.npu_quant_lightning_indexer(
        q.reshape(-1, n1, d), key, w.reshape(-1, n1), qscale.reshape(-1, n1), kscale,
        actual_seq_lengths_query=np.arange(1, b + 1, dtype=np.int32) * s1, actual_seq_lengths_key=lens,
        block_table=table, layout_query="TND", layout_key="PA_BSND", sparse_count=K, sparse_mode=mode,
        cmp_ratio=ratio)
    np.testing.assert_array_equal(tnd.reshape(-1), idx.reshape(-1))


# ---- compressor ---------------------------------------------------------------------------------------------------

def rms_rope_reference(pooled, weight, cos, sin, mode, eps=1e-6):
    y = bf16(pooled)
    y = bf16(y / np.sqrt((y.astype(np.float64) ** 2).mean() + eps) * weight.astype(np.float64))
    r, c, s = y[-64:].astype(np.float64), cos.astype(np.float64), sin.astype(np.float64)
    o = np.empty(64)
    if mode == 1:  # half: pairs (j, j + 32)
        o[:32] = r[:32] * c[:32] - r[32:] * s[:32]
        o[32:] = r[32:] * c[32:] + r[:32] * s[32:]
    else:          # interleaved: pairs (2j, 2j + 1)
        o[0::2] = r[0::2] * c[0::2] - r[1::2] * s[0::2]
        o[1::2] = r[1::2] * c[1::2] + r[0::2] * s[1::2]
    y[-64:] = bf16(o)
    return y


def compressor_reference(d):
    """Per sequence: fresh projections of the call's tokens, state rows (as before the call) for earlier
    positions; each window closing in the call pools its candidates (coff 2: the previous window's low half and
    its own high half) by a softmax over the logits; then RMSNorm and the rotation of the last 64 dims."""
    R, D, C, BS = d["R"], d["D"], d["coff"], d["state"].shape[1]
    W = C * D
    state0 = d["state"].astype(np.float64)
    outs, rows_written = [], []
    for b in range(len(d["lens"])):
        x0, n, p0 = d["starts"][b], d["lens"][b], d["pos"][b]
        xb = d["x2"][x0:x0 + n].astype(np.float64)
        kvp = xb @ d["wkv"].astype(np.float64).T
        scp = xb @ d["wgate"].astype(np.float64).T + d["ape"][(p0 + np.arange(n)) % R].astype(np.float64)
        slot = lambda u: d["table"][b, u // BS] * BS + u % BS

        def row(u):
            if u >= p0:
                return kvp[u - p0], scp[u - p0]
            s = state0.reshape(-1, 2 * W)[slot(u)]
            return s[:W], s[W:]
        entries = []
        for k in range(p0 // R, (p0 + n) // R):
            cands = [(row(u)[0][:D], row(u)[1][:D]) for u in range((k - 1) * R, k * R) if u >= 0] if C == 2 else []
            cands += [(row(u)[0][W - D:], row(u)[1][W - D:]) for u in range(k * R, k * R + R)]
            a, z = np.array([c[0] for c in cands]), np.array([c[1] for c in cands])
            e = np.exp(z - z.max(0))
            entries.append((a * e).sum(0) / e.sum(0))
        outs.append(entries)
        rows_written.append([(slot(p0 + i), np.concatenate([kvp[i], scp[i]])) for i in range(n)])
    return outs, rows_written


def compressor_case(rng, B, lens, pos, D, C, R, H=4096, BS=128, layout="TND", zero_blocks=0, extra=0):
    """The vendor example's data: everything uniform in (−10, 10) (rope tables in (−1, 1)); each sequence its own
    blocks (ids from 1; block 0 is the vendor's "not kept"), the first `zero_blocks` table entries 0."""
    W = C * D
    S = max(lens) + extra
    need = -(-(max(pos) + S) // BS)
    table = (1 + np.arange(B * need, dtype=np.int32)).reshape(B, need)
    table[:, :zero_blocks] = 0
    u = lambda shape, lo=-10, hi=10: rng.uniform(lo, hi, shape)
    starts = np.arange(B + 1) * S if layout == "BSND" else np.concatenate([[0], np.cumsum(lens)])
    T = int(starts[-1])
    counts = [(p + n) // R - p // R for p, n in zip(pos, lens)]
    no = -(-S // R) if layout == "BSND" else min(T, T // R + B)
    rope_shape = (B, no, 64) if layout == "BSND" else (no, 64)
    d = dict(R=R, D=D, coff=C, x2=u((T, H)).astype(BF16), wkv=u((W, H)).astype(BF16), wgate=u((W, H)).astype(BF16),
             ape=u((R, W)).astype(np.float32), weight=u(D).astype(BF16), cos=u(rope_shape, -1, 1).astype(BF16),
             sin=u(rope_shape, -1, 1).astype(BF16), state=u((B * need + 1, BS, 2 * W)).astype(np.float32),
             table=table, starts=starts, lens=np.array(lens), pos=np.array(pos), counts=counts, layout=layout)
    return d


@pytest.mark.parametrize("name,B,lens,pos,D,C,R,layout,mode,zero", [
    ("doc example: c128a decode at 8191", 1, [1], [8191], 512, 1, 128, "TND", 2, 0),
    ("c4a, BSND, prefill and a decode run", 2, [5, 3], [0, 6], 512, 2, 4, "BSND", 1, 0),
    ("c4li, TND, three sequences", 3, [9, 1, 2], [0, 3, 7], 128, 2, 4, "TND", 2, 0),
    ("c4a prefill, blocks not kept", 2, [300, 290], [0, 0], 512, 2, 4, "TND", 1, 2),
])
def test_compressor(name, B, lens, pos, D, C, R, layout, mode, zero):
    rng = np.random.default_rng(len(name))
    d = compressor_case(rng, B, lens, pos, D, C, R, layout=layout, zero_blocks=zero)
    outs, rows = compressor_reference(d)
    state = d["state"].copy()
    x = d["x2"].reshape(B, -1, d["x2"].shape[-1]) if layout == "BSND" else d["x2"]
    got = cann.npu_compressor(x, d["wkv"], d["wgate"], state, d["ape"], d["weight"], d["sin"], d["cos"], 64, R,
                              state_block_table=d["table"], cu_seqlens=None if layout == "BSND" else d["starts"],
                              start_pos=d["pos"], coff=C, rotary_mode=mode)
    assert got.dtype == BF16
    r0 = 0
    for b in range(B):
        for k, pooled in enumerate(outs[b]):
            row = (b, k) if layout == "BSND" else (r0 + k,)
            rope = (d["cos"][b, k], d["sin"][b, k]) if layout == "BSND" else (d["cos"][r0 + k], d["sin"][r0 + k])
            want = rms_rope_reference(pooled, d["weight"], *rope, mode)
            assert_vendor_close(got[row].astype(np.float32), want.astype(np.float32))
        r0 += len(outs[b])
    flat = state.reshape(-1, state.shape[-1])
    for b in range(B):
        for slot, want in rows[b]:
            if slot >= d["state"].shape[1]:  # rows of block 0 are the vendor's "not kept"
                np.testing.assert_allclose(flat[slot], want, rtol=1e-5, atol=1e-2)


# ---- npu_sparse_attention_pto (the fused V3.2 layer) ---------------------------------------------------------------

def rmsnorm(v, g, eps):
    v = v.astype(np.float64)
    return v / np.sqrt((v ** 2).mean(-1, keepdims=True) + eps) * g.astype(np.float64)


def dia_reference(d):
    """The vendor golden's chain in NumPy: MLA prolog (RMSNorm eps 1e-5, absorbed w_uk, rotation interleaved in,
    halves out), indexer prolog (no Hadamard, no weight scale, LayerNorm eps 1e-6 on the fp32 projection), both
    caches stored at cache_index, scores Σ_h w_h ReLU(q_h · k_j) over each token's causal keys, top-2048, and
    attention with fp32 probabilities at scale 576^-1/2. Returns the output and the updated caches."""
    B, S1, H = d["x"].shape
    N, Dqn, Dc = d["w_uk"].shape
    T, NI, DI = B * S1, d["NI"], d["DI"]
    x = d["x"].reshape(T, H).astype(np.float64)
    cos, sin = d["cos"].reshape(T, 64).astype(np.float64), d["sin"].reshape(T, 64).astype(np.float64)
    cq = bf16(rmsnorm(bf16(x @ d["w_dq"].astype(np.float64)), d["gamma_cq"], 1e-5))
    qb = bf16(cq.astype(np.float64) @ d["w_uq_qr"].astype(np.float64)).reshape(T, N, Dqn + 64)
    q_nope = bf16(np.einsum("thd,hdc->thc", qb[..., :Dqn].astype(np.float64), d["w_uk"].astype(np.float64)))
    q_rope = rope_interleaved_in_half_out(qb[..., Dqn:], cos[:, None], sin[:, None])
    kva = bf16(x @ d["w_dkv_kr"].astype(np.float64))
    ckv = bf16(rmsnorm(kva[:, :Dc], d["gamma_ckv"], 1e-5))
    kr = rope_interleaved_in_half_out(kva[:, Dc:], cos, sin)
    qi = bf16(cq.astype(np.float64) @ d["w_idx_qb"].astype(np.float64)).reshape(T, NI, DI)
    qi = rope_interleaved_in_half_out(qi, cos[:, None], sin[:, None])
    k = x @ d["w_idx_k"].astype(np.float64)
    mean = k.mean(-1, keepdims=True)
    k = bf16((k - mean) / np.sqrt(((k - mean) ** 2).mean(-1, keepdims=True) + 1e-6) * d["gamma_k"].astype(np.float64)
             + d["beta_k"].astype(np.float64))
    k = rope_interleaved_in_half_out(k, cos, sin)
    w = bf16(bf16(x @ d["w_idx_proj"].astype(np.float64)))
    kv, kr_c, ik = (d[n].copy().reshape(-1, d[n].shape[-1]) for n in ("kv_cache", "kr_cache", "index_k_cache"))
    rows = d["cache_index"].reshape(T)
    kv[rows], kr_c[rows], ik[rows] = ckv.astype(BF16), kr.astype(BF16), k.astype(BF16)
    out = np.zeros((T, N, Dc))
    bs = d["kv_cache"].shape[1]
    for t in range(T):
        b, i = divmod(t, S1)
        L = int(d["act_seqs"][b]) - (S1 - 1 - i)
        slots = d["table"][b, np.arange(L) // bs] * bs + np.arange(L) % bs
        keys = ik[slots].astype(np.float64)
        score = (np.maximum(qi[t].astype(np.float64) @ keys.T, 0) * w[t][:, None]).sum(0)
        sel = slots[np.argsort(-score, kind="stable")[:2048]]
        s = (q_nope[t].astype(np.float64) @ kv[sel].astype(np.float64).T
             + q_rope[t].astype(np.float64) @ kr_c[sel].astype(np.float64).T) * 576 ** -0.5
        p = np.exp(s - s.max(-1, keepdims=True))
        out[t] = (p / p.sum(-1, keepdims=True)) @ kv[sel].astype(np.float64)
    return bf16(out).reshape(B, S1, N, Dc), kv, kr_c, ik


def dia_data(rng, B=2, S1=2, seqs=(2500, 300), H=256, Q=64, N=4, Dqn=128, Dc=512, NI=16, DI=128, bs=128):
    """The vendor golden's kind of data (uniform weights and activations, random caches), smaller widths; the
    call's tokens stored at their own positions, so the first sequence (over 2048 keys) has a real top-k."""
    u = lambda *shape, s=1.0: (rng.uniform(-1, 1, shape) * s).astype(BF16)
    need = [-(-n // bs) for n in seqs]
    table = np.full((B, max(need)), -1, np.int32)
    perm, used = rng.permutation(sum(need)).astype(np.int32), 0
    for b, n in enumerate(need):
        table[b, :n] = perm[used:used + n]
        used += n
    pos = np.array([[n - S1 + i for i in range(S1)] for n in seqs])
    index = (table[np.arange(B)[:, None], pos // bs] * bs + pos % bs).astype(np.int32)
    ang = rng.uniform(0, 2 * np.pi, (B, S1, 64))
    nb = sum(need)
    return dict(x=u(B, S1, H), w_dq=u(H, Q, s=0.1), w_uq_qr=u(Q, N * (Dqn + 64), s=0.2), w_uk=u(N, Dqn, Dc, s=0.1),
                w_dkv_kr=u(H, Dc + 64, s=0.1), gamma_cq=u(Q), gamma_ckv=u(Dc), cos=np.cos(ang).astype(BF16),
                sin=np.sin(ang).astype(BF16), cache_index=index, kv_cache=u(nb, bs, 1, Dc), kr_cache=u(nb, bs, 1, 64),
                table=table, act_seqs=np.array(seqs, np.int32), w_idx_qb=u(Q, NI * DI, s=0.2), w_idx_k=u(H, DI, s=0.1),
                w_idx_proj=u(H, NI), gamma_k=u(DI), beta_k=u(DI), index_k_cache=u(nb, bs, 1, DI), NI=NI, DI=DI)


@pytest.mark.parametrize("weights", ["ND", "NZ blocks", "NZ bytes"])
def test_npu_sparse_attention_pto(weights):
    d = dia_data(np.random.default_rng(21))
    want, kv, kr, ik = dia_reference(d)
    caches = {n: d[n].copy() for n in ("kv_cache", "kr_cache", "index_k_cache")}
    if weights == "ND":
        w, fmt = (lambda a: a), None
    elif weights == "NZ blocks":
        w, fmt = (lambda a: dsops.nd_to_fractal_nz(nd=a)["nz"]), None
    else:  # the vendor's files: NZ bytes in a tensor of the ND shape
        w, fmt = (lambda a: dsops.nd_to_fractal_nz(nd=a)["nz"].reshape(a.shape)), "NZ"
    got = cann.npu_sparse_attention_pto(
        d["x"], w(d["w_dq"]), w(d["w_uq_qr"]), d["w_uk"], w(d["w_dkv_kr"]), d["gamma_cq"], d["gamma_ckv"], d["sin"],
        d["cos"], d["cache_index"], caches["kv_cache"], caches["kr_cache"], d["table"], d["act_seqs"],
        w(d["w_idx_qb"]), w(d["w_idx_k"]), w(d["w_idx_proj"]), d["gamma_k"], d["beta_k"], caches["index_k_cache"],
        weight_format=fmt)
    assert got.shape == want.shape and got.dtype == BF16
    ok = np.isclose(got.astype(np.float32), want.astype(np.float32), rtol=0.03, atol=1e-4)
    assert ok.mean() >= 0.97, f"{(~ok).sum()} of {ok.size} outside the vendor's 1e-4 / 0.03 / 3 %"
    for name, ref in (("kv_cache", kv), ("kr_cache", kr), ("index_k_cache", ik)):
        c = caches[name].reshape(ref.shape)
        assert_vendor_close(c.astype(np.float32), ref.astype(np.float32))


def test_prepared_weights_give_the_same_bytes():
    """.prepare converts and packs a layer's weights once; calls given the same weight objects reuse them and give
    the bytes of the plain call; other weight objects are refused."""
    d = dia_data(np.random.default_rng(22))
    nz = lambda a: dsops.nd_to_fractal_nz(nd=a)["nz"]
    wts = {k: nz(d[k]) for k in ("w_dq", "w_uq_qr", "w_dkv_kr", "w_idx_qb", "w_idx_k", "w_idx_proj")}

    def call(caches, **kw):
        return cann.npu_sparse_attention_pto(
            d["x"], wts["w_dq"], wts["w_uq_qr"], d["w_uk"], wts["w_dkv_kr"], d["gamma_cq"], d["gamma_ckv"], d["sin"],
            d["cos"], d["cache_index"], caches[0], caches[1], d["table"], d["act_seqs"], wts["w_idx_qb"],
            wts["w_idx_k"], wts["w_idx_proj"], d["gamma_k"], d["beta_k"], caches[2], **kw)
    fresh = lambda: [d[n].copy() for n in ("kv_cache", "kr_cache", "index_k_cache")]
    p = cann.npu_sparse_attention_pto.prepare(
        d["x"], wts["w_dq"], wts["w_uq_qr"], d["w_uk"], wts["w_dkv_kr"], d["gamma_cq"], d["gamma_ckv"], d["sin"],
        d["cos"], d["cache_index"], *fresh()[:2], d["table"], d["act_seqs"], wts["w_idx_qb"], wts["w_idx_k"],
        wts["w_idx_proj"], d["gamma_k"], d["beta_k"], fresh()[2])
    assert isinstance(p, cann.PreparedWeights)
    a, b = fresh(), fresh()
    plain, prep = call(a), call(b, prepared=p)
    np.testing.assert_array_equal(plain.view(np.uint16), prep.view(np.uint16))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.view(np.uint16), y.view(np.uint16))
    wts["w_dq"] = wts["w_dq"].copy()  # the same values in another array: not what was prepared
    with pytest.raises(ValueError, match="prepared"):
        call(fresh(), prepared=p)

    dp = prolog_data(np.random.default_rng(23), B=2, S1=2, S2=1000, H=512, Q=128, N=8, bs=64)
    pp = cann.npu_lightning_indexer_prolog_pto.prepare(
        dp["x"], dp["q_norm"], dp["q_norm_scale"], dp["wq_b"], dp["wq_b_scale"], dp["wk"], dp["w_proj"], dp["gamma"],
        dp["beta"], dp["cos"], dp["sin"], dp["hadamard_q"], dp["hadamard_k"], dp["k_cache"].copy(),
        dp["k_scale_cache"].copy(), dp["index"], 1e-6)
    want = call_prolog(dict(dp, k_cache=dp["k_cache"].copy(), k_scale_cache=dp["k_scale_cache"].copy()), False)
    got = cann.npu_lightning_indexer_prolog_pto(
        dp["x"], dp["q_norm"], dp["q_norm_scale"], dp["wq_b"], dp["wq_b_scale"], dp["wk"], dp["w_proj"], dp["gamma"],
        dp["beta"], dp["cos"], dp["sin"], dp["hadamard_q"], dp["hadamard_k"], dp["k_cache"].copy(),
        dp["k_scale_cache"].copy(), dp["index"], 1e-6, prepared=pp)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g).view(np.uint8), np.asarray(w).view(np.uint8))
    with pytest.raises(ValueError, match="prepared"):
        cann.npu_lightning_indexer_prolog_pto(
            dp["x"], dp["q_norm"], dp["q_norm_scale"], dp["wq_b"], dp["wq_b_scale"], dp["wk"], dp["w_proj"],
            dp["gamma"], dp["beta"], dp["cos"], dp["sin"], dp["hadamard_q"], dp["hadamard_k"], dp["k_cache"].copy(),
            dp["k_scale_cache"].copy(), dp["index"], 1e-6, prepared=p)
