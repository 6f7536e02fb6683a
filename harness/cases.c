/* Named sparse_flash_attention_v32 cases of docs/CASES.md and their data generators.
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
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "cases_internal.h"

/* ---- the case table ------------------------------------------------------------------------------ */

#define REP4(x) x, x, x, x
#define REP8(x) REP4(x), REP4(x)
#define REP16(x) REP8(x), REP8(x)
#define REP64(x) REP16(x), REP16(x), REP16(x), REP16(x)

/* N 128, Dc 512, Dr 64, K 2048, BS 128 for every V3.2 case */
#define V32_DIMS .N = 128, .Dc = 512, .Dr = 64, .K = 2048, .BS = 128

/* ---- shared by every case family --------------------------------------------------------------- */

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
     .layout = DSOPS_KV_PACKED656, .ci = 1},
    {.name = "v32_sfa_packed_b4_s2_kv64k", .B = 4, .S = 2, .seqused = {REP4(65536)}, V32_DIMS,
     .layout = DSOPS_KV_PACKED656, .ci = 1},
    {.name = "v32_sfa_packed_b1_s256_kv64k", .B = 1, .S = 256, .seqused = {65536}, V32_DIMS,
     .layout = DSOPS_KV_PACKED656, .ci = 0, .ci_variant = "v32_sfa_packed_b1_s256_kv64k_ci"},
    {.name = "v32_sfa_packed_b1_s256_kv64k_ci", .B = 1, .S = 16, .seqused = {65536}, V32_DIMS,
     .layout = DSOPS_KV_PACKED656, .ci = 1},
    {.name = "v32_sfa_packed_b64_s2_kv64k", .B = 64, .S = 2, .seqused = {REP64(65536)}, V32_DIMS,
     .layout = DSOPS_KV_PACKED656, .ci = 0, .ci_variant = "v32_sfa_packed_b64_s2_kv64k_ci"},
    {.name = "v32_sfa_packed_b64_s2_kv64k_ci", .B = 8, .S = 2, .seqused = {REP8(65536)}, V32_DIMS,
     .layout = DSOPS_KV_PACKED656, .ci = 1},
    {.name = "v32_sfa_packed_b64_s2_uniform", .B = 64, .S = 2,
     .seqused = {REP8(16384), REP8(32768), REP8(49152), REP16(65536), REP8(81920), REP8(98304), REP8(114688)},
     V32_DIMS, .layout = DSOPS_KV_PACKED656, .ci = 0, .ci_variant = "v32_sfa_packed_b64_s2_uniform_ci"},
    /* one sequence per length class plus a second 65536 */
    {.name = "v32_sfa_packed_b64_s2_uniform_ci", .B = 8, .S = 2,
     .seqused = {16384, 32768, 49152, 65536, 65536, 81920, 98304, 114688}, V32_DIMS,
     .layout = DSOPS_KV_PACKED656, .ci = 1},
    {.name = "v32_sfa_b4_s2_int8_mixed_lse", .B = 4, .S = 2, .seqused = {65536, 16381, 666, 15}, V32_DIMS,
     .layout = DSOPS_KV_SPLIT_INT8, .with_lse = 1, .ci = 1},
    /* Edge and error cases: every index is -1 or >= seqused, so every token is lonely (out 0, lse +Inf) */
    {.name = "v32_sfa_edge_all_invalid", .B = 2, .S = 2, .seqused = {1000, 3}, V32_DIMS,
     .layout = DSOPS_KV_SPLIT_BF16, .with_lse = 1, .ci = 1},
};

#define EDGE_ALL_INVALID "v32_sfa_edge_all_invalid"

const dsops_sfa_case *dsops_sfa_cases(int *count) { return CASES_TABLE(sfa_cases, count); }
const dsops_sfa_case *dsops_sfa_case_find(const char *name) { return CASES_FIND(sfa_cases, name); }
void dsops_sfa_problem_free(dsops_sfa_problem *p) { if (p) cases_problem_release(p->buffers, p->nbuffers, p); }

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

uint16_t cases_bf16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* round to nearest, ties to even, for |x| < 2^22 (adding and removing 1.5 * 2^23 in fp32) */
static float rint_small(float x)
{
    const float big = 12582912.0f; /* no -ffast-math: the sum is not folded away */
    float y = x + big;
    return y - big;
}

/* Vendor test quantiser of one group: scale = max(amax, 1e-8)/127, q = clamp(round(v/scale), -128, 127). */
static float quant_group(const float *v, int8_t *q, int n)
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
        float r = rint_small(v[i] / scale);
        q[i] = (int8_t)(r > 127.0f ? 127 : (r < -128.0f ? -128 : (int)r));
    }
    return scale;
}

static void *problem_alloc(dsops_sfa_problem *p, size_t bytes) { return ALLOC_OWNED(p, bytes); }

static int64_t row_bytes(const dsops_sfa_case *c)
{
    switch (c->layout) {
    case DSOPS_KV_SPLIT_BF16: return (int64_t)(c->Dc + c->Dr) * 2;
    case DSOPS_KV_SPLIT_INT8: return (int64_t)c->Dc + (int64_t)(c->Dc / 128) * 4 + (int64_t)c->Dr * 2;
    case DSOPS_KV_PACKED656: return 656;
    }
    return 0;
}

/* Every generated row (a cache row, or one head of one query token) draws from its own generator,
 * seeded from (seed, stream, row): the data do not depend on the thread count and rows fill in
 * parallel. */
#define MAX_ROW 1024 /* Dc + Dr of any case */

rng cases_row_rng(uint64_t seed, uint64_t stream, int64_t row)
{
    rng r = {seed ^ (stream << 56) ^ ((uint64_t)row * 0xd1b54a32d192ed03ull)};
    cases_rng_next(&r); /* decorrelate neighbouring rows */
    return r;
}

enum { STREAM_Q = 1, STREAM_CACHE = 2 };

/* Caches: every physical row gets data (rows past seqused in a sequence's last block too). */
static int fill_cache(dsops_sfa_problem *p, uint64_t seed)
{
    const dsops_sfa_case *c = &p->c;
    const int64_t rows = p->NB * c->BS;
    const int Dc = c->Dc, Dr = c->Dr, G = Dc / 128;
    int64_t shape3[3] = {p->NB, c->BS, 0};

    if (c->layout == DSOPS_KV_PACKED656) {
        uint8_t *kv = problem_alloc(p, (size_t)(rows * 656)); /* [NB, BS, 656] */
        if (!kv)
            return 0;
#pragma omp parallel for schedule(static)
        for (int64_t row = 0; row < rows; row++) {
            float v[MAX_ROW];
            rng r = cases_row_rng(seed, STREAM_CACHE, row);
            uint8_t *dst = kv + row * 656;
            cases_rng_uniform_pm1(&r, v, (size_t)(Dc + Dr));
            for (int g = 0; g < 4; g++) {
                float s = quant_group(v + g * 128, (int8_t *)dst + g * 128, 128);
                uint32_t u;
                memcpy(&u, &s, 4);
                for (int k = 0; k < 4; k++)
                    dst[640 + 4 * g + k] = (uint8_t)(u >> (8 * k)); /* little-endian fp32 */
            }
            for (int k = 0; k < 64; k++) {
                uint16_t h = cases_bf16_bits(v[512 + k]);
                dst[512 + 2 * k] = (uint8_t)h;                      /* little-endian bf16 */
                dst[512 + 2 * k + 1] = (uint8_t)(h >> 8);
            }
        }
        shape3[2] = 656;
        p->args.kv_packed = dsops_tensor_make(kv, DSOPS_UINT8, 3, shape3);
        return 1;
    }

    uint16_t *rope = problem_alloc(p, sizeof(uint16_t) * (size_t)(rows * Dr)); /* [NB, BS, Dr] bf16 */
    if (!rope)
        return 0;
    if (c->layout == DSOPS_KV_SPLIT_BF16) {
        uint16_t *nope = problem_alloc(p, sizeof(uint16_t) * (size_t)(rows * Dc)); /* [NB, BS, Dc] bf16 */
        if (!nope)
            return 0;
#pragma omp parallel for schedule(static)
        for (int64_t row = 0; row < rows; row++) {
            float v[MAX_ROW];
            rng r = cases_row_rng(seed, STREAM_CACHE, row);
            cases_rng_uniform_pm1(&r, v, (size_t)(Dc + Dr));
            for (int k = 0; k < Dc; k++)
                nope[row * Dc + k] = cases_bf16_bits(v[k]);
            for (int k = 0; k < Dr; k++)
                rope[row * Dr + k] = cases_bf16_bits(v[Dc + k]);
        }
        shape3[2] = Dc;
        p->args.key_nope = dsops_tensor_make(nope, DSOPS_BF16, 3, shape3);
    } else {
        int8_t *nope = problem_alloc(p, (size_t)(rows * Dc));                      /* [NB, BS, Dc] int8 */
        float *scale = problem_alloc(p, sizeof(float) * (size_t)(rows * G));        /* [NB, BS, Dc/128] */
        if (!nope || !scale)
            return 0;
#pragma omp parallel for schedule(static)
        for (int64_t row = 0; row < rows; row++) {
            float v[MAX_ROW];
            rng r = cases_row_rng(seed, STREAM_CACHE, row);
            cases_rng_uniform_pm1(&r, v, (size_t)(Dc + Dr));
            for (int g = 0; g < G; g++)
                scale[row * G + g] = quant_group(v + g * 128, nope + row * Dc + g * 128, 128);
            for (int k = 0; k < Dr; k++)
                rope[row * Dr + k] = cases_bf16_bits(v[Dc + k]);
        }
        shape3[2] = Dc;
        p->args.key_nope = dsops_tensor_make(nope, DSOPS_INT8, 3, shape3);
        shape3[2] = G;
        p->args.key_nope_scale = dsops_tensor_make(scale, DSOPS_FP32, 3, shape3);
    }
    shape3[2] = Dr;
    p->args.key_rope = dsops_tensor_make(rope, DSOPS_BF16, 3, shape3);
    return 1;
}

