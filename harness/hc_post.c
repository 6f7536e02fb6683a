/* hc_post (spec §3.2; docs/CASES.md "V4": hc_post): the named cases, their data generator and the bench
 * adapter.
 *
 * Data (HC 4; numpy seed 0 in docs/CASES.md): x, residual, post, comb U(-a, a) in the case's dtypes (a = 10
 * for the vendor test cases, 1 for the benchmark cases); out is a separate tensor.
 *
 * out has room for one more token after its end that no view covers, so a test can plant guard values
 * there. Each token draws from its own generator seeded from (seed, stream, row): the data do not depend on
 * the thread count and large cases fill in parallel. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_family.h"
#include "cases.h"
#include "cases_internal.h"
#include "ref.h"

#define HC_POST(nm, t, h, xdt, pdt, amp, us, who, ci_, civ)                                                      \
    {.name = nm, .T = t, .HC = 4, .H = h, .x_dtype = xdt, .post_dtype = pdt, .amplitude = amp, .vendor_us = us,   \
     .vendor = who, .ci = ci_, .ci_variant = civ}

#define BF DSOPS_BF16
#define F32 DSOPS_FP32

static const dsops_hcpost_case hcpost_cases[] = {
    /* the vendor test's [B, S, ...] and flat [T, ...] layouts are the same [T, HC, H] tensors for dsops */
    HC_POST("v4_hc_post_b4_s4_h4096_bf16", 16, 4096, BF, BF, 10.0f, 0, NULL, 1, NULL),
    HC_POST("v4_hc_post_b4_s4_h7168_bf16", 16, 7168, BF, BF, 10.0f, 0, NULL, 1, NULL),
    HC_POST("v4_hc_post_b4_s4_h4096_fp32", 16, 4096, F32, F32, 10.0f, 0, NULL, 1, NULL),
    HC_POST("v4_hc_post_b4_s4_h7168_fp32", 16, 7168, F32, F32, 10.0f, 0, NULL, 1, NULL),
    HC_POST("v4_hc_post_t16_h4096_bf16", 16, 4096, BF, BF, 10.0f, 0, NULL, 1, NULL),
    HC_POST("v4_hc_post_t16_h7168_bf16", 16, 7168, BF, BF, 10.0f, 0, NULL, 1, NULL),
    HC_POST("v4_hc_post_bench_t8", 8, 4096, BF, F32, 1.0f, 5.09, "AscendC", 1, NULL),
    HC_POST("v4_hc_post_bench_t16", 16, 4096, BF, F32, 1.0f, 5.37, "AscendC", 1, NULL),
    HC_POST("v4_hc_post_bench_t32", 32, 4096, BF, F32, 1.0f, 6.99, "AscendC", 1, NULL),
    HC_POST("v4_hc_post_bench_t64", 64, 4096, BF, F32, 1.0f, 9.16, "AscendC", 1, NULL),
    HC_POST("v4_hc_post_bench_t128", 128, 4096, BF, F32, 1.0f, 13.85, "AscendC", 1, NULL),
    HC_POST("v4_hc_post_bench_t4096", 4096, 4096, BF, F32, 1.0f, 319.86, "AscendC", 1, NULL),
    HC_POST("v4_hc_post_bench_t16384", 16384, 4096, BF, F32, 1.0f, 1264.68, "AscendC", 1, NULL),
    HC_POST("v4_hc_post_bench_t65536", 65536, 4096, BF, F32, 1.0f, 5044.53, "AscendC", 0,
            "v4_hc_post_bench_t65536_ci"),
    HC_POST("v4_hc_post_bench_t65536_ci", 16384, 4096, BF, F32, 1.0f, 0, NULL, 1, NULL),
};

#undef BF
#undef F32

const dsops_hcpost_case *dsops_hcpost_cases(int *count) { return CASES_TABLE(hcpost_cases, count); }
const dsops_hcpost_case *dsops_hcpost_case_find(const char *name) { return CASES_FIND(hcpost_cases, name); }
void dsops_hcpost_problem_free(dsops_hcpost_problem *p) { if (p) cases_problem_release(p->buffers, p->nbuffers, p); }

enum { STREAM_HC_X = 61, STREAM_HC_RES = 65, STREAM_HC_POST = 66, STREAM_HC_COMB = 67 };

static void *hcpost_alloc(dsops_hcpost_problem *p, size_t bytes) { return ALLOC_OWNED(p, bytes); }

void hpost_views(dsops_hc_post_args *a, int64_t T, int64_t HC, int64_t H, dsops_dtype xdt, dsops_dtype gdt, void *x,
                 void *res, void *post, void *comb, void *out)
{
    int64_t xs[2] = {T, H}, rs[3] = {T, HC, H}, ps[2] = {T, HC}, cs[3] = {T, HC, HC};
    memset(a, 0, sizeof *a);
    a->x = dsops_tensor_make(x, xdt, 2, xs);
    a->residual = dsops_tensor_make(res, xdt, 3, rs);
    a->post = dsops_tensor_make(post, gdt, 2, ps);
    a->comb = dsops_tensor_make(comb, gdt, 3, cs);
    a->out = dsops_tensor_make(out, xdt, 3, rs);
}

