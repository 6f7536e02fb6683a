/* Helpers shared by the case generators of every operator family (cases_internal.h): the seeded
 * generator, bf16 / fp16 rounding, owned buffers, row fills, the vendor quantisers and the paged caches; and the
 * pieces the adversarial problems share (problems.h).
 *
 * Every generated row draws from its own generator seeded from (seed, stream, row): the data do not
 * depend on the thread count and rows fill in parallel. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases_internal.h"
#include "ref.h"

/* ---- owned buffers and case tables ------------------------------------------------------------- */

/* A zeroed allocation recorded in an owner's buffer list (freed with cases_free_owned); NULL when memory or
 * the list runs out. */
void *cases_alloc_owned(void **buffers, int *nbuffers, int capacity, size_t bytes)
{
    if (*nbuffers >= capacity)
        return NULL;
    void *m = calloc(1, bytes ? bytes : 1);
    if (m)
        buffers[(*nbuffers)++] = m;
    return m;
}

void cases_free_owned(void **buffers, int nbuffers)
{
    for (int i = 0; i < nbuffers; i++)
        free(buffers[i]);
}

/* Stores n in *count (when count is not NULL) and returns table. */
const void *cases_table(const void *table, int n, int *count)
{
    if (count)
        *count = n;
    return table;
}

/* Frees the n owned buffers, then p. */
void cases_problem_release(void *buffers[], int n, void *p)
{
    cases_free_owned(buffers, n);
    free(p);
}

/* The case named `name` in a table whose entries start with their name. */
const void *cases_find_case(const void *table, int count, size_t stride, const char *name)
{
    for (int i = 0; name && i < count; i++) {
        const char *entry_name = *(const char *const *)((const char *)table + (size_t)i * stride);
        if (strcmp(entry_name, name) == 0)
            return (const char *)table + (size_t)i * stride;
    }
    return NULL;
}

/* ---- generator ----------------------------------------------------------------------------------- */

uint64_t cases_rng_next(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Fills v[0 .. n-1] with U(-1, 1) fp32 values, two 24-bit draws per 64-bit output. */
void cases_rng_uniform_pm1(rng *r, float *v, size_t n)
{
    const float k = 1.0f / 16777216.0f;
    size_t i = 0;
    for (; i + 1 < n; i += 2) {
        uint64_t x = cases_rng_next(r);
        v[i] = (float)(x >> 40) * k * 2.0f - 1.0f;
        v[i + 1] = (float)((x >> 16) & 0xffffffu) * k * 2.0f - 1.0f;
    }
    if (i < n)
        v[i] = (float)(cases_rng_next(r) >> 40) * k * 2.0f - 1.0f;
}

uint64_t cases_rng_below(rng *r, uint64_t n) { return cases_rng_next(r) % n; }

float cases_bf16_value(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Inline arithmetic, not a call into the library: the composite baseline (composite.c) rounds every element
 * with it, and a call per element would slow that baseline down. */
uint16_t cases_bf16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Fills v[0 .. n-1] with N(0,1) values (Box-Muller, two values per 64-bit draw). */
void cases_rng_normal(rng *r, float *v, size_t n)
{
    const float k = 1.0f / 16777216.0f, two_pi = 6.28318530717958647692f;
    for (size_t i = 0; i < n; i += 2) {
        uint64_t x = cases_rng_next(r);
        float u1 = (float)((x >> 40) + 1) * k; /* (0, 1] */
        float u2 = (float)((x >> 16) & 0xffffffu) * k;
        float rad = sqrtf(-2.0f * logf(u1));
        v[i] = rad * cosf(two_pi * u2);
        if (i + 1 < n)
            v[i + 1] = rad * sinf(two_pi * u2);
    }
}

float cases_rng_unit(rng *r) { return (float)(cases_rng_next(r) >> 40) * (1.0f / 16777216.0f); } /* [0, 1) */

float cases_rng_uniform(rng *r, float lo, float hi)
{
    float v = lo + (hi - lo) * cases_rng_unit(r);
    return v < hi ? v : lo;
}

int64_t cases_rng_int(rng *r, int64_t lo, int64_t hi)
{
    if (hi <= lo)
        return lo;
    return lo + (int64_t)cases_rng_below(r, (uint64_t)(hi - lo) + 1);
}

uint16_t cases_fp16_bits(float f)
{
    uint16_t h;
    dsops_fp32_to_fp16(&f, &h, 1);
    return h;
}

float cases_fp16_value(uint16_t h)
{
    float f;
    dsops_fp16_to_fp32(&h, &f, 1);
    return f;
}

rng cases_row_rng(uint64_t seed, uint64_t stream, int64_t row)
{
    rng r = {seed ^ (stream << 56) ^ ((uint64_t)row * 0xd1b54a32d192ed03ull)};
    cases_rng_next(&r); /* decorrelate neighbouring rows */
    return r;
}

/* rows x cols bf16 values amp * U(-1,1), one generator per row (parallel, thread-count independent). */
void cases_fill_bf16(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, float amp, uint16_t *dst)
{
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        float v[CASES_MAX_ROW];
        cases_row_uniform(seed, stream, row, v, cols);
        for (int64_t k = 0; k < cols; k++)
            dst[row * cols + k] = cases_bf16_bits(amp * v[k]);
    }
}

/* int8 wq_b: each row is the bf16 row amp * U(-1,1), quantised by Q8 of spec §2.7 (the draws are finite) */
void cases_fill_q8_bf16(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, float amp, int8_t *dst,
                        float *scale)
{
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        float v[CASES_MAX_ROW];
        cases_row_uniform(seed, stream, row, v, cols);
        for (int64_t k = 0; k < cols; k++)
            v[k] = cases_bf16_value(cases_bf16_bits(amp * v[k]));
        scale[row] = cases_q8_row(v, cols, dst + row * cols);
    }
}

