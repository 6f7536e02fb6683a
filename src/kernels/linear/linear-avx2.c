/* Few-row linear maps y[m][n] = sum_k x[m][k] * W[n][k] from row-major weights (no packing), AVX2 + FMA.
 *
 * Register tile: 4 weight rows x 2 activation rows, i.e. 8 accumulators, the widened activations (4
 * registers) and one widened weight vector within the 16 ymm registers. Each weight vector is loaded once
 * per tile and serves both activation rows. A group of 4 weight rows meets every pair of activation rows
 * (a pass) one block of K at a time: a block of 2 KiB per row stays in L1 across the passes, where
 * whole rows (8 KiB at K 4096 bf16, each row mapping onto the same L1 sets) did not and came from L2 on
 * every pass. Accumulators are kept in a small buffer between blocks, so each lane still adds its
 * products in k order. Every pass fetches its share of the next block (or of the next group's first
 * block), so that memory streams during every pass and not only the first.
 *
 * bf16: a 32-byte load holds 16 values; the even ones widen by a shift, the odd ones by a mask (exact),
 * and both halves meet the same halves of x in fp32 FMAs. Lanes are summed in a fixed order at the end.
 *
 * int8: exact int32 sums, without vpmaddubsw (its int16 pair sums saturate: 255 * 127 * 2 > 32767).
 * The biased activations xb = x + 128 are zero-extended and the weights sign-extended to int16, and
 * vpmaddwd adds pairs of products into int32: |xb w| <= 255 * 128 = 32640, so a pair sum lies in
 * [-65280, 64770] and is exact. Lanes then add these in int32 with wrap-around (vpaddd), and the tile
 * subtracts wsum128[n] = 128 sum_k W[n][k] in the same modular arithmetic: the result is the true
 * sum_k x W modulo 2^32, hence exact whenever it fits int32 (always for K < 2^17, as |x W| <= 2^14). */
#include <immintrin.h>
#include <string.h>

#include "../common/pairs-avx2.h"
#include "dispatch.h"
#include "internal.h"

#define INLINE static inline __attribute__((always_inline))
#define NT 4                /* weight rows per tile */
#define MT 2                /* activation rows per tile (at most) */
#define MAX_PASSES 8        /* ceil(16 / MT): the callers' M is at most 16 */
#define BLOCK_BYTES 2048    /* K block, bytes of one weight row */

INLINE float hsum_ps(__m256 v)
{
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    b = _mm_add_ps(b, _mm_shuffle_ps(b, b, 0x4e));
    b = _mm_add_ps(b, _mm_shuffle_ps(b, b, 0xb1));
    return _mm_cvtss_f32(b);
}

INLINE uint32_t hsum_epi32(__m256i v)
{
    __m128i b = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    b = _mm_add_epi32(b, _mm_shuffle_epi32(b, 0x4e));
    b = _mm_add_epi32(b, _mm_shuffle_epi32(b, 0xb1));
    return (uint32_t)_mm_cvtsi128_si32(b);
}

/* Share `pass` of `passes` of the lines of NT rows (row stride ldw bytes) in [0, bytes): one line per
 * row per call, at the call's fraction `i / n` of the pass. */
INLINE void prefetch_share(const char *rows, size_t ldw, size_t bytes, int pass, int passes, size_t i, size_t n)
{
    size_t at = (((size_t)pass * n + i) * bytes / ((size_t)passes * n)) & ~(size_t)63;
    for (int r = 0; r < NT; r++)
        _mm_prefetch(rows + (size_t)r * ldw + at, _MM_HINT_T0);
}

/* ---- bf16 ---- */

INLINE __m256 even_f32(__m256i v) { return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)); }
INLINE __m256 odd_f32(__m256i v) { return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u))); }

/* One 16-value step: xr[m] / wr[n] point at the step's values. */
INLINE void bf16_step(const uint16_t *const *xr, const int mt, const uint16_t *const *wr, const int nt,
                      __m256 acc[NT][MT])
{
    __m256 xe[MT], xo[MT];
#pragma GCC unroll 2
    for (int m = 0; m < mt; m++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)xr[m]);
        xe[m] = even_f32(v);
        xo[m] = odd_f32(v);
    }
#pragma GCC unroll 4
    for (int n = 0; n < nt; n++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)wr[n]);
        __m256 we = even_f32(v), wo = odd_f32(v);
