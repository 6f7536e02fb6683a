/* The matmul layer (src/core/linear.c) on every tier and row count against exact sums: int8 maps must give the
 * exact int32 dot products (at the int8 extremes too, where oneDNN's int8 kernels without VNNI saturate), bf16
 * maps the fp32 sum of exact products within the spread of fp32 summation orders. Covers the decode row-dot
 * kernels (up to 16 rows), the matmul path above that, K around the widened int8 path's 1024-value blocks,
 * partial column chunks, maps whose rows are split in blocks, transposed weights, and results independent of
 * the thread count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#include "internal.h"
#include "linear.h"
#include "test_util.h"

typedef struct shape {
    int M, K, N;
    int transposed; /* weights given as [K, N] (stride_n 1) */
} shape;

static const shape shapes[] = {
    {1, 64, 16, 0},   {3, 100, 33, 0},  {16, 257, 300, 0}, {17, 257, 300, 0}, {40, 1024, 260, 0},
    {5, 1025, 70, 0}, {33, 2100, 64, 0}, {2, 96, 40, 1},   {24, 130, 513, 1},
    {2500, 64, 130, 0}, {1100, 96, 40, 1}, /* few column chunks, many rows: rows split in fixed blocks */
};

/* Fills int8 values: random, or every value at an extreme (+127 / -128 in a pattern per row). */
static void fill_int8(int8_t *v, size_t n, tu_rng *r, int extreme)
{
    for (size_t i = 0; i < n; i++)
        v[i] = extreme ? (int8_t)((tu_rng_u64(r) & 1) ? 127 : -128) : (int8_t)tu_rng_int(r, -128, 127);
}

/* Makes a map of W (dtype dt; [N, K], or [K, N] when transposed) and runs it on x at 1 thread into y1 and at 3
 * into y2. Returns 0 after a failed check. */
static int run_map(const shape *s, dsops_dtype dt, const void *w, const void *x, void *y1, void *y2, dsops_isa isa,
                   const char *label)
{
    int64_t sn = s->transposed ? 1 : s->K, sk = s->transposed ? s->N : 1;
    dsops_linear_engine *e = NULL;
    dsops_linear *l = NULL;
    dsops_context *ctx = NULL;
    int ok = tu_check(dsops_context_create(&ctx) == DSOPS_OK && dsops_linear_engine_create(&e) == DSOPS_OK &&
                          dsops_linear_create(e, w, dt, s->N, s->K, sn, sk, 2, &l) == DSOPS_OK,
                      "%s: map not made (%s)", label, dsops_last_error());
    if (ok) {
        dsops_linear_job j1 = {l, x, s->K, y1, s->N}, j2 = {l, x, s->K, y2, s->N};
        ok = tu_check(dsops_linear_run(ctx, &j1, 1, s->M, 1, isa) == DSOPS_OK &&
                          dsops_linear_run(ctx, &j2, 1, s->M, 3, isa) == DSOPS_OK,
                      "%s: run failed (%s)", label, dsops_last_error());
    }
    dsops_linear_destroy(l);
    dsops_linear_engine_destroy(e);
    dsops_context_destroy(ctx);
    return ok;
}

static void check_int8(const shape *s, int extreme, tu_rng *r, dsops_isa isa)
{
    int M = s->M, K = s->K, N = s->N;
    int8_t *w = malloc((size_t)N * K), *x = malloc((size_t)M * K);
    int32_t *y1 = malloc(sizeof(int32_t) * (size_t)M * N), *y2 = malloc(sizeof(int32_t) * (size_t)M * N);
    fill_int8(w, (size_t)N * K, r, extreme);
    fill_int8(x, (size_t)M * K, r, extreme);
    int64_t sn = s->transposed ? 1 : K, sk = s->transposed ? N : 1;
    char label[128];
    snprintf(label, sizeof label, "int8%s M %d K %d N %d%s [%s]", extreme ? " extremes" : "", M, K, N,
             s->transposed ? " transposed" : "", dsops_isa_name(isa));
    if (!run_map(s, DSOPS_INT8, w, x, y1, y2, isa, label))
        goto done;
    long bad = 0, first = -1;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            int64_t exact = 0;
            for (int k = 0; k < K; k++)
                exact += (int64_t)x[(size_t)m * K + k] * w[n * sn + k * sk];
            if (exact != y1[(size_t)m * N + n]) {
                bad++;
                first = first < 0 ? (long)m * N + n : first;
            }
        }
    tu_check(bad == 0, "%s: %ld of %d sums differ from the exact ones (first at %ld)", label, bad, M * N, first);
    tu_check(memcmp(y1, y2, sizeof(int32_t) * (size_t)M * N) == 0, "%s: 1 and 3 threads differ", label);
