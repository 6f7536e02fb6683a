/* Reference oracle of mla_prolog_v4 (spec/OPS.md §3.3; primitives §2.2 linear maps, §2.3 RMSNorm,
 * §2.5.1 RoPE, §2.7 Q8).
 *
 * The Math steps of §3.3, literally, for all tokens of the call. The variant follows the dtype of wq_b.
 *   bf16 wq_b:
 *     1. a   = bf16(lin(x, wq_a))                                          [T, Q]
 *     2. qr  = bf16(RMSNorm(a; gamma_cq, eps_cq))                          output qr [T, Q] bf16
 *     3. qb  = bf16(lin(qr, wq_b))                                         [T, N*D]
 *     6. ka  = bf16(lin(x, wkv))                                           [T, D]
 *   int8 wq_b (a, cq and qb stay fp32):
 *     1'. a  = lin(x, wq_a);  2'. cq = RMSNorm(a; gamma_cq, eps_cq);  (qr, qr_scale) = Q8(cq) over Q
 *     3'. qb[n] = (f32(ilin(qr, wq_b)[n]) * qr_scale) * wq_b_scale[n]   (two multiplies, this order)
 *     6'. ka = lin(x, wkv)
 *   both:
 *     4. qn_h = bf16(RMSNorm_unweighted(qb[h*D : h*D+D]; eps_qh))          per head, over D, in fp32
 *     5. q[t,h] = [qn_h[0:Dn] ; bf16(rot(qn_h[Dn:D], rope_cos[t], rope_sin[t]))]     Dn = D - 64
 *     7. kn = bf16(RMSNorm(ka; gamma_ckv, eps_ckv))
 *     8. kv[t] = [kn[0:Dn] ; bf16(rot(kn[Dn:D], rope_cos[t], rope_sin[t]))]
 *
 * The row-level definitions (RMSNorm, rotation, Q8 group) are those of ref_prim.c, reached through ref.h.
 * Every fp32 sum starts at 0 and adds its terms in ascending index order; nothing is contracted into FMA
 * (built with -ffp-contract=off). The only liberty taken is loop order: a linear map runs the sums of up
 * to M4_TB tokens side by side (k outer, token inner); each individual sum is still accumulated in
 * ascending k. Output rows are independent and are spread over OpenMP threads; no value depends on the
 * thread that computes it.
 *
 * Every tensor is read and written through its strides (in elements). a->prepared is ignored. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

#define M4_DR 64  /* rotary dims (fixed in this version) */
#define M4_TB 16  /* tokens whose sums run side by side in a linear map */

/* ---- number formats (spec §2.1) ---------------------------------------------------------------- */

static float m4_bf16(float f) { return dsops_ref_f32_from_bf16(dsops_ref_bf16_from_f32(f)); }

/* ---- strided element access ---------------------------------------------------------------------- */

/* Address of element [i0, i1, i2] of `t` (indices beyond its rank are ignored). */
static unsigned char *m4_at(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    int64_t off = t->ndim > 0 ? i0 * t->stride[0] : 0;
    if (t->ndim > 1)
        off += i1 * t->stride[1];
    if (t->ndim > 2)
        off += i2 * t->stride[2];
    return (unsigned char *)t->data + off * (int64_t)dsops_dtype_size(t->dtype);
}

