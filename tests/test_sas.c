/* sas (spec §3.7, attention core §2.10) against its oracle (ref/ref_sas.c), on every instruction-set
 * tier from scalar up to the detected one:
 *  - the oracle itself on two hand-made keys (normalised, fp32, tiled, with and without a sink);
 *  - adversarial problems (every tier): contexts shorter than the window, L multiples of 128 and 4,
 *    compressed counts 0, -1 / out-of-range / non-causal-but-valid / duplicate sparse indices, junk after
 *    the counted entries, cmp_topk_length absent / random / 0 / the vendor count, odd block sizes in each
 *    pool independently, sinks absent / random / +-Inf / +-1e30, N 1, D 3 / 64 / 67 / 576, win_size 0 / 1 /
 *    128 / 300, every p_mode (tiled with p_tile 1 / 3 / 7 / 128 and windows shorter than the tile), lse on /
 *    off, MTP (S 2-4) and prefill (S 64+) sequences, L <= 0 tokens, empty sequences, T 0 and B 0, strided
 *    views, extreme logits. Every pool row that is not needed holds NaN (also the padding of strided rows
 *    and whole spare blocks); every block-table entry that is not needed holds -1 or junk; the elements
 *    before, between (strides) and after out and lse must stay untouched;
 *  - the docs/CASES.md edges: v4_scfa_edge_kv5_s2 (the vendor count makes token 0 window-only),
 *    v4_sas_edge_lonely (out +0, lse +Inf), v4_sas_edge_sink_inf (out 0, lse bitwise as without sinks),
 *    v4_sas_edge_n1_bs1; lse never depends on the sink;
 *  - the poisoned-row rule (spec §2.10 A3) on every tier: by hand (NaN, +Inf and all -Inf logits give NaN
 *    out and lse; -Inf logits among finite ones weigh 0; a NaN sink makes out NaN and keeps lse, +Inf gives
 *    out 0, -Inf changes nothing), and in swa / cfa / scfa problems of every p_mode (NaN, +Inf, -Inf query
 *    elements, a NaN key, a token without keys whose query is NaN, the other rows unaffected) with NaN,
 *    +Inf or -Inf in every pool row nobody reads, against the oracle on the same problem with ordinary values
 *    there;
 *  - determinism: bitwise equal outputs for 1, 2 and 3 threads (scalar and best tier).
 * The named cases of the sas family run in tests/test_cases.c, against the family's check in harness/sas.c.
 * Tolerances (§3.7): out 1e-4 / 2^-7 / 0.005 (normalised, fp32) or 5e-4 / 5e-4 / 0.005 (tiled); lse 1e-6 /
 * 8.01/65536 / 0.005; lonely rows exactly out +0, lse +Inf.
 * Usage: test_sas [label filter]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"
#include "run_common.h"
#include "test_util.h"

static dsops_context *ctx;

static const tu_tol OUT_TOL = {1e-4, 1.0 / 128, 0.005};
static const tu_tol OUT_TILED_TOL = {5e-4, 5e-4, 0.005};
static const tu_tol LSE_TOL = {1e-6, 8.01 / 65536, 0.005};

#define GUARD_BF16 ((uint16_t)0x7fa5u)
#define GUARD_F32 0x7fa5a5a5u
#define NAN_BF16 ((uint16_t)0x7fc0u)

/* ---- guarded outputs --------------------------------------------------------------------------------- */

/* An output buffer of `n` elements of 2 or 4 bytes with one guard element before and after; the view
 * starts at element 1. Elements the view does not address (guards, padding of strided rows) keep the
 * guard pattern; the operator must never touch them. */
typedef struct guarded {
    void *buf;
    size_t n, esz;
} guarded;

static guarded guarded_make(size_t n, size_t esz)
{
    guarded g = {tu_calloc(n + 2, esz), n, esz};
    return g;
}

static void *guarded_view(const guarded *g) { return (char *)g->buf + g->esz; }

static void guarded_poison(const guarded *g)
{
    for (size_t i = 0; i < g->n + 2; i++) {
        if (g->esz == 2) {
            ((uint16_t *)g->buf)[i] = GUARD_BF16;
        } else {
            uint32_t v = GUARD_F32;
            memcpy((char *)g->buf + 4 * i, &v, 4);
        }
    }
}

static int guarded_is_guard(const guarded *g, size_t i)
{
    if (g->esz == 2)
        return ((const uint16_t *)g->buf)[i] == GUARD_BF16;
    uint32_t v;
    memcpy(&v, (const char *)g->buf + 4 * i, 4);
    return v == GUARD_F32;
}

/* ---- problems ------------------------------------------------------------------------------------------ */

typedef enum sink_kind { SINK_NONE, SINK_RAND, SINK_POS_INF, SINK_NEG_INF, SINK_EXTREME } sink_kind;
typedef enum len_kind { LEN_NONE, LEN_RAND, LEN_ZERO, LEN_VENDOR } len_kind;
typedef enum idx_kind { IDX_VALID, IDX_ZOO, IDX_VENDOR, IDX_ALL_INVALID } idx_kind;

#define MAXB 8

typedef struct sp_spec {
    int B;
    int S[MAXB];            /* tokens per sequence */
    int seqused[MAXB];      /* seqused_kv per sequence */
    int N, D;
    int win_size;
    dsops_cmp_mode cmp_mode;
    int cmp_ratio, K;       /* K: sparse top-k width */
    int BSW, BSC;           /* block sizes of the pools */
    dsops_p_mode p_mode;
    int p_tile;
    sink_kind sinks;
    int lse;                /* lse requested */
    len_kind len;
    idx_kind idx;
    float scale;            /* softmax_scale; 0: D^-0.5 */
    float qamp;             /* q ~ U(-qamp, qamp); 0: 1 */
    int pad;                /* extra elements per row of q, out and both pools (strided views) */
    int unused_pools;       /* pass a NaN pool that the mode does not use (win_size 0 / cmp_mode none) */
} sp_spec;

typedef struct sp_problem {
    sp_spec s;
    int64_t T, B, Dp;
    int64_t NBW, MBW, NBC, MBC, K;
    uint16_t *q;            /* [T, N, Dp] bf16 (view [T, N, D]) */
    int32_t *cu;            /* [B+1] */
    int32_t *used;          /* [B] */
    uint16_t *ori;          /* [NBW, BSW, Dp] bf16 */
    int32_t *ori_bt;        /* [B, MBW] */
    uint16_t *cmp;          /* [NBC, BSC, Dp] bf16 */
    int32_t *cmp_bt;        /* [B, MBC] */
    int32_t *idx;           /* [T, K] */
    int32_t *len;           /* [T] */
    float *sinks;           /* [N] */
    guarded out, lse;       /* [T, N, Dp] bf16 (view [T, N, D]); [T, N] fp32 */
    uint16_t *ref_out;      /* [T, N, D] the oracle's out */
    float *ref_lse;         /* [T, N] the oracle's lse (always computed) */
    dsops_sas_args args;
} sp_problem;

/* One pool's needed rows per sequence (bitmaps over logical rows) -> physical blocks (a random permutation
 * plus two spare blocks), a block table with -1 or junk in the columns nobody needs, and the pool with
 * U(-1,1) in needed rows and NaN everywhere else. */
