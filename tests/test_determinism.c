/* Determinism (spec §1.7, dsops.h): for every ISA tier, 1, 2 and 3 threads give bitwise identical outputs
 * (sparse_flash_attention_v32: out and lse; lightning_indexer: topk_indices and topk_scores), and so does
 * a repeated call with the same settings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "li_problem.h"
#include "sfa_problem.h"
#include "test_util.h"

static dsops_context *ctx;

static void check_problem(const char *name, const dsops_sparse_flash_attention_v32_args *a)
{
    if (!tu_selected(name))
        return;
    const int64_t T = a->out.shape[0], N = a->out.shape[1], Dc = a->out.shape[2];
    const size_t n_out = (size_t)(T * N * Dc), n_lse = (size_t)(T * N);
    uint16_t *out0 = calloc(n_out + 1, 2), *out1 = calloc(n_out + 1, 2);
    uint32_t *lse0 = calloc(n_lse + 1, 4), *lse1 = calloc(n_lse + 1, 4);
    if (!out0 || !out1 || !lse0 || !lse1)
        abort();
    static const int threads[] = {1, 2, 3, 1};
    for (int isa = DSOPS_ISA_SCALAR; isa <= (int)dsops_isa_detected(); isa++) {
        dsops_context_set_isa(ctx, (dsops_isa)isa);
        for (int k = 0; k < 4; k++) {
            dsops_context_set_threads(ctx, threads[k]);
            tp_poison_outputs(a);
            dsops_status st = dsops_sparse_flash_attention_v32(ctx, a);
            if (!tu_check(st == DSOPS_OK, "%s [%s] threads %d: %s (%s)", name, dsops_isa_name((dsops_isa)isa),
                          threads[k], dsops_status_name(st), dsops_last_error()))
                break;
            tp_extract(a, k == 0 ? out0 : out1, k == 0 ? lse0 : lse1);
            if (k == 0)
                continue;
            int64_t diff = -1;
            for (size_t i = 0; i < n_out && diff < 0; i++)
                if (out0[i] != out1[i])
                    diff = (int64_t)i;
            tu_check(diff < 0, "%s [%s]: out differs between 1 and %d threads%s at element %lld", name,
                     dsops_isa_name((dsops_isa)isa), threads[k], k == 3 ? " (repeat)" : "", (long long)diff);
            if (a->lse.data) {
                diff = -1;
                for (size_t i = 0; i < n_lse && diff < 0; i++)
                    if (lse0[i] != lse1[i])
                        diff = (int64_t)i;
                tu_check(diff < 0, "%s [%s]: lse differs between 1 and %d threads at element %lld", name,
                         dsops_isa_name((dsops_isa)isa), threads[k], (long long)diff);
            }
        }
    }
    free(out0);
    free(out1);
    free(lse0);
    free(lse1);
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

static void li_check_problem(const char *name, const dsops_lightning_indexer_args *a)
{
    if (!tu_selected(name))
        return;
    const int64_t T = a->topk_indices.shape[0], K = a->topk_indices.shape[1];
    const size_t n = (size_t)(T * K);
    int32_t *idx0 = calloc(n + 1, 4), *idx1 = calloc(n + 1, 4);
    uint32_t *sc0 = calloc(n + 1, 4), *sc1 = calloc(n + 1, 4);
    if (!idx0 || !idx1 || !sc0 || !sc1)
        abort();
    static const int threads[] = {1, 2, 3, 1};
    for (int isa = DSOPS_ISA_SCALAR; isa <= (int)dsops_isa_detected(); isa++) {
        dsops_context_set_isa(ctx, (dsops_isa)isa);
        for (int k = 0; k < 4; k++) {
            dsops_context_set_threads(ctx, threads[k]);
            lp_poison_outputs(a);
            dsops_status st = dsops_lightning_indexer(ctx, a);
            if (!tu_check(st == DSOPS_OK, "%s [%s] threads %d: %s (%s)", name, dsops_isa_name((dsops_isa)isa),
                          threads[k], dsops_status_name(st), dsops_last_error()))
                break;
            lp_extract(a, k == 0 ? idx0 : idx1, k == 0 ? sc0 : sc1);
            if (k == 0)
                continue;
            int64_t diff = -1;
            for (size_t i = 0; i < n && diff < 0; i++)
                if (idx0[i] != idx1[i])
                    diff = (int64_t)i;
            tu_check(diff < 0, "%s [%s]: topk_indices differ between 1 and %d threads%s at element %lld", name,
                     dsops_isa_name((dsops_isa)isa), threads[k], k == 3 ? " (repeat)" : "", (long long)diff);
            if (a->topk_scores.data) {
                diff = -1;
                for (size_t i = 0; i < n && diff < 0; i++)
                    if (sc0[i] != sc1[i])
                        diff = (int64_t)i;
                tu_check(diff < 0, "%s [%s]: topk_scores differ between 1 and %d threads%s at element %lld", name,
                         dsops_isa_name((dsops_isa)isa), threads[k], k == 3 ? " (repeat)" : "", (long long)diff);
            }
        }
    }
    free(idx0);
    free(idx1);
    free(sc0);
    free(sc1);
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
    if (dsops_context_create(&ctx) != DSOPS_OK) {
        printf("cannot create a context: %s\n", dsops_last_error());
        return 1;
    }
    builder_problem("mixed_bf16_normalised", DSOPS_KV_SPLIT_BF16, DSOPS_P_NORMALISED, 128);
    builder_problem("mixed_int8_tiled7", DSOPS_KV_SPLIT_INT8, DSOPS_P_TILED, 7);
    builder_problem("mixed_packed_fp32", DSOPS_KV_PACKED656, DSOPS_P_FP32, 128);
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
