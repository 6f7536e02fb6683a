/* Argument validation of mla_prolog_v32 (spec §1.6 V1-V10, §4.1 "Validation"): a table of bad argument
 * sets, each with its expected status and a message fragment (alternatives separated by '|'). After
 * every error, no byte of the outputs and the caches may have changed. A second table holds argument
 * sets that look suspicious but are valid; they must succeed and match the oracle. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "problems_check.h"
#include "ref.h"
#include "test_util.h"
#include "validation.h"

static dsops_context *ctx;

/* The base problem: T 5, H 256, Q 128, N 4, Dqn 32, Dc 256 (512 for packed_int8), BS 16, NB 4; tokens
 * 0, 2, 3 write rows, tokens 1 and 4 have negative indices. */
static mp_problem *base(int int8_wq_b, dsops_kv_layout layout)
{
    mp_spec s;
    memset(&s, 0, sizeof s);
    s.T = 5, s.H = 256, s.Q = 128, s.N = 4, s.Dqn = 32, s.Dc = layout == DSOPS_KV_PACKED_INT8 ? 512 : 256;
    s.BS = 16, s.NB = 4;
    s.int8_wq_b = int8_wq_b;
    s.layout = layout;
    s.rope_mode = DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT;
    s.eps_cq = s.eps_ckv = 1e-6f;
    s.index_mode = MP_IDX_SOME;
    s.big_guard = 1;
    mp_problem *p = mp_make(&s, 99);
    p->cache_index[0] = 5, p->cache_index[1] = -1, p->cache_index[2] = 17, p->cache_index[3] = 63,
    p->cache_index[4] = INT64_MIN;
    return p;
}

#define FRAG(...) snprintf(frag, VAL_FRAG_MAX, __VA_ARGS__)
#define A (&p->args)

/* ---- V2 NULL ----------------------------------------------------------------------------------------- */
static void null_x(void *problem, char *frag) { mp_problem *p = problem; A->x.data = NULL; FRAG("x"); }
static void null_wq_a(void *problem, char *frag) { mp_problem *p = problem; A->wq_a.data = NULL; FRAG("wq_a"); }
static void null_gamma_cq(void *problem, char *frag) { mp_problem *p = problem; A->gamma_cq.data = NULL; FRAG("gamma_cq"); }
static void null_wq_b(void *problem, char *frag) { mp_problem *p = problem; A->wq_b.data = NULL; FRAG("wq_b"); }
static void null_wq_b_scale(void *problem, char *frag) { mp_problem *p = problem; A->wq_b_scale.data = NULL; FRAG("wq_b_scale"); }
static void null_w_uk(void *problem, char *frag) { mp_problem *p = problem; A->w_uk.data = NULL; FRAG("w_uk"); }
static void null_wkv_a(void *problem, char *frag) { mp_problem *p = problem; A->wkv_a.data = NULL; FRAG("wkv_a"); }
static void null_gamma_ckv(void *problem, char *frag) { mp_problem *p = problem; A->gamma_ckv.data = NULL; FRAG("gamma_ckv"); }
static void null_cos(void *problem, char *frag) { mp_problem *p = problem; A->rope_cos.data = NULL; FRAG("rope_cos"); }
static void null_sin(void *problem, char *frag) { mp_problem *p = problem; A->rope_sin.data = NULL; FRAG("rope_sin"); }
static void null_index(void *problem, char *frag) { mp_problem *p = problem; A->cache_index.data = NULL; FRAG("cache_index"); }
static void null_kv(void *problem, char *frag) { mp_problem *p = problem; A->kv_cache.data = NULL; FRAG("kv_cache"); }
static void null_kv_scale(void *problem, char *frag) { mp_problem *p = problem; A->kv_scale_cache.data = NULL; FRAG("kv_scale_cache"); }
static void null_kr(void *problem, char *frag) { mp_problem *p = problem; A->kr_cache.data = NULL; FRAG("kr_cache"); }
static void null_packed(void *problem, char *frag) { mp_problem *p = problem; A->kv_packed.data = NULL; FRAG("kv_packed"); }
static void null_q_nope(void *problem, char *frag) { mp_problem *p = problem; A->q_nope.data = NULL; FRAG("q_nope"); }
static void null_q_rope(void *problem, char *frag) { mp_problem *p = problem; A->q_rope.data = NULL; FRAG("q_rope"); }
static void null_qr(void *problem, char *frag) { mp_problem *p = problem; A->qr.data = NULL; FRAG("qr"); }
static void null_qr_scale(void *problem, char *frag) { mp_problem *p = problem; A->qr_scale.data = NULL; FRAG("qr_scale"); }
/* split_int8 caches given to a packed_int8 call are ignored, but its own cache must be there */
static void packed_given_split(void *problem, char *frag)
{
    mp_problem *p = problem;
    A->kv_cache = A->kv_packed;
    A->kv_packed.data = NULL;
    FRAG("kv_packed");
}

