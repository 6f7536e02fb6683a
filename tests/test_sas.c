/* sas (spec §3.7, attention core §2.10) against its oracle (ref/ref_sas.c), on every instruction-set
 * tier from scalar up to the detected one:
 *  - the oracle itself on two hand-made keys (normalised, fp32, tiled, with and without a sink);
 *  - adversarial problems (every tier): contexts shorter than the window, L multiples of 128 and 4,
 *    compressed counts 0, -1 / out-of-range / non-causal-but-valid / duplicate sparse indices, junk after
 *    the counted entries, cmp_topk_length absent / random / 0 / the vendor count, odd block sizes in each
 *    pool independently, sinks absent / random / +-Inf / +-1e30, N 1, D 3 / 64 / 67 / 576, win_size 0 / 1 /
 *    128 / 300, every p_mode (tiled with p_tile 1 / 3 / 7 / 128 and windows shorter than the tile), lse on /
 *    off, MTP (S 2-4) and prefill (S 64+) sequences, L <= 0 tokens, empty sequences, T 0 and B 0, strided
 *    views, extreme logits. Every pool row that is not needed holds NaN (also the padding of strided rows
 *    and whole spare blocks); every block-table entry that is not needed holds -1 or junk; the elements
 *    before, between (strides) and after out and lse must stay untouched;
 *  - the docs/CASES.md edges: v4_scfa_edge_kv5_s2 (the vendor count makes token 0 window-only),
 *    v4_sas_edge_lonely (out +0, lse +Inf), v4_sas_edge_sink_inf (out 0, lse bitwise as without sinks),
 *    v4_sas_edge_n1_bs1; lse never depends on the sink;
 *  - the poisoned-row rule (spec §2.10 A3) on every tier: by hand (NaN, +Inf and all -Inf logits give NaN
 *    out and lse; -Inf logits among finite ones weigh 0; a NaN sink makes out NaN and keeps lse, +Inf gives
 *    out 0, -Inf changes nothing), and in swa / cfa / scfa problems of every p_mode (NaN, +Inf, -Inf query
 *    elements, a NaN key, a token without keys whose query is NaN, the other rows unaffected) with NaN,
 *    +Inf or -Inf in every pool row nobody reads, against the oracle on the same problem with ordinary values
 *    there;
 *  - determinism: bitwise equal outputs for 1, 2 and 3 threads (scalar and best tier).
 * The adversarial problems are built in harness/sas.c (problems.h, section "adversarial problems").
 * The named cases of the sas family run in tests/test_cases.c, against the family's check in harness/sas.c.
 * Tolerances (§3.7): out 1e-4 / 2^-7 / 0.005 (normalised, fp32) or 5e-4 / 5e-4 / 0.005 (tiled); lse 1e-6 /
 * 8.01/65536 / 0.005; lonely rows exactly out +0, lse +Inf.
 * Usage: test_sas [label filter]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "problems.h"
#include "ref.h"
#include "run_common.h"
#include "test_util.h"

static dsops_context *ctx;

static const tu_tol OUT_TOL = {1e-4, 1.0 / 128, 0.005};
static const tu_tol OUT_TILED_TOL = {5e-4, 5e-4, 0.005};
static const tu_tol LSE_TOL = {1e-6, 8.01 / 65536, 0.005};

/* ---- checks -------------------------------------------------------------------------------------------- */

/* The operator's outputs (in args, out viewed with row stride Dp inside guarded buffers) against the oracle's
 * dense ones: tolerances by p_mode, lonely rows exact, rows of +Inf sinks exactly 0, guards and padding
 * untouched, an absent lse never written. */
static void check_outputs(const char *label, const dsops_sas_args *a, const sp_guarded *out, const sp_guarded *lse,
                          int64_t Dp, const uint16_t *ref_out, const float *ref_lse)
{
    const int64_t T = a->q.shape[0], N = a->q.shape[1], D = a->q.shape[2];
    const size_t n = (size_t)(T * N * D);
    const uint16_t *ov = sp_guarded_view(out);
    float *o = tu_calloc(n + 1, 4), *r = tu_calloc(n + 1, 4);
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < N; h++)
            for (int64_t d = 0; d < D; d++) {
                o[(t * N + h) * D + d] = tu_f32(ov[(t * N + h) * Dp + d]);
                r[(t * N + h) * D + d] = tu_f32(ref_out[(t * N + h) * D + d]);
            }
    char l[400];
    snprintf(l, sizeof l, "%s out", label);
    tu_compare_close(l, o, r, n, a->p_mode == DSOPS_P_TILED ? OUT_TILED_TOL : OUT_TOL, NULL);
    free(o), free(r);

    if (a->lse.data) {
        snprintf(l, sizeof l, "%s lse", label);
        tu_compare_close(l, sp_guarded_view(lse), ref_lse, (size_t)(T * N), LSE_TOL, NULL);
    }

    /* the exact rules: lonely rows, rows of a +Inf sink, the NaN rule */
    sas_row_faults f = {0, 0, 0, -1, -1, -1};
    sas_find_row_faults(a, 0, T, ref_out, ref_lse, &f);
    const int64_t Nd = N ? N : 1;
    tu_check(f.lonely == 0, "%s: lonely row (t %lld, h %lld) is not out +0 / lse +Inf", label,
             (long long)(f.first_lonely / Nd), (long long)(f.first_lonely % Nd));
    tu_check(f.sink == 0, "%s: row (t %lld, h %lld) of a +Inf sink is not 0", label, (long long)(f.first_sink / Nd),
             (long long)(f.first_sink % Nd));
    tu_check(f.nan == 0, "%s: row (t %lld, h %lld) breaks the NaN rule (NaN throughout where the oracle's lse is NaN, "
             "no NaN where the oracle has none)", label, (long long)(f.first_nan / Nd), (long long)(f.first_nan % Nd));

    /* untouched: guards, padding, an absent lse */
    size_t bad = 0;
    for (size_t i = 0; i < out->n + 2; i++) {
        const int in_view = i >= 1 && i <= out->n && (int64_t)((i - 1) % (size_t)Dp) < D;
        if (!in_view && !sp_guarded_holds(out, i))
            bad++;
    }
    tu_check(bad == 0, "%s: %zu out elements outside the view (guards, padding) written", label, bad);
    bad = 0;
    for (size_t i = 0; i < lse->n + 2; i++)
        if ((!a->lse.data || i == 0 || i == lse->n + 1) && !sp_guarded_holds(lse, i))
            bad++;
    tu_check(bad == 0, "%s: %zu lse elements written %s", label, bad, a->lse.data ? "outside the view" : "(lse absent)");
}

