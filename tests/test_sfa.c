/* sparse_flash_attention_v32 against the reference oracle, on every available ISA tier (the named cases of
 * docs/CASES.md run in tests/test_cases.c, against the family's check in harness/sparse_flash_attention_v32.c):
 *   - adversarial problems in the four cache layouts: odd block sizes, permuted tables with garbage in unused entries, the
 *     invalid-index zoo, all-invalid rows, zero-length sequences, topk_length, NaN in every unused cache
 *     row, int8 at -128/127, extreme logits, -Inf scores, odd shapes, strided views, lse on/off, all
 *     probability modes, empty calls;
 *   - the poisoned-row rule (spec §2.10 A3) in every layout and probability mode: NaN, +Inf and -Inf query
 *     elements and a NaN key make their rows NaN (out and lse), a token without used entries stays out +0 /
 *     lse +Inf whatever its query holds, the other rows of the call are unaffected, and NaN or +Inf in
 *     every cache row no token uses changes nothing (compared with the oracle on the same problem without
 *     them).
 * Usage: test_sfa [label filter]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "problems_check.h"
#include "ref.h"
#include "test_util.h"

static dsops_context *ctx;

/* ---- adversarial problems ----------------------------------------------------------------------------- */

/* One call with the outputs reset to their sentinels; counts the checks of its status. */
static int call(tp_problem *p, const char *label)
{
    tp_reset_outputs(p);
    return tu_check_accepted(label, dsops_sparse_flash_attention_v32(ctx, &p->args));
}

static void run_problem(const char *label, const tp_spec *sp)
{
    if (!tu_selected(label))
        return;
    tp_problem *p = tp_make(sp, tu_label_seed(label));
    tp_compute_ref(p);
    char l[300];
    for (int isa = -1; tu_next_tier(ctx, &isa, label, l, sizeof l);)
        if (call(p, l))
            tp_check(p, l);
    tp_free(p);
}

static const char *layout_name(dsops_kv_layout l)
{
    static const char *names[] = {"bf16", "int8", "packed", "fp8"}; /* dsops_kv_layout order */
    return names[l];
}

/* run_problem under the label "<name>_<layout>". */
static void run_on_layout(const char *name, const tp_spec *sp)
{
    char label[100];
    snprintf(label, sizeof label, "%s_%s", name, layout_name(sp->layout));
    run_problem(label, sp);
}

/* A mixed problem: three sequences with prefill and decode tokens, lengths below and above K. */
static tp_spec base_spec(dsops_kv_layout layout)
{
    tp_spec s;
    memset(&s, 0, sizeof s);
    s.B = 3;
    s.S[0] = 2, s.S[1] = 3, s.S[2] = 1;
    s.seqused[0] = 300, s.seqused[1] = 41, s.seqused[2] = 1000;
    s.N = 3;
    s.Dc = layout == DSOPS_KV_SPLIT_BF16 ? 64 : (layout == DSOPS_KV_SPLIT_INT8 ? 128 : 512);
    s.Dr = 64;
    s.K = 33;
    s.BS = 17;
    s.layout = layout;
    s.p_mode = DSOPS_P_NORMALISED;
    s.with_lse = 1;
    s.index_mode = TP_IDX_ZOO;
    return s;
}

static void test_block_sizes(void)
{
    static const int bss[] = {1, 3, 17, 130};
    for (int l = 0; l < 4; l++)
        for (int i = 0; i < 4; i++) {
            tp_spec s = base_spec((dsops_kv_layout)l);
            s.BS = bss[i];
            s.garbage_table = 1;
            s.extra_blocks = 3;
            s.extra_cols = 2;
            char label[100];
            snprintf(label, sizeof label, "bs%d_%s", bss[i], layout_name((dsops_kv_layout)l));
            run_problem(label, &s);
        }
}

static void test_index_modes(void)
{
    for (int l = 0; l < 4; l++) {
        tp_spec s = base_spec((dsops_kv_layout)l);
        s.index_mode = TP_IDX_VALID;
        s.BS = 16;
        run_on_layout("valid_dups", &s);

        s = base_spec((dsops_kv_layout)l);
        s.index_mode = TP_IDX_INVALID;
        run_on_layout("all_invalid", &s);

        s = base_spec((dsops_kv_layout)l);
        s.index_mode = TP_IDX_CASE;
        s.K = 64;
        s.BS = 32;
        run_on_layout("case_rows", &s);

        /* zero-length sequences: S_b = 0, seqused 0, and S_b > seqused (L <= 0 for early tokens) */
        s = base_spec((dsops_kv_layout)l);
        s.B = 6;
        int S[6] = {0, 2, 0, 3, 1, 4}, U[6] = {0, 10, 5, 0, 1, 2};
        for (int b = 0; b < 6; b++)
            s.S[b] = S[b], s.seqused[b] = U[b];
        s.index_mode = TP_IDX_VALID;
        run_on_layout("zero_len", &s);

        s = base_spec((dsops_kv_layout)l);
        s.with_topk_length = 1;
        s.S[0] = 5, s.S[1] = 4, s.S[2] = 6;
        run_on_layout("topk_length", &s);
    }
}

