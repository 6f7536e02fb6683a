/* Checks of sparse_attention_v32 results (see dia_check.h). */
#include "dia_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "ref.h"

static size_t tensor_bytes(const dsops_tensor *t)
{
    size_t n = dsops_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++)
        n *= (size_t)t->shape[d];
    return n;
}

/* ---- state ------------------------------------------------------------------------------------------ */

/* Offsets of the cache tensors in the args struct, in a fixed order. */
static const struct {
    const char *name;
    size_t off;
} cache_members[DC_MAX_CACHES] = {
    {"kv_cache", offsetof(dsops_sparse_attention_v32_args, kv_cache)},
    {"kv_scale_cache", offsetof(dsops_sparse_attention_v32_args, kv_scale_cache)},
    {"kr_cache", offsetof(dsops_sparse_attention_v32_args, kr_cache)},
    {"kv_packed", offsetof(dsops_sparse_attention_v32_args, kv_packed)},
    {"idx_k_cache", offsetof(dsops_sparse_attention_v32_args, idx_k_cache)},
    {"idx_k_scale_cache", offsetof(dsops_sparse_attention_v32_args, idx_k_scale_cache)},
};

static dsops_tensor *member(dsops_sparse_attention_v32_args *a, int i)
{
    return (dsops_tensor *)((char *)a + cache_members[i].off);
}

static const tu_tol TOL_INT8 = {1.0, 0.0, 0.005};         /* int8 latent and keys */
static const tu_tol TOL_BF16 = {1e-4, 1.0 / 128.0, 0.005}; /* bf16 latent, rope, keys */
static const tu_tol TOL_SCALE32 = {2.5e-5, 0.005, 0.0};    /* fp32 latent scales */
static const tu_tol TOL_SCALE16 = {2.5e-5, 0.0, 0.005};    /* fp16 key scales */

static void add_field(dc_cache *c, const char *name, size_t off, int64_t count, dsops_dtype dt, tu_tol tol)
{
    c->f[c->nfields++] = (dc_field){name, off, count, dt, tol};
}

dc_state *dc_state_make(const dsops_sparse_attention_v32_args *a)
{
    dc_state *s = tu_calloc(1, sizeof *s);
    s->args = *a;
    s->args.prepared = NULL;
    s->T = a->x.shape[0];
    s->N = a->w_uk.shape[0];
    s->Dc = a->w_uk.shape[2];
    s->K = a->topk;
    s->B = a->seqused_kv.shape[0];
    s->MB = a->block_table.shape[1];
    s->tok_seq = tu_calloc((size_t)s->T, sizeof(int64_t));
    s->tok_L = tu_calloc((size_t)s->T, sizeof(int64_t));
    const int32_t *cu = a->cu_seqlens_q.data, *su = a->seqused_kv.data;
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t t = cu[b]; t < cu[b + 1]; t++) {
            s->tok_seq[t] = b;
            s->tok_L[t] = su[b] - (cu[b + 1] - 1 - t);
        }
    for (int i = 0; i < DC_MAX_CACHES; i++) {
        const dsops_tensor *t = member(&s->args, i);
        if (!t->data)
            continue;
        dc_cache *c = &s->c[s->nc++];
        c->name = cache_members[i].name;
        c->data = t->data;
        c->bytes = tensor_bytes(t);
        c->row_bytes = c->bytes / (size_t)(t->shape[0] * t->shape[1]);
        c->snap = tu_calloc(c->bytes, 1);
        memcpy(c->snap, c->data, c->bytes);
        const int64_t W = t->ndim == 3 ? t->shape[2] : 1;
        switch (i) {
        case 0: add_field(c, "latent", 0, W, t->dtype, t->dtype == DSOPS_INT8 ? TOL_INT8 : TOL_BF16); break;
        case 1: add_field(c, "latent scale", 0, W, DSOPS_FP32, TOL_SCALE32); break;
        case 2: add_field(c, "rope", 0, W, DSOPS_BF16, TOL_BF16); break;
        case 3:
            add_field(c, "latent", 0, 512, DSOPS_INT8, TOL_INT8);
            add_field(c, "rope", 512, 64, DSOPS_BF16, TOL_BF16);
            add_field(c, "latent scale", 640, 4, DSOPS_FP32, TOL_SCALE32);
            break;
        case 4: add_field(c, "key", 0, W, t->dtype, t->dtype == DSOPS_INT8 ? TOL_INT8 : TOL_BF16); break;
        default: add_field(c, "key scale", 0, 1, DSOPS_FP16, TOL_SCALE16); break;
        }
    }
    const int64_t *ci = a->cache_index.data;
    s->slots = tu_calloc((size_t)s->T, sizeof(int64_t));
    for (int64_t t = 0; t < s->T; t++)
        if (ci[t] >= 0)
            s->slots[s->nslots++] = ci[t];
    return s;
}

