/* sparse_attention_v32 validation (docs/OPERATORS.md §1.6, §4.5): every stage is validated before stage 1
 * writes anything, so a rejected call leaves every cache byte and every output byte as it was.
 *   - v32_dia_edge_validate_before_write (docs/CASES.md): a needed block-table entry of the attention stage out
 *     of range -> DSOPS_ERR_INDEX, caches untouched; on the named case (V3.2 sizes) and on small problems
 *     of both variants and the three kv layouts, with several bad values and positions; garbage in
 *     columns no token needs is accepted;
 *   - a table of bad argument sets, each with its expected status and a fragment of the message;
 *   - optional outputs (topk_indices, lse) absent: the same out; empty work (T = 0, B = 0) is valid.
 * Usage: test_dia_validation [label filter]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "dia_check.h"
#include "test_util.h"
#include "validation.h"

static dsops_context *ctx;

#define POISON 0x6b

static dsops_dia_case small_case(const char *name, int int8, dsops_kv_layout layout)
{
    dsops_dia_case c;
    memset(&c, 0, sizeof c);
    c.name = name;
    c.B = 3;
    const int S[3] = {2, 1, 2}, used[3] = {40, 130, 3};
    for (int b = 0; b < 3; b++) {
        c.S_each[b] = S[b];
        c.seqused[b] = used[b];
    }
    c.table_width = 12;
    c.H = 128, c.Q = 64, c.N = 2, c.Dqn = 16, c.Dc = layout == DSOPS_KV_PACKED_INT8 ? 512 : 128;
    c.NI = 2, c.DI = 64, c.K = 16, c.BS = 16;
    c.int8 = int8;
    c.layout = layout;
    c.ci = 1;
    return c;
}

static size_t bytes_of(const dsops_tensor *t)
{
    size_t n = dsops_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++)
        n *= (size_t)t->shape[d];
    return n;
}

static void poison_outputs(const dsops_sparse_attention_v32_args *a)
{
    const dsops_tensor *o[3] = {&a->out, &a->lse, &a->topk_indices};
    for (int i = 0; i < 3; i++)
        if (o[i]->data)
            memset(o[i]->data, POISON, bytes_of(o[i]));
}

/* Bytes of t from its start that still hold the poison. */
static size_t poisoned_prefix(const dsops_tensor *t)
{
    const unsigned char *p = t->data;
    size_t n = bytes_of(t), k = 0;
    while (k < n && p[k] == POISON)
        k++;
    return k;
}

static int outputs_untouched(const dsops_sparse_attention_v32_args *a, const char *label)
{
    const dsops_tensor *o[3] = {&a->out, &a->lse, &a->topk_indices};
    const char *names[3] = {"out", "lse", "topk_indices"};
    int ok = 1;
    for (int i = 0; i < 3; i++) {
        if (!o[i]->data)
            continue;
        const size_t k = poisoned_prefix(o[i]);
        ok &= tu_check(k == bytes_of(o[i]), "%s: %s byte %zu written by a rejected call", label, names[i], k);
    }
    return ok;
}

/* A call for the table runner: the state (caches, and the outputs of its arguments) and the changed arguments
 * the operator is called with. */
typedef struct dia_call {
    dc_state *s;
    const dsops_sparse_attention_v32_args *a;
} dia_call;

static dsops_status call(dsops_context *c, void *p) { return dsops_sparse_attention_v32(c, ((dia_call *)p)->a); }
/* every cache byte back to its value before the first call, the outputs poisoned */
static void arm(void *p)
{
    dc_state *s = ((dia_call *)p)->s;
    dc_restore(s);
    poison_outputs(&s->args);
}
static void untouched(void *p, const char *name)
{
    const dc_state *s = ((dia_call *)p)->s;
    dc_caches_untouched(s, name);
    outputs_untouched(&s->args, name);
}

/* the cases are built in place (below), so only the call and its checks come from the runner */
static const val_ops dia_ops = {.call = call, .arm = arm, .untouched = untouched};

