"""Two DeepSeek-V4 PyPTO vendor operators (Ascend CANN) on the CPU, with the vendor's Python entry names,
argument names and order, shapes and return values, computed by dsops operators:

    compressor_pypto                          the KV compressor, PyPTO build            -> compressor
    quant_lightning_indexer_prolog            the V4 indexer prolog, int8 query         -> indexer_prolog_v4
      (npu_quant_lightning_indexer_prolog, quant_lightning_indexer_prolog_kernel: its other entries)

`compressor_pypto` is the PyPTO compressor; the AscendC one (combined state, packed output) is
`dsops.compat.cann.compressor` / `npu_compressor`, which keep their names.

The calls with matmul weights have `.prepare(...)` (the same arguments as a call) returning a
`cann.PreparedWeights`; a call given it as `prepared=` with the same weight objects skips converting and packing.
"""
import dataclasses
import math
from typing import Optional

import numpy as np

import dsops

from ._arrays import _back, _i32, _is_torch, _np
from .cann import PreparedWeights, _bf16, _preparable, _weight, _weights

__all__ = ["compressor_pypto", "quant_lightning_indexer_prolog", "npu_quant_lightning_indexer_prolog",
           "quant_lightning_indexer_prolog_kernel", "IndexerPrologQuantConfig"]


def _inplace(a, name):
    if not a.flags.c_contiguous or not a.flags.writeable:
        raise ValueError(f"{name} must be contiguous and writable (it is updated in place)")
    return a


