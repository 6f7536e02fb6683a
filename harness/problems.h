/* Adversarial problems of every operator, for the tests: small, any shape, layout and view arrangement, with the
 * edge data the named cases (cases.h) leave out (invalid-index zoos, garbage in unused block-table entries, NaN in
 * unread cache rows, exact ties, strided and shared views, guard zones around the outputs), and the oracle's
 * results on them. Each operator's builder sits in its family file beside its named cases (harness/<op>.c,
 * section "adversarial problems"), declared here under a heading of its own; the pieces several builders share
 * (row and cache fills, Q8 rows, block tables, the V4 prologs' guarded buffers v4p_*) are in cases_common.c. The
 * tests judge a library call on them: the checks two programs share in tests/problems_check.h, the others in
 * the operator's test. */
#ifndef DSOPS_HARNESS_PROBLEMS_H
#define DSOPS_HARNESS_PROBLEMS_H

#include <stddef.h>
#include <stdint.h>

#include "dsops.h"
#include "fixture.h"

/* ---- shared -------------------------------------------------------------------------------------- */

const char *cases_layout_name(dsops_kv_layout l);  /* split_bf16, split_int8, packed_int8, flashmla_fp8 */
const char *cases_rope_name(dsops_rope_mode m);    /* interleaved, half, in_half_out */

/* How the prolog problems draw cache_index: distinct random rows, some of them negative. The builders' own
 * enumerations (mp_index_mode, ip_index_mode) take these values. */
typedef enum cases_index_mode {
    CASES_IDX_ALL = 0,   /* every token writes a distinct random row */
    CASES_IDX_SOME = 1,  /* tokens t % 3 == 1 get a negative index (-1, -7, INT64_MIN by t % 3) */
    CASES_IDX_NONE = 2   /* every index negative: no cache row is written */
} cases_index_mode;

/* Every element of a view of up to three dimensions as fp32, densely in row-major order. */
void cases_dense_f32(const dsops_tensor *t, float *dst);

/* The n elements of esz (2 or 4) bytes at buf all become the sentinel's low esz bytes (the outputs' guarded
 * buffers before a call). */
void cases_fill_sentinel(void *buf, size_t esz, int64_t n, uint32_t sentinel);
/* 1 if every element still holds the sentinel. */
int cases_holds_sentinel(const void *buf, size_t esz, int64_t n, uint32_t sentinel);

/* The guard pattern of outputs' unwritten elements and of the zones around them: a NaN in fp32 and bf16, so an
 * element the call should have written fails every comparison. */
#define CASES_GUARD_F32 0x7fa5a5a5u
#define CASES_GUARD_BF16 ((uint16_t)0x7fa5u)

/* The elements an operator's call may write, in a fixed order (outputs, then addressed cache rows). */
typedef void (*cases_each_written_fn)(const void *args, tf_elem_fn fn, void *ctx);

/* ---- sparse_flash_attention_v32 (harness/sparse_flash_attention_v32.c) --------------------------- */

#define TP_MAX_B 16

typedef enum tp_index_mode {
    TP_IDX_VALID = 0,    /* random valid positions, with duplicates */
    TP_IDX_ZOO = 1,      /* half valid, half from {-1, -5, INT32_MIN, INT32_MAX, seqused, seqused+7} */
    TP_IDX_INVALID = 2,  /* only the invalid values above */
    TP_IDX_CASE = 3      /* docs/CASES.md rows: 0..seqused-1 then zeros, or the first K of a permutation */
} tp_index_mode;

typedef struct tp_spec {
    int B;                        /* sequences (0 allowed) */
    int S[TP_MAX_B];              /* query tokens per sequence (0 allowed) */
    int seqused[TP_MAX_B];        /* seqused_kv per sequence (0 allowed) */
    int N, Dc, Dr, K, BS;
    dsops_kv_layout layout;
    dsops_p_mode p_mode;
    int p_tile;                   /* tiled mode; 0 means 128 */
    float softmax_scale;          /* 0 means (Dc + Dr)^-0.5 */
    int with_lse;
    int with_topk_length;         /* random lengths: 0, in [0, K], K + 3, INT32_MAX */
    int with_sinks;               /* sinks [N] in [-3, 3]; 2: heads 0, 1, 2 (of those there are) +Inf, -Inf, NaN */
    tp_index_mode index_mode;
    int nan_fill;                 /* every cache row no token uses holds NaN (int8: -1 with NaN scales) */
    int inf_fill;                 /* every cache row no token uses holds +Inf (int8: 1 with +Inf scales) */
    float q_amp;                  /* q ~ U(-q_amp, q_amp); 0 means 1 */
    int int8_extreme;             /* int8 latents only -128 / 127 */
    int strided_q;                /* q_nope / q_rope: views into one [T, N, Dc+Dr+pad] buffer */
    int strided_kv;               /* 1: cache views into one padded buffer; 2 (split_int8, Dc 512, Dr 64):
                                   * views into a packed_int8-compatible buffer, no padding */
    int strided_out;              /* out / lse: padded views (the padding must stay untouched) */
    int extra_blocks;             /* physical blocks no table entry refers to */
    int extra_cols;               /* block-table columns beyond the needed ones */
    int garbage_table;            /* unused table entries hold garbage (99999, INT32_MIN, ...) instead of -1 */
    int neg_inf;                  /* split_bf16: some keys (and all keys of sequence 0) score -Inf */
} tp_spec;

