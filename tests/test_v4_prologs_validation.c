/* Argument validation of mla_prolog_v4 and indexer_prolog_v4 (spec §1.6 V1-V10, §3.3 and §3.5
 * "Validation"): tables of bad argument sets, each with its expected status and a message fragment naming
 * the field (alternatives separated by '|'). After every error no byte of any buffer of the fixture (the
 * outputs with their guard zones, and the inputs) may have changed. A second table holds argument sets
 * that are unusual but valid; they must succeed and match the oracle. Also: the preset init functions,
 * NULL args, and prepare's own checks; and, for hc_pre (the other V4 operator sized by a product of extents), an x
 * whose HC makes M = (2 + HC) * HC overflow. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "problems.h"
#include "ref.h"
#include "test_util.h"
#include "validation.h"

static dsops_context *ctx;

#define SLACK 65536   /* every buffer holds at least this many bytes: a view moved onto it stays inside */
#define BIG_Q 131073  /* one more than the int8 limit of spec §2.2 */

/* ---- the fixture ------------------------------------------------------------------------------------ */

/* mla: x [3, 32], wq_a [16, 32], gamma_cq [16], wq_b [2*72, 16] (bf16 or int8), wq_b_scale [144], wkv
 * [72, 32], gamma_ckv [72], rope_cos / rope_sin [3, 64], q [3, 2, 72], kv [3, 72], qr [3, 16], qr_scale [3]
 * (T 3, H 32, Q 16, N 2, D 72).
 * indexer: qr [3, 16] int8, qr_scale [3], x [3, 32], idx_wq_b [2*64, 16] int8, idx_wq_b_scale [128],
 * weights_proj [2, 32], rope_cos / rope_sin [3, 64], hadamard [64, 64], q_idx [3, 2, 64], q_idx_scale
 * [3, 2], weights [3, 2] (NI 2, DI 64). */
enum { T_ = 3, H_ = 32, Q_ = 16, N_ = 2, D_ = 72, NI_ = 2, DI_ = 64 };

typedef enum which_op { MLA, IDX } which_op;

typedef struct fixture {
    which_op op;                  /* the operator a table row calls */
    int int8;                     /* mla variant */
    dsops_mla_prolog_v4_args m;
    dsops_indexer_prolog_v4_args ix;
    unsigned char *buf[40];
    unsigned char *snap[40];
    size_t len[40];
    int out[40];                  /* 1: an output buffer */
    int nbuf;
} fixture;

/* A zero-filled buffer of max(bytes, SLACK) bytes owned by the fixture. */
static void *fx_alloc(fixture *f, size_t bytes, int is_out)
{
    if (f->nbuf >= 40) {
        printf("fixture: too many buffers\n");
        exit(1);
    }
    const size_t n = bytes > SLACK ? bytes : SLACK;
    f->buf[f->nbuf] = tu_alloc(n);
    f->len[f->nbuf] = n;
    f->out[f->nbuf] = is_out;
    if (is_out)
        memset(f->buf[f->nbuf], 0x7f, n); /* bf16 / fp16 / fp32 NaN, int8 127 */
    return f->buf[f->nbuf++];
}

static dsops_tensor fx_tensor(fixture *f, dsops_dtype dt, int ndim, const int64_t *shape, int is_out)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    return dsops_tensor_make(fx_alloc(f, (size_t)n * dsops_dtype_size(dt), is_out), dt, ndim, shape);
}

static void fill(const dsops_tensor *t, tu_rng *r, float lo, float hi)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    for (int64_t e = 0; e < n; e++) {
        const float v = tu_rng_uniform(r, lo, hi);
        switch (t->dtype) {
        case DSOPS_FP32: ((float *)t->data)[e] = v; break;
        case DSOPS_INT8: ((int8_t *)t->data)[e] = (int8_t)(int)(v * 127.0f); break;
        default: ((uint16_t *)t->data)[e] = tu_bf16(v); break;
        }
    }
}

static fixture *make_fixture(int int8)
{
    fixture *f = tu_alloc(sizeof *f);
    f->int8 = int8;
    tu_rng r;
    tu_rng_seed(&r, tu_seed() + (uint64_t)int8);
    int64_t s[3];

    dsops_mla_prolog_v4_args *m = &f->m;
    if (dsops_mla_prolog_v4_init(m, DSOPS_PRESET_V4_FLASH) != DSOPS_OK) {
        memset(m, 0, sizeof *m);
        m->eps_cq = m->eps_ckv = m->eps_qh = 1e-6f;
        m->rope_mode = DSOPS_ROPE_INTERLEAVED;
    }
    s[0] = T_, s[1] = H_;
    m->x = fx_tensor(f, DSOPS_BF16, 2, s, 0);
    s[0] = Q_;
    m->wq_a = fx_tensor(f, DSOPS_BF16, 2, s, 0);
    m->gamma_cq = fx_tensor(f, DSOPS_BF16, 1, s, 0);
    s[0] = N_ * D_, s[1] = Q_;
    m->wq_b = fx_tensor(f, int8 ? DSOPS_INT8 : DSOPS_BF16, 2, s, 0);
    if (int8)
        m->wq_b_scale = fx_tensor(f, DSOPS_FP32, 1, s, 0);
    s[0] = D_, s[1] = H_;
    m->wkv = fx_tensor(f, DSOPS_BF16, 2, s, 0);
    m->gamma_ckv = fx_tensor(f, DSOPS_BF16, 1, s, 0);
    s[0] = T_, s[1] = 64;
    m->rope_cos = fx_tensor(f, DSOPS_BF16, 2, s, 0);
    m->rope_sin = fx_tensor(f, DSOPS_BF16, 2, s, 0);
    s[0] = T_, s[1] = N_, s[2] = D_;
    m->q = fx_tensor(f, DSOPS_BF16, 3, s, 1);
    s[1] = D_;
    m->kv = fx_tensor(f, DSOPS_BF16, 2, s, 1);
    s[1] = Q_;
    m->qr = fx_tensor(f, int8 ? DSOPS_INT8 : DSOPS_BF16, 2, s, 1);
    if (int8)
        m->qr_scale = fx_tensor(f, DSOPS_FP32, 1, s, 1);
    fill(&m->x, &r, -1, 1);
    fill(&m->wq_a, &r, -0.1f, 0.1f);
    fill(&m->gamma_cq, &r, -1, 1);
    fill(&m->wq_b, &r, -1, 1);
    if (int8)
        fill(&m->wq_b_scale, &r, 1e-4f, 1e-3f);
    fill(&m->wkv, &r, -0.1f, 0.1f);
    fill(&m->gamma_ckv, &r, -1, 1);
    fill(&m->rope_cos, &r, -1, 1);
    fill(&m->rope_sin, &r, -1, 1);

    dsops_indexer_prolog_v4_args *ix = &f->ix;
    if (dsops_indexer_prolog_v4_init(ix, DSOPS_PRESET_V4_FLASH) != DSOPS_OK) {
        memset(ix, 0, sizeof *ix);
        ix->weights_scale = (float)(1.0 / sqrt(64.0 * 128.0));
        ix->rope_mode = DSOPS_ROPE_INTERLEAVED;
    }
    s[0] = T_, s[1] = Q_;
    ix->qr = fx_tensor(f, DSOPS_INT8, 2, s, 0);
    ix->qr_scale = fx_tensor(f, DSOPS_FP32, 1, s, 0);
    s[1] = H_;
    ix->x = fx_tensor(f, DSOPS_BF16, 2, s, 0);
    s[0] = NI_ * DI_, s[1] = Q_;
    ix->idx_wq_b = fx_tensor(f, DSOPS_INT8, 2, s, 0);
    ix->idx_wq_b_scale = fx_tensor(f, DSOPS_FP32, 1, s, 0);
    s[0] = NI_, s[1] = H_;
    ix->weights_proj = fx_tensor(f, DSOPS_BF16, 2, s, 0);
    s[0] = T_, s[1] = 64;
    ix->rope_cos = fx_tensor(f, DSOPS_BF16, 2, s, 0);
    ix->rope_sin = fx_tensor(f, DSOPS_BF16, 2, s, 0);
    s[0] = DI_, s[1] = DI_;
    ix->hadamard = fx_tensor(f, DSOPS_BF16, 2, s, 0);
    s[0] = T_, s[1] = NI_, s[2] = DI_;
    ix->q_idx = fx_tensor(f, DSOPS_INT8, 3, s, 1);
    ix->q_idx_scale = fx_tensor(f, DSOPS_FP16, 2, s, 1);
    ix->weights = fx_tensor(f, DSOPS_FP16, 2, s, 1);
    fill(&ix->qr, &r, -1, 1);
    fill(&ix->qr_scale, &r, 1e-3f, 1e-2f);
    fill(&ix->x, &r, -1, 1);
    fill(&ix->idx_wq_b, &r, -1, 1);
    fill(&ix->idx_wq_b_scale, &r, 1e-3f, 1e-2f);
    fill(&ix->weights_proj, &r, -0.1f, 0.1f);
    fill(&ix->rope_cos, &r, -1, 1);
    fill(&ix->rope_sin, &r, -1, 1);
    dsops_ref_hadamard_matrix(&ix->hadamard);
    return f;
}

static void free_fixture(fixture *f)
{
    for (int i = 0; i < f->nbuf; i++) {
        free(f->buf[i]);
        free(f->snap[i]);
    }
    free(f);
}

