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

/* ---- benchmark targets: one entry per named case of any operator ------------------------------- */

/* A generated problem of some operator, behind a small interface so one timing loop serves all. */
typedef struct bench_problem {
    void *p;
    dsops_status (*run)(dsops_context *ctx, void *p);
    int (*check)(void *p, char *why, size_t cap);  /* 0 = agrees with the oracle */
    void (*release)(void *p);
    double work;                                   /* FLOP (bf16) or OP (int8) per call */
    double bytes;                                  /* cache bytes read per call */
    dsops_peak_kind peak;
} bench_problem;

static float bf16_value(uint16_t h)
{
    float f;
    uint32_t u = (uint32_t)h << 16;
    memcpy(&f, &u, 4);
    return f;
}

/* sparse_flash_attention_v32: out against the oracle with the tolerance of spec §4.4. */
static dsops_status sfa_run(dsops_context *ctx, void *p)
{
    return dsops_sparse_flash_attention_v32(ctx, &((dsops_sfa_problem *)p)->args);
}

static int sfa_check(void *pv, char *why, size_t cap)
{
    const dsops_sfa_problem *p = pv;
    const dsops_sparse_flash_attention_v32_args *a = &p->args;
    size_t n_out = (size_t)(p->T * p->c.N * p->c.Dc);
    uint16_t *ref_out = malloc(n_out * 2 + 2);
    float *ref_lse = malloc((size_t)(p->T * p->c.N) * 4 + 4);
    if (!ref_out || !ref_lse) {
        free(ref_out);
        free(ref_lse);
        snprintf(why, cap, "out of memory");
        return 1;
    }
    dsops_sparse_flash_attention_v32_args r = *a;
    int64_t so[3] = {p->T, p->c.N, p->c.Dc}, sl[2] = {p->T, p->c.N};
    r.out = dsops_tensor_make(ref_out, DSOPS_BF16, 3, so);
    r.lse = a->lse.data ? dsops_tensor_make(ref_lse, DSOPS_FP32, 2, sl) : (dsops_tensor){0};
    dsops_ref_sparse_flash_attention_v32(&r);
    size_t bad = 0;
    double max_err = 0;
    const uint16_t *got = a->out.data;
    for (size_t i = 0; i < n_out; i++) {
        float x = bf16_value(got[i]), y = bf16_value(ref_out[i]);
        double err = fabs((double)x - (double)y);
        if (isnan(x) != isnan(y) || (!isnan(x) && err > 1e-4 + 0.005 * fabs((double)y)))
            bad++;
        if (err > max_err)
            max_err = err;
    }
    free(ref_out);
    free(ref_lse);
    snprintf(why, cap, "%zu of %zu elements outside 1e-4 / 0.005, max |err| %.3g", bad, n_out, max_err);
    return bad > (size_t)floor(0.005 * (double)n_out + 0.5);
}

static void sfa_release(void *p) { dsops_sfa_problem_free(p); }

/* lightning_indexer: compare_topk (spec §1.8) against the oracle, max_miss 1 per row. */
static dsops_status li_run(dsops_context *ctx, void *p)
{
    return dsops_lightning_indexer(ctx, &((dsops_li_problem *)p)->args);
}

static int li_check(void *pv, char *why, size_t cap)
{
    const dsops_li_problem *p = pv;
    int64_t T = p->T, K = p->c.K;
    int32_t *ref = malloc((size_t)(T * K) * 4 + 4);
    if (!ref) {
        snprintf(why, cap, "out of memory");
        return 1;
    }
    dsops_lightning_indexer_args r = p->args;
    int64_t so[2] = {T, K};
    r.topk_indices = dsops_tensor_make(ref, DSOPS_INT32, 2, so);
    r.topk_scores = (dsops_tensor){0};
    dsops_ref_lightning_indexer(&r);
    const int32_t *got = p->args.topk_indices.data;
    int64_t bad_rows = 0;
    for (int64_t t = 0; t < T; t++) {
        const int32_t *g = got + t * K, *e = ref + t * K;
        int64_t ng = 0, ne = 0, miss = 0;
        while (ng < K && g[ng] >= 0)
            ng++;
        while (ne < K && e[ne] >= 0)
            ne++;
        for (int64_t j = 0; j < ng; j++) {
            int found = 0;
            for (int64_t i = 0; i < ne && !found; i++)
                found = g[j] == e[i];
            miss += !found;
        }
        bad_rows += ng != ne || miss > 1;
    }
    free(ref);
    snprintf(why, cap, "%lld of %lld rows differ beyond one index", (long long)bad_rows, (long long)T);
    return bad_rows != 0;
}

static void li_release(void *p) { dsops_li_problem_free(p); }

typedef struct bench_case_ref {
    const char *name;
    int ci;
    const dsops_sfa_case *sfa;
    const dsops_li_case *li;
} bench_case_ref;

static int all_cases(bench_case_ref *out, int cap)
{
    int n = 0, count;
    const dsops_sfa_case *sc = dsops_sfa_cases(&count);
    for (int i = 0; i < count && n < cap; i++)
        out[n++] = (bench_case_ref){sc[i].name, sc[i].ci, &sc[i], NULL};
    const dsops_li_case *lc = dsops_li_cases(&count);
    for (int i = 0; i < count && n < cap; i++)
        out[n++] = (bench_case_ref){lc[i].name, lc[i].ci, NULL, &lc[i]};
    return n;
}

