/* Reference oracles for the dsops operators (docs/OPERATORS.md).
 *
 * They execute the Math steps of the spec literally: every fp32 sum is accumulated in ascending index
 * order, every bf16 rounding point of the spec is applied, nothing is contracted into FMA. They are the
 * truth the library's fast paths are measured against, so they depend only on the public types of
 * dsops.h, never on library internals.
 *
 * The oracles do not validate: they must be given arguments the library accepts. For such arguments
 * they never read outside the extents declared by the tensors. */
#ifndef DSOPS_REF_H
#define DSOPS_REF_H

#include <stdint.h>

#include "dsops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* bf16 helpers of spec §2.1 (round to nearest even; NaN becomes a quiet NaN with its sign). */
uint16_t dsops_ref_bf16_from_f32(float f);
float dsops_ref_f32_from_bf16(uint16_t h);

/* sparse_flash_attention_v32 (spec §4.4 with the attention core of §2.10, the sink when sinks is given).
 * Writes a->out and, when present, a->lse. Returns nothing: the arguments must be valid. */
void dsops_ref_sparse_flash_attention_v32(const dsops_sparse_flash_attention_v32_args *a);

/* fp16 helpers of spec §2.1 (round to nearest even, subnormals kept, |f| >= 65520 gives +-Inf; NaN
 * stays a quiet NaN with its sign). */
uint16_t dsops_ref_fp16_from_f32(float f);
float dsops_ref_f32_from_fp16(uint16_t h);

/* lightning_indexer (spec §3.6, §4.3; top-k §2.9). Writes a->topk_indices and, when present,
 * a->topk_scores. The arguments must be valid. */
void dsops_ref_lightning_indexer(const dsops_lightning_indexer_args *a);
/* The full score row I[0 .. n-1] of token t (0 <= t < T) into scores (room for n values, n at most
 * floor(seqused_kv[b] / cmp_ratio)); returns n. */
int64_t dsops_ref_lightning_indexer_scores(const dsops_lightning_indexer_args *a, int64_t t, float *scores);
/* The order of spec §2.9: 1 if (score sa, index ia) comes before (sb, ib) in a top-k row (larger score
 * first, NaN below every number, -0 == +0, equal scores by increasing index). */
int dsops_ref_topk_before(float sa, int64_t ia, float sb, int64_t ib);

/* mla_prolog_v32 (spec §4.1). Writes q_nope, q_rope, qr, qr_scale (int8 wq_b) and, for every token with
 * cache_index[t] >= 0, that row of the caches of a->kv_layout; no other cache element is touched.
 * a->prepared is ignored. The arguments must be valid. */
void dsops_ref_mla_prolog_v32(const dsops_mla_prolog_v32_args *a);

/* indexer_prolog_v32 (spec §4.2). The variant follows the dtype of qr (int8 or bf16). Writes q_idx,
 * q_idx_scale (int8), weights and, for every token with cache_index[t] >= 0, that row of idx_k_cache (and
 * idx_k_scale_cache for int8); no other cache element is touched. Absent Hadamard matrices of the bf16
 * variant are the identity. a->prepared is ignored. The arguments must be valid. */
void dsops_ref_indexer_prolog_v32(const dsops_indexer_prolog_v32_args *a);

/* ---- shared primitives (spec §2.3 - §2.8) -------------------------------------------------------- */

/* fp64 -> bf16 rounded once (nearest, ties to even; subnormals kept, overflow to +-Inf). */
uint16_t dsops_ref_bf16_from_f64(double d);

/* Row-level definitions: RMSNorm (§2.3; gamma NULL = unweighted; y may be v), LayerNorm (§2.4; gamma /
 * beta NULL = 1 / 0), the rotation of one 64-element slice (§2.5.1, before any output rounding), one Q8
 * group (§2.7) and the Hadamard product y[j] = sum_k v[k] hm[k][j] with hm [d][d] (§2.6). */
void dsops_ref_rmsnorm_row(const float *v, int64_t n, const float *gamma, float eps, float *y);
void dsops_ref_layernorm_row(const float *v, int64_t n, const float *gamma, const float *beta, float eps, float *y);
void dsops_ref_rope_row(const float *x, const float *c, const float *s, dsops_rope_mode mode, int inverse, float *y);
void dsops_ref_q8_group(const float *v, int64_t n, int8_t *q, float *scale);
void dsops_ref_hadamard_row(const float *v, int64_t d, const float *hm, float *y);

