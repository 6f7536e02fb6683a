/* Linear maps through oneDNN matmuls (see linear.h). */
#include <stdio.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <oneapi/dnnl/dnnl.h>

#include "dispatch.h"
#include "internal.h"
#include "linear.h"

/* Output columns per chunk: large enough for efficient matmuls, small enough to spread a few
 * thousand columns over the threads. Fixed, so the arithmetic never depends on the thread count. */
#define LINEAR_CHUNK 256

/* Up to this many rows, maps with row-major weights run on the tier's row-dot kernels (oneDNN's
 * matmuls reach only a fraction of the memory speed there; docs/PERFORMANCE.md). */
#define ROWDOT_MAX_M 16
/* From this many rows on, bf16 maps with a lanes copy use it (it was 18-45 % faster than the row kernels at 4,
 * 8 and 16 rows, weights in memory or in cache); with fewer rows its register tile waits on FMA latency. */
#define LANES_MIN_M 4
/* The same for int8 maps (see docs/PERFORMANCE.md). */
#define LANES_MIN_M_S8 4

typedef struct linear_chunk {
    int64_t n0, n;              /* first column, columns */
    dnnl_primitive_t matmul;    /* src [M, K] (M given at run time) x weights [K, n] -> dst [M, n] */
    dnnl_memory_desc_t w_md;    /* packed weights */
    void *packed;
    dnnl_memory_t w_mem;        /* memory object over `packed`, made once */
} linear_chunk;

struct dsops_linear_engine {
    dnnl_engine_t engine;
};

/* How a map runs its products (chosen once, when the map is made). */
typedef enum linear_path {
    PATH_ONEDNN = 0,      /* oneDNN matmul in the weights' own type */
    PATH_WIDENED = 1,     /* weights widened to fp32 once; oneDNN fp32 matmul on widened activations (int8: in
                           * blocks of K whose sums are exact in fp32, added in int32) */
    PATH_OWN = 2          /* the tier's row-dot kernels for every row count (oneDNN has no matmul of this type) */
} linear_path;

struct dsops_linear {
    dnnl_engine_t engine;           /* the shared engine's */
    linear_path path;
    int64_t kb, kblock;             /* K in kb blocks of kblock (kb > 1: the widened int8 path only) */
    const void *w;              /* identity of the source weights */
    dsops_dtype dtype;
    int64_t N, K, stride_n, stride_k;
    int nchunks;
    int pack_threads;               /* threads that took part in packing */
    linear_chunk *chunks;
    int32_t *wsum128;               /* int8 with stride_k 1: 128 * sum_k W[n][k], for the row-dot path */
    void *rows;                     /* PATH_OWN with stride_k != 1: a row-major copy of W [N, K] */
    void *lanes;                    /* bf16 and int8 on CPUs whose best tier is AVX2 or below: W in the lanes
                                     * layout of src/kernels/linear/linear.h, for the row dots of LANES_MIN_M rows
                                     * and more */
};

static dsops_status dnnl_failed(dnnl_status_t st, const char *what)
{
    if (st == dnnl_out_of_memory)
        return dsops_fail(DSOPS_ERR_NOMEM, "oneDNN is out of memory (%s)", what);
    return dsops_fail(DSOPS_ERR_UNSUPPORTED, "oneDNN %s failed (status %d)", what, (int)st);
}

#define DNNL_TRY(call, what)                 \
    do {                                     \
        dnnl_status_t st_ = (call);          \
        if (st_ != dnnl_success) {           \
            status = dnnl_failed(st_, what); \
            goto done;                       \
        }                                    \
    } while (0)

/* bf16 x bf16 -> fp32, fp32 x fp32 -> fp32, int8 x int8 -> int32 (the source has the weights' type) */
static dnnl_data_type_t weight_type(const dsops_linear *l)
{
    if (l->path == PATH_WIDENED)
        return dnnl_f32;
    return l->dtype == DSOPS_BF16 ? dnnl_bf16 : l->dtype == DSOPS_FP32 ? dnnl_f32 : dnnl_s8;
}
static dnnl_data_type_t result_type(const dsops_linear *l)
{
    return l->dtype == DSOPS_INT8 && l->path != PATH_WIDENED ? dnnl_s32 : dnnl_f32;
}

/* Widens chunk c's weights to fp32 as [kb][kblock][n] (unit stride along n, zero beyond K). */
static float *widen_weights(const dsops_linear *l, const linear_chunk *c, const char *src)
{
    size_t count = (size_t)(l->kb * l->kblock * c->n);
    float *wf = calloc(count ? count : 1, sizeof(float));
    if (!wf)
        return NULL;
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t k = 0; k < l->K; k++) {
            int64_t at = n * l->stride_n + k * l->stride_k;
            float v = l->dtype == DSOPS_BF16 ? dsops_bf16_value(((const uint16_t *)src)[at]) : (float)((const int8_t *)src)[at];
            wf[k * c->n + n] = v; /* block k / kblock, row k % kblock */
        }
    return wf;
}

/* Creates chunk c's matmul and packs its weights. The widened path multiplies kb blocks of K as one batched
 * matmul ([kb, M, kblock] x [kb, kblock, n] -> [kb, M, n]) when kb > 1. */
