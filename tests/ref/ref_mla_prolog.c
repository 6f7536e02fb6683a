/* Reference oracle of mla_prolog_v32 (spec/OPS.md §4.1; primitives §2.2 linear maps, §2.3 RMSNorm,
 * §2.5.1 RoPE, §2.7 Q8).
 *
 * The Math steps of §4.1, literally, for all tokens of the call:
 *   1. a    = bf16(lin(x, wq_a))                                   [T, Q]
 *   2. cq   = bf16(RMSNorm(a; gamma_cq, eps_cq))                   [T, Q]
 *   3. bf16 wq_b: qb = bf16(lin(cq, wq_b)), qr = cq
 *      int8 wq_b: (qr, qr_scale) = Q8(cq) per token; qb[n] = bf16((f32(ilin) * qr_scale) * wq_b_scale[n])
 *   4-6. per head: q_nope = bf16(qnope_h · w_uk[h]); q_rope = bf16(rot(qpe_h))
 *   7. kva  = bf16(lin(x, wkv_a)); ckv = bf16(RMSNorm(kva[0:Dc])); krope = bf16(rot(kva[Dc:Dc+64]))
 *   8. cache rows at cache_index[t] >= 0 in the chosen layout (int8 layouts: Q8 per 128 latent values).
 *
 * Every fp32 sum starts at 0 and adds its products in ascending index order; nothing is contracted into
 * FMA (built with -ffp-contract=off). The only liberty taken is loop order: a linear map runs the sums of
 * up to TB tokens side by side (k outer, token inner), and the absorbed product runs the Dc sums of one
 * head side by side (i outer, c inner); each individual sum is still accumulated in ascending index
 * order. Output rows are independent, so they are spread over OpenMP threads; no value depends on the
 * thread that computes it.
 *
 * Every tensor is read and written through its strides (in elements). a->prepared is ignored. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

#define DR 64   /* rotary dims (fixed in this version) */
#define TB 16   /* tokens whose sums run side by side in a linear map */
#define QG 128  /* latent values per Q8 group of the int8 cache layouts */

/* ---- number formats (spec §2.1) ---------------------------------------------------------------- */

static float mlap_round_bf16(float f) { return dsops_ref_f32_from_bf16(dsops_ref_bf16_from_f32(f)); }

/* rint of §2.1 (nearest, ties to even) for |v| < 2^22: adding and removing 1.5 * 2^23 in fp32 */
static float mlap_rint(float v)
{
    const float big = 12582912.0f;
    float y = v + big;
    return y - big;
}

/* ---- strided element access ---------------------------------------------------------------------- */

static size_t mlap_elem_size(dsops_dtype dt)
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
static unsigned char *mlap_addr(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    int64_t off = i0 * t->stride[0];
    if (t->ndim > 1)
        off += i1 * t->stride[1];
    if (t->ndim > 2)
        off += i2 * t->stride[2];
    return (unsigned char *)t->data + off * (int64_t)mlap_elem_size(t->dtype);
}

/* A bf16 or fp32 element, widened to fp32 (norm weights, tables, activations). */
static float mlap_get_f(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    const unsigned char *p = mlap_addr(t, i0, i1, i2);
    if (t->dtype == DSOPS_FP32) {
        float v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return dsops_ref_f32_from_bf16(h);
}

static int8_t mlap_get_i8(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    int8_t v;
    memcpy(&v, mlap_addr(t, i0, i1, i2), sizeof v);
    return v;
}

static void mlap_put_bf16(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v)
{
    uint16_t h = dsops_ref_bf16_from_f32(v);
    memcpy(mlap_addr(t, i0, i1, i2), &h, sizeof h);
}

static void mlap_put_f32(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v)
{
    memcpy(mlap_addr(t, i0, i1, i2), &v, sizeof v);
}

static void mlap_put_i8(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, int8_t v)
{
    memcpy(mlap_addr(t, i0, i1, i2), &v, sizeof v);
}

static void *mlap_xmalloc(size_t n)
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
static void mlap_lin(const float *in, int64_t T, int64_t K, const dsops_tensor *W, float *out)
{
    const int64_t Nout = W->shape[0];
    float *inT = mlap_xmalloc(sizeof(float) * (size_t)(K * TB)); /* [K][TB] one block of tokens, transposed */
    for (int64_t t0 = 0; t0 < T; t0 += TB) {
        const int64_t tb = T - t0 < TB ? T - t0 : TB;
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < TB; j++)
                inT[k * TB + j] = j < tb ? in[(t0 + j) * K + k] : 0.0f;
#pragma omp parallel for schedule(static)
        for (int64_t n = 0; n < Nout; n++) {
            float acc[TB];
            for (int j = 0; j < TB; j++)
                acc[j] = 0.0f;
            for (int64_t k = 0; k < K; k++) {
                const float w = mlap_get_f(W, n, k, 0);
                const float *col = inT + k * TB;
                for (int j = 0; j < TB; j++)
                    acc[j] += col[j] * w;
            }
            for (int64_t j = 0; j < tb; j++)
                out[(t0 + j) * Nout + n] = acc[j];
        }
    }
    free(inT);
}

