#include "li_problem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "problem_common.h"
#include "ref.h"
#include "test_util.h"

static uint16_t h16(float f) { return dsops_ref_fp16_from_f32(f); }

#define FP16_NAN ((uint16_t)0x7e00)

/* ---- building ---------------------------------------------------------------------------------------- */

/* integer in [-2, 2] from a pattern and a position: the value tables of the exact (tie) modes */
static int small_value(uint64_t pattern, int64_t pos)
{
    uint64_t h = (pattern + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)pos * 0xbf58476d1ce4e5b9ull);
    h ^= h >> 29;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 32;
    return (int)(h % 5) - 2;
}

/* The bf16 problem p as the fp8 variant (spec: lp_spec.fp8): every element of the query and key buffers,
 * padding included, rounded to e4m3; the weights widened to fp32; key scales drawn. */
static void to_fp8(lp_problem *p, tu_rng *rng, const unsigned char *row_used)
{
    dsops_lightning_indexer_args *a = &p->args;
    const lp_spec *sp = &p->sp;
    void *bufs[2] = {p->qbuf, p->kbuf};
    dsops_tensor *views[2] = {&a->q_idx, &a->key_cache};
    size_t counts[2] = {(size_t)(a->q_idx.shape[0] * a->q_idx.stride[0]), (size_t)(p->NB * a->key_cache.stride[0])};
    for (int k = 0; k < 2; k++) {
        const uint16_t *src = bufs[k];
        uint8_t *dst = tu_calloc(counts[k] + 1, 1);
        for (size_t i = 0; i < counts[k]; i++)
            dst[i] = dsops_ref_e4m3_from_f32(tu_f32(src[i]));
        free(bufs[k]);
        views[k]->data = dst;
        views[k]->dtype = DSOPS_FP8_E4M3;
    }
    p->qbuf = a->q_idx.data, p->kbuf = a->key_cache.data;
    const size_t wn = (size_t)(a->weights.shape[0] * a->weights.stride[0]) + 1;
    float *w = tu_calloc(wn, sizeof(float));
    for (size_t i = 0; i < wn - 1; i++)
        w[i] = tu_f32(((const uint16_t *)p->wbuf)[i]);
    free(p->wbuf);
    p->wbuf = w;
    a->weights.data = w;
    a->weights.dtype = DSOPS_FP32;
    const int64_t BS = sp->BS, ss = BS + (sp->strided_kv ? 5 : 0);
    float *ks = tu_calloc((size_t)(p->NB * ss), sizeof(float));
    const int exact = sp->data == LP_DATA_EQUAL || sp->data == LP_DATA_TIES;
    for (int64_t i = 0; i < p->NB * ss; i++)
        ks[i] = NAN;
    for (int64_t row = 0; row < p->NB * BS; row++) {
        float s = exact ? 1.0f : tu_rng_uniform(rng, 0.5f, 2.0f); /* exact modes: the scores' ties kept */
        if ((sp->key_nan && row % 5 == 1) || (sp->nan_fill && !row_used[row]))
            s = NAN;
        ks[row / BS * ss + row % BS] = s;
    }
    p->ksbuf = ks;
    int64_t shape2[2] = {p->NB, BS}, stride2[1] = {ss};
    a->key_scale_cache = pc_view(ks, DSOPS_FP32, 2, shape2, stride2);
}