static dsops_status make_chunk(const dsops_linear *l, linear_chunk *c)
{
    dsops_status status = DSOPS_OK;
    dnnl_memory_desc_t src_md, dst_md, w_any, w_plain;
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd = NULL, rpd = NULL;
    dnnl_primitive_t reorder = NULL;
    dnnl_memory_t from = NULL, to = NULL;
    dnnl_stream_t stream = NULL;
    float *widened = NULL;
    char *dense = NULL; /* a dense copy of the chunk's weights when their strides have no oneDNN layout */
    int nd = l->kb > 1 ? 3 : 2;
    const int64_t R = DNNL_RUNTIME_DIM_VAL;
    dnnl_dims_t src_dims = {R, l->kblock}, w_dims = {l->kblock, c->n}, dst_dims = {R, c->n};
    dnnl_dims_t src_strides = {R, 1}, dst_strides = {R, 1};
    dnnl_dims_t w_strides = {l->stride_k, l->stride_n}; /* W^T: element (k, n) at k * stride_k + n * stride_n */
    if (l->path == PATH_WIDENED)
        w_strides[0] = c->n, w_strides[1] = 1;
    if (nd == 3) {
        dnnl_dims_t s3 = {l->kb, R, l->kblock}, w3 = {l->kb, l->kblock, c->n}, d3 = {l->kb, R, c->n};
        dnnl_dims_t ss3 = {R, R, 1}, ds3 = {R, R, 1}, ws3 = {l->kblock * c->n, c->n, 1};
        memcpy(src_dims, s3, sizeof s3), memcpy(w_dims, w3, sizeof w3), memcpy(dst_dims, d3, sizeof d3);
        memcpy(src_strides, ss3, sizeof ss3), memcpy(dst_strides, ds3, sizeof ds3), memcpy(w_strides, ws3, sizeof ws3);
    }
    DNNL_TRY(dnnl_memory_desc_init_by_strides(&src_md, nd, src_dims, weight_type(l), src_strides), "source descriptor");
    DNNL_TRY(dnnl_memory_desc_init_by_strides(&dst_md, nd, dst_dims, result_type(l), dst_strides), "result descriptor");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&w_any, nd, w_dims, weight_type(l), dnnl_format_tag_any), "weights descriptor");
    const char *src = (const char *)l->w + (size_t)(c->n0 * l->stride_n) * dsops_elem_size(l->dtype);
    if (l->path != PATH_WIDENED &&
        dnnl_memory_desc_init_by_strides(&w_plain, nd, w_dims, weight_type(l), w_strides) != dnnl_success) {
        /* strides oneDNN takes no layout for (a view whose rows overlap, which an input may be): the chunk is
         * copied dense first and reordered from there like any other */
        const size_t es = dsops_elem_size(l->dtype);
        if (!(dense = malloc(es * (size_t)(l->kblock * c->n)))) {
            status = dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate a dense copy of %lld weights", (long long)(l->kblock * c->n));
            goto done;
        }
        for (int64_t k = 0; k < l->kblock; k++)
            for (int64_t n = 0; n < c->n; n++)
                memcpy(dense + (size_t)(k * c->n + n) * es, src + (size_t)(n * l->stride_n + k * l->stride_k) * es, es);
        src = dense;
        w_strides[0] = c->n, w_strides[1] = 1;
    }
    DNNL_TRY(dnnl_memory_desc_init_by_strides(&w_plain, nd, w_dims, weight_type(l), w_strides), "weights descriptor");
    DNNL_TRY(dnnl_matmul_desc_init(&desc, &src_md, &w_any, NULL, &dst_md), "matmul descriptor");
    DNNL_TRY(dnnl_primitive_desc_create(&pd, &desc, NULL, l->engine, NULL), "matmul primitive descriptor");
    c->w_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if (l->path == PATH_WIDENED) {
        /* widened here, not by a oneDNN reorder: its bf16 reorders need the CPU support its bf16 matmuls lack */
        if (!(widened = widen_weights(l, c, src))) {
            status = dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate %lld floats of widened weights",
                                (long long)(l->kb * l->kblock * c->n));
            goto done;
        }
        src = (const char *)widened;
    } else if (!dense && dnnl_memory_desc_equal(&w_plain, &c->w_md)) {
        /* the matmul reads the caller's layout as it is: no copy (the weights must stay unchanged) */
        DNNL_TRY(dnnl_memory_create(&c->w_mem, &c->w_md, l->engine, (void *)src), "weights memory");
        DNNL_TRY(dnnl_primitive_create(&c->matmul, pd), "matmul primitive");
        goto done;
    }
    size_t bytes = dnnl_memory_desc_get_size(&c->w_md);
    c->packed = aligned_alloc(64, dsops_align64(bytes ? bytes : 64));
    if (!c->packed) {
        status = dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate %zu bytes of packed weights", bytes);
        goto done;
    }
    DNNL_TRY(dnnl_memory_create(&from, &w_plain, l->engine, (void *)src), "weights memory");
    DNNL_TRY(dnnl_memory_create(&to, &c->w_md, l->engine, c->packed), "packed weights memory");
    DNNL_TRY(dnnl_reorder_primitive_desc_create(&rpd, &w_plain, l->engine, &c->w_md, l->engine, NULL), "reorder");
    DNNL_TRY(dnnl_primitive_create(&reorder, rpd), "reorder primitive");
    DNNL_TRY(dnnl_stream_create(&stream, l->engine, dnnl_stream_default_flags), "stream");
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    DNNL_TRY(dnnl_primitive_execute(reorder, stream, 2, args), "weights reorder");
    DNNL_TRY(dnnl_stream_wait(stream), "stream wait");
    DNNL_TRY(dnnl_primitive_create(&c->matmul, pd), "matmul primitive");
    DNNL_TRY(dnnl_memory_create(&c->w_mem, &c->w_md, l->engine, c->packed), "packed weights memory");
