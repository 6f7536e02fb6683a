/* sas (docs/OPERATORS.md §3.7; docs/CASES.md "sas: swa, cfa, scfa" and the sas edge cases): the named cases,
 * their data generator and the bench adapter.
 *
 * Data (seed 42, cfa 0 in docs/CASES.md; the caller's seed here):
 *   q                      U(-1,1) bf16                                          [T, N, D]
 *   ori_kv                 U(-1,1) bf16, every physical row                      [NBW, BSW, D]
 *   cmp_kv                 U(-1,1) bf16, every physical row                      [NBC, BSC, D]
 *   sinks                  U(-1,1) fp32 (v4_sas_edge_sink_inf: +Inf)             [N]
 *   cmp_indices (scfa)     per sequence, with cmp = floor(seqused / cmp_ratio): cmp < K: 0 ... cmp-1 then
 *                          zeros; else the first K of a random permutation of 0 ... cmp-1; the same row for
 *                          every token of the sequence (not causally restricted)    [T, K]
 *   cmp_topk_length        vendor_count cases: max(cmp - S_b + 1 + i, 0) (docs/OPERATORS.md §3.7, §5)   [T]
 *   block tables           one distinct physical block per needed logical block (a random permutation of
 *                          each pool's blocks), -1 in every other column. Window pool: the blocks of
 *                          positions L_0 - w_0 ... seqused - 1 of each sequence (the window of its first
 *                          token up to its last position); compressed pool: entries 0 ... cmp - 1.
 *   parameters             dsops_sas_init(V4-Flash, variant); while that is unavailable the documented
 *                          defaults (scale 512^-0.5, window 128; cfa dense, ratio 128, tiled 128; scfa
 *                          sparse, ratio 4, normalised)
 *
 * Edge cases carry what the case fields cannot say in a small table below (sas_special): a window of 0, all
 * indices -1, infinite sinks, indices taken from a lightning_indexer case.
 *
 * out and lse have room for one more token after their end that no view covers, so a test can plant
 * guard values there. Each generated row draws from its own generator seeded from (seed, stream, row): the
 * data do not depend on the thread count.
 *
 * The adversarial problems of the tests (problems.h, sp_*) are at the end. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_family.h"
#include "cases.h"
#include "cases_internal.h"
#include "ref.h"

/* ---- the case table ------------------------------------------------------------------------------ */

/* V4-Flash attention: N 64, D 512, block size 128 in both pools */
#define SAS_DIMS .N = 64, .D = 512, .BSW = 128, .BSC = 128

static const dsops_sas_case sas_cases[] = {
    /* the vendor's timed decode shape: B 64, S 2 (MTP 1), context 8K */
    {.name = "v4_swa_b64_s2_kv8k", .variant = DSOPS_SAS_SWA, .B = 64, .S = 2, .seqused = {REP64(8192)},
     SAS_DIMS, .with_sinks = 1, .seed = 42, .vendor_us = 65, .vendor = "PyPTO", .ci = 1},
    /* tokens see 8191 and 8192 positions: 63 and 64 compressed entries */
    {.name = "v4_cfa_b64_s2_kv8k", .variant = DSOPS_SAS_CFA, .B = 64, .S = 2, .seqused = {REP64(8192)},
     SAS_DIMS, .with_sinks = 1, .seed = 0, .vendor_us = 90, .vendor = "PyPTO", .ci = 1},
    {.name = "v4_scfa_b1_s4_kv64k", .variant = DSOPS_SAS_SCFA, .B = 1, .S = 4, .seqused = {65536}, SAS_DIMS,
     .K = 512, .with_sinks = 1, .with_lse = 1, .vendor_count = 1, .seed = 42, .ci = 1},
    {.name = "v4_scfa_b1_s256_kv64k", .variant = DSOPS_SAS_SCFA, .B = 1, .S = 256, .seqused = {65536}, SAS_DIMS,
     .K = 512, .with_sinks = 1, .with_lse = 1, .vendor_count = 1, .seed = 42, .ci = 0,
     .ci_variant = "v4_scfa_b1_s256_kv64k_ci"},
    {.name = "v4_scfa_b1_s256_kv64k_ci", .variant = DSOPS_SAS_SCFA, .B = 1, .S = 64, .seqused = {65536}, SAS_DIMS,
     .K = 512, .with_sinks = 1, .with_lse = 1, .vendor_count = 1, .seed = 42, .ci = 1},
    /* cu [0, 16, 32, 48, 49] */
    {.name = "v4_scfa_b4_s16_kv64k", .variant = DSOPS_SAS_SCFA, .B = 4, .S = 16, .S_each = {16, 16, 16, 1},
     .seqused = {REP4(65536)}, SAS_DIMS, .K = 512, .with_sinks = 1, .with_lse = 1, .vendor_count = 1,
     .seed = 42, .ci = 1},
    /* 32 compressed entries; counts 17 ... 32 with the vendor count, 28 ... 32 causal (clear
     * cmp_topk_length for the latter) */
    {.name = "v4_scfa_b1_s16_kv130", .variant = DSOPS_SAS_SCFA, .B = 1, .S = 16, .seqused = {130}, SAS_DIMS,
     .K = 512, .with_sinks = 1, .with_lse = 1, .vendor_count = 1, .seed = 42, .ci = 1},
    {.name = "v4_scfa_b64_s2_kv8k", .variant = DSOPS_SAS_SCFA, .B = 64, .S = 2, .seqused = {REP64(8192)},
     SAS_DIMS, .K = 512, .with_sinks = 1, .vendor_count = 1, .seed = 42, .vendor_us = 160, .vendor = "PyPTO",
     .ci = 1},
    /* V4-Pro: N 128, K 1024; indices = the top-k of v4_li_pro_b4_s2_kv64k (sas_special) */
    {.name = "v4_scfa_pro_b4_s2_kv64k", .variant = DSOPS_SAS_SCFA, .B = 4, .S = 2, .seqused = {REP4(65536)},
     .N = 128, .D = 512, .BSW = 128, .BSC = 128, .K = 1024, .with_sinks = 1, .with_lse = 1, .seed = 42, .ci = 1},

    /* edge cases that are valid calls (the error case v4_sas_edge_bad_table is built by the validation
     * test from one of these) */
    /* seqused 5, S 2: dsops counts 1, 1; the vendor count 0, 1 (token 0 window-only); clear
     * cmp_topk_length for the dsops count */
    {.name = "v4_scfa_edge_kv5_s2", .variant = DSOPS_SAS_SCFA, .B = 1, .S = 2, .seqused = {5}, SAS_DIMS, .K = 512,
     .with_sinks = 1, .with_lse = 1, .vendor_count = 1, .seed = 42, .ci = 1},
    /* win_size 0 and every index -1 (sas_special): every token lonely, out 0, lse +Inf; sequence 1 also has
     * a token with L = 0 */
    {.name = "v4_sas_edge_lonely", .variant = DSOPS_SAS_SCFA, .B = 2, .S = 2, .seqused = {1000, 1}, .N = 64,
     .D = 512, .BSW = 0, .BSC = 128, .K = 512, .with_sinks = 1, .with_lse = 1, .seed = 42, .ci = 1},
    /* every sink +Inf (sas_special): out 0, lse as without sinks */
    {.name = "v4_sas_edge_sink_inf", .variant = DSOPS_SAS_SCFA, .B = 2, .S = 2, .seqused = {300, 2900}, SAS_DIMS,
     .K = 512, .with_sinks = 1, .with_lse = 1, .seed = 42, .ci = 1},
    /* one head, one row per block in both pools; sequence 0 has fewer compressed entries than K, sequence 1
     * more */
    {.name = "v4_sas_edge_n1_bs1", .variant = DSOPS_SAS_SCFA, .B = 2, .S = 3, .seqused = {37, 300}, .N = 1,
     .D = 512, .BSW = 1, .BSC = 1, .K = 16, .with_sinks = 1, .with_lse = 1, .seed = 42, .ci = 1},

    /* dsops: both pools as FlashMLA's MODEL1 FP8 blocks (pool_layout model1_fp8) of the rows above */
    {.name = "v4_swa_fp8_b64_s2_kv8k", .variant = DSOPS_SAS_SWA, .B = 64, .S = 2, .seqused = {REP64(8192)},
     SAS_DIMS, .with_sinks = 1, .seed = 42, .model1_fp8 = 1, .ci = 1},
    {.name = "v4_cfa_fp8_b4_s2_kv8k", .variant = DSOPS_SAS_CFA, .B = 4, .S = 2, .seqused = {REP4(8192)},
     SAS_DIMS, .with_sinks = 1, .with_lse = 1, .seed = 0, .model1_fp8 = 1, .ci = 1},
    {.name = "v4_scfa_fp8_b64_s2_kv8k", .variant = DSOPS_SAS_SCFA, .B = 64, .S = 2, .seqused = {REP64(8192)},
     SAS_DIMS, .K = 512, .with_sinks = 1, .vendor_count = 1, .seed = 42, .model1_fp8 = 1, .ci = 1},
    {.name = "v4_scfa_fp8_edge_n1_bs1", .variant = DSOPS_SAS_SCFA, .B = 2, .S = 3, .seqused = {37, 300}, .N = 1,
     .D = 512, .BSW = 1, .BSC = 1, .K = 16, .with_sinks = 1, .with_lse = 1, .seed = 42, .model1_fp8 = 1, .ci = 1},
};

