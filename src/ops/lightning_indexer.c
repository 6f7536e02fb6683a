/* lightning_indexer (spec §3.6, §4.3): validate -> per token, score every visible key in chunks of
 * packed tiles -> top-k. Tokens are spread over threads; with fewer tokens than threads the keys of
 * one token are. */
#include <math.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "dispatch.h"
#include "internal.h"
#include "sequences.h"
#include "stages.h"
#include "topk.h"

typedef dsops_lightning_indexer_args li_args;

/* Keys are packed and scored in chunks of 1 ... CHUNK_TILES 16-key tiles, as many as the tier asks. */
#define CHUNK_TILES 8
#define CHUNK_KEYS (CHUNK_TILES * 16)

dsops_status dsops_lightning_indexer_init(li_args *a, dsops_preset preset)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    memset(a, 0, sizeof *a);
    a->cmp_ratio = 1;
    switch (preset) {
    case DSOPS_PRESET_V32: a->cmp_ratio = 1; break;
    case DSOPS_PRESET_V4_FLASH:
    case DSOPS_PRESET_V4_PRO: a->cmp_ratio = 4; break;
    default: return dsops_fail(DSOPS_ERR_PARAM, "preset = %d is not a dsops_preset value", (int)preset);
    }
    dsops_clear_error();
    return DSOPS_OK;
}

/* The variant follows the dtype of q_idx; the fp8 variant scores on the bf16 kernels (every e4m3 value is
 * exact in bf16) and applies its fp32 key scales to the sums. */
typedef enum li_variant { LI_INT8, LI_BF16, LI_FP8 } li_variant;

typedef struct li_dims {
    int64_t T, NI, DI, K, B, MB, NB, BS, LMAX;
    li_variant kind;
} li_dims;


/* Visible keys of token t of a sequence with S tokens and `used` original tokens (index i). */
static int64_t visible_keys(int64_t used, int64_t S, int64_t i, int cmp_ratio)
{
    int64_t L = used - (S - 1 - i);
    return L > 0 ? L / cmp_ratio : 0;
}

