/* Argument validation of the shared primitives (spec §1.6 V1-V10, §2.3 - §2.8, §2.11): a table of bad argument
 * sets for rmsnorm, rope_tables, rope_apply, hadamard_matrix, quant_q8, cache_store and the FRACTAL_NZ
 * conversions, each with its
 * expected status and a message fragment naming the field and the value. A rejected call must leave
 * every byte of the fixture (inputs, outputs, caches) unchanged. A second table holds argument sets that
 * look suspicious but are valid (exact aliasing, T = 0, skipped slots, eps 0...), checked against the
 * oracles. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"
#include "test_util.h"
#include "validation.h"

static dsops_context *ctx;

typedef enum prim_op {
    OP_RMSNORM, OP_ROPE_TABLES, OP_ROPE_APPLY, OP_HADAMARD, OP_QUANT, OP_CACHE_STORE, OP_TO_NZ, OP_TO_ND
} prim_op;

/* One valid problem per operator; the buffers have room for the views the cases build. */
typedef struct fixture {
    /* rmsnorm: x [4, 96] bf16 (buffer of 4 x 100), weight [96] fp32, y [4, 96] */
    _Alignas(64) uint16_t x[400];
    _Alignas(64) uint16_t y[400];
    _Alignas(64) float weight[96];
    dsops_rmsnorm_args rms;
    /* rope_tables: positions [5] int64, cos / sin [5, 64] fp32 */
    _Alignas(64) int64_t pos[5];
    _Alignas(64) float tcos[5 * 64];
    _Alignas(64) float tsin[5 * 64];
    dsops_rope_tables_args rt;
    /* rope_apply: x [3, 2, 128] bf16, rope_cos / rope_sin [3, 64] bf16, y [3, 2, 128] */
    _Alignas(64) uint16_t rx[3 * 2 * 128];
    _Alignas(64) uint16_t ry[3 * 2 * 128];
    _Alignas(64) uint16_t rcos[3 * 64];
    _Alignas(64) uint16_t rsin[3 * 64];
    dsops_rope_apply_args ra;
    /* hadamard_matrix: m [8, 8] fp32 */
    _Alignas(64) float hm[64];
    dsops_tensor h;
    /* quant_q8: x [3, 64] fp32, q [3, 64] int8, scale [3, 2] fp32, group 32 */
    _Alignas(64) float qx[3 * 64];
    _Alignas(64) int8_t qq[3 * 64];
    _Alignas(64) float qs[3 * 2];
    dsops_quant_q8_args qa;
    /* cache_store: src [4, 64] bf16, cache_index [4] int64, cache [3, 4, 64] int8 (buffer large enough
     * for a bf16 view), cache_scale [3, 4, 2] fp16, group 32 */
    _Alignas(64) uint16_t src[4 * 64];
    _Alignas(64) int64_t idx[4];
    _Alignas(64) uint16_t cache[3 * 4 * 64];
    _Alignas(64) uint16_t cscale[3 * 4 * 2];
    dsops_cache_store_args cs;
    /* FRACTAL_NZ: nd [2, 20, 24] bf16, nz [2, 2, 32, 16] bf16 (both buffers have room for wider views) */
    _Alignas(64) uint16_t nd[2 * 20 * 32];
    _Alignas(64) uint16_t nz[2 * 2 * 32 * 16 + 64];
    dsops_fractal_nz_args nza;
    prim_op op; /* the operator a table row calls */
} fixture;

static fixture *make_fixture(void)
{
    fixture *f = tu_alloc(sizeof *f); /* 64-byte aligned, as its members */
    tu_rng r;
    tu_rng_seed(&r, tu_seed());
    for (int i = 0; i < 400; i++)
        f->x[i] = tu_bf16(tu_rng_uniform(&r, -2, 2)), f->y[i] = 0x7fa5;
    for (int i = 0; i < 96; i++)
        f->weight[i] = tu_rng_uniform(&r, 0.5f, 1.5f);
    int64_t xs[2] = {4, 96}, ws = 96;
    dsops_rmsnorm_init(&f->rms, DSOPS_PRESET_V32);
    f->rms.x = dsops_tensor_make(f->x, DSOPS_BF16, 2, xs);
    f->rms.y = dsops_tensor_make(f->y, DSOPS_BF16, 2, xs);
    f->rms.weight = dsops_tensor_make(f->weight, DSOPS_FP32, 1, &ws);

    static const int64_t pos[5] = {0, 3, 4096, 70000, 2147483647};
    memcpy(f->pos, pos, sizeof pos);
    for (int i = 0; i < 5 * 64; i++)
        f->tcos[i] = f->tsin[i] = -7.0f;
    int64_t ps = 5, ts[2] = {5, 64};
    dsops_rope_tables_init(&f->rt, DSOPS_PRESET_V32);
    f->rt.positions = dsops_tensor_make(f->pos, DSOPS_INT64, 1, &ps);
    f->rt.cos = dsops_tensor_make(f->tcos, DSOPS_FP32, 2, ts);
    f->rt.sin = dsops_tensor_make(f->tsin, DSOPS_FP32, 2, ts);

    for (int i = 0; i < 3 * 2 * 128; i++)
        f->rx[i] = tu_bf16(tu_rng_uniform(&r, -2, 2)), f->ry[i] = 0x7fa5;
    for (int i = 0; i < 3 * 64; i++)
        f->rcos[i] = tu_bf16(tu_rng_uniform(&r, -1, 1)), f->rsin[i] = tu_bf16(tu_rng_uniform(&r, -1, 1));
    int64_t rs[3] = {3, 2, 128}, rts[2] = {3, 64};
    memset(&f->ra, 0, sizeof f->ra);
    f->ra.x = dsops_tensor_make(f->rx, DSOPS_BF16, 3, rs);
    f->ra.y = dsops_tensor_make(f->ry, DSOPS_BF16, 3, rs);
    f->ra.rope_cos = dsops_tensor_make(f->rcos, DSOPS_BF16, 2, rts);
    f->ra.rope_sin = dsops_tensor_make(f->rsin, DSOPS_BF16, 2, rts);
    f->ra.rope_offset = 64;
    f->ra.rope_mode = DSOPS_ROPE_INTERLEAVED;
    f->ra.rope_inverse = 1;

    int64_t hs[2] = {8, 8};
    for (int i = 0; i < 64; i++)
        f->hm[i] = 5.0f;
    f->h = dsops_tensor_make(f->hm, DSOPS_FP32, 2, hs);

    for (int i = 0; i < 3 * 64; i++)
        f->qx[i] = tu_rng_uniform(&r, -3, 3), f->qq[i] = 99;
    for (int i = 0; i < 6; i++)
        f->qs[i] = -5.0f;
    int64_t qxs[2] = {3, 64}, qss[2] = {3, 2};
    memset(&f->qa, 0, sizeof f->qa);
    f->qa.x = dsops_tensor_make(f->qx, DSOPS_FP32, 2, qxs);
    f->qa.q = dsops_tensor_make(f->qq, DSOPS_INT8, 2, qxs);
    f->qa.scale = dsops_tensor_make(f->qs, DSOPS_FP32, 2, qss);
    f->qa.group = 32;

    for (int i = 0; i < 4 * 64; i++)
        f->src[i] = tu_bf16(tu_rng_uniform(&r, -1, 1));
    static const int64_t idx[4] = {5, -1, 11, 0};
    memcpy(f->idx, idx, sizeof idx);
    for (size_t i = 0; i < sizeof f->cache / 2; i++)
        f->cache[i] = (uint16_t)(tu_rng_u64(&r) >> 48);
    for (int i = 0; i < 3 * 4 * 2; i++)
        f->cscale[i] = (uint16_t)(tu_rng_u64(&r) >> 48);
    int64_t ss[2] = {4, 64}, tn = 4, cs3[3] = {3, 4, 64}, sc3[3] = {3, 4, 2};
    memset(&f->cs, 0, sizeof f->cs);
    f->cs.src = dsops_tensor_make(f->src, DSOPS_BF16, 2, ss);
    f->cs.cache_index = dsops_tensor_make(f->idx, DSOPS_INT64, 1, &tn);
    f->cs.cache = dsops_tensor_make(f->cache, DSOPS_INT8, 3, cs3);
    f->cs.cache_scale = dsops_tensor_make(f->cscale, DSOPS_FP16, 3, sc3);
    f->cs.group = 32;

    for (size_t i = 0; i < sizeof f->nd / 2; i++)
        f->nd[i] = (uint16_t)(tu_rng_u64(&r) >> 48);
    for (size_t i = 0; i < sizeof f->nz / 2; i++)
        f->nz[i] = (uint16_t)(tu_rng_u64(&r) >> 48);
    int64_t nds[3] = {2, 20, 24}, nzs[4] = {2, 2, 32, 16};
    f->nza.nd = dsops_tensor_make(f->nd, DSOPS_BF16, 3, nds);
    f->nza.nz = dsops_tensor_make(f->nz, DSOPS_BF16, 4, nzs);
    return f;
}

