/* hc_pre (spec §3.1; docs/CASES.md "V4": hc_pre): the named cases, their data generator and the bench
 * adapter; the adversarial problems of the tests (problems.h) at the end.
 *
 * Data (HC 4, M 24; seed 42 in docs/CASES.md, the caller's seed here):
 *   PyPTO data            x U(-1,1) bf16; hc_fn, hc_scale, hc_base U(-1,1) fp32
 *   AscendC data (wc)     x U(0,2) bf16; hc_fn U(0, 1/(4H)); hc_scale, hc_base U(0,2) fp32
 *   parameters            dsops_hc_pre_init(V4-Flash) (= vendor: norm_eps = hc_eps = 1e-6, 20 iterations);
 *                         pre present
 *
 * Every output buffer has room for one more token after its end that no view covers, so a test can plant
 * guard values there. Each token (or weight row) draws from its own generator seeded from (seed, stream,
 * row): the data do not depend on the thread count and large cases fill in parallel. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_family.h"
#include "cases.h"
#include "cases_internal.h"
#include "ref.h"


/* ---- case tables ---------------------------------------------------------------------------------- */

#define HC_PRE(nm, t, h, wc, us, who, ci_, civ)                                                                  \
    {.name = nm, .T = t, .HC = 4, .H = h, .well_conditioned = wc, .vendor_us = us, .vendor = who, .ci = ci_,      \
     .ci_variant = civ}

static const dsops_hcpre_case hcpre_cases[] = {
    HC_PRE("v4_hc_pre_t16", 16, 4096, 0, 0, NULL, 1, NULL),
    HC_PRE("v4_hc_pre_t127", 127, 4096, 0, 0, NULL, 1, NULL),
    HC_PRE("v4_hc_pre_b64_s2", 128, 4096, 0, 70.0, "PyPTO", 1, NULL),
    HC_PRE("v4_hc_pre_wc_t192", 192, 4096, 1, 0, NULL, 1, NULL),
    HC_PRE("v4_hc_pre_wc_t192_h7168", 192, 7168, 1, 0, NULL, 1, NULL),
    HC_PRE("v4_hc_pre_wc_t8193", 8193, 4096, 1, 0, NULL, 1, NULL),
    HC_PRE("v4_hc_pre_bench_t16", 16, 4096, 1, 32.8, "AscendC", 1, NULL),
    HC_PRE("v4_hc_pre_bench_t32", 32, 4096, 1, 37.0, "AscendC", 1, NULL),
    HC_PRE("v4_hc_pre_bench_t64", 64, 4096, 1, 44.0, "AscendC", 1, NULL),
    HC_PRE("v4_hc_pre_bench_t128", 128, 4096, 1, 60.0, "AscendC", 1, NULL),
    HC_PRE("v4_hc_pre_bench_t4096", 4096, 4096, 1, 1254.9, "AscendC", 1, NULL),
    HC_PRE("v4_hc_pre_bench_t16384", 16384, 4096, 1, 4784.2, "AscendC", 1, NULL),
    HC_PRE("v4_hc_pre_bench_t65536", 65536, 4096, 1, 18545.4, "AscendC", 0, "v4_hc_pre_bench_t65536_ci"),
    /* the vendor time is for T 65536: none for the scaled-down variant */
    HC_PRE("v4_hc_pre_bench_t65536_ci", 8192, 4096, 1, 0, NULL, 1, NULL),
};

const dsops_hcpre_case *dsops_hcpre_cases(int *count) { return CASES_TABLE(hcpre_cases, count); }
const dsops_hcpre_case *dsops_hcpre_case_find(const char *name) { return CASES_FIND(hcpre_cases, name); }
void dsops_hcpre_problem_free(dsops_hcpre_problem *p) { if (p) cases_problem_release(p->buffers, p->nbuffers, p); }


enum { STREAM_HC_X = 61, STREAM_HC_FN = 62, STREAM_HC_SCALE = 63, STREAM_HC_BASE = 64 };

static void *hcpre_alloc(dsops_hcpre_problem *p, size_t bytes) { return ALLOC_OWNED(p, bytes); }

