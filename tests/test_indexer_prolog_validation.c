/* Argument validation of indexer_prolog_v32 (spec §1.6 V1-V10, §4.2 "Validation"): a table of bad
 * argument sets, each with its expected status and a message fragment (alternatives separated by '|').
 * After every error, no byte of the outputs and the caches may have changed. A second table holds argument
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

/* The base problem: T 5, H 256, Q 128, NI 4, DI 128, BS 16, NB 4; tokens 0, 2, 3 write rows 5, 17, 63,
 * tokens 1 and 4 have negative indices. int8: both Hadamard matrices; bf16: both as well. */
static ip_problem *base(int int8)
{
    ip_spec s;
    memset(&s, 0, sizeof s);
    s.T = 5, s.H = 256, s.Q = 128, s.NI = 4, s.DI = 128, s.BS = 16, s.NB = 4;
    s.int8 = int8;
    s.rope_mode = DSOPS_ROPE_HALF;
    s.ln_eps = 1e-6f;
    s.weights_scale = 0.0625f;
    s.index_mode = IP_IDX_SOME;
    s.big_guard = 1;
    ip_problem *p = ip_make(&s, 99);
    p->cache_index[0] = 5, p->cache_index[1] = -1, p->cache_index[2] = 17, p->cache_index[3] = 63,
    p->cache_index[4] = INT64_MIN;
    return p;
}

#define FRAG(...) snprintf(frag, VAL_FRAG_MAX, __VA_ARGS__)
#define A (&p->args)

/* ---- V2 NULL ----------------------------------------------------------------------------------------- */
static void null_x(void *problem, char *frag) { ip_problem *p = problem; A->x.data = NULL; FRAG("x"); }
static void null_qr(void *problem, char *frag) { ip_problem *p = problem; A->qr.data = NULL; FRAG("qr"); }
static void null_qr_scale(void *problem, char *frag) { ip_problem *p = problem; A->qr_scale.data = NULL; FRAG("qr_scale"); }
static void null_wq_b(void *problem, char *frag) { ip_problem *p = problem; A->idx_wq_b.data = NULL; FRAG("idx_wq_b"); }
static void null_wq_b_scale(void *problem, char *frag) { ip_problem *p = problem; A->idx_wq_b_scale.data = NULL; FRAG("idx_wq_b_scale"); }
static void null_wk(void *problem, char *frag) { ip_problem *p = problem; A->idx_wk.data = NULL; FRAG("idx_wk"); }
static void null_wproj(void *problem, char *frag) { ip_problem *p = problem; A->weights_proj.data = NULL; FRAG("weights_proj"); }
static void null_gamma(void *problem, char *frag) { ip_problem *p = problem; A->ln_gamma_k.data = NULL; FRAG("ln_gamma_k"); }
static void null_beta(void *problem, char *frag) { ip_problem *p = problem; A->ln_beta_k.data = NULL; FRAG("ln_beta_k"); }
static void null_cos(void *problem, char *frag) { ip_problem *p = problem; A->rope_cos.data = NULL; FRAG("rope_cos"); }
static void null_sin(void *problem, char *frag) { ip_problem *p = problem; A->rope_sin.data = NULL; FRAG("rope_sin"); }
static void null_had_q(void *problem, char *frag) { ip_problem *p = problem; A->hadamard_q.data = NULL; FRAG("hadamard_q"); }
static void null_had_k(void *problem, char *frag) { ip_problem *p = problem; A->hadamard_k.data = NULL; FRAG("hadamard_k"); }
static void null_index(void *problem, char *frag) { ip_problem *p = problem; A->cache_index.data = NULL; FRAG("cache_index"); }
static void null_cache(void *problem, char *frag) { ip_problem *p = problem; A->idx_k_cache.data = NULL; FRAG("idx_k_cache"); }
static void null_cache_scale(void *problem, char *frag) { ip_problem *p = problem; A->idx_k_scale_cache.data = NULL; FRAG("idx_k_scale_cache"); }
static void null_q_idx(void *problem, char *frag) { ip_problem *p = problem; A->q_idx.data = NULL; FRAG("q_idx"); }
static void null_q_idx_scale(void *problem, char *frag) { ip_problem *p = problem; A->q_idx_scale.data = NULL; FRAG("q_idx_scale"); }
static void null_weights(void *problem, char *frag) { ip_problem *p = problem; A->weights.data = NULL; FRAG("weights"); }

