/* dsops — command-line tool: `info`, `bench`, `run`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cases.h"
#include "dsops.h"
#include "dsops_run.h"
#include "linear.h"
#include "ref.h"


static void usage(FILE *f)
{
    fprintf(f,
            "usage:\n"
            "  dsops info                          version, ISA tier, threads, measured peaks\n"
            "  dsops bench <case|prefix|all> [--isa T] [--threads N] [--repeat R] [--check] [--list]\n"
            "                                      time named cases of spec/CASES.md\n"
            "  dsops run <op> --in IN.safetensors --out OUT.safetensors [--set name=value]... [--threads N] [--isa T]\n"
            "                                      run an operator on tensors from a file\n");
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- info ------------------------------------------------------------------------------------ */

static int cmd_info(void)
{
    dsops_context *ctx;
    if (dsops_context_create(&ctx) != DSOPS_OK) {
        fprintf(stderr, "dsops info: %s\n", dsops_last_error());
        return 1;
    }
    dsops_isa det = dsops_isa_detected();
    printf("dsops %s\n", dsops_version());
    printf("detected ISA tier : %s\n", dsops_isa_name(det));
    printf("context ISA tier  : %s\n", dsops_isa_name(dsops_context_isa(ctx)));
    printf("threads           : %d\n", dsops_context_threads(ctx));
    double bf16 = 0, int8 = 0;
    dsops_measure_peak(det, DSOPS_PEAK_BF16_DOT, 0.3, &bf16);
    dsops_measure_peak(det, DSOPS_PEAK_INT8_DOT, 0.3, &int8);
    printf("peak bf16 dot     : %.1f GFLOP/s per core (%s)\n", bf16, dsops_isa_name(det));
    printf("peak int8 dot     : %.1f GOP/s per core (%s)\n", int8, dsops_isa_name(det));
    dsops_context_destroy(ctx);
    return 0;
}

/* ---- bench ----------------------------------------------------------------------------------- */

typedef struct bench_opts {
    int threads;           /* 0 = context default */
    int isa_set;
    dsops_isa isa;
    int repeat;            /* 0 = adaptive */
    int check;
} bench_opts;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- benchmark targets: one entry per named case of any operator ------------------------------- */

/* A generated problem of some operator, behind a small interface so one timing loop serves all. */
typedef struct bench_problem {
    void *p;
    dsops_status (*run)(dsops_context *ctx, void *p);
    int (*check)(void *p, char *why, size_t cap);  /* 0 = agrees with the oracle */
    void (*release)(void *p);
    double work;                                   /* FLOP (bf16) or OP (int8) per call */
    double bytes;                                  /* cache bytes read per call */
    dsops_peak_kind peak;
} bench_problem;

static float bf16_value(uint16_t h)
{
    float f;
    uint32_t u = (uint32_t)h << 16;
    memcpy(&f, &u, 4);
    return f;
}

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
        float x = bf16_value(got[i]), y = bf16_value(ref_out[i]);
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
        float x = bf16_value(got[i]), y = bf16_value(ref[i]);
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
    dsops_status s = dsops_linear_run(j1, 2, T, threads, dsops_context_isa(ctx));
    dsops_linear_job j3 = {m[2], b->x2, Q, y, NG};
    if (s == DSOPS_OK)
        s = dsops_linear_run(&j3, 1, T, threads, dsops_context_isa(ctx));
    dsops_linear_job *jh = malloc(sizeof *jh * (size_t)c->N);
    for (int h = 0; s == DSOPS_OK && jh && h < c->N; h++)
        jh[h] = (dsops_linear_job){m[3 + h], (const uint16_t *)b->x2 + h * G, NG, y + (size_t)h * T * c->Dc, c->Dc};
    if (s == DSOPS_OK && jh)
        s = dsops_linear_run(jh, c->N, T, threads, dsops_context_isa(ctx));
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
            x = bf16_value(gx);
            y = bf16_value(gy);
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
    dsops_status s = dsops_linear_run(j1, 3, T, threads, dsops_context_isa(ctx));
    if (s == DSOPS_OK && m[IDXP_MAP_HQ]) {
        dsops_linear_job jq = {m[IDXP_MAP_HQ], b->hx, c->DI, y, c->DI};
        s = dsops_linear_run(&jq, 1, T * c->NI, threads, dsops_context_isa(ctx));
    }
    if (s == DSOPS_OK && m[IDXP_MAP_HK]) {
        dsops_linear_job jk = {m[IDXP_MAP_HK], b->hx, c->DI, y, c->DI};
        s = dsops_linear_run(&jk, 1, T, threads, dsops_context_isa(ctx));
    }
    return s;
}

