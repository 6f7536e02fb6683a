/* Tile boundaries of p_mode tiled (spec §2.10 A5), checked exactly.
 *
 * A tolerance comparison cannot see where tiles start: moving a boundary changes a weight's bf16
 * rounding by at most 2^-9 relative, and such changes average out over many keys. Here one head
 * attends to two groups of m keys: group A scores 0 and carries V = e0, group B scores delta and
 * carries V = e1. With A and B in separate tiles, A's weights are exp(0) = 1 (exact in bf16) and are
 * rescaled by alpha = exp(-delta) in fp32, so out[0] = bf16(m*alpha / (m*alpha + m)); with A and B in one
 * tile, A's weights are bf16(exp(-delta)), so out[0] = bf16(m*bf16(alpha) / (m*alpha + m)). The test
 * picks a delta for which the two bf16 results differ with a wide margin from every rounding boundary,
 * then checks that each tier gives exactly the result of the tiles the spec defines: tiles are runs of
 * p_tile *used* entries of the key list, so skipped indices (-1, out of range) do not shift them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsops.h"
#include "test_util.h"

enum { DC = 32, DR = 16, BS = 16 };

/* distance of v from the nearest bf16 rounding boundary, in units of the bf16 spacing at v */
static double boundary_margin(float v)
{
    float lo = tu_round_bf16(v);
    uint32_t u;
    memcpy(&u, &lo, 4);
    float up = 0;
    uint32_t un = u + 0x10000u;
    memcpy(&up, &un, 4);
    double spacing = fabs((double)up - (double)lo);
    double frac = fabs((double)v - (double)lo) / spacing; /* 0 ... 0.5 */
    return 0.5 - frac;
}

static float out_split(float alpha, int m) /* A and B in separate tiles */
{
    float l = (float)m * alpha + (float)m;
    return ((float)m * alpha) * (1.0f / l);
}

static float out_joint(float alpha, int m) /* A and B in one tile */
{
    float l = (float)m * alpha + (float)m;
    return ((float)m * tu_round_bf16(alpha)) * (1.0f / l);
}