/* ---- V3 shapes --------------------------------------------------------------------------------------- */
static void rank_x(void *problem, char *frag) { ip_problem *p = problem; A->x.ndim = 3; A->x.shape[2] = 1; A->x.stride[2] = 1; FRAG("x has rank 3"); }
static void rank_wq_b(void *problem, char *frag) { ip_problem *p = problem; A->idx_wq_b.ndim = 1; FRAG("idx_wq_b has rank 1"); }
static void rank_index(void *problem, char *frag) { ip_problem *p = problem; A->cache_index.ndim = 2; A->cache_index.shape[1] = 1; A->cache_index.stride[1] = 1; FRAG("cache_index has rank 2"); }
static void rank_cache(void *problem, char *frag) { ip_problem *p = problem; A->idx_k_cache.ndim = 2; FRAG("idx_k_cache has rank 2"); }
static void rank_cache_scale(void *problem, char *frag) { ip_problem *p = problem; A->idx_k_scale_cache.ndim = 3; A->idx_k_scale_cache.shape[2] = 1; A->idx_k_scale_cache.stride[2] = 1; FRAG("idx_k_scale_cache has rank 3"); }
static void rank_had_q(void *problem, char *frag) { ip_problem *p = problem; A->hadamard_q.ndim = 1; FRAG("hadamard_q has rank 1"); }
static void rank_q_idx(void *problem, char *frag) { ip_problem *p = problem; A->q_idx.ndim = 2; FRAG("q_idx has rank 2"); }
static void rank_weights(void *problem, char *frag) { ip_problem *p = problem; A->weights.ndim = 1; FRAG("weights has rank 1"); }
static void shape_x_h(void *problem, char *frag) { ip_problem *p = problem; A->x.shape[1] -= 1; FRAG("x.shape[1]|idx_wk.shape[1]|weights_proj.shape[1]"); }
static void shape_wk_h(void *problem, char *frag) { ip_problem *p = problem; A->idx_wk.shape[1] -= 1; FRAG("idx_wk.shape[1]|x.shape[1]|weights_proj.shape[1]"); }
static void shape_wproj_h(void *problem, char *frag) { ip_problem *p = problem; A->weights_proj.shape[1] -= 1; FRAG("weights_proj.shape[1]|x.shape[1]"); }
static void shape_qr_t(void *problem, char *frag) { ip_problem *p = problem; A->qr.shape[0] -= 1; FRAG("qr.shape[0] = 4"); }
static void shape_qr_q(void *problem, char *frag) { ip_problem *p = problem; A->qr.shape[1] -= 1; FRAG("qr.shape[1]|idx_wq_b.shape[1]"); }
static void shape_wq_b_q(void *problem, char *frag) { ip_problem *p = problem; A->idx_wq_b.shape[1] -= 1; FRAG("idx_wq_b.shape[1]|qr.shape[1]"); }
static void shape_wq_b_rows(void *problem, char *frag) { ip_problem *p = problem; A->idx_wq_b.shape[0] -= 1; FRAG("idx_wq_b.shape[0]"); }
static void shape_wq_b_scale(void *problem, char *frag) { ip_problem *p = problem; A->idx_wq_b_scale.shape[0] -= 1; FRAG("idx_wq_b_scale.shape[0]"); }
static void shape_qr_scale(void *problem, char *frag) { ip_problem *p = problem; A->qr_scale.shape[0] -= 1; FRAG("qr_scale.shape[0] = 4"); }
static void shape_wk_di(void *problem, char *frag) { ip_problem *p = problem; A->idx_wk.shape[0] -= 1; FRAG("idx_wk.shape[0]|idx_wq_b.shape[0]|ln_gamma_k|hadamard|DI"); }
static void shape_wproj_ni(void *problem, char *frag) { ip_problem *p = problem; A->weights_proj.shape[0] -= 1; FRAG("weights_proj.shape[0]|idx_wq_b.shape[0]|NI"); }
static void shape_gamma(void *problem, char *frag) { ip_problem *p = problem; A->ln_gamma_k.shape[0] -= 1; FRAG("ln_gamma_k.shape[0]"); }
static void shape_beta(void *problem, char *frag) { ip_problem *p = problem; A->ln_beta_k.shape[0] += 1; FRAG("ln_beta_k.shape[0]"); }
static void shape_cos_w(void *problem, char *frag) { ip_problem *p = problem; A->rope_cos.shape[1] = 32; FRAG("rope_cos.shape[1] = 32"); }
static void shape_sin_t(void *problem, char *frag) { ip_problem *p = problem; A->rope_sin.shape[0] -= 1; FRAG("rope_sin.shape[0] = 4"); }
static void shape_had_q(void *problem, char *frag) { ip_problem *p = problem; A->hadamard_q.shape[1] -= 1; FRAG("hadamard_q.shape[1] = 127"); }
static void shape_had_k(void *problem, char *frag) { ip_problem *p = problem; A->hadamard_k.shape[0] -= 1; FRAG("hadamard_k.shape[0] = 127"); }
static void shape_index(void *problem, char *frag) { ip_problem *p = problem; A->cache_index.shape[0] -= 1; FRAG("cache_index.shape[0] = 4"); }
static void shape_cache_di(void *problem, char *frag) { ip_problem *p = problem; A->idx_k_cache.shape[2] -= 1; FRAG("idx_k_cache.shape[2] = 127"); }
static void shape_cache_scale_nb(void *problem, char *frag) { ip_problem *p = problem; A->idx_k_scale_cache.shape[0] -= 1; FRAG("idx_k_scale_cache.shape[0] = 3|idx_k_cache.shape[0]"); }
static void shape_cache_scale_bs(void *problem, char *frag) { ip_problem *p = problem; A->idx_k_scale_cache.shape[1] -= 1; FRAG("idx_k_scale_cache.shape[1] = 15|idx_k_cache.shape[1]"); }
static void shape_cache_empty(void *problem, char *frag) { ip_problem *p = problem; A->idx_k_cache.shape[0] = 0; FRAG("idx_k_cache"); }
static void shape_q_idx_t(void *problem, char *frag) { ip_problem *p = problem; A->q_idx.shape[0] -= 1; FRAG("q_idx.shape[0] = 4"); }
static void shape_q_idx_ni(void *problem, char *frag) { ip_problem *p = problem; A->q_idx.shape[1] -= 1; FRAG("q_idx.shape[1] = 3"); }
static void shape_q_idx_di(void *problem, char *frag) { ip_problem *p = problem; A->q_idx.shape[2] -= 1; FRAG("q_idx.shape[2] = 127"); }
static void shape_q_idx_scale(void *problem, char *frag) { ip_problem *p = problem; A->q_idx_scale.shape[1] -= 1; FRAG("q_idx_scale.shape[1] = 3"); }
static void shape_weights(void *problem, char *frag) { ip_problem *p = problem; A->weights.shape[0] -= 1; FRAG("weights.shape[0] = 4"); }
static void stride_x(void *problem, char *frag)
{
    ip_problem *p = problem;
    A->x.shape[1] /= 2, A->idx_wk.shape[1] /= 2, A->weights_proj.shape[1] /= 2;
    A->x.stride[1] = 2;
    FRAG("x.stride[1]");
}
static void stride_cache(void *problem, char *frag)
{
    ip_problem *p = problem;
    A->idx_k_cache.stride[2] = 2; /* the cache holds room for NB * BS * DI elements: half the rows suffice */
    A->idx_k_cache.shape[0] = 2, A->idx_k_scale_cache.shape[0] = 2;
    p->cache_index[3] = 31;
    FRAG("idx_k_cache.stride[2]");
}
/* DI >= 64: every DI-sized extent narrowed to 32 (valid memory) */
static void di_32(void *problem, char *frag)
{
    ip_problem *p = problem;
    const int64_t NI = A->weights_proj.shape[0];
    A->idx_wk.shape[0] = 32;
    A->idx_wq_b.shape[0] = NI * 32;
    if (A->idx_wq_b_scale.data)
        A->idx_wq_b_scale.shape[0] = NI * 32;
    A->ln_gamma_k.shape[0] = A->ln_beta_k.shape[0] = 32;
    A->hadamard_q.shape[0] = A->hadamard_q.shape[1] = 32;
    A->hadamard_k.shape[0] = A->hadamard_k.shape[1] = 32;
    A->idx_k_cache.shape[2] = 32;
    A->q_idx.shape[2] = 32;
    FRAG("64");
}
/* Q <= 131072 for the int8 variant (spec §2.2): Q = 131073 with real, zeroed buffers that a library that
 * validates first never touches */
