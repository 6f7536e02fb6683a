/* Reference oracle of indexer_prolog_v32 (spec/OPS.md §4.2; primitives §2.2 linear maps, §2.4 LayerNorm,
 * §2.5.1 RoPE, §2.6 Hadamard, §2.7 Q8).
 *
 * The Math steps of §4.2, literally, for all tokens of the call. The variant follows the dtype of qr.
 *   int8:
 *     1. qf[n] = (f32(ilin(qr[t], idx_wq_b)[n]) * qr_scale[t]) * idx_wq_b_scale[n]; qb = bf16(qf) [NI, DI]
 *     2. u_h[0:64] = bf16(rot(qb_h[0:64])); u_h[64:DI] = qb_h[64:DI]
 *     3. hq_h = hadamard(u_h, hadamard_q); (q_idx[t,h], s) = Q8(hq_h); q_idx_scale[t,h] = fp16(s)
 *     4. k = bf16(LayerNorm(lin(x, idx_wk); ln_gamma_k, ln_beta_k, ln_eps))   (norm of the fp32 projection)
 *     5. k[0:64] = bf16(rot(k[0:64]))
 *     6. hk = hadamard(k, hadamard_k); (k8, ks) = Q8(hk)
 *     7. cache_index[t] >= 0: idx_k_cache[row] = k8, idx_k_scale_cache[row] = fp16(ks)
 *     8. weights[t,h] = fp16(f32(bf16(lin(x, weights_proj))[h]) * weights_scale)
 *   bf16:
 *     1. qb = bf16(lin(qr, idx_wq_b)); 2. q_idx = hadamard_q ? hadamard(u_h, hadamard_q) : u_h
 *     3. k as int8 steps 4-5; kk = hadamard_k ? hadamard(k, hadamard_k) : k; 4. cache row = kk
 *     5. weights[t,h] = bf16(f32(bf16(lin(x, weights_proj))[h]) * weights_scale)
 * where hadamard(v, Hm)[j] = bf16(sum_k f32(v[k]) * f32(Hm[k][j])) (a right multiplication).
 *
 * The row-level definitions (LayerNorm, rotation, Q8 group, Hadamard product) are those of ref_prim.c,
 * reached through ref.h. Every fp32 sum starts at 0 and adds its terms in ascending index order; nothing
 * is contracted into FMA (built with -ffp-contract=off). The only liberty taken is loop order: a linear
 * map runs the sums of up to IP_TB tokens side by side (k outer, token inner); each individual sum is
 * still accumulated in ascending k. Output rows are independent and are spread over OpenMP threads; no
 * value depends on the thread that computes it.
 *
 * Every tensor is read and written through its strides (in elements). a->prepared is ignored. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

#define IP_DR 64  /* rotary dims (fixed in this version) */
#define IP_TB 16  /* tokens whose sums run side by side in a linear map */

/* ---- number formats (spec §2.1) ---------------------------------------------------------------- */

static float ip_bf16(float f) { return dsops_ref_f32_from_bf16(dsops_ref_bf16_from_f32(f)); }

/* ---- strided element access ---------------------------------------------------------------------- */

static size_t ip_elem_size(dsops_dtype dt)
{
    switch (dt) {
    case DSOPS_BF16: case DSOPS_FP16: return 2;
    case DSOPS_FP32: case DSOPS_INT32: return 4;
    case DSOPS_INT8: case DSOPS_UINT8: return 1;
    case DSOPS_INT64: return 8;
    default: return 0;
    }
}

/* Address of element [i0, i1, i2] of `t` (indices beyond its rank are ignored). */
static unsigned char *ip_at(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    int64_t off = t->ndim > 0 ? i0 * t->stride[0] : 0;
    if (t->ndim > 1)
        off += i1 * t->stride[1];
    if (t->ndim > 2)
        off += i2 * t->stride[2];
    return (unsigned char *)t->data + off * (int64_t)ip_elem_size(t->dtype);
}

