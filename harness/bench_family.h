/* What the benchmark registry (bench_registry.c) knows of one operator family, and the helpers the family
 * files (harness/<family>.c) share for their bench adapters; not part of the registry's API. Adding an
 * operator: one harness/<family>.c that defines its cases, generator and `const bench_family
 * bench_family_<x>`, and one line in the family array of bench_registry.c (docs/ADDING.md).
 *
 * The family files' adapters look alike (a release that frees the family's problem, a matmul-only run over the
 * family's prepared maps, a check that counts elements outside tolerances, the list line, this initialiser):
 * they fill the same fields, each with the operator's own tensors, maps, tolerances and words. That likeness is
 * the registry's format; a generic version would need the per-operator field lists behind switches or offsets,
 * so each family keeps its own. */
#ifndef DSOPS_HARNESS_BENCH_FAMILY_H
#define DSOPS_HARNESS_BENCH_FAMILY_H

#include <stddef.h>

#include "bench_registry.h"
#include "linear.h"

/* The library's matmul runner (dsops_linear_run of src/core/linear.h). The registry hands it to a family's
 * matmul-only row at run time: the family files reach no internal symbol of the library themselves, so the
 * tests, which link the shared library, can use them. */
typedef dsops_status (*bench_linear_run_fn)(dsops_context *ctx, const dsops_linear_job *jobs, int njobs, int64_t M,
                                            int threads, dsops_isa isa);

struct bench_family {
    const char *op;          /* the operator's name: `dsops bench <op>` selects the family's full-size cases */
    const char *table_word;  /* the family column of the tool's tables */
    /* the named case table: entries of case_size bytes that start with their name; ci_offset: where an
     * entry's `ci` flag (int) is */
    const void *(*cases)(int *count);
    size_t case_size, ci_offset;
    /* the problem of case c (bench_make_problem; bp starts zeroed): 0, or 1 with why */
    int (*make_problem)(const void *c, bench_problem *bp, char *why, size_t cap);
    /* the operator (with its variant) and shape words of case c, for the final table */
    void (*words)(const void *c, char *op, size_t opcap, char *shape, size_t shapecap);
    /* prints the --list line of case c, ending with `not_ci` ("" or "  (not in CI)") and a newline */
    void (*list_line)(const void *c, const char *not_ci);
    /* optional: 1 if `what` (not the operator's name) selects case c, e.g. a preset */
    int (*selects)(const char *what, const void *c);
    /* optional: the vendor's published time of case c and its label */
    void (*vendor)(const void *c, double *us, const char **label);
    /* optional: the problem's matmuls alone on its prepared maps (bench_matmuls), through the runner that
     * bench_matmuls stores first in problem p (a row's run gets p alone): a family with this row starts its
     * problem with a bench_linear_run_fn. matmuls_check, optional: 0, or 1 with why when the prepared object
     * lacks the expected maps (families whose make_problem does not check them). */
    dsops_status (*matmuls_run)(dsops_context *ctx, void *p);
    int (*matmuls_check)(const void *p, char *why, size_t cap);
    /* optional: a line about what one call of the problem does, or "" */
    void (*note)(const bench_problem *bp, char *note, size_t cap);
};

/* ---- shared by the bench adapters (bench_common.c) ------------------------------------------------- */

/* "out of memory" into why; returns 1 (the value a failing check or make_problem returns). */
int bench_out_of_memory(char *why, size_t cap);
/* "cannot generate the case (out of memory?)" into why; returns 1. */
int bench_cannot_generate(char *why, size_t cap);
/* 0 when status s is DSOPS_OK; else says "<what>: <status> (<last error>)" in why and returns 1. */
int bench_prepared_or_say(dsops_status s, const char *what, char *why, size_t cap);
/* 0 when prep has `count` maps; else says how many it has in why and returns 1. */
int bench_prepared_has_maps(const dsops_prepared *prep, int count, char *why, size_t cap);

/* Counts the elements of got outside atol + rtol |ref| (non-finite values must coincide, spec §1.8) and
 * adds them to *bad; *n_total += n; *max_err the largest finite |got - ref|. */
void bench_count_outside(const void *got, const void *ref, dsops_dtype dt, size_t n, double atol, double rtol,
                         size_t *bad, size_t *n_total, double *max_err);
/* 1 when more than 0.5 % of n elements (rounded) are bad: the share the spec's tolerances allow. */
int bench_too_many(size_t bad, size_t n);
/* The token windows a --check of a V4 case compares (the oracles are slow single-threaded loops): all
 * tokens up to 384, else the first, middle and last 128. Returns the number of windows. */
int bench_check_windows(int64_t T, int64_t start[3], int64_t len[3]);
/* A copy of the n bytes at src (the library's output, before the oracle rewrites it), or NULL with "out of
 * memory" in why. */
void *bench_keep_output(const void *src, size_t n, char *why, size_t cap);

#endif
