"""The three DeepSeek-V4 attention operators of the Ascend (CANN) PyPTO set on the CPU, with the vendor's Python
entry names, argument names and order, defaults, shapes and return values, computed by `dsops.sas` (§3.7):

    npu_sliding_window_attention          SWA: window of original tokens        -> dsops.swa
    npu_compress_flash_attention          CFA: window + every compressed entry  -> dsops.cfa
    npu_sparse_compress_flash_attention   SCFA: window + top-k compressed       -> dsops.scfa
    sparse_compress_flash_attention_kernel  its in-place kernel form (the vendor test calls it directly)

The names the vendor registers as torch ops (`sliding_window_attention`, `compress_flash_attention`,
`sparse_compress_flash_attention`) and its `*_pypto` wrappers are the same calls (compress_flash_attention_pypto
with the vendor's default cmp_ratio = 1); `get_mask` builds the SWA mask argument. One latent vector per key is
key and value at once (N2 = 1); sinks are per-head logits added to the softmax denominator as exp(sink − max),
the form dsops uses. The vendor ops accept only N1 = 64, D = 512, block size 128, window 128 and (SCFA)
K = 512; dsops takes any of these, and the calls here follow dsops.
"""
import dataclasses
from typing import Optional

import numpy as np

import dsops

from ._arrays import _back, _i32, _is_torch, _np
from .cann import _bf16

__all__ = ["npu_sliding_window_attention", "sliding_window_attention", "sliding_window_attention_pypto", "get_mask",
           "npu_compress_flash_attention", "compress_flash_attention", "compress_flash_attention_pypto",
           "npu_sparse_compress_flash_attention", "sparse_compress_flash_attention",
           "sparse_compress_flash_attention_pypto", "sparse_compress_flash_attention_kernel", "SCFATileShapeConfig"]


def _sinks(sinks, n):
    """Per-head sink logits as contiguous fp32 [N], or None (dsops then adds no sink term)."""
    if sinks is None:
        return None
    s = np.ascontiguousarray(_np(sinks), dtype=np.float32).reshape(-1)
    if s.size != n:
        raise ValueError(f"sinks has {s.size} values; expected one per query head ({n})")
    return s


def _pool(kv, name, d):
    """A vendor PA_BSND pool [block_num, block_size, 1, D] as dsops's [block_num, block_size, D] (a view)."""
    a = _bf16(kv, name)
    if a.ndim != 4 or a.shape[3] != d:
        raise ValueError(f"{name} has shape {a.shape}; expected [block_num, block_size, 1, {d}]")
    if a.shape[2] != 1:
        raise NotImplementedError(f"{name} has {a.shape[2]} key heads: the latent has one (N2 = 1)")
    return a.reshape(a.shape[0], a.shape[1], d)


