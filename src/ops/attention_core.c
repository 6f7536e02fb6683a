/* Attention core (spec §2.10): gather -> QK -> softmax in the chosen p_mode -> PV. */
#include <math.h>
#include <stdio.h>

#include "attention_core.h"
#include "internal.h"

/* Byte offsets of the scratch areas of one dsops_attn_run. */
typedef struct core_layout {
    int qw, dpairs, dv_blocks, ntiles_max, npairs_max, chunk_tiles;
    size_t stage_stride, s_stride, p_stride, o_stride, pt_stride, vp_block_stride; /* in elements */
    size_t stage, kt, vp, s, p, o, o_tile, p_tile, head_state, total;              /* byte offsets */
} core_layout;

/* Keys are gathered and scored in chunks of this many 16-key tiles: the chunk's Kt (12 * 16 keys *
 * 1152 bytes = 221 KB for Dqk 576) stays in L2 between packing and scoring. */
#define SCORE_CHUNK_TILES 12

/* Rows are prefetched this many list entries ahead of the copy (random rows of a large cache). */
#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 32
#endif

static size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

/* A tile never needs to be longer than the key list. */
static int effective_tile(int p_tile, int n) { return p_tile < 1 ? 1 : (p_tile < n ? p_tile : n); }

static core_layout make_layout(const dsops_attn_shape *sh)
{
    core_layout L;
    L.qw = dsops_attn_q_width(sh->dqk);
    L.dpairs = L.qw / 2;
    L.dv_blocks = (sh->dv + DSOPS_VP_LANES - 1) / DSOPS_VP_LANES;
    L.ntiles_max = (sh->nmax + DSOPS_KT_LANES - 1) / DSOPS_KT_LANES;
    if (L.ntiles_max < 1)
        L.ntiles_max = 1;
    L.npairs_max = L.ntiles_max * DSOPS_KT_LANES / 2;
    L.chunk_tiles = L.ntiles_max < SCORE_CHUNK_TILES ? L.ntiles_max : SCORE_CHUNK_TILES;
    L.stage_stride = round_up((size_t)L.qw, 32);
    L.s_stride = (size_t)L.ntiles_max * DSOPS_KT_LANES;
    L.p_stride = L.s_stride;
    L.o_stride = (size_t)L.dv_blocks * DSOPS_VP_LANES;
    int longest = effective_tile(sh->p_tile, sh->nmax > 0 ? sh->nmax : 1);
    if (sh->p_first_max > longest)
        longest = sh->p_first_max < sh->nmax ? sh->p_first_max : (sh->nmax > 0 ? sh->nmax : 1);
    L.pt_stride = round_up((size_t)longest + 2, 32);
    L.vp_block_stride = (size_t)L.npairs_max * 32;
    size_t off = 0, nh = (size_t)sh->nh;
    L.stage = off; off += dsops_align64(DSOPS_KT_LANES * L.stage_stride * 2);
    L.kt = off;    off += dsops_align64((size_t)L.chunk_tiles * L.dpairs * 64);
    L.vp = off;    off += dsops_align64((size_t)L.dv_blocks * L.vp_block_stride * 2);
    L.s = off;     off += dsops_align64(nh * L.s_stride * 4);
    L.p = off;
    if (sh->p_mode == DSOPS_P_TILED)
        off += dsops_align64(nh * L.pt_stride * 2);
    else
        off += dsops_align64(nh * L.p_stride * (sh->p_mode == DSOPS_P_FP32 ? 4 : 2));
    L.o = off;     off += dsops_align64(nh * L.o_stride * 4);
    L.o_tile = off;
    if (sh->p_mode == DSOPS_P_TILED)
        off += dsops_align64(nh * L.o_stride * 4);
    L.head_state = off; off += dsops_align64(nh * 4 * sizeof(float));
    L.total = off;
    return L;
}

int64_t dsops_attn_plan_items(int64_t T, int64_t N, int *threads, int64_t *chunk_heads, int64_t *chunks)
{
    int64_t c = T >= *threads ? 1 : (*threads + T - 1) / T;
    int64_t h = (N + c - 1) / c;
    if (h < N)
        h = (h + 7) / 8 * 8;
    if (h > N)
        h = N;
    c = (N + h - 1) / h;
    *chunk_heads = h;
    *chunks = c;
    int64_t items = T * c;
    if (*threads > items)
        *threads = (int)items;
    return items;
}

size_t dsops_attn_scratch_bytes(const dsops_attn_shape *shape) { return make_layout(shape).total; }

/* Gathers the n keys 16 at a time through a staging block into Vp (all keys) and Kt (one chunk at a
 * time), and scores each Kt chunk against every head while it is still in L2. */
