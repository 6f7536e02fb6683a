/* lightning_indexer (docs/OPERATORS.md §3.6, §4.3; docs/CASES.md "lightning_indexer, V3.2 configuration"
 * and "lightning_indexer, V4 configuration")
 * The named cases, their data generator and the bench adapter; the adversarial problems of the tests
 * (problems.h) at the end.
 *
 * Data:
 *   V3.2 int8   q_idx and keys start as int8(N(0,1)) (truncation), get fp16 scales
 *               max(fp16(amax/127), 1e-3) per head / per key and are requantised
 *               clip(rint(v/scale), -127, 127); weights fp16(N(0,1))
 *   V3.2 bf16   q_idx, keys, weights N(0,1) bf16
 *   V4          q_idx and keys Q8 (spec §2.7) of N(0,1) vectors per head / per key, scales fp16;
 *               weights fp16(N(0,1) * 0.1)
 *   AscendC     q_idx, keys int8 U(-128,127); scales U(0,10) fp16; weights U(0,0.01) fp16
 *   fp8         DeepGEMM's test recipe: q_idx e4m3(bf16(N(0,1))); a key x = bf16(N(0,1)) gets the fp32 scale
 *               s = max(amax, 1e-4) / 448 and values e4m3(x * (1 / s)); weights fp32 N(0,1). The key cache
 *               is DeepGEMM's paged layout, one buffer per block: BS x DI e4m3 values, then BS fp32 scales
 *   tables      a random permutation of the physical blocks; -1 in unused columns
 * The key cache of sequence b holds floor(seqused[b] / cmp_ratio) entries (compressed entries for V4,
 * tokens for V3.2); every physical row gets data, including the rows past the end of a last block. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_family.h"
#include "cases.h"
#include "cases_internal.h"
#include "problems.h"
#include "ref.h"

#define LI_MAX_DI 1024 /* largest head dim the generator handles */

/* NI 64, DI 128, BS 128 for every case */
#define LI_DIMS .NI = 64, .DI = 128, .BS = 128
#define LI_MIXED4 {65536, 971, 32869, 16383}
#define LI_B48_MIXED 131072, 65536, 65536 + 111, 32768 + 11, 16384 + 1, 8192 + 2, 2048 + 7, 1024 + 5, 2048, 256, 127, 32
#define LI_B48_MIXED_CI 8192, 4096, 4102, 2048, 1024, 512, 128, 64, 128, 16, 7, 2

static const dsops_li_case li_cases[] = {
    /* V3.2 configuration: cmp_ratio 1, K 2048 */
    {.name = "v32_li_int8_b4_s2_mixed", .B = 4, .S = 2, .seqused = LI_MIXED4, LI_DIMS, .K = 2048, .cmp_ratio = 1,
     .int8 = 1, .ci = 1},
    {.name = "v32_li_int8_b8_s2_mixed", .B = 8, .S = 2,
     .seqused = {32767, 32656, 384, 2000, 65536, 971, 32869, 129090}, LI_DIMS, .K = 2048, .cmp_ratio = 1,
     .int8 = 1, .ci = 1},
    {.name = "v32_li_int8_b4_s2_kv64k", .B = 4, .S = 2, .seqused = {REP4(65536)}, LI_DIMS, .K = 2048,
     .cmp_ratio = 1, .int8 = 1, .ci = 1},
    /* seqused uniform in [1, 8192], drawn once (fixed so that the case's work does not depend on the seed) */
    {.name = "v32_li_bf16_b32_s3_rand8k", .B = 32, .S = 3,
     .seqused = {4914, 6679, 6817, 6186, 4136, 5288, 2697, 4154, 4475, 1466, 2840, 5571, 1919, 7948, 3342, 6331,
                 5721, 4049, 4758, 6133, 2837, 5673, 3884, 446, 7989, 4902, 3181, 1935, 5992, 582, 1406, 2346},
     LI_DIMS, .K = 2048, .cmp_ratio = 1, .int8 = 0, .ci = 1},
    {.name = "v32_li_bf16_b4_s1_kv64k", .B = 4, .S = 1, .seqused = {REP4(65536)}, LI_DIMS, .K = 2048,
     .cmp_ratio = 1, .int8 = 0, .ci = 1},
    {.name = "v32_li_bf16_b48_s4_mixed", .B = 48, .S = 4,
     .seqused = {LI_B48_MIXED, LI_B48_MIXED, LI_B48_MIXED, LI_B48_MIXED}, LI_DIMS, .K = 2048, .cmp_ratio = 1,
     .int8 = 0, .ci = 0, .ci_variant = "v32_li_bf16_b48_s4_mixed_ci"},
    /* every length / 16 (at least 1) */
    {.name = "v32_li_bf16_b48_s4_mixed_ci", .B = 48, .S = 4,
     .seqused = {LI_B48_MIXED_CI, LI_B48_MIXED_CI, LI_B48_MIXED_CI, LI_B48_MIXED_CI}, LI_DIMS, .K = 2048,
     .cmp_ratio = 1, .int8 = 0, .ci = 1},
    {.name = "v32_li_bf16_b2_s3_kv122", .B = 2, .S = 3, .seqused = {122, 122}, LI_DIMS, .K = 2048, .cmp_ratio = 1,
     .int8 = 0, .with_scores = 1, .ci = 1},
    /* V4 configuration: int8, cmp_ratio 4 (Flash K 512, Pro K 1024) */
    {.name = "v4_li_b64_s2_kv8k", .B = 64, .S = 2, .seqused = {REP64(8192)}, LI_DIMS, .K = 512, .cmp_ratio = 4,
     .int8 = 1, .ci = 1},
    {.name = "v4_li_b4_s2_mixed", .B = 4, .S = 2, .seqused = LI_MIXED4, LI_DIMS, .K = 512, .cmp_ratio = 4,
     .int8 = 1, .ci = 1},
    {.name = "v4_li_pro_b4_s2_kv64k", .B = 4, .S = 2, .seqused = {REP4(65536)}, LI_DIMS, .K = 1024,
     .cmp_ratio = 4, .int8 = 1, .ci = 1},
    /* S 16 tokens see 115 ... 130 tokens: 28 ... 32 compressed keys, rows padded with -1 */
    {.name = "v4_li_b1_s16_kv130", .B = 1, .S = 16, .seqused = {130}, LI_DIMS, .K = 512, .cmp_ratio = 4,
     .int8 = 1, .with_scores = 1, .logits_len = 40, .ci = 1},
    /* the vendor documentation's example (AscendC data) */
    {.name = "v4_li_ascendc_example", .B = 24, .S = 4, .seqused = {REP16(512), REP8(512)}, LI_DIMS, .K = 512,
     .cmp_ratio = 1, .int8 = 1, .ci = 1},
    /* V4: one decode token over 32K compressed keys (131072 tokens, ratio 4): the V4 indexer's performance case */
    {.name = "v4_li_bench_t1_kv128k", .B = 1, .S = 1, .seqused = {131072}, LI_DIMS, .K = 512, .cmp_ratio = 4,
     .int8 = 1, .ci = 1},
    /* one decode token over 64K keys: the performance case of a single query */
    {.name = "li_bench_int8_t1_kv64k", .B = 1, .S = 1, .seqused = {65536}, LI_DIMS, .K = 2048, .cmp_ratio = 1,
     .int8 = 1, .ci = 1},
    {.name = "li_bench_bf16_t1_kv64k", .B = 1, .S = 1, .seqused = {65536}, LI_DIMS, .K = 2048, .cmp_ratio = 1,
     .int8 = 0, .ci = 1},
    /* four distinct keys: the top-k boundary falls inside a group of equal scores, so any of its members may
     * fill the last places, but the same ones whatever the thread count */
    {.name = "v32_li_edge_ties", .B = 2, .S = 2, .seqused = {5000, 300}, LI_DIMS, .K = 2048, .cmp_ratio = 1,
     .int8 = 1, .with_scores = 1, .ties = 1, .ci = 1},
    {.name = "v32_li_edge_ties_bf16", .B = 2, .S = 2, .seqused = {5000, 300}, LI_DIMS, .K = 2048, .cmp_ratio = 1,
     .int8 = 0, .with_scores = 1, .ties = 1, .ci = 1},
    /* fp8 (DeepGEMM's indexer inputs): its block sizes 64 and an odd one, next_n 2 and 3, the logits row */
    {.name = "v32_li_fp8_b4_s2_mixed", .B = 4, .S = 2, .seqused = LI_MIXED4, .NI = 64, .DI = 128, .BS = 64,
     .K = 2048, .cmp_ratio = 1, .fp8 = 1, .with_scores = 1, .logits_len = 65536 + 100, .ci = 1},
    {.name = "v32_li_fp8_b3_s3_bs61", .B = 3, .S = 3, .seqused = {122, 2, 4001}, .NI = 32, .DI = 128, .BS = 61,
     .K = 128, .cmp_ratio = 1, .fp8 = 1, .with_scores = 1, .logits_len = 4096, .ci = 1},
    {.name = "li_bench_fp8_t1_kv64k", .B = 1, .S = 1, .seqused = {65536}, .NI = 64, .DI = 128, .BS = 64, .K = 2048,
     .cmp_ratio = 1, .fp8 = 1, .ci = 1},
};