/* Runs p on the current tier into its own guarded buffers; returns the status. */
static dsops_status sp_run(sp_problem *p)
{
    sp_reset_outputs(p);
    return dsops_sas(ctx, &p->args);
}

/* p on every tier from scalar up (labels "<label> [<tier>]") against the oracle's results of sp_reference;
 * after each checked call, `also` (optional) adds its own checks. */
static void sp_check_tiers(const char *label, sp_problem *p, void (*also)(const char *l, const sp_problem *p))
{
    char l[300];
    for (int isa = -1; tu_next_tier(ctx, &isa, label, l, sizeof l);) {
        dsops_status st = sp_run(p);
        if (!tu_check(st == DSOPS_OK, "%s: status %s (%s)", l, dsops_status_name(st), dsops_last_error()))
            continue;
        check_outputs(l, &p->args, &p->out, &p->lse, p->Dp, p->ref_out, p->ref_lse);
        if (also)
            also(l, p);
    }
    dsops_context_set_isa(ctx, dsops_isa_detected());
}

/* ---- adversarial problems (every tier) ------------------------------------------------------------------- */

static void run_problem(const char *label, const sp_spec *s)
{
    if (!tu_selected(label))
        return;
    sp_problem *p = sp_make(s, tu_label_seed(label));
    sp_compute_ref(p);
    sp_check_tiers(label, p, NULL);
    sp_free(p);
}

/* The base problems of each variant: swa (window only), cfa (window and dense compressed entries), scfa (window
 * and sparse compressed entries with the index zoo). */
static sp_spec swa_spec(void)
{
    return (sp_spec){.B = 3, .S = {1, 2, 3}, .seqused = {300, 50, 128}, .N = 4, .D = 64, .win_size = 128,
                     .cmp_mode = DSOPS_CMP_NONE, .BSW = 17, .BSC = 5, .p_mode = DSOPS_P_NORMALISED, .p_tile = 128,
                     .sinks = SP_SINK_RAND, .lse = 1};
}

static sp_spec cfa_spec(void)
{
    return (sp_spec){.B = 5, .S = {1, 2, 3, 1, 2}, .seqused = {127, 128, 257, 256, 700}, .N = 3, .D = 64,
                     .win_size = 128, .cmp_mode = DSOPS_CMP_DENSE, .cmp_ratio = 128, .BSW = 3, .BSC = 1,
                     .p_mode = DSOPS_P_TILED, .p_tile = 128, .sinks = SP_SINK_RAND, .lse = 1};
}

static sp_spec scfa_spec(void)
{
    return (sp_spec){.B = 4, .S = {16, 2, 1, 3}, .seqused = {130, 5, 64, 1001}, .N = 4, .D = 64, .win_size = 128,
                     .cmp_mode = DSOPS_CMP_SPARSE, .cmp_ratio = 4, .K = 24, .BSW = 128, .BSC = 17,
                     .p_mode = DSOPS_P_NORMALISED, .p_tile = 128, .sinks = SP_SINK_RAND, .lse = 1, .idx = SP_IDX_ZOO,
                     .len = SP_LEN_RAND};
}

/* One labelled problem: a base spec (swa_spec, cfa_spec, scfa_spec) and the fields it changes, each a statement
 * on the spec `s`, or (void)0 for none: the case list is one line a problem. */
#define PROBLEM(base, label, ...)                                                                                 \
    do {                                                                                                          \
        sp_spec s = base();                                                                                       \
        __VA_ARGS__;                                                                                              \
        run_problem(label, &s);                                                                                   \
    } while (0)

