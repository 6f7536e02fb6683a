/* mla_prolog_v4 and indexer_prolog_v4 (spec §3.3, §3.5) against their oracles (ref/ref_mla_prolog_v4.c,
 * ref/ref_indexer_prolog_v4.c):
 *  - small problems on every instruction-set tier from scalar up to the detected one: both mla variants
 *    (bf16 / int8 wq_b), odd shapes (H 96, Q 80, N 3, D 65 / 128 / 512; NI 1 / 3, DI 64 / 96 / 128 with a
 *    random non-power-of-two "Hadamard" or the Sylvester matrix), the three rope modes with and without
 *    rope_inverse, gammas / tables / Hadamard in bf16 and fp32, padded (non-dense) views of x, the tables and
 *    every output, all-zero tokens and gamma_cq = 0 (qr 0, qr_scale 0, q 0), int8 weights at -128 / 127,
 *    weights overflowing fp16, T = 0 / 1 / 17;
 *  - tolerances of the spec: q, kv, bf16 qr 1e-4 / 2^-7 / 0.005; int8 qr and q_idx 1 / 0 / 0; qr_scale
 *    2.5e-5 / 0.005 / 0.005; q_idx_scale and weights 1e-4 / 0.007825 / 0.005 (q of a token whose qr row the
 *    library rounded differently, within the qr tolerance, is compared given the library's qr: m4_compare);
 *  - every output element written (a NaN / -128 sentinel must be gone) and every other byte of the output
 *    buffers (padding, guard zones before and after) untouched; padding of the inputs holds NaN;
 *  - a prepared object gives bitwise the results of the unprepared call; one made from other weights (or
 *    for the other operator) is rejected with DSOPS_ERR_PARAM before anything is written;
 *  - bitwise determinism for 1, 2 and 3 threads;
 *  - the oracles themselves against an independent fp64 evaluation of the Math on the small problems;
 *  - the case tables of docs/CASES.md ("mla_prolog_v4", "indexer_prolog_v4") and their generated data; the
 *    CI cases themselves run in tests/test_cases.c.
 * The problems (m4_make, i4_make: guarded views, edge data, the oracle's results) are built in the family files
 * (harness/mla_prolog_v4.c, harness/indexer_prolog_v4.c, section "adversarial problems"; problems.h); the checks
 * are here.
 * Usage: test_v4_prologs [label filter]. */
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

static const tu_tol TOL_BF16 = {1e-4, 1.0 / 128, 0.005};      /* q, kv, bf16 qr */
static const tu_tol TOL_INT8 = {1, 0, 0};                     /* int8 qr, q_idx */
static const tu_tol TOL_QR_SCALE = {2.5e-5, 0.005, 0.005};    /* qr_scale */
static const tu_tol TOL_IDX = {1e-4, 0.007825, 0.005};        /* q_idx_scale, weights */

/* ---- helpers ------------------------------------------------------------------------------------ */

static float f16_value(uint16_t h)
{
    float f;
    dsops_fp16_to_fp32(&h, &f, 1);
    return f;
}

/* Every element differs from the sentinel (was written). */
static int buf_all_written(const v4p_buf *o, const char *label)
{
    unsigned char pat[4];
    const size_t es = dsops_dtype_size(o->t.dtype);
    v4p_sentinel(o->t.dtype, pat);
    const int64_t n = v4p_numel(&o->t);
    int64_t missing = 0, first = -1;
    for (int64_t e = 0; e < n; e++)
        if (memcmp(v4p_elem(&o->t, e), pat, es) == 0) {
            if (first < 0)
                first = e;
            missing++;
        }
    return tu_check(missing == 0, "%s %s: %lld of %lld elements not written (first %lld)", label, o->name,
                    (long long)missing, (long long)n, (long long)first);
}

/* Every byte of the buffer that is not an element of the view still holds the sentinel. */
static int buf_outside_kept(const v4p_buf *o, const char *label)
{
    unsigned char pat[4];
    const size_t es = dsops_dtype_size(o->t.dtype);
    v4p_sentinel(o->t.dtype, pat);
    unsigned char *copy = tu_calloc(o->bytes, 1);
    memcpy(copy, o->buf, o->bytes);
    dsops_tensor v = o->t;
    v.data = copy + ((unsigned char *)o->t.data - o->buf);
    const int64_t n = v4p_numel(&v);
    for (int64_t e = 0; e < n; e++)
        memcpy(v4p_elem(&v, e), pat, es);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < o->bytes; i++)
        if (copy[i] != pat[i % es]) {
            if (!bad)
                first = i;
            bad++;
        }
    free(copy);
    return tu_check(bad == 0, "%s %s: %zu bytes outside the view's elements changed (first at byte %zu of %zu)",
                    label, o->name, bad, first, o->bytes);
}

/* Compares one output (library, widened) with the oracle's (dense, widened). */
static int compare_out(const char *label, const v4p_buf *o, const float *ref, tu_tol tol)
{
    char l[400];
    snprintf(l, sizeof l, "%s %s", label, o->name);
    float *f = v4p_buf_widen(o);
    int ok = tu_compare_close(l, f, ref, (size_t)v4p_numel(&o->t), tol, NULL);
    free(f);
    return ok;
}

/* ---- the shadow path: an independent fp64 evaluation of the Math (its one copy; it checks the oracles) ---- */

/* fp64 -> bf16 -> fp64, one rounding (the shadow evaluations below). */
static double rb(double v) { return (double)tu_f32(dsops_ref_bf16_from_f64(v)); }

/* The rotation of spec §2.5.1 on x[0..63] (fp64 products of fp32 values, then the sum rounded to fp32 as
 * the Math's one fp32 addition), written out per mode. */