static void snapshot(fixture *f)
{
    for (int i = 0; i < f->nbuf; i++) {
        free(f->snap[i]);
        f->snap[i] = tu_memdup(f->buf[i], f->len[i]);
    }
}

/* 1 if every buffer equals its snapshot (outputs included: nothing written). */
static int unchanged(const fixture *f, const char *label, int outputs_only)
{
    for (int i = 0; i < f->nbuf; i++) {
        if (outputs_only && !f->out[i])
            continue;
        if (memcmp(f->buf[i], f->snap[i], f->len[i]) != 0) {
            size_t b = 0;
            while (f->buf[i][b] == f->snap[i][b])
                b++;
            return tu_check(0, "%s: buffer %d (%s) changed at byte %zu although the call failed", label, i,
                            f->out[i] ? "an output" : "an input", b);
        }
    }
    return tu_check(1, "%s", label);
}

/* ---- bad argument sets ------------------------------------------------------------------------------- */

/* One mutator per table row, alike in shape on purpose (as in every validation program): each reads as the rule it
 * breaks, next to its table entry's status. */

#define FRAG(...) snprintf(frag, VAL_FRAG_MAX, __VA_ARGS__)
#define M (&f->m)
#define X (&f->ix)

/* an extent changed in place (the view stays inside its buffer) */
static void rank_up(dsops_tensor *t)
{
    t->shape[t->ndim] = 1;
    t->stride[t->ndim] = 1;
    t->ndim++;
}

/* mla: V2 NULL */
static void m_null_x(void *problem, char *frag) { fixture *f = problem; M->x.data = NULL; FRAG("x"); }
static void m_null_wq_a(void *problem, char *frag) { fixture *f = problem; M->wq_a.data = NULL; FRAG("wq_a"); }
static void m_null_gamma_cq(void *problem, char *frag) { fixture *f = problem; M->gamma_cq.data = NULL; FRAG("gamma_cq"); }
static void m_null_wq_b(void *problem, char *frag) { fixture *f = problem; M->wq_b.data = NULL; FRAG("wq_b"); }
static void m_null_wq_b_scale(void *problem, char *frag) { fixture *f = problem; M->wq_b_scale.data = NULL; FRAG("wq_b_scale"); }
static void m_null_wkv(void *problem, char *frag) { fixture *f = problem; M->wkv.data = NULL; FRAG("wkv"); }
static void m_null_gamma_ckv(void *problem, char *frag) { fixture *f = problem; M->gamma_ckv.data = NULL; FRAG("gamma_ckv"); }
static void m_null_cos(void *problem, char *frag) { fixture *f = problem; M->rope_cos.data = NULL; FRAG("rope_cos"); }
static void m_null_sin(void *problem, char *frag) { fixture *f = problem; M->rope_sin.data = NULL; FRAG("rope_sin"); }
static void m_null_q(void *problem, char *frag) { fixture *f = problem; M->q.data = NULL; FRAG("q is NULL|q "); }
static void m_null_kv(void *problem, char *frag) { fixture *f = problem; M->kv.data = NULL; FRAG("kv"); }
static void m_null_qr(void *problem, char *frag) { fixture *f = problem; M->qr.data = NULL; FRAG("qr"); }
static void m_null_qr_scale(void *problem, char *frag) { fixture *f = problem; M->qr_scale.data = NULL; FRAG("qr_scale"); }

/* mla: V3 shapes */
static void m_rank_x(void *problem, char *frag) { fixture *f = problem; rank_up(&M->x); FRAG("x has rank 3|x"); }
static void m_rank_wq_b(void *problem, char *frag) { fixture *f = problem; M->wq_b.ndim = 1; FRAG("wq_b"); }
static void m_rank_gamma_cq(void *problem, char *frag) { fixture *f = problem; rank_up(&M->gamma_cq); FRAG("gamma_cq"); }
static void m_rank_cos(void *problem, char *frag) { fixture *f = problem; M->rope_cos.ndim = 1; FRAG("rope_cos"); }
static void m_rank_q(void *problem, char *frag) { fixture *f = problem; M->q.ndim = 2; FRAG("q has rank|q.shape|q "); }
static void m_rank_kv(void *problem, char *frag) { fixture *f = problem; rank_up(&M->kv); FRAG("kv"); }
static void m_rank_qr_scale(void *problem, char *frag) { fixture *f = problem; rank_up(&M->qr_scale); FRAG("qr_scale"); }
static void m_x_h(void *problem, char *frag) { fixture *f = problem; M->x.shape[1] -= 1; FRAG("x.shape[1]|wq_a.shape[1]|wkv.shape[1]"); }
static void m_x_t(void *problem, char *frag) { fixture *f = problem; M->x.shape[0] -= 1; FRAG("x.shape[0]|rope_cos.shape[0]|q.shape[0]|kv.shape[0]|qr.shape[0]|qr_scale.shape[0]"); }
static void m_wq_a_h(void *problem, char *frag) { fixture *f = problem; M->wq_a.shape[1] -= 1; FRAG("of wq_a|wq_a.shape[1]|x.shape[1]"); }
static void m_wq_a_q(void *problem, char *frag) { fixture *f = problem; M->wq_a.shape[0] -= 1; FRAG("wq_a.shape[0]|gamma_cq.shape[0]|wq_b.shape[1]|qr.shape[1]"); }
static void m_gamma_cq(void *problem, char *frag) { fixture *f = problem; M->gamma_cq.shape[0] -= 1; FRAG("gamma_cq.shape[0]"); }
static void m_wq_b_q(void *problem, char *frag) { fixture *f = problem; M->wq_b.shape[1] -= 1; FRAG("wq_b.shape[1]"); }
/* N*D must equal the rows of wq_b: one row fewer (not a multiple of D), one head fewer (a multiple) */
static void m_wq_b_rows(void *problem, char *frag) { fixture *f = problem; M->wq_b.shape[0] -= 1; FRAG("wq_b.shape[0]|wq_b_scale.shape[0]|q.shape[1]"); }
static void m_wq_b_heads(void *problem, char *frag) { fixture *f = problem; M->wq_b.shape[0] -= D_; FRAG("wq_b.shape[0]|wq_b_scale.shape[0]|q.shape[1]"); }
static void m_wq_b_heads_scale(void *problem, char *frag)
{
    fixture *f = problem;
    M->wq_b.shape[0] -= D_;
    M->wq_b_scale.shape[0] -= D_;
    FRAG("wq_b.shape[0]|q.shape[1]");
}
static void m_wq_b_scale(void *problem, char *frag) { fixture *f = problem; M->wq_b_scale.shape[0] -= 1; FRAG("wq_b_scale.shape[0]"); }
static void m_wkv_d(void *problem, char *frag) { fixture *f = problem; M->wkv.shape[0] -= 1; FRAG("of wkv|from wkv|wkv.shape[0]|gamma_ckv.shape[0]|kv.shape[1]|q.shape[2]"); }
static void m_wkv_h(void *problem, char *frag) { fixture *f = problem; M->wkv.shape[1] -= 1; FRAG("wkv.shape[1]|x.shape[1]"); }
static void m_gamma_ckv(void *problem, char *frag) { fixture *f = problem; M->gamma_ckv.shape[0] -= 1; FRAG("gamma_ckv.shape[0]"); }
static void m_cos_w(void *problem, char *frag) { fixture *f = problem; M->rope_cos.shape[1] = 32; FRAG("rope_cos.shape[1]"); }
static void m_sin_t(void *problem, char *frag) { fixture *f = problem; M->rope_sin.shape[0] -= 1; FRAG("rope_sin.shape[0]"); }
static void m_q_t(void *problem, char *frag) { fixture *f = problem; M->q.shape[0] -= 1; FRAG("q.shape[0]"); }
static void m_q_n(void *problem, char *frag) { fixture *f = problem; M->q.shape[1] -= 1; FRAG("q.shape[1]|wq_b.shape[0]"); }
static void m_q_d(void *problem, char *frag) { fixture *f = problem; M->q.shape[2] -= 1; FRAG("q.shape[2]|wkv.shape[0]"); }
static void m_kv_t(void *problem, char *frag) { fixture *f = problem; M->kv.shape[0] -= 1; FRAG("kv.shape[0]"); }
static void m_kv_d(void *problem, char *frag) { fixture *f = problem; M->kv.shape[1] -= 1; FRAG("kv.shape[1]|wkv.shape[0]"); }
static void m_qr_q(void *problem, char *frag) { fixture *f = problem; M->qr.shape[1] -= 1; FRAG("qr.shape[1]"); }
static void m_qr_t(void *problem, char *frag) { fixture *f = problem; M->qr.shape[0] -= 1; FRAG("qr.shape[0]"); }
static void m_qr_scale(void *problem, char *frag) { fixture *f = problem; M->qr_scale.shape[0] -= 1; FRAG("qr_scale.shape[0]"); }
static void m_stride_x(void *problem, char *frag)
{
    fixture *f = problem;
    M->x.shape[1] /= 2, M->wq_a.shape[1] /= 2, M->wkv.shape[1] /= 2;
    M->x.stride[1] = 2;
    FRAG("x.stride[1]");
}
static void m_stride_q(void *problem, char *frag) { fixture *f = problem; M->q.shape[2] = 36 + 64 / 2; M->q.stride[2] = 2; FRAG("q.stride[2]|q.shape[2]"); }
/* every D extent set to d (views narrowed inside their buffers) */
static void m_set_d(fixture *f, int64_t d)
{
    M->wkv.shape[0] = d, M->gamma_ckv.shape[0] = d;
    M->wq_b.shape[0] = N_ * d;
    if (M->wq_b_scale.data)
        M->wq_b_scale.shape[0] = N_ * d;
    M->q.shape[2] = d, M->q.stride[1] = d, M->q.stride[0] = N_ * d;
    M->kv.shape[1] = d, M->kv.stride[0] = d;
}
static void m_d64(void *problem, char *frag) { fixture *f = problem; m_set_d(f, 64); FRAG("64"); }
static void m_d1(void *problem, char *frag) { fixture *f = problem; m_set_d(f, 1); FRAG("64"); }
/* Q = 131073 for int8 wq_b (spec §2.2): the weights' rows share one buffer row (outer stride 0); gamma_cq
 * and qr get real buffers (a few hundred KB) */
