/* The hc family: its kernel table (the contract every tier implements in src/kernels/hc/hc-<tier>.c,
 * aggregated by src/core/dispatch.h) and the layout shared by the scalar and AVX2 tiers. */
#ifndef DSOPS_KERNELS_HC_H
#define DSOPS_KERNELS_HC_H

#include <stddef.h>
#include <stdint.h>

/* hc_pre's mix reduction and weighted sum, hc_post's mixing (spec §3.1, §3.2). Every tier has every entry
 * (the scalar tier is the portable implementation).
 *
 * mix: steps 1-3 (before the division by r) for a group of nt tokens: token t's HC streams are the bf16
 * rows x + t*ldt + i*lds (H values each), flattened stream-major into xf; mix[t*ldm + m] = sum_k xf[k]
 * w[m][k] and ss[t] = sum_k xf[k]^2, each in one order fixed by (M, HC, H) alone, so a token's sums do not
 * depend on the tokens it is grouped with. w ([M][ldw] fp32, hc_fn) is first packed by the same tier's
 * `pack` into packed_floats(M, HC, H) floats (64-byte aligned; the layout is the tier's own).
 * work: mix_work_floats(nt, M) floats (64-byte aligned). */
#define DSOPS_HC_POST_WORK(HC) ((size_t)(HC) * 64) /* floats: HC streams x a block of <= 64 channels */
typedef struct dsops_hc_kernels {
    size_t (*packed_floats)(int M, int HC, int64_t H);
    void (*pack)(const float *w, size_t ldw, int M, int HC, int64_t H, float *wp);
    size_t (*mix_work_floats)(int nt, int M);
    void (*mix)(const uint16_t *x, size_t ldt, size_t lds, int nt, int HC, int64_t H, const float *wp, int M,
                float *mix, size_t ldm, float *ss, float *work);
    /* Step 9: y[d] = bf16(0 + sum_i pre[i] f32(x_i[d])), i ascending, x_i = x + i*lds, each product rounded
     * before its sum (no contraction): the same bits on every tier. */
    void (*weighted_sum)(const uint16_t *x, size_t lds, int HC, int64_t H, const float *pre, uint16_t *y);
    /* hc_post for one token, any HC >= 1: out_j[d] = cast(post[j] x[d] + (0 + sum_i comb[i][j] res_i[d]))
     * (i ascending, no contraction: the same bits on every tier), res_i = res + i*lds_res, out_j = out +
     * j*lds_out. Channels go in blocks of at most 64: every res_i[d] of a block is read before any out_j[d]
     * of that block is written, so out may be res. Elements are bf16, or fp32 when fp32 != 0; post [HC]
     * and comb [HC][HC] are fp32. work: DSOPS_HC_POST_WORK(HC) floats (64-byte aligned). */
    void (*post_token)(const void *x, const void *res, size_t lds_res, void *out, size_t lds_out, int HC, int64_t H,
                       const float *post, const float *comb, int fp32, float *work);
} dsops_hc_kernels;

/* The hc family's 2-token x 6-mix layout, shared by the scalar and AVX2 tiers (hc-scalar.c defines the
 * layout functions; the AVX2 table names them, so a prepared hc_fn packed on one serves the other).
 *
 * Packed hc_fn: [HC][nc][groups][2][6][8] floats, groups = ceil(M/6), nc = ceil(H/16): chunk c of stream i
 * covers channels 16c .. 16c+15; half 0 holds the even channels (lane l: 16c + 2l), half 1 the odd ones
 * (16c + 2l + 1), which is how a 256-bit load of 16 bf16 splits into two fp32 vectors with one shift and
 * one mask; mix g*6 + j is row j of group g. Zero beyond H and beyond M. */
#define HC_MIXES 6       /* mixes per register tile (x 2 tokens = 12 accumulators) */
#define HC_LANES 8
#define HC_CHUNK 16      /* channels per chunk: one 256-bit load of bf16 */
#define HC_CHUNK_FLOATS (2 * HC_MIXES * HC_LANES)
/* work floats of one token pair: partial sums of every group, then the sums of squares */
#define HC_PAIR_FLOATS(groups) ((size_t)((groups) * 2 * HC_MIXES + 4) * HC_LANES)

size_t dsops_hc_packed_floats_2x6(int M, int HC, int64_t H);
void dsops_hc_pack_2x6(const float *w, size_t ldw, int M, int HC, int64_t H, float *wp);
size_t dsops_hc_mix_work_floats_2x6(int nt, int M);

#endif