static dsops_status check_shapes(const li_args *a, li_dims *d)
{
    const unsigned f16 = DSOPS_DT(DSOPS_FP16);
    const unsigned f32 = DSOPS_DT(DSOPS_FP32);
    if (!a->q_idx.data)
        return dsops_fail(DSOPS_ERR_NULL, "q_idx is NULL (required)");
    DSOPS_TRY(dsops_check_tensor(&a->q_idx, "q_idx", 3,
                                 DSOPS_DT(DSOPS_INT8) | DSOPS_DT(DSOPS_BF16) | DSOPS_DT(DSOPS_FP8_E4M3), true));
    d->kind = a->q_idx.dtype == DSOPS_INT8 ? LI_INT8 : a->q_idx.dtype == DSOPS_BF16 ? LI_BF16 : LI_FP8;
    const dsops_dtype kind = a->q_idx.dtype;
    d->T = a->q_idx.shape[0];
    d->NI = a->q_idx.shape[1];
    d->DI = a->q_idx.shape[2];
    if (d->NI < 1 || d->DI < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "q_idx has shape [%lld, %lld, %lld], expected NI >= 1 and DI >= 1",
                          (long long)d->T, (long long)d->NI, (long long)d->DI);
    if (d->kind == LI_INT8 && d->DI > 131072)
        return dsops_fail(DSOPS_ERR_SHAPE, "q_idx.shape[2] = %lld, expected DI <= 131072 (int8 dot products)",
                          (long long)d->DI);
    if (d->NI > 65536 || d->DI > 131072)
        return dsops_fail(DSOPS_ERR_UNSUPPORTED, "q_idx has NI = %lld, DI = %lld: this build supports NI <= 65536",
                          (long long)d->NI, (long long)d->DI);
    const dsops_dtype wdt = d->kind == LI_INT8 ? DSOPS_FP16 : d->kind == LI_BF16 ? DSOPS_BF16 : DSOPS_FP32;
    DSOPS_TRY(dsops_check_tensor(&a->weights, "weights", 2, DSOPS_DT(wdt), false));
    DSOPS_TRY(dsops_check_dim(&a->weights, "weights", 0, d->T, "T of q_idx"));
    DSOPS_TRY(dsops_check_dim(&a->weights, "weights", 1, d->NI, "NI of q_idx"));
    DSOPS_TRY(dsops_check_tensor(&a->key_cache, "key_cache", 3, DSOPS_DT(kind), true));
    DSOPS_TRY(dsops_check_dim(&a->key_cache, "key_cache", 2, d->DI, "DI of q_idx"));
    d->NB = a->key_cache.shape[0];
    d->BS = a->key_cache.shape[1];
    if (d->NB < 1 || d->BS < 1 || d->NB > INT32_MAX || d->BS > INT32_MAX)
        return dsops_fail(DSOPS_ERR_SHAPE, "key_cache has NB = %lld, BS = %lld, expected both in [1, 2^31)",
                          (long long)d->NB, (long long)d->BS);
    if (d->kind == LI_INT8) {
        DSOPS_TRY(dsops_check_tensor(&a->q_idx_scale, "q_idx_scale", 2, f16, false));
        DSOPS_TRY(dsops_check_dim(&a->q_idx_scale, "q_idx_scale", 0, d->T, "T of q_idx"));
        DSOPS_TRY(dsops_check_dim(&a->q_idx_scale, "q_idx_scale", 1, d->NI, "NI of q_idx"));
    } else if (dsops_tensor_present(&a->q_idx_scale)) {
        return dsops_fail(DSOPS_ERR_PARAM, "q_idx_scale is given but q_idx is %s (only the int8 variant has query "
                          "scales)", dsops_dtype_name(kind));
    }
    if (d->kind != LI_BF16) {
        DSOPS_TRY(dsops_check_tensor(&a->key_scale_cache, "key_scale_cache", 2, d->kind == LI_INT8 ? f16 : f32, false));
        DSOPS_TRY(dsops_check_dim(&a->key_scale_cache, "key_scale_cache", 0, d->NB, "NB of key_cache"));
        DSOPS_TRY(dsops_check_dim(&a->key_scale_cache, "key_scale_cache", 1, d->BS, "BS of key_cache"));
    } else if (dsops_tensor_present(&a->key_scale_cache)) {
        return dsops_fail(DSOPS_ERR_PARAM, "key_scale_cache is given but q_idx is bf16 (the bf16 variant has no scales)");
    }
    DSOPS_TRY(dsops_check_sequence_tensors(&a->cu_seqlens_q, &a->seqused_kv, &a->block_table, &d->B, &d->MB));
    DSOPS_TRY(dsops_check_topk_tensor(&a->topk_indices, "topk_indices", d->T, "T of q_idx", &d->K));
    if (dsops_tensor_present(&a->topk_scores)) {
        DSOPS_TRY(dsops_check_tensor(&a->topk_scores, "topk_scores", 2, DSOPS_DT(DSOPS_FP32), false));
        DSOPS_TRY(dsops_check_dim(&a->topk_scores, "topk_scores", 0, d->T, "T of q_idx"));
        DSOPS_TRY(dsops_check_dim(&a->topk_scores, "topk_scores", 1, d->K, "K of topk_indices"));
    }
    d->LMAX = -1;
    if (dsops_tensor_present(&a->logits)) {
        DSOPS_TRY(dsops_check_tensor(&a->logits, "logits", 2, f32, false));
        DSOPS_TRY(dsops_check_dim(&a->logits, "logits", 0, d->T, "T of q_idx"));
        d->LMAX = a->logits.shape[1];
    }
    if (a->cmp_ratio < 1)
        return dsops_fail(DSOPS_ERR_PARAM, "cmp_ratio = %d, expected >= 1", a->cmp_ratio);
    const dsops_named_tensor outs[] = {{&a->topk_indices, "topk_indices"}, {&a->topk_scores, "topk_scores"},
                                       {&a->logits, "logits"}};
    const dsops_named_tensor ins[] = {{&a->q_idx, "q_idx"}, {&a->q_idx_scale, "q_idx_scale"}, {&a->weights, "weights"},
                                      {&a->key_cache, "key_cache"}, {&a->key_scale_cache, "key_scale_cache"},
                                      {&a->block_table, "block_table"}, {&a->cu_seqlens_q, "cu_seqlens_q"},
                                      {&a->seqused_kv, "seqused_kv"}};
    return dsops_check_outputs_apart(outs, sizeof outs / sizeof outs[0], ins, sizeof ins / sizeof ins[0]);
}