done:
    if (stream)
        dnnl_stream_destroy(stream);
    if (reorder)
        dnnl_primitive_destroy(reorder);
    if (rpd)
        dnnl_primitive_desc_destroy(rpd);
    if (from)
        dnnl_memory_destroy(from);
    if (to)
        dnnl_memory_destroy(to);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    free(widened);
    free(dense);
    return status;
}

void dsops_linear_destroy(dsops_linear *l)
{
    if (!l)
        return;
    for (int i = 0; i < l->nchunks; i++) {
        if (l->chunks[i].matmul)
            dnnl_primitive_destroy(l->chunks[i].matmul);
        if (l->chunks[i].w_mem)
            dnnl_memory_destroy(l->chunks[i].w_mem);
        free(l->chunks[i].packed);
    }
    free(l->chunks);
    free(l->wsum128);
    free(l->rows);
    free(l->lanes);
    free(l);
}

dsops_status dsops_linear_engine_create(dsops_linear_engine **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate a oneDNN engine");
    dnnl_status_t st = dnnl_engine_create(&(*out)->engine, dnnl_cpu, 0);
    if (st != dnnl_success) {
        free(*out);
        *out = NULL;
        return dnnl_failed(st, "engine creation");
    }
    return DSOPS_OK;
}

void dsops_linear_engine_destroy(dsops_linear_engine *e)
{
    if (!e)
        return;
    dnnl_engine_destroy(e->engine);
    free(e);
}

/* Whether oneDNN has a matmul of weights type `wt` on this CPU (Debian's oneDNN 2.6 has no bf16 matmul
 * without AVX-512, and no JIT kernels at all below SSE 4.1). */
static bool onednn_has_matmul(dnnl_engine_t engine, dnnl_data_type_t wt)
{
    dnnl_memory_desc_t s, w, d;
    dnnl_dims_t sd = {4, 64}, wd = {64, 32}, dd = {4, 32};
    dnnl_data_type_t rt = wt == dnnl_s8 ? dnnl_s32 : dnnl_f32;
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_memory_desc_init_by_tag(&s, 2, sd, wt, dnnl_ab) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&w, 2, wd, wt, dnnl_format_tag_any) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&d, 2, dd, rt, dnnl_ab) != dnnl_success ||
        dnnl_matmul_desc_init(&desc, &s, &w, NULL, &d) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL) != dnnl_success)
        return false;
    dnnl_primitive_desc_destroy(pd);
    return true;
}

/* The path of a map of `dtype` weights: oneDNN in the weights' type where it has an exact matmul of it; else the
 * weights widened once to fp32: bf16 products are exact in fp32 and the sums stay fp32, as in a bf16 matmul;
 * int8 products are at most 2^14 in magnitude, so any sum of at most INT8_EXACT_K of them is an integer below
 * 2^24, exact in fp32 whatever the order, and the blocks' sums are added in int32. Without oneDNN's fp32
 * matmul either (no JIT below SSE 4.1), the tier's own row-dot kernels. */
#define INT8_EXACT_K 1024
static linear_path choose_path(dnnl_engine_t engine, dsops_dtype dtype)
{
    dnnl_data_type_t wt = dtype == DSOPS_BF16 ? dnnl_bf16 : dtype == DSOPS_FP32 ? dnnl_f32 : dnnl_s8;
    /* without VNNI, oneDNN's int8 kernels multiply with vpmaddubsw, whose int16 pair sums saturate: its int8
     * matmul then returns wrong sums for ordinary data (seen on an AVX2 CPU), so it is used only with VNNI */
    bool exact = dtype != DSOPS_INT8 || dsops_isa_detected() >= DSOPS_ISA_AVX512BF16;
    if (exact && onednn_has_matmul(engine, wt))
        return PATH_ONEDNN;
    if (dtype != DSOPS_FP32 && onednn_has_matmul(engine, dnnl_f32))
        return PATH_WIDENED;
    return PATH_OWN;
}

int dsops_linear_pack_threads(const dsops_linear *l) { return l->pack_threads; }