const dsops_sas_case *dsops_sas_cases(int *count) { return CASES_TABLE(sas_cases, count); }
const dsops_sas_case *dsops_sas_case_find(const char *name) { return CASES_FIND(sas_cases, name); }
void dsops_sas_problem_free(dsops_sas_problem *p) { if (p) cases_problem_release(p->buffers, p->nbuffers, p); }

/* What the case fields cannot say, by case name. */
typedef struct sas_special {
    const char *name;
    int win_size;        /* -1: the preset's */
    int skip_all;        /* every cmp_indices entry -1 */
    int sink_inf;        /* every sink +Inf */
    const char *li_case; /* cmp_indices = topk_indices of this lightning_indexer case (same seed) */
} sas_special;

static const sas_special sas_specials[] = {
    {"v4_sas_edge_lonely", 0, 1, 0, NULL},
    {"v4_sas_edge_sink_inf", -1, 0, 1, NULL},
    {"v4_scfa_pro_b4_s2_kv64k", -1, 0, 0, "v4_li_pro_b4_s2_kv64k"},
};

static sas_special sas_special_of(const char *name)
{
    for (size_t i = 0; i < sizeof sas_specials / sizeof sas_specials[0]; i++)
        if (name && !strcmp(sas_specials[i].name, name))
            return sas_specials[i];
    return (sas_special){name, -1, 0, 0, NULL};
}

/* ---- generator ----------------------------------------------------------------------------------- */

enum { STREAM_SAS_Q = 81, STREAM_SAS_ORI = 82, STREAM_SAS_CMP = 83, STREAM_SAS_SINK = 84, STREAM_SAS_TABLE = 85,
       STREAM_SAS_IDX = 86 };

#define SAS_MAX_D 16384 /* the longest row cases_fill_bf16 draws */

static void *sas_alloc(dsops_sas_problem *p, size_t bytes) { return ALLOC_OWNED(p, bytes); }

/* Tokens of sequence b: S_each[b], or S for every b when S_each is all zero. */
static int sas_seq_len(const dsops_sas_case *c, int b)
{
    int any = 0;
    for (int i = 0; i < 8; i++)
        any |= c->S_each[i] != 0;
    return any ? c->S_each[b] : c->S;
}

/* A paged pool of rows [NB, BS, D] bf16 U(-1,1) and its table [B, MB]: sequence b needs logical blocks
 * first[b] ... last[b] (none when last[b] < first[b]), each a distinct physical block drawn from a random
 * permutation; every other column is -1. Returns 0, or 1 when memory runs out. */
/* FlashMLA's MODEL1 FP8 blocks of rows [NB, BS, 512] bf16, quantised by the library's public primitive (spec §2.12;
 * tests/test_fp8_cache.c holds it to the oracle) into blocks padded to a multiple of 576 bytes, as FlashMLA sizes
 * them, and viewed as FlashMLA views them: [NB, BS, 584] uint8 with the block length as stride[0]. 1 on failure. */
static int sas_model1_pool(dsops_sas_problem *p, const dsops_tensor *rows, dsops_tensor *pool)
{
    const int64_t NB = rows->shape[0], BS = rows->shape[1], BB = (BS * 584 + 575) / 576 * 576;
    uint8_t *blocks = sas_alloc(p, (size_t)(NB * BB));
    if (!blocks)
        return 1;
    dsops_fp8_cache_args q = {.kv = *rows, .layout = DSOPS_FP8_CACHE_MODEL1};
    q.cache = dsops_tensor_make(blocks, DSOPS_UINT8, 2, (int64_t[]){NB, BB});
    if (dsops_fp8_cache_quantize(NULL, &q) != DSOPS_OK)
        return 1;
    *pool = dsops_tensor_make(blocks, DSOPS_UINT8, 3, (int64_t[]){NB, BS, 584});
    pool->stride[0] = BB;
    return 0;
}

