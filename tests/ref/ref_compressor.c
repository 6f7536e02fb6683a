/* Reference oracle of the compressor (spec/OPS.md §3.4; primitives §2.2 linear maps, §2.3 RMSNorm,
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
 * (built with -ffp-contract=off). The only liberty taken is loop order in the linear maps: the sums of up
 * to TB tokens run side by side (k outer, token inner), each still accumulated in ascending k. Output
 * channels are independent, so they are spread over OpenMP threads; no value depends on the thread that
 * computes it.
 *
 * D = norm_weight.shape[0], R = ape.shape[0], C = ape.shape[1] / D; rotate when hadamard is present.
 * Explicit dim / ratio / overlap / rotate and a->prepared are ignored. Every tensor is read and written
 * through its strides (in elements). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

#define DR 64  /* rotary dims (fixed in this version) */
#define TB 16  /* tokens whose sums run side by side in a linear map */

/* ---- strided element access ---------------------------------------------------------------------- */

static size_t cmp_elem_size(dsops_dtype dt)
{
    switch (dt) {
    case DSOPS_BF16: case DSOPS_FP16: return 2;
    case DSOPS_FP32: case DSOPS_INT32: return 4;
    case DSOPS_INT64: return 8;
    default: return 1;
    }
}

/* Address of element [i0, i1, i2] of `t` (indices beyond its rank are ignored). */
static unsigned char *cmp_addr(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    int64_t off = i0 * t->stride[0];
    if (t->ndim > 1)
        off += i1 * t->stride[1];
    if (t->ndim > 2)
        off += i2 * t->stride[2];
    return (unsigned char *)t->data + off * (int64_t)cmp_elem_size(t->dtype);
}

/* A bf16 or fp32 element, widened to fp32. */
static float cmp_get_f(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    const unsigned char *p = cmp_addr(t, i0, i1, i2);
    if (t->dtype == DSOPS_FP32) {
        float v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return dsops_ref_f32_from_bf16(h);
}

static int64_t cmp_get_i32(const dsops_tensor *t, int64_t i0, int64_t i1)
{
    int32_t v;
    memcpy(&v, cmp_addr(t, i0, i1, 0), sizeof v);
    return v;
}

static void cmp_put_f32(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v)
{
    memcpy(cmp_addr(t, i0, i1, i2), &v, sizeof v);
}

static void cmp_put_bf16_bits(const dsops_tensor *t, int64_t i0, int64_t i1, uint16_t h)
{
    memcpy(cmp_addr(t, i0, i1, 0), &h, sizeof h);
}

static float cmp_round_bf16(float f) { return dsops_ref_f32_from_bf16(dsops_ref_bf16_from_f32(f)); }

static void *cmp_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "dsops_ref: out of memory (%zu bytes)\n", n);
        abort();
    }
    return p;
}

/* ---- step 1: projections (spec §2.2) ------------------------------------------------------------- */

/* kvp[t][n] = lin(x[t], wkv)[n], scp[t][n] = lin(x[t], wgate)[n] for t < T, n < CD (fp32, k ascending).
 * xf: [T][H] fp32 (dense); wkv, wgate: [CD, H] bf16 tensors; kvp, scp: [T][CD] fp32 (dense). */
static void cmp_project(const float *xf, int64_t T, int64_t H, const dsops_tensor *wkv, const dsops_tensor *wgate,
                        int64_t CD, float *kvp, float *scp)
{
    const int64_t nblk = (T + TB - 1) / TB;
    float *xb = cmp_xmalloc(sizeof(float) * (size_t)(nblk * H * TB)); /* [nblk][H][TB], zero padded */
    for (int64_t blk = 0; blk < nblk; blk++)
        for (int64_t k = 0; k < H; k++)
            for (int64_t j = 0; j < TB; j++) {
                const int64_t t = blk * TB + j;
                xb[(blk * H + k) * TB + j] = t < T ? xf[t * H + k] : 0.0f;
            }
#pragma omp parallel
    {
        float *wk = cmp_xmalloc(sizeof(float) * (size_t)H); /* row n of wkv, widened */
        float *wg = cmp_xmalloc(sizeof(float) * (size_t)H); /* row n of wgate, widened */
#pragma omp for schedule(static)
        for (int64_t n = 0; n < CD; n++) {
            for (int64_t k = 0; k < H; k++) {
                wk[k] = cmp_get_f(wkv, n, k, 0);
                wg[k] = cmp_get_f(wgate, n, k, 0);
            }
            for (int64_t blk = 0; blk < nblk; blk++) {
                float acc_kv[TB], acc_sc[TB];
                for (int j = 0; j < TB; j++)
                    acc_kv[j] = acc_sc[j] = 0.0f;
                for (int64_t k = 0; k < H; k++) {
                    const float *col = xb + (blk * H + k) * TB;
                    const float a = wk[k], g = wg[k];
                    for (int j = 0; j < TB; j++) {
                        acc_kv[j] += col[j] * a;
                        acc_sc[j] += col[j] * g;
                    }
                }
                for (int64_t j = 0; j < TB && blk * TB + j < T; j++) {
                    kvp[(blk * TB + j) * CD + n] = acc_kv[j];
                    scp[(blk * TB + j) * CD + n] = acc_sc[j];
                }
            }
        }
        free(wk);
        free(wg);
    }
    free(xb);
}

/* ---- the operator -------------------------------------------------------------------------------- */

