/* The benchmark registry (bench_registry.h): per operator, how a named case becomes a problem that one timing loop
 * can run, check against its oracle (ref/) and count (FLOP or OP, bytes, which peak), and the words and detail
 * rows the tool prints for it. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_registry.h"
#include "cases_internal.h"
#include "linear.h"
#include "ref.h"

/* sparse_flash_attention_v32: out against the oracle with the tolerance of spec §4.4. */
static dsops_status sfa_run(dsops_context *ctx, void *p)
{
    return dsops_sparse_flash_attention_v32(ctx, &((dsops_sfa_problem *)p)->args);
}

static int sfa_check(void *pv, char *why, size_t cap)
{
    const dsops_sfa_problem *p = pv;
    const dsops_sparse_flash_attention_v32_args *a = &p->args;
    size_t n_out = (size_t)(p->T * p->c.N * p->c.Dc);
    uint16_t *ref_out = malloc(n_out * 2 + 2);
    float *ref_lse = malloc((size_t)(p->T * p->c.N) * 4 + 4);
    if (!ref_out || !ref_lse) {
        free(ref_out);
        free(ref_lse);
        snprintf(why, cap, "out of memory");
        return 1;
    }
    dsops_sparse_flash_attention_v32_args r = *a;
    int64_t so[3] = {p->T, p->c.N, p->c.Dc}, sl[2] = {p->T, p->c.N};
    r.out = dsops_tensor_make(ref_out, DSOPS_BF16, 3, so);
    r.lse = a->lse.data ? dsops_tensor_make(ref_lse, DSOPS_FP32, 2, sl) : (dsops_tensor){0};
    dsops_ref_sparse_flash_attention_v32(&r);
    size_t bad = 0;
    double max_err = 0;
    const uint16_t *got = a->out.data;
    for (size_t i = 0; i < n_out; i++) {
        float x = cases_bf16_value(got[i]), y = cases_bf16_value(ref_out[i]);
        double err = fabs((double)x - (double)y);
        if (isnan(x) != isnan(y) || (!isnan(x) && err > 1e-4 + 0.005 * fabs((double)y)))
            bad++;
        if (err > max_err)
            max_err = err;
    }
    free(ref_out);
    free(ref_lse);
    snprintf(why, cap, "%zu of %zu elements outside 1e-4 / 0.005, max |err| %.3g", bad, n_out, max_err);
    return bad > (size_t)floor(0.005 * (double)n_out + 0.5);
}

static void sfa_release(void *p) { dsops_sfa_problem_free(p); }

/* lightning_indexer: compare_topk (spec §1.8) against the oracle, max_miss 1 per row. */
static dsops_status li_run(dsops_context *ctx, void *p)
{
    return dsops_lightning_indexer(ctx, &((dsops_li_problem *)p)->args);
}

static int li_check(void *pv, char *why, size_t cap)
{
    const dsops_li_problem *p = pv;
    int64_t T = p->T, K = p->c.K;
    int32_t *ref = malloc((size_t)(T * K) * 4 + 4);
    if (!ref) {
        snprintf(why, cap, "out of memory");
        return 1;
    }
    dsops_lightning_indexer_args r = p->args;
    int64_t so[2] = {T, K};
    r.topk_indices = dsops_tensor_make(ref, DSOPS_INT32, 2, so);
    r.topk_scores = (dsops_tensor){0};
    dsops_ref_lightning_indexer(&r);
    const int32_t *got = p->args.topk_indices.data;
    int64_t bad_rows = 0;
    for (int64_t t = 0; t < T; t++) {
        const int32_t *g = got + t * K, *e = ref + t * K;
        int64_t ng = 0, ne = 0, miss = 0;
        while (ng < K && g[ng] >= 0)
            ng++;
        while (ne < K && e[ne] >= 0)
            ne++;
        for (int64_t j = 0; j < ng; j++) {
            int found = 0;
            for (int64_t i = 0; i < ne && !found; i++)
                found = g[j] == e[i];
            miss += !found;
        }
        bad_rows += ng != ne || miss > 1;
    }
    free(ref);
    snprintf(why, cap, "%lld of %lld rows differ beyond one index", (long long)bad_rows, (long long)T);
    return bad_rows != 0;
}

static void li_release(void *p) { dsops_li_problem_free(p); }

/* mla_prolog_v32: timed with prepared weights (packed once, outside the timing); --check compares
 * q_nope with the oracle at the spec's tolerance. A second row times the same matmuls alone. */
typedef struct mlap_bench {
    dsops_mlap_problem *p;
    dsops_prepared *prep;
    void *x2, *y;              /* stand-in activations and fp32 results for the matmul-only row */
} mlap_bench;

static dsops_status mlap_run(dsops_context *ctx, void *pv)
{
    return dsops_mla_prolog_v32(ctx, &((mlap_bench *)pv)->p->args);
}

static int mlap_check(void *pv, char *why, size_t cap)
{
    mlap_bench *b = pv;
    const dsops_mla_prolog_v32_args *a = &b->p->args;
    int64_t T = b->p->T, N = b->p->c.N, Dc = b->p->c.Dc;
    size_t n = (size_t)(T * N * Dc);
    uint16_t *got = malloc(n * 2 + 2);
    if (!got) {
        snprintf(why, cap, "out of memory");
        return 1;
    }
    memcpy(got, a->q_nope.data, n * 2);
    /* the oracle rewrites outputs and caches from the same inputs */
    dsops_ref_mla_prolog_v32(a);
    const uint16_t *ref = a->q_nope.data;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float x = cases_bf16_value(got[i]), y = cases_bf16_value(ref[i]);
        if (isnan(x) != isnan(y) || fabs((double)x - (double)y) > 0.005 + fabs((double)y) / 128.0)
            bad++;
    }
    free(got);
    snprintf(why, cap, "%zu of %zu q_nope elements outside 0.005 / 2^-7", bad, n);
    return bad > (size_t)floor(0.005 * (double)n + 0.5);
}

static void mlap_release(void *pv)
{
    mlap_bench *b = pv;
    dsops_prepared_destroy(b->prep);
    dsops_mlap_problem_free(b->p);
    free(b->x2);
    free(b->y);
    free(b);
}

/* The prolog's matmuls alone, on the prepared maps: x by wq_a and wkv_a, a [T, Q] operand by wq_b,
 * and every head's [T, Dqn] slice of a [T, N*(Dqn+64)] operand by w_uk[h]. */
static dsops_status mlap_gemms_run(dsops_context *ctx, void *pv)
{
    mlap_bench *b = pv;
    const dsops_mlap_case *c = &b->p->c;
    int64_t T = b->p->T, G = c->Dqn + 64, NG = c->N * G, Q = c->Q;
    int threads = dsops_context_threads(ctx);
    float *y = b->y;
    dsops_linear **m = b->prep->maps;
    dsops_linear_job j1[2] = {{m[0], b->p->args.x.data, c->H, y, Q}, {m[1], b->p->args.x.data, c->H, y, c->Dc + 64}};
    dsops_status s = dsops_linear_run(ctx, j1, 2, T, threads, dsops_context_isa(ctx));
    dsops_linear_job j3 = {m[2], b->x2, Q, y, NG};
    if (s == DSOPS_OK)
        s = dsops_linear_run(ctx, &j3, 1, T, threads, dsops_context_isa(ctx));
    dsops_linear_job *jh = malloc(sizeof *jh * (size_t)c->N);
    for (int h = 0; s == DSOPS_OK && jh && h < c->N; h++)
        jh[h] = (dsops_linear_job){m[3 + h], (const uint16_t *)b->x2 + h * G, NG, y + (size_t)h * T * c->Dc, c->Dc};
    if (s == DSOPS_OK && jh)
        s = dsops_linear_run(ctx, jh, c->N, T, threads, dsops_context_isa(ctx));
    free(jh);
    return s;
}

/* indexer_prolog_v32: timed with prepared weights (packed once, outside the timing); --check compares
 * q_idx with the oracle at the spec's tolerance. A second row times the same matmuls alone. */
typedef struct idxp_bench {
    dsops_idxp_problem *p;
    dsops_prepared *prep;
    void *hx;                  /* [T*NI, DI] stand-in Hadamard operand, in the matrices' dtype */
    void *y;                   /* fp32 / int32 results of the matmul-only row */
} idxp_bench;

/* The maps of an indexer_prolog_v32 prepared object, in its order (absent Hadamard matrix: no map). */
enum { IDXP_MAP_WQ_B, IDXP_MAP_WK, IDXP_MAP_WPROJ, IDXP_MAP_HQ, IDXP_MAP_HK, IDXP_MAP_COUNT };

static dsops_status idxp_run(dsops_context *ctx, void *pv)
{
    return dsops_indexer_prolog_v32(ctx, &((idxp_bench *)pv)->p->args);
}

