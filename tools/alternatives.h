/* The alternatives `dsops bench` times beside sparse_flash_attention_v32 and lightning_indexer: the C composite
 * of harness/composite.c, and harness/alternatives.py (vectorised NumPy; PyTorch eager where installed), run on the
 * same inputs and thread count, each checked against the operator's output. */
#ifndef DSOPS_TOOLS_ALTERNATIVES_H
#define DSOPS_TOOLS_ALTERNATIVES_H

#include <stddef.h>

#include "dsops.h"

typedef enum alt_kind { ALT_COMPOSITE, ALT_NUMPY, ALT_TORCH, ALT_KIND_COUNT } alt_kind;

/* What one alternative gave at one thread count. */
typedef struct alt_result {
    int ran;             /* 0: it did not run (why says so) */
    int unavailable;     /* it did not run because this machine lacks its library (not a failure) */
    int agrees;          /* its output matches the operator's within the tolerance */
    double median_s;
    char version[48];    /* "numpy 2.1.3", "torch 1.13.1", "oneDNN sgemm" */
    char why[160];       /* the check's figures, or why it did not run */
} alt_result;

const char *alt_name(alt_kind k);

/* The interpreter that has the library of kind k (NumPy or PyTorch), found once per process: $DSOPS_PYTHON,
 * else `python3` on PATH, else /usr/bin/python3 (Debian's python3-torch serves that one). NULL: none. */
const char *alt_python(alt_kind k);

/* Writes the operator's inputs (the names `dsops run` uses; scalars in the metadata) to `path`; 0 on success. */
int alt_write_sfa_inputs(const dsops_sparse_flash_attention_v32_args *a, const char *path, char *why, size_t cap);
int alt_write_li_inputs(const dsops_lightning_indexer_args *a, const char *path, char *why, size_t cap);

/* Runs harness/alternatives.py with library kind k ("numpy" or "torch") on the inputs file for `op` at `threads`,
 * timing for about budget_s seconds, and reads its output file `out_path`. Fills r (ran, median_s, version,
 * why); the output stays in out_path for the check. */
void alt_run_python(alt_kind k, const char *op, const char *in_path, const char *out_path, int threads,
                    double budget_s, alt_result *r);

/* Checks: attention `out` [T, N, Dc] fp32 of the file against the operator's bf16 out (at most 0.5 % of the
 * elements outside 1e-4 + 0.005 |x|); indexer `topk_scores` [T, K] against the operator's selected scores
 * (each within 1e-5 + 1e-4 |x|: the same K largest values). Set r->agrees and r->why. */
void alt_check_sfa_file(const char *out_path, const dsops_tensor *out_bf16, alt_result *r);
void alt_check_li_file(const char *out_path, const float *scores, int64_t T, int64_t K, alt_result *r);
/* The same checks on arrays in memory. */
void alt_check_li_scores(const float *alt, const float *scores, int64_t T, int64_t K, alt_result *r);

#endif
