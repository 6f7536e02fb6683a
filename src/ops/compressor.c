/* compressor (spec §3.4): gated pooling of every R consecutive positions into one compressed entry.
 *
 * One call: validate everything (V7 for every written position and every pre-call candidate, rows
 * shared between sequences) -> the fp32 projections of every token (oneDNN matmuls, ape added) ->
 * every closing window's entry from fresh projections and the states as they were when the call began
 * -> zero rows -> the state rows of every token, per sequence in position order (later positions win a
 * shared ring row). States are written last, so every read of a pre-call position sees the old value. */
#include <math.h>
#include <stdlib.h>

#include "dispatch.h"
#include "internal.h"
#include "linear.h"
#include "primitives.h"
#include "sequences.h"

typedef dsops_compressor_args cmp_args;

#define DR 64            /* rotary dims (fixed, spec §1.2) */
enum { MAP_WKV, MAP_WGATE, MAP_COUNT };

dsops_status dsops_compressor_init(cmp_args *a, dsops_preset preset)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    memset(a, 0, sizeof *a);
    a->overlap = -1;
    a->rotate = -1;
    a->norm_eps = 1e-6f;
    a->rope_mode = DSOPS_ROPE_INTERLEAVED;
    a->rope_inverse = 0;
    a->out_layout = DSOPS_COMPRESSOR_PACKED;
    if (preset != DSOPS_PRESET_V4_FLASH && preset != DSOPS_PRESET_V4_PRO)
        return dsops_fail(DSOPS_ERR_PARAM, "preset = %d: compressor exists only for the V4 presets", (int)preset);
    dsops_clear_error();
    return DSOPS_OK;
}

typedef struct cmp_dims {
    int64_t T, H, D, R, C, CD, B, NO;
    int64_t NBS, BSS, MBS, NBS2, BSS2, MBS2;
    bool rotate;
} cmp_dims;

/* ---- validation: shapes, dtypes, parameters ------------------------------------------------------ */

static dsops_status check_weights(const cmp_args *a, cmp_dims *d)
{
    const unsigned bf16 = DSOPS_DT(DSOPS_BF16), wide = DSOPS_DT(DSOPS_BF16) | DSOPS_DT(DSOPS_FP32);
    DSOPS_TRY(dsops_check_tensor(&a->norm_weight, "norm_weight", 1, wide, false));
    d->D = a->norm_weight.shape[0];
    if (d->D < DR)
        return dsops_fail(DSOPS_ERR_SHAPE, "norm_weight.shape[0] = %lld (D), expected >= 64", (long long)d->D);
    DSOPS_TRY(dsops_check_tensor(&a->ape, "ape", 2, DSOPS_DT(DSOPS_FP32), true));
    d->R = a->ape.shape[0];
    d->CD = a->ape.shape[1];
    if (d->R < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "ape.shape[0] = 0 (R), expected >= 1");
    if (d->CD != d->D && d->CD != 2 * d->D)
        return dsops_fail(DSOPS_ERR_SHAPE, "ape.shape[1] = %lld, expected C * D with C 1 or 2 (D = %lld)",
                          (long long)d->CD, (long long)d->D);
    d->C = d->CD / d->D;
    DSOPS_TRY(dsops_check_tensor(&a->wkv, "wkv", 2, bf16, true));
    DSOPS_TRY(dsops_check_dim(&a->wkv, "wkv", 0, d->CD, "C * D of ape"));
    d->H = a->wkv.shape[1];
    if (d->H < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "wkv.shape[1] = 0 (H), expected >= 1");
    DSOPS_TRY(dsops_check_tensor(&a->wgate, "wgate", 2, bf16, true));
    DSOPS_TRY(dsops_check_dim(&a->wgate, "wgate", 0, d->CD, "C * D of ape"));
    DSOPS_TRY(dsops_check_dim(&a->wgate, "wgate", 1, d->H, "H of wkv"));
    d->rotate = dsops_tensor_present(&a->hadamard);
    if (d->rotate) {
        DSOPS_TRY(dsops_check_tensor(&a->hadamard, "hadamard", 2, wide, true));
        DSOPS_TRY(dsops_check_dim(&a->hadamard, "hadamard", 0, d->D, "D of norm_weight"));
        DSOPS_TRY(dsops_check_dim(&a->hadamard, "hadamard", 1, d->D, "D of norm_weight"));
    }
    return DSOPS_OK;
}