static int idxp_check(void *pv, char *why, size_t cap)
{
    idxp_bench *b = pv;
    const dsops_indexer_prolog_v32_args *a = &b->p->args;
    const int int8 = b->p->c.int8;
    size_t n = (size_t)(b->p->T * b->p->c.NI * b->p->c.DI), es = int8 ? 1 : 2;
    unsigned char *got = malloc(n * es + 2);
    if (!got) {
        snprintf(why, cap, "out of memory");
        return 1;
    }
    memcpy(got, a->q_idx.data, n * es);
    /* the oracle rewrites outputs and cache rows from the same inputs */
    dsops_ref_indexer_prolog_v32(a);
    size_t bad = 0;
    double max_err = 0;
    for (size_t i = 0; i < n; i++) {
        double x, y;
        if (int8) {
            x = ((const int8_t *)got)[i];
            y = ((const int8_t *)a->q_idx.data)[i];
        } else {
            uint16_t gx, gy;
            memcpy(&gx, got + 2 * i, 2);
            gy = ((const uint16_t *)a->q_idx.data)[i];
            x = cases_bf16_value(gx);
            y = cases_bf16_value(gy);
        }
        double err = fabs(x - y);
        /* int8: 1 / 0 / 0; bf16: 1e-4 / 2^-7 / 0.005 (spec §4.2) */
        if (isnan(x) != isnan(y) || (!isnan(x) && err > (int8 ? 1.0 : 1e-4 + fabs(y) / 128.0)))
            bad++;
        if (err > max_err)
            max_err = err;
    }
    free(got);
    size_t allowed = int8 ? 0 : (size_t)floor(0.005 * (double)n + 0.5);
    snprintf(why, cap, "%zu of %zu q_idx elements outside %s (allowed %zu), max |err| %.3g", bad, n,
             int8 ? "1 / 0" : "1e-4 / 2^-7", allowed, max_err);
    return bad > allowed;
}

static void idxp_release(void *pv)
{
    idxp_bench *b = pv;
    dsops_prepared_destroy(b->prep);
    dsops_idxp_problem_free(b->p);
    free(b->hx);
    free(b->y);
    free(b);
}

/* The prolog's matmuls alone, on the prepared maps: a [T, Q] operand (qr) by idx_wq_b, x by idx_wk and
 * weights_proj, and the Hadamard maps on [T*NI, DI] and [T, DI] operands of the matrices' dtype. */
static dsops_status idxp_gemms_run(dsops_context *ctx, void *pv)
{
    idxp_bench *b = pv;
    const dsops_idxp_case *c = &b->p->c;
    const dsops_indexer_prolog_v32_args *a = &b->p->args;
    int64_t T = b->p->T, NQ = (int64_t)c->NI * c->DI;
    int threads = dsops_context_threads(ctx);
    char *y = b->y; /* separate fp32 / int32 regions per concurrent job */
    dsops_linear **m = b->prep->maps;
    dsops_linear_job j1[3] = {{m[IDXP_MAP_WQ_B], a->qr.data, c->Q, y, NQ},
                              {m[IDXP_MAP_WK], a->x.data, c->H, y + (size_t)(T * NQ) * 4, c->DI},
                              {m[IDXP_MAP_WPROJ], a->x.data, c->H, y + (size_t)(T * (NQ + c->DI)) * 4, c->NI}};
    dsops_status s = dsops_linear_run(ctx, j1, 3, T, threads, dsops_context_isa(ctx));
    if (s == DSOPS_OK && m[IDXP_MAP_HQ]) {
        dsops_linear_job jq = {m[IDXP_MAP_HQ], b->hx, c->DI, y, c->DI};
        s = dsops_linear_run(ctx, &jq, 1, T * c->NI, threads, dsops_context_isa(ctx));
    }
    if (s == DSOPS_OK && m[IDXP_MAP_HK]) {
        dsops_linear_job jk = {m[IDXP_MAP_HK], b->hx, c->DI, y, c->DI};
        s = dsops_linear_run(ctx, &jk, 1, T, threads, dsops_context_isa(ctx));
    }
    return s;
}

int bench_no_check(void *pv, char *why, size_t cap)
{
    (void)pv;
    snprintf(why, cap, "nothing to compare");
    return 0;
}

void bench_no_release(void *pv) { (void)pv; }

/* sparse_attention_v32 (the fused layer): timed with prepared weights; --check compares the fused result
 * with the four stand-alone operators run in sequence (bitwise). After the fused row, one row per stage
 * times each stand-alone operator on the stage arguments (prepared weights for the prologs). */
typedef struct dia_bench {
    dsops_dia_problem *p;
    dsops_prepared *prep;             /* the fused operator's */
    dsops_dia_stages *st;             /* the stages' arguments and intermediates */
    dsops_prepared *prep_mla, *prep_idx;
} dia_bench;

static dsops_status dia_run(dsops_context *ctx, void *pv)
{
    return dsops_sparse_attention_v32(ctx, &((dia_bench *)pv)->p->args);
}

static dsops_status dia_mla_run(dsops_context *ctx, void *pv)
{
    return dsops_mla_prolog_v32(ctx, &((dia_bench *)pv)->st->mla);
}

static dsops_status dia_idx_run(dsops_context *ctx, void *pv)
{
    return dsops_indexer_prolog_v32(ctx, &((dia_bench *)pv)->st->idx);
}

static dsops_status dia_li_run(dsops_context *ctx, void *pv)
{
    return dsops_lightning_indexer(ctx, &((dia_bench *)pv)->st->li);
}

static dsops_status dia_sfa_run(dsops_context *ctx, void *pv)
{
    return dsops_sparse_flash_attention_v32(ctx, &((dia_bench *)pv)->st->sfa);
}

static dsops_status dia_chain_run(dsops_context *ctx, void *pv)
{
    dsops_status s = dia_mla_run(ctx, pv);
    if (s == DSOPS_OK)
        s = dia_idx_run(ctx, pv);
    if (s == DSOPS_OK)
        s = dia_li_run(ctx, pv);
    if (s == DSOPS_OK)
        s = dia_sfa_run(ctx, pv);
    return s;
}

/* The fused call has just run (bench_case): the stage chain must give the same out, lse and top-k. */
static int dia_check(void *pv, char *why, size_t cap)
{
    dia_bench *b = pv;
    const dsops_sparse_attention_v32_args *a = &b->p->args;
    size_t no = (size_t)(b->p->T * b->p->c.N * b->p->c.Dc) * 2, nl = (size_t)(b->p->T * b->p->c.N) * 4,
           nk = (size_t)(b->p->T * b->p->c.K) * 4;
    unsigned char *keep = malloc(no + nl + nk + 1);
    if (!keep) {
        snprintf(why, cap, "out of memory");
        return 1;
    }
    memcpy(keep, a->out.data, no);
    memcpy(keep + no, a->lse.data, nl);
    memcpy(keep + no + nl, a->topk_indices.data, nk);
    dsops_status s = dia_chain_run(NULL, b);
    int bad = s != DSOPS_OK || memcmp(keep, a->out.data, no) != 0 || memcmp(keep + no, a->lse.data, nl) != 0 ||
              memcmp(keep + no + nl, b->st->li.topk_indices.data, nk) != 0;
    free(keep);
    snprintf(why, cap, "%s", s != DSOPS_OK ? dsops_last_error() : "the stage chain gives other bytes than the fused call");
    return bad;
}

static void dia_release(void *pv)
{
    dia_bench *b = pv;
    dsops_prepared_destroy(b->prep);
    dsops_prepared_destroy(b->prep_mla);
    dsops_prepared_destroy(b->prep_idx);
    dsops_dia_stages_free(b->st);
    dsops_dia_problem_free(b->p);
    free(b);
}

/* ---- DeepSeek-V4 operators ------------------------------------------------------------------------ */

/* Value i of a bf16, fp32 or int8 buffer. */
static double elem_value(const void *p, dsops_dtype dt, size_t i)
{
    switch (dt) {
    case DSOPS_FP32: return ((const float *)p)[i];
    case DSOPS_INT8: return ((const int8_t *)p)[i];
    default: return cases_bf16_value(((const uint16_t *)p)[i]);
    }
}

/* Counts the elements of got outside atol + rtol |ref| (non-finite values must coincide, spec §1.8) and
 * adds them to *bad; *n_total += n. */
