/* compressor (docs/OPERATORS.md §3.4; docs/CASES.md "compressor"): the named cases, their data generator and
 * the bench adapter; the adversarial problems of the tests (problems.h) at the end.
 *
 * Vendor cases (vendor_data = 1; PyPTO test data, seed 42):
 *   x                      rand bf16                                            [T, H]
 *   wkv, wgate             rand bf16                                            [C*D, H]
 *   ape                    rand fp32                                            [R, C*D]
 *   norm_weight            ones, bf16 or fp32 (norm_fp32)                       [D]
 *   hadamard (c4li)        rand * D^-0.5 bf16                                   [D, D]
 *   rope_cos, rope_sin     rand bf16                                            [NO, 64]
 *   kv / score state       zeros                                                [max_block + 1, 128, C*D]
 *   block tables           ratio 4: every logical block of sequence b -> physical block 1 + 2b (a 128-row
 *                          ring); ratio 128: logical block j -> 1 + 2b + (j mod 2); one array serves both
 *                          states; columns cover every position up to start_pos + S - 1
 *   layout                 row_per_seq, NO = min(B S, B S / R + B) (the vendor's output rows)
 * ("rand" = U[0, 1).) The vendor's table row of sequence b is row b, which is what row_per_seq uses.
 *
 * dsops cases (vendor_data = 0; the official prefill / decode behaviour):
 *   x                      N(0, 1) bf16
 *   wkv, wgate             U(-1, 1) H^-0.5 bf16
 *   ape                    U(-1, 1) fp32
 *   norm_weight            U(-1, 1), bf16 (rounded) or fp32 (norm_fp32)
 *   hadamard (c4li)        hadamard_matrix(D), fp32 (the official rotation, without the bf16 rounding of
 *                          the matrix; the vendor cases cover bf16 matrices)
 *   rope_cos, rope_sin     dsops_rope_tables with the V4-Flash preset (base 160000, YaRN, pairs), fp32,
 *                          position k R for the entry of window k (the vendor cases cover bf16 tables)
 *   kv / score state       kv 0, score -Inf (the official initialisation), except the rows of positions
 *                          0 ... start_pos - 1 of each sequence: kv N(0, 1), score U(-1, 1), standing for
 *                          what earlier calls left there (so a chunk reads real candidates from the state)
 *   block tables           block size 128; one distinct physical block per 128 positions of a sequence
 *                          (a random permutation of all blocks), -1 in unused columns; ring: every logical
 *                          block of a sequence maps to that sequence's single physical block
 *   layout                 packed, NO = the number of entries
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

#define CMP_BSS 128   /* state block size of every case */
#define CMP_H 4096    /* hidden size of every case (the vendor's) */

/* ---- the case table ------------------------------------------------------------------------------ */

/* the vendor's decode shape: B 64, S 2 */
#define CMP_VENDOR .B = 64, .S_each = {2}, .H = CMP_H, .vendor_data = 1, .ci = 1
#define CMP_DSOPS .H = CMP_H, .vendor_data = 0, .ci = 1

static const dsops_cmp_case cmp_cases[] = {
    {.name = "v4_cmp_c128a_b64_s2_sp8192", .variant = DSOPS_CMP_C128A, .start_pos = 8192, CMP_VENDOR},
    {.name = "v4_cmp_c128a_b64_s2_sp254", .variant = DSOPS_CMP_C128A, .start_pos = 254, CMP_VENDOR},
    {.name = "v4_cmp_c4a_b64_s2_sp2", .variant = DSOPS_CMP_C4A, .start_pos = 2, CMP_VENDOR},
    {.name = "v4_cmp_c4a_b64_s2_sp255", .variant = DSOPS_CMP_C4A, .start_pos = 255, CMP_VENDOR},
    {.name = "v4_cmp_c4li_b64_s2_sp1", .variant = DSOPS_CMP_C4LI, .start_pos = 1, CMP_VENDOR},
    {.name = "v4_cmp_c4li_b64_s2_sp255", .variant = DSOPS_CMP_C4LI, .start_pos = 255, CMP_VENDOR},
    /* the other vendor copy's fp32 norm weight, on the window-closing cases */
    {.name = "v4_cmp_c128a_b64_s2_sp254_normfp32", .variant = DSOPS_CMP_C128A, .start_pos = 254, .norm_fp32 = 1,
     CMP_VENDOR},
    {.name = "v4_cmp_c4a_b64_s2_sp255_normfp32", .variant = DSOPS_CMP_C4A, .start_pos = 255, .norm_fp32 = 1,
     CMP_VENDOR},
    {.name = "v4_cmp_c4li_b64_s2_sp255_normfp32", .variant = DSOPS_CMP_C4LI, .start_pos = 255, .norm_fp32 = 1,
     CMP_VENDOR},
    /* the vendor's timed shapes: no window closes (8192), every sequence closes one at i = 0 (8191) */
    {.name = "v4_cmp_c4li_bench_sp8192", .variant = DSOPS_CMP_C4LI, .start_pos = 8192, .vendor_us = 55,
     .vendor = "PyPTO", CMP_VENDOR},
    {.name = "v4_cmp_c4a_bench_sp8192", .variant = DSOPS_CMP_C4A, .start_pos = 8192, .vendor_us = 80,
     .vendor = "PyPTO", CMP_VENDOR},
    {.name = "v4_cmp_c128a_bench_sp8192", .variant = DSOPS_CMP_C128A, .start_pos = 8192, .vendor_us = 55,
     .vendor = "PyPTO", CMP_VENDOR},
    {.name = "v4_cmp_c4li_bench_sp8191", .variant = DSOPS_CMP_C4LI, .start_pos = 8191, .vendor_us = 75,
     .vendor = "PyPTO", CMP_VENDOR},
    {.name = "v4_cmp_c4a_bench_sp8191", .variant = DSOPS_CMP_C4A, .start_pos = 8191, .vendor_us = 95,
     .vendor = "PyPTO", CMP_VENDOR},
    {.name = "v4_cmp_c128a_bench_sp8191", .variant = DSOPS_CMP_C128A, .start_pos = 8191, .vendor_us = 125,
     .vendor = "PyPTO", CMP_VENDOR},
    /* dsops: prefill, chunked prefill, ring state */
    {.name = "v4_cmp_c4a_prefill_b2_s1027", .variant = DSOPS_CMP_C4A, .B = 2, .S_each = {1027, 1024}, CMP_DSOPS},
    {.name = "v4_cmp_c128a_prefill_b2_s300", .variant = DSOPS_CMP_C128A, .B = 2, .S_each = {300, 256},
     .norm_fp32 = 1, CMP_DSOPS},
    {.name = "v4_cmp_c4li_prefill_b1_s64", .variant = DSOPS_CMP_C4LI, .B = 1, .S_each = {64}, CMP_DSOPS},
    {.name = "v4_cmp_c4a_chunk_b1_sp1021_s9", .variant = DSOPS_CMP_C4A, .B = 1, .S_each = {9}, .start_pos = 1021,
     CMP_DSOPS},
    /* the whole 1024-token prefill; the test also runs it as prefill 1023 + decode 1 and compares */
    {.name = "v4_cmp_c4a_prefill_then_decode", .variant = DSOPS_CMP_C4A, .B = 1, .S_each = {1024}, CMP_DSOPS},
    {.name = "v4_cmp_c4a_ring_b1_s300", .variant = DSOPS_CMP_C4A, .B = 1, .S_each = {300}, .ring = 1, CMP_DSOPS},
    /* The edge case v4_cmp_edge_two_windows_rowmode (row_per_seq, S 8, R 4 -> DSOPS_ERR_SHAPE) is not listed:
     * every entry here is a valid call that the benchmark tool can time. The validation test builds it with
     * dsops_cmp_problem_make from a case of its own. */
};

