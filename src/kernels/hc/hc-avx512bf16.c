/* hc kernels with AVX-512. hc_pre's mix reduction: two tokens x twelve mixes per register tile (24 fp32
 * accumulators), the bf16 streams widened in registers, hc_fn read in place in blocks of K that stay
 * in L2 while every token pair of the group passes over them. Partial sums live in `work` between
 * blocks, so each token's sums have one fixed order whatever the group or the thread. The weighted sum
 * and hc_post use mul then add in the scalar tier's order (same bits on every tier). */
#include <immintrin.h>

#include "../common/bf16-avx512.h"
#include "dispatch.h"

#define MIXES 12        /* mixes per register tile (x 2 tokens = 24 accumulators) */
#define K_BLOCK 2048    /* K values per block: 24 rows of hc_fn x 8 KiB stay in L2 */

/* part[0..11] += x0 . w_j, part[12..23] += x1 . w_j over nc chunks of 16 values; wp holds the chunks'
 * weights as [nc][12][16]; the last chunk's x is masked by `tail`. with_ss: ss[0], ss[1] += x0^2, x1^2.
 * Inlined with a constant with_ss so each variant keeps its accumulators in registers. */
static inline __attribute__((always_inline)) void tile(const uint16_t *x0, const uint16_t *x1, const float *wp,
                                                       int64_t nc, __mmask16 tail, float *part, float *ss,
                                                       const int with_ss)
{
    __m512 acc[2 * MIXES], s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
#pragma GCC unroll 24
    for (int j = 0; j < 2 * MIXES; j++)
        acc[j] = _mm512_loadu_ps(part + 16 * j);
    if (with_ss) {
        s0 = _mm512_loadu_ps(ss);
        s1 = _mm512_loadu_ps(ss + 16);
    }
    for (int64_t c = 0; c < nc; c++) {
        __m512 v0, v1;
        if (c + 1 < nc || tail == 0xffff) {
            v0 = bf16_widen(x0 + 16 * c);
            v1 = bf16_widen(x1 + 16 * c);
        } else {
            v0 = bf16_widen_mask(x0 + 16 * c, tail);
            v1 = bf16_widen_mask(x1 + 16 * c, tail);
        }
        if (with_ss) {
            s0 = _mm512_fmadd_ps(v0, v0, s0);
            s1 = _mm512_fmadd_ps(v1, v1, s1);
        }
        const float *w = wp + c * MIXES * 16;
#pragma GCC unroll 12
        for (int j = 0; j < MIXES; j++) {
            __m512 wj = _mm512_load_ps(w + 16 * j);
            acc[j] = _mm512_fmadd_ps(v0, wj, acc[j]);
            acc[MIXES + j] = _mm512_fmadd_ps(v1, wj, acc[MIXES + j]);
        }
    }
#pragma GCC unroll 24
    for (int j = 0; j < 2 * MIXES; j++)
        _mm512_storeu_ps(part + 16 * j, acc[j]);
    if (with_ss) {
        _mm512_storeu_ps(ss, s0);
        _mm512_storeu_ps(ss + 16, s1);
    }
}

/* Packed hc_fn: [groups][HC][ceil(H/16)][12][16], zero beyond H and beyond M. */
static size_t hc_packed_floats(int M, int HC, int64_t H)
{
    return (size_t)((M + MIXES - 1) / MIXES) * (size_t)HC * (size_t)((H + 15) / 16) * MIXES * 16;
}

static void hc_pack(const float *w, size_t ldw, int M, int HC, int64_t H, float *wp)
{
    int64_t nc = (H + 15) / 16;
    int groups = (M + MIXES - 1) / MIXES;
    for (int g = 0; g < groups; g++)
        for (int i = 0; i < HC; i++)
            for (int64_t c = 0; c < nc; c++) {
                float *dst = wp + (((size_t)g * (size_t)HC + (size_t)i) * (size_t)nc + (size_t)c) * MIXES * 16;
                for (int j = 0; j < MIXES; j++) {
                    int m = g * MIXES + j;
                    for (int l = 0; l < 16; l++) {
                        int64_t d = 16 * c + l;
                        dst[16 * j + l] = m < M && d < H ? w[(size_t)m * ldw + (size_t)i * (size_t)H + (size_t)d] : 0.0f;
                    }
                }
            }
}

static size_t hc_mix_work_floats(int nt, int M)
{
    return (size_t)((nt + 1) / 2) * (size_t)(((M + MIXES - 1) / MIXES) * 2 * MIXES + 2) * 16;
}

