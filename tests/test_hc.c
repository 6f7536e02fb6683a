/* hc_pre and hc_post (spec §3.1, §3.2) against their oracles (ref/ref_hc.c), on every instruction
 * -set tier from scalar up to the detected one:
 *  - hc_pre on well-conditioned data (x U(0,2) bf16, hc_fn U(0, 1/(4H)), hc_scale, hc_base U(0,2)),
 *    comparing y 1e-4 / 2^-7 / 0.005 and post, pre, comb 2.5e-5 / 0.005 / 0.005; on ill-conditioned data
 *    (x, hc_fn, hc_scale, hc_base U(-1,1)) comparing y and post only (comb is ill-conditioned there);
 *    HC 1 - 6 / 8 / 16, H 3 / 8 / 20 / 33 / 64 / 77 / 100 / 1031 / 4096 / 4100 / 7168 (H % 16 != 0: the kernels' padded
 *    last chunk), T 0 / 1 / odd / 16 / 127, sinkhorn_iters 1 / 20, pre absent or present; with hc_fn = 0
 *    (mix exactly 0) y bitwise equal on every tier;
 *    an all-zero token with norm_eps 0 (y, pre and post NaN by IEEE, coinciding with the oracle) and with
 *    norm_eps 1e-6 (mix = 0, finite);
 *  - hc_post with bf16 and fp32 x / residual and fp32 or bf16 post / comb (bf16 output 1e-4 / 2^-7 / 0,
 *    fp32 output 1e-4 / 1e-5 / 0), exact aliasing out == residual, T = 0; HC 1 - 9, 16, 17, 20 (the
 *    kernels' register and staged paths), H 1 / 7 / 45 / 77 / 4111; every tier bitwise equal to scalar;
 *  - a guard element after every output that must stay untouched, and bitwise determinism for 1, 2 and
 *    3 threads (also on odd shapes: hc_pre T 67 HC 3 H 100, hc_post in place HC 17 H 1001, every tier);
 *  - argument validation (spec §1.6): a table of bad argument sets with the expected status and a
 *    message fragment naming the field; a rejected call leaves every byte of the fixture unchanged;
 *  - the case tables of docs/CASES.md (harness/hc_pre.c, harness/hc_post.c): a CI variant for every case
 *    outside CI, the V4 parameters in every hc_pre case. The named cases themselves run in
 *    tests/test_cases.c, against the families' checks in those files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "problems.h"
#include "ref.h"
#include "run_common.h"
#include "test_util.h"
#include "validation.h"

static dsops_context *ctx;
static tu_rng rng;

static const tu_tol Y_TOL = {1e-4, 1.0 / 128, 0.005};
static const tu_tol GATE_TOL = {2.5e-5, 0.005, 0.005};
static const tu_tol POST_BF16_TOL = {1e-4, 1.0 / 128, 0};
static const tu_tol POST_F32_TOL = {1e-4, 1e-5, 0};

/* ---- helpers ------------------------------------------------------------------------------------ */

static int guard_kept(const void *p, dsops_dtype dt, size_t n)
{
    if (dt == DSOPS_FP32) {
        uint32_t g;
        memcpy(&g, (const char *)p + 4 * n, 4);
        return g == CASES_GUARD_F32;
    }
    return ((const uint16_t *)p)[n] == CASES_GUARD_BF16;
}

/* ---- hc_pre ------------------------------------------------------------------------------------- */

/* Copies the outputs of p into fresh buffers (for comparisons after later calls). */
static void pre_snapshot(const hpre_problem *p, void **y, void **post, void **comb, void **pre)
{
    size_t ny = (size_t)(p->T * p->H) + 1, ng = (size_t)(p->T * p->HC) + 1, nc = (size_t)(p->T * p->HC * p->HC) + 1;
    *y = tu_calloc(ny, 2), *post = tu_calloc(ng, 4), *comb = tu_calloc(nc, 4), *pre = tu_calloc(ng, 4);
    memcpy(*y, p->y, ny * 2), memcpy(*post, p->post, ng * 4), memcpy(*comb, p->comb, nc * 4);
    memcpy(*pre, p->pre, ng * 4);
}

/* One hc_pre problem on every tier against the oracle. comb is compared on well-conditioned data only,
 * and never for the token zero_token when norm_eps = 0 (its Sinkhorn runs on NaN: unspecified). */
static void pre_case(int64_t T, int64_t HC, int64_t H, hpre_data data, int iters, float norm_eps, int with_pre,
                     int64_t zero_token)
{
    char label[160];
    snprintf(label, sizeof label, "hc_pre %s T %lld HC %lld H %lld iters %d norm_eps %g%s%s",
             data == HPRE_DATA_WC ? "wc" : "ill", (long long)T, (long long)HC, (long long)H, iters, (double)norm_eps,
             with_pre ? " pre" : "", zero_token >= 0 ? " zero token" : "");
    if (!tu_selected(label))
        return;
    if (tu_quick() && T * HC * H > 16 * 4 * 4096)
        return;
    hpre_problem p;
    hpre_make(&p, T, HC, H, data, iters, norm_eps, with_pre, zero_token, &rng.s);
    hpre_fill_guards(&p);
    dsops_ref_hc_pre(&p.a);
    void *ry, *rpost, *rcomb, *rpre;
    pre_snapshot(&p, &ry, &rpost, &rcomb, &rpre);
    const size_t ny = (size_t)(T * H), ng = (size_t)(T * HC), nc = (size_t)(T * HC * HC);
    const int nan_token = zero_token >= 0 && norm_eps == 0.0f;
    if (nan_token) /* the formula gives 0 / 0 = NaN */
        tu_check(isnan(((float *)rpost)[zero_token * HC]) && isnan(tu_f32(((uint16_t *)ry)[zero_token * H])),
                 "%s: the oracle's zero token is not NaN", label);
    for (int isa = DSOPS_ISA_SCALAR; isa <= (int)dsops_isa_detected(); isa++) {
        dsops_context_set_isa(ctx, (dsops_isa)isa);
        char l2[220];
        snprintf(l2, sizeof l2, "%s [%s]", label, dsops_isa_name((dsops_isa)isa));
        hpre_fill_guards(&p);
        dsops_status st = dsops_hc_pre(ctx, &p.a);
        if (!tu_check(st == DSOPS_OK, "%s: %s (%s)", l2, dsops_status_name(st), dsops_last_error()))
            continue;
        char l3[260];
        snprintf(l3, sizeof l3, "%s y", l2);
        rc_compare_dense(l3, p.y, ry, DSOPS_BF16, ny, Y_TOL);
        snprintf(l3, sizeof l3, "%s post", l2);
        rc_compare_dense(l3, p.post, rpost, DSOPS_FP32, ng, GATE_TOL);
        if (with_pre) {
            snprintf(l3, sizeof l3, "%s pre", l2);
            rc_compare_dense(l3, p.pre, rpre, DSOPS_FP32, ng, GATE_TOL);
        } else {
            size_t kept = 0;
            for (size_t i = 0; i <= ng; i++)
                kept += ((uint32_t *)p.pre)[i] == CASES_GUARD_F32;
            tu_check(kept == ng + 1, "%s: pre absent, yet its buffer was written", l2);
        }
        if (data == HPRE_DATA_WC) {
            snprintf(l3, sizeof l3, "%s comb", l2);
            if (nan_token) {
                size_t per = (size_t)(HC * HC), z = (size_t)zero_token * per;
                float *o = rc_widen(p.comb, DSOPS_FP32, nc), *r = rc_widen(rcomb, DSOPS_FP32, nc);
                memmove(o + z, o + z + per, (nc - z - per) * 4); /* drop the NaN token */
                memmove(r + z, r + z + per, (nc - z - per) * 4);
                tu_compare_close(l3, o, r, nc - per, GATE_TOL, NULL);
                free(o), free(r);
            } else {
                rc_compare_dense(l3, p.comb, rcomb, DSOPS_FP32, nc, GATE_TOL);
            }
        } else {
            /* ill-conditioned: comb is not compared, but every value must be written */
            int ok = 1;
            for (size_t i = 0; i < nc; i++)
                ok &= ((uint32_t *)p.comb)[i] != CASES_GUARD_F32;
            tu_check(ok, "%s: comb not fully written", l2);
        }
        tu_check(guard_kept(p.y, DSOPS_BF16, ny) && guard_kept(p.post, DSOPS_FP32, ng) &&
                     guard_kept(p.comb, DSOPS_FP32, nc) && guard_kept(p.pre, DSOPS_FP32, ng),
                 "%s: an output was written beyond its end", l2);
        if (T == 0) {
            tu_check(((uint16_t *)p.y)[0] == CASES_GUARD_BF16 && ((uint32_t *)p.post)[0] == CASES_GUARD_F32,
                     "%s: T = 0 wrote something", l2);
        }
    }
    dsops_context_set_isa(ctx, dsops_isa_detected());
    free(ry), free(rpost), free(rcomb), free(rpre);
    hpre_free(&p);
}

