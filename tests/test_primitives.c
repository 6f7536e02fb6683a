/* Shared primitives (spec §2.3 - §2.8) against their oracles (ref/ref_prim.c):
 *  - the row-level functions of src/ops/primitives.h, which the prologs call: bitwise equal to the
 *    oracle's rows (both execute the spec's Math literally, without FMA contraction);
 *  - the exported operators on random and adversarial data with the spec's tolerances: rmsnorm
 *    1e-4 / 2^-7 / 0.005; rope_tables atol 2e-7 against fp64 cos / sin of the same fp32 angle (fp32
 *    tables), exact after bf16 rounding except at rounding ties; rope_apply exact; hadamard_matrix
 *    exact; quant_q8 q 1 / 0 / 0, scale 2.5e-5 / 0.005 / 0; cache_store bf16 rows exact, int8 1 / 0 / 0,
 *    scales 2.5e-5 / 0.005 / 0, every element not addressed bit-identical;
 *  - the named cases of docs/CASES.md: prim_q8_zero_group, prim_q8_tiny_amax, prim_q8_nonfinite,
 *    prim_rope_modes, prim_cache_store_skip_dup;
 *  - nd_to_fractal_nz / fractal_nz_to_nd (§2.11) on every dtype against the oracle and back, bytes exact;
 *  - exact aliasing (y == x), strided views with untouched padding, T = 0, and bitwise determinism for
 *    1, 2 and 3 threads.
 * Argument validation is in test_primitives_validation.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "primitives.h"
#include "ref.h"
#include "run_common.h"
#include "test_util.h"

static dsops_context *ctx;
static tu_rng rng;

/* ---- helpers ------------------------------------------------------------------------------------ */

static uint16_t *rand_bf16(size_t n, float lo, float hi)
{
    uint16_t *p = tu_calloc(n, 2);
    for (size_t i = 0; i < n; i++)
        p[i] = tu_bf16(tu_rng_uniform(&rng, lo, hi));
    return p;
}

static float *rand_f32(size_t n, float lo, float hi)
{
    float *p = tu_calloc(n, 4);
    for (size_t i = 0; i < n; i++)
        p[i] = tu_rng_uniform(&rng, lo, hi);
    return p;
}

/* float arrays equal bit for bit, except that any NaN matches any NaN; returns the first mismatch or -1 */
static int64_t first_float_diff(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) && isnan(b[i]))
            continue;
        if (memcmp(&a[i], &b[i], 4) != 0)
            return (int64_t)i;
    }
    return -1;
}

static const tu_tol RMS_TOL = {1e-4, 1.0 / 128, 0.005};
static const tu_tol Q_TOL = {1, 0, 0};
static const tu_tol SCALE_TOL = {2.5e-5, 0.005, 0};
static const tu_tol EXACT = {0, 0, 0};
static const tu_tol RMS_ROW_TOL = {0, 2e-6, 0};

/* ---- row-level functions ------------------------------------------------------------------------ */

static void test_rows(void)
{
    if (!tu_selected("rows"))
        return;
    /* widen: bf16 (every exponent, NaN payloads) and fp32 */
    {
        enum { N = 4096 };
        uint16_t h[N];
        float lib[N], ref[N];
        for (int i = 0; i < N; i++)
            h[i] = (uint16_t)(tu_rng_u64(&rng) >> 48);
        h[0] = 0x7fc1, h[1] = 0xff80, h[2] = 0x8000, h[3] = 0x0001;
        dsops_widen_row(h, DSOPS_BF16, N, lib);
        for (int i = 0; i < N; i++)
            ref[i] = dsops_ref_f32_from_bf16(h[i]);
        tu_check(memcmp(lib, ref, sizeof lib) == 0, "rows: widen_row(bf16) differs from the exact widening");
        float *f = rand_f32(N, -1e30f, 1e30f);
        dsops_widen_row(f, DSOPS_FP32, N, lib);
        tu_check(memcmp(lib, f, sizeof lib) == 0, "rows: widen_row(fp32) is not a copy");
        free(f);
    }
    /* rmsnorm / layernorm rows, with and without weights, in place */
    static const int widths[] = {1, 5, 64, 513, 1536, 7168};
    static const float epss[] = {1e-6f, 0.0f, 1e-5f};
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        int n = widths[wi];
        float *v = rand_f32((size_t)n, -3, 3), *g = rand_f32((size_t)n, 0.5f, 1.5f), *b = rand_f32((size_t)n, -1, 1);
        float *y = tu_calloc((size_t)n, 4), *r = tu_calloc((size_t)n, 4), *vin = tu_calloc((size_t)n, 4);
        for (int k = 0; k < 3; k++) {
            float eps = epss[k];
            const float *gg = k == 1 ? NULL : g;
            /* the library sums the squares in 16 partial sums and multiplies by 1 / r (spec §1.7): a few
             * ulp from the oracle's ascending sum and division, nothing more */
            dsops_rmsnorm_row(v, n, gg, eps, y);
            dsops_ref_rmsnorm_row(v, n, gg, eps, r);
            char label[96];
            snprintf(label, sizeof label, "rows: rmsnorm_row n %d eps %g%s", n, (double)eps, gg ? "" : " unweighted");
            tu_compare_close(label, y, r, (size_t)n, RMS_ROW_TOL, NULL);
            memcpy(vin, v, (size_t)n * 4);
            dsops_rmsnorm_row(vin, n, gg, eps, vin);
            tu_check(first_float_diff(vin, y, (size_t)n) < 0, "rows: rmsnorm_row n %d in place differs", n);
            int64_t d;
            const float *bb = k == 2 ? NULL : b;
            dsops_layernorm_row(v, n, gg, bb, eps, y);
            dsops_ref_layernorm_row(v, n, gg, bb, eps, r);
            d = first_float_diff(y, r, (size_t)n);
            tu_check(d < 0, "rows: layernorm_row n %d eps %g differs at %lld", n, (double)eps, (long long)d);
            memcpy(vin, v, (size_t)n * 4);
            dsops_layernorm_row(vin, n, gg, bb, eps, vin);
            tu_check(first_float_diff(vin, r, (size_t)n) < 0, "rows: layernorm_row n %d in place differs", n);
        }
        free(v), free(g), free(b), free(y), free(r), free(vin);
    }
    /* rmsnorm row: overflow of the sum of squares, zero row with eps 0, NaN */
    {
        float v[8] = {3e30f, -2e30f, 1, 0, 0, 0, 0, 0}, y[8], r[8];
        dsops_rmsnorm_row(v, 8, NULL, 1e-6f, y);
        dsops_ref_rmsnorm_row(v, 8, NULL, 1e-6f, r);
        tu_check(first_float_diff(y, r, 8) < 0 && y[0] == 0.0f, "rows: rmsnorm_row with sum(v^2) = +Inf");
        (void)r;
        float z[8] = {0};
        dsops_rmsnorm_row(z, 8, NULL, 0.0f, y);
        tu_check(isnan(y[0]) && isnan(y[7]), "rows: rmsnorm_row of zeros with eps 0 is 0/0 = NaN");
    }
    /* rope rows: general fp32 values (products not exact), every mode, both directions */
    for (int it = 0; it < 20; it++) {
        float *x = rand_f32(64, -8, 8), *c = rand_f32(64, -1, 1), *s = rand_f32(64, -1, 1);
        float y[64], r[64];
        for (int mode = 0; mode < 3; mode++)
            for (int inv = 0; inv < 2; inv++) {
                dsops_rope_row(x, c, s, (dsops_rope_mode)mode, inv, y);
                dsops_ref_rope_row(x, c, s, (dsops_rope_mode)mode, inv, r);
                int64_t d = first_float_diff(y, r, 64);
                tu_check(d < 0, "rows: rope_row mode %d inverse %d differs at %lld", mode, inv, (long long)d);
            }
        free(x), free(c), free(s);
    }
    /* Q8 groups: random magnitudes over the fp32 range, edge groups */
    static const int gsizes[] = {1, 3, 32, 128, 448};
    for (int it = 0; it < 200; it++) {
        int n = gsizes[it % 5];
        float mag = powf(10.0f, tu_rng_uniform(&rng, -36, 36));
        float *v = rand_f32((size_t)n, -mag, mag);
        if (it % 17 == 3)
            v[n / 2] = NAN;
        if (it % 23 == 5)
            v[0] = -INFINITY;
        if (it % 13 == 7)
            memset(v, 0, (size_t)n * 4);
        int8_t q[448], qr[448];
        float sc, scr;
        dsops_q8_group(v, n, q, &sc);
        dsops_ref_q8_group(v, n, qr, &scr);
        tu_check(memcmp(q, qr, (size_t)n) == 0 && first_float_diff(&sc, &scr, 1) < 0,
                 "rows: q8_group n %d (amax ~%g) differs: scale %.9g vs %.9g", n, (double)mag, (double)sc, (double)scr);
        free(v);
    }
    /* Hadamard rows against the oracle, random matrices */
    static const int ds[] = {1, 2, 16, 128};
    for (size_t di = 0; di < 4; di++) {
        int d = ds[di];
        float *v = rand_f32((size_t)d, -2, 2), *hm = rand_f32((size_t)d * d, -1, 1);
        float *y = tu_calloc((size_t)d, 4), *r = tu_calloc((size_t)d, 4);
        dsops_hadamard_row(v, d, hm, y);
        dsops_ref_hadamard_row(v, d, hm, r);
        tu_check(first_float_diff(y, r, (size_t)d) < 0, "rows: hadamard_row d %d differs from the oracle", d);
        free(v), free(hm), free(y), free(r);
    }
}

