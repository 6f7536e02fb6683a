#include "idxp_problem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"
#include "test_util.h"

#define DR 64
#define GUARD 64 /* bytes of guard zone on each side of an output or cache buffer */

/* ---- allocation and views ------------------------------------------------------------------------- */

static void *xcalloc(size_t n)
{
    void *m = calloc(1, n ? n : 1);
    if (!m) {
        fprintf(stderr, "idxp_problem: out of memory (%zu bytes)\n", n);
        abort();
    }
    return m;
}

static void *own(ip_problem *p, size_t bytes)
{
    if (p->nbufs >= IP_MAX_BUFS) {
        fprintf(stderr, "idxp_problem: too many buffers\n");
        abort();
    }
    void *m = xcalloc(bytes);
    p->bufs[p->nbufs++] = m;
    return m;
}

static void add_region(ip_problem *p, void *ptr, size_t n, int out, dsops_dtype dt)
{
    if (p->nreg >= IP_MAX_REGIONS) {
        fprintf(stderr, "idxp_problem: too many regions\n");
        abort();
    }
    ip_region *r = &p->reg[p->nreg++];
    memset(r, 0, sizeof *r);
    r->p = ptr;
    r->n = n;
    r->snap = xcalloc(n);
    r->out = out;
    if (dt == DSOPS_BF16 || dt == DSOPS_FP16) {
        r->pat[0] = 0xad, r->pat[1] = 0xde, r->period = 2;
    } else {
        r->pat[0] = 0x80, r->period = 1;
    }
}

/* Strides of a view whose every dimension is padded by `pad` elements (innermost stride 1). */
static dsops_tensor view_of(void *data, dsops_dtype dt, int ndim, const int64_t *shape, int64_t pad)
{
    dsops_tensor t = dsops_tensor_make(data, dt, ndim, shape);
    if (ndim > 0)
        t.stride[ndim - 1] = 1;
    for (int d = ndim - 2; d >= 0; d--)
        t.stride[d] = t.stride[d + 1] * shape[d + 1] + pad;
    return t;
}

/* Elements spanned by a view (0 for an empty one). */
static int64_t span_of(const dsops_tensor *t)
{
    int64_t last = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0)
            return 0;
        last += (t->shape[d] - 1) * t->stride[d];
    }
    return last + 1;
}

/* A view with padding `pad` in its own buffer with guard zones; registered as a region if `region`. */
static dsops_tensor alloc_view(ip_problem *p, dsops_dtype dt, int ndim, const int64_t *shape, int64_t pad,
                               int region, int out)
{
    dsops_tensor t = view_of(NULL, dt, ndim, shape, pad);
    const size_t span = (size_t)span_of(&t) * dsops_dtype_size(dt);
    const size_t guard = GUARD + (p->sp.big_guard ? 8 * span : 0);
    const size_t bytes = span + 2 * guard;
    unsigned char *b = own(p, bytes);
    t.data = b + guard;
    if (region)
        add_region(p, b, bytes, out, dt);
    return t;
}

/* ---- element access -------------------------------------------------------------------------------- */

static unsigned char *eaddr(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    int64_t off = t->ndim > 0 ? i0 * t->stride[0] : 0;
    if (t->ndim > 1)
        off += i1 * t->stride[1];
    if (t->ndim > 2)
        off += i2 * t->stride[2];
    return (unsigned char *)t->data + off * (int64_t)dsops_dtype_size(t->dtype);
}

static float getf(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    const unsigned char *q = eaddr(t, i0, i1, i2);
    uint16_t h;
    float f;
    switch (t->dtype) {
    case DSOPS_BF16:
        memcpy(&h, q, 2);
        return tu_f32(h);
    case DSOPS_FP16:
        memcpy(&h, q, 2);
        return dsops_ref_f32_from_fp16(h);
    case DSOPS_FP32:
        memcpy(&f, q, 4);
        return f;
    case DSOPS_INT8: return (float)(int8_t)*q;
    case DSOPS_UINT8: return (float)*q;
    default: return NAN;
    }
}

