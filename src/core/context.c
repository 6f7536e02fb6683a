/* The context: thread count, instruction-set cap, scratch arena. */
#include <errno.h>
#include <stdlib.h>
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

dsops_status dsops_context_create(dsops_context **out)
{
    if (!out)
        return dsops_fail(DSOPS_ERR_NULL, "ctx is NULL");
    *out = NULL;
    int threads = 1;
    DSOPS_TRY(parse_env_threads(&threads));
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

dsops_status dsops_context_begin(dsops_context *ctx, dsops_context **use)
{
    if (ctx) {
        *use = ctx;
        return DSOPS_OK;
    }
    return dsops_context_create(use);
}

void dsops_context_end(dsops_context *ctx, dsops_context *use)
{
    if (use != ctx)
        dsops_context_destroy(use);
}

static void *grow(void **area, size_t *have, size_t bytes)
{
    bytes = dsops_align64(bytes ? bytes : 64);
    if (*have >= bytes)
        return *area;
    free(*area);
    *area = aligned_alloc(64, bytes);
    *have = *area ? bytes : 0;
    if (!*area)
        dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate %zu bytes of scratch", bytes);
    return *area;
}

void *dsops_scratch(dsops_context *ctx, size_t bytes) { return grow(&ctx->scratch, &ctx->scratch_bytes, bytes); }

void *dsops_scratch_outer(dsops_context *ctx, size_t bytes) { return grow(&ctx->outer, &ctx->outer_bytes, bytes); }

void *dsops_scratch_matmul(dsops_context *ctx, size_t bytes)
{
    return grow(&ctx->matmul, &ctx->matmul_bytes, bytes);
}