static void build_pool(tu_rng *r, int64_t B, uint8_t **need, const int64_t *nrows, int64_t BS, int64_t D, int64_t Dp,
                       uint16_t **pool, int32_t **table, int64_t *NB_out, int64_t *MB_out)
{
    int64_t MB = 1, Nn = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t cols = 0;
        for (int64_t p = 0; p < nrows[b]; p++)
            if (need[b][p])
                cols = p / BS + 1;
        if (cols + 1 > MB)
            MB = cols + 1;             /* one column more than needed: never read */
    }
    int32_t *tb = tu_calloc((size_t)(B * MB) + 1, 4);
    int64_t *owner = tu_calloc((size_t)(B * MB) + 2, sizeof(int64_t)); /* needed (b, col) pairs as b * MB + col */
    for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < MB; c++) {
            int needed = 0;
            for (int64_t p = c * BS; p < (c + 1) * BS && p < nrows[b]; p++)
                needed |= need[b][p];
            if (needed)
                owner[Nn++] = b * MB + c;
        }
    const int64_t NB = Nn + 2;
    int64_t *perm = tu_calloc((size_t)NB, sizeof(int64_t));
    for (int64_t i = 0; i < NB; i++)
        perm[i] = i;
    for (int64_t i = NB - 1; i > 0; i--) {
        int64_t j = tu_rng_int(r, 0, i), x = perm[i];
        perm[i] = perm[j], perm[j] = x;
    }
    static const int32_t junk[4] = {-1, -1, 2147483647, -2147483647 - 1};
    for (int64_t i = 0; i < B * MB; i++) {
        int64_t k = tu_rng_int(r, 0, 4);
        tb[i] = k < 4 ? junk[k] : (int32_t)tu_rng_int(r, 0, NB - 1); /* unneeded: any value */
    }
    uint16_t *pl = tu_calloc((size_t)(NB * BS * Dp) + 1, 2);
    for (int64_t i = 0; i < NB * BS * Dp; i++)
        pl[i] = NAN_BF16;
    for (int64_t i = 0; i < Nn; i++) {
        const int64_t b = owner[i] / MB, c = owner[i] % MB, blk = perm[i];
        tb[b * MB + c] = (int32_t)blk;
        for (int64_t row = 0; row < BS; row++) {
            const int64_t p = c * BS + row;
            if (p < nrows[b] && need[b][p])
                for (int64_t d = 0; d < D; d++)
                    pl[(blk * BS + row) * Dp + d] = tu_bf16(tu_rng_uniform(r, -1, 1));
        }
    }
    free(owner), free(perm);
    *pool = pl, *table = tb, *NB_out = NB, *MB_out = MB;
}

static int64_t token_L(const sp_problem *p, int64_t b, int64_t t)
{
    return (int64_t)p->used[b] - ((int64_t)p->cu[b + 1] - 1 - t);
}

static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

static sp_problem *sp_make(const sp_spec *spec, uint64_t seed)
{
    sp_problem *p = tu_calloc(1, sizeof *p);
    p->s = *spec;
    sp_spec *s = &p->s;
    if (s->scale == 0.0f)
        s->scale = 1.0f / sqrtf((float)s->D);
    if (s->qamp == 0.0f)
        s->qamp = 1.0f;
    if (s->cmp_ratio < 1)
        s->cmp_ratio = 1;
    tu_rng r;
    tu_rng_seed(&r, seed);
    const int64_t B = s->B, N = s->N, D = s->D, Dp = D + s->pad;
    p->B = B, p->Dp = Dp;
    p->cu = tu_calloc((size_t)B + 1, 4);
    p->used = tu_calloc((size_t)B + 1, 4);
    for (int64_t b = 0; b < B; b++)
        p->cu[b + 1] = p->cu[b] + s->S[b], p->used[b] = s->seqused[b];
    const int64_t T = p->T = p->cu[B];
    const int sparse = s->cmp_mode == DSOPS_CMP_SPARSE;
    const int64_t K = p->K = sparse ? s->K : 0;

    /* q with NaN padding */
    p->q = tu_calloc((size_t)(T * N * Dp) + 1, 2);
    for (int64_t i = 0; i < T * N * Dp; i++)
        p->q[i] = i % Dp < D ? tu_bf16(tu_rng_uniform(&r, -s->qamp, s->qamp)) : NAN_BF16;

    /* cmp_topk_length, then the index rows (entries past each token's count are junk) */
    int64_t *cnt = tu_calloc((size_t)T + 1, sizeof(int64_t));
    if (sparse) {
        p->len = tu_calloc((size_t)T + 1, 4);
        p->idx = tu_calloc((size_t)(T * K) + 1, 4);
        int32_t *vendor_row = tu_calloc((size_t)K + 1, 4);
        for (int64_t b = 0; b < B; b++) {
            const int64_t NC = p->used[b] / s->cmp_ratio, S_b = s->S[b];
            /* docs/CASES.md: 0 ... NC-1 then zeros, or the first K of a permutation of 0 ... NC-1 */
            if (NC < K) {
                for (int64_t j = 0; j < K; j++)
                    vendor_row[j] = (int32_t)(j < NC ? j : 0);
            } else {
                int32_t *perm = tu_calloc((size_t)NC, 4);
                for (int64_t i = 0; i < NC; i++)
                    perm[i] = (int32_t)i;
                for (int64_t i = 0; i < K; i++) {
                    int64_t j = tu_rng_int(&r, i, NC - 1);
                    int32_t x = perm[i];
                    perm[i] = perm[j], perm[j] = x;
                    vendor_row[i] = perm[i];
                }
                free(perm);
            }
            for (int64_t t = p->cu[b]; t < p->cu[b + 1]; t++) {
                const int64_t i = t - p->cu[b], L = token_L(p, b, t);
                const int64_t ncmp = (L > 0 ? L : 0) / s->cmp_ratio;
                switch (s->len) {
                case LEN_NONE: p->len[t] = -1; break; /* absent: the buffer is not passed */
                case LEN_RAND: p->len[t] = (int32_t)tu_rng_int(&r, 0, K + 2); break;
                case LEN_ZERO: p->len[t] = 0; break;
                case LEN_VENDOR: {
                    int64_t v = NC - S_b + 1 + i;
                    p->len[t] = (int32_t)(v > 0 ? v : 0);
                    break;
                }
                }
                cnt[t] = imin(K, ncmp);
                if (s->len != LEN_NONE)
                    cnt[t] = imin(cnt[t], p->len[t]);
                for (int64_t j = 0; j < K; j++) {
                    int32_t v;
                    if (s->idx == IDX_VENDOR) {
                        v = vendor_row[j];
                    } else if (s->idx == IDX_ALL_INVALID) {
                        const int32_t bad[4] = {-1, (int32_t)NC, -3, 2147483647};
                        v = bad[tu_rng_int(&r, 0, 3)];
                    } else if (s->idx == IDX_VALID || j >= cnt[t]) {
                        v = NC > 0 ? (int32_t)tu_rng_int(&r, 0, NC - 1) : -1;
                        if (s->idx == IDX_ZOO && j >= cnt[t] && tu_rng_int(&r, 0, 1)) /* junk, never looked at */
                            v = tu_rng_int(&r, 0, 1) ? 2147483647 : (int32_t)(NC + tu_rng_int(&r, 0, 1000000));
                    } else {
                        /* the zoo: valid, -1, other negatives, NC and beyond, int32 extremes, valid but not
                         * causal for this token (n_cmp(L) <= idx < NC), duplicates of the previous entry */
                        switch (tu_rng_int(&r, 0, 11)) {
                        case 0: v = -1; break;
                        case 1: v = -2147483647 - 1; break;
                        case 2: v = (int32_t)NC; break;
                        case 3: v = (int32_t)(NC + tu_rng_int(&r, 1, 50)); break;
                        case 4: v = 2147483647; break;
                        case 5: v = ncmp < NC ? (int32_t)tu_rng_int(&r, ncmp, NC - 1) : -1; break;
                        case 6: case 7: v = j > 0 ? p->idx[t * K + j - 1] : 0; break;
                        default: v = NC > 0 ? (int32_t)tu_rng_int(&r, 0, NC - 1) : -1; break;
                        }
                    }
                    p->idx[t * K + j] = v;
                }
            }
        }
        free(vendor_row);
    }

    /* the rows each pool must provide */
    uint8_t *wneed[MAXB], *cneed[MAXB];
    int64_t wrows[MAXB], crows[MAXB];
    for (int64_t b = 0; b < B; b++) {
        wrows[b] = p->used[b];
        crows[b] = p->used[b] / s->cmp_ratio;
        wneed[b] = tu_calloc((size_t)wrows[b] + 1, 1);
        cneed[b] = tu_calloc((size_t)crows[b] + 1, 1);
        for (int64_t t = p->cu[b]; t < p->cu[b + 1]; t++) {
            const int64_t L = token_L(p, b, t), Lp = L > 0 ? L : 0;
            const int64_t w = imin(Lp, s->win_size);
            for (int64_t pos = L - w; pos < L; pos++)
                wneed[b][pos] = 1;
            if (s->cmp_mode == DSOPS_CMP_DENSE)
                for (int64_t e = 0; e < Lp / s->cmp_ratio; e++)
                    cneed[b][e] = 1;
            if (sparse)
                for (int64_t j = 0; j < cnt[t]; j++) {
                    int64_t v = p->idx[t * K + j];
                    if (v >= 0 && v < crows[b])
                        cneed[b][v] = 1;
                }
        }
    }
    const int want_ori = s->win_size > 0 || s->unused_pools, want_cmp = s->cmp_mode != DSOPS_CMP_NONE || s->unused_pools;
    if (want_ori)
        build_pool(&r, B, wneed, wrows, s->BSW, D, Dp, &p->ori, &p->ori_bt, &p->NBW, &p->MBW);
    if (want_cmp)
        build_pool(&r, B, cneed, crows, s->BSC, D, Dp, &p->cmp, &p->cmp_bt, &p->NBC, &p->MBC);
    for (int64_t b = 0; b < B; b++)
        free(wneed[b]), free(cneed[b]);
    free(cnt);

    /* sinks */
    if (s->sinks != SINK_NONE) {
        p->sinks = tu_calloc((size_t)N, 4);
        static const float extreme[7] = {INFINITY, -INFINITY, 1e30f, -1e30f, 20.0f, -20.0f, 0.0f};
        for (int64_t h = 0; h < N; h++) {
            switch (s->sinks) {
            case SINK_RAND: p->sinks[h] = tu_rng_uniform(&r, -1, 1); break;
            case SINK_POS_INF: p->sinks[h] = INFINITY; break;
            case SINK_NEG_INF: p->sinks[h] = -INFINITY; break;
            default: p->sinks[h] = h % 7 == 6 ? tu_rng_uniform(&r, -1, 1) : extreme[h % 7]; break;
            }
        }
    }

    p->out = guarded_make((size_t)(T * N * Dp), 2);
    p->lse = guarded_make((size_t)(T * N), 4);
    p->ref_out = tu_calloc((size_t)(T * N * D) + 1, 2);
    p->ref_lse = tu_calloc((size_t)(T * N) + 1, 4);

    /* args: strided views where pad > 0 */
    dsops_sas_args *a = &p->args;
    memset(a, 0, sizeof *a);
    a->q = dsops_tensor_make(p->q, DSOPS_BF16, 3, (int64_t[]){T, N, D});
    a->q.stride[0] = N * Dp, a->q.stride[1] = Dp;
    a->cu_seqlens_q = dsops_tensor_make(p->cu, DSOPS_INT32, 1, (int64_t[]){B + 1});
    a->seqused_kv = dsops_tensor_make(p->used, DSOPS_INT32, 1, (int64_t[]){B});
    if (want_ori) {
        a->ori_kv = dsops_tensor_make(p->ori, DSOPS_BF16, 3, (int64_t[]){p->NBW, s->BSW, D});
        a->ori_kv.stride[0] = s->BSW * Dp, a->ori_kv.stride[1] = Dp;
        a->ori_block_table = dsops_tensor_make(p->ori_bt, DSOPS_INT32, 2, (int64_t[]){B, p->MBW});
    }
    if (want_cmp) {
        a->cmp_kv = dsops_tensor_make(p->cmp, DSOPS_BF16, 3, (int64_t[]){p->NBC, s->BSC, D});
        a->cmp_kv.stride[0] = s->BSC * Dp, a->cmp_kv.stride[1] = Dp;
        a->cmp_block_table = dsops_tensor_make(p->cmp_bt, DSOPS_INT32, 2, (int64_t[]){B, p->MBC});
    }
    if (sparse) {
        a->cmp_indices = dsops_tensor_make(p->idx, DSOPS_INT32, 2, (int64_t[]){T, K});
        if (s->len != LEN_NONE)
            a->cmp_topk_length = dsops_tensor_make(p->len, DSOPS_INT32, 1, (int64_t[]){T});
    }
    if (p->sinks)
        a->sinks = dsops_tensor_make(p->sinks, DSOPS_FP32, 1, (int64_t[]){N});
    a->out = dsops_tensor_make(guarded_view(&p->out), DSOPS_BF16, 3, (int64_t[]){T, N, D});
    a->out.stride[0] = N * Dp, a->out.stride[1] = Dp;
    if (s->lse)
        a->lse = dsops_tensor_make(guarded_view(&p->lse), DSOPS_FP32, 2, (int64_t[]){T, N});
    a->softmax_scale = s->scale;
    a->win_size = s->win_size;
    a->cmp_mode = s->cmp_mode;
    a->cmp_ratio = s->cmp_ratio;
    a->p_mode = s->p_mode;
    a->p_tile = s->p_tile;
    return p;
}

