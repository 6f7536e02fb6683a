/* compressor argument validation (spec §1.6 V1 - V10, §3.4 "Validation"): a table of bad argument sets,
 * each with its expected status and a message fragment naming the field; a rejected call leaves every byte
 * of the fixture (out, out_count, both states and every input) unchanged. Also: valid calls that look
 * suspicious (a -1 table entry for a position the call does not need, a block shared by two sequences
 * without a shared row, explicit parameters that agree, T = 0, B = 0, row_per_seq) against the oracle, and
 * the docs/CASES.md edge case v4_cmp_edge_two_windows_rowmode (built here from a vendor case: the case table
 * lists only valid calls). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "problems.h"
#include "ref.h"
#include "test_util.h"
#include "validation.h"

static dsops_context *ctx;


/* The fixture: a c4li-like call with D 64 (C 2, R 4, Hadamard), H 32, state block size 4.
 *   sequence 0: start 5, 3 tokens (positions 5, 6, 7): closes window 1, reads positions 0 ... 4 from the
 *               state (logical blocks 0 and 1)
 *   sequence 1: start 0, 4 tokens (positions 0 ... 3): closes window 0 (no previous half)
 * Tables (one extra -1 column): kv {3, 0, -1}, {2, -1, -1}; score {1, 4, -1}, {0, -1, -1}; blocks 1 and 4
 * of the kv state and 2, 3 of the score state are not used. NO 3 (packed: 2 entries, one zero row). */
enum { FH = 32, FD = 64, FC = 2, FCD = FC * FD, FR = 4, FT = 7, FB = 2, FNO = 3, FBS = 4, FNB = 5, FMB = 3 };

typedef struct fixture {
    _Alignas(64) uint16_t x[FT * FH];          /* [T, H] bf16 */
    _Alignas(64) int32_t cu[FB + 1];           /* [B+1] */
    _Alignas(64) int32_t sp[FB];               /* [B] */
    _Alignas(64) uint16_t wkv[FCD * FH];       /* [C D, H] bf16 */
    _Alignas(64) uint16_t wg[FCD * FH];        /* [C D, H] bf16 */
    _Alignas(64) float ape[FR * FCD];          /* [R, C D] fp32 */
    _Alignas(64) uint16_t norm[FD];            /* [D] bf16 */
    _Alignas(64) uint16_t had[FD * FD];        /* [D, D] bf16 */
    _Alignas(64) uint16_t rc[FNO * 64];        /* [NO, 64] bf16 */
    _Alignas(64) uint16_t rs[FNO * 64];        /* [NO, 64] bf16 */
    _Alignas(64) int32_t bt[FB * FMB];         /* [B, MB] kv table */
    _Alignas(64) int32_t bt2[FB * FMB];        /* [B, MB] score table */
    _Alignas(64) uint16_t out[FNO * FD];       /* [NO, D] bf16 */
    _Alignas(64) int32_t cnt[FB];              /* [B] */
    _Alignas(64) float kv[FNB * FBS * FCD];    /* [NB, BS, C D] fp32 */
    _Alignas(64) float sc[FNB * FBS * FCD];    /* [NB, BS, C D] fp32 */
    _Alignas(64) float tail[FNB * FBS * FCD];  /* room for shifted views past the last buffer */
    dsops_compressor_args a;
} fixture;

static void bind(fixture *f)
{
    dsops_compressor_args *a = &f->a;
    memset(a, 0, sizeof *a);
    a->x = dsops_tensor_make(f->x, DSOPS_BF16, 2, (int64_t[]){FT, FH});
    a->cu_seqlens_q = dsops_tensor_make(f->cu, DSOPS_INT32, 1, (int64_t[]){FB + 1});
    a->start_pos = dsops_tensor_make(f->sp, DSOPS_INT32, 1, (int64_t[]){FB});
    a->wkv = dsops_tensor_make(f->wkv, DSOPS_BF16, 2, (int64_t[]){FCD, FH});
    a->wgate = dsops_tensor_make(f->wg, DSOPS_BF16, 2, (int64_t[]){FCD, FH});
    a->ape = dsops_tensor_make(f->ape, DSOPS_FP32, 2, (int64_t[]){FR, FCD});
    a->norm_weight = dsops_tensor_make(f->norm, DSOPS_BF16, 1, (int64_t[]){FD});
    a->hadamard = dsops_tensor_make(f->had, DSOPS_BF16, 2, (int64_t[]){FD, FD});
    a->rope_cos = dsops_tensor_make(f->rc, DSOPS_BF16, 2, (int64_t[]){FNO, 64});
    a->rope_sin = dsops_tensor_make(f->rs, DSOPS_BF16, 2, (int64_t[]){FNO, 64});
    a->kv_state = dsops_tensor_make(f->kv, DSOPS_FP32, 3, (int64_t[]){FNB, FBS, FCD});
    a->score_state = dsops_tensor_make(f->sc, DSOPS_FP32, 3, (int64_t[]){FNB, FBS, FCD});
    a->kv_state_block_table = dsops_tensor_make(f->bt, DSOPS_INT32, 2, (int64_t[]){FB, FMB});
    a->score_state_block_table = dsops_tensor_make(f->bt2, DSOPS_INT32, 2, (int64_t[]){FB, FMB});
    a->out = dsops_tensor_make(f->out, DSOPS_BF16, 2, (int64_t[]){FNO, FD});
    a->out_count = dsops_tensor_make(f->cnt, DSOPS_INT32, 1, (int64_t[]){FB});
    a->dim = 0, a->ratio = 0, a->overlap = -1, a->rotate = -1;
    a->norm_eps = 1e-6f;
    a->rope_mode = DSOPS_ROPE_INTERLEAVED;
    a->rope_inverse = 0;
    a->out_layout = DSOPS_COMPRESSOR_PACKED;
}

