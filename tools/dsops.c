/* dsops — command-line tool: `info`, `bench`, `run`, `case`. */
#include <fnmatch.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include "alternatives.h"
#include "bench_registry.h"
#include "case_file.h"
#include "cases.h"
#include "composite.h"
#include "dsops.h"
#include "dsops_run.h"
#include "progress.h"
#include "safetensors.h"


static void usage(FILE *f)
{
    fprintf(f,
            "usage:\n"
            "  dsops info                          version, ISA tier, threads, measured peaks\n"
            "  dsops bench <case|prefix|operator|all> [--isa T] [--threads N] [--repeat R] [--budget S]\n"
            "              [--alternatives] [--check] [--list]\n"
            "  dsops bench --suite tour|seed-v4 [options]\n"
            "                                      time named cases (operators: sas or its presets swa / cfa /\n"
            "                                      scfa, compressor, hc_pre, ...); --budget: seconds of runs per\n"
            "                                      timing; --alternatives: NumPy / PyTorch versions beside\n"
            "                                      attention and indexer; suites run at 1 thread and every core:\n"
            "                                      tour = one case per family, the vendor's V4 table and a\n"
            "                                      summary; seed-v4 = the vendor's published V4 cases)\n"
            "  dsops run <op> --in IN.safetensors --out OUT.safetensors [--set name=value]... [--threads N] [--isa T]\n"
            "                                      run an operator on tensors from a file\n"
            "  dsops case <case> --inputs IN.safetensors [--max-work W] [--max-bytes B]\n"
            "                                      write a named case's call (inputs, in-out tensors, parameters)\n"
            "                                      for `dsops run`; prints `case NAME op OP work W bytes B judge J`\n"
            "                                      (J: what --check compares with, `oracle` or `stages`), or\n"
            "                                      `skipped ...` without writing when over W FLOP or B bytes\n"
            "  dsops case <case> --check OUT.safetensors\n"
            "                                      judge a run's outputs against the oracle at the case's tolerance\n"
            "                                      (exit 0: agrees; 1: does not, or the file lacks an output; 2: usage)\n");
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
    double bf16 = 0, int8 = 0, fp32 = 0;
    dsops_measure_peak(det, DSOPS_PEAK_BF16_DOT, 0.3, &bf16);
    dsops_measure_peak(det, DSOPS_PEAK_INT8_DOT, 0.3, &int8);
    dsops_measure_peak(det, DSOPS_PEAK_FP32_FMA, 0.3, &fp32);
    printf("peak bf16 dot     : %.1f GFLOP/s per core (%s)\n", bf16, dsops_isa_name(det));
    printf("peak int8 dot     : %.1f GOP/s per core (%s)\n", int8, dsops_isa_name(det));
    printf("peak fp32 fma     : %.1f GFLOP/s per core (%s)\n", fp32, dsops_isa_name(det));
    double stream = 0;
    dsops_measure_peak(det, DSOPS_PEAK_STREAM, 0.5, &stream);
    printf("memory stream     : %.1f GB/s per core (read + write)\n", stream);
    const dsops_dtype weight_types[] = {DSOPS_BF16, DSOPS_INT8, DSOPS_FP32};
    for (int i = 0; i < 3; i++) {
        char path[256];
        if (dsops_matmul_path(dsops_context_isa(ctx), weight_types[i], path, sizeof path) != DSOPS_OK)
            snprintf(path, sizeof path, "unavailable: %s", dsops_last_error());
        printf("matmul %-4s       : %s\n", dsops_dtype_name(weight_types[i]), path);
    }
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
    double budget;         /* seconds of timed runs per measurement (at least min_runs runs) */
    int min_runs;
    int compact;           /* one stdout line per finished case, no detail rows (the tour) */
    int alternatives;      /* also time the NumPy / PyTorch versions beside attention and indexer */
} bench_opts;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The row of a call that failed: the case, the tier and the status with the library's message. */
static void print_error_row(const char *name, dsops_context *ctx, const char *what)
{
    progress_clear();
    printf("%-36s %-10s %3d  ERROR %s\n", name, dsops_isa_name(dsops_context_isa(ctx)), dsops_context_threads(ctx),
           what);
    fflush(stdout);
}

/* The status and message of the last call time_and_print saw fail. */
static char last_failure[400];

/* Times bp (one warm-up, then at least 5 runs and about 2 s, or --repeat; calls under 1 ms repeat up to
 * 2000 times) and prints one table row, with the vendor's time beside ours when the case has one;
 * returns the median in seconds, or a negative value on error (after an error row). */