/* ---- rmsnorm ------------------------------------------------------------------------------------ */

/* One rmsnorm problem: x [T, W] with row stride W + pad, weight of `wdt` (or none), y [T, W] with row
 * stride W + pad whose padding must stay untouched. */
static void rmsnorm_case(int64_t T, int64_t W, int64_t pad, dsops_dtype wdt, float eps, float lo, float hi,
                         int in_place)
{
    char label[128];
    snprintf(label, sizeof label, "rmsnorm T %lld W %lld pad %lld weight %s eps %g%s", (long long)T, (long long)W,
             (long long)pad, wdt ? dsops_dtype_name(wdt) : "none", (double)eps, in_place ? " in place" : "");
    if (!tu_selected(label))
        return;
    int64_t ld = W + pad;
    size_t n = (size_t)(T * ld);
    uint16_t *x = rand_bf16(n, lo, hi), *y = tu_calloc(n, 2), *yr = tu_calloc(n, 2);
    if (T > 1)
        x[ld + W / 2] = tu_bf16(hi * 1e3f); /* an outlier in row 1 */
    for (size_t i = 0; i < n; i++)
        y[i] = yr[i] = 0x7fa5; /* padding sentinel */
    void *w = NULL;
    if (wdt == DSOPS_FP32)
        w = rand_f32((size_t)W, 0.25f, 2.0f);
    else if (wdt == DSOPS_BF16)
        w = rand_bf16((size_t)W, 0.25f, 2.0f);
    dsops_rmsnorm_args a;
    dsops_rmsnorm_init(&a, DSOPS_PRESET_V32);
    int64_t shape[2] = {T, W};
    a.x = dsops_tensor_make(x, DSOPS_BF16, 2, shape);
    a.x.stride[0] = ld;
    a.y = a.x;
    a.y.data = y;
    if (w) {
        int64_t ws = W;
        a.weight = dsops_tensor_make(w, wdt, 1, &ws);
    }
    a.eps = eps;
    dsops_rmsnorm_args r = a;
    r.y.data = yr;
    dsops_ref_rmsnorm(&r);
    if (in_place) {
        memcpy(y, x, n * 2);
        a.x.data = y;
    }
    dsops_status st = dsops_rmsnorm(ctx, &a);
    if (tu_check(st == DSOPS_OK, "%s: %s (%s)", label, dsops_status_name(st), dsops_last_error())) {
        rc_compare_dense(label, y, yr, DSOPS_BF16, n, RMS_TOL);
        int pad_ok = 1;
        for (int64_t t = 0; t < T && !in_place; t++)
            for (int64_t i = W; i < ld; i++)
                pad_ok &= y[t * ld + i] == 0x7fa5;
        tu_check(pad_ok, "%s: padding between rows of y was written", label);
    }
    free(x), free(y), free(yr), free(w);
}

static void test_rmsnorm(void)
{
    rmsnorm_case(3, 7168, 0, DSOPS_BF16, 1e-6f, -4, 4, 0);
    rmsnorm_case(5, 512, 16, DSOPS_FP32, 1e-6f, -1, 1, 0);
    rmsnorm_case(4, 1536, 0, DSOPS_FP32, 1e-5f, -0.01f, 0.01f, 0);
    rmsnorm_case(7, 1, 3, 0, 1e-6f, -2, 2, 0);
    rmsnorm_case(2, 63, 1, 0, 0.0f, -1e-3f, 1e-3f, 0);
    rmsnorm_case(9, 4096, 0, DSOPS_BF16, 1e-6f, -100, 100, 1);
    rmsnorm_case(3, 200, 8, DSOPS_FP32, 1e-6f, -1e30f, 1e30f, 0); /* sum of squares overflows: y = 0 */
    rmsnorm_case(2, 96, 0, DSOPS_FP32, 0.0f, 0.0f, 0.0f, 0);      /* zeros with eps 0: NaN rows */
    if (tu_selected("rmsnorm nan")) {
        uint16_t x[2 * 16], y[2 * 16], yr[2 * 16];
        for (int i = 0; i < 32; i++)
            x[i] = tu_bf16((float)(i % 7) - 3.0f);
        x[5] = TU_BF16_NAN;
        int64_t shape[2] = {2, 16};
        dsops_rmsnorm_args a;
        dsops_rmsnorm_init(&a, DSOPS_PRESET_V4_FLASH);
        a.x = dsops_tensor_make(x, DSOPS_BF16, 2, shape);
        a.y = dsops_tensor_make(y, DSOPS_BF16, 2, shape);
        dsops_rmsnorm_args r = a;
        r.y.data = yr;
        dsops_ref_rmsnorm(&r);
        tu_check(dsops_rmsnorm(ctx, &a) == DSOPS_OK, "rmsnorm nan: status");
        rc_compare_dense("rmsnorm nan row (NaN where the formula gives NaN)", y, yr, DSOPS_BF16, 32, RMS_TOL);
        tu_check(isnan(tu_f32(y[0])) && !isnan(tu_f32(y[16])), "rmsnorm nan: NaN confined to its row");
    }
}

/* ---- rope_tables -------------------------------------------------------------------------------- */