void dc_state_free(dc_state *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nc; i++)
        free(s->c[i].snap);
    free(s->tok_seq);
    free(s->tok_L);
    free(s->slots);
    free(s);
}

void dc_restore(dc_state *s)
{
    for (int i = 0; i < s->nc; i++)
        memcpy(s->c[i].data, s->c[i].snap, s->c[i].bytes);
}

int dc_caches_untouched(const dc_state *s, const char *label)
{
    int ok = 1;
    for (int i = 0; i < s->nc; i++) {
        const dc_cache *c = &s->c[i];
        size_t k = 0;
        while (k < c->bytes && c->data[k] == c->snap[k])
            k++;
        ok &= tu_check(k == c->bytes, "%s: %s byte %zu (row %zu) changed by a rejected call", label, c->name, k,
                       k / c->row_bytes);
    }
    return ok;
}

/* ---- runs ------------------------------------------------------------------------------------------- */

static unsigned char next_poison(void)
{
    static const unsigned char pat[4] = {0x7f, 0xa5, 0x3c, 0xc3};
    static int k;
    return pat[k++ % 4];
}

static void poison(const dsops_tensor *t, unsigned char byte)
{
    if (t->data)
        memset(t->data, byte, tensor_bytes(t));
}

static dc_result *gather(const dc_state *s, const dsops_tensor *out, const dsops_tensor *lse, const dsops_tensor *topk)
{
    dc_result *r = tu_calloc(1, sizeof *r);
    r->out_bytes = tensor_bytes(out);
    r->lse_bytes = lse->data ? tensor_bytes(lse) : 0;
    r->topk_bytes = tensor_bytes(topk);
    r->out = tu_calloc(r->out_bytes, 1);
    r->lse = tu_calloc(r->lse_bytes, 1);
    r->topk = tu_calloc(r->topk_bytes, 1);
    memcpy(r->out, out->data, r->out_bytes);
    if (r->lse_bytes)
        memcpy(r->lse, lse->data, r->lse_bytes);
    memcpy(r->topk, topk->data, r->topk_bytes);
    for (int i = 0; i < s->nc; i++) {
        r->cache[i] = tu_calloc(s->c[i].bytes, 1);
        memcpy(r->cache[i], s->c[i].data, s->c[i].bytes);
    }
    return r;
}

void dc_result_free(dc_result *r)
{
    if (!r)
        return;
    free(r->out);
    free(r->lse);
    free(r->topk);
    for (int i = 0; i < DC_MAX_CACHES; i++)
        free(r->cache[i]);
    free(r->q_nope);
    free(r->q_rope);
    free(r);
}

dc_result *dc_run_fused(dc_state *s, dsops_context *ctx, const dsops_prepared *prepared, const char *label)
{
    dc_restore(s);
    dsops_sparse_attention_v32_args a = s->args;
    a.prepared = prepared;
    unsigned char pb = next_poison();
    poison(&a.out, pb);
    poison(&a.lse, pb);
    poison(&a.topk_indices, pb);
    dsops_status st = dsops_sparse_attention_v32(ctx, &a);
    if (!tu_check(st == DSOPS_OK, "%s: fused call: %s (%s)", label, dsops_status_name(st), dsops_last_error()))
        return NULL;
    return gather(s, &a.out, &a.lse, &a.topk_indices);
}