/* perm[0 .. n-1] = a random permutation of 0 ... n-1 (Fisher-Yates) from r. */
void cases_shuffle(rng *r, int32_t *perm, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)cases_rng_below(r, (uint64_t)i + 1);
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* round to nearest, ties to even, for |x| < 2^22 (adding and removing 1.5 * 2^23 in fp32) */
float cases_rint_small(float x)
{
    const float big = 12582912.0f; /* no -ffast-math: the sum is not folded away */
    float y = x + big;
    return y - big;
}

/* Vendor test quantiser of one group: scale = max(amax, 1e-8)/127, q = clamp(round(v/scale), -128, 127). */
float cases_quant_group(const float *v, int8_t *q, int n)
{
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0}; /* eight independent maxima (n is a multiple of 8) */
    for (int i = 0; i < n; i += 8)
        for (int k = 0; k < 8; k++) {
            float a = fabsf(v[i + k]);
            lane[k] = a > lane[k] ? a : lane[k];
        }
    float amax = 0.0f;
    for (int k = 0; k < 8; k++)
        amax = lane[k] > amax ? lane[k] : amax;
    float scale = (amax > 1e-8f ? amax : 1e-8f) / 127.0f;
    for (int i = 0; i < n; i++) {
        float r = cases_rint_small(v[i] / scale);
        q[i] = (int8_t)(r > 127.0f ? 127 : (r < -128.0f ? -128 : (int)r));
    }
    return scale;
}

/* rows x cols int8 values uniform in [-128, 128), eight per generator output. */
void cases_fill_i8(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, int8_t *dst)
{
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        rng r = cases_row_rng(seed, stream, row);
        uint64_t bits = 0;
        for (int64_t k = 0; k < cols; k++) {
            if (k % 8 == 0)
                bits = cases_rng_next(&r);
            dst[row * cols + k] = (int8_t)(uint8_t)(bits >> (8 * (k % 8)));
        }
    }
}

/* n fp32 values U(-1,1) from one generator. */
void cases_fill_f32(uint64_t seed, uint64_t stream, int64_t n, float *dst)
{
    rng r = cases_row_rng(seed, stream, 0);
    cases_rng_uniform_pm1(&r, dst, (size_t)n);
}

/* fp32 -> fp16 bits, round to nearest even (the draws here are finite and below 1 in magnitude). */
uint16_t cases_fp16_bits_finite(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a < 0x38800000u) { /* below 2^-14: subnormal; |f| * 2^24 rounded to an integer */
        const float big = 8388608.0f;
        float m;
        uint32_t ua = a;
        memcpy(&m, &ua, sizeof m);
        m = (m * 16777216.0f + big) - big;
        return (uint16_t)(sign | (uint16_t)m);
    }
    uint32_t h = (a >> 13) - ((uint32_t)(127 - 15) << 10);
    const uint32_t rest = a & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}


/* The generator of one row of one stream of cases_fill_range: the seed moved by the stream and row, then
 * two draws so that neighbouring rows start far apart. */
static rng range_row_rng(uint64_t seed, uint64_t stream, int64_t row)
{
    rng r = {seed + stream * 0x632be59bd9b4e019ull};
    r.s ^= cases_rng_next(&r) + (uint64_t)row * 0x9e3779b97f4a7c15ull;
    cases_rng_next(&r);
    return r;
}