typedef struct tp_problem {
    tp_spec sp;
    int64_t T, NB, MB;
    dsops_sparse_flash_attention_v32_args args;  /* the library's arguments */
    /* owned buffers */
    void *qbuf[2];
    void *kvbuf[4];
    int32_t *idx, *len, *table, *cu, *used;
    float *sinks;
    uint16_t *out_buf;            /* out view lives inside, with guard zones around it */
    float *lse_buf;
    int64_t out_buf_n, lse_buf_n; /* elements of the whole buffers */
    uint16_t *ref_out;            /* [T, N, Dc] reference output */
    float *ref_lse;               /* [T, N] reference lse (always computed) */
} tp_problem;

#define TP_SENTINEL_BF16 ((uint16_t)0xdead)
#define TP_SENTINEL_F32_BITS 0xdeadbeefu

/* Builds a problem from the spec with the given seed (aborts if memory runs out). The reference is not
 * computed yet. */
tp_problem *tp_make(const tp_spec *sp, uint64_t seed);
void tp_free(tp_problem *p);
/* Fills the whole out / lse buffers (guards and padding included) with the sentinels. */
void tp_reset_outputs(tp_problem *p);
/* 1 if no byte of the out / lse buffers differs from the sentinels. */
int tp_outputs_untouched(const tp_problem *p);
/* Runs the oracle into ref_out / ref_lse. */
void tp_compute_ref(tp_problem *p);

/* Runs the oracle on `a` with its outputs redirected to freshly allocated dense buffers (returned;
 * caller frees). ref_lse is always produced. */
void tp_reference_of(const dsops_sparse_flash_attention_v32_args *a, uint16_t **ref_out, float **ref_lse);

/* Element c of the query of token t, head h (c < Dc: q_nope, else q_rope[c - Dc]) becomes bf16(v). */
void tp_set_q(tp_problem *p, int64_t t, int64_t h, int64_t c, float v);
/* Rope element c of the cached key at logical position idx of sequence b becomes bf16(v) (every layout). */
void tp_set_key_rope(tp_problem *p, int64_t b, int64_t idx, int64_t c, float v);
/* The used entries of token t's top-k row (spec §4.4 steps 1-2): their count, the first one's position
 * in *first (-1 when there is none). */
int64_t tp_used_entries(const tp_problem *p, int64_t t, int64_t *first);

/* Writes a NaN pattern into every element of the out view and the lse view (if present), so that an
 * element the library forgets to write cannot keep an earlier run's value. */
void tp_poison_outputs(const dsops_sparse_flash_attention_v32_args *a);

/* Copies out (and lse, if present) into dense arrays of bits, for bitwise comparisons. */
void tp_extract(const dsops_sparse_flash_attention_v32_args *a, uint16_t *out_bits, uint32_t *lse_bits);

/* ---- lightning_indexer (harness/lightning_indexer.c) --------------------------------------------- */

#define LP_MAX_B 16

typedef enum lp_data {
    LP_DATA_RANDOM = 0,  /* int8: q, keys U(-128,127), scales U(0.5,2) / U(0.001,0.1), weights U(-1,1);
                          * bf16: q, keys, weights U(-1,1) */
    LP_DATA_EQUAL = 1,   /* every key row identical: all scores of a token are exactly equal */
    LP_DATA_TIES = 2,    /* keys from five row patterns with small integer values: scores are exact in any
                          * summation order and tie in large groups */
    LP_DATA_EXTREME = 3  /* int8: q and keys only -128 / 127; even heads of every token and every fourth
                          * physical cache row all -128, so that their dot is 16384 DI (with DI >= 8190
                          * the 2^-11 guard no longer keeps d_hj finite) */
} lp_data;