dsops_status dsops_linear_create(dsops_linear_engine *e, const void *w, dsops_dtype dtype, int64_t N, int64_t K,
                                 int64_t stride_n, int64_t stride_k, int threads, dsops_linear **out)
{
    *out = NULL;
    dsops_linear *l = calloc(1, sizeof *l);
    if (!l)
        return dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate a linear map");
    l->w = w;
    l->dtype = dtype;
    l->N = N;
    l->K = K;
    l->stride_n = stride_n;
    l->stride_k = stride_k;
    l->nchunks = (int)((N + LINEAR_CHUNK - 1) / LINEAR_CHUNK);
    l->chunks = calloc((size_t)l->nchunks, sizeof *l->chunks);
    l->engine = e->engine;
    l->path = choose_path(e->engine, dtype);
    l->kblock = l->path == PATH_WIDENED && dtype == DSOPS_INT8 && K > INT8_EXACT_K ? INT8_EXACT_K : K;
    l->kb = K > 0 ? (K + l->kblock - 1) / l->kblock : 1;
    if (!l->chunks) {
        dsops_linear_destroy(l);
        return dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate a linear map");
    }
    dsops_status status = DSOPS_OK;
    char message[512] = "";
    /* packing is as costly as a few calls: spread it over the caller's threads */
    if (threads > l->nchunks)
        threads = l->nchunks;
    if (threads < 1)
        threads = 1;
    int took_part = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) reduction(max : took_part)
    for (int i = 0; i < l->nchunks; i++) {
#ifdef _OPENMP
        omp_set_num_threads(1); /* this task's setting: oneDNN's nested regions stay single-threaded */
#endif
        took_part = dsops_thread_count_here();
        linear_chunk *c = &l->chunks[i];
        c->n0 = (int64_t)i * LINEAR_CHUNK;
        c->n = N - c->n0 < LINEAR_CHUNK ? N - c->n0 : LINEAR_CHUNK;
        dsops_status s = l->path == PATH_OWN ? DSOPS_OK : make_chunk(l, c);
        if (s != DSOPS_OK) {
#pragma omp critical(dsops_linear_status)
            {
                status = s;
                /* the message is the worker's (thread-local): carry it to the calling thread */
                snprintf(message, sizeof message, "%s", dsops_last_error());
            }
        }
    }
    l->pack_threads = took_part;
    if (status != DSOPS_OK) {
        dsops_linear_destroy(l);
        return dsops_fail(status, "%s", message);
    }
    if (status == DSOPS_OK && l->path == PATH_OWN && stride_k != 1 && N > 0 && K > 0) {
        /* the row-dot kernels read row-major weights */
        size_t es = dsops_elem_size(dtype);
        l->rows = malloc(es * (size_t)(N * K));
        if (!l->rows)
            status = dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate %lld weights in rows", (long long)(N * K));
        for (int64_t n = 0; status == DSOPS_OK && n < N; n++)
            for (int64_t k = 0; k < K; k++)
                memcpy((char *)l->rows + (size_t)(n * K + k) * es, (const char *)w + (size_t)(n * stride_n + k * stride_k) * es,
                       es);
    }
    const char *base = l->rows ? (const char *)l->rows : (const char *)w;
    int64_t ldw = l->rows ? K : stride_n;
    if (status == DSOPS_OK && dtype == DSOPS_INT8 && (stride_k == 1 || l->rows)) {
        l->wsum128 = malloc(sizeof *l->wsum128 * (size_t)(N > 0 ? N : 1));
        if (!l->wsum128)
            status = dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate %lld row sums", (long long)N);
        for (int64_t n = 0; status == DSOPS_OK && n < N; n++) {
            const int8_t *row = (const int8_t *)base + n * ldw;
            uint32_t sum = 0;
            for (int64_t k = 0; k < K; k++)
                sum += (uint32_t)(int32_t)row[k];
            l->wsum128[n] = (int32_t)(sum * 128u);
        }
    }
    /* the AVX2 row dots of many rows run at up to 90 % of the FMA peak on weights laid out as lanes, against
     * about 60 % on rows (docs/PERFORMANCE.md); the AVX-512 tiers keep their own row kernels */
    if (status == DSOPS_OK && (dtype == DSOPS_BF16 || (dtype == DSOPS_INT8 && l->wsum128)) &&
        (stride_k == 1 || l->rows) && N > 0 && K > 0 && dsops_isa_detected() <= DSOPS_ISA_AVX2) {
        l->lanes = malloc(dsops_elem_size(dtype) * dsops_linear_lanes_elems(N, K));
        if (!l->lanes)
            status = dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate %lld weights in lanes", (long long)(N * K));
        else if (dtype == DSOPS_BF16)
            dsops_linear_pack_lanes((const uint16_t *)base, N, K, ldw, 1, l->lanes);
        else
            dsops_linear_pack_lanes_s8((const int8_t *)base, N, K, ldw, 1, l->lanes);
    }
    if (status != DSOPS_OK) {
        dsops_linear_destroy(l);
        return status;
    }
    *out = l;
    return DSOPS_OK;
}

int dsops_linear_matches(const dsops_linear *l, const void *w, dsops_dtype dtype, int64_t N, int64_t K,
                         int64_t stride_n, int64_t stride_k)
{
    return l && l->w == w && l->dtype == dtype && l->N == N && l->K == K && l->stride_n == stride_n &&
           l->stride_k == stride_k;
}