/* ---- V3 shapes --------------------------------------------------------------------------------------- */
static void rank_x(void *problem, char *frag) { mp_problem *p = problem; A->x.ndim = 3; A->x.shape[2] = 1; A->x.stride[2] = 1; FRAG("x has rank 3"); }
static void rank_w_uk(void *problem, char *frag) { mp_problem *p = problem; A->w_uk.ndim = 2; FRAG("w_uk has rank 2"); }
static void rank_index(void *problem, char *frag) { mp_problem *p = problem; A->cache_index.ndim = 2; A->cache_index.shape[1] = 1; A->cache_index.stride[1] = 1; FRAG("cache_index has rank 2"); }
static void rank_kv(void *problem, char *frag) { mp_problem *p = problem; A->kv_cache.ndim = 2; FRAG("kv_cache has rank 2"); }
static void shape_x_h(void *problem, char *frag) { mp_problem *p = problem; A->x.shape[1] -= 1; FRAG("x.shape[1]|wq_a.shape[1]|wkv_a.shape[1]"); }
static void shape_wq_a_h(void *problem, char *frag) { mp_problem *p = problem; A->wq_a.shape[1] -= 1; FRAG("wq_a"); }
static void shape_wkv_a_h(void *problem, char *frag) { mp_problem *p = problem; A->wkv_a.shape[1] -= 1; FRAG("wkv_a.shape[1]"); }
static void shape_gamma_cq(void *problem, char *frag) { mp_problem *p = problem; A->gamma_cq.shape[0] -= 1; FRAG("gamma_cq.shape[0]"); }
static void shape_wq_b_q(void *problem, char *frag) { mp_problem *p = problem; A->wq_b.shape[1] -= 1; FRAG("wq_b.shape[1]"); }
static void shape_wq_b_rows(void *problem, char *frag) { mp_problem *p = problem; A->wq_b.shape[0] -= 1; FRAG("wq_b.shape[0]|w_uk|wq_b_scale"); }
static void shape_wq_b_scale(void *problem, char *frag) { mp_problem *p = problem; A->wq_b_scale.shape[0] -= 1; FRAG("wq_b_scale.shape[0]"); }
static void shape_w_uk_dqn(void *problem, char *frag) { mp_problem *p = problem; A->w_uk.shape[1] -= 1; FRAG("w_uk.shape[1]|wq_b.shape[0]"); }
static void shape_w_uk_n(void *problem, char *frag) { mp_problem *p = problem; A->w_uk.shape[0] -= 1; FRAG("w_uk.shape[0]|wq_b.shape[0]|q_nope.shape[1]"); }
static void shape_w_uk_dc(void *problem, char *frag) { mp_problem *p = problem; A->w_uk.shape[2] -= 128; FRAG("w_uk.shape[2]|shape[2]|gamma_ckv|wkv_a"); }
static void shape_wkv_a_rows(void *problem, char *frag) { mp_problem *p = problem; A->wkv_a.shape[0] -= 1; FRAG("wkv_a.shape[0]"); }
static void shape_gamma_ckv(void *problem, char *frag) { mp_problem *p = problem; A->gamma_ckv.shape[0] -= 1; FRAG("gamma_ckv.shape[0]"); }
static void shape_cos_w(void *problem, char *frag) { mp_problem *p = problem; A->rope_cos.shape[1] = 32; FRAG("rope_cos.shape[1] = 32"); }
static void shape_sin_t(void *problem, char *frag) { mp_problem *p = problem; A->rope_sin.shape[0] -= 1; FRAG("rope_sin.shape[0] = 4"); }
static void shape_index(void *problem, char *frag) { mp_problem *p = problem; A->cache_index.shape[0] -= 1; FRAG("cache_index.shape[0] = 4"); }
static void shape_kv_dc(void *problem, char *frag) { mp_problem *p = problem; A->kv_cache.shape[2] -= 128; FRAG("kv_cache.shape[2] = 128"); }
static void shape_kv_nb(void *problem, char *frag) { mp_problem *p = problem; A->kr_cache.shape[0] -= 1; FRAG("kr_cache.shape[0] = 3|kv_cache.shape[0]"); }
static void shape_kr_bs(void *problem, char *frag) { mp_problem *p = problem; A->kr_cache.shape[1] -= 1; FRAG("kr_cache.shape[1] = 15|kv_cache.shape[1]"); }
static void shape_kr_w(void *problem, char *frag) { mp_problem *p = problem; A->kr_cache.shape[2] = 32; FRAG("kr_cache.shape[2] = 32"); }
static void shape_kv_scale(void *problem, char *frag) { mp_problem *p = problem; A->kv_scale_cache.shape[2] = 1; FRAG("kv_scale_cache.shape[2] = 1"); }
static void shape_packed_row(void *problem, char *frag) { mp_problem *p = problem; A->kv_packed.shape[2] = 655; FRAG("kv_packed.shape[2] = 655"); }
static void shape_q_nope_n(void *problem, char *frag) { mp_problem *p = problem; A->q_nope.shape[1] -= 1; FRAG("q_nope.shape[1] = 3"); }
static void shape_q_nope_dc(void *problem, char *frag) { mp_problem *p = problem; A->q_nope.shape[2] -= 1; FRAG("q_nope.shape[2] = 255"); }
static void shape_q_rope_w(void *problem, char *frag) { mp_problem *p = problem; A->q_rope.shape[2] = 32; FRAG("q_rope.shape[2] = 32"); }
static void shape_q_rope_t(void *problem, char *frag) { mp_problem *p = problem; A->q_rope.shape[0] -= 1; FRAG("q_rope.shape[0] = 4"); }
static void shape_qr(void *problem, char *frag) { mp_problem *p = problem; A->qr.shape[1] -= 1; FRAG("qr.shape[1] = 127"); }
static void shape_qr_scale(void *problem, char *frag) { mp_problem *p = problem; A->qr_scale.shape[0] -= 1; FRAG("qr_scale.shape[0] = 4"); }
static void stride_x(void *problem, char *frag) { mp_problem *p = problem; A->x.shape[1] /= 2; A->wq_a.shape[1] /= 2; A->wkv_a.shape[1] /= 2; A->x.stride[1] = 2; FRAG("x.stride[1]"); }
static void stride_kv(void *problem, char *frag) { mp_problem *p = problem; A->kv_cache.shape[2] /= 2; A->kv_cache.stride[2] = 2; FRAG("kv_cache.stride[2]|kv_cache.shape[2]"); }
/* int8 layouts need Dc % 128 == 0: every Dc-sized extent narrowed to 192 (valid memory) */
static void int8_dc192(void *problem, char *frag)
{
    mp_problem *p = problem;
    A->w_uk.shape[2] = 192;
    A->wkv_a.shape[0] = 192 + 64;
    A->gamma_ckv.shape[0] = 192;
    A->q_nope.shape[2] = 192;
    A->kv_cache.shape[2] = 192;
    A->kv_scale_cache.shape[2] = 1;
    FRAG("128");
}
/* packed_int8 needs Dc = 512 */
static void packed_dc256(void *problem, char *frag)
{
    mp_problem *p = problem;
    A->w_uk.shape[2] = 256;
    A->wkv_a.shape[0] = 256 + 64;
    A->gamma_ckv.shape[0] = 256;
    A->q_nope.shape[2] = 256;
    FRAG("512");
}

