/* indexer_prolog_v4 (spec §3.5; docs/CASES.md "indexer_prolog_v4"): the named cases, their data generator,
 * the bench adapter and the adversarial problems of tests/test_v4_prologs.c (problems.h).
 *
 * Data (docs/CASES.md data seed 42):
 *   qr, idx_wq_b         int8 draws from {-1, 0} passed through Q8 per token / per output channel:
 *                        entries {-127, 0}, scale fp32(1 / fp32(127 / 1)) (0 for an all-zero row)
 *                                                                                 [T, Q], [NI*DI, Q]
 *   x                    U(-1,1) bf16                                                  [T, H]
 *   weights_proj         U(-0.1,0.1) bf16                                              [NI, H]
 *   rope_cos, rope_sin   U(-1,1) bf16                                                  [T, 64]
 *   hadamard             U(-1,1) bf16 (a random matrix, as the vendor test)            [DI, DI]
 *   parameters           vendor (spec §5): rope_inverse = 1; weights_scale 1 / sqrt(64 * 128), interleaved
 *
 * Every generated row draws from its own generator seeded from (seed, stream, row), so the data do not
 * depend on the thread count and rows fill in parallel. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_family.h"
#include "cases.h"
#include "cases_internal.h"
#include "ref.h"

#define V4P_IDX .H = 4096, .Q = 1024, .NI = 64, .DI = 128

static const dsops_idxp4_case idxp4_cases[] = {
    {.name = "v4_idx_prolog_t64", .T = 64, V4P_IDX, .ci = 1},
    {.name = "v4_idx_prolog_t128", .T = 128, V4P_IDX, .vendor_us = 101, .vendor = "PyPTO", .ci = 1},
    {.name = "v4_idx_prolog_t256", .T = 256, V4P_IDX, .ci = 1},
    {.name = "v4_idx_prolog_t511", .T = 511, V4P_IDX, .ci = 1},
};

const dsops_idxp4_case *dsops_idxp4_cases(int *count) { return CASES_TABLE(idxp4_cases, count); }
const dsops_idxp4_case *dsops_idxp4_case_find(const char *name) { return CASES_FIND(idxp4_cases, name); }
void dsops_idxp4_problem_free(dsops_idxp4_problem *p) { if (p) cases_problem_release(p->buffers, p->nbuffers, p); }

/* the stream numbers the two V4 prologs have always drawn from */
enum { V4P_STREAM_X = 1, V4P_STREAM_COS = 7, V4P_STREAM_SIN = 8, V4P_STREAM_QR = 9, V4P_STREAM_IWQB = 10,
       V4P_STREAM_WPROJ = 11, V4P_STREAM_HAD = 12 };

/* Each row int8 draws from {-1, 0} (equally likely), quantised per row by Q8: {-127, 0} and 1/127. */
static void v4p_fill_q8_sign(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, int8_t *dst, float *scale)
{
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        float v[CASES_MAX_ROW];
        rng r = cases_row_rng(seed, stream, row);
        for (int64_t k = 0; k < cols; k += 64) {
            uint64_t bits = cases_rng_next(&r);
            for (int64_t j = k; j < cols && j < k + 64; j++)
                v[j] = (bits >> (j - k)) & 1u ? -1.0f : 0.0f;
        }
        scale[row] = cases_q8_row(v, cols, dst + row * cols);
    }
}

static void *idxp4_alloc(dsops_idxp4_problem *p, size_t bytes) { return ALLOC_OWNED(p, bytes); }

/* The V4 defaults of spec §3.5, from the preset (set here when the init function refuses). */
static void idxp4_defaults(dsops_indexer_prolog_v4_args *a, dsops_preset preset)
{
    if (dsops_indexer_prolog_v4_init(a, preset) == DSOPS_OK)
        return;
    memset(a, 0, sizeof *a);
    a->weights_scale = (float)(1.0 / sqrt(64.0 * 128.0));
    a->rope_mode = DSOPS_ROPE_INTERLEAVED;
    a->rope_inverse = 0;
    a->prepared = NULL;
}