#pragma GCC unroll 2
        for (int m = 0; m < mt; m++)
            acc[n][m] = _mm256_fmadd_ps(wo, xo[m], _mm256_fmadd_ps(we, xe[m], acc[n][m]));
    }
}

/* Values [k0, k1) of nt weight rows x mt activation rows into the saved accumulators `saved`; k1 - k0 is
 * a multiple of 32 unless k1 == K (then the last step is zero padded: zeros add nothing). `ahead` (or
 * NULL): NT rows whose `ahead_bytes` bytes this pass fetches its share of. */
INLINE void bf16_pass(const uint16_t *x, size_t ldx, const int mt, const uint16_t *w, size_t ldw, const int nt,
                      int k0, int k1, __m256 *saved, const uint16_t *ahead, size_t ahead_bytes, int pass, int passes)
{
    __m256 acc[NT][MT];
    const uint16_t *xr[MT], *wr[NT];
#pragma GCC unroll 4
    for (int n = 0; n < nt; n++)
#pragma GCC unroll 2
        for (int m = 0; m < mt; m++)
            acc[n][m] = saved[n * MT + m];
    int k = k0;
    size_t lines = (size_t)(k1 - k0) / 32;
    for (; k + 32 <= k1; k += 32) {
        if (ahead)
            prefetch_share((const char *)ahead, ldw * 2, ahead_bytes, pass, passes, (size_t)(k - k0) / 32, lines);
        for (int h = 0; h < 32; h += 16) {
            for (int m = 0; m < mt; m++)
                xr[m] = x + (size_t)m * ldx + k + h;
            for (int n = 0; n < nt; n++)
                wr[n] = w + (size_t)n * ldw + k + h;
            bf16_step(xr, mt, wr, nt, acc);
        }
    }
    for (; k < k1; k += 16) {
        uint16_t xt[MT][16], wt[NT][16];
        int len = k1 - k < 16 ? k1 - k : 16;
        for (int m = 0; m < mt; m++) {
            memset(xt[m], 0, sizeof xt[m]);
            memcpy(xt[m], x + (size_t)m * ldx + k, (size_t)len * 2);
            xr[m] = xt[m];
        }
        for (int n = 0; n < nt; n++) {
            memset(wt[n], 0, sizeof wt[n]);
            memcpy(wt[n], w + (size_t)n * ldw + k, (size_t)len * 2);
            wr[n] = wt[n];
        }
        bf16_step(xr, mt, wr, nt, acc);
    }
#pragma GCC unroll 4
    for (int n = 0; n < nt; n++)
#pragma GCC unroll 2
        for (int m = 0; m < mt; m++)
            saved[n * MT + m] = acc[n][m];
}

/* All M activation rows against nt weight rows at w; `next`: the following group's rows, or NULL. */
INLINE void bf16_group(const uint16_t *x, size_t ldx, int M, const uint16_t *w, size_t ldw, const int nt, int K,
                       float *y, size_t ldy, const uint16_t *next)
{
    enum { KB = BLOCK_BYTES / 2 };
    __m256 saved[MAX_PASSES][NT * MT];
    int passes = (M + MT - 1) / MT;
    for (int p = 0; p < passes; p++)
        for (int i = 0; i < NT * MT; i++)
            saved[p][i] = _mm256_setzero_ps();
    for (int k0 = 0; k0 < K; k0 += KB) {
        int k1 = K - k0 > KB ? k0 + KB : K;
        /* this group's next block, or the next group's first one */
        const uint16_t *ahead = k1 < K ? w + k1 : next;
        int ahead_len = k1 < K ? (K - k1 < KB ? K - k1 : KB) : (K < KB ? K : KB);
        size_t ahead_bytes = ahead ? (size_t)ahead_len * 2 : 0;
        for (int p = 0; p < passes; p++) {
            const uint16_t *xm = x + (size_t)(p * MT) * ldx;
            if (M - p * MT >= 2)
                bf16_pass(xm, ldx, 2, w, ldw, nt, k0, k1, saved[p], ahead, ahead_bytes, p, passes);
            else
                bf16_pass(xm, ldx, 1, w, ldw, nt, k0, k1, saved[p], ahead, ahead_bytes, p, passes);
        }
    }
    for (int p = 0; p < passes; p++)
        for (int m = 0; m < MT && p * MT + m < M; m++)
            for (int n = 0; n < nt; n++)
                y[(size_t)(p * MT + m) * ldy + n] = hsum_ps(saved[p][n * MT + m]);
}