static void m_big_q(void *problem, char *frag)
{
    fixture *f = problem;
    M->wq_a.shape[0] = BIG_Q, M->wq_a.stride[0] = 0;
    M->wq_b.shape[1] = BIG_Q, M->wq_b.stride[0] = 0;
    M->wq_b.data = fx_alloc(f, BIG_Q * dsops_dtype_size(M->wq_b.dtype), 0);
    int64_t s[2] = {BIG_Q, 0};
    M->gamma_cq = dsops_tensor_make(fx_alloc(f, BIG_Q * 2, 0), DSOPS_BF16, 1, s);
    s[0] = T_, s[1] = BIG_Q;
    M->qr = dsops_tensor_make(fx_alloc(f, (size_t)(T_ * BIG_Q), 1), DSOPS_INT8, 2, s);
    FRAG("131072");
}

/* mla: V4 dtypes */
static void m_dt_x(void *problem, char *frag) { fixture *f = problem; M->x.dtype = DSOPS_FP16; FRAG("x has dtype fp16"); }
static void m_dt_wq_a(void *problem, char *frag) { fixture *f = problem; M->wq_a.dtype = DSOPS_INT8; FRAG("wq_a has dtype int8"); }
static void m_dt_gamma_cq(void *problem, char *frag) { fixture *f = problem; M->gamma_cq.dtype = DSOPS_FP16; FRAG("gamma_cq has dtype fp16"); }
static void m_dt_wq_b(void *problem, char *frag) { fixture *f = problem; M->wq_b.dtype = DSOPS_FP16; FRAG("wq_b has dtype fp16"); }
static void m_dt_wq_b_scale(void *problem, char *frag) { fixture *f = problem; M->wq_b_scale.dtype = DSOPS_BF16; FRAG("wq_b_scale has dtype bf16"); }
static void m_dt_wkv(void *problem, char *frag) { fixture *f = problem; M->wkv.dtype = DSOPS_INT8; FRAG("wkv has dtype int8"); }
static void m_dt_gamma_ckv(void *problem, char *frag) { fixture *f = problem; M->gamma_ckv.dtype = DSOPS_INT32; FRAG("gamma_ckv has dtype int32"); }
static void m_dt_cos(void *problem, char *frag) { fixture *f = problem; M->rope_cos.dtype = DSOPS_FP16; FRAG("rope_cos has dtype fp16"); }
static void m_dt_sin(void *problem, char *frag) { fixture *f = problem; M->rope_sin.dtype = DSOPS_INT8; FRAG("rope_sin has dtype int8"); }
static void m_dt_q(void *problem, char *frag) { fixture *f = problem; M->q.dtype = DSOPS_FP32; FRAG("q has dtype fp32"); }
static void m_dt_kv(void *problem, char *frag) { fixture *f = problem; M->kv.dtype = DSOPS_FP16; FRAG("kv has dtype fp16"); }
static void m_dt_qr_int8(void *problem, char *frag) { fixture *f = problem; M->qr.dtype = DSOPS_INT8; FRAG("qr has dtype int8"); }
static void m_dt_qr_bf16(void *problem, char *frag) { fixture *f = problem; M->qr.dtype = DSOPS_BF16; FRAG("qr has dtype bf16"); }
static void m_dt_qr_scale(void *problem, char *frag) { fixture *f = problem; M->qr_scale.dtype = DSOPS_BF16; FRAG("qr_scale has dtype bf16"); }
static void m_dt_invalid(void *problem, char *frag) { fixture *f = problem; M->x.dtype = (dsops_dtype)42; FRAG("x has dtype"); }

/* mla: V5 parameters */
static void m_eps_cq_nan(void *problem, char *frag) { fixture *f = problem; M->eps_cq = NAN; FRAG("eps_cq"); }
static void m_eps_cq_neg(void *problem, char *frag) { fixture *f = problem; M->eps_cq = -1e-6f; FRAG("eps_cq"); }
static void m_eps_ckv_inf(void *problem, char *frag) { fixture *f = problem; M->eps_ckv = INFINITY; FRAG("eps_ckv"); }
static void m_eps_qh_nan(void *problem, char *frag) { fixture *f = problem; M->eps_qh = NAN; FRAG("eps_qh"); }
static void m_eps_qh_inf(void *problem, char *frag) { fixture *f = problem; M->eps_qh = INFINITY; FRAG("eps_qh"); }
static void m_eps_qh_neg(void *problem, char *frag) { fixture *f = problem; M->eps_qh = -0.5f; FRAG("eps_qh"); }
static void m_rope_mode(void *problem, char *frag) { fixture *f = problem; M->rope_mode = (dsops_rope_mode)3; FRAG("rope_mode"); }
static void m_rope_mode_neg(void *problem, char *frag) { fixture *f = problem; M->rope_mode = (dsops_rope_mode)-1; FRAG("rope_mode"); }

/* mla: V9 aliasing (the moved view stays inside the SLACK bytes of its new buffer) */
static void m_alias_q_x(void *problem, char *frag) { fixture *f = problem; M->q.data = M->x.data; FRAG("q overlaps x in|x overlaps q in"); }
static void m_alias_kv_q(void *problem, char *frag) { fixture *f = problem; M->kv.data = (uint16_t *)M->q.data + 8; FRAG("kv overlaps q in|q overlaps kv in"); }
static void m_alias_qr_kv(void *problem, char *frag) { fixture *f = problem; M->qr.data = M->kv.data; FRAG("qr overlaps kv in|kv overlaps qr in"); }
static void m_alias_qr_scale_qr(void *problem, char *frag) { fixture *f = problem; M->qr_scale.data = (char *)M->qr.data + Q_; FRAG("qr_scale overlaps qr in|qr overlaps qr_scale in"); }
static void m_alias_q_wq_b(void *problem, char *frag) { fixture *f = problem; M->q.data = (char *)M->wq_b.data + 6; FRAG("q overlaps wq_b in|wq_b overlaps q in"); }
static void m_alias_kv_cos(void *problem, char *frag) { fixture *f = problem; M->kv.data = M->rope_cos.data; FRAG("kv overlaps rope_cos in|rope_cos overlaps kv in"); }
static void m_alias_qr_gamma(void *problem, char *frag) { fixture *f = problem; M->qr.data = M->gamma_cq.data; FRAG("qr overlaps gamma_cq in|gamma_cq overlaps qr in"); }
static void m_alias_q_wq_b_scale(void *problem, char *frag) { fixture *f = problem; M->q.data = M->wq_b_scale.data; FRAG("q overlaps wq_b_scale in|wq_b_scale overlaps q in"); }
/* the first element of q on the last of kv */
static void m_alias_kv_end(void *problem, char *frag)
{
    fixture *f = problem;
    M->q.data = (uint16_t *)M->kv.data + (T_ * D_ - 1);
    FRAG("q overlaps kv in|kv overlaps q in");
}

/* indexer: V2 NULL */
static void i_null_qr(void *problem, char *frag) { fixture *f = problem; X->qr.data = NULL; FRAG("qr"); }
static void i_null_qr_scale(void *problem, char *frag) { fixture *f = problem; X->qr_scale.data = NULL; FRAG("qr_scale"); }
static void i_null_x(void *problem, char *frag) { fixture *f = problem; X->x.data = NULL; FRAG("x"); }
static void i_null_wq_b(void *problem, char *frag) { fixture *f = problem; X->idx_wq_b.data = NULL; FRAG("idx_wq_b"); }
static void i_null_wq_b_scale(void *problem, char *frag) { fixture *f = problem; X->idx_wq_b_scale.data = NULL; FRAG("idx_wq_b_scale"); }
static void i_null_wproj(void *problem, char *frag) { fixture *f = problem; X->weights_proj.data = NULL; FRAG("weights_proj"); }
static void i_null_cos(void *problem, char *frag) { fixture *f = problem; X->rope_cos.data = NULL; FRAG("rope_cos"); }
static void i_null_sin(void *problem, char *frag) { fixture *f = problem; X->rope_sin.data = NULL; FRAG("rope_sin"); }
static void i_null_had(void *problem, char *frag) { fixture *f = problem; X->hadamard.data = NULL; FRAG("hadamard"); }
static void i_null_q_idx(void *problem, char *frag) { fixture *f = problem; X->q_idx.data = NULL; FRAG("q_idx"); }
static void i_null_q_idx_scale(void *problem, char *frag) { fixture *f = problem; X->q_idx_scale.data = NULL; FRAG("q_idx_scale"); }
static void i_null_weights(void *problem, char *frag) { fixture *f = problem; X->weights.data = NULL; FRAG("weights"); }

