"""FlashMLA's sparse attention calls on the CPU: `get_mla_metadata`, `flash_mla_with_kvcache` (sparse decode over
FP8 caches) and `flash_mla_sparse_fwd` (sparse prefill over bf16 keys), with FlashMLA's argument lists, defaults,
shapes and return tuples, computed by dsops's sparse_flash_attention_v32 (576-wide keys) and sas (512-wide keys).

Semantics kept from FlashMLA: indices name physical cache rows (block * page_block_size + offset), and −1, values
past the cache and entries past topk_length are skipped (never read, so NaN there changes nothing); the softmax
is natural-log with lse excluding the sink; the sink scales the output by 1 / (1 + exp(sink − lse)); a query with
no valid key gives output 0 and lse +inf; probabilities are not rounded to bf16 before P·V (p_mode fp32).
docs/COMPAT.md lists the differences (dense decode is not provided, h_kv must be 1).
"""
import dataclasses
from typing import Optional

import numpy as np

import dsops

from ._arrays import _back, _is_torch, _np

__all__ = ["FlashMLASchedMeta", "get_mla_metadata", "flash_mla_with_kvcache", "flash_mla_sparse_fwd"]

D_V = 512                        # the value width every FlashMLA sparse kernel has
V32_ROW, MODEL1_ROW = 656, 584   # bytes per token of the V32 and MODEL1 FP8 layouts (docs/OPERATORS.md §2.12)


@dataclasses.dataclass
class FlashMLASchedMeta:
    """FlashMLA's scheduling record. On the CPU there is nothing to schedule: it only remembers the first call's
    shapes, so that a later call with other shapes fails as it would on the GPU."""
    have_initialized: bool = False
    config: Optional[tuple] = None
    tile_scheduler_metadata: None = None
    num_splits: None = None


def get_mla_metadata(*args, **kwargs):
    """(FlashMLASchedMeta(), None), as FlashMLA returns; the arguments are accepted and ignored."""
    return FlashMLASchedMeta(), None


# ---- the key lists -------------------------------------------------------------------------------------------

def _valid(indices, rows, lengths, per):
    """indices [..., k] as int32 with −1 for every entry FlashMLA skips: negative, ≥ rows, or at or past the
    length of its group (lengths [G], `per` consecutive rows of the flattened indices per group)."""
    idx = np.array(indices, dtype=np.int64).reshape(-1, indices.shape[-1])
    bad = (idx < 0) | (idx >= rows)
    if lengths is not None:
        n = np.repeat(np.asarray(lengths, dtype=np.int64).reshape(-1), per)
        bad |= np.arange(idx.shape[1])[None, :] >= n[:, None]
    idx[bad] = -1
    return idx.astype(np.int32)


def _lists(*parts):
    """One key list per query: the parts side by side, the second's rows shifted past the first's; at least one
    column (dsops needs K ≥ 1; a column of −1 adds nothing)."""
    cols, offset = [], 0
    for idx, rows in parts:
        cols.append(np.where(idx >= 0, idx + offset, -1).astype(np.int32))
        offset += rows
    out = np.concatenate(cols, axis=1)
    if out.shape[1] == 0:
        out = np.full((out.shape[0], 1), -1, np.int32)
    return np.ascontiguousarray(out)


def _sequences(b, s_q, span):
    """cu_seqlens_q, and seqused_kv beyond `span` (the key-list width plus the pool's rows), so that no causal limit
    cuts a list and every pool row is a valid position: FlashMLA's sparse calls read each query's whole list."""
    cu = (np.arange(b + 1) * s_q).astype(np.int32)
    return cu, np.full(b, span + s_q, np.int32)


def _one_block(rows, width, dtype):
    """rows [R, width] as one cache block [1, R, width] (an empty cache as one block of one zero row, never read)."""
    if rows.shape[0] == 0:
        rows = np.zeros((1, width), dtype)
    return rows.reshape(1, rows.shape[0], width)


def _sinks(sink):
    return None if sink is None else np.ascontiguousarray(sink, np.float32)


def _sfa(q, pool, layout, lists, b, s_q, scale, sink):
    """sparse_flash_attention_v32 for 576-wide queries q [T, h, 576] over `pool` (one block: packed FP8 rows or bf16
    rows), the key lists [T, K] holding pool row numbers, the sink applied by the operator;
    (out [T, h, 512], lse [T, h], max_logits [T, h])."""
    cu, seqused = _sequences(b, s_q, lists.shape[1] + pool.shape[1])
    common = dict(q_nope=q[..., :D_V], q_rope=q[..., D_V:], topk_indices=lists, block_table=np.zeros((b, 1), np.int32),
                  cu_seqlens_q=cu, seqused_kv=seqused, sinks=_sinks(sink), softmax_scale=float(scale),
                  p_mode="fp32")
    if layout == "flashmla_fp8":
        r = dsops.sparse_flash_attention_v32(**common, kv_packed=pool, kv_layout="flashmla_fp8")
    else:
        r = dsops.sparse_flash_attention_v32(**common, key_nope=pool[..., :D_V], key_rope=pool[..., D_V:])
    return r["out"], r["lse"], r["max_logits"]