/* ---- V4 dtypes --------------------------------------------------------------------------------------- */
static void dtype_x(void *problem, char *frag) { mp_problem *p = problem; A->x.dtype = DSOPS_FP16; FRAG("x has dtype fp16"); }
static void dtype_wq_a(void *problem, char *frag) { mp_problem *p = problem; A->wq_a.dtype = DSOPS_INT8; FRAG("wq_a has dtype int8"); }
static void dtype_gamma_cq(void *problem, char *frag) { mp_problem *p = problem; A->gamma_cq.dtype = DSOPS_FP16; FRAG("gamma_cq has dtype fp16"); }
static void dtype_wq_b(void *problem, char *frag) { mp_problem *p = problem; A->wq_b.dtype = DSOPS_FP16; FRAG("wq_b has dtype fp16"); }
static void dtype_wq_b_scale(void *problem, char *frag) { mp_problem *p = problem; A->wq_b_scale.dtype = DSOPS_BF16; FRAG("wq_b_scale has dtype bf16"); }
static void dtype_w_uk(void *problem, char *frag) { mp_problem *p = problem; A->w_uk.dtype = DSOPS_INT8; FRAG("w_uk has dtype int8"); }
static void dtype_wkv_a(void *problem, char *frag) { mp_problem *p = problem; A->wkv_a.dtype = DSOPS_FP16; FRAG("wkv_a has dtype fp16"); }
static void dtype_gamma_ckv(void *problem, char *frag) { mp_problem *p = problem; A->gamma_ckv.dtype = DSOPS_INT32; FRAG("gamma_ckv has dtype int32"); }
static void dtype_cos(void *problem, char *frag) { mp_problem *p = problem; A->rope_cos.dtype = DSOPS_FP16; FRAG("rope_cos has dtype fp16"); }
static void dtype_sin(void *problem, char *frag) { mp_problem *p = problem; A->rope_sin.dtype = DSOPS_INT8; FRAG("rope_sin has dtype int8"); }
static void dtype_index(void *problem, char *frag) { mp_problem *p = problem; A->cache_index.dtype = DSOPS_INT32; FRAG("cache_index has dtype int32"); }
static void dtype_kv_bf16_layout(void *problem, char *frag) { mp_problem *p = problem; A->kv_cache.dtype = DSOPS_INT8; FRAG("kv_cache has dtype int8"); }
static void dtype_kv_int8_layout(void *problem, char *frag) { mp_problem *p = problem; A->kv_cache.dtype = DSOPS_BF16; FRAG("kv_cache has dtype bf16"); }
static void dtype_kv_scale(void *problem, char *frag) { mp_problem *p = problem; A->kv_scale_cache.dtype = DSOPS_FP16; FRAG("kv_scale_cache has dtype fp16"); }
static void dtype_kr(void *problem, char *frag) { mp_problem *p = problem; A->kr_cache.dtype = DSOPS_FP16; FRAG("kr_cache has dtype fp16"); }
static void dtype_packed(void *problem, char *frag) { mp_problem *p = problem; A->kv_packed.dtype = DSOPS_INT8; FRAG("kv_packed has dtype int8"); }
static void dtype_q_nope(void *problem, char *frag) { mp_problem *p = problem; A->q_nope.dtype = DSOPS_FP16; FRAG("q_nope has dtype fp16"); }
static void dtype_q_rope(void *problem, char *frag) { mp_problem *p = problem; A->q_rope.dtype = DSOPS_FP32; FRAG("q_rope has dtype fp32"); }
static void dtype_qr_int8_for_bf16(void *problem, char *frag) { mp_problem *p = problem; A->qr.dtype = DSOPS_INT8; FRAG("qr has dtype int8"); }
static void dtype_qr_bf16_for_int8(void *problem, char *frag) { mp_problem *p = problem; A->qr.dtype = DSOPS_BF16; FRAG("qr has dtype bf16"); }
static void dtype_qr_scale(void *problem, char *frag) { mp_problem *p = problem; A->qr_scale.dtype = DSOPS_BF16; FRAG("qr_scale has dtype bf16"); }
/* Q <= 131072 for int8 wq_b (spec §2.2): Q = 131073 with real buffers (wq_a rows share memory through a
 * zero outer stride; the large buffers are calloc'ed and never touched by a library that validates first) */
