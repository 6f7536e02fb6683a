/* Reference oracle of sas, the DeepSeek-V4 shared-KV sparse attention (docs/OPERATORS.md §3.7; attention core
 * §2.10 with the sink; token layout §1.4).
 *
 * Per token t (sequence b, L = L_t), literally:
 *   1. the key list E: the window positions L-w ... L-1 of ori_kv (oldest first), then the compressed
 *      entries (dense: 0 ... n_cmp(L)-1; sparse: the used indices among the first cnt of cmp_indices[t],
 *      duplicates as often as they occur), gathered as fp32 copies of their bf16 values;
 *   2. per head: s_e = fp32(dot(q, K_e) * softmax_scale), the dot summed over d = 0, 1, ... D-1;
 *   3. the probability mode of §2.10 (A4 normalised, A5 tiled, A6 fp32) with the sink in the
 *      denominator only; tiled: the window is tile 1, the compressed entries follow in tiles of p_tile;
 *   4. out = bf16(...), lse = m + ln(l) (sink excluded); an empty list gives out = +0 and lse = +Inf, and
 *      logits that poison the row (A3: a NaN, a +Inf maximum, or every logit -Inf) give NaN throughout.
 *
 * Every fp32 sum starts at 0 and adds its terms in ascending order (built with -ffp-contract=off). The
 * only liberty taken is loop order: the score sums of all heads run side by side over d, and the P·V sums
 * of all output columns side by side over e; each individual sum keeps its ascending order. Tokens are
 * independent, so they are spread over OpenMP threads; no value depends on the thread that computes it.
 * Every tensor is read and written through its strides (in elements); pool rows outside the key list are
 * never read. */
#include <math.h>
#include <stdlib.h>

#include "ref.h"
#include "ref_util.h"

/* One entry of the key list: its pool row (physical block, row in the block). */
typedef struct sas_key {
    const dsops_tensor *pool; /* ori_kv or cmp_kv [NB, BS, D] bf16 (or MODEL1 FP8 blocks) */
    int64_t blk, row;
} sas_key;

/* Value d of a key's row. MODEL1 FP8 blocks (§2.12; pool [NB, BS, 584] uint8, stride[0] the block's bytes):
 * row r's 448 e4m3 values and 64 bf16 rope values at byte 576 r of its block, its 7 ue8m0 scales at byte
 * 576 BS + 8 r; value d < 448 is bf16(e4m3 * 2^(scale byte of tile d / 64 - 127)), 0xff meaning NaN. */
static float key_value(const dsops_sas_args *a, const sas_key *k, int64_t d)
{
    if (a->pool_layout == DSOPS_SAS_POOL_BF16)
        return ref_get_f(k->pool, k->blk, k->row, d);
    const uint8_t *block = (const uint8_t *)k->pool->data + k->blk * k->pool->stride[0];
    const uint8_t *row = block + 576 * k->row;
    if (d >= 448)
        return dsops_ref_f32_from_bf16((uint16_t)(row[448 + 2 * (d - 448)] | (row[449 + 2 * (d - 448)] << 8)));
    const uint8_t e = block[576 * k->pool->shape[1] + 8 * k->row + d / 64];
    const float v = dsops_ref_f32_from_e4m3(row[d]);
    const float s = dsops_ref_f32_from_ue8m0(e);
    return ref_round_bf16(isnan(v) ? v : v * s);
}

/* The window count w and the compressed count n_cmp(L) of §3.7 for a token that sees L positions. */
static int64_t window_len(const dsops_sas_args *a, int64_t L)
{
    int64_t w = L > 0 ? L : 0;
    return w < a->win_size ? w : a->win_size;
}

static int64_t cmp_visible(const dsops_sas_args *a, int64_t L) { return (L > 0 ? L : 0) / a->cmp_ratio; }

/* Step 1 of §3.7 for token t of sequence b: fills keys (room for max_keys) and returns n; *w receives the
 * window part (the first *w entries). */