static void count_outside(const void *got, const void *ref, dsops_dtype dt, size_t n, double atol, double rtol,
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

/* The token windows a --check of a V4 case compares (the oracles are slow single-threaded loops): all
 * tokens up to 384, else the first, middle and last 128. */
static int check_windows(int64_t T, int64_t start[3], int64_t len[3])
{
    if (T <= 384) {
        start[0] = 0, len[0] = T;
        return 1;
    }
    start[0] = 0, start[1] = T / 2 - 64, start[2] = T - 128;
    len[0] = len[1] = len[2] = 128;
    return 3;
}

/* hc_pre: y (1e-4 / 2^-7 / 0.005) and post (2.5e-5 / 0.005 / 0.005) on sampled tokens; pre and comb
 * too on well-conditioned data (spec §3.1, docs/CASES.md). */
static dsops_status hcpre_run(dsops_context *ctx, void *p)
{
    return dsops_hc_pre(ctx, &((dsops_hcpre_problem *)p)->args);
}

static int hcpre_check(void *pv, char *why, size_t cap)
{
    const dsops_hcpre_problem *p = pv;
    const dsops_hc_pre_args *a = &p->args;
    const int64_t HC = p->c.HC, H = p->c.H;
    int64_t w0[3], wn[3];
    const int nw = check_windows(p->c.T, w0, wn);
    size_t bad_y = 0, n_y = 0, bad_g = 0, n_g = 0;
    double max_y = 0, max_g = 0;
    for (int w = 0; w < nw; w++) {
        const int64_t t0 = w0[w], n = wn[w];
        uint16_t *ry = malloc((size_t)(n * H) * 2 + 2);
        float *rg = malloc((size_t)(n * (2 * HC + HC * HC)) * 4 + 4); /* post | pre | comb */
        if (!ry || !rg) {
            free(ry), free(rg);
            snprintf(why, cap, "out of memory");
            return 1;
        }
        dsops_hc_pre_args r = *a; /* the oracle on tokens t0 .. t0+n-1 (tokens are independent) */
        r.x.data = (uint16_t *)a->x.data + t0 * HC * H;
        r.x.shape[0] = r.y.shape[0] = r.post.shape[0] = r.pre.shape[0] = r.comb.shape[0] = n;
        r.y.data = ry, r.post.data = rg, r.pre.data = rg + n * HC, r.comb.data = rg + 2 * n * HC;
        if (!a->pre.data)
            r.pre.data = NULL;
        dsops_ref_hc_pre(&r);
        count_outside((const uint16_t *)a->y.data + t0 * H, ry, DSOPS_BF16, (size_t)(n * H), 1e-4, 1.0 / 128, &bad_y,
                      &n_y, &max_y);
        count_outside((const float *)a->post.data + t0 * HC, rg, DSOPS_FP32, (size_t)(n * HC), 2.5e-5, 0.005, &bad_g,
                      &n_g, &max_g);
        if (p->c.well_conditioned) {
            if (a->pre.data)
                count_outside((const float *)a->pre.data + t0 * HC, rg + n * HC, DSOPS_FP32, (size_t)(n * HC), 2.5e-5,
                              0.005, &bad_g, &n_g, &max_g);
            count_outside((const float *)a->comb.data + t0 * HC * HC, rg + 2 * n * HC, DSOPS_FP32,
                          (size_t)(n * HC * HC), 2.5e-5, 0.005, &bad_g, &n_g, &max_g);
        }
        free(ry), free(rg);
    }
    snprintf(why, cap, "y: %zu of %zu outside 1e-4 / 2^-7 (max |err| %.3g); %s: %zu of %zu outside 2.5e-5 / 0.005 "
             "(max |err| %.3g)", bad_y, n_y, max_y, p->c.well_conditioned ? "post, pre, comb" : "post", bad_g, n_g,
             max_g);
    return bad_y > (size_t)floor(0.005 * (double)n_y + 0.5) || bad_g > (size_t)floor(0.005 * (double)n_g + 0.5);
}

static void hcpre_release(void *pv)
{
    dsops_hcpre_problem *p = pv;
    dsops_prepared_destroy((dsops_prepared *)p->args.prepared); /* made by make_v4_problem */
    dsops_hcpre_problem_free(p);
}

/* hc_post: out on sampled tokens, bf16 1e-4 / 2^-7 / 0, fp32 1e-4 / 1e-5 / 0 (spec §3.2). */
static dsops_status hcpost_run(dsops_context *ctx, void *p)
{
    return dsops_hc_post(ctx, &((dsops_hcpost_problem *)p)->args);
}

static int hcpost_check(void *pv, char *why, size_t cap)
{
    const dsops_hcpost_problem *p = pv;
    const dsops_hc_post_args *a = &p->args;
    const int64_t HC = p->c.HC, H = p->c.H, row = HC * H;
    const dsops_dtype dt = p->c.x_dtype;
    const size_t xe = dsops_dtype_size(dt), pe = dsops_dtype_size(p->c.post_dtype);
    const double rtol = dt == DSOPS_FP32 ? 1e-5 : 1.0 / 128;
    int64_t w0[3], wn[3];
    const int nw = check_windows(p->c.T, w0, wn);
    size_t bad = 0, total = 0;
    double max_err = 0;
    for (int w = 0; w < nw; w++) {
        const int64_t t0 = w0[w], n = wn[w];
        void *ref = malloc((size_t)(n * row) * xe + 4);
        if (!ref) {
            snprintf(why, cap, "out of memory");
            return 1;
        }
        dsops_hc_post_args r = *a; /* the oracle on tokens t0 .. t0+n-1 */
        r.x.data = (char *)a->x.data + (size_t)(t0 * H) * xe;
        r.residual.data = (char *)a->residual.data + (size_t)(t0 * row) * xe;
        r.post.data = (char *)a->post.data + (size_t)(t0 * HC) * pe;
        r.comb.data = (char *)a->comb.data + (size_t)(t0 * HC * HC) * pe;
        r.out.data = ref;
        r.x.shape[0] = r.residual.shape[0] = r.post.shape[0] = r.comb.shape[0] = r.out.shape[0] = n;
        dsops_ref_hc_post(&r);
        count_outside((const char *)a->out.data + (size_t)(t0 * row) * xe, ref, dt, (size_t)(n * row), 1e-4, rtol,
                      &bad, &total, &max_err);
        free(ref);
    }
    snprintf(why, cap, "%zu of %zu out elements outside 1e-4 / %g, max |err| %.3g", bad, total, rtol, max_err);
    return bad != 0;
}

static void hcpost_release(void *p) { dsops_hcpost_problem_free(p); }

/* mla_prolog_v4: timed with prepared weights; --check compares q with the oracle (1e-4 / 2^-7 / 0.005;
 * int8 variant: see mla4_check). A second row times the same matmuls alone. */
typedef struct mla4_bench {
    dsops_mla4_problem *p;
    dsops_prepared *prep;
    void *y;                   /* fp32 / int32 results of the matmul-only row */
} mla4_bench;

/* The maps of an mla_prolog_v4 prepared object, in its order. */
enum { MLA4_MAP_WQ_A, MLA4_MAP_WKV, MLA4_MAP_WQ_B, MLA4_MAP_COUNT };

static dsops_status mla4_run(dsops_context *ctx, void *pv)
{
    return dsops_mla_prolog_v4(ctx, &((mla4_bench *)pv)->p->args);
}

/* int8 wq_b: the library may round a qr element the other way than the oracle (its fp32 sums run in
 * another order; qr tolerance 1 / 0 / 0), which moves q of that token beyond q's tolerance; q is then
 * compared only on tokens whose qr rows agree, and the others must have qr within 1. */
static int mla4_check(void *pv, char *why, size_t cap)
{
    mla4_bench *b = pv;
    const dsops_mla_prolog_v4_args *a = &b->p->args;
    const int64_t T = b->p->c.T, ND = (int64_t)b->p->c.N * b->p->c.D, Q = b->p->c.Q;
    const int int8 = b->p->c.int8;
    size_t n = (size_t)(T * ND);
    uint16_t *got = malloc(n * 2 + 2);
    int8_t *got_qr = malloc((size_t)(T * Q) + 1);
    if (!got || !got_qr) {
        free(got), free(got_qr);
        snprintf(why, cap, "out of memory");
        return 1;
    }
    memcpy(got, a->q.data, n * 2);
    if (int8)
        memcpy(got_qr, a->qr.data, (size_t)(T * Q));
    dsops_ref_mla_prolog_v4(a); /* rewrites the outputs from the same inputs */
    size_t bad = 0, total = 0, bad_qr = 0, qr_total = 0;
    double max_err = 0, max_qr = 0;
    int64_t skipped = 0;
    for (int64_t t = 0; t < T; t++) {
        if (int8 && memcmp(got_qr + t * Q, (const int8_t *)a->qr.data + t * Q, (size_t)Q) != 0) {
            count_outside(got_qr + t * Q, (const int8_t *)a->qr.data + t * Q, DSOPS_INT8, (size_t)Q, 1.0, 0.0, &bad_qr,
                          &qr_total, &max_qr);
            skipped++;
            continue;
        }
        count_outside(got + t * ND, (const uint16_t *)a->q.data + t * ND, DSOPS_BF16, (size_t)ND, 1e-4, 1.0 / 128,
                      &bad, &total, &max_err);
    }
    free(got), free(got_qr);
    snprintf(why, cap, "%zu of %zu q elements outside 1e-4 / 2^-7, max |err| %.3g; %lld token(s) with qr rows "
             "other than the oracle's (%zu elements beyond 1)", bad, total, max_err, (long long)skipped, bad_qr);
    return bad > (size_t)floor(0.005 * (double)total + 0.5) || bad_qr != 0;
}

static void mla4_release(void *pv)
{
    mla4_bench *b = pv;
    dsops_prepared_destroy(b->prep);
    dsops_mla4_problem_free(b->p);
    free(b->y);
    free(b);
}

/* The prolog's matmuls alone, on the prepared maps: x by wq_a and wkv together, then the call's qr (int8
 * or bf16, as wq_b) by wq_b. */
static dsops_status mla4_gemms_run(dsops_context *ctx, void *pv)
{
    mla4_bench *b = pv;
    const dsops_mla4_case *c = &b->p->c;
    const dsops_mla_prolog_v4_args *a = &b->p->args;
    const int64_t T = c->T, ND = (int64_t)c->N * c->D;
    const int threads = dsops_context_threads(ctx);
    char *y = b->y; /* separate regions for the concurrent jobs */
    dsops_linear **m = b->prep->maps;
    dsops_linear_job j1[2] = {{m[MLA4_MAP_WQ_A], a->x.data, c->H, y, c->Q},
                              {m[MLA4_MAP_WKV], a->x.data, c->H, y + (size_t)(T * c->Q) * 4, c->D}};
    dsops_status s = dsops_linear_run(ctx, j1, 2, T, threads, dsops_context_isa(ctx));
    dsops_linear_job j2 = {m[MLA4_MAP_WQ_B], a->qr.data, c->Q, y, ND};
    if (s == DSOPS_OK)
        s = dsops_linear_run(ctx, &j2, 1, T, threads, dsops_context_isa(ctx));
    return s;
}

/* indexer_prolog_v4: timed with prepared weights; --check compares q_idx with the oracle (1 / 0 / 0).
 * A second row times the same matmuls alone (idx_wq_b, weights_proj and the Hadamard map). */
typedef struct idxp4_bench {
    dsops_idxp4_problem *p;
    dsops_prepared *prep;
    void *hx;                  /* [T*NI, DI] stand-in Hadamard operand, in the matrix's dtype */
    void *y;                   /* int32 / fp32 results of the matmul-only row */
} idxp4_bench;

/* The maps of an indexer_prolog_v4 prepared object, in its order. */
enum { IDXP4_MAP_WQ_B, IDXP4_MAP_WPROJ, IDXP4_MAP_HAD, IDXP4_MAP_COUNT };

static dsops_status idxp4_run(dsops_context *ctx, void *pv)
{
    return dsops_indexer_prolog_v4(ctx, &((idxp4_bench *)pv)->p->args);
}

static int idxp4_check(void *pv, char *why, size_t cap)
{
    idxp4_bench *b = pv;
    const dsops_indexer_prolog_v4_args *a = &b->p->args;
    size_t n = (size_t)((int64_t)b->p->c.T * b->p->c.NI * b->p->c.DI);
    int8_t *got = malloc(n + 1);
    if (!got) {
        snprintf(why, cap, "out of memory");
        return 1;
    }
    memcpy(got, a->q_idx.data, n);
    dsops_ref_indexer_prolog_v4(a); /* rewrites the outputs from the same inputs */
    size_t bad = 0, total = 0;
    double max_err = 0;
    count_outside(got, a->q_idx.data, DSOPS_INT8, n, 1.0, 0.0, &bad, &total, &max_err);
    free(got);
    snprintf(why, cap, "%zu of %zu q_idx elements outside 1 / 0, max |err| %.3g", bad, n, max_err);
    return bad != 0;
}

static void idxp4_release(void *pv)
{
    idxp4_bench *b = pv;
    dsops_prepared_destroy(b->prep);
    dsops_idxp4_problem_free(b->p);
    free(b->hx);
    free(b->y);
    free(b);
}

/* The prolog's matmuls alone, on the prepared maps: qr (int8) by idx_wq_b and x by weights_proj, then the
 * Hadamard map on a [T*NI, DI] operand of the matrix's dtype. */
static dsops_status idxp4_gemms_run(dsops_context *ctx, void *pv)
{
    idxp4_bench *b = pv;
    const dsops_idxp4_case *c = &b->p->c;
    const dsops_indexer_prolog_v4_args *a = &b->p->args;
    const int64_t T = c->T, NQ = (int64_t)c->NI * c->DI;
    const int threads = dsops_context_threads(ctx);
    char *y = b->y;
    dsops_linear **m = b->prep->maps;
    dsops_linear_job j[2] = {{m[IDXP4_MAP_WQ_B], a->qr.data, c->Q, y, NQ},
                             {m[IDXP4_MAP_WPROJ], a->x.data, c->H, y + (size_t)(T * NQ) * 4, c->NI}};
    dsops_status s = dsops_linear_run(ctx, j, 2, T, threads, dsops_context_isa(ctx));
    dsops_linear_job jh = {m[IDXP4_MAP_HAD], b->hx, c->DI, y, c->DI};
    if (s == DSOPS_OK)
        s = dsops_linear_run(ctx, &jh, 1, T * c->NI, threads, dsops_context_isa(ctx));
    return s;
}

/* compressor: timed with prepared weights (repeated calls write the same state rows and entries, so each
 * call does the same work); --check compares out with the oracle (1e-4 / 2^-7 / 0.005). A second row
 * times the two projections alone. */
typedef struct cmp_bench {
    dsops_cmp_problem *p;
    dsops_prepared *prep;
    void *y;                   /* fp32 results of the matmul-only row */
} cmp_bench;

enum { CMP_MAP_WKV, CMP_MAP_WGATE, CMP_MAP_COUNT };

static dsops_status cmp_run(dsops_context *ctx, void *pv)
{
    return dsops_compressor(ctx, &((cmp_bench *)pv)->p->args);
}

static int cmp_check(void *pv, char *why, size_t cap)
{
    cmp_bench *b = pv;
    const dsops_compressor_args *a = &b->p->args;
    size_t n = (size_t)(a->out.shape[0] * a->out.shape[1]);
    uint16_t *got = malloc(n * 2 + 2);
    if (!got) {
        snprintf(why, cap, "out of memory");
        return 1;
    }
    memcpy(got, a->out.data, n * 2);
    dsops_ref_compressor(a); /* rewrites out and the call's own state rows from the same inputs */
    size_t bad = 0, total = 0;
    double max_err = 0;
    count_outside(got, a->out.data, DSOPS_BF16, n, 1e-4, 1.0 / 128, &bad, &total, &max_err);
    free(got);
    snprintf(why, cap, "%zu of %zu out elements outside 1e-4 / 2^-7, max |err| %.3g", bad, n, max_err);
    return bad > (size_t)floor(0.005 * (double)n + 0.5);
}

static void cmp_release(void *pv)
{
    cmp_bench *b = pv;
    dsops_prepared_destroy(b->prep);
    dsops_cmp_problem_free(b->p);
    free(b->y);
    free(b);
}

/* The compressor's projections alone, on the prepared maps: x by wkv and by wgate. */
static dsops_status cmp_gemms_run(dsops_context *ctx, void *pv)
{
    cmp_bench *b = pv;
    const dsops_compressor_args *a = &b->p->args;
    const int64_t T = b->p->T, CD = a->wkv.shape[0], H = a->wkv.shape[1];
    char *y = b->y;
    dsops_linear **m = b->prep->maps;
    dsops_linear_job j[2] = {{m[CMP_MAP_WKV], a->x.data, H, y, CD},
                             {m[CMP_MAP_WGATE], a->x.data, H, y + (size_t)(T * CD) * 4, CD}};
    return dsops_linear_run(ctx, j, 2, T, dsops_context_threads(ctx), dsops_context_isa(ctx));
}

/* sas (swa, cfa, scfa): --check compares out and lse with the oracle on a sample: every sequence when
 * B <= 4, else sequences 0, B/2 and B-1; of each, its last 32 tokens at most (a sub-call of a sequence's
 * last tokens sees the same keys: L and the valid index range depend only on seqused). Tolerance by
 * p_mode (spec §3.7): normalised / fp32 out 1e-4 / 2^-7, tiled 5e-4 / 5e-4; lse 1e-6 / 8.01/65536; at
 * most 0.5 % of the elements outside, lonely rows exactly +Inf. */
static dsops_status sas_run(dsops_context *ctx, void *p)
{
    return dsops_sas(ctx, &((dsops_sas_problem *)p)->args);
}

static int sas_check(void *pv, char *why, size_t cap)
{
    const dsops_sas_problem *p = pv;
    const dsops_sas_args *a = &p->args;
    const int B = (int)a->seqused_kv.shape[0];
    const int64_t N = a->q.shape[1], D = a->q.shape[2];
    const int32_t *cu = a->cu_seqlens_q.data, *su = a->seqused_kv.data;
    const int tiled = a->p_mode == DSOPS_P_TILED;
    const double out_atol = tiled ? 5e-4 : 1e-4, out_rtol = tiled ? 5e-4 : 1.0 / 128;
    int seqs[4], nseq = 0;
    if (B <= 4) {
        for (int b = 0; b < B; b++)
            seqs[nseq++] = b;
    } else {
        seqs[0] = 0, seqs[1] = B / 2, seqs[2] = B - 1;
        nseq = 3;
    }
    size_t bad_o = 0, n_o = 0, bad_l = 0, n_l = 0;
    double max_o = 0, max_l = 0;
    for (int k = 0; k < nseq; k++) {
        const int b = seqs[k];
        const int64_t Sb = cu[b + 1] - cu[b], n = Sb < 32 ? Sb : 32, t0 = cu[b + 1] - n;
        if (n == 0)
            continue;
        uint16_t *ro = malloc((size_t)(n * N * D) * 2);
        float *rl = malloc((size_t)(n * N) * 4);
        if (!ro || !rl) {
            free(ro), free(rl);
            snprintf(why, cap, "out of memory");
            return 1;
        }
        int32_t cu1[2] = {0, (int32_t)n}, su1[1] = {su[b]};
        dsops_sas_args r = *a; /* the oracle on tokens t0 ... t0+n-1, the last n of sequence b */
        r.cu_seqlens_q = dsops_tensor_make(cu1, DSOPS_INT32, 1, (int64_t[]){2});
        r.seqused_kv = dsops_tensor_make(su1, DSOPS_INT32, 1, (int64_t[]){1});
        r.q.data = (uint16_t *)a->q.data + t0 * N * D, r.q.shape[0] = n;
        if (a->ori_block_table.data)
            r.ori_block_table.data = (int32_t *)a->ori_block_table.data + b * a->ori_block_table.shape[1],
            r.ori_block_table.shape[0] = 1;
        if (a->cmp_block_table.data)
            r.cmp_block_table.data = (int32_t *)a->cmp_block_table.data + b * a->cmp_block_table.shape[1],
            r.cmp_block_table.shape[0] = 1;
        if (a->cmp_indices.data)
            r.cmp_indices.data = (int32_t *)a->cmp_indices.data + t0 * a->cmp_indices.shape[1],
            r.cmp_indices.shape[0] = n;
        if (a->cmp_topk_length.data)
            r.cmp_topk_length.data = (int32_t *)a->cmp_topk_length.data + t0, r.cmp_topk_length.shape[0] = n;
        r.out = dsops_tensor_make(ro, DSOPS_BF16, 3, (int64_t[]){n, N, D});
        r.lse = a->lse.data ? dsops_tensor_make(rl, DSOPS_FP32, 2, (int64_t[]){n, N}) : (dsops_tensor){0};
        dsops_ref_sas(&r);
        count_outside((const uint16_t *)a->out.data + t0 * N * D, ro, DSOPS_BF16, (size_t)(n * N * D), out_atol,
                      out_rtol, &bad_o, &n_o, &max_o);
        if (a->lse.data)
            count_outside((const float *)a->lse.data + t0 * N, rl, DSOPS_FP32, (size_t)(n * N), 1e-6,
                          8.01 / 65536, &bad_l, &n_l, &max_l);
        free(ro), free(rl);
    }
    snprintf(why, cap, "out: %zu of %zu outside %g / %g (max |err| %.3g); lse: %zu of %zu outside 1e-6 / "
             "8.01/65536 (max |err| %.3g)", bad_o, n_o, out_atol, out_rtol, max_o, bad_l, n_l, max_l);
    return bad_o > (size_t)floor(0.005 * (double)n_o + 0.5) || bad_l > (size_t)floor(0.005 * (double)n_l + 0.5);
}

static void sas_release(void *p) { dsops_sas_problem_free(p); }

static const char *sas_variant_name(dsops_sas_variant v)
{
    return v == DSOPS_SAS_SWA ? "swa" : v == DSOPS_SAS_CFA ? "cfa" : v == DSOPS_SAS_SCFA ? "scfa" : "sas?";
}



int bench_all_cases(bench_case_ref *out, int cap)
{
    int n = 0, count;
    const dsops_sfa_case *sc = dsops_sfa_cases(&count);
    for (int i = 0; i < count && n < cap; i++)
        out[n++] = (bench_case_ref){.name = sc[i].name, .ci = sc[i].ci, .sfa = &sc[i]};
    const dsops_li_case *lc = dsops_li_cases(&count);
    for (int i = 0; i < count && n < cap; i++)
        out[n++] = (bench_case_ref){.name = lc[i].name, .ci = lc[i].ci, .li = &lc[i]};
    const dsops_mlap_case *mc = dsops_mlap_cases(&count);
    for (int i = 0; i < count && n < cap; i++)
        out[n++] = (bench_case_ref){.name = mc[i].name, .ci = mc[i].ci, .mlap = &mc[i]};
    const dsops_idxp_case *ic = dsops_idxp_cases(&count);
    for (int i = 0; i < count && n < cap; i++)
        out[n++] = (bench_case_ref){.name = ic[i].name, .ci = ic[i].ci, .idxp = &ic[i]};
    const dsops_dia_case *dc = dsops_dia_cases(&count);
    for (int i = 0; i < count && n < cap; i++)
        out[n++] = (bench_case_ref){.name = dc[i].name, .ci = dc[i].ci, .dia = &dc[i]};
    /* DeepSeek-V4 */
    const dsops_hcpre_case *hp = dsops_hcpre_cases(&count);
    for (int i = 0; i < count && n < cap; i++)
        out[n++] = (bench_case_ref){.name = hp[i].name, .ci = hp[i].ci, .hcpre = &hp[i]};
    const dsops_hcpost_case *ho = dsops_hcpost_cases(&count);
    for (int i = 0; i < count && n < cap; i++)
        out[n++] = (bench_case_ref){.name = ho[i].name, .ci = ho[i].ci, .hcpost = &ho[i]};
    const dsops_mla4_case *m4 = dsops_mla4_cases(&count);
    for (int i = 0; i < count && n < cap; i++)
        out[n++] = (bench_case_ref){.name = m4[i].name, .ci = m4[i].ci, .mla4 = &m4[i]};
    const dsops_idxp4_case *i4 = dsops_idxp4_cases(&count);
    for (int i = 0; i < count && n < cap; i++)
        out[n++] = (bench_case_ref){.name = i4[i].name, .ci = i4[i].ci, .idxp4 = &i4[i]};
    const dsops_cmp_case *cc = dsops_cmp_cases(&count);
    for (int i = 0; i < count && n < cap; i++)
        out[n++] = (bench_case_ref){.name = cc[i].name, .ci = cc[i].ci, .cmp = &cc[i]};
    const dsops_sas_case *ac = dsops_sas_cases(&count);
    for (int i = 0; i < count && n < cap; i++)
        out[n++] = (bench_case_ref){.name = ac[i].name, .ci = ac[i].ci, .sas = &ac[i]};
    return n;
}

/* Prepares the weights of a V4 prolog or compressor problem; on failure says why. */
#define PREPARE_OR_SAY(call, what)                                                                                \
    do {                                                                                                          \
        dsops_status st_ = (call);                                                                                \
        if (st_ != DSOPS_OK) {                                                                                    \
            snprintf(why, cap, "%s: %s (%s)", what, dsops_status_name(st_), dsops_last_error());                  \
            return 1;                                                                                             \
        }                                                                                                         \
    } while (0)

/* The bench problem of a V4 case; returns 0, or 1 with the reason in why. */
static int make_v4_problem(const bench_case_ref *c, bench_problem *bp, char *why, size_t cap)
{
    if (c->sas) {
        /* the case's own data seed (docs/CASES.md: 42, cfa 0); bf16 FLOP of QK and PV against the bf16 peak */
        dsops_sas_problem *p = dsops_sas_problem_make(c->sas, c->sas->seed);
        if (!p)
            return snprintf(why, cap, "cannot generate the case (out of memory?)"), 1;
        *bp = (bench_problem){p, sas_run, sas_check, sas_release, p->flops, p->kv_bytes, DSOPS_PEAK_BF16_DOT,
                              .vendor_us = c->sas->vendor_us, .vendor = c->sas->vendor};
    } else if (c->hcpre) {
        dsops_hcpre_problem *p = dsops_hcpre_problem_make(c->hcpre, 42);
        if (!p)
            return snprintf(why, cap, "cannot generate the case (out of memory?)"), 1;
        dsops_prepared *prep = NULL; /* hc_fn packed once, as a layer would */
        if (dsops_hc_pre_prepare(NULL, &p->args, &prep) != DSOPS_OK) {
            snprintf(why, cap, "hc_pre_prepare: %s", dsops_last_error());
            dsops_hcpre_problem_free(p);
            return 1;
        }
        p->args.prepared = prep;
        const double K = (double)p->c.HC * p->c.H, M = (double)(2 + p->c.HC) * p->c.HC, T = p->c.T;
        /* bytes: x read, hc_fn read, y, post, comb and pre written */
        const double bytes = 2.0 * T * K + 4.0 * M * K + 2.0 * T * p->c.H + 4.0 * T * (2.0 + p->c.HC) * p->c.HC;
        *bp = (bench_problem){p, hcpre_run, hcpre_check, hcpre_release, p->flops, bytes, DSOPS_PEAK_FP32_FMA,
                              .vendor_us = c->hcpre->vendor_us, .vendor = c->hcpre->vendor};
    } else if (c->hcpost) {
        dsops_hcpost_problem *p = dsops_hcpost_problem_make(c->hcpost, 0);
        if (!p)
            return snprintf(why, cap, "cannot generate the case (out of memory?)"), 1;
        /* memory-bound: GB/s is the figure, against the memory stream (no FLOP rate) */
        *bp = (bench_problem){p, hcpost_run, hcpost_check, hcpost_release, 0.0, p->bytes, DSOPS_PEAK_BF16_DOT,
                              .unit = "mem", .no_peak = 1, .vendor_us = c->hcpost->vendor_us,
                              .vendor = c->hcpost->vendor};
    } else if (c->mla4) {
        mla4_bench *b = calloc(1, sizeof *b);
        if (!b)
            return snprintf(why, cap, "out of memory"), 1;
        *bp = (bench_problem){.p = b, .run = mla4_run, .check = mla4_check, .release = mla4_release};
        if (!(b->p = dsops_mla4_problem_make(c->mla4, 5)))
            return snprintf(why, cap, "cannot generate the case (out of memory?)"), 1;
        PREPARE_OR_SAY(dsops_mla_prolog_v4_prepare(NULL, &b->p->args, &b->prep), "mla_prolog_v4_prepare");
        const dsops_mla4_case *mc = c->mla4;
        const size_t T = (size_t)mc->T, ND = (size_t)mc->N * (size_t)mc->D;
        b->y = malloc(4 * T * (ND > (size_t)(mc->Q + mc->D) ? ND : (size_t)(mc->Q + mc->D)) + 64);
        if (!b->y)
            return snprintf(why, cap, "out of memory"), 1;
        b->p->args.prepared = b->prep;
        *bp = (bench_problem){b, mla4_run, mla4_check, mla4_release, b->p->flops, b->p->weight_bytes,
                              mc->int8 ? DSOPS_PEAK_INT8_DOT : DSOPS_PEAK_BF16_DOT, .vendor_us = mc->vendor_us,
                              .vendor = mc->vendor};
    } else if (c->idxp4) {
        idxp4_bench *b = calloc(1, sizeof *b);
        if (!b)
            return snprintf(why, cap, "out of memory"), 1;
        *bp = (bench_problem){.p = b, .run = idxp4_run, .check = idxp4_check, .release = idxp4_release};
        if (!(b->p = dsops_idxp4_problem_make(c->idxp4, 42)))
            return snprintf(why, cap, "cannot generate the case (out of memory?)"), 1;
        PREPARE_OR_SAY(dsops_indexer_prolog_v4_prepare(NULL, &b->p->args, &b->prep), "indexer_prolog_v4_prepare");
        const dsops_idxp4_case *ic = c->idxp4;
        const size_t NQ = (size_t)ic->NI * (size_t)ic->DI;
        b->hx = calloc((size_t)ic->T * NQ + 1, dsops_dtype_size(b->p->args.hadamard.dtype));
        b->y = malloc(4 * (size_t)ic->T * (NQ + (size_t)ic->NI) + 64);
        if (!b->hx || !b->y)
            return snprintf(why, cap, "out of memory"), 1;
        b->p->args.prepared = b->prep;
        /* mostly int8 work (qr by idx_wq_b); the Hadamard products and weights_proj are counted with it */
        *bp = (bench_problem){b, idxp4_run, idxp4_check, idxp4_release, b->p->flops, b->p->weight_bytes,
                              DSOPS_PEAK_INT8_DOT, .vendor_us = ic->vendor_us, .vendor = ic->vendor};
    } else {
        cmp_bench *b = calloc(1, sizeof *b);
        if (!b)
            return snprintf(why, cap, "out of memory"), 1;
        *bp = (bench_problem){.p = b, .run = cmp_run, .check = cmp_check, .release = cmp_release};
        if (!(b->p = dsops_cmp_problem_make(c->cmp, 42)))
            return snprintf(why, cap, "cannot generate the case (out of memory?)"), 1;
        PREPARE_OR_SAY(dsops_compressor_prepare(NULL, &b->p->args, &b->prep), "compressor_prepare");
        const size_t CD = (size_t)b->p->args.wkv.shape[0];
        b->y = malloc(4 * (size_t)b->p->T * 2 * CD + 64);
        if (!b->y)
            return snprintf(why, cap, "out of memory"), 1;
        b->p->args.prepared = b->prep;
        *bp = (bench_problem){b, cmp_run, cmp_check, cmp_release, b->p->flops, b->p->weight_bytes,
                              DSOPS_PEAK_BF16_DOT, .vendor_us = c->cmp->vendor_us, .vendor = c->cmp->vendor};
    }
    return 0;
}

int bench_make_problem(const bench_case_ref *c, bench_problem *bp, char *why, size_t cap)
{
    memset(bp, 0, sizeof *bp);
    if (c->hcpre || c->hcpost || c->mla4 || c->idxp4 || c->cmp || c->sas) {
        return make_v4_problem(c, bp, why, cap);
    } else if (c->sfa) {
        dsops_sfa_problem *p = dsops_sfa_problem_make(c->sfa, 42);
        if (!p)
            return snprintf(why, cap, "cannot generate the case (out of memory?)"), 1;
        *bp = (bench_problem){p, sfa_run, sfa_check, sfa_release, p->flops, p->gathered_bytes, DSOPS_PEAK_BF16_DOT,
                              .unit = NULL};
    } else if (c->li) {
        dsops_li_problem *p = dsops_li_problem_make(c->li, 42);
        if (!p)
            return snprintf(why, cap, "cannot generate the case (out of memory?)"), 1;
        *bp = (bench_problem){p, li_run, li_check, li_release, p->ops, p->key_bytes,
                              c->li->int8 ? DSOPS_PEAK_INT8_DOT : DSOPS_PEAK_BF16_DOT, .unit = NULL};
    } else if (c->dia) {
        dia_bench *b = calloc(1, sizeof *b);
        if (!b)
            return snprintf(why, cap, "out of memory"), 1;
        *bp = (bench_problem){.p = b, .release = dia_release};
        if (!(b->p = dsops_dia_problem_make(c->dia, 42)) || !(b->st = dsops_dia_stages_make(&b->p->args)))
            return snprintf(why, cap, "cannot generate the case (out of memory?)"), 1;
        PREPARE_OR_SAY(dsops_sparse_attention_v32_prepare(NULL, &b->p->args, &b->prep), "sparse_attention_v32_prepare");
        PREPARE_OR_SAY(dsops_mla_prolog_v32_prepare(NULL, &b->st->mla, &b->prep_mla), "mla_prolog_v32_prepare");
        PREPARE_OR_SAY(dsops_indexer_prolog_v32_prepare(NULL, &b->st->idx, &b->prep_idx), "indexer_prolog_v32_prepare");
        b->p->args.prepared = b->prep;
        b->st->mla.prepared = b->prep_mla;
        b->st->idx.prepared = b->prep_idx;
        /* mixed units: the indexer prolog and scorer of the int8 variant count int8 operations */
        *bp = (bench_problem){b, dia_run, dia_check, dia_release, b->p->flops, b->p->cache_bytes,
                              DSOPS_PEAK_BF16_DOT, .unit = NULL};
    } else if (c->idxp) {
        idxp_bench *b = calloc(1, sizeof *b);
        if (!b)
            return snprintf(why, cap, "out of memory"), 1;
        *bp = (bench_problem){.p = b, .release = idxp_release};
        if (!(b->p = dsops_idxp_problem_make(c->idxp, 7)))
            return snprintf(why, cap, "cannot generate the case (out of memory?)"), 1;
        PREPARE_OR_SAY(dsops_indexer_prolog_v32_prepare(NULL, &b->p->args, &b->prep), "indexer_prolog_v32_prepare");
        if (b->prep->count != IDXP_MAP_COUNT)
            return snprintf(why, cap, "the prepared object has %d maps, expected %d", b->prep->count,
                            IDXP_MAP_COUNT), 1;
        const dsops_idxp_case *ic = c->idxp;
        const dsops_indexer_prolog_v32_args *a = &b->p->args;
        size_t rows = (size_t)b->p->T, NQ = (size_t)ic->NI * (size_t)ic->DI;
        dsops_dtype hdt = a->hadamard_q.data ? a->hadamard_q.dtype : a->hadamard_k.data ? a->hadamard_k.dtype
                                                                                       : DSOPS_BF16;
        b->hx = calloc(rows * NQ + 1, dsops_dtype_size(hdt));
        b->y = malloc(rows * 4 * (NQ + (size_t)ic->DI + (size_t)ic->NI) + 64);
        if (!b->hx || !b->y)
            return snprintf(why, cap, "out of memory"), 1;
        b->p->args.prepared = b->prep;
        *bp = (bench_problem){b, idxp_run, idxp_check, idxp_release, b->p->flops, b->p->weight_bytes,
                              ic->int8 ? DSOPS_PEAK_INT8_DOT : DSOPS_PEAK_BF16_DOT, .unit = NULL};
    } else {
        mlap_bench *b = calloc(1, sizeof *b);
        if (!b)
            return snprintf(why, cap, "out of memory"), 1;
        *bp = (bench_problem){.p = b, .release = mlap_release};
        if (!(b->p = dsops_mlap_problem_make(c->mlap, 5)))
            return snprintf(why, cap, "cannot generate the case (out of memory?)"), 1;
        PREPARE_OR_SAY(dsops_mla_prolog_v32_prepare(NULL, &b->p->args, &b->prep), "mla_prolog_v32_prepare");
        const dsops_mlap_case *mc = c->mlap;
        int64_t G = mc->Dqn + 64;
        size_t rows = (size_t)b->p->T, wide = (size_t)mc->N * (size_t)G;
        size_t ybytes = rows * 4 * (wide > (size_t)mc->N * mc->Dc ? wide : (size_t)mc->N * mc->Dc);
        b->x2 = calloc(rows * (wide > (size_t)mc->Q ? wide : (size_t)mc->Q), 2);
        b->y = malloc(ybytes + (size_t)mc->Q * 4 * rows + 64);
        if (!b->x2 || !b->y)
            return snprintf(why, cap, "out of memory"), 1;
        b->p->args.prepared = b->prep;
        *bp = (bench_problem){b, mlap_run, mlap_check, mlap_release, b->p->flops, b->p->weight_bytes,
                              mc->int8_wq_b ? DSOPS_PEAK_INT8_DOT : DSOPS_PEAK_BF16_DOT, .unit = NULL};
    }
    return 0;
}

/* The vendor's published time of a case and its label (0 and NULL: none). */
void bench_case_vendor(const bench_case_ref *c, double *us, const char **label)
{
    *us = c->hcpre ? c->hcpre->vendor_us : c->hcpost ? c->hcpost->vendor_us : c->mla4 ? c->mla4->vendor_us
          : c->idxp4 ? c->idxp4->vendor_us : c->cmp ? c->cmp->vendor_us : c->sas ? c->sas->vendor_us : 0.0;
    *label = c->hcpre ? c->hcpre->vendor : c->hcpost ? c->hcpost->vendor : c->mla4 ? c->mla4->vendor
             : c->idxp4 ? c->idxp4->vendor : c->cmp ? c->cmp->vendor : c->sas ? c->sas->vendor : NULL;
}

/* The maps a V4 matmul-only row expects in the prepared object (0: no such row). */
static int v4_map_count(const bench_case_ref *c)
{
    return c->mla4 ? MLA4_MAP_COUNT : c->idxp4 ? IDXP4_MAP_COUNT : c->cmp ? CMP_MAP_COUNT : 0;
}

/* The operator and shape words of a case, for the final table. */
void bench_case_words(const bench_case_ref *c, char *op, size_t oc, char *sh, size_t sc, char *family, size_t fc)
{
    static const char *const cmp_variant[3] = {"c4a", "c4li", "c128a"};
    snprintf(family, fc, "%s",
             c->sas ? "sas (swa/cfa/scfa)" : c->cmp ? "compressor" : c->hcpre ? "hc_pre" : c->hcpost ? "hc_post"
             : c->mla4 ? "mla_prolog_v4" : c->idxp4 ? "indexer_prolog_v4" : c->li ? "lightning_indexer"
             : c->sfa ? "sparse_flash_attn_v32" : c->dia ? "sparse_attention_v32" : c->mlap ? "mla_prolog_v32"
             : "indexer_prolog_v32");
    if (c->sas) {
        const dsops_sas_case *k = c->sas;
        char S[16];
        if (k->S_each[0])
            snprintf(S, sizeof S, "mixed");
        else
            snprintf(S, sizeof S, "%d", k->S);
        snprintf(op, oc, "%s", sas_variant_name(k->variant));
        snprintf(sh, sc, "B %d S %s kv %d N %d", k->B, S, k->seqused[0], k->N);
        if (k->K)
            snprintf(sh + strlen(sh), sc - strlen(sh), " K %d", k->K);
    } else if (c->cmp) {
        const dsops_cmp_case *k = c->cmp;
        snprintf(op, oc, "compressor %s", (unsigned)k->variant < 3 ? cmp_variant[k->variant] : "?");
        snprintf(sh, sc, "B %d S %d sp %d", k->B, k->S_each[0], k->start_pos);
    } else if (c->hcpre) {
        snprintf(op, oc, "hc_pre");
        snprintf(sh, sc, "T %d H %d", c->hcpre->T, c->hcpre->H);
    } else if (c->hcpost) {
        snprintf(op, oc, "hc_post");
        snprintf(sh, sc, "T %d H %d", c->hcpost->T, c->hcpost->H);
    } else if (c->mla4) {
        snprintf(op, oc, "mla_prolog_v4");
        snprintf(sh, sc, "T %d, %s wq_b", c->mla4->T, c->mla4->int8 ? "int8" : "bf16");
    } else if (c->idxp4) {
        snprintf(op, oc, "indexer_prolog_v4");
        snprintf(sh, sc, "T %d", c->idxp4->T);
    } else if (c->li) {
        snprintf(op, oc, "lightning_indexer");
        snprintf(sh, sc, "B %d S %d kv %d K %d", c->li->B, c->li->S, c->li->seqused[0], c->li->K);
    } else if (c->sfa) {
        snprintf(op, oc, "sparse_flash_attn_v32");
        snprintf(sh, sc, "B %d S %d kv %d", c->sfa->B, c->sfa->S, c->sfa->seqused[0]);
    } else if (c->dia) {
        snprintf(op, oc, "sparse_attention_v32");
        snprintf(sh, sc, "B %d S %d", c->dia->B, c->dia->S);
    } else if (c->mlap) {
        snprintf(op, oc, "mla_prolog_v32");
        snprintf(sh, sc, "B %d S %d", c->mlap->B, c->mlap->S);
    } else if (c->idxp) {
        snprintf(op, oc, "indexer_prolog_v32");
        snprintf(sh, sc, "B %d S %d", c->idxp->B, c->idxp->S);
    }
}

/* --list: one line per case. */
void bench_list_case(const bench_case_ref *r)
{
    static const char *const cmp_variant[3] = {"c4a", "c4li", "c128a"};
    const char *not_ci = r->ci ? "" : "  (not in CI)";
    if (r->sfa) {
        const dsops_sfa_case *c = r->sfa;
        printf("%-40s sparse_flash_attention_v32  B %-3d S %-4d N %-3d K %-5d BS %-4d %s%s\n", c->name, c->B, c->S,
               c->N, c->K, c->BS,
               c->layout == DSOPS_KV_SPLIT_BF16   ? "split_bf16"
               : c->layout == DSOPS_KV_SPLIT_INT8 ? "split_int8"
                                                  : "packed656",
               not_ci);
    } else if (r->dia) {
        const dsops_dia_case *c = r->dia;
        printf("%-40s sparse_attention_v32        B %-3d S %-4d H %d N %d K %-5d %s, %s%s\n", c->name, c->B, c->S,
               c->H, c->N, c->K, c->int8 ? "int8" : "bf16",
               c->layout == DSOPS_KV_SPLIT_BF16   ? "split_bf16"
               : c->layout == DSOPS_KV_SPLIT_INT8 ? "split_int8"
                                                  : "packed656",
               not_ci);
    } else if (r->idxp) {
        const dsops_idxp_case *c = r->idxp;
        printf("%-40s indexer_prolog_v32          B %-3d S %-4d H %d Q %d NI %d DI %d %s%s, %s%s\n", c->name, c->B,
               c->S, c->H, c->Q, c->NI, c->DI, c->int8 ? "int8" : "bf16",
               c->int8 || c->hadamard ? "" : " (no Hadamard)",
               c->rope_mode == DSOPS_ROPE_HALF          ? "half"
               : c->rope_mode == DSOPS_ROPE_INTERLEAVED ? "interleaved"
                                                        : "interleaved_in_half_out",
               not_ci);
    } else if (r->mlap) {
        const dsops_mlap_case *c = r->mlap;
        printf("%-40s mla_prolog_v32              B %-3d S %-4d H %d Q %d N %d %s wq_b, %s%s\n", c->name, c->B, c->S,
               c->H, c->Q, c->N, c->int8_wq_b ? "int8" : "bf16",
               c->layout == DSOPS_KV_SPLIT_BF16   ? "split_bf16"
               : c->layout == DSOPS_KV_SPLIT_INT8 ? "split_int8"
                                                  : "packed656",
               not_ci);
    } else if (r->li) {
        const dsops_li_case *c = r->li;
        printf("%-40s lightning_indexer           B %-3d S %-4d NI %-3d DI %-3d K %-5d ratio %d %s%s\n", c->name,
               c->B, c->S, c->NI, c->DI, c->K, c->cmp_ratio, c->int8 ? "int8" : "bf16", not_ci);
    } else if (r->hcpre) {
        const dsops_hcpre_case *c = r->hcpre;
        printf("%-40s hc_pre                      T %-5d HC %d H %d, %s data%s\n", c->name, c->T, c->HC, c->H,
               c->well_conditioned ? "AscendC (well-conditioned)" : "PyPTO", not_ci);
    } else if (r->hcpost) {
        const dsops_hcpost_case *c = r->hcpost;
        printf("%-40s hc_post                     T %-5d HC %d H %d, x %s, post %s%s\n", c->name, c->T, c->HC, c->H,
               dsops_dtype_name(c->x_dtype), dsops_dtype_name(c->post_dtype), not_ci);
    } else if (r->mla4) {
        const dsops_mla4_case *c = r->mla4;
        printf("%-40s mla_prolog_v4               T %-5d H %d Q %d N %d D %d, %s wq_b%s\n", c->name, c->T, c->H, c->Q,
               c->N, c->D, c->int8 ? "int8" : "bf16", not_ci);
    } else if (r->idxp4) {
        const dsops_idxp4_case *c = r->idxp4;
        printf("%-40s indexer_prolog_v4           T %-5d H %d Q %d NI %d DI %d%s\n", c->name, c->T, c->H, c->Q, c->NI,
               c->DI, not_ci);
    } else if (r->cmp) {
        const dsops_cmp_case *c = r->cmp;
        char S[16];
        if (c->B > 1 && c->S_each[1])
            snprintf(S, sizeof S, "mixed");
        else
            snprintf(S, sizeof S, "%d", c->S_each[0]);
        printf("%-40s compressor                  B %-3d S %-5s %s start_pos %d H %d, %s data%s\n", c->name, c->B, S,
               (unsigned)c->variant < 3 ? cmp_variant[c->variant] : "?", c->start_pos, c->H,
               c->vendor_data ? "vendor" : "dsops", not_ci);
    } else if (r->sas) {
        const dsops_sas_case *c = r->sas;
        char S[16];
        if (c->S_each[0])
            snprintf(S, sizeof S, "mixed");
        else
            snprintf(S, sizeof S, "%d", c->S);
        char op[16];
        snprintf(op, sizeof op, "sas (%s)", sas_variant_name(c->variant));
        printf("%-40s %-27s B %-3d S %-5s kv %-6d N %d D %d K %d BS %d/%d%s%s\n", c->name, op, c->B, S,
               c->seqused[0], c->N, c->D, c->K, c->BSW, c->BSC, c->vendor_count ? ", vendor count" : "", not_ci);
    }
}

/* 1 if `what` names the operator of case r. */
int bench_op_selects(const char *what, const bench_case_ref *r)
{
    static const struct {
        const char *op;
        size_t member; /* offset of the family's pointer in bench_case_ref */
    } ops[] = {
        {"sparse_flash_attention_v32", offsetof(bench_case_ref, sfa)},
        {"lightning_indexer", offsetof(bench_case_ref, li)},
        {"mla_prolog_v32", offsetof(bench_case_ref, mlap)},
        {"sparse_attention_v32", offsetof(bench_case_ref, dia)},
        {"indexer_prolog_v32", offsetof(bench_case_ref, idxp)},
        {"hc_pre", offsetof(bench_case_ref, hcpre)},
        {"hc_post", offsetof(bench_case_ref, hcpost)},
        {"mla_prolog_v4", offsetof(bench_case_ref, mla4)},
        {"indexer_prolog_v4", offsetof(bench_case_ref, idxp4)},
        {"compressor", offsetof(bench_case_ref, cmp)},
    };
    /* sas: the operator name, or one of its presets */
    if (r->sas && (!strcmp(what, "sas") || !strcmp(what, sas_variant_name(r->sas->variant))))
        return 1;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        const void *family;
        memcpy(&family, (const char *)r + ops[i].member, sizeof family);
        if (!strcmp(what, ops[i].op) && family)
            return 1;
    }
    return 0;
}

