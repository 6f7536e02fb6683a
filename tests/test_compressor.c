/* compressor (spec §3.4) against its oracle (ref/ref_compressor.c), on every instruction-set tier from
 * scalar up to the detected one:
 *  - the data of CI cases of docs/CASES.md "compressor" in other calls: the vendor's decode shapes with the
 *    packed layout on the detected tier, v4_cmp_c4a_prefill_then_decode as prefill 1023 + decode 1 against
 *    the one-call result (the cases themselves run in tests/test_cases.c); out 1e-4 / 2^-7 / 0.005, states
 *    1e-3 / 1e-3 / 0 over the whole tensors with every row the call does not write bitwise unchanged,
 *    out_count exact;
 *  - start_pos 0 ... 7 and around block boundaries (126, 127, 128, 255) with S 1 ... 9 for c4a, c4li and
 *    c128a: two sequences per call, block-table columns of blocks without a needed position set to -1, NaN
 *    in every state row the call must not read, a score table of its own with another block size;
 *  - prefill then token-by-token decode (two sequences, one finishing earlier: zero-token sequences) equals
 *    one prefill, for the oracle bitwise and for the library within the tolerances; every step of it also
 *    against the oracle from the oracle's state;
 *  - rings: later positions win on a shared row; rings smaller than C R decoded step by step;
 *  - row_per_seq, calls that close no window (zero rows), window 0 without a previous half, explicit
 *    dim / ratio / overlap / rotate, the three rope modes and rope_inverse, norm_eps 0, a strided x, an
 *    absent out_count, bf16 and fp32 norm weights, tables and Hadamard matrices;
 *  - channel counts that are no multiple of a vector width (67, 72, 100);
 *  - a hand-computed call that checks the oracle itself; bitwise determinism for 1, 2 and 3 threads on
 *    every tier.
 *
 * Small problems use "grid" data: x in {-1, -3/4, ..., 1}, weights multiples of 2^-6 in [-1/2, 1/2], ape
 * multiples of 2^-8, so every projection is exact in fp32 whatever the summation order, and pre-call state
 * rows hold arbitrary fp32 values (some logits -Inf). What remains to differ between the library and the
 * oracle is the softmax, exp and RMSNorm rounding. A small problem leaves the 0.005 ratio no slack (one bf16
 * flip amplified by a rotation cancellation fails), so each small call is checked element-wise against a
 * coarse bound (0.05 + 2^-7 |ref|, far below what a wrong candidate, window or row produces) and the spec
 * tolerance is applied to all outputs of a group of calls together, per tier. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "problems.h"
#include "ref.h"
#include "run_common.h"
#include "test_util.h"

static dsops_context *ctx;
static tu_rng rng;

static const tu_tol OUT_TOL = {1e-4, 1.0 / 128, 0.005};
static const tu_tol STATE_TOL = {1e-3, 1e-3, 0};
static const tu_tol COARSE_TOL = {0.05, 1.0 / 128, 0};

#define GUARD_I32 (-7)

/* ---- helpers ------------------------------------------------------------------------------------ */

static size_t numel(const dsops_tensor *t)
{
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= (size_t)t->shape[i];
    return n;
}

static int64_t i32_at(const dsops_tensor *t, int64_t i0, int64_t i1)
{
    const int32_t *d = t->data;
    return d[i0 * t->stride[0] + (t->ndim > 1 ? i1 * t->stride[1] : 0)];
}

static void fill_u16(uint16_t *p, size_t n, uint16_t v)
{
    for (size_t i = 0; i < n; i++)
        p[i] = v;
}

static void fill_i32(int32_t *p, size_t n, int32_t v)
{
    for (size_t i = 0; i < n; i++)
        p[i] = v;
}

static const char *tier_name(int isa) { return dsops_isa_name((dsops_isa)isa); }

/* ---- outputs of a group of small calls, compared together with the spec tolerance ---------------- */

typedef struct agg {
    float *o, *r;
    size_t n, cap;
} agg;

static agg aggs[DSOPS_ISA_COUNT];

static void agg_add(agg *g, const uint16_t *o, const uint16_t *r, size_t n)
{
    if (g->n + n > g->cap) {
        g->cap = 2 * (g->n + n);
        g->o = realloc(g->o, g->cap * sizeof(float));
        g->r = realloc(g->r, g->cap * sizeof(float));
        if (!g->o || !g->r) {
            printf("out of memory\n");
            exit(1);
        }
    }
    for (size_t i = 0; i < n; i++) {
        g->o[g->n + i] = tu_f32(o[i]);
        g->r[g->n + i] = tu_f32(r[i]);
    }
    g->n += n;
}

static void agg_flush(const char *what)
{
    for (int isa = 0; isa < DSOPS_ISA_COUNT; isa++) {
        agg *g = &aggs[isa];
        if (g->n > 0) {
            char l[200];
            snprintf(l, sizeof l, "%s [%s]: all outputs together", what, tier_name(isa));
            tu_compare_close(l, g->o, g->r, g->n, OUT_TOL, NULL);
        }
        g->n = 0;
    }
}

/* ---- the oracle's result of one call and the checks of the library's ---------------------------- */

typedef struct cref {
    uint16_t *out; /* [NO, D] */
    int32_t *cnt;  /* [B] */
    float *kv, *sc; /* states after the call (dense, as the call's) */
} cref;

/* The oracle on a's arguments with the states taken from kv_in / sc_in (dense); outputs into fresh buffers.
 * Every out element starts as a guard so that rows the oracle leaves unwritten are visible. */
static void ref_run(const dsops_compressor_args *a, const float *kv_in, const float *sc_in, cref *r)
{
    const size_t nout = numel(&a->out), B = (size_t)a->start_pos.shape[0];
    const size_t nkv = numel(&a->kv_state), nsc = numel(&a->score_state);
    r->out = tu_calloc(nout, 2);
    r->cnt = tu_calloc(B, 4);
    r->kv = tu_memdup(kv_in, nkv * 4);
    r->sc = tu_memdup(sc_in, nsc * 4);
    fill_u16(r->out, nout, CASES_GUARD_BF16);
    dsops_compressor_args b = *a;
    b.out.data = r->out;
    b.out_count = dsops_tensor_make(r->cnt, DSOPS_INT32, 1, (int64_t[]){(int64_t)B});
    b.kv_state.data = r->kv;
    b.score_state.data = r->sc;
    dsops_ref_compressor(&b);
}

static void ref_free(cref *r)
{
    free(r->out), free(r->cnt), free(r->kv), free(r->sc);
    memset(r, 0, sizeof *r);
}

