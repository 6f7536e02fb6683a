/* mla_prolog_v32 (docs/OPERATORS.md §4.1; docs/CASES.md "mla_prolog_v32")
 * The named cases, their data generator and the bench adapter; the adversarial problems of the tests
 * (problems.h) at the end.
 *
 * Data (seed 5):
 *   x                       U(-1,1) bf16                                          [T, H]
 *   wq_a, wq_b, w_uk, wkv_a U(-0.1,0.1) bf16; int8 wq_b: Q8 (spec §2.7) of the bf16 matrix per output
 *                           channel (row), wq_b_scale the per-row scales
 *   gamma_cq, gamma_ckv     U(-1,1) bf16
 *   rope_cos, rope_sin      U(-0.1,0.1) bf16                                      [T, 64]
 *   cache_index[t]          slot(b, kv - S + i) through a random permutation of the physical blocks
 *   caches                  random in every row: bf16 latent / rope U(-1,1); int8 latent quantised per
 *                           128-group like the sfa caches
 * Parameters are the vendor's: eps_cq = eps_ckv = 1e-5, rope interleaved_in_half_out, not inverse. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_family.h"
#include "cases.h"
#include "cases_internal.h"
#include "problems.h"
#include "ref.h"

/* H 7168, Q 1536, N 128, Dqn 128, Dc 512, BS 128 for every V3.2 case */
#define MLAP_DIMS .H = 7168, .Q = 1536, .N = 128, .Dqn = 128, .Dc = 512, .BS = 128

static const dsops_mlap_case mlap_cases[] = {
    {.name = "v32_mla_prolog_int8_b128_s1_kv1k", .B = 128, .S = 1, .kv = 1024, MLAP_DIMS, .int8_wq_b = 1,
     .layout = DSOPS_KV_SPLIT_INT8, .ci = 1},
    {.name = "v32_mla_prolog_int8_b4_s2_kv1k", .B = 4, .S = 2, .kv = 1024, MLAP_DIMS, .int8_wq_b = 1,
     .layout = DSOPS_KV_SPLIT_INT8, .ci = 1},
    {.name = "v32_mla_prolog_int8_b64_s2_kv1k", .B = 64, .S = 2, .kv = 1024, MLAP_DIMS, .int8_wq_b = 1,
     .layout = DSOPS_KV_SPLIT_INT8, .ci = 1},
    {.name = "v32_mla_prolog_bf16_b4_s2_kv64k", .B = 4, .S = 2, .kv = 65536, MLAP_DIMS, .int8_wq_b = 0,
     .layout = DSOPS_KV_SPLIT_BF16, .ci = 1},
    {.name = "v32_mla_prolog_bf16_b64_s2_kv64k", .B = 64, .S = 2, .kv = 65536, MLAP_DIMS, .int8_wq_b = 0,
     .layout = DSOPS_KV_SPLIT_BF16, .ci = 0, .ci_variant = "v32_mla_prolog_bf16_b64_s2_kv64k_ci"},
    {.name = "v32_mla_prolog_bf16_b64_s2_kv64k_ci", .B = 64, .S = 2, .kv = 4096, MLAP_DIMS, .int8_wq_b = 0,
     .layout = DSOPS_KV_SPLIT_BF16, .ci = 1},
    /* caches for 1024 tokens per sequence, as the other int8 cases */
    {.name = "v32_mla_prolog_int8_b4_s2_packed", .B = 4, .S = 2, .kv = 1024, MLAP_DIMS, .int8_wq_b = 1,
     .layout = DSOPS_KV_PACKED_INT8, .ci = 1},
    {.name = "v32_mla_prolog_int8_b4_s2_fp8", .B = 4, .S = 2, .kv = 1024, MLAP_DIMS, .int8_wq_b = 1,
     .layout = DSOPS_KV_FLASHMLA_FP8, .ci = 1},
};

static void *mlap_alloc(dsops_mlap_problem *p, size_t bytes) { return ALLOC_OWNED(p, bytes); }

enum { STREAM_MLAP_INPUTS = 21 /* ... 27: cases_make_mla_inputs */, STREAM_MLAP_CACHE = 28 };

const dsops_mlap_case *dsops_mlap_cases(int *count) { return CASES_TABLE(mlap_cases, count); }
const dsops_mlap_case *dsops_mlap_case_find(const char *name) { return CASES_FIND(mlap_cases, name); }
void dsops_mlap_problem_free(dsops_mlap_problem *p) { if (p) cases_problem_release(p->buffers, p->nbuffers, p); }