const dsops_cmp_case *dsops_cmp_cases(int *count) { return CASES_TABLE(cmp_cases, count); }
const dsops_cmp_case *dsops_cmp_case_find(const char *name) { return CASES_FIND(cmp_cases, name); }
void dsops_cmp_problem_free(dsops_cmp_problem *p) { if (p) cases_problem_release(p->buffers, p->nbuffers, p); }

/* ---- generator ----------------------------------------------------------------------------------- */

enum {
    STREAM_CMP_X = 41, STREAM_CMP_WKV = 42, STREAM_CMP_WGATE = 43, STREAM_CMP_APE = 44, STREAM_CMP_NORM = 45,
    STREAM_CMP_HAD = 46, STREAM_CMP_ROPE = 47, STREAM_CMP_STATE = 48, STREAM_CMP_TABLE = 49
};

#define CMP_MAX_ROW 8192 /* longest generated row (H, C D) */

typedef enum cmp_dist { DIST_UNIT, DIST_PM1, DIST_NORMAL } cmp_dist; /* U[0,1), U(-1,1), N(0,1) */

/* One row of n values of distribution `dist` times amp, from the row's own generator. */
static void cmp_draw_row(uint64_t seed, uint64_t stream, int64_t row, cmp_dist dist, float amp, float *v, int64_t n)
{
    rng r = cases_row_rng(seed, stream, row);
    if (dist == DIST_UNIT) {
        for (int64_t k = 0; k < n; k++)
            v[k] = cases_rng_unit(&r);
    } else if (dist == DIST_PM1) {
        cases_rng_uniform_pm1(&r, v, (size_t)n);
    } else {
        cases_rng_normal(&r, v, (size_t)n);
    }
    for (int64_t k = 0; k < n; k++)
        v[k] *= amp;
}

/* rows x cols bf16 values of `dist` times amp, rows in parallel. */
static void cmp_fill_bf16(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, cmp_dist dist, float amp,
                          uint16_t *dst)
{
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        float v[CMP_MAX_ROW];
        cmp_draw_row(seed, stream, row, dist, amp, v, cols);
        for (int64_t k = 0; k < cols; k++)
            dst[row * cols + k] = cases_bf16_bits(v[k]);
    }
}

/* rows x cols fp32 values of `dist` times amp. */
static void cmp_fill_f32(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, cmp_dist dist, float amp,
                         float *dst)
{
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++)
        cmp_draw_row(seed, stream, row, dist, amp, dst + row * cols, cols);
}

static void *cmp_alloc(dsops_cmp_problem *p, size_t bytes) { return ALLOC_OWNED(p, bytes); }

/* Tokens of sequence b: S_each[b], or S_each[0] for every b when the other entries are all 0. */
static int cmp_seq_len(const dsops_cmp_case *c, int b)
{
    int uniform = 1;
    for (int i = 1; i < 8; i++)
        uniform &= c->S_each[i] == 0;
    return uniform ? c->S_each[0] : c->S_each[b];
}