/* hc_fn = 0 makes every mix exactly 0 on every tier, so pre is the same and y (the weighted sum, mul then
 * add in the scalar order) must have the same bits on every tier. */
static void pre_same_y(int64_t T, int64_t HC, int64_t H)
{
    char label[120];
    snprintf(label, sizeof label, "hc_pre hc_fn 0 T %lld HC %lld H %lld: y on every tier", (long long)T, (long long)HC,
             (long long)H);
    if (!tu_selected(label))
        return;
    hpre_problem p;
    hpre_make(&p, T, HC, H, HPRE_DATA_ILL, 20, 1e-6f, 1, -1, &rng.s);
    memset(p.fn, 0, (size_t)((2 + HC) * HC * HC * H) * 4);
    uint16_t *y0 = tu_calloc((size_t)(T * H), 2);
    for (int isa = DSOPS_ISA_SCALAR; isa <= (int)dsops_isa_detected(); isa++) {
        dsops_context_set_isa(ctx, (dsops_isa)isa);
        hpre_fill_guards(&p);
        dsops_status st = dsops_hc_pre(ctx, &p.a);
        if (!tu_check(st == DSOPS_OK, "%s [%s]: %s (%s)", label, dsops_isa_name((dsops_isa)isa), dsops_status_name(st),
                      dsops_last_error()))
            continue;
        if (isa == DSOPS_ISA_SCALAR)
            memcpy(y0, p.y, (size_t)(T * H) * 2);
        else
            tu_check(memcmp(y0, p.y, (size_t)(T * H) * 2) == 0, "%s [%s]: differs from the scalar tier", label,
                     dsops_isa_name((dsops_isa)isa));
    }
    dsops_context_set_isa(ctx, dsops_isa_detected());
    free(y0);
    hpre_free(&p);
}

static void test_hc_pre(void)
{
    /* well conditioned (AscendC data), all outputs compared */
    pre_case(16, 4, 4096, HPRE_DATA_WC, 20, 1e-6f, 1, -1);
    pre_case(127, 4, 64, HPRE_DATA_WC, 20, 1e-6f, 0, -1);
    pre_case(1, 4, 4096, HPRE_DATA_WC, 1, 1e-6f, 1, -1);
    pre_case(16, 4, 7168, HPRE_DATA_WC, 20, 1e-6f, 1, -1);
    pre_case(0, 4, 4096, HPRE_DATA_WC, 20, 1e-6f, 1, -1);
    pre_case(16, 1, 64, HPRE_DATA_WC, 20, 1e-6f, 1, -1);
    pre_case(16, 2, 64, HPRE_DATA_WC, 20, 1e-6f, 1, -1);
    pre_case(127, 3, 64, HPRE_DATA_WC, 1, 1e-6f, 1, -1);
    pre_case(16, 4, 64, HPRE_DATA_WC, 20, 0.0f, 1, 5);  /* all-zero token, norm_eps 0: NaN */
    pre_case(16, 4, 64, HPRE_DATA_WC, 20, 1e-6f, 1, 3); /* all-zero token, norm_eps > 0: mix = 0 */
    /* ill conditioned (PyPTO data), y and post compared */
    pre_case(16, 4, 4096, HPRE_DATA_ILL, 20, 1e-6f, 1, -1);
    pre_case(127, 4, 4096, HPRE_DATA_ILL, 20, 1e-6f, 0, -1);
    pre_case(1, 3, 64, HPRE_DATA_ILL, 1, 1e-6f, 1, -1);
    pre_case(16, 2, 64, HPRE_DATA_ILL, 20, 1e-6f, 1, -1);
    /* H not a multiple of 8 or 16 (the kernels' zero-padded last chunk), odd T (a token paired with
     * itself), HC 5 and 6 (M 35, 48: mix groups of 6 partly empty or exactly full), H below one chunk */
    pre_case(3, 4, 77, HPRE_DATA_WC, 20, 1e-6f, 1, -1);
    pre_case(5, 5, 100, HPRE_DATA_WC, 20, 1e-6f, 1, -1);
    pre_case(7, 6, 33, HPRE_DATA_ILL, 20, 1e-6f, 1, -1);
    pre_case(1, 2, 8, HPRE_DATA_WC, 20, 1e-6f, 1, -1);
    pre_case(9, 1, 3, HPRE_DATA_WC, 20, 1e-6f, 0, -1);
    pre_case(33, 4, 4100, HPRE_DATA_WC, 20, 1e-6f, 1, -1);
    pre_case(5, 4, 1031, HPRE_DATA_ILL, 20, 1e-6f, 1, -1);
    pre_case(3, 8, 100, HPRE_DATA_WC, 20, 1e-6f, 1, -1); /* M 80, 288: many mix groups, the shortest blocks */
    pre_case(2, 16, 20, HPRE_DATA_WC, 20, 1e-6f, 1, -1);
    pre_same_y(5, 4, 4096);
    pre_same_y(3, 3, 77);
    pre_same_y(2, 6, 9);
}

