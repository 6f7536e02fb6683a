#include "fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases_internal.h"
#include "ref.h"

/* ---- allocations and regions ----------------------------------------------------------------------- */

void tf_adopt(tf_fixture *f, void *m)
{
    if (f->nbufs >= TF_MAX_BUFS) {
        fprintf(stderr, "fixture: too many buffers\n");
        abort();
    }
    f->bufs[f->nbufs++] = m;
}

void *tf_own(tf_fixture *f, size_t bytes)
{
    if (f->nbufs >= TF_MAX_BUFS) { /* checked before allocating: nothing leaks on abort */
        fprintf(stderr, "fixture: too many buffers\n");
        abort();
    }
    void *m = cases_xcalloc(1, bytes);
    f->bufs[f->nbufs++] = m;
    return m;
}

void tf_add_region(tf_fixture *f, void *ptr, size_t n, int out, dsops_dtype dt)
{
    if (f->nreg >= TF_MAX_REGIONS) {
        fprintf(stderr, "fixture: too many regions\n");
        abort();
    }
    tf_region *r = &f->reg[f->nreg++];
    memset(r, 0, sizeof *r);
    r->p = ptr;
    r->n = n;
    r->snap = cases_xcalloc(1, n);
    r->out = out;
    /* NaN-like sentinels of the element width, so an element left unwritten fails the value checks */
    if (dt == DSOPS_BF16 || dt == DSOPS_FP16) {
        r->pat[0] = 0xad, r->pat[1] = 0xde, r->period = 2;
    } else if (dt == DSOPS_FP32) {
        r->pat[0] = 0xef, r->pat[1] = 0xbe, r->pat[2] = 0xad, r->pat[3] = 0xde, r->period = 4;
    } else {
        r->pat[0] = 0x80, r->period = 1;
    }
}

void tf_free(tf_fixture *f)
{
    for (int i = 0; i < f->nreg; i++)
        free(f->reg[i].snap);
    for (int i = 0; i < f->nbufs; i++)
        free(f->bufs[i]);
    f->nreg = f->nbufs = 0;
}

/* ---- views ----------------------------------------------------------------------------------------- */

dsops_tensor tf_view_of(void *data, dsops_dtype dt, int ndim, const int64_t *shape, int64_t pad)
{
    dsops_tensor t = dsops_tensor_make(data, dt, ndim, shape);
    if (ndim > 0)
        t.stride[ndim - 1] = 1;
    for (int d = ndim - 2; d >= 0; d--)
        t.stride[d] = t.stride[d + 1] * shape[d + 1] + pad;
    return t;
}

int64_t tf_span_of(const dsops_tensor *t)
{
    int64_t last = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0)
            return 0;
        last += (t->shape[d] - 1) * t->stride[d];
    }
    return last + 1;
}

dsops_tensor tf_alloc_view(tf_fixture *f, dsops_dtype dt, int ndim, const int64_t *shape, int64_t pad, int region,
                           int out)
{
    dsops_tensor t = tf_view_of(NULL, dt, ndim, shape, pad);
    const size_t span = (size_t)tf_span_of(&t) * dsops_dtype_size(dt);
    const size_t guard = TF_GUARD + (f->big_guard ? 8 * span : 0);
    const size_t bytes = span + 2 * guard;
    unsigned char *b = tf_own(f, bytes);
    t.data = b + guard;
    if (region)
        tf_add_region(f, b, bytes, out, dt);
    return t;
}

/* ---- element access -------------------------------------------------------------------------------- */

unsigned char *tf_eaddr(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    int64_t off = t->ndim > 0 ? i0 * t->stride[0] : 0;
    if (t->ndim > 1)
        off += i1 * t->stride[1];
    if (t->ndim > 2)
        off += i2 * t->stride[2];
    return (unsigned char *)t->data + off * (int64_t)dsops_dtype_size(t->dtype);
}

