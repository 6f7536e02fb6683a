/* The checks of a library call on the adversarial V3.2 problems (problems_check.h). */
#include "problems_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"
#include "test_util.h"

#define DR 64 /* rope dims of the V3.2 prologs */

/* ---- guard zones and checked regions after a call ------------------------------------------------------ */

/* Counts a check that every element of buf outside the view v (which lies in buf; no view when v->data is
 * NULL) still holds the sentinel; the failure names `what` and the first element written. */
static int check_outside_view(const char *label, const char *what, const void *buf, size_t esz, int64_t n,
                              uint32_t sentinel, const dsops_tensor *v)
{
    unsigned char *in_view = tu_calloc((size_t)n, 1);
    if (v->data) {
        const int64_t d0 = v->shape[0], d1 = v->ndim > 1 ? v->shape[1] : 1, d2 = v->ndim > 2 ? v->shape[2] : 1;
        for (int64_t i = 0; i < d0; i++)
            for (int64_t j = 0; j < d1; j++)
                for (int64_t k = 0; k < d2; k++)
                    in_view[(tf_eaddr(v, i, j, k) - (const unsigned char *)buf) / (ptrdiff_t)esz] = 1;
    }
    int64_t stray = -1;
    for (int64_t i = 0; i < n && stray < 0; i++)
        if (!in_view[i] && !cases_holds_sentinel((const unsigned char *)buf + (size_t)i * esz, esz, 1, sentinel))
            stray = i;
    free(in_view);
    return tu_check(stray < 0, "%s: %s buffer element %lld outside the view was written", label, what,
                    (long long)stray);
}

/* 1 if every region of f still equals its snapshot; otherwise one failed check naming the first changed byte. */
static int regions_untouched(const tf_fixture *f, const char *label)
{
    int i;
    size_t k;
    if (!tf_first_change(f, &i, &k))
        return 1;
    return tu_check(0, "%s: byte %zu of buffer %d changed (0x%02x -> 0x%02x)", label, k, i, f->reg[i].snap[k],
                    f->reg[i].p[k]);
}

/* As regions_untouched, after the allowed writes were undone: the message names output / cache and the size;
 * counts one passed check when nothing changed. */
static int check_regions_untouched(const tf_fixture *f, const char *label)
{
    int i;
    size_t k;
    if (!tf_first_change(f, &i, &k))
        return tu_check(1, "%s", label);
    const tf_region *g = &f->reg[i];
    return tu_check(0, "%s: byte %zu of %s buffer %d (of %zu bytes) changed 0x%02x -> 0x%02x", label, k,
                    g->out ? "output" : "cache", i, g->n, g->snap[k], g->p[k]);
}

/* After a call: undoes the writes `each` allows, then checks that every region equals its snapshot (two
 * checks) and restores the fixture. Returns 1 on pass. */
static int check_only_written(tf_fixture *f, cases_each_written_fn each, const void *args, const char *label)
{
    tf_restore_ctx rc = {f, 0, 0};
    each(args, tf_restore_fn, &rc);
    const int inside = tu_check(rc.outside == 0, "%s: %zu written elements lie outside the checked buffers (test bug)",
                                label, rc.outside);
    char l[400];
    snprintf(l, sizeof l, "%s untouched bytes", label);
    const int unt = check_regions_untouched(f, l);
    tf_restore(f);
    return inside && unt;
}

/* ---- the prologs: the shared runs ---------------------------------------------------------------------- */

/* One call: sentinels and snapshots first (tf_prepare_call), then the call; counts a check of its status. */
static int pc_call(const pc_target *t, dsops_context *c, const char *label)
{
    tf_prepare_call(t->fx);
    return tu_check_accepted(label, t->call(c, t->args));
}

