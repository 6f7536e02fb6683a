/* Reference oracle of sparse_flash_attention_v32 (docs/OPERATORS.md §4.4, attention core §2.10).
 *
 * Plain loops, one token at a time:
 *   1. find the used entries of the token's top-k row (spec §4.4 steps 1-2),
 *   2. gather and dequantise their keys into fp32 copies of bf16 values (step 3),
 *   3. per head, run the attention core (A1-A7) in the requested probability mode, with the head's sink when
 *      sinks is given: no used entry gives the lonely row (out +0, lse +Inf), logits that poison the row
 *      (A3) give NaN throughout.
 *
 * Every tensor is read through its strides (in elements), so strided views are handled. The only
 * liberty taken with loop order is in the score and P·V loops, which run several independent sums side
 * by side (over heads, over output columns); each individual sum is still accumulated in ascending
 * index order, exactly as the spec's reference prescribes. Built with -ffp-contract=off. */
#include <math.h>
#include <stdlib.h>

#include "ref.h"
#include "ref_util.h"

/* ---- number formats (spec §2.1) ---------------------------------------------------------------- */

uint16_t dsops_ref_bf16_from_f32(float f)
{
    uint32_t u = ref_bits_from_f32(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)          /* NaN: keep the sign and payload top bits, set quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    uint32_t lsb = (u >> 16) & 1u;                /* ties go to the even result */
    u += 0x7fffu + lsb;                           /* overflow carries into the exponent: gives +-Inf */
    return (uint16_t)(u >> 16);
}

float dsops_ref_f32_from_bf16(uint16_t h) { return ref_f32_from_bits((uint32_t)h << 16); }

/* Little-endian multi-byte fields of a packed_int8 row, byte by byte through the byte stride. */
static uint16_t packed_u16(const dsops_tensor *kv, int64_t blk, int64_t off, int64_t byte)
{
    return (uint16_t)(ref_get_u8(kv, blk, off, byte) | (ref_get_u8(kv, blk, off, byte + 1) << 8));
}

static float packed_f32(const dsops_tensor *kv, int64_t blk, int64_t off, int64_t byte)
{
    uint32_t u = 0;
    for (int k = 3; k >= 0; k--)
        u = (u << 8) | ref_get_u8(kv, blk, off, byte + k);
    return ref_f32_from_bits(u);
}

#define PACKED_NOPE_BYTE 0    /* 512 int8 latent values */
#define PACKED_ROPE_BYTE 512  /* 64 bf16 rope values */
#define PACKED_SCALE_BYTE 640 /* 4 fp32 scales, one per 128 latent values */
#define FP8_SCALE_BYTE 512    /* FlashMLA's FP8 row (§2.12): 512 e4m3 values, then 4 fp32 scales, */
#define FP8_ROPE_BYTE 528     /* then 64 bf16 rope values */

/* Step 3 of §4.4: the key of cache row (blk, off) as fp32 copies of bf16 values.
 * key: [Dc + Dr]; key[0 : Dc] is also the value V. */
static void load_key(const dsops_sparse_flash_attention_v32_args *a, int64_t Dc, int64_t Dr, int64_t blk,
                     int64_t off, float *key)
{
    switch (a->kv_layout) {
    case DSOPS_KV_SPLIT_BF16:
        for (int64_t c = 0; c < Dc; c++)
            key[c] = ref_get_f(&a->key_nope, blk, off, c);                /* key_nope [NB, BS, Dc] bf16 */
        for (int64_t c = 0; c < Dr; c++)
            key[Dc + c] = ref_get_f(&a->key_rope, blk, off, c);           /* key_rope [NB, BS, Dr] bf16 */
        break;
    case DSOPS_KV_SPLIT_INT8:
        for (int64_t c = 0; c < Dc; c++) {
            float q = (float)ref_get_i8(&a->key_nope, blk, off, c);       /* key_nope [NB, BS, Dc] int8 */
            float s = ref_get_f(&a->key_nope_scale, blk, off, c / 128);   /* key_nope_scale [NB, BS, Dc/128] */
            key[c] = ref_round_bf16(q * s);
        }
        for (int64_t c = 0; c < Dr; c++)
            key[Dc + c] = ref_get_f(&a->key_rope, blk, off, c);           /* key_rope [NB, BS, Dr] bf16 */
        break;
    case DSOPS_KV_PACKED_INT8:                                              /* kv_packed [NB, BS, 656] uint8 */
        for (int64_t c = 0; c < Dc; c++) {
            float q = (float)(int8_t)ref_get_u8(&a->kv_packed, blk, off, PACKED_NOPE_BYTE + c);
            float s = packed_f32(&a->kv_packed, blk, off, PACKED_SCALE_BYTE + 4 * (c / 128));
            key[c] = ref_round_bf16(q * s);
        }
        for (int64_t c = 0; c < Dr; c++)
            key[Dc + c] = dsops_ref_f32_from_bf16(packed_u16(&a->kv_packed, blk, off, PACKED_ROPE_BYTE + 2 * c));
        break;
    case DSOPS_KV_FLASHMLA_FP8:                                           /* kv_packed [NB, BS, 656] uint8 */
        for (int64_t c = 0; c < Dc; c++) {
            float v = dsops_ref_f32_from_e4m3(ref_get_u8(&a->kv_packed, blk, off, c));
            float s = packed_f32(&a->kv_packed, blk, off, FP8_SCALE_BYTE + 4 * (c / 128));
            key[c] = ref_round_bf16(isnan(v) ? v : v * s);
        }
        for (int64_t c = 0; c < Dr; c++)
            key[Dc + c] = dsops_ref_f32_from_bf16(packed_u16(&a->kv_packed, blk, off, FP8_ROPE_BYTE + 2 * c));
        break;
    }
}