/* mask[row] = 1 for every row of `state` (viewed [NB BS, W]) that the call writes through `tab`. */
static uint8_t *written_rows(const dsops_compressor_args *a, const dsops_tensor *state, const dsops_tensor *tab)
{
    const int64_t NB = state->shape[0], BS = state->shape[1], B = a->start_pos.shape[0];
    uint8_t *mask = tu_calloc((size_t)(NB * BS), 1);
    for (int64_t b = 0; b < B; b++) {
        const int64_t c0 = i32_at(&a->cu_seqlens_q, b, 0), c1 = i32_at(&a->cu_seqlens_q, b + 1, 0);
        for (int64_t t = c0; t < c1; t++) {
            const int64_t p = i32_at(&a->start_pos, b, 0) + (t - c0);
            const int64_t row = i32_at(tab, b, p / BS) * BS + p % BS;
            if (row >= 0 && row < NB * BS)
                mask[row] = 1;
        }
    }
    return mask;
}

/* One state after the call: `lib` against `ref` with the state tolerance over the whole tensor, and every
 * row the call does not write bitwise equal to `before`, in the library's result and in the oracle's. */
static void compare_state(const char *label, const dsops_compressor_args *a, int score, const float *lib,
                          const float *before, const float *ref)
{
    const dsops_tensor *st = score ? &a->score_state : &a->kv_state;
    const dsops_tensor *tab = score ? &a->score_state_block_table : &a->kv_state_block_table;
    const char *name = score ? "score_state" : "kv_state";
    const int64_t rows = st->shape[0] * st->shape[1], W = st->shape[2];
    char l[300];
    snprintf(l, sizeof l, "%s %s", label, name);
    tu_compare_close(l, lib, ref, (size_t)(rows * W), STATE_TOL, NULL);
    uint8_t *mask = written_rows(a, st, tab);
    int64_t bad = 0, bad_ref = 0, first = -1;
    for (int64_t r = 0; r < rows; r++) {
        if (mask[r])
            continue;
        if (memcmp(lib + r * W, before + r * W, (size_t)W * 4) != 0) {
            if (bad++ == 0)
                first = r;
        }
        bad_ref += memcmp(ref + r * W, before + r * W, (size_t)W * 4) != 0;
    }
    tu_check(bad == 0, "%s: %lld rows the call does not write changed (first: row %lld)", l, (long long)bad,
             (long long)first);
    tu_check(bad_ref == 0, "%s: the oracle changed %lld rows the call does not write", l, (long long)bad_ref);
    free(mask);
}

/* Checks the library's result of one call (a: its arguments; out, out_count and states as the library left
 * them) against the oracle's. kv_in / sc_in: the states before the call. guarded: out and out_count have one
 * guard element after their end. g NULL: out with tol; else out element-wise with the coarse bound and
 * added to g. */
static void check_call(const char *label, const dsops_compressor_args *a, const float *kv_in, const float *sc_in,
                       const cref *r, int guarded, tu_tol tol, agg *g)
{
    const int64_t NO = a->out.shape[0], D = a->out.shape[1], B = a->start_pos.shape[0];
    const uint16_t *out = a->out.data;
    char l[300];
    if (a->out_count.data) {
        const int32_t *cnt = a->out_count.data;
        int64_t first = -1;
        for (int64_t b = 0; b < B && first < 0; b++)
            if (cnt[b] != r->cnt[b])
                first = b;
        tu_check(first < 0, "%s: out_count[%lld] = %d, expected %d", label, (long long)first,
                 first < 0 ? 0 : cnt[first], first < 0 ? 0 : r->cnt[first]);
        if (guarded)
            tu_check(cnt[B] == GUARD_I32, "%s: out_count written beyond its end", label);
    }
    /* rows that receive no entry: +0 exactly (packed: rows from the number of entries on; row_per_seq: rows
     * of sequences without an entry and rows >= B) */
    int64_t entries = 0;
    for (int64_t b = 0; b < B; b++)
        entries += r->cnt[b];
    int64_t bad_zero = -1, bad_ref_zero = -1;
    for (int64_t row = 0; row < NO; row++) {
        const int filled = a->out_layout == DSOPS_COMPRESSOR_ROW_PER_SEQ ? (row < B && r->cnt[row] > 0) : row < entries;
        for (int64_t d = 0; d < D && !filled; d++) {
            if (out[row * D + d] != 0 && bad_zero < 0)
                bad_zero = row;
            if (r->out[row * D + d] != 0 && bad_ref_zero < 0)
                bad_ref_zero = row;
        }
    }
    tu_check(bad_zero < 0, "%s: out row %lld receives no entry, yet is not +0", label, (long long)bad_zero);
    tu_check(bad_ref_zero < 0, "%s: the oracle left out row %lld (no entry) non-zero", label, (long long)bad_ref_zero);
    float *o = tu_widen_bf16(out, (size_t)(NO * D)), *rf = tu_widen_bf16(r->out, (size_t)(NO * D));
    snprintf(l, sizeof l, "%s out", label);
    if (g) {
        tu_compare_close(l, o, rf, (size_t)(NO * D), COARSE_TOL, NULL);
        agg_add(g, out, r->out, (size_t)(NO * D));
    } else {
        tu_compare_close(l, o, rf, (size_t)(NO * D), tol, NULL);
    }
    free(o), free(rf);
    if (guarded)
        tu_check(out[NO * D] == CASES_GUARD_BF16, "%s: out written beyond its end", label);
    compare_state(label, a, 0, a->kv_state.data, kv_in, r->kv);
    compare_state(label, a, 1, a->score_state.data, sc_in, r->sc);
}

/* ---- calls on the data of named cases of docs/CASES.md --------------------------------------------------- */

/* A call on the tokens [from[b], from[b] + n[b]) of each sequence of `w` (a packed call with start_pos 0
 * for every sequence): x rows and rope rows copied from w (the rope row of entry (b, k) is w's packed row of
 * that entry), everything else shared with w; NO = entries + 1 (the extra row must come back zero); out and
 * out_count with a guard element. */
typedef struct ccall {
    dsops_compressor_args a;
    uint16_t *x, *out;
    int32_t *cu, *sp, *cnt;
    void *rc, *rs;
    int64_t entries;
} ccall;