/* rmsnorm (§2.3): writes a->y (may be a->x). */
void dsops_ref_rmsnorm(const dsops_rmsnorm_args *a);
/* rope_tables (§2.5.2): the 32 fp32 frequencies; the tables as fp64 cos / sin of the fp32 angles
 * ([T, 64] each, dense); and the tables written to a->cos / a->sin, each fp64 value rounded once to
 * their dtype. */
void dsops_ref_rope_freqs(const dsops_rope_tables_args *a, float freq[32]);
void dsops_ref_rope_tables_f64(const dsops_rope_tables_args *a, double *cos_out, double *sin_out);
void dsops_ref_rope_tables(const dsops_rope_tables_args *a);
/* rope_apply (§2.5.3): writes a->y (may be a->x). */
void dsops_ref_rope_apply(const dsops_rope_apply_args *a);
/* hadamard_matrix (§2.6): fills m, each fp64 value rounded once to its dtype. */
void dsops_ref_hadamard_matrix(const dsops_tensor *m);
/* quant_q8 (§2.7): writes a->q and a->scale. */
void dsops_ref_quant_q8(const dsops_quant_q8_args *a);
/* cache_store (§2.8): writes the rows of the non-negative slots (group 0 = W); nothing else. */
void dsops_ref_cache_store(const dsops_cache_store_args *a);
/* FRACTAL_NZ (§2.11) of dense row-major tensors: nz [B, C1, RP, C0] from nd [B, R, C] (B the product of the
 * leading dimensions, es bytes per element), padding zero; and the way back. */
void dsops_ref_nd_to_fractal_nz(const void *nd, int64_t B, int64_t R, int64_t C, size_t es, void *nz);
void dsops_ref_fractal_nz_to_nd(const void *nz, int64_t B, int64_t R, int64_t C, size_t es, void *nd);

/* FlashMLA's FP8 KV caches (§2.12): an e4m3fn byte's value and the nearest byte to a value; the whole-cache
 * quantisation (every block byte written, padding zero) and dequantisation. */
float dsops_ref_f32_from_e4m3(uint8_t b);
float dsops_ref_f32_from_ue8m0(uint8_t b);
uint8_t dsops_ref_e4m3_from_f32(float v);
void dsops_ref_fp8_cache_quantize(const dsops_fp8_cache_args *a);
void dsops_ref_fp8_cache_dequantize(const dsops_fp8_cache_args *a);
/* One V32 token: row[0..575] bf16 -> dst[0..655]; one MODEL1 token: row[0..511] -> body[0..575], scales[0..7]. */
void dsops_ref_fp8_v32_row(const uint16_t *row, uint8_t *dst);
void dsops_ref_fp8_model1_row(const uint16_t *row, uint8_t *body, uint8_t *scales);

/* ---- DeepSeek-V4 hyper-connections (spec §3.1, §3.2) ---------------------------------------------- */

/* hc_pre (§3.1): writes a->y, a->post, a->comb and, when present, a->pre, for every token. */
void dsops_ref_hc_pre(const dsops_hc_pre_args *a);
/* hc_post (§3.2): writes a->out (may be a->residual exactly); comb is used transposed. */
void dsops_ref_hc_post(const dsops_hc_post_args *a);

/* ---- DeepSeek-V4 prologs and compressor (spec §3.3 - §3.5) ------------------------------------- */

/* mla_prolog_v4 (§3.3): writes q, kv, qr and (int8 wq_b) qr_scale. a->prepared is ignored. */
void dsops_ref_mla_prolog_v4(const dsops_mla_prolog_v4_args *a);
/* compressor (§3.4): writes out (every row: entries, zeros elsewhere), out_count when present, and the
 * state rows of every token's position (later positions win on a shared row). Explicit dim / ratio /
 * overlap / rotate are ignored (the shapes decide). a->prepared is ignored. */
void dsops_ref_compressor(const dsops_compressor_args *a);
/* indexer_prolog_v4 (§3.5): writes q_idx, q_idx_scale and weights. a->prepared is ignored. */
void dsops_ref_indexer_prolog_v4(const dsops_indexer_prolog_v4_args *a);

/* sas (§3.7; attention core §2.10 with the sink): writes out and, when present, lse. */
void dsops_ref_sas(const dsops_sas_args *a);

#ifdef __cplusplus
}
#endif

#endif
