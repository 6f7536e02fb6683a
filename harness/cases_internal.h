/* Helpers shared by the case generators of the operator families (harness/<family>.c, defined in
 * harness/cases_common.c), their adversarial problems (problems.h) included; not part of the cases API. */
#ifndef DSOPS_BENCH_CASES_INTERNAL_H
#define DSOPS_BENCH_CASES_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "dsops.h"
#include "problems.h"

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
/* One value lo + (hi - lo) U[0, 1) (lo where rounding reaches hi). */
float cases_rng_uniform(rng *r, float lo, float hi);
/* One integer uniform in [lo, hi] (lo, with no draw, when hi <= lo). */
int64_t cases_rng_int(rng *r, int64_t lo, int64_t hi);
/* perm[0 .. n-1] = a random permutation of 0 ... n-1 (Fisher-Yates, n - 1 draws from r). */
void cases_shuffle(rng *r, int32_t *perm, int64_t n);

/* fp32 -> bf16 / fp16 bits (round to nearest even) and fp16 bits -> fp32. */
uint16_t cases_bf16_bits(float f);
/* bf16 bits -> fp32 (exact). */
float cases_bf16_value(uint16_t h);
uint16_t cases_fp16_bits(float f);
float cases_fp16_value(uint16_t h);
/* fp32 -> fp16 bits for finite values below 65504 in magnitude, round to nearest even, written out in
 * integer arithmetic (the indexer caches of the V3.2 cases). */
uint16_t cases_fp16_bits_finite(float f);
/* Round to nearest, ties to even, for |x| < 2^22. */
float cases_rint_small(float x);
/* The vendor test quantiser of one group of n values (n a multiple of 8): scale = max(amax, 1e-8) / 127,
 * q = clamp(round(v / scale), -128, 127); returns the scale. */
float cases_quant_group(const float *v, int8_t *q, int n);

/* A zeroed allocation recorded in an owner's buffer list (freed with cases_free_owned); NULL when
 * memory or the list runs out. */
void *cases_alloc_owned(void **buffers, int *nbuffers, int capacity, size_t bytes);
void cases_free_owned(void **buffers, int nbuffers);
/* The buffer list of an owner (a problem or stage set with members buffers[] and nbuffers), as the
 * first three arguments of cases_alloc_owned and of the helpers below that allocate. */
#define OWNED_LIST(owner)                                                                                         \
    (owner)->buffers, &(owner)->nbuffers, (int)(sizeof (owner)->buffers / sizeof (owner)->buffers[0])
#define ALLOC_OWNED(owner, bytes) cases_alloc_owned(OWNED_LIST(owner), (bytes))

/* A call record of operator op's description (dsops_op_find) whose first `size` bytes are the args struct `args`
 * and whose other members are the description's defaults, with the INT or ENUM parameter `param` (NULL: none)
 * set to `value`: the record that `dsops run` and the generic test driver reach through the description, for the
 * descriptions that wrap the args struct with parameters of their own (lightning_indexer's topk, sas's
 * variant). Owned by the buffer list; NULL when memory runs out or the description lacks `param`. */
void *cases_wrapped_record(void **buffers, int *nbuffers, int capacity, const char *op, const void *args,
                           size_t size, const char *param, int value);
/* Sets the INT or ENUM parameter `param` of op's description record; -1 when the description lacks it. */
int cases_record_set_int(void *record, const char *op, const char *param, int value);

/* A generator for one row of generated data, seeded from (seed, stream, row): data do not depend on the
 * thread count, and rows can be filled in parallel. */
rng cases_row_rng(uint64_t seed, uint64_t stream, int64_t row);
/* The longest row the fills below draw. */
#define CASES_MAX_ROW 16384
/* The longest latent-cache row (Dc + Dr) cases_fill_latent_cache draws. */
#define CASES_MAX_KV_ROW 1024
/* rows x cols bf16 values amp * U(-1,1), one generator per row. */
void cases_fill_bf16(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, float amp, uint16_t *dst);
/* The same bf16 rows, each quantised by Q8 (spec §2.7): q into dst, the fp32 scale into scale[row]. */
void cases_fill_q8_bf16(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, float amp, int8_t *dst,
                        float *scale);
