/* mla_prolog_v4 (spec §3.3; docs/CASES.md "mla_prolog_v4"): the named cases, their data generator, the
 * bench adapter and the adversarial problems of tests/test_v4_prologs.c (problems.h).
 *
 * Data (the caller passes the seed; docs/CASES.md: 5):
 *   x                    U(-1,1) bf16                                                  [T, H]
 *   wq_a, wq_b, wkv      U(-0.1,0.1) bf16; int8 wq_b: Q8 (spec §2.7) of the bf16 matrix per output
 *                        channel (row), wq_b_scale the per-row scales        [Q, H], [N*D, Q], [D, H]
 *   gamma_cq, gamma_ckv  U(-1,1) bf16                                                  [Q], [D]
 *   rope_cos, rope_sin   U(-1,1) bf16 (random values, not real tables)                 [T, 64]
 *   parameters           V4 defaults (= vendor): eps 1e-6, interleaved, not inverse
 *
 * Every generated row draws from its own generator seeded from (seed, stream, row), so the data do not
 * depend on the thread count and rows fill in parallel. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_family.h"
#include "cases.h"
#include "cases_internal.h"
#include "ref.h"

#define V4P_FLASH .H = 4096, .Q = 1024, .N = 64, .D = 512
#define V4P_PRO .H = 7168, .Q = 1536, .N = 128, .D = 512

static const dsops_mla4_case mla4_cases[] = {
    {.name = "v4_mla_prolog_bf16_t16", .T = 16, V4P_FLASH, .int8 = 0, .ci = 1},
    {.name = "v4_mla_prolog_int8_t4", .T = 4, V4P_FLASH, .int8 = 1, .ci = 1},
    {.name = "v4_mla_prolog_int8_t16", .T = 16, V4P_FLASH, .int8 = 1, .ci = 1},
    {.name = "v4_mla_prolog_int8_t512", .T = 512, V4P_FLASH, .int8 = 1, .ci = 0,
     .ci_variant = "v4_mla_prolog_int8_t512_ci"},
    {.name = "v4_mla_prolog_int8_t512_ci", .T = 128, V4P_FLASH, .int8 = 1, .ci = 1},
    /* the vendor's table does not state the variant of its 130 us; the int8 prolog is the one V4 runs */
    {.name = "v4_mla_prolog_b64_s2", .T = 128, V4P_FLASH, .int8 = 1, .vendor_us = 130, .vendor = "PyPTO", .ci = 1},
    {.name = "v4_mla_prolog_pro_int8_t16", .T = 16, V4P_PRO, .int8 = 1, .ci = 1},
};

const dsops_mla4_case *dsops_mla4_cases(int *count) { return CASES_TABLE(mla4_cases, count); }
const dsops_mla4_case *dsops_mla4_case_find(const char *name) { return CASES_FIND(mla4_cases, name); }
void dsops_mla4_problem_free(dsops_mla4_problem *p) { if (p) cases_problem_release(p->buffers, p->nbuffers, p); }

/* the stream numbers the two V4 prologs have always drawn from */
enum {
    V4P_STREAM_X = 1, V4P_STREAM_WQA = 2, V4P_STREAM_WQB = 3, V4P_STREAM_WKV = 4, V4P_STREAM_GCQ = 5,
    V4P_STREAM_GCKV = 6, V4P_STREAM_COS = 7, V4P_STREAM_SIN = 8
};

static void *mla4_alloc(dsops_mla4_problem *p, size_t bytes) { return ALLOC_OWNED(p, bytes); }

/* The V4 defaults of spec §3.3, from the preset (set here when the init function refuses). */
static void mla4_defaults(dsops_mla_prolog_v4_args *a, dsops_preset preset)
{
    if (dsops_mla_prolog_v4_init(a, preset) == DSOPS_OK)
        return;
    memset(a, 0, sizeof *a);
    a->eps_cq = a->eps_ckv = a->eps_qh = 1e-6f;
    a->rope_mode = DSOPS_ROPE_INTERLEAVED;
    a->rope_inverse = 0;
    a->prepared = NULL;
}