void pc_run_both(const pc_target *t, dsops_context *c, const char *label)
{
    size_t n1 = 0, n2 = 0;
    unsigned char *g1 = NULL, *g2 = NULL;
    *t->prepared = NULL;
    if (pc_call(t, c, label)) {
        g1 = t->gather(t->args, &n1);
        if (t->ref)
            t->check(t->problem, t->ref, label);
    }
    if (!g1)
        return;
    char l[400];
    snprintf(l, sizeof l, "%s prepared", label);
    dsops_prepared *prep = NULL;
    const dsops_status st = t->prepare(c, t->args, &prep);
    if (tu_check(st == DSOPS_OK && prep != NULL, "%s: prepare: status %s (%s)", l, dsops_status_name(st),
                 dsops_last_error())) {
        *t->prepared = prep;
        if (pc_call(t, c, l)) {
            g2 = t->gather(t->args, &n2);
            tu_check_same_bytes(l, g2, n2, g1, n1, "the unprepared call");
            if (t->ref)
                t->check(t->problem, t->ref, l);
        }
        *t->prepared = NULL;
        dsops_prepared_destroy(prep);
    }
    free(g1);
    free(g2);
}

void pc_run_tiers(const pc_target *t, dsops_context *c, const char *label)
{
    char l[300];
    for (int isa = -1; tu_next_tier(c, &isa, label, l, sizeof l);)
        pc_run_both(t, c, l);
}

void pc_run_threads(const pc_target *t, const char *label)
{
    dsops_context *c = NULL;
    if (!tu_check(dsops_context_create(&c) == DSOPS_OK, "%s: context", label))
        return;
    const int tiers[2] = {DSOPS_ISA_SCALAR, (int)dsops_isa_detected()};
    for (int ti = 0; ti < (tiers[1] == tiers[0] ? 1 : 2); ti++) {
        if (!tu_set_tier(c, (dsops_isa)tiers[ti]))
            continue;
        unsigned char *first = NULL;
        size_t n0 = 0;
        for (int th = 1; th <= 3; th++) {
            char l[300];
            snprintf(l, sizeof l, "%s [%s] threads %d", label, dsops_isa_name((dsops_isa)tiers[ti]), th);
            dsops_context_set_threads(c, th);
            if (!pc_call(t, c, l))
                continue;
            size_t n;
            unsigned char *g = t->gather(t->args, &n);
            tf_restore(t->fx);
            if (!first) {
                first = g, n0 = n;
                continue;
            }
            tu_check_same_bytes(l, g, n, first, n0, "1 thread");
            free(g);
        }
        free(first);
    }
    dsops_context_destroy(c);
}

void pc_expect_foreign_prepared(const pc_target *t, const pc_target *from, dsops_context *c, const char *label)
{
    dsops_prepared *po = NULL;
    dsops_status st = from->prepare(c, from->args, &po);
    if (!tu_check(st == DSOPS_OK && po, "%s: prepare: %s", label, dsops_status_name(st)))
        return;
    *t->prepared = po;
    tf_prepare_call(t->fx);
    st = t->call(c, t->args);
    tu_check(st == DSOPS_ERR_PARAM, "%s: status %s (%s), expected DSOPS_ERR_PARAM", label, dsops_status_name(st),
             dsops_last_error());
    if (st != DSOPS_OK)
        regions_untouched(t->fx, label);
    tf_restore(t->fx);
    *t->prepared = NULL;
    dsops_prepared_destroy(po);
}

void pc_run_prepared_reuse(const pc_target *t, dsops_context *c, dsops_prepared *prep, const char *label)
{
    *t->prepared = prep;
    tf_prepare_call(t->fx);
    const dsops_status st = t->call(c, t->args);
    if (tu_check(st == DSOPS_OK, "%s: %s (%s)", label, dsops_status_name(st), dsops_last_error()) && t->ref)
        t->check(t->problem, t->ref, label);
    *t->prepared = NULL;
}

void pc_expect_rejected(const pc_target *t, dsops_context *c, const void *args, dsops_status want, const char *frag,
                        int may_accept, const char *label)
{
    tf_prepare_call(t->fx);
    const dsops_status st = t->call(c, args);
    if (may_accept && st == DSOPS_OK)
        tu_check(1, "%s", label);
    else if (tu_check_rejected(label, st, want, frag))
        regions_untouched(t->fx, label);
    tf_restore(t->fx);
}

