/* bench_matmuls (bench_registry.h): a case's matmuls alone. Apart from bench_registry.c because it hands the
 * library's internal matmul runner (dsops_linear_run, src/core/linear.h) to the family: only programs that link
 * the static library (the tool) use it, while the tests, which link the shared library, use the registry. */
#include "bench_family.h"

int bench_matmuls(const bench_case_ref *c, const bench_problem *bp, bench_problem *gemms, char *why, size_t cap)
{
    if (!c->family->matmuls_run)
        return -1;
    if (c->family->matmuls_check && c->family->matmuls_check(bp->p, why, cap))
        return 1;
    *(bench_linear_run_fn *)bp->p = dsops_linear_run; /* the problem's first member (bench_family.h) */
    *gemms = *bp;
    gemms->run = c->family->matmuls_run;
    gemms->check = bench_no_check;
    gemms->release = bench_no_release;
    gemms->vendor_us = 0.0;
    return 0;
}