lp_problem *lp_make(const lp_spec *spec, uint64_t seed)
{
    lp_problem *p = tu_calloc(1, sizeof *p);
    p->sp = *spec;
    lp_spec *sp = &p->sp;
    if (sp->cmp_ratio == 0)
        sp->cmp_ratio = 1;
    if (sp->B > LP_MAX_B) {
        fprintf(stderr, "lp_make: spec too large\n");
        abort();
    }
    p->strict = sp->data == LP_DATA_EQUAL || sp->data == LP_DATA_TIES;
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    const int B = sp->B, NI = sp->NI, DI = sp->DI, K = sp->K, BS = sp->BS, R = sp->cmp_ratio;
    const int i8 = sp->int8;

    /* sequences: cu [B+1], used [B] */
    const int64_t T = p->T = pc_sequences(B, sp->S, sp->seqused, &p->cu, &p->used);

    /* block table [B, MB]: a random permutation of the physical blocks, six kinds of garbage; sequence b
     * holds floor(seqused / R) keys */
    int64_t keys[LP_MAX_B];
    unsigned char dead[LP_MAX_B];
    for (int b = 0; b < B; b++) {
        keys[b] = sp->seqused[b] / R;
        dead[b] = sp->dead_seq_garbage && sp->S[b] == 0;
    }
    const pc_paging pg = pc_block_table(&rng, B, keys, BS, sp->extra_blocks, sp->extra_cols,
                                        sp->garbage_table ? 6 : 0, dead);
    const int64_t NB = p->NB = pg.NB, MB = p->MB = pg.MB;
    p->table = pg.table;
    free(pg.owner);

    /* which cache rows can some token of the call see? (the last token of a sequence sees the most) */
    const int64_t rows = NB * BS;
    unsigned char *row_used = tu_calloc((size_t)rows, 1);
    for (int b = 0; b < B; b++) {
        if (sp->S[b] == 0)
            continue;
        int64_t n = sp->seqused[b] / R;
        for (int64_t j = 0; j < n; j++)
            row_used[(int64_t)p->table[b * MB + j / BS] * BS + j % BS] = 1;
    }

    dsops_lightning_indexer_args *a = &p->args;
    dsops_lightning_indexer_init(a, DSOPS_PRESET_V32);
    a->cmp_ratio = R;
    const dsops_dtype qdt = i8 ? DSOPS_INT8 : DSOPS_BF16;
    const size_t esz = i8 ? 1 : 2;

    /* query-side views: [T, NI, DI] and [T, NI], padded when strided (padding = NaN / 0x7f bytes) */
    {
        int64_t W = DI + (sp->strided_q ? 5 : 0), ts = NI * W + (sp->strided_q ? 3 : 0);
        size_t qn = (size_t)(T * ts) * esz;
        p->qbuf = tu_calloc(qn, 1);
        memset(p->qbuf, 0xff, qn);
        int64_t shape[3] = {T, NI, DI}, stride[2] = {ts, W};
        a->q_idx = pc_view(p->qbuf, qdt, 3, shape, stride);
        int64_t ws = NI + (sp->strided_q ? 2 : 0);
        int64_t shape2[2] = {T, NI}, stride2[1] = {ws};
        p->wbuf = tu_calloc((size_t)(T * ws), 2);
        memset(p->wbuf, 0xff, (size_t)(T * ws) * 2);
        a->weights = pc_view(p->wbuf, i8 ? DSOPS_FP16 : DSOPS_BF16, 2, shape2, stride2);
        if (i8) {
            p->qsbuf = tu_calloc((size_t)(T * ws), 2);
            memset(p->qsbuf, 0xff, (size_t)(T * ws) * 2);
            a->q_idx_scale = pc_view(p->qsbuf, DSOPS_FP16, 2, shape2, stride2);
        }
    }
    /* cache views: [NB, BS, DI] and [NB, BS] */
    {
        int64_t W = DI + (sp->strided_kv ? 3 : 0), bs = BS * W + (sp->strided_kv ? 7 : 0);
        size_t kn = (size_t)(NB * bs) * esz;
        p->kbuf = tu_calloc(kn, 1);
        memset(p->kbuf, i8 ? 0x80 : 0xff, kn); /* int8 -128, bf16 NaN where nothing is written */
        int64_t shape[3] = {NB, BS, DI}, stride[2] = {bs, W};
        a->key_cache = pc_view(p->kbuf, qdt, 3, shape, stride);
        if (i8) {
            int64_t ss = BS + (sp->strided_kv ? 5 : 0);
            p->ksbuf = tu_calloc((size_t)(NB * ss), 2);
            for (int64_t i = 0; i < NB * ss; i++)
                ((uint16_t *)p->ksbuf)[i] = FP16_NAN;
            int64_t shape2[2] = {NB, BS}, stride2[1] = {ss};
            a->key_scale_cache = pc_view(p->ksbuf, DSOPS_FP16, 2, shape2, stride2);
        }
    }

    /* queries, scales and weights */
    const int exact = sp->data == LP_DATA_EQUAL || sp->data == LP_DATA_TIES;
    for (int64_t t = 0; t < T; t++) {
        uint64_t qpat = tu_rng_u64(&rng);
        for (int h = 0; h < NI; h++) {
            for (int d = 0; d < DI; d++) {
                if (i8) {
                    int8_t v;
                    if (exact)
                        v = (int8_t)small_value(qpat, (int64_t)h * DI + d);
                    else if (sp->data == LP_DATA_EXTREME)
                        v = (int8_t)(h % 2 == 0 || tu_rng_int(&rng, 0, 1) ? -128 : 127);
                    else
                        v = (int8_t)tu_rng_int(&rng, -128, 127);
                    pc_put_i8(&a->q_idx, t, h, d, v);
                } else {
                    float v = exact ? (float)small_value(qpat, (int64_t)h * DI + d) : tu_rng_uniform(&rng, -1.0f, 1.0f);
                    pc_put_u16(&a->q_idx, t, h, d, tu_bf16(v));
                }
            }
            /* weights: small integers (exact modes) or U(-1, 1); negative when asked */
            float w = exact ? (float)tu_rng_int(&rng, -2, 3) : tu_rng_uniform(&rng, -1.0f, 1.0f);
            if (sp->neg_weights)
                w = -(fabsf(w) + (exact ? 1.0f : 0.001f));
            float qs = exact ? 1.0f : tu_rng_uniform(&rng, 0.5f, 2.0f);
            if (i8 && sp->ws_extreme) {
                int kind = (int)(t % 3);
                if (kind == 0 && h == (int)(t % NI)) {
                    qs = 30000.0f, w = 4.0f;            /* 120000 -> +Inf */
                } else if (kind == 1 && h == (int)(t % NI)) {
                    qs = 30000.0f, w = -4.0f;           /* -Inf */
                } else if (kind == 2 && h % 2 == 0) {
                    if (h % 4 == 0 || exact)
                        qs = 0x1p-14f, w = 0x1p-14f;    /* 2^-28 -> 0 */
                    else
                        qs = 0x1p-12f, w = 0.37f;       /* subnormal fp16 */
                }
            }
            if (sp->nan_weights && t % 4 == 3 && h == NI / 2) {
                pc_put_u16(&a->weights, t, h, 0, i8 ? FP16_NAN : TU_BF16_NAN);
            } else {
                pc_put_u16(&a->weights, t, h, 0, i8 ? h16(w) : tu_bf16(w));
            }
            if (i8)
                pc_put_u16(&a->q_idx_scale, t, h, 0, h16(qs));
        }
    }

    if (sp->q_nonfinite)
        for (int64_t t = 0; t < T; t++) {
            const int kind = (int)(t % 4), h = NI / 2;
            if (kind == 0)
                continue;
            const float v = kind == 1 ? NAN : INFINITY;
            if (i8)
                pc_put_u16(&a->q_idx_scale, t, h, 0, h16(v));
            else
                pc_put_u16(&a->q_idx, t, h, 0, tu_bf16(v));
            if (kind > 1)
                pc_put_u16(&a->weights, t, h, 0,
                           i8 ? h16(kind == 2 ? 1.0f : -1.0f) : tu_bf16(kind == 2 ? 1.0f : -1.0f));
        }

    /* cache rows: drawn for every physical row (so the data do not depend on nan_fill), stored only
     * where a token can see them when nan_fill is set */
    int npat = sp->data == LP_DATA_EQUAL ? 1 : 5;
    uint64_t kpat_base = tu_rng_u64(&rng);
    for (int64_t row = 0; row < rows; row++) {
        int64_t blk = row / BS, off = row % BS;
        int store = !sp->nan_fill || row_used[row];
        /* the pattern of an exact-mode row depends on its logical position, not on the physical row:
         * use the row number only to pick one of few patterns */
        uint64_t pat = kpat_base + (uint64_t)(tu_rng_u64(&rng) % (uint64_t)npat);
        for (int d = 0; d < DI; d++) {
            if (i8) {
                int8_t v;
                if (exact)
                    v = (int8_t)small_value(pat, d);
                else if (sp->data == LP_DATA_EXTREME)
                    v = (int8_t)(row % 4 == 0 || tu_rng_int(&rng, 0, 1) ? -128 : 127);
                else
                    v = (int8_t)tu_rng_int(&rng, -128, 127);
                if (store)
                    pc_put_i8(&a->key_cache, blk, off, d, v);
            } else {
                float v = exact ? (float)small_value(pat, d) : tu_rng_uniform(&rng, -1.0f, 1.0f);
                if (store)
                    pc_put_u16(&a->key_cache, blk, off, d,
                               sp->key_nan && row % 5 == 1 && d == 0 ? TU_BF16_NAN : tu_bf16(v));
            }
        }
        if (i8) {
            float ks = exact ? (float)(1 << (pat % 3)) * 0.5f : tu_rng_uniform(&rng, 0.001f, 0.1f);
            if (sp->neg_scales && row % 3 == 1)
                ks = -ks;
            uint16_t ksh = h16(ks);
            if ((sp->nan_key_scales && row % 7 == 2) || (sp->key_nan && row % 5 == 1))
                ksh = FP16_NAN;
            if (store)
                pc_put_u16(&a->key_scale_cache, blk, off, 0, ksh);
        }
    }
    if (sp->fp8 && !i8)
        to_fp8(p, &rng, row_used);
    free(row_used);

    /* index tensors */
    pc_sequence_views(B, MB, p->table, p->cu, p->used, &a->block_table, &a->cu_seqlens_q, &a->seqused_kv);

    /* outputs inside guarded (and, when strided, padded) buffers */
    int64_t ots = K + (sp->strided_out ? 3 : 0);
    p->idx_buf_n = T * ots + 2 * PC_GUARD;
    p->idx_buf = tu_calloc((size_t)p->idx_buf_n, sizeof(int32_t));
    int64_t oshape[2] = {T, K}, ostride[1] = {ots};
    a->topk_indices = pc_view(p->idx_buf + PC_GUARD, DSOPS_INT32, 2, oshape, ostride);
    if (sp->with_scores) {
        int64_t sts = K + (sp->strided_out ? 5 : 0);
        p->score_buf_n = T * sts + 2 * PC_GUARD;
        p->score_buf = tu_calloc((size_t)p->score_buf_n, sizeof(float));
        int64_t sstride[1] = {sts};
        a->topk_scores = pc_view(p->score_buf + PC_GUARD, DSOPS_FP32, 2, oshape, sstride);
    }
    lp_reset_outputs(p);
    return p;
}

