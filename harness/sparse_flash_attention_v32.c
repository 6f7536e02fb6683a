/* sparse_flash_attention_v32 (spec §4.4; docs/CASES.md): the named cases, their data generator and the bench
 * adapter; the adversarial problems of the tests (problems.h) at the end.
 *
 * Data (docs/CASES.md, "sparse_flash_attention_v32", seed 42):
 *   q         U(-1,1) bf16, drawn as [b, s, N, Dc+Dr] and split into q_nope / q_rope
 *   latent    split_bf16: U(-1,1) bf16; int8 layouts: U(-1,1) quantised per 128-group with
 *             scale = max(amax, 1e-8)/127, q = clamp(round(v/scale), -128, 127)
 *   key_rope  U(-1,1) bf16
 *   indices   per sequence: seqused < K: 0 ... seqused-1 then zeros; otherwise the first K of a random
 *             permutation of 0 ... seqused-1; the same row for every token of the sequence
 *   tables    a random permutation of the physical blocks; -1 in unused columns
 * Parameters are the vendor's: softmax_scale = 576^-0.5, p_mode normalised. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_family.h"
#include "cases.h"
#include "cases_internal.h"
#include "problems.h"
#include "ref.h"

/* ---- the case table ------------------------------------------------------------------------------ */

/* N 128, Dc 512, Dr 64, K 2048, BS 128 for every V3.2 case */
#define V32_DIMS .N = 128, .Dc = 512, .Dr = 64, .K = 2048, .BS = 128

static const dsops_sfa_case sfa_cases[] = {
    {.name = "v32_sfa_b4_s2_int8_mixed", .B = 4, .S = 2, .seqused = {65536, 16381, 666, 15}, V32_DIMS,
     .layout = DSOPS_KV_SPLIT_INT8, .ci = 1},
    {.name = "v32_sfa_b4_s2_int8_kv64k", .B = 4, .S = 2, .seqused = {REP4(65536)}, V32_DIMS,
     .layout = DSOPS_KV_SPLIT_INT8, .ci = 1},
    {.name = "v32_sfa_b4_s2_bf16_kv64k", .B = 4, .S = 2, .seqused = {REP4(65536)}, V32_DIMS,
     .layout = DSOPS_KV_SPLIT_BF16, .ci = 1},
    {.name = "v32_sfa_b1_s256_int8_kv64k", .B = 1, .S = 256, .seqused = {65536}, V32_DIMS,
     .layout = DSOPS_KV_SPLIT_INT8, .ci = 0, .ci_variant = "v32_sfa_b1_s256_int8_kv64k_ci"},
    {.name = "v32_sfa_b1_s256_int8_kv64k_ci", .B = 1, .S = 16, .seqused = {65536}, V32_DIMS,
     .layout = DSOPS_KV_SPLIT_INT8, .ci = 1},
    {.name = "v32_sfa_packed_b4_s2_mixed", .B = 4, .S = 2, .seqused = {65536, 16381, 666, 15}, V32_DIMS,
     .layout = DSOPS_KV_PACKED_INT8, .ci = 1},
    {.name = "v32_sfa_packed_b4_s2_kv64k", .B = 4, .S = 2, .seqused = {REP4(65536)}, V32_DIMS,
     .layout = DSOPS_KV_PACKED_INT8, .ci = 1},
    {.name = "v32_sfa_packed_b1_s256_kv64k", .B = 1, .S = 256, .seqused = {65536}, V32_DIMS,
     .layout = DSOPS_KV_PACKED_INT8, .ci = 0, .ci_variant = "v32_sfa_packed_b1_s256_kv64k_ci"},
    {.name = "v32_sfa_packed_b1_s256_kv64k_ci", .B = 1, .S = 16, .seqused = {65536}, V32_DIMS,
     .layout = DSOPS_KV_PACKED_INT8, .ci = 1},
    {.name = "v32_sfa_packed_b64_s2_kv64k", .B = 64, .S = 2, .seqused = {REP64(65536)}, V32_DIMS,
     .layout = DSOPS_KV_PACKED_INT8, .ci = 0, .ci_variant = "v32_sfa_packed_b64_s2_kv64k_ci"},
    {.name = "v32_sfa_packed_b64_s2_kv64k_ci", .B = 8, .S = 2, .seqused = {REP8(65536)}, V32_DIMS,
     .layout = DSOPS_KV_PACKED_INT8, .ci = 1},
    {.name = "v32_sfa_packed_b64_s2_uniform", .B = 64, .S = 2,
     .seqused = {REP8(16384), REP8(32768), REP8(49152), REP16(65536), REP8(81920), REP8(98304), REP8(114688)},
     V32_DIMS, .layout = DSOPS_KV_PACKED_INT8, .ci = 0, .ci_variant = "v32_sfa_packed_b64_s2_uniform_ci"},
    /* one sequence per length class plus a second 65536 */
    {.name = "v32_sfa_packed_b64_s2_uniform_ci", .B = 8, .S = 2,
     .seqused = {16384, 32768, 49152, 65536, 65536, 81920, 98304, 114688}, V32_DIMS,
     .layout = DSOPS_KV_PACKED_INT8, .ci = 1},
    {.name = "v32_sfa_b4_s2_int8_mixed_lse", .B = 4, .S = 2, .seqused = {65536, 16381, 666, 15}, V32_DIMS,
     .layout = DSOPS_KV_SPLIT_INT8, .with_lse = 1, .ci = 1},
    /* Edge and error cases: every index is -1 or >= seqused, so every token is lonely (out 0, lse +Inf) */
    {.name = "v32_sfa_edge_all_invalid", .B = 2, .S = 2, .seqused = {1000, 3}, V32_DIMS,
     .layout = DSOPS_KV_SPLIT_BF16, .with_lse = 1, .ci = 1},
    /* every cache row that no token reads (not indexed, past seqused, blocks of no sequence) holds NaN */
    {.name = "v32_sfa_edge_nan_unread", .B = 3, .S = 2, .seqused = {3000, 70, 2049}, V32_DIMS,
     .layout = DSOPS_KV_SPLIT_INT8, .with_lse = 1, .nan_unread = 1, .ci = 1},
    {.name = "v32_sfa_edge_nan_unread_bf16", .B = 3, .S = 2, .seqused = {3000, 70, 2049}, V32_DIMS,
     .layout = DSOPS_KV_SPLIT_BF16, .with_lse = 1, .nan_unread = 1, .ci = 1},
    {.name = "v32_sfa_packed_edge_nan_unread", .B = 3, .S = 2, .seqused = {3000, 70, 2049}, V32_DIMS,
     .layout = DSOPS_KV_PACKED_INT8, .with_lse = 1, .nan_unread = 1, .ci = 1},
    /* FlashMLA's FP8 rows (flashmla_fp8, spec §2.12): the decode shapes of the int8 layouts, and NaN (e4m3 NaN
     * bytes, scales and rope) in every row no token reads */
    {.name = "v32_sfa_fp8_b4_s2_mixed", .B = 4, .S = 2, .seqused = {65536, 16381, 666, 15}, V32_DIMS,
     .layout = DSOPS_KV_FLASHMLA_FP8, .with_lse = 1, .ci = 1},
    {.name = "v32_sfa_fp8_b4_s2_kv64k", .B = 4, .S = 2, .seqused = {REP4(65536)}, V32_DIMS,
     .layout = DSOPS_KV_FLASHMLA_FP8, .ci = 1},
    {.name = "v32_sfa_fp8_edge_nan_unread", .B = 3, .S = 2, .seqused = {3000, 70, 2049}, V32_DIMS,
     .layout = DSOPS_KV_FLASHMLA_FP8, .with_lse = 1, .nan_unread = 1, .ci = 1},
};