dc_result *dc_run_chain(dc_state *s, dsops_context *ctx, const char *label)
{
    dc_restore(s);
    dsops_dia_stages *st = dsops_dia_stages_make(&s->args);
    if (!tu_check(st != NULL, "%s: stage arguments", label))
        return NULL;
    unsigned char pb = next_poison();
    poison(&st->sfa.out, pb);
    poison(&st->sfa.lse, pb);
    poison(&st->li.topk_indices, pb);
    const char *stage = "mla_prolog_v32";
    dsops_status rc = dsops_mla_prolog_v32(ctx, &st->mla);
    if (rc == DSOPS_OK) {
        stage = "indexer_prolog_v32";
        rc = dsops_indexer_prolog_v32(ctx, &st->idx);
    }
    if (rc == DSOPS_OK) {
        stage = "lightning_indexer";
        rc = dsops_lightning_indexer(ctx, &st->li);
    }
    if (rc == DSOPS_OK) {
        stage = "sparse_flash_attention_v32";
        rc = dsops_sparse_flash_attention_v32(ctx, &st->sfa);
    }
    dc_result *r = NULL;
    if (tu_check(rc == DSOPS_OK, "%s: %s: %s (%s)", label, stage, dsops_status_name(rc), dsops_last_error()))
        r = gather(s, &st->sfa.out, &st->sfa.lse, &st->li.topk_indices);
    if (r) {
        r->q_nope_bytes = tensor_bytes(&st->mla.q_nope);
        r->q_rope_bytes = tensor_bytes(&st->mla.q_rope);
        r->q_nope = tu_calloc(r->q_nope_bytes, 1);
        r->q_rope = tu_calloc(r->q_rope_bytes, 1);
        memcpy(r->q_nope, st->mla.q_nope.data, r->q_nope_bytes);
        memcpy(r->q_rope, st->mla.q_rope.data, r->q_rope_bytes);
    }
    dsops_dia_stages_free(st);
    return r;
}

static int same_bytes(const unsigned char *a, const unsigned char *b, size_t n, size_t elem, const char *label,
                      const char *what, const char *name)
{
    size_t k = 0;
    while (k < n && a[k] == b[k])
        k++;
    return tu_check(k == n, "%s: %s differs from %s: first at element %zu (of %zu)", label, name, what, k / elem,
                    n / elem);
}

int dc_same(const dc_state *s, const dc_result *a, const dc_result *b, const char *label, const char *what)
{
    int ok = same_bytes(a->out, b->out, a->out_bytes, 2, label, what, "out");
    ok &= tu_check(a->lse_bytes == b->lse_bytes, "%s: lse presence differs", label) &&
          same_bytes(a->lse, b->lse, a->lse_bytes, 4, label, what, "lse");
    ok &= same_bytes(a->topk, b->topk, a->topk_bytes, 4, label, what, "topk_indices");
    for (int i = 0; i < s->nc; i++)
        ok &= same_bytes(a->cache[i], b->cache[i], s->c[i].bytes, s->c[i].row_bytes, label, what, s->c[i].name);
    return ok;
}

/* ---- oracle chain ----------------------------------------------------------------------------------- */

struct dc_oracle {
    unsigned char *cache[DC_MAX_CACHES];      /* caches after the reference prologs */
    dsops_sparse_attention_v32_args ra;       /* the fused arguments over those caches */
    dsops_dia_stages *st;                     /* reference stage arguments and intermediates */
    int32_t *topk;                            /* [T, K] reference top-k of the oracle's tokens */
    float *scores;                            /* [T, K] their scores */
    int64_t *tokens, ntok;
    uint16_t *out_buf;                        /* [T, N, Dc] scratch for ra.out */
    float *lse_buf;                           /* [T, N] */
};

/* One token's lightning_indexer arguments: a sequence of one token that sees L_t keys. */
typedef struct tok_views {
    int32_t cu[2], su[1];
} tok_views;

static dsops_tensor row_view(const dsops_tensor *t, int64_t row)
{
    if (!t->data)
        return *t;
    dsops_tensor v = *t;
    size_t row_bytes = tensor_bytes(t) / (size_t)(t->shape[0] ? t->shape[0] : 1);
    v.data = (char *)t->data + (size_t)row * row_bytes;
    v.shape[0] = 1;
    return v;
}

