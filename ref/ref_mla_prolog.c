/* Reference oracle of mla_prolog_v32 (docs/OPERATORS.md §4.1; primitives §2.2 linear maps, §2.3 RMSNorm,
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
 * The row-level definitions (RMSNorm, rotation, Q8 group) are those of ref_prim.c, reached through ref.h.
 * Every fp32 sum starts at 0 and adds its products in ascending index order; nothing is contracted into
 * FMA (built with -ffp-contract=off). The only liberty taken is loop order: a linear map runs the sums of
 * several tokens side by side (ref_lin / ref_ilin, ref_util.c), and the absorbed product runs the Dc sums
 * of one head side by side (i outer, c inner); each individual sum is still accumulated in ascending index
 * order. Output rows are independent, so they are spread over OpenMP threads; no value depends on the
 * thread that computes it.
 *
 * Every tensor is read and written through its strides (in elements). a->prepared is ignored. */
#include <stdlib.h>

#include "ref.h"
#include "ref_util.h"

#define DR 64   /* rotary dims (fixed in this version) */
#define QG 128  /* latent values per Q8 group of the int8 cache layouts */

/* ---- cache rows (spec §4.1 step 8) ----------------------------------------------------------------- */

#define PACKED_NOPE_BYTE 0    /* 512 int8 latent values */
#define PACKED_ROPE_BYTE 512  /* 64 bf16 rope values, little-endian */
#define PACKED_SCALE_BYTE 640 /* 4 fp32 scales, little-endian, one per 128 latent values */