/* out[t][n] = ilin(in[t], W)[n] = sum_k int32(in[t][k]) * int32(W[n][k]), exact in int32.
 * in: [T][K] int8 (dense), W: [Nout, K] int8 (strided), out: [T][Nout] int32. */
static void mlap_ilin(const int8_t *in, int64_t T, int64_t K, const dsops_tensor *W, int32_t *out)
{
    const int64_t Nout = W->shape[0];
    int32_t *inT = mlap_xmalloc(sizeof(int32_t) * (size_t)(K * TB)); /* [K][TB] */
    for (int64_t t0 = 0; t0 < T; t0 += TB) {
        const int64_t tb = T - t0 < TB ? T - t0 : TB;
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < TB; j++)
                inT[k * TB + j] = j < tb ? in[(t0 + j) * K + k] : 0;
#pragma omp parallel for schedule(static)
        for (int64_t n = 0; n < Nout; n++) {
            int32_t acc[TB];
            for (int j = 0; j < TB; j++)
                acc[j] = 0;
            for (int64_t k = 0; k < K; k++) {
                const int32_t w = mlap_get_i8(W, n, k, 0);
                const int32_t *col = inT + k * TB;
                for (int j = 0; j < TB; j++)
                    acc[j] += col[j] * w;
            }
            for (int64_t j = 0; j < tb; j++)
                out[(t0 + j) * Nout + n] = acc[j];
        }
    }
    free(inT);
}

/* ---- row primitives ------------------------------------------------------------------------------ */

/* y = RMSNorm(v; gamma, eps) (spec §2.3): ms = (sum v_i^2) / n, r = sqrt(ms + eps), y_i = (v_i / r) * gamma_i.
 * gamma: [n] bf16 or fp32 tensor. */
static void mlap_rmsnorm(const float *v, int64_t n, const dsops_tensor *gamma, float eps, float *y)
{
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++)
        ss += v[i] * v[i];
    const float ms = ss / (float)n;
    const float r = sqrtf(ms + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = (v[i] / r) * mlap_get_f(gamma, i, 0, 0);
}

/* y = rot(x, c, s) of spec §2.5.1 in fp32 (before the output rounding); inverse uses s' = -s. */
static void mlap_rope(const float *x, const float *c, const float *s_in, dsops_rope_mode mode, int inverse,
                      float *y)
{
    float s[DR];
    for (int e = 0; e < DR; e++)
        s[e] = inverse ? -s_in[e] : s_in[e];
    for (int j = 0; j < DR / 2; j++) {
        switch (mode) {
        case DSOPS_ROPE_INTERLEAVED:
            y[2 * j] = x[2 * j] * c[2 * j] - x[2 * j + 1] * s[2 * j];
            y[2 * j + 1] = x[2 * j + 1] * c[2 * j + 1] + x[2 * j] * s[2 * j + 1];
            break;
        case DSOPS_ROPE_HALF:
            y[j] = x[j] * c[j] - x[j + 32] * s[j];
            y[j + 32] = x[j + 32] * c[j + 32] + x[j] * s[j + 32];
            break;
        case DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT:
            y[j] = x[2 * j] * c[j] - x[2 * j + 1] * s[j];
            y[j + 32] = x[2 * j + 1] * c[j + 32] + x[2 * j] * s[j + 32];
            break;
        }
    }
}