static void int8_q_too_large(void *problem, char *frag)
{
    ip_problem *p = problem;
    const int64_t Q = 131073, NQ = A->idx_wq_b.shape[0], T = A->x.shape[0];
    int64_t s2[2] = {NQ, Q};
    A->idx_wq_b = dsops_tensor_make(calloc((size_t)(NQ * Q), 1), DSOPS_INT8, 2, s2);
    s2[0] = T;
    A->qr = dsops_tensor_make(calloc((size_t)(T * Q), 1), DSOPS_INT8, 2, s2);
    tf_adopt(&p->fx, A->idx_wq_b.data);
    tf_adopt(&p->fx, A->qr.data);
    FRAG("131072");
}

/* ---- V4 dtypes --------------------------------------------------------------------------------------- */
static void dtype_x(void *problem, char *frag) { ip_problem *p = problem; A->x.dtype = DSOPS_FP16; FRAG("x has dtype fp16"); }
static void dtype_qr_fp16(void *problem, char *frag) { ip_problem *p = problem; A->qr.dtype = DSOPS_FP16; FRAG("qr has dtype fp16|idx_wq_b"); }
static void dtype_qr_int8_wq_b_bf16(void *problem, char *frag) { ip_problem *p = problem; A->qr.dtype = DSOPS_INT8; FRAG("qr|idx_wq_b"); }
/* int8 idx_wq_b with a bf16 qr; the int8 variant's scale vectors are given, so only the mismatch is wrong */
static void dtype_wq_b_int8_qr_bf16(void *problem, char *frag)
{
    ip_problem *p = problem;
    const int64_t NQ = A->idx_wq_b.shape[0], T = A->x.shape[0];
    A->idx_wq_b.dtype = DSOPS_INT8;
    int64_t s1[1] = {NQ};
    A->idx_wq_b_scale = dsops_tensor_make(calloc((size_t)NQ, sizeof(float)), DSOPS_FP32, 1, s1);
    s1[0] = T;
    A->qr_scale = dsops_tensor_make(calloc((size_t)T, sizeof(float)), DSOPS_FP32, 1, s1);
    tf_adopt(&p->fx, A->idx_wq_b_scale.data);
    tf_adopt(&p->fx, A->qr_scale.data);
    FRAG("idx_wq_b|qr");
}
static void dtype_wq_b_bf16_qr_int8(void *problem, char *frag) { ip_problem *p = problem; A->idx_wq_b.dtype = DSOPS_BF16; FRAG("idx_wq_b|qr"); }
static void dtype_qr_scale(void *problem, char *frag) { ip_problem *p = problem; A->qr_scale.dtype = DSOPS_BF16; FRAG("qr_scale has dtype bf16"); }
static void dtype_wq_b_scale(void *problem, char *frag) { ip_problem *p = problem; A->idx_wq_b_scale.dtype = DSOPS_FP16; FRAG("idx_wq_b_scale has dtype fp16"); }
static void dtype_wk(void *problem, char *frag) { ip_problem *p = problem; A->idx_wk.dtype = DSOPS_INT8; FRAG("idx_wk has dtype int8"); }
static void dtype_wproj(void *problem, char *frag) { ip_problem *p = problem; A->weights_proj.dtype = DSOPS_FP16; FRAG("weights_proj has dtype fp16"); }
static void dtype_gamma(void *problem, char *frag) { ip_problem *p = problem; A->ln_gamma_k.dtype = DSOPS_FP16; FRAG("ln_gamma_k has dtype fp16"); }
static void dtype_beta(void *problem, char *frag) { ip_problem *p = problem; A->ln_beta_k.dtype = DSOPS_INT32; FRAG("ln_beta_k has dtype int32"); }
static void dtype_cos(void *problem, char *frag) { ip_problem *p = problem; A->rope_cos.dtype = DSOPS_FP16; FRAG("rope_cos has dtype fp16"); }
static void dtype_sin(void *problem, char *frag) { ip_problem *p = problem; A->rope_sin.dtype = DSOPS_INT8; FRAG("rope_sin has dtype int8"); }
static void dtype_had_q(void *problem, char *frag) { ip_problem *p = problem; A->hadamard_q.dtype = DSOPS_FP16; FRAG("hadamard_q has dtype fp16"); }
static void dtype_had_k(void *problem, char *frag) { ip_problem *p = problem; A->hadamard_k.dtype = DSOPS_INT8; FRAG("hadamard_k has dtype int8"); }
static void dtype_index(void *problem, char *frag) { ip_problem *p = problem; A->cache_index.dtype = DSOPS_INT32; FRAG("cache_index has dtype int32"); }
static void dtype_cache_bf16_for_int8(void *problem, char *frag) { ip_problem *p = problem; A->idx_k_cache.dtype = DSOPS_BF16; FRAG("idx_k_cache has dtype bf16"); }
static void dtype_cache_int8_for_bf16(void *problem, char *frag) { ip_problem *p = problem; A->idx_k_cache.dtype = DSOPS_INT8; FRAG("idx_k_cache has dtype int8"); }
static void dtype_cache_scale(void *problem, char *frag) { ip_problem *p = problem; A->idx_k_scale_cache.dtype = DSOPS_FP32; FRAG("idx_k_scale_cache has dtype fp32"); }
static void dtype_q_idx_bf16_for_int8(void *problem, char *frag) { ip_problem *p = problem; A->q_idx.dtype = DSOPS_BF16; FRAG("q_idx has dtype bf16"); }
static void dtype_q_idx_int8_for_bf16(void *problem, char *frag) { ip_problem *p = problem; A->q_idx.dtype = DSOPS_INT8; FRAG("q_idx has dtype int8"); }
static void dtype_q_idx_scale(void *problem, char *frag) { ip_problem *p = problem; A->q_idx_scale.dtype = DSOPS_FP32; FRAG("q_idx_scale has dtype fp32"); }
static void dtype_weights_bf16_for_int8(void *problem, char *frag) { ip_problem *p = problem; A->weights.dtype = DSOPS_BF16; FRAG("weights has dtype bf16"); }
static void dtype_weights_fp16_for_bf16(void *problem, char *frag) { ip_problem *p = problem; A->weights.dtype = DSOPS_FP16; FRAG("weights has dtype fp16"); }