static void rope_tables_case(const char *name, dsops_preset preset, int no_yarn, dsops_rope_layout layout,
                             dsops_dtype dt, int64_t T)
{
    char label[128];
    snprintf(label, sizeof label, "rope_tables %s %s %s T %lld", name, layout == DSOPS_ROPE_PAIRS ? "pairs" : "halves",
             dsops_dtype_name(dt), (long long)T);
    if (!tu_selected(label))
        return;
    int64_t *pos = tu_calloc((size_t)T, 8);
    static const int64_t special[] = {0, 1, 2, 4095, 4096, 65535, 65536, 16777216, 16777217, 123456789,
                                      1000000, 2147483647};
    for (int64_t t = 0; t < T; t++)
        pos[t] = t < 12 ? special[t] : (t % 3 ? tu_rng_int(&rng, 0, 200000) : tu_rng_int(&rng, 0, 2147483647));
    size_t esz = dsops_dtype_size(dt);
    void *c = tu_calloc((size_t)T * 64, esz), *s = tu_calloc((size_t)T * 64, esz);
    void *cr = tu_calloc((size_t)T * 64, esz), *sr = tu_calloc((size_t)T * 64, esz);
    double *cd = tu_calloc((size_t)T * 64, 8), *sd = tu_calloc((size_t)T * 64, 8);
    dsops_rope_tables_args a;
    dsops_rope_tables_init(&a, preset);
    if (no_yarn) {
        a.yarn = 0;
        a.base = 10000.0;
    }
    a.layout = layout;
    int64_t ps = T, ts[2] = {T, 64};
    a.positions = dsops_tensor_make(pos, DSOPS_INT64, 1, &ps);
    a.cos = dsops_tensor_make(c, dt, 2, ts);
    a.sin = dsops_tensor_make(s, dt, 2, ts);
    dsops_status st = dsops_rope_tables(ctx, &a);
    if (!tu_check(st == DSOPS_OK, "%s: %s (%s)", label, dsops_status_name(st), dsops_last_error()))
        goto done;
    dsops_ref_rope_tables_f64(&a, cd, sd);
    dsops_rope_tables_args r = a;
    r.cos.data = cr;
    r.sin.data = sr;
    dsops_ref_rope_tables(&r);
    size_t n = (size_t)T * 64;
    if (dt == DSOPS_FP32) {
        /* atol 2e-7 against fp64 cos / sin of the same fp32 angle, no failure allowed */
        size_t fails = 0, worst = 0;
        double worst_err = 0;
        for (size_t i = 0; i < n; i++) {
            double e1 = fabs((double)((float *)c)[i] - cd[i]), e2 = fabs((double)((float *)s)[i] - sd[i]);
            double e = e1 > e2 ? e1 : e2;
            if (!(e <= 2e-7))
                fails++;
            if (!(e <= worst_err))
                worst_err = e, worst = i;
        }
        tu_check(fails == 0, "%s: %zu elements beyond atol 2e-7 (worst [%zu] error %.3g)", label, fails, worst, worst_err);
    } else {
        /* exact after bf16 rounding, except where the fp32 value sits on a bf16 rounding tie */
        size_t bad = 0, ties = 0, first = 0;
        for (size_t i = 0; i < 2 * n; i++) {
            uint16_t lib = i < n ? ((uint16_t *)c)[i] : ((uint16_t *)s)[i - n];
            uint16_t ref = i < n ? ((uint16_t *)cr)[i] : ((uint16_t *)sr)[i - n];
            if (lib == ref)
                continue;
            float f = (float)(i < n ? cd[i] : sd[i - n]);
            uint32_t u;
            memcpy(&u, &f, 4);
            if ((u & 0xffffu) == 0x8000u && lib == tu_bf16(f))
                ties++;
            else if (bad++ == 0)
                first = i;
        }
        tu_check(bad == 0, "%s: %zu bf16 values differ from the fp64 values rounded once (first at %zu), %zu ties",
                 label, bad, first, ties);
    }
    /* the layout: pairs c[2j] = c[2j+1], halves c[j] = c[j+32]; position 0 gives cos 1, sin 0 */
    int layout_ok = 1;
    for (int64_t t = 0; t < T; t++)
        for (int j = 0; j < 32; j++) {
            int e0 = layout == DSOPS_ROPE_PAIRS ? 2 * j : j, e1 = layout == DSOPS_ROPE_PAIRS ? 2 * j + 1 : j + 32;
            layout_ok &= memcmp((char *)c + (t * 64 + e0) * esz, (char *)c + (t * 64 + e1) * esz, esz) == 0;
            layout_ok &= memcmp((char *)s + (t * 64 + e0) * esz, (char *)s + (t * 64 + e1) * esz, esz) == 0;
        }
    tu_check(layout_ok, "%s: table entries of one angle differ", label);
    float c0 = dt == DSOPS_FP32 ? ((float *)c)[0] : tu_f32(((uint16_t *)c)[0]);
    float s0 = dt == DSOPS_FP32 ? ((float *)s)[63] : tu_f32(((uint16_t *)s)[63]);
    tu_check(c0 == 1.0f && s0 == 0.0f, "%s: position 0 gives cos %g, sin %g", label, (double)c0, (double)s0);
done:
    free(pos), free(c), free(s), free(cr), free(sr), free(cd), free(sd);
}

/* The YaRN ramp of the oracle against the model tables (§2.5.2): V3.2 lo 10, hi 23 (factor 40); V4 lo 15, hi 25 (16). */
static void test_yarn_ranges(void)
{
    if (!tu_selected("rope_tables yarn ranges"))
        return;
    static const struct { dsops_preset p; int lo, hi; float f; double base; } m[] = {
        {DSOPS_PRESET_V32, 10, 23, 40.0f, 10000.0}, {DSOPS_PRESET_V4_FLASH, 15, 25, 16.0f, 160000.0}};
    for (int k = 0; k < 2; k++) {
        dsops_rope_tables_args a;
        dsops_rope_tables_init(&a, m[k].p);
        float f[32], plain[32];
        dsops_ref_rope_freqs(&a, f);
        a.yarn = 0;
        dsops_ref_rope_freqs(&a, plain);
        int ok = 1;
        for (int j = 0; j < 32; j++) {
            if (j <= m[k].lo)
                ok &= f[j] == plain[j];
            else if (j >= m[k].hi)
                ok &= f[j] == plain[j] / m[k].f;
            else
                ok &= f[j] < plain[j] && f[j] > plain[j] / m[k].f;
            ok &= fabs(plain[j] - pow(m[k].base, -j / 32.0)) <= 1e-6 * plain[j];
        }
        tu_check(ok, "rope_tables yarn ranges: preset %d does not ramp between %d and %d", (int)m[k].p, m[k].lo, m[k].hi);
        /* the library's angle at position 1 is freq_j itself: its fp32 sine matches */
        int64_t one = 1, ts[2] = {1, 64};
        float cs[64], sn[64];
        dsops_rope_tables_init(&a, m[k].p);
        a.layout = DSOPS_ROPE_HALVES;
        a.positions = dsops_tensor_make(&one, DSOPS_INT64, 1, &one);
        a.cos = dsops_tensor_make(cs, DSOPS_FP32, 2, ts);
        a.sin = dsops_tensor_make(sn, DSOPS_FP32, 2, ts);
        tu_check(dsops_rope_tables(ctx, &a) == DSOPS_OK, "rope_tables yarn ranges: status");
        int same = 1;
        for (int j = 0; j < 32; j++)
            same &= sn[j] == (float)sin((double)f[j]);
        tu_check(same, "rope_tables yarn ranges: preset %d, library frequencies differ from the oracle's", (int)m[k].p);
    }
}

static void test_rope_tables(void)
{
    test_yarn_ranges();
    rope_tables_case("v32", DSOPS_PRESET_V32, 0, DSOPS_ROPE_HALVES, DSOPS_FP32, 300);
    rope_tables_case("v32", DSOPS_PRESET_V32, 0, DSOPS_ROPE_HALVES, DSOPS_BF16, 300);
    rope_tables_case("v4", DSOPS_PRESET_V4_PRO, 0, DSOPS_ROPE_PAIRS, DSOPS_FP32, 300);
    rope_tables_case("v4", DSOPS_PRESET_V4_FLASH, 0, DSOPS_ROPE_PAIRS, DSOPS_BF16, 300);
    rope_tables_case("plain", DSOPS_PRESET_V4_FLASH, 1, DSOPS_ROPE_PAIRS, DSOPS_FP32, 100);
    rope_tables_case("plain", DSOPS_PRESET_V32, 1, DSOPS_ROPE_HALVES, DSOPS_BF16, 100);
}

/* ---- rope_apply --------------------------------------------------------------------------------- */

/* x [T, N, W] with head stride W + pad; tables random (prim_rope_modes: element by element) of dtype
 * tdt; y dense or in place. */