/* Q8 of one group (spec §2.7): q[0..n-1] and the fp32 scale. */
static void mlap_q8(const float *v, int64_t n, int8_t *q, float *scale)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) {
            for (int64_t k = 0; k < n; k++)
                q[k] = 0;
            *scale = NAN;
            return;
        }
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++)
        if (fabsf(v[i]) > amax)
            amax = fabsf(v[i]);
    const float sq = 127.0f / amax; /* amax == 0 gives +Inf */
    if (amax == 0.0f || isinf(sq)) {
        for (int64_t k = 0; k < n; k++)
            q[k] = 0;
        *scale = 0.0f;
        return;
    }
    for (int64_t i = 0; i < n; i++)
        q[i] = (int8_t)mlap_rint(v[i] * sq);
    *scale = 1.0f / sq;
}

/* ---- cache rows (spec §4.1 step 8) ----------------------------------------------------------------- */

#define PACKED_NOPE_BYTE 0    /* 512 int8 latent values */
#define PACKED_ROPE_BYTE 512  /* 64 bf16 rope values, little-endian */
#define PACKED_SCALE_BYTE 640 /* 4 fp32 scales, little-endian, one per 128 latent values */

static void mlap_put_byte(const dsops_tensor *t, int64_t blk, int64_t off, int64_t byte, uint8_t v)
{
    *mlap_addr(t, blk, off, byte) = v;
}

/* Writes the latent ckv [Dc] and the roped key krope [64] (both bf16 values in fp32) to row r. */
static void mlap_store_row(const dsops_mla_prolog_v32_args *a, int64_t Dc, int64_t r, const float *ckv,
                           const float *krope)
{
    const dsops_tensor *ref = a->kv_layout == DSOPS_KV_PACKED656 ? &a->kv_packed : &a->kv_cache;
    const int64_t BS = ref->shape[1];
    const int64_t blk = r / BS, off = r % BS;
    int8_t q[QG];
    float s;

    switch (a->kv_layout) {
    case DSOPS_KV_SPLIT_BF16:
        for (int64_t c = 0; c < Dc; c++)
            mlap_put_bf16(&a->kv_cache, blk, off, c, ckv[c]);            /* kv_cache [NB, BS, Dc] bf16 */
        for (int64_t e = 0; e < DR; e++)
            mlap_put_bf16(&a->kr_cache, blk, off, e, krope[e]);          /* kr_cache [NB, BS, 64] bf16 */
        break;
    case DSOPS_KV_SPLIT_INT8:
        for (int64_t g = 0; g < Dc / QG; g++) {
            mlap_q8(ckv + g * QG, QG, q, &s);
            for (int64_t c = 0; c < QG; c++)
                mlap_put_i8(&a->kv_cache, blk, off, g * QG + c, q[c]);    /* kv_cache [NB, BS, Dc] int8 */
            mlap_put_f32(&a->kv_scale_cache, blk, off, g, s);             /* kv_scale_cache [NB, BS, Dc/128] */
        }
        for (int64_t e = 0; e < DR; e++)
            mlap_put_bf16(&a->kr_cache, blk, off, e, krope[e]);
        break;
    case DSOPS_KV_PACKED656:                                              /* kv_packed [NB, BS, 656] uint8 */
        for (int64_t g = 0; g < Dc / QG; g++) {
            mlap_q8(ckv + g * QG, QG, q, &s);
            for (int64_t c = 0; c < QG; c++)
                mlap_put_byte(&a->kv_packed, blk, off, PACKED_NOPE_BYTE + g * QG + c, (uint8_t)q[c]);
            uint32_t u;
            memcpy(&u, &s, sizeof u);
            for (int k = 0; k < 4; k++)
                mlap_put_byte(&a->kv_packed, blk, off, PACKED_SCALE_BYTE + 4 * g + k, (uint8_t)(u >> (8 * k)));
        }
        for (int64_t e = 0; e < DR; e++) {
            uint16_t h = dsops_ref_bf16_from_f32(krope[e]);
            mlap_put_byte(&a->kv_packed, blk, off, PACKED_ROPE_BYTE + 2 * e, (uint8_t)h);
            mlap_put_byte(&a->kv_packed, blk, off, PACKED_ROPE_BYTE + 2 * e + 1, (uint8_t)(h >> 8));
        }
        break;
    }
}