static void token_li(const dc_state *s, const dsops_lightning_indexer_args *li, int64_t t, tok_views *tv,
                     int32_t *topk_row, float *score_row, dsops_lightning_indexer_args *o)
{
    *o = *li;
    o->q_idx = row_view(&li->q_idx, t);
    o->q_idx_scale = row_view(&li->q_idx_scale, t);
    o->weights = row_view(&li->weights, t);
    o->block_table = row_view(&li->block_table, s->tok_seq[t]);
    tv->cu[0] = 0, tv->cu[1] = 1, tv->su[0] = (int32_t)s->tok_L[t];
    int64_t one[1] = {1}, two[1] = {2}, k2[2] = {1, s->K};
    o->cu_seqlens_q = dsops_tensor_make(tv->cu, DSOPS_INT32, 1, two);
    o->seqused_kv = dsops_tensor_make(tv->su, DSOPS_INT32, 1, one);
    o->topk_indices = dsops_tensor_make(topk_row, DSOPS_INT32, 2, k2);
    o->topk_scores = score_row ? dsops_tensor_make(score_row, DSOPS_FP32, 2, k2) : (dsops_tensor){0};
}

static dc_oracle *oracle_make(const dc_state *s, int last_only)
{
    dc_oracle *o = tu_calloc(1, sizeof *o);
    o->ra = s->args;
    for (int i = 0, k = 0; i < DC_MAX_CACHES; i++) {
        dsops_tensor *t = member(&o->ra, i);
        if (!t->data)
            continue;
        o->cache[k] = tu_calloc(s->c[k].bytes, 1);
        memcpy(o->cache[k], s->c[k].snap, s->c[k].bytes);
        t->data = o->cache[k];
        k++;
    }
    o->out_buf = tu_calloc((size_t)(s->T * s->N * s->Dc), 2);
    o->lse_buf = tu_calloc((size_t)(s->T * s->N), 4);
    int64_t so[3] = {s->T, s->N, s->Dc}, sl[2] = {s->T, s->N};
    o->ra.out = dsops_tensor_make(o->out_buf, DSOPS_BF16, 3, so);
    o->ra.lse = dsops_tensor_make(o->lse_buf, DSOPS_FP32, 2, sl);
    o->st = dsops_dia_stages_make(&o->ra);
    if (!o->st) {
        fprintf(stderr, "dia_check: stage arguments\n");
        abort();
    }
    dsops_ref_mla_prolog_v32(&o->st->mla);
    dsops_ref_indexer_prolog_v32(&o->st->idx);
    o->topk = tu_calloc((size_t)(s->T * s->K), sizeof(int32_t));
    o->scores = tu_calloc((size_t)(s->T * s->K), sizeof(float));
    o->tokens = tu_calloc((size_t)s->T, sizeof(int64_t));
    const int32_t *cu = s->args.cu_seqlens_q.data;
    for (int64_t t = 0; t < s->T; t++)
        if (!last_only || t + 1 == cu[s->tok_seq[t] + 1])
            o->tokens[o->ntok++] = t;
    for (int64_t k = 0; k < o->ntok; k++) {
        const int64_t t = o->tokens[k];
        tok_views tv;
        dsops_lightning_indexer_args a;
        token_li(s, &o->st->li, t, &tv, o->topk + t * s->K, o->scores + t * s->K, &a);
        dsops_ref_lightning_indexer(&a);
    }
    return o;
}

dc_oracle *dc_oracle_make(const dc_state *s) { return oracle_make(s, 0); }
dc_oracle *dc_oracle_make_last_tokens(const dc_state *s) { return oracle_make(s, 1); }

void dc_oracle_free(dc_oracle *o)
{
    if (!o)
        return;
    for (int i = 0; i < DC_MAX_CACHES; i++)
        free(o->cache[i]);
    dsops_dia_stages_free(o->st);
    free(o->topk);
    free(o->scores);
    free(o->tokens);
    free(o->out_buf);
    free(o->lse_buf);
    free(o);
}

static float value_at(const unsigned char *p, dsops_dtype dt)
{
    switch (dt) {
    case DSOPS_INT8: return (float)*(const int8_t *)p;
    case DSOPS_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return tu_f32(h);
    }
    case DSOPS_FP16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return dsops_ref_f32_from_fp16(h);
    }
    default: {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    }
}

