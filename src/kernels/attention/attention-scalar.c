/* Attention-core micro-kernels, portable C. Same layouts and loop structure as the SIMD tiers
 * (see src/core/dispatch.h); fp32 sums in ascending index order. */
#include <math.h>

#include "dispatch.h"
#include "internal.h"

static void qk_scores__scalar(const uint16_t *q, size_t q_stride, int nh, const uint16_t *kt, int ntiles, int dpairs,
                              float scale, float *s, size_t s_stride)
{
    for (int h = 0; h < nh; h++) {
        const uint16_t *qh = q + (size_t)h * q_stride; /* [2*dpairs] */
        for (int tile = 0; tile < ntiles; tile++) {
            const uint16_t *kt_tile = kt + (size_t)tile * dpairs * 32; /* [dpairs][16][2] */
            float acc[DSOPS_KT_LANES] = {0};
            for (int dp = 0; dp < dpairs; dp++) {
                float q0 = dsops_bf16_to_f32(qh[2 * dp]), q1 = dsops_bf16_to_f32(qh[2 * dp + 1]);
                const uint16_t *kp = kt_tile + (size_t)dp * 32;
                for (int e = 0; e < DSOPS_KT_LANES; e++) {
                    acc[e] += q0 * dsops_bf16_to_f32(kp[2 * e]);
                    acc[e] += q1 * dsops_bf16_to_f32(kp[2 * e + 1]);
                }
            }
            for (int e = 0; e < DSOPS_KT_LANES; e++)
                s[(size_t)h * s_stride + (size_t)tile * DSOPS_KT_LANES + e] = acc[e] * scale;
        }
    }
}

static void pv_bf16__scalar(const uint16_t *p, size_t p_stride, int nh, const uint16_t *vp, size_t vp_block_stride,
                            int npairs, int dv_blocks, float *o, size_t o_stride)
{
    for (int h = 0; h < nh; h++) {
        const uint16_t *ph = p + (size_t)h * p_stride; /* [2*npairs] */
        for (int blk = 0; blk < dv_blocks; blk++) {
            const uint16_t *vb = vp + (size_t)blk * vp_block_stride; /* [npairs][16][2] */
            float acc[DSOPS_VP_LANES] = {0};
            for (int pr = 0; pr < npairs; pr++) {
                float p0 = dsops_bf16_to_f32(ph[2 * pr]), p1 = dsops_bf16_to_f32(ph[2 * pr + 1]);
                const uint16_t *v = vb + (size_t)pr * 32;
                for (int d = 0; d < DSOPS_VP_LANES; d++) {
                    acc[d] += p0 * dsops_bf16_to_f32(v[2 * d]);
                    acc[d] += p1 * dsops_bf16_to_f32(v[2 * d + 1]);
                }
            }
            memcpy(o + (size_t)h * o_stride + (size_t)blk * DSOPS_VP_LANES, acc, sizeof acc);
        }
    }
}

static void pv_fp32__scalar(const float *p, size_t p_stride, int nh, const uint16_t *vp, size_t vp_block_stride,
                            int npairs, int dv_blocks, float *o, size_t o_stride)
{
    for (int h = 0; h < nh; h++) {
        const float *ph = p + (size_t)h * p_stride; /* [2*npairs] */
        for (int blk = 0; blk < dv_blocks; blk++) {
            const uint16_t *vb = vp + (size_t)blk * vp_block_stride;
            float acc[DSOPS_VP_LANES] = {0};
            for (int pr = 0; pr < npairs; pr++) {
                const uint16_t *v = vb + (size_t)pr * 32;
                for (int d = 0; d < DSOPS_VP_LANES; d++) {
                    acc[d] += ph[2 * pr] * dsops_bf16_to_f32(v[2 * d]);
                    acc[d] += ph[2 * pr + 1] * dsops_bf16_to_f32(v[2 * d + 1]);
                }
            }
            memcpy(o + (size_t)h * o_stride + (size_t)blk * DSOPS_VP_LANES, acc, sizeof acc);
        }
    }
}

static float row_max__scalar(const float *s, int n)
{
    float m = -INFINITY;
    for (int e = 0; e < n; e++)
        m = s[e] > m ? s[e] : m;
    return m;
}

static float exp_sum__scalar(const float *s, int n, float m, float *w)
{
    float l = 0.0f;
    for (int e = 0; e < n; e++) {
        w[e] = expf(s[e] - m);
        l += w[e];
    }
    return l;
}

static void scale_to_bf16__scalar(const float *w, int n, float r, uint16_t *p)
{
    for (int e = 0; e < n; e++)
        p[e] = dsops_f32_to_bf16(w[e] * r);
}

static void scale_to_f32__scalar(const float *w, int n, float r, float *p)
{
    for (int e = 0; e < n; e++)
        p[e] = w[e] * r;
}

static void dequant_int8__scalar(const int8_t *q, const void *scales, int n, uint16_t *dst)
{
    for (int g = 0; g < n / 128; g++) {
        float scale;
        memcpy(&scale, (const char *)scales + 4 * g, 4);
        for (int c = 128 * g; c < 128 * g + 128; c++)
            dst[c] = dsops_f32_to_bf16((float)q[c] * scale);
    }
}

static void pack_keys__scalar(const uint16_t *rows, size_t row_stride, int dpairs, int dv, uint16_t *kt_tile,
                              uint16_t *vp, size_t vp_block_stride)
{
    for (int dp = 0; dp < dpairs; dp++)
        for (int e = 0; e < DSOPS_KT_LANES; e++) {
            kt_tile[(size_t)dp * 32 + 2 * e] = rows[(size_t)e * row_stride + 2 * dp];
            kt_tile[(size_t)dp * 32 + 2 * e + 1] = rows[(size_t)e * row_stride + 2 * dp + 1];
        }
    int dv_blocks = (dv + DSOPS_VP_LANES - 1) / DSOPS_VP_LANES;
    for (int blk = 0; blk < dv_blocks; blk++)
        for (int pr = 0; pr < DSOPS_KT_LANES / 2; pr++) {
            uint16_t *v = vp + (size_t)blk * vp_block_stride + (size_t)pr * 32;
            for (int i = 0; i < DSOPS_VP_LANES; i++) {
                int d = blk * DSOPS_VP_LANES + i;
                v[2 * i] = d < dv ? rows[(size_t)(2 * pr) * row_stride + d] : 0;
                v[2 * i + 1] = d < dv ? rows[(size_t)(2 * pr + 1) * row_stride + d] : 0;
            }
        }
}

static void store_bf16__scalar(const float *src, int n, float r, uint16_t *dst)
{
    for (int i = 0; i < n; i++)
        dst[i] = dsops_f32_to_bf16(src[i] * r);
}

void dsops_attention_kernels_init__scalar(dsops_attention_kernels *k)
{
    k->qk = qk_scores__scalar;
    k->pv_bf16 = pv_bf16__scalar;
    k->pv_fp32 = pv_fp32__scalar;
    k->row_max = row_max__scalar;
    k->exp_sum = exp_sum__scalar;
    k->scale_to_bf16 = scale_to_bf16__scalar;
    k->scale_to_f32 = scale_to_f32__scalar;
    k->dequant_int8 = dequant_int8__scalar;
    k->pack_keys = pack_keys__scalar;
    k->store_bf16 = store_bf16__scalar;
}