#define EDGE_ALL_INVALID "v32_sfa_edge_all_invalid"

/* Every physical cache row that no token reads (spec §4.4 steps 1-2: the first min(L, K) entries of its row,
 * those in [0, seqused)) becomes NaN: bf16 values NaN, int8 values -1 with NaN scales. 0 when memory runs out. */
static int fill_unread_with_nan(dsops_sfa_problem *p, const int32_t *idx, const int32_t *bt)
{
    const dsops_sfa_case *c = &p->c;
    const int64_t rows = p->NB * c->BS, K = c->K, S = c->S;
    unsigned char *read = calloc((size_t)(rows > 0 ? rows : 1), 1); /* [NB * BS] 1: some token reads the row */
    if (!read)
        return 0;
    for (int b = 0; b < c->B; b++)
        for (int64_t i = 0; i < S; i++) {
            int64_t L = (int64_t)c->seqused[b] - (S - 1 - i), cnt = L < 0 ? 0 : (L > K ? K : L);
            const int32_t *row = idx + ((int64_t)b * S + i) * K;
            for (int64_t j = 0; j < cnt; j++)
                if (row[j] >= 0 && row[j] < c->seqused[b])
                    read[(int64_t)bt[b * p->MB + row[j] / c->BS] * c->BS + row[j] % c->BS] = 1;
        }
    const uint16_t nan16 = 0x7fc0;
    const float nan32 = NAN;
    const dsops_sparse_flash_attention_v32_args *a = &p->args;
    for (int64_t r = 0; r < rows; r++) {
        if (read[r])
            continue;
        if (c->layout == DSOPS_KV_PACKED_INT8) {
            unsigned char *row = (unsigned char *)a->kv_packed.data + r * 656;
            memset(row, 0xff, (size_t)c->Dc);                 /* int8 latent: -1 */
            for (int k = 0; k < c->Dr; k++)                    /* bf16 rope at [Dc, Dc + 2 Dr) */
                memcpy(row + c->Dc + 2 * k, &nan16, 2);
            for (int g = 0; g < c->Dc / 128; g++)              /* fp32 scales after the rope */
                memcpy(row + c->Dc + 2 * c->Dr + 4 * g, &nan32, 4);
            continue;
        }
        if (c->layout == DSOPS_KV_FLASHMLA_FP8) { /* e4m3 NaN bytes, NaN scales, NaN rope */
            unsigned char *row = (unsigned char *)a->kv_packed.data + r * 656;
            memset(row, 0x7f, 512);
            for (int g = 0; g < 4; g++)
                memcpy(row + 512 + 4 * g, &nan32, 4);
            for (int k = 0; k < 64; k++)
                memcpy(row + 528 + 2 * k, &nan16, 2);
            continue;
        }
        if (c->layout == DSOPS_KV_SPLIT_INT8) {
            memset((int8_t *)a->key_nope.data + r * c->Dc, 0xff, (size_t)c->Dc);
            for (int g = 0; g < c->Dc / 128; g++)
                ((float *)a->key_nope_scale.data)[r * (c->Dc / 128) + g] = nan32;
        } else {
            for (int k = 0; k < c->Dc; k++)
                ((uint16_t *)a->key_nope.data)[r * c->Dc + k] = nan16;
        }
        for (int k = 0; k < c->Dr; k++)
            ((uint16_t *)a->key_rope.data)[r * c->Dr + k] = nan16;
    }
    free(read);
    return 1;
}

const dsops_sfa_case *dsops_sfa_cases(int *count) { return CASES_TABLE(sfa_cases, count); }
const dsops_sfa_case *dsops_sfa_case_find(const char *name) { return CASES_FIND(sfa_cases, name); }
void dsops_sfa_problem_free(dsops_sfa_problem *p) { if (p) cases_problem_release(p->buffers, p->nbuffers, p); }

static void *problem_alloc(dsops_sfa_problem *p, size_t bytes) { return ALLOC_OWNED(p, bytes); }

static int64_t row_bytes(const dsops_sfa_case *c)
{
    switch (c->layout) {
    case DSOPS_KV_SPLIT_BF16: return (int64_t)(c->Dc + c->Dr) * 2;
    case DSOPS_KV_SPLIT_INT8: return (int64_t)c->Dc + (int64_t)(c->Dc / 128) * 4 + (int64_t)c->Dr * 2;
    case DSOPS_KV_PACKED_INT8: return 656;
    case DSOPS_KV_FLASHMLA_FP8: return 656;
    }
    return 0;
}

enum { STREAM_Q = 1, STREAM_CACHE = 2 };