static void putf(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v)
{
    unsigned char *q = eaddr(t, i0, i1, i2);
    if (t->dtype == DSOPS_BF16 || t->dtype == DSOPS_FP16) {
        uint16_t h = t->dtype == DSOPS_BF16 ? tu_bf16(v) : dsops_ref_fp16_from_f32(v);
        memcpy(q, &h, 2);
    } else if (t->dtype == DSOPS_FP32) {
        memcpy(q, &v, 4);
    } else {
        int8_t i = (int8_t)v;
        memcpy(q, &i, 1);
    }
}

static int64_t get_index(const dsops_tensor *ci, int64_t t)
{
    int64_t r;
    memcpy(&r, eaddr(ci, t, 0, 0), sizeof r);
    return r;
}

static void fill_uniform(const dsops_tensor *t, tu_rng *r, float lo, float hi)
{
    const int64_t s0 = t->ndim > 0 ? t->shape[0] : 1, s1 = t->ndim > 1 ? t->shape[1] : 1,
                  s2 = t->ndim > 2 ? t->shape[2] : 1;
    for (int64_t i = 0; i < s0; i++)
        for (int64_t j = 0; j < s1; j++)
            for (int64_t k = 0; k < s2; k++)
                putf(t, i, j, k, tu_rng_uniform(r, lo, hi));
}

static void fill_int8(const dsops_tensor *t, tu_rng *r, int extreme)
{
    for (int64_t i = 0; i < t->shape[0]; i++)
        for (int64_t k = 0; k < t->shape[1]; k++) {
            int v = extreme ? ((tu_rng_u64(r) & 1) ? 127 : -128) : (int)tu_rng_int(r, -128, 127);
            *(int8_t *)eaddr(t, i, k, 0) = (int8_t)v;
        }
}

/* ---- problem builder ------------------------------------------------------------------------------- */

