/* Reference oracle of the compressor (docs/OPERATORS.md §3.4; primitives §2.2 linear maps, §2.3 RMSNorm,
 * §2.5.1 RoPE, §2.6 Hadamard, §2.8 paged state).
 *
 * The Math steps of §3.4, literally, for all sequences of the call:
 *   1. kvp_t = lin(x[t], wkv), scp_t = lin(x[t], wgate) + ape[p % R]          fp32, never rounded
 *   2. kv(u), sc(u): fresh projections for u in the call, the state rows for 0 <= u < start_pos[b]
 *   3. per closing window and channel: softmax of the candidates' logits, weighted sum of their values
 *   4. y = bf16(cval); y = bf16(RMSNorm(y)); last 64 dims rotated with table row r, bf16; Hadamard, bf16
 *   5. out rows (packed or row_per_seq), zero rows elsewhere, out_count
 *   6. state rows of every token; a later position overwrites an earlier one on a shared row.
 * Steps 2-5 read the states before step 6 writes any of them, so the candidates are the state "as
 * stored when the call began" even when the call's own writes land on the rows it reads (rings).
 *
 * Every fp32 sum starts at 0 and adds its terms in ascending index order; nothing is contracted into FMA
 * (built with -ffp-contract=off). The only liberty taken is loop order in the linear maps: the sums of
 * several tokens run side by side (ref_lin, ref_util.c), each still accumulated in ascending k. Output
 * channels are independent, so they are spread over OpenMP threads; no value depends on the thread that
 * computes it.
 *
 * D = norm_weight.shape[0], R = ape.shape[0], C = ape.shape[1] / D; rotate when hadamard is present.
 * Explicit dim / ratio / overlap / rotate and a->prepared are ignored. Every tensor is read and written
 * through its strides (in elements). */
#include <math.h>
#include <stdlib.h>

#include "ref.h"
#include "ref_util.h"

#define DR 64  /* rotary dims (fixed in this version) */

/* ---- the operator -------------------------------------------------------------------------------- */

/* State row of position p of sequence b: block table[b][p / BS], row p % BS (spec §2.8). */
static void cmp_slot(const dsops_tensor *table, int64_t BS, int64_t b, int64_t p, int64_t *blk, int64_t *row)
{
    *blk = ref_get_i32(table, b, p / BS, 0);
    *row = p % BS;
}