static void gather_and_score(const dsops_attention_kernels *k, const dsops_attn_shape *sh, const core_layout *L,
                             const dsops_attn_call *c, char *scratch, int n, const dsops_attn_keys *keys)
{
    uint16_t *stage = (uint16_t *)(scratch + L->stage); /* [16][stage_stride] */
    uint16_t *kt = (uint16_t *)(scratch + L->kt);       /* [chunk_tiles][dpairs][16][2] */
    uint16_t *vp = (uint16_t *)(scratch + L->vp);       /* [dv_blocks][npairs_max][16][2] */
    float *s = (float *)(scratch + L->s);               /* [nh][s_stride] */
    int chunk_keys = L->chunk_tiles * DSOPS_KT_LANES;
    if (keys->prefetch)
        for (int j = 0; j < n && j < PREFETCH_AHEAD; j++)
            keys->prefetch(keys->src, j);
    for (int c0 = 0; c0 < n; c0 += chunk_keys) {
        int c1 = n - c0 < chunk_keys ? n : c0 + chunk_keys;
        for (int j0 = c0; j0 < c1; j0 += DSOPS_KT_LANES) {
            /* random cache rows: start the next batch's loads before this one is copied */
            if (keys->prefetch)
                for (int j = j0 + PREFETCH_AHEAD; j < n && j < j0 + PREFETCH_AHEAD + DSOPS_KT_LANES; j++)
                    keys->prefetch(keys->src, j);
            for (int r = 0; r < DSOPS_KT_LANES; r++) {
                uint16_t *dst = stage + (size_t)r * L->stage_stride;
                if (j0 + r < n) {
                    keys->row(keys->src, j0 + r, dst);
                    if (L->qw > sh->dqk)
                        dst[sh->dqk] = 0;
                } else {
                    memset(dst, 0, (size_t)L->qw * 2);
                }
            }
            k->pack_keys(stage, L->stage_stride, L->dpairs, sh->dv,
                         kt + (size_t)((j0 - c0) / DSOPS_KT_LANES) * L->dpairs * 32, vp + (size_t)(j0 / 2) * 32,
                         L->vp_block_stride);
        }
        int tiles = (c1 - c0 + DSOPS_KT_LANES - 1) / DSOPS_KT_LANES;
        k->qk(c->q, c->q_stride, sh->nh, kt, tiles, L->dpairs, c->scale, s + c0, L->s_stride);
    }
}

/* [T, N] fp32 when present. */
static dsops_status check_row_stat(const dsops_tensor *t, const char *name, int64_t T, int64_t N, const char *qname)
{
    if (!dsops_tensor_present(t))
        return DSOPS_OK;
    char what[48];
    DSOPS_TRY(dsops_check_tensor(t, name, 2, DSOPS_DT(DSOPS_FP32), false));
    snprintf(what, sizeof what, "T of %s", qname);
    DSOPS_TRY(dsops_check_dim(t, name, 0, T, what));
    snprintf(what, sizeof what, "N of %s", qname);
    return dsops_check_dim(t, name, 1, N, what);
}

dsops_status dsops_attn_check_heads(const dsops_tensor *sinks, const dsops_tensor *lse, const dsops_tensor *max_logits,
                                    int64_t T, int64_t N, const char *qname)
{
    if (dsops_tensor_present(sinks)) {
        char what[48];
        snprintf(what, sizeof what, "N of %s", qname);
        DSOPS_TRY(dsops_check_tensor(sinks, "sinks", 1, DSOPS_DT(DSOPS_FP32), false));
        DSOPS_TRY(dsops_check_dim(sinks, "sinks", 0, N, what));
    }
    DSOPS_TRY(check_row_stat(lse, "lse", T, N, qname));
    return check_row_stat(max_logits, "max_logits", T, N, qname);
}

void dsops_attn_bind_heads(dsops_attn_call *call, const dsops_tensor *sinks, const dsops_tensor *lse,
                           const dsops_tensor *max_logits, int64_t t, int64_t h0)
{
    if (dsops_tensor_present(sinks)) {
        call->sinks = (const float *)dsops_at1(sinks, h0);
        call->sinks_stride = (size_t)sinks->stride[0];
    }
    if (dsops_tensor_present(lse)) {
        call->lse = (float *)dsops_at2(lse, t, h0);
        call->lse_stride = (size_t)lse->stride[1];
    }
    if (dsops_tensor_present(max_logits)) {
        call->max_logit = (float *)dsops_at2(max_logits, t, h0);
        call->max_logit_stride = (size_t)max_logits->stride[1];
    }
}