static void test_adversarial(void)
{
    char l[200];

    /* swa: short contexts, L multiple of 128, window sizes, block sizes, lse, sinks */
    PROBLEM(swa_spec, "swa base", (void)0);
    PROBLEM(swa_spec, "swa short and multiples of 128, no lse, no sinks", s.B = 4, s.S[0] = 1, s.S[1] = 1,
            s.S[2] = 2, s.S[3] = 4, s.seqused[0] = 5, s.seqused[1] = 128, s.seqused[2] = 256, s.seqused[3] = 129,
            s.BSW = 128, s.lse = 0, s.sinks = SP_SINK_NONE);
    const int wins[4] = {1, 128, 300, 7};
    const int bsws[4] = {1, 3, 128, 17};
    for (int i = 0; i < 4; i++) {
        snprintf(l, sizeof l, "swa win_size %d BSW %d", wins[i], bsws[i]);
        PROBLEM(swa_spec, l, s.win_size = wins[i], s.BSW = bsws[i], s.seqused[0] = 400);
    }
    PROBLEM(swa_spec, "swa p_mode fp32", s.p_mode = DSOPS_P_FP32);
    PROBLEM(swa_spec, "swa p_mode tiled 7 (window is one tile)", s.p_mode = DSOPS_P_TILED, s.p_tile = 7);
    PROBLEM(swa_spec, "swa with an unused NaN compressed pool", s.unused_pools = 1);
    PROBLEM(swa_spec, "swa strided views", s.pad = 5);

    /* cfa: dense entries, L multiples of 128, each pool's block size on its own, every p_mode and tile */
    PROBLEM(cfa_spec, "cfa base tiled 128", (void)0);
    const int ptiles[4] = {1, 3, 7, 128};
    for (int i = 0; i < 4; i++) {
        const int win = i == 3 ? 5 : 128; /* window shorter than the tile */
        snprintf(l, sizeof l, "cfa ratio 4 tiled p_tile %d win %d", ptiles[i], win);
        PROBLEM(cfa_spec, l, s.cmp_ratio = 4, s.p_tile = ptiles[i], s.win_size = win);
    }
    PROBLEM(cfa_spec, "cfa ratio 1 no window tiled 7", s.cmp_ratio = 1, s.win_size = 0, s.p_tile = 7,
            s.seqused[4] = 300);
    PROBLEM(cfa_spec, "cfa normalised BSW 128 BSC 3 no lse", s.p_mode = DSOPS_P_NORMALISED, s.BSW = 128, s.BSC = 3,
            s.lse = 0);
    PROBLEM(cfa_spec, "cfa fp32 BSW 1 BSC 17 no sinks", s.p_mode = DSOPS_P_FP32, s.BSW = 1, s.BSC = 17,
            s.sinks = SP_SINK_NONE);
    PROBLEM(cfa_spec, "cfa tiled window 300 longer than the tile", s.win_size = 300, s.p_tile = 128);
    PROBLEM(cfa_spec, "cfa tiled extreme sinks", s.sinks = SP_SINK_EXTREME);
    PROBLEM(cfa_spec, "cfa strided views ratio 16", s.pad = 3, s.cmp_ratio = 16, s.BSC = 4);

    /* scfa: index zoo, counts, lengths, block sizes, modes */
    const sp_len_kind lens[4] = {SP_LEN_NONE, SP_LEN_RAND, SP_LEN_ZERO, SP_LEN_VENDOR};
    const char *len_names[4] = {"absent", "random", "0", "vendor"};
    for (int i = 0; i < 4; i++) {
        snprintf(l, sizeof l, "scfa zoo cmp_topk_length %s", len_names[i]);
        PROBLEM(scfa_spec, l, s.len = lens[i]);
    }
    PROBLEM(scfa_spec, "scfa vendor indices and vendor count", s.idx = SP_IDX_VENDOR, s.len = SP_LEN_VENDOR);
    PROBLEM(scfa_spec, "scfa valid indices BSW 1 BSC 1", s.idx = SP_IDX_VALID, s.len = SP_LEN_NONE, s.BSW = 1,
            s.BSC = 1);
    PROBLEM(scfa_spec, "scfa fp32 BSW 3 BSC 128", s.BSW = 3, s.BSC = 128, s.p_mode = DSOPS_P_FP32);
    PROBLEM(scfa_spec, "scfa tiled 3", s.p_mode = DSOPS_P_TILED, s.p_tile = 3);
    PROBLEM(scfa_spec, "scfa tiled 1 no window", s.p_mode = DSOPS_P_TILED, s.p_tile = 1, s.win_size = 0);
    PROBLEM(scfa_spec, "scfa no window (lonely rows where no index is valid)", s.win_size = 0, s.len = SP_LEN_NONE);
    PROBLEM(scfa_spec, "scfa no window with an unused NaN window pool", s.win_size = 0, s.unused_pools = 1);
    PROBLEM(scfa_spec, "scfa extreme sinks", s.sinks = SP_SINK_EXTREME, s.N = 14);
    PROBLEM(scfa_spec, "scfa K 1", s.K = 1, s.idx = SP_IDX_VALID, s.len = SP_LEN_NONE);
    PROBLEM(scfa_spec, "scfa T 1 N 20 (threads share the heads of one token)", s.B = 1, s.S[0] = 1,
            s.seqused[0] = 1001, s.N = 20);

    /* MTP and prefill: S 2-4, S 64+, L <= 0 (seq 2 of the first: tokens 0, 1), empty sequences */
    PROBLEM(scfa_spec, "scfa prefill S 64 / 70 and L <= 0", s.B = 3, s.S[0] = 64, s.S[1] = 70, s.S[2] = 4,
            s.seqused[0] = 64, s.seqused[1] = 200, s.seqused[2] = 2, s.N = 2, s.K = 8);
    PROBLEM(cfa_spec, "cfa prefill S 66 and L <= 0", s.B = 2, s.S[0] = 66, s.S[1] = 3, s.seqused[0] = 400,
            s.seqused[1] = 1, s.cmp_ratio = 4, s.p_tile = 7, s.N = 2);
    PROBLEM(scfa_spec, "scfa empty sequences", s.B = 5, s.S[0] = 0, s.S[1] = 3, s.S[2] = 0, s.S[3] = 2, s.S[4] = 0,
            s.seqused[0] = 10, s.seqused[1] = 90, s.seqused[2] = 0, s.seqused[3] = 33, s.seqused[4] = 7);
    PROBLEM(swa_spec, "swa T 0", s.S[0] = s.S[1] = s.S[2] = 0);
    PROBLEM(swa_spec, "swa B 0", s.B = 0);
    PROBLEM(scfa_spec, "scfa B 0", s.B = 0);

    /* shapes: N 1, D 576, odd D, extreme logits */
    PROBLEM(scfa_spec, "scfa N 1 D 576", s.N = 1, s.D = 576);
    PROBLEM(cfa_spec, "cfa D 67", s.D = 67, s.cmp_ratio = 8);
    PROBLEM(swa_spec, "swa D 3", s.D = 3, s.N = 5);
    PROBLEM(scfa_spec, "scfa extreme logits fp32", s.qamp = 8, s.scale = 1.0f, s.p_mode = DSOPS_P_FP32);
    PROBLEM(scfa_spec, "scfa extreme logits normalised", s.qamp = 8, s.scale = 1.0f);
    PROBLEM(cfa_spec, "cfa extreme logits tiled", s.qamp = 8, s.scale = 1.0f, s.cmp_ratio = 4, s.p_tile = 7);
    PROBLEM(swa_spec, "swa negative softmax_scale", s.scale = -0.5f);
}

