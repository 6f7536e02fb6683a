/* Lightning-indexer scoring for AVX2 + FMA + F16C, on the tile layouts of src/core/dispatch.h.
 * int8: the biased key bytes are widened to 16 bits and multiplied with vpmaddwd (exact); bf16:
 * pairs widened to fp32 and FMAs. The epilogue (ReLU, 2^-11, fp16 rounding, weight) matches the
 * other tiers; packing uses the scalar kernels. */
#include <immintrin.h>

#include "dispatch.h"
#include "internal.h"

/* Four 16-bit copies of one query quad, sign-extended: (q0, q1, q2, q3) x 4. */
static inline __m256i quad_s16(const int8_t *q)
{
    int32_t v;
    memcpy(&v, q, 4);
    return _mm256_cvtepi8_epi16(_mm_set1_epi32(v));
}

/* Adds RT heads' terms to sum[0..1] (16 keys) for one tile. */
static inline __attribute__((always_inline)) void int8_heads(const int8_t *q, size_t q_stride, const int32_t *qsum128,
                                                             const float *ws, const int RT, const uint8_t *tile,
                                                             int dquads, __m256 sum[2])
{
    __m256i acc[2][4];
    for (int r = 0; r < RT; r++)
        for (int g = 0; g < 4; g++)
            acc[r][g] = _mm256_setzero_si256();
    for (int k = 0; k < dquads; k++) {
        __m256i kv[4]; /* keys 4g .. 4g+3, 4 bytes each, as 16-bit values 0 .. 255 */
        for (int g = 0; g < 4; g++)
            kv[g] = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(tile + (size_t)k * 64 + g * 16)));
        for (int r = 0; r < RT; r++) {
            __m256i qq = quad_s16(q + (size_t)r * q_stride + 4 * k);
            for (int g = 0; g < 4; g++)
                acc[r][g] = _mm256_add_epi32(acc[r][g], _mm256_madd_epi16(kv[g], qq));
        }
    }
    const __m256 guard = _mm256_set1_ps(0x1p-11f);
    for (int r = 0; r < RT; r++) {
        __m256i corr = _mm256_set1_epi32(qsum128[r]);
        __m256 w = _mm256_set1_ps(ws[r]);
        for (int half = 0; half < 2; half++) {
            /* acc[g] holds two partial sums per key of keys 4g .. 4g+3; pair them up in key order */
            __m256i x = _mm256_hadd_epi32(acc[r][2 * half], acc[r][2 * half + 1]);
            x = _mm256_permute4x64_epi64(x, 0xd8);
            __m256i dot = _mm256_max_epi32(_mm256_sub_epi32(x, corr), _mm256_setzero_si256());
            __m256 d = _mm256_mul_ps(_mm256_cvtepi32_ps(dot), guard);
            d = _mm256_cvtph_ps(_mm256_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            sum[half] = _mm256_fmadd_ps(w, d, sum[half]);
        }
    }
}

static void score_int8__avx2(const int8_t *q, size_t q_stride, const int32_t *qsum128, const float *ws, int nh,
                             const uint8_t *tiles, int ntiles, int dquads, const float *kscale, float *I)
{
    for (int t = 0; t < ntiles; t++) {
        const uint8_t *tile = tiles + (size_t)t * dquads * 64;
        __m256 sum[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        int h = 0;
        for (; h + 2 <= nh; h += 2)
            int8_heads(q + h * q_stride, q_stride, qsum128 + h, ws + h, 2, tile, dquads, sum);
        for (; h < nh; h++)
            int8_heads(q + h * q_stride, q_stride, qsum128 + h, ws + h, 1, tile, dquads, sum);
        for (int half = 0; half < 2; half++)
            _mm256_storeu_ps(I + t * 16 + half * 8, _mm256_mul_ps(sum[half], _mm256_loadu_ps(kscale + t * 16 + half * 8)));
    }
}

static inline __m256 widen_even(__m256i x) { return _mm256_castsi256_ps(_mm256_slli_epi32(x, 16)); }
static inline __m256 widen_odd(__m256i x)
{
    return _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32((int)0xffff0000u)));
}

static void score_bf16__avx2(const uint16_t *q, size_t q_stride, const float *w, int nh, const uint16_t *tiles,
                             int ntiles, int dpairs, float *I)
{
    for (int t = 0; t < ntiles; t++) {
        const uint16_t *tile = tiles + (size_t)t * dpairs * 32;
        __m256 sum[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int h0 = 0; h0 < nh; h0 += 4) {
            int rt = nh - h0 < 4 ? nh - h0 : 4;
            __m256 acc[4][2];
            for (int r = 0; r < 4; r++)
                acc[r][0] = acc[r][1] = _mm256_setzero_ps();
            for (int k = 0; k < dpairs; k++) {
                __m256i x0 = _mm256_loadu_si256((const __m256i *)(tile + (size_t)k * 32));
                __m256i x1 = _mm256_loadu_si256((const __m256i *)(tile + (size_t)k * 32 + 16));
                __m256 e0 = widen_even(x0), o0 = widen_odd(x0), e1 = widen_even(x1), o1 = widen_odd(x1);
                for (int r = 0; r < rt; r++) {
                    const uint16_t *qr = q + (size_t)(h0 + r) * q_stride + 2 * k;
                    __m256 qa = _mm256_set1_ps(dsops_bf16_to_f32(qr[0])), qb = _mm256_set1_ps(dsops_bf16_to_f32(qr[1]));
                    acc[r][0] = _mm256_fmadd_ps(qb, o0, _mm256_fmadd_ps(qa, e0, acc[r][0]));
                    acc[r][1] = _mm256_fmadd_ps(qb, o1, _mm256_fmadd_ps(qa, e1, acc[r][1]));
                }
            }
            for (int r = 0; r < rt; r++) {
                __m256 wv = _mm256_set1_ps(w[h0 + r]);
                for (int half = 0; half < 2; half++)
                    sum[half] = _mm256_fmadd_ps(_mm256_max_ps(acc[r][half], _mm256_setzero_ps()), wv, sum[half]);
            }
        }
        _mm256_storeu_ps(I + t * 16, sum[0]);
        _mm256_storeu_ps(I + t * 16 + 8, sum[1]);
    }
}

const dsops_indexer_kernels dsops_indexer_kernels__avx2 = {
    .score_int8 = score_int8__avx2,
    .score_bf16 = score_bf16__avx2,
};
