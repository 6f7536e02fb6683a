"""dsops.compat.flash_mla against a NumPy formulation of FlashMLA's sparse attention semantics (docs/COMPAT.md):
keys gathered by physical row (block * page + offset), −1, rows past the cache and entries past topk_length
skipped, extra caches appended to each query's key list, natural-log lse without the sink, the output scaled by
1 / (1 + exp(sink − lse)), output 0 and lse +inf for a query without keys, fp32 probabilities.

The caches are made with test_fp8_cache's NumPy quantiser (FlashMLA's byte layouts); the reference works on the
rows those bytes stand for. Grids: page sizes 2, 61, 64, 69 and 576; b 1, 4 and 74; s_q 1, 2, 3; 64, 128 and odd
head counts; top-k 128, 512, 2048 and odd; with and without extra caches, sinks and topk_length; queries whose
entries are all invalid; NaN in every cache row no query reads.
"""
import zlib

import numpy as np
import pytest

from dsops.compat import flash_mla
from test_fp8_cache import BF16, np_dequantize, np_quantize

OUT_TOL = (1e-3, 1e-2)   # atol, rtol on bf16 outputs
LSE_TOL = (1e-4, 1e-5)


def close(got, want, tol, what):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    same_special = (np.isnan(got) & np.isnan(want)) | (np.isinf(got) & (got == want))
    with np.errstate(invalid="ignore"):
        ok = same_special | (np.abs(got - want) <= tol[0] + tol[1] * np.abs(want))
    assert ok.all(), f"{what}: {int((~ok).sum())} of {ok.size} elements differ, e.g. {got[~ok][:4]} vs {want[~ok][:4]}"


def ref_attention(q, lists, sink, scale):
    """q [T, h, d] fp32; lists: per query the fp32 key rows [n, d] it attends to (values: their first 512).
    Returns out [T, h, 512], lse [T, h]."""
    T, h, _ = q.shape
    out, lse = np.zeros((T, h, 512), np.float32), np.full((T, h), np.inf, np.float32)
    for t, keys in enumerate(lists):
        if len(keys) == 0:
            continue
        s = (q[t].astype(np.float64) @ keys.T.astype(np.float64)) * scale   # [h, n]
        m = s.max(axis=1, keepdims=True)
        w = np.exp(s - m)
        l = w.sum(axis=1, keepdims=True)
        lse[t] = (m + np.log(l))[:, 0]
        o = (w / l) @ keys[:, :512].astype(np.float64)
        if sink is not None:
            o *= (1.0 / (1.0 + np.exp(sink.astype(np.float64) - lse[t].astype(np.float64))))[:, None]
        out[t] = o
    return out, lse


def key_list(rows, idx, length):
    """The rows a query reads: its entries before `length` that name a row of the cache."""
    n = len(idx) if length is None else min(int(length), len(idx))
    sel = [int(i) for i in idx[:n] if 0 <= i < rows.shape[0]]
    return rows[sel] if sel else np.zeros((0, rows.shape[1]), np.float32)


def make_cache(rng, layout, NB, BS, poison=None):
    """An FP8 cache in FlashMLA's view ([NB, BS, 1, bytes] uint8) and the fp32 rows [NB * BS, D] it stands for;
    rows whose numbers are in `poison` hold NaN bytes (e4m3 and scales) instead."""
    D = 576 if layout == "v32" else 512
    kv = (rng.standard_normal((NB, BS, D)) * np.exp(rng.uniform(-2, 2, (NB, BS, 1)))).astype(BF16)
    cache = np_quantize(kv, layout)
    rows = np_dequantize(cache, layout, BS).view(BF16).astype(np.float32).reshape(NB * BS, D)
    if layout == "v32":
        if poison is not None:
            flat = cache.reshape(NB * BS, 656)
            flat[poison] = 0xFF
        return cache.reshape(NB, BS, 1, 656), rows
    if poison is not None:
        for r in poison:
            blk, off = divmod(int(r), BS)
            cache[blk, off * 576:(off + 1) * 576 - 128] = 0xFF      # the e4m3 values
            cache[blk, BS * 576 + off * 8:BS * 576 + off * 8 + 7] = 0xFF  # the scales
    view = np.lib.stride_tricks.as_strided(cache, (NB, BS, 1, 584), (cache.shape[1], 584, 584, 1))
    return view, rows