/* The oracle-then-in-place steps are rmsnorm_case's in shape only: each fills its own argument struct. */
static void rope_apply_case(int64_t T, int64_t N, int64_t W, int64_t pad, int offset, dsops_dtype tdt, int in_place)
{
    for (int mode = 0; mode < 3; mode++)
        for (int inv = 0; inv < 2; inv++) {
            char label[160];
            snprintf(label, sizeof label, "prim_rope_modes rope_apply T %lld N %lld W %lld off %d mode %d inverse %d %s%s",
                     (long long)T, (long long)N, (long long)W, offset, mode, inv, dsops_dtype_name(tdt),
                     in_place ? " in place" : "");
            if (!tu_selected(label))
                continue;
            int64_t ld = W + pad;
            size_t n = (size_t)(T * N * ld);
            uint16_t *x = rand_bf16(n, -4, 4), *y = tu_calloc(n, 2), *yr = tu_calloc(n, 2);
            for (size_t i = 0; i < n; i++)
                y[i] = yr[i] = 0x7fa5;
            void *c, *s;
            if (tdt == DSOPS_BF16) {
                c = rand_bf16((size_t)T * 64, -1, 1);
                s = rand_bf16((size_t)T * 64, -1, 1);
            } else {
                c = rand_f32((size_t)T * 64, -1, 1);
                s = rand_f32((size_t)T * 64, -1, 1);
            }
            dsops_rope_apply_args a;
            memset(&a, 0, sizeof a);
            int64_t xs[3] = {T, N, W}, ts[2] = {T, 64};
            a.x = dsops_tensor_make(x, DSOPS_BF16, 3, xs);
            a.x.stride[1] = ld;
            a.x.stride[0] = N * ld;
            a.y = a.x;
            a.y.data = y;
            a.rope_cos = dsops_tensor_make(c, tdt, 2, ts);
            a.rope_sin = dsops_tensor_make(s, tdt, 2, ts);
            a.rope_offset = offset;
            a.rope_mode = (dsops_rope_mode)mode;
            a.rope_inverse = inv;
            dsops_rope_apply_args r = a;
            r.y.data = yr;
            dsops_ref_rope_apply(&r);
            if (in_place) {
                memcpy(y, x, n * 2);
                a.x.data = y;
            }
            dsops_status st = dsops_rope_apply(ctx, &a);
            if (tu_check(st == DSOPS_OK, "%s: %s (%s)", label, dsops_status_name(st), dsops_last_error())) {
                int64_t d = tu_first_difference(y, yr, n, 2);
                tu_check(d < 0, "%s: differs from the formulas at element %lld: %#x vs %#x", label, (long long)d,
                         d < 0 ? 0 : y[d], d < 0 ? 0 : yr[d]);
            }
            free(x), free(y), free(yr), free(c), free(s);
        }
}

/* With tables of one angle per pair, interleaved_in_half_out (halves tables) is the permutation
 * y[j] = y_int[2j], y[j+32] = y_int[2j+1] of interleaved (pairs tables). */
static void test_rope_permutation(void)
{
    if (!tu_selected("prim_rope_modes permutation"))
        return;
    enum { T = 5, N = 3, W = 64 };
    int64_t pos[T] = {0, 7, 300, 4097, 99999}, ps = T, ts[2] = {T, 64}, xs[3] = {T, N, W};
    uint16_t cp[T * 64], sp[T * 64], ch[T * 64], sh[T * 64], yi[T * N * W], yh[T * N * W];
    uint16_t *x = rand_bf16((size_t)T * N * W, -2, 2);
    dsops_rope_tables_args t;
    dsops_rope_tables_init(&t, DSOPS_PRESET_V4_FLASH);
    t.positions = dsops_tensor_make(pos, DSOPS_INT64, 1, &ps);
    t.cos = dsops_tensor_make(cp, DSOPS_BF16, 2, ts);
    t.sin = dsops_tensor_make(sp, DSOPS_BF16, 2, ts);
    dsops_status s1 = dsops_rope_tables(ctx, &t);
    t.layout = DSOPS_ROPE_HALVES;
    t.cos.data = ch;
    t.sin.data = sh;
    dsops_status s2 = dsops_rope_tables(ctx, &t);
    dsops_rope_apply_args a;
    memset(&a, 0, sizeof a);
    a.x = dsops_tensor_make(x, DSOPS_BF16, 3, xs);
    a.y = dsops_tensor_make(yi, DSOPS_BF16, 3, xs);
    a.rope_cos = dsops_tensor_make(cp, DSOPS_BF16, 2, ts);
    a.rope_sin = dsops_tensor_make(sp, DSOPS_BF16, 2, ts);
    a.rope_mode = DSOPS_ROPE_INTERLEAVED;
    dsops_status s3 = dsops_rope_apply(ctx, &a);
    a.y.data = yh;
    a.rope_cos.data = ch;
    a.rope_sin.data = sh;
    a.rope_mode = DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT;
    dsops_status s4 = dsops_rope_apply(ctx, &a);
    int ok = s1 == DSOPS_OK && s2 == DSOPS_OK && s3 == DSOPS_OK && s4 == DSOPS_OK;
    for (int r = 0; r < T * N && ok; r++)
        for (int j = 0; j < 32; j++)
            ok &= yh[r * 64 + j] == yi[r * 64 + 2 * j] && yh[r * 64 + j + 32] == yi[r * 64 + 2 * j + 1];
    tu_check(ok, "prim_rope_modes permutation: interleaved_in_half_out is not the permutation of interleaved");
    /* the inverse rotation undoes the rotation up to bf16 rounding */
    a.x.data = yi;
    a.y.data = yh;
    a.rope_cos.data = cp;
    a.rope_sin.data = sp;
    a.rope_mode = DSOPS_ROPE_INTERLEAVED;
    a.rope_inverse = 1;
    ok = dsops_rope_apply(ctx, &a) == DSOPS_OK;
    for (int i = 0; i < T * N * W && ok; i++)
        ok &= fabsf(tu_f32(yh[i]) - tu_f32(x[i])) <= 0.05f;
    tu_check(ok, "prim_rope_modes permutation: rope_inverse does not undo the rotation");
    free(x);
}

static void test_rope_apply(void)
{
    rope_apply_case(3, 4, 64, 0, 0, DSOPS_BF16, 0);
    rope_apply_case(2, 5, 576, 8, 512, DSOPS_BF16, 0);
    rope_apply_case(4, 3, 512, 0, 448, DSOPS_BF16, 1);
    rope_apply_case(2, 2, 200, 3, 77, DSOPS_FP32, 0);
    rope_apply_case(1, 7, 128, 0, 0, DSOPS_FP32, 1);
    test_rope_permutation();
}

/* ---- hadamard_matrix ------------------------------------------------------------------------------ */

static void test_hadamard(void)
{
    if (!tu_selected("hadamard"))
        return;
    for (int64_t d = 1; d <= 256; d *= 2)
        for (int k = 0; k < 2; k++) {
            dsops_dtype dt = k ? DSOPS_BF16 : DSOPS_FP32;
            size_t esz = dsops_dtype_size(dt);
            void *m = tu_calloc((size_t)(d * d), esz), *mr = tu_calloc((size_t)(d * d), esz);
            int64_t sh[2] = {d, d};
            dsops_tensor t = dsops_tensor_make(m, dt, 2, sh), tr = dsops_tensor_make(mr, dt, 2, sh);
            dsops_status st = dsops_hadamard_matrix(NULL, &t);
            dsops_ref_hadamard_matrix(&tr);
            tu_check(st == DSOPS_OK && memcmp(m, mr, (size_t)(d * d) * esz) == 0,
                     "hadamard d %lld %s: %s, differs from the oracle", (long long)d, dsops_dtype_name(dt),
                     dsops_status_name(st));
            if (d == 128 && dt == DSOPS_BF16)
                tu_check(tu_f32(((uint16_t *)m)[0]) == 0.08837890625f && tu_f32(((uint16_t *)m)[129]) == -0.08837890625f,
                         "hadamard d 128 bf16: entries are not +-0.08837890625");
            if (d == 128 && dt == DSOPS_FP32) {
                /* orthonormal: H H^T = I within fp32 rounding */
                const float *h = m;
                double worst = 0;
                for (int i = 0; i < d; i++)
                    for (int j = 0; j < d; j++) {
                        double acc = 0;
                        for (int q = 0; q < d; q++)
                            acc += (double)h[i * d + q] * h[j * d + q];
                        double e = fabs(acc - (i == j ? 1.0 : 0.0));
                        worst = e > worst ? e : worst;
                    }
                tu_check(worst < 1e-6, "hadamard d 128: H H^T differs from I by %g", worst);
            }
            free(m), free(mr);
        }
}

/* ---- quant_q8 ------------------------------------------------------------------------------------- */

