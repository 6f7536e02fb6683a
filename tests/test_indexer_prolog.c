/* indexer_prolog_v32 against the reference oracle (docs/OPERATORS.md §4.2), on every available ISA tier:
 *   - small problems in both variants: int8 (Hadamard both sides, Q8 of queries and keys) and bf16 with
 *     both, one or no Hadamard matrix; the three rope modes and rope_inverse; tables, LayerNorm weights and
 *     Hadamard matrices in bf16 and fp32 (random and Sylvester matrices); negative cache indices; block
 *     sizes 1 / 3 / 16; odd shapes (DI 65, 72, 96; NI 1 and 3); padded and shared (interleaved) views; NaN
 *     in untouched cache rows; all-zero query and key Q8 groups, NaN keys (eps 0 on zero rows), overflowing
 *     fp32(127 / amax); int8 data at -128 / 127 and negative scales; weights_scale 0, negative, 1; T = 0;
 *   - each call also with a prepared object (dsops_indexer_prolog_v32_prepare), which must give bitwise the
 *     same bytes as the unprepared call;
 *   - every byte of the output and cache buffers that the call does not address stays bit-identical;
 *   - determinism: 1, 2 and 3 threads give bitwise identical results.
 * The CI-sized named cases of docs/CASES.md run in tests/test_cases.c.
 * Usage: test_indexer_prolog [label filter]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "problems_check.h"
#include "ref.h"
#include "test_util.h"

static dsops_context *ctx;

/* On every tier: the call without and with a prepared object, against the oracle and each other. The same
 * skeleton as tests/test_mla_prolog.c's over its own mp_* types: one template for both V3.2 prolog tests. */
static void run_problem(const char *label, const ip_spec *sp)
{
    if (!tu_selected(label))
        return;
    ip_problem *p = ip_make(sp, tu_label_seed(label));
    ip_ref *r = ip_reference(&p->args);
    const pc_target t = ip_target(p, r);
    pc_run_tiers(&t, ctx, label);
    ip_ref_free(r);
    ip_free(p);
}

/* On every tier, labelled "<name>_int8" or "<name>_bf16" after the spec's variant. */
static void run_variant(const char *name, const ip_spec *s)
{
    char label[100];
    snprintf(label, sizeof label, "%s_%s", name, s->int8 ? "int8" : "bf16");
    run_problem(label, s);
}

/* ---- small problems -------------------------------------------------------------------------------- */

/* Hadamard arrangement of the bf16 variant: 0 both, 1 none, 2 hadamard_q only, 3 hadamard_k only */
static const char *had_name(int h)
{
    static const char *n[4] = {"had_qk", "had_none", "had_q", "had_k"};
    return n[h];
}

static void set_had(ip_spec *s, int h)
{
    s->no_hadamard_q = h == 1 || h == 3;
    s->no_hadamard_k = h == 1 || h == 2;
}

/* H 256, Q 128, NI 4, DI 128, T 5, BS 16, rope half, ln_eps 1e-6, weights_scale 1/sqrt(NI * DI) */
static ip_spec base_spec(int int8)
{
    ip_spec s;
    memset(&s, 0, sizeof s);
    s.T = 5;
    s.H = 256;
    s.Q = 128;
    s.NI = 4;
    s.DI = 128;
    s.BS = 16;
    s.int8 = int8;
    s.rope_mode = DSOPS_ROPE_HALF;
    s.ln_eps = 1e-6f;
    s.weights_scale = (float)(1.0 / sqrt(4.0 * 128.0));
    s.index_mode = IP_IDX_SOME;
    return s;
}

static void test_variants(void)
{
    char label[100];
    for (int di = 0; di < 2; di++) {
        ip_spec s = base_spec(1);
        s.DI = di ? 128 : 64;
        snprintf(label, sizeof label, "variant_int8_di%d", s.DI);
        run_problem(label, &s);
        s.index_mode = IP_IDX_ALL;
        s.rope_mode = DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT;
        snprintf(label, sizeof label, "variant_int8_di%d_all_rows_in_half_out", s.DI);
        run_problem(label, &s);
        for (int h = 0; h < 4; h++) {
            s = base_spec(0);
            s.DI = di ? 128 : 64;
            set_had(&s, h);
            snprintf(label, sizeof label, "variant_bf16_di%d_%s", s.DI, had_name(h));
            run_problem(label, &s);
            s.index_mode = IP_IDX_ALL;
            s.rope_mode = DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT;
            s.weights_scale = 1.0f;
            snprintf(label, sizeof label, "variant_bf16_di%d_%s_all_rows_in_half_out_wscale1", s.DI, had_name(h));
            run_problem(label, &s);
        }
    }
}

