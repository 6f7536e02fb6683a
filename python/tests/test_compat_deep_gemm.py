"""dsops.compat.deep_gemm against a NumPy formulation of DeepGEMM's indexer logits, written here from DeepGEMM's
documented semantics: e4m3 queries and keys, one fp32 scale per key, fp32 head weights,
logit = (Σ_h max(q_h · k, 0) · w_h) · scale, masked entries −inf. Grids after DeepGEMM's tests: next_n 1, 2, 3;
block sizes 2, 32, 61, 64; per-sequence and per-query context lengths; key ranges from context-parallel chunks;
zero-length sequences, odd head counts."""
import numpy as np
import pytest

import dsops
from dsops.compat import deep_gemm

E4M3 = dsops.float8_e4m3fn
pytestmark = pytest.mark.skipif(E4M3 is None, reason="ml_dtypes is needed for e4m3 arrays")


def cast_keys(x):
    """Per-key fp32 scale max(amax, 1e-4) / 448 and e4m3 values x / scale (DeepGEMM's test recipe)."""
    amax = np.maximum(np.abs(x).max(axis=-1, keepdims=True), 1e-4)
    scale = (amax / 448.0).astype(np.float32)
    return (x * (1.0 / scale)).astype(E4M3), scale[..., 0]


def logits_of(q, k, scale, w):
    """q [M, H, D], k [N, D] e4m3, scale [N], w [M, H] -> [M, N] in float64."""
    dots = np.einsum("mhd,nd->mhn", q.astype(np.float64), k.astype(np.float64))
    return np.einsum("mhn,mh->mn", np.maximum(dots, 0), w.astype(np.float64)) * scale.astype(np.float64)[None, :]


def assert_logits(got, want, mask):
    """-inf exactly where mask is False; elsewhere within 1e-5 of the row's largest magnitude (fp32 sums)."""
    assert got.dtype == np.float32
    np.testing.assert_array_equal(np.isneginf(got), ~mask)
    scale = np.abs(np.where(mask, want, 0)).max(initial=1.0)
    np.testing.assert_allclose(np.where(mask, got, 0), np.where(mask, want, 0), rtol=0, atol=1e-5 * scale)


def queries(rng, shape):
    return rng.standard_normal(shape).astype(np.float32).astype(E4M3)


@pytest.mark.parametrize("heads", [64, 3])
@pytest.mark.parametrize("ranges", ["causal", "context_parallel", "random"])
def test_fp8_mqa_logits(heads, ranges):
    rng = np.random.default_rng(7)
    M, N, D = 48, 160, 128
    q = queries(rng, (M, heads, D))
    k, scale = cast_keys(rng.standard_normal((N, D)).astype(np.float32))
    w = rng.standard_normal((M, heads)).astype(np.float32)
    if ranges == "causal":
        ks, ke = np.zeros(M, np.int32), (np.arange(M) + N - M + 1).astype(np.int32)
    elif ranges == "context_parallel":  # two chunks of a sequence, each with its own start
        half = M // 2
        ks = np.repeat(np.array([0, 40], np.int32), half)
        ke = np.concatenate([np.arange(half) + 10, np.arange(half) + 100]).astype(np.int32)
    else:  # arbitrary ranges: empty, past the end, starting anywhere
        ks = rng.integers(0, N, M).astype(np.int32)
        ke = (ks + rng.integers(-3, 60, M)).astype(np.int32)
        ke[:3] = ks[:3]
        ke[3] = N + 50
    got = deep_gemm.fp8_mqa_logits(q, (k, scale), w, ks, ke)
    assert got.shape == (M, N)
    j = np.arange(N)[None, :]
    mask = (j >= ks[:, None]) & (j < ke[:, None])
    assert_logits(got, logits_of(q, k, scale, w), mask)


def test_fp8_mqa_logits_compressed():
    rng = np.random.default_rng(8)
    M, N, D, H = 20, 90, 64, 8
    q = queries(rng, (M, H, D))
    k, scale = cast_keys(rng.standard_normal((N, D)).astype(np.float32))
    w = rng.standard_normal((M, H)).astype(np.float32)
    ks = np.sort(rng.integers(0, 60, M)).astype(np.int32)
    ke = (ks + rng.integers(0, 30, M)).astype(np.int32)
    width = int((ke - ks).max())
    got = deep_gemm.fp8_mqa_logits(q, (k, scale), w, ks, ke, clean_logits=False, max_seqlen_k=width)
    assert got.shape == (M, width)
    full = logits_of(q, k, scale, w)
    c = np.arange(width)[None, :]
    mask = c < (ke - ks)[:, None]
    want = np.take_along_axis(full, np.minimum(ks[:, None] + c, N - 1), axis=1)
    assert_logits(got, want, mask)
    with pytest.raises(ValueError):
        deep_gemm.fp8_mqa_logits(q, (k, scale), w, ks, ke, clean_logits=True, max_seqlen_k=width)