/* Sequence descriptors (V6) and the block-table entries of every visible key (V7); the largest key
 * count of a token goes to *nmax. */
static dsops_status check_indices(const li_args *a, const li_dims *d, int64_t *nmax)
{
    const dsops_tensor *cu = &a->cu_seqlens_q;
    DSOPS_TRY(dsops_check_sequence_values(cu, &a->seqused_kv, "seqused_kv", d->B, d->T));
    *nmax = 0;
    for (int64_t b = 0; b < d->B; b++) {
        int64_t S = dsops_i32_at(cu, b + 1) - dsops_i32_at(cu, b);
        if (S == 0)
            continue; /* no token of this sequence in the call: nothing of it is read */
        int64_t n = visible_keys(dsops_i32_at(&a->seqused_kv, b), S, S - 1, a->cmp_ratio); /* the last token sees most */
        if (n > *nmax)
            *nmax = n;
        if (d->LMAX >= 0 && n > d->LMAX)
            return dsops_fail(DSOPS_ERR_INDEX, "logits has %lld columns, but the last token of sequence %lld sees %lld keys",
                              (long long)d->LMAX, (long long)b, (long long)n);
        for (int64_t col = 0; col * d->BS < n; col++) {
            if (col >= d->MB)
                return dsops_fail(DSOPS_ERR_INDEX, "key %lld of sequence %lld needs block_table column %lld, outside [0, %lld)",
                                  (long long)(col * d->BS), (long long)b, (long long)col, (long long)d->MB);
            int32_t blk = *(const int32_t *)dsops_at2(&a->block_table, b, col);
            if (blk < 0 || blk >= d->NB)
                return dsops_fail(DSOPS_ERR_INDEX,
                                  "block_table[%lld][%lld] = %d is outside [0, %lld) (needed by key %lld of sequence %lld)",
                                  (long long)b, (long long)col, blk, (long long)d->NB, (long long)(col * d->BS),
                                  (long long)b);
        }
    }
    if (*nmax > INT32_MAX)
        return dsops_fail(DSOPS_ERR_UNSUPPORTED, "a token sees %lld keys, this build supports at most 2^31 - 1",
                          (long long)*nmax);
    return DSOPS_OK;
}

/* ---- execution ------------------------------------------------------------------------------- */

typedef struct li_plan {
    const li_args *a;
    const li_dims *d;
    const dsops_indexer_kernels *k;
    size_t q_stride;    /* bytes of a packed query row (the tier's layout) */
    size_t tile_bytes;  /* bytes of a packed 16-key tile */
    int64_t chunk_keys; /* keys per chunk: 16 * (1 ... CHUNK_TILES) */
    size_t elem;        /* bytes of a q_idx / key value */
    /* fp8 variant: the tier's e4m3 dequantiser (64 values at a time; scale 1 makes it exact) */
    void (*dequant_e4m3)(const uint8_t *q, const void *scales, int group, int n, uint16_t *dst);
} li_plan;