/* Runs quant_q8 on x [R, W] (dtype xdt, row stride W + pad) and compares with the oracle. */
static void quant_run(const char *label, const void *x, dsops_dtype xdt, int64_t R, int64_t W, int64_t pad, int G,
                      int8_t *q_out, float *s_out)
{
    int64_t xs[2] = {R, W}, ss[2] = {R, W / G};
    int8_t *q = tu_calloc((size_t)(R * W), 1), *qr = tu_calloc((size_t)(R * W), 1);
    float *s = tu_calloc((size_t)(R * W / G), 4), *sr = tu_calloc((size_t)(R * W / G), 4);
    dsops_quant_q8_args a;
    memset(&a, 0, sizeof a);
    a.x = dsops_tensor_make((void *)x, xdt, 2, xs);
    a.x.stride[0] = W + pad;
    a.q = dsops_tensor_make(q, DSOPS_INT8, 2, xs);
    a.scale = dsops_tensor_make(s, DSOPS_FP32, 2, ss);
    a.group = G;
    dsops_quant_q8_args r = a;
    r.q.data = qr;
    r.scale.data = sr;
    dsops_ref_quant_q8(&r);
    dsops_status st = dsops_quant_q8(ctx, &a);
    if (tu_check(st == DSOPS_OK, "%s: %s (%s)", label, dsops_status_name(st), dsops_last_error())) {
        size_t nq = (size_t)(R * W), ns = (size_t)(R * W / G);
        float *qf = tu_calloc(nq, 4), *qrf = tu_calloc(nq, 4);
        for (size_t i = 0; i < nq; i++)
            qf[i] = q[i], qrf[i] = qr[i];
        char l2[200];
        snprintf(l2, sizeof l2, "%s q", label);
        tu_compare_close(l2, qf, qrf, nq, Q_TOL, NULL);
        snprintf(l2, sizeof l2, "%s scale", label);
        tu_compare_close(l2, s, sr, ns, SCALE_TOL, NULL);
        free(qf), free(qrf);
    }
    if (q_out)
        memcpy(q_out, q, (size_t)(R * W));
    if (s_out)
        memcpy(s_out, s, (size_t)(R * W / G) * 4);
    free(q), free(qr), free(s), free(sr);
}

static void test_quant_q8(void)
{
    static const struct { int64_t R, W; int G; int64_t pad; } shapes[] = {
        {5, 128, 128, 0}, {3, 512, 128, 4}, {4, 7, 7, 0}, {6, 12, 3, 1}, {2, 12, 1, 0}, {17, 7168, 128, 0}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int bf = 0; bf < 2; bf++) {
            int64_t R = shapes[k].R, W = shapes[k].W, ld = W + shapes[k].pad;
            char label[128];
            snprintf(label, sizeof label, "quant_q8 R %lld W %lld G %d %s", (long long)R, (long long)W, shapes[k].G,
                     bf ? "bf16" : "fp32");
            if (!tu_selected(label))
                continue;
            /* rows of very different magnitudes */
            float *xf = tu_calloc((size_t)(R * ld), 4);
            for (int64_t r = 0; r < R; r++) {
                float mag = powf(10.0f, tu_rng_uniform(&rng, -20, 20));
                for (int64_t i = 0; i < ld; i++)
                    xf[r * ld + i] = tu_rng_uniform(&rng, -mag, mag);
            }
            if (bf) {
                uint16_t *xb = tu_calloc((size_t)(R * ld), 2);
                for (int64_t i = 0; i < R * ld; i++)
                    xb[i] = tu_bf16(xf[i]);
                quant_run(label, xb, DSOPS_BF16, R, W, shapes[k].pad, shapes[k].G, NULL, NULL);
                free(xb);
            } else {
                quant_run(label, xf, DSOPS_FP32, R, W, shapes[k].pad, shapes[k].G, NULL, NULL);
            }
            free(xf);
        }

    /* docs/CASES.md edge cases, one group of 8 per row */
    if (tu_selected("prim_q8_edges")) {
        enum { R = 8, W = 16, G = 8 };
        float x[R * W];
        for (int i = 0; i < R * W; i++)
            x[i] = tu_rng_uniform(&rng, -3, 3);
        for (int i = 0; i < 8; i++) {
            x[0 * W + i] = 0.0f;                              /* prim_q8_zero_group */
            x[1 * W + i] = i % 2 ? -0.0f : 0.0f;              /* signed zeros */
            x[2 * W + i] = (i % 3 - 1) * 1e-38f;              /* prim_q8_tiny_amax: 127 / amax overflows */
            x[3 * W + i] = (i % 3 - 1) * 3e-39f;              /* subnormal amax */
            x[4 * W + i] = (float)i;
            x[5 * W + i] = (float)i;
            x[6 * W + i] = (float)i;
        }
        x[4 * W + 3] = NAN;                                   /* prim_q8_nonfinite */
        x[5 * W + 0] = INFINITY;
        x[6 * W + 7] = -INFINITY;
        /* ties: amax 127 gives sq = 1, so v * sq = v exactly */
        static const float ties[8] = {127.0f, 2.5f, 3.5f, -2.5f, -0.5f, 0.5f, 1.5f, -127.0f};
        static const int8_t tie_q[8] = {127, 2, 4, -2, 0, 0, 2, -127};
        memcpy(&x[7 * W], ties, sizeof ties);
        /* a group just above the overflow threshold: 127 / 1e-36 is finite */
        for (int i = 0; i < 8; i++)
            x[7 * W + 8 + i] = (i - 4) * 2.5e-37f;
        int8_t q[R * W];
        float s[R * W / G];
        quant_run("prim_q8_edges fp32", x, DSOPS_FP32, R, W, 0, G, q, s);
        int zero_ok = 1, nan_ok = 1;
        for (int r = 0; r < 4; r++) {
            for (int i = 0; i < 8; i++)
                zero_ok &= q[r * W + i] == 0;
            zero_ok &= s[r * 2] == 0.0f && !signbit(s[r * 2]);
        }
        for (int r = 4; r < 7; r++) {
            for (int i = 0; i < 8; i++)
                nan_ok &= q[r * W + i] == 0;
            nan_ok &= isnan(s[r * 2]);
            nan_ok &= !isnan(s[r * 2 + 1]) && s[r * 2 + 1] > 0; /* the other group of the row is unaffected */
        }
        tu_check(zero_ok, "prim_q8_zero_group / prim_q8_tiny_amax: q = 0 and scale +0 expected");
        tu_check(nan_ok, "prim_q8_nonfinite: q = 0 and scale NaN expected, neighbour group normal");
        tu_check(memcmp(&q[7 * W], tie_q, 8) == 0 && s[14] == 1.0f, "prim_q8 ties: rint must round half to even");
        int8_t qmax = 0;
        for (int i = 0; i < 8; i++)
            qmax = (int8_t)(abs(q[7 * W + 8 + i]) > qmax ? abs(q[7 * W + 8 + i]) : qmax);
        tu_check(qmax == 127 && s[15] > 0, "prim_q8 small amax above the overflow threshold quantises normally");
        /* the same through bf16 input */
        uint16_t xb[R * W];
        for (int i = 0; i < R * W; i++)
            xb[i] = tu_bf16(x[i]);
        quant_run("prim_q8_edges bf16", xb, DSOPS_BF16, R, W, 0, G, q, s);
        tu_check(q[0] == 0 && s[0] == 0.0f && s[4] == 0.0f && isnan(s[8]) && isnan(s[10]) && isnan(s[12]),
                 "prim_q8 edges with bf16 input");
    }
}

/* ---- cache_store ---------------------------------------------------------------------------------- */

typedef struct cs_setup {
    int64_t T, NB, BS, W, pad; /* pad: extra elements after each cache row (a strided view) */
    int G;                     /* 0 = W */
    dsops_dtype cdt, sdt;      /* cache dtype; scale dtype (int8) */
    int scale_rank2;
} cs_setup;

/* Builds the problem, runs the library on one copy and the oracle on another, and compares the whole
 * cache (and scale) memory: addressed rows within tolerance, everything else bit-identical. */
