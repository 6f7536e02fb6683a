/* Few-row linear maps y[m][n] = sum_k x[m][k] * W[n][k] from row-major weights, portable C. Like the SIMD
 * tiers, each (m, n) keeps 16 independent partial sums (k mod 16), added in a fixed tree at the end; the
 * independent sums let the compiler use the baseline vector registers without reordering any sum. */
#include "dispatch.h"
#include "internal.h"

#define LANES 16

static float tree_sum(const float *p, int n)
{
    return n == 1 ? p[0] : tree_sum(p, n / 2) + tree_sum(p + n / 2, n / 2);
}

/* bf16: fp32 products added one at a time (no contraction in this file). */
static float dot_bf16(const uint16_t *x, const uint16_t *w, int K)
{
    float part[LANES] = {0};
    int k = 0;
    for (; k + LANES <= K; k += LANES)
        for (int j = 0; j < LANES; j++)
            part[j] += dsops_bf16_value(x[k + j]) * dsops_bf16_value(w[k + j]);
    for (int j = 0; k + j < K; j++)
        part[j] += dsops_bf16_value(x[k + j]) * dsops_bf16_value(w[k + j]);
    return tree_sum(part, LANES);
}

/* int8: xb holds x + 128, so sum_k xb W = sum_k x W + 128 sum_k W. Unsigned sums wrap modulo 2^32 (no
 * undefined behaviour); after removing wsum128 the result is exact whenever the true dot product fits
 * int32. */
static uint32_t dot_u8s8(const uint8_t *xb, const int8_t *w, int K)
{
    uint32_t part[LANES] = {0};
    int k = 0;
    for (; k + LANES <= K; k += LANES)
        for (int j = 0; j < LANES; j++)
            part[j] += (uint32_t)((int32_t)xb[k + j] * (int32_t)w[k + j]);
    for (int j = 0; k + j < K; j++)
        part[j] += (uint32_t)((int32_t)xb[k + j] * (int32_t)w[k + j]);
    uint32_t s = 0;
    for (int j = 0; j < LANES; j++)
        s += part[j];
    return s;
}

/* Weight row by weight row: a row stays in cache while every activation row meets it. */
static void rowdot_bf16__scalar(const uint16_t *x, size_t ldx, int M, const uint16_t *w, size_t ldw, int N, int K,
                                float *y, size_t ldy)
{
    for (int n = 0; n < N; n++)
        for (int m = 0; m < M; m++)
            y[(size_t)m * ldy + n] = dot_bf16(x + (size_t)m * ldx, w + (size_t)n * ldw, K);
}

static void rowdot_s8__scalar(const uint8_t *xb, size_t ldx, int M, const int8_t *w, size_t ldw, int N, int K,
                              const int32_t *wsum128, int32_t *y, size_t ldy)
{
    for (int n = 0; n < N; n++)
        for (int m = 0; m < M; m++)
            y[(size_t)m * ldy + n] =
                (int32_t)(dot_u8s8(xb + (size_t)m * ldx, w + (size_t)n * ldw, K) - (uint32_t)wsum128[n]);
}

const dsops_linear_kernels dsops_linear_kernels__scalar = {
    .rowdot_bf16 = rowdot_bf16__scalar,
    .rowdot_s8 = rowdot_s8__scalar,
};