static int no_check(void *pv, char *why, size_t cap)
{
    (void)pv;
    snprintf(why, cap, "nothing to compare");
    return 0;
}

static void no_release(void *pv) { (void)pv; }

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

typedef struct bench_case_ref {
    const char *name;
    int ci;
    const dsops_sfa_case *sfa;
    const dsops_li_case *li;
    const dsops_mlap_case *mlap;
    const dsops_dia_case *dia;
    const dsops_idxp_case *idxp;
} bench_case_ref;

static int all_cases(bench_case_ref *out, int cap)
{
    int n = 0, count;
    const dsops_sfa_case *sc = dsops_sfa_cases(&count);
    for (int i = 0; i < count && n < cap; i++)
        out[n++] = (bench_case_ref){sc[i].name, sc[i].ci, &sc[i], NULL, NULL, NULL, NULL};
    const dsops_li_case *lc = dsops_li_cases(&count);
    for (int i = 0; i < count && n < cap; i++)
        out[n++] = (bench_case_ref){lc[i].name, lc[i].ci, NULL, &lc[i], NULL, NULL, NULL};
    const dsops_mlap_case *mc = dsops_mlap_cases(&count);
    for (int i = 0; i < count && n < cap; i++)
        out[n++] = (bench_case_ref){mc[i].name, mc[i].ci, NULL, NULL, &mc[i], NULL, NULL};
    const dsops_idxp_case *ic = dsops_idxp_cases(&count);
    for (int i = 0; i < count && n < cap; i++)
        out[n++] = (bench_case_ref){ic[i].name, ic[i].ci, NULL, NULL, NULL, NULL, &ic[i]};
    const dsops_dia_case *dc = dsops_dia_cases(&count);
    for (int i = 0; i < count && n < cap; i++)
        out[n++] = (bench_case_ref){dc[i].name, dc[i].ci, NULL, NULL, NULL, &dc[i], NULL};
    return n;
}

