/* indexer_prolog_v32 (docs/OPERATORS.md §4.2; docs/CASES.md "indexer_prolog_v32")
 * The named cases, their data generator and the bench adapter; the adversarial problems of the tests
 * (problems.h) at the end.
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
#include "problems.h"
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
/* Alike in shape with the other families' adapters: bench_family.h says why each family keeps its own. */

/* indexer_prolog_v32: timed with prepared weights (packed once, outside the timing; tests/test_cases.c checks
 * the call without them). --check compares q_idx, q_idx_scale, weights and the
 * key cache rows at cache_index with the oracle at the tolerances of docs/OPERATORS.md §4.2. A second row
 * times the same matmuls alone. */
typedef struct idxp_bench {
    bench_linear_run_fn linear_run; /* first: the matmul-only row's runner, set by bench_matmuls */
    dsops_idxp_problem *p;
    dsops_prepared *prep;
    void *hx;                  /* [T*NI, DI] stand-in Hadamard operand, in the matrices' dtype */
    void *y;                   /* fp32 / int32 results of the matmul-only row */
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
    .matmuls_run = idxp_gemms_run,
};

/* ==== adversarial problems (problems.h) ====================================================================
 * Small indexer_prolog_v32 problems for tests/test_indexer_prolog.c and test_indexer_prolog_validation.c: any
 * shape, variant, dtype and view arrangement, every output and cache buffer a checked region of the problem's
 * fixture (guard zones, padding, rows the call does not address); the elements a call may write, and the oracle's
 * results in dense form. The tests judge a library call on them (tests/problems_check.c). */

#define DR 64

/* ---- data ------------------------------------------------------------------------------------------ */

static void fill_int8(const dsops_tensor *t, rng *r, int extreme)
{
    for (int64_t i = 0; i < t->shape[0]; i++)
        cases_fill_int8_row(t, i, r, extreme);
}

/* ---- problem builder ------------------------------------------------------------------------------- */

