/* sparse_attention_v32, the fused layer (docs/OPERATORS.md §4.5; docs/CASES.md "sparse_attention_v32")
 * The named cases, their data generator and the bench adapter.
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
 * takes weights_scale = 1 and no Hadamard, as the vendor DIA prolog (spec §5). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_family.h"
#include "cases.h"
#include "cases_internal.h"
#include "ref.h"

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
    /* dsops: the int8 variant on FlashMLA's FP8 latent rows (flashmla_fp8) */
    {.name = "v32_dia_int8_b4_s2_fp8", .B = 4, .S = 2, DIA_MIXED, .table_width = 1024, DIA_DIMS, .int8 = 1,
     .layout = DSOPS_KV_FLASHMLA_FP8, .ci = 1},
    /* Edge and error cases: the test corrupts a needed block-table entry and expects DSOPS_ERR_INDEX with
     * every cache byte untouched */
    {.name = "v32_dia_edge_validate_before_write", .B = 2, .S = 2, .seqused = {300, 1000}, DIA_DIMS,
     .layout = DSOPS_KV_SPLIT_BF16, .ci = 1},
};

static void *dia_alloc(dsops_dia_problem *p, size_t bytes) { return ALLOC_OWNED(p, bytes); }

enum {
    STREAM_DIA_MLA = 61 /* ... 67: cases_make_mla_inputs */, STREAM_DIA_INDEXER = 68 /* ... 71: the indexer's */,
    STREAM_DIA_HAD = 72, STREAM_DIA_KV = 73, STREAM_DIA_IDXK = 74
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
        cases_fill_bf16(seed, STREAM_DIA_IDXK, rows, DI, 1.0f, key);
        p->args.idx_k_cache = dsops_tensor_make(key, DSOPS_BF16, 3, s3);
        return 1;
    }
    int8_t *key = dia_alloc(p, (size_t)(rows * DI));                    /* [NB, BS, DI] int8 */
    uint16_t *scale = dia_alloc(p, sizeof(uint16_t) * (size_t)rows);    /* [NB, BS] fp16 */
    if (!key || !scale)
        return 0;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        float v[CASES_MAX_ROW];
        cases_row_uniform(seed, STREAM_DIA_IDXK, row, v, DI);
        scale[row] = cases_fp16_bits_finite(cases_q8_row(v, DI, key + row * DI));
    }
    p->args.idx_k_cache = dsops_tensor_make(key, DSOPS_INT8, 3, s3);
    p->args.idx_k_scale_cache = dsops_tensor_make(scale, DSOPS_FP16, 2, s2);
    return 1;
}