dsops_sfa_problem *dsops_sfa_problem_make(const dsops_sfa_case *c, uint64_t seed)
{
    if (!c || c->B < 0 || c->B > 128 || c->S < 0 || c->N < 1 || c->Dc < 1 || c->Dr < 1 || c->Dc + c->Dr > CASES_MAX_KV_ROW ||
        c->K < 1 || c->BS < 1 || (c->layout != DSOPS_KV_SPLIT_BF16 && c->Dc % 128 != 0) ||
        (c->layout == DSOPS_KV_PACKED_INT8 && (c->Dc != 512 || c->Dr != 64)))
        return NULL;
    dsops_sfa_problem *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->c = *c;
    rng r = {seed};
    const int B = c->B, S = c->S, N = c->N, Dc = c->Dc, Dr = c->Dr, K = c->K, BS = c->BS;
    const int64_t T = (int64_t)B * S;
    const int edge_invalid = strcmp(c->name, EDGE_ALL_INVALID) == 0;
    p->T = T;

    dsops_sparse_flash_attention_v32_init(&p->args, DSOPS_PRESET_V32);
    p->args.softmax_scale = 1.0f / sqrtf(576.0f);
    p->args.p_mode = DSOPS_P_NORMALISED;
    p->args.p_tile = 128;
    p->args.kv_layout = c->layout;

    /* block counts and the block tables */
    int64_t NB = 0, MB = 1, max_used = 0;
    for (int b = 0; b < B; b++) {
        int64_t nb = (c->seqused[b] + BS - 1) / BS;
        NB += nb;
        if (nb > MB)
            MB = nb;
        if (c->seqused[b] > max_used)
            max_used = c->seqused[b];
    }
    p->NB = NB;
    p->MB = MB;

    int32_t *cu = problem_alloc(p, sizeof(int32_t) * (size_t)(B + 1));  /* [B+1] */
    int32_t *su = problem_alloc(p, sizeof(int32_t) * (size_t)(B > 0 ? B : 1)); /* [B] */
    int32_t *bt = problem_alloc(p, sizeof(int32_t) * (size_t)(B * MB)); /* [B, MB] */
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)max_used + 4); /* the index rows' partial Fisher-Yates */
    if (!cu || !su || !bt || !perm)
        goto fail;
    for (int b = 0; b <= B; b++)
        cu[b] = b * S;
    for (int b = 0; b < B; b++)
        su[b] = c->seqused[b];
    if (!cases_fill_block_table(&r, B, c->seqused, 1, BS, NB, MB, bt))
        goto fail;

    /* queries: [b, s, N, Dc + Dr] drawn row by row, split into q_nope [T, N, Dc] and q_rope [T, N, Dr] */
    uint16_t *qn = problem_alloc(p, sizeof(uint16_t) * (size_t)(T * N * Dc));
    uint16_t *qr = problem_alloc(p, sizeof(uint16_t) * (size_t)(T * N * Dr));
    if (!qn || !qr)
        goto fail;
#pragma omp parallel for schedule(static)
    for (int64_t th = 0; th < T * N; th++) {
        float qv[CASES_MAX_KV_ROW];
        rng rq = cases_row_rng(seed, STREAM_Q, th);
        cases_rng_uniform_pm1(&rq, qv, (size_t)(Dc + Dr));
        for (int k = 0; k < Dc; k++)
            qn[th * Dc + k] = cases_bf16_bits(qv[k]);
        for (int k = 0; k < Dr; k++)
            qr[th * Dr + k] = cases_bf16_bits(qv[Dc + k]);
    }

    /* caches: every physical row gets data (rows past seqused in a sequence's last block too) */
    cases_latent_cache kv;
    if (!cases_fill_latent_cache(OWNED_LIST(p), c->layout, NB, BS, Dc, Dr, seed, STREAM_CACHE, &kv))
        goto fail;
    p->args.key_nope = kv.nope;
    p->args.key_nope_scale = kv.nope_scale;
    p->args.key_rope = kv.rope;
    p->args.kv_packed = kv.packed;

    /* indices [T, K]: one row per sequence, repeated for its tokens */
    int32_t *idx = problem_alloc(p, sizeof(int32_t) * (size_t)(T * K));
    if (!idx)
        goto fail;
    for (int b = 0; b < B; b++) {
        int32_t *row = idx + (int64_t)b * S * K;
        int32_t used = c->seqused[b];
        if (edge_invalid) {
            /* the invalid-index zoo: negative, or at / beyond seqused */
            for (int j = 0; j < K; j++) {
                switch (j % 6) {
                case 0: row[j] = -1; break;
                case 1: row[j] = used; break;
                case 2: row[j] = used + 7 + j; break;
                case 3: row[j] = INT32_MIN; break;
                case 4: row[j] = -5; break;
                default: row[j] = INT32_MAX; break;
                }
            }
        } else if (used < K) {
            for (int j = 0; j < K; j++)
                row[j] = j < used ? j : 0;
        } else {
            for (int32_t i = 0; i < used; i++)
                perm[i] = i;
            for (int j = 0; j < K; j++) { /* partial Fisher-Yates: the first K of a permutation */
                int32_t k = j + (int32_t)cases_rng_below(&r, (uint64_t)(used - j));
                int32_t tmp = perm[j];
                perm[j] = perm[k];
                perm[k] = tmp;
                row[j] = perm[j];
            }
        }
        for (int s = 1; s < S; s++)
            memcpy(row + (int64_t)s * K, row, sizeof(int32_t) * (size_t)K);
    }
    free(perm);
    perm = NULL;

    /* outputs */
    uint16_t *out = problem_alloc(p, sizeof(uint16_t) * (size_t)(T * N * Dc)); /* [T, N, Dc] bf16 */
    float *lse = c->with_lse ? problem_alloc(p, sizeof(float) * (size_t)(T * N)) : NULL; /* [T, N] */
    if (!out || (c->with_lse && !lse))
        goto fail;

    int64_t s3[3], s2[2], s1[1];
    s3[0] = T, s3[1] = N, s3[2] = Dc;
    p->args.q_nope = dsops_tensor_make(qn, DSOPS_BF16, 3, s3);
    p->args.out = dsops_tensor_make(out, DSOPS_BF16, 3, s3);
    s3[2] = Dr;
    p->args.q_rope = dsops_tensor_make(qr, DSOPS_BF16, 3, s3);
    s2[0] = T, s2[1] = K;
    p->args.topk_indices = dsops_tensor_make(idx, DSOPS_INT32, 2, s2);
    s2[0] = B, s2[1] = MB;
    p->args.block_table = dsops_tensor_make(bt, DSOPS_INT32, 2, s2);
    s1[0] = B + 1;
    p->args.cu_seqlens_q = dsops_tensor_make(cu, DSOPS_INT32, 1, s1);
    s1[0] = B;
    p->args.seqused_kv = dsops_tensor_make(su, DSOPS_INT32, 1, s1);
    if (lse) {
        s2[0] = T, s2[1] = N;
        p->args.lse = dsops_tensor_make(lse, DSOPS_FP32, 2, s2);
    }

    /* work counters: the key-list lengths of spec §4.4 steps 1-2 */
    int64_t attended = 0;
    for (int b = 0; b < B; b++) {
        for (int i = 0; i < S; i++) {
            int64_t L = (int64_t)c->seqused[b] - (S - 1 - i);
            int64_t cnt = L < 0 ? 0 : (L > K ? K : L);
            const int32_t *row = idx + ((int64_t)b * S + i) * K;
            for (int64_t j = 0; j < cnt; j++)
                attended += row[j] >= 0 && row[j] < c->seqused[b];
        }
    }
    p->attended = attended;
    if (c->nan_unread && !fill_unread_with_nan(p, idx, bt))
        goto fail;
    p->flops = 2.0 * N * (double)attended * (double)(Dc + Dr + Dc);
    p->gathered_bytes = (double)attended * (double)row_bytes(c);
    return p;