static double time_and_print(const char *name, const bench_problem *bp, const bench_opts *o, dsops_context *ctx,
                             const double peak_core[DSOPS_PEAK_KIND_COUNT], const char *check)
{
    char phase[96];
    const char *label = name + strspn(name, " ");
    snprintf(phase, sizeof phase, "%s%s%d thread%s", label == name ? "timing" : label, label == name ? " at " : ", ",
             dsops_context_threads(ctx), dsops_context_threads(ctx) > 1 ? "s" : "");
    progress_phase(phase, 10.0 + 4.0 * o->budget);
    double t0 = now_seconds();
    dsops_status st = bp->run(ctx, bp->p);
    if (st != DSOPS_OK) {
        snprintf(last_failure, sizeof last_failure, "%s: %s", dsops_status_name(st), dsops_last_error());
        if (!o->compact)
            print_error_row(name, ctx, last_failure);
        return -1.0;
    }
    double once = now_seconds() - t0;
    int cap = once < 1e-3 ? 2000 : 50;
    int reps = o->repeat > 0 ? o->repeat
                             : (int)fmin((double)cap, fmax((double)o->min_runs, o->budget / fmax(once, 1e-6)));
    progress_budget(5.0 + 3.0 * once * (reps + 1)); /* three times what the runs should take */
    double *times = malloc(sizeof(double) * (size_t)reps);
    if (!times)
        return -1.0;
    for (int r = 0; r < reps; r++) {
        double a = now_seconds();
        bp->run(ctx, bp->p);
        times[r] = now_seconds() - a;
    }
    qsort(times, (size_t)reps, sizeof(double), cmp_double);
    double med = times[reps / 2], lo = times[0], hi = times[reps - 1];
    double rate = bp->work / med * 1e-9;
    double gbs = bp->bytes / med * 1e-9;
    int threads = dsops_context_threads(ctx);
    double peak = peak_core[bp->peak];
    char rate_s[16], pct_s[16], bw_s[16], vendor_s[96] = "";
    if (bp->bytes > 0 && peak_core[DSOPS_PEAK_STREAM] > 0)
        snprintf(bw_s, sizeof bw_s, "%5.0f%%", 100.0 * gbs / (peak_core[DSOPS_PEAK_STREAM] * threads));
    else
        snprintf(bw_s, sizeof bw_s, "%6s", "-");
    if (bp->work > 0)
        snprintf(rate_s, sizeof rate_s, "%8.1f", rate);
    else
        snprintf(rate_s, sizeof rate_s, "%8s", "-");
    if (bp->no_peak || bp->work <= 0 || peak <= 0)
        snprintf(pct_s, sizeof pct_s, "%7s", "-");
    else
        snprintf(pct_s, sizeof pct_s, "%6.1f%%", 100.0 * rate / (peak * threads));
    if (bp->vendor_us > 0)
        snprintf(vendor_s, sizeof vendor_s, "  %9.1f us vs %s %.2f us: %.2fx", med * 1e6,
                 bp->vendor ? bp->vendor : "vendor", bp->vendor_us, med * 1e6 / bp->vendor_us);
    const char *unit = bp->unit                          ? bp->unit
                       : bp->peak == DSOPS_PEAK_INT8_DOT ? "int8"
                       : bp->peak == DSOPS_PEAK_FP32_FMA ? "fp32"
                                                         : "bf16";
    free(times);
    if (o->compact)
        return med;
    progress_clear();
    printf("%-36s %-10s %3d %5d %10.3f %7.3f-%-8.3f %s %-5s %7.2f %s %s %5s%s\n", name,
           dsops_isa_name(dsops_context_isa(ctx)), threads, reps, med * 1e3, lo * 1e3, hi * 1e3, rate_s, unit, gbs,
           pct_s, bw_s, check, vendor_s);
    fflush(stdout);
    return med;
}

/* One row per stage of a fused sparse_attention_v32 case, each stand-alone operator timed on the stage
 * arguments, then the sum of the stages against the fused time. */
static int time_dia_stages(const bench_problem *bp, double fused, const bench_opts *o, dsops_context *ctx,
                           const double peak_core[DSOPS_PEAK_KIND_COUNT])
{
    bench_problem stages[4];
    const char *labels[4];
    char why[400];
    if (bench_dia_stages(bp, ctx, stages, labels, why, sizeof why)) {
        fprintf(stderr, "dsops bench: %s\n", why);
        return 1;
    }
    double sum = 0.0;
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        char label[64];
        snprintf(label, sizeof label, "  %s", labels[i]);
        double t = time_and_print(label, &stages[i], o, ctx, peak_core, "-");
        if (t < 0)
            bad = 1;
        else
            sum += t;
    }
    if (!bad)
        printf("  %-34s sum of stages %.3f ms, fused %.3f ms (fused / sum = %.2f)\n", "", sum * 1e3, fused * 1e3,
               fused / sum);
    return bad;
}

/* What one case gave, at each thread count of the run, for the final tables. */
#define BENCH_MAX_THREAD_COUNTS 2
typedef struct bench_result {
    const char *name;
    char op[32];               /* operator (and preset or variant) */
    char shape[48];            /* the case's shape in a few words */
    int nthr;                  /* thread counts run */
    int threads[BENCH_MAX_THREAD_COUNTS];
    double med[BENCH_MAX_THREAD_COUNTS];   /* seconds; < 0: failed */
    double rate[BENCH_MAX_THREAD_COUNTS];  /* G/s of the counted work (GB/s where only bytes are counted) */
    double pct[BENCH_MAX_THREAD_COUNTS];   /* % of (peak x threads); < 0: not applicable */
    const char *unit;          /* "bf16", "int8", "fp32" (rate in GFLOP/s or GOP/s) or "GB/s" */
    double vendor_us;
    const char *vendor;
    char family[32];           /* operator family, for the closing summary */
    /* per alternative and thread count: its median / ours (0: not run); alt_bad: one disagreed or failed */
    double alt_speedup[ALT_KIND_COUNT][BENCH_MAX_THREAD_COUNTS];
    int alt_bad;
    char error[448];           /* why the case could not be made or run ("": it ran) */
} bench_result;

/* Rate and share of the peak of a timing (median `med` seconds at `threads` threads) into slot k of r. */
static void note_rate(bench_result *r, int k, const bench_problem *bp, double med, int threads,
                      const double peak_core[DSOPS_PEAK_KIND_COUNT])
{
    r->med[k] = med;
    r->threads[k] = threads;
    r->rate[k] = 0.0;
    r->pct[k] = -1.0;
    r->unit = bp->work > 0 ? (bp->unit       ? bp->unit
                              : bp->peak == DSOPS_PEAK_INT8_DOT ? "int8"
                              : bp->peak == DSOPS_PEAK_FP32_FMA ? "fp32"
                                                                : "bf16")
                           : "GB/s";
    if (med <= 0)
        return;
    if (bp->work > 0) {
        r->rate[k] = bp->work / med * 1e-9;
        if (!bp->no_peak && peak_core[bp->peak] > 0)
            r->pct[k] = 100.0 * r->rate[k] / (peak_core[bp->peak] * threads);
    } else {
        r->rate[k] = bp->bytes / med * 1e-9;
        if (peak_core[DSOPS_PEAK_STREAM] > 0)
            r->pct[k] = 100.0 * r->rate[k] / (peak_core[DSOPS_PEAK_STREAM] * threads);
    }
}