static int make_problem(const bench_case_ref *c, bench_problem *bp)
{
    memset(bp, 0, sizeof *bp);
    if (c->sfa) {
        dsops_sfa_problem *p = dsops_sfa_problem_make(c->sfa, 42);
        if (!p)
            return 1;
        *bp = (bench_problem){p, sfa_run, sfa_check, sfa_release, p->flops, p->gathered_bytes, DSOPS_PEAK_BF16_DOT};
    } else if (c->li) {
        dsops_li_problem *p = dsops_li_problem_make(c->li, 42);
        if (!p)
            return 1;
        *bp = (bench_problem){p, li_run, li_check, li_release, p->ops, p->key_bytes,
                              c->li->int8 ? DSOPS_PEAK_INT8_DOT : DSOPS_PEAK_BF16_DOT};
    } else if (c->dia) {
        dia_bench *b = calloc(1, sizeof *b);
        if (!b || !(b->p = dsops_dia_problem_make(c->dia, 42)) || !(b->st = dsops_dia_stages_make(&b->p->args)) ||
            dsops_sparse_attention_v32_prepare(NULL, &b->p->args, &b->prep) != DSOPS_OK ||
            dsops_mla_prolog_v32_prepare(NULL, &b->st->mla, &b->prep_mla) != DSOPS_OK ||
            dsops_indexer_prolog_v32_prepare(NULL, &b->st->idx, &b->prep_idx) != DSOPS_OK) {
            if (b)
                dia_release(b);
            return 1;
        }
        b->p->args.prepared = b->prep;
        b->st->mla.prepared = b->prep_mla;
        b->st->idx.prepared = b->prep_idx;
        /* mixed units: the indexer prolog and scorer of the int8 variant count int8 operations */
        *bp = (bench_problem){b, dia_run, dia_check, dia_release, b->p->flops, b->p->cache_bytes,
                              DSOPS_PEAK_BF16_DOT};
    } else if (c->idxp) {
        idxp_bench *b = calloc(1, sizeof *b);
        if (!b || !(b->p = dsops_idxp_problem_make(c->idxp, 7)) ||
            dsops_indexer_prolog_v32_prepare(NULL, &b->p->args, &b->prep) != DSOPS_OK ||
            b->prep->count != IDXP_MAP_COUNT) {
            if (b)
                idxp_release(b);
            return 1;
        }
        const dsops_idxp_case *ic = c->idxp;
        const dsops_indexer_prolog_v32_args *a = &b->p->args;
        size_t rows = (size_t)b->p->T, NQ = (size_t)ic->NI * (size_t)ic->DI;
        dsops_dtype hdt = a->hadamard_q.data ? a->hadamard_q.dtype : a->hadamard_k.data ? a->hadamard_k.dtype
                                                                                       : DSOPS_BF16;
        b->hx = calloc(rows * NQ + 1, dsops_dtype_size(hdt));
        b->y = malloc(rows * 4 * (NQ + (size_t)ic->DI + (size_t)ic->NI) + 64);
        if (!b->hx || !b->y) {
            idxp_release(b);
            return 1;
        }
        b->p->args.prepared = b->prep;
        *bp = (bench_problem){b, idxp_run, idxp_check, idxp_release, b->p->flops, b->p->weight_bytes,
                              ic->int8 ? DSOPS_PEAK_INT8_DOT : DSOPS_PEAK_BF16_DOT};
    } else {
        mlap_bench *b = calloc(1, sizeof *b);
        if (!b || !(b->p = dsops_mlap_problem_make(c->mlap, 5)) ||
            dsops_mla_prolog_v32_prepare(NULL, &b->p->args, &b->prep) != DSOPS_OK) {
            if (b)
                mlap_release(b);
            return 1;
        }
        const dsops_mlap_case *mc = c->mlap;
        int64_t G = mc->Dqn + 64;
        size_t rows = (size_t)b->p->T, wide = (size_t)mc->N * (size_t)G;
        size_t ybytes = rows * 4 * (wide > (size_t)mc->N * mc->Dc ? wide : (size_t)mc->N * mc->Dc);
        b->x2 = calloc(rows * (wide > (size_t)mc->Q ? wide : (size_t)mc->Q), 2);
        b->y = malloc(ybytes + (size_t)mc->Q * 4 * rows + 64);
        if (!b->x2 || !b->y) {
            mlap_release(b);
            return 1;
        }
        b->p->args.prepared = b->prep;
        *bp = (bench_problem){b, mlap_run, mlap_check, mlap_release, b->p->flops, b->p->weight_bytes,
                              mc->int8_wq_b ? DSOPS_PEAK_INT8_DOT : DSOPS_PEAK_BF16_DOT};
    }
    return 0;
}

/* Times bp (one warm-up, then at least 5 runs and about 2 s, or --repeat) and prints one table row;
 * returns the median in seconds, or a negative value on error. */