const dsops_li_case *dsops_li_cases(int *count) { return CASES_TABLE(li_cases, count); }
const dsops_li_case *dsops_li_case_find(const char *name) { return CASES_FIND(li_cases, name); }
void dsops_li_problem_free(dsops_li_problem *p) { if (p) cases_problem_release(p->buffers, p->nbuffers, p); }

typedef enum li_data_kind { LI_DATA_V32 = 0, LI_DATA_V4 = 1, LI_DATA_ASCENDC = 2 } li_data_kind;

static li_data_kind li_kind(const dsops_li_case *c)
{
    if (strncmp(c->name, "v4_li_ascendc", 13) == 0)
        return LI_DATA_ASCENDC;
    if (strncmp(c->name, "v4_", 3) == 0)
        return LI_DATA_V4;
    return LI_DATA_V32;
}

/* One int8 row of `n` values with its fp16 scale, by the case's recipe. */
static uint16_t li_int8_row(li_data_kind kind, rng *r, int8_t *q, int n)
{
    float v[LI_MAX_DI];
    if (kind == LI_DATA_ASCENDC) {
        for (int i = 0; i < n; i++)
            q[i] = (int8_t)((int)(cases_rng_next(r) & 0xff) - 128);
        return cases_fp16_bits(10.0f * cases_rng_unit(r));
    }
    cases_rng_normal(r, v, (size_t)n);
    float amax = 0.0f;
    if (kind == LI_DATA_V32) {
        for (int i = 0; i < n; i++) {
            v[i] = (float)(int)v[i]; /* int8(N(0,1)): truncation */
            amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;
        }
        float s = cases_fp16_value(cases_fp16_bits(amax / 127.0f));
        uint16_t sh = cases_fp16_bits(s > 1e-3f ? s : 1e-3f);
        s = cases_fp16_value(sh);
        for (int i = 0; i < n; i++) {
            float x = cases_rint_small(v[i] / s);
            q[i] = (int8_t)(x > 127.0f ? 127 : (x < -127.0f ? -127 : (int)x));
        }
        return sh;
    }
    /* V4: Q8 of spec §2.7 (no NaN / Inf can occur in normal draws); an all-zero row has scale bits 0 */
    return cases_fp16_bits(cases_q8_row(v, n, q));
}

/* One fp8 key row by DeepGEMM's recipe (x = bf16(N(0,1)), s = max(amax, 1e-4) / 448, e4m3(x * (1 / s)));
 * returns s. A query row (scale NULL) is e4m3(x). */
static float li_fp8_row(rng *r, uint8_t *q, int n, int scaled)
{
    float v[LI_MAX_DI], amax = 0.0f;
    cases_rng_normal(r, v, (size_t)n);
    for (int i = 0; i < n; i++) {
        v[i] = cases_bf16_value(cases_bf16_bits(v[i]));
        amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;
    }
    float s = scaled ? (amax > 1e-4f ? amax : 1e-4f) / 448.0f : 1.0f, inv = 1.0f / s;
    for (int i = 0; i < n; i++)
        q[i] = dsops_ref_e4m3_from_f32(v[i] * inv);
    return s;
}

/* One bf16 row of N(0,1) values. */
static void li_bf16_row(rng *r, uint16_t *q, int n)
{
    float v[LI_MAX_DI];
    cases_rng_normal(r, v, (size_t)n);
    for (int i = 0; i < n; i++)
        q[i] = cases_bf16_bits(v[i]);
}

static void *li_alloc(dsops_li_problem *p, size_t bytes) { return ALLOC_OWNED(p, bytes); }

enum { STREAM_LI_Q = 11, STREAM_LI_W = 12, STREAM_LI_KEY = 13 };