static void int8_q_too_large(void *problem, char *frag)
{
    mp_problem *p = problem;
    const int64_t Q = 131073, NG = A->wq_b.shape[0], T = A->x.shape[0];
    A->wq_a.shape[0] = Q, A->wq_a.stride[0] = 0;
    dsops_tensor g = A->gamma_cq;
    g.shape[0] = Q;
    g.data = calloc((size_t)Q, dsops_dtype_size(g.dtype));
    A->gamma_cq = g;
    int64_t s2[2] = {NG, Q};
    A->wq_b = dsops_tensor_make(calloc((size_t)(NG * Q), 1), DSOPS_INT8, 2, s2);
    s2[0] = T;
    A->qr = dsops_tensor_make(calloc((size_t)(T * Q), 1), DSOPS_INT8, 2, s2);
    tf_adopt(&p->fx, A->gamma_cq.data);
    tf_adopt(&p->fx, A->wq_b.data);
    tf_adopt(&p->fx, A->qr.data);
    FRAG("131072|wq_b.shape[1]|Q");
}

/* ---- V5 parameters ----------------------------------------------------------------------------------- */
static void eps_cq_neg(void *problem, char *frag) { mp_problem *p = problem; A->eps_cq = -1e-6f; FRAG("eps_cq"); }
static void eps_cq_nan(void *problem, char *frag) { mp_problem *p = problem; A->eps_cq = NAN; FRAG("eps_cq"); }
static void eps_ckv_inf(void *problem, char *frag) { mp_problem *p = problem; A->eps_ckv = INFINITY; FRAG("eps_ckv"); }
static void eps_ckv_neg(void *problem, char *frag) { mp_problem *p = problem; A->eps_ckv = -0.5f; FRAG("eps_ckv"); }
static void bad_rope_mode(void *problem, char *frag) { mp_problem *p = problem; A->rope_mode = (dsops_rope_mode)7; FRAG("rope_mode"); }
static void bad_rope_mode_neg(void *problem, char *frag) { mp_problem *p = problem; A->rope_mode = (dsops_rope_mode)-1; FRAG("rope_mode"); }
static void bad_layout(void *problem, char *frag) { mp_problem *p = problem; A->kv_layout = (dsops_kv_layout)9; FRAG("kv_layout"); }

/* ---- V8 slots ---------------------------------------------------------------------------------------- */
static void index_too_big(void *problem, char *frag) { mp_problem *p = problem; p->cache_index[2] = 64; FRAG("cache_index[2] = 64"); }
static void index_huge(void *problem, char *frag) { mp_problem *p = problem; p->cache_index[4] = INT64_MAX; FRAG("cache_index[4]"); }
static void index_dup(void *problem, char *frag) { mp_problem *p = problem; p->cache_index[3] = 5; FRAG("cache_index[3] = 5|cache_index holds slot 5"); }
static void index_dup_last(void *problem, char *frag) { mp_problem *p = problem; p->cache_index[4] = 63; FRAG("cache_index[4] = 63|cache_index holds slot 63"); }

/* ---- V9 aliasing --------------------------------------------------------------------------------------- */
static void alias_q(void *problem, char *frag) { mp_problem *p = problem; A->q_rope.data = A->q_nope.data; FRAG("overlaps"); }
static void alias_qr_x(void *problem, char *frag) { mp_problem *p = problem; A->qr.data = A->x.data; FRAG("overlaps"); }
static void alias_qnope_wq_a(void *problem, char *frag) { mp_problem *p = problem; A->q_rope.data = A->wq_a.data; FRAG("overlaps"); }
static void alias_kr_kv(void *problem, char *frag) { mp_problem *p = problem; A->kr_cache.data = A->kv_cache.data; FRAG("overlaps"); }
static void alias_kv_w_uk(void *problem, char *frag) { mp_problem *p = problem; A->kv_cache.data = A->w_uk.data; FRAG("overlaps"); }
static void alias_qnope_kv(void *problem, char *frag) { mp_problem *p = problem; A->q_rope.data = A->kv_cache.data; FRAG("overlaps"); }
static void alias_qr_scale(void *problem, char *frag) { mp_problem *p = problem; A->qr_scale.data = A->qr.data; FRAG("overlaps"); }
static void alias_packed_cos(void *problem, char *frag) { mp_problem *p = problem; A->rope_cos.data = A->kv_packed.data; A->rope_cos.dtype = DSOPS_BF16; FRAG("overlaps"); }
/* cache_index (an input) inside the scale cache: its values are copied there first, so only the overlap is wrong */
static void alias_scale_index(void *problem, char *frag)
{
    mp_problem *p = problem;
    memcpy(A->kv_scale_cache.data, A->cache_index.data, sizeof(int64_t) * (size_t)A->cache_index.shape[0]);
    A->cache_index.data = A->kv_scale_cache.data;
    p->cache_index = A->cache_index.data;
    FRAG("overlaps");
}