dsops_cmp_problem *dsops_cmp_problem_make(const dsops_cmp_case *c, uint64_t seed)
{
    if (!c || c->B < 1 || c->H < 1 || c->H > CMP_MAX_ROW || c->start_pos < 0 ||
        (c->variant != DSOPS_CMP_C4A && c->variant != DSOPS_CMP_C4LI && c->variant != DSOPS_CMP_C128A))
        return NULL;
    int uniform = 1;
    for (int i = 1; i < 8; i++)
        uniform &= c->S_each[i] == 0;
    if (!uniform && c->B > 8)
        return NULL;
    const int64_t B = c->B, H = c->H, sp = c->start_pos;
    const int64_t D = c->variant == DSOPS_CMP_C4LI ? 128 : 512;
    const int64_t R = c->variant == DSOPS_CMP_C128A ? 128 : 4;
    const int64_t C = c->variant == DSOPS_CMP_C128A ? 1 : 2, CD = C * D;
    const int rotate = c->variant == DSOPS_CMP_C4LI;
    const int vendor = c->vendor_data;

    dsops_cmp_problem *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->c = *c;

    /* sequences, entries, output rows */
    int32_t *cu = cmp_alloc(p, sizeof(int32_t) * (size_t)(B + 1)); /* [B+1] */
    int32_t *spv = cmp_alloc(p, sizeof(int32_t) * (size_t)B);     /* [B] */
    if (!cu || !spv)
        goto fail;
    int64_t T = 0, entries = 0, Smax = 0;
    for (int64_t b = 0; b < B; b++) {
        const int64_t S = cmp_seq_len(c, (int)b);
        if (S < 0 || sp + S > 2147483647)
            goto fail;
        cu[b] = (int32_t)T;
        spv[b] = (int32_t)sp;
        T += S;
        entries += (sp + S) / R - sp / R;
        Smax = S > Smax ? S : Smax;
    }
    cu[B] = (int32_t)T;
    if (T > 2147483647)
        goto fail;
    const int64_t NO = vendor ? (B * Smax < B * Smax / R + B ? B * Smax : B * Smax / R + B) : entries;
    p->T = T;
    p->NO = NO;
    p->entries = entries;
    p->flops = 2.0 * (double)T * (double)H * 2.0 * (double)CD;
    p->weight_bytes = 2.0 * (double)CD * (double)H * 2.0;

    /* parameters: the V4 defaults, set explicitly (every tensor absent until filled below); the vendor
     * cases use row_per_seq */
    memset(&p->args, 0, sizeof p->args);
    p->args.dim = 0;
    p->args.ratio = 0;
    p->args.overlap = -1;
    p->args.rotate = -1;
    p->args.norm_eps = 1e-6f;
    p->args.rope_mode = DSOPS_ROPE_INTERLEAVED;
    p->args.rope_inverse = 0;
    p->args.out_layout = vendor ? DSOPS_COMPRESSOR_ROW_PER_SEQ : DSOPS_COMPRESSOR_PACKED;
    p->args.prepared = NULL;

    /* block tables and state extents */
    const int64_t MBS = (sp + Smax - 1) / CMP_BSS + 1; /* columns up to the last position of the call */
    int32_t *bt = cmp_alloc(p, sizeof(int32_t) * (size_t)(B * MBS)); /* [B, MBS] */
    if (!bt)
        goto fail;
    int64_t NBS;
    if (vendor) {
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < MBS; j++)
                bt[b * MBS + j] = (int32_t)(R == 4 ? 1 + 2 * b : 1 + 2 * b + j % 2);
        NBS = (R == 4 || MBS == 1) ? 2 * B : 2 * B + 1; /* max_block + 1 */
    } else {
        /* logical blocks of sequence b: every position 0 ... start_pos + S_b - 1 (the call reads earlier
         * positions as candidates); a ring uses one block per sequence */
        int64_t total = 0;
        for (int64_t b = 0; b < B; b++)
            total += c->ring ? 1 : (sp + (cu[b + 1] - cu[b]) + CMP_BSS - 1) / CMP_BSS;
        NBS = total > 0 ? total : 1;
        int32_t *perm = malloc(sizeof(int32_t) * (size_t)NBS);
        if (!perm)
            goto fail;
        rng r = cases_row_rng(seed, STREAM_CMP_TABLE, 0);
        cases_shuffle(&r, perm, NBS);
        for (int64_t b = 0, next = 0; b < B; b++) {
            const int64_t nb = (sp + (cu[b + 1] - cu[b]) + CMP_BSS - 1) / CMP_BSS;
            for (int64_t j = 0; j < MBS; j++)
                bt[b * MBS + j] = c->ring ? perm[next] : (j < nb ? perm[next + j] : -1);
            next += c->ring ? 1 : nb;
        }
        free(perm);
    }
    p->args.kv_state_block_table = dsops_tensor_make(bt, DSOPS_INT32, 2, (int64_t[]){B, MBS});
    p->args.score_state_block_table = p->args.kv_state_block_table;

    /* states [NBS, 128, C D] fp32 */
    const int64_t srows = NBS * CMP_BSS;
    float *kvs = cmp_alloc(p, sizeof(float) * (size_t)(srows * CD));
    float *scs = cmp_alloc(p, sizeof(float) * (size_t)(srows * CD));
    if (!kvs || !scs)
        goto fail;
    if (!vendor) {
        for (int64_t i = 0; i < srows * CD; i++)
            scs[i] = -INFINITY;
        for (int64_t b = 0; b < B; b++)
            for (int64_t u = 0; u < sp; u++) {
                const int64_t row = (int64_t)bt[b * MBS + u / CMP_BSS] * CMP_BSS + u % CMP_BSS;
                cmp_draw_row(seed, STREAM_CMP_STATE, 2 * (b * sp + u), DIST_NORMAL, 1.0f, kvs + row * CD, CD);
                cmp_draw_row(seed, STREAM_CMP_STATE, 2 * (b * sp + u) + 1, DIST_PM1, 1.0f, scs + row * CD, CD);
            }
    }
    const int64_t s3[3] = {NBS, CMP_BSS, CD};
    p->args.kv_state = dsops_tensor_make(kvs, DSOPS_FP32, 3, s3);
    p->args.score_state = dsops_tensor_make(scs, DSOPS_FP32, 3, s3);

    /* sequences */
    p->args.cu_seqlens_q = dsops_tensor_make(cu, DSOPS_INT32, 1, (int64_t[]){B + 1});
    p->args.start_pos = dsops_tensor_make(spv, DSOPS_INT32, 1, (int64_t[]){B});

    /* activations and weights */
    uint16_t *x = cmp_alloc(p, sizeof(uint16_t) * (size_t)(T * H));      /* [T, H] bf16 */
    uint16_t *wkv = cmp_alloc(p, sizeof(uint16_t) * (size_t)(CD * H));   /* [C D, H] bf16 */
    uint16_t *wg = cmp_alloc(p, sizeof(uint16_t) * (size_t)(CD * H));    /* [C D, H] bf16 */
    float *ape = cmp_alloc(p, sizeof(float) * (size_t)(R * CD));         /* [R, C D] fp32 */
    if (!x || !wkv || !wg || !ape)
        goto fail;
    const float wamp = vendor ? 1.0f : 1.0f / sqrtf((float)H);
    cmp_fill_bf16(seed, STREAM_CMP_X, T, H, vendor ? DIST_UNIT : DIST_NORMAL, 1.0f, x);
    cmp_fill_bf16(seed, STREAM_CMP_WKV, CD, H, vendor ? DIST_UNIT : DIST_PM1, wamp, wkv);
    cmp_fill_bf16(seed, STREAM_CMP_WGATE, CD, H, vendor ? DIST_UNIT : DIST_PM1, wamp, wg);
    cmp_fill_f32(seed, STREAM_CMP_APE, R, CD, vendor ? DIST_UNIT : DIST_PM1, 1.0f, ape);
    p->args.x = dsops_tensor_make(x, DSOPS_BF16, 2, (int64_t[]){T, H});
    p->args.wkv = dsops_tensor_make(wkv, DSOPS_BF16, 2, (int64_t[]){CD, H});
    p->args.wgate = dsops_tensor_make(wg, DSOPS_BF16, 2, (int64_t[]){CD, H});
    p->args.ape = dsops_tensor_make(ape, DSOPS_FP32, 2, (int64_t[]){R, CD});

    /* norm weight [D]: ones (vendor) or U(-1, 1) */
    {
        float v[512];
        if (vendor) {
            for (int64_t i = 0; i < D; i++)
                v[i] = 1.0f;
        } else {
            cmp_draw_row(seed, STREAM_CMP_NORM, 0, DIST_PM1, 1.0f, v, D);
        }
        void *nw = cmp_alloc(p, (size_t)D * (c->norm_fp32 ? 4 : 2));
        if (!nw)
            goto fail;
        for (int64_t i = 0; i < D; i++) {
            if (c->norm_fp32)
                ((float *)nw)[i] = v[i];
            else
                ((uint16_t *)nw)[i] = cases_bf16_bits(v[i]);
        }
        p->args.norm_weight = dsops_tensor_make(nw, c->norm_fp32 ? DSOPS_FP32 : DSOPS_BF16, 1, (int64_t[]){D});
    }

    /* Hadamard [D, D] (c4li): rand D^-0.5 bf16 (vendor) or the normalised Sylvester matrix in fp32 */
    if (rotate) {
        void *hm = cmp_alloc(p, (size_t)(D * D) * (vendor ? 2 : 4));
        if (!hm)
            goto fail;
        p->args.hadamard = dsops_tensor_make(hm, vendor ? DSOPS_BF16 : DSOPS_FP32, 2, (int64_t[]){D, D});
        if (vendor)
            cmp_fill_bf16(seed, STREAM_CMP_HAD, D, D, DIST_UNIT, 1.0f / sqrtf((float)D), hm);
        else if (dsops_hadamard_matrix(NULL, &p->args.hadamard) != DSOPS_OK)
            goto fail;
    }

    /* rope tables [NO, 64]: rand bf16 (vendor) or the V4 tables of position k R for the entry of window k */
    {
        const int64_t rows = NO > 0 ? NO : 0;
        void *rc = cmp_alloc(p, (size_t)(rows * 64) * (vendor ? 2 : 4));
        void *rs = cmp_alloc(p, (size_t)(rows * 64) * (vendor ? 2 : 4));
        if (!rc || !rs)
            goto fail;
        const dsops_dtype rdt = vendor ? DSOPS_BF16 : DSOPS_FP32;
        p->args.rope_cos = dsops_tensor_make(rc, rdt, 2, (int64_t[]){rows, 64});
        p->args.rope_sin = dsops_tensor_make(rs, rdt, 2, (int64_t[]){rows, 64});
        if (vendor) {
            cmp_fill_bf16(seed, STREAM_CMP_ROPE, rows, 64, DIST_UNIT, 1.0f, rc);
            cmp_fill_bf16(seed, STREAM_CMP_ROPE + 16, rows, 64, DIST_UNIT, 1.0f, rs);
        } else if (rows > 0) {
            int64_t *pos = malloc(sizeof(int64_t) * (size_t)rows); /* [NO] */
            if (!pos)
                goto fail;
            for (int64_t b = 0, r = 0; b < B; b++) /* packed: entries ordered by sequence, then window */
                for (int64_t k = sp / R; k < (sp + (cu[b + 1] - cu[b])) / R; k++)
                    pos[r++] = k * R;
            dsops_rope_tables_args ra;
            dsops_rope_tables_init(&ra, DSOPS_PRESET_V4_FLASH);
            ra.positions = dsops_tensor_make(pos, DSOPS_INT64, 1, (int64_t[]){rows});
            ra.cos = p->args.rope_cos;
            ra.sin = p->args.rope_sin;
            dsops_status st = dsops_rope_tables(NULL, &ra);
            free(pos);
            if (st != DSOPS_OK)
                goto fail;
        }
    }

    /* outputs: out [NO, D] bf16, out_count [B] int32 */
    uint16_t *out = cmp_alloc(p, sizeof(uint16_t) * (size_t)(NO * D));
    int32_t *cnt = cmp_alloc(p, sizeof(int32_t) * (size_t)B);
    if (!out || !cnt)
        goto fail;
    p->args.out = dsops_tensor_make(out, DSOPS_BF16, 2, (int64_t[]){NO, D});
    p->args.out_count = dsops_tensor_make(cnt, DSOPS_INT32, 1, (int64_t[]){B});
    return p;

