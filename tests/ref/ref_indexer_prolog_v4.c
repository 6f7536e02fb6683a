/* Reference oracle of indexer_prolog_v4 (spec/OPS.md §3.5; primitives §2.2 linear maps, §2.5.1 RoPE,
 * §2.6 Hadamard, §2.7 Q8).
 *
 * The Math steps of §3.5, literally, for all tokens of the call (row n of idx_wq_b is head n / DI,
 * dimension n % DI):
 *   1. qf[n] = (f32(ilin(qr[t], idx_wq_b)[n]) * qr_scale[t]) * idx_wq_b_scale[n]     fp32, this order
 *   2. qb = bf16(qf) viewed [NI, DI]
 *   3. u_h = [qb_h[0:DI-64] ; bf16(rot(qb_h[DI-64:DI], rope_cos[t], rope_sin[t]))]
 *   4. hq_h[j] = bf16(sum_k f32(u_h[k]) * f32(hadamard[k][j]))                        (right multiplication)
 *   5. (q_idx[t,h], s) = Q8(f32(hq_h)); q_idx_scale[t,h] = fp16(s)
 *   6. w = bf16(lin(x, weights_proj))                                                 [NI]
 *   7. weights[t,h] = fp16(f32(w_h) * weights_scale)
 *
 * The row-level definitions (rotation, Q8 group, Hadamard product) are those of ref_prim.c, reached
 * through ref.h. Every fp32 sum starts at 0 and adds its terms in ascending index order; nothing is
 * contracted into FMA (built with -ffp-contract=off). The only liberty taken is loop order: a linear map
 * runs the sums of up to I4_TB tokens side by side (k outer, token inner); each individual sum is still
 * accumulated in ascending k. Output rows are independent and are spread over OpenMP threads; no value
 * depends on the thread that computes it.
 *
 * Every tensor is read and written through its strides (in elements). a->prepared is ignored. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

#define I4_DR 64  /* rotary dims (fixed in this version) */
#define I4_TB 16  /* tokens whose sums run side by side in a linear map */

/* ---- number formats (spec §2.1) ---------------------------------------------------------------- */

static float i4_bf16(float f) { return dsops_ref_f32_from_bf16(dsops_ref_bf16_from_f32(f)); }

/* ---- strided element access ---------------------------------------------------------------------- */

/* Address of element [i0, i1, i2] of `t` (indices beyond its rank are ignored). */
static unsigned char *i4_at(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    int64_t off = t->ndim > 0 ? i0 * t->stride[0] : 0;
    if (t->ndim > 1)
        off += i1 * t->stride[1];
    if (t->ndim > 2)
        off += i2 * t->stride[2];
    return (unsigned char *)t->data + off * (int64_t)dsops_dtype_size(t->dtype);
}

/* A bf16 or fp32 element widened to fp32 (activations, weights, tables, matrices, scales). */
static float i4_getf(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    const unsigned char *p = i4_at(t, i0, i1, i2);
    if (t->dtype == DSOPS_FP32) {
        float v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return dsops_ref_f32_from_bf16(h);
}

static int8_t i4_get_i8(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    int8_t v;
    memcpy(&v, i4_at(t, i0, i1, i2), sizeof v);
    return v;
}

static void i4_put_fp16(const dsops_tensor *t, int64_t i0, int64_t i1, float v)
{
    uint16_t h = dsops_ref_fp16_from_f32(v);
    memcpy(i4_at(t, i0, i1, 0), &h, sizeof h);
}

static void i4_put_i8(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, int8_t v)
{
    memcpy(i4_at(t, i0, i1, i2), &v, sizeof v);
}

static void *i4_alloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "dsops_ref: out of memory (%zu bytes)\n", n);
        abort();
    }
    return p;
}

/* ---- linear maps (spec §2.2) --------------------------------------------------------------------- */

/* out[t][n] = lin(in[t], W)[n] = sum_k in[t][k] * f32(W[n][k]) in fp32, k ascending, for t < T.
 * in: [T][K] fp32 (dense), W: [Nout, K] bf16 (strided), out: [T][Nout] fp32 (dense, not rounded). */
