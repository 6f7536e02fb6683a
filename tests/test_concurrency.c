/* Concurrency (dsops.h, docs/OPERATORS.md §1.7): calls on separate contexts from many threads at once give the
 * bytes a lone call gives; a context that another thread's call holds is refused with DSOPS_ERR_BUSY before
 * anything is read or written, while the holding thread may nest calls on it; and the scratch limit refuses a
 * call before it allocates or writes. Run under ThreadSanitizer in CI. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "problems_check.h"
#include "test_util.h"

enum { CALLERS = 6 };

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

/* Threads of caller i's context. The OpenMP runtime's own barriers are invisible to ThreadSanitizer, which
 * would report every parallel region; under it each context runs one thread, so what it checks are the
 * callers' threads against each other. */
static int context_threads(int caller_id)
{
#ifdef UNDER_TSAN
    (void)caller_id;
    return 1;
#else
    return 1 + caller_id % 2;
#endif
}

/* A small sparse attention problem; every caller builds its own copy from the same seed. (Its spec reads like
 * the operator tests' base specs, in shape only: these fields are this test's own.) */
static tp_problem *make_problem(void)
{
    tp_spec s;
    memset(&s, 0, sizeof s);
    s.B = 2;
    s.S[0] = 2, s.S[1] = 3;
    s.seqused[0] = 300, s.seqused[1] = 77;
    s.N = 5;
    s.Dc = 128;
    s.Dr = 64;
    s.K = 64;
    s.BS = 16;
    s.layout = DSOPS_KV_SPLIT_INT8;
    s.p_mode = DSOPS_P_NORMALISED;
    s.with_lse = 1;
    s.index_mode = TP_IDX_ZOO;
    return tp_make(&s, 7);
}

/* Outputs of one call: out [T, N, Dc] bf16 and lse [T, N], as whole buffers (guards included). */
typedef struct outputs {
    uint16_t *out;
    float *lse;
} outputs;

static void save_outputs(const tp_problem *p, outputs *o)
{
    o->out = tu_memdup(p->out_buf, sizeof *p->out_buf * (size_t)p->out_buf_n);
    o->lse = tu_memdup(p->lse_buf, sizeof *p->lse_buf * (size_t)p->lse_buf_n);
}

static int same_outputs(const tp_problem *p, const outputs *o)
{
    return memcmp(p->out_buf, o->out, sizeof *p->out_buf * (size_t)p->out_buf_n) == 0 &&
           memcmp(p->lse_buf, o->lse, sizeof *p->lse_buf * (size_t)p->lse_buf_n) == 0;
}

static outputs reference;

/* ---- separate contexts -------------------------------------------------------------------------------------- */

typedef struct caller {
    int id, calls, failures, mismatches;
    char message[256];
} caller;

static void *separate_context_caller(void *arg)
{
    caller *c = arg;
    tp_problem *p = make_problem();
    dsops_context *ctx = NULL;
    if (!p || dsops_context_create(&ctx) != DSOPS_OK || dsops_context_set_threads(ctx, context_threads(c->id)) != DSOPS_OK) {
        c->failures++;
        snprintf(c->message, sizeof c->message, "set-up failed: %s", dsops_last_error());
    }
    for (int i = 0; p && ctx && i < c->calls; i++) {
        tp_reset_outputs(p);
        dsops_status st = dsops_sparse_flash_attention_v32(ctx, &p->args);
        if (st != DSOPS_OK) {
            c->failures++;
            snprintf(c->message, sizeof c->message, "%s: %s", dsops_status_name(st), dsops_last_error());
        } else if (!same_outputs(p, &reference)) {
            c->mismatches++;
        }
    }
    dsops_context_destroy(ctx);
    tp_free(p);
    return NULL;
}

static void test_separate_contexts(void)
{
    if (!tu_selected("separate_contexts"))
        return;
    pthread_t th[CALLERS];
    caller c[CALLERS];
    for (int i = 0; i < CALLERS; i++) {
        c[i] = (caller){.id = i, .calls = tu_quick() ? 4 : 20};
        tu_check(pthread_create(&th[i], NULL, separate_context_caller, &c[i]) == 0, "pthread_create %d", i);
    }
    for (int i = 0; i < CALLERS; i++) {
        pthread_join(th[i], NULL);
        tu_check(c[i].failures == 0, "caller %d (%d threads): %d of %d calls failed (%s)", i, context_threads(i), c[i].failures,
                 c[i].calls, c[i].message);
        tu_check(c[i].mismatches == 0, "caller %d (%d threads): %d of %d calls differ from a lone call", i, context_threads(i),
                 c[i].mismatches, c[i].calls);
    }
}

