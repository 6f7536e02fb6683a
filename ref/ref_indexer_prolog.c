/* Reference oracle of indexer_prolog_v32 (docs/OPERATORS.md §4.2; primitives §2.2 linear maps, §2.4 LayerNorm,
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
 * map runs the sums of several tokens side by side (ref_lin / ref_ilin, ref_util.c); each individual sum
 * is still accumulated in ascending k. Output rows are independent and are spread over OpenMP threads; no
 * value depends on the thread that computes it.
 *
 * Every tensor is read and written through its strides (in elements). a->prepared is ignored. */
#include <stdlib.h>

#include "ref.h"
#include "ref_util.h"

#define IP_DR 64  /* rotary dims (fixed in this version) */

/* ---- small helpers ------------------------------------------------------------------------------ */

/* The Hadamard matrix [d, d] widened into a dense row-major copy, or NULL when the tensor is absent. */
static float *ip_matrix(const dsops_tensor *t, int64_t d)
{
    if (!t->data)
        return NULL;
    float *m = ref_alloc(sizeof(float) * (size_t)(d * d));
    ref_get_mat(t, d, d, m);
    return m;
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

    float *xs = ref_alloc(sizeof(float) * (size_t)(T * H));    /* [T, H] x widened */
    float *qb = ref_alloc(sizeof(float) * (size_t)(T * NQ));   /* [T, NI*DI] up-projected queries (bf16 values) */
    float *kp = ref_alloc(sizeof(float) * (size_t)(T * DI));   /* [T, DI] key projection (fp32) */
    float *wp = ref_alloc(sizeof(float) * (size_t)(T * NI));   /* [T, NI] weight projection (fp32) */
    float *gamma = ref_alloc(sizeof(float) * (size_t)DI);      /* [DI] */
    float *beta = ref_alloc(sizeof(float) * (size_t)DI);       /* [DI] */
    float *hq = ip_matrix(&a->hadamard_q, DI);                 /* [DI, DI] or NULL */
    float *hk = ip_matrix(&a->hadamard_k, DI);                 /* [DI, DI] or NULL */

    ref_get_mat(&a->x, T, H, xs);
    ref_get_vec(&a->ln_gamma_k, DI, gamma);
    ref_get_vec(&a->ln_beta_k, DI, beta);

    /* step 1: the up-projected queries qb */
    if (int8) {
        int8_t *qi = ref_alloc((size_t)(T * Q));                      /* [T, Q] qr */
        int32_t *acc = ref_alloc(sizeof(int32_t) * (size_t)(T * NQ)); /* [T, NI*DI] exact dots */
        for (int64_t t = 0; t < T; t++)
            for (int64_t k = 0; k < Q; k++)
                qi[t * Q + k] = ref_get_i8(&a->qr, t, k, 0);
        ref_ilin(qi, T, Q, &a->idx_wq_b, acc);
        for (int64_t t = 0; t < T; t++) {
            const float qs = ref_get_f(&a->qr_scale, t, 0, 0);        /* qr_scale [T] fp32 */
            for (int64_t n = 0; n < NQ; n++) {
                const float ws = ref_get_f(&a->idx_wq_b_scale, n, 0, 0); /* idx_wq_b_scale [NI*DI] fp32 */
                qb[t * NQ + n] = ref_round_bf16(((float)acc[t * NQ + n] * qs) * ws);
            }
        }
        free(qi);
        free(acc);
    } else {
        float *qf = ref_alloc(sizeof(float) * (size_t)(T * Q));       /* [T, Q] qr widened */
        ref_get_mat(&a->qr, T, Q, qf);
        ref_lin(qf, T, Q, &a->idx_wq_b, qb);
        for (int64_t i = 0; i < T * NQ; i++)
            qb[i] = ref_round_bf16(qb[i]);
        free(qf);
    }

    /* the key and weight projections (fp32, not rounded yet) */
    ref_lin(xs, T, H, &a->idx_wk, kp);
    ref_lin(xs, T, H, &a->weights_proj, wp);

#pragma omp parallel
    {
        float *tmp = ref_alloc(sizeof(float) * (size_t)DI);
        float *k = ref_alloc(sizeof(float) * (size_t)DI);
        int8_t *q8 = ref_alloc((size_t)DI);
#pragma omp for schedule(static)
        for (int64_t t = 0; t < T; t++) {
            float c[IP_DR], s[IP_DR];
            ref_get_row(&a->rope_cos, t, IP_DR, c);                      /* rope_cos [T, 64] */
            ref_get_row(&a->rope_sin, t, IP_DR, s);                      /* rope_sin [T, 64] */

            /* steps 2-3 (int8) / 2 (bf16): per head */
            for (int64_t h = 0; h < NI; h++) {
                float *u = qb + t * NQ + h * DI;                         /* [DI] u_h, in place */
                ref_rope_bf16(u, c, s, a->rope_mode, a->rope_inverse);
                ref_hadamard_bf16(u, DI, hq, tmp);
                if (int8) {
                    float sc;
                    dsops_ref_q8_group(u, DI, q8, &sc);
                    for (int64_t d = 0; d < DI; d++)
                        ref_put_i8(&a->q_idx, t, h, d, q8[d]);           /* q_idx [T, NI, DI] int8 */
                    ref_put_f(&a->q_idx_scale, t, h, 0, sc);             /* q_idx_scale [T, NI] fp16 */
                } else {
                    for (int64_t d = 0; d < DI; d++)
                        ref_put_f(&a->q_idx, t, h, d, u[d]);             /* q_idx [T, NI, DI] bf16 */
                }
            }

            /* steps 4-6 (int8) / 3 (bf16): the key */
            dsops_ref_layernorm_row(kp + t * DI, DI, gamma, beta, a->ln_eps, k);
            for (int64_t d = 0; d < DI; d++)
                k[d] = ref_round_bf16(k[d]);
            ref_rope_bf16(k, c, s, a->rope_mode, a->rope_inverse);
            ref_hadamard_bf16(k, DI, hk, tmp);

            /* step 7 (int8) / 4 (bf16): the cache row */
            const int64_t r = ref_get_i64(&a->cache_index, t, 0, 0);    /* cache_index [T] int64 */
            if (r >= 0) {
                const int64_t BS = a->idx_k_cache.shape[1], blk = r / BS, off = r % BS;
                if (int8) {
                    float ks;
                    dsops_ref_q8_group(k, DI, q8, &ks);
                    for (int64_t d = 0; d < DI; d++)
                        ref_put_i8(&a->idx_k_cache, blk, off, d, q8[d]); /* idx_k_cache [NB, BS, DI] int8 */
                    ref_put_f(&a->idx_k_scale_cache, blk, off, 0, ks);   /* idx_k_scale_cache [NB, BS] fp16 */
                } else {
                    for (int64_t d = 0; d < DI; d++)
                        ref_put_f(&a->idx_k_cache, blk, off, d, k[d]);   /* idx_k_cache [NB, BS, DI] bf16 */
                }
            }

            /* step 8 (int8) / 5 (bf16): weights = round(f32(bf16(lin(x, weights_proj))) * weights_scale) */
            for (int64_t h = 0; h < NI; h++) {
                const float w = ref_round_bf16(wp[t * NI + h]) * a->weights_scale;
                ref_put_f(&a->weights, t, h, 0, w);                      /* weights [T, NI] */
            }
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
