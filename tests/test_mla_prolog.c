/* mla_prolog_v32 against the reference oracle (docs/OPERATORS.md §4.1), on every available ISA tier:
 *   - small problems in every variant: bf16 / int8 wq_b x split_bf16 / split_int8 / packed_int8 /
 *     flashmla_fp8 (its e4m3 bytes compared as neighbouring integers, like int8), the three rope modes and
 *     rope_inverse, gammas and tables in bf16 and fp32, negative cache indices, block sizes 1 / 3 / 16, odd
 *     shapes, padded and shared (interleaved) views, NaN in untouched cache rows, all-zero and overflowing Q8
 *     groups, int8 weights at -128 / 127, empty calls;
 *   - each call also with a prepared object (dsops_mla_prolog_v32_prepare), which must give bitwise the
 *     same bytes as the unprepared call;
 *   - every byte of the output and cache buffers that the call does not address stays bit-identical;
 *   - determinism: 1, 2 and 3 threads give bitwise identical results.
 * The CI-sized named cases of docs/CASES.md run in tests/test_cases.c.
 * Usage: test_mla_prolog [label filter]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "problems_check.h"
#include "ref.h"
#include "test_util.h"

static dsops_context *ctx;

/* On every tier: the call without and with a prepared object, against the oracle and each other. The same
 * skeleton as tests/test_indexer_prolog.c's over its own ip_* types: one template for both V3.2 prolog tests. */
static void run_problem(const char *label, const mp_spec *sp)
{
    if (!tu_selected(label))
        return;
    mp_problem *p = mp_make(sp, tu_label_seed(label));
    mp_ref *r = mp_reference(&p->args);
    const pc_target t = mp_target(p, r);
    pc_run_tiers(&t, ctx, label);
    mp_ref_free(r);
    mp_free(p);
}

/* On every tier, labelled "<name>_<layout>". */
static void run_on_layout(const char *name, const mp_spec *s)
{
    char label[100];
    snprintf(label, sizeof label, "%s_%s", name, cases_layout_name(s->layout));
    run_problem(label, s);
}

/* On every tier, labelled "<name>_<int8|bf16 wq_b>_<layout>". */
static void run_on_variant(const char *name, const mp_spec *s)
{
    char label[100];
    snprintf(label, sizeof label, "%s_%s_%s", name, s->int8_wq_b ? "int8" : "bf16", cases_layout_name(s->layout));
    run_problem(label, s);
}

/* ---- small problems -------------------------------------------------------------------------------- */

/* H 256, Q 128, N 4, Dqn 32, Dc 128 (split_bf16), 256 (split_int8) or 512 (packed_int8), T 5, BS 16 */
static mp_spec base_spec(int int8_wq_b, dsops_kv_layout layout)
{
    mp_spec s;
    memset(&s, 0, sizeof s);
    s.T = 5;
    s.H = 256;
    s.Q = 128;
    s.N = 4;
    s.Dqn = 32;
    s.Dc = layout == DSOPS_KV_PACKED_INT8 || layout == DSOPS_KV_FLASHMLA_FP8 ? 512 : (layout == DSOPS_KV_SPLIT_INT8 ? 256 : 128);
    s.BS = 16;
    s.int8_wq_b = int8_wq_b;
    s.layout = layout;
    s.rope_mode = DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT;
    s.eps_cq = s.eps_ckv = 1e-6f;
    s.index_mode = MP_IDX_SOME;
    return s;
}

static void test_variants(void)
{
    for (int w = 0; w < 2; w++)
        for (int l = 0; l < 4; l++) {
            char label[100];
            mp_spec s = base_spec(w, (dsops_kv_layout)l);
            run_on_variant("variant", &s);
            s.index_mode = MP_IDX_ALL;
            s.eps_cq = s.eps_ckv = 1e-5f;
            snprintf(label, sizeof label, "variant_%s_%s_all_rows_eps1e-5", w ? "int8" : "bf16",
                     cases_layout_name((dsops_kv_layout)l));
            run_problem(label, &s);
        }
}