/* compare_topk (spec §1.8) of one token's rows: equal counts of leading valid entries, -1 after them,
 * distinct library indices in [0, n), at most max_miss library indices absent from the reference row;
 * an absent index whose reference score is within 1e-4 max|I| of the reference K-th score is a near-tie
 * and forgiven. Returns 0 and fills why on failure. */
static int topk_row_ok(const dc_state *s, const dc_oracle *o, int64_t t, const int32_t *lr, int max_miss,
                       int64_t *near, char *why, size_t cap)
{
    const int64_t K = s->K, n = s->tok_L[t] > 0 ? s->tok_L[t] : 0;
    const int32_t *rr = o->topk + t * K;
    const float *rs = o->scores + t * K;
    int64_t ml = 0, mr = 0;
    while (ml < K && lr[ml] != -1)
        ml++;
    while (mr < K && rr[mr] != -1)
        mr++;
    if (ml != mr) {
        snprintf(why, cap, "%lld valid entries, reference %lld (n = %lld)", (long long)ml, (long long)mr, (long long)n);
        return 0;
    }
    for (int64_t k = ml; k < K; k++)
        if (lr[k] != -1) {
            snprintf(why, cap, "entry %lld after the valid ones is %d", (long long)k, lr[k]);
            return 0;
        }
    unsigned char *seen = tu_calloc((size_t)(n + 1), 1), *inref = tu_calloc((size_t)(n + 1), 1);
    float *full = NULL;
    double tol = 0.0;
    int64_t misses = 0;
    int ok = 1;
    for (int64_t k = 0; k < mr; k++)
        if (rr[k] >= 0 && rr[k] < n)
            inref[rr[k]] = 1;
    for (int64_t k = 0; k < ml && ok; k++) {
        const int32_t j = lr[k];
        if (j < 0 || j >= n || seen[j]) {
            snprintf(why, cap, "entry %lld = %d is outside [0, %lld) or repeated", (long long)k, j, (long long)n);
            ok = 0;
            break;
        }
        seen[j] = 1;
        if (inref[j])
            continue;
        if (!full) {
            full = tu_calloc((size_t)(n + 1), sizeof(float));
            tok_views tv;
            dsops_lightning_indexer_args a;
            int32_t dummy_idx[1];
            token_li(s, &o->st->li, t, &tv, dummy_idx, NULL, &a);
            dsops_ref_lightning_indexer_scores(&a, 0, full);
            double amax = 0.0;
            for (int64_t i = 0; i < n; i++)
                if (isfinite(full[i]) && fabs(full[i]) > amax)
                    amax = fabs(full[i]);
            tol = 1e-4 * amax;
        }
        if (fabs((double)full[j] - (double)rs[mr - 1]) <= tol) {
            (*near)++;
            continue;
        }
        if (++misses > max_miss) {
            snprintf(why, cap, "%lld indices absent from the reference (entry %lld = %d, reference score %.9g, "
                               "reference K-th score %.9g)",
                     (long long)misses, (long long)k, j, (double)full[j], (double)rs[mr - 1]);
            ok = 0;
        }
    }
    free(full);
    free(seen);
    free(inref);
    return ok;
}

/* The reference attention of the oracle's tokens on the result's top-k: with the oracle's queries and
 * caches (own = 0) or with the result's own queries and caches (own = 1, stage-chain results). Writes
 * out rows [ntok, N, Dc] and lse rows [ntok, N] as fp32. */