def compressor_pypto(x, kv_state, score_state, kv_block_table, score_block_table, sin, cos, wkv, wgate, ape, weight,
                     hadamard, start_pos, ratio, rope_head_dim, rotate, *, prepared=None, _prepare=None):
    """DeepSeek-V4's KV compressor, PyPTO build: every `ratio` positions of a sequence pooled into one entry
    (per channel, a softmax over the gate logits weighting the values; ratio 4 overlaps each window with the low
    half of the one before), RMS-normalised (eps 1e-6), the last 64 dims rotated (interleaved pairs), then
    multiplied by `hadamard` when `rotate`. kv_state and score_state receive every token's projections in place.

    x [B, S, H] bf16; kv_state, score_state [block_num, block_size, coff·D] fp32, paged by kv_block_table and
    score_block_table [B, max_blocks] int32 (position p of sequence b at row p % block_size of block
    table[b, p // block_size]); sin, cos [min(B·S, B·S // ratio + B), 64] bf16; wkv, wgate [coff·D, H] bf16 (ND,
    the checkpoint's [out, in]); ape [ratio, coff·D] fp32; weight [D] bf16; hadamard [D, D] bf16 (read only when
    rotate; None allowed otherwise); start_pos [B] int32, the position of each sequence's first token (None: 0).
    Returns out [min(B·S, B·S // ratio + B), D] bf16: row b holds the entry sequence b closes in this call (with
    rotary row b), rows without an entry are zero.

    The vendor op takes ratio 4 (coff 2, D 512 or, rotated, 128) and 128 (coff 1, D 512), S ≤ 4, H 4096 and
    block_size 128. dsops takes any ratio, D ≥ 64, H, S and block size, and coff (1 or 2) from the widths of
    ape and the states. When S > ratio a sequence may close several windows: the entries are then packed, those
    of sequence 0 first, each with its own rotary row. Two sequences may not store into one state row."""
    if int(rope_head_dim) != 64:
        raise NotImplementedError(f"rope_head_dim = {rope_head_dim}: dsops rotates 64 dims")
    xa = _bf16(x, "x")
    if xa.ndim != 3:
        raise ValueError(f"x has shape {xa.shape}; expected [B, S, H]")
    B, S, H = xa.shape
    R = int(ratio)
    kv, sc = _inplace(_np(kv_state), "kv_state"), _inplace(_np(score_state), "score_state")
    D = _np(weight).shape[0]
    T = B * S
    NO = min(T, T // R + B)
    pos = np.zeros(B, np.int32) if start_pos is None else _i32(start_pos).reshape(B)
    kw = dict(x=xa.reshape(T, H), cu_seqlens_q=(np.arange(B + 1) * S).astype(np.int32), start_pos=pos, ape=_np(ape),
              norm_weight=_np(weight), rope_cos=_np(cos), rope_sin=_np(sin), kv_state=kv, score_state=sc,
              kv_state_block_table=_i32(kv_block_table), score_state_block_table=_i32(score_block_table),
              ratio=R, norm_eps=1e-6, rope_mode="interleaved", rope_inverse=0,
              out_layout="row_per_seq" if S <= R else "packed")
    if rotate:
        if hadamard is None:
            raise ValueError("rotate needs hadamard [D, D]")
        kw["hadamard"] = _np(hadamard)
    sources = (wkv, wgate)
    w, handle = _weights("compressor_pypto", prepared, sources,
                         lambda: dict(wkv=_bf16(wkv, "wkv"), wgate=_bf16(wgate, "wgate")))
    kw.update(w)
    if _prepare:
        return PreparedWeights("compressor_pypto", sources, w, _prepare.prepare(**kw))
    out = np.empty((NO, D), dsops.bfloat16)  # every row written: the entries, zeros elsewhere
    dsops.compressor(out=out, prepared=handle, **kw)
    return _back(out, _is_torch(x))


@dataclasses.dataclass
class IndexerPrologQuantConfig:
    """The vendor's tiling record (token tiles unrolled by these lengths); it does not change the CPU result."""
    unroll_list: Optional[list] = None


def _indexer_prolog(qr, idx_wq_b, x, weights_proj, cos, sin, hadamard, qr_scale, idx_wq_b_scale, weight_format,
                    prepared, _prepare, outputs):
    xa, qn = _bf16(x, "x"), _np(qr)
    T, H = xa.shape
    Q = qn.shape[-1]
    D = _np(hadamard).shape[0]
    c = _np(cos)
    if c.shape[-1] != 64:
        raise NotImplementedError(f"rope_dim = {c.shape[-1]}: dsops rotates 64 dims")
    wscale = np.ascontiguousarray(_np(idx_wq_b_scale), dtype=np.float32).reshape(-1)
    ND = wscale.size
    N = ND // D
    sources = (idx_wq_b, weights_proj)
    w, handle = _weights("quant_lightning_indexer_prolog", prepared, sources, lambda: dict(
        idx_wq_b=_weight(idx_wq_b, Q, ND, weight_format), weights_proj=_weight(weights_proj, H, N, weight_format)))
    kw = dict(qr=qn.reshape(T, Q), qr_scale=np.ascontiguousarray(_np(qr_scale), dtype=np.float32).reshape(T), x=xa,
              idx_wq_b_scale=wscale, rope_cos=c, rope_sin=_np(sin), hadamard=_np(hadamard),
              # the vendor rotates by the opposite angle (sin negated) and scales by N^-1/2 · D^-1/2
              rope_mode="interleaved", rope_inverse=1, weights_scale=1.0 / (math.sqrt(N) * math.sqrt(D)), **w)
    if _prepare:
        return PreparedWeights("quant_lightning_indexer_prolog", sources, w, _prepare.prepare(**kw))
    if outputs is not None:
        q, weights, q_scale = (_inplace(_np(a), n) for a, n in zip(outputs, ("q", "weights", "q_scale")))
        kw.update(q_idx=q.reshape(T, N, D), weights=weights.reshape(T, N), q_idx_scale=q_scale.reshape(T, N))
    return dsops.indexer_prolog_v4(prepared=handle, **kw)


def quant_lightning_indexer_prolog(qr, idx_wq_b, x, weights_proj, cos, sin, hadamard, qr_scale, idx_wq_b_scale, *,
                                   weight_format=None, prepared=None, _prepare=None):
    """The V4 lightning-indexer prolog (int8): per token, q = bf16((qr @ idx_wq_b) · qr_scale · idx_wq_b_scale)
    per head, its last 64 dims rotated by the opposite angle (interleaved pairs, sin negated), multiplied by
    hadamard (bf16 result), quantised per head to int8 (scale 127 / amax, rounded to nearest even); and the head
    weights fp16(bf16(x @ weights_proj) · (N · D)^-1/2).

    qr [T, Q] int8; idx_wq_b [Q, N·D] int8; x [T, H] bf16; weights_proj [H, N] bf16; cos, sin [T, 64] bf16;
    hadamard [D, D] bf16; qr_scale [T, 1] fp32; idx_wq_b_scale [N·D, 1] fp32. idx_wq_b and weights_proj are ND,
    FRACTAL_NZ blocks (rank 3), or NZ bytes in a tensor of the ND shape (weight_format="NZ"; the vendor test casts
    both to NZ). Returns (q [T, N, D] int8, weights [T, N] fp16, q_scale [T, N] fp16).

    The vendor op fixes Q 1024, N 64, D 128, H 4096 and T ≤ 64K; dsops takes any Q ≤ 131072, N, D ≥ 64, H, T."""
    r = _indexer_prolog(qr, idx_wq_b, x, weights_proj, cos, sin, hadamard, qr_scale, idx_wq_b_scale, weight_format,
                        prepared, _prepare, None)
    if _prepare:
        return r
    torch_io = _is_torch(qr)
    return tuple(_back(r[k], torch_io) for k in ("q_idx", "weights", "q_idx_scale"))


npu_quant_lightning_indexer_prolog = quant_lightning_indexer_prolog


def quant_lightning_indexer_prolog_kernel(qr, idx_wq_b, x, weights_proj, cos, sin, hadamard, qr_scale,
                                          idx_wq_b_scale, q, weights, q_scale, tile_config=None, *,
                                          weight_format=None, prepared=None):
    """The same computation written into the caller's q [T, N, D] int8, weights [T, N] fp16 and q_scale [T, N]
    fp16 (contiguous; updated in place); tile_config is accepted and has no effect. Returns None."""
    _indexer_prolog(qr, idx_wq_b, x, weights_proj, cos, sin, hadamard, qr_scale, idx_wq_b_scale, weight_format,
                    prepared, None, (q, weights, q_scale))


_preparable(compressor_pypto, dsops.compressor)
_preparable(quant_lightning_indexer_prolog, dsops.indexer_prolog_v4)