ip_problem *ip_make(const ip_spec *spec, uint64_t seed)
{
    ip_problem *p = xcalloc(sizeof *p);
    p->sp = *spec;
    ip_spec *sp = &p->sp;
    if (!sp->had_dtype)
        sp->had_dtype = DSOPS_BF16;
    if (!sp->ln_dtype)
        sp->ln_dtype = DSOPS_BF16;
    if (!sp->table_dtype)
        sp->table_dtype = DSOPS_BF16;
    if (sp->NB <= 0)
        sp->NB = (int)((2 * (int64_t)sp->T + 3 + sp->BS - 1) / sp->BS);
    if (sp->int8)
        sp->no_hadamard_q = sp->no_hadamard_k = 0;
    tu_rng r;
    tu_rng_seed(&r, seed);

    const int64_t T = sp->T, H = sp->H, Q = sp->Q, NI = sp->NI, DI = sp->DI, BS = sp->BS, NB = sp->NB;
    const int64_t NQ = NI * DI;
    const int64_t pad = sp->strided ? 5 : 0, wpad = sp->strided ? 8 : 0;
    const int share = sp->strided == 2 ? (sp->share ? sp->share : 7) : 0;
    const dsops_dtype qdt = sp->int8 ? DSOPS_INT8 : DSOPS_BF16;
    p->T = T;
    dsops_indexer_prolog_v32_args *a = &p->args;
    memset(a, 0, sizeof *a);
    a->ln_eps = sp->ln_eps;
    a->weights_scale = sp->weights_scale;
    a->rope_mode = sp->rope_mode;
    a->rope_inverse = sp->rope_inverse;

    int64_t s[3];
    /* inputs */
    s[0] = T, s[1] = H;
    a->x = alloc_view(p, DSOPS_BF16, 2, s, pad, 0, 0);
    s[0] = T, s[1] = Q;
    a->qr = alloc_view(p, qdt, 2, s, pad, 0, 0);
    s[0] = NQ, s[1] = Q;
    a->idx_wq_b = alloc_view(p, qdt, 2, s, wpad, 0, 0);
    if (sp->int8) {
        s[0] = T;
        a->qr_scale = alloc_view(p, DSOPS_FP32, 1, s, 0, 0, 0);
        s[0] = NQ;
        a->idx_wq_b_scale = alloc_view(p, DSOPS_FP32, 1, s, 0, 0, 0);
    }
    s[0] = DI, s[1] = H;
    a->idx_wk = alloc_view(p, DSOPS_BF16, 2, s, wpad, 0, 0);
    s[0] = NI, s[1] = H;
    a->weights_proj = alloc_view(p, DSOPS_BF16, 2, s, wpad, 0, 0);
    s[0] = DI;
    a->ln_gamma_k = alloc_view(p, sp->tiny_key ? DSOPS_FP32 : sp->ln_dtype, 1, s, 0, 0, 0);
    a->ln_beta_k = alloc_view(p, sp->mixed_ln ? (sp->ln_dtype == DSOPS_FP32 ? DSOPS_BF16 : DSOPS_FP32) : sp->ln_dtype,
                              1, s, 0, 0, 0);
    s[0] = T, s[1] = DR;
    if (share & 2) { /* sin in columns 0..63, cos in 64..127 of one [T, 128 + pad] buffer */
        s[1] = 2 * DR;
        dsops_tensor both = alloc_view(p, sp->table_dtype, 2, s, pad, 0, 0);
        a->rope_sin = both, a->rope_cos = both;
        a->rope_sin.shape[1] = a->rope_cos.shape[1] = DR;
        a->rope_cos.data = eaddr(&both, 0, DR, 0);
    } else {
        a->rope_cos = alloc_view(p, sp->table_dtype, 2, s, pad, 0, 0);
        a->rope_sin = alloc_view(p, sp->table_dtype, 2, s, pad, 0, 0);
    }
    s[0] = DI, s[1] = DI;
    if (!sp->no_hadamard_q)
        a->hadamard_q = alloc_view(p, sp->had_dtype, 2, s, wpad, 0, 0);
    if (!sp->no_hadamard_k)
        a->hadamard_k = alloc_view(p, sp->had_dtype, 2, s, wpad, 0, 0);
    s[0] = T;
    a->cache_index = alloc_view(p, DSOPS_INT64, 1, s, 0, 0, 0);
    p->cache_index = a->cache_index.data;

    /* outputs */
    if (share & 1) {
        /* one row per (token, head): DI query values, then the head's q_idx_scale (int8) or weight (bf16),
         * then padding; tokens NI rows apart plus `pad` rows' worth of bytes */
        const int64_t rowb = sp->int8 ? DI + 4 : 2 * (DI + 2); /* bytes of one row (even) */
        const int64_t tokb = NI * rowb + 2 * pad;
        const size_t bytes = (size_t)(T * tokb) + 2 * GUARD;
        unsigned char *b = own(p, bytes);
        add_region(p, b, bytes, 1, sp->int8 ? DSOPS_INT8 : DSOPS_BF16);
        unsigned char *base = b + GUARD;
        const int64_t qes = sp->int8 ? 1 : 2;
        s[0] = T, s[1] = NI, s[2] = DI;
        a->q_idx = dsops_tensor_make(base, qdt, 3, s);
        a->q_idx.stride[0] = tokb / qes, a->q_idx.stride[1] = rowb / qes;
        s[0] = T, s[1] = NI;
        dsops_tensor side = dsops_tensor_make(base + DI * qes, DSOPS_FP16, 2, s);
        side.stride[0] = tokb / 2, side.stride[1] = rowb / 2;
        if (sp->int8) {
            a->q_idx_scale = side;
            a->weights = alloc_view(p, DSOPS_FP16, 2, s, pad, 1, 1);
        } else {
            side.dtype = DSOPS_BF16;
            a->weights = side;
        }
    } else {
        s[0] = T, s[1] = NI, s[2] = DI;
        a->q_idx = alloc_view(p, qdt, 3, s, pad, 1, 1);
        s[0] = T, s[1] = NI;
        if (sp->int8)
            a->q_idx_scale = alloc_view(p, DSOPS_FP16, 2, s, pad, 1, 1);
        a->weights = alloc_view(p, sp->int8 ? DSOPS_FP16 : DSOPS_BF16, 2, s, pad, 1, 1);
    }

    /* caches */
    if ((share & 4) && sp->int8) {
        /* one row per slot: DI int8 key values, the fp16 scale, 2 bytes of padding; 16 bytes between blocks */
        const int64_t rowb = DI + 4, blkb = BS * rowb + 16;
        const size_t bytes = (size_t)(NB * blkb) + 2 * GUARD;
        unsigned char *b = own(p, bytes);
        add_region(p, b, bytes, 0, DSOPS_UINT8);
        unsigned char *base = b + GUARD;
        s[0] = NB, s[1] = BS, s[2] = DI;
        a->idx_k_cache = dsops_tensor_make(base, DSOPS_INT8, 3, s);
        a->idx_k_cache.stride[0] = blkb, a->idx_k_cache.stride[1] = rowb;
        s[0] = NB, s[1] = BS;
        a->idx_k_scale_cache = dsops_tensor_make(base + DI, DSOPS_FP16, 2, s);
        a->idx_k_scale_cache.stride[0] = blkb / 2, a->idx_k_scale_cache.stride[1] = rowb / 2;
    } else {
        const int64_t cpad = sp->strided ? 3 : 0;
        s[0] = NB, s[1] = BS, s[2] = DI;
        a->idx_k_cache = alloc_view(p, qdt, 3, s, cpad, 1, 0);
        if (sp->int8) {
            s[0] = NB, s[1] = BS;
            a->idx_k_scale_cache = alloc_view(p, DSOPS_FP16, 2, s, cpad, 1, 0);
        }
    }

    /* data */
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < H; k++)
            putf(&a->x, t, k, 0, t < sp->zero_x ? 0.0f : tu_rng_uniform(&r, -1, 1));
    if (sp->int8) {
        fill_int8(&a->qr, &r, sp->int8_extreme);
        fill_int8(&a->idx_wq_b, &r, sp->int8_extreme);
        fill_uniform(&a->qr_scale, &r, -1, 1);         /* negative scales occur (vendor data) */
        fill_uniform(&a->idx_wq_b_scale, &r, -1, 1);
    } else {
        fill_uniform(&a->qr, &r, -1, 1);
        fill_uniform(&a->idx_wq_b, &r, -0.1f, 0.1f);
    }
    if (sp->int8 && sp->int8_extreme && T > 0) {
        /* token 0 all 127 against rows n % 5 == 0 all 127: dots of 16129 * Q, beyond 2^24 for Q > 1040
         * (the int32 -> fp32 conversion rounds) */
        for (int64_t k = 0; k < Q; k++)
            *(int8_t *)eaddr(&a->qr, 0, k, 0) = 127;
        for (int64_t n = 0; n < NQ; n += 5)
            for (int64_t k = 0; k < Q; k++)
                *(int8_t *)eaddr(&a->idx_wq_b, n, k, 0) = 127;
    }
    for (int64_t t = 0; t < T && t < sp->zero_qr; t++)
        for (int64_t k = 0; k < Q; k++)
            putf(&a->qr, t, k, 0, 0.0f);
    fill_uniform(&a->idx_wk, &r, -0.1f, 0.1f);
    fill_uniform(&a->weights_proj, &r, -0.1f, 0.1f);
    if (sp->tiny_key)
        fill_uniform(&a->ln_gamma_k, &r, 0.5e-38f, 1e-38f);
    else
        fill_uniform(&a->ln_gamma_k, &r, -1.5f, 1.5f);
    if (sp->tiny_key || sp->zero_beta)
        fill_uniform(&a->ln_beta_k, &r, 0, 0);
    else
        fill_uniform(&a->ln_beta_k, &r, -0.5f, 0.5f);
    fill_uniform(&a->rope_cos, &r, -1, 1);
    fill_uniform(&a->rope_sin, &r, -1, 1);
    const dsops_tensor *hads[2] = {&a->hadamard_q, &a->hadamard_k};
    for (int i = 0; i < 2; i++) {
        if (!hads[i]->data)
            continue;
        if (sp->sylvester) {
            dsops_tensor dense = dsops_tensor_make(xcalloc(sizeof(float) * (size_t)(DI * DI)), sp->had_dtype, 2,
                                                   hads[i]->shape);
            dsops_ref_hadamard_matrix(&dense);
            for (int64_t k = 0; k < DI; k++)
                for (int64_t j = 0; j < DI; j++)
                    memcpy(eaddr(hads[i], k, j, 0), eaddr(&dense, k, j, 0), dsops_dtype_size(sp->had_dtype));
            free(dense.data);
        } else {
            fill_uniform(hads[i], &r, -1, 1);
        }
    }
    /* cache rows: random, or NaN (int8: -1 with NaN scales) */
    for (int64_t b = 0; b < NB; b++)
        for (int64_t o = 0; o < BS; o++) {
            for (int64_t d = 0; d < DI; d++) {
                if (sp->int8)
                    *eaddr(&a->idx_k_cache, b, o, d) = sp->nan_cache ? 0xff : (uint8_t)tu_rng_u64(&r);
                else
                    putf(&a->idx_k_cache, b, o, d, sp->nan_cache ? NAN : tu_rng_uniform(&r, -1, 1));
            }
            if (sp->int8)
                putf(&a->idx_k_scale_cache, b, o, 0, sp->nan_cache ? NAN : tu_rng_uniform(&r, -1, 1));
        }

    /* cache_index: distinct random rows (partial Fisher-Yates), some negative by mode */
    const int64_t rows = NB * BS;
    int64_t *perm = xcalloc(sizeof(int64_t) * (size_t)rows);
    for (int64_t i = 0; i < rows; i++)
        perm[i] = i;
    for (int64_t t = 0; t < T; t++) {
        int64_t j = t + (int64_t)(tu_rng_u64(&r) % (uint64_t)(rows - t));
        int64_t tmp = perm[t];
        perm[t] = perm[j];
        perm[j] = tmp;
        static const int64_t negs[3] = {-1, -7, INT64_MIN};
        const int neg = sp->index_mode == IP_IDX_NONE || (sp->index_mode == IP_IDX_SOME && t % 3 == 1);
        p->cache_index[t] = neg ? negs[t % 3] : perm[t];
    }
    free(perm);
    return p;
}