static void call_make(ccall *c, const dsops_compressor_args *w, const int64_t *from, const int64_t *n)
{
    memset(c, 0, sizeof *c);
    const int64_t B = w->start_pos.shape[0], H = w->x.shape[1], D = w->out.shape[1], R = w->ape.shape[0];
    const size_t resz = dsops_dtype_size(w->rope_cos.dtype);
    int64_t T = 0;
    c->cu = tu_calloc((size_t)B + 1, 4);
    c->sp = tu_calloc((size_t)B, 4);
    for (int64_t b = 0; b < B; b++) {
        c->cu[b] = (int32_t)T;
        c->sp[b] = (int32_t)from[b];
        T += n[b];
        c->entries += (from[b] + n[b]) / R - from[b] / R;
    }
    c->cu[B] = (int32_t)T;
    const int64_t NO = c->entries + 1;
    c->x = tu_calloc((size_t)(T * H), 2);
    c->rc = tu_calloc((size_t)(NO * 64), resz);
    c->rs = tu_calloc((size_t)(NO * 64), resz);
    c->out = tu_calloc((size_t)(NO * D) + 1, 2);
    c->cnt = tu_calloc((size_t)B + 1, 4);
    int64_t row = 0, wrow0 = 0;
    for (int64_t b = 0; b < B; b++) {
        const int64_t wc0 = i32_at(&w->cu_seqlens_q, b, 0), L = i32_at(&w->cu_seqlens_q, b + 1, 0) - wc0;
        for (int64_t i = 0; i < n[b]; i++)
            memcpy(c->x + (c->cu[b] + i) * H, (const uint16_t *)w->x.data + (wc0 + from[b] + i) * w->x.stride[0],
                   (size_t)H * 2);
        for (int64_t k = from[b] / R; k < (from[b] + n[b]) / R; k++, row++) {
            const int64_t wrow = wrow0 + k;
            memcpy((char *)c->rc + (size_t)row * 64 * resz,
                   (const char *)w->rope_cos.data + (size_t)(wrow * w->rope_cos.stride[0]) * resz, 64 * resz);
            memcpy((char *)c->rs + (size_t)row * 64 * resz,
                   (const char *)w->rope_sin.data + (size_t)(wrow * w->rope_sin.stride[0]) * resz, 64 * resz);
        }
        wrow0 += L / R;
    }
    c->a = *w;
    c->a.x = dsops_tensor_make(c->x, DSOPS_BF16, 2, (int64_t[]){T, H});
    c->a.cu_seqlens_q = dsops_tensor_make(c->cu, DSOPS_INT32, 1, (int64_t[]){B + 1});
    c->a.start_pos = dsops_tensor_make(c->sp, DSOPS_INT32, 1, (int64_t[]){B});
    c->a.rope_cos = dsops_tensor_make(c->rc, w->rope_cos.dtype, 2, (int64_t[]){NO, 64});
    c->a.rope_sin = dsops_tensor_make(c->rs, w->rope_sin.dtype, 2, (int64_t[]){NO, 64});
    c->a.out = dsops_tensor_make(c->out, DSOPS_BF16, 2, (int64_t[]){NO, D});
    c->a.out_count = dsops_tensor_make(c->cnt, DSOPS_INT32, 1, (int64_t[]){B});
    fill_u16(c->out, (size_t)(NO * D) + 1, CASES_GUARD_BF16);
    fill_i32(c->cnt, (size_t)B + 1, GUARD_I32);
}

static void call_free(ccall *c)
{
    free(c->x), free(c->out), free(c->cu), free(c->sp), free(c->cnt), free(c->rc), free(c->rs);
}

/* The calls of a prefill-then-decode schedule of w: call 0 takes N[b] tokens of each sequence, every later
 * call one more token of each sequence that has some left (0 tokens otherwise). Fills from / n of call j;
 * returns the number of calls. */
static int64_t schedule_calls(const dsops_compressor_args *w, const int64_t *N)
{
    const int64_t B = w->start_pos.shape[0];
    int64_t calls = 1;
    for (int64_t b = 0; b < B; b++) {
        const int64_t L = i32_at(&w->cu_seqlens_q, b + 1, 0) - i32_at(&w->cu_seqlens_q, b, 0);
        calls = L - N[b] + 1 > calls ? L - N[b] + 1 : calls;
    }
    return calls;
}

static void schedule_step(const dsops_compressor_args *w, const int64_t *N, int64_t j, int64_t *from, int64_t *n)
{
    const int64_t B = w->start_pos.shape[0];
    for (int64_t b = 0; b < B; b++) {
        const int64_t L = i32_at(&w->cu_seqlens_q, b + 1, 0) - i32_at(&w->cu_seqlens_q, b, 0);
        if (j == 0) {
            from[b] = 0, n[b] = N[b];
        } else {
            from[b] = N[b] + j - 1 < L ? N[b] + j - 1 : L;
            n[b] = from[b] < L ? 1 : 0;
        }
    }
}

/* Call j of the schedule of w (its tokens in from / n) on the states kv / sc. */
static void schedule_call(ccall *c, const dsops_compressor_args *w, const int64_t *N, int64_t j, int64_t *from,
                          int64_t *n, float *kv, float *sc)
{
    schedule_step(w, N, j, from, n);
    call_make(c, w, from, n);
    c->a.kv_state.data = kv;
    c->a.score_state.data = sc;
}

/* Runs the schedule of w on the library (isa >= 0) or the oracle (isa < 0), on the states kv / sc in place.
 * Each call is checked for its status, out_count, the zero extra row and the guards; its entries are copied
 * to out_all at their rows of the one-call packed output [entries of w, D]. */
static void run_schedule(const char *label, const dsops_compressor_args *w, const int64_t *N, int isa, float *kv,
                         float *sc, uint16_t *out_all)
{
    const int64_t B = w->start_pos.shape[0], D = w->out.shape[1], R = w->ape.shape[0];
    const int64_t calls = schedule_calls(w, N);
    int64_t from[CP_MAX_B], n[CP_MAX_B];
    for (int64_t j = 0; j < calls; j++) {
        ccall c;
        schedule_call(&c, w, N, j, from, n, kv, sc);
        if (isa < 0) {
            dsops_ref_compressor(&c.a);
        } else {
            dsops_status st = dsops_compressor(ctx, &c.a);
            if (!tu_check(st == DSOPS_OK, "%s [%s] call %lld: %s (%s)", label, tier_name(isa), (long long)j,
                          dsops_status_name(st), dsops_last_error())) {
                call_free(&c);
                return;
            }
        }
        const char *who = isa < 0 ? "oracle" : tier_name(isa);
        int cnt_ok = c.cnt[B] == GUARD_I32;
        for (int64_t b = 0; b < B; b++)
            cnt_ok &= c.cnt[b] == (from[b] + n[b]) / R - from[b] / R;
        tu_check(cnt_ok, "%s [%s] call %lld: out_count wrong", label, who, (long long)j);
        int zero_ok = c.out[(c.entries + 1) * D] == CASES_GUARD_BF16;
        for (int64_t d = 0; d < D; d++)
            zero_ok &= c.out[c.entries * D + d] == 0;
        tu_check(zero_ok, "%s [%s] call %lld: the extra out row is not +0 or out written beyond its end", label,
                 who, (long long)j);
        /* entries to their one-call rows */
        int64_t row = 0, wrow0 = 0;
        for (int64_t b = 0; b < B; b++) {
            const int64_t L = i32_at(&w->cu_seqlens_q, b + 1, 0) - i32_at(&w->cu_seqlens_q, b, 0);
            for (int64_t k = from[b] / R; k < (from[b] + n[b]) / R; k++, row++)
                memcpy(out_all + (wrow0 + k) * D, c.out + row * D, (size_t)D * 2);
            wrow0 += L / R;
        }
        call_free(&c);
    }
}

