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

struct dsops_linear {
    dnnl_engine_t engine;           /* the shared engine's */
    const void *w;              /* identity of the source weights */
    dsops_dtype dtype;
    int64_t N, K, stride_n, stride_k;
    int nchunks;
    linear_chunk *chunks;
    int32_t *wsum128;               /* int8 with stride_k 1: 128 * sum_k W[n][k], for the row-dot path */
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
    return l->dtype == DSOPS_BF16 ? dnnl_bf16 : l->dtype == DSOPS_FP32 ? dnnl_f32 : dnnl_s8;
}
static dnnl_data_type_t result_type(const dsops_linear *l) { return l->dtype == DSOPS_INT8 ? dnnl_s32 : dnnl_f32; }

/* Creates chunk c's matmul and packs its weights. */
static dsops_status make_chunk(const dsops_linear *l, linear_chunk *c)
{
    dsops_status status = DSOPS_OK;
    dnnl_memory_desc_t src_md, dst_md, w_any, w_plain;
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd = NULL, rpd = NULL;
    dnnl_primitive_t reorder = NULL;
    dnnl_memory_t from = NULL, to = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_dims_t src_dims = {DNNL_RUNTIME_DIM_VAL, l->K}, w_dims = {l->K, c->n}, dst_dims = {DNNL_RUNTIME_DIM_VAL, c->n};
    dnnl_dims_t runtime_rows = {DNNL_RUNTIME_DIM_VAL, 1};
    dnnl_dims_t w_strides = {l->stride_k, l->stride_n}; /* W^T: element (k, n) at k * stride_k + n * stride_n */
    DNNL_TRY(dnnl_memory_desc_init_by_strides(&src_md, 2, src_dims, weight_type(l), runtime_rows), "source descriptor");
    DNNL_TRY(dnnl_memory_desc_init_by_strides(&dst_md, 2, dst_dims, result_type(l), runtime_rows), "result descriptor");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&w_any, 2, w_dims, weight_type(l), dnnl_format_tag_any), "weights descriptor");
    DNNL_TRY(dnnl_memory_desc_init_by_strides(&w_plain, 2, w_dims, weight_type(l), w_strides), "weights descriptor");
    DNNL_TRY(dnnl_matmul_desc_init(&desc, &src_md, &w_any, NULL, &dst_md), "matmul descriptor");
    DNNL_TRY(dnnl_primitive_desc_create(&pd, &desc, NULL, l->engine, NULL), "matmul primitive descriptor");
    c->w_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const char *src = (const char *)l->w + (size_t)(c->n0 * l->stride_n) * dsops_elem_size(l->dtype);
    if (dnnl_memory_desc_equal(&w_plain, &c->w_md)) {
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

dsops_status dsops_linear_create(dsops_linear_engine *e, const void *w, dsops_dtype dtype, int64_t N, int64_t K,
                                 int64_t stride_n, int64_t stride_k, dsops_linear **out)
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
    if (!l->chunks) {
        dsops_linear_destroy(l);
        return dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate a linear map");
    }
    dsops_status status = DSOPS_OK;
    /* packing is as costly as a few calls: spread it over the threads */
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < l->nchunks; i++) {
#ifdef _OPENMP
        omp_set_num_threads(1); /* this task's setting: oneDNN's nested regions stay single-threaded */
#endif
        linear_chunk *c = &l->chunks[i];
        c->n0 = (int64_t)i * LINEAR_CHUNK;
        c->n = N - c->n0 < LINEAR_CHUNK ? N - c->n0 : LINEAR_CHUNK;
        dsops_status s = make_chunk(l, c);
        if (s != DSOPS_OK) {
#pragma omp critical(dsops_linear_status)
            status = s;
        }
    }
    if (status == DSOPS_OK && dtype == DSOPS_INT8 && stride_k == 1) {
        l->wsum128 = malloc(sizeof *l->wsum128 * (size_t)N);
        if (!l->wsum128)
            status = dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate %lld row sums", (long long)N);
        for (int64_t n = 0; status == DSOPS_OK && n < N; n++) {
            const int8_t *row = (const int8_t *)w + n * stride_n;
            uint32_t sum = 0;
            for (int64_t k = 0; k < K; k++)
                sum += (uint32_t)(int32_t)row[k];
            l->wsum128[n] = (int32_t)(sum * 128u);
        }
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

dsops_status dsops_prepared_make(const char *op, const dsops_linear_source *src, int count, dsops_prepared **out)
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
                                &p->maps[k]);
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
                                     int count, const dsops_prepared **use, dsops_prepared **own)
{
    *own = NULL;
    *use = given;
    if (given)
        return DSOPS_OK;
    DSOPS_TRY(dsops_prepared_make(op, src, count, own));
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
static dsops_status run_chunk(const dsops_linear *l, const linear_chunk *c, dnnl_stream_t stream, const void *x,
                              int64_t M, int64_t ldx, void *y, int64_t ldy)
{
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

/* Whether job j runs on the row-dot kernels of `k` at M rows. */
static bool use_rowdot(const dsops_linear *l, const dsops_linear_kernels *k, int64_t M)
{
    if (M > ROWDOT_MAX_M || l->stride_k != 1)
        return false;
    return (l->dtype == DSOPS_BF16 && k->rowdot_bf16) || (l->dtype == DSOPS_INT8 && k->rowdot_s8 && l->wsum128);
}

static void run_rowdot(const dsops_linear_kernels *k, const dsops_linear_job *job, const uint8_t *xb, int64_t M,
                       const linear_chunk *c)
{
    const dsops_linear *l = job->l;
    size_t es = dsops_elem_size(l->dtype);
    const char *w = (const char *)l->w + (size_t)(c->n0 * l->stride_n) * es;
    if (l->dtype == DSOPS_BF16)
        k->rowdot_bf16((const uint16_t *)job->x, (size_t)job->ldx, (int)M, (const uint16_t *)w, (size_t)l->stride_n,
                       (int)c->n, (int)l->K, (float *)job->y + c->n0, (size_t)job->ldy);
    else
        k->rowdot_s8(xb, (size_t)l->K, (int)M, (const int8_t *)w, (size_t)l->stride_n, (int)c->n, (int)l->K,
                     l->wsum128 + c->n0, (int32_t *)job->y + c->n0, (size_t)job->ldy);
}

dsops_status dsops_linear_run(const dsops_linear_job *jobs, int njobs, int64_t M, int threads, dsops_isa isa)
{
    if (M <= 0 || njobs <= 0)
        return DSOPS_OK;
    const dsops_linear_kernels *rk = &dsops_kernel_table_get(isa)->linear;
    int64_t items = 0;
    size_t biased_bytes = 0;
    for (int j = 0; j < njobs; j++) {
        items += jobs[j].l->nchunks;
        if (use_rowdot(jobs[j].l, rk, M) && jobs[j].l->dtype == DSOPS_INT8)
            biased_bytes += (size_t)(M * jobs[j].l->K);
    }
    if (threads > items)
        threads = (int)items;
    /* the int8 row-dot kernels take x + 128 as unsigned bytes: one biased copy per job */
    uint8_t *biased = biased_bytes ? malloc(biased_bytes) : NULL;
    if (biased_bytes && !biased)
        return dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate %zu bytes of biased activations", biased_bytes);
    const uint8_t **xb = calloc((size_t)njobs, sizeof *xb);
    if (!xb) {
        free(biased);
        return dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate %d job records", njobs);
    }
    for (int j = 0, off = 0; j < njobs; j++) {
        const dsops_linear *l = jobs[j].l;
        if (!(use_rowdot(l, rk, M) && l->dtype == DSOPS_INT8))
            continue;
        uint8_t *dst = biased + off;
        for (int64_t m = 0; m < M; m++)
            for (int64_t k = 0; k < l->K; k++)
                dst[m * l->K + k] = (uint8_t)(((const int8_t *)jobs[j].x)[m * jobs[j].ldx + k] ^ 0x80);
        xb[j] = dst;
        off += (int)(M * l->K);
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
#pragma omp for schedule(dynamic, 1)
        for (int64_t item = 0; item < items; item++) {
            if (mine != DSOPS_OK)
                continue;
            int j = 0;
            int64_t i = item;
            while (i >= jobs[j].l->nchunks)
                i -= jobs[j++].l->nchunks;
            const dsops_linear_job *job = &jobs[j];
            if (use_rowdot(job->l, rk, M))
                run_rowdot(rk, job, xb[j], M, &job->l->chunks[i]);
            else
                mine = run_chunk(job->l, &job->l->chunks[i], stream, job->x, M, job->ldx, job->y, job->ldy);
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
    free(xb);
    free(biased);
    if (status != DSOPS_OK)
        return dsops_fail(status, "%s", message);
    return status;
}
