/* What a user without dsops would write for sparse_flash_attention_v32: per token, gather the selected cache
 * rows through the block table, dequantise them to fp32 (int8 key_nope x per-128 scale, rounded to bf16 as
 * the operator does), S = scale Q K^T with an fp32 GEMM, softmax, P rounded to bf16, O = P V with a second
 * GEMM. The GEMMs are oneDNN's sgemm (the library's own dependency, as fast as OpenBLAS's on these shapes);
 * gather, dequantisation and softmax are plain loops over the threads. The benchmark times it beside the
 * operator on the same inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <oneapi/dnnl/dnnl.h>

#include "cases_internal.h"
#include "composite.h"
#include "ref.h"

struct dsops_sfa_composite {
    const dsops_sfa_problem *p;
    int64_t T, N, Dc, Dr, K, D;  /* D = Dc + Dr */
    float *q;                    /* [T, N, D] fp32, q_nope | q_rope */
    float *kf;                   /* [K, D] gathered rows */
    float *s;                    /* [N, K] scores, then P */
    float *o;                    /* [N, Dc] */
    int32_t *rows;               /* [K] physical rows of the token */
};

static float to_bf16_value(float f) { return cases_bf16_value(cases_bf16_bits(f)); }

/* One token t of composite c with the buffers of slot w: 0, or 1 when a GEMM failed; with max_diff (sfa only),
 * the largest |out - operator's out| of the token into it. */
typedef int (*composite_token_fn)(void *c, int64_t t, int w, float *max_diff);

/* Tokens over the threads, each GEMM single-threaded (decode has more tokens than cores); with fewer tokens than
 * threads, one token at a time with oneDNN's threads inside its GEMMs. Both baselines run this way. */
static int run_tokens(void *c, int64_t T, int threads, composite_token_fn token, float *max_diff)
{
    int bad = 0;
    if (T >= threads) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) reduction(| : bad)
        for (int64_t t = 0; t < T; t++) {
#ifdef _OPENMP
            omp_set_num_threads(1);
            int w = omp_get_thread_num();
#else
            int w = 0;
#endif
            float md = 0.0f;
            bad |= token(c, t, w, max_diff ? &md : NULL);
            if (max_diff) {
#pragma omp critical(dsops_composite_diff)
                *max_diff = md > *max_diff ? md : *max_diff;
            }
        }
    } else {
#ifdef _OPENMP
        omp_set_num_threads(threads);
#endif
        for (int64_t t = 0; t < T; t++)
            bad |= token(c, t, 0, max_diff);
    }
    return bad;
}

dsops_sfa_composite *dsops_sfa_composite_make(const dsops_sfa_problem *p)
{
    const dsops_sparse_flash_attention_v32_args *a = &p->args;
    if (a->kv_layout == DSOPS_KV_PACKED_INT8)
        return NULL;
    dsops_sfa_composite *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->p = p;
    c->T = a->q_nope.shape[0], c->N = a->q_nope.shape[1], c->Dc = a->q_nope.shape[2], c->Dr = a->q_rope.shape[2];
    c->K = a->topk_indices.shape[1], c->D = c->Dc + c->Dr;
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_num_procs();
#endif
    c->q = malloc(sizeof(float) * (size_t)(c->T * c->N * c->D));
    /* per-thread buffers, one set per processor */
    c->kf = malloc(sizeof(float) * (size_t)(c->K * c->D) * (size_t)threads);
    c->s = malloc(sizeof(float) * (size_t)(c->N * c->K) * (size_t)threads);
    c->o = malloc(sizeof(float) * (size_t)(c->N * c->Dc) * (size_t)threads);
    c->rows = malloc(sizeof(int32_t) * (size_t)c->K * (size_t)threads);
    if (!c->q || !c->kf || !c->s || !c->o || !c->rows) {
        dsops_sfa_composite_free(c);
        return NULL;
    }
    const uint16_t *qn = a->q_nope.data, *qr = a->q_rope.data;
    for (int64_t t = 0; t < c->T; t++)
        for (int64_t h = 0; h < c->N; h++) {
            float *dst = c->q + (t * c->N + h) * c->D;
            dsops_bf16_to_fp32(qn + (t * c->N + h) * c->Dc, dst, (size_t)c->Dc);
            dsops_bf16_to_fp32(qr + (t * c->N + h) * c->Dr, dst + c->Dc, (size_t)c->Dr);
        }
    return c;
}