fail:
    dsops_cmp_problem_free(p);
    return NULL;
}

/* ---- bench adapter ------------------------------------------------------------------------------- */
/* Alike in shape with the other families' adapters: bench_family.h says why each family keeps its own. */

/* compressor: timed with prepared weights (repeated calls write the same state rows and entries, so each
 * call does the same work). --check runs the oracle from the states as generated and compares
 * (docs/OPERATORS.md §3.4): out_count exactly, out rows that receive no entry +0 exactly, out 1e-4 / 2^-7 /
 * 0.005, and each state 1e-3 / 1e-3 / 0 over the whole tensor with every row the call does not write
 * bitwise unchanged. A second row times the two projections alone. */
typedef struct cmp_bench {
    bench_linear_run_fn linear_run; /* first: the matmul-only row's runner, set by bench_matmuls */
    dsops_cmp_problem *p;
    dsops_prepared *prep;
    float *kv_state0, *score_state0; /* the states as generated, before any call */
    void *y;                   /* fp32 results of the matmul-only row */
} cmp_bench;

enum { CMP_MAP_WKV, CMP_MAP_WGATE, CMP_MAP_COUNT };

static dsops_status cmp_run(dsops_context *ctx, void *pv)
{
    return dsops_compressor(ctx, &((cmp_bench *)pv)->p->args);
}