/* indexer: V3 shapes */
static void i_rank_qr(void *problem, char *frag) { fixture *f = problem; rank_up(&X->qr); FRAG("qr"); }
static void i_rank_had(void *problem, char *frag) { fixture *f = problem; X->hadamard.ndim = 1; FRAG("hadamard"); }
static void i_rank_q_idx(void *problem, char *frag) { fixture *f = problem; X->q_idx.ndim = 2; FRAG("q_idx"); }
static void i_rank_weights(void *problem, char *frag) { fixture *f = problem; X->weights.ndim = 1; FRAG("weights"); }
static void i_qr_q(void *problem, char *frag) { fixture *f = problem; X->qr.shape[1] -= 1; FRAG("qr.shape[1]|idx_wq_b.shape[1]"); }
static void i_qr_t(void *problem, char *frag) { fixture *f = problem; X->qr.shape[0] -= 1; FRAG("of qr)|qr.shape[0]|x.shape[0]"); }
static void i_qr_scale(void *problem, char *frag) { fixture *f = problem; X->qr_scale.shape[0] -= 1; FRAG("qr_scale.shape[0]"); }
static void i_x_t(void *problem, char *frag) { fixture *f = problem; X->x.shape[0] -= 1; FRAG("x.shape[0]|qr.shape[0]"); }
static void i_x_h(void *problem, char *frag) { fixture *f = problem; X->x.shape[1] -= 1; FRAG("x.shape[1]|weights_proj.shape[1]"); }
static void i_wq_b_rows(void *problem, char *frag) { fixture *f = problem; X->idx_wq_b.shape[0] -= 1; FRAG("idx_wq_b.shape[0]|idx_wq_b_scale.shape[0]"); }
static void i_wq_b_heads(void *problem, char *frag) { fixture *f = problem; X->idx_wq_b.shape[0] -= DI_; FRAG("idx_wq_b.shape[0]|idx_wq_b_scale.shape[0]|weights_proj.shape[0]"); }
static void i_wq_b_q(void *problem, char *frag) { fixture *f = problem; X->idx_wq_b.shape[1] -= 1; FRAG("idx_wq_b.shape[1]|qr.shape[1]"); }
static void i_wq_b_scale(void *problem, char *frag) { fixture *f = problem; X->idx_wq_b_scale.shape[0] -= 1; FRAG("idx_wq_b_scale.shape[0]"); }
static void i_wproj_h(void *problem, char *frag) { fixture *f = problem; X->weights_proj.shape[1] -= 1; FRAG("weights_proj.shape[1]|x.shape[1]"); }
static void i_wproj_ni(void *problem, char *frag) { fixture *f = problem; X->weights_proj.shape[0] -= 1; FRAG("weights_proj.shape[0]|idx_wq_b.shape[0]|q_idx.shape[1]|weights.shape[1]"); }
static void i_had_cols(void *problem, char *frag) { fixture *f = problem; X->hadamard.shape[1] -= 1; FRAG("hadamard.shape[1]"); }
static void i_had_di(void *problem, char *frag)
{
    fixture *f = problem;
    X->hadamard.shape[0] = X->hadamard.shape[1] = 80, X->hadamard.stride[0] = 80; /* DI 80 disagrees with idx_wq_b */
    FRAG("hadamard|idx_wq_b|q_idx");
}
static void i_cos_w(void *problem, char *frag) { fixture *f = problem; X->rope_cos.shape[1] = 63; FRAG("rope_cos.shape[1]"); }
static void i_sin_t(void *problem, char *frag) { fixture *f = problem; X->rope_sin.shape[0] += 1; FRAG("rope_sin.shape[0]"); }
static void i_q_idx_di(void *problem, char *frag) { fixture *f = problem; X->q_idx.shape[2] -= 1; FRAG("q_idx.shape[2]"); }
static void i_q_idx_ni(void *problem, char *frag) { fixture *f = problem; X->q_idx.shape[1] -= 1; FRAG("q_idx.shape[1]"); }
static void i_q_idx_scale(void *problem, char *frag) { fixture *f = problem; X->q_idx_scale.shape[1] -= 1; FRAG("q_idx_scale.shape[1]"); }
static void i_weights_t(void *problem, char *frag) { fixture *f = problem; X->weights.shape[0] -= 1; FRAG("weights.shape[0]"); }
static void i_stride_q_idx(void *problem, char *frag) { fixture *f = problem; X->q_idx.shape[2] = 32; X->q_idx.stride[2] = 2; FRAG("q_idx.stride[2]|q_idx.shape[2]"); }
/* DI = 32 everywhere (views narrowed inside their buffers) */
static void i_di32(void *problem, char *frag)
{
    fixture *f = problem;
    const int64_t d = 32;
    X->hadamard.shape[0] = X->hadamard.shape[1] = d, X->hadamard.stride[0] = d;
    X->idx_wq_b.shape[0] = NI_ * d, X->idx_wq_b_scale.shape[0] = NI_ * d;
    X->q_idx.shape[2] = d, X->q_idx.stride[1] = d, X->q_idx.stride[0] = NI_ * d;
    FRAG("64");
}
/* Q = 131073 (spec §3.5): qr and idx_wq_b rows share one buffer row (outer stride 0) */
static void i_big_q(void *problem, char *frag)
{
    fixture *f = problem;
    X->qr.shape[1] = BIG_Q, X->qr.stride[0] = 0;
    X->qr.data = fx_alloc(f, BIG_Q, 0);
    X->idx_wq_b.shape[1] = BIG_Q, X->idx_wq_b.stride[0] = 0;
    X->idx_wq_b.data = fx_alloc(f, BIG_Q, 0);
    FRAG("131072");
}

/* indexer: V4 dtypes */
static void i_dt_qr(void *problem, char *frag) { fixture *f = problem; X->qr.dtype = DSOPS_BF16; FRAG("qr has dtype bf16"); }
static void i_dt_qr_scale(void *problem, char *frag) { fixture *f = problem; X->qr_scale.dtype = DSOPS_FP16; FRAG("qr_scale has dtype fp16"); }
static void i_dt_x(void *problem, char *frag) { fixture *f = problem; X->x.dtype = DSOPS_FP32; FRAG("x has dtype fp32"); }
static void i_dt_wq_b(void *problem, char *frag) { fixture *f = problem; X->idx_wq_b.dtype = DSOPS_BF16; FRAG("idx_wq_b has dtype bf16"); }
static void i_dt_wq_b_scale(void *problem, char *frag) { fixture *f = problem; X->idx_wq_b_scale.dtype = DSOPS_FP16; FRAG("idx_wq_b_scale has dtype fp16"); }
static void i_dt_wproj(void *problem, char *frag) { fixture *f = problem; X->weights_proj.dtype = DSOPS_FP32; FRAG("weights_proj has dtype fp32"); }
static void i_dt_cos(void *problem, char *frag) { fixture *f = problem; X->rope_cos.dtype = DSOPS_FP16; FRAG("rope_cos has dtype fp16"); }
static void i_dt_had(void *problem, char *frag) { fixture *f = problem; X->hadamard.dtype = DSOPS_FP16; FRAG("hadamard has dtype fp16"); }
static void i_dt_q_idx(void *problem, char *frag) { fixture *f = problem; X->q_idx.dtype = DSOPS_BF16; FRAG("q_idx has dtype bf16"); }
static void i_dt_q_idx_scale(void *problem, char *frag) { fixture *f = problem; X->q_idx_scale.dtype = DSOPS_FP32; FRAG("q_idx_scale has dtype fp32"); }
static void i_dt_weights(void *problem, char *frag) { fixture *f = problem; X->weights.dtype = DSOPS_BF16; FRAG("weights has dtype bf16"); }

/* indexer: V5 parameters */
static void i_ws_nan(void *problem, char *frag) { fixture *f = problem; X->weights_scale = NAN; FRAG("weights_scale"); }
static void i_ws_inf(void *problem, char *frag) { fixture *f = problem; X->weights_scale = INFINITY; FRAG("weights_scale"); }
static void i_ws_ninf(void *problem, char *frag) { fixture *f = problem; X->weights_scale = -INFINITY; FRAG("weights_scale"); }
static void i_rope_mode(void *problem, char *frag) { fixture *f = problem; X->rope_mode = (dsops_rope_mode)5; FRAG("rope_mode"); }

/* indexer: V9 aliasing */
static void i_alias_q_idx_qr(void *problem, char *frag) { fixture *f = problem; X->q_idx.data = X->qr.data; FRAG("q_idx overlaps qr in|qr overlaps q_idx in"); }
static void i_alias_scale_weights(void *problem, char *frag) { fixture *f = problem; X->q_idx_scale.data = X->weights.data; FRAG("q_idx_scale overlaps weights in|weights overlaps q_idx_scale in"); }
static void i_alias_weights_x(void *problem, char *frag) { fixture *f = problem; X->weights.data = (uint16_t *)X->x.data + 5; FRAG("weights overlaps x in|x overlaps weights in"); }
static void i_alias_q_idx_had(void *problem, char *frag) { fixture *f = problem; X->q_idx.data = X->hadamard.data; FRAG("q_idx overlaps hadamard in|hadamard overlaps q_idx in"); }
static void i_alias_scale_qr_scale(void *problem, char *frag) { fixture *f = problem; X->q_idx_scale.data = X->qr_scale.data; FRAG("q_idx_scale overlaps qr_scale in|qr_scale overlaps q_idx_scale in"); }
static void i_alias_weights_q_idx(void *problem, char *frag) { fixture *f = problem; X->weights.data = (char *)X->q_idx.data + 2; FRAG("weights overlaps q_idx in|q_idx overlaps weights in"); }
static void i_alias_q_idx_wproj(void *problem, char *frag) { fixture *f = problem; X->q_idx.data = X->weights_proj.data; FRAG("q_idx overlaps weights_proj in|weights_proj overlaps q_idx in"); }

