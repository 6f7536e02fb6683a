"""The Ascend (CANN) vendor operators' calls on the CPU, with the vendor's function names, argument names and order,
defaults, shapes and return values, computed by dsops operators:

    npu_sparse_attention_pto            PyPTO, the fused V3.2 layer            -> sparse_attention_v32
    npu_lightning_indexer_pto           PyPTO, V3.2 indexer with top-k          -> lightning_indexer (bf16)
    npu_lightning_indexer_prolog_pto    PyPTO, its int8 prolog                  -> indexer_prolog_v32 (int8)
    sparse_flash_attention_quant_d / _p PyPTO, sparse attention, int8 keys      -> sparse_flash_attention_v32
    npu_hc_pre, npu_hc_post             AscendC, mHC                            -> hc_pre, hc_post
    npu_quant_lightning_indexer         AscendC, V4 indexer (int8, compressed)  -> lightning_indexer (int8)
    compressor (npu_compressor)         AscendC, V4 KV compressor               -> compressor

and the DeepSeek-V4 PyPTO operators (modules _cann_v4_prolog, _cann_v4_cmp, _cann_v4_attn):

    hc_pre_pypto, hc_pre (+ _kernel, _kernel_prefill)   mHC pre-mixing, one eps   -> hc_pre
    mla_prolog_pypto, mla_prolog, mla_prolog_quant(_pypto), mla_prolog_v4     -> mla_prolog_v4 (bf16, int8)
    compressor_pypto                                    KV compressor, a row per sequence -> compressor
    quant_lightning_indexer_prolog (+ _kernel, npu_...) int8 V4 indexer prolog -> indexer_prolog_v4 (int8)
    npu_sliding_window_attention (sliding_window_attention(_pypto))          -> swa
    npu_compress_flash_attention (compress_flash_attention(_pypto))          -> cfa
    npu_sparse_compress_flash_attention (sparse_compress_flash_attention(_pypto, _kernel)) -> scfa

Matmul weights come as the vendor keeps them, `[in, out]`: either ND (rank 2) or in Ascend's FRACTAL_NZ blocks
(rank 3, `[ceil(out / C0), ceil(in / 16) · 16, C0]`, C0 = 32 bytes of elements, the layout of
`dsops.nd_to_fractal_nz`, docs/OPERATORS.md §2.11); NZ weights are turned back into ND by `fractal_nz_to_nd`.
The vendor's test files load NZ bytes into tensors of the ND shape: pass `weight_format="NZ"` for those.
The calls with matmul weights have `.prepare(...)` (the same arguments as a call): it converts the weights and packs
them once, and the calls given `prepared=` with the same weight objects skip both.

Where the vendor op has shape limits that dsops lacks, the call follows dsops (docstrings say which); where the
vendor's documented behaviour and its golden differ, docs/ASCEND.md says which one is reproduced.
"""
import dataclasses
from typing import Optional

import numpy as np

import dsops

from ._arrays import _back, _i32, _is_torch, _np

__all__ = ["npu_sparse_attention_pto", "npu_lightning_indexer_pto", "npu_lightning_indexer_prolog_pto", "SaTileShapeConfig",
           "sparse_flash_attention_quant_d", "sparse_flash_attention_quant_p", "npu_hc_pre", "npu_hc_post",
           "npu_quant_lightning_indexer", "compressor", "npu_compressor", "PreparedWeights"]


class PreparedWeights:
    """A layer's weights converted to dsops's [out, in] ND form and packed once: from `<call>.prepare(...)`, for the
    calls made with the same weight objects (`prepared=`)."""

    def __init__(self, call, sources, weights, handle):
        self.call, self.sources, self.weights, self.handle = call, sources, weights, handle


def _weights(call, prepared, sources, convert):
    """(dsops weight arrays, packed handle or None): the prepared ones when `prepared` was made by `call` from these
    very weight objects, else freshly converted."""
    if prepared is None:
        return convert(), None
    if prepared.call != call or len(prepared.sources) != len(sources) or any(
            a is not b for a, b in zip(prepared.sources, sources)):
        raise ValueError(f"prepared was made for other weights (or by another call than {call})")
    return prepared.weights, prepared.handle