static dsops_status composite_run(dsops_context *ctx, void *c)
{
    return dsops_sfa_composite_run(c, dsops_context_threads(ctx));
}

static dsops_status li_composite_run(dsops_context *ctx, void *c)
{
    return dsops_li_composite_run(c, dsops_context_threads(ctx));
}

/* Inputs of the Python alternatives of one case, written once (a temporary folder removed with the case). */
typedef struct alt_files {
    char dir[256], in[300], out[300];
    int state; /* 0: not written yet, 1: written, -1: could not be written */
    char why[DSOPS_ST_ERRLEN];
} alt_files;

static int alt_files_ready(alt_files *f, const bench_case_ref *c, void *problem)
{
    if (f->state)
        return f->state > 0;
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/dsops-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    f->state = -1;
    if (!mkdtemp(f->dir)) {
        snprintf(f->why, sizeof f->why, "cannot create a temporary folder in %s", tmp && *tmp ? tmp : "/tmp");
        return 0;
    }
    snprintf(f->in, sizeof f->in, "%s/in.safetensors", f->dir);
    snprintf(f->out, sizeof f->out, "%s/out.safetensors", f->dir);
    progress_phase("writing the inputs for the Python alternatives", 30.0);
    int bad = c->family == &bench_family_sparse_flash_attention_v32 ? alt_write_sfa_inputs(&((dsops_sfa_problem *)problem)->args, f->in, f->why, sizeof f->why)
                     : alt_write_li_inputs(&((dsops_li_problem *)problem)->args, f->in, f->why, sizeof f->why);
    f->state = bad ? -1 : 1;
    return !bad;
}

static void alt_files_remove(alt_files *f)
{
    if (!f->state || !f->dir[0])
        return;
    remove(f->in);
    remove(f->out);
    rmdir(f->dir);
}

/* The row (detail mode) and the speed-up of one alternative's result r against our median `med`. */
static void note_alternative(alt_kind k, const alt_result *r, double med, const bench_problem *op,
                             const bench_opts *o, dsops_context *ctx, const double peak_core[DSOPS_PEAK_KIND_COUNT],
                             bench_result *res, int slot)
{
    const int failed = r->ran ? !r->agrees : !r->unavailable; /* a missing Python library is no failure */
    res->alt_bad |= failed;
    if (r->ran && r->agrees)
        res->alt_speedup[k][slot] = r->median_s / med;
    if (o->compact) {
        if (failed) {
            progress_clear();
            fprintf(stderr, "dsops bench: %s: %s at %d thread(s) %s: %s\n", res->name, alt_name(k),
                    dsops_context_threads(ctx), r->ran ? "disagrees with the operator" : "failed", r->why);
        }
        return;
    }
    char label[72];
    snprintf(label, sizeof label, "  %s%s%s", alt_name(k), r->version[0] ? ": " : "", r->version);
    progress_clear();
    if (!r->ran) {
        printf("%-36s %-10s %3d  not run: %s\n", label, dsops_isa_name(dsops_context_isa(ctx)),
               dsops_context_threads(ctx), r->why);
        fflush(stdout);
        return;
    }
    const double rate = op->work / r->median_s * 1e-9, peak = peak_core[op->peak] * dsops_context_threads(ctx);
    printf("%-36s %-10s %3d %5s %10.3f %16s %8.1f %-5s %7.2f %6.1f%% %6s %5s\n", label,
           dsops_isa_name(dsops_context_isa(ctx)), dsops_context_threads(ctx), "-", r->median_s * 1e3, "", rate,
           op->peak == DSOPS_PEAK_INT8_DOT ? "int8" : "bf16", op->bytes / r->median_s * 1e-9,
           peak > 0 ? 100.0 * rate / peak : 0.0, "-", r->agrees ? "ok" : "FAIL");
    printf("  %-34s dsops %.2fx %s (%s)\n", "", r->median_s / med, alt_name(k), r->why);
    fflush(stdout);
}

/* The alternatives of an attention or indexer case at the current thread count, on the problem's inputs, after
 * the operator was timed (`med` seconds): the C composite, then NumPy and PyTorch when --alternatives (or the
 * tour) asks for them. Each is checked against the operator's output. */
