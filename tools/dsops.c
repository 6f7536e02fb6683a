/* dsops — command-line tool: `info`, `bench`, `run`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cases.h"
#include "dsops.h"
#include "dsops_run.h"
#include "ref.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage:\n"
            "  dsops info                          version, ISA tier, threads, measured peaks\n"
            "  dsops bench <case|prefix|all> [--isa T] [--threads N] [--repeat R] [--check] [--list]\n"
            "                                      time named cases of spec/CASES.md\n"
            "  dsops run <op> --in IN.safetensors --out OUT.safetensors [--set name=value]... [--threads N] [--isa T]\n"
            "                                      run an operator on tensors from a file\n");
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- info ------------------------------------------------------------------------------------ */

static int cmd_info(void)
{
    dsops_context *ctx;
    if (dsops_context_create(&ctx) != DSOPS_OK) {
        fprintf(stderr, "dsops info: %s\n", dsops_last_error());
        return 1;
    }
    dsops_isa det = dsops_isa_detected();
    printf("dsops %s\n", dsops_version());
    printf("detected ISA tier : %s\n", dsops_isa_name(det));
    printf("context ISA tier  : %s\n", dsops_isa_name(dsops_context_isa(ctx)));
    printf("threads           : %d\n", dsops_context_threads(ctx));
    double bf16 = 0, int8 = 0;
    dsops_measure_peak(det, DSOPS_PEAK_BF16_DOT, 0.3, &bf16);
    dsops_measure_peak(det, DSOPS_PEAK_INT8_DOT, 0.3, &int8);
    printf("peak bf16 dot     : %.1f GFLOP/s per core (%s)\n", bf16, dsops_isa_name(det));
    printf("peak int8 dot     : %.1f GOP/s per core (%s)\n", int8, dsops_isa_name(det));
    dsops_context_destroy(ctx);
    return 0;
}

/* ---- bench ----------------------------------------------------------------------------------- */

typedef struct bench_opts {
    int threads;           /* 0 = context default */
    int isa_set;
    dsops_isa isa;
    int repeat;            /* 0 = adaptive */
    int check;
} bench_opts;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* FlashMLA-style comparison of out and lse with the oracle (spec §1.8). */
static int check_against_oracle(const dsops_sfa_problem *p, double *max_err)
{
    const dsops_sparse_flash_attention_v32_args *a = &p->args;
    size_t n_out = (size_t)(p->T * p->c.N * p->c.Dc);
    uint16_t *ref_out = malloc(n_out * 2 + 1);
    float *ref_lse = malloc((size_t)(p->T * p->c.N) * 4 + 4);
    if (!ref_out || !ref_lse) {
        free(ref_out);
        free(ref_lse);
        return -1;
    }
    dsops_sparse_flash_attention_v32_args r = *a;
    int64_t so[3] = {p->T, p->c.N, p->c.Dc}, sl[2] = {p->T, p->c.N};
    r.out = dsops_tensor_make(ref_out, DSOPS_BF16, 3, so);
    r.lse = a->lse.data ? dsops_tensor_make(ref_lse, DSOPS_FP32, 2, sl) : (dsops_tensor){0};
    dsops_ref_sparse_flash_attention_v32(&r);
    size_t bad = 0;
    *max_err = 0;
    const uint16_t *got = a->out.data;
    for (size_t i = 0; i < n_out; i++) {
        float x, y;
        uint32_t ux = (uint32_t)got[i] << 16, uy = (uint32_t)ref_out[i] << 16;
        memcpy(&x, &ux, 4);
        memcpy(&y, &uy, 4);
        double err = fabs((double)x - (double)y);
        if (isnan(x) != isnan(y) || (!isnan(x) && err > 1e-4 + 0.005 * fabs((double)y)))
            bad++;
        if (err > *max_err)
            *max_err = err;
    }
    size_t allowed = (size_t)floor(0.005 * (double)n_out + 0.5);
    free(ref_out);
    free(ref_lse);
    return bad <= allowed ? 0 : 1;
}

