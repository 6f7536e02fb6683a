/* Every CI-sized named case of docs/CASES.md, one generic loop over the harness registry (bench_registry.h)
 * and the library's operator descriptions (dsops_op_find): no operator is named here.
 *
 * Per case: the family's problem (the data of docs/CASES.md, as `dsops bench` makes it), run on every tier the
 * CPU has when its work and bytes are below EVERY_TIER_WORK and EVERY_TIER_BYTES, else on the best tier. Every
 * run starts from the same in-out tensors (caches, states) and writes into outputs first filled with a poison
 * pattern (NaN, or an integer no operator produces), and the family's check compares them with the oracle
 * (ref/) at the operator's tolerance. Then the best tier at 1, 2 and 3 threads must give the same bytes in
 * every output and in-out tensor (thread-count determinism), and so must the call without its prepared object
 * for operators whose description has one (the call then packs the weights itself).
 *
 * Usage: test_cases [--op NAME] [filter]   (NAME: an operator, e.g. compressor; filter: see test_util.h)
 * DSOPS_TEST_QUICK=1 runs only the small cases. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_registry.h"
#include "call_record.h"
#include "test_util.h"

/* FLOP (or OP) and bytes per call under which a case runs on every tier: the scalar tier takes about a second
 * there. */
#define EVERY_TIER_WORK 0.5e9
#define EVERY_TIER_BYTES 64e6
#define MAX_CASES 512

static dsops_context *ctx;
static int default_threads;

/* ---- tensors of a call record, through its description ------------------------------------------------ */

/* The bytes that mark an output element as not written: a NaN of the float formats, the most negative value of
 * the integer ones (int8 quantisers are symmetric, indices are >= -1). */
static void poison_element(dsops_dtype dt, unsigned char out[8])
{
    static const uint16_t bf16 = 0x7fc1, fp16 = 0x7e01;
    static const uint32_t fp32 = 0x7fc00001u, i32 = 0x80000001u;
    static const uint64_t i64 = 0x8000000000000001ull;
    static const uint8_t i8 = 0x80;
    const void *p = dt == DSOPS_BF16 ? (const void *)&bf16 : dt == DSOPS_FP16 ? (const void *)&fp16
                  : dt == DSOPS_FP32 ? (const void *)&fp32 : dt == DSOPS_INT32 ? (const void *)&i32
                  : dt == DSOPS_INT64 ? (const void *)&i64 : (const void *)&i8;
    memcpy(out, p, dsops_dtype_size(dt));
}

/* The present tensors of a record that a run writes (outputs and in-outs), with dense copies. */
typedef struct written {
    const dsops_op_desc *desc;
    void *args;
    int count;
    int index[32];                /* description entries */
    unsigned char *before[32];    /* in-outs: the state every run starts from (outputs: NULL) */
    unsigned char *first[32];     /* the bytes of the one-thread run */
    unsigned char *after[32];     /* the bytes of the last run */
} written;

static int written_init(written *w, const char *op, void *args)
{
    memset(w, 0, sizeof *w);
    w->desc = dsops_op_find(op);
    w->args = args;
    if (!w->desc || !args)
        return 0;
    for (size_t i = 0; i < w->desc->n_tensors && w->count < 32; i++) {
        const dsops_tensor_desc *d = &w->desc->tensors[i];
        dsops_tensor *t = record_tensor(args, d);
        if (!t->data || !(record_is_output(d->role) || record_is_inout(d->role)))
            continue;
        size_t bytes = record_view_elements(t) * dsops_dtype_size(t->dtype) + 1;
        w->index[w->count] = (int)i;
        w->first[w->count] = tu_calloc(bytes, 1);
        w->after[w->count] = tu_calloc(bytes, 1);
        if (record_is_inout(d->role)) {
            w->before[w->count] = tu_calloc(bytes, 1);
            record_view_copy(t, w->before[w->count], RECORD_GATHER);
        }
        w->count++;
    }
    return 1;
}

static void written_free(written *w)
{
    for (int i = 0; i < w->count; i++)
        free(w->before[i]), free(w->first[i]), free(w->after[i]);
}

/* Before a run: in-outs back to their first state, outputs poisoned. */
static void written_reset(written *w)
{
    for (int i = 0; i < w->count; i++) {
        dsops_tensor *t = record_tensor(w->args, &w->desc->tensors[w->index[i]]);
        if (w->before[i]) {
            record_view_copy(t, w->before[i], RECORD_SCATTER);
        } else {
            unsigned char poison[8];
            poison_element(t->dtype, poison);
            record_view_copy(t, poison, RECORD_FILL);
        }
    }
}

/* After a run: its bytes into first (compare 0), or into after and 1 if they equal first's (else the name of
 * the first tensor that differs in *which). */