/* The paged state [NB, BS, C*D] fp32 and its block table [B, MB] int32. */
static dsops_status check_state(const dsops_tensor *state, const char *sname, const dsops_tensor *table,
                                const char *tname, const cmp_dims *d, int64_t *NB, int64_t *BS, int64_t *MB)
{
    DSOPS_TRY(dsops_check_tensor(state, sname, 3, DSOPS_DT(DSOPS_FP32), true));
    *NB = state->shape[0];
    *BS = state->shape[1];
    if (*BS < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "%s.shape[1] = 0 (block size), expected >= 1", sname);
    DSOPS_TRY(dsops_check_dim(state, sname, 2, d->CD, "C * D of ape"));
    DSOPS_TRY(dsops_check_tensor(table, tname, 2, DSOPS_DT(DSOPS_INT32), false));
    DSOPS_TRY(dsops_check_dim(table, tname, 0, d->B, "B = cu_seqlens_q.shape[0] - 1"));
    *MB = table->shape[1];
    return DSOPS_OK;
}

static dsops_status check_shapes(const cmp_args *a, cmp_dims *d)
{
    const unsigned wide = DSOPS_DT(DSOPS_BF16) | DSOPS_DT(DSOPS_FP32), i32 = DSOPS_DT(DSOPS_INT32);
    DSOPS_TRY(check_weights(a, d));
    DSOPS_TRY(dsops_check_tensor(&a->x, "x", 2, DSOPS_DT(DSOPS_BF16), true));
    d->T = a->x.shape[0];
    DSOPS_TRY(dsops_check_dim(&a->x, "x", 1, d->H, "H of wkv"));
    DSOPS_TRY(dsops_check_tensor(&a->cu_seqlens_q, "cu_seqlens_q", 1, i32, false));
    if (a->cu_seqlens_q.shape[0] < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "cu_seqlens_q.shape[0] = 0, expected B + 1 >= 1");
    d->B = a->cu_seqlens_q.shape[0] - 1;
    DSOPS_TRY(dsops_check_tensor(&a->start_pos, "start_pos", 1, i32, false));
    DSOPS_TRY(dsops_check_dim(&a->start_pos, "start_pos", 0, d->B, "B = cu_seqlens_q.shape[0] - 1"));
    DSOPS_TRY(check_state(&a->kv_state, "kv_state", &a->kv_state_block_table, "kv_state_block_table", d, &d->NBS,
                          &d->BSS, &d->MBS));
    DSOPS_TRY(check_state(&a->score_state, "score_state", &a->score_state_block_table, "score_state_block_table", d,
                          &d->NBS2, &d->BSS2, &d->MBS2));
    DSOPS_TRY(dsops_check_tensor(&a->out, "out", 2, DSOPS_DT(DSOPS_BF16), true));
    d->NO = a->out.shape[0];
    DSOPS_TRY(dsops_check_dim(&a->out, "out", 1, d->D, "D of norm_weight"));
    DSOPS_TRY(dsops_check_tensor(&a->rope_cos, "rope_cos", 2, wide, true));
    DSOPS_TRY(dsops_check_dim(&a->rope_cos, "rope_cos", 0, d->NO, "NO = rows of out"));
    DSOPS_TRY(dsops_check_dim(&a->rope_cos, "rope_cos", 1, DR, "rotary width"));
    DSOPS_TRY(dsops_check_tensor(&a->rope_sin, "rope_sin", 2, wide, true));
    DSOPS_TRY(dsops_check_dim(&a->rope_sin, "rope_sin", 0, d->NO, "NO = rows of out"));
    DSOPS_TRY(dsops_check_dim(&a->rope_sin, "rope_sin", 1, DR, "rotary width"));
    if (dsops_tensor_present(&a->out_count)) {
        DSOPS_TRY(dsops_check_tensor(&a->out_count, "out_count", 1, i32, false));
        DSOPS_TRY(dsops_check_dim(&a->out_count, "out_count", 0, d->B, "B = cu_seqlens_q.shape[0] - 1"));
    }
    return DSOPS_OK;
}

