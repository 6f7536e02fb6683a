#include "problem_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- names in test labels ---------------------------------------------------------------------------- */

const char *pc_layout_name(dsops_kv_layout l)
{
    static const char *const names[] = {"split_bf16", "split_int8", "packed_int8", "flashmla_fp8"}; /* enum order */
    return (unsigned)l < sizeof names / sizeof *names ? names[l] : "unknown";
}

const char *pc_rope_name(dsops_rope_mode m)
{
    return m == DSOPS_ROPE_INTERLEAVED ? "interleaved" : (m == DSOPS_ROPE_HALF ? "half" : "in_half_out");
}

/* ---- views ------------------------------------------------------------------------------------------- */

void pc_put_u16(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, uint16_t v)
{
    memcpy(tf_eaddr(t, i0, i1, i2), &v, 2);
}

void pc_put_i8(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, int8_t v)
{
    memcpy(tf_eaddr(t, i0, i1, i2), &v, 1);
}

void pc_put_f32(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v)
{
    memcpy(tf_eaddr(t, i0, i1, i2), &v, 4);
}

dsops_tensor pc_view(void *data, dsops_dtype dt, int ndim, const int64_t *shape, const int64_t *outer_stride)
{
    dsops_tensor t = dsops_tensor_make(data, dt, ndim, shape);
    for (int d = 0; d + 1 < ndim; d++)
        t.stride[d] = outer_stride[d];
    t.stride[ndim - 1] = 1;
    return t;
}

/* ---- sequences and paged caches ---------------------------------------------------------------------- */

int64_t pc_sequences(int B, const int *S, const int *seqused, int32_t **cu, int32_t **used)
{
    *cu = tu_calloc((size_t)B + 1, sizeof(int32_t));
    *used = tu_calloc((size_t)B, sizeof(int32_t));
    int64_t T = 0;
    for (int b = 0; b < B; b++) {
        (*cu)[b] = (int32_t)T;
        T += S[b];
        (*used)[b] = seqused[b];
    }
    (*cu)[B] = (int32_t)T;
    return T;
}

