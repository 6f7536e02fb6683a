/* Shared primitives (spec §2.3 - §2.8): the row-level building blocks of primitives.h, used by the fused
 * prologs, and the exported operators rmsnorm, rope_tables, rope_apply, hadamard_matrix, quant_q8 and
 * cache_store. Every operator validates all of its arguments (V1-V10) before it writes anything, then
 * spreads its rows over the context's threads; each row is computed by one thread in a fixed order, so
 * results are bitwise identical for any thread count. Portable C, compiled without FMA contraction:
 * every fp32 operation is the spec's. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "internal.h"
#include "primitives.h"

/* Below this many elements an operator runs on the calling thread (a parallel region costs more). */
#define PRIM_PARALLEL_MIN_WORK 32768

/* ---- row-level functions (primitives.h) ------------------------------------------------------ */

void dsops_widen_row(const void *src, dsops_dtype dtype, int n, float *dst)
{
    const unsigned char *p = src;
    if (dtype == DSOPS_FP32) {
        memmove(dst, src, (size_t)n * sizeof(float));
        return;
    }
    for (int i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * (size_t)i, 2);
        dst[i] = dtype == DSOPS_FP16 ? dsops_fp16_value(h) : dsops_bf16_value(h);
    }
}

void dsops_widen_vector(const dsops_tensor *t, int n, float *dst)
{
    if (t->stride[0] == 1 || n <= 1) {
        dsops_widen_row(t->data, t->dtype, n, dst);
        return;
    }
    const unsigned char *p = t->data;
    const size_t step = (size_t)t->stride[0] * dsops_dtype_size(t->dtype);
    for (int i = 0; i < n; i++)
        dsops_widen_row(p + (size_t)i * step, t->dtype, 1, dst + i);
}

void dsops_rmsnorm_row(const float *v, int n, const float *gamma, float eps, float *y)
{
    /* the sum in 16 interleaved partial sums and v / r as v * (1 / r): both allowed by spec §1.7, and
     * they let the compiler vectorise a row that would otherwise be one serial chain of adds */
    float part[16] = {0};
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++)
            part[l] += v[i + l] * v[i + l];
    for (; i < n; i++)
        part[i % 16] += v[i] * v[i];
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            part[l] += part[l + w];
    float ms = part[0] / (float)n;
    float inv = 1.0f / sqrtf(ms + eps);
    if (gamma) {
        for (int i = 0; i < n; i++)
            y[i] = (v[i] * inv) * gamma[i];
    } else {
        for (int i = 0; i < n; i++)
            y[i] = v[i] * inv;
    }
}

void dsops_layernorm_row(const float *v, int n, const float *gamma, const float *beta, float eps, float *y)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += v[i];
    float mu = s / (float)n;
    float var = 0.0f;
    for (int i = 0; i < n; i++) {
        float d = v[i] - mu;
        var += d * d;
    }
    var = var / (float)n;
    float den = sqrtf(var + eps);
    for (int i = 0; i < n; i++) {
        float t = (v[i] - mu) / den;
        if (gamma)
            t = t * gamma[i];
        if (beta)
            t = t + beta[i];
        y[i] = t;
    }
}

void dsops_rope_row(const float *x, const float *c, const float *s, dsops_rope_mode mode, bool inverse, float *y)
{
    float sn[64]; /* s' = -s for the inverse rotation; negation is exact */
    for (int e = 0; e < 64; e++)
        sn[e] = inverse ? -s[e] : s[e];
    switch (mode) {
    case DSOPS_ROPE_INTERLEAVED:
        for (int j = 0; j < 32; j++) {
            float x0 = x[2 * j], x1 = x[2 * j + 1];
            y[2 * j] = x0 * c[2 * j] - x1 * sn[2 * j];
            y[2 * j + 1] = x1 * c[2 * j + 1] + x0 * sn[2 * j + 1];
        }
        break;
    case DSOPS_ROPE_HALF:
        for (int j = 0; j < 32; j++) {
            float x0 = x[j], x1 = x[j + 32];
            y[j] = x0 * c[j] - x1 * sn[j];
            y[j + 32] = x1 * c[j + 32] + x0 * sn[j + 32];
        }
        break;
    case DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT:
        for (int j = 0; j < 32; j++) {
            float x0 = x[2 * j], x1 = x[2 * j + 1];
            y[j] = x0 * c[j] - x1 * sn[j];
            y[j + 32] = x1 * c[j + 32] + x0 * sn[j + 32];
        }
        break;
    }
}

/* rint with ties to even, independent of the floating-point environment; |x| <= 2^22 here. */
void dsops_rope_bf16_slice(const uint16_t *src, const dsops_tensor *cos, const dsops_tensor *sin, int64_t t,
                           dsops_rope_mode mode, bool inverse, uint16_t *dst)
{
    float x[64], c[64], s[64], y[64];
    for (int e = 0; e < 64; e++)
        x[e] = dsops_bf16_value(src[e]);
    dsops_widen_row(dsops_at2(cos, t, 0), cos->dtype, 64, c);
    dsops_widen_row(dsops_at2(sin, t, 0), sin->dtype, 64, s);
    dsops_rope_row(x, c, s, mode, inverse, y);
    for (int e = 0; e < 64; e++)
        dst[e] = dsops_bf16_round_bits(y[e]);
}

/* Round to nearest, ties to even, for |x| < 2^22: adding and removing 1.5 * 2^23 leaves exactly the
 * integer part in the fp32 round-to-nearest-even mode (never changed by the library). */
static inline float round_half_even(float x)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    volatile float keep = magic;     /* the addition must not be folded away */
    float m = keep;
    return (x + m) - m;
}

