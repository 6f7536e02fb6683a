/* Reference oracles of the shared primitives (docs/OPERATORS.md §2.3 - §2.8): rmsnorm, layernorm, the RoPE
 * slice rotation and its tables, the Hadamard matrix and product, Q8 groups, quant_q8 and cache_store.
 *
 * Plain loops over one row at a time, every fp32 sum in ascending index order, every rounding point of
 * the spec applied where the spec puts it. Number formats come from the oracle's own helpers
 * (ref_sfa.c, ref_li.c), element access from ref_util.c. Tensors are read and written through their
 * strides. Built with -ffp-contract=off. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"
#include "ref_util.h"

/* fp64 -> bf16 with a single rounding (nearest, ties to even): 8 significant bits, subnormals at the
 * quantum 2^-133, overflow to +-Inf. */
uint16_t dsops_ref_bf16_from_f64(double d)
{
    if (isnan(d))
        return signbit(d) ? 0xffc0 : 0x7fc0;
    double a = fabs(d);
    uint16_t sign = signbit(d) ? 0x8000 : 0;
    if (a == 0.0)
        return sign;
    if (isinf(a))
        return (uint16_t)(sign | 0x7f80);
    int e;
    frexp(a, &e);                           /* a = m * 2^e, m in [0.5, 1) */
    int qexp = e - 8;                       /* the weight of the last of 8 significant bits */
    if (qexp < -133)
        qexp = -133;
    double m = ldexp(a, -qexp);             /* exact: an integer part below 256 and a fraction */
    double r = floor(m), frac = m - r;
    if (frac > 0.5 || (frac == 0.5 && fmod(r, 2.0) != 0.0))
        r += 1.0;
    float v = (float)ldexp(r, qexp);        /* exact in fp32, or +Inf beyond the bf16 range */
    uint32_t u = ref_bits_from_f32(v);
    return (uint16_t)(sign | (uint16_t)(u >> 16));
}

/* ---- row-level definitions -------------------------------------------------------------------- */

void dsops_ref_rmsnorm_row(const float *v, int64_t n, const float *gamma, float eps, float *y)
{
    /* v [n], gamma [n] or NULL, y [n] (may be v) */
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sum += v[i] * v[i];
    float ms = sum / (float)n;
    float r = sqrtf(ms + eps);
    for (int64_t i = 0; i < n; i++) {
        float q = v[i] / r;
        y[i] = gamma != NULL ? q * gamma[i] : q;
    }
}

void dsops_ref_layernorm_row(const float *v, int64_t n, const float *gamma, const float *beta, float eps, float *y)
{
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sum += v[i];
    float mu = sum / (float)n;
    float sq = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sq += (v[i] - mu) * (v[i] - mu);
    float var = sq / (float)n;
    float sd = sqrtf(var + eps);
    for (int64_t i = 0; i < n; i++) {
        float z = (v[i] - mu) / sd;
        if (gamma != NULL)
            z = z * gamma[i];
        if (beta != NULL)
            z = z + beta[i];
        y[i] = z;
    }
}

void dsops_ref_rope_row(const float *x, const float *c, const float *s, dsops_rope_mode mode, int inverse, float *y)
{
    /* x, c, s, y: [64]; the pair (a, b) of the table below rotates into (out_a, out_b) */
    for (int j = 0; j < 32; j++) {
        int ia, ib, oa, ob; /* inputs and outputs of pair j */
        if (mode == DSOPS_ROPE_INTERLEAVED) {
            ia = 2 * j, ib = 2 * j + 1, oa = 2 * j, ob = 2 * j + 1;
        } else if (mode == DSOPS_ROPE_HALF) {
            ia = j, ib = j + 32, oa = j, ob = j + 32;
        } else {
            ia = 2 * j, ib = 2 * j + 1, oa = j, ob = j + 32;
        }
        float sa = inverse ? -s[oa] : s[oa];
        float sb = inverse ? -s[ob] : s[ob];
        float pa = x[ia] * c[oa], qa = x[ib] * sa;
        float pb = x[ib] * c[ob], qb = x[ia] * sb;
        y[oa] = pa - qa;
        y[ob] = pb + qb;
    }
}