static void test_poison(void)
{
    for (int l = 0; l < 4; l++) {
        tp_spec s = base_spec((dsops_kv_layout)l);
        s.nan_fill = 1;
        s.extra_blocks = 2;
        s.garbage_table = 1;
        run_on_layout("nan_unused", &s);

        s.with_topk_length = 1;
        s.S[0] = 4, s.S[1] = 4, s.S[2] = 4;
        s.p_mode = DSOPS_P_TILED;
        s.p_tile = 7;
        run_on_layout("nan_unused_len_tiled", &s);

        if (l != DSOPS_KV_SPLIT_BF16) {
            s = base_spec((dsops_kv_layout)l);
            s.int8_extreme = 1;
            s.index_mode = TP_IDX_VALID;
            run_on_layout("int8_extreme", &s);
        }
    }
}

static void test_extreme_logits(void)
{
    static const dsops_p_mode modes[] = {DSOPS_P_NORMALISED, DSOPS_P_FP32, DSOPS_P_TILED};
    for (int l = 0; l < 4; l++)
        for (int m = 0; m < 3; m++) {
            char label[100];
            tp_spec s = base_spec((dsops_kv_layout)l);
            s.q_amp = 64.0f;
            s.softmax_scale = 1.0f; /* scores in the thousands */
            s.p_mode = modes[m];
            s.p_tile = 5;
            s.index_mode = TP_IDX_VALID;
            snprintf(label, sizeof label, "extreme_logits_%s_p%d", layout_name((dsops_kv_layout)l), (int)modes[m]);
            run_problem(label, &s);
        }
    /* -Inf scores (finite inputs whose products overflow): some keys of every token, and every key of
     * sequence 0 (NaN rows: every logit -Inf, A3); tiles of -Inf before finite ones */
    for (int m = 0; m < 3; m++) {
        static const int tiles[] = {1, 3, 128};
        for (int ti = 0; ti < (modes[m] == DSOPS_P_TILED ? 3 : 1); ti++) {
            char label[100];
            tp_spec s = base_spec(DSOPS_KV_SPLIT_BF16);
            s.neg_inf = 1;
            s.p_mode = modes[m];
            s.p_tile = tiles[ti];
            s.index_mode = TP_IDX_VALID;
            snprintf(label, sizeof label, "neg_inf_scores_p%d_tile%d", (int)modes[m], tiles[ti]);
            run_problem(label, &s);
        }
    }
}

static void test_shapes(void)
{
    static const int Ns[] = {1, 3, 17};
    static const int Ks[] = {1, 5, 33};
    for (int l = 0; l < 4; l++)
        for (int ni = 0; ni < 3; ni++)
            for (int ki = 0; ki < 3; ki++) {
                char label[100];
                tp_spec s = base_spec((dsops_kv_layout)l);
                s.N = Ns[ni];
                s.K = Ks[ki];
                s.index_mode = ki == 0 ? TP_IDX_VALID : TP_IDX_ZOO;
                snprintf(label, sizeof label, "shape_%s_n%d_k%d", layout_name((dsops_kv_layout)l), Ns[ni], Ks[ki]);
                run_problem(label, &s);
            }
    /* latent widths: bf16 Dc 32 / Dr 16, Dc 64 and 128 with Dr 64; int8 Dc 128, 256 */
    static const int bf16_dims[][2] = {{32, 16}, {64, 64}, {128, 64}, {512, 64}};
    for (int i = 0; i < 4; i++) {
        char label[100];
        tp_spec s = base_spec(DSOPS_KV_SPLIT_BF16);
        s.Dc = bf16_dims[i][0];
        s.Dr = bf16_dims[i][1];
        s.N = 5;
        snprintf(label, sizeof label, "dims_bf16_dc%d_dr%d", s.Dc, s.Dr);
        run_problem(label, &s);
    }
    for (int dc = 128; dc <= 256; dc += 128) {
        char label[100];
        tp_spec s = base_spec(DSOPS_KV_SPLIT_INT8);
        s.Dc = dc;
        s.N = 5;
        snprintf(label, sizeof label, "dims_int8_dc%d_dr64", dc);
        run_problem(label, &s);
    }
    /* many heads and a longer list: exercise head blocking and several tiles */
    for (int l = 0; l < 4; l++) {
        char label[100];
        tp_spec s = base_spec((dsops_kv_layout)l);
        s.N = tu_quick() ? 20 : 67;
        s.K = 300;
        s.BS = 64;
        s.seqused[1] = 4100;
        snprintf(label, sizeof label, "wide_%s_n%d_k300", layout_name((dsops_kv_layout)l), s.N);
        run_problem(label, &s);
    }
}

