/* Attention-core micro-kernels for AVX2 + FMA (every entry of the table), on the bf16 Kt / Vp layouts
 * of attention.h. bf16 pairs are widened to fp32 in registers (even element = low half of each
 * dword) and multiplied with fp32 FMAs; packing, dequantisation, softmax helpers and bf16 rounding are
 * vectorised and bit-identical to the scalar tier.
 * The bf16 layout, not keys widened to fp32 at packing: on Zen 3 QK and PV already run at ~95 % of the
 * fp32 FMA peak with the widening in registers, and fp32 keys doubled the bytes packed and the Vp that
 * PV streams, which measured 2-10 % slower over the whole operator (docs/PERFORMANCE.md). */
#include <immintrin.h>
#include <math.h>

#include "../common/pairs-avx2.h"
#include "dispatch.h"
#include "../common/exp-avx2.h"
#include "internal.h"

#define INLINE static inline __attribute__((always_inline))

/* fp32 -> bf16 bits in each dword (ties to even, NaN quietened with its sign), as dsops_bf16_round_bits. */
INLINE __m256i round_bf16(__m256 f)
{
    __m256i u = _mm256_castps_si256(f);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i rn = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff))), 16);
    __m256i qn = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(rn, qn, nan);
}

/* 16 fp32 -> 16 bf16 stored at dst. */
INLINE void store16_bf16(uint16_t *dst, __m256 lo, __m256 hi)
{
    __m256i p = _mm256_packus_epi32(round_bf16(lo), round_bf16(hi)); /* lanes: lo0-3 hi0-3 lo4-7 hi4-7 */
    _mm256_storeu_si256((__m256i *)dst, _mm256_permute4x64_epi64(p, _MM_SHUFFLE(3, 1, 2, 0)));
}

/* ---- QK and PV ------------------------------------------------------------------------------------
 * Both are the pair product of common/pairs-avx2.h on the packed layouts (see attention-avx512bf16.c):
 *     c[r][16j + l] = scale * sum over k of  a[r][2k] * b[j][k][l][0] + a[r][2k+1] * b[j][k][l][1]
 * The a rows (queries or weights) are widened to fp32 once per block of KBLK pairs, so the tile broadcasts
 * them from memory; blocks of k continue from the unscaled partial sums stored in c. */
#define TILE_H PAIRS_TILE_H
#define KBLK 512

/* All nvec column blocks for H rows and pairs [k0, k0 + ks); a points at pair k0 of row 0. */
INLINE void rows_block(const float *a, size_t as, const int H, const uint16_t *b, size_t b_stride, int nvec, int k0,
                       int ks, int first, int last, float scale, float *c, size_t cs)
{
    for (int j = 0; j < nvec; j++)
        pairs_tile(a, as, H, b + (size_t)j * b_stride + (size_t)k0 * 32, ks, first, last, scale, c + (size_t)j * 16,
                   cs);
}

static void rows_block_h(const float *a, size_t as, int h, const uint16_t *b, size_t b_stride, int nvec, int k0,
                         int ks, int first, int last, float scale, float *c, size_t cs)
{
    switch (h) {
    case 4: rows_block(a, as, 4, b, b_stride, nvec, k0, ks, first, last, scale, c, cs); break;
    case 3: rows_block(a, as, 3, b, b_stride, nvec, k0, ks, first, last, scale, c, cs); break;
    case 2: rows_block(a, as, 2, b, b_stride, nvec, k0, ks, first, last, scale, c, cs); break;
    default: rows_block(a, as, 1, b, b_stride, nvec, k0, ks, first, last, scale, c, cs); break;
    }
}