static void shadow_rot(const double *x, const double *c, const double *s_in, dsops_rope_mode m, int inv, double *y)
{
    double s[64];
    for (int e = 0; e < 64; e++)
        s[e] = inv ? -s_in[e] : s_in[e];
    for (int j = 0; j < 32; j++) {
        if (m == DSOPS_ROPE_INTERLEAVED) {
            y[2 * j] = x[2 * j] * c[2 * j] - x[2 * j + 1] * s[2 * j];
            y[2 * j + 1] = x[2 * j + 1] * c[2 * j + 1] + x[2 * j] * s[2 * j + 1];
        } else if (m == DSOPS_ROPE_HALF) {
            y[j] = x[j] * c[j] - x[j + 32] * s[j];
            y[j + 32] = x[j + 32] * c[j + 32] + x[j] * s[j + 32];
        } else {
            y[j] = x[2 * j] * c[j] - x[2 * j + 1] * s[j];
            y[j + 32] = x[2 * j + 1] * c[j + 32] + x[2 * j] * s[j + 32];
        }
    }
}

/* Row t of the tables rope_cos, rope_sin [T, 64] as fp64 into c[64], s[64]. */
static void shadow_tables(const dsops_tensor *cos, const dsops_tensor *sin, int64_t t, double *c, double *s)
{
    for (int e = 0; e < 64; e++)
        c[e] = v4p_get(cos, t * 64 + e), s[e] = v4p_get(sin, t * 64 + e);
}

/* The rotation of the last 64 of v[0 .. n-1] in place, each result rounded to bf16. */
static void shadow_rot_tail(double *v, int64_t n, const double *c, const double *s, dsops_rope_mode m, int inv)
{
    double y[64];
    shadow_rot(v + n - 64, c, s, m, inv, y);
    for (int e = 0; e < 64; e++)
        v[n - 64 + e] = rb(y[e]);
}

/* Q8 of spec §2.7 in the spec's fp32 steps (the shadows feed it fp64 values rounded to fp32). */
static void shadow_q8(const double *v, int64_t n, double *q, double *scale)
{
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++)
        amax = fabsf((float)v[i]) > amax ? fabsf((float)v[i]) : amax;
    const float sq = 127.0f / amax;
    if (amax == 0.0f || isinf(sq)) {
        for (int64_t i = 0; i < n; i++)
            q[i] = 0;
        *scale = 0;
        return;
    }
    for (int64_t i = 0; i < n; i++)
        q[i] = rint((double)((float)v[i] * sq));
    *scale = (double)(1.0f / sq);
}

/* ==================================================================================================
 * either operator, as its description (dsops_op_find) sees it
 * ================================================================================================== */

/* The checks of one operator: the library's outputs on one tier against the oracle's (tolerances and exact
 * edge results), and the oracle's results against an independent fp64 evaluation (small problems). */
typedef struct prolog_checks {
    void (*compare)(const char *label, const v4p_problem *pl, const v4p_ref *r);
    void (*shadow)(const char *label, const v4p_problem *pl, const v4p_ref *r);
} prolog_checks;

/* One call of the library with `args` (the record or a variant of it): sentinels in the outputs first. */
static dsops_status prolog_call(v4p_problem *pl, const void *args)
{
    v4p_poison_outputs(pl);
    return pl->op->call(ctx, args);
}

static dsops_status prolog_call_prepared(v4p_problem *pl, const dsops_prepared *prep)
{
    void *b = v4p_record(pl, prep);
    const dsops_status st = prolog_call(pl, b);
    free(b);
    return st;
}

/* The oracle's outputs against a shadow evaluation: shadow[i] (fp64, dense) for output i, with tols[i]. */
static void compare_shadow(const char *label, const v4p_problem *pl, const v4p_ref *r, double *const *shadow,
                           const tu_tol *tols)
{
    for (int i = 0; i < pl->nout; i++) {
        const size_t n = (size_t)v4p_numel(&pl->out[i].t);
        float *f = tu_calloc(n, sizeof(float));
        for (size_t e = 0; e < n; e++)
            f[e] = (float)shadow[i][e];
        char l[300];
        snprintf(l, sizeof l, "%s oracle vs fp64 shadow: %s", label, pl->out[i].name);
        tu_compare_close(l, r->v[i], f, n, tols[i], NULL);
        free(f);
    }
}

/* A prepared object made from the record's weights, then the call with it: bitwise the results the
 * unprepared call just left, and nothing written outside the outputs. */
static void check_prepared_equal(const char *label, v4p_problem *pl)
{
    size_t n1, n2;
    unsigned char *g1 = v4p_gather(pl, &n1);
    dsops_prepared *prep = NULL;
    dsops_status st = pl->op->prepare(ctx, pl->args, &prep);
    if (tu_check(st == DSOPS_OK && prep, "%s: prepare: status %s (%s)", label, dsops_status_name(st), dsops_last_error())) {
        st = prolog_call_prepared(pl, prep);
        if (tu_check(st == DSOPS_OK, "%s prepared: status %s (%s)", label, dsops_status_name(st), dsops_last_error())) {
            unsigned char *g2 = v4p_gather(pl, &n2);
            char l[400];
            snprintf(l, sizeof l, "%s: the prepared call", label);
            tu_check_same_bytes(l, g2, n2, g1, n1, "the unprepared one");
            for (int i = 0; i < pl->nout; i++)
                buf_outside_kept(&pl->out[i], label);
            free(g2);
        }
        dsops_prepared_destroy(prep);
    }
    free(g1);
}

/* The call on the current tier: every output element written, nothing else touched, the operator's
 * comparison with the oracle; then the same with a prepared object. */
static void prolog_run_tier(v4p_problem *pl, const v4p_ref *r, const prolog_checks *ck, const char *label)
{
    dsops_status st = prolog_call(pl, pl->args);
    if (!tu_check(st == DSOPS_OK, "%s: status %s (%s)", label, dsops_status_name(st), dsops_last_error()))
        return;
    for (int i = 0; i < pl->nout; i++) {
        buf_all_written(&pl->out[i], label);
        buf_outside_kept(&pl->out[i], label);
    }
    ck->compare(label, pl, r);
    check_prepared_equal(label, pl);
}

/* A labelled problem (made from the label's seed): the oracle, its shadow evaluation when the problem is
 * small, then every tier from scalar up. Frees the problem. */