ip_problem *ip_wrap(const dsops_indexer_prolog_v32_args *a)
{
    ip_problem *p = xcalloc(sizeof *p);
    p->args = *a;
    p->T = a->x.shape[0];
    p->cache_index = a->cache_index.data;
    const dsops_tensor *outs[3] = {&a->q_idx, &a->q_idx_scale, &a->weights};
    const dsops_tensor *caches[2] = {&a->idx_k_cache, &a->idx_k_scale_cache};
    for (int i = 0; i < 3; i++)
        if (outs[i]->data)
            add_region(p, outs[i]->data, (size_t)span_of(outs[i]) * dsops_dtype_size(outs[i]->dtype), 1,
                       outs[i]->dtype);
    for (int i = 0; i < 2; i++)
        if (caches[i]->data)
            add_region(p, caches[i]->data, (size_t)span_of(caches[i]) * dsops_dtype_size(caches[i]->dtype), 0,
                       caches[i]->dtype);
    return p;
}

void ip_free(ip_problem *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->nreg; i++)
        free(p->reg[i].snap);
    for (int i = 0; i < p->nbufs; i++)
        free(p->bufs[i]);
    free(p);
}

/* ---- calls: sentinels, snapshots -------------------------------------------------------------------- */

void ip_prepare_call(ip_problem *p)
{
    for (int i = 0; i < p->nreg; i++) {
        ip_region *r = &p->reg[i];
        if (r->out)
            for (size_t k = 0; k < r->n; k++)
                r->p[k] = r->pat[k % (size_t)r->period];
        memcpy(r->snap, r->p, r->n);
    }
}