int bench_matmuls(const bench_case_ref *c, const bench_problem *bp, bench_problem *gemms, char *why, size_t cap)
{
    if (!(c->mlap || c->idxp || c->mla4 || c->idxp4 || c->cmp))
        return -1;
    const dsops_prepared *prep = c->mla4    ? ((mla4_bench *)bp->p)->prep
                                 : c->idxp4 ? ((idxp4_bench *)bp->p)->prep
                                 : c->cmp   ? ((cmp_bench *)bp->p)->prep
                                            : NULL;
    if (prep && (!prep->maps || prep->count != v4_map_count(c))) {
        snprintf(why, cap, "the prepared object has %d maps, expected %d", prep->count, v4_map_count(c));
        return 1;
    }
    *gemms = *bp;
    gemms->run = c->mlap ? mlap_gemms_run : c->idxp ? idxp_gemms_run : c->mla4 ? mla4_gemms_run
                 : c->idxp4 ? idxp4_gemms_run : cmp_gemms_run;
    gemms->check = bench_no_check;
    gemms->release = bench_no_release;
    gemms->vendor_us = 0.0;
    return 0;
}

void bench_case_note(const bench_case_ref *c, const bench_problem *bp, char *note, size_t cap)
{
    note[0] = 0;
    if (c->cmp) { /* the sp8191 / sp8192 pairs differ only in whether a window closes */
        const dsops_cmp_problem *cp = ((cmp_bench *)bp->p)->p;
        snprintf(note, cap, "%lld entries per call (%s)", (long long)cp->entries,
                 cp->entries > 0 ? "windows close" : "no window closes: state writes only");
    } else if (c->sas) {
        const dsops_sas_problem *sp = bp->p;
        snprintf(note, cap, "%lld keys attended over %lld tokens (%.1f per token)", (long long)sp->attended,
                 (long long)sp->T, sp->T > 0 ? (double)sp->attended / (double)sp->T : 0.0);
    }
}