void pc_expect_prepare_status(const pc_target *t, dsops_context *c, const void *args, dsops_status want,
                              const char *label)
{
    dsops_prepared *px = NULL;
    const dsops_status st = t->prepare(c, args, &px);
    tu_check(st == want, "%s: status %s, expected %s", label, dsops_status_name(st), dsops_status_name(want));
    if (st == DSOPS_OK)
        dsops_prepared_destroy(px);
}

/* ---- sparse_flash_attention_v32 ------------------------------------------------------------------------ */

int tp_compare(const char *label, const dsops_sparse_flash_attention_v32_args *a, const uint16_t *ref_out,
               const float *ref_lse)
{
    const int64_t T = a->out.shape[0], N = a->out.shape[1], Dc = a->out.shape[2];
    const size_t n_out = (size_t)(T * N * Dc), n_lse = (size_t)(T * N);
    uint16_t *ob = tu_calloc(n_out, sizeof(uint16_t));
    uint32_t *lb = tu_calloc(n_lse, sizeof(uint32_t));
    float *of = tu_calloc(n_out, sizeof(float)), *rf = tu_calloc(n_out, sizeof(float));
    tp_extract(a, ob, lb);
    for (size_t i = 0; i < n_out; i++) {
        of[i] = tu_f32(ob[i]);
        rf[i] = tu_f32(ref_out[i]);
    }
    int ok = 1;
    const tu_tol tol_out = {a->p_mode == DSOPS_P_TILED ? 5e-4 : 1e-4, 0.005, 0.005};
    const tu_tol tol_lse = {1e-6, 8.01 / 65536.0, 0.005};
    ok &= tu_compare_close_part(label, "out", of, rf, n_out, tol_out);
    if (a->lse.data)
        ok &= tu_compare_close_part(label, "lse", (const float *)lb, ref_lse, n_lse, tol_lse);
    /* lonely rows: exactly +0 and +Inf */
    int64_t lonely = 0, bad_t = -1, bad_h = -1;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < N; h++) {
            if (!(isinf(ref_lse[t * N + h]) && ref_lse[t * N + h] > 0))
                continue;
            lonely++;
            int row_ok = 1;
            for (int64_t d = 0; d < Dc; d++)
                row_ok &= ob[(t * N + h) * Dc + d] == 0;
            if (a->lse.data) {
                float l;
                memcpy(&l, &lb[t * N + h], 4);
                row_ok &= isinf(l) && l > 0;
            }
            if (!row_ok && bad_t < 0)
                bad_t = t, bad_h = h;
        }
    if (tu_verbose())
        printf("  %s: %lld lonely rows of %lld\n", label, (long long)lonely, (long long)(T * N));
    if (lonely)
        ok &= tu_check(bad_t < 0, "%s: lonely row t=%lld h=%lld is not exactly out = +0, lse = +Inf (%lld lonely rows)",
                       label, (long long)bad_t, (long long)bad_h, (long long)lonely);
    /* poisoned rows (ref lse NaN, spec §2.10 A3): NaN in every element; a row whose reference holds no NaN
     * holds none either */
    int64_t poisoned = 0;
    bad_t = bad_h = -1;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < N; h++) {
            const uint16_t *o = ob + (t * N + h) * Dc, *r = ref_out + (t * N + h) * Dc;
            int ref_nan = isnan(ref_lse[t * N + h]), row_ok = 1, ref_any_nan = 0, any_nan = 0;
            for (int64_t d = 0; d < Dc; d++) {
                ref_any_nan |= isnan(tu_f32(r[d]));
                any_nan |= isnan(tu_f32(o[d]));
                if (ref_nan)
                    row_ok &= isnan(tu_f32(o[d]));
            }
            if (!ref_any_nan)
                row_ok &= !any_nan;
            if (a->lse.data) {
                float l;
                memcpy(&l, &lb[t * N + h], 4);
                row_ok &= isnan(l) == ref_nan;
            }
            poisoned += ref_nan;
            if (!row_ok && bad_t < 0)
                bad_t = t, bad_h = h;
        }
    if (tu_verbose())
        printf("  %s: %lld poisoned rows of %lld\n", label, (long long)poisoned, (long long)(T * N));
    ok &= tu_check(bad_t < 0, "%s: row t=%lld h=%lld breaks the NaN rule: %s", label, (long long)bad_t,
                   (long long)bad_h, "NaN throughout where the reference is NaN (lse NaN), no NaN where it has none");
    free(ob);
    free(lb);
    free(of);
    free(rf);
    return ok;
}

