/* Small test support shared by the test programs: pass/fail counters, tier selection, a seeded generator
 * and per-label seeds, bf16 helpers, compare_close of docs/OPERATORS.md §1.8 and checked allocations.
 *
 * Every test program calls tu_init() first and ends with `return tu_finish();`, which prints the line
 * "N passed, N failed" and returns non-zero when anything failed. On the first failure the seed and a
 * command that replays the run are printed. Environment:
 *   DSOPS_TEST_SEED=<n>   replaces the default seed of the program's random data
 *   DSOPS_TEST_QUICK=1    runs only the smaller problems (used by sanitizer builds)
 *   DSOPS_TEST_VERBOSE=1  prints every comparison, not only failures
 *   DSOPS_TEST_LIST=1     prints the label of every filterable problem instead of running it */
#ifndef DSOPS_TEST_UTIL_H
#define DSOPS_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "dsops.h"

/* ---- run control ------------------------------------------------------------------------------ */

/* Records the program name and the default seed (overridden by DSOPS_TEST_SEED); an optional first
 * argument is a filter: only problems whose label contains it, or one of its '|'-separated fragments, run
 * (a fragment written !fragment excludes the labels that contain it)
 * (see tu_selected). Prints the tiers that the CPU has (the tests run them) and those it lacks. */
void tu_init(int argc, char **argv, uint64_t default_seed);
uint64_t tu_seed(void);
int tu_quick(void);
int tu_verbose(void);
/* 1 if a problem with this label should run under the current filter. */
int tu_selected(const char *label);

/* Counts one check; prints "FAIL: <message>" (and, the first time, the replay line) when !ok.
 * Returns ok. */
int tu_check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "N passed, N failed" and returns the process exit status. */
int tu_finish(void);
/* A context for the whole program; prints the reason and exits with status 1 when none can be made. */
dsops_context *tu_context(void);
/* Puts ctx on tier isa: 0 when the context refuses it (a tier the CPU lacks), else one check that the
 * context reports the tier. */
int tu_set_tier(dsops_context *ctx, dsops_isa isa);
/* The seed of a labelled problem: FNV-1a of the label mixed with the run seed, so that a filter that runs
 * one problem alone gives it the same data as the full run. */
uint64_t tu_label_seed(const char *label);
/* tu_context, then the line "tiers: scalar ... <best tier>, threads <n>" (the operator test programs). */
dsops_context *tu_announced_context(void);
/* Steps ctx through the tiers the CPU has, from scalar up (*isa starts at -1): returns 1 with ctx on the next
 * tier (one tu_set_tier check) and tier_label "<label> [<tier>]", 0 after the best tier. Usage:
 *   for (int isa = -1; tu_next_tier(ctx, &isa, label, l, sizeof l);) ... */
int tu_next_tier(dsops_context *ctx, int *isa, const char *label, char *tier_label, size_t n);
/* Monotonic seconds (for the timings printed under DSOPS_TEST_VERBOSE). */
double tu_now(void);

/* ---- generator -------------------------------------------------------------------------------- */

typedef struct tu_rng {
    uint64_t s;
} tu_rng;

void tu_rng_seed(tu_rng *r, uint64_t seed);
uint64_t tu_rng_u64(tu_rng *r);
/* uniform in [lo, hi) */
float tu_rng_uniform(tu_rng *r, float lo, float hi);
/* uniform integer in [lo, hi] */
int64_t tu_rng_int(tu_rng *r, int64_t lo, int64_t hi);

/* ---- number formats --------------------------------------------------------------------------- */

uint16_t tu_bf16(float f);        /* round to nearest even, NaN stays quiet NaN */
float tu_f32(uint16_t h);         /* exact widening */
float tu_round_bf16(float f);     /* tu_f32(tu_bf16(f)) */
/* n bf16 values widened to a new fp32 array (free with free()). */
float *tu_widen_bf16(const uint16_t *h, size_t n);

#define TU_BF16_NAN ((uint16_t)0x7fc0)

/* ---- compare_close (spec §1.8) ---------------------------------------------------------------- */

typedef struct tu_tol {
    double atol, rtol, ratio;
} tu_tol;

typedef struct tu_cmp {
    size_t numel, fails, allowed;
    double cos_diff;       /* 1 - 2 sum(xy) / sum(x^2 + y^2) over elements finite in both */
    size_t worst;          /* element with the largest error beyond its bound (or the largest error) */
    double worst_out, worst_ref, worst_err;
} tu_cmp;

/* Compares out against ref (both n values in fp32): non-finite values must coincide, an element fails
 * when |out - ref| > atol + rtol |ref| (fp64), and the comparison passes when at most
 * floor(ratio n + 0.5) elements fail. Counts one check under `label` and reports the worst element and
 * the cosine difference on failure. Returns 1 on pass. */
int tu_compare_close(const char *label, const float *out, const float *ref, size_t n, tu_tol tol, tu_cmp *res);

/* tu_compare_close under the label "<label> <part>" (one output of an operator). */
int tu_compare_close_part(const char *label, const char *part, const float *out, const float *ref, size_t n,
                          tu_tol tol);

/* ---- validation tables ------------------------------------------------------------------------ */

/* Each row of a validation table changes a valid argument set, calls the operator and expects a status and
 * a message fragment naming the field; a rejected call must leave every byte it could reach unchanged,
 * which the programs check against a snapshot taken before the call. */

/* 1 if msg contains frag or one of its '|'-separated alternatives (an empty frag asks for nothing). */
int tu_has_fragment(const char *msg, const char *frag);

/* The outcome of a call expected to be rejected: counts a check that st is `want` and one that, unless the
 * call succeeded, dsops_last_error() has the fragment; prints the outcome under DSOPS_TEST_VERBOSE.
 * Returns 1 when the call failed (st != DSOPS_OK). */
int tu_check_rejected(const char *name, dsops_status st, dsops_status want, const char *frag);

/* The outcome of a call expected to succeed: counts a check that st is DSOPS_OK and, when it is, one that
 * dsops_last_error() is empty. Returns 1 when st is DSOPS_OK. */
int tu_check_accepted(const char *name, dsops_status st);

/* n zero bytes, 64-byte aligned (free with free()); exits when out of memory. */
void *tu_alloc(size_t n);

/* calloc that never returns NULL (also for 0 elements) and exits when out of memory. Unlike tu_alloc it
 * allocates exactly n * size bytes, so that the sanitizers see an access past the end. */
void *tu_calloc(size_t n, size_t size);

/* A snapshot: a tu_alloc'd copy of the n bytes at p. */
void *tu_memdup(const void *p, size_t n);

/* Counts a check that the n bytes at p equal the snapshot `before`; the failure message reads "<name>:
 * memory written <why>" with the first byte that changed. Returns 1 when nothing changed. */
int tu_check_unchanged(const char *name, const void *p, const void *before, size_t n, const char *why);

/* The first of n elements of esz bytes at which a and b differ, -1 when they are equal. */
int64_t tu_first_difference(const void *a, const void *b, size_t n, size_t esz);

/* Counts a check that the na bytes at a equal the nb bytes at b; the failure reads "<label>: differs from
 * <what> (...)" with the first differing byte. Returns 1 when they are equal. */
int tu_check_same_bytes(const char *label, const void *a, size_t na, const void *b, size_t nb, const char *what);

/* p moved from the block [from, from + n) to the same offset in the block at `to`, for views into a copy
 * of a fixture; a p outside the block (NULL included) is returned as it is. */
void *tu_rebase(const void *p, const void *from, size_t n, void *to);

#endif