static void prolog_run(const char *label, v4p_problem *pl, int small, const prolog_checks *ck)
{
    v4p_ref r = v4p_reference(pl);
    if (small)
        ck->shadow(label, pl, &r);
    char l[300];
    for (int isa = -1; tu_next_tier(ctx, &isa, label, l, sizeof l);)
        prolog_run_tier(pl, &r, ck, l);
    tu_set_tier(ctx, dsops_isa_detected());
    v4p_ref_free(&r);
    v4p_free(pl);
}

/* The call with args (a record holding a prepared object that does not fit it) is rejected with
 * DSOPS_ERR_PARAM, naming "prepared", before anything is written. */
static void expect_prepared_rejected(const char *label, v4p_problem *pl, const void *args)
{
    dsops_status st = prolog_call(pl, args);
    tu_check(st == DSOPS_ERR_PARAM, "%s: status %s (%s), expected DSOPS_ERR_PARAM", label, dsops_status_name(st),
             dsops_last_error());
    tu_check(st == DSOPS_OK || strstr(dsops_last_error(), "prepared") != NULL, "%s: message \"%s\" lacks \"prepared\"",
             label, dsops_last_error());
    for (int i = 0; i < pl->nout; i++)
        buf_outside_kept(&pl->out[i], label); /* nothing written: every byte still the sentinel */
}

/* Weights that a prepared object packs, in groups swapped together (a weight and its scale). */
typedef struct weight_group {
    const char *name[2];
} weight_group;

/* prep (made from pl's weights) on calls of pl whose weights of one group are other's (same shapes, other
 * memory): each rejected; labels "<what> other <weight>". */
static void expect_other_weights_rejected(const char *what, v4p_problem *pl, v4p_problem *other,
                                          const dsops_prepared *prep, const weight_group *groups, int ngroups)
{
    for (int g = 0; g < ngroups; g++) {
        void *b = v4p_record(pl, prep);
        for (int k = 0; k < 2 && groups[g].name[k]; k++)
            *v4p_member(pl->op, b, groups[g].name[k]) = *v4p_member(other->op, other->args, groups[g].name[k]);
        char l[200];
        snprintf(l, sizeof l, "%s other %s", what, groups[g].name[0]);
        expect_prepared_rejected(l, pl, b);
        free(b);
    }
}

/* The call's output bytes, for rc_check_threads. */
static unsigned char *prolog_run_gather(void *problem, size_t *n, dsops_status *st)
{
    v4p_problem *pl = problem;
    *st = prolog_call(pl, pl->args);
    return *st == DSOPS_OK ? v4p_gather(pl, n) : NULL;
}

/* ==================================================================================================
 * mla_prolog_v4
 * ================================================================================================== */

/* q[t] from a given qr[t] (and, int8, qr_scale[t]): steps 3 (3'), 4, 5 of §3.3 in the oracle's order (fp32
 * sums in ascending k or exact int32 dots, two fp32 multiplies, fp32 RMSNorm, bf16, rotation). */
static void m4_q_from_qr(const dsops_mla_prolog_v4_args *a, int64_t t, const dsops_tensor *qr, float qs, float *q_row)
{
    const int64_t Q = a->wq_a.shape[0], D = a->wkv.shape[0], ND = a->wq_b.shape[0], N = ND / D;
    const int int8 = a->wq_b.dtype == DSOPS_INT8;
    float *qb = tu_calloc((size_t)ND, sizeof(float)), *v = tu_calloc((size_t)D, sizeof(float));
    float c[64], s[64], y[64];
    for (int e = 0; e < 64; e++)
        c[e] = v4p_get(&a->rope_cos, t * 64 + e), s[e] = v4p_get(&a->rope_sin, t * 64 + e);
    for (int64_t n = 0; n < ND; n++) {
        if (int8) {
            int32_t dot = 0;
            for (int64_t k = 0; k < Q; k++)
                dot += (int32_t) * (const int8_t *)tf_eaddr(qr, t, k, 0) *
                       (int32_t) * (const int8_t *)tf_eaddr(&a->wq_b, n, k, 0);
            qb[n] = ((float)dot * qs) * v4p_get(&a->wq_b_scale, n);
        } else {
            float acc = 0.0f;
            for (int64_t k = 0; k < Q; k++)
                acc += v4p_get(qr, t * Q + k) * v4p_get(&a->wq_b, n * Q + k);
            qb[n] = tu_round_bf16(acc);
        }
    }
    for (int64_t h = 0; h < N; h++) {
        dsops_ref_rmsnorm_row(qb + h * D, D, NULL, a->eps_qh, v);
        for (int64_t d = 0; d < D; d++)
            v[d] = tu_round_bf16(v[d]);
        dsops_ref_rope_row(v + D - 64, c, s, a->rope_mode, a->rope_inverse, y);
        for (int e = 0; e < 64; e++)
            v[D - 64 + e] = tu_round_bf16(y[e]);
        memcpy(q_row + h * D, v, sizeof(float) * (size_t)D);
    }
    free(qb);
    free(v);
}

/* Exact edge results: tokens with cq = 0 have qr 0, qr_scale 0 and q 0 (spec §3.3 "Edge semantics"). */
static void m4_check_zero_cq(const char *label, const m4_problem *p, int64_t tokens)
{
    const int64_t N = p->sp.N, D = p->sp.D, Q = p->sp.Q;
    int64_t bad = 0;
    for (int64_t t = 0; t < tokens; t++) {
        for (int64_t e = 0; e < N * D; e++)
            bad += v4p_get(&p->pl.out[0].t, t * N * D + e) != 0.0f;
        for (int64_t e = 0; e < Q; e++)
            bad += v4p_get(&p->pl.out[2].t, t * Q + e) != 0.0f;
        if (p->pl.nout > 3)
            bad += v4p_get(&p->pl.out[3].t, t) != 0.0f;
    }
    tu_check(bad == 0, "%s: %lld values of the all-zero-cq tokens (q, qr, qr_scale) are not 0", label, (long long)bad);
}