static int sas_make_pool(dsops_sas_problem *p, uint64_t seed, uint64_t stream, int B, const int64_t *first,
                         const int64_t *last, int64_t MB, int64_t BS, int64_t D, dsops_tensor *pool,
                         dsops_tensor *table)
{
    int64_t NB = 0;
    for (int b = 0; b < B; b++)
        NB += last[b] >= first[b] ? last[b] - first[b] + 1 : 0;
    if (NB < 1)
        NB = 1; /* a pool with no needed block still has one (a zero extent is a shape error) */
    int32_t *bt = sas_alloc(p, sizeof(int32_t) * (size_t)(B * MB));     /* [B, MB] */
    uint16_t *rows = sas_alloc(p, sizeof(uint16_t) * (size_t)(NB * BS * D)); /* [NB, BS, D] */
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)NB);
    if (!bt || !rows || !perm) {
        free(perm);
        return 1;
    }
    rng r = cases_row_rng(seed, STREAM_SAS_TABLE, (int64_t)stream);
    cases_shuffle(&r, perm, NB);
    for (int b = 0, next = 0; b < B; b++)
        for (int64_t j = 0; j < MB; j++)
            bt[b * MB + j] = j >= first[b] && j <= last[b] ? perm[next++] : -1;
    free(perm);
    cases_fill_bf16(seed, stream, NB * BS, D, 1.0f, rows);
    *pool = dsops_tensor_make(rows, DSOPS_BF16, 3, (int64_t[]){NB, BS, D});
    *table = dsops_tensor_make(bt, DSOPS_INT32, 2, (int64_t[]){B, MB});
    if (p->c.model1_fp8) {
        const dsops_tensor bf16_rows = *pool;
        return sas_model1_pool(p, &bf16_rows, pool);
    }
    return 0;
}

/* The documented parameters of a variant (dsops_sas_init's, written out for builds where it is unavailable). */
static void sas_default_params(dsops_sas_args *a, dsops_sas_variant v)
{
    memset(a, 0, sizeof *a);
    a->softmax_scale = 0.044194173824159216f; /* 512^-0.5 */
    a->win_size = 128;
    a->cmp_mode = v == DSOPS_SAS_SWA ? DSOPS_CMP_NONE : v == DSOPS_SAS_CFA ? DSOPS_CMP_DENSE : DSOPS_CMP_SPARSE;
    a->cmp_ratio = v == DSOPS_SAS_CFA ? 128 : v == DSOPS_SAS_SCFA ? 4 : 1;
    a->p_mode = v == DSOPS_SAS_CFA ? DSOPS_P_TILED : DSOPS_P_NORMALISED;
    a->p_tile = 128;
}

/* cmp_indices rows from a lightning_indexer case of the same shape: its top-k (run by the library). */
static int sas_indices_from_li(const dsops_sas_case *c, const char *li_name, uint64_t seed, int64_t T,
                               int32_t *idx)
{
    const dsops_li_case *lc = dsops_li_case_find(li_name);
    if (!lc || lc->B != c->B || lc->S != c->S || lc->K != c->K || lc->cmp_ratio != 4 || sas_seq_len(c, 0) != c->S)
        return 1;
    for (int b = 0; b < c->B; b++)
        if (lc->seqused[b] != c->seqused[b] || sas_seq_len(c, b) != c->S)
            return 1;
    dsops_li_problem *lp = dsops_li_problem_make(lc, seed);
    if (!lp)
        return 1;
    int bad = lp->T != T || dsops_lightning_indexer(NULL, &lp->args) != DSOPS_OK;
    if (!bad)
        memcpy(idx, lp->args.topk_indices.data, sizeof(int32_t) * (size_t)(T * c->K));
    dsops_li_problem_free(lp);
    return bad;
}