void dsops_prepared_destroy(dsops_prepared *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->count; i++)
        dsops_linear_destroy(p->maps[i]);
    free(p->maps);
    dsops_linear_engine_destroy(p->engine);
    dsops_prepared_destroy(p->parts[0]);
    dsops_prepared_destroy(p->parts[1]);
    free(p->packed);
    free(p);
}

dsops_status dsops_prepared_make(const char *op, const dsops_linear_source *src, int count, int threads,
                                 dsops_prepared **out)
{
    *out = NULL;
    dsops_prepared *p = calloc(1, sizeof *p);
    if (!p || !(p->maps = calloc((size_t)count, sizeof *p->maps))) {
        free(p);
        return dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate prepared weights");
    }
    p->op = op;
    dsops_status s = dsops_linear_engine_create(&p->engine);
    for (int k = 0; s == DSOPS_OK && k < count; k++) {
        s = dsops_linear_create(p->engine, src[k].w, src[k].dtype, src[k].N, src[k].K, src[k].stride_n, src[k].stride_k,
                                threads, &p->maps[k]);
        p->count = k + 1;
    }
    if (s != DSOPS_OK) {
        dsops_prepared_destroy(p);
        return s;
    }
    *out = p;
    return DSOPS_OK;
}

dsops_status dsops_prepared_for_call(const dsops_prepared *given, const char *op, const dsops_linear_source *src,
                                     int count, int threads, const dsops_prepared **use, dsops_prepared **own)
{
    *own = NULL;
    *use = given;
    if (given)
        return DSOPS_OK;
    DSOPS_TRY(dsops_prepared_make(op, src, count, threads, own));
    *use = *own;
    return DSOPS_OK;
}

dsops_status dsops_prepared_check(const dsops_prepared *p, const char *op, const dsops_linear_source *src, int count)
{
    if (!p)
        return DSOPS_OK;
    if (p->count != count || strcmp(p->op, op) != 0)
        return dsops_fail(DSOPS_ERR_PARAM, "prepared was made for %s with %d maps, not for these %s weights", p->op,
                          p->count, op);
    for (int k = 0; k < count; k++)
        if (!dsops_linear_matches(p->maps[k], src[k].w, src[k].dtype, src[k].N, src[k].K, src[k].stride_n,
                                  src[k].stride_k))
            return dsops_fail(DSOPS_ERR_PARAM, "prepared was made from another %s", src[k].name);
    return DSOPS_OK;
}

/* Runs one chunk on `stream` (oneDNN runs single-threaded inside the caller's parallel region). */
static dsops_status run_chunk_int8_widened(const dsops_linear *l, const linear_chunk *c, dnnl_stream_t stream,
                                          const float *x, int64_t M, int32_t *y, int64_t ldy, float *sums);

static dsops_status run_chunk(const dsops_linear *l, const linear_chunk *c, dnnl_stream_t stream, const void *x,
                              int64_t M, int64_t ldx, void *y, int64_t ldy, float *sums)
{
    if (l->path == PATH_WIDENED && l->dtype == DSOPS_INT8)
        return run_chunk_int8_widened(l, c, stream, (const float *)x, M, (int32_t *)y, ldy, sums);
    dsops_status status = DSOPS_OK;
    dnnl_memory_desc_t src_md, dst_md;
    dnnl_memory_t src = NULL, dst = NULL;
    dnnl_dims_t src_dims = {M, l->K}, dst_dims = {M, c->n}, src_strides = {ldx, 1}, dst_strides = {ldy, 1};
    char *yc = (char *)y + (size_t)c->n0 * 4;
    DNNL_TRY(dnnl_memory_desc_init_by_strides(&src_md, 2, src_dims, weight_type(l), src_strides), "source descriptor");
    DNNL_TRY(dnnl_memory_desc_init_by_strides(&dst_md, 2, dst_dims, result_type(l), dst_strides), "result descriptor");
    DNNL_TRY(dnnl_memory_create(&src, &src_md, l->engine, (void *)x), "source memory");
    DNNL_TRY(dnnl_memory_create(&dst, &dst_md, l->engine, yc), "result memory");
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, c->w_mem}, {DNNL_ARG_DST, dst}};
    DNNL_TRY(dnnl_primitive_execute(c->matmul, stream, 3, args), "matmul");
done:
    if (src)
        dnnl_memory_destroy(src);
    if (dst)
        dnnl_memory_destroy(dst);
    return status;
}

/* Rows per step of the widened int8 path: bounds its fp32 block sums to WIDENED_SUM_FLOATS(l). */
#define WIDENED_ROWS 256
#define WIDENED_SUM_FLOATS(l) ((size_t)((l)->kb * WIDENED_ROWS * LINEAR_CHUNK))

/* The widened int8 path: x is fp32 [kb][M][kblock] (zero beyond K); each block's sums (exact integers in
 * fp32) come back in `sums` (the thread's WIDENED_SUM_FLOATS(l) floats) as [kb][rows][n] and are added in
 * int32, block by block. */