void dsops_ref_q8_group(const float *v, int64_t n, int8_t *q, float *scale)
{
    int nonfinite = 0;
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(v[i]) || isinf(v[i]))
            nonfinite = 1;
        else if (fabsf(v[i]) > amax)
            amax = fabsf(v[i]);
    }
    if (nonfinite) {
        for (int64_t i = 0; i < n; i++)
            q[i] = 0;
        *scale = NAN;
        return;
    }
    if (amax == 0.0f) {
        for (int64_t i = 0; i < n; i++)
            q[i] = 0;
        *scale = 0.0f;
        return;
    }
    float sq = 127.0f / amax;
    if (isinf(sq)) {
        for (int64_t i = 0; i < n; i++)
            q[i] = 0;
        *scale = 0.0f;
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float p = v[i] * sq;        /* fp32(v_i * sq) */
        q[i] = (int8_t)rintf(p);    /* default rounding: nearest, ties to even */
    }
    *scale = 1.0f / sq;
}

void dsops_ref_hadamard_row(const float *v, int64_t d, const float *hm, float *y)
{
    /* v [d], hm [d][d] (row k, column j), y [d] */
    for (int64_t j = 0; j < d; j++) {
        float acc = 0.0f;
        for (int64_t k = 0; k < d; k++)
            acc += v[k] * hm[k * d + j];
        y[j] = acc;
    }
}

/* ---- rmsnorm ---------------------------------------------------------------------------------- */

void dsops_ref_rmsnorm(const dsops_rmsnorm_args *a)
{
    int64_t T = a->x.shape[0], W = a->x.shape[1];
    float *g = NULL, *row = malloc((size_t)(W > 0 ? W : 1) * sizeof(float));
    if (a->weight.data != NULL) {
        g = malloc((size_t)W * sizeof(float));
        for (int64_t i = 0; i < W; i++)
            g[i] = ref_get_f(&a->weight, i, 0, 0); /* weight [W] bf16 or fp32 */
    }
    for (int64_t t = 0; t < T; t++) {
        for (int64_t i = 0; i < W; i++)
            row[i] = ref_get_f(&a->x, t, i, 0); /* x [T, W] bf16 */
        dsops_ref_rmsnorm_row(row, W, g, a->eps, row);
        for (int64_t i = 0; i < W; i++)
            ref_put_bf16(&a->y, t, i, 0, row[i]); /* y [T, W] bf16 */
    }
    free(g);
    free(row);
}

/* ---- rope tables -------------------------------------------------------------------------------- */

void dsops_ref_rope_freqs(const dsops_rope_tables_args *a, float freq[32])
{
    float theta = (float)a->base;
    for (int j = 0; j < 32; j++) {
        float expo = (float)(2 * j) / 64.0f;
        float p = (float)pow((double)theta, (double)expo); /* theta^(2j/64) rounded once to fp32 */
        freq[j] = 1.0f / p;
    }
    if (!a->yarn)
        return;
    const double pi = 3.14159265358979323846;
    double lo = floor(64.0 * log(a->yarn_original_len / (2.0 * pi * a->yarn_beta_fast)) / (2.0 * log(a->base)));
    double hi = ceil(64.0 * log(a->yarn_original_len / (2.0 * pi * a->yarn_beta_slow)) / (2.0 * log(a->base)));
    lo = fmax(lo, 0.0);
    hi = fmin(hi, 63.0);
    if (lo == hi)
        hi += 0.001;
    float f = (float)a->yarn_factor;
    for (int j = 0; j < 32; j++) {
        double ramp = fmin(fmax((j - lo) / (hi - lo), 0.0), 1.0);
        float r = (float)ramp;
        float keep = freq[j] * (1.0f - r);
        float scaled = (freq[j] / f) * r;
        freq[j] = keep + scaled;
    }
}

void dsops_ref_rope_tables_f64(const dsops_rope_tables_args *a, double *cos_out, double *sin_out)
{
    float freq[32];
    dsops_ref_rope_freqs(a, freq);
    int64_t T = a->positions.shape[0];
    for (int64_t t = 0; t < T; t++) {
        float p = (float)ref_get_i64(&a->positions, t, 0, 0);
        for (int j = 0; j < 32; j++) {
            float angle = p * freq[j];       /* a_j = fp32(fp32(p) * freq_j) */
            double c = cos((double)angle), s = sin((double)angle);
            int e0 = a->layout == DSOPS_ROPE_PAIRS ? 2 * j : j;
            int e1 = a->layout == DSOPS_ROPE_PAIRS ? 2 * j + 1 : j + 32;
            cos_out[t * 64 + e0] = c;
            cos_out[t * 64 + e1] = c;
            sin_out[t * 64 + e0] = s;
            sin_out[t * 64 + e1] = s;
        }
    }
}