void ip_restore(ip_problem *p)
{
    for (int i = 0; i < p->nreg; i++)
        memcpy(p->reg[i].p, p->reg[i].snap, p->reg[i].n);
}

int ip_untouched(const ip_problem *p, const char *label)
{
    for (int i = 0; i < p->nreg; i++) {
        const ip_region *r = &p->reg[i];
        for (size_t k = 0; k < r->n; k++)
            if (r->p[k] != r->snap[k])
                return tu_check(0, "%s: byte %zu of buffer %d changed (0x%02x -> 0x%02x)", label, k, i, r->snap[k],
                                r->p[k]);
    }
    return 1;
}

/* ---- the elements a call may write ------------------------------------------------------------------ */

typedef void (*elem_fn)(void *ctx, unsigned char *addr, size_t size);

static void each_in_view(const dsops_tensor *t, elem_fn fn, void *ctx)
{
    if (!t->data)
        return;
    const int64_t s0 = t->ndim > 0 ? t->shape[0] : 1, s1 = t->ndim > 1 ? t->shape[1] : 1,
                  s2 = t->ndim > 2 ? t->shape[2] : 1;
    const size_t es = dsops_dtype_size(t->dtype);
    for (int64_t i = 0; i < s0; i++)
        for (int64_t j = 0; j < s1; j++)
            for (int64_t k = 0; k < s2; k++)
                fn(ctx, eaddr(t, i, j, k), es);
}