static dsops_status run_chunk_int8_widened(const dsops_linear *l, const linear_chunk *c, dnnl_stream_t stream,
                                          const float *x, int64_t M, int32_t *y, int64_t ldy, float *sums)
{
    dsops_status status = DSOPS_OK;
    dnnl_memory_t src = NULL, dst = NULL;
    int nd = l->kb > 1 ? 3 : 2;
    for (int64_t m0 = 0; m0 < M; m0 += WIDENED_ROWS) {
        int64_t mb = M - m0 < WIDENED_ROWS ? M - m0 : WIDENED_ROWS;
        dnnl_memory_desc_t src_md, dst_md;
        dnnl_dims_t src_dims = {l->kb, mb, l->kblock}, dst_dims = {l->kb, mb, c->n};
        dnnl_dims_t src_strides = {M * l->kblock, l->kblock, 1}, dst_strides = {mb * c->n, c->n, 1};
        int o = nd == 3 ? 0 : 1; /* a 2-D map (one block) takes the last two dims */
        DNNL_TRY(dnnl_memory_desc_init_by_strides(&src_md, nd, src_dims + o, dnnl_f32, src_strides + o), "source descriptor");
        DNNL_TRY(dnnl_memory_desc_init_by_strides(&dst_md, nd, dst_dims + o, dnnl_f32, dst_strides + o), "result descriptor");
        DNNL_TRY(dnnl_memory_create(&src, &src_md, l->engine, (void *)(x + m0 * l->kblock)), "source memory");
        DNNL_TRY(dnnl_memory_create(&dst, &dst_md, l->engine, sums), "result memory");
        dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, c->w_mem}, {DNNL_ARG_DST, dst}};
        DNNL_TRY(dnnl_primitive_execute(c->matmul, stream, 3, args), "matmul");
        DNNL_TRY(dnnl_stream_wait(stream), "stream wait");
        dnnl_memory_destroy(src);
        dnnl_memory_destroy(dst);
        src = dst = NULL;
        for (int64_t m = 0; m < mb; m++) {
            int32_t *row = y + (m0 + m) * ldy + c->n0;
            for (int64_t n = 0; n < c->n; n++) {
                int32_t acc = 0;
                for (int64_t b = 0; b < l->kb; b++)
                    acc += (int32_t)sums[(b * mb + m) * c->n + n];
                row[n] = acc;
            }
        }
    }
done:
    if (src)
        dnnl_memory_destroy(src);
    if (dst)
        dnnl_memory_destroy(dst);
    return status;
}

/* Whether job j runs on the row-dot kernels of `k` at M rows. */
static bool use_rowdot(const dsops_linear *l, const dsops_linear_kernels *k, int64_t M)
{
    if (l->path == PATH_OWN)
        return true;
    if (M > ROWDOT_MAX_M || l->stride_k != 1)
        return false;
    return (l->dtype == DSOPS_BF16 && k->rowdot_bf16) || (l->dtype == DSOPS_INT8 && k->rowdot_s8 && l->wsum128);
}

static void run_rowdot(const dsops_linear_kernels *k, const dsops_linear_job *job, const uint8_t *xb, int64_t M,
                       const linear_chunk *c)
{
    const dsops_linear *l = job->l;
    size_t es = dsops_elem_size(l->dtype);
    int64_t ldw = l->rows ? l->K : l->stride_n;
    const char *w = (const char *)(l->rows ? l->rows : l->w) + (size_t)(c->n0 * ldw) * es;
    /* blocks of at most ROWDOT_MAX_M rows (the kernels' decode sizes; PATH_OWN takes any M) */
    for (int64_t m0 = 0; m0 < M; m0 += ROWDOT_MAX_M) {
        int mb = (int)(M - m0 < ROWDOT_MAX_M ? M - m0 : ROWDOT_MAX_M);
        if (l->dtype == DSOPS_BF16 && l->lanes && mb >= LANES_MIN_M && k->rowdot_bf16_lanes)
            k->rowdot_bf16_lanes((const uint16_t *)job->x + m0 * job->ldx, (size_t)job->ldx, mb,
                                 (const uint16_t *)l->lanes + dsops_lanes_at(l->N, l->K, c->n0, 0), (int)c->n,
                                 (int)l->K, (float *)job->y + m0 * job->ldy + c->n0, (size_t)job->ldy);
        else if (l->dtype == DSOPS_INT8 && l->lanes && mb >= LANES_MIN_M_S8 && k->rowdot_s8_lanes)
            k->rowdot_s8_lanes(xb + m0 * l->K, (size_t)l->K, mb,
                               (const int8_t *)l->lanes + dsops_lanes_at(l->N, l->K, c->n0, 0), (int)c->n, (int)l->K,
                               l->wsum128 + c->n0, (int32_t *)job->y + m0 * job->ldy + c->n0, (size_t)job->ldy);
        else if (l->dtype == DSOPS_BF16)
            k->rowdot_bf16((const uint16_t *)job->x + m0 * job->ldx, (size_t)job->ldx, mb, (const uint16_t *)w,
                           (size_t)ldw, (int)c->n, (int)l->K, (float *)job->y + m0 * job->ldy + c->n0, (size_t)job->ldy);
        else
            k->rowdot_s8(xb + m0 * l->K, (size_t)l->K, mb, (const int8_t *)w, (size_t)ldw, (int)c->n, (int)l->K,
                         l->wsum128 + c->n0, (int32_t *)job->y + m0 * job->ldy + c->n0, (size_t)job->ldy);
    }
}