done:
    free(w), free(x), free(y1), free(y2);
}

static void check_bf16(const shape *s, tu_rng *r, dsops_isa isa)
{
    int M = s->M, K = s->K, N = s->N;
    uint16_t *w = malloc(2 * (size_t)N * K), *x = malloc(2 * (size_t)M * K);
    float *y1 = malloc(sizeof(float) * (size_t)M * N), *y2 = malloc(sizeof(float) * (size_t)M * N);
    for (size_t i = 0; i < (size_t)N * K; i++)
        w[i] = dsops_bf16_round_bits(tu_rng_uniform(r, -1.0f, 1.0f));
    for (size_t i = 0; i < (size_t)M * K; i++)
        x[i] = dsops_bf16_round_bits(tu_rng_uniform(r, -1.0f, 1.0f));
    int64_t sn = s->transposed ? 1 : K, sk = s->transposed ? N : 1;
    char label[128];
    snprintf(label, sizeof label, "bf16 M %d K %d N %d%s [%s]", M, K, N, s->transposed ? " transposed" : "",
             dsops_isa_name(isa));
    if (!run_map(s, DSOPS_BF16, w, x, y1, y2, isa, label))
        goto done;
    double worst = 0.0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double exact = 0.0, mag = 0.0;
            for (int k = 0; k < K; k++) {
                double p = (double)dsops_bf16_value(x[(size_t)m * K + k]) * dsops_bf16_value(w[n * sn + k * sk]);
                exact += p;
                mag += fabs(p);
            }
            /* any fp32 summation order: |error| <= K * 2^-24 * sum |p| (first-order bound) */
            double err = fabs(exact - y1[(size_t)m * N + n]) / (K * 0x1p-24 * mag + 1e-30);
            worst = err > worst ? err : worst;
        }
    tu_check(worst <= 1.0, "%s: error %.2f x the fp32 summation bound", label, worst);
    tu_check(memcmp(y1, y2, sizeof(float) * (size_t)M * N) == 0, "%s: 1 and 3 threads differ", label);
done:
    free(w), free(x), free(y1), free(y2);
}

/* Packing runs on the thread count the caller passes (a context's), not the OpenMP default. */
static void check_pack_threads(void)
{
    enum { N = 3000, K = 64 }; /* a dozen column chunks */
    uint16_t *w = tu_calloc((size_t)N * K, sizeof *w); /* [N, K] bf16 zeros */
    dsops_linear_engine *e = NULL;
    if (!tu_check(dsops_linear_engine_create(&e) == DSOPS_OK, "engine (%s)", dsops_last_error()))
        return;
    for (int threads = 1; threads <= 3; threads++) {
        dsops_linear *l = NULL;
        if (tu_check(dsops_linear_create(e, w, DSOPS_BF16, N, K, K, 1, threads, &l) == DSOPS_OK, "pack (%s)",
                     dsops_last_error()))
            tu_check(dsops_linear_pack_threads(l) == threads, "packing asked for %d threads, ran on %d", threads,
                     dsops_linear_pack_threads(l));
        dsops_linear_destroy(l);
    }
    dsops_linear_engine_destroy(e);
    free(w);
}