static void bench_alternatives(const bench_case_ref *c, const bench_problem *op, double med, const bench_opts *o,
                               dsops_context *ctx, const double peak_core[DSOPS_PEAK_KIND_COUNT], bench_result *res,
                               int slot, alt_files *files)
{
    const int threads = dsops_context_threads(ctx);
    const double budget = o->budget;
    alt_result r;
    float *scores = NULL; /* lightning_indexer: the operator's selected scores [T, K] */
    int64_t T = 0, K = 0;
    dsops_tensor out = {0};
    const int sfa = c->family == &bench_family_sparse_flash_attention_v32; /* else lightning_indexer */
    if (sfa) {
        dsops_sfa_problem *p = op->p;
        if (p->args.kv_layout == DSOPS_KV_PACKED_INT8)
            return; /* the alternatives read split caches */
        if (op->run(ctx, p) != DSOPS_OK) /* the operator's out, current */
            return;
        out = p->args.out;
    } else {
        dsops_li_problem *p = op->p;
        T = p->args.topk_indices.shape[0], K = p->args.topk_indices.shape[1];
        dsops_lightning_indexer_args a = p->args;
        int64_t shape[2] = {T, K};
        scores = malloc(sizeof(float) * (size_t)(T * K) + 4);
        a.topk_scores = dsops_tensor_make(scores, DSOPS_FP32, 2, shape);
        if (!scores || dsops_lightning_indexer(ctx, &a) != DSOPS_OK) {
            free(scores);
            return;
        }
    }

    /* the C composite */
    char phase[64];
    memset(&r, 0, sizeof r);
    snprintf(r.version, sizeof r.version, "oneDNN sgemm");
    void *comp = sfa ? (void *)dsops_sfa_composite_make(op->p) : (void *)dsops_li_composite_make(op->p);
    if (comp) {
        /* attention: its out against the operator's, before the timing; indexer: the scores after it */
        float diff = sfa ? dsops_sfa_composite_max_diff(comp, threads) : 0.0f;
        bench_problem cp = *op;
        cp.vendor_us = 0.0;
        cp.check = bench_no_check;
        cp.release = bench_no_release;
        cp.p = comp;
        cp.run = sfa ? composite_run : li_composite_run;
        bench_opts quiet = *o;
        quiet.compact = 1;
        r.median_s = time_and_print("  composite", &cp, &quiet, ctx, peak_core, "-");
        r.ran = r.median_s > 0;
        if (sfa) {
            r.agrees = diff < 0.02f;
            snprintf(r.why, sizeof r.why, "max |out difference| %.4f, allowed 0.02", (double)diff);
            dsops_sfa_composite_free(comp);
        } else {
            if (r.ran)
                alt_check_li_scores(dsops_li_composite_scores(comp), scores, T, K, &r);
            dsops_li_composite_free(comp);
        }
    } else {
        snprintf(r.why, sizeof r.why, "out of memory");
    }
    note_alternative(ALT_COMPOSITE, &r, med, op, o, ctx, peak_core, res, slot);

    /* NumPy and PyTorch */
    for (alt_kind k = ALT_NUMPY; o->alternatives && k <= ALT_TORCH; k++) {
        memset(&r, 0, sizeof r);
        if (!alt_python(k)) {
            snprintf(r.why, sizeof r.why, "no python3 with %s", k == ALT_NUMPY ? "numpy" : "torch");
            r.unavailable = 1;
        } else if (!alt_files_ready(files, c, op->p)) {
            snprintf(r.why, sizeof r.why, "inputs not written: %.120s", files->why);
        } else {
            snprintf(phase, sizeof phase, "%s at %d thread%s", alt_name(k), threads, threads > 1 ? "s" : "");
            progress_phase(phase, 30.0 + 4.0 * budget);
            alt_run_python(k, sfa ? "sparse_flash_attention_v32" : "lightning_indexer", files->in, files->out,
                           threads, budget, &r);
            if (r.ran && sfa)
                alt_check_sfa_file(files->out, &out, &r);
            else if (r.ran)
                alt_check_li_file(files->out, scores, T, K, &r);
        }
        note_alternative(k, &r, med, op, o, ctx, peak_core, res, slot);
    }
    free(scores);
}

/* The one stdout line of a finished case (the tour): per thread count its median, rate and share of the peak,
 * then the speed-up over each alternative and the vendor's time. */
static void print_case_line(const bench_result *r, int index, int total)
{
    progress_clear();
    printf("[%2d/%d] %-31s", index + 1, total, r->name);
    if (r->error[0] && r->med[0] < 0 && (r->nthr < 2 || r->med[1] < 0)) {
        printf(" | ERROR %s\n", r->error);
        fflush(stdout);
        return;
    }
    for (int k = 0; k < r->nthr; k++) {
        if (r->med[k] < 0) {
            printf(" | %dt %-27s", r->threads[k], "error");
            continue;
        }
        char pct[16] = "";
        if (r->pct[k] >= 0)
            snprintf(pct, sizeof pct, "%5.1f%%%s", r->pct[k], r->rate[k] > 0 && !strcmp(r->unit, "GB/s") ? "bw" : "");
        printf(" | %dt %9.3f ms %7.1f %-4s %s", r->threads[k], r->med[k] * 1e3, r->rate[k],
               !strcmp(r->unit, "GB/s") ? "GB/s" : r->unit, pct);
    }
    for (int a = 0; a < ALT_KIND_COUNT; a++) {
        int any = 0;
        for (int k = 0; k < r->nthr; k++)
            any |= r->alt_speedup[a][k] > 0;
        if (!any)
            continue;
        printf(" | vs %s", alt_name((alt_kind)a));
        for (int k = 0; k < r->nthr; k++)
            printf(r->alt_speedup[a][k] > 0 ? " %.1fx" : " -", r->alt_speedup[a][k]);
    }
    if (r->alt_bad)
        printf(" | an alternative FAILED (see stderr)");
    if (r->vendor_us > 0 && r->med[r->nthr - 1] > 0)
        printf(" | %.0fx the vendor's %.0f us", r->med[r->nthr - 1] * 1e6 / r->vendor_us, r->vendor_us);
    printf("\n");
    fflush(stdout);
}

/* Makes the case's problem once, checks it (--check, at the first thread count) and times it at every
 * thread count of `thr` (0: the context's), each timing with its detail rows. */