dsops_sas_problem *dsops_sas_problem_make(const dsops_sas_case *c, uint64_t seed)
{
    if (!c || c->B < 1 || c->B > 128 || c->S < 0 || c->N < 1 || c->D < 1 || c->D > SAS_MAX_D ||
        (c->variant != DSOPS_SAS_SWA && c->variant != DSOPS_SAS_CFA && c->variant != DSOPS_SAS_SCFA) ||
        (c->variant == DSOPS_SAS_SCFA && c->K < 1))
        return NULL;
    int any_each = 0;
    for (int i = 0; i < 8; i++)
        any_each |= c->S_each[i] != 0;
    if (any_each && c->B > 8)
        return NULL;
    const sas_special sp = sas_special_of(c->name);
    const int B = c->B;
    const int64_t N = c->N, D = c->D;

    dsops_sas_problem *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->c = *c;

    /* parameters */
    if (dsops_sas_init(&p->args, DSOPS_PRESET_V4_FLASH, c->variant) != DSOPS_OK)
        sas_default_params(&p->args, c->variant);
    if (sp.win_size >= 0)
        p->args.win_size = sp.win_size;
    p->args.pool_layout = c->model1_fp8 ? DSOPS_SAS_POOL_MODEL1_FP8 : DSOPS_SAS_POOL_BF16;
    const int64_t win = p->args.win_size, R = p->args.cmp_ratio;
    const int has_cmp = p->args.cmp_mode != DSOPS_CMP_NONE, sparse = p->args.cmp_mode == DSOPS_CMP_SPARSE;
    if ((win > 0 && c->BSW < 1) || (has_cmp && (c->BSC < 1 || R < 1)))
        goto fail;

    /* sequences: cu_seqlens_q [B+1], seqused_kv [B] */
    int32_t *cu = sas_alloc(p, sizeof(int32_t) * (size_t)(B + 1));
    int32_t *su = sas_alloc(p, sizeof(int32_t) * (size_t)B);
    if (!cu || !su)
        goto fail;
    int64_t T = 0;
    for (int b = 0; b < B; b++) {
        const int Sb = sas_seq_len(c, b);
        if (Sb < 0)
            goto fail;
        cu[b] = (int32_t)T;
        su[b] = c->seqused[b];
        T += Sb;
    }
    cu[B] = (int32_t)T;
    p->T = T;
    p->args.cu_seqlens_q = dsops_tensor_make(cu, DSOPS_INT32, 1, (int64_t[]){B + 1});
    p->args.seqused_kv = dsops_tensor_make(su, DSOPS_INT32, 1, (int64_t[]){B});

    /* window pool: sequence b needs positions L_0 - w_0 ... seqused - 1 (its first token's window up to its
     * last position; a sequence whose tokens all have L <= 0 needs none) */
    int64_t first[128], last[128], MB = 1;
    if (win > 0) {
        for (int b = 0; b < B; b++) {
            const int64_t Sb = cu[b + 1] - cu[b], used = c->seqused[b];
            const int64_t L0 = used - (Sb - 1) > 0 ? used - (Sb - 1) : 0;
            const int64_t w0 = L0 < win ? L0 : win;
            first[b] = (L0 - w0) / c->BSW;
            last[b] = Sb > 0 && used > 0 ? (used - 1) / c->BSW : -1;
            MB = last[b] + 1 > MB ? last[b] + 1 : MB;
        }
        if (sas_make_pool(p, seed, STREAM_SAS_ORI, B, first, last, MB, c->BSW, D, &p->args.ori_kv,
                          &p->args.ori_block_table))
            goto fail;
    }

    /* compressed pool: entries 0 ... floor(seqused / R) - 1 of every sequence (dense reads the causal prefix
     * of them, sparse indices range over all) */
    int64_t ncmp[128];
    if (has_cmp) {
        MB = 1;
        for (int b = 0; b < B; b++) {
            ncmp[b] = c->seqused[b] > 0 ? c->seqused[b] / R : 0;
            first[b] = 0;
            last[b] = (ncmp[b] + c->BSC - 1) / c->BSC - 1;
            MB = last[b] + 1 > MB ? last[b] + 1 : MB;
        }
        if (sas_make_pool(p, seed, STREAM_SAS_CMP, B, first, last, MB, c->BSC, D, &p->args.cmp_kv,
                          &p->args.cmp_block_table))
            goto fail;
    }

    /* scfa indices [T, K] and the vendor's counts [T] */
    const int64_t K = sparse ? c->K : 0;
    int32_t *idx = NULL, *tkl = NULL;
    if (sparse) {
        idx = sas_alloc(p, sizeof(int32_t) * (size_t)(T * K));
        if (!idx)
            goto fail;
        if (sp.li_case) {
            if (sas_indices_from_li(c, sp.li_case, seed, T, idx))
                goto fail;
        } else {
            int32_t *perm = NULL;
            for (int b = 0; b < B; b++) {
                const int64_t cmp = ncmp[b], t0 = cu[b], Sb = cu[b + 1] - cu[b];
                if (Sb == 0)
                    continue;
                int32_t *row = idx + t0 * K;
                if (sp.skip_all) {
                    for (int64_t j = 0; j < K; j++)
                        row[j] = -1;
                } else if (cmp < K) {
                    for (int64_t j = 0; j < K; j++)
                        row[j] = j < cmp ? (int32_t)j : 0;
                } else {
                    int32_t *np = realloc(perm, sizeof(int32_t) * (size_t)cmp);
                    if (!np) {
                        free(perm);
                        goto fail;
                    }
                    perm = np;
                    rng r = cases_row_rng(seed, STREAM_SAS_IDX, b);
                    cases_shuffle(&r, perm, cmp);
                    memcpy(row, perm, sizeof(int32_t) * (size_t)K);
                }
                for (int64_t i = 1; i < Sb; i++)
                    memcpy(row + i * K, row, sizeof(int32_t) * (size_t)K);
            }
            free(perm);
        }
        p->args.cmp_indices = dsops_tensor_make(idx, DSOPS_INT32, 2, (int64_t[]){T, K});
        if (c->vendor_count) {
            tkl = sas_alloc(p, sizeof(int32_t) * (size_t)(T > 0 ? T : 1));
            if (!tkl)
                goto fail;
            for (int b = 0; b < B; b++) {
                const int64_t Sb = cu[b + 1] - cu[b];
                for (int64_t i = 0; i < Sb; i++) {
                    const int64_t k = ncmp[b] - Sb + 1 + i;
                    tkl[cu[b] + i] = (int32_t)(k > 0 ? k : 0);
                }
            }
            p->args.cmp_topk_length = dsops_tensor_make(tkl, DSOPS_INT32, 1, (int64_t[]){T});
        }
    }

    /* q [T, N, D] bf16; sinks [N] fp32 */
    uint16_t *q = sas_alloc(p, sizeof(uint16_t) * (size_t)(T * N * D));
    if (!q)
        goto fail;
    cases_fill_bf16(seed, STREAM_SAS_Q, T * N, D, 1.0f, q);
    p->args.q = dsops_tensor_make(q, DSOPS_BF16, 3, (int64_t[]){T, N, D});
    if (c->with_sinks) {
        float *sinks = sas_alloc(p, sizeof(float) * (size_t)N);
        if (!sinks)
            goto fail;
        rng r = cases_row_rng(seed, STREAM_SAS_SINK, 0);
        cases_rng_uniform_pm1(&r, sinks, (size_t)N);
        for (int64_t h = 0; sp.sink_inf && h < N; h++)
            sinks[h] = INFINITY;
        p->args.sinks = dsops_tensor_make(sinks, DSOPS_FP32, 1, (int64_t[]){N});
    }

    /* outputs, one token of guard room each: out [T, N, D] bf16, lse [T, N] fp32 */
    uint16_t *out = sas_alloc(p, sizeof(uint16_t) * (size_t)((T + 1) * N * D));
    if (!out)
        goto fail;
    p->args.out = dsops_tensor_make(out, DSOPS_BF16, 3, (int64_t[]){T, N, D});
    if (c->with_lse) {
        float *lse = sas_alloc(p, sizeof(float) * (size_t)((T + 1) * N));
        if (!lse)
            goto fail;
        p->args.lse = dsops_tensor_make(lse, DSOPS_FP32, 2, (int64_t[]){T, N});
    }

    /* work: the exact key-list length of every token (docs/OPERATORS.md §3.7) */
    int64_t attended = 0;
    for (int b = 0; b < B; b++) {
        const int64_t Sb = cu[b + 1] - cu[b];
        for (int64_t i = 0; i < Sb; i++) {
            const int64_t t = cu[b] + i, L = c->seqused[b] - (Sb - 1 - i), Lp = L > 0 ? L : 0;
            attended += Lp < win ? Lp : win;
            if (!has_cmp)
                continue;
            const int64_t causal = Lp / R;
            if (!sparse) {
                attended += causal;
                continue;
            }
            int64_t cnt = K < causal ? K : causal;
            if (tkl && tkl[t] < cnt)
                cnt = tkl[t];
            for (int64_t j = 0; j < cnt; j++)
                attended += idx[t * K + j] >= 0 && idx[t * K + j] < ncmp[b];
        }
    }
    p->attended = attended;
    p->flops = 2.0 * (double)N * (double)attended * 2.0 * (double)D;
    p->kv_bytes = (double)attended * (c->model1_fp8 ? 584.0 : (double)D * 2.0);
    return p;

fail:
    dsops_sas_problem_free(p);
    return NULL;
}

/* ---- bench adapter ------------------------------------------------------------------------------- */
/* Alike in shape with the other families' adapters: bench_family.h says why each family keeps its own. */

/* sas (swa, cfa, scfa) against the oracle (docs/OPERATORS.md §3.7, §2.10): out by p_mode (normalised, fp32
 * 1e-4 / 2^-7, tiled 5e-4 / 5e-4) and lse 1e-6 / 8.01/65536, at most 0.5 % of the elements outside each;
 * per row exactly: a lonely row (oracle out 0, lse +Inf) is out +0 with lse +Inf, a row of a +Inf sink is
 * out 0, a poisoned row (oracle lse NaN) is NaN in out and lse, a row without NaN in the oracle has none.
 * Every token when the call does at most SAS_EVERY_TOKEN_FLOP (all the CI cases); else a sample: every
 * sequence when B <= 4, else sequences 0, B/2 and B-1, of each its last 32 tokens (a sub-call of a
 * sequence's last tokens sees the same keys: L and the valid index range depend only on seqused). */
#define SAS_EVERY_TOKEN_FLOP 16e9

static dsops_status sas_run(dsops_context *ctx, void *p)
{
    return dsops_sas(ctx, &((dsops_sas_problem *)p)->args);
}

static void sas_note_fault(int64_t *count, int64_t *first, int64_t row)
{
    if ((*count)++ == 0)
        *first = row;
}