/* ---- hc_post ------------------------------------------------------------------------------------ */

static void post_case(int64_t T, int64_t HC, int64_t H, dsops_dtype xdt, dsops_dtype gdt, int alias)
{
    char label[160];
    snprintf(label, sizeof label, "hc_post T %lld HC %lld H %lld x %s post %s%s", (long long)T, (long long)HC,
             (long long)H, dsops_dtype_name(xdt), dsops_dtype_name(gdt), alias ? " out == residual" : "");
    if (!tu_selected(label))
        return;
    const size_t nr = (size_t)(T * HC * H), esz = dsops_dtype_size(xdt);
    hpost_problem p;
    hpost_make(&p, T, HC, H, xdt, gdt, -10, 10, &rng.s);
    void *out = tu_calloc(nr + 1, esz), *ref = tu_calloc(nr + 1, esz), *first = tu_calloc(nr + 1, esz);
    dsops_hc_post_args a = p.a;
    a.out.data = ref;
    hc_fill_guard(ref, xdt, nr);
    dsops_ref_hc_post(&a);
    const tu_tol tol = xdt == DSOPS_FP32 ? POST_F32_TOL : POST_BF16_TOL;
    for (int isa = DSOPS_ISA_SCALAR; isa <= (int)dsops_isa_detected(); isa++) {
        dsops_context_set_isa(ctx, (dsops_isa)isa);
        char l2[220];
        snprintf(l2, sizeof l2, "%s [%s]", label, dsops_isa_name((dsops_isa)isa));
        dsops_hc_post_args b = a;
        if (alias) {
            memcpy(out, p.res, nr * esz);
            hc_fill_guard((char *)out + nr * esz, xdt, 0); /* only the guard after the end */
            b.residual.data = out;
        } else {
            hc_fill_guard(out, xdt, nr);
        }
        b.out.data = out;
        dsops_status st = dsops_hc_post(ctx, &b);
        if (!tu_check(st == DSOPS_OK, "%s: %s (%s)", l2, dsops_status_name(st), dsops_last_error()))
            continue;
        rc_compare_dense(l2, out, ref, xdt, nr, tol);
        /* the kernels keep the scalar order without contraction: every tier gives the scalar tier's bits */
        if (isa == DSOPS_ISA_SCALAR)
            memcpy(first, out, nr * esz);
        else
            tu_check(memcmp(out, first, nr * esz) == 0, "%s: differs from the scalar tier", l2);
        tu_check(guard_kept(out, xdt, nr), "%s: out written beyond its end", l2);
        if (T == 0)
            tu_check(guard_kept(out, xdt, 0), "%s: T = 0 wrote something", l2);
    }
    dsops_context_set_isa(ctx, dsops_isa_detected());
    free(out), free(ref), free(first);
    hpost_free(&p);
}

static void test_hc_post(void)
{
    post_case(16, 4, 4096, DSOPS_BF16, DSOPS_BF16, 0);
    post_case(16, 4, 7168, DSOPS_BF16, DSOPS_BF16, 0);
    post_case(16, 4, 4096, DSOPS_FP32, DSOPS_FP32, 0);
    post_case(16, 4, 7168, DSOPS_FP32, DSOPS_FP32, 0);
    post_case(16, 4, 4096, DSOPS_BF16, DSOPS_FP32, 0);
    post_case(16, 4, 4096, DSOPS_FP32, DSOPS_BF16, 0);
    post_case(1, 3, 64, DSOPS_BF16, DSOPS_FP32, 0);
    post_case(127, 1, 64, DSOPS_FP32, DSOPS_FP32, 0);
    post_case(5, 2, 77, DSOPS_BF16, DSOPS_BF16, 0);
    post_case(0, 4, 4096, DSOPS_BF16, DSOPS_FP32, 0);
    post_case(16, 4, 4096, DSOPS_BF16, DSOPS_FP32, 1);
    post_case(16, 4, 4096, DSOPS_FP32, DSOPS_FP32, 1);
    post_case(3, 3, 64, DSOPS_BF16, DSOPS_BF16, 1);
    /* every HC of the kernels' register paths (1 - 8), the staged path beyond (9, 16, 17, 20), H not a
     * multiple of 8 or 16 and below one vector, each in place too */
    for (int64_t hc = 1; hc <= 9; hc++) {
        post_case(3, hc, 77, DSOPS_BF16, DSOPS_FP32, hc % 2);
        post_case(2, hc, 45, DSOPS_FP32, DSOPS_FP32, 1 - hc % 2);
    }
    post_case(3, 16, 100, DSOPS_BF16, DSOPS_FP32, 1);
    post_case(3, 17, 77, DSOPS_BF16, DSOPS_BF16, 1);
    post_case(2, 17, 130, DSOPS_FP32, DSOPS_FP32, 0);
    post_case(5, 20, 64, DSOPS_FP32, DSOPS_BF16, 1);
    post_case(3, 20, 1, DSOPS_BF16, DSOPS_FP32, 1);
    post_case(2, 4, 1, DSOPS_BF16, DSOPS_FP32, 0);
    post_case(2, 4, 7, DSOPS_FP32, DSOPS_FP32, 1);
    post_case(4, 4, 4111, DSOPS_BF16, DSOPS_FP32, 1);
}

/* ---- determinism -------------------------------------------------------------------------------- */

/* One determinism problem: hc_pre on pre_T tokens, then hc_post on T tokens of `dt` elements (in place when
 * asked); outputs of 1, 2 and 3 threads must be bitwise equal on every tier. */
typedef struct det_spec {
    const char *label;
    int64_t pre_T, pre_HC, pre_H;
    int pre_data;
    int64_t T, HC, H;
    dsops_dtype dt;
    int in_place;
} det_spec;