void hpre_views(dsops_hc_pre_args *a, int64_t T, int64_t HC, int64_t H, void *x, void *fn, void *scale, void *base,
                void *y, void *post, void *comb, void *pre)
{
    const int64_t M = (2 + HC) * HC;
    int64_t xs[3] = {T, HC, H}, fs[2] = {M, HC * H}, ss = 3, ys[2] = {T, H}, ps[2] = {T, HC}, cs[3] = {T, HC, HC};
    dsops_hc_pre_init(a, DSOPS_PRESET_V4_FLASH);
    a->x = dsops_tensor_make(x, DSOPS_BF16, 3, xs);
    a->hc_fn = dsops_tensor_make(fn, DSOPS_FP32, 2, fs);
    a->hc_scale = dsops_tensor_make(scale, DSOPS_FP32, 1, &ss);
    a->hc_base = dsops_tensor_make(base, DSOPS_FP32, 1, &M);
    a->y = dsops_tensor_make(y, DSOPS_BF16, 2, ys);
    a->post = dsops_tensor_make(post, DSOPS_FP32, 2, ps);
    a->comb = dsops_tensor_make(comb, DSOPS_FP32, 3, cs);
    if (pre)
        a->pre = dsops_tensor_make(pre, DSOPS_FP32, 2, ps);
}

dsops_hcpre_problem *dsops_hcpre_problem_make(const dsops_hcpre_case *c, uint64_t seed)
{
    if (!c || c->T < 0 || c->HC < 1 || c->H < 1 || (int64_t)c->HC * c->H > CASES_MAX_RANGE_ROW)
        return NULL;
    dsops_hcpre_problem *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->c = *c;
    const int64_t T = c->T, HC = c->HC, H = c->H, K = HC * H, M = (2 + HC) * HC;
    const size_t t1 = (size_t)T + 1; /* outputs: one spare token row for guards */
    uint16_t *x = hcpre_alloc(p, sizeof(uint16_t) * (size_t)(T * K));   /* [T, HC, H] bf16 */
    float *fn = hcpre_alloc(p, sizeof(float) * (size_t)(M * K));        /* [M, HC*H] fp32 */
    float *scale = hcpre_alloc(p, sizeof(float) * 3);                   /* [3] fp32 */
    float *base = hcpre_alloc(p, sizeof(float) * (size_t)M);            /* [M] fp32 */
    uint16_t *y = hcpre_alloc(p, sizeof(uint16_t) * t1 * (size_t)H);    /* [T, H] bf16 (+ spare) */
    float *post = hcpre_alloc(p, sizeof(float) * t1 * (size_t)HC);      /* [T, HC] fp32 (+ spare) */
    float *comb = hcpre_alloc(p, sizeof(float) * t1 * (size_t)(HC * HC)); /* [T, HC, HC] fp32 (+ spare) */
    float *pre = hcpre_alloc(p, sizeof(float) * t1 * (size_t)HC);       /* [T, HC] fp32 (+ spare) */
    if (!x || !fn || !scale || !base || !y || !post || !comb || !pre) {
        dsops_hcpre_problem_free(p);
        return NULL;
    }
    if (c->well_conditioned) { /* AscendC: every mix and logit positive and moderate */
        cases_fill_range(seed, STREAM_HC_X, T, K, 0.0f, 2.0f, DSOPS_BF16, x);
        cases_fill_range(seed, STREAM_HC_FN, M, K, 0.0f, 1.0f / (4.0f * (float)H), DSOPS_FP32, fn);
        cases_fill_range(seed, STREAM_HC_SCALE, 1, 3, 0.0f, 2.0f, DSOPS_FP32, scale);
        cases_fill_range(seed, STREAM_HC_BASE, 1, M, 0.0f, 2.0f, DSOPS_FP32, base);
    } else { /* PyPTO */
        cases_fill_range(seed, STREAM_HC_X, T, K, -1.0f, 1.0f, DSOPS_BF16, x);
        cases_fill_range(seed, STREAM_HC_FN, M, K, -1.0f, 1.0f, DSOPS_FP32, fn);
        cases_fill_range(seed, STREAM_HC_SCALE, 1, 3, -1.0f, 1.0f, DSOPS_FP32, scale);
        cases_fill_range(seed, STREAM_HC_BASE, 1, M, -1.0f, 1.0f, DSOPS_FP32, base);
    }

    hpre_views(&p->args, T, HC, H, x, fn, scale, base, y, post, comb, pre);
    p->flops = 2.0 * (double)T * (double)M * (double)K;
    return p;
}