/* outputs in order q_idx, q_idx_scale, weights, then the addressed cache rows (key, scale) in token order */
static void each_written(const dsops_indexer_prolog_v32_args *a, elem_fn fn, void *ctx)
{
    const int int8 = a->qr.dtype == DSOPS_INT8;
    each_in_view(&a->q_idx, fn, ctx);
    if (int8)
        each_in_view(&a->q_idx_scale, fn, ctx);
    each_in_view(&a->weights, fn, ctx);
    for (int64_t t = 0; t < a->x.shape[0]; t++) {
        const int64_t r = get_index(&a->cache_index, t);
        if (r < 0)
            continue;
        const int64_t BS = a->idx_k_cache.shape[1], blk = r / BS, off = r % BS;
        const size_t es = dsops_dtype_size(a->idx_k_cache.dtype);
        for (int64_t d = 0; d < a->idx_k_cache.shape[2]; d++)
            fn(ctx, eaddr(&a->idx_k_cache, blk, off, d), es);
        if (int8)
            fn(ctx, eaddr(&a->idx_k_scale_cache, blk, off, 0), 2);
    }
}

typedef struct gather_ctx {
    unsigned char *buf;
    size_t n, cap;
} gather_ctx;

static void gather_fn(void *vc, unsigned char *addr, size_t size)
{
    gather_ctx *g = vc;
    if (g->n + size > g->cap) {
        g->cap = (g->cap + size) * 2;
        g->buf = realloc(g->buf, g->cap);
        if (!g->buf)
            abort();
    }
    memcpy(g->buf + g->n, addr, size);
    g->n += size;
}

unsigned char *ip_gather(const dsops_indexer_prolog_v32_args *a, size_t *n)
{
    gather_ctx g = {NULL, 0, 0};
    each_written(a, gather_fn, &g);
    *n = g.n;
    return g.buf;
}

typedef struct restore_ctx {
    ip_problem *p;
    int last;
    size_t outside;   /* written elements outside every region (a test bug) */
} restore_ctx;

static void restore_fn(void *vc, unsigned char *addr, size_t size)
{
    restore_ctx *c = vc;
    ip_problem *p = c->p;
    for (int k = 0; k < p->nreg; k++) {
        int i = (c->last + k) % p->nreg;
        ip_region *r = &p->reg[i];
        if (addr >= r->p && addr + size <= r->p + r->n) {
            memcpy(addr, r->snap + (addr - r->p), size);
            c->last = i;
            return;
        }
    }
    c->outside++;
}

/* ---- reference ------------------------------------------------------------------------------------- */

