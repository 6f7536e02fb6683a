/* hc kernels for AVX2 + FMA.
 *
 * mix: a register tile of 2 tokens x 6 mixes (12 ymm accumulators of 8 fp32 lanes; with the two token
 * vectors and one weight vector that is 15 of the 16 ymm registers; the odd-channel mask is read from L1).
 * A 256-bit load takes 16 bf16 channels of a stream; a shift left by 16 gives the 8 even channels as fp32
 * and a mask of the high halves the 8 odd ones, so hc_fn is packed with even and odd channels apart:
 *   [HC][nc][groups][2][6][8] floats (hc.h); chunk c of stream i, group g, half h, row j, lane l holds
 *   hc_fn[6g + j][i*H + 16c + 2l + h], zero beyond H and M.
 * The chunks of one stream go in blocks whose weights for all groups fit in 24 KiB (M 24: 16 chunks,
 * 256 channels): the block stays in L1 while every token pair passes over it, each pair's 2 x 512 bytes
 * of channels staying in L1 for all groups. Partial sums wait in `work` between blocks, so every lane
 * adds its chunks in ascending order whatever the group, thread or block size. Sums of squares use four
 * independent chains (even / odd channels of each token). The scalar tier (hc-scalar.c) runs the same
 * algorithm and layout with mul + add instead of FMA.
 *
 * weighted_sum and post_token: mul then add in the scalar tier's order (no FMA), so every tier gives the
 * same bits; bf16 rows are read 16 channels per load as even and odd halves and joined again by the
 * rounding (round to nearest even, NaN kept quiet). */
#include <immintrin.h>

#include "dispatch.h"
#include "internal.h"

#include "hc.h"

#define MIXES HC_MIXES
#define LANES HC_LANES
#define CHUNK HC_CHUNK
#define CHUNK_FLOATS HC_CHUNK_FLOATS
#define PAIR_FLOATS HC_PAIR_FLOATS

/* ---- bf16 in ymm registers (bit-identical to the library's scalar conversions) -------------------- */

/* Round to nearest even, the bf16 bits in the high halves of the lanes; NaN quiet with its sign. */
static inline __attribute__((always_inline)) __m256i rne_high(__m256 v)
{
    __m256i u = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(r, _mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), nan);
}

/* ---- mix ------------------------------------------------------------------------------------------- */

/* hc_fn is packed by the scalar tier's functions (the layout of hc.h, shared by both tiers) */

static const __m256i odd_mask = {(long long)0xffff0000ffff0000ull, (long long)0xffff0000ffff0000ull,
                                  (long long)0xffff0000ffff0000ull, (long long)0xffff0000ffff0000ull};

/* part[0..5] += x0 . w_j, part[6..11] += x1 . w_j (8 lanes each) over nc chunks; chunk c's weights
 * ([2][6][8], 64-byte aligned) at wp + c * wstride. x0 and x1 are each read twice per chunk (even, then
 * odd half) so that only two token vectors are live next to the 12 accumulators. */
static void tile(const uint16_t *x0, const uint16_t *x1, const float *wp, size_t wstride, int64_t nc, float *part)
{
    __m256 a[2 * MIXES];
#pragma GCC unroll 12
    for (int j = 0; j < 2 * MIXES; j++)
        a[j] = _mm256_loadu_ps(part + LANES * j);
    for (int64_t c = 0; c < nc; c++) {
        const float *w = wp + (size_t)c * wstride;
        const __m256i *odd = &odd_mask; /* read from L1 by each vpand: no register is left for it */
        __asm__("" : "+r"(odd));
        const __m256i *p0 = (const __m256i *)(x0 + CHUNK * c), *p1 = (const __m256i *)(x1 + CHUNK * c);
        __m256 v0 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_loadu_si256(p0), 16));
        __m256 v1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_loadu_si256(p1), 16));
#pragma GCC unroll 6
        for (int j = 0; j < MIXES; j++) {
            __m256 wj = _mm256_load_ps(w + LANES * j);
            __asm__("" : "+x"(wj)); /* one load for both tokens (2 loads / cycle at most) */
            a[j] = _mm256_fmadd_ps(v0, wj, a[j]);
            a[MIXES + j] = _mm256_fmadd_ps(v1, wj, a[MIXES + j]);
        }
        v0 = _mm256_castsi256_ps(_mm256_and_si256(_mm256_loadu_si256(p0), *odd));
        v1 = _mm256_castsi256_ps(_mm256_and_si256(_mm256_loadu_si256(p1), *odd));