static void i4_lin(const float *in, int64_t T, int64_t K, const dsops_tensor *W, float *out)
{
    const int64_t Nout = W->shape[0];
    float *blk = i4_alloc(sizeof(float) * (size_t)(K * I4_TB)); /* [K][I4_TB] one block of tokens, transposed */
    for (int64_t t0 = 0; t0 < T; t0 += I4_TB) {
        const int64_t nt = T - t0 < I4_TB ? T - t0 : I4_TB;
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < I4_TB; j++)
                blk[k * I4_TB + j] = j < nt ? in[(t0 + j) * K + k] : 0.0f;
#pragma omp parallel
        {
            float *w = i4_alloc(sizeof(float) * (size_t)K); /* [K] one weight row, widened */
#pragma omp for schedule(static)
            for (int64_t n = 0; n < Nout; n++) {
                float acc[I4_TB];
                for (int j = 0; j < I4_TB; j++)
                    acc[j] = 0.0f;
                for (int64_t k = 0; k < K; k++)
                    w[k] = i4_getf(W, n, k, 0);
                for (int64_t k = 0; k < K; k++) {
                    const float *col = blk + k * I4_TB;
                    for (int j = 0; j < I4_TB; j++)
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

/* out[t][n] = ilin(in[t], W)[n] = sum_k int32(in[t][k]) * int32(W[n][k]), exact in int32 (K <= 131072).
 * in: [T][K] int32 (dense, int8 values), W: [Nout, K] int8 (strided), out: [T][Nout] int32. */
static void i4_ilin(const int32_t *in, int64_t T, int64_t K, const dsops_tensor *W, int32_t *out)
{
    const int64_t Nout = W->shape[0];
    int32_t *blk = i4_alloc(sizeof(int32_t) * (size_t)(K * I4_TB)); /* [K][I4_TB] */
    for (int64_t t0 = 0; t0 < T; t0 += I4_TB) {
        const int64_t nt = T - t0 < I4_TB ? T - t0 : I4_TB;
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < I4_TB; j++)
                blk[k * I4_TB + j] = j < nt ? in[(t0 + j) * K + k] : 0;
#pragma omp parallel
        {
            int32_t *w = i4_alloc(sizeof(int32_t) * (size_t)K); /* [K] one weight row */
#pragma omp for schedule(static)
            for (int64_t n = 0; n < Nout; n++) {
                int32_t acc[I4_TB];
                for (int j = 0; j < I4_TB; j++)
                    acc[j] = 0;
                for (int64_t k = 0; k < K; k++)
                    w[k] = i4_get_i8(W, n, k, 0);
                for (int64_t k = 0; k < K; k++) {
                    const int32_t *col = blk + k * I4_TB;
                    for (int j = 0; j < I4_TB; j++)
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

/* ---- the operator ----------------------------------------------------------------------------- */

void dsops_ref_indexer_prolog_v4(const dsops_indexer_prolog_v4_args *a)
{
    const int64_t T = a->x.shape[0];              /* x [T, H] bf16 */
    const int64_t H = a->x.shape[1];
    const int64_t Q = a->qr.shape[1];             /* qr [T, Q] int8 */
    const int64_t NI = a->weights_proj.shape[0];  /* weights_proj [NI, H] bf16 */
    const int64_t DI = a->hadamard.shape[0];      /* hadamard [DI, DI] bf16 or fp32 */
    const int64_t NQ = NI * DI;                   /* idx_wq_b [NI*DI, Q] int8 */
    if (T <= 0)
        return;

    float *xs = i4_alloc(sizeof(float) * (size_t)(T * H));       /* [T, H] x widened */
    int32_t *qi = i4_alloc(sizeof(int32_t) * (size_t)(T * Q));   /* [T, Q] qr widened */
    int32_t *dots = i4_alloc(sizeof(int32_t) * (size_t)(T * NQ));/* [T, NI*DI] exact dots */
    float *wp = i4_alloc(sizeof(float) * (size_t)(T * NI));      /* [T, NI] weight projection (fp32) */
    float *hm = i4_alloc(sizeof(float) * (size_t)(DI * DI));     /* [DI, DI] hadamard widened, row k col j */

    for (int64_t t = 0; t < T; t++) {
        for (int64_t k = 0; k < H; k++)
            xs[t * H + k] = i4_getf(&a->x, t, k, 0);
        for (int64_t k = 0; k < Q; k++)
            qi[t * Q + k] = i4_get_i8(&a->qr, t, k, 0);
    }
    for (int64_t k = 0; k < DI; k++)
        for (int64_t j = 0; j < DI; j++)
            hm[k * DI + j] = i4_getf(&a->hadamard, k, j, 0);

    i4_ilin(qi, T, Q, &a->idx_wq_b, dots);
    i4_lin(xs, T, H, &a->weights_proj, wp);

#pragma omp parallel
    {
        float *u = i4_alloc(sizeof(float) * (size_t)DI);   /* [DI] u_h */
        float *hq = i4_alloc(sizeof(float) * (size_t)DI);  /* [DI] hq_h */
        int8_t *q8 = i4_alloc((size_t)DI);                 /* [DI] */
#pragma omp for schedule(static)
        for (int64_t t = 0; t < T; t++) {
            float c[I4_DR], s[I4_DR], y[I4_DR];
            for (int e = 0; e < I4_DR; e++) {
                c[e] = i4_getf(&a->rope_cos, t, e, 0);                   /* rope_cos [T, 64] */
                s[e] = i4_getf(&a->rope_sin, t, e, 0);                   /* rope_sin [T, 64] */
            }
            const float qs = i4_getf(&a->qr_scale, t, 0, 0);             /* qr_scale [T] fp32 */
            for (int64_t h = 0; h < NI; h++) {
                /* steps 1-2 */
                for (int64_t d = 0; d < DI; d++) {
                    const int64_t n = h * DI + d;
                    const float ws = i4_getf(&a->idx_wq_b_scale, n, 0, 0); /* idx_wq_b_scale [NI*DI] fp32 */
                    u[d] = i4_bf16(((float)dots[t * NQ + n] * qs) * ws);
                }
                /* step 3: rotate the last 64 dims */
                dsops_ref_rope_row(u + DI - I4_DR, c, s, a->rope_mode, a->rope_inverse, y);
                for (int e = 0; e < I4_DR; e++)
                    u[DI - I4_DR + e] = i4_bf16(y[e]);
                /* step 4 */
                dsops_ref_hadamard_row(u, DI, hm, hq);
                for (int64_t j = 0; j < DI; j++)
                    hq[j] = i4_bf16(hq[j]);
                /* step 5 */
                float sc;
                dsops_ref_q8_group(hq, DI, q8, &sc);
                for (int64_t d = 0; d < DI; d++)
                    i4_put_i8(&a->q_idx, t, h, d, q8[d]);                /* q_idx [T, NI, DI] int8 */
                i4_put_fp16(&a->q_idx_scale, t, h, sc);                  /* q_idx_scale [T, NI] fp16 */
                /* steps 6-7 */
                i4_put_fp16(&a->weights, t, h, i4_bf16(wp[t * NI + h]) * a->weights_scale); /* weights [T, NI] fp16 */
            }
        }
        free(u);
        free(hq);
        free(q8);
    }

    free(xs);
    free(qi);
    free(dots);
    free(wp);
    free(hm);
}