dsops_sfa_problem *dsops_sfa_problem_make(const dsops_sfa_case *c, uint64_t seed)
{
    if (!c || c->B < 0 || c->B > 128 || c->S < 0 || c->N < 1 || c->Dc < 1 || c->Dr < 1 || c->Dc + c->Dr > MAX_ROW ||
        c->K < 1 || c->BS < 1 || (c->layout != DSOPS_KV_SPLIT_BF16 && c->Dc % 128 != 0) ||
        (c->layout == DSOPS_KV_PACKED656 && (c->Dc != 512 || c->Dr != 64)))
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
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)(NB > max_used ? NB : max_used) + 4);
    if (!cu || !su || !bt || !perm)
        goto fail;
    for (int b = 0; b <= B; b++)
        cu[b] = b * S;
    for (int b = 0; b < B; b++)
        su[b] = c->seqused[b];
    for (int64_t i = 0; i < NB; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = NB - 1; i > 0; i--) {
        int64_t j = (int64_t)cases_rng_below(&r, (uint64_t)i + 1);
        int32_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    for (int b = 0, next = 0; b < B; b++) {
        int64_t nb = (c->seqused[b] + BS - 1) / BS;
        for (int64_t j = 0; j < MB; j++)
            bt[b * MB + j] = j < nb ? perm[next + j] : -1;
        next += (int)nb;
    }

    /* queries: [b, s, N, Dc + Dr] drawn row by row, split into q_nope [T, N, Dc] and q_rope [T, N, Dr] */
    uint16_t *qn = problem_alloc(p, sizeof(uint16_t) * (size_t)(T * N * Dc));
    uint16_t *qr = problem_alloc(p, sizeof(uint16_t) * (size_t)(T * N * Dr));
    if (!qn || !qr)
        goto fail;
#pragma omp parallel for schedule(static)
    for (int64_t th = 0; th < T * N; th++) {
        float qv[MAX_ROW];
        rng rq = cases_row_rng(seed, STREAM_Q, th);
        cases_rng_uniform_pm1(&rq, qv, (size_t)(Dc + Dr));
        for (int k = 0; k < Dc; k++)
            qn[th * Dc + k] = cases_bf16_bits(qv[k]);
        for (int k = 0; k < Dr; k++)
            qr[th * Dr + k] = cases_bf16_bits(qv[Dc + k]);
    }

    if (!fill_cache(p, seed))
        goto fail;

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
    p->flops = 2.0 * N * (double)attended * (double)(Dc + Dr + Dc);
    p->gathered_bytes = (double)attended * (double)row_bytes(c);
    return p;

fail:
    free(perm);
    dsops_sfa_problem_free(p);
    return NULL;
}

/* ==================================================================================================
 * lightning_indexer (docs/OPERATORS.md §3.6, §4.3; docs/CASES.md "lightning_indexer, V3.2 configuration"
 * and "lightning_indexer, V4 configuration")
 *
 * Data:
 *   V3.2 int8   q_idx and keys start as int8(N(0,1)) (truncation), get fp16 scales
 *               max(fp16(amax/127), 1e-3) per head / per key and are requantised
 *               clip(rint(v/scale), -127, 127); weights fp16(N(0,1))
 *   V3.2 bf16   q_idx, keys, weights N(0,1) bf16
 *   V4          q_idx and keys Q8 (spec §2.7) of N(0,1) vectors per head / per key, scales fp16;
 *               weights fp16(N(0,1) * 0.1)
 *   AscendC     q_idx, keys int8 U(-128,127); scales U(0,10) fp16; weights U(0,0.01) fp16
 *   tables      a random permutation of the physical blocks; -1 in unused columns
 * The key cache of sequence b holds floor(seqused[b] / cmp_ratio) entries (compressed entries for V4,
 * tokens for V3.2); every physical row gets data, including the rows past the end of a last block.
 * ================================================================================================== */

#define LI_MAX_DI 1024 /* largest head dim the generator handles */

/* NI 64, DI 128, BS 128 for every case */
#define LI_DIMS .NI = 64, .DI = 128, .BS = 128
#define LI_MIXED4 {65536, 971, 32869, 16383}
#define LI_B48_MIXED 131072, 65536, 65536 + 111, 32768 + 11, 16384 + 1, 8192 + 2, 2048 + 7, 1024 + 5, 2048, 256, 127, 32
#define LI_B48_MIXED_CI 8192, 4096, 4102, 2048, 1024, 512, 128, 64, 128, 16, 7, 2

static const dsops_li_case li_cases[] = {
    /* V3.2 configuration: cmp_ratio 1, K 2048 */
    {.name = "v32_li_int8_b4_s2_mixed", .B = 4, .S = 2, .seqused = LI_MIXED4, LI_DIMS, .K = 2048, .cmp_ratio = 1,
     .int8 = 1, .ci = 1},
    {.name = "v32_li_int8_b8_s2_mixed", .B = 8, .S = 2,
     .seqused = {32767, 32656, 384, 2000, 65536, 971, 32869, 129090}, LI_DIMS, .K = 2048, .cmp_ratio = 1,
     .int8 = 1, .ci = 1},
    {.name = "v32_li_int8_b4_s2_kv64k", .B = 4, .S = 2, .seqused = {REP4(65536)}, LI_DIMS, .K = 2048,
     .cmp_ratio = 1, .int8 = 1, .ci = 1},
    /* seqused uniform in [1, 8192], drawn once (fixed so that the case's work does not depend on the seed) */
    {.name = "v32_li_bf16_b32_s3_rand8k", .B = 32, .S = 3,
     .seqused = {4914, 6679, 6817, 6186, 4136, 5288, 2697, 4154, 4475, 1466, 2840, 5571, 1919, 7948, 3342, 6331,
                 5721, 4049, 4758, 6133, 2837, 5673, 3884, 446, 7989, 4902, 3181, 1935, 5992, 582, 1406, 2346},
     LI_DIMS, .K = 2048, .cmp_ratio = 1, .int8 = 0, .ci = 1},
    {.name = "v32_li_bf16_b4_s1_kv64k", .B = 4, .S = 1, .seqused = {REP4(65536)}, LI_DIMS, .K = 2048,
     .cmp_ratio = 1, .int8 = 0, .ci = 1},
    {.name = "v32_li_bf16_b48_s4_mixed", .B = 48, .S = 4,
     .seqused = {LI_B48_MIXED, LI_B48_MIXED, LI_B48_MIXED, LI_B48_MIXED}, LI_DIMS, .K = 2048, .cmp_ratio = 1,
     .int8 = 0, .ci = 0, .ci_variant = "v32_li_bf16_b48_s4_mixed_ci"},
    /* every length / 16 (at least 1) */
    {.name = "v32_li_bf16_b48_s4_mixed_ci", .B = 48, .S = 4,
     .seqused = {LI_B48_MIXED_CI, LI_B48_MIXED_CI, LI_B48_MIXED_CI, LI_B48_MIXED_CI}, LI_DIMS, .K = 2048,
     .cmp_ratio = 1, .int8 = 0, .ci = 1},
    {.name = "v32_li_bf16_b2_s3_kv122", .B = 2, .S = 3, .seqused = {122, 122}, LI_DIMS, .K = 2048, .cmp_ratio = 1,
     .int8 = 0, .with_scores = 1, .ci = 1},
    /* V4 configuration: int8, cmp_ratio 4 (Flash K 512, Pro K 1024) */
    {.name = "v4_li_b64_s2_kv8k", .B = 64, .S = 2, .seqused = {REP64(8192)}, LI_DIMS, .K = 512, .cmp_ratio = 4,
     .int8 = 1, .ci = 1},
    {.name = "v4_li_b4_s2_mixed", .B = 4, .S = 2, .seqused = LI_MIXED4, LI_DIMS, .K = 512, .cmp_ratio = 4,
     .int8 = 1, .ci = 1},
    {.name = "v4_li_pro_b4_s2_kv64k", .B = 4, .S = 2, .seqused = {REP4(65536)}, LI_DIMS, .K = 1024,
     .cmp_ratio = 4, .int8 = 1, .ci = 1},
    /* S 16 tokens see 115 ... 130 tokens: 28 ... 32 compressed keys, rows padded with -1 */
    {.name = "v4_li_b1_s16_kv130", .B = 1, .S = 16, .seqused = {130}, LI_DIMS, .K = 512, .cmp_ratio = 4,
     .int8 = 1, .with_scores = 1, .ci = 1},
    /* the vendor documentation's example (AscendC data) */
    {.name = "v4_li_ascendc_example", .B = 24, .S = 4, .seqused = {REP16(512), REP8(512)}, LI_DIMS, .K = 512,
     .cmp_ratio = 1, .int8 = 1, .ci = 1},
    /* V4: one decode token over 32K compressed keys (131072 tokens, ratio 4): the V4 indexer's performance case */
    {.name = "v4_li_bench_t1_kv128k", .B = 1, .S = 1, .seqused = {131072}, LI_DIMS, .K = 512, .cmp_ratio = 4,
     .int8 = 1, .ci = 1},
    /* one decode token over 64K keys: the performance case of a single query */
    {.name = "li_bench_int8_t1_kv64k", .B = 1, .S = 1, .seqused = {65536}, LI_DIMS, .K = 2048, .cmp_ratio = 1,
     .int8 = 1, .ci = 1},
    {.name = "li_bench_bf16_t1_kv64k", .B = 1, .S = 1, .seqused = {65536}, LI_DIMS, .K = 2048, .cmp_ratio = 1,
     .int8 = 0, .ci = 1},
};

const dsops_li_case *dsops_li_cases(int *count) { return CASES_TABLE(li_cases, count); }
const dsops_li_case *dsops_li_case_find(const char *name) { return CASES_FIND(li_cases, name); }
void dsops_li_problem_free(dsops_li_problem *p) { if (p) cases_problem_release(p->buffers, p->nbuffers, p); }

typedef enum li_data_kind { LI_DATA_V32 = 0, LI_DATA_V4 = 1, LI_DATA_ASCENDC = 2 } li_data_kind;