#pragma GCC unroll 6
        for (int j = 0; j < MIXES; j++) {
            __m256 wj = _mm256_load_ps(w + LANES * (MIXES + j));
            __asm__("" : "+x"(wj));
            a[j] = _mm256_fmadd_ps(v0, wj, a[j]);
            a[MIXES + j] = _mm256_fmadd_ps(v1, wj, a[MIXES + j]);
        }
    }
#pragma GCC unroll 12
    for (int j = 0; j < 2 * MIXES; j++)
        _mm256_storeu_ps(part + LANES * j, a[j]);
}

/* Sums of squares of a token pair over nc chunks: s[0..7] even and s[8..15] odd channels of x0, s[16..31]
 * the same of x1; four independent FMA chains (one chain would wait on the FMA latency). */
static void squares(const uint16_t *x0, const uint16_t *x1, int64_t nc, float *s)
{
    const __m256i odd = _mm256_set1_epi32((int)0xffff0000u);
    __m256 e0 = _mm256_loadu_ps(s), o0 = _mm256_loadu_ps(s + 8), e1 = _mm256_loadu_ps(s + 16),
           o1 = _mm256_loadu_ps(s + 24);
    for (int64_t c = 0; c < nc; c++) {
        __m256i v0 = _mm256_loadu_si256((const __m256i *)(x0 + CHUNK * c));
        __m256i v1 = _mm256_loadu_si256((const __m256i *)(x1 + CHUNK * c));
        __m256 a = _mm256_castsi256_ps(_mm256_slli_epi32(v0, 16)), b = _mm256_castsi256_ps(_mm256_and_si256(v0, odd));
        e0 = _mm256_fmadd_ps(a, a, e0);
        o0 = _mm256_fmadd_ps(b, b, o0);
        a = _mm256_castsi256_ps(_mm256_slli_epi32(v1, 16)), b = _mm256_castsi256_ps(_mm256_and_si256(v1, odd));
        e1 = _mm256_fmadd_ps(a, a, e1);
        o1 = _mm256_fmadd_ps(b, b, o1);
    }
    _mm256_storeu_ps(s, e0);
    _mm256_storeu_ps(s + 8, o0);
    _mm256_storeu_ps(s + 16, e1);
    _mm256_storeu_ps(s + 24, o1);
}

/* The 8 lanes of v: (l0+l4 + l2+l6) + (l1+l5 + l3+l7), as the scalar tier. */
static inline float lane_sum(const float *p)
{
    __m256 v = _mm256_loadu_ps(p);
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); /* a_l = l_l + l_{l+4} */
    __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));                                 /* b0 = a0+a2, b1 = a1+a3 */
    return _mm_cvtss_f32(_mm_add_ss(b, _mm_shuffle_ps(b, b, 1)));
}

/* Chunks per block: the block's weights of every mix group (groups x 384 B per chunk) fit in 24 KiB of L1
 * (M 24: 16 chunks, 256 channels), at least 4 and at most 64 chunks. The blocking does not change any
 * sum: each lane still adds the chunks in ascending order, the partial sums wait in work. */
static int64_t block_chunks(int groups)
{
    int64_t b = (24 * 1024) / ((int64_t)groups * CHUNK_FLOATS * 4);
    return b < 4 ? 4 : b > 64 ? 64 : b;
}

/* Token pair p's rows of stream i from chunk c0 (an odd last token pairs with itself). */
static inline void pair_rows(const uint16_t *x, size_t ldt, size_t lds, int nt, int p, int i, int64_t c0,
                             const uint16_t **x0, const uint16_t **x1)
{
    int t0 = 2 * p, t1 = t0 + 1 < nt ? t0 + 1 : t0;
    *x0 = x + (size_t)t0 * ldt + (size_t)i * lds + CHUNK * c0;
    *x1 = x + (size_t)t1 * ldt + (size_t)i * lds + CHUNK * c0;
}