pc_paging pc_block_table(tu_rng *rng, int B, const int64_t *keys, int BS, int extra_blocks, int extra_cols,
                         int garbage_kinds, const unsigned char *dead)
{
    pc_paging pg = {.NB = extra_blocks, .MB = 0};
    for (int b = 0; b < B; b++) {
        const int64_t nb = (keys[b] + BS - 1) / BS;
        pg.NB += nb;
        pg.MB = nb > pg.MB ? nb : pg.MB;
    }
    pg.MB += extra_cols;
    if (pg.MB < 1)
        pg.MB = 1;
    if (pg.NB < 1)
        pg.NB = 1;
    const int64_t NB = pg.NB, MB = pg.MB;
    int32_t *perm = tu_calloc((size_t)NB, sizeof(int32_t));
    pg.owner = tu_calloc((size_t)NB, sizeof(int32_t));
    for (int64_t i = 0; i < NB; i++) {
        perm[i] = (int32_t)i;
        pg.owner[i] = -1;
    }
    for (int64_t i = NB - 1; i > 0; i--) {
        const int64_t j = tu_rng_int(rng, 0, i);
        const int32_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    pg.table = tu_calloc((size_t)(B * MB), sizeof(int32_t));
    const int32_t garbage[6] = {-1, 99999, INT32_MIN, -7, INT32_MAX, (int32_t)NB};
    for (int b = 0, next = 0; b < B; b++) {
        const int64_t nb = (keys[b] + BS - 1) / BS;
        const int is_dead = dead && dead[b];
        for (int64_t j = 0; j < MB; j++) {
            int32_t *e = &pg.table[b * MB + j];
            if (is_dead) {
                *e = garbage[(b + j) % 6];
            } else if (j < nb) {
                *e = perm[next + j];
                pg.owner[*e] = b;
            } else {
                *e = garbage_kinds > 0 ? garbage[(b + j) % garbage_kinds] : -1;
            }
        }
        next += (int)nb; /* a dead sequence's blocks stay unreferenced */
    }
    free(perm);
    return pg;
}

void pc_sequence_views(int B, int64_t MB, int32_t *table, int32_t *cu, int32_t *used, dsops_tensor *block_table,
                       dsops_tensor *cu_seqlens_q, dsops_tensor *seqused_kv)
{
    const int64_t st[2] = {B, MB}, sc[1] = {B + 1}, su[1] = {B};
    *block_table = dsops_tensor_make(table, DSOPS_INT32, 2, st);
    *cu_seqlens_q = dsops_tensor_make(cu, DSOPS_INT32, 1, sc);
    *seqused_kv = dsops_tensor_make(used, DSOPS_INT32, 1, su);
}

/* ---- outputs inside sentinel-filled buffers ---------------------------------------------------------- */

static int holds(const unsigned char *e, size_t esz, uint32_t sentinel)
{
    if (esz == 2) {
        uint16_t v;
        memcpy(&v, e, 2);
        return v == (uint16_t)sentinel;
    }
    uint32_t v;
    memcpy(&v, e, 4);
    return v == sentinel;
}

void pc_fill_sentinel(void *buf, size_t esz, int64_t n, uint32_t sentinel)
{
    const uint16_t s16 = (uint16_t)sentinel;
    for (int64_t i = 0; i < n; i++)
        memcpy((unsigned char *)buf + (size_t)i * esz, esz == 2 ? (const void *)&s16 : (const void *)&sentinel, esz);
}

int pc_holds_sentinel(const void *buf, size_t esz, int64_t n, uint32_t sentinel)
{
    for (int64_t i = 0; i < n; i++)
        if (!holds((const unsigned char *)buf + (size_t)i * esz, esz, sentinel))
            return 0;
    return 1;
}

int pc_check_outside_view(const char *label, const char *what, const void *buf, size_t esz, int64_t n,
                          uint32_t sentinel, const dsops_tensor *v)
{
    unsigned char *in_view = tu_calloc((size_t)n, 1);
    if (v->data) {
        const int64_t d0 = v->shape[0], d1 = v->ndim > 1 ? v->shape[1] : 1, d2 = v->ndim > 2 ? v->shape[2] : 1;
        for (int64_t i = 0; i < d0; i++)
            for (int64_t j = 0; j < d1; j++)
                for (int64_t k = 0; k < d2; k++)
                    in_view[(tf_eaddr(v, i, j, k) - (const unsigned char *)buf) / (ptrdiff_t)esz] = 1;
    }
    int64_t stray = -1;
    for (int64_t i = 0; i < n && stray < 0; i++)
        if (!in_view[i] && !holds((const unsigned char *)buf + (size_t)i * esz, esz, sentinel))
            stray = i;
    free(in_view);
    return tu_check(stray < 0, "%s: %s buffer element %lld outside the view was written", label, what,
                    (long long)stray);
}

/* ---- problems in a tf_fixture ------------------------------------------------------------------------ */

int pc_default_blocks(int64_t T, int64_t BS) { return (int)((2 * T + 3 + BS - 1) / BS); }

void pc_cache_indices(tu_rng *r, int64_t rows, int64_t T, pc_index_mode mode, int64_t *cache_index)
{
    static const int64_t negs[3] = {-1, -7, INT64_MIN};
    int64_t *perm = tf_xcalloc(sizeof(int64_t) * (size_t)rows);
    for (int64_t i = 0; i < rows; i++)
        perm[i] = i;
    for (int64_t t = 0; t < T; t++) {
        const int64_t j = t + (int64_t)(tu_rng_u64(r) % (uint64_t)(rows - t));
        const int64_t tmp = perm[t];
        perm[t] = perm[j];
        perm[j] = tmp;
        const int neg = mode == PC_IDX_NONE || (mode == PC_IDX_SOME && t % 3 == 1);
        cache_index[t] = neg ? negs[t % 3] : perm[t];
    }
    free(perm);
}

void pc_fill_rows(const dsops_tensor *t, tu_rng *r, int64_t zero_rows)
{
    for (int64_t i = 0; i < t->shape[0]; i++)
        for (int64_t k = 0; k < t->shape[1]; k++)
            tf_putf(t, i, k, 0, i < zero_rows ? 0.0f : tu_rng_uniform(r, -1, 1));
}

void pc_rope_tables(tf_fixture *f, dsops_dtype dt, int64_t T, int64_t pad, int shared, dsops_tensor *cos,
                    dsops_tensor *sin)
{
    enum { DR = 64 };
    if (shared) {
        const int64_t s[2] = {T, 2 * DR};
        const dsops_tensor both = tf_alloc_view(f, dt, 2, s, pad, 0, 0);
        *sin = both, *cos = both;
        sin->shape[1] = cos->shape[1] = DR;
        cos->data = tf_eaddr(&both, 0, DR, 0);
    } else {
        const int64_t s[2] = {T, DR};
        *cos = tf_alloc_view(f, dt, 2, s, pad, 0, 0);
        *sin = tf_alloc_view(f, dt, 2, s, pad, 0, 0);
    }
}

int64_t *pc_compact_index(const dsops_tensor *cache_index, int64_t *nw)
{
    const int64_t T = cache_index->shape[0];
    int64_t *ci = tf_xcalloc(sizeof(int64_t) * (size_t)(T > 0 ? T : 1));
    *nw = 0;
    for (int64_t t = 0; t < T; t++)
        ci[t] = tf_get_index(cache_index, t) >= 0 ? (*nw)++ : -1;
    return ci;
}

void pc_dense_f32(const dsops_tensor *t, float *dst)
{
    const int64_t s0 = t->shape[0], s1 = t->ndim > 1 ? t->shape[1] : 1, s2 = t->ndim > 2 ? t->shape[2] : 1;
    for (int64_t i = 0; i < s0; i++)
        for (int64_t j = 0; j < s1; j++)
            for (int64_t k = 0; k < s2; k++)
                dst[(i * s1 + j) * s2 + k] = tf_getf(t, i, j, k);
}

void pc_each_in_cache_row(const dsops_tensor *t, int64_t r, tf_elem_fn fn, void *ctx)
{
    if (!t->data)
        return;
    const int64_t BS = t->shape[1], blk = r / BS, off = r % BS, W = t->ndim > 2 ? t->shape[2] : 1;
    const size_t es = dsops_dtype_size(t->dtype);
    for (int64_t k = 0; k < W; k++)
        fn(ctx, tf_eaddr(t, blk, off, k), es);
}

unsigned char *pc_gather(pc_each_written_fn each, const void *args, size_t *n)
{
    tf_gather_ctx g = {NULL, 0, 0};
    each(args, tf_gather_fn, &g);
    *n = g.n;
    return g.buf;
}

int pc_check_only_written(tf_fixture *f, pc_each_written_fn each, const void *args, const char *label)
{
    tf_restore_ctx rc = {f, 0, 0};
    each(args, tf_restore_fn, &rc);
    const int inside = tu_check(rc.outside == 0, "%s: %zu written elements lie outside the checked buffers (test bug)",
                                label, rc.outside);
    char l[400];
    snprintf(l, sizeof l, "%s untouched bytes", label);
    const int unt = tf_check_untouched(f, l);
    tf_restore(f);
    return inside && unt;
}

/* ---- runs of the test programs ----------------------------------------------------------------------- */

int pc_call(const pc_target *t, dsops_context *c, const char *label)
{
    tf_prepare_call(t->fx);
    return tu_check_accepted(label, t->call(c, t->args));
}

void pc_run_both(const pc_target *t, dsops_context *c, const char *label)
{
    size_t n1 = 0, n2 = 0;
    unsigned char *g1 = NULL, *g2 = NULL;
    *t->prepared = NULL;
    if (pc_call(t, c, label)) {
        g1 = t->gather(t->args, &n1);
        if (t->ref)
            t->check(t->problem, t->ref, label);
    }
    if (!g1)
        return;
    char l[400];
    snprintf(l, sizeof l, "%s prepared", label);
    dsops_prepared *prep = NULL;
    const dsops_status st = t->prepare(c, t->args, &prep);
    if (tu_check(st == DSOPS_OK && prep != NULL, "%s: prepare: status %s (%s)", l, dsops_status_name(st),
                 dsops_last_error())) {
        *t->prepared = prep;
        if (pc_call(t, c, l)) {
            g2 = t->gather(t->args, &n2);
            tu_check_same_bytes(l, g2, n2, g1, n1, "the unprepared call");
            if (t->ref)
                t->check(t->problem, t->ref, l);
        }
        *t->prepared = NULL;
        dsops_prepared_destroy(prep);
    }
    free(g1);
    free(g2);
}

void pc_run_threads(const pc_target *t, const char *label)
{
    dsops_context *c = NULL;
    if (!tu_check(dsops_context_create(&c) == DSOPS_OK, "%s: context", label))
        return;
    const int tiers[2] = {DSOPS_ISA_SCALAR, (int)dsops_isa_detected()};
    for (int ti = 0; ti < (tiers[1] == tiers[0] ? 1 : 2); ti++) {
        if (!tu_set_tier(c, (dsops_isa)tiers[ti]))
            continue;
        unsigned char *first = NULL;
        size_t n0 = 0;
        for (int th = 1; th <= 3; th++) {
            char l[300];
            snprintf(l, sizeof l, "%s [%s] threads %d", label, dsops_isa_name((dsops_isa)tiers[ti]), th);
            dsops_context_set_threads(c, th);
            if (!pc_call(t, c, l))
                continue;
            size_t n;
            unsigned char *g = t->gather(t->args, &n);
            tf_restore(t->fx);
            if (!first) {
                first = g, n0 = n;
                continue;
            }
            tu_check_same_bytes(l, g, n, first, n0, "1 thread");
            free(g);
        }
        free(first);
    }
    dsops_context_destroy(c);
}