/* The call of the fixture's operator (for the table runner). */
static dsops_status call(dsops_context *c, void *problem)
{
    fixture *f = problem;
    switch (f->op) {
    case OP_RMSNORM: return dsops_rmsnorm(c, &f->rms);
    case OP_ROPE_TABLES: return dsops_rope_tables(c, &f->rt);
    case OP_ROPE_APPLY: return dsops_rope_apply(c, &f->ra);
    case OP_HADAMARD: return dsops_hadamard_matrix(NULL, &f->h);
    case OP_QUANT: return dsops_quant_q8(c, &f->qa);
    case OP_CACHE_STORE: return dsops_cache_store(c, &f->cs);
    case OP_TO_NZ: return dsops_nd_to_fractal_nz(c, &f->nza);
    case OP_TO_ND: return dsops_fractal_nz_to_nd(c, &f->nza);
    }
    return DSOPS_ERR_PARAM;
}

/* The one-line mutations, the tables, the ops and main below follow the layout every test_*_validation.c shares
 * (tests/validation.h): what repeats between those programs is that protocol, each row its own field. */
#define FRAG(...) snprintf(frag, VAL_FRAG_MAX, __VA_ARGS__)

/* ---- rmsnorm ---------------------------------------------------------------------------------------- */
static void rms_null_x(void *problem, char *frag) { fixture *f = problem; f->rms.x.data = NULL; FRAG("x is NULL"); }
static void rms_null_y(void *problem, char *frag) { fixture *f = problem; f->rms.y.data = NULL; FRAG("y is NULL"); }
static void rms_rank_x(void *problem, char *frag) { fixture *f = problem; f->rms.x.ndim = 3; f->rms.x.shape[2] = 1; FRAG("x has rank 3"); }
static void rms_shape_y(void *problem, char *frag) { fixture *f = problem; f->rms.y.shape[0] = 3; FRAG("y.shape[0] = 3"); }
static void rms_shape_yw(void *problem, char *frag) { fixture *f = problem; f->rms.y.shape[1] = 95; FRAG("y.shape[1] = 95"); }
static void rms_shape_w(void *problem, char *frag) { fixture *f = problem; f->rms.weight.shape[0] = 95; FRAG("weight.shape[0] = 95"); }
static void rms_w_zero(void *problem, char *frag)
{
    fixture *f = problem;
    f->rms.x.shape[1] = f->rms.y.shape[1] = 0;
    f->rms.weight.data = NULL;
    FRAG("x.shape[1] = 0");
}
static void rms_dtype_x(void *problem, char *frag) { fixture *f = problem; f->rms.x.dtype = DSOPS_FP16; FRAG("x has dtype fp16"); }
static void rms_dtype_w(void *problem, char *frag) { fixture *f = problem; f->rms.weight.dtype = DSOPS_FP16; FRAG("weight has dtype fp16"); }
static void rms_dtype_y(void *problem, char *frag) { fixture *f = problem; f->rms.y.dtype = DSOPS_FP32; FRAG("y has dtype fp32"); }
static void rms_stride(void *problem, char *frag) { fixture *f = problem; f->rms.x.stride[1] = 2; f->rms.x.shape[1] = f->rms.y.shape[1] = 48; f->rms.weight.shape[0] = 48; FRAG("x.stride[1] = 2"); }
static void rms_eps_nan(void *problem, char *frag) { fixture *f = problem; f->rms.eps = NAN; FRAG("eps = nan"); }
static void rms_eps_neg(void *problem, char *frag) { fixture *f = problem; f->rms.eps = -1e-6f; FRAG("eps = -1e-06"); }
static void rms_eps_inf(void *problem, char *frag) { fixture *f = problem; f->rms.eps = INFINITY; FRAG("eps = inf"); }
static void rms_alias_shift(void *problem, char *frag) { fixture *f = problem; f->rms.x.data = f->y + 1; FRAG("y overlaps x"); }
static void rms_alias_stride(void *problem, char *frag)
{
    fixture *f = problem;
    f->rms.x.data = f->y; /* same memory, different row stride: not the same view */
    f->rms.y.stride[0] = 97;
    FRAG("y overlaps x");
}
static void rms_alias_weight(void *problem, char *frag) { fixture *f = problem; f->rms.weight.data = f->y + 8; FRAG("y overlaps weight"); }