int tp_check(tp_problem *p, const char *label)
{
    int ok = tp_compare(label, &p->args, p->ref_out, p->ref_lse);
    ok &= check_outside_view(label, "out", p->out_buf, sizeof(uint16_t), p->out_buf_n, TP_SENTINEL_BF16,
                             &p->args.out);
    if (p->lse_buf)
        ok &= check_outside_view(label, "lse", p->lse_buf, sizeof(float), p->lse_buf_n, TP_SENTINEL_F32_BITS,
                                 &p->args.lse);
    return ok;
}

/* ---- lightning_indexer --------------------------------------------------------------------------------- */

/* two reference scores that may legitimately swap places between implementations */
static int near_tie(float x, float y, double tol)
{
    if (isnan(x) || isnan(y))
        return isnan(x) && isnan(y);
    if (isinf(x) || isinf(y))
        return x == y;
    return fabs((double)x - (double)y) <= tol;
}

static int same_value(float x, float y) { return (isnan(x) && isnan(y)) || x == y; }

int lp_compare(const char *label, const dsops_lightning_indexer_args *a, const int32_t *ref_idx,
               const float *ref_scores, int max_miss, int strict)
{
    const int64_t T = a->topk_indices.shape[0], K = a->topk_indices.shape[1];
    const int has_scores = a->topk_scores.data != NULL;
    int32_t *lib = tu_calloc((size_t)(T * K), sizeof(int32_t));
    uint32_t *libs_bits = tu_calloc((size_t)(T * K), sizeof(uint32_t));
    lp_extract(a, lib, libs_bits);
    const float *libs = (const float *)libs_bits;

    /* visible key counts and the largest one */
    int64_t *nvis = tu_calloc((size_t)(T > 0 ? T : 1), sizeof(int64_t));
    int64_t nmax = 1;
    for (int64_t t = 0; t < T; t++) {
        nvis[t] = lp_visible(a, t);
        nmax = nvis[t] > nmax ? nvis[t] : nmax;
    }
    int64_t *stamp_ref = tu_calloc((size_t)nmax, sizeof(int64_t)); /* t+1 where j is in the reference row t */
    int64_t *stamp_lib = tu_calloc((size_t)nmax, sizeof(int64_t)); /* t+1 where j is in the library row t */
    int32_t *pos_ref = tu_calloc((size_t)nmax, sizeof(int32_t));   /* position of j in the reference row */
    float *full = tu_calloc((size_t)nmax, sizeof(float));          /* lazily computed reference row */
    float *pair_lib = tu_calloc((size_t)(T * K + 1), sizeof(float));
    float *pair_ref = tu_calloc((size_t)(T * K + 1), sizeof(float));
    size_t npairs = 0;

    int ok = 1;
    int64_t bad_rows = 0, near_tie_swaps = 0, shown = 0;
    for (int64_t t = 0; t < T; t++) {
        const int32_t *lr = lib + t * K, *rr = ref_idx + t * K;
        const float *ls = libs + t * K, *rs = ref_scores + t * K;
        const int64_t n = nvis[t];
        char why[256] = "";
        int full_done = 0;
        double tol = 0.0;

        int64_t ml = 0, mr = 0;
        while (ml < K && lr[ml] != -1)
            ml++;
        while (mr < K && rr[mr] != -1)
            mr++;
        int64_t tail_bad = -1;
        for (int64_t k = ml; k < K && tail_bad < 0; k++)
            if (lr[k] != -1 || (has_scores && !(isinf(ls[k]) && ls[k] < 0)))
                tail_bad = k;
        if (ml != mr)
            snprintf(why, sizeof why, "%lld valid entries, expected %lld (n = %lld)", (long long)ml, (long long)mr,
                     (long long)n);
        else if (tail_bad >= 0)
            snprintf(why, sizeof why, "entry %lld after the valid ones is %d (score %g), expected -1 / -Inf",
                     (long long)tail_bad, lr[tail_bad], has_scores ? (double)ls[tail_bad] : 0.0);
        if (!why[0]) {
            for (int64_t k = 0; k < mr; k++) {
                stamp_ref[rr[k]] = t + 1;
                pos_ref[rr[k]] = (int32_t)k;
            }
            int64_t misses = 0, first_miss = -1;
            for (int64_t k = 0; k < ml && !why[0]; k++) {
                const int32_t j = lr[k];
                if (j < 0 || j >= n) {
                    snprintf(why, sizeof why, "entry %lld = %d is outside [0, %lld)", (long long)k, j, (long long)n);
                    break;
                }
                if (stamp_lib[j] == t + 1) {
                    snprintf(why, sizeof why, "index %d appears twice", j);
                    break;
                }
                stamp_lib[j] = t + 1;
                if (stamp_ref[j] == t + 1)
                    continue;
                if (!full_done) {
                    dsops_ref_lightning_indexer_scores(a, t, full);
                    double amax = 0.0;
                    for (int64_t i = 0; i < n; i++)
                        if (isfinite(full[i]) && fabs(full[i]) > amax)
                            amax = fabs(full[i]);
                    tol = 1e-4 * amax;
                    full_done = 1;
                }
                if (near_tie(full[j], rs[mr - 1], tol)) {
                    near_tie_swaps++;
                    continue;
                }
                if (misses++ == 0)
                    first_miss = k;
            }
            if (!why[0] && misses > max_miss) {
                int32_t j = lr[first_miss];
                snprintf(why, sizeof why,
                         "%lld indices absent from the reference (first: entry %lld = %d, reference score %.9g, "
                         "reference K-th score %.9g)",
                         (long long)misses, (long long)first_miss, j, (double)full[j], (double)rs[mr - 1]);
            }
            /* order: against the reference scores (up to near-ties) and the library's own scores (exactly) */
            for (int64_t k = 1; k < ml && !why[0]; k++) {
                const int32_t j0 = lr[k - 1], j1 = lr[k];
                if (has_scores && !dsops_ref_topk_before(ls[k - 1], j0, ls[k], j1)) {
                    snprintf(why, sizeof why, "entries %lld, %lld = (%d, %.9g), (%d, %.9g) are not in the order of "
                             "their own scores", (long long)k - 1, (long long)k, j0, (double)ls[k - 1], j1,
                             (double)ls[k]);
                    break;
                }
                float x, y;
                if (stamp_ref[j0] == t + 1 && stamp_ref[j1] == t + 1) {
                    x = rs[pos_ref[j0]];
                    y = rs[pos_ref[j1]];
                } else {
                    if (!full_done) {
                        dsops_ref_lightning_indexer_scores(a, t, full);
                        full_done = 1;
                    }
                    x = full[j0];
                    y = full[j1];
                }
                if (!dsops_ref_topk_before(x, j0, y, j1)) {
                    if (tol == 0.0) {
                        double amax = 0.0;
                        for (int64_t i = 0; i < mr; i++)
                            if (isfinite(rs[i]) && fabs(rs[i]) > amax)
                                amax = fabs(rs[i]);
                        if (full_done)
                            for (int64_t i = 0; i < n; i++)
                                if (isfinite(full[i]) && fabs(full[i]) > amax)
                                    amax = fabs(full[i]);
                        tol = 1e-4 * amax;
                    }
                    if (strict || !near_tie(x, y, tol))
                        snprintf(why, sizeof why, "entries %lld, %lld = %d, %d are out of order: reference scores "
                                 "%.9g, %.9g", (long long)k - 1, (long long)k, j0, j1, (double)x, (double)y);
                }
            }
            /* scores where both rows hold the index */
            if (has_scores && !why[0])
                for (int64_t k = 0; k < ml; k++)
                    if (stamp_ref[lr[k]] == t + 1) {
                        pair_lib[npairs] = ls[k];
                        pair_ref[npairs] = rs[pos_ref[lr[k]]];
                        npairs++;
                    }
            if (strict && !why[0])
                for (int64_t k = 0; k < K && !why[0]; k++)
                    if (lr[k] != rr[k] || (has_scores && !same_value(ls[k], rs[k])))
                        snprintf(why, sizeof why, "exact scores: entry %lld = (%d, %.9g), expected (%d, %.9g)",
                                 (long long)k, lr[k], has_scores ? (double)ls[k] : 0.0, rr[k], (double)rs[k]);
        }
        if (why[0]) {
            bad_rows++;
            if (shown++ < 3)
                printf("  %s: token %lld: %s\n", label, (long long)t, why);
        }
    }
    ok &= tu_check(bad_rows == 0, "%s: compare_topk failed in %lld of %lld rows", label, (long long)bad_rows,
                   (long long)T);
    if (tu_verbose())
        printf("  %s: %lld rows, %lld near-tie swaps, %zu score pairs\n", label, (long long)T,
               (long long)near_tie_swaps, npairs);
    if (has_scores && npairs > 0) {
        const tu_tol tol = {1e-4, 1e-4, 0.005};
        ok &= tu_compare_close_part(label, "topk_scores", pair_lib, pair_ref, npairs, tol);
    }
    free(lib);
    free(libs_bits);
    free(nvis);
    free(stamp_ref);
    free(stamp_lib);
    free(pos_ref);
    free(full);
    free(pair_lib);
    free(pair_ref);
    return ok;
}