static dsops_status check_params(const cmp_args *a, const cmp_dims *d)
{
    if (a->dim != 0 && a->dim != d->D)
        return dsops_fail(DSOPS_ERR_PARAM, "dim (D) = %d, but the shapes give D = %lld (norm_weight)", a->dim, (long long)d->D);
    if (a->ratio != 0 && a->ratio != d->R)
        return dsops_fail(DSOPS_ERR_PARAM, "ratio = %d, but the shapes give R = %lld (ape rows)", a->ratio, (long long)d->R);
    if (a->overlap != -1 && a->overlap != (d->C == 2))
        return dsops_fail(DSOPS_ERR_PARAM, "overlap = %d, but the shapes give C = %lld (ape, wkv: C * D)", a->overlap,
                          (long long)d->C);
    if (a->rotate != -1 && a->rotate != (int)d->rotate)
        return dsops_fail(DSOPS_ERR_PARAM, "rotate = %d, but hadamard is %s", a->rotate, d->rotate ? "given" : "absent");
    if (!isfinite(a->norm_eps) || a->norm_eps < 0)
        return dsops_fail(DSOPS_ERR_PARAM, "norm_eps = %g, expected finite and >= 0", (double)a->norm_eps);
    if ((int)a->rope_mode < 0 || (int)a->rope_mode > DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT)
        return dsops_fail(DSOPS_ERR_PARAM, "rope_mode = %d is not a dsops_rope_mode value", (int)a->rope_mode);
    if (a->out_layout != DSOPS_COMPRESSOR_PACKED && a->out_layout != DSOPS_COMPRESSOR_ROW_PER_SEQ)
        return dsops_fail(DSOPS_ERR_PARAM, "out_layout = %d is not a dsops_compressor_layout value", (int)a->out_layout);
    return DSOPS_OK;
}

static dsops_status check_aliasing(const cmp_args *a)
{
    const dsops_named_tensor outs[] = {{&a->out, "out"}, {&a->out_count, "out_count"}, {&a->kv_state, "kv_state"},
                                       {&a->score_state, "score_state"}};
    const dsops_named_tensor ins[] = {
        {&a->x, "x"}, {&a->cu_seqlens_q, "cu_seqlens_q"}, {&a->start_pos, "start_pos"}, {&a->wkv, "wkv"},
        {&a->wgate, "wgate"}, {&a->ape, "ape"}, {&a->norm_weight, "norm_weight"}, {&a->hadamard, "hadamard"},
        {&a->rope_cos, "rope_cos"}, {&a->rope_sin, "rope_sin"}, {&a->kv_state_block_table, "kv_state_block_table"},
        {&a->score_state_block_table, "score_state_block_table"}};
    return dsops_check_outputs_apart(outs, sizeof outs / sizeof outs[0], ins, sizeof ins / sizeof ins[0]);
}

/* ---- validation: sequences, windows, paged state ------------------------------------------------ */

/* Per-sequence plan (scratch): positions [start, start + S), closing windows [k0, k0 + count), their
 * first output row. */
typedef struct cmp_seq {
    int64_t t0, S, start, k0, count, row0;
} cmp_seq;

/* A physical state row and the sequence that writes it (sorted to find rows shared by sequences). */
typedef struct cmp_row_owner {
    int64_t row, b;
} cmp_row_owner;

static int64_t table_at(const dsops_tensor *t, int64_t b, int64_t j)
{
    return *(const int32_t *)dsops_at2(t, b, j);
}

/* V7 for position p of sequence b in one state. */
static dsops_status check_position(const dsops_tensor *table, const char *tname, int64_t NB, int64_t BS, int64_t MB,
                                   int64_t b, int64_t p)
{
    int64_t j = p / BS;
    if (j >= MB)
        return dsops_fail(DSOPS_ERR_INDEX, "%s: position %lld of sequence %lld needs column %lld, but the table has %lld",
                          tname, (long long)p, (long long)b, (long long)j, (long long)MB);
    int64_t blk = table_at(table, b, j);
    if (blk < 0 || blk >= NB)
        return dsops_fail(DSOPS_ERR_INDEX, "%s[%lld][%lld] = %lld (position %lld), expected 0 ... %lld", tname,
                          (long long)b, (long long)j, (long long)blk, (long long)p, (long long)(NB - 1));
    return DSOPS_OK;
}

static int64_t slot_of(const dsops_tensor *table, int64_t BS, int64_t b, int64_t p)
{
    return table_at(table, b, p / BS) * BS + p % BS;
}

