/* Attention-core micro-kernels for AVX-512 with AVX512_BF16 (vdpbf16ps): QK with 16 keys per
 * vector lane group, PV with 16 value dims per vector, and the softmax helpers. */
#include <immintrin.h>
#include <math.h>

#include "dispatch.h"
#include "../common/exp-simd.h"
#include "../common/bf16-avx512.h"
#include "../common/transpose-avx512.h"
#include "internal.h"

#define INLINE static inline __attribute__((always_inline))

INLINE __m512bh bcst_pair(const uint16_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return (__m512bh)_mm512_set1_epi32(v);
}

/* ---- QK: register tile of HR heads x ER key tiles (16 keys each) ---------------------------- */

/* QK and PV are the same product on the packed layouts:
 *     c[r][16j + l] = scale * sum over steps k of  a[r][2k] * b[j][k][l][0] + a[r][2k+1] * b[j][k][l][1]
 * with a = query rows (QK) or probability rows (PV), pair k a 32-bit broadcast, and b = key tiles (QK)
 * or value blocks (PV), one 64-byte vector per (j, k). One register tile holds RT rows x JT vectors.
 *
 * Tile shapes measured on Zen 5 (docs/PERFORMANCE.md): 4 rows x 6 key tiles for QK, 6 rows x 4 value
 * blocks for PV. Leftover rows use tiles of 4, 2 and 1; a row's arithmetic is the same in any tile,
 * so results do not depend on how rows are grouped. */
#define TILE_MAX_ROWS 8
#define TILE_MAX_VECS 8

INLINE void pair_dot_tile(const uint16_t *a, size_t a_stride, const int RT, const uint16_t *b, size_t b_stride,
                          const int JT, int steps, float scale, float *c, size_t c_stride)
{
    __m512 acc[TILE_MAX_ROWS][TILE_MAX_VECS];
#pragma GCC unroll 16
    for (int r = 0; r < RT; r++)
#pragma GCC unroll 16
        for (int j = 0; j < JT; j++)
            acc[r][j] = _mm512_setzero_ps();
    for (int k = 0; k < steps; k++) {
        __m512bh v[TILE_MAX_VECS];
#pragma GCC unroll 16
        for (int j = 0; j < JT; j++)
            v[j] = (__m512bh)_mm512_loadu_si512(b + (size_t)j * b_stride + (size_t)k * 32);
#pragma GCC unroll 16
        for (int r = 0; r < RT; r++) {
            __m512bh pair = bcst_pair(a + (size_t)r * a_stride + 2 * k);
#pragma GCC unroll 16
            for (int j = 0; j < JT; j++)
                acc[r][j] = _mm512_dpbf16_ps(acc[r][j], pair, v[j]);
        }
    }
    __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 16
    for (int r = 0; r < RT; r++)
#pragma GCC unroll 16
        for (int j = 0; j < JT; j++)
            _mm512_storeu_ps(c + (size_t)r * c_stride + (size_t)j * 16, _mm512_mul_ps(acc[r][j], sc));
}

/* All rows against JT vectors of b: those vectors (JT * steps * 64 bytes) stay in L1/L2 while every
 * row passes. */
INLINE void pair_dot_rows(const uint16_t *a, size_t a_stride, int rows, const int RT, const uint16_t *b,
                          size_t b_stride, const int JT, int steps, float scale, float *c, size_t c_stride)
{
    int r = 0;
    for (; r + RT <= rows; r += RT)
        pair_dot_tile(a + r * a_stride, a_stride, RT, b, b_stride, JT, steps, scale, c + r * c_stride, c_stride);
    for (; r + 4 <= rows; r += 4)
        pair_dot_tile(a + r * a_stride, a_stride, 4, b, b_stride, JT, steps, scale, c + r * c_stride, c_stride);
    for (; r + 2 <= rows; r += 2)
        pair_dot_tile(a + r * a_stride, a_stride, 2, b, b_stride, JT, steps, scale, c + r * c_stride, c_stride);
    for (; r < rows; r++)
        pair_dot_tile(a + r * a_stride, a_stride, 1, b, b_stride, JT, steps, scale, c + r * c_stride, c_stride);
}