static int make_problem(const bench_case_ref *c, bench_problem *bp)
{
    memset(bp, 0, sizeof *bp);
    if (c->sfa) {
        dsops_sfa_problem *p = dsops_sfa_problem_make(c->sfa, 42);
        if (!p)
            return 1;
        *bp = (bench_problem){p, sfa_run, sfa_check, sfa_release, p->flops, p->gathered_bytes, DSOPS_PEAK_BF16_DOT};
    } else {
        dsops_li_problem *p = dsops_li_problem_make(c->li, 42);
        if (!p)
            return 1;
        *bp = (bench_problem){p, li_run, li_check, li_release, p->ops, p->key_bytes,
                              c->li->int8 ? DSOPS_PEAK_INT8_DOT : DSOPS_PEAK_BF16_DOT};
    }
    return 0;
}

static int bench_case(const bench_case_ref *c, const bench_opts *o, dsops_context *ctx, const double peak_core[2])
{
    bench_problem bp;
    if (make_problem(c, &bp)) {
        fprintf(stderr, "dsops bench: cannot allocate case %s\n", c->name);
        return 1;
    }
    const char *check = "-";
    if (o->check) {
        char why[160] = "";
        dsops_status s = bp.run(ctx, bp.p);
        int bad = s != DSOPS_OK || bp.check(bp.p, why, sizeof why);
        check = bad ? "FAIL" : "ok";
        if (bad)
            fprintf(stderr, "dsops bench: %s differs from the oracle: %s\n", c->name,
                    s != DSOPS_OK ? dsops_last_error() : why);
    }
    /* warm-up, then repeats: at least 5 runs and about 2 s, or --repeat */
    double t0 = now_seconds();
    if (bp.run(ctx, bp.p) != DSOPS_OK) {
        fprintf(stderr, "dsops bench: %s: %s\n", c->name, dsops_last_error());
        bp.release(bp.p);
        return 1;
    }
    double once = now_seconds() - t0;
    int reps = o->repeat > 0 ? o->repeat : (int)fmin(50.0, fmax(5.0, 2.0 / fmax(once, 1e-6)));
    double *times = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        double a = now_seconds();
        bp.run(ctx, bp.p);
        times[r] = now_seconds() - a;
    }
    qsort(times, (size_t)reps, sizeof(double), cmp_double);
    double med = times[reps / 2], lo = times[0], hi = times[reps - 1];
    double rate = bp.work / med * 1e-9;
    double gbs = bp.bytes / med * 1e-9;
    int threads = dsops_context_threads(ctx);
    double peak = peak_core[bp.peak];
    double pct = peak > 0 ? 100.0 * rate / (peak * threads) : 0.0;
    printf("%-36s %-10s %3d %5d %10.3f %7.3f-%-8.3f %8.1f %-5s %7.2f %6.1f%% %5s\n", c->name,
           dsops_isa_name(dsops_context_isa(ctx)), threads, reps, med * 1e3, lo * 1e3, hi * 1e3, rate,
           bp.peak == DSOPS_PEAK_INT8_DOT ? "int8" : "bf16", gbs, pct, check);
    fflush(stdout);
    free(times);
    bp.release(bp.p);
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
    bench_case_ref cases[512];
    int count = all_cases(cases, 512);
    if (list || !what) {
        for (int i = 0; i < count; i++) {
            if (cases[i].sfa) {
                const dsops_sfa_case *c = cases[i].sfa;
                printf("%-40s sparse_flash_attention_v32  B %-3d S %-4d N %-3d K %-5d BS %-4d %s%s\n", c->name, c->B,
                       c->S, c->N, c->K, c->BS,
                       c->layout == DSOPS_KV_SPLIT_BF16   ? "split_bf16"
                       : c->layout == DSOPS_KV_SPLIT_INT8 ? "split_int8"
                                                          : "packed656",
                       c->ci ? "" : "  (not in CI)");
            } else {
                const dsops_li_case *c = cases[i].li;
                printf("%-40s lightning_indexer           B %-3d S %-4d NI %-3d DI %-3d K %-5d ratio %d %s%s\n",
                       c->name, c->B, c->S, c->NI, c->DI, c->K, c->cmp_ratio, c->int8 ? "int8" : "bf16",
                       c->ci ? "" : "  (not in CI)");
            }
        }
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
    double peak[2] = {0, 0};
    dsops_measure_peak(dsops_isa_detected(), DSOPS_PEAK_BF16_DOT, 0.3, &peak[DSOPS_PEAK_BF16_DOT]);
    dsops_measure_peak(dsops_isa_detected(), DSOPS_PEAK_INT8_DOT, 0.2, &peak[DSOPS_PEAK_INT8_DOT]);
    printf("peaks per core (%s): bf16 dot %.1f GFLOP/s, int8 dot %.1f GOP/s; %%peak = rate / (peak x threads)\n",
           dsops_isa_name(dsops_isa_detected()), peak[0], peak[1]);
    printf("%-36s %-10s %3s %5s %10s %16s %8s %-5s %7s %7s %5s\n", "case", "isa", "thr", "runs", "median ms",
           "min-max ms", "G/s", "unit", "GB/s", "%peak", "check");
    int failures = 0, matched = 0;
    size_t wl = strlen(what);
    /* an exact case name runs that case alone; otherwise a prefix, "all" or an operator name runs every
     * full-size case it covers */
    int have_exact = 0;
    for (int i = 0; i < count; i++)
        have_exact |= !strcmp(cases[i].name, what);
    for (int i = 0; i < count; i++) {
        const bench_case_ref *c = &cases[i];
        int exact = !strcmp(c->name, what);
        if (have_exact && !exact)
            continue;
        int full = strstr(c->name, "_ci") == NULL && strstr(c->name, "_edge") == NULL;
        int prefix = !strncmp(c->name, what, wl) && full;
        int all = !strcmp(what, "all") && full;
        int op = full && ((!strcmp(what, "sparse_flash_attention_v32") && c->sfa) ||
                          (!strcmp(what, "lightning_indexer") && c->li));
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