dsops_idxp4_problem *dsops_idxp4_problem_make(const dsops_idxp4_case *c, uint64_t seed)
{
    if (!c || c->T < 0 || c->H < 1 || c->H > CASES_MAX_ROW || c->Q < 1 || c->Q > CASES_MAX_ROW || c->NI < 1 ||
        c->DI < 64 || c->DI > CASES_MAX_ROW)
        return NULL;
    dsops_idxp4_problem *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->c = *c;
    const int64_t T = c->T, H = c->H, Q = c->Q, NI = c->NI, DI = c->DI, NQ = NI * DI;

    int8_t *qr = idxp4_alloc(p, (size_t)(T * Q));                          /* [T, Q] int8 */
    float *qr_scale = idxp4_alloc(p, sizeof(float) * (size_t)T);           /* [T] fp32 */
    uint16_t *x = idxp4_alloc(p, sizeof(uint16_t) * (size_t)(T * H));      /* [T, H] bf16 */
    int8_t *wq_b = idxp4_alloc(p, (size_t)(NQ * Q));                       /* [NI*DI, Q] int8 */
    float *wq_b_scale = idxp4_alloc(p, sizeof(float) * (size_t)NQ);        /* [NI*DI] fp32 */
    uint16_t *wproj = idxp4_alloc(p, sizeof(uint16_t) * (size_t)(NI * H)); /* [NI, H] bf16 */
    uint16_t *cosb = idxp4_alloc(p, sizeof(uint16_t) * (size_t)(T * 64)); /* [T, 64] bf16 */
    uint16_t *sinb = idxp4_alloc(p, sizeof(uint16_t) * (size_t)(T * 64)); /* [T, 64] bf16 */
    uint16_t *had = idxp4_alloc(p, sizeof(uint16_t) * (size_t)(DI * DI));  /* [DI, DI] bf16 */
    int8_t *q_idx = idxp4_alloc(p, (size_t)(T * NQ));                      /* [T, NI, DI] int8, out */
    uint16_t *q_scale = idxp4_alloc(p, sizeof(uint16_t) * (size_t)(T * NI)); /* [T, NI] fp16, out */
    uint16_t *weights = idxp4_alloc(p, sizeof(uint16_t) * (size_t)(T * NI)); /* [T, NI] fp16, out */
    if (!qr || !qr_scale || !x || !wq_b || !wq_b_scale || !wproj || !cosb || !sinb || !had || !q_idx || !q_scale ||
        !weights) {
        dsops_idxp4_problem_free(p);
        return NULL;
    }

    v4p_fill_q8_sign(seed, V4P_STREAM_QR, T, Q, qr, qr_scale);
    v4p_fill_q8_sign(seed, V4P_STREAM_IWQB, NQ, Q, wq_b, wq_b_scale);
    cases_fill_bf16(seed, V4P_STREAM_X, T, H, 1.0f, x);
    cases_fill_bf16(seed, V4P_STREAM_WPROJ, NI, H, 0.1f, wproj);
    cases_fill_bf16(seed, V4P_STREAM_COS, T, 64, 1.0f, cosb);
    cases_fill_bf16(seed, V4P_STREAM_SIN, T, 64, 1.0f, sinb);
    cases_fill_bf16(seed, V4P_STREAM_HAD, DI, DI, 1.0f, had);

    dsops_indexer_prolog_v4_args *a = &p->args;
    idxp4_defaults(a, DSOPS_PRESET_V4_FLASH);
    a->rope_inverse = 1; /* vendor parameters (spec §5) */
    a->qr = dsops_tensor_make(qr, DSOPS_INT8, 2, (int64_t[]){T, Q});
    a->qr_scale = dsops_tensor_make(qr_scale, DSOPS_FP32, 1, (int64_t[]){T});
    a->x = dsops_tensor_make(x, DSOPS_BF16, 2, (int64_t[]){T, H});
    a->idx_wq_b = dsops_tensor_make(wq_b, DSOPS_INT8, 2, (int64_t[]){NQ, Q});
    a->idx_wq_b_scale = dsops_tensor_make(wq_b_scale, DSOPS_FP32, 1, (int64_t[]){NQ});
    a->weights_proj = dsops_tensor_make(wproj, DSOPS_BF16, 2, (int64_t[]){NI, H});
    a->rope_cos = dsops_tensor_make(cosb, DSOPS_BF16, 2, (int64_t[]){T, 64});
    a->rope_sin = dsops_tensor_make(sinb, DSOPS_BF16, 2, (int64_t[]){T, 64});
    a->hadamard = dsops_tensor_make(had, DSOPS_BF16, 2, (int64_t[]){DI, DI});
    a->q_idx = dsops_tensor_make(q_idx, DSOPS_INT8, 3, (int64_t[]){T, NI, DI});
    a->q_idx_scale = dsops_tensor_make(q_scale, DSOPS_FP16, 2, (int64_t[]){T, NI});
    a->weights = dsops_tensor_make(weights, DSOPS_FP16, 2, (int64_t[]){T, NI});

    p->flops = 2.0 * (double)T * ((double)Q * NQ + (double)H * NI + (double)NI * DI * DI);
    p->weight_bytes = (1.0 + 4.0 / (double)Q) * (double)NQ * Q + 2.0 * (double)NI * H + 2.0 * (double)DI * DI;
    return p;
}

