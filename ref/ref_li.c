/* Reference oracle of lightning_indexer (docs/OPERATORS.md §3.6, V3.2 configuration §4.3, top-k §2.9).
 *
 * Plain loops, one query token at a time:
 *   1. n = floor(max(L, 0) / cmp_ratio) visible keys (§1.4),
 *   2. the score I[j] of every visible key j, with the rounding points of §3.6:
 *        int8:  ws_h = fp16(f32(q_idx_scale) * f32(weights))          (the product is exact in fp32)
 *               d_hj = fp16(f32(max(dot_hj, 0)) * 2^-11)              (exact integer dot)
 *               I[j] = (sum_h f32(ws_h) * f32(d_hj), h ascending) * f32(key_scale[j])
 *        bf16:  I[j] = sum_h max(dot_hj, 0) * f32(weights[h]), h ascending, each dot an fp32 sum over
 *               d ascending
 *        fp8:   as bf16 on the e4m3 values (weights fp32), then the sum times the key's fp32 scale
 *   3. the top-k by a full sort of (score, index) pairs: larger score first, NaN below every number,
 *      -0 == +0, equal scores by increasing index; -1 / -Inf padding,
 *   4. when requested, the logits row: I[0 .. n-1], then -Inf.
 *
 * Every tensor is read through its strides (in elements). The only liberty taken with loop order is in
 * the bf16 dot products, where the sums of all heads run side by side (d outer, h inner); each sum is
 * still accumulated in ascending d. Tokens are independent, so they are spread over OpenMP threads;
 * each token's result does not depend on the thread that computes it. Built with -ffp-contract=off. */
#include <math.h>
#include <stdlib.h>

#include "ref.h"
#include "ref_util.h"

/* ---- number formats (spec §2.1) ---------------------------------------------------------------- */

uint16_t dsops_ref_fp16_from_f32(float f)
{
    const uint32_t u = ref_bits_from_f32(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)                               /* NaN: quiet, top payload bits kept */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x03ffu));
    if (a >= 0x477ff000u)                              /* |f| >= 65520 (and Inf): rounds to Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {                             /* below 2^-14: an fp16 subnormal (or 0 / 2^-14) */
        /* |f| * 2^24 is exact and < 1024; rounding it to an integer (ties to even) by adding and
         * removing 2^23 gives the subnormal's significand; 1024 is the smallest normal, 0x0400 */
        const float big = 8388608.0f;
        float m = ref_f32_from_bits(a) * 16777216.0f;
        float r = (m + big) - big;
        return (uint16_t)(sign | (uint16_t)r);
    }
    /* normal: drop 13 significand bits, rebias the exponent by 127 - 15, round to nearest even (a carry
     * out of the significand moves into the exponent, which is the right result) */
    uint32_t h = (a >> 13) - ((uint32_t)(127 - 15) << 10);
    const uint32_t rest = a & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

