/* Pieces shared by the V3.2 test problem builders and their test programs:
 *   - raw element stores into strided views, and views with given outer strides;
 *   - sequences (cu_seqlens_q, seqused_kv) and the block table of a paged cache with garbage in the entries
 *     no sequence needs (sfa_problem.c, li_problem.c);
 *   - sentinel-filled buffers around output views and the check that nothing outside a view was written;
 *   - for problems in a tf_fixture (mlap_problem.c, idxp_problem.c): rope tables, cache indices, the compact
 *     cache index of the oracle, the elements a call may write, and the runs of their test programs (with and
 *     without a prepared object, 1 / 2 / 3 threads). */
#ifndef DSOPS_TEST_PROBLEM_COMMON_H
#define DSOPS_TEST_PROBLEM_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "dsops.h"
#include "fixture.h"
#include "test_util.h"

#define PC_GUARD 64 /* sentinel elements before and after each output view */

/* ---- names in test labels ---------------------------------------------------------------------------- */

const char *pc_layout_name(dsops_kv_layout l);  /* split_bf16, split_int8, packed_int8 */
const char *pc_rope_name(dsops_rope_mode m);    /* interleaved, half, in_half_out */

/* ---- views ------------------------------------------------------------------------------------------- */

/* Raw bits of element (i0, i1, i2) of a view of up to three dimensions (unused indices ignored). */
void pc_put_u16(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, uint16_t v);
void pc_put_i8(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, int8_t v);
void pc_put_f32(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v);

/* A view of `data` with the given shape and outer strides (stride[0 .. ndim-2]; innermost stride 1). */
dsops_tensor pc_view(void *data, dsops_dtype dt, int ndim, const int64_t *shape, const int64_t *outer_stride);

/* ---- sequences and paged caches ---------------------------------------------------------------------- */

/* cu_seqlens_q [B+1] from the query tokens S[b] and seqused_kv [B] (both tu_calloc'd); returns T. */
int64_t pc_sequences(int B, const int *S, const int *seqused, int32_t **cu, int32_t **used);

typedef struct pc_paging {
    int64_t NB, MB;      /* physical blocks, block-table columns */
    int32_t *table;      /* [B, MB] */
    int32_t *owner;      /* [NB] the sequence whose table holds each physical block, -1 for none */
} pc_paging;

/* The block table of a paged cache: sequence b holds keys[b] keys in its first ceil(keys[b] / BS) entries,
 * taken in order from a random permutation of the NB physical blocks (extra_blocks more than the sequences
 * need, at least 1); MB is the widest sequence's block count plus extra_cols (at least 1). Every other entry
 * holds -1, or with garbage_kinds > 0 garbage[(b + j) % garbage_kinds] of {-1, 99999, INT32_MIN, -7,
 * INT32_MAX, NB}; a sequence with dead[b] set (dead may be NULL) holds no block, and garbage of all six
 * kinds in every entry. The caller frees table and owner. */
pc_paging pc_block_table(tu_rng *rng, int B, const int64_t *keys, int BS, int extra_blocks, int extra_cols,
                         int garbage_kinds, const unsigned char *dead);

/* block_table [B, MB], cu_seqlens_q [B+1] and seqused_kv [B]: int32 views of the arrays. */
void pc_sequence_views(int B, int64_t MB, int32_t *table, int32_t *cu, int32_t *used, dsops_tensor *block_table,
                       dsops_tensor *cu_seqlens_q, dsops_tensor *seqused_kv);

/* ---- outputs inside sentinel-filled buffers ---------------------------------------------------------- */

/* The n elements of esz (2 or 4) bytes at buf all become the sentinel's low esz bytes. */
void pc_fill_sentinel(void *buf, size_t esz, int64_t n, uint32_t sentinel);
/* 1 if every element still holds the sentinel. */
int pc_holds_sentinel(const void *buf, size_t esz, int64_t n, uint32_t sentinel);
/* Counts a check that every element of buf outside the view v (which lies in buf; no view when v->data is
 * NULL) still holds the sentinel; the failure names `what` and the first element written. */
