/* Tensor views: construction, validation helpers, byte ranges for alias checks. */
#include <stdlib.h>

#include "internal.h"

size_t dsops_dtype_size(dsops_dtype dtype)
{
    switch (dtype) {
    case DSOPS_BF16: case DSOPS_FP16: return 2;
    case DSOPS_FP32: case DSOPS_INT32: return 4;
    case DSOPS_INT8: case DSOPS_UINT8: case DSOPS_FP8_E4M3: return 1;
    case DSOPS_INT64: return 8;
    default: return 0;
    }
}

const char *dsops_dtype_name(dsops_dtype dtype)
{
    switch (dtype) {
    case DSOPS_BF16: return "bf16";
    case DSOPS_FP16: return "fp16";
    case DSOPS_FP32: return "fp32";
    case DSOPS_INT8: return "int8";
    case DSOPS_INT32: return "int32";
    case DSOPS_INT64: return "int64";
    case DSOPS_UINT8: return "uint8";
    case DSOPS_FP8_E4M3: return "fp8_e4m3";
    default: return "invalid";
    }
}

dsops_tensor dsops_tensor_make(void *data, dsops_dtype dtype, int ndim, const int64_t *shape)
{
    dsops_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.ndim = ndim < 0 ? 0 : (ndim > DSOPS_MAX_DIMS ? DSOPS_MAX_DIMS : ndim);
    int64_t stride = 1;
    for (int d = t.ndim - 1; d >= 0; d--) {
        t.shape[d] = shape[d];
        t.stride[d] = stride;
        /* a shape too large for dense int64 offsets gets the largest stride, which validation refuses (V3) */
        const int64_t extent = shape[d] > 0 ? shape[d] : 1;
        stride = stride > INT64_MAX / extent ? INT64_MAX : stride * extent;
    }
    return t;
}

static void dtype_list(unsigned dtypes, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int d = DSOPS_BF16; d <= DSOPS_DTYPE_LAST; d++) {
        if (!(dtypes & DSOPS_DT(d)))
            continue;
        const char *n = dsops_dtype_name((dsops_dtype)d);
        size_t nl = strlen(n);
        if (len + nl + 5 >= cap)
            break;
        if (len) {
            memcpy(buf + len, " or ", 4);
            len += 4;
        }
        memcpy(buf + len, n, nl + 1);
        len += nl;
    }
}

dsops_status dsops_check_tensor(const dsops_tensor *t, const char *name, int ndim, unsigned dtypes,
                                bool need_unit_inner)
{
    if (!t->data)
        return dsops_fail(DSOPS_ERR_NULL, "%s is NULL (required)", name);
    if (t->ndim != ndim)
        return dsops_fail(DSOPS_ERR_SHAPE, "%s has rank %d, expected %d", name, t->ndim, ndim);
    if (t->dtype <= DSOPS_DTYPE_INVALID || t->dtype > DSOPS_DTYPE_LAST || !(dtypes & DSOPS_DT(t->dtype))) {
        char want[64];
        dtype_list(dtypes, want, sizeof want);
        return dsops_fail(DSOPS_ERR_DTYPE, "%s has dtype %s, expected %s", name, dsops_dtype_name(t->dtype), want);
    }
    int64_t count = 1;
    for (int d = 0; d < ndim; d++) {
        if (t->shape[d] < 0)
            return dsops_fail(DSOPS_ERR_SHAPE, "%s.shape[%d] = %lld is negative", name, d, (long long)t->shape[d]);
        if (t->stride[d] < 0)
            return dsops_fail(DSOPS_ERR_SHAPE, "%s.stride[%d] = %lld is negative", name, d, (long long)t->stride[d]);
        /* each extent on its own as well: a zero extent elsewhere must not let an operator's own
         * arithmetic on this one (rounding up to a tile, say) overflow */
        if (t->shape[d] > INT64_MAX / 8)
            return dsops_fail(DSOPS_ERR_SHAPE, "%s.shape[%d] = %lld is above 2^60", name, d, (long long)t->shape[d]);
        if (t->shape[d] > 0 && count > INT64_MAX / 8 / t->shape[d])
            return dsops_fail(DSOPS_ERR_SHAPE, "%s has too many elements (int64 overflow)", name);
        count *= t->shape[d];
        /* the largest linear offset must fit as well */
        if (t->shape[d] > 1 && t->stride[d] > (INT64_MAX / 8) / t->shape[d])
            return dsops_fail(DSOPS_ERR_SHAPE, "%s.stride[%d] = %lld overflows int64 offsets", name, d,
                              (long long)t->stride[d]);
    }
    if (need_unit_inner && ndim > 0 && t->shape[ndim - 1] > 1 && t->stride[ndim - 1] != 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "%s.stride[%d] = %lld, the innermost stride must be 1", name, ndim - 1,
                          (long long)t->stride[ndim - 1]);
    return DSOPS_OK;
}