/* a row's variant: the operator and, for mla, the dtype of wq_b */
#define VARIANT(op, int8) ((int)(op) * 2 + (int8))
#define MB VARIANT(MLA, 0)
#define MI VARIANT(MLA, 1)
#define IX VARIANT(IDX, 0)

static const val_bad_case bad_cases[] = {
    {"mla_null_x", MB, DSOPS_ERR_NULL, m_null_x},
    {"mla_null_wq_a", MI, DSOPS_ERR_NULL, m_null_wq_a},
    {"mla_null_gamma_cq", MB, DSOPS_ERR_NULL, m_null_gamma_cq},
    {"mla_null_wq_b", MI, DSOPS_ERR_NULL, m_null_wq_b},
    {"mla_null_wq_b_bf16", MB, DSOPS_ERR_NULL, m_null_wq_b},
    {"mla_int8_without_wq_b_scale", MI, DSOPS_ERR_NULL, m_null_wq_b_scale},
    {"mla_null_wkv", MB, DSOPS_ERR_NULL, m_null_wkv},
    {"mla_null_gamma_ckv", MI, DSOPS_ERR_NULL, m_null_gamma_ckv},
    {"mla_null_rope_cos", MB, DSOPS_ERR_NULL, m_null_cos},
    {"mla_null_rope_sin", MI, DSOPS_ERR_NULL, m_null_sin},
    {"mla_null_q", MB, DSOPS_ERR_NULL, m_null_q},
    {"mla_null_kv", MI, DSOPS_ERR_NULL, m_null_kv},
    {"mla_null_qr_bf16", MB, DSOPS_ERR_NULL, m_null_qr},
    {"mla_null_qr_int8", MI, DSOPS_ERR_NULL, m_null_qr},
    {"mla_int8_without_qr_scale", MI, DSOPS_ERR_NULL, m_null_qr_scale},

    {"mla_rank_x", MB, DSOPS_ERR_SHAPE, m_rank_x},
    {"mla_rank_wq_b", MI, DSOPS_ERR_SHAPE, m_rank_wq_b},
    {"mla_rank_gamma_cq", MB, DSOPS_ERR_SHAPE, m_rank_gamma_cq},
    {"mla_rank_rope_cos", MI, DSOPS_ERR_SHAPE, m_rank_cos},
    {"mla_rank_q", MB, DSOPS_ERR_SHAPE, m_rank_q},
    {"mla_rank_kv", MI, DSOPS_ERR_SHAPE, m_rank_kv},
    {"mla_rank_qr_scale", MI, DSOPS_ERR_SHAPE, m_rank_qr_scale},
    {"mla_shape_x_h", MB, DSOPS_ERR_SHAPE, m_x_h},
    {"mla_shape_x_t", MI, DSOPS_ERR_SHAPE, m_x_t},
    {"mla_shape_wq_a_h", MI, DSOPS_ERR_SHAPE, m_wq_a_h},
    {"mla_shape_wq_a_q", MB, DSOPS_ERR_SHAPE, m_wq_a_q},
    {"mla_shape_gamma_cq", MI, DSOPS_ERR_SHAPE, m_gamma_cq},
    {"mla_shape_wq_b_q", MB, DSOPS_ERR_SHAPE, m_wq_b_q},
    {"mla_shape_wq_b_q_int8", MI, DSOPS_ERR_SHAPE, m_wq_b_q},
    {"mla_shape_wq_b_rows_not_n_d", MB, DSOPS_ERR_SHAPE, m_wq_b_rows},
    {"mla_shape_wq_b_rows_not_n_d_int8", MI, DSOPS_ERR_SHAPE, m_wq_b_rows},
    {"mla_shape_wq_b_one_head_fewer", MB, DSOPS_ERR_SHAPE, m_wq_b_heads},
    {"mla_shape_wq_b_one_head_fewer_int8", MI, DSOPS_ERR_SHAPE, m_wq_b_heads_scale},
    {"mla_shape_wq_b_scale", MI, DSOPS_ERR_SHAPE, m_wq_b_scale},
    {"mla_shape_wkv_d", MB, DSOPS_ERR_SHAPE, m_wkv_d},
    {"mla_shape_wkv_h", MI, DSOPS_ERR_SHAPE, m_wkv_h},
    {"mla_shape_gamma_ckv", MB, DSOPS_ERR_SHAPE, m_gamma_ckv},
    {"mla_shape_rope_cos_width", MI, DSOPS_ERR_SHAPE, m_cos_w},
    {"mla_shape_rope_sin_tokens", MB, DSOPS_ERR_SHAPE, m_sin_t},
    {"mla_shape_q_tokens", MI, DSOPS_ERR_SHAPE, m_q_t},
    {"mla_shape_q_heads", MB, DSOPS_ERR_SHAPE, m_q_n},
    {"mla_shape_q_dim", MI, DSOPS_ERR_SHAPE, m_q_d},
    {"mla_shape_kv_tokens", MB, DSOPS_ERR_SHAPE, m_kv_t},
    {"mla_shape_kv_dim", MI, DSOPS_ERR_SHAPE, m_kv_d},
    {"mla_shape_qr_q", MB, DSOPS_ERR_SHAPE, m_qr_q},
    {"mla_shape_qr_tokens", MI, DSOPS_ERR_SHAPE, m_qr_t},
    {"mla_shape_qr_scale", MI, DSOPS_ERR_SHAPE, m_qr_scale},
    {"mla_stride_x_inner", MB, DSOPS_ERR_SHAPE, m_stride_x},
    {"mla_stride_q_inner", MI, DSOPS_ERR_SHAPE, m_stride_q},
    {"mla_d64", MB, DSOPS_ERR_SHAPE, m_d64},
    {"mla_d64_int8", MI, DSOPS_ERR_SHAPE, m_d64},
    {"mla_d1", MI, DSOPS_ERR_SHAPE, m_d1},
    {"mla_int8_q_131073", MI, DSOPS_ERR_SHAPE, m_big_q},

    {"mla_dtype_x", MB, DSOPS_ERR_DTYPE, m_dt_x},
    {"mla_dtype_wq_a", MI, DSOPS_ERR_DTYPE, m_dt_wq_a},
    {"mla_dtype_gamma_cq", MB, DSOPS_ERR_DTYPE, m_dt_gamma_cq},
    {"mla_dtype_wq_b", MB, DSOPS_ERR_DTYPE, m_dt_wq_b},
    {"mla_dtype_wq_b_scale", MI, DSOPS_ERR_DTYPE, m_dt_wq_b_scale},
    {"mla_dtype_wkv", MB, DSOPS_ERR_DTYPE, m_dt_wkv},
    {"mla_dtype_gamma_ckv", MI, DSOPS_ERR_DTYPE, m_dt_gamma_ckv},
    {"mla_dtype_rope_cos", MB, DSOPS_ERR_DTYPE, m_dt_cos},
    {"mla_dtype_rope_sin", MI, DSOPS_ERR_DTYPE, m_dt_sin},
    {"mla_dtype_q", MB, DSOPS_ERR_DTYPE, m_dt_q},
    {"mla_dtype_kv", MI, DSOPS_ERR_DTYPE, m_dt_kv},
    {"mla_dtype_qr_int8_with_bf16_wq_b", MB, DSOPS_ERR_DTYPE, m_dt_qr_int8},
    {"mla_dtype_qr_bf16_with_int8_wq_b", MI, DSOPS_ERR_DTYPE, m_dt_qr_bf16},
    {"mla_dtype_qr_scale", MI, DSOPS_ERR_DTYPE, m_dt_qr_scale},
    {"mla_dtype_invalid_enum", MB, DSOPS_ERR_DTYPE, m_dt_invalid},

    {"mla_eps_cq_nan", MB, DSOPS_ERR_PARAM, m_eps_cq_nan},
    {"mla_eps_cq_negative", MI, DSOPS_ERR_PARAM, m_eps_cq_neg},
    {"mla_eps_ckv_inf", MB, DSOPS_ERR_PARAM, m_eps_ckv_inf},
    {"mla_eps_qh_nan", MI, DSOPS_ERR_PARAM, m_eps_qh_nan},
    {"mla_eps_qh_inf", MB, DSOPS_ERR_PARAM, m_eps_qh_inf},
    {"mla_eps_qh_negative", MI, DSOPS_ERR_PARAM, m_eps_qh_neg},
    {"mla_rope_mode_3", MB, DSOPS_ERR_PARAM, m_rope_mode},
    {"mla_rope_mode_negative", MI, DSOPS_ERR_PARAM, m_rope_mode_neg},

    {"mla_alias_q_on_x", MB, DSOPS_ERR_ALIAS, m_alias_q_x},
    {"mla_alias_kv_inside_q", MI, DSOPS_ERR_ALIAS, m_alias_kv_q},
    {"mla_alias_qr_on_kv", MB, DSOPS_ERR_ALIAS, m_alias_qr_kv},
    {"mla_alias_qr_scale_after_qr", MI, DSOPS_ERR_ALIAS, m_alias_qr_scale_qr},
    {"mla_alias_q_inside_wq_b", MI, DSOPS_ERR_ALIAS, m_alias_q_wq_b},
    {"mla_alias_kv_on_rope_cos", MB, DSOPS_ERR_ALIAS, m_alias_kv_cos},
    {"mla_alias_qr_on_gamma_cq", MI, DSOPS_ERR_ALIAS, m_alias_qr_gamma},
    {"mla_alias_q_on_wq_b_scale", MI, DSOPS_ERR_ALIAS, m_alias_q_wq_b_scale},
    {"mla_alias_kv_last_element_on_q", MB, DSOPS_ERR_ALIAS, m_alias_kv_end},

    {"idx_null_qr", IX, DSOPS_ERR_NULL, i_null_qr},
    {"idx_null_qr_scale", IX, DSOPS_ERR_NULL, i_null_qr_scale},
    {"idx_null_x", IX, DSOPS_ERR_NULL, i_null_x},
    {"idx_null_idx_wq_b", IX, DSOPS_ERR_NULL, i_null_wq_b},
    {"idx_null_idx_wq_b_scale", IX, DSOPS_ERR_NULL, i_null_wq_b_scale},
    {"idx_null_weights_proj", IX, DSOPS_ERR_NULL, i_null_wproj},
    {"idx_null_rope_cos", IX, DSOPS_ERR_NULL, i_null_cos},
    {"idx_null_rope_sin", IX, DSOPS_ERR_NULL, i_null_sin},
    {"idx_null_hadamard", IX, DSOPS_ERR_NULL, i_null_had},
    {"idx_null_q_idx", IX, DSOPS_ERR_NULL, i_null_q_idx},
    {"idx_null_q_idx_scale", IX, DSOPS_ERR_NULL, i_null_q_idx_scale},
    {"idx_null_weights", IX, DSOPS_ERR_NULL, i_null_weights},

    {"idx_rank_qr", IX, DSOPS_ERR_SHAPE, i_rank_qr},
    {"idx_rank_hadamard", IX, DSOPS_ERR_SHAPE, i_rank_had},
    {"idx_rank_q_idx", IX, DSOPS_ERR_SHAPE, i_rank_q_idx},
    {"idx_rank_weights", IX, DSOPS_ERR_SHAPE, i_rank_weights},
    {"idx_shape_qr_q", IX, DSOPS_ERR_SHAPE, i_qr_q},
    {"idx_shape_qr_tokens", IX, DSOPS_ERR_SHAPE, i_qr_t},
    {"idx_shape_qr_scale", IX, DSOPS_ERR_SHAPE, i_qr_scale},
    {"idx_shape_x_tokens", IX, DSOPS_ERR_SHAPE, i_x_t},
    {"idx_shape_x_h", IX, DSOPS_ERR_SHAPE, i_x_h},
    {"idx_shape_idx_wq_b_rows", IX, DSOPS_ERR_SHAPE, i_wq_b_rows},
    {"idx_shape_idx_wq_b_one_head_fewer", IX, DSOPS_ERR_SHAPE, i_wq_b_heads},
    {"idx_shape_idx_wq_b_q", IX, DSOPS_ERR_SHAPE, i_wq_b_q},
    {"idx_shape_idx_wq_b_scale", IX, DSOPS_ERR_SHAPE, i_wq_b_scale},
    {"idx_shape_weights_proj_h", IX, DSOPS_ERR_SHAPE, i_wproj_h},
    {"idx_shape_weights_proj_heads", IX, DSOPS_ERR_SHAPE, i_wproj_ni},
    {"idx_shape_hadamard_not_square", IX, DSOPS_ERR_SHAPE, i_had_cols},
    {"idx_shape_hadamard_di_80", IX, DSOPS_ERR_SHAPE, i_had_di},
    {"idx_shape_rope_cos_width", IX, DSOPS_ERR_SHAPE, i_cos_w},
    {"idx_shape_rope_sin_tokens", IX, DSOPS_ERR_SHAPE, i_sin_t},
    {"idx_shape_q_idx_di", IX, DSOPS_ERR_SHAPE, i_q_idx_di},
    {"idx_shape_q_idx_heads", IX, DSOPS_ERR_SHAPE, i_q_idx_ni},
    {"idx_shape_q_idx_scale", IX, DSOPS_ERR_SHAPE, i_q_idx_scale},
    {"idx_shape_weights_tokens", IX, DSOPS_ERR_SHAPE, i_weights_t},
    {"idx_stride_q_idx_inner", IX, DSOPS_ERR_SHAPE, i_stride_q_idx},
    {"idx_di32", IX, DSOPS_ERR_SHAPE, i_di32},
    {"idx_q_131073", IX, DSOPS_ERR_SHAPE, i_big_q},

    {"idx_dtype_qr", IX, DSOPS_ERR_DTYPE, i_dt_qr},
    {"idx_dtype_qr_scale", IX, DSOPS_ERR_DTYPE, i_dt_qr_scale},
    {"idx_dtype_x", IX, DSOPS_ERR_DTYPE, i_dt_x},
    {"idx_dtype_idx_wq_b", IX, DSOPS_ERR_DTYPE, i_dt_wq_b},
    {"idx_dtype_idx_wq_b_scale", IX, DSOPS_ERR_DTYPE, i_dt_wq_b_scale},
    {"idx_dtype_weights_proj", IX, DSOPS_ERR_DTYPE, i_dt_wproj},
    {"idx_dtype_rope_cos", IX, DSOPS_ERR_DTYPE, i_dt_cos},
    {"idx_dtype_hadamard", IX, DSOPS_ERR_DTYPE, i_dt_had},
    {"idx_dtype_q_idx", IX, DSOPS_ERR_DTYPE, i_dt_q_idx},
    {"idx_dtype_q_idx_scale", IX, DSOPS_ERR_DTYPE, i_dt_q_idx_scale},
    {"idx_dtype_weights", IX, DSOPS_ERR_DTYPE, i_dt_weights},

    {"idx_weights_scale_nan", IX, DSOPS_ERR_PARAM, i_ws_nan},
    {"idx_weights_scale_inf", IX, DSOPS_ERR_PARAM, i_ws_inf},
    {"idx_weights_scale_minus_inf", IX, DSOPS_ERR_PARAM, i_ws_ninf},
    {"idx_rope_mode_5", IX, DSOPS_ERR_PARAM, i_rope_mode},

    {"idx_alias_q_idx_on_qr", IX, DSOPS_ERR_ALIAS, i_alias_q_idx_qr},
    {"idx_alias_q_idx_scale_on_weights", IX, DSOPS_ERR_ALIAS, i_alias_scale_weights},
    {"idx_alias_weights_inside_x", IX, DSOPS_ERR_ALIAS, i_alias_weights_x},
    {"idx_alias_q_idx_on_hadamard", IX, DSOPS_ERR_ALIAS, i_alias_q_idx_had},
    {"idx_alias_q_idx_scale_on_qr_scale", IX, DSOPS_ERR_ALIAS, i_alias_scale_qr_scale},
    {"idx_alias_weights_inside_q_idx", IX, DSOPS_ERR_ALIAS, i_alias_weights_q_idx},
    {"idx_alias_q_idx_on_weights_proj", IX, DSOPS_ERR_ALIAS, i_alias_q_idx_wproj},
};