/* ---- V5 parameters ----------------------------------------------------------------------------------- */
static void eps_neg(void *problem, char *frag) { ip_problem *p = problem; A->ln_eps = -1e-6f; FRAG("ln_eps"); }
static void eps_nan(void *problem, char *frag) { ip_problem *p = problem; A->ln_eps = NAN; FRAG("ln_eps"); }
static void eps_inf(void *problem, char *frag) { ip_problem *p = problem; A->ln_eps = INFINITY; FRAG("ln_eps"); }
static void wscale_nan(void *problem, char *frag) { ip_problem *p = problem; A->weights_scale = NAN; FRAG("weights_scale"); }
static void wscale_inf(void *problem, char *frag) { ip_problem *p = problem; A->weights_scale = -INFINITY; FRAG("weights_scale"); }
static void bad_rope_mode(void *problem, char *frag) { ip_problem *p = problem; A->rope_mode = (dsops_rope_mode)7; FRAG("rope_mode"); }
static void bad_rope_mode_neg(void *problem, char *frag) { ip_problem *p = problem; A->rope_mode = (dsops_rope_mode)-1; FRAG("rope_mode"); }

/* ---- V8 slots ---------------------------------------------------------------------------------------- */
static void index_too_big(void *problem, char *frag) { ip_problem *p = problem; p->cache_index[2] = 64; FRAG("cache_index[2] = 64"); }
static void index_huge(void *problem, char *frag) { ip_problem *p = problem; p->cache_index[4] = INT64_MAX; FRAG("cache_index[4]"); }
static void index_dup(void *problem, char *frag) { ip_problem *p = problem; p->cache_index[3] = 5; FRAG("cache_index[3] = 5|cache_index[0] = 5"); }
static void index_dup_last(void *problem, char *frag) { ip_problem *p = problem; p->cache_index[4] = 63; FRAG("cache_index[4] = 63|cache_index[3] = 63"); }

/* ---- V9 aliasing --------------------------------------------------------------------------------------- */
static void alias_q_idx_x(void *problem, char *frag) { ip_problem *p = problem; A->q_idx.data = A->x.data; FRAG("overlaps"); }
static void alias_weights_q_idx(void *problem, char *frag) { ip_problem *p = problem; A->weights.data = A->q_idx.data; FRAG("overlaps"); }
static void alias_cache_wk(void *problem, char *frag) { ip_problem *p = problem; A->idx_k_cache.data = A->idx_wk.data; FRAG("overlaps"); }
static void alias_scales(void *problem, char *frag) { ip_problem *p = problem; A->q_idx_scale.data = A->idx_k_scale_cache.data; FRAG("overlaps"); }
static void alias_q_idx_had(void *problem, char *frag) { ip_problem *p = problem; A->q_idx.data = A->hadamard_q.data; FRAG("overlaps"); }
static void alias_weights_cos(void *problem, char *frag) { ip_problem *p = problem; A->weights.data = A->rope_cos.data; FRAG("overlaps"); }
static void alias_cache_q_idx(void *problem, char *frag) { ip_problem *p = problem; A->idx_k_cache.data = A->q_idx.data; FRAG("overlaps"); }
static void alias_weights_qr(void *problem, char *frag) { ip_problem *p = problem; A->weights.data = A->qr.data; FRAG("overlaps"); }
/* cache_index (an input) inside the key cache: its values are copied there first, so only the overlap is wrong */
static void alias_cache_index(void *problem, char *frag)
{
    ip_problem *p = problem;
    memcpy(A->idx_k_cache.data, A->cache_index.data, sizeof(int64_t) * (size_t)A->cache_index.shape[0]);
    A->cache_index.data = A->idx_k_cache.data;
    p->cache_index = A->cache_index.data;
    FRAG("overlaps");
}

/* a row's variant: int8 (1) or bf16 (0) */
#define I8 1
#define BF 0

/* The rule table (validation.h): its rows look like every validation program's rows, in shape only; each is
 * one rule of this operator's fields. */