static li_data_kind li_kind(const dsops_li_case *c)
{
    if (strncmp(c->name, "v4_li_ascendc", 13) == 0)
        return LI_DATA_ASCENDC;
    if (strncmp(c->name, "v4_", 3) == 0)
        return LI_DATA_V4;
    return LI_DATA_V32;
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

/* One int8 row of `n` values with its fp16 scale, by the case's recipe. */
static uint16_t li_int8_row(li_data_kind kind, rng *r, int8_t *q, int n)
{
    float v[LI_MAX_DI];
    if (kind == LI_DATA_ASCENDC) {
        for (int i = 0; i < n; i++)
            q[i] = (int8_t)((int)(cases_rng_next(r) & 0xff) - 128);
        return cases_fp16_bits(10.0f * cases_rng_unit(r));
    }
    cases_rng_normal(r, v, (size_t)n);
    float amax = 0.0f;
    if (kind == LI_DATA_V32) {
        for (int i = 0; i < n; i++) {
            v[i] = (float)(int)v[i]; /* int8(N(0,1)): truncation */
            amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;
        }
        float s = cases_fp16_value(cases_fp16_bits(amax / 127.0f));
        uint16_t sh = cases_fp16_bits(s > 1e-3f ? s : 1e-3f);
        s = cases_fp16_value(sh);
        for (int i = 0; i < n; i++) {
            float x = rint_small(v[i] / s);
            q[i] = (int8_t)(x > 127.0f ? 127 : (x < -127.0f ? -127 : (int)x));
        }
        return sh;
    }
    /* V4: Q8 of spec §2.7 (no NaN / Inf can occur in normal draws) */
    for (int i = 0; i < n; i++)
        amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;
    float sq = 127.0f / amax;
    if (amax == 0.0f || isinf(sq)) {
        memset(q, 0, (size_t)n);
        return 0;
    }
    for (int i = 0; i < n; i++)
        q[i] = (int8_t)(int)rint_small(v[i] * sq);
    return cases_fp16_bits(1.0f / sq);
}

/* One bf16 row of N(0,1) values. */
static void li_bf16_row(rng *r, uint16_t *q, int n)
{
    float v[LI_MAX_DI];
    cases_rng_normal(r, v, (size_t)n);
    for (int i = 0; i < n; i++)
        q[i] = cases_bf16_bits(v[i]);
}

static void *li_alloc(dsops_li_problem *p, size_t bytes) { return ALLOC_OWNED(p, bytes); }

enum { STREAM_LI_Q = 11, STREAM_LI_W = 12, STREAM_LI_KEY = 13 };

dsops_li_problem *dsops_li_problem_make(const dsops_li_case *c, uint64_t seed)
{
    if (!c || c->B < 0 || c->B > 128 || c->S < 0 || c->NI < 1 || c->DI < 1 || c->DI > LI_MAX_DI || c->K < 1 ||
        c->BS < 1 || c->cmp_ratio < 1)
        return NULL;
    dsops_li_problem *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->c = *c;
    rng r = {seed};
    const li_data_kind kind = li_kind(c);
    const int B = c->B, S = c->S, NI = c->NI, DI = c->DI, K = c->K, BS = c->BS, R = c->cmp_ratio;
    const int64_t T = (int64_t)B * S;
    p->T = T;
    dsops_lightning_indexer_init(&p->args, R == 1 ? DSOPS_PRESET_V32 : DSOPS_PRESET_V4_FLASH);
    p->args.cmp_ratio = R;

    /* block counts: sequence b holds floor(seqused / R) keys */
    int64_t NB = 0, MB = 1;
    for (int b = 0; b < B; b++) {
        int64_t nb = (c->seqused[b] / R + BS - 1) / BS;
        NB += nb;
        MB = nb > MB ? nb : MB;
    }
    if (NB < 1)
        NB = 1;
    p->NB = NB;
    p->MB = MB;

    int32_t *cu = li_alloc(p, sizeof(int32_t) * (size_t)(B + 1));               /* [B+1] */
    int32_t *su = li_alloc(p, sizeof(int32_t) * (size_t)(B > 0 ? B : 1));       /* [B] */
    int32_t *bt = li_alloc(p, sizeof(int32_t) * (size_t)(B * MB));              /* [B, MB] */
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)NB);
    if (!cu || !su || !bt || !perm)
        goto fail;
    for (int b = 0; b <= B; b++)
        cu[b] = b * S;
    for (int b = 0; b < B; b++)
        su[b] = c->seqused[b];
    for (int64_t i = 0; i < NB; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = NB - 1; i > 0; i--) {
        int64_t j = (int64_t)cases_rng_below(&r, (uint64_t)i + 1);
        int32_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    for (int b = 0, next = 0; b < B; b++) {
        int64_t nb = (c->seqused[b] / R + BS - 1) / BS;
        for (int64_t j = 0; j < MB; j++)
            bt[b * MB + j] = j < nb ? perm[next + j] : -1;
        next += (int)nb;
    }
    free(perm);
    perm = NULL;

    /* queries and weights: one generator per (token, head) row and one per token for the weights */
    const size_t esz = c->int8 ? 1 : 2;
    void *q = li_alloc(p, esz * (size_t)(T * NI * DI));                         /* [T, NI, DI] */
    uint16_t *qs = c->int8 ? li_alloc(p, sizeof(uint16_t) * (size_t)(T * NI)) : NULL; /* [T, NI] fp16 */
    uint16_t *w = li_alloc(p, sizeof(uint16_t) * (size_t)(T * NI));             /* [T, NI] fp16 / bf16 */
    if (!q || (c->int8 && !qs) || !w)
        goto fail;
#pragma omp parallel for schedule(static)
    for (int64_t th = 0; th < T * NI; th++) {
        rng rq = cases_row_rng(seed, STREAM_LI_Q, th);
        if (c->int8)
            qs[th] = li_int8_row(kind, &rq, (int8_t *)q + th * DI, DI);
        else
            li_bf16_row(&rq, (uint16_t *)q + th * DI, DI);
    }
    for (int64_t t = 0; t < T; t++) {
        rng rw = cases_row_rng(seed, STREAM_LI_W, t);
        float v[2];
        for (int h = 0; h < NI; h++) {
            if (kind == LI_DATA_ASCENDC) {
                w[t * NI + h] = cases_fp16_bits(0.01f * cases_rng_unit(&rw));
                continue;
            }
            if (h % 2 == 0)
                cases_rng_normal(&rw, v, 2);
            float x = v[h % 2];
            w[t * NI + h] = !c->int8 ? cases_bf16_bits(x) : cases_fp16_bits(kind == LI_DATA_V4 ? x * 0.1f : x);
        }
    }

    /* key cache [NB, BS, DI] and key scales [NB, BS] fp16: one generator per physical row */
    const int64_t rows = NB * BS;
    void *key = li_alloc(p, esz * (size_t)(rows * DI));
    uint16_t *ks = c->int8 ? li_alloc(p, sizeof(uint16_t) * (size_t)rows) : NULL;
    if (!key || (c->int8 && !ks))
        goto fail;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        rng rk = cases_row_rng(seed, STREAM_LI_KEY, row);
        if (c->int8)
            ks[row] = li_int8_row(kind, &rk, (int8_t *)key + row * DI, DI);
        else
            li_bf16_row(&rk, (uint16_t *)key + row * DI, DI);
    }

    /* outputs */
    int32_t *idx = li_alloc(p, sizeof(int32_t) * (size_t)(T * K));             /* [T, K] */
    float *scores = c->with_scores ? li_alloc(p, sizeof(float) * (size_t)(T * K)) : NULL;
    if (!idx || (c->with_scores && !scores))
        goto fail;

    const dsops_dtype qdt = c->int8 ? DSOPS_INT8 : DSOPS_BF16;
    int64_t s3[3] = {T, NI, DI}, s2[2] = {T, NI}, s1[1];
    p->args.q_idx = dsops_tensor_make(q, qdt, 3, s3);
    p->args.weights = dsops_tensor_make(w, c->int8 ? DSOPS_FP16 : DSOPS_BF16, 2, s2);
    if (c->int8)
        p->args.q_idx_scale = dsops_tensor_make(qs, DSOPS_FP16, 2, s2);
    s3[0] = NB, s3[1] = BS, s3[2] = DI;
    p->args.key_cache = dsops_tensor_make(key, qdt, 3, s3);
    if (c->int8) {
        s2[0] = NB, s2[1] = BS;
        p->args.key_scale_cache = dsops_tensor_make(ks, DSOPS_FP16, 2, s2);
    }
    s2[0] = B, s2[1] = MB;
    p->args.block_table = dsops_tensor_make(bt, DSOPS_INT32, 2, s2);
    s1[0] = B + 1;
    p->args.cu_seqlens_q = dsops_tensor_make(cu, DSOPS_INT32, 1, s1);
    s1[0] = B;
    p->args.seqused_kv = dsops_tensor_make(su, DSOPS_INT32, 1, s1);
    s2[0] = T, s2[1] = K;
    p->args.topk_indices = dsops_tensor_make(idx, DSOPS_INT32, 2, s2);
    if (scores)
        p->args.topk_scores = dsops_tensor_make(scores, DSOPS_FP32, 2, s2);

    /* work counters */
    int64_t scored = 0;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < S; i++) {
            int64_t L = (int64_t)c->seqused[b] - (S - 1 - i);
            scored += (L > 0 ? L : 0) / R;
        }
    p->scored = scored;
    p->ops = 2.0 * NI * (double)DI * (double)scored;
    p->key_bytes = (double)scored * (double)((int64_t)DI * (int64_t)esz + (c->int8 ? 2 : 0));
    return p;

fail:
    free(perm);
    dsops_li_problem_free(p);
    return NULL;
}

/* ==================================================================================================
 * mla_prolog_v32 (docs/OPERATORS.md §4.1; docs/CASES.md "mla_prolog_v32")
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
 * Parameters are the vendor's: eps_cq = eps_ckv = 1e-5, rope interleaved_in_half_out, not inverse.
 * ================================================================================================== */

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
     .layout = DSOPS_KV_PACKED656, .ci = 1},
};

static void *mlap_alloc(dsops_mlap_problem *p, size_t bytes) { return ALLOC_OWNED(p, bytes); }

enum {
    STREAM_MLAP_X = 21, STREAM_MLAP_WQA = 22, STREAM_MLAP_WQB = 23, STREAM_MLAP_WUK = 24, STREAM_MLAP_WKV = 25,
    STREAM_MLAP_GAMMA = 26, STREAM_MLAP_ROPE = 27, STREAM_MLAP_CACHE = 28
};

const dsops_mlap_case *dsops_mlap_cases(int *count) { return CASES_TABLE(mlap_cases, count); }
const dsops_mlap_case *dsops_mlap_case_find(const char *name) { return CASES_FIND(mlap_cases, name); }
void dsops_mlap_problem_free(dsops_mlap_problem *p) { if (p) cases_problem_release(p->buffers, p->nbuffers, p); }

#define MLAP_MAX_ROW 16384 /* longest generated row (H, Q, Dc + 64) */

/* rows x cols bf16 values amp * U(-1,1), one generator per row (parallel, thread-count independent). */
void cases_fill_bf16(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, float amp, uint16_t *dst)
{
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        float v[MLAP_MAX_ROW];
        rng r = cases_row_rng(seed, stream, row);
        cases_rng_uniform_pm1(&r, v, (size_t)cols);
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
        float v[MLAP_MAX_ROW];
        rng r = cases_row_rng(seed, stream, row);
        cases_rng_uniform_pm1(&r, v, (size_t)cols);
        float amax = 0.0f;
        for (int64_t k = 0; k < cols; k++) {
            uint16_t h = cases_bf16_bits(amp * v[k]);
            uint32_t u = (uint32_t)h << 16;
            memcpy(&v[k], &u, sizeof u);
            amax = fabsf(v[k]) > amax ? fabsf(v[k]) : amax;
        }
        const float sq = 127.0f / amax;
        if (amax == 0.0f || isinf(sq)) {
            memset(dst + row * cols, 0, (size_t)cols);
            scale[row] = 0.0f;
            continue;
        }
        for (int64_t k = 0; k < cols; k++)
            dst[row * cols + k] = (int8_t)(int)rint_small(v[k] * sq);
        scale[row] = 1.0f / sq;
    }
}

