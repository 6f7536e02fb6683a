/* The table runner of the argument-validation programs (test_*_validation.c).
 *
 * A program describes its operator once (a val_ops: how to build a base problem, call the operator, check
 * that a rejected call wrote nothing, and compare a valid call with the oracle) and lists its cases in two
 * tables:
 *   - bad rows: a mutation of a valid base problem, the status the call must return and a message
 *     fragment (alternatives separated by '|', see tu_has_fragment); a rejected call must leave every byte
 *     it could reach unchanged;
 *   - ok rows: argument sets that look suspicious but are valid; the call must succeed with an empty
 *     dsops_last_error() and match the oracle.
 * Every row runs on the program's context (its tier), under its name as the tu_selected label. */
#ifndef DSOPS_TEST_VALIDATION_H
#define DSOPS_TEST_VALIDATION_H

#include <stddef.h>

#include "dsops.h"

/* bytes a mutation may write to its fragment */
#define VAL_FRAG_MAX 200
/* rows of a table */
#define VAL_COUNT(rows) (sizeof(rows) / sizeof((rows)[0]))

typedef struct val_bad_case {
    const char *name;                          /* tu_selected label and message prefix */
    int variant;                               /* which base problem (numbered by the program) */
    dsops_status want;                         /* the status the call must return */
    void (*mutate)(void *problem, char *frag); /* breaks the base problem; writes the expected fragment */
} val_bad_case;

typedef struct val_ok_case {
    const char *name;
    int variant;
    void (*mutate)(void *problem);             /* NULL: the base problem as built */
} val_ok_case;

typedef struct val_ops {
    void *(*make)(int variant);                /* the base problem of a row's variant */
    void (*free)(void *problem);
    dsops_status (*call)(dsops_context *ctx, void *problem);
    /* Problems that are one flat block (fixture structs): its size. The runner snapshots the block after
     * arm and checks that a rejected call changed none of its bytes. 0: the problem is not flat. */
    size_t flat_bytes;
    /* Optional, before every call: outputs to sentinels, snapshots of what the call may write. */
    void (*arm)(void *problem);
    /* Optional, after a rejected call: counts the checks that nothing the call could reach changed. */
    void (*untouched)(void *problem, const char *name);
    /* Ok rows: the oracle's result (optional), computed on the mutated problem before arm and the call (it may
     * live in the problem itself and return it); compare counts the checks of the library's result against
     * it; free_expected (optional) releases it. */
    void *(*oracle)(void *problem);
    void (*compare)(void *problem, void *expected, const val_ok_case *c);
    void (*free_expected)(void *expected);
} val_ops;

/* Arms the problem, calls the operator and checks the rejection: status `want`, the fragment in the message,
 * and nothing written (flat block and ops->untouched). For rows the caller builds itself. */
void val_expect_rejected(const val_ops *ops, dsops_context *ctx, void *problem, const char *name, dsops_status want,
                         const char *frag);

/* Every selected row: the base problem of its variant, its mutation, then val_expect_rejected. */
void val_run_bad(const val_ops *ops, dsops_context *ctx, const val_bad_case *rows, size_t n);

/* Every selected row: the base problem of its variant, its mutation, the oracle, the call (accepted:
 * DSOPS_OK and no error message), then ops->compare. */
void val_run_ok(const val_ops *ops, dsops_context *ctx, const val_ok_case *rows, size_t n);

/* Moves every tensor view of `args` (the args struct of the described operator `op`, see dsops_op_find)
 * that lies in the block [from, from + n) to the same offset in the block at `to`: the views of a copy of a
 * fixture, for the oracle. */
void val_rebase_views(const char *op, void *args, const void *from, size_t n, void *to);

#endif
