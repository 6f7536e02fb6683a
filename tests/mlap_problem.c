#include "mlap_problem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "problem_common.h"
#include "ref.h"
#include "test_util.h"

#define DR 64

/* ---- element access -------------------------------------------------------------------------------- */

/* Fields of the 656-byte rows: packed_int8 (int8 | rope at 512 | scales at 640) and flashmla_fp8 (e4m3 | scales
 * at 512 | rope at 528). */
static int packed_layout(dsops_kv_layout l) { return l == DSOPS_KV_PACKED_INT8 || l == DSOPS_KV_FLASHMLA_FP8; }

static float packed_rope(const dsops_tensor *kv, dsops_kv_layout l, int64_t blk, int64_t off, int64_t e)
{
    const int64_t at = l == DSOPS_KV_PACKED_INT8 ? 512 : 528;
    uint16_t h = (uint16_t)(*tf_eaddr(kv, blk, off, at + 2 * e) | (*tf_eaddr(kv, blk, off, at + 2 * e + 1) << 8));
    return tu_f32(h);
}

static float packed_scale(const dsops_tensor *kv, dsops_kv_layout l, int64_t blk, int64_t off, int64_t g)
{
    const int64_t at = l == DSOPS_KV_PACKED_INT8 ? 640 : 512;
    uint32_t u = 0;
    for (int k = 3; k >= 0; k--)
        u = (u << 8) | *tf_eaddr(kv, blk, off, at + 4 * g + k);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Cache row (blk, off) of the args' layout as fp32: latent [Dc], scales [Dc / 128] (split_int8, packed_int8,
 * flashmla_fp8) and rope [64]. An e4m3 latent byte is read as the int8 of its bits, so that neighbouring values
 * are 1 apart, as for an int8 latent (the tolerance of the int8 layouts). */
static void read_cache_row(const dsops_mla_prolog_v32_args *a, int64_t Dc, int64_t blk, int64_t off, float *lat,
                           float *scale, float *kr)
{
    const int packed = packed_layout(a->kv_layout);
    for (int64_t c = 0; c < Dc; c++)
        lat[c] = packed ? (float)(int8_t)*tf_eaddr(&a->kv_packed, blk, off, c) : tf_getf(&a->kv_cache, blk, off, c);
    for (int64_t g = 0; g < Dc / 128; g++)
        if (packed)
            scale[g] = packed_scale(&a->kv_packed, a->kv_layout, blk, off, g);
        else if (a->kv_layout == DSOPS_KV_SPLIT_INT8)
            scale[g] = tf_getf(&a->kv_scale_cache, blk, off, g);
    for (int64_t e = 0; e < DR; e++)
        kr[e] = packed ? packed_rope(&a->kv_packed, a->kv_layout, blk, off, e) : tf_getf(&a->kr_cache, blk, off, e);
}

/* ---- problem builder ------------------------------------------------------------------------------- */

static void fill_cache_rows(mp_problem *p, tu_rng *r)
{
    dsops_mla_prolog_v32_args *a = &p->args;
    const mp_spec *sp = &p->sp;
    const int64_t NB = sp->NB, BS = sp->BS, Dc = sp->Dc, G = Dc / 128;
    for (int64_t b = 0; b < NB; b++)
        for (int64_t o = 0; o < BS; o++) {
            if (packed_layout(sp->layout)) { /* the NaN pattern is aimed at packed_int8's fields */
                for (int64_t k = 0; k < 656; k++) {
                    uint8_t v = (uint8_t)tu_rng_u64(r);
                    if (sp->nan_cache)
                        v = k < 512 ? 0xff : (k < 640 ? (k % 2 ? 0x7f : 0xc0) : (k % 4 == 3 ? 0x7f : (k % 4 == 2 ? 0xc0 : 0)));
                    *tf_eaddr(&a->kv_packed, b, o, k) = v;
                }
                continue;
            }
            for (int64_t c = 0; c < Dc; c++) {
                if (a->kv_cache.dtype == DSOPS_BF16)
                    tf_putf(&a->kv_cache, b, o, c, sp->nan_cache ? NAN : tu_rng_uniform(r, -1, 1));
                else
                    *tf_eaddr(&a->kv_cache, b, o, c) = sp->nan_cache ? 0xff : (uint8_t)tu_rng_u64(r);
            }
            if (a->kv_scale_cache.data)
                for (int64_t g = 0; g < G; g++)
                    tf_putf(&a->kv_scale_cache, b, o, g, sp->nan_cache ? NAN : tu_rng_uniform(r, 0, 0.02f));
            for (int64_t e = 0; e < DR; e++)
                tf_putf(&a->kr_cache, b, o, e, sp->nan_cache ? NAN : tu_rng_uniform(r, -1, 1));
        }
}