static int compare_owner(const void *x, const void *y)
{
    const cmp_row_owner *a = x, *b = y;
    if (a->row != b->row)
        return a->row < b->row ? -1 : 1;
    return a->b < b->b ? -1 : (a->b > b->b);
}

/* No physical row of a state is written by two sequences. owners: T entries of scratch. */
static dsops_status check_shared_rows(const cmp_args *a, const cmp_dims *d, const cmp_seq *seq, bool score,
                                      cmp_row_owner *owners)
{
    const dsops_tensor *table = score ? &a->score_state_block_table : &a->kv_state_block_table;
    int64_t BS = score ? d->BSS2 : d->BSS, n = 0;
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t i = 0; i < seq[b].S; i++)
            owners[n++] = (cmp_row_owner){slot_of(table, BS, b, seq[b].start + i), b};
    qsort(owners, (size_t)n, sizeof *owners, compare_owner);
    for (int64_t i = 1; i < n; i++)
        if (owners[i].row == owners[i - 1].row && owners[i].b != owners[i - 1].b)
            return dsops_fail(DSOPS_ERR_INDEX, "%s: sequences %lld and %lld both write physical row %lld",
                              score ? "score_state_block_table" : "kv_state_block_table", (long long)owners[i - 1].b,
                              (long long)owners[i].b, (long long)owners[i].row);
    return DSOPS_OK;
}

/* Sequence values, windows, output rows, V7 and shared rows; fills seq[B]. */
static dsops_status plan_sequences(const cmp_args *a, const cmp_dims *d, cmp_seq *seq, cmp_row_owner *owners)
{
    DSOPS_TRY(dsops_check_sequence_values(&a->cu_seqlens_q, &a->start_pos, "start_pos", d->B, d->T));
    int64_t R = d->R, rows = 0;
    for (int64_t b = 0; b < d->B; b++) {
        cmp_seq *s = &seq[b];
        s->t0 = dsops_i32_at(&a->cu_seqlens_q, b);
        s->S = dsops_i32_at(&a->cu_seqlens_q, b + 1) - s->t0;
        s->start = dsops_i32_at(&a->start_pos, b);
        if (s->start + s->S > INT32_MAX)
            return dsops_fail(DSOPS_ERR_INDEX, "start_pos[%lld] = %lld with %lld tokens passes position 2^31 - 1",
                              (long long)b, (long long)s->start, (long long)s->S);
        s->k0 = s->start / R;
        s->count = (s->start + s->S) / R - s->k0;
        s->row0 = a->out_layout == DSOPS_COMPRESSOR_PACKED ? rows : b;
        rows += s->count;
        if (a->out_layout == DSOPS_COMPRESSOR_ROW_PER_SEQ && s->count > 1)
            return dsops_fail(DSOPS_ERR_SHAPE, "out_layout row_per_seq: sequence %lld closes %lld windows, at most 1 allowed",
                              (long long)b, (long long)s->count);
        /* needed positions: the written ones and, when a window closes, the pre-call candidates */
        int64_t lo = s->start;
        if (s->count > 0) {
            lo = (s->k0 - (d->C - 1)) * R;
            lo = lo < 0 ? 0 : lo;
        }
        for (int64_t p = lo; p < s->start + s->S; p++) {
            DSOPS_TRY(check_position(&a->kv_state_block_table, "kv_state_block_table", d->NBS, d->BSS, d->MBS, b, p));
            DSOPS_TRY(check_position(&a->score_state_block_table, "score_state_block_table", d->NBS2, d->BSS2,
                                     d->MBS2, b, p));
        }
    }
    if (a->out_layout == DSOPS_COMPRESSOR_PACKED && d->NO < rows)
        return dsops_fail(DSOPS_ERR_SHAPE, "out.shape[0] = %lld (NO), but the call closes %lld windows (packed)",
                          (long long)d->NO, (long long)rows);
    if (a->out_layout == DSOPS_COMPRESSOR_ROW_PER_SEQ && d->NO < d->B)
        return dsops_fail(DSOPS_ERR_SHAPE, "out.shape[0] = %lld (NO), expected >= B = %lld (row_per_seq)",
                          (long long)d->NO, (long long)d->B);
    DSOPS_TRY(check_shared_rows(a, d, seq, false, owners));
    return check_shared_rows(a, d, seq, true, owners);
}