static void rowdot_bf16__avx2(const uint16_t *x, size_t ldx, int M, const uint16_t *w, size_t ldw, int N, int K,
                              float *y, size_t ldy)
{
    int n = 0;
    for (; n + NT <= N; n += NT)
        bf16_group(x, ldx, M, w + (size_t)n * ldw, ldw, NT, K, y + n, ldy,
                   n + 2 * NT <= N ? w + (size_t)(n + NT) * ldw : NULL);
    for (; n < N; n++)
        bf16_group(x, ldx, M, w + (size_t)n * ldw, ldw, 1, K, y + n, ldy, NULL);
}

/* ---- int8 ---- */

/* One 16-value step (see the file comment for why it is exact). */
INLINE void s8_step(const uint8_t *const *xr, const int mt, const int8_t *const *wr, const int nt, __m256i acc[NT][MT])
{
    __m256i xv[MT];
#pragma GCC unroll 2
    for (int m = 0; m < mt; m++)
        xv[m] = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)xr[m]));
#pragma GCC unroll 4
    for (int n = 0; n < nt; n++) {
        __m256i wv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)wr[n]));
#pragma GCC unroll 2
        for (int m = 0; m < mt; m++)
            acc[n][m] = _mm256_add_epi32(acc[n][m], _mm256_madd_epi16(wv, xv[m]));
    }
}

/* As bf16_pass; k1 - k0 is a multiple of 64 unless k1 == K (zero padding: a zero byte of xb or W adds
 * nothing). */
INLINE void s8_pass(const uint8_t *xb, size_t ldx, const int mt, const int8_t *w, size_t ldw, const int nt, int k0,
                    int k1, __m256i *saved, const int8_t *ahead, size_t ahead_bytes, int pass, int passes)
{
    __m256i acc[NT][MT];
    const uint8_t *xr[MT];
    const int8_t *wr[NT];
#pragma GCC unroll 4
    for (int n = 0; n < nt; n++)
#pragma GCC unroll 2
        for (int m = 0; m < mt; m++)
            acc[n][m] = saved[n * MT + m];
    int k = k0;
    size_t lines = (size_t)(k1 - k0) / 64;
    for (; k + 64 <= k1; k += 64) {
        if (ahead)
            prefetch_share((const char *)ahead, ldw, ahead_bytes, pass, passes, (size_t)(k - k0) / 64, lines);
        for (int h = 0; h < 64; h += 16) {
            for (int m = 0; m < mt; m++)
                xr[m] = xb + (size_t)m * ldx + k + h;
            for (int n = 0; n < nt; n++)
                wr[n] = w + (size_t)n * ldw + k + h;
            s8_step(xr, mt, wr, nt, acc);
        }
    }
    for (; k < k1; k += 16) {
        uint8_t xt[MT][16];
        int8_t wt[NT][16];
        int len = k1 - k < 16 ? k1 - k : 16;
        for (int m = 0; m < mt; m++) {
            memset(xt[m], 0, sizeof xt[m]);
            memcpy(xt[m], xb + (size_t)m * ldx + k, (size_t)len);
            xr[m] = xt[m];
        }
        for (int n = 0; n < nt; n++) {
            memset(wt[n], 0, sizeof wt[n]);
            memcpy(wt[n], w + (size_t)n * ldw + k, (size_t)len);
            wr[n] = wt[n];
        }
        s8_step(xr, mt, wr, nt, acc);
    }
#pragma GCC unroll 4
    for (int n = 0; n < nt; n++)
#pragma GCC unroll 2
        for (int m = 0; m < mt; m++)
            saved[n * MT + m] = acc[n][m];
}

