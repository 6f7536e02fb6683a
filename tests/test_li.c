/* lightning_indexer against the reference oracle, on every available ISA tier (the named cases of
 * docs/CASES.md run in tests/test_cases.c, against the family's check in harness/lightning_indexer.c):
 *   - adversarial problems (harness/lightning_indexer.c), compared with max_miss 0, and exactly where the scores
 *     are exact in any summation order: all-equal scores and tie groups (ties by index, -0 == +0), rows
 *     shorter than K, tokens with no visible key, cmp_ratio 1 / 3 / 4 / 128, odd block sizes with
 *     permuted tables and garbage in unneeded entries, int8 at -128 / 127 including fp16 overflow of
 *     d_hj, fp16 overflow and underflow of ws_h, negative weights and key scales, NaN weights and key
 *     scales, NaN in unused cache rows, many shapes (NI, DI, K), MTP and multi-sequence calls with
 *     empty sequences, topk_scores on / off, strided views, empty calls; in the bf16, int8 and fp8 variants;
 *   - non-finite scores (spec §2.9): NaN, +Inf and -Inf query elements or scales and NaN keys, so that rows
 *     are all NaN (exactly indices 0, 1, ...), or mix NaN, +Inf, -Inf and finite scores, compared exactly.
 * Usage: test_li [label filter]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "problems_check.h"
#include "ref.h"
#include "test_util.h"

static dsops_context *ctx;

/* ---- adversarial problems ----------------------------------------------------------------------------- */
/* Most problems run in every variant: bf16, int8 and fp8 (DeepGEMM's e4m3 inputs, fp32 weights and key scales). */

/* One call with the outputs reset to their sentinels; counts the checks of its status. */
static int call(lp_problem *p, const char *label)
{
    lp_reset_outputs(p);
    return tu_check_accepted(label, dsops_lightning_indexer(ctx, &p->args));
}

static void run_problem(const char *label, const lp_spec *sp)
{
    if (!tu_selected(label))
        return;
    const double t0 = tu_now();
    lp_problem *p = lp_make(sp, tu_label_seed(label));
    lp_compute_ref(p);
    char l[300];
    for (int isa = -1; tu_next_tier(ctx, &isa, label, l, sizeof l);)
        if (call(p, l))
            lp_check(p, l);
    lp_free(p);
    if (tu_verbose())
        printf("  %s: %.3f s\n", label, tu_now() - t0);
}

/* Variants: 0 bf16, 1 int8, 2 fp8 (DeepGEMM's inputs: the bf16 problem rounded to e4m3, fp32 key scales). */
#define VARIANTS 3
static const char *vname(int v) { return v == 1 ? "int8" : v == 2 ? "fp8" : "bf16"; }

/* run_problem under the label "<name>_<variant>" (v: the vname variant). */
static void run_variant(const char *name, int v, const lp_spec *sp)
{
    char label[100];
    snprintf(label, sizeof label, "%s_%s", name, vname(v));
    run_problem(label, sp);
}

/* Three sequences with prefill and decode tokens, some rows shorter than K. */
static lp_spec base_spec(int v)
{
    lp_spec s;
    memset(&s, 0, sizeof s);
    s.B = 3;
    s.S[0] = 2, s.S[1] = 3, s.S[2] = 1;
    s.seqused[0] = 300, s.seqused[1] = 41, s.seqused[2] = 1000;
    s.NI = 3;
    s.DI = 64;
    s.K = 33;
    s.BS = 17;
    s.cmp_ratio = 1;
    s.int8 = v == 1;
    s.fp8 = v == 2;
    s.with_scores = 1;
    s.data = LP_DATA_RANDOM;
    return s;
}