void dsops_q8_group(const float *v, int n, int8_t *q, float *scale)
{
    /* one pass: the largest magnitude, and whether any value is NaN or infinite */
    float amax = 0.0f;
    int bad = 0;
    for (int i = 0; i < n; i++) {
        float a = fabsf(v[i]);
        bad |= !(a <= 3.40282347e38f);
        amax = a > amax ? a : amax;
    }
    if (bad) {
        memset(q, 0, (size_t)n);
        *scale = NAN;
        return;
    }
    float sq = amax == 0.0f ? INFINITY : 127.0f / amax;
    if (isinf(sq)) { /* all zero, or amax so small that 127 / amax overflows */
        memset(q, 0, (size_t)n);
        *scale = 0.0f;
        return;
    }
    /* |v_i| <= amax keeps |v_i * sq| <= 127 (up to one rounding, which cannot pass 127.5) */
    for (int i = 0; i < n; i++)
        q[i] = (int8_t)round_half_even(v[i] * sq);
    *scale = 1.0f / sq;
}

void dsops_hadamard_row(const float *v, int d, const float *hm, float *y)
{
    /* y[j] accumulates its products in ascending k, row by row of hm */
    for (int j = 0; j < d; j++)
        y[j] = 0.0f;
    for (int k = 0; k < d; k++) {
        const float *row = hm + (size_t)k * (size_t)d;
        float vk = v[k];
        for (int j = 0; j < d; j++)
            y[j] += vk * row[j];
    }
}

/* ---- shared validation and threading helpers ------------------------------------------------- */

/* y is the same view as x: same memory, dtype and extents, same strides wherever an extent exceeds 1. */
static bool same_view(const dsops_tensor *a, const dsops_tensor *b)
{
    if (a->data != b->data || a->dtype != b->dtype || a->ndim != b->ndim)
        return false;
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] != b->shape[d])
            return false;
        if (a->shape[d] > 1 && a->stride[d] != b->stride[d])
            return false;
    }
    return true;
}

/* An output that may alias an input exactly: the same view is allowed, any other overlap is not. */
static dsops_status check_exact_alias(const dsops_tensor *out, const char *on, const dsops_tensor *in, const char *in_name)
{
    if (same_view(out, in))
        return DSOPS_OK;
    return dsops_check_no_overlap(out, on, in, in_name);
}

/* Threads for `rows` independent rows of `work` elements in total. */
static int prim_threads(const dsops_context *use, int64_t rows, int64_t work)
{
    int n = use->threads;
    if (work < PRIM_PARALLEL_MIN_WORK)
        n = 1;
    if (rows < n)
        n = (int)rows;
    return n < 1 ? 1 : n;
}


/* Row widths are handed to the int-sized row functions. */
static dsops_status check_width(const char *name, int dim, int64_t w, int64_t min)
{
    if (w < min)
        return dsops_fail(DSOPS_ERR_SHAPE, "%s.shape[%d] = %lld, expected >= %lld", name, dim, (long long)w,
                          (long long)min);
    if (w > (1 << 30))
        return dsops_fail(DSOPS_ERR_UNSUPPORTED, "%s.shape[%d] = %lld, this build supports rows of at most 2^30 elements",
                          name, dim, (long long)w);
    return DSOPS_OK;
}

/* ---- rmsnorm (spec §2.3) --------------------------------------------------------------------- */

dsops_status dsops_rmsnorm_init(dsops_rmsnorm_args *a, dsops_preset preset)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    memset(a, 0, sizeof *a);
    a->eps = 1e-6f; /* the RMSNorm eps of every preset (§1.5) */
    if ((int)preset < DSOPS_PRESET_V32 || (int)preset > DSOPS_PRESET_V4_PRO)
        return dsops_fail(DSOPS_ERR_PARAM, "preset = %d is not a dsops_preset value", (int)preset);
    dsops_clear_error();
    return DSOPS_OK;
}

static dsops_status rmsnorm_check(const dsops_rmsnorm_args *a)
{
    const unsigned bf16 = DSOPS_DT(DSOPS_BF16);
    DSOPS_TRY(dsops_check_tensor(&a->x, "x", 2, bf16, true));
    int64_t T = a->x.shape[0], W = a->x.shape[1];
    DSOPS_TRY(check_width("x", 1, W, 1));
    if (dsops_tensor_present(&a->weight)) {
        DSOPS_TRY(dsops_check_tensor(&a->weight, "weight", 1, bf16 | DSOPS_DT(DSOPS_FP32), true));
        DSOPS_TRY(dsops_check_dim(&a->weight, "weight", 0, W, "W of x"));
    }
    DSOPS_TRY(dsops_check_tensor(&a->y, "y", 2, bf16, true));
    DSOPS_TRY(dsops_check_dim(&a->y, "y", 0, T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->y, "y", 1, W, "W of x"));
    if (!isfinite(a->eps) || a->eps < 0.0f)
        return dsops_fail(DSOPS_ERR_PARAM, "eps = %g, expected a finite value >= 0", (double)a->eps);
    DSOPS_TRY(dsops_check_no_self_overlap(&a->y, "y"));
    DSOPS_TRY(check_exact_alias(&a->y, "y", &a->x, "x"));
    return dsops_check_no_overlap(&a->y, "y", &a->weight, "weight");
}

dsops_status dsops_rmsnorm(dsops_context *ctx, const dsops_rmsnorm_args *a)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    DSOPS_TRY(rmsnorm_check(a));
    dsops_clear_error();
    int64_t T = a->x.shape[0];
    int W = (int)a->x.shape[1];
    if (T == 0)
        return DSOPS_OK;
    dsops_context *use;
    DSOPS_TRY(dsops_context_begin(ctx, &use));
    int nth = prim_threads(use, T, T * W);
    size_t row_bytes = dsops_align64((size_t)W * sizeof(float));
    char *scratch = dsops_scratch(use, row_bytes * (size_t)(nth + 1));
    if (!scratch) {
        dsops_context_end(ctx, use);
        return DSOPS_ERR_NOMEM;
    }
    float *gamma = NULL;
    if (dsops_tensor_present(&a->weight)) {
        gamma = (float *)scratch;
        dsops_widen_row(a->weight.data, a->weight.dtype, W, gamma);
    }