/* a row's variant: the dtype of wq_b and the kv layout */
#define VARIANT(int8_wq_b, layout) ((int)(layout) * 2 + (int8_wq_b))
#define BF VARIANT(0, DSOPS_KV_SPLIT_BF16)
#define I8 VARIANT(1, DSOPS_KV_SPLIT_INT8)
#define PK VARIANT(1, DSOPS_KV_PACKED_INT8)
#define BP VARIANT(0, DSOPS_KV_PACKED_INT8)

/* The rule table (validation.h): its rows look like every validation program's rows, in shape only; each is
 * one rule of this operator's fields. */
static const val_bad_case bad_cases[] = {
    {"null_x", BF, DSOPS_ERR_NULL, null_x},
    {"null_wq_a", BF, DSOPS_ERR_NULL, null_wq_a},
    {"null_gamma_cq", I8, DSOPS_ERR_NULL, null_gamma_cq},
    {"null_wq_b", I8, DSOPS_ERR_NULL, null_wq_b},
    {"null_wq_b_scale_int8", I8, DSOPS_ERR_NULL, null_wq_b_scale},
    {"null_wq_b_scale_int8_packed", PK, DSOPS_ERR_NULL, null_wq_b_scale},
    {"null_w_uk", BF, DSOPS_ERR_NULL, null_w_uk},
    {"null_wkv_a", I8, DSOPS_ERR_NULL, null_wkv_a},
    {"null_gamma_ckv", BF, DSOPS_ERR_NULL, null_gamma_ckv},
    {"null_rope_cos", BF, DSOPS_ERR_NULL, null_cos},
    {"null_rope_sin", PK, DSOPS_ERR_NULL, null_sin},
    {"null_cache_index", I8, DSOPS_ERR_NULL, null_index},
    {"null_kv_cache_bf16", BF, DSOPS_ERR_NULL, null_kv},
    {"null_kv_cache_int8", I8, DSOPS_ERR_NULL, null_kv},
    {"null_kv_scale_cache", I8, DSOPS_ERR_NULL, null_kv_scale},
    {"null_kr_cache_bf16", BF, DSOPS_ERR_NULL, null_kr},
    {"null_kr_cache_int8", I8, DSOPS_ERR_NULL, null_kr},
    {"null_kv_packed", PK, DSOPS_ERR_NULL, null_packed},
    {"null_kv_packed_split_given", BP, DSOPS_ERR_NULL, packed_given_split},
    {"null_q_nope", BF, DSOPS_ERR_NULL, null_q_nope},
    {"null_q_rope", I8, DSOPS_ERR_NULL, null_q_rope},
    {"null_qr_bf16", BF, DSOPS_ERR_NULL, null_qr},
    {"null_qr_int8", I8, DSOPS_ERR_NULL, null_qr},
    {"null_qr_scale", PK, DSOPS_ERR_NULL, null_qr_scale},

    {"rank_x", BF, DSOPS_ERR_SHAPE, rank_x},
    {"rank_w_uk", I8, DSOPS_ERR_SHAPE, rank_w_uk},
    {"rank_cache_index", BF, DSOPS_ERR_SHAPE, rank_index},
    {"rank_kv_cache", I8, DSOPS_ERR_SHAPE, rank_kv},
    {"shape_x_h", BF, DSOPS_ERR_SHAPE, shape_x_h},
    {"shape_wq_a_h", I8, DSOPS_ERR_SHAPE, shape_wq_a_h},
    {"shape_wkv_a_h", BF, DSOPS_ERR_SHAPE, shape_wkv_a_h},
    {"shape_gamma_cq", BF, DSOPS_ERR_SHAPE, shape_gamma_cq},
    {"shape_wq_b_q", I8, DSOPS_ERR_SHAPE, shape_wq_b_q},
    {"shape_wq_b_q_bf16", BF, DSOPS_ERR_SHAPE, shape_wq_b_q},
    {"shape_wq_b_rows", I8, DSOPS_ERR_SHAPE, shape_wq_b_rows},
    {"shape_wq_b_scale", I8, DSOPS_ERR_SHAPE, shape_wq_b_scale},
    {"shape_w_uk_dqn", BF, DSOPS_ERR_SHAPE, shape_w_uk_dqn},
    {"shape_w_uk_n", I8, DSOPS_ERR_SHAPE, shape_w_uk_n},
    {"shape_w_uk_dc", BF, DSOPS_ERR_SHAPE, shape_w_uk_dc},
    {"shape_wkv_a_rows", I8, DSOPS_ERR_SHAPE, shape_wkv_a_rows},
    {"shape_gamma_ckv", BF, DSOPS_ERR_SHAPE, shape_gamma_ckv},
    {"shape_rope_cos_width", I8, DSOPS_ERR_SHAPE, shape_cos_w},
    {"shape_rope_sin_tokens", BF, DSOPS_ERR_SHAPE, shape_sin_t},
    {"shape_cache_index", I8, DSOPS_ERR_SHAPE, shape_index},
    {"shape_kv_cache_dc", BF, DSOPS_ERR_SHAPE, shape_kv_dc},
    {"shape_kr_cache_nb", I8, DSOPS_ERR_SHAPE, shape_kv_nb},
    {"shape_kr_cache_bs", BF, DSOPS_ERR_SHAPE, shape_kr_bs},
    {"shape_kr_cache_width", I8, DSOPS_ERR_SHAPE, shape_kr_w},
    {"shape_kv_scale_cache", I8, DSOPS_ERR_SHAPE, shape_kv_scale},
    {"shape_kv_packed_row", PK, DSOPS_ERR_SHAPE, shape_packed_row},
    {"shape_q_nope_heads", BF, DSOPS_ERR_SHAPE, shape_q_nope_n},
    {"shape_q_nope_dc", I8, DSOPS_ERR_SHAPE, shape_q_nope_dc},
    {"shape_q_rope_width", PK, DSOPS_ERR_SHAPE, shape_q_rope_w},
    {"shape_q_rope_tokens", BF, DSOPS_ERR_SHAPE, shape_q_rope_t},
    {"shape_qr", I8, DSOPS_ERR_SHAPE, shape_qr},
    {"shape_qr_scale", I8, DSOPS_ERR_SHAPE, shape_qr_scale},
    {"stride_x_inner", BF, DSOPS_ERR_SHAPE, stride_x},
    {"stride_kv_cache_inner", BF, DSOPS_ERR_SHAPE, stride_kv},
    {"split_int8_dc192", I8, DSOPS_ERR_SHAPE, int8_dc192},
    {"split_int8_dc192_bf16_wq_b", VARIANT(0, DSOPS_KV_SPLIT_INT8), DSOPS_ERR_SHAPE, int8_dc192},
    {"packed_int8_dc256", PK, DSOPS_ERR_SHAPE, packed_dc256},
    {"int8_wq_b_q_131073", I8, DSOPS_ERR_SHAPE, int8_q_too_large},

    {"dtype_x", BF, DSOPS_ERR_DTYPE, dtype_x},
    {"dtype_wq_a", I8, DSOPS_ERR_DTYPE, dtype_wq_a},
    {"dtype_gamma_cq", BF, DSOPS_ERR_DTYPE, dtype_gamma_cq},
    {"dtype_wq_b", BF, DSOPS_ERR_DTYPE, dtype_wq_b},
    {"dtype_wq_b_scale", I8, DSOPS_ERR_DTYPE, dtype_wq_b_scale},
    {"dtype_w_uk", BF, DSOPS_ERR_DTYPE, dtype_w_uk},
    {"dtype_wkv_a", I8, DSOPS_ERR_DTYPE, dtype_wkv_a},
    {"dtype_gamma_ckv", BF, DSOPS_ERR_DTYPE, dtype_gamma_ckv},
    {"dtype_rope_cos", I8, DSOPS_ERR_DTYPE, dtype_cos},
    {"dtype_rope_sin", BF, DSOPS_ERR_DTYPE, dtype_sin},
    {"dtype_cache_index", I8, DSOPS_ERR_DTYPE, dtype_index},
    {"dtype_kv_cache_split_bf16", BF, DSOPS_ERR_DTYPE, dtype_kv_bf16_layout},
    {"dtype_kv_cache_split_int8", I8, DSOPS_ERR_DTYPE, dtype_kv_int8_layout},
    {"dtype_kv_scale_cache", I8, DSOPS_ERR_DTYPE, dtype_kv_scale},
    {"dtype_kr_cache", BF, DSOPS_ERR_DTYPE, dtype_kr},
    {"dtype_kv_packed", PK, DSOPS_ERR_DTYPE, dtype_packed},
    {"dtype_q_nope", I8, DSOPS_ERR_DTYPE, dtype_q_nope},
    {"dtype_q_rope", BF, DSOPS_ERR_DTYPE, dtype_q_rope},
    {"dtype_qr_int8_with_bf16_wq_b", BF, DSOPS_ERR_DTYPE, dtype_qr_int8_for_bf16},
    {"dtype_qr_bf16_with_int8_wq_b", I8, DSOPS_ERR_DTYPE, dtype_qr_bf16_for_int8},
    {"dtype_qr_scale", I8, DSOPS_ERR_DTYPE, dtype_qr_scale},

    {"eps_cq_negative", BF, DSOPS_ERR_PARAM, eps_cq_neg},
    {"eps_cq_nan", I8, DSOPS_ERR_PARAM, eps_cq_nan},
    {"eps_ckv_inf", BF, DSOPS_ERR_PARAM, eps_ckv_inf},
    {"eps_ckv_negative", PK, DSOPS_ERR_PARAM, eps_ckv_neg},
    {"rope_mode_7", BF, DSOPS_ERR_PARAM, bad_rope_mode},
    {"rope_mode_negative", I8, DSOPS_ERR_PARAM, bad_rope_mode_neg},
    {"kv_layout_9", I8, DSOPS_ERR_PARAM, bad_layout},

    {"cache_index_ge_rows", BF, DSOPS_ERR_INDEX, index_too_big},
    {"cache_index_ge_rows_int8", I8, DSOPS_ERR_INDEX, index_too_big},
    {"cache_index_ge_rows_packed", PK, DSOPS_ERR_INDEX, index_too_big},
    {"cache_index_int64_max", I8, DSOPS_ERR_INDEX, index_huge},
    {"cache_index_duplicate", BF, DSOPS_ERR_INDEX, index_dup},
    {"cache_index_duplicate_int8", I8, DSOPS_ERR_INDEX, index_dup},
    {"cache_index_duplicate_packed", PK, DSOPS_ERR_INDEX, index_dup_last},

    {"alias_q_rope_on_q_nope", BF, DSOPS_ERR_ALIAS, alias_q},
    {"alias_qr_on_x", BF, DSOPS_ERR_ALIAS, alias_qr_x},
    {"alias_q_rope_on_wq_a", I8, DSOPS_ERR_ALIAS, alias_qnope_wq_a},
    {"alias_kr_cache_on_kv_cache", BF, DSOPS_ERR_ALIAS, alias_kr_kv},
    {"alias_kv_cache_on_w_uk", BF, DSOPS_ERR_ALIAS, alias_kv_w_uk},
    {"alias_q_rope_on_kv_cache", I8, DSOPS_ERR_ALIAS, alias_qnope_kv},
    {"alias_qr_scale_on_qr", I8, DSOPS_ERR_ALIAS, alias_qr_scale},
    {"alias_rope_cos_in_kv_packed", PK, DSOPS_ERR_ALIAS, alias_packed_cos},
    {"alias_kv_scale_cache_on_cache_index", I8, DSOPS_ERR_ALIAS, alias_scale_index},
};