static void sp_free(sp_problem *p)
{
    free(p->q), free(p->cu), free(p->used), free(p->ori), free(p->ori_bt), free(p->cmp), free(p->cmp_bt);
    free(p->idx), free(p->len), free(p->sinks), free(p->out.buf), free(p->lse.buf), free(p->ref_out);
    free(p->ref_lse);
    free(p);
}

/* The oracle's out and lse (lse always, for the lonely-row checks) into dense buffers. */
static void sp_reference(sp_problem *p)
{
    dsops_sas_args a = p->args;
    const int64_t T = p->T, N = p->s.N, D = p->s.D;
    a.out = dsops_tensor_make(p->ref_out, DSOPS_BF16, 3, (int64_t[]){T, N, D});
    a.lse = dsops_tensor_make(p->ref_lse, DSOPS_FP32, 2, (int64_t[]){T, N});
    dsops_ref_sas(&a);
}

/* ---- checks -------------------------------------------------------------------------------------------- */

/* The operator's outputs (in args, out viewed with row stride Dp inside guarded buffers) against the oracle's
 * dense ones: tolerances by p_mode, lonely rows exact, rows of +Inf sinks exactly 0, guards and padding
 * untouched, an absent lse never written. */
static void check_outputs(const char *label, const dsops_sas_args *a, const guarded *out, const guarded *lse,
                          int64_t Dp, const uint16_t *ref_out, const float *ref_lse)
{
    const int64_t T = a->q.shape[0], N = a->q.shape[1], D = a->q.shape[2];
    const size_t n = (size_t)(T * N * D);
    const uint16_t *ov = guarded_view(out);
    float *o = tu_calloc(n + 1, 4), *r = tu_calloc(n + 1, 4);
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < N; h++)
            for (int64_t d = 0; d < D; d++) {
                o[(t * N + h) * D + d] = tu_f32(ov[(t * N + h) * Dp + d]);
                r[(t * N + h) * D + d] = tu_f32(ref_out[(t * N + h) * D + d]);
            }
    char l[400];
    snprintf(l, sizeof l, "%s out", label);
    tu_compare_close(l, o, r, n, a->p_mode == DSOPS_P_TILED ? OUT_TILED_TOL : OUT_TOL, NULL);
    free(o), free(r);

    if (a->lse.data) {
        snprintf(l, sizeof l, "%s lse", label);
        tu_compare_close(l, guarded_view(lse), ref_lse, (size_t)(T * N), LSE_TOL, NULL);
    }

    /* lonely rows (oracle lse +Inf with an all-zero row): out exactly +0, lse exactly +Inf; rows of a +Inf
     * sink that are not poisoned: out == 0; poisoned rows (oracle lse NaN): NaN in every element and in lse;
     * rows whose oracle out holds no NaN hold none */
    int64_t bad_lonely = -1, bad_sink = -1, bad_nan = -1;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < N; h++) {
            int ref_zero = 1;
            for (int64_t d = 0; d < D; d++)
                ref_zero &= ref_out[(t * N + h) * D + d] == 0;
            const int lonely = isinf(ref_lse[t * N + h]) && ref_lse[t * N + h] > 0 && ref_zero;
            const int poisoned = isnan(ref_lse[t * N + h]);
            const float *sk = a->sinks.data;
            const int inf_sink = sk && isinf(sk[h]) && sk[h] > 0 && !poisoned;
            int ref_any_nan = 0, any_nan = 0;
            for (int64_t d = 0; d < D; d++) {
                uint16_t v = ov[(t * N + h) * Dp + d];
                if (lonely && v != 0 && bad_lonely < 0)
                    bad_lonely = t * N + h;
                if (inf_sink && (v & 0x7fffu) != 0 && bad_sink < 0)
                    bad_sink = t * N + h;
                if (poisoned && !isnan(tu_f32(v)) && bad_nan < 0)
                    bad_nan = t * N + h;
                ref_any_nan |= isnan(tu_f32(ref_out[(t * N + h) * D + d]));
                any_nan |= isnan(tu_f32(v));
            }
            if (!ref_any_nan && any_nan && bad_nan < 0)
                bad_nan = t * N + h;
            if (a->lse.data) {
                float v = ((const float *)guarded_view(lse))[t * N + h];
                if (lonely && !(isinf(v) && v > 0) && bad_lonely < 0)
                    bad_lonely = t * N + h;
                if (isnan(v) != poisoned && bad_nan < 0)
                    bad_nan = t * N + h;
            }
        }
    tu_check(bad_lonely < 0, "%s: lonely row (t %lld, h %lld) is not out +0 / lse +Inf", label,
             (long long)(bad_lonely / (N ? N : 1)), (long long)(bad_lonely % (N ? N : 1)));
    tu_check(bad_sink < 0, "%s: row (t %lld, h %lld) of a +Inf sink is not 0", label,
             (long long)(bad_sink / (N ? N : 1)), (long long)(bad_sink % (N ? N : 1)));
    tu_check(bad_nan < 0, "%s: row (t %lld, h %lld) breaks the NaN rule (NaN throughout where the oracle's lse is NaN, "
             "no NaN where the oracle has none)", label, (long long)(bad_nan / (N ? N : 1)),
             (long long)(bad_nan % (N ? N : 1)));

    /* untouched: guards, padding, an absent lse */
    size_t bad = 0;
    for (size_t i = 0; i < out->n + 2; i++) {
        const int in_view = i >= 1 && i <= out->n && (int64_t)((i - 1) % (size_t)Dp) < D;
        if (!in_view && !guarded_is_guard(out, i))
            bad++;
    }
    tu_check(bad == 0, "%s: %zu out elements outside the view (guards, padding) written", label, bad);
    bad = 0;
    for (size_t i = 0; i < lse->n + 2; i++)
        if ((!a->lse.data || i == 0 || i == lse->n + 1) && !guarded_is_guard(lse, i))
            bad++;
    tu_check(bad == 0, "%s: %zu lse elements written %s", label, bad, a->lse.data ? "outside the view" : "(lse absent)");
}