#pragma omp parallel for schedule(static) num_threads(nth) if (nth > 1)
    for (int64_t t = 0; t < T; t++) {
        float *v = (float *)(scratch + row_bytes * (size_t)(1 + dsops_thread_num()));
        dsops_widen_row(dsops_at2(&a->x, t, 0), DSOPS_BF16, W, v);
        dsops_rmsnorm_row(v, W, gamma, a->eps, v);
        uint16_t *y = dsops_at2(&a->y, t, 0);
        for (int i = 0; i < W; i++)
            y[i] = dsops_bf16_round_bits(v[i]);
    }
    dsops_context_end(ctx, use);
    return DSOPS_OK;
}

/* ---- rope_tables (spec §2.5.2) --------------------------------------------------------------- */

dsops_status dsops_rope_tables_init(dsops_rope_tables_args *a, dsops_preset preset)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    memset(a, 0, sizeof *a);
    a->yarn = 1;
    a->yarn_beta_fast = 32.0;
    a->yarn_beta_slow = 1.0;
    switch (preset) {
    case DSOPS_PRESET_V32:
        a->base = 10000.0;
        a->yarn_factor = 40.0;
        a->yarn_original_len = 4096.0;
        a->layout = DSOPS_ROPE_HALVES;
        break;
    case DSOPS_PRESET_V4_FLASH:
    case DSOPS_PRESET_V4_PRO:
        a->base = 160000.0;
        a->yarn_factor = 16.0;
        a->yarn_original_len = 65536.0;
        a->layout = DSOPS_ROPE_PAIRS;
        break;
    default:
        a->base = 10000.0;
        a->yarn_factor = 40.0;
        a->yarn_original_len = 4096.0;
        a->layout = DSOPS_ROPE_HALVES;
        return dsops_fail(DSOPS_ERR_PARAM, "preset = %d is not a dsops_preset value", (int)preset);
    }
    dsops_clear_error();
    return DSOPS_OK;
}

static dsops_status positive_param(const char *name, double v)
{
    if (!isfinite(v) || v <= 0.0)
        return dsops_fail(DSOPS_ERR_PARAM, "%s = %g, expected a finite value > 0", name, v);
    return DSOPS_OK;
}

static dsops_status rope_tables_check(const dsops_rope_tables_args *a)
{
    const unsigned tab = DSOPS_DT(DSOPS_BF16) | DSOPS_DT(DSOPS_FP32);
    DSOPS_TRY(dsops_check_tensor(&a->positions, "positions", 1, DSOPS_DT(DSOPS_INT64), false));
    int64_t T = a->positions.shape[0];
    DSOPS_TRY(dsops_check_tensor(&a->cos, "cos", 2, tab, true));
    DSOPS_TRY(dsops_check_dim(&a->cos, "cos", 0, T, "T of positions"));
    DSOPS_TRY(dsops_check_dim(&a->cos, "cos", 1, 64, "rotary table width"));
    DSOPS_TRY(dsops_check_tensor(&a->sin, "sin", 2, tab, true));
    DSOPS_TRY(dsops_check_dim(&a->sin, "sin", 0, T, "T of positions"));
    DSOPS_TRY(dsops_check_dim(&a->sin, "sin", 1, 64, "rotary table width"));
    if (a->sin.dtype != a->cos.dtype)
        return dsops_fail(DSOPS_ERR_DTYPE, "sin has dtype %s, expected %s (the dtype of cos)",
                          dsops_dtype_name(a->sin.dtype), dsops_dtype_name(a->cos.dtype));
    if (!isfinite(a->base) || a->base <= 0.0 || a->base > FLT_MAX)
        return dsops_fail(DSOPS_ERR_PARAM, "base = %g, expected a finite fp32 value > 0", a->base);
    if ((int)a->layout < DSOPS_ROPE_PAIRS || (int)a->layout > DSOPS_ROPE_HALVES)
        return dsops_fail(DSOPS_ERR_PARAM, "layout = %d is not a dsops_rope_layout value", (int)a->layout);
    if (a->yarn != 0 && a->yarn != 1)
        return dsops_fail(DSOPS_ERR_PARAM, "yarn = %d, expected 0 or 1", a->yarn);
    if (a->yarn) {
        DSOPS_TRY(positive_param("yarn_factor", a->yarn_factor));
        DSOPS_TRY(positive_param("yarn_original_len", a->yarn_original_len));
        DSOPS_TRY(positive_param("yarn_beta_fast", a->yarn_beta_fast));
        DSOPS_TRY(positive_param("yarn_beta_slow", a->yarn_beta_slow));
        if (a->yarn_factor > FLT_MAX)
            return dsops_fail(DSOPS_ERR_PARAM, "yarn_factor = %g is not a finite fp32 value", a->yarn_factor);
        if (a->base == 1.0)
            return dsops_fail(DSOPS_ERR_PARAM, "base = 1 with yarn = 1: the YaRN correction divides by ln(base) = 0");
    }
    DSOPS_TRY(dsops_check_no_self_overlap(&a->cos, "cos"));
    DSOPS_TRY(dsops_check_no_self_overlap(&a->sin, "sin"));
    DSOPS_TRY(dsops_check_no_overlap(&a->cos, "cos", &a->positions, "positions"));
    DSOPS_TRY(dsops_check_no_overlap(&a->sin, "sin", &a->positions, "positions"));
    DSOPS_TRY(dsops_check_no_overlap(&a->sin, "sin", &a->cos, "cos"));
    /* positions are token positions: int32 range (V6), so fp32(p) is the spec's int -> fp32 rounding */
    for (int64_t t = 0; t < T; t++) {
        int64_t p = *(const int64_t *)dsops_at1(&a->positions, t);
        if (p < 0 || p > INT32_MAX)
            return dsops_fail(DSOPS_ERR_INDEX, "positions[%lld] = %lld is outside [0, 2^31)", (long long)t,
                              (long long)p);
    }
    return DSOPS_OK;
}

