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

/* QK: 4 heads x 16 keys (two 8-key halves) per register tile. */
static void qk_scores__avx2(const uint16_t *q, size_t q_stride, int nh, const uint16_t *kt, int ntiles, int dpairs,
                            float scale, float *s, size_t s_stride)
{
    for (int h0 = 0; h0 < nh; h0 += 4) {
        int hr = nh - h0 < 4 ? nh - h0 : 4;
        for (int tile = 0; tile < ntiles; tile++) {
            const uint16_t *kb = kt + (size_t)tile * dpairs * 32;
            __m256 acc[4][2];
            for (int h = 0; h < 4; h++)
                acc[h][0] = acc[h][1] = _mm256_setzero_ps();
            for (int dp = 0; dp < dpairs; dp++) {
                __m256i k0 = _mm256_loadu_si256((const __m256i *)(kb + (size_t)dp * 32));
                __m256i k1 = _mm256_loadu_si256((const __m256i *)(kb + (size_t)dp * 32 + 16));
                __m256 e0 = widen_even(k0), o0 = widen_odd(k0), e1 = widen_even(k1), o1 = widen_odd(k1);
                for (int h = 0; h < hr; h++) {
                    const uint16_t *qh = q + (size_t)(h0 + h) * q_stride + 2 * dp;
                    __m256 qa = _mm256_set1_ps(dsops_bf16_to_f32(qh[0])), qb = _mm256_set1_ps(dsops_bf16_to_f32(qh[1]));
                    acc[h][0] = _mm256_fmadd_ps(qb, o0, _mm256_fmadd_ps(qa, e0, acc[h][0]));
                    acc[h][1] = _mm256_fmadd_ps(qb, o1, _mm256_fmadd_ps(qa, e1, acc[h][1]));
                }
            }
            __m256 sc = _mm256_set1_ps(scale);
            for (int h = 0; h < hr; h++) {
                float *sr = s + (size_t)(h0 + h) * s_stride + (size_t)tile * 16;
                _mm256_storeu_ps(sr, _mm256_mul_ps(acc[h][0], sc));
                _mm256_storeu_ps(sr + 8, _mm256_mul_ps(acc[h][1], sc));
            }
        }
    }
}

/* PV: 4 heads x 16 dims per register tile; p is bf16 (widened) or fp32. */
INLINE void pv_generic(const void *p, int p_is_f32, size_t p_stride, int nh, const uint16_t *vp,
                       size_t vp_block_stride, int npairs, int dv_blocks, float *o, size_t o_stride)
{
    for (int h0 = 0; h0 < nh; h0 += 4) {
        int hr = nh - h0 < 4 ? nh - h0 : 4;
        for (int j = 0; j < dv_blocks; j++) {
            const uint16_t *vb = vp + (size_t)j * vp_block_stride;
            __m256 acc[4][2];
            for (int h = 0; h < 4; h++)
                acc[h][0] = acc[h][1] = _mm256_setzero_ps();
            for (int pr = 0; pr < npairs; pr++) {
                __m256i x0 = _mm256_loadu_si256((const __m256i *)(vb + (size_t)pr * 32));
                __m256i x1 = _mm256_loadu_si256((const __m256i *)(vb + (size_t)pr * 32 + 16));
                __m256 e0 = widen_even(x0), o0 = widen_odd(x0), e1 = widen_even(x1), o1 = widen_odd(x1);
                for (int h = 0; h < hr; h++) {
                    float pa, pb;
                    if (p_is_f32) {
                        const float *ph = (const float *)p + (size_t)(h0 + h) * p_stride + 2 * pr;
                        pa = ph[0];
                        pb = ph[1];
                    } else {
                        const uint16_t *ph = (const uint16_t *)p + (size_t)(h0 + h) * p_stride + 2 * pr;
                        pa = dsops_bf16_to_f32(ph[0]);
                        pb = dsops_bf16_to_f32(ph[1]);
                    }
                    __m256 va = _mm256_set1_ps(pa), vb2 = _mm256_set1_ps(pb);
                    acc[h][0] = _mm256_fmadd_ps(vb2, o0, _mm256_fmadd_ps(va, e0, acc[h][0]));
                    acc[h][1] = _mm256_fmadd_ps(vb2, o1, _mm256_fmadd_ps(va, e1, acc[h][1]));
                }
            }
            for (int h = 0; h < hr; h++) {
                float *orow = o + (size_t)(h0 + h) * o_stride + (size_t)j * 16;
                _mm256_storeu_ps(orow, acc[h][0]);
                _mm256_storeu_ps(orow + 8, acc[h][1]);
            }
        }
    }
}

static void pv_bf16__avx2(const uint16_t *p, size_t p_stride, int nh, const uint16_t *vp, size_t vp_block_stride,
                          int npairs, int dv_blocks, float *o, size_t o_stride)
{
    pv_generic(p, 0, p_stride, nh, vp, vp_block_stride, npairs, dv_blocks, o, o_stride);
}

static void pv_fp32__avx2(const float *p, size_t p_stride, int nh, const uint16_t *vp, size_t vp_block_stride,
                          int npairs, int dv_blocks, float *o, size_t o_stride)
{
    pv_generic(p, 1, p_stride, nh, vp, vp_block_stride, npairs, dv_blocks, o, o_stride);
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

void dsops_attention_kernels_init__avx2(dsops_attention_kernels *k)
{
    k->qk = qk_scores__avx2;
    k->pv_bf16 = pv_bf16__avx2;
    k->pv_fp32 = pv_fp32__avx2;
    k->exp_sum = exp_sum__avx2;
}