/* The library's outputs against the oracle: tolerances and the exact results of all-zero cq.
 * The library may legitimately round a qr element the other way (its fp32 sums of a = lin(x, wq_a) run in
 * another order; qr tolerance 1 / 0 / 0 for int8, one bf16 step for bf16). One such element moves q of the
 * whole token by ~1e-3 in absolute terms: beyond 1e-4 + 2^-7 |q| for the ~10 % of elements with |q| < 0.1
 * (int8) or for the rotated elements whose random-table rotation cancels (bf16). So q of a token whose qr
 * row differs is compared with the oracle's steps 3-5 applied to the library's qr row. */
static void m4_compare(const char *label, const v4p_problem *pl, const v4p_ref *r)
{
    const m4_problem *p = (const m4_problem *)pl;
    const dsops_mla_prolog_v4_args *a = &p->a;
    const v4p_buf *outs = pl->out;
    const int int8 = p->sp.int8;
    const float *q_ref = r->v[0];
    float *qc = NULL;
    const int64_t T = outs[0].t.shape[0], ND = outs[0].t.shape[1] * outs[0].t.shape[2], Q = outs[2].t.shape[1];
    int64_t conditioned = 0;
    for (int64_t t = 0; t < T; t++) {
        int differs = 0;
        for (int64_t k = 0; k < Q && !differs; k++)
            differs = v4p_get(&outs[2].t, t * Q + k) != r->v[2][t * Q + k];
        if (!differs)
            continue;
        if (!qc) {
            qc = tu_calloc((size_t)(T * ND), sizeof(float));
            memcpy(qc, r->v[0], sizeof(float) * (size_t)(T * ND));
        }
        m4_q_from_qr(a, t, &outs[2].t, int8 ? v4p_get(&outs[3].t, t) : 0.0f, qc + t * ND);
        conditioned++;
    }
    if (qc) {
        q_ref = qc;
        if (tu_verbose())
            printf("  note %s: q of %lld token(s) compared given the library's qr row (it differs from the "
                   "oracle's within the qr tolerance)\n", label, (long long)conditioned);
    }
    compare_out(label, &outs[0], q_ref, TOL_BF16);
    compare_out(label, &outs[1], r->v[1], TOL_BF16);
    compare_out(label, &outs[2], r->v[2], int8 ? TOL_INT8 : TOL_BF16);
    if (pl->nout > 3)
        compare_out(label, &outs[3], r->v[3], TOL_QR_SCALE);
    free(qc);
    const int64_t zero_cq_tokens =
        p->sp.zero_gamma_cq ? p->sp.T : (p->sp.zero_tokens < p->sp.T ? p->sp.zero_tokens : p->sp.T);
    if (zero_cq_tokens > 0)
        m4_check_zero_cq(label, p, zero_cq_tokens);
}

/* out[n] = x[t] . w[n] for x [T, H], w [rows, H] (rounded to bf16 unless int8: the int8 variant keeps the
 * fp32 sum); returns the sum of the squares of out[0 .. rows-1], the RMSNorm that follows. */
static double shadow_proj(const dsops_tensor *x, const dsops_tensor *w, int64_t t, int int8, double *out)
{
    const int64_t H = x->shape[1], rows = w->shape[0];
    double sumsq = 0;
    for (int64_t n = 0; n < rows; n++) {
        double acc = 0;
        for (int64_t k = 0; k < H; k++)
            acc += (double)v4p_get(x, t * H + k) * v4p_get(w, n * H + k);
        out[n] = int8 ? acc : rb(acc);
        sumsq += out[n] * out[n];
    }
    return sumsq;
}

/* An independent fp64 evaluation of §3.3 on a small problem (the oracle's structure: head and dimension
 * mapping, the rotated slice, rounding points, the order of the scale multiplies). */
static void m4_shadow_check(const char *label, const v4p_problem *pl, const v4p_ref *r)
{
    const dsops_mla_prolog_v4_args *a = pl->args;
    const int64_t T = a->x.shape[0], Q = a->wq_a.shape[0], D = a->wkv.shape[0];
    const int64_t ND = a->wq_b.shape[0], N = ND / D;
    const int int8 = a->wq_b.dtype == DSOPS_INT8;
    double *q = tu_calloc((size_t)(T * ND), 8), *kv = tu_calloc((size_t)(T * D), 8);
    double *qr = tu_calloc((size_t)(T * Q), 8);
    double *qs = tu_calloc((size_t)(T > 0 ? T : 1), 8), *av = tu_calloc((size_t)Q, 8), *cq = tu_calloc((size_t)Q, 8);
    double *qb = tu_calloc((size_t)ND, 8), *v = tu_calloc((size_t)D, 8);
    for (int64_t t = 0; t < T; t++) {
        double c[64], s[64];
        shadow_tables(&a->rope_cos, &a->rope_sin, t, c, s);
        const double ss = shadow_proj(&a->x, &a->wq_a, t, int8, av);
        const double rq = sqrt(ss / (double)Q + a->eps_cq);
        for (int64_t n = 0; n < Q; n++) {
            cq[n] = av[n] / rq * v4p_get(&a->gamma_cq, n);
            if (!int8)
                cq[n] = rb(cq[n]);
        }
        /* qr is compared on its own; the steps after it start from the oracle's qr row, so that one qr
         * element rounded the other way (fp64 here) does not move the whole token's q */
        const float *oqr = r->v[2] + t * Q;
        if (int8) {
            shadow_q8(cq, Q, qr + t * Q, &qs[t]);
            for (int64_t n = 0; n < ND; n++) {
                double dot = 0;
                for (int64_t k = 0; k < Q; k++)
                    dot += (double)oqr[k] * v4p_get(&a->wq_b, n * Q + k);
                qb[n] = dot * r->v[3][t] * v4p_get(&a->wq_b_scale, n);
            }
        } else {
            for (int64_t n = 0; n < Q; n++)
                qr[t * Q + n] = cq[n];
            for (int64_t n = 0; n < ND; n++) {
                double acc = 0;
                for (int64_t k = 0; k < Q; k++)
                    acc += (double)oqr[k] * v4p_get(&a->wq_b, n * Q + k);
                qb[n] = rb(acc);
            }
        }
        for (int64_t h = 0; h < N; h++) {
            double sh = 0;
            for (int64_t d = 0; d < D; d++)
                sh += qb[h * D + d] * qb[h * D + d];
            const double rh = sqrt(sh / (double)D + a->eps_qh);
            for (int64_t d = 0; d < D; d++)
                v[d] = rb(qb[h * D + d] / rh);
            shadow_rot_tail(v, D, c, s, a->rope_mode, a->rope_inverse);
            memcpy(q + t * ND + h * D, v, sizeof(double) * (size_t)D);
        }
        const double sk = shadow_proj(&a->x, &a->wkv, t, int8, v);
        const double rk = sqrt(sk / (double)D + a->eps_ckv);
        for (int64_t d = 0; d < D; d++)
            v[d] = rb(v[d] / rk * v4p_get(&a->gamma_ckv, d));
        shadow_rot_tail(v, D, c, s, a->rope_mode, a->rope_inverse);
        memcpy(kv + t * D, v, sizeof(double) * (size_t)D);
    }
    const tu_tol tols[4] = {TOL_BF16, TOL_BF16, int8 ? TOL_INT8 : TOL_BF16, TOL_QR_SCALE};
    compare_shadow(label, pl, r, (double *const[]){q, kv, qr, qs}, tols);
    free(q), free(kv), free(qr), free(qs), free(av), free(cq), free(qb), free(v);
}