/* ---- bench adapter ------------------------------------------------------------------------------- */
/* Alike in shape with the other families' adapters: bench_family.h says why each family keeps its own. */

/* indexer_prolog_v4: timed with prepared weights (tests/test_cases.c checks the call without them). --check
 * compares q_idx (1 / 0 / 0), q_idx_scale and weights (1e-4 / 0.007825 /
 * 0.005; docs/OPERATORS.md §3.5) with the oracle. A second row times the same matmuls alone (idx_wq_b,
 * weights_proj and the Hadamard map). */
typedef struct idxp4_bench {
    bench_linear_run_fn linear_run; /* first: the matmul-only row's runner, set by bench_matmuls */
    dsops_idxp4_problem *p;
    dsops_prepared *prep;
    void *hx;                  /* [T*NI, DI] stand-in Hadamard operand, in the matrix's dtype */
    void *y;                   /* int32 / fp32 results of the matmul-only row */
} idxp4_bench;

/* The maps of an indexer_prolog_v4 prepared object, in its order. */
enum { IDXP4_MAP_WQ_B, IDXP4_MAP_WPROJ, IDXP4_MAP_HAD, IDXP4_MAP_COUNT };

static dsops_status idxp4_run(dsops_context *ctx, void *pv)
{
    idxp4_bench *b = pv;
    return dsops_indexer_prolog_v4(ctx, &b->p->args);
}

/* The call's outputs: q_idx [T*NI*DI] int8 bytes, then q_idx_scale and weights [T*NI] each widened from
 * fp16 to fp32 (returned). */
static float *idxp4_take_outputs(const dsops_indexer_prolog_v4_args *a, size_t nq, size_t nh, int8_t *q)
{
    float *f = malloc(sizeof(float) * 2 * nh + 1);
    const uint16_t *scale = a->q_idx_scale.data, *weights = a->weights.data;
    memcpy(q, a->q_idx.data, nq);
    for (size_t i = 0; f && i < nh; i++)
        f[i] = dsops_ref_f32_from_fp16(scale[i]), f[nh + i] = dsops_ref_f32_from_fp16(weights[i]);
    return f;
}

static int idxp4_check(void *pv, char *why, size_t cap)
{
    idxp4_bench *b = pv;
    dsops_indexer_prolog_v4_args *a = &b->p->args;
    const size_t nh = (size_t)((int64_t)b->p->c.T * b->p->c.NI), n = nh * (size_t)b->p->c.DI;
    int8_t *q = malloc(2 * n + 1); /* q_idx of the call and of the oracle */
    float *got = q ? idxp4_take_outputs(a, n, nh, q) : NULL, *ref = NULL;
    if (!got) {
        free(q);
        return bench_out_of_memory(why, cap);
    }
    dsops_ref_indexer_prolog_v4(a); /* rewrites the outputs from the same inputs */
    ref = idxp4_take_outputs(a, n, nh, q + n);
    int fail = 0;
    if (!ref) {
        fail = bench_out_of_memory(why, cap);
    } else {
        size_t bad_q = 0, bad_scale = 0, bad_w = 0, total = 0;
        double max_q = 0, max_scale = 0, max_w = 0;
        bench_count_outside(q, q + n, DSOPS_INT8, n, 1.0, 0.0, &bad_q, &total, &max_q);
        bench_count_outside(got, ref, DSOPS_FP32, nh, 1e-4, 0.007825, &bad_scale, &total, &max_scale);
        bench_count_outside(got + nh, ref + nh, DSOPS_FP32, nh, 1e-4, 0.007825, &bad_w, &total, &max_w);
        snprintf(why, cap, "outside their tolerances: %zu of %zu q_idx elements (1 / 0, max |err| %.3g), %zu of %zu "
                 "q_idx_scale and %zu of %zu weights elements (1e-4 / 0.007825, max |err| %.3g, %.3g)", bad_q, n,
                 max_q, bad_scale, nh, bad_w, nh, max_scale, max_w);
        fail = bad_q != 0 || bench_too_many(bad_scale, nh) || bench_too_many(bad_w, nh);
    }
    free(q), free(got), free(ref);
    return fail;
}