static int bench_case(const bench_case_ref *c, const bench_opts *o, dsops_context *ctx, const double peak_core[DSOPS_PEAK_KIND_COUNT],
                      const int *thr, int nthr, bench_result *res)
{
    int failures = 0;
    bench_problem bp;
    char why[400] = "";
    memset(res, 0, sizeof *res);
    res->name = c->name;
    res->nthr = nthr;
    for (int k = 0; k < nthr; k++) {
        res->med[k] = -1.0;
        res->pct[k] = -1.0;
        res->threads[k] = thr[k] > 0 ? thr[k] : dsops_context_threads(ctx);
    }
    res->unit = "-";
    bench_case_vendor(c, &res->vendor_us, &res->vendor);
    bench_case_words(c, res->op, sizeof res->op, res->shape, sizeof res->shape, res->family, sizeof res->family);
    if (thr[0] > 0)
        dsops_context_set_threads(ctx, thr[0]);
    progress_phase("generating the inputs", 30.0);
    if (bench_make_problem(c, &bp, why, sizeof why)) {
        snprintf(res->error, sizeof res->error, "%s", why);
        if (!o->compact)
            print_error_row(c->name, ctx, why);
        if (bp.p && bp.release)
            bp.release(bp.p);
        return 1;
    }
    alt_files files = {.state = 0};
    const char *check = "-";
    if (o->check) {
        dsops_status s = bp.run(ctx, bp.p);
        int bad = s != DSOPS_OK || bp.check(bp.p, why, sizeof why);
        check = bad ? "FAIL" : "ok";
        if (s != DSOPS_OK)
            fprintf(stderr, "dsops bench: %s: %s (%s)\n", c->name, dsops_status_name(s), dsops_last_error());
        else if (bad)
            fprintf(stderr, "dsops bench: %s differs from the oracle: %s\n", c->name, why);
        failures += bad;
    }
    for (int k = 0; k < nthr; k++) {
        if (thr[k] > 0)
            dsops_context_set_threads(ctx, thr[k]);
        double med = time_and_print(c->name, &bp, o, ctx, peak_core, check);
        note_rate(res, k, &bp, med, dsops_context_threads(ctx), peak_core);
        failures += med < 0;
        if (med < 0 && !res->error[0])
            snprintf(res->error, sizeof res->error, "at %d thread(s): %s", dsops_context_threads(ctx),
                     last_failure);
        if ((c->family == &bench_family_sparse_flash_attention_v32 || c->family == &bench_family_lightning_indexer) &&
            med > 0)
            bench_alternatives(c, &bp, med, o, ctx, peak_core, res, k, &files);
        if (o->compact)
            continue;
        char note[160];
        bench_case_note(c, &bp, note, sizeof note);
        if (note[0] && k == 0)
            printf("  %-34s %s\n", "", note);
        bench_problem gemms;
        int has_gemms = med > 0 ? bench_matmuls(c, &bp, &gemms, why, sizeof why) : -1;
        if (has_gemms == 1) {
            printf("  %-34s matmuls only: %s\n", "", why);
        } else if (has_gemms == 0) { /* the same matmuls alone: the epilogues cost the difference */
            double g = time_and_print("  matmuls only", &gemms, o, ctx, peak_core, "-");
            if (g > 0)
                printf("  %-34s %s / matmuls = %.2f\n", "", c->family == &bench_family_compressor ? "compressor" : "prolog", med / g);
        }
        if (c->family == &bench_family_sparse_attention_v32 && med > 0)
            failures += time_dia_stages(&bp, med, o, ctx, peak_core);
    }
    failures += res->alt_bad;
    alt_files_remove(&files);
    bp.release(bp.p);
    return failures ? 1 : 0;
}

/* Named suites: glob patterns over the full-size case names, run in the order listed. */
typedef struct bench_suite {
    const char *name;
    const char *about;
    int tour;              /* short timings, one line per case, the alternatives, a closing summary */
    const char *patterns[24];
} bench_suite;

/* The cases of the vendor's V4 tables, shared by both suites: the PyPTO table (one die, B 64, S1 2, S2 8192) in
 * its order, each compressor without, then with a closing window; then the AscendC hyper-connection tables
 * (Atlas A3, HC 4, H 4096). */
#define SEED_V4_PATTERNS                                                                                          \
    "v4_swa_b64_s2_kv8k", "v4_cfa_b64_s2_kv8k", "v4_scfa_b64_s2_kv8k", "v4_cmp_c4li_bench_sp8192",                \
        "v4_cmp_c4a_bench_sp8192", "v4_cmp_c128a_bench_sp8192", "v4_cmp_c4li_bench_sp8191",                       \
        "v4_cmp_c4a_bench_sp8191", "v4_cmp_c128a_bench_sp8191", "v4_mla_prolog_b64_s2", "v4_hc_pre_b64_s2",       \
        "v4_idx_prolog_t128", "v4_hc_pre_bench_t*", "v4_hc_post_bench_t*"

static const bench_suite suites[] = {
    {"tour", "one V3.2 decode case per operator family, then the vendor's V4 table; short timings, the "
     "alternatives a user would write timed beside attention and indexer, a closing summary", 1,
     {"v32_sfa_b4_s2_int8_kv64k", "v32_li_int8_b4_s2_kv64k", "v32_mla_prolog_int8_b4_s2_kv1k",
      "v32_idx_prolog_int8_b4_s2_kv64k", "v32_dia_b4_s2_mixed", SEED_V4_PATTERNS, NULL}},
    {"seed-v4", "the cases of the vendor's published DeepSeek-V4 timings (PyPTO and AscendC)", 0,
     {SEED_V4_PATTERNS, NULL}},
};

static const bench_suite *find_suite(const char *name)
{
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
        if (!strcmp(suites[i].name, name))
            return &suites[i];
    return NULL;
}

/* A case that named selections (prefix, operator, "all", suites) run: not a _ci variant, not an edge case. */
static int full_size(const char *name)
{
    return strstr(name, "_ci") == NULL && strstr(name, "_edge") == NULL;
}

/* ours against the vendor's for every case of the run that has a vendor time */
static void print_vendor_summary(const bench_result *r, int n)
{
    int any = 0;
    for (int i = 0; i < n; i++)
        any |= r[i].vendor_us > 0;
    if (!any)
        return;
    const int last = r[0].nthr - 1; /* ours at the run's last (largest) thread count */
    char ours[24];
    snprintf(ours, sizeof ours, "dsops us %dt", r[0].threads[last]);
    printf("\n%-36s %12s %12s %-8s %10s\n", "case", ours, "vendor us", "vendor", "dsops/vendor");
    for (int i = 0; i < n; i++) {
        if (r[i].vendor_us <= 0)
            continue;
        if (r[i].med[last] < 0)
            printf("%-36s %12s %12.1f %-8s %10s\n", r[i].name, "error", r[i].vendor_us,
                   r[i].vendor ? r[i].vendor : "vendor", "-");
        else
            printf("%-36s %12.1f %12.1f %-8s %10.2fx\n", r[i].name, r[i].med[last] * 1e6, r[i].vendor_us,
                   r[i].vendor ? r[i].vendor : "vendor", r[i].med[last] * 1e6 / r[i].vendor_us);
    }
}