static fixture *make_fixture(void)
{
    fixture *f = tu_alloc(sizeof *f); /* 64-byte aligned, as its members */
    tu_rng r;
    tu_rng_seed(&r, tu_seed());
    for (int i = 0; i < FT * FH; i++)
        f->x[i] = tu_bf16(tu_rng_uniform(&r, -2, 2));
    f->cu[0] = 0, f->cu[1] = 3, f->cu[2] = 7;
    f->sp[0] = 5, f->sp[1] = 0;
    for (int i = 0; i < FCD * FH; i++) {
        f->wkv[i] = tu_bf16(tu_rng_uniform(&r, -1, 1) / sqrtf((float)FH));
        f->wg[i] = tu_bf16(tu_rng_uniform(&r, -1, 1) / sqrtf((float)FH));
    }
    for (int i = 0; i < FR * FCD; i++)
        f->ape[i] = tu_rng_uniform(&r, -1, 1);
    for (int i = 0; i < FD; i++)
        f->norm[i] = tu_bf16(tu_rng_uniform(&r, 0.5f, 1.5f));
    for (int i = 0; i < FD * FD; i++)
        f->had[i] = tu_bf16(tu_rng_uniform(&r, -1, 1) / 8.0f);
    for (int i = 0; i < FNO * 64; i++)
        f->rc[i] = tu_bf16(tu_rng_uniform(&r, -1, 1)), f->rs[i] = tu_bf16(tu_rng_uniform(&r, -1, 1));
    const int32_t bt[FB * FMB] = {3, 0, -1, 2, -1, -1}, bt2[FB * FMB] = {1, 4, -1, 0, -1, -1};
    memcpy(f->bt, bt, sizeof bt), memcpy(f->bt2, bt2, sizeof bt2);
    for (int i = 0; i < FNO * FD; i++)
        f->out[i] = CASES_GUARD_BF16;
    f->cnt[0] = f->cnt[1] = -7;
    for (int i = 0; i < FNB * FBS * FCD; i++) {
        f->kv[i] = tu_rng_uniform(&r, -1, 1);
        f->sc[i] = tu_rng_uniform(&r, -2, 2);
        f->tail[i] = -3.0f;
    }
    bind(f);
    return f;
}

/* The one-line mutations, the tables, the ops and main below follow the layout every test_*_validation.c shares
 * (tests/validation.h): what repeats between those programs is that protocol, each row its own field. */
#define FRAG(...) snprintf(frag, VAL_FRAG_MAX, __VA_ARGS__)
#define A (f->a)

/* V2: required tensors */
static void null_x(void *problem, char *frag) { fixture *f = problem; A.x.data = NULL; FRAG("x is NULL"); }
static void null_cu(void *problem, char *frag) { fixture *f = problem; A.cu_seqlens_q.data = NULL; FRAG("cu_seqlens_q is NULL"); }
static void null_sp(void *problem, char *frag) { fixture *f = problem; A.start_pos.data = NULL; FRAG("start_pos is NULL"); }
static void null_wkv(void *problem, char *frag) { fixture *f = problem; A.wkv.data = NULL; FRAG("wkv is NULL"); }
static void null_wgate(void *problem, char *frag) { fixture *f = problem; A.wgate.data = NULL; FRAG("wgate is NULL"); }
static void null_ape(void *problem, char *frag) { fixture *f = problem; A.ape.data = NULL; FRAG("ape is NULL"); }
static void null_norm(void *problem, char *frag) { fixture *f = problem; A.norm_weight.data = NULL; FRAG("norm_weight is NULL"); }
static void null_cos(void *problem, char *frag) { fixture *f = problem; A.rope_cos.data = NULL; FRAG("rope_cos is NULL"); }
static void null_sin(void *problem, char *frag) { fixture *f = problem; A.rope_sin.data = NULL; FRAG("rope_sin is NULL"); }
static void null_kv(void *problem, char *frag) { fixture *f = problem; A.kv_state.data = NULL; FRAG("kv_state is NULL"); }
static void null_sc(void *problem, char *frag) { fixture *f = problem; A.score_state.data = NULL; FRAG("score_state is NULL"); }
static void null_bt(void *problem, char *frag) { fixture *f = problem; A.kv_state_block_table.data = NULL; FRAG("kv_state_block_table is NULL"); }
static void null_bt2(void *problem, char *frag)
{
    fixture *f = problem;
    A.score_state_block_table.data = NULL;
    FRAG("score_state_block_table is NULL");
}
static void null_out(void *problem, char *frag) { fixture *f = problem; A.out.data = NULL; FRAG("out is NULL"); }

/* V3: ranks */
static void rank_x(void *problem, char *frag) { fixture *f = problem; A.x.ndim = 3, A.x.shape[2] = 1; FRAG("x has rank 3"); }
static void rank_cu(void *problem, char *frag) { fixture *f = problem; A.cu_seqlens_q.ndim = 2, A.cu_seqlens_q.shape[1] = 1; FRAG("cu_seqlens_q has rank 2"); }
static void rank_sp(void *problem, char *frag) { fixture *f = problem; A.start_pos.ndim = 0; FRAG("start_pos has rank 0"); }
static void rank_wkv(void *problem, char *frag) { fixture *f = problem; A.wkv.ndim = 1; FRAG("wkv has rank 1"); }
static void rank_wgate(void *problem, char *frag) { fixture *f = problem; A.wgate.ndim = 3, A.wgate.shape[2] = 1; FRAG("wgate has rank 3"); }
static void rank_ape(void *problem, char *frag) { fixture *f = problem; A.ape.ndim = 1; FRAG("ape has rank 1"); }
static void rank_norm(void *problem, char *frag) { fixture *f = problem; A.norm_weight.ndim = 2, A.norm_weight.shape[1] = 1; FRAG("norm_weight has rank 2"); }
static void rank_had(void *problem, char *frag) { fixture *f = problem; A.hadamard.ndim = 1; FRAG("hadamard has rank 1"); }
static void rank_cos(void *problem, char *frag) { fixture *f = problem; A.rope_cos.ndim = 1; FRAG("rope_cos has rank 1"); }
static void rank_sin(void *problem, char *frag) { fixture *f = problem; A.rope_sin.ndim = 3, A.rope_sin.shape[2] = 1; FRAG("rope_sin has rank 3"); }
static void rank_kv(void *problem, char *frag) { fixture *f = problem; A.kv_state.ndim = 2; FRAG("kv_state has rank 2"); }
static void rank_sc(void *problem, char *frag) { fixture *f = problem; A.score_state.ndim = 4, A.score_state.shape[3] = 1; FRAG("score_state has rank 4"); }
static void rank_bt(void *problem, char *frag) { fixture *f = problem; A.kv_state_block_table.ndim = 1; FRAG("kv_state_block_table has rank 1"); }
static void rank_bt2(void *problem, char *frag) { fixture *f = problem; A.score_state_block_table.ndim = 1; FRAG("score_state_block_table has rank 1"); }
static void rank_out(void *problem, char *frag) { fixture *f = problem; A.out.ndim = 1; FRAG("out has rank 1"); }
static void rank_cnt(void *problem, char *frag) { fixture *f = problem; A.out_count.ndim = 2, A.out_count.shape[1] = 1; FRAG("out_count has rank 2"); }