/* freq_j of spec §2.5.2: fp32 pow (correctly rounded through fp64), fp32 reciprocal, optional YaRN
 * blend in fp32 with the ramp computed in fp64. */
static void rope_freqs(const dsops_rope_tables_args *a, float freq[32])
{
    float theta = (float)a->base;
    for (int j = 0; j < 32; j++) {
        float e = (float)(2 * j) / 64.0f;                 /* exact */
        float pw = (float)pow((double)theta, (double)e);  /* fp32 pow */
        freq[j] = 1.0f / pw;
    }
    if (!a->yarn)
        return;
    const double two_pi = 2.0 * 3.14159265358979323846;
    double ln_theta = log(a->base);
    double corr_fast = 64.0 * log(a->yarn_original_len / (two_pi * a->yarn_beta_fast)) / (2.0 * ln_theta);
    double corr_slow = 64.0 * log(a->yarn_original_len / (two_pi * a->yarn_beta_slow)) / (2.0 * ln_theta);
    double lo = floor(corr_fast), hi = ceil(corr_slow);
    if (lo < 0.0)
        lo = 0.0;
    if (hi > 63.0)
        hi = 63.0;
    if (lo == hi)
        hi = hi + 0.001;
    float f = (float)a->yarn_factor;
    for (int j = 0; j < 32; j++) {
        double ramp = ((double)j - lo) / (hi - lo);
        ramp = ramp < 0.0 ? 0.0 : (ramp > 1.0 ? 1.0 : ramp);
        float rf = (float)ramp;
        freq[j] = freq[j] * (1.0f - rf) + (freq[j] / f) * rf;
    }
}

static void store_table(void *row, dsops_dtype dt, int e, float v)
{
    if (dt == DSOPS_FP32)
        ((float *)row)[e] = v;
    else
        ((uint16_t *)row)[e] = dsops_bf16_round_bits(v);
}

dsops_status dsops_rope_tables(dsops_context *ctx, const dsops_rope_tables_args *a)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    DSOPS_TRY(rope_tables_check(a));
    dsops_clear_error();
    int64_t T = a->positions.shape[0];
    if (T == 0)
        return DSOPS_OK;
    float freq[32];
    rope_freqs(a, freq);
    dsops_context *use;
    DSOPS_TRY(dsops_context_begin(ctx, &use));
    int nth = prim_threads(use, T, T * 1024); /* cos and sin cost far more than a copied element */
    dsops_dtype dt = a->cos.dtype;
    bool pairs = a->layout == DSOPS_ROPE_PAIRS;
#pragma omp parallel for schedule(static) num_threads(nth) if (nth > 1)
    for (int64_t t = 0; t < T; t++) {
        int64_t p = *(const int64_t *)dsops_at1(&a->positions, t);
        float pf = (float)(int32_t)p;
        void *crow = dsops_at2(&a->cos, t, 0), *srow = dsops_at2(&a->sin, t, 0);
        for (int j = 0; j < 32; j++) {
            float ang = pf * freq[j];                  /* one fp32 multiply */
            float c = (float)cos((double)ang);         /* fp64 cos / sin of the fp32 angle, rounded to fp32 */
            float s = (float)sin((double)ang);
            int e0 = pairs ? 2 * j : j, e1 = pairs ? 2 * j + 1 : j + 32;
            store_table(crow, dt, e0, c);
            store_table(crow, dt, e1, c);
            store_table(srow, dt, e0, s);
            store_table(srow, dt, e1, s);
        }
    }
    dsops_context_end(ctx, use);
    return DSOPS_OK;
}

/* ---- rope_apply (spec §2.5.3) ---------------------------------------------------------------- */

static dsops_status rope_apply_check(const dsops_rope_apply_args *a)
{
    const unsigned bf16 = DSOPS_DT(DSOPS_BF16), tab = bf16 | DSOPS_DT(DSOPS_FP32);
    DSOPS_TRY(dsops_check_tensor(&a->x, "x", 3, bf16, true));
    int64_t T = a->x.shape[0], N = a->x.shape[1], W = a->x.shape[2];
    DSOPS_TRY(check_width("x", 2, W, 64));
    DSOPS_TRY(dsops_check_tensor(&a->rope_cos, "rope_cos", 2, tab, true));
    DSOPS_TRY(dsops_check_dim(&a->rope_cos, "rope_cos", 0, T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->rope_cos, "rope_cos", 1, 64, "rotary table width"));
    DSOPS_TRY(dsops_check_tensor(&a->rope_sin, "rope_sin", 2, tab, true));
    DSOPS_TRY(dsops_check_dim(&a->rope_sin, "rope_sin", 0, T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->rope_sin, "rope_sin", 1, 64, "rotary table width"));
    DSOPS_TRY(dsops_check_tensor(&a->y, "y", 3, bf16, true));
    DSOPS_TRY(dsops_check_dim(&a->y, "y", 0, T, "T of x"));
    DSOPS_TRY(dsops_check_dim(&a->y, "y", 1, N, "N of x"));
    DSOPS_TRY(dsops_check_dim(&a->y, "y", 2, W, "W of x"));
    if (a->rope_offset < 0 || (int64_t)a->rope_offset > W - 64)
        return dsops_fail(DSOPS_ERR_PARAM, "rope_offset = %d is outside [0, %lld] (W - 64 with W = %lld)",
                          a->rope_offset, (long long)(W - 64), (long long)W);
    if ((int)a->rope_mode < DSOPS_ROPE_INTERLEAVED || (int)a->rope_mode > DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT)
        return dsops_fail(DSOPS_ERR_PARAM, "rope_mode = %d is not a dsops_rope_mode value", (int)a->rope_mode);
    if (a->rope_inverse != 0 && a->rope_inverse != 1)
        return dsops_fail(DSOPS_ERR_PARAM, "rope_inverse = %d, expected 0 or 1", a->rope_inverse);
    DSOPS_TRY(check_exact_alias(&a->y, "y", &a->x, "x"));
    DSOPS_TRY(dsops_check_no_self_overlap(&a->y, "y"));
    DSOPS_TRY(dsops_check_no_overlap(&a->y, "y", &a->rope_cos, "rope_cos"));
    return dsops_check_no_overlap(&a->y, "y", &a->rope_sin, "rope_sin");
}