dsops_mlap_problem *dsops_mlap_problem_make(const dsops_mlap_case *c, uint64_t seed)
{
    if (!c || c->B < 0 || c->S < 0 || c->kv < c->S || c->H < 1 || c->H > CASES_MAX_ROW || c->Q < 1 ||
        c->Q > CASES_MAX_ROW || c->N < 1 || c->Dqn < 1 || c->Dc < 1 || c->Dc + 64 > CASES_MAX_KV_ROW || c->BS < 1 ||
        (c->layout != DSOPS_KV_SPLIT_BF16 && c->Dc % 128 != 0) || ((c->layout == DSOPS_KV_PACKED_INT8 || c->layout == DSOPS_KV_FLASHMLA_FP8) && c->Dc != 512))
        return NULL;
    dsops_mlap_problem *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->c = *c;
    rng r = {seed};
    const int64_t B = c->B, S = c->S, H = c->H, Q = c->Q, N = c->N, Dqn = c->Dqn, Dc = c->Dc, BS = c->BS;
    const int64_t T = B * S, NG = N * (Dqn + 64), KV = Dc + 64;
    p->T = T;
    p->wq_b_int8 = c->int8_wq_b;

    /* parameters (vendor): set explicitly, every tensor absent until filled below */
    memset(&p->args, 0, sizeof p->args);
    p->args.eps_cq = 1e-5f;
    p->args.eps_ckv = 1e-5f;
    p->args.rope_mode = DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT;
    p->args.rope_inverse = 0;
    p->args.kv_layout = c->layout;
    p->args.prepared = NULL;

    /* block table: a random permutation of the blocks, ceil(kv / BS) per sequence; cache_index */
    cases_prolog_paging paging;
    if (!cases_make_prolog_paging(OWNED_LIST(p), &r, B, S, c->kv, BS, &paging))
        goto fail;
    p->NB = paging.NB;
    p->MB = paging.MB;
    p->block_table = paging.block_table;

    /* inputs and caches */
    cases_mla_inputs in;
    cases_latent_cache kv;
    if (!cases_make_mla_inputs(OWNED_LIST(p), T, H, Q, N, Dqn, Dc, c->int8_wq_b, seed, STREAM_MLAP_INPUTS, &in) ||
        !cases_fill_latent_cache(OWNED_LIST(p), c->layout, paging.NB, BS, (int)Dc, 64, seed, STREAM_MLAP_CACHE, &kv))
        goto fail;
    dsops_mla_prolog_v32_args *a = &p->args;
    CASES_SET_MLA_INPUTS(a, in);
    a->kv_cache = kv.nope;
    a->kv_scale_cache = kv.nope_scale;
    a->kr_cache = kv.rope;
    a->kv_packed = kv.packed;

    /* outputs */
    uint16_t *q_nope = mlap_alloc(p, sizeof(uint16_t) * (size_t)(T * N * Dc)); /* [T, N, Dc] bf16 */
    uint16_t *q_rope = mlap_alloc(p, sizeof(uint16_t) * (size_t)(T * N * 64)); /* [T, N, 64] bf16 */
    void *qr = mlap_alloc(p, (c->int8_wq_b ? 1 : 2) * (size_t)(T * Q));       /* [T, Q] */
    float *qr_scale = c->int8_wq_b ? mlap_alloc(p, sizeof(float) * (size_t)(T > 0 ? T : 1)) : NULL; /* [T] */
    if (!q_nope || !q_rope || !qr || (c->int8_wq_b && !qr_scale))
        goto fail;

    int64_t s1[1], s2[2], s3[3];
    s1[0] = T;
    a->cache_index = dsops_tensor_make(paging.cache_index, DSOPS_INT64, 1, s1);
    s3[0] = T, s3[1] = N, s3[2] = Dc;
    a->q_nope = dsops_tensor_make(q_nope, DSOPS_BF16, 3, s3);
    s3[2] = 64;
    a->q_rope = dsops_tensor_make(q_rope, DSOPS_BF16, 3, s3);
    s2[0] = T, s2[1] = Q;
    a->qr = dsops_tensor_make(qr, c->int8_wq_b ? DSOPS_INT8 : DSOPS_BF16, 2, s2);
    if (c->int8_wq_b) {
        s1[0] = T;
        a->qr_scale = dsops_tensor_make(qr_scale, DSOPS_FP32, 1, s1);
    }

    p->flops = 2.0 * (double)T * ((double)H * Q + (double)Q * NG + (double)N * Dqn * Dc + (double)H * KV);
    p->weight_bytes = 2.0 * (double)Q * H + (c->int8_wq_b ? 1.0 + 4.0 / (double)Q : 2.0) * (double)NG * Q +
                      2.0 * (double)N * Dqn * Dc + 2.0 * (double)KV * H;
    return p;

fail:
    dsops_mlap_problem_free(p);
    return NULL;
}

/* ---- bench adapter ------------------------------------------------------------------------------- */
/* Alike in shape with the other families' adapters: bench_family.h says why each family keeps its own. */

/* mla_prolog_v32: timed with prepared weights (packed once, outside the timing; tests/test_cases.c checks the
 * call without them). --check compares every output and the cache rows at cache_index with the oracle at the
 * tolerances of docs/OPERATORS.md §4.1. A second row times the same matmuls alone. */
typedef struct mlap_bench {
    bench_linear_run_fn linear_run; /* first: the matmul-only row's runner, set by bench_matmuls */
    dsops_mlap_problem *p;
    dsops_prepared *prep;
    void *x2, *y;              /* stand-in activations and fp32 results for the matmul-only row */
} mlap_bench;

static dsops_status mlap_run(dsops_context *ctx, void *pv)
{
    mlap_bench *b = pv;
    return dsops_mla_prolog_v32(ctx, &b->p->args);
}

/* The results of a call, each with its tolerance (§4.1: atol, rtol, share of elements allowed outside):
 * the outputs, then the cache rows the call addresses, gathered in token order. */
enum { MLAP_Q_NOPE, MLAP_Q_ROPE, MLAP_QR, MLAP_QR_SCALE, MLAP_LATENT, MLAP_LATENT_SCALE, MLAP_KR, MLAP_RESULTS };