/* V3: extents */
static void ext_x_h(void *problem, char *frag) { fixture *f = problem; A.x.shape[1] = FH - 1; FRAG("x.shape[1]"); }
static void ext_x_inner(void *problem, char *frag) { fixture *f = problem; A.x.shape[1] = FH / 2, A.wkv.shape[1] = A.wgate.shape[1] = FH / 2, A.x.stride[1] = 2; FRAG("x.stride[1]"); }
static void ext_x_overflow(void *problem, char *frag) { fixture *f = problem; A.x.shape[0] = INT64_MAX / 4; FRAG("x"); }
static void ext_wkv_rows(void *problem, char *frag) { fixture *f = problem; A.wkv.shape[0] = FCD - 1; FRAG("wkv.shape[0]"); }
static void ext_wgate_rows(void *problem, char *frag) { fixture *f = problem; A.wgate.shape[0] = FD; FRAG("wgate.shape[0]"); }
static void ext_wgate_cols(void *problem, char *frag) { fixture *f = problem; A.wgate.shape[1] = FH - 2; FRAG("wgate.shape[1]"); }
static void ext_ape_cols(void *problem, char *frag) { fixture *f = problem; A.ape.shape[1] = 3 * FD; FRAG("ape.shape[1]"); }
static void ext_ape_rows0(void *problem, char *frag) { fixture *f = problem; A.ape.shape[0] = 0; FRAG("ape.shape[0]"); }
static void ext_norm_small(void *problem, char *frag) { fixture *f = problem; A.norm_weight.shape[0] = 32, A.ape.shape[1] = 64; FRAG("norm_weight.shape[0]"); }
static void ext_norm_d(void *problem, char *frag) { fixture *f = problem; A.norm_weight.shape[0] = FD + 1; FRAG("D = 65"); } /* C D = 128 */
static void ext_had_rows(void *problem, char *frag) { fixture *f = problem; A.hadamard.shape[0] = FD / 2; FRAG("hadamard.shape[0]"); }
static void ext_had_cols(void *problem, char *frag) { fixture *f = problem; A.hadamard.shape[1] = FD / 2; FRAG("hadamard.shape[1]"); }
static void ext_cos_rows(void *problem, char *frag) { fixture *f = problem; A.rope_cos.shape[0] = FNO - 1; FRAG("rope_cos.shape[0]"); }
static void ext_cos_cols(void *problem, char *frag) { fixture *f = problem; A.rope_cos.shape[1] = 32; FRAG("rope_cos.shape[1]"); }
static void ext_sin_rows(void *problem, char *frag) { fixture *f = problem; A.rope_sin.shape[0] = FNO + 1; FRAG("rope_sin.shape[0]"); }
static void ext_sin_cols(void *problem, char *frag) { fixture *f = problem; A.rope_sin.shape[1] = 128; FRAG("rope_sin.shape[1]"); }
static void ext_kv_w(void *problem, char *frag) { fixture *f = problem; A.kv_state.shape[2] = FD; FRAG("kv_state.shape[2]"); }
static void ext_sc_w(void *problem, char *frag) { fixture *f = problem; A.score_state.shape[2] = FCD + 1; FRAG("score_state.shape[2]"); }
static void ext_kv_bs0(void *problem, char *frag) { fixture *f = problem; A.kv_state.shape[1] = 0; FRAG("kv_state.shape[1]"); }
static void ext_bt_b(void *problem, char *frag) { fixture *f = problem; A.kv_state_block_table.shape[0] = FB + 1; FRAG("kv_state_block_table.shape[0]"); }
static void ext_bt2_b(void *problem, char *frag) { fixture *f = problem; A.score_state_block_table.shape[0] = 1; FRAG("score_state_block_table.shape[0]"); }
static void ext_out_d(void *problem, char *frag) { fixture *f = problem; A.out.shape[1] = FD - 1; FRAG("out.shape[1]"); }
static void ext_cnt_b(void *problem, char *frag) { fixture *f = problem; A.out_count.shape[0] = FB + 1; FRAG("out_count.shape[0]"); }
static void ext_sp_b(void *problem, char *frag) { fixture *f = problem; A.start_pos.shape[0] = FB + 1; FRAG("start_pos.shape[0]"); }
static void ext_cu_0(void *problem, char *frag) { fixture *f = problem; A.cu_seqlens_q.shape[0] = 0, A.start_pos.shape[0] = 0; FRAG("cu_seqlens_q.shape[0]"); }
/* NO too small for the entries */
static void no_packed(void *problem, char *frag)
{
    fixture *f = problem;
    A.out.shape[0] = A.rope_cos.shape[0] = A.rope_sin.shape[0] = 1; /* 2 entries */
    FRAG("out.shape[0]");
}
static void no_rowmode(void *problem, char *frag)
{
    fixture *f = problem;
    A.out_layout = DSOPS_COMPRESSOR_ROW_PER_SEQ;
    A.out.shape[0] = A.rope_cos.shape[0] = A.rope_sin.shape[0] = 1; /* B = 2 */
    FRAG("out.shape[0]");
}
/* row_per_seq and a sequence that closes two windows: sequence 1 takes 8 tokens (positions 0 ... 7) */
static void two_windows_rowmode(void *problem, char *frag)
{
    fixture *f = problem;
    A.out_layout = DSOPS_COMPRESSOR_ROW_PER_SEQ;
    f->cu[0] = 0, f->cu[1] = 0, f->cu[2] = 7; /* sequence 0 empty, sequence 1 positions 0 ... 6 + 1 below */
    f->sp[1] = 1;                             /* positions 1 ... 7: windows 0 and 1 close */
    f->bt[FMB + 1] = 1, f->bt2[FMB + 1] = 2;
    FRAG("row_per_seq");
}