/* Runs p on the current tier into its own guarded buffers; returns the status. */
static dsops_status sp_run(sp_problem *p)
{
    guarded_poison(&p->out), guarded_poison(&p->lse);
    return dsops_sas(ctx, &p->args);
}

/* p on every tier from scalar up (labels "<label> [<tier>]") against the oracle's results of sp_reference;
 * after each checked call, `also` (optional) adds its own checks. */
static void sp_check_tiers(const char *label, sp_problem *p, void (*also)(const char *l, const sp_problem *p))
{
    char l[300];
    for (int isa = -1; tu_next_tier(ctx, &isa, label, l, sizeof l);) {
        dsops_status st = sp_run(p);
        if (!tu_check(st == DSOPS_OK, "%s: status %s (%s)", l, dsops_status_name(st), dsops_last_error()))
            continue;
        check_outputs(l, &p->args, &p->out, &p->lse, p->Dp, p->ref_out, p->ref_lse);
        if (also)
            also(l, p);
    }
    dsops_context_set_isa(ctx, dsops_isa_detected());
}

/* ---- adversarial problems (every tier) ------------------------------------------------------------------- */

static void run_problem(const char *label, const sp_spec *s)
{
    if (!tu_selected(label))
        return;
    sp_problem *p = sp_make(s, tu_label_seed(label));
    sp_reference(p);
    sp_check_tiers(label, p, NULL);
    sp_free(p);
}

static sp_spec swa_spec(void)
{
    sp_spec s;
    memset(&s, 0, sizeof s);
    s.B = 3;
    s.S[0] = 1, s.S[1] = 2, s.S[2] = 3;
    s.seqused[0] = 300, s.seqused[1] = 50, s.seqused[2] = 128;
    s.N = 4, s.D = 64;
    s.win_size = 128;
    s.cmp_mode = DSOPS_CMP_NONE;
    s.BSW = 17, s.BSC = 5;
    s.p_mode = DSOPS_P_NORMALISED;
    s.p_tile = 128;
    s.sinks = SINK_RAND;
    s.lse = 1;
    return s;
}

static sp_spec cfa_spec(void)
{
    sp_spec s = swa_spec();
    s.B = 5;
    s.S[0] = 1, s.S[1] = 2, s.S[2] = 3, s.S[3] = 1, s.S[4] = 2;
    s.seqused[0] = 127, s.seqused[1] = 128, s.seqused[2] = 257, s.seqused[3] = 256, s.seqused[4] = 700;
    s.N = 3;
    s.cmp_mode = DSOPS_CMP_DENSE;
    s.cmp_ratio = 128;
    s.BSW = 3, s.BSC = 1;
    s.p_mode = DSOPS_P_TILED;
    s.p_tile = 128;
    return s;
}

static sp_spec scfa_spec(void)
{
    sp_spec s = swa_spec();
    s.B = 4;
    s.S[0] = 16, s.S[1] = 2, s.S[2] = 1, s.S[3] = 3;
    s.seqused[0] = 130, s.seqused[1] = 5, s.seqused[2] = 64, s.seqused[3] = 1001;
    s.cmp_mode = DSOPS_CMP_SPARSE;
    s.cmp_ratio = 4;
    s.K = 24;
    s.BSW = 128, s.BSC = 17;
    s.idx = IDX_ZOO;
    s.len = LEN_RAND;
    return s;
}