/* ---- rope_tables ------------------------------------------------------------------------------------ */
static void rt_null_pos(void *problem, char *frag) { fixture *f = problem; f->rt.positions.data = NULL; FRAG("positions is NULL"); }
static void rt_null_cos(void *problem, char *frag) { fixture *f = problem; f->rt.cos.data = NULL; FRAG("cos is NULL"); }
static void rt_null_sin(void *problem, char *frag) { fixture *f = problem; f->rt.sin.data = NULL; FRAG("sin is NULL"); }
static void rt_rank_pos(void *problem, char *frag) { fixture *f = problem; f->rt.positions.ndim = 2; f->rt.positions.shape[1] = 1; FRAG("positions has rank 2"); }
static void rt_shape_cos(void *problem, char *frag) { fixture *f = problem; f->rt.cos.shape[1] = 32; FRAG("cos.shape[1] = 32"); }
static void rt_shape_sin(void *problem, char *frag) { fixture *f = problem; f->rt.sin.shape[0] = 4; FRAG("sin.shape[0] = 4"); }
static void rt_dtype_pos(void *problem, char *frag) { fixture *f = problem; f->rt.positions.dtype = DSOPS_INT32; FRAG("positions has dtype int32"); }
static void rt_dtype_cos(void *problem, char *frag) { fixture *f = problem; f->rt.cos.dtype = DSOPS_FP16; FRAG("cos has dtype fp16"); }
static void rt_dtype_mix(void *problem, char *frag) { fixture *f = problem; f->rt.sin.dtype = DSOPS_BF16; FRAG("sin has dtype bf16"); }
static void rt_base_zero(void *problem, char *frag) { fixture *f = problem; f->rt.base = 0.0; FRAG("base = 0"); }
static void rt_base_nan(void *problem, char *frag) { fixture *f = problem; f->rt.base = NAN; FRAG("base = nan"); }
static void rt_base_huge(void *problem, char *frag) { fixture *f = problem; f->rt.base = 1e300; FRAG("base = 1e+300"); }
static void rt_layout(void *problem, char *frag) { fixture *f = problem; f->rt.layout = (dsops_rope_layout)5; FRAG("layout = 5"); }
static void rt_yarn(void *problem, char *frag) { fixture *f = problem; f->rt.yarn = 2; FRAG("yarn = 2"); }
static void rt_factor(void *problem, char *frag) { fixture *f = problem; f->rt.yarn_factor = 0.0; FRAG("yarn_factor = 0"); }
static void rt_orig(void *problem, char *frag) { fixture *f = problem; f->rt.yarn_original_len = -4096.0; FRAG("yarn_original_len = -4096"); }
static void rt_beta_fast(void *problem, char *frag) { fixture *f = problem; f->rt.yarn_beta_fast = INFINITY; FRAG("yarn_beta_fast = inf"); }
static void rt_beta_slow(void *problem, char *frag) { fixture *f = problem; f->rt.yarn_beta_slow = NAN; FRAG("yarn_beta_slow = nan"); }
static void rt_base_one(void *problem, char *frag) { fixture *f = problem; f->rt.base = 1.0; FRAG("ln(base) = 0"); }
static void rt_pos_neg(void *problem, char *frag) { fixture *f = problem; f->pos[2] = -1; FRAG("positions[2] = -1"); }
static void rt_pos_big(void *problem, char *frag) { fixture *f = problem; f->pos[4] = 2147483648LL; FRAG("positions[4] = 2147483648"); }
static void rt_alias_sin_cos(void *problem, char *frag) { fixture *f = problem; f->rt.sin.data = f->tcos + 64; FRAG("sin overlaps cos"); }
static void rt_alias_pos(void *problem, char *frag) { fixture *f = problem; f->rt.positions.data = f->tcos + 16; FRAG("cos overlaps positions"); }

/* ---- rope_apply ------------------------------------------------------------------------------------- */
static void ra_null_x(void *problem, char *frag) { fixture *f = problem; f->ra.x.data = NULL; FRAG("x is NULL"); }
static void ra_null_cos(void *problem, char *frag) { fixture *f = problem; f->ra.rope_cos.data = NULL; FRAG("rope_cos is NULL"); }
static void ra_null_sin(void *problem, char *frag) { fixture *f = problem; f->ra.rope_sin.data = NULL; FRAG("rope_sin is NULL"); }
static void ra_null_y(void *problem, char *frag) { fixture *f = problem; f->ra.y.data = NULL; FRAG("y is NULL"); }
static void ra_rank_x(void *problem, char *frag) { fixture *f = problem; f->ra.x.ndim = 2; FRAG("x has rank 2"); }
static void ra_w_small(void *problem, char *frag) { fixture *f = problem; f->ra.x.shape[2] = f->ra.y.shape[2] = 32; FRAG("x.shape[2] = 32"); }
static void ra_shape_y(void *problem, char *frag) { fixture *f = problem; f->ra.y.shape[1] = 1; FRAG("y.shape[1] = 1"); }
static void ra_shape_cos(void *problem, char *frag) { fixture *f = problem; f->ra.rope_cos.shape[0] = 2; FRAG("rope_cos.shape[0] = 2"); }
static void ra_shape_sin(void *problem, char *frag) { fixture *f = problem; f->ra.rope_sin.shape[1] = 32; FRAG("rope_sin.shape[1] = 32"); }
static void ra_dtype_x(void *problem, char *frag) { fixture *f = problem; f->ra.x.dtype = DSOPS_FP16; FRAG("x has dtype fp16"); }
static void ra_dtype_y(void *problem, char *frag) { fixture *f = problem; f->ra.y.dtype = DSOPS_FP32; FRAG("y has dtype fp32"); }
static void ra_dtype_cos(void *problem, char *frag) { fixture *f = problem; f->ra.rope_cos.dtype = DSOPS_INT8; FRAG("rope_cos has dtype int8"); }
static void ra_off_neg(void *problem, char *frag) { fixture *f = problem; f->ra.rope_offset = -1; FRAG("rope_offset = -1"); }
static void ra_off_big(void *problem, char *frag) { fixture *f = problem; f->ra.rope_offset = 65; FRAG("rope_offset = 65 is outside [0, 64]"); }
static void ra_mode(void *problem, char *frag) { fixture *f = problem; f->ra.rope_mode = (dsops_rope_mode)3; FRAG("rope_mode = 3"); }
static void ra_inverse(void *problem, char *frag) { fixture *f = problem; f->ra.rope_inverse = 2; FRAG("rope_inverse = 2"); }
static void ra_alias_shift(void *problem, char *frag) { fixture *f = problem; f->ra.x.data = f->ry + 64; FRAG("y overlaps x"); }
static void ra_alias_cos(void *problem, char *frag) { fixture *f = problem; f->ra.rope_cos.data = f->ry + 128; FRAG("y overlaps rope_cos"); }
static void ra_alias_sin(void *problem, char *frag) { fixture *f = problem; f->ra.rope_sin.data = f->ry; FRAG("y overlaps rope_sin"); }

/* ---- hadamard_matrix ---------------------------------------------------------------------------------- */
static void hm_null(void *problem, char *frag) { fixture *f = problem; f->h.data = NULL; FRAG("m is NULL"); }
static void hm_rank(void *problem, char *frag) { fixture *f = problem; f->h.ndim = 1; FRAG("m has rank 1"); }
static void hm_dtype(void *problem, char *frag) { fixture *f = problem; f->h.dtype = DSOPS_FP16; FRAG("m has dtype fp16"); }
static void hm_pow2(void *problem, char *frag) { fixture *f = problem; f->h.shape[0] = f->h.shape[1] = 6; FRAG("m.shape[0] = 6"); }
static void hm_zero(void *problem, char *frag) { fixture *f = problem; f->h.shape[0] = f->h.shape[1] = 0; FRAG("m.shape[0] = 0"); }
static void hm_square(void *problem, char *frag) { fixture *f = problem; f->h.shape[1] = 4; FRAG("m.shape[1] = 4"); }

/* ---- quant_q8 ------------------------------------------------------------------------------------------ */
static void qa_null_x(void *problem, char *frag) { fixture *f = problem; f->qa.x.data = NULL; FRAG("x is NULL"); }
static void qa_null_q(void *problem, char *frag) { fixture *f = problem; f->qa.q.data = NULL; FRAG("q is NULL"); }
static void qa_null_s(void *problem, char *frag) { fixture *f = problem; f->qa.scale.data = NULL; FRAG("scale is NULL"); }
static void qa_group0(void *problem, char *frag) { fixture *f = problem; f->qa.group = 0; FRAG("group = 0"); }
static void qa_group_neg(void *problem, char *frag) { fixture *f = problem; f->qa.group = -32; FRAG("group = -32"); }
static void qa_group_div(void *problem, char *frag) { fixture *f = problem; f->qa.group = 5; FRAG("group = 5 does not divide W = 64"); }
static void qa_shape_s(void *problem, char *frag) { fixture *f = problem; f->qa.scale.shape[1] = 3; FRAG("scale.shape[1] = 3"); }
static void qa_shape_q(void *problem, char *frag) { fixture *f = problem; f->qa.q.shape[0] = 2; FRAG("q.shape[0] = 2"); }
static void qa_w_zero(void *problem, char *frag) { fixture *f = problem; f->qa.x.shape[1] = 0; FRAG("x.shape[1] = 0"); }
static void qa_dtype_x(void *problem, char *frag) { fixture *f = problem; f->qa.x.dtype = DSOPS_INT8; FRAG("x has dtype int8"); }
static void qa_dtype_q(void *problem, char *frag) { fixture *f = problem; f->qa.q.dtype = DSOPS_UINT8; FRAG("q has dtype uint8"); }
static void qa_dtype_s(void *problem, char *frag) { fixture *f = problem; f->qa.scale.dtype = DSOPS_FP16; FRAG("scale has dtype fp16"); }
static void qa_alias_q(void *problem, char *frag) { fixture *f = problem; f->qa.q.data = f->qx; FRAG("q overlaps x"); }
static void qa_alias_s(void *problem, char *frag) { fixture *f = problem; f->qa.scale.data = f->qq + 8; FRAG("scale overlaps q"); }
static void qa_alias_sx(void *problem, char *frag) { fixture *f = problem; f->qa.scale.data = f->qx + 100; FRAG("scale overlaps x"); }