INLINE void s8_group(const uint8_t *xb, size_t ldx, int M, const int8_t *w, size_t ldw, const int nt, int K,
                     const int32_t *wsum128, int32_t *y, size_t ldy, const int8_t *next)
{
    enum { KB = BLOCK_BYTES };
    __m256i saved[MAX_PASSES][NT * MT];
    int passes = (M + MT - 1) / MT;
    for (int p = 0; p < passes; p++)
        for (int i = 0; i < NT * MT; i++)
            saved[p][i] = _mm256_setzero_si256();
    for (int k0 = 0; k0 < K; k0 += KB) {
        int k1 = K - k0 > KB ? k0 + KB : K;
        const int8_t *ahead = k1 < K ? w + k1 : next;
        int ahead_len = k1 < K ? (K - k1 < KB ? K - k1 : KB) : (K < KB ? K : KB);
        size_t ahead_bytes = ahead ? (size_t)ahead_len : 0;
        for (int p = 0; p < passes; p++) {
            const uint8_t *xm = xb + (size_t)(p * MT) * ldx;
            if (M - p * MT >= 2)
                s8_pass(xm, ldx, 2, w, ldw, nt, k0, k1, saved[p], ahead, ahead_bytes, p, passes);
            else
                s8_pass(xm, ldx, 1, w, ldw, nt, k0, k1, saved[p], ahead, ahead_bytes, p, passes);
        }
    }
    for (int p = 0; p < passes; p++)
        for (int m = 0; m < MT && p * MT + m < M; m++)
            for (int n = 0; n < nt; n++)
                y[(size_t)(p * MT + m) * ldy + n] = (int32_t)(hsum_epi32(saved[p][n * MT + m]) - (uint32_t)wsum128[n]);
}

static void rowdot_s8__avx2(const uint8_t *xb, size_t ldx, int M, const int8_t *w, size_t ldw, int N, int K,
                            const int32_t *wsum128, int32_t *y, size_t ldy)
{
    int n = 0;
    for (; n + NT <= N; n += NT)
        s8_group(xb, ldx, M, w + (size_t)n * ldw, ldw, NT, K, wsum128 + n, y + n, ldy,
                 n + 2 * NT <= N ? w + (size_t)(n + NT) * ldw : NULL);
    for (; n < N; n++)
        s8_group(xb, ldx, M, w + (size_t)n * ldw, ldw, 1, K, wsum128 + n, y + n, ldy, NULL);
}

/* ---- bf16 weights in the lanes layout ----------------------------------------------------------------------
 * With several rows the tile above is short of vector ports: every 16 FMAs need 12 shifts and masks to widen
 * x and W besides its loads, and it ran at 52-54 % of the FMA peak with W in L2. Weights packed as lanes once
 * (linear.h) meet the rows of x in the attention kernels' register tile (common/pairs-avx2.h): one broadcast
 * x value serves 16 outputs and one widened weight vector serves 4 rows. Blocks of 16 weight rows go
 * in groups of LANE_GROUP, pairs in blocks of LANE_PAIRS, the layout's order: the weights stream in memory order, x
 * is widened once per group and block of pairs (with whole rows of K per group, x fell out of L2 under the stream
 * of weights when K was large), and the partial sums wait in y between blocks of pairs. */
#define LANE_PAIRS DSOPS_LANES_PAIRS /* x 16 rows x 256 values x 4 bytes = 16 KiB, a W piece 8 KiB: in L1 */
#define LANE_GROUP DSOPS_LANES_GROUP
#define LANES_AHEAD 1 /* the first row tile of a piece prefetches the piece after it, a line per pair: from memory
                       * without it the kernel fell 20 % behind its speed in cache (the hardware prefetcher did
                       * not keep up; a burst of prefetches per piece made it worse) */