/* A case list: a base spec and the fields one labelled problem changes (the repeated shape is the list). */
static void test_adversarial(void)
{
    char l[200];
    sp_spec s;

    /* swa: short contexts, L multiple of 128, window sizes, block sizes, lse, sinks */
    s = swa_spec();
    run_problem("swa base", &s);
    s = swa_spec();
    s.B = 4;
    s.S[0] = 1, s.S[1] = 1, s.S[2] = 2, s.S[3] = 4;
    s.seqused[0] = 5, s.seqused[1] = 128, s.seqused[2] = 256, s.seqused[3] = 129;
    s.BSW = 128, s.lse = 0, s.sinks = SINK_NONE;
    run_problem("swa short and multiples of 128, no lse, no sinks", &s);
    const int wins[4] = {1, 128, 300, 7};
    const int bsws[4] = {1, 3, 128, 17};
    for (int i = 0; i < 4; i++) {
        s = swa_spec();
        s.win_size = wins[i], s.BSW = bsws[i];
        s.seqused[0] = 400;
        snprintf(l, sizeof l, "swa win_size %d BSW %d", wins[i], bsws[i]);
        run_problem(l, &s);
    }
    s = swa_spec();
    s.p_mode = DSOPS_P_FP32;
    run_problem("swa p_mode fp32", &s);
    s = swa_spec();
    s.p_mode = DSOPS_P_TILED, s.p_tile = 7;
    run_problem("swa p_mode tiled 7 (window is one tile)", &s);
    s = swa_spec();
    s.unused_pools = 1;
    run_problem("swa with an unused NaN compressed pool", &s);
    s = swa_spec();
    s.pad = 5;
    run_problem("swa strided views", &s);

    /* cfa: dense entries, L multiples of 128, each pool's block size on its own, every p_mode and tile */
    s = cfa_spec();
    run_problem("cfa base tiled 128", &s);
    const int ptiles[4] = {1, 3, 7, 128};
    for (int i = 0; i < 4; i++) {
        s = cfa_spec();
        s.cmp_ratio = 4, s.p_tile = ptiles[i];
        s.win_size = i == 3 ? 5 : 128; /* window shorter than the tile */
        snprintf(l, sizeof l, "cfa ratio 4 tiled p_tile %d win %d", ptiles[i], s.win_size);
        run_problem(l, &s);
    }
    s = cfa_spec();
    s.cmp_ratio = 1, s.win_size = 0, s.p_tile = 7, s.seqused[4] = 300;
    run_problem("cfa ratio 1 no window tiled 7", &s);
    s = cfa_spec();
    s.p_mode = DSOPS_P_NORMALISED, s.BSW = 128, s.BSC = 3, s.lse = 0;
    run_problem("cfa normalised BSW 128 BSC 3 no lse", &s);
    s = cfa_spec();
    s.p_mode = DSOPS_P_FP32, s.BSW = 1, s.BSC = 17, s.sinks = SINK_NONE;
    run_problem("cfa fp32 BSW 1 BSC 17 no sinks", &s);
    s = cfa_spec();
    s.win_size = 300, s.p_tile = 128;
    run_problem("cfa tiled window 300 longer than the tile", &s);
    s = cfa_spec();
    s.sinks = SINK_EXTREME;
    run_problem("cfa tiled extreme sinks", &s);
    s = cfa_spec();
    s.pad = 3, s.cmp_ratio = 16, s.BSC = 4;
    run_problem("cfa strided views ratio 16", &s);

    /* scfa: index zoo, counts, lengths, block sizes, modes */
    const len_kind lens[4] = {LEN_NONE, LEN_RAND, LEN_ZERO, LEN_VENDOR};
    const char *len_names[4] = {"absent", "random", "0", "vendor"};
    for (int i = 0; i < 4; i++) {
        s = scfa_spec();
        s.len = lens[i];
        snprintf(l, sizeof l, "scfa zoo cmp_topk_length %s", len_names[i]);
        run_problem(l, &s);
    }
    s = scfa_spec();
    s.idx = IDX_VENDOR, s.len = LEN_VENDOR;
    run_problem("scfa vendor indices and vendor count", &s);
    s = scfa_spec();
    s.idx = IDX_VALID, s.len = LEN_NONE, s.BSW = 1, s.BSC = 1;
    run_problem("scfa valid indices BSW 1 BSC 1", &s);
    s = scfa_spec();
    s.BSW = 3, s.BSC = 128, s.p_mode = DSOPS_P_FP32;
    run_problem("scfa fp32 BSW 3 BSC 128", &s);
    s = scfa_spec();
    s.p_mode = DSOPS_P_TILED, s.p_tile = 3;
    run_problem("scfa tiled 3", &s);
    s = scfa_spec();
    s.p_mode = DSOPS_P_TILED, s.p_tile = 1, s.win_size = 0;
    run_problem("scfa tiled 1 no window", &s);
    s = scfa_spec();
    s.win_size = 0, s.len = LEN_NONE;
    run_problem("scfa no window (lonely rows where no index is valid)", &s);
    s = scfa_spec();
    s.win_size = 0, s.unused_pools = 1;
    run_problem("scfa no window with an unused NaN window pool", &s);
    s = scfa_spec();
    s.sinks = SINK_EXTREME, s.N = 14;
    run_problem("scfa extreme sinks", &s);
    s = scfa_spec();
    s.K = 1, s.idx = IDX_VALID, s.len = LEN_NONE;
    run_problem("scfa K 1", &s);
    s = scfa_spec();
    s.B = 1, s.S[0] = 1, s.seqused[0] = 1001, s.N = 20;
    run_problem("scfa T 1 N 20 (threads share the heads of one token)", &s);

    /* MTP and prefill: S 2-4, S 64+, L <= 0, empty sequences */
    s = scfa_spec();
    s.B = 3;
    s.S[0] = 64, s.S[1] = 70, s.S[2] = 4;
    s.seqused[0] = 64, s.seqused[1] = 200, s.seqused[2] = 2; /* seq 2: tokens 0, 1 have L <= 0 */
    s.N = 2, s.K = 8;
    run_problem("scfa prefill S 64 / 70 and L <= 0", &s);
    s = cfa_spec();
    s.B = 2;
    s.S[0] = 66, s.S[1] = 3;
    s.seqused[0] = 400, s.seqused[1] = 1;
    s.cmp_ratio = 4, s.p_tile = 7, s.N = 2;
    run_problem("cfa prefill S 66 and L <= 0", &s);
    s = scfa_spec();
    s.B = 5;
    s.S[0] = 0, s.S[1] = 3, s.S[2] = 0, s.S[3] = 2, s.S[4] = 0;
    s.seqused[0] = 10, s.seqused[1] = 90, s.seqused[2] = 0, s.seqused[3] = 33, s.seqused[4] = 7;
    run_problem("scfa empty sequences", &s);
    s = swa_spec();
    s.S[0] = s.S[1] = s.S[2] = 0;
    run_problem("swa T 0", &s);
    s = swa_spec();
    s.B = 0;
    run_problem("swa B 0", &s);
    s = scfa_spec();
    s.B = 0;
    run_problem("scfa B 0", &s);

    /* shapes: N 1, D 576, odd D, extreme logits */
    s = scfa_spec();
    s.N = 1, s.D = 576;
    run_problem("scfa N 1 D 576", &s);
    s = cfa_spec();
    s.D = 67, s.cmp_ratio = 8;
    run_problem("cfa D 67", &s);
    s = swa_spec();
    s.D = 3, s.N = 5;
    run_problem("swa D 3", &s);
    s = scfa_spec();
    s.qamp = 8, s.scale = 1.0f, s.p_mode = DSOPS_P_FP32;
    run_problem("scfa extreme logits fp32", &s);
    s = scfa_spec();
    s.qamp = 8, s.scale = 1.0f;
    run_problem("scfa extreme logits normalised", &s);
    s = cfa_spec();
    s.qamp = 8, s.scale = 1.0f, s.cmp_ratio = 4, s.p_tile = 7;
    run_problem("cfa extreme logits tiled", &s);
    s = swa_spec();
    s.scale = -0.5f;
    run_problem("swa negative softmax_scale", &s);
}

/* ---- the oracle on hand-made keys ------------------------------------------------------------------------ */

/* N 1, D 2, two window keys (1, 0), (0, 1) and q = (1, 0), softmax_scale 1: scores 1 and 0. With a dense
 * compressed pool of ratio 1 the same two positions follow as entries 2 and 3. Expected values from the
 * formulas of §2.10 evaluated here step by step. */