static void pair_product(const void *a, int a_is_f32, size_t a_stride, int rows, const uint16_t *b, size_t b_stride,
                         int nvec, int steps, float scale, float *c, size_t c_stride)
{
    _Alignas(32) float buf[TILE_H * 2 * KBLK];
    for (int r0 = 0; r0 < rows; r0 += TILE_H) {
        int h = rows - r0 < TILE_H ? rows - r0 : TILE_H;
        for (int k0 = 0; k0 < steps || k0 == 0; k0 += KBLK) { /* steps == 0 still writes zeros */
            int ks = steps - k0 < KBLK ? steps - k0 : KBLK;
            const float *ap;
            size_t as;
            if (a_is_f32) {
                ap = (const float *)a + (size_t)r0 * a_stride + 2 * (size_t)k0;
                as = a_stride;
            } else {
                for (int r = 0; r < h; r++) {
                    const uint16_t *src = (const uint16_t *)a + (size_t)(r0 + r) * a_stride + 2 * (size_t)k0;
                    float *dst = buf + (size_t)r * 2 * KBLK;
                    int i = 0;
                    for (; i + 8 <= 2 * ks; i += 8)
                        _mm256_store_ps(dst + i, pairs_widen8(src + i));
                    for (; i < 2 * ks; i++)
                        dst[i] = dsops_bf16_value(src[i]);
                }
                ap = buf;
                as = 2 * KBLK;
            }
            rows_block_h(ap, as, h, b, b_stride, nvec, k0, ks, k0 == 0, k0 + ks >= steps, scale,
                         c + (size_t)r0 * c_stride, c_stride);
        }
    }
}

static void qk_scores__avx2(const uint16_t *q, size_t q_stride, int nh, const uint16_t *kt, int ntiles, int dpairs,
                            float scale, float *s, size_t s_stride)
{
    pair_product(q, 0, q_stride, nh, kt, (size_t)dpairs * 32, ntiles, dpairs, scale, s, s_stride);
}

static void pv_bf16__avx2(const uint16_t *p, size_t p_stride, int nh, const uint16_t *vp, size_t vp_block_stride,
                          int npairs, int dv_blocks, float *o, size_t o_stride)
{
    pair_product(p, 0, p_stride, nh, vp, vp_block_stride, dv_blocks, npairs, 1.0f, o, o_stride);
}

static void pv_fp32__avx2(const float *p, size_t p_stride, int nh, const uint16_t *vp, size_t vp_block_stride,
                          int npairs, int dv_blocks, float *o, size_t o_stride)
{
    pair_product(p, 1, p_stride, nh, vp, vp_block_stride, dv_blocks, npairs, 1.0f, o, o_stride);
}

/* ---- softmax helpers ------------------------------------------------------------------------------ */

/* max_ps(x, m) keeps m when x is NaN, so NaN is tracked apart: one unordered compare of the two vectors
 * of a step flags a NaN in either of them. */
static float row_max__avx2(const float *s, int n)
{
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0, nan = _mm256_setzero_ps();
    int e = 0;
    for (; e + 16 <= n; e += 16) {
        __m256 x0 = _mm256_loadu_ps(s + e), x1 = _mm256_loadu_ps(s + e + 8);
        m0 = _mm256_max_ps(x0, m0);
        m1 = _mm256_max_ps(x1, m1);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(x0, x1, _CMP_UNORD_Q));
    }
    if (_mm256_movemask_ps(nan))
        return NAN;
    m0 = _mm256_max_ps(m1, m0);
    float lanes[8];
    _mm256_storeu_ps(lanes, m0);
    float m = -INFINITY;
    for (int i = 0; i < 8; i++)
        m = lanes[i] > m ? lanes[i] : m;
    for (; e < n; e++) {
        if (isnan(s[e]))
            return NAN;
        m = s[e] > m ? s[e] : m;
    }
    return m;
}