/* list: `lead` invalid entries, then m keys of A, then m keys of B (positions 0..2m-1 of the cache) */
static void run_case(dsops_context *ctx, float delta, int m, int lead, int p_tile, int expect_split)
{
    /* seqused is larger than the list so that cnt = K: positions beyond 2m exist but are never referenced */
    int K = lead + 2 * m, used = 2 * m, seqused = used + 64, MB = (used + BS - 1) / BS;
    uint16_t qn[DC] = {0}, qr[DR] = {0}, out[DC];
    uint16_t *kn = calloc((size_t)MB * BS * DC, 2), *kr = calloc((size_t)MB * BS * DR, 2);
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)K), table[64], cu[2] = {0, 1}, su[1] = {seqused};
    float lse;
    qr[0] = tu_bf16(1.0f);
    for (int j = 0; j < m; j++) {
        kn[(size_t)j * DC + 0] = tu_bf16(1.0f);             /* A: V = e0, score 0 */
        kn[(size_t)(m + j) * DC + 1] = tu_bf16(1.0f);       /* B: V = e1 */
        kr[(size_t)(m + j) * DR + 0] = tu_bf16(delta);      /* B: score delta */
    }
    for (int j = 0; j < lead; j++)
        idx[j] = j % 2 ? seqused + 5 : -1;
    for (int j = 0; j < 2 * m; j++)
        idx[lead + j] = j;
    for (int b = 0; b < MB; b++)
        table[b] = MB - 1 - b; /* reversed: positions p live in block MB-1-p/BS */
    /* write keys where the table puts them */
    uint16_t *kn2 = calloc((size_t)MB * BS * DC, 2), *kr2 = calloc((size_t)MB * BS * DR, 2);
    for (int p = 0; p < used; p++) {
        int row = table[p / BS] * BS + p % BS;
        memcpy(kn2 + (size_t)row * DC, kn + (size_t)p * DC, DC * 2);
        memcpy(kr2 + (size_t)row * DR, kr + (size_t)p * DR, DR * 2);
    }
    dsops_sparse_flash_attention_v32_args a;
    dsops_sparse_flash_attention_v32_init(&a, DSOPS_PRESET_V32);
    int64_t sq[3] = {1, 1, DC}, sr[3] = {1, 1, DR}, sk[3] = {MB, BS, DC}, skr[3] = {MB, BS, DR}, si[2] = {1, K},
            sb[2] = {1, MB}, scu[1] = {2}, ssu[1] = {1}, sl[2] = {1, 1};
    a.q_nope = dsops_tensor_make(qn, DSOPS_BF16, 3, sq);
    a.q_rope = dsops_tensor_make(qr, DSOPS_BF16, 3, sr);
    a.key_nope = dsops_tensor_make(kn2, DSOPS_BF16, 3, sk);
    a.key_rope = dsops_tensor_make(kr2, DSOPS_BF16, 3, skr);
    a.topk_indices = dsops_tensor_make(idx, DSOPS_INT32, 2, si);
    a.block_table = dsops_tensor_make(table, DSOPS_INT32, 2, sb);
    a.cu_seqlens_q = dsops_tensor_make(cu, DSOPS_INT32, 1, scu);
    a.seqused_kv = dsops_tensor_make(su, DSOPS_INT32, 1, ssu);
    a.out = dsops_tensor_make(out, DSOPS_BF16, 3, sq);
    a.lse = dsops_tensor_make(&lse, DSOPS_FP32, 2, sl);
    a.softmax_scale = 1.0f;
    a.p_mode = DSOPS_P_TILED;
    a.p_tile = p_tile;
    dsops_status s = dsops_sparse_flash_attention_v32(ctx, &a);
    float alpha = expf(-delta);
    float want0 = tu_round_bf16(expect_split ? out_split(alpha, m) : out_joint(alpha, m));
    float want1 = tu_round_bf16((float)m * (1.0f / ((float)m * alpha + (float)m)));
    tu_check(s == DSOPS_OK && tu_f32(out[0]) == want0 && tu_f32(out[1]) == want1,
             "%s: delta %g m %d lead %d p_tile %d: out[0..1] = %.9g %.9g, expected %.9g %.9g (%s tiles); status %s",
             dsops_isa_name(dsops_context_isa(ctx)), (double)delta, m, lead, p_tile, (double)tu_f32(out[0]),
             (double)tu_f32(out[1]), (double)want0, (double)want1, expect_split ? "separate" : "one", dsops_status_name(s));
    free(kn);
    free(kr);
    free(kn2);
    free(kr2);
    free(idx);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, 1);
    /* find deltas (exact in bf16) whose two candidate outputs differ in bf16, far from boundaries */
    float deltas[8];
    int nd = 0;
    for (int k = 1; k < 256 && nd < 8; k++) {
        float delta = (float)k / 64.0f;
        float alpha = expf(-delta);
        float a = out_split(alpha, 4), b = out_joint(alpha, 4);
        if (tu_round_bf16(a) != tu_round_bf16(b) && boundary_margin(a) > 0.1 && boundary_margin(b) > 0.1)
            deltas[nd++] = delta;
    }
    tu_check(nd >= 3, "found %d distinguishing deltas, expected at least 3", nd);
    dsops_context *ctx = tu_context();
    char tier[64];
    for (int isa = -1; tu_next_tier(ctx, &isa, "tiles", tier, sizeof tier);) {
        for (int i = 0; i < nd; i++) {
            run_case(ctx, deltas[i], 4, 0, 4, 1);  /* tiles {A}, {B} */
            run_case(ctx, deltas[i], 4, 0, 8, 0);  /* one tile {A, B} */
            run_case(ctx, deltas[i], 4, 0, 1000, 0);
            run_case(ctx, deltas[i], 4, 3, 4, 1);  /* skipped entries before A do not shift the tiles */
            run_case(ctx, deltas[i], 4, 5, 8, 0);
            run_case(ctx, deltas[i], 2, 1, 2, 1);
            run_case(ctx, deltas[i], 1, 0, 1, 1);
            run_case(ctx, deltas[i], 1, 1, 2, 0);
        }
    }
    dsops_context_destroy(ctx);
    return tu_finish();
}