static void idxp4_release(void *pv)
{
    idxp4_bench *b = pv;
    dsops_prepared_destroy(b->prep);
    dsops_idxp4_problem_free(b->p);
    free(b->hx);
    free(b->y);
    free(b);
}

/* The prolog's matmuls alone, on the prepared maps: qr (int8) by idx_wq_b and x by weights_proj, then the
 * Hadamard map on a [T*NI, DI] operand of the matrix's dtype. */
static dsops_status idxp4_gemms_run(dsops_context *ctx, void *pv)
{
    idxp4_bench *b = pv;
    const dsops_idxp4_case *c = &b->p->c;
    const dsops_indexer_prolog_v4_args *a = &b->p->args;
    const int64_t T = c->T, NQ = (int64_t)c->NI * c->DI;
    const int threads = dsops_context_threads(ctx);
    char *y = b->y;
    dsops_linear **m = b->prep->maps;
    dsops_linear_job j[2] = {{m[IDXP4_MAP_WQ_B], a->qr.data, c->Q, y, NQ},
                             {m[IDXP4_MAP_WPROJ], a->x.data, c->H, y + (size_t)(T * NQ) * 4, c->NI}};
    dsops_status s = b->linear_run(ctx, j, 2, T, threads, dsops_context_isa(ctx));
    dsops_linear_job jh = {m[IDXP4_MAP_HAD], b->hx, c->DI, y, c->DI};
    if (s == DSOPS_OK)
        s = b->linear_run(ctx, &jh, 1, T * c->NI, threads, dsops_context_isa(ctx));
    return s;
}
static int idxp4_make_problem(const void *cv, bench_problem *bp, char *why, size_t cap)
{
    const dsops_idxp4_case *ic = cv;
    idxp4_bench *b = calloc(1, sizeof *b);
    if (!b)
        return bench_out_of_memory(why, cap);
    *bp = (bench_problem){.p = b, .run = idxp4_run, .check = idxp4_check, .release = idxp4_release};
    if (!(b->p = dsops_idxp4_problem_make(ic, 42)))
        return bench_cannot_generate(why, cap);
    if (bench_prepared_or_say(dsops_indexer_prolog_v4_prepare(NULL, &b->p->args, &b->prep),
                              "indexer_prolog_v4_prepare", why, cap))
        return 1;
    const size_t NQ = (size_t)ic->NI * (size_t)ic->DI;
    b->hx = calloc((size_t)ic->T * NQ + 1, dsops_dtype_size(b->p->args.hadamard.dtype));
    b->y = malloc(4 * (size_t)ic->T * (NQ + (size_t)ic->NI) + 64);
    if (!b->hx || !b->y)
        return bench_out_of_memory(why, cap);
    b->p->args.prepared = b->prep;
    /* mostly int8 work (qr by idx_wq_b); the Hadamard products and weights_proj are counted with it */
    *bp = (bench_problem){b, idxp4_run, idxp4_check, idxp4_release, b->p->flops, b->p->weight_bytes,
                          DSOPS_PEAK_INT8_DOT, .vendor_us = ic->vendor_us, .vendor = ic->vendor, .args = &b->p->args};
    return 0;
}

static void idxp4_words(const void *cv, char *op, size_t oc, char *sh, size_t sc)
{
    snprintf(op, oc, "indexer_prolog_v4");
    snprintf(sh, sc, "T %d", ((const dsops_idxp4_case *)cv)->T);
}

static void idxp4_list_line(const void *cv, const char *not_ci)
{
    const dsops_idxp4_case *c = cv;
    printf("%-40s indexer_prolog_v4           T %-5d H %d Q %d NI %d DI %d%s\n", c->name, c->T, c->H, c->Q, c->NI,
           c->DI, not_ci);
}

static void idxp4_vendor(const void *cv, double *us, const char **label)
{
    *us = ((const dsops_idxp4_case *)cv)->vendor_us, *label = ((const dsops_idxp4_case *)cv)->vendor;
}

static int idxp4_matmuls_check(const void *pv, char *why, size_t cap)
{
    return bench_prepared_has_maps(((const idxp4_bench *)pv)->prep, IDXP4_MAP_COUNT, why, cap);
}

static const void *idxp4_table(int *count) { return dsops_idxp4_cases(count); }

const bench_family bench_family_indexer_prolog_v4 = {
    .op = "indexer_prolog_v4",
    .table_word = "indexer_prolog_v4",
    .cases = idxp4_table,
    .case_size = sizeof(dsops_idxp4_case),
    .ci_offset = offsetof(dsops_idxp4_case, ci),
    .make_problem = idxp4_make_problem,
    .words = idxp4_words,
    .list_line = idxp4_list_line,
    .vendor = idxp4_vendor,
    .matmuls_run = idxp4_gemms_run,
    .matmuls_check = idxp4_matmuls_check,
};