/* Every step of the schedule on every tier against the oracle, both starting from the oracle's state
 * before the step (coarse bound + the group's aggregate). */
static void steps_vs_oracle(const char *label, const dsops_compressor_args *w, const int64_t *N, const float *kv0,
                            const float *sc0)
{
    const int64_t calls = schedule_calls(w, N);
    const size_t nkv = numel(&w->kv_state), nsc = numel(&w->score_state);
    float *kv = tu_memdup(kv0, nkv * 4), *sc = tu_memdup(sc0, nsc * 4);
    float *lkv = tu_calloc(nkv, 4), *lsc = tu_calloc(nsc, 4);
    int64_t from[CP_MAX_B], n[CP_MAX_B];
    for (int64_t j = 0; j < calls; j++) {
        ccall c;
        schedule_call(&c, w, N, j, from, n, lkv, lsc);
        cref r;
        ref_run(&c.a, kv, sc, &r);
        for (int isa = 0; isa <= (int)dsops_isa_detected(); isa++) {
            dsops_context_set_isa(ctx, (dsops_isa)isa);
            memcpy(lkv, kv, nkv * 4), memcpy(lsc, sc, nsc * 4);
            fill_u16(c.out, numel(&c.a.out) + 1, CASES_GUARD_BF16);
            fill_i32(c.cnt, (size_t)c.a.start_pos.shape[0] + 1, GUARD_I32);
            char l[260];
            snprintf(l, sizeof l, "%s step %lld [%s]", label, (long long)j, tier_name(isa));
            dsops_status st = dsops_compressor(ctx, &c.a);
            if (tu_check(st == DSOPS_OK, "%s: %s (%s)", l, dsops_status_name(st), dsops_last_error()))
                check_call(l, &c.a, kv, sc, &r, 1, OUT_TOL, &aggs[isa]);
        }
        memcpy(kv, r.kv, nkv * 4), memcpy(sc, r.sc, nsc * 4);
        ref_free(&r);
        call_free(&c);
    }
    dsops_context_set_isa(ctx, dsops_isa_detected());
    free(kv), free(sc), free(lkv), free(lsc);
}

/* v4_cmp_c4a_prefill_then_decode: prefill 1023, then decode 1, against the one-call result of the library
 * (the last entry and the states, spec tolerances) and against the oracle (all entries). */
static void prefill_then_decode(const dsops_cmp_problem *p, const float *kv0, const float *sc0, const cref *r)
{
    const dsops_compressor_args *w = &p->args;
    const int64_t D = w->out.shape[1], E = p->entries;
    const size_t nkv = numel(&w->kv_state), nsc = numel(&w->score_state);
    const int64_t N[1] = {1023};
    for (int isa = 0; isa <= (int)dsops_isa_detected(); isa++) {
        dsops_context_set_isa(ctx, (dsops_isa)isa);
        char l[200];
        snprintf(l, sizeof l, "%s: prefill 1023 + decode 1 [%s]", p->c.name, tier_name(isa));
        /* the library's one call */
        float *kv1 = tu_memdup(kv0, nkv * 4), *sc1 = tu_memdup(sc0, nsc * 4);
        uint16_t *out1 = tu_calloc((size_t)(E * D), 2);
        dsops_compressor_args one = *w;
        one.kv_state.data = kv1, one.score_state.data = sc1, one.out.data = out1, one.out_count.data = NULL;
        dsops_status st = dsops_compressor(ctx, &one);
        tu_check(st == DSOPS_OK, "%s: the one call: %s", l, dsops_status_name(st));
        /* the two calls */
        float *kv2 = tu_memdup(kv0, nkv * 4), *sc2 = tu_memdup(sc0, nsc * 4);
        uint16_t *out2 = tu_calloc((size_t)(E * D), 2);
        run_schedule(l, w, N, isa, kv2, sc2, out2);
        float *a = tu_widen_bf16(out2 + (E - 1) * D, (size_t)D), *b = tu_widen_bf16(out1 + (E - 1) * D, (size_t)D);
        char l2[260];
        snprintf(l2, sizeof l2, "%s: last entry vs one call", l);
        tu_compare_close(l2, a, b, (size_t)D, OUT_TOL, NULL);
        free(a), free(b);
        snprintf(l2, sizeof l2, "%s: vs one call", l);
        compare_state(l2, w, 0, kv2, kv0, kv1);
        compare_state(l2, w, 1, sc2, sc0, sc1);
        a = tu_widen_bf16(out2, (size_t)(E * D)), b = tu_widen_bf16(r->out, (size_t)(E * D));
        snprintf(l2, sizeof l2, "%s: entries vs oracle", l);
        tu_compare_close(l2, a, b, (size_t)(E * D), OUT_TOL, NULL);
        free(a), free(b);
        snprintf(l2, sizeof l2, "%s: vs oracle", l);
        compare_state(l2, w, 0, kv2, kv0, r->kv);
        compare_state(l2, w, 1, sc2, sc0, r->sc);
        free(kv1), free(sc1), free(out1), free(kv2), free(sc2), free(out2);
    }
    dsops_context_set_isa(ctx, dsops_isa_detected());
}

/* The named cases' data in calls of other shapes: v4_cmp_c4a_prefill_then_decode as prefill + decode, and
 * the vendor cases with the packed layout (with one entry in every sequence or none at all, the packed rows
 * are the row_per_seq rows). */
static void run_case_scenarios(const dsops_cmp_case *c)
{
    const int schedule = strcmp(c->name, "v4_cmp_c4a_prefill_then_decode") == 0;
    if (!(schedule || c->vendor_data) || !tu_selected(c->name))
        return;
    if (tu_quick()) { /* sanitizer builds: the small cases only */
        int64_t T = 0;
        int uniform = 1;
        for (int i = 1; i < 8; i++)
            uniform &= c->S_each[i] == 0;
        for (int b = 0; b < c->B; b++)
            T += uniform ? c->S_each[0] : c->S_each[b];
        if (T * c->H > 64 * 4096)
            return;
    }
    double t0 = tu_now();
    dsops_cmp_problem *p = dsops_cmp_problem_make(c, tu_seed());
    if (!tu_check(p != NULL, "%s: problem generation failed", c->name))
        return;
    dsops_compressor_args *a = &p->args;
    const size_t nkv = numel(&a->kv_state), nsc = numel(&a->score_state), nout = numel(&a->out);
    const int64_t B = c->B;
    float *kv0 = tu_memdup(a->kv_state.data, nkv * 4), *sc0 = tu_memdup(a->score_state.data, nsc * 4);
    cref r;
    ref_run(a, kv0, sc0, &r);
    int64_t entries = 0;
    for (int64_t b = 0; b < B; b++)
        entries += r.cnt[b];
    if (c->vendor_data && (entries == 0 || entries == B)) {
        char l[200];
        snprintf(l, sizeof l, "%s packed [%s]", c->name, tier_name((int)dsops_isa_detected()));
        a->out_layout = DSOPS_COMPRESSOR_PACKED;
        memcpy(a->kv_state.data, kv0, nkv * 4), memcpy(a->score_state.data, sc0, nsc * 4);
        fill_u16(a->out.data, nout, CASES_GUARD_BF16);
        fill_i32(a->out_count.data, (size_t)B, GUARD_I32);
        dsops_status st = dsops_compressor(ctx, a);
        if (tu_check(st == DSOPS_OK, "%s: %s (%s)", l, dsops_status_name(st), dsops_last_error()))
            check_call(l, a, kv0, sc0, &r, 0, OUT_TOL, NULL);
        a->out_layout = DSOPS_COMPRESSOR_ROW_PER_SEQ;
    }
    if (schedule)
        prefill_then_decode(p, kv0, sc0, &r);
    printf("  %s: %lld entries; oracle, library + checks %.2f s\n", c->name, (long long)entries, tu_now() - t0);
    ref_free(&r);
    free(kv0), free(sc0);
    dsops_cmp_problem_free(p);
}