/* rows x cols values lo + (hi - lo) U[0, 1), stored as bf16 or fp32 (dst is [rows, cols] of dtype dt). */
void cases_fill_range(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, float lo, float hi,
                      dsops_dtype dt, void *dst)
{
    const float half = 0.5f * (hi - lo);
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        float v[CASES_MAX_RANGE_ROW]; /* 128 KiB on a thread's stack */
        rng r = range_row_rng(seed, stream, row);
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

/* ---- paged caches ------------------------------------------------------------------------------- */

/* One packed_int8 row [656] from 576 values: four int8 groups of 128, their fp32 scales, then 64 bf16 rope
 * values, each little-endian. */
static void pack656_row(const float *v, uint8_t *dst)
{
    for (int g = 0; g < 4; g++) {
        float s = cases_quant_group(v + g * 128, (int8_t *)dst + g * 128, 128);
        uint32_t u;
        memcpy(&u, &s, 4);
        for (int k = 0; k < 4; k++)
            dst[640 + 4 * g + k] = (uint8_t)(u >> (8 * k));
    }
    for (int k = 0; k < 64; k++) {
        uint16_t h = cases_bf16_bits(v[512 + k]);
        dst[512 + 2 * k] = (uint8_t)h;
        dst[512 + 2 * k + 1] = (uint8_t)(h >> 8);
    }
}

/* One FlashMLA FP8 row [656] from 576 values rounded to bf16, through the library's public quantiser
 * (spec §2.12; tests/test_fp8_cache.c holds it to the oracle byte for byte). */
static void fp8_row(const float *v, uint8_t *dst)
{
    uint16_t row[576];
    for (int k = 0; k < 576; k++)
        row[k] = cases_bf16_bits(v[k]);
    int64_t ks[3] = {1, 1, 576}, cs[3] = {1, 1, 656};
    dsops_fp8_cache_args a = {.layout = DSOPS_FP8_CACHE_V32};
    a.kv = dsops_tensor_make(row, DSOPS_BF16, 3, ks);
    a.cache = dsops_tensor_make(dst, DSOPS_UINT8, 3, cs);
    (void)dsops_fp8_cache_quantize(NULL, &a); /* valid by construction */
}

int cases_fill_latent_cache(void **buffers, int *nbuffers, int capacity, dsops_kv_layout layout, int64_t NB,
                            int64_t BS, int Dc, int Dr, uint64_t seed, uint64_t stream, cases_latent_cache *out)
{
    const int64_t rows = NB * BS;
    const int G = Dc / 128;
    memset(out, 0, sizeof *out);
    const int packed = layout == DSOPS_KV_PACKED_INT8 || layout == DSOPS_KV_FLASHMLA_FP8,
              int8 = layout == DSOPS_KV_SPLIT_INT8;
    if (Dc + Dr > CASES_MAX_KV_ROW || (packed && (Dc != 512 || Dr != 64)))
        return 0;
    uint8_t *kv = NULL;     /* packed_int8, flashmla_fp8: [NB, BS, 656] */
    uint16_t *rope = NULL;  /* split: [NB, BS, Dr] bf16 */
    void *nope = NULL;      /* split: [NB, BS, Dc] bf16 or int8 */
    float *scale = NULL;    /* split_int8: [NB, BS, Dc/128] fp32 */
    if (packed) {
        if (!(kv = cases_alloc_owned(buffers, nbuffers, capacity, (size_t)(rows * 656))))
            return 0;
    } else {
        rope = cases_alloc_owned(buffers, nbuffers, capacity, sizeof(uint16_t) * (size_t)(rows * Dr));
        nope = cases_alloc_owned(buffers, nbuffers, capacity, (int8 ? 1 : 2) * (size_t)(rows * Dc));
        scale = int8 ? cases_alloc_owned(buffers, nbuffers, capacity, sizeof(float) * (size_t)(rows * G)) : NULL;
        if (!rope || !nope || (int8 && !scale))
            return 0;
    }
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        float v[CASES_MAX_KV_ROW];
        cases_row_uniform(seed, stream, row, v, Dc + Dr);
        if (packed) {
            if (layout == DSOPS_KV_PACKED_INT8)
                pack656_row(v, kv + row * 656);
            else
                fp8_row(v, kv + row * 656);
            continue;
        }
        if (int8) {
            for (int g = 0; g < G; g++)
                scale[row * G + g] = cases_quant_group(v + g * 128, (int8_t *)nope + row * Dc + g * 128, 128);
        } else {
            for (int k = 0; k < Dc; k++)
                ((uint16_t *)nope)[row * Dc + k] = cases_bf16_bits(v[k]);
        }
        for (int k = 0; k < Dr; k++)
            rope[row * Dr + k] = cases_bf16_bits(v[Dc + k]);
    }
    if (packed) {
        out->packed = dsops_tensor_make(kv, DSOPS_UINT8, 3, (int64_t[]){NB, BS, 656});
        return 1;
    }
    out->rope = dsops_tensor_make(rope, DSOPS_BF16, 3, (int64_t[]){NB, BS, Dr});
    out->nope = dsops_tensor_make(nope, int8 ? DSOPS_INT8 : DSOPS_BF16, 3, (int64_t[]){NB, BS, Dc});
    if (int8)
        out->nope_scale = dsops_tensor_make(scale, DSOPS_FP32, 3, (int64_t[]){NB, BS, G});
    return 1;
}

int cases_make_prolog_paging(void **buffers, int *nbuffers, int capacity, rng *r, int64_t B, int64_t S, int64_t kv,
                             int64_t BS, cases_prolog_paging *out)
{
    const int64_t T = B * S, nb = (kv + BS - 1) / BS;
    int64_t NB = B * nb, MB = nb > 1 ? nb : 1;
    if (NB < 1)
        NB = 1;
    out->NB = NB;
    out->MB = MB;
    int32_t *bt = cases_alloc_owned(buffers, nbuffers, capacity, sizeof(int32_t) * (size_t)(B * MB > 0 ? B * MB : 1));
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)NB);
    int64_t *ci = cases_alloc_owned(buffers, nbuffers, capacity, sizeof(int64_t) * (size_t)(T > 0 ? T : 1));
    if (!bt || !perm || !ci) {
        free(perm);
        return 0;
    }
    cases_shuffle(r, perm, NB);
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < MB; j++)
            bt[b * MB + j] = j < nb ? perm[b * nb + j] : -1;
    free(perm);
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < S; i++) {
            int64_t pos = kv - S + i;
            ci[b * S + i] = (int64_t)bt[b * MB + pos / BS] * BS + pos % BS;
        }
    out->block_table = bt;
    out->cache_index = ci;
    return 1;
}

