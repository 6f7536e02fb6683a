"""dsops.compat._cann_v4_attn (the PyPTO DeepSeek-V4 attention ops SWA, CFA, SCFA) over the vendor test files'
cases: each result is compared (a) bit for bit with the dsops operator it maps onto, called directly, and (b) with
a NumPy formulation of the vendor's documented math written here, by the vendor tests' own comparison rule.

Data as the vendor tests draw it: q, keys and sinks U(-1, 1); whole blocks handed out from a random permutation,
−1 in unused table entries. The vendor fills every block of a pool; here only the blocks a case reads get values
and the others hold NaN, so that a read of a wrong row shows (and the large pools stay cheap to build).
"""
import inspect

import numpy as np
import pytest

import dsops
from dsops.compat import cann as v4  # the V4 PyPTO calls, reached as the vendor tests reach them

BF16 = dsops.bfloat16
F32 = np.float32
pytestmark = pytest.mark.skipif(BF16 is None, reason="ml_dtypes is needed for bf16 arrays")


def bf16(a):
    return np.asarray(a, F32).astype(BF16).astype(F32)


def uniform_bf16(rng, shape):
    return (rng.random(shape, dtype=F32) * 2 - 1).astype(BF16)


def mismatches(t, t_ref, atol, rtol):
    """Elements outside the vendor tests' bound |t − t_ref| ≤ atol + rtol · |t_ref| (NaN or Inf count as outside)."""
    t, t_ref = np.asarray(t, F32), np.asarray(t_ref, F32)
    assert t.shape == t_ref.shape, (t.shape, t_ref.shape)
    ok = np.abs(t - t_ref) <= atol + rtol * np.abs(t_ref)
    return int((~ok).sum())


def assert_vendor_close(t, t_ref, atol, rtol):
    """The vendor tests' rule: no NaN or Inf, at most round(0.5 %) of the elements outside the bound."""
    assert np.isfinite(np.asarray(t, F32)).all() and np.isfinite(np.asarray(t_ref, F32)).all()
    bad = mismatches(t, t_ref, atol, rtol)
    assert bad <= round(0.005 * np.asarray(t).size), f"{bad} of {np.asarray(t).size} outside"


def vendor_close(t, t_ref, atol, rtol):
    return mismatches(t, t_ref, atol, rtol) <= round(0.005 * np.asarray(t).size)


def block_table(rng, counts, width, ids=None):
    """Sequence b gets counts[b] block ids, taken in turn from a random permutation of range(ids) (default: just
    enough ids), −1 in the rest of its row."""
    perm = rng.permutation(sum(counts) if ids is None else ids)
    table = np.full((len(counts), width), -1, np.int32)
    used = 0
    for b, n in enumerate(counts):
        table[b, :n] = perm[used:used + n]
        used += n
    return table


def pool(rng, nblocks, bs, D, table, needed):
    """[nblocks, bs, D] bf16: the blocks named by `needed` ((sequence, logical block) pairs) U(-1, 1), others NaN."""
    p = np.empty((nblocks, bs, D), np.uint16)
    p.fill(0x7FC0)
    p = p.view(BF16)
    phys = sorted({int(table[b, j]) for b, j in needed})
    p[phys] = uniform_bf16(rng, (len(phys), bs, D))
    return p