dsops_status dsops_check_dim(const dsops_tensor *t, const char *name, int dim, int64_t want, const char *what)
{
    if (t->shape[dim] != want)
        return dsops_fail(DSOPS_ERR_SHAPE, "%s.shape[%d] = %lld, expected %lld (%s)", name, dim,
                          (long long)t->shape[dim], (long long)want, what);
    return DSOPS_OK;
}

void dsops_tensor_byte_range(const dsops_tensor *t, uintptr_t *lo, uintptr_t *hi)
{
    uintptr_t base = (uintptr_t)t->data;
    *lo = *hi = base;
    if (!t->data)
        return;
    int64_t last = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0)
            return;
        last += (t->shape[d] - 1) * t->stride[d];
    }
    *hi = base + (uintptr_t)((last + 1) * (int64_t)dsops_dtype_size(t->dtype));
}

/* Interleaved views (two fields of one row buffer, such as q_nope / q_rope of a [T, N, 576] tensor or
 * the fields of packed cache rows) span overlapping byte ranges without sharing a byte. They are
 * recognised when every outer stride of both views is a multiple of one row pitch P (bytes), each
 * view's row is contiguous and fits in P, and the two rows occupy disjoint windows modulo P: then
 * every byte of a lies in its window modulo P and so does every byte of b. */
static bool disjoint_rows(const dsops_tensor *a, const dsops_tensor *b)
{
    const dsops_tensor *v[2] = {a, b};
    int64_t pitch = 0;
    for (int i = 0; i < 2; i++) {
        int nd = v[i]->ndim;
        if (nd < 1 || (v[i]->shape[nd - 1] > 1 && v[i]->stride[nd - 1] != 1))
            return false;
        int64_t es = (int64_t)dsops_dtype_size(v[i]->dtype);
        for (int d = 0; d < nd - 1; d++)
            if (v[i]->shape[d] > 1 && (pitch == 0 || v[i]->stride[d] * es < pitch))
                pitch = v[i]->stride[d] * es;
    }
    if (pitch <= 0)
        return false;
    int64_t lo[2], width[2];
    for (int i = 0; i < 2; i++) {
        int nd = v[i]->ndim;
        int64_t es = (int64_t)dsops_dtype_size(v[i]->dtype);
        for (int d = 0; d < nd - 1; d++)
            if (v[i]->shape[d] > 1 && (v[i]->stride[d] * es) % pitch != 0)
                return false;
        width[i] = v[i]->shape[nd - 1] * es;
        lo[i] = (int64_t)((uintptr_t)v[i]->data % (uintptr_t)pitch);
        if (width[i] > pitch)
            return false;
    }
    /* windows [lo, lo + width) on a circle of length pitch */
    for (int i = 0; i < 2; i++) {
        int64_t start = (lo[1 - i] - lo[i] + pitch) % pitch; /* other window's start, seen from this one */
        if (start < width[i] || start + width[1 - i] > pitch)
            return false;
    }
    return true;
}

/* Exact test: every contiguous row (or element) of both views as a byte interval, sorted, checked for
 * a shared byte. Used when the pitch test cannot decide (padding between outer rows, strided
 * innermost dimensions); bounded to keep validation cheap. */
typedef struct byte_interval {
    uintptr_t lo, hi;
    int owner;
} byte_interval;