ip_problem *ip_make(const ip_spec *spec, uint64_t seed)
{
    ip_problem *p = cases_xcalloc(1, sizeof *p);
    p->sp = *spec;
    ip_spec *sp = &p->sp;
    p->fx.big_guard = sp->big_guard;
    if (!sp->had_dtype)
        sp->had_dtype = DSOPS_BF16;
    if (!sp->ln_dtype)
        sp->ln_dtype = DSOPS_BF16;
    if (!sp->table_dtype)
        sp->table_dtype = DSOPS_BF16;
    if (sp->NB <= 0)
        sp->NB = cases_default_blocks(sp->T, sp->BS);
    if (sp->int8)
        sp->no_hadamard_q = sp->no_hadamard_k = 0;
    rng r = {seed};

    const int64_t T = sp->T, H = sp->H, Q = sp->Q, NI = sp->NI, DI = sp->DI, BS = sp->BS, NB = sp->NB;
    const int64_t NQ = NI * DI;
    const int64_t pad = sp->strided ? 5 : 0, wpad = sp->strided ? 8 : 0;
    const int share = sp->strided == 2 ? (sp->share ? sp->share : 7) : 0;
    const dsops_dtype qdt = sp->int8 ? DSOPS_INT8 : DSOPS_BF16;
    p->T = T;
    dsops_indexer_prolog_v32_args *a = &p->args;
    memset(a, 0, sizeof *a);
    a->ln_eps = sp->ln_eps;
    a->weights_scale = sp->weights_scale;
    a->rope_mode = sp->rope_mode;
    a->rope_inverse = sp->rope_inverse;

    int64_t s[3];
    /* inputs */
    s[0] = T, s[1] = H;
    a->x = tf_alloc_view(&p->fx, DSOPS_BF16, 2, s, pad, 0, 0);
    s[0] = T, s[1] = Q;
    a->qr = tf_alloc_view(&p->fx, qdt, 2, s, pad, 0, 0);
    s[0] = NQ, s[1] = Q;
    a->idx_wq_b = tf_alloc_view(&p->fx, qdt, 2, s, wpad, 0, 0);
    if (sp->int8) {
        s[0] = T;
        a->qr_scale = tf_alloc_view(&p->fx, DSOPS_FP32, 1, s, 0, 0, 0);
        s[0] = NQ;
        a->idx_wq_b_scale = tf_alloc_view(&p->fx, DSOPS_FP32, 1, s, 0, 0, 0);
    }
    s[0] = DI, s[1] = H;
    a->idx_wk = tf_alloc_view(&p->fx, DSOPS_BF16, 2, s, wpad, 0, 0);
    s[0] = NI, s[1] = H;
    a->weights_proj = tf_alloc_view(&p->fx, DSOPS_BF16, 2, s, wpad, 0, 0);
    s[0] = DI;
    a->ln_gamma_k = tf_alloc_view(&p->fx, sp->tiny_key ? DSOPS_FP32 : sp->ln_dtype, 1, s, 0, 0, 0);
    const dsops_dtype beta_dt = sp->mixed_ln ? (sp->ln_dtype == DSOPS_FP32 ? DSOPS_BF16 : DSOPS_FP32) : sp->ln_dtype;
    a->ln_beta_k = tf_alloc_view(&p->fx, beta_dt, 1, s, 0, 0, 0);
    cases_rope_tables(&p->fx, sp->table_dtype, T, pad, share & 2, &a->rope_cos, &a->rope_sin);
    s[0] = DI, s[1] = DI;
    if (!sp->no_hadamard_q)
        a->hadamard_q = tf_alloc_view(&p->fx, sp->had_dtype, 2, s, wpad, 0, 0);
    if (!sp->no_hadamard_k)
        a->hadamard_k = tf_alloc_view(&p->fx, sp->had_dtype, 2, s, wpad, 0, 0);
    s[0] = T;
    a->cache_index = tf_alloc_view(&p->fx, DSOPS_INT64, 1, s, 0, 0, 0);
    p->cache_index = a->cache_index.data;

    /* outputs */
    if (share & 1) {
        /* one row per (token, head): DI query values, then the head's q_idx_scale (int8) or weight (bf16),
         * then padding; tokens NI rows apart plus `pad` rows' worth of bytes */
        const int64_t rowb = sp->int8 ? DI + 4 : 2 * (DI + 2); /* bytes of one row (even) */
        const int64_t tokb = NI * rowb + 2 * pad;
        unsigned char *base = tf_alloc_region(&p->fx, (size_t)(T * tokb), 1, qdt);
        const int64_t qes = sp->int8 ? 1 : 2;
        s[0] = T, s[1] = NI, s[2] = DI;
        a->q_idx = dsops_tensor_make(base, qdt, 3, s);
        a->q_idx.stride[0] = tokb / qes, a->q_idx.stride[1] = rowb / qes;
        s[0] = T, s[1] = NI;
        dsops_tensor side = dsops_tensor_make(base + DI * qes, DSOPS_FP16, 2, s);
        side.stride[0] = tokb / 2, side.stride[1] = rowb / 2;
        if (sp->int8) {
            a->q_idx_scale = side;
            a->weights = tf_alloc_view(&p->fx, DSOPS_FP16, 2, s, pad, 1, 1);
        } else {
            side.dtype = DSOPS_BF16;
            a->weights = side;
        }
    } else {
        s[0] = T, s[1] = NI, s[2] = DI;
        a->q_idx = tf_alloc_view(&p->fx, qdt, 3, s, pad, 1, 1);
        s[0] = T, s[1] = NI;
        if (sp->int8)
            a->q_idx_scale = tf_alloc_view(&p->fx, DSOPS_FP16, 2, s, pad, 1, 1);
        a->weights = tf_alloc_view(&p->fx, sp->int8 ? DSOPS_FP16 : DSOPS_BF16, 2, s, pad, 1, 1);
    }

    /* caches */
    if ((share & 4) && sp->int8) {
        /* one row per slot: DI int8 key values, the fp16 scale, 2 bytes of padding; 16 bytes between blocks */
        const int64_t rowb = DI + 4, blkb = BS * rowb + 16;
        unsigned char *base = tf_alloc_region(&p->fx, (size_t)(NB * blkb), 0, DSOPS_UINT8);
        s[0] = NB, s[1] = BS, s[2] = DI;
        a->idx_k_cache = dsops_tensor_make(base, DSOPS_INT8, 3, s);
        a->idx_k_cache.stride[0] = blkb, a->idx_k_cache.stride[1] = rowb;
        s[0] = NB, s[1] = BS;
        a->idx_k_scale_cache = dsops_tensor_make(base + DI, DSOPS_FP16, 2, s);
        a->idx_k_scale_cache.stride[0] = blkb / 2, a->idx_k_scale_cache.stride[1] = rowb / 2;
    } else {
        const int64_t cpad = sp->strided ? 3 : 0;
        s[0] = NB, s[1] = BS, s[2] = DI;
        a->idx_k_cache = tf_alloc_view(&p->fx, qdt, 3, s, cpad, 1, 0);
        if (sp->int8) {
            s[0] = NB, s[1] = BS;
            a->idx_k_scale_cache = tf_alloc_view(&p->fx, DSOPS_FP16, 2, s, cpad, 1, 0);
        }
    }

    /* data */
    cases_fill_rows(&a->x, &r, sp->zero_x);
    if (sp->int8) {
        fill_int8(&a->qr, &r, sp->int8_extreme);
        fill_int8(&a->idx_wq_b, &r, sp->int8_extreme);
        cases_fill_view_uniform(&a->qr_scale, &r, -1, 1);         /* negative scales occur (vendor data) */
        cases_fill_view_uniform(&a->idx_wq_b_scale, &r, -1, 1);
    } else {
        cases_fill_view_uniform(&a->qr, &r, -1, 1);
        cases_fill_view_uniform(&a->idx_wq_b, &r, -0.1f, 0.1f);
    }
    if (sp->int8 && sp->int8_extreme && T > 0) {
        /* token 0 all 127 against rows n % 5 == 0 all 127: dots of 16129 * Q, beyond 2^24 for Q > 1040
         * (the int32 -> fp32 conversion rounds) */
        for (int64_t k = 0; k < Q; k++)
            *(int8_t *)tf_eaddr(&a->qr, 0, k, 0) = 127;
        for (int64_t n = 0; n < NQ; n += 5)
            for (int64_t k = 0; k < Q; k++)
                *(int8_t *)tf_eaddr(&a->idx_wq_b, n, k, 0) = 127;
    }
    for (int64_t t = 0; t < T && t < sp->zero_qr; t++)
        for (int64_t k = 0; k < Q; k++)
            tf_putf(&a->qr, t, k, 0, 0.0f);
    cases_fill_view_uniform(&a->idx_wk, &r, -0.1f, 0.1f);
    cases_fill_view_uniform(&a->weights_proj, &r, -0.1f, 0.1f);
    if (sp->tiny_key)
        cases_fill_view_uniform(&a->ln_gamma_k, &r, 0.5e-38f, 1e-38f);
    else
        cases_fill_view_uniform(&a->ln_gamma_k, &r, -1.5f, 1.5f);
    if (sp->tiny_key || sp->zero_beta)
        cases_fill_view_uniform(&a->ln_beta_k, &r, 0, 0);
    else
        cases_fill_view_uniform(&a->ln_beta_k, &r, -0.5f, 0.5f);
    cases_fill_view_uniform(&a->rope_cos, &r, -1, 1);
    cases_fill_view_uniform(&a->rope_sin, &r, -1, 1);
    const dsops_tensor *hads[2] = {&a->hadamard_q, &a->hadamard_k};
    for (int i = 0; i < 2; i++) {
        if (!hads[i]->data)
            continue;
        if (sp->sylvester) {
            dsops_tensor dense = dsops_tensor_make(cases_xcalloc((size_t)(DI * DI), sizeof(float)), sp->had_dtype, 2,
                                                   hads[i]->shape);
            dsops_ref_hadamard_matrix(&dense);
            for (int64_t k = 0; k < DI; k++)
                for (int64_t j = 0; j < DI; j++)
                    memcpy(tf_eaddr(hads[i], k, j, 0), tf_eaddr(&dense, k, j, 0), dsops_dtype_size(sp->had_dtype));
            free(dense.data);
        } else {
            cases_fill_view_uniform(hads[i], &r, -1, 1);
        }
    }
    /* cache rows: random, or NaN (int8: -1 with NaN scales) */
    for (int64_t b = 0; b < NB; b++)
        for (int64_t o = 0; o < BS; o++) {
            cases_fill_cache_elems(&a->idx_k_cache, b, o, DI, &r, sp->nan_cache);
            if (sp->int8)
                cases_fill_cache_elems(&a->idx_k_scale_cache, b, o, 1, &r, sp->nan_cache);
        }

    cases_cache_indices(&r, NB * BS, T, (cases_index_mode)sp->index_mode, p->cache_index);
    return p;
}