/* Two case lists alike in shape only: block sizes change BS, ratios change cmp_ratio and the sequence lengths. */
static void test_block_sizes_and_ratios(void)
{
    static const int bss[] = {1, 3, 17, 130};
    static const int ratios[] = {1, 3, 4, 128};
    for (int v = 0; v < VARIANTS; v++) {
        for (int i = 0; i < 4; i++) {
            lp_spec s = base_spec(v);
            s.BS = bss[i];
            s.garbage_table = 1;
            s.extra_blocks = 3;
            s.extra_cols = 2;
            char label[100];
            snprintf(label, sizeof label, "bs%d_%s", bss[i], vname(v));
            run_problem(label, &s);
        }
        for (int i = 0; i < 4; i++) {
            lp_spec s = base_spec(v);
            s.cmp_ratio = ratios[i];
            if (ratios[i] == 128)
                s.seqused[0] = 3000, s.seqused[1] = 127, s.seqused[2] = 9000; /* 23, 0, 70 keys */
            s.S[1] = 4;
            s.BS = 5;
            s.garbage_table = 1;
            s.extra_cols = 1;
            char label[100];
            snprintf(label, sizeof label, "ratio%d_%s", ratios[i], vname(v));
            run_problem(label, &s);
        }
    }
}

static void test_ties(void)
{
    for (int v = 0; v < VARIANTS; v++) {
        /* every score of a token equal: rows 0, 1, ..., min(n, K)-1 exactly */
        lp_spec s = base_spec(v);
        s.data = LP_DATA_EQUAL;
        run_variant("all_equal", v, &s);
        s.K = 2048; /* docs/CASES.md prim_topk_ties: equal scores give ascending indices, n < K a -1 tail */
        run_variant("prim_topk_ties", v, &s);

        /* tie groups of exact scores, several NI and K */
        s = base_spec(v);
        s.data = LP_DATA_TIES;
        s.NI = 7;
        run_variant("ties", v, &s);
        s.NI = 64;
        s.DI = 128;
        s.K = 200;
        s.BS = 64;
        run_variant("ties_n64_k200", v, &s);

        /* every weight negative: scores <= 0, with many zeros of either sign (equal) */
        s = base_spec(v);
        s.data = LP_DATA_TIES;
        s.neg_weights = 1;
        run_variant("ties_neg_weights", v, &s);

        /* NaN weights: the whole row is NaN, ranked by index */
        s = base_spec(v);
        s.data = LP_DATA_TIES;
        s.nan_weights = 1;
        s.S[0] = 4, s.S[1] = 4, s.S[2] = 4;
        run_variant("ties_nan_weights", v, &s);
    }
    /* int8 only: NaN key scales among exact scores, negative key scales, ws overflow / underflow */
    {
        lp_spec s = base_spec(1);
        s.data = LP_DATA_TIES;
        s.nan_key_scales = 1;
        s.neg_scales = 1;
        run_problem("ties_nan_neg_key_scales_int8", &s);
        s = base_spec(1);
        s.data = LP_DATA_TIES;
        s.ws_extreme = 1;
        s.S[0] = 3, s.S[1] = 3, s.S[2] = 3;
        run_problem("ties_ws_extreme_int8", &s);
    }
}

static void test_numeric_edges(void)
{
    for (int v = 0; v < VARIANTS; v++) {
        lp_spec s = base_spec(v);
        s.neg_weights = 1;
        run_variant("neg_weights", v, &s);

        s = base_spec(v);
        s.nan_weights = 1;
        s.S[0] = 4, s.S[1] = 4, s.S[2] = 4;
        run_variant("nan_weights", v, &s);

        s = base_spec(v);
        s.nan_fill = 1;
        s.extra_blocks = 2;
        s.garbage_table = 1;
        s.extra_cols = 2;
        run_variant("nan_unused_rows", v, &s);
        s.cmp_ratio = 4;
        run_variant("nan_unused_rows_ratio4", v, &s);
    }
    lp_spec s = base_spec(1);
    s.neg_scales = 1;
    run_problem("neg_key_scales_int8", &s);
    s = base_spec(1);
    s.nan_key_scales = 1;
    run_problem("nan_key_scales_int8", &s);
    s = base_spec(1);
    s.ws_extreme = 1;
    s.S[0] = 3, s.S[1] = 3, s.S[2] = 3;
    run_problem("ws_extreme_int8", &s);
    s = base_spec(1);
    s.data = LP_DATA_EXTREME;
    s.DI = 128;
    run_problem("int8_extreme_di128", &s);
    /* d_hj = fp16(16384 DI / 2048): DI 8189 gives 65512 -> 65504, DI 8190 gives 65520 -> +Inf */
    static const int big_di[] = {8189, 8190, 8192};
    for (int i = 0; i < 3; i++) {
        char label[100];
        s = base_spec(1);
        s.data = LP_DATA_EXTREME;
        s.DI = big_di[i];
        s.NI = 2;
        s.seqused[0] = 40, s.seqused[1] = 9, s.seqused[2] = 23;
        s.K = 8;
        s.BS = 4;
        snprintf(label, sizeof label, "int8_extreme_di%d", big_di[i]);
        run_problem(label, &s);
    }
}