void lp_free(lp_problem *p)
{
    if (!p)
        return;
    free(p->qbuf);
    free(p->qsbuf);
    free(p->wbuf);
    free(p->kbuf);
    free(p->ksbuf);
    free(p->table);
    free(p->cu);
    free(p->used);
    free(p->idx_buf);
    free(p->score_buf);
    free(p->ref_idx);
    free(p->ref_scores);
    free(p);
}

void lp_reset_outputs(lp_problem *p)
{
    pc_fill_sentinel(p->idx_buf, sizeof(int32_t), p->idx_buf_n, (uint32_t)LP_SENTINEL_I32);
    pc_fill_sentinel(p->score_buf, sizeof(float), p->score_buf_n, LP_SENTINEL_F32_BITS);
}

int lp_outputs_untouched(const lp_problem *p)
{
    return pc_holds_sentinel(p->idx_buf, sizeof(int32_t), p->idx_buf_n, (uint32_t)LP_SENTINEL_I32) &&
           pc_holds_sentinel(p->score_buf, sizeof(float), p->score_buf_n, LP_SENTINEL_F32_BITS);
}

void lp_reference_of(const dsops_lightning_indexer_args *a, int32_t **ref_idx, float **ref_scores)
{
    const int64_t T = a->topk_indices.shape[0], K = a->topk_indices.shape[1];
    dsops_lightning_indexer_args r = *a;
    *ref_idx = tu_calloc((size_t)(T * K), sizeof(int32_t));
    *ref_scores = tu_calloc((size_t)(T * K), sizeof(float));
    int64_t s2[2] = {T, K};
    r.topk_indices = dsops_tensor_make(*ref_idx, DSOPS_INT32, 2, s2);
    r.topk_scores = dsops_tensor_make(*ref_scores, DSOPS_FP32, 2, s2);
    dsops_ref_lightning_indexer(&r);
}

