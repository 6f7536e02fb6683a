/* The context: thread count, instruction-set cap, scratch arena. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "internal.h"

static dsops_status parse_env_threads(int *threads)
{
    const char *v = getenv("DSOPS_NUM_THREADS");
    if (!v || !*v) {
#ifdef _OPENMP
        *threads = omp_get_max_threads();
#else
        *threads = 1;
#endif
        return DSOPS_OK;
    }
    char *end = NULL;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || n < 1 || n > DSOPS_MAX_THREADS)
        return dsops_fail(DSOPS_ERR_PARAM, "DSOPS_NUM_THREADS = \"%.32s\" is not a thread count in [1, %d]", v,
                          DSOPS_MAX_THREADS);
    *threads = (int)n;
    return DSOPS_OK;
}

dsops_status dsops_context_thread_count(const dsops_context *ctx, int *threads)
{
    if (ctx) {
        *threads = ctx->threads;
        return DSOPS_OK;
    }
    return parse_env_threads(threads);
}

static size_t default_scratch_limit(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return (size_t)1 << 32; /* unknown: 4 GiB */
    return (size_t)pages / 2 * (size_t)page;
}

/* "123", "64K", "512M", "8G" (powers of 1024) */
static dsops_status parse_env_scratch_limit(size_t *limit)
{
    const char *v = getenv("DSOPS_SCRATCH_LIMIT");
    if (!v || !*v) {
        *limit = default_scratch_limit();
        return DSOPS_OK;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    int shift = 0;
    if (end != v && *end) {
        switch (*end) {
        case 'K': case 'k': shift = 10; break;
        case 'M': case 'm': shift = 20; break;
        case 'G': case 'g': shift = 30; break;
        default: shift = -1;
        }
        end++;
    }
    if (errno || end == v || *end || shift < 0 || *v == '-' || n == 0 || n > (SIZE_MAX >> shift))
        return dsops_fail(DSOPS_ERR_PARAM,
                          "DSOPS_SCRATCH_LIMIT = \"%.32s\" is not a byte count >= 1 (digits with an optional K, M or G)", v);
    *limit = (size_t)n << shift;
    return DSOPS_OK;
}

dsops_status dsops_context_create(dsops_context **out)
{
    if (!out)
        return dsops_fail(DSOPS_ERR_NULL, "ctx is NULL");
    *out = NULL;
    int threads = 1;
    DSOPS_TRY(parse_env_threads(&threads));
    size_t limit = 0;
    DSOPS_TRY(parse_env_scratch_limit(&limit));
    dsops_isa isa = dsops_isa_detected();
    const char *v = getenv("DSOPS_ISA");
    if (v && *v) {
        dsops_isa cap;
        if (dsops_isa_from_name(v, &cap) != DSOPS_OK)
            return dsops_fail(DSOPS_ERR_PARAM, "DSOPS_ISA = \"%s\" is not one of scalar, avx2, avx512, avx512bf16", v);
        if (cap < isa)
            isa = cap;
    }
    dsops_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate a context");
    ctx->threads = threads;
    ctx->isa = isa;
    ctx->scratch_limit = limit;
    atomic_init(&ctx->owner, NULL);
    *out = ctx;
    dsops_clear_error();
    return DSOPS_OK;
}

void dsops_context_destroy(dsops_context *ctx)
{
    if (!ctx)
        return;
    free(ctx->scratch);
    free(ctx->outer);
    free(ctx->matmul);
    free(ctx);
}

dsops_status dsops_context_set_threads(dsops_context *ctx, int threads)
{
    if (!ctx)
        return dsops_fail(DSOPS_ERR_NULL, "ctx is NULL");
    if (threads < 1 || threads > DSOPS_MAX_THREADS)
        return dsops_fail(DSOPS_ERR_PARAM, "threads = %d, expected a count in [1, %d]", threads, DSOPS_MAX_THREADS);
    ctx->threads = threads;
    dsops_clear_error();
    return DSOPS_OK;
}

int dsops_context_threads(const dsops_context *ctx) { return ctx ? ctx->threads : 0; }

dsops_status dsops_context_set_isa(dsops_context *ctx, dsops_isa cap)
{
    if (!ctx)
        return dsops_fail(DSOPS_ERR_NULL, "ctx is NULL");
    if ((int)cap < 0 || (int)cap >= DSOPS_ISA_COUNT)
        return dsops_fail(DSOPS_ERR_PARAM, "isa = %d is not a dsops_isa value", (int)cap);
    dsops_isa det = dsops_isa_detected();
    ctx->isa = cap < det ? cap : det;
    dsops_clear_error();
    return DSOPS_OK;
}

dsops_isa dsops_context_isa(const dsops_context *ctx) { return ctx ? ctx->isa : dsops_isa_detected(); }

dsops_status dsops_context_set_scratch_limit(dsops_context *ctx, size_t bytes)
{
    if (!ctx)
        return dsops_fail(DSOPS_ERR_NULL, "ctx is NULL");
    if (bytes == 0)
        return dsops_fail(DSOPS_ERR_PARAM, "scratch limit = 0, expected at least 1 byte");
    ctx->scratch_limit = bytes;
    dsops_clear_error();
    return DSOPS_OK;
}

size_t dsops_context_scratch_limit(const dsops_context *ctx) { return ctx ? ctx->scratch_limit : 0; }

/* Identifies the calling thread: the address of a thread-local byte is unique among live threads. */
static _Thread_local char this_thread;

dsops_status dsops_context_begin(dsops_context *ctx, dsops_context **use)
{
    if (!ctx)
        return dsops_context_create(use);
    const void *expected = NULL;
    if (atomic_compare_exchange_strong(&ctx->owner, &expected, (const void *)&this_thread)) {
        ctx->depth = 1;
    } else if (expected == &this_thread) {
        ctx->depth++; /* a fused operator's stage on the caller's own context */
    } else {
        /* without this check two calls would share (and reallocate) one scratch area */
        return dsops_fail(DSOPS_ERR_BUSY, "ctx is serving a call of another thread; a context serves one call at "
                                          "a time: give each calling thread its own context");
    }
    *use = ctx;
    return DSOPS_OK;
}

void dsops_context_end(dsops_context *ctx, dsops_context *use)
{
    if (use != ctx) {
        dsops_context_destroy(use);
        return;
    }
    if (--ctx->depth == 0)
        atomic_store(&ctx->owner, NULL);
}

/* Grows one of the context's areas to `bytes`, within the limit on all areas together. */
static void *grow(dsops_context *ctx, void **area, size_t *have, size_t bytes, const char *what)
{
    bytes = dsops_align64(bytes ? bytes : 64);
    if (*have >= bytes)
        return *area;
    size_t others = ctx->scratch_bytes + ctx->outer_bytes + ctx->matmul_bytes - *have;
    if (bytes > ctx->scratch_limit || others > ctx->scratch_limit - bytes) {
        dsops_fail(DSOPS_ERR_NOMEM,
                   "the call needs %zu bytes of %s scratch (the context holds %zu more), beyond the context's scratch "
                   "limit of %zu bytes (dsops_context_set_scratch_limit, DSOPS_SCRATCH_LIMIT)",
                   bytes, what, others, ctx->scratch_limit);
        return NULL;
    }
    free(*area);
    *area = aligned_alloc(64, bytes);
    *have = *area ? bytes : 0;
    if (!*area)
        dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate %zu bytes of %s scratch", bytes, what);
    return *area;
}

void *dsops_scratch(dsops_context *ctx, size_t bytes)
{
    return grow(ctx, &ctx->scratch, &ctx->scratch_bytes, bytes, "operator");
}

void *dsops_scratch_outer(dsops_context *ctx, size_t bytes)
{
    return grow(ctx, &ctx->outer, &ctx->outer_bytes, bytes, "fused-operator");
}

void *dsops_scratch_matmul(dsops_context *ctx, size_t bytes)
{
    return grow(ctx, &ctx->matmul, &ctx->matmul_bytes, bytes, "matmul");
}