def _flat_pool(kv, name, d, block_size):
    """A vendor pool with its axes merged, [block_num · block_size, D], as dsops's [block_num, block_size, D]."""
    a = _bf16(kv, name)
    if a.ndim != 2 or a.shape[1] != d or a.shape[0] % block_size:
        raise ValueError(f"{name} has shape {a.shape}; expected [block_num · {block_size}, {d}]")
    return a.reshape(a.shape[0] // block_size, block_size, d)


def get_mask(s_q, n_q, device=None, block_size=128):
    """The SWA `mask` argument as the vendor builds it: bool [s_q · n_q, 2 · block_size + 256]; row r (query
    r // n_q = j) holds True at columns 128 + j … 128 + j + 127. dsops derives the window from seqused_kv and
    cu_seqlens_q, so npu_sliding_window_attention never reads it; `device` is accepted and ignored (CPU)."""
    cols = np.arange(2 * block_size)[None, :]
    rows = np.arange(s_q)[:, None]
    mid = (cols >= rows) & (cols < rows + 128)
    mask = np.zeros((s_q, 2 * block_size + 256), bool)
    mask[:, 128:128 + 2 * block_size] = mid
    return np.repeat(mask, n_q, axis=0)


def npu_sliding_window_attention(q, ori_block_table, ori_kv, seqused_kv, sinks, win_size, mask, cu_seqlens_q):
    """Sliding-window attention over a paged cache of original tokens. Returns [T, N1, D] bf16.

    q [T, N1, D] bf16 (TND: cu_seqlens_q [B+1] int32 prefix sums of the tokens per sequence); ori_kv
    [block_num, block_size, 1, D] bf16; ori_block_table [B, max_blocks] int32; seqused_kv [B] int32 tokens per
    sequence in the cache, the call's included; sinks [N1] fp32. Token i of a sequence with S tokens sees
    L = seqused_kv − (S − 1 − i) positions and attends to the last min(L, win_size) of them (none when L ≤ 0:
    the output row is 0). Softmax scale D^−0.5, the normalised probabilities rounded to bf16 before P·V
    (dsops p_mode "normalised"). `mask` carries nothing the window does not already fix and is not read.
    The vendor op takes only N1 = 64, D = 512, block_size 128 and win_size 128; dsops takes any (win_size 0:
    every row 0). sinks may be None here (no sink term)."""
    qa = _bf16(q, "q")
    if qa.ndim != 3:
        raise ValueError(f"q has shape {qa.shape}; expected [T, N1, D]")
    T, N, D = qa.shape
    r = dsops.swa(q=qa, cu_seqlens_q=_i32(cu_seqlens_q).reshape(-1), seqused_kv=_i32(seqused_kv).reshape(-1),
                  ori_kv=_pool(ori_kv, "ori_kv", D), ori_block_table=_i32(ori_block_table), sinks=_sinks(sinks, N),
                  win_size=int(win_size), softmax_scale=float(D ** -0.5), p_mode="normalised")
    return _back(r["out"], _is_torch(q))


sliding_window_attention = npu_sliding_window_attention
sliding_window_attention_pypto = npu_sliding_window_attention


def npu_compress_flash_attention(q, cmp_kv, sinks, cmp_block_table, seqused_kv, ori_kv, ori_block_table,
                                 cmp_ratio=128):
    """Attention over the last 128 original tokens and every compressed entry a token can see (the HCA layers).
    Returns [B·S1, N1, D] bf16.

    q [B·S1, N1, D] bf16, the same S1 tokens for each of the B = len(seqused_kv) sequences; cmp_kv
    [block_num, cmp_block_size, 1, D] and ori_kv [block_num1, ori_block_size, 1, D] bf16; cmp_block_table,
    ori_block_table [B, max_blocks] int32; seqused_kv [B] int32 original tokens, the call's included; sinks
    [N1] fp32. Token i sees L = seqused_kv − (S1 − 1 − i) tokens: the window min(L, 128) and the compressed
    entries 0 … ⌊L / cmp_ratio⌋ − 1. Softmax scale D^−0.5; the flash form of the vendor's golden (dsops
    p_mode "tiled"): the window is the first tile, then tiles of cmp_block_size entries, un-normalised weights
    rounded to bf16 before P·V. Where the vendor kernel (one normalised softmax) and its golden differ, they
    agree within the vendor's tolerance. The vendor kernel reads at most 512 compressed entries, takes only
    N1 = 64, D = 512, block size 128 and reads block-table entries −1 as block 0; dsops has no such limit and
    rejects a −1 entry where a token needs that block."""
    qa = _bf16(q, "q")
    if qa.ndim != 3:
        raise ValueError(f"q has shape {qa.shape}; expected [B·S1, N1, D]")
    T, N, D = qa.shape
    used = _i32(seqused_kv).reshape(-1)
    B = used.size
    if B == 0 or T % B:
        raise ValueError(f"q has {T} tokens, not S1 for each of the {B} sequences")
    cmp = _pool(cmp_kv, "cmp_kv", D)
    r = dsops.cfa(q=qa, cu_seqlens_q=(np.arange(B + 1) * (T // B)).astype(np.int32), seqused_kv=used,
                  ori_kv=_pool(ori_kv, "ori_kv", D), ori_block_table=_i32(ori_block_table), cmp_kv=cmp,
                  cmp_block_table=_i32(cmp_block_table), sinks=_sinks(sinks, N), win_size=128,
                  cmp_ratio=int(cmp_ratio), softmax_scale=float(D ** -0.5), p_mode="tiled", p_tile=cmp.shape[1])
    return _back(r["out"], _is_torch(q))


compress_flash_attention = npu_compress_flash_attention


def compress_flash_attention_pypto(q, cmp_kv, sinks, cmp_block_table, seqused_kv, ori_kv, ori_block_table,
                                   cmp_ratio=1):
    """The vendor's wrapper of the registered op; note its default cmp_ratio is 1, not 128."""
    return npu_compress_flash_attention(q, cmp_kv, sinks, cmp_block_table, seqused_kv, ori_kv, ori_block_table,
                                        cmp_ratio)


@dataclasses.dataclass
class SCFATileShapeConfig:
    """The vendor's SCFA tiling record; the CPU result does not depend on it (one softmax over the whole list)."""
    g_tile: int = 64
    c1_tile_shape: Optional[list] = None
    v1_tile_shape: Optional[list] = None
    c2_tile_shape: Optional[list] = None


def _scfa(query, q_act_seqs, ori_kv, cmp_kv, ori_block_table, cmp_block_table, atten_sink, seqused_kv,
          cmp_sparse_indices, softmax_scale, win_size, cmp_ratio, block_size, topk, out):
    """dsops.scfa with the vendor's count of compressed entries read per token; out [T, N, D] or None."""
    q2 = _bf16(query, "query")
    idx = _i32(cmp_sparse_indices)
    if q2.ndim != 2 or idx.ndim != 2 or idx.shape[0] == 0 or q2.shape[0] % idx.shape[0]:
        raise ValueError(f"query {q2.shape} and cmp_sparse_indices {idx.shape}: expected [T · N1, D] and [T, K]")
    T, D = idx.shape[0], q2.shape[1]
    N = q2.shape[0] // T
    if topk is not None:
        idx = np.ascontiguousarray(idx[:, :int(topk)])
    if seqused_kv is None:
        raise NotImplementedError("seqused_kv is required: dsops has no default token count per sequence")
    cu = _i32(q_act_seqs).reshape(-1)
    used = _i32(seqused_kv).reshape(-1)
    R = int(cmp_ratio)
    # the vendor reads the first ⌊seqused / R⌋ − S_b + 1 + i indices of token i (at most K, at least 0): S_b − 1 − i
    # compressed entries fewer than the whole sequence, never more than the token's causal count
    t = np.arange(int(cu[-1]))
    b = np.searchsorted(cu, t, side="right") - 1
    length = np.maximum(used[b].astype(np.int64) // R - (cu[b + 1] - 1 - t), 0).astype(np.int32)
    kw = dict(q=q2.reshape(T, N, D), cu_seqlens_q=cu, seqused_kv=used,
              ori_kv=_flat_pool(ori_kv, "ori_kv", D, block_size), ori_block_table=_i32(ori_block_table),
              cmp_kv=_flat_pool(cmp_kv, "cmp_kv", D, block_size), cmp_block_table=_i32(cmp_block_table),
              cmp_indices=idx, cmp_topk_length=length, sinks=_sinks(atten_sink, N),
              softmax_scale=float(softmax_scale), win_size=int(win_size), cmp_ratio=R, p_mode="normalised")
    if out is not None:
        kw["out"] = out
    return dsops.scfa(**kw)["out"]


def npu_sparse_compress_flash_attention(query_npu, q_act_seqs_npu, ori_kv_npu, cmp_kv_npu, ori_block_table_npu,
                                        cmp_block_table_npu, atten_sink_npu, seqused_kv_npu, cmp_sparse_indices_npu,
                                        softmax_scale, win_size, cmp_ratio):
    """Attention over a window of original tokens and a top-k list of compressed entries (the CSA layers).
    Returns [T · N1, D] bf16.

    query_npu [T · N1, D] bf16 (TND with the token and head axes merged); q_act_seqs_npu [B+1] int32 prefix sums
    of the tokens per sequence; ori_kv_npu [block_num1 · 128, D], cmp_kv_npu [block_num2 · 128, D] bf16 (paged,
    block size 128, axes merged); ori_block_table_npu, cmp_block_table_npu [B, max_blocks] int32; atten_sink_npu
    [N1] fp32; seqused_kv_npu [B] int32 original tokens, the call's included; cmp_sparse_indices_npu [T, K]
    int32 compressed positions in the sequence; softmax_scale; win_size; cmp_ratio. Token i of a sequence with
    S tokens sees L = seqused − (S − 1 − i) tokens: the window min(max(L, 0), win_size), then the first
    k = min(max(⌊seqused / cmp_ratio⌋ − S + 1 + i, 0), K) listed entries, in one softmax whose probabilities are
    rounded to bf16 before P·V (dsops p_mode "normalised"). A token with k = 0 attends to its window only (the
    vendor's golden fails there); one with L ≤ 0 gives 0. Among the first k indices dsops skips −1 and values
    outside 0 … ⌊seqused / cmp_ratio⌋ − 1, which the vendor op reads unchecked. The vendor op takes only
    N1 = 64, D = 512, K = 512 and win_size 128; dsops takes any."""
    out = _scfa(query_npu, q_act_seqs_npu, ori_kv_npu, cmp_kv_npu, ori_block_table_npu, cmp_block_table_npu,
                atten_sink_npu, seqused_kv_npu, cmp_sparse_indices_npu, softmax_scale, win_size, cmp_ratio,
                128, None, None)
    return _back(out.reshape(-1, out.shape[-1]), _is_torch(query_npu))


sparse_compress_flash_attention = npu_sparse_compress_flash_attention
sparse_compress_flash_attention_pypto = npu_sparse_compress_flash_attention


def sparse_compress_flash_attention_kernel(query, actual_seq_q, ori_kv, cmp_kv, ori_block_table, cmp_block_table,
                                           atten_sink, seqused_kv, cmp_sparse_indices, attention_out, nq, n_kv,
                                           softmax_scale, topk, block_size, win_size, cmp_ratio, tile_config=None):
    """The kernel form of npu_sparse_compress_flash_attention: the same inputs (arrays or CPU tensors), any
    block_size, the first `topk` columns of cmp_sparse_indices; writes attention_out [T · nq, D] bf16 in place
    and returns it. tile_config does not change the result."""
    if n_kv != 1:
        raise NotImplementedError(f"n_kv = {n_kv}: the latent has one key head")
    out = _np(attention_out)
    if not out.flags.c_contiguous:
        raise ValueError("attention_out must be contiguous (it is written in place)")
    T = _np(cmp_sparse_indices).shape[0]
    if out.size != T * int(nq) * out.shape[-1]:
        raise ValueError(f"attention_out has shape {out.shape}; expected [{T} · {nq}, D]")
    _scfa(query, actual_seq_q, ori_kv, cmp_kv, ori_block_table, cmp_block_table, atten_sink, seqused_kv,
          cmp_sparse_indices, softmax_scale, win_size, cmp_ratio, int(block_size), topk,
          out.reshape(T, int(nq), -1))
    return attention_out
