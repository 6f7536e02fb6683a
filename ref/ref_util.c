/* Internal building blocks shared by the reference oracles (ref_util.h). Built with -ffp-contract=off like
 * every oracle. */
#include "ref_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

#define REF_TB 16 /* tokens whose sums run side by side in a linear map */

void *ref_alloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "dsops_ref: out of memory (%zu bytes)\n", n);
        abort();
    }
    return p;
}

float ref_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint32_t ref_bits_from_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float ref_round_bf16(float f) { return dsops_ref_f32_from_bf16(dsops_ref_bf16_from_f32(f)); }

/* ---- strided element access ---------------------------------------------------------------------- */

static size_t ref_elem_size(dsops_dtype dt)
{
    switch (dt) {
    case DSOPS_BF16: case DSOPS_FP16: return 2;
    case DSOPS_FP32: case DSOPS_INT32: return 4;
    case DSOPS_INT8: case DSOPS_UINT8: case DSOPS_FP8_E4M3: return 1;
    case DSOPS_INT64: return 8;
    default: return 0;
    }
}

unsigned char *ref_at(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    int64_t off = t->ndim > 0 ? i0 * t->stride[0] : 0;
    if (t->ndim > 1)
        off += i1 * t->stride[1];
    if (t->ndim > 2)
        off += i2 * t->stride[2];
    return (unsigned char *)t->data + off * (int64_t)ref_elem_size(t->dtype);
}

float ref_get_f(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    const unsigned char *p = ref_at(t, i0, i1, i2);
    if (t->dtype == DSOPS_FP32) {
        float v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    if (t->dtype == DSOPS_FP8_E4M3)
        return dsops_ref_f32_from_e4m3(*p);
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return t->dtype == DSOPS_FP16 ? dsops_ref_f32_from_fp16(h) : dsops_ref_f32_from_bf16(h);
}

int8_t ref_get_i8(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    int8_t v;
    memcpy(&v, ref_at(t, i0, i1, i2), sizeof v);
    return v;
}

uint8_t ref_get_u8(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2) { return *ref_at(t, i0, i1, i2); }

int32_t ref_get_i32(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    int32_t v;
    memcpy(&v, ref_at(t, i0, i1, i2), sizeof v);
    return v;
}

int64_t ref_get_i64(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    int64_t v;
    memcpy(&v, ref_at(t, i0, i1, i2), sizeof v);
    return v;
}

void ref_get_vec(const dsops_tensor *t, int64_t n, float *v)
{
    for (int64_t i = 0; i < n; i++)
        v[i] = ref_get_f(t, i, 0, 0);
}

void ref_get_row(const dsops_tensor *t, int64_t r, int64_t n, float *v)
{
    for (int64_t i = 0; i < n; i++)
        v[i] = ref_get_f(t, r, i, 0);
}

void ref_get_mat(const dsops_tensor *t, int64_t rows, int64_t cols, float *m)
{
    for (int64_t r = 0; r < rows; r++)
        ref_get_row(t, r, cols, m + r * cols);
}

void ref_put_bf16(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v)
{
    uint16_t h = dsops_ref_bf16_from_f32(v);
    memcpy(ref_at(t, i0, i1, i2), &h, sizeof h);
}

void ref_put_f32(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v)
{
    memcpy(ref_at(t, i0, i1, i2), &v, sizeof v);
}

void ref_put_f(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v)
{
    if (t->dtype == DSOPS_FP32) {
        ref_put_f32(t, i0, i1, i2, v);
        return;
    }
    uint16_t h = t->dtype == DSOPS_FP16 ? dsops_ref_fp16_from_f32(v) : dsops_ref_bf16_from_f32(v);
    memcpy(ref_at(t, i0, i1, i2), &h, sizeof h);
}

void ref_put_i8(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, int8_t v)
{
    memcpy(ref_at(t, i0, i1, i2), &v, sizeof v);
}

void ref_put_u8(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, uint8_t v)
{
    *ref_at(t, i0, i1, i2) = v;
}

void ref_put_i32(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, int32_t v)
{
    memcpy(ref_at(t, i0, i1, i2), &v, sizeof v);
}

/* ---- attention rows (spec §2.10) ------------------------------------------------------------------ */

int ref_attn_row_is_nan(const float *s, int64_t n)
{
    int some_nan = 0, some_pos_inf = 0, all_neg_inf = 1;
    for (int64_t e = 0; e < n; e++) {
        if (isnan(s[e]))
            some_nan = 1;
        if (s[e] == INFINITY)
            some_pos_inf = 1;
        if (s[e] != -INFINITY)
            all_neg_inf = 0;
    }
    return some_nan || some_pos_inf || all_neg_inf;
}

float ref_row_max(const float *s, int64_t n)
{
    float m = -INFINITY;
    for (int64_t e = 0; e < n; e++)
        if (s[e] > m)
            m = s[e];
    return m;
}

void ref_attn_put_stats(const dsops_tensor *lse, const dsops_tensor *max_logits, int64_t t, int64_t h, float lse_value,
                        float max_value)
{
    if (lse->data)
        ref_put_f32(lse, t, h, 0, lse_value);
    if (max_logits->data)
        ref_put_f32(max_logits, t, h, 0, max_value);
}

/* ---- row steps with their output rounding ---------------------------------------------------------- */

void ref_rope_bf16(float *v, const float *c, const float *s, dsops_rope_mode mode, int inverse)
{
    float y[64];
    dsops_ref_rope_row(v, c, s, mode, inverse, y);
    for (int e = 0; e < 64; e++)
        v[e] = ref_round_bf16(y[e]);
}

void ref_hadamard_bf16(float *v, int64_t d, const float *hm, float *tmp)
{
    if (!hm)
        return;
    dsops_ref_hadamard_row(v, d, hm, tmp);
    for (int64_t j = 0; j < d; j++)
        v[j] = ref_round_bf16(tmp[j]);
}

/* ---- linear maps (spec §2.2) --------------------------------------------------------------------- */

/* Both maps run the sums of up to REF_TB tokens side by side (k outer, token inner) over a transposed,
 * zero-padded copy of the block; each sum still starts at 0 and adds its products in ascending k.
 * Output rows n are spread over OpenMP threads; no value depends on the thread that computes it. */

void ref_lin(const float *in, int64_t T, int64_t K, const dsops_tensor *W, float *out)
{
    const int64_t Nout = W->shape[0];
    float *blk = ref_alloc(sizeof(float) * (size_t)(K * REF_TB)); /* [K][REF_TB] a block of tokens, transposed */
    for (int64_t t0 = 0; t0 < T; t0 += REF_TB) {
        const int64_t nt = T - t0 < REF_TB ? T - t0 : REF_TB;
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < REF_TB; j++)
                blk[k * REF_TB + j] = j < nt ? in[(t0 + j) * K + k] : 0.0f;
#pragma omp parallel
        {
            float *w = ref_alloc(sizeof(float) * (size_t)K); /* [K] one weight row, widened */
#pragma omp for schedule(static)
            for (int64_t n = 0; n < Nout; n++) {
                float acc[REF_TB];
                for (int j = 0; j < REF_TB; j++)
                    acc[j] = 0.0f;
                ref_get_row(W, n, K, w);
                for (int64_t k = 0; k < K; k++) {
                    const float *col = blk + k * REF_TB;
                    for (int j = 0; j < REF_TB; j++)
                        acc[j] += col[j] * w[k];
                }
                for (int64_t j = 0; j < nt; j++)
                    out[(t0 + j) * Nout + n] = acc[j];
            }
            free(w);
        }
    }
    free(blk);
}