/* " (first t .. h ..)" for row t * N + h, or "" when there is none. */
static const char *sas_first_row(int64_t row, int64_t N, char words[64])
{
    words[0] = 0;
    if (row >= 0)
        snprintf(words, 64, " (first t %lld h %lld)", (long long)(row / N), (long long)(row % N));
    return words;
}

void sas_find_row_faults(const dsops_sas_args *a, int64_t t0, int64_t n, const uint16_t *ro, const float *rl,
                         sas_row_faults *f)
{
    const int64_t N = a->q.shape[1], D = a->q.shape[2];
    const float *sinks = a->sinks.data; /* [N] or absent */
    for (int64_t i = 0; i < n * N; i++) {
        const int64_t row = t0 * N + i;
        const uint16_t *got = (const uint16_t *)a->out.data + (row / N) * a->out.stride[0] + (row % N) * a->out.stride[1];
        const uint16_t *want = ro + i * D;
        int want_zero = 1, want_nan = 0, got_zero = 1, got_magnitude = 0, got_nan = 0, got_all_nan = 1;
        for (int64_t d = 0; d < D; d++) {
            const int nan_here = isnan(cases_bf16_value(got[d]));
            want_zero &= want[d] == 0, want_nan |= isnan(cases_bf16_value(want[d]));
            got_zero &= got[d] == 0, got_magnitude |= (got[d] & 0x7fffu) != 0;
            got_nan |= nan_here, got_all_nan &= nan_here;
        }
        const float *lse = a->lse.data ? (const float *)a->lse.data + row : NULL;
        const int poisoned = isnan(rl[i]), lonely = isinf(rl[i]) && rl[i] > 0 && want_zero;
        const int inf_sink = sinks && isinf(sinks[i % N]) && sinks[i % N] > 0 && !poisoned;
        if (lonely && (!got_zero || (lse && !(isinf(*lse) && *lse > 0))))
            sas_note_fault(&f->lonely, &f->first_lonely, row);
        if (inf_sink && got_magnitude)
            sas_note_fault(&f->sink, &f->first_sink, row);
        if ((poisoned && !got_all_nan) || (!want_nan && got_nan) || (lse && isnan(*lse) != poisoned))
            sas_note_fault(&f->nan, &f->first_nan, row);
    }
}

static int sas_check(void *pv, char *why, size_t cap)
{
    const dsops_sas_problem *p = pv;
    const dsops_sas_args *a = &p->args;
    const int B = (int)a->seqused_kv.shape[0];
    const int64_t N = a->q.shape[1], D = a->q.shape[2];
    const int32_t *cu = a->cu_seqlens_q.data, *su = a->seqused_kv.data;
    const int tiled = a->p_mode == DSOPS_P_TILED, every_token = p->flops <= SAS_EVERY_TOKEN_FLOP;
    const double out_atol = tiled ? 5e-4 : 1e-4, out_rtol = tiled ? 5e-4 : 1.0 / 128;
    const int nseq = every_token || B <= 4 ? B : 3;
    size_t bad_o = 0, n_o = 0, bad_l = 0, n_l = 0;
    double max_o = 0, max_l = 0;
    sas_row_faults f = {0, 0, 0, -1, -1, -1};
    for (int k = 0; k < nseq; k++) {
        const int b = nseq == B ? k : k == 0 ? 0 : k == 1 ? B / 2 : B - 1;
        const int64_t Sb = cu[b + 1] - cu[b], n = every_token || Sb < 32 ? Sb : 32, t0 = cu[b + 1] - n;
        if (n == 0)
            continue;
        uint16_t *ro = malloc((size_t)(n * N * D) * 2);
        float *rl = malloc((size_t)(n * N) * 4);
        if (!ro || !rl) {
            free(ro), free(rl);
            return bench_out_of_memory(why, cap);
        }
        int32_t cu1[2] = {0, (int32_t)n}, su1[1] = {su[b]};
        dsops_sas_args r = *a; /* the oracle on tokens t0 ... t0+n-1, the last n of sequence b */
        r.cu_seqlens_q = dsops_tensor_make(cu1, DSOPS_INT32, 1, (int64_t[]){2});
        r.seqused_kv = dsops_tensor_make(su1, DSOPS_INT32, 1, (int64_t[]){1});
        r.q.data = (uint16_t *)a->q.data + t0 * N * D, r.q.shape[0] = n;
        if (a->ori_block_table.data)
            r.ori_block_table.data = (int32_t *)a->ori_block_table.data + b * a->ori_block_table.shape[1],
            r.ori_block_table.shape[0] = 1;
        if (a->cmp_block_table.data)
            r.cmp_block_table.data = (int32_t *)a->cmp_block_table.data + b * a->cmp_block_table.shape[1],
            r.cmp_block_table.shape[0] = 1;
        if (a->cmp_indices.data)
            r.cmp_indices.data = (int32_t *)a->cmp_indices.data + t0 * a->cmp_indices.shape[1],
            r.cmp_indices.shape[0] = n;
        if (a->cmp_topk_length.data)
            r.cmp_topk_length.data = (int32_t *)a->cmp_topk_length.data + t0, r.cmp_topk_length.shape[0] = n;
        r.out = dsops_tensor_make(ro, DSOPS_BF16, 3, (int64_t[]){n, N, D});
        r.lse = dsops_tensor_make(rl, DSOPS_FP32, 2, (int64_t[]){n, N}); /* always: lonely and poisoned rows */
        dsops_ref_sas(&r);
        bench_count_outside((const uint16_t *)a->out.data + t0 * N * D, ro, DSOPS_BF16, (size_t)(n * N * D), out_atol,
                      out_rtol, &bad_o, &n_o, &max_o);
        if (a->lse.data)
            bench_count_outside((const float *)a->lse.data + t0 * N, rl, DSOPS_FP32, (size_t)(n * N), 1e-6,
                          8.01 / 65536, &bad_l, &n_l, &max_l);
        sas_find_row_faults(a, t0, n, ro, rl, &f);
        free(ro), free(rl);
    }
    char w1[64], w2[64], w3[64];
    snprintf(why, cap, "%s: out: %zu of %zu outside %g / %g (max |err| %.3g); lse: %zu of %zu outside 1e-6 / "
             "8.01/65536 (max |err| %.3g); rows: %lld lonely not out +0 / lse +Inf%s, %lld of a +Inf sink not 0%s, "
             "%lld break the NaN rule%s", every_token ? "every token" : "sampled tokens", bad_o, n_o, out_atol,
             out_rtol, max_o, bad_l, n_l, max_l, (long long)f.lonely, sas_first_row(f.first_lonely, N, w1),
             (long long)f.sink, sas_first_row(f.first_sink, N, w2), (long long)f.nan,
             sas_first_row(f.first_nan, N, w3));
    return bench_too_many(bad_o, n_o) || bench_too_many(bad_l, n_l) || f.lonely || f.sink || f.nan;
}

static void sas_release(void *p) { dsops_sas_problem_free(p); }