/* ---- bench adapter ------------------------------------------------------------------------------- */
/* Alike in shape with the other families' adapters: bench_family.h says why each family keeps its own. */

/* hc_pre: y (1e-4 / 2^-7 / 0.005) and post (2.5e-5 / 0.005 / 0.005) against the oracle on sampled tokens
 * (bench_check_windows); pre and comb too on well-conditioned data (spec §3.1, docs/CASES.md). Every token:
 * each element of every output finite (the named cases' data give finite values everywhere, so a NaN is an
 * element the call left unwritten, e.g. the poison of tests/test_cases.c), and the spare token after each
 * output still zero (nothing written past the end). */
static dsops_status hcpre_run(dsops_context *ctx, void *p)
{
    return dsops_hc_pre(ctx, &((dsops_hcpre_problem *)p)->args);
}

/* Elements of the outputs that are not finite, plus those of the spare token after each that are not zero;
 * *which names the output of the first. */
static size_t hcpre_count_unwritten(const dsops_hc_pre_args *a, const char **which)
{
    const dsops_tensor *outs[4] = {&a->y, &a->post, &a->comb, &a->pre};
    static const char *const names[4] = {"y", "post", "comb", "pre"};
    size_t bad = 0;
    for (int o = 0; o < 4; o++) {
        const dsops_tensor *t = outs[o];
        size_t per_token = 1;
        for (int d = 1; d < t->ndim; d++)
            per_token *= (size_t)t->shape[d];
        const size_t n = t->data ? (size_t)t->shape[0] * per_token : 0, before = bad;
        for (size_t i = 0; i < n + (t->data ? per_token : 0); i++) {
            /* a bf16 value is the upper half of the fp32 one */
            const uint32_t bits = t->dtype == DSOPS_FP32 ? ((const uint32_t *)t->data)[i]
                                                         : (uint32_t)((const uint16_t *)t->data)[i] << 16;
            float v;
            memcpy(&v, &bits, 4);
            bad += i < n ? !isfinite(v) : bits != 0;
        }
        if (before == 0 && bad > 0)
            *which = names[o];
    }
    return bad;
}