/* Random contents of every cache row of the layout. */
static int mlap_fill_cache(dsops_mlap_problem *p, uint64_t seed)
{
    const dsops_mlap_case *c = &p->c;
    const int64_t rows = p->NB * c->BS;
    const int Dc = c->Dc, Dr = 64, G = Dc / 128;
    int64_t s3[3] = {p->NB, c->BS, 0};

    if (c->layout == DSOPS_KV_PACKED656) {
        uint8_t *kv = mlap_alloc(p, (size_t)(rows * 656)); /* [NB, BS, 656] */
        if (!kv)
            return 0;
#pragma omp parallel for schedule(static)
        for (int64_t row = 0; row < rows; row++) {
            float v[512 + 64];
            rng r = cases_row_rng(seed, STREAM_MLAP_CACHE, row);
            uint8_t *dst = kv + row * 656;
            cases_rng_uniform_pm1(&r, v, 512 + 64);
            for (int g = 0; g < 4; g++) {
                float s = quant_group(v + g * 128, (int8_t *)dst + g * 128, 128);
                uint32_t u;
                memcpy(&u, &s, 4);
                for (int k = 0; k < 4; k++)
                    dst[640 + 4 * g + k] = (uint8_t)(u >> (8 * k)); /* little-endian fp32 */
            }
            for (int k = 0; k < 64; k++) {
                uint16_t h = cases_bf16_bits(v[512 + k]);
                dst[512 + 2 * k] = (uint8_t)h; /* little-endian bf16 */
                dst[512 + 2 * k + 1] = (uint8_t)(h >> 8);
            }
        }
        s3[2] = 656;
        p->args.kv_packed = dsops_tensor_make(kv, DSOPS_UINT8, 3, s3);
        return 1;
    }

    uint16_t *rope = mlap_alloc(p, sizeof(uint16_t) * (size_t)(rows * Dr)); /* [NB, BS, 64] bf16 */
    if (!rope)
        return 0;
    s3[2] = Dr;
    p->args.kr_cache = dsops_tensor_make(rope, DSOPS_BF16, 3, s3);
    if (c->layout == DSOPS_KV_SPLIT_BF16) {
        uint16_t *nope = mlap_alloc(p, sizeof(uint16_t) * (size_t)(rows * Dc)); /* [NB, BS, Dc] bf16 */
        if (!nope)
            return 0;
#pragma omp parallel for schedule(static)
        for (int64_t row = 0; row < rows; row++) {
            float v[MAX_ROW];
            rng r = cases_row_rng(seed, STREAM_MLAP_CACHE, row);
            cases_rng_uniform_pm1(&r, v, (size_t)(Dc + Dr));
            for (int k = 0; k < Dc; k++)
                nope[row * Dc + k] = cases_bf16_bits(v[k]);
            for (int k = 0; k < Dr; k++)
                rope[row * Dr + k] = cases_bf16_bits(v[Dc + k]);
        }
        s3[2] = Dc;
        p->args.kv_cache = dsops_tensor_make(nope, DSOPS_BF16, 3, s3);
        return 1;
    }
    int8_t *nope = mlap_alloc(p, (size_t)(rows * Dc));                  /* [NB, BS, Dc] int8 */
    float *scale = mlap_alloc(p, sizeof(float) * (size_t)(rows * G));   /* [NB, BS, Dc/128] fp32 */
    if (!nope || !scale)
        return 0;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        float v[MAX_ROW];
        rng r = cases_row_rng(seed, STREAM_MLAP_CACHE, row);
        cases_rng_uniform_pm1(&r, v, (size_t)(Dc + Dr));
        for (int g = 0; g < G; g++)
            scale[row * G + g] = quant_group(v + g * 128, nope + row * Dc + g * 128, 128);
        for (int k = 0; k < Dr; k++)
            rope[row * Dr + k] = cases_bf16_bits(v[Dc + k]);
    }
    s3[2] = Dc;
    p->args.kv_cache = dsops_tensor_make(nope, DSOPS_INT8, 3, s3);
    s3[2] = G;
    p->args.kv_scale_cache = dsops_tensor_make(scale, DSOPS_FP32, 3, s3);
    return 1;
}

dsops_mlap_problem *dsops_mlap_problem_make(const dsops_mlap_case *c, uint64_t seed)
{
    if (!c || c->B < 0 || c->S < 0 || c->kv < c->S || c->H < 1 || c->H > MLAP_MAX_ROW || c->Q < 1 ||
        c->Q > MLAP_MAX_ROW || c->N < 1 || c->Dqn < 1 || c->Dc < 1 || c->Dc + 64 > MAX_ROW || c->BS < 1 ||
        (c->layout != DSOPS_KV_SPLIT_BF16 && c->Dc % 128 != 0) || (c->layout == DSOPS_KV_PACKED656 && c->Dc != 512))
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

    /* block table: a random permutation of the blocks, ceil(kv / BS) per sequence */
    const int64_t nb = (c->kv + BS - 1) / BS;
    int64_t NB = B * nb, MB = nb > 1 ? nb : 1;
    if (NB < 1)
        NB = 1;
    p->NB = NB;
    p->MB = MB;
    int32_t *bt = mlap_alloc(p, sizeof(int32_t) * (size_t)(B * MB > 0 ? B * MB : 1)); /* [B, MB] */
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)NB);
    int64_t *ci = mlap_alloc(p, sizeof(int64_t) * (size_t)(T > 0 ? T : 1));         /* [T] */
    if (!bt || !perm || !ci)
        goto fail;
    for (int64_t i = 0; i < NB; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = NB - 1; i > 0; i--) {
        int64_t j = (int64_t)cases_rng_below(&r, (uint64_t)i + 1);
        int32_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < MB; j++)
            bt[b * MB + j] = j < nb ? perm[b * nb + j] : -1;
    free(perm);
    perm = NULL;
    p->block_table = bt;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < S; i++) {
            int64_t pos = c->kv - S + i;
            ci[b * S + i] = (int64_t)bt[b * MB + pos / BS] * BS + pos % BS;
        }

    /* inputs */
    uint16_t *x = mlap_alloc(p, sizeof(uint16_t) * (size_t)(T * H));        /* [T, H] */
    uint16_t *wq_a = mlap_alloc(p, sizeof(uint16_t) * (size_t)(Q * H));     /* [Q, H] */
    uint16_t *g_cq = mlap_alloc(p, sizeof(uint16_t) * (size_t)Q);           /* [Q] */
    uint16_t *w_uk = mlap_alloc(p, sizeof(uint16_t) * (size_t)(N * Dqn * Dc)); /* [N, Dqn, Dc] */
    uint16_t *wkv_a = mlap_alloc(p, sizeof(uint16_t) * (size_t)(KV * H));   /* [Dc+64, H] */
    uint16_t *g_ckv = mlap_alloc(p, sizeof(uint16_t) * (size_t)Dc);         /* [Dc] */
    uint16_t *cosb = mlap_alloc(p, sizeof(uint16_t) * (size_t)(T * 64));    /* [T, 64] */
    uint16_t *sinb = mlap_alloc(p, sizeof(uint16_t) * (size_t)(T * 64));    /* [T, 64] */
    void *wq_b = mlap_alloc(p, (c->int8_wq_b ? 1 : 2) * (size_t)(NG * Q));  /* [NG, Q] */
    float *wq_b_scale = c->int8_wq_b ? mlap_alloc(p, sizeof(float) * (size_t)NG) : NULL; /* [NG] */
    if (!x || !wq_a || !g_cq || !w_uk || !wkv_a || !g_ckv || !cosb || !sinb || !wq_b || (c->int8_wq_b && !wq_b_scale))
        goto fail;
    cases_fill_bf16(seed, STREAM_MLAP_X, T, H, 1.0f, x);
    cases_fill_bf16(seed, STREAM_MLAP_WQA, Q, H, 0.1f, wq_a);
    if (c->int8_wq_b)
        cases_fill_q8_bf16(seed, STREAM_MLAP_WQB, NG, Q, 0.1f, wq_b, wq_b_scale);
    else
        cases_fill_bf16(seed, STREAM_MLAP_WQB, NG, Q, 0.1f, wq_b);
    cases_fill_bf16(seed, STREAM_MLAP_WUK, N * Dqn, Dc, 0.1f, w_uk);
    cases_fill_bf16(seed, STREAM_MLAP_WKV, KV, H, 0.1f, wkv_a);
    cases_fill_bf16(seed, STREAM_MLAP_GAMMA, 1, Q, 1.0f, g_cq);
    cases_fill_bf16(seed ^ 0x5555u, STREAM_MLAP_GAMMA, 1, Dc, 1.0f, g_ckv);
    cases_fill_bf16(seed, STREAM_MLAP_ROPE, T, 64, 0.1f, cosb);
    cases_fill_bf16(seed ^ 0x5555u, STREAM_MLAP_ROPE, T, 64, 0.1f, sinb);

    if (!mlap_fill_cache(p, seed))
        goto fail;

    /* outputs */
    uint16_t *q_nope = mlap_alloc(p, sizeof(uint16_t) * (size_t)(T * N * Dc)); /* [T, N, Dc] bf16 */
    uint16_t *q_rope = mlap_alloc(p, sizeof(uint16_t) * (size_t)(T * N * 64)); /* [T, N, 64] bf16 */
    void *qr = mlap_alloc(p, (c->int8_wq_b ? 1 : 2) * (size_t)(T * Q));       /* [T, Q] */
    float *qr_scale = c->int8_wq_b ? mlap_alloc(p, sizeof(float) * (size_t)(T > 0 ? T : 1)) : NULL; /* [T] */
    if (!q_nope || !q_rope || !qr || (c->int8_wq_b && !qr_scale))
        goto fail;

    dsops_mla_prolog_v32_args *a = &p->args;
    int64_t s1[1], s2[2], s3[3];
    s2[0] = T, s2[1] = H;
    a->x = dsops_tensor_make(x, DSOPS_BF16, 2, s2);
    s2[0] = Q;
    a->wq_a = dsops_tensor_make(wq_a, DSOPS_BF16, 2, s2);
    s1[0] = Q;
    a->gamma_cq = dsops_tensor_make(g_cq, DSOPS_BF16, 1, s1);
    s2[0] = NG, s2[1] = Q;
    a->wq_b = dsops_tensor_make(wq_b, c->int8_wq_b ? DSOPS_INT8 : DSOPS_BF16, 2, s2);
    if (c->int8_wq_b) {
        s1[0] = NG;
        a->wq_b_scale = dsops_tensor_make(wq_b_scale, DSOPS_FP32, 1, s1);
    }
    s3[0] = N, s3[1] = Dqn, s3[2] = Dc;
    a->w_uk = dsops_tensor_make(w_uk, DSOPS_BF16, 3, s3);
    s2[0] = KV, s2[1] = H;
    a->wkv_a = dsops_tensor_make(wkv_a, DSOPS_BF16, 2, s2);
    s1[0] = Dc;
    a->gamma_ckv = dsops_tensor_make(g_ckv, DSOPS_BF16, 1, s1);
    s2[0] = T, s2[1] = 64;
    a->rope_cos = dsops_tensor_make(cosb, DSOPS_BF16, 2, s2);
    a->rope_sin = dsops_tensor_make(sinb, DSOPS_BF16, 2, s2);
    s1[0] = T;
    a->cache_index = dsops_tensor_make(ci, DSOPS_INT64, 1, s1);
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
    free(perm);
    dsops_mlap_problem_free(p);
    return NULL;
}

/* ==================================================================================================
 * indexer_prolog_v32 (docs/OPERATORS.md §4.2; docs/CASES.md "indexer_prolog_v32")
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
 * 1 / sqrt(64 * 128) except for the DIA-style bf16 case (1, no Hadamard).
 * ================================================================================================== */

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
    STREAM_IDXP_X = 41, STREAM_IDXP_QR = 42, STREAM_IDXP_QR_SCALE = 43, STREAM_IDXP_WQB = 44,
    STREAM_IDXP_WQB_SCALE = 45, STREAM_IDXP_WK = 46, STREAM_IDXP_WPROJ = 47, STREAM_IDXP_ROPE = 48,
    STREAM_IDXP_HAD = 49, STREAM_IDXP_CACHE = 50
};