static const char *sas_variant_name(dsops_sas_variant v)
{
    return v == DSOPS_SAS_SWA ? "swa" : v == DSOPS_SAS_CFA ? "cfa" : v == DSOPS_SAS_SCFA ? "scfa" : "sas?";
}

static int sas_make_problem(const void *cv, bench_problem *bp, char *why, size_t cap)
{
    const dsops_sas_case *c = cv;
    /* the case's own data seed (docs/CASES.md: 42, cfa 0); bf16 FLOP of QK and PV against the bf16 peak */
    dsops_sas_problem *p = dsops_sas_problem_make(c, c->seed);
    if (!p)
        return bench_cannot_generate(why, cap);
    /* the description's record adds the variant, whose defaults `dsops run` applies to parameters not given */
    void *record = cases_wrapped_record(OWNED_LIST(p), "sas", &p->args, sizeof p->args, "variant", (int)c->variant);
    if (!record) {
        dsops_sas_problem_free(p);
        return bench_out_of_memory(why, cap);
    }
    *bp = (bench_problem){p, sas_run, sas_check, sas_release, p->flops, p->kv_bytes, DSOPS_PEAK_BF16_DOT,
                          .vendor_us = c->vendor_us, .vendor = c->vendor, .args = record};
    return 0;
}

static void sas_note(const bench_problem *bp, char *note, size_t cap)
{
    const dsops_sas_problem *sp = bp->p;
    snprintf(note, cap, "%lld keys attended over %lld tokens (%.1f per token)", (long long)sp->attended,
             (long long)sp->T, sp->T > 0 ? (double)sp->attended / (double)sp->T : 0.0);
}

/* "mixed" when the case has per-sequence token counts, else S. */
static const char *sas_tokens_word(const dsops_sas_case *c, char S[16])
{
    if (c->S_each[0])
        snprintf(S, 16, "mixed");
    else
        snprintf(S, 16, "%d", c->S);
    return S;
}

static void sas_words(const void *cv, char *op, size_t oc, char *sh, size_t sc)
{
    const dsops_sas_case *k = cv;
    char S[16];
    snprintf(op, oc, "%s", sas_variant_name(k->variant));
    snprintf(sh, sc, "B %d S %s kv %d N %d", k->B, sas_tokens_word(k, S), k->seqused[0], k->N);
    if (k->K)
        snprintf(sh + strlen(sh), sc - strlen(sh), " K %d", k->K);
}

static void sas_list_line(const void *cv, const char *not_ci)
{
    const dsops_sas_case *c = cv;
    char S[16], op[16];
    snprintf(op, sizeof op, "sas (%s)", sas_variant_name(c->variant));
    printf("%-40s %-27s B %-3d S %-5s kv %-6d N %d D %d K %d BS %d/%d%s%s%s\n", c->name, op, c->B,
           sas_tokens_word(c, S), c->seqused[0], c->N, c->D, c->K, c->BSW, c->BSC,
           c->vendor_count ? ", vendor count" : "", c->model1_fp8 ? ", model1_fp8" : "", not_ci);
}

/* `dsops bench swa` (or cfa, scfa): the cases of one preset */
static int sas_selects(const char *what, const void *cv)
{
    return !strcmp(what, sas_variant_name(((const dsops_sas_case *)cv)->variant));
}

static void sas_vendor(const void *cv, double *us, const char **label)
{
    *us = ((const dsops_sas_case *)cv)->vendor_us, *label = ((const dsops_sas_case *)cv)->vendor;
}

static const void *sas_table(int *count) { return dsops_sas_cases(count); }

const bench_family bench_family_sas = {
    .op = "sas",
    .table_word = "sas (swa/cfa/scfa)",
    .cases = sas_table,
    .case_size = sizeof(dsops_sas_case),
    .ci_offset = offsetof(dsops_sas_case, ci),
    .make_problem = sas_make_problem,
    .words = sas_words,
    .list_line = sas_list_line,
    .selects = sas_selects,
    .vendor = sas_vendor,
    .note = sas_note,
};

/* ==== adversarial problems (problems.h) ====================================================================
 * Small sas problems (swa, cfa, scfa) of any shape for tests/test_sas.c: windows, compressed counts and index
 * zoos, odd block sizes per pool, strided views, NaN in every pool row no token reads, -1 or junk in every
 * block-table entry no token needs, guard elements around the outputs; and the oracle's results on them. */

/* One pool's needed rows per sequence (bitmaps over logical rows) -> physical blocks (a random permutation
 * plus two spare blocks), a block table with -1 or junk in the columns nobody needs, and the pool with
 * U(-1,1) in needed rows and NaN everywhere else. */
static void sp_build_pool(rng *r, int64_t B, uint8_t **need, const int64_t *nrows, int64_t BS, int64_t D, int64_t Dp,
                          uint16_t **pool, int32_t **table, int64_t *NB_out, int64_t *MB_out)
{
    int64_t MB = 1, Nn = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t cols = 0;
        for (int64_t p = 0; p < nrows[b]; p++)
            if (need[b][p])
                cols = p / BS + 1;
        if (cols + 1 > MB)
            MB = cols + 1;             /* one column more than needed: never read */
    }
    int32_t *tb = cases_xcalloc((size_t)(B * MB) + 1, 4);                   /* [B, MB] */
    int64_t *owner = cases_xcalloc((size_t)(B * MB) + 2, sizeof(int64_t)); /* needed (b, col) pairs as b * MB + col */
    for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < MB; c++) {
            int needed = 0;
            for (int64_t p = c * BS; p < (c + 1) * BS && p < nrows[b]; p++)
                needed |= need[b][p];
            if (needed)
                owner[Nn++] = b * MB + c;
        }
    const int64_t NB = Nn + 2;
    int32_t *perm = cases_xcalloc((size_t)NB, sizeof(int32_t)); /* [NB] the block of the i-th needed pair */
    cases_shuffle(r, perm, NB);
    static const int32_t junk[4] = {-1, -1, INT32_MAX, INT32_MIN};
    for (int64_t i = 0; i < B * MB; i++) {
        int64_t k = cases_rng_int(r, 0, 4);
        tb[i] = k < 4 ? junk[k] : (int32_t)cases_rng_int(r, 0, NB - 1); /* unneeded: any value */
    }
    uint16_t *pl = cases_xcalloc((size_t)(NB * BS * Dp) + 1, 2);          /* [NB, BS, Dp] */
    for (int64_t i = 0; i < NB * BS * Dp; i++)
        pl[i] = SP_NAN_BF16;
    for (int64_t i = 0; i < Nn; i++) {
        const int64_t b = owner[i] / MB, c = owner[i] % MB, blk = perm[i];
        tb[b * MB + c] = (int32_t)blk;
        for (int64_t row = 0; row < BS; row++) {
            const int64_t p = c * BS + row;
            if (p < nrows[b] && need[b][p])
                for (int64_t d = 0; d < D; d++)
                    pl[(blk * BS + row) * Dp + d] = cases_bf16_bits(cases_rng_uniform(r, -1, 1));
        }
    }
    free(owner), free(perm);
    *pool = pl, *table = tb, *NB_out = NB, *MB_out = MB;
}

