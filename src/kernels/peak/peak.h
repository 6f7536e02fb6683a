/* The peak family's contract: its kernel table, implemented by every tier in
 * src/kernels/peak/peak-<tier>.c and aggregated by src/core/dispatch.h. */
#ifndef DSOPS_KERNELS_PEAK_H
#define DSOPS_KERNELS_PEAK_H

#include <stddef.h>
#include <stdint.h>

/* Dot-product throughput probes: run `iters` iterations of a register-resident loop and return the number
 * of multiply-adds (products) performed. */
typedef struct dsops_peak_kernels {
    double (*bf16_dot)(long iters);
    double (*int8_dot)(long iters);
    double (*fp32_fma)(long iters);
} dsops_peak_kernels;

#endif