dsops_dia_problem *dsops_dia_problem_make(const dsops_dia_case *c, uint64_t seed)
{
    if (!c || c->B < 0 || c->B > 128 || c->H < 1 || c->H > CASES_MAX_ROW || c->Q < 1 || c->Q > CASES_MAX_ROW ||
        c->N < 1 || c->Dqn < 1 || c->Dc < 1 || c->Dc + 64 > CASES_MAX_KV_ROW || c->NI < 1 || c->DI < 64 ||
        c->DI > CASES_MAX_ROW || c->K < 1 || c->BS < 1 || c->table_width < 0 ||
        (c->layout != DSOPS_KV_SPLIT_BF16 && c->Dc % 128 != 0) || ((c->layout == DSOPS_KV_PACKED_INT8 || c->layout == DSOPS_KV_FLASHMLA_FP8) && c->Dc != 512))
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
    if (!cu || !su || !bt || !ci || !cases_fill_block_table(&r, B, c->seqused, 1, BS, NB, MB, bt))
        goto fail;
    cu[0] = 0;
    for (int64_t b = 0, t = 0; b < B; b++) {
        const int64_t S = dia_tokens(c, (int)b);
        su[b] = c->seqused[b];
        cu[b + 1] = cu[b] + (int32_t)S;
        for (int64_t i = 0; i < S; i++, t++) {
            const int64_t pos = c->seqused[b] - S + i, L = pos + 1;
            ci[t] = (int64_t)bt[b * MB + pos / BS] * BS + pos % BS;
            p->visible += L;
            p->attended += L < K ? L : K;
        }
    }
    p->block_table = bt;

    /* weights and activations, then the caches */
    const int had = i8;
    cases_mla_inputs in;
    cases_indexer_weights w;
    uint16_t *hq = had ? dia_alloc(p, sizeof(uint16_t) * (size_t)(DI * DI)) : NULL; /* [DI, DI] */
    uint16_t *hk = had ? dia_alloc(p, sizeof(uint16_t) * (size_t)(DI * DI)) : NULL; /* [DI, DI] */
    if (!cases_make_mla_inputs(OWNED_LIST(p), T, H, Q, N, Dqn, Dc, i8, seed, STREAM_DIA_MLA, &in) ||
        !cases_make_indexer_weights(OWNED_LIST(p), H, Q, NI, DI, i8, seed, STREAM_DIA_INDEXER, &w) ||
        (had && (!hq || !hk)))
        goto fail;
    CASES_SET_MLA_INPUTS(a, in);
    CASES_SET_INDEXER_WEIGHTS(a, w);
    int64_t s1[1], s2[2], s3[3];
    if (had) {
        s2[0] = DI, s2[1] = DI;
        a->hadamard_q = dsops_tensor_make(hq, DSOPS_BF16, 2, s2);
        a->hadamard_k = dsops_tensor_make(hk, DSOPS_BF16, 2, s2);
        if ((DI & (DI - 1)) == 0) {
            if (dsops_hadamard_matrix(NULL, &a->hadamard_q) != DSOPS_OK ||
                dsops_hadamard_matrix(NULL, &a->hadamard_k) != DSOPS_OK)
                goto fail;
        } else {
            cases_fill_bf16(seed, STREAM_DIA_HAD, DI, DI, 1.0f, hq);
            cases_fill_bf16(seed ^ 0x5555u, STREAM_DIA_HAD, DI, DI, 1.0f, hk);
        }
    }
    cases_latent_cache kv;
    if (!cases_fill_latent_cache(OWNED_LIST(p), c->layout, NB, BS, (int)Dc, 64, seed, STREAM_DIA_KV, &kv) ||
        !dia_fill_idx_cache(p, seed))
        goto fail;
    a->kv_cache = kv.nope;
    a->kv_scale_cache = kv.nope_scale;
    a->kr_cache = kv.rope;
    a->kv_packed = kv.packed;

    /* outputs */
    uint16_t *out = dia_alloc(p, sizeof(uint16_t) * (size_t)(T * N * Dc)); /* [T, N, Dc] bf16 */
    int32_t *topk = dia_alloc(p, sizeof(int32_t) * (size_t)(T * K));        /* [T, K] */
    float *lse = dia_alloc(p, sizeof(float) * (size_t)(T * N));             /* [T, N] */
    if (!out || !topk || !lse)
        goto fail;

    s1[0] = B + 1;
    a->cu_seqlens_q = dsops_tensor_make(cu, DSOPS_INT32, 1, s1);
    s1[0] = B;
    a->seqused_kv = dsops_tensor_make(su, DSOPS_INT32, 1, s1);
    s2[0] = B, s2[1] = MB;
    a->block_table = dsops_tensor_make(bt, DSOPS_INT32, 2, s2);
    s1[0] = T;
    a->cache_index = dsops_tensor_make(ci, DSOPS_INT64, 1, s1);
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

/* The four stage calls are wired here from the fused arguments a second time, on purpose: src/ops/
 * sparse_attention_v32.c does the same wiring, and the tests check the fused call against these stages, so
 * a slip in either copy shows as a difference instead of being shared by both sides. */
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

    /* Each stage's arguments from the fused call's tensors and the intermediates above, member by member: the
     * stages share tensors, not a struct layout, so the four lists below are alike in shape only. */
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

/* ---- bench adapter ------------------------------------------------------------------------------- */
/* Alike in shape with the other families' adapters: bench_family.h says why each family keeps its own. */



/* sparse_attention_v32 (the fused layer): timed with prepared weights; --check compares the fused result
 * (out, lse, topk_indices and the cache rows at cache_index) with the four stand-alone operators run in
 * sequence (bitwise). After the fused row, one row per stage
 * times each stand-alone operator on the stage arguments (prepared weights for the prologs). */
typedef struct dia_bench {
    dsops_dia_problem *p;
    dsops_prepared *prep;             /* the fused operator's */
    dsops_dia_stages *st;             /* the stages' arguments and intermediates */
    dsops_prepared *prep_mla, *prep_idx;
} dia_bench;

static dsops_status dia_run(dsops_context *ctx, void *pv)
{
    return dsops_sparse_attention_v32(ctx, &((dia_bench *)pv)->p->args);
}

static dsops_status dia_mla_run(dsops_context *ctx, void *pv)
{
    return dsops_mla_prolog_v32(ctx, &((dia_bench *)pv)->st->mla);
}

static dsops_status dia_idx_run(dsops_context *ctx, void *pv)
{
    return dsops_indexer_prolog_v32(ctx, &((dia_bench *)pv)->st->idx);
}

static dsops_status dia_li_run(dsops_context *ctx, void *pv)
{
    return dsops_lightning_indexer(ctx, &((dia_bench *)pv)->st->li);
}

static dsops_status dia_sfa_run(dsops_context *ctx, void *pv)
{
    return dsops_sparse_flash_attention_v32(ctx, &((dia_bench *)pv)->st->sfa);
}

static dsops_status dia_chain_run(dsops_context *ctx, void *pv)
{
    dsops_status s = dia_mla_run(ctx, pv);
    if (s == DSOPS_OK)
        s = dia_idx_run(ctx, pv);
    if (s == DSOPS_OK)
        s = dia_li_run(ctx, pv);
    if (s == DSOPS_OK)
        s = dia_sfa_run(ctx, pv);
    return s;
}

/* The rows of every cache of the layer at its cache_index (the rows the call writes), copied one after the
 * other into rows (NULL: only counted). Returns the number of bytes. */
static size_t dia_written_rows(const dsops_sparse_attention_v32_args *a, unsigned char *rows)
{
    const dsops_tensor *cache[6] = {&a->kv_cache, &a->kv_scale_cache, &a->kr_cache, &a->kv_packed, &a->idx_k_cache,
                                    &a->idx_k_scale_cache};
    const int64_t *slot = a->cache_index.data;
    size_t at = 0;
    for (int c = 0; c < 6; c++) {
        if (!cache[c]->data)
            continue;
        size_t row_bytes = dsops_dtype_size(cache[c]->dtype);
        for (int d = 2; d < cache[c]->ndim; d++)
            row_bytes *= (size_t)cache[c]->shape[d];
        for (int64_t t = 0; t < a->cache_index.shape[0]; t++) {
            if (slot[t] < 0)
                continue;
            if (rows)
                memcpy(rows + at, (const unsigned char *)cache[c]->data + (size_t)slot[t] * row_bytes, row_bytes);
            at += row_bytes;
        }
    }
    return at;
}

/* The fused call has just run (bench_case): the stage chain must give the same out, lse, top-k and cache
 * rows. */
static int dia_check(void *pv, char *why, size_t cap)
{
    dia_bench *b = pv;
    const dsops_sparse_attention_v32_args *a = &b->p->args;
    size_t no = (size_t)(b->p->T * b->p->c.N * b->p->c.Dc) * 2, nl = (size_t)(b->p->T * b->p->c.N) * 4,
           nk = (size_t)(b->p->T * b->p->c.K) * 4, nc = dia_written_rows(a, NULL);
    unsigned char *keep = malloc(no + nl + nk + 2 * nc + 1);
    if (!keep)
        return bench_out_of_memory(why, cap);
    unsigned char *fused_rows = keep + no + nl + nk, *chain_rows = fused_rows + nc;
    memcpy(keep, a->out.data, no);
    memcpy(keep + no, a->lse.data, nl);
    memcpy(keep + no + nl, a->topk_indices.data, nk);
    dia_written_rows(a, fused_rows);
    dsops_status s = dia_chain_run(NULL, b);
    const char *what = s != DSOPS_OK ? dsops_last_error()
                       : memcmp(keep, a->out.data, no) != 0 ? "out"
                       : memcmp(keep + no, a->lse.data, nl) != 0 ? "lse"
                       : memcmp(keep + no + nl, b->st->li.topk_indices.data, nk) != 0 ? "topk_indices"
                       : (dia_written_rows(a, chain_rows), memcmp(fused_rows, chain_rows, nc) != 0) ? "the cache rows at cache_index"
                       : NULL;
    free(keep);
    if (s != DSOPS_OK)
        snprintf(why, cap, "the stage chain: %s", what);
    else
        snprintf(why, cap, "the stage chain gives other bytes than the fused call in %s", what ? what : "nothing");
    return what != NULL;
}

static void dia_release(void *pv)
{
    dia_bench *b = pv;
    dsops_prepared_destroy(b->prep);
    dsops_prepared_destroy(b->prep_mla);
    dsops_prepared_destroy(b->prep_idx);
    dsops_dia_stages_free(b->st);
    dsops_dia_problem_free(b->p);
    free(b);
}

static int dia_make_problem(const void *c, bench_problem *bp, char *why, size_t cap)
{
    dia_bench *b = calloc(1, sizeof *b);
    if (!b)
        return bench_out_of_memory(why, cap);
    *bp = (bench_problem){.p = b, .release = dia_release};
    if (!(b->p = dsops_dia_problem_make(c, 42)) || !(b->st = dsops_dia_stages_make(&b->p->args)))
        return bench_cannot_generate(why, cap);
    if (bench_prepared_or_say(dsops_sparse_attention_v32_prepare(NULL, &b->p->args, &b->prep),
                              "sparse_attention_v32_prepare", why, cap) ||
        bench_prepared_or_say(dsops_mla_prolog_v32_prepare(NULL, &b->st->mla, &b->prep_mla), "mla_prolog_v32_prepare",
                              why, cap) ||
        bench_prepared_or_say(dsops_indexer_prolog_v32_prepare(NULL, &b->st->idx, &b->prep_idx),
                              "indexer_prolog_v32_prepare", why, cap))
        return 1;
    b->p->args.prepared = b->prep;
    b->st->mla.prepared = b->prep_mla;
    b->st->idx.prepared = b->prep_idx;
    /* mixed units: the indexer prolog and scorer of the int8 variant count int8 operations */
    *bp = (bench_problem){b, dia_run, dia_check, dia_release, b->p->flops, b->p->cache_bytes, DSOPS_PEAK_BF16_DOT,
                          .judge = "stages", .args = &b->p->args};
    return 0;
}

int bench_dia_stages(const bench_problem *bp, dsops_context *ctx, bench_problem stages[4], const char *labels[4],
                     char *why, size_t cap)
{
    dia_bench *b = bp->p;
    const dsops_dia_problem *p = b->p;
    const dsops_dia_case *c = &p->c;
    if (dia_chain_run(ctx, b) != DSOPS_OK) { /* the later stages read the earlier stages' outputs */
        snprintf(why, cap, "stage chain: %s", dsops_last_error());
        return 1;
    }
    const double i8 = c->int8 ? 1.0 : 2.0, NG = (double)c->N * (c->Dqn + 64), NQ = (double)c->NI * c->DI;
    const double kv_row = c->layout == DSOPS_KV_SPLIT_BF16   ? 2.0 * (c->Dc + 64)
                          : c->layout == DSOPS_KV_SPLIT_INT8 ? c->Dc + 4.0 * (c->Dc / 128) + 128.0
                                                             : 656.0;
    const dsops_peak_kind wq = c->int8 ? DSOPS_PEAK_INT8_DOT : DSOPS_PEAK_BF16_DOT;
    const struct {
        const char *label;
        dsops_status (*run)(dsops_context *, void *);
        double work, bytes;
        dsops_peak_kind peak;
    } s[4] = {
        {"mla_prolog_v32", dia_mla_run, p->flops_mla,
         2.0 * c->Q * c->H + i8 * NG * c->Q + 2.0 * c->N * c->Dqn * c->Dc + 2.0 * (c->Dc + 64) * c->H, wq},
        {"indexer_prolog_v32", dia_idx_run, p->flops_idx, i8 * NQ * c->Q + 2.0 * (c->DI + c->NI) * c->H, wq},
        {"lightning_indexer", dia_li_run, p->flops_li, (double)p->visible * (i8 * c->DI + (c->int8 ? 2.0 : 0.0)), wq},
        {"sparse_flash_attention_v32", dia_sfa_run, p->flops_sfa, (double)p->attended * kv_row, DSOPS_PEAK_BF16_DOT},
    };
    for (int i = 0; i < 4; i++) {
        stages[i] = (bench_problem){b, s[i].run, bench_no_check, bench_no_release, s[i].work, s[i].bytes, s[i].peak,
                                    .unit = NULL};
        labels[i] = s[i].label;
    }
    return 0;
}

static void dia_words(const void *cv, char *op, size_t oc, char *sh, size_t sc)
{
    const dsops_dia_case *c = cv;
    snprintf(op, oc, "sparse_attention_v32");
    snprintf(sh, sc, "B %d S %d", c->B, c->S);
}

static void dia_list_line(const void *cv, const char *not_ci)
{
    const dsops_dia_case *c = cv;
    printf("%-40s sparse_attention_v32        B %-3d S %-4d H %d N %d K %-5d %s, %s%s\n", c->name, c->B, c->S, c->H,
           c->N, c->K, c->int8 ? "int8" : "bf16", cases_layout_name(c->layout), not_ci);
}

static const void *dia_table(int *count) { return dsops_dia_cases(count); }

const bench_family bench_family_sparse_attention_v32 = {
    .op = "sparse_attention_v32",
    .table_word = "sparse_attention_v32",
    .cases = dia_table,
    .case_size = sizeof(dsops_dia_case),
    .ci_offset = offsetof(dsops_dia_case, ci),
    .make_problem = dia_make_problem,
    .words = dia_words,
    .list_line = dia_list_line,
};
