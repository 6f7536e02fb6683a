/* Measured dot-product peaks: the 100 % mark of the benchmark tool. */
#include <stdlib.h>
#include <time.h>

#include "dispatch.h"
#include "internal.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* y = a x over two arrays of STREAM_FLOATS floats each (far beyond any last-level cache): what one core moves
 * to and from memory when every byte is touched once, as hc_post and the decode prologs' weight streams do.
 * Portable code: the loop is memory-bound on every tier. */
#define STREAM_FLOATS ((size_t)16 << 20)

static dsops_status measure_stream(double seconds, double *giga_per_s)
{
    float *x = malloc(STREAM_FLOATS * sizeof(float)), *y = malloc(STREAM_FLOATS * sizeof(float));
    if (!x || !y) {
        free(x);
        free(y);
        return dsops_fail(DSOPS_ERR_NOMEM, "cannot allocate 2 x %zu MiB for the memory stream probe",
                          STREAM_FLOATS * sizeof(float) >> 20);
    }
    for (size_t i = 0; i < STREAM_FLOATS; i++) {
        x[i] = (float)(i & 1023);
        y[i] = 0.0f;
    }
    double best = 0.0, start = now_seconds();
    float a = 1.0f;
    do {
        double t0 = now_seconds();
        for (size_t i = 0; i < STREAM_FLOATS; i++)
            y[i] = a * x[i];
        double dt = now_seconds() - t0;
        double rate = 2.0 * STREAM_FLOATS * sizeof(float) / dt * 1e-9;
        best = rate > best ? rate : best;
        float *t = x; /* alternate direction so no pass is a pure re-read of the last one's output */
        x = y;
        y = t;
        a = a == 2.0f ? 0.5f : 2.0f; /* values stay in range, pass after pass */
    } while (now_seconds() - start < seconds);
    free(x);
    free(y);
    *giga_per_s = best;
    dsops_clear_error();
    return DSOPS_OK;
}

dsops_status dsops_measure_peak(dsops_isa isa, dsops_peak_kind kind, double seconds, double *giga_per_s)
{
    if (!giga_per_s)
        return dsops_fail(DSOPS_ERR_NULL, "giga_per_s is NULL");
    if ((int)kind < 0 || (int)kind >= DSOPS_PEAK_KIND_COUNT)
        return dsops_fail(DSOPS_ERR_PARAM, "kind = %d is not a dsops_peak_kind value", (int)kind);
    if (!(seconds > 0.0 && seconds < 60.0))
        return dsops_fail(DSOPS_ERR_PARAM, "seconds = %g, expected in (0, 60)", seconds);
    if (kind == DSOPS_PEAK_STREAM)
        return measure_stream(seconds, giga_per_s);
    const dsops_kernel_table *t = dsops_kernel_table_get(isa);
    double (*probe)(long) = kind == DSOPS_PEAK_BF16_DOT   ? t->peak.bf16_dot
                            : kind == DSOPS_PEAK_INT8_DOT ? t->peak.int8_dot
                                                          : t->peak.fp32_fma;
    /* warm up (clock ramp), then grow the iteration count until one run lasts long enough;
     * report the best of the timed runs */
    long iters = 1 << 12;
    double best = 0.0, start = now_seconds();
    /* at least one timed run, however long the warm-up took (a loaded machine may slow it) */
    while (now_seconds() - start < seconds || best == 0.0) {
        double t0 = now_seconds();
        double products = probe(iters);
        double dt = now_seconds() - t0;
        if (dt < 0.01) {
            iters *= 2;
            continue;
        }
        double rate = 2.0 * products / dt * 1e-9;
        if (rate > best)
            best = rate;
    }
    *giga_per_s = best;
    dsops_clear_error();
    return DSOPS_OK;
}
