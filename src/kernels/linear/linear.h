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
typedef struct dsops_linear_kernels {
    void (*rowdot_bf16)(const uint16_t *x, size_t ldx, int M, const uint16_t *w, size_t ldw, int N, int K, float *y,
                        size_t ldy);
    void (*rowdot_s8)(const uint8_t *xb, size_t ldx, int M, const int8_t *w, size_t ldw, int N, int K,
                      const int32_t *wsum128, int32_t *y, size_t ldy);
} dsops_linear_kernels;

#endif