dsops_mla4_problem *dsops_mla4_problem_make(const dsops_mla4_case *c, uint64_t seed)
{
    if (!c || c->T < 0 || c->H < 1 || c->H > CASES_MAX_ROW || c->Q < 1 || c->Q > CASES_MAX_ROW || c->N < 1 ||
        c->D <= 64 || (c->int8 && c->Q > 131072))
        return NULL;
    dsops_mla4_problem *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->c = *c;
    const int64_t T = c->T, H = c->H, Q = c->Q, N = c->N, D = c->D, ND = N * D;
    const size_t wsz = c->int8 ? 1 : 2;

    uint16_t *x = mla4_alloc(p, sizeof(uint16_t) * (size_t)(T * H));     /* [T, H] bf16 */
    uint16_t *wq_a = mla4_alloc(p, sizeof(uint16_t) * (size_t)(Q * H));  /* [Q, H] bf16 */
    uint16_t *g_cq = mla4_alloc(p, sizeof(uint16_t) * (size_t)Q);        /* [Q] bf16 */
    void *wq_b = mla4_alloc(p, wsz * (size_t)(ND * Q));                  /* [N*D, Q] bf16 or int8 */
    float *wq_b_scale = c->int8 ? mla4_alloc(p, sizeof(float) * (size_t)ND) : NULL; /* [N*D] fp32 */
    uint16_t *wkv = mla4_alloc(p, sizeof(uint16_t) * (size_t)(D * H));   /* [D, H] bf16 */
    uint16_t *g_ckv = mla4_alloc(p, sizeof(uint16_t) * (size_t)D);       /* [D] bf16 */
    uint16_t *cosb = mla4_alloc(p, sizeof(uint16_t) * (size_t)(T * 64)); /* [T, 64] bf16 */
    uint16_t *sinb = mla4_alloc(p, sizeof(uint16_t) * (size_t)(T * 64)); /* [T, 64] bf16 */
    uint16_t *q = mla4_alloc(p, sizeof(uint16_t) * (size_t)(T * ND));    /* [T, N, D] bf16, out */
    uint16_t *kv = mla4_alloc(p, sizeof(uint16_t) * (size_t)(T * D));    /* [T, D] bf16, out */
    void *qr = mla4_alloc(p, wsz * (size_t)(T * Q));                     /* [T, Q] bf16 or int8, out */
    float *qr_scale = c->int8 ? mla4_alloc(p, sizeof(float) * (size_t)T) : NULL; /* [T] fp32, out */
    if (!x || !wq_a || !g_cq || !wq_b || (c->int8 && !wq_b_scale) || !wkv || !g_ckv || !cosb || !sinb || !q || !kv ||
        !qr || (c->int8 && !qr_scale)) {
        dsops_mla4_problem_free(p);
        return NULL;
    }

    cases_fill_bf16(seed, V4P_STREAM_X, T, H, 1.0f, x);
    cases_fill_bf16(seed, V4P_STREAM_WQA, Q, H, 0.1f, wq_a);
    if (c->int8)
        cases_fill_q8_bf16(seed, V4P_STREAM_WQB, ND, Q, 0.1f, wq_b, wq_b_scale);
    else
        cases_fill_bf16(seed, V4P_STREAM_WQB, ND, Q, 0.1f, wq_b);
    cases_fill_bf16(seed, V4P_STREAM_WKV, D, H, 0.1f, wkv);
    cases_fill_bf16(seed, V4P_STREAM_GCQ, 1, Q, 1.0f, g_cq);
    cases_fill_bf16(seed, V4P_STREAM_GCKV, 1, D, 1.0f, g_ckv);
    cases_fill_bf16(seed, V4P_STREAM_COS, T, 64, 1.0f, cosb);
    cases_fill_bf16(seed, V4P_STREAM_SIN, T, 64, 1.0f, sinb);

    dsops_mla_prolog_v4_args *a = &p->args;
    mla4_defaults(a, c->H == 7168 ? DSOPS_PRESET_V4_PRO : DSOPS_PRESET_V4_FLASH);
    const dsops_dtype wdt = c->int8 ? DSOPS_INT8 : DSOPS_BF16;
    a->x = dsops_tensor_make(x, DSOPS_BF16, 2, (int64_t[]){T, H});
    a->wq_a = dsops_tensor_make(wq_a, DSOPS_BF16, 2, (int64_t[]){Q, H});
    a->gamma_cq = dsops_tensor_make(g_cq, DSOPS_BF16, 1, (int64_t[]){Q});
    a->wq_b = dsops_tensor_make(wq_b, wdt, 2, (int64_t[]){ND, Q});
    a->wkv = dsops_tensor_make(wkv, DSOPS_BF16, 2, (int64_t[]){D, H});
    a->gamma_ckv = dsops_tensor_make(g_ckv, DSOPS_BF16, 1, (int64_t[]){D});
    a->rope_cos = dsops_tensor_make(cosb, DSOPS_BF16, 2, (int64_t[]){T, 64});
    a->rope_sin = dsops_tensor_make(sinb, DSOPS_BF16, 2, (int64_t[]){T, 64});
    a->q = dsops_tensor_make(q, DSOPS_BF16, 3, (int64_t[]){T, N, D});
    a->kv = dsops_tensor_make(kv, DSOPS_BF16, 2, (int64_t[]){T, D});
    a->qr = dsops_tensor_make(qr, wdt, 2, (int64_t[]){T, Q});
    if (c->int8) { /* the scales of wq_b's rows and of qr's tokens */
        a->wq_b_scale = dsops_tensor_make(wq_b_scale, DSOPS_FP32, 1, (int64_t[]){ND});
        a->qr_scale = dsops_tensor_make(qr_scale, DSOPS_FP32, 1, (int64_t[]){T});
    }

    p->flops = 2.0 * (double)T * ((double)H * Q + (double)Q * ND + (double)H * D);
    p->weight_bytes = 2.0 * (double)Q * H + (c->int8 ? 1.0 + 4.0 / (double)Q : 2.0) * (double)ND * Q +
                      2.0 * (double)D * H + 2.0 * (double)(Q + D);
    return p;
}

