/* Reference oracles of the mHC hyper-connection operators (spec/OPS.md §3.1 hc_pre, §3.2 hc_post).
 *
 * The Math steps executed literally, one token at a time: every fp32 sum in ascending index order, the
 * division by r (no reciprocal), expf for the sigmoids and the Sinkhorn exponentials, the Sinkhorn
 * normalisations in exactly the order of §3.1 step 7, bf16 rounding (nearest even) of y and, for bf16
 * outputs, of hc_post's result. Tensors are read and written through their strides. Built with
 * -ffp-contract=off. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

/* ---- element access ------------------------------------------------------------------------------ */

static size_t hc_elem_size(dsops_dtype dt)
{
    return dt == DSOPS_FP32 ? 4 : 2;
}

/* Address of element [i0, i1, i2] of `t` (indices beyond its rank are ignored). */
static unsigned char *hc_addr(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    int64_t off = 0;
    if (t->ndim > 0)
        off += i0 * t->stride[0];
    if (t->ndim > 1)
        off += i1 * t->stride[1];
    if (t->ndim > 2)
        off += i2 * t->stride[2];
    return (unsigned char *)t->data + off * (int64_t)hc_elem_size(t->dtype);
}

/* Value of a bf16 or fp32 element, widened to fp32. */
static float hc_get(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    const unsigned char *p = hc_addr(t, i0, i1, i2);
    if (t->dtype == DSOPS_FP32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return dsops_ref_f32_from_bf16(h);
}

/* Stores v as a bf16 (rounded once) or fp32 element. */
static void hc_put(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v)
{
    unsigned char *p = hc_addr(t, i0, i1, i2);
    if (t->dtype == DSOPS_FP32) {
        memcpy(p, &v, 4);
        return;
    }
    uint16_t h = dsops_ref_bf16_from_f32(v);
    memcpy(p, &h, 2);
}

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
    const float s0 = hc_get(&a->hc_scale, 0, 0, 0), s1 = hc_get(&a->hc_scale, 1, 0, 0);
    const float s2 = hc_get(&a->hc_scale, 2, 0, 0);
    const float heps = a->hc_eps;
    for (int64_t t = 0; t < T; t++) {
        /* 1, 2: stream-major flattening and the RMS denominator */
        float ss = 0.0f;
        for (int64_t k = 0; k < K; k++) {
            xf[k] = hc_get(&a->x, t, k / H, k % H);
            ss += xf[k] * xf[k];
        }
        const float r = sqrtf(ss / (float)K + a->norm_eps);
        /* 3: the M mixes */
        for (int64_t m = 0; m < M; m++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++)
                acc += xf[k] * hc_get(&a->hc_fn, m, k, 0);
            mix[m] = acc / r;
        }
        /* 4, 5: gates */
        for (int64_t i = 0; i < HC; i++) {
            pre[i] = hc_sigmoid(mix[i] * s0 + hc_get(&a->hc_base, i, 0, 0)) + heps;
            float post = 2.0f * hc_sigmoid(mix[HC + i] * s1 + hc_get(&a->hc_base, HC + i, 0, 0));
            hc_put(&a->post, t, i, 0, post);
            if (a->pre.data)
                hc_put(&a->pre, t, i, 0, pre[i]);
        }
        /* 6: comb logits */
        for (int64_t p = 0; p < HC * HC; p++)
            A[p] = mix[2 * HC + p] * s2 + hc_get(&a->hc_base, 2 * HC + p, 0, 0);
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
                hc_put(&a->comb, t, r0, c, A[r0 * HC + c]);
        /* 9: y, i ascending */
        for (int64_t d = 0; d < H; d++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < HC; i++)
                acc += pre[i] * xf[i * H + d];
            hc_put(&a->y, t, d, 0, acc);
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
                res[i] = hc_get(&a->residual, t, i, d);
            const float xv = hc_get(&a->x, t, d, 0);
            for (int64_t j = 0; j < HC; j++) {
                float acc = 0.0f;
                for (int64_t i = 0; i < HC; i++)
                    acc += hc_get(&a->comb, t, i, j) * res[i];
                val[j] = hc_get(&a->post, t, j, 0) * xv + acc;
            }
            for (int64_t j = 0; j < HC; j++)
                hc_put(&a->out, t, j, d, val[j]);
        }
    free(res);
    free(val);
}