dsops_li_problem *dsops_li_problem_make(const dsops_li_case *c, uint64_t seed)
{
    if (!c || c->B < 0 || c->B > 128 || c->S < 0 || c->NI < 1 || c->DI < 1 || c->DI > LI_MAX_DI || c->K < 1 ||
        c->BS < 1 || c->cmp_ratio < 1)
        return NULL;
    dsops_li_problem *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->c = *c;
    rng r = {seed};
    const li_data_kind kind = li_kind(c);
    const int B = c->B, S = c->S, NI = c->NI, DI = c->DI, K = c->K, BS = c->BS, R = c->cmp_ratio;
    const int64_t T = (int64_t)B * S;
    p->T = T;
    dsops_lightning_indexer_init(&p->args, R == 1 ? DSOPS_PRESET_V32 : DSOPS_PRESET_V4_FLASH);
    p->args.cmp_ratio = R;

    /* block counts: sequence b holds floor(seqused / R) keys */
    int64_t NB = 0, MB = 1;
    for (int b = 0; b < B; b++) {
        int64_t nb = (c->seqused[b] / R + BS - 1) / BS;
        NB += nb;
        MB = nb > MB ? nb : MB;
    }
    if (NB < 1)
        NB = 1;
    p->NB = NB;
    p->MB = MB;

    int32_t *cu = li_alloc(p, sizeof(int32_t) * (size_t)(B + 1));               /* [B+1] */
    int32_t *su = li_alloc(p, sizeof(int32_t) * (size_t)(B > 0 ? B : 1));       /* [B] */
    int32_t *bt = li_alloc(p, sizeof(int32_t) * (size_t)(B * MB));              /* [B, MB] */
    if (!cu || !su || !bt)
        goto fail;
    for (int b = 0; b <= B; b++)
        cu[b] = b * S;
    for (int b = 0; b < B; b++)
        su[b] = c->seqused[b];
    if (!cases_fill_block_table(&r, B, c->seqused, R, BS, NB, MB, bt))
        goto fail;

    /* queries and weights: one generator per (token, head) row and one per token for the weights */
    const size_t esz = c->int8 || c->fp8 ? 1 : 2;
    void *q = li_alloc(p, esz * (size_t)(T * NI * DI));                         /* [T, NI, DI] */
    uint16_t *qs = c->int8 ? li_alloc(p, sizeof(uint16_t) * (size_t)(T * NI)) : NULL; /* [T, NI] fp16 */
    void *w = li_alloc(p, 4 * (size_t)(T * NI));                                /* [T, NI] fp16 / bf16 / fp32 */
    if (!q || (c->int8 && !qs) || !w)
        goto fail;
#pragma omp parallel for schedule(static)
    for (int64_t th = 0; th < T * NI; th++) {
        rng rq = cases_row_rng(seed, STREAM_LI_Q, th);
        if (c->int8)
            qs[th] = li_int8_row(kind, &rq, (int8_t *)q + th * DI, DI);
        else if (c->fp8)
            li_fp8_row(&rq, (uint8_t *)q + th * DI, DI, 0);
        else
            li_bf16_row(&rq, (uint16_t *)q + th * DI, DI);
    }
    for (int64_t t = 0; t < T; t++) {
        rng rw = cases_row_rng(seed, STREAM_LI_W, t);
        float v[2];
        for (int h = 0; h < NI; h++) {
            uint16_t *w16 = w;
            if (kind == LI_DATA_ASCENDC) {
                w16[t * NI + h] = cases_fp16_bits(0.01f * cases_rng_unit(&rw));
                continue;
            }
            if (h % 2 == 0)
                cases_rng_normal(&rw, v, 2);
            float x = v[h % 2];
            if (c->fp8)
                ((float *)w)[t * NI + h] = x;
            else
                w16[t * NI + h] = !c->int8 ? cases_bf16_bits(x) : cases_fp16_bits(kind == LI_DATA_V4 ? x * 0.1f : x);
        }
    }

    /* key cache [NB, BS, DI] and key scales [NB, BS] fp16: one generator per physical row; fp8: DeepGEMM's
     * blocks of BS * (DI + 4) bytes, the values of row r at r * DI, its fp32 scale at BS * DI + 4 r */
    const int64_t rows = NB * BS, block_bytes = (int64_t)BS * (DI + 4);
    void *key = li_alloc(p, c->fp8 ? (size_t)(NB * block_bytes) : esz * (size_t)(rows * DI));
    uint16_t *ks = c->int8 ? li_alloc(p, sizeof(uint16_t) * (size_t)rows) : NULL;
    if (!key || (c->int8 && !ks) || (c->fp8 && DI % 4))
        goto fail;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        rng rk = cases_row_rng(seed, STREAM_LI_KEY, row);
        if (c->int8) {
            ks[row] = li_int8_row(kind, &rk, (int8_t *)key + row * DI, DI);
        } else if (c->fp8) {
            uint8_t *block = (uint8_t *)key + row / BS * block_bytes;
            float s = li_fp8_row(&rk, block + row % BS * DI, DI, 1);
            memcpy(block + (int64_t)BS * DI + row % BS * 4, &s, 4);
        } else {
            li_bf16_row(&rk, (uint16_t *)key + row * DI, DI);
        }
    }
    for (int64_t row = 4; c->ties && row < rows; row++) {
        memcpy((char *)key + (size_t)(row * DI) * esz, (char *)key + (size_t)(row % 4 * DI) * esz, (size_t)DI * esz);
        if (c->int8)
            ks[row] = ks[row % 4];
    }

    /* outputs */
    int32_t *idx = li_alloc(p, sizeof(int32_t) * (size_t)(T * K));             /* [T, K] */
    float *scores = c->with_scores ? li_alloc(p, sizeof(float) * (size_t)(T * K)) : NULL;
    float *logits = c->logits_len > 0 ? li_alloc(p, sizeof(float) * (size_t)(T * c->logits_len)) : NULL;
    if (!idx || (c->with_scores && !scores) || (c->logits_len > 0 && !logits))
        goto fail;

    const dsops_dtype qdt = c->int8 ? DSOPS_INT8 : c->fp8 ? DSOPS_FP8_E4M3 : DSOPS_BF16;
    int64_t s3[3] = {T, NI, DI}, s2[2] = {T, NI}, s1[1];
    p->args.q_idx = dsops_tensor_make(q, qdt, 3, s3);
    p->args.weights = dsops_tensor_make(w, c->int8 ? DSOPS_FP16 : c->fp8 ? DSOPS_FP32 : DSOPS_BF16, 2, s2);
    if (c->int8)
        p->args.q_idx_scale = dsops_tensor_make(qs, DSOPS_FP16, 2, s2);
    s3[0] = NB, s3[1] = BS, s3[2] = DI;
    p->args.key_cache = dsops_tensor_make(key, qdt, 3, s3);
    s2[0] = NB, s2[1] = BS;
    if (c->int8)
        p->args.key_scale_cache = dsops_tensor_make(ks, DSOPS_FP16, 2, s2);
    if (c->fp8) { /* two views of DeepGEMM's blocks */
        p->args.key_cache.stride[0] = block_bytes;
        p->args.key_scale_cache = dsops_tensor_make((uint8_t *)key + (int64_t)BS * DI, DSOPS_FP32, 2, s2);
        p->args.key_scale_cache.stride[0] = block_bytes / 4;
    }
    s2[0] = B, s2[1] = MB;
    p->args.block_table = dsops_tensor_make(bt, DSOPS_INT32, 2, s2);
    s1[0] = B + 1;
    p->args.cu_seqlens_q = dsops_tensor_make(cu, DSOPS_INT32, 1, s1);
    s1[0] = B;
    p->args.seqused_kv = dsops_tensor_make(su, DSOPS_INT32, 1, s1);
    s2[0] = T, s2[1] = K;
    p->args.topk_indices = dsops_tensor_make(idx, DSOPS_INT32, 2, s2);
    if (scores)
        p->args.topk_scores = dsops_tensor_make(scores, DSOPS_FP32, 2, s2);
    if (logits)
        p->args.logits = dsops_tensor_make(logits, DSOPS_FP32, 2, (int64_t[]){T, c->logits_len});

    /* work counters */
    int64_t scored = 0;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < S; i++) {
            int64_t L = (int64_t)c->seqused[b] - (S - 1 - i);
            scored += (L > 0 ? L : 0) / R;
        }
    p->scored = scored;
    p->ops = 2.0 * NI * (double)DI * (double)scored;
    p->key_bytes = (double)scored * (double)((int64_t)DI * (int64_t)esz + (c->int8 ? 2 : c->fp8 ? 4 : 0));
    return p;