/* Element [i, j] of t (bf16 or fp32) from an fp64 value rounded once. */
static void pr_put_f64(const dsops_tensor *t, int64_t i, int64_t j, double v)
{
    if (t->dtype == DSOPS_FP32) {
        ref_put_f32(t, i, j, 0, (float)v);
        return;
    }
    uint16_t h = dsops_ref_bf16_from_f64(v);
    memcpy(ref_at(t, i, j, 0), &h, sizeof h);
}

void dsops_ref_rope_tables(const dsops_rope_tables_args *a)
{
    int64_t T = a->positions.shape[0];
    size_t n = (size_t)(T > 0 ? T : 1) * 64;
    double *c = malloc(n * sizeof(double)), *s = malloc(n * sizeof(double));
    dsops_ref_rope_tables_f64(a, c, s);
    for (int64_t t = 0; t < T; t++)
        for (int64_t e = 0; e < 64; e++) {
            pr_put_f64(&a->cos, t, e, c[t * 64 + e]); /* cos [T, 64] */
            pr_put_f64(&a->sin, t, e, s[t * 64 + e]); /* sin [T, 64] */
        }
    free(c);
    free(s);
}

/* ---- rope_apply --------------------------------------------------------------------------------- */

void dsops_ref_rope_apply(const dsops_rope_apply_args *a)
{
    int64_t T = a->x.shape[0], N = a->x.shape[1], W = a->x.shape[2];
    int64_t off = a->rope_offset;
    for (int64_t t = 0; t < T; t++) {
        float c[64], s[64];
        ref_get_row(&a->rope_cos, t, 64, c); /* rope_cos [T, 64] */
        ref_get_row(&a->rope_sin, t, 64, s); /* rope_sin [T, 64] */
        for (int64_t h = 0; h < N; h++) {
            float xs[64], ys[64];
            for (int e = 0; e < 64; e++)
                xs[e] = ref_get_f(&a->x, t, h, off + e); /* x [T, N, W] bf16 */
            dsops_ref_rope_row(xs, c, s, a->rope_mode, a->rope_inverse, ys);
            for (int64_t w = 0; w < W; w++) {
                if (w >= off && w < off + 64) {
                    ref_put_bf16(&a->y, t, h, w, ys[w - off]);
                } else {
                    memcpy(ref_at(&a->y, t, h, w), ref_at(&a->x, t, h, w), 2); /* y [T, N, W] bf16 */
                }
            }
        }
    }
}

/* ---- hadamard_matrix ---------------------------------------------------------------------------- */

void dsops_ref_hadamard_matrix(const dsops_tensor *m)
{
    int64_t d = m->shape[0];
    double inv = 1.0 / sqrt((double)d);
    for (int64_t i = 0; i < d; i++)
        for (int64_t j = 0; j < d; j++) {
            int bits = 0;
            for (int64_t x = i & j; x != 0; x >>= 1)
                bits += (int)(x & 1);
            pr_put_f64(m, i, j, (bits % 2) ? -inv : inv);
        }
}

/* ---- quant_q8 ----------------------------------------------------------------------------------- */

void dsops_ref_quant_q8(const dsops_quant_q8_args *a)
{
    int64_t R = a->x.shape[0], W = a->x.shape[1], G = a->group;
    float *v = malloc((size_t)G * sizeof(float));
    int8_t *q = malloc((size_t)G);
    for (int64_t r = 0; r < R; r++)
        for (int64_t g = 0; g < W / G; g++) {
            float scale;
            for (int64_t i = 0; i < G; i++)
                v[i] = ref_get_f(&a->x, r, g * G + i, 0); /* x [R, W] bf16 or fp32 */
            dsops_ref_q8_group(v, G, q, &scale);
            for (int64_t i = 0; i < G; i++)
                ref_put_i8(&a->q, r, g * G + i, 0, q[i]);             /* q [R, W] int8 */
            ref_put_f32(&a->scale, r, g, 0, scale);                   /* scale [R, W/G] fp32 */
        }
    free(v);
    free(q);
}