/* The row statistics of head h: lse and the largest score, where the call asks for them. */
static void write_stats(const dsops_attn_call *c, int h, float lse, float max_logit)
{
    if (c->lse)
        c->lse[(size_t)h * c->lse_stride] = lse;
    if (c->max_logit)
        c->max_logit[(size_t)h * c->max_logit_stride] = max_logit;
}

static void write_lonely(const dsops_attn_shape *sh, const dsops_attn_call *c, int h)
{
    memset(c->out + (size_t)h * c->out_stride, 0, (size_t)sh->dv * 2);
    write_stats(c, h, INFINITY, -INFINITY);
}

/* A3: a row with keys whose logits hold a NaN, reach +Inf or are all -Inf is NaN throughout, so that a
 * poisoned input can never pass for a token without keys. */
static void write_poisoned(const dsops_attn_shape *sh, const dsops_attn_call *c, int h)
{
    uint16_t *o = c->out + (size_t)h * c->out_stride;
    for (int d = 0; d < sh->dv; d++)
        o[d] = 0x7fc0; /* bf16 quiet NaN */
    write_stats(c, h, NAN, NAN);
}

static float sink_term(const dsops_attn_call *c, int h, float m)
{
    return c->sinks ? expf(c->sinks[(size_t)h * c->sinks_stride] - m) : 0.0f;
}

/* Modes normalised (A4) and fp32 (A6): full-row softmax, then one PV pass. */
static void attend_whole_rows(const dsops_attention_kernels *k, const dsops_attn_shape *sh, const core_layout *L,
                              const dsops_attn_call *c, int n, char *scratch)
{
    float *s = (float *)(scratch + L->s);       /* [nh][s_stride] scores, then weights */
    float *o = (float *)(scratch + L->o);       /* [nh][o_stride] */
    uint8_t *poisoned = (uint8_t *)(scratch + L->head_state); /* [nh] */
    bool fp32 = sh->p_mode == DSOPS_P_FP32;
    int npairs = (n + 1) / 2;
    for (int h = 0; h < sh->nh; h++) {
        float *sr = s + (size_t)h * L->s_stride;
        float m = k->row_max(sr, n);
        /* n >= 1: a maximum that is not finite means a NaN logit (row_max returns NaN), a +Inf one, or
         * nothing but -Inf (A3); exp_sum then never sees NaN or +Inf */
        poisoned[h] = !isfinite(m);
        if (poisoned[h]) {
            if (fp32)
                memset((float *)(scratch + L->p) + (size_t)h * L->p_stride, 0, (size_t)npairs * 2 * 4);
            else
                memset((uint16_t *)(scratch + L->p) + (size_t)h * L->p_stride, 0, (size_t)npairs * 2 * 2);
            continue;
        }
        float l = k->exp_sum(sr, n, m, sr);
        float r = 1.0f / (l + sink_term(c, h, m));
        if (fp32) {
            float *pr = (float *)(scratch + L->p) + (size_t)h * L->p_stride;
            k->scale_to_f32(sr, n, r, pr);
            if (n & 1)
                pr[n] = 0.0f;
        } else {
            uint16_t *pr = (uint16_t *)(scratch + L->p) + (size_t)h * L->p_stride;
            k->scale_to_bf16(sr, n, r, pr);
            if (n & 1)
                pr[n] = 0;
        }
        write_stats(c, h, m + logf(l), m);
    }
    const uint16_t *vp = (const uint16_t *)(scratch + L->vp);
    if (fp32)
        k->pv_fp32((const float *)(scratch + L->p), L->p_stride, sh->nh, vp, L->vp_block_stride, npairs, L->dv_blocks,
                   o, L->o_stride);
    else
        k->pv_bf16((const uint16_t *)(scratch + L->p), L->p_stride, sh->nh, vp, L->vp_block_stride, npairs,
                   L->dv_blocks, o, L->o_stride);
    for (int h = 0; h < sh->nh; h++) {
        if (poisoned[h])
            write_poisoned(sh, c, h);
        else
            k->store_bf16(o + (size_t)h * L->o_stride, sh->dv, 1.0f, c->out + (size_t)h * c->out_stride);
    }
}

/* Mode tiled (A5): per tile of p_tile list entries (the first tile may have its own length, p_first), un-normalised bf16 weights and a rescaled
 * running sum. A tile reached while the running max is still -Inf contributes nothing. A tile whose
 * maximum is NaN or +Inf poisons the row (A3): its running max becomes NaN and later tiles skip it. */
