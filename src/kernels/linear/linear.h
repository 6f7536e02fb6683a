/* The linear family's contract: its kernel table, implemented by every tier in
 * src/kernels/linear/linear-<tier>.c and aggregated by src/core/dispatch.h. (The oneDNN matmul layer is
 * src/core/linear.h.) */
#ifndef DSOPS_KERNELS_LINEAR_H
#define DSOPS_KERNELS_LINEAR_H

#include <stddef.h>
#include <stdint.h>

/* Few-row linear maps from row-major weights W [N, K] (row n at w + n * ldw), for decode-size calls:
 * y[m][n] = sum_k x[m][k] * W[n][k], m < M. The int8 form takes x + 128 as bytes (xb) and removes
 * wsum128[n] = 128 * sum_k W[n][k]; its result is exact (computed modulo 2^32, so exact whenever the
 * true sum fits int32). Every tier has them (scalar: portable C). */
/* The lanes layout of bf16 weights (the attention kernels' key layout, with W's rows as keys): rows in blocks of
 * 16 (lanes) and the blocks in groups of DSOPS_LANES_GROUP; pairs of K in blocks of DSOPS_LANES_PAIRS. Group g
 * holds, pair block after pair block, the pieces [pairs of the block][16][2] of its blocks one after the other,
 * so a kernel that goes group by group and pair block by pair block reads the weights in memory order. Rows past
 * N and the value past an odd K are zero. dsops_lanes_at is where pair p of row n's block starts (add 2 (n % 16)
 * + k % 2); dsops_linear_lanes_elems the size; dsops_linear_pack_lanes fills the layout from W (element W[n][k]
 * at w + n * stride_n + k * stride_k). */
#define DSOPS_LANES_GROUP 8
#define DSOPS_LANES_PAIRS 128
static inline size_t dsops_lanes_at(int64_t N, int64_t K, int64_t n, int64_t p)
{
    const int64_t pairs = (K + 1) / 2, blocks = (N + 15) / 16, g = n / (16 * DSOPS_LANES_GROUP);
    const int64_t gb = blocks - g * DSOPS_LANES_GROUP < DSOPS_LANES_GROUP ? blocks - g * DSOPS_LANES_GROUP
                                                                          : DSOPS_LANES_GROUP; /* blocks of g */
    const int64_t q = p / DSOPS_LANES_PAIRS, qp = pairs - q * DSOPS_LANES_PAIRS < DSOPS_LANES_PAIRS
                                                      ? pairs - q * DSOPS_LANES_PAIRS
                                                      : DSOPS_LANES_PAIRS; /* pairs of block q */
    const int64_t b = n / 16 % DSOPS_LANES_GROUP;
    return (size_t)(((g * DSOPS_LANES_GROUP * pairs + q * DSOPS_LANES_PAIRS * gb + b * qp) + p % DSOPS_LANES_PAIRS) * 32);
}
size_t dsops_linear_lanes_elems(int64_t N, int64_t K);
void dsops_linear_pack_lanes(const uint16_t *w, int64_t N, int64_t K, int64_t stride_n, int64_t stride_k,
                             uint16_t *lanes);
/* The same layout for int8 weights, one byte per element (dsops_lanes_at counts elements). */
void dsops_linear_pack_lanes_s8(const int8_t *w, int64_t N, int64_t K, int64_t stride_n, int64_t stride_k,
                                int8_t *lanes);

typedef struct dsops_linear_kernels {
    void (*rowdot_bf16)(const uint16_t *x, size_t ldx, int M, const uint16_t *w, size_t ldw, int N, int K, float *y,
                        size_t ldy);
    /* The same product from all N rows of W in the lanes layout (wl: its start); every output adds its products
     * in one order: pairs ascending, even value then odd. */
    void (*rowdot_bf16_lanes)(const uint16_t *x, size_t ldx, int M, const uint16_t *wl, int N, int K, float *y,
                              size_t ldy);
    void (*rowdot_s8)(const uint8_t *xb, size_t ldx, int M, const int8_t *w, size_t ldw, int N, int K,
                      const int32_t *wsum128, int32_t *y, size_t ldy);
    /* The int8 product from all N rows of W in the lanes layout (wl: its start); exact like rowdot_s8. */
    void (*rowdot_s8_lanes)(const uint8_t *xb, size_t ldx, int M, const int8_t *wl, int N, int K,
                            const int32_t *wsum128, int32_t *y, size_t ldy);
} dsops_linear_kernels;

#endif