fail:
    free(perm);
    dsops_sfa_problem_free(p);
    return NULL;
}

/* ---- bench adapter ------------------------------------------------------------------------------- */
/* Alike in shape with the other families' adapters: bench_family.h says why each family keeps its own. */

/* sparse_flash_attention_v32 against the oracle (docs/OPERATORS.md §4.4, §2.10): out 1e-4 / 0.005 / 0.005
 * (tiled p_mode: atol 5e-4), lse 1e-6 / 8.01/65536 / 0.005, and per row exactly: a lonely row (no key to
 * attend, oracle lse +Inf) is out +0 with lse +Inf, a poisoned row (oracle lse NaN) is NaN in every element
 * and in lse, and a row without NaN in the oracle has none. */
static dsops_status sfa_run(dsops_context *ctx, void *p)
{
    return dsops_sparse_flash_attention_v32(ctx, &((dsops_sfa_problem *)p)->args);
}

/* Rows (t, h) that break the exact rules above: their count and the first one. */
typedef struct sfa_row_faults {
    int64_t lonely, lonely_bad, nan_bad, first_lonely_bad, first_nan_bad;
} sfa_row_faults;

static void sfa_find_row_faults(const dsops_sparse_flash_attention_v32_args *a, const uint16_t *ref_out,
                                const float *ref_lse, int64_t rows, int64_t Dc, sfa_row_faults *f)
{
    const uint16_t *out = a->out.data;  /* [T, N, Dc], rows = T * N */
    const float *lse = a->lse.data;     /* [T, N] or absent */
    *f = (sfa_row_faults){.first_lonely_bad = -1, .first_nan_bad = -1};
    for (int64_t row = 0; row < rows; row++) {
        const uint16_t *o = out + row * Dc, *r = ref_out + row * Dc;
        const float want = ref_lse[row];
        const int lonely = isinf(want) && want > 0, poisoned = isnan(want);
        int all_zero = 1, all_nan = 1, any_nan = 0, ref_any_nan = 0;
        for (int64_t d = 0; d < Dc; d++) {
            const int nan_here = isnan(cases_bf16_value(o[d]));
            all_zero &= o[d] == 0, all_nan &= nan_here, any_nan |= nan_here;
            ref_any_nan |= isnan(cases_bf16_value(r[d]));
        }
        const int lse_nan = lse && isnan(lse[row]);
        int nan_ok = poisoned ? all_nan && (!lse || lse_nan) : !lse_nan;
        nan_ok &= ref_any_nan || !any_nan;
        f->lonely += lonely;
        if (lonely && !(all_zero && (!lse || (isinf(lse[row]) && lse[row] > 0))) && f->lonely_bad++ == 0)
            f->first_lonely_bad = row;
        if (!nan_ok && f->nan_bad++ == 0)
            f->first_nan_bad = row;
    }
}

static int sfa_check(void *pv, char *why, size_t cap)
{
    const dsops_sfa_problem *p = pv;
    const dsops_sparse_flash_attention_v32_args *a = &p->args;
    const int64_t N = p->c.N, Dc = p->c.Dc, rows = p->T * N;
    const size_t n_out = (size_t)(rows * Dc), n_lse = (size_t)rows;
    uint16_t *ref_out = malloc(n_out * 2 + 2);
    float *ref_lse = malloc(n_lse * 4 + 4);
    if (!ref_out || !ref_lse) {
        free(ref_out);
        free(ref_lse);
        return bench_out_of_memory(why, cap);
    }
    dsops_sparse_flash_attention_v32_args r = *a; /* lse always: it tells lonely and poisoned rows */
    r.out = dsops_tensor_make(ref_out, DSOPS_BF16, 3, (int64_t[]){p->T, N, Dc});
    r.lse = dsops_tensor_make(ref_lse, DSOPS_FP32, 2, (int64_t[]){p->T, N});
    dsops_ref_sparse_flash_attention_v32(&r);
    const double out_atol = a->p_mode == DSOPS_P_TILED ? 5e-4 : 1e-4;
    size_t bad_out = 0, total_out = 0, bad_lse = 0, total_lse = 0;
    double max_out = 0, max_lse = 0;
    bench_count_outside(a->out.data, ref_out, DSOPS_BF16, n_out, out_atol, 0.005, &bad_out, &total_out, &max_out);
    if (a->lse.data)
        bench_count_outside(a->lse.data, ref_lse, DSOPS_FP32, n_lse, 1e-6, 8.01 / 65536, &bad_lse, &total_lse,
                            &max_lse);
    sfa_row_faults f;
    sfa_find_row_faults(a, ref_out, ref_lse, rows, Dc, &f);
    free(ref_out);
    free(ref_lse);
    const int64_t lb = f.first_lonely_bad, nb = f.first_nan_bad;
    snprintf(why, cap, "out: %zu of %zu outside %g / 0.005 (max |err| %.3g); lse: %zu of %zu outside 1e-6 / "
             "8.01/65536 (max |err| %.3g); %lld of %lld lonely rows not out +0 / lse +Inf (first t %lld h %lld); "
             "%lld rows break the NaN rule (first t %lld h %lld)", bad_out, total_out, out_atol, max_out, bad_lse,
             total_lse, max_lse, (long long)f.lonely_bad, (long long)f.lonely, (long long)(lb < 0 ? -1 : lb / N),
             (long long)(lb < 0 ? -1 : lb % N), (long long)f.nan_bad, (long long)(nb < 0 ? -1 : nb / N),
             (long long)(nb < 0 ? -1 : nb % N));
    return bench_too_many(bad_out, total_out) || bench_too_many(bad_lse, total_lse) || f.lonely_bad || f.nan_bad;
}

static void sfa_release(void *p) { dsops_sfa_problem_free(p); }

static int sfa_make_problem(const void *c, bench_problem *bp, char *why, size_t cap)
{
    dsops_sfa_problem *p = dsops_sfa_problem_make(c, 42);
    if (!p)
        return bench_cannot_generate(why, cap);
    *bp = (bench_problem){p, sfa_run, sfa_check, sfa_release, p->flops, p->gathered_bytes, DSOPS_PEAK_BF16_DOT,
                          .args = &p->args};
    return 0;
}