typedef struct mlap_result {
    const char *name;
    dsops_dtype dt;
    size_t n;
    double atol, rtol, share;
    unsigned char *bytes;
} mlap_result;

/* Copies the call's results out of a (they are overwritten next); 0, or 1 when memory runs out. */
static int mlap_collect(const dsops_mlap_problem *p, mlap_result r[MLAP_RESULTS])
{
    const dsops_mla_prolog_v32_args *a = &p->args;
    const int64_t T = p->T, N = p->c.N, Dc = p->c.Dc, G = Dc / 128, Q = p->c.Q;
    /* a byte of an int8 or e4m3 latent: neighbouring bytes are neighbouring values */
    const int int8_qr = p->wq_b_int8, int8_cache = p->c.layout != DSOPS_KV_SPLIT_BF16,
              fp8 = p->c.layout == DSOPS_KV_FLASHMLA_FP8;
    const int64_t *slot = a->cache_index.data;
    int64_t nw = 0;
    for (int64_t t = 0; t < T; t++)
        nw += slot[t] >= 0;
    const mlap_result init[MLAP_RESULTS] = {
        {"q_nope", DSOPS_BF16, (size_t)(T * N * Dc), 0.005, 1.0 / 128, 0.005, NULL},
        {"q_rope", DSOPS_BF16, (size_t)(T * N * 64), 0.005, 1.0 / 128, 0.005, NULL},
        {"qr", int8_qr ? DSOPS_INT8 : DSOPS_BF16, (size_t)(T * Q), int8_qr ? 1.0 : 1e-4, int8_qr ? 0.0 : 1.0 / 128,
         0.005, NULL},
        {"qr_scale", DSOPS_FP32, int8_qr ? (size_t)T : 0, 2.5e-5, 0.005, 0.005, NULL},
        {"cache latent", int8_cache ? DSOPS_INT8 : DSOPS_BF16, (size_t)(nw * Dc), int8_cache ? 1.0 : 1e-4,
         int8_cache ? 0.0 : 1.0 / 128, 0.005, NULL},
        /* fp8 scales are powers of two: a latent whose amax sits at 448 * 2^k may double its scale */
        {"cache scales", DSOPS_FP32, int8_cache ? (size_t)(nw * G) : 0, 2.5e-5, 0.005, fp8 ? 0.005 : 0.0, NULL},
        {"cache rope", DSOPS_BF16, (size_t)(nw * 64), 1e-4, 1.0 / 128, 0.005, NULL},
    };
    int ok = 1;
    for (int i = 0; i < MLAP_RESULTS; i++) {
        r[i] = init[i];
        r[i].bytes = malloc(r[i].n * dsops_dtype_size(r[i].dt) + 1);
        ok &= r[i].bytes != NULL;
    }
    if (!ok)
        return 1;
    memcpy(r[MLAP_Q_NOPE].bytes, a->q_nope.data, r[MLAP_Q_NOPE].n * 2);
    memcpy(r[MLAP_Q_ROPE].bytes, a->q_rope.data, r[MLAP_Q_ROPE].n * 2);
    memcpy(r[MLAP_QR].bytes, a->qr.data, r[MLAP_QR].n * dsops_dtype_size(r[MLAP_QR].dt));
    if (int8_qr)
        memcpy(r[MLAP_QR_SCALE].bytes, a->qr_scale.data, (size_t)T * 4);
    /* cache rows: split layouts [rows, Dc] latent, [rows, G] fp32 scales, [rows, 64] bf16 rope; packed_int8
     * rows of Dc int8, 64 bf16 rope, G fp32 scales; flashmla_fp8 rows of Dc e4m3, G fp32 scales, 64 bf16 rope */
    const size_t lat_bytes = (size_t)Dc * (int8_cache ? 1 : 2), sc_bytes = (size_t)G * 4;
    for (int64_t t = 0, w = 0; t < T; t++) {
        if (slot[t] < 0)
            continue;
        unsigned char *lat = r[MLAP_LATENT].bytes + w * lat_bytes, *sc = r[MLAP_LATENT_SCALE].bytes + w * sc_bytes,
                      *kr = r[MLAP_KR].bytes + w * 128;
        if (p->c.layout == DSOPS_KV_PACKED_INT8) {
            const unsigned char *row = (const unsigned char *)a->kv_packed.data + slot[t] * 656;
            memcpy(lat, row, lat_bytes), memcpy(kr, row + Dc, 128), memcpy(sc, row + Dc + 128, sc_bytes);
        } else if (fp8) { /* e4m3 latent, fp32 scales, bf16 rope */
            const unsigned char *row = (const unsigned char *)a->kv_packed.data + slot[t] * 656;
            memcpy(lat, row, lat_bytes), memcpy(sc, row + Dc, sc_bytes), memcpy(kr, row + Dc + sc_bytes, 128);
        } else {
            memcpy(lat, (const unsigned char *)a->kv_cache.data + slot[t] * lat_bytes, lat_bytes);
            memcpy(kr, (const unsigned char *)a->kr_cache.data + slot[t] * 128, 128);
            if (int8_cache)
                memcpy(sc, (const unsigned char *)a->kv_scale_cache.data + slot[t] * sc_bytes, sc_bytes);
        }
        w++;
    }
    return 0;
}