fail:
    dsops_li_problem_free(p);
    return NULL;
}

/* ---- bench adapter ------------------------------------------------------------------------------- */
/* Alike in shape with the other families' adapters: bench_family.h says why each family keeps its own. */

/* lightning_indexer against the oracle by compare_topk with max_miss 1 and the refinements of the note in
 * docs/OPERATORS.md §1.8: per token, as many leading valid entries as the oracle's row and only -1 (score
 * -Inf) after them; valid indices distinct and below the token's visible key count; at most one index
 * absent from the oracle's row that is not a near-tie of its last valid score (within 1e-4 max|I| of the
 * token's score row); entries in the order of the oracle's scores (up to near-ties) and of their own scores
 * (exactly). topk_scores, where the case requests them, 1e-4 / 1e-4 / 0.005 over the indices both rows
 * hold (§4.3). */
static dsops_status li_run(dsops_context *ctx, void *p)
{
    return dsops_lightning_indexer(ctx, &((dsops_li_problem *)p)->args);
}

/* What the row comparisons share: marks of the keys in the current rows, and the oracle's whole score row
 * of one token, computed when a key outside the oracle's top-k must be judged. */
typedef struct li_compare_state {
    const dsops_li_problem *p;
    int64_t *in_got, *in_want; /* [keys] t + 1 where key j is in the library's / the oracle's row of token t */
    int32_t *want_slot;        /* [keys] the entry of key j in the oracle's row */
    float *score_row;          /* [keys] the oracle's scores I[0 .. n-1] of token scored_token */
    int64_t scored_token;      /* -1: none yet */
    double tie_tol;            /* 1e-4 max|I| over the finite scores of that row */
} li_compare_state;

/* Keys token t sees: floor(max(seqused - (S - 1 - i), 0) / cmp_ratio), i its place in its sequence. */
static int64_t li_visible_keys(const dsops_li_case *c, int64_t t)
{
    const int64_t L = (int64_t)c->seqused[t / c->S] - (c->S - 1 - t % c->S);
    return (L > 0 ? L : 0) / c->cmp_ratio;
}

static float li_oracle_score(li_compare_state *st, int64_t t, int32_t key)
{
    if (st->scored_token != t) {
        const int64_t n = dsops_ref_lightning_indexer_scores(&st->p->args, t, st->score_row);
        double amax = 0;
        for (int64_t j = 0; j < n; j++)
            if (isfinite(st->score_row[j]))
                amax = fmax(amax, fabs((double)st->score_row[j]));
        st->tie_tol = 1e-4 * amax;
        st->scored_token = t;
    }
    return st->score_row[key];
}

/* Two oracle scores whose keys may legitimately swap places: both NaN, the same infinity, or within tol. */
static int li_near_tie(float x, float y, double tol)
{
    return isnan(x) || isnan(y) ? isnan(x) && isnan(y)
         : isinf(x) || isinf(y) ? x == y
                                : fabs((double)x - (double)y) <= tol;
}

/* 0 when row t of the library (got, got_s: NULL without scores) passes against the oracle's row (want,
 * want_s), its score pairs then appended at pair_got / pair_want; else 1 with the reason in why. */
static int li_row_fault(li_compare_state *st, int64_t t, const int32_t *got, const float *got_s,
                        const int32_t *want, const float *want_s, float *pair_got, float *pair_want,
                        size_t *npairs, char *why, size_t cap)
{
    const int64_t K = st->p->c.K, n = li_visible_keys(&st->p->c, t), mark = t + 1;
    int64_t valid = 0, want_valid = 0, misses = 0;
    while (valid < K && got[valid] != -1)
        valid++;
    while (want_valid < K && want[want_valid] != -1)
        want_valid++;
    if (valid != want_valid)
        return snprintf(why, cap, "%lld valid entries, the oracle %lld", (long long)valid, (long long)want_valid), 1;
    for (int64_t k = valid; k < K; k++)
        if (got[k] != -1 || (got_s && !(isinf(got_s[k]) && got_s[k] < 0)))
            return snprintf(why, cap, "entry %lld after the valid ones is %d (score %g), not -1 (-Inf)",
                            (long long)k, got[k], got_s ? (double)got_s[k] : 0.0), 1;
    for (int64_t k = 0; k < valid; k++)
        st->in_want[want[k]] = mark, st->want_slot[want[k]] = (int32_t)k;
    for (int64_t k = 0; k < valid; k++) {
        const int32_t key = got[k];
        if (key < 0 || key >= n)
            return snprintf(why, cap, "entry %lld = %d is outside [0, %lld)", (long long)k, key, (long long)n), 1;
        if (st->in_got[key] == mark)
            return snprintf(why, cap, "index %d appears twice", key), 1;
        st->in_got[key] = mark;
        if (st->in_want[key] == mark)
            continue;
        const float score = li_oracle_score(st, t, key);
        if (!li_near_tie(score, want_s[valid - 1], st->tie_tol) && ++misses > 1)
            return snprintf(why, cap, "a second index absent from the oracle's row: entry %lld = %d, oracle "
                            "score %.9g, its last valid score %.9g", (long long)k, key, (double)score,
                            (double)want_s[valid - 1]), 1;
    }
    for (int64_t k = 1; k < valid; k++) {
        const int32_t a = got[k - 1], b = got[k];
        if (got_s && !dsops_ref_topk_before(got_s[k - 1], a, got_s[k], b))
            return snprintf(why, cap, "entries %lld, %lld = (%d, %.9g), (%d, %.9g) are not in the order of their "
                            "own scores", (long long)k - 1, (long long)k, a, (double)got_s[k - 1], b,
                            (double)got_s[k]), 1;
        if (st->in_want[a] == mark && st->in_want[b] == mark && st->want_slot[a] < st->want_slot[b])
            continue; /* the oracle's order */
        const float sa = li_oracle_score(st, t, a), sb = li_oracle_score(st, t, b);
        if (!dsops_ref_topk_before(sa, a, sb, b) && !li_near_tie(sa, sb, st->tie_tol))
            return snprintf(why, cap, "entries %lld, %lld = %d, %d are out of the oracle's order (scores %.9g, "
                            "%.9g)", (long long)k - 1, (long long)k, a, b, (double)sa, (double)sb), 1;
    }
    for (int64_t k = 0; got_s && k < valid; k++)
        if (st->in_want[got[k]] == mark) {
            pair_got[*npairs] = got_s[k];
            pair_want[(*npairs)++] = want_s[st->want_slot[got[k]]];
        }
    return 0;
}