static void hc_mix(const uint16_t *x, size_t ldt, size_t lds, int nt, int HC, int64_t H, const float *wp, int M,
                   float *mix, size_t ldm, float *ss, float *work)
{
    int pairs = (nt + 1) / 2, groups = (M + MIXES - 1) / MIXES;
    int64_t nc = (H + CHUNK - 1) / CHUNK, full = H / CHUNK, block = block_chunks(groups);
    size_t pf = PAIR_FLOATS(groups), wstride = (size_t)groups * CHUNK_FLOATS;
    for (size_t k = 0; k < (size_t)pairs * pf; k++)
        work[k] = 0.0f;
    for (int i = 0; i < HC; i++)
        for (int64_t c0 = 0; c0 < nc; c0 += block) {
            int64_t n = nc - c0 < block ? nc - c0 : block;
            int64_t nf = full - c0 < n ? full - c0 : n; /* whole chunks of this block */
            const float *wb = wp + ((size_t)i * (size_t)nc + (size_t)c0) * wstride;
            for (int p = 0; p < pairs; p++) {
                const uint16_t *x0, *x1;
                pair_rows(x, ldt, lds, nt, p, i, c0, &x0, &x1);
                if (p + 1 < pairs) { /* the next pair's rows, from memory while this pair computes */
                    const uint16_t *n0, *n1;
                    pair_rows(x, ldt, lds, nt, p + 1, i, c0, &n0, &n1);
                    for (int64_t b = 0; b < 2 * n * (int64_t)CHUNK; b += 64) {
                        _mm_prefetch((const char *)n0 + b, _MM_HINT_T0);
                        _mm_prefetch((const char *)n1 + b, _MM_HINT_T0);
                    }
                }
                float *pw = work + (size_t)p * pf;
                _Alignas(32) uint16_t pad0[CHUNK] = {0}, pad1[CHUNK] = {0};
                if (nf < n) /* the stream's last H % 16 channels, zero padded */
                    for (int64_t d = 0; d < H - CHUNK * full; d++)
                        pad0[d] = x0[CHUNK * nf + d], pad1[d] = x1[CHUNK * nf + d];
                for (int g = 0; g < groups; g++) {
                    const float *wg = wb + (size_t)g * CHUNK_FLOATS;
                    float *part = pw + (size_t)g * 2 * MIXES * LANES;
                    tile(x0, x1, wg, wstride, nf, part);
                    if (nf < n)
                        tile(pad0, pad1, wg + (size_t)nf * wstride, wstride, 1, part);
                }
                float *s = pw + (size_t)groups * 2 * MIXES * LANES;
                squares(x0, x1, nf, s);
                if (nf < n)
                    squares(pad0, pad1, 1, s);
            }
        }
    for (int t = 0; t < nt; t++) {
        const float *pw = work + (size_t)(t / 2) * pf;
        int half = t % 2;
        for (int m = 0; m < M; m++)
            mix[(size_t)t * ldm + (size_t)m] =
                lane_sum(pw + ((size_t)(m / MIXES) * 2 * MIXES + (size_t)(half * MIXES + m % MIXES)) * LANES);
        const float *sq = pw + (size_t)groups * 2 * MIXES * LANES + (size_t)half * 2 * LANES;
        ss[t] = lane_sum(sq) + lane_sum(sq + LANES);
    }
}

/* ---- weighted sum and hc_post: 16 bf16 channels per load, even and odd channels apart ----------------- */

static inline __attribute__((always_inline)) __m256 even_of(__m256i v)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

static inline __attribute__((always_inline)) __m256 odd_of(__m256i v)
{
    return _mm256_castsi256_ps(_mm256_and_si256(v, odd_mask));
}

/* 16 bf16 channels in order from the rounded even and odd halves. */
static inline __attribute__((always_inline)) __m256i join_bf16(__m256 e, __m256 o)
{
    return _mm256_or_si256(_mm256_and_si256(rne_high(o), odd_mask), _mm256_srli_epi32(rne_high(e), 16));
}

/* 16 bf16 values from p, the first n (< 16) of them in the copy `tmp` with zeros after. */
static inline __m256i load_part(const uint16_t *p, int n, uint16_t *tmp)
{
    for (int l = 0; l < 16; l++)
        tmp[l] = l < n ? p[l] : 0;
    return _mm256_loadu_si256((const __m256i *)tmp);
}

#define PREFETCH_BYTES 1024 /* ahead on every stream: the rows of a token are 4 KiB pages apart, which the
                              * hardware prefetchers learn only after a few misses per page */

/* y[d] = bf16(0 + sum_i pre[i] x_i[d]), i ascending, 16 channels per step. */
static void hc_weighted_sum(const uint16_t *x, size_t lds, int HC, int64_t H, const float *pre, uint16_t *y)
{
    for (int64_t d = 0; d < H; d += 16) {
        if (d % 32 == 0) /* one cache line of every stream per two steps */
            for (int i = 0; i < HC; i++)
                _mm_prefetch((const char *)(x + (size_t)i * lds + d) + PREFETCH_BYTES, _MM_HINT_T0);
        int n = H - d < 16 ? (int)(H - d) : 16;
        _Alignas(32) uint16_t tmp[16];
        __m256 e = _mm256_setzero_ps(), o = _mm256_setzero_ps();
        for (int i = 0; i < HC; i++) {
            const uint16_t *xi = x + (size_t)i * lds + d;
            __m256i v = n == 16 ? _mm256_loadu_si256((const __m256i *)xi) : load_part(xi, n, tmp);
            __m256 p = _mm256_broadcast_ss(pre + i);
            e = _mm256_add_ps(e, _mm256_mul_ps(p, even_of(v)));
            o = _mm256_add_ps(o, _mm256_mul_ps(p, odd_of(v)));
        }
        __m256i r = join_bf16(e, o);
        if (n == 16) {
            _mm256_storeu_si256((__m256i *)(y + d), r);
        } else {
            _mm256_store_si256((__m256i *)tmp, r);
            for (int l = 0; l < n; l++)
                y[d + l] = tmp[l];
        }
    }
}

