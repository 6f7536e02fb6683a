/* Named DeepSeek-V4 prolog cases of docs/CASES.md ("mla_prolog_v4", "indexer_prolog_v4") and their data
 * generators.
 *
 * mla_prolog_v4 (spec §3.3; the caller passes the data seed, docs/CASES.md: 5):
 *   x                    U(-1,1) bf16                                                  [T, H]
 *   wq_a, wq_b, wkv      U(-0.1,0.1) bf16; int8 wq_b: Q8 (spec §2.7) of the bf16 matrix per output
 *                        channel (row), wq_b_scale the per-row scales        [Q, H], [N*D, Q], [D, H]
 *   gamma_cq, gamma_ckv  U(-1,1) bf16                                                  [Q], [D]
 *   rope_cos, rope_sin   U(-1,1) bf16 (random values, not real tables)                 [T, 64]
 *   parameters           V4 defaults (= vendor): eps 1e-6, interleaved, not inverse
 * indexer_prolog_v4 (spec §3.5; docs/CASES.md data seed 42):
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
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "cases_internal.h"

/* ---- case tables ---------------------------------------------------------------------------------- */

#define V4P_FLASH .H = 4096, .Q = 1024, .N = 64, .D = 512
#define V4P_PRO .H = 7168, .Q = 1536, .N = 128, .D = 512

static const dsops_mla4_case mla4_cases[] = {
    {.name = "v4_mla_prolog_bf16_t16", .T = 16, V4P_FLASH, .int8 = 0, .ci = 1},
    {.name = "v4_mla_prolog_int8_t4", .T = 4, V4P_FLASH, .int8 = 1, .ci = 1},
    {.name = "v4_mla_prolog_int8_t16", .T = 16, V4P_FLASH, .int8 = 1, .ci = 1},
    {.name = "v4_mla_prolog_int8_t512", .T = 512, V4P_FLASH, .int8 = 1, .ci = 0,
     .ci_variant = "v4_mla_prolog_int8_t512_ci"},
    {.name = "v4_mla_prolog_int8_t512_ci", .T = 128, V4P_FLASH, .int8 = 1, .ci = 1},
    /* the vendor's table does not state the variant of its 130 us; the int8 prolog is the one V4 runs */
    {.name = "v4_mla_prolog_b64_s2", .T = 128, V4P_FLASH, .int8 = 1, .vendor_us = 130, .vendor = "PyPTO", .ci = 1},
    {.name = "v4_mla_prolog_pro_int8_t16", .T = 16, V4P_PRO, .int8 = 1, .ci = 1},
};

const dsops_mla4_case *dsops_mla4_cases(int *count) { return CASES_TABLE(mla4_cases, count); }
const dsops_mla4_case *dsops_mla4_case_find(const char *name) { return CASES_FIND(mla4_cases, name); }
void dsops_mla4_problem_free(dsops_mla4_problem *p) { if (p) cases_problem_release(p->buffers, p->nbuffers, p); }

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

/* ---- row generators ------------------------------------------------------------------------------- */

#define V4P_MAX_ROW 16384 /* longest generated row (H, Q, DI) */

enum {
    V4P_STREAM_X = 1, V4P_STREAM_WQA = 2, V4P_STREAM_WQB = 3, V4P_STREAM_WKV = 4, V4P_STREAM_GCQ = 5,
    V4P_STREAM_GCKV = 6, V4P_STREAM_COS = 7, V4P_STREAM_SIN = 8, V4P_STREAM_QR = 9, V4P_STREAM_IWQB = 10,
    V4P_STREAM_WPROJ = 11, V4P_STREAM_HAD = 12
};

/* Q8 of spec §2.7 over one row of finite values v[0 .. n-1]: q and the fp32 scale. */
static float v4p_q8_row(const float *v, int64_t n, int8_t *q)
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
        q[k] = (int8_t)(int)rintf(v[k] * sq);
    return 1.0f / sq;
}

/* Each row int8 draws from {-1, 0} (equally likely), quantised per row by Q8: {-127, 0} and 1/127. */
static void v4p_fill_q8_sign(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, int8_t *dst, float *scale)
{
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        float v[V4P_MAX_ROW];
        rng r = cases_row_rng(seed, stream, row);
        for (int64_t k = 0; k < cols; k += 64) {
            uint64_t bits = cases_rng_next(&r);
            for (int64_t j = k; j < cols && j < k + 64; j++)
                v[j] = (bits >> (j - k)) & 1u ? -1.0f : 0.0f;
        }
        scale[row] = v4p_q8_row(v, cols, dst + row * cols);
    }
}

/* ---- mla_prolog_v4 ------------------------------------------------------------------------------- */