ip_ref *ip_reference(const dsops_indexer_prolog_v32_args *a)
{
    const int64_t T = a->x.shape[0], NI = a->weights_proj.shape[0], DI = a->idx_wk.shape[0];
    const int int8 = a->qr.dtype == DSOPS_INT8;
    ip_ref *r = xcalloc(sizeof *r);
    r->T = T, r->NI = NI, r->DI = DI, r->int8 = int8;

    dsops_indexer_prolog_v32_args ra = *a;
    ra.prepared = NULL;
    int64_t s[3];
    const size_t tn = (size_t)(T * NI > 0 ? T * NI : 1);
    /* dense outputs */
    s[0] = T, s[1] = NI, s[2] = DI;
    ra.q_idx = dsops_tensor_make(xcalloc((int8 ? 1 : 2) * tn * (size_t)DI), int8 ? DSOPS_INT8 : DSOPS_BF16, 3, s);
    memset(&ra.q_idx_scale, 0, sizeof ra.q_idx_scale);
    if (int8)
        ra.q_idx_scale = dsops_tensor_make(xcalloc(2 * tn), DSOPS_FP16, 2, s);
    ra.weights = dsops_tensor_make(xcalloc(2 * tn), int8 ? DSOPS_FP16 : DSOPS_BF16, 2, s);
    /* compact caches: row w of [nw, 1, DI] for the w-th writing token */
    int64_t *ci = xcalloc(sizeof(int64_t) * (size_t)(T > 0 ? T : 1));
    int64_t nw = 0;
    for (int64_t t = 0; t < T; t++)
        ci[t] = get_index(&a->cache_index, t) >= 0 ? nw++ : -1;
    r->nw = nw;
    s[0] = T;
    ra.cache_index = dsops_tensor_make(ci, DSOPS_INT64, 1, s);
    const int64_t rows = nw > 0 ? nw : 1;
    s[0] = rows, s[1] = 1, s[2] = DI;
    ra.idx_k_cache = dsops_tensor_make(xcalloc((int8 ? 1 : 2) * (size_t)(rows * DI)), int8 ? DSOPS_INT8 : DSOPS_BF16,
                                       3, s);
    memset(&ra.idx_k_scale_cache, 0, sizeof ra.idx_k_scale_cache);
    if (int8)
        ra.idx_k_scale_cache = dsops_tensor_make(xcalloc(2 * (size_t)rows), DSOPS_FP16, 2, s);

    dsops_ref_indexer_prolog_v32(&ra);

    r->q_idx = xcalloc(sizeof(float) * tn * (size_t)DI);
    r->q_idx_scale = xcalloc(sizeof(float) * tn);
    r->weights = xcalloc(sizeof(float) * tn);
    r->key = xcalloc(sizeof(float) * (size_t)(rows * DI));
    r->key_scale = xcalloc(sizeof(float) * (size_t)rows);
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < NI; h++) {
            for (int64_t d = 0; d < DI; d++)
                r->q_idx[(t * NI + h) * DI + d] = getf(&ra.q_idx, t, h, d);
            if (int8)
                r->q_idx_scale[t * NI + h] = getf(&ra.q_idx_scale, t, h, 0);
            r->weights[t * NI + h] = getf(&ra.weights, t, h, 0);
        }
    for (int64_t w = 0; w < nw; w++) {
        for (int64_t d = 0; d < DI; d++)
            r->key[w * DI + d] = getf(&ra.idx_k_cache, w, 0, d);
        if (int8)
            r->key_scale[w] = getf(&ra.idx_k_scale_cache, w, 0, 0);
    }

    free(ra.q_idx.data);
    free(ra.q_idx_scale.data);
    free(ra.weights.data);
    free(ci);
    free(ra.idx_k_cache.data);
    free(ra.idx_k_scale_cache.data);
    return r;
}

void ip_ref_free(ip_ref *r)
{
    if (!r)
        return;
    free(r->q_idx);
    free(r->q_idx_scale);
    free(r->weights);
    free(r->key);
    free(r->key_scale);
    free(r);
}

/* ---- comparison (spec §4.2 "Tolerance") ----------------------------------------------------------- */

static const tu_tol TOL_QIDX_I8 = {1, 0, 0};
static const tu_tol TOL_QIDX_BF16 = {1e-4, 1.0 / 128, 0.005};
static const tu_tol TOL_QSCALE = {2.5e-5, 0, 0.005};
static const tu_tol TOL_KEY_I8 = {1, 0, 0.005};
static const tu_tol TOL_KEY_BF16 = {1e-4, 1.0 / 128, 0.005};
static const tu_tol TOL_KSCALE = {2.5e-5, 0, 0.005};
static const tu_tol TOL_W_FP16 = {2.5e-5, 1.0 / 1024, 0.005};
static const tu_tol TOL_W_BF16 = {1e-4, 1.0 / 128, 0.005};