/* ---- valid but unusual --------------------------------------------------------------------------------- */

static void all_negative(void *problem)
{
    mp_problem *p = problem;
    for (int64_t t = 0; t < p->T; t++)
        p->cache_index[t] = t % 2 ? -1 : INT64_MIN;
}
static void repeated_negative(void *problem) { mp_problem *p = problem; p->cache_index[0] = -1, p->cache_index[2] = -1, p->cache_index[4] = -1; }
static void last_row(void *problem) { mp_problem *p = problem; p->cache_index[3] = 63; p->cache_index[0] = 0; }
static void eps_zero(void *problem) { mp_problem *p = problem; p->args.eps_cq = 0.0f, p->args.eps_ckv = 0.0f; }
static void inverse(void *problem) { mp_problem *p = problem; p->args.rope_inverse = 1; }
static void same_tables(void *problem) { mp_problem *p = problem; p->args.rope_sin = p->args.rope_cos; } /* inputs may share memory */
/* norm vectors take any stride (spec §1.3): both broadcast from their first element (once read as rows) */
static void norms_stride0(void *problem) { mp_problem *p = problem; p->args.gamma_cq.stride[0] = 0, p->args.gamma_ckv.stride[0] = 0; }

static const val_ok_case ok_cases[] = {
    {"ok_all_indices_negative", I8, all_negative},
    {"ok_all_indices_negative_packed", PK, all_negative},
    {"ok_repeated_negative_indices", BF, repeated_negative},
    {"ok_first_and_last_row", I8, last_row},
    {"ok_eps_zero", BF, eps_zero},
    {"ok_rope_inverse", I8, inverse},
    {"ok_cos_and_sin_one_tensor", BP, same_tables},
    {"ok_norm_vectors_stride0", BF, norms_stride0},
    {"ok_norm_vectors_stride0_int8", I8, norms_stride0},
};