int lp_check(lp_problem *p, const char *label)
{
    int ok = lp_compare(label, &p->args, p->ref_idx, p->ref_scores, 0, p->strict);
    ok &= check_outside_view(label, "topk_indices", p->idx_buf, sizeof(int32_t), p->idx_buf_n,
                             (uint32_t)LP_SENTINEL_I32, &p->args.topk_indices);
    if (p->score_buf) /* with the scores view absent, the whole buffer keeps its sentinels */
        ok &= check_outside_view(label, "topk_scores", p->score_buf, sizeof(float), p->score_buf_n,
                                 LP_SENTINEL_F32_BITS, &p->args.topk_scores);
    return ok;
}

/* ---- mla_prolog_v32 ------------------------------------------------------------------------------------ */

/* spec §4.1 "Tolerance" */
static const tu_tol TOL_Q = {0.005, 1.0 / 128, 0.005};       /* q_nope, q_rope */
static const tu_tol TOL_QR_I8 = {1, 0, 0.005};
static const tu_tol TOL_QR_BF16 = {1e-4, 1.0 / 128, 0.005};
static const tu_tol TOL_QR_SCALE = {2.5e-5, 0.005, 0.005};
static const tu_tol TOL_LAT_I8 = {1, 0, 0.005};
static const tu_tol TOL_BF16_ROW = {1e-4, 1.0 / 128, 0.005};  /* bf16 latent, kr */
static const tu_tol TOL_SCALE = {2.5e-5, 0.005, 0};

