/* Helpers shared by the case families' generators (harness/cases*.c); not part of the cases API. */
#ifndef DSOPS_BENCH_CASES_INTERNAL_H
#define DSOPS_BENCH_CASES_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* splitmix64: fast, seedable, good enough for test data */
typedef struct rng {
    uint64_t s;
} rng;

uint64_t cases_rng_next(rng *r);
uint64_t cases_rng_below(rng *r, uint64_t n);
/* v[0 .. n-1] = U(-1, 1) fp32 values (two 24-bit draws per 64-bit output). */
void cases_rng_uniform_pm1(rng *r, float *v, size_t n);
/* v[0 .. n-1] = N(0, 1) values (Box-Muller). */
void cases_rng_normal(rng *r, float *v, size_t n);
/* One U[0, 1) value. */
float cases_rng_unit(rng *r);

/* fp32 -> bf16 / fp16 bits (round to nearest even) and fp16 bits -> fp32. */
uint16_t cases_bf16_bits(float f);
/* bf16 bits -> fp32 (exact). */
float cases_bf16_value(uint16_t h);
uint16_t cases_fp16_bits(float f);
float cases_fp16_value(uint16_t h);

/* A zeroed allocation recorded in an owner's buffer list (freed with cases_free_owned); NULL when
 * memory or the list runs out. */
void *cases_alloc_owned(void **buffers, int *nbuffers, int capacity, size_t bytes);
void cases_free_owned(void **buffers, int nbuffers);
#define ALLOC_OWNED(owner, bytes)                                                                                 \
    cases_alloc_owned((owner)->buffers, &(owner)->nbuffers,                                                       \
                      (int)(sizeof (owner)->buffers / sizeof (owner)->buffers[0]), (bytes))

/* A generator for one row of generated data, seeded from (seed, stream, row): data do not depend on the
 * thread count, and rows can be filled in parallel. */
rng cases_row_rng(uint64_t seed, uint64_t stream, int64_t row);
/* rows x cols (cols <= 16384) bf16 values amp * U(-1,1), one generator per row. */
void cases_fill_bf16(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, float amp, uint16_t *dst);
/* The same bf16 rows, each quantised by Q8 (spec §2.7): q into dst, the fp32 scale into scale[row]. */
void cases_fill_q8_bf16(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, float amp, int8_t *dst,
                        float *scale);

/* The case named `name` in a table whose entries start with their name (const char *), or NULL. */
const void *cases_find_case(const void *table, int count, size_t stride, const char *name);

/* The public functions every case family has, written out in the file that owns the family, each a line
 * calling these: dsops_<fam>_cases (the table and its length: CASES_TABLE), dsops_<fam>_case_find (by name:
 * CASES_FIND) and dsops_<fam>_problem_free (the owned buffers, then the problem: cases_problem_release). */
/* Stores n in *count (when count is not NULL) and returns table. */
const void *cases_table(const void *table, int n, int *count);
/* Frees the n owned buffers, then p (a problem allocated with malloc/calloc). */
void cases_problem_release(void *buffers[], int n, void *p);
/* The number of entries in a case table: an array in scope, not a pointer. */
#define CASES_COUNT(table) ((int)(sizeof(table) / sizeof(table)[0]))
#define CASES_TABLE(table, count) cases_table((table), CASES_COUNT(table), (count))
#define CASES_FIND(table, name) cases_find_case((table), CASES_COUNT(table), sizeof(table)[0], (name))

#endif
