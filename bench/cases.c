/* Named sparse_flash_attention_v32 cases of spec/CASES.md and their data generators.
 *
 * Data (CASES.md, "sparse_flash_attention_v32", seed 42):
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

/* ---- the case table ------------------------------------------------------------------------------ */

#define REP4(x) x, x, x, x
#define REP8(x) REP4(x), REP4(x)
#define REP16(x) REP8(x), REP8(x)
#define REP64(x) REP16(x), REP16(x), REP16(x), REP16(x)

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

const dsops_sfa_case *dsops_sfa_cases(int *count)
{
    if (count)
        *count = (int)(sizeof sfa_cases / sizeof sfa_cases[0]);
    return sfa_cases;
}

const dsops_sfa_case *dsops_sfa_case_find(const char *name)
{
    int n;
    const dsops_sfa_case *c = dsops_sfa_cases(&n);
    for (int i = 0; name && i < n; i++)
        if (strcmp(c[i].name, name) == 0)
            return &c[i];
    return NULL;
}

/* ---- generator ----------------------------------------------------------------------------------- */

/* splitmix64: fast, seedable, good enough for test data */
typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Fills v[0 .. n-1] with U(-1, 1) fp32 values, two 24-bit draws per 64-bit output. */
static void rng_uniform_pm1(rng *r, float *v, size_t n)
{
    const float k = 1.0f / 16777216.0f;
    size_t i = 0;
    for (; i + 1 < n; i += 2) {
        uint64_t x = rng_next(r);
        v[i] = (float)(x >> 40) * k * 2.0f - 1.0f;
        v[i + 1] = (float)((x >> 16) & 0xffffffu) * k * 2.0f - 1.0f;
    }
    if (i < n)
        v[i] = (float)(rng_next(r) >> 40) * k * 2.0f - 1.0f;
}

static uint64_t rng_below(rng *r, uint64_t n) { return rng_next(r) % n; }

static uint16_t bf16_bits(float f)
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

static void *problem_alloc(dsops_sfa_problem *p, size_t bytes)
{
    if (p->nbuffers >= (int)(sizeof p->buffers / sizeof p->buffers[0]))
        return NULL;
    void *m = calloc(1, bytes ? bytes : 1);
    if (m)
        p->buffers[p->nbuffers++] = m;
    return m;
}

void dsops_sfa_problem_free(dsops_sfa_problem *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->nbuffers; i++)
        free(p->buffers[i]);
    free(p);
}

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

static rng row_rng(uint64_t seed, uint64_t stream, int64_t row)
{
    rng r = {seed ^ (stream << 56) ^ ((uint64_t)row * 0xd1b54a32d192ed03ull)};
    rng_next(&r); /* decorrelate neighbouring rows */
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
            rng r = row_rng(seed, STREAM_CACHE, row);
            uint8_t *dst = kv + row * 656;
            rng_uniform_pm1(&r, v, (size_t)(Dc + Dr));
            for (int g = 0; g < 4; g++) {
                float s = quant_group(v + g * 128, (int8_t *)dst + g * 128, 128);
                uint32_t u;
                memcpy(&u, &s, 4);
                for (int k = 0; k < 4; k++)
                    dst[640 + 4 * g + k] = (uint8_t)(u >> (8 * k)); /* little-endian fp32 */
            }
            for (int k = 0; k < 64; k++) {
                uint16_t h = bf16_bits(v[512 + k]);
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
            rng r = row_rng(seed, STREAM_CACHE, row);
            rng_uniform_pm1(&r, v, (size_t)(Dc + Dr));
            for (int k = 0; k < Dc; k++)
                nope[row * Dc + k] = bf16_bits(v[k]);
            for (int k = 0; k < Dr; k++)
                rope[row * Dr + k] = bf16_bits(v[Dc + k]);
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
            rng r = row_rng(seed, STREAM_CACHE, row);
            rng_uniform_pm1(&r, v, (size_t)(Dc + Dr));
            for (int g = 0; g < G; g++)
                scale[row * G + g] = quant_group(v + g * 128, nope + row * Dc + g * 128, 128);
            for (int k = 0; k < Dr; k++)
                rope[row * Dr + k] = bf16_bits(v[Dc + k]);
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
        int64_t j = (int64_t)rng_below(&r, (uint64_t)i + 1);
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
        rng rq = row_rng(seed, STREAM_Q, th);
        rng_uniform_pm1(&rq, qv, (size_t)(Dc + Dr));
        for (int k = 0; k < Dc; k++)
            qn[th * Dc + k] = bf16_bits(qv[k]);
        for (int k = 0; k < Dr; k++)
            qr[th * Dr + k] = bf16_bits(qv[Dc + k]);
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
                int32_t k = j + (int32_t)rng_below(&r, (uint64_t)(used - j));
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
