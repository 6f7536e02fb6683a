/* The table runner of the argument-validation programs (see validation.h). */
#include "validation.h"

#include <stdio.h>
#include <stdlib.h>

#include "test_util.h"

void val_expect_rejected(const val_ops *ops, dsops_context *ctx, void *problem, const char *name, dsops_status want,
                         const char *frag)
{
    if (ops->arm)
        ops->arm(problem);
    void *before = ops->flat_bytes ? tu_memdup(problem, ops->flat_bytes) : NULL;
    tu_check_rejected(name, ops->call(ctx, problem), want, frag);
    /* checked even when the call wrongly succeeded: whatever it wrote is reported too */
    if (before)
        tu_check_unchanged(name, problem, before, ops->flat_bytes, "although the call failed");
    if (ops->untouched)
        ops->untouched(problem, name);
    free(before);
}

void val_run_bad(const val_ops *ops, dsops_context *ctx, const val_bad_case *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const val_bad_case *c = &rows[i];
        if (!tu_selected(c->name))
            continue;
        void *p = ops->make(c->variant);
        char frag[VAL_FRAG_MAX] = "";
        c->mutate(p, frag);
        val_expect_rejected(ops, ctx, p, c->name, c->want, frag);
        ops->free(p);
    }
}

void val_run_ok(const val_ops *ops, dsops_context *ctx, const val_ok_case *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const val_ok_case *c = &rows[i];
        if (!tu_selected(c->name))
            continue;
        void *p = ops->make(c->variant);
        if (c->mutate)
            c->mutate(p);
        void *expected = ops->oracle ? ops->oracle(p) : NULL;
        if (ops->arm)
            ops->arm(p);
        if (tu_check_accepted(c->name, ops->call(ctx, p)))
            ops->compare(p, expected, c);
        if (ops->free_expected)
            ops->free_expected(expected);
        ops->free(p);
    }
}

void val_rebase_views(const char *op, void *args, const void *from, size_t n, void *to)
{
    const dsops_op_desc *d = dsops_op_find(op);
    if (!d) {
        printf("val_rebase_views: no operator \"%s\"\n", op);
        exit(1);
    }
    for (size_t i = 0; i < d->n_tensors; i++) {
        dsops_tensor *t = (dsops_tensor *)((char *)args + d->tensors[i].offset);
        t->data = tu_rebase(t->data, from, n, to);
    }
}