static int64_t key_list(const dsops_sas_args *a, int64_t b, int64_t t, int64_t L, int64_t used_kv, sas_key *keys,
                        int64_t *w)
{
    int64_t n = 0;

    /* window: positions L-w ... L-1, oldest first; slot via ori_block_table [B, MBW] */
    *w = window_len(a, L);
    if (*w > 0) {
        const int64_t BSW = a->ori_kv.shape[1];
        for (int64_t pos = L - *w; pos < L; pos++) {
            keys[n].pool = &a->ori_kv;
            keys[n].blk = ref_get_i32(&a->ori_block_table, b, pos / BSW, 0);
            keys[n].row = pos % BSW;
            n++;
        }
    }

    if (a->cmp_mode == DSOPS_CMP_NONE)
        return n;
    const int64_t BSC = a->cmp_kv.shape[1];                  /* cmp_kv [NBC, BSC, D] */
    const int64_t ncmp = cmp_visible(a, L);
    if (a->cmp_mode == DSOPS_CMP_DENSE) {
        for (int64_t idx = 0; idx < ncmp; idx++) {
            keys[n].pool = &a->cmp_kv;
            keys[n].blk = ref_get_i32(&a->cmp_block_table, b, idx / BSC, 0); /* cmp_block_table [B, MBC] */
            keys[n].row = idx % BSC;
            n++;
        }
        return n;
    }

    /* sparse: cnt = min(K, n_cmp(L), cmp_topk_length[t] if given); an index is used iff 0 <= idx < NC_b,
     * where NC_b counts the entries of the whole sequence (not only those causal for t) */
    const int64_t K = a->cmp_indices.shape[1];               /* cmp_indices [T, K] */
    const int64_t NC = used_kv / a->cmp_ratio;
    int64_t cnt = ncmp < K ? ncmp : K;
    if (a->cmp_topk_length.data) {                           /* cmp_topk_length [T] */
        int64_t len = ref_get_i32(&a->cmp_topk_length, t, 0, 0);
        if (len < cnt)
            cnt = len;
    }
    for (int64_t j = 0; j < cnt; j++) {
        int64_t idx = ref_get_i32(&a->cmp_indices, t, j, 0);
        if (idx < 0 || idx >= NC)
            continue;                                        /* skipped, never dereferenced */
        keys[n].pool = &a->cmp_kv;
        keys[n].blk = ref_get_i32(&a->cmp_block_table, b, idx / BSC, 0);
        keys[n].row = idx % BSC;
        n++;
    }
    return n;
}

/* The longest key list of any token: sizes the per-token scratch. */
static int64_t max_keys(const dsops_sas_args *a, int64_t B)
{
    int64_t most = 0;
    for (int64_t b = 0; b < B; b++) {
        const int64_t t0 = ref_get_i32(&a->cu_seqlens_q, b, 0, 0), t1 = ref_get_i32(&a->cu_seqlens_q, b + 1, 0, 0);
        const int64_t used_kv = ref_get_i32(&a->seqused_kv, b, 0, 0);
        for (int64_t t = t0; t < t1; t++) {
            const int64_t L = used_kv - (t1 - 1 - t);
            int64_t n = window_len(a, L);
            if (a->cmp_mode == DSOPS_CMP_DENSE)
                n += cmp_visible(a, L);
            else if (a->cmp_mode == DSOPS_CMP_SPARSE)
                n += a->cmp_indices.shape[1];
            if (n > most)
                most = n;
        }
    }
    return most;
}

/* Scratch of one thread, sized for n_max keys. */
typedef struct sas_scratch {
    sas_key *keys; /* [n_max] the key list */
    float *kv;     /* [n_max, D] gathered keys (= values), fp32 copies of bf16 */
    float *qT;     /* [D, N] the token's queries, transposed */
    float *acc;    /* [N] running dot products */
    float *s;      /* [N, n_max] scores */
    float *w;      /* [n_max] un-normalised weights of one head */
    float *O;      /* [D] output accumulator of one head */
    float *Ot;     /* [D] one tile's contribution (tiled) */
} sas_scratch;

/* A4 / A6 for one head whose row is not poisoned (its maximum is finite): writes O (the final fp32 values
 * before the output rounding) and returns m and l through the pointers. */