/* The whole product, vectors of b in groups of JT (outer) so each group is reused by all rows. */
INLINE void pair_dot(const uint16_t *a, size_t a_stride, int rows, const int RT, const uint16_t *b, size_t b_stride,
                     int nvec, const int JT, int steps, float scale, float *c, size_t c_stride)
{
    int j = 0;
    for (; j + JT <= nvec; j += JT)
        pair_dot_rows(a, a_stride, rows, RT, b + j * b_stride, b_stride, JT, steps, scale, c + j * 16, c_stride);
    for (; j < nvec; j++)
        pair_dot_rows(a, a_stride, rows, RT, b + j * b_stride, b_stride, 1, steps, scale, c + j * 16, c_stride);
}

static void qk_scores__avx512bf16(const uint16_t *q, size_t q_stride, int nh, const uint16_t *kt, int ntiles,
                                  int dpairs, float scale, float *s, size_t s_stride)
{
    pair_dot(q, q_stride, nh, 4, kt, (size_t)dpairs * 32, ntiles, 6, dpairs, scale, s, s_stride);
}

static void pv_bf16__avx512bf16(const uint16_t *p, size_t p_stride, int nh, const uint16_t *vp,
                                size_t vp_block_stride, int npairs, int dv_blocks, float *o, size_t o_stride)
{
    /* scale 1 is exact: the same sums as without it */
    pair_dot(p, p_stride, nh, 6, vp, vp_block_stride, dv_blocks, 4, npairs, 1.0f, o, o_stride);
}

/* PV with fp32 probabilities: the bf16 value pairs are widened (even element = low half). */
static void pv_fp32__avx512bf16(const float *p, size_t p_stride, int nh, const uint16_t *vp, size_t vp_block_stride,
                                int npairs, int dv_blocks, float *o, size_t o_stride)
{
    const __m512i hi_mask = _mm512_set1_epi32((int)0xffff0000u);
    for (int h0 = 0; h0 < nh; h0 += 4) {
        int hr = nh - h0 < 4 ? nh - h0 : 4;
        for (int j = 0; j < dv_blocks; j++) {
            __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
            const uint16_t *vb = vp + (size_t)j * vp_block_stride;
            for (int pr = 0; pr < npairs; pr++) {
                __m512i x = _mm512_loadu_si512(vb + (size_t)pr * 32);
                __m512 v0 = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
                __m512 v1 = _mm512_castsi512_ps(_mm512_and_si512(x, hi_mask));
                for (int h = 0; h < hr; h++) {
                    const float *ph = p + (size_t)(h0 + h) * p_stride + 2 * pr;
                    acc[h] = _mm512_fmadd_ps(_mm512_set1_ps(ph[0]), v0, acc[h]);
                    acc[h] = _mm512_fmadd_ps(_mm512_set1_ps(ph[1]), v1, acc[h]);
                }
            }
            for (int h = 0; h < hr; h++)
                _mm512_storeu_ps(o + (size_t)(h0 + h) * o_stride + (size_t)j * 16, acc[h]);
        }
    }
}

/* ---- softmax helpers ------------------------------------------------------------------------ */

INLINE __mmask16 tail_mask(int left) { return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u); }

/* max_ps does not keep a NaN it has met (a later max replaces it), so NaN lanes are collected in a mask. */
static float row_max__avx512bf16(const float *s, int n)
{
    __m512 m = _mm512_set1_ps(-INFINITY);
    __mmask16 nan = 0;
    int e = 0;
    for (; e + 16 <= n; e += 16) {
        __m512 x = _mm512_loadu_ps(s + e);
        m = _mm512_max_ps(m, x);
        nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    }
    if (e < n) {
        __m512 x = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail_mask(n - e), s + e);
        m = _mm512_max_ps(m, x);
        nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    }
    return nan ? NAN : _mm512_reduce_max_ps(m);
}