void dsops_ref_compressor(const dsops_compressor_args *a)
{
    const int64_t T = a->x.shape[0], H = a->x.shape[1];
    const int64_t B = a->start_pos.shape[0];
    const int64_t D = a->norm_weight.shape[0], R = a->ape.shape[0], CD = a->ape.shape[1], C = CD / D;
    const int64_t NO = a->out.shape[0];
    const int64_t BSS = a->kv_state.shape[1], BSS2 = a->score_state.shape[1];
    const int rotate = a->hadamard.data != NULL;

    /* sequence descriptors */
    int64_t *cu = ref_alloc(sizeof(int64_t) * (size_t)(B + 1)); /* [B+1] */
    int64_t *sp = ref_alloc(sizeof(int64_t) * (size_t)(B > 0 ? B : 1)); /* [B] */
    for (int64_t b = 0; b <= B; b++)
        cu[b] = ref_get_i32(&a->cu_seqlens_q, b, 0, 0);
    for (int64_t b = 0; b < B; b++)
        sp[b] = ref_get_i32(&a->start_pos, b, 0, 0);

    /* step 1: projections, then the ape row of each token's position added to the logits */
    float *xf = ref_alloc(sizeof(float) * (size_t)(T * H));      /* [T][H] */
    float *kvp = ref_alloc(sizeof(float) * (size_t)(T * CD));    /* [T][CD] */
    float *scp = ref_alloc(sizeof(float) * (size_t)(T * CD));    /* [T][CD] */
    ref_get_mat(&a->x, T, H, xf);
    ref_lin(xf, T, H, &a->wkv, kvp);
    ref_lin(xf, T, H, &a->wgate, scp);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = cu[b]; t < cu[b + 1]; t++) {
            const int64_t p = sp[b] + (t - cu[b]);
            for (int64_t c = 0; c < CD; c++)
                scp[t * CD + c] = scp[t * CD + c] + ref_get_f(&a->ape, p % R, c, 0);
        }

    /* widened parameters */
    float *gamma = ref_alloc(sizeof(float) * (size_t)D);                    /* [D] */
    float *hm = rotate ? ref_alloc(sizeof(float) * (size_t)(D * D)) : NULL; /* [D][D] */
    ref_get_vec(&a->norm_weight, D, gamma);
    if (rotate)
        ref_get_mat(&a->hadamard, D, D, hm);

    /* step 5 (zero rows): every row starts at +0; entries overwrite theirs below */
    for (int64_t r = 0; r < NO; r++)
        for (int64_t d = 0; d < D; d++)
            ref_put_bf16(&a->out, r, d, 0, 0.0f);

    float *av = ref_alloc(sizeof(float) * (size_t)(2 * R));    /* candidate values [<= 2R] */
    float *zv = ref_alloc(sizeof(float) * (size_t)(2 * R));    /* candidate logits [<= 2R] */
    float *ev = ref_alloc(sizeof(float) * (size_t)(2 * R));    /* exp(z - mz) [<= 2R] */
    float *y = ref_alloc(sizeof(float) * (size_t)D);           /* entry [D] */
    float *y2 = ref_alloc(sizeof(float) * (size_t)D);          /* Hadamard result [D] */
    float cs[DR], sn[DR];

    int64_t row_base = 0; /* packed: entries of the sequences before b */
    for (int64_t b = 0; b < B; b++) {
        const int64_t S = cu[b + 1] - cu[b], s0 = sp[b];
        const int64_t k_first = s0 / R, k_end = (s0 + S) / R; /* windows k_first ... k_end - 1 close */
        const int64_t count = k_end - k_first;
        if (a->out_count.data)
            ref_put_i32(&a->out_count, b, 0, 0, (int32_t)count);
        for (int64_t k = k_first; k < k_end; k++) {
            const int64_t r = a->out_layout == DSOPS_COMPRESSOR_ROW_PER_SEQ ? b : row_base + (k - k_first);
            /* step 3: the candidate list of each channel, then the softmax-weighted sum */
            for (int64_t d = 0; d < D; d++) {
                int64_t n = 0;
                for (int64_t half = (C == 2 ? 0 : 1); half < 2; half++) {
                    const int64_t u0 = half == 0 ? (k - 1) * R : k * R; /* previous window, then current */
                    const int64_t ch = (C == 2 && half == 1) ? D + d : d;
                    for (int64_t u = u0; u < u0 + R; u++) {
                        if (u < 0)
                            continue; /* absent */
                        if (u >= s0) { /* fresh projection of the token at position u */
                            const int64_t t = cu[b] + (u - s0);
                            av[n] = kvp[t * CD + ch];
                            zv[n] = scp[t * CD + ch];
                        } else { /* the state row as stored when the call began */
                            int64_t blk, row;
                            cmp_slot(&a->kv_state_block_table, BSS, b, u, &blk, &row);
                            av[n] = ref_get_f(&a->kv_state, blk, row, ch);
                            cmp_slot(&a->score_state_block_table, BSS2, b, u, &blk, &row);
                            zv[n] = ref_get_f(&a->score_state, blk, row, ch);
                        }
                        n++;
                    }
                }
                float mz = -INFINITY;
                for (int64_t i = 0; i < n; i++)
                    mz = zv[i] > mz ? zv[i] : mz;
                float den = 0.0f;
                for (int64_t i = 0; i < n; i++) {
                    ev[i] = expf(zv[i] - mz);
                    den += ev[i];
                }
                float cval = 0.0f;
                for (int64_t i = 0; i < n; i++)
                    cval += av[i] * (ev[i] / den);
                y[d] = ref_round_bf16(cval); /* step 4: y = bf16(cval) */
            }
            /* step 4: RMSNorm, rotation of the last 64 dims with table row r, optional Hadamard */
            dsops_ref_rmsnorm_row(y, D, gamma, a->norm_eps, y);
            for (int64_t d = 0; d < D; d++)
                y[d] = ref_round_bf16(y[d]);
            ref_get_row(&a->rope_cos, r, DR, cs);
            ref_get_row(&a->rope_sin, r, DR, sn);
            ref_rope_bf16(y + (D - DR), cs, sn, a->rope_mode, a->rope_inverse);
            ref_hadamard_bf16(y, D, hm, y2); /* hm NULL: no rotation */
            for (int64_t d = 0; d < D; d++)
                ref_put_bf16(&a->out, r, d, 0, y[d]);
        }
        row_base += count;
    }

    /* step 6: state rows, tokens in ascending position so that a later position wins a shared row */
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = cu[b]; t < cu[b + 1]; t++) {
            const int64_t p = sp[b] + (t - cu[b]);
            int64_t blk, row;
            cmp_slot(&a->kv_state_block_table, BSS, b, p, &blk, &row);
            for (int64_t c = 0; c < CD; c++)
                ref_put_f32(&a->kv_state, blk, row, c, kvp[t * CD + c]);
            cmp_slot(&a->score_state_block_table, BSS2, b, p, &blk, &row);
            for (int64_t c = 0; c < CD; c++)
                ref_put_f32(&a->score_state, blk, row, c, scp[t * CD + c]);
        }

    free(cu), free(sp), free(xf), free(kvp), free(scp), free(gamma), free(hm);
    free(av), free(zv), free(ev), free(y), free(y2);
}