def _preparable(call, op):
    """Gives `call` a .prepare(...): the same arguments, the dsops operator's prepare instead of its call."""
    def prepare(*args, **kwargs):
        return call(*args, _prepare=op, **kwargs)
    call.prepare = prepare
    return call


def _bf16(x, name):
    a = _np(x)
    if a.dtype != dsops.bfloat16:
        raise TypeError(f"{name} must be bfloat16; got {a.dtype}")
    return a


def npu_sparse_attention_pto(x, w_dq, w_uq_qr, w_uk, w_dkv_kr, gamma_cq, gamma_ckv, sin, cos, cache_index, kv_cache,
                             kr_cache, block_table, act_seqs, w_idx_qb, w_idx_k, w_idx_proj, in_gamma_k, in_beta_k,
                             index_k_cache, *, weight_format=None, prepared=None, _prepare=None):
    """The V3.2 attention layer (DeepSeek Indexer Attention): MLA prolog, indexer prolog, lightning indexer and
    sparse flash attention, both caches updated in place at cache_index. Returns the latent output
    [B, S1, N, Dc] bf16.

    x [B, S1, H]; w_dq [H, Q], w_uq_qr [Q, N · (Dqn + 64)], w_dkv_kr [H, Dc + 64], w_idx_qb [Q, NI · DI],
    w_idx_k [H, DI], w_idx_proj [H, NI] (ND, NZ blocks, or NZ bytes with weight_format="NZ"); w_uk [N, Dqn, Dc];
    gamma_cq [Q], gamma_ckv [Dc], in_gamma_k, in_beta_k [DI]; sin, cos [B, S1, 64]; cache_index [B, S1] int32
    (cache rows); kv_cache [NB, BS, 1, Dc], kr_cache [NB, BS, 1, 64], index_k_cache [NB, BS, 1, DI] bf16;
    block_table [B, MB]; act_seqs [B] tokens per sequence, the call's included. All bf16 unless said. The
    vendor's settings: RMSNorm eps 1e-5, LayerNorm eps 1e-6, interleaved-in-halves-out rotations, no Hadamard and
    no weight scale in the indexer prolog, top-2048, softmax scale 576^-1/2, probabilities kept in fp32."""
    xa = _bf16(x, "x")
    B, S1, H = xa.shape
    T = B * S1
    uk = _bf16(w_uk, "w_uk")
    N, Dqn, Dc = uk.shape
    Q = _np(gamma_cq).shape[0]
    DI = _np(in_gamma_k).shape[0]
    qb = _np(w_idx_qb)  # [Q, NI·DI], or NZ blocks [NI·DI / C0, Q, C0] (NI·DI a multiple of C0)
    NI = (qb.shape[1] if qb.ndim == 2 else qb.shape[0] * qb.shape[2]) // DI
    kv, kr, ik = _np(kv_cache), _np(kr_cache), _np(index_k_cache)
    for name, c in (("kv_cache", kv), ("kr_cache", kr), ("index_k_cache", ik)):
        if not c.flags.c_contiguous:
            raise ValueError(f"{name} must be contiguous (it is updated in place)")
    nb, bs = kv.shape[0], kv.shape[1]
    f = weight_format
    sources = (w_dq, w_uq_qr, w_uk, w_dkv_kr, w_idx_qb, w_idx_k, w_idx_proj)
    w, handle = _weights("npu_sparse_attention_pto", prepared, sources, lambda: dict(
        wq_a=_weight(w_dq, H, Q, f), wq_b=_weight(w_uq_qr, Q, N * (Dqn + 64), f), w_uk=uk,
        wkv_a=_weight(w_dkv_kr, H, Dc + 64, f), idx_wq_b=_weight(w_idx_qb, Q, NI * DI, f),
        idx_wk=_weight(w_idx_k, H, DI, f), weights_proj=_weight(w_idx_proj, H, NI, f)))
    kw = dict(
        x=xa.reshape(T, H), cu_seqlens_q=(np.arange(B + 1) * S1).astype(np.int32),
        seqused_kv=_i32(act_seqs).reshape(B),
        block_table=_i32(block_table),
        cache_index=np.ascontiguousarray(_np(cache_index), dtype=np.int64).reshape(T),
        rope_cos=_np(cos).reshape(T, 64), rope_sin=_np(sin).reshape(T, 64),
        gamma_cq=_np(gamma_cq), gamma_ckv=_np(gamma_ckv), ln_gamma_k=_np(in_gamma_k),
        ln_beta_k=_np(in_beta_k), kv_cache=kv.reshape(nb, bs, Dc), kr_cache=kr.reshape(nb, bs, 64),
        idx_k_cache=ik.reshape(nb, bs, DI), mla_eps_cq=1e-5, mla_eps_ckv=1e-5, mla_rope_mode="interleaved_in_half_out",
        idx_ln_eps=1e-6, idx_rope_mode="interleaved_in_half_out", weights_scale=1.0, softmax_scale=576 ** -0.5,
        p_mode="fp32", kv_layout="split_bf16", topk=2048, **w)
    if _prepare:
        return PreparedWeights("npu_sparse_attention_pto", sources, w, _prepare.prepare(**kw))
    r = dsops.sparse_attention_v32(prepared=handle, **kw)
    return _back(r["out"].reshape(B, S1, N, Dc), _is_torch(x))


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
    lens = _i32(actual_seq_lengths_key).reshape(-1)
    table = _i32(block_table)
    T = B * S1
    cu, used, table = _sequences(sparse_mode, (np.arange(B + 1) * S1).astype(np.int32), lens, table, S1)
    out = np.empty((T, int(sparse_count)), np.int32)
    dsops.lightning_indexer(q_idx=q.reshape(T, N1, D), weights=w.reshape(T, N1), key_cache=k.reshape(k.shape[0],
                            k.shape[1], D), block_table=table, cu_seqlens_q=cu, seqused_kv=used,
                            topk=int(sparse_count), topk_indices=out)
    return _back(out.reshape(B, S1, 1, int(sparse_count)), torch_io)