int64_t sp_token_L(const sp_problem *p, int64_t b, int64_t t)
{
    return (int64_t)p->used[b] - ((int64_t)p->cu[b + 1] - 1 - t);
}

static int64_t sp_imin(int64_t a, int64_t b) { return a < b ? a : b; }

static sp_guarded sp_guarded_make(size_t n, size_t esz)
{
    sp_guarded g = {cases_xcalloc(n + 2, esz), n, esz};
    return g;
}

void *sp_guarded_view(const sp_guarded *g) { return (char *)g->buf + g->esz; }

static uint32_t sp_guard_of(const sp_guarded *g) { return g->esz == 2 ? CASES_GUARD_BF16 : CASES_GUARD_F32; }

int sp_guarded_holds(const sp_guarded *g, size_t i)
{
    return cases_holds_sentinel((const char *)g->buf + i * g->esz, g->esz, 1, sp_guard_of(g));
}

void sp_reset_outputs(sp_problem *p)
{
    cases_fill_sentinel(p->out.buf, p->out.esz, (int64_t)p->out.n + 2, sp_guard_of(&p->out));
    cases_fill_sentinel(p->lse.buf, p->lse.esz, (int64_t)p->lse.n + 2, sp_guard_of(&p->lse));
}

/* cmp_topk_length [T] and cmp_indices [T, K] of a sparse problem (entries past each token's count are junk);
 * cnt[t] receives the entries token t uses. */
static void sp_make_indices(sp_problem *p, rng *r, int64_t *cnt)
{
    const sp_spec *s = &p->s;
    const int64_t K = p->K;
    p->len = cases_xcalloc((size_t)p->T + 1, 4);          /* [T] */
    p->idx = cases_xcalloc((size_t)(p->T * K) + 1, 4);    /* [T, K] */
    int32_t *vendor_row = cases_xcalloc((size_t)K + 1, 4); /* [K] the sequence's docs/CASES.md row */
    for (int64_t b = 0; b < p->B; b++) {
        const int64_t NC = p->used[b] / s->cmp_ratio, S_b = s->S[b];
        /* docs/CASES.md: 0 ... NC-1 then zeros, or the first K of a permutation of 0 ... NC-1 */
        if (NC < K) {
            for (int64_t j = 0; j < K; j++)
                vendor_row[j] = (int32_t)(j < NC ? j : 0);
        } else {
            int32_t *perm = cases_xcalloc((size_t)NC, 4); /* [NC] */
            for (int64_t i = 0; i < NC; i++)
                perm[i] = (int32_t)i;
            for (int64_t i = 0; i < K; i++) {
                int64_t j = cases_rng_int(r, i, NC - 1);
                int32_t x = perm[i];
                perm[i] = perm[j], perm[j] = x;
                vendor_row[i] = perm[i];
            }
            free(perm);
        }
        for (int64_t t = p->cu[b]; t < p->cu[b + 1]; t++) {
            const int64_t i = t - p->cu[b], L = sp_token_L(p, b, t);
            const int64_t ncmp = (L > 0 ? L : 0) / s->cmp_ratio;
            switch (s->len) {
            case SP_LEN_NONE: p->len[t] = -1; break; /* absent: the buffer is not passed */
            case SP_LEN_RAND: p->len[t] = (int32_t)cases_rng_int(r, 0, K + 2); break;
            case SP_LEN_ZERO: p->len[t] = 0; break;
            case SP_LEN_VENDOR: {
                int64_t v = NC - S_b + 1 + i;
                p->len[t] = (int32_t)(v > 0 ? v : 0);
                break;
            }
            }
            cnt[t] = sp_imin(K, ncmp);
            if (s->len != SP_LEN_NONE)
                cnt[t] = sp_imin(cnt[t], p->len[t]);
            for (int64_t j = 0; j < K; j++) {
                int32_t v;
                if (s->idx == SP_IDX_VENDOR) {
                    v = vendor_row[j];
                } else if (s->idx == SP_IDX_ALL_INVALID) {
                    const int32_t bad[4] = {-1, (int32_t)NC, -3, INT32_MAX};
                    v = bad[cases_rng_int(r, 0, 3)];
                } else if (s->idx == SP_IDX_VALID || j >= cnt[t]) {
                    v = NC > 0 ? (int32_t)cases_rng_int(r, 0, NC - 1) : -1;
                    if (s->idx == SP_IDX_ZOO && j >= cnt[t] && cases_rng_int(r, 0, 1)) /* junk, never looked at */
                        v = cases_rng_int(r, 0, 1) ? INT32_MAX : (int32_t)(NC + cases_rng_int(r, 0, 1000000));
                } else {
                    /* the zoo: valid, -1, other negatives, NC and beyond, int32 extremes, valid but not
                     * causal for this token (n_cmp(L) <= idx < NC), duplicates of the previous entry */
                    switch (cases_rng_int(r, 0, 11)) {
                    case 0: v = -1; break;
                    case 1: v = INT32_MIN; break;
                    case 2: v = (int32_t)NC; break;
                    case 3: v = (int32_t)(NC + cases_rng_int(r, 1, 50)); break;
                    case 4: v = INT32_MAX; break;
                    case 5: v = ncmp < NC ? (int32_t)cases_rng_int(r, ncmp, NC - 1) : -1; break;
                    case 6: case 7: v = j > 0 ? p->idx[t * K + j - 1] : 0; break;
                    default: v = NC > 0 ? (int32_t)cases_rng_int(r, 0, NC - 1) : -1; break;
                    }
                }
                p->idx[t * K + j] = v;
            }
        }
    }
    free(vendor_row);
}