static void determinism_case(const det_spec *d)
{
    if (!tu_selected(d->label))
        return;
    static const int threads[] = {1, 2, 3};
    const size_t es = d->dt == DSOPS_FP32 ? 4 : 2, nr = (size_t)(d->T * d->HC * d->H);
    for (int isa = DSOPS_ISA_SCALAR; isa <= (int)dsops_isa_detected(); isa++) {
        dsops_context_set_isa(ctx, (dsops_isa)isa);
        hpre_problem p;
        hpre_make(&p, d->pre_T, d->pre_HC, d->pre_H, d->pre_data, 20, 1e-6f, 1, -1, &rng.s);
        void *y0 = NULL, *post0 = NULL, *comb0 = NULL, *pre0 = NULL;
        hpost_problem q;
        hpost_make(&q, d->T, d->HC, d->H, d->dt, DSOPS_FP32, -1, 1, &rng.s);
        void *out[3];
        for (int k = 0; k < 3; k++) {
            rc_set_threads(ctx, threads[k]);
            hpre_fill_guards(&p);
            dsops_status st = dsops_hc_pre(ctx, &p.a);
            tu_check(st == DSOPS_OK, "%s: hc_pre with %d threads: %s (%s)", d->label, threads[k], dsops_status_name(st),
                     dsops_last_error());
            if (k == 0)
                pre_snapshot(&p, &y0, &post0, &comb0, &pre0);
            else
                tu_check(memcmp(p.y, y0, (size_t)(p.T * p.H) * 2) == 0 &&
                             memcmp(p.post, post0, (size_t)(p.T * p.HC) * 4) == 0 &&
                             memcmp(p.comb, comb0, (size_t)(p.T * p.HC * p.HC) * 4) == 0 &&
                             memcmp(p.pre, pre0, (size_t)(p.T * p.HC) * 4) == 0,
                         "%s [%s]: hc_pre differs with %d threads", d->label, dsops_isa_name((dsops_isa)isa), threads[k]);
            out[k] = tu_calloc(nr, es);
            dsops_hc_post_args a = q.a;
            if (d->in_place)
                memcpy(out[k], q.res, nr * es), a.residual.data = out[k];
            a.out.data = out[k];
            st = dsops_hc_post(ctx, &a);
            tu_check(st == DSOPS_OK, "%s: hc_post with %d threads: %s (%s)", d->label, threads[k], dsops_status_name(st),
                     dsops_last_error());
            if (k > 0)
                tu_check(memcmp(out[k], out[0], nr * es) == 0, "%s [%s]: hc_post differs with %d threads", d->label,
                         dsops_isa_name((dsops_isa)isa), threads[k]);
        }
        for (int k = 0; k < 3; k++)
            free(out[k]);
        hpost_free(&q);
        free(y0), free(post0), free(comb0), free(pre0);
        hpre_free(&p);
    }
    dsops_context_set_isa(ctx, dsops_isa_detected());
    rc_set_threads(ctx, 2);
}

/* hc_pre with 67 tokens (groups split unevenly among threads) and hc_post bf16 with 37 tokens; then odd shapes:
 * hc_pre with T 67, HC 3, H 100 (tokens paired differently per thread count, a zero-padded last chunk), hc_post
 * in place with HC 17 (the staged path), H 1001 and enough elements to run on several threads. */