/* V4: dtypes */
static void dt_x(void *problem, char *frag) { fixture *f = problem; A.x.dtype = DSOPS_FP16; FRAG("x has dtype fp16"); }
static void dt_cu(void *problem, char *frag) { fixture *f = problem; A.cu_seqlens_q.dtype = DSOPS_INT64; FRAG("cu_seqlens_q has dtype int64"); }
static void dt_sp(void *problem, char *frag) { fixture *f = problem; A.start_pos.dtype = DSOPS_FP32; FRAG("start_pos has dtype fp32"); }
static void dt_wkv(void *problem, char *frag) { fixture *f = problem; A.wkv.dtype = DSOPS_FP16; FRAG("wkv has dtype fp16"); }
static void dt_wgate(void *problem, char *frag) { fixture *f = problem; A.wgate.dtype = DSOPS_INT8; FRAG("wgate has dtype int8"); }
static void dt_ape(void *problem, char *frag) { fixture *f = problem; A.ape.dtype = DSOPS_BF16; FRAG("ape has dtype bf16"); }
static void dt_norm(void *problem, char *frag) { fixture *f = problem; A.norm_weight.dtype = DSOPS_FP16; FRAG("norm_weight has dtype fp16"); }
static void dt_had(void *problem, char *frag) { fixture *f = problem; A.hadamard.dtype = DSOPS_FP16; FRAG("hadamard has dtype fp16"); }
static void dt_cos(void *problem, char *frag) { fixture *f = problem; A.rope_cos.dtype = DSOPS_FP16; FRAG("rope_cos has dtype fp16"); }
static void dt_sin(void *problem, char *frag) { fixture *f = problem; A.rope_sin.dtype = DSOPS_INT32; FRAG("rope_sin has dtype int32"); }
static void dt_kv(void *problem, char *frag) { fixture *f = problem; A.kv_state.dtype = DSOPS_BF16; FRAG("kv_state has dtype bf16"); }
static void dt_sc(void *problem, char *frag) { fixture *f = problem; A.score_state.dtype = DSOPS_FP16; FRAG("score_state has dtype fp16"); }
static void dt_bt(void *problem, char *frag) { fixture *f = problem; A.kv_state_block_table.dtype = DSOPS_INT64; FRAG("kv_state_block_table has dtype int64"); }
static void dt_bt2(void *problem, char *frag) { fixture *f = problem; A.score_state_block_table.dtype = DSOPS_FP32; FRAG("score_state_block_table has dtype fp32"); }
static void dt_out(void *problem, char *frag) { fixture *f = problem; A.out.dtype = DSOPS_FP32; FRAG("out has dtype fp32"); }
static void dt_cnt(void *problem, char *frag) { fixture *f = problem; A.out_count.dtype = DSOPS_INT64; FRAG("out_count has dtype int64"); }
static void dt_invalid(void *problem, char *frag) { fixture *f = problem; A.x.dtype = (dsops_dtype)99; FRAG("x has dtype"); }

/* V5 and the explicit parameters */
static void p_dim(void *problem, char *frag) { fixture *f = problem; A.dim = FD * 2; FRAG("dim (D) = 128"); }
static void p_ratio(void *problem, char *frag) { fixture *f = problem; A.ratio = 128; FRAG("ratio = 128"); }
static void p_overlap0(void *problem, char *frag) { fixture *f = problem; A.overlap = 0; FRAG("overlap = 0"); }
static void p_overlap2(void *problem, char *frag) { fixture *f = problem; A.overlap = 2; FRAG("overlap = 2"); }
static void p_rotate0(void *problem, char *frag) { fixture *f = problem; A.rotate = 0; FRAG("rotate = 0"); }
static void p_rotate1(void *problem, char *frag) { fixture *f = problem; A.hadamard.data = NULL; A.rotate = 1; FRAG("rotate = 1"); }
static void p_eps_nan(void *problem, char *frag) { fixture *f = problem; A.norm_eps = NAN; FRAG("norm_eps"); }
static void p_eps_inf(void *problem, char *frag) { fixture *f = problem; A.norm_eps = INFINITY; FRAG("norm_eps"); }
static void p_eps_neg(void *problem, char *frag) { fixture *f = problem; A.norm_eps = -1e-6f; FRAG("norm_eps"); }
static void p_mode(void *problem, char *frag) { fixture *f = problem; A.rope_mode = (dsops_rope_mode)7; FRAG("rope_mode"); }
static void p_layout(void *problem, char *frag) { fixture *f = problem; A.out_layout = (dsops_compressor_layout)5; FRAG("out_layout"); }

/* V6: sequence descriptors */
static void i_cu0(void *problem, char *frag) { fixture *f = problem; f->cu[0] = 1; FRAG("cu_seqlens_q[0]"); }
static void i_cu_dec(void *problem, char *frag) { fixture *f = problem; f->cu[1] = 8; FRAG("cu_seqlens_q[2]"); }
static void i_cu_t(void *problem, char *frag) { fixture *f = problem; f->cu[2] = 6; FRAG("cu_seqlens_q[2]"); }
static void i_sp_neg(void *problem, char *frag) { fixture *f = problem; f->sp[1] = -1; FRAG("start_pos[1]"); }
static void i_sp_max(void *problem, char *frag) { fixture *f = problem; f->sp[1] = 2147483647 - 3; FRAG("start_pos[1]"); } /* + 4 tokens */

/* V7: block tables (needed positions: written, and pre-call candidates of closing windows) */
static void i_bt_range(void *problem, char *frag) { fixture *f = problem; f->bt[1] = FNB; FRAG("kv_state_block_table[0][1]"); }
static void i_bt_written(void *problem, char *frag) { fixture *f = problem; f->bt[FMB] = -1; FRAG("kv_state_block_table[1][0]"); }
static void i_bt_candidate(void *problem, char *frag) { fixture *f = problem; f->bt[0] = -1; FRAG("kv_state_block_table[0][0]"); } /* positions 0 ... 3 */
static void i_bt2_candidate(void *problem, char *frag) { fixture *f = problem; f->bt2[0] = 99; FRAG("score_state_block_table[0][0]"); }
static void i_bt2_range(void *problem, char *frag) { fixture *f = problem; f->bt2[FMB] = FNB; FRAG("score_state_block_table[1][0]"); }
static void i_bt_columns(void *problem, char *frag) { fixture *f = problem; A.kv_state_block_table.shape[1] = 1; FRAG("kv_state_block_table"); }
static void i_bt2_columns(void *problem, char *frag) { fixture *f = problem; A.score_state_block_table.shape[1] = 1; FRAG("score_state_block_table"); }
/* two sequences write one physical row: sequence 1's block is sequence 0's written block (rows 1 ... 3) */
static void i_shared_kv(void *problem, char *frag) { fixture *f = problem; f->bt[FMB] = f->bt[1]; FRAG("kv_state_block_table"); }
static void i_shared_sc(void *problem, char *frag) { fixture *f = problem; f->bt2[FMB] = f->bt2[1]; FRAG("score_state_block_table"); }