/* The logits rows against the oracle's (want): -Inf exactly where the oracle has it (past the visible keys), the
 * scores within 1e-4 / 1e-4. Returns 1 with the reason in why on a fault. */
static int li_logits_fault(const dsops_li_problem *p, const float *want, char *why, size_t cap)
{
    const int64_t L = p->c.logits_len;
    const size_t n = (size_t)(p->T * L);
    float *got_f = malloc(n * 4 + 4), *want_f = malloc(n * 4 + 4);
    if (!got_f || !want_f) {
        free(got_f), free(want_f);
        return bench_out_of_memory(why, cap);
    }
    const float *got = p->args.logits.data;
    size_t m = 0, bad = 0, total = 0;
    int fault = 0;
    for (size_t i = 0; i < n && !fault; i++) {
        const int got_ninf = isinf(got[i]) && got[i] < 0, want_ninf = isinf(want[i]) && want[i] < 0;
        if (got_ninf != want_ninf) {
            snprintf(why, cap, "logits[%lld][%lld] = %g, the oracle %g", (long long)(i / (size_t)L),
                     (long long)(i % (size_t)L), (double)got[i], (double)want[i]);
            fault = 1;
        } else if (!want_ninf) {
            got_f[m] = got[i], want_f[m++] = want[i];
        }
    }
    double max_err = 0;
    bench_count_outside(got_f, want_f, DSOPS_FP32, m, 1e-4, 1e-4, &bad, &total, &max_err);
    if (!fault && bench_too_many(bad, total)) {
        snprintf(why, cap, "logits: %zu of %zu scores outside 1e-4 / 1e-4 (max |err| %.3g)", bad, total, max_err);
        fault = 1;
    }
    free(got_f), free(want_f);
    return fault;
}

static int li_check(void *pv, char *why, size_t cap)
{
    const dsops_li_problem *p = pv;
    const int64_t T = p->T, K = p->c.K;
    const size_t entries = (size_t)(T * K) + 1;
    int64_t keys = 1;
    for (int b = 0; b < p->c.B; b++)
        keys = p->c.seqused[b] / p->c.cmp_ratio + 1 > keys ? p->c.seqused[b] / p->c.cmp_ratio + 1 : keys;
    li_compare_state st = {p, calloc((size_t)keys, 8), calloc((size_t)keys, 8), calloc((size_t)keys, 4),
                           calloc((size_t)keys, 4), -1, 0.0};
    int32_t *want = malloc(entries * 4);
    float *want_s = malloc(entries * 4), *pair_got = malloc(entries * 4), *pair_want = malloc(entries * 4);
    const int with_logits = p->args.logits.data != NULL;
    float *want_logits = with_logits ? malloc((size_t)(T * p->c.logits_len) * 4 + 4) : NULL;
    int fault = 1;
    if (!st.in_got || !st.in_want || !st.want_slot || !st.score_row || !want || !want_s || !pair_got || !pair_want ||
        (with_logits && !want_logits)) {
        bench_out_of_memory(why, cap);
        goto done;
    }
    dsops_lightning_indexer_args r = p->args; /* scores always: they judge misses and order */
    r.topk_indices = dsops_tensor_make(want, DSOPS_INT32, 2, (int64_t[]){T, K});
    r.topk_scores = dsops_tensor_make(want_s, DSOPS_FP32, 2, (int64_t[]){T, K});
    if (with_logits) /* one oracle run gives both */
        r.logits = dsops_tensor_make(want_logits, DSOPS_FP32, 2, (int64_t[]){T, p->c.logits_len});
    dsops_ref_lightning_indexer(&r);
    const int32_t *got = p->args.topk_indices.data;
    const float *got_s = p->args.topk_scores.data;
    int64_t bad_rows = 0;
    size_t npairs = 0, bad_scores = 0, total_scores = 0;
    double max_err = 0;
    char first[300] = "", row_why[240];
    for (int64_t t = 0; t < T; t++)
        if (li_row_fault(&st, t, got + t * K, got_s ? got_s + t * K : NULL, want + t * K, want_s + t * K, pair_got,
                         pair_want, &npairs, row_why, sizeof row_why) &&
            bad_rows++ == 0)
            snprintf(first, sizeof first, " (first: token %lld: %s)", (long long)t, row_why);
    bench_count_outside(pair_got, pair_want, DSOPS_FP32, npairs, 1e-4, 1e-4, &bad_scores, &total_scores, &max_err);
    if (got_s)
        snprintf(row_why, sizeof row_why, "%zu of %zu outside 1e-4 / 1e-4 (max |err| %.3g)", bad_scores,
                 total_scores, max_err);
    snprintf(why, cap, "%lld of %lld rows fail compare_topk%s; topk_scores: %s", (long long)bad_rows, (long long)T,
             first, got_s ? row_why : "not requested");
    fault = bad_rows != 0 || bench_too_many(bad_scores, total_scores);
    if (!fault && with_logits)
        fault = li_logits_fault(p, want_logits, why, cap);
done:
    free(st.in_got), free(st.in_want), free(st.want_slot), free(st.score_row);
    free(want), free(want_s), free(pair_got), free(pair_want), free(want_logits);
    return fault;
}

static void li_release(void *p) { dsops_li_problem_free(p); }

static int li_make_problem(const void *cv, bench_problem *bp, char *why, size_t cap)
{
    const dsops_li_case *c = cv;
    dsops_li_problem *p = dsops_li_problem_make(c, 42);
    if (!p)
        return bench_cannot_generate(why, cap);
    /* the description's record adds the top-k width that sizes the outputs */
    void *record = cases_wrapped_record(OWNED_LIST(p), "lightning_indexer", &p->args, sizeof p->args, "topk",
                                        (int)p->args.topk_indices.shape[1]);
    if (!record) {
        dsops_li_problem_free(p);
        return bench_out_of_memory(why, cap);
    }
    *bp = (bench_problem){p, li_run, li_check, li_release, p->ops, p->key_bytes,
                          c->int8 ? DSOPS_PEAK_INT8_DOT : DSOPS_PEAK_BF16_DOT, .args = record};
    if (c->logits_len > 0 && cases_record_set_int(record, "lightning_indexer", "logits_len", c->logits_len) != 0) {
        dsops_li_problem_free(p);
        return bench_out_of_memory(why, cap);
    }
    return 0;
}

static void li_words(const void *cv, char *op, size_t oc, char *sh, size_t sc)
{
    const dsops_li_case *c = cv;
    snprintf(op, oc, "lightning_indexer");
    snprintf(sh, sc, "B %d S %d kv %d K %d", c->B, c->S, c->seqused[0], c->K);
}