/* ---- freeing (sentinels and snapshots are the fixture's: tf_prepare_call, tf_restore on p->fx) ------ */

void ip_free(ip_problem *p)
{
    if (p)
        tf_free(&p->fx);
    free(p);
}

/* ---- the elements a call may write ------------------------------------------------------------------ */

void ip_each_written(const void *args, tf_elem_fn fn, void *ctx)
{
    const dsops_indexer_prolog_v32_args *a = args;
    const int int8 = a->qr.dtype == DSOPS_INT8;
    tf_each_in_view(&a->q_idx, fn, ctx);
    if (int8)
        tf_each_in_view(&a->q_idx_scale, fn, ctx);
    tf_each_in_view(&a->weights, fn, ctx);
    for (int64_t t = 0; t < a->x.shape[0]; t++) {
        const int64_t r = tf_get_index(&a->cache_index, t);
        if (r < 0)
            continue;
        cases_each_in_cache_row(&a->idx_k_cache, r, fn, ctx);
        if (int8)
            cases_each_in_cache_row(&a->idx_k_scale_cache, r, fn, ctx);
    }
}

unsigned char *ip_gather(const dsops_indexer_prolog_v32_args *a, size_t *n)
{
    return cases_gather(ip_each_written, a, n);
}

/* ---- reference ------------------------------------------------------------------------------------- */

