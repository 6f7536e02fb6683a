/* indexer_prolog_v32 (docs/OPERATORS.md §4.2; docs/CASES.md "indexer_prolog_v32")
 * The named cases, their data generator and the bench adapter.
 *
 * Data (seed 7):
 *   x                              U(-1,1) bf16                                               [T, H]
 *   int8: qr, idx_wq_b             int8 uniform in [-128, 128)                       [T, Q], [NI*DI, Q]
 *         qr_scale, idx_wq_b_scale U(-1,1) fp32 (negative scales occur)                 [T], [NI*DI]
 *   bf16: qr, idx_wq_b             U(-1,1) bf16
 *   idx_wk, weights_proj           U(-1,1) bf16                                      [DI, H], [NI, H]
 *   ln_gamma_k, ln_beta_k          1 and 0 (bf16)                                                [DI]
 *   rope_cos, rope_sin             cos / sin of one random angle in [0, 2pi) per element, bf16 [T, 64]
 *   hadamard_q, hadamard_k         U(-1,1) bf16 (random matrices, as the vendor test)        [DI, DI]
 *   cache_index[t]                 slot(b, kv - S + i) through a random permutation of the blocks
 *   caches                         random in every row: int8 uniform with fp16 scales U(-1,1); bf16 U(-1,1)
 * Parameters are the vendor's (spec §5): ln_eps 1e-6, the case's rope mode, not inverse; weights_scale
 * 1 / sqrt(64 * 128) except for the DIA-style bf16 case (1, no Hadamard). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_family.h"
#include "cases.h"
#include "cases_internal.h"
#include "ref.h"

/* H 7168, Q 1536, NI 64, DI 128, BS 128 for every V3.2 case */
#define IDXP_DIMS .H = 7168, .Q = 1536, .NI = 64, .DI = 128, .BS = 128

static const dsops_idxp_case idxp_cases[] = {
    {.name = "v32_idx_prolog_int8_b4_s2_kv64k", .B = 4, .S = 2, .kv = 65536, IDXP_DIMS, .int8 = 1,
     .rope_mode = DSOPS_ROPE_HALF, .ci = 1},
    {.name = "v32_idx_prolog_int8_b8_s2_kv64k", .B = 8, .S = 2, .kv = 65536, IDXP_DIMS, .int8 = 1,
     .rope_mode = DSOPS_ROPE_HALF, .ci = 1},
    {.name = "v32_idx_prolog_int8_b1_s4096_kv64k", .B = 1, .S = 4096, .kv = 65536, IDXP_DIMS, .int8 = 1,
     .rope_mode = DSOPS_ROPE_HALF, .ci = 0, .ci_variant = "v32_idx_prolog_int8_b1_s4096_kv64k_ci"},
    {.name = "v32_idx_prolog_int8_b1_s4096_kv64k_ci", .B = 1, .S = 256, .kv = 65536, IDXP_DIMS, .int8 = 1,
     .rope_mode = DSOPS_ROPE_HALF, .ci = 1},
    {.name = "v32_idx_prolog_int8_b2_s4096_kv64k", .B = 2, .S = 4096, .kv = 65536, IDXP_DIMS, .int8 = 1,
     .rope_mode = DSOPS_ROPE_HALF, .ci = 0, .ci_variant = "v32_idx_prolog_int8_b2_s4096_kv64k_ci"},
    {.name = "v32_idx_prolog_int8_b2_s4096_kv64k_ci", .B = 2, .S = 128, .kv = 65536, IDXP_DIMS, .int8 = 1,
     .rope_mode = DSOPS_ROPE_HALF, .ci = 1},
    {.name = "v32_idx_prolog_int8_b128_s4_kv8k", .B = 128, .S = 4, .kv = 8192, IDXP_DIMS, .int8 = 1,
     .rope_mode = DSOPS_ROPE_HALF, .ci = 1},
    /* the cann-recipes-infer build of the int8 prolog rotates interleaved_in_half_out */
    {.name = "v32_idx_prolog_int8_r2_b4_s2_kv64k", .B = 4, .S = 2, .kv = 65536, IDXP_DIMS, .int8 = 1,
     .rope_mode = DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT, .ci = 1},
    /* dsops: the bf16 prolog of the fused DIA operator (no Hadamard, weights_scale 1, interleaved_in_half_out) */
    {.name = "v32_idx_prolog_bf16_b4_s2_kv64k", .B = 4, .S = 2, .kv = 65536, IDXP_DIMS, .int8 = 0,
     .hadamard = 0, .rope_mode = DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT, .unit_weights_scale = 1, .ci = 1},
};