/* State row of position p of sequence b: block table[b][p / BS], row p % BS (spec §2.8). */
static void cmp_slot(const dsops_tensor *table, int64_t BS, int64_t b, int64_t p, int64_t *blk, int64_t *row)
{
    *blk = cmp_get_i32(table, b, p / BS);
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
    int64_t *cu = cmp_xmalloc(sizeof(int64_t) * (size_t)(B + 1)); /* [B+1] */
    int64_t *sp = cmp_xmalloc(sizeof(int64_t) * (size_t)(B > 0 ? B : 1)); /* [B] */
    for (int64_t b = 0; b <= B; b++)
        cu[b] = cmp_get_i32(&a->cu_seqlens_q, b, 0);
    for (int64_t b = 0; b < B; b++)
        sp[b] = cmp_get_i32(&a->start_pos, b, 0);

    /* step 1: projections, then the ape row of each token's position added to the logits */
    float *xf = cmp_xmalloc(sizeof(float) * (size_t)(T * H));    /* [T][H] */
    float *kvp = cmp_xmalloc(sizeof(float) * (size_t)(T * CD));  /* [T][CD] */
    float *scp = cmp_xmalloc(sizeof(float) * (size_t)(T * CD));  /* [T][CD] */
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < H; k++)
            xf[t * H + k] = cmp_get_f(&a->x, t, k, 0);
    cmp_project(xf, T, H, &a->wkv, &a->wgate, CD, kvp, scp);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = cu[b]; t < cu[b + 1]; t++) {
            const int64_t p = sp[b] + (t - cu[b]);
            for (int64_t c = 0; c < CD; c++)
                scp[t * CD + c] = scp[t * CD + c] + cmp_get_f(&a->ape, p % R, c, 0);
        }

    /* widened parameters */
    float *gamma = cmp_xmalloc(sizeof(float) * (size_t)D);                    /* [D] */
    float *hm = rotate ? cmp_xmalloc(sizeof(float) * (size_t)(D * D)) : NULL; /* [D][D] */
    for (int64_t i = 0; i < D; i++)
        gamma[i] = cmp_get_f(&a->norm_weight, i, 0, 0);
    for (int64_t i = 0; rotate && i < D; i++)
        for (int64_t j = 0; j < D; j++)
            hm[i * D + j] = cmp_get_f(&a->hadamard, i, j, 0);

    /* step 5 (zero rows): every row starts at +0; entries overwrite theirs below */
    for (int64_t r = 0; r < NO; r++)
        for (int64_t d = 0; d < D; d++)
            cmp_put_bf16_bits(&a->out, r, d, 0);

    float *av = cmp_xmalloc(sizeof(float) * (size_t)(2 * R));  /* candidate values [<= 2R] */
    float *zv = cmp_xmalloc(sizeof(float) * (size_t)(2 * R));  /* candidate logits [<= 2R] */
    float *ev = cmp_xmalloc(sizeof(float) * (size_t)(2 * R));  /* exp(z - mz) [<= 2R] */
    float *y = cmp_xmalloc(sizeof(float) * (size_t)D);         /* entry [D] */
    float *y2 = cmp_xmalloc(sizeof(float) * (size_t)D);        /* Hadamard result [D] */
    float cs[DR], sn[DR], rot[DR];

    int64_t row_base = 0; /* packed: entries of the sequences before b */
    for (int64_t b = 0; b < B; b++) {
        const int64_t S = cu[b + 1] - cu[b], s0 = sp[b];
        const int64_t k_first = s0 / R, k_end = (s0 + S) / R; /* windows k_first ... k_end - 1 close */
        const int64_t count = k_end - k_first;
        if (a->out_count.data)
            memcpy(cmp_addr(&a->out_count, b, 0, 0), &(int32_t){(int32_t)count}, sizeof(int32_t));
        for (int64_t k = k_first; k < k_end; k++) {
            const int64_t r = a->out_layout == DSOPS_CMP_ROW_PER_SEQ ? b : row_base + (k - k_first);
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
                            av[n] = cmp_get_f(&a->kv_state, blk, row, ch);
                            cmp_slot(&a->score_state_block_table, BSS2, b, u, &blk, &row);
                            zv[n] = cmp_get_f(&a->score_state, blk, row, ch);
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
                y[d] = cmp_round_bf16(cval); /* step 4: y = bf16(cval) */
            }
            /* step 4: RMSNorm, rotation of the last 64 dims with table row r, optional Hadamard */
            dsops_ref_rmsnorm_row(y, D, gamma, a->norm_eps, y);
            for (int64_t d = 0; d < D; d++)
                y[d] = cmp_round_bf16(y[d]);
            for (int e = 0; e < DR; e++) {
                cs[e] = cmp_get_f(&a->rope_cos, r, e, 0);
                sn[e] = cmp_get_f(&a->rope_sin, r, e, 0);
            }
            dsops_ref_rope_row(y + (D - DR), cs, sn, a->rope_mode, a->rope_inverse, rot);
            for (int e = 0; e < DR; e++)
                y[D - DR + e] = cmp_round_bf16(rot[e]);
            if (rotate) {
                dsops_ref_hadamard_row(y, D, hm, y2);
                for (int64_t d = 0; d < D; d++)
                    y[d] = cmp_round_bf16(y2[d]);
            }
            for (int64_t d = 0; d < D; d++)
                cmp_put_bf16_bits(&a->out, r, d, dsops_ref_bf16_from_f32(y[d]));
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
                cmp_put_f32(&a->kv_state, blk, row, c, kvp[t * CD + c]);
            cmp_slot(&a->score_state_block_table, BSS2, b, p, &blk, &row);
            for (int64_t c = 0; c < CD; c++)
                cmp_put_f32(&a->score_state, blk, row, c, scp[t * CD + c]);
        }

    free(cu), free(sp), free(xf), free(kvp), free(scp), free(gamma), free(hm);
    free(av), free(zv), free(ev), free(y), free(y2);
}