/* ---- the oracle on hand-made keys ------------------------------------------------------------------------ */

/* N 1, D 2, two window keys (1, 0), (0, 1) and q = (1, 0), softmax_scale 1: scores 1 and 0. With a dense
 * compressed pool of ratio 1 the same two positions follow as entries 2 and 3. Expected values from the
 * formulas of §2.10 evaluated here step by step. */
static void test_oracle_by_hand(void)
{
    if (!tu_selected("oracle"))
        return;
    uint16_t q[2] = {tu_bf16(1), 0};
    uint16_t pool[4] = {tu_bf16(1), 0, 0, tu_bf16(1)}; /* [1 block, 2 rows, 2] */
    int32_t cu[2] = {0, 1}, used[1] = {2}, bt[1] = {0};
    float sink[1] = {0.0f};
    uint16_t out[2];
    float lse;
    dsops_sas_args a;
    memset(&a, 0, sizeof a);
    a.q = dsops_tensor_make(q, DSOPS_BF16, 3, (int64_t[]){1, 1, 2});
    a.cu_seqlens_q = dsops_tensor_make(cu, DSOPS_INT32, 1, (int64_t[]){2});
    a.seqused_kv = dsops_tensor_make(used, DSOPS_INT32, 1, (int64_t[]){1});
    a.ori_kv = dsops_tensor_make(pool, DSOPS_BF16, 3, (int64_t[]){1, 2, 2});
    a.ori_block_table = dsops_tensor_make(bt, DSOPS_INT32, 2, (int64_t[]){1, 1});
    a.out = dsops_tensor_make(out, DSOPS_BF16, 3, (int64_t[]){1, 1, 2});
    a.lse = dsops_tensor_make(&lse, DSOPS_FP32, 2, (int64_t[]){1, 1});
    a.softmax_scale = 1.0f, a.win_size = 2, a.cmp_mode = DSOPS_CMP_NONE, a.cmp_ratio = 1, a.p_tile = 1;

    const float w1 = expf(-1.0f), l = 1.0f + w1, lse_want = 1.0f + logf(l);
    for (int mode = 0; mode < 3; mode++)
        for (int with_sink = 0; with_sink < 2; with_sink++) {
            a.p_mode = (dsops_p_mode)mode;
            a.sinks = with_sink ? dsops_tensor_make(sink, DSOPS_FP32, 1, (int64_t[]){1}) : (dsops_tensor){0};
            const float den = l + (with_sink ? expf(0.0f - 1.0f) : 0.0f);
            float o0, o1;
            if (mode == DSOPS_P_TILED) { /* one tile (the window): bf16(w) . V, then / den */
                o0 = tu_round_bf16(1.0f) / den, o1 = tu_round_bf16(w1) / den;
            } else if (mode == DSOPS_P_FP32) {
                o0 = 1.0f / den, o1 = w1 / den;
            } else {
                o0 = tu_round_bf16(1.0f / den), o1 = tu_round_bf16(w1 / den);
            }
            dsops_ref_sas(&a);
            tu_check(out[0] == tu_bf16(o0) && out[1] == tu_bf16(o1) && lse == lse_want,
                     "oracle: two keys, p_mode %d, sink %d: out (%g, %g) lse %.9g, expected (%g, %g) %.9g", mode,
                     with_sink, (double)tu_f32(out[0]), (double)tu_f32(out[1]), (double)lse,
                     (double)tu_round_bf16(o0), (double)tu_round_bf16(o1), (double)lse_want);
        }

    /* tiled with two tiles: window = position 1 (score 0) as tile 1, the dense entries 0, 1 (scores 1, 0)
     * as tile 2 (p_tile 2); no sink */
    a.sinks = (dsops_tensor){0};
    a.win_size = 1, a.cmp_mode = DSOPS_CMP_DENSE, a.cmp_kv = a.ori_kv, a.cmp_block_table = a.ori_block_table;
    a.p_mode = DSOPS_P_TILED, a.p_tile = 2;
    {
        /* tile 1: m = 0, l = 1, O = (0, 1); tile 2: m' = 1, alpha = e^-1, w = (1, e^-1) */
        const float alpha = expf(0.0f - 1.0f);
        const float lt = 1.0f * alpha + (1.0f + w1);
        const float O0 = 0.0f * alpha + (tu_round_bf16(1.0f) * 1.0f + tu_round_bf16(w1) * 0.0f);
        const float O1 = 1.0f * alpha + (tu_round_bf16(1.0f) * 0.0f + tu_round_bf16(w1) * 1.0f);
        dsops_ref_sas(&a);
        const float lw = 1.0f + logf(lt);
        tu_check(out[0] == tu_bf16(O0 / lt) && out[1] == tu_bf16(O1 / lt) && lse == lw,
                 "oracle: two tiles: out (%g, %g) lse %.9g, expected (%g, %g) %.9g", (double)tu_f32(out[0]),
                 (double)tu_f32(out[1]), (double)lse, (double)tu_round_bf16(O0 / lt), (double)tu_round_bf16(O1 / lt),
                 (double)lw);
    }

    /* lonely: no window, no compressed entry (L 2 < ratio 4): +0 and +Inf */
    a.win_size = 0, a.cmp_ratio = 4;
    out[0] = out[1] = 0x1234;
    dsops_ref_sas(&a);
    tu_check(out[0] == 0 && out[1] == 0 && isinf(lse) && lse > 0, "oracle: lonely row not +0 / +Inf");
}

