/* Reference oracle of mla_prolog_v4 (docs/OPERATORS.md §3.3; primitives §2.2 linear maps, §2.3 RMSNorm,
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
 * (built with -ffp-contract=off). The only liberty taken is loop order: a linear map runs the sums of
 * several tokens side by side (ref_lin / ref_ilin, ref_util.c); each individual sum is still accumulated
 * in ascending k. Output rows are independent and are spread over OpenMP threads; no value depends on the
 * thread that computes it.
 *
 * Every tensor is read and written through its strides (in elements). a->prepared is ignored. */
#include <stdlib.h>

#include "ref.h"
#include "ref_util.h"

#define M4_DR 64  /* rotary dims (fixed in this version) */

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

    float *xs = ref_alloc(sizeof(float) * (size_t)(T * H));   /* [T, H] x widened */
    float *acc = ref_alloc(sizeof(float) * (size_t)(T * Q));  /* [T, Q] a */
    float *cq = ref_alloc(sizeof(float) * (size_t)(T * Q));   /* [T, Q] normalised q latent */
    float *qb = ref_alloc(sizeof(float) * (size_t)(T * ND));  /* [T, N*D] up-projected queries */
    float *ka = ref_alloc(sizeof(float) * (size_t)(T * D));   /* [T, D] latent kv projection */
    float *gcq = ref_alloc(sizeof(float) * (size_t)Q);        /* [Q] gamma_cq widened */
    float *gckv = ref_alloc(sizeof(float) * (size_t)D);       /* [D] gamma_ckv widened */

    ref_get_mat(&a->x, T, H, xs);
    ref_get_vec(&a->gamma_cq, Q, gcq);
    ref_get_vec(&a->gamma_ckv, D, gckv);

    /* steps 1-2 (1'-2'): a, then the weighted RMSNorm over Q */
    ref_lin(xs, T, H, &a->wq_a, acc);
    for (int64_t t = 0; t < T; t++) {
        float *row = acc + t * Q;
        if (!int8)
            for (int64_t n = 0; n < Q; n++)
                row[n] = ref_round_bf16(row[n]);
        dsops_ref_rmsnorm_row(row, Q, gcq, a->eps_cq, cq + t * Q);
        if (!int8)
            for (int64_t n = 0; n < Q; n++)
                cq[t * Q + n] = ref_round_bf16(cq[t * Q + n]);
    }

    /* step 3 (3'): qr output and the up-projection */
    if (!int8) {
        for (int64_t t = 0; t < T; t++)
            for (int64_t n = 0; n < Q; n++)
                ref_put_bf16(&a->qr, t, n, 0, cq[t * Q + n]);              /* qr [T, Q] bf16 */
        ref_lin(cq, T, Q, &a->wq_b, qb);
        for (int64_t i = 0; i < T * ND; i++)
            qb[i] = ref_round_bf16(qb[i]);
    } else {
        int8_t *qi = ref_alloc((size_t)(T * Q));                       /* [T, Q] qr */
        float *qs = ref_alloc(sizeof(float) * (size_t)T);              /* [T] qr_scale */
        int32_t *iacc = ref_alloc(sizeof(int32_t) * (size_t)(T * ND)); /* [T, N*D] exact dots */
        for (int64_t t = 0; t < T; t++) {
            dsops_ref_q8_group(cq + t * Q, Q, qi + t * Q, &qs[t]);
            for (int64_t n = 0; n < Q; n++)
                ref_put_i8(&a->qr, t, n, 0, qi[t * Q + n]);               /* qr [T, Q] int8 */
            ref_put_f32(&a->qr_scale, t, 0, 0, qs[t]);                    /* qr_scale [T] fp32 */
        }
        ref_ilin(qi, T, Q, &a->wq_b, iacc);
        for (int64_t n = 0; n < ND; n++) {
            const float ws = ref_get_f(&a->wq_b_scale, n, 0, 0);         /* wq_b_scale [N*D] fp32 */
            for (int64_t t = 0; t < T; t++)
                qb[t * ND + n] = ((float)iacc[t * ND + n] * qs[t]) * ws;
        }
        free(qi);
        free(qs);
        free(iacc);
    }

    /* step 6 (6'): the latent kv projection */
    ref_lin(xs, T, H, &a->wkv, ka);
    if (!int8)
        for (int64_t i = 0; i < T * D; i++)
            ka[i] = ref_round_bf16(ka[i]);

#pragma omp parallel
    {
        float *v = ref_alloc(sizeof(float) * (size_t)D); /* [D] one head (or the kv row) */
#pragma omp for schedule(static)
        for (int64_t t = 0; t < T; t++) {
            float c[M4_DR], s[M4_DR];
            ref_get_row(&a->rope_cos, t, M4_DR, c);                       /* rope_cos [T, 64] */
            ref_get_row(&a->rope_sin, t, M4_DR, s);                       /* rope_sin [T, 64] */
            /* steps 4-5: per head, unweighted RMSNorm over D in fp32, bf16, then rotate the last 64 */
            for (int64_t h = 0; h < N; h++) {
                dsops_ref_rmsnorm_row(qb + t * ND + h * D, D, NULL, a->eps_qh, v);
                for (int64_t d = 0; d < D; d++)
                    v[d] = ref_round_bf16(v[d]);
                ref_rope_bf16(v + D - M4_DR, c, s, a->rope_mode, a->rope_inverse);
                for (int64_t d = 0; d < D; d++)
                    ref_put_bf16(&a->q, t, h, d, v[d]);                   /* q [T, N, D] bf16 */
            }
            /* steps 7-8: kn = bf16(RMSNorm(ka; gamma_ckv)), rotate the last 64 */
            dsops_ref_rmsnorm_row(ka + t * D, D, gckv, a->eps_ckv, v);
            for (int64_t d = 0; d < D; d++)
                v[d] = ref_round_bf16(v[d]);
            ref_rope_bf16(v + D - M4_DR, c, s, a->rope_mode, a->rope_inverse);
            for (int64_t d = 0; d < D; d++)
                ref_put_bf16(&a->kv, t, d, 0, v[d]);                      /* kv [T, D] bf16 */
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