/* rows x cols int8 values uniform in [-128, 128), eight per generator output, one generator per row. */
void cases_fill_i8(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, int8_t *dst);
/* n fp32 values U(-1,1) from one generator. */
void cases_fill_f32(uint64_t seed, uint64_t stream, int64_t n, float *dst);
/* rows x cols values lo + (hi - lo) U[0, 1) (cols <= 32768), stored as bf16 or fp32 (dst [rows, cols] of
 * dtype dt); the generator of a row is seeded as the hc_pre / hc_post cases have always been. */
void cases_fill_range(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, float lo, float hi,
                      dsops_dtype dt, void *dst);
#define CASES_MAX_RANGE_ROW 32768

/* A paged latent cache of NB blocks of BS rows in `layout`, every row random: Dc latent and Dr rope values
 * U(-1,1) drawn from (seed, stream, row); int8 layouts quantise the latent per 128-group with
 * cases_quant_group (packed_int8: Dc 512, Dr 64); flashmla_fp8 rows are the library's FP8 quantisation of the
 * bf16 row (Dc 512, Dr 64). Tensors absent in the layout stay zero. */
typedef struct cases_latent_cache {
    dsops_tensor nope;        /* split layouts: [NB, BS, Dc] bf16 or int8 */
    dsops_tensor nope_scale;  /* split_int8: [NB, BS, Dc/128] fp32 */
    dsops_tensor rope;        /* split layouts: [NB, BS, Dr] bf16 */
    dsops_tensor packed;      /* packed_int8, flashmla_fp8: [NB, BS, 656] uint8 */
} cases_latent_cache;
/* 1, or 0 when memory or the buffer list runs out. */
int cases_fill_latent_cache(void **buffers, int *nbuffers, int capacity, dsops_kv_layout layout, int64_t NB,
                            int64_t BS, int Dc, int Dr, uint64_t seed, uint64_t stream, cases_latent_cache *out);

/* The paging of a prolog case: B sequences whose caches hold kv tokens each, ceil(kv / BS) blocks per
 * sequence taken in order from a random permutation (one shuffle from r) of the NB blocks. */
typedef struct cases_prolog_paging {
    int64_t NB, MB;          /* physical blocks, block-table columns */
    int32_t *block_table;    /* [B, MB] (-1 in unused columns) */
    int64_t *cache_index;    /* [B*S] the slots of each sequence's positions kv - S ... kv - 1 */
} cases_prolog_paging;
/* 1, or 0 when memory or the buffer list runs out. */
int cases_make_prolog_paging(void **buffers, int *nbuffers, int capacity, rng *r, int64_t B, int64_t S, int64_t kv,
                             int64_t BS, cases_prolog_paging *out);

/* The inputs of an MLA prolog of V3.2 (mla_prolog_v32, and the first stage of sparse_attention_v32), all
 * bf16: x U(-1,1); wq_a, wq_b, w_uk, wkv_a U(-0.1,0.1) (int8 wq_b: Q8 per output channel of the bf16 draw,
 * with wq_b_scale); gamma_cq, gamma_ckv U(-1,1); rope_cos, rope_sin U(-0.1,0.1). Each comes from stream
 * first_stream + its offset below (the second of a pair from seed ^ 0x5555). */