static void test_case_scenarios(void)
{
    int n;
    const dsops_cmp_case *cs = dsops_cmp_cases(&n);
    for (int i = 0; i < n; i++)
        if (cs[i].ci)
            run_case_scenarios(&cs[i]);
}

/* ---- small problems ---------------------------------------------------------------------------------- */

static const cp_variant V_C4A = {"c4a", 128, 4, 2, 0};
static const cp_variant V_C4LI = {"c4li", 128, 4, 2, 1};
static const cp_variant V_C128A = {"c128a", 64, 128, 1, 0};

/* The library's call from the states kv0 / sc0, with out and out_count poisoned. */
static dsops_status cp_run(cp_problem *p)
{
    memcpy(p->kv, p->kv0, numel(&p->a.kv_state) * 4);
    memcpy(p->sc, p->sc0, numel(&p->a.score_state) * 4);
    fill_u16(p->out, (size_t)(p->NO * p->s.v.D) + 1, CASES_GUARD_BF16);
    fill_i32(p->cnt, (size_t)p->s.B + 1, GUARD_I32);
    return dsops_compressor(ctx, &p->a);
}

/* One small problem on every tier against the oracle (coarse bound per call, aggregate per tier). */
static void cp_check_all_tiers(const char *label, cp_problem *p)
{
    cref r;
    ref_run(&p->a, p->kv0, p->sc0, &r);
    for (int isa = 0; isa <= (int)dsops_isa_detected(); isa++) {
        dsops_context_set_isa(ctx, (dsops_isa)isa);
        char l[260];
        snprintf(l, sizeof l, "%s [%s]", label, tier_name(isa));
        dsops_status st = cp_run(p);
        if (!tu_check(st == DSOPS_OK, "%s: %s (%s)", l, dsops_status_name(st), dsops_last_error()))
            continue;
        check_call(l, &p->a, p->kv0, p->sc0, &r, 1, OUT_TOL, &aggs[isa]);
        if (!p->a.out_count.data) {
            int kept = 1;
            for (int b = 0; b <= p->s.B; b++)
                kept &= p->cnt[b] == GUARD_I32;
            tu_check(kept, "%s: out_count absent, yet its buffer was written", l);
        }
    }
    dsops_context_set_isa(ctx, dsops_isa_detected());
    ref_free(&r);
}

/* ---- the oracle on a hand-computed call ------------------------------------------------------------ */

/* c4a-like with D 64, R 2, C 2, H 1: one sequence at start 3 with 2 tokens (positions 3, 4). Window 1
 * (positions 2, 3) closes at position 3: channel d pools (state u 0, 1; channel d), (state u 2; channel
 * D + d), (token 0; channel D + d). Rope tables cos 1, sin 0; norm weight 1. */