static int hcpre_check(void *pv, char *why, size_t cap)
{
    const dsops_hcpre_problem *p = pv;
    const dsops_hc_pre_args *a = &p->args;
    const int64_t HC = p->c.HC, H = p->c.H;
    int64_t w0[3], wn[3];
    const int nw = bench_check_windows(p->c.T, w0, wn);
    size_t bad_y = 0, n_y = 0, bad_g = 0, n_g = 0;
    double max_y = 0, max_g = 0;
    for (int w = 0; w < nw; w++) {
        const int64_t t0 = w0[w], n = wn[w];
        uint16_t *ry = malloc((size_t)(n * H) * 2 + 2);
        float *rg = malloc((size_t)(n * (2 * HC + HC * HC)) * 4 + 4); /* post | pre | comb */
        if (!ry || !rg) {
            free(ry), free(rg);
            return bench_out_of_memory(why, cap);
        }
        dsops_hc_pre_args r = *a; /* the oracle on tokens t0 .. t0+n-1 (tokens are independent) */
        r.x.data = (uint16_t *)a->x.data + t0 * HC * H;
        r.x.shape[0] = r.y.shape[0] = r.post.shape[0] = r.pre.shape[0] = r.comb.shape[0] = n;
        r.y.data = ry, r.post.data = rg, r.pre.data = rg + n * HC, r.comb.data = rg + 2 * n * HC;
        if (!a->pre.data)
            r.pre.data = NULL;
        dsops_ref_hc_pre(&r);
        bench_count_outside((const uint16_t *)a->y.data + t0 * H, ry, DSOPS_BF16, (size_t)(n * H), 1e-4, 1.0 / 128, &bad_y,
                      &n_y, &max_y);
        bench_count_outside((const float *)a->post.data + t0 * HC, rg, DSOPS_FP32, (size_t)(n * HC), 2.5e-5, 0.005, &bad_g,
                      &n_g, &max_g);
        if (p->c.well_conditioned) {
            if (a->pre.data)
                bench_count_outside((const float *)a->pre.data + t0 * HC, rg + n * HC, DSOPS_FP32, (size_t)(n * HC), 2.5e-5,
                              0.005, &bad_g, &n_g, &max_g);
            bench_count_outside((const float *)a->comb.data + t0 * HC * HC, rg + 2 * n * HC, DSOPS_FP32,
                          (size_t)(n * HC * HC), 2.5e-5, 0.005, &bad_g, &n_g, &max_g);
        }
        free(ry), free(rg);
    }
    const char *which = "";
    const size_t unwritten = hcpre_count_unwritten(a, &which);
    snprintf(why, cap, "y: %zu of %zu outside 1e-4 / 2^-7 (max |err| %.3g); %s: %zu of %zu outside 2.5e-5 / 0.005 "
             "(max |err| %.3g); %zu output elements not finite or past the end not zero (first in %s)", bad_y, n_y,
             max_y, p->c.well_conditioned ? "post, pre, comb" : "post", bad_g, n_g, max_g, unwritten,
             unwritten ? which : "none");
    return bench_too_many(bad_y, n_y) || bench_too_many(bad_g, n_g) || unwritten != 0;
}

static void hcpre_release(void *pv)
{
    dsops_hcpre_problem *p = pv;
    dsops_prepared_destroy((dsops_prepared *)p->args.prepared); /* made by hcpre_make_problem */
    dsops_hcpre_problem_free(p);
}
static int hcpre_make_problem(const void *cv, bench_problem *bp, char *why, size_t cap)
{
    const dsops_hcpre_case *c = cv;
    dsops_hcpre_problem *p = dsops_hcpre_problem_make(c, 42);
    if (!p)
        return bench_cannot_generate(why, cap);
    dsops_prepared *prep = NULL; /* hc_fn packed once, as a layer would */
    if (dsops_hc_pre_prepare(NULL, &p->args, &prep) != DSOPS_OK) {
        snprintf(why, cap, "hc_pre_prepare: %s", dsops_last_error());
        dsops_hcpre_problem_free(p);
        return 1;
    }
    p->args.prepared = prep;
    const double K = (double)p->c.HC * p->c.H, M = (double)(2 + p->c.HC) * p->c.HC, T = p->c.T;
    /* bytes: x read, hc_fn read, y, post, comb and pre written */
    const double bytes = 2.0 * T * K + 4.0 * M * K + 2.0 * T * p->c.H + 4.0 * T * (2.0 + p->c.HC) * p->c.HC;
    *bp = (bench_problem){p, hcpre_run, hcpre_check, hcpre_release, p->flops, bytes, DSOPS_PEAK_FP32_FMA,
                          .vendor_us = c->vendor_us, .vendor = c->vendor, .args = &p->args};
    return 0;
}

static void hcpre_words(const void *cv, char *op, size_t oc, char *sh, size_t sc)
{
    const dsops_hcpre_case *c = cv;
    snprintf(op, oc, "hc_pre");
    snprintf(sh, sc, "T %d H %d", c->T, c->H);
}

static void hcpre_list_line(const void *cv, const char *not_ci)
{
    const dsops_hcpre_case *c = cv;
    printf("%-40s hc_pre                      T %-5d HC %d H %d, %s data%s\n", c->name, c->T, c->HC, c->H,
           c->well_conditioned ? "AscendC (well-conditioned)" : "PyPTO", not_ci);
}

static void hcpre_vendor(const void *cv, double *us, const char **label)
{
    *us = ((const dsops_hcpre_case *)cv)->vendor_us, *label = ((const dsops_hcpre_case *)cv)->vendor;
}

