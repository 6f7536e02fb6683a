/* Kernel tables, one per instruction-set tier. Each tier's kernel file exports its kernels as const data
 * (dsops_<family>_kernels__<tier>, NULL where it has none). dispatch.c, built without ISA flags, makes the
 * table of tier k from the table of tier k-1 and the non-NULL entries of tier k, and only for the tiers the
 * CPU and OS support: no code of a tier runs, not even to copy a pointer, before detection allows it. */
#ifndef DSOPS_DISPATCH_H
#define DSOPS_DISPATCH_H

#include <stddef.h>
#include <stdint.h>

#include "dsops.h"

/* Gathered-key layouts of the attention core (see docs/KERNELS.md), the same on every tier:
 *  Kt  keys as lanes:   [ceil(n/16)][dpairs][16][2] bf16, element (e, d) of tile e/16 at
 *                       [(d/2)*32 + (e%16)*2 + d%2]; padding keys are zero.
 *  Vp  key pairs:       [dv_blocks][npairs][16][2] bf16, block d/16, pair e/2, element
 *                       [(d%16)*2 + e%2]; padding keys and padding dims are zero. */
#define DSOPS_KT_LANES 16
#define DSOPS_VP_LANES 16

typedef struct dsops_attention_kernels {
    /* s[h][e] = fp32(dot(q[h], K_e) * scale) for all 16*ntiles keys of kt, h < nh.
     * q: [nh][q_stride] bf16 rows of 2*dpairs values; s: [nh][s_stride] fp32. */
    void (*qk)(const uint16_t *q, size_t q_stride, int nh, const uint16_t *kt, int ntiles, int dpairs,
               float scale, float *s, size_t s_stride);
    /* o[h][d] = sum over npairs key pairs of p[h][e] * V[e][d] (o overwritten), d < 16*dv_blocks.
     * p: [nh][p_stride] bf16 (pv_bf16) or fp32 (pv_fp32), entries 0 ... 2*npairs-1 read;
     * vp: first pair of block 0, block stride vp_block_stride elements; o: [nh][o_stride] fp32. */
    void (*pv_bf16)(const uint16_t *p, size_t p_stride, int nh, const uint16_t *vp, size_t vp_block_stride,
                    int npairs, int dv_blocks, float *o, size_t o_stride);
    void (*pv_fp32)(const float *p, size_t p_stride, int nh, const uint16_t *vp, size_t vp_block_stride,
                    int npairs, int dv_blocks, float *o, size_t o_stride);
    /* max of s[0..n-1] (-Inf for n == 0). */
    float (*row_max)(const float *s, int n);
    /* w[e] = exp(s[e] - m) (w may alias s); returns the sum of w. */
    float (*exp_sum)(const float *s, int n, float m, float *w);
    /* p[e] = bf16(w[e] * r) / fp32 w[e] * r. */
    void (*scale_to_bf16)(const float *w, int n, float r, uint16_t *p);
    void (*scale_to_f32)(const float *w, int n, float r, float *p);
    /* dst[c] = bf16(f32(q[c]) * scales[c / 128]) for c < n (n % 128 == 0); the fp32 scales may be
     * unaligned (packed cache rows). */
    void (*dequant_int8)(const int8_t *q, const void *scales, int n, uint16_t *dst);
    /* Packs 16 staged key rows ([16][row_stride] bf16, 2*dpairs values each, zero rows for padding
     * keys) into one Kt tile and the 8 key pairs of Vp starting at `vp` (dims >= dv become 0). */
    void (*pack_keys)(const uint16_t *rows, size_t row_stride, int dpairs, int dv, uint16_t *kt_tile,
                      uint16_t *vp, size_t vp_block_stride);
    /* dst[i] = bf16(src[i] * r). */
    void (*store_bf16)(const float *src, int n, float r, uint16_t *dst);
} dsops_attention_kernels;

/* Lightning-indexer layouts: keys as lanes, 16 keys per tile; the layouts belong to the tier, which
 * says their sizes through `layout_int8` / `layout_bf16` and packs both the keys and the queries.
 * A tier sets all entries of a variant (layout, query and key packing, scores) or none of them.
 *  scalar, avx512bf16 (docs/FORMATS.md):
 *    int8 tile:  [dquads][16][4] uint8, key byte d of key e at [(d/4)*64 + e*4 + d%4], stored as k + 128
 *                (the u8 operand of vpdpbusd); padding keys and bytes hold 128 (i.e. key value 0).
 *                Query: 4*dquads int8, zero padded; bias correction 128 * sum_d q[d].
 *    bf16 tile:  [dpairs][16][2] bf16, the attention core's Kt layout; padding is zero.
 *                Query: 2*dpairs bf16, zero padded.
 *  avx2 (also used by avx512):
 *    int8 tile:  [dpairs][16][2] int16, keys sign-extended (operands of vpmaddwd); query [dpairs][2]
 *                int16; no bias (correction 0).
 *    bf16 tile:  [2*dpairs][16] fp32, keys widened; query 2*dpairs fp32. Padding is zero. */