static void *idxp_alloc(dsops_idxp_problem *p, size_t bytes) { return ALLOC_OWNED(p, bytes); }

enum {
    STREAM_IDXP_X = 41, STREAM_IDXP_QR = 42, STREAM_IDXP_QR_SCALE = 43,
    STREAM_IDXP_WEIGHTS = 44 /* ... 47: cases_make_indexer_weights */, STREAM_IDXP_ROPE = 48, STREAM_IDXP_HAD = 49,
    STREAM_IDXP_CACHE = 50
};

const dsops_idxp_case *dsops_idxp_cases(int *count) { return CASES_TABLE(idxp_cases, count); }
const dsops_idxp_case *dsops_idxp_case_find(const char *name) { return CASES_FIND(idxp_cases, name); }
void dsops_idxp_problem_free(dsops_idxp_problem *p) { if (p) cases_problem_release(p->buffers, p->nbuffers, p); }

/* Random contents of every key-cache row. */
static int idxp_fill_cache(dsops_idxp_problem *p, uint64_t seed)
{
    const dsops_idxp_case *c = &p->c;
    const int64_t rows = p->NB * c->BS, DI = c->DI;
    int64_t s3[3] = {p->NB, c->BS, DI}, s2[2] = {p->NB, c->BS};
    if (c->int8) {
        int8_t *key = idxp_alloc(p, (size_t)(rows * DI));                        /* [NB, BS, DI] int8 */
        uint16_t *scale = idxp_alloc(p, sizeof(uint16_t) * (size_t)rows);        /* [NB, BS] fp16 */
        if (!key || !scale)
            return 0;
        cases_fill_i8(seed, STREAM_IDXP_CACHE, rows, DI, key);
#pragma omp parallel for schedule(static)
        for (int64_t row = 0; row < rows; row++) {
            float v;
            rng r = cases_row_rng(seed ^ 0x5555u, STREAM_IDXP_CACHE, row);
            cases_rng_uniform_pm1(&r, &v, 1);
            scale[row] = cases_fp16_bits_finite(v);
        }
        p->args.idx_k_cache = dsops_tensor_make(key, DSOPS_INT8, 3, s3);
        p->args.idx_k_scale_cache = dsops_tensor_make(scale, DSOPS_FP16, 2, s2);
        return 1;
    }
    uint16_t *key = idxp_alloc(p, sizeof(uint16_t) * (size_t)(rows * DI));     /* [NB, BS, DI] bf16 */
    if (!key)
        return 0;
    cases_fill_bf16(seed, STREAM_IDXP_CACHE, rows, DI, 1.0f, key);
    p->args.idx_k_cache = dsops_tensor_make(key, DSOPS_BF16, 3, s3);
    return 1;
}