static double time_and_print(const char *name, const bench_problem *bp, const bench_opts *o, dsops_context *ctx,
                             const double peak_core[2], const char *check)
{
    double t0 = now_seconds();
    if (bp->run(ctx, bp->p) != DSOPS_OK) {
        fprintf(stderr, "dsops bench: %s: %s\n", name, dsops_last_error());
        return -1.0;
    }
    double once = now_seconds() - t0;
    int reps = o->repeat > 0 ? o->repeat : (int)fmin(50.0, fmax(5.0, 2.0 / fmax(once, 1e-6)));
    double *times = malloc(sizeof(double) * (size_t)reps);
    if (!times)
        return -1.0;
    for (int r = 0; r < reps; r++) {
        double a = now_seconds();
        bp->run(ctx, bp->p);
        times[r] = now_seconds() - a;
    }
    qsort(times, (size_t)reps, sizeof(double), cmp_double);
    double med = times[reps / 2], lo = times[0], hi = times[reps - 1];
    double rate = bp->work / med * 1e-9;
    double gbs = bp->bytes / med * 1e-9;
    int threads = dsops_context_threads(ctx);
    double peak = peak_core[bp->peak];
    double pct = peak > 0 ? 100.0 * rate / (peak * threads) : 0.0;
    printf("%-36s %-10s %3d %5d %10.3f %7.3f-%-8.3f %8.1f %-5s %7.2f %6.1f%% %5s\n", name,
           dsops_isa_name(dsops_context_isa(ctx)), threads, reps, med * 1e3, lo * 1e3, hi * 1e3, rate,
           bp->peak == DSOPS_PEAK_INT8_DOT ? "int8" : "bf16", gbs, pct, check);
    fflush(stdout);
    free(times);
    return med;
}

/* One row per stage of a fused sparse_attention_v32 case, each stand-alone operator timed on the stage
 * arguments, then the sum of the stages against the fused time. */
static int bench_dia_stages(void *pv, double fused, const bench_opts *o, dsops_context *ctx, const double peak_core[2])
{
    dia_bench *b = pv;
    const dsops_dia_problem *p = b->p;
    const dsops_dia_case *c = &p->c;
    if (dia_chain_run(ctx, b) != DSOPS_OK) { /* the later stages read the earlier stages' outputs */
        fprintf(stderr, "dsops bench: %s: stage chain: %s\n", c->name, dsops_last_error());
        return 1;
    }
    const double i8 = c->int8 ? 1.0 : 2.0, NG = (double)c->N * (c->Dqn + 64), NQ = (double)c->NI * c->DI;
    const double kv_row = c->layout == DSOPS_KV_SPLIT_BF16   ? 2.0 * (c->Dc + 64)
                          : c->layout == DSOPS_KV_SPLIT_INT8 ? c->Dc + 4.0 * (c->Dc / 128) + 128.0
                                                             : 656.0;
    const dsops_peak_kind wq = c->int8 ? DSOPS_PEAK_INT8_DOT : DSOPS_PEAK_BF16_DOT;
    struct {
        const char *label;
        dsops_status (*run)(dsops_context *, void *);
        double work, bytes;
        dsops_peak_kind peak;
    } stages[4] = {
        {"  mla_prolog_v32", dia_mla_run, p->flops_mla,
         2.0 * c->Q * c->H + i8 * NG * c->Q + 2.0 * c->N * c->Dqn * c->Dc + 2.0 * (c->Dc + 64) * c->H, wq},
        {"  indexer_prolog_v32", dia_idx_run, p->flops_idx, i8 * NQ * c->Q + 2.0 * (c->DI + c->NI) * c->H, wq},
        {"  lightning_indexer", dia_li_run, p->flops_li, (double)p->visible * (i8 * c->DI + (c->int8 ? 2.0 : 0.0)), wq},
        {"  sparse_flash_attention_v32", dia_sfa_run, p->flops_sfa, (double)p->attended * kv_row, DSOPS_PEAK_BF16_DOT},
    };
    double sum = 0.0;
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        bench_problem sp = {b, stages[i].run, no_check, no_release, stages[i].work, stages[i].bytes, stages[i].peak};
        double t = time_and_print(stages[i].label, &sp, o, ctx, peak_core, "-");
        if (t < 0)
            bad = 1;
        else
            sum += t;
    }
    if (!bad)
        printf("  %-34s sum of stages %.3f ms, fused %.3f ms (fused / sum = %.2f)\n", "", sum * 1e3, fused * 1e3,
               fused / sum);
    return bad;
}