typedef struct dsops_indexer_kernels {
    /* Bytes of one 16-key tile and of one packed query row (a multiple of 64) for keys of di values, and
     * the number of tiles (1 ... 8) the operator packs before it scores them. */
    void (*layout_int8)(int di, size_t *tile_bytes, size_t *query_bytes, int *chunk_tiles);
    void (*layout_bf16)(int di, size_t *tile_bytes, size_t *query_bytes, int *chunk_tiles);
    /* Packs one query row of di values into query_bytes bytes at dst; the int8 form returns the value
     * that score_int8 subtracts from every dot product of that head (the key bias times sum q). */
    int32_t (*pack_query_int8)(const int8_t *src, int di, void *dst);
    void (*pack_query_bf16)(const uint16_t *src, int di, void *dst);
    /* Packs 16 key rows (rows[e] = di values, or NULL for a padding key) into one tile. */
    void (*pack_int8)(const int8_t *const *rows, int di, void *tile);
    void (*pack_bf16)(const uint16_t *const *rows, int di, void *tile);
    /* int8 scores of 16*ntiles keys (spec §3.6):
     *   I[j] = (sum_h ws[h] * fp16(f32(max(dot_hj, 0)) * 2^-11)) * kscale[j]
     * q: nh packed query rows, row h at (const char *)q + h * q_stride; qbias[h] from pack_query_int8;
     * ws: [nh] fp32 (fp16 values); kscale: [16*ntiles] fp32; I: [16*ntiles] fp32. */
    void (*score_int8)(const void *q, size_t q_stride, const int32_t *qbias, const float *ws, int nh,
                       const void *tiles, int ntiles, int di, const float *kscale, float *I);
    /* bf16 scores: I[j] = sum_h max(dot(q[h], key_j), 0) * w[h]; q as for score_int8. */
    void (*score_bf16)(const void *q, size_t q_stride, const float *w, int nh, const void *tiles, int ntiles,
                       int di, float *I);
} dsops_indexer_kernels;

/* Few-row linear maps from row-major weights W [N, K] (row n at w + n * ldw), for decode-size calls:
 * y[m][n] = sum_k x[m][k] * W[n][k], m < M. The int8 form takes x + 128 as bytes (xb) and removes
 * wsum128[n] = 128 * sum_k W[n][k]; its result is exact (computed modulo 2^32, so exact whenever the
 * true sum fits int32). Every tier has them (scalar: portable C). */
typedef struct dsops_linear_kernels {
    void (*rowdot_bf16)(const uint16_t *x, size_t ldx, int M, const uint16_t *w, size_t ldw, int N, int K, float *y,
                        size_t ldy);
    void (*rowdot_s8)(const uint8_t *xb, size_t ldx, int M, const int8_t *w, size_t ldw, int N, int K,
                      const int32_t *wsum128, int32_t *y, size_t ldy);
} dsops_linear_kernels;

/* hc_pre's mix reduction and weighted sum, hc_post's mixing (spec §3.1, §3.2). Every tier has every entry
 * (the scalar tier is the portable implementation).
 *
 * mix: steps 1-3 (before the division by r) for a group of nt tokens: token t's HC streams are the bf16
 * rows x + t*ldt + i*lds (H values each), flattened stream-major into xf; mix[t*ldm + m] = sum_k xf[k]
 * w[m][k] and ss[t] = sum_k xf[k]^2, each in one order fixed by (M, HC, H) alone, so a token's sums do not
 * depend on the tokens it is grouped with. w ([M][ldw] fp32, hc_fn) is first packed by the same tier's
 * `pack` into packed_floats(M, HC, H) floats (64-byte aligned; the layout is the tier's own).
 * work: mix_work_floats(nt, M) floats (64-byte aligned). */
