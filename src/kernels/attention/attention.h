/* The attention family's contract: its kernel table and the gathered-key layouts, implemented by every tier
 * in src/kernels/attention/attention-<tier>.c and aggregated by src/core/dispatch.h. */
#ifndef DSOPS_KERNELS_ATTENTION_H
#define DSOPS_KERNELS_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

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
    /* max of s[0..n-1] (-Inf for n == 0); NaN if any element is NaN (the core's poisoned-row rule needs it,
     * spec §2.10 A3: a maximum that skipped a NaN would pass a poisoned row off as an ordinary one). */
    float (*row_max)(const float *s, int n);
    /* w[e] = exp(s[e] - m) (w may alias s); returns the sum of w. The core calls it only with a finite m
     * and no NaN or +Inf in s, so the SIMD exp may clamp its input. */
    float (*exp_sum)(const float *s, int n, float m, float *w);
    /* p[e] = bf16(w[e] * r) / fp32 w[e] * r. */
    void (*scale_to_bf16)(const float *w, int n, float r, uint16_t *p);
    void (*scale_to_f32)(const float *w, int n, float r, float *p);
    /* dst[c] = bf16(f32(q[c]) * scales[c / 128]) for c < n (n % 128 == 0); the fp32 scales may be
     * unaligned (packed cache rows). */
    void (*dequant_int8)(const int8_t *q, const void *scales, int n, uint16_t *dst);
    /* dst[c] = bf16(e4m3(q[c]) * scales[c / group]) for c < n (group 64 or 128, n % group == 0), a NaN byte giving
     * NaN with its own sign (spec §2.12); the fp32 scales may be unaligned (FlashMLA's cache rows). */
    void (*dequant_e4m3)(const uint8_t *q, const void *scales, int group, int n, uint16_t *dst);
    /* Packs 16 staged key rows ([16][row_stride] bf16, 2*dpairs values each, zero rows for padding
     * keys) into one Kt tile and the 8 key pairs of Vp starting at `vp` (dims >= dv become 0). */
    void (*pack_keys)(const uint16_t *rows, size_t row_stride, int dpairs, int dv, uint16_t *kt_tile,
                      uint16_t *vp, size_t vp_block_stride);
    /* dst[i] = bf16(src[i] * r). */
    void (*store_bf16)(const float *src, int n, float r, uint16_t *dst);
} dsops_attention_kernels;

#endif