/* ---- bench adapter ------------------------------------------------------------------------------- */
/* Alike in shape with the other families' adapters: bench_family.h says why each family keeps its own. */

/* mla_prolog_v4: timed with prepared weights (tests/test_cases.c checks the call without them). --check
 * compares every output with the oracle at the tolerances of docs/OPERATORS.md §3.3
 * (q, kv, bf16 qr 1e-4 / 2^-7 / 0.005; int8 qr 1 / 0 / 0; qr_scale 2.5e-5 / 0.005 / 0.005; int8 variant:
 * see mla4_check). A second row times the same matmuls alone. */
typedef struct mla4_bench {
    bench_linear_run_fn linear_run; /* first: the matmul-only row's runner, set by bench_matmuls */
    dsops_mla4_problem *p;
    dsops_prepared *prep;
    void *y;                   /* fp32 / int32 results of the matmul-only row */
} mla4_bench;

/* The maps of an mla_prolog_v4 prepared object, in its order. */
enum { MLA4_MAP_WQ_A, MLA4_MAP_WKV, MLA4_MAP_WQ_B, MLA4_MAP_COUNT };

static dsops_status mla4_run(dsops_context *ctx, void *pv)
{
    mla4_bench *b = pv;
    return dsops_mla_prolog_v4(ctx, &b->p->args);
}

/* q, kv, qr and qr_scale (bytes[i] each, 0 when absent) one after the other into dst. */
static void mla4_copy_outputs(const dsops_mla_prolog_v4_args *a, const size_t bytes[4], unsigned char *dst)
{
    const void *src[4] = {a->q.data, a->kv.data, a->qr.data, a->qr_scale.data};
    for (int i = 0; i < 4; dst += bytes[i++])
        if (bytes[i])
            memcpy(dst, src[i], bytes[i]);
}

/* int8 wq_b: the library may round a qr element the other way than the oracle (its fp32 sums run in
 * another order; qr tolerance 1 / 0 / 0), which moves q of that token beyond q's tolerance; q is then
 * compared only on tokens whose qr rows agree, and the others must have qr within 1. */