typedef struct lp_spec {
    int B;                       /* sequences (0 allowed) */
    int S[LP_MAX_B];             /* query tokens per sequence (0 allowed) */
    int seqused[LP_MAX_B];       /* seqused_kv (original tokens; 0 allowed) */
    int NI, DI, K, BS;
    int cmp_ratio;               /* 0 means 1 */
    int int8;                    /* 1: int8 variant, 0: bf16 (or fp8) */
    int fp8;                     /* with int8 0: the fp8 variant, the bf16 problem's values rounded to e4m3,
                                  * weights as fp32, key scales fp32 (U(0.5, 2); 1 in the exact modes; NaN where key_nan marks a row and in rows nan_fill leaves unseen) */
    int with_scores;             /* topk_scores requested */
    lp_data data;
    int ws_extreme;              /* int8: per token, one head whose fp16(q_scale * weight) overflows to +Inf
                                  * (tokens t % 3 == 0) or -Inf (t % 3 == 1); t % 3 == 2: heads whose
                                  * product underflows to 0 or to an fp16 subnormal */
    int neg_weights;             /* every weight negative: every score <= 0 (many exact -0 / +0 ties) */
    int neg_scales;              /* int8: every third key scale negative */
    int nan_weights;             /* one NaN weight in every fourth token: the whole row is NaN */
    int nan_key_scales;          /* int8: every seventh key scale NaN */
    int nan_fill;                /* cache rows no token can see hold NaN (bf16) / -128 with NaN scales */
    int q_nonfinite;             /* head NI/2 of token t: t % 4 == 1 a NaN query element (bf16) or query scale
                                  * (int8): every score NaN; t % 4 == 2 +Inf there with weight 1, t % 4 == 3
                                  * +Inf with weight -1: scores +Inf / -Inf, NaN or finite by key */
    int key_nan;                 /* every fifth cache row: a NaN element (bf16) or key scale (int8) */
    int strided_q;               /* q_idx, q_idx_scale, weights: padded views */
    int strided_kv;              /* key_cache, key_scale_cache: padded views */
    int strided_out;             /* topk_indices, topk_scores: padded rows */
    int extra_blocks;            /* physical blocks no table entry refers to */
    int extra_cols;              /* block-table columns beyond the needed ones */
    int garbage_table;           /* unused table entries hold garbage (99999, INT32_MIN, NB, ...) */
    int dead_seq_garbage;        /* sequences with no token in the call: whole table row garbage */
} lp_spec;

typedef struct lp_problem {
    lp_spec sp;
    int64_t T, NB, MB;
    dsops_lightning_indexer_args args;  /* the library's arguments */
    int strict;                  /* scores are exact in any summation order: rows must match exactly */
    /* owned buffers */
    void *qbuf, *qsbuf, *wbuf, *kbuf, *ksbuf;
    int32_t *table, *cu, *used;
    int32_t *idx_buf;            /* topk_indices view lives inside, with guard zones */
    float *score_buf;
    int64_t idx_buf_n, score_buf_n;
    int32_t *ref_idx;            /* [T, K] reference indices */
    float *ref_scores;           /* [T, K] reference scores (always computed) */
} lp_problem;

#define LP_SENTINEL_I32 ((int32_t)0x5a5a5a5a)
#define LP_SENTINEL_F32_BITS 0xdeadbeefu

/* The life cycle of the sparse_flash_attention_v32 problems for this operator's types (the programs name the
 * calls per operator). */

/* Builds a problem (aborts if memory runs out). The reference is not computed yet. */
lp_problem *lp_make(const lp_spec *sp, uint64_t seed);
void lp_free(lp_problem *p);
/* Fills the whole output buffers (guards and padding included) with the sentinels. */
void lp_reset_outputs(lp_problem *p);
/* 1 if no byte of the output buffers differs from the sentinels. */
int lp_outputs_untouched(const lp_problem *p);
/* Runs the oracle into ref_idx / ref_scores. */
void lp_compute_ref(lp_problem *p);

/* Runs the oracle on `a` with its outputs redirected to fresh dense buffers (caller frees);
 * ref_scores is always produced. */
void lp_reference_of(const dsops_lightning_indexer_args *a, int32_t **ref_idx, float **ref_scores);

/* Writes garbage (0x7f7f7f7f / NaN) into every element of the output views, so that an element the
 * library forgets to write cannot keep an earlier run's value. */
void lp_poison_outputs(const dsops_lightning_indexer_args *a);
/* Copies the outputs into dense arrays of bits (scores only when present and scores != NULL). */
void lp_extract(const dsops_lightning_indexer_args *a, int32_t *idx, uint32_t *scores);