/* The tour's closing summary, one line per operator family: its best rate (over its cases and thread counts)
 * with that timing's share of the peak x threads, the speed-up over each alternative at the same thread count (the best case's), and
 * the ratio of our time to the vendor's die over the family's vendor cases (geometric mean and range). */
static void print_summary(const bench_result *r, int n, const double peak_core[DSOPS_PEAK_KIND_COUNT], int failures)
{
    const char *fam[16];
    int nf = 0;
    for (int i = 0; i < n && nf < 16; i++) {
        int seen = 0;
        for (int f = 0; f < nf; f++)
            seen |= !strcmp(fam[f], r[i].family);
        if (!seen)
            fam[nf++] = r[i].family;
    }
    printf("\nsummary (%s, %d thread(s) at most; peaks per core: bf16 %.0f GFLOP/s, int8 %.0f GOP/s, stream %.1f GB/s)\n",
           dsops_isa_name(dsops_isa_detected()), r[0].threads[r[0].nthr - 1], peak_core[DSOPS_PEAK_BF16_DOT],
           peak_core[DSOPS_PEAK_INT8_DOT], peak_core[DSOPS_PEAK_STREAM]);
    printf("%-22s %-24s %6s  %-11s %-11s %-11s %s\n", "family", "best rate", "%peak", "vs composite", "vs numpy",
           "vs torch", "dsops / vendor die");
    for (int f = 0; f < nf; f++) {
        int bi = -1, bk = 0, vendor_n = 0;
        double vlog = 0.0, vmin = INFINITY, vmax = 0.0;
        for (int i = 0; i < n; i++) {
            if (strcmp(r[i].family, fam[f]))
                continue;
            for (int k = 0; k < r[i].nthr; k++) {
                if (r[i].med[k] <= 0)
                    continue;
                if (bi < 0 || r[i].rate[k] > r[bi].rate[bk]) /* units agree within a family */
                    bi = i, bk = k;
            }
            const double last = r[i].med[r[i].nthr - 1];
            if (r[i].vendor_us > 0 && last > 0) {
                double ratio = last * 1e6 / r[i].vendor_us;
                vlog += log(ratio), vendor_n++;
                vmin = ratio < vmin ? ratio : vmin;
                vmax = ratio > vmax ? ratio : vmax;
            }
        }
        char rate[40] = "error", pct[16] = "-", alt[ALT_KIND_COUNT][16], vendor[48] = "-";
        if (bi >= 0) {
            const int gbs = !strcmp(r[bi].unit, "GB/s");
            snprintf(rate, sizeof rate, "%.1f %s @%dt", r[bi].rate[bk],
                     gbs ? "GB/s" : !strcmp(r[bi].unit, "int8") ? "GOP/s" : "GFLOP/s", r[bi].threads[bk]);
            if (r[bi].pct[bk] >= 0)
                snprintf(pct, sizeof pct, "%.1f%%%s", r[bi].pct[bk], gbs ? "bw" : "");
        }
        for (int a = 0; a < ALT_KIND_COUNT; a++) {
            snprintf(alt[a], sizeof alt[a], "-");
            if (bi >= 0 && r[bi].alt_speedup[a][bk] > 0)
                snprintf(alt[a], sizeof alt[a], "%.1fx", r[bi].alt_speedup[a][bk]);
        }
        if (vendor_n == 1)
            snprintf(vendor, sizeof vendor, "%.0fx", vmax);
        else if (vendor_n > 1)
            snprintf(vendor, sizeof vendor, "%.0fx (%.0f-%.0fx, %d cases)", exp(vlog / vendor_n), vmin, vmax, vendor_n);
        printf("%-22s %-24s %6s  %-11s %-11s %-11s %s\n", fam[f], rate, pct, alt[ALT_COMPOSITE], alt[ALT_NUMPY],
               alt[ALT_TORCH], vendor);
    }
    printf("%s\n", failures ? "some cases FAILED: see the lines marked ERROR or FAILED above" : "every case ran");
}

/* A suite's one table: per case the operator, shape, median at each thread count, the rate and share of
 * the peak at each, and the vendor's time with ours / theirs at the last thread count. */
static void print_suite_table(const bench_suite *suite, const bench_result *r, int n)
{
    if (n <= 0)
        return;
    const int nt = r[0].nthr;
    char h[BENCH_MAX_THREAD_COUNTS][3][24];
    for (int k = 0; k < nt; k++) {
        snprintf(h[k][0], sizeof h[k][0], "us %dt", r[0].threads[k]);
        snprintf(h[k][1], sizeof h[k][1], "G/s %dt", r[0].threads[k]);
        snprintf(h[k][2], sizeof h[k][2], "%%pk %dt", r[0].threads[k]);
    }
    printf("\nsuite %s: medians; G/s in GFLOP/s (bf16, fp32), GOP/s (int8) or GB/s; %%pk = rate / (measured peak x "
           "threads); dsops / vendor at %d thread(s)\n", suite->name, r[0].threads[nt - 1]);
    printf("%-18s %-30s", "operator", "shape");
    for (int k = 0; k < nt; k++)
        printf(" %10s", h[k][0]);
    for (int k = 0; k < nt; k++)
        printf(" %8s", h[k][1]);
    printf(" %-5s", "unit");
    for (int k = 0; k < nt; k++)
        printf(" %7s", h[k][2]);
    printf(" %10s %-8s %12s\n", "vendor us", "vendor", "dsops/vendor");
    for (int i = 0; i < n; i++) {
        printf("%-18s %-30s", r[i].op, r[i].shape);
        for (int k = 0; k < nt; k++) {
            if (r[i].med[k] < 0)
                printf(" %10s", "error");
            else
                printf(" %10.1f", r[i].med[k] * 1e6);
        }
        for (int k = 0; k < nt; k++) {
            if (r[i].med[k] < 0 || r[i].rate[k] <= 0)
                printf(" %8s", "-");
            else
                printf(" %8.1f", r[i].rate[k]);
        }
        printf(" %-5s", r[i].unit ? r[i].unit : "-");
        for (int k = 0; k < nt; k++) {
            if (r[i].med[k] < 0 || r[i].pct[k] < 0)
                printf(" %7s", "-");
            else
                printf(" %6.1f%%", r[i].pct[k]);
        }
        const double last = r[i].med[nt - 1];
        if (r[i].vendor_us <= 0)
            printf(" %10s %-8s %12s\n", "-", "-", "-");
        else if (last < 0)
            printf(" %10.1f %-8s %12s\n", r[i].vendor_us, r[i].vendor ? r[i].vendor : "vendor", "-");
        else
            printf(" %10.1f %-8s %11.1fx\n", r[i].vendor_us, r[i].vendor ? r[i].vendor : "vendor",
                   last * 1e6 / r[i].vendor_us);
    }
}