static void li_list_line(const void *cv, const char *not_ci)
{
    const dsops_li_case *c = cv;
    printf("%-40s lightning_indexer           B %-3d S %-4d NI %-3d DI %-3d K %-5d ratio %d %s%s\n", c->name, c->B,
           c->S, c->NI, c->DI, c->K, c->cmp_ratio, c->int8 ? "int8" : c->fp8 ? "fp8" : "bf16", not_ci);
}

static const void *li_table(int *count) { return dsops_li_cases(count); }

const bench_family bench_family_lightning_indexer = {
    .op = "lightning_indexer",
    .table_word = "lightning_indexer",
    .cases = li_table,
    .case_size = sizeof(dsops_li_case),
    .ci_offset = offsetof(dsops_li_case, ci),
    .make_problem = li_make_problem,
    .words = li_words,
    .list_line = li_list_line,
};

/* ==== adversarial problems (problems.h) ====================================================================
 * Small lightning_indexer problems for tests/test_li.c and the programs that share them (test_li_validation,
 * test_determinism): any shape, block size and cmp_ratio; exact tie patterns, extreme int8 values, fp16 overflow /
 * underflow of the head weights, NaN weights and key scales, NaN-poisoned unused cache rows, garbage in unused
 * block-table entries, strided views, guard zones around the outputs; and the oracle's results on them. The tests
 * judge a library call on them (tests/problems_check.c: compare_topk of spec §1.8 extended for near-ties). */

static uint16_t h16(float f) { return dsops_ref_fp16_from_f32(f); }

#define LP_FP16_NAN ((uint16_t)0x7e00)
#define LP_BF16_NAN ((uint16_t)0x7fc0)

/* ---- building ---------------------------------------------------------------------------------------- */

/* integer in [-2, 2] from a pattern and a position: the value tables of the exact (tie) modes */
static int small_value(uint64_t pattern, int64_t pos)
{
    uint64_t h = (pattern + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)pos * 0xbf58476d1ce4e5b9ull);
    h ^= h >> 29;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 32;
    return (int)(h % 5) - 2;
}

/* The bf16 problem p as the fp8 variant (spec: lp_spec.fp8): every element of the query and key buffers,
 * padding included, rounded to e4m3; the weights widened to fp32; key scales drawn. */
static void to_fp8(lp_problem *p, rng *gen, const unsigned char *row_used)
{
    dsops_lightning_indexer_args *a = &p->args;
    const lp_spec *sp = &p->sp;
    void *bufs[2] = {p->qbuf, p->kbuf};
    dsops_tensor *views[2] = {&a->q_idx, &a->key_cache};
    size_t counts[2] = {(size_t)(a->q_idx.shape[0] * a->q_idx.stride[0]), (size_t)(p->NB * a->key_cache.stride[0])};
    for (int k = 0; k < 2; k++) {
        const uint16_t *src = bufs[k];
        uint8_t *dst = cases_xcalloc(counts[k] + 1, 1);
        for (size_t i = 0; i < counts[k]; i++)
            dst[i] = dsops_ref_e4m3_from_f32(cases_bf16_value(src[i]));
        free(bufs[k]);
        views[k]->data = dst;
        views[k]->dtype = DSOPS_FP8_E4M3;
    }
    p->qbuf = a->q_idx.data, p->kbuf = a->key_cache.data;
    const size_t wn = (size_t)(a->weights.shape[0] * a->weights.stride[0]) + 1;
    float *w = cases_xcalloc(wn, sizeof(float));
    for (size_t i = 0; i < wn - 1; i++)
        w[i] = cases_bf16_value(((const uint16_t *)p->wbuf)[i]);
    free(p->wbuf);
    p->wbuf = w;
    a->weights.data = w;
    a->weights.dtype = DSOPS_FP32;
    const int64_t BS = sp->BS, ss = BS + (sp->strided_kv ? 5 : 0);
    float *ks = cases_xcalloc((size_t)(p->NB * ss), sizeof(float));
    const int exact = sp->data == LP_DATA_EQUAL || sp->data == LP_DATA_TIES;
    for (int64_t i = 0; i < p->NB * ss; i++)
        ks[i] = NAN;
    for (int64_t row = 0; row < p->NB * BS; row++) {
        float s = exact ? 1.0f : cases_rng_uniform(gen, 0.5f, 2.0f); /* exact modes: the scores' ties kept */
        if ((sp->key_nan && row % 5 == 1) || (sp->nan_fill && !row_used[row]))
            s = NAN;
        ks[row / BS * ss + row % BS] = s;
    }
    p->ksbuf = ks;
    int64_t shape2[2] = {p->NB, BS}, stride2[1] = {ss};
    a->key_scale_cache = cases_view(ks, DSOPS_FP32, 2, shape2, stride2);
}