/* ---- cache_store --------------------------------------------------------------------------------------- */
static void cs_null_src(void *problem, char *frag) { fixture *f = problem; f->cs.src.data = NULL; FRAG("src is NULL"); }
static void cs_null_idx(void *problem, char *frag) { fixture *f = problem; f->cs.cache_index.data = NULL; FRAG("cache_index is NULL"); }
static void cs_null_cache(void *problem, char *frag) { fixture *f = problem; f->cs.cache.data = NULL; FRAG("cache is NULL"); }
static void cs_null_scale(void *problem, char *frag) { fixture *f = problem; f->cs.cache_scale.data = NULL; FRAG("cache_scale is NULL"); }
static void cs_shape_idx(void *problem, char *frag) { fixture *f = problem; f->cs.cache_index.shape[0] = 3; FRAG("cache_index.shape[0] = 3"); }
static void cs_shape_w(void *problem, char *frag) { fixture *f = problem; f->cs.cache.shape[2] = 32; FRAG("cache.shape[2] = 32"); }
static void cs_shape_nb(void *problem, char *frag) { fixture *f = problem; f->cs.cache.shape[0] = 0; f->cs.cache_scale.shape[0] = 0; FRAG("NB = 0"); }
static void cs_shape_scale(void *problem, char *frag) { fixture *f = problem; f->cs.cache_scale.shape[2] = 1; FRAG("cache_scale.shape[2] = 1"); }
static void cs_shape_scale_bs(void *problem, char *frag) { fixture *f = problem; f->cs.cache_scale.shape[1] = 3; FRAG("cache_scale.shape[1] = 3"); }
static void cs_scale_rank2(void *problem, char *frag) { fixture *f = problem; f->cs.cache_scale.ndim = 2; FRAG("cache_scale has rank 2"); }
static void cs_dtype_src(void *problem, char *frag) { fixture *f = problem; f->cs.src.dtype = DSOPS_FP16; FRAG("src has dtype fp16"); }
static void cs_dtype_idx(void *problem, char *frag) { fixture *f = problem; f->cs.cache_index.dtype = DSOPS_INT32; FRAG("cache_index has dtype int32"); }
static void cs_dtype_cache(void *problem, char *frag) { fixture *f = problem; f->cs.cache.dtype = DSOPS_FP16; FRAG("cache has dtype fp16"); }
static void cs_dtype_scale(void *problem, char *frag) { fixture *f = problem; f->cs.cache_scale.dtype = DSOPS_BF16; FRAG("cache_scale has dtype bf16"); }
static void cs_group_neg(void *problem, char *frag) { fixture *f = problem; f->cs.group = -1; FRAG("group = -1"); }
static void cs_group_div(void *problem, char *frag) { fixture *f = problem; f->cs.group = 48; FRAG("group = 48 does not divide W = 64"); }
static void cs_bf16_scale(void *problem, char *frag) { fixture *f = problem; f->cs.cache.dtype = DSOPS_BF16; FRAG("cache_scale is given but cache is bf16"); }
static void cs_idx_big(void *problem, char *frag) { fixture *f = problem; f->idx[1] = 12; FRAG("cache_index[1] = 12 is outside [0, 12)"); }
static void cs_idx_dup(void *problem, char *frag) { fixture *f = problem; f->idx[3] = 5; FRAG("cache_index[3] = 5 repeats cache_index[0]"); }
static void cs_idx_dup2(void *problem, char *frag) { fixture *f = problem; f->idx[1] = 11; FRAG("cache_index[2] = 11 repeats cache_index[1]"); }
static void cs_alias_src(void *problem, char *frag) { fixture *f = problem; f->cs.cache.data = f->src; FRAG("cache overlaps src"); }
static void cs_alias_idx(void *problem, char *frag) { fixture *f = problem; f->cs.cache_index.data = f->cache + 8; FRAG("cache overlaps cache_index"); }
static void cs_alias_scale(void *problem, char *frag) { fixture *f = problem; f->cs.cache_scale.data = f->cache + 100; FRAG("cache_scale overlaps cache"); }
static void cs_alias_scale_src(void *problem, char *frag) { fixture *f = problem; f->cs.cache_scale.data = f->src + 4; FRAG("cache_scale overlaps src"); }

/* ---- nd_to_fractal_nz / fractal_nz_to_nd ------------------------------------------------------------ */
static void nz_null_nd(void *problem, char *frag) { fixture *f = problem; f->nza.nd.data = NULL; FRAG("nd is NULL"); }
static void nz_null_nz(void *problem, char *frag) { fixture *f = problem; f->nza.nz.data = NULL; FRAG("nz is NULL"); }
static void nz_rank_nd(void *problem, char *frag) { fixture *f = problem; f->nza.nd.ndim = 1; FRAG("nd has rank 1"); }
static void nz_rank_nz(void *problem, char *frag) { fixture *f = problem; f->nza.nz.ndim = 3; FRAG("nz has rank 3"); }
static void nz_dtype(void *problem, char *frag) { fixture *f = problem; f->nza.nz.dtype = DSOPS_FP16; FRAG("nz has dtype fp16"); }
static void nz_batch(void *problem, char *frag) { fixture *f = problem; f->nza.nz.shape[0] = 1; FRAG("nz.shape[0] = 1"); }
static void nz_c1(void *problem, char *frag) { fixture *f = problem; f->nza.nz.shape[1] = 1; FRAG("nz.shape[1] = 1"); }
static void nz_c1_int8(void *problem, char *frag)
{
    fixture *f = problem;
    f->nza.nd.dtype = f->nza.nz.dtype = DSOPS_INT8; /* C0 32: one column block, 32 wide */
    FRAG("nz.shape[1] = 2");
}
static void nz_rows(void *problem, char *frag) { fixture *f = problem; f->nza.nz.shape[2] = 20; FRAG("nz.shape[2] = 20"); }
static void nz_c0(void *problem, char *frag) { fixture *f = problem; f->nza.nz.shape[3] = 8; FRAG("nz.shape[3] = 8"); }
static void nz_alias(void *problem, char *frag) { fixture *f = problem; f->nza.nz.data = f->nd + 64; FRAG("overlaps"); }
static void nz_self(void *problem, char *frag) { fixture *f = problem; f->nza.nz.stride[2] = 8; FRAG("nz"); }
/* no element (one extent 0) but a column count whose rounding up to C0 would overflow int64 */
static void nz_wide_empty(void *problem, char *frag)
{
    fixture *f = problem;
    f->nza.nd.shape[1] = 0;
    f->nza.nd.shape[2] = INT64_MAX;
    FRAG("nd.shape[2] = 9223372036854775807 is above 2^60");
}