int cases_make_mla_inputs(void **buffers, int *nbuffers, int capacity, int64_t T, int64_t H, int64_t Q, int64_t N,
                          int64_t Dqn, int64_t Dc, int int8_wq_b, uint64_t seed, uint64_t first_stream,
                          cases_mla_inputs *out)
{
    const int64_t NG = N * (Dqn + 64), KV = Dc + 64;
    const uint64_t s = first_stream;
    memset(out, 0, sizeof *out);
    uint16_t *x = cases_alloc_owned(buffers, nbuffers, capacity, sizeof(uint16_t) * (size_t)(T * H));
    uint16_t *wq_a = cases_alloc_owned(buffers, nbuffers, capacity, sizeof(uint16_t) * (size_t)(Q * H));
    uint16_t *g_cq = cases_alloc_owned(buffers, nbuffers, capacity, sizeof(uint16_t) * (size_t)Q);
    uint16_t *w_uk = cases_alloc_owned(buffers, nbuffers, capacity, sizeof(uint16_t) * (size_t)(N * Dqn * Dc));
    uint16_t *wkv_a = cases_alloc_owned(buffers, nbuffers, capacity, sizeof(uint16_t) * (size_t)(KV * H));
    uint16_t *g_ckv = cases_alloc_owned(buffers, nbuffers, capacity, sizeof(uint16_t) * (size_t)Dc);
    uint16_t *cosb = cases_alloc_owned(buffers, nbuffers, capacity, sizeof(uint16_t) * (size_t)(T * 64));
    uint16_t *sinb = cases_alloc_owned(buffers, nbuffers, capacity, sizeof(uint16_t) * (size_t)(T * 64));
    void *wq_b = cases_alloc_owned(buffers, nbuffers, capacity, (int8_wq_b ? 1 : 2) * (size_t)(NG * Q));
    float *wq_b_scale = int8_wq_b ? cases_alloc_owned(buffers, nbuffers, capacity, sizeof(float) * (size_t)NG) : NULL;
    if (!x || !wq_a || !g_cq || !w_uk || !wkv_a || !g_ckv || !cosb || !sinb || !wq_b || (int8_wq_b && !wq_b_scale))
        return 0;
    cases_fill_bf16(seed, s + CASES_MLA_X, T, H, 1.0f, x);
    cases_fill_bf16(seed, s + CASES_MLA_WQ_A, Q, H, 0.1f, wq_a);
    if (int8_wq_b)
        cases_fill_q8_bf16(seed, s + CASES_MLA_WQ_B, NG, Q, 0.1f, wq_b, wq_b_scale);
    else
        cases_fill_bf16(seed, s + CASES_MLA_WQ_B, NG, Q, 0.1f, wq_b);
    cases_fill_bf16(seed, s + CASES_MLA_W_UK, N * Dqn, Dc, 0.1f, w_uk);
    cases_fill_bf16(seed, s + CASES_MLA_WKV_A, KV, H, 0.1f, wkv_a);
    cases_fill_bf16(seed, s + CASES_MLA_GAMMA, 1, Q, 1.0f, g_cq);
    cases_fill_bf16(seed ^ 0x5555u, s + CASES_MLA_GAMMA, 1, Dc, 1.0f, g_ckv);
    cases_fill_bf16(seed, s + CASES_MLA_ROPE, T, 64, 0.1f, cosb);
    cases_fill_bf16(seed ^ 0x5555u, s + CASES_MLA_ROPE, T, 64, 0.1f, sinb);
    out->x = dsops_tensor_make(x, DSOPS_BF16, 2, (int64_t[]){T, H});
    out->wq_a = dsops_tensor_make(wq_a, DSOPS_BF16, 2, (int64_t[]){Q, H});
    out->gamma_cq = dsops_tensor_make(g_cq, DSOPS_BF16, 1, (int64_t[]){Q});
    out->wq_b = dsops_tensor_make(wq_b, int8_wq_b ? DSOPS_INT8 : DSOPS_BF16, 2, (int64_t[]){NG, Q});
    if (int8_wq_b)
        out->wq_b_scale = dsops_tensor_make(wq_b_scale, DSOPS_FP32, 1, (int64_t[]){NG});
    out->w_uk = dsops_tensor_make(w_uk, DSOPS_BF16, 3, (int64_t[]){N, Dqn, Dc});
    out->wkv_a = dsops_tensor_make(wkv_a, DSOPS_BF16, 2, (int64_t[]){KV, H});
    out->gamma_ckv = dsops_tensor_make(g_ckv, DSOPS_BF16, 1, (int64_t[]){Dc});
    out->rope_cos = dsops_tensor_make(cosb, DSOPS_BF16, 2, (int64_t[]){T, 64});
    out->rope_sin = dsops_tensor_make(sinb, DSOPS_BF16, 2, (int64_t[]){T, 64});
    return 1;
}

int cases_make_indexer_weights(void **buffers, int *nbuffers, int capacity, int64_t H, int64_t Q, int64_t NI,
                               int64_t DI, int int8, uint64_t seed, uint64_t first_stream, cases_indexer_weights *out)
{
    const int64_t NQ = NI * DI;
    const uint64_t s = first_stream;
    memset(out, 0, sizeof *out);
    void *wq_b = cases_alloc_owned(buffers, nbuffers, capacity, (int8 ? 1 : 2) * (size_t)(NQ * Q));
    float *wq_b_scale = int8 ? cases_alloc_owned(buffers, nbuffers, capacity, sizeof(float) * (size_t)NQ) : NULL;
    uint16_t *wk = cases_alloc_owned(buffers, nbuffers, capacity, sizeof(uint16_t) * (size_t)(DI * H));
    uint16_t *wproj = cases_alloc_owned(buffers, nbuffers, capacity, sizeof(uint16_t) * (size_t)(NI * H));
    uint16_t *gamma = cases_alloc_owned(buffers, nbuffers, capacity, sizeof(uint16_t) * (size_t)DI);
    uint16_t *beta = cases_alloc_owned(buffers, nbuffers, capacity, sizeof(uint16_t) * (size_t)DI);
    if (!wq_b || (int8 && !wq_b_scale) || !wk || !wproj || !gamma || !beta)
        return 0;
    if (int8) {
        cases_fill_i8(seed, s + CASES_INDEXER_WQ_B, NQ, Q, wq_b);
        cases_fill_f32(seed, s + CASES_INDEXER_WQ_B_SCALE, NQ, wq_b_scale);
    } else {
        cases_fill_bf16(seed, s + CASES_INDEXER_WQ_B, NQ, Q, 1.0f, wq_b);
    }
    cases_fill_bf16(seed, s + CASES_INDEXER_WK, DI, H, 1.0f, wk);
    cases_fill_bf16(seed, s + CASES_INDEXER_WPROJ, NI, H, 1.0f, wproj);
    for (int64_t d = 0; d < DI; d++) {
        gamma[d] = cases_bf16_bits(1.0f);
        beta[d] = cases_bf16_bits(0.0f);
    }
    out->idx_wq_b = dsops_tensor_make(wq_b, int8 ? DSOPS_INT8 : DSOPS_BF16, 2, (int64_t[]){NQ, Q});
    if (int8)
        out->idx_wq_b_scale = dsops_tensor_make(wq_b_scale, DSOPS_FP32, 1, (int64_t[]){NQ});
    out->idx_wk = dsops_tensor_make(wk, DSOPS_BF16, 2, (int64_t[]){DI, H});
    out->weights_proj = dsops_tensor_make(wproj, DSOPS_BF16, 2, (int64_t[]){NI, H});
    out->ln_gamma_k = dsops_tensor_make(gamma, DSOPS_BF16, 1, (int64_t[]){DI});
    out->ln_beta_k = dsops_tensor_make(beta, DSOPS_BF16, 1, (int64_t[]){DI});
    return 1;
}