/* ---- the operator ----------------------------------------------------------------------------- */

void dsops_ref_mla_prolog_v32(const dsops_mla_prolog_v32_args *a)
{
    const int64_t T = a->x.shape[0];          /* x [T, H] */
    const int64_t H = a->x.shape[1];
    const int64_t Q = a->wq_a.shape[0];       /* wq_a [Q, H] */
    const int64_t NG = a->wq_b.shape[0];      /* wq_b [N*(Dqn+64), Q] */
    const int64_t N = a->w_uk.shape[0];       /* w_uk [N, Dqn, Dc] */
    const int64_t Dqn = a->w_uk.shape[1];
    const int64_t Dc = a->w_uk.shape[2];
    const int64_t G = Dqn + DR;               /* rows of wq_b per head */
    const int64_t KV = Dc + DR;               /* wkv_a [Dc+64, H] */
    const int int8_wq_b = a->wq_b.dtype == DSOPS_INT8;
    if (T <= 0)
        return;

    float *xs = mlap_xmalloc(sizeof(float) * (size_t)(T * H));   /* [T, H] x widened */
    float *acc = mlap_xmalloc(sizeof(float) * (size_t)(T * (Q > KV ? Q : KV))); /* [T, max(Q, KV)] sums */
    float *cq = mlap_xmalloc(sizeof(float) * (size_t)(T * Q));   /* [T, Q] normalised q latent (bf16 values) */
    float *qb = mlap_xmalloc(sizeof(float) * (size_t)(T * NG));  /* [T, NG] up-projected queries (bf16 values) */
    float *kva = mlap_xmalloc(sizeof(float) * (size_t)(T * KV)); /* [T, KV] (bf16 values) */

    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < H; k++)
            xs[t * H + k] = mlap_get_f(&a->x, t, k, 0);

    /* steps 1-2: a = bf16(lin(x, wq_a)); cq = bf16(RMSNorm(a; gamma_cq, eps_cq)) */
    mlap_lin(xs, T, H, &a->wq_a, acc);
    for (int64_t t = 0; t < T; t++) {
        float *row = acc + t * Q;
        for (int64_t n = 0; n < Q; n++)
            row[n] = mlap_round_bf16(row[n]);
        mlap_rmsnorm(row, Q, &a->gamma_cq, a->eps_cq, cq + t * Q);
        for (int64_t n = 0; n < Q; n++)
            cq[t * Q + n] = mlap_round_bf16(cq[t * Q + n]);
    }

    /* step 3 */
    if (!int8_wq_b) {
        mlap_lin(cq, T, Q, &a->wq_b, qb);
        for (int64_t i = 0; i < T * NG; i++)
            qb[i] = mlap_round_bf16(qb[i]);
        for (int64_t t = 0; t < T; t++)
            for (int64_t n = 0; n < Q; n++)
                mlap_put_bf16(&a->qr, t, n, 0, cq[t * Q + n]);          /* qr [T, Q] bf16 */
    } else {
        int8_t *qi = mlap_xmalloc((size_t)(T * Q));                  /* [T, Q] int8 qr */
        float *qs = mlap_xmalloc(sizeof(float) * (size_t)T);         /* [T] qr_scale */
        int32_t *iacc = mlap_xmalloc(sizeof(int32_t) * (size_t)(T * NG));
        for (int64_t t = 0; t < T; t++) {
            mlap_q8(cq + t * Q, Q, qi + t * Q, &qs[t]);
            for (int64_t n = 0; n < Q; n++)
                mlap_put_i8(&a->qr, t, n, 0, qi[t * Q + n]);            /* qr [T, Q] int8 */
            mlap_put_f32(&a->qr_scale, t, 0, 0, qs[t]);                 /* qr_scale [T] fp32 */
        }
        mlap_ilin(qi, T, Q, &a->wq_b, iacc);
        for (int64_t t = 0; t < T; t++)
            for (int64_t n = 0; n < NG; n++) {
                float ws = mlap_get_f(&a->wq_b_scale, n, 0, 0);          /* wq_b_scale [NG] fp32 */
                qb[t * NG + n] = mlap_round_bf16(((float)iacc[t * NG + n] * qs[t]) * ws);
            }
        free(qi);
        free(qs);
        free(iacc);
    }

    /* steps 4-5: q_nope[t, h, c] = bf16(sum_{i < Dqn} qnope_h[i] * w_uk[h][i][c]) */
