/* Determinism (spec §1.7, dsops.h): for every ISA tier, 1, 2 and 3 threads give bitwise identical outputs
 * (sparse_flash_attention_v32: out and lse; lightning_indexer: topk_indices and topk_scores), and so does
 * a repeated call with the same settings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "problems.h"
#include "test_util.h"

static dsops_context *ctx;

/* One operator call on fixed arguments and the (at most two) outputs it writes, copied densely for bitwise
 * comparisons. */
typedef struct det_call {
    const void *args;
    dsops_status (*call)(dsops_context *ctx, const void *args);
    void (*poison)(const void *args);                          /* garbage into every output element */
    void (*extract)(const void *args, void *out0, void *out1); /* dense copies of the outputs */
    const char *name[2];
    size_t n[2], esz[2];                                       /* elements and their bytes (n 0: absent) */
} det_call;

/* On every tier: 1, 2 and 3 threads, then 1 again, give bitwise the outputs of the first call. */
static void check_threads(const char *name, const det_call *d)
{
    void *first[2], *again[2];
    for (int o = 0; o < 2; o++) {
        first[o] = tu_calloc(d->n[o] + 1, d->esz[o]);
        again[o] = tu_calloc(d->n[o] + 1, d->esz[o]);
    }
    static const int threads[] = {1, 2, 3, 1};
    char l[300];
    for (int isa = -1; tu_next_tier(ctx, &isa, name, l, sizeof l);) {
        for (int k = 0; k < 4; k++) {
            dsops_context_set_threads(ctx, threads[k]);
            d->poison(d->args);
            const dsops_status st = d->call(ctx, d->args);
            if (!tu_check(st == DSOPS_OK, "%s threads %d: %s (%s)", l, threads[k], dsops_status_name(st),
                          dsops_last_error()))
                break;
            void **dst = k == 0 ? first : again;
            d->extract(d->args, dst[0], dst[1]);
            for (int o = 0; k > 0 && o < 2; o++) {
                if (d->n[o] == 0)
                    continue;
                const int64_t diff = tu_first_difference(first[o], again[o], d->n[o], d->esz[o]);
                tu_check(diff < 0, "%s: %s differs between 1 and %d threads%s at element %lld", l, d->name[o],
                         threads[k], k == 3 ? " (repeat)" : "", (long long)diff);
            }
        }
    }
    for (int o = 0; o < 2; o++) {
        free(first[o]);
        free(again[o]);
    }
}

/* ---- sparse_flash_attention_v32 --------------------------------------------------------------------- */

static dsops_status sfa_call(dsops_context *c, const void *args) { return dsops_sparse_flash_attention_v32(c, args); }
static void sfa_poison(const void *args) { tp_poison_outputs(args); }
static void sfa_extract(const void *args, void *out, void *lse) { tp_extract(args, out, lse); }

static void check_problem(const char *name, const dsops_sparse_flash_attention_v32_args *a)
{
    if (!tu_selected(name))
        return;
    const int64_t T = a->out.shape[0], N = a->out.shape[1], Dc = a->out.shape[2];
    const det_call d = {a, sfa_call, sfa_poison, sfa_extract, {"out", "lse"},
                        {(size_t)(T * N * Dc), a->lse.data ? (size_t)(T * N) : 0}, {2, 4}};
    check_threads(name, &d);
}

static void builder_problem(const char *name, dsops_kv_layout layout, dsops_p_mode mode, int p_tile)
{
    if (!tu_selected(name))
        return;
    tp_spec s;
    memset(&s, 0, sizeof s);
    s.B = 4;
    int S[4] = {1, 5, 2, 3}, U[4] = {3000, 700, 9, 0};
    for (int b = 0; b < 4; b++)
        s.S[b] = S[b], s.seqused[b] = U[b];
    s.N = tu_quick() ? 9 : 37;
    s.Dc = layout == DSOPS_KV_SPLIT_BF16 ? 192 : (layout == DSOPS_KV_SPLIT_INT8 ? 256 : 512);
    s.Dr = 64;
    s.K = 257;
    s.BS = 64;
    s.layout = layout;
    s.p_mode = mode;
    s.p_tile = p_tile;
    s.with_lse = 1;
    s.with_topk_length = 1;
    s.index_mode = TP_IDX_ZOO;
    tp_problem *p = tp_make(&s, tu_seed());
    check_problem(name, &p->args);
    tp_free(p);
}