int cases_record_set_int(void *record, const char *op, const char *param, int value)
{
    const dsops_op_desc *d = dsops_op_find(op);
    for (size_t i = 0; d && i < d->n_params; i++)
        if (!strcmp(d->params[i].name, param) &&
            (d->params[i].type == DSOPS_PARAM_INT || d->params[i].type == DSOPS_PARAM_ENUM)) {
            memcpy((unsigned char *)record + d->params[i].offset, &value, sizeof value);
            return 0;
        }
    return -1;
}

void *cases_wrapped_record(void **buffers, int *nbuffers, int capacity, const char *op, const void *args,
                           size_t size, const char *param, int value)
{
    const dsops_op_desc *d = dsops_op_find(op);
    if (!d || d->args_size < size)
        return NULL;
    unsigned char *record = cases_alloc_owned(buffers, nbuffers, capacity, d->args_size);
    if (!record || d->init(record, d->default_preset) != DSOPS_OK)
        return NULL;
    memcpy(record, args, size); /* a wrapping record starts with the args struct */
    return !param || cases_record_set_int(record, op, param, value) == 0 ? record : NULL;
}

/* ---- the pieces the adversarial problems share (problems.h) --------------------------------------- */

void *cases_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "out of memory (%zu x %zu bytes)\n", n, size);
        abort();
    }
    return p;
}

const char *cases_layout_name(dsops_kv_layout l)
{
    static const char *const names[] = {"split_bf16", "split_int8", "packed_int8", "flashmla_fp8"}; /* enum order */
    return (unsigned)l < sizeof names / sizeof *names ? names[l] : "unknown";
}

const char *cases_rope_name(dsops_rope_mode m)
{
    return m == DSOPS_ROPE_INTERLEAVED ? "interleaved" : (m == DSOPS_ROPE_HALF ? "half" : "in_half_out");
}

void cases_put_u16(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, uint16_t v)
{
    memcpy(tf_eaddr(t, i0, i1, i2), &v, 2);
}

void cases_put_i8(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, int8_t v)
{
    memcpy(tf_eaddr(t, i0, i1, i2), &v, 1);
}

void cases_put_f32(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v)
{
    memcpy(tf_eaddr(t, i0, i1, i2), &v, 4);
}

dsops_tensor cases_view(void *data, dsops_dtype dt, int ndim, const int64_t *shape, const int64_t *outer_stride)
{
    dsops_tensor t = dsops_tensor_make(data, dt, ndim, shape);
    for (int d = 0; d + 1 < ndim; d++)
        t.stride[d] = outer_stride[d];
    t.stride[ndim - 1] = 1;
    return t;
}

int64_t cases_sequences(int B, const int *S, const int *seqused, int32_t **cu, int32_t **used)
{
    *cu = cases_xcalloc((size_t)B + 1, sizeof(int32_t));
    *used = cases_xcalloc((size_t)B, sizeof(int32_t));
    int64_t T = 0;
    for (int b = 0; b < B; b++) {
        (*cu)[b] = (int32_t)T;
        T += S[b];
        (*used)[b] = seqused[b];
    }
    (*cu)[B] = (int32_t)T;
    return T;
}

cases_paging cases_block_table(rng *r, int B, const int64_t *keys, int BS, int extra_blocks, int extra_cols,
                               int garbage_kinds, const unsigned char *dead)
{
    cases_paging pg = {.NB = extra_blocks, .MB = 0};
    for (int b = 0; b < B; b++) {
        const int64_t nb = (keys[b] + BS - 1) / BS;
        pg.NB += nb;
        pg.MB = nb > pg.MB ? nb : pg.MB;
    }
    pg.MB += extra_cols;
    if (pg.MB < 1)
        pg.MB = 1;
    if (pg.NB < 1)
        pg.NB = 1;
    const int64_t NB = pg.NB, MB = pg.MB;
    int32_t *perm = cases_xcalloc((size_t)NB, sizeof(int32_t));
    pg.owner = cases_xcalloc((size_t)NB, sizeof(int32_t));
    for (int64_t i = 0; i < NB; i++)
        pg.owner[i] = -1;
    cases_shuffle(r, perm, NB);
    pg.table = cases_xcalloc((size_t)(B * MB), sizeof(int32_t));
    const int32_t garbage[6] = {-1, 99999, INT32_MIN, -7, INT32_MAX, (int32_t)NB};
    for (int b = 0, next = 0; b < B; b++) {
        const int64_t nb = (keys[b] + BS - 1) / BS;
        const int is_dead = dead && dead[b];
        for (int64_t j = 0; j < MB; j++) {
            int32_t *e = &pg.table[b * MB + j];
            if (is_dead) {
                *e = garbage[(b + j) % 6];
            } else if (j < nb) {
                *e = perm[next + j];
                pg.owner[*e] = b;
            } else {
                *e = garbage_kinds > 0 ? garbage[(b + j) % garbage_kinds] : -1;
            }
        }
        next += (int)nb; /* a dead sequence's blocks stay unreferenced */
    }
    free(perm);
    return pg;
}

void cases_sequence_views(int B, int64_t MB, int32_t *table, int32_t *cu, int32_t *used, dsops_tensor *block_table,
                          dsops_tensor *cu_seqlens_q, dsops_tensor *seqused_kv)
{
    const int64_t st[2] = {B, MB}, sc[1] = {B + 1}, su[1] = {B};
    *block_table = dsops_tensor_make(table, DSOPS_INT32, 2, st);
    *cu_seqlens_q = dsops_tensor_make(cu, DSOPS_INT32, 1, sc);
    *seqused_kv = dsops_tensor_make(used, DSOPS_INT32, 1, su);
}