int pc_check_outside_view(const char *label, const char *what, const void *buf, size_t esz, int64_t n,
                          uint32_t sentinel, const dsops_tensor *v);

/* ---- problems in a tf_fixture ------------------------------------------------------------------------ */

/* How cache_index entries are drawn: distinct random rows, some of them negative. The problem builders'
 * own enumerations (mp_index_mode, ip_index_mode) take these values. */
typedef enum pc_index_mode {
    PC_IDX_ALL = 0,   /* every token writes a distinct random row */
    PC_IDX_SOME = 1,  /* tokens t % 3 == 1 get a negative index (-1, -7, INT64_MIN by t % 3) */
    PC_IDX_NONE = 2   /* every index negative: no cache row is written */
} pc_index_mode;

/* Blocks for 2T + 3 cache rows: the default NB of the prolog problems. */
int pc_default_blocks(int64_t T, int64_t BS);
/* cache_index [T] over rows = NB * BS rows (partial Fisher-Yates), negative entries by mode. */
void pc_cache_indices(tu_rng *r, int64_t rows, int64_t T, pc_index_mode mode, int64_t *cache_index);
/* Every element of the [rows, cols] view U(-1, 1), except the first zero_rows rows: 0 (no draw). */
void pc_fill_rows(const dsops_tensor *t, tu_rng *r, int64_t zero_rows);
/* rope_cos and rope_sin [T, 64] (dtype dt, padding pad) in their own guarded buffers, or with `shared` both
 * in one [T, 128 + pad] buffer: sin in columns 0..63, cos in 64..127. */
void pc_rope_tables(tf_fixture *f, dsops_dtype dt, int64_t T, int64_t pad, int shared, dsops_tensor *cos,
                    dsops_tensor *sin);
/* The cache_index of the oracle's compact caches: entry t is w for the w-th token that writes a row, -1
 * for the others ([T], at least one element; caller frees); *nw receives the writing tokens. */
int64_t *pc_compact_index(const dsops_tensor *cache_index, int64_t *nw);
/* Every element of a view of up to three dimensions as fp32, densely in row-major order. */
void pc_dense_f32(const dsops_tensor *t, float *dst);
/* Visits every element of row r (block r / BS, slot r % BS) of a cache [NB, BS, W] or [NB, BS] (one element);
 * nothing when the view is absent. */
void pc_each_in_cache_row(const dsops_tensor *t, int64_t r, tf_elem_fn fn, void *ctx);

/* The elements an operator's call may write, in a fixed order (outputs, then addressed cache rows). */
typedef void (*pc_each_written_fn)(const void *args, tf_elem_fn fn, void *ctx);
/* Their raw bytes (caller frees; *n receives the length). */
unsigned char *pc_gather(pc_each_written_fn each, const void *args, size_t *n);
/* After a call: undoes the writes `each` allows, then checks that every region equals its snapshot (two
 * checks) and restores the fixture. Returns 1 on pass. */
int pc_check_only_written(tf_fixture *f, pc_each_written_fn each, const void *args, const char *label);

/* A problem in a tf_fixture as the shared runs see it: the operator's call and prepare on its arguments,
 * the bytes a call writes, and the comparison of a call's results with the oracle. */
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

/* One call: sentinels and snapshots first (tf_prepare_call), then the call; counts a check of its status. */
int pc_call(const pc_target *t, dsops_context *c, const char *label);
/* The call without and then with a prepared object on the context's tier: both against the oracle, and
 * bitwise equal to each other. */
void pc_run_both(const pc_target *t, dsops_context *c, const char *label);
/* Determinism: on a context of its own, on the scalar and the best tier, 1, 2 and 3 threads give bitwise the
 * same bytes; labels "<label> [<tier>] threads <n>". */
void pc_run_threads(const pc_target *t, const char *label);

#endif