enum {
    CASES_MLA_X, CASES_MLA_WQ_A, CASES_MLA_WQ_B, CASES_MLA_W_UK, CASES_MLA_WKV_A, CASES_MLA_GAMMA, CASES_MLA_ROPE,
    CASES_MLA_STREAMS
};
typedef struct cases_mla_inputs {
    dsops_tensor x;                    /* [T, H] */
    dsops_tensor wq_a, gamma_cq;       /* [Q, H], [Q] */
    dsops_tensor wq_b, wq_b_scale;     /* [N*(Dqn+64), Q] bf16 or int8, [N*(Dqn+64)] fp32 (int8 only) */
    dsops_tensor w_uk;                 /* [N, Dqn, Dc] */
    dsops_tensor wkv_a, gamma_ckv;     /* [Dc+64, H], [Dc] */
    dsops_tensor rope_cos, rope_sin;   /* [T, 64] */
} cases_mla_inputs;
/* 1, or 0 when memory or the buffer list runs out. */
int cases_make_mla_inputs(void **buffers, int *nbuffers, int capacity, int64_t T, int64_t H, int64_t Q, int64_t N,
                          int64_t Dqn, int64_t Dc, int int8_wq_b, uint64_t seed, uint64_t first_stream,
                          cases_mla_inputs *out);
/* Sets the members of args struct *a (mla_prolog_v32 or sparse_attention_v32) that cases_mla_inputs holds. */
#define CASES_SET_MLA_INPUTS(a, in)                                                                                  ((a)->x = (in).x, (a)->wq_a = (in).wq_a, (a)->gamma_cq = (in).gamma_cq, (a)->wq_b = (in).wq_b,                       (a)->wq_b_scale = (in).wq_b_scale, (a)->w_uk = (in).w_uk, (a)->wkv_a = (in).wkv_a,                                  (a)->gamma_ckv = (in).gamma_ckv, (a)->rope_cos = (in).rope_cos, (a)->rope_sin = (in).rope_sin)

/* The weights of an indexer prolog of V3.2 (indexer_prolog_v32, and the second stage of sparse_attention_v32):
 * idx_wq_b int8 uniform in [-128, 128) with idx_wq_b_scale U(-1,1) fp32, or U(-1,1) bf16; idx_wk, weights_proj
 * U(-1,1) bf16; ln_gamma_k 1, ln_beta_k 0 (bf16). Each comes from stream first_stream + its offset below. */
enum { CASES_INDEXER_WQ_B, CASES_INDEXER_WQ_B_SCALE, CASES_INDEXER_WK, CASES_INDEXER_WPROJ, CASES_INDEXER_STREAMS };
typedef struct cases_indexer_weights {
    dsops_tensor idx_wq_b, idx_wq_b_scale;  /* [NI*DI, Q] int8 or bf16, [NI*DI] fp32 (int8 only) */
    dsops_tensor idx_wk, weights_proj;      /* [DI, H], [NI, H] */
    dsops_tensor ln_gamma_k, ln_beta_k;     /* [DI] */
} cases_indexer_weights;
/* 1, or 0 when memory or the buffer list runs out. */
int cases_make_indexer_weights(void **buffers, int *nbuffers, int capacity, int64_t H, int64_t Q, int64_t NI,
                               int64_t DI, int int8, uint64_t seed, uint64_t first_stream, cases_indexer_weights *out);
/* Sets the members of args struct *a (indexer_prolog_v32 or sparse_attention_v32) that w holds. */
#define CASES_SET_INDEXER_WEIGHTS(a, w)                                                                          \
    ((a)->idx_wq_b = (w).idx_wq_b, (a)->idx_wq_b_scale = (w).idx_wq_b_scale, (a)->idx_wk = (w).idx_wk,            \
     (a)->weights_proj = (w).weights_proj, (a)->ln_gamma_k = (w).ln_gamma_k, (a)->ln_beta_k = (w).ln_beta_k)

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

/* Repeated entries of a case table's per-sequence arrays. */
#define REP4(x) x, x, x, x
#define REP8(x) REP4(x), REP4(x)
#define REP12(x) REP8(x), REP4(x)
#define REP16(x) REP8(x), REP8(x)
#define REP24(x) REP16(x), REP8(x)
#define REP32(x) REP16(x), REP16(x)
#define REP48(x) REP32(x), REP16(x)
#define REP64(x) REP16(x), REP16(x), REP16(x), REP16(x)

/* ---- the pieces the adversarial problems (problems.h) share ---------------------------------------- */