static void test_strided_and_modes(void)
{
    for (int l = 0; l < 4; l++) {
        tp_spec s = base_spec((dsops_kv_layout)l);
        s.strided_q = s.strided_kv = s.strided_out = 1;
        s.nan_fill = 1;
        run_on_layout("strided_all", &s);

        s.with_lse = 0;
        run_on_layout("strided_all_nolse", &s);

        s = base_spec((dsops_kv_layout)l);
        s.strided_q = 1;
        run_on_layout("strided_q", &s);

        s = base_spec((dsops_kv_layout)l);
        s.strided_out = 1;
        s.with_lse = 1;
        run_on_layout("strided_out", &s);

        s = base_spec((dsops_kv_layout)l);
        s.with_lse = 0;
        run_on_layout("no_lse", &s);
    }
    /* a packed_int8-compatible byte buffer read through split_int8 views */
    {
        tp_spec s = base_spec(DSOPS_KV_SPLIT_INT8);
        s.Dc = 512;
        s.strided_kv = 2;
        run_problem("packed_bytes_as_split_int8", &s);
    }
    /* probability modes, with lists long enough for several tiles */
    struct {
        dsops_p_mode m;
        int tile;
    } modes[] = {{DSOPS_P_NORMALISED, 0}, {DSOPS_P_FP32, 0}, {DSOPS_P_TILED, 1}, {DSOPS_P_TILED, 7}, {DSOPS_P_TILED, 128}};
    for (int l = 0; l < 4; l++)
        for (int m = 0; m < 5; m++) {
            char label[100];
            tp_spec s = base_spec((dsops_kv_layout)l);
            s.K = 300;
            s.BS = 64;
            s.N = 4;
            s.p_mode = modes[m].m;
            s.p_tile = modes[m].tile;
            s.with_topk_length = m == 3;
            s.with_sinks = m == 1 || m == 3 ? 1 : (m == 4 ? 2 : 0);
            snprintf(label, sizeof label, "mode_%s_p%d_tile%d", layout_name((dsops_kv_layout)l), (int)modes[m].m,
                     modes[m].tile);
            run_problem(label, &s);
        }
    /* sinks of +Inf, -Inf and NaN (heads 0-2) and finite ones, the default mode */
    for (int l = 0; l < 4; l++) {
        tp_spec s = base_spec((dsops_kv_layout)l);
        s.N = 5;
        s.with_sinks = 2;
        run_on_layout("sinks", &s);
    }
}

/* ---- the poisoned-row rule (spec §2.10 A3) --------------------------------------------------------------- */

enum { NR_TOKEN = 0, NR_LONELY = 3, NR_KEY_TOKEN = 5 }; /* see nan_rule_spec */

/* Seq 0 (tokens 0-2) sees 38-40 keys; seq 1 (tokens 3-4) has seqused 1, so token 3 sees nothing; seq 2
 * (tokens 5-6) sees 24-25. The zoo of skipped indices is in every row. */
static tp_spec nan_rule_spec(dsops_kv_layout layout)
{
    tp_spec s = base_spec(layout);
    s.S[0] = 3, s.S[1] = 2, s.S[2] = 2;
    s.seqused[0] = 40, s.seqused[1] = 1, s.seqused[2] = 25;
    s.N = 4;
    s.K = 12;
    s.BS = 5;
    s.garbage_table = 1;
    s.extra_blocks = 2;
    return s;
}

/* The non-finite inputs, the same in a problem and its clean twin: token NR_TOKEN has a NaN query element
 * in head 0 (every logit NaN), +Inf in head 1 (logits +Inf or NaN), -Inf in head 2 (logits -Inf, +Inf or
 * NaN: NaN whichever), head 3 untouched; token NR_LONELY (no used entry) NaN in every head; the first
 * used key of token NR_KEY_TOKEN gets a NaN rope value (one NaN logit in each row that attends to it). */
