/* Reference oracle of indexer_prolog_v4 (docs/OPERATORS.md §3.5; primitives §2.2 linear maps, §2.5.1 RoPE,
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
 * runs the sums of several tokens side by side (ref_lin / ref_ilin, ref_util.c); each individual sum is
 * still accumulated in ascending k. Output rows are independent and are spread over OpenMP threads; no value
 * depends on the thread that computes it.
 *
 * Every tensor is read and written through its strides (in elements). a->prepared is ignored. */
#include <stdlib.h>

#include "ref.h"
#include "ref_util.h"

#define I4_DR 64  /* rotary dims (fixed in this version) */

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

    float *xs = ref_alloc(sizeof(float) * (size_t)(T * H));        /* [T, H] x widened */
    int8_t *qi = ref_alloc((size_t)(T * Q));                       /* [T, Q] qr */
    int32_t *dots = ref_alloc(sizeof(int32_t) * (size_t)(T * NQ)); /* [T, NI*DI] exact dots */
    float *wp = ref_alloc(sizeof(float) * (size_t)(T * NI));       /* [T, NI] weight projection (fp32) */
    float *hm = ref_alloc(sizeof(float) * (size_t)(DI * DI));      /* [DI, DI] hadamard widened, row k col j */

    ref_get_mat(&a->x, T, H, xs);
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < Q; k++)
            qi[t * Q + k] = ref_get_i8(&a->qr, t, k, 0);
    ref_get_mat(&a->hadamard, DI, DI, hm);

    ref_ilin(qi, T, Q, &a->idx_wq_b, dots);
    ref_lin(xs, T, H, &a->weights_proj, wp);

#pragma omp parallel
    {
        float *u = ref_alloc(sizeof(float) * (size_t)DI);   /* [DI] u_h */
        float *tmp = ref_alloc(sizeof(float) * (size_t)DI); /* [DI] */
        int8_t *q8 = ref_alloc((size_t)DI);                 /* [DI] */
#pragma omp for schedule(static)
        for (int64_t t = 0; t < T; t++) {
            float c[I4_DR], s[I4_DR];
            ref_get_row(&a->rope_cos, t, I4_DR, c);                      /* rope_cos [T, 64] */
            ref_get_row(&a->rope_sin, t, I4_DR, s);                      /* rope_sin [T, 64] */
            const float qs = ref_get_f(&a->qr_scale, t, 0, 0);           /* qr_scale [T] fp32 */
            for (int64_t h = 0; h < NI; h++) {
                /* steps 1-2 */
                for (int64_t d = 0; d < DI; d++) {
                    const int64_t n = h * DI + d;
                    const float ws = ref_get_f(&a->idx_wq_b_scale, n, 0, 0); /* idx_wq_b_scale [NI*DI] fp32 */
                    u[d] = ref_round_bf16(((float)dots[t * NQ + n] * qs) * ws);
                }
                /* step 3: rotate the last 64 dims */
                ref_rope_bf16(u + DI - I4_DR, c, s, a->rope_mode, a->rope_inverse);
                /* step 4: hq_h, in place */
                ref_hadamard_bf16(u, DI, hm, tmp);
                /* step 5 */
                float sc;
                dsops_ref_q8_group(u, DI, q8, &sc);
                for (int64_t d = 0; d < DI; d++)
                    ref_put_i8(&a->q_idx, t, h, d, q8[d]);               /* q_idx [T, NI, DI] int8 */
                ref_put_f(&a->q_idx_scale, t, h, 0, sc);                 /* q_idx_scale [T, NI] fp16 */
                /* steps 6-7 */
                const float w = ref_round_bf16(wp[t * NI + h]) * a->weights_scale;
                ref_put_f(&a->weights, t, h, 0, w);                      /* weights [T, NI] fp16 */
            }
        }
        free(u);
        free(tmp);
        free(q8);
    }

    free(xs);
    free(qi);
    free(dots);
    free(wp);
    free(hm);
}