static int cmd_bench(int argc, char **argv)
{
    bench_opts o = {.budget = 2.0, .min_runs = 5};
    const char *what = NULL;
    const bench_suite *suite = NULL;
    int list = 0, budget_set = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            char *end = NULL;
            long n = strtol(argv[++i], &end, 10);
            if (!*argv[i] || *end || n < 1 || n > DSOPS_MAX_THREADS) {
                fprintf(stderr, "dsops bench: --threads %.32s is not a count in [1, %d]\n", argv[i], DSOPS_MAX_THREADS);
                return 2;
            }
            o.threads = (int)n;
        } else if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
            if (dsops_isa_from_name(argv[++i], &o.isa) != DSOPS_OK) {
                fprintf(stderr, "dsops bench: %s\n", dsops_last_error());
                return 2;
            }
            o.isa_set = 1;
        } else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
            o.repeat = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--suite") && i + 1 < argc) {
            if (!(suite = find_suite(argv[++i]))) {
                fprintf(stderr, "dsops bench: no suite '%s'; suites:\n", argv[i]);
                for (size_t k = 0; k < sizeof suites / sizeof suites[0]; k++)
                    fprintf(stderr, "  %-10s %s\n", suites[k].name, suites[k].about);
                return 2;
            }
        } else if (!strcmp(argv[i], "--budget") && i + 1 < argc) {
            o.budget = atof(argv[++i]);
            budget_set = 1;
            if (!(o.budget > 0.0)) {
                fprintf(stderr, "dsops bench: --budget %s is not a positive number of seconds\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--alternatives")) {
            o.alternatives = 1;
        } else if (!strcmp(argv[i], "--check")) {
            o.check = 1;
        } else if (!strcmp(argv[i], "--list")) {
            list = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] != '-' && !what) {
            what = argv[i];
        } else {
            fprintf(stderr, "dsops bench: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (suite && what) {
        fprintf(stderr, "dsops bench: give a suite or a case selection, not both\n");
        return 2;
    }
    if (suite && suite->tour) { /* a few minutes: short timings of at least 3 runs, one line per case */
        o.budget = budget_set ? o.budget : 0.3;
        o.min_runs = 3;
        o.compact = 1;
        o.alternatives = 1;
    }
    static bench_case_ref cases[512];
    int count = bench_all_cases(cases, 512);
    /* the cases to run, in order: a suite's patterns in its order, else the selection in table order */
    static int order[512];
    int norder = 0;
    if (suite) {
        for (int k = 0; suite->patterns[k]; k++)
            for (int i = 0; i < count && norder < 512; i++)
                if (full_size(cases[i].name) && fnmatch(suite->patterns[k], cases[i].name, 0) == 0)
                    order[norder++] = i;
    } else if (what) {
        /* an exact case name runs that case alone; otherwise a prefix, "all" or an operator name runs every
         * full-size case it covers */
        int have_exact = 0;
        for (int i = 0; i < count; i++)
            have_exact |= !strcmp(cases[i].name, what);
        size_t wl = strlen(what);
        for (int i = 0; i < count; i++) {
            const bench_case_ref *c = &cases[i];
            int exact = !strcmp(c->name, what);
            if (have_exact && !exact)
                continue;
            int full = full_size(c->name);
            int prefix = !strncmp(c->name, what, wl) && full;
            int all = !strcmp(what, "all") && full;
            if (exact || prefix || all || (full && bench_op_selects(what, c)))
                order[norder++] = i;
        }
    }
    if (list || (!what && !suite)) {
        if (suite || what) {
            for (int k = 0; k < norder; k++)
                bench_list_case(&cases[order[k]]);
        } else {
            for (int i = 0; i < count; i++)
                bench_list_case(&cases[i]);
        }
        return list ? 0 : 2;
    }
    if (!norder) {
        fprintf(stderr, "dsops bench: no case matches '%s' (see dsops bench --list)\n", suite ? suite->name : what);
        return 2;
    }
    dsops_context *ctx;
    if (dsops_context_create(&ctx) != DSOPS_OK) {
        fprintf(stderr, "dsops bench: %s\n", dsops_last_error());
        return 1;
    }
    const int cores = dsops_context_threads(ctx); /* the context's default: every core */
    if (o.threads)
        dsops_context_set_threads(ctx, o.threads);
    if (o.isa_set)
        dsops_context_set_isa(ctx, o.isa);
    double peak[DSOPS_PEAK_KIND_COUNT] = {0}; /* indexed by dsops_peak_kind */
    dsops_measure_peak(dsops_isa_detected(), DSOPS_PEAK_STREAM, 0.3, &peak[DSOPS_PEAK_STREAM]);
    dsops_measure_peak(dsops_isa_detected(), DSOPS_PEAK_BF16_DOT, 0.3, &peak[DSOPS_PEAK_BF16_DOT]);
    dsops_measure_peak(dsops_isa_detected(), DSOPS_PEAK_INT8_DOT, 0.2, &peak[DSOPS_PEAK_INT8_DOT]);
    int any_hcpre = 0, any_hcpost = 0;
    for (int k = 0; k < norder; k++)
        any_hcpre |= cases[order[k]].family == &bench_family_hc_pre,
        any_hcpost |= cases[order[k]].family == &bench_family_hc_post;
    if (any_hcpre)
        dsops_measure_peak(dsops_isa_detected(), DSOPS_PEAK_FP32_FMA, 0.2, &peak[DSOPS_PEAK_FP32_FMA]);
    printf("peaks per core (%s): bf16 dot %.1f GFLOP/s, int8 dot %.1f GOP/s", dsops_isa_name(dsops_isa_detected()),
           peak[DSOPS_PEAK_BF16_DOT], peak[DSOPS_PEAK_INT8_DOT]);
    if (any_hcpre)
        printf(", fp32 fma %.1f GFLOP/s", peak[DSOPS_PEAK_FP32_FMA]);
    printf(", memory stream %.1f GB/s; %%peak = rate / (peak x threads), %%bw = GB/s / (stream x threads)\n",
           peak[DSOPS_PEAK_STREAM]);
    if (any_hcpre)
        printf("hc_pre counts the fp32 FLOP of its mix reduction (2 T M HC H) against the fp32 FMA peak\n");
    if (any_hcpost)
        printf("hc_post is memory-bound: GB/s counts x, residual, post, comb read and out written; no FLOP rate; "
               "its %%peak in the suite table is %%bw\n");
    if (suite)
        printf("suite %s: %s\n", suite->name, suite->about);
    /* a suite runs every case at 1 thread and on every core unless --threads names one count */
    int thr[BENCH_MAX_THREAD_COUNTS] = {o.threads, 0}, nthr = 1;
    if (suite && !o.threads) {
        thr[0] = 1, thr[1] = cores, nthr = cores > 1 ? 2 : 1;
        printf("each case at 1 and %d threads (--threads N: one count)\n", cores);
    }
    if (o.compact)
        printf("one line per case: per thread count the median, the rate and %%peak; the alternative's time / ours "
               "(checked against our output); ours / the vendor's\n");
    else
        printf("%-36s %-10s %3s %5s %10s %16s %8s %-5s %7s %7s %6s %5s\n", "case", "isa", "thr", "runs",
               "median ms", "min-max ms", "G/s", "unit", "GB/s", "%peak", "%bw", "check");
    fflush(stdout);
    static bench_result results[512];
    int failures = 0;
    progress_start(norder, 0);
    for (int k = 0; k < norder; k++) {
        progress_case(k, cases[order[k]].name);
        failures += bench_case(&cases[order[k]], &o, ctx, peak, thr, nthr, &results[k]);
        if (o.compact)
            print_case_line(&results[k], k, norder);
    }
    const double elapsed = progress_elapsed();
    progress_stop();
    if (suite && suite->tour) {
        print_vendor_summary(results, norder);
        print_summary(results, norder, peak, failures);
        printf("%d cases in %.0f s\n", norder, elapsed);
    } else if (suite) {
        print_suite_table(suite, results, norder);
    } else {
        print_vendor_summary(results, norder);
    }
    dsops_context_destroy(ctx);
    return failures ? 1 : 0;
}