def random_indices(rng, b, s_q, topk, rows, invalid=0.1):
    idx = rng.integers(0, rows, (b, s_q, topk)).astype(np.int32)
    idx[rng.random(idx.shape) < invalid] = -1
    idx[rng.random(idx.shape) < invalid / 2] = rows + 5   # past the cache: skipped as well
    return idx


DECODE = [  # layout, b, s_q, h, topk, page, NB, extra (page, NB, topk), sink, topk_length
    ("v32", 1, 1, 64, 128, 64, 5, None, False, False),
    ("v32", 4, 2, 128, 37, 61, 3, None, True, True),
    ("v32", 2, 3, 7, 128, 2, 90, (69, 2, 20), True, True),
    ("v32", 74, 1, 16, 33, 576, 1, None, False, True),
    ("v32", 1, 2, 128, 2048, 64, 40, (61, 3, 64), True, True),
    ("model1", 1, 1, 64, 128, 64, 5, None, True, False),
    ("model1", 4, 3, 13, 65, 69, 4, None, True, True),
    ("model1", 3, 2, 64, 128, 61, 3, (2, 40, 16), True, True),
    ("model1", 2, 1, 128, 512, 64, 10, (64, 2, 32), False, False),
]


@pytest.mark.parametrize("case", DECODE, ids=[f"{c[0]}_b{c[1]}_s{c[2]}_h{c[3]}_k{c[4]}_p{c[5]}" for c in DECODE])
def test_sparse_decode(case):
    layout, b, s_q, h, topk, page, NB, extra, with_sink, with_len = case
    rng = np.random.default_rng(zlib.crc32(repr(case).encode()))
    d = 576 if layout == "v32" else 512
    rows_n = NB * page
    idx = random_indices(rng, b, s_q, topk, rows_n)
    idx[0, 0, :] = -1                      # a query of the first sequence has no valid entry
    read = set(int(i) for i in idx.ravel() if 0 <= i < rows_n)
    unread = np.array(sorted(set(range(rows_n)) - read), np.int64)
    cache, rows = make_cache(rng, layout, NB, page, poison=unread)
    q = rng.standard_normal((b, s_q, h, d)).astype(BF16)
    sink = rng.standard_normal(h).astype(np.float32) if with_sink else None
    length = rng.integers(0, topk + 1, b).astype(np.int32) if with_len else None
    kw = dict(attn_sink=sink, topk_length=length)
    e_rows = e_idx = e_len = None
    if extra is not None:
        e_page, e_nb, e_topk = extra
        e_cache, e_rows = make_cache(rng, layout, e_nb, e_page)
        e_idx = random_indices(rng, b, s_q, e_topk, e_nb * e_page)
        e_idx[0, 0, :] = -1
        e_len = rng.integers(0, e_topk + 1, b).astype(np.int32) if with_len else None
        kw.update(extra_k_cache=e_cache, extra_indices_in_kvcache=e_idx, extra_topk_length=e_len)
    meta, _ = flash_mla.get_mla_metadata()
    out, lse = flash_mla.flash_mla_with_kvcache(q, cache, None, None, 512, meta, is_fp8_kvcache=True, indices=idx, **kw)
    assert out.shape == (b, s_q, h, 512) and out.dtype == BF16
    assert lse.shape == (b, h, s_q) and lse.dtype == np.float32

    lists = []
    for bi in range(b):
        for si in range(s_q):
            keys = key_list(rows, idx[bi, si], None if length is None else length[bi])
            if extra is not None:
                keys = np.concatenate([keys, key_list(e_rows, e_idx[bi, si], None if e_len is None else e_len[bi])])
            lists.append(keys)
    want, want_lse = ref_attention(q.astype(np.float32).reshape(b * s_q, h, d), lists, sink, d ** -0.5)
    close(out.reshape(b * s_q, h, 512), want, OUT_TOL, "out")
    close(lse.transpose(0, 2, 1).reshape(b * s_q, h), want_lse, LSE_TOL, "lse")
    assert np.all(out[0, 0].astype(np.float32) == 0) and np.all(np.isposinf(lse[0, :, 0]))
    # the same metadata with other shapes is refused, as FlashMLA asserts
    with pytest.raises(ValueError):
        flash_mla.flash_mla_with_kvcache(q[:, :, :1], cache, None, None, 512, meta, is_fp8_kvcache=True, indices=idx)


