"""DeepGEMM's indexer-logit calls on the CPU: `fp8_mqa_logits` (keys of one contiguous sequence buffer, a key range
per query), `get_paged_mqa_logits_metadata` and `fp8_paged_mqa_logits` (paged FP8 keys), with DeepGEMM's argument
lists, defaults, shapes and return values, computed by dsops's lightning_indexer (fp8 variant, logits output).

The score of key j for query row i is (Σ_h max(q_h · k_j, 0) · w_h) · s_j: e4m3 queries and keys, fp32 head
weights w and one fp32 scale s_j per key. Masking as DeepGEMM's: `fp8_mqa_logits` keeps keys ks[i] ≤ j < ke[i];
`fp8_paged_mqa_logits` keeps j < context_len and j ≤ the query's position (context_len − next_n + n for the n-th
of a sequence's next_n queries), or only j < context_lens[b, n] when the lengths are given per query. Masked
entries are −inf whatever `clean_logits` says (DeepGEMM leaves them unspecified when it is False). The paged cache
is DeepGEMM's: per block, the block_size × D e4m3 values, then block_size fp32 scales; dsops reads it in place.
docs/COMPAT.md lists what differs.
"""
import os

import numpy as np

import dsops

from ._arrays import _back, _i32, _is_torch, _np

__all__ = ["get_num_sms", "fp8_mqa_logits", "get_paged_mqa_logits_metadata", "fp8_paged_mqa_logits"]