static int bench_case(const dsops_sfa_case *c, const bench_opts *o, dsops_context *ctx, double peak_core)
{
    dsops_sfa_problem *p = dsops_sfa_problem_make(c, 42);
    if (!p) {
        fprintf(stderr, "dsops bench: cannot allocate case %s\n", c->name);
        return 1;
    }
    const char *check = "-";
    if (o->check) {
        dsops_status s = dsops_sparse_flash_attention_v32(ctx, &p->args);
        double max_err = 0;
        int bad = s != DSOPS_OK ? 1 : check_against_oracle(p, &max_err);
        check = bad ? "FAIL" : "ok";
        if (bad)
            fprintf(stderr, "dsops bench: %s differs from the oracle (max |err| %.3g)\n", c->name, max_err);
    }
    /* warm-up, then repeats: at least 5 runs and about 2 s, or --repeat */
    double t0 = now_seconds();
    if (dsops_sparse_flash_attention_v32(ctx, &p->args) != DSOPS_OK) {
        fprintf(stderr, "dsops bench: %s: %s\n", c->name, dsops_last_error());
        dsops_sfa_problem_free(p);
        return 1;
    }
    double once = now_seconds() - t0;
    int reps = o->repeat > 0 ? o->repeat : (int)fmin(50.0, fmax(5.0, 2.0 / fmax(once, 1e-6)));
    double *times = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        double a = now_seconds();
        dsops_sparse_flash_attention_v32(ctx, &p->args);
        times[r] = now_seconds() - a;
    }
    qsort(times, (size_t)reps, sizeof(double), cmp_double);
    double med = times[reps / 2], lo = times[0], hi = times[reps - 1];
    double gflops = p->flops / med * 1e-9;
    double gbs = p->gathered_bytes / med * 1e-9;
    int threads = dsops_context_threads(ctx);
    double pct = peak_core > 0 ? 100.0 * gflops / (peak_core * threads) : 0.0;
    printf("%-36s %-10s %3d %5d %10.3f %7.3f-%-8.3f %8.1f %7.2f %6.1f%% %5s\n", c->name,
           dsops_isa_name(dsops_context_isa(ctx)), threads, reps, med * 1e3, lo * 1e3, hi * 1e3, gflops, gbs, pct,
           check);
    fflush(stdout);
    free(times);
    dsops_sfa_problem_free(p);
    return o->check && strcmp(check, "FAIL") == 0 ? 1 : 0;
}

static int cmd_bench(int argc, char **argv)
{
    bench_opts o = {0};
    const char *what = NULL;
    int list = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            o.threads = atoi(argv[++i]);
            if (o.threads < 1) {
                fprintf(stderr, "dsops bench: --threads %s is not a count >= 1\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
            if (dsops_isa_from_name(argv[++i], &o.isa) != DSOPS_OK) {
                fprintf(stderr, "dsops bench: %s\n", dsops_last_error());
                return 2;
            }
            o.isa_set = 1;
        } else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
            o.repeat = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--check")) {
            o.check = 1;
        } else if (!strcmp(argv[i], "--list")) {
            list = 1;
        } else if (argv[i][0] != '-' && !what) {
            what = argv[i];
        } else {
            fprintf(stderr, "dsops bench: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    int count = 0;
    const dsops_sfa_case *cases = dsops_sfa_cases(&count);
    if (list || !what) {
        for (int i = 0; i < count; i++)
            printf("%-40s B %-3d S %-4d N %-3d K %-5d BS %-4d %s%s\n", cases[i].name, cases[i].B, cases[i].S, cases[i].N,
                   cases[i].K, cases[i].BS, cases[i].layout == DSOPS_KV_SPLIT_BF16   ? "split_bf16"
                                               : cases[i].layout == DSOPS_KV_SPLIT_INT8 ? "split_int8"
                                                                                         : "packed656",
                   cases[i].ci ? "" : "  (not in CI)");
        return what ? 0 : (list ? 0 : 2);
    }
    dsops_context *ctx;
    if (dsops_context_create(&ctx) != DSOPS_OK) {
        fprintf(stderr, "dsops bench: %s\n", dsops_last_error());
        return 1;
    }
    if (o.threads)
        dsops_context_set_threads(ctx, o.threads);
    if (o.isa_set)
        dsops_context_set_isa(ctx, o.isa);
    double peak = 0;
    dsops_measure_peak(dsops_isa_detected(), DSOPS_PEAK_BF16_DOT, 0.3, &peak);
    printf("peak: %.1f GFLOP/s bf16 dot per core (%s); %% of peak = GFLOP/s / (peak x threads)\n", peak,
           dsops_isa_name(dsops_isa_detected()));
    printf("%-36s %-10s %3s %5s %10s %16s %8s %7s %7s %5s\n", "case", "isa", "thr", "runs", "median ms",
           "min-max ms", "GFLOP/s", "GB/s", "%peak", "check");
    int failures = 0, matched = 0;
    size_t wl = strlen(what);
    /* an exact case name runs that case alone; otherwise a prefix, "all" or an operator name runs every
     * full-size case it covers */
    int have_exact = dsops_sfa_case_find(what) != NULL;
    for (int i = 0; i < count; i++) {
        const dsops_sfa_case *c = &cases[i];
        int exact = !strcmp(c->name, what);
        if (have_exact && !exact)
            continue;
        int prefix = !strncmp(c->name, what, wl) && strstr(c->name, "_ci") == NULL && strstr(c->name, "_edge") == NULL;
        int all = !strcmp(what, "all") && strstr(c->name, "_ci") == NULL;
        int op = !strcmp(what, "sparse_flash_attention_v32") && strstr(c->name, "_ci") == NULL;
        if (!(exact || prefix || all || op))
            continue;
        matched++;
        failures += bench_case(c, &o, ctx, peak);
    }
    dsops_context_destroy(ctx);
    if (!matched) {
        fprintf(stderr, "dsops bench: no case matches '%s' (see dsops bench --list)\n", what);
        return 2;
    }
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "info"))
        return cmd_info();
    if (!strcmp(argv[1], "bench"))
        return cmd_bench(argc - 2, argv + 2);
    if (!strcmp(argv[1], "run"))
        return dsops_cmd_run(argc - 2, argv + 2, NULL);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "dsops: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
