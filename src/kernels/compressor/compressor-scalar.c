/* The compressor's gated pooling, portable C: the algorithm of the SIMD tiers (two passes over whole
 * candidate rows, per-channel state in e) with expf. */
#include <math.h>

#include "dispatch.h"

/* Pass 1: the maximum logit of every channel; pass 2: e_r = exp(z_r - max), their sum and the weighted
 * sum of the values. Each pass reads the candidates' rows front to back (a window's rows are C R
 * separate state rows: walking channel by channel would interleave that many streams), and every
 * channel still sees its candidates in list order. e: 3 D floats (maximum, sum, weighted sum). */
static void pool__scalar(const float *const *kv, const float *const *sc, int n, int64_t D, float *pooled, float *e)
{
    float *mz = e, *sum = e + D, *acc = e + 2 * D;
    for (int64_t d = 0; d < D; d++) {
        mz[d] = -INFINITY;
        sum[d] = 0.0f;
        acc[d] = 0.0f;
    }
    for (int r = 0; r < n; r++) {
        const float *z = sc[r];
        for (int64_t d = 0; d < D; d++) /* NaN logits are skipped (unspecified), as in the SIMD tiers */
            mz[d] = z[d] > mz[d] ? z[d] : mz[d];
    }
    for (int r = 0; r < n; r++) {
        const float *a = kv[r], *z = sc[r];
        for (int64_t d = 0; d < D; d++) {
            float v = expf(z[d] - mz[d]); /* NaN when every logit of the channel is -Inf */
            sum[d] += v;
            acc[d] += a[d] * v;
        }
    }
    /* sum_r a_r e_r / sum_r e_r: the division distributed over the sum and taken as a product with
     * 1 / sum (spec §1.7) */
    for (int64_t d = 0; d < D; d++)
        pooled[d] = acc[d] * (1.0f / sum[d]);
}

const dsops_compressor_kernels dsops_compressor_kernels__scalar = {
    .pool = pool__scalar,
};
