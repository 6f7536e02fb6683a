/* Pieces shared by the operator test programs that run one problem on every tier and thread count
 * (test_v4_prologs, test_sas, test_compressor, test_hc, test_primitives): the context's thread count, dense
 * outputs of any dtype widened and compared, and the bitwise check over 1, 2 and 3 threads. */
#ifndef DSOPS_TEST_RUN_COMMON_H
#define DSOPS_TEST_RUN_COMMON_H

#include <stddef.h>

#include "dsops.h"
#include "test_util.h"

/* Puts ctx on n threads; prints the reason and exits when the context refuses. */
void rc_set_threads(dsops_context *ctx, int n);

/* n dense values of dtype dt (fp32, bf16, fp16 or int8) widened to a new fp32 array (free with free()). */
float *rc_widen(const void *p, dsops_dtype dt, size_t n);

/* tu_compare_close of n dense values of dtype dt, out against ref. Returns 1 on pass. */
int rc_compare_dense(const char *label, const void *out, const void *ref, dsops_dtype dt, size_t n, tu_tol tol);

/* One call of a problem and the bytes it wrote (tu_calloc'd, *n bytes; NULL when the call failed, with its
 * status in *st). */
typedef unsigned char *(*rc_run_fn)(void *problem, size_t *n, dsops_status *st);

/* Determinism on ctx's current tier: the problem run with 1, 2 and 3 threads gives bitwise the same bytes.
 * Counts a status check per run and a comparison with the 1-thread bytes per later run, under
 * "<label> <n> threads"; leaves ctx on 2 threads (the programs' setting). */
void rc_check_threads(dsops_context *ctx, const char *label, rc_run_fn run, void *problem);

#endif