int mp_untouched(const mp_problem *p, const char *label) { return regions_untouched(&p->fx, label); }

int mp_check(mp_problem *p, const mp_ref *r, const char *label)
{
    const dsops_mla_prolog_v32_args *a = &p->args;
    const int64_t T = r->T, N = r->N, Q = r->Q, Dc = r->Dc, G = Dc / 128, nw = r->nw;
    const int int8 = a->wq_b.dtype == DSOPS_INT8;
    int ok = 1;
    const size_t big = (size_t)(T * N * (Dc + DR) + T * Q) + (size_t)(nw * Dc) + 1;
    float *buf = tu_calloc(big, sizeof(float));

    if (T > 0) {
        cases_dense_f32(&a->q_nope, buf);
        ok &= tu_compare_close_part(label, "q_nope", buf, r->q_nope, (size_t)(T * N * Dc), TOL_Q);
        cases_dense_f32(&a->q_rope, buf);
        ok &= tu_compare_close_part(label, "q_rope", buf, r->q_rope, (size_t)(T * N * DR), TOL_Q);
        cases_dense_f32(&a->qr, buf);
        ok &= tu_compare_close_part(label, "qr", buf, r->qr, (size_t)(T * Q), int8 ? TOL_QR_I8 : TOL_QR_BF16);
        if (int8) {
            cases_dense_f32(&a->qr_scale, buf);
            ok &= tu_compare_close_part(label, "qr_scale", buf, r->qr_scale, (size_t)T, TOL_QR_SCALE);
        }
    }

    if (nw > 0) {
        float *lat = buf, *sc = tu_calloc((size_t)(nw * (G > 0 ? G : 1)), sizeof(float)),
              *kr = tu_calloc((size_t)(nw * DR), sizeof(float));
        int64_t w = 0;
        for (int64_t t = 0; t < T; t++) {
            const int64_t row = tf_get_index(&a->cache_index, t);
            if (row < 0)
                continue;
            mp_read_cache_row(a, row, lat + w * Dc, sc + w * G, kr + w * DR);
            w++;
        }
        const int i8 = a->kv_layout != DSOPS_KV_SPLIT_BF16;
        ok &= tu_compare_close_part(label, "cache latent", lat, r->lat, (size_t)(nw * Dc),
                                    i8 ? TOL_LAT_I8 : TOL_BF16_ROW);
        if (i8)
            ok &= tu_compare_close_part(label, "cache scales", sc, r->scale, (size_t)(nw * G), TOL_SCALE);
        ok &= tu_compare_close_part(label, "cache rope", kr, r->kr, (size_t)(nw * DR), TOL_BF16_ROW);
        free(sc);
        free(kr);
    }
    free(buf);

    /* everything the call may not write */
    return check_only_written(&p->fx, mp_each_written, a, label) && ok;
}