mp_problem *mp_make(const mp_spec *spec, uint64_t seed)
{
    mp_problem *p = tf_xcalloc(sizeof *p);
    p->sp = *spec;
    mp_spec *sp = &p->sp;
    p->fx.big_guard = sp->big_guard;
    if (!sp->gamma_dtype)
        sp->gamma_dtype = DSOPS_BF16;
    if (!sp->table_dtype)
        sp->table_dtype = DSOPS_BF16;
    if (sp->NB <= 0)
        sp->NB = pc_default_blocks(sp->T, sp->BS);
    tu_rng r;
    tu_rng_seed(&r, seed);

    const int64_t T = sp->T, H = sp->H, Q = sp->Q, N = sp->N, Dqn = sp->Dqn, Dc = sp->Dc, BS = sp->BS, NB = sp->NB;
    const int64_t NG = N * (Dqn + DR), KV = Dc + DR, G = Dc / 128;
    const int64_t pad = sp->strided ? 5 : 0, wpad = sp->strided ? 8 : 0;
    const int share = sp->strided == 2 ? (sp->share ? sp->share : 7) : 0;
    p->T = T, p->NG = NG, p->KV = KV;
    dsops_mla_prolog_v32_args *a = &p->args;
    memset(a, 0, sizeof *a);
    a->eps_cq = sp->eps_cq;
    a->eps_ckv = sp->eps_ckv;
    a->rope_mode = sp->rope_mode;
    a->rope_inverse = sp->rope_inverse;
    a->kv_layout = sp->layout;

    int64_t s[3];
    /* inputs */
    s[0] = T, s[1] = H;
    a->x = tf_alloc_view(&p->fx, DSOPS_BF16, 2, s, pad, 0, 0);
    s[0] = Q, s[1] = H;
    a->wq_a = tf_alloc_view(&p->fx, DSOPS_BF16, 2, s, wpad, 0, 0);
    s[0] = Q;
    a->gamma_cq = tf_alloc_view(&p->fx, sp->gamma_dtype, 1, s, 0, 0, 0);
    s[0] = NG, s[1] = Q;
    a->wq_b = tf_alloc_view(&p->fx, sp->int8_wq_b ? DSOPS_INT8 : DSOPS_BF16, 2, s, wpad, 0, 0);
    if (sp->int8_wq_b) {
        s[0] = NG;
        a->wq_b_scale = tf_alloc_view(&p->fx, DSOPS_FP32, 1, s, 0, 0, 0);
    }
    s[0] = N, s[1] = Dqn, s[2] = Dc;
    a->w_uk = tf_alloc_view(&p->fx, DSOPS_BF16, 3, s, wpad, 0, 0);
    s[0] = KV, s[1] = H;
    a->wkv_a = tf_alloc_view(&p->fx, DSOPS_BF16, 2, s, wpad, 0, 0);
    s[0] = Dc;
    const dsops_dtype ckv_dt =
        sp->mixed_gamma ? (sp->gamma_dtype == DSOPS_FP32 ? DSOPS_BF16 : DSOPS_FP32) : sp->gamma_dtype;
    a->gamma_ckv = tf_alloc_view(&p->fx, ckv_dt, 1, s, 0, 0, 0);
    pc_rope_tables(&p->fx, sp->table_dtype, T, pad, share & 2, &a->rope_cos, &a->rope_sin);
    s[0] = T;
    a->cache_index = tf_alloc_view(&p->fx, DSOPS_INT64, 1, s, 0, 0, 0);
    p->cache_index = a->cache_index.data;

    /* outputs */
    s[0] = T, s[1] = N, s[2] = Dc;
    if (share & 1) { /* q_nope | q_rope side by side in one [T, N, Dc + 64] buffer */
        s[2] = Dc + DR;
        dsops_tensor both = tf_alloc_view(&p->fx, DSOPS_BF16, 3, s, pad, 1, 1);
        if (!(share & 8)) /* padded rows, tokens N rows apart (8: padding between tokens too) */
            both.stride[0] = N * both.stride[1];
        a->q_nope = both, a->q_rope = both;
        a->q_nope.shape[2] = Dc;
        a->q_rope.shape[2] = DR;
        a->q_rope.data = tf_eaddr(&both, 0, 0, Dc);
    } else {
        a->q_nope = tf_alloc_view(&p->fx, DSOPS_BF16, 3, s, pad, 1, 1);
        s[2] = DR;
        a->q_rope = tf_alloc_view(&p->fx, DSOPS_BF16, 3, s, pad, 1, 1);
    }
    s[0] = T, s[1] = Q;
    a->qr = tf_alloc_view(&p->fx, sp->int8_wq_b ? DSOPS_INT8 : DSOPS_BF16, 2, s, pad, 1, 1);
    if (sp->int8_wq_b) {
        s[0] = T;
        a->qr_scale = tf_alloc_view(&p->fx, DSOPS_FP32, 1, s, 0, 1, 1);
    }

    /* caches */
    if (packed_layout(sp->layout)) {
        s[0] = NB, s[1] = BS, s[2] = 656;
        a->kv_packed = tf_alloc_view(&p->fx, DSOPS_UINT8, 3, s, sp->strided ? 16 : 0, 1, 0);
    } else if (share & 4) {
        /* one buffer of rows: split_bf16 [latent Dc | rope 64] bf16 (+ pad); split_int8 bytes
         * [latent Dc int8 | rope 64 bf16 | Dc/128 fp32 scales], the packed_int8 arrangement for Dc = 512 */
        const int int8 = sp->layout == DSOPS_KV_SPLIT_INT8;
        const int64_t rowb = int8 ? Dc + 2 * DR + 4 * G : 2 * (Dc + DR + 4);
        const int64_t blkb = BS * rowb + 16;
        size_t bytes = (size_t)(NB * blkb) + 2 * TF_GUARD;
        unsigned char *b = tf_own(&p->fx, bytes);
        tf_add_region(&p->fx, b, bytes, 0, DSOPS_UINT8);
        unsigned char *base = b + TF_GUARD;
        s[0] = NB, s[1] = BS, s[2] = Dc;
        a->kv_cache = dsops_tensor_make(base, int8 ? DSOPS_INT8 : DSOPS_BF16, 3, s);
        const int64_t es = int8 ? 1 : 2;
        a->kv_cache.stride[0] = blkb / es, a->kv_cache.stride[1] = rowb / es;
        s[2] = DR;
        a->kr_cache = dsops_tensor_make(base + (int8 ? Dc : 2 * Dc), DSOPS_BF16, 3, s);
        a->kr_cache.stride[0] = blkb / 2, a->kr_cache.stride[1] = rowb / 2;
        if (int8) {
            s[2] = G;
            a->kv_scale_cache = dsops_tensor_make(base + Dc + 2 * DR, DSOPS_FP32, 3, s);
            a->kv_scale_cache.stride[0] = blkb / 4, a->kv_scale_cache.stride[1] = rowb / 4;
        }
    } else {
        const int64_t cpad = sp->strided ? 3 : 0;
        s[0] = NB, s[1] = BS, s[2] = Dc;
        a->kv_cache = tf_alloc_view(&p->fx, sp->layout == DSOPS_KV_SPLIT_INT8 ? DSOPS_INT8 : DSOPS_BF16, 3, s,
                                    sp->layout == DSOPS_KV_SPLIT_INT8 ? 4 * cpad : cpad, 1, 0);
        if (sp->layout == DSOPS_KV_SPLIT_INT8) {
            s[2] = G;
            a->kv_scale_cache = tf_alloc_view(&p->fx, DSOPS_FP32, 3, s, cpad, 1, 0);
        }
        s[2] = DR;
        a->kr_cache = tf_alloc_view(&p->fx, DSOPS_BF16, 3, s, cpad, 1, 0);
    }

    /* data */
    pc_fill_rows(&a->x, &r, sp->zero_tokens);
    tf_fill_uniform(&a->wq_a, &r, -0.1f, 0.1f);
    tf_fill_uniform(&a->wkv_a, &r, -0.1f, 0.1f);
    tf_fill_uniform(&a->w_uk, &r, -0.1f, 0.1f);
    if (sp->int8_wq_b) {
        for (int64_t n = 0; n < NG; n++) {
            for (int64_t k = 0; k < Q; k++) {
                int v = sp->int8_extreme ? ((tu_rng_u64(&r) & 1) ? 127 : -128) : (int)tu_rng_int(&r, -128, 127);
                *(int8_t *)tf_eaddr(&a->wq_b, n, k, 0) = (int8_t)v;
            }
            float sc = tu_rng_uniform(&r, 2e-4f, 2e-3f);
            tf_putf(&a->wq_b_scale, n, 0, 0, (n % 7 == 3) ? -sc : sc); /* some negative scales */
        }
    } else {
        tf_fill_uniform(&a->wq_b, &r, -0.1f, 0.1f);
    }
    if (sp->tiny_gamma) {
        tf_fill_uniform(&a->gamma_cq, &r, 0.5e-38f, 1e-38f);
        tf_fill_uniform(&a->gamma_ckv, &r, 0.5e-38f, 1e-38f);
    } else {
        tf_fill_uniform(&a->gamma_cq, &r, -1, 1);
        tf_fill_uniform(&a->gamma_ckv, &r, -1, 1);
    }
    tf_fill_uniform(&a->rope_cos, &r, -1, 1);
    tf_fill_uniform(&a->rope_sin, &r, -1, 1);
    fill_cache_rows(p, &r);

    pc_cache_indices(&r, NB * BS, T, (pc_index_mode)sp->index_mode, p->cache_index);
    return p;
}