/* a row's variant: the operator (prim_op), for ok rows with the flag NOTHING_TO_DO: the call must leave the
 * whole fixture unchanged */
#define NOTHING_TO_DO 0x100
#define R OP_RMSNORM
#define RT OP_ROPE_TABLES
#define RA OP_ROPE_APPLY
#define HM OP_HADAMARD
#define QA OP_QUANT
#define CS OP_CACHE_STORE
#define ZN OP_TO_NZ
#define ZD OP_TO_ND

static const val_bad_case bad_cases[] = {
    {"rmsnorm_null_x", R, DSOPS_ERR_NULL, rms_null_x},
    {"rmsnorm_null_y", R, DSOPS_ERR_NULL, rms_null_y},
    {"rmsnorm_rank_x", R, DSOPS_ERR_SHAPE, rms_rank_x},
    {"rmsnorm_shape_y_t", R, DSOPS_ERR_SHAPE, rms_shape_y},
    {"rmsnorm_shape_y_w", R, DSOPS_ERR_SHAPE, rms_shape_yw},
    {"rmsnorm_shape_weight", R, DSOPS_ERR_SHAPE, rms_shape_w},
    {"rmsnorm_w_zero", R, DSOPS_ERR_SHAPE, rms_w_zero},
    {"rmsnorm_inner_stride", R, DSOPS_ERR_SHAPE, rms_stride},
    {"rmsnorm_dtype_x", R, DSOPS_ERR_DTYPE, rms_dtype_x},
    {"rmsnorm_dtype_weight", R, DSOPS_ERR_DTYPE, rms_dtype_w},
    {"rmsnorm_dtype_y", R, DSOPS_ERR_DTYPE, rms_dtype_y},
    {"rmsnorm_eps_nan", R, DSOPS_ERR_PARAM, rms_eps_nan},
    {"rmsnorm_eps_negative", R, DSOPS_ERR_PARAM, rms_eps_neg},
    {"rmsnorm_eps_inf", R, DSOPS_ERR_PARAM, rms_eps_inf},
    {"rmsnorm_alias_partial", R, DSOPS_ERR_ALIAS, rms_alias_shift},
    {"rmsnorm_alias_other_stride", R, DSOPS_ERR_ALIAS, rms_alias_stride},
    {"rmsnorm_alias_weight", R, DSOPS_ERR_ALIAS, rms_alias_weight},
    {"rope_tables_null_positions", RT, DSOPS_ERR_NULL, rt_null_pos},
    {"rope_tables_null_cos", RT, DSOPS_ERR_NULL, rt_null_cos},
    {"rope_tables_null_sin", RT, DSOPS_ERR_NULL, rt_null_sin},
    {"rope_tables_rank_positions", RT, DSOPS_ERR_SHAPE, rt_rank_pos},
    {"rope_tables_shape_cos", RT, DSOPS_ERR_SHAPE, rt_shape_cos},
    {"rope_tables_shape_sin", RT, DSOPS_ERR_SHAPE, rt_shape_sin},
    {"rope_tables_dtype_positions", RT, DSOPS_ERR_DTYPE, rt_dtype_pos},
    {"rope_tables_dtype_cos", RT, DSOPS_ERR_DTYPE, rt_dtype_cos},
    {"rope_tables_dtype_mixed", RT, DSOPS_ERR_DTYPE, rt_dtype_mix},
    {"rope_tables_base_zero", RT, DSOPS_ERR_PARAM, rt_base_zero},
    {"rope_tables_base_nan", RT, DSOPS_ERR_PARAM, rt_base_nan},
    {"rope_tables_base_beyond_fp32", RT, DSOPS_ERR_PARAM, rt_base_huge},
    {"rope_tables_layout_enum", RT, DSOPS_ERR_PARAM, rt_layout},
    {"rope_tables_yarn_flag", RT, DSOPS_ERR_PARAM, rt_yarn},
    {"rope_tables_yarn_factor", RT, DSOPS_ERR_PARAM, rt_factor},
    {"rope_tables_yarn_original_len", RT, DSOPS_ERR_PARAM, rt_orig},
    {"rope_tables_yarn_beta_fast", RT, DSOPS_ERR_PARAM, rt_beta_fast},
    {"rope_tables_yarn_beta_slow", RT, DSOPS_ERR_PARAM, rt_beta_slow},
    {"rope_tables_yarn_base_one", RT, DSOPS_ERR_PARAM, rt_base_one},
    {"rope_tables_position_negative", RT, DSOPS_ERR_INDEX, rt_pos_neg},
    {"rope_tables_position_beyond_int32", RT, DSOPS_ERR_INDEX, rt_pos_big},
    {"rope_tables_alias_sin_cos", RT, DSOPS_ERR_ALIAS, rt_alias_sin_cos},
    {"rope_tables_alias_positions", RT, DSOPS_ERR_ALIAS, rt_alias_pos},
    {"rope_apply_null_x", RA, DSOPS_ERR_NULL, ra_null_x},
    {"rope_apply_null_cos", RA, DSOPS_ERR_NULL, ra_null_cos},
    {"rope_apply_null_sin", RA, DSOPS_ERR_NULL, ra_null_sin},
    {"rope_apply_null_y", RA, DSOPS_ERR_NULL, ra_null_y},
    {"rope_apply_rank_x", RA, DSOPS_ERR_SHAPE, ra_rank_x},
    {"rope_apply_w_below_64", RA, DSOPS_ERR_SHAPE, ra_w_small},
    {"rope_apply_shape_y", RA, DSOPS_ERR_SHAPE, ra_shape_y},
    {"rope_apply_shape_cos", RA, DSOPS_ERR_SHAPE, ra_shape_cos},
    {"rope_apply_shape_sin", RA, DSOPS_ERR_SHAPE, ra_shape_sin},
    {"rope_apply_dtype_x", RA, DSOPS_ERR_DTYPE, ra_dtype_x},
    {"rope_apply_dtype_y", RA, DSOPS_ERR_DTYPE, ra_dtype_y},
    {"rope_apply_dtype_cos", RA, DSOPS_ERR_DTYPE, ra_dtype_cos},
    {"rope_apply_offset_negative", RA, DSOPS_ERR_PARAM, ra_off_neg},
    {"rope_apply_offset_beyond", RA, DSOPS_ERR_PARAM, ra_off_big},
    {"rope_apply_mode_enum", RA, DSOPS_ERR_PARAM, ra_mode},
    {"rope_apply_inverse_flag", RA, DSOPS_ERR_PARAM, ra_inverse},
    {"rope_apply_alias_partial", RA, DSOPS_ERR_ALIAS, ra_alias_shift},
    {"rope_apply_alias_cos", RA, DSOPS_ERR_ALIAS, ra_alias_cos},
    {"rope_apply_alias_sin", RA, DSOPS_ERR_ALIAS, ra_alias_sin},
    {"hadamard_null", HM, DSOPS_ERR_NULL, hm_null},
    {"hadamard_rank", HM, DSOPS_ERR_SHAPE, hm_rank},
    {"hadamard_dtype", HM, DSOPS_ERR_DTYPE, hm_dtype},
    {"hadamard_not_power_of_two", HM, DSOPS_ERR_SHAPE, hm_pow2},
    {"hadamard_zero", HM, DSOPS_ERR_SHAPE, hm_zero},
    {"hadamard_not_square", HM, DSOPS_ERR_SHAPE, hm_square},
    {"quant_q8_null_x", QA, DSOPS_ERR_NULL, qa_null_x},
    {"quant_q8_null_q", QA, DSOPS_ERR_NULL, qa_null_q},
    {"quant_q8_null_scale", QA, DSOPS_ERR_NULL, qa_null_s},
    {"quant_q8_group_zero", QA, DSOPS_ERR_PARAM, qa_group0},
    {"quant_q8_group_negative", QA, DSOPS_ERR_PARAM, qa_group_neg},
    {"quant_q8_group_not_dividing", QA, DSOPS_ERR_PARAM, qa_group_div},
    {"quant_q8_shape_scale", QA, DSOPS_ERR_SHAPE, qa_shape_s},
    {"quant_q8_shape_q", QA, DSOPS_ERR_SHAPE, qa_shape_q},
    {"quant_q8_w_zero", QA, DSOPS_ERR_SHAPE, qa_w_zero},
    {"quant_q8_dtype_x", QA, DSOPS_ERR_DTYPE, qa_dtype_x},
    {"quant_q8_dtype_q", QA, DSOPS_ERR_DTYPE, qa_dtype_q},
    {"quant_q8_dtype_scale", QA, DSOPS_ERR_DTYPE, qa_dtype_s},
    {"quant_q8_alias_q_x", QA, DSOPS_ERR_ALIAS, qa_alias_q},
    {"quant_q8_alias_scale_q", QA, DSOPS_ERR_ALIAS, qa_alias_s},
    {"quant_q8_alias_scale_x", QA, DSOPS_ERR_ALIAS, qa_alias_sx},
    {"cache_store_null_src", CS, DSOPS_ERR_NULL, cs_null_src},
    {"cache_store_null_index", CS, DSOPS_ERR_NULL, cs_null_idx},
    {"cache_store_null_cache", CS, DSOPS_ERR_NULL, cs_null_cache},
    {"cache_store_null_scale", CS, DSOPS_ERR_NULL, cs_null_scale},
    {"cache_store_shape_index", CS, DSOPS_ERR_SHAPE, cs_shape_idx},
    {"cache_store_shape_cache_w", CS, DSOPS_ERR_SHAPE, cs_shape_w},
    {"cache_store_shape_nb_zero", CS, DSOPS_ERR_SHAPE, cs_shape_nb},
    {"cache_store_shape_scale", CS, DSOPS_ERR_SHAPE, cs_shape_scale},
    {"cache_store_shape_scale_bs", CS, DSOPS_ERR_SHAPE, cs_shape_scale_bs},
    {"cache_store_scale_rank2_grouped", CS, DSOPS_ERR_SHAPE, cs_scale_rank2},
    {"cache_store_dtype_src", CS, DSOPS_ERR_DTYPE, cs_dtype_src},
    {"cache_store_dtype_index", CS, DSOPS_ERR_DTYPE, cs_dtype_idx},
    {"cache_store_dtype_cache", CS, DSOPS_ERR_DTYPE, cs_dtype_cache},
    {"cache_store_dtype_scale", CS, DSOPS_ERR_DTYPE, cs_dtype_scale},
    {"cache_store_group_negative", CS, DSOPS_ERR_PARAM, cs_group_neg},
    {"cache_store_group_not_dividing", CS, DSOPS_ERR_PARAM, cs_group_div},
    {"cache_store_bf16_with_scale", CS, DSOPS_ERR_PARAM, cs_bf16_scale},
    {"cache_store_index_out_of_range", CS, DSOPS_ERR_INDEX, cs_idx_big},
    {"cache_store_index_duplicate", CS, DSOPS_ERR_INDEX, cs_idx_dup},
    {"cache_store_index_duplicate_last_slot", CS, DSOPS_ERR_INDEX, cs_idx_dup2},
    {"cache_store_alias_cache_src", CS, DSOPS_ERR_ALIAS, cs_alias_src},
    {"cache_store_alias_cache_index", CS, DSOPS_ERR_ALIAS, cs_alias_idx},
    {"cache_store_alias_scale_cache", CS, DSOPS_ERR_ALIAS, cs_alias_scale},
    {"cache_store_alias_scale_src", CS, DSOPS_ERR_ALIAS, cs_alias_scale_src},
    {"to_nz_null_nd", ZN, DSOPS_ERR_NULL, nz_null_nd},
    {"to_nz_null_nz", ZN, DSOPS_ERR_NULL, nz_null_nz},
    {"to_nd_null_nz", ZD, DSOPS_ERR_NULL, nz_null_nz},
    {"to_nz_rank_nd", ZN, DSOPS_ERR_SHAPE, nz_rank_nd},
    {"to_nd_rank_nz", ZD, DSOPS_ERR_SHAPE, nz_rank_nz},
    {"to_nz_dtype", ZN, DSOPS_ERR_DTYPE, nz_dtype},
    {"to_nd_batch", ZD, DSOPS_ERR_SHAPE, nz_batch},
    {"to_nz_column_blocks", ZN, DSOPS_ERR_SHAPE, nz_c1},
    {"to_nz_column_blocks_int8", ZN, DSOPS_ERR_SHAPE, nz_c1_int8},
    {"to_nd_rows_not_rounded", ZD, DSOPS_ERR_SHAPE, nz_rows},
    {"to_nz_c0", ZN, DSOPS_ERR_SHAPE, nz_c0},
    {"to_nz_alias", ZN, DSOPS_ERR_ALIAS, nz_alias},
    {"to_nd_alias", ZD, DSOPS_ERR_ALIAS, nz_alias},
    {"to_nz_self_overlap", ZN, DSOPS_ERR_ALIAS, nz_self},
    {"to_nz_extent_above_2p60", ZN, DSOPS_ERR_SHAPE, nz_wide_empty},
};