static size_t cmp_state_elements(const dsops_tensor *state)
{
    return (size_t)(state->shape[0] * state->shape[1] * state->shape[2]);
}

/* Whether the call writes state row `row` ([NB * BS] rows) through block table `tab`: one of its tokens'
 * positions maps there. */
static int cmp_row_written(const dsops_compressor_args *a, const dsops_tensor *tab, int64_t BS, int64_t row)
{
    const int32_t *cu = a->cu_seqlens_q.data, *start = a->start_pos.data, *bt = tab->data;
    for (int64_t b = 0; b < a->start_pos.shape[0]; b++)
        for (int64_t pos = start[b]; pos < start[b] + cu[b + 1] - cu[b]; pos++)
            if (pos / BS < tab->shape[1] && bt[b * tab->shape[1] + pos / BS] * BS + pos % BS == row)
                return 1;
    return 0;
}

/* The library's state `got` against the oracle's (in the call's tensor) and, in every row the call does not
 * write, bitwise against `before`. 0, or 1 with why. */
static int cmp_state_differs(const dsops_compressor_args *a, int score, const float *got, const float *before,
                             char *why, size_t cap)
{
    const dsops_tensor *st = score ? &a->score_state : &a->kv_state;
    const dsops_tensor *tab = score ? &a->score_state_block_table : &a->kv_state_block_table;
    const int64_t rows = st->shape[0] * st->shape[1], W = st->shape[2];
    size_t bad = 0, n = 0;
    double max_err = 0;
    bench_count_outside(got, st->data, DSOPS_FP32, cmp_state_elements(st), 1e-3, 1e-3, &bad, &n, &max_err);
    int64_t changed = 0, first = -1;
    for (int64_t r = 0; r < rows; r++)
        if (memcmp(got + r * W, before + r * W, (size_t)W * 4) != 0 && !cmp_row_written(a, tab, st->shape[1], r))
            first = changed++ == 0 ? r : first;
    if (bad)
        snprintf(why, cap, "%zu of %zu %s elements outside 1e-3 / 1e-3, max |err| %.3g", bad, n,
                 score ? "score_state" : "kv_state", max_err);
    else if (changed)
        snprintf(why, cap, "%lld %s rows the call does not write changed (first: row %lld)", (long long)changed,
                 score ? "score_state" : "kv_state", (long long)first);
    return bad != 0 || changed != 0;
}

static int cmp_check(void *pv, char *why, size_t cap)
{
    cmp_bench *b = pv;
    const dsops_compressor_args *a = &b->p->args;
    const int64_t B = a->start_pos.shape[0], NO = a->out.shape[0], D = a->out.shape[1];
    const size_t n = (size_t)(NO * D), nkv = cmp_state_elements(&a->kv_state),
                 nsc = cmp_state_elements(&a->score_state);
    uint16_t *got = bench_keep_output(a->out.data, n * 2, why, cap);
    int32_t *got_count = bench_keep_output(a->out_count.data, (size_t)B * 4, why, cap);
    float *got_kv = bench_keep_output(a->kv_state.data, nkv * 4, why, cap);
    float *got_score = bench_keep_output(a->score_state.data, nsc * 4, why, cap);
    int fail = 1;
    if (!got || !got_count || !got_kv || !got_score)
        goto done;
    /* the oracle from the states before the call */
    memcpy(a->kv_state.data, b->kv_state0, nkv * 4);
    memcpy(a->score_state.data, b->score_state0, nsc * 4);
    dsops_ref_compressor(a);
    const int32_t *count = a->out_count.data;
    int64_t entries = 0, first = -1;
    for (int64_t s = 0; s < B; s++) {
        entries += count[s];
        first = first < 0 && got_count[s] != count[s] ? s : first;
    }
    if (first >= 0 || entries != b->p->entries) {
        snprintf(why, cap, "out_count[%lld] = %d, expected %d; the oracle makes %lld entries, the generator %lld",
                 (long long)(first < 0 ? 0 : first), got_count[first < 0 ? 0 : first], count[first < 0 ? 0 : first],
                 (long long)entries, (long long)b->p->entries);
        goto done;
    }
    /* rows that receive no entry: packed, rows from the number of entries on; row_per_seq, rows of sequences
     * without an entry and rows >= B */
    for (int64_t row = 0; row < NO; row++) {
        const int filled = a->out_layout == DSOPS_COMPRESSOR_ROW_PER_SEQ ? row < B && count[row] > 0 : row < entries;
        for (int64_t d = 0; d < D && !filled; d++)
            if (got[row * D + d] != 0) {
                snprintf(why, cap, "out row %lld receives no entry, yet element %lld is not +0", (long long)row,
                         (long long)d);
                goto done;
            }
    }
    size_t bad = 0, total = 0;
    double max_err = 0;
    bench_count_outside(got, a->out.data, DSOPS_BF16, n, 1e-4, 1.0 / 128, &bad, &total, &max_err);
    snprintf(why, cap, "%zu of %zu out elements outside 1e-4 / 2^-7, max |err| %.3g", bad, n, max_err);
    fail = bench_too_many(bad, n) || cmp_state_differs(a, 0, got_kv, b->kv_state0, why, cap) ||
           cmp_state_differs(a, 1, got_score, b->score_state0, why, cap);
done:
    free(got), free(got_count), free(got_kv), free(got_score);
    return fail;
}