void lp_compute_ref(lp_problem *p)
{
    free(p->ref_idx);
    free(p->ref_scores);
    lp_reference_of(&p->args, &p->ref_idx, &p->ref_scores);
}

void lp_poison_outputs(const dsops_lightning_indexer_args *a)
{
    const int64_t T = a->topk_indices.shape[0], K = a->topk_indices.shape[1];
    const int32_t junk = 0x7f7f7f7f;
    const uint32_t nan32 = 0xffffffffu;
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < K; k++) {
            memcpy(tf_eaddr(&a->topk_indices, t, k, 0), &junk, 4);
            if (a->topk_scores.data)
                memcpy(tf_eaddr(&a->topk_scores, t, k, 0), &nan32, 4);
        }
}

void lp_extract(const dsops_lightning_indexer_args *a, int32_t *idx, uint32_t *scores)
{
    const int64_t T = a->topk_indices.shape[0], K = a->topk_indices.shape[1];
    for (int64_t t = 0; t < T; t++) {
        memcpy(idx + t * K, tf_eaddr(&a->topk_indices, t, 0, 0), sizeof(int32_t) * (size_t)K);
        if (scores && a->topk_scores.data)
            memcpy(scores + t * K, tf_eaddr(&a->topk_scores, t, 0, 0), sizeof(float) * (size_t)K);
    }
}