static const val_bad_case bad_cases[] = {
    {"null_x", I8, DSOPS_ERR_NULL, null_x},
    {"null_qr", BF, DSOPS_ERR_NULL, null_qr},
    {"null_qr_int8", I8, DSOPS_ERR_NULL, null_qr},
    {"null_qr_scale", I8, DSOPS_ERR_NULL, null_qr_scale},
    {"null_idx_wq_b", I8, DSOPS_ERR_NULL, null_wq_b},
    {"null_idx_wq_b_bf16", BF, DSOPS_ERR_NULL, null_wq_b},
    {"null_idx_wq_b_scale", I8, DSOPS_ERR_NULL, null_wq_b_scale},
    {"null_idx_wk", BF, DSOPS_ERR_NULL, null_wk},
    {"null_weights_proj", I8, DSOPS_ERR_NULL, null_wproj},
    {"null_ln_gamma_k", BF, DSOPS_ERR_NULL, null_gamma},
    {"null_ln_beta_k", I8, DSOPS_ERR_NULL, null_beta},
    {"null_rope_cos", I8, DSOPS_ERR_NULL, null_cos},
    {"null_rope_sin", BF, DSOPS_ERR_NULL, null_sin},
    {"null_hadamard_q_int8", I8, DSOPS_ERR_NULL, null_had_q},
    {"null_hadamard_k_int8", I8, DSOPS_ERR_NULL, null_had_k},
    {"null_cache_index", BF, DSOPS_ERR_NULL, null_index},
    {"null_idx_k_cache", I8, DSOPS_ERR_NULL, null_cache},
    {"null_idx_k_cache_bf16", BF, DSOPS_ERR_NULL, null_cache},
    {"null_idx_k_scale_cache", I8, DSOPS_ERR_NULL, null_cache_scale},
    {"null_q_idx", BF, DSOPS_ERR_NULL, null_q_idx},
    {"null_q_idx_int8", I8, DSOPS_ERR_NULL, null_q_idx},
    {"null_q_idx_scale", I8, DSOPS_ERR_NULL, null_q_idx_scale},
    {"null_weights", I8, DSOPS_ERR_NULL, null_weights},
    {"null_weights_bf16", BF, DSOPS_ERR_NULL, null_weights},

    {"rank_x", I8, DSOPS_ERR_SHAPE, rank_x},
    {"rank_idx_wq_b", BF, DSOPS_ERR_SHAPE, rank_wq_b},
    {"rank_cache_index", I8, DSOPS_ERR_SHAPE, rank_index},
    {"rank_idx_k_cache", BF, DSOPS_ERR_SHAPE, rank_cache},
    {"rank_idx_k_scale_cache", I8, DSOPS_ERR_SHAPE, rank_cache_scale},
    {"rank_hadamard_q", BF, DSOPS_ERR_SHAPE, rank_had_q},
    {"rank_hadamard_q_int8", I8, DSOPS_ERR_SHAPE, rank_had_q},
    {"rank_q_idx", I8, DSOPS_ERR_SHAPE, rank_q_idx},
    {"rank_weights", BF, DSOPS_ERR_SHAPE, rank_weights},
    {"shape_x_h", I8, DSOPS_ERR_SHAPE, shape_x_h},
    {"shape_idx_wk_h", BF, DSOPS_ERR_SHAPE, shape_wk_h},
    {"shape_weights_proj_h", I8, DSOPS_ERR_SHAPE, shape_wproj_h},
    {"shape_qr_tokens", BF, DSOPS_ERR_SHAPE, shape_qr_t},
    {"shape_qr_q", I8, DSOPS_ERR_SHAPE, shape_qr_q},
    {"shape_idx_wq_b_q", BF, DSOPS_ERR_SHAPE, shape_wq_b_q},
    {"shape_idx_wq_b_rows", I8, DSOPS_ERR_SHAPE, shape_wq_b_rows},
    {"shape_idx_wq_b_rows_bf16", BF, DSOPS_ERR_SHAPE, shape_wq_b_rows},
    {"shape_idx_wq_b_scale", I8, DSOPS_ERR_SHAPE, shape_wq_b_scale},
    {"shape_qr_scale", I8, DSOPS_ERR_SHAPE, shape_qr_scale},
    {"shape_idx_wk_di", BF, DSOPS_ERR_SHAPE, shape_wk_di},
    {"shape_weights_proj_ni", I8, DSOPS_ERR_SHAPE, shape_wproj_ni},
    {"shape_ln_gamma_k", BF, DSOPS_ERR_SHAPE, shape_gamma},
    {"shape_ln_beta_k", I8, DSOPS_ERR_SHAPE, shape_beta},
    {"shape_rope_cos_width", I8, DSOPS_ERR_SHAPE, shape_cos_w},
    {"shape_rope_sin_tokens", BF, DSOPS_ERR_SHAPE, shape_sin_t},
    {"shape_hadamard_q", I8, DSOPS_ERR_SHAPE, shape_had_q},
    {"shape_hadamard_k_bf16", BF, DSOPS_ERR_SHAPE, shape_had_k},
    {"shape_cache_index", I8, DSOPS_ERR_SHAPE, shape_index},
    {"shape_idx_k_cache_di", BF, DSOPS_ERR_SHAPE, shape_cache_di},
    {"shape_idx_k_cache_di_int8", I8, DSOPS_ERR_SHAPE, shape_cache_di},
    {"shape_idx_k_scale_cache_nb", I8, DSOPS_ERR_SHAPE, shape_cache_scale_nb},
    {"shape_idx_k_scale_cache_bs", I8, DSOPS_ERR_SHAPE, shape_cache_scale_bs},
    {"shape_idx_k_cache_nb0", BF, DSOPS_ERR_SHAPE, shape_cache_empty},
    {"shape_q_idx_tokens", I8, DSOPS_ERR_SHAPE, shape_q_idx_t},
    {"shape_q_idx_heads", BF, DSOPS_ERR_SHAPE, shape_q_idx_ni},
    {"shape_q_idx_di", I8, DSOPS_ERR_SHAPE, shape_q_idx_di},
    {"shape_q_idx_scale", I8, DSOPS_ERR_SHAPE, shape_q_idx_scale},
    {"shape_weights", BF, DSOPS_ERR_SHAPE, shape_weights},
    {"stride_x_inner", I8, DSOPS_ERR_SHAPE, stride_x},
    {"stride_idx_k_cache_inner", BF, DSOPS_ERR_SHAPE, stride_cache},
    {"di_32_int8", I8, DSOPS_ERR_SHAPE, di_32},
    {"di_32_bf16", BF, DSOPS_ERR_SHAPE, di_32},
    {"int8_q_131073", I8, DSOPS_ERR_SHAPE, int8_q_too_large},

    {"dtype_x", I8, DSOPS_ERR_DTYPE, dtype_x},
    {"dtype_qr_fp16", BF, DSOPS_ERR_DTYPE, dtype_qr_fp16},
    {"dtype_qr_int8_with_bf16_idx_wq_b", BF, DSOPS_ERR_DTYPE, dtype_qr_int8_wq_b_bf16},
    {"dtype_idx_wq_b_int8_with_bf16_qr", BF, DSOPS_ERR_DTYPE, dtype_wq_b_int8_qr_bf16},
    {"dtype_idx_wq_b_bf16_with_int8_qr", I8, DSOPS_ERR_DTYPE, dtype_wq_b_bf16_qr_int8},
    {"dtype_qr_scale", I8, DSOPS_ERR_DTYPE, dtype_qr_scale},
    {"dtype_idx_wq_b_scale", I8, DSOPS_ERR_DTYPE, dtype_wq_b_scale},
    {"dtype_idx_wk", BF, DSOPS_ERR_DTYPE, dtype_wk},
    {"dtype_weights_proj", I8, DSOPS_ERR_DTYPE, dtype_wproj},
    {"dtype_ln_gamma_k", BF, DSOPS_ERR_DTYPE, dtype_gamma},
    {"dtype_ln_beta_k", I8, DSOPS_ERR_DTYPE, dtype_beta},
    {"dtype_rope_cos", BF, DSOPS_ERR_DTYPE, dtype_cos},
    {"dtype_rope_sin", I8, DSOPS_ERR_DTYPE, dtype_sin},
    {"dtype_hadamard_q", I8, DSOPS_ERR_DTYPE, dtype_had_q},
    {"dtype_hadamard_k_bf16", BF, DSOPS_ERR_DTYPE, dtype_had_k},
    {"dtype_cache_index", BF, DSOPS_ERR_DTYPE, dtype_index},
    {"dtype_idx_k_cache_bf16_for_int8", I8, DSOPS_ERR_DTYPE, dtype_cache_bf16_for_int8},
    {"dtype_idx_k_cache_int8_for_bf16", BF, DSOPS_ERR_DTYPE, dtype_cache_int8_for_bf16},
    {"dtype_idx_k_scale_cache", I8, DSOPS_ERR_DTYPE, dtype_cache_scale},
    {"dtype_q_idx_bf16_for_int8", I8, DSOPS_ERR_DTYPE, dtype_q_idx_bf16_for_int8},
    {"dtype_q_idx_int8_for_bf16", BF, DSOPS_ERR_DTYPE, dtype_q_idx_int8_for_bf16},
    {"dtype_q_idx_scale", I8, DSOPS_ERR_DTYPE, dtype_q_idx_scale},
    {"dtype_weights_bf16_for_int8", I8, DSOPS_ERR_DTYPE, dtype_weights_bf16_for_int8},
    {"dtype_weights_fp16_for_bf16", BF, DSOPS_ERR_DTYPE, dtype_weights_fp16_for_bf16},

    {"ln_eps_negative", I8, DSOPS_ERR_PARAM, eps_neg},
    {"ln_eps_nan", BF, DSOPS_ERR_PARAM, eps_nan},
    {"ln_eps_inf", I8, DSOPS_ERR_PARAM, eps_inf},
    {"weights_scale_nan", BF, DSOPS_ERR_PARAM, wscale_nan},
    {"weights_scale_minus_inf", I8, DSOPS_ERR_PARAM, wscale_inf},
    {"rope_mode_7", I8, DSOPS_ERR_PARAM, bad_rope_mode},
    {"rope_mode_negative", BF, DSOPS_ERR_PARAM, bad_rope_mode_neg},

    {"cache_index_ge_rows", I8, DSOPS_ERR_INDEX, index_too_big},
    {"cache_index_ge_rows_bf16", BF, DSOPS_ERR_INDEX, index_too_big},
    {"cache_index_int64_max", I8, DSOPS_ERR_INDEX, index_huge},
    {"cache_index_duplicate", I8, DSOPS_ERR_INDEX, index_dup},
    {"cache_index_duplicate_bf16", BF, DSOPS_ERR_INDEX, index_dup},
    {"cache_index_duplicate_last", I8, DSOPS_ERR_INDEX, index_dup_last},

    {"alias_q_idx_on_x", I8, DSOPS_ERR_ALIAS, alias_q_idx_x},
    {"alias_weights_on_q_idx", BF, DSOPS_ERR_ALIAS, alias_weights_q_idx},
    {"alias_idx_k_cache_on_idx_wk", I8, DSOPS_ERR_ALIAS, alias_cache_wk},
    {"alias_q_idx_scale_on_idx_k_scale_cache", I8, DSOPS_ERR_ALIAS, alias_scales},
    {"alias_q_idx_on_hadamard_q", BF, DSOPS_ERR_ALIAS, alias_q_idx_had},
    {"alias_weights_on_rope_cos", I8, DSOPS_ERR_ALIAS, alias_weights_cos},
    {"alias_idx_k_cache_on_q_idx", BF, DSOPS_ERR_ALIAS, alias_cache_q_idx},
    {"alias_weights_on_qr", BF, DSOPS_ERR_ALIAS, alias_weights_qr},
    {"alias_idx_k_cache_on_cache_index", I8, DSOPS_ERR_ALIAS, alias_cache_index},
};