static void attention_rows(const dc_state *s, const dc_oracle *o, const dc_result *r, int own, float *exp, float *el)
{
    const int64_t K = s->K, N = s->N, Dc = s->Dc;
    const size_t per_out = (size_t)(N * Dc);
    dsops_sparse_flash_attention_v32_args base = o->st->sfa;
    if (own) {
        base.q_nope.data = r->q_nope;
        base.q_rope.data = r->q_rope;
        dsops_tensor *keys[4] = {&base.key_nope, &base.key_nope_scale, &base.key_rope, &base.kv_packed};
        for (int j = 0; j < 4; j++)
            for (int i = 0; i < s->nc; i++)
                if (keys[j]->data && keys[j]->data == (void *)o->cache[i])
                    keys[j]->data = r->cache[i];
    }
    for (int64_t k = 0; k < o->ntok; k++) {
        const int64_t t = o->tokens[k];
        dsops_sparse_flash_attention_v32_args f = base;
        tok_views tv = {{0, 1}, {(int32_t)s->tok_L[t]}};
        int64_t one[1] = {1}, two[1] = {2}, k2[2] = {1, K};
        f.q_nope = row_view(&base.q_nope, t);
        f.q_rope = row_view(&base.q_rope, t);
        f.block_table = row_view(&base.block_table, s->tok_seq[t]);
        f.cu_seqlens_q = dsops_tensor_make(tv.cu, DSOPS_INT32, 1, two);
        f.seqused_kv = dsops_tensor_make(tv.su, DSOPS_INT32, 1, one);
        f.topk_indices = dsops_tensor_make((int32_t *)r->topk + t * K, DSOPS_INT32, 2, k2);
        f.topk_length = (dsops_tensor){0};
        f.out = row_view(&o->ra.out, t);
        f.lse = row_view(&o->ra.lse, t);
        dsops_ref_sparse_flash_attention_v32(&f);
        const uint16_t *ro = (const uint16_t *)f.out.data;
        for (size_t e = 0; e < per_out; e++)
            exp[(size_t)k * per_out + e] = tu_f32(ro[e]);
        for (int64_t h = 0; h < N; h++)
            el[k * N + h] = ((const float *)f.lse.data)[h];
    }
}

