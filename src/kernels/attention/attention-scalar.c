/* Attention-core micro-kernels, portable C. Same layouts and loop structure as the SIMD tiers
 * (see attention.h); fp32 sums in ascending index order. */
#include <math.h>

#include "dispatch.h"
#include "internal.h"

/* QK and PV are one product on the packed layouts (see attention.h):
 *     c[r][16j + l] = scale * sum over k of  a[r][2k] * b[j][k][l][0] + a[r][2k+1] * b[j][k][l][1]
 * with a = query rows (QK) or probability rows (PV), b = key tiles (QK) or value blocks (PV). */
static void pair_dot(const void *a, int a_is_f32, size_t a_stride, int rows, const uint16_t *b, size_t b_stride,
                     int nvec, int steps, float scale, float *c, size_t c_stride)
{
    for (int r = 0; r < rows; r++) {
        for (int j = 0; j < nvec; j++) {
            const uint16_t *bj = b + (size_t)j * b_stride; /* [steps][16][2] */
            float acc[16] = {0};
            for (int k = 0; k < steps; k++) {
                float u, w;
                if (a_is_f32) {
                    const float *ar = (const float *)a + (size_t)r * a_stride + 2 * k;
                    u = ar[0];
                    w = ar[1];
                } else {
                    const uint16_t *ar = (const uint16_t *)a + (size_t)r * a_stride + 2 * k;
                    u = dsops_bf16_value(ar[0]);
                    w = dsops_bf16_value(ar[1]);
                }
                const uint16_t *v = bj + (size_t)k * 32;
                for (int l = 0; l < 16; l++) {
                    acc[l] += u * dsops_bf16_value(v[2 * l]);
                    acc[l] += w * dsops_bf16_value(v[2 * l + 1]);
                }
            }
            for (int l = 0; l < 16; l++)
                c[(size_t)r * c_stride + (size_t)j * 16 + l] = acc[l] * scale;
        }
    }
}

static void qk_scores__scalar(const uint16_t *q, size_t q_stride, int nh, const uint16_t *kt, int ntiles, int dpairs,
                              float scale, float *s, size_t s_stride)
{
    pair_dot(q, 0, q_stride, nh, kt, (size_t)dpairs * 32, ntiles, dpairs, scale, s, s_stride);
}

static void pv_bf16__scalar(const uint16_t *p, size_t p_stride, int nh, const uint16_t *vp, size_t vp_block_stride,
                            int npairs, int dv_blocks, float *o, size_t o_stride)
{
    pair_dot(p, 0, p_stride, nh, vp, vp_block_stride, dv_blocks, npairs, 1.0f, o, o_stride);
}

static void pv_fp32__scalar(const float *p, size_t p_stride, int nh, const uint16_t *vp, size_t vp_block_stride,
                            int npairs, int dv_blocks, float *o, size_t o_stride)
{
    pair_dot(p, 1, p_stride, nh, vp, vp_block_stride, dv_blocks, npairs, 1.0f, o, o_stride);
}

static float row_max__scalar(const float *s, int n)
{
    float m = -INFINITY;
    for (int e = 0; e < n; e++) {
        if (isnan(s[e]))
            return NAN;
        m = s[e] > m ? s[e] : m;
    }
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
        p[e] = dsops_bf16_round_bits(w[e] * r);
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
            dst[c] = dsops_bf16_round_bits((float)q[c] * scale);
    }
}

static void dequant_e4m3__scalar(const uint8_t *q, const void *scales, int group, int n, uint16_t *dst)
{
    for (int g = 0; g < n / group; g++) {
        float scale;
        memcpy(&scale, (const char *)scales + 4 * g, 4);
        for (int c = group * g; c < group * g + group; c++) {
            const float v = dsops_e4m3_value(q[c]);
            dst[c] = dsops_bf16_round_bits(isnan(v) ? v : v * scale);
        }
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
        dst[i] = dsops_bf16_round_bits(src[i] * r);
}

const dsops_attention_kernels dsops_attention_kernels__scalar = {
    .qk = qk_scores__scalar,
    .pv_bf16 = pv_bf16__scalar,
    .pv_fp32 = pv_fp32__scalar,
    .row_max = row_max__scalar,
    .exp_sum = exp_sum__scalar,
    .scale_to_bf16 = scale_to_bf16__scalar,
    .scale_to_f32 = scale_to_f32__scalar,
    .dequant_int8 = dequant_int8__scalar,
    .dequant_e4m3 = dequant_e4m3__scalar,
    .pack_keys = pack_keys__scalar,
    .store_bf16 = store_bf16__scalar,
};