lp_problem *lp_make(const lp_spec *spec, uint64_t seed)
{
    lp_problem *p = cases_xcalloc(1, sizeof *p);
    p->sp = *spec;
    lp_spec *sp = &p->sp;
    if (sp->cmp_ratio == 0)
        sp->cmp_ratio = 1;
    if (sp->B > LP_MAX_B) {
        fprintf(stderr, "lp_make: spec too large\n");
        abort();
    }
    p->strict = sp->data == LP_DATA_EQUAL || sp->data == LP_DATA_TIES;
    rng gen = {seed};
    const int B = sp->B, NI = sp->NI, DI = sp->DI, K = sp->K, BS = sp->BS, R = sp->cmp_ratio;
    const int i8 = sp->int8;

    /* sequences: cu [B+1], used [B] */
    const int64_t T = p->T = cases_sequences(B, sp->S, sp->seqused, &p->cu, &p->used);

    /* block table [B, MB]: a random permutation of the physical blocks, six kinds of garbage; sequence b
     * holds floor(seqused / R) keys */
    int64_t keys[LP_MAX_B];
    unsigned char dead[LP_MAX_B];
    for (int b = 0; b < B; b++) {
        keys[b] = sp->seqused[b] / R;
        dead[b] = sp->dead_seq_garbage && sp->S[b] == 0;
    }
    const cases_paging pg = cases_block_table(&gen, B, keys, BS, sp->extra_blocks, sp->extra_cols,
                                              sp->garbage_table ? 6 : 0, dead);
    const int64_t NB = p->NB = pg.NB, MB = p->MB = pg.MB;
    p->table = pg.table;
    free(pg.owner);

    /* which cache rows can some token of the call see? (the last token of a sequence sees the most) */
    const int64_t rows = NB * BS;
    unsigned char *row_used = cases_xcalloc((size_t)rows, 1);
    for (int b = 0; b < B; b++) {
        if (sp->S[b] == 0)
            continue;
        int64_t n = sp->seqused[b] / R;
        for (int64_t j = 0; j < n; j++)
            row_used[(int64_t)p->table[b * MB + j / BS] * BS + j % BS] = 1;
    }

    dsops_lightning_indexer_args *a = &p->args;
    dsops_lightning_indexer_init(a, DSOPS_PRESET_V32);
    a->cmp_ratio = R;
    const dsops_dtype qdt = i8 ? DSOPS_INT8 : DSOPS_BF16;
    const size_t esz = i8 ? 1 : 2;

    /* query-side views: [T, NI, DI] and [T, NI], padded when strided (padding = NaN / 0x7f bytes) */
    {
        int64_t W = DI + (sp->strided_q ? 5 : 0), ts = NI * W + (sp->strided_q ? 3 : 0);
        size_t qn = (size_t)(T * ts) * esz;
        p->qbuf = cases_xcalloc(qn, 1);
        memset(p->qbuf, 0xff, qn);
        int64_t shape[3] = {T, NI, DI}, stride[2] = {ts, W};
        a->q_idx = cases_view(p->qbuf, qdt, 3, shape, stride);
        int64_t ws = NI + (sp->strided_q ? 2 : 0);
        int64_t shape2[2] = {T, NI}, stride2[1] = {ws};
        p->wbuf = cases_xcalloc((size_t)(T * ws), 2);
        memset(p->wbuf, 0xff, (size_t)(T * ws) * 2);
        a->weights = cases_view(p->wbuf, i8 ? DSOPS_FP16 : DSOPS_BF16, 2, shape2, stride2);
        if (i8) {
            p->qsbuf = cases_xcalloc((size_t)(T * ws), 2);
            memset(p->qsbuf, 0xff, (size_t)(T * ws) * 2);
            a->q_idx_scale = cases_view(p->qsbuf, DSOPS_FP16, 2, shape2, stride2);
        }
    }
    /* cache views: [NB, BS, DI] and [NB, BS] */
    {
        int64_t W = DI + (sp->strided_kv ? 3 : 0), bs = BS * W + (sp->strided_kv ? 7 : 0);
        size_t kn = (size_t)(NB * bs) * esz;
        p->kbuf = cases_xcalloc(kn, 1);
        memset(p->kbuf, i8 ? 0x80 : 0xff, kn); /* int8 -128, bf16 NaN where nothing is written */
        int64_t shape[3] = {NB, BS, DI}, stride[2] = {bs, W};
        a->key_cache = cases_view(p->kbuf, qdt, 3, shape, stride);
        if (i8) {
            int64_t ss = BS + (sp->strided_kv ? 5 : 0);
            p->ksbuf = cases_xcalloc((size_t)(NB * ss), 2);
            for (int64_t i = 0; i < NB * ss; i++)
                ((uint16_t *)p->ksbuf)[i] = LP_FP16_NAN;
            int64_t shape2[2] = {NB, BS}, stride2[1] = {ss};
            a->key_scale_cache = cases_view(p->ksbuf, DSOPS_FP16, 2, shape2, stride2);
        }
    }

    /* queries, scales and weights */
    const int exact = sp->data == LP_DATA_EQUAL || sp->data == LP_DATA_TIES;
    for (int64_t t = 0; t < T; t++) {
        uint64_t qpat = cases_rng_next(&gen);
        for (int h = 0; h < NI; h++) {
            for (int d = 0; d < DI; d++) {
                if (i8) {
                    int8_t v;
                    if (exact)
                        v = (int8_t)small_value(qpat, (int64_t)h * DI + d);
                    else if (sp->data == LP_DATA_EXTREME)
                        v = (int8_t)(h % 2 == 0 || cases_rng_int(&gen, 0, 1) ? -128 : 127);
                    else
                        v = (int8_t)cases_rng_int(&gen, -128, 127);
                    cases_put_i8(&a->q_idx, t, h, d, v);
                } else {
                    float v = exact ? (float)small_value(qpat, (int64_t)h * DI + d)
                                    : cases_rng_uniform(&gen, -1.0f, 1.0f);
                    cases_put_u16(&a->q_idx, t, h, d, cases_bf16_bits(v));
                }
            }
            /* weights: small integers (exact modes) or U(-1, 1); negative when asked */
            float w = exact ? (float)cases_rng_int(&gen, -2, 3) : cases_rng_uniform(&gen, -1.0f, 1.0f);
            if (sp->neg_weights)
                w = -(fabsf(w) + (exact ? 1.0f : 0.001f));
            float qs = exact ? 1.0f : cases_rng_uniform(&gen, 0.5f, 2.0f);
            if (i8 && sp->ws_extreme) {
                int kind = (int)(t % 3);
                if (kind == 0 && h == (int)(t % NI)) {
                    qs = 30000.0f, w = 4.0f;            /* 120000 -> +Inf */
                } else if (kind == 1 && h == (int)(t % NI)) {
                    qs = 30000.0f, w = -4.0f;           /* -Inf */
                } else if (kind == 2 && h % 2 == 0) {
                    if (h % 4 == 0 || exact)
                        qs = 0x1p-14f, w = 0x1p-14f;    /* 2^-28 -> 0 */
                    else
                        qs = 0x1p-12f, w = 0.37f;       /* subnormal fp16 */
                }
            }
            if (sp->nan_weights && t % 4 == 3 && h == NI / 2) {
                cases_put_u16(&a->weights, t, h, 0, i8 ? LP_FP16_NAN : LP_BF16_NAN);
            } else {
                cases_put_u16(&a->weights, t, h, 0, i8 ? h16(w) : cases_bf16_bits(w));
            }
            if (i8)
                cases_put_u16(&a->q_idx_scale, t, h, 0, h16(qs));
        }
    }

    if (sp->q_nonfinite)
        for (int64_t t = 0; t < T; t++) {
            const int kind = (int)(t % 4), h = NI / 2;
            if (kind == 0)
                continue;
            const float v = kind == 1 ? NAN : INFINITY;
            if (i8)
                cases_put_u16(&a->q_idx_scale, t, h, 0, h16(v));
            else
                cases_put_u16(&a->q_idx, t, h, 0, cases_bf16_bits(v));
            if (kind > 1)
                cases_put_u16(&a->weights, t, h, 0,
                              i8 ? h16(kind == 2 ? 1.0f : -1.0f) : cases_bf16_bits(kind == 2 ? 1.0f : -1.0f));
        }

    /* cache rows: drawn for every physical row (so the data do not depend on nan_fill), stored only
     * where a token can see them when nan_fill is set */
    int npat = sp->data == LP_DATA_EQUAL ? 1 : 5;
    uint64_t kpat_base = cases_rng_next(&gen);
    for (int64_t row = 0; row < rows; row++) {
        int64_t blk = row / BS, off = row % BS;
        int store = !sp->nan_fill || row_used[row];
        /* the pattern of an exact-mode row depends on its logical position, not on the physical row:
         * use the row number only to pick one of few patterns */
        uint64_t pat = kpat_base + (uint64_t)(cases_rng_next(&gen) % (uint64_t)npat);
        for (int d = 0; d < DI; d++) {
            if (i8) {
                int8_t v;
                if (exact)
                    v = (int8_t)small_value(pat, d);
                else if (sp->data == LP_DATA_EXTREME)
                    v = (int8_t)(row % 4 == 0 || cases_rng_int(&gen, 0, 1) ? -128 : 127);
                else
                    v = (int8_t)cases_rng_int(&gen, -128, 127);
                if (store)
                    cases_put_i8(&a->key_cache, blk, off, d, v);
            } else {
                float v = exact ? (float)small_value(pat, d) : cases_rng_uniform(&gen, -1.0f, 1.0f);
                if (store)
                    cases_put_u16(&a->key_cache, blk, off, d,
                                  sp->key_nan && row % 5 == 1 && d == 0 ? LP_BF16_NAN : cases_bf16_bits(v));
            }
        }
        if (i8) {
            float ks = exact ? (float)(1 << (pat % 3)) * 0.5f : cases_rng_uniform(&gen, 0.001f, 0.1f);
            if (sp->neg_scales && row % 3 == 1)
                ks = -ks;
            uint16_t ksh = h16(ks);
            if ((sp->nan_key_scales && row % 7 == 2) || (sp->key_nan && row % 5 == 1))
                ksh = LP_FP16_NAN;
            if (store)
                cases_put_u16(&a->key_scale_cache, blk, off, 0, ksh);
        }
    }
    if (sp->fp8 && !i8)
        to_fp8(p, &gen, row_used);
    free(row_used);

    /* index tensors */
    cases_sequence_views(B, MB, p->table, p->cu, p->used, &a->block_table, &a->cu_seqlens_q, &a->seqused_kv);

    /* outputs inside guarded (and, when strided, padded) buffers */
    int64_t ots = K + (sp->strided_out ? 3 : 0);
    p->idx_buf_n = T * ots + 2 * CASES_GUARD;
    p->idx_buf = cases_xcalloc((size_t)p->idx_buf_n, sizeof(int32_t));
    int64_t oshape[2] = {T, K}, ostride[1] = {ots};
    a->topk_indices = cases_view(p->idx_buf + CASES_GUARD, DSOPS_INT32, 2, oshape, ostride);
    if (sp->with_scores) {
        int64_t sts = K + (sp->strided_out ? 5 : 0);
        p->score_buf_n = T * sts + 2 * CASES_GUARD;
        p->score_buf = cases_xcalloc((size_t)p->score_buf_n, sizeof(float));
        int64_t sstride[1] = {sts};
        a->topk_scores = cases_view(p->score_buf + CASES_GUARD, DSOPS_FP32, 2, oshape, sstride);
    }
    lp_reset_outputs(p);
    return p;
}