dsops_status dsops_rope_apply(dsops_context *ctx, const dsops_rope_apply_args *a)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    DSOPS_TRY(rope_apply_check(a));
    dsops_clear_error();
    int64_t T = a->x.shape[0], N = a->x.shape[1], W = a->x.shape[2];
    int64_t rows = T * N;
    if (rows == 0)
        return DSOPS_OK;
    dsops_context *use;
    DSOPS_TRY(dsops_context_begin(ctx, &use));
    int nth = prim_threads(use, rows, rows * W);
    bool in_place = same_view(&a->y, &a->x);
    int off = a->rope_offset;
    size_t tail = (size_t)(W - off - 64);
#pragma omp parallel num_threads(nth) if (nth > 1)
    {
        float c[64], s[64], xv[64], yv[64];
        int64_t cur_t = -1;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            int64_t t = r / N, h = r % N;
            if (t != cur_t) { /* tables of token t, widened once per token and thread */
                dsops_widen_row(dsops_at2(&a->rope_cos, t, 0), a->rope_cos.dtype, 64, c);
                dsops_widen_row(dsops_at2(&a->rope_sin, t, 0), a->rope_sin.dtype, 64, s);
                cur_t = t;
            }
            const uint16_t *x = dsops_at3(&a->x, t, h, 0);
            uint16_t *y = dsops_at3(&a->y, t, h, 0);
            for (int e = 0; e < 64; e++)
                xv[e] = dsops_bf16_value(x[off + e]);
            dsops_rope_row(xv, c, s, a->rope_mode, a->rope_inverse != 0, yv);
            if (!in_place) {
                memcpy(y, x, (size_t)off * 2);
                memcpy(y + off + 64, x + off + 64, tail * 2);
            }
            for (int e = 0; e < 64; e++)
                y[off + e] = dsops_bf16_round_bits(yv[e]);
        }
    }
    dsops_context_end(ctx, use);
    return DSOPS_OK;
}

/* ---- hadamard_matrix (spec §2.6) ------------------------------------------------------------- */

dsops_status dsops_hadamard_matrix(dsops_context *ctx, const dsops_tensor *m)
{
    (void)ctx; /* one pass of d^2 stores: no threads, no scratch */
    if (!m)
        return dsops_fail(DSOPS_ERR_NULL, "m is NULL");
    DSOPS_TRY(dsops_check_tensor(m, "m", 2, DSOPS_DT(DSOPS_BF16) | DSOPS_DT(DSOPS_FP32), true));
    int64_t d = m->shape[0];
    if (d < 1 || (d & (d - 1)) != 0)
        return dsops_fail(DSOPS_ERR_SHAPE, "m.shape[0] = %lld, expected a power of two (d >= 1)", (long long)d);
    DSOPS_TRY(dsops_check_dim(m, "m", 1, d, "a square [d, d] matrix"));
    dsops_clear_error();
    float h = (float)(1.0 / sqrt((double)d)); /* correctly rounded 1 / sqrt(d) */
    for (int64_t i = 0; i < d; i++) {
        void *row = dsops_at2(m, i, 0);
        for (int64_t j = 0; j < d; j++) {
            float v = (__builtin_popcountll((unsigned long long)(i & j)) & 1) ? -h : h;
            if (m->dtype == DSOPS_FP32)
                ((float *)row)[j] = v;
            else
                ((uint16_t *)row)[j] = dsops_bf16_round_bits(v);
        }
    }
    return DSOPS_OK;
}

/* ---- quant_q8 (spec §2.7) -------------------------------------------------------------------- */

static dsops_status quant_q8_check(const dsops_quant_q8_args *a)
{
    DSOPS_TRY(dsops_check_tensor(&a->x, "x", 2, DSOPS_DT(DSOPS_BF16) | DSOPS_DT(DSOPS_FP32), true));
    int64_t R = a->x.shape[0], W = a->x.shape[1];
    DSOPS_TRY(check_width("x", 1, W, 1));
    if (a->group < 1)
        return dsops_fail(DSOPS_ERR_PARAM, "group = %d, expected >= 1", a->group);
    if (W % a->group != 0)
        return dsops_fail(DSOPS_ERR_PARAM, "group = %d does not divide W = %lld", a->group, (long long)W);
    DSOPS_TRY(dsops_check_tensor(&a->q, "q", 2, DSOPS_DT(DSOPS_INT8), true));
    DSOPS_TRY(dsops_check_dim(&a->q, "q", 0, R, "R of x"));
    DSOPS_TRY(dsops_check_dim(&a->q, "q", 1, W, "W of x"));
    DSOPS_TRY(dsops_check_tensor(&a->scale, "scale", 2, DSOPS_DT(DSOPS_FP32), true));
    DSOPS_TRY(dsops_check_dim(&a->scale, "scale", 0, R, "R of x"));
    DSOPS_TRY(dsops_check_dim(&a->scale, "scale", 1, W / a->group, "W / group"));
    DSOPS_TRY(dsops_check_no_self_overlap(&a->q, "q"));
    DSOPS_TRY(dsops_check_no_self_overlap(&a->scale, "scale"));
    DSOPS_TRY(dsops_check_no_overlap(&a->q, "q", &a->x, "x"));
    DSOPS_TRY(dsops_check_no_overlap(&a->scale, "scale", &a->x, "x"));
    return dsops_check_no_overlap(&a->scale, "scale", &a->q, "q");
}