static void cache_store_case(const char *name, const cs_setup *c, const int64_t *idx_in)
{
    char label[200];
    snprintf(label, sizeof label, "cache_store %s T %lld NB %lld BS %lld W %lld G %d %s%s%s", name, (long long)c->T,
             (long long)c->NB, (long long)c->BS, (long long)c->W, c->G, dsops_dtype_name(c->cdt),
             c->cdt == DSOPS_INT8 ? " scale " : "", c->cdt == DSOPS_INT8 ? dsops_dtype_name(c->sdt) : "");
    if (!tu_selected(label))
        return;
    int64_t T = c->T, W = c->W, rows = c->NB * c->BS, ld = W + c->pad, G = c->G ? c->G : W, ng = W / G;
    uint16_t *src = rand_bf16((size_t)(T * W), -5, 5);
    if (T > 2)
        for (int64_t i = 0; i < G; i++)
            src[2 * W + i] = 0; /* an all-zero group */
    if (T > 3)
        src[3 * W + W - 1] = TU_BF16_NAN;
    int64_t *idx = tu_calloc((size_t)T, 8);
    if (idx_in) {
        memcpy(idx, idx_in, (size_t)T * 8);
    } else {
        /* distinct slots from a shuffled range, with some padding tokens */
        int64_t *perm = tu_calloc((size_t)rows, 8);
        for (int64_t i = 0; i < rows; i++)
            perm[i] = i;
        for (int64_t i = rows - 1; i > 0; i--) {
            int64_t j = tu_rng_int(&rng, 0, i), tmp = perm[i];
            perm[i] = perm[j], perm[j] = tmp;
        }
        for (int64_t t = 0; t < T; t++)
            idx[t] = t % 5 == 4 ? -1 - (int64_t)(t % 3) * 1000000 : perm[t];
        free(perm);
    }
    size_t esz = dsops_dtype_size(c->cdt), ssz = dsops_dtype_size(c->sdt);
    size_t cbytes = (size_t)(rows * ld) * esz, sbytes = (size_t)(rows * ng) * ssz;
    unsigned char *cache = tu_calloc(cbytes, 1), *cref = tu_calloc(cbytes, 1), *before = tu_calloc(cbytes, 1);
    unsigned char *scale = tu_calloc(sbytes, 1), *sref = tu_calloc(sbytes, 1), *sbefore = tu_calloc(sbytes, 1);
    for (size_t i = 0; i < cbytes; i++)
        before[i] = (unsigned char)(tu_rng_u64(&rng) >> 56); /* garbage, NaN patterns included */
    for (size_t i = 0; i < sbytes; i++)
        sbefore[i] = (unsigned char)(tu_rng_u64(&rng) >> 56);
    memcpy(cache, before, cbytes), memcpy(cref, before, cbytes);
    memcpy(scale, sbefore, sbytes), memcpy(sref, sbefore, sbytes);

    dsops_cache_store_args a;
    memset(&a, 0, sizeof a);
    int64_t ss[2] = {T, W}, cs3[3] = {c->NB, c->BS, W}, sc3[3] = {c->NB, c->BS, ng};
    a.src = dsops_tensor_make(src, DSOPS_BF16, 2, ss);
    a.cache_index = dsops_tensor_make(idx, DSOPS_INT64, 1, &T);
    a.cache = dsops_tensor_make(cache, c->cdt, 3, cs3);
    a.cache.stride[1] = ld;
    a.cache.stride[0] = c->BS * ld;
    if (c->cdt == DSOPS_INT8)
        a.cache_scale = dsops_tensor_make(scale, c->sdt, c->scale_rank2 ? 2 : 3, sc3);
    a.group = c->G;
    dsops_cache_store_args r = a;
    r.cache.data = cref;
    if (c->cdt == DSOPS_INT8)
        r.cache_scale.data = sref;
    dsops_ref_cache_store(&r);
    dsops_status st = dsops_cache_store(ctx, &a);
    if (!tu_check(st == DSOPS_OK, "%s: %s (%s)", label, dsops_status_name(st), dsops_last_error()))
        goto done;
    /* untouched rows and padding: bit-identical to before */
    char *touched = tu_calloc((size_t)rows, 1);
    for (int64_t t = 0; t < T; t++)
        if (idx[t] >= 0)
            touched[idx[t]] = 1;
    int64_t bad_row = -1;
    for (int64_t s = 0; s < rows && bad_row < 0; s++) {
        size_t off = (size_t)(s * ld) * esz, len = (size_t)(touched[s] ? ld - W : ld) * esz;
        if (touched[s])
            off += (size_t)W * esz; /* only the padding of an addressed row */
        if (memcmp(cache + off, before + off, len) != 0)
            bad_row = s;
        if (c->cdt == DSOPS_INT8 && !touched[s] &&
            memcmp(scale + (size_t)(s * ng) * ssz, sbefore + (size_t)(s * ng) * ssz, (size_t)ng * ssz) != 0)
            bad_row = s;
    }
    tu_check(bad_row < 0, "%s: slot %lld is not addressed but changed", label, (long long)bad_row);
    /* addressed rows against the oracle */
    size_t nt = 0;
    for (int64_t s = 0; s < rows; s++)
        nt += touched[s];
    float *o = tu_calloc(nt * (size_t)W, 4), *rf = tu_calloc(nt * (size_t)W, 4);
    float *so = tu_calloc(nt * (size_t)ng, 4), *sr = tu_calloc(nt * (size_t)ng, 4);
    size_t k = 0;
    for (int64_t s = 0; s < rows; s++) {
        if (!touched[s])
            continue;
        for (int64_t i = 0; i < W; i++) {
            size_t e = (size_t)(s * ld + i);
            if (c->cdt == DSOPS_BF16) {
                o[k * W + i] = tu_f32(((uint16_t *)cache)[e]);
                rf[k * W + i] = tu_f32(((uint16_t *)cref)[e]);
            } else {
                o[k * W + i] = ((int8_t *)cache)[e];
                rf[k * W + i] = ((int8_t *)cref)[e];
            }
        }
        for (int64_t g = 0; g < ng && c->cdt == DSOPS_INT8; g++) {
            size_t e = (size_t)(s * ng + g);
            so[k * ng + g] = c->sdt == DSOPS_FP32 ? ((float *)scale)[e] : dsops_ref_f32_from_fp16(((uint16_t *)scale)[e]);
            sr[k * ng + g] = c->sdt == DSOPS_FP32 ? ((float *)sref)[e] : dsops_ref_f32_from_fp16(((uint16_t *)sref)[e]);
        }
        k++;
    }
    char l2[240];
    snprintf(l2, sizeof l2, "%s rows", label);
    tu_compare_close(l2, o, rf, nt * (size_t)W, c->cdt == DSOPS_BF16 ? EXACT : Q_TOL, NULL);
    if (c->cdt == DSOPS_INT8) {
        snprintf(l2, sizeof l2, "%s scales", label);
        tu_compare_close(l2, so, sr, nt * (size_t)ng, SCALE_TOL, NULL);
    }
    if (c->cdt == DSOPS_BF16) /* bf16 rows are copies, bit for bit (NaN payloads too) */
        tu_check(memcmp(cache, cref, cbytes) == 0, "%s: bf16 cache differs from the oracle's bytes", label);
    free(touched), free(o), free(rf), free(so), free(sr);
done:
    free(src), free(idx), free(cache), free(cref), free(before), free(scale), free(sref), free(sbefore);
}

/* prim_cache_store_skip_dup: negative slots are skipped; a duplicate (or an out-of-range slot) is
 * ERR_INDEX with the cache and its scales bit-identical. */
