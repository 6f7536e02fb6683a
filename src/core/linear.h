/* Linear maps y = x W^T through oneDNN matmuls, for the prologs' large GEMMs.
 *
 * W [N, K] (bf16 or int8, checkpoint orientation) is split into fixed chunks of output columns;
 * each chunk is one oneDNN matmul with its weights reordered once into oneDNN's preferred packed
 * format. Chunks run on the library's threads (oneDNN itself then runs single-threaded inside each),
 * so results do not depend on the thread count. */
#ifndef DSOPS_LINEAR_H
#define DSOPS_LINEAR_H

#include <stdint.h>

#include "dsops.h"

typedef struct dsops_linear dsops_linear;

/* The oneDNN CPU engine that a group of maps shares (one stream per thread serves them all). */
typedef struct dsops_linear_engine dsops_linear_engine;

dsops_status dsops_linear_engine_create(dsops_linear_engine **out);
void dsops_linear_engine_destroy(dsops_linear_engine *e);

/* Packs W (dtype bf16, fp32 or int8): element W[n][k] at w + n * stride_n + k * stride_k (elements);
 * checkpoint weights [N, K] have stride_k = 1, a [K, N] matrix (such as w_uk[h]) has stride_n = 1.
 * The chunks are packed on up to `threads` threads (the caller's context's count). */
dsops_status dsops_linear_create(dsops_linear_engine *e, const void *w, dsops_dtype dtype, int64_t N, int64_t K,
                                 int64_t stride_n, int64_t stride_k, int threads, dsops_linear **out);
/* How many threads packed `l` (for tests of the thread count). */
int dsops_linear_pack_threads(const dsops_linear *l);
void dsops_linear_destroy(dsops_linear *l);

/* One product of a batch: y[m][n] = sum_k x[m][k] * W[n][k] for m < M; x has W's dtype; y is fp32
 * (bf16 / fp32 W) or int32 (int8 W, exact); x rows at x + m * ldx, y rows at y + m * ldy (elements). */
typedef struct dsops_linear_job {
    const dsops_linear *l;
    const void *x;
    int64_t ldx;
    void *y;
    int64_t ldy;
} dsops_linear_job;

/* Runs every chunk of every job on up to `threads` threads; all jobs' maps share one engine. With few
 * rows (decode sizes) maps with row-major weights use the row-dot kernels of tier `isa` instead of
 * oneDNN, when that tier has them. Activation copies live in ctx's matmul scratch. */
dsops_status dsops_linear_run(dsops_context *ctx, const dsops_linear_job *jobs, int njobs, int64_t M, int threads,
                              dsops_isa isa);

/* 1 if `l` was made from exactly these weights (prepared objects are checked with it). */
int dsops_linear_matches(const dsops_linear *l, const void *w, dsops_dtype dtype, int64_t N, int64_t K,
                         int64_t stride_n, int64_t stride_k);

/* The object behind dsops_prepared: the linear maps of one operator's weights. */
struct dsops_prepared {
    const char *op;                /* operator name, for messages */
    dsops_linear_engine *engine;   /* shared by the maps */
    int count;
    dsops_linear **maps;           /* [count] */
    dsops_prepared *parts[2];      /* a fused operator's: its stages' prepared objects */
    void *packed;                  /* an operator's own packed copy of a weight (64-byte aligned), or NULL */
};

/* One weight of an operator, as dsops_linear_create takes it, with its name for messages. */
typedef struct dsops_linear_source {
    const char *name;
    const void *w;
    dsops_dtype dtype;
    int64_t N, K, stride_n, stride_k;
} dsops_linear_source;

/* A prepared object for operator `op` with one map per source, sharing one engine, packed on up to
 * `threads` threads. */
dsops_status dsops_prepared_make(const char *op, const dsops_linear_source *src, int count, int threads,
                                 dsops_prepared **out);
/* The prepared object of one call: `given` when not NULL, else a new one made from src, stored in *own
 * (the caller destroys it after the call; NULL when `given` is used). */
dsops_status dsops_prepared_for_call(const dsops_prepared *given, const char *op, const dsops_linear_source *src,
                                     int count, int threads, const dsops_prepared **use, dsops_prepared **own);
/* DSOPS_OK when p is NULL or was made by dsops_prepared_make(op, src, count) from exactly these weights;
 * else DSOPS_ERR_PARAM naming the first weight that differs. */
dsops_status dsops_prepared_check(const dsops_prepared *p, const char *op, const dsops_linear_source *src, int count);

#endif