#pragma omp parallel
    {
        float *wuk = mlap_xmalloc(sizeof(float) * (size_t)(Dqn * Dc)); /* [Dqn, Dc] w_uk[h] widened */
        float *o = mlap_xmalloc(sizeof(float) * (size_t)Dc);           /* [Dc] sums of one token and head */
#pragma omp for schedule(static)
        for (int64_t h = 0; h < N; h++) {
            for (int64_t i = 0; i < Dqn; i++)
                for (int64_t c = 0; c < Dc; c++)
                    wuk[i * Dc + c] = mlap_get_f(&a->w_uk, h, i, c);
            for (int64_t t = 0; t < T; t++) {
                const float *qn = qb + t * NG + h * G;
                for (int64_t c = 0; c < Dc; c++)
                    o[c] = 0.0f;
                for (int64_t i = 0; i < Dqn; i++) {
                    const float q = qn[i];
                    const float *w = wuk + i * Dc;
                    for (int64_t c = 0; c < Dc; c++)
                        o[c] += q * w[c];
                }
                for (int64_t c = 0; c < Dc; c++)
                    mlap_put_bf16(&a->q_nope, t, h, c, o[c]);           /* q_nope [T, N, Dc] bf16 */
            }
        }
        free(wuk);
        free(o);
    }

    /* step 6: q_rope[t, h] = bf16(rot(qpe_h, rope_cos[t], rope_sin[t])) */
    for (int64_t t = 0; t < T; t++) {
        float c[DR], s[DR], y[DR];
        for (int e = 0; e < DR; e++) {
            c[e] = mlap_get_f(&a->rope_cos, t, e, 0);                   /* rope_cos [T, 64] */
            s[e] = mlap_get_f(&a->rope_sin, t, e, 0);                   /* rope_sin [T, 64] */
        }
        for (int64_t h = 0; h < N; h++) {
            mlap_rope(qb + t * NG + h * G + Dqn, c, s, a->rope_mode, a->rope_inverse, y);
            for (int e = 0; e < DR; e++)
                mlap_put_bf16(&a->q_rope, t, h, e, y[e]);               /* q_rope [T, N, 64] bf16 */
        }
    }

    /* step 7: kva = bf16(lin(x, wkv_a)); ckv = bf16(RMSNorm(kva[0:Dc])); krope = bf16(rot(kva[Dc:])) */
    mlap_lin(xs, T, H, &a->wkv_a, acc);
    for (int64_t i = 0; i < T * KV; i++)
        kva[i] = mlap_round_bf16(acc[i]);
    for (int64_t t = 0; t < T; t++) {
        float *ckv = acc; /* [Dc] (acc is free again) */
        float c[DR], s[DR], krope[DR];
        mlap_rmsnorm(kva + t * KV, Dc, &a->gamma_ckv, a->eps_ckv, ckv);
        for (int64_t i = 0; i < Dc; i++)
            ckv[i] = mlap_round_bf16(ckv[i]);
        for (int e = 0; e < DR; e++) {
            c[e] = mlap_get_f(&a->rope_cos, t, e, 0);
            s[e] = mlap_get_f(&a->rope_sin, t, e, 0);
        }
        mlap_rope(kva + t * KV + Dc, c, s, a->rope_mode, a->rope_inverse, krope);
        for (int e = 0; e < DR; e++)
            krope[e] = mlap_round_bf16(krope[e]);

        /* step 8: the cache row, if the token has one */
        int64_t r;
        memcpy(&r, mlap_addr(&a->cache_index, t, 0, 0), sizeof r);     /* cache_index [T] int64 */
        if (r >= 0)
            mlap_store_row(a, Dc, r, ckv, krope);
    }

    free(xs);
    free(acc);
    free(cq);
    free(qb);
    free(kva);
}