static void test_cache_store_skip_dup(void)
{
    if (!tu_selected("prim_cache_store_skip_dup"))
        return;
    enum { T = 6, NB = 3, BS = 4, W = 64 };
    uint16_t *src = rand_bf16(T * W, -1, 1);
    int8_t cache[NB * BS * W], before[NB * BS * W];
    uint16_t scale[NB * BS * 2], sbefore[NB * BS * 2];
    for (size_t i = 0; i < sizeof cache; i++)
        before[i] = (int8_t)(tu_rng_u64(&rng) >> 56);
    for (size_t i = 0; i < NB * BS * 2; i++)
        sbefore[i] = (uint16_t)(tu_rng_u64(&rng) >> 48);
    int64_t idx[T];
    int64_t ss[2] = {T, W}, tn = T, cs3[3] = {NB, BS, W}, sc3[3] = {NB, BS, 2};
    dsops_cache_store_args a;
    memset(&a, 0, sizeof a);
    a.src = dsops_tensor_make(src, DSOPS_BF16, 2, ss);
    a.cache_index = dsops_tensor_make(idx, DSOPS_INT64, 1, &tn);
    a.cache = dsops_tensor_make(cache, DSOPS_INT8, 3, cs3);
    a.cache_scale = dsops_tensor_make(scale, DSOPS_FP16, 3, sc3);
    a.group = 32;
    static const int64_t bad[][T] = {
        {0, 5, -1, 7, 5, 2},            /* duplicate 5 */
        {-1, -1, 11, 3, 11, -1},        /* duplicate 11 (the last slot) */
        {1, 2, 3, 4, 12, 0},            /* 12 = NB * BS: out of range */
        {1, 2, 3, 4, INT64_MAX, 0},
    };
    static const char *frag[] = {"cache_index[4] = 5 repeats cache_index[1]", "cache_index[4] = 11 repeats cache_index[2]",
                                 "cache_index[4] = 12 is outside [0, 12)", "cache_index[4] = 9223372036854775807"};
    for (int k = 0; k < 4; k++) {
        memcpy(idx, bad[k], sizeof idx);
        memcpy(cache, before, sizeof cache);
        memcpy(scale, sbefore, sizeof scale);
        dsops_status st = dsops_cache_store(ctx, &a);
        tu_check(st == DSOPS_ERR_INDEX && strstr(dsops_last_error(), frag[k]) != NULL,
                 "prim_cache_store_skip_dup %d: %s \"%s\", expected DSOPS_ERR_INDEX \"%s\"", k, dsops_status_name(st),
                 dsops_last_error(), frag[k]);
        tu_check(memcmp(cache, before, sizeof cache) == 0 && memcmp(scale, sbefore, sizeof scale) == 0,
                 "prim_cache_store_skip_dup %d: cache changed by a rejected call", k);
    }
    /* skipped tokens: every negative value, also the most negative one */
    static const int64_t skip[T] = {-1, 3, INT64_MIN, -12, 0, -2};
    memcpy(idx, skip, sizeof idx);
    memcpy(cache, before, sizeof cache);
    memcpy(scale, sbefore, sizeof scale);
    dsops_status st = dsops_cache_store(ctx, &a);
    int ok = st == DSOPS_OK;
    for (int s = 0; s < NB * BS && ok; s++) {
        if (s == 3 || s == 0)
            continue;
        ok &= memcmp(cache + s * W, before + s * W, W) == 0 && memcmp(scale + s * 2, sbefore + s * 2, 4) == 0;
    }
    ok &= memcmp(cache + 3 * W, before + 3 * W, W) != 0;
    tu_check(ok, "prim_cache_store_skip_dup: negative slots must be skipped (%s %s)", dsops_status_name(st),
             dsops_last_error());
    free(src);
}

static void test_cache_store(void)
{
    cs_setup c = {9, 4, 8, 512, 0, 0, DSOPS_BF16, DSOPS_FP32, 0};
    cache_store_case("v4 window", &c, NULL);
    c = (cs_setup){13, 3, 5, 96, 7, 0, DSOPS_BF16, DSOPS_FP32, 0};
    cache_store_case("strided", &c, NULL);
    c = (cs_setup){11, 2, 16, 128, 0, 0, DSOPS_INT8, DSOPS_FP16, 1};
    cache_store_case("indexer keys", &c, NULL);
    c = (cs_setup){11, 2, 16, 128, 0, 128, DSOPS_INT8, DSOPS_FP16, 0};
    cache_store_case("indexer keys rank3", &c, NULL);
    c = (cs_setup){7, 3, 4, 512, 16, 128, DSOPS_INT8, DSOPS_FP32, 0};
    cache_store_case("grouped", &c, NULL);
    c = (cs_setup){5, 1, 7, 12, 0, 3, DSOPS_INT8, DSOPS_FP16, 0};
    cache_store_case("small groups", &c, NULL);
    c = (cs_setup){1, 1, 1, 1, 0, 0, DSOPS_INT8, DSOPS_FP32, 1};
    cache_store_case("one slot", &c, NULL);
    test_cache_store_skip_dup();
}

/* ---- T = 0 ------------------------------------------------------------------------------------------ */

/* FRACTAL_NZ (§2.11): every dtype, 0 to 2 leading dimensions, R and C on and off the fractal edges; nd -> nz
 * against the oracle (padding zero, written over garbage), nz -> nd back to the same bytes (NZ padding holding
 * garbage is ignored). */
static void test_fractal_nz(void)
{
    if (!tu_selected("fractal_nz"))
        return;
    static const dsops_dtype dts[] = {DSOPS_BF16, DSOPS_FP16, DSOPS_FP32, DSOPS_INT8, DSOPS_INT32, DSOPS_INT64,
                                      DSOPS_UINT8};
    static const int64_t rows[] = {1, 15, 16, 17, 40};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++)
        for (int lead = 0; lead <= 2; lead++)
            for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
                dsops_dtype dt = dts[k];
                size_t es = dsops_dtype_size(dt);
                int64_t C0 = 32 / (int64_t)es, R = rows[ri], C = (int64_t)(ri % 3 == 0 ? C0 : 3 * C0 + 5 - (int64_t)ri);
                int64_t B = lead == 0 ? 1 : (lead == 1 ? 3 : 2 * 2), C1 = (C + C0 - 1) / C0, RP = (R + 15) / 16 * 16;
                int64_t nds[5], nzs[6];
                for (int d = 0; d < lead; d++)
                    nds[d] = nzs[d] = lead == 1 ? 3 : 2;
                nds[lead] = R, nds[lead + 1] = C;
                nzs[lead] = C1, nzs[lead + 1] = RP, nzs[lead + 2] = C0;
                size_t n_nd = (size_t)(B * R * C) * es, n_nz = (size_t)(B * C1 * RP * C0) * es;
                unsigned char *nd = tu_calloc(n_nd, 1), *nz = tu_calloc(n_nz, 1), *ref = tu_calloc(n_nz, 1),
                              *back = tu_calloc(n_nd, 1);
                for (size_t i = 0; i < n_nd; i++)
                    nd[i] = (unsigned char)tu_rng_u64(&rng);
                memset(nz, 0xa5, n_nz);
                memset(back, 0x5a, n_nd);
                dsops_ref_nd_to_fractal_nz(nd, B, R, C, es, ref);
                dsops_fractal_nz_args a = {dsops_tensor_make(nd, dt, lead + 2, nds), dsops_tensor_make(nz, dt, lead + 3, nzs)};
                char label[160];
                snprintf(label, sizeof label, "fractal_nz %s lead %d R %lld C %lld", dsops_dtype_name(dt), lead,
                         (long long)R, (long long)C);
                dsops_status st = dsops_nd_to_fractal_nz(ctx, &a);
                tu_check(st == DSOPS_OK && memcmp(nz, ref, n_nz) == 0, "%s: to nz %s (%s), or differs from the oracle",
                         label, dsops_status_name(st), dsops_last_error());
                for (int64_t b = 0; b < B; b++) /* garbage in the padding rows must not come back */
                    for (int64_t c1 = 0; c1 < C1; c1++)
                        memset(nz + (size_t)(((b * C1 + c1) * RP + R) * C0) * es, 0xee, (size_t)((RP - R) * C0) * es);
                a.nd.data = back;
                st = dsops_fractal_nz_to_nd(ctx, &a);
                tu_check(st == DSOPS_OK && memcmp(back, nd, n_nd) == 0, "%s: back to nd %s (%s), or not the same bytes",
                         label, dsops_status_name(st), dsops_last_error());
                free(nd), free(nz), free(ref), free(back);
            }
}