/* Calls with `a` (the state's arguments changed by the caller) and expects `status` with `frag` in the
 * message (NULL: any message); every cache byte (restored first) and every output byte of the state's
 * arguments must stay. */
static void expect_fail(dc_state *s, const dsops_sparse_attention_v32_args *a, dsops_status status, const char *frag,
                        const char *label)
{
    if (!tu_selected(label))
        return;
    dia_call p = {s, a};
    val_expect_rejected(&dia_ops, ctx, &p, label, status, frag ? frag : "");
}

/* ---- v32_dia_edge_validate_before_write ------------------------------------------------------------ */

/* Column and sequence of a needed block: the last column of the longest sequence, and column 0 of the
 * first sequence with tokens. */
static void bad_tables(dc_state *s, const dsops_dia_problem *p, const char *name)
{
    const int64_t B = p->c.B, MB = p->MB;
    int64_t longest = 0;
    for (int64_t b = 1; b < B; b++)
        if (p->c.seqused[b] > p->c.seqused[longest])
            longest = b;
    const int64_t last_col = (p->c.seqused[longest] - 1) / p->c.BS;
    const struct {
        int64_t b, col;
    } where[2] = {{longest, last_col}, {0, 0}};
    const int32_t values[3] = {(int32_t)p->NB, -1, INT32_MIN};
    int32_t *bt = malloc(sizeof(int32_t) * (size_t)(B * MB));
    for (int w = 0; w < 2; w++)
        for (int v = 0; v < 3; v++) {
            memcpy(bt, p->block_table, sizeof(int32_t) * (size_t)(B * MB));
            bt[where[w].b * MB + where[w].col] = values[v];
            dsops_sparse_attention_v32_args a = s->args;
            a.block_table.data = bt;
            char l[200];
            snprintf(l, sizeof l, "%s: block_table[%lld][%lld] = %d", name, (long long)where[w].b,
                     (long long)where[w].col, values[v]);
            expect_fail(s, &a, DSOPS_ERR_INDEX, "block_table", l);
        }
    /* a table narrower than the longest sequence needs (the same rows, fewer columns) */
    {
        dsops_sparse_attention_v32_args a = s->args;
        a.block_table.shape[1] = last_col; /* stride stays MB */
        char l[200];
        snprintf(l, sizeof l, "%s: block table of %lld columns", name, (long long)last_col);
        if (last_col >= 1)
            expect_fail(s, &a, DSOPS_ERR_INDEX, NULL, l);
    }
    /* garbage in columns no token needs is not read */
    {
        memcpy(bt, p->block_table, sizeof(int32_t) * (size_t)(B * MB));
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = (p->c.seqused[b] + p->c.BS - 1) / p->c.BS; j < MB; j++)
                bt[b * MB + j] = (j % 3 == 0) ? -1 : (j % 3 == 1) ? (int32_t)p->NB + 5 : INT32_MAX;
        dsops_sparse_attention_v32_args a = s->args;
        a.block_table.data = bt;
        char l[200];
        snprintf(l, sizeof l, "%s: garbage in unneeded columns", name);
        if (tu_selected(l)) {
            dc_result *want = dc_run_fused(s, ctx, NULL, l);
            dc_restore(s);
            dsops_status st = dsops_sparse_attention_v32(ctx, &a);
            if (tu_check(st == DSOPS_OK, "%s: status %s (%s)", l, dsops_status_name(st), dsops_last_error()) && want) {
                dsops_sparse_attention_v32_args orig = s->args;
                dc_result got = {0};
                got.out = orig.out.data, got.lse = orig.lse.data, got.topk = orig.topk_indices.data;
                got.out_bytes = want->out_bytes, got.lse_bytes = want->lse_bytes, got.topk_bytes = want->topk_bytes;
                for (int i = 0; i < s->nc; i++)
                    got.cache[i] = s->c[i].data;
                dc_same(s, &got, want, l, "the clean table");
            }
            dc_result_free(want);
        }
    }
    free(bt);
}