/* Writes the latent ckv [Dc] and the roped key krope [64] (both bf16 values in fp32) to row r. */
static void mlap_store_row(const dsops_mla_prolog_v32_args *a, int64_t Dc, int64_t r, const float *ckv,
                           const float *krope)
{
    const int packed = a->kv_layout == DSOPS_KV_PACKED_INT8 || a->kv_layout == DSOPS_KV_FLASHMLA_FP8;
    const dsops_tensor *ref = packed ? &a->kv_packed : &a->kv_cache;
    const int64_t BS = ref->shape[1];
    const int64_t blk = r / BS, off = r % BS;
    int8_t q[QG];
    float s;

    switch (a->kv_layout) {
    case DSOPS_KV_SPLIT_BF16:
        for (int64_t c = 0; c < Dc; c++)
            ref_put_bf16(&a->kv_cache, blk, off, c, ckv[c]);             /* kv_cache [NB, BS, Dc] bf16 */
        for (int64_t e = 0; e < DR; e++)
            ref_put_bf16(&a->kr_cache, blk, off, e, krope[e]);           /* kr_cache [NB, BS, 64] bf16 */
        break;
    case DSOPS_KV_SPLIT_INT8:
        for (int64_t g = 0; g < Dc / QG; g++) {
            dsops_ref_q8_group(ckv + g * QG, QG, q, &s);
            for (int64_t c = 0; c < QG; c++)
                ref_put_i8(&a->kv_cache, blk, off, g * QG + c, q[c]);     /* kv_cache [NB, BS, Dc] int8 */
            ref_put_f32(&a->kv_scale_cache, blk, off, g, s);              /* kv_scale_cache [NB, BS, Dc/128] */
        }
        for (int64_t e = 0; e < DR; e++)
            ref_put_bf16(&a->kr_cache, blk, off, e, krope[e]);
        break;
    case DSOPS_KV_PACKED_INT8:                                              /* kv_packed [NB, BS, 656] uint8 */
        for (int64_t g = 0; g < Dc / QG; g++) {
            dsops_ref_q8_group(ckv + g * QG, QG, q, &s);
            for (int64_t c = 0; c < QG; c++)
                ref_put_u8(&a->kv_packed, blk, off, PACKED_NOPE_BYTE + g * QG + c, (uint8_t)q[c]);
            const uint32_t u = ref_bits_from_f32(s);
            for (int k = 0; k < 4; k++)
                ref_put_u8(&a->kv_packed, blk, off, PACKED_SCALE_BYTE + 4 * g + k, (uint8_t)(u >> (8 * k)));
        }
        for (int64_t e = 0; e < DR; e++) {
            uint16_t h = dsops_ref_bf16_from_f32(krope[e]);
            ref_put_u8(&a->kv_packed, blk, off, PACKED_ROPE_BYTE + 2 * e, (uint8_t)h);
            ref_put_u8(&a->kv_packed, blk, off, PACKED_ROPE_BYTE + 2 * e + 1, (uint8_t)(h >> 8));
        }
        break;
    case DSOPS_KV_FLASHMLA_FP8: {                                         /* kv_packed [NB, BS, 656] uint8 */
        uint16_t row[576];                                                /* Dc 512 latent + 64 rope, bf16 */
        uint8_t bytes[656];
        for (int64_t c = 0; c < Dc; c++)
            row[c] = dsops_ref_bf16_from_f32(ckv[c]);
        for (int64_t e = 0; e < DR; e++)
            row[Dc + e] = dsops_ref_bf16_from_f32(krope[e]);
        dsops_ref_fp8_v32_row(row, bytes);
        for (int k = 0; k < 656; k++)
            ref_put_u8(&a->kv_packed, blk, off, k, bytes[k]);
        break;
    }
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

    float *xs = ref_alloc(sizeof(float) * (size_t)(T * H));   /* [T, H] x widened */
    float *acc = ref_alloc(sizeof(float) * (size_t)(T * (Q > KV ? Q : KV))); /* [T, max(Q, KV)] sums */
    float *cq = ref_alloc(sizeof(float) * (size_t)(T * Q));   /* [T, Q] normalised q latent (bf16 values) */
    float *qb = ref_alloc(sizeof(float) * (size_t)(T * NG));  /* [T, NG] up-projected queries (bf16 values) */
    float *kva = ref_alloc(sizeof(float) * (size_t)(T * KV)); /* [T, KV] (bf16 values) */
    float *gcq = ref_alloc(sizeof(float) * (size_t)Q);        /* [Q] gamma_cq widened */
    float *gckv = ref_alloc(sizeof(float) * (size_t)Dc);      /* [Dc] gamma_ckv widened */

    ref_get_mat(&a->x, T, H, xs);
    ref_get_vec(&a->gamma_cq, Q, gcq);
    ref_get_vec(&a->gamma_ckv, Dc, gckv);

    /* steps 1-2: a = bf16(lin(x, wq_a)); cq = bf16(RMSNorm(a; gamma_cq, eps_cq)) */
    ref_lin(xs, T, H, &a->wq_a, acc);
    for (int64_t t = 0; t < T; t++) {
        float *row = acc + t * Q;
        for (int64_t n = 0; n < Q; n++)
            row[n] = ref_round_bf16(row[n]);
        dsops_ref_rmsnorm_row(row, Q, gcq, a->eps_cq, cq + t * Q);
        for (int64_t n = 0; n < Q; n++)
            cq[t * Q + n] = ref_round_bf16(cq[t * Q + n]);
    }

    /* step 3 */
    if (!int8_wq_b) {
        ref_lin(cq, T, Q, &a->wq_b, qb);
        for (int64_t i = 0; i < T * NG; i++)
            qb[i] = ref_round_bf16(qb[i]);
        for (int64_t t = 0; t < T; t++)
            for (int64_t n = 0; n < Q; n++)
                ref_put_bf16(&a->qr, t, n, 0, cq[t * Q + n]);           /* qr [T, Q] bf16 */
    } else {
        int8_t *qi = ref_alloc((size_t)(T * Q));                     /* [T, Q] int8 qr */
        float *qs = ref_alloc(sizeof(float) * (size_t)T);            /* [T] qr_scale */
        int32_t *iacc = ref_alloc(sizeof(int32_t) * (size_t)(T * NG));
        for (int64_t t = 0; t < T; t++) {
            dsops_ref_q8_group(cq + t * Q, Q, qi + t * Q, &qs[t]);
            for (int64_t n = 0; n < Q; n++)
                ref_put_i8(&a->qr, t, n, 0, qi[t * Q + n]);             /* qr [T, Q] int8 */
            ref_put_f32(&a->qr_scale, t, 0, 0, qs[t]);                  /* qr_scale [T] fp32 */
        }
        ref_ilin(qi, T, Q, &a->wq_b, iacc);
        for (int64_t t = 0; t < T; t++)
            for (int64_t n = 0; n < NG; n++) {
                float ws = ref_get_f(&a->wq_b_scale, n, 0, 0);           /* wq_b_scale [NG] fp32 */
                qb[t * NG + n] = ref_round_bf16(((float)iacc[t * NG + n] * qs[t]) * ws);
            }
        free(qi);
        free(qs);
        free(iacc);
    }

    /* steps 4-5: q_nope[t, h, c] = bf16(sum_{i < Dqn} qnope_h[i] * w_uk[h][i][c]) */
#pragma omp parallel
    {
        float *wuk = ref_alloc(sizeof(float) * (size_t)(Dqn * Dc)); /* [Dqn, Dc] w_uk[h] widened */
        float *o = ref_alloc(sizeof(float) * (size_t)Dc);           /* [Dc] sums of one token and head */
#pragma omp for schedule(static)
        for (int64_t h = 0; h < N; h++) {
            for (int64_t i = 0; i < Dqn; i++)
                for (int64_t c = 0; c < Dc; c++)
                    wuk[i * Dc + c] = ref_get_f(&a->w_uk, h, i, c);
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
                    ref_put_bf16(&a->q_nope, t, h, c, o[c]);            /* q_nope [T, N, Dc] bf16 */
            }
        }
        free(wuk);
        free(o);
    }

    /* step 6: q_rope[t, h] = bf16(rot(qpe_h, rope_cos[t], rope_sin[t])) */
    for (int64_t t = 0; t < T; t++) {
        float c[DR], s[DR], y[DR];
        ref_get_row(&a->rope_cos, t, DR, c);                            /* rope_cos [T, 64] */
        ref_get_row(&a->rope_sin, t, DR, s);                            /* rope_sin [T, 64] */
        for (int64_t h = 0; h < N; h++) {
            dsops_ref_rope_row(qb + t * NG + h * G + Dqn, c, s, a->rope_mode, a->rope_inverse, y);
            for (int e = 0; e < DR; e++)
                ref_put_bf16(&a->q_rope, t, h, e, y[e]);                /* q_rope [T, N, 64] bf16 */
        }
    }

    /* step 7: kva = bf16(lin(x, wkv_a)); ckv = bf16(RMSNorm(kva[0:Dc])); krope = bf16(rot(kva[Dc:])) */
    ref_lin(xs, T, H, &a->wkv_a, acc);
    for (int64_t i = 0; i < T * KV; i++)
        kva[i] = ref_round_bf16(acc[i]);
    for (int64_t t = 0; t < T; t++) {
        float *ckv = acc; /* [Dc] (acc is free again) */
        float c[DR], s[DR], krope[DR];
        dsops_ref_rmsnorm_row(kva + t * KV, Dc, gckv, a->eps_ckv, ckv);
        for (int64_t i = 0; i < Dc; i++)
            ckv[i] = ref_round_bf16(ckv[i]);
        ref_get_row(&a->rope_cos, t, DR, c);
        ref_get_row(&a->rope_sin, t, DR, s);
        dsops_ref_rope_row(kva + t * KV + Dc, c, s, a->rope_mode, a->rope_inverse, krope);
        for (int e = 0; e < DR; e++)
            krope[e] = ref_round_bf16(krope[e]);

        /* step 8: the cache row, if the token has one */
        const int64_t r = ref_get_i64(&a->cache_index, t, 0, 0);       /* cache_index [T] int64 */
        if (r >= 0)
            mlap_store_row(a, Dc, r, ckv, krope);
    }

    free(xs);
    free(acc);
    free(cq);
    free(qb);
    free(kva);
    free(gcq);
    free(gckv);
}