const dsops_idxp_case *dsops_idxp_cases(int *count) { return CASES_TABLE(idxp_cases, count); }
const dsops_idxp_case *dsops_idxp_case_find(const char *name) { return CASES_FIND(idxp_cases, name); }
void dsops_idxp_problem_free(dsops_idxp_problem *p) { if (p) cases_problem_release(p->buffers, p->nbuffers, p); }

#define IDXP_MAX_ROW 16384 /* longest generated row (H, Q) */

/* rows x cols bf16 values U(-1,1), one generator per row (parallel, thread-count independent). */
static void idxp_fill_bf16(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, uint16_t *dst)
{
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        float v[IDXP_MAX_ROW];
        rng r = cases_row_rng(seed, stream, row);
        cases_rng_uniform_pm1(&r, v, (size_t)cols);
        for (int64_t k = 0; k < cols; k++)
            dst[row * cols + k] = cases_bf16_bits(v[k]);
    }
}

/* rows x cols int8 values uniform in [-128, 128), eight per generator output. */
static void idxp_fill_i8(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, int8_t *dst)
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
static void idxp_fill_f32(uint64_t seed, uint64_t stream, int64_t n, float *dst)
{
    rng r = cases_row_rng(seed, stream, 0);
    cases_rng_uniform_pm1(&r, dst, (size_t)n);
}

/* fp32 -> fp16 bits, round to nearest even (the draws here are finite and below 1 in magnitude). */
static uint16_t idxp_fp16_bits(float f)
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
        idxp_fill_i8(seed, STREAM_IDXP_CACHE, rows, DI, key);
#pragma omp parallel for schedule(static)
        for (int64_t row = 0; row < rows; row++) {
            float v;
            rng r = cases_row_rng(seed ^ 0x5555u, STREAM_IDXP_CACHE, row);
            cases_rng_uniform_pm1(&r, &v, 1);
            scale[row] = idxp_fp16_bits(v);
        }
        p->args.idx_k_cache = dsops_tensor_make(key, DSOPS_INT8, 3, s3);
        p->args.idx_k_scale_cache = dsops_tensor_make(scale, DSOPS_FP16, 2, s2);
        return 1;
    }
    uint16_t *key = idxp_alloc(p, sizeof(uint16_t) * (size_t)(rows * DI));     /* [NB, BS, DI] bf16 */
    if (!key)
        return 0;
    idxp_fill_bf16(seed, STREAM_IDXP_CACHE, rows, DI, key);
    p->args.idx_k_cache = dsops_tensor_make(key, DSOPS_BF16, 3, s3);
    return 1;
}

dsops_idxp_problem *dsops_idxp_problem_make(const dsops_idxp_case *c, uint64_t seed)
{
    if (!c || c->B < 0 || c->S < 0 || c->kv < c->S || c->H < 1 || c->H > IDXP_MAX_ROW || c->Q < 1 ||
        c->Q > IDXP_MAX_ROW || c->NI < 1 || c->DI < 64 || c->DI > IDXP_MAX_ROW || c->BS < 1)
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

    /* block table: a random permutation of the blocks, ceil(kv / BS) per sequence */
    const int64_t nb = (c->kv + BS - 1) / BS;
    int64_t NB = B * nb, MB = nb > 1 ? nb : 1;
    if (NB < 1)
        NB = 1;
    p->NB = NB;
    p->MB = MB;
    int32_t *bt = idxp_alloc(p, sizeof(int32_t) * (size_t)(B * MB > 0 ? B * MB : 1)); /* [B, MB] */
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)NB);
    int64_t *ci = idxp_alloc(p, sizeof(int64_t) * (size_t)(T > 0 ? T : 1));         /* [T] */
    if (!bt || !perm || !ci)
        goto fail;
    for (int64_t i = 0; i < NB; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = NB - 1; i > 0; i--) {
        int64_t j = (int64_t)cases_rng_below(&r, (uint64_t)i + 1);
        int32_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < MB; j++)
            bt[b * MB + j] = j < nb ? perm[b * nb + j] : -1;
    free(perm);
    perm = NULL;
    p->block_table = bt;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < S; i++) {
            int64_t pos = c->kv - S + i;
            ci[b * S + i] = (int64_t)bt[b * MB + pos / BS] * BS + pos % BS;
        }

    /* inputs */
    const size_t qe = c->int8 ? 1 : 2;
    uint16_t *x = idxp_alloc(p, sizeof(uint16_t) * (size_t)(T * H));           /* [T, H] bf16 */
    void *qr = idxp_alloc(p, qe * (size_t)(T * Q));                             /* [T, Q] */
    float *qr_scale = c->int8 ? idxp_alloc(p, sizeof(float) * (size_t)(T > 0 ? T : 1)) : NULL; /* [T] */
    void *wq_b = idxp_alloc(p, qe * (size_t)(NQ * Q));                          /* [NI*DI, Q] */
    float *wq_b_scale = c->int8 ? idxp_alloc(p, sizeof(float) * (size_t)NQ) : NULL; /* [NI*DI] */
    uint16_t *wk = idxp_alloc(p, sizeof(uint16_t) * (size_t)(DI * H));          /* [DI, H] */
    uint16_t *wproj = idxp_alloc(p, sizeof(uint16_t) * (size_t)(NI * H));       /* [NI, H] */
    uint16_t *gamma = idxp_alloc(p, sizeof(uint16_t) * (size_t)DI);             /* [DI] */
    uint16_t *beta = idxp_alloc(p, sizeof(uint16_t) * (size_t)DI);              /* [DI] */
    uint16_t *cosb = idxp_alloc(p, sizeof(uint16_t) * (size_t)(T * 64));       /* [T, 64] */
    uint16_t *sinb = idxp_alloc(p, sizeof(uint16_t) * (size_t)(T * 64));       /* [T, 64] */
    uint16_t *hq = had ? idxp_alloc(p, sizeof(uint16_t) * (size_t)(DI * DI)) : NULL; /* [DI, DI] */
    uint16_t *hk = had ? idxp_alloc(p, sizeof(uint16_t) * (size_t)(DI * DI)) : NULL; /* [DI, DI] */
    if (!x || !qr || !wq_b || !wk || !wproj || !gamma || !beta || !cosb || !sinb ||
        (c->int8 && (!qr_scale || !wq_b_scale)) || (had && (!hq || !hk)))
        goto fail;
    idxp_fill_bf16(seed, STREAM_IDXP_X, T, H, x);
    if (c->int8) {
        idxp_fill_i8(seed, STREAM_IDXP_QR, T, Q, qr);
        idxp_fill_i8(seed, STREAM_IDXP_WQB, NQ, Q, wq_b);
        idxp_fill_f32(seed, STREAM_IDXP_QR_SCALE, T, qr_scale);
        idxp_fill_f32(seed, STREAM_IDXP_WQB_SCALE, NQ, wq_b_scale);
    } else {
        idxp_fill_bf16(seed, STREAM_IDXP_QR, T, Q, qr);
        idxp_fill_bf16(seed, STREAM_IDXP_WQB, NQ, Q, wq_b);
    }
    idxp_fill_bf16(seed, STREAM_IDXP_WK, DI, H, wk);
    idxp_fill_bf16(seed, STREAM_IDXP_WPROJ, NI, H, wproj);
    for (int64_t d = 0; d < DI; d++) {
        gamma[d] = cases_bf16_bits(1.0f);
        beta[d] = cases_bf16_bits(0.0f);
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
        idxp_fill_bf16(seed, STREAM_IDXP_HAD, DI, DI, hq);
        idxp_fill_bf16(seed ^ 0x5555u, STREAM_IDXP_HAD, DI, DI, hk);
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
    s2[0] = NQ, s2[1] = Q;
    a->idx_wq_b = dsops_tensor_make(wq_b, qdt, 2, s2);
    if (c->int8) {
        s1[0] = T;
        a->qr_scale = dsops_tensor_make(qr_scale, DSOPS_FP32, 1, s1);
        s1[0] = NQ;
        a->idx_wq_b_scale = dsops_tensor_make(wq_b_scale, DSOPS_FP32, 1, s1);
    }
    s2[0] = DI, s2[1] = H;
    a->idx_wk = dsops_tensor_make(wk, DSOPS_BF16, 2, s2);
    s2[0] = NI, s2[1] = H;
    a->weights_proj = dsops_tensor_make(wproj, DSOPS_BF16, 2, s2);
    s1[0] = DI;
    a->ln_gamma_k = dsops_tensor_make(gamma, DSOPS_BF16, 1, s1);
    a->ln_beta_k = dsops_tensor_make(beta, DSOPS_BF16, 1, s1);
    s2[0] = T, s2[1] = 64;
    a->rope_cos = dsops_tensor_make(cosb, DSOPS_BF16, 2, s2);
    a->rope_sin = dsops_tensor_make(sinb, DSOPS_BF16, 2, s2);
    if (had) {
        s2[0] = DI, s2[1] = DI;
        a->hadamard_q = dsops_tensor_make(hq, DSOPS_BF16, 2, s2);
        a->hadamard_k = dsops_tensor_make(hk, DSOPS_BF16, 2, s2);
    }
    s1[0] = T;
    a->cache_index = dsops_tensor_make(ci, DSOPS_INT64, 1, s1);
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
    free(perm);
    dsops_idxp_problem_free(p);
    return NULL;
}

/* ==================================================================================================
 * sparse_attention_v32, the fused layer (docs/OPERATORS.md §4.5; docs/CASES.md "sparse_attention_v32")
 *
 * Data (seed 42), the stage cases' distributions:
 *   x                              U(-1,1) bf16                                               [T, H]
 *   wq_a, wq_b, w_uk, wkv_a        U(-0.1,0.1) bf16; int8 wq_b: Q8 per output channel (+ wq_b_scale)
 *   gamma_cq, gamma_ckv            U(-1,1) bf16
 *   idx_wq_b                       bf16: U(-1,1); int8: uniform in [-128, 128), idx_wq_b_scale U(-1,1)
 *   idx_wk, weights_proj           U(-1,1) bf16
 *   ln_gamma_k, ln_beta_k          1 and 0 (bf16)
 *   rope_cos, rope_sin             U(-0.1,0.1) bf16                                          [T, 64]
 *   hadamard_q, hadamard_k         int8 variant: the normalised Sylvester matrix (bf16); bf16 variant:
 *                                  absent (the vendor DIA prolog has no rotation)
 *   caches                         every row random, in the layout's own format: latent U(-1,1) (int8
 *                                  layouts: quantised per 128-group like the sfa cases), rope U(-1,1);
 *                                  indexer keys U(-1,1) bf16, or Q8 (spec §2.7) of U(-1,1) with the
 *                                  scale in fp16
 *   cache_index[t]                 slot(b, p_t), p_t = seqused[b] - S_b + i, through the block table
 * Parameters: dsops defaults (dsops_sparse_attention_v32_init, V3.2) with topk = K; the bf16 variant
 * takes weights_scale = 1 and no Hadamard, as the vendor DIA prolog (spec §5).
 * ================================================================================================== */