/* ---- the operator ----------------------------------------------------------------------------- */

/* The sink's weight exp(sinks[h] - m) in the denominator (A4, A5); 0 without sinks. */
static float sink_term(const dsops_sparse_flash_attention_v32_args *a, int64_t h, float m)
{
    return a->sinks.data ? expf(ref_get_f(&a->sinks, h, 0, 0) - m) : 0.0f; /* sinks [N] fp32 */
}

void dsops_ref_sparse_flash_attention_v32(const dsops_sparse_flash_attention_v32_args *a)
{
    const int64_t N = a->q_nope.shape[1];                 /* q_nope [T, N, Dc] */
    const int64_t Dc = a->q_nope.shape[2];
    const int64_t Dr = a->q_rope.shape[2];                /* q_rope [T, N, Dr] */
    const int64_t Dqk = Dc + Dr;
    const int64_t K = a->topk_indices.shape[1];           /* topk_indices [T, K] */
    const int64_t B = a->seqused_kv.shape[0];             /* seqused_kv [B], cu_seqlens_q [B+1] */
    const int64_t BS = a->kv_layout == DSOPS_KV_PACKED_INT8 || a->kv_layout == DSOPS_KV_FLASHMLA_FP8 ? a->kv_packed.shape[1]
                                                                                           : a->key_nope.shape[1];
    const float sigma = a->softmax_scale;
    const int has_len = a->topk_length.data != NULL;      /* topk_length [T] (optional) */
    const int64_t tile = a->p_tile >= 1 ? a->p_tile : 1;

    float *keys = ref_alloc(sizeof(float) * (size_t)(K * Dqk)); /* [n, Dqk] gathered keys of one token */
    float *qT = ref_alloc(sizeof(float) * (size_t)(Dqk * N));   /* [Dqk, N] the token's queries, transposed */
    float *s = ref_alloc(sizeof(float) * (size_t)(N * K));      /* [N, n] scores of one token */
    float *acc = ref_alloc(sizeof(float) * (size_t)N);          /* [N] running dot products */
    float *w = ref_alloc(sizeof(float) * (size_t)K);            /* [n] weights of one head */
    float *P = ref_alloc(sizeof(float) * (size_t)K);            /* [n] probabilities of one head */
    float *O = ref_alloc(sizeof(float) * (size_t)Dc);           /* [Dc] accumulated output of one head */
    float *Ot = ref_alloc(sizeof(float) * (size_t)Dc);          /* [Dc] one tile's contribution (tiled) */

    for (int64_t b = 0; b < B; b++) {
        const int64_t t0 = ref_get_i32(&a->cu_seqlens_q, b, 0, 0);
        const int64_t t1 = ref_get_i32(&a->cu_seqlens_q, b + 1, 0, 0);
        const int64_t S_b = t1 - t0;
        const int64_t used_kv = ref_get_i32(&a->seqused_kv, b, 0, 0);
        for (int64_t t = t0; t < t1; t++) {
            const int64_t i = t - t0;
            const int64_t L = used_kv - (S_b - 1 - i);    /* §1.4: original tokens visible to t */

            /* §4.4 step 1: how many entries of the row are looked at */
            int64_t cnt = L > 0 ? L : 0;
            if (cnt > K)
                cnt = K;
            if (has_len) {
                int64_t len = ref_get_i32(&a->topk_length, t, 0, 0);
                if (len < cnt)
                    cnt = len;
            }

            /* steps 2-3: used entries, in row order, duplicates as often as they occur */
            int64_t n = 0;
            for (int64_t j = 0; j < cnt; j++) {
                int64_t idx = ref_get_i32(&a->topk_indices, t, j, 0);
                if (idx < 0 || idx >= used_kv)
                    continue;                             /* skipped, never an error */
                int64_t blk = ref_get_i32(&a->block_table, b, idx / BS, 0); /* block_table [B, MB] */
                load_key(a, Dc, Dr, blk, idx % BS, keys + n * Dqk);
                n++;
            }

            /* q = [q_nope[t, h] ; q_rope[t, h]], kept transposed so that one pass over a key serves all
             * heads */
            for (int64_t h = 0; h < N; h++) {
                for (int64_t c = 0; c < Dc; c++)
                    qT[c * N + h] = ref_get_f(&a->q_nope, t, h, c);
                for (int64_t c = 0; c < Dr; c++)
                    qT[(Dc + c) * N + h] = ref_get_f(&a->q_rope, t, h, c);
            }

            /* A1: s_e = fp32(dot(q, K_e) * sigma), each dot summed over k = 0, 1, ... Dqk-1 */
            for (int64_t e = 0; e < n; e++) {
                const float *key = keys + e * Dqk;
                for (int64_t h = 0; h < N; h++)
                    acc[h] = 0.0f;
                for (int64_t k = 0; k < Dqk; k++)
                    for (int64_t h = 0; h < N; h++)
                        acc[h] += qT[k * N + h] * key[k];
                for (int64_t h = 0; h < N; h++)
                    s[h * K + e] = acc[h] * sigma;
            }

            for (int64_t h = 0; h < N; h++) {
                const float *sh = s + h * K;

                /* out [T, N, Dc] bf16; lse, max_logits [T, N] fp32 */
                if (n == 0) {                            /* A2: lonely query */
                    for (int64_t d = 0; d < Dc; d++)
                        ref_put_bf16(&a->out, t, h, d, 0.0f);
                    ref_attn_put_stats(&a->lse, &a->max_logits, t, h, INFINITY, -INFINITY);
                    continue;
                }
                if (ref_attn_row_is_nan(sh, n)) {        /* A3: a poisoned row is NaN throughout */
                    for (int64_t d = 0; d < Dc; d++)
                        ref_put_bf16(&a->out, t, h, d, NAN);
                    ref_attn_put_stats(&a->lse, &a->max_logits, t, h, NAN, NAN);
                    continue;
                }

                /* from here every logit is a number or -Inf and the maximum is finite */
                float m = -INFINITY;
                float l = 0.0f, den;                     /* den: l plus the sink's weight (A4, A5) */
                if (a->p_mode == DSOPS_P_TILED) {
                    /* A5: tiles are consecutive groups of `tile` used entries in row order. A tile met
                     * while the running max is still -Inf contributes nothing. */
                    for (int64_t e0 = 0; e0 < n; e0 += tile) {
                        int64_t e1 = e0 + tile < n ? e0 + tile : n;
                        float mi = -INFINITY;
                        for (int64_t e = e0; e < e1; e++)
                            if (sh[e] > mi)
                                mi = sh[e];
                        float mp = mi > m ? mi : m;
                        if (mp == -INFINITY)
                            continue;
                        float tl = 0.0f;
                        for (int64_t d = 0; d < Dc; d++)
                            Ot[d] = 0.0f;
                        for (int64_t e = e0; e < e1; e++) {
                            float we = expf(sh[e] - mp);
                            tl += we;
                            float pe = ref_round_bf16(we); /* un-normalised weight rounded before P·V */
                            const float *v = keys + e * Dqk;
                            for (int64_t d = 0; d < Dc; d++)
                                Ot[d] += pe * v[d];
                        }
                        if (m == -INFINITY) {            /* first tile that counts: G_1 */
                            l = tl;
                            for (int64_t d = 0; d < Dc; d++)
                                O[d] = Ot[d];
                        } else {                         /* G_i, i > 1 */
                            float alpha = expf(m - mp);
                            l = l * alpha + tl;
                            for (int64_t d = 0; d < Dc; d++)
                                O[d] = O[d] * alpha + Ot[d];
                        }
                        m = mp;
                    }
                    den = l + sink_term(a, h, m);
                } else {
                    /* A3: the maximum over all entries */
                    for (int64_t e = 0; e < n; e++)
                        if (sh[e] > m)
                            m = sh[e];
                    /* A4 / A6: full softmax of the row, then P·V */
                    for (int64_t e = 0; e < n; e++) {
                        w[e] = expf(sh[e] - m);
                        l += w[e];
                    }
                    den = l + sink_term(a, h, m);
                    for (int64_t e = 0; e < n; e++)
                        P[e] = a->p_mode == DSOPS_P_FP32 ? w[e] / den : ref_round_bf16(w[e] / den);
                    for (int64_t d = 0; d < Dc; d++)
                        O[d] = 0.0f;
                    for (int64_t e = 0; e < n; e++) {
                        const float *v = keys + e * Dqk;
                        for (int64_t d = 0; d < Dc; d++)
                            O[d] += P[e] * v[d];
                    }
                }

                for (int64_t d = 0; d < Dc; d++) {
                    float o = a->p_mode == DSOPS_P_TILED ? O[d] / den : O[d];
                    ref_put_bf16(&a->out, t, h, d, o);
                }
                ref_attn_put_stats(&a->lse, &a->max_logits, t, h, m + logf(l), ref_row_max(sh, n)); /* A7 */
            }
        }
    }

    free(keys);
    free(qT);
    free(s);
    free(acc);
    free(w);
    free(P);
    free(O);
    free(Ot);
}