dsops_hcpost_problem *dsops_hcpost_problem_make(const dsops_hcpost_case *c, uint64_t seed)
{
    if (!c || c->T < 0 || c->HC < 1 || c->H < 1 || (int64_t)c->HC * c->H > CASES_MAX_RANGE_ROW ||
        (c->x_dtype != DSOPS_BF16 && c->x_dtype != DSOPS_FP32) ||
        (c->post_dtype != DSOPS_BF16 && c->post_dtype != DSOPS_FP32))
        return NULL;
    dsops_hcpost_problem *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->c = *c;
    const int64_t T = c->T, HC = c->HC, H = c->H;
    const size_t xe = dsops_dtype_size(c->x_dtype), pe = dsops_dtype_size(c->post_dtype);
    void *x = hcpost_alloc(p, xe * (size_t)(T * H));                   /* [T, H] */
    void *res = hcpost_alloc(p, xe * (size_t)(T * HC * H));            /* [T, HC, H] */
    void *post = hcpost_alloc(p, pe * (size_t)(T * HC));               /* [T, HC] */
    void *comb = hcpost_alloc(p, pe * (size_t)(T * HC * HC));          /* [T, HC, HC] */
    void *out = hcpost_alloc(p, xe * (size_t)((T + 1) * HC * H));      /* [T, HC, H] (+ a spare token) */
    if (!x || !res || !post || !comb || !out) {
        dsops_hcpost_problem_free(p);
        return NULL;
    }
    const float amp = c->amplitude;
    cases_fill_range(seed, STREAM_HC_X, T, H, -amp, amp, c->x_dtype, x);
    cases_fill_range(seed, STREAM_HC_RES, T, HC * H, -amp, amp, c->x_dtype, res);
    cases_fill_range(seed, STREAM_HC_POST, T, HC, -amp, amp, c->post_dtype, post);
    cases_fill_range(seed, STREAM_HC_COMB, T, HC * HC, -amp, amp, c->post_dtype, comb);

    hpost_views(&p->args, T, HC, H, c->x_dtype, c->post_dtype, x, res, post, comb, out);
    p->bytes = (double)xe * (double)(T * H + 2 * T * HC * H) + (double)pe * (double)(T * HC + T * HC * HC);
    return p;
}

/* ---- bench adapter ------------------------------------------------------------------------------- */
/* Alike in shape with the other families' adapters: bench_family.h says why each family keeps its own. */

/* hc_post: out against the oracle on sampled tokens (bench_check_windows), bf16 1e-4 / 2^-7 / 0, fp32
 * 1e-4 / 1e-5 / 0 (spec §3.2); every token of out finite (the named cases' data give finite values, so a NaN
 * is an element the call left unwritten, e.g. the poison of tests/test_cases.c) and the spare token after it
 * still zero (nothing written past the end). */
static dsops_status hcpost_run(dsops_context *ctx, void *p)
{
    return dsops_hc_post(ctx, &((dsops_hcpost_problem *)p)->args);
}

/* Elements of out that are not finite, plus those of the spare token after it that are not zero. */
static size_t hcpost_count_unwritten(const dsops_hcpost_problem *p)
{
    const int64_t row = (int64_t)p->c.HC * p->c.H, n = p->c.T * row;
    const int fp32 = p->c.x_dtype == DSOPS_FP32;
    size_t bad = 0;
    for (int64_t i = 0; i < n + row; i++) {
        const uint32_t bits = fp32 ? ((const uint32_t *)p->args.out.data)[i]
                                   : (uint32_t)((const uint16_t *)p->args.out.data)[i] << 16; /* bf16: upper half */
        float v;
        memcpy(&v, &bits, 4);
        bad += i < n ? !isfinite(v) : bits != 0;
    }
    return bad;
}

