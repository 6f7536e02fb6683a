/* Pieces shared by the operator test programs (run_common.h). */
#include "run_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rc_set_threads(dsops_context *ctx, int n)
{
    if (dsops_context_set_threads(ctx, n) != DSOPS_OK) {
        printf("cannot set %d threads\n", n);
        exit(1);
    }
}

float *rc_widen(const void *p, dsops_dtype dt, size_t n)
{
    float *f = tu_calloc(n, sizeof(float));
    switch (dt) {
    case DSOPS_FP32: memcpy(f, p, n * sizeof(float)); break;
    case DSOPS_BF16:
        for (size_t i = 0; i < n; i++)
            f[i] = tu_f32(((const uint16_t *)p)[i]);
        break;
    case DSOPS_FP16: dsops_fp16_to_fp32(p, f, n); break;
    case DSOPS_INT8:
        for (size_t i = 0; i < n; i++)
            f[i] = (float)((const int8_t *)p)[i];
        break;
    default:
        printf("rc_widen: dtype %s\n", dsops_dtype_name(dt));
        exit(1);
    }
    return f;
}

int rc_compare_dense(const char *label, const void *out, const void *ref, dsops_dtype dt, size_t n, tu_tol tol)
{
    float *o = rc_widen(out, dt, n), *r = rc_widen(ref, dt, n);
    const int ok = tu_compare_close(label, o, r, n, tol, NULL);
    free(o);
    free(r);
    return ok;
}

void rc_check_threads(dsops_context *ctx, const char *label, rc_run_fn run, void *problem)
{
    unsigned char *first = NULL;
    size_t n_first = 0;
    for (int threads = 1; threads <= 3; threads++) {
        rc_set_threads(ctx, threads);
        char l[400];
        snprintf(l, sizeof l, "%s %d threads", label, threads);
        size_t n = 0;
        dsops_status st = DSOPS_OK;
        unsigned char *bytes = run(problem, &n, &st);
        if (!tu_check(bytes != NULL, "%s: status %s (%s)", l, dsops_status_name(st), dsops_last_error()))
            continue;
        if (!first) {
            first = bytes, n_first = n;
            continue;
        }
        tu_check_same_bytes(l, bytes, n, first, n_first, "1 thread");
        free(bytes);
    }
    free(first);
    rc_set_threads(ctx, 2);
}