/* ---- prepared weights ------------------------------------------------------------------------ */

static void weight_sources(const cmp_args *a, const cmp_dims *d, dsops_linear_source src[MAP_COUNT])
{
    src[MAP_WKV] = (dsops_linear_source){"wkv", a->wkv.data, DSOPS_BF16, d->CD, d->H, a->wkv.stride[0], 1};
    src[MAP_WGATE] = (dsops_linear_source){"wgate", a->wgate.data, DSOPS_BF16, d->CD, d->H, a->wgate.stride[0], 1};
}

dsops_status dsops_compressor_prepare(dsops_context *ctx, const cmp_args *a, dsops_prepared **out)
{
    if (!a || !out)
        return dsops_fail(DSOPS_ERR_NULL, "%s is NULL", a ? "prepared" : "args");
    *out = NULL;
    cmp_dims d = {0};
    DSOPS_TRY(check_weights(a, &d));
    dsops_linear_source src[MAP_COUNT];
    weight_sources(a, &d, src);
    int threads = 1;
    DSOPS_TRY(dsops_context_thread_count(ctx, &threads));
    DSOPS_TRY(dsops_prepared_make("compressor", src, MAP_COUNT, threads, out));
    dsops_clear_error();
    return DSOPS_OK;
}

/* ---- execution ------------------------------------------------------------------------------- */

/* One call's view of the data an entry needs. */
typedef struct cmp_call {
    const cmp_args *a;
    const cmp_dims *d;
    const cmp_seq *seq;
    const float *kvp, *scp; /* [T, C*D] fresh projections (ape included in scp) */
    const float *gamma;     /* [D] norm_weight widened */
    const float *hm;        /* [D, D] hadamard widened (rotate only) */
    void (*pool)(const float *const *kv, const float *const *sc, int n, int64_t D, float *pooled, float *e);
} cmp_call;

/* Value and logit rows (C*D fp32) of position u of sequence b: fresh or the pre-call state. */
static void candidate_rows(const cmp_call *c, int64_t b, int64_t u, const float **kv, const float **sc)
{
    const cmp_seq *s = &c->seq[b];
    const cmp_args *a = c->a;
    if (u >= s->start) {
        int64_t t = s->t0 + (u - s->start);
        *kv = c->kvp + t * c->d->CD;
        *sc = c->scp + t * c->d->CD;
        return;
    }
    int64_t rk = slot_of(&a->kv_state_block_table, c->d->BSS, b, u), rs = slot_of(&a->score_state_block_table, c->d->BSS2, b, u);
    *kv = dsops_at3(&a->kv_state, rk / c->d->BSS, rk % c->d->BSS, 0);
    *sc = dsops_at3(&a->score_state, rs / c->d->BSS2, rs % c->d->BSS2, 0);
}

/* Step 3 for window k of sequence b: pooled[0:D] (fp32). e: DSOPS_CMP_POOL_WORK(D) floats; kvr, scr: C R
 * candidate row pointers each. */
static void pool_window(const cmp_call *c, int64_t b, int64_t k, float *pooled, float *e, const float **kvr,
                        const float **scr)
{
    int64_t R = c->d->R, D = c->d->D, n = 0;
    if (c->d->C == 2) /* previous window's positions, first half of the channels */
        for (int64_t u = (k - 1) * R; u < k * R; u++)
            if (u >= 0) {
                candidate_rows(c, b, u, &kvr[n], &scr[n]);
                n++;
            }
    for (int64_t u = k * R; u < k * R + R; u++) { /* this window: second half (overlap) or all channels */
        candidate_rows(c, b, u, &kvr[n], &scr[n]);
        if (c->d->C == 2) {
            kvr[n] += D;
            scr[n] += D;
        }
        n++;
    }
    c->pool(kvr, scr, (int)n, D, pooled, e);
}