ip_ref *ip_reference(const dsops_indexer_prolog_v32_args *a)
{
    const int64_t T = a->x.shape[0], NI = a->weights_proj.shape[0], DI = a->idx_wk.shape[0];
    const int int8 = a->qr.dtype == DSOPS_INT8;
    ip_ref *r = cases_xcalloc(1, sizeof *r);
    r->T = T, r->NI = NI, r->DI = DI, r->int8 = int8;

    dsops_indexer_prolog_v32_args ra = *a;
    ra.prepared = NULL;
    int64_t s[3];
    const size_t tn = (size_t)(T * NI > 0 ? T * NI : 1);
    /* dense outputs */
    s[0] = T, s[1] = NI, s[2] = DI;
    ra.q_idx = dsops_tensor_make(cases_xcalloc(tn * (size_t)DI, int8 ? 1 : 2), int8 ? DSOPS_INT8 : DSOPS_BF16, 3, s);
    memset(&ra.q_idx_scale, 0, sizeof ra.q_idx_scale);
    if (int8)
        ra.q_idx_scale = dsops_tensor_make(cases_xcalloc(tn, 2), DSOPS_FP16, 2, s);
    ra.weights = dsops_tensor_make(cases_xcalloc(tn, 2), int8 ? DSOPS_FP16 : DSOPS_BF16, 2, s);
    /* compact caches: row w of [nw, 1, DI] for the w-th writing token */
    ra.cache_index = cases_compact_index(&a->cache_index, &r->nw);
    const int64_t rows = r->nw > 0 ? r->nw : 1;
    s[0] = rows, s[1] = 1, s[2] = DI;
    ra.idx_k_cache = dsops_tensor_make(cases_xcalloc((size_t)(rows * DI), int8 ? 1 : 2), int8 ? DSOPS_INT8 : DSOPS_BF16,
                                       3, s);
    memset(&ra.idx_k_scale_cache, 0, sizeof ra.idx_k_scale_cache);
    if (int8)
        ra.idx_k_scale_cache = dsops_tensor_make(cases_xcalloc((size_t)rows, 2), DSOPS_FP16, 2, s);

    dsops_ref_indexer_prolog_v32(&ra);

    r->q_idx = cases_xcalloc(tn * (size_t)DI, sizeof(float));
    r->q_idx_scale = cases_xcalloc(tn, sizeof(float));
    r->weights = cases_xcalloc(tn, sizeof(float));
    r->key = cases_xcalloc((size_t)(rows * DI), sizeof(float));
    r->key_scale = cases_xcalloc((size_t)rows, sizeof(float));
    cases_dense_f32(&ra.q_idx, r->q_idx);
    if (int8)
        cases_dense_f32(&ra.q_idx_scale, r->q_idx_scale);
    cases_dense_f32(&ra.weights, r->weights);
    cases_dense_f32(&ra.idx_k_cache, r->key); /* [rows, 1, DI]: the rows of the writing tokens, then zeros */
    if (int8)
        cases_dense_f32(&ra.idx_k_scale_cache, r->key_scale);

    free(ra.q_idx.data);
    free(ra.q_idx_scale.data);
    free(ra.weights.data);
    free(ra.cache_index.data);
    free(ra.idx_k_cache.data);
    free(ra.idx_k_scale_cache.data);
    return r;
}

void ip_ref_free(ip_ref *r)
{
    if (!r)
        return;
    free(r->q_idx);
    free(r->q_idx_scale);
    free(r->weights);
    free(r->key);
    free(r->key_scale);
    free(r);
}
