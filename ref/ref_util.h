/* Internal building blocks shared by the reference oracles (not part of the oracle API of ref.h): strided
 * element access, checked allocation, number-format bits, the rotation and Hadamard row steps with their
 * bf16 rounding, and the linear maps of spec §2.2.
 *
 * Tensors are addressed as [i0, i1, i2] through their strides (in elements); indices beyond a tensor's
 * rank are ignored. Everything here is as literal as the oracles. */
#ifndef DSOPS_REF_UTIL_H
#define DSOPS_REF_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "dsops.h"

/* malloc that never returns NULL: the oracles are test code, so running out of memory aborts with a
 * message. n == 0 allocates one byte. */
void *ref_alloc(size_t n);

/* The bits of an fp32 value and back. */
float ref_f32_from_bits(uint32_t u);
uint32_t ref_bits_from_f32(float f);

/* f rounded to the nearest bf16 (ties to even), returned as fp32 (spec §2.1). */
float ref_round_bf16(float f);

/* Address of element [i0, i1, i2] of t. */
unsigned char *ref_at(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2);

/* Element reads. ref_get_f widens a bf16, fp16 or fp32 element (by t->dtype) to fp32. */
float ref_get_f(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2);
int8_t ref_get_i8(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2);
uint8_t ref_get_u8(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2);
int32_t ref_get_i32(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2);
int64_t ref_get_i64(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2);

/* Widened copies: v[i] = t[i] for i < n (1-D t); v[i] = t[r][i] for i < n; m[r][c] = t[r][c] for
 * r < rows, c < cols (m dense). */
void ref_get_vec(const dsops_tensor *t, int64_t n, float *v);
void ref_get_row(const dsops_tensor *t, int64_t r, int64_t n, float *v);
void ref_get_mat(const dsops_tensor *t, int64_t rows, int64_t cols, float *m);

/* Element writes, v rounded once to the element's format. ref_put_f follows t->dtype (bf16, fp16 or
 * fp32). */
void ref_put_bf16(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v);
void ref_put_f32(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v);
void ref_put_f(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v);
void ref_put_i8(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, int8_t v);
void ref_put_u8(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, uint8_t v);
void ref_put_i32(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, int32_t v);

/* The poisoned-row rule of spec §2.10 (A3) for an attention row with n >= 1 keys and logits s[0 .. n-1]:
 * 1 when some logit is NaN, the largest is +Inf, or every one is -Inf (out and lse are then NaN), else 0. */
int ref_attn_row_is_nan(const float *s, int64_t n);
/* The largest of s[0 .. n-1] (-Inf for n = 0). */
float ref_row_max(const float *s, int64_t n);
/* The statistics of attention row (t, h) into lse and max_logits ([T, N] fp32 each), each where given. */
void ref_attn_put_stats(const dsops_tensor *lse, const dsops_tensor *max_logits, int64_t t, int64_t h, float lse_value,
                        float max_value);

/* v[0:64] (bf16 values) -> bf16(rot(v[0:64], c, s)) in place (spec §2.5.1; c, s: [64] table rows). */
void ref_rope_bf16(float *v, const float *c, const float *s, dsops_rope_mode mode, int inverse);

/* v [d] (bf16 values) -> bf16(hadamard(v, hm)) in place (spec §2.6; hm [d][d] dense, NULL = identity;
 * tmp [d] scratch). */
void ref_hadamard_bf16(float *v, int64_t d, const float *hm, float *tmp);

/* out[t][n] = lin(in[t], W)[n] = sum_k in[t][k] * f32(W[n][k]) in fp32, k ascending, for t < T.
 * in: [T][K] fp32 (dense), W: [Nout, K] bf16 or fp32 (strided), out: [T][Nout] fp32 (dense, not rounded). */
void ref_lin(const float *in, int64_t T, int64_t K, const dsops_tensor *W, float *out);

/* out[t][n] = ilin(in[t], W)[n] = sum_k int32(in[t][k]) * int32(W[n][k]), exact in int32 (K <= 131072).
 * in: [T][K] int8 (dense), W: [Nout, K] int8 (strided), out: [T][Nout] int32 (dense). */
void ref_ilin(const int8_t *in, int64_t T, int64_t K, const dsops_tensor *W, int32_t *out);

#endif
