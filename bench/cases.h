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

/* One lightning_indexer case (V3.2 configuration: cmp_ratio 1). Sequences are uniform: S tokens each. */
typedef struct dsops_li_case {
    const char *name;        /* e.g. "v32_li_int8_b4_s2_kv64k" */
    int B, S;
    int seqused[128];        /* seqused_kv per sequence (B entries) */
    int NI, DI, K, BS;       /* indexer heads, head dim, top-k width, block size */
    int cmp_ratio;
    int int8;                /* 1: int8 variant, 0: bf16 variant */
    int with_scores;         /* topk_scores requested */
    int ci;
    const char *ci_variant;
} dsops_li_case;

typedef struct dsops_li_problem {
    dsops_li_case c;
    dsops_lightning_indexer_args args;
    int64_t T, NB, MB;
    int64_t scored;          /* sum over tokens of visible keys n_t */
    double ops;              /* 2 * NI * DI * scored (GOP for int8, GFLOP for bf16) */
    double key_bytes;        /* key bytes read: scored * (DI * elem + scale bytes) */
    void *buffers[16];
    int nbuffers;
} dsops_li_problem;

const dsops_li_case *dsops_li_cases(int *count);
const dsops_li_case *dsops_li_case_find(const char *name);
/* Data per CASES.md "lightning_indexer, V3.2 configuration" (int8: int8(N(0,1)) values with fp16
 * scales max(fp16(amax/127), 1e-3) and requantisation; weights fp16(N(0,1)); bf16: N(0,1) bf16). */
dsops_li_problem *dsops_li_problem_make(const dsops_li_case *c, uint64_t seed);
void dsops_li_problem_free(dsops_li_problem *p);

#endif