/* Free, sentinels and oracle: the life cycle of sparse_flash_attention_v32.c's tp_* problems on this operator's
 * own buffers and outputs; alike but for those, so each operator keeps its own (problems.h). */
void lp_free(lp_problem *p)
{
    if (!p)
        return;
    free(p->qbuf);
    free(p->qsbuf);
    free(p->wbuf);
    free(p->kbuf);
    free(p->ksbuf);
    free(p->table);
    free(p->cu);
    free(p->used);
    free(p->idx_buf);
    free(p->score_buf);
    free(p->ref_idx);
    free(p->ref_scores);
    free(p);
}

void lp_reset_outputs(lp_problem *p)
{
    cases_fill_sentinel(p->idx_buf, sizeof(int32_t), p->idx_buf_n, (uint32_t)LP_SENTINEL_I32);
    cases_fill_sentinel(p->score_buf, sizeof(float), p->score_buf_n, LP_SENTINEL_F32_BITS);
}

int lp_outputs_untouched(const lp_problem *p)
{
    return cases_holds_sentinel(p->idx_buf, sizeof(int32_t), p->idx_buf_n, (uint32_t)LP_SENTINEL_I32) &&
           cases_holds_sentinel(p->score_buf, sizeof(float), p->score_buf_n, LP_SENTINEL_F32_BITS);
}

void lp_reference_of(const dsops_lightning_indexer_args *a, int32_t **ref_idx, float **ref_scores)
{
    const int64_t T = a->topk_indices.shape[0], K = a->topk_indices.shape[1];
    dsops_lightning_indexer_args r = *a;
    *ref_idx = cases_xcalloc((size_t)(T * K), sizeof(int32_t));
    *ref_scores = cases_xcalloc((size_t)(T * K), sizeof(float));
    int64_t s2[2] = {T, K};
    r.topk_indices = dsops_tensor_make(*ref_idx, DSOPS_INT32, 2, s2);
    r.topk_scores = dsops_tensor_make(*ref_scores, DSOPS_FP32, 2, s2);
    dsops_ref_lightning_indexer(&r);
}

void lp_compute_ref(lp_problem *p)
{
    free(p->ref_idx);
    free(p->ref_scores);
    lp_reference_of(&p->args, &p->ref_idx, &p->ref_scores);
}

void lp_poison_outputs(const dsops_lightning_indexer_args *a)
{
    const int64_t T = a->topk_indices.shape[0], K = a->topk_indices.shape[1];
    const int32_t junk = 0x7f7f7f7f;
    const uint32_t nan32 = 0xffffffffu;
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < K; k++) {
            memcpy(tf_eaddr(&a->topk_indices, t, k, 0), &junk, 4);
            if (a->topk_scores.data)
                memcpy(tf_eaddr(&a->topk_scores, t, k, 0), &nan32, 4);
        }
}

void lp_extract(const dsops_lightning_indexer_args *a, int32_t *idx, uint32_t *scores)
{
    const int64_t T = a->topk_indices.shape[0], K = a->topk_indices.shape[1];
    for (int64_t t = 0; t < T; t++) {
        memcpy(idx + t * K, tf_eaddr(&a->topk_indices, t, 0, 0), sizeof(int32_t) * (size_t)K);
        if (scores && a->topk_scores.data)
            memcpy(scores + t * K, tf_eaddr(&a->topk_scores, t, 0, 0), sizeof(float) * (size_t)K);
    }
}

int64_t lp_visible(const dsops_lightning_indexer_args *a, int64_t t)
{
    const int64_t B = a->seqused_kv.shape[0];
    for (int64_t b = 0; b < B; b++) {
        const int64_t t0 = *(const int32_t *)tf_eaddr(&a->cu_seqlens_q, b, 0, 0);
        const int64_t t1 = *(const int32_t *)tf_eaddr(&a->cu_seqlens_q, b + 1, 0, 0);
        if (t < t0 || t >= t1)
            continue;
        const int64_t L = (int64_t)*(const int32_t *)tf_eaddr(&a->seqused_kv, b, 0, 0) - (t1 - t0 - 1 - (t - t0));
        return (L > 0 ? L : 0) / a->cmp_ratio;
    }
    return 0;
}