static void sfa_words(const void *cv, char *op, size_t oc, char *sh, size_t sc)
{
    const dsops_sfa_case *c = cv;
    snprintf(op, oc, "sparse_flash_attn_v32");
    snprintf(sh, sc, "B %d S %d kv %d", c->B, c->S, c->seqused[0]);
}

static void sfa_list_line(const void *cv, const char *not_ci)
{
    const dsops_sfa_case *c = cv;
    printf("%-40s sparse_flash_attention_v32  B %-3d S %-4d N %-3d K %-5d BS %-4d %s%s\n", c->name, c->B, c->S,
           c->N, c->K, c->BS, cases_layout_name(c->layout), not_ci);
}

static const void *sfa_table(int *count) { return dsops_sfa_cases(count); }

const bench_family bench_family_sparse_flash_attention_v32 = {
    .op = "sparse_flash_attention_v32",
    .table_word = "sparse_flash_attn_v32",
    .cases = sfa_table,
    .case_size = sizeof(dsops_sfa_case),
    .ci_offset = offsetof(dsops_sfa_case, ci),
    .make_problem = sfa_make_problem,
    .words = sfa_words,
    .list_line = sfa_list_line,
};

/* ==== adversarial problems (problems.h) ====================================================================
 * Small sparse_flash_attention_v32 problems of any shape and cache layout for tests/test_sfa.c and the programs that
 * share them (test_sfa_validation, test_determinism, test_concurrency): strided views, NaN- or Inf-poisoned unused
 * cache rows, invalid-index zoos, garbage in unused block-table entries, guard zones around the outputs; and the
 * oracle's results on them. The tests judge a library call on them (tests/problems_check.c). */

/* A [d0, d1, d2] view with outer strides s0, s1. */
static dsops_tensor view3(void *data, dsops_dtype dt, int64_t d0, int64_t d1, int64_t d2, int64_t s0, int64_t s1)
{
    const int64_t shape[3] = {d0, d1, d2}, stride[2] = {s0, s1};
    return cases_view(data, dt, 3, shape, stride);
}

/* ---- one logical cache row ------------------------------------------------------------------------ */

typedef struct row_data {
    uint16_t nope_bf16[4096];
    int8_t nope_i8[4096];
    float scale[32];
    uint16_t rope[4096];
} row_data;

static void gen_row(const tp_spec *sp, rng *r, int dead, row_data *rd)
{
    const int G = sp->Dc / 128;
    for (int c = 0; c < sp->Dc; c++)
        rd->nope_bf16[c] = cases_bf16_bits(cases_rng_uniform(r, -1.0f, 1.0f));
    if (sp->neg_inf)
        rd->nope_bf16[0] = cases_bf16_bits(dead ? -1e30f : 0.0f);
    for (int g = 0; g < G; g++) {
        int zero_group = !sp->int8_extreme && cases_rng_int(r, 0, 7) == 0; /* all-zero group, scale 0 */
        rd->scale[g] = zero_group ? 0.0f : cases_rng_uniform(r, 0.0005f, 0.01f);
        for (int c = g * 128; c < (g + 1) * 128; c++) {
            if (zero_group)
                rd->nope_i8[c] = 0;
            else if (sp->int8_extreme)
                rd->nope_i8[c] = (int8_t)(cases_rng_int(r, 0, 1) ? 127 : -128);
            else
                rd->nope_i8[c] = (int8_t)cases_rng_int(r, -128, 127);
        }
    }
    for (int c = 0; c < sp->Dr; c++)
        rd->rope[c] = cases_bf16_bits(cases_rng_uniform(r, -1.0f, 1.0f));
}

static void store_row(const tp_problem *p, int64_t blk, int64_t off, const row_data *rd)
{
    const dsops_sparse_flash_attention_v32_args *a = &p->args;
    const int Dc = p->sp.Dc, Dr = p->sp.Dr, G = Dc / 128;
    switch (p->sp.layout) {
    case DSOPS_KV_SPLIT_BF16:
        for (int c = 0; c < Dc; c++)
            cases_put_u16(&a->key_nope, blk, off, c, rd->nope_bf16[c]);
        for (int c = 0; c < Dr; c++)
            cases_put_u16(&a->key_rope, blk, off, c, rd->rope[c]);
        break;
    case DSOPS_KV_SPLIT_INT8:
        for (int c = 0; c < Dc; c++)
            cases_put_i8(&a->key_nope, blk, off, c, rd->nope_i8[c]);
        for (int g = 0; g < G; g++)
            cases_put_f32(&a->key_nope_scale, blk, off, g, rd->scale[g]);
        for (int c = 0; c < Dr; c++)
            cases_put_u16(&a->key_rope, blk, off, c, rd->rope[c]);
        break;
    case DSOPS_KV_PACKED_INT8: {
        uint8_t *row = tf_eaddr(&a->kv_packed, blk, off, 0);
        for (int c = 0; c < 512; c++)
            row[c] = (uint8_t)rd->nope_i8[c];
        for (int c = 0; c < 64; c++) {
            row[512 + 2 * c] = (uint8_t)(rd->rope[c] & 0xff);
            row[512 + 2 * c + 1] = (uint8_t)(rd->rope[c] >> 8);
        }
        for (int g = 0; g < 4; g++) {
            uint32_t u;
            memcpy(&u, &rd->scale[g], 4);
            for (int k = 0; k < 4; k++)
                row[640 + 4 * g + k] = (uint8_t)(u >> (8 * k));
        }
        break;
    }
    case DSOPS_KV_FLASHMLA_FP8: { /* the int8 draws as e4m3 bytes (NaN patterns moved to +-448), fp32 scales */
        uint8_t *row = tf_eaddr(&a->kv_packed, blk, off, 0);
        for (int c = 0; c < 512; c++) {
            uint8_t b = (uint8_t)rd->nope_i8[c];
            row[c] = (b & 0x7f) == 0x7f ? (uint8_t)(b - 1) : b;
        }
        for (int g = 0; g < 4; g++) {
            uint32_t u;
            memcpy(&u, &rd->scale[g], 4);
            for (int k = 0; k < 4; k++)
                row[512 + 4 * g + k] = (uint8_t)(u >> (8 * k));
        }
        for (int c = 0; c < 64; c++) {
            row[528 + 2 * c] = (uint8_t)(rd->rope[c] & 0xff);
            row[528 + 2 * c + 1] = (uint8_t)(rd->rope[c] >> 8);
        }
        break;
    }
    }
}

/* ---- building --------------------------------------------------------------------------------------- */

static int32_t zoo_value(rng *r, int32_t used)
{
    switch (cases_rng_int(r, 0, 5)) {
    case 0: return -1;
    case 1: return -5;
    case 2: return INT32_MIN;
    case 3: return INT32_MAX;
    case 4: return used;
    default: return used + 7;
    }
}