void cases_fill_sentinel(void *buf, size_t esz, int64_t n, uint32_t sentinel)
{
    const uint16_t s16 = (uint16_t)sentinel;
    for (int64_t i = 0; i < n; i++)
        memcpy((unsigned char *)buf + (size_t)i * esz, esz == 2 ? (const void *)&s16 : (const void *)&sentinel, esz);
}

/* 1 if the element of esz (2 or 4) bytes at e holds the sentinel's low esz bytes. */
static int element_holds_sentinel(const unsigned char *e, size_t esz, uint32_t sentinel)
{
    if (esz == 2) {
        uint16_t v;
        memcpy(&v, e, 2);
        return v == (uint16_t)sentinel;
    }
    uint32_t v;
    memcpy(&v, e, 4);
    return v == sentinel;
}

int cases_holds_sentinel(const void *buf, size_t esz, int64_t n, uint32_t sentinel)
{
    for (int64_t i = 0; i < n; i++)
        if (!element_holds_sentinel((const unsigned char *)buf + (size_t)i * esz, esz, sentinel))
            return 0;
    return 1;
}

int cases_default_blocks(int64_t T, int64_t BS) { return (int)((2 * T + 3 + BS - 1) / BS); }

void cases_cache_indices(rng *r, int64_t rows, int64_t T, cases_index_mode mode, int64_t *cache_index)
{
    static const int64_t negs[3] = {-1, -7, INT64_MIN};
    int64_t *perm = cases_xcalloc((size_t)rows, sizeof(int64_t));
    for (int64_t i = 0; i < rows; i++)
        perm[i] = i;
    for (int64_t t = 0; t < T; t++) {
        const int64_t j = t + (int64_t)cases_rng_below(r, (uint64_t)(rows - t));
        const int64_t tmp = perm[t];
        perm[t] = perm[j];
        perm[j] = tmp;
        const int neg = mode == CASES_IDX_NONE || (mode == CASES_IDX_SOME && t % 3 == 1);
        cache_index[t] = neg ? negs[t % 3] : perm[t];
    }
    free(perm);
}

void cases_fill_rows(const dsops_tensor *t, rng *r, int64_t zero_rows)
{
    for (int64_t i = 0; i < t->shape[0]; i++)
        for (int64_t k = 0; k < t->shape[1]; k++)
            tf_putf(t, i, k, 0, i < zero_rows ? 0.0f : cases_rng_uniform(r, -1, 1));
}

void cases_fill_view_uniform(const dsops_tensor *t, rng *r, float lo, float hi)
{
    const int64_t s0 = t->ndim > 0 ? t->shape[0] : 1, s1 = t->ndim > 1 ? t->shape[1] : 1,
                  s2 = t->ndim > 2 ? t->shape[2] : 1;
    for (int64_t i = 0; i < s0; i++)
        for (int64_t j = 0; j < s1; j++)
            for (int64_t k = 0; k < s2; k++)
                tf_putf(t, i, j, k, cases_rng_uniform(r, lo, hi));
}

void cases_rope_tables(tf_fixture *f, dsops_dtype dt, int64_t T, int64_t pad, int shared, dsops_tensor *cos,
                       dsops_tensor *sin)
{
    enum { DR = 64 };
    if (shared) {
        const int64_t s[2] = {T, 2 * DR};
        const dsops_tensor both = tf_alloc_view(f, dt, 2, s, pad, 0, 0);
        *sin = both, *cos = both;
        sin->shape[1] = cos->shape[1] = DR;
        cos->data = tf_eaddr(&both, 0, DR, 0);
    } else {
        const int64_t s[2] = {T, DR};
        *cos = tf_alloc_view(f, dt, 2, s, pad, 0, 0);
        *sin = tf_alloc_view(f, dt, 2, s, pad, 0, 0);
    }
}

dsops_tensor cases_compact_index(const dsops_tensor *cache_index, int64_t *nw)
{
    const int64_t T = cache_index->shape[0];
    int64_t *ci = cases_xcalloc((size_t)(T > 0 ? T : 1), sizeof(int64_t));
    *nw = 0;
    for (int64_t t = 0; t < T; t++)
        ci[t] = tf_get_index(cache_index, t) >= 0 ? (*nw)++ : -1;
    return dsops_tensor_make(ci, DSOPS_INT64, 1, &T);
}

void cases_dense_f32(const dsops_tensor *t, float *dst)
{
    const int64_t s0 = t->shape[0], s1 = t->ndim > 1 ? t->shape[1] : 1, s2 = t->ndim > 2 ? t->shape[2] : 1;
    for (int64_t i = 0; i < s0; i++)
        for (int64_t j = 0; j < s1; j++)
            for (int64_t k = 0; k < s2; k++)
                dst[(i * s1 + j) * s2 + k] = tf_getf(t, i, j, k);
}

void cases_each_in_cache_row(const dsops_tensor *t, int64_t r, tf_elem_fn fn, void *ctx)
{
    if (!t->data)
        return;
    const int64_t BS = t->shape[1], blk = r / BS, off = r % BS, W = t->ndim > 2 ? t->shape[2] : 1;
    const size_t es = dsops_dtype_size(t->dtype);
    for (int64_t k = 0; k < W; k++)
        fn(ctx, tf_eaddr(t, blk, off, k), es);
}

unsigned char *cases_gather(cases_each_written_fn each, const void *args, size_t *n)
{
    tf_gather_ctx g = {NULL, 0, 0};
    each(args, tf_gather_fn, &g);
    *n = g.n;
    return g.buf;
}

/* ---- uniform buffers (the hc_pre / hc_post problems) ----------------------------------------------- */

void *cases_uniform_buffer(rng *r, dsops_dtype dt, size_t n, float lo, float hi)
{
    void *p = cases_xcalloc(n + 1, dsops_dtype_size(dt));
    for (size_t i = 0; i < n; i++) {
        float v = cases_rng_uniform(r, lo, hi);
        if (dt == DSOPS_FP32)
            ((float *)p)[i] = v;
        else
            ((uint16_t *)p)[i] = cases_bf16_bits(v);
    }
    return p;
}