/* Scores NaN, +Inf and -Inf among exact finite ones: rows must equal the oracle's exactly (the order of
 * spec §2.9: +Inf first, then numbers, -Inf, NaN last, ties by index), and a token whose scores are all NaN
 * must get indices 0, 1, ... min(n, K) - 1 with NaN scores. */
static void test_nonfinite_scores(void)
{
    static const int Ks[] = {5, 2048};
    for (int v = 0; v < 2; v++)
        for (int ratio = 1; ratio <= 4; ratio += 3)
            for (int ki = 0; ki < 2; ki++) {
                char label[100];
                snprintf(label, sizeof label, "nan_rule_scores_%s_ratio%d_k%d", vname(v), ratio, Ks[ki]);
                if (!tu_selected(label))
                    continue;
                lp_spec s = base_spec(v);
                s.data = LP_DATA_TIES;
                s.q_nonfinite = 1;
                s.key_nan = 1;
                s.cmp_ratio = ratio;
                s.K = Ks[ki];
                s.S[0] = 4, s.S[1] = 4, s.S[2] = 4;
                lp_problem *p = lp_make(&s, tu_label_seed(label));
                lp_compute_ref(p);
                char l[300];
                for (int isa = -1; tu_next_tier(ctx, &isa, label, l, sizeof l);) {
                    if (!call(p, l))
                        continue;
                    lp_check(p, l);
                    const dsops_lightning_indexer_args *a = &p->args;
                    int64_t bad_t = -1;
                    for (int64_t t = 1; t < p->T; t += 4) { /* every score NaN */
                        const int64_t n = lp_visible(a, t), m = n < s.K ? n : s.K;
                        const int32_t *idx = (const int32_t *)a->topk_indices.data + t * a->topk_indices.stride[0];
                        const float *sc = (const float *)a->topk_scores.data + t * a->topk_scores.stride[0];
                        for (int64_t j = 0; j < s.K && bad_t < 0; j++)
                            if (idx[j] != (j < m ? j : -1) || (j < m ? !isnan(sc[j]) : !(isinf(sc[j]) && sc[j] < 0)))
                                bad_t = t;
                    }
                    tu_check(bad_t < 0, "%s: token %lld scores only NaN but its row is not 0, 1, ... with NaN scores", l,
                             (long long)bad_t);
                }
                lp_free(p);
            }
    dsops_context_set_isa(ctx, dsops_isa_detected());
}