/* V9: aliasing */
static void al_out_x(void *problem, char *frag) { fixture *f = problem; A.out.data = f->x; FRAG("out overlaps x"); }
static void al_out_kv(void *problem, char *frag) { fixture *f = problem; A.out.data = f->kv + 16; FRAG("kv_state"); }
static void al_out_sc(void *problem, char *frag) { fixture *f = problem; A.out.data = f->sc; FRAG("score_state"); }
static void al_kv_sc(void *problem, char *frag) { fixture *f = problem; A.score_state.data = f->kv + FBS * FCD; FRAG("score_state"); }
/* the views below reach over several inputs: the message names the output */
static void al_sc_ape(void *problem, char *frag) { fixture *f = problem; A.score_state.data = f->ape + 8; FRAG("score_state"); }
static void al_kv_wkv(void *problem, char *frag) { fixture *f = problem; A.kv_state.data = f->wkv; FRAG("kv_state"); }
static void al_cnt_sp(void *problem, char *frag) { fixture *f = problem; A.out_count.data = f->sp; FRAG("out_count"); }
static void al_cnt_out(void *problem, char *frag) { fixture *f = problem; A.out_count.data = f->out + 2; FRAG("out_count"); }
static void al_out_bt(void *problem, char *frag) { fixture *f = problem; A.out.data = f->bt; FRAG("out"); }
static void al_kv_cos(void *problem, char *frag) { fixture *f = problem; A.kv_state.data = f->rc; FRAG("kv_state"); }