def get_num_sms():
    """The number of parallel workers: on the CPU, the cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _e4m3(x, name):
    """An e4m3 array from torch float8 / uint8 bytes or an ml_dtypes float8_e4m3fn array."""
    a = _np(x)
    if a.dtype != np.uint8:
        raise TypeError(f"{name} must be float8_e4m3fn (or its bytes as uint8); got {a.dtype}")
    return a.view(dsops.float8_e4m3fn)


def _f32(x, name):
    a = _np(x)
    if a.dtype != np.float32:
        raise TypeError(f"{name} must be float32; got {a.dtype}")
    return a


def _score(q, w, keys, scales, table, cu, used, logits):
    """lightning_indexer (fp8) writing `logits` in place; the top-k it also makes (K 1) is dropped."""
    dsops.lightning_indexer(q_idx=q, weights=w, key_cache=keys, key_scale_cache=scales, block_table=table,
                            cu_seqlens_q=cu, seqused_kv=used, topk=1, topk_indices=np.empty((q.shape[0], 1), np.int32),
                            logits=logits)


def fp8_mqa_logits(q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits=True, max_seqlen_k=0):
    """Logits of every query row against a key range of one key buffer.

    q [M, H, D] e4m3; kv = (k [N, D] e4m3, k_scale [N] fp32); weights [M, H] fp32; cu_seq_len_k_start and
    cu_seq_len_k_end [M] int32. Returns [M, N] fp32 (row i: the keys ks[i] ≤ j < ke[i], −inf elsewhere), or with
    max_seqlen_k > 0 the compressed [M, max_seqlen_k] (column c: key ks[i] + c)."""
    torch_io = _is_torch(q)
    k, k_scale = kv
    qa, ka, sa = _e4m3(q, "q"), _e4m3(k, "kv[0]"), _f32(k_scale, "kv[1]")
    wa = _f32(weights, "weights")
    ks, ke = _i32(cu_seq_len_k_start), _i32(cu_seq_len_k_end)
    M, N = qa.shape[0], ka.shape[0]
    if max_seqlen_k and clean_logits:
        raise ValueError("fp8_mqa_logits: max_seqlen_k > 0 needs clean_logits=False, as in DeepGEMM")
    width = max_seqlen_k if max_seqlen_k else N
    out = np.full((M, width), -np.inf, np.float32)
    # rows sharing a start form one call: the keys from that start are one block, every row its own sequence
    i = 0
    while i < M:
        r = i + 1
        while r < M and ks[r] == ks[i]:
            r += 1
        start = min(max(int(ks[i]), 0), N)
        lengths = np.clip(np.minimum(ke[i:r], N) - start, 0, None).astype(np.int32)
        col = start if not max_seqlen_k else start - int(ks[i])
        if max_seqlen_k and lengths.max(initial=0) > width - col:
            raise ValueError(f"fp8_mqa_logits: a row has {int(lengths.max())} keys, more than max_seqlen_k = {width}")
        if start < N and lengths.max(initial=0) > 0:
            rows = r - i
            _score(qa[i:r], wa[i:r], ka[start:].reshape(1, N - start, -1), sa[start:].reshape(1, N - start),
                   np.zeros((rows, 1), np.int32), np.arange(rows + 1, dtype=np.int32), lengths,
                   out[i:r, col:col + min(width - col, N - start)])
        i = r
    return _back(out, torch_io)


def get_paged_mqa_logits_metadata(context_lens, block_kv, num_sms=None, indices=None):
    """DeepGEMM's work split, [num_sms + 1, 2] int32: for worker w, the (query row, key segment) it starts at, over
    segments of 256 keys. fp8_paged_mqa_logits accepts it and does not need it. The two-argument form of some
    DeepGEMM versions, (context_lens, num_sms), is accepted too; `indices` is accepted and ignored."""
    if num_sms is None:
        num_sms = block_kv
    lens = _i32(context_lens)
    lens = lens[:, -1] if lens.ndim == 2 else lens.reshape(-1)
    segments = -(-np.maximum(lens.astype(np.int64), 0) // 256)
    ends = np.cumsum(segments)
    total = int(ends[-1]) if len(ends) else 0
    out = np.zeros((num_sms + 1, 2), np.int32)
    for w in range(num_sms + 1):
        first = w * (total // num_sms) + min(w, total % num_sms)
        row = int(np.searchsorted(ends, first, side="right"))
        out[w] = (row, first - (int(ends[row - 1]) if row > 0 else 0))
    return _back(out, _is_torch(context_lens))


def fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                         clean_logits=False):
    """Logits of every query against its sequence's paged keys.

    q [B, next_n, H, D] e4m3; kv_cache [num_blocks, block_size, 1, D + 4] uint8 (DeepGEMM's blocks); weights
    [B * next_n, H] fp32; context_lens [B] (or [B, next_n], one length per query) int32; block_table [B, max_blocks]
    int32. Returns [B * next_n, max_context_len] fp32, −inf where a key is masked."""
    torch_io = _is_torch(q)
    qa = _e4m3(q, "q")
    B, next_n, H, D = qa.shape
    raw = _np(kv_cache)
    if raw.dtype != np.uint8:
        raise TypeError(f"kv_cache must be uint8 (or float8) bytes; got {raw.dtype}")
    nb, bs = raw.shape[0], raw.shape[1]
    if raw.size != nb * bs * (D + 4):
        raise ValueError(f"kv_cache has shape {raw.shape}; expected [num_blocks, block_size, 1, {D + 4}]")
    blocks = np.ascontiguousarray(raw).reshape(nb, bs * (D + 4))
    keys = blocks[:, :bs * D].reshape(nb, bs, D).view(dsops.float8_e4m3fn)   # strides {bs (D + 4), D, 1}
    scales = blocks[:, bs * D:].view(np.float32)                               # strides {bs (D + 4) / 4, 1}
    lens = _i32(context_lens)
    table = _i32(block_table)
    T = B * next_n
    if lens.ndim == 2:  # one length per query: each query its own sequence
        cu, used, table = np.arange(T + 1, dtype=np.int32), lens.reshape(-1), np.repeat(table, next_n, axis=0)
    else:
        cu, used = (np.arange(B + 1) * next_n).astype(np.int32), lens.reshape(-1)
    out = np.empty((T, int(max_context_len)), np.float32)
    _score(qa.reshape(T, H, D), _f32(weights, "weights"), keys, scales, table, cu, used, out)
    return _back(out, torch_io)
