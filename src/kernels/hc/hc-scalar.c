/* hc kernels, portable C (built with -ffp-contract=off): the algorithm, layout and blocking of the AVX2
 * tier (hc-avx2.c) written out on arrays of 8 lanes, so the two tiers differ only by FMA contraction.
 *
 * Packed hc_fn: the 2 x 6 layout of hc.h (this file defines its functions for both tiers).
 *
 * weighted_sum and post_token define the order every tier reproduces bit for bit: each sum starts from 0,
 * adds rounded products with the stream index ascending; hc_post adds post[j] x[d] last. */
#include "dispatch.h"
#include "internal.h"

#include "hc.h"

#define MIXES HC_MIXES
#define LANES HC_LANES
#define CHUNK HC_CHUNK
#define CHUNK_FLOATS HC_CHUNK_FLOATS
#define PAIR_FLOATS HC_PAIR_FLOATS

size_t dsops_hc_packed_floats_2x6(int M, int HC, int64_t H)
{
    return (size_t)((M + MIXES - 1) / MIXES) * (size_t)HC * (size_t)((H + CHUNK - 1) / CHUNK) * CHUNK_FLOATS;
}

void dsops_hc_pack_2x6(const float *w, size_t ldw, int M, int HC, int64_t H, float *wp)
{
    int64_t nc = (H + CHUNK - 1) / CHUNK;
    int groups = (M + MIXES - 1) / MIXES;
    for (int g = 0; g < groups; g++) /* six rows of hc_fn at a time, read in order */
        for (int i = 0; i < HC; i++)
            for (int64_t c = 0; c < nc; c++) {
                float *dst = wp + (((size_t)i * (size_t)nc + (size_t)c) * (size_t)groups + (size_t)g) * CHUNK_FLOATS;
                for (int h = 0; h < 2; h++)
                    for (int j = 0; j < MIXES; j++)
                        for (int l = 0; l < LANES; l++) {
                            int m = g * MIXES + j;
                            int64_t d = CHUNK * c + 2 * l + h;
                            dst[(h * MIXES + j) * LANES + l] =
                                m < M && d < H ? w[(size_t)m * ldw + (size_t)i * (size_t)H + (size_t)d] : 0.0f;
                        }
            }
}

size_t dsops_hc_mix_work_floats_2x6(int nt, int M)
{
    return (size_t)((nt + 1) / 2) * PAIR_FLOATS((M + MIXES - 1) / MIXES);
}

/* part[0..5] += x0 . w_j, part[6..11] += x1 . w_j (8 lanes each) over nc chunks; chunk c's weights
 * ([2][6][8]) at wp + c * wstride. */
static void tile(const uint16_t *x0, const uint16_t *x1, const float *wp, size_t wstride, int64_t nc, float *part)
{
    float acc[2 * MIXES][LANES];
    for (int j = 0; j < 2 * MIXES; j++)
        for (int l = 0; l < LANES; l++)
            acc[j][l] = part[j * LANES + l];
    for (int64_t c = 0; c < nc; c++)
        for (int h = 0; h < 2; h++) {
            float v0[LANES], v1[LANES];
            for (int l = 0; l < LANES; l++) {
                v0[l] = dsops_bf16_value(x0[CHUNK * c + 2 * l + h]);
                v1[l] = dsops_bf16_value(x1[CHUNK * c + 2 * l + h]);
            }
            const float *w = wp + (size_t)c * wstride + h * MIXES * LANES;
            for (int j = 0; j < MIXES; j++)
                for (int l = 0; l < LANES; l++) {
                    acc[j][l] += v0[l] * w[j * LANES + l];
                    acc[MIXES + j][l] += v1[l] * w[j * LANES + l];
                }
        }
    for (int j = 0; j < 2 * MIXES; j++)
        for (int l = 0; l < LANES; l++)
            part[j * LANES + l] = acc[j][l];
}

/* Sums of squares of a token pair over nc chunks: s[0..7] even and s[8..15] odd channels of x0, s[16..31]
 * the same of x1. */
static void squares(const uint16_t *x0, const uint16_t *x1, int64_t nc, float *s)
{
    for (int64_t c = 0; c < nc; c++)
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < LANES; l++) {
                float v0 = dsops_bf16_value(x0[CHUNK * c + 2 * l + h]), v1 = dsops_bf16_value(x1[CHUNK * c + 2 * l + h]);
                s[h * LANES + l] += v0 * v0;
                s[2 * LANES + h * LANES + l] += v1 * v1;
            }
}