static const prolog_checks M4_CHECKS = {m4_compare, m4_shadow_check};

static void m4_run(const char *label, const m4_spec *sp)
{
    if (tu_selected(label))
        prolog_run(label, &m4_make(sp, tu_label_seed(label))->pl, (double)sp->T * sp->N * sp->D * sp->Q < 4e7,
                   &M4_CHECKS);
}

/* m4_run labelled "mla4_<int8|bf16>_<what>" after the spec's variant. */
static void m4_run_variant(const char *what, const m4_spec *sp)
{
    char label[160];
    snprintf(label, sizeof label, "mla4_%s_%s", sp->int8 ? "int8" : "bf16", what);
    m4_run(label, sp);
}

/* T 5, H 96, Q 80, N 3, D 128 */
static m4_spec m4_base(int int8)
{
    return (m4_spec){.T = 5, .H = 96, .Q = 80, .N = 3, .D = 128, .int8 = int8, .rope_mode = DSOPS_ROPE_INTERLEAVED};
}

/* A case list, alike in shape to test_idx_small's on purpose: a base spec and one changed field per labelled
 * problem, so that each label reads as its own case. */
static void test_mla_small(void)
{
    char label[160];
    for (int w = 0; w < 2; w++) {
        const char *v = w ? "int8" : "bf16";
        m4_spec s = m4_base(w);
        m4_run_variant("h96_q80_n3_d128", &s);
        s.D = 65; /* Dn = 1 */
        m4_run_variant("h96_q80_n3_d65", &s);
        for (int m = 0; m < 3; m++)
            for (int inv = 0; inv < 2; inv++) {
                s = m4_base(w);
                s.rope_mode = (dsops_rope_mode)m;
                s.rope_inverse = inv;
                s.table_dtype = (m + inv + w) % 2 ? DSOPS_FP32 : DSOPS_BF16;
                snprintf(label, sizeof label, "mla4_%s_rope_%s_inv%d_tables_%s", v, cases_rope_name((dsops_rope_mode)m), inv,
                         dsops_dtype_name(s.table_dtype));
                m4_run(label, &s);
            }
        s = m4_base(w);
        s.gamma_dtype = DSOPS_FP32;
        m4_run_variant("gamma_fp32", &s);
        s.gckv_dtype = DSOPS_BF16;
        s.table_dtype = DSOPS_FP32;
        m4_run_variant("gamma_cq_fp32_gamma_ckv_bf16_tables_fp32", &s);
        s = m4_base(w);
        s.padded = 1;
        s.T = 6;
        m4_run_variant("padded_views", &s);
        s = m4_base(w);
        s.zero_tokens = 2;
        m4_run_variant("zero_tokens", &s);
        s = m4_base(w);
        s.zero_gamma_cq = 1;
        m4_run_variant("gamma_cq_zero", &s);
        s = m4_base(w);
        s.eps_qh = 0.5f;
        m4_run_variant("eps_qh_0.5", &s);
        static const int Ts[3] = {0, 1, 17};
        for (int i = 0; i < 3; i++) {
            s = m4_base(w);
            s.T = Ts[i];
            s.N = i == 1 ? 1 : 3;
            snprintf(label, sizeof label, "mla4_%s_t%d_n%d", v, s.T, s.N);
            m4_run(label, &s);
        }
        /* the V4 head dim with several tiles in every dimension */
        s = m4_base(w);
        s.T = tu_quick() ? 3 : 7, s.H = 256, s.Q = 192, s.N = 2, s.D = 512;
        m4_run_variant("h256_q192_n2_d512", &s);
    }
    m4_spec s = m4_base(1);
    s.int8_extreme = 1;
    m4_run("mla4_int8_wq_b_extremes", &s);
}

/* ==================================================================================================
 * indexer_prolog_v4
 * ================================================================================================== */

/* The library's outputs against the oracle: tolerances, and q_idx / q_idx_scale exactly 0 for the tokens
 * whose qr row is 0. */
static void i4_compare(const char *label, const v4p_problem *pl, const v4p_ref *r)
{
    const i4_problem *p = (const i4_problem *)pl;
    compare_out(label, &pl->out[0], r->v[0], TOL_INT8);
    compare_out(label, &pl->out[1], r->v[1], TOL_IDX);
    compare_out(label, &pl->out[2], r->v[2], TOL_IDX);
    const int64_t zt = p->sp.zero_tokens < p->sp.T ? p->sp.zero_tokens : p->sp.T;
    if (zt > 0) {
        /* qr = 0, qr_scale = 0: qf = 0, so q_idx = 0 and q_idx_scale = 0 exactly */
        int64_t bad = 0;
        const int64_t NI = p->sp.NI, DI = p->sp.DI;
        for (int64_t e = 0; e < zt * NI * DI; e++)
            bad += v4p_get(&pl->out[0].t, e) != 0.0f;
        for (int64_t e = 0; e < zt * NI; e++)
            bad += v4p_get(&pl->out[1].t, e) != 0.0f;
        tu_check(bad == 0, "%s: %lld values of q_idx / q_idx_scale of the zero tokens are not 0", label, (long long)bad);
    }
}