/* Visible keys n_t of token t (spec §3.6). */
int64_t lp_visible(const dsops_lightning_indexer_args *a, int64_t t);

/* ---- mla_prolog_v32 (harness/mla_prolog_v32.c) --------------------------------------------------- */

typedef enum mp_index_mode {
    MP_IDX_ALL = CASES_IDX_ALL,    /* every token writes a distinct random row */
    MP_IDX_SOME = CASES_IDX_SOME,  /* about a third of the tokens get a negative index (-1, -7, INT64_MIN) */
    MP_IDX_NONE = CASES_IDX_NONE   /* every index negative: no cache row is written */
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
    tf_fixture fx;                    /* checked regions (outputs, caches) and owned allocations;
                                       * tf_prepare_call / tf_restore set and undo a call's sentinels */
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

/* Cache row `row` (block row / BS, slot row % BS) of the args' layout as fp32: latent lat [Dc], scales scale
 * [Dc / 128] (split_int8, packed_int8, flashmla_fp8) and rope kr [64]. An e4m3 latent byte is read as the int8 of
 * its bits, so that neighbouring values are 1 apart, as for an int8 latent (the tolerance of the int8 layouts). */
void mp_read_cache_row(const dsops_mla_prolog_v32_args *a, int64_t row, float *lat, float *scale, float *kr);

/* The elements a call may write: outputs in order q_nope, q_rope, qr, qr_scale, then the addressed cache rows in
 * token order (args: a dsops_mla_prolog_v32_args). */
void mp_each_written(const void *args, tf_elem_fn fn, void *ctx);
/* Their raw bytes, for bitwise comparisons of two runs. Caller frees; *n receives the length. */
unsigned char *mp_gather(const dsops_mla_prolog_v32_args *a, size_t *n);

/* ---- indexer_prolog_v32 (harness/indexer_prolog_v32.c) ------------------------------------------- */

typedef enum ip_index_mode {
    IP_IDX_ALL = CASES_IDX_ALL,    /* every token writes a distinct random row */
    IP_IDX_SOME = CASES_IDX_SOME,  /* about a third of the tokens get a negative index (-1, -7, INT64_MIN) */
    IP_IDX_NONE = CASES_IDX_NONE   /* every index negative: no cache row is written */
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
    tf_fixture fx;                    /* checked regions (outputs, caches) and owned allocations;
                                       * tf_prepare_call / tf_restore set and undo a call's sentinels */
    int64_t *cache_index;             /* [T] */
} ip_problem;

/* Dense reference results of one problem (values as fp32). */
typedef struct ip_ref {
    int64_t T, NI, DI, nw;            /* nw: tokens that write a cache row */
    int int8;
    float *q_idx, *q_idx_scale, *weights;  /* [T*NI*DI], [T*NI] (int8), [T*NI] */
    float *key, *key_scale;           /* [nw*DI], [nw] (int8): rows in token order */
} ip_ref;

/* The life cycle of the mla_prolog_v32 problems for this operator's types (the programs name the calls per
 * operator). */
ip_problem *ip_make(const ip_spec *sp, uint64_t seed);
void ip_free(ip_problem *p);

/* Runs the oracle on the problem's arguments (outputs into dense buffers, cache rows into a compact copy). */
ip_ref *ip_reference(const dsops_indexer_prolog_v32_args *a);
void ip_ref_free(ip_ref *r);

/* The elements a call may write: outputs in order q_idx, q_idx_scale, weights, then the addressed cache rows (key,
 * scale) in token order (args: a dsops_indexer_prolog_v32_args). */
void ip_each_written(const void *args, tf_elem_fn fn, void *ctx);
/* Their raw bytes, for bitwise comparisons of two runs. Caller frees; *n receives the length. */
unsigned char *ip_gather(const dsops_indexer_prolog_v32_args *a, size_t *n);

/* ---- compressor (harness/compressor.c) ----------------------------------------------------------- */

#define CP_MAX_B 64

/* A compressor variant: D channels, ratio R, C = 2 with overlap, rotate with a Hadamard matrix. */
typedef struct cp_variant {
    const char *name;
    int64_t D, R, C;
    int rotate;
} cp_variant;

typedef struct cp_spec {
    cp_variant v;
    int64_t H;
    int B;
    int64_t start[CP_MAX_B], len[CP_MAX_B];
    int64_t cover[CP_MAX_B];      /* positions the tables map at least (later calls of a schedule) */
    dsops_compressor_layout layout;
    int64_t NO;                   /* 0: entries + 1 (packed) or B + 1 (row_per_seq) */
    int64_t BSS, BSS2;            /* BSS2 = 0: the score state shares the kv table array and block size */
    int ring;                     /* every logical block of a sequence -> one physical block */
    int minimal;                  /* -1 in the columns of blocks without a needed position */
    int real_data;                /* x U(-2,2), weights U(-1,1) H^-0.5 (not grid values) */
    dsops_dtype norm_dt, rope_dt, had_dt;
    dsops_rope_mode mode;
    int inverse;
    float eps;
    int64_t x_pad;                /* elements between x rows (a strided view) */
} cp_spec;

typedef struct cp_problem {
    cp_spec s;
    int64_t T, CD, NO, entries, NB, NB2;
    uint16_t *x, *wkv, *wg, *out;      /* x [T, H] (row stride H + x_pad), w [C D, H], out [NO, D] + guard */
    int32_t *cu, *sp, *bt, *bt2, *cnt; /* [B+1], [B], [B, MB], [B, MB2] (bt2 == bt when shared), [B] + guard */
    float *ape;                        /* [R, C D] */
    void *norm, *had, *rc, *rs;        /* [D], [D, D], [NO, 64], [NO, 64] */
    float *kv, *sc;                    /* states of the library call [NB, BSS, C D], [NB2, BSS2, C D] */
    float *kv0, *sc0;                  /* the states before the call */
    dsops_compressor_args a;
} cp_problem;

/* A spec of B sequences (start and len still 0) with the defaults: packed layout, state block size 128, bf16
 * norm weight, tables and Hadamard matrix, interleaved rope, eps 1e-6. */
cp_spec cp_spec_make(cp_variant v, int64_t H, int B);
/* Builds a problem from the spec, drawing from the splitmix64 generator whose state is *rng_state (advanced;
 * tu_rng's and cases_internal.h's rng are that generator). Grid data unless real_data: x in {-1, -3/4, ..., 1},
 * weights multiples of 2^-6 in [-1/2, 1/2], ape multiples of 2^-8 (every projection exact in fp32); state rows of
 * positions before start random (some logits -Inf), every other row NaN; kv / sc hold copies of kv0 / sc0.
 * Aborts if memory runs out. */
cp_problem *cp_make(const cp_spec *s, uint64_t *rng_state);
void cp_free(cp_problem *p);

/* ---- hc_pre and hc_post (harness/hc_pre.c, harness/hc_post.c) ----------------------------------- */


/* Fills n elements of dtype dt (bf16 or fp32) at p and the one after them with the guard pattern. */
void hc_fill_guard(void *p, dsops_dtype dt, size_t n);

/* An hc_pre record with the V4 defaults over dense buffers: x [T, HC, H] bf16, hc_fn [(2 + HC) HC, HC H],
 * hc_scale [3], hc_base [(2 + HC) HC], y [T, H] bf16, post and pre [T, HC], comb [T, HC, HC] (fp32); pre
 * NULL: absent. */
void hpre_views(dsops_hc_pre_args *a, int64_t T, int64_t HC, int64_t H, void *x, void *fn, void *scale, void *base,
                void *y, void *post, void *comb, void *pre);
/* An hc_post record over dense buffers: x [T, H], residual and out [T, HC, H] of dtype xdt, post [T, HC] and comb
 * [T, HC, HC] of dtype gdt. */
void hpost_views(dsops_hc_post_args *a, int64_t T, int64_t HC, int64_t H, dsops_dtype xdt, dsops_dtype gdt, void *x,
                 void *res, void *post, void *comb, void *out);

typedef enum hpre_data {
    HPRE_DATA_WC,  /* AscendC: x U(0,2), hc_fn U(0, 1/(4H)), hc_scale and hc_base U(0,2) */
    HPRE_DATA_ILL  /* PyPTO: every input U(-1,1) (comb ill-conditioned) */
} hpre_data;

typedef struct hpre_problem {
    int64_t T, HC, H;
    void *x, *fn, *scale, *base;   /* the inputs (see hpre_views) */
    void *y, *post, *comb, *pre;   /* the outputs, each with one guard element after its end */
    dsops_hc_pre_args a;
} hpre_problem;

/* Builds an hc_pre problem drawing from the splitmix64 generator whose state is *rng_state (advanced; tu_rng's
 * and cases_internal.h's rng are that generator): the data in order x, hc_fn, hc_scale, hc_base; token
 * zero_token (when in [0, T)) of x all zero; sinkhorn_iters and norm_eps as given, pre absent unless with_pre.
 * Aborts if memory runs out. */
void hpre_make(hpre_problem *p, int64_t T, int64_t HC, int64_t H, hpre_data data, int iters, float norm_eps,
               int with_pre, int64_t zero_token, uint64_t *rng_state);
/* Every output element and the guard after each output (pre's buffer too, present or not) holds the guard. */
void hpre_fill_guards(hpre_problem *p);
void hpre_free(hpre_problem *p);

typedef struct hpost_problem {
    int64_t T, HC, H;
    void *x, *res, *post, *comb;   /* the inputs (see hpost_views), each with one spare element */
    dsops_hc_post_args a;          /* out NULL: the caller's */
} hpost_problem;

/* Builds an hc_post problem, values U(lo, hi) drawn in order x, residual, post, comb from the generator whose
 * state is *rng_state (advanced). Aborts if memory runs out. */
void hpost_make(hpost_problem *p, int64_t T, int64_t HC, int64_t H, dsops_dtype xdt, dsops_dtype gdt, float lo,
                float hi, uint64_t *rng_state);
void hpost_free(hpost_problem *p);

/* ---- mla_prolog_v4, indexer_prolog_v4 (harness/mla_prolog_v4.c, harness/indexer_prolog_v4.c; the pieces
 * both use in cases_common.c) ------------------------------------------------------------------------ */

#define V4P_LEAD 16   /* sentinel elements before every view of a v4p_buf */
#define V4P_GUARD 67  /* sentinel elements after it */

/* A buffer holding one view, with sentinel zones before and after it and in its padding: outputs (an
 * unwritten element cannot pass a comparison, a write outside the view shows) and inputs (a read outside
 * the elements shows in the results). */
typedef struct v4p_buf {
    const char *name;          /* the view's member of the call record */
    dsops_tensor t;
    unsigned char *buf;        /* whole buffer */
    size_t bytes;
} v4p_buf;

/* Sentinel bits of dtype dt (dsops_dtype_size(dt) bytes into pat): NaN for the float types, -128 for int8
 * (Q8 never produces it). */
void v4p_sentinel(dsops_dtype dt, unsigned char *pat);
/* b holds a [shape] view of dtype dt: dense, or with `padded` every outer stride larger than the dense one
 * (the inner stride stays 1, 1-D views stay dense); the whole buffer holds the sentinel. */
void v4p_buf_make(v4p_buf *b, const char *name, dsops_dtype dt, int ndim, const int64_t *shape, int padded);
void v4p_buf_free(v4p_buf *b);
/* The whole buffer (view, padding, zones) back to the sentinel. */
void v4p_buf_poison(v4p_buf *b);
/* The elements widened to fp32, in logical order (caller frees). */
float *v4p_buf_widen(const v4p_buf *b);

/* Elements of a view of rank <= 3; element e in logical row-major order: its address, its value as fp32, and
 * v stored rounded to the view's dtype (int8: truncated). */
int64_t v4p_numel(const dsops_tensor *t);
unsigned char *v4p_elem(const dsops_tensor *t, int64_t e);
float v4p_get(const dsops_tensor *t, int64_t e);
void v4p_set(const dsops_tensor *t, int64_t e, float v);

/* A problem of mla_prolog_v4 or indexer_prolog_v4 as either operator's description (dsops_op_find) sees it:
 * the call record, its inputs and its outputs (each named as its member of the record), and the oracle.
 * The first member of each operator's problem (m4_problem, i4_problem). */
typedef struct v4p_problem {
    const dsops_op_desc *op;   /* call, prepare, the record's tensors by name */
    void *args;                /* the problem's call record */
    v4p_buf in[16];
    int nin;
    v4p_buf out[4];
    int nout;
    void (*oracle)(const void *args);
} v4p_problem;

/* Oracle results, dense and widened to fp32, in the order of the problem's outputs. */
typedef struct v4p_ref {
    float *v[4];
} v4p_ref;

/* The tensor member `name` of a call record of op (exits when op has none). */
dsops_tensor *v4p_member(const dsops_op_desc *op, void *args, const char *name);
/* The output bytes of every element (outputs in order, each in logical order), for bitwise comparisons of two
 * runs. Caller frees; *len receives the length. */
unsigned char *v4p_gather(const v4p_problem *pl, size_t *len);
/* Every output buffer back to its sentinel (before a call). */
void v4p_poison_outputs(v4p_problem *pl);
/* A copy of the record with `prep` as its prepared object (caller frees). */
void *v4p_record(const v4p_problem *pl, const dsops_prepared *prep);
/* The oracle on the record, into dense outputs of the same shapes. */
v4p_ref v4p_reference(const v4p_problem *pl);
void v4p_ref_free(v4p_ref *r);
/* Frees the buffers and the problem that pl heads. */
void v4p_free(v4p_problem *pl);

typedef struct m4_spec {
    int T, H, Q, N, D;
    int int8;                  /* int8 wq_b (Q8 per row of the bf16 draw) */
    dsops_rope_mode rope_mode;
    int rope_inverse;
    dsops_dtype gamma_dtype;   /* gamma_cq and gamma_ckv (0: bf16) */
    dsops_dtype gckv_dtype;    /* gamma_ckv only, overrides gamma_dtype (0: as gamma_dtype) */
    dsops_dtype table_dtype;   /* rope_cos, rope_sin (0: bf16) */
    int padded;                /* x, the tables and the 2-D / 3-D outputs with padded outer strides */
    int zero_tokens;           /* the first tokens' x rows are all zero */
    int zero_gamma_cq;         /* gamma_cq = 0: cq = 0 for every token */
    int int8_extreme;          /* int8 wq_b only -128 / 127 (scales 1e-3) */
    float eps_qh;              /* 0: the preset's */
} m4_spec;

typedef struct m4_problem {
    v4p_problem pl;            /* outputs q, kv, qr, qr_scale (int8) */
    m4_spec sp;
    dsops_mla_prolog_v4_args a;
} m4_problem;

/* x U(-1,1); wq_a, wq_b, wkv U(-0.1,0.1) bf16 (int8 wq_b: Q8 rows of that draw); gammas and tables U(-1,1);
 * freed with v4p_free(&p->pl). */
m4_problem *m4_make(const m4_spec *sp, uint64_t seed);

typedef enum i4_had {
    I4_HAD_RANDOM = 0,         /* U(-1,1) / sqrt(DI) */
    I4_HAD_SYLVESTER = 1       /* the normalised Sylvester matrix (DI a power of 2) */
} i4_had;

typedef struct i4_spec {
    int T, H, Q, NI, DI;
    dsops_rope_mode rope_mode;
    int rope_inverse;
    dsops_dtype table_dtype;   /* 0: bf16 */
    dsops_dtype had_dtype;     /* 0: bf16 */
    i4_had had;
    int padded;                /* qr, x, the tables and the 2-D / 3-D outputs with padded outer strides */
    int zero_tokens;           /* the first tokens' qr rows are 0 with qr_scale 0 */
    int sign_data;             /* qr and idx_wq_b from {-1, 0} through Q8 (the docs/CASES.md data) */
    float weights_scale;       /* 0: the preset's */
} i4_spec;

typedef struct i4_problem {
    v4p_problem pl;            /* outputs q_idx, q_idx_scale, weights */
    i4_spec sp;
    dsops_indexer_prolog_v4_args a;
} i4_problem;

/* qr, idx_wq_b Q8 rows of U(-1,1) / U(-0.1,0.1) bf16 draws (or of {-1, 0}), x U(-1,1), weights_proj
 * U(-0.1,0.1), tables U(-1,1); freed with v4p_free(&p->pl). */
i4_problem *i4_make(const i4_spec *sp, uint64_t seed);

/* ---- sas (harness/sas.c) ------------------------------------------------------------------------- */

#define SP_MAX_B 8

typedef enum sp_sink_kind {
    SP_SINK_NONE,
    SP_SINK_RAND,        /* U(-1, 1) */
    SP_SINK_POS_INF,     /* every sink +Inf */
    SP_SINK_NEG_INF,     /* every sink -Inf */
    SP_SINK_EXTREME      /* by head h % 7: +Inf, -Inf, 1e30, -1e30, 20, -20, 0, then U(-1, 1) */
} sp_sink_kind;

typedef enum sp_len_kind {
    SP_LEN_NONE,         /* cmp_topk_length absent */
    SP_LEN_RAND,         /* random counts in [0, K + 2] */
    SP_LEN_ZERO,         /* every count 0 */
    SP_LEN_VENDOR        /* the vendor count max(NC - S_b + 1 + i, 0) */
} sp_len_kind;

typedef enum sp_idx_kind {
    SP_IDX_VALID,        /* random valid entries (duplicates possible) */
    SP_IDX_ZOO,          /* within the count: valid, -1, INT32_MIN, NC and beyond, INT32_MAX, valid but not causal,
                          * duplicates; past it: valid or junk */
    SP_IDX_VENDOR,       /* docs/CASES.md rows: 0 ... NC-1 then zeros, or the first K of a permutation */
    SP_IDX_ALL_INVALID   /* only -1, NC, -3 and INT32_MAX */
} sp_idx_kind;

typedef struct sp_spec {
    int B;                  /* sequences (at most SP_MAX_B, 0 allowed) */
    int S[SP_MAX_B];        /* tokens per sequence */
    int seqused[SP_MAX_B];  /* seqused_kv per sequence */
    int N, D;
    int win_size;
    dsops_cmp_mode cmp_mode;
    int cmp_ratio, K;       /* K: sparse top-k width; cmp_ratio below 1 means 1 */
    int BSW, BSC;           /* block sizes of the pools */
    dsops_p_mode p_mode;
    int p_tile;
    sp_sink_kind sinks;
    int lse;                /* lse requested */
    sp_len_kind len;
    sp_idx_kind idx;
    float scale;            /* softmax_scale; 0: D^-0.5 */
    float qamp;             /* q ~ U(-qamp, qamp); 0: 1 */
    int pad;                /* extra elements per row of q, out and both pools (strided views) */
    int unused_pools;       /* pass a NaN pool that the mode does not use (win_size 0 / cmp_mode none) */
} sp_spec;

/* An output buffer of n elements of esz (2 or 4) bytes with one guard element before and after; the view
 * starts at element 1. Elements the view does not address (guards, padding of strided rows) keep the guard
 * pattern; the operator must never touch them. */
typedef struct sp_guarded {
    void *buf;
    size_t n, esz;
} sp_guarded;

#define SP_NAN_BF16 ((uint16_t)0x7fc0u) /* every pool row no token reads, and the padding of q */

typedef struct sp_problem {
    sp_spec s;
    int64_t T, B, Dp;       /* Dp: D + pad */
    int64_t NBW, MBW, NBC, MBC, K;
    uint16_t *q;            /* [T, N, Dp] bf16 (view [T, N, D]) */
    int32_t *cu;            /* [B+1] */
    int32_t *used;          /* [B] */
    uint16_t *ori;          /* [NBW, BSW, Dp] bf16 */
    int32_t *ori_bt;        /* [B, MBW] */
    uint16_t *cmp;          /* [NBC, BSC, Dp] bf16 */
    int32_t *cmp_bt;        /* [B, MBC] */
    int32_t *idx;           /* [T, K] */
    int32_t *len;           /* [T] */
    float *sinks;           /* [N] */
    sp_guarded out, lse;    /* [T, N, Dp] bf16 (view [T, N, D]); [T, N] fp32 */
    uint16_t *ref_out;      /* [T, N, D] the oracle's out */
    float *ref_lse;         /* [T, N] the oracle's lse (always computed) */
    dsops_sas_args args;
} sp_problem;

/* Builds a problem from the spec with the given seed (aborts if memory runs out). The reference is not
 * computed yet. Window and compressed pools: U(-1,1) in the rows some token reads, NaN (SP_NAN_BF16) in every
 * other row and in two spare blocks; block-table entries no token needs hold -1, junk or another block. */
sp_problem *sp_make(const sp_spec *spec, uint64_t seed);
void sp_free(sp_problem *p);
/* Runs the oracle into ref_out / ref_lse (lse always, for the lonely-row checks). */
void sp_compute_ref(sp_problem *p);
/* Fills the whole out / lse buffers (guards and padding included) with the guard pattern. */
void sp_reset_outputs(sp_problem *p);
/* The first element of g's view; 1 if element i of g's buffer (guards included) holds the guard pattern. */
void *sp_guarded_view(const sp_guarded *g);
int sp_guarded_holds(const sp_guarded *g, size_t i);
/* L of token t of sequence b: the positions it sees (<= 0: none). */
int64_t sp_token_L(const sp_problem *p, int64_t b, int64_t t);

/* The rows of a sas call that break the exact rules of spec §2.10, judged against the oracle's results (shared by
 * the family's check in harness/sas.c and tests/test_sas.c): a lonely row (oracle lse +Inf and out all zero) that
 * is not out +0 / lse +Inf, a row of a +Inf sink (not poisoned) whose out is not all zero, and a row that breaks
 * the NaN rule (NaN in every element and in lse where the oracle's lse is NaN, no NaN where the oracle's out has
 * none). How many of each kind, and the first (t * N + h) of each (-1: none yet). */
typedef struct sas_row_faults {
    int64_t lonely, sink, nan, first_lonely, first_sink, first_nan;
} sas_row_faults;
/* Adds the faults of tokens t0 .. t0+n-1 of the outputs in a (out a view of any strides, lse dense or absent) to
 * *f, against the oracle's dense ro [n, N, D] and rl [n, N]; start *f at {0, 0, 0, -1, -1, -1}. */
void sas_find_row_faults(const dsops_sas_args *a, int64_t t0, int64_t n, const uint16_t *ro, const float *rl,
                         sas_row_faults *f);

#endif