/* hc_post, bf16 elements: 16 channels from d of every output stream; HC (a constant after inlining) <= 8:
 * every residual vector is loaded before the first store. The fp32 results wait in `v` (L1) and are
 * rounded after the products, which leaves the registers to the residual vectors. */
static inline __attribute__((always_inline)) void post_bf16_reg(const uint16_t *x, const uint16_t *res, size_t lds_res,
                                                                uint16_t *out, size_t lds_out, const int HC,
                                                                const float *post, const float *comb, size_t d)
{
    _Alignas(32) float v[8][2][8];
    __m256 re[8], ro[8];
    for (int i = 0; i < HC; i++) {
        __m256i r = _mm256_loadu_si256((const __m256i *)(res + (size_t)i * lds_res + d));
        re[i] = even_of(r), ro[i] = odd_of(r);
    }
    __m256i xv = _mm256_loadu_si256((const __m256i *)(x + d));
    __m256 xe = even_of(xv), xo = odd_of(xv);
    for (int j = 0; j < HC; j++) {
        __m256 ae = _mm256_setzero_ps(), ao = _mm256_setzero_ps();
        for (int i = 0; i < HC; i++) {
            __m256 c = _mm256_broadcast_ss(comb + i * HC + j);
            ae = _mm256_add_ps(ae, _mm256_mul_ps(c, re[i]));
            ao = _mm256_add_ps(ao, _mm256_mul_ps(c, ro[i]));
        }
        __m256 pj = _mm256_broadcast_ss(post + j);
        _mm256_store_ps(v[j][0], _mm256_add_ps(_mm256_mul_ps(pj, xe), ae));
        _mm256_store_ps(v[j][1], _mm256_add_ps(_mm256_mul_ps(pj, xo), ao));
    }
    for (int j = 0; j < HC; j++)
        _mm256_storeu_si256((__m256i *)(out + (size_t)j * lds_out + d),
                            join_bf16(_mm256_load_ps(v[j][0]), _mm256_load_ps(v[j][1])));
}

/* hc_post, fp32 elements: 8 channels from d, as post_bf16_reg. */
static inline __attribute__((always_inline)) void post_f32_reg(const float *x, const float *res, size_t lds_res,
                                                               float *out, size_t lds_out, const int HC,
                                                               const float *post, const float *comb, size_t d)
{
    __m256 r[8];
    for (int i = 0; i < HC; i++)
        r[i] = _mm256_loadu_ps(res + (size_t)i * lds_res + d);
    __m256 xv = _mm256_loadu_ps(x + d);
    for (int j = 0; j < HC; j++) {
        __m256 acc = _mm256_setzero_ps();
        for (int i = 0; i < HC; i++)
            acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_broadcast_ss(comb + i * HC + j), r[i]));
        _mm256_storeu_ps(out + (size_t)j * lds_out + d,
                         _mm256_add_ps(_mm256_mul_ps(_mm256_broadcast_ss(post + j), xv), acc));
    }
}

/* Whole steps (16 bf16 or 8 fp32 channels) with the residual vectors in registers, HC constant. */
static inline __attribute__((always_inline)) int64_t post_reg(const void *x, const void *res, size_t lds_res,
                                                              void *out, size_t lds_out, const int HC, int64_t H,
                                                              const float *post, const float *comb, const int fp32)
{
    int64_t d = 0;
    if (fp32)
        for (; d + 8 <= H; d += 8) {
            if (d % 16 == 0) {
                for (int i = 0; i < HC; i++)
                    _mm_prefetch((const char *)((const float *)res + (size_t)i * lds_res + d) + PREFETCH_BYTES,
                                 _MM_HINT_T0);
                _mm_prefetch((const char *)((const float *)x + d) + PREFETCH_BYTES, _MM_HINT_T0);
            }
            post_f32_reg(x, res, lds_res, out, lds_out, HC, post, comb, (size_t)d);
        }
    else
        for (; d + 16 <= H; d += 16) {
            if (d % 32 == 0) {
                for (int i = 0; i < HC; i++)
                    _mm_prefetch((const char *)((const uint16_t *)res + (size_t)i * lds_res + d) + PREFETCH_BYTES,
                                 _MM_HINT_T0);
                _mm_prefetch((const char *)((const uint16_t *)x + d) + PREFETCH_BYTES, _MM_HINT_T0);
            }
            post_bf16_reg(x, res, lds_res, out, lds_out, HC, post, comb, (size_t)d);
        }
    return d;
}