static void test_oracle_by_hand(void)
{
    if (!tu_selected("oracle by hand"))
        return;
    enum { D = 64, CD = 128, R = 2, BS = 4, NB = 2 };
    uint16_t x[2] = {tu_bf16(1.0f), tu_bf16(2.0f)}; /* [T 2, H 1] */
    uint16_t wkv[CD], wg[CD];                         /* [C D, 1] */
    float ape[R * CD];                                /* [R, C D] */
    uint16_t norm[D], rc[2 * 64], rs[2 * 64], out[2 * D];
    float kv[NB * BS * CD], sc[NB * BS * CD];
    int32_t cu[2] = {0, 2}, sp[1] = {3}, tab[2] = {1, 0}, cnt[1] = {-7}; /* logical 0 -> block 1, 1 -> 0 */
    for (int c = 0; c < CD; c++) {
        wkv[c] = tu_bf16((float)(c % 7 + 1) / 8.0f);
        wg[c] = tu_bf16((float)(c % 5) / 4.0f);
        ape[c] = 0.0f;
        ape[CD + c] = 0.5f;
    }
    for (int i = 0; i < D; i++)
        norm[i] = tu_bf16(1.0f);
    for (int i = 0; i < 128; i++)
        rc[i] = tu_bf16(1.0f), rs[i] = 0;
    for (int i = 0; i < NB * BS * CD; i++)
        kv[i] = sc[i] = NAN;
    /* positions 0, 1, 2 live in block 1, rows 0, 1, 2 */
    for (int u = 0; u < 3; u++)
        for (int c = 0; c < CD; c++) {
            kv[(1 * BS + u) * CD + c] = (float)(u + 1) + (float)c / 128.0f;
            sc[(1 * BS + u) * CD + c] = (float)((u + c) % 3) - 1.0f;
        }
    fill_u16(out, 2 * D, CASES_GUARD_BF16);
    dsops_compressor_args a;
    memset(&a, 0, sizeof a);
    a.x = dsops_tensor_make(x, DSOPS_BF16, 2, (int64_t[]){2, 1});
    a.cu_seqlens_q = dsops_tensor_make(cu, DSOPS_INT32, 1, (int64_t[]){2});
    a.start_pos = dsops_tensor_make(sp, DSOPS_INT32, 1, (int64_t[]){1});
    a.wkv = dsops_tensor_make(wkv, DSOPS_BF16, 2, (int64_t[]){CD, 1});
    a.wgate = dsops_tensor_make(wg, DSOPS_BF16, 2, (int64_t[]){CD, 1});
    a.ape = dsops_tensor_make(ape, DSOPS_FP32, 2, (int64_t[]){R, CD});
    a.norm_weight = dsops_tensor_make(norm, DSOPS_BF16, 1, (int64_t[]){D});
    a.rope_cos = dsops_tensor_make(rc, DSOPS_BF16, 2, (int64_t[]){2, 64});
    a.rope_sin = dsops_tensor_make(rs, DSOPS_BF16, 2, (int64_t[]){2, 64});
    a.kv_state = dsops_tensor_make(kv, DSOPS_FP32, 3, (int64_t[]){NB, BS, CD});
    a.score_state = dsops_tensor_make(sc, DSOPS_FP32, 3, (int64_t[]){NB, BS, CD});
    a.kv_state_block_table = dsops_tensor_make(tab, DSOPS_INT32, 2, (int64_t[]){1, 2});
    a.score_state_block_table = a.kv_state_block_table;
    a.out = dsops_tensor_make(out, DSOPS_BF16, 2, (int64_t[]){2, D});
    a.out_count = dsops_tensor_make(cnt, DSOPS_INT32, 1, (int64_t[]){1});
    a.norm_eps = 1e-6f;
    a.rope_mode = DSOPS_ROPE_INTERLEAVED;
    a.out_layout = DSOPS_COMPRESSOR_PACKED;
    /* expected, in double */
    double cval[D], ss = 0.0;
    for (int d = 0; d < D; d++) {
        double av[4], zv[4];
        for (int u = 0; u < 2; u++)
            av[u] = (double)(u + 1) + d / 128.0, zv[u] = (double)((u + d) % 3) - 1.0;
        av[2] = 3.0 + (D + d) / 128.0, zv[2] = (double)((2 + D + d) % 3) - 1.0;
        av[3] = tu_f32(wkv[D + d]), zv[3] = tu_f32(wg[D + d]) + 0.5; /* x = 1, ape row 3 % 2 = 1 */
        double mz = zv[0], den = 0.0, acc = 0.0;
        for (int i = 1; i < 4; i++)
            mz = zv[i] > mz ? zv[i] : mz;
        for (int i = 0; i < 4; i++)
            den += exp(zv[i] - mz);
        for (int i = 0; i < 4; i++)
            acc += av[i] * exp(zv[i] - mz) / den;
        cval[d] = tu_round_bf16((float)acc);
        ss += cval[d] * cval[d];
    }
    dsops_ref_compressor(&a);
    int ok = cnt[0] == 1;
    for (int d = 0; d < D; d++) {
        double want = cval[d] / sqrt(ss / D + 1e-6);
        double got = tu_f32(out[d]);
        ok &= fabs(got - want) <= fabs(want) / 128.0;
        ok &= out[D + d] == 0; /* row 1: no entry */
    }
    tu_check(ok, "oracle by hand: entry, zero row or out_count wrong");
    /* the state rows of positions 3 (block 1, row 3) and 4 (block 0, row 0) */
    int sok = 1;
    for (int c = 0; c < CD; c++) {
        sok &= kv[(1 * BS + 3) * CD + c] == tu_f32(wkv[c]);
        sok &= sc[(1 * BS + 3) * CD + c] == tu_f32(wg[c]) + 0.5f;
        sok &= kv[(0 * BS + 0) * CD + c] == 2.0f * tu_f32(wkv[c]);
        sok &= sc[(0 * BS + 0) * CD + c] == 2.0f * tu_f32(wg[c]) + 0.0f;
        /* position 5's row (never written) and position 0's row (read, not written) keep their values */
        sok &= isnan(kv[(0 * BS + 1) * CD + c]) && kv[(1 * BS + 0) * CD + c] == 1.0f + (float)c / 128.0f;
    }
    tu_check(sok, "oracle by hand: state rows wrong");
}

/* ---- start_pos and S sweep ----------------------------------------------------------------------- */

static void sweep_variant(cp_variant v)
{
    char what[80];
    snprintf(what, sizeof what, "sweep %s", v.name);
    if (!tu_selected(what))
        return;
    static const int64_t starts_full[] = {0, 1, 2, 3, 4, 5, 6, 7, 126, 127, 128, 255};
    static const int64_t starts_quick[] = {0, 3, 127};
    const int64_t *starts = tu_quick() ? starts_quick : starts_full;
    const int nst = tu_quick() ? 3 : 12;
    for (int si = 0; si < nst; si++)
        for (int64_t S = 1; S <= 9; S += tu_quick() ? 4 : 1) {
            cp_spec s = cp_spec_make(v, 64, 2);
            s.start[0] = starts[si], s.len[0] = S;
            s.start[1] = starts[si] + 1, s.len[1] = 10 - S;
            s.minimal = 1;
            s.BSS2 = S % 2 ? 16 : 0;            /* odd S: a score table of its own, block size 16 */
            s.rope_dt = si % 2 ? DSOPS_FP32 : DSOPS_BF16;
            s.norm_dt = S % 2 ? DSOPS_FP32 : DSOPS_BF16;
            s.had_dt = (si + S) % 2 ? DSOPS_FP32 : DSOPS_BF16;
            cp_problem *p = cp_make(&s, &rng.s);
            char l[200];
            snprintf(l, sizeof l, "%s start %lld S %lld + start %lld S %lld", what, (long long)s.start[0],
                     (long long)S, (long long)s.start[1], (long long)s.len[1]);
            cp_check_all_tiers(l, p);
            cp_free(p);
        }
    agg_flush(what);
}

/* Channel counts that are not a multiple of any vector width (the pooling kernels' tails), with and
 * without overlap, on every tier. */
static void test_odd_widths(void)
{
    if (!tu_selected("odd widths"))
        return;
    static const cp_variant vs[] = {{"c4a D 100", 100, 4, 2, 0}, {"c8 D 67", 67, 8, 1, 0}, {"c4li D 72", 72, 4, 2, 1}};
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++)
        for (int64_t start = 0; start < 12; start += 5) {
            cp_spec s = cp_spec_make(vs[i], 48, 2);
            s.start[0] = start, s.len[0] = 9;
            s.start[1] = start + 3, s.len[1] = 17;
            s.minimal = 1;
            cp_problem *p = cp_make(&s, &rng.s);
            char l[200];
            snprintf(l, sizeof l, "odd widths %s start %lld", vs[i].name, (long long)start);
            cp_check_all_tiers(l, p);
            cp_free(p);
        }
    agg_flush("odd widths");
}

static void test_sweeps(void)
{
    sweep_variant(V_C4A);
    sweep_variant(V_C4LI);
    sweep_variant(V_C128A);
    test_odd_widths();
}

/* ---- prefill then decode ------------------------------------------------------------------------- */

/* Schedules of one problem (start 0 for every sequence, tables covering the whole sequences): prefill N[b]
 * then decode token by token. consistent: the state keeps every position a window reads (no ring shorter
 * than C R), so the schedule must reproduce the one-call result. */