/* ---- one context, two threads ------------------------------------------------------------------------------- */

typedef struct holder {
    dsops_context *ctx;
    atomic_int stage; /* 0 start, 1 the holder holds ctx, 2 the other thread has tried, 3 released */
} holder;

static void wait_for(atomic_int *v, int value)
{
    while (atomic_load(v) < value)
        sched_yield();
}

/* Holds the context as a call in progress does, until the main thread has tried to use it. */
static void *hold_context(void *arg)
{
    holder *h = arg;
    dsops_context *use = NULL;
    dsops_status st = dsops_context_begin(h->ctx, &use);
    atomic_store(&h->stage, st == DSOPS_OK ? 1 : -100);
    wait_for(&h->stage, 2);
    if (st == DSOPS_OK)
        dsops_context_end(h->ctx, use);
    atomic_store(&h->stage, 3);
    return NULL;
}

static void test_busy_context(void)
{
    if (!tu_selected("busy"))
        return;
    tp_problem *p = make_problem();
    dsops_context *ctx = NULL;
    if (!tu_check(p && dsops_context_create(&ctx) == DSOPS_OK, "set-up: %s", dsops_last_error()))
        return;
    holder h = {.ctx = ctx};
    atomic_init(&h.stage, 0);
    pthread_t th;
    tu_check(pthread_create(&th, NULL, hold_context, &h) == 0, "pthread_create");
    wait_for(&h.stage, 1);
    tp_reset_outputs(p);
    dsops_status st = dsops_sparse_flash_attention_v32(ctx, &p->args);
    tu_check_rejected("a context held by another thread", st, DSOPS_ERR_BUSY, "another thread");
    tu_check(tp_outputs_untouched(p), "the refused call wrote its outputs");
    atomic_store(&h.stage, 2);
    pthread_join(th, NULL);
    tu_check(atomic_load(&h.stage) == 3, "the holding thread could not take the context");
    tp_reset_outputs(p);
    st = dsops_sparse_flash_attention_v32(ctx, &p->args);
    tu_check_accepted("the same call once the context is released", st);
    tu_check(st != DSOPS_OK || same_outputs(p, &reference), "the call after the release differs from a lone call");

    /* nested calls of one thread (a fused operator's stages) keep the context */
    dsops_context *use = NULL, *inner = NULL;
    tu_check(dsops_context_begin(ctx, &use) == DSOPS_OK && dsops_context_begin(ctx, &inner) == DSOPS_OK &&
                 use == ctx && inner == ctx,
             "nested begin on the holding thread refused (%s)", dsops_last_error());
    tp_reset_outputs(p);
    tu_check_accepted("a call nested in the thread's own hold", dsops_sparse_flash_attention_v32(ctx, &p->args));
    dsops_context_end(ctx, inner);
    dsops_context_end(ctx, use);
    tu_check(atomic_load(&ctx->owner) == NULL && ctx->depth == 0, "the context is still held after the last end");
    dsops_context_destroy(ctx);
    tp_free(p);
}

/* Two threads hammer one context: every call is either refused with DSOPS_ERR_BUSY, its outputs untouched, or
 * gives the lone call's bytes. */
typedef struct hammer {
    dsops_context *ctx;
    int calls, ok, busy, wrong;
    char message[256];
} hammer;

static void *hammer_context(void *arg)
{
    hammer *hm = arg;
    tp_problem *p = make_problem();
    for (int i = 0; p && i < hm->calls; i++) {
        tp_reset_outputs(p);
        dsops_status st = dsops_sparse_flash_attention_v32(hm->ctx, &p->args);
        if (st == DSOPS_OK && same_outputs(p, &reference)) {
            hm->ok++;
        } else if (st == DSOPS_ERR_BUSY && tp_outputs_untouched(p)) {
            hm->busy++;
        } else {
            hm->wrong++;
            snprintf(hm->message, sizeof hm->message, "%s: %s", dsops_status_name(st), dsops_last_error());
        }
    }
    tp_free(p);
    return NULL;
}