static void test_edge_named(void)
{
    const dsops_dia_case *c = dsops_dia_case_find("v32_dia_edge_validate_before_write");
    if (!tu_check(c != NULL, "named case v32_dia_edge_validate_before_write missing") || !tu_selected(c->name))
        return;
    dsops_dia_problem *p = dsops_dia_problem_make(c, tu_seed());
    if (!tu_check(p != NULL, "%s: problem generation failed", c->name))
        return;
    dc_state *s = dc_state_make(&p->args);
    bad_tables(s, p, c->name);
    dc_state_free(s);
    dsops_dia_problem_free(p);
}

static void test_edge_small(void)
{
    const dsops_kv_layout layouts[3] = {DSOPS_KV_SPLIT_BF16, DSOPS_KV_SPLIT_INT8, DSOPS_KV_PACKED_INT8};
    for (int int8 = 0; int8 <= 1; int8++)
        for (int li = 0; li < 3; li++) {
            char name[96];
            snprintf(name, sizeof name, "dia_edge_%s_%d", int8 ? "int8" : "bf16", (int)layouts[li]);
            dsops_dia_case c = small_case(name, int8, layouts[li]);
            dsops_dia_problem *p = dsops_dia_problem_make(&c, tu_seed() + (uint64_t)(li + 3 * int8));
            if (!tu_check(p != NULL, "%s: problem generation failed", name))
                continue;
            dc_state *s = dc_state_make(&p->args);
            bad_tables(s, p, name);
            dc_state_free(s);
            dsops_dia_problem_free(p);
        }
}

/* ---- the validation table -------------------------------------------------------------------------- */

/* Each rule is a row written in place (a = A, one change, expect_fail): the fused call's arguments come in pairs
 * of problems (bf16 / int8) and shared stage state, so the rows stay here; alike in shape only, each is the rule
 * of one field. */

