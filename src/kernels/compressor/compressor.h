/* The compressor family's contract: its kernel table, implemented by every tier in
 * src/kernels/compressor/compressor-<tier>.c and aggregated by src/core/dispatch.h. */
#ifndef DSOPS_KERNELS_COMPRESSOR_H
#define DSOPS_KERNELS_COMPRESSOR_H

#include <stddef.h>
#include <stdint.h>

/* The compressor's pooling (spec §3.4 step 3) of one window over n candidates: candidate r's value and
 * logit rows are kv[r], sc[r] (channel d at [d], d < D); pooled[d] = sum_r kv_r[d] P_r[d] with P the
 * softmax over r of sc_r[d]. e: DSOPS_CMP_POOL_WORK(D) floats. Every tier has it (scalar: expf). */
#define DSOPS_CMP_POOL_WORK(D) (3 * (size_t)(D))
typedef struct dsops_compressor_kernels {
    void (*pool)(const float *const *kv, const float *const *sc, int n, int64_t D, float *pooled, float *e);
} dsops_compressor_kernels;

#endif