static void test_determinism(void)
{
    static const det_spec specs[] = {
        {"determinism", 67, 4, 4096, HPRE_DATA_ILL, 37, 4, 4096, DSOPS_BF16, 0},
        {"determinism odd shapes", 67, 3, 100, HPRE_DATA_WC, 37, 17, 1001, DSOPS_FP32, 1},
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        determinism_case(&specs[i]);
}

/* ---- the case tables of docs/CASES.md (the cases themselves run in tests/test_cases.c) ------------------ */

/* A full-size case outside CI (T 65536) has a CI variant in CI; every hc_pre case's problem carries the V4
 * parameters with pre present (checked on a one-token copy of the case, so that the check costs nothing). */
static void test_case_tables(void)
{
    int n;
    const dsops_hcpre_case *pc = dsops_hcpre_cases(&n);
    for (int i = 0; i < n; i++) {
        if (!pc[i].ci)
            tu_check(pc[i].ci_variant && dsops_hcpre_case_find(pc[i].ci_variant) &&
                         dsops_hcpre_case_find(pc[i].ci_variant)->ci,
                     "%s: not in CI and without a CI variant", pc[i].name);
        dsops_hcpre_case one_token = pc[i];
        one_token.T = 1;
        dsops_hcpre_problem *p = dsops_hcpre_problem_make(&one_token, tu_seed());
        const dsops_hc_pre_args *a = p ? &p->args : NULL;
        tu_check(a && a->pre.data != NULL && a->sinkhorn_iters == 20 && a->norm_eps == 1e-6f && a->hc_eps == 1e-6f,
                 "%s: the case does not carry the V4 parameters with pre present", pc[i].name);
        dsops_hcpre_problem_free(p);
    }
    const dsops_hcpost_case *oc = dsops_hcpost_cases(&n);
    for (int i = 0; i < n; i++)
        if (!oc[i].ci)
            tu_check(oc[i].ci_variant && dsops_hcpost_case_find(oc[i].ci_variant) &&
                         dsops_hcpost_case_find(oc[i].ci_variant)->ci,
                     "%s: not in CI and without a CI variant", oc[i].name);
}

/* ---- validation --------------------------------------------------------------------------------- */

/* One valid problem per operator. hc_pre: x [3, 4, 16] bf16 (HC 4, H 16, M 24), hc_fn [24, 64],
 * hc_scale [3], hc_base [24], y [3, 16], post [3, 4], comb [3, 4, 4], pre [3, 4]. hc_post: x [3, 16],
 * residual [3, 4, 16] and out [3, 4, 16] bf16 (buffers sized for fp32 views), post [3, 4] and comb
 * [3, 4, 4] fp32. */
typedef enum hc_op { OP_PRE, OP_POST } hc_op; /* the variants of the validation rows */

typedef struct fixture {
    hc_op op;                        /* the operator a validation row calls */
    _Alignas(64) uint16_t x[3 * 4 * 16];
    _Alignas(64) float fn[24 * 64];
    _Alignas(64) float scale[3];
    _Alignas(64) float base[24];
    _Alignas(64) uint16_t y[3 * 16];
    _Alignas(64) float post[3 * 4];
    _Alignas(64) float comb[3 * 4 * 4];
    _Alignas(64) float pre[3 * 4];
    dsops_hc_pre_args hp;
    _Alignas(64) float px[3 * 16];
    _Alignas(64) float pres[3 * 4 * 16];
    _Alignas(64) float ppost[3 * 4];
    _Alignas(64) float pcomb[3 * 4 * 4];
    _Alignas(64) float pout[3 * 4 * 16];
    dsops_hc_post_args ho;
} fixture;

static fixture *alloc_fixture(void)
{
    fixture *f = aligned_alloc(64, sizeof(fixture));
    if (!f)
        abort();
    memset(f, 0, sizeof *f);
    return f;
}

static fixture *make_fixture(void)
{
    fixture *f = alloc_fixture();
    tu_rng r;
    tu_rng_seed(&r, tu_seed());
    for (int i = 0; i < 3 * 4 * 16; i++)
        f->x[i] = tu_bf16(tu_rng_uniform(&r, 0, 2));
    for (int i = 0; i < 24 * 64; i++)
        f->fn[i] = tu_rng_uniform(&r, 0, 1.0f / 64);
    for (int i = 0; i < 3; i++)
        f->scale[i] = tu_rng_uniform(&r, 0, 2);
    for (int i = 0; i < 24; i++)
        f->base[i] = tu_rng_uniform(&r, 0, 2);
    for (int i = 0; i < 3 * 16; i++)
        f->y[i] = 0x7fa5;
    for (int i = 0; i < 12; i++)
        f->post[i] = f->pre[i] = -7.0f;
    for (int i = 0; i < 48; i++)
        f->comb[i] = -7.0f;
    hpre_views(&f->hp, 3, 4, 16, f->x, f->fn, f->scale, f->base, f->y, f->post, f->comb, f->pre);

    for (int i = 0; i < 3 * 16; i++) /* bf16 values at the start of the buffers (the fixture's views) */
        ((uint16_t *)f->px)[i] = tu_bf16(tu_rng_uniform(&r, -1, 1));
    for (int i = 0; i < 3 * 4 * 16; i++)
        ((uint16_t *)f->pres)[i] = tu_bf16(tu_rng_uniform(&r, -1, 1)), f->pout[i] = -7.0f;
    for (int i = 0; i < 12; i++)
        f->ppost[i] = tu_rng_uniform(&r, 0, 2);
    for (int i = 0; i < 48; i++)
        f->pcomb[i] = tu_rng_uniform(&r, 0, 1);
    hpost_views(&f->ho, 3, 4, 16, DSOPS_BF16, DSOPS_FP32, f->px, f->pres, f->ppost, f->pcomb, f->pout);
    return f;
}

/* The one-line mutations and the table below follow the layout every test_*_validation.c shares
 * (tests/validation.h): what repeats between those programs is that protocol, each row its own field. */
#define FRAG(...) snprintf(frag, VAL_FRAG_MAX, __VA_ARGS__)

/* hc_pre */
static void hp_null_x(void *problem, char *frag) { fixture *f = problem; f->hp.x.data = NULL; FRAG("x is NULL"); }
static void hp_null_fn(void *problem, char *frag) { fixture *f = problem; f->hp.hc_fn.data = NULL; FRAG("hc_fn is NULL"); }
static void hp_null_scale(void *problem, char *frag) { fixture *f = problem; f->hp.hc_scale.data = NULL; FRAG("hc_scale is NULL"); }
static void hp_null_base(void *problem, char *frag) { fixture *f = problem; f->hp.hc_base.data = NULL; FRAG("hc_base is NULL"); }
static void hp_null_y(void *problem, char *frag) { fixture *f = problem; f->hp.y.data = NULL; FRAG("y is NULL"); }
static void hp_null_post(void *problem, char *frag) { fixture *f = problem; f->hp.post.data = NULL; FRAG("post is NULL"); }
static void hp_null_comb(void *problem, char *frag) { fixture *f = problem; f->hp.comb.data = NULL; FRAG("comb is NULL"); }
static void hp_rank_x(void *problem, char *frag) { fixture *f = problem; f->hp.x.ndim = 2; FRAG("x has rank 2"); }
static void hp_rank_comb(void *problem, char *frag) { fixture *f = problem; f->hp.comb.ndim = 2; FRAG("comb has rank 2"); }
static void hp_fn_rows(void *problem, char *frag) { fixture *f = problem; f->hp.hc_fn.shape[0] = 20; FRAG("hc_fn.shape[0] = 20"); }
static void hp_fn_cols(void *problem, char *frag) { fixture *f = problem; f->hp.hc_fn.shape[1] = 16; FRAG("hc_fn.shape[1] = 16"); }
static void hp_base_len(void *problem, char *frag) { fixture *f = problem; f->hp.hc_base.shape[0] = 16; FRAG("hc_base.shape[0] = 16"); }
static void hp_scale_len(void *problem, char *frag) { fixture *f = problem; f->hp.hc_scale.shape[0] = 2; FRAG("hc_scale.shape[0] = 2"); }
static void hp_y_t(void *problem, char *frag) { fixture *f = problem; f->hp.y.shape[0] = 2; FRAG("y.shape[0] = 2"); }
static void hp_y_h(void *problem, char *frag) { fixture *f = problem; f->hp.y.shape[1] = 8; FRAG("y.shape[1] = 8"); }
static void hp_post_hc(void *problem, char *frag) { fixture *f = problem; f->hp.post.shape[1] = 3; FRAG("post.shape[1] = 3"); }
static void hp_comb_hc(void *problem, char *frag) { fixture *f = problem; f->hp.comb.shape[2] = 3; FRAG("comb.shape[2] = 3"); }
static void hp_pre_t(void *problem, char *frag) { fixture *f = problem; f->hp.pre.shape[0] = 4; FRAG("pre.shape[0] = 4"); }
static void hp_hc_zero(void *problem, char *frag)
{
    fixture *f = problem;
    f->hp.x.shape[1] = 0;
    FRAG("HC = 0");
}
static void hp_dtype_x(void *problem, char *frag) { fixture *f = problem; f->hp.x.dtype = DSOPS_FP16; FRAG("x has dtype fp16"); }
static void hp_dtype_fn(void *problem, char *frag) { fixture *f = problem; f->hp.hc_fn.dtype = DSOPS_BF16; FRAG("hc_fn has dtype bf16"); }
static void hp_dtype_y(void *problem, char *frag) { fixture *f = problem; f->hp.y.dtype = DSOPS_FP32; FRAG("y has dtype fp32"); }
static void hp_dtype_post(void *problem, char *frag) { fixture *f = problem; f->hp.post.dtype = DSOPS_BF16; FRAG("post has dtype bf16"); }
static void hp_dtype_pre(void *problem, char *frag) { fixture *f = problem; f->hp.pre.dtype = DSOPS_BF16; FRAG("pre has dtype bf16"); }
static void hp_iters0(void *problem, char *frag) { fixture *f = problem; f->hp.sinkhorn_iters = 0; FRAG("sinkhorn_iters = 0"); }
static void hp_iters_neg(void *problem, char *frag) { fixture *f = problem; f->hp.sinkhorn_iters = -3; FRAG("sinkhorn_iters = -3"); }
static void hp_neps_nan(void *problem, char *frag) { fixture *f = problem; f->hp.norm_eps = NAN; FRAG("norm_eps = nan"); }
static void hp_neps_neg(void *problem, char *frag) { fixture *f = problem; f->hp.norm_eps = -1e-6f; FRAG("norm_eps = -1e-06"); }
static void hp_heps_inf(void *problem, char *frag) { fixture *f = problem; f->hp.hc_eps = INFINITY; FRAG("hc_eps = inf"); }
static void hp_heps_nan(void *problem, char *frag) { fixture *f = problem; f->hp.hc_eps = NAN; FRAG("hc_eps = nan"); }
static void hp_alias_y_x(void *problem, char *frag) { fixture *f = problem; f->hp.y.data = f->x + 8; FRAG("y overlaps x"); }
static void hp_alias_post_comb(void *problem, char *frag) { fixture *f = problem; f->hp.post.data = f->comb + 4; FRAG("overlaps"); }
static void hp_alias_pre_post(void *problem, char *frag) { fixture *f = problem; f->hp.pre.data = f->post; FRAG("overlaps"); }
static void hp_alias_comb_fn(void *problem, char *frag) { fixture *f = problem; f->hp.comb.data = f->fn + 100; FRAG("comb overlaps hc_fn"); }

/* hc_post */
static void ho_null_x(void *problem, char *frag) { fixture *f = problem; f->ho.x.data = NULL; FRAG("x is NULL"); }
static void ho_null_res(void *problem, char *frag) { fixture *f = problem; f->ho.residual.data = NULL; FRAG("residual is NULL"); }
static void ho_null_post(void *problem, char *frag) { fixture *f = problem; f->ho.post.data = NULL; FRAG("post is NULL"); }
static void ho_null_comb(void *problem, char *frag) { fixture *f = problem; f->ho.comb.data = NULL; FRAG("comb is NULL"); }
static void ho_null_out(void *problem, char *frag) { fixture *f = problem; f->ho.out.data = NULL; FRAG("out is NULL"); }
static void ho_rank_x(void *problem, char *frag) { fixture *f = problem; f->ho.x.ndim = 3; f->ho.x.shape[2] = 1; FRAG("x has rank 3"); }
static void ho_rank_res(void *problem, char *frag) { fixture *f = problem; f->ho.residual.ndim = 2; FRAG("residual has rank 2"); }
static void ho_res_t(void *problem, char *frag) { fixture *f = problem; f->ho.residual.shape[0] = 2; FRAG("residual.shape[0] = 2"); }
static void ho_res_h(void *problem, char *frag) { fixture *f = problem; f->ho.residual.shape[2] = 8; FRAG("residual.shape[2] = 8"); }
static void ho_post_hc(void *problem, char *frag) { fixture *f = problem; f->ho.post.shape[1] = 3; FRAG("post.shape[1] = 3"); }
static void ho_comb_hc(void *problem, char *frag) { fixture *f = problem; f->ho.comb.shape[1] = 3; FRAG("comb.shape[1] = 3"); }
static void ho_out_hc(void *problem, char *frag) { fixture *f = problem; f->ho.out.shape[1] = 3; FRAG("out.shape[1] = 3"); }
static void ho_dtype_x(void *problem, char *frag) { fixture *f = problem; f->ho.x.dtype = DSOPS_FP16; FRAG("x has dtype fp16"); }
static void ho_dtype_mix(void *problem, char *frag) { fixture *f = problem; f->ho.residual.dtype = DSOPS_FP32; FRAG("residual has dtype fp32"); }
static void ho_dtype_mix2(void *problem, char *frag)
{
    fixture *f = problem;
    f->ho.x.dtype = DSOPS_FP32;
    f->ho.out.dtype = DSOPS_FP32;
    FRAG("residual has dtype bf16");
}
static void ho_dtype_out(void *problem, char *frag) { fixture *f = problem; f->ho.out.dtype = DSOPS_FP32; FRAG("out has dtype fp32"); }
static void ho_dtype_comb(void *problem, char *frag) { fixture *f = problem; f->ho.comb.dtype = DSOPS_BF16; FRAG("comb has dtype bf16"); }
static void ho_dtype_post(void *problem, char *frag) { fixture *f = problem; f->ho.post.dtype = DSOPS_INT8; FRAG("post has dtype int8"); }
static void ho_alias_shift(void *problem, char *frag) { fixture *f = problem; f->ho.out.data = (uint16_t *)f->pres + 16; FRAG("out overlaps residual"); }
static void ho_alias_stride(void *problem, char *frag)
{
    fixture *f = problem;
    f->ho.out.data = f->pres; /* same memory, different view */
    f->ho.out.stride[0] = 80;
    FRAG("out overlaps residual");
}
static void ho_alias_x(void *problem, char *frag) { fixture *f = problem; f->ho.out.data = f->px; FRAG("out overlaps x"); }
static void ho_alias_comb(void *problem, char *frag) { fixture *f = problem; f->ho.out.data = f->pcomb; FRAG("out overlaps comb"); }

#define P OP_PRE
#define Q OP_POST

static const val_bad_case bad_cases[] = {
    {"hc_pre_null_x", P, DSOPS_ERR_NULL, hp_null_x},
    {"hc_pre_null_hc_fn", P, DSOPS_ERR_NULL, hp_null_fn},
    {"hc_pre_null_hc_scale", P, DSOPS_ERR_NULL, hp_null_scale},
    {"hc_pre_null_hc_base", P, DSOPS_ERR_NULL, hp_null_base},
    {"hc_pre_null_y", P, DSOPS_ERR_NULL, hp_null_y},
    {"hc_pre_null_post", P, DSOPS_ERR_NULL, hp_null_post},
    {"hc_pre_null_comb", P, DSOPS_ERR_NULL, hp_null_comb},
    {"hc_pre_rank_x", P, DSOPS_ERR_SHAPE, hp_rank_x},
    {"hc_pre_rank_comb", P, DSOPS_ERR_SHAPE, hp_rank_comb},
    {"hc_pre_hc_fn_rows", P, DSOPS_ERR_SHAPE, hp_fn_rows},
    {"hc_pre_hc_fn_cols", P, DSOPS_ERR_SHAPE, hp_fn_cols},
    {"hc_pre_hc_base_len", P, DSOPS_ERR_SHAPE, hp_base_len},
    {"hc_pre_hc_scale_len", P, DSOPS_ERR_SHAPE, hp_scale_len},
    {"hc_pre_shape_y_t", P, DSOPS_ERR_SHAPE, hp_y_t},
    {"hc_pre_shape_y_h", P, DSOPS_ERR_SHAPE, hp_y_h},
    {"hc_pre_shape_post", P, DSOPS_ERR_SHAPE, hp_post_hc},
    {"hc_pre_shape_comb", P, DSOPS_ERR_SHAPE, hp_comb_hc},
    {"hc_pre_shape_pre", P, DSOPS_ERR_SHAPE, hp_pre_t},
    {"hc_pre_hc_zero", P, DSOPS_ERR_SHAPE, hp_hc_zero},
    {"hc_pre_dtype_x", P, DSOPS_ERR_DTYPE, hp_dtype_x},
    {"hc_pre_dtype_hc_fn", P, DSOPS_ERR_DTYPE, hp_dtype_fn},
    {"hc_pre_dtype_y", P, DSOPS_ERR_DTYPE, hp_dtype_y},
    {"hc_pre_dtype_post", P, DSOPS_ERR_DTYPE, hp_dtype_post},
    {"hc_pre_dtype_pre", P, DSOPS_ERR_DTYPE, hp_dtype_pre},
    {"hc_pre_sinkhorn_iters_zero", P, DSOPS_ERR_PARAM, hp_iters0},
    {"hc_pre_sinkhorn_iters_negative", P, DSOPS_ERR_PARAM, hp_iters_neg},
    {"hc_pre_norm_eps_nan", P, DSOPS_ERR_PARAM, hp_neps_nan},
    {"hc_pre_norm_eps_negative", P, DSOPS_ERR_PARAM, hp_neps_neg},
    {"hc_pre_hc_eps_inf", P, DSOPS_ERR_PARAM, hp_heps_inf},
    {"hc_pre_hc_eps_nan", P, DSOPS_ERR_PARAM, hp_heps_nan},
    {"hc_pre_alias_y_x", P, DSOPS_ERR_ALIAS, hp_alias_y_x},
    {"hc_pre_alias_post_comb", P, DSOPS_ERR_ALIAS, hp_alias_post_comb},
    {"hc_pre_alias_pre_post", P, DSOPS_ERR_ALIAS, hp_alias_pre_post},
    {"hc_pre_alias_comb_hc_fn", P, DSOPS_ERR_ALIAS, hp_alias_comb_fn},
    {"hc_post_null_x", Q, DSOPS_ERR_NULL, ho_null_x},
    {"hc_post_null_residual", Q, DSOPS_ERR_NULL, ho_null_res},
    {"hc_post_null_post", Q, DSOPS_ERR_NULL, ho_null_post},
    {"hc_post_null_comb", Q, DSOPS_ERR_NULL, ho_null_comb},
    {"hc_post_null_out", Q, DSOPS_ERR_NULL, ho_null_out},
    {"hc_post_rank_x", Q, DSOPS_ERR_SHAPE, ho_rank_x},
    {"hc_post_rank_residual", Q, DSOPS_ERR_SHAPE, ho_rank_res},
    {"hc_post_shape_residual_t", Q, DSOPS_ERR_SHAPE, ho_res_t},
    {"hc_post_shape_residual_h", Q, DSOPS_ERR_SHAPE, ho_res_h},
    {"hc_post_shape_post", Q, DSOPS_ERR_SHAPE, ho_post_hc},
    {"hc_post_shape_comb", Q, DSOPS_ERR_SHAPE, ho_comb_hc},
    {"hc_post_shape_out", Q, DSOPS_ERR_SHAPE, ho_out_hc},
    {"hc_post_dtype_x", Q, DSOPS_ERR_DTYPE, ho_dtype_x},
    {"hc_post_dtype_residual_fp32_x_bf16", Q, DSOPS_ERR_DTYPE, ho_dtype_mix},
    {"hc_post_dtype_residual_bf16_x_fp32", Q, DSOPS_ERR_DTYPE, ho_dtype_mix2},
    {"hc_post_dtype_out", Q, DSOPS_ERR_DTYPE, ho_dtype_out},
    {"hc_post_dtype_comb_post", Q, DSOPS_ERR_DTYPE, ho_dtype_comb},
    {"hc_post_dtype_post", Q, DSOPS_ERR_DTYPE, ho_dtype_post},
    {"hc_post_alias_partial", Q, DSOPS_ERR_ALIAS, ho_alias_shift},
    {"hc_post_alias_other_stride", Q, DSOPS_ERR_ALIAS, ho_alias_stride},
    {"hc_post_alias_x", Q, DSOPS_ERR_ALIAS, ho_alias_x},
    {"hc_post_alias_comb", Q, DSOPS_ERR_ALIAS, ho_alias_comb},
};

static void *make_problem(int variant)
{
    fixture *f = make_fixture();
    f->op = (hc_op)variant;
    return f;
}

static dsops_status call(dsops_context *c, void *problem)
{
    fixture *f = problem;
    return f->op == OP_PRE ? dsops_hc_pre(c, &f->hp) : dsops_hc_post(c, &f->ho);
}

/* The fixture is one flat block: a rejected call must leave every byte of it unchanged. */
static const val_ops hc_ops = {.make = make_problem, .free = free, .call = call, .flat_bytes = sizeof(fixture)};

/* Valid calls on the fixture: the fixture itself, pre absent, eps 0, exact aliasing out == residual; each
 * against the oracle on a copy (bitwise where every step is the oracle's literal order is not required:
 * the spec's tolerances). */
static void test_valid_fixture(void)
{
    if (!tu_selected("valid fixture"))
        return;
    for (int k = 0; k < 4; k++) {
        fixture *f = make_fixture(), *ref = alloc_fixture();
        const char *what[4] = {"as built", "pre absent", "eps 0", "out == residual"};
        if (k == 1)
            f->hp.pre.data = NULL;
        if (k == 2)
            f->hp.norm_eps = f->hp.hc_eps = 0.0f;
        if (k == 3)
            f->ho.out.data = f->pres;
        memcpy(ref, f, sizeof *f);
        /* the oracle on ref (its args point into f: redirect them) */
        dsops_hc_pre_args rp = ref->hp;
        rp.x.data = ref->x, rp.hc_fn.data = ref->fn, rp.hc_scale.data = ref->scale, rp.hc_base.data = ref->base;
        rp.y.data = ref->y, rp.post.data = ref->post, rp.comb.data = ref->comb;
        if (rp.pre.data)
            rp.pre.data = ref->pre;
        dsops_ref_hc_pre(&rp);
        dsops_hc_post_args ro = ref->ho;
        ro.x.data = ref->px, ro.residual.data = ref->pres, ro.post.data = ref->ppost, ro.comb.data = ref->pcomb;
        ro.out.data = k == 3 ? (void *)ref->pres : (void *)ref->pout;
        dsops_ref_hc_post(&ro);
        dsops_status s1 = dsops_hc_pre(ctx, &f->hp), s2 = dsops_hc_post(ctx, &f->ho);
        tu_check(s1 == DSOPS_OK && s2 == DSOPS_OK, "valid fixture %s: %s / %s (%s)", what[k], dsops_status_name(s1),
                 dsops_status_name(s2), dsops_last_error());
        char l[120];
        snprintf(l, sizeof l, "valid fixture %s: hc_pre y", what[k]);
        rc_compare_dense(l, f->y, ref->y, DSOPS_BF16, 48, Y_TOL);
        snprintf(l, sizeof l, "valid fixture %s: hc_pre post", what[k]);
        rc_compare_dense(l, f->post, ref->post, DSOPS_FP32, 12, GATE_TOL);
        snprintf(l, sizeof l, "valid fixture %s: hc_pre comb", what[k]);
        rc_compare_dense(l, f->comb, ref->comb, DSOPS_FP32, 48, GATE_TOL);
        snprintf(l, sizeof l, "valid fixture %s: hc_pre pre", what[k]);
        rc_compare_dense(l, f->pre, ref->pre, DSOPS_FP32, 12, GATE_TOL); /* absent: both keep -7 */
        snprintf(l, sizeof l, "valid fixture %s: hc_post out", what[k]);
        rc_compare_dense(l, k == 3 ? (void *)f->pres : (void *)f->pout, k == 3 ? (void *)ref->pres : (void *)ref->pout,
                   DSOPS_BF16, 3 * 4 * 16, POST_BF16_TOL);
        free(ref);
        free(f);
    }
}

/* The same init checks as the other validation programs, with hc_pre's own preset defaults. */
static void test_init(void)
{
    if (!tu_selected("init"))
        return;
    dsops_hc_pre_args a;
    for (int p = DSOPS_PRESET_V4_FLASH; p <= DSOPS_PRESET_V4_PRO; p++) {
        memset(&a, 0x5a, sizeof a);
        dsops_status st = dsops_hc_pre_init(&a, (dsops_preset)p);
        tu_check(st == DSOPS_OK && a.sinkhorn_iters == 20 && a.norm_eps == 1e-6f && a.hc_eps == 1e-6f &&
                     a.x.data == NULL && a.pre.data == NULL,
                 "init: hc_pre preset %d: %s", p, dsops_status_name(st));
    }
    tu_check(dsops_hc_pre_init(&a, DSOPS_PRESET_V32) == DSOPS_ERR_PARAM, "init: hc_pre with preset v32 accepted");
    tu_check(dsops_hc_pre_init(&a, (dsops_preset)9) == DSOPS_ERR_PARAM, "init: hc_pre with a bad preset");
    tu_check(dsops_hc_pre_init(NULL, DSOPS_PRESET_V4_FLASH) == DSOPS_ERR_NULL, "init: hc_pre NULL args");
    tu_check(dsops_hc_pre(ctx, NULL) == DSOPS_ERR_NULL && dsops_hc_post(ctx, NULL) == DSOPS_ERR_NULL,
             "a NULL args pointer is DSOPS_ERR_NULL");
}

/* ---- prepared hc_fn ------------------------------------------------------------------------------ */

/* A prepared hc_fn gives bitwise the outputs of the unprepared call on every tier, whichever tier it was
 * prepared for; one made from another hc_fn is refused (DSOPS_ERR_PARAM) with nothing written. */
static void test_prepared(void)
{
    if (!tu_selected("prepared"))
        return;
    const dsops_hcpre_case *c = dsops_hcpre_case_find("v4_hc_pre_bench_t16");
    dsops_hcpre_problem *p = c ? dsops_hcpre_problem_make(c, tu_seed()) : NULL;
    if (!tu_check(p != NULL, "prepared: cannot make v4_hc_pre_bench_t16"))
        return;
    dsops_hc_pre_args a = p->args;
    size_t ny = (size_t)c->T * (size_t)c->H, np = (size_t)c->T * (size_t)c->HC, nc = np * (size_t)c->HC;
    uint16_t *y0 = tu_calloc(ny, 2);
    float *post0 = tu_calloc(np, 4), *comb0 = tu_calloc(nc, 4), *pre0 = tu_calloc(np, 4);
    for (int isa = DSOPS_ISA_SCALAR; isa <= (int)dsops_isa_detected(); isa++) {
        dsops_context_set_isa(ctx, (dsops_isa)isa);
        a.prepared = NULL;
        tu_check(dsops_hc_pre(ctx, &a) == DSOPS_OK, "prepared: unprepared call failed: %s", dsops_last_error());
        memcpy(y0, a.y.data, ny * 2), memcpy(post0, a.post.data, np * 4);
        memcpy(comb0, a.comb.data, nc * 4), memcpy(pre0, a.pre.data, np * 4);
        for (int made = DSOPS_ISA_SCALAR; made <= (int)dsops_isa_detected(); made++) {
            dsops_context_set_isa(ctx, (dsops_isa)made);
            dsops_prepared *prep = NULL;
            tu_check(dsops_hc_pre_prepare(ctx, &a, &prep) == DSOPS_OK, "prepared: prepare failed: %s", dsops_last_error());
            dsops_context_set_isa(ctx, (dsops_isa)isa);
            a.prepared = prep;
            memset(a.y.data, 0, ny * 2), memset(a.post.data, 0, np * 4);
            memset(a.comb.data, 0, nc * 4), memset(a.pre.data, 0, np * 4);
            tu_check(dsops_hc_pre(ctx, &a) == DSOPS_OK, "prepared: call failed: %s", dsops_last_error());
            tu_check(memcmp(y0, a.y.data, ny * 2) == 0 && memcmp(post0, a.post.data, np * 4) == 0 &&
                         memcmp(comb0, a.comb.data, nc * 4) == 0 && memcmp(pre0, a.pre.data, np * 4) == 0,
                     "prepared: tier %s prepared for %s differs from the unprepared call",
                     dsops_isa_name((dsops_isa)isa), dsops_isa_name((dsops_isa)made));
            dsops_prepared_destroy(prep);
        }
    }
    dsops_context_set_isa(ctx, dsops_isa_detected());
    /* made from a copy of hc_fn (same values, another tensor): refused, nothing written */
    size_t nfn = (size_t)a.hc_fn.shape[0] * (size_t)a.hc_fn.shape[1];
    float *fn2 = tu_calloc(nfn, 4);
    memcpy(fn2, a.hc_fn.data, nfn * 4);
    dsops_hc_pre_args other = a;
    other.hc_fn.data = fn2;
    dsops_prepared *prep = NULL;
    tu_check(dsops_hc_pre_prepare(ctx, &other, &prep) == DSOPS_OK, "prepared: prepare of the copy failed");
    a.prepared = prep;
    memset(a.y.data, 0x5a, ny * 2);
    dsops_status st = dsops_hc_pre(ctx, &a);
    int untouched = 1;
    for (size_t i = 0; i < ny; i++)
        untouched &= ((uint16_t *)a.y.data)[i] == 0x5a5a;
    tu_check(st == DSOPS_ERR_PARAM && strstr(dsops_last_error(), "prepared") && untouched,
             "prepared: a prepared object of another hc_fn gave %s (%s)%s", dsops_status_name(st), dsops_last_error(),
             untouched ? "" : ", y written");
    /* prepare's own checks */
    dsops_hc_pre_args bad = a;
    bad.hc_fn.shape[0] = 23;
    dsops_prepared *none = NULL;
    st = dsops_hc_pre_prepare(ctx, &bad, &none);
    tu_check(st == DSOPS_ERR_SHAPE && none == NULL && strstr(dsops_last_error(), "hc_fn"),
             "prepared: hc_fn with M = 23 gave %s (%s)", dsops_status_name(st), dsops_last_error());
    dsops_prepared_destroy(prep);
    free(fn2), free(y0), free(post0), free(comb0), free(pre0);
    dsops_hcpre_problem_free(p);
}

/* The usual test main (tests/test_util.h): seed, one context, the sections in order, the tally. */
int main(int argc, char **argv)
{
    tu_init(argc, argv, 20251130);
    tu_rng_seed(&rng, tu_seed());
    ctx = tu_context();
    rc_set_threads(ctx, 2);
    test_init();
    val_run_bad(&hc_ops, ctx, bad_cases, VAL_COUNT(bad_cases));
    test_valid_fixture();
    test_hc_pre();
    test_hc_post();
    test_determinism();
    test_case_tables();
    test_prepared();
    dsops_context_destroy(ctx);
    return tu_finish();
}