/* calloc that aborts when memory runs out: never NULL (also for 0 elements), and exactly n * size bytes
 * otherwise, so that the sanitizers see an access past the end. */
void *cases_xcalloc(size_t n, size_t size);

#define CASES_GUARD 64 /* sentinel elements before and after each output view */

/* Raw bits of element (i0, i1, i2) of a view of up to three dimensions (unused indices ignored). */
void cases_put_u16(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, uint16_t v);
void cases_put_i8(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, int8_t v);
void cases_put_f32(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v);
/* A view of `data` with the given shape and outer strides (stride[0 .. ndim-2]; innermost stride 1). */
dsops_tensor cases_view(void *data, dsops_dtype dt, int ndim, const int64_t *shape, const int64_t *outer_stride);

/* cu_seqlens_q [B+1] from the query tokens S[b] and seqused_kv [B] (both cases_xcalloc'd); returns T. */
int64_t cases_sequences(int B, const int *S, const int *seqused, int32_t **cu, int32_t **used);

typedef struct cases_paging {
    int64_t NB, MB;      /* physical blocks, block-table columns */
    int32_t *table;      /* [B, MB] */
    int32_t *owner;      /* [NB] the sequence whose table holds each physical block, -1 for none */
} cases_paging;
/* The block table of a paged cache: sequence b holds keys[b] keys in its first ceil(keys[b] / BS) entries,
 * taken in order from a random permutation (cases_shuffle) of the NB physical blocks (extra_blocks more than the
 * sequences need, at least 1); MB is the widest sequence's block count plus extra_cols (at least 1). Every other
 * entry holds -1, or with garbage_kinds > 0 garbage[(b + j) % garbage_kinds] of {-1, 99999, INT32_MIN, -7,
 * INT32_MAX, NB}; a sequence with dead[b] set (dead may be NULL) holds no block, and garbage of all six kinds in
 * every entry. The caller frees table and owner. */
cases_paging cases_block_table(rng *r, int B, const int64_t *keys, int BS, int extra_blocks, int extra_cols,
                               int garbage_kinds, const unsigned char *dead);
/* block_table [B, MB], cu_seqlens_q [B+1] and seqused_kv [B]: int32 views of the arrays. */
void cases_sequence_views(int B, int64_t MB, int32_t *table, int32_t *cu, int32_t *used, dsops_tensor *block_table,
                          dsops_tensor *cu_seqlens_q, dsops_tensor *seqused_kv);

/* Blocks for 2T + 3 cache rows: the default NB of the prolog problems. */
int cases_default_blocks(int64_t T, int64_t BS);
/* cache_index [T] over rows = NB * BS rows (partial Fisher-Yates), negative entries by mode. */
void cases_cache_indices(rng *r, int64_t rows, int64_t T, cases_index_mode mode, int64_t *cache_index);
/* Every element of the [rows, cols] view U(-1, 1), except the first zero_rows rows: 0 (no draw). */
void cases_fill_rows(const dsops_tensor *t, rng *r, int64_t zero_rows);
/* Every element of a view of up to three dimensions U(lo, hi), in row-major order. */
void cases_fill_view_uniform(const dsops_tensor *t, rng *r, float lo, float hi);
/* rope_cos and rope_sin [T, 64] (dtype dt, padding pad) in their own guarded buffers, or with `shared` both
 * in one [T, 128 + pad] buffer: sin in columns 0..63, cos in 64..127. */
void cases_rope_tables(tf_fixture *f, dsops_dtype dt, int64_t T, int64_t pad, int shared, dsops_tensor *cos,
                       dsops_tensor *sin);
/* The cache_index of the oracle's compact caches: entry t is w for the w-th token that writes a row, -1
 * for the others (a dense [T] int64 tensor, at least one element allocated; caller frees its data); *nw
 * receives the writing tokens. */
dsops_tensor cases_compact_index(const dsops_tensor *cache_index, int64_t *nw);
/* Visits every element of row r (block r / BS, slot r % BS) of a cache [NB, BS, W] or [NB, BS] (one element);
 * nothing when the view is absent. */