/* ---- valid but suspicious ------------------------------------------------------------------------------- */

static void ok_rms_in_place(void *problem) { fixture *f = problem; f->rms.y.data = f->x; }
static void ok_rms_eps0(void *problem) { fixture *f = problem; f->rms.eps = 0.0f; f->rms.weight.data = NULL; }
static void ok_rms_bf16_weight(void *problem)
{
    fixture *f = problem;
    uint16_t *w = (uint16_t *)f->weight; /* 96 bf16 weights in the first half of the fp32 buffer */
    for (int i = 0; i < 96; i++)
        w[i] = tu_bf16(1.0f + i / 128.0f);
    f->rms.weight.dtype = DSOPS_BF16;
}
static void ok_rms_t0(void *problem) { fixture *f = problem; f->rms.x.shape[0] = f->rms.y.shape[0] = 0; }
static void ok_rt_no_yarn_base_one(void *problem) { fixture *f = problem; f->rt.yarn = 0; f->rt.base = 1.0; }
static void ok_rt_bf16(void *problem) { fixture *f = problem; f->rt.cos.dtype = f->rt.sin.dtype = DSOPS_BF16; f->rt.layout = DSOPS_ROPE_PAIRS; }
static void ok_rt_t0(void *problem) { fixture *f = problem; f->rt.positions.shape[0] = f->rt.cos.shape[0] = f->rt.sin.shape[0] = 0; }
static void ok_ra_in_place(void *problem) { fixture *f = problem; f->ra.y.data = f->rx; }
static void ok_ra_half_offset0(void *problem)
{
    fixture *f = problem;
    f->ra.rope_offset = 0;
    f->ra.rope_mode = DSOPS_ROPE_HALF;
    f->ra.rope_inverse = 0;
}
static void ok_ra_t0(void *problem) { fixture *f = problem; f->ra.x.shape[0] = f->ra.y.shape[0] = f->ra.rope_cos.shape[0] = f->ra.rope_sin.shape[0] = 0; }
static void ok_hm_one(void *problem) { fixture *f = problem; f->h.shape[0] = f->h.shape[1] = 1; }
static void ok_qa_bf16_g1(void *problem) { fixture *f = problem; f->qa.x.dtype = DSOPS_BF16; f->qa.group = 64; f->qa.scale.shape[1] = 1; }
static void ok_qa_r0(void *problem) { fixture *f = problem; f->qa.x.shape[0] = f->qa.q.shape[0] = f->qa.scale.shape[0] = 0; }
static void ok_cs_all_skipped(void *problem)
{
    fixture *f = problem;
    f->idx[0] = -1, f->idx[1] = INT64_MIN, f->idx[2] = -12, f->idx[3] = -1;
}
static void ok_cs_group0_rank2(void *problem)
{
    fixture *f = problem;
    int64_t s2[2] = {3, 4};
    f->cs.group = 0;
    f->cs.cache_scale = dsops_tensor_make(f->cscale, DSOPS_FP32, 2, s2); /* 48 bytes: the fp16 buffer's size */
}
static void ok_cs_bf16(void *problem) { fixture *f = problem; f->cs.cache.dtype = DSOPS_BF16; f->cs.cache_scale.data = NULL; f->cs.group = 0; }
static void ok_cs_t0(void *problem) { fixture *f = problem; f->cs.src.shape[0] = f->cs.cache_index.shape[0] = 0; }