/* Per-token query state: packed rows, int8 bias corrections, fp32 head weights. */
typedef struct li_query {
    void *q;            /* [NI][q_stride] bytes, the tier's query layout */
    int32_t *qsum128;   /* [NI] bias corrections from pack_query_int8 */
    float *w;           /* [NI] */
    uint16_t *wide;     /* fp8 variant: [DI] one query row widened to bf16 */
} li_query;

/* fp8 variant: n e4m3 bytes as bf16 (exact). */
static void widen_e4m3(const li_plan *p, const uint8_t *src, int64_t n, uint16_t *dst)
{
    static const float one = 1.0f;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        p->dequant_e4m3(src + i, &one, 64, 64, dst + i);
    for (; i < n; i++) /* the tail: an e4m3 value's fp32 bits end in 16 zero bits */
        dst[i] = (uint16_t)(dsops_bits_from_f32(dsops_e4m3_value(src[i])) >> 16);
}

static void prepare_query(const li_plan *p, int64_t t, li_query *qs)
{
    const li_args *a = p->a;
    int64_t NI = p->d->NI, DI = p->d->DI;
    for (int64_t h = 0; h < NI; h++) {
        const void *src = dsops_at3(&a->q_idx, t, h, 0);
        void *dst = (char *)qs->q + h * p->q_stride;
        if (p->d->kind == LI_INT8) {
            qs->qsum128[h] = p->k->pack_query_int8((const int8_t *)src, (int)DI, dst);
            float scale = dsops_fp16_value(*(const uint16_t *)dsops_at2(&a->q_idx_scale, t, h));
            float weight = dsops_fp16_value(*(const uint16_t *)dsops_at2(&a->weights, t, h));
            qs->w[h] = dsops_fp16_value(dsops_fp16_round_bits(scale * weight)); /* ws_h = fp16(qs * w) */
        } else if (p->d->kind == LI_BF16) {
            p->k->pack_query_bf16((const uint16_t *)src, (int)DI, dst);
            qs->w[h] = dsops_bf16_value(*(const uint16_t *)dsops_at2(&a->weights, t, h));
        } else {
            widen_e4m3(p, (const uint8_t *)src, DI, qs->wide);
            p->k->pack_query_bf16(qs->wide, (int)DI, dst);
            qs->w[h] = *(const float *)dsops_at2(&a->weights, t, h);
        }
    }
}

/* Fills rows[0 .. c1-c0) with the cache addresses of keys [c0, c1) of sequence b and, for int8 and fp8,
 * kscale with their scales; walks the block table one run of consecutive rows at a time. */
static void key_rows(const li_plan *p, int64_t b, int64_t c0, int64_t c1, const void **rows, float *kscale)
{
    const li_args *a = p->a;
    int64_t BS = p->d->BS;
    size_t row_step = (size_t)a->key_cache.stride[1] * p->elem;
    for (int64_t j = c0; j < c1;) {
        int64_t blk = *(const int32_t *)dsops_at2(&a->block_table, b, j / BS), off = j % BS;
        int64_t run = BS - off < c1 - j ? BS - off : c1 - j;
        const char *row = dsops_at3(&a->key_cache, blk, off, 0);
        for (int64_t r = 0; r < run; r++)
            rows[j - c0 + r] = row + (size_t)r * row_step;
        if (p->d->kind == LI_INT8)
            for (int64_t r = 0; r < run; r++)
                kscale[j - c0 + r] = dsops_fp16_value(*(const uint16_t *)dsops_at2(&a->key_scale_cache, blk, off + r));
        else if (p->d->kind == LI_FP8)
            for (int64_t r = 0; r < run; r++)
                kscale[j - c0 + r] = *(const float *)dsops_at2(&a->key_scale_cache, blk, off + r);
        j += run;
    }
}