dsops_status dsops_quant_q8(dsops_context *ctx, const dsops_quant_q8_args *a)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    DSOPS_TRY(quant_q8_check(a));
    dsops_clear_error();
    int64_t R = a->x.shape[0];
    int W = (int)a->x.shape[1], G = a->group;
    if (R == 0)
        return DSOPS_OK;
    dsops_context *use;
    DSOPS_TRY(dsops_context_begin(ctx, &use));
    int nth = prim_threads(use, R, R * W);
    size_t row_bytes = dsops_align64((size_t)W * sizeof(float));
    char *scratch = dsops_scratch(use, row_bytes * (size_t)nth);
    if (!scratch) {
        dsops_context_end(ctx, use);
        return DSOPS_ERR_NOMEM;
    }
#pragma omp parallel for schedule(static) num_threads(nth) if (nth > 1)
    for (int64_t r = 0; r < R; r++) {
        float *v = (float *)(scratch + row_bytes * (size_t)dsops_thread_num());
        dsops_widen_row(dsops_at2(&a->x, r, 0), a->x.dtype, W, v);
        int8_t *q = dsops_at2(&a->q, r, 0);
        for (int g = 0; g < W / G; g++)
            dsops_q8_group(v + (size_t)g * G, G, q + (size_t)g * G, (float *)dsops_at2(&a->scale, r, g));
    }
    dsops_context_end(ctx, use);
    return DSOPS_OK;
}

/* ---- cache_store (spec §2.8) ----------------------------------------------------------------- */

enum { FP8_V32_ROW = 656, FP8_MODEL1_ROW = 584 };

/* One FP8 row of token t at (blk, row) of a uint8 cache (spec §2.12); src is copied first (any stride). */
static void store_fp8_row(const dsops_cache_store_args *a, int64_t t, int64_t blk, int64_t row)
{
    uint16_t v[576];
    const int64_t W = a->src.shape[1];
    for (int64_t w = 0; w < W; w++)
        v[w] = *(const uint16_t *)dsops_at2(&a->src, t, w);
    if (a->cache.shape[2] == FP8_V32_ROW) {
        dsops_fp8_v32_row(v, dsops_at3(&a->cache, blk, row, 0));
        return;
    }
    uint8_t *block = (uint8_t *)a->cache.data + blk * a->cache.stride[0]; /* [BS x 576 | BS x 8] */
    const int64_t BS = a->cache.shape[1];
    dsops_fp8_model1_row(v, block + row * 576, block + BS * 576 + row * 8);
}

static dsops_status cache_store_check(const dsops_cache_store_args *a, int *group)
{
    DSOPS_TRY(dsops_check_tensor(&a->src, "src", 2, DSOPS_DT(DSOPS_BF16), true));
    int64_t T = a->src.shape[0], W = a->src.shape[1];
    DSOPS_TRY(check_width("src", 1, W, 1));
    DSOPS_TRY(dsops_check_tensor(&a->cache_index, "cache_index", 1, DSOPS_DT(DSOPS_INT64), false));
    DSOPS_TRY(dsops_check_dim(&a->cache_index, "cache_index", 0, T, "T of src"));
    DSOPS_TRY(dsops_check_tensor(&a->cache, "cache", 3,
                                 DSOPS_DT(DSOPS_BF16) | DSOPS_DT(DSOPS_INT8) | DSOPS_DT(DSOPS_UINT8), true));
    int64_t NB = a->cache.shape[0], BS = a->cache.shape[1];
    if (NB < 1 || BS < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "cache has NB = %lld, BS = %lld, expected both >= 1", (long long)NB,
                          (long long)BS);
    if (a->cache.dtype == DSOPS_UINT8) { /* FlashMLA's FP8 rows (spec §2.12): V32 656 bytes, MODEL1 584 */
        const int64_t bytes = a->cache.shape[2];
        if (bytes != FP8_V32_ROW && bytes != FP8_MODEL1_ROW)
            return dsops_fail(DSOPS_ERR_SHAPE, "cache.shape[2] = %lld: a uint8 cache holds FlashMLA's FP8 rows, "
                              "656 bytes (V32, W 576) or 584 (MODEL1, W 512)", (long long)bytes);
        if (W != (bytes == FP8_V32_ROW ? 576 : 512))
            return dsops_fail(DSOPS_ERR_SHAPE, "src.shape[1] = %lld, expected %d for %lld-byte FP8 rows", (long long)W,
                              bytes == FP8_V32_ROW ? 576 : 512, (long long)bytes);
        if (bytes == FP8_MODEL1_ROW && (a->cache.stride[1] != FP8_MODEL1_ROW || a->cache.stride[0] < BS * FP8_MODEL1_ROW))
            return dsops_fail(DSOPS_ERR_SHAPE, "cache has strides [%lld, %lld, 1]: MODEL1 blocks need [block bytes >= "
                              "BS * 584, 584, 1]", (long long)a->cache.stride[0], (long long)a->cache.stride[1]);
        if (dsops_tensor_present(&a->cache_scale))
            return dsops_fail(DSOPS_ERR_PARAM, "cache_scale is given but cache holds FP8 rows (their scales are inside)");
        *group = (int)W;
        DSOPS_TRY(dsops_check_no_self_overlap(&a->cache, "cache"));
        DSOPS_TRY(dsops_check_no_overlap(&a->cache, "cache", &a->src, "src"));
        return dsops_check_no_overlap(&a->cache, "cache", &a->cache_index, "cache_index");
    }
    DSOPS_TRY(dsops_check_dim(&a->cache, "cache", 2, W, "W of src"));
    if (a->group < 0)
        return dsops_fail(DSOPS_ERR_PARAM, "group = %d, expected >= 1 (or 0 for W)", a->group);
    int G = a->group == 0 ? (int)W : a->group;
    *group = G;
    if (a->cache.dtype == DSOPS_BF16) {
        if (dsops_tensor_present(&a->cache_scale))
            return dsops_fail(DSOPS_ERR_PARAM, "cache_scale is given but cache is bf16 (only int8 caches have scales)");
    } else {
        if (W % G != 0)
            return dsops_fail(DSOPS_ERR_PARAM, "group = %d does not divide W = %lld", a->group, (long long)W);
        const unsigned sdt = DSOPS_DT(DSOPS_FP32) | DSOPS_DT(DSOPS_FP16);
        if (!dsops_tensor_present(&a->cache_scale))
            return dsops_fail(DSOPS_ERR_NULL, "cache_scale is NULL (required with an int8 cache)");
        if (a->cache_scale.ndim == 2 && G == W) {
            DSOPS_TRY(dsops_check_tensor(&a->cache_scale, "cache_scale", 2, sdt, false));
        } else {
            DSOPS_TRY(dsops_check_tensor(&a->cache_scale, "cache_scale", 3, sdt, true));
            DSOPS_TRY(dsops_check_dim(&a->cache_scale, "cache_scale", 2, W / G, "W / group"));
        }
        DSOPS_TRY(dsops_check_dim(&a->cache_scale, "cache_scale", 0, NB, "NB of cache"));
        DSOPS_TRY(dsops_check_dim(&a->cache_scale, "cache_scale", 1, BS, "BS of cache"));
    }
    DSOPS_TRY(dsops_check_no_self_overlap(&a->cache, "cache"));
    DSOPS_TRY(dsops_check_no_self_overlap(&a->cache_scale, "cache_scale"));
    DSOPS_TRY(dsops_check_no_overlap(&a->cache, "cache", &a->src, "src"));
    DSOPS_TRY(dsops_check_no_overlap(&a->cache, "cache", &a->cache_index, "cache_index"));
    DSOPS_TRY(dsops_check_no_overlap(&a->cache_scale, "cache_scale", &a->src, "src"));
    DSOPS_TRY(dsops_check_no_overlap(&a->cache_scale, "cache_scale", &a->cache_index, "cache_index"));
    DSOPS_TRY(dsops_check_no_overlap(&a->cache_scale, "cache_scale", &a->cache, "cache"));
    return DSOPS_OK;
}