static void head_normalised(const dsops_sas_args *a, const float *sh, int64_t n, int64_t D, int has_sink, float sink,
                            sas_scratch *sc, float *m_out, float *l_out)
{
    float m = -INFINITY, l = 0.0f;
    for (int64_t e = 0; e < n; e++)                          /* A3: the sink never enters the max */
        if (sh[e] > m)
            m = sh[e];
    for (int64_t e = 0; e < n; e++) {
        sc->w[e] = expf(sh[e] - m);
        l += sc->w[e];
    }
    const float den = l + (has_sink ? expf(sink - m) : 0.0f);
    for (int64_t e = 0; e < n; e++) {
        float P = sc->w[e] / den;
        sc->w[e] = a->p_mode == DSOPS_P_FP32 ? P : ref_round_bf16(P); /* A6 keeps fp32, A4 rounds */
    }
    for (int64_t d = 0; d < D; d++)
        sc->O[d] = 0.0f;
    for (int64_t e = 0; e < n; e++) {
        const float P = sc->w[e], *v = sc->kv + e * D;
        for (int64_t d = 0; d < D; d++)
            sc->O[d] += P * v[d];
    }
    *m_out = m;
    *l_out = l;
}

/* A5 for one head whose row is not poisoned. Tile boundaries: [0, w) is tile 1 when w > 0, then p_tile entries at a time. A tile met
 * while the running maximum is still -Inf contributes nothing (all its weights would be exp(-Inf) = 0). */
static void head_tiled(const dsops_sas_args *a, const float *sh, int64_t n, int64_t w, int64_t D, int has_sink,
                       float sink, sas_scratch *sc, float *m_out, float *l_out)
{
    float m = -INFINITY, l = 0.0f;
    int64_t e0 = 0;
    while (e0 < n) {
        int64_t e1 = (e0 == 0 && w > 0) ? w : e0 + a->p_tile;
        if (e1 > n)
            e1 = n;
        float mi = -INFINITY;
        for (int64_t e = e0; e < e1; e++)
            if (sh[e] > mi)
                mi = sh[e];
        const float mp = mi > m ? mi : m;
        if (mp != -INFINITY) {
            float tl = 0.0f;
            for (int64_t d = 0; d < D; d++)
                sc->Ot[d] = 0.0f;
            for (int64_t e = e0; e < e1; e++) {
                const float we = expf(sh[e] - mp);
                tl += we;                                    /* l uses the unrounded weight */
                const float pe = ref_round_bf16(we);         /* P·V uses bf16(w) */
                const float *v = sc->kv + e * D;
                for (int64_t d = 0; d < D; d++)
                    sc->Ot[d] += pe * v[d];
            }
            if (m == -INFINITY) {                            /* G_1 */
                l = tl;
                for (int64_t d = 0; d < D; d++)
                    sc->O[d] = sc->Ot[d];
            } else {                                         /* G_i, i > 1 */
                const float alpha = expf(m - mp);
                l = l * alpha + tl;
                for (int64_t d = 0; d < D; d++)
                    sc->O[d] = sc->O[d] * alpha + sc->Ot[d];
            }
            m = mp;
        }
        e0 = e1;
    }
    const float den = l + (has_sink ? expf(sink - m) : 0.0f);
    for (int64_t d = 0; d < D; d++)
        sc->O[d] = sc->O[d] / den;
    *m_out = m;
    *l_out = l;
}