static void test_rope_and_dtypes(void)
{
    for (int m = 0; m < 3; m++)
        for (int inv = 0; inv < 2; inv++) {
            char label[100];
            mp_spec s = base_spec((m + inv) % 2, (dsops_kv_layout)((m + inv) % 3));
            s.rope_mode = (dsops_rope_mode)m;
            s.rope_inverse = inv;
            s.table_dtype = inv ? DSOPS_FP32 : DSOPS_BF16;
            snprintf(label, sizeof label, "rope_%s_inv%d_%s", cases_rope_name((dsops_rope_mode)m), inv,
                     inv ? "fp32tab" : "bf16tab");
            run_problem(label, &s);
        }
    for (int g = 0; g < 2; g++)
        for (int tb = 0; tb < 2; tb++) {
            char label[100];
            mp_spec s = base_spec(g, (dsops_kv_layout)(g + tb));
            s.gamma_dtype = g ? DSOPS_FP32 : DSOPS_BF16;
            s.table_dtype = tb ? DSOPS_FP32 : DSOPS_BF16;
            snprintf(label, sizeof label, "dtypes_gamma_%s_tables_%s", g ? "fp32" : "bf16", tb ? "fp32" : "bf16");
            run_problem(label, &s);
            s.mixed_gamma = 1;
            snprintf(label, sizeof label, "dtypes_gamma_cq_%s_gamma_ckv_%s_tables_%s", g ? "fp32" : "bf16",
                     g ? "bf16" : "fp32", tb ? "fp32" : "bf16");
            run_problem(label, &s);
        }
    /* large eps: the placement of eps inside the square root matters */
    for (int l = 0; l < 4; l++) {
        mp_spec s = base_spec(l == 2, (dsops_kv_layout)l);
        s.eps_cq = 0.7f;
        s.eps_ckv = 2.5f;
        run_on_layout("eps_large", &s);
    }
}

static void test_tokens_and_blocks(void)
{
    static const int bss[] = {1, 3, 16};
    for (int T = 1; T <= 9; T++) {
        char label[100];
        const int w = T % 2, l = T % 3, bs = bss[(T / 3) % 3];
        mp_spec s = base_spec(w, (dsops_kv_layout)l);
        s.T = T;
        s.BS = bs;
        s.index_mode = T % 4 == 0 ? MP_IDX_ALL : MP_IDX_SOME;
        snprintf(label, sizeof label, "tokens_t%d_bs%d_%s_%s", T, bs, w ? "int8" : "bf16",
                 cases_layout_name((dsops_kv_layout)l));
        run_problem(label, &s);
    }
    for (int l = 0; l < 4; l++)
        for (int b = 0; b < 3; b++) {
            char label[100];
            mp_spec s = base_spec(l != 0, (dsops_kv_layout)l);
            s.T = 7;
            s.BS = bss[b];
            s.NB = 40 / bss[b] + 1; /* more rows than tokens: most rows stay untouched */
            s.index_mode = MP_IDX_ALL;
            snprintf(label, sizeof label, "blocks_bs%d_%s", bss[b], cases_layout_name((dsops_kv_layout)l));
            run_problem(label, &s);
        }
    for (int l = 0; l < 4; l++) {
        mp_spec s = base_spec(l == 1, (dsops_kv_layout)l);
        s.index_mode = MP_IDX_NONE;
        run_on_layout("no_cache_write", &s);
    }
}

static void test_views(void)
{
    for (int w = 0; w < 2; w++)
        for (int l = 0; l < 4; l++) {
            mp_spec s = base_spec(w, (dsops_kv_layout)l);
            s.strided = 1;
            s.T = 6;
            run_on_variant("strided", &s);
            if (l == DSOPS_KV_PACKED_INT8)
                continue;
            /* views that interleave without sharing an element (spec V9 forbids overlapping elements) */
            s.strided = 2;
            s.share = 2 | 4;
            run_on_variant("shared_cache_views", &s);
            s.share = 1;
            run_on_variant("shared_q_views", &s);
            s.share = 1 | 8;
            run_on_variant("shared_q_views_token_padding", &s);
        }
    /* split_int8 views into a buffer of packed_int8 rows (Dc 512) */
    mp_spec s = base_spec(1, DSOPS_KV_SPLIT_INT8);
    s.Dc = 512;
    s.strided = 2;
    s.share = 4;
    run_problem("shared_cache_views_split_int8_as_packed_int8_rows", &s);
}