float tf_getf(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    const unsigned char *q = tf_eaddr(t, i0, i1, i2);
    uint16_t h;
    float f;
    switch (t->dtype) {
    case DSOPS_BF16:
        memcpy(&h, q, 2);
        return cases_bf16_value(h);
    case DSOPS_FP16:
        memcpy(&h, q, 2);
        return dsops_ref_f32_from_fp16(h);
    case DSOPS_FP32:
        memcpy(&f, q, 4);
        return f;
    case DSOPS_INT8: return (float)(int8_t)*q;
    case DSOPS_UINT8: return (float)*q;
    case DSOPS_FP8_E4M3: return dsops_ref_f32_from_e4m3(*q);
    default: return NAN;
    }
}

void tf_putf(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v)
{
    unsigned char *q = tf_eaddr(t, i0, i1, i2);
    if (t->dtype == DSOPS_BF16 || t->dtype == DSOPS_FP16) {
        uint16_t h = t->dtype == DSOPS_BF16 ? cases_bf16_bits(v) : dsops_ref_fp16_from_f32(v);
        memcpy(q, &h, 2);
    } else if (t->dtype == DSOPS_FP32) {
        memcpy(q, &v, 4);
    } else {
        int8_t i = (int8_t)v;
        memcpy(q, &i, 1);
    }
}

int64_t tf_get_index(const dsops_tensor *ci, int64_t t)
{
    int64_t r;
    memcpy(&r, tf_eaddr(ci, t, 0, 0), sizeof r);
    return r;
}

/* ---- the elements a call may write ----------------------------------------------------------------- */

void tf_each_in_view(const dsops_tensor *t, tf_elem_fn fn, void *ctx)
{
    if (!t->data)
        return;
    const int64_t s0 = t->ndim > 0 ? t->shape[0] : 1, s1 = t->ndim > 1 ? t->shape[1] : 1,
                  s2 = t->ndim > 2 ? t->shape[2] : 1;
    const size_t es = dsops_dtype_size(t->dtype);
    for (int64_t i = 0; i < s0; i++)
        for (int64_t j = 0; j < s1; j++)
            for (int64_t k = 0; k < s2; k++)
                fn(ctx, tf_eaddr(t, i, j, k), es);
}

void tf_gather_fn(void *vc, unsigned char *addr, size_t size)
{
    tf_gather_ctx *g = vc;
    if (g->n + size > g->cap) {
        g->cap = (g->cap + size) * 2;
        g->buf = realloc(g->buf, g->cap);
        if (!g->buf)
            abort();
    }
    memcpy(g->buf + g->n, addr, size);
    g->n += size;
}

void tf_restore_fn(void *vc, unsigned char *addr, size_t size)
{
    tf_restore_ctx *c = vc;
    tf_fixture *f = c->f;
    for (int k = 0; k < f->nreg; k++) {
        const int i = (c->last + k) % f->nreg;
        tf_region *r = &f->reg[i];
        if (addr >= r->p && addr + size <= r->p + r->n) {
            memcpy(addr, r->snap + (addr - r->p), size);
            c->last = i;
            return;
        }
    }
    c->outside++;
}

/* ---- calls: sentinels, snapshots ------------------------------------------------------------------- */

void tf_prepare_call(tf_fixture *f)
{
    for (int i = 0; i < f->nreg; i++) {
        tf_region *r = &f->reg[i];
        if (r->out)
            for (size_t k = 0; k < r->n; k++)
                r->p[k] = r->pat[k % (size_t)r->period];
        memcpy(r->snap, r->p, r->n);
    }
}

void tf_restore(tf_fixture *f)
{
    for (int i = 0; i < f->nreg; i++)
        memcpy(f->reg[i].p, f->reg[i].snap, f->reg[i].n);
}

int tf_first_change(const tf_fixture *f, int *region, size_t *byte)
{
    for (int i = 0; i < f->nreg; i++) {
        const tf_region *r = &f->reg[i];
        if (memcmp(r->p, r->snap, r->n) == 0)
            continue;
        size_t k = 0;
        while (r->p[k] == r->snap[k])
            k++;
        *region = i, *byte = k;
        return 1;
    }
    return 0;
}

unsigned char *tf_alloc_region(tf_fixture *f, size_t bytes, int out, dsops_dtype dt)
{
    unsigned char *b = tf_own(f, bytes + 2 * TF_GUARD);
    tf_add_region(f, b, bytes + 2 * TF_GUARD, out, dt);
    return b + TF_GUARD;
}