static int mla4_check(void *pv, char *why, size_t cap)
{
    mla4_bench *b = pv;
    dsops_mla_prolog_v4_args *a = &b->p->args;
    const int64_t T = b->p->c.T, D = b->p->c.D, ND = (int64_t)b->p->c.N * D, Q = b->p->c.Q;
    const int int8 = b->p->c.int8;
    const size_t bytes[4] = {(size_t)(T * ND) * 2, (size_t)(T * D) * 2, (size_t)(T * Q) * (int8 ? 1 : 2),
                             int8 ? (size_t)T * 4 : 0};
    const size_t total = bytes[0] + bytes[1] + bytes[2] + bytes[3];
    unsigned char *got = malloc(total + 1);
    if (!got)
        return bench_out_of_memory(why, cap);
    mla4_copy_outputs(a, bytes, got);
    dsops_ref_mla_prolog_v4(a); /* rewrites the outputs from the same inputs */
    const uint16_t *got_q = (const uint16_t *)got, *got_kv = (const uint16_t *)(got + bytes[0]);
    const unsigned char *got_qr = got + bytes[0] + bytes[1], *got_qr_scale = got_qr + bytes[2];
    size_t bad = 0, total_q = 0, bad_qr = 0, qr_total = 0, bad_kv = 0, bad_qr_bf16 = 0, bad_scale = 0, n = 0;
    double max_err = 0, max_qr = 0, max_other = 0;
    int64_t skipped = 0;
    for (int64_t t = 0; t < T; t++) {
        if (int8 && memcmp(got_qr + t * Q, (const int8_t *)a->qr.data + t * Q, (size_t)Q) != 0) {
            bench_count_outside(got_qr + t * Q, (const int8_t *)a->qr.data + t * Q, DSOPS_INT8, (size_t)Q, 1.0, 0.0,
                                &bad_qr, &qr_total, &max_qr);
            skipped++;
            continue;
        }
        bench_count_outside(got_q + t * ND, (const uint16_t *)a->q.data + t * ND, DSOPS_BF16, (size_t)ND, 1e-4,
                            1.0 / 128, &bad, &total_q, &max_err);
    }
    bench_count_outside(got_kv, a->kv.data, DSOPS_BF16, (size_t)(T * D), 1e-4, 1.0 / 128, &bad_kv, &n, &max_other);
    if (int8)
        bench_count_outside(got_qr_scale, a->qr_scale.data, DSOPS_FP32, (size_t)T, 2.5e-5, 0.005, &bad_scale, &n,
                            &max_other);
    else
        bench_count_outside(got_qr, a->qr.data, DSOPS_BF16, (size_t)(T * Q), 1e-4, 1.0 / 128, &bad_qr_bf16, &n,
                            &max_other);
    free(got);
    const int fail_kv = bench_too_many(bad_kv, (size_t)(T * D)), fail_scale = bench_too_many(bad_scale, (size_t)T),
              fail_qr = bench_too_many(bad_qr_bf16, (size_t)(T * Q));
    if (fail_kv || fail_scale || fail_qr)
        snprintf(why, cap, "outside their tolerances: %zu of %lld kv, %zu of %lld qr_scale, %zu of %lld bf16 qr "
                 "elements", bad_kv, (long long)(T * D), bad_scale, (long long)(int8 ? T : 0), bad_qr_bf16,
                 (long long)(int8 ? 0 : T * Q));
    else
        snprintf(why, cap, "%zu of %zu q elements outside 1e-4 / 2^-7, max |err| %.3g; %lld token(s) with qr rows "
                 "other than the oracle's (%zu elements beyond 1)", bad, total_q, max_err, (long long)skipped, bad_qr);
    return bench_too_many(bad, total_q) || bad_qr != 0 || fail_kv || fail_scale || fail_qr;
}

static void mla4_release(void *pv)
{
    mla4_bench *b = pv;
    dsops_prepared_destroy(b->prep);
    dsops_mla4_problem_free(b->p);
    free(b->y);
    free(b);
}

/* The prolog's matmuls alone, on the prepared maps: x by wq_a and wkv together, then the call's qr (int8
 * or bf16, as wq_b) by wq_b. */