/* ---- case ------------------------------------------------------------------------------------ */

/* `dsops case NAME --inputs FILE [--max-work W] [--max-bytes B]` or `dsops case NAME --check FILE`. */
static int cmd_case(int argc, char **argv)
{
    const char *name = argc >= 1 ? argv[0] : NULL, *inputs = NULL, *check = NULL;
    double max_work = 0, max_bytes = 0;
    for (int i = 1; i < argc; i += 2) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!val) {
            fprintf(stderr, "dsops case: %s needs a value\n", opt);
            return 2;
        }
        if (!strcmp(opt, "--inputs"))
            inputs = val;
        else if (!strcmp(opt, "--check"))
            check = val;
        else if (!strcmp(opt, "--max-work"))
            max_work = atof(val);
        else if (!strcmp(opt, "--max-bytes"))
            max_bytes = atof(val);
        else {
            fprintf(stderr, "dsops case: unknown option '%s'\n", opt);
            return 2;
        }
    }
    if (!name || !inputs == !check) {
        fprintf(stderr, "dsops case: give a case name and one of --inputs FILE, --check FILE\n");
        return 2;
    }
    static bench_case_ref cases[512];
    int n = bench_all_cases(cases, 512);
    const bench_case_ref *c = NULL;
    for (int i = 0; i < n && !c; i++)
        if (!strcmp(cases[i].name, name))
            c = &cases[i];
    if (!c) {
        fprintf(stderr, "dsops case: no case '%s' (dsops bench --list)\n", name);
        return 2;
    }
    bench_problem bp;
    char why[512] = "";
    if (bench_make_problem(c, &bp, why, sizeof why) != 0) {
        fprintf(stderr, "dsops case: %s: %s\n", name, why);
        if (bp.p && bp.release)
            bp.release(bp.p);
        return 2;
    }
    const char *op = bench_case_op(c);
    int rc;
    if (inputs && ((max_work > 0 && bp.work > max_work) || (max_bytes > 0 && bp.bytes > max_bytes))) {
        printf("skipped %s: work %.4g, bytes %.4g\n", name, bp.work, bp.bytes);
        rc = 0;
    } else if (inputs) {
        rc = case_file_write_inputs(&bp, op, name, inputs, why, sizeof why) ? 2 : 0;
        if (!rc)
            printf("case %s op %s work %.6g bytes %.6g judge %s\n", name, op, bp.work, bp.bytes,
                   bp.judge ? bp.judge : "oracle");
    } else {
        rc = case_file_check_outputs(&bp, op, check, why, sizeof why);
        if (!rc)
            printf("%s: %s agrees with the oracle\n", name, check);
    }
    if (rc)
        fprintf(stderr, "dsops case: %s: %s\n", name, why);
    bp.release(bp.p);
    return rc;
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
    if (!strcmp(argv[1], "case"))
        return cmd_case(argc - 2, argv + 2);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "dsops: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