/* Adapters from this operator's argument and problem types to pc_target. */

static dsops_status mp_call_op(dsops_context *c, const void *args) { return dsops_mla_prolog_v32(c, args); }

static dsops_status mp_prepare_op(dsops_context *c, const void *args, dsops_prepared **prep)
{
    return dsops_mla_prolog_v32_prepare(c, args, prep);
}

static unsigned char *mp_gather_op(const void *args, size_t *n) { return mp_gather(args, n); }

static int mp_check_op(void *p, const void *r, const char *label) { return mp_check(p, r, label); }

pc_target mp_target(mp_problem *p, const mp_ref *r)
{
    return (pc_target){.fx = &p->fx, .args = &p->args, .prepared = &p->args.prepared, .call = mp_call_op,
                       .prepare = mp_prepare_op, .gather = mp_gather_op, .check = mp_check_op, .problem = p, .ref = r};
}

/* ---- indexer_prolog_v32 -------------------------------------------------------------------------------- */

/* spec §4.2 "Tolerance" */
static const tu_tol TOL_QIDX_I8 = {1, 0, 0};
static const tu_tol TOL_QIDX_BF16 = {1e-4, 1.0 / 128, 0.005};
static const tu_tol TOL_QSCALE = {2.5e-5, 0, 0.005};
static const tu_tol TOL_KEY_I8 = {1, 0, 0.005};
static const tu_tol TOL_KEY_BF16 = {1e-4, 1.0 / 128, 0.005};
static const tu_tol TOL_KSCALE = {2.5e-5, 0, 0.005};
static const tu_tol TOL_W_FP16 = {2.5e-5, 1.0 / 1024, 0.005};
static const tu_tol TOL_W_BF16 = {1e-4, 1.0 / 128, 0.005};