/* A bf16 or fp32 element widened to fp32 (activations, weights, norm weights, tables, scales). */
static float m4_getf(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    const unsigned char *p = m4_at(t, i0, i1, i2);
    if (t->dtype == DSOPS_FP32) {
        float v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return dsops_ref_f32_from_bf16(h);
}

static int8_t m4_get_i8(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    int8_t v;
    memcpy(&v, m4_at(t, i0, i1, i2), sizeof v);
    return v;
}

static void m4_put_bf16(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v)
{
    uint16_t h = dsops_ref_bf16_from_f32(v);
    memcpy(m4_at(t, i0, i1, i2), &h, sizeof h);
}

static void m4_put_f32(const dsops_tensor *t, int64_t i0, float v) { memcpy(m4_at(t, i0, 0, 0), &v, sizeof v); }

static void m4_put_i8(const dsops_tensor *t, int64_t i0, int64_t i1, int8_t v)
{
    memcpy(m4_at(t, i0, i1, 0), &v, sizeof v);
}

static void *m4_alloc(size_t n)
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
static void m4_lin(const float *in, int64_t T, int64_t K, const dsops_tensor *W, float *out)
{
    const int64_t Nout = W->shape[0];
    float *blk = m4_alloc(sizeof(float) * (size_t)(K * M4_TB)); /* [K][M4_TB] one block of tokens, transposed */
    for (int64_t t0 = 0; t0 < T; t0 += M4_TB) {
        const int64_t nt = T - t0 < M4_TB ? T - t0 : M4_TB;
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < M4_TB; j++)
                blk[k * M4_TB + j] = j < nt ? in[(t0 + j) * K + k] : 0.0f;
#pragma omp parallel
        {
            float *w = m4_alloc(sizeof(float) * (size_t)K); /* [K] one weight row, widened */
#pragma omp for schedule(static)
            for (int64_t n = 0; n < Nout; n++) {
                float acc[M4_TB];
                for (int j = 0; j < M4_TB; j++)
                    acc[j] = 0.0f;
                for (int64_t k = 0; k < K; k++)
                    w[k] = m4_getf(W, n, k, 0);
                for (int64_t k = 0; k < K; k++) {
                    const float *col = blk + k * M4_TB;
                    for (int j = 0; j < M4_TB; j++)
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
static void m4_ilin(const int32_t *in, int64_t T, int64_t K, const dsops_tensor *W, int32_t *out)
{
    const int64_t Nout = W->shape[0];
    int32_t *blk = m4_alloc(sizeof(int32_t) * (size_t)(K * M4_TB)); /* [K][M4_TB] */
    for (int64_t t0 = 0; t0 < T; t0 += M4_TB) {
        const int64_t nt = T - t0 < M4_TB ? T - t0 : M4_TB;
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < M4_TB; j++)
                blk[k * M4_TB + j] = j < nt ? in[(t0 + j) * K + k] : 0;
#pragma omp parallel
        {
            int32_t *w = m4_alloc(sizeof(int32_t) * (size_t)K); /* [K] one weight row */
#pragma omp for schedule(static)
            for (int64_t n = 0; n < Nout; n++) {
                int32_t acc[M4_TB];
                for (int j = 0; j < M4_TB; j++)
                    acc[j] = 0;
                for (int64_t k = 0; k < K; k++)
                    w[k] = m4_get_i8(W, n, k, 0);
                for (int64_t k = 0; k < K; k++) {
                    const int32_t *col = blk + k * M4_TB;
                    for (int j = 0; j < M4_TB; j++)
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

/* ---- small helpers ------------------------------------------------------------------------------ */

/* A [n] bf16 / fp32 vector widened into v. */
static void m4_vec(const dsops_tensor *t, int64_t n, float *v)
{
    for (int64_t i = 0; i < n; i++)
        v[i] = m4_getf(t, i, 0, 0);
}

/* The last 64 values of v [d] (bf16 values) -> bf16(rot(v[d-64:d], c, s)) in place. */
static void m4_rope_tail(float *v, int64_t d, const float *c, const float *s, dsops_rope_mode mode, int inverse)
{
    float y[M4_DR];
    dsops_ref_rope_row(v + d - M4_DR, c, s, mode, inverse, y);
    for (int e = 0; e < M4_DR; e++)
        v[d - M4_DR + e] = m4_bf16(y[e]);
}

/* ---- the operator ----------------------------------------------------------------------------- */

void dsops_ref_mla_prolog_v4(const dsops_mla_prolog_v4_args *a)
{
    const int64_t T = a->x.shape[0];       /* x [T, H] bf16 */
    const int64_t H = a->x.shape[1];
    const int64_t Q = a->wq_a.shape[0];    /* wq_a [Q, H] bf16 */
    const int64_t D = a->wkv.shape[0];     /* wkv [D, H] bf16 */
    const int64_t ND = a->wq_b.shape[0];   /* wq_b [N*D, Q] bf16 or int8 */
    const int64_t N = ND / D;
    const int int8 = a->wq_b.dtype == DSOPS_INT8;
    if (T <= 0)
        return;

    float *xs = m4_alloc(sizeof(float) * (size_t)(T * H));    /* [T, H] x widened */
    float *acc = m4_alloc(sizeof(float) * (size_t)(T * Q));   /* [T, Q] a */
    float *cq = m4_alloc(sizeof(float) * (size_t)(T * Q));    /* [T, Q] normalised q latent */
    float *qb = m4_alloc(sizeof(float) * (size_t)(T * ND));   /* [T, N*D] up-projected queries */
    float *ka = m4_alloc(sizeof(float) * (size_t)(T * D));    /* [T, D] latent kv projection */
    float *gcq = m4_alloc(sizeof(float) * (size_t)Q);         /* [Q] gamma_cq widened */
    float *gckv = m4_alloc(sizeof(float) * (size_t)D);        /* [D] gamma_ckv widened */

    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < H; k++)
            xs[t * H + k] = m4_getf(&a->x, t, k, 0);
    m4_vec(&a->gamma_cq, Q, gcq);
    m4_vec(&a->gamma_ckv, D, gckv);

    /* steps 1-2 (1'-2'): a, then the weighted RMSNorm over Q */
    m4_lin(xs, T, H, &a->wq_a, acc);
    for (int64_t t = 0; t < T; t++) {
        float *row = acc + t * Q;
        if (!int8)
            for (int64_t n = 0; n < Q; n++)
                row[n] = m4_bf16(row[n]);
        dsops_ref_rmsnorm_row(row, Q, gcq, a->eps_cq, cq + t * Q);
        if (!int8)
            for (int64_t n = 0; n < Q; n++)
                cq[t * Q + n] = m4_bf16(cq[t * Q + n]);
    }

    /* step 3 (3'): qr output and the up-projection */
    if (!int8) {
        for (int64_t t = 0; t < T; t++)
            for (int64_t n = 0; n < Q; n++)
                m4_put_bf16(&a->qr, t, n, 0, cq[t * Q + n]);               /* qr [T, Q] bf16 */
        m4_lin(cq, T, Q, &a->wq_b, qb);
        for (int64_t i = 0; i < T * ND; i++)
            qb[i] = m4_bf16(qb[i]);
    } else {
        int8_t *q8 = m4_alloc((size_t)Q);                                /* [Q] one token's qr */
        int32_t *qi = m4_alloc(sizeof(int32_t) * (size_t)(T * Q));       /* [T, Q] qr widened */
        float *qs = m4_alloc(sizeof(float) * (size_t)T);                 /* [T] qr_scale */
        int32_t *iacc = m4_alloc(sizeof(int32_t) * (size_t)(T * ND));    /* [T, N*D] exact dots */
        for (int64_t t = 0; t < T; t++) {
            dsops_ref_q8_group(cq + t * Q, Q, q8, &qs[t]);
            for (int64_t n = 0; n < Q; n++) {
                qi[t * Q + n] = q8[n];
                m4_put_i8(&a->qr, t, n, q8[n]);                           /* qr [T, Q] int8 */
            }
            m4_put_f32(&a->qr_scale, t, qs[t]);                           /* qr_scale [T] fp32 */
        }
        m4_ilin(qi, T, Q, &a->wq_b, iacc);
        for (int64_t n = 0; n < ND; n++) {
            const float ws = m4_getf(&a->wq_b_scale, n, 0, 0);           /* wq_b_scale [N*D] fp32 */
            for (int64_t t = 0; t < T; t++)
                qb[t * ND + n] = ((float)iacc[t * ND + n] * qs[t]) * ws;
        }
        free(q8);
        free(qi);
        free(qs);
        free(iacc);
    }

    /* step 6 (6'): the latent kv projection */
    m4_lin(xs, T, H, &a->wkv, ka);
    if (!int8)
        for (int64_t i = 0; i < T * D; i++)
            ka[i] = m4_bf16(ka[i]);

#pragma omp parallel
    {
        float *v = m4_alloc(sizeof(float) * (size_t)D); /* [D] one head (or the kv row) */
#pragma omp for schedule(static)
        for (int64_t t = 0; t < T; t++) {
            float c[M4_DR], s[M4_DR];
            for (int e = 0; e < M4_DR; e++) {
                c[e] = m4_getf(&a->rope_cos, t, e, 0);                    /* rope_cos [T, 64] */
                s[e] = m4_getf(&a->rope_sin, t, e, 0);                    /* rope_sin [T, 64] */
            }
            /* steps 4-5: per head, unweighted RMSNorm over D in fp32, bf16, then rotate the last 64 */
            for (int64_t h = 0; h < N; h++) {
                dsops_ref_rmsnorm_row(qb + t * ND + h * D, D, NULL, a->eps_qh, v);
                for (int64_t d = 0; d < D; d++)
                    v[d] = m4_bf16(v[d]);
                m4_rope_tail(v, D, c, s, a->rope_mode, a->rope_inverse);
                for (int64_t d = 0; d < D; d++)
                    m4_put_bf16(&a->q, t, h, d, v[d]);                    /* q [T, N, D] bf16 */
            }
            /* steps 7-8: kn = bf16(RMSNorm(ka; gamma_ckv)), rotate the last 64 */
            dsops_ref_rmsnorm_row(ka + t * D, D, gckv, a->eps_ckv, v);
            for (int64_t d = 0; d < D; d++)
                v[d] = m4_bf16(v[d]);
            m4_rope_tail(v, D, c, s, a->rope_mode, a->rope_inverse);
            for (int64_t d = 0; d < D; d++)
                m4_put_bf16(&a->kv, t, d, 0, v[d]);                       /* kv [T, D] bf16 */
        }
        free(v);
    }

    free(xs);
    free(acc);
    free(cq);
    free(qb);
    free(ka);
    free(gcq);
    free(gckv);
}