static void test_edges(void)
{
    char label[100];
    for (int l = 0; l < 4; l++) {
        /* all-zero x rows: zero Q8 groups (q 0, scale 0); with eps 0 the norm is 0/0 = NaN (q 0, scale NaN) */
        for (int e = 0; e < 2; e++) {
            mp_spec s = base_spec(l != 0, (dsops_kv_layout)l);
            s.zero_tokens = 2;
            s.index_mode = MP_IDX_ALL;
            s.eps_cq = s.eps_ckv = e ? 0.0f : 1e-6f;
            snprintf(label, sizeof label, "zero_rows_eps%s_%s", e ? "0" : "1e-6",
                     cases_layout_name((dsops_kv_layout)l));
            run_problem(label, &s);
        }
        /* NaN in every cache row: untouched rows must keep their NaN bytes */
        mp_spec s = base_spec(l == 2, (dsops_kv_layout)l);
        s.nan_cache = 1;
        run_on_layout("nan_cache", &s);
    }
    /* amax so small that fp32(127 / amax) overflows: q 0, scale 0 (qr and the int8 cache groups) */
    for (int l = 1; l < 3; l++) {
        mp_spec s = base_spec(1, (dsops_kv_layout)l);
        s.gamma_dtype = DSOPS_FP32;
        s.tiny_gamma = 1;
        s.index_mode = MP_IDX_ALL;
        run_on_layout("tiny_amax", &s);
    }
    {
        mp_spec s = base_spec(1, DSOPS_KV_SPLIT_INT8);
        s.int8_extreme = 1;
        run_problem("int8_wq_b_extremes", &s);
    }
    /* odd shapes around tile edges */
    {
        mp_spec s = base_spec(0, DSOPS_KV_SPLIT_BF16);
        s.T = 3, s.H = 259, s.Q = 130, s.N = 3, s.Dqn = 33, s.Dc = 64;
        run_problem("odd_h259_q130_n3_dqn33_dc64_bf16", &s);
        s.int8_wq_b = 1;
        s.Dc = 32;
        run_problem("odd_h259_q130_n3_dqn33_dc32_int8wqb", &s);
        s = base_spec(1, DSOPS_KV_SPLIT_INT8);
        s.T = 2, s.H = 65, s.Q = 17, s.N = 1, s.Dqn = 1, s.Dc = 128, s.BS = 3;
        run_problem("odd_h65_q17_n1_dqn1_int8", &s);
        s = base_spec(0, DSOPS_KV_PACKED_INT8);
        s.T = 4, s.N = 1, s.Dqn = 7, s.BS = 1;
        run_problem("odd_n1_dqn7_packed_bs1", &s);
    }
    /* larger: several tiles in every dimension, V3.2 head proportions */
    {
        mp_spec s = base_spec(1, DSOPS_KV_SPLIT_INT8);
        s.T = tu_quick() ? 9 : 37, s.H = 512, s.Q = 256, s.N = 8, s.Dqn = 128, s.Dc = 512, s.BS = 64;
        run_problem("wide_int8_split_int8", &s);
        s.int8_wq_b = 0;
        s.layout = DSOPS_KV_SPLIT_BF16;
        run_problem("wide_bf16_split_bf16", &s);
        s.int8_wq_b = 1;
        s.layout = DSOPS_KV_PACKED_INT8;
        s.strided = 1;
        run_problem("wide_int8_packed_int8_strided", &s);
    }
    /* empty call: T = 0 */
    for (int l = 0; l < 4; l++) {
        mp_spec s = base_spec(l == 1, (dsops_kv_layout)l);
        s.T = 0;
        s.NB = 2;
        run_on_layout("empty_t0", &s);
    }
}

/* ---- determinism ----------------------------------------------------------------------------------- */

static void test_threads(void)
{
    if (!tu_selected("threads"))
        return;
    for (int v = 0; v < 3; v++) {
        mp_spec s = base_spec(v != 0, (dsops_kv_layout)v);
        s.T = 13, s.H = 384, s.Q = 192, s.N = 6, s.Dqn = 64, s.Dc = 512, s.BS = 8;
        mp_problem *p = mp_make(&s, tu_label_seed("threads") + (uint64_t)v);
        char name[64];
        snprintf(name, sizeof name, "threads_%s", cases_layout_name((dsops_kv_layout)v));
        const pc_target t = mp_target(p, NULL);
        pc_run_threads(&t, name);
        mp_free(p);
    }
}

/* The same sections, in the same order, as tests/test_indexer_prolog.c (the V3.2 prologs share one
 * checklist); what each section builds is this operator's own. */
int main(int argc, char **argv)
{
    tu_init(argc, argv, 5);
    ctx = tu_announced_context();
    test_variants();
    test_rope_and_dtypes();
    test_tokens_and_blocks();
    test_views();
    test_edges();
    test_threads();
    dsops_context_destroy(ctx);
    return tu_finish();
}