static void mlap_results_free(mlap_result r[MLAP_RESULTS])
{
    for (int i = 0; i < MLAP_RESULTS; i++)
        free(r[i].bytes);
}

static int mlap_check(void *pv, char *why, size_t cap)
{
    mlap_bench *b = pv;
    dsops_mla_prolog_v32_args *a = &b->p->args;
    mlap_result got[MLAP_RESULTS] = {0}, ref[MLAP_RESULTS] = {0};
    int fail = 1;
    if (mlap_collect(b->p, got))
        goto out_of_memory;
    /* the oracle rewrites outputs and the addressed cache rows from the same inputs */
    dsops_ref_mla_prolog_v32(a);
    if (mlap_collect(b->p, ref))
        goto out_of_memory;
    fail = 0;
    snprintf(why, cap, "every result within its tolerance");
    for (int i = 0; i < MLAP_RESULTS && !fail; i++) {
        size_t bad = 0, n = 0;
        double max_err = 0;
        bench_count_outside(got[i].bytes, ref[i].bytes, got[i].dt, got[i].n, got[i].atol, got[i].rtol, &bad, &n,
                            &max_err);
        size_t allowed = (size_t)floor(got[i].share * (double)n + 0.5);
        fail = bad > allowed;
        if (fail)
            snprintf(why, cap, "%zu of %zu %s elements outside %g + %g |ref| (allowed %zu), max |err| %.3g", bad, n,
                     got[i].name, got[i].atol, got[i].rtol, allowed, max_err);
    }
    goto done;
out_of_memory:
    bench_out_of_memory(why, cap);
done:
    mlap_results_free(got), mlap_results_free(ref);
    return fail;
}

static void mlap_release(void *pv)
{
    mlap_bench *b = pv;
    dsops_prepared_destroy(b->prep);
    dsops_mlap_problem_free(b->p);
    free(b->x2);
    free(b->y);
    free(b);
}

/* The prolog's matmuls alone, on the prepared maps: x by wq_a and wkv_a, a [T, Q] operand by wq_b,
 * and every head's [T, Dqn] slice of a [T, N*(Dqn+64)] operand by w_uk[h]. */
static dsops_status mlap_gemms_run(dsops_context *ctx, void *pv)
{
    mlap_bench *b = pv;
    const dsops_mlap_case *c = &b->p->c;
    int64_t T = b->p->T, G = c->Dqn + 64, NG = c->N * G, Q = c->Q;
    int threads = dsops_context_threads(ctx);
    float *y = b->y;
    dsops_linear **m = b->prep->maps;
    dsops_linear_job j1[2] = {{m[0], b->p->args.x.data, c->H, y, Q}, {m[1], b->p->args.x.data, c->H, y, c->Dc + 64}};
    dsops_status s = b->linear_run(ctx, j1, 2, T, threads, dsops_context_isa(ctx));
    dsops_linear_job j3 = {m[2], b->x2, Q, y, NG};
    if (s == DSOPS_OK)
        s = b->linear_run(ctx, &j3, 1, T, threads, dsops_context_isa(ctx));
    dsops_linear_job *jh = malloc(sizeof *jh * (size_t)c->N);
    for (int h = 0; s == DSOPS_OK && jh && h < c->N; h++)
        jh[h] = (dsops_linear_job){m[3 + h], (const uint16_t *)b->x2 + h * G, NG, y + (size_t)h * T * c->Dc, c->Dc};
    if (s == DSOPS_OK && jh)
        s = b->linear_run(ctx, jh, c->N, T, threads, dsops_context_isa(ctx));
    free(jh);
    return s;
}

static int mlap_make_problem(const void *cv, bench_problem *bp, char *why, size_t cap)
{
    const dsops_mlap_case *mc = cv;
    mlap_bench *b = calloc(1, sizeof *b);
    if (!b)
        return bench_out_of_memory(why, cap);
    *bp = (bench_problem){.p = b, .release = mlap_release};
    if (!(b->p = dsops_mlap_problem_make(mc, 5)))
        return bench_cannot_generate(why, cap);
    if (bench_prepared_or_say(dsops_mla_prolog_v32_prepare(NULL, &b->p->args, &b->prep), "mla_prolog_v32_prepare",
                              why, cap))
        return 1;
    int64_t G = mc->Dqn + 64;
    size_t rows = (size_t)b->p->T, wide = (size_t)mc->N * (size_t)G;
    size_t ybytes = rows * 4 * (wide > (size_t)mc->N * mc->Dc ? wide : (size_t)mc->N * mc->Dc);
    b->x2 = calloc(rows * (wide > (size_t)mc->Q ? wide : (size_t)mc->Q), 2);
    b->y = malloc(ybytes + (size_t)mc->Q * 4 * rows + 64);
    if (!b->x2 || !b->y)
        return bench_out_of_memory(why, cap);
    b->p->args.prepared = b->prep;
    *bp = (bench_problem){b, mlap_run, mlap_check, mlap_release, b->p->flops, b->p->weight_bytes,
                          mc->int8_wq_b ? DSOPS_PEAK_INT8_DOT : DSOPS_PEAK_BF16_DOT, .args = &b->p->args};
    return 0;
}

static void mlap_words(const void *cv, char *op, size_t oc, char *sh, size_t sc)
{
    const dsops_mlap_case *c = cv;
    snprintf(op, oc, "mla_prolog_v32");
    snprintf(sh, sc, "B %d S %d", c->B, c->S);
}