static void test_shapes(void)
{
    static const int NIs[] = {1, 3, 64};
    static const int Ks[] = {1, 5, 2048};
    for (int v = 0; v < VARIANTS; v++) {
        for (int ni = 0; ni < 3; ni++)
            for (int ki = 0; ki < 3; ki++) {
                char label[100];
                lp_spec s = base_spec(v);
                s.NI = NIs[ni];
                s.K = Ks[ki];
                snprintf(label, sizeof label, "shape_%s_ni%d_k%d", vname(v), NIs[ni], Ks[ki]);
                run_problem(label, &s);
            }
        /* odd and short rows: partial 16-value packing blocks, a zero pad dim, single-pair tiles */
        static const int DIs[] = {1, 3, 16, 17, 42, 128, 130, 256};
        for (int di = 0; di < (int)(sizeof DIs / sizeof DIs[0]); di++) {
            char label[100];
            lp_spec s = base_spec(v);
            s.DI = DIs[di];
            s.NI = 5;
            snprintf(label, sizeof label, "dims_%s_di%d", vname(v), DIs[di]);
            run_problem(label, &s);
        }
        /* more keys than K, full-size heads: several key tiles */
        {
            char label[100];
            lp_spec s = base_spec(v);
            s.NI = tu_quick() ? 16 : 64;
            s.DI = 128;
            s.K = tu_quick() ? 256 : 2048;
            s.BS = 128;
            s.seqused[0] = tu_quick() ? 700 : 5000;
            s.seqused[2] = tu_quick() ? 1500 : 9000;
            snprintf(label, sizeof label, "wide_%s_ni%d_k%d", vname(v), s.NI, s.K);
            run_problem(label, &s);
        }
    }
}

static void test_sequences(void)
{
    for (int v = 0; v < VARIANTS; v++) {
        /* tokens with no visible key: S_b = 0, seqused 0, S_b > seqused, L < cmp_ratio */
        lp_spec s = base_spec(v);
        s.B = 6;
        int S[6] = {0, 2, 0, 3, 1, 4}, U[6] = {0, 10, 5, 0, 1, 2};
        for (int b = 0; b < 6; b++)
            s.S[b] = S[b], s.seqused[b] = U[b];
        s.dead_seq_garbage = 1;
        run_variant("zero_len", v, &s);
        s.cmp_ratio = 4;
        s.seqused[1] = 13, s.seqused[4] = 3, s.seqused[5] = 6; /* n: 2..3, 0, 0..1 */
        run_variant("zero_len_ratio4", v, &s);

        /* MTP: S 1 ... 4, many sequences, some empty */
        s = base_spec(v);
        s.B = 8;
        int S2[8] = {1, 0, 2, 3, 0, 4, 1, 4}, U2[8] = {77, 500, 3, 129, 0, 64, 1, 260};
        for (int b = 0; b < 8; b++)
            s.S[b] = S2[b], s.seqused[b] = U2[b];
        s.K = 64;
        s.BS = 16;
        s.dead_seq_garbage = 1;
        run_variant("mtp_multi_seq", v, &s);
        s.cmp_ratio = 4;
        run_variant("mtp_multi_seq_ratio4", v, &s);
    }
}

static void test_views_and_outputs(void)
{
    for (int v = 0; v < VARIANTS; v++) {
        lp_spec s = base_spec(v);
        s.with_scores = 0;
        run_variant("no_scores", v, &s);
        s.data = LP_DATA_TIES;
        run_variant("no_scores_ties", v, &s);

        s = base_spec(v);
        s.strided_q = s.strided_kv = s.strided_out = 1;
        s.nan_fill = 1;
        s.garbage_table = 1;
        run_variant("strided_all", v, &s);
        s.with_scores = 0;
        run_variant("strided_all_no_scores", v, &s);

        s = base_spec(v);
        s.strided_q = 1;
        run_variant("strided_q", v, &s);
        s = base_spec(v);
        s.strided_kv = 1;
        s.cmp_ratio = 3;
        run_variant("strided_kv", v, &s);

        /* empty calls */
        s = base_spec(v);
        s.S[0] = s.S[1] = s.S[2] = 0;
        run_variant("empty_t0", v, &s);
        s = base_spec(v);
        s.B = 0;
        run_variant("empty_b0", v, &s);
    }
}

/* The usual test main (tests/test_util.h): seed, one context, the sections in order, the tally. */
int main(int argc, char **argv)
{
    tu_init(argc, argv, 42);
    ctx = tu_announced_context();
    test_block_sizes_and_ratios();
    test_ties();
    test_numeric_edges();
    test_nonfinite_scores();
    test_shapes();
    test_sequences();
    test_views_and_outputs();
    dsops_context_destroy(ctx);
    return tu_finish();
}
