/* Few-row linear maps y[m][n] = sum_k x[m][k] * W[n][k] from row-major weights, portable C. Like the SIMD
 * tiers, each (m, n) keeps 16 independent partial sums (k mod 16), added in a fixed tree at the end; the
 * independent sums let the compiler use the baseline vector registers without reordering any sum. */
#include <string.h>

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

/* ---- the lanes layout (linear.h) ---- */

size_t dsops_linear_lanes_elems(int64_t N, int64_t K) { return (size_t)((N + 15) / 16) * (size_t)((K + 1) / 2) * 32; }

/* In the layout's memory order: the writes stream, the reads walk 16 rows of W at a time. es: bytes per element
 * (a constant at each call, so the copies compile to plain loads and stores). */
static inline void pack_lanes(const unsigned char *w, size_t es, int64_t N, int64_t K, int64_t stride_n,
                              int64_t stride_k, unsigned char *out)
{
    const int64_t pairs = (K + 1) / 2, blocks = (N + 15) / 16;
    for (int64_t g0 = 0; g0 < blocks; g0 += DSOPS_LANES_GROUP) {
        const int64_t g1 = blocks - g0 < DSOPS_LANES_GROUP ? blocks : g0 + DSOPS_LANES_GROUP;
        for (int64_t p0 = 0; p0 < pairs; p0 += DSOPS_LANES_PAIRS) {
            const int64_t p1 = pairs - p0 < DSOPS_LANES_PAIRS ? pairs : p0 + DSOPS_LANES_PAIRS;
            for (int64_t b = g0; b < g1; b++)
                for (int64_t p = p0; p < p1; p++)
                    for (int64_t n = 16 * b; n < 16 * b + 16; n++)
                        for (int64_t k = 2 * p; k < 2 * p + 2; k++, out += es) {
                            if (n < N && k < K)
                                memcpy(out, w + (size_t)(n * stride_n + k * stride_k) * es, es);
                            else
                                memset(out, 0, es);
                        }
        }
    }
}

void dsops_linear_pack_lanes(const uint16_t *w, int64_t N, int64_t K, int64_t stride_n, int64_t stride_k,
                             uint16_t *lanes)
{
    pack_lanes((const unsigned char *)w, 2, N, K, stride_n, stride_k, (unsigned char *)lanes);
}

void dsops_linear_pack_lanes_s8(const int8_t *w, int64_t N, int64_t K, int64_t stride_n, int64_t stride_k,
                                int8_t *lanes)
{
    pack_lanes((const unsigned char *)w, 1, N, K, stride_n, stride_k, (unsigned char *)lanes);
}

/* Output by output, products in the layout's order, added one at a time (no contraction in this file). */
static void rowdot_bf16_lanes__scalar(const uint16_t *x, size_t ldx, int M, const uint16_t *wl, int N, int K,
                                      float *y, size_t ldy)
{
    const int pairs = (K + 1) / 2;
    for (int n = 0; n < N; n++)
        for (int m = 0; m < M; m++) {
            const uint16_t *xm = x + (size_t)m * ldx;
            float acc = 0.0f;
            for (int p = 0; p < pairs; p++) {
                const uint16_t *v = wl + dsops_lanes_at(N, K, n, p) + 2 * (n % 16);
                acc += dsops_bf16_value(xm[2 * p]) * dsops_bf16_value(v[0]);
                if (2 * p + 1 < K)
                    acc += dsops_bf16_value(xm[2 * p + 1]) * dsops_bf16_value(v[1]);
            }
            y[(size_t)m * ldy + n] = acc;
        }
}

static void rowdot_s8_lanes__scalar(const uint8_t *xb, size_t ldx, int M, const int8_t *wl, int N, int K,
                                    const int32_t *wsum128, int32_t *y, size_t ldy)
{
    const int pairs = (K + 1) / 2;
    for (int n = 0; n < N; n++)
        for (int m = 0; m < M; m++) {
            const uint8_t *xm = xb + (size_t)m * ldx;
            uint32_t acc = 0; /* modulo 2^32, as rowdot_s8 */
            for (int p = 0; p < pairs; p++) {
                const int8_t *v = wl + dsops_lanes_at(N, K, n, p) + 2 * (n % 16);
                acc += (uint32_t)((int32_t)xm[2 * p] * (int32_t)v[0]);
                if (2 * p + 1 < K)
                    acc += (uint32_t)((int32_t)xm[2 * p + 1] * (int32_t)v[1]);
            }
            y[(size_t)m * ldy + n] = (int32_t)(acc - (uint32_t)wsum128[n]);
        }
}

const dsops_linear_kernels dsops_linear_kernels__scalar = {
    .rowdot_bf16 = rowdot_bf16__scalar,
    .rowdot_s8 = rowdot_s8__scalar,
    .rowdot_bf16_lanes = rowdot_bf16_lanes__scalar,
    .rowdot_s8_lanes = rowdot_s8_lanes__scalar,
};