dsops_idxp_problem *dsops_idxp_problem_make(const dsops_idxp_case *c, uint64_t seed)
{
    if (!c || c->B < 0 || c->S < 0 || c->kv < c->S || c->H < 1 || c->H > CASES_MAX_ROW || c->Q < 1 ||
        c->Q > CASES_MAX_ROW || c->NI < 1 || c->DI < 64 || c->DI > CASES_MAX_ROW || c->BS < 1)
        return NULL;
    dsops_idxp_problem *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->c = *c;
    rng r = {seed};
    const int64_t B = c->B, S = c->S, H = c->H, Q = c->Q, NI = c->NI, DI = c->DI, BS = c->BS;
    const int64_t T = B * S, NQ = NI * DI;
    const int had = c->int8 || c->hadamard;
    p->T = T;

    /* parameters (vendor): set explicitly, every tensor absent until filled below */
    dsops_indexer_prolog_v32_args *a = &p->args;
    memset(a, 0, sizeof *a);
    a->ln_eps = 1e-6f;
    a->weights_scale = c->unit_weights_scale ? 1.0f : (float)(1.0 / sqrt(64.0 * 128.0));
    a->rope_mode = c->rope_mode;
    a->rope_inverse = 0;
    a->prepared = NULL;

    /* block table: a random permutation of the blocks, ceil(kv / BS) per sequence; cache_index */
    cases_prolog_paging paging;
    if (!cases_make_prolog_paging(OWNED_LIST(p), &r, B, S, c->kv, BS, &paging))
        goto fail;
    p->NB = paging.NB;
    p->MB = paging.MB;
    p->block_table = paging.block_table;

    /* inputs */
    const size_t qe = c->int8 ? 1 : 2;
    uint16_t *x = idxp_alloc(p, sizeof(uint16_t) * (size_t)(T * H));           /* [T, H] bf16 */
    void *qr = idxp_alloc(p, qe * (size_t)(T * Q));                             /* [T, Q] */
    float *qr_scale = c->int8 ? idxp_alloc(p, sizeof(float) * (size_t)(T > 0 ? T : 1)) : NULL; /* [T] */
    uint16_t *cosb = idxp_alloc(p, sizeof(uint16_t) * (size_t)(T * 64));       /* [T, 64] */
    uint16_t *sinb = idxp_alloc(p, sizeof(uint16_t) * (size_t)(T * 64));       /* [T, 64] */
    uint16_t *hq = had ? idxp_alloc(p, sizeof(uint16_t) * (size_t)(DI * DI)) : NULL; /* [DI, DI] */
    uint16_t *hk = had ? idxp_alloc(p, sizeof(uint16_t) * (size_t)(DI * DI)) : NULL; /* [DI, DI] */
    cases_indexer_weights w;
    if (!x || !qr || !cosb || !sinb || (c->int8 && !qr_scale) || (had && (!hq || !hk)) ||
        !cases_make_indexer_weights(OWNED_LIST(p), H, Q, NI, DI, c->int8, seed, STREAM_IDXP_WEIGHTS, &w))
        goto fail;
    cases_fill_bf16(seed, STREAM_IDXP_X, T, H, 1.0f, x);
    if (c->int8) {
        cases_fill_i8(seed, STREAM_IDXP_QR, T, Q, qr);
        cases_fill_f32(seed, STREAM_IDXP_QR_SCALE, T, qr_scale);
    } else {
        cases_fill_bf16(seed, STREAM_IDXP_QR, T, Q, 1.0f, qr);
    }
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; t++) {
        float ang[64];
        rng rr = cases_row_rng(seed, STREAM_IDXP_ROPE, t);
        cases_rng_uniform_pm1(&rr, ang, 64);
        for (int e = 0; e < 64; e++) {
            const double th = ((double)ang[e] + 1.0) * 3.14159265358979323846; /* [0, 2pi) */
            cosb[t * 64 + e] = cases_bf16_bits((float)cos(th));
            sinb[t * 64 + e] = cases_bf16_bits((float)sin(th));
        }
    }
    if (had) {
        cases_fill_bf16(seed, STREAM_IDXP_HAD, DI, DI, 1.0f, hq);
        cases_fill_bf16(seed ^ 0x5555u, STREAM_IDXP_HAD, DI, DI, 1.0f, hk);
    }

    if (!idxp_fill_cache(p, seed))
        goto fail;

    /* outputs */
    void *q_idx = idxp_alloc(p, qe * (size_t)(T * NQ));                                   /* [T, NI, DI] */
    uint16_t *q_idx_scale = c->int8 ? idxp_alloc(p, sizeof(uint16_t) * (size_t)(T * NI)) : NULL; /* [T, NI] fp16 */
    uint16_t *weights = idxp_alloc(p, sizeof(uint16_t) * (size_t)(T * NI));             /* [T, NI] */
    if (!q_idx || !weights || (c->int8 && !q_idx_scale))
        goto fail;

    const dsops_dtype qdt = c->int8 ? DSOPS_INT8 : DSOPS_BF16;
    int64_t s1[1], s2[2], s3[3];
    s2[0] = T, s2[1] = H;
    a->x = dsops_tensor_make(x, DSOPS_BF16, 2, s2);
    s2[0] = T, s2[1] = Q;
    a->qr = dsops_tensor_make(qr, qdt, 2, s2);
    CASES_SET_INDEXER_WEIGHTS(a, w);
    if (c->int8) {
        s1[0] = T;
        a->qr_scale = dsops_tensor_make(qr_scale, DSOPS_FP32, 1, s1);
    }
    s2[0] = T, s2[1] = 64;
    a->rope_cos = dsops_tensor_make(cosb, DSOPS_BF16, 2, s2);
    a->rope_sin = dsops_tensor_make(sinb, DSOPS_BF16, 2, s2);
    if (had) {
        s2[0] = DI, s2[1] = DI;
        a->hadamard_q = dsops_tensor_make(hq, DSOPS_BF16, 2, s2);
        a->hadamard_k = dsops_tensor_make(hk, DSOPS_BF16, 2, s2);
    }
    s1[0] = T;
    a->cache_index = dsops_tensor_make(paging.cache_index, DSOPS_INT64, 1, s1);
    s3[0] = T, s3[1] = NI, s3[2] = DI;
    a->q_idx = dsops_tensor_make(q_idx, qdt, 3, s3);
    s2[0] = T, s2[1] = NI;
    if (c->int8)
        a->q_idx_scale = dsops_tensor_make(q_idx_scale, DSOPS_FP16, 2, s2);
    a->weights = dsops_tensor_make(weights, c->int8 ? DSOPS_FP16 : DSOPS_BF16, 2, s2);

    p->flops = 2.0 * (double)T *
               ((double)Q * NI * DI + (double)H * DI + (double)H * NI + (double)NI * DI * DI + (double)DI * DI);
    p->weight_bytes = (double)qe * (double)NQ * Q + (c->int8 ? 4.0 * (double)NQ : 0.0) + 2.0 * (double)DI * H +
                      2.0 * (double)NI * H + (had ? 4.0 * (double)DI * DI : 0.0);
    return p;

