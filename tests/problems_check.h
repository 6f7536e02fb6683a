/* The checks of a library call on the adversarial V3.2 problems (harness/problems.h), shared by the test programs
 * of each operator and its validation program:
 *   - the outputs (and addressed cache rows) against the oracle with the tolerances of the spec: compare_close of
 *     §1.8, the lonely and poisoned rows of sparse_flash_attention_v32, compare_topk of lightning_indexer;
 *   - every byte outside what the call may write (guard zones, padding, cache rows not addressed) unchanged;
 *   - for the prologs, the shared runs: with and without a prepared object, and 1 / 2 / 3 threads, bitwise equal.
 * Each counts its checks (test_util.h). */
#ifndef DSOPS_TEST_PROBLEMS_CHECK_H
#define DSOPS_TEST_PROBLEMS_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "dsops.h"
#include "problems.h"

/* ---- sparse_flash_attention_v32 ------------------------------------------------------------------ */

/* Compares the library's outputs in p->args with the reference, checks exact lonely rows and that every
 * element of the out / lse buffers outside the views still holds the sentinel. Counts checks. */
int tp_check(tp_problem *p, const char *label);

/* Compares the outputs held in a->out / a->lse with dense reference outputs (out [T, N, Dc] bf16 bits,
 * lse [T, N]): compare_close with the tolerances of spec §4.4 (tiled mode: atol 5e-4), lonely rows
 * (ref lse = +Inf) exactly +0 / +Inf, poisoned rows (ref lse NaN) NaN in every element and in lse, and no
 * NaN in a row whose reference has none. Counts checks. */
int tp_compare(const char *label, const dsops_sparse_flash_attention_v32_args *a, const uint16_t *ref_out,
               const float *ref_lse);

/* ---- lightning_indexer --------------------------------------------------------------------------- */

/* Compares the library's outputs with the reference (lp_compare with max_miss 0, strict when the
 * problem's scores are exact) and checks that no element outside the output views was written. */
int lp_check(lp_problem *p, const char *label);

/* compare_topk (spec §1.8) of the outputs held in a->topk_indices / a->topk_scores against dense
 * reference rows, per token:
 *   - the number of leading valid entries (!= -1) is equal and everything after them is -1 (scores
 *     -Inf); valid library indices are distinct and below the token's visible key count n;
 *   - an index of the library row absent from the reference row is a miss unless its reference score
 *     is a near-tie of the reference K-th score (|diff| <= 1e-4 max|I| over the finite scores of the
 *     row; NaN and NaN, or equal infinities, tie); more than max_miss misses fail the row;
 *   - consecutive library entries follow the §2.9 order of the reference scores, up to near-ties, and
 *     of the library's own scores exactly (when given);
 *   - topk_scores: compare_close 1e-4 / 1e-4 / 0.005 over the entries whose index both rows hold.
 * strict: rows must equal the reference exactly (indices, and scores by value with NaN == NaN).
 * Counts checks; returns 1 on pass. */
int lp_compare(const char *label, const dsops_lightning_indexer_args *a, const int32_t *ref_idx,
               const float *ref_scores, int max_miss, int strict);

/* ---- the prologs: one problem in a tf_fixture, as the shared runs see it ------------------------- */

/* The operator's call and prepare on the problem's arguments, the bytes a call writes, and the comparison of a
 * call's results with the oracle. */
typedef struct pc_target {
    tf_fixture *fx;
    const void *args;
    const dsops_prepared **prepared;                         /* the `prepared` member of *args */
    dsops_status (*call)(dsops_context *ctx, const void *args);
    dsops_status (*prepare)(dsops_context *ctx, const void *args, dsops_prepared **prep);
    unsigned char *(*gather)(const void *args, size_t *n);
    int (*check)(void *problem, const void *ref, const char *label);
    void *problem;
    const void *ref;                                         /* NULL: no oracle comparison */
} pc_target;

/* The call without and then with a prepared object on the context's tier: both against the oracle, and
 * bitwise equal to each other. */
void pc_run_both(const pc_target *t, dsops_context *c, const char *label);
/* pc_run_both on every tier of the context (tu_next_tier), under the labels "<label> [<tier>]". */
void pc_run_tiers(const pc_target *t, dsops_context *c, const char *label);
/* Determinism: on a context of its own, on the scalar and the best tier, 1, 2 and 3 threads give bitwise the
 * same bytes; labels "<label> [<tier>] threads <n>". */
void pc_run_threads(const pc_target *t, const char *label);
/* A prepared object made from another problem (`from`: other dtypes or shapes) used for t's call: the prepare
 * succeeds, the call returns DSOPS_ERR_PARAM and writes nothing. Two checks; t's `prepared` is reset after. */
void pc_expect_foreign_prepared(const pc_target *t, const pc_target *from, dsops_context *c, const char *label);
/* The call on t's arguments with the prepared object `prep` made from other buffers of the same weights: accepted
 * and, with t's oracle, within its tolerances. t's `prepared` is reset after. */
void pc_run_prepared_reuse(const pc_target *t, dsops_context *c, dsops_prepared *prep, const char *label);
/* The call on `args` (t's arguments with a mutation, e.g. a prepared object with another weight swapped in)
 * returns `want` with `frag` in the message and writes nothing; with may_accept, DSOPS_OK also passes (one
 * check). The fixture is restored after. */
void pc_expect_rejected(const pc_target *t, dsops_context *c, const void *args, dsops_status want, const char *frag,
                        int may_accept, const char *label);
/* prepare on `args` (t's operator's arguments with a packed weight broken) returns `want`; an object it makes
 * anyway is destroyed. One check. */
void pc_expect_prepare_status(const pc_target *t, dsops_context *c, const void *args, dsops_status want,
                              const char *label);

/* ---- mla_prolog_v32 ------------------------------------------------------------------------------ */

/* 1 if every region still equals its snapshot (after a failed call). */
int mp_untouched(const mp_problem *p, const char *label);
/* Compares the library's results with the reference (tolerances of spec §4.1), then checks that nothing
 * outside the outputs' elements and the addressed cache rows changed. Counts checks; returns 1 on pass. */
int mp_check(mp_problem *p, const mp_ref *r, const char *label);
/* The problem for the shared runs; with r NULL the runs skip the oracle. */
pc_target mp_target(mp_problem *p, const mp_ref *r);

/* ---- indexer_prolog_v32 -------------------------------------------------------------------------- */

/* 1 if every region still equals its snapshot (after a failed call). */
int ip_untouched(const ip_problem *p, const char *label);
/* Compares the library's results with the reference (tolerances of spec §4.2), then checks that nothing
 * outside the outputs' elements and the addressed cache rows changed. Counts checks; returns 1 on pass. */
int ip_check(ip_problem *p, const ip_ref *r, const char *label);
/* The problem for the shared runs; with r NULL the runs skip the oracle. */
pc_target ip_target(ip_problem *p, const ip_ref *r);

#endif