#define DSOPS_HC_POST_WORK(HC) ((size_t)(HC) * 64) /* floats: HC streams x a block of <= 64 channels */
typedef struct dsops_hc_kernels {
    size_t (*packed_floats)(int M, int HC, int64_t H);
    void (*pack)(const float *w, size_t ldw, int M, int HC, int64_t H, float *wp);
    size_t (*mix_work_floats)(int nt, int M);
    void (*mix)(const uint16_t *x, size_t ldt, size_t lds, int nt, int HC, int64_t H, const float *wp, int M,
                float *mix, size_t ldm, float *ss, float *work);
    /* Step 9: y[d] = bf16(0 + sum_i pre[i] f32(x_i[d])), i ascending, x_i = x + i*lds, each product rounded
     * before its sum (no contraction): the same bits on every tier. */
    void (*weighted_sum)(const uint16_t *x, size_t lds, int HC, int64_t H, const float *pre, uint16_t *y);
    /* hc_post for one token, any HC >= 1: out_j[d] = cast(post[j] x[d] + (0 + sum_i comb[i][j] res_i[d]))
     * (i ascending, no contraction: the same bits on every tier), res_i = res + i*lds_res, out_j = out +
     * j*lds_out. Channels go in blocks of at most 64: every res_i[d] of a block is read before any out_j[d]
     * of that block is written, so out may be res. Elements are bf16, or fp32 when fp32 != 0; post [HC]
     * and comb [HC][HC] are fp32. work: DSOPS_HC_POST_WORK(HC) floats (64-byte aligned). */
    void (*post_token)(const void *x, const void *res, size_t lds_res, void *out, size_t lds_out, int HC, int64_t H,
                       const float *post, const float *comb, int fp32, float *work);
} dsops_hc_kernels;

/* The compressor's pooling (spec §3.4 step 3) of one window over n candidates: candidate r's value and
 * logit rows are kv[r], sc[r] (channel d at [d], d < D); pooled[d] = sum_r kv_r[d] P_r[d] with P the
 * softmax over r of sc_r[d]. e: DSOPS_CMP_POOL_WORK(D) floats. Every tier has it (scalar: expf). */
#define DSOPS_CMP_POOL_WORK(D) (3 * (size_t)(D))
typedef struct dsops_compressor_kernels {
    void (*pool)(const float *const *kv, const float *const *sc, int n, int64_t D, float *pooled, float *e);
} dsops_compressor_kernels;

/* Dot-product throughput probes: run `iters` iterations of a register-resident loop and return the number
 * of multiply-adds (products) performed. */
typedef struct dsops_peak_kernels {
    double (*bf16_dot)(long iters);
    double (*int8_dot)(long iters);
    double (*fp32_fma)(long iters);
} dsops_peak_kernels;

typedef struct dsops_kernel_table {
    dsops_isa isa;
    dsops_attention_kernels attn;
    dsops_indexer_kernels indexer;
    dsops_linear_kernels linear;
    dsops_hc_kernels hc;
    dsops_compressor_kernels compressor;
    dsops_peak_kernels peak;
} dsops_kernel_table;

/* The table of `isa` (capped to the detected tier). */
const dsops_kernel_table *dsops_kernel_table_get(dsops_isa isa);

/* Each tier's own kernels, defined in src/kernels/<family>/<family>-<tier>.c (scalar: every entry). */
extern const dsops_attention_kernels dsops_attention_kernels__scalar;
extern const dsops_indexer_kernels dsops_indexer_kernels__scalar;
extern const dsops_linear_kernels dsops_linear_kernels__scalar;
extern const dsops_hc_kernels dsops_hc_kernels__scalar;
extern const dsops_compressor_kernels dsops_compressor_kernels__scalar;
extern const dsops_peak_kernels dsops_peak_kernels__scalar;
extern const dsops_attention_kernels dsops_attention_kernels__avx2;
extern const dsops_indexer_kernels dsops_indexer_kernels__avx2;
extern const dsops_linear_kernels dsops_linear_kernels__avx2;
extern const dsops_hc_kernels dsops_hc_kernels__avx2;
extern const dsops_compressor_kernels dsops_compressor_kernels__avx2;
extern const dsops_peak_kernels dsops_peak_kernels__avx2;
extern const dsops_attention_kernels dsops_attention_kernels__avx512bf16;
extern const dsops_indexer_kernels dsops_indexer_kernels__avx512bf16;
extern const dsops_linear_kernels dsops_linear_kernels__avx512bf16;
extern const dsops_hc_kernels dsops_hc_kernels__avx512bf16;
extern const dsops_compressor_kernels dsops_compressor_kernels__avx512bf16;
extern const dsops_peak_kernels dsops_peak_kernels__avx512bf16;

#endif