/* Steps 1-3 for token t: out[t] [N, D] and lse[t] [N]. */
static void sas_token(const dsops_sas_args *a, int64_t b, int64_t t, int64_t L, int64_t used_kv, sas_scratch *sc)
{
    const int64_t N = a->q.shape[1], D = a->q.shape[2];     /* q [T, N, D] */
    const int has_sinks = a->sinks.data != NULL;             /* sinks [N] fp32 */

    int64_t w;
    const int64_t n = key_list(a, b, t, L, used_kv, sc->keys, &w);
    for (int64_t e = 0; e < n; e++)
        for (int64_t d = 0; d < D; d++)
            sc->kv[e * D + d] = key_value(a, &sc->keys[e], d);
    for (int64_t h = 0; h < N; h++)
        for (int64_t d = 0; d < D; d++)
            sc->qT[d * N + h] = ref_get_f(&a->q, t, h, d);

    /* A1: s_e = fp32(dot(q, K_e) * sigma), each dot over d = 0 ... D-1 */
    for (int64_t e = 0; e < n; e++) {
        const float *k = sc->kv + e * D;
        for (int64_t h = 0; h < N; h++)
            sc->acc[h] = 0.0f;
        for (int64_t d = 0; d < D; d++)
            for (int64_t h = 0; h < N; h++)
                sc->acc[h] += sc->qT[d * N + h] * k[d];
        for (int64_t h = 0; h < N; h++)
            sc->s[h * n + e] = sc->acc[h] * a->softmax_scale;
    }

    for (int64_t h = 0; h < N; h++) {
        const float sink = has_sinks ? ref_get_f(&a->sinks, h, 0, 0) : 0.0f;
        if (n == 0) {                                        /* A2: lonely, the sink plays no part */
            for (int64_t d = 0; d < D; d++)
                ref_put_bf16(&a->out, t, h, d, 0.0f);
            ref_attn_put_stats(&a->lse, &a->max_logits, t, h, INFINITY, -INFINITY);
            continue;
        }
        if (ref_attn_row_is_nan(sc->s + h * n, n)) {         /* A3: poisoned, NaN whatever the sink */
            for (int64_t d = 0; d < D; d++)
                ref_put_bf16(&a->out, t, h, d, NAN);
            ref_attn_put_stats(&a->lse, &a->max_logits, t, h, NAN, NAN);
            continue;
        }
        float m, l;
        if (a->p_mode == DSOPS_P_TILED)
            head_tiled(a, sc->s + h * n, n, w, D, has_sinks, sink, sc, &m, &l);
        else
            head_normalised(a, sc->s + h * n, n, D, has_sinks, sink, sc, &m, &l);
        for (int64_t d = 0; d < D; d++)                      /* out [T, N, D] bf16 */
            ref_put_bf16(&a->out, t, h, d, sc->O[d]);
        ref_attn_put_stats(&a->lse, &a->max_logits, t, h, m + logf(l), ref_row_max(sc->s + h * n, n)); /* A7 */
    }
}

void dsops_ref_sas(const dsops_sas_args *a)
{
    const int64_t T = a->q.shape[0], N = a->q.shape[1], D = a->q.shape[2]; /* q [T, N, D] */
    const int64_t B = a->seqused_kv.shape[0];                /* seqused_kv [B], cu_seqlens_q [B+1] */
    const int64_t most = max_keys(a, B), nmax = most > 0 ? most : 1;

    /* token -> sequence, so that tokens can be spread over threads */
    int64_t *seq_of = ref_alloc(sizeof(int64_t) * (size_t)(T > 0 ? T : 1)); /* [T] */
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = ref_get_i32(&a->cu_seqlens_q, b, 0, 0); t < ref_get_i32(&a->cu_seqlens_q, b + 1, 0, 0); t++)
            seq_of[t] = b;

#pragma omp parallel
    {
        sas_scratch sc;
        sc.keys = ref_alloc(sizeof(sas_key) * (size_t)nmax);
        sc.kv = ref_alloc(sizeof(float) * (size_t)(nmax * D));
        sc.qT = ref_alloc(sizeof(float) * (size_t)(D * N));
        sc.acc = ref_alloc(sizeof(float) * (size_t)N);
        sc.s = ref_alloc(sizeof(float) * (size_t)(N * nmax));
        sc.w = ref_alloc(sizeof(float) * (size_t)nmax);
        sc.O = ref_alloc(sizeof(float) * (size_t)D);
        sc.Ot = ref_alloc(sizeof(float) * (size_t)D);
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < T; t++) {
            const int64_t b = seq_of[t];
            const int64_t t1 = ref_get_i32(&a->cu_seqlens_q, b + 1, 0, 0);
            const int64_t used_kv = ref_get_i32(&a->seqused_kv, b, 0, 0);
            const int64_t L = used_kv - (t1 - 1 - t);       /* §1.4: S_b - 1 - i = t1 - 1 - t */
            sas_token(a, b, t, L, used_kv, &sc);
        }
        free(sc.keys), free(sc.kv), free(sc.qT), free(sc.acc);
        free(sc.s), free(sc.w), free(sc.O), free(sc.Ot);
    }
    free(seq_of);
}
