/* Call records through their descriptions (call_record.h). */
#include "call_record.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

bool record_is_output(dsops_arg_role r) { return r == DSOPS_ARG_OUT || r == DSOPS_ARG_OUT_OPT; }
bool record_is_inout(dsops_arg_role r) { return r == DSOPS_ARG_INOUT || r == DSOPS_ARG_INOUT_OPT; }

dsops_tensor *record_tensor(void *args, const dsops_tensor_desc *d)
{
    return (dsops_tensor *)((char *)args + d->offset);
}

size_t record_view_elements(const dsops_tensor *t)
{
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= (size_t)t->shape[i];
    return n;
}

/* 1 if the view's elements are contiguous in row-major order. */
static int view_is_dense(const dsops_tensor *t)
{
    int64_t want = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] > 1 && t->stride[i] != want)
            return 0;
        want *= t->shape[i];
    }
    return 1;
}

void record_view_copy(dsops_tensor *t, unsigned char *dense, record_copy copy)
{
    size_t es = dsops_dtype_size(t->dtype), n = record_view_elements(t);
    if (view_is_dense(t) && n > 0) { /* the large outputs of the big cases: whole-buffer copies */
        unsigned char *data = t->data;
        if (copy == RECORD_GATHER) {
            memcpy(dense, data, n * es);
        } else if (copy == RECORD_SCATTER) {
            memcpy(data, dense, n * es);
        } else {
            memcpy(data, dense, es);
            for (size_t done = 1; done < n; done *= 2)
                memcpy(data + done * es, data, (done * 2 <= n ? done : n - done) * es);
        }
        return;
    }
    int64_t idx[DSOPS_MAX_DIMS] = {0};
    for (size_t e = 0; e < n; e++) {
        int64_t off = 0;
        for (int i = 0; i < t->ndim; i++)
            off += idx[i] * t->stride[i];
        unsigned char *elem = (unsigned char *)t->data + (size_t)off * es;
        if (copy == RECORD_GATHER)
            memcpy(dense + e * es, elem, es);
        else
            memcpy(elem, copy == RECORD_SCATTER ? dense + e * es : dense, es);
        for (int i = t->ndim - 1; i >= 0; i--) {
            if (++idx[i] < t->shape[i])
                break;
            idx[i] = 0;
        }
    }
}

bool record_format_param(const void *args, const dsops_param_desc *p, char *buf, size_t len)
{
    const char *src = (const char *)args + p->offset;
    switch (p->type) {
    case DSOPS_PARAM_FLOAT: {
        float f;
        memcpy(&f, src, sizeof f);
        snprintf(buf, len, "%.9g", (double)f);
        return true;
    }
    case DSOPS_PARAM_DOUBLE: {
        double d;
        memcpy(&d, src, sizeof d);
        snprintf(buf, len, "%.17g", d);
        return true;
    }
    case DSOPS_PARAM_INT: {
        int i;
        memcpy(&i, src, sizeof i);
        snprintf(buf, len, "%d", i);
        return true;
    }
    case DSOPS_PARAM_BOOL: {
        int i = 0;
        if (p->size == sizeof(bool)) {
            bool b;
            memcpy(&b, src, sizeof b);
            i = b;
        } else {
            memcpy(&i, src, sizeof i);
        }
        snprintf(buf, len, "%s", i ? "true" : "false");
        return i == 0 || i == 1; /* an int flag's "not given yet" (-1: follow the tensors) has no spelling */
    }
    case DSOPS_PARAM_ENUM: {
        int v;
        memcpy(&v, src, sizeof v);
        for (const dsops_enum_value *e = p->spellings; e->spelling != NULL; e++)
            if (e->value == v) {
                snprintf(buf, len, "%s", e->spelling);
                return true;
            }
        snprintf(buf, len, "%d", v);
        return true;
    }
    }
    buf[0] = '\0';
    return false;
}