def _sas(q, pool, lists, b, s_q, scale, sink):
    """sas for 512-wide queries q [T, h, 512] over `pool` [NB, BS, 512] bf16 or [NB, BS, 584] MODEL1 bytes whose
    row numbers (block * BS + offset) the key lists [T, K] hold; the sink applied by the operator."""
    NB, BS = pool.shape[0], pool.shape[1]
    cu, seqused = _sequences(b, s_q, lists.shape[1] + NB * BS)
    blocks = -(-int(seqused[0]) // BS) if b else 1
    table = np.zeros((b, blocks), np.int32)
    table[:, :NB] = np.arange(NB, dtype=np.int32)  # row r of the pool is position r; later columns never read
    r = dsops.sas(q=q, cu_seqlens_q=cu, seqused_kv=seqused, cmp_kv=pool, cmp_block_table=table, cmp_indices=lists,
                  sinks=_sinks(sink), softmax_scale=float(scale),
                  win_size=0, cmp_mode="sparse", cmp_ratio=1, p_mode="fp32",
                  pool_layout="model1_fp8" if pool.dtype == np.uint8 else "bf16")
    return r["out"], r["lse"], r["max_logits"]


def _rows_of(cache, width):
    """A cache [NB, BS, (1,) width] as rows [NB * BS, width] (a view unless its blocks are padded)."""
    return cache.reshape(-1, width)


def _model1_pool(cache):
    """A MODEL1 cache (FlashMLA's [NB, BS, 1, 584] view of padded blocks) as dsops's [NB, BS, 584] view."""
    NB, BS = cache.shape[0], cache.shape[1]
    return np.lib.stride_tricks.as_strided(cache, (NB, BS, MODEL1_ROW), (cache.strides[0], MODEL1_ROW, 1))


def _model1_rows(cache):
    """The bf16 rows [NB * BS, 512] that a MODEL1 cache stands for (exact: e4m3 times a power of two)."""
    NB, BS = cache.shape[0], cache.shape[1]
    block = cache.strides[0]
    flat = np.lib.stride_tricks.as_strided(cache, (NB, block), (block, 1))
    rows = dsops.fp8_cache_dequantize(cache=np.ascontiguousarray(flat), layout="model1", block_size=BS)["kv"]
    return rows.reshape(-1, D_V)


# ---- the calls -----------------------------------------------------------------------------------------------

def flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata,
                           num_splits=None, softmax_scale=None, causal=False, is_fp8_kvcache=False, indices=None,
                           attn_sink=None, extra_k_cache=None, extra_indices_in_kvcache=None, topk_length=None,
                           extra_topk_length=None):
    """FlashMLA's decode call in sparse mode: q [b, s_q, h_q, d] bf16 (d 576 with V32 rows of 656 bytes, d 512 with
    MODEL1 rows of 584), k_cache [NB, page, 1, bytes] FP8 (uint8 or float8 views), indices [b, s_q, topk] int32
    physical rows, attn_sink [h_q] fp32, extra_k_cache / extra_indices_in_kvcache a second cache and its rows,
    topk_length / extra_topk_length [b]. block_table and cache_seqlens are not used in sparse mode.
    Returns (out [b, s_q, h_q, 512] bf16, lse [b, h_q, s_q] fp32)."""
    meta = tile_scheduler_metadata
    if not isinstance(meta, FlashMLASchedMeta):
        raise TypeError("tile_scheduler_metadata must come from get_mla_metadata")
    if num_splits is not None:
        raise ValueError("num_splits must be None")
    if indices is None:
        raise NotImplementedError("dsops.compat.flash_mla provides the sparse decode only (indices required)")
    if causal:
        raise ValueError("causal must be False when indices are given (sparse attention)")
    if not is_fp8_kvcache:
        raise ValueError("is_fp8_kvcache must be True in sparse mode, as in FlashMLA")
    if head_dim_v != D_V:
        raise ValueError(f"head_dim_v = {head_dim_v}; FlashMLA's sparse decode has 512")
    torch_io = _is_torch(q)
    qn, kc, ec = _np(q), _np(k_cache), _np(extra_k_cache)
    b, s_q, h_q, d = qn.shape
    config = (b, s_q, h_q, kc.shape[1], kc.shape[2], causal, is_fp8_kvcache, indices.shape[-1],
              None if ec is None else ec.shape[1], None if extra_indices_in_kvcache is None
              else extra_indices_in_kvcache.shape[-1])
    if meta.have_initialized and meta.config != config:
        raise ValueError("the arguments are inconsistent with tile_scheduler_metadata (made for other shapes)")
    meta.have_initialized, meta.config = True, config
    if softmax_scale is None:
        softmax_scale = d ** -0.5
    width = kc.shape[-1]
    if kc.ndim != 4 or kc.shape[2] != 1:
        raise ValueError(f"k_cache has shape {kc.shape}; expected [num_blocks, page_block_size, 1, bytes]")
    if (d, width) not in ((576, V32_ROW), (512, MODEL1_ROW)):
        raise ValueError(f"q width {d} with cache rows of {width} bytes: expected 576 with 656 (V32) or 512 with 584 "
                         "(MODEL1)")
    T = b * s_q
    qt = qn.reshape(T, h_q, d)
    main = (_valid(_np(indices), kc.shape[0] * kc.shape[1], _np(topk_length), s_q), kc.shape[0] * kc.shape[1])
    parts = [main]
    if ec is not None:
        if extra_indices_in_kvcache is None:
            raise ValueError("extra_k_cache needs extra_indices_in_kvcache")
        if ec.shape[-1] != width:
            raise ValueError(f"extra_k_cache has rows of {ec.shape[-1]} bytes, k_cache {width}")
        rows = ec.shape[0] * ec.shape[1]
        parts.append((_valid(_np(extra_indices_in_kvcache), rows, _np(extra_topk_length), s_q), rows))
    lists = _lists(*parts)
    sink = _np(attn_sink)
    if width == V32_ROW:
        # rows of 656 bytes stand alone: both caches become one block of rows
        pool = _rows_of(kc, V32_ROW) if ec is None else np.concatenate([_rows_of(c, V32_ROW) for c in (kc, ec)])
        out, lse, _ = _sfa(qt, _one_block(pool, V32_ROW, np.uint8), "flashmla_fp8", lists, b, s_q, softmax_scale, sink)
    elif ec is None:
        out, lse, _ = _sas(qt, _model1_pool(kc), lists, b, s_q, softmax_scale, sink)
    else:
        # MODEL1 blocks keep their scales at the block's end, so two caches (perhaps of two page sizes) cannot be
        # one pool of blocks: both are read as the bf16 rows they stand for, which are exact
        pool = np.concatenate([_model1_rows(kc), _model1_rows(ec)])
        out, lse, _ = _sas(qt, _one_block(pool, D_V, dsops.bfloat16), lists, b, s_q, softmax_scale, sink)
    out = out.reshape(b, s_q, h_q, D_V)
    lse = np.ascontiguousarray(lse.reshape(b, s_q, h_q).transpose(0, 2, 1))
    return _back(out, torch_io), _back(lse, torch_io)