/* ---- the V4 prologs' problems (mla_prolog_v4.c, indexer_prolog_v4.c) ------------------------------- */

/* The indices of element e (logical row-major order) of a view of rank <= 3. */
static void v4p_unravel(const dsops_tensor *t, int64_t e, int64_t i[3])
{
    i[0] = i[1] = i[2] = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        i[d] = e % t->shape[d];
        e /= t->shape[d];
    }
}

int64_t v4p_numel(const dsops_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

unsigned char *v4p_elem(const dsops_tensor *t, int64_t e)
{
    int64_t i[3];
    v4p_unravel(t, e, i);
    return tf_eaddr(t, i[0], i[1], i[2]);
}

float v4p_get(const dsops_tensor *t, int64_t e)
{
    int64_t i[3];
    v4p_unravel(t, e, i);
    return tf_getf(t, i[0], i[1], i[2]);
}

void v4p_set(const dsops_tensor *t, int64_t e, float v)
{
    int64_t i[3];
    v4p_unravel(t, e, i);
    tf_putf(t, i[0], i[1], i[2], v);
}

void v4p_sentinel(dsops_dtype dt, unsigned char *pat)
{
    const uint32_t f32 = CASES_GUARD_F32;
    const uint16_t bf = CASES_GUARD_BF16, hf = 0x7ea5u; /* fp16: a NaN too */
    switch (dt) {
    case DSOPS_FP32: memcpy(pat, &f32, 4); break;
    case DSOPS_BF16: memcpy(pat, &bf, 2); break;
    case DSOPS_FP16: memcpy(pat, &hf, 2); break;
    default: pat[0] = 0x80; break;
    }
}

/* Strides of a [shape] view: dense, or padded (every outer stride larger than the dense one; the inner
 * stride stays 1, and 1-D views stay dense). Returns the elements the view spans. */
static int64_t v4p_view_strides(int ndim, const int64_t *shape, int padded, int64_t *stride)
{
    int64_t span = 1;
    stride[ndim - 1] = 1;
    for (int d = ndim - 2; d >= 0; d--)
        stride[d] = stride[d + 1] * (shape[d + 1] > 0 ? shape[d + 1] : 1) + (padded ? 3 + 2 * d : 0);
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0)
            return 0;
        span += (shape[d] - 1) * stride[d];
    }
    return span;
}

void v4p_buf_poison(v4p_buf *b)
{
    unsigned char pat[4];
    const size_t es = dsops_dtype_size(b->t.dtype);
    v4p_sentinel(b->t.dtype, pat);
    for (size_t i = 0; i < b->bytes; i++)
        b->buf[i] = pat[i % es];
}

void v4p_buf_make(v4p_buf *b, const char *name, dsops_dtype dt, int ndim, const int64_t *shape, int padded)
{
    memset(b, 0, sizeof *b);
    b->name = name;
    int64_t stride[3];
    const int64_t span = v4p_view_strides(ndim, shape, padded, stride);
    const size_t es = dsops_dtype_size(dt);
    b->bytes = (size_t)(V4P_LEAD + span + V4P_GUARD) * es;
    b->buf = cases_xcalloc(b->bytes, 1);
    b->t = dsops_tensor_make(b->buf + V4P_LEAD * es, dt, ndim, shape);
    for (int d = 0; d < ndim; d++)
        b->t.stride[d] = stride[d];
    v4p_buf_poison(b);
}

void v4p_buf_free(v4p_buf *b)
{
    free(b->buf);
    b->buf = NULL;
}

float *v4p_buf_widen(const v4p_buf *b)
{
    const int64_t n = v4p_numel(&b->t);
    float *f = cases_xcalloc((size_t)n, sizeof(float));
    for (int64_t e = 0; e < n; e++)
        f[e] = v4p_get(&b->t, e);
    return f;
}

unsigned char *v4p_gather(const v4p_problem *pl, size_t *len)
{
    size_t total = 0;
    for (int i = 0; i < pl->nout; i++)
        total += (size_t)v4p_numel(&pl->out[i].t) * dsops_dtype_size(pl->out[i].t.dtype);
    unsigned char *g = cases_xcalloc(total + 1, 1);
    *len = 0;
    for (int i = 0; i < pl->nout; i++) {
        const dsops_tensor *t = &pl->out[i].t;
        const size_t es = dsops_dtype_size(t->dtype);
        const int64_t n = v4p_numel(t);
        for (int64_t e = 0; e < n; e++, *len += es)
            memcpy(g + *len, v4p_elem(t, e), es);
    }
    return g;
}

void v4p_init(v4p_problem *pl, const char *op, void *args, void (*oracle)(const void *args))
{
    pl->op = dsops_op_find(op);
    if (!pl->op || pl->op->init(args, DSOPS_PRESET_V4_FLASH) != DSOPS_OK) {
        printf("operator %s: no description or no V4 defaults (%s)\n", op, dsops_last_error());
        exit(1);
    }
    pl->args = args;
    pl->oracle = oracle;
}

dsops_tensor *v4p_member(const dsops_op_desc *op, void *args, const char *name)
{
    for (size_t i = 0; i < op->n_tensors; i++)
        if (strcmp(op->tensors[i].name, name) == 0)
            return (dsops_tensor *)((char *)args + op->tensors[i].offset);
    printf("%s has no tensor %s\n", op->name, name);
    exit(1);
}

dsops_tensor v4p_input(v4p_problem *pl, const char *name, dsops_dtype dt, int ndim, const int64_t *shape, int padded)
{
    v4p_buf *b = &pl->in[pl->nin++];
    v4p_buf_make(b, name, dt, ndim, shape, padded);
    return b->t;
}

void v4p_output(v4p_problem *pl, const char *name, dsops_dtype dt, int ndim, const int64_t *shape, int padded)
{
    v4p_buf *b = &pl->out[pl->nout++];
    v4p_buf_make(b, name, dt, ndim, shape, padded);
    *v4p_member(pl->op, pl->args, name) = b->t;
}