static void *mla4_alloc(dsops_mla4_problem *p, size_t bytes) { return ALLOC_OWNED(p, bytes); }

/* The V4 defaults of spec §3.3, from the preset (set here when the init function refuses). */
static void mla4_defaults(dsops_mla_prolog_v4_args *a, dsops_preset preset)
{
    if (dsops_mla_prolog_v4_init(a, preset) == DSOPS_OK)
        return;
    memset(a, 0, sizeof *a);
    a->eps_cq = a->eps_ckv = a->eps_qh = 1e-6f;
    a->rope_mode = DSOPS_ROPE_INTERLEAVED;
    a->rope_inverse = 0;
    a->prepared = NULL;
}

dsops_mla4_problem *dsops_mla4_problem_make(const dsops_mla4_case *c, uint64_t seed)
{
    if (!c || c->T < 0 || c->H < 1 || c->H > V4P_MAX_ROW || c->Q < 1 || c->Q > V4P_MAX_ROW || c->N < 1 ||
        c->D <= 64 || (c->int8 && c->Q > 131072))
        return NULL;
    dsops_mla4_problem *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->c = *c;
    const int64_t T = c->T, H = c->H, Q = c->Q, N = c->N, D = c->D, ND = N * D;
    const size_t wsz = c->int8 ? 1 : 2;

    uint16_t *x = mla4_alloc(p, sizeof(uint16_t) * (size_t)(T * H));     /* [T, H] bf16 */
    uint16_t *wq_a = mla4_alloc(p, sizeof(uint16_t) * (size_t)(Q * H));  /* [Q, H] bf16 */
    uint16_t *g_cq = mla4_alloc(p, sizeof(uint16_t) * (size_t)Q);        /* [Q] bf16 */
    void *wq_b = mla4_alloc(p, wsz * (size_t)(ND * Q));                  /* [N*D, Q] bf16 or int8 */
    float *wq_b_scale = c->int8 ? mla4_alloc(p, sizeof(float) * (size_t)ND) : NULL; /* [N*D] fp32 */
    uint16_t *wkv = mla4_alloc(p, sizeof(uint16_t) * (size_t)(D * H));   /* [D, H] bf16 */
    uint16_t *g_ckv = mla4_alloc(p, sizeof(uint16_t) * (size_t)D);       /* [D] bf16 */
    uint16_t *cosb = mla4_alloc(p, sizeof(uint16_t) * (size_t)(T * 64)); /* [T, 64] bf16 */
    uint16_t *sinb = mla4_alloc(p, sizeof(uint16_t) * (size_t)(T * 64)); /* [T, 64] bf16 */
    uint16_t *q = mla4_alloc(p, sizeof(uint16_t) * (size_t)(T * ND));    /* [T, N, D] bf16, out */
    uint16_t *kv = mla4_alloc(p, sizeof(uint16_t) * (size_t)(T * D));    /* [T, D] bf16, out */
    void *qr = mla4_alloc(p, wsz * (size_t)(T * Q));                     /* [T, Q] bf16 or int8, out */
    float *qr_scale = c->int8 ? mla4_alloc(p, sizeof(float) * (size_t)T) : NULL; /* [T] fp32, out */
    if (!x || !wq_a || !g_cq || !wq_b || (c->int8 && !wq_b_scale) || !wkv || !g_ckv || !cosb || !sinb || !q || !kv ||
        !qr || (c->int8 && !qr_scale)) {
        dsops_mla4_problem_free(p);
        return NULL;
    }

    cases_fill_bf16(seed, V4P_STREAM_X, T, H, 1.0f, x);
    cases_fill_bf16(seed, V4P_STREAM_WQA, Q, H, 0.1f, wq_a);
    if (c->int8)
        cases_fill_q8_bf16(seed, V4P_STREAM_WQB, ND, Q, 0.1f, wq_b, wq_b_scale);
    else
        cases_fill_bf16(seed, V4P_STREAM_WQB, ND, Q, 0.1f, wq_b);
    cases_fill_bf16(seed, V4P_STREAM_WKV, D, H, 0.1f, wkv);
    cases_fill_bf16(seed, V4P_STREAM_GCQ, 1, Q, 1.0f, g_cq);
    cases_fill_bf16(seed, V4P_STREAM_GCKV, 1, D, 1.0f, g_ckv);
    cases_fill_bf16(seed, V4P_STREAM_COS, T, 64, 1.0f, cosb);
    cases_fill_bf16(seed, V4P_STREAM_SIN, T, 64, 1.0f, sinb);

    dsops_mla_prolog_v4_args *a = &p->args;
    mla4_defaults(a, c->H == 7168 ? DSOPS_PRESET_V4_PRO : DSOPS_PRESET_V4_FLASH);
    int64_t s1[1], s2[2], s3[3];
    s2[0] = T, s2[1] = H;
    a->x = dsops_tensor_make(x, DSOPS_BF16, 2, s2);
    s2[0] = Q;
    a->wq_a = dsops_tensor_make(wq_a, DSOPS_BF16, 2, s2);
    s1[0] = Q;
    a->gamma_cq = dsops_tensor_make(g_cq, DSOPS_BF16, 1, s1);
    s2[0] = ND, s2[1] = Q;
    a->wq_b = dsops_tensor_make(wq_b, c->int8 ? DSOPS_INT8 : DSOPS_BF16, 2, s2);
    if (c->int8) {
        s1[0] = ND;
        a->wq_b_scale = dsops_tensor_make(wq_b_scale, DSOPS_FP32, 1, s1);
    }
    s2[0] = D, s2[1] = H;
    a->wkv = dsops_tensor_make(wkv, DSOPS_BF16, 2, s2);
    s1[0] = D;
    a->gamma_ckv = dsops_tensor_make(g_ckv, DSOPS_BF16, 1, s1);
    s2[0] = T, s2[1] = 64;
    a->rope_cos = dsops_tensor_make(cosb, DSOPS_BF16, 2, s2);
    a->rope_sin = dsops_tensor_make(sinb, DSOPS_BF16, 2, s2);
    s3[0] = T, s3[1] = N, s3[2] = D;
    a->q = dsops_tensor_make(q, DSOPS_BF16, 3, s3);
    s2[0] = T, s2[1] = D;
    a->kv = dsops_tensor_make(kv, DSOPS_BF16, 2, s2);
    s2[0] = T, s2[1] = Q;
    a->qr = dsops_tensor_make(qr, c->int8 ? DSOPS_INT8 : DSOPS_BF16, 2, s2);
    if (c->int8) {
        s1[0] = T;
        a->qr_scale = dsops_tensor_make(qr_scale, DSOPS_FP32, 1, s1);
    }

    p->flops = 2.0 * (double)T * ((double)H * Q + (double)Q * ND + (double)H * D);
    p->weight_bytes = 2.0 * (double)Q * H + (c->int8 ? 1.0 + 4.0 / (double)Q : 2.0) * (double)ND * Q +
                      2.0 * (double)D * H + 2.0 * (double)(Q + D);
    return p;
}