static int cmp_interval(const void *x, const void *y)
{
    const byte_interval *a = x, *b = y;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

#define ROW_SWEEP_LIMIT (1 << 22)

/* A view as intervals: its contiguous rows, or every element when the innermost stride is not 1. */
static bool unit_inner(const dsops_tensor *t) { return t->ndim >= 1 && (t->shape[t->ndim - 1] <= 1 || t->stride[t->ndim - 1] == 1); }

static int64_t interval_count(const dsops_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d + (unit_inner(t) ? 1 : 0) < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

static void add_intervals(const dsops_tensor *t, int owner, byte_interval *iv, int64_t *n)
{
    int nd = t->ndim, outer = unit_inner(t) ? nd - 1 : nd;
    int64_t es = (int64_t)dsops_dtype_size(t->dtype), count = interval_count(t);
    int64_t width = unit_inner(t) ? t->shape[nd - 1] * es : es;
    for (int64_t r = 0; r < count; r++) {
        int64_t rem = r, off = 0;
        for (int d = outer - 1; d >= 0; d--) {
            off += (rem % t->shape[d]) * t->stride[d] * es;
            rem /= t->shape[d];
        }
        iv[(*n)++] = (byte_interval){(uintptr_t)t->data + (uintptr_t)off, (uintptr_t)t->data + (uintptr_t)(off + width),
                                     owner};
    }
}

/* 1: no shared byte; 0: a shared byte, or too large to decide. */
static bool disjoint_by_sweep(const dsops_tensor *a, const dsops_tensor *b)
{
    if (a->ndim < 1 || b->ndim < 1)
        return false;
    int64_t n = interval_count(a) + interval_count(b);
    if (n > ROW_SWEEP_LIMIT)
        return false;
    byte_interval *iv = malloc(sizeof *iv * (size_t)n);
    if (!iv)
        return false;
    int64_t k = 0;
    add_intervals(a, 0, iv, &k);
    add_intervals(b, 1, iv, &k);
    qsort(iv, (size_t)k, sizeof *iv, cmp_interval);
    bool disjoint = true;
    uintptr_t reach[2] = {0, 0}; /* furthest end seen so far per view */
    for (int64_t i = 0; i < k && disjoint; i++) {
        if (iv[i].hi == iv[i].lo)
            continue;
        if (iv[i].lo < reach[1 - iv[i].owner])
            disjoint = false;
        if (iv[i].hi > reach[iv[i].owner])
            reach[iv[i].owner] = iv[i].hi;
    }
    free(iv);
    return disjoint;
}

/* A view whose byte offsets the alias checks can compute without overflow: the rules dsops_check_tensor applies
 * (V3) to its rank, extents and strides, and the offset of its last byte within int64. An operator may check
 * aliasing before it has validated every shape (the fused layer checks its outputs against every tensor first);
 * a view that breaks these rules takes no part in the alias checks, and its own validation refuses it. */
static bool measurable(const dsops_tensor *t)
{
    if (!t->data || t->ndim < 0 || t->ndim > DSOPS_MAX_DIMS || dsops_dtype_size(t->dtype) == 0)
        return false;
    int64_t count = 1, last = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0 || t->stride[d] < 0 || t->shape[d] > INT64_MAX / 8)
            return false;
        if (t->shape[d] > 0 && count > INT64_MAX / 8 / t->shape[d])
            return false;
        count *= t->shape[d];
        if (t->shape[d] > 1 && t->stride[d] > (INT64_MAX / 8) / t->shape[d])
            return false;
        if (t->shape[d] > 0)
            last += (t->shape[d] - 1) * t->stride[d]; /* each term < INT64_MAX / 8: no overflow in 6 terms */
    }
    return last < INT64_MAX / 8;
}

dsops_status dsops_check_no_overlap(const dsops_tensor *a, const char *an, const dsops_tensor *b, const char *bn)
{
    if (!measurable(a) || !measurable(b))
        return DSOPS_OK;
    uintptr_t alo, ahi, blo, bhi;
    dsops_tensor_byte_range(a, &alo, &ahi);
    dsops_tensor_byte_range(b, &blo, &bhi);
    if (alo == ahi || blo == bhi)
        return DSOPS_OK;
    if (alo < bhi && blo < ahi && !disjoint_rows(a, b) && !disjoint_by_sweep(a, b))
        return dsops_fail(DSOPS_ERR_ALIAS, "%s overlaps %s in memory", an, bn);
    return DSOPS_OK;
}

dsops_status dsops_check_no_self_overlap(const dsops_tensor *t, const char *name)
{
    if (!t || !measurable(t))
        return DSOPS_OK;
    /* dims of extent > 1 by increasing stride: each stride must pass every offset the smaller ones reach, so
     * that no two index tuples meet (a stride 0, or views whose dimensions interleave, are refused) */
    int order[DSOPS_MAX_DIMS], n = 0;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] > 1)
            order[n++] = d;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t->stride[order[j]] < t->stride[order[j - 1]]; j--) {
            int x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    int64_t reach = 0; /* the largest element offset of the smaller dims */
    for (int i = 0; i < n; i++) {
        int d = order[i];
        if (t->stride[d] <= reach)
            return dsops_fail(DSOPS_ERR_ALIAS,
                              "%s: stride[%d] = %lld makes its elements overlap (an output's elements must be distinct)",
                              name, d, (long long)t->stride[d]);
        reach += (t->shape[d] - 1) * t->stride[d];
    }
    return DSOPS_OK;
}

dsops_status dsops_check_outputs_apart(const dsops_named_tensor *outs, size_t nouts, const dsops_named_tensor *ins,
                                       size_t nins)
{
    for (size_t o = 0; o < nouts; o++)
        DSOPS_TRY(dsops_check_no_self_overlap(outs[o].t, outs[o].name));
    for (size_t o = 0; o < nouts; o++) {
        for (size_t i = 0; i < nins; i++)
            DSOPS_TRY(dsops_check_no_overlap(outs[o].t, outs[o].name, ins[i].t, ins[i].name));
        for (size_t p = o + 1; p < nouts; p++)
            DSOPS_TRY(dsops_check_no_overlap(outs[o].t, outs[o].name, outs[p].t, outs[p].name));
    }
    return DSOPS_OK;
}