static void rowdot_bf16_lanes__avx2(const uint16_t *x, size_t ldx, int M, const uint16_t *wl, int N, int K, float *y,
                                    size_t ldy)
{
    _Alignas(32) float xw[MAX_PASSES * MT * 2 * LANE_PAIRS]; /* [M][2 LANE_PAIRS] the block of x, widened */
    float part[MAX_PASSES * MT * 16];                         /* outputs of a last block of fewer than 16 rows */
    const int pairs = (K + 1) / 2, blocks = (N + 15) / 16;
    for (int g0 = 0; g0 < blocks; g0 += LANE_GROUP) {
        const int g1 = blocks - g0 < LANE_GROUP ? blocks : g0 + LANE_GROUP;
        for (int p0 = 0; p0 < pairs || p0 == 0; p0 += LANE_PAIRS) {
            const int np = pairs - p0 < LANE_PAIRS ? pairs - p0 : LANE_PAIRS, k0 = 2 * p0;
            const int kn = K - k0 < 2 * np ? K - k0 : 2 * np; /* values of this block (odd K: the last is alone) */
            const int first = p0 == 0, last = p0 + LANE_PAIRS >= pairs;
            for (int m = 0; m < M; m++) {
                const uint16_t *src = x + (size_t)m * ldx + k0;
                float *dst = xw + (size_t)m * 2 * LANE_PAIRS;
                int i = 0;
                for (; i + 8 <= kn; i += 8)
                    _mm256_store_ps(dst + i, pairs_widen8(src + i));
                for (; i < 2 * np; i++)
                    dst[i] = i < kn ? dsops_bf16_value(src[i]) : 0.0f;
            }
            for (int b = g0; b < g1; b++) {
                const int n0 = 16 * b, nn = N - n0 < 16 ? N - n0 : 16;
                const uint16_t *bj = wl + dsops_lanes_at(N, K, n0, p0); /* the next piece in memory order */
                float *c = nn == 16 ? y + n0 : part; /* the partial sums wait there between blocks of pairs */
                const size_t cs = nn == 16 ? ldy : 16;
                int r0 = 0;
                /* the first row tile fetches the next piece (the layout is read in memory order) */
                const char *ahead = (const char *)(bj + (size_t)np * 32 * LANES_AHEAD);
                for (; r0 + PAIRS_TILE_H <= M; r0 += PAIRS_TILE_H)
                    pairs_tile_pf(xw + (size_t)r0 * 2 * LANE_PAIRS, 2 * LANE_PAIRS, PAIRS_TILE_H, bj, np, first, last,
                                  1.0f, c + (size_t)r0 * cs, cs, r0 == 0 ? ahead : NULL);
                for (; r0 < M; r0++)
                    pairs_tile(xw + (size_t)r0 * 2 * LANE_PAIRS, 2 * LANE_PAIRS, 1, bj, np, first, last, 1.0f,
                               c + (size_t)r0 * cs, cs);
                if (nn < 16 && last)
                    for (int m = 0; m < M; m++)
                        memcpy(y + (size_t)m * ldy + n0, part + (size_t)m * 16, (size_t)nn * 4);
            }
        }
    }
}

/* ---- int8 weights in the lanes layout ----------------------------------------------------------------------
 * The int8 row tile widens 6 vectors (2 of x, 4 of W) per 8 vpmaddwd, and the widening (a lane-crossing
 * vpmovsx / vpmovzx) issues once per cycle on Zen 3, so the tile ran at a third of the vpmaddwd rate. On lanes,
 * x is widened once per pair block into int16 pairs (one int32 each, broadcast as is) and one 32-byte piece of W
 * (16 lanes x 2 values) widens into 2 vectors that serve S8_TILE_H rows: 2 widenings per 2 S8_TILE_H vpmaddwd.
 * Exact as the row tile (same products, int32 sums modulo 2^32). */
#define S8_TILE_H 4

/* Rows r < H of the tile: c[r][0..15] (+)= sum over the np pairs of the piece bj; the last pair block also
 * removes ws (wsum128 of the 16 lanes). ahead: the next piece, a line per two pairs, or NULL. */
INLINE void s8_lanes_tile(const int32_t *xp, const int H, const int8_t *bj, int np, int first, int last,
                          const int32_t *ws, int32_t *c, size_t cs, const char *ahead)
{
    __m256i acc[S8_TILE_H][2];
#pragma GCC unroll 4
    for (int h = 0; h < H; h++) {
        acc[h][0] = first ? _mm256_setzero_si256() : _mm256_loadu_si256((const __m256i *)(c + (size_t)h * cs));
        acc[h][1] = first ? _mm256_setzero_si256() : _mm256_loadu_si256((const __m256i *)(c + (size_t)h * cs + 8));
    }
    for (int p = 0; p < np; p++) {
        if (ahead && !(p & 1))
            _mm_prefetch(ahead + (size_t)p * 32, _MM_HINT_T0);
        const __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(bj + (size_t)p * 32)));
        const __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(bj + (size_t)p * 32 + 16)));
#pragma GCC unroll 4
        for (int h = 0; h < H; h++) {
            const __m256i xv = _mm256_set1_epi32(xp[(size_t)h * DSOPS_LANES_PAIRS + p]);
            acc[h][0] = _mm256_add_epi32(acc[h][0], _mm256_madd_epi16(w0, xv));
            acc[h][1] = _mm256_add_epi32(acc[h][1], _mm256_madd_epi16(w1, xv));
        }
    }
    const __m256i ws0 = _mm256_loadu_si256((const __m256i *)ws), ws1 = _mm256_loadu_si256((const __m256i *)(ws + 8));
