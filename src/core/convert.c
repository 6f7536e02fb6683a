/* bf16 / fp16 <-> fp32 conversions with round-to-nearest-even (spec §2.1). */
#include "internal.h"

void dsops_fp32_to_bf16(const float *src, uint16_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = dsops_bf16_round_bits(src[i]);
}

void dsops_bf16_to_fp32(const uint16_t *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = dsops_bf16_value(src[i]);
}

void dsops_fp32_to_fp16(const float *src, uint16_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = dsops_fp16_round_bits(src[i]);
}

void dsops_fp16_to_fp32(const uint16_t *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = dsops_fp16_value(src[i]);
}