/* A bf16, fp16 or fp32 element widened to fp32 (activations, weights, norm weights, tables, matrices). */
static float ip_getf(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    const unsigned char *p = ip_at(t, i0, i1, i2);
    if (t->dtype == DSOPS_FP32) {
        float v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return t->dtype == DSOPS_FP16 ? dsops_ref_f32_from_fp16(h) : dsops_ref_f32_from_bf16(h);
}

static int8_t ip_get_i8(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    int8_t v;
    memcpy(&v, ip_at(t, i0, i1, i2), sizeof v);
    return v;
}

/* Stores v rounded to the tensor's dtype (bf16 or fp16; fp32 as is). */
static void ip_putf(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v)
{
    unsigned char *p = ip_at(t, i0, i1, i2);
    if (t->dtype == DSOPS_FP32) {
        memcpy(p, &v, sizeof v);
        return;
    }
    uint16_t h = t->dtype == DSOPS_FP16 ? dsops_ref_fp16_from_f32(v) : dsops_ref_bf16_from_f32(v);
    memcpy(p, &h, sizeof h);
}

static void ip_put_i8(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, int8_t v)
{
    memcpy(ip_at(t, i0, i1, i2), &v, sizeof v);
}

static void *ip_alloc(size_t n)
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
static void ip_lin(const float *in, int64_t T, int64_t K, const dsops_tensor *W, float *out)
{
    const int64_t Nout = W->shape[0];
    float *blk = ip_alloc(sizeof(float) * (size_t)(K * IP_TB)); /* [K][IP_TB] one block of tokens, transposed */
    for (int64_t t0 = 0; t0 < T; t0 += IP_TB) {
        const int64_t nt = T - t0 < IP_TB ? T - t0 : IP_TB;
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < IP_TB; j++)
                blk[k * IP_TB + j] = j < nt ? in[(t0 + j) * K + k] : 0.0f;
#pragma omp parallel
        {
            float *w = ip_alloc(sizeof(float) * (size_t)K); /* [K] one weight row, widened */
#pragma omp for schedule(static)
            for (int64_t n = 0; n < Nout; n++) {
                float acc[IP_TB];
                for (int j = 0; j < IP_TB; j++)
                    acc[j] = 0.0f;
                for (int64_t k = 0; k < K; k++)
                    w[k] = ip_getf(W, n, k, 0);
                for (int64_t k = 0; k < K; k++) {
                    const float *col = blk + k * IP_TB;
                    for (int j = 0; j < IP_TB; j++)
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
static void ip_ilin(const int32_t *in, int64_t T, int64_t K, const dsops_tensor *W, int32_t *out)
{
    const int64_t Nout = W->shape[0];
    int32_t *blk = ip_alloc(sizeof(int32_t) * (size_t)(K * IP_TB)); /* [K][IP_TB] */
    for (int64_t t0 = 0; t0 < T; t0 += IP_TB) {
        const int64_t nt = T - t0 < IP_TB ? T - t0 : IP_TB;
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < IP_TB; j++)
                blk[k * IP_TB + j] = j < nt ? in[(t0 + j) * K + k] : 0;
#pragma omp parallel
        {
            int32_t *w = ip_alloc(sizeof(int32_t) * (size_t)K); /* [K] one weight row */
#pragma omp for schedule(static)
            for (int64_t n = 0; n < Nout; n++) {
                int32_t acc[IP_TB];
                for (int j = 0; j < IP_TB; j++)
                    acc[j] = 0;
                for (int64_t k = 0; k < K; k++)
                    w[k] = ip_get_i8(W, n, k, 0);
                for (int64_t k = 0; k < K; k++) {
                    const int32_t *col = blk + k * IP_TB;
                    for (int j = 0; j < IP_TB; j++)
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
static void ip_vec(const dsops_tensor *t, int64_t n, float *v)
{
    for (int64_t i = 0; i < n; i++)
        v[i] = ip_getf(t, i, 0, 0);
}

/* The Hadamard matrix [d, d] widened into a dense row-major copy, or NULL when the tensor is absent. */
static float *ip_matrix(const dsops_tensor *t, int64_t d)
{
    if (!t->data)
        return NULL;
    float *m = ip_alloc(sizeof(float) * (size_t)(d * d));
    for (int64_t k = 0; k < d; k++)
        for (int64_t j = 0; j < d; j++)
            m[k * d + j] = ip_getf(t, k, j, 0);
    return m;
}

/* v [d] (bf16 values) -> bf16(hadamard(v, hm)) in place; hm NULL = identity. */
static void ip_hadamard(float *v, int64_t d, const float *hm, float *tmp)
{
    if (!hm)
        return;
    dsops_ref_hadamard_row(v, d, hm, tmp);
    for (int64_t j = 0; j < d; j++)
        v[j] = ip_bf16(tmp[j]);
}

/* The first 64 values of v (bf16 values) -> bf16(rot(v[0:64], c, s)) in place. */
static void ip_rope(float *v, const float *c, const float *s, dsops_rope_mode mode, int inverse)
{
    float y[IP_DR];
    dsops_ref_rope_row(v, c, s, mode, inverse, y);
    for (int e = 0; e < IP_DR; e++)
        v[e] = ip_bf16(y[e]);
}

/* ---- the operator ----------------------------------------------------------------------------- */

void dsops_ref_indexer_prolog_v32(const dsops_indexer_prolog_v32_args *a)
{
    const int64_t T = a->x.shape[0];            /* x [T, H] bf16 */
    const int64_t H = a->x.shape[1];
    const int64_t Q = a->qr.shape[1];           /* qr [T, Q] */
    const int64_t NI = a->weights_proj.shape[0];/* weights_proj [NI, H] */
    const int64_t DI = a->idx_wk.shape[0];      /* idx_wk [DI, H] */
    const int64_t NQ = NI * DI;                 /* idx_wq_b [NI*DI, Q] */
    const int int8 = a->qr.dtype == DSOPS_INT8;
    if (T <= 0)
        return;

    float *xs = ip_alloc(sizeof(float) * (size_t)(T * H));     /* [T, H] x widened */
    float *qb = ip_alloc(sizeof(float) * (size_t)(T * NQ));    /* [T, NI*DI] up-projected queries (bf16 values) */
    float *kp = ip_alloc(sizeof(float) * (size_t)(T * DI));    /* [T, DI] key projection (fp32) */
    float *wp = ip_alloc(sizeof(float) * (size_t)(T * NI));    /* [T, NI] weight projection (fp32) */
    float *gamma = ip_alloc(sizeof(float) * (size_t)DI);       /* [DI] */
    float *beta = ip_alloc(sizeof(float) * (size_t)DI);        /* [DI] */
    float *hq = ip_matrix(&a->hadamard_q, DI);                 /* [DI, DI] or NULL */
    float *hk = ip_matrix(&a->hadamard_k, DI);                 /* [DI, DI] or NULL */

    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < H; k++)
            xs[t * H + k] = ip_getf(&a->x, t, k, 0);
    ip_vec(&a->ln_gamma_k, DI, gamma);
    ip_vec(&a->ln_beta_k, DI, beta);

    /* step 1: the up-projected queries qb */
    if (int8) {
        int32_t *qi = ip_alloc(sizeof(int32_t) * (size_t)(T * Q));   /* [T, Q] qr */
        int32_t *acc = ip_alloc(sizeof(int32_t) * (size_t)(T * NQ)); /* [T, NI*DI] exact dots */
        for (int64_t t = 0; t < T; t++)
            for (int64_t k = 0; k < Q; k++)
                qi[t * Q + k] = ip_get_i8(&a->qr, t, k, 0);
        ip_ilin(qi, T, Q, &a->idx_wq_b, acc);
        for (int64_t t = 0; t < T; t++) {
            const float qs = ip_getf(&a->qr_scale, t, 0, 0);          /* qr_scale [T] fp32 */
            for (int64_t n = 0; n < NQ; n++) {
                const float ws = ip_getf(&a->idx_wq_b_scale, n, 0, 0); /* idx_wq_b_scale [NI*DI] fp32 */
                qb[t * NQ + n] = ip_bf16(((float)acc[t * NQ + n] * qs) * ws);
            }
        }
        free(qi);
        free(acc);
    } else {
        float *qf = ip_alloc(sizeof(float) * (size_t)(T * Q));        /* [T, Q] qr widened */
        for (int64_t t = 0; t < T; t++)
            for (int64_t k = 0; k < Q; k++)
                qf[t * Q + k] = ip_getf(&a->qr, t, k, 0);
        ip_lin(qf, T, Q, &a->idx_wq_b, qb);
        for (int64_t i = 0; i < T * NQ; i++)
            qb[i] = ip_bf16(qb[i]);
        free(qf);
    }

    /* the key and weight projections (fp32, not rounded yet) */
    ip_lin(xs, T, H, &a->idx_wk, kp);
    ip_lin(xs, T, H, &a->weights_proj, wp);

#pragma omp parallel
    {
        float *tmp = ip_alloc(sizeof(float) * (size_t)DI);
        float *k = ip_alloc(sizeof(float) * (size_t)DI);
        int8_t *q8 = ip_alloc((size_t)DI);
#pragma omp for schedule(static)
        for (int64_t t = 0; t < T; t++) {
            float c[IP_DR], s[IP_DR];
            for (int e = 0; e < IP_DR; e++) {
                c[e] = ip_getf(&a->rope_cos, t, e, 0);                   /* rope_cos [T, 64] */
                s[e] = ip_getf(&a->rope_sin, t, e, 0);                   /* rope_sin [T, 64] */
            }

            /* steps 2-3 (int8) / 2 (bf16): per head */
            for (int64_t h = 0; h < NI; h++) {
                float *u = qb + t * NQ + h * DI;                         /* [DI] u_h, in place */
                ip_rope(u, c, s, a->rope_mode, a->rope_inverse);
                ip_hadamard(u, DI, hq, tmp);
                if (int8) {
                    float sc;
                    dsops_ref_q8_group(u, DI, q8, &sc);
                    for (int64_t d = 0; d < DI; d++)
                        ip_put_i8(&a->q_idx, t, h, d, q8[d]);            /* q_idx [T, NI, DI] int8 */
                    ip_putf(&a->q_idx_scale, t, h, 0, sc);               /* q_idx_scale [T, NI] fp16 */
                } else {
                    for (int64_t d = 0; d < DI; d++)
                        ip_putf(&a->q_idx, t, h, d, u[d]);               /* q_idx [T, NI, DI] bf16 */
                }
            }

            /* steps 4-6 (int8) / 3 (bf16): the key */
            dsops_ref_layernorm_row(kp + t * DI, DI, gamma, beta, a->ln_eps, k);
            for (int64_t d = 0; d < DI; d++)
                k[d] = ip_bf16(k[d]);
            ip_rope(k, c, s, a->rope_mode, a->rope_inverse);
            ip_hadamard(k, DI, hk, tmp);

            /* step 7 (int8) / 4 (bf16): the cache row */
            int64_t r;
            memcpy(&r, ip_at(&a->cache_index, t, 0, 0), sizeof r);      /* cache_index [T] int64 */
            if (r >= 0) {
                const int64_t BS = a->idx_k_cache.shape[1], blk = r / BS, off = r % BS;
                if (int8) {
                    float ks;
                    dsops_ref_q8_group(k, DI, q8, &ks);
                    for (int64_t d = 0; d < DI; d++)
                        ip_put_i8(&a->idx_k_cache, blk, off, d, q8[d]);  /* idx_k_cache [NB, BS, DI] int8 */
                    ip_putf(&a->idx_k_scale_cache, blk, off, 0, ks);     /* idx_k_scale_cache [NB, BS] fp16 */
                } else {
                    for (int64_t d = 0; d < DI; d++)
                        ip_putf(&a->idx_k_cache, blk, off, d, k[d]);     /* idx_k_cache [NB, BS, DI] bf16 */
                }
            }

            /* step 8 (int8) / 5 (bf16): weights = round(f32(bf16(lin(x, weights_proj))) * weights_scale) */
            for (int64_t h = 0; h < NI; h++)
                ip_putf(&a->weights, t, h, 0, ip_bf16(wp[t * NI + h]) * a->weights_scale); /* weights [T, NI] */
        }
        free(tmp);
        free(k);
        free(q8);
    }

    free(xs);
    free(qb);
    free(kp);
    free(wp);
    free(gamma);
    free(beta);
    free(hq);
    free(hk);
}