static void test_table(void)
{
    dsops_dia_case cb = small_case("table_bf16", 0, DSOPS_KV_SPLIT_BF16);
    dsops_dia_case ci = small_case("table_int8", 1, DSOPS_KV_SPLIT_INT8);
    dsops_dia_problem *pb = dsops_dia_problem_make(&cb, tu_seed() + 11);
    dsops_dia_problem *pi = dsops_dia_problem_make(&ci, tu_seed() + 12);
    dsops_dia_problem *pb2 = dsops_dia_problem_make(&cb, tu_seed() + 13); /* other weights, same shapes */
    if (!tu_check(pb && pi && pb2, "validation problems"))
        goto done;
    dc_state *s = dc_state_make(&pb->args);
    dc_state *si = dc_state_make(&pi->args);
    const dsops_sparse_attention_v32_args A = pb->args, I = pi->args;
    dsops_sparse_attention_v32_args a;
    const int64_t T = pb->T, K = cb.K;

#define NULL_CASE(field)                                                                                         \
    do {                                                                                                         \
        a = A;                                                                                                   \
        a.field.data = NULL;                                                                                     \
        expect_fail(s, &a, DSOPS_ERR_NULL, #field, "NULL " #field);                                               \
    } while (0)
    NULL_CASE(x);
    NULL_CASE(wq_a);
    NULL_CASE(wq_b);
    NULL_CASE(w_uk);
    NULL_CASE(wkv_a);
    NULL_CASE(gamma_cq);
    NULL_CASE(gamma_ckv);
    NULL_CASE(idx_wq_b);
    NULL_CASE(idx_wk);
    NULL_CASE(weights_proj);
    NULL_CASE(ln_gamma_k);
    NULL_CASE(rope_cos);
    NULL_CASE(cache_index);
    NULL_CASE(block_table);
    NULL_CASE(cu_seqlens_q);
    NULL_CASE(seqused_kv);
    NULL_CASE(kv_cache);
    NULL_CASE(kr_cache);
    NULL_CASE(idx_k_cache);
    NULL_CASE(out);
#undef NULL_CASE
    a = I;
    a.hadamard_q.data = NULL;
    expect_fail(si, &a, DSOPS_ERR_NULL, "hadamard_q", "int8 variant without hadamard_q");
    a = I;
    a.idx_k_scale_cache.data = NULL;
    expect_fail(si, &a, DSOPS_ERR_NULL, "idx_k_scale_cache", "int8 variant without idx_k_scale_cache");
    a = I;
    a.kv_scale_cache.data = NULL;
    expect_fail(si, &a, DSOPS_ERR_NULL, "kv_scale_cache", "split_int8 without kv_scale_cache");

    /* dtypes: the variant follows wq_b; idx_wq_b and the indexer cache must match it */
    a = A;
    a.idx_wq_b = I.idx_wq_b;
    a.idx_wq_b_scale = I.idx_wq_b_scale;
    expect_fail(s, &a, DSOPS_ERR_DTYPE, "idx_wq_b", "bf16 wq_b with int8 idx_wq_b");
    a.hadamard_q = I.hadamard_q; /* with the matrices of the int8 variant too */
    a.hadamard_k = I.hadamard_k;
    expect_fail(s, &a, DSOPS_ERR_DTYPE, "idx_wq_b", "bf16 wq_b with int8 idx_wq_b and Hadamard matrices");
    a = I;
    a.idx_wq_b = A.idx_wq_b;
    a.idx_wq_b_scale = (dsops_tensor){0};
    expect_fail(si, &a, DSOPS_ERR_DTYPE, "idx_wq_b", "int8 wq_b with bf16 idx_wq_b");
    a = I;
    a.idx_k_cache = A.idx_k_cache;
    a.idx_k_scale_cache = (dsops_tensor){0};
    expect_fail(si, &a, DSOPS_ERR_DTYPE, "idx_k_cache", "int8 variant with a bf16 indexer cache");
    a = A;
    a.idx_k_cache = I.idx_k_cache;
    expect_fail(s, &a, DSOPS_ERR_DTYPE, "idx_k_cache", "bf16 variant with an int8 indexer cache");
    a = A;
    a.x.dtype = DSOPS_FP16;
    expect_fail(s, &a, DSOPS_ERR_DTYPE, "x", "x fp16");
    a = A;
    a.kv_layout = DSOPS_KV_SPLIT_INT8;
    expect_fail(s, &a, DSOPS_ERR_DTYPE, "kv_cache", "kv_layout split_int8 with a bf16 kv_cache");
    a = A;
    a.topk_indices.dtype = DSOPS_INT64;
    a.topk_indices.shape[1] = K / 2;
    a.topk_indices.stride[0] = K / 2;
    expect_fail(s, &a, DSOPS_ERR_DTYPE, "topk_indices", "topk_indices int64");

    /* top-k width */
    a = A;
    a.topk = 0;
    expect_fail(s, &a, DSOPS_ERR_PARAM, "topk", "topk 0");
    a = A;
    a.topk = -3;
    expect_fail(s, &a, DSOPS_ERR_PARAM, "topk", "topk -3");
    a = A;
    a.topk = (int)K / 2; /* topk_indices keeps K columns */
    expect_fail(s, &a, DSOPS_ERR_SHAPE, "topk_indices", "topk_indices with the wrong K (wider)");
    a = A;
    a.topk_indices.shape[1] = K - 1;
    expect_fail(s, &a, DSOPS_ERR_SHAPE, "topk_indices", "topk_indices with the wrong K (narrower)");
    a = A;
    a.topk_indices.shape[0] = T - 1;
    expect_fail(s, &a, DSOPS_ERR_SHAPE, "topk_indices", "topk_indices with T - 1 rows");

    /* shapes */
    a = A;
    a.idx_wk.shape[0] = 32; /* DI < 64 */
    a.idx_wk.stride[0] = A.idx_wk.stride[0];
    expect_fail(s, &a, DSOPS_ERR_SHAPE, NULL, "DI 32");
    /* extents and strides that overflow int64 offsets in tensors the fused call checks for aliasing before the
     * stages validate their shapes: refused with DSOPS_ERR_SHAPE, no overflow on the way (UndefinedBehaviorSanitizer) */
    a = A;
    a.idx_wk.shape[1] = INT64_MIN;
    expect_fail(s, &a, DSOPS_ERR_SHAPE, "idx_wk", "idx_wk with extent INT64_MIN");
    a = A;
    a.ln_gamma_k.stride[0] = INT64_MAX;
    expect_fail(s, &a, DSOPS_ERR_SHAPE, "ln_gamma_k", "ln_gamma_k with stride INT64_MAX");
    a = A;
    a.w_uk.ndim = DSOPS_MAX_DIMS + 1;
    expect_fail(s, &a, DSOPS_ERR_SHAPE, "w_uk", "w_uk with rank 7");
    /* extents whose intermediates overflow the address space, over stride-0 memory: refused before the scratch is
     * sized (the sizes were once computed in int64 first) */
    a = A;
    a.w_uk.shape[0] = (int64_t)1 << 60;
    a.w_uk.stride[0] = 0;
    expect_fail(s, &a, DSOPS_ERR_SHAPE, NULL, "w_uk broadcast over 2^60 heads");
    if (tu_selected("prepare with w_uk broadcast over 2^60 heads")) {
        dsops_prepared *prep = NULL;
        tu_check_rejected("prepare with w_uk broadcast over 2^60 heads",
                          dsops_sparse_attention_v32_prepare(ctx, &a, &prep), DSOPS_ERR_SHAPE, "");
        tu_check(prep == NULL, "prepare with w_uk broadcast over 2^60 heads: an object was made");
    }
    a = A;
    a.x.shape[0] = (int64_t)1 << 62;
    a.x.stride[0] = 0;
    a.topk_indices.data = NULL;
    expect_fail(s, &a, DSOPS_ERR_SHAPE, NULL, "x broadcast over 2^62 tokens");
    a = A;
    a.out.shape[1] = A.out.shape[1] - 1;
    expect_fail(s, &a, DSOPS_ERR_SHAPE, "out", "out with N - 1 heads");
    a = A;
    a.lse.shape[0] = T - 1;
    expect_fail(s, &a, DSOPS_ERR_SHAPE, "lse", "lse with T - 1 rows");

    /* aliasing of the outputs with a cache, an input or each other */
    a = A;
    a.out.data = A.kv_cache.data;
    expect_fail(s, &a, DSOPS_ERR_ALIAS, "out", "out aliasing kv_cache");
    a = A;
    a.out.data = A.idx_k_cache.data;
    expect_fail(s, &a, DSOPS_ERR_ALIAS, "out", "out aliasing idx_k_cache");
    a = A;
    a.lse.data = (char *)A.kr_cache.data + 64;
    expect_fail(s, &a, DSOPS_ERR_ALIAS, "lse", "lse inside kr_cache");
    a = A;
    a.topk_indices.data = A.idx_k_cache.data;
    expect_fail(s, &a, DSOPS_ERR_ALIAS, "topk_indices", "topk_indices aliasing idx_k_cache");
    a = A;
    a.out.data = A.x.data;
    expect_fail(s, &a, DSOPS_ERR_ALIAS, "out", "out aliasing x");
    a = A;
    a.lse.data = (char *)A.out.data + 4;
    expect_fail(s, &a, DSOPS_ERR_ALIAS, NULL, "lse inside out");
    a = I;
    a.out.data = I.kv_scale_cache.data;
    expect_fail(si, &a, DSOPS_ERR_ALIAS, "out", "out aliasing kv_scale_cache");
    /* a cache (written by one stage) on a weight or cache of another stage, which that stage's own checks never
     * see */
    a = A;
    a.idx_k_cache.data = A.wq_a.data;
    expect_fail(s, &a, DSOPS_ERR_ALIAS, "idx_k_cache", "idx_k_cache aliasing wq_a");
    a = A;
    a.kr_cache.data = A.idx_wk.data;
    expect_fail(s, &a, DSOPS_ERR_ALIAS, "kr_cache", "kr_cache aliasing idx_wk");

    /* caches that share the block table with other block counts or sizes: refused before any write (a block the
     * indexer stage accepts could be out of range for the attention stage) */
    a = A;
    a.kv_cache.shape[0] -= 1;
    a.kr_cache.shape[0] -= 1;
    expect_fail(s, &a, DSOPS_ERR_SHAPE, "same NB and BS", "kv caches with one block fewer than idx_k_cache");
    a = A;
    a.idx_k_cache.shape[0] -= 1;
    expect_fail(s, &a, DSOPS_ERR_SHAPE, "same NB and BS", "idx_k_cache with one block fewer than the kv caches");

    /* scalar parameters */
    a = A;
    a.softmax_scale = NAN;
    expect_fail(s, &a, DSOPS_ERR_PARAM, "softmax_scale", "softmax_scale NaN");
    a = A;
    a.softmax_scale = INFINITY;
    expect_fail(s, &a, DSOPS_ERR_PARAM, "softmax_scale", "softmax_scale +Inf");
    a = A;
    a.weights_scale = NAN;
    expect_fail(s, &a, DSOPS_ERR_PARAM, "weights_scale", "weights_scale NaN");
    a = A;
    a.mla_eps_cq = -1e-6f;
    expect_fail(s, &a, DSOPS_ERR_PARAM, "eps_cq", "mla_eps_cq negative");
    a = A;
    a.mla_eps_ckv = INFINITY;
    expect_fail(s, &a, DSOPS_ERR_PARAM, "eps_ckv", "mla_eps_ckv +Inf");
    a = A;
    a.idx_ln_eps = NAN;
    expect_fail(s, &a, DSOPS_ERR_PARAM, "ln_eps", "idx_ln_eps NaN");
    a = A;
    a.mla_rope_mode = (dsops_rope_mode)7;
    expect_fail(s, &a, DSOPS_ERR_PARAM, "rope_mode", "mla_rope_mode 7");
    a = A;
    a.idx_rope_mode = (dsops_rope_mode)-1;
    expect_fail(s, &a, DSOPS_ERR_PARAM, "rope_mode", "idx_rope_mode -1");
    a = A;
    a.p_mode = (dsops_p_mode)9;
    expect_fail(s, &a, DSOPS_ERR_PARAM, "p_mode", "p_mode 9");
    a = A;
    a.p_mode = DSOPS_P_TILED;
    a.p_tile = 0;
    expect_fail(s, &a, DSOPS_ERR_PARAM, "p_tile", "p_tile 0 in tiled mode");
    a = A;
    a.kv_layout = (dsops_kv_layout)5;
    expect_fail(s, &a, DSOPS_ERR_PARAM, "kv_layout", "kv_layout 5");

    /* prepared objects */
    {
        dsops_dia_stages *st = dsops_dia_stages_make(&A);
        dsops_prepared *pm = NULL, *other = NULL;
        if (st && dsops_mla_prolog_v32_prepare(ctx, &st->mla, &pm) == DSOPS_OK) {
            a = A;
            a.prepared = pm;
            expect_fail(s, &a, DSOPS_ERR_PARAM, "prepared", "a prepared object of mla_prolog_v32");
        } else {
            tu_check(0, "mla_prolog_v32_prepare failed: %s", dsops_last_error());
        }
        if (dsops_sparse_attention_v32_prepare(ctx, &pb2->args, &other) == DSOPS_OK) {
            a = A;
            a.prepared = other;
            expect_fail(s, &a, DSOPS_ERR_PARAM, NULL, "a prepared object of other weights");
        } else {
            tu_check(0, "sparse_attention_v32_prepare failed: %s", dsops_last_error());
        }
        dsops_prepared_destroy(pm);
        dsops_prepared_destroy(other);
        dsops_dia_stages_free(st);
    }

    /* sequence descriptors and slots */
    {
        int32_t su[8], cu[8];
        int64_t ci[16];
        memcpy(su, A.seqused_kv.data, sizeof(int32_t) * (size_t)cb.B);
        su[1] = -1;
        a = A;
        a.seqused_kv.data = su;
        expect_fail(s, &a, DSOPS_ERR_INDEX, "seqused_kv", "seqused_kv -1");
        memcpy(cu, A.cu_seqlens_q.data, sizeof(int32_t) * (size_t)(cb.B + 1));
        cu[1] = cu[2] + 1;
        a = A;
        a.cu_seqlens_q.data = cu;
        expect_fail(s, &a, DSOPS_ERR_INDEX, "cu_seqlens_q", "cu_seqlens_q decreasing");
        memcpy(ci, A.cache_index.data, sizeof(int64_t) * (size_t)T);
        ci[2] = ci[0];
        a = A;
        a.cache_index.data = ci;
        expect_fail(s, &a, DSOPS_ERR_INDEX, "cache_index", "cache_index repeated");
        memcpy(ci, A.cache_index.data, sizeof(int64_t) * (size_t)T);
        ci[T - 1] = pb->NB * cb.BS;
        a = A;
        a.cache_index.data = ci;
        expect_fail(s, &a, DSOPS_ERR_INDEX, "cache_index", "cache_index = NB * BS");
    }

    /* optional outputs absent: the same out (and the same caches) */
    if (tu_selected("optional outputs")) {
        dc_result *want = dc_run_fused(s, ctx, NULL, "optional outputs: reference run");
        for (int v = 0; v < 2 && want; v++) {
            dc_restore(s);
            a = A;
            if (v == 0)
                a.topk_indices = (dsops_tensor){0};
            else
                a.lse = (dsops_tensor){0};
            poison_outputs(&A);
            dsops_status st = dsops_sparse_attention_v32(ctx, &a);
            const char *what = v == 0 ? "without topk_indices" : "without lse";
            if (tu_check(st == DSOPS_OK, "%s: status %s (%s)", what, dsops_status_name(st), dsops_last_error())) {
                tu_check(memcmp(A.out.data, want->out, want->out_bytes) == 0, "%s: out differs", what);
                int same = 1;
                for (int i = 0; i < s->nc; i++)
                    same &= memcmp(s->c[i].data, want->cache[i], s->c[i].bytes) == 0;
                tu_check(same, "%s: caches differ", what);
                const dsops_tensor *skipped = v == 0 ? &A.topk_indices : &A.lse;
                tu_check(poisoned_prefix(skipped) == bytes_of(skipped), "%s: the absent output's buffer was written",
                         what);
            }
        }
        dc_result_free(want);
    }
    dc_state_free(s);
    dc_state_free(si);
done:
    dsops_dia_problem_free(pb);
    dsops_dia_problem_free(pi);
    dsops_dia_problem_free(pb2);
}

/* ---- empty work ------------------------------------------------------------------------------------ */

static void test_empty(void)
{
    for (int B = 1; B >= 0; B--) {
        char name[64];
        snprintf(name, sizeof name, "empty work B = %d", B);
        if (!tu_selected(name))
            continue;
        dsops_dia_case c = small_case(name, 1, DSOPS_KV_SPLIT_INT8);
        c.B = B;
        memset(c.S_each, 0, sizeof c.S_each);
        c.S = 0;
        c.seqused[0] = 5;
        dsops_dia_problem *p = dsops_dia_problem_make(&c, tu_seed() + 21);
        if (!tu_check(p != NULL && p->T == 0, "%s: problem generation failed", name)) {
            dsops_dia_problem_free(p);
            continue;
        }
        dc_state *s = dc_state_make(&p->args);
        dsops_status st = dsops_sparse_attention_v32(ctx, &p->args);
        if (tu_check(st == DSOPS_OK, "%s: status %s (%s)", name, dsops_status_name(st), dsops_last_error()))
            dc_caches_untouched(s, name);
        dc_state_free(s);
        dsops_dia_problem_free(p);
    }
}

/* The usual test main (tests/test_util.h): seed, one context, the sections in order, the tally. */
int main(int argc, char **argv)
{
    tu_init(argc, argv, 42);
    ctx = tu_context();
    test_edge_small();
    test_edge_named();
    test_table();
    test_empty();
    dsops_context_destroy(ctx);
    return tu_finish();
}