static float exp_sum__avx2(const float *s, int n, float m, float *w)
{
    __m256 sum = _mm256_setzero_ps(), mv = _mm256_set1_ps(m);
    int e = 0;
    for (; e + 8 <= n; e += 8) {
        __m256 x = dsops_exp8_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + e), mv));
        _mm256_storeu_ps(w + e, x);
        sum = _mm256_add_ps(sum, x);
    }
    if (e < n) {
        float tmp[8] = {0};
        memcpy(tmp, s + e, (size_t)(n - e) * 4);
        __m256 x = dsops_exp8_avx2(_mm256_sub_ps(_mm256_loadu_ps(tmp), mv));
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

static void scale_to_bf16__avx2(const float *w, int n, float r, uint16_t *p)
{
    __m256 rv = _mm256_set1_ps(r);
    int e = 0;
    for (; e + 16 <= n; e += 16)
        store16_bf16(p + e, _mm256_mul_ps(_mm256_loadu_ps(w + e), rv), _mm256_mul_ps(_mm256_loadu_ps(w + e + 8), rv));
    for (; e < n; e++)
        p[e] = dsops_bf16_round_bits(w[e] * r);
}

static void scale_to_f32__avx2(const float *w, int n, float r, float *p)
{
    __m256 rv = _mm256_set1_ps(r);
    int e = 0;
    for (; e + 8 <= n; e += 8)
        _mm256_storeu_ps(p + e, _mm256_mul_ps(_mm256_loadu_ps(w + e), rv));
    for (; e < n; e++)
        p[e] = w[e] * r;
}

/* ---- gathering ------------------------------------------------------------------------------------ */

/* Rounding without the NaN case (Inf rounds to itself), for products that cannot be NaN. */
INLINE __m256i round_bf16_no_nan(__m256 f)
{
    __m256i u = _mm256_castps_si256(f);
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    return _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff))), 16);
}

static void dequant_int8__avx2(const int8_t *q, const void *scales, int n, uint16_t *dst)
{
    for (int g = 0; g < n / 128; g++) {
        float scale;
        memcpy(&scale, (const char *)scales + 4 * g, 4);
        __m256 sv = _mm256_set1_ps(scale);
        const int8_t *qg = q + 128 * g;
        uint16_t *dg = dst + 128 * g;
        if (isfinite(scale)) { /* an int8 times a finite scale is never NaN */
            for (int c = 0; c < 128; c += 16) {
                __m128i b = _mm_loadu_si128((const __m128i *)(qg + c));
                __m256 lo = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), sv);
                __m256 hi = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(b, 8))), sv);
                __m256i p = _mm256_packus_epi32(round_bf16_no_nan(lo), round_bf16_no_nan(hi));
                _mm256_storeu_si256((__m256i *)(dg + c), _mm256_permute4x64_epi64(p, _MM_SHUFFLE(3, 1, 2, 0)));
            }
            continue;
        }
        for (int c = 0; c < 128; c += 16) {
            __m128i b = _mm_loadu_si128((const __m128i *)(qg + c));
            __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
            __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(b, 8)));
            store16_bf16(dg + c, _mm256_mul_ps(lo, sv), _mm256_mul_ps(hi, sv));
        }
    }
}

/* 8 e4m3 bytes (zero-extended to dwords) times scale: normal values by rebiasing the exponent, subnormals
 * (E = 0) as M * 2^-9 through an integer conversion (no fp32 subnormal is ever formed), then the sign. */
INLINE __m256 e4m3_times(__m256i v, __m256 scale)
{
    const __m256i mag = _mm256_and_si256(v, _mm256_set1_epi32(0x7f));
    __m256 f = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(mag, 20), _mm256_set1_epi32(120 << 23)));
    const __m256 sub = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(8), mag));
    f = _mm256_blendv_ps(f, _mm256_mul_ps(_mm256_cvtepi32_ps(mag), _mm256_set1_ps(0x1p-9f)), sub);
    f = _mm256_or_ps(f, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0x80)), 24)));
    /* the NaN byte: a quiet NaN with its sign, whatever the scale (set after the product, whose NaN operand
     * order the compiler may swap) */
    const __m256 nan = _mm256_castsi256_ps(_mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7f)));
    const __m256 qnan = _mm256_or_ps(_mm256_and_ps(f, _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u))),
                                     _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)));
    return _mm256_blendv_ps(_mm256_mul_ps(f, scale), qnan, nan);
}

