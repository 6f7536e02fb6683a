/* Named cases as files (case_file.h). */
#include "case_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call_record.h"
#include "safetensors.h"

int case_file_write_inputs(const bench_problem *bp, const char *op, const char *case_name, const char *path,
                           char *why, size_t cap)
{
    const dsops_op_desc *d = dsops_op_find(op);
    if (!d || !bp->args) {
        snprintf(why, cap, "no description of operator %s or no call record", op);
        return 1;
    }
    dsops_st_writer *w = dsops_st_writer_create();
    if (!w) {
        snprintf(why, cap, "out of memory");
        return 1;
    }
    char err[256] = "", value[64];
    int ok = 1;
    for (size_t i = 0; ok && i < d->n_tensors; i++) {
        const dsops_tensor_desc *td = &d->tensors[i];
        const dsops_tensor *t = record_tensor(bp->args, td);
        if (record_is_output(td->role) || !t->data)
            continue; /* outputs are the call's to write; absent optional inputs stay absent */
        ok = dsops_st_writer_add(w, td->name, t, err, sizeof err) == 0; /* strided views are written dense */
    }
    ok = ok && dsops_st_writer_set_metadata(w, "operator", op, err, sizeof err) == 0 &&
         dsops_st_writer_set_metadata(w, "case", case_name, err, sizeof err) == 0;
    for (size_t p = 0; ok && p < d->n_params; p++) {
        if (record_format_param(bp->args, &d->params[p], value, sizeof value)) /* else `dsops run` infers it */
            ok = dsops_st_writer_set_metadata(w, d->params[p].name, value, err, sizeof err) == 0;
    }
    ok = ok && dsops_st_writer_save(w, path, err, sizeof err) == 0;
    dsops_st_writer_destroy(w);
    if (!ok)
        snprintf(why, cap, "%s: %s", path, err);
    return !ok;
}

/* The file's tensor `name` into the record's view t (same dtype and shape); 0, or 1 with why. */
static int load_into_view(const dsops_st_file *f, const char *path, const char *name, dsops_tensor *t, char *why,
                          size_t cap)
{
    const dsops_tensor *ft = dsops_st_tensor(f, name);
    if (!ft) {
        snprintf(why, cap, "%s has no tensor '%s'", path, name);
        return 1;
    }
    int same = ft->dtype == t->dtype && ft->ndim == t->ndim;
    for (int i = 0; same && i < t->ndim; i++)
        same = ft->shape[i] == t->shape[i];
    if (!same) {
        snprintf(why, cap, "%s: tensor '%s' has another dtype or shape than the case's (%s, rank %d)", path, name,
                 dsops_st_dtype_tag(t->dtype), t->ndim);
        return 1;
    }
    /* the reader's tensors are dense, row-major */
    record_view_copy(t, (unsigned char *)ft->data, RECORD_SCATTER);
    return 0;
}

int case_file_check_outputs(const bench_problem *bp, const char *op, const char *path, char *why, size_t cap)
{
    const dsops_op_desc *d = dsops_op_find(op);
    if (!d || !bp->args) {
        snprintf(why, cap, "no description of operator %s or no call record", op);
        return 1;
    }
    dsops_st_file *f = NULL;
    char err[256] = "";
    if (dsops_st_open(path, &f, err, sizeof err) != 0) {
        snprintf(why, cap, "%s", err);
        return 1;
    }
    int rc = 0;
    for (size_t i = 0; !rc && i < d->n_tensors; i++) {
        const dsops_tensor_desc *td = &d->tensors[i];
        dsops_tensor *t = record_tensor(bp->args, td);
        if (t->data && (record_is_output(td->role) || record_is_inout(td->role)))
            rc = load_into_view(f, path, td->name, t, why, cap);
    }
    dsops_st_close(f);
    return rc ? rc : bp->check(bp->p, why, cap) != 0;
}