/* A packing failure on a worker thread reaches the caller with its message: a fresh process of this program
 * (the OpenMP runtime does not survive a bare fork) caps its address space a little above what it uses, then
 * packs a large map on 2 threads, which runs out of memory on whichever thread gets there first; every try must
 * give an error status and a non-empty message. */
#define WORKER_ERROR_CHILD "--worker-error-child"

static int worker_error_child(void)
{
    enum { N = 8192, K = 4096, TRIES = 6 };
    uint16_t *w = calloc((size_t)N * K, sizeof *w); /* [N, K] bf16 */
    dsops_linear_engine *e = NULL;
    dsops_linear *l = NULL;
    if (!w || dsops_linear_engine_create(&e) != DSOPS_OK ||
        dsops_linear_create(e, w, DSOPS_BF16, 512, K, K, 1, 2, &l) != DSOPS_OK) /* threads started before the cap */
        return 3;
    dsops_linear_destroy(l);
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld", &pages) != 1)
        return 3;
    fclose(f);
    rlim_t cap_bytes = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)48 << 20);
    struct rlimit cap = {cap_bytes, cap_bytes};
    if (setrlimit(RLIMIT_AS, &cap) != 0)
        return 3;
    for (int i = 0; i < TRIES; i++) {
        dsops_clear_error();
        if (dsops_linear_create(e, w, DSOPS_BF16, N, K, K, 1, 2, &l) == DSOPS_OK)
            return 4; /* the cap did not bite */
        if (dsops_last_error()[0] == '\0')
            return 5;
    }
    return 0;
}

static void check_worker_error_message(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    printf("worker error message: skipped (a sanitizer reserves the address space this check caps)\n");
#else
    char *child_argv[] = {"test_linear", WORKER_ERROR_CHILD, NULL};
    pid_t pid;
    if (!tu_check(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, child_argv, environ) == 0,
                  "worker error message: cannot start a child process"))
        return;
    int status = 0;
    waitpid(pid, &status, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
    tu_check(code == 0 || code == 4, "worker error message: %s (child exit %d)",
             code == 5 ? "a packing failure reached the caller without its message" : "the check could not run", code);
    if (code == 0 || code == 4)
        printf("worker error message: %s\n", code == 0 ? "every failure carried its message" : "the cap did not bite; not checked");
#endif
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], WORKER_ERROR_CHILD) == 0)
        return worker_error_child();
    tu_init(argc, argv, 17);
    if (tu_selected("pack_threads"))
        check_pack_threads();
    if (tu_selected("worker_error"))
        check_worker_error_message();
    tu_rng r;
    tu_rng_seed(&r, tu_seed());
    char path[256];
    for (int isa = DSOPS_ISA_SCALAR; isa <= (int)dsops_isa_detected(); isa++) {
        for (int dt = 0; dt < 2; dt++)
            if (dsops_matmul_path((dsops_isa)isa, dt ? DSOPS_INT8 : DSOPS_BF16, path, sizeof path) == DSOPS_OK)
                printf("[%s] matmul %s: %s\n", dsops_isa_name((dsops_isa)isa), dt ? "int8" : "bf16", path);
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            if (!tu_selected("linear") || (tu_quick() && shapes[i].M * shapes[i].K * shapes[i].N > 1 << 21))
                continue;
            check_int8(&shapes[i], 0, &r, (dsops_isa)isa);
            check_int8(&shapes[i], 1, &r, (dsops_isa)isa);
            check_bf16(&shapes[i], &r, (dsops_isa)isa);
        }
    }
    char text[8];
    tu_check(dsops_matmul_path(DSOPS_ISA_SCALAR, DSOPS_FP16, text, sizeof text) == DSOPS_ERR_DTYPE,
             "matmul_path refuses fp16 weights");
    tu_check(dsops_matmul_path(DSOPS_ISA_SCALAR, DSOPS_BF16, NULL, 0) == DSOPS_ERR_NULL, "matmul_path refuses NULL");
    return tu_finish();
}
