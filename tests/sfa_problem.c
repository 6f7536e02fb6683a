#include "sfa_problem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "problem_common.h"
#include "ref.h"
#include "test_util.h"

/* A [d0, d1, d2] view with outer strides s0, s1. */
static dsops_tensor view3(void *data, dsops_dtype dt, int64_t d0, int64_t d1, int64_t d2, int64_t s0, int64_t s1)
{
    const int64_t shape[3] = {d0, d1, d2}, stride[2] = {s0, s1};
    return pc_view(data, dt, 3, shape, stride);
}

/* ---- one logical cache row ------------------------------------------------------------------------ */

typedef struct row_data {
    uint16_t nope_bf16[4096];
    int8_t nope_i8[4096];
    float scale[32];
    uint16_t rope[4096];
} row_data;

static void gen_row(const tp_spec *sp, tu_rng *r, int dead, row_data *rd)
{
    const int G = sp->Dc / 128;
    for (int c = 0; c < sp->Dc; c++)
        rd->nope_bf16[c] = tu_bf16(tu_rng_uniform(r, -1.0f, 1.0f));
    if (sp->neg_inf)
        rd->nope_bf16[0] = tu_bf16(dead ? -1e30f : 0.0f);
    for (int g = 0; g < G; g++) {
        int zero_group = !sp->int8_extreme && tu_rng_int(r, 0, 7) == 0; /* all-zero group, scale 0 */
        rd->scale[g] = zero_group ? 0.0f : tu_rng_uniform(r, 0.0005f, 0.01f);
        for (int c = g * 128; c < (g + 1) * 128; c++) {
            if (zero_group)
                rd->nope_i8[c] = 0;
            else if (sp->int8_extreme)
                rd->nope_i8[c] = (int8_t)(tu_rng_int(r, 0, 1) ? 127 : -128);
            else
                rd->nope_i8[c] = (int8_t)tu_rng_int(r, -128, 127);
        }
    }
    for (int c = 0; c < sp->Dr; c++)
        rd->rope[c] = tu_bf16(tu_rng_uniform(r, -1.0f, 1.0f));
}

