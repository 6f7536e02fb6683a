/* Checks of sparse_attention_v32 results shared by test_dia and test_dia_validation:
 *   - a state: the fused arguments, the cache buffers with their contents before any call (each call
 *     starts from them), and the cache rows the call writes;
 *   - results of the fused operator and of the four stand-alone operators run in sequence (out, lse,
 *     topk_indices and every cache byte), compared bitwise;
 *   - the oracle chain (spec §4.5: the reference of every stage in sequence) and the comparison of a
 *     result with it: topk_indices with compare_topk, the written cache rows with the stages' tolerances
 *     (§4.1, §4.2) and the rest of every cache bit-identical, out and lse against the reference attention
 *     on the result's own topk_indices (§4.4 tolerances). */
#ifndef DSOPS_TEST_DIA_CHECK_H
#define DSOPS_TEST_DIA_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "dsops.h"
#include "test_util.h"

#define DC_MAX_CACHES 6

typedef struct dc_field {
    const char *name;
    size_t off;           /* bytes into the row */
    int64_t count;        /* elements */
    dsops_dtype dt;
    tu_tol tol;
} dc_field;

typedef struct dc_cache {
    const char *name;
    unsigned char *data;  /* the caller's buffer (dense tensor) */
    size_t bytes, row_bytes;
    unsigned char *snap;  /* contents before any call */
    dc_field f[3];
    int nfields;
} dc_cache;

typedef struct dc_state {
    dsops_sparse_attention_v32_args args;
    dc_cache c[DC_MAX_CACHES];
    int nc;
    int64_t T, N, Dc, K, B, MB;
    int64_t *tok_seq, *tok_L;  /* per token: sequence and visible length L_t */
    int64_t nslots;            /* distinct non-negative cache_index values (the rows written) */
    int64_t *slots;
} dc_state;

typedef struct dc_result {
    unsigned char *out, *lse, *topk;
    size_t out_bytes, lse_bytes, topk_bytes;
    unsigned char *cache[DC_MAX_CACHES];
    unsigned char *q_nope, *q_rope;  /* stage-chain runs only: the intermediates of stage 1 */
    size_t q_nope_bytes, q_rope_bytes;
} dc_result;

/* The oracle chain's results. Only the listed tokens get the indexer and attention oracles. */
typedef struct dc_oracle dc_oracle;

dc_state *dc_state_make(const dsops_sparse_attention_v32_args *a);
void dc_state_free(dc_state *s);
/* Puts every cache back to its contents before any call. */
void dc_restore(dc_state *s);
/* 1 if every cache byte equals the snapshot (after a rejected call). */
int dc_caches_untouched(const dc_state *s, const char *label);

/* From the restored caches, poisoned outputs: the fused call (prepared may be NULL) / the four stand-alone
 * operators. Counts a check on the status; NULL on failure. */
dc_result *dc_run_fused(dc_state *s, dsops_context *ctx, const dsops_prepared *prepared, const char *label);
dc_result *dc_run_chain(dc_state *s, dsops_context *ctx, const char *label);
void dc_result_free(dc_result *r);
/* Bitwise equality of two results (out, lse, topk, caches); counts checks. */
int dc_same(const dc_state *s, const dc_result *a, const dc_result *b, const char *label, const char *what);

/* The oracle chain on every token / on the last token of every sequence. */
dc_oracle *dc_oracle_make(const dc_state *s);
dc_oracle *dc_oracle_make_last_tokens(const dc_state *s);
void dc_oracle_free(dc_oracle *o);
/* Compares a result with the oracle (see the top of this header); max_miss < 0 means 1. out is compared
 * with `out_tol` (NULL: spec §4.5, 1e-4 / 0.005 / 0.005). A stage-chain result also has its q_nope and
 * q_rope compared with the oracle's (§4.1), and its out with the reference attention evaluated on its own
 * q_nope, q_rope, caches and top-k (§4.4 tolerance). Counts checks. */
int dc_check_oracle(const dc_state *s, const dc_oracle *o, const dc_result *r, const char *label, int max_miss,
                    const tu_tol *out_tol);

#endif
