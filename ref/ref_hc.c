/* Reference oracles of the mHC hyper-connection operators (docs/OPERATORS.md §3.1 hc_pre, §3.2 hc_post).
 *
 * The Math steps executed literally, one token at a time: every fp32 sum in ascending index order, the
 * division by r (no reciprocal), expf for the sigmoids and the Sinkhorn exponentials, the Sinkhorn
 * normalisations in exactly the order of §3.1 step 7, bf16 rounding (nearest even) of y and, for bf16
 * outputs, of hc_post's result. Tensors are read and written through their strides. Built with
 * -ffp-contract=off. */
#include <math.h>
#include <stdlib.h>

#include "ref.h"
#include "ref_util.h"

static float hc_sigmoid(float z)
{
    return 1.0f / (1.0f + expf(-z));
}

/* ---- hc_pre (§3.1) ------------------------------------------------------------------------------- */

void dsops_ref_hc_pre(const dsops_hc_pre_args *a)
{
    const int64_t T = a->x.shape[0], HC = a->x.shape[1], H = a->x.shape[2];
    const int64_t K = HC * H, M = (2 + HC) * HC;
    float *xf = malloc((size_t)K * sizeof(float));
    float *mix = malloc((size_t)M * sizeof(float));
    float *A = malloc((size_t)(HC * HC) * sizeof(float));
    float *pre = malloc((size_t)HC * sizeof(float));
    if (!xf || !mix || !A || !pre)
        abort();
    const float s0 = ref_get_f(&a->hc_scale, 0, 0, 0), s1 = ref_get_f(&a->hc_scale, 1, 0, 0);
    const float s2 = ref_get_f(&a->hc_scale, 2, 0, 0);
    const float heps = a->hc_eps;
    for (int64_t t = 0; t < T; t++) {
        /* 1, 2: stream-major flattening and the RMS denominator */
        float ss = 0.0f;
        for (int64_t k = 0; k < K; k++) {
            xf[k] = ref_get_f(&a->x, t, k / H, k % H);
            ss += xf[k] * xf[k];
        }
        const float r = sqrtf(ss / (float)K + a->norm_eps);
        /* 3: the M mixes */
        for (int64_t m = 0; m < M; m++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++)
                acc += xf[k] * ref_get_f(&a->hc_fn, m, k, 0);
            mix[m] = acc / r;
        }
        /* 4, 5: gates */
        for (int64_t i = 0; i < HC; i++) {
            pre[i] = hc_sigmoid(mix[i] * s0 + ref_get_f(&a->hc_base, i, 0, 0)) + heps;
            float post = 2.0f * hc_sigmoid(mix[HC + i] * s1 + ref_get_f(&a->hc_base, HC + i, 0, 0));
            ref_put_f(&a->post, t, i, 0, post);
            if (a->pre.data)
                ref_put_f(&a->pre, t, i, 0, pre[i]);
        }
        /* 6: comb logits */
        for (int64_t p = 0; p < HC * HC; p++)
            A[p] = mix[2 * HC + p] * s2 + ref_get_f(&a->hc_base, 2 * HC + p, 0, 0);
        /* 7: Sinkhorn. Row-wise max-subtracted exp, row normalisation with eps after the division, column
         * normalisation, then sinkhorn_iters - 1 rounds of row and column normalisation. */
        for (int64_t r0 = 0; r0 < HC; r0++) {
            float *row = A + r0 * HC;
            float mx = row[0];
            for (int64_t c = 1; c < HC; c++)
                mx = row[c] > mx ? row[c] : mx;
            for (int64_t c = 0; c < HC; c++)
                row[c] = expf(row[c] - mx);
            float sum = 0.0f;
            for (int64_t c = 0; c < HC; c++)
                sum += row[c];
            for (int64_t c = 0; c < HC; c++)
                row[c] = row[c] / sum + heps;
        }
        for (int64_t c = 0; c < HC; c++) {
            float sum = 0.0f;
            for (int64_t r0 = 0; r0 < HC; r0++)
                sum += A[r0 * HC + c];
            for (int64_t r0 = 0; r0 < HC; r0++)
                A[r0 * HC + c] = A[r0 * HC + c] / (sum + heps);
        }
        for (int it = 1; it < a->sinkhorn_iters; it++) {
            for (int64_t r0 = 0; r0 < HC; r0++) {
                float sum = 0.0f;
                for (int64_t c = 0; c < HC; c++)
                    sum += A[r0 * HC + c];
                for (int64_t c = 0; c < HC; c++)
                    A[r0 * HC + c] = A[r0 * HC + c] / (sum + heps);
            }
            for (int64_t c = 0; c < HC; c++) {
                float sum = 0.0f;
                for (int64_t r0 = 0; r0 < HC; r0++)
                    sum += A[r0 * HC + c];
                for (int64_t r0 = 0; r0 < HC; r0++)
                    A[r0 * HC + c] = A[r0 * HC + c] / (sum + heps);
            }
        }
        /* 8 */
        for (int64_t r0 = 0; r0 < HC; r0++)
            for (int64_t c = 0; c < HC; c++)
                ref_put_f(&a->comb, t, r0, c, A[r0 * HC + c]);
        /* 9: y, i ascending */
        for (int64_t d = 0; d < H; d++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < HC; i++)
                acc += pre[i] * xf[i * H + d];
            ref_put_f(&a->y, t, d, 0, acc);
        }
    }
    free(xf);
    free(mix);
    free(A);
    free(pre);
}

/* ---- hc_post (§3.2) ------------------------------------------------------------------------------ */

void dsops_ref_hc_post(const dsops_hc_post_args *a)
{
    const int64_t T = a->residual.shape[0], HC = a->residual.shape[1], H = a->residual.shape[2];
    /* out may alias residual exactly: all HC streams of (t, d) are read before any of them is written */
    float *res = malloc((size_t)HC * sizeof(float));
    float *val = malloc((size_t)HC * sizeof(float));
    if (!res || !val)
        abort();
    for (int64_t t = 0; t < T; t++)
        for (int64_t d = 0; d < H; d++) {
            for (int64_t i = 0; i < HC; i++)
                res[i] = ref_get_f(&a->residual, t, i, d);
            const float xv = ref_get_f(&a->x, t, d, 0);
            for (int64_t j = 0; j < HC; j++) {
                float acc = 0.0f;
                for (int64_t i = 0; i < HC; i++)
                    acc += ref_get_f(&a->comb, t, i, j) * res[i];
                val[j] = ref_get_f(&a->post, t, j, 0) * xv + acc;
            }
            for (int64_t j = 0; j < HC; j++)
                ref_put_f(&a->out, t, j, d, val[j]);
        }
    free(res);
    free(val);
}