/* ---- docs/CASES.md edges and sink properties -------------------------------------------------------------------- */

static void test_edges(void)
{
    sp_spec s;
    /* v4_scfa_edge_kv5_s2: seqused 5, S 2, ratio 4: causal counts 1, 1; the vendor count (0, 1) makes token 0
     * window-only, exactly as a zero count does */
    if (tu_selected("v4_scfa_edge_kv5_s2")) {
        s = scfa_spec();
        s.B = 1, s.S[0] = 2, s.seqused[0] = 5, s.K = 512, s.N = 8, s.idx = SP_IDX_VENDOR, s.len = SP_LEN_NONE;
        run_problem("v4_scfa_edge_kv5_s2 causal count", &s);
        s.len = SP_LEN_VENDOR;
        run_problem("v4_scfa_edge_kv5_s2 vendor count", &s);
        sp_problem *p = sp_make(&s, tu_label_seed("v4_scfa_edge_kv5_s2"));
        tu_check(p->len[0] == 0 && p->len[1] == 1, "v4_scfa_edge_kv5_s2: vendor counts %d, %d, expected 0, 1",
                 p->len[0], p->len[1]);
        const size_t row = (size_t)(s.N * s.D);
        uint16_t *vendor = tu_calloc(row, 2);
        dsops_status st = sp_run(p);
        memcpy(vendor, sp_guarded_view(&p->out), row * 2);
        p->len[0] = 0; /* token 0 window-only */
        dsops_status st2 = sp_run(p);
        tu_check(st == DSOPS_OK && st2 == DSOPS_OK && memcmp(vendor, sp_guarded_view(&p->out), row * 2) == 0,
                 "v4_scfa_edge_kv5_s2: token 0 with the vendor count differs from the window-only result (%s, %s)",
                 dsops_status_name(st), dsops_status_name(st2));
        free(vendor);
        sp_free(p);
    }
    /* v4_sas_edge_lonely: win_size 0, every index -1 (or otherwise invalid): out +0, lse +Inf everywhere */
    if (tu_selected("v4_sas_edge_lonely")) {
        s = scfa_spec();
        s.win_size = 0, s.idx = SP_IDX_ALL_INVALID, s.len = SP_LEN_NONE;
        run_problem("v4_sas_edge_lonely", &s);
        sp_problem *p = sp_make(&s, tu_label_seed("v4_sas_edge_lonely"));
        dsops_status st = sp_run(p);
        size_t bad = 0;
        const uint16_t *o = sp_guarded_view(&p->out);
        const float *ls = sp_guarded_view(&p->lse);
        for (int64_t i = 0; i < p->T * s.N * s.D; i++)
            bad += o[i] != 0;
        for (int64_t i = 0; i < p->T * s.N; i++)
            bad += !(isinf(ls[i]) && ls[i] > 0);
        tu_check(st == DSOPS_OK && bad == 0, "v4_sas_edge_lonely: %s, %zu values not out +0 / lse +Inf",
                 dsops_status_name(st), bad);
        sp_free(p);
    }
    /* v4_sas_edge_n1_bs1 */
    PROBLEM(scfa_spec, "v4_sas_edge_n1_bs1 scfa", s.N = 1, s.BSW = 1, s.BSC = 1);
    PROBLEM(cfa_spec, "v4_sas_edge_n1_bs1 cfa", s.N = 1, s.BSW = 1, s.BSC = 1);

    /* v4_sas_edge_sink_inf and "lse never depends on the sink": on each tier, lse with sinks +Inf, -Inf,
     * random equals lse without sinks bitwise; with +Inf every out value is 0; with -Inf out equals the
     * no-sink out bitwise */
    if (!tu_selected("v4_sas_edge_sink_inf"))
        return;
    const dsops_p_mode modes[3] = {DSOPS_P_NORMALISED, DSOPS_P_TILED, DSOPS_P_FP32};
    for (int mi = 0; mi < 3; mi++) {
        s = scfa_spec();
        s.p_mode = modes[mi], s.p_tile = 5, s.sinks = SP_SINK_RAND;
        sp_problem *p = sp_make(&s, tu_label_seed("v4_sas_edge_sink_inf"));
        const int64_t T = p->T, N = s.N, no = T * N * p->Dp;
        float *sk = p->sinks;
        uint16_t *out0 = tu_calloc((size_t)no + 1, 2);
        float *lse0 = tu_calloc((size_t)(T * N) + 1, 4);
        char mode_label[80], l[200];
        snprintf(mode_label, sizeof mode_label, "v4_sas_edge_sink_inf p_mode %d", (int)modes[mi]);
        for (int isa = -1; tu_next_tier(ctx, &isa, mode_label, l, sizeof l);) {
            p->args.sinks.data = NULL;
            dsops_status st = sp_run(p);
            memcpy(out0, sp_guarded_view(&p->out), (size_t)no * 2);
            memcpy(lse0, sp_guarded_view(&p->lse), (size_t)(T * N) * 4);
            p->args.sinks.data = sk;
            const float kinds[3] = {INFINITY, -INFINITY, 0.0f};
            for (int k = 0; k < 3; k++) {
                for (int64_t h = 0; h < N; h++)
                    sk[h] = k < 2 ? kinds[k] : (float)(h % 3) - 1.0f;
                dsops_status st2 = sp_run(p);
                const uint16_t *o = sp_guarded_view(&p->out);
                size_t nz = 0;
                if (k == 0) {
                    for (int64_t i = 0; i < no; i++)
                        nz += i % p->Dp < s.D && (o[i] & 0x7fffu) != 0;
                }
                tu_check(st == DSOPS_OK && st2 == DSOPS_OK &&
                             memcmp(lse0, sp_guarded_view(&p->lse), (size_t)(T * N) * 4) == 0 && nz == 0 &&
                             (k != 1 || memcmp(out0, o, (size_t)no * 2) == 0),
                         "%s: sinks %s: status %s, lse %s the no-sink lse, %zu nonzero out values%s", l,
                         k == 0 ? "+Inf" : (k == 1 ? "-Inf" : "{-1, 0, 1}"), dsops_status_name(st2),
                         memcmp(lse0, sp_guarded_view(&p->lse), (size_t)(T * N) * 4) == 0 ? "equals" : "differs from",
                         nz, k == 1 && memcmp(out0, o, (size_t)no * 2) != 0 ? ", out differs from the no-sink out" : "");
            }
        }
        dsops_context_set_isa(ctx, dsops_isa_detected());
        free(out0), free(lse0);
        sp_free(p);
    }
}