/* ---- valid but unusual --------------------------------------------------------------------------------- */

static void all_negative(void *problem)
{
    ip_problem *p = problem;
    for (int64_t t = 0; t < p->T; t++)
        p->cache_index[t] = t % 2 ? -1 : INT64_MIN;
}
static void repeated_negative(void *problem) { ip_problem *p = problem; p->cache_index[0] = -1, p->cache_index[2] = -1, p->cache_index[4] = -1; }
static void last_row(void *problem) { ip_problem *p = problem; p->cache_index[3] = 63; p->cache_index[0] = 0; }
static void eps_zero(void *problem) { ip_problem *p = problem; p->args.ln_eps = 0.0f; }
static void wscale_zero(void *problem) { ip_problem *p = problem; p->args.weights_scale = 0.0f; }
static void wscale_negative(void *problem) { ip_problem *p = problem; p->args.weights_scale = -2.0f; }
static void inverse(void *problem) { ip_problem *p = problem; p->args.rope_inverse = 1; }
static void same_tables(void *problem) { ip_problem *p = problem; p->args.rope_sin = p->args.rope_cos; } /* inputs may share memory */
static void same_hadamard(void *problem) { ip_problem *p = problem; p->args.hadamard_k = p->args.hadamard_q; }
static void no_hadamard(void *problem)
{
    ip_problem *p = problem;
    memset(&p->args.hadamard_q, 0, sizeof p->args.hadamard_q);
    memset(&p->args.hadamard_k, 0, sizeof p->args.hadamard_k);
}
static void no_hadamard_q(void *problem) { ip_problem *p = problem; p->args.hadamard_q.data = NULL; }
static void no_hadamard_k(void *problem) { ip_problem *p = problem; p->args.hadamard_k.data = NULL; }
/* norm vectors take any stride (spec §1.3): the LayerNorm weights broadcast from their first element (once read
 * as rows) */
static void ln_stride0(void *problem) { ip_problem *p = problem; p->args.ln_gamma_k.stride[0] = 0, p->args.ln_beta_k.stride[0] = 0; }

static const val_ok_case ok_cases[] = {
    {"ok_all_indices_negative", I8, all_negative},
    {"ok_all_indices_negative_bf16", BF, all_negative},
    {"ok_repeated_negative_indices", I8, repeated_negative},
    {"ok_first_and_last_row", BF, last_row},
    {"ok_first_and_last_row_int8", I8, last_row},
    {"ok_ln_eps_zero", I8, eps_zero},
    {"ok_weights_scale_zero", BF, wscale_zero},
    {"ok_weights_scale_negative", I8, wscale_negative},
    {"ok_rope_inverse", I8, inverse},
    {"ok_cos_and_sin_one_tensor", BF, same_tables},
    {"ok_hadamard_q_and_k_one_tensor", I8, same_hadamard},
    {"ok_bf16_without_hadamard", BF, no_hadamard},
    {"ok_bf16_without_hadamard_q", BF, no_hadamard_q},
    {"ok_bf16_without_hadamard_k", BF, no_hadamard_k},
    {"ok_ln_weights_stride0", BF, ln_stride0},
    {"ok_ln_weights_stride0_int8", I8, ln_stride0},
};