#define REP12(x) REP8(x), REP4(x)
#define REP24(x) REP16(x), REP8(x)
#define REP32(x) REP16(x), REP16(x)
#define REP48(x) REP32(x), REP16(x)

/* H 7168, Q 1536, N 128, Dqn 128, Dc 512, NI 64, DI 128, K 2048, BS 128 for every V3.2 case */
#define DIA_DIMS .H = 7168, .Q = 1536, .N = 128, .Dqn = 128, .Dc = 512, .NI = 64, .DI = 128, .K = 2048, .BS = 128
#define DIA_MIXED .seqused = {768, 4097, 8192, 131071}

static const dsops_dia_case dia_cases[] = {
    {.name = "v32_dia_b4_s1_mixed", .B = 4, .S = 1, DIA_MIXED, .table_width = 1024, DIA_DIMS,
     .layout = DSOPS_KV_SPLIT_BF16, .ci = 1},
    {.name = "v32_dia_b4_s2_mixed", .B = 4, .S = 2, DIA_MIXED, .table_width = 1024, DIA_DIMS,
     .layout = DSOPS_KV_SPLIT_BF16, .ci = 1},
    {.name = "v32_dia_b32_s1_kv8k", .B = 32, .S = 1, .seqused = {REP32(8192)}, DIA_DIMS,
     .layout = DSOPS_KV_SPLIT_BF16, .ci = 0, .ci_variant = "v32_dia_b32_s1_kv8k_ci"},
    {.name = "v32_dia_b32_s1_kv8k_ci", .B = 8, .S = 1, .seqused = {REP8(8192)}, DIA_DIMS,
     .layout = DSOPS_KV_SPLIT_BF16, .ci = 1},
    {.name = "v32_dia_b24_s1_kv4k", .B = 24, .S = 1, .seqused = {REP24(4096)}, DIA_DIMS,
     .layout = DSOPS_KV_SPLIT_BF16, .ci = 1},
    /* the block table is sized for 8192 tokens per sequence */
    {.name = "v32_dia_b48_s1_kv4k", .B = 48, .S = 1, .seqused = {REP48(4096)}, .table_width = 64, DIA_DIMS,
     .layout = DSOPS_KV_SPLIT_BF16, .ci = 0, .ci_variant = "v32_dia_b48_s1_kv4k_ci"},
    {.name = "v32_dia_b48_s1_kv4k_ci", .B = 12, .S = 1, .seqused = {REP12(4096)}, .table_width = 64, DIA_DIMS,
     .layout = DSOPS_KV_SPLIT_BF16, .ci = 1},
    /* dsops: the int8 variant (W8A8C8 prologs, int8 latent cache) */
    {.name = "v32_dia_int8_b4_s2_mixed", .B = 4, .S = 2, DIA_MIXED, .table_width = 1024, DIA_DIMS, .int8 = 1,
     .layout = DSOPS_KV_SPLIT_INT8, .ci = 1},
    /* Edge and error cases: the test corrupts a needed block-table entry and expects DSOPS_ERR_INDEX with
     * every cache byte untouched */
    {.name = "v32_dia_edge_validate_before_write", .B = 2, .S = 2, .seqused = {300, 1000}, DIA_DIMS,
     .layout = DSOPS_KV_SPLIT_BF16, .ci = 1},
};

static void *dia_alloc(dsops_dia_problem *p, size_t bytes) { return ALLOC_OWNED(p, bytes); }

enum {
    STREAM_DIA_X = 61, STREAM_DIA_WQA = 62, STREAM_DIA_WQB = 63, STREAM_DIA_WUK = 64, STREAM_DIA_WKV = 65,
    STREAM_DIA_GAMMA = 66, STREAM_DIA_ROPE = 67, STREAM_DIA_IWQB = 68, STREAM_DIA_IWQB_SCALE = 69,
    STREAM_DIA_IWK = 70, STREAM_DIA_WPROJ = 71, STREAM_DIA_HAD = 72, STREAM_DIA_KV = 73, STREAM_DIA_IDXK = 74
};

const dsops_dia_case *dsops_dia_cases(int *count) { return CASES_TABLE(dia_cases, count); }
const dsops_dia_case *dsops_dia_case_find(const char *name) { return CASES_FIND(dia_cases, name); }
void dsops_dia_problem_free(dsops_dia_problem *p) { if (p) cases_problem_release(p->buffers, p->nbuffers, p); }

static int dia_tokens(const dsops_dia_case *c, int b)
{
    for (int i = 0; i < c->B; i++)
        if (c->S_each[i] != 0)
            return c->S_each[b];
    return c->S;
}

/* Every latent-cache row random, in the layout's format. */
static int dia_fill_kv(dsops_dia_problem *p, uint64_t seed)
{
    const dsops_dia_case *c = &p->c;
    const int64_t rows = p->NB * c->BS;
    const int Dc = c->Dc, Dr = 64, G = Dc / 128;
    dsops_sparse_attention_v32_args *a = &p->args;
    int64_t s3[3] = {p->NB, c->BS, 0};
    if (c->layout == DSOPS_KV_PACKED656) {
        uint8_t *kv = dia_alloc(p, (size_t)(rows * 656)); /* [NB, BS, 656] */
        if (!kv)
            return 0;
#pragma omp parallel for schedule(static)
        for (int64_t row = 0; row < rows; row++) {
            float v[512 + 64];
            rng r = cases_row_rng(seed, STREAM_DIA_KV, row);
            uint8_t *dst = kv + row * 656;
            cases_rng_uniform_pm1(&r, v, 512 + 64);
            for (int g = 0; g < 4; g++) {
                float s = quant_group(v + g * 128, (int8_t *)dst + g * 128, 128);
                uint32_t u;
                memcpy(&u, &s, 4);
                for (int k = 0; k < 4; k++)
                    dst[640 + 4 * g + k] = (uint8_t)(u >> (8 * k)); /* little-endian fp32 */
            }
            for (int k = 0; k < 64; k++) {
                uint16_t h = cases_bf16_bits(v[512 + k]);
                dst[512 + 2 * k] = (uint8_t)h; /* little-endian bf16 */
                dst[512 + 2 * k + 1] = (uint8_t)(h >> 8);
            }
        }
        s3[2] = 656;
        a->kv_packed = dsops_tensor_make(kv, DSOPS_UINT8, 3, s3);
        return 1;
    }
    uint16_t *rope = dia_alloc(p, sizeof(uint16_t) * (size_t)(rows * Dr)); /* [NB, BS, 64] bf16 */
    void *nope = dia_alloc(p, (c->layout == DSOPS_KV_SPLIT_BF16 ? 2 : 1) * (size_t)(rows * Dc)); /* [NB, BS, Dc] */
    float *scale = c->layout == DSOPS_KV_SPLIT_INT8 ? dia_alloc(p, sizeof(float) * (size_t)(rows * G)) : NULL;
    if (!rope || !nope || (c->layout == DSOPS_KV_SPLIT_INT8 && !scale))
        return 0;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        float v[MAX_ROW];
        rng r = cases_row_rng(seed, STREAM_DIA_KV, row);
        cases_rng_uniform_pm1(&r, v, (size_t)(Dc + Dr));
        if (scale) {
            for (int g = 0; g < G; g++)
                scale[row * G + g] = quant_group(v + g * 128, (int8_t *)nope + row * Dc + g * 128, 128);
        } else {
            for (int k = 0; k < Dc; k++)
                ((uint16_t *)nope)[row * Dc + k] = cases_bf16_bits(v[k]);
        }
        for (int k = 0; k < Dr; k++)
            rope[row * Dr + k] = cases_bf16_bits(v[Dc + k]);
    }
    s3[2] = Dr;
    a->kr_cache = dsops_tensor_make(rope, DSOPS_BF16, 3, s3);
    s3[2] = Dc;
    a->kv_cache = dsops_tensor_make(nope, scale ? DSOPS_INT8 : DSOPS_BF16, 3, s3);
    if (scale) {
        s3[2] = G;
        a->kv_scale_cache = dsops_tensor_make(scale, DSOPS_FP32, 3, s3);
    }
    return 1;
}

/* Every indexer-key row random: U(-1,1) bf16, or its Q8 with the scale in fp16. */
static int dia_fill_idx_cache(dsops_dia_problem *p, uint64_t seed)
{
    const dsops_dia_case *c = &p->c;
    const int64_t rows = p->NB * c->BS, DI = c->DI;
    int64_t s3[3] = {p->NB, c->BS, DI}, s2[2] = {p->NB, c->BS};
    if (!c->int8) {
        uint16_t *key = dia_alloc(p, sizeof(uint16_t) * (size_t)(rows * DI)); /* [NB, BS, DI] bf16 */
        if (!key)
            return 0;
        idxp_fill_bf16(seed, STREAM_DIA_IDXK, rows, DI, key);
        p->args.idx_k_cache = dsops_tensor_make(key, DSOPS_BF16, 3, s3);
        return 1;
    }
    int8_t *key = dia_alloc(p, (size_t)(rows * DI));                    /* [NB, BS, DI] int8 */
    uint16_t *scale = dia_alloc(p, sizeof(uint16_t) * (size_t)rows);    /* [NB, BS] fp16 */
    if (!key || !scale)
        return 0;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        float v[IDXP_MAX_ROW];
        rng r = cases_row_rng(seed, STREAM_DIA_IDXK, row);
        cases_rng_uniform_pm1(&r, v, (size_t)DI);
        float amax = 0.0f;
        for (int64_t k = 0; k < DI; k++)
            amax = fabsf(v[k]) > amax ? fabsf(v[k]) : amax;
        const float sq = 127.0f / amax; /* the draws are finite; an all-zero row gives q = 0, scale 0 */
        const int zero = amax == 0.0f || isinf(sq);
        for (int64_t k = 0; k < DI; k++)
            key[row * DI + k] = zero ? 0 : (int8_t)(int)rint_small(v[k] * sq);
        scale[row] = idxp_fp16_bits(zero ? 0.0f : 1.0f / sq);
    }
    p->args.idx_k_cache = dsops_tensor_make(key, DSOPS_INT8, 3, s3);
    p->args.idx_k_scale_cache = dsops_tensor_make(scale, DSOPS_FP16, 2, s2);
    return 1;
}