PREFILL = [  # d_qk, s_q, s_kv, h, topk, sink, topk_length, indexer_topk
    (576, 5, 300, 64, 128, False, False, 0),
    (576, 3, 1000, 128, 512, True, True, 0),
    (576, 7, 61, 5, 37, True, False, 16),
    (512, 4, 200, 64, 128, True, True, 0),
    (512, 6, 130, 9, 65, False, False, 32),
]


@pytest.mark.parametrize("case", PREFILL, ids=[f"d{c[0]}_s{c[1]}_kv{c[2]}_h{c[3]}_k{c[4]}" for c in PREFILL])
def test_sparse_prefill(case):
    d, s_q, s_kv, h, topk, with_sink, with_len, itopk = case
    rng = np.random.default_rng(zlib.crc32(repr(case).encode()))
    kv = rng.standard_normal((s_kv, 1, d)).astype(BF16)
    q = rng.standard_normal((s_q, h, d)).astype(BF16)
    idx = random_indices(rng, 1, s_q, topk, s_kv).reshape(s_q, 1, topk)
    idx[1] = -1                                         # one query without keys
    read = set(int(i) for i in idx.ravel() if 0 <= i < s_kv)
    unread = sorted(set(range(s_kv)) - read)
    kv[unread] = np.nan                                  # never read
    sink = rng.standard_normal(h).astype(np.float32) if with_sink else None
    length = rng.integers(0, topk + 1, s_q).astype(np.int32) if with_len else None
    scale = d ** -0.5
    res = flash_mla.flash_mla_sparse_fwd(q, kv, idx, scale, attn_sink=sink, topk_length=length, indexer_topk=itopk)
    assert len(res) == (4 if itopk else 3)
    out, max_logits, lse = res[:3]
    rows = kv.reshape(s_kv, d).astype(np.float32)
    lists = [key_list(rows, idx[t, 0], None if length is None else length[t]) for t in range(s_q)]
    qf = q.astype(np.float32)
    want, want_lse = ref_attention(qf, lists, sink, scale)
    close(out, want, OUT_TOL, "out")
    close(lse, want_lse, LSE_TOL, "lse")
    want_max = np.array([[(qf[t, hh] @ k.T * scale).max() if len(k) else -np.inf for hh in range(h)]
                         for t, k in enumerate(lists)], np.float32)
    close(max_logits, want_max, LSE_TOL, "max_logits")
    assert np.all(out[1].astype(np.float32) == 0) and np.all(np.isposinf(lse[1])) and np.all(np.isneginf(max_logits[1]))
    if itopk:
        first = [key_list(rows, idx[t, 0][:itopk], None) for t in range(s_q)]
        close(res[3], ref_attention(qf, first, None, scale)[1], LSE_TOL, "lse_indexer")


