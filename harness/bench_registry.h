/* The benchmark registry: every named case of every operator (docs/CASES.md) behind one interface, so that the
 * tool's timing loops, suites and tables are generic. Per operator it holds how a case becomes a problem
 * (inputs, prepared weights), the call, the check against the oracle with the operator's tolerance (ref/), the
 * work and byte counts with the peak they are measured against, and the detail rows (the matmuls alone, the
 * stages of the fused layer). */
#ifndef DSOPS_HARNESS_BENCH_REGISTRY_H
#define DSOPS_HARNESS_BENCH_REGISTRY_H

#include <stddef.h>

#include "cases.h"
#include "dsops.h"

/* A generated problem of some operator, behind a small interface so one timing loop serves all. */
typedef struct bench_problem {
    void *p;
    dsops_status (*run)(dsops_context *ctx, void *p);
    int (*check)(void *p, char *why, size_t cap);  /* 0 = agrees with the oracle */
    void (*release)(void *p);
    double work;                                   /* FLOP (bf16) or OP (int8) per call; 0: not counted */
    double bytes;                                  /* bytes per call: cache rows read (attention), weights
                                                    * (prologs) or every tensor (hc_pre, hc_post) */
    dsops_peak_kind peak;
    const char *unit;                              /* NULL: the peak's ("bf16", "int8", "fp32") */
    int no_peak;                                   /* 1: %peak not applicable (memory-bound) */
    double vendor_us;                              /* the vendor's published time (0: none) */
    const char *vendor;                            /* its label ("PyPTO", "AscendC") */
    const char *judge;                             /* what check compares with: NULL the oracle (ref/), else
                                                    * a word for it ("stages": the fused layer against the
                                                    * library's four stages, bit for bit) */
    void *args;                                    /* the call record `run` passes, described by dsops_op_find
                                                    * of the family's operator: the test driver poisons its
                                                    * outputs, keeps its in-out tensors and compares runs */
} bench_problem;

/* An operator family: its cases, generator and bench adapter (harness/<family>.c; the members are in
 * bench_family.h). The tool compares a case's family with these to add what only one family has. */
typedef struct bench_family bench_family;
extern const bench_family bench_family_sparse_flash_attention_v32, bench_family_lightning_indexer,
    bench_family_mla_prolog_v32, bench_family_indexer_prolog_v32, bench_family_sparse_attention_v32,
    bench_family_hc_pre, bench_family_hc_post, bench_family_mla_prolog_v4, bench_family_indexer_prolog_v4,
    bench_family_compressor, bench_family_sas;

/* One named case: its name, whether CI runs it, its family and its entry in the family's case table (a
 * dsops_<fam>_case of cases.h, e.g. dsops_sfa_case for bench_family_sparse_flash_attention_v32). */
typedef struct bench_case_ref {
    const char *name;
    int ci;
    const bench_family *family;
    const void *entry;
} bench_case_ref;

/* Every case of every family into out[cap]; returns the count. */
int bench_all_cases(bench_case_ref *out, int cap);
/* The problem of case c (inputs generated, weights prepared); 0, or 1 with the reason in why (then bp->p, when
 * set, is released with bp->release). */
int bench_make_problem(const bench_case_ref *c, bench_problem *bp, char *why, size_t cap);
/* The name of the case's operator (its description: dsops_op_find). */
const char *bench_case_op(const bench_case_ref *c);
/* check and release that do nothing (timing-only rows). */
int bench_no_check(void *pv, char *why, size_t cap);
void bench_no_release(void *pv);
/* The vendor's published time of a case and its label (0 and NULL: none). */
void bench_case_vendor(const bench_case_ref *c, double *us, const char **label);
/* The operator (with its variant), shape and family words of a case, for tables. */
void bench_case_words(const bench_case_ref *c, char *op, size_t opcap, char *shape, size_t shapecap, char *family,
                      size_t familycap);
/* One --list line for a case on standard output. */
void bench_list_case(const bench_case_ref *c);
/* 1 if `what` names the operator of case c (or a sas preset). */
int bench_op_selects(const char *what, const bench_case_ref *c);
/* The same problem's matmuls alone (prologs, compressor): 0 and gemms set; 1 with why when the prepared object
 * does not have the expected maps; -1 when the case has no such row. In bench_matmuls.c, apart: it hands the
 * library's internal matmul runner to the family, so only programs linking the static library (the tool) use it. */
int bench_matmuls(const bench_case_ref *c, const bench_problem *bp, bench_problem *gemms, char *why, size_t cap);
/* A line about what one call of the case does (compressor: entries per call; sas: keys attended), or "". */
void bench_case_note(const bench_case_ref *c, const bench_problem *bp, char *note, size_t cap);
/* The four stages of a fused sparse_attention_v32 problem, each alone on the stage arguments (after running the
 * chain once, so the later stages read the earlier ones' outputs); 0, or 1 with why. */
int bench_dia_stages(const bench_problem *bp, dsops_context *ctx, bench_problem stages[4], const char *labels[4],
                     char *why, size_t cap);

#endif