/* An independent fp64 evaluation of §3.5 on a small problem. */
static void i4_shadow_check(const char *label, const v4p_problem *pl, const v4p_ref *r)
{
    const dsops_indexer_prolog_v4_args *a = pl->args;
    const int64_t T = a->x.shape[0], H = a->x.shape[1], Q = a->qr.shape[1];
    const int64_t NI = a->weights_proj.shape[0], DI = a->hadamard.shape[0];
    double *qi = tu_calloc((size_t)(T * NI * DI), 8), *qs = tu_calloc((size_t)(T * NI), 8);
    double *w = tu_calloc((size_t)(T * NI), 8), *u = tu_calloc((size_t)DI, 8), *hq = tu_calloc((size_t)DI, 8);
    for (int64_t t = 0; t < T; t++) {
        double c[64], s[64];
        shadow_tables(&a->rope_cos, &a->rope_sin, t, c, s);
        for (int64_t h = 0; h < NI; h++) {
            for (int64_t d = 0; d < DI; d++) {
                const int64_t n = h * DI + d;
                double dot = 0;
                for (int64_t k = 0; k < Q; k++)
                    dot += (double)v4p_get(&a->qr, t * Q + k) * v4p_get(&a->idx_wq_b, n * Q + k);
                /* (dot * qr_scale) * idx_wq_b_scale: fp32 products, as the Math */
                u[d] = rb((double)(((float)dot * v4p_get(&a->qr_scale, t)) * v4p_get(&a->idx_wq_b_scale, n)));
            }
            shadow_rot_tail(u, DI, c, s, a->rope_mode, a->rope_inverse);
            for (int64_t j = 0; j < DI; j++) {
                double acc = 0;
                for (int64_t k = 0; k < DI; k++)
                    acc += u[k] * v4p_get(&a->hadamard, k * DI + j);
                hq[j] = rb(acc);
            }
            shadow_q8(hq, DI, qi + (t * NI + h) * DI, &qs[t * NI + h]);
            qs[t * NI + h] = f16_value(dsops_ref_fp16_from_f32((float)qs[t * NI + h]));
            double acc = 0;
            for (int64_t k = 0; k < H; k++)
                acc += (double)v4p_get(&a->x, t * H + k) * v4p_get(&a->weights_proj, h * H + k);
            w[t * NI + h] = f16_value(dsops_ref_fp16_from_f32((float)(rb(acc) * a->weights_scale)));
        }
    }
    const tu_tol tols[3] = {TOL_INT8, TOL_IDX, TOL_IDX};
    compare_shadow(label, pl, r, (double *const[]){qi, qs, w}, tols);
    free(qi), free(qs), free(w), free(u), free(hq);
}

static const prolog_checks I4_CHECKS = {i4_compare, i4_shadow_check};

static void i4_run(const char *label, const i4_spec *sp)
{
    if (tu_selected(label))
        prolog_run(label, &i4_make(sp, tu_label_seed(label))->pl,
                   (double)sp->T * sp->NI * sp->DI * (sp->Q + sp->DI) < 4e7, &I4_CHECKS);
}

/* T 5, H 96, Q 80, NI 3, DI 96 (random matrix). The case list below mirrors test_mla_small on purpose: a base
 * spec and one changed field per labelled problem, so that each label reads as its own case. */
static i4_spec i4_base(void)
{
    return (i4_spec){.T = 5, .H = 96, .Q = 80, .NI = 3, .DI = 96, .rope_mode = DSOPS_ROPE_INTERLEAVED,
                     .had = I4_HAD_RANDOM};
}

static void test_idx_small(void)
{
    char label[160];
    i4_spec s = i4_base();
    i4_run("idx4_h96_q80_ni3_di96_random", &s);
    s.DI = 64;
    s.had = I4_HAD_SYLVESTER;
    i4_run("idx4_h96_q80_ni3_di64_sylvester", &s);
    s.DI = 128;
    i4_run("idx4_h96_q80_ni3_di128_sylvester", &s);
    s.had_dtype = DSOPS_FP32;
    i4_run("idx4_di128_sylvester_fp32", &s);
    s = i4_base();
    s.had_dtype = DSOPS_FP32;
    s.table_dtype = DSOPS_FP32;
    i4_run("idx4_di96_hadamard_fp32_tables_fp32", &s);
    for (int m = 0; m < 3; m++)
        for (int inv = 0; inv < 2; inv++) {
            s = i4_base();
            s.DI = 64 + 32 * ((m + inv) % 3); /* 64, 96, 128 */
            s.had = s.DI == 96 ? I4_HAD_RANDOM : I4_HAD_SYLVESTER;
            s.rope_mode = (dsops_rope_mode)m;
            s.rope_inverse = inv;
            s.table_dtype = inv ? DSOPS_FP32 : DSOPS_BF16;
            snprintf(label, sizeof label, "idx4_rope_%s_inv%d_di%d_tables_%s", cases_rope_name((dsops_rope_mode)m), inv, s.DI,
                     dsops_dtype_name(s.table_dtype));
            i4_run(label, &s);
        }
    s = i4_base();
    s.padded = 1;
    s.T = 6;
    i4_run("idx4_padded_views", &s);
    s = i4_base();
    s.zero_tokens = 2;
    i4_run("idx4_zero_tokens", &s);
    s = i4_base();
    s.sign_data = 1;
    s.rope_inverse = 1;
    i4_run("idx4_sign_data_vendor_params", &s);
    s = i4_base();
    s.weights_scale = 1.0f;
    i4_run("idx4_weights_scale_1", &s);
    s.weights_scale = -0.375f;
    i4_run("idx4_weights_scale_negative", &s);
    s.weights_scale = 3e5f; /* |w| * scale beyond 65520: fp16 +-Inf in both */
    i4_run("idx4_weights_overflow_fp16", &s);
    static const int Ts[3] = {0, 1, 17};
    for (int i = 0; i < 3; i++) {
        s = i4_base();
        s.T = Ts[i];
        s.NI = i == 1 ? 1 : 3;
        snprintf(label, sizeof label, "idx4_t%d_ni%d", s.T, s.NI);
        i4_run(label, &s);
    }
    /* the V4 head dim, several tiles in every dimension */
    s = i4_base();
    s.T = tu_quick() ? 3 : 9, s.H = 256, s.Q = 192, s.NI = 8, s.DI = 128, s.had = I4_HAD_SYLVESTER;
    i4_run("idx4_h256_q192_ni8_di128", &s);
}