/* one fixture: every row has variant 0 */
static const val_bad_case bad_cases[] = {
    {"null_x", 0, DSOPS_ERR_NULL, null_x},
    {"null_cu_seqlens_q", 0, DSOPS_ERR_NULL, null_cu},
    {"null_start_pos", 0, DSOPS_ERR_NULL, null_sp},
    {"null_wkv", 0, DSOPS_ERR_NULL, null_wkv},
    {"null_wgate", 0, DSOPS_ERR_NULL, null_wgate},
    {"null_ape", 0, DSOPS_ERR_NULL, null_ape},
    {"null_norm_weight", 0, DSOPS_ERR_NULL, null_norm},
    {"null_rope_cos", 0, DSOPS_ERR_NULL, null_cos},
    {"null_rope_sin", 0, DSOPS_ERR_NULL, null_sin},
    {"null_kv_state", 0, DSOPS_ERR_NULL, null_kv},
    {"null_score_state", 0, DSOPS_ERR_NULL, null_sc},
    {"null_kv_state_block_table", 0, DSOPS_ERR_NULL, null_bt},
    {"null_score_state_block_table", 0, DSOPS_ERR_NULL, null_bt2},
    {"null_out", 0, DSOPS_ERR_NULL, null_out},
    {"rank_x", 0, DSOPS_ERR_SHAPE, rank_x},
    {"rank_cu_seqlens_q", 0, DSOPS_ERR_SHAPE, rank_cu},
    {"rank_start_pos", 0, DSOPS_ERR_SHAPE, rank_sp},
    {"rank_wkv", 0, DSOPS_ERR_SHAPE, rank_wkv},
    {"rank_wgate", 0, DSOPS_ERR_SHAPE, rank_wgate},
    {"rank_ape", 0, DSOPS_ERR_SHAPE, rank_ape},
    {"rank_norm_weight", 0, DSOPS_ERR_SHAPE, rank_norm},
    {"rank_hadamard", 0, DSOPS_ERR_SHAPE, rank_had},
    {"rank_rope_cos", 0, DSOPS_ERR_SHAPE, rank_cos},
    {"rank_rope_sin", 0, DSOPS_ERR_SHAPE, rank_sin},
    {"rank_kv_state", 0, DSOPS_ERR_SHAPE, rank_kv},
    {"rank_score_state", 0, DSOPS_ERR_SHAPE, rank_sc},
    {"rank_kv_state_block_table", 0, DSOPS_ERR_SHAPE, rank_bt},
    {"rank_score_state_block_table", 0, DSOPS_ERR_SHAPE, rank_bt2},
    {"rank_out", 0, DSOPS_ERR_SHAPE, rank_out},
    {"rank_out_count", 0, DSOPS_ERR_SHAPE, rank_cnt},
    {"extent_x_h", 0, DSOPS_ERR_SHAPE, ext_x_h},
    {"extent_x_inner_stride", 0, DSOPS_ERR_SHAPE, ext_x_inner},
    {"extent_x_overflow", 0, DSOPS_ERR_SHAPE, ext_x_overflow},
    {"extent_wkv_rows", 0, DSOPS_ERR_SHAPE, ext_wkv_rows},
    {"extent_wgate_rows", 0, DSOPS_ERR_SHAPE, ext_wgate_rows},
    {"extent_wgate_cols", 0, DSOPS_ERR_SHAPE, ext_wgate_cols},
    {"extent_ape_cols_3d", 0, DSOPS_ERR_SHAPE, ext_ape_cols},
    {"extent_ape_rows_0", 0, DSOPS_ERR_SHAPE, ext_ape_rows0},
    {"extent_norm_weight_below_64", 0, DSOPS_ERR_SHAPE, ext_norm_small},
    {"extent_norm_weight_d", 0, DSOPS_ERR_SHAPE, ext_norm_d},
    {"extent_hadamard_rows", 0, DSOPS_ERR_SHAPE, ext_had_rows},
    {"extent_hadamard_cols", 0, DSOPS_ERR_SHAPE, ext_had_cols},
    {"extent_rope_cos_rows", 0, DSOPS_ERR_SHAPE, ext_cos_rows},
    {"extent_rope_cos_cols", 0, DSOPS_ERR_SHAPE, ext_cos_cols},
    {"extent_rope_sin_rows", 0, DSOPS_ERR_SHAPE, ext_sin_rows},
    {"extent_rope_sin_cols", 0, DSOPS_ERR_SHAPE, ext_sin_cols},
    {"extent_kv_state_width", 0, DSOPS_ERR_SHAPE, ext_kv_w},
    {"extent_score_state_width", 0, DSOPS_ERR_SHAPE, ext_sc_w},
    {"extent_kv_state_block_size_0", 0, DSOPS_ERR_SHAPE, ext_kv_bs0},
    {"extent_kv_state_block_table_b", 0, DSOPS_ERR_SHAPE, ext_bt_b},
    {"extent_score_state_block_table_b", 0, DSOPS_ERR_SHAPE, ext_bt2_b},
    {"extent_out_d", 0, DSOPS_ERR_SHAPE, ext_out_d},
    {"extent_out_count_b", 0, DSOPS_ERR_SHAPE, ext_cnt_b},
    {"extent_start_pos_b", 0, DSOPS_ERR_SHAPE, ext_sp_b},
    {"extent_cu_seqlens_q_0", 0, DSOPS_ERR_SHAPE, ext_cu_0},
    {"no_too_small_packed", 0, DSOPS_ERR_SHAPE, no_packed},
    {"no_too_small_row_per_seq", 0, DSOPS_ERR_SHAPE, no_rowmode},
    {"row_per_seq_two_windows", 0, DSOPS_ERR_SHAPE, two_windows_rowmode},
    {"dtype_x", 0, DSOPS_ERR_DTYPE, dt_x},
    {"dtype_cu_seqlens_q", 0, DSOPS_ERR_DTYPE, dt_cu},
    {"dtype_start_pos", 0, DSOPS_ERR_DTYPE, dt_sp},
    {"dtype_wkv", 0, DSOPS_ERR_DTYPE, dt_wkv},
    {"dtype_wgate", 0, DSOPS_ERR_DTYPE, dt_wgate},
    {"dtype_ape", 0, DSOPS_ERR_DTYPE, dt_ape},
    {"dtype_norm_weight", 0, DSOPS_ERR_DTYPE, dt_norm},
    {"dtype_hadamard", 0, DSOPS_ERR_DTYPE, dt_had},
    {"dtype_rope_cos", 0, DSOPS_ERR_DTYPE, dt_cos},
    {"dtype_rope_sin", 0, DSOPS_ERR_DTYPE, dt_sin},
    {"dtype_kv_state", 0, DSOPS_ERR_DTYPE, dt_kv},
    {"dtype_score_state", 0, DSOPS_ERR_DTYPE, dt_sc},
    {"dtype_kv_state_block_table", 0, DSOPS_ERR_DTYPE, dt_bt},
    {"dtype_score_state_block_table", 0, DSOPS_ERR_DTYPE, dt_bt2},
    {"dtype_out", 0, DSOPS_ERR_DTYPE, dt_out},
    {"dtype_out_count", 0, DSOPS_ERR_DTYPE, dt_cnt},
    {"dtype_invalid_value", 0, DSOPS_ERR_DTYPE, dt_invalid},
    {"param_dim", 0, DSOPS_ERR_PARAM, p_dim},
    {"param_ratio", 0, DSOPS_ERR_PARAM, p_ratio},
    {"param_overlap_0", 0, DSOPS_ERR_PARAM, p_overlap0},
    {"param_overlap_2", 0, DSOPS_ERR_PARAM, p_overlap2},
    {"param_rotate_0_with_hadamard", 0, DSOPS_ERR_PARAM, p_rotate0},
    {"param_rotate_1_without_hadamard", 0, DSOPS_ERR_PARAM, p_rotate1},
    {"param_norm_eps_nan", 0, DSOPS_ERR_PARAM, p_eps_nan},
    {"param_norm_eps_inf", 0, DSOPS_ERR_PARAM, p_eps_inf},
    {"param_norm_eps_negative", 0, DSOPS_ERR_PARAM, p_eps_neg},
    {"param_rope_mode", 0, DSOPS_ERR_PARAM, p_mode},
    {"param_out_layout", 0, DSOPS_ERR_PARAM, p_layout},
    {"index_cu_seqlens_q_first", 0, DSOPS_ERR_INDEX, i_cu0},
    {"index_cu_seqlens_q_decreasing", 0, DSOPS_ERR_INDEX, i_cu_dec},
    {"index_cu_seqlens_q_last", 0, DSOPS_ERR_INDEX, i_cu_t},
    {"index_start_pos_negative", 0, DSOPS_ERR_INDEX, i_sp_neg},
    {"index_start_pos_past_int32", 0, DSOPS_ERR_INDEX, i_sp_max},
    {"index_kv_table_out_of_range", 0, DSOPS_ERR_INDEX, i_bt_range},
    {"index_kv_table_written_minus1", 0, DSOPS_ERR_INDEX, i_bt_written},
    {"index_kv_table_candidate_minus1", 0, DSOPS_ERR_INDEX, i_bt_candidate},
    {"index_score_table_candidate_out_of_range", 0, DSOPS_ERR_INDEX, i_bt2_candidate},
    {"index_score_table_out_of_range", 0, DSOPS_ERR_INDEX, i_bt2_range},
    {"index_kv_table_too_few_columns", 0, DSOPS_ERR_INDEX, i_bt_columns},
    {"index_score_table_too_few_columns", 0, DSOPS_ERR_INDEX, i_bt2_columns},
    {"index_kv_row_shared_by_sequences", 0, DSOPS_ERR_INDEX, i_shared_kv},
    {"index_score_row_shared_by_sequences", 0, DSOPS_ERR_INDEX, i_shared_sc},
    {"alias_out_x", 0, DSOPS_ERR_ALIAS, al_out_x},
    {"alias_out_kv_state", 0, DSOPS_ERR_ALIAS, al_out_kv},
    {"alias_out_score_state", 0, DSOPS_ERR_ALIAS, al_out_sc},
    {"alias_kv_state_score_state", 0, DSOPS_ERR_ALIAS, al_kv_sc},
    {"alias_score_state_ape", 0, DSOPS_ERR_ALIAS, al_sc_ape},
    {"alias_kv_state_wkv", 0, DSOPS_ERR_ALIAS, al_kv_wkv},
    {"alias_out_count_start_pos", 0, DSOPS_ERR_ALIAS, al_cnt_sp},
    {"alias_out_count_out", 0, DSOPS_ERR_ALIAS, al_cnt_out},
    {"alias_out_kv_table", 0, DSOPS_ERR_ALIAS, al_out_bt},
    {"alias_kv_state_rope_cos", 0, DSOPS_ERR_ALIAS, al_kv_cos},
};