fail:
    dsops_idxp_problem_free(p);
    return NULL;
}

/* ---- bench adapter ------------------------------------------------------------------------------- */

/* indexer_prolog_v32: timed with prepared weights (packed once, outside the timing; tests/test_cases.c checks
 * the call without them). --check compares q_idx, q_idx_scale, weights and the
 * key cache rows at cache_index with the oracle at the tolerances of docs/OPERATORS.md §4.2. A second row
 * times the same matmuls alone. */
typedef struct idxp_bench {
    dsops_idxp_problem *p;
    dsops_prepared *prep;
    void *hx;                  /* [T*NI, DI] stand-in Hadamard operand, in the matrices' dtype */
    void *y;                   /* fp32 / int32 results of the matmul-only row */
    bench_linear_run_fn linear_run; /* the matmul-only row's runner (matmuls_prepare) */
} idxp_bench;

/* The maps of an indexer_prolog_v32 prepared object, in its order (absent Hadamard matrix: no map). */
enum { IDXP_MAP_WQ_B, IDXP_MAP_WK, IDXP_MAP_WPROJ, IDXP_MAP_HQ, IDXP_MAP_HK, IDXP_MAP_COUNT };

static dsops_status idxp_run(dsops_context *ctx, void *pv)
{
    idxp_bench *b = pv;
    return dsops_indexer_prolog_v32(ctx, &b->p->args);
}

/* A call's results as fp32 values (fp16 / bf16 widened), in one buffer: q_idx [T*NI*DI], q_idx_scale [T*NI]
 * (int8), weights [T*NI], then per token with a non-negative cache_index its key row [DI] and key scale
 * (int8). */
typedef struct idxp_values {
    float *v;
    size_t n_q, n_scale, n_w, n_key, n_key_scale;
} idxp_values;

static float idxp_value(const void *base, dsops_dtype dt, int64_t i)
{
    switch (dt) {
    case DSOPS_INT8: return ((const int8_t *)base)[i];
    case DSOPS_FP32: return ((const float *)base)[i];
    case DSOPS_FP16: return dsops_ref_f32_from_fp16(((const uint16_t *)base)[i]);
    default: return dsops_ref_f32_from_bf16(((const uint16_t *)base)[i]);
    }
}

static int idxp_values_take(const dsops_idxp_problem *p, idxp_values *out)
{
    const dsops_indexer_prolog_v32_args *a = &p->args;
    const int64_t T = p->T, NI = p->c.NI, DI = p->c.DI, *slot = a->cache_index.data;
    const int int8 = p->c.int8;
    int64_t nw = 0;
    for (int64_t t = 0; t < T; t++)
        nw += slot[t] >= 0;
    idxp_values r = {NULL, (size_t)(T * NI * DI), int8 ? (size_t)(T * NI) : 0, (size_t)(T * NI), (size_t)(nw * DI),
                     int8 ? (size_t)nw : 0};
    r.v = malloc(sizeof(float) * (r.n_q + r.n_scale + r.n_w + r.n_key + r.n_key_scale + 1));
    if (!r.v)
        return 1;
    float *v = r.v;
    for (size_t i = 0; i < r.n_q; i++)
        *v++ = idxp_value(a->q_idx.data, a->q_idx.dtype, (int64_t)i);
    for (size_t i = 0; i < r.n_scale; i++)
        *v++ = idxp_value(a->q_idx_scale.data, a->q_idx_scale.dtype, (int64_t)i);
    for (size_t i = 0; i < r.n_w; i++)
        *v++ = idxp_value(a->weights.data, a->weights.dtype, (int64_t)i);
    for (int64_t t = 0; t < T; t++)
        for (int64_t d = 0; slot[t] >= 0 && d < DI; d++)
            *v++ = idxp_value(a->idx_k_cache.data, a->idx_k_cache.dtype, slot[t] * DI + d);
    for (int64_t t = 0; int8 && t < T; t++)
        if (slot[t] >= 0)
            *v++ = idxp_value(a->idx_k_scale_cache.data, a->idx_k_scale_cache.dtype, slot[t]);
    *out = r;
    return 0;
}