void ref_ilin(const int8_t *in, int64_t T, int64_t K, const dsops_tensor *W, int32_t *out)
{
    const int64_t Nout = W->shape[0];
    int32_t *blk = ref_alloc(sizeof(int32_t) * (size_t)(K * REF_TB)); /* [K][REF_TB] */
    for (int64_t t0 = 0; t0 < T; t0 += REF_TB) {
        const int64_t nt = T - t0 < REF_TB ? T - t0 : REF_TB;
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < REF_TB; j++)
                blk[k * REF_TB + j] = j < nt ? in[(t0 + j) * K + k] : 0;
#pragma omp parallel
        {
            int32_t *w = ref_alloc(sizeof(int32_t) * (size_t)K); /* [K] one weight row */
#pragma omp for schedule(static)
            for (int64_t n = 0; n < Nout; n++) {
                int32_t acc[REF_TB];
                for (int j = 0; j < REF_TB; j++)
                    acc[j] = 0;
                for (int64_t k = 0; k < K; k++)
                    w[k] = ref_get_i8(W, n, k, 0);
                for (int64_t k = 0; k < K; k++) {
                    const int32_t *col = blk + k * REF_TB;
                    for (int j = 0; j < REF_TB; j++)
                        acc[j] += col[j] * w[k];
                }
                for (int64_t j = 0; j < nt; j++)
                    out[(t0 + j) * Nout + n] = acc[j];
            }
            free(w);
        }
    }
    free(blk);
}