float dsops_ref_f32_from_fp16(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x03ffu;
    if (e == 0) {                                      /* zero or subnormal: m * 2^-24, exact */
        float v = (float)m * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (e == 31)                                       /* Inf or NaN */
        return ref_f32_from_bits(sign | 0x7f800000u | (m << 13));
    return ref_f32_from_bits(sign | ((e + 127 - 15) << 23) | (m << 13));
}

static float round_fp16(float f) { return dsops_ref_f32_from_fp16(dsops_ref_fp16_from_f32(f)); }

/* ---- scores of one token ------------------------------------------------------------------------- */

/* Sequence b holding token t: cu_seqlens_q[b] <= t < cu_seqlens_q[b+1] (empty sequences skipped). */
static int64_t seq_of_token(const dsops_lightning_indexer_args *a, int64_t t)
{
    const int64_t B = a->seqused_kv.shape[0];               /* seqused_kv [B], cu_seqlens_q [B+1] */
    for (int64_t b = 0; b < B; b++)
        if (t < ref_get_i32(&a->cu_seqlens_q, b + 1, 0, 0))
            return b;
    return B - 1;
}

/* Visible keys of token t of sequence b (§3.6: n_t = floor(max(L_t, 0) / cmp_ratio)). */
static int64_t visible_keys(const dsops_lightning_indexer_args *a, int64_t b, int64_t t)
{
    const int64_t t0 = ref_get_i32(&a->cu_seqlens_q, b, 0, 0);
    const int64_t S_b = ref_get_i32(&a->cu_seqlens_q, b + 1, 0, 0) - t0;
    const int64_t L = (int64_t)ref_get_i32(&a->seqused_kv, b, 0, 0) - (S_b - 1 - (t - t0));
    return (L > 0 ? L : 0) / a->cmp_ratio;
}

/* Scratch of one token: the token's query rows in the layout its variant wants, and one key row. */
typedef struct li_scratch {
    int16_t *q8;   /* [NI, DI] int8 query values (int8 variant) */
    float *ws;     /* [NI] f32(ws_h) (int8) or f32(weights) (bf16) */
    int16_t *k8;   /* [DI] one int8 key row */
    float *qT;     /* [DI, NI] bf16 / e4m3 queries as fp32, transposed (bf16 and fp8 variants) */
    float *kf;     /* [DI] one bf16 / e4m3 key row as fp32 */
    float *acc;    /* [NI] running dot products, one per head */
} li_scratch;

static void scratch_alloc(li_scratch *s, int64_t NI, int64_t DI)
{
    s->q8 = ref_alloc(sizeof(int16_t) * (size_t)(NI * DI));
    s->ws = ref_alloc(sizeof(float) * (size_t)NI);
    s->k8 = ref_alloc(sizeof(int16_t) * (size_t)DI);
    s->qT = ref_alloc(sizeof(float) * (size_t)(NI * DI));
    s->kf = ref_alloc(sizeof(float) * (size_t)DI);
    s->acc = ref_alloc(sizeof(float) * (size_t)NI);
}

static void scratch_free(li_scratch *s)
{
    free(s->q8);
    free(s->ws);
    free(s->k8);
    free(s->qT);
    free(s->kf);
    free(s->acc);
}

/* I[0 .. n-1] of token t (sequence b); returns n. */
static int64_t token_scores(const dsops_lightning_indexer_args *a, int64_t b, int64_t t, li_scratch *s, float *I)
{
    const int64_t NI = a->q_idx.shape[1];                   /* q_idx [T, NI, DI] */
    const int64_t DI = a->q_idx.shape[2];
    const int64_t BS = a->key_cache.shape[1];               /* key_cache [NB, BS, DI] */
    const int is_int8 = a->q_idx.dtype == DSOPS_INT8;
    const int64_t n = visible_keys(a, b, t);

    if (is_int8) {
        for (int64_t h = 0; h < NI; h++) {
            for (int64_t d = 0; d < DI; d++)
                s->q8[h * DI + d] = ref_get_i8(&a->q_idx, t, h, d);
            /* ws_h = fp16(f32(q_idx_scale[t,h]) * f32(weights[t,h])): both fp16, product exact in fp32 */
            float qs = ref_get_f(&a->q_idx_scale, t, h, 0);        /* q_idx_scale [T, NI] fp16 */
            float w = ref_get_f(&a->weights, t, h, 0);             /* weights [T, NI] fp16 */
            s->ws[h] = round_fp16(qs * w);
        }
    } else {
        for (int64_t h = 0; h < NI; h++) {
            for (int64_t d = 0; d < DI; d++)
                s->qT[d * NI + h] = ref_get_f(&a->q_idx, t, h, d); /* q_idx [T, NI, DI] bf16 / e4m3 */
            s->ws[h] = ref_get_f(&a->weights, t, h, 0);            /* weights [T, NI] bf16 / fp32 */
        }
    }

    for (int64_t j = 0; j < n; j++) {
        const int64_t blk = ref_get_i32(&a->block_table, b, j / BS, 0); /* block_table [B, MB]; row slot(b, j) */
        const int64_t off = j % BS;
        float sum = 0.0f;
        if (is_int8) {
            for (int64_t d = 0; d < DI; d++)
                s->k8[d] = ref_get_i8(&a->key_cache, blk, off, d);
            for (int64_t h = 0; h < NI; h++) {
                const int16_t *q = s->q8 + h * DI;
                int64_t dot = 0; /* exact: int32 partial sums of at most 2^16 products (|p| <= 2^30) */
                for (int64_t d0 = 0; d0 < DI; d0 += 65536) {
                    const int64_t d1 = d0 + 65536 < DI ? d0 + 65536 : DI;
                    int32_t part = 0;
                    for (int64_t d = d0; d < d1; d++)
                        part += (int32_t)q[d] * (int32_t)s->k8[d];
                    dot += part;
                }
                float dh = round_fp16((float)(dot > 0 ? dot : 0) * 0x1p-11f);
                sum += s->ws[h] * dh;
            }
            sum *= ref_get_f(&a->key_scale_cache, blk, off, 0); /* [NB, BS] fp16 */
        } else {
            for (int64_t d = 0; d < DI; d++)
                s->kf[d] = ref_get_f(&a->key_cache, blk, off, d);
            for (int64_t h = 0; h < NI; h++)
                s->acc[h] = 0.0f;
            for (int64_t d = 0; d < DI; d++)
                for (int64_t h = 0; h < NI; h++)
                    s->acc[h] += s->qT[d * NI + h] * s->kf[d];
            for (int64_t h = 0; h < NI; h++) {
                float dot = s->acc[h];
                float r = dot < 0.0f ? 0.0f : dot;           /* max(dot, 0); -0 and +0 alike, NaN kept */
                sum += r * s->ws[h];
            }
            if (a->q_idx.dtype == DSOPS_FP8_E4M3)
                sum *= ref_get_f(&a->key_scale_cache, blk, off, 0); /* [NB, BS] fp32 */
        }
        I[j] = sum;
    }
    return n;
}

int64_t dsops_ref_lightning_indexer_scores(const dsops_lightning_indexer_args *a, int64_t t, float *scores)
{
    li_scratch s;
    scratch_alloc(&s, a->q_idx.shape[1], a->q_idx.shape[2]);
    int64_t n = token_scores(a, seq_of_token(a, t), t, &s, scores);
    scratch_free(&s);
    return n;
}

/* ---- top-k (spec §2.9) --------------------------------------------------------------------------- */

typedef struct li_entry {
    float score;
    int32_t index;
} li_entry;

int dsops_ref_topk_before(float sa, int64_t ia, float sb, int64_t ib)
{
    const int na = isnan(sa), nb = isnan(sb);
    if (na != nb)
        return nb;                  /* a number ranks above NaN */
    if (!na && sa != sb)            /* -0 == +0 compare equal here */
        return sa > sb;
    return ia < ib;                 /* equal scores (or both NaN): lower index first */
}

static int entry_cmp(const void *pa, const void *pb)
{
    const li_entry *x = pa, *y = pb;
    if (x->index == y->index)
        return 0;
    return dsops_ref_topk_before(x->score, x->index, y->score, y->index) ? -1 : 1;
}

/* ---- the operator ----------------------------------------------------------------------------- */

void dsops_ref_lightning_indexer(const dsops_lightning_indexer_args *a)
{
    const int64_t T = a->q_idx.shape[0];                    /* q_idx [T, NI, DI] */
    const int64_t NI = a->q_idx.shape[1];
    const int64_t DI = a->q_idx.shape[2];
    const int64_t K = a->topk_indices.shape[1];             /* topk_indices [T, K] int32 */
    const int64_t B = a->seqused_kv.shape[0];
    const int has_scores = a->topk_scores.data != NULL;     /* topk_scores [T, K] fp32 (optional) */

    /* token -> sequence */
    int64_t *seq = ref_alloc(sizeof(int64_t) * (size_t)(T > 0 ? T : 1));
    int64_t nmax = 0;
    for (int64_t b = 0; b < B; b++) {
        const int64_t t0 = ref_get_i32(&a->cu_seqlens_q, b, 0, 0);
        const int64_t t1 = ref_get_i32(&a->cu_seqlens_q, b + 1, 0, 0);
        for (int64_t t = t0; t < t1; t++) {
            seq[t] = b;
            int64_t n = visible_keys(a, b, t);
            nmax = n > nmax ? n : nmax;
        }
    }

#pragma omp parallel
    {
        li_scratch s;
        scratch_alloc(&s, NI, DI);
        float *I = ref_alloc(sizeof(float) * (size_t)(nmax > 0 ? nmax : 1));         /* [n] scores */
        li_entry *e = ref_alloc(sizeof(li_entry) * (size_t)(nmax > 0 ? nmax : 1));   /* [n] to sort */
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < T; t++) {
            const int64_t n = token_scores(a, seq[t], t, &s, I);
            for (int64_t j = 0; j < n; j++) {
                e[j].score = I[j];
                e[j].index = (int32_t)j;
            }
            qsort(e, (size_t)n, sizeof *e, entry_cmp);
            const int64_t m = n < K ? n : K;
            for (int64_t k = 0; k < K; k++) {
                int32_t idx = k < m ? e[k].index : -1;
                float sc = k < m ? e[k].score : -INFINITY;
                ref_put_i32(&a->topk_indices, t, k, 0, idx);
                if (has_scores)
                    ref_put_f32(&a->topk_scores, t, k, 0, sc);
            }
            if (a->logits.data)                                 /* logits [T, LMAX] fp32 (optional) */
                for (int64_t j = 0; j < a->logits.shape[1]; j++)
                    ref_put_f32(&a->logits, t, j, 0, j < n ? I[j] : -INFINITY);
        }
        free(I);
        free(e);
        scratch_free(&s);
    }
    free(seq);
}