static void ok_nz_r0(void *problem) { fixture *f = problem; f->nza.nd.shape[1] = 0; f->nza.nz.shape[2] = 0; }
static void ok_nz_strided(void *problem)
{
    fixture *f = problem;
    /* nd rows 32 apart inside its buffer; nz with a gap of 8 elements after each column block and batch */
    int64_t nds[3] = {2, 20, 24}, nzs[4] = {2, 2, 32, 16};
    f->nza.nd = dsops_tensor_make(f->nd, DSOPS_BF16, 3, nds);
    f->nza.nd.stride[0] = 20 * 32, f->nza.nd.stride[1] = 32;
    f->nza.nz = dsops_tensor_make(f->nz, DSOPS_BF16, 4, nzs);
    f->nza.nz.stride[1] = 32 * 16 + 8, f->nza.nz.stride[0] = 2 * (32 * 16 + 8) + 8;
}

static const val_ok_case ok_cases[] = {
    {"rmsnorm_exact_alias", R, ok_rms_in_place},
    {"rmsnorm_eps_zero_unweighted", R, ok_rms_eps0},
    {"rmsnorm_bf16_weight", R, ok_rms_bf16_weight},
    {"rmsnorm_t0", R | NOTHING_TO_DO, ok_rms_t0},
    {"rope_tables_base_one_without_yarn", RT, ok_rt_no_yarn_base_one},
    {"rope_tables_bf16_pairs", RT, ok_rt_bf16},
    {"rope_tables_t0", RT | NOTHING_TO_DO, ok_rt_t0},
    {"rope_apply_exact_alias", RA, ok_ra_in_place},
    {"rope_apply_half_offset0", RA, ok_ra_half_offset0},
    {"rope_apply_t0", RA | NOTHING_TO_DO, ok_ra_t0},
    {"hadamard_d1", HM, ok_hm_one},
    {"quant_q8_bf16_one_group", QA, ok_qa_bf16_g1},
    {"quant_q8_r0", QA | NOTHING_TO_DO, ok_qa_r0},
    {"cache_store_all_skipped", CS | NOTHING_TO_DO, ok_cs_all_skipped},
    {"cache_store_group0_scale_rank2", CS, ok_cs_group0_rank2},
    {"cache_store_bf16", CS, ok_cs_bf16},
    {"cache_store_t0", CS | NOTHING_TO_DO, ok_cs_t0},
    {"to_nz", ZN, NULL},
    {"to_nd", ZD, NULL},
    {"to_nz_r0", ZN | NOTHING_TO_DO, ok_nz_r0},
    {"to_nz_strided", ZN, ok_nz_strided},
    {"to_nd_strided", ZD, ok_nz_strided},
};

/* args (a copy of the args of operator op in the fixture orig) with its views moved into r, a copy of orig */
static void *moved(void *args, const char *op, const fixture *orig, fixture *r)
{
    val_rebase_views(op, args, orig, sizeof *orig, r);
    return args;
}

/* The FRACTAL_NZ oracle works on dense tensors: gather the source view, convert, scatter into the view of r. */
static void view_bytes(const dsops_tensor *t, void *dense, int gather)
{
    size_t es = dsops_dtype_size(t->dtype), e = 0;
    int64_t idx[DSOPS_MAX_DIMS] = {0}, n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    for (int64_t k = 0; k < n; k++, e++) {
        int64_t off = 0;
        for (int d = 0; d < t->ndim; d++)
            off += idx[d] * t->stride[d];
        char *p = (char *)t->data + (size_t)off * es;
        if (gather)
            memcpy((char *)dense + e * es, p, es);
        else
            memcpy(p, (char *)dense + e * es, es);
        for (int d = t->ndim - 1; d >= 0 && ++idx[d] == t->shape[d]; d--)
            idx[d] = 0;
    }
}

static void run_nz_oracle(prim_op op, const fixture *orig, fixture *r)
{
    dsops_fractal_nz_args a = orig->nza;
    moved(&a, op == OP_TO_NZ ? "nd_to_fractal_nz" : "fractal_nz_to_nd", orig, r);
    int64_t B = a.nd.shape[0], R = a.nd.shape[1], C = a.nd.shape[2];
    size_t es = dsops_dtype_size(a.nd.dtype);
    void *nd = tu_calloc((size_t)(B * R * C) + 1, es), *nz = tu_calloc(sizeof orig->nz, 1);
    if (op == OP_TO_NZ) {
        view_bytes(&a.nd, nd, 1);
        dsops_ref_nd_to_fractal_nz(nd, B, R, C, es, nz);
        view_bytes(&a.nz, nz, 0);
    } else {
        view_bytes(&a.nz, nz, 1);
        dsops_ref_fractal_nz_to_nd(nz, B, R, C, es, nd);
        view_bytes(&a.nd, nd, 0);
    }
    free(nd);
    free(nz);
}

/* The oracle's run of operator op of the fixture orig on r, a copy of orig. */
static void run_oracle(prim_op op, const fixture *orig, fixture *r)
{
    switch (op) {
    case OP_RMSNORM: {
        dsops_rmsnorm_args a = orig->rms;
        dsops_ref_rmsnorm(moved(&a, "rmsnorm", orig, r));
        break;
    }
    case OP_ROPE_TABLES: {
        dsops_rope_tables_args a = orig->rt;
        dsops_ref_rope_tables(moved(&a, "rope_tables", orig, r));
        break;
    }
    case OP_ROPE_APPLY: {
        dsops_rope_apply_args a = orig->ra;
        dsops_ref_rope_apply(moved(&a, "rope_apply", orig, r));
        break;
    }
    case OP_HADAMARD: {
        dsops_tensor m = orig->h;
        m.data = tu_rebase(m.data, orig, sizeof *orig, r); /* the operator's only argument, not described */
        dsops_ref_hadamard_matrix(&m);
        break;
    }
    case OP_QUANT: {
        dsops_quant_q8_args a = orig->qa;
        dsops_ref_quant_q8(moved(&a, "quant_q8", orig, r));
        break;
    }
    case OP_CACHE_STORE: {
        dsops_cache_store_args a = orig->cs;
        dsops_ref_cache_store(moved(&a, "cache_store", orig, r));
        break;
    }
    case OP_TO_NZ:
    case OP_TO_ND:
        run_nz_oracle(op, orig, r);
        break;
    }
}