static void schedule_test(const char *label, cp_problem *p, const int64_t *N, int consistent)
{
    const dsops_compressor_args *w = &p->a;
    const int64_t D = p->s.v.D, E = p->entries;
    const size_t nkv = numel(&w->kv_state), nsc = numel(&w->score_state);
    cref rw;
    ref_run(w, p->kv0, p->sc0, &rw); /* the one call */
    if (consistent) {
        /* the oracle's schedule equals its one call bitwise */
        float *kv = tu_memdup(p->kv0, nkv * 4), *sc = tu_memdup(p->sc0, nsc * 4);
        uint16_t *o = tu_calloc((size_t)(E * D), 2);
        run_schedule(label, w, N, -1, kv, sc, o);
        tu_check(memcmp(o, rw.out, (size_t)(E * D) * 2) == 0 && memcmp(kv, rw.kv, nkv * 4) == 0 &&
                     memcmp(sc, rw.sc, nsc * 4) == 0,
                 "%s: the oracle's schedule differs from its one call", label);
        free(kv), free(sc), free(o);
        /* the library's schedule on its own states against the oracle's one call */
        for (int isa = 0; isa <= (int)dsops_isa_detected(); isa++) {
            dsops_context_set_isa(ctx, (dsops_isa)isa);
            char l[260];
            snprintf(l, sizeof l, "%s [%s] schedule vs one call", label, tier_name(isa));
            kv = tu_memdup(p->kv0, nkv * 4), sc = tu_memdup(p->sc0, nsc * 4);
            o = tu_calloc((size_t)(E * D), 2);
            run_schedule(l, w, N, isa, kv, sc, o);
            float *a = tu_widen_bf16(o, (size_t)(E * D)), *b = tu_widen_bf16(rw.out, (size_t)(E * D));
            tu_compare_close(l, a, b, (size_t)(E * D), COARSE_TOL, NULL);
            agg_add(&aggs[isa], o, rw.out, (size_t)(E * D));
            compare_state(l, w, 0, kv, p->kv0, rw.kv);
            compare_state(l, w, 1, sc, p->sc0, rw.sc);
            free(a), free(b), free(kv), free(sc), free(o);
        }
        dsops_context_set_isa(ctx, dsops_isa_detected());
    }
    steps_vs_oracle(label, w, N, p->kv0, p->sc0);
    ref_free(&rw);
}

/* schedule_test on a problem of spec s whose sequence b holds L[b] tokens from position 0 (tables covering
 * them all): prefill N[b], then decode. */
static void schedule_case(const char *label, cp_spec s, const int64_t *L, const int64_t *N, int consistent)
{
    for (int b = 0; b < s.B; b++)
        s.start[b] = 0, s.len[b] = L[b], s.cover[b] = L[b];
    cp_problem *p = cp_make(&s, &rng.s);
    schedule_test(label, p, N, consistent);
    cp_free(p);
}

static void test_prefill_decode(void)
{
    if (!tu_selected("prefill decode"))
        return;
    const cp_variant vs[3] = {V_C4A, V_C4LI, V_C128A};
    for (int vi = 0; vi < 3; vi++) {
        const cp_variant v = vs[vi];
        /* c128a needs more than one window of positions */
        const int64_t L0 = v.R == 128 ? (tu_quick() ? 260 : 300) : 41, L1 = v.R == 128 ? 140 : 23;
        const int64_t N0 = v.R == 128 ? 250 : 13, N1 = v.R == 128 ? 127 : 6;
        cp_spec s = cp_spec_make(v, 64, 2);
        s.rope_dt = DSOPS_FP32;
        char l[120];
        snprintf(l, sizeof l, "prefill decode %s L %lld, %lld N %lld, %lld", v.name, (long long)L0, (long long)L1,
                 (long long)N0, (long long)N1);
        schedule_case(l, s, (const int64_t[]){L0, L1}, (const int64_t[]){N0, N1}, 1);
    }
    agg_flush("prefill decode");
}

/* ---- rings --------------------------------------------------------------------------------------- */

static void test_rings(void)
{
    if (!tu_selected("ring"))
        return;
    /* one 128-row block for 300 positions: later positions win; the state row j must hold the projections of
     * the last position p = j (mod 128), as the same call with a table of distinct blocks leaves them */
    {
        cp_spec s = cp_spec_make(V_C4A, 64, 1);
        s.start[0] = 0, s.len[0] = 300;
        s.ring = 1;
        uint64_t data_seed = tu_rng_u64(&rng);
        tu_rng_seed(&rng, data_seed);
        cp_problem *p = cp_make(&s, &rng.s);
        s.ring = 0;
        tu_rng_seed(&rng, data_seed);
        cp_problem *q = cp_make(&s, &rng.s); /* the same data, distinct blocks */
        cp_check_all_tiers("ring c4a S 300 one block", p);
        const int64_t CD = p->CD;
        for (int isa = 0; isa <= (int)dsops_isa_detected(); isa++) {
            dsops_context_set_isa(ctx, (dsops_isa)isa);
            dsops_status s1 = cp_run(p), s2 = cp_run(q);
            if (!tu_check(s1 == DSOPS_OK && s2 == DSOPS_OK, "ring c4a [%s]: %s / %s", tier_name(isa),
                          dsops_status_name(s1), dsops_status_name(s2)))
                continue;
            const int32_t ring_blk = p->bt[0];
            int64_t bad = 0;
            for (int64_t j = 0; j < 128; j++) {
                const int64_t pos = j + 256 < 300 ? j + 256 : j + 128;
                const int64_t qrow = (int64_t)q->bt[pos / 128] * 128 + pos % 128, prow = (int64_t)ring_blk * 128 + j;
                bad += memcmp(p->kv + prow * CD, q->kv + qrow * CD, (size_t)CD * 4) != 0;
                bad += memcmp(p->sc + prow * CD, q->sc + qrow * CD, (size_t)CD * 4) != 0;
            }
            tu_check(bad == 0, "ring c4a [%s]: %lld ring rows do not hold the last position's projections",
                     tier_name(isa), (long long)bad);
        }
        dsops_context_set_isa(ctx, dsops_isa_detected());
        cp_free(p), cp_free(q);
    }
    /* a ring of one block per sequence, then decode: a 128-row ring keeps what c4a reads (consistent) */
    cp_spec s = cp_spec_make(V_C4A, 64, 2);
    s.ring = 1;
    schedule_case("ring c4a BSS 128 prefill decode", s, (const int64_t[]){150, 131}, (const int64_t[]){129, 126}, 1);
    /* rings shorter than C R: decode reads rows that later positions overwrote (the state as stored) */
    s.BSS = 4, s.BSS2 = 6;
    schedule_case("ring c4a BSS 4 / 6 prefill decode", s, (const int64_t[]){23, 17}, (const int64_t[]){10, 5}, 0);
    s = cp_spec_make(V_C128A, 64, 1);
    s.ring = 1, s.BSS = 64;
    schedule_case("ring c128a BSS 64 prefill decode", s, (const int64_t[]){tu_quick() ? 140 : 270},
                  (const int64_t[]){100}, 0);
    agg_flush("ring");
}

/* ---- layouts, zero rows, parameters ------------------------------------------------------------ */

