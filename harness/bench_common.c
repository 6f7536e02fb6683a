/* Helpers the bench adapters of the operator families share (bench_family.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_family.h"
#include "cases_internal.h"

int bench_no_check(void *pv, char *why, size_t cap)
{
    (void)pv;
    snprintf(why, cap, "nothing to compare");
    return 0;
}

void bench_no_release(void *pv) { (void)pv; }

int bench_out_of_memory(char *why, size_t cap)
{
    snprintf(why, cap, "out of memory");
    return 1;
}

int bench_cannot_generate(char *why, size_t cap)
{
    snprintf(why, cap, "cannot generate the case (out of memory?)");
    return 1;
}

int bench_prepared_or_say(dsops_status s, const char *what, char *why, size_t cap)
{
    if (s == DSOPS_OK)
        return 0;
    snprintf(why, cap, "%s: %s (%s)", what, dsops_status_name(s), dsops_last_error());
    return 1;
}

int bench_prepared_has_maps(const dsops_prepared *prep, int count, char *why, size_t cap)
{
    if (!prep || (prep->maps && prep->count == count))
        return 0;
    snprintf(why, cap, "the prepared object has %d maps, expected %d", prep->count, count);
    return 1;
}

/* Value i of a bf16, fp32 or int8 buffer. */
static double elem_value(const void *p, dsops_dtype dt, size_t i)
{
    switch (dt) {
    case DSOPS_FP32: return ((const float *)p)[i];
    case DSOPS_INT8: return ((const int8_t *)p)[i];
    default: return cases_bf16_value(((const uint16_t *)p)[i]);
    }
}

void bench_count_outside(const void *got, const void *ref, dsops_dtype dt, size_t n, double atol, double rtol,
                         size_t *bad, size_t *n_total, double *max_err)
{
    for (size_t i = 0; i < n; i++) {
        double x = elem_value(got, dt, i), y = elem_value(ref, dt, i);
        if (!isfinite(x) || !isfinite(y)) {
            *bad += !(isnan(x) && isnan(y)) && x != y;
            continue;
        }
        double err = fabs(x - y);
        *bad += err > atol + rtol * fabs(y);
        if (err > *max_err)
            *max_err = err;
    }
    *n_total += n;
}

int bench_too_many(size_t bad, size_t n) { return bad > (size_t)floor(0.005 * (double)n + 0.5); }

int bench_check_windows(int64_t T, int64_t start[3], int64_t len[3])
{
    if (T <= 384) {
        start[0] = 0, len[0] = T;
        return 1;
    }
    start[0] = 0, start[1] = T / 2 - 64, start[2] = T - 128;
    len[0] = len[1] = len[2] = 128;
    return 3;
}

void *bench_keep_output(const void *src, size_t n, char *why, size_t cap)
{
    void *copy = malloc(n + 2);
    if (!copy) {
        bench_out_of_memory(why, cap);
        return NULL;
    }
    memcpy(copy, src, n);
    return copy;
}
