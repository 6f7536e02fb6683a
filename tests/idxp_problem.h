/* Builder of indexer_prolog_v32 test problems (small, any shape, variant, dtype and view arrangement) and
 * the checks of a library result against the reference oracle:
 *   - outputs q_idx, q_idx_scale, weights and the addressed key-cache rows (and their scales) with the
 *     tolerances of spec §4.2,
 *   - every other byte of every output / cache buffer (guard zones, padding, rows not addressed)
 *     bit-identical to its value before the call,
 *   - bitwise equality of two library runs (prepared vs unprepared, thread counts). */
#ifndef DSOPS_TEST_IDXP_PROBLEM_H
#define DSOPS_TEST_IDXP_PROBLEM_H

#include <stddef.h>
#include <stdint.h>

#include "dsops.h"
#include "fixture.h"
#include "problem_common.h"

typedef enum ip_index_mode {
    IP_IDX_ALL = PC_IDX_ALL,    /* every token writes a distinct random row */
    IP_IDX_SOME = PC_IDX_SOME,  /* about a third of the tokens get a negative index (-1, -7, INT64_MIN) */
    IP_IDX_NONE = PC_IDX_NONE   /* every index negative: no cache row is written */
} ip_index_mode;

typedef struct ip_spec {
    int T, H, Q, NI, DI, BS, NB;      /* NB 0: enough blocks for 2T + 3 rows */
    int int8;                         /* 1: int8 variant, 0: bf16 variant */
    int no_hadamard_q, no_hadamard_k; /* bf16 variant: leave that matrix absent (int8: ignored) */
    int sylvester;                    /* matrices are the normalised Sylvester matrix (DI a power of two);
                                       * otherwise U(-1,1) values as the vendor tests */
    dsops_dtype had_dtype;            /* bf16 or fp32 (0: bf16) */
    dsops_dtype ln_dtype;             /* ln_gamma_k / ln_beta_k: bf16 or fp32 (0: bf16) */
    int mixed_ln;                     /* ln_beta_k in the other dtype than ln_gamma_k */
    dsops_dtype table_dtype;          /* bf16 or fp32 (0: bf16) */
    dsops_rope_mode rope_mode;
    int rope_inverse;
    float ln_eps;
    float weights_scale;
    ip_index_mode index_mode;
    int strided;                      /* 0 dense; 1 every tensor a padded view in its own buffer; 2 padded and
                                       * shared (see `share`) */
    int share;                        /* with strided 2: 1 q_idx with q_idx_scale (int8) or weights (bf16) in
                                       * one row buffer, 2 cos / sin one buffer, 4 (int8) key cache rows with
                                       * their fp16 scale in one row buffer (0: 1 | 2 | 4) */
    int nan_cache;                    /* cache rows start as NaN (int8: -1 with NaN scales) */
    int zero_qr;                      /* the first tokens' qr rows are all zero (all-zero query Q8 groups) */
    int zero_x;                       /* the first tokens' x rows are all zero (key = beta; weights 0) */
    int zero_beta;                    /* ln_beta_k = 0 (with zero_x: all-zero key Q8 groups) */
    int int8_extreme;                 /* int8 qr and idx_wq_b only -128 / 127 */
    int tiny_key;                     /* fp32 ln_gamma_k of about 1e-38, beta 0: fp32(127 / amax) overflows */
    int big_guard;                    /* guard zones as large as the views (a test may widen a dtype) */
} ip_spec;

typedef struct ip_problem {
    ip_spec sp;
    int64_t T;
    dsops_indexer_prolog_v32_args args;
    tf_fixture fx;                    /* checked regions (outputs, caches) and owned allocations */
    int64_t *cache_index;             /* [T] */
} ip_problem;

/* Dense reference results of one problem (values as fp32). */
typedef struct ip_ref {
    int64_t T, NI, DI, nw;            /* nw: tokens that write a cache row */
    int int8;
    float *q_idx, *q_idx_scale, *weights;  /* [T*NI*DI], [T*NI] (int8), [T*NI] */
    float *key, *key_scale;           /* [nw*DI], [nw] (int8): rows in token order */
} ip_ref;

/* The life cycle of mlap_problem.h for this operator's types (the programs name the calls per operator). */
ip_problem *ip_make(const ip_spec *sp, uint64_t seed);
void ip_free(ip_problem *p);

/* Runs the oracle on the problem's arguments (outputs into dense buffers, cache rows into a compact copy). */
ip_ref *ip_reference(const dsops_indexer_prolog_v32_args *a);
void ip_ref_free(ip_ref *r);

/* Fills outputs with sentinels (guard zones too) and snapshots every region. Caches keep their contents. */
void ip_prepare_call(ip_problem *p);
/* Restores every region to its snapshot. */
void ip_restore(ip_problem *p);
/* 1 if every region still equals its snapshot (after a failed call). */
int ip_untouched(const ip_problem *p, const char *label);
/* Compares the library's results with the reference (tolerances of spec §4.2), then checks that nothing
 * outside the outputs' elements and the addressed cache rows changed. Counts checks; returns 1 on pass. */
int ip_check(ip_problem *p, const ip_ref *r, const char *label);

/* The raw bytes of every output element and every addressed cache-row element, in a fixed order (for
 * bitwise comparisons of two runs). Caller frees; *n receives the length. */
unsigned char *ip_gather(const dsops_indexer_prolog_v32_args *a, size_t *n);

/* The problem as the shared runs of problem_common.h see it; with r NULL the runs skip the oracle. */
pc_target ip_target(ip_problem *p, const ip_ref *r);

#endif