static int32_t valid_value(rng *r, int32_t used) { return used > 0 ? (int32_t)cases_rng_int(r, 0, used - 1) : -1; }

/* Entries of token t's top-k row that spec §4.4 steps 1-2 read: min(K, L, topk_length), L the keys visible to
 * the token (seqused minus the sequence's later tokens). */
static int64_t list_length(const tp_problem *p, int b, int64_t t)
{
    const int64_t K = p->sp.K, L = (int64_t)p->used[b] - (p->cu[b + 1] - 1 - t);
    int64_t cnt = L < 0 ? 0 : (L > K ? K : L);
    if (p->len && p->len[t] < cnt)
        cnt = p->len[t];
    return cnt;
}

tp_problem *tp_make(const tp_spec *spec, uint64_t seed)
{
    tp_problem *p = cases_xcalloc(1, sizeof *p);
    p->sp = *spec;
    tp_spec *sp = &p->sp;
    if (sp->p_tile == 0)
        sp->p_tile = 128;
    if (sp->softmax_scale == 0.0f)
        sp->softmax_scale = 1.0f / sqrtf((float)(sp->Dc + sp->Dr));
    if (sp->q_amp == 0.0f)
        sp->q_amp = 1.0f;
    if (sp->Dc > 4096 || sp->Dr > 4096 || sp->B > TP_MAX_B) {
        fprintf(stderr, "tp_make: spec too large\n");
        abort();
    }
    rng gen = {seed};
    const int B = sp->B, N = sp->N, Dc = sp->Dc, Dr = sp->Dr, K = sp->K, BS = sp->BS, G = Dc / 128;

    /* sequences: cu [B+1], used [B] */
    const int64_t T = p->T = cases_sequences(B, sp->S, sp->seqused, &p->cu, &p->used);

    /* block table [B, MB]: a random permutation of the physical blocks, five kinds of garbage */
    int64_t keys[TP_MAX_B];
    for (int b = 0; b < B; b++)
        keys[b] = sp->seqused[b];
    const cases_paging pg = cases_block_table(&gen, B, keys, BS, sp->extra_blocks, sp->extra_cols,
                                              sp->garbage_table ? 5 : 0, NULL);
    const int64_t NB = p->NB = pg.NB, MB = p->MB = pg.MB;
    p->table = pg.table;
    const int32_t *owner = pg.owner; /* sequence owning each physical block, -1 none */
    /* NB itself is also garbage for a table entry: use it once if there is an unused column */
    if (sp->garbage_table && B > 0 && MB > (sp->seqused[0] + BS - 1) / BS)
        p->table[MB - 1] = (int32_t)NB;

    /* top-k indices [T, K] and lengths [T] */
    p->idx = cases_xcalloc((size_t)(T * K), sizeof(int32_t));
    if (sp->with_topk_length)
        p->len = cases_xcalloc((size_t)T, sizeof(int32_t));
    int32_t *seqperm = NULL;
    for (int b = 0; b < B; b++) {
        int32_t used = sp->seqused[b];
        for (int64_t t = p->cu[b]; t < p->cu[b + 1]; t++) {
            int32_t *row = p->idx + t * K;
            switch (sp->index_mode) {
            case TP_IDX_VALID:
                for (int j = 0; j < K; j++)
                    row[j] = (j > 0 && cases_rng_int(&gen, 0, 7) == 0) ? row[j - 1] : valid_value(&gen, used);
                break;
            case TP_IDX_ZOO:
                for (int j = 0; j < K; j++) {
                    int64_t pick = cases_rng_int(&gen, 0, 15);
                    row[j] = pick < 7 ? valid_value(&gen, used)
                                      : (pick == 7 && j > 0 ? row[j - 1] : zoo_value(&gen, used));
                }
                break;
            case TP_IDX_INVALID:
                for (int j = 0; j < K; j++)
                    row[j] = zoo_value(&gen, used);
                break;
            case TP_IDX_CASE:
                if (t == p->cu[b]) {
                    if (used < K) {
                        for (int j = 0; j < K; j++)
                            row[j] = j < used ? j : 0;
                    } else {
                        seqperm = realloc(seqperm, sizeof(int32_t) * (size_t)used);
                        if (!seqperm)
                            abort();
                        for (int32_t i = 0; i < used; i++)
                            seqperm[i] = i;
                        for (int j = 0; j < K; j++) {
                            int32_t k = (int32_t)cases_rng_int(&gen, j, used - 1);
                            int32_t tmp = seqperm[j];
                            seqperm[j] = seqperm[k];
                            seqperm[k] = tmp;
                            row[j] = seqperm[j];
                        }
                    }
                } else {
                    memcpy(row, p->idx + (int64_t)p->cu[b] * K, sizeof(int32_t) * (size_t)K);
                }
                break;
            }
            if (p->len) {
                switch (cases_rng_int(&gen, 0, 5)) {
                case 0: p->len[t] = 0; break;
                case 1: p->len[t] = K + 3; break;
                case 2: p->len[t] = INT32_MAX; break;
                default: p->len[t] = (int32_t)cases_rng_int(&gen, 0, K); break;
                }
            }
        }
    }
    free(seqperm);

    /* queries */
    dsops_sparse_flash_attention_v32_args *a = &p->args;
    dsops_sparse_flash_attention_v32_init(a, DSOPS_PRESET_V32);
    if (sp->strided_q) {
        int64_t W = Dc + Dr + 5, ts = N * W + 3;
        int64_t n = T * ts;
        uint16_t *q = cases_xcalloc((size_t)n, sizeof(uint16_t));
        for (int64_t i = 0; i < n; i++)
            q[i] = 0xffff; /* NaN in the padding: never read */
        p->qbuf[0] = q;
        a->q_nope = view3(q, DSOPS_BF16, T, N, Dc, ts, W);
        a->q_rope = view3(q + Dc, DSOPS_BF16, T, N, Dr, ts, W);
    } else {
        p->qbuf[0] = cases_xcalloc((size_t)(T * N * Dc), sizeof(uint16_t));
        p->qbuf[1] = cases_xcalloc((size_t)(T * N * Dr), sizeof(uint16_t));
        a->q_nope = view3(p->qbuf[0], DSOPS_BF16, T, N, Dc, N * Dc, Dc);
        a->q_rope = view3(p->qbuf[1], DSOPS_BF16, T, N, Dr, N * Dr, Dr);
    }
    for (int64_t t = 0; t < T; t++)
        for (int h = 0; h < N; h++) {
            for (int c = 0; c < Dc; c++)
                cases_put_u16(&a->q_nope, t, h, c, cases_bf16_bits(cases_rng_uniform(&gen, -sp->q_amp, sp->q_amp)));
            for (int c = 0; c < Dr; c++)
                cases_put_u16(&a->q_rope, t, h, c, cases_bf16_bits(cases_rng_uniform(&gen, -sp->q_amp, sp->q_amp)));
            if (sp->neg_inf)
                cases_put_u16(&a->q_nope, t, h, 0, cases_bf16_bits(1e30f));
        }

    /* caches: buffers filled with 0xff bytes (bf16 / fp32 NaN, int8 -1) where no row is written */
    size_t kvbytes[4] = {0, 0, 0, 0};
    const int64_t rows = NB * BS;
    if (sp->layout == DSOPS_KV_SPLIT_BF16) {
        if (sp->strided_kv) {
            int64_t W = Dc + Dr + 3, bs = BS * W + 7;
            kvbytes[0] = (size_t)(NB * bs) * 2;
            p->kvbuf[0] = cases_xcalloc(kvbytes[0], 1);
            a->key_nope = view3(p->kvbuf[0], DSOPS_BF16, NB, BS, Dc, bs, W);
            a->key_rope = view3((uint16_t *)p->kvbuf[0] + Dc, DSOPS_BF16, NB, BS, Dr, bs, W);
        } else {
            kvbytes[0] = (size_t)(rows * Dc) * 2;
            kvbytes[1] = (size_t)(rows * Dr) * 2;
            p->kvbuf[0] = cases_xcalloc(kvbytes[0], 1);
            p->kvbuf[1] = cases_xcalloc(kvbytes[1], 1);
            a->key_nope = view3(p->kvbuf[0], DSOPS_BF16, NB, BS, Dc, BS * Dc, Dc);
            a->key_rope = view3(p->kvbuf[1], DSOPS_BF16, NB, BS, Dr, BS * Dr, Dr);
        }
    } else if (sp->layout == DSOPS_KV_SPLIT_INT8) {
        if (sp->strided_kv) {
            /* one byte buffer per row: nope int8 | rope bf16 | scales fp32 | padding */
            int64_t Wb = Dc + 2 * Dr + 4 * G + (sp->strided_kv == 2 ? 0 : 8);
            int64_t bs = BS * Wb + (sp->strided_kv == 2 ? 0 : 16);
            kvbytes[0] = (size_t)(NB * bs);
            p->kvbuf[0] = cases_xcalloc(kvbytes[0], 1);
            uint8_t *base = p->kvbuf[0];
            a->key_nope = view3(base, DSOPS_INT8, NB, BS, Dc, bs, Wb);
            a->key_rope = view3(base + Dc, DSOPS_BF16, NB, BS, Dr, bs / 2, Wb / 2);
            a->key_nope_scale = view3(base + Dc + 2 * Dr, DSOPS_FP32, NB, BS, G, bs / 4, Wb / 4);
        } else {
            kvbytes[0] = (size_t)(rows * Dc);
            kvbytes[1] = (size_t)(rows * G) * 4;
            kvbytes[2] = (size_t)(rows * Dr) * 2;
            for (int i = 0; i < 3; i++)
                p->kvbuf[i] = cases_xcalloc(kvbytes[i], 1);
            a->key_nope = view3(p->kvbuf[0], DSOPS_INT8, NB, BS, Dc, BS * Dc, Dc);
            a->key_nope_scale = view3(p->kvbuf[1], DSOPS_FP32, NB, BS, G, BS * G, G);
            a->key_rope = view3(p->kvbuf[2], DSOPS_BF16, NB, BS, Dr, BS * Dr, Dr);
        }
    } else {
        int64_t W = 656 + (sp->strided_kv ? 12 : 0), bs = BS * W + (sp->strided_kv ? 8 : 0);
        kvbytes[0] = (size_t)(NB * bs);
        p->kvbuf[0] = cases_xcalloc(kvbytes[0], 1);
        a->kv_packed = view3(p->kvbuf[0], DSOPS_UINT8, NB, BS, 656, bs, W);
    }
    for (int i = 0; i < 4; i++)
        if (p->kvbuf[i])
            memset(p->kvbuf[i], 0xff, kvbytes[i]);

    /* which rows does some token use (spec §4.4 steps 1-2)? */
    unsigned char *row_used = cases_xcalloc((size_t)rows, 1);
    for (int b = 0; b < B; b++) {
        for (int64_t t = p->cu[b]; t < p->cu[b + 1]; t++) {
            const int64_t cnt = list_length(p, b, t);
            for (int64_t j = 0; j < cnt; j++) {
                int64_t id = p->idx[t * K + j];
                if (id < 0 || id >= sp->seqused[b])
                    continue;
                row_used[(int64_t)p->table[b * MB + id / BS] * BS + id % BS] = 1;
            }
        }
    }
    row_data *rd = cases_xcalloc(1, sizeof *rd), *inf_row = cases_xcalloc(1, sizeof *inf_row);
    for (int c = 0; c < 4096; c++) {
        inf_row->nope_bf16[c] = inf_row->rope[c] = 0x7f80; /* bf16 +Inf */
        inf_row->nope_i8[c] = 1;
    }
    for (int g = 0; g < 32; g++)
        inf_row->scale[g] = INFINITY;
    for (int64_t row = 0; row < rows; row++) {
        int64_t blk = row / BS;
        int dead = sp->neg_inf && (owner[blk] == 0 || row % 3 == 0);
        gen_row(sp, &gen, dead, rd); /* drawn for every row so the data do not depend on nan_fill / inf_fill */
        if ((sp->nan_fill || sp->inf_fill) && !row_used[row]) {
            if (sp->inf_fill)
                store_row(p, blk, row % BS, inf_row);
            continue;
        }
        store_row(p, blk, row % BS, rd);
    }
    free(rd);
    free(inf_row);
    free(row_used);
    free(pg.owner);

    /* index tensors */
    const int64_t s2[2] = {T, K}, s1[1] = {T};
    a->topk_indices = dsops_tensor_make(p->idx, DSOPS_INT32, 2, s2);
    if (p->len)
        a->topk_length = dsops_tensor_make(p->len, DSOPS_INT32, 1, s1);
    if (sp->with_sinks) {
        const float special[3] = {INFINITY, -INFINITY, NAN};
        p->sinks = cases_xcalloc((size_t)N, sizeof(float));
        for (int64_t h = 0; h < N; h++)
            p->sinks[h] = sp->with_sinks == 2 && h < 3 ? special[h] : cases_rng_uniform(&gen, -3.0f, 3.0f);
        a->sinks = dsops_tensor_make(p->sinks, DSOPS_FP32, 1, (const int64_t[]){N});
    }
    cases_sequence_views(B, MB, p->table, p->cu, p->used, &a->block_table, &a->cu_seqlens_q, &a->seqused_kv);

    /* outputs inside guarded (and, when strided, padded) buffers */
    int64_t oW = Dc + (sp->strided_out ? 4 : 0), ots = N * oW + (sp->strided_out ? 2 : 0);
    p->out_buf_n = T * ots + 2 * CASES_GUARD;
    p->out_buf = cases_xcalloc((size_t)p->out_buf_n, sizeof(uint16_t));
    a->out = view3(p->out_buf + CASES_GUARD, DSOPS_BF16, T, N, Dc, ots, oW);
    if (sp->with_lse) {
        int64_t lW = N + (sp->strided_out ? 3 : 0);
        p->lse_buf_n = T * lW + 2 * CASES_GUARD;
        p->lse_buf = cases_xcalloc((size_t)p->lse_buf_n, sizeof(float));
        const int64_t shape[2] = {T, N}, stride[1] = {lW};
        a->lse = cases_view(p->lse_buf + CASES_GUARD, DSOPS_FP32, 2, shape, stride);
    }
    tp_reset_outputs(p);

    a->softmax_scale = sp->softmax_scale;
    a->p_mode = sp->p_mode;
    a->p_tile = sp->p_tile;
    a->kv_layout = sp->layout;
    return p;
}