int64_t lp_visible(const dsops_lightning_indexer_args *a, int64_t t)
{
    const int64_t B = a->seqused_kv.shape[0];
    for (int64_t b = 0; b < B; b++) {
        const int64_t t0 = *(const int32_t *)tf_eaddr(&a->cu_seqlens_q, b, 0, 0);
        const int64_t t1 = *(const int32_t *)tf_eaddr(&a->cu_seqlens_q, b + 1, 0, 0);
        if (t < t0 || t >= t1)
            continue;
        const int64_t L = (int64_t)*(const int32_t *)tf_eaddr(&a->seqused_kv, b, 0, 0) - (t1 - t0 - 1 - (t - t0));
        return (L > 0 ? L : 0) / a->cmp_ratio;
    }
    return 0;
}

/* ---- compare_topk ------------------------------------------------------------------------------------ */

/* two reference scores that may legitimately swap places between implementations */
static int near_tie(float x, float y, double tol)
{
    if (isnan(x) || isnan(y))
        return isnan(x) && isnan(y);
    if (isinf(x) || isinf(y))
        return x == y;
    return fabs((double)x - (double)y) <= tol;
}

static int same_value(float x, float y) { return (isnan(x) && isnan(y)) || x == y; }

int lp_compare(const char *label, const dsops_lightning_indexer_args *a, const int32_t *ref_idx,
               const float *ref_scores, int max_miss, int strict)
{
    const int64_t T = a->topk_indices.shape[0], K = a->topk_indices.shape[1];
    const int has_scores = a->topk_scores.data != NULL;
    int32_t *lib = tu_calloc((size_t)(T * K), sizeof(int32_t));
    uint32_t *libs_bits = tu_calloc((size_t)(T * K), sizeof(uint32_t));
    lp_extract(a, lib, libs_bits);
    const float *libs = (const float *)libs_bits;

    /* visible key counts and the largest one */
    int64_t *nvis = tu_calloc((size_t)(T > 0 ? T : 1), sizeof(int64_t));
    int64_t nmax = 1;
    for (int64_t t = 0; t < T; t++) {
        nvis[t] = lp_visible(a, t);
        nmax = nvis[t] > nmax ? nvis[t] : nmax;
    }
    int64_t *stamp_ref = tu_calloc((size_t)nmax, sizeof(int64_t)); /* t+1 where j is in the reference row t */
    int64_t *stamp_lib = tu_calloc((size_t)nmax, sizeof(int64_t)); /* t+1 where j is in the library row t */
    int32_t *pos_ref = tu_calloc((size_t)nmax, sizeof(int32_t));   /* position of j in the reference row */
    float *full = tu_calloc((size_t)nmax, sizeof(float));          /* lazily computed reference row */
    float *pair_lib = tu_calloc((size_t)(T * K + 1), sizeof(float));
    float *pair_ref = tu_calloc((size_t)(T * K + 1), sizeof(float));
    size_t npairs = 0;

    int ok = 1;
    int64_t bad_rows = 0, near_tie_swaps = 0, shown = 0;
    for (int64_t t = 0; t < T; t++) {
        const int32_t *lr = lib + t * K, *rr = ref_idx + t * K;
        const float *ls = libs + t * K, *rs = ref_scores + t * K;
        const int64_t n = nvis[t];
        char why[256] = "";
        int full_done = 0;
        double tol = 0.0;

        int64_t ml = 0, mr = 0;
        while (ml < K && lr[ml] != -1)
            ml++;
        while (mr < K && rr[mr] != -1)
            mr++;
        int64_t tail_bad = -1;
        for (int64_t k = ml; k < K && tail_bad < 0; k++)
            if (lr[k] != -1 || (has_scores && !(isinf(ls[k]) && ls[k] < 0)))
                tail_bad = k;
        if (ml != mr)
            snprintf(why, sizeof why, "%lld valid entries, expected %lld (n = %lld)", (long long)ml, (long long)mr,
                     (long long)n);
        else if (tail_bad >= 0)
            snprintf(why, sizeof why, "entry %lld after the valid ones is %d (score %g), expected -1 / -Inf",
                     (long long)tail_bad, lr[tail_bad], has_scores ? (double)ls[tail_bad] : 0.0);
        if (!why[0]) {
            for (int64_t k = 0; k < mr; k++) {
                stamp_ref[rr[k]] = t + 1;
                pos_ref[rr[k]] = (int32_t)k;
            }
            int64_t misses = 0, first_miss = -1;
            for (int64_t k = 0; k < ml && !why[0]; k++) {
                const int32_t j = lr[k];
                if (j < 0 || j >= n) {
                    snprintf(why, sizeof why, "entry %lld = %d is outside [0, %lld)", (long long)k, j, (long long)n);
                    break;
                }
                if (stamp_lib[j] == t + 1) {
                    snprintf(why, sizeof why, "index %d appears twice", j);
                    break;
                }
                stamp_lib[j] = t + 1;
                if (stamp_ref[j] == t + 1)
                    continue;
                if (!full_done) {
                    dsops_ref_lightning_indexer_scores(a, t, full);
                    double amax = 0.0;
                    for (int64_t i = 0; i < n; i++)
                        if (isfinite(full[i]) && fabs(full[i]) > amax)
                            amax = fabs(full[i]);
                    tol = 1e-4 * amax;
                    full_done = 1;
                }
                if (near_tie(full[j], rs[mr - 1], tol)) {
                    near_tie_swaps++;
                    continue;
                }
                if (misses++ == 0)
                    first_miss = k;
            }
            if (!why[0] && misses > max_miss) {
                int32_t j = lr[first_miss];
                snprintf(why, sizeof why,
                         "%lld indices absent from the reference (first: entry %lld = %d, reference score %.9g, "
                         "reference K-th score %.9g)",
                         (long long)misses, (long long)first_miss, j, (double)full[j], (double)rs[mr - 1]);
            }
            /* order: against the reference scores (up to near-ties) and the library's own scores (exactly) */
            for (int64_t k = 1; k < ml && !why[0]; k++) {
                const int32_t j0 = lr[k - 1], j1 = lr[k];
                if (has_scores && !dsops_ref_topk_before(ls[k - 1], j0, ls[k], j1)) {
                    snprintf(why, sizeof why, "entries %lld, %lld = (%d, %.9g), (%d, %.9g) are not in the order of "
                             "their own scores", (long long)k - 1, (long long)k, j0, (double)ls[k - 1], j1,
                             (double)ls[k]);
                    break;
                }
                float x, y;
                if (stamp_ref[j0] == t + 1 && stamp_ref[j1] == t + 1) {
                    x = rs[pos_ref[j0]];
                    y = rs[pos_ref[j1]];
                } else {
                    if (!full_done) {
                        dsops_ref_lightning_indexer_scores(a, t, full);
                        full_done = 1;
                    }
                    x = full[j0];
                    y = full[j1];
                }
                if (!dsops_ref_topk_before(x, j0, y, j1)) {
                    if (tol == 0.0) {
                        double amax = 0.0;
                        for (int64_t i = 0; i < mr; i++)
                            if (isfinite(rs[i]) && fabs(rs[i]) > amax)
                                amax = fabs(rs[i]);
                        if (full_done)
                            for (int64_t i = 0; i < n; i++)
                                if (isfinite(full[i]) && fabs(full[i]) > amax)
                                    amax = fabs(full[i]);
                        tol = 1e-4 * amax;
                    }
                    if (strict || !near_tie(x, y, tol))
                        snprintf(why, sizeof why, "entries %lld, %lld = %d, %d are out of order: reference scores "
                                 "%.9g, %.9g", (long long)k - 1, (long long)k, j0, j1, (double)x, (double)y);
                }
            }
            /* scores where both rows hold the index */
            if (has_scores && !why[0])
                for (int64_t k = 0; k < ml; k++)
                    if (stamp_ref[lr[k]] == t + 1) {
                        pair_lib[npairs] = ls[k];
                        pair_ref[npairs] = rs[pos_ref[lr[k]]];
                        npairs++;
                    }
            if (strict && !why[0])
                for (int64_t k = 0; k < K && !why[0]; k++)
                    if (lr[k] != rr[k] || (has_scores && !same_value(ls[k], rs[k])))
                        snprintf(why, sizeof why, "exact scores: entry %lld = (%d, %.9g), expected (%d, %.9g)",
                                 (long long)k, lr[k], has_scores ? (double)ls[k] : 0.0, rr[k], (double)rs[k]);
        }
        if (why[0]) {
            bad_rows++;
            if (shown++ < 3)
                printf("  %s: token %lld: %s\n", label, (long long)t, why);
        }
    }
    ok &= tu_check(bad_rows == 0, "%s: compare_topk failed in %lld of %lld rows", label, (long long)bad_rows,
                   (long long)T);
    if (tu_verbose())
        printf("  %s: %lld rows, %lld near-tie swaps, %zu score pairs\n", label, (long long)T,
               (long long)near_tie_swaps, npairs);
    if (has_scores && npairs > 0) {
        const tu_tol tol = {1e-4, 1e-4, 0.005};
        ok &= tu_compare_close_part(label, "topk_scores", pair_lib, pair_ref, npairs, tol);
    }
    free(lib);
    free(libs_bits);
    free(nvis);
    free(stamp_ref);
    free(stamp_lib);
    free(pos_ref);
    free(full);
    free(pair_lib);
    free(pair_ref);
    return ok;
}

int lp_check(lp_problem *p, const char *label)
{
    int ok = lp_compare(label, &p->args, p->ref_idx, p->ref_scores, 0, p->strict);
    ok &= pc_check_outside_view(label, "topk_indices", p->idx_buf, sizeof(int32_t), p->idx_buf_n,
                                (uint32_t)LP_SENTINEL_I32, &p->args.topk_indices);
    if (p->score_buf) /* with the scores view absent, the whole buffer keeps its sentinels */
        ok &= pc_check_outside_view(label, "topk_scores", p->score_buf, sizeof(float), p->score_buf_n,
                                    LP_SENTINEL_F32_BITS, &p->args.topk_scores);
    return ok;
}