static dsops_status mla4_gemms_run(dsops_context *ctx, void *pv)
{
    mla4_bench *b = pv;
    const dsops_mla4_case *c = &b->p->c;
    const dsops_mla_prolog_v4_args *a = &b->p->args;
    const int64_t T = c->T, ND = (int64_t)c->N * c->D;
    const int threads = dsops_context_threads(ctx);
    char *y = b->y; /* separate regions for the concurrent jobs */
    dsops_linear **m = b->prep->maps;
    dsops_linear_job j1[2] = {{m[MLA4_MAP_WQ_A], a->x.data, c->H, y, c->Q},
                              {m[MLA4_MAP_WKV], a->x.data, c->H, y + (size_t)(T * c->Q) * 4, c->D}};
    dsops_status s = b->linear_run(ctx, j1, 2, T, threads, dsops_context_isa(ctx));
    dsops_linear_job j2 = {m[MLA4_MAP_WQ_B], a->qr.data, c->Q, y, ND};
    if (s == DSOPS_OK)
        s = b->linear_run(ctx, &j2, 1, T, threads, dsops_context_isa(ctx));
    return s;
}
static int mla4_make_problem(const void *cv, bench_problem *bp, char *why, size_t cap)
{
    const dsops_mla4_case *mc = cv;
    mla4_bench *b = calloc(1, sizeof *b);
    if (!b)
        return bench_out_of_memory(why, cap);
    *bp = (bench_problem){.p = b, .run = mla4_run, .check = mla4_check, .release = mla4_release};
    if (!(b->p = dsops_mla4_problem_make(mc, 5)))
        return bench_cannot_generate(why, cap);
    if (bench_prepared_or_say(dsops_mla_prolog_v4_prepare(NULL, &b->p->args, &b->prep), "mla_prolog_v4_prepare",
                              why, cap))
        return 1;
    const size_t T = (size_t)mc->T, ND = (size_t)mc->N * (size_t)mc->D;
    b->y = malloc(4 * T * (ND > (size_t)(mc->Q + mc->D) ? ND : (size_t)(mc->Q + mc->D)) + 64);
    if (!b->y)
        return bench_out_of_memory(why, cap);
    b->p->args.prepared = b->prep;
    *bp = (bench_problem){b, mla4_run, mla4_check, mla4_release, b->p->flops, b->p->weight_bytes,
                          mc->int8 ? DSOPS_PEAK_INT8_DOT : DSOPS_PEAK_BF16_DOT, .vendor_us = mc->vendor_us,
                          .vendor = mc->vendor, .args = &b->p->args};
    return 0;
}

static void mla4_words(const void *cv, char *op, size_t oc, char *sh, size_t sc)
{
    const dsops_mla4_case *c = cv;
    snprintf(op, oc, "mla_prolog_v4");
    snprintf(sh, sc, "T %d, %s wq_b", c->T, c->int8 ? "int8" : "bf16");
}

static void mla4_list_line(const void *cv, const char *not_ci)
{
    const dsops_mla4_case *c = cv;
    printf("%-40s mla_prolog_v4               T %-5d H %d Q %d N %d D %d, %s wq_b%s\n", c->name, c->T, c->H, c->Q,
           c->N, c->D, c->int8 ? "int8" : "bf16", not_ci);
}

static void mla4_vendor(const void *cv, double *us, const char **label)
{
    *us = ((const dsops_mla4_case *)cv)->vendor_us, *label = ((const dsops_mla4_case *)cv)->vendor;
}

static int mla4_matmuls_check(const void *pv, char *why, size_t cap)
{
    return bench_prepared_has_maps(((const mla4_bench *)pv)->prep, MLA4_MAP_COUNT, why, cap);
}

static const void *mla4_table(int *count) { return dsops_mla4_cases(count); }

const bench_family bench_family_mla_prolog_v4 = {
    .op = "mla_prolog_v4",
    .table_word = "mla_prolog_v4",
    .cases = mla4_table,
    .case_size = sizeof(dsops_mla4_case),
    .ci_offset = offsetof(dsops_mla4_case, ci),
    .make_problem = mla4_make_problem,
    .words = mla4_words,
    .list_line = mla4_list_line,
    .vendor = mla4_vendor,
    .matmuls_run = mla4_gemms_run,
    .matmuls_check = mla4_matmuls_check,
};

/* ==== adversarial problems (problems.h) ==================================================================== */

static void m4_oracle(const void *args) { dsops_ref_mla_prolog_v4(args); }