void v4p_free(v4p_problem *pl)
{
    for (int i = 0; i < pl->nin; i++)
        v4p_buf_free(&pl->in[i]);
    for (int i = 0; i < pl->nout; i++)
        v4p_buf_free(&pl->out[i]);
    free(pl);
}

void v4p_poison_outputs(v4p_problem *pl)
{
    for (int i = 0; i < pl->nout; i++)
        v4p_buf_poison(&pl->out[i]);
}

void *v4p_record(const v4p_problem *pl, const dsops_prepared *prep)
{
    void *b = cases_xcalloc(1, pl->op->args_size);
    memcpy(b, pl->args, pl->op->args_size);
    memcpy((char *)b + pl->op->prepared_offset, &prep, sizeof prep);
    return b;
}

v4p_ref v4p_reference(const v4p_problem *pl)
{
    void *a = v4p_record(pl, NULL);
    v4p_buf dense[4];
    for (int i = 0; i < pl->nout; i++) {
        const v4p_buf *o = &pl->out[i];
        v4p_buf_make(&dense[i], o->name, o->t.dtype, o->t.ndim, o->t.shape, 0);
        *v4p_member(pl->op, a, o->name) = dense[i].t;
    }
    pl->oracle(a);
    v4p_ref r = {{NULL, NULL, NULL, NULL}};
    for (int i = 0; i < pl->nout; i++) {
        r.v[i] = v4p_buf_widen(&dense[i]);
        v4p_buf_free(&dense[i]);
    }
    free(a);
    return r;
}

void v4p_ref_free(v4p_ref *r)
{
    for (int i = 0; i < 4; i++)
        free(r->v[i]);
}

void v4p_rope_tables(v4p_problem *pl, dsops_dtype dt, int64_t T, int padded, rng *r, dsops_tensor *cos,
                     dsops_tensor *sin)
{
    const int64_t s[2] = {T, 64};
    *cos = v4p_input(pl, "rope_cos", dt, 2, s, padded);                         /* [T, 64] */
    *sin = v4p_input(pl, "rope_sin", dt, 2, s, padded);                         /* [T, 64] */
    cases_fill_view_uniform(cos, r, -1, 1);
    cases_fill_view_uniform(sin, r, -1, 1);
}

void v4p_fill_q8_rows(const dsops_tensor *w, const dsops_tensor *scale, rng *r, float amp)
{
    const int64_t rows = w->shape[0], cols = w->shape[1];
    float *v = cases_xcalloc((size_t)cols, sizeof(float));
    int8_t *q = cases_xcalloc((size_t)cols, 1);
    for (int64_t i = 0; i < rows; i++) {
        for (int64_t k = 0; k < cols; k++)
            v[k] = amp != 0.0f ? dsops_ref_f32_from_bf16(dsops_ref_bf16_from_f32(amp * cases_rng_uniform(r, -1, 1)))
                               : (cases_rng_next(r) & 1 ? -1.0f : 0.0f);
        float s;
        dsops_ref_q8_group(v, cols, q, &s);
        for (int64_t k = 0; k < cols; k++)
            *(int8_t *)tf_eaddr(w, i, k, 0) = q[k];
        v4p_set(scale, i, s);
    }
    free(v);
    free(q);
}

/* ---- rows, int8 weights, cache rows and block tables of the V3.2 and V4 generators --------------- */

float cases_q8_row(const float *v, int64_t n, int8_t *q)
{
    float amax = 0.0f;
    for (int64_t k = 0; k < n; k++)
        amax = fabsf(v[k]) > amax ? fabsf(v[k]) : amax;
    const float sq = 127.0f / amax;
    if (amax == 0.0f || isinf(sq)) {
        memset(q, 0, (size_t)n);
        return 0.0f;
    }
    for (int64_t k = 0; k < n; k++)
        q[k] = (int8_t)(int)cases_rint_small(v[k] * sq);
    return 1.0f / sq;
}

void cases_row_uniform(uint64_t seed, uint64_t stream, int64_t row, float *v, int64_t n)
{
    rng r = cases_row_rng(seed, stream, row);
    cases_rng_uniform_pm1(&r, v, (size_t)n);
}

void cases_fill_int8_row(const dsops_tensor *t, int64_t i, rng *r, int extreme)
{
    for (int64_t k = 0; k < t->shape[1]; k++) {
        int v = extreme ? ((cases_rng_next(r) & 1) ? 127 : -128) : (int)cases_rng_int(r, -128, 127);
        *(int8_t *)tf_eaddr(t, i, k, 0) = (int8_t)v;
    }
}

void cases_fill_cache_elems(const dsops_tensor *t, int64_t b, int64_t o, int64_t n, rng *r, int nan)
{
    const int floats = t->dtype == DSOPS_BF16 || t->dtype == DSOPS_FP16 || t->dtype == DSOPS_FP32;
    for (int64_t c = 0; c < n; c++) {
        if (floats)
            tf_putf(t, b, o, c, nan ? NAN : cases_rng_uniform(r, -1, 1));
        else
            *tf_eaddr(t, b, o, c) = nan ? 0xff : (uint8_t)cases_rng_next(r);
    }
}

int cases_fill_block_table(rng *r, int B, const int *seqused, int R, int64_t BS, int64_t NB, int64_t MB, int32_t *bt)
{
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)(NB > 0 ? NB : 1));
    if (!perm)
        return 0;
    cases_shuffle(r, perm, NB);
    for (int64_t b = 0, next = 0; b < B; b++) {
        const int64_t nb = (seqused[b] / R + BS - 1) / BS;
        for (int64_t j = 0; j < MB; j++)
            bt[b * MB + j] = j < nb ? perm[next + j] : -1;
        next += nb;
    }
    free(perm);
    return 1;
}