static const void *hcpre_table(int *count) { return dsops_hcpre_cases(count); }

const bench_family bench_family_hc_pre = {
    .op = "hc_pre",
    .table_word = "hc_pre",
    .cases = hcpre_table,
    .case_size = sizeof(dsops_hcpre_case),
    .ci_offset = offsetof(dsops_hcpre_case, ci),
    .make_problem = hcpre_make_problem,
    .words = hcpre_words,
    .list_line = hcpre_list_line,
    .vendor = hcpre_vendor,
};

/* ==== adversarial problems (problems.h) ====================================================================
 * Small hc_pre problems for tests/test_hc.c: any T (0 included), HC and H, well- or ill-conditioned data, an
 * all-zero token, pre absent; one guard element after every output. The test runs the oracle and the library
 * on them. */

void hc_fill_guard(void *p, dsops_dtype dt, size_t n)
{
    if (dt == DSOPS_FP32)
        cases_fill_sentinel(p, 4, (int64_t)n + 1, CASES_GUARD_F32);
    else
        cases_fill_sentinel(p, 2, (int64_t)n + 1, CASES_GUARD_BF16);
}

void hpre_make(hpre_problem *p, int64_t T, int64_t HC, int64_t H, hpre_data data, int iters, float norm_eps,
               int with_pre, int64_t zero_token, uint64_t *rng_state)
{
    rng r = {*rng_state};
    memset(p, 0, sizeof *p);
    p->T = T, p->HC = HC, p->H = H;
    const int64_t M = (2 + HC) * HC, K = HC * H;
    if (data == HPRE_DATA_WC) {
        p->x = cases_uniform_buffer(&r, DSOPS_BF16, (size_t)(T * K), 0, 2);
        p->fn = cases_uniform_buffer(&r, DSOPS_FP32, (size_t)(M * K), 0, 1.0f / (4.0f * (float)H));
        p->scale = cases_uniform_buffer(&r, DSOPS_FP32, 3, 0, 2);
        p->base = cases_uniform_buffer(&r, DSOPS_FP32, (size_t)M, 0, 2);
    } else {
        p->x = cases_uniform_buffer(&r, DSOPS_BF16, (size_t)(T * K), -1, 1);
        p->fn = cases_uniform_buffer(&r, DSOPS_FP32, (size_t)(M * K), -1, 1);
        p->scale = cases_uniform_buffer(&r, DSOPS_FP32, 3, -1, 1);
        p->base = cases_uniform_buffer(&r, DSOPS_FP32, (size_t)M, -1, 1);
    }
    if (zero_token >= 0 && zero_token < T)
        memset((uint16_t *)p->x + zero_token * K, 0, (size_t)K * 2);
    p->y = cases_xcalloc((size_t)(T * H) + 1, 2);
    p->post = cases_xcalloc((size_t)(T * HC) + 1, 4);
    p->comb = cases_xcalloc((size_t)(T * HC * HC) + 1, 4);
    p->pre = cases_xcalloc((size_t)(T * HC) + 1, 4);
    hpre_views(&p->a, T, HC, H, p->x, p->fn, p->scale, p->base, p->y, p->post, p->comb, with_pre ? p->pre : NULL);
    p->a.sinkhorn_iters = iters;
    p->a.norm_eps = norm_eps;
    *rng_state = r.s;
}

void hpre_fill_guards(hpre_problem *p)
{
    hc_fill_guard(p->y, DSOPS_BF16, (size_t)(p->T * p->H));
    hc_fill_guard(p->post, DSOPS_FP32, (size_t)(p->T * p->HC));
    hc_fill_guard(p->comb, DSOPS_FP32, (size_t)(p->T * p->HC * p->HC));
    hc_fill_guard(p->pre, DSOPS_FP32, (size_t)(p->T * p->HC));
}

void hpre_free(hpre_problem *p)
{
    free(p->x), free(p->fn), free(p->scale), free(p->base);
    free(p->y), free(p->post), free(p->comb), free(p->pre);
}