/* ---- calls: sentinels, snapshots (the fixture's, under the names the test programs use) ------------- */

void mp_free(mp_problem *p)
{
    if (p)
        tf_free(&p->fx);
    free(p);
}

void mp_prepare_call(mp_problem *p) { tf_prepare_call(&p->fx); }
void mp_restore(mp_problem *p) { tf_restore(&p->fx); }
int mp_untouched(const mp_problem *p, const char *label) { return tf_untouched(&p->fx, label); }

/* ---- the elements a call may write ------------------------------------------------------------------ */

/* outputs in order q_nope, q_rope, qr, qr_scale, then the addressed cache rows in token order */
static void each_written(const void *args, tf_elem_fn fn, void *ctx)
{
    const dsops_mla_prolog_v32_args *a = args;
    tf_each_in_view(&a->q_nope, fn, ctx);
    tf_each_in_view(&a->q_rope, fn, ctx);
    tf_each_in_view(&a->qr, fn, ctx);
    if (a->wq_b.dtype == DSOPS_INT8)
        tf_each_in_view(&a->qr_scale, fn, ctx);
    for (int64_t t = 0; t < a->x.shape[0]; t++) {
        const int64_t r = tf_get_index(&a->cache_index, t);
        if (r < 0)
            continue;
        if (packed_layout(a->kv_layout)) {
            pc_each_in_cache_row(&a->kv_packed, r, fn, ctx);
            continue;
        }
        pc_each_in_cache_row(&a->kv_cache, r, fn, ctx);
        if (a->kv_layout == DSOPS_KV_SPLIT_INT8)
            pc_each_in_cache_row(&a->kv_scale_cache, r, fn, ctx);
        pc_each_in_cache_row(&a->kr_cache, r, fn, ctx);
    }
}