int ip_check(ip_problem *p, const ip_ref *r, const char *label)
{
    const dsops_indexer_prolog_v32_args *a = &p->args;
    const int64_t T = r->T, NI = r->NI, DI = r->DI, nw = r->nw;
    const int int8 = r->int8;
    int ok = 1;
    char l[400];
    const size_t tn = (size_t)(T * NI > 0 ? T * NI : 1);
    float *q = xcalloc(sizeof(float) * tn * (size_t)DI), *qs = xcalloc(sizeof(float) * tn),
          *w = xcalloc(sizeof(float) * tn);

    if (T > 0) {
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < NI; h++) {
                for (int64_t d = 0; d < DI; d++)
                    q[(t * NI + h) * DI + d] = getf(&a->q_idx, t, h, d);
                if (int8)
                    qs[t * NI + h] = getf(&a->q_idx_scale, t, h, 0);
                w[t * NI + h] = getf(&a->weights, t, h, 0);
            }
        snprintf(l, sizeof l, "%s q_idx", label);
        ok &= tu_compare_close(l, q, r->q_idx, (size_t)(T * NI * DI), int8 ? TOL_QIDX_I8 : TOL_QIDX_BF16, NULL);
        if (int8) {
            snprintf(l, sizeof l, "%s q_idx_scale", label);
            ok &= tu_compare_close(l, qs, r->q_idx_scale, (size_t)(T * NI), TOL_QSCALE, NULL);
        }
        snprintf(l, sizeof l, "%s weights", label);
        ok &= tu_compare_close(l, w, r->weights, (size_t)(T * NI), int8 ? TOL_W_FP16 : TOL_W_BF16, NULL);
    }
    free(q);
    free(qs);
    free(w);

    if (nw > 0) {
        float *key = xcalloc(sizeof(float) * (size_t)(nw * DI)), *ks = xcalloc(sizeof(float) * (size_t)nw);
        int64_t i = 0;
        for (int64_t t = 0; t < T; t++) {
            const int64_t row = get_index(&a->cache_index, t);
            if (row < 0)
                continue;
            const int64_t BS = a->idx_k_cache.shape[1], blk = row / BS, off = row % BS;
            for (int64_t d = 0; d < DI; d++)
                key[i * DI + d] = getf(&a->idx_k_cache, blk, off, d);
            if (int8)
                ks[i] = getf(&a->idx_k_scale_cache, blk, off, 0);
            i++;
        }
        snprintf(l, sizeof l, "%s cache keys", label);
        ok &= tu_compare_close(l, key, r->key, (size_t)(nw * DI), int8 ? TOL_KEY_I8 : TOL_KEY_BF16, NULL);
        if (int8) {
            snprintf(l, sizeof l, "%s cache key scales", label);
            ok &= tu_compare_close(l, ks, r->key_scale, (size_t)nw, TOL_KSCALE, NULL);
        }
        free(key);
        free(ks);
    }

    /* everything the call may not write: undo the allowed writes, then every region must equal its
     * snapshot */
    restore_ctx rc = {p, 0, 0};
    each_written(a, restore_fn, &rc);
    ok &= tu_check(rc.outside == 0, "%s: %zu written elements lie outside the checked buffers (test bug)", label,
                   rc.outside);
    snprintf(l, sizeof l, "%s untouched bytes", label);
    int unt = 1;
    for (int k = 0; k < p->nreg && unt; k++) {
        const ip_region *g = &p->reg[k];
        if (memcmp(g->p, g->snap, g->n) == 0)
            continue;
        for (size_t b = 0; b < g->n; b++)
            if (g->p[b] != g->snap[b]) {
                unt = tu_check(0, "%s: byte %zu of %s buffer %d (of %zu bytes) changed 0x%02x -> 0x%02x", l, b,
                               g->out ? "output" : "cache", k, g->n, g->snap[b], g->p[b]);
                break;
            }
    }
    if (unt)
        tu_check(1, "%s", l);
    ip_restore(p);
    return ok && unt;
}