/* ---- lightning_indexer ------------------------------------------------------------------------------ */

static dsops_status li_call(dsops_context *c, const void *args) { return dsops_lightning_indexer(c, args); }
static void li_poison(const void *args) { lp_poison_outputs(args); }
static void li_extract(const void *args, void *idx, void *scores) { lp_extract(args, idx, scores); }

static void li_check_problem(const char *name, const dsops_lightning_indexer_args *a)
{
    if (!tu_selected(name))
        return;
    const size_t n = (size_t)(a->topk_indices.shape[0] * a->topk_indices.shape[1]);
    const det_call d = {a, li_call, li_poison, li_extract, {"topk_indices", "topk_scores"},
                        {n, a->topk_scores.data ? n : 0}, {4, 4}};
    check_threads(name, &d);
}

/* Several sequences with MTP tokens (more tokens than threads), or one token over many keys (the keys
 * are then split across threads). */
static void li_builder_problem(const char *name, int int8, int cmp_ratio, int one_token, lp_data data)
{
    if (!tu_selected(name))
        return;
    lp_spec s;
    memset(&s, 0, sizeof s);
    if (one_token) {
        s.B = 1;
        s.S[0] = 1;
        s.seqused[0] = 16384 * cmp_ratio;
        s.NI = tu_quick() ? 8 : 64;
        s.K = 2048;
    } else {
        s.B = 4;
        int S[4] = {1, 5, 2, 3}, U[4] = {3000, 700, 9, 0};
        for (int b = 0; b < 4; b++)
            s.S[b] = S[b], s.seqused[b] = U[b] * cmp_ratio;
        s.NI = tu_quick() ? 9 : 37;
        s.K = 257;
    }
    s.DI = 128;
    s.BS = 64;
    s.cmp_ratio = cmp_ratio;
    s.int8 = int8;
    s.with_scores = 1;
    s.data = data;
    s.garbage_table = 1;
    lp_problem *p = lp_make(&s, tu_seed());
    li_check_problem(name, &p->args);
    lp_free(p);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, 42);
    ctx = tu_context();
    builder_problem("mixed_bf16_normalised", DSOPS_KV_SPLIT_BF16, DSOPS_P_NORMALISED, 128);
    builder_problem("mixed_int8_tiled7", DSOPS_KV_SPLIT_INT8, DSOPS_P_TILED, 7);
    builder_problem("mixed_packed_fp32", DSOPS_KV_PACKED_INT8, DSOPS_P_FP32, 128);
    li_builder_problem("li_mixed_int8", 1, 1, 0, LP_DATA_RANDOM);
    li_builder_problem("li_mixed_bf16_ratio4", 0, 4, 0, LP_DATA_RANDOM);
    li_builder_problem("li_one_token_16k_int8", 1, 1, 1, LP_DATA_RANDOM);
    li_builder_problem("li_one_token_16k_bf16", 0, 1, 1, LP_DATA_RANDOM);
    li_builder_problem("li_one_token_16k_ties_int8_ratio4", 1, 4, 1, LP_DATA_TIES);
    if (!tu_quick()) {
        const dsops_li_case *lc = dsops_li_case_find("v4_li_b1_s16_kv130");
        dsops_li_problem *lp = lc ? dsops_li_problem_make(lc, tu_seed()) : NULL;
        if (tu_check(lp != NULL, "v4_li_b1_s16_kv130: no problem"))
            li_check_problem(lc->name, &lp->args);
        dsops_li_problem_free(lp);
    }
    if (!tu_quick()) {
        const dsops_sfa_case *c = dsops_sfa_case_find("v32_sfa_b4_s2_int8_mixed_lse");
        dsops_sfa_problem *p = c ? dsops_sfa_problem_make(c, tu_seed()) : NULL;
        if (tu_check(p != NULL, "v32_sfa_b4_s2_int8_mixed_lse: no problem"))
            check_problem(c->name, &p->args);
        dsops_sfa_problem_free(p);
    }
    dsops_context_destroy(ctx);
    return tu_finish();
}