/* Starts loading the rows of one chunk. */
static void prefetch_rows(const li_plan *p, const void *const *rows, int64_t count)
{
    size_t row_bytes = (size_t)p->d->DI * p->elem;
    for (int64_t r = 0; r < count; r++)
        for (size_t off = 0; off < row_bytes; off += 64)
            __builtin_prefetch((const char *)rows[r] + off, 0, 2); /* to L2: L1 holds the tiles and queries */
}

/* Packs 16 keys (rows[e], NULL for padding) into one tile; fp8 keys are widened to bf16 in `wide` first. */
static void pack_tile(const li_plan *p, const void *const *rows, void *tile, uint16_t *wide)
{
    const int DI = (int)p->d->DI;
    if (p->d->kind == LI_INT8) {
        p->k->pack_int8((const int8_t *const *)rows, DI, tile);
    } else if (p->d->kind == LI_BF16) {
        p->k->pack_bf16((const uint16_t *const *)rows, DI, tile);
    } else {
        const uint16_t *w[16];
        for (int e = 0; e < 16; e++) {
            w[e] = rows[e] ? wide + (size_t)e * (size_t)DI : NULL;
            if (rows[e])
                widen_e4m3(p, (const uint8_t *)rows[e], DI, wide + (size_t)e * (size_t)DI);
        }
        p->k->pack_bf16(w, DI, tile);
    }
}

/* Scores keys [j0, j1) of sequence b into I[j0 .. j1), p->chunk_keys at a time through `tiles`; the
 * next chunk's rows are prefetched before the current one is scored. wide: fp8 variant, [16][DI] bf16. */
static void score_range(const li_plan *p, const li_query *qs, int64_t b, int64_t j0, int64_t j1, void *tiles,
                        float *kscale, uint16_t *wide, float *I)
{
    const li_dims *d = p->d;
    const void *rows[2][CHUNK_KEYS + 16];
    float scales[2][CHUNK_KEYS + 16];
    int cur = 0;
    const int64_t chunk = p->chunk_keys;
    int64_t c1 = j1 - j0 < chunk ? j1 : j0 + chunk;
    key_rows(p, b, j0, c1, rows[cur], scales[cur]);
    prefetch_rows(p, rows[cur], c1 - j0);
    for (int64_t c0 = j0; c0 < j1; c0 += chunk, cur ^= 1) {
        c1 = j1 - c0 < chunk ? j1 : c0 + chunk;
        int ntiles = (int)((c1 - c0 + 15) / 16);
        for (int64_t r = c1 - c0; r < (int64_t)ntiles * 16; r++) {
            rows[cur][r] = NULL; /* padding keys of the last tile */
            scales[cur][r] = 0.0f;
        }
        for (int tile = 0; tile < ntiles; tile++)
            pack_tile(p, &rows[cur][tile * 16], (char *)tiles + tile * p->tile_bytes, wide);
        if (c1 < j1) {
            int64_t n1 = j1 - c1 < chunk ? j1 : c1 + chunk;
            key_rows(p, b, c1, n1, rows[cur ^ 1], scales[cur ^ 1]);
            prefetch_rows(p, rows[cur ^ 1], n1 - c1);
        }
        float out[CHUNK_KEYS];
        if (d->kind == LI_INT8) {
            memcpy(kscale, scales[cur], (size_t)ntiles * 16 * 4);
            p->k->score_int8(qs->q, p->q_stride, qs->qsum128, qs->w, (int)d->NI, tiles, ntiles, (int)d->DI, kscale,
                             out);
        } else {
            p->k->score_bf16(qs->q, p->q_stride, qs->w, (int)d->NI, tiles, ntiles, (int)d->DI, out);
            if (d->kind == LI_FP8)
                for (int64_t r = 0; r < c1 - c0; r++)
                    out[r] *= scales[cur][r];
        }
        memcpy(I + c0, out, (size_t)(c1 - c0) * 4);
    }
}