static void nan_rule_inject(tp_problem *p)
{
    const int Dc = p->sp.Dc;
    tp_set_q(p, NR_TOKEN, 0, 5, NAN);
    tp_set_q(p, NR_TOKEN, 1, Dc + 2, INFINITY);
    tp_set_q(p, NR_TOKEN, 2, 0, -INFINITY);
    for (int h = 0; h < p->sp.N; h++)
        tp_set_q(p, NR_LONELY, h, h, NAN);
    int64_t first;
    if (tp_used_entries(p, NR_KEY_TOKEN, &first) > 0)
        tp_set_key_rope(p, 2, first, 0, NAN);
}

typedef enum row_kind { ROW_FINITE, ROW_NAN, ROW_LONELY } row_kind;

/* 1 if row (t, h) of the library's output is of the kind: every out element and lse finite, every one NaN,
 * or out +0 with lse +Inf. */
static int row_is(const dsops_sparse_flash_attention_v32_args *a, int64_t t, int64_t h, row_kind kind)
{
    const uint16_t *o = (const uint16_t *)a->out.data + t * a->out.stride[0] + h * a->out.stride[1];
    int ok = 1;
    for (int64_t d = 0; d < a->out.shape[2]; d++) {
        float v = tu_f32(o[d]);
        ok &= kind == ROW_NAN ? isnan(v) : (kind == ROW_LONELY ? o[d] == 0 : isfinite(v));
    }
    if (a->lse.data) {
        float l = ((const float *)a->lse.data)[t * a->lse.stride[0] + h * a->lse.stride[1]];
        ok &= kind == ROW_NAN ? isnan(l) : (kind == ROW_LONELY ? isinf(l) && l > 0 : isfinite(l));
    }
    return ok;
}

static void test_nan_rule(void)
{
    static const struct {
        dsops_p_mode m;
        int tile;
    } modes[] = {{DSOPS_P_NORMALISED, 0}, {DSOPS_P_FP32, 0}, {DSOPS_P_TILED, 1}, {DSOPS_P_TILED, 5}};
    for (int l = 0; l < 4; l++)
        for (int m = 0; m < 4; m++)
            for (int inf = 0; inf < 2; inf++) {
                char label[100];
                snprintf(label, sizeof label, "nan_rule_%s_p%d_tile%d_unused_%s", layout_name((dsops_kv_layout)l),
                         (int)modes[m].m, modes[m].tile, inf ? "inf" : "nan");
                if (!tu_selected(label))
                    continue;
                tp_spec s = nan_rule_spec((dsops_kv_layout)l);
                s.p_mode = modes[m].m;
                s.p_tile = modes[m].tile;
                tp_spec clean_spec = s;
                s.nan_fill = !inf;
                s.inf_fill = inf;
                tp_problem *p = tp_make(&s, tu_label_seed(label)), *clean = tp_make(&clean_spec, tu_label_seed(label));
                nan_rule_inject(p);
                nan_rule_inject(clean);
                int64_t first;
                tu_check(tp_used_entries(p, NR_TOKEN, &first) > 0 && tp_used_entries(p, NR_LONELY, &first) == 0 &&
                             tp_used_entries(p, NR_KEY_TOKEN, &first) > 0,
                         "%s: the problem does not have the rows the test needs", label);
                /* the oracle on the twin whose unused rows hold ordinary data */
                tp_compute_ref(clean);
                free(p->ref_out);
                free(p->ref_lse);
                p->ref_out = clean->ref_out, p->ref_lse = clean->ref_lse;
                clean->ref_out = NULL, clean->ref_lse = NULL;
                char lt[300];
                for (int isa = -1; tu_next_tier(ctx, &isa, label, lt, sizeof lt);) {
                    if (!call(p, lt))
                        continue;
                    tp_check(p, lt);
                    /* the same, stated without the oracle */
                    const dsops_sparse_flash_attention_v32_args *a = &p->args;
                    tu_check(row_is(a, NR_TOKEN, 0, ROW_NAN) && row_is(a, NR_TOKEN, 1, ROW_NAN) &&
                                 row_is(a, NR_TOKEN, 2, ROW_NAN) && row_is(a, NR_TOKEN, 3, ROW_FINITE),
                             "%s: token %d: NaN / +Inf / -Inf query rows not NaN, or the clean head not finite", lt,
                             NR_TOKEN);
                    int lonely_ok = 1, key_ok = 1;
                    for (int h = 0; h < s.N; h++) {
                        lonely_ok &= row_is(a, NR_LONELY, h, ROW_LONELY);
                        key_ok &= row_is(a, NR_KEY_TOKEN, h, ROW_NAN);
                    }
                    tu_check(lonely_ok, "%s: token %d without keys is not out +0 / lse +Inf", lt, NR_LONELY);
                    tu_check(key_ok, "%s: token %d attends to a key with a NaN logit but is not NaN", lt, NR_KEY_TOKEN);
                }
                tp_free(p);
                tp_free(clean);
            }
    dsops_context_set_isa(ctx, dsops_isa_detected());
}