static void attend_tiled(const dsops_attention_kernels *k, const dsops_attn_shape *sh, const core_layout *L,
                         const dsops_attn_call *c, int n, char *scratch)
{
    int nh = sh->nh;
    float *s = (float *)(scratch + L->s);                  /* [nh][s_stride] */
    uint16_t *pt = (uint16_t *)(scratch + L->p);           /* [nh][pt_stride] weights of one tile */
    float *o = (float *)(scratch + L->o);                  /* [nh][o_stride] running output */
    float *ot = (float *)(scratch + L->o_tile);            /* [nh][o_stride] this tile's PV */
    float *m = (float *)(scratch + L->head_state);         /* [nh] running max, NaN once poisoned */
    float *l = m + nh, *alpha = m + 2 * nh;                /* [nh] running sum, this tile's rescale */
    uint8_t *active = (uint8_t *)(m + 3 * nh);             /* [nh] head has a finite max so far */
    const uint16_t *vp = (const uint16_t *)(scratch + L->vp);
    for (int h = 0; h < nh; h++) {
        m[h] = -INFINITY;
        l[h] = 0.0f;
    }
    int tile = effective_tile(sh->p_tile, n), first = c->p_first > 0 ? c->p_first : tile;
    for (int t0 = 0, t1; t0 < n; t0 = t1) {
        int len = t0 == 0 ? first : tile;
        t1 = n - t0 > len ? t0 + len : n;
        int p0 = t0 / 2, p1 = (t1 + 1) / 2;
        for (int h = 0; h < nh; h++) {
            float *sr = s + (size_t)h * L->s_stride + t0;
            uint16_t *ph = pt + (size_t)h * L->pt_stride;
            memset(ph, 0, (size_t)(p1 - p0) * 4);
            active[h] = 0;
            if (isnan(m[h]))
                continue;
            float mi = k->row_max(sr, t1 - t0);
            if (!(mi < INFINITY)) { /* NaN or +Inf */
                m[h] = NAN;
                continue;
            }
            float mn = mi > m[h] ? mi : m[h];
            active[h] = mn != -INFINITY;
            if (!active[h])
                continue;
            alpha[h] = expf(m[h] - mn);
            float lt = k->exp_sum(sr, t1 - t0, mn, sr);
            l[h] = l[h] * alpha[h] + lt;
            m[h] = mn;
            k->scale_to_bf16(sr, t1 - t0, 1.0f, ph + (t0 - 2 * p0));
        }
        /* The first tile's PV goes straight to the running output: 0 * alpha + ot is ot bit for bit (a PV
         * sum starts at +0, so it is never -0), and that saves a pass over o. Heads without a finite max
         * yet keep o = 0. */
        k->pv_bf16(pt, L->pt_stride, nh, vp + (size_t)p0 * 32, L->vp_block_stride, p1 - p0, L->dv_blocks,
                   t0 == 0 ? o : ot, L->o_stride);
        if (t0 == 0) {
            for (int h = 0; h < nh; h++)
                if (!active[h])
                    memset(o + (size_t)h * L->o_stride, 0, L->o_stride * 4);
            continue;
        }
        for (int h = 0; h < nh; h++) {
            if (!active[h])
                continue;
            float *oh = o + (size_t)h * L->o_stride, *oth = ot + (size_t)h * L->o_stride;
            for (size_t d = 0; d < L->o_stride; d++)
                oh[d] = oh[d] * alpha[h] + oth[d];
        }
    }
    for (int h = 0; h < nh; h++) {
        if (!(m[h] > -INFINITY)) { /* poisoned (NaN), or n >= 1 logits all -Inf */
            write_poisoned(sh, c, h);
            continue;
        }
        float r = 1.0f / (l[h] + sink_term(c, h, m[h]));
        k->store_bf16(o + (size_t)h * L->o_stride, sh->dv, r, c->out + (size_t)h * c->out_stride);
        write_stats(c, h, m[h] + logf(l[h]), m[h]);
    }
}

void dsops_attn_run(const dsops_attention_kernels *k, const dsops_attn_shape *sh, const dsops_attn_call *c, int n,
                    const dsops_attn_keys *keys, void *scratch_v)
{
    char *scratch = scratch_v;
    if (n <= 0) {
        for (int h = 0; h < sh->nh; h++)
            write_lonely(sh, c, h);
        return;
    }
    core_layout L = make_layout(sh);
    gather_and_score(k, sh, &L, c, scratch, n, keys);
    if (sh->p_mode == DSOPS_P_TILED)
        attend_tiled(k, sh, &L, c, n, scratch);
    else
        attend_whole_rows(k, sh, &L, c, n, scratch);
}