def _weight(w, rows, cols, weight_format=None):
    """A vendor matmul weight [in = rows, out = cols], ND or FRACTAL_NZ, as dsops's [out, in] (a copy).
    weight_format "NZ": a rank-2 [in, out] tensor holds the NZ bytes (the vendor's files)."""
    a = _np(w)
    if weight_format == "NZ" and a.ndim == 2:
        c0 = 32 // a.dtype.itemsize
        if rows % 16 or cols % c0:
            raise ValueError(f"NZ bytes in an [{rows}, {cols}] tensor need in % 16 == 0 and out % {c0} == 0")
        a = a.reshape(cols // c0, rows, c0)
    if a.ndim == 3:
        a = dsops.fractal_nz_to_nd(nz=a, rows=rows, cols=cols)["nd"]
    if a.shape != (rows, cols):
        raise ValueError(f"a weight has shape {a.shape}; expected [{rows}, {cols}] (ND) or its FRACTAL_NZ blocks")
    return np.ascontiguousarray(a.T)


def npu_lightning_indexer_prolog_pto(token_x, q_norm, q_norm_scale, wq_b, wq_b_scale, wk, weights_proj, ln_gamma_k,
                                     ln_beta_k, cos_idx_rope, sin_idx_rope, hadamard_q, hadamard_k, idx_k_cache,
                                     idx_k_scale_cache, idx_k_cache_index, layernorm_epsilon_k, layout_query="TND",
                                     layout_key="PA_BSND", *, weight_format=None, prepared=None, _prepare=None):
    """The indexer's query (int8, per token and head), its scale (fp16) and the head weights (fp16); the key of
    every token, quantised per token, is stored in idx_k_cache / idx_k_scale_cache at idx_k_cache_index (in place).

    token_x [T, H] bf16; q_norm [T, Q] int8 and q_norm_scale [T, 1] fp32 (the MLA prolog's quantised query);
    wq_b [Q, N·D] int8 with wq_b_scale [N·D, 1] fp32; wk [H, D] and weights_proj [H, N] bf16 (each ND or NZ;
    NZ bytes in an ND-shaped tensor with weight_format="NZ");
    ln_gamma_k, ln_beta_k [D]; cos_idx_rope, sin_idx_rope [T, 64] bf16; hadamard_q, hadamard_k [D, D] bf16;
    idx_k_cache [block_num, block_size, 1, D] int8; idx_k_scale_cache [block_num, block_size, 1] fp16;
    idx_k_cache_index [T] int64 (cache rows; negative: not stored). Returns (query [T, N, D] int8,
    query_scale [T, N] fp16, weights [T, N] fp16). The rotation is the vendor build's: interleaved pairs in,
    halves out, on the first 64 dims; the weights are scaled by N^-1/2 · D^-1/2."""
    if layout_query != "TND" or layout_key != "PA_BSND":
        raise NotImplementedError(f"layouts {layout_query!r} / {layout_key!r}: only TND / PA_BSND exist")
    x, qn = _bf16(token_x, "token_x"), _np(q_norm)
    T, H = x.shape
    Q = qn.shape[-1]
    qscale = np.ascontiguousarray(_np(wq_b_scale), dtype=np.float32).reshape(-1)
    D = _np(hadamard_q).shape[0]
    ND = qscale.size
    N = ND // D
    cache, scale_cache = _np(idx_k_cache), _np(idx_k_scale_cache)
    if not (cache.flags.c_contiguous and scale_cache.flags.c_contiguous):
        raise ValueError("idx_k_cache and idx_k_scale_cache must be contiguous (they are updated in place)")
    nb, bs = cache.shape[0], cache.shape[1]
    sources = (wq_b, wk, weights_proj)
    w, handle = _weights("npu_lightning_indexer_prolog_pto", prepared, sources, lambda: dict(
        idx_wq_b=_weight(wq_b, Q, ND, weight_format), idx_wk=_weight(wk, H, D, weight_format),
        weights_proj=_weight(weights_proj, H, N, weight_format)))
    kw = dict(
        x=x, qr=qn.reshape(T, Q), qr_scale=np.ascontiguousarray(_np(q_norm_scale), dtype=np.float32).reshape(T),
        idx_wq_b_scale=qscale, ln_gamma_k=_np(ln_gamma_k), ln_beta_k=_np(ln_beta_k),
        rope_cos=_np(cos_idx_rope), rope_sin=_np(sin_idx_rope), hadamard_q=_np(hadamard_q),
        hadamard_k=_np(hadamard_k), cache_index=np.ascontiguousarray(_np(idx_k_cache_index), dtype=np.int64).reshape(T),
        idx_k_cache=cache.reshape(nb, bs, D), idx_k_scale_cache=scale_cache.reshape(nb, bs),
        ln_eps=float(layernorm_epsilon_k), weights_scale=float(N ** -0.5 * D ** -0.5),
        rope_mode="interleaved_in_half_out", **w)
    if _prepare:
        return PreparedWeights("npu_lightning_indexer_prolog_pto", sources, w, _prepare.prepare(**kw))
    r = dsops.indexer_prolog_v32(prepared=handle, **kw)
    torch_io = _is_torch(token_x)
    return tuple(_back(r[k], torch_io) for k in ("q_idx", "q_idx_scale", "weights"))


@dataclasses.dataclass
class SaTileShapeConfig:
    """The vendor's tiling record. On the CPU only s_kv_tile matters: the length of the key tiles of the online
    softmax, whose bf16 rounding of the un-normalised probabilities it fixes."""
    g_tile: int = 128
    s_kv_tile: int = 2048
    c1_tile_shape: Optional[list] = None
    v1_tile_shape: Optional[list] = None
    c2_tile_shape: Optional[list] = None
    v2_tile_shape: Optional[list] = None


def sparse_flash_attention_quant_d(query_nope, query_rope, key_nope_2d, key_rope_2d, k_nope_scales, topk_indices,
                                   block_table, kv_act_seqs, attention_out, nq, n_kv, softmax_scale, topk, block_size,
                                   max_blocknum_perbatch, tile_config=None):
    """Sparse MLA attention over a paged latent cache, int8 (with k_nope_scales) or bf16 keys; writes
    attention_out [B, S1, nq, 512] bf16 in place and returns it.

    query_nope [B·S1·nq, 512], query_rope [B·S1·nq, 64] bf16; key_nope_2d [block_num·block_size, 512] int8 or bf16;
    key_rope_2d [block_num·block_size, 64] bf16; k_nope_scales [block_num·block_size, 4] fp32; topk_indices
    [B·S1, topk] int32 (positions in the sequence); block_table [B, max_blocks] int32; kv_act_seqs [B] int32.
    Query s of a sequence with L cached tokens attends to the first min(L − (S1 − 1 − s), topk) entries of its
    list; P is rounded to bf16 before P·V and the softmax runs over key tiles of tile_config.s_kv_tile (2048)."""
    out = _np(attention_out)
    B, S1 = out.shape[0], out.shape[1]
    if n_kv != 1:
        raise NotImplementedError(f"n_kv = {n_kv}: the MLA latent has one key head")
    if not out.flags.c_contiguous:
        raise ValueError("attention_out must be contiguous (it is written in place)")
    kn, kr = _np(key_nope_2d), _bf16(key_rope_2d, "key_rope_2d")
    dc, dr = kn.shape[-1], kr.shape[-1]
    nb = kn.shape[0] // int(block_size)
    T = B * S1
    int8 = kn.dtype == np.int8
    keys = dict(key_nope=kn.reshape(nb, int(block_size), dc), key_rope=kr.reshape(nb, int(block_size), dr))
    if int8:
        keys["key_nope_scale"] = np.ascontiguousarray(_np(k_nope_scales), dtype=np.float32).reshape(nb, int(block_size), -1)
    lists = _i32(topk_indices).reshape(T, -1)[:, :int(topk)]
    tile = (tile_config or SaTileShapeConfig()).s_kv_tile
    dsops.sparse_flash_attention_v32(
        q_nope=_bf16(query_nope, "query_nope").reshape(T, int(nq), dc),
        q_rope=_bf16(query_rope, "query_rope").reshape(T, int(nq), dr), **keys, topk_indices=lists,
        block_table=_i32(block_table),
        cu_seqlens_q=(np.arange(B + 1) * S1).astype(np.int32),
        seqused_kv=_i32(kv_act_seqs).reshape(B),
        out=out.reshape(T, int(nq), dc), softmax_scale=float(softmax_scale), p_mode="tiled", p_tile=int(tile),
        kv_layout="split_int8" if int8 else "split_bf16")
    return attention_out


def sparse_flash_attention_quant_p(*args, **kwargs):
    """The prefill entry of the same operator (the vendor's flash variant for long query runs): the same result."""
    return sparse_flash_attention_quant_d(*args, **kwargs)


def npu_hc_pre(x, hc_fn, hc_scale, hc_base, *, hc_mult=4, hc_sinkhorn_iters=20, norm_eps=1e-6, hc_eps=1e-6):
    """mHC pre-processing: (y, post, comb_frag) from the hc_mult residual streams x.

    x [T, hc_mult, d] or [b, s, hc_mult, d] bf16; hc_fn [(2 + hc_mult) · hc_mult, hc_mult · d], hc_scale [3] and
    hc_base [(2 + hc_mult) · hc_mult] fp32. Returns y [T, d] bf16, post [T, hc_mult] and comb_frag
    [T, hc_mult, hc_mult] fp32 (with the leading [b, s] when x has them). dsops takes any hc_mult and d (the
    vendor op: 4 and 4096)."""
    a = _bf16(x, "x")
    if a.shape[-2] != hc_mult:
        raise ValueError(f"x has {a.shape[-2]} streams, hc_mult = {hc_mult}")
    lead = a.shape[:-2]
    r = dsops.hc_pre(x=a.reshape(-1, a.shape[-2], a.shape[-1]), hc_fn=_np(hc_fn), hc_scale=_np(hc_scale),
                     hc_base=_np(hc_base), sinkhorn_iters=int(hc_sinkhorn_iters), norm_eps=float(norm_eps),
                     hc_eps=float(hc_eps), preset="v4_flash")
    torch_io = _is_torch(x)
    return (_back(r["y"].reshape(*lead, -1), torch_io), _back(r["post"].reshape(*lead, hc_mult), torch_io),
            _back(r["comb"].reshape(*lead, hc_mult, hc_mult), torch_io))


def npu_hc_post(x, residual, post, comb):
    """mHC post-processing: the new streams y[j] = post[j] · x + Σ_i comb[i][j] · residual[i].

    x [b, s, d] or [T, d]; residual [b, s, hc, d] or [T, hc, d] (bf16 or fp32, as x); post [.., hc] and comb
    [.., hc, hc] (bf16 or fp32). Returns y shaped as residual. dsops has no fp16 form (the vendor op has)."""
    res = _np(residual)
    hc, d = res.shape[-2], res.shape[-1]
    r = dsops.hc_post(x=_np(x).reshape(-1, d), residual=res.reshape(-1, hc, d), post=_np(post).reshape(-1, hc),
                      comb=_np(comb).reshape(-1, hc, hc))
    return _back(r["out"].reshape(res.shape), _is_torch(x))


def _sequences(sparse_mode, cu, lens, table, counts):
    """dsops's cu_seqlens_q / seqused_kv / block table for a mask mode: sparse_mode 3 keeps each sequence's tokens
    together (dsops's causal rule, aligned at the bottom right); 0 makes every token its own sequence seeing all."""
    if sparse_mode == 3:
        return cu, lens, table
    return (np.arange(cu[-1] + 1, dtype=np.int32), np.repeat(lens, counts).astype(np.int32),
            np.repeat(table, counts, axis=0))


def npu_quant_lightning_indexer(query, key, weights, query_dequant_scale, key_dequant_scale, *,
                                actual_seq_lengths_query=None, actual_seq_lengths_key=None, block_table=None,
                                metadata=None, query_quant_mode=0, key_quant_mode=0, layout_query="BSND",
                                layout_key="BSND", sparse_count=2048, sparse_mode=3, pre_tokens=2 ** 63 - 1,
                                next_tokens=2 ** 63 - 1, cmp_ratio=1, return_value=False):
    """Top-`sparse_count` compressed-key positions per query token, int8 queries and keys with fp16 per-token-head
    dequantisation scales and fp16 head weights. Returns (sparse_indices, None): [B, S1, 1, sparse_count] for
    BSND queries, [T1, 1, sparse_count] for TND (then actual_seq_lengths_query holds prefix sums); −1 past the keys
    a token sees. key [block_count, block_size, 1, D] int8 and key_dequant_scale [block_count, block_size, 1] fp16
    (PA_BSND); actual_seq_lengths_key [B] original token counts; a token sees floor(L / cmp_ratio) keys with L its
    causal count (sparse_mode 3) or the whole count (0). The score is that of dsops's int8 variant (§3.6)."""
    if layout_key not in ("PA_BSND", "BSND") or layout_query not in ("BSND", "TND"):
        raise NotImplementedError(f"layouts {layout_query!r} / {layout_key!r}: query BSND or TND, key PA_BSND")
    if sparse_mode not in (0, 3):
        raise ValueError(f"sparse_mode = {sparse_mode}: the vendor op has 0 and 3")
    if query_quant_mode or key_quant_mode or return_value:
        raise NotImplementedError("only per-token-head quantisation (mode 0) and return_value=False exist")
    if actual_seq_lengths_key is None or block_table is None:
        raise ValueError("actual_seq_lengths_key and block_table are required with a paged key")
    q, k = _np(query), _np(key)
    if k.ndim != 4 or k.shape[2] != 1:
        raise NotImplementedError(f"key has shape {k.shape}: expected [block_count, block_size, 1, D]")
    D = q.shape[-1]
    lens = _i32(actual_seq_lengths_key).reshape(-1)
    B = lens.size
    if layout_query == "TND":
        if actual_seq_lengths_query is None:
            raise ValueError("layout_query TND needs actual_seq_lengths_query (prefix sums)")
        cu = np.concatenate([[0], _np(actual_seq_lengths_query).reshape(-1)]).astype(np.int32)
        out_shape = (q.shape[0], 1, int(sparse_count))
    else:
        S1 = q.shape[1]
        if actual_seq_lengths_query is not None and np.any(_np(actual_seq_lengths_query) != S1):
            raise NotImplementedError("BSND with actual_seq_lengths_query other than S1 (use TND)")
        cu = (np.arange(B + 1) * S1).astype(np.int32)
        out_shape = (B, S1, 1, int(sparse_count))
    T, N1 = cu[-1], q.shape[-2]
    cu, used, table = _sequences(sparse_mode, cu, lens, _i32(block_table),
                                 np.diff(cu))
    out = np.empty((T, int(sparse_count)), np.int32)
    dsops.lightning_indexer(q_idx=q.reshape(T, N1, D), q_idx_scale=_np(query_dequant_scale).reshape(T, N1),
                            weights=_np(weights).reshape(T, N1), key_cache=k.reshape(k.shape[0], k.shape[1], D),
                            key_scale_cache=_np(key_dequant_scale).reshape(k.shape[0], k.shape[1]),
                            block_table=table, cu_seqlens_q=cu, seqused_kv=used, topk=int(sparse_count),
                            topk_indices=out, cmp_ratio=int(cmp_ratio))
    return _back(out.reshape(out_shape), _is_torch(query)), None


def compressor(x, wkv, wgate, state_cache, ape, norm_weight, rope_sin, rope_cos, rope_head_dim, cmp_ratio, *,
               state_block_table=None, cu_seqlens=None, seqused=None, start_pos=None, coff=1, norm_eps=1e-6,
               rotary_mode=1, cache_mode=1):
    """DeepSeek-V4's KV compressor: every cmp_ratio positions pooled into one entry (softmax over the gate logits,
    overlapping windows when coff = 2), RMS-normalised, the last 64 dims rotated. Updates state_cache in place
    and returns cmp_kv.

    x [B, S, H] or [T, H] (then cu_seqlens [B+1]) bf16; wkv, wgate [coff·D, H] bf16; state_cache [block_num,
    block_size, 2·coff·D] fp32 (the kv state, then the score state, of every position); ape [cmp_ratio, coff·D]
    fp32; norm_weight [D]; rope_sin, rope_cos [B, ceil(S / cmp_ratio), 64] or [min(T, T // cmp_ratio + B), 64],
    row r for output row r; state_block_table [B, max_blocks] int32 (an entry 0 marks a block the call need not
    keep); seqused [B] tokens of each sequence that take part (default: all); start_pos [B] (default 0);
    rotary_mode 1 half, 2 interleaved. Returns [B, ceil(S / cmp_ratio), D] (each sequence's entries, then zero
    rows) or [min(T, T // cmp_ratio + B), D] (the entries of every sequence in turn, then zero rows)."""
    if int(rope_head_dim) != 64:
        raise NotImplementedError(f"rope_head_dim = {rope_head_dim}: the rotation acts on 64 dims")
    if cache_mode != 1 or rotary_mode not in (1, 2):
        raise NotImplementedError(f"cache_mode {cache_mode} / rotary_mode {rotary_mode}: 1 / 1 or 2 exist")
    xa = _bf16(x, "x")
    state = _np(state_cache)
    if not state.flags.c_contiguous:
        raise ValueError("state_cache must be contiguous (it is updated in place)")
    R, D = int(cmp_ratio), _np(norm_weight).shape[0]
    W = int(coff) * D
    if state.shape[-1] != 2 * W:
        raise ValueError(f"state_cache rows hold {state.shape[-1]} values; expected 2 · coff · D = {2 * W}")
    per_seq = xa.ndim == 3  # [B, S, H]: each sequence's entries in its own block of output rows
    if per_seq:
        B, S, H = xa.shape
        starts_x = np.arange(B + 1) * S
        xa = xa.reshape(B * S, H)
    else:
        starts_x = np.asarray(_np(cu_seqlens), dtype=np.int64).reshape(-1)
        B = starts_x.size - 1
    lens = np.diff(starts_x) if seqused is None else np.asarray(_np(seqused), dtype=np.int64).reshape(B)
    pos = np.zeros(B, np.int64) if start_pos is None else np.asarray(_np(start_pos), dtype=np.int64).reshape(B)
    table = _i32(state_block_table)
    sin, cos = _np(rope_sin), _np(rope_cos)
    T = int(starts_x[-1])
    out = np.zeros((B, -(-S // R), D) if per_seq else (min(T, T // R + B), D), dsops.bfloat16)
    kv, sc = state[..., :W], state[..., W:]
    common = dict(wkv=_np(wkv), wgate=_np(wgate), ape=_np(ape), norm_weight=_np(norm_weight),
                  kv_state=kv, score_state=sc, norm_eps=float(norm_eps),
                  rope_mode="half" if rotary_mode == 1 else "interleaved", out_layout="packed")
    # one call per sequence: an entry 0 of the tables is the vendor's "not kept", and positions of several
    # sequences may all land there, which one dsops call refuses (V8)
    r0 = 0
    for b in range(B):
        n = int(lens[b])
        first, last = int(pos[b]) // R, (int(pos[b]) + n) // R
        count = last - first
        dst = out[b] if per_seq else out[r0:r0 + count]
        rope = slice(0, count) if per_seq else slice(r0, r0 + count)
        cs = (cos[b] if per_seq else cos)[rope]
        sn = (sin[b] if per_seq else sin)[rope]
        if count == 0:  # the operator still wants its tables and output to have rows: give it one spare row
            dst, cs, sn = np.zeros((1, D), dsops.bfloat16), np.zeros((1, 64), cos.dtype), np.zeros((1, 64), sin.dtype)
        x0 = int(starts_x[b])
        dsops.compressor(x=xa[x0:x0 + n], cu_seqlens_q=np.array([0, n], np.int32),
                         start_pos=np.array([pos[b]], np.int32), rope_cos=cs, rope_sin=sn,
                         kv_state_block_table=table[b:b + 1], score_state_block_table=table[b:b + 1],
                         out=dst[:max(count, 1)], **common)
        r0 += count
    return _back(out, _is_torch(x))


npu_compressor = compressor


_preparable(npu_sparse_attention_pto, dsops.sparse_attention_v32)
_preparable(npu_lightning_indexer_prolog_pto, dsops.indexer_prolog_v32)


# The DeepSeek-V4 PyPTO operators (their modules use this module's helpers, so they come last), under this
# module's name as the vendor's tests reach them all through one import.
from . import _cann_v4_attn, _cann_v4_cmp, _cann_v4_prolog  # noqa: E402

for _module in (_cann_v4_prolog, _cann_v4_cmp, _cann_v4_attn):
    for _name in _module.__all__:
        globals()[_name] = getattr(_module, _name)
    __all__ += _module.__all__
