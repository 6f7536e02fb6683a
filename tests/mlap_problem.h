/* Builder of mla_prolog_v32 test problems (small, any shape, layout, dtype and view arrangement) and the
 * checks of a library result against the reference oracle:
 *   - outputs q_nope, q_rope, qr, qr_scale and the addressed cache rows with the tolerances of spec §4.1,
 *   - every other byte of every output / cache buffer (guard zones, padding, rows not addressed)
 *     bit-identical to its value before the call,
 *   - bitwise equality of two library runs (prepared vs unprepared, thread counts). */
#ifndef DSOPS_TEST_MLAP_PROBLEM_H
#define DSOPS_TEST_MLAP_PROBLEM_H

#include <stddef.h>
#include <stdint.h>

#include "dsops.h"
#include "fixture.h"
#include "problem_common.h"

typedef enum mp_index_mode {
    MP_IDX_ALL = PC_IDX_ALL,    /* every token writes a distinct random row */
    MP_IDX_SOME = PC_IDX_SOME,  /* about a third of the tokens get a negative index (-1, -7, INT64_MIN) */
    MP_IDX_NONE = PC_IDX_NONE   /* every index negative: no cache row is written */
} mp_index_mode;

typedef struct mp_spec {
    int T, H, Q, N, Dqn, Dc, BS, NB;  /* NB 0: enough blocks for 2T + 3 rows */
    int int8_wq_b;
    dsops_kv_layout layout;
    dsops_rope_mode rope_mode;
    int rope_inverse;
    dsops_dtype gamma_dtype;          /* bf16 or fp32 (0: bf16) */
    dsops_dtype table_dtype;          /* bf16 or fp32 (0: bf16) */
    int mixed_gamma;                  /* gamma_ckv in the other dtype than gamma_cq */
    float eps_cq, eps_ckv;
    mp_index_mode index_mode;
    int strided;                      /* 0 dense; 1 every tensor a padded view in its own buffer; 2 padded and
                                       * shared: q_nope / q_rope one [T, N, Dc+64] buffer, cos / sin one
                                       * buffer, split caches one row buffer (split_int8: packed_int8-like rows) */
    int share;                        /* with strided 2, which buffers are shared: 1 q_nope / q_rope, 2 cos / sin,
                                       * 4 split caches, 8 (with 1) padding between the tokens of the q buffer
                                       * (0: 1 | 2 | 4) */
    int nan_cache;                    /* cache rows start as NaN (int8: -1 with NaN scales) */
    int zero_tokens;                  /* the first tokens' x rows are all zero (all-zero Q8 groups) */
    int tiny_gamma;                   /* fp32 gammas of about 1e-38: fp32(127 / amax) overflows in Q8 */
    int int8_extreme;                 /* int8 wq_b only -128 / 127 */
    int big_guard;                    /* guard zones as large as the views (a test may widen a dtype) */
} mp_spec;

typedef struct mp_problem {
    mp_spec sp;
    int64_t T, NG, KV;
    dsops_mla_prolog_v32_args args;
    tf_fixture fx;                    /* checked regions (outputs, caches) and owned allocations */
    int64_t *cache_index;             /* [T] */
} mp_problem;

/* Dense reference results of one problem. */
typedef struct mp_ref {
    int64_t T, N, Q, Dc, nw;          /* nw: tokens that write a cache row */
    float *q_nope, *q_rope, *qr, *qr_scale;  /* [T*N*Dc], [T*N*64], [T*Q], [T] (values as fp32) */
    float *lat, *scale, *kr;          /* [nw*Dc], [nw*Dc/128] (int8 layouts), [nw*64] rows in token order */
} mp_ref;

mp_problem *mp_make(const mp_spec *sp, uint64_t seed);
void mp_free(mp_problem *p);

/* Runs the oracle on the problem's arguments (outputs into dense buffers, cache rows into a compact copy). */
mp_ref *mp_reference(const dsops_mla_prolog_v32_args *a);
void mp_ref_free(mp_ref *r);

/* Fills outputs with sentinels (guard zones too) and snapshots every region. Caches keep their contents. */
void mp_prepare_call(mp_problem *p);
/* Restores every region to its snapshot (outputs back to sentinels, caches to their earlier contents). */
void mp_restore(mp_problem *p);
/* 1 if every region still equals its snapshot (after a failed call). */
int mp_untouched(const mp_problem *p, const char *label);
/* Compares the library's results with the reference (tolerances of spec §4.1), then checks that nothing
 * outside the outputs' elements and the addressed cache rows changed. Counts checks; returns 1 on pass. */
int mp_check(mp_problem *p, const mp_ref *r, const char *label);

/* The raw bytes of every output element and every addressed cache-row element, in a fixed order (for
 * bitwise comparisons of two runs). Caller frees; *n receives the length. */
unsigned char *mp_gather(const dsops_mla_prolog_v32_args *a, size_t *n);

/* The problem as the shared runs of problem_common.h see it; with r NULL the runs skip the oracle. */
pc_target mp_target(mp_problem *p, const mp_ref *r);

#endif