typedef struct slot_entry {
    int64_t slot, t;
} slot_entry;

static int slot_entry_cmp(const void *pa, const void *pb)
{
    const slot_entry *a = pa, *b = pb;
    if (a->slot != b->slot)
        return a->slot < b->slot ? -1 : 1;
    return a->t < b->t ? -1 : (a->t > b->t);
}

size_t dsops_cache_slots_scratch_bytes(int64_t T) { return (size_t)(T > 0 ? T : 1) * sizeof(slot_entry); }

/* V8: every non-negative slot below `rows`, none written twice (sorted (slot, t) pairs in scratch;
 * the repeat with the smallest token index is reported). */
dsops_status dsops_check_cache_slots(const dsops_tensor *cache_index, int64_t rows, void *scratch)
{
    slot_entry *buf = scratch;
    int64_t T = cache_index->shape[0], n = 0;
    for (int64_t t = 0; t < T; t++) {
        int64_t r = *(const int64_t *)dsops_at1(cache_index, t);
        if (r >= rows)
            return dsops_fail(DSOPS_ERR_INDEX, "cache_index[%lld] = %lld is outside [0, %lld) (NB * BS slots)",
                              (long long)t, (long long)r, (long long)rows);
        if (r >= 0)
            buf[n++] = (slot_entry){r, t};
    }
    qsort(buf, (size_t)n, sizeof *buf, slot_entry_cmp);
    int64_t first = -1, dup = -1;
    for (int64_t i = 1, start = 0; i < n; i++) {
        if (buf[i].slot != buf[start].slot) {
            start = i;
            continue;
        }
        if (dup < 0 || buf[i].t < dup) {
            dup = buf[i].t;
            first = buf[start].t;
        }
    }
    if (dup >= 0)
        return dsops_fail(DSOPS_ERR_INDEX, "cache_index[%lld] = %lld repeats cache_index[%lld] (a slot is written once per call)",
                          (long long)dup, (long long)*(const int64_t *)dsops_at1(cache_index, dup), (long long)first);
    return DSOPS_OK;
}

dsops_status dsops_cache_store(dsops_context *ctx, const dsops_cache_store_args *a)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    int G = 0;
    DSOPS_TRY(cache_store_check(a, &G));
    int64_t T = a->src.shape[0];
    int W = (int)a->src.shape[1];
    if (T == 0) {
        dsops_clear_error();
        return DSOPS_OK;
    }
    dsops_context *use;
    DSOPS_TRY(dsops_context_begin(ctx, &use));
    bool int8 = a->cache.dtype == DSOPS_INT8;
    int nth = prim_threads(use, T, T * W * (int8 ? 4 : 1));
    size_t dup_bytes = dsops_align64((size_t)T * sizeof(slot_entry));
    size_t row_bytes = dsops_align64((size_t)W * sizeof(float));
    char *scratch = dsops_scratch(use, dup_bytes > row_bytes * (size_t)nth ? dup_bytes : row_bytes * (size_t)nth);
    if (!scratch) {
        dsops_context_end(ctx, use);
        return DSOPS_ERR_NOMEM;
    }
    dsops_status st = dsops_check_cache_slots(&a->cache_index, a->cache.shape[0] * a->cache.shape[1], scratch);
    if (st != DSOPS_OK) {
        dsops_context_end(ctx, use);
        return st;
    }
    dsops_clear_error();
    int64_t BS = a->cache.shape[1];
    bool scale3 = int8 && a->cache_scale.ndim == 3;
