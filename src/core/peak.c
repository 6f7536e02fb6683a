/* Measured dot-product peaks: the 100 % mark of the benchmark tool. */
#include <time.h>

#include "dispatch.h"
#include "internal.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

dsops_status dsops_measure_peak(dsops_isa isa, dsops_peak_kind kind, double seconds, double *giga_per_s)
{
    if (!giga_per_s)
        return dsops_fail(DSOPS_ERR_NULL, "giga_per_s is NULL");
    if (kind != DSOPS_PEAK_BF16_DOT && kind != DSOPS_PEAK_INT8_DOT && kind != DSOPS_PEAK_FP32_FMA)
        return dsops_fail(DSOPS_ERR_PARAM, "kind = %d is not a dsops_peak_kind value", (int)kind);
    if (!(seconds > 0.0 && seconds < 60.0))
        return dsops_fail(DSOPS_ERR_PARAM, "seconds = %g, expected in (0, 60)", seconds);
    const dsops_kernel_table *t = dsops_kernel_table_get(isa);
    double (*probe)(long) = kind == DSOPS_PEAK_BF16_DOT   ? t->peak.bf16_dot
                            : kind == DSOPS_PEAK_INT8_DOT ? t->peak.int8_dot
                                                          : t->peak.fp32_fma;
    /* warm up (clock ramp), then grow the iteration count until one run lasts long enough;
     * report the best of the timed runs */
    long iters = 1 << 12;
    double best = 0.0, start = now_seconds();
    while (now_seconds() - start < seconds) {
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