void dsops_sfa_composite_free(dsops_sfa_composite *c)
{
    if (!c)
        return;
    free(c->q);
    free(c->kf);
    free(c->s);
    free(c->o);
    free(c->rows);
    free(c);
}

/* One token: gather, S = scale Q K^T, softmax, O = P V, out = bf16(O). Buffers of slot `w`. */
static int run_token(void *cv, int64_t t, int w, float *out_max_diff)
{
    const dsops_sfa_composite *c = cv;
    const dsops_sparse_flash_attention_v32_args *a = &c->p->args;
    const int32_t *cu = a->cu_seqlens_q.data, *used = a->seqused_kv.data, *bt = a->block_table.data;
    int64_t B = a->cu_seqlens_q.shape[0] - 1, MB = a->block_table.shape[1], BS = a->key_nope.shape[1];
    int64_t b = 0;
    while (b + 1 < B && t >= cu[b + 1])
        b++;
    float *kf = c->kf + (size_t)w * (size_t)(c->K * c->D), *s = c->s + (size_t)w * (size_t)(c->N * c->K);
    float *o = c->o + (size_t)w * (size_t)(c->N * c->Dc);
    int32_t *rows = c->rows + (size_t)w * (size_t)c->K;
    const int32_t *idx = (const int32_t *)a->topk_indices.data + t * c->K;
    /* the token sees L = seqused - (S_b - 1 - i) tokens; only the first min(K, L, topk_length) entries count */
    int64_t S_b = cu[b + 1] - cu[b], L = used[b] - (S_b - 1 - (t - cu[b]));
    int64_t limit = c->K < L ? c->K : (L > 0 ? L : 0);
    if (a->topk_length.data)
        limit = ((const int32_t *)a->topk_length.data)[t] < limit ? ((const int32_t *)a->topk_length.data)[t] : limit;
    int64_t n = 0;
    for (int64_t j = 0; j < limit; j++)
        if (idx[j] >= 0 && idx[j] < used[b])
            rows[n++] = bt[b * MB + idx[j] / BS] * (int32_t)BS + idx[j] % (int32_t)BS;
    for (int64_t j = 0; j < n; j++) {
        float *dst = kf + j * c->D;
        int64_t r = rows[j];
        if (a->kv_layout == DSOPS_KV_SPLIT_INT8) {
            const int8_t *k8 = (const int8_t *)a->key_nope.data + r * c->Dc;
            const float *sc = (const float *)a->key_nope_scale.data + r * (c->Dc / 128);
            for (int64_t d = 0; d < c->Dc; d++)
                dst[d] = to_bf16_value((float)k8[d] * sc[d / 128]);
        } else {
            dsops_bf16_to_fp32((const uint16_t *)a->key_nope.data + r * c->Dc, dst, (size_t)c->Dc);
        }
        dsops_bf16_to_fp32((const uint16_t *)a->key_rope.data + r * c->Dr, dst + c->Dc, (size_t)c->Dr);
    }
    uint16_t *out = (uint16_t *)a->out.data + t * c->N * c->Dc;
    if (n == 0) {
        memset(out, 0, sizeof(uint16_t) * (size_t)(c->N * c->Dc));
        return 0;
    }
    /* row-major S [N, n] = scale Q [N, D] K^T: oneDNN's sgemm is row-major */
    if (dnnl_sgemm('N', 'T', c->N, n, c->D, a->softmax_scale, c->q + t * c->N * c->D, c->D, kf, c->D, 0.0f, s, n) !=
        dnnl_success)
        return 1;
    for (int64_t h = 0; h < c->N; h++) {
        float *row = s + h * n, m = -INFINITY, sum = 0.0f;
        for (int64_t j = 0; j < n; j++)
            m = row[j] > m ? row[j] : m;
        for (int64_t j = 0; j < n; j++) {
            row[j] = expf(row[j] - m);
            sum += row[j];
        }
        float r = 1.0f / sum;
        for (int64_t j = 0; j < n; j++)
            row[j] = to_bf16_value(row[j] * r);
    }
    /* O [N, Dc] = P [N, n] V [n, Dc], V = the nope part of the gathered rows (row stride D) */
    if (dnnl_sgemm('N', 'N', c->N, c->Dc, n, 1.0f, s, n, kf, c->D, 0.0f, o, c->Dc) != dnnl_success)
        return 1;
    for (int64_t i = 0; i < c->N * c->Dc; i++) {
        uint16_t v = cases_bf16_bits(o[i]);
        if (out_max_diff) {
            float d = fabsf(cases_bf16_value(v) - cases_bf16_value(out[i]));
            *out_max_diff = d > *out_max_diff ? d : *out_max_diff;
        } else {
            out[i] = v;
        }
    }
    return 0;
}