/* ==================================================================================================
 * prepared objects made from other weights
 * ================================================================================================== */

static const weight_group M4_WEIGHTS[3] = {{{"wq_a", NULL}}, {{"wq_b", "wq_b_scale"}}, {{"wkv", NULL}}};
static const weight_group I4_WEIGHTS[2] = {{{"idx_wq_b", "idx_wq_b_scale"}}, {{"weights_proj", NULL}}};

static void test_prepared_mismatch(void)
{
    if (!tu_selected("prepared_mismatch"))
        return;
    /* mla: prepared from p, each packed weight of the call swapped for q's (same shapes, other memory) */
    for (int w = 0; w < 2; w++) {
        m4_spec s = m4_base(w);
        m4_problem *p = m4_make(&s, tu_label_seed("prepared_mismatch_p"));
        m4_problem *q = m4_make(&s, tu_label_seed("prepared_mismatch_q"));
        dsops_prepared *prep = NULL;
        dsops_status st = dsops_mla_prolog_v4_prepare(ctx, &p->a, &prep);
        if (tu_check(st == DSOPS_OK && prep, "prepared_mismatch mla %s: prepare: %s (%s)", w ? "int8" : "bf16",
                     dsops_status_name(st), dsops_last_error())) {
            expect_other_weights_rejected(w ? "prepared_mismatch mla int8" : "prepared_mismatch mla bf16", &p->pl,
                                          &q->pl, prep, M4_WEIGHTS, 3);
            /* the same weights with other activations and outputs: valid, bitwise the unprepared result */
            dsops_mla_prolog_v4_args b = q->a;
            b.wq_a = p->a.wq_a, b.wq_b = p->a.wq_b, b.wq_b_scale = p->a.wq_b_scale, b.wkv = p->a.wkv;
            st = prolog_call(&q->pl, &b);
            size_t n1 = 0, n2 = 0;
            unsigned char *g1 = st == DSOPS_OK ? v4p_gather(&q->pl, &n1) : NULL;
            b.prepared = prep;
            dsops_status st2 = prolog_call(&q->pl, &b);
            tu_check(st == DSOPS_OK && st2 == DSOPS_OK, "prepared_mismatch mla reuse with other activations: %s / %s (%s)",
                     dsops_status_name(st), dsops_status_name(st2), dsops_last_error());
            if (g1 && st2 == DSOPS_OK) {
                unsigned char *g2 = v4p_gather(&q->pl, &n2);
                tu_check_same_bytes("prepared_mismatch mla reuse: the prepared result", g2, n2, g1, n1,
                                    "the unprepared one");
                free(g2);
            }
            free(g1);
            /* an mla object given to the indexer */
            i4_spec is = i4_base();
            i4_problem *ip = i4_make(&is, 3);
            dsops_indexer_prolog_v4_args ib = ip->a;
            ib.prepared = prep;
            expect_prepared_rejected("prepared_mismatch: an mla_prolog_v4 object given to indexer_prolog_v4", &ip->pl,
                                     &ib);
            v4p_free(&ip->pl);
            dsops_prepared_destroy(prep);
        }
        v4p_free(&p->pl);
        v4p_free(&q->pl);
    }
    /* indexer */
    i4_spec s = i4_base();
    i4_problem *p = i4_make(&s, tu_label_seed("prepared_mismatch_ip"));
    i4_problem *q = i4_make(&s, tu_label_seed("prepared_mismatch_iq"));
    dsops_prepared *prep = NULL;
    dsops_status st = dsops_indexer_prolog_v4_prepare(ctx, &p->a, &prep);
    if (tu_check(st == DSOPS_OK && prep, "prepared_mismatch idx: prepare: %s (%s)", dsops_status_name(st),
                 dsops_last_error())) {
        expect_other_weights_rejected("prepared_mismatch idx", &p->pl, &q->pl, prep, I4_WEIGHTS, 2);
        /* an indexer object given to mla */
        m4_spec ms = m4_base(1);
        m4_problem *mp = m4_make(&ms, 4);
        dsops_mla_prolog_v4_args mb = mp->a;
        mb.prepared = prep;
        expect_prepared_rejected("prepared_mismatch: an indexer_prolog_v4 object given to mla_prolog_v4", &mp->pl, &mb);
        v4p_free(&mp->pl);
        dsops_prepared_destroy(prep);
    }
    v4p_free(&p->pl);
    v4p_free(&q->pl);
}

/* ==================================================================================================
 * determinism: 1, 2 and 3 threads, bitwise
 * ================================================================================================== */

static void test_threads(void)
{
    if (!tu_selected("threads"))
        return;
    const int tiers[2] = {DSOPS_ISA_SCALAR, (int)dsops_isa_detected()};
    for (int ti = 0; ti < (tiers[1] == tiers[0] ? 1 : 2); ti++) {
        if (!tu_set_tier(ctx, tiers[ti]))
            continue;
        for (int v = 0; v < 3; v++) {
            v4p_problem *pl;
            if (v < 2) {
                m4_spec s = m4_base(v);
                s.T = 13, s.H = 256, s.Q = 192, s.N = 6, s.D = 128;
                pl = &m4_make(&s, tu_label_seed("threads") + (uint64_t)v)->pl;
            } else {
                i4_spec s = i4_base();
                s.T = 13, s.H = 256, s.Q = 192, s.NI = 6, s.DI = 128, s.had = I4_HAD_SYLVESTER;
                pl = &i4_make(&s, tu_label_seed("threads") + 2)->pl;
            }
            char l[200];
            snprintf(l, sizeof l, "threads %s [%s]", v == 0 ? "mla4 bf16" : (v == 1 ? "mla4 int8" : "idx4"),
                     dsops_isa_name((dsops_isa)tiers[ti]));
            rc_check_threads(ctx, l, prolog_run_gather, pl);
            v4p_free(pl);
        }
    }
    tu_set_tier(ctx, dsops_isa_detected());
}