static void test_rope_and_dtypes(void)
{
    char label[120];
    for (int m = 0; m < 3; m++)
        for (int inv = 0; inv < 2; inv++)
            for (int v = 0; v < 2; v++) {
                ip_spec s = base_spec(v);
                s.rope_mode = (dsops_rope_mode)m;
                s.rope_inverse = inv;
                s.table_dtype = (inv + v) % 2 ? DSOPS_FP32 : DSOPS_BF16;
                snprintf(label, sizeof label, "rope_%s_inv%d_%s_%s", cases_rope_name((dsops_rope_mode)m), inv,
                         v ? "int8" : "bf16", s.table_dtype == DSOPS_FP32 ? "fp32tab" : "bf16tab");
                run_problem(label, &s);
            }
    for (int v = 0; v < 2; v++)
        for (int ln = 0; ln < 2; ln++)
            for (int hd = 0; hd < 2; hd++) {
                ip_spec s = base_spec(v);
                s.ln_dtype = ln ? DSOPS_FP32 : DSOPS_BF16;
                s.had_dtype = hd ? DSOPS_FP32 : DSOPS_BF16;
                s.table_dtype = (ln + hd) % 2 ? DSOPS_FP32 : DSOPS_BF16;
                snprintf(label, sizeof label, "dtypes_%s_ln_%s_had_%s_tables_%s", v ? "int8" : "bf16",
                         ln ? "fp32" : "bf16", hd ? "fp32" : "bf16", (ln + hd) % 2 ? "fp32" : "bf16");
                run_problem(label, &s);
                s.mixed_ln = 1;
                snprintf(label, sizeof label, "dtypes_%s_gamma_%s_beta_%s_had_%s", v ? "int8" : "bf16",
                         ln ? "fp32" : "bf16", ln ? "bf16" : "fp32", hd ? "fp32" : "bf16");
                run_problem(label, &s);
            }
    /* the normalised Sylvester matrix (the official models' rotation) in both dtypes */
    for (int v = 0; v < 2; v++)
        for (int hd = 0; hd < 2; hd++) {
            ip_spec s = base_spec(v);
            s.sylvester = 1;
            s.had_dtype = hd ? DSOPS_FP32 : DSOPS_BF16;
            snprintf(label, sizeof label, "sylvester_%s_%s", v ? "int8" : "bf16", hd ? "fp32" : "bf16");
            run_problem(label, &s);
        }
    /* eps placement inside the square root, and the scalar weights_scale */
    for (int v = 0; v < 2; v++) {
        ip_spec s = base_spec(v);
        s.ln_eps = 0.75f;
        run_variant("ln_eps_large", &s);
        s = base_spec(v);
        s.ln_eps = 0.0f;
        run_variant("ln_eps_zero", &s);
        static const float ws[3] = {0.0f, -0.3f, 1.0f};
        for (int k = 0; k < 3; k++) {
            s = base_spec(v);
            s.weights_scale = ws[k];
            snprintf(label, sizeof label, "weights_scale_%g_%s", (double)ws[k], v ? "int8" : "bf16");
            run_problem(label, &s);
        }
    }
}

static void test_tokens_and_blocks(void)
{
    static const int bss[] = {1, 3, 16};
    char label[100];
    for (int T = 1; T <= 9; T++) {
        const int v = T % 2, bs = bss[(T / 3) % 3];
        ip_spec s = base_spec(v);
        s.T = T;
        s.BS = bs;
        s.DI = T % 3 == 0 ? 64 : 128;
        if (!v)
            set_had(&s, T % 4);
        s.index_mode = T % 4 == 0 ? IP_IDX_ALL : IP_IDX_SOME;
        snprintf(label, sizeof label, "tokens_t%d_bs%d_di%d_%s", T, bs, s.DI, v ? "int8" : "bf16");
        run_problem(label, &s);
    }
    for (int v = 0; v < 2; v++)
        for (int b = 0; b < 3; b++) {
            ip_spec s = base_spec(v);
            s.T = 7;
            s.BS = bss[b];
            s.NB = 40 / bss[b] + 1; /* more rows than tokens: most rows stay untouched */
            s.index_mode = IP_IDX_ALL;
            snprintf(label, sizeof label, "blocks_bs%d_%s", bss[b], v ? "int8" : "bf16");
            run_problem(label, &s);
        }
    for (int v = 0; v < 2; v++) {
        ip_spec s = base_spec(v);
        s.index_mode = IP_IDX_NONE;
        run_variant("no_cache_write", &s);
    }
}

static void test_views(void)
{
    for (int v = 0; v < 2; v++) {
        ip_spec s = base_spec(v);
        s.strided = 1;
        s.T = 6;
        run_variant("strided", &s);
        /* views that interleave without sharing an element (spec V9 forbids overlapping elements) */
        s.strided = 2;
        s.share = 1 | 2 | 4;
        run_variant("shared_views", &s);
        s.share = 1;
        run_variant("shared_q_views", &s);
        if (v) {
            s.share = 4;
            run_problem("shared_cache_rows_int8", &s);
        }
        s.share = 2;
        s.table_dtype = DSOPS_FP32;
        run_variant("shared_tables_fp32", &s);
    }
}