/* ---- the poisoned-row rule (spec §2.10 A3) ------------------------------------------------------------------- */

/* One token, a window of three keys (1, 0.5), (0.5, 1), (2, -1), softmax_scale 1, eight heads:
 *   h0 q (1, 0): an ordinary row;          h1 q (NaN, 0): every logit NaN;
 *   h2 q (+Inf, 0): every logit +Inf;      h3 q (-Inf, 0): every logit -Inf;
 *   h4-h6 q (0, 1) with sinks NaN, +Inf, -Inf: logits 0.5, 1, -1;
 *   h7 q (-2^127, 0): logits -2^127, -2^126 and -Inf (overflow), so the row is exactly key 1: out (0.5, 1),
 *      lse -2^126, in any summation order and with any exp.
 * Checked on the oracle and on every tier, in every p_mode. */
static void nan_rule_by_hand_check(const char *l, const uint16_t *out, const float *lse, const uint16_t *out_nosink)
{
    int nan_rows = 1;
    for (int h = 1; h <= 3; h++)
        nan_rows &= isnan(tu_f32(out[2 * h])) && isnan(tu_f32(out[2 * h + 1])) && isnan(lse[h]);
    tu_check(nan_rows, "%s: NaN, +Inf and all -Inf logits do not give NaN out and lse", l);
    tu_check(isfinite(tu_f32(out[0])) && isfinite(tu_f32(out[1])) && isfinite(lse[0]), "%s: an ordinary row is not finite",
             l);
    const float lse_q01 = 1.0f + logf(expf(-0.5f) + 1.0f + expf(-2.0f));
    int lse_ok = 1;
    for (int h = 4; h <= 6; h++)
        lse_ok &= isfinite(lse[h]) && fabsf(lse[h] - lse_q01) <= 1e-6f;
    tu_check(lse_ok, "%s: lse of the sink rows %.9g %.9g %.9g, expected %.9g (the sink never enters lse)", l,
             (double)lse[4], (double)lse[5], (double)lse[6], (double)lse_q01);
    tu_check(isnan(tu_f32(out[8])) && isnan(tu_f32(out[9])), "%s: a NaN sink does not make out NaN", l);
    tu_check(out[10] == 0 && out[11] == 0, "%s: a +Inf sink gives out %#x %#x, expected +0", l, out[10], out[11]);
    tu_check(!out_nosink || (out[12] == out_nosink[12] && out[13] == out_nosink[13]),
             "%s: a -Inf sink changes out", l);
    tu_check(out[14] == tu_bf16(0.5f) && out[15] == tu_bf16(1.0f) && lse[7] == -0x1p126f,
             "%s: -Inf logits among finite ones: out (%g, %g) lse %.9g, expected (0.5, 1) %.9g", l,
             (double)tu_f32(out[14]), (double)tu_f32(out[15]), (double)lse[7], (double)-0x1p126f);
}