typedef struct li_scratch_layout {
    size_t q, qsum, w, tiles, kscale, wide, I, topk, total;
} li_scratch_layout;

static li_scratch_layout scratch_layout(const li_plan *p, int64_t nmax)
{
    li_scratch_layout s;
    size_t off = 0, NI = (size_t)p->d->NI;
    s.q = off;      off += dsops_align64(NI * p->q_stride);
    s.qsum = off;   off += dsops_align64(NI * 4);
    s.w = off;      off += dsops_align64(NI * 4);
    s.tiles = off;  off += dsops_align64((size_t)(p->chunk_keys / 16) * p->tile_bytes);
    s.kscale = off; off += dsops_align64(CHUNK_KEYS * 4);
    s.wide = off;   off += p->d->kind == LI_FP8 ? dsops_align64((size_t)16 * (size_t)p->d->DI * 2) : 0;
    s.I = off;      off += dsops_align64((size_t)nmax * 4 + 4);
    s.topk = off;   off += dsops_topk_scratch_bytes(nmax, p->d->K);
    s.total = off;
    return s;
}

static void write_topk(const li_plan *p, int64_t t, const float *I, int64_t n, void *topk_scratch)
{
    const li_args *a = p->a;
    int64_t K = p->d->K;
    bool dense_idx = a->topk_indices.stride[1] == 1;
    bool dense_sc = !dsops_tensor_present(&a->topk_scores) || a->topk_scores.stride[1] == 1;
    if (dense_idx && dense_sc) {
        dsops_topk(I, n, K, (int32_t *)dsops_at2(&a->topk_indices, t, 0),
                   dsops_tensor_present(&a->topk_scores) ? (float *)dsops_at2(&a->topk_scores, t, 0) : NULL,
                   topk_scratch);
        return;
    }
    /* strided outputs: select the min(n, K) entries into the tail of the scratch (sized by the keys, not by
     * K), then scatter them and the padding */
    int64_t m = n < K ? n : K;
    int32_t *idx = (int32_t *)((char *)topk_scratch + dsops_topk_scratch_bytes(n, m));
    float *sc = (float *)(idx + m);
    dsops_topk(I, n, m, idx, sc, topk_scratch);
    for (int64_t j = 0; j < K; j++) {
        *(int32_t *)dsops_at2(&a->topk_indices, t, j) = j < m ? idx[j] : -1;
        if (dsops_tensor_present(&a->topk_scores))
            *(float *)dsops_at2(&a->topk_scores, t, j) = j < m ? sc[j] : -INFINITY;
    }
}

/* Row t of the optional logits: the n scores, then -Inf. */
static void write_logits(const li_plan *p, int64_t t, const float *I, int64_t n)
{
    const dsops_tensor *L = &p->a->logits;
    if (!dsops_tensor_present(L))
        return;
    float *row = (float *)dsops_at2(L, t, 0);
    const int64_t s = L->stride[1];
    for (int64_t j = 0; j < p->d->LMAX; j++)
        row[j * s] = j < n ? I[j] : -INFINITY;
}

dsops_status dsops_li_validate(const li_args *a)
{
    li_dims d;
    int64_t nmax;
    DSOPS_TRY(check_shapes(a, &d));
    return check_indices(a, &d, &nmax);
}