static void cmp_release(void *pv)
{
    cmp_bench *b = pv;
    dsops_prepared_destroy(b->prep);
    dsops_cmp_problem_free(b->p);
    free(b->kv_state0);
    free(b->score_state0);
    free(b->y);
    free(b);
}

/* The compressor's projections alone, on the prepared maps: x by wkv and by wgate. */
static dsops_status cmp_gemms_run(dsops_context *ctx, void *pv)
{
    cmp_bench *b = pv;
    const dsops_compressor_args *a = &b->p->args;
    const int64_t T = b->p->T, CD = a->wkv.shape[0], H = a->wkv.shape[1];
    char *y = b->y;
    dsops_linear **m = b->prep->maps;
    dsops_linear_job j[2] = {{m[CMP_MAP_WKV], a->x.data, H, y, CD},
                             {m[CMP_MAP_WGATE], a->x.data, H, y + (size_t)(T * CD) * 4, CD}};
    return b->linear_run(ctx, j, 2, T, dsops_context_threads(ctx), dsops_context_isa(ctx));
}

static int cmp_make_problem(const void *cv, bench_problem *bp, char *why, size_t cap)
{
    const dsops_cmp_case *c = cv;
    cmp_bench *b = calloc(1, sizeof *b);
    if (!b)
        return bench_out_of_memory(why, cap);
    *bp = (bench_problem){.p = b, .run = cmp_run, .check = cmp_check, .release = cmp_release};
    if (!(b->p = dsops_cmp_problem_make(c, 42)))
        return bench_cannot_generate(why, cap);
    if (bench_prepared_or_say(dsops_compressor_prepare(NULL, &b->p->args, &b->prep), "compressor_prepare", why, cap))
        return 1;
    const dsops_compressor_args *a = &b->p->args;
    const size_t CD = (size_t)a->wkv.shape[0];
    b->y = malloc(4 * (size_t)b->p->T * 2 * CD + 64);
    b->kv_state0 = bench_keep_output(a->kv_state.data, 4 * cmp_state_elements(&a->kv_state), why, cap);
    b->score_state0 = bench_keep_output(a->score_state.data, 4 * cmp_state_elements(&a->score_state), why, cap);
    if (!b->y || !b->kv_state0 || !b->score_state0)
        return bench_out_of_memory(why, cap);
    b->p->args.prepared = b->prep;
    *bp = (bench_problem){b, cmp_run, cmp_check, cmp_release, b->p->flops, b->p->weight_bytes, DSOPS_PEAK_BF16_DOT,
                          .vendor_us = c->vendor_us, .vendor = c->vendor, .args = &b->p->args};
    return 0;
}

/* the sp8191 / sp8192 pairs differ only in whether a window closes */
static void cmp_note(const bench_problem *bp, char *note, size_t cap)
{
    const dsops_cmp_problem *cp = ((cmp_bench *)bp->p)->p;
    snprintf(note, cap, "%lld entries per call (%s)", (long long)cp->entries,
             cp->entries > 0 ? "windows close" : "no window closes: state writes only");
}

static const char *cmp_variant_name(dsops_cmp_variant v)
{
    return v == DSOPS_CMP_C4A ? "c4a" : v == DSOPS_CMP_C4LI ? "c4li" : v == DSOPS_CMP_C128A ? "c128a" : "?";
}

static void cmp_words(const void *cv, char *op, size_t oc, char *sh, size_t sc)
{
    const dsops_cmp_case *c = cv;
    snprintf(op, oc, "compressor %s", cmp_variant_name(c->variant));
    snprintf(sh, sc, "B %d S %d sp %d", c->B, c->S_each[0], c->start_pos);
}

static void cmp_list_line(const void *cv, const char *not_ci)
{
    const dsops_cmp_case *c = cv;
    char S[16];
    if (c->B > 1 && c->S_each[1])
        snprintf(S, sizeof S, "mixed");
    else
        snprintf(S, sizeof S, "%d", c->S_each[0]);
    printf("%-40s compressor                  B %-3d S %-5s %s start_pos %d H %d, %s data%s\n", c->name, c->B, S,
           cmp_variant_name(c->variant), c->start_pos, c->H, c->vendor_data ? "vendor" : "dsops", not_ci);
}

static void cmp_vendor(const void *cv, double *us, const char **label)
{
    *us = ((const dsops_cmp_case *)cv)->vendor_us, *label = ((const dsops_cmp_case *)cv)->vendor;
}

static int cmp_matmuls_check(const void *pv, char *why, size_t cap)
{
    return bench_prepared_has_maps(((const cmp_bench *)pv)->prep, CMP_MAP_COUNT, why, cap);
}

static const void *cmp_table(int *count) { return dsops_cmp_cases(count); }

const bench_family bench_family_compressor = {
    .op = "compressor",
    .table_word = "compressor",
    .cases = cmp_table,
    .case_size = sizeof(dsops_cmp_case),
    .ci_offset = offsetof(dsops_cmp_case, ci),
    .make_problem = cmp_make_problem,
    .words = cmp_words,
    .list_line = cmp_list_line,
    .vendor = cmp_vendor,
    .matmuls_run = cmp_gemms_run,
    .matmuls_check = cmp_matmuls_check,
    .note = cmp_note,
};

/* ==== adversarial problems (problems.h) ====================================================================
 * Small compressor problems for tests/test_compressor.c: any variant, sequence layout and table arrangement
 * (block columns of blocks without a needed position -1, rings, a score table of its own), NaN in every state
 * row the call must not read, and "grid" data that makes every projection exact in fp32. The test runs the
 * oracle and the library on them. */

/* 1 if the call needs position u of sequence b: written, or a candidate of a window it closes. */
static int cp_pos_needed(const cp_spec *s, int b, int64_t u)
{
    const int64_t st = s->start[b], n = s->len[b], R = s->v.R;
    if (u >= st && u < st + n)
        return 1;
    if (u < 0 || u >= st)
        return 0;
    const int64_t k0 = st / R, k1 = (st + n) / R, w = u / R; /* windows k0 ... k1 - 1 close */
    return (w >= k0 && w < k1) || (s->v.C == 2 && w + 1 >= k0 && w + 1 < k1);
}

