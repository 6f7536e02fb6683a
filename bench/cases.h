/* Named cases of spec/CASES.md: shapes, data generators and work counters, shared by the tests and the
 * benchmark tool. */
#ifndef DSOPS_BENCH_CASES_H
#define DSOPS_BENCH_CASES_H

#include <stdint.h>

#include "dsops.h"

/* One sparse_flash_attention_v32 case. Sequences are uniform: S query tokens each, cu_seqlens_q[b] = b*S. */
typedef struct dsops_sfa_case {
    const char *name;        /* e.g. "v32_sfa_b4_s2_int8_kv64k" */
    int B, S;                /* sequences, query tokens per sequence */
    int seqused[128];        /* seqused_kv per sequence (B entries) */
    int N, Dc, Dr, K, BS;    /* heads, latent, rope, top-k width, block size */
    dsops_kv_layout layout;
    int with_lse;            /* lse requested */
    int ci;                  /* 1 if the case fits the CI budget of CASES.md */
    const char *ci_variant;  /* for ci == 0: the name of its scaled-down "_ci" case */
} dsops_sfa_case;

/* A generated problem: args point into buffers owned by the problem. */
typedef struct dsops_sfa_problem {
    dsops_sfa_case c;
    dsops_sparse_flash_attention_v32_args args;  /* vendor parameters: softmax_scale = 576^-0.5 */
    int64_t T;               /* query tokens */
    int64_t NB, MB;          /* physical blocks, block-table columns */
    int64_t attended;        /* sum over tokens of used indices (the key-list lengths) */
    double flops;            /* FlashMLA convention: 2 * N * attended * (Dqk + Dv) */
    double gathered_bytes;   /* cache bytes of the used rows: attended * row bytes of the layout */
    void *buffers[16];       /* owned allocations (freed by dsops_sfa_problem_free) */
    int nbuffers;
} dsops_sfa_problem;

/* All named cases (full and _ci variants), in the order of CASES.md. */
const dsops_sfa_case *dsops_sfa_cases(int *count);
/* The case named `name`, or NULL. */
const dsops_sfa_case *dsops_sfa_case_find(const char *name);
/* Allocates and fills a problem with the case's data distributions (CASES.md "Data (seed 42)") from a
 * seeded generator; `seed` replaces the case seed. Returns NULL if memory runs out. */
dsops_sfa_problem *dsops_sfa_problem_make(const dsops_sfa_case *c, uint64_t seed);
void dsops_sfa_problem_free(dsops_sfa_problem *p);

#endif