dsops_status dsops_lightning_indexer(dsops_context *ctx, const li_args *a)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    li_dims d;
    int64_t nmax = 0;
    DSOPS_TRY(check_shapes(a, &d));
    DSOPS_TRY(check_indices(a, &d, &nmax));
    dsops_clear_error();
    if (d.T == 0)
        return DSOPS_OK;
    dsops_context *use;
    DSOPS_TRY(dsops_context_begin(ctx, &use));
    const dsops_kernel_table *kt = dsops_kernel_table_get(use->isa);
    li_plan p = {a, &d, &kt->indexer, 0, 0, 0, dsops_dtype_size(a->q_idx.dtype), kt->attn.dequant_e4m3};
    int chunk_tiles = CHUNK_TILES;
    if (d.kind == LI_INT8)
        p.k->layout_int8((int)d.DI, &p.tile_bytes, &p.q_stride, &chunk_tiles);
    else
        p.k->layout_bf16((int)d.DI, &p.tile_bytes, &p.q_stride, &chunk_tiles);
    chunk_tiles = chunk_tiles < 1 ? 1 : chunk_tiles > CHUNK_TILES ? CHUNK_TILES : chunk_tiles;
    p.chunk_keys = (int64_t)chunk_tiles * 16;
    li_scratch_layout L = scratch_layout(&p, nmax);
    /* topk results before a strided scatter: min(K, keys) entries, so a large K costs no scratch */
    size_t strided_out = dsops_align64((size_t)(d.K < nmax ? d.K : nmax) * 8);
    size_t per_thread = L.total + strided_out;
    int threads = use->threads;
    bool split_keys = d.T < threads; /* few tokens: spread each token's keys over the threads */
    int slots = split_keys ? threads : (int)(d.T < threads ? d.T : threads);
    char *scratch = dsops_scratch(use, per_thread * (size_t)slots);
    if (!scratch) {
        dsops_context_end(ctx, use);
        return DSOPS_ERR_NOMEM;
    }
    if (!split_keys) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(slots)
        for (int64_t t = 0; t < d.T; t++) {
            char *mine = scratch + per_thread * (size_t)dsops_thread_num();
            int64_t b, S, i;
            dsops_token_of(&a->cu_seqlens_q, d.B, t, &b, &S, &i);
            int64_t n = visible_keys(dsops_i32_at(&a->seqused_kv, b), S, i, a->cmp_ratio);
            uint16_t *wide = (uint16_t *)(mine + L.wide);
            li_query qs = {mine + L.q, (int32_t *)(mine + L.qsum), (float *)(mine + L.w), wide};
            float *I = (float *)(mine + L.I);
            if (n > 0) {
                prepare_query(&p, t, &qs);
                score_range(&p, &qs, b, 0, n, mine + L.tiles, (float *)(mine + L.kscale), wide, I);
            }
            write_topk(&p, t, I, n, mine + L.topk);
            write_logits(&p, t, I, n);
        }
    } else {
        /* one token at a time: thread 0's slot holds the query and the score row, every thread scores a
         * contiguous share of the keys with its own tiles */
        char *shared = scratch;
        li_query qs = {shared + L.q, (int32_t *)(shared + L.qsum), (float *)(shared + L.w), (uint16_t *)(shared + L.wide)};
        float *I = (float *)(shared + L.I);
        for (int64_t t = 0; t < d.T; t++) {
            int64_t b, S, i;
            dsops_token_of(&a->cu_seqlens_q, d.B, t, &b, &S, &i);
            int64_t n = visible_keys(dsops_i32_at(&a->seqused_kv, b), S, i, a->cmp_ratio);
            if (n > 0) {
                prepare_query(&p, t, &qs);
                const int64_t chunk = p.chunk_keys;
                int64_t chunks = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) num_threads(threads)
                for (int th = 0; th < threads; th++) {
                    char *mine = scratch + per_thread * (size_t)th;
                    int64_t c0 = chunks * th / threads, c1 = chunks * (th + 1) / threads;
                    int64_t j0 = c0 * chunk, j1 = c1 * chunk < n ? c1 * chunk : n;
                    if (j0 < j1)
                        score_range(&p, &qs, b, j0, j1, mine + L.tiles, (float *)(mine + L.kscale),
                                    (uint16_t *)(mine + L.wide), I);
                }
            }
            write_topk(&p, t, I, n, shared + L.topk);
            write_logits(&p, t, I, n);
        }
    }
    dsops_context_end(ctx, use);
    return DSOPS_OK;
}