/* Rows per item for maps with few column chunks (a Hadamard over T x heads rows has one): the rows are then
 * split too, in blocks fixed by the shapes alone, so the threads share the work and the result does not
 * depend on the thread count. The widened int8 path keeps whole columns (its activations are blocked by K). */
#define ROW_BLOCK 1024
#define FEW_CHUNKS 4

static int64_t row_blocks(const dsops_linear *l, const dsops_linear_kernels *k, int64_t M)
{
    bool split = l->nchunks < FEW_CHUNKS && M > ROW_BLOCK && !use_rowdot(l, k, M) &&
                 !(l->path == PATH_WIDENED && l->dtype == DSOPS_INT8);
    return split ? (M + ROW_BLOCK - 1) / ROW_BLOCK : 1;
}

dsops_status dsops_linear_run(dsops_context *ctx, const dsops_linear_job *jobs, int njobs, int64_t M, int threads,
                              dsops_isa isa)
{
    if (M <= 0 || njobs <= 0)
        return DSOPS_OK;
    const dsops_linear_kernels *rk = &dsops_kernel_table_get(isa)->linear;
    int64_t items = 0;
    size_t biased_bytes = 0, widened_floats = 0, sum_floats = 0;
    for (int j = 0; j < njobs; j++) {
        items += jobs[j].l->nchunks * row_blocks(jobs[j].l, rk, M);
        if (use_rowdot(jobs[j].l, rk, M) && jobs[j].l->dtype == DSOPS_INT8)
            biased_bytes += (size_t)(M * jobs[j].l->K);
        if (!use_rowdot(jobs[j].l, rk, M) && jobs[j].l->path == PATH_WIDENED)
            widened_floats += (size_t)(M * jobs[j].l->kb * jobs[j].l->kblock);
        if (!use_rowdot(jobs[j].l, rk, M) && jobs[j].l->path == PATH_WIDENED && jobs[j].l->dtype == DSOPS_INT8 &&
            WIDENED_SUM_FLOATS(jobs[j].l) > sum_floats)
            sum_floats = WIDENED_SUM_FLOATS(jobs[j].l);
    }
    if (threads > items)
        threads = (int)items;
    /* one scratch area: per job its row blocks and activation pointers; the widened path's fp32 activations
     * (one exact copy per job, shared by its chunks), each thread's block sums (widened int8), the int8
     * row-dot kernels' x + 128 as unsigned bytes */
    const size_t jobs_bytes = dsops_align64((sizeof(int64_t) + 2 * sizeof(void *)) * (size_t)njobs);
    const size_t widened_at = jobs_bytes, sums_at = widened_at + dsops_align64(sizeof(float) * widened_floats);
    const size_t biased_at = sums_at + dsops_align64(sizeof(float) * sum_floats) * (size_t)threads;
    char *area = dsops_scratch_matmul(ctx, biased_at + biased_bytes);
    if (!area)
        return dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate the activations of %d matmul jobs", njobs);
    int64_t *nrb = (int64_t *)area; /* row blocks per job */
    const uint8_t **xb = (const uint8_t **)(nrb + njobs);
    const float **xf = (const float **)(xb + njobs);
    float *widened = (float *)(area + widened_at);
    uint8_t *biased = (uint8_t *)(area + biased_at);
    for (int j = 0; j < njobs; j++)
        nrb[j] = row_blocks(jobs[j].l, rk, M), xb[j] = NULL, xf[j] = NULL;
    for (size_t j = 0, off = 0; j < (size_t)njobs; j++) {
        const dsops_linear *l = jobs[j].l;
        if (!(use_rowdot(l, rk, M) && l->dtype == DSOPS_INT8))
            continue;
        uint8_t *dst = biased + off;
        for (int64_t m = 0; m < M; m++)
            for (int64_t k = 0; k < l->K; k++)
                dst[m * l->K + k] = (uint8_t)(((const int8_t *)jobs[j].x)[m * jobs[j].ldx + k] ^ 0x80);
        xb[j] = dst;
        off += (size_t)(M * l->K);
    }
    for (size_t j = 0, off = 0; j < (size_t)njobs; j++) {
        const dsops_linear *l = jobs[j].l;
        if (use_rowdot(l, rk, M) || l->path != PATH_WIDENED)
            continue;
        float *dst = widened + off;
        for (int64_t m = 0; m < M; m++) {
            if (l->dtype == DSOPS_BF16) {
                dsops_bf16_to_fp32((const uint16_t *)jobs[j].x + m * jobs[j].ldx, dst + m * l->K, (size_t)l->K);
                continue;
            }
            /* int8: [kb][M][kblock], zero beyond K */
            const int8_t *xr = (const int8_t *)jobs[j].x + m * jobs[j].ldx;
            for (int64_t k = 0; k < l->kb * l->kblock; k++)
                dst[((k / l->kblock) * M + m) * l->kblock + k % l->kblock] = k < l->K ? (float)xr[k] : 0.0f;
        }
        xf[j] = dst;
        off += (size_t)(M * l->kb * l->kblock);
    }
    dsops_status status = DSOPS_OK;
    char message[512] = "";
    /* (job, chunk) items on the library's threads; each task caps its own nested parallelism at one
     * thread, so oneDNN never adds threads and the chunking alone fixes the arithmetic */
#pragma omp parallel num_threads(threads)
    {
#ifdef _OPENMP
        omp_set_num_threads(1);
#endif
        dnnl_stream_t stream = NULL; /* one stream per thread and call (all maps share the CPU engine kind) */
        dsops_status mine = DSOPS_OK;
        dnnl_status_t st = dnnl_stream_create(&stream, jobs[0].l->engine, dnnl_stream_default_flags);
        if (st != dnnl_success)
            mine = dnnl_failed(st, "stream");
        float *sums = sum_floats ? (float *)(area + sums_at + dsops_align64(sizeof(float) * sum_floats) *
                                                             (size_t)dsops_thread_num())
                                 : NULL; /* the widened int8 path's */
#pragma omp for schedule(dynamic, 1)
        for (int64_t item = 0; item < items; item++) {
            if (mine != DSOPS_OK)
                continue;
            int j = 0;
            int64_t i = item;
            while (i >= jobs[j].l->nchunks * nrb[j]) {
                i -= jobs[j].l->nchunks * nrb[j];
                j++;
            }
            const dsops_linear_job *job = &jobs[j];
            const linear_chunk *c = &job->l->chunks[i % job->l->nchunks];
            /* rows [m0, m0 + mb) of the job: all of them unless it is split in row blocks */
            int64_t m0 = nrb[j] > 1 ? i / job->l->nchunks * ROW_BLOCK : 0;
            int64_t mb = nrb[j] > 1 ? (M - m0 < ROW_BLOCK ? M - m0 : ROW_BLOCK) : M;
            void *y = (char *)job->y + (size_t)(m0 * job->ldy) * 4; /* fp32 or int32 results */
            if (use_rowdot(job->l, rk, M))
                run_rowdot(rk, job, xb[j], M, c);
            else if (xf[j])
                mine = run_chunk(job->l, c, stream, xf[j] + m0 * job->l->K, mb, job->l->K, y, job->ldy, sums);
            else
                mine = run_chunk(job->l, c, stream, (const char *)job->x + (size_t)(m0 * job->ldx) * dsops_elem_size(job->l->dtype),
                                 mb, job->ldx, y, job->ldy, sums);
        }
        if (stream) {
            if (dnnl_stream_wait(stream) != dnnl_success && mine == DSOPS_OK)
                mine = dsops_fail(DSOPS_ERR_UNSUPPORTED, "oneDNN stream wait failed");
            dnnl_stream_destroy(stream);
        }
        if (mine != DSOPS_OK) {
#pragma omp critical(dsops_linear_status)
            {
                status = mine;
                /* the message is thread-local: carry the worker's to the calling thread */
                snprintf(message, sizeof message, "%s", dsops_last_error());
            }
        }
    }
    if (status != DSOPS_OK)
        return dsops_fail(status, "%s", message);
    return status;
}