static int bench_case(const bench_case_ref *c, const bench_opts *o, dsops_context *ctx, const double peak_core[2])
{
    int failures_stage = 0;
    bench_problem bp;
    if (make_problem(c, &bp)) {
        fprintf(stderr, "dsops bench: cannot allocate case %s\n", c->name);
        return 1;
    }
    const char *check = "-";
    if (o->check) {
        char why[160] = "";
        dsops_status s = bp.run(ctx, bp.p);
        int bad = s != DSOPS_OK || bp.check(bp.p, why, sizeof why);
        check = bad ? "FAIL" : "ok";
        if (bad)
            fprintf(stderr, "dsops bench: %s differs from the oracle: %s\n", c->name,
                    s != DSOPS_OK ? dsops_last_error() : why);
    }
    double med = time_and_print(c->name, &bp, o, ctx, peak_core, check);
    if ((c->mlap || c->idxp) && med > 0) {
        /* the same matmuls alone: the prolog's epilogues cost the difference */
        bench_problem gemms = bp;
        gemms.run = c->mlap ? mlap_gemms_run : idxp_gemms_run;
        gemms.check = no_check;
        gemms.release = no_release;
        char label[96];
        snprintf(label, sizeof label, "  matmuls only");
        double g = time_and_print(label, &gemms, o, ctx, peak_core, "-");
        if (g > 0)
            printf("  %-34s prolog / matmuls = %.2f\n", "", med / g);
    }
    if (c->dia && med > 0)
        failures_stage = bench_dia_stages(bp.p, med, o, ctx, peak_core);
    bp.release(bp.p);
    return med < 0 || failures_stage || (o->check && strcmp(check, "FAIL") == 0) ? 1 : 0;
}