m4_problem *m4_make(const m4_spec *sp, uint64_t seed)
{
    m4_problem *p = cases_xcalloc(1, sizeof *p);
    v4p_init(&p->pl, "mla_prolog_v4", &p->a, m4_oracle);
    p->sp = *sp;
    rng r = {seed};
    const int64_t T = sp->T, H = sp->H, Q = sp->Q, N = sp->N, D = sp->D, ND = N * D;
    const dsops_dtype gdt = sp->gamma_dtype ? sp->gamma_dtype : DSOPS_BF16;
    const dsops_dtype gkdt = sp->gckv_dtype ? sp->gckv_dtype : gdt;
    const dsops_dtype tdt = sp->table_dtype ? sp->table_dtype : DSOPS_BF16;
    dsops_mla_prolog_v4_args *a = &p->a;
    a->rope_mode = sp->rope_mode;
    a->rope_inverse = sp->rope_inverse;
    if (sp->eps_qh > 0)
        a->eps_qh = sp->eps_qh;

    int64_t s[3];
    s[0] = T, s[1] = H;
    a->x = v4p_input(&p->pl, "x", DSOPS_BF16, 2, s, sp->padded);                  /* [T, H] bf16 */
    cases_fill_view_uniform(&a->x, &r, -1, 1);
    for (int64_t t = 0; t < sp->zero_tokens && t < T; t++)
        for (int64_t k = 0; k < H; k++)
            v4p_set(&a->x, t * H + k, 0.0f);
    s[0] = Q, s[1] = H;
    a->wq_a = v4p_input(&p->pl, "wq_a", DSOPS_BF16, 2, s, 0);                     /* [Q, H] bf16 */
    cases_fill_view_uniform(&a->wq_a, &r, -0.1f, 0.1f);
    s[0] = Q;
    a->gamma_cq = v4p_input(&p->pl, "gamma_cq", gdt, 1, s, 0);                    /* [Q] */
    cases_fill_view_uniform(&a->gamma_cq, &r, sp->zero_gamma_cq ? 0 : -1, sp->zero_gamma_cq ? 0 : 1);
    s[0] = ND, s[1] = Q;
    a->wq_b = v4p_input(&p->pl, "wq_b", sp->int8 ? DSOPS_INT8 : DSOPS_BF16, 2, s, 0); /* [N*D, Q] */
    if (sp->int8) {
        s[0] = ND;
        a->wq_b_scale = v4p_input(&p->pl, "wq_b_scale", DSOPS_FP32, 1, s, 0);    /* [N*D] fp32 */
        if (sp->int8_extreme) {
            for (int64_t e = 0; e < ND * Q; e++)
                v4p_set(&a->wq_b, e, cases_rng_next(&r) & 1 ? 127.0f : -128.0f);
            for (int64_t e = 0; e < ND; e++)
                v4p_set(&a->wq_b_scale, e, 1e-3f);
        } else {
            v4p_fill_q8_rows(&a->wq_b, &a->wq_b_scale, &r, 0.1f);
        }
    } else {
        cases_fill_view_uniform(&a->wq_b, &r, -0.1f, 0.1f);
    }
    s[0] = D, s[1] = H;
    a->wkv = v4p_input(&p->pl, "wkv", DSOPS_BF16, 2, s, 0);                       /* [D, H] bf16 */
    cases_fill_view_uniform(&a->wkv, &r, -0.1f, 0.1f);
    s[0] = D;
    a->gamma_ckv = v4p_input(&p->pl, "gamma_ckv", gkdt, 1, s, 0);                 /* [D] */
    cases_fill_view_uniform(&a->gamma_ckv, &r, -1, 1);
    v4p_rope_tables(&p->pl, tdt, T, sp->padded, &r, &a->rope_cos, &a->rope_sin);

    s[0] = T, s[1] = N, s[2] = D;
    v4p_output(&p->pl, "q", DSOPS_BF16, 3, s, sp->padded);                        /* [T, N, D] bf16 */
    s[0] = T, s[1] = D;
    v4p_output(&p->pl, "kv", DSOPS_BF16, 2, s, sp->padded);                       /* [T, D] bf16 */
    s[0] = T, s[1] = Q;
    v4p_output(&p->pl, "qr", sp->int8 ? DSOPS_INT8 : DSOPS_BF16, 2, s, sp->padded); /* [T, Q] */
    if (sp->int8) {
        s[0] = T;
        v4p_output(&p->pl, "qr_scale", DSOPS_FP32, 1, s, 0);                     /* [T] fp32 */
    }
    return p;
}