/* ---- valid but unusual ------------------------------------------------------------------------------ */

static void ok_eps_zero(void *problem) { fixture *f = problem; f->m.eps_cq = f->m.eps_ckv = f->m.eps_qh = 0.0f; }
static void ok_cos_is_sin(void *problem) { fixture *f = problem; f->m.rope_sin = f->m.rope_cos; f->ix.rope_sin = f->ix.rope_cos; }
static void ok_inverse_half(void *problem)
{
    fixture *f = problem;
    f->m.rope_mode = f->ix.rope_mode = DSOPS_ROPE_HALF;
    f->m.rope_inverse = f->ix.rope_inverse = 1;
}
static void ok_in_half_out(void *problem) { fixture *f = problem; f->m.rope_mode = f->ix.rope_mode = DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT; }
static void ok_weights_scale_zero(void *problem) { fixture *f = problem; f->ix.weights_scale = 0.0f; }
static void ok_weights_scale_negative(void *problem) { fixture *f = problem; f->ix.weights_scale = -2.0f; }
static void ok_d65(void *problem) { fixture *f = problem; m_set_d(f, 65); }
static void ok_x_shared(void *problem) { fixture *f = problem; f->ix.x = f->m.x; } /* inputs may share memory with other inputs */
/* norm vectors take any stride (spec §1.3): both broadcast from their first element (once read as rows) */
static void ok_norms_stride0(void *problem) { fixture *f = problem; f->m.gamma_cq.stride[0] = 0, f->m.gamma_ckv.stride[0] = 0; }
/* T = 0 in every token extent: valid, nothing written (V10) */
static void ok_t0(void *problem)
{
    fixture *f = problem;
    dsops_tensor *m[6] = {&f->m.x, &f->m.rope_cos, &f->m.rope_sin, &f->m.q, &f->m.kv, &f->m.qr};
    for (int i = 0; i < 6; i++)
        m[i]->shape[0] = 0;
    if (f->m.qr_scale.data)
        f->m.qr_scale.shape[0] = 0;
    dsops_tensor *x[8] = {&f->ix.qr, &f->ix.qr_scale, &f->ix.x, &f->ix.rope_cos, &f->ix.rope_sin, &f->ix.q_idx,
                          &f->ix.q_idx_scale, &f->ix.weights};
    for (int i = 0; i < 8; i++)
        x[i]->shape[0] = 0;
}
/* every outer stride padded (the outputs' padding must stay untouched: checked through the snapshot) */
static void ok_padded_outputs(void *problem)
{
    fixture *f = problem;
    f->m.q.stride[1] = D_ + 5, f->m.q.stride[0] = N_ * (D_ + 5) + 3;
    f->m.kv.stride[0] = D_ + 9;
    f->m.qr.stride[0] = Q_ + 2;
    f->ix.q_idx.stride[1] = DI_ + 1, f->ix.q_idx.stride[0] = NI_ * (DI_ + 1) + 7;
    f->ix.q_idx_scale.stride[0] = NI_ + 3;
    f->ix.weights.stride[0] = NI_ + 1;
}