dsops_status dsops_sfa_composite_run(dsops_sfa_composite *c, int threads)
{
    return run_tokens(c, c->T, threads, run_token, NULL) ? DSOPS_ERR_UNSUPPORTED : DSOPS_OK;
}

float dsops_sfa_composite_max_diff(dsops_sfa_composite *c, int threads)
{
    float md = 0.0f;
    if (run_tokens(c, c->T, threads, run_token, &md))
        return INFINITY;
    return md;
}

/* ---- lightning_indexer ------------------------------------------------------------------------------------- */

/* What a user would write for lightning_indexer: per token, gather the visible key rows through the block
 * table into fp32 (int8 values are exact in fp32, and so are their 128-term dots), S = Q K^T with oneDNN's
 * sgemm, then I[j] = sum over heads of the weighted ReLU (int8: with the operator's fp16 roundings and the
 * key's scale; fp8: times the key's fp32 scale), a selection of the K largest and a sort of those K. */
/* A candidate of the selection: its score and position. */
typedef struct li_pair {
    float score;
    int32_t pos;
} li_pair;

struct dsops_li_composite {
    const dsops_li_problem *p;
    int64_t T, NI, DI, K, nmax;  /* nmax: most visible keys of any token */
    int slots;                   /* per-thread buffer sets */
    float *q;                    /* [T, NI, DI] fp32 queries */
    float *ws;                   /* [T, NI] head weights: fp16(q_scale * w) (int8) or w (bf16) */
    float *kf;                   /* [slots][nmax, DI] gathered keys */
    float *s;                    /* [slots][NI, nmax] dots */
    float *score;                /* [slots][nmax] index scores */
    li_pair *cand;              /* [slots][nmax] candidates of the selection */
    uint16_t *h16;               /* [slots][nmax] fp16 staging of one head's ReLU row */
    float *top;                  /* [T, K] selected scores, decreasing */
    float e4m3[256];             /* fp8: the value of every e4m3 byte */
};

static int64_t li_seq_of(const dsops_lightning_indexer_args *a, int64_t t)
{
    const int32_t *cu = a->cu_seqlens_q.data;
    int64_t B = a->seqused_kv.shape[0], b = 0;
    while (b + 1 < B && t >= cu[b + 1])
        b++;
    return b;
}

static int64_t li_visible(const dsops_lightning_indexer_args *a, int64_t b, int64_t t)
{
    const int32_t *cu = a->cu_seqlens_q.data, *used = a->seqused_kv.data;
    int64_t L = used[b] - (cu[b + 1] - cu[b] - 1 - (t - cu[b]));
    return (L > 0 ? L : 0) / a->cmp_ratio;
}