unsigned char *mp_gather(const dsops_mla_prolog_v32_args *a, size_t *n) { return pc_gather(each_written, a, n); }

/* ---- reference ------------------------------------------------------------------------------------- */

mp_ref *mp_reference(const dsops_mla_prolog_v32_args *a)
{
    const int64_t T = a->x.shape[0], Q = a->wq_a.shape[0], N = a->w_uk.shape[0], Dc = a->w_uk.shape[2];
    const int64_t G = Dc / 128;
    const int int8 = a->wq_b.dtype == DSOPS_INT8;
    mp_ref *r = tf_xcalloc(sizeof *r);
    r->T = T, r->N = N, r->Q = Q, r->Dc = Dc;

    dsops_mla_prolog_v32_args ra = *a;
    ra.prepared = NULL;
    int64_t s[3];
    /* dense outputs */
    s[0] = T, s[1] = N, s[2] = Dc;
    ra.q_nope = dsops_tensor_make(tf_xcalloc(sizeof(uint16_t) * (size_t)(T * N * Dc)), DSOPS_BF16, 3, s);
    s[2] = DR;
    ra.q_rope = dsops_tensor_make(tf_xcalloc(sizeof(uint16_t) * (size_t)(T * N * DR)), DSOPS_BF16, 3, s);
    s[0] = T, s[1] = Q;
    ra.qr = dsops_tensor_make(tf_xcalloc((int8 ? 1 : 2) * (size_t)(T * Q)), int8 ? DSOPS_INT8 : DSOPS_BF16, 2, s);
    s[0] = T;
    if (int8)
        ra.qr_scale = dsops_tensor_make(tf_xcalloc(sizeof(float) * (size_t)(T > 0 ? T : 1)), DSOPS_FP32, 1, s);
    /* compact caches: row w of [nw, 1, W] for the w-th writing token */
    int64_t nw;
    int64_t *ci = pc_compact_index(&a->cache_index, &nw);
    r->nw = nw;
    s[0] = T;
    ra.cache_index = dsops_tensor_make(ci, DSOPS_INT64, 1, s);
    const int64_t rows = nw > 0 ? nw : 1;
    s[0] = rows, s[1] = 1;
    memset(&ra.kv_cache, 0, sizeof ra.kv_cache);
    memset(&ra.kv_scale_cache, 0, sizeof ra.kv_scale_cache);
    memset(&ra.kr_cache, 0, sizeof ra.kr_cache);
    memset(&ra.kv_packed, 0, sizeof ra.kv_packed);
    if (packed_layout(a->kv_layout)) {
        s[2] = 656;
        ra.kv_packed = dsops_tensor_make(tf_xcalloc((size_t)(rows * 656)), DSOPS_UINT8, 3, s);
    } else {
        const int i8 = a->kv_layout == DSOPS_KV_SPLIT_INT8;
        s[2] = Dc;
        ra.kv_cache = dsops_tensor_make(tf_xcalloc((i8 ? 1 : 2) * (size_t)(rows * Dc)), i8 ? DSOPS_INT8 : DSOPS_BF16,
                                        3, s);
        if (i8) {
            s[2] = G;
            ra.kv_scale_cache = dsops_tensor_make(tf_xcalloc(sizeof(float) * (size_t)(rows * G)), DSOPS_FP32, 3, s);
        }
        s[2] = DR;
        ra.kr_cache = dsops_tensor_make(tf_xcalloc(sizeof(uint16_t) * (size_t)(rows * DR)), DSOPS_BF16, 3, s);
    }

    dsops_ref_mla_prolog_v32(&ra);

    /* to fp32 arrays */
    r->q_nope = tf_xcalloc(sizeof(float) * (size_t)(T * N * Dc));
    r->q_rope = tf_xcalloc(sizeof(float) * (size_t)(T * N * DR));
    r->qr = tf_xcalloc(sizeof(float) * (size_t)(T * Q));
    r->qr_scale = tf_xcalloc(sizeof(float) * (size_t)(T > 0 ? T : 1));
    pc_dense_f32(&ra.q_nope, r->q_nope);
    pc_dense_f32(&ra.q_rope, r->q_rope);
    pc_dense_f32(&ra.qr, r->qr);
    if (int8)
        pc_dense_f32(&ra.qr_scale, r->qr_scale);
    r->lat = tf_xcalloc(sizeof(float) * (size_t)(rows * Dc));
    r->scale = tf_xcalloc(sizeof(float) * (size_t)(rows * (G > 0 ? G : 1)));
    r->kr = tf_xcalloc(sizeof(float) * (size_t)(rows * DR));
    for (int64_t w = 0; w < nw; w++)
        read_cache_row(&ra, Dc, w, 0, r->lat + w * Dc, r->scale + w * G, r->kr + w * DR);

    free(ra.q_nope.data);
    free(ra.q_rope.data);
    free(ra.qr.data);
    free(ra.qr_scale.data);
    free(ci);
    free(ra.kv_cache.data);
    free(ra.kv_scale_cache.data);
    free(ra.kr_cache.data);
    free(ra.kv_packed.data);
    return r;
}