#define OK_BOTH(name, fn) {name "_mla_bf16", MB, fn}, {name "_mla_int8", MI, fn}, {name "_idx", IX, fn}

static const val_ok_case ok_cases[] = {
    OK_BOTH("ok_as_built", NULL),
    OK_BOTH("ok_cos_and_sin_one_tensor", ok_cos_is_sin),
    OK_BOTH("ok_half_inverse", ok_inverse_half),
    OK_BOTH("ok_interleaved_in_half_out", ok_in_half_out),
    OK_BOTH("ok_t0", ok_t0),
    OK_BOTH("ok_padded_outputs", ok_padded_outputs),
    {"ok_eps_zero_mla_bf16", MB, ok_eps_zero},
    {"ok_eps_zero_mla_int8", MI, ok_eps_zero},
    {"ok_d65_mla_int8", MI, ok_d65},
    {"ok_d65_mla_bf16", MB, ok_d65},
    {"ok_weights_scale_zero", IX, ok_weights_scale_zero},
    {"ok_weights_scale_negative", IX, ok_weights_scale_negative},
    {"ok_x_shared_between_operators", IX, ok_x_shared},
    {"ok_norm_vectors_stride0_mla_bf16", MB, ok_norms_stride0},
    {"ok_norm_vectors_stride0_mla_int8", MI, ok_norms_stride0},
};

/* Compares an output view of the library with the same view of the oracle's copy of the fixture. */
static void compare_view(const char *label, const char *name, const dsops_tensor *lib, const dsops_tensor *ref, tu_tol tol)
{
    const int64_t n = v4p_numel(lib);
    float *a = calloc((size_t)(n ? n : 1), 4), *b = calloc((size_t)(n ? n : 1), 4);
    for (int64_t e = 0; e < n; e++)
        a[e] = v4p_get(lib, e), b[e] = v4p_get(ref, e);
    char l[200];
    snprintf(l, sizeof l, "%s %s", label, name);
    tu_compare_close(l, a, b, (size_t)n, tol, NULL);
    free(a);
    free(b);
}

/* q of the int8 variant, over the tokens whose qr row equals the oracle's: a qr element rounded the other
 * way (within its tolerance 1 / 0 / 0; fp32 sums in another order) moves the whole token's q beyond the
 * q tolerance (test_v4_prologs compares such tokens given the library's qr). */
static void compare_q_int8(const char *label, const dsops_mla_prolog_v4_args *lib, const dsops_mla_prolog_v4_args *ref,
                           tu_tol tol)
{
    const int64_t T = lib->q.shape[0], ND = lib->q.shape[1] * lib->q.shape[2], Q = lib->qr.shape[1];
    float *a = calloc((size_t)(T * ND + 1), 4), *b = calloc((size_t)(T * ND + 1), 4);
    size_t n = 0;
    int64_t skipped = 0;
    for (int64_t t = 0; t < T; t++) {
        int same = 1;
        for (int64_t k = 0; k < Q; k++)
            same &= v4p_get(&lib->qr, t * Q + k) == v4p_get(&ref->qr, t * Q + k);
        if (!same) {
            skipped++;
            continue;
        }
        for (int64_t e = 0; e < ND; e++, n++)
            a[n] = v4p_get(&lib->q, t * ND + e), b[n] = v4p_get(&ref->q, t * ND + e);
    }
    char l[200];
    snprintf(l, sizeof l, "%s q (%lld of %lld tokens)", label, (long long)(T - skipped), (long long)T);
    tu_compare_close(l, a, b, n, tol, NULL);
    free(a);
    free(b);
}

/* Marks the bytes of every element of view t in the mask of the fixture buffer that holds it. */
static void mark_view(const fixture *f, const dsops_tensor *t, unsigned char **mask)
{
    if (!t->data)
        return;
    const int64_t n = v4p_numel(t), es = (int64_t)dsops_dtype_size(t->dtype);
    for (int64_t e = 0; e < n; e++) {
        const unsigned char *p = v4p_elem(t, e);
        for (int b = 0; b < f->nbuf; b++)
            if (p >= f->buf[b] && p + es <= f->buf[b] + f->len[b])
                memset(mask[b] + (p - f->buf[b]), 1, (size_t)es);
    }
}

/* The oracle's run on a copy of every buffer of the fixture, with its args moved onto the copies. */
typedef struct expected {
    fixture *copy;
    dsops_mla_prolog_v4_args m;
    dsops_indexer_prolog_v4_args ix;
} expected;

static void *oracle(void *problem)
{
    const fixture *f = problem;
    expected *e = tu_alloc(sizeof *e);
    fixture *g = e->copy = tu_memdup(f, sizeof *f);
    e->m = f->m, e->ix = f->ix;
    for (int i = 0; i < f->nbuf; i++) {
        g->buf[i] = tu_memdup(f->buf[i], f->len[i]);
        g->snap[i] = NULL;
        val_rebase_views("mla_prolog_v4", &e->m, f->buf[i], f->len[i], g->buf[i]);
        val_rebase_views("indexer_prolog_v4", &e->ix, f->buf[i], f->len[i], g->buf[i]);
    }
    if (f->op == MLA)
        dsops_ref_mla_prolog_v4(&e->m);
    else
        dsops_ref_indexer_prolog_v4(&e->ix);
    return e;
}

static void free_expected(void *expected_result)
{
    expected *e = expected_result;
    for (int i = 0; i < e->copy->nbuf; i++)
        free(e->copy->buf[i]);
    free(e->copy);
    free(e);
}

/* The outputs within their tolerances, and every byte that is not an element of an output view unchanged. */
static void compare(void *problem, void *expected_result, const val_ok_case *c)
{
    fixture *f = problem;
    const expected *e = expected_result;
    const which_op op = f->op;
    const int int8 = f->int8;
    static const tu_tol bf = {1e-4, 1.0 / 128, 0.005}, i8 = {1, 0, 0}, qs = {2.5e-5, 0.005, 0.005},
                        ix = {1e-4, 0.007825, 0.005};
    if (op == MLA) {
        if (int8)
            compare_q_int8(c->name, &f->m, &e->m, bf);
        else
            compare_view(c->name, "q", &f->m.q, &e->m.q, bf);
        compare_view(c->name, "kv", &f->m.kv, &e->m.kv, bf);
        compare_view(c->name, "qr", &f->m.qr, &e->m.qr, int8 ? i8 : bf);
        if (int8)
            compare_view(c->name, "qr_scale", &f->m.qr_scale, &e->m.qr_scale, qs);
    } else {
        compare_view(c->name, "q_idx", &f->ix.q_idx, &e->ix.q_idx, i8);
        compare_view(c->name, "q_idx_scale", &f->ix.q_idx_scale, &e->ix.q_idx_scale, ix);
        compare_view(c->name, "weights", &f->ix.weights, &e->ix.weights, ix);
    }
    unsigned char *mask[40];
    for (int i = 0; i < f->nbuf; i++)
        mask[i] = tu_alloc(f->len[i]);
    const dsops_tensor *outs[4] = {&f->m.q, &f->m.kv, &f->m.qr, &f->m.qr_scale};
    const dsops_tensor *iouts[3] = {&f->ix.q_idx, &f->ix.q_idx_scale, &f->ix.weights};
    for (int k = 0; k < (op == MLA ? 4 : 3); k++)
        mark_view(f, op == MLA ? outs[k] : iouts[k], mask);
    int64_t stray = 0;
    for (int i = 0; i < f->nbuf; i++) {
        for (size_t b = 0; b < f->len[i]; b++)
            stray += !mask[i][b] && f->buf[i][b] != f->snap[i][b];
        free(mask[i]);
    }
    tu_check(stray == 0, "%s: %lld bytes outside the outputs' elements changed", c->name, (long long)stray);
    if (c->mutate == ok_t0)
        unchanged(f, "ok_t0: nothing written", 0);
}

/* ---- the operators for the table runner ------------------------------------------------------------ */

static void *make_problem(int variant)
{
    fixture *f = make_fixture(variant % 2);
    f->op = (which_op)(variant / 2);
    return f;
}
static void free_problem(void *f) { free_fixture(f); }
static dsops_status call(dsops_context *c, void *problem)
{
    const fixture *f = problem;
    return f->op == MLA ? dsops_mla_prolog_v4(c, &f->m) : dsops_indexer_prolog_v4(c, &f->ix);
}
static void arm(void *f) { snapshot(f); }
static void untouched(void *f, const char *name) { unchanged(f, name, 0); }

static const val_ops v4_ops = {
    .make = make_problem, .free = free_problem, .call = call, .arm = arm, .untouched = untouched,
    .oracle = oracle, .compare = compare, .free_expected = free_expected,
};

/* ---- init, NULL args, prepare ---------------------------------------------------------------------- */