static void test_layouts_and_params(void)
{
    if (!tu_selected("layouts"))
        return;
    /* row_per_seq: sequences with and without an entry, rows beyond B, window 0 of each (no previous half) */
    static const struct {
        const char *label;
        const cp_variant *v;
        int B;
        int64_t start[5], len[5], NO;   /* NO 0: B + 1 */
    } rows[] = {
        {"layouts row_per_seq c4a", &V_C4A, 5, {3, 4, 7, 0, 126}, {1, 1, 1, 1, 2}, 7},  /* entries 1, 0, 1, 0, 1 */
        {"layouts row_per_seq c128a", &V_C128A, 4, {127, 0, 254, 300}, {1, 3, 2, 4}, 4}, /* entries 1, 0, 1, 0 */
        {"layouts row_per_seq c4li window 0", &V_C4LI, 3, {0, 1, 2}, {4, 3, 2}, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        cp_spec s = cp_spec_make(*rows[i].v, 64, rows[i].B);
        memcpy(s.start, rows[i].start, sizeof rows[i].start), memcpy(s.len, rows[i].len, sizeof rows[i].len);
        s.layout = DSOPS_COMPRESSOR_ROW_PER_SEQ, s.NO = rows[i].NO;
        cp_problem *p = cp_make(&s, &rng.s);
        cp_check_all_tiers(rows[i].label, p);
        cp_free(p);
    }
    /* calls that close no window: only state writes, every out row zero */
    for (int layout = 0; layout < 2; layout++) {
        cp_spec s = cp_spec_make(V_C4A, 64, 2);
        s.start[0] = 0, s.len[0] = 2, s.start[1] = 5, s.len[1] = 2;
        s.layout = layout ? DSOPS_COMPRESSOR_ROW_PER_SEQ : DSOPS_COMPRESSOR_PACKED;
        s.NO = 3;
        cp_problem *p = cp_make(&s, &rng.s);
        cp_check_all_tiers(layout ? "layouts no window closes row_per_seq" : "layouts no window closes packed", p);
        cp_free(p);
    }
    /* window 0 only, in one prefill call (no previous half; positions < 0 are absent) */
    {
        cp_spec s = cp_spec_make(V_C4A, 256, 1);
        s.start[0] = 0, s.len[0] = 4;
        cp_problem *p = cp_make(&s, &rng.s);
        cp_check_all_tiers("layouts window 0 prefill c4a H 256", p);
        cp_free(p);
    }
    /* parameters and views */
    for (int k = 0; k < 7; k++) {
        static const char *what[7] = {"explicit dim ratio overlap rotate", "rope half inverse",
                                      "rope interleaved_in_half_out", "norm_eps 0", "strided x",
                                      "out_count absent", "fp32 norm, tables, hadamard"};
        const cp_variant v = k == 2 ? V_C128A : (k == 0 || k == 6 ? V_C4LI : V_C4A);
        cp_spec s = cp_spec_make(v, 64, 2);
        s.start[0] = v.R == 128 ? 250 : 5, s.len[0] = 7;
        s.start[1] = 0, s.len[1] = v.R == 128 ? 130 : 9;
        if (k == 1)
            s.mode = DSOPS_ROPE_HALF, s.inverse = 1;
        if (k == 2)
            s.mode = DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT;
        if (k == 3)
            s.eps = 0.0f;
        if (k == 4)
            s.x_pad = 24;
        if (k == 6)
            s.norm_dt = s.rope_dt = s.had_dt = DSOPS_FP32;
        cp_problem *p = cp_make(&s, &rng.s);
        if (k == 0)
            p->a.dim = (int)v.D, p->a.ratio = (int)v.R, p->a.overlap = 1, p->a.rotate = 1;
        if (k == 5)
            p->a.out_count.data = NULL;
        char l[120];
        snprintf(l, sizeof l, "layouts %s %s", v.name, what[k]);
        cp_check_all_tiers(l, p);
        cp_free(p);
    }
    agg_flush("layouts");
}

/* ---- determinism --------------------------------------------------------------------------------- */

/* The call's out and states after it, for rc_check_threads. */
static unsigned char *cp_run_gather(void *problem, size_t *n, dsops_status *st)
{
    cp_problem *p = problem;
    *st = cp_run(p);
    if (*st != DSOPS_OK)
        return NULL;
    const size_t nout = (size_t)(p->NO * p->s.v.D) * 2, nkv = numel(&p->a.kv_state) * 4;
    const size_t nsc = numel(&p->a.score_state) * 4;
    unsigned char *bytes = tu_calloc(nout + nkv + nsc, 1);
    memcpy(bytes, p->out, nout), memcpy(bytes + nout, p->kv, nkv), memcpy(bytes + nout + nkv, p->sc, nsc);
    *n = nout + nkv + nsc;
    return bytes;
}

static void test_determinism(void)
{
    if (!tu_selected("determinism"))
        return;
    for (int k = 0; k < 2; k++) {
        /* a prefill of three sequences at different positions; the vendor's decode shape (64 x 2) */
        cp_spec s = cp_spec_make(k == 0 ? (cp_variant){"c4a", 512, 4, 2, 0} : V_C4LI, tu_quick() ? 256 : 1024,
                                 k ? 64 : 3);
        if (k == 0) {
            const int64_t st[3] = {0, 255, 1000}, ln[3] = {130, 7, 61};
            memcpy(s.start, st, sizeof st), memcpy(s.len, ln, sizeof ln);
        } else {
            for (int b = 0; b < 64; b++)
                s.start[b] = 8191 - (b % 4), s.len[b] = 2;
        }
        s.real_data = 1;
        s.minimal = 1;
        cp_problem *p = cp_make(&s, &rng.s);
        for (int ti = 0; ti <= (int)dsops_isa_detected(); ti++) {
            dsops_context_set_isa(ctx, (dsops_isa)ti);
            char l[120];
            snprintf(l, sizeof l, "determinism %s [%s]", s.v.name, tier_name(ti));
            rc_check_threads(ctx, l, cp_run_gather, p);
        }
        cp_free(p);
    }
    dsops_context_set_isa(ctx, dsops_isa_detected());
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, 42);
    tu_rng_seed(&rng, tu_seed());
    ctx = tu_context();
    rc_set_threads(ctx, 2);
    printf("tiers: scalar ... %s, threads %d\n", tier_name((int)dsops_isa_detected()), dsops_context_threads(ctx));
    double t0 = tu_now();
    test_oracle_by_hand();
    test_sweeps();
    double t1 = tu_now();
    test_prefill_decode();
    test_rings();
    test_layouts_and_params();
    test_determinism();
    double t2 = tu_now();
    test_case_scenarios();
    double t3 = tu_now();
    printf("small problems %.1f s, schedules / rings / layouts / determinism %.1f s, named-case data %.1f s\n", t1 - t0,
           t2 - t1, t3 - t2);
    for (int i = 0; i < DSOPS_ISA_COUNT; i++)
        free(aggs[i].o), free(aggs[i].r);
    dsops_context_destroy(ctx);
    return tu_finish();
}