static void test_oracle_by_hand(void)
{
    if (!tu_selected("oracle"))
        return;
    uint16_t q[2] = {tu_bf16(1), 0};
    uint16_t pool[4] = {tu_bf16(1), 0, 0, tu_bf16(1)}; /* [1 block, 2 rows, 2] */
    int32_t cu[2] = {0, 1}, used[1] = {2}, bt[1] = {0};
    float sink[1] = {0.0f};
    uint16_t out[2];
    float lse;
    dsops_sas_args a;
    memset(&a, 0, sizeof a);
    a.q = dsops_tensor_make(q, DSOPS_BF16, 3, (int64_t[]){1, 1, 2});
    a.cu_seqlens_q = dsops_tensor_make(cu, DSOPS_INT32, 1, (int64_t[]){2});
    a.seqused_kv = dsops_tensor_make(used, DSOPS_INT32, 1, (int64_t[]){1});
    a.ori_kv = dsops_tensor_make(pool, DSOPS_BF16, 3, (int64_t[]){1, 2, 2});
    a.ori_block_table = dsops_tensor_make(bt, DSOPS_INT32, 2, (int64_t[]){1, 1});
    a.out = dsops_tensor_make(out, DSOPS_BF16, 3, (int64_t[]){1, 1, 2});
    a.lse = dsops_tensor_make(&lse, DSOPS_FP32, 2, (int64_t[]){1, 1});
    a.softmax_scale = 1.0f, a.win_size = 2, a.cmp_mode = DSOPS_CMP_NONE, a.cmp_ratio = 1, a.p_tile = 1;

    const float w1 = expf(-1.0f), l = 1.0f + w1, lse_want = 1.0f + logf(l);
    for (int mode = 0; mode < 3; mode++)
        for (int with_sink = 0; with_sink < 2; with_sink++) {
            a.p_mode = (dsops_p_mode)mode;
            a.sinks = with_sink ? dsops_tensor_make(sink, DSOPS_FP32, 1, (int64_t[]){1}) : (dsops_tensor){0};
            const float den = l + (with_sink ? expf(0.0f - 1.0f) : 0.0f);
            float o0, o1;
            if (mode == DSOPS_P_TILED) { /* one tile (the window): bf16(w) . V, then / den */
                o0 = tu_round_bf16(1.0f) / den, o1 = tu_round_bf16(w1) / den;
            } else if (mode == DSOPS_P_FP32) {
                o0 = 1.0f / den, o1 = w1 / den;
            } else {
                o0 = tu_round_bf16(1.0f / den), o1 = tu_round_bf16(w1 / den);
            }
            dsops_ref_sas(&a);
            tu_check(out[0] == tu_bf16(o0) && out[1] == tu_bf16(o1) && lse == lse_want,
                     "oracle: two keys, p_mode %d, sink %d: out (%g, %g) lse %.9g, expected (%g, %g) %.9g", mode,
                     with_sink, (double)tu_f32(out[0]), (double)tu_f32(out[1]), (double)lse,
                     (double)tu_round_bf16(o0), (double)tu_round_bf16(o1), (double)lse_want);
        }

    /* tiled with two tiles: window = position 1 (score 0) as tile 1, the dense entries 0, 1 (scores 1, 0)
     * as tile 2 (p_tile 2); no sink */
    a.sinks = (dsops_tensor){0};
    a.win_size = 1, a.cmp_mode = DSOPS_CMP_DENSE, a.cmp_kv = a.ori_kv, a.cmp_block_table = a.ori_block_table;
    a.p_mode = DSOPS_P_TILED, a.p_tile = 2;
    {
        /* tile 1: m = 0, l = 1, O = (0, 1); tile 2: m' = 1, alpha = e^-1, w = (1, e^-1) */
        const float alpha = expf(0.0f - 1.0f);
        const float lt = 1.0f * alpha + (1.0f + w1);
        const float O0 = 0.0f * alpha + (tu_round_bf16(1.0f) * 1.0f + tu_round_bf16(w1) * 0.0f);
        const float O1 = 1.0f * alpha + (tu_round_bf16(1.0f) * 0.0f + tu_round_bf16(w1) * 1.0f);
        dsops_ref_sas(&a);
        const float lw = 1.0f + logf(lt);
        tu_check(out[0] == tu_bf16(O0 / lt) && out[1] == tu_bf16(O1 / lt) && lse == lw,
                 "oracle: two tiles: out (%g, %g) lse %.9g, expected (%g, %g) %.9g", (double)tu_f32(out[0]),
                 (double)tu_f32(out[1]), (double)lse, (double)tu_round_bf16(O0 / lt), (double)tu_round_bf16(O1 / lt),
                 (double)lw);
    }

    /* lonely: no window, no compressed entry (L 2 < ratio 4): +0 and +Inf */
    a.win_size = 0, a.cmp_ratio = 4;
    out[0] = out[1] = 0x1234;
    dsops_ref_sas(&a);
    tu_check(out[0] == 0 && out[1] == 0 && isinf(lse) && lse > 0, "oracle: lonely row not +0 / +Inf");
}

/* ---- docs/CASES.md edges and sink properties -------------------------------------------------------------------- */

static void test_edges(void)
{
    sp_spec s;
    /* v4_scfa_edge_kv5_s2: seqused 5, S 2, ratio 4: causal counts 1, 1; the vendor count (0, 1) makes token 0
     * window-only, exactly as a zero count does */
    if (tu_selected("v4_scfa_edge_kv5_s2")) {
        s = scfa_spec();
        s.B = 1, s.S[0] = 2, s.seqused[0] = 5, s.K = 512, s.N = 8, s.idx = IDX_VENDOR, s.len = LEN_NONE;
        run_problem("v4_scfa_edge_kv5_s2 causal count", &s);
        s.len = LEN_VENDOR;
        run_problem("v4_scfa_edge_kv5_s2 vendor count", &s);
        sp_problem *p = sp_make(&s, tu_label_seed("v4_scfa_edge_kv5_s2"));
        tu_check(p->len[0] == 0 && p->len[1] == 1, "v4_scfa_edge_kv5_s2: vendor counts %d, %d, expected 0, 1",
                 p->len[0], p->len[1]);
        const size_t row = (size_t)(s.N * s.D);
        uint16_t *vendor = tu_calloc(row, 2);
        dsops_status st = sp_run(p);
        memcpy(vendor, guarded_view(&p->out), row * 2);
        p->len[0] = 0; /* token 0 window-only */
        dsops_status st2 = sp_run(p);
        tu_check(st == DSOPS_OK && st2 == DSOPS_OK && memcmp(vendor, guarded_view(&p->out), row * 2) == 0,
                 "v4_scfa_edge_kv5_s2: token 0 with the vendor count differs from the window-only result (%s, %s)",
                 dsops_status_name(st), dsops_status_name(st2));
        free(vendor);
        sp_free(p);
    }
    /* v4_sas_edge_lonely: win_size 0, every index -1 (or otherwise invalid): out +0, lse +Inf everywhere */
    if (tu_selected("v4_sas_edge_lonely")) {
        s = scfa_spec();
        s.win_size = 0, s.idx = IDX_ALL_INVALID, s.len = LEN_NONE;
        run_problem("v4_sas_edge_lonely", &s);
        sp_problem *p = sp_make(&s, tu_label_seed("v4_sas_edge_lonely"));
        dsops_status st = sp_run(p);
        size_t bad = 0;
        const uint16_t *o = guarded_view(&p->out);
        const float *ls = guarded_view(&p->lse);
        for (int64_t i = 0; i < p->T * s.N * s.D; i++)
            bad += o[i] != 0;
        for (int64_t i = 0; i < p->T * s.N; i++)
            bad += !(isinf(ls[i]) && ls[i] > 0);
        tu_check(st == DSOPS_OK && bad == 0, "v4_sas_edge_lonely: %s, %zu values not out +0 / lse +Inf",
                 dsops_status_name(st), bad);
        sp_free(p);
    }
    /* v4_sas_edge_n1_bs1 */
    s = scfa_spec();
    s.N = 1, s.BSW = 1, s.BSC = 1;
    run_problem("v4_sas_edge_n1_bs1 scfa", &s);
    s = cfa_spec();
    s.N = 1, s.BSW = 1, s.BSC = 1;
    run_problem("v4_sas_edge_n1_bs1 cfa", &s);

    /* v4_sas_edge_sink_inf and "lse never depends on the sink": on each tier, lse with sinks +Inf, -Inf,
     * random equals lse without sinks bitwise; with +Inf every out value is 0; with -Inf out equals the
     * no-sink out bitwise */
    if (!tu_selected("v4_sas_edge_sink_inf"))
        return;
    const dsops_p_mode modes[3] = {DSOPS_P_NORMALISED, DSOPS_P_TILED, DSOPS_P_FP32};
    for (int mi = 0; mi < 3; mi++) {
        s = scfa_spec();
        s.p_mode = modes[mi], s.p_tile = 5, s.sinks = SINK_RAND;
        sp_problem *p = sp_make(&s, tu_label_seed("v4_sas_edge_sink_inf"));
        const int64_t T = p->T, N = s.N, no = T * N * p->Dp;
        float *sk = p->sinks;
        uint16_t *out0 = tu_calloc((size_t)no + 1, 2);
        float *lse0 = tu_calloc((size_t)(T * N) + 1, 4);
        char mode_label[80], l[200];
        snprintf(mode_label, sizeof mode_label, "v4_sas_edge_sink_inf p_mode %d", (int)modes[mi]);
        for (int isa = -1; tu_next_tier(ctx, &isa, mode_label, l, sizeof l);) {
            p->args.sinks.data = NULL;
            dsops_status st = sp_run(p);
            memcpy(out0, guarded_view(&p->out), (size_t)no * 2);
            memcpy(lse0, guarded_view(&p->lse), (size_t)(T * N) * 4);
            p->args.sinks.data = sk;
            const float kinds[3] = {INFINITY, -INFINITY, 0.0f};
            for (int k = 0; k < 3; k++) {
                for (int64_t h = 0; h < N; h++)
                    sk[h] = k < 2 ? kinds[k] : (float)(h % 3) - 1.0f;
                dsops_status st2 = sp_run(p);
                const uint16_t *o = guarded_view(&p->out);
                size_t nz = 0;
                if (k == 0) {
                    for (int64_t i = 0; i < no; i++)
                        nz += i % p->Dp < s.D && (o[i] & 0x7fffu) != 0;
                }
                tu_check(st == DSOPS_OK && st2 == DSOPS_OK &&
                             memcmp(lse0, guarded_view(&p->lse), (size_t)(T * N) * 4) == 0 && nz == 0 &&
                             (k != 1 || memcmp(out0, o, (size_t)no * 2) == 0),
                         "%s: sinks %s: status %s, lse %s the no-sink lse, %zu nonzero out values%s", l,
                         k == 0 ? "+Inf" : (k == 1 ? "-Inf" : "{-1, 0, 1}"), dsops_status_name(st2),
                         memcmp(lse0, guarded_view(&p->lse), (size_t)(T * N) * 4) == 0 ? "equals" : "differs from",
                         nz, k == 1 && memcmp(out0, o, (size_t)no * 2) != 0 ? ", out differs from the no-sink out" : "");
            }
        }
        dsops_context_set_isa(ctx, dsops_isa_detected());
        free(out0), free(lse0);
        sp_free(p);
    }
}