static void mlap_list_line(const void *cv, const char *not_ci)
{
    const dsops_mlap_case *c = cv;
    printf("%-40s mla_prolog_v32              B %-3d S %-4d H %d Q %d N %d %s wq_b, %s%s\n", c->name, c->B, c->S,
           c->H, c->Q, c->N, c->int8_wq_b ? "int8" : "bf16", cases_layout_name(c->layout), not_ci);
}

static const void *mlap_table(int *count) { return dsops_mlap_cases(count); }

const bench_family bench_family_mla_prolog_v32 = {
    .op = "mla_prolog_v32",
    .table_word = "mla_prolog_v32",
    .cases = mlap_table,
    .case_size = sizeof(dsops_mlap_case),
    .ci_offset = offsetof(dsops_mlap_case, ci),
    .make_problem = mlap_make_problem,
    .words = mlap_words,
    .list_line = mlap_list_line,
    .matmuls_run = mlap_gemms_run,
};

/* ==== adversarial problems (problems.h) ====================================================================
 * Small mla_prolog_v32 problems for tests/test_mla_prolog.c and test_mla_prolog_validation.c: any shape, layout,
 * dtype and view arrangement, every output and cache buffer a checked region of the problem's fixture (guard zones,
 * padding, rows the call does not address); the elements a call may write, and the oracle's results in dense
 * form. The tests judge a library call on them (tests/problems_check.c). */

#define DR 64

/* ---- element access -------------------------------------------------------------------------------- */

/* Fields of the 656-byte rows: packed_int8 (int8 | rope at 512 | scales at 640) and flashmla_fp8 (e4m3 | scales
 * at 512 | rope at 528). */
static int packed_layout(dsops_kv_layout l) { return l == DSOPS_KV_PACKED_INT8 || l == DSOPS_KV_FLASHMLA_FP8; }

static float packed_rope(const dsops_tensor *kv, dsops_kv_layout l, int64_t blk, int64_t off, int64_t e)
{
    const int64_t at = l == DSOPS_KV_PACKED_INT8 ? 512 : 528;
    uint16_t h = (uint16_t)(*tf_eaddr(kv, blk, off, at + 2 * e) | (*tf_eaddr(kv, blk, off, at + 2 * e + 1) << 8));
    return cases_bf16_value(h);
}