static void test_init(void)
{
    if (!tu_selected("init"))
        return;
    const float ws = (float)(1.0 / sqrt(64.0 * 128.0));
    for (int p = DSOPS_PRESET_V4_FLASH; p <= DSOPS_PRESET_V4_PRO; p++) {
        dsops_mla_prolog_v4_args m;
        memset(&m, 0x5a, sizeof m);
        dsops_status st = dsops_mla_prolog_v4_init(&m, (dsops_preset)p);
        tu_check(st == DSOPS_OK && m.eps_cq == 1e-6f && m.eps_ckv == 1e-6f && m.eps_qh == 1e-6f &&
                     m.rope_mode == DSOPS_ROPE_INTERLEAVED && m.rope_inverse == 0 && m.prepared == NULL,
                 "init: mla_prolog_v4 preset %d: %s, eps %g / %g / %g, rope_mode %d, rope_inverse %d", p,
                 dsops_status_name(st), (double)m.eps_cq, (double)m.eps_ckv, (double)m.eps_qh, (int)m.rope_mode,
                 m.rope_inverse);
        tu_check(m.x.data == NULL && m.wq_b_scale.data == NULL && m.q.data == NULL && m.qr_scale.data == NULL,
                 "init: mla_prolog_v4 preset %d: tensors not cleared", p);
        dsops_indexer_prolog_v4_args ix;
        memset(&ix, 0x5a, sizeof ix);
        st = dsops_indexer_prolog_v4_init(&ix, (dsops_preset)p);
        tu_check(st == DSOPS_OK && ix.weights_scale == ws && ix.rope_mode == DSOPS_ROPE_INTERLEAVED &&
                     ix.rope_inverse == 0 && ix.prepared == NULL,
                 "init: indexer_prolog_v4 preset %d: %s, weights_scale %.9g, rope_mode %d, rope_inverse %d", p,
                 dsops_status_name(st), (double)ix.weights_scale, (int)ix.rope_mode, ix.rope_inverse);
        tu_check(ix.qr.data == NULL && ix.hadamard.data == NULL && ix.weights.data == NULL,
                 "init: indexer_prolog_v4 preset %d: tensors not cleared", p);
    }
    dsops_mla_prolog_v4_args m;
    dsops_indexer_prolog_v4_args ix;
    tu_check(dsops_mla_prolog_v4_init(&m, DSOPS_PRESET_V32) == DSOPS_ERR_PARAM,
             "init: mla_prolog_v4 with preset v32 not DSOPS_ERR_PARAM");
    tu_check(dsops_indexer_prolog_v4_init(&ix, DSOPS_PRESET_V32) == DSOPS_ERR_PARAM,
             "init: indexer_prolog_v4 with preset v32 not DSOPS_ERR_PARAM");
    tu_check(dsops_mla_prolog_v4_init(&m, (dsops_preset)9) == DSOPS_ERR_PARAM &&
                 dsops_indexer_prolog_v4_init(&ix, (dsops_preset)-1) == DSOPS_ERR_PARAM,
             "init: an unknown preset not DSOPS_ERR_PARAM");
    tu_check(dsops_mla_prolog_v4_init(NULL, DSOPS_PRESET_V4_FLASH) == DSOPS_ERR_NULL &&
                 dsops_indexer_prolog_v4_init(NULL, DSOPS_PRESET_V4_FLASH) == DSOPS_ERR_NULL,
             "init: NULL args not DSOPS_ERR_NULL");
    tu_check(dsops_mla_prolog_v4(ctx, NULL) == DSOPS_ERR_NULL && dsops_indexer_prolog_v4(ctx, NULL) == DSOPS_ERR_NULL,
             "a NULL args pointer is not DSOPS_ERR_NULL");
}

/* A prepare refused with `want`, its message naming `field`; an object made all the same is destroyed. */
static void expect_prepare_rejected(const char *label, dsops_status st, dsops_prepared **p, dsops_status want,
                                    const char *field)
{
    tu_check(st == want && strstr(dsops_last_error(), field), "%s: %s (%s)", label, dsops_status_name(st),
             dsops_last_error());
    if (st == DSOPS_OK)
        dsops_prepared_destroy(*p), *p = NULL;
}

static void test_prepare_checks(void)
{
    if (!tu_selected("prepare"))
        return;
    fixture *f = make_fixture(1);
    dsops_prepared *p = NULL;
    dsops_mla_prolog_v4_args m = f->m;
    m.wq_a.data = NULL;
    expect_prepare_rejected("prepare_mla_null_wq_a", dsops_mla_prolog_v4_prepare(ctx, &m, &p), &p, DSOPS_ERR_NULL,
                            "wq_a");
    m = f->m;
    m.wkv.dtype = DSOPS_FP16;
    expect_prepare_rejected("prepare_mla_fp16_wkv", dsops_mla_prolog_v4_prepare(ctx, &m, &p), &p, DSOPS_ERR_DTYPE,
                            "wkv");
    expect_prepare_rejected("prepare_mla_null_out", dsops_mla_prolog_v4_prepare(ctx, &f->m, NULL), &p,
                            DSOPS_ERR_NULL, "");
    expect_prepare_rejected("prepare_mla_null_args", dsops_mla_prolog_v4_prepare(ctx, NULL, &p), &p, DSOPS_ERR_NULL,
                            "");
    dsops_indexer_prolog_v4_args ix = f->ix;
    ix.idx_wq_b.dtype = DSOPS_BF16;
    expect_prepare_rejected("prepare_idx_bf16_idx_wq_b", dsops_indexer_prolog_v4_prepare(ctx, &ix, &p), &p,
                            DSOPS_ERR_DTYPE, "idx_wq_b");
    ix = f->ix;
    ix.weights_proj.data = NULL;
    expect_prepare_rejected("prepare_idx_null_weights_proj", dsops_indexer_prolog_v4_prepare(ctx, &ix, &p), &p,
                            DSOPS_ERR_NULL, "weights_proj");
    expect_prepare_rejected("prepare_idx_null_out", dsops_indexer_prolog_v4_prepare(ctx, &f->ix, NULL), &p,
                            DSOPS_ERR_NULL, "");
    /* a valid prepare, then a call whose weights are other memory: DSOPS_ERR_PARAM, nothing written */
    dsops_status st = dsops_indexer_prolog_v4_prepare(ctx, &f->ix, &p);
    if (tu_check(st == DSOPS_OK && p, "prepare_idx: %s (%s)", dsops_status_name(st), dsops_last_error())) {
        fixture *o = make_fixture(1);
        ix = f->ix;
        ix.prepared = p;
        ix.weights_proj = o->ix.weights_proj;
        snapshot(f);
        st = dsops_indexer_prolog_v4(ctx, &ix);
        tu_check(st == DSOPS_ERR_PARAM && strstr(dsops_last_error(), "prepared"),
                 "prepared_other_weights_proj: %s (%s), expected DSOPS_ERR_PARAM naming prepared", dsops_status_name(st),
                 dsops_last_error());
        unchanged(f, "prepared_other_weights_proj", 1);
        free_fixture(o);
        dsops_prepared_destroy(p);
    }
    dsops_prepared_destroy(NULL); /* no-op */
    free_fixture(f);
}

/* hc_pre with x [0, 2^32, 32] over stride 0 (no element, a valid view): M = (2 + HC) * HC does not fit in int64,
 * and the call is refused with DSOPS_ERR_SHAPE before M is computed (it once overflowed). */
static void test_hc_pre_huge_hc(void)
{
    if (!tu_selected("hc_pre_huge_hc"))
        return;
    uint16_t x[32] = {0};                    /* [0, HC, 32] bf16: no element */
    float fn[8 * 64] = {0}, scale[3] = {0};  /* [8, 64], [3] fp32: never read */
    float base[8] = {0}, post[2], comb[4];   /* [8], [0, HC], [0, HC, HC] fp32 */
    uint16_t y[32];                          /* [0, 32] bf16 */
    dsops_hc_pre_args a;
    dsops_hc_pre_init(&a, DSOPS_PRESET_V4_FLASH);
    const int64_t HC = (int64_t)1 << 32; /* within the 2^60 bound on one extent, but HC^2 is not */
    a.x = dsops_tensor_make(x, DSOPS_BF16, 3, (int64_t[]){0, HC, 32});
    a.x.stride[1] = 0;
    a.hc_fn = dsops_tensor_make(fn, DSOPS_FP32, 2, (int64_t[]){8, 64});
    a.hc_scale = dsops_tensor_make(scale, DSOPS_FP32, 1, (int64_t[]){3});
    a.hc_base = dsops_tensor_make(base, DSOPS_FP32, 1, (int64_t[]){8});
    a.y = dsops_tensor_make(y, DSOPS_BF16, 2, (int64_t[]){0, 32});
    a.post = dsops_tensor_make(post, DSOPS_FP32, 2, (int64_t[]){0, 2});
    a.comb = dsops_tensor_make(comb, DSOPS_FP32, 3, (int64_t[]){0, 2, 2});
    tu_check_rejected("hc_pre_huge_hc", dsops_hc_pre(ctx, &a), DSOPS_ERR_SHAPE, "overflows");
}

/* The order of every validation program (tests/validation.h): init, the bad rows, the ok rows and its own cases. */
int main(int argc, char **argv)
{
    tu_init(argc, argv, 42);
    ctx = tu_context();
    test_init();
    test_hc_pre_huge_hc();
    val_run_bad(&v4_ops, ctx, bad_cases, VAL_COUNT(bad_cases));
    val_run_ok(&v4_ops, ctx, ok_cases, VAL_COUNT(ok_cases));
    test_prepare_checks();
    dsops_context_destroy(ctx);
    return tu_finish();
}