/* A case list, alike in shape on purpose: a base spec and the fields of one edge per labelled problem. */
static void test_edges(void)
{
    char label[100];
    for (int v = 0; v < 2; v++) {
        /* all-zero qr rows: the query is 0 (int8: zero Q8 groups, q 0 and scale 0) */
        ip_spec s = base_spec(v);
        s.zero_qr = 2;
        s.index_mode = IP_IDX_ALL;
        run_variant("zero_qr_rows", &s);
        /* all-zero x rows with beta 0: the key is 0 (zero Q8 groups), weights 0; with eps 0 the norm is
         * 0 / 0 = NaN (int8: q 0, scale NaN) */
        for (int e = 0; e < 2; e++) {
            s = base_spec(v);
            s.zero_x = 2;
            s.zero_beta = 1;
            s.index_mode = IP_IDX_ALL;
            s.ln_eps = e ? 0.0f : 1e-6f;
            snprintf(label, sizeof label, "zero_x_rows_eps%s_%s", e ? "0" : "1e-6", v ? "int8" : "bf16");
            run_problem(label, &s);
        }
        /* zero x rows with a non-zero beta: key = rotated beta */
        s = base_spec(v);
        s.zero_x = 3;
        s.index_mode = IP_IDX_ALL;
        run_variant("zero_x_rows_beta", &s);
        /* NaN in every cache row: untouched rows must keep their NaN bytes */
        s = base_spec(v);
        s.nan_cache = 1;
        run_variant("nan_cache", &s);
    }
    /* key amax so small that fp32(127 / amax) overflows: q 0, scale 0 */
    {
        ip_spec s = base_spec(1);
        s.tiny_key = 1;
        s.index_mode = IP_IDX_ALL;
        run_problem("tiny_key_amax_int8", &s);
        s.int8 = 0;
        run_problem("tiny_key_bf16", &s);
    }
    {
        ip_spec s = base_spec(1);
        s.int8_extreme = 1;
        s.index_mode = IP_IDX_ALL;
        run_problem("int8_extremes", &s);
        s.Q = 1041;
        s.T = 3;
        run_problem("int8_extremes_q1041", &s);
    }
    /* odd shapes around tile edges */
    {
        ip_spec s = base_spec(0);
        s.T = 3, s.H = 259, s.Q = 130, s.NI = 3, s.DI = 96;
        run_problem("odd_h259_q130_ni3_di96_bf16", &s);
        s.int8 = 1;
        run_problem("odd_h259_q130_ni3_di96_int8", &s);
        s = base_spec(1);
        s.T = 2, s.H = 65, s.Q = 17, s.NI = 1, s.DI = 65, s.BS = 3;
        run_problem("odd_h65_q17_ni1_di65_int8", &s);
        s.int8 = 0;
        run_problem("odd_h65_q17_ni1_di65_bf16", &s);
        s.no_hadamard_q = 1;
        run_problem("odd_h65_q17_ni1_di65_bf16_had_k", &s);
        s = base_spec(1);
        s.T = 4, s.NI = 5, s.DI = 72, s.BS = 1;
        run_problem("odd_ni5_di72_bs1_int8", &s);
        s.int8 = 0;
        s.no_hadamard_q = s.no_hadamard_k = 1;
        run_problem("odd_ni5_di72_bs1_bf16_had_none", &s);
    }
    /* larger: several tiles in every dimension, V3.2 head proportions */
    {
        ip_spec s = base_spec(1);
        s.T = tu_quick() ? 9 : 37, s.H = 512, s.Q = 256, s.NI = 16, s.DI = 128, s.BS = 64;
        run_problem("wide_int8", &s);
        s.int8 = 0;
        run_problem("wide_bf16", &s);
        s.int8 = 1;
        s.strided = 1;
        s.rope_mode = DSOPS_ROPE_INTERLEAVED;
        run_problem("wide_int8_strided_interleaved", &s);
        s.int8 = 0;
        s.no_hadamard_q = s.no_hadamard_k = 1;
        run_problem("wide_bf16_strided_interleaved_had_none", &s);
    }
    /* empty call: T = 0 */
    for (int v = 0; v < 2; v++) {
        ip_spec s = base_spec(v);
        s.T = 0;
        s.NB = 2;
        run_variant("empty_t0", &s);
    }
}

/* ---- determinism ----------------------------------------------------------------------------------- */

static void test_threads(void)
{
    if (!tu_selected("threads"))
        return;
    for (int v = 0; v < 3; v++) {
        ip_spec s = base_spec(v == 0);
        s.T = 13, s.H = 384, s.Q = 192, s.NI = 6, s.DI = 128, s.BS = 8;
        if (v == 2)
            s.no_hadamard_q = 1;
        ip_problem *p = ip_make(&s, tu_label_seed("threads") + (uint64_t)v);
        const pc_target t = ip_target(p, NULL);
        pc_run_threads(&t, v == 0 ? "threads_int8" : (v == 1 ? "threads_bf16" : "threads_bf16_had_k"));
        ip_free(p);
    }
}

/* The same sections, in the same order, as tests/test_mla_prolog.c (the V3.2 prologs share one
 * checklist); what each section builds is this operator's own. */
int main(int argc, char **argv)
{
    tu_init(argc, argv, 7);
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
