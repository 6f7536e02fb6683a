/* Named hc_pre and hc_post cases of docs/CASES.md ("V4": hc_pre, hc_post) and their data generators.
 *
 * hc_pre (HC 4, M 24; seed 42 in docs/CASES.md, the caller's seed here):
 *   PyPTO data            x U(-1,1) bf16; hc_fn, hc_scale, hc_base U(-1,1) fp32
 *   AscendC data (wc)     x U(0,2) bf16; hc_fn U(0, 1/(4H)); hc_scale, hc_base U(0,2) fp32
 *   parameters            dsops_hc_pre_init(V4-Flash) (= vendor: norm_eps = hc_eps = 1e-6, 20 iterations);
 *                         pre present
 * hc_post (HC 4; numpy seed 0 in docs/CASES.md): x, residual, post, comb U(-a, a) in the case's dtypes
 *   (a = 10 for the vendor test cases, 1 for the benchmark cases); out is a separate tensor.
 *
 * Every output buffer has room for one more token after its end that no view covers, so a test can plant
 * guard values there. Each token (or weight row) draws from its own generator seeded from (seed, stream,
 * row): the data do not depend on the thread count and large cases fill in parallel. */
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "cases_internal.h"

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

/* ---- generators ---------------------------------------------------------------------------------- */

enum {
    STREAM_HC_X = 61, STREAM_HC_FN = 62, STREAM_HC_SCALE = 63, STREAM_HC_BASE = 64,
    STREAM_HC_RES = 65, STREAM_HC_POST = 66, STREAM_HC_COMB = 67
};

#define HC_MAX_ROW 32768 /* longest generated row: HC * H values (128 KiB on a thread's stack) */

/* The generator of one row of one stream: the seed moved by the stream and row, then two draws so that
 * neighbouring rows start far apart. */
static rng hc_row_rng(uint64_t seed, uint64_t stream, int64_t row)
{
    rng r = {seed + stream * 0x632be59bd9b4e019ull};
    r.s ^= cases_rng_next(&r) + (uint64_t)row * 0x9e3779b97f4a7c15ull;
    cases_rng_next(&r);
    return r;
}

/* rows x cols values lo + (hi - lo) U[0, 1), stored as bf16 or fp32 (dst is [rows, cols] of dtype dt). */
static void hc_fill(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, float lo, float hi, dsops_dtype dt,
                    void *dst)
{
    const float half = 0.5f * (hi - lo);
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        float v[HC_MAX_ROW];
        rng r = hc_row_rng(seed, stream, row);
        cases_rng_uniform_pm1(&r, v, (size_t)cols); /* U[-1, 1) */
        for (int64_t k = 0; k < cols; k++) {
            const float u = lo + half * (v[k] + 1.0f);
            if (dt == DSOPS_FP32)
                ((float *)dst)[row * cols + k] = u;
            else
                ((uint16_t *)dst)[row * cols + k] = cases_bf16_bits(u);
        }
    }
}

/* ---- hc_pre -------------------------------------------------------------------------------------- */

static void *hcpre_alloc(dsops_hcpre_problem *p, size_t bytes) { return ALLOC_OWNED(p, bytes); }

dsops_hcpre_problem *dsops_hcpre_problem_make(const dsops_hcpre_case *c, uint64_t seed)
{
    if (!c || c->T < 0 || c->HC < 1 || c->H < 1 || (int64_t)c->HC * c->H > HC_MAX_ROW)
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
        hc_fill(seed, STREAM_HC_X, T, K, 0.0f, 2.0f, DSOPS_BF16, x);
        hc_fill(seed, STREAM_HC_FN, M, K, 0.0f, 1.0f / (4.0f * (float)H), DSOPS_FP32, fn);
        hc_fill(seed, STREAM_HC_SCALE, 1, 3, 0.0f, 2.0f, DSOPS_FP32, scale);
        hc_fill(seed, STREAM_HC_BASE, 1, M, 0.0f, 2.0f, DSOPS_FP32, base);
    } else { /* PyPTO */
        hc_fill(seed, STREAM_HC_X, T, K, -1.0f, 1.0f, DSOPS_BF16, x);
        hc_fill(seed, STREAM_HC_FN, M, K, -1.0f, 1.0f, DSOPS_FP32, fn);
        hc_fill(seed, STREAM_HC_SCALE, 1, 3, -1.0f, 1.0f, DSOPS_FP32, scale);
        hc_fill(seed, STREAM_HC_BASE, 1, M, -1.0f, 1.0f, DSOPS_FP32, base);
    }

    dsops_hc_pre_args *a = &p->args;
    dsops_hc_pre_init(a, DSOPS_PRESET_V4_FLASH);
    int64_t s3[3] = {T, HC, H}, s2[2] = {M, K}, s1[1] = {3};
    a->x = dsops_tensor_make(x, DSOPS_BF16, 3, s3);
    a->hc_fn = dsops_tensor_make(fn, DSOPS_FP32, 2, s2);
    a->hc_scale = dsops_tensor_make(scale, DSOPS_FP32, 1, s1);
    s1[0] = M;
    a->hc_base = dsops_tensor_make(base, DSOPS_FP32, 1, s1);
    s2[0] = T, s2[1] = H;
    a->y = dsops_tensor_make(y, DSOPS_BF16, 2, s2);
    s2[1] = HC;
    a->post = dsops_tensor_make(post, DSOPS_FP32, 2, s2);
    a->pre = dsops_tensor_make(pre, DSOPS_FP32, 2, s2);
    s3[2] = HC;
    a->comb = dsops_tensor_make(comb, DSOPS_FP32, 3, s3);
    p->flops = 2.0 * (double)T * (double)M * (double)K;
    return p;
}

/* ---- hc_post ------------------------------------------------------------------------------------- */

static void *hcpost_alloc(dsops_hcpost_problem *p, size_t bytes) { return ALLOC_OWNED(p, bytes); }

dsops_hcpost_problem *dsops_hcpost_problem_make(const dsops_hcpost_case *c, uint64_t seed)
{
    if (!c || c->T < 0 || c->HC < 1 || c->H < 1 || (int64_t)c->HC * c->H > HC_MAX_ROW ||
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
    hc_fill(seed, STREAM_HC_X, T, H, -amp, amp, c->x_dtype, x);
    hc_fill(seed, STREAM_HC_RES, T, HC * H, -amp, amp, c->x_dtype, res);
    hc_fill(seed, STREAM_HC_POST, T, HC, -amp, amp, c->post_dtype, post);
    hc_fill(seed, STREAM_HC_COMB, T, HC * HC, -amp, amp, c->post_dtype, comb);

    dsops_hc_post_args *a = &p->args;
    memset(a, 0, sizeof *a);
    int64_t s2[2] = {T, H}, s3[3] = {T, HC, H};
    a->x = dsops_tensor_make(x, c->x_dtype, 2, s2);
    a->residual = dsops_tensor_make(res, c->x_dtype, 3, s3);
    a->out = dsops_tensor_make(out, c->x_dtype, 3, s3);
    s2[1] = HC;
    a->post = dsops_tensor_make(post, c->post_dtype, 2, s2);
    s3[2] = HC;
    a->comb = dsops_tensor_make(comb, c->post_dtype, 3, s3);
    p->bytes = (double)xe * (double)(T * H + 2 * T * HC * H) + (double)pe * (double)(T * HC + T * HC * HC);
    return p;
}