static int idxp_check(void *pv, char *why, size_t cap)
{
    idxp_bench *b = pv;
    dsops_indexer_prolog_v32_args *a = &b->p->args;
    const int int8 = b->p->c.int8;
    idxp_values got = {0}, ref = {0};
    if (idxp_values_take(b->p, &got))
        return bench_out_of_memory(why, cap);
    /* the oracle rewrites outputs and cache rows from the same inputs */
    dsops_ref_indexer_prolog_v32(a);
    int fail = idxp_values_take(b->p, &ref) ? bench_out_of_memory(why, cap) : 0;
    /* (name, elements, atol, rtol, share allowed outside) in the order of idxp_values */
    const struct {
        const char *name;
        size_t n;
        double atol, rtol, share;
    } part[5] = {{"q_idx", got.n_q, int8 ? 1.0 : 1e-4, int8 ? 0.0 : 1.0 / 128, int8 ? 0.0 : 0.005},
                 {"q_idx_scale", got.n_scale, 2.5e-5, 0.0, 0.005},
                 {"weights", got.n_w, int8 ? 2.5e-5 : 1e-4, int8 ? 1.0 / 1024 : 1.0 / 128, 0.005},
                 {"cache keys", got.n_key, int8 ? 1.0 : 1e-4, int8 ? 0.0 : 1.0 / 128, 0.005},
                 {"cache key scales", got.n_key_scale, 2.5e-5, 0.0, 0.005}};
    size_t at = 0;
    for (int i = 0; i < 5 && !fail; at += part[i++].n) {
        size_t bad = 0, n = 0, allowed = (size_t)floor(part[i].share * (double)part[i].n + 0.5);
        double max_err = 0;
        bench_count_outside(got.v + at, ref.v + at, DSOPS_FP32, part[i].n, part[i].atol, part[i].rtol, &bad, &n,
                            &max_err);
        fail = bad > allowed;
        snprintf(why, cap, "%zu of %zu %s elements outside %g + %g |ref| (allowed %zu), max |err| %.3g", bad, n,
                 part[i].name, part[i].atol, part[i].rtol, allowed, max_err);
    }
    if (!fail)
        snprintf(why, cap, "every result within its tolerance");
    free(got.v), free(ref.v);
    return fail;
}

static void idxp_release(void *pv)
{
    idxp_bench *b = pv;
    dsops_prepared_destroy(b->prep);
    dsops_idxp_problem_free(b->p);
    free(b->hx);
    free(b->y);
    free(b);
}

/* The prolog's matmuls alone, on the prepared maps: a [T, Q] operand (qr) by idx_wq_b, x by idx_wk and
 * weights_proj, and the Hadamard maps on [T*NI, DI] and [T, DI] operands of the matrices' dtype. */
static dsops_status idxp_gemms_run(dsops_context *ctx, void *pv)
{
    idxp_bench *b = pv;
    const dsops_idxp_case *c = &b->p->c;
    const dsops_indexer_prolog_v32_args *a = &b->p->args;
    int64_t T = b->p->T, NQ = (int64_t)c->NI * c->DI;
    int threads = dsops_context_threads(ctx);
    char *y = b->y; /* separate fp32 / int32 regions per concurrent job */
    dsops_linear **m = b->prep->maps;
    dsops_linear_job j1[3] = {{m[IDXP_MAP_WQ_B], a->qr.data, c->Q, y, NQ},
                              {m[IDXP_MAP_WK], a->x.data, c->H, y + (size_t)(T * NQ) * 4, c->DI},
                              {m[IDXP_MAP_WPROJ], a->x.data, c->H, y + (size_t)(T * (NQ + c->DI)) * 4, c->NI}};
    dsops_status s = b->linear_run(ctx, j1, 3, T, threads, dsops_context_isa(ctx));
    if (s == DSOPS_OK && m[IDXP_MAP_HQ]) {
        dsops_linear_job jq = {m[IDXP_MAP_HQ], b->hx, c->DI, y, c->DI};
        s = b->linear_run(ctx, &jq, 1, T * c->NI, threads, dsops_context_isa(ctx));
    }
    if (s == DSOPS_OK && m[IDXP_MAP_HK]) {
        dsops_linear_job jk = {m[IDXP_MAP_HK], b->hx, c->DI, y, c->DI};
        s = b->linear_run(ctx, &jk, 1, T, threads, dsops_context_isa(ctx));
    }
    return s;
}