static void test_nan_rule_by_hand(void)
{
    if (!tu_selected("nan_rule by hand"))
        return;
    enum { H = 8 };
    const float qv[H][2] = {{1, 0}, {NAN, 0}, {INFINITY, 0}, {-INFINITY, 0}, {0, 1}, {0, 1}, {0, 1}, {-0x1p127f, 0}};
    uint16_t q[2 * H], pool[6] = {tu_bf16(1), tu_bf16(0.5f), tu_bf16(0.5f), tu_bf16(1), tu_bf16(2), tu_bf16(-1)};
    for (int h = 0; h < H; h++)
        q[2 * h] = tu_bf16(qv[h][0]), q[2 * h + 1] = tu_bf16(qv[h][1]);
    float sinks[H] = {0, 0, 0, 0, NAN, INFINITY, -INFINITY, -INFINITY};
    int32_t cu[2] = {0, 1}, used[1] = {3}, bt[1] = {0};
    uint16_t out[2 * H], out_nosink[2 * H];
    float lse[H];
    dsops_sas_args a;
    memset(&a, 0, sizeof a);
    a.q = dsops_tensor_make(q, DSOPS_BF16, 3, (int64_t[]){1, H, 2});
    a.cu_seqlens_q = dsops_tensor_make(cu, DSOPS_INT32, 1, (int64_t[]){2});
    a.seqused_kv = dsops_tensor_make(used, DSOPS_INT32, 1, (int64_t[]){1});
    a.ori_kv = dsops_tensor_make(pool, DSOPS_BF16, 3, (int64_t[]){1, 3, 2});
    a.ori_block_table = dsops_tensor_make(bt, DSOPS_INT32, 2, (int64_t[]){1, 1});
    a.out = dsops_tensor_make(out, DSOPS_BF16, 3, (int64_t[]){1, H, 2});
    a.lse = dsops_tensor_make(lse, DSOPS_FP32, 2, (int64_t[]){1, H});
    a.softmax_scale = 1.0f, a.win_size = 3, a.cmp_mode = DSOPS_CMP_NONE, a.cmp_ratio = 1;
    for (int mode = 0; mode < 3; mode++) {
        a.p_mode = (dsops_p_mode)mode, a.p_tile = 1;
        char l[120];
        /* the oracle first, without and with sinks */
        a.sinks = (dsops_tensor){0};
        dsops_ref_sas(&a);
        memcpy(out_nosink, out, sizeof out);
        a.sinks = dsops_tensor_make(sinks, DSOPS_FP32, 1, (int64_t[]){H});
        dsops_ref_sas(&a);
        snprintf(l, sizeof l, "nan_rule by hand p_mode %d [oracle]", mode);
        nan_rule_by_hand_check(l, out, lse, out_nosink);
        char mode_label[80];
        snprintf(mode_label, sizeof mode_label, "nan_rule by hand p_mode %d", mode);
        for (int isa = -1; tu_next_tier(ctx, &isa, mode_label, l, sizeof l);) {
            a.sinks = (dsops_tensor){0};
            dsops_status st = dsops_sas(ctx, &a);
            memcpy(out_nosink, out, sizeof out);
            a.sinks = dsops_tensor_make(sinks, DSOPS_FP32, 1, (int64_t[]){H});
            dsops_status st2 = dsops_sas(ctx, &a);
            if (!tu_check(st == DSOPS_OK && st2 == DSOPS_OK, "%s: status %s / %s", l, dsops_status_name(st),
                          dsops_status_name(st2)))
                continue;
            nan_rule_by_hand_check(l, out, lse, out_nosink);
        }
    }
    dsops_context_set_isa(ctx, dsops_isa_detected());
}

/* Every pool element holding the bits `from` (the NaN of the rows nobody reads) becomes `to`. */
static void pool_replace(sp_problem *p, uint16_t from, uint16_t to)
{
    uint16_t *pools[2] = {p->ori, p->cmp};
    const int64_t n[2] = {p->NBW * p->s.BSW * p->Dp, p->NBC * p->s.BSC * p->Dp};
    for (int k = 0; k < 2; k++)
        for (int64_t i = 0; pools[k] && i < n[k]; i++)
            if (pools[k][i] == from)
                pools[k][i] = to;
}

/* 1 if row (t, h) of p's output is NaN throughout (want 1), finite (0) or lonely (2). */
static int sas_row_is(const sp_problem *p, int64_t t, int64_t h, int want)
{
    const uint16_t *o = (const uint16_t *)sp_guarded_view(&p->out) + (t * p->s.N + h) * p->Dp;
    const float l = ((const float *)sp_guarded_view(&p->lse))[t * p->s.N + h];
    int ok = want == 1 ? isnan(l) : (want == 2 ? isinf(l) && l > 0 : isfinite(l));
    for (int64_t d = 0; d < p->s.D; d++)
        ok &= want == 1 ? isnan(tu_f32(o[d])) : (want == 2 ? o[d] == 0 : isfinite(tu_f32(o[d])));
    return ok;
}

/* The rows of test_nan_rule stated without the oracle: token 0 (heads 0-2 NaN, head 3 finite), the first
 * token of the last sequence (no keys: lonely) and the last token of the sequence before it (a NaN key). */
static void nan_rule_rows_check(const char *l, const sp_problem *p)
{
    const int64_t lonely_t = p->cu[p->B - 1], key_t = lonely_t - 1;
    int lonely_ok = 1, key_ok = 1;
    for (int h = 0; h < p->s.N; h++) {
        lonely_ok &= sas_row_is(p, lonely_t, h, 2);
        key_ok &= sas_row_is(p, key_t, h, 1);
    }
    tu_check(sas_row_is(p, 0, 0, 1) && sas_row_is(p, 0, 1, 1) && sas_row_is(p, 0, 2, 1) && sas_row_is(p, 0, 3, 0),
             "%s: token 0: NaN / +Inf / -Inf query rows not NaN, or the clean head not finite", l);
    tu_check(lonely_ok, "%s: token %lld without keys is not out +0 / lse +Inf", l, (long long)lonely_t);
    tu_check(key_ok, "%s: token %lld attends to a NaN key but is not NaN", l, (long long)key_t);
}

/* swa / cfa / scfa problems plus one sequence whose first token sees no key (L 0). Token 0: head 0 a NaN
 * query element, head 1 +Inf, head 2 -Inf (NaN rows whatever the keys), head 3 untouched; the token without
 * keys has NaN queries; the newest window row of the last sequence gets a NaN value, so every head of that
 * sequence's last token (the only one whose window holds it) is NaN. The oracle runs with ordinary values in the
 * rows nobody reads; the operator with NaN, +Inf and -Inf there. */