/* Step 4 for one entry: out row r from pooled (fp32, clobbered). tmp: D floats. */
static void finish_entry(const cmp_call *c, int64_t r, float *pooled, float *tmp)
{
    const cmp_args *a = c->a;
    int64_t D = c->d->D;
    for (int64_t i = 0; i < D; i++)
        pooled[i] = dsops_round_bf16(pooled[i]);
    dsops_rmsnorm_row(pooled, (int)D, c->gamma, a->norm_eps, pooled);
    uint16_t *y = dsops_at2(&a->out, r, 0);
    for (int64_t i = 0; i < D; i++)
        y[i] = dsops_bf16_round_bits(pooled[i]);
    dsops_rope_bf16_slice(y + D - DR, &a->rope_cos, &a->rope_sin, r, a->rope_mode, a->rope_inverse != 0, y + D - DR);
    if (!c->d->rotate)
        return;
    dsops_bf16_to_fp32(y, pooled, (size_t)D);
    dsops_hadamard_row(pooled, (int)D, c->hm, tmp);
    for (int64_t i = 0; i < D; i++)
        y[i] = dsops_bf16_round_bits(tmp[i]);
}

/* Step 6 for sequence b: its tokens' state rows in position order. */
static void write_states(const cmp_call *c, int64_t b)
{
    const cmp_args *a = c->a;
    const cmp_dims *d = c->d;
    const cmp_seq *s = &c->seq[b];
    for (int64_t i = 0; i < s->S; i++) {
        int64_t p = s->start + i, t = s->t0 + i;
        int64_t rk = slot_of(&a->kv_state_block_table, d->BSS, b, p), rs = slot_of(&a->score_state_block_table, d->BSS2, b, p);
        memcpy(dsops_at3(&a->kv_state, rk / d->BSS, rk % d->BSS, 0), c->kvp + t * d->CD, (size_t)d->CD * 4);
        memcpy(dsops_at3(&a->score_state, rs / d->BSS2, rs % d->BSS2, 0), c->scp + t * d->CD, (size_t)d->CD * 4);
    }
}

/* Scratch areas of one call (byte offsets). */
typedef struct cmp_layout {
    size_t seq, owners, entries, kvp, scp, gamma, hm, per_thread, total;
} cmp_layout;

static cmp_layout make_layout(const cmp_dims *d, int threads)
{
    cmp_layout L;
    size_t T = (size_t)d->T, CD = (size_t)d->CD, D = (size_t)d->D, CR = (size_t)(d->C * d->R), off = 0;
    L.seq = off;     off += dsops_align64((size_t)d->B * sizeof(cmp_seq));
    L.owners = off;  off += dsops_align64(T * sizeof(cmp_row_owner));
    L.entries = off; off += dsops_align64((size_t)(d->NO + 1) * 2 * sizeof(int64_t)); /* (b, k) per entry */
    L.kvp = off;     off += dsops_align64(T * CD * 4);                               /* [T, C*D] */
    L.scp = off;     off += dsops_align64(T * CD * 4);                               /* [T, C*D] */
    L.gamma = off;   off += dsops_align64(D * 4);
    L.hm = off;      off += dsops_align64(d->rotate ? D * D * 4 : 0);
    L.per_thread = dsops_align64(2 * D * 4) + dsops_align64(DSOPS_CMP_POOL_WORK(D) * 4) + dsops_align64(CR * 2 * 8);
    L.total = off + L.per_thread * (size_t)threads;
    return L;
}

static dsops_status check_all(const cmp_args *a, cmp_dims *d)
{
    DSOPS_TRY(check_shapes(a, d));
    DSOPS_TRY(check_params(a, d));
    DSOPS_TRY(check_aliasing(a));
    dsops_linear_source src[MAP_COUNT];
    weight_sources(a, d, src);
    return dsops_prepared_check(a->prepared, "compressor", src, MAP_COUNT);
}

