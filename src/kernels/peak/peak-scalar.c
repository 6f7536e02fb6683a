/* Dot-product throughput probes, portable C: independent fp32 / int32 multiply-add chains. */
#include "dispatch.h"

static double peak_bf16_dot__scalar(long iters)
{
    volatile float seed = 1.0f;
    float a[8], x = seed * 0.999f, y = seed * 1e-7f;
    for (int i = 0; i < 8; i++)
        a[i] = (float)i;
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            a[i] = a[i] * x + y;
        __asm__ volatile("" : "+m"(x));
    }
    volatile float sink = a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
    (void)sink;
    return (double)iters * 8.0;
}

static double peak_int8_dot__scalar(long iters)
{
    volatile int seed = 3;
    uint32_t a[8] = {0}; /* unsigned: the sums wrap without undefined behaviour */
    int8_t x = (int8_t)seed, y = (int8_t)(seed + 1);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            a[i] += (uint32_t)((int32_t)x * (int32_t)(int8_t)(y + i));
        __asm__ volatile("" : "+r"(x), "+r"(y)); /* keeps the loop from being folded away */
    }
    volatile uint32_t sink = a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
    (void)sink;
    return (double)iters * 8.0;
}

const dsops_peak_kernels dsops_peak_kernels__scalar = {
    .bf16_dot = peak_bf16_dot__scalar,
    .int8_dot = peak_int8_dot__scalar,
    .fp32_fma = peak_bf16_dot__scalar, /* the portable probe is an fp32 multiply-add chain */
};