static int hcpost_check(void *pv, char *why, size_t cap)
{
    const dsops_hcpost_problem *p = pv;
    const dsops_hc_post_args *a = &p->args;
    const int64_t HC = p->c.HC, H = p->c.H, row = HC * H;
    const dsops_dtype dt = p->c.x_dtype;
    const size_t xe = dsops_dtype_size(dt), pe = dsops_dtype_size(p->c.post_dtype);
    const double rtol = dt == DSOPS_FP32 ? 1e-5 : 1.0 / 128;
    int64_t w0[3], wn[3];
    const int nw = bench_check_windows(p->c.T, w0, wn);
    size_t bad = 0, total = 0;
    double max_err = 0;
    for (int w = 0; w < nw; w++) {
        const int64_t t0 = w0[w], n = wn[w];
        void *ref = malloc((size_t)(n * row) * xe + 4);
        if (!ref)
            return bench_out_of_memory(why, cap);
        dsops_hc_post_args r = *a; /* the oracle on tokens t0 .. t0+n-1 */
        r.x.data = (char *)a->x.data + (size_t)(t0 * H) * xe;
        r.residual.data = (char *)a->residual.data + (size_t)(t0 * row) * xe;
        r.post.data = (char *)a->post.data + (size_t)(t0 * HC) * pe;
        r.comb.data = (char *)a->comb.data + (size_t)(t0 * HC * HC) * pe;
        r.out.data = ref;
        r.x.shape[0] = r.residual.shape[0] = r.post.shape[0] = r.comb.shape[0] = r.out.shape[0] = n;
        dsops_ref_hc_post(&r);
        bench_count_outside((const char *)a->out.data + (size_t)(t0 * row) * xe, ref, dt, (size_t)(n * row), 1e-4, rtol,
                      &bad, &total, &max_err);
        free(ref);
    }
    const size_t unwritten = hcpost_count_unwritten(p);
    snprintf(why, cap, "%zu of %zu out elements outside 1e-4 / %g, max |err| %.3g; %zu not finite or past the end "
             "not zero", bad, total, rtol, max_err, unwritten);
    return bad != 0 || unwritten != 0;
}

static void hcpost_release(void *p) { dsops_hcpost_problem_free(p); }
static int hcpost_make_problem(const void *cv, bench_problem *bp, char *why, size_t cap)
{
    const dsops_hcpost_case *c = cv;
    dsops_hcpost_problem *p = dsops_hcpost_problem_make(c, 0);
    if (!p)
        return bench_cannot_generate(why, cap);
    /* memory-bound: GB/s is the figure, against the memory stream (no FLOP rate) */
    *bp = (bench_problem){p, hcpost_run, hcpost_check, hcpost_release, 0.0, p->bytes, DSOPS_PEAK_BF16_DOT,
                          .unit = "mem", .no_peak = 1, .vendor_us = c->vendor_us, .vendor = c->vendor, .args = &p->args};
    return 0;
}

static void hcpost_words(const void *cv, char *op, size_t oc, char *sh, size_t sc)
{
    const dsops_hcpost_case *c = cv;
    snprintf(op, oc, "hc_post");
    snprintf(sh, sc, "T %d H %d", c->T, c->H);
}

static void hcpost_list_line(const void *cv, const char *not_ci)
{
    const dsops_hcpost_case *c = cv;
    printf("%-40s hc_post                     T %-5d HC %d H %d, x %s, post %s%s\n", c->name, c->T, c->HC, c->H,
           dsops_dtype_name(c->x_dtype), dsops_dtype_name(c->post_dtype), not_ci);
}

static void hcpost_vendor(const void *cv, double *us, const char **label)
{
    *us = ((const dsops_hcpost_case *)cv)->vendor_us, *label = ((const dsops_hcpost_case *)cv)->vendor;
}

static const void *hcpost_table(int *count) { return dsops_hcpost_cases(count); }

const bench_family bench_family_hc_post = {
    .op = "hc_post",
    .table_word = "hc_post",
    .cases = hcpost_table,
    .case_size = sizeof(dsops_hcpost_case),
    .ci_offset = offsetof(dsops_hcpost_case, ci),
    .make_problem = hcpost_make_problem,
    .words = hcpost_words,
    .list_line = hcpost_list_line,
    .vendor = hcpost_vendor,
};

/* ==== adversarial problems (problems.h) ====================================================================
 * Small hc_post problems for tests/test_hc.c: any T (0 included), HC and H, bf16 or fp32 x / residual and
 * post / comb, values U(lo, hi) with one spare element after each input. The test supplies out (in place on a
 * copy of the residual, or a guarded buffer) and runs the oracle and the library. */

void hpost_make(hpost_problem *p, int64_t T, int64_t HC, int64_t H, dsops_dtype xdt, dsops_dtype gdt, float lo,
                float hi, uint64_t *rng_state)
{
    rng r = {*rng_state};
    memset(p, 0, sizeof *p);
    p->T = T, p->HC = HC, p->H = H;
    p->x = cases_uniform_buffer(&r, xdt, (size_t)(T * H), lo, hi);
    p->res = cases_uniform_buffer(&r, xdt, (size_t)(T * HC * H), lo, hi);
    p->post = cases_uniform_buffer(&r, gdt, (size_t)(T * HC), lo, hi);
    p->comb = cases_uniform_buffer(&r, gdt, (size_t)(T * HC * HC), lo, hi);
    hpost_views(&p->a, T, HC, H, xdt, gdt, p->x, p->res, p->post, p->comb, NULL);
    *rng_state = r.s;
}

void hpost_free(hpost_problem *p) { free(p->x), free(p->res), free(p->post), free(p->comb); }