/* ---- valid calls on the fixture (against the oracle) ----------------------------------------------- */

/* The oracle's run on a copy g of the fixture f (views moved into g). The flat fixtures of sas and compressor
 * take the same steps, each with its own operator and output that the oracle always reports. */
static void *oracle(void *problem)
{
    const fixture *f = problem;
    fixture *g = tu_memdup(f, sizeof *f);
    val_rebase_views("compressor", &g->a, f, sizeof *f, g);
    if (!g->a.out_count.data) /* the oracle always reports the counts */
        g->a.out_count = dsops_tensor_make(g->cnt, DSOPS_INT32, 1, (int64_t[]){f->a.start_pos.shape[0]});
    dsops_ref_compressor(&g->a);
    return g;
}

/* The library's result on f against the oracle's on g: entries within the spec tolerance (over all rows:
 * some are zero rows), out_count exact, states within their tolerance, nothing past the states written. */
static void compare(void *problem, void *expected, const val_ok_case *c)
{
    const fixture *f = problem, *g = expected;
    const int64_t NO = f->a.out.shape[0], B = f->a.start_pos.shape[0];
    float o[FNO * FD], r[FNO * FD];
    for (int64_t i = 0; i < NO * FD; i++)
        o[i] = tu_f32(((uint16_t *)f->a.out.data)[i]), r[i] = tu_f32(((uint16_t *)g->a.out.data)[i]);
    char l2[200];
    snprintf(l2, sizeof l2, "%s out", c->name);
    tu_compare_close(l2, o, r, (size_t)(NO * FD), (tu_tol){1e-4, 1.0 / 128, 0.005}, NULL);
    if (f->a.out_count.data)
        tu_check(memcmp(f->a.out_count.data, g->a.out_count.data, (size_t)B * 4) == 0, "%s: out_count differs", c->name);
    else
        tu_check(f->cnt[0] == -7 && f->cnt[1] == -7, "%s: out_count absent, yet written", c->name);
    snprintf(l2, sizeof l2, "%s kv_state", c->name);
    tu_compare_close(l2, f->kv, g->kv, FNB * FBS * FCD, (tu_tol){1e-3, 1e-3, 0}, NULL);
    snprintf(l2, sizeof l2, "%s score_state", c->name);
    tu_compare_close(l2, f->sc, g->sc, FNB * FBS * FCD, (tu_tol){1e-3, 1e-3, 0}, NULL);
    tu_check(memcmp(f->tail, g->tail, sizeof f->tail) == 0, "%s: memory past the states written", c->name);
}

static void *make_problem(int variant)
{
    (void)variant;
    return make_fixture();
}
static dsops_status call(dsops_context *c, void *f) { return dsops_compressor(c, &((fixture *)f)->a); }

/* a rejected call leaves every byte of the fixture as it was */
static const val_ops compressor_ops = {
    .make = make_problem, .free = free, .call = call, .flat_bytes = sizeof(fixture), .oracle = oracle,
    .compare = compare, .free_expected = free,
};

/* -1 (and garbage) in table entries of positions the call does not need: sequence 0 closes no window
 * (positions 5, 6), so its logical block 0 is not read */
static void v_unneeded_minus1(void *problem)
{
    fixture *f = problem;
    f->cu[1] = 2, f->a.x.shape[0] = 6, f->cu[2] = 6;
    f->bt[0] = -1, f->bt2[0] = 1000, f->bt[2] = 77;
}
/* sequence 1 (1 token, position 0) writes row 0 of the block sequence 0 reads its positions 0 ... 3 from;
 * no row is written twice */
static void v_shared_block(void *problem)
{
    fixture *f = problem;
    f->cu[2] = 4, f->a.x.shape[0] = 4;
    f->bt[FMB] = f->bt[0], f->bt2[FMB] = f->bt2[0];
}
static void v_explicit(void *problem) { fixture *f = problem; f->a.dim = FD, f->a.ratio = FR, f->a.overlap = 1, f->a.rotate = 1; }
static void v_no_count(void *problem) { fixture *f = problem; f->a.out_count.data = NULL; }
static void v_rowmode(void *problem) { fixture *f = problem; f->a.out_layout = DSOPS_COMPRESSOR_ROW_PER_SEQ; }
static void v_eps0(void *problem) { fixture *f = problem; f->a.norm_eps = 0.0f; }
/* norm vectors take any stride (spec §1.3): norm_weight broadcast from its first element (once read as a row) */
static void v_norm_stride0(void *problem) { fixture *f = problem; f->a.norm_weight.stride[0] = 0; }
/* every other element of the Hadamard buffer's first 2 D values (a padded vector) */
static void v_norm_stride2(void *problem)
{
    fixture *f = problem;
    for (int i = 0; i < FD; i++)
        f->had[2 * i] = f->norm[i], f->had[2 * i + 1] = 0x7fc0; /* NaN between the values */
    f->a.norm_weight.data = f->had;
    f->a.norm_weight.stride[0] = 2;
    f->a.hadamard.data = NULL, f->a.rotate = 0;
}
/* T = 0: both sequences empty; every out row becomes +0, out_count 0, states unchanged */
static void v_t0(void *problem)
{
    fixture *f = problem;
    f->cu[1] = f->cu[2] = 0;
    f->a.x.shape[0] = 0;
}
/* B = 0: cu_seqlens_q [1] = {0}, start_pos, tables and out_count with 0 rows */
static void v_b0(void *problem)
{
    fixture *f = problem;
    f->cu[0] = 0;
    f->a.x.shape[0] = 0;
    f->a.cu_seqlens_q.shape[0] = 1;
    f->a.start_pos.shape[0] = 0;
    f->a.kv_state_block_table.shape[0] = f->a.score_state_block_table.shape[0] = 0;
    f->a.out_count.shape[0] = 0;
}

static const val_ok_case ok_cases[] = {
    {"valid fixture as built", 0, NULL},
    {"valid unneeded table entries -1", 0, v_unneeded_minus1},
    {"valid block shared without a shared row", 0, v_shared_block},
    {"valid explicit dim ratio overlap rotate", 0, v_explicit},
    {"valid out_count absent", 0, v_no_count},
    {"valid row_per_seq", 0, v_rowmode},
    {"valid norm_eps 0", 0, v_eps0},
    {"valid norm_weight stride 0", 0, v_norm_stride0},
    {"valid norm_weight stride 2", 0, v_norm_stride2},
    {"valid T 0", 0, v_t0},
    {"valid B 0", 0, v_b0},
};