static float exp_sum__avx512bf16(const float *s, int n, float m, float *w)
{
    __m512 sum = _mm512_setzero_ps(), mv = _mm512_set1_ps(m);
    int e = 0;
    for (; e + 16 <= n; e += 16) {
        __m512 x = exp512(_mm512_sub_ps(_mm512_loadu_ps(s + e), mv));
        _mm512_storeu_ps(w + e, x);
        sum = _mm512_add_ps(sum, x);
    }
    if (e < n) {
        __mmask16 k = tail_mask(n - e);
        __m512 x = _mm512_maskz_mov_ps(k, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + e), mv)));
        _mm512_mask_storeu_ps(w + e, k, x);
        sum = _mm512_add_ps(sum, x);
    }
    return _mm512_reduce_add_ps(sum);
}

static void scale_to_bf16__avx512bf16(const float *w, int n, float r, uint16_t *p)
{
    __m512 rv = _mm512_set1_ps(r);
    int e = 0;
    for (; e + 16 <= n; e += 16)
        _mm256_storeu_si256((__m256i *)(p + e), bf16_rne(_mm512_mul_ps(_mm512_loadu_ps(w + e), rv)));
    if (e < n) {
        __mmask16 k = tail_mask(n - e);
        _mm256_mask_storeu_epi16(p + e, k, bf16_rne(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, w + e), rv)));
    }
}

static void scale_to_f32__avx512bf16(const float *w, int n, float r, float *p)
{
    __m512 rv = _mm512_set1_ps(r);
    int e = 0;
    for (; e + 16 <= n; e += 16)
        _mm512_storeu_ps(p + e, _mm512_mul_ps(_mm512_loadu_ps(w + e), rv));
    if (e < n) {
        __mmask16 k = tail_mask(n - e);
        _mm512_mask_storeu_ps(p + e, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, w + e), rv));
    }
}

static void store_bf16__avx512bf16(const float *src, int n, float r, uint16_t *dst)
{
    scale_to_bf16__avx512bf16(src, n, r, dst);
}

static void dequant_int8__avx512bf16(const int8_t *q, const void *scales, int n, uint16_t *dst)
{
    for (int g = 0; g < n / 128; g++) {
        float scale;
        memcpy(&scale, (const char *)scales + 4 * g, 4);
        __m512 sv = _mm512_set1_ps(scale);
#pragma GCC unroll 8
        for (int c = 128 * g; c < 128 * g + 128; c += 16) {
            __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + c))));
            _mm256_storeu_si256((__m256i *)(dst + c), bf16_rne(_mm512_mul_ps(v, sv)));
        }
    }
}

/* 16 e4m3 bytes times scale (as the AVX2 tier: exponent rebiased, subnormals through an integer conversion,
 * the sign, the NaN byte a quiet NaN with its sign). */
INLINE __m512 e4m3_times(__m128i bytes, __m512 scale)
{
    const __m512i v = _mm512_cvtepu8_epi32(bytes), mag = _mm512_and_si512(v, _mm512_set1_epi32(0x7f));
    const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(v, _mm512_set1_epi32(0x80)), 24);
    __m512 f = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_slli_epi32(mag, 20), _mm512_set1_epi32(120 << 23)));
    f = _mm512_mask_mul_ps(f, _mm512_cmplt_epi32_mask(mag, _mm512_set1_epi32(8)), _mm512_cvtepi32_ps(mag),
                           _mm512_set1_ps(0x1p-9f));
    f = _mm512_mul_ps(_mm512_or_ps(f, _mm512_castsi512_ps(sign)), scale);
    /* the NaN byte: a quiet NaN with its sign, whatever the scale */
    return _mm512_mask_mov_ps(f, _mm512_cmpeq_epi32_mask(mag, _mm512_set1_epi32(0x7f)),
                              _mm512_castsi512_ps(_mm512_or_si512(sign, _mm512_set1_epi32(0x7fc00000))));
}