void tp_set_q(tp_problem *p, int64_t t, int64_t h, int64_t c, float v)
{
    const dsops_sparse_flash_attention_v32_args *a = &p->args;
    if (c < p->sp.Dc)
        cases_put_u16(&a->q_nope, t, h, c, cases_bf16_bits(v));
    else
        cases_put_u16(&a->q_rope, t, h, c - p->sp.Dc, cases_bf16_bits(v));
}

void tp_set_key_rope(tp_problem *p, int64_t b, int64_t idx, int64_t c, float v)
{
    const dsops_sparse_flash_attention_v32_args *a = &p->args;
    int64_t blk = p->table[b * p->MB + idx / p->sp.BS], off = idx % p->sp.BS;
    uint16_t h = cases_bf16_bits(v);
    if (p->sp.layout == DSOPS_KV_PACKED_INT8 || p->sp.layout == DSOPS_KV_FLASHMLA_FP8) {
        const int at = p->sp.layout == DSOPS_KV_PACKED_INT8 ? 512 : 528; /* the rope's first byte */
        uint8_t *row = tf_eaddr(&a->kv_packed, blk, off, 0);
        row[at + 2 * c] = (uint8_t)(h & 0xff);
        row[at + 2 * c + 1] = (uint8_t)(h >> 8);
    } else {
        cases_put_u16(&a->key_rope, blk, off, c, h);
    }
}