static int idxp_make_problem(const void *cv, bench_problem *bp, char *why, size_t cap)
{
    const dsops_idxp_case *ic = cv;
    idxp_bench *b = calloc(1, sizeof *b);
    if (!b)
        return bench_out_of_memory(why, cap);
    *bp = (bench_problem){.p = b, .release = idxp_release};
    if (!(b->p = dsops_idxp_problem_make(ic, 7)))
        return bench_cannot_generate(why, cap);
    if (bench_prepared_or_say(dsops_indexer_prolog_v32_prepare(NULL, &b->p->args, &b->prep),
                              "indexer_prolog_v32_prepare", why, cap))
        return 1;
    if (b->prep->count != IDXP_MAP_COUNT)
        return snprintf(why, cap, "the prepared object has %d maps, expected %d", b->prep->count, IDXP_MAP_COUNT), 1;
    const dsops_indexer_prolog_v32_args *a = &b->p->args;
    size_t rows = (size_t)b->p->T, NQ = (size_t)ic->NI * (size_t)ic->DI;
    dsops_dtype hdt = a->hadamard_q.data ? a->hadamard_q.dtype : a->hadamard_k.data ? a->hadamard_k.dtype : DSOPS_BF16;
    b->hx = calloc(rows * NQ + 1, dsops_dtype_size(hdt));
    b->y = malloc(rows * 4 * (NQ + (size_t)ic->DI + (size_t)ic->NI) + 64);
    if (!b->hx || !b->y)
        return bench_out_of_memory(why, cap);
    b->p->args.prepared = b->prep;
    *bp = (bench_problem){b, idxp_run, idxp_check, idxp_release, b->p->flops, b->p->weight_bytes,
                          ic->int8 ? DSOPS_PEAK_INT8_DOT : DSOPS_PEAK_BF16_DOT, .args = &b->p->args};
    return 0;
}

static void idxp_words(const void *cv, char *op, size_t oc, char *sh, size_t sc)
{
    const dsops_idxp_case *c = cv;
    snprintf(op, oc, "indexer_prolog_v32");
    snprintf(sh, sc, "B %d S %d", c->B, c->S);
}

static void idxp_list_line(const void *cv, const char *not_ci)
{
    const dsops_idxp_case *c = cv;
    printf("%-40s indexer_prolog_v32          B %-3d S %-4d H %d Q %d NI %d DI %d %s%s, %s%s\n", c->name, c->B, c->S,
           c->H, c->Q, c->NI, c->DI, c->int8 ? "int8" : "bf16", c->int8 || c->hadamard ? "" : " (no Hadamard)",
           c->rope_mode == DSOPS_ROPE_HALF          ? "half"
           : c->rope_mode == DSOPS_ROPE_INTERLEAVED ? "interleaved"
                                                    : "interleaved_in_half_out",
           not_ci);
}

static int idxp_matmuls_prepare(void *pv, bench_linear_run_fn linear_run, char *why, size_t cap)
{
    (void)why, (void)cap; /* the maps were checked when the problem was made */
    ((idxp_bench *)pv)->linear_run = linear_run;
    return 0;
}

static const void *idxp_table(int *count) { return dsops_idxp_cases(count); }

const bench_family bench_family_indexer_prolog_v32 = {
    .op = "indexer_prolog_v32",
    .table_word = "indexer_prolog_v32",
    .cases = idxp_table,
    .case_size = sizeof(dsops_idxp_case),
    .ci_offset = offsetof(dsops_idxp_case, ci),
    .make_problem = idxp_make_problem,
    .words = idxp_words,
    .list_line = idxp_list_line,
    .matmuls_prepare = idxp_matmuls_prepare,
    .matmuls_run = idxp_gemms_run,
};