static void hc_mix(const uint16_t *x, size_t ldt, size_t lds, int nt, int HC, int64_t H, const float *wp, int M,
                   float *mix, size_t ldm, float *ss, float *work)
{
    int pairs = (nt + 1) / 2, groups = (M + MIXES - 1) / MIXES;
    int64_t nc = (H + 15) / 16, block = K_BLOCK / 16;
    __mmask16 tail = H % 16 ? (__mmask16)((1u << (H % 16)) - 1u) : (__mmask16)0xffff;
    size_t pair_floats = (size_t)(groups * 2 * MIXES + 2) * 16;
    for (size_t i = 0; i < (size_t)pairs * pair_floats; i++)
        work[i] = 0.0f;
    for (int i = 0; i < HC; i++)
        for (int64_t c0 = 0; c0 < nc; c0 += block) {
            int64_t n = nc - c0 < block ? nc - c0 : block;
            __mmask16 m = c0 + n == nc ? tail : (__mmask16)0xffff;
            for (int p = 0; p < pairs; p++) {
                int t0 = 2 * p, t1 = t0 + 1 < nt ? t0 + 1 : t0; /* an odd last token pairs with itself */
                const uint16_t *x0 = x + (size_t)t0 * ldt + (size_t)i * lds + 16 * c0;
                const uint16_t *x1 = x + (size_t)t1 * ldt + (size_t)i * lds + 16 * c0;
                float *pw = work + (size_t)p * pair_floats;
                for (int g = 0; g < groups; g++) {
                    const float *wg = wp + (((size_t)g * (size_t)HC + (size_t)i) * (size_t)nc + (size_t)c0) * MIXES * 16;
                    float *part = pw + (size_t)g * 2 * MIXES * 16;
                    if (g == 0)
                        tile(x0, x1, wg, n, m, part, pw + (size_t)groups * 2 * MIXES * 16, 1);
                    else
                        tile(x0, x1, wg, n, m, part, NULL, 0);
                }
            }
        }
    for (int t = 0; t < nt; t++) {
        const float *pw = work + (size_t)(t / 2) * pair_floats;
        int half = t % 2;
        for (int m = 0; m < M; m++) {
            const float *v = pw + (size_t)(m / MIXES) * 2 * MIXES * 16 + (size_t)(half * MIXES + m % MIXES) * 16;
            mix[(size_t)t * ldm + (size_t)m] = _mm512_reduce_add_ps(_mm512_loadu_ps(v));
        }
        ss[t] = _mm512_reduce_add_ps(_mm512_loadu_ps(pw + (size_t)groups * 2 * MIXES * 16 + (size_t)half * 16));
    }
}

/* y[d] = bf16(sum_i pre[i] x_i[d]), streams i ascending (x_i = x + i*lds). */
static void hc_weighted_sum(const uint16_t *x, size_t lds, int HC, int64_t H, const float *pre, uint16_t *y)
{
    int64_t d = 0;
    for (; d + 16 <= H; d += 16) {
        __m512 acc = _mm512_setzero_ps(); /* 0 + ... as the scalar loop (keeps the sign of zero results) */
        for (int i = 0; i < HC; i++)
            acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_set1_ps(pre[i]), bf16_widen(x + (size_t)i * lds + d)));
        _mm256_storeu_si256((__m256i *)(y + d), bf16_rne(acc));
    }
    if (d < H) {
        __mmask16 m = (__mmask16)((1u << (H - d)) - 1u);
        __m512 acc = _mm512_setzero_ps();
        for (int i = 0; i < HC; i++)
            acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_set1_ps(pre[i]), bf16_widen_mask(x + (size_t)i * lds + d, m)));
        _mm256_mask_storeu_epi16(y + d, m, bf16_rne(acc));
    }
}

/* Loads / stores 16 elements (bf16 or fp32); `full` (a constant after inlining) avoids the masked forms,
 * which are slower here, on whole chunks. */
static inline __attribute__((always_inline)) __m512 load_real(const void *p, int64_t d, __mmask16 m, int fp32, int full)
{
    if (fp32)
        return full ? _mm512_loadu_ps((const float *)p + d) : _mm512_maskz_loadu_ps(m, (const float *)p + d);
    return full ? bf16_widen((const uint16_t *)p + d) : bf16_widen_mask((const uint16_t *)p + d, m);
}

