/* Row-level building blocks of spec §2.3 - §2.8, shared by the exported primitives (primitives.c)
 * and the fused prologs. All arithmetic follows the spec's Math literally; callers round results to
 * bf16 / fp16 where their operator says so. */
#ifndef DSOPS_PRIMITIVES_H
#define DSOPS_PRIMITIVES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dsops.h"

/* Widens n norm weights / tables of dtype bf16 or fp32 to fp32 (src may be unaligned). */
void dsops_widen_row(const void *src, dsops_dtype dtype, int n, float *dst);
/* The same for the n elements of a rank-1 view, `stride` elements apart: norm vectors take any stride (spec §1.3,
 * 0 included), so they are not rows. */
void dsops_widen_vector(const dsops_tensor *t, int n, float *dst);

/* y = RMSNorm(v; gamma, eps) in fp32 (spec §2.3): r = sqrt(sum(v^2) / n + eps), y_i = (v_i / r) * gamma_i
 * (gamma NULL: unweighted). y may alias v. */
void dsops_rmsnorm_row(const float *v, int n, const float *gamma, float eps, float *y);

/* y = LayerNorm(v; gamma, beta, eps) in fp32 (spec §2.4). y may alias v. */
void dsops_layernorm_row(const float *v, int n, const float *gamma, const float *beta, float eps, float *y);

/* Rotates one 64-element slice (spec §2.5.1): y = rot(x, c, s) in fp32, before any output rounding.
 * y must not alias x. */
void dsops_rope_row(const float *x, const float *c, const float *s, dsops_rope_mode mode, bool inverse, float *y);

/* dst[0..63] = bf16(rot(src[0..63])) with row t of the [T, 64] tables (bf16 or fp32); dst may alias src. */
void dsops_rope_bf16_slice(const uint16_t *src, const dsops_tensor *cos, const dsops_tensor *sin, int64_t t,
                           dsops_rope_mode mode, bool inverse, uint16_t *dst);

/* One token of FlashMLA's V32 FP8 layout (spec §2.12): row[0..575] bf16 (512 latent, 64 rope) -> dst[0..655]. */
void dsops_fp8_v32_row(const uint16_t *row, uint8_t *dst);
/* One token of the MODEL1 layout: row[0..511] bf16 (448 latent, 64 rope) -> body[0..575] (e4m3 | rope) and
 * scales[0..7] (7 ue8m0, then 0). */
void dsops_fp8_model1_row(const uint16_t *row, uint8_t *body, uint8_t *scales);

/* One Q8 group (spec §2.7): q[0..n-1] and the fp32 scale. */
void dsops_q8_group(const float *v, int n, int8_t *q, float *scale);

/* y[j] = sum_k v[k] * hm[k][j] in fp32 (spec §2.6), hm: [d][d] fp32 (widened once by the caller). */
void dsops_hadamard_row(const float *v, int d, const float *hm, float *y);

/* V8 for a cache_index [T] int64: every non-negative slot below `rows` (NB * BS) and none repeated.
 * scratch: dsops_cache_slots_scratch_bytes(T). */
size_t dsops_cache_slots_scratch_bytes(int64_t T);
dsops_status dsops_check_cache_slots(const dsops_tensor *cache_index, int64_t rows, void *scratch);

#endif