/* ---- the operator for the table runner ------------------------------------------------------------- */

/* Adapters of the indexer_prolog_v32 problems (problems.h); every validation program has them in
 * this shape, over its own problem type. */
static void *make_problem(int int8) { return base(int8); }
static void free_problem(void *p) { ip_free(p); }
static dsops_status call(dsops_context *c, void *p) { return dsops_indexer_prolog_v32(c, &((ip_problem *)p)->args); }
static void arm(void *p) { tf_prepare_call(&((ip_problem *)p)->fx); }
static void untouched(void *p, const char *name) { ip_untouched(p, name); }
static void *oracle(void *p) { return ip_reference(&((ip_problem *)p)->args); }
static void compare(void *p, void *expected, const val_ok_case *c) { ip_check(p, expected, c->name); }
static void free_expected(void *r) { ip_ref_free(r); }

static const val_ops idxp_ops = {
    .make = make_problem, .free = free_problem, .call = call, .arm = arm, .untouched = untouched,
    .oracle = oracle, .compare = compare, .free_expected = free_expected,
};

/* Scale tensors given to the bf16 variant are not part of it: the spec does not say whether they are
 * ignored or rejected, so either DSOPS_OK with the oracle's results or DSOPS_ERR_PARAM / _DTYPE with nothing
 * written is accepted. */
static void test_bf16_with_scales(void)
{
    if (!tu_selected("bf16_with_scales"))
        return;
    ip_problem *i8 = base(1);
    for (int k = 0; k < 4; k++) {
        char label[100];
        ip_problem *p = base(0);
        static const char *names[4] = {"qr_scale", "idx_wq_b_scale", "q_idx_scale", "idx_k_scale_cache"};
        if (k == 0) p->args.qr_scale = i8->args.qr_scale;
        if (k == 1) p->args.idx_wq_b_scale = i8->args.idx_wq_b_scale;
        if (k == 2) p->args.q_idx_scale = i8->args.q_idx_scale;
        if (k == 3) p->args.idx_k_scale_cache = i8->args.idx_k_scale_cache;
        snprintf(label, sizeof label, "bf16_with_scales_%s", names[k]);
        ip_ref *r = ip_reference(&p->args);
        tf_prepare_call(&p->fx);
        tf_prepare_call(&i8->fx);
        dsops_status st = dsops_indexer_prolog_v32(ctx, &p->args);
        if (st == DSOPS_OK) {
            ip_check(p, r, label);
            ip_untouched(i8, label); /* the foreign scale tensor is not written */
        } else {
            tu_check(st == DSOPS_ERR_PARAM || st == DSOPS_ERR_DTYPE, "%s: status %s (%s)", label,
                     dsops_status_name(st), dsops_last_error());
            tu_check(tu_has_fragment(dsops_last_error(), names[k]), "%s: message \"%s\" lacks \"%s\"", label,
                     dsops_last_error(), names[k]);
            ip_untouched(p, label);
            ip_untouched(i8, label);
        }
        if (tu_verbose())
            printf("  %-44s %s: %s\n", label, dsops_status_name(st), dsops_last_error());
        tf_restore(&i8->fx);
        ip_ref_free(r);
        ip_free(p);
    }
    ip_free(i8);
}