def rows(table, b, pos, bs):
    pos = np.asarray(pos, np.int64)
    return table[b, pos // bs].astype(np.int64) * bs + pos % bs


def tokens(cu, seqused):
    """(sequence b, token t, index i, S_b, L): token t sees the first L original positions."""
    for b in range(len(seqused)):
        S = int(cu[b + 1] - cu[b])
        for i in range(S):
            yield b, int(cu[b]) + i, i, S, int(seqused[b]) - (S - 1 - i)


def window(L, win):
    w = min(max(L, 0), win)
    return np.arange(L - w, L)


# ---- the vendor's math, one token at a time ----------------------------------------------------------------------

def scores(q, keys, scale):
    return (q @ keys.T) * F32(scale)   # fp32 products and sums, as the vendor goldens


def attention_one_softmax(q, keys, scale, sinks):
    """SWA / SCFA (and the CFA kernel): one softmax over the whole key list, the sink adding exp(sink − max) to the
    denominator; probabilities rounded to bf16 before P·V; bf16 out. No keys: 0."""
    if len(keys) == 0:
        return np.zeros(q.shape, F32)
    s = scores(q, keys, scale)
    m = s.max(1, keepdims=True)
    w = np.exp(s - m)
    den = w.sum(1, keepdims=True) + np.exp(sinks[:, None] - m)
    return bf16(bf16(w / den) @ keys)


def attention_flash(q, tiles, scale, sinks):
    """The CFA golden: an online softmax over the key tiles in turn; each tile's exp(s − running max) rounded to
    bf16 for P·V while the running sum takes it unrounded; at the end O / (sum + exp(sink − max)), bf16."""
    m = l = O = None
    for keys in tiles:
        if len(keys) == 0:
            continue
        s = scores(q, keys, scale)
        mn = s.max(1, keepdims=True) if m is None else np.maximum(m, s.max(1, keepdims=True))
        w = np.exp(s - mn)
        pv = bf16(w) @ keys
        if m is None:
            l, O = w.sum(1, keepdims=True), pv
        else:
            a = np.exp(m - mn)
            l, O = l * a + w.sum(1, keepdims=True), O * a + pv
        m = mn
    if m is None:
        return np.zeros(q.shape, F32)
    return bf16(O / (l + np.exp(sinks[:, None] - m)))


# ---- SWA: npu_sliding_window_attention ----------------------------------------------------------------------------

def swa_case(seed, S, seqused, N=64, D=512, bs=128, win=128):
    rng = np.random.default_rng(seed)
    cu = np.concatenate([[0], np.cumsum(S)]).astype(np.int32)
    counts = [-(-n // bs) for n in seqused]
    table = block_table(rng, counts, max(counts))
    needed = {(b, int(p) // bs) for b, _, _, _, L in tokens(cu, seqused) for p in window(L, win)}
    return dict(q=uniform_bf16(rng, (int(cu[-1]), N, D)), table=table, kv=pool(rng, sum(counts), bs, D, table, needed),
                seqused=np.array(seqused, np.int32), sinks=rng.uniform(-1, 1, N).astype(F32), cu=cu, win=win, bs=bs)


def swa_reference(c, win=None, scale=None, sinks=True):
    q, kv = c["q"].astype(F32), c["kv"].reshape(-1, c["q"].shape[-1])
    D = q.shape[-1]
    s = c["sinks"] if sinks else np.full(q.shape[1], -np.inf, F32)
    out = np.zeros(q.shape, F32)
    for b, t, _, _, L in tokens(c["cu"], c["seqused"]):
        keys = kv[rows(c["table"], b, window(L, c["win"] if win is None else win), c["bs"])].astype(F32)
        out[t] = attention_one_softmax(q[t], keys, D ** -0.5 if scale is None else scale, s)
    return out


def call_swa(c):
    mask = v4.get_mask(4, c["q"].shape[1], 0, c["bs"])
    return v4.npu_sliding_window_attention(c["q"], c["table"], c["kv"][:, :, None], c["seqused"], c["sinks"], c["win"],
                                           mask=mask, cu_seqlens_q=c["cu"])


@pytest.mark.parametrize("name,B,S1,seq", [
    ("test_win_atten_tnd_mask: b 64, s 2, seqused 8192", 64, 2, 8192),
    ("not a vendor case: b 3, s 5, a token that sees nothing and short sequences", 3, 5, [130, 3, 40]),
])
def test_sliding_window_attention(name, B, S1, seq):
    seqused = seq if isinstance(seq, list) else [seq] * B
    c = swa_case(1, [S1] * B, seqused)
    got = call_swa(c)
    assert got.dtype == BF16 and got.shape == c["q"].shape
    native = dsops.swa(q=c["q"], cu_seqlens_q=c["cu"], seqused_kv=c["seqused"], ori_kv=c["kv"],
                       ori_block_table=c["table"], sinks=c["sinks"], softmax_scale=512 ** -0.5, win_size=128)["out"]
    np.testing.assert_array_equal(got.view(np.uint16), native.view(np.uint16))
    # the vendor test: compare(golden, out, rtol 2^-7, atol 1e-4)
    assert_vendor_close(swa_reference(c), got, atol=1e-4, rtol=0.0078125)
    lonely = [t for _, t, _, _, L in tokens(c["cu"], seqused) if L <= 0]
    assert np.all(got[lonely].astype(F32) == 0)         # nothing to see: 0


def test_get_mask():
    m = v4.get_mask(4, 64, 0, 128)
    assert m.shape == (256, 512) and m.dtype == bool
    for j in range(4):
        np.testing.assert_array_equal(np.flatnonzero(m[64 * j]), np.arange(128 + j, 256 + j))


def test_swa_window_and_scale_are_mapped():
    """The reference with a window one shorter, the scale of a 576-wide head, or no sink misses the vendor's bound:
    the comparison above would catch any of those mappings."""
    c = swa_case(2, [2] * 8, [8192] * 8)
    got = call_swa(c)
    assert vendor_close(swa_reference(c), got, 1e-4, 0.0078125)
    assert not vendor_close(swa_reference(c, win=127), got, 1e-4, 0.0078125)
    assert not vendor_close(swa_reference(c, scale=576 ** -0.5), got, 1e-4, 0.0078125)
    assert not vendor_close(swa_reference(c, sinks=False), got, 1e-4, 0.0078125)


def test_swa_other_shapes_follow_dsops():
    """Shapes the vendor op refuses (N1 4, D 64, block size 16, window 8): dsops computes them all."""
    c = swa_case(3, [3, 1], [50, 2], N=4, D=64, bs=16, win=8)
    assert_vendor_close(swa_reference(c), call_swa(c), atol=1e-4, rtol=0.0078125)


# ---- CFA: npu_compress_flash_attention ---------------------------------------------------------------------------

def cfa_case(seed, B, S1, seqused, N=64, D=512, bs=128, R=128):
    """The vendor's decode case layout: ori blocks for every token, ceil((seqused // R) / bs) compressed blocks per
    sequence drawn from the ids of a pool as large as the ori one; both tables max_blocks wide."""
    rng = np.random.default_rng(seed)
    cu = (np.arange(B + 1) * S1).astype(np.int32)
    width = -(-max(seqused) // bs)
    ori_counts = [-(-n // bs) for n in seqused]
    nb = B * -(-max(max(seqused), bs + S1 - 1) // bs)
    ori_table = block_table(rng, ori_counts, width, nb)
    cmp_table = block_table(rng, [-(-(n // R) // bs) for n in seqused], width, sum(ori_counts))
    toks = list(tokens(cu, seqused))
    need_ori = {(b, int(p) // bs) for b, _, _, _, L in toks for p in window(L, 128)}
    need_cmp = {(b, j // bs) for b, _, _, _, L in toks for j in range(max(L, 0) // R)}
    return dict(q=uniform_bf16(rng, (B * S1, N, D)), cmp_kv=pool(rng, B * width, bs, D, cmp_table, need_cmp),
                sinks=rng.uniform(-1, 1, N).astype(F32), cmp_table=cmp_table, seqused=np.array(seqused, np.int32),
                ori_kv=pool(rng, nb, bs, D, ori_table, need_ori), ori_table=ori_table, cu=cu, bs=bs, R=R)


def cfa_reference(c, flash=True, count=None):
    """flash: the vendor golden (window tile, then tiles of one cmp block); else one softmax, as its kernel.
    count(L): compressed entries token L reads (the vendor: L // R)."""
    q = c["q"].astype(F32)
    D, bs = q.shape[-1], c["bs"]
    ori, cmp = c["ori_kv"].reshape(-1, D), c["cmp_kv"].reshape(-1, D)
    out = np.zeros(q.shape, F32)
    for b, t, _, _, L in tokens(c["cu"], c["seqused"]):
        n = max(L, 0) // c["R"] if count is None else count(L)
        win = ori[rows(c["ori_table"], b, window(L, 128), bs)].astype(F32)
        cmp_rows = cmp[rows(c["cmp_table"], b, np.arange(n), bs)].astype(F32)
        if flash:
            tiles = [win] + [cmp_rows[j:j + bs] for j in range(0, n, bs)]
            out[t] = attention_flash(q[t], tiles, D ** -0.5, c["sinks"])
        else:
            out[t] = attention_one_softmax(q[t], np.concatenate([win, cmp_rows]), D ** -0.5, c["sinks"])
    return out


def call_cfa(c):
    args = [c["q"], c["cmp_kv"][:, :, None], c["sinks"], c["cmp_table"], c["seqused"], c["ori_kv"][:, :, None],
            c["ori_table"]]
    return v4.npu_compress_flash_attention(*args, c["R"])


@pytest.mark.parametrize("name,B,S1,seq", [
    ("get_decode_case: b 64, s1 2, s2 8192, cmp_ratio 128", 64, 2, 8192),
    ("not a vendor case: tokens with no compressed entry, a partial compressed block", 3, 4, [100, 300, 20000]),
])
def test_compressed_flash_attention(name, B, S1, seq):
    seqused = seq if isinstance(seq, list) else [seq] * B
    c = cfa_case(4, B, S1, seqused)
    got = call_cfa(c)
    assert got.dtype == BF16 and got.shape == c["q"].shape
    native = dsops.cfa(q=c["q"], cu_seqlens_q=c["cu"], seqused_kv=c["seqused"], ori_kv=c["ori_kv"],
                       ori_block_table=c["ori_table"], cmp_kv=c["cmp_kv"], cmp_block_table=c["cmp_table"],
                       sinks=c["sinks"], softmax_scale=512 ** -0.5, win_size=128, cmp_ratio=128, p_mode="tiled",
                       p_tile=128)["out"]
    np.testing.assert_array_equal(got.view(np.uint16), native.view(np.uint16))
    # the vendor test: compare(golden, out, rtol 5e-4, atol 5e-4); its kernel (one softmax) passes the same bound
    assert_vendor_close(cfa_reference(c), got, atol=5e-4, rtol=5e-4)
    assert_vendor_close(cfa_reference(c, flash=False), got, atol=5e-4, rtol=5e-4)


def test_cfa_compressed_count_is_mapped():
    """Counting ⌊(L − 1) / 128⌋ entries (one fewer whenever L is a multiple of 128) misses the vendor's bound."""
    c = cfa_case(5, 8, 2, [8192] * 8)
    got = call_cfa(c)
    assert vendor_close(cfa_reference(c), got, 5e-4, 5e-4)
    assert not vendor_close(cfa_reference(c, count=lambda L: max(L - 1, 0) // 128), got, 5e-4, 5e-4)


def test_cfa_pypto_wrapper_default_ratio():
    """compress_flash_attention_pypto keeps the vendor's default cmp_ratio 1; given 128 it is the same call."""
    assert inspect.signature(v4.compress_flash_attention_pypto).parameters["cmp_ratio"].default == 1
    assert inspect.signature(v4.npu_compress_flash_attention).parameters["cmp_ratio"].default == 128
    c = cfa_case(6, 2, 2, [300, 500], N=4, D=64, bs=16)
    args = [c["q"], c["cmp_kv"][:, :, None], c["sinks"], c["cmp_table"], c["seqused"], c["ori_kv"][:, :, None],
            c["ori_table"]]
    np.testing.assert_array_equal(v4.compress_flash_attention_pypto(*args, 128).view(np.uint16),
                                  v4.npu_compress_flash_attention(*args).view(np.uint16))


# ---- SCFA: npu_sparse_compress_flash_attention ---------------------------------------------------------------------

def scfa_case(seed, cu, seqused, N=64, D=512, K=512, bs=128, R=4, win=128):
    """The vendor's data: tables of just enough blocks; each token lists 0 … min(seqused // R, K) − 1 then zeros,
    or, with K or more entries, a random permutation of 0 … K − 1."""
    rng = np.random.default_rng(seed)
    cu = np.asarray(cu, np.int32)
    T = int(cu[-1])
    ncmp = [n // R for n in seqused]
    ori_counts, cmp_counts = [-(-n // bs) for n in seqused], [-(-n // bs) for n in ncmp]
    ori_table = block_table(rng, ori_counts, max(ori_counts))
    cmp_table = block_table(rng, cmp_counts, max(max(cmp_counts), 1))
    idx = np.zeros((T, K), np.int32)
    for b, t, _, _, _ in tokens(cu, seqused):
        n = min(ncmp[b], K)
        idx[t, :n] = np.arange(n) if n < K else rng.permutation(K)
    toks = list(tokens(cu, seqused))
    need_ori = {(b, int(p) // bs) for b, _, _, _, L in toks for p in window(L, win)}
    need_cmp = {(b, int(j) // bs) for b, t, i, S, _ in toks
                for j in idx[t, :vendor_count(seqused[b], S, i, R, K)]}
    return dict(q=uniform_bf16(rng, (T * N, D)), cu=cu,
                ori_kv=pool(rng, sum(ori_counts), bs, D, ori_table, need_ori).reshape(-1, D),
                cmp_kv=pool(rng, max(sum(cmp_counts), 1), bs, D, cmp_table, need_cmp).reshape(-1, D),
                ori_table=ori_table, cmp_table=cmp_table, sinks=rng.uniform(-1, 1, N).astype(F32),
                seqused=np.array(seqused, np.int32), idx=idx, scale=D ** -0.5, win=win, R=R, bs=bs, N=N)


def vendor_count(seqused, S, i, R, K):
    """Listed entries the vendor reads for token i of S: ⌊seqused / R⌋ − (S − 1 − i), clipped to 0 … K."""
    return min(max(seqused // R - S + 1 + i, 0), K)


def scfa_reference(c, count=vendor_count, every=1):
    """Tokens t with t % every == 0 (and the last one); the others stay 0."""
    N, bs = c["N"], c["bs"]
    D = c["q"].shape[-1]
    q = c["q"].reshape(-1, N, D).astype(F32)
    ori, cmp = c["ori_kv"], c["cmp_kv"]
    out = np.zeros(q.shape, F32)
    for b, t, i, S, L in tokens(c["cu"], c["seqused"]):
        if L <= 0 or (t % every and t != len(q) - 1):
            continue                                    # L ≤ 0: nothing to see, 0
        k = count(int(c["seqused"][b]), S, i, c["R"], c["idx"].shape[1])
        keys = np.concatenate([ori[rows(c["ori_table"], b, window(L, c["win"]), bs)],
                               cmp[rows(c["cmp_table"], b, c["idx"][t, :k], bs)]]).astype(F32)
        out[t] = attention_one_softmax(q[t], keys, c["scale"], c["sinks"])
    return out.reshape(-1, D)


def scfa_args(c):
    return [c["q"], c["cu"], c["ori_kv"], c["cmp_kv"], c["ori_table"], c["cmp_table"], c["sinks"], c["seqused"],
            c["idx"], c["scale"], c["win"], c["R"]]


def scfa_native(c):
    N, D = c["N"], c["q"].shape[-1]
    length = np.array([vendor_count(int(c["seqused"][b]), S, i, c["R"], c["idx"].shape[1])
                       for b, _, i, S, _ in tokens(c["cu"], c["seqused"])], np.int32)
    return dsops.scfa(q=c["q"].reshape(-1, N, D), cu_seqlens_q=c["cu"], seqused_kv=c["seqused"],
                      ori_kv=c["ori_kv"].reshape(-1, c["bs"], D), ori_block_table=c["ori_table"],
                      cmp_kv=c["cmp_kv"].reshape(-1, c["bs"], D), cmp_block_table=c["cmp_table"],
                      cmp_indices=c["idx"], cmp_topk_length=length, sinks=c["sinks"], softmax_scale=c["scale"],
                      win_size=c["win"], cmp_ratio=c["R"])["out"].reshape(-1, D)


# the vendor's cases (get_case_config): name, q_act_seqs, seqused, rtol (the acl-graph test of b1_s4 compares at
# 0.005, the others at 2^-7; atol 1e-4 throughout), and which tokens the NumPy side checks (every n-th): s256 checks
# every 2nd of its 256 tokens (and the last), which keeps it under ~5 s on one core with a reference BLAS
SCFA_CASES = [
    ("sfa_bf16_b1_s4_seq64K_p", [0, 4], [65536], 0.005, 1),
    ("sfa_bf16_b1_s256_seq64K_p", [0, 256], [65536], 0.0078125, 2),
    ("sfa_bf16_b4_s16_seq64K_p", [0, 16, 32, 48, 49], [65536] * 4, 0.0078125, 1),
    ("sfa_bf16_b1_s16_seq64K_p", [0, 16], [130], 0.0078125, 1),
    ("sfa_bf16_b64_s2_seq8K_d", [2 * i for i in range(65)], [8192] * 64, 0.0078125, 1),
]


@pytest.mark.parametrize("name,cu,seqused,rtol,every", SCFA_CASES, ids=[c[0] for c in SCFA_CASES])
def test_sparse_compressed_flash_attention(name, cu, seqused, rtol, every):
    c = scfa_case(7, cu, seqused)
    got = v4.npu_sparse_compress_flash_attention(*scfa_args(c))
    assert got.dtype == BF16 and got.shape == c["q"].shape
    np.testing.assert_array_equal(got.view(np.uint16), scfa_native(c).view(np.uint16))
    # the vendor test: compare(out, golden, atol 1e-4, rtol), here over the tokens checked
    T = len(c["idx"])
    pick = np.flatnonzero((np.arange(T) % every == 0) | (np.arange(T) == T - 1))

    def by_token(a):
        return a.reshape(T, c["N"], -1)[pick]
    assert_vendor_close(by_token(got), by_token(scfa_reference(c, every=every)), atol=1e-4, rtol=rtol)


def test_scfa_tokens_without_compressed_entries():
    """Where the vendor's golden has no result (k = 0: it raises UnboundLocalError): seqused 5 with 2 tokens gives
    the first one k = 0 and a 4-token window; a sequence of 1 token in a call of 3 gives two tokens with nothing
    to see (0) and one with a 1-token window and k = 0."""
    c = scfa_case(8, [0, 2, 5], [5, 1])
    assert [vendor_count(5, 2, i, 4, 512) for i in range(2)] == [0, 1]
    got = v4.npu_sparse_compress_flash_attention(*scfa_args(c))
    np.testing.assert_array_equal(got.view(np.uint16), scfa_native(c).view(np.uint16))
    ref = scfa_reference(c)
    assert_vendor_close(got, ref, atol=1e-4, rtol=0.0078125)
    by_token = got.reshape(5, c["N"], -1).astype(F32)
    assert np.all(by_token[2:4] == 0)                   # L ≤ 0
    assert np.all(np.abs(by_token[[0, 4]]).max(-1) > 0)  # window only, with the sink


def test_scfa_compressed_count_is_mapped():
    """The causal count min(⌊L / 4⌋, K) (28 … 32 instead of the vendor's 17 … 32 for seqused 130, 16 tokens) misses
    the vendor's bound, and so does a window of 127."""
    c = scfa_case(9, [0, 16], [130])
    got = v4.npu_sparse_compress_flash_attention(*scfa_args(c))
    assert vendor_close(got, scfa_reference(c), 1e-4, 0.0078125)
    causal = scfa_reference(c, count=lambda n, S, i, R, K: min(max(n - S + 1 + i, 0) // R, K))
    assert not vendor_close(got, causal, 1e-4, 0.0078125)
    assert not vendor_close(got, scfa_reference(dict(c, win=127)), 1e-4, 0.0078125)


def test_scfa_kernel_form_in_place():
    """sparse_compress_flash_attention_kernel writes attention_out in place; it takes any block size."""
    c = scfa_case(10, [0, 3, 5], [300, 70], N=4, D=64, K=16, bs=16)
    out = np.zeros(c["q"].shape, BF16)
    cfg = v4.SCFATileShapeConfig(g_tile=64, c1_tile_shape=[64, 64, 128, 512, 128, 128], v1_tile_shape=[32, 640],
                                 c2_tile_shape=[64, 64, 128, 640, 256, 256])
    a = scfa_args(c)
    got = v4.sparse_compress_flash_attention_kernel(*a[:9], out, c["N"], 1, c["scale"], 16, c["bs"], c["win"], c["R"],
                                                    cfg)
    assert got is out
    np.testing.assert_array_equal(out.view(np.uint16), scfa_native(c).view(np.uint16))
    assert_vendor_close(out, scfa_reference(c), atol=1e-4, rtol=0.0078125)


# ---- torch tensors in, torch tensors out ------------------------------------------------------------------------

def test_torch_tensors():
    torch = pytest.importorskip("torch")

    def tt(a):
        a = np.ascontiguousarray(a)
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16) if a.dtype == BF16 else torch.from_numpy(a)

    def same(got, want):
        assert isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16
        np.testing.assert_array_equal(got.view(torch.int16).numpy(), want.view(np.int16))

    c = swa_case(11, [2, 2], [200, 9], N=4, D=64, bs=16, win=128)
    got = v4.npu_sliding_window_attention(tt(c["q"]), tt(c["table"]), tt(c["kv"][:, :, None]), tt(c["seqused"]),
                                          tt(c["sinks"]), 128, torch.from_numpy(v4.get_mask(4, 4)), tt(c["cu"]))
    same(got, call_swa(c))

    c = cfa_case(12, 2, 2, [300, 90], N=4, D=64, bs=16)
    args = [c["q"], c["cmp_kv"][:, :, None], c["sinks"], c["cmp_table"], c["seqused"], c["ori_kv"][:, :, None],
            c["ori_table"]]
    same(v4.npu_compress_flash_attention(*[tt(a) for a in args]), call_cfa(c))

    c = scfa_case(13, [0, 2, 5], [5, 600], N=4, D=64, K=32)
    a = scfa_args(c)
    want = v4.npu_sparse_compress_flash_attention(*a)
    same(v4.sparse_compress_flash_attention_pypto(*[tt(x) for x in a[:9]], *a[9:]), want)
    out = torch.zeros(tuple(c["q"].shape), dtype=torch.bfloat16)
    assert v4.sparse_compress_flash_attention_kernel(*[tt(x) for x in a[:9]], out, 4, 1, c["scale"], 32, 128, 128,
                                                     4) is out
    same(out, want)