dsops_dia_problem *dsops_dia_problem_make(const dsops_dia_case *c, uint64_t seed)
{
    if (!c || c->B < 0 || c->B > 128 || c->H < 1 || c->H > MLAP_MAX_ROW || c->Q < 1 || c->Q > MLAP_MAX_ROW ||
        c->N < 1 || c->Dqn < 1 || c->Dc < 1 || c->Dc + 64 > MAX_ROW || c->NI < 1 || c->DI < 64 ||
        c->DI > IDXP_MAX_ROW || c->K < 1 || c->BS < 1 || c->table_width < 0 ||
        (c->layout != DSOPS_KV_SPLIT_BF16 && c->Dc % 128 != 0) || (c->layout == DSOPS_KV_PACKED656 && c->Dc != 512))
        return NULL;
    for (int b = 0; b < c->B; b++)
        if (dia_tokens(c, b) < 0 || c->seqused[b] < dia_tokens(c, b))
            return NULL;
    dsops_dia_problem *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->c = *c;
    rng r = {seed};
    const int64_t B = c->B, H = c->H, Q = c->Q, N = c->N, Dqn = c->Dqn, Dc = c->Dc, NI = c->NI, DI = c->DI,
                  K = c->K, BS = c->BS;
    const int64_t NG = N * (Dqn + 64), KV = Dc + 64, NQ = NI * DI;
    const int i8 = c->int8;
    int32_t *perm = NULL;
    dsops_sparse_attention_v32_args *a = &p->args;
    dsops_sparse_attention_v32_init(a, DSOPS_PRESET_V32);
    a->topk = c->K;
    a->kv_layout = c->layout;
    if (!i8)
        a->weights_scale = 1.0f;

    /* sequences, block table and cache_index */
    int64_t T = 0, NB = 0, MB = 1;
    for (int b = 0; b < B; b++) {
        int64_t nb = (c->seqused[b] + BS - 1) / BS;
        T += dia_tokens(c, b);
        NB += nb;
        MB = nb > MB ? nb : MB;
    }
    if (c->table_width > 0) {
        if (c->table_width < MB)
            goto fail;
        MB = c->table_width;
    }
    if (NB < 1)
        NB = 1;
    p->T = T;
    p->NB = NB;
    p->MB = MB;
    int32_t *cu = dia_alloc(p, sizeof(int32_t) * (size_t)(B + 1));  /* [B+1] */
    int32_t *su = dia_alloc(p, sizeof(int32_t) * (size_t)(B + 1));  /* [B] */
    int32_t *bt = dia_alloc(p, sizeof(int32_t) * (size_t)(B * MB + 1)); /* [B, MB] */
    int64_t *ci = dia_alloc(p, sizeof(int64_t) * (size_t)(T + 1));  /* [T] */
    perm = malloc(sizeof(int32_t) * (size_t)NB);
    if (!cu || !su || !bt || !ci || !perm)
        goto fail;
    for (int64_t i = 0; i < NB; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = NB - 1; i > 0; i--) {
        int64_t j = (int64_t)cases_rng_below(&r, (uint64_t)i + 1);
        int32_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    cu[0] = 0;
    for (int64_t b = 0, next = 0, t = 0; b < B; b++) {
        const int64_t nb = (c->seqused[b] + BS - 1) / BS, S = dia_tokens(c, (int)b);
        for (int64_t j = 0; j < MB; j++)
            bt[b * MB + j] = j < nb ? perm[next + j] : -1;
        next += nb;
        su[b] = c->seqused[b];
        cu[b + 1] = cu[b] + (int32_t)S;
        for (int64_t i = 0; i < S; i++, t++) {
            const int64_t pos = c->seqused[b] - S + i, L = pos + 1;
            ci[t] = (int64_t)bt[b * MB + pos / BS] * BS + pos % BS;
            p->visible += L;
            p->attended += L < K ? L : K;
        }
    }
    free(perm);
    perm = NULL;
    p->block_table = bt;

    /* weights and activations */
    const size_t qe = i8 ? 1 : 2;
    const int had = i8;
    uint16_t *x = dia_alloc(p, sizeof(uint16_t) * (size_t)(T * H));           /* [T, H] */
    uint16_t *wq_a = dia_alloc(p, sizeof(uint16_t) * (size_t)(Q * H));        /* [Q, H] */
    uint16_t *g_cq = dia_alloc(p, sizeof(uint16_t) * (size_t)Q);              /* [Q] */
    void *wq_b = dia_alloc(p, qe * (size_t)(NG * Q));                         /* [NG, Q] */
    float *wq_b_scale = i8 ? dia_alloc(p, sizeof(float) * (size_t)NG) : NULL; /* [NG] */
    uint16_t *w_uk = dia_alloc(p, sizeof(uint16_t) * (size_t)(N * Dqn * Dc)); /* [N, Dqn, Dc] */
    uint16_t *wkv_a = dia_alloc(p, sizeof(uint16_t) * (size_t)(KV * H));      /* [Dc+64, H] */
    uint16_t *g_ckv = dia_alloc(p, sizeof(uint16_t) * (size_t)Dc);            /* [Dc] */
    uint16_t *cosb = dia_alloc(p, sizeof(uint16_t) * (size_t)(T * 64));       /* [T, 64] */
    uint16_t *sinb = dia_alloc(p, sizeof(uint16_t) * (size_t)(T * 64));       /* [T, 64] */
    void *iwq_b = dia_alloc(p, qe * (size_t)(NQ * Q));                        /* [NI*DI, Q] */
    float *iwq_b_scale = i8 ? dia_alloc(p, sizeof(float) * (size_t)NQ) : NULL; /* [NI*DI] */
    uint16_t *iwk = dia_alloc(p, sizeof(uint16_t) * (size_t)(DI * H));        /* [DI, H] */
    uint16_t *wproj = dia_alloc(p, sizeof(uint16_t) * (size_t)(NI * H));      /* [NI, H] */
    uint16_t *ln_g = dia_alloc(p, sizeof(uint16_t) * (size_t)DI);             /* [DI] */
    uint16_t *ln_b = dia_alloc(p, sizeof(uint16_t) * (size_t)DI);             /* [DI] */
    uint16_t *hq = had ? dia_alloc(p, sizeof(uint16_t) * (size_t)(DI * DI)) : NULL; /* [DI, DI] */
    uint16_t *hk = had ? dia_alloc(p, sizeof(uint16_t) * (size_t)(DI * DI)) : NULL; /* [DI, DI] */
    if (!x || !wq_a || !g_cq || !wq_b || !w_uk || !wkv_a || !g_ckv || !cosb || !sinb || !iwq_b || !iwk || !wproj ||
        !ln_g || !ln_b || (i8 && (!wq_b_scale || !iwq_b_scale)) || (had && (!hq || !hk)))
        goto fail;
    cases_fill_bf16(seed, STREAM_DIA_X, T, H, 1.0f, x);
    cases_fill_bf16(seed, STREAM_DIA_WQA, Q, H, 0.1f, wq_a);
    if (i8)
        cases_fill_q8_bf16(seed, STREAM_DIA_WQB, NG, Q, 0.1f, wq_b, wq_b_scale);
    else
        cases_fill_bf16(seed, STREAM_DIA_WQB, NG, Q, 0.1f, wq_b);
    cases_fill_bf16(seed, STREAM_DIA_WUK, N * Dqn, Dc, 0.1f, w_uk);
    cases_fill_bf16(seed, STREAM_DIA_WKV, KV, H, 0.1f, wkv_a);
    cases_fill_bf16(seed, STREAM_DIA_GAMMA, 1, Q, 1.0f, g_cq);
    cases_fill_bf16(seed ^ 0x5555u, STREAM_DIA_GAMMA, 1, Dc, 1.0f, g_ckv);
    cases_fill_bf16(seed, STREAM_DIA_ROPE, T, 64, 0.1f, cosb);
    cases_fill_bf16(seed ^ 0x5555u, STREAM_DIA_ROPE, T, 64, 0.1f, sinb);
    if (i8) {
        idxp_fill_i8(seed, STREAM_DIA_IWQB, NQ, Q, iwq_b);
        idxp_fill_f32(seed, STREAM_DIA_IWQB_SCALE, NQ, iwq_b_scale);
    } else {
        idxp_fill_bf16(seed, STREAM_DIA_IWQB, NQ, Q, iwq_b);
    }
    idxp_fill_bf16(seed, STREAM_DIA_IWK, DI, H, iwk);
    idxp_fill_bf16(seed, STREAM_DIA_WPROJ, NI, H, wproj);
    for (int64_t d = 0; d < DI; d++) {
        ln_g[d] = cases_bf16_bits(1.0f);
        ln_b[d] = cases_bf16_bits(0.0f);
    }
    int64_t s1[1], s2[2], s3[3];
    if (had) {
        s2[0] = DI, s2[1] = DI;
        a->hadamard_q = dsops_tensor_make(hq, DSOPS_BF16, 2, s2);
        a->hadamard_k = dsops_tensor_make(hk, DSOPS_BF16, 2, s2);
        if ((DI & (DI - 1)) == 0) {
            if (dsops_hadamard_matrix(NULL, &a->hadamard_q) != DSOPS_OK || dsops_hadamard_matrix(NULL, &a->hadamard_k) != DSOPS_OK)
                goto fail;
        } else {
            idxp_fill_bf16(seed, STREAM_DIA_HAD, DI, DI, hq);
            idxp_fill_bf16(seed ^ 0x5555u, STREAM_DIA_HAD, DI, DI, hk);
        }
    }
    if (!dia_fill_kv(p, seed) || !dia_fill_idx_cache(p, seed))
        goto fail;

    /* outputs */
    uint16_t *out = dia_alloc(p, sizeof(uint16_t) * (size_t)(T * N * Dc)); /* [T, N, Dc] bf16 */
    int32_t *topk = dia_alloc(p, sizeof(int32_t) * (size_t)(T * K));        /* [T, K] */
    float *lse = dia_alloc(p, sizeof(float) * (size_t)(T * N));             /* [T, N] */
    if (!out || !topk || !lse)
        goto fail;

    const dsops_dtype wdt = i8 ? DSOPS_INT8 : DSOPS_BF16;
    s2[0] = T, s2[1] = H;
    a->x = dsops_tensor_make(x, DSOPS_BF16, 2, s2);
    s1[0] = B + 1;
    a->cu_seqlens_q = dsops_tensor_make(cu, DSOPS_INT32, 1, s1);
    s1[0] = B;
    a->seqused_kv = dsops_tensor_make(su, DSOPS_INT32, 1, s1);
    s2[0] = B, s2[1] = MB;
    a->block_table = dsops_tensor_make(bt, DSOPS_INT32, 2, s2);
    s1[0] = T;
    a->cache_index = dsops_tensor_make(ci, DSOPS_INT64, 1, s1);
    s2[0] = T, s2[1] = 64;
    a->rope_cos = dsops_tensor_make(cosb, DSOPS_BF16, 2, s2);
    a->rope_sin = dsops_tensor_make(sinb, DSOPS_BF16, 2, s2);
    s2[0] = Q, s2[1] = H;
    a->wq_a = dsops_tensor_make(wq_a, DSOPS_BF16, 2, s2);
    s1[0] = Q;
    a->gamma_cq = dsops_tensor_make(g_cq, DSOPS_BF16, 1, s1);
    s2[0] = NG, s2[1] = Q;
    a->wq_b = dsops_tensor_make(wq_b, wdt, 2, s2);
    s1[0] = NG;
    if (i8)
        a->wq_b_scale = dsops_tensor_make(wq_b_scale, DSOPS_FP32, 1, s1);
    s3[0] = N, s3[1] = Dqn, s3[2] = Dc;
    a->w_uk = dsops_tensor_make(w_uk, DSOPS_BF16, 3, s3);
    s2[0] = KV, s2[1] = H;
    a->wkv_a = dsops_tensor_make(wkv_a, DSOPS_BF16, 2, s2);
    s1[0] = Dc;
    a->gamma_ckv = dsops_tensor_make(g_ckv, DSOPS_BF16, 1, s1);
    s2[0] = NQ, s2[1] = Q;
    a->idx_wq_b = dsops_tensor_make(iwq_b, wdt, 2, s2);
    s1[0] = NQ;
    if (i8)
        a->idx_wq_b_scale = dsops_tensor_make(iwq_b_scale, DSOPS_FP32, 1, s1);
    s2[0] = DI, s2[1] = H;
    a->idx_wk = dsops_tensor_make(iwk, DSOPS_BF16, 2, s2);
    s2[0] = NI, s2[1] = H;
    a->weights_proj = dsops_tensor_make(wproj, DSOPS_BF16, 2, s2);
    s1[0] = DI;
    a->ln_gamma_k = dsops_tensor_make(ln_g, DSOPS_BF16, 1, s1);
    a->ln_beta_k = dsops_tensor_make(ln_b, DSOPS_BF16, 1, s1);
    s3[0] = T, s3[1] = N, s3[2] = Dc;
    a->out = dsops_tensor_make(out, DSOPS_BF16, 3, s3);
    s2[0] = T, s2[1] = K;
    a->topk_indices = dsops_tensor_make(topk, DSOPS_INT32, 2, s2);
    s2[0] = T, s2[1] = N;
    a->lse = dsops_tensor_make(lse, DSOPS_FP32, 2, s2);

    /* work counters */
    const double Td = (double)T;
    p->flops_mla = 2.0 * Td * ((double)H * Q + (double)Q * NG + (double)N * Dqn * Dc + (double)H * KV);
    p->flops_idx = 2.0 * Td * ((double)Q * NQ + (double)H * DI + (double)H * NI) +
                   (had ? 2.0 * Td * (double)(NI + 1) * DI * DI : 0.0);
    p->flops_li = 2.0 * (double)NI * DI * (double)p->visible;
    p->flops_sfa = 2.0 * (double)N * (double)p->attended * (double)(Dc + 64 + Dc);
    p->flops = p->flops_mla + p->flops_idx + p->flops_li + p->flops_sfa;
    p->weight_bytes = 2.0 * (double)Q * H + (i8 ? 1.0 + 4.0 / (double)Q : 2.0) * (double)NG * Q +
                      2.0 * (double)N * Dqn * Dc + 2.0 * (double)KV * H + (i8 ? 1.0 + 4.0 / (double)Q : 2.0) * NQ * Q +
                      2.0 * (double)DI * H + 2.0 * (double)NI * H + (had ? 4.0 * (double)DI * DI : 0.0);
    const double kv_row = c->layout == DSOPS_KV_SPLIT_BF16   ? 2.0 * (double)KV
                          : c->layout == DSOPS_KV_SPLIT_INT8 ? (double)Dc + 4.0 * (double)(Dc / 128) + 128.0
                                                             : 656.0;
    p->cache_bytes = (double)p->visible * (i8 ? (double)DI + 2.0 : 2.0 * (double)DI) + (double)p->attended * kv_row;
    return p;

fail:
    free(perm);
    dsops_dia_problem_free(p);
    return NULL;
}

/* ---- the four stages of one fused call ---------------------------------------------------------- */

static void *dia_stage_alloc(dsops_dia_stages *s, size_t bytes) { return ALLOC_OWNED(s, bytes); }

void dsops_dia_stages_free(dsops_dia_stages *s)
{
    if (!s)
        return;
    cases_free_owned(s->buffers, s->nbuffers);
    free(s);
}

dsops_dia_stages *dsops_dia_stages_make(const dsops_sparse_attention_v32_args *a)
{
    if (!a || !a->x.data || !a->wq_a.data || !a->wq_b.data || !a->w_uk.data || !a->idx_wq_b.data || !a->idx_wk.data ||
        a->x.ndim != 2 || a->wq_a.ndim != 2 || a->w_uk.ndim != 3 || a->idx_wk.ndim != 2 || a->idx_wq_b.ndim != 2 ||
        a->topk < 1 || a->idx_wk.shape[0] < 1)
        return NULL;
    dsops_dia_stages *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    const int64_t T = a->x.shape[0], N = a->w_uk.shape[0], Dc = a->w_uk.shape[2], Q = a->wq_a.shape[0],
                  DI = a->idx_wk.shape[0], NI = a->idx_wq_b.shape[0] / DI, K = a->topk;
    const int i8 = a->wq_b.dtype == DSOPS_INT8;
    const dsops_dtype act = i8 ? DSOPS_INT8 : DSOPS_BF16;
    const size_t ae = i8 ? 1 : 2;
    void *q_nope = dia_stage_alloc(s, 2 * (size_t)(T * N * Dc));   /* [T, N, Dc] bf16 */
    void *q_rope = dia_stage_alloc(s, 2 * (size_t)(T * N * 64));   /* [T, N, 64] bf16 */
    void *qr = dia_stage_alloc(s, ae * (size_t)(T * Q));            /* [T, Q] */
    void *qr_scale = dia_stage_alloc(s, 4 * (size_t)T);             /* [T] fp32 (int8) */
    void *q_idx = dia_stage_alloc(s, ae * (size_t)(T * NI * DI));   /* [T, NI, DI] */
    void *q_idx_scale = dia_stage_alloc(s, 2 * (size_t)(T * NI));   /* [T, NI] fp16 (int8) */
    void *weights = dia_stage_alloc(s, 2 * (size_t)(T * NI));       /* [T, NI] fp16 / bf16 */
    void *topk = dia_stage_alloc(s, 4 * (size_t)(T * K));           /* [T, K] int32 */
    if (!q_nope || !q_rope || !qr || !qr_scale || !q_idx || !q_idx_scale || !weights || !topk) {
        dsops_dia_stages_free(s);
        return NULL;
    }
    int64_t sqn[3] = {T, N, Dc}, sqr[3] = {T, N, 64}, sq[2] = {T, Q}, st1[1] = {T}, sqi[3] = {T, NI, DI},
            sni[2] = {T, NI}, sk[2] = {T, K};
    dsops_tensor t_q_nope = dsops_tensor_make(q_nope, DSOPS_BF16, 3, sqn);
    dsops_tensor t_q_rope = dsops_tensor_make(q_rope, DSOPS_BF16, 3, sqr);
    dsops_tensor t_qr = dsops_tensor_make(qr, act, 2, sq);
    dsops_tensor t_qr_scale = i8 ? dsops_tensor_make(qr_scale, DSOPS_FP32, 1, st1) : (dsops_tensor){0};
    dsops_tensor t_q_idx = dsops_tensor_make(q_idx, act, 3, sqi);
    dsops_tensor t_q_idx_scale = i8 ? dsops_tensor_make(q_idx_scale, DSOPS_FP16, 2, sni) : (dsops_tensor){0};
    dsops_tensor t_weights = dsops_tensor_make(weights, i8 ? DSOPS_FP16 : DSOPS_BF16, 2, sni);
    dsops_tensor t_topk = dsops_tensor_make(topk, DSOPS_INT32, 2, sk);

    dsops_mla_prolog_v32_args *m = &s->mla;
    dsops_mla_prolog_v32_init(m, DSOPS_PRESET_V32);
    m->x = a->x;
    m->wq_a = a->wq_a;
    m->gamma_cq = a->gamma_cq;
    m->wq_b = a->wq_b;
    m->wq_b_scale = a->wq_b_scale;
    m->w_uk = a->w_uk;
    m->wkv_a = a->wkv_a;
    m->gamma_ckv = a->gamma_ckv;
    m->rope_cos = a->rope_cos;
    m->rope_sin = a->rope_sin;
    m->cache_index = a->cache_index;
    m->kv_cache = a->kv_cache;
    m->kv_scale_cache = a->kv_scale_cache;
    m->kr_cache = a->kr_cache;
    m->kv_packed = a->kv_packed;
    m->q_nope = t_q_nope;
    m->q_rope = t_q_rope;
    m->qr = t_qr;
    m->qr_scale = t_qr_scale;
    m->eps_cq = a->mla_eps_cq;
    m->eps_ckv = a->mla_eps_ckv;
    m->rope_mode = a->mla_rope_mode;
    m->rope_inverse = a->mla_rope_inverse;
    m->kv_layout = a->kv_layout;
    m->prepared = NULL;

    dsops_indexer_prolog_v32_args *ip = &s->idx;
    dsops_indexer_prolog_v32_init(ip, DSOPS_PRESET_V32);
    ip->x = a->x;
    ip->qr = t_qr;
    ip->qr_scale = t_qr_scale;
    ip->idx_wq_b = a->idx_wq_b;
    ip->idx_wq_b_scale = a->idx_wq_b_scale;
    ip->idx_wk = a->idx_wk;
    ip->weights_proj = a->weights_proj;
    ip->ln_gamma_k = a->ln_gamma_k;
    ip->ln_beta_k = a->ln_beta_k;
    ip->rope_cos = a->rope_cos;
    ip->rope_sin = a->rope_sin;
    ip->hadamard_q = a->hadamard_q;
    ip->hadamard_k = a->hadamard_k;
    ip->cache_index = a->cache_index;
    ip->idx_k_cache = a->idx_k_cache;
    ip->idx_k_scale_cache = a->idx_k_scale_cache;
    ip->q_idx = t_q_idx;
    ip->q_idx_scale = t_q_idx_scale;
    ip->weights = t_weights;
    ip->ln_eps = a->idx_ln_eps;
    ip->weights_scale = a->weights_scale;
    ip->rope_mode = a->idx_rope_mode;
    ip->rope_inverse = a->idx_rope_inverse;
    ip->prepared = NULL;

    dsops_lightning_indexer_args *li = &s->li;
    dsops_lightning_indexer_init(li, DSOPS_PRESET_V32);
    li->q_idx = t_q_idx;
    li->q_idx_scale = t_q_idx_scale;
    li->weights = t_weights;
    li->key_cache = a->idx_k_cache;
    li->key_scale_cache = a->idx_k_scale_cache;
    li->block_table = a->block_table;
    li->cu_seqlens_q = a->cu_seqlens_q;
    li->seqused_kv = a->seqused_kv;
    li->topk_indices = t_topk;
    li->cmp_ratio = 1;

    dsops_sparse_flash_attention_v32_args *f = &s->sfa;
    dsops_sparse_flash_attention_v32_init(f, DSOPS_PRESET_V32);
    f->q_nope = t_q_nope;
    f->q_rope = t_q_rope;
    f->key_nope = a->kv_cache;
    f->key_nope_scale = a->kv_scale_cache;
    f->key_rope = a->kr_cache;
    f->kv_packed = a->kv_packed;
    f->topk_indices = t_topk;
    f->block_table = a->block_table;
    f->cu_seqlens_q = a->cu_seqlens_q;
    f->seqused_kv = a->seqused_kv;
    f->out = a->out;
    f->lse = a->lse;
    f->softmax_scale = a->softmax_scale;
    f->p_mode = a->p_mode;
    f->p_tile = a->p_tile;
    f->kv_layout = a->kv_layout;
    return s;
}