/* max_logits [T, N] against the oracle's: the same lonely (-Inf) and poisoned (NaN) rows, the largest score
 * within the score tolerance elsewhere; on the NaN-rule problem (lonely, poisoned and clean rows) in every
 * layout, normalised and tiled. */
static void test_max_logits(void)
{
    for (int l = 0; l < 4; l++)
        for (int tiled = 0; tiled < 2; tiled++) {
            char label[100];
            snprintf(label, sizeof label, "max_logits_%s_%s", layout_name((dsops_kv_layout)l),
                     tiled ? "tiled" : "normalised");
            if (!tu_selected(label))
                continue;
            tp_spec s = nan_rule_spec((dsops_kv_layout)l);
            s.p_mode = tiled ? DSOPS_P_TILED : DSOPS_P_NORMALISED;
            s.p_tile = 5;
            s.with_sinks = 1;
            tp_problem *p = tp_make(&s, tu_label_seed(label));
            nan_rule_inject(p);
            tp_compute_ref(p);
            const int64_t T = p->T, N = s.N, s2[2] = {T, N};
            float *got = tu_calloc((size_t)(T * N), sizeof(float)), *want = tu_calloc((size_t)(T * N), sizeof(float));
            dsops_sparse_flash_attention_v32_args r = p->args; /* the oracle's outputs in buffers of its own */
            uint16_t *rout = tu_calloc((size_t)(T * N * s.Dc), sizeof(uint16_t));
            r.out = dsops_tensor_make(rout, DSOPS_BF16, 3, (const int64_t[]){T, N, s.Dc});
            r.lse = (dsops_tensor){0};
            r.max_logits = dsops_tensor_make(want, DSOPS_FP32, 2, s2);
            dsops_ref_sparse_flash_attention_v32(&r);
            p->args.max_logits = dsops_tensor_make(got, DSOPS_FP32, 2, s2);
            char lt[300];
            for (int isa = -1; tu_next_tier(ctx, &isa, label, lt, sizeof lt);) {
                if (!call(p, lt))
                    continue;
                int64_t bad = -1, lonely = 0, poisoned = 0;
                for (int64_t i = 0; i < T * N && bad < 0; i++) {
                    lonely += want[i] == -INFINITY;
                    poisoned += isnan(want[i]);
                    int same = isnan(want[i]) ? isnan(got[i])
                               : isinf(want[i]) ? got[i] == want[i]
                                                : fabsf(got[i] - want[i]) <= 1e-5f + 1e-5f * fabsf(want[i]);
                    if (!same)
                        bad = i;
                }
                tu_check(bad < 0 && lonely > 0 && poisoned > 0,
                         "%s: max_logits[%lld] = %g, oracle %g (%lld lonely, %lld poisoned rows seen)", lt,
                         (long long)bad, bad < 0 ? 0.0 : got[bad], bad < 0 ? 0.0 : want[bad], (long long)lonely,
                         (long long)poisoned);
                tp_check(p, lt); /* out and lse unchanged by the extra output */
            }
            p->args.max_logits = (dsops_tensor){0};
            free(got);
            free(want);
            free(rout);
            tp_free(p);
        }
    dsops_context_set_isa(ctx, dsops_isa_detected());
}

static void test_empty(void)
{
    for (int l = 0; l < 4; l++) {
        tp_spec s = base_spec((dsops_kv_layout)l);
        s.S[0] = s.S[1] = s.S[2] = 0; /* T = 0 */
        run_on_layout("empty_t0", &s);

        s = base_spec((dsops_kv_layout)l);
        s.B = 0; /* B = 0, T = 0 */
        run_on_layout("empty_b0", &s);
    }
}

/* The usual test main (tests/test_util.h): seed, one context, the sections in order, the tally. */
int main(int argc, char **argv)
{
    tu_init(argc, argv, 42);
    ctx = tu_announced_context();
    test_block_sizes();
    test_index_modes();
    test_poison();
    test_extreme_logits();
    test_shapes();
    test_strided_and_modes();
    test_empty();
    test_nan_rule();
    test_max_logits();
    dsops_context_destroy(ctx);
    return tu_finish();
}
