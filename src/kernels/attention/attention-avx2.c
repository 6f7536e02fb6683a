/* Attention-core micro-kernels for AVX2 + FMA: bf16 pairs are widened to fp32 (even element =
 * low half of each dword) and multiplied with fp32 FMAs. Entries not set here use the scalar ones. */
#include <immintrin.h>
#include <math.h>

#include "dispatch.h"
#include "exp-simd.h"
#include "internal.h"

#define INLINE static inline __attribute__((always_inline))

INLINE __m256 widen_even(__m256i x) { return _mm256_castsi256_ps(_mm256_slli_epi32(x, 16)); }
INLINE __m256 widen_odd(__m256i x) { return _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32((int)0xffff0000u))); }

/* QK and PV are one product on the packed layouts (see attention-avx512bf16.c):
 *     c[r][16j + l] = scale * sum over k of  a[r][2k] * b[j][k][l][0] + a[r][2k+1] * b[j][k][l][1]
 * Here each 64-byte vector of b is two ymm of 8 pairs, widened to fp32 (even element = low half),
 * and the a pair (bf16 or fp32) is broadcast as two fp32 values. Register tile: 4 rows x 16 lanes. */
INLINE void pair_fma(const void *a, int a_is_f32, size_t a_stride, int rows, const uint16_t *b, size_t b_stride,
                     int nvec, int steps, float scale, float *c, size_t c_stride)
{
    for (int j = 0; j < nvec; j++) {
        const uint16_t *bj = b + (size_t)j * b_stride;
        for (int r0 = 0; r0 < rows; r0 += 4) {
            int rt = rows - r0 < 4 ? rows - r0 : 4;
            __m256 acc[4][2];
            for (int r = 0; r < 4; r++)
                acc[r][0] = acc[r][1] = _mm256_setzero_ps();
            for (int k = 0; k < steps; k++) {
                __m256i x0 = _mm256_loadu_si256((const __m256i *)(bj + (size_t)k * 32));
                __m256i x1 = _mm256_loadu_si256((const __m256i *)(bj + (size_t)k * 32 + 16));
                __m256 e0 = widen_even(x0), o0 = widen_odd(x0), e1 = widen_even(x1), o1 = widen_odd(x1);
                for (int r = 0; r < rt; r++) {
                    float u, w;
                    if (a_is_f32) {
                        const float *ar = (const float *)a + (size_t)(r0 + r) * a_stride + 2 * k;
                        u = ar[0];
                        w = ar[1];
                    } else {
                        const uint16_t *ar = (const uint16_t *)a + (size_t)(r0 + r) * a_stride + 2 * k;
                        u = dsops_bf16_to_f32(ar[0]);
                        w = dsops_bf16_to_f32(ar[1]);
                    }
                    __m256 ub = _mm256_set1_ps(u), wb = _mm256_set1_ps(w);
                    acc[r][0] = _mm256_fmadd_ps(wb, o0, _mm256_fmadd_ps(ub, e0, acc[r][0]));
                    acc[r][1] = _mm256_fmadd_ps(wb, o1, _mm256_fmadd_ps(ub, e1, acc[r][1]));
                }
            }
            __m256 sc = _mm256_set1_ps(scale);
            for (int r = 0; r < rt; r++) {
                float *cr = c + (size_t)(r0 + r) * c_stride + (size_t)j * 16;
                _mm256_storeu_ps(cr, _mm256_mul_ps(acc[r][0], sc));
                _mm256_storeu_ps(cr + 8, _mm256_mul_ps(acc[r][1], sc));
            }
        }
    }
}

static void qk_scores__avx2(const uint16_t *q, size_t q_stride, int nh, const uint16_t *kt, int ntiles, int dpairs,
                            float scale, float *s, size_t s_stride)
{
    pair_fma(q, 0, q_stride, nh, kt, (size_t)dpairs * 32, ntiles, dpairs, scale, s, s_stride);
}

static void pv_bf16__avx2(const uint16_t *p, size_t p_stride, int nh, const uint16_t *vp, size_t vp_block_stride,
                          int npairs, int dv_blocks, float *o, size_t o_stride)
{
    pair_fma(p, 0, p_stride, nh, vp, vp_block_stride, dv_blocks, npairs, 1.0f, o, o_stride);
}

static void pv_fp32__avx2(const float *p, size_t p_stride, int nh, const uint16_t *vp, size_t vp_block_stride,
                          int npairs, int dv_blocks, float *o, size_t o_stride)
{
    pair_fma(p, 1, p_stride, nh, vp, vp_block_stride, dv_blocks, npairs, 1.0f, o, o_stride);
}

INLINE __m256 exp256(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(DSOPS_EXP_MIN)), _mm256_set1_ps(DSOPS_EXP_MAX));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(DSOPS_EXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(DSOPS_EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(DSOPS_EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(DSOPS_EXP_C7);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(DSOPS_EXP_C6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(DSOPS_EXP_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(DSOPS_EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(DSOPS_EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(DSOPS_EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
}

static float exp_sum__avx2(const float *s, int n, float m, float *w)
{
    __m256 sum = _mm256_setzero_ps(), mv = _mm256_set1_ps(m);
    int e = 0;
    for (; e + 8 <= n; e += 8) {
        __m256 x = exp256(_mm256_sub_ps(_mm256_loadu_ps(s + e), mv));
        _mm256_storeu_ps(w + e, x);
        sum = _mm256_add_ps(sum, x);
    }
    if (e < n) {
        float tmp[8] = {0};
        memcpy(tmp, s + e, (size_t)(n - e) * 4);
        __m256 x = exp256(_mm256_sub_ps(_mm256_loadu_ps(tmp), mv));
        _mm256_storeu_ps(tmp, x);
        for (int i = n - e; i < 8; i++)
            tmp[i] = 0.0f;
        memcpy(w + e, tmp, (size_t)(n - e) * 4);
        sum = _mm256_add_ps(sum, _mm256_loadu_ps(tmp));
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, sum);
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

const dsops_attention_kernels dsops_attention_kernels__avx2 = {
    .qk = qk_scores__avx2,
    .pv_bf16 = pv_bf16__avx2,
    .pv_fp32 = pv_fp32__avx2,
    .exp_sum = exp_sum__avx2,
};