static int cmd_bench(int argc, char **argv)
{
    bench_opts o = {0};
    const char *what = NULL;
    int list = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            o.threads = atoi(argv[++i]);
            if (o.threads < 1) {
                fprintf(stderr, "dsops bench: --threads %s is not a count >= 1\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
            if (dsops_isa_from_name(argv[++i], &o.isa) != DSOPS_OK) {
                fprintf(stderr, "dsops bench: %s\n", dsops_last_error());
                return 2;
            }
            o.isa_set = 1;
        } else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
            o.repeat = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--check")) {
            o.check = 1;
        } else if (!strcmp(argv[i], "--list")) {
            list = 1;
        } else if (argv[i][0] != '-' && !what) {
            what = argv[i];
        } else {
            fprintf(stderr, "dsops bench: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    bench_case_ref cases[512];
    int count = all_cases(cases, 512);
    if (list || !what) {
        for (int i = 0; i < count; i++) {
            if (cases[i].sfa) {
                const dsops_sfa_case *c = cases[i].sfa;
                printf("%-40s sparse_flash_attention_v32  B %-3d S %-4d N %-3d K %-5d BS %-4d %s%s\n", c->name, c->B,
                       c->S, c->N, c->K, c->BS,
                       c->layout == DSOPS_KV_SPLIT_BF16   ? "split_bf16"
                       : c->layout == DSOPS_KV_SPLIT_INT8 ? "split_int8"
                                                          : "packed656",
                       c->ci ? "" : "  (not in CI)");
            } else if (cases[i].dia) {
                const dsops_dia_case *c = cases[i].dia;
                printf("%-40s sparse_attention_v32        B %-3d S %-4d H %d N %d K %-5d %s, %s%s\n", c->name, c->B,
                       c->S, c->H, c->N, c->K, c->int8 ? "int8" : "bf16",
                       c->layout == DSOPS_KV_SPLIT_BF16   ? "split_bf16"
                       : c->layout == DSOPS_KV_SPLIT_INT8 ? "split_int8"
                                                          : "packed656",
                       c->ci ? "" : "  (not in CI)");
            } else if (cases[i].idxp) {
                const dsops_idxp_case *c = cases[i].idxp;
                printf("%-40s indexer_prolog_v32          B %-3d S %-4d H %d Q %d NI %d DI %d %s%s, %s%s\n", c->name,
                       c->B, c->S, c->H, c->Q, c->NI, c->DI, c->int8 ? "int8" : "bf16",
                       c->int8 || c->hadamard ? "" : " (no Hadamard)",
                       c->rope_mode == DSOPS_ROPE_HALF          ? "half"
                       : c->rope_mode == DSOPS_ROPE_INTERLEAVED ? "interleaved"
                                                                : "interleaved_in_half_out",
                       c->ci ? "" : "  (not in CI)");
            } else if (cases[i].mlap) {
                const dsops_mlap_case *c = cases[i].mlap;
                printf("%-40s mla_prolog_v32              B %-3d S %-4d H %d Q %d N %d %s wq_b, %s%s\n", c->name, c->B,
                       c->S, c->H, c->Q, c->N, c->int8_wq_b ? "int8" : "bf16",
                       c->layout == DSOPS_KV_SPLIT_BF16   ? "split_bf16"
                       : c->layout == DSOPS_KV_SPLIT_INT8 ? "split_int8"
                                                          : "packed656",
                       c->ci ? "" : "  (not in CI)");
            } else {
                const dsops_li_case *c = cases[i].li;
                printf("%-40s lightning_indexer           B %-3d S %-4d NI %-3d DI %-3d K %-5d ratio %d %s%s\n",
                       c->name, c->B, c->S, c->NI, c->DI, c->K, c->cmp_ratio, c->int8 ? "int8" : "bf16",
                       c->ci ? "" : "  (not in CI)");
            }
        }
        return what ? 0 : (list ? 0 : 2);
    }
    dsops_context *ctx;
    if (dsops_context_create(&ctx) != DSOPS_OK) {
        fprintf(stderr, "dsops bench: %s\n", dsops_last_error());
        return 1;
    }
    if (o.threads)
        dsops_context_set_threads(ctx, o.threads);
    if (o.isa_set)
        dsops_context_set_isa(ctx, o.isa);
    double peak[2] = {0, 0};
    dsops_measure_peak(dsops_isa_detected(), DSOPS_PEAK_BF16_DOT, 0.3, &peak[DSOPS_PEAK_BF16_DOT]);
    dsops_measure_peak(dsops_isa_detected(), DSOPS_PEAK_INT8_DOT, 0.2, &peak[DSOPS_PEAK_INT8_DOT]);
    printf("peaks per core (%s): bf16 dot %.1f GFLOP/s, int8 dot %.1f GOP/s; %%peak = rate / (peak x threads)\n",
           dsops_isa_name(dsops_isa_detected()), peak[0], peak[1]);
    printf("%-36s %-10s %3s %5s %10s %16s %8s %-5s %7s %7s %5s\n", "case", "isa", "thr", "runs", "median ms",
           "min-max ms", "G/s", "unit", "GB/s", "%peak", "check");
    int failures = 0, matched = 0;
    size_t wl = strlen(what);
    /* an exact case name runs that case alone; otherwise a prefix, "all" or an operator name runs every
     * full-size case it covers */
    int have_exact = 0;
    for (int i = 0; i < count; i++)
        have_exact |= !strcmp(cases[i].name, what);
    for (int i = 0; i < count; i++) {
        const bench_case_ref *c = &cases[i];
        int exact = !strcmp(c->name, what);
        if (have_exact && !exact)
            continue;
        int full = strstr(c->name, "_ci") == NULL && strstr(c->name, "_edge") == NULL;
        int prefix = !strncmp(c->name, what, wl) && full;
        int all = !strcmp(what, "all") && full;
        int op = full && ((!strcmp(what, "sparse_flash_attention_v32") && c->sfa) ||
                          (!strcmp(what, "lightning_indexer") && c->li) || (!strcmp(what, "mla_prolog_v32") && c->mlap) ||
                          (!strcmp(what, "sparse_attention_v32") && c->dia) ||
                          (!strcmp(what, "indexer_prolog_v32") && c->idxp));
        if (!(exact || prefix || all || op))
            continue;
        matched++;
        failures += bench_case(c, &o, ctx, peak);
    }
    dsops_context_destroy(ctx);
    if (!matched) {
        fprintf(stderr, "dsops bench: no case matches '%s' (see dsops bench --list)\n", what);
        return 2;
    }
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "info"))
        return cmd_info();
    if (!strcmp(argv[1], "bench"))
        return cmd_bench(argc - 2, argv + 2);
    if (!strcmp(argv[1], "run"))
        return dsops_cmd_run(argc - 2, argv + 2, NULL);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "dsops: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