/* ---- cache_store -------------------------------------------------------------------------------- */

void dsops_ref_cache_store(const dsops_cache_store_args *a)
{
    int64_t T = a->src.shape[0], W = a->src.shape[1];
    int64_t BS = a->cache.shape[1];
    int64_t G = a->group > 0 ? a->group : W;
    float *v = malloc((size_t)(G > 0 ? G : 1) * sizeof(float));
    int8_t *q = malloc((size_t)(G > 0 ? G : 1));
    for (int64_t t = 0; t < T; t++) {
        int64_t slot = ref_get_i64(&a->cache_index, t, 0, 0); /* cache_index [T] int64 */
        if (slot < 0)
            continue;                                   /* padding token: nothing is stored */
        int64_t blk = slot / BS, row = slot % BS;
        if (a->cache.dtype == DSOPS_UINT8) {            /* FlashMLA's FP8 rows (§2.12) */
            uint16_t v[576];
            uint8_t bytes[656];
            for (int64_t w = 0; w < W; w++)
                memcpy(&v[w], ref_at(&a->src, t, w, 0), 2);
            if (a->cache.shape[2] == 656) {             /* cache [NB, BS, 656] uint8 */
                dsops_ref_fp8_v32_row(v, bytes);
                for (int64_t k = 0; k < 656; k++)
                    *(uint8_t *)ref_at(&a->cache, blk, row, k) = bytes[k];
            } else {                                    /* MODEL1 blocks [NB, BS, 584], stride[0] the block length */
                uint8_t *block = (uint8_t *)a->cache.data + blk * a->cache.stride[0];
                dsops_ref_fp8_model1_row(v, block + 576 * row, block + 576 * BS + 8 * row);
            }
            continue;
        }
        if (a->cache.dtype == DSOPS_BF16) {
            for (int64_t w = 0; w < W; w++)             /* cache [NB, BS, W] bf16 */
                memcpy(ref_at(&a->cache, blk, row, w), ref_at(&a->src, t, w, 0), 2);
            continue;
        }
        for (int64_t g = 0; g < W / G; g++) {
            float s;
            for (int64_t i = 0; i < G; i++)
                v[i] = ref_get_f(&a->src, t, g * G + i, 0); /* src [T, W] bf16 */
            dsops_ref_q8_group(v, G, q, &s);
            for (int64_t i = 0; i < G; i++)
                ref_put_i8(&a->cache, blk, row, g * G + i, q[i]); /* cache [NB, BS, W] int8 */
            ref_put_f(&a->cache_scale, blk, row, g, s); /* cache_scale [NB, BS, W/G] (or [NB, BS]) fp32 / fp16 */
        }
    }
    free(v);
    free(q);
}

/* ---- FRACTAL_NZ ------------------------------------------------------------------------------------ */

/* Byte offset of NZ element (b, c / C0, r, c % C0) for ND element (b, r, c): C0 = 32 / es columns of 16-row
 * fractals, the rows rounded up to RP = 16 * ceil(R / 16), C1 = ceil(C / C0) column blocks per batch. */
static size_t nz_offset(int64_t b, int64_t r, int64_t c, int64_t R, int64_t C, size_t es)
{
    int64_t C0 = 32 / (int64_t)es, C1 = (C + C0 - 1) / C0, RP = (R + 15) / 16 * 16;
    return (size_t)(((b * C1 + c / C0) * RP + r) * C0 + c % C0) * es;
}

void dsops_ref_nd_to_fractal_nz(const void *nd, int64_t B, int64_t R, int64_t C, size_t es, void *nz)
{
    int64_t C0 = 32 / (int64_t)es, C1 = (C + C0 - 1) / C0, RP = (R + 15) / 16 * 16;
    memset(nz, 0, (size_t)(B * C1 * RP * C0) * es);
    for (int64_t b = 0; b < B; b++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++)
                memcpy((char *)nz + nz_offset(b, r, c, R, C, es), (const char *)nd + (size_t)((b * R + r) * C + c) * es,
                       es);
}

void dsops_ref_fractal_nz_to_nd(const void *nz, int64_t B, int64_t R, int64_t C, size_t es, void *nd)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++)
                memcpy((char *)nd + (size_t)((b * R + r) * C + c) * es, (const char *)nz + nz_offset(b, r, c, R, C, es),
                       es);
}