/* Steps 1 (projections, ape) to 5 (entries, zero rows, out_count). */
static dsops_status compute_entries(dsops_context *use, const cmp_args *a, const cmp_dims *d, const cmp_layout *L,
                                    char *scratch, const dsops_prepared *prep, int threads, dsops_isa isa, cmp_call *c)
{
    const cmp_seq *seq = (const cmp_seq *)(scratch + L->seq);
    float *kvp = (float *)(scratch + L->kvp), *scp = (float *)(scratch + L->scp);
    int64_t CD = d->CD, D = d->D, T = d->T;
    *c = (cmp_call){a, d, seq, kvp, scp, (float *)(scratch + L->gamma), (float *)(scratch + L->hm),
                    dsops_kernel_table_get(isa)->compressor.pool};
    dsops_widen_vector(&a->norm_weight, (int)D, (float *)c->gamma);
    if (d->rotate)
        for (int64_t i = 0; i < D; i++)
            dsops_widen_row(dsops_at2(&a->hadamard, i, 0), a->hadamard.dtype, (int)D, (float *)c->hm + i * D);
    if (T > 0) {
        dsops_linear_job jobs[2] = {{prep->maps[MAP_WKV], a->x.data, a->x.stride[0], kvp, CD},
                                    {prep->maps[MAP_WGATE], a->x.data, a->x.stride[0], scp, CD}};
        DSOPS_TRY(dsops_linear_run(use, jobs, 2, T, threads, isa));
    }
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t i = 0; i < seq[b].S; i++) {
            const float *ape = dsops_at2(&a->ape, (seq[b].start + i) % d->R, 0);
            float *row = scp + (seq[b].t0 + i) * CD;
            for (int64_t j = 0; j < CD; j++)
                row[j] += ape[j];
        }
    /* the entries, one (b, k) pair each, in output-row order for packed */
    int64_t *entries = (int64_t *)(scratch + L->entries), n = 0;
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t k = seq[b].k0; k < seq[b].k0 + seq[b].count; k++) {
            entries[2 * n] = b;
            entries[2 * n + 1] = k;
            n++;
        }
    int64_t CR = d->C * d->R;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t i = 0; i < n; i++) {
        char *mine = scratch + (L->total - L->per_thread * (size_t)threads) + L->per_thread * (size_t)dsops_thread_num();
        float *pooled = (float *)mine, *tmp = pooled + D;
        float *e = (float *)(mine + dsops_align64(2 * (size_t)D * 4));
        const float **kvr =
            (const float **)(mine + dsops_align64(2 * (size_t)D * 4) + dsops_align64(DSOPS_CMP_POOL_WORK(D) * 4));
        const float **scr = kvr + CR;
        int64_t b = entries[2 * i], k = entries[2 * i + 1];
        pool_window(c, b, k, pooled, e, kvr, scr);
        finish_entry(c, seq[b].row0 + (k - seq[b].k0), pooled, tmp);
    }
    /* rows that receive no entry */
    for (int64_t r = 0; r < d->NO; r++) {
        bool used = a->out_layout == DSOPS_COMPRESSOR_PACKED ? r < n : (r < d->B && seq[r].count > 0);
        if (!used)
            memset(dsops_at2(&a->out, r, 0), 0, (size_t)D * 2);
    }
    if (dsops_tensor_present(&a->out_count))
        for (int64_t b = 0; b < d->B; b++)
            *(int32_t *)dsops_at1(&a->out_count, b) = (int32_t)seq[b].count;
    return DSOPS_OK;
}

dsops_status dsops_compressor(dsops_context *ctx, const cmp_args *a)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    cmp_dims d = {0};
    DSOPS_TRY(check_all(a, &d));
    dsops_context *use;
    DSOPS_TRY(dsops_context_begin(ctx, &use));
    int threads = use->threads;
    cmp_layout L = make_layout(&d, threads);
    char *scratch = dsops_scratch(use, L.total);
    dsops_status status = scratch ? DSOPS_OK : DSOPS_ERR_NOMEM;
    if (status == DSOPS_OK)
        status = plan_sequences(a, &d, (cmp_seq *)(scratch + L.seq), (cmp_row_owner *)(scratch + L.owners));
    const dsops_prepared *prep = NULL;
    dsops_prepared *own = NULL;
    dsops_linear_source src[MAP_COUNT];
    weight_sources(a, &d, src);
    if (status == DSOPS_OK && d.T > 0)
        status = dsops_prepared_for_call(a->prepared, "compressor", src, MAP_COUNT, threads, &prep, &own);
    if (status != DSOPS_OK) {
        dsops_context_end(ctx, use);
        return status;
    }
    /* nothing is written above this line */
    cmp_call c;
    status = compute_entries(use, a, &d, &L, scratch, prep, threads, use->isa, &c);
    if (status == DSOPS_OK) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (int64_t b = 0; b < d.B; b++)
            write_states(&c, b);
    }
    dsops_prepared_destroy(own);
    dsops_context_end(ctx, use);
    if (status == DSOPS_OK)
        dsops_clear_error();
    return status;
}