static void test_nan_rule(void)
{
    static const struct {
        dsops_p_mode m;
        int tile;
    } modes[] = {{DSOPS_P_NORMALISED, 0}, {DSOPS_P_FP32, 0}, {DSOPS_P_TILED, 1}, {DSOPS_P_TILED, 5}};
    static const char *variants[3] = {"swa", "cfa", "scfa"};
    for (int v = 0; v < 3; v++)
        for (int m = 0; m < 4; m++) {
            char label[120];
            snprintf(label, sizeof label, "nan_rule %s p_mode %d tile %d", variants[v], (int)modes[m].m, modes[m].tile);
            if (!tu_selected(label))
                continue;
            sp_spec s = v == 0 ? swa_spec() : (v == 1 ? cfa_spec() : scfa_spec());
            s.N = 4;
            s.p_mode = modes[m].m;
            s.p_tile = modes[m].tile ? modes[m].tile : 128;
            if (v == 1)
                s.cmp_ratio = 4; /* several dense entries per token */
            const int lonely_b = s.B++;
            s.S[lonely_b] = 2, s.seqused[lonely_b] = 1; /* its token 0 has L = 0 */
            sp_problem *p = sp_make(&s, tu_label_seed(label));
            const int64_t lonely_t = p->cu[lonely_b], key_b = lonely_b - 1, key_t = p->cu[key_b + 1] - 1;
            const int64_t Dp = p->Dp;
            p->q[(0 * s.N + 0) * Dp + 1] = tu_bf16(NAN);
            p->q[(0 * s.N + 1) * Dp + 0] = tu_bf16(INFINITY);
            p->q[(0 * s.N + 2) * Dp + s.D - 1] = tu_bf16(-INFINITY);
            for (int h = 0; h < s.N; h++)
                p->q[(lonely_t * s.N + h) * Dp] = tu_bf16(NAN);
            const int64_t pos = sp_token_L(p, key_b, key_t) - 1;
            const int64_t key_row = (int64_t)p->ori_bt[key_b * p->MBW + pos / s.BSW] * s.BSW + pos % s.BSW;
            p->ori[key_row * Dp] = 0xffc1; /* a NaN whose bits differ from the unread rows' */
            const uint16_t clean = 0x4040; /* 3.0: no read row holds it (they hold U(-1, 1)) */
            pool_replace(p, SP_NAN_BF16, clean);
            sp_compute_ref(p);
            const uint16_t fills[3] = {SP_NAN_BF16, 0x7f80, 0xff80}; /* NaN, +Inf, -Inf */
            const char *fill_names[3] = {"NaN", "+Inf", "-Inf"};
            uint16_t current = clean;
            for (int f = 0; f < 3; f++) {
                pool_replace(p, current, fills[f]);
                current = fills[f];
                char fill_label[200];
                snprintf(fill_label, sizeof fill_label, "%s, unread rows %s", label, fill_names[f]);
                sp_check_tiers(fill_label, p, nan_rule_rows_check);
            }
            sp_free(p);
        }
    dsops_context_set_isa(ctx, dsops_isa_detected());
}

/* ---- determinism ---------------------------------------------------------------------------------------- */

/* The call's out and lse buffers, guards included, for rc_check_threads. */
static unsigned char *sp_run_gather(void *problem, size_t *n, dsops_status *st)
{
    sp_problem *p = problem;
    *st = sp_run(p);
    if (*st != DSOPS_OK)
        return NULL;
    const size_t no = (p->out.n + 2) * 2, nl = (p->lse.n + 2) * 4;
    unsigned char *bytes = tu_calloc(no + nl, 1);
    memcpy(bytes, p->out.buf, no), memcpy(bytes + no, p->lse.buf, nl);
    *n = no + nl;
    return bytes;
}

static void test_determinism(void)
{
    if (!tu_selected("determinism"))
        return;
    /* many tokens; and one or two tokens with many heads, where threads may share a token's heads */
    sp_spec specs[4];
    const char *names[4] = {"scfa", "cfa", "scfa T 1 N 20", "cfa T 2 N 33"};
    specs[0] = scfa_spec();
    specs[0].N = 16, specs[0].D = 128, specs[0].K = 48;
    specs[1] = cfa_spec();
    specs[1].N = 9, specs[1].cmp_ratio = 4, specs[1].p_tile = 16;
    specs[2] = scfa_spec();
    specs[2].B = 1, specs[2].S[0] = 1, specs[2].seqused[0] = 1001, specs[2].N = 20;
    specs[3] = cfa_spec();
    specs[3].B = 2, specs[3].S[0] = specs[3].S[1] = 1, specs[3].seqused[0] = 700, specs[3].seqused[1] = 300;
    specs[3].N = 33, specs[3].cmp_ratio = 8, specs[3].p_tile = 7;
    const dsops_isa tiers[2] = {DSOPS_ISA_SCALAR, dsops_isa_detected()};
    for (int k = 0; k < 4; k++) {
        char name[80];
        snprintf(name, sizeof name, "determinism %s", names[k]);
        sp_problem *p = sp_make(&specs[k], tu_label_seed(name));
        for (int ti = 0; ti < 2; ti++) {
            dsops_context_set_isa(ctx, tiers[ti]);
            char l[120];
            snprintf(l, sizeof l, "%s [%s]", name, dsops_isa_name(tiers[ti]));
            rc_check_threads(ctx, l, sp_run_gather, p);
        }
        sp_free(p);
    }
    dsops_context_set_isa(ctx, dsops_isa_detected());
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, 42);
    ctx = tu_context();
    rc_set_threads(ctx, 2);
    test_oracle_by_hand();
    test_adversarial();
    test_edges();
    test_nan_rule_by_hand();
    test_nan_rule();
    test_determinism();
    dsops_context_destroy(ctx);
    return tu_finish();
}