static void test_shared_context(void)
{
    if (!tu_selected("shared"))
        return;
    dsops_context *ctx = NULL;
    if (!tu_check(dsops_context_create(&ctx) == DSOPS_OK, "context_create: %s", dsops_last_error()))
        return;
    dsops_context_set_threads(ctx, 1);
    hammer hm[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        hm[i] = (hammer){.ctx = ctx, .calls = tu_quick() ? 20 : 100};
        tu_check(pthread_create(&th[i], NULL, hammer_context, &hm[i]) == 0, "pthread_create %d", i);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        tu_check(hm[i].wrong == 0, "thread %d: %d calls neither succeeded with the lone call's bytes nor were refused "
                                   "untouched (last: %s)", i, hm[i].wrong, hm[i].message);
        printf("shared context, thread %d: %d calls ran, %d refused as busy\n", i, hm[i].ok, hm[i].busy);
    }
    tu_check(atomic_load(&ctx->owner) == NULL, "the context is still held after both threads ended");
    dsops_context_destroy(ctx);
}

/* ---- scratch limit ------------------------------------------------------------------------------------------ */

static void test_scratch_limit(void)
{
    if (!tu_selected("scratch_limit"))
        return;
    tp_problem *p = make_problem();
    dsops_context *ctx = NULL;
    if (!tu_check(p && dsops_context_create(&ctx) == DSOPS_OK, "set-up: %s", dsops_last_error()))
        return;
    tu_check(dsops_context_scratch_limit(ctx) > 0, "the default limit is 0");
    tu_check_rejected("scratch limit 0", dsops_context_set_scratch_limit(ctx, 0), DSOPS_ERR_PARAM, "scratch limit");
    tu_check_rejected("scratch limit on NULL", dsops_context_set_scratch_limit(NULL, 1 << 20), DSOPS_ERR_NULL, "ctx");
    tu_check(dsops_context_set_scratch_limit(ctx, 4096) == DSOPS_OK && dsops_context_scratch_limit(ctx) == 4096,
             "set_scratch_limit(4096)");
    tp_reset_outputs(p);
    dsops_status st = dsops_sparse_flash_attention_v32(ctx, &p->args);
    tu_check_rejected("a call beyond the scratch limit", st, DSOPS_ERR_NOMEM, "scratch limit of 4096 bytes");
    tu_check(tp_outputs_untouched(p), "the call refused for its scratch wrote its outputs");
    tu_check(ctx->scratch_bytes + ctx->outer_bytes + ctx->matmul_bytes <= 4096,
             "the context allocated %zu bytes beyond its limit", ctx->scratch_bytes + ctx->outer_bytes + ctx->matmul_bytes);
    tu_check(dsops_context_set_scratch_limit(ctx, (size_t)1 << 30) == DSOPS_OK, "set_scratch_limit(1 GiB)");
    tu_check_accepted("the same call under a 1 GiB limit", dsops_sparse_flash_attention_v32(ctx, &p->args));
    tu_check(same_outputs(p, &reference), "the call under a 1 GiB limit differs from a lone call");
    dsops_context_destroy(ctx);
    tp_free(p);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, 7);
    tp_problem *p = make_problem();
    if (!tu_check(p != NULL, "problem"))
        return tu_finish();
    tp_reset_outputs(p);
    dsops_context *lone = NULL;
    tu_check(dsops_context_create(&lone) == DSOPS_OK && dsops_context_set_threads(lone, context_threads(0)) == DSOPS_OK,
             "context: %s", dsops_last_error());
    tu_check_accepted("the lone call", dsops_sparse_flash_attention_v32(lone, &p->args));
    dsops_context_destroy(lone);
    tp_compute_ref(p);
    tp_check(p, "the lone call against the oracle");
    save_outputs(p, &reference);
    tp_free(p);
    test_separate_contexts();
    test_busy_context();
    test_shared_context();
    test_scratch_limit();
    free(reference.out);
    free(reference.lse);
    return tu_finish();
}