/* ---- the poisoned-row rule (spec §2.10 A3) ------------------------------------------------------------------- */

/* One token, a window of three keys (1, 0.5), (0.5, 1), (2, -1), softmax_scale 1, eight heads:
 *   h0 q (1, 0): an ordinary row;          h1 q (NaN, 0): every logit NaN;
 *   h2 q (+Inf, 0): every logit +Inf;      h3 q (-Inf, 0): every logit -Inf;
 *   h4-h6 q (0, 1) with sinks NaN, +Inf, -Inf: logits 0.5, 1, -1;
 *   h7 q (-2^127, 0): logits -2^127, -2^126 and -Inf (overflow), so the row is exactly key 1: out (0.5, 1),
 *      lse -2^126, in any summation order and with any exp.
 * Checked on the oracle and on every tier, in every p_mode. */
static void nan_rule_by_hand_check(const char *l, const uint16_t *out, const float *lse, const uint16_t *out_nosink)
{
    int nan_rows = 1;
    for (int h = 1; h <= 3; h++)
        nan_rows &= isnan(tu_f32(out[2 * h])) && isnan(tu_f32(out[2 * h + 1])) && isnan(lse[h]);
    tu_check(nan_rows, "%s: NaN, +Inf and all -Inf logits do not give NaN out and lse", l);
    tu_check(isfinite(tu_f32(out[0])) && isfinite(tu_f32(out[1])) && isfinite(lse[0]), "%s: an ordinary row is not finite",
             l);
    const float lse_q01 = 1.0f + logf(expf(-0.5f) + 1.0f + expf(-2.0f));
    int lse_ok = 1;
    for (int h = 4; h <= 6; h++)
        lse_ok &= isfinite(lse[h]) && fabsf(lse[h] - lse_q01) <= 1e-6f;
    tu_check(lse_ok, "%s: lse of the sink rows %.9g %.9g %.9g, expected %.9g (the sink never enters lse)", l,
             (double)lse[4], (double)lse[5], (double)lse[6], (double)lse_q01);
    tu_check(isnan(tu_f32(out[8])) && isnan(tu_f32(out[9])), "%s: a NaN sink does not make out NaN", l);
    tu_check(out[10] == 0 && out[11] == 0, "%s: a +Inf sink gives out %#x %#x, expected +0", l, out[10], out[11]);
    tu_check(!out_nosink || (out[12] == out_nosink[12] && out[13] == out_nosink[13]),
             "%s: a -Inf sink changes out", l);
    tu_check(out[14] == tu_bf16(0.5f) && out[15] == tu_bf16(1.0f) && lse[7] == -0x1p126f,
             "%s: -Inf logits among finite ones: out (%g, %g) lse %.9g, expected (0.5, 1) %.9g", l,
             (double)tu_f32(out[14]), (double)tu_f32(out[15]), (double)lse[7], (double)-0x1p126f);
}

static void test_nan_rule_by_hand(void)
{
    if (!tu_selected("nan_rule by hand"))
        return;
    enum { H = 8 };
    const float qv[H][2] = {{1, 0}, {NAN, 0}, {INFINITY, 0}, {-INFINITY, 0}, {0, 1}, {0, 1}, {0, 1}, {-0x1p127f, 0}};
    uint16_t q[2 * H], pool[6] = {tu_bf16(1), tu_bf16(0.5f), tu_bf16(0.5f), tu_bf16(1), tu_bf16(2), tu_bf16(-1)};
    for (int h = 0; h < H; h++)
        q[2 * h] = tu_bf16(qv[h][0]), q[2 * h + 1] = tu_bf16(qv[h][1]);
    float sinks[H] = {0, 0, 0, 0, NAN, INFINITY, -INFINITY, -INFINITY};
    int32_t cu[2] = {0, 1}, used[1] = {3}, bt[1] = {0};
    uint16_t out[2 * H], out_nosink[2 * H];
    float lse[H];
    dsops_sas_args a;
    memset(&a, 0, sizeof a);
    a.q = dsops_tensor_make(q, DSOPS_BF16, 3, (int64_t[]){1, H, 2});
    a.cu_seqlens_q = dsops_tensor_make(cu, DSOPS_INT32, 1, (int64_t[]){2});
    a.seqused_kv = dsops_tensor_make(used, DSOPS_INT32, 1, (int64_t[]){1});
    a.ori_kv = dsops_tensor_make(pool, DSOPS_BF16, 3, (int64_t[]){1, 3, 2});
    a.ori_block_table = dsops_tensor_make(bt, DSOPS_INT32, 2, (int64_t[]){1, 1});
    a.out = dsops_tensor_make(out, DSOPS_BF16, 3, (int64_t[]){1, H, 2});
    a.lse = dsops_tensor_make(lse, DSOPS_FP32, 2, (int64_t[]){1, H});
    a.softmax_scale = 1.0f, a.win_size = 3, a.cmp_mode = DSOPS_CMP_NONE, a.cmp_ratio = 1;
    for (int mode = 0; mode < 3; mode++) {
        a.p_mode = (dsops_p_mode)mode, a.p_tile = 1;
        char l[120];
        /* the oracle first, without and with sinks */
        a.sinks = (dsops_tensor){0};
        dsops_ref_sas(&a);
        memcpy(out_nosink, out, sizeof out);
        a.sinks = dsops_tensor_make(sinks, DSOPS_FP32, 1, (int64_t[]){H});
        dsops_ref_sas(&a);
        snprintf(l, sizeof l, "nan_rule by hand p_mode %d [oracle]", mode);
        nan_rule_by_hand_check(l, out, lse, out_nosink);
        char mode_label[80];
        snprintf(mode_label, sizeof mode_label, "nan_rule by hand p_mode %d", mode);
        for (int isa = -1; tu_next_tier(ctx, &isa, mode_label, l, sizeof l);) {
            a.sinks = (dsops_tensor){0};
            dsops_status st = dsops_sas(ctx, &a);
            memcpy(out_nosink, out, sizeof out);
            a.sinks = dsops_tensor_make(sinks, DSOPS_FP32, 1, (int64_t[]){H});
            dsops_status st2 = dsops_sas(ctx, &a);
            if (!tu_check(st == DSOPS_OK && st2 == DSOPS_OK, "%s: status %s / %s", l, dsops_status_name(st),
                          dsops_status_name(st2)))
                continue;
            nan_rule_by_hand_check(l, out, lse, out_nosink);
        }
    }
    dsops_context_set_isa(ctx, dsops_isa_detected());
}

/* Every pool element holding the bits `from` (the NaN of the rows nobody reads) becomes `to`. */
static void pool_replace(sp_problem *p, uint16_t from, uint16_t to)
{
    uint16_t *pools[2] = {p->ori, p->cmp};
    const int64_t n[2] = {p->NBW * p->s.BSW * p->Dp, p->NBC * p->s.BSC * p->Dp};
    for (int k = 0; k < 2; k++)
        for (int64_t i = 0; pools[k] && i < n[k]; i++)
            if (pools[k][i] == from)
                pools[k][i] = to;
}