void cases_each_in_cache_row(const dsops_tensor *t, int64_t r, tf_elem_fn fn, void *ctx);
/* The raw bytes of the elements `each` visits (caller frees; *n receives the length). */
unsigned char *cases_gather(cases_each_written_fn each, const void *args, size_t *n);

/* n values U(lo, hi) of dtype dt (bf16 or fp32, drawn in order from r) and one zero element after them
 * (a guard); never NULL, the caller frees. */
void *cases_uniform_buffer(rng *r, dsops_dtype dt, size_t n, float lo, float hi);

/* ---- the pieces the V4 prologs' problems (problems.h) share -------------------------------------- */

/* pl for a problem of operator `op` whose call record is args (set to the V4 defaults; exits when op has no
 * description or no V4 preset). */
void v4p_init(v4p_problem *pl, const char *op, void *args, void (*oracle)(const void *args));
/* An input [shape] in its own v4p_buf of pl (sentinel padding: NaN / -128). */
dsops_tensor v4p_input(v4p_problem *pl, const char *name, dsops_dtype dt, int ndim, const int64_t *shape,
                       int padded);
/* An output [shape] in its own v4p_buf of pl, set as the record's member of that name. */
void v4p_output(v4p_problem *pl, const char *name, dsops_dtype dt, int ndim, const int64_t *shape, int padded);
/* Inputs rope_cos, rope_sin [T, 64] of dtype dt in their own v4p_bufs of pl, U(-1,1). */
void v4p_rope_tables(v4p_problem *pl, dsops_dtype dt, int64_t T, int padded, rng *r, dsops_tensor *cos,
                     dsops_tensor *sin);
/* Rows of w [rows, cols] int8 = Q8 (spec §2.7) of a row of values; scale [rows] fp32. The values are the
 * bf16 row amp * U(-1,1), or with amp V4P_SIGN_DATA values from {-1, 0}: Q8 gives {-127, 0} with scale 1/127
 * (0 for a zero row), the docs/CASES.md sign data. */
#define V4P_SIGN_DATA 0.0f
void v4p_fill_q8_rows(const dsops_tensor *w, const dsops_tensor *scale, rng *r, float amp);

/* Q8 of spec §2.7 over one row of finite values v[0 .. n-1]: q[k] = rint(v[k] * 127 / amax) into q; returns the
 * fp32 scale amax / 127 (as 1 / (127 / amax)), or 0 with q all zero for an all-zero row. The V3.2 generators'
 * int8 weights and keys, and the V4 indexer prolog's. */
float cases_q8_row(const float *v, int64_t n, int8_t *q);

/* The n values U(-1,1) of row `row`'s generator (cases_row_rng) into v: the first draws of every row-parallel
 * generator. */
void cases_row_uniform(uint64_t seed, uint64_t stream, int64_t row, float *v, int64_t n);

/* Row i of an int8 view [rows, cols]: uniform in [-128, 127], or with `extreme` only -128 / 127 (one draw a value). */
void cases_fill_int8_row(const dsops_tensor *t, int64_t i, rng *r, int extreme);
/* Elements (b, o, 0 .. n-1) of a cache view (a [NB, BS] view: n 1): a float dtype gets U(-1,1) or NaN, a byte
 * dtype a random byte or 0xff (int8 -1, e4m3 NaN), by `nan`; one draw an element when not `nan`. */
void cases_fill_cache_elems(const dsops_tensor *t, int64_t b, int64_t o, int64_t n, rng *r, int nan);

/* The block table [B, MB] of the named attention cases: sequence b holds ceil(floor(seqused[b] / R) / BS) blocks,
 * the next ones of a random permutation of the NB physical blocks (one shuffle from r), in its first columns,
 * and -1 in the others. 1, or 0 when memory runs out. */
int cases_fill_block_table(rng *r, int B, const int *seqused, int R, int64_t BS, int64_t NB, int64_t MB, int32_t *bt);

#endif
