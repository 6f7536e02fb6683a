"""The Ascend (CANN) vendor operators' calls on the CPU, with the vendor's function names, argument names and order,
defaults, shapes and return values, computed by dsops operators. So far: `npu_lightning_indexer_pto` (PyPTO,
DeepSeek-V3.2's lightning indexer with top-k) on `lightning_indexer`'s bf16 variant.

Where the vendor op has shape limits that dsops lacks, the call follows dsops (docstrings say which); where the
vendor's documented behaviour and its golden differ, docs/COMPAT.md says which one is reproduced.
"""
import numpy as np

import dsops

from ._arrays import _back, _is_torch, _np

__all__ = ["npu_lightning_indexer_pto"]


def _bf16(x, name):
    a = _np(x)
    if a.dtype != dsops.bfloat16:
        raise TypeError(f"{name} must be bfloat16; got {a.dtype}")
    return a


def npu_lightning_indexer_pto(query, key, weights, *, actual_seq_lengths_query=None, actual_seq_lengths_key=None,
                              block_table=None, layout_query="BSND", layout_key="PA_BSND", sparse_count=2048,
                              sparse_mode=3):
    """Top-`sparse_count` key positions per query token by the index score Σ_h w_h · ReLU(q_h · k_j).

    query [B, S1, N1, D] bf16; key [block_num, block_size, 1, D] bf16 (PA_BSND); weights [B, S1, N1] bf16;
    actual_seq_lengths_key [B] int32 and block_table [B, max_blocks] int32 (both required, as in the vendor op).
    Returns [B, S1, 1, sparse_count] int32: positions in decreasing score, −1 past the keys a token sees.
    sparse_mode 3: query s of a sequence with L keys sees the first L − (S1 − 1 − s) of them (causal, aligned at
    the bottom right); 0: every query sees all L. dsops accepts any N1, D, block size and sparse_count; only one
    key head (N2 = 1) and the BSND / PA_BSND layouts exist, as in the vendor op."""
    if layout_query != "BSND" or layout_key != "PA_BSND":
        raise NotImplementedError(f"layouts {layout_query!r} / {layout_key!r}: only BSND / PA_BSND exist")
    if sparse_mode not in (0, 3):
        raise ValueError(f"sparse_mode = {sparse_mode}: the vendor op has 0 and 3")
    if actual_seq_lengths_key is None or block_table is None:
        raise ValueError("actual_seq_lengths_key and block_table are required")
    torch_io = _is_torch(query)
    q, k, w = _bf16(query, "query"), _bf16(key, "key"), _bf16(weights, "weights")
    if q.ndim != 4 or k.ndim != 4 or w.ndim != 3:
        raise ValueError(f"query {q.shape}, key {k.shape}, weights {w.shape}: expected [B, S1, N1, D], "
                         "[block_num, block_size, 1, D] and [B, S1, N1]")
    if k.shape[2] != 1:
        raise NotImplementedError(f"key has {k.shape[2]} heads: the indexer has one key head")
    B, S1, N1, D = q.shape
    if actual_seq_lengths_query is not None and np.any(_np(actual_seq_lengths_query) != S1):
        raise NotImplementedError("actual_seq_lengths_query other than S1 for every batch")
    lens = np.ascontiguousarray(_np(actual_seq_lengths_key), dtype=np.int32).reshape(-1)
    table = np.ascontiguousarray(_np(block_table), dtype=np.int32)
    T = B * S1
    if sparse_mode == 3:  # the call's S1 tokens of a sequence are its last ones
        cu = (np.arange(B + 1) * S1).astype(np.int32)
        used = lens
    else:  # every query its own sequence, seeing all L keys
        cu = np.arange(T + 1, dtype=np.int32)
        used = np.repeat(lens, S1)
        table = np.repeat(table, S1, axis=0)
    out = np.empty((T, int(sparse_count)), np.int32)
    dsops.lightning_indexer(q_idx=q.reshape(T, N1, D), weights=w.reshape(T, N1), key_cache=k.reshape(k.shape[0],
                            k.shape[1], D), block_table=table, cu_seqlens_q=cu, seqused_kv=used,
                            topk=int(sparse_count), topk_indices=out)
    return _back(out.reshape(B, S1, 1, int(sparse_count)), torch_io)