void mp_ref_free(mp_ref *r)
{
    if (!r)
        return;
    free(r->q_nope);
    free(r->q_rope);
    free(r->qr);
    free(r->qr_scale);
    free(r->lat);
    free(r->scale);
    free(r->kr);
    free(r);
}

/* ---- comparison ------------------------------------------------------------------------------------ */

static const tu_tol TOL_Q = {0.005, 1.0 / 128, 0.005};       /* q_nope, q_rope */
static const tu_tol TOL_QR_I8 = {1, 0, 0.005};
static const tu_tol TOL_QR_BF16 = {1e-4, 1.0 / 128, 0.005};
static const tu_tol TOL_QR_SCALE = {2.5e-5, 0.005, 0.005};
static const tu_tol TOL_LAT_I8 = {1, 0, 0.005};
static const tu_tol TOL_BF16_ROW = {1e-4, 1.0 / 128, 0.005};  /* bf16 latent, kr */
static const tu_tol TOL_SCALE = {2.5e-5, 0.005, 0};

int mp_check(mp_problem *p, const mp_ref *r, const char *label)
{
    const dsops_mla_prolog_v32_args *a = &p->args;
    const int64_t T = r->T, N = r->N, Q = r->Q, Dc = r->Dc, G = Dc / 128, nw = r->nw;
    const int int8 = a->wq_b.dtype == DSOPS_INT8;
    int ok = 1;
    const size_t big = (size_t)(T * N * (Dc + DR) + T * Q) + (size_t)(nw * Dc) + 1;
    float *buf = tf_xcalloc(sizeof(float) * big);

    if (T > 0) {
        pc_dense_f32(&a->q_nope, buf);
        ok &= tu_compare_close_part(label, "q_nope", buf, r->q_nope, (size_t)(T * N * Dc), TOL_Q);
        pc_dense_f32(&a->q_rope, buf);
        ok &= tu_compare_close_part(label, "q_rope", buf, r->q_rope, (size_t)(T * N * DR), TOL_Q);
        pc_dense_f32(&a->qr, buf);
        ok &= tu_compare_close_part(label, "qr", buf, r->qr, (size_t)(T * Q), int8 ? TOL_QR_I8 : TOL_QR_BF16);
        if (int8) {
            pc_dense_f32(&a->qr_scale, buf);
            ok &= tu_compare_close_part(label, "qr_scale", buf, r->qr_scale, (size_t)T, TOL_QR_SCALE);
        }
    }

    if (nw > 0) {
        float *lat = buf, *sc = tf_xcalloc(sizeof(float) * (size_t)(nw * (G > 0 ? G : 1))),
              *kr = tf_xcalloc(sizeof(float) * (size_t)(nw * DR));
        int64_t w = 0;
        for (int64_t t = 0; t < T; t++) {
            const int64_t row = tf_get_index(&a->cache_index, t);
            if (row < 0)
                continue;
            const int64_t BS = (packed_layout(a->kv_layout) ? a->kv_packed : a->kv_cache).shape[1];
            read_cache_row(a, Dc, row / BS, row % BS, lat + w * Dc, sc + w * G, kr + w * DR);
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
    return pc_check_only_written(&p->fx, each_written, a, label) && ok;
}

/* ---- the shared runs -------------------------------------------------------------------------------- */

/* Adapters from this operator's argument and problem types to pc_target (each prolog builder has its own). */

static dsops_status call_op(dsops_context *c, const void *args) { return dsops_mla_prolog_v32(c, args); }

static dsops_status prepare_op(dsops_context *c, const void *args, dsops_prepared **prep)
{
    return dsops_mla_prolog_v32_prepare(c, args, prep);
}

static unsigned char *gather_op(const void *args, size_t *n) { return pc_gather(each_written, args, n); }

static int check_op(void *p, const void *r, const char *label) { return mp_check(p, r, label); }

pc_target mp_target(mp_problem *p, const mp_ref *r)
{
    return (pc_target){.fx = &p->fx, .args = &p->args, .prepared = &p->args.prepared, .call = call_op,
                       .prepare = prepare_op, .gather = gather_op, .check = check_op, .problem = p, .ref = r};
}