/* The 8 lanes of v in a fixed tree (the AVX2 tier's order). */
static float lane_sum(const float *v)
{
    float a0 = v[0] + v[4], a1 = v[1] + v[5], a2 = v[2] + v[6], a3 = v[3] + v[7];
    float b0 = a0 + a2, b1 = a1 + a3;
    return b0 + b1;
}

/* Chunks per block: the block's weights of every mix group (groups x 384 B per chunk) fit in 24 KiB of L1
 * (M 24: 16 chunks, 256 channels), at least 4 and at most 64 chunks. The blocking does not change any
 * sum: each lane still adds the chunks in ascending order, the partial sums wait in work. */
static int64_t block_chunks(int groups)
{
    int64_t b = (24 * 1024) / ((int64_t)groups * CHUNK_FLOATS * 4);
    return b < 4 ? 4 : b > 64 ? 64 : b;
}

/* For each block of one stream's chunks and each token pair, every mix group passes over the pair's
 * channels (in L1) with the block's weights (in L1 for all pairs). Partial sums wait in `work` between
 * blocks, so a token's sums have one order whatever its group. The tail chunk of a stream (H % 16
 * channels) is read from a zero-padded copy. */
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
                int t0 = 2 * p, t1 = t0 + 1 < nt ? t0 + 1 : t0; /* an odd last token pairs with itself */
                const uint16_t *x0 = x + (size_t)t0 * ldt + (size_t)i * lds + CHUNK * c0;
                const uint16_t *x1 = x + (size_t)t1 * ldt + (size_t)i * lds + CHUNK * c0;
                float *pw = work + (size_t)p * pf;
                uint16_t pad0[CHUNK] = {0}, pad1[CHUNK] = {0};
                if (nf < n)
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

#define BLOCK 64 /* channels per step of weighted_sum and post_token */

static void hc_weighted_sum(const uint16_t *x, size_t lds, int HC, int64_t H, const float *pre, uint16_t *y)
{
    for (int64_t d0 = 0; d0 < H; d0 += BLOCK) {
        int n = H - d0 < BLOCK ? (int)(H - d0) : BLOCK;
        float acc[BLOCK];
        for (int l = 0; l < n; l++)
            acc[l] = 0.0f;
        for (int i = 0; i < HC; i++) {
            const uint16_t *xi = x + (size_t)i * lds + d0;
            for (int l = 0; l < n; l++)
                acc[l] += pre[i] * dsops_bf16_value(xi[l]);
        }
        for (int l = 0; l < n; l++)
            y[d0 + l] = dsops_bf16_round_bits(acc[l]);
    }
}

static float load_real(const void *p, size_t k, int fp32)
{
    return fp32 ? ((const float *)p)[k] : dsops_bf16_value(((const uint16_t *)p)[k]);
}

/* Blocks of 64 channels: the block's HC residual rows are copied to work (fp32) before any output row of
 * the block is written. */
static void hc_post_token(const void *x, const void *res, size_t lds_res, void *out, size_t lds_out, int HC, int64_t H,
                          const float *post, const float *comb, int fp32, float *work)
{
    for (int64_t d0 = 0; d0 < H; d0 += BLOCK) {
        int n = H - d0 < BLOCK ? (int)(H - d0) : BLOCK;
        for (int i = 0; i < HC; i++)
            for (int l = 0; l < n; l++)
                work[i * BLOCK + l] = load_real(res, (size_t)i * lds_res + (size_t)(d0 + l), fp32);
        for (int j = 0; j < HC; j++) {
            float acc[BLOCK];
            for (int l = 0; l < n; l++)
                acc[l] = 0.0f;
            for (int i = 0; i < HC; i++)
                for (int l = 0; l < n; l++)
                    acc[l] += comb[i * HC + j] * work[i * BLOCK + l];
            for (int l = 0; l < n; l++) {
                float v = post[j] * load_real(x, (size_t)(d0 + l), fp32) + acc[l];
                size_t k = (size_t)j * lds_out + (size_t)(d0 + l);
                if (fp32)
                    ((float *)out)[k] = v;
                else
                    ((uint16_t *)out)[k] = dsops_bf16_round_bits(v);
            }
        }
    }
}

const dsops_hc_kernels dsops_hc_kernels__scalar = {
    .packed_floats = dsops_hc_packed_floats_2x6,
    .pack = dsops_hc_pack_2x6,
    .mix_work_floats = dsops_hc_mix_work_floats_2x6,
    .mix = hc_mix,
    .weighted_sum = hc_weighted_sum,
    .post_token = hc_post_token,
};