int64_t tp_used_entries(const tp_problem *p, int64_t t, int64_t *first)
{
    int b = 0;
    while (p->cu[b + 1] <= t)
        b++;
    const int64_t K = p->sp.K, cnt = list_length(p, b, t);
    int64_t n = 0;
    *first = -1;
    for (int64_t j = 0; j < cnt; j++) {
        int64_t id = p->idx[t * K + j];
        if (id < 0 || id >= p->used[b])
            continue;
        if (n++ == 0)
            *first = id;
    }
    return n;
}

void tp_free(tp_problem *p)
{
    if (!p)
        return;
    for (int i = 0; i < 2; i++)
        free(p->qbuf[i]);
    for (int i = 0; i < 4; i++)
        free(p->kvbuf[i]);
    free(p->idx);
    free(p->len);
    free(p->sinks);
    free(p->table);
    free(p->cu);
    free(p->used);
    free(p->out_buf);
    free(p->lse_buf);
    free(p->ref_out);
    free(p->ref_lse);
    free(p);
}

void tp_reset_outputs(tp_problem *p)
{
    cases_fill_sentinel(p->out_buf, sizeof(uint16_t), p->out_buf_n, TP_SENTINEL_BF16);
    cases_fill_sentinel(p->lse_buf, sizeof(float), p->lse_buf_n, TP_SENTINEL_F32_BITS);
}

int tp_outputs_untouched(const tp_problem *p)
{
    return cases_holds_sentinel(p->out_buf, sizeof(uint16_t), p->out_buf_n, TP_SENTINEL_BF16) &&
           cases_holds_sentinel(p->lse_buf, sizeof(float), p->lse_buf_n, TP_SENTINEL_F32_BITS);
}

void tp_reference_of(const dsops_sparse_flash_attention_v32_args *a, uint16_t **ref_out, float **ref_lse)
{
    const int64_t T = a->out.shape[0], N = a->out.shape[1], Dc = a->out.shape[2];
    dsops_sparse_flash_attention_v32_args r = *a;
    *ref_out = cases_xcalloc((size_t)(T * N * Dc), sizeof(uint16_t));
    *ref_lse = cases_xcalloc((size_t)(T * N), sizeof(float));
    int64_t s3[3] = {T, N, Dc}, s2[2] = {T, N};
    r.out = dsops_tensor_make(*ref_out, DSOPS_BF16, 3, s3);
    r.lse = dsops_tensor_make(*ref_lse, DSOPS_FP32, 2, s2);
    dsops_ref_sparse_flash_attention_v32(&r);
}

void tp_compute_ref(tp_problem *p)
{
    free(p->ref_out);
    free(p->ref_lse);
    tp_reference_of(&p->args, &p->ref_out, &p->ref_lse);
}

void tp_extract(const dsops_sparse_flash_attention_v32_args *a, uint16_t *out_bits, uint32_t *lse_bits)
{
    const int64_t T = a->out.shape[0], N = a->out.shape[1], Dc = a->out.shape[2];
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < N; h++) {
            memcpy(out_bits + (t * N + h) * Dc, tf_eaddr(&a->out, t, h, 0), sizeof(uint16_t) * (size_t)Dc);
            if (lse_bits && a->lse.data)
                memcpy(lse_bits + t * N + h, tf_eaddr(&a->lse, t, h, 0), 4);
        }
}

void tp_poison_outputs(const dsops_sparse_flash_attention_v32_args *a)
{
    const int64_t T = a->out.shape[0], N = a->out.shape[1], Dc = a->out.shape[2];
    const uint16_t nan16 = 0xffff;
    const uint32_t nan32 = 0xffffffffu;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < N; h++) {
            for (int64_t d = 0; d < Dc; d++)
                memcpy(tf_eaddr(&a->out, t, h, d), &nan16, 2);
            if (a->lse.data)
                memcpy(tf_eaddr(&a->lse, t, h, 0), &nan32, 4);
        }
}