/* The fixture before the call and after the oracle's run on a copy. */
typedef struct expected {
    fixture before, ref;
} expected;

static void *oracle(void *problem)
{
    const fixture *f = problem;
    expected *e = tu_alloc(sizeof *e);
    memcpy(&e->before, f, sizeof *f);
    memcpy(&e->ref, f, sizeof *f);
    run_oracle(f->op, f, &e->ref);
    return e;
}

static void compare(void *f, void *expected_result, const val_ok_case *c)
{
    const expected *e = expected_result;
    if (c->variant & NOTHING_TO_DO)
        tu_check_unchanged(c->name, f, &e->before, sizeof(fixture), "although there was nothing to do");
    /* every primitive here is exact against its oracle (rope_tables: fp32 tables from the same fp64
     * values; bf16 tables could differ only at a rounding tie, which these positions do not hit) */
    tu_check(memcmp(&e->ref, f, sizeof(fixture)) == 0, "%s: result differs from the oracle", c->name);
}

static void *make_problem(int variant)
{
    fixture *f = make_fixture();
    f->op = (prim_op)(variant & ~NOTHING_TO_DO);
    return f;
}

/* a rejected call leaves every byte of the fixture as it was */
static const val_ops primitives_ops = {
    .make = make_problem, .free = free, .call = call, .flat_bytes = sizeof(fixture), .oracle = oracle,
    .compare = compare, .free_expected = free,
};

static void test_init(void)
{
    if (!tu_selected("init"))
        return;
    dsops_rmsnorm_args r;
    memset(&r, 0x5a, sizeof r);
    for (int p = DSOPS_PRESET_V32; p <= DSOPS_PRESET_V4_PRO; p++) {
        dsops_status st = dsops_rmsnorm_init(&r, (dsops_preset)p);
        tu_check(st == DSOPS_OK && r.eps == 1e-6f && r.x.data == NULL && r.weight.data == NULL && r.y.data == NULL,
                 "init: rmsnorm preset %d: %s, eps %g", p, dsops_status_name(st), (double)r.eps);
    }
    tu_check(dsops_rmsnorm_init(&r, (dsops_preset)9) == DSOPS_ERR_PARAM, "init: rmsnorm with a bad preset");
    tu_check(dsops_rmsnorm_init(NULL, DSOPS_PRESET_V32) == DSOPS_ERR_NULL, "init: rmsnorm NULL args");
    dsops_rope_tables_args t;
    memset(&t, 0x5a, sizeof t);
    dsops_status st = dsops_rope_tables_init(&t, DSOPS_PRESET_V32);
    tu_check(st == DSOPS_OK && t.base == 10000.0 && t.yarn == 1 && t.yarn_factor == 40.0 &&
                 t.yarn_original_len == 4096.0 && t.yarn_beta_fast == 32.0 && t.yarn_beta_slow == 1.0 &&
                 t.layout == DSOPS_ROPE_HALVES && t.positions.data == NULL,
             "init: rope_tables V32");
    for (int p = DSOPS_PRESET_V4_FLASH; p <= DSOPS_PRESET_V4_PRO; p++) {
        st = dsops_rope_tables_init(&t, (dsops_preset)p);
        tu_check(st == DSOPS_OK && t.base == 160000.0 && t.yarn == 1 && t.yarn_factor == 16.0 &&
                     t.yarn_original_len == 65536.0 && t.yarn_beta_fast == 32.0 && t.yarn_beta_slow == 1.0 &&
                     t.layout == DSOPS_ROPE_PAIRS,
                 "init: rope_tables V4 preset %d", p);
    }
    tu_check(dsops_rope_tables_init(&t, (dsops_preset)-1) == DSOPS_ERR_PARAM, "init: rope_tables with a bad preset");
    tu_check(dsops_hadamard_matrix(NULL, NULL) == DSOPS_ERR_NULL, "hadamard_matrix(NULL)");
    tu_check(dsops_rmsnorm(ctx, NULL) == DSOPS_ERR_NULL && dsops_rope_tables(ctx, NULL) == DSOPS_ERR_NULL &&
                 dsops_rope_apply(ctx, NULL) == DSOPS_ERR_NULL && dsops_quant_q8(ctx, NULL) == DSOPS_ERR_NULL &&
                 dsops_cache_store(ctx, NULL) == DSOPS_ERR_NULL,
             "a NULL args pointer is DSOPS_ERR_NULL");
    /* a NULL context: a temporary one with the environment defaults */
    fixture *f = make_fixture(), *ref = tu_memdup(f, sizeof *f);
    run_oracle(OP_CACHE_STORE, f, ref);
    st = dsops_cache_store(NULL, &f->cs);
    tu_check(st == DSOPS_OK && memcmp(ref, f, sizeof *f) == 0, "cache_store with a NULL context: %s (%s)",
             dsops_status_name(st), dsops_last_error());
    free(ref);
    free(f);
}

/* dsops_tensor_make on a shape whose dense offsets overflow int64: no signed overflow (undefined behaviour) while
 * the strides are made; the outer strides saturate, and an operator refuses the view (V3). */
static void test_make_overflowing_shape(void)
{
    if (!tu_selected("make_overflowing_shape"))
        return;
    uint16_t x[8], y[8]; /* never read: the views are refused */
    const int64_t huge[3] = {4, (int64_t)1 << 62, 64};
    dsops_tensor t = dsops_tensor_make(x, DSOPS_BF16, 3, huge);
    tu_check(t.stride[2] == 1 && t.stride[1] == 64 && t.stride[0] == INT64_MAX,
             "make_overflowing_shape: strides %lld %lld %lld, expected INT64_MAX 64 1", (long long)t.stride[0],
             (long long)t.stride[1], (long long)t.stride[2]);
    const int64_t two[2] = {2, (int64_t)1 << 62}; /* the product of all extents overflows, the strides do not */
    dsops_tensor u = dsops_tensor_make(x, DSOPS_BF16, 2, two);
    tu_check(u.stride[0] == (int64_t)1 << 62 && u.stride[1] == 1, "make_overflowing_shape: rank-2 strides %lld %lld",
             (long long)u.stride[0], (long long)u.stride[1]);
    dsops_rope_apply_args a;
    memset(&a, 0, sizeof a);
    float table[64] = {0};
    const int64_t ts[2] = {4, 64};
    a.x = t;
    a.y = dsops_tensor_make(y, DSOPS_BF16, 3, huge);
    a.rope_cos = dsops_tensor_make(table, DSOPS_FP32, 2, ts);
    a.rope_cos.stride[0] = 0;
    a.rope_sin = a.rope_cos;
    tu_check_rejected("make_overflowing_shape rope_apply", dsops_rope_apply(ctx, &a), DSOPS_ERR_SHAPE, "");
}

/* The order of every validation program (tests/validation.h): init, the bad rows, the ok rows and its own cases. */
int main(int argc, char **argv)
{
    tu_init(argc, argv, 7);
    ctx = tu_context();
    test_init();
    test_make_overflowing_shape();
    val_run_bad(&primitives_ops, ctx, bad_cases, VAL_COUNT(bad_cases));
    val_run_ok(&primitives_ops, ctx, ok_cases, VAL_COUNT(ok_cases));
    dsops_context_destroy(ctx);
    return tu_finish();
}