/* The positions sequence b's tables map: its tokens, and at least s->cover[b]. */
static int64_t cp_cover(const cp_spec *s, int b)
{
    const int64_t e = s->start[b] + s->len[b];
    return s->cover[b] > e ? s->cover[b] : e;
}

static int cp_block_needed(const cp_spec *s, int b, int64_t j, int64_t BS)
{
    if (!s->minimal)
        return 1;
    for (int64_t u = j * BS; u < (j + 1) * BS; u++)
        if (cp_pos_needed(s, b, u))
            return 1;
    return 0;
}

/* A block table [B, MB] for block size BS: a random permutation of NB physical blocks (one spare that no
 * sequence maps), -1 in unmapped columns (one extra column at the end of every row). */
static int32_t *cp_block_table(const cp_spec *s, rng *r, int64_t BS, int64_t *NB_out, int64_t *MB_out)
{
    int64_t MB = 1, count = 0;
    for (int b = 0; b < s->B; b++) {
        const int64_t nb = (cp_cover(s, b) + BS - 1) / BS;
        MB = nb + 1 > MB ? nb + 1 : MB;
        if (s->ring)
            count += 1;
        else
            for (int64_t j = 0; j < nb; j++)
                count += cp_block_needed(s, b, j, BS);
    }
    const int64_t NB = count + 1;
    int32_t *perm = cases_xcalloc((size_t)NB, 4), *tab = cases_xcalloc((size_t)(s->B * MB), 4);
    cases_shuffle(r, perm, NB);
    cases_fill_sentinel(tab, 4, s->B * MB, (uint32_t)-1);
    for (int b = 0, next = 0; b < s->B; b++) {
        const int64_t nb = (cp_cover(s, b) + BS - 1) / BS;
        const int32_t ring_block = s->ring ? perm[next++] : -1;
        for (int64_t j = 0; j < nb; j++) {
            if (s->ring)
                tab[b * MB + j] = ring_block;
            else if (cp_block_needed(s, b, j, BS))
                tab[b * MB + j] = perm[next++];
        }
    }
    free(perm);
    *NB_out = NB, *MB_out = MB;
    return tab;
}

/* Element i of a bf16 or fp32 vector becomes v (bf16: rounded). */
static void cp_put(void *base, dsops_dtype dt, int64_t i, float v)
{
    if (dt == DSOPS_FP32)
        ((float *)base)[i] = v;
    else
        ((uint16_t *)base)[i] = cases_bf16_bits(v);
}

static float cp_round_bf16(float v) { return cases_bf16_value(cases_bf16_bits(v)); }

/* State contents before the call: NaN in every row, then finite values in the rows of positions
 * 0 ... start - 1 of each sequence (logits -Inf with probability 1/8). */
static void cp_fill_state(const cp_spec *s, rng *r, float *st, const int32_t *tab, int64_t MB, int64_t NB,
                          int64_t BS, int64_t CD, int score)
{
    for (int64_t i = 0; i < NB * BS * CD; i++)
        st[i] = NAN;
    for (int b = 0; b < s->B; b++)
        for (int64_t u = 0; u < s->start[b]; u++) {
            const int32_t blk = tab[b * MB + u / BS];
            if (blk < 0)
                continue;
            float *row = st + ((int64_t)blk * BS + u % BS) * CD;
            for (int64_t c = 0; c < CD; c++) {
                if (!score)
                    row[c] = cases_rng_uniform(r, -1, 1);
                else
                    row[c] = cases_rng_int(r, 0, 7) == 0 ? -INFINITY : cases_rng_uniform(r, -2, 2);
            }
        }
}

cp_spec cp_spec_make(cp_variant v, int64_t H, int B)
{
    cp_spec s;
    memset(&s, 0, sizeof s);
    s.v = v, s.H = H, s.B = B;
    s.layout = DSOPS_COMPRESSOR_PACKED;
    s.BSS = 128;
    s.norm_dt = DSOPS_BF16, s.rope_dt = DSOPS_BF16, s.had_dt = DSOPS_BF16;
    s.mode = DSOPS_ROPE_INTERLEAVED;
    s.eps = 1e-6f;
    return s;
}