static float packed_scale(const dsops_tensor *kv, dsops_kv_layout l, int64_t blk, int64_t off, int64_t g)
{
    const int64_t at = l == DSOPS_KV_PACKED_INT8 ? 640 : 512;
    uint32_t u = 0;
    for (int k = 3; k >= 0; k--)
        u = (u << 8) | *tf_eaddr(kv, blk, off, at + 4 * g + k);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

void mp_read_cache_row(const dsops_mla_prolog_v32_args *a, int64_t row, float *lat, float *scale, float *kr)
{
    const int packed = packed_layout(a->kv_layout);
    const int64_t Dc = a->w_uk.shape[2], BS = (packed ? a->kv_packed : a->kv_cache).shape[1];
    const int64_t blk = row / BS, off = row % BS;
    for (int64_t c = 0; c < Dc; c++)
        lat[c] = packed ? (float)(int8_t)*tf_eaddr(&a->kv_packed, blk, off, c) : tf_getf(&a->kv_cache, blk, off, c);
    for (int64_t g = 0; g < Dc / 128; g++)
        if (packed)
            scale[g] = packed_scale(&a->kv_packed, a->kv_layout, blk, off, g);
        else if (a->kv_layout == DSOPS_KV_SPLIT_INT8)
            scale[g] = tf_getf(&a->kv_scale_cache, blk, off, g);
    for (int64_t e = 0; e < DR; e++)
        kr[e] = packed ? packed_rope(&a->kv_packed, a->kv_layout, blk, off, e) : tf_getf(&a->kr_cache, blk, off, e);
}

/* ---- problem builder ------------------------------------------------------------------------------- */

static void fill_cache_rows(mp_problem *p, rng *r)
{
    dsops_mla_prolog_v32_args *a = &p->args;
    const mp_spec *sp = &p->sp;
    const int64_t NB = sp->NB, BS = sp->BS, Dc = sp->Dc, G = Dc / 128;
    for (int64_t b = 0; b < NB; b++)
        for (int64_t o = 0; o < BS; o++) {
            if (packed_layout(sp->layout)) { /* the NaN pattern is aimed at packed_int8's fields */
                for (int64_t k = 0; k < 656; k++) {
                    uint8_t v = (uint8_t)cases_rng_next(r);
                    if (sp->nan_cache)
                        v = k < 512 ? 0xff : (k < 640 ? (k % 2 ? 0x7f : 0xc0) : (k % 4 == 3 ? 0x7f : (k % 4 == 2 ? 0xc0 : 0)));
                    *tf_eaddr(&a->kv_packed, b, o, k) = v;
                }
                continue;
            }
            cases_fill_cache_elems(&a->kv_cache, b, o, Dc, r, sp->nan_cache);
            if (a->kv_scale_cache.data)
                for (int64_t g = 0; g < G; g++)
                    tf_putf(&a->kv_scale_cache, b, o, g, sp->nan_cache ? NAN : cases_rng_uniform(r, 0, 0.02f));
            cases_fill_cache_elems(&a->kr_cache, b, o, DR, r, sp->nan_cache);
        }
}

mp_problem *mp_make(const mp_spec *spec, uint64_t seed)
{
    mp_problem *p = cases_xcalloc(1, sizeof *p);
    p->sp = *spec;
    mp_spec *sp = &p->sp;
    p->fx.big_guard = sp->big_guard;
    if (!sp->gamma_dtype)
        sp->gamma_dtype = DSOPS_BF16;
    if (!sp->table_dtype)
        sp->table_dtype = DSOPS_BF16;
    if (sp->NB <= 0)
        sp->NB = cases_default_blocks(sp->T, sp->BS);
    rng r = {seed};

    const int64_t T = sp->T, H = sp->H, Q = sp->Q, N = sp->N, Dqn = sp->Dqn, Dc = sp->Dc, BS = sp->BS, NB = sp->NB;
    const int64_t NG = N * (Dqn + DR), KV = Dc + DR, G = Dc / 128;
    const int64_t pad = sp->strided ? 5 : 0, wpad = sp->strided ? 8 : 0;
    const int share = sp->strided == 2 ? (sp->share ? sp->share : 7) : 0;
    p->T = T, p->NG = NG, p->KV = KV;
    dsops_mla_prolog_v32_args *a = &p->args;
    memset(a, 0, sizeof *a);
    a->eps_cq = sp->eps_cq;
    a->eps_ckv = sp->eps_ckv;
    a->rope_mode = sp->rope_mode;
    a->rope_inverse = sp->rope_inverse;
    a->kv_layout = sp->layout;

    int64_t s[3];
    /* inputs */
    s[0] = T, s[1] = H;
    a->x = tf_alloc_view(&p->fx, DSOPS_BF16, 2, s, pad, 0, 0);
    s[0] = Q, s[1] = H;
    a->wq_a = tf_alloc_view(&p->fx, DSOPS_BF16, 2, s, wpad, 0, 0);
    s[0] = Q;
    a->gamma_cq = tf_alloc_view(&p->fx, sp->gamma_dtype, 1, s, 0, 0, 0);
    s[0] = NG, s[1] = Q;
    a->wq_b = tf_alloc_view(&p->fx, sp->int8_wq_b ? DSOPS_INT8 : DSOPS_BF16, 2, s, wpad, 0, 0);
    if (sp->int8_wq_b) {
        s[0] = NG;
        a->wq_b_scale = tf_alloc_view(&p->fx, DSOPS_FP32, 1, s, 0, 0, 0);
    }
    s[0] = N, s[1] = Dqn, s[2] = Dc;
    a->w_uk = tf_alloc_view(&p->fx, DSOPS_BF16, 3, s, wpad, 0, 0);
    s[0] = KV, s[1] = H;
    a->wkv_a = tf_alloc_view(&p->fx, DSOPS_BF16, 2, s, wpad, 0, 0);
    s[0] = Dc;
    const dsops_dtype ckv_dt =
        sp->mixed_gamma ? (sp->gamma_dtype == DSOPS_FP32 ? DSOPS_BF16 : DSOPS_FP32) : sp->gamma_dtype;
    a->gamma_ckv = tf_alloc_view(&p->fx, ckv_dt, 1, s, 0, 0, 0);
    cases_rope_tables(&p->fx, sp->table_dtype, T, pad, share & 2, &a->rope_cos, &a->rope_sin);
    s[0] = T;
    a->cache_index = tf_alloc_view(&p->fx, DSOPS_INT64, 1, s, 0, 0, 0);
    p->cache_index = a->cache_index.data;

    /* outputs */
    s[0] = T, s[1] = N, s[2] = Dc;
    if (share & 1) { /* q_nope | q_rope side by side in one [T, N, Dc + 64] buffer */
        s[2] = Dc + DR;
        dsops_tensor both = tf_alloc_view(&p->fx, DSOPS_BF16, 3, s, pad, 1, 1);
        if (!(share & 8)) /* padded rows, tokens N rows apart (8: padding between tokens too) */
            both.stride[0] = N * both.stride[1];
        a->q_nope = both, a->q_rope = both;
        a->q_nope.shape[2] = Dc;
        a->q_rope.shape[2] = DR;
        a->q_rope.data = tf_eaddr(&both, 0, 0, Dc);
    } else {
        a->q_nope = tf_alloc_view(&p->fx, DSOPS_BF16, 3, s, pad, 1, 1);
        s[2] = DR;
        a->q_rope = tf_alloc_view(&p->fx, DSOPS_BF16, 3, s, pad, 1, 1);
    }
    s[0] = T, s[1] = Q;
    a->qr = tf_alloc_view(&p->fx, sp->int8_wq_b ? DSOPS_INT8 : DSOPS_BF16, 2, s, pad, 1, 1);
    if (sp->int8_wq_b) {
        s[0] = T;
        a->qr_scale = tf_alloc_view(&p->fx, DSOPS_FP32, 1, s, 0, 1, 1);
    }

    /* caches */
    if (packed_layout(sp->layout)) {
        s[0] = NB, s[1] = BS, s[2] = 656;
        a->kv_packed = tf_alloc_view(&p->fx, DSOPS_UINT8, 3, s, sp->strided ? 16 : 0, 1, 0);
    } else if (share & 4) {
        /* one buffer of rows: split_bf16 [latent Dc | rope 64] bf16 (+ pad); split_int8 bytes
         * [latent Dc int8 | rope 64 bf16 | Dc/128 fp32 scales], the packed_int8 arrangement for Dc = 512 */
        const int int8 = sp->layout == DSOPS_KV_SPLIT_INT8;
        const int64_t rowb = int8 ? Dc + 2 * DR + 4 * G : 2 * (Dc + DR + 4);
        const int64_t blkb = BS * rowb + 16;
        unsigned char *base = tf_alloc_region(&p->fx, (size_t)(NB * blkb), 0, DSOPS_UINT8);
        s[0] = NB, s[1] = BS, s[2] = Dc;
        a->kv_cache = dsops_tensor_make(base, int8 ? DSOPS_INT8 : DSOPS_BF16, 3, s);
        const int64_t es = int8 ? 1 : 2;
        a->kv_cache.stride[0] = blkb / es, a->kv_cache.stride[1] = rowb / es;
        s[2] = DR;
        a->kr_cache = dsops_tensor_make(base + (int8 ? Dc : 2 * Dc), DSOPS_BF16, 3, s);
        a->kr_cache.stride[0] = blkb / 2, a->kr_cache.stride[1] = rowb / 2;
        if (int8) {
            s[2] = G;
            a->kv_scale_cache = dsops_tensor_make(base + Dc + 2 * DR, DSOPS_FP32, 3, s);
            a->kv_scale_cache.stride[0] = blkb / 4, a->kv_scale_cache.stride[1] = rowb / 4;
        }
    } else {
        const int64_t cpad = sp->strided ? 3 : 0;
        s[0] = NB, s[1] = BS, s[2] = Dc;
        a->kv_cache = tf_alloc_view(&p->fx, sp->layout == DSOPS_KV_SPLIT_INT8 ? DSOPS_INT8 : DSOPS_BF16, 3, s,
                                    sp->layout == DSOPS_KV_SPLIT_INT8 ? 4 * cpad : cpad, 1, 0);
        if (sp->layout == DSOPS_KV_SPLIT_INT8) {
            s[2] = G;
            a->kv_scale_cache = tf_alloc_view(&p->fx, DSOPS_FP32, 3, s, cpad, 1, 0);
        }
        s[2] = DR;
        a->kr_cache = tf_alloc_view(&p->fx, DSOPS_BF16, 3, s, cpad, 1, 0);
    }

    /* data */
    cases_fill_rows(&a->x, &r, sp->zero_tokens);
    cases_fill_view_uniform(&a->wq_a, &r, -0.1f, 0.1f);
    cases_fill_view_uniform(&a->wkv_a, &r, -0.1f, 0.1f);
    cases_fill_view_uniform(&a->w_uk, &r, -0.1f, 0.1f);
    if (sp->int8_wq_b) {
        for (int64_t n = 0; n < NG; n++) {
            cases_fill_int8_row(&a->wq_b, n, &r, sp->int8_extreme);
            float sc = cases_rng_uniform(&r, 2e-4f, 2e-3f);
            tf_putf(&a->wq_b_scale, n, 0, 0, (n % 7 == 3) ? -sc : sc); /* some negative scales */
        }
    } else {
        cases_fill_view_uniform(&a->wq_b, &r, -0.1f, 0.1f);
    }
    if (sp->tiny_gamma) {
        cases_fill_view_uniform(&a->gamma_cq, &r, 0.5e-38f, 1e-38f);
        cases_fill_view_uniform(&a->gamma_ckv, &r, 0.5e-38f, 1e-38f);
    } else {
        cases_fill_view_uniform(&a->gamma_cq, &r, -1, 1);
        cases_fill_view_uniform(&a->gamma_ckv, &r, -1, 1);
    }
    cases_fill_view_uniform(&a->rope_cos, &r, -1, 1);
    cases_fill_view_uniform(&a->rope_sin, &r, -1, 1);
    fill_cache_rows(p, &r);

    cases_cache_indices(&r, NB * BS, T, (cases_index_mode)sp->index_mode, p->cache_index);
    return p;
}

/* ---- freeing (sentinels and snapshots are the fixture's: tf_prepare_call, tf_restore on p->fx) ------ */

void mp_free(mp_problem *p)
{
    if (p)
        tf_free(&p->fx);
    free(p);
}

/* ---- the elements a call may write ------------------------------------------------------------------ */

void mp_each_written(const void *args, tf_elem_fn fn, void *ctx)
{
    const dsops_mla_prolog_v32_args *a = args;
    tf_each_in_view(&a->q_nope, fn, ctx);
    tf_each_in_view(&a->q_rope, fn, ctx);
    tf_each_in_view(&a->qr, fn, ctx);
    if (a->wq_b.dtype == DSOPS_INT8)
        tf_each_in_view(&a->qr_scale, fn, ctx);
    for (int64_t t = 0; t < a->x.shape[0]; t++) {
        const int64_t r = tf_get_index(&a->cache_index, t);
        if (r < 0)
            continue;
        if (packed_layout(a->kv_layout)) {
            cases_each_in_cache_row(&a->kv_packed, r, fn, ctx);
            continue;
        }
        cases_each_in_cache_row(&a->kv_cache, r, fn, ctx);
        if (a->kv_layout == DSOPS_KV_SPLIT_INT8)
            cases_each_in_cache_row(&a->kv_scale_cache, r, fn, ctx);
        cases_each_in_cache_row(&a->kr_cache, r, fn, ctx);
    }
}

unsigned char *mp_gather(const dsops_mla_prolog_v32_args *a, size_t *n)
{
    return cases_gather(mp_each_written, a, n);
}

/* ---- reference ------------------------------------------------------------------------------------- */

mp_ref *mp_reference(const dsops_mla_prolog_v32_args *a)
{
    const int64_t T = a->x.shape[0], Q = a->wq_a.shape[0], N = a->w_uk.shape[0], Dc = a->w_uk.shape[2];
    const int64_t G = Dc / 128;
    const int int8 = a->wq_b.dtype == DSOPS_INT8;
    mp_ref *r = cases_xcalloc(1, sizeof *r);
    r->T = T, r->N = N, r->Q = Q, r->Dc = Dc;

    dsops_mla_prolog_v32_args ra = *a;
    ra.prepared = NULL;
    int64_t s[3];
    /* dense outputs */
    s[0] = T, s[1] = N, s[2] = Dc;
    ra.q_nope = dsops_tensor_make(cases_xcalloc((size_t)(T * N * Dc), sizeof(uint16_t)), DSOPS_BF16, 3, s);
    s[2] = DR;
    ra.q_rope = dsops_tensor_make(cases_xcalloc((size_t)(T * N * DR), sizeof(uint16_t)), DSOPS_BF16, 3, s);
    s[0] = T, s[1] = Q;
    ra.qr = dsops_tensor_make(cases_xcalloc((size_t)(T * Q), int8 ? 1 : 2), int8 ? DSOPS_INT8 : DSOPS_BF16, 2, s);
    s[0] = T;
    if (int8)
        ra.qr_scale = dsops_tensor_make(cases_xcalloc((size_t)(T > 0 ? T : 1), sizeof(float)), DSOPS_FP32, 1, s);
    /* compact caches: row w of [nw, 1, W] for the w-th writing token */
    ra.cache_index = cases_compact_index(&a->cache_index, &r->nw);
    const int64_t nw = r->nw, rows = nw > 0 ? nw : 1;
    s[0] = rows, s[1] = 1;
    memset(&ra.kv_cache, 0, sizeof ra.kv_cache);
    memset(&ra.kv_scale_cache, 0, sizeof ra.kv_scale_cache);
    memset(&ra.kr_cache, 0, sizeof ra.kr_cache);
    memset(&ra.kv_packed, 0, sizeof ra.kv_packed);
    if (packed_layout(a->kv_layout)) {
        s[2] = 656;
        ra.kv_packed = dsops_tensor_make(cases_xcalloc((size_t)(rows * 656), 1), DSOPS_UINT8, 3, s);
    } else {
        const int i8 = a->kv_layout == DSOPS_KV_SPLIT_INT8;
        s[2] = Dc;
        ra.kv_cache = dsops_tensor_make(cases_xcalloc((size_t)(rows * Dc), i8 ? 1 : 2), i8 ? DSOPS_INT8 : DSOPS_BF16,
                                        3, s);
        if (i8) {
            s[2] = G;
            ra.kv_scale_cache = dsops_tensor_make(cases_xcalloc((size_t)(rows * G), sizeof(float)), DSOPS_FP32, 3, s);
        }
        s[2] = DR;
        ra.kr_cache = dsops_tensor_make(cases_xcalloc((size_t)(rows * DR), sizeof(uint16_t)), DSOPS_BF16, 3, s);
    }

    dsops_ref_mla_prolog_v32(&ra);

    /* to fp32 arrays */
    r->q_nope = cases_xcalloc((size_t)(T * N * Dc), sizeof(float));
    r->q_rope = cases_xcalloc((size_t)(T * N * DR), sizeof(float));
    r->qr = cases_xcalloc((size_t)(T * Q), sizeof(float));
    r->qr_scale = cases_xcalloc((size_t)(T > 0 ? T : 1), sizeof(float));
    cases_dense_f32(&ra.q_nope, r->q_nope);
    cases_dense_f32(&ra.q_rope, r->q_rope);
    cases_dense_f32(&ra.qr, r->qr);
    if (int8)
        cases_dense_f32(&ra.qr_scale, r->qr_scale);
    r->lat = cases_xcalloc((size_t)(rows * Dc), sizeof(float));
    r->scale = cases_xcalloc((size_t)(rows * (G > 0 ? G : 1)), sizeof(float));
    r->kr = cases_xcalloc((size_t)(rows * DR), sizeof(float));
    for (int64_t w = 0; w < nw; w++) /* the compact caches hold one row per block: row w is block w */
        mp_read_cache_row(&ra, w, r->lat + w * Dc, r->scale + w * G, r->kr + w * DR);

    free(ra.q_nope.data);
    free(ra.q_rope.data);
    free(ra.qr.data);
    free(ra.qr_scale.data);
    free(ra.cache_index.data);
    free(ra.kv_cache.data);
    free(ra.kv_scale_cache.data);
    free(ra.kr_cache.data);
    free(ra.kv_packed.data);
    return r;
}

void mp_ref_free(mp_ref *r)
{
    if (!r)
        return;
    free(r->q_nope);
    free(r->q_rope);
    free(r->qr);
    free(r->qr_scale);
    free(r->lat);
    free(r->scale);
    free(r->kr);
    free(r);
}