static void dequant_e4m3__avx512bf16(const uint8_t *q, const void *scales, int group, int n, uint16_t *dst)
{
    for (int g = 0; g < n / group; g++) {
        float scale;
        memcpy(&scale, (const char *)scales + 4 * g, 4);
        const __m512 sv = _mm512_set1_ps(scale);
        const bool exact = dsops_e4m3_products_exact(scale); /* bf16 = the upper half of each product */
#pragma GCC unroll 4
        for (int c = group * g; c < group * g + group; c += 16) {
            const __m512 v = e4m3_times(_mm_loadu_si128((const __m128i *)(q + c)), sv);
            _mm256_storeu_si256((__m256i *)(dst + c),
                                exact ? _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16))
                                      : bf16_rne(v));
        }
    }
}

/* ---- packing: 16 key rows -> one Kt tile (16x16 dword transposes) and 8 Vp pairs ------------- */

static void pack_keys__avx512bf16(const uint16_t *rows, size_t row_stride, int dpairs, int dv, uint16_t *kt_tile,
                                  uint16_t *vp, size_t vp_block_stride)
{
    int dp0 = 0;
    for (; dp0 + 16 <= dpairs; dp0 += 16) {
        __m512i r[16];
        for (int e = 0; e < 16; e++)
            r[e] = _mm512_loadu_si512(rows + (size_t)e * row_stride + 2 * dp0);
        transpose16x16_epi32(r);
        for (int k = 0; k < 16; k++)
            _mm512_storeu_si512(kt_tile + (size_t)(dp0 + k) * 32, r[k]);
    }
    for (int dp = dp0; dp < dpairs; dp++)
        for (int e = 0; e < 16; e++)
            memcpy(kt_tile + (size_t)dp * 32 + 2 * e, rows + (size_t)e * row_stride + 2 * dp, 4);

    /* Vp: interleave rows 2pr and 2pr+1, 16 dims per block */
    const __m512i interleave = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7,
                                                38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    int dv_blocks = (dv + 15) / 16;
    for (int blk = 0; blk < dv_blocks; blk++) {
        int left = dv - blk * 16;
        __mmask16 k = tail_mask(left);
        for (int pr = 0; pr < 8; pr++) {
            const uint16_t *ra = rows + (size_t)(2 * pr) * row_stride + blk * 16, *rb = ra + row_stride;
            /* plain loads for whole blocks: masked loads are much slower on some cores */
            __m256i a = left >= 16 ? _mm256_loadu_si256((const __m256i *)ra) : _mm256_maskz_loadu_epi16(k, ra);
            __m256i b = left >= 16 ? _mm256_loadu_si256((const __m256i *)rb) : _mm256_maskz_loadu_epi16(k, rb);
            __m512i x = _mm512_permutex2var_epi16(_mm512_castsi256_si512(a), interleave, _mm512_castsi256_si512(b));
            _mm512_storeu_si512(vp + (size_t)blk * vp_block_stride + (size_t)pr * 32, x);
        }
    }
}

const dsops_attention_kernels dsops_attention_kernels__avx512bf16 = {
    .qk = qk_scores__avx512bf16,
    .pv_bf16 = pv_bf16__avx512bf16,
    .pv_fp32 = pv_fp32__avx512bf16,
    .row_max = row_max__avx512bf16,
    .exp_sum = exp_sum__avx512bf16,
    .scale_to_bf16 = scale_to_bf16__avx512bf16,
    .scale_to_f32 = scale_to_f32__avx512bf16,
    .dequant_int8 = dequant_int8__avx512bf16,
    .dequant_e4m3 = dequant_e4m3__avx512bf16,
    .pack_keys = pack_keys__avx512bf16,
    .store_bf16 = store_bf16__avx512bf16,
};