static inline __attribute__((always_inline)) void store_real(void *p, int64_t d, __mmask16 m, int fp32, int full,
                                                             __m512 v)
{
    if (fp32 && full)
        _mm512_storeu_ps((float *)p + d, v);
    else if (fp32)
        _mm512_mask_storeu_ps((float *)p + d, m, v);
    else if (full)
        _mm256_storeu_si256((__m256i *)((uint16_t *)p + d), bf16_rne(v));
    else
        _mm256_mask_storeu_epi16((uint16_t *)p + d, m, bf16_rne(v));
}

#define POST_REG_HC 16 /* up to this many streams the residual vectors of a step stay in registers */

/* 16 channels of every output stream: all HC residual values are loaded before the first store. */
static inline __attribute__((always_inline)) void post_step(const void *x, const void *res, size_t lds_res, void *out,
                                                            size_t lds_out, int HC, const float *post,
                                                            const float *comb, int fp32, int64_t d, __mmask16 m,
                                                            int full)
{
    size_t es = fp32 ? 4 : 2;
    __m512 r[POST_REG_HC];
    for (int i = 0; i < HC; i++)
        r[i] = load_real((const char *)res + (size_t)i * lds_res * es, d, m, fp32, full);
    __m512 xv = load_real(x, d, m, fp32, full);
    for (int j = 0; j < HC; j++) {
        __m512 acc = _mm512_setzero_ps(); /* 0 + ... as the scalar loop (keeps the sign of zero results) */
        for (int i = 0; i < HC; i++)
            acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_set1_ps(comb[i * HC + j]), r[i]));
        __m512 v = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(post[j]), xv), acc);
        store_real((char *)out + (size_t)j * lds_out * es, d, m, fp32, full, v);
    }
}

/* More than POST_REG_HC streams: blocks of 64 channels (4 vectors), the block's residual rows staged in
 * work (fp32) before any output of the block is stored. */
static void post_staged(const void *x, const void *res, size_t lds_res, void *out, size_t lds_out, int HC, int64_t H,
                        const float *post, const float *comb, int fp32, float *work)
{
    size_t es = fp32 ? 4 : 2;
    for (int64_t d0 = 0; d0 < H; d0 += 64) {
        int nv = (int)((H - d0 < 64 ? H - d0 : 64) + 15) / 16;
        for (int i = 0; i < HC; i++)
            for (int v = 0; v < nv; v++) {
                int64_t d = d0 + 16 * v;
                __mmask16 m = H - d >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (H - d)) - 1u);
                _mm512_store_ps(work + 64 * i + 16 * v,
                                load_real((const char *)res + (size_t)i * lds_res * es, d, m, fp32, 0));
            }
        for (int j = 0; j < HC; j++)
            for (int v = 0; v < nv; v++) {
                int64_t d = d0 + 16 * v;
                __mmask16 m = H - d >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (H - d)) - 1u);
                __m512 acc = _mm512_setzero_ps();
                for (int i = 0; i < HC; i++)
                    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_set1_ps(comb[i * HC + j]),
                                                           _mm512_load_ps(work + 64 * i + 16 * v)));
                __m512 val = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(post[j]), load_real(x, d, m, fp32, 0)), acc);
                store_real((char *)out + (size_t)j * lds_out * es, d, m, fp32, 0, val);
            }
    }
}

static void hc_post_token(const void *x, const void *res, size_t lds_res, void *out, size_t lds_out, int HC, int64_t H,
                          const float *post, const float *comb, int fp32, float *work)
{
    if (HC > POST_REG_HC) {
        post_staged(x, res, lds_res, out, lds_out, HC, H, post, comb, fp32, work);
        return;
    }
    int64_t d = 0;
    if (fp32)
        for (; d + 16 <= H; d += 16)
            post_step(x, res, lds_res, out, lds_out, HC, post, comb, 1, d, 0xffff, 1);
    else
        for (; d + 16 <= H; d += 16)
            post_step(x, res, lds_res, out, lds_out, HC, post, comb, 0, d, 0xffff, 1);
    if (d < H)
        post_step(x, res, lds_res, out, lds_out, HC, post, comb, fp32, d, (__mmask16)((1u << (H - d)) - 1u), 0);
}

const dsops_hc_kernels dsops_hc_kernels__avx512bf16 = {
    .mix_work_floats = hc_mix_work_floats,
    .mix = hc_mix,
    .pack = hc_pack,
    .weighted_sum = hc_weighted_sum,
    .post_token = hc_post_token,
    .packed_floats = hc_packed_floats,
};