/* ---- the operator for the table runner ------------------------------------------------------------- */

/* Adapters of the mla_prolog_v32 problems (problems.h); every validation program has them in
 * this shape, over its own problem type. */
static void *make_problem(int variant) { return base(variant % 2, (dsops_kv_layout)(variant / 2)); }
static void free_problem(void *p) { mp_free(p); }
static dsops_status call(dsops_context *c, void *p) { return dsops_mla_prolog_v32(c, &((mp_problem *)p)->args); }
static void arm(void *p) { tf_prepare_call(&((mp_problem *)p)->fx); }
static void untouched(void *p, const char *name) { mp_untouched(p, name); }
static void *oracle(void *p) { return mp_reference(&((mp_problem *)p)->args); }
static void compare(void *p, void *expected, const val_ok_case *c) { mp_check(p, expected, c->name); }
static void free_expected(void *r) { mp_ref_free(r); }

static const val_ops mlap_ops = {
    .make = make_problem, .free = free_problem, .call = call, .arm = arm, .untouched = untouched,
    .oracle = oracle, .compare = compare, .free_expected = free_expected,
};

/* A prepared object belongs to the weight tensors it was made from. */
static void test_prepared(void)
{
    if (!tu_selected("prepared"))
        return;
    mp_problem *p = base(1, DSOPS_KV_SPLIT_INT8);
    mp_problem *q = base(1, DSOPS_KV_SPLIT_INT8); /* same shapes, other buffers */
    dsops_prepared *prep = NULL;
    dsops_status st = dsops_mla_prolog_v32_prepare(ctx, &p->args, &prep);
    if (!tu_check(st == DSOPS_OK && prep, "prepared: prepare failed: %s (%s)", dsops_status_name(st), dsops_last_error()))
        goto done;
    const pc_target t = mp_target(p, NULL);

    /* other weights: each of the four packed weights swapped in turn */
    const char *names[5] = {"wq_a", "wq_b", "w_uk", "wkv_a", "wq_b_scale"};
    for (int w = 0; w < 5; w++) {
        char label[100];
        snprintf(label, sizeof label, "prepared_other_%s", names[w]);
        dsops_mla_prolog_v32_args a = p->args;
        a.prepared = prep;
        if (w == 0) a.wq_a = q->args.wq_a;
        if (w == 1) a.wq_b = q->args.wq_b;
        if (w == 2) a.w_uk = q->args.w_uk;
        if (w == 3) a.wkv_a = q->args.wkv_a;
        if (w == 4) a.wq_b_scale = q->args.wq_b_scale;
        /* the header names wq_a, wq_b, w_uk and wkv_a as the packed weights; a scale vector that is not packed
         * may legitimately be read per call */
        pc_expect_rejected(&t, ctx, &a, DSOPS_ERR_PARAM, "prepared", w == 4, label);
    }
    /* the same weights with other activations, outputs and caches: valid */
    {
        dsops_mla_prolog_v32_args a = q->args;
        a.wq_a = p->args.wq_a, a.wq_b = p->args.wq_b, a.wq_b_scale = p->args.wq_b_scale, a.w_uk = p->args.w_uk,
        a.wkv_a = p->args.wkv_a;
        q->args = a;
        mp_ref *r = mp_reference(&q->args);
        const pc_target tq = mp_target(q, r);
        pc_run_prepared_reuse(&tq, ctx, prep, "prepared_reuse");
        mp_ref_free(r);
    }
    /* a bf16-wq_b prepared object used for an int8 call of the same shapes */
    {
        mp_problem *b = base(0, DSOPS_KV_SPLIT_INT8);
        const pc_target from = mp_target(b, NULL);
        pc_expect_foreign_prepared(&t, &from, ctx, "prepared_bf16_used_for_int8");
        mp_free(b);
    }
    /* prepare validates the weights it packs */
    {
        dsops_mla_prolog_v32_args a = p->args;
        a.wq_a.data = NULL;
        pc_expect_prepare_status(&t, ctx, &a, DSOPS_ERR_NULL, "prepare_null_wq_a");
        a = p->args;
        a.wq_b.dtype = DSOPS_FP16;
        pc_expect_prepare_status(&t, ctx, &a, DSOPS_ERR_DTYPE, "prepare_fp16_wq_b");
        st = dsops_mla_prolog_v32_prepare(ctx, &p->args, NULL);
        tu_check(st == DSOPS_ERR_NULL, "prepare_null_out: status %s, expected DSOPS_ERR_NULL", dsops_status_name(st));
    }
    dsops_prepared_destroy(prep);
    dsops_prepared_destroy(NULL); /* no-op */
done:
    mp_free(p);
    mp_free(q);
}