sp_problem *sp_make(const sp_spec *spec, uint64_t seed)
{
    sp_problem *p = cases_xcalloc(1, sizeof *p);
    p->s = *spec;
    sp_spec *s = &p->s;
    if (s->scale == 0.0f)
        s->scale = 1.0f / sqrtf((float)s->D);
    if (s->qamp == 0.0f)
        s->qamp = 1.0f;
    if (s->cmp_ratio < 1)
        s->cmp_ratio = 1;
    rng r = {seed};
    const int64_t B = s->B, N = s->N, D = s->D, Dp = D + s->pad;
    p->B = B, p->Dp = Dp;
    p->cu = cases_xcalloc((size_t)B + 1, 4);
    p->used = cases_xcalloc((size_t)B + 1, 4);
    for (int64_t b = 0; b < B; b++)
        p->cu[b + 1] = p->cu[b] + s->S[b], p->used[b] = s->seqused[b];
    const int64_t T = p->T = p->cu[B];
    const int sparse = s->cmp_mode == DSOPS_CMP_SPARSE;
    const int64_t K = p->K = sparse ? s->K : 0;

    /* q [T, N, Dp] with NaN padding */
    p->q = cases_xcalloc((size_t)(T * N * Dp) + 1, 2);
    for (int64_t i = 0; i < T * N * Dp; i++)
        p->q[i] = i % Dp < D ? cases_bf16_bits(cases_rng_uniform(&r, -s->qamp, s->qamp)) : SP_NAN_BF16;

    int64_t *cnt = cases_xcalloc((size_t)T + 1, sizeof(int64_t)); /* [T] entries each token uses */
    if (sparse)
        sp_make_indices(p, &r, cnt);

    /* the rows each pool must provide: per sequence, bitmaps [seqused] (window) and [seqused / ratio] (compressed) */
    uint8_t *wneed[SP_MAX_B], *cneed[SP_MAX_B];
    int64_t wrows[SP_MAX_B], crows[SP_MAX_B];
    for (int64_t b = 0; b < B; b++) {
        wrows[b] = p->used[b];
        crows[b] = p->used[b] / s->cmp_ratio;
        wneed[b] = cases_xcalloc((size_t)wrows[b] + 1, 1);
        cneed[b] = cases_xcalloc((size_t)crows[b] + 1, 1);
        for (int64_t t = p->cu[b]; t < p->cu[b + 1]; t++) {
            const int64_t L = sp_token_L(p, b, t), Lp = L > 0 ? L : 0;
            const int64_t w = sp_imin(Lp, s->win_size);
            for (int64_t pos = L - w; pos < L; pos++)
                wneed[b][pos] = 1;
            if (s->cmp_mode == DSOPS_CMP_DENSE)
                for (int64_t e = 0; e < Lp / s->cmp_ratio; e++)
                    cneed[b][e] = 1;
            if (sparse)
                for (int64_t j = 0; j < cnt[t]; j++) {
                    int64_t v = p->idx[t * K + j];
                    if (v >= 0 && v < crows[b])
                        cneed[b][v] = 1;
                }
        }
    }
    const int want_ori = s->win_size > 0 || s->unused_pools, want_cmp = s->cmp_mode != DSOPS_CMP_NONE || s->unused_pools;
    if (want_ori)
        sp_build_pool(&r, B, wneed, wrows, s->BSW, D, Dp, &p->ori, &p->ori_bt, &p->NBW, &p->MBW);
    if (want_cmp)
        sp_build_pool(&r, B, cneed, crows, s->BSC, D, Dp, &p->cmp, &p->cmp_bt, &p->NBC, &p->MBC);
    for (int64_t b = 0; b < B; b++)
        free(wneed[b]), free(cneed[b]);
    free(cnt);

    /* sinks [N] */
    if (s->sinks != SP_SINK_NONE) {
        p->sinks = cases_xcalloc((size_t)N, 4);
        static const float extreme[7] = {INFINITY, -INFINITY, 1e30f, -1e30f, 20.0f, -20.0f, 0.0f};
        for (int64_t h = 0; h < N; h++) {
            switch (s->sinks) {
            case SP_SINK_RAND: p->sinks[h] = cases_rng_uniform(&r, -1, 1); break;
            case SP_SINK_POS_INF: p->sinks[h] = INFINITY; break;
            case SP_SINK_NEG_INF: p->sinks[h] = -INFINITY; break;
            default: p->sinks[h] = h % 7 == 6 ? cases_rng_uniform(&r, -1, 1) : extreme[h % 7]; break;
            }
        }
    }

    p->out = sp_guarded_make((size_t)(T * N * Dp), 2);
    p->lse = sp_guarded_make((size_t)(T * N), 4);
    p->ref_out = cases_xcalloc((size_t)(T * N * D) + 1, 2);
    p->ref_lse = cases_xcalloc((size_t)(T * N) + 1, 4);

    /* args: strided views where pad > 0 */
    dsops_sas_args *a = &p->args;
    memset(a, 0, sizeof *a);
    a->q = dsops_tensor_make(p->q, DSOPS_BF16, 3, (int64_t[]){T, N, D});
    a->q.stride[0] = N * Dp, a->q.stride[1] = Dp;
    a->cu_seqlens_q = dsops_tensor_make(p->cu, DSOPS_INT32, 1, (int64_t[]){B + 1});
    a->seqused_kv = dsops_tensor_make(p->used, DSOPS_INT32, 1, (int64_t[]){B});
    if (want_ori) {
        a->ori_kv = dsops_tensor_make(p->ori, DSOPS_BF16, 3, (int64_t[]){p->NBW, s->BSW, D});
        a->ori_kv.stride[0] = s->BSW * Dp, a->ori_kv.stride[1] = Dp;
        a->ori_block_table = dsops_tensor_make(p->ori_bt, DSOPS_INT32, 2, (int64_t[]){B, p->MBW});
    }
    if (want_cmp) {
        a->cmp_kv = dsops_tensor_make(p->cmp, DSOPS_BF16, 3, (int64_t[]){p->NBC, s->BSC, D});
        a->cmp_kv.stride[0] = s->BSC * Dp, a->cmp_kv.stride[1] = Dp;
        a->cmp_block_table = dsops_tensor_make(p->cmp_bt, DSOPS_INT32, 2, (int64_t[]){B, p->MBC});
    }
    if (sparse) {
        a->cmp_indices = dsops_tensor_make(p->idx, DSOPS_INT32, 2, (int64_t[]){T, K});
        if (s->len != SP_LEN_NONE)
            a->cmp_topk_length = dsops_tensor_make(p->len, DSOPS_INT32, 1, (int64_t[]){T});
    }
    if (p->sinks)
        a->sinks = dsops_tensor_make(p->sinks, DSOPS_FP32, 1, (int64_t[]){N});
    a->out = dsops_tensor_make(sp_guarded_view(&p->out), DSOPS_BF16, 3, (int64_t[]){T, N, D});
    a->out.stride[0] = N * Dp, a->out.stride[1] = Dp;
    if (s->lse)
        a->lse = dsops_tensor_make(sp_guarded_view(&p->lse), DSOPS_FP32, 2, (int64_t[]){T, N});
    a->softmax_scale = s->scale, a->win_size = s->win_size, a->cmp_mode = s->cmp_mode;
    a->cmp_ratio = s->cmp_ratio, a->p_mode = s->p_mode, a->p_tile = s->p_tile;
    return p;
}

void sp_free(sp_problem *p)
{
    free(p->q), free(p->cu), free(p->used), free(p->ori), free(p->ori_bt), free(p->cmp), free(p->cmp_bt);
    free(p->idx), free(p->len), free(p->sinks), free(p->out.buf), free(p->lse.buf), free(p->ref_out);
    free(p->ref_lse);
    free(p);
}

void sp_compute_ref(sp_problem *p)
{
    dsops_sas_args a = p->args;
    const int64_t T = p->T, N = p->s.N, D = p->s.D;
    a.out = dsops_tensor_make(p->ref_out, DSOPS_BF16, 3, (int64_t[]){T, N, D});
    a.lse = dsops_tensor_make(p->ref_lse, DSOPS_FP32, 2, (int64_t[]){T, N});
    dsops_ref_sas(&a);
}