cp_problem *cp_make(const cp_spec *s, uint64_t *rng_state)
{
    rng r = {*rng_state};
    cp_problem *p = cases_xcalloc(1, sizeof *p);
    p->s = *s;
    const int64_t B = s->B, H = s->H, D = s->v.D, R = s->v.R, CD = s->v.C * D, XS = H + s->x_pad;
    p->CD = CD;
    p->cu = cases_xcalloc((size_t)B + 1, 4);
    p->sp = cases_xcalloc((size_t)B, 4);
    for (int64_t b = 0; b < B; b++) {
        p->cu[b] = (int32_t)p->T;
        p->sp[b] = (int32_t)s->start[b];
        p->T += s->len[b];
        p->entries += (s->start[b] + s->len[b]) / R - s->start[b] / R;
    }
    p->cu[B] = (int32_t)p->T;
    const int64_t T = p->T;
    p->NO = s->NO > 0 ? s->NO : (s->layout == DSOPS_COMPRESSOR_PACKED ? p->entries + 1 : B + 1);
    const int64_t NO = p->NO;

    /* data first (so that problems differing only in tables or states share them) */
    p->x = cases_xcalloc((size_t)(T * XS) + 1, 2);
    cases_fill_sentinel(p->x, 2, T * XS + 1, cases_bf16_bits(NAN)); /* the gaps of a strided x are never read */
    p->wkv = cases_xcalloc((size_t)(CD * H), 2);
    p->wg = cases_xcalloc((size_t)(CD * H), 2);
    p->ape = cases_xcalloc((size_t)(R * CD), 4);
    const float wamp = 1.0f / sqrtf((float)H);
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < H; k++)
            p->x[t * XS + k] = s->real_data ? cases_bf16_bits(cases_rng_uniform(&r, -2, 2))
                                            : cases_bf16_bits((float)cases_rng_int(&r, -4, 4) / 4.0f);
    for (int64_t i = 0; i < CD * H; i++) {
        p->wkv[i] = s->real_data ? cases_bf16_bits(wamp * cases_rng_uniform(&r, -1, 1))
                                 : cases_bf16_bits((float)cases_rng_int(&r, -32, 32) / 64.0f);
        p->wg[i] = s->real_data ? cases_bf16_bits(wamp * cases_rng_uniform(&r, -1, 1))
                                : cases_bf16_bits((float)cases_rng_int(&r, -32, 32) / 64.0f);
    }
    for (int64_t i = 0; i < R * CD; i++)
        p->ape[i] = s->real_data ? cases_rng_uniform(&r, -1, 1) : (float)cases_rng_int(&r, -256, 256) / 256.0f;
    p->norm = cases_xcalloc((size_t)D, 4);
    for (int64_t i = 0; i < D; i++)
        cp_put(p->norm, s->norm_dt, i, cp_round_bf16(cases_rng_uniform(&r, 0.5f, 1.5f)));
    if (s->v.rotate) {
        p->had = cases_xcalloc((size_t)(D * D), 4);
        for (int64_t i = 0; i < D * D; i++)
            cp_put(p->had, s->had_dt, i, cp_round_bf16(cases_rng_uniform(&r, -1, 1) / sqrtf((float)D)));
    }
    p->rc = cases_xcalloc((size_t)(NO * 64), 4);
    p->rs = cases_xcalloc((size_t)(NO * 64), 4);
    for (int64_t i = 0; i < NO * 64; i++) {
        cp_put(p->rc, s->rope_dt, i, cp_round_bf16(cases_rng_uniform(&r, -1, 1)));
        cp_put(p->rs, s->rope_dt, i, cp_round_bf16(cases_rng_uniform(&r, -1, 1)));
    }

    /* tables and states */
    int64_t MB, MB2;
    p->bt = cp_block_table(s, &r, s->BSS, &p->NB, &MB);
    const int64_t BSS2 = s->BSS2 > 0 ? s->BSS2 : s->BSS;
    if (s->BSS2 > 0) {
        p->bt2 = cp_block_table(s, &r, BSS2, &p->NB2, &MB2);
    } else {
        p->bt2 = p->bt, p->NB2 = p->NB, MB2 = MB;
    }
    const size_t nkv = (size_t)(p->NB * s->BSS * CD), nsc = (size_t)(p->NB2 * BSS2 * CD);
    p->kv0 = cases_xcalloc(nkv, 4), p->sc0 = cases_xcalloc(nsc, 4);
    cp_fill_state(s, &r, p->kv0, p->bt, MB, p->NB, s->BSS, CD, 0);
    cp_fill_state(s, &r, p->sc0, p->bt2, MB2, p->NB2, BSS2, CD, 1);
    p->kv = cases_xcalloc(nkv, 4), p->sc = cases_xcalloc(nsc, 4);
    memcpy(p->kv, p->kv0, nkv * 4), memcpy(p->sc, p->sc0, nsc * 4);
    p->out = cases_xcalloc((size_t)(NO * D) + 1, 2);
    p->cnt = cases_xcalloc((size_t)B + 1, 4);

    dsops_compressor_args *a = &p->a;
    memset(a, 0, sizeof *a);
    a->x = dsops_tensor_make(p->x, DSOPS_BF16, 2, (int64_t[]){T, H});
    a->x.stride[0] = XS;
    a->cu_seqlens_q = dsops_tensor_make(p->cu, DSOPS_INT32, 1, (int64_t[]){B + 1});
    a->start_pos = dsops_tensor_make(p->sp, DSOPS_INT32, 1, (int64_t[]){B});
    a->wkv = dsops_tensor_make(p->wkv, DSOPS_BF16, 2, (int64_t[]){CD, H});
    a->wgate = dsops_tensor_make(p->wg, DSOPS_BF16, 2, (int64_t[]){CD, H});
    a->ape = dsops_tensor_make(p->ape, DSOPS_FP32, 2, (int64_t[]){R, CD});
    a->norm_weight = dsops_tensor_make(p->norm, s->norm_dt, 1, (int64_t[]){D});
    if (s->v.rotate)
        a->hadamard = dsops_tensor_make(p->had, s->had_dt, 2, (int64_t[]){D, D});
    a->rope_cos = dsops_tensor_make(p->rc, s->rope_dt, 2, (int64_t[]){NO, 64});
    a->rope_sin = dsops_tensor_make(p->rs, s->rope_dt, 2, (int64_t[]){NO, 64});
    a->kv_state = dsops_tensor_make(p->kv, DSOPS_FP32, 3, (int64_t[]){p->NB, s->BSS, CD});
    a->score_state = dsops_tensor_make(p->sc, DSOPS_FP32, 3, (int64_t[]){p->NB2, BSS2, CD});
    a->kv_state_block_table = dsops_tensor_make(p->bt, DSOPS_INT32, 2, (int64_t[]){B, MB});
    a->score_state_block_table = dsops_tensor_make(p->bt2, DSOPS_INT32, 2, (int64_t[]){B, MB2});
    a->out = dsops_tensor_make(p->out, DSOPS_BF16, 2, (int64_t[]){NO, D});
    a->out_count = dsops_tensor_make(p->cnt, DSOPS_INT32, 1, (int64_t[]){B});
    a->dim = 0, a->ratio = 0, a->overlap = -1, a->rotate = -1;
    a->norm_eps = s->eps;
    a->rope_mode = s->mode;
    a->rope_inverse = s->inverse;
    a->out_layout = s->layout;
    *rng_state = r.s;
    return p;
}

void cp_free(cp_problem *p)
{
    if (p->bt2 != p->bt)
        free(p->bt2);
    free(p->bt);
    free(p->x), free(p->wkv), free(p->wg), free(p->out), free(p->cu), free(p->sp), free(p->cnt), free(p->ape);
    free(p->norm), free(p->had), free(p->rc), free(p->rs), free(p->kv), free(p->sc), free(p->kv0), free(p->sc0);
    free(p);
}