static void test_init(void)
{
    if (!tu_selected("init"))
        return;
    dsops_mla_prolog_v32_args a;
    memset(&a, 0x5a, sizeof a);
    dsops_status st = dsops_mla_prolog_v32_init(&a, DSOPS_PRESET_V32);
    tu_check(st == DSOPS_OK, "init(V32): %s", dsops_status_name(st));
    tu_check(a.eps_cq == 1e-6f && a.eps_ckv == 1e-6f, "init(V32): eps %g / %g, expected 1e-6", (double)a.eps_cq,
             (double)a.eps_ckv);
    tu_check(a.rope_mode == DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT && a.rope_inverse == 0 &&
                 a.kv_layout == DSOPS_KV_SPLIT_BF16 && a.prepared == NULL,
             "init(V32): rope_mode %d, rope_inverse %d, kv_layout %d, prepared %p", (int)a.rope_mode, a.rope_inverse,
             (int)a.kv_layout, (const void *)a.prepared);
    tu_check(a.x.data == NULL && a.wq_b_scale.data == NULL && a.kv_packed.data == NULL && a.qr_scale.data == NULL,
             "init(V32): tensors not cleared");
    st = dsops_mla_prolog_v32_init(NULL, DSOPS_PRESET_V32);
    tu_check(st != DSOPS_OK, "init(NULL) succeeded");
    st = dsops_mla_prolog_v32(ctx, NULL);
    tu_check(st == DSOPS_ERR_NULL, "call with args NULL: %s, expected DSOPS_ERR_NULL", dsops_status_name(st));
}

/* a NULL context uses a temporary one with the environment defaults */
static const val_ok_case null_context_cases[] = {{"null_context", PK, NULL}};

/* The order of every validation program (tests/validation.h): init, the bad rows, the ok rows and its own cases. */
int main(int argc, char **argv)
{
    tu_init(argc, argv, 42);
    ctx = tu_context();
    test_init();
    val_run_bad(&mlap_ops, ctx, bad_cases, VAL_COUNT(bad_cases));
    val_run_ok(&mlap_ops, ctx, ok_cases, VAL_COUNT(ok_cases));
    test_prepared();
    val_run_ok(&mlap_ops, NULL, null_context_cases, VAL_COUNT(null_context_cases));
    dsops_context_destroy(ctx);
    return tu_finish();
}