def flash_mla_sparse_fwd(q, kv, indices, sm_scale, d_v=512, attn_sink=None, topk_length=None, indexer_topk=0):
    """FlashMLA's sparse prefill: q [s_q, h_q, d_qk] bf16, kv [s_kv, 1, d_qk] bf16 (d_qk 576 or 512),
    indices [s_q, 1, topk] int32 (−1 or ≥ s_kv: invalid), sm_scale, attn_sink [h_q] fp32, topk_length [s_q].
    Returns (out [s_q, h_q, 512] bf16, max_logits [s_q, h_q] fp32, lse [s_q, h_q] fp32), and lse_indexer (the lse
    over the first indexer_topk entries) when indexer_topk > 0."""
    if d_v != D_V:
        raise ValueError(f"d_v = {d_v}; FlashMLA's sparse prefill has 512")
    torch_io = _is_torch(q)
    qn, kn = _np(q), _np(kv)
    s_q, h_q, d = qn.shape
    if kn.ndim != 3 or kn.shape[1] != 1:
        raise NotImplementedError(f"kv has shape {kn.shape}; dsops.compat takes one kv head ([s_kv, 1, d_qk])")
    if kn.shape[2] != d or d < D_V:
        raise ValueError(f"q width {d}, kv width {kn.shape[2]}: expected equal widths of at least 512")
    s_kv = kn.shape[0]
    rows = kn.reshape(s_kv, d)
    lists = _valid(_np(indices).reshape(s_q, -1), s_kv, _np(topk_length), 1)
    if lists.shape[1] == 0:
        lists = np.full((s_q, 1), -1, np.int32)

    def attend(key_lists, sink):
        if d == D_V:
            return _sas(qn, _one_block(rows, d, dsops.bfloat16), key_lists, 1, s_q, sm_scale, sink)
        return _sfa(qn, _one_block(rows, d, dsops.bfloat16), "split_bf16", key_lists, 1, s_q, sm_scale, sink)

    sink = _np(attn_sink)
    out, lse, max_logits = attend(lists, sink)
    result = [out, max_logits, lse]
    if indexer_topk > 0:
        first = lists.copy()
        first[:, indexer_topk:] = -1
        result.append(attend(first, None)[1])
    return tuple(_back(a, torch_io) for a in result)