dsops_li_composite *dsops_li_composite_make(const dsops_li_problem *p)
{
    const dsops_lightning_indexer_args *a = &p->args;
    dsops_li_composite *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->p = p;
    c->T = a->q_idx.shape[0], c->NI = a->q_idx.shape[1], c->DI = a->q_idx.shape[2], c->K = a->topk_indices.shape[1];
    for (int64_t t = 0; t < c->T; t++) {
        int64_t n = li_visible(a, li_seq_of(a, t), t);
        c->nmax = n > c->nmax ? n : c->nmax;
    }
    c->slots = 1;
#ifdef _OPENMP
    c->slots = omp_get_num_procs();
#endif
    const size_t slots = (size_t)c->slots, nmax = (size_t)c->nmax + 1;
    c->q = malloc(sizeof(float) * (size_t)(c->T * c->NI * c->DI));
    c->ws = malloc(sizeof(float) * (size_t)(c->T * c->NI));
    c->kf = malloc(sizeof(float) * nmax * (size_t)c->DI * slots);
    c->s = malloc(sizeof(float) * nmax * (size_t)c->NI * slots);
    c->score = malloc(sizeof(float) * nmax * slots);
    c->cand = malloc(sizeof(li_pair) * nmax * slots);
    c->h16 = malloc(sizeof(uint16_t) * nmax * slots);
    c->top = malloc(sizeof(float) * (size_t)(c->T * c->K));
    if (!c->q || !c->ws || !c->kf || !c->s || !c->score || !c->cand || !c->h16 || !c->top) {
        dsops_li_composite_free(c);
        return NULL;
    }
    const int64_t nq = c->T * c->NI * c->DI, nw = c->T * c->NI;
    if (a->q_idx.dtype == DSOPS_INT8) {
        for (int64_t i = 0; i < nq; i++)
            c->q[i] = (float)((const int8_t *)a->q_idx.data)[i];
        float *qs = malloc(sizeof(float) * (size_t)nw), *w = malloc(sizeof(float) * (size_t)nw);
        uint16_t *h = malloc(sizeof(uint16_t) * (size_t)nw);
        if (!qs || !w || !h) {
            free(qs), free(w), free(h);
            dsops_li_composite_free(c);
            return NULL;
        }
        dsops_fp16_to_fp32(a->q_idx_scale.data, qs, (size_t)nw);
        dsops_fp16_to_fp32(a->weights.data, w, (size_t)nw);
        for (int64_t i = 0; i < nw; i++)
            qs[i] *= w[i];
        dsops_fp32_to_fp16(qs, h, (size_t)nw);
        dsops_fp16_to_fp32(h, c->ws, (size_t)nw);
        free(qs), free(w), free(h);
    } else if (a->q_idx.dtype == DSOPS_FP8_E4M3) {
        for (int b = 0; b < 256; b++)
            c->e4m3[b] = dsops_ref_f32_from_e4m3((uint8_t)b);
        for (int64_t i = 0; i < nq; i++)
            c->q[i] = c->e4m3[((const uint8_t *)a->q_idx.data)[i]];
        memcpy(c->ws, a->weights.data, sizeof(float) * (size_t)nw);
    } else {
        dsops_bf16_to_fp32(a->q_idx.data, c->q, (size_t)nq);
        dsops_bf16_to_fp32(a->weights.data, c->ws, (size_t)nw);
    }
    return c;
}

void dsops_li_composite_free(dsops_li_composite *c)
{
    if (!c)
        return;
    free(c->q);
    free(c->ws);
    free(c->kf);
    free(c->s);
    free(c->score);
    free(c->cand);
    free(c->h16);
    free(c->top);
    free(c);
}

/* a ranks before b: larger score, then lower position */
static int li_before(li_pair a, li_pair b) { return a.score > b.score || (a.score == b.score && a.pos < b.pos); }

static int li_cmp_pairs(const void *x, const void *y)
{
    li_pair a = *(const li_pair *)x, b = *(const li_pair *)y;
    return li_before(a, b) ? -1 : li_before(b, a);
}

/* Moves the k best of v[lo, hi) to its front, in any order (quickselect). */
static void li_select(li_pair *v, int64_t lo, int64_t hi, int64_t k)
{
    while (hi - lo > 1) {
        li_pair pivot = v[lo + (hi - lo) / 2];
        int64_t i = lo, j = hi - 1;
        while (i <= j) {
            while (li_before(v[i], pivot))
                i++;
            while (li_before(pivot, v[j]))
                j--;
            if (i <= j) {
                li_pair x = v[i];
                v[i++] = v[j];
                v[j--] = x;
            }
        }
        if (k <= j)
            hi = j + 1;
        else if (k >= i)
            lo = i;
        else
            return;
    }
}