static void test_empty(void)
{
    if (!tu_selected("empty"))
        return;
    uint16_t buf[256], keep[256];
    for (int i = 0; i < 256; i++)
        buf[i] = keep[i] = (uint16_t)(0x3f00 + i);
    int64_t s0[2] = {0, 64}, s3[3] = {0, 2, 64}, z = 0, c3[3] = {1, 2, 64};
    int64_t pos[1] = {0};
    dsops_rmsnorm_args rn;
    dsops_rmsnorm_init(&rn, DSOPS_PRESET_V32);
    rn.x = dsops_tensor_make(buf, DSOPS_BF16, 2, s0);
    rn.y = dsops_tensor_make(buf + 64, DSOPS_BF16, 2, s0);
    tu_check(dsops_rmsnorm(ctx, &rn) == DSOPS_OK, "empty rmsnorm: %s", dsops_last_error());
    dsops_rope_tables_args rt;
    dsops_rope_tables_init(&rt, DSOPS_PRESET_V32);
    rt.positions = dsops_tensor_make(pos, DSOPS_INT64, 1, &z);
    rt.cos = dsops_tensor_make(buf, DSOPS_BF16, 2, s0);
    rt.sin = dsops_tensor_make(buf + 128, DSOPS_BF16, 2, s0);
    tu_check(dsops_rope_tables(ctx, &rt) == DSOPS_OK, "empty rope_tables: %s", dsops_last_error());
    dsops_rope_apply_args ra;
    memset(&ra, 0, sizeof ra);
    ra.x = dsops_tensor_make(buf, DSOPS_BF16, 3, s3);
    ra.y = dsops_tensor_make(buf + 64, DSOPS_BF16, 3, s3);
    ra.rope_cos = dsops_tensor_make(buf + 128, DSOPS_BF16, 2, s0);
    ra.rope_sin = dsops_tensor_make(buf + 192, DSOPS_BF16, 2, s0);
    tu_check(dsops_rope_apply(ctx, &ra) == DSOPS_OK, "empty rope_apply: %s", dsops_last_error());
    dsops_quant_q8_args qa;
    memset(&qa, 0, sizeof qa);
    int64_t sq[2] = {0, 1};
    qa.x = dsops_tensor_make(buf, DSOPS_BF16, 2, s0);
    qa.q = dsops_tensor_make(buf + 64, DSOPS_INT8, 2, s0);
    qa.scale = dsops_tensor_make(buf + 128, DSOPS_FP32, 2, sq);
    qa.group = 64;
    tu_check(dsops_quant_q8(ctx, &qa) == DSOPS_OK, "empty quant_q8: %s", dsops_last_error());
    dsops_cache_store_args cs;
    memset(&cs, 0, sizeof cs);
    cs.src = dsops_tensor_make(buf, DSOPS_BF16, 2, s0);
    cs.cache_index = dsops_tensor_make(pos, DSOPS_INT64, 1, &z);
    cs.cache = dsops_tensor_make(buf + 64, DSOPS_BF16, 3, c3);
    tu_check(dsops_cache_store(ctx, &cs) == DSOPS_OK, "empty cache_store: %s", dsops_last_error());
    tu_check(memcmp(buf, keep, sizeof buf) == 0, "empty: an operator with T = 0 wrote memory");
}

/* ---- determinism across thread counts ------------------------------------------------------------ */

static void test_determinism(void)
{
    if (!tu_selected("determinism"))
        return;
    enum { T = 96, W = 1024, N = 4 };
    uint16_t *x = rand_bf16((size_t)T * N * W, -3, 3), *tabc = rand_bf16(T * 64, -1, 1), *tabs = rand_bf16(T * 64, -1, 1);
    uint16_t *y[3];
    int8_t *q[3];
    float *sc[3], *cosf[3];
    int8_t *cache[3];
    uint16_t *cscale[3];
    int64_t pos[T], slots[T];
    for (int t = 0; t < T; t++) {
        pos[t] = tu_rng_int(&rng, 0, 1 << 20);
        slots[t] = t % 7 == 6 ? -1 : (int64_t)((t * 37) % 128);
    }
    static const int threads[3] = {1, 2, 3};
    for (int k = 0; k < 3; k++) {
        rc_set_threads(ctx, threads[k]);
        y[k] = tu_calloc((size_t)T * N * W + (size_t)T * W, 2); /* rope_apply output, then rmsnorm output */
        q[k] = tu_calloc((size_t)T * W, 1);
        sc[k] = tu_calloc((size_t)T * 8, 4);
        cosf[k] = tu_calloc((size_t)T * 128, 4);
        cache[k] = tu_calloc(128 * (size_t)W, 1);
        cscale[k] = tu_calloc(128 * 8, 2);
        int64_t s2[2] = {T, W}, s3[3] = {T, N, W}, ts[2] = {T, 64}, tn = T, ss[2] = {T, 8}, cs3[3] = {16, 8, W},
                sc3[3] = {16, 8, 8};
        dsops_status st[5];
        dsops_rmsnorm_args rn;
        dsops_rmsnorm_init(&rn, DSOPS_PRESET_V32);
        rn.x = dsops_tensor_make(x, DSOPS_BF16, 2, s2);
        rn.y = dsops_tensor_make(y[k] + (size_t)T * N * W, DSOPS_BF16, 2, s2);
        st[0] = dsops_rmsnorm(ctx, &rn);
        dsops_rope_apply_args ra;
        memset(&ra, 0, sizeof ra);
        ra.x = dsops_tensor_make(x, DSOPS_BF16, 3, s3);
        ra.y = dsops_tensor_make(y[k], DSOPS_BF16, 3, s3);
        ra.rope_cos = dsops_tensor_make(tabc, DSOPS_BF16, 2, ts);
        ra.rope_sin = dsops_tensor_make(tabs, DSOPS_BF16, 2, ts);
        ra.rope_offset = 448;
        st[1] = dsops_rope_apply(ctx, &ra);
        dsops_rope_tables_args rt;
        dsops_rope_tables_init(&rt, DSOPS_PRESET_V4_PRO);
        rt.positions = dsops_tensor_make(pos, DSOPS_INT64, 1, &tn);
        rt.cos = dsops_tensor_make(cosf[k], DSOPS_FP32, 2, ts);
        rt.sin = dsops_tensor_make(cosf[k] + T * 64, DSOPS_FP32, 2, ts);
        st[2] = dsops_rope_tables(ctx, &rt);
        dsops_quant_q8_args qa;
        memset(&qa, 0, sizeof qa);
        qa.x = dsops_tensor_make(x, DSOPS_BF16, 2, s2);
        qa.q = dsops_tensor_make(q[k], DSOPS_INT8, 2, s2);
        qa.scale = dsops_tensor_make(sc[k], DSOPS_FP32, 2, ss);
        qa.group = W / 8;
        st[3] = dsops_quant_q8(ctx, &qa);
        dsops_cache_store_args cs;
        memset(&cs, 0, sizeof cs);
        cs.src = dsops_tensor_make(x, DSOPS_BF16, 2, s2);
        cs.cache_index = dsops_tensor_make(slots, DSOPS_INT64, 1, &tn);
        cs.cache = dsops_tensor_make(cache[k], DSOPS_INT8, 3, cs3);
        cs.cache_scale = dsops_tensor_make(cscale[k], DSOPS_FP16, 3, sc3);
        cs.group = W / 8;
        st[4] = dsops_cache_store(ctx, &cs);
        for (int i = 0; i < 5; i++)
            tu_check(st[i] == DSOPS_OK, "determinism: operator %d with %d threads: %s (%s)", i, threads[k],
                     dsops_status_name(st[i]), dsops_last_error());
        if (k == 0)
            continue;
        tu_check(memcmp(y[k], y[0], ((size_t)T * N * W + (size_t)T * W) * 2) == 0,
                 "determinism: rmsnorm / rope_apply differ with %d threads",
                 threads[k]);
        tu_check(memcmp(cosf[k], cosf[0], (size_t)T * 128 * 4) == 0, "determinism: rope_tables differ with %d threads",
                 threads[k]);
        tu_check(memcmp(q[k], q[0], (size_t)T * W) == 0 && memcmp(sc[k], sc[0], (size_t)T * 32) == 0,
                 "determinism: quant_q8 differs with %d threads", threads[k]);
        tu_check(memcmp(cache[k], cache[0], 128 * (size_t)W) == 0 && memcmp(cscale[k], cscale[0], 128 * 16) == 0,
                 "determinism: cache_store differs with %d threads", threads[k]);
    }
    for (int k = 0; k < 3; k++)
        free(y[k]), free(q[k]), free(sc[k]), free(cosf[k]), free(cache[k]), free(cscale[k]);
    free(x), free(tabc), free(tabs);
    rc_set_threads(ctx, 2);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, 20251117);
    tu_rng_seed(&rng, tu_seed());
    ctx = tu_context();
    rc_set_threads(ctx, 2);
    test_rows();
    test_rmsnorm();
    test_rope_tables();
    test_rope_apply();
    test_hadamard();
    test_quant_q8();
    test_cache_store();
    test_fractal_nz();
    test_empty();
    test_determinism();
    dsops_context_destroy(ctx);
    return tu_finish();
}