#pragma GCC unroll 4
    for (int h = 0; h < H; h++) {
        if (last) {
            acc[h][0] = _mm256_sub_epi32(acc[h][0], ws0);
            acc[h][1] = _mm256_sub_epi32(acc[h][1], ws1);
        }
        _mm256_storeu_si256((__m256i *)(c + (size_t)h * cs), acc[h][0]);
        _mm256_storeu_si256((__m256i *)(c + (size_t)h * cs + 8), acc[h][1]);
    }
}

static void rowdot_s8_lanes__avx2(const uint8_t *xb, size_t ldx, int M, const int8_t *wl, int N, int K,
                                  const int32_t *wsum128, int32_t *y, size_t ldy)
{
    _Alignas(32) int32_t xp[MAX_PASSES * MT * LANE_PAIRS]; /* [M][LANE_PAIRS] x[2p] | x[2p + 1] << 16 */
    int32_t part[MAX_PASSES * MT * 16];                    /* outputs of a last block of fewer than 16 rows */
    int32_t ws[16];
    const int pairs = (K + 1) / 2, blocks = (N + 15) / 16;
    for (int g0 = 0; g0 < blocks; g0 += LANE_GROUP) {
        const int g1 = blocks - g0 < LANE_GROUP ? blocks : g0 + LANE_GROUP;
        for (int p0 = 0; p0 < pairs || p0 == 0; p0 += LANE_PAIRS) {
            const int np = pairs - p0 < LANE_PAIRS ? pairs - p0 : LANE_PAIRS, k0 = 2 * p0;
            const int first = p0 == 0, last = p0 + LANE_PAIRS >= pairs;
            for (int m = 0; m < M; m++) {
                const uint8_t *src = xb + (size_t)m * ldx + k0;
                int32_t *dst = xp + (size_t)m * LANE_PAIRS;
                int i = 0;
                for (; i + 16 <= np && k0 + 2 * i + 32 <= K; i += 16) /* 32 bytes -> 16 pairs */
                    _mm256_store_si256((__m256i *)(dst + i),
                                       _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(src + 2 * i)))),
                    _mm256_store_si256((__m256i *)(dst + i + 8),
                                       _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(src + 2 * i + 16))));
                for (; i < np; i++) /* past an odd K the weight is 0: any x value there adds nothing */
                    dst[i] = (int32_t)src[2 * i] | (k0 + 2 * i + 1 < K ? (int32_t)src[2 * i + 1] << 16 : 0);
            }
            for (int b = g0; b < g1; b++) {
                const int n0 = 16 * b, nn = N - n0 < 16 ? N - n0 : 16;
                const int8_t *bj = wl + dsops_lanes_at(N, K, n0, p0); /* the next piece in memory order */
                int32_t *c = nn == 16 ? y + n0 : part; /* the partial sums wait there between blocks of pairs */
                const size_t cs = nn == 16 ? ldy : 16;
                for (int i = 0; i < 16; i++)
                    ws[i] = i < nn ? wsum128[n0 + i] : 0;
                const char *ahead = (const char *)(bj + (size_t)np * 32);
                int r0 = 0;
                for (; r0 + S8_TILE_H <= M; r0 += S8_TILE_H)
                    s8_lanes_tile(xp + (size_t)r0 * LANE_PAIRS, S8_TILE_H, bj, np, first, last, ws,
                                  c + (size_t)r0 * cs, cs, r0 == 0 ? ahead : NULL);
                for (; r0 < M; r0++)
                    s8_lanes_tile(xp + (size_t)r0 * LANE_PAIRS, 1, bj, np, first, last, ws, c + (size_t)r0 * cs, cs,
                                  r0 == 0 ? ahead : NULL);
                if (nn < 16 && last)
                    for (int m = 0; m < M; m++)
                        memcpy(y + (size_t)m * ldy + n0, part + (size_t)m * 16, (size_t)nn * 4);
            }
        }
    }
}

const dsops_linear_kernels dsops_linear_kernels__avx2 = {
    .rowdot_bf16 = rowdot_bf16__avx2,
    .rowdot_s8 = rowdot_s8__avx2,
    .rowdot_bf16_lanes = rowdot_bf16_lanes__avx2,
    .rowdot_s8_lanes = rowdot_s8_lanes__avx2,
};