static int li_token(void *cv, int64_t t, int w, float *max_diff)
{
    (void)max_diff; /* no per-token comparison here */
    dsops_li_composite *c = cv;
    const dsops_lightning_indexer_args *a = &c->p->args;
    const int64_t b = li_seq_of(a, t), n = li_visible(a, b, t), NI = c->NI, DI = c->DI, K = c->K;
    const int64_t BS = a->key_cache.shape[1], MB = a->block_table.shape[1];
    const int32_t *bt = (const int32_t *)a->block_table.data + b * MB;
    const size_t nmax = (size_t)c->nmax + 1;
    float *kf = c->kf + (size_t)w * nmax * (size_t)DI, *s = c->s + (size_t)w * nmax * (size_t)NI;
    float *score = c->score + (size_t)w * nmax, *top = c->top + t * K;
    li_pair *cand = c->cand + (size_t)w * nmax;
    uint16_t *h16 = c->h16 + (size_t)w * nmax;
    const int int8 = a->q_idx.dtype == DSOPS_INT8, fp8 = a->q_idx.dtype == DSOPS_FP8_E4M3;
    for (int64_t j = 0; j < n; j++) {
        int64_t row = (int64_t)bt[j / BS] * BS + j % BS;
        if (fp8) { /* DeepGEMM's blocks: the cache's strides */
            const uint8_t *k8 = (const uint8_t *)a->key_cache.data + (int64_t)bt[j / BS] * a->key_cache.stride[0] +
                                j % BS * a->key_cache.stride[1];
            for (int64_t d = 0; d < DI; d++)
                kf[j * DI + d] = c->e4m3[k8[d]];
        } else if (int8) {
            const int8_t *k8 = (const int8_t *)a->key_cache.data + row * DI;
            for (int64_t d = 0; d < DI; d++)
                kf[j * DI + d] = (float)k8[d];
        } else {
            dsops_bf16_to_fp32((const uint16_t *)a->key_cache.data + row * DI, kf + j * DI, (size_t)DI);
        }
    }
    if (n > 0 && dnnl_sgemm('N', 'T', NI, n, DI, 1.0f, c->q + t * NI * DI, DI, kf, DI, 0.0f, s, n) != dnnl_success)
        return 1;
    for (int64_t j = 0; j < n; j++)
        score[j] = 0.0f;
    for (int64_t h = 0; h < NI; h++) {
        float *row = s + h * n, wh = c->ws[t * NI + h];
        for (int64_t j = 0; j < n; j++)
            row[j] = row[j] > 0.0f ? row[j] : 0.0f;
        if (int8) { /* d = fp16(relu(dot) * 2^-11) */
            for (int64_t j = 0; j < n; j++)
                row[j] *= 0x1p-11f;
            dsops_fp32_to_fp16(row, h16, (size_t)n);
            dsops_fp16_to_fp32(h16, row, (size_t)n);
        }
        for (int64_t j = 0; j < n; j++)
            score[j] += wh * row[j];
    }
    if (int8) {
        const uint16_t *ks = a->key_scale_cache.data;
        for (int64_t j = 0; j < n; j++) {
            float f;
            dsops_fp16_to_fp32(ks + (int64_t)bt[j / BS] * BS + j % BS, &f, 1);
            score[j] *= f;
        }
    }
    if (fp8) {
        const float *ks = a->key_scale_cache.data;
        for (int64_t j = 0; j < n; j++)
            score[j] *= ks[(int64_t)bt[j / BS] * a->key_scale_cache.stride[0] + j % BS * a->key_scale_cache.stride[1]];
    }
    int64_t kk = n < K ? n : K;
    for (int64_t j = 0; j < n; j++)
        cand[j] = (li_pair){score[j], (int32_t)j};
    li_select(cand, 0, n, kk);
    qsort(cand, (size_t)kk, sizeof(li_pair), li_cmp_pairs);
    for (int64_t i = 0; i < K; i++)
        top[i] = i < kk ? cand[i].score : -INFINITY;
    return 0;
}

dsops_status dsops_li_composite_run(dsops_li_composite *c, int threads)
{
    if (threads > c->slots)
        threads = c->slots;
    return run_tokens(c, c->T, threads, li_token, NULL) ? DSOPS_ERR_UNSUPPORTED : DSOPS_OK;
}

const float *dsops_li_composite_scores(const dsops_li_composite *c) { return c->top; }