def test_sink_edges():
    """A sink of +inf zeroes the output, −inf changes nothing; lse is the same either way (FlashMLA's docstring)."""
    rng = np.random.default_rng(3)
    kv = rng.standard_normal((50, 1, 512)).astype(BF16)
    q = rng.standard_normal((2, 4, 512)).astype(BF16)
    idx = rng.integers(0, 50, (2, 1, 16)).astype(np.int32)
    base = flash_mla.flash_mla_sparse_fwd(q, kv, idx, 0.05)
    for sink, want in ((np.inf, 0.0), (-np.inf, None)):
        out, _, lse = flash_mla.flash_mla_sparse_fwd(q, kv, idx, 0.05, attn_sink=np.full(4, sink, np.float32))
        assert np.array_equal(lse, base[2])
        if want is None:
            assert np.array_equal(out.view(np.uint16), base[0].view(np.uint16))
        else:
            assert np.all(out.astype(np.float32) == 0)


def test_refusals():
    meta, _ = flash_mla.get_mla_metadata()
    q = np.zeros((1, 1, 4, 576), BF16)
    cache, _ = make_cache(np.random.default_rng(0), "v32", 2, 4)
    idx = np.zeros((1, 1, 8), np.int32)
    with pytest.raises(NotImplementedError):   # dense decode
        flash_mla.flash_mla_with_kvcache(q, cache, np.zeros((1, 2), np.int32), np.array([8], np.int32), 512, meta)
    with pytest.raises(ValueError):            # sparse needs the FP8 cache flag
        flash_mla.flash_mla_with_kvcache(q, cache, None, None, 512, meta, indices=idx)
    with pytest.raises(ValueError):            # a 512-wide query on V32 rows
        flash_mla.flash_mla_with_kvcache(q[..., :512], cache, None, None, 512, flash_mla.get_mla_metadata()[0],
                                         is_fp8_kvcache=True, indices=idx)
    with pytest.raises(NotImplementedError):   # two kv heads
        flash_mla.flash_mla_sparse_fwd(np.zeros((2, 4, 512), BF16), np.zeros((8, 2, 512), BF16),
                                       np.zeros((2, 2, 4), np.int32), 0.1)


def test_torch_tensors():
    """torch in, torch out: the same values as the NumPy call, FP8 caches as torch float8 tensors (uint8 where
    the torch has no float8 types)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    cache, _ = make_cache(rng, "v32", 3, 64)
    q = rng.standard_normal((2, 1, 16, 576)).astype(BF16)
    idx = rng.integers(0, 192, (2, 1, 64)).astype(np.int32)
    want = flash_mla.flash_mla_with_kvcache(q, cache, None, None, 512, flash_mla.get_mla_metadata()[0],
                                            is_fp8_kvcache=True, indices=idx)
    tq = torch.from_numpy(q.view(np.int16)).view(torch.bfloat16)
    tc = torch.from_numpy(np.ascontiguousarray(cache))
    if hasattr(torch, "float8_e4m3fn"):
        tc = tc.view(torch.float8_e4m3fn)
    got = flash_mla.flash_mla_with_kvcache(tq, tc, None, None, 512, flash_mla.get_mla_metadata()[0],
                                           is_fp8_kvcache=True, indices=torch.from_numpy(idx))
    assert got[0].dtype == torch.bfloat16 and got[1].dtype == torch.float32
    assert np.array_equal(got[0].view(torch.int16).numpy(), want[0].view(np.int16))
    assert np.array_equal(got[1].numpy(), want[1])
    # the prefill call: bf16 torch tensors in, (out, max_logits, lse) torch tensors out, the NumPy call's bytes
    kv = rng.standard_normal((40, 1, 512)).astype(BF16)
    qp = rng.standard_normal((3, 8, 512)).astype(BF16)
    ip = rng.integers(-1, 40, (3, 1, 16)).astype(np.int32)
    want = flash_mla.flash_mla_sparse_fwd(qp, kv, ip, 0.05)
    got = flash_mla.flash_mla_sparse_fwd(*(torch.from_numpy(x.view(np.int16)).view(torch.bfloat16) for x in (qp, kv)),
                                         torch.from_numpy(ip), 0.05)
    assert np.array_equal(got[0].view(torch.int16).numpy(), want[0].view(np.int16))
    assert all(np.array_equal(g.numpy(), w) for g, w in zip(got[1:], want[1:]))