int ip_untouched(const ip_problem *p, const char *label) { return regions_untouched(&p->fx, label); }

int ip_check(ip_problem *p, const ip_ref *r, const char *label)
{
    const dsops_indexer_prolog_v32_args *a = &p->args;
    const int64_t T = r->T, NI = r->NI, DI = r->DI, nw = r->nw;
    const int int8 = r->int8;
    int ok = 1;
    const size_t tn = (size_t)(T * NI > 0 ? T * NI : 1);
    float *q = tu_calloc(tn * (size_t)DI, sizeof(float)), *qs = tu_calloc(tn, sizeof(float)),
          *w = tu_calloc(tn, sizeof(float));

    if (T > 0) {
        cases_dense_f32(&a->q_idx, q);
        ok &= tu_compare_close_part(label, "q_idx", q, r->q_idx, (size_t)(T * NI * DI),
                                    int8 ? TOL_QIDX_I8 : TOL_QIDX_BF16);
        if (int8) {
            cases_dense_f32(&a->q_idx_scale, qs);
            ok &= tu_compare_close_part(label, "q_idx_scale", qs, r->q_idx_scale, (size_t)(T * NI), TOL_QSCALE);
        }
        cases_dense_f32(&a->weights, w);
        ok &= tu_compare_close_part(label, "weights", w, r->weights, (size_t)(T * NI), int8 ? TOL_W_FP16 : TOL_W_BF16);
    }
    free(q);
    free(qs);
    free(w);

    if (nw > 0) {
        float *key = tu_calloc((size_t)(nw * DI), sizeof(float)), *ks = tu_calloc((size_t)nw, sizeof(float));
        int64_t i = 0;
        for (int64_t t = 0; t < T; t++) {
            const int64_t row = tf_get_index(&a->cache_index, t);
            if (row < 0)
                continue;
            const int64_t BS = a->idx_k_cache.shape[1], blk = row / BS, off = row % BS;
            for (int64_t d = 0; d < DI; d++)
                key[i * DI + d] = tf_getf(&a->idx_k_cache, blk, off, d);
            if (int8)
                ks[i] = tf_getf(&a->idx_k_scale_cache, blk, off, 0);
            i++;
        }
        ok &= tu_compare_close_part(label, "cache keys", key, r->key, (size_t)(nw * DI),
                                    int8 ? TOL_KEY_I8 : TOL_KEY_BF16);
        if (int8)
            ok &= tu_compare_close_part(label, "cache key scales", ks, r->key_scale, (size_t)nw, TOL_KSCALE);
        free(key);
        free(ks);
    }

    /* everything the call may not write */
    return check_only_written(&p->fx, ip_each_written, a, label) && ok;
}

/* Adapters from this operator's argument and problem types to pc_target. */

static dsops_status ip_call_op(dsops_context *c, const void *args) { return dsops_indexer_prolog_v32(c, args); }

static dsops_status ip_prepare_op(dsops_context *c, const void *args, dsops_prepared **prep)
{
    return dsops_indexer_prolog_v32_prepare(c, args, prep);
}

static unsigned char *ip_gather_op(const void *args, size_t *n) { return ip_gather(args, n); }

static int ip_check_op(void *p, const void *r, const char *label) { return ip_check(p, r, label); }

pc_target ip_target(ip_problem *p, const ip_ref *r)
{
    return (pc_target){.fx = &p->fx, .args = &p->args, .prepared = &p->args.prepared, .call = ip_call_op,
                       .prepare = ip_prepare_op, .gather = ip_gather_op, .check = ip_check_op, .problem = p, .ref = r};
}