/* ---- indexer_prolog_v4 --------------------------------------------------------------------------- */

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
    if (!c || c->T < 0 || c->H < 1 || c->H > V4P_MAX_ROW || c->Q < 1 || c->Q > V4P_MAX_ROW || c->NI < 1 ||
        c->DI < 64 || c->DI > V4P_MAX_ROW)
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
    int64_t s1[1], s2[2], s3[3];
    s2[0] = T, s2[1] = Q;
    a->qr = dsops_tensor_make(qr, DSOPS_INT8, 2, s2);
    s1[0] = T;
    a->qr_scale = dsops_tensor_make(qr_scale, DSOPS_FP32, 1, s1);
    s2[0] = T, s2[1] = H;
    a->x = dsops_tensor_make(x, DSOPS_BF16, 2, s2);
    s2[0] = NQ, s2[1] = Q;
    a->idx_wq_b = dsops_tensor_make(wq_b, DSOPS_INT8, 2, s2);
    s1[0] = NQ;
    a->idx_wq_b_scale = dsops_tensor_make(wq_b_scale, DSOPS_FP32, 1, s1);
    s2[0] = NI, s2[1] = H;
    a->weights_proj = dsops_tensor_make(wproj, DSOPS_BF16, 2, s2);
    s2[0] = T, s2[1] = 64;
    a->rope_cos = dsops_tensor_make(cosb, DSOPS_BF16, 2, s2);
    a->rope_sin = dsops_tensor_make(sinb, DSOPS_BF16, 2, s2);
    s2[0] = DI, s2[1] = DI;
    a->hadamard = dsops_tensor_make(had, DSOPS_BF16, 2, s2);
    s3[0] = T, s3[1] = NI, s3[2] = DI;
    a->q_idx = dsops_tensor_make(q_idx, DSOPS_INT8, 3, s3);
    s2[0] = T, s2[1] = NI;
    a->q_idx_scale = dsops_tensor_make(q_scale, DSOPS_FP16, 2, s2);
    a->weights = dsops_tensor_make(weights, DSOPS_FP16, 2, s2);

    p->flops = 2.0 * (double)T * ((double)Q * NQ + (double)H * NI + (double)NI * DI * DI);
    p->weight_bytes = (1.0 + 4.0 / (double)Q) * (double)NQ * Q + 2.0 * (double)NI * H + 2.0 * (double)DI * DI;
    return p;
}