/* ==== adversarial problems (problems.h) ==================================================================== */

static void i4_oracle(const void *args) { dsops_ref_indexer_prolog_v4(args); }

i4_problem *i4_make(const i4_spec *sp, uint64_t seed)
{
    i4_problem *p = cases_xcalloc(1, sizeof *p);
    v4p_init(&p->pl, "indexer_prolog_v4", &p->a, i4_oracle);
    p->sp = *sp;
    rng r = {seed};
    const int64_t T = sp->T, H = sp->H, Q = sp->Q, NI = sp->NI, DI = sp->DI;
    const dsops_dtype tdt = sp->table_dtype ? sp->table_dtype : DSOPS_BF16;
    const dsops_dtype hdt = sp->had_dtype ? sp->had_dtype : DSOPS_BF16;
    dsops_indexer_prolog_v4_args *a = &p->a;
    a->rope_mode = sp->rope_mode;
    a->rope_inverse = sp->rope_inverse;
    if (sp->weights_scale != 0.0f)
        a->weights_scale = sp->weights_scale;

    int64_t s[3];
    s[0] = T, s[1] = Q;
    a->qr = v4p_input(&p->pl, "qr", DSOPS_INT8, 2, s, sp->padded);                 /* [T, Q] int8 */
    s[0] = T;
    a->qr_scale = v4p_input(&p->pl, "qr_scale", DSOPS_FP32, 1, s, 0);              /* [T] fp32 */
    s[0] = NI * DI, s[1] = Q;
    a->idx_wq_b = v4p_input(&p->pl, "idx_wq_b", DSOPS_INT8, 2, s, 0);              /* [NI*DI, Q] int8 */
    s[0] = NI * DI;
    a->idx_wq_b_scale = v4p_input(&p->pl, "idx_wq_b_scale", DSOPS_FP32, 1, s, 0);  /* [NI*DI] fp32 */
    if (sp->sign_data) {
        v4p_fill_q8_rows(&a->qr, &a->qr_scale, &r, V4P_SIGN_DATA);
        v4p_fill_q8_rows(&a->idx_wq_b, &a->idx_wq_b_scale, &r, V4P_SIGN_DATA);
    } else {
        v4p_fill_q8_rows(&a->qr, &a->qr_scale, &r, 1.0f);
        v4p_fill_q8_rows(&a->idx_wq_b, &a->idx_wq_b_scale, &r, 0.1f);
    }
    for (int64_t t = 0; t < sp->zero_tokens && t < T; t++) {
        for (int64_t k = 0; k < Q; k++)
            v4p_set(&a->qr, t * Q + k, 0.0f);
        v4p_set(&a->qr_scale, t, 0.0f);
    }
    s[0] = T, s[1] = H;
    a->x = v4p_input(&p->pl, "x", DSOPS_BF16, 2, s, sp->padded);                   /* [T, H] bf16 */
    cases_fill_view_uniform(&a->x, &r, -1, 1);
    s[0] = NI, s[1] = H;
    a->weights_proj = v4p_input(&p->pl, "weights_proj", DSOPS_BF16, 2, s, 0);      /* [NI, H] bf16 */
    cases_fill_view_uniform(&a->weights_proj, &r, -0.1f, 0.1f);
    v4p_rope_tables(&p->pl, tdt, T, sp->padded, &r, &a->rope_cos, &a->rope_sin);
    s[0] = DI, s[1] = DI;
    a->hadamard = v4p_input(&p->pl, "hadamard", hdt, 2, s, 0);                     /* [DI, DI] */
    if (sp->had == I4_HAD_SYLVESTER)
        dsops_ref_hadamard_matrix(&a->hadamard);
    else
        cases_fill_view_uniform(&a->hadamard, &r, -1.0f / sqrtf((float)DI), 1.0f / sqrtf((float)DI));

    s[0] = T, s[1] = NI, s[2] = DI;
    v4p_output(&p->pl, "q_idx", DSOPS_INT8, 3, s, sp->padded);                    /* [T, NI, DI] int8 */
    s[0] = T, s[1] = NI;
    v4p_output(&p->pl, "q_idx_scale", DSOPS_FP16, 2, s, sp->padded);              /* [T, NI] fp16 */
    v4p_output(&p->pl, "weights", DSOPS_FP16, 2, s, sp->padded);                  /* [T, NI] fp16 */
    return p;
}