/* 1 if row (t, h) of p's output is NaN throughout (want 1), finite (0) or lonely (2). */
static int sas_row_is(const sp_problem *p, int64_t t, int64_t h, int want)
{
    const uint16_t *o = (const uint16_t *)guarded_view(&p->out) + (t * p->s.N + h) * p->Dp;
    const float l = ((const float *)guarded_view(&p->lse))[t * p->s.N + h];
    int ok = want == 1 ? isnan(l) : (want == 2 ? isinf(l) && l > 0 : isfinite(l));
    for (int64_t d = 0; d < p->s.D; d++)
        ok &= want == 1 ? isnan(tu_f32(o[d])) : (want == 2 ? o[d] == 0 : isfinite(tu_f32(o[d])));
    return ok;
}

/* The rows of test_nan_rule stated without the oracle: token 0 (heads 0-2 NaN, head 3 finite), the first
 * token of the last sequence (no keys: lonely) and the last token of the sequence before it (a NaN key). */
static void nan_rule_rows_check(const char *l, const sp_problem *p)
{
    const int64_t lonely_t = p->cu[p->B - 1], key_t = lonely_t - 1;
    int lonely_ok = 1, key_ok = 1;
    for (int h = 0; h < p->s.N; h++) {
        lonely_ok &= sas_row_is(p, lonely_t, h, 2);
        key_ok &= sas_row_is(p, key_t, h, 1);
    }
    tu_check(sas_row_is(p, 0, 0, 1) && sas_row_is(p, 0, 1, 1) && sas_row_is(p, 0, 2, 1) && sas_row_is(p, 0, 3, 0),
             "%s: token 0: NaN / +Inf / -Inf query rows not NaN, or the clean head not finite", l);
    tu_check(lonely_ok, "%s: token %lld without keys is not out +0 / lse +Inf", l, (long long)lonely_t);
    tu_check(key_ok, "%s: token %lld attends to a NaN key but is not NaN", l, (long long)key_t);
}

/* swa / cfa / scfa problems plus one sequence whose first token sees no key (L 0). Token 0: head 0 a NaN
 * query element, head 1 +Inf, head 2 -Inf (NaN rows whatever the keys), head 3 untouched; the token without
 * keys has NaN queries; the newest window row of the last sequence gets a NaN value, so every head of that
 * sequence's last token (the only one whose window holds it) is NaN. The oracle runs with ordinary values in the
 * rows nobody reads; the operator with NaN, +Inf and -Inf there. */
static void test_nan_rule(void)
{
    static const struct {
        dsops_p_mode m;
        int tile;
    } modes[] = {{DSOPS_P_NORMALISED, 0}, {DSOPS_P_FP32, 0}, {DSOPS_P_TILED, 1}, {DSOPS_P_TILED, 5}};
    static const char *variants[3] = {"swa", "cfa", "scfa"};
    for (int v = 0; v < 3; v++)
        for (int m = 0; m < 4; m++) {
            char label[120];
            snprintf(label, sizeof label, "nan_rule %s p_mode %d tile %d", variants[v], (int)modes[m].m, modes[m].tile);
            if (!tu_selected(label))
                continue;
            sp_spec s = v == 0 ? swa_spec() : (v == 1 ? cfa_spec() : scfa_spec());
            s.N = 4;
            s.p_mode = modes[m].m;
            s.p_tile = modes[m].tile ? modes[m].tile : 128;
            if (v == 1)
                s.cmp_ratio = 4; /* several dense entries per token */
            const int lonely_b = s.B++;
            s.S[lonely_b] = 2, s.seqused[lonely_b] = 1; /* its token 0 has L = 0 */
            sp_problem *p = sp_make(&s, tu_label_seed(label));
            const int64_t lonely_t = p->cu[lonely_b], key_b = lonely_b - 1, key_t = p->cu[key_b + 1] - 1;
            const int64_t Dp = p->Dp;
            p->q[(0 * s.N + 0) * Dp + 1] = tu_bf16(NAN);
            p->q[(0 * s.N + 1) * Dp + 0] = tu_bf16(INFINITY);
            p->q[(0 * s.N + 2) * Dp + s.D - 1] = tu_bf16(-INFINITY);
            for (int h = 0; h < s.N; h++)
                p->q[(lonely_t * s.N + h) * Dp] = tu_bf16(NAN);
            const int64_t pos = token_L(p, key_b, key_t) - 1;
            const int64_t key_row = (int64_t)p->ori_bt[key_b * p->MBW + pos / s.BSW] * s.BSW + pos % s.BSW;
            p->ori[key_row * Dp] = 0xffc1; /* a NaN whose bits differ from the unread rows' */
            const uint16_t clean = 0x4040; /* 3.0: no read row holds it (they hold U(-1, 1)) */
            pool_replace(p, NAN_BF16, clean);
            sp_reference(p);
            const uint16_t fills[3] = {NAN_BF16, 0x7f80, 0xff80}; /* NaN, +Inf, -Inf */
            const char *fill_names[3] = {"NaN", "+Inf", "-Inf"};
            uint16_t current = clean;
            for (int f = 0; f < 3; f++) {
                pool_replace(p, current, fills[f]);
                current = fills[f];
                char fill_label[200];
                snprintf(fill_label, sizeof fill_label, "%s, unread rows %s", label, fill_names[f]);
                sp_check_tiers(fill_label, p, nan_rule_rows_check);
            }
            sp_free(p);
        }
    dsops_context_set_isa(ctx, dsops_isa_detected());
}

/* ---- determinism ---------------------------------------------------------------------------------------- */

/* The call's out and lse buffers, guards included, for rc_check_threads. */
static unsigned char *sp_run_gather(void *problem, size_t *n, dsops_status *st)
{
    sp_problem *p = problem;
    *st = sp_run(p);
    if (*st != DSOPS_OK)
        return NULL;
    const size_t no = (p->out.n + 2) * 2, nl = (p->lse.n + 2) * 4;
    unsigned char *bytes = tu_calloc(no + nl, 1);
    memcpy(bytes, p->out.buf, no), memcpy(bytes + no, p->lse.buf, nl);
    *n = no + nl;
    return bytes;
}

static void test_determinism(void)
{
    if (!tu_selected("determinism"))
        return;
    /* many tokens; and one or two tokens with many heads, where threads may share a token's heads */
    sp_spec specs[4];
    const char *names[4] = {"scfa", "cfa", "scfa T 1 N 20", "cfa T 2 N 33"};
    specs[0] = scfa_spec();
    specs[0].N = 16, specs[0].D = 128, specs[0].K = 48;
    specs[1] = cfa_spec();
    specs[1].N = 9, specs[1].cmp_ratio = 4, specs[1].p_tile = 16;
    specs[2] = scfa_spec();
    specs[2].B = 1, specs[2].S[0] = 1, specs[2].seqused[0] = 1001, specs[2].N = 20;
    specs[3] = cfa_spec();
    specs[3].B = 2, specs[3].S[0] = specs[3].S[1] = 1, specs[3].seqused[0] = 700, specs[3].seqused[1] = 300;
    specs[3].N = 33, specs[3].cmp_ratio = 8, specs[3].p_tile = 7;
    const dsops_isa tiers[2] = {DSOPS_ISA_SCALAR, dsops_isa_detected()};
    for (int k = 0; k < 4; k++) {
        char name[80];
        snprintf(name, sizeof name, "determinism %s", names[k]);
        sp_problem *p = sp_make(&specs[k], tu_label_seed(name));
        for (int ti = 0; ti < 2; ti++) {
            dsops_context_set_isa(ctx, tiers[ti]);
            char l[120];
            snprintf(l, sizeof l, "%s [%s]", name, dsops_isa_name(tiers[ti]));
            rc_check_threads(ctx, l, sp_run_gather, p);
        }
        sp_free(p);
    }
    dsops_context_set_isa(ctx, dsops_isa_detected());
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, 42);
    ctx = tu_context();
    rc_set_threads(ctx, 2);
    test_oracle_by_hand();
    test_adversarial();
    test_edges();
    test_nan_rule_by_hand();
    test_nan_rule();
    test_determinism();
    dsops_context_destroy(ctx);
    return tu_finish();
}