static int written_keep(written *w, int compare, const char **which)
{
    int same = 1;
    for (int i = 0; i < w->count; i++) {
        const dsops_tensor_desc *d = &w->desc->tensors[w->index[i]];
        dsops_tensor *t = record_tensor(w->args, d);
        size_t bytes = record_view_elements(t) * dsops_dtype_size(t->dtype);
        record_view_copy(t, compare ? w->after[i] : w->first[i], RECORD_GATHER);
        if (compare && same && memcmp(w->after[i], w->first[i], bytes) != 0) {
            same = 0;
            *which = d->name;
        }
    }
    return same;
}

/* ---- one case ---------------------------------------------------------------------------------------------- */

static dsops_status run_once(const bench_problem *bp, written *w)
{
    written_reset(w);
    return bp->run(ctx, bp->p);
}

/* Runs case c; in quick mode only when it is small. Returns 1 if it ran. */
static int run_case(const bench_case_ref *c)
{
    bench_problem bp;
    char why[512] = "";
    if (!tu_check(bench_make_problem(c, &bp, why, sizeof why) == 0, "%s: no problem (%s)", c->name, why)) {
        if (bp.p && bp.release)
            bp.release(bp.p);
        return 1;
    }
    const int every_tier = bp.work < EVERY_TIER_WORK && bp.bytes < EVERY_TIER_BYTES, best = (int)dsops_isa_detected();
    if (tu_quick() && !every_tier) {
        bp.release(bp.p);
        return 0;
    }
    written w;
    if (!tu_check(written_init(&w, bench_case_op(c), bp.args), "%s: no description of %s or no call record",
                  c->name, bench_case_op(c))) {
        bp.release(bp.p);
        return 1;
    }
    for (int isa = every_tier ? DSOPS_ISA_SCALAR : best; isa <= best; isa++) {
        if (!tu_set_tier(ctx, isa))
            continue;
        char label[300];
        snprintf(label, sizeof label, "%s [%s]", c->name, dsops_isa_name((dsops_isa)isa));
        dsops_status st = run_once(&bp, &w);
        if (!tu_check(st == DSOPS_OK, "%s: status %s (%s)", label, dsops_status_name(st), dsops_last_error()))
            continue;
        why[0] = 0;
        tu_check(bp.check(bp.p, why, sizeof why) == 0, "%s: against the oracle: %s", label, why);
    }
    /* thread-count determinism on the best tier: every written byte as at one thread */
    tu_set_tier(ctx, (dsops_isa)best);
    for (int threads = 1; threads <= 3; threads++) {
        dsops_context_set_threads(ctx, threads);
        dsops_status st = run_once(&bp, &w);
        if (!tu_check(st == DSOPS_OK, "%s: %d threads: status %s (%s)", c->name, threads, dsops_status_name(st),
                      dsops_last_error()))
            break;
        const char *which = "";
        int same = written_keep(&w, threads > 1, &which);
        if (threads > 1)
            tu_check(same, "%s: %d threads write other bytes than 1 thread into %s", c->name, threads, which);
    }
    /* an operator with weights packed once (its description's prepare): the call without the prepared object
     * packs them itself and must write the same bytes */
    const dsops_op_desc *d = w.desc;
    if (d->prepare) {
        const dsops_prepared **slot = (const dsops_prepared **)((char *)bp.args + d->prepared_offset);
        const dsops_prepared *given = *slot;
        if (given) {
            *slot = NULL;
            dsops_status st = run_once(&bp, &w);
            const char *which = "";
            if (tu_check(st == DSOPS_OK, "%s: unprepared: status %s (%s)", c->name, dsops_status_name(st),
                         dsops_last_error()))
                tu_check(written_keep(&w, 1, &which), "%s: the unprepared call writes other bytes into %s", c->name,
                         which);
            *slot = given;
        }
    }
    dsops_context_set_threads(ctx, default_threads);
    written_free(&w);
    bp.release(bp.p);
    return 1;
}

int main(int argc, char **argv)
{
    const char *op = NULL;
    if (argc >= 3 && strcmp(argv[1], "--op") == 0) {
        op = argv[2];
        argv[2] = argv[0];
        argc -= 2, argv += 2;
    }
    tu_init(argc, argv, 42);
    ctx = tu_context();
    static bench_case_ref cases[MAX_CASES];
    int n = bench_all_cases(cases, MAX_CASES), ran = 0, considered = 0;
    default_threads = dsops_context_threads(ctx);
    tu_check(n > 0 && n < MAX_CASES, "the registry lists %d cases", n);
    for (int i = 0; i < n; i++) {
        const bench_case_ref *c = &cases[i];
        if (!c->ci || (op && strcmp(op, bench_case_op(c)) != 0) || !tu_selected(c->name))
            continue;
        considered++;
        ran += run_case(c);
    }
    if (tu_verbose())
        printf("%d of %d cases ran\n", ran, considered);
    tu_check(considered > 0 || !op, "the registry has no CI case of operator %s", op ? op : "");
    dsops_context_destroy(ctx);
    return tu_finish();
}