int dc_check_oracle(const dc_state *s, const dc_oracle *o, const dc_result *r, const char *label, int max_miss,
                    const tu_tol *out_tol)
{
    if (max_miss < 0)
        max_miss = 1;
    char l[400];
    int ok = 1;
    const int64_t K = s->K, N = s->N, Dc = s->Dc;

    /* top-k */
    int64_t bad = 0, near = 0, shown = 0;
    for (int64_t k = 0; k < o->ntok; k++) {
        const int64_t t = o->tokens[k];
        char why[300] = "";
        if (!topk_row_ok(s, o, t, (const int32_t *)r->topk + t * K, max_miss, &near, why, sizeof why)) {
            bad++;
            if (shown++ < 3)
                printf("  %s: token %lld: %s\n", label, (long long)t, why);
        }
    }
    ok &= tu_check(bad == 0, "%s: compare_topk against the oracle chain failed in %lld of %lld rows", label,
                   (long long)bad, (long long)o->ntok);
    if (tu_verbose())
        printf("  %s: %lld near-tie swaps in %lld rows\n", label, (long long)near, (long long)o->ntok);

    /* caches: the written rows within tolerance, every other byte as before the call */
    for (int i = 0; i < s->nc; i++) {
        const dc_cache *c = &s->c[i];
        const size_t rows = c->bytes / c->row_bytes;
        unsigned char *written = tu_calloc(rows, 1);
        for (int64_t k = 0; k < s->nslots; k++)
            written[s->slots[k]] = 1;
        size_t first = (size_t)-1;
        for (size_t row = 0; row < rows && first == (size_t)-1; row++)
            if (!written[row] && memcmp(r->cache[i] + row * c->row_bytes, c->snap + row * c->row_bytes, c->row_bytes))
                first = row;
        ok &= tu_check(first == (size_t)-1, "%s: %s row %zu changed although the call does not write it", label,
                       c->name, first);
        for (int f = 0; f < c->nfields; f++) {
            const dc_field *fd = &c->f[f];
            const size_t n = (size_t)(s->nslots * fd->count), es = dsops_dtype_size(fd->dt);
            float *got = tu_calloc(n, sizeof(float)), *exp = tu_calloc(n, sizeof(float));
            for (int64_t k = 0; k < s->nslots; k++)
                for (int64_t e = 0; e < fd->count; e++) {
                    const size_t at = (size_t)s->slots[k] * c->row_bytes + fd->off + (size_t)e * es;
                    got[k * fd->count + e] = value_at(r->cache[i] + at, fd->dt);
                    exp[k * fd->count + e] = value_at(o->cache[i] + at, fd->dt);
                }
            snprintf(l, sizeof l, "%s %s %s (written rows)", label, c->name, fd->name);
            ok &= tu_compare_close(l, got, exp, n, fd->tol, NULL);
            free(got);
            free(exp);
        }
        free(written);
    }

    /* out and lse: the reference attention on the result's own top-k, from the oracle's queries and caches */
    const size_t per_out = (size_t)(N * Dc), nout = (size_t)o->ntok * per_out, nl = (size_t)(o->ntok * N);
    float *got = tu_calloc(nout, sizeof(float)), *exp = tu_calloc(nout, sizeof(float));
    float *gl = tu_calloc(nl, sizeof(float)), *el = tu_calloc(nl, sizeof(float));
    for (int64_t k = 0; k < o->ntok; k++) {
        const int64_t t = o->tokens[k];
        const uint16_t *lo = (const uint16_t *)r->out + (size_t)t * per_out;
        for (size_t e = 0; e < per_out; e++)
            got[(size_t)k * per_out + e] = tu_f32(lo[e]);
        for (int64_t h = 0; h < N; h++)
            gl[k * N + h] = r->lse_bytes ? ((const float *)r->lse)[t * N + h] : NAN;
    }
    attention_rows(s, o, r, 0, exp, el);
    snprintf(l, sizeof l, "%s out (oracle chain, attention on its own topk)", label);
    ok &= tu_compare_close(l, got, exp, nout, out_tol ? *out_tol : (tu_tol){1e-4, 0.005, 0.005}, NULL);
    if (r->lse_bytes) {
        snprintf(l, sizeof l, "%s lse (oracle chain, attention on its own topk)", label);
        ok &= tu_compare_close(l, gl, el, nl, (tu_tol){1e-6, 8.01 / 65536.0, 0.005}, NULL);
    }
    if (r->q_nope) {
        /* stage 1's queries against the oracle's (spec §4.1), then the attention stage alone: the reference
         * attention on the result's own queries, caches and top-k (spec §4.4) */
        const size_t nq = (size_t)o->ntok * per_out, nr = (size_t)(o->ntok * N * 64);
        float *a = tu_calloc(nq, sizeof(float)), *b = tu_calloc(nq, sizeof(float));
        float *c = tu_calloc(nr, sizeof(float)), *d = tu_calloc(nr, sizeof(float));
        for (int64_t k = 0; k < o->ntok; k++) {
            const int64_t t = o->tokens[k];
            for (size_t e = 0; e < per_out; e++) {
                a[(size_t)k * per_out + e] = tu_f32(((const uint16_t *)r->q_nope)[(size_t)t * per_out + e]);
                b[(size_t)k * per_out + e] = tu_f32(((const uint16_t *)o->st->mla.q_nope.data)[(size_t)t * per_out + e]);
            }
            for (int64_t e = 0; e < N * 64; e++) {
                c[k * N * 64 + e] = tu_f32(((const uint16_t *)r->q_rope)[t * N * 64 + e]);
                d[k * N * 64 + e] = tu_f32(((const uint16_t *)o->st->mla.q_rope.data)[t * N * 64 + e]);
            }
        }
        snprintf(l, sizeof l, "%s q_nope (stage 1 vs oracle)", label);
        ok &= tu_compare_close(l, a, b, nq, (tu_tol){0.005, 1.0 / 128.0, 0.005}, NULL);
        snprintf(l, sizeof l, "%s q_rope (stage 1 vs oracle)", label);
        ok &= tu_compare_close(l, c, d, nr, (tu_tol){0.005, 1.0 / 128.0, 0.005}, NULL);
        free(a);
        free(b);
        free(c);
        free(d);
        attention_rows(s, o, r, 1, exp, el);
        snprintf(l, sizeof l, "%s out (attention stage on its own inputs)", label);
        ok &= tu_compare_close(l, got, exp, nout, (tu_tol){1e-4, 0.005, 0.005}, NULL);
        if (r->lse_bytes) {
            snprintf(l, sizeof l, "%s lse (attention stage on its own inputs)", label);
            ok &= tu_compare_close(l, gl, el, nl, (tu_tol){1e-6, 8.01 / 65536.0, 0.005}, NULL);
        }
    }
    free(got);
    free(exp);
    free(gl);
    free(el);
    return ok;
}