static inline float real_at(const void *p, size_t k, int fp32)
{
    return fp32 ? ((const float *)p)[k] : dsops_bf16_value(((const uint16_t *)p)[k]);
}

/* Channels d0 .. H-1 for any HC, in blocks of 64: the block's residual rows are staged in work as fp32
 * (zero beyond H) before any output of the block is stored; then 8 channels per vector. Each lane does the
 * arithmetic of the register path, so both give the same bits. */
static void post_staged(const void *x, const void *res, size_t lds_res, void *out, size_t lds_out, int HC, int64_t d0,
                        int64_t H, const float *post, const float *comb, int fp32, float *work)
{
    for (; d0 < H; d0 += 64) {
        int n = H - d0 < 64 ? (int)(H - d0) : 64, nv = (n + 7) / 8;
        _Alignas(32) float xt[64];
        for (int i = 0; i < HC; i++)
            for (int l = 0; l < 8 * nv; l++)
                work[64 * i + l] = l < n ? real_at(res, (size_t)i * lds_res + (size_t)(d0 + l), fp32) : 0.0f;
        for (int l = 0; l < 8 * nv; l++)
            xt[l] = l < n ? real_at(x, (size_t)(d0 + l), fp32) : 0.0f;
        for (int j = 0; j < HC; j++) {
            __m256 pj = _mm256_broadcast_ss(post + j);
            for (int v = 0; v < nv; v++) {
                __m256 acc = _mm256_setzero_ps();
                for (int i = 0; i < HC; i++)
                    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_broadcast_ss(comb + i * HC + j),
                                                           _mm256_load_ps(work + 64 * i + 8 * v)));
                __m256 val = _mm256_add_ps(_mm256_mul_ps(pj, _mm256_load_ps(xt + 8 * v)), acc);
                int m = n - 8 * v < 8 ? n - 8 * v : 8;
                size_t k = (size_t)j * lds_out + (size_t)(d0 + 8 * v);
                if (fp32 && m == 8) {
                    _mm256_storeu_ps((float *)out + k, val);
                } else if (m == 8) {
                    __m256i r = _mm256_srli_epi32(rne_high(val), 16);
                    _mm_storeu_si128((__m128i *)((uint16_t *)out + k),
                                     _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
                } else {
                    _Alignas(32) float vf[8];
                    _Alignas(32) uint32_t vb[8];
                    _mm256_store_ps(vf, val);
                    _mm256_store_si256((__m256i *)vb, _mm256_srli_epi32(rne_high(val), 16));
                    for (int l = 0; l < m; l++) {
                        if (fp32)
                            ((float *)out)[k + (size_t)l] = vf[l];
                        else
                            ((uint16_t *)out)[k + (size_t)l] = (uint16_t)vb[l];
                    }
                }
            }
        }
    }
}

#define POST_CASE(hc)                                                                                        \
    case hc:                                                                                                 \
        d = fp32 ? post_reg(x, res, lds_res, out, lds_out, hc, H, post, comb, 1)                            \
                 : post_reg(x, res, lds_res, out, lds_out, hc, H, post, comb, 0);                           \
        break;

static void hc_post_token(const void *x, const void *res, size_t lds_res, void *out, size_t lds_out, int HC, int64_t H,
                          const float *post, const float *comb, int fp32, float *work)
{
    int64_t d = 0;
    switch (HC) {
        POST_CASE(1)
        POST_CASE(2)
        POST_CASE(3)
        POST_CASE(4)
        POST_CASE(5)
        POST_CASE(6)
        POST_CASE(7)
        POST_CASE(8)
    default:
        break;
    }
    if (d < H) /* HC > 8, or the last channels */
        post_staged(x, res, lds_res, out, lds_out, HC, d, H, post, comb, fp32, work);
}

const dsops_hc_kernels dsops_hc_kernels__avx2 = {
    .packed_floats = dsops_hc_packed_floats_2x6,
    .pack = dsops_hc_pack_2x6,
    .mix_work_floats = dsops_hc_mix_work_floats_2x6,
    .mix = hc_mix,
    .weighted_sum = hc_weighted_sum,
    .post_token = hc_post_token,
};