def paged_problem(rng, B, next_n, H, D, bs, lens, nan_unused=False):
    """Queries, DeepGEMM's paged cache [nb, bs, 1, D + 4] uint8, weights, block table (random blocks, garbage past
    the needed columns) and the keys as rows per sequence for the NumPy side."""
    q = queries(rng, (B, next_n, H, D))
    need = [-(-int(n) // bs) for n in lens]
    nb = sum(need) + 3
    x = rng.standard_normal((nb, bs, D)).astype(np.float32)
    x[:, ::5] *= 1e-7  # tiny amax: the scale's floor 1e-4 / 448, values that round to e4m3 subnormals or 0
    x[:, 1::7] = 0.0
    k, scale = cast_keys(x)
    if nan_unused:  # every block no table entry names: NaN values and scales
        k[sum(need):] = np.float32("nan")
        scale[sum(need):] = np.float32("nan")
    cache = np.zeros((nb, bs * (D + 4)), np.uint8)
    cache[:, :bs * D] = k.view(np.uint8).reshape(nb, bs * D)
    cache[:, bs * D:] = scale.view(np.uint8).reshape(nb, bs * 4)
    cols = max(need + [1]) + 2
    table = np.full((B, cols), 2 ** 30, np.int32)
    perm = rng.permutation(sum(need)).astype(np.int32)
    rows, used = [], 0
    for b in range(B):
        table[b, :need[b]] = perm[used:used + need[b]]
        used += need[b]
        blocks = table[b, :need[b]]
        rows.append((k[blocks].reshape(-1, D), scale[blocks].reshape(-1)))
    w = rng.standard_normal((B * next_n, H)).astype(np.float32)
    return q, cache.reshape(nb, bs, 1, D + 4), w, table, rows


def assert_paged(got, q, w, rows, L, keep):
    """Row b·next_n + n of got against NumPy: the logits of query (b, n) over sequence b's keys, masked by
    keep(b, n) (a [L] bool row) to −inf."""
    B, next_n = q.shape[0], q.shape[1]
    for b in range(B):
        kb, sb = rows[b]
        m = min(len(kb), L)
        full = logits_of(q[b], kb[:m], sb[:m], w[b * next_n:(b + 1) * next_n])
        for n in range(next_n):
            want = np.zeros(L)
            want[:m] = full[n]
            assert_logits(got[b * next_n + n][None], want[None], keep(b, n)[None])


@pytest.mark.parametrize("bs", [2, 32, 61, 64])
@pytest.mark.parametrize("next_n", [1, 2, 3])
def test_fp8_paged_mqa_logits(bs, next_n):
    rng = np.random.default_rng(bs * 10 + next_n)
    B, H, D, L = 4, 64, 128, 400
    lens = np.array([300, 0, 1, 397], np.int32)[:B]
    lens[1] = next_n - 1  # a sequence shorter than its queries: its first query sees nothing
    q, cache, w, table, rows = paged_problem(rng, B, next_n, H, D, bs, lens, nan_unused=True)
    meta = deep_gemm.get_paged_mqa_logits_metadata(lens, bs, deep_gemm.get_num_sms())
    assert meta.shape == (deep_gemm.get_num_sms() + 1, 2) and meta.dtype == np.int32
    assert deep_gemm.get_paged_mqa_logits_metadata(lens, 7).shape == (8, 2)
    got = deep_gemm.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, L, clean_logits=True)
    assert got.shape == (B * next_n, L)
    j = np.arange(L)  # query n of a sequence sits at context_len − next_n + n: keys j up to it and below context_len
    assert_paged(got, q, w, rows, L, lambda b, n: (j <= lens[b] - next_n + n) & (j < lens[b]))


def test_fp8_paged_mqa_logits_lengths_per_query():
    rng = np.random.default_rng(3)
    B, next_n, H, D, bs, L = 3, 2, 5, 64, 16, 120
    lens = np.array([100, 7, 33], np.int32)
    lens2d = np.stack([lens // 2, lens], axis=1).astype(np.int32)
    q, cache, w, table, rows = paged_problem(rng, B, next_n, H, D, bs, lens)
    got = deep_gemm.fp8_paged_mqa_logits(q, cache, w, lens2d, table, None, L)
    assert_paged(got, q, w, rows, L, lambda b, n: np.arange(L) < lens2d[b, n])


def test_context_beyond_max_context_len_is_refused():
    rng = np.random.default_rng(4)
    q, cache, w, table, _ = paged_problem(rng, 1, 1, 4, 64, 16, np.array([50], np.int32))
    with pytest.raises(dsops.Error):
        deep_gemm.fp8_paged_mqa_logits(q, cache, w, np.array([50], np.int32), table, None, 49)


def test_torch_tensors():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    B, next_n, H, D, bs, L = 2, 2, 8, 64, 32, 80
    lens = np.array([70, 3], np.int32)
    q, cache, w, table, _ = paged_problem(rng, B, next_n, H, D, bs, lens)
    want = deep_gemm.fp8_paged_mqa_logits(q, cache, w, lens, table, None, L)
    qt = torch.from_numpy(q.view(np.uint8))
    if hasattr(torch, "float8_e4m3fn"):
        qt = qt.view(torch.float8_e4m3fn)
    got = deep_gemm.fp8_paged_mqa_logits(qt, torch.from_numpy(cache), torch.from_numpy(w), torch.from_numpy(lens),
                                         torch.from_numpy(table), None, L)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("B,H", [(1, 128), (74, 64), (74, 7)])
def test_fp8_paged_mqa_logits_batches(B, H):
    rng = np.random.default_rng(B + H)
    next_n, D, bs, L = 2, 128, 64, 200
    lens = rng.integers(0, L + 1, B).astype(np.int32)
    q, cache, w, table, rows = paged_problem(rng, B, next_n, H, D, bs, lens)
    got = deep_gemm.fp8_paged_mqa_logits(q, cache, w, lens, table, None, L)
    j = np.arange(L)
    assert_paged(got, q, w, rows, L, lambda b, n: (j < lens[b]) & (j <= lens[b] - next_n + n))