/* A prepared object belongs to the weight tensors it was made from. */
static void test_prepared(void)
{
    if (!tu_selected("prepared"))
        return;
    for (int v = 0; v < 2; v++) {
        ip_problem *p = base(v);
        ip_problem *q = base(v); /* same shapes, other buffers */
        dsops_prepared *prep = NULL;
        dsops_status st = dsops_indexer_prolog_v32_prepare(ctx, &p->args, &prep);
        if (!tu_check(st == DSOPS_OK && prep, "prepared_%s: prepare failed: %s (%s)", v ? "int8" : "bf16",
                      dsops_status_name(st), dsops_last_error())) {
            ip_free(p);
            ip_free(q);
            continue;
        }
        const pc_target t = ip_target(p, NULL);
        /* other weights: each packed weight swapped in turn (the header names idx_wq_b, idx_wk, weights_proj
         * and the Hadamard matrices as packed) */
        static const char *names[5] = {"idx_wq_b", "idx_wk", "weights_proj", "hadamard_q", "hadamard_k"};
        for (int w = 0; w < 5; w++) {
            char label[100];
            snprintf(label, sizeof label, "prepared_other_%s_%s", names[w], v ? "int8" : "bf16");
            dsops_indexer_prolog_v32_args a = p->args;
            a.prepared = prep;
            if (w == 0) a.idx_wq_b = q->args.idx_wq_b;
            if (w == 1) a.idx_wk = q->args.idx_wk;
            if (w == 2) a.weights_proj = q->args.weights_proj;
            if (w == 3) a.hadamard_q = q->args.hadamard_q;
            if (w == 4) a.hadamard_k = q->args.hadamard_k;
            pc_expect_rejected(&t, ctx, &a, DSOPS_ERR_PARAM, "prepared", 0, label);
        }
        /* bf16: a prepared object made with a Hadamard matrix used without it (and the other way round) */
        if (!v) {
            for (int w = 0; w < 2; w++) {
                char label[100];
                snprintf(label, sizeof label, "prepared_without_%s_bf16", w ? "hadamard_k" : "hadamard_q");
                dsops_indexer_prolog_v32_args a = p->args;
                a.prepared = prep;
                if (w)
                    a.hadamard_k.data = NULL;
                else
                    a.hadamard_q.data = NULL;
                tf_prepare_call(&p->fx);
                st = dsops_indexer_prolog_v32(ctx, &a);
                if (st == DSOPS_OK) {
                    /* acceptable only if the matrices are not part of the packed object: then the result
                     * must be that of the call without the matrix */
                    ip_problem tmp = *p;
                    tmp.args = a;
                    tmp.args.prepared = NULL;
                    ip_ref *r = ip_reference(&tmp.args);
                    ip_check(&tmp, r, label);
                    ip_ref_free(r);
                } else {
                    tu_check(st == DSOPS_ERR_PARAM, "%s: status %s (%s), expected DSOPS_ERR_PARAM", label,
                             dsops_status_name(st), dsops_last_error());
                    ip_untouched(p, label);
                }
                tf_restore(&p->fx);
            }
        }
        /* the same weights with other activations, outputs and caches: valid */
        {
            char label[100];
            snprintf(label, sizeof label, "prepared_reuse_%s", v ? "int8" : "bf16");
            dsops_indexer_prolog_v32_args a = q->args;
            a.idx_wq_b = p->args.idx_wq_b, a.idx_wq_b_scale = p->args.idx_wq_b_scale, a.idx_wk = p->args.idx_wk,
            a.weights_proj = p->args.weights_proj, a.hadamard_q = p->args.hadamard_q, a.hadamard_k = p->args.hadamard_k;
            q->args = a;
            ip_ref *r = ip_reference(&q->args);
            const pc_target tq = ip_target(q, r);
            pc_run_prepared_reuse(&tq, ctx, prep, label);
            ip_ref_free(r);
        }
        /* a prepared object of the other variant (same shapes) */
        {
            char label[100];
            snprintf(label, sizeof label, "prepared_%s_used_for_%s", v ? "bf16" : "int8", v ? "int8" : "bf16");
            ip_problem *o = base(!v);
            const pc_target from = ip_target(o, NULL);
            pc_expect_foreign_prepared(&t, &from, ctx, label);
            ip_free(o);
        }
        /* a prepared object of another operator */
        if (v) {
            /* (mla_prolog_v32 objects are covered by that operator's test; here only the shapes differ) */
            ip_spec s;
            memset(&s, 0, sizeof s);
            s.T = 5, s.H = 256, s.Q = 128, s.NI = 2, s.DI = 128, s.BS = 16, s.NB = 4, s.int8 = 1;
            s.ln_eps = 1e-6f, s.weights_scale = 1.0f, s.rope_mode = DSOPS_ROPE_HALF;
            ip_problem *o = ip_make(&s, 5);
            const pc_target from = ip_target(o, NULL);
            pc_expect_foreign_prepared(&t, &from, ctx, "prepared_other_shapes");
            ip_free(o);
        }
        /* prepare validates the weights it packs */
        {
            dsops_indexer_prolog_v32_args a = p->args;
            a.idx_wq_b.data = NULL;
            pc_expect_prepare_status(&t, ctx, &a, DSOPS_ERR_NULL, "prepare_null_idx_wq_b");
            a = p->args;
            a.idx_wq_b.dtype = DSOPS_FP16;
            pc_expect_prepare_status(&t, ctx, &a, DSOPS_ERR_DTYPE, "prepare_fp16_idx_wq_b");
            a = p->args;
            a.idx_wk.shape[1] -= 1;
            pc_expect_prepare_status(&t, ctx, &a, DSOPS_ERR_SHAPE, "prepare_idx_wk_h");
            dsops_prepared *px = NULL;
            st = dsops_indexer_prolog_v32_prepare(ctx, &p->args, NULL);
            tu_check(st == DSOPS_ERR_NULL, "prepare_null_out: status %s, expected DSOPS_ERR_NULL", dsops_status_name(st));
            st = dsops_indexer_prolog_v32_prepare(ctx, NULL, &px);
            tu_check(st == DSOPS_ERR_NULL, "prepare_null_args: status %s, expected DSOPS_ERR_NULL", dsops_status_name(st));
        }
        dsops_prepared_destroy(prep);
        ip_free(p);
        ip_free(q);
    }
    dsops_prepared_destroy(NULL); /* no-op */
}

static void test_init(void)
{
    if (!tu_selected("init"))
        return;
    dsops_indexer_prolog_v32_args a;
    memset(&a, 0x5a, sizeof a);
    dsops_status st = dsops_indexer_prolog_v32_init(&a, DSOPS_PRESET_V32);
    tu_check(st == DSOPS_OK, "init(V32): %s", dsops_status_name(st));
    tu_check(a.ln_eps == 1e-6f, "init(V32): ln_eps %g, expected 1e-6", (double)a.ln_eps);
    const double want = 1.0 / sqrt(64.0 * 128.0);
    tu_check(fabs((double)a.weights_scale - want) <= 2e-7 * want, "init(V32): weights_scale %.9g, expected %.9g",
             (double)a.weights_scale, want);
    tu_check(a.rope_mode == DSOPS_ROPE_HALF && a.rope_inverse == 0 && a.prepared == NULL,
             "init(V32): rope_mode %d, rope_inverse %d, prepared %p", (int)a.rope_mode, a.rope_inverse,
             (const void *)a.prepared);
    tu_check(a.x.data == NULL && a.qr_scale.data == NULL && a.hadamard_q.data == NULL && a.hadamard_k.data == NULL &&
                 a.idx_k_scale_cache.data == NULL && a.weights.data == NULL,
             "init(V32): tensors not cleared");
    st = dsops_indexer_prolog_v32_init(&a, DSOPS_PRESET_V4_FLASH);
    tu_check(st == DSOPS_ERR_PARAM, "init(V4_FLASH): %s, expected DSOPS_ERR_PARAM (V3.2-only operator)",
             dsops_status_name(st));
    st = dsops_indexer_prolog_v32_init(NULL, DSOPS_PRESET_V32);
    tu_check(st != DSOPS_OK, "init(NULL) succeeded");
    st = dsops_indexer_prolog_v32(ctx, NULL);
    tu_check(st == DSOPS_ERR_NULL, "call with args NULL: %s, expected DSOPS_ERR_NULL", dsops_status_name(st));
}

/* a NULL context uses a temporary one with the environment defaults */
static const val_ok_case null_context_cases[] = {{"null_context_bf16", BF, NULL}, {"null_context_int8", I8, NULL}};

/* The order of every validation program (tests/validation.h): init, the bad rows, the ok rows and its own cases. */
int main(int argc, char **argv)
{
    tu_init(argc, argv, 42);
    ctx = tu_context();
    test_init();
    val_run_bad(&idxp_ops, ctx, bad_cases, VAL_COUNT(bad_cases));
    val_run_ok(&idxp_ops, ctx, ok_cases, VAL_COUNT(ok_cases));
    test_bf16_with_scales();
    test_prepared();
    val_run_ok(&idxp_ops, NULL, null_context_cases, VAL_COUNT(null_context_cases));
    dsops_context_destroy(ctx);
    return tu_finish();
}