static void dequant_e4m3__avx2(const uint8_t *q, const void *scales, int group, int n, uint16_t *dst)
{
    for (int g = 0; g < n / group; g++) {
        float scale;
        memcpy(&scale, (const char *)scales + 4 * g, 4);
        const __m256 sv = _mm256_set1_ps(scale);
        const uint8_t *qg = q + group * g;
        uint16_t *dg = dst + group * g;
        const bool exact = dsops_e4m3_products_exact(scale); /* bf16 = the upper half of each product */
        for (int c = 0; c < group; c += 16) {
            __m128i b = _mm_loadu_si128((const __m128i *)(qg + c));
            __m256 lo = e4m3_times(_mm256_cvtepu8_epi32(b), sv);
            __m256 hi = e4m3_times(_mm256_cvtepu8_epi32(_mm_srli_si128(b, 8)), sv);
            if (exact) {
                __m256i p = _mm256_packus_epi32(_mm256_srli_epi32(_mm256_castps_si256(lo), 16),
                                                _mm256_srli_epi32(_mm256_castps_si256(hi), 16));
                _mm256_storeu_si256((__m256i *)(dg + c), _mm256_permute4x64_epi64(p, _MM_SHUFFLE(3, 1, 2, 0)));
            } else {
                store16_bf16(dg + c, lo, hi);
            }
        }
    }
}

/* Kt: the rows as dword (bf16 pair) columns, transposed in 8x8 blocks: block (keys e0..e0+7, pairs
 * dp..dp+7) lands as 8 half-rows of the tile. Vp: rows 2pr and 2pr+1 interleaved element-wise. */
static void pack_keys__avx2(const uint16_t *rows, size_t row_stride, int dpairs, int dv, uint16_t *kt_tile,
                            uint16_t *vp, size_t vp_block_stride)
{
    pairs_pack16(rows, row_stride, dpairs, kt_tile);
    int dv_blocks = (dv + DSOPS_VP_LANES - 1) / DSOPS_VP_LANES;
    for (int blk = 0; blk < dv_blocks; blk++) {
        int d0 = blk * DSOPS_VP_LANES;
        for (int pr = 0; pr < DSOPS_KT_LANES / 2; pr++) {
            uint16_t *v = vp + (size_t)blk * vp_block_stride + (size_t)pr * 32;
            const uint16_t *ra = rows + (size_t)(2 * pr) * row_stride, *rb = ra + row_stride;
            if (d0 + DSOPS_VP_LANES <= dv) {
                __m256i a = _mm256_loadu_si256((const __m256i *)(ra + d0));
                __m256i b = _mm256_loadu_si256((const __m256i *)(rb + d0));
                __m256i lo = _mm256_unpacklo_epi16(a, b), hi = _mm256_unpackhi_epi16(a, b);
                _mm256_storeu_si256((__m256i *)v, _mm256_permute2x128_si256(lo, hi, 0x20));
                _mm256_storeu_si256((__m256i *)(v + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
            } else {
                for (int i = 0; i < DSOPS_VP_LANES; i++) {
                    int d = d0 + i;
                    v[2 * i] = d < dv ? ra[d] : 0;
                    v[2 * i + 1] = d < dv ? rb[d] : 0;
                }
            }
        }
    }
}

static void store_bf16__avx2(const float *src, int n, float r, uint16_t *dst)
{
    __m256 rv = _mm256_set1_ps(r);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        store16_bf16(dst + i, _mm256_mul_ps(_mm256_loadu_ps(src + i), rv),
                     _mm256_mul_ps(_mm256_loadu_ps(src + i + 8), rv));
    for (; i < n; i++)
        dst[i] = dsops_bf16_round_bits(src[i] * r);
}

const dsops_attention_kernels dsops_attention_kernels__avx2 = {
    .qk = qk_scores__avx2,
    .pv_bf16 = pv_bf16__avx2,
    .pv_fp32 = pv_fp32__avx2,
    .row_max = row_max__avx2,
    .exp_sum = exp_sum__avx2,
    .scale_to_bf16 = scale_to_bf16__avx2,
    .scale_to_f32 = scale_to_f32__avx2,
    .dequant_int8 = dequant_int8__avx2,
    .dequant_e4m3 = dequant_e4m3__avx2,
    .pack_keys = pack_keys__avx2,
    .store_bf16 = store_bf16__avx2,
};