/* The case tables themselves: names, CI flags and _ci variants as in docs/CASES.md. */
static void test_case_tables(void)
{
    if (!tu_selected("case_tables"))
        return;
    int n;
    const dsops_mla4_case *mc = dsops_mla4_cases(&n);
    tu_check(n == 7, "case_tables: %d mla_prolog_v4 cases, expected 7", n);
    for (int i = 0; i < n; i++) {
        tu_check(dsops_mla4_case_find(mc[i].name) == &mc[i], "case_tables: %s not found by name", mc[i].name);
        tu_check(mc[i].ci || (mc[i].ci_variant && dsops_mla4_case_find(mc[i].ci_variant)),
                 "case_tables: %s is not CI and has no _ci variant", mc[i].name);
    }
    const dsops_mla4_case *b = dsops_mla4_case_find("v4_mla_prolog_b64_s2");
    tu_check(b && b->T == 128 && b->int8 && b->vendor_us == 130 && b->vendor && strcmp(b->vendor, "PyPTO") == 0,
             "case_tables: v4_mla_prolog_b64_s2 is not T 128, int8, 130 us PyPTO");
    const dsops_mla4_case *ci = dsops_mla4_case_find("v4_mla_prolog_int8_t512_ci");
    tu_check(ci && ci->T == 128 && ci->ci, "case_tables: v4_mla_prolog_int8_t512_ci is not T 128 / CI");
    const dsops_idxp4_case *ic = dsops_idxp4_cases(&n);
    tu_check(n == 4, "case_tables: %d indexer_prolog_v4 cases, expected 4", n);
    for (int i = 0; i < n; i++)
        tu_check(dsops_idxp4_case_find(ic[i].name) == &ic[i] && ic[i].ci, "case_tables: %s", ic[i].name);
    const dsops_idxp4_case *t = dsops_idxp4_case_find("v4_idx_prolog_t128");
    tu_check(t && t->vendor_us == 101 && t->NI == 64 && t->DI == 128, "case_tables: v4_idx_prolog_t128");
    tu_check(dsops_mla4_case_find("nope") == NULL && dsops_idxp4_case_find(NULL) == NULL, "case_tables: unknown names");
    /* generated data: int8 wq_b is Q8 per row (|q| <= 127, a row reaching 127), flops as documented */
    if (!tu_quick()) {
        dsops_mla4_problem *p = dsops_mla4_problem_make(dsops_mla4_case_find("v4_mla_prolog_int8_t4"), 5);
        if (tu_check(p != NULL, "case_tables: v4_mla_prolog_int8_t4 generation")) {
            const int8_t *w = p->args.wq_b.data;
            int ok = 1;
            for (int64_t row = 0; row < 8; row++) {
                int amax = 0;
                for (int64_t k = 0; k < 1024; k++) {
                    int v = w[row * 1024 + k] < 0 ? -w[row * 1024 + k] : w[row * 1024 + k];
                    amax = v > amax ? v : amax;
                }
                ok &= amax == 127 && ((const float *)p->args.wq_b_scale.data)[row] > 0;
            }
            tu_check(ok, "case_tables: int8 wq_b rows are not Q8 of their draws");
            const double want = 2.0 * 4 * (4096.0 * 1024 + 1024.0 * 64 * 512 + 4096.0 * 512);
            tu_check(fabs(p->flops - want) < 1.0, "case_tables: flops %.0f, expected %.0f", p->flops, want);
            tu_check(p->args.eps_qh == 1e-6f && p->args.rope_mode == DSOPS_ROPE_INTERLEAVED && p->args.rope_inverse == 0,
                     "case_tables: mla parameters are not the V4 defaults");
            dsops_mla4_problem_free(p);
        }
        dsops_idxp4_problem *q = dsops_idxp4_problem_make(dsops_idxp4_case_find("v4_idx_prolog_t64"), 42);
        if (tu_check(q != NULL, "case_tables: v4_idx_prolog_t64 generation")) {
            const int8_t *qr = q->args.qr.data;
            int ok = 1;
            for (int64_t e = 0; e < 64 * 1024; e++)
                ok &= qr[e] == 0 || qr[e] == -127;
            ok &= ((const float *)q->args.qr_scale.data)[0] == 1.0f / 127.0f;
            tu_check(ok, "case_tables: qr entries are not {-127, 0} with scale 1/127");
            const double want = 2.0 * 64 * (1024.0 * 64 * 128 + 4096.0 * 64 + 64.0 * 128 * 128);
            tu_check(fabs(q->flops - want) < 1.0, "case_tables: idx flops %.0f, expected %.0f", q->flops, want);
            tu_check(fabsf(q->args.weights_scale - 0.011048543f) < 1e-9f, "case_tables: weights_scale %.9g",
                     (double)q->args.weights_scale);
            tu_check(q->args.rope_inverse == 1, "case_tables: v4_idx_prolog_t64 does not carry the vendor parameter "
                     "rope_inverse = 1");
            dsops_idxp4_problem_free(q);
        }
    }
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, 5);
    ctx = tu_context();
    rc_set_threads(ctx, 2);
    printf("tiers: scalar ... %s, threads %d\n", dsops_isa_name(dsops_isa_detected()), dsops_context_threads(ctx));
    double t0 = tu_now();
    test_case_tables();
    test_mla_small();
    test_idx_small();
    double t1 = tu_now();
    test_prepared_mismatch();
    test_threads();
    printf("small problems %.1f s, prepared / threads %.1f s\n", t1 - t0, tu_now() - t1);
    dsops_context_destroy(ctx);
    return tu_finish();
}