dsops_status dsops_matmul_path(dsops_isa isa, dsops_dtype dtype, char *text, size_t size)
{
    if (!text || size == 0)
        return dsops_fail(DSOPS_ERR_NULL, "text is NULL or size is 0");
    if (dtype != DSOPS_BF16 && dtype != DSOPS_INT8 && dtype != DSOPS_FP32)
        return dsops_fail(DSOPS_ERR_DTYPE, "dtype = %s: matmul weights are bf16, int8 or fp32", dsops_dtype_name(dtype));
    dsops_linear_engine *e;
    DSOPS_TRY(dsops_linear_engine_create(&e));
    linear_path path = choose_path(e->engine, dtype);
    dsops_linear_engine_destroy(e);
    const dsops_kernel_table *t = dsops_kernel_table_get(isa);
    bool rowdot = dtype == DSOPS_BF16 ? t->linear.rowdot_bf16 != NULL : dtype == DSOPS_INT8 && t->linear.rowdot_s8;
    const char *tier = dsops_isa_name(t->isa), *name = dsops_dtype_name(dtype);
    if (path == PATH_OWN)
        snprintf(text, size, "row-dot kernels (%s) at every size: oneDNN has no %s matmul on this CPU", tier, name);
    else if (path == PATH_WIDENED)
        snprintf(text, size, "%s%s%soneDNN fp32 matmul on weights widened once (%s)",
                 rowdot ? "up to 16 rows: row-dot kernels (" : "", rowdot ? tier : "", rowdot ? "); more: " : "",
                 dtype == DSOPS_BF16 ? "oneDNN has no bf16 matmul on this CPU"
                                     : "int8 in blocks of 1024 of K; oneDNN's int8 matmul saturates without VNNI");
    else
        snprintf(text, size, "%s%s%soneDNN %s matmul", rowdot ? "up to 16 rows: row-dot kernels (" : "",
                 rowdot ? tier : "", rowdot ? "); more: " : "", name);
    dsops_clear_error();
    return DSOPS_OK;
}