static void store_row(const tp_problem *p, int64_t blk, int64_t off, const row_data *rd)
{
    const dsops_sparse_flash_attention_v32_args *a = &p->args;
    const int Dc = p->sp.Dc, Dr = p->sp.Dr, G = Dc / 128;
    switch (p->sp.layout) {
    case DSOPS_KV_SPLIT_BF16:
        for (int c = 0; c < Dc; c++)
            pc_put_u16(&a->key_nope, blk, off, c, rd->nope_bf16[c]);
        for (int c = 0; c < Dr; c++)
            pc_put_u16(&a->key_rope, blk, off, c, rd->rope[c]);
        break;
    case DSOPS_KV_SPLIT_INT8:
        for (int c = 0; c < Dc; c++)
            pc_put_i8(&a->key_nope, blk, off, c, rd->nope_i8[c]);
        for (int g = 0; g < G; g++)
            pc_put_f32(&a->key_nope_scale, blk, off, g, rd->scale[g]);
        for (int c = 0; c < Dr; c++)
            pc_put_u16(&a->key_rope, blk, off, c, rd->rope[c]);
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

static int32_t zoo_value(tu_rng *r, int32_t used)
{
    switch (tu_rng_int(r, 0, 5)) {
    case 0: return -1;
    case 1: return -5;
    case 2: return INT32_MIN;
    case 3: return INT32_MAX;
    case 4: return used;
    default: return used + 7;
    }
}

static int32_t valid_value(tu_rng *r, int32_t used) { return used > 0 ? (int32_t)tu_rng_int(r, 0, used - 1) : -1; }

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
    tp_problem *p = tu_calloc(1, sizeof *p);
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
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    const int B = sp->B, N = sp->N, Dc = sp->Dc, Dr = sp->Dr, K = sp->K, BS = sp->BS, G = Dc / 128;

    /* sequences: cu [B+1], used [B] */
    const int64_t T = p->T = pc_sequences(B, sp->S, sp->seqused, &p->cu, &p->used);

    /* block table [B, MB]: a random permutation of the physical blocks, five kinds of garbage */
    int64_t keys[TP_MAX_B];
    for (int b = 0; b < B; b++)
        keys[b] = sp->seqused[b];
    const pc_paging pg = pc_block_table(&rng, B, keys, BS, sp->extra_blocks, sp->extra_cols,
                                        sp->garbage_table ? 5 : 0, NULL);
    const int64_t NB = p->NB = pg.NB, MB = p->MB = pg.MB;
    p->table = pg.table;
    const int32_t *owner = pg.owner; /* sequence owning each physical block, -1 none */
    /* NB itself is also garbage for a table entry: use it once if there is an unused column */
    if (sp->garbage_table && B > 0 && MB > (sp->seqused[0] + BS - 1) / BS)
        p->table[MB - 1] = (int32_t)NB;

    /* top-k indices [T, K] and lengths [T] */
    p->idx = tu_calloc((size_t)(T * K), sizeof(int32_t));
    if (sp->with_topk_length)
        p->len = tu_calloc((size_t)T, sizeof(int32_t));
    int32_t *seqperm = NULL;
    for (int b = 0; b < B; b++) {
        int32_t used = sp->seqused[b];
        for (int64_t t = p->cu[b]; t < p->cu[b + 1]; t++) {
            int32_t *row = p->idx + t * K;
            switch (sp->index_mode) {
            case TP_IDX_VALID:
                for (int j = 0; j < K; j++)
                    row[j] = (j > 0 && tu_rng_int(&rng, 0, 7) == 0) ? row[j - 1] : valid_value(&rng, used);
                break;
            case TP_IDX_ZOO:
                for (int j = 0; j < K; j++) {
                    int64_t pick = tu_rng_int(&rng, 0, 15);
                    row[j] = pick < 7 ? valid_value(&rng, used)
                                      : (pick == 7 && j > 0 ? row[j - 1] : zoo_value(&rng, used));
                }
                break;
            case TP_IDX_INVALID:
                for (int j = 0; j < K; j++)
                    row[j] = zoo_value(&rng, used);
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
                            int32_t k = (int32_t)tu_rng_int(&rng, j, used - 1);
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
                switch (tu_rng_int(&rng, 0, 5)) {
                case 0: p->len[t] = 0; break;
                case 1: p->len[t] = K + 3; break;
                case 2: p->len[t] = INT32_MAX; break;
                default: p->len[t] = (int32_t)tu_rng_int(&rng, 0, K); break;
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
        uint16_t *q = tu_calloc((size_t)n, sizeof(uint16_t));
        for (int64_t i = 0; i < n; i++)
            q[i] = 0xffff; /* NaN in the padding: never read */
        p->qbuf[0] = q;
        a->q_nope = view3(q, DSOPS_BF16, T, N, Dc, ts, W);
        a->q_rope = view3(q + Dc, DSOPS_BF16, T, N, Dr, ts, W);
    } else {
        p->qbuf[0] = tu_calloc((size_t)(T * N * Dc), sizeof(uint16_t));
        p->qbuf[1] = tu_calloc((size_t)(T * N * Dr), sizeof(uint16_t));
        a->q_nope = view3(p->qbuf[0], DSOPS_BF16, T, N, Dc, N * Dc, Dc);
        a->q_rope = view3(p->qbuf[1], DSOPS_BF16, T, N, Dr, N * Dr, Dr);
    }
    for (int64_t t = 0; t < T; t++)
        for (int h = 0; h < N; h++) {
            for (int c = 0; c < Dc; c++)
                pc_put_u16(&a->q_nope, t, h, c, tu_bf16(tu_rng_uniform(&rng, -sp->q_amp, sp->q_amp)));
            for (int c = 0; c < Dr; c++)
                pc_put_u16(&a->q_rope, t, h, c, tu_bf16(tu_rng_uniform(&rng, -sp->q_amp, sp->q_amp)));
            if (sp->neg_inf)
                pc_put_u16(&a->q_nope, t, h, 0, tu_bf16(1e30f));
        }

    /* caches: buffers filled with 0xff bytes (bf16 / fp32 NaN, int8 -1) where no row is written */
    size_t kvbytes[4] = {0, 0, 0, 0};
    const int64_t rows = NB * BS;
    if (sp->layout == DSOPS_KV_SPLIT_BF16) {
        if (sp->strided_kv) {
            int64_t W = Dc + Dr + 3, bs = BS * W + 7;
            kvbytes[0] = (size_t)(NB * bs) * 2;
            p->kvbuf[0] = tu_calloc(kvbytes[0], 1);
            a->key_nope = view3(p->kvbuf[0], DSOPS_BF16, NB, BS, Dc, bs, W);
            a->key_rope = view3((uint16_t *)p->kvbuf[0] + Dc, DSOPS_BF16, NB, BS, Dr, bs, W);
        } else {
            kvbytes[0] = (size_t)(rows * Dc) * 2;
            kvbytes[1] = (size_t)(rows * Dr) * 2;
            p->kvbuf[0] = tu_calloc(kvbytes[0], 1);
            p->kvbuf[1] = tu_calloc(kvbytes[1], 1);
            a->key_nope = view3(p->kvbuf[0], DSOPS_BF16, NB, BS, Dc, BS * Dc, Dc);
            a->key_rope = view3(p->kvbuf[1], DSOPS_BF16, NB, BS, Dr, BS * Dr, Dr);
        }
    } else if (sp->layout == DSOPS_KV_SPLIT_INT8) {
        if (sp->strided_kv) {
            /* one byte buffer per row: nope int8 | rope bf16 | scales fp32 | padding */
            int64_t Wb = Dc + 2 * Dr + 4 * G + (sp->strided_kv == 2 ? 0 : 8);
            int64_t bs = BS * Wb + (sp->strided_kv == 2 ? 0 : 16);
            kvbytes[0] = (size_t)(NB * bs);
            p->kvbuf[0] = tu_calloc(kvbytes[0], 1);
            uint8_t *base = p->kvbuf[0];
            a->key_nope = view3(base, DSOPS_INT8, NB, BS, Dc, bs, Wb);
            a->key_rope = view3(base + Dc, DSOPS_BF16, NB, BS, Dr, bs / 2, Wb / 2);
            a->key_nope_scale = view3(base + Dc + 2 * Dr, DSOPS_FP32, NB, BS, G, bs / 4, Wb / 4);
        } else {
            kvbytes[0] = (size_t)(rows * Dc);
            kvbytes[1] = (size_t)(rows * G) * 4;
            kvbytes[2] = (size_t)(rows * Dr) * 2;
            for (int i = 0; i < 3; i++)
                p->kvbuf[i] = tu_calloc(kvbytes[i], 1);
            a->key_nope = view3(p->kvbuf[0], DSOPS_INT8, NB, BS, Dc, BS * Dc, Dc);
            a->key_nope_scale = view3(p->kvbuf[1], DSOPS_FP32, NB, BS, G, BS * G, G);
            a->key_rope = view3(p->kvbuf[2], DSOPS_BF16, NB, BS, Dr, BS * Dr, Dr);
        }
    } else {
        int64_t W = 656 + (sp->strided_kv ? 12 : 0), bs = BS * W + (sp->strided_kv ? 8 : 0);
        kvbytes[0] = (size_t)(NB * bs);
        p->kvbuf[0] = tu_calloc(kvbytes[0], 1);
        a->kv_packed = view3(p->kvbuf[0], DSOPS_UINT8, NB, BS, 656, bs, W);
    }
    for (int i = 0; i < 4; i++)
        if (p->kvbuf[i])
            memset(p->kvbuf[i], 0xff, kvbytes[i]);

    /* which rows does some token use (spec §4.4 steps 1-2)? */
    unsigned char *row_used = tu_calloc((size_t)rows, 1);
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
    row_data *rd = tu_calloc(1, sizeof *rd), *inf_row = tu_calloc(1, sizeof *inf_row);
    for (int c = 0; c < 4096; c++) {
        inf_row->nope_bf16[c] = inf_row->rope[c] = 0x7f80; /* bf16 +Inf */
        inf_row->nope_i8[c] = 1;
    }
    for (int g = 0; g < 32; g++)
        inf_row->scale[g] = INFINITY;
    for (int64_t row = 0; row < rows; row++) {
        int64_t blk = row / BS;
        int dead = sp->neg_inf && (owner[blk] == 0 || row % 3 == 0);
        gen_row(sp, &rng, dead, rd); /* drawn for every row so the data do not depend on nan_fill / inf_fill */
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
        p->sinks = tu_calloc((size_t)N, sizeof(float));
        for (int64_t h = 0; h < N; h++)
            p->sinks[h] = sp->with_sinks == 2 && h < 3 ? special[h] : tu_rng_uniform(&rng, -3.0f, 3.0f);
        a->sinks = dsops_tensor_make(p->sinks, DSOPS_FP32, 1, (const int64_t[]){N});
    }
    pc_sequence_views(B, MB, p->table, p->cu, p->used, &a->block_table, &a->cu_seqlens_q, &a->seqused_kv);

    /* outputs inside guarded (and, when strided, padded) buffers */
    int64_t oW = Dc + (sp->strided_out ? 4 : 0), ots = N * oW + (sp->strided_out ? 2 : 0);
    p->out_buf_n = T * ots + 2 * PC_GUARD;
    p->out_buf = tu_calloc((size_t)p->out_buf_n, sizeof(uint16_t));
    a->out = view3(p->out_buf + PC_GUARD, DSOPS_BF16, T, N, Dc, ots, oW);
    if (sp->with_lse) {
        int64_t lW = N + (sp->strided_out ? 3 : 0);
        p->lse_buf_n = T * lW + 2 * PC_GUARD;
        p->lse_buf = tu_calloc((size_t)p->lse_buf_n, sizeof(float));
        const int64_t shape[2] = {T, N}, stride[1] = {lW};
        a->lse = pc_view(p->lse_buf + PC_GUARD, DSOPS_FP32, 2, shape, stride);
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
        pc_put_u16(&a->q_nope, t, h, c, tu_bf16(v));
    else
        pc_put_u16(&a->q_rope, t, h, c - p->sp.Dc, tu_bf16(v));
}

void tp_set_key_rope(tp_problem *p, int64_t b, int64_t idx, int64_t c, float v)
{
    const dsops_sparse_flash_attention_v32_args *a = &p->args;
    int64_t blk = p->table[b * p->MB + idx / p->sp.BS], off = idx % p->sp.BS;
    uint16_t h = tu_bf16(v);
    if (p->sp.layout == DSOPS_KV_PACKED_INT8 || p->sp.layout == DSOPS_KV_FLASHMLA_FP8) {
        const int at = p->sp.layout == DSOPS_KV_PACKED_INT8 ? 512 : 528; /* the rope's first byte */
        uint8_t *row = tf_eaddr(&a->kv_packed, blk, off, 0);
        row[at + 2 * c] = (uint8_t)(h & 0xff);
        row[at + 2 * c + 1] = (uint8_t)(h >> 8);
    } else {
        pc_put_u16(&a->key_rope, blk, off, c, h);
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
    pc_fill_sentinel(p->out_buf, sizeof(uint16_t), p->out_buf_n, TP_SENTINEL_BF16);
    pc_fill_sentinel(p->lse_buf, sizeof(float), p->lse_buf_n, TP_SENTINEL_F32_BITS);
}

int tp_outputs_untouched(const tp_problem *p)
{
    return pc_holds_sentinel(p->out_buf, sizeof(uint16_t), p->out_buf_n, TP_SENTINEL_BF16) &&
           pc_holds_sentinel(p->lse_buf, sizeof(float), p->lse_buf_n, TP_SENTINEL_F32_BITS);
}

void tp_reference_of(const dsops_sparse_flash_attention_v32_args *a, uint16_t **ref_out, float **ref_lse)
{
    const int64_t T = a->out.shape[0], N = a->out.shape[1], Dc = a->out.shape[2];
    dsops_sparse_flash_attention_v32_args r = *a;
    *ref_out = tu_calloc((size_t)(T * N * Dc), sizeof(uint16_t));
    *ref_lse = tu_calloc((size_t)(T * N), sizeof(float));
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

int tp_compare(const char *label, const dsops_sparse_flash_attention_v32_args *a, const uint16_t *ref_out,
               const float *ref_lse)
{
    const int64_t T = a->out.shape[0], N = a->out.shape[1], Dc = a->out.shape[2];
    const size_t n_out = (size_t)(T * N * Dc), n_lse = (size_t)(T * N);
    uint16_t *ob = tu_calloc(n_out, sizeof(uint16_t));
    uint32_t *lb = tu_calloc(n_lse, sizeof(uint32_t));
    float *of = tu_calloc(n_out, sizeof(float)), *rf = tu_calloc(n_out, sizeof(float));
    tp_extract(a, ob, lb);
    for (size_t i = 0; i < n_out; i++) {
        of[i] = tu_f32(ob[i]);
        rf[i] = tu_f32(ref_out[i]);
    }
    int ok = 1;
    const tu_tol tol_out = {a->p_mode == DSOPS_P_TILED ? 5e-4 : 1e-4, 0.005, 0.005};
    const tu_tol tol_lse = {1e-6, 8.01 / 65536.0, 0.005};
    ok &= tu_compare_close_part(label, "out", of, rf, n_out, tol_out);
    if (a->lse.data)
        ok &= tu_compare_close_part(label, "lse", (const float *)lb, ref_lse, n_lse, tol_lse);
    /* lonely rows: exactly +0 and +Inf */
    int64_t lonely = 0, bad_t = -1, bad_h = -1;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < N; h++) {
            if (!(isinf(ref_lse[t * N + h]) && ref_lse[t * N + h] > 0))
                continue;
            lonely++;
            int row_ok = 1;
            for (int64_t d = 0; d < Dc; d++)
                row_ok &= ob[(t * N + h) * Dc + d] == 0;
            if (a->lse.data) {
                float l;
                memcpy(&l, &lb[t * N + h], 4);
                row_ok &= isinf(l) && l > 0;
            }
            if (!row_ok && bad_t < 0)
                bad_t = t, bad_h = h;
        }
    if (tu_verbose())
        printf("  %s: %lld lonely rows of %lld\n", label, (long long)lonely, (long long)(T * N));
    if (lonely)
        ok &= tu_check(bad_t < 0, "%s: lonely row t=%lld h=%lld is not exactly out = +0, lse = +Inf (%lld lonely rows)",
                       label, (long long)bad_t, (long long)bad_h, (long long)lonely);
    /* poisoned rows (ref lse NaN, spec §2.10 A3): NaN in every element; a row whose reference holds no NaN
     * holds none either */
    int64_t poisoned = 0;
    bad_t = bad_h = -1;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < N; h++) {
            const uint16_t *o = ob + (t * N + h) * Dc, *r = ref_out + (t * N + h) * Dc;
            int ref_nan = isnan(ref_lse[t * N + h]), row_ok = 1, ref_any_nan = 0, any_nan = 0;
            for (int64_t d = 0; d < Dc; d++) {
                ref_any_nan |= isnan(tu_f32(r[d]));
                any_nan |= isnan(tu_f32(o[d]));
                if (ref_nan)
                    row_ok &= isnan(tu_f32(o[d]));
            }
            if (!ref_any_nan)
                row_ok &= !any_nan;
            if (a->lse.data) {
                float l;
                memcpy(&l, &lb[t * N + h], 4);
                row_ok &= isnan(l) == ref_nan;
            }
            poisoned += ref_nan;
            if (!row_ok && bad_t < 0)
                bad_t = t, bad_h = h;
        }
    if (tu_verbose())
        printf("  %s: %lld poisoned rows of %lld\n", label, (long long)poisoned, (long long)(T * N));
    ok &= tu_check(bad_t < 0, "%s: row t=%lld h=%lld breaks the NaN rule: %s", label, (long long)bad_t,
                   (long long)bad_h, "NaN throughout where the reference is NaN (lse NaN), no NaN where it has none");
    free(ob);
    free(lb);
    free(of);
    free(rf);
    return ok;
}

int tp_check(tp_problem *p, const char *label)
{
    int ok = tp_compare(label, &p->args, p->ref_out, p->ref_lse);
    ok &= pc_check_outside_view(label, "out", p->out_buf, sizeof(uint16_t), p->out_buf_n, TP_SENTINEL_BF16,
                                &p->args.out);
    if (p->lse_buf)
        ok &= pc_check_outside_view(label, "lse", p->lse_buf, sizeof(float), p->lse_buf_n, TP_SENTINEL_F32_BITS,
                                    &p->args.lse);
    return ok;
}