/* T = 0 and B = 0 in detail: every out row +0, states bitwise unchanged */
static void test_valid_empty(void)
{
    if (!tu_selected("valid empty"))
        return;
    for (int k = 0; k < 2; k++) {
        fixture *f = make_fixture();
        (k ? v_b0 : v_t0)(f);
        float kv[FNB * FBS * FCD], sc[FNB * FBS * FCD];
        memcpy(kv, f->kv, sizeof kv), memcpy(sc, f->sc, sizeof sc);
        dsops_status st = dsops_compressor(ctx, &f->a);
        int zero = 1;
        for (int i = 0; i < FNO * FD; i++)
            zero &= f->out[i] == 0;
        tu_check(st == DSOPS_OK && zero && memcmp(kv, f->kv, sizeof kv) == 0 && memcmp(sc, f->sc, sizeof sc) == 0 &&
                     (k || (f->cnt[0] == 0 && f->cnt[1] == 0)),
                 "valid empty %s: status %s, out rows zero %d, states and counts as expected?", k ? "B 0" : "T 0",
                 dsops_status_name(st), zero);
        free(f);
    }
}

/* docs/CASES.md v4_cmp_edge_two_windows_rowmode: row_per_seq with S 8, R 4 -> DSOPS_ERR_SHAPE, nothing written */
static void test_edge_case(void)
{
    const char *name = "v4_cmp_edge_two_windows_rowmode";
    if (!tu_selected(name))
        return;
    /* the vendor's data and layout (row_per_seq, NO = min(B S, B S / R + B) = 6) with B 2, S 8, start 0; not
     * in the case table, which lists only calls that succeed */
    const dsops_cmp_case *vc = dsops_cmp_case_find("v4_cmp_c4a_b64_s2_sp2");
    if (!tu_check(vc != NULL, "%s: v4_cmp_c4a_b64_s2_sp2 is not in the case table", name))
        return;
    dsops_cmp_case c = *vc;
    c.name = name;
    c.B = 2, c.S_each[0] = 8, c.start_pos = 0;
    dsops_cmp_problem *p = dsops_cmp_problem_make(&c, tu_seed());
    if (!tu_check(p != NULL, "%s: problem generation failed", name))
        return;
    dsops_compressor_args *a = &p->args;
    const size_t nout = (size_t)(a->out.shape[0] * a->out.shape[1]) * 2, ncnt = (size_t)a->out_count.shape[0] * 4;
    const size_t nkv = (size_t)(a->kv_state.shape[0] * a->kv_state.shape[1] * a->kv_state.shape[2]) * 4;
    const size_t nsc = (size_t)(a->score_state.shape[0] * a->score_state.shape[1] * a->score_state.shape[2]) * 4;
    memset(a->out.data, 0xa5, nout), memset(a->out_count.data, 0xa5, ncnt);
    void *o = malloc(nout), *n = malloc(ncnt), *kv = malloc(nkv), *sc = malloc(nsc);
    if (!o || !n || !kv || !sc)
        abort();
    memcpy(o, a->out.data, nout), memcpy(n, a->out_count.data, ncnt);
    memcpy(kv, a->kv_state.data, nkv), memcpy(sc, a->score_state.data, nsc);
    dsops_status st = dsops_compressor(ctx, a);
    const char *msg = dsops_last_error();
    tu_check(st == DSOPS_ERR_SHAPE && strstr(msg, "row_per_seq") != NULL, "%s: %s (%s), expected DSOPS_ERR_SHAPE",
             name, dsops_status_name(st), msg);
    tu_check(memcmp(o, a->out.data, nout) == 0 && memcmp(n, a->out_count.data, ncnt) == 0 &&
                 memcmp(kv, a->kv_state.data, nkv) == 0 && memcmp(sc, a->score_state.data, nsc) == 0,
             "%s: out, out_count or a state written although the call failed", name);
    /* the same problem packed is valid: 2 entries per sequence need NO >= 4 (it has 6) */
    a->out_layout = DSOPS_COMPRESSOR_PACKED;
    st = dsops_compressor(ctx, a);
    tu_check(st == DSOPS_OK, "%s packed: %s (%s)", name, dsops_status_name(st), dsops_last_error());
    free(o), free(n), free(kv), free(sc);
    dsops_cmp_problem_free(p);
}

/* The same init checks as the other validation programs, with the compressor's own preset defaults. */
static void test_init_and_null(void)
{
    if (!tu_selected("init"))
        return;
    dsops_compressor_args a;
    for (int p = DSOPS_PRESET_V4_FLASH; p <= DSOPS_PRESET_V4_PRO; p++) {
        memset(&a, 0x5a, sizeof a);
        dsops_status st = dsops_compressor_init(&a, (dsops_preset)p);
        tu_check(st == DSOPS_OK && a.norm_eps == 1e-6f && a.rope_mode == DSOPS_ROPE_INTERLEAVED && a.rope_inverse == 0 &&
                     a.out_layout == DSOPS_COMPRESSOR_PACKED && a.dim == 0 && a.ratio == 0 && a.overlap == -1 &&
                     a.rotate == -1 && a.x.data == NULL && a.hadamard.data == NULL && a.prepared == NULL,
                 "init: compressor preset %d: %s", p, dsops_status_name(st));
    }
    tu_check(dsops_compressor_init(&a, DSOPS_PRESET_V32) == DSOPS_ERR_PARAM, "init: compressor with preset v32 accepted");
    tu_check(dsops_compressor_init(NULL, DSOPS_PRESET_V4_FLASH) == DSOPS_ERR_NULL, "init: NULL args accepted");
    tu_check(dsops_compressor(ctx, NULL) == DSOPS_ERR_NULL, "a NULL args pointer is not DSOPS_ERR_NULL");
}

/* The order of every validation program: init, the bad rows, the ok rows, then its own cases. */
int main(int argc, char **argv)
{
    tu_init(argc, argv, 7);
    ctx = tu_context();
    test_init_and_null();
    val_run_bad(&compressor_ops, ctx, bad_cases, VAL_COUNT(bad_cases));
    val_run_ok(&compressor_ops, ctx, ok_cases, VAL_COUNT(ok_cases));
    test_valid_empty();
    test_edge_case();
    dsops_context_destroy(ctx);
    return tu_finish();
}
