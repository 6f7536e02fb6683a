/* Lightning-indexer micro-kernels, portable C, on the tile layouts of src/core/dispatch.h. */
#include <math.h>

#include "dispatch.h"
#include "internal.h"

static void pack_int8__scalar(const int8_t *const *rows, int di, uint8_t *tile)
{
    int dquads = (di + 3) / 4;
    for (int e = 0; e < 16; e++)
        for (int d = 0; d < dquads * 4; d++) {
            int8_t v = rows[e] && d < di ? rows[e][d] : 0;
            tile[(d / 4) * 64 + e * 4 + d % 4] = (uint8_t)(v ^ 0x80);
        }
}

static void pack_bf16__scalar(const uint16_t *const *rows, int di, uint16_t *tile)
{
    int dpairs = (di + 1) / 2;
    for (int e = 0; e < 16; e++)
        for (int d = 0; d < dpairs * 2; d++)
            tile[(d / 2) * 32 + e * 2 + d % 2] = rows[e] && d < di ? rows[e][d] : 0;
}

static void score_int8__scalar(const int8_t *q, size_t q_stride, const int32_t *qsum128, const float *ws, int nh,
                               const uint8_t *tiles, int ntiles, int dquads, const float *kscale, float *I)
{
    for (int tile = 0; tile < ntiles; tile++) {
        const uint8_t *tb = tiles + (size_t)tile * dquads * 64; /* [dquads][16][4] */
        float sum[16] = {0};
        for (int h = 0; h < nh; h++) {
            const int8_t *qh = q + (size_t)h * q_stride;
            for (int e = 0; e < 16; e++) {
                uint32_t acc = 0; /* wraps like the int32 SIMD accumulators; exact after the correction */
                for (int k = 0; k < dquads; k++)
                    for (int b = 0; b < 4; b++)
                        acc += (uint32_t)((int32_t)tb[k * 64 + e * 4 + b] * (int32_t)qh[4 * k + b]);
                int32_t dot = (int32_t)(acc - (uint32_t)qsum128[h]);
                float d = dsops_fp16_to_f32(dsops_f32_to_fp16((float)(dot > 0 ? dot : 0) * 0x1p-11f));
                sum[e] += ws[h] * d;
            }
        }
        for (int e = 0; e < 16; e++)
            I[tile * 16 + e] = sum[e] * kscale[tile * 16 + e];
    }
}

static void score_bf16__scalar(const uint16_t *q, size_t q_stride, const float *w, int nh, const uint16_t *tiles,
                               int ntiles, int dpairs, float *I)
{
    for (int tile = 0; tile < ntiles; tile++) {
        const uint16_t *tb = tiles + (size_t)tile * dpairs * 32; /* [dpairs][16][2] */
        float sum[16] = {0};
        for (int h = 0; h < nh; h++) {
            const uint16_t *qh = q + (size_t)h * q_stride;
            for (int e = 0; e < 16; e++) {
                float dot = 0.0f;
                for (int k = 0; k < dpairs; k++) {
                    dot += dsops_bf16_to_f32(qh[2 * k]) * dsops_bf16_to_f32(tb[k * 32 + e * 2]);
                    dot += dsops_bf16_to_f32(qh[2 * k + 1]) * dsops_bf16_to_f32(tb[k * 32 + e * 2 + 1]);
                }
                sum[e] += (dot > 0.0f ? dot : 0.0f) * w[h];
            }
        }
        memcpy(I + (size_t)tile * 16, sum, sizeof sum);
    }
}

const dsops_indexer_kernels dsops_indexer_kernels__scalar = {
    .pack_int8 = pack_int8__scalar,
    .pack_bf16 = pack_bf16__scalar,
    .score_int8 = score_int8__scalar,
    .score_bf16 = score_bf16__scalar,
};