int bench_dia_stages(const bench_problem *bp, dsops_context *ctx, bench_problem stages[4], const char *labels[4],
                     char *why, size_t cap)
{
    dia_bench *b = bp->p;
    const dsops_dia_problem *p = b->p;
    const dsops_dia_case *c = &p->c;
    if (dia_chain_run(ctx, b) != DSOPS_OK) { /* the later stages read the earlier stages' outputs */
        snprintf(why, cap, "stage chain: %s", dsops_last_error());
        return 1;
    }
    const double i8 = c->int8 ? 1.0 : 2.0, NG = (double)c->N * (c->Dqn + 64), NQ = (double)c->NI * c->DI;
    const double kv_row = c->layout == DSOPS_KV_SPLIT_BF16   ? 2.0 * (c->Dc + 64)
                          : c->layout == DSOPS_KV_SPLIT_INT8 ? c->Dc + 4.0 * (c->Dc / 128) + 128.0
                                                             : 656.0;
    const dsops_peak_kind wq = c->int8 ? DSOPS_PEAK_INT8_DOT : DSOPS_PEAK_BF16_DOT;
    const struct {
        const char *label;
        dsops_status (*run)(dsops_context *, void *);
        double work, bytes;
        dsops_peak_kind peak;
    } s[4] = {
        {"mla_prolog_v32", dia_mla_run, p->flops_mla,
         2.0 * c->Q * c->H + i8 * NG * c->Q + 2.0 * c->N * c->Dqn * c->Dc + 2.0 * (c->Dc + 64) * c->H, wq},
        {"indexer_prolog_v32", dia_idx_run, p->flops_idx, i8 * NQ * c->Q + 2.0 * (c->DI + c->NI) * c->H, wq},
        {"lightning_indexer", dia_li_run, p->flops_li, (double)p->visible * (i8 * c->DI + (c->int8 ? 2.0 : 0.0)), wq},
        {"sparse_flash_attention_v32", dia_sfa_run, p->flops_sfa, (double)p->attended * kv_row, DSOPS_PEAK_BF16_DOT},
    };
    for (int i = 0; i < 4; i++) {
        stages[i] = (bench_problem){b, s[i].run, bench_no_check, bench_no_release, s[i].work, s[i].bytes, s[i].peak,
                                    .unit = NULL};
        labels[i] = s[i].label;
    }
    return 0;
}