#pragma omp parallel for schedule(static) num_threads(nth) if (nth > 1)
    for (int64_t t = 0; t < T; t++) {
        int64_t r = *(const int64_t *)dsops_at1(&a->cache_index, t);
        if (r < 0)
            continue; /* padding token: not stored */
        int64_t blk = r / BS, row = r % BS;
        if (a->cache.dtype == DSOPS_UINT8) {
            store_fp8_row(a, t, blk, row);
            continue;
        }
        const uint16_t *src = dsops_at2(&a->src, t, 0);
        if (!int8) {
            memcpy(dsops_at3(&a->cache, blk, row, 0), src, (size_t)W * 2);
            continue;
        }
        float *v = (float *)(scratch + row_bytes * (size_t)dsops_thread_num());
        dsops_widen_row(src, DSOPS_BF16, W, v);
        int8_t *q = dsops_at3(&a->cache, blk, row, 0);
        for (int g = 0; g < W / G; g++) {
            float s;
            dsops_q8_group(v + (size_t)g * G, G, q + (size_t)g * G, &s);
            void *dst = scale3 ? dsops_at3(&a->cache_scale, blk, row, g) : dsops_at2(&a->cache_scale, blk, row);
            if (a->cache_scale.dtype == DSOPS_FP32)
                *(float *)dst = s;
            else
                *(uint16_t *)dst = dsops_fp16_round_bits(s);
        }
    }
    dsops_context_end(ctx, use);
    return DSOPS_OK;
}

/* ---- FRACTAL_NZ <-> ND (spec §2.11) ------------------------------------------------------------ */

enum { NZ_ROWS = 16, NZ_BYTES = 32 }; /* a fractal: 16 rows of 32 bytes */

static dsops_status fractal_nz_check(const dsops_fractal_nz_args *a)
{
    const dsops_tensor *nd = &a->nd, *nz = &a->nz;
    if (nd->ndim < 2 || nd->ndim > DSOPS_MAX_DIMS - 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "nd has rank %d, expected 2 ... %d", nd->ndim, DSOPS_MAX_DIMS - 1);
    const unsigned any = DSOPS_DT(DSOPS_BF16) | DSOPS_DT(DSOPS_FP16) | DSOPS_DT(DSOPS_FP32) | DSOPS_DT(DSOPS_INT8) |
                         DSOPS_DT(DSOPS_INT32) | DSOPS_DT(DSOPS_INT64) | DSOPS_DT(DSOPS_UINT8);
    DSOPS_TRY(dsops_check_tensor(nd, "nd", nd->ndim, any, false));
    DSOPS_TRY(dsops_check_tensor(nz, "nz", nd->ndim + 1, DSOPS_DT(nd->dtype), false));
    const int b = nd->ndim - 2; /* leading dimensions */
    const int64_t R = nd->shape[b], C = nd->shape[b + 1], C0 = NZ_BYTES / (int64_t)dsops_dtype_size(nd->dtype);
    for (int d = 0; d < b; d++)
        DSOPS_TRY(dsops_check_dim(nz, "nz", d, nd->shape[d], "the same leading dimension as nd"));
    DSOPS_TRY(dsops_check_dim(nz, "nz", b, (C + C0 - 1) / C0, "ceil(C / C0), C0 = 32 bytes / element"));
    DSOPS_TRY(dsops_check_dim(nz, "nz", b + 1, (R + NZ_ROWS - 1) / NZ_ROWS * NZ_ROWS, "R rounded up to 16"));
    DSOPS_TRY(dsops_check_dim(nz, "nz", b + 2, C0, "C0 = 32 bytes / element"));
    DSOPS_TRY(dsops_check_no_self_overlap(nd, "nd"));
    DSOPS_TRY(dsops_check_no_self_overlap(nz, "nz"));
    return dsops_check_no_overlap(nd, "nd", nz, "nz");
}

/* Every NZ element in order: to_nz copies ND element (r, c) in, or zero for padding; else copies it out. */
static void fractal_nz_copy(const dsops_fractal_nz_args *a, bool to_nz)
{
    const dsops_tensor *nd = &a->nd, *nz = &a->nz;
    const int b = nd->ndim - 2;
    const size_t es = dsops_dtype_size(nd->dtype);
    int64_t batches = 1;
    for (int d = 0; d < b; d++)
        batches *= nd->shape[d];
    const int64_t R = nd->shape[b], C = nd->shape[b + 1], C1 = nz->shape[b], RP = nz->shape[b + 1],
                  C0 = nz->shape[b + 2];
    for (int64_t i = 0; i < batches; i++) {
        int64_t nd_base = 0, nz_base = 0, rest = i;
        for (int d = b - 1; d >= 0; d--) { /* the leading index of batch i */
            int64_t k = rest % nd->shape[d];
            rest /= nd->shape[d];
            nd_base += k * nd->stride[d];
            nz_base += k * nz->stride[d];
        }
        for (int64_t c1 = 0; c1 < C1; c1++)
            for (int64_t r = 0; r < RP; r++)
                for (int64_t c0 = 0; c0 < C0; c0++) {
                    int64_t c = c1 * C0 + c0;
                    char *z = (char *)nz->data +
                              (size_t)(nz_base + c1 * nz->stride[b] + r * nz->stride[b + 1] + c0 * nz->stride[b + 2]) * es;
                    bool inside = r < R && c < C;
                    char *n = inside ? (char *)nd->data +
                                           (size_t)(nd_base + r * nd->stride[b] + c * nd->stride[b + 1]) * es
                                     : NULL;
                    if (to_nz && inside)
                        memcpy(z, n, es);
                    else if (to_nz)
                        memset(z, 0, es);
                    else if (inside)
                        memcpy(n, z, es);
                }
    }
}

static dsops_status fractal_nz_run(dsops_context *ctx, const dsops_fractal_nz_args *a, bool to_nz)
{
    (void)ctx; /* one pass of copies: no threads, no scratch */
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    DSOPS_TRY(fractal_nz_check(a));
    dsops_clear_error();
    fractal_nz_copy(a, to_nz);
    return DSOPS_OK;
}

dsops_status dsops_nd_to_fractal_nz(dsops_context *ctx, const dsops_fractal_nz_args *a)
{
    return fractal_nz_run(ctx, a, true);
}

dsops_status dsops_fractal_nz_to_nd(dsops_context *ctx, const dsops_fractal_nz_args *a)
{
    return fractal_nz_run(ctx, a, false);
}
