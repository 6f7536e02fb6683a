/* sas argument validation (spec §1.6 V1 - V10, §3.7 "Validation"): a table of bad argument sets, each with
 * its expected status and a message fragment naming the field; a rejected call leaves every byte of the
 * fixture (out, lse and every input) unchanged. Also valid calls that look suspicious (-1 and junk in
 * block-table entries nobody needs, an index that is valid but not causal for its token, junk indices past
 * the count, absent optional tensors, absent pools the mode does not use, p_tile 0 outside tiled mode,
 * T 0, B 0) against the oracle; sparse-only tensors with wrong extents in dense / none mode (ignored or
 * rejected, never read past their extents); the docs/CASES.md edge v4_sas_edge_bad_table; dsops_sas_init. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "problems.h" /* the guard patterns and unread-row NaN of the adversarial sas problems */
#include "ref.h"
#include "test_util.h"
#include "validation.h"

static dsops_context *ctx;

/* The fixture: scfa-like with a window, D 64, N 2, win_size 4, cmp_ratio 2, K 3, BSW 4, BSC 2.
 *   sequence 0: S 2, seqused 10: token 0 (L 9) window 5 ... 8, n_cmp 4; token 1 (L 10) window 6 ... 9,
 *               n_cmp 5; NC = 5
 *   sequence 1: S 1, seqused 5:  token 2 (L 5) window 1 ... 4, n_cmp 2; NC = 2
 * cmp_indices / cmp_topk_length (used entries marked *):
 *   token 0: {4*, -1, 1*} len 3   (4 is valid, < NC = 5, though not causal for token 0: n_cmp(9) = 4)
 *   token 1: {0*, 9, 3}   len 2   (9 >= NC skipped; 3 lies past the count)
 *   token 2: {1*, 1*, 7}  len 3   (count min(3, n_cmp 2) = 2: the duplicate is used twice, 7 never looked at)
 * Needed window blocks (BSW 4): seq 0 columns 1, 2; seq 1 columns 0, 1. Needed compressed blocks (BSC 2):
 * seq 0 entries {0, 1, 4}: columns 0, 2 (column 1, entries 2 and 3, is not needed); seq 1 entry 1: column 0.
 * Tables (-1 where nothing is needed): ori {-1, 2, 0}, {3, 1, -1}; cmp {1, -1, 3}, {2, -1, -1}.
 * NBW 5 (block 4 unused), NBC 4 (block 0 unused). */
enum { FN = 2, FD = 64, FT = 3, FB = 2, FK = 3, FBSW = 4, FNBW = 5, FMBW = 3, FBSC = 2, FNBC = 4, FMBC = 3 };

typedef struct fixture {
    _Alignas(64) uint16_t q[FT * FN * FD];         /* [T, N, D] bf16 */
    _Alignas(64) int32_t cu[FB + 1];               /* [B+1] */
    _Alignas(64) int32_t used[FB];                 /* [B] */
    _Alignas(64) uint16_t ori[FNBW * FBSW * FD];   /* [NBW, BSW, D] bf16 */
    _Alignas(64) int32_t ori_bt[FB * FMBW];        /* [B, MBW] */
    _Alignas(64) uint16_t cmp[FNBC * FBSC * FD];   /* [NBC, BSC, D] bf16 */
    _Alignas(64) int32_t cmp_bt[FB * FMBC];        /* [B, MBC] */
    _Alignas(64) int32_t idx[FT * FK];             /* [T, K] */
    _Alignas(64) int32_t len[FT];                  /* [T] */
    _Alignas(64) float sinks[FN];                  /* [N] */
    _Alignas(64) uint16_t out[FT * FN * FD];       /* [T, N, D] bf16 */
    _Alignas(64) float lse[FT * FN];               /* [T, N] */
    _Alignas(64) float max_logits[FT * FN];        /* [T, N] */
    _Alignas(64) uint16_t tail[FT * FN * FD * 2];  /* room for views that reach past the last buffer */
    dsops_sas_args a;
} fixture;

static void bind(fixture *f)
{
    dsops_sas_args *a = &f->a;
    memset(a, 0, sizeof *a);
    a->q = dsops_tensor_make(f->q, DSOPS_BF16, 3, (int64_t[]){FT, FN, FD});
    a->cu_seqlens_q = dsops_tensor_make(f->cu, DSOPS_INT32, 1, (int64_t[]){FB + 1});
    a->seqused_kv = dsops_tensor_make(f->used, DSOPS_INT32, 1, (int64_t[]){FB});
    a->ori_kv = dsops_tensor_make(f->ori, DSOPS_BF16, 3, (int64_t[]){FNBW, FBSW, FD});
    a->ori_block_table = dsops_tensor_make(f->ori_bt, DSOPS_INT32, 2, (int64_t[]){FB, FMBW});
    a->cmp_kv = dsops_tensor_make(f->cmp, DSOPS_BF16, 3, (int64_t[]){FNBC, FBSC, FD});
    a->cmp_block_table = dsops_tensor_make(f->cmp_bt, DSOPS_INT32, 2, (int64_t[]){FB, FMBC});
    a->cmp_indices = dsops_tensor_make(f->idx, DSOPS_INT32, 2, (int64_t[]){FT, FK});
    a->cmp_topk_length = dsops_tensor_make(f->len, DSOPS_INT32, 1, (int64_t[]){FT});
    a->sinks = dsops_tensor_make(f->sinks, DSOPS_FP32, 1, (int64_t[]){FN});
    a->out = dsops_tensor_make(f->out, DSOPS_BF16, 3, (int64_t[]){FT, FN, FD});
    a->lse = dsops_tensor_make(f->lse, DSOPS_FP32, 2, (int64_t[]){FT, FN});
    a->max_logits = dsops_tensor_make(f->max_logits, DSOPS_FP32, 2, (int64_t[]){FT, FN});
    a->softmax_scale = 0.125f;
    a->win_size = 4;
    a->cmp_mode = DSOPS_CMP_SPARSE;
    a->cmp_ratio = 2;
    a->p_mode = DSOPS_P_NORMALISED;
    a->p_tile = 128;
}

/* Rows nobody needs hold NaN, so a stray read shows in the valid calls' comparisons. */
static int ori_row_needed(int blk, int row)
{
    /* physical block -> (sequence, column) per the tables above */
    static const int seq[FNBW] = {0, 1, 0, 1, -1}, col[FNBW] = {2, 1, 1, 0, -1};
    if (seq[blk] < 0)
        return 0;
    int pos = col[blk] * FBSW + row;
    return seq[blk] == 0 ? (pos >= 5 && pos <= 9) : (pos >= 1 && pos <= 4);
}

static int cmp_row_needed(int blk, int row)
{
    static const int seq[FNBC] = {-1, 0, 1, 0}, col[FNBC] = {-1, 0, 0, 2};
    if (seq[blk] < 0)
        return 0;
    int e = col[blk] * FBSC + row;
    return seq[blk] == 0 ? (e == 0 || e == 1 || e == 4) : e == 1;
}

static fixture *make_fixture(void)
{
    fixture *f = tu_alloc(sizeof *f); /* 64-byte aligned, as its members */
    tu_rng r;
    tu_rng_seed(&r, tu_seed());
    for (int i = 0; i < FT * FN * FD; i++)
        f->q[i] = tu_bf16(tu_rng_uniform(&r, -1, 1));
    f->cu[0] = 0, f->cu[1] = 2, f->cu[2] = 3;
    f->used[0] = 10, f->used[1] = 5;
    for (int blk = 0; blk < FNBW; blk++)
        for (int row = 0; row < FBSW; row++)
            for (int d = 0; d < FD; d++)
                f->ori[(blk * FBSW + row) * FD + d] =
                    ori_row_needed(blk, row) ? tu_bf16(tu_rng_uniform(&r, -1, 1)) : SP_NAN_BF16;
    for (int blk = 0; blk < FNBC; blk++)
        for (int row = 0; row < FBSC; row++)
            for (int d = 0; d < FD; d++)
                f->cmp[(blk * FBSC + row) * FD + d] =
                    cmp_row_needed(blk, row) ? tu_bf16(tu_rng_uniform(&r, -1, 1)) : SP_NAN_BF16;
    const int32_t ori_bt[FB * FMBW] = {-1, 2, 0, 3, 1, -1}, cmp_bt[FB * FMBC] = {1, -1, 3, 2, -1, -1};
    const int32_t idx[FT * FK] = {4, -1, 1, 0, 9, 3, 1, 1, 7}, len[FT] = {3, 2, 3};
    memcpy(f->ori_bt, ori_bt, sizeof ori_bt), memcpy(f->cmp_bt, cmp_bt, sizeof cmp_bt);
    memcpy(f->idx, idx, sizeof idx), memcpy(f->len, len, sizeof len);
    f->sinks[0] = 0.5f, f->sinks[1] = -0.25f;
    for (int i = 0; i < FT * FN * FD; i++)
        f->out[i] = CASES_GUARD_BF16;
    for (int i = 0; i < FT * FN; i++) {
        uint32_t g = CASES_GUARD_F32;
        memcpy(&f->lse[i], &g, 4);
    }
    for (size_t i = 0; i < sizeof f->tail / 2; i++)
        f->tail[i] = CASES_GUARD_BF16;
    bind(f);
    return f;
}

/* The one-line mutations, the tables, the ops and main below follow the layout every test_*_validation.c shares
 * (tests/validation.h): what repeats between those programs is that protocol, each row its own field. */
#define FRAG(...) snprintf(frag, VAL_FRAG_MAX, __VA_ARGS__)
#define A (f->a)

/* V2: required tensors (the pools and their tables are required by the fixture's mode and win_size) */
static void null_q(void *problem, char *frag) { fixture *f = problem; A.q.data = NULL; FRAG("q"); }
static void null_cu(void *problem, char *frag) { fixture *f = problem; A.cu_seqlens_q.data = NULL; FRAG("cu_seqlens_q"); }
static void null_used(void *problem, char *frag) { fixture *f = problem; A.seqused_kv.data = NULL; FRAG("seqused_kv"); }
static void null_out(void *problem, char *frag) { fixture *f = problem; A.out.data = NULL; FRAG("out"); }
static void null_ori(void *problem, char *frag) { fixture *f = problem; A.ori_kv.data = NULL; FRAG("ori_kv"); }
static void null_ori_bt(void *problem, char *frag) { fixture *f = problem; A.ori_block_table.data = NULL; FRAG("ori_block_table"); }
static void null_cmp(void *problem, char *frag) { fixture *f = problem; A.cmp_kv.data = NULL; FRAG("cmp_kv"); }
static void null_cmp_bt(void *problem, char *frag) { fixture *f = problem; A.cmp_block_table.data = NULL; FRAG("cmp_block_table"); }
static void null_idx(void *problem, char *frag) { fixture *f = problem; A.cmp_indices.data = NULL; FRAG("cmp_indices"); }
static void null_cmp_dense(void *problem, char *frag)
{
    fixture *f = problem;
    A.cmp_mode = DSOPS_CMP_DENSE, A.cmp_kv.data = NULL;
    FRAG("cmp_kv");
}
static void null_cmp_bt_dense(void *problem, char *frag)
{
    fixture *f = problem;
    A.cmp_mode = DSOPS_CMP_DENSE, A.cmp_block_table.data = NULL;
    FRAG("cmp_block_table");
}
static void null_ori_win1(void *problem, char *frag)
{
    fixture *f = problem;
    A.win_size = 1, A.ori_kv.data = NULL, A.ori_block_table.data = NULL;
    FRAG("ori_kv");
}

/* V3: ranks */
static void rank_q(void *problem, char *frag) { fixture *f = problem; A.q.ndim = 2; FRAG("q"); }
static void rank_cu(void *problem, char *frag) { fixture *f = problem; A.cu_seqlens_q.ndim = 2, A.cu_seqlens_q.shape[1] = 1; FRAG("cu_seqlens_q"); }
static void rank_used(void *problem, char *frag) { fixture *f = problem; A.seqused_kv.ndim = 0; FRAG("seqused_kv"); }
static void rank_ori(void *problem, char *frag) { fixture *f = problem; A.ori_kv.ndim = 2; FRAG("ori_kv"); }
static void rank_ori_bt(void *problem, char *frag) { fixture *f = problem; A.ori_block_table.ndim = 1; FRAG("ori_block_table"); }
static void rank_cmp(void *problem, char *frag) { fixture *f = problem; A.cmp_kv.ndim = 4, A.cmp_kv.shape[3] = 1, A.cmp_kv.stride[3] = 1; FRAG("cmp_kv"); }
static void rank_cmp_bt(void *problem, char *frag) { fixture *f = problem; A.cmp_block_table.ndim = 3, A.cmp_block_table.shape[2] = 1; FRAG("cmp_block_table"); }
static void rank_idx(void *problem, char *frag) { fixture *f = problem; A.cmp_indices.ndim = 1; FRAG("cmp_indices"); }
static void rank_len(void *problem, char *frag) { fixture *f = problem; A.cmp_topk_length.ndim = 2, A.cmp_topk_length.shape[1] = 1; FRAG("cmp_topk_length"); }
static void rank_sinks(void *problem, char *frag) { fixture *f = problem; A.sinks.ndim = 2, A.sinks.shape[1] = 1; FRAG("sinks"); }
static void rank_out(void *problem, char *frag) { fixture *f = problem; A.out.ndim = 2; FRAG("out"); }
static void rank_lse(void *problem, char *frag) { fixture *f = problem; A.lse.ndim = 3, A.lse.shape[2] = 1; FRAG("lse"); }

/* V3: extents */
static void ext_ori_d(void *problem, char *frag) { fixture *f = problem; A.ori_kv.shape[2] = FD - 1; FRAG("ori_kv"); }
static void ext_cmp_d(void *problem, char *frag) { fixture *f = problem; A.cmp_kv.shape[2] = FD / 2; FRAG("cmp_kv"); }
static void ext_q_d0(void *problem, char *frag)
{
    fixture *f = problem;
    A.q.shape[2] = A.out.shape[2] = A.ori_kv.shape[2] = A.cmp_kv.shape[2] = 0;
    FRAG("q");
}
static void ext_q_n0(void *problem, char *frag) { fixture *f = problem; A.q.shape[1] = A.out.shape[1] = A.lse.shape[1] = A.max_logits.shape[1] = 0, A.sinks.shape[0] = 0; FRAG("q"); }
static void ext_q_inner(void *problem, char *frag) { fixture *f = problem; A.q.stride[2] = 2; FRAG("q"); }
static void ext_out_inner(void *problem, char *frag) { fixture *f = problem; A.out.stride[2] = 2; FRAG("out"); }
static void ext_ori_inner(void *problem, char *frag) { fixture *f = problem; A.ori_kv.stride[2] = 2; FRAG("ori_kv"); }
static void ext_q_overflow(void *problem, char *frag) { fixture *f = problem; A.q.shape[0] = INT64_MAX / 4; FRAG("q"); }
static void ext_out_t(void *problem, char *frag) { fixture *f = problem; A.out.shape[0] = FT - 1; FRAG("out"); }
static void ext_out_n(void *problem, char *frag) { fixture *f = problem; A.out.shape[1] = FN + 1; FRAG("out"); }
static void ext_out_d(void *problem, char *frag) { fixture *f = problem; A.out.shape[2] = FD - 2; FRAG("out"); }
static void ext_lse_t(void *problem, char *frag) { fixture *f = problem; A.lse.shape[0] = FT + 1; FRAG("lse"); }
static void ext_lse_n(void *problem, char *frag) { fixture *f = problem; A.lse.shape[1] = 1; FRAG("lse"); }
static void ext_sinks(void *problem, char *frag) { fixture *f = problem; A.sinks.shape[0] = FN + 1; FRAG("sinks"); }
static void ext_sinks_short(void *problem, char *frag) { fixture *f = problem; A.sinks.shape[0] = 1; FRAG("sinks"); }
static void ext_idx_t(void *problem, char *frag) { fixture *f = problem; A.cmp_indices.shape[0] = FT - 1; FRAG("cmp_indices"); }
static void ext_idx_k0(void *problem, char *frag) { fixture *f = problem; A.cmp_indices.shape[1] = 0; FRAG("cmp_indices"); }
static void ext_len_t(void *problem, char *frag) { fixture *f = problem; A.cmp_topk_length.shape[0] = FT + 1; FRAG("cmp_topk_length"); }
static void ext_used_b(void *problem, char *frag) { fixture *f = problem; A.seqused_kv.shape[0] = FB + 1; FRAG("seqused_kv"); }
static void ext_ori_bt_b(void *problem, char *frag) { fixture *f = problem; A.ori_block_table.shape[0] = FB - 1; FRAG("ori_block_table"); }
static void ext_cmp_bt_b(void *problem, char *frag) { fixture *f = problem; A.cmp_block_table.shape[0] = FB + 1; FRAG("cmp_block_table"); }
static void ext_ori_bs0(void *problem, char *frag) { fixture *f = problem; A.ori_kv.shape[1] = 0; FRAG("ori_kv"); }
static void ext_cmp_bs0(void *problem, char *frag) { fixture *f = problem; A.cmp_kv.shape[1] = 0; FRAG("cmp_kv"); }
static void ext_cu_0(void *problem, char *frag) { fixture *f = problem; A.cu_seqlens_q.shape[0] = 0; FRAG("cu_seqlens_q"); }

/* V4: dtypes */
static void dt_q(void *problem, char *frag) { fixture *f = problem; A.q.dtype = DSOPS_FP16; FRAG("q"); }
static void dt_cu(void *problem, char *frag) { fixture *f = problem; A.cu_seqlens_q.dtype = DSOPS_INT64; FRAG("cu_seqlens_q"); }
static void dt_used(void *problem, char *frag) { fixture *f = problem; A.seqused_kv.dtype = DSOPS_FP32; FRAG("seqused_kv"); }
static void dt_ori(void *problem, char *frag) { fixture *f = problem; A.ori_kv.dtype = DSOPS_FP16; FRAG("ori_kv"); }
static void dt_ori_bt(void *problem, char *frag) { fixture *f = problem; A.ori_block_table.dtype = DSOPS_INT64; FRAG("ori_block_table"); }
static void dt_cmp(void *problem, char *frag) { fixture *f = problem; A.cmp_kv.dtype = DSOPS_INT8; FRAG("cmp_kv"); }
static void dt_cmp_bt(void *problem, char *frag) { fixture *f = problem; A.cmp_block_table.dtype = DSOPS_UINT8; FRAG("cmp_block_table"); }
static void dt_idx(void *problem, char *frag) { fixture *f = problem; A.cmp_indices.dtype = DSOPS_INT64; FRAG("cmp_indices"); }
static void dt_len(void *problem, char *frag) { fixture *f = problem; A.cmp_topk_length.dtype = DSOPS_FP32; FRAG("cmp_topk_length"); }
static void dt_sinks(void *problem, char *frag) { fixture *f = problem; A.sinks.dtype = DSOPS_BF16; FRAG("sinks"); }
static void dt_out(void *problem, char *frag) { fixture *f = problem; A.out.dtype = DSOPS_FP32; FRAG("out"); }
static void dt_lse(void *problem, char *frag) { fixture *f = problem; A.lse.dtype = DSOPS_BF16; FRAG("lse"); }
static void dt_max(void *problem, char *frag) { fixture *f = problem; A.max_logits.dtype = DSOPS_INT32; FRAG("max_logits has dtype int32"); }
static void ext_max_n(void *problem, char *frag) { fixture *f = problem; A.max_logits.shape[1] = 1; FRAG("max_logits.shape[1] = 1"); }
static void dt_invalid(void *problem, char *frag) { fixture *f = problem; A.q.dtype = (dsops_dtype)99; FRAG("q"); }

/* V5: scalar parameters */
static void p_scale_nan(void *problem, char *frag) { fixture *f = problem; A.softmax_scale = NAN; FRAG("softmax_scale"); }
static void p_scale_inf(void *problem, char *frag) { fixture *f = problem; A.softmax_scale = INFINITY; FRAG("softmax_scale"); }
static void p_scale_ninf(void *problem, char *frag) { fixture *f = problem; A.softmax_scale = -INFINITY; FRAG("softmax_scale"); }
static void p_win_neg(void *problem, char *frag) { fixture *f = problem; A.win_size = -1; FRAG("win_size"); }
static void p_ratio0(void *problem, char *frag) { fixture *f = problem; A.cmp_ratio = 0; FRAG("cmp_ratio"); }
static void p_ratio_neg(void *problem, char *frag) { fixture *f = problem; A.cmp_ratio = -4; FRAG("cmp_ratio"); }
static void p_ratio0_dense(void *problem, char *frag) { fixture *f = problem; A.cmp_mode = DSOPS_CMP_DENSE, A.cmp_ratio = 0; FRAG("cmp_ratio"); }
static void p_tile0(void *problem, char *frag) { fixture *f = problem; A.p_mode = DSOPS_P_TILED, A.p_tile = 0; FRAG("p_tile"); }
static void p_tile_neg(void *problem, char *frag) { fixture *f = problem; A.p_mode = DSOPS_P_TILED, A.p_tile = -3; FRAG("p_tile"); }
static void p_pmode(void *problem, char *frag) { fixture *f = problem; A.p_mode = (dsops_p_mode)3; FRAG("p_mode"); }
static void p_pool_layout(void *problem, char *frag) { fixture *f = problem; A.pool_layout = (dsops_sas_pool_layout)2; FRAG("pool_layout = 2"); }
/* MODEL1 FP8 pools are uint8 blocks of D 512 rows: the fixture's bf16 pools, and uint8 pools with D 64 */
static void model1_bf16_pools(void *problem, char *frag) { fixture *f = problem; A.pool_layout = DSOPS_SAS_POOL_MODEL1_FP8; FRAG("ori_kv"); }
static void model1_d64(void *problem, char *frag)
{
    fixture *f = problem;
    A.pool_layout = DSOPS_SAS_POOL_MODEL1_FP8;
    A.ori_kv.dtype = DSOPS_UINT8;
    FRAG("expected 512");
}
static void p_pmode_neg(void *problem, char *frag) { fixture *f = problem; A.p_mode = (dsops_p_mode)-1; FRAG("p_mode"); }
static void p_cmode(void *problem, char *frag) { fixture *f = problem; A.cmp_mode = (dsops_cmp_mode)3; FRAG("cmp_mode"); }
static void p_cmode_neg(void *problem, char *frag) { fixture *f = problem; A.cmp_mode = (dsops_cmp_mode)-1; FRAG("cmp_mode"); }

/* V6: sequence descriptors, cmp_topk_length */
static void i_cu0(void *problem, char *frag) { fixture *f = problem; f->cu[0] = 1; FRAG("cu_seqlens_q[0]"); }
static void i_cu_dec(void *problem, char *frag) { fixture *f = problem; f->cu[1] = 4; FRAG("cu_seqlens_q"); }
static void i_cu_t(void *problem, char *frag) { fixture *f = problem; f->cu[2] = 2; FRAG("cu_seqlens_q[2]"); }
static void i_used_neg(void *problem, char *frag) { fixture *f = problem; f->used[1] = -1; FRAG("seqused_kv[1]"); }
static void i_len_neg(void *problem, char *frag) { fixture *f = problem; f->len[1] = -1; FRAG("cmp_topk_length[1]"); }
static void i_len_neg_min(void *problem, char *frag) { fixture *f = problem; f->len[2] = -2147483647 - 1; FRAG("cmp_topk_length[2]"); }

/* V7: block-table entries needed by a window position or a used compressed entry */
static void i_ori_minus1(void *problem, char *frag) { fixture *f = problem; f->ori_bt[1] = -1; FRAG("ori_block_table[0][1]"); }   /* pos 5 ... 7 */
static void i_ori_range(void *problem, char *frag) { fixture *f = problem; f->ori_bt[2] = FNBW; FRAG("ori_block_table[0][2]"); }  /* pos 8, 9 */
static void i_ori_seq1(void *problem, char *frag) { fixture *f = problem; f->ori_bt[FMBW] = -1; FRAG("ori_block_table[1][0]"); }  /* pos 1 ... 3 */
static void i_ori_cols(void *problem, char *frag) { fixture *f = problem; A.ori_block_table.shape[1] = 2; FRAG("ori_block_table"); }
static void i_cmp_minus1(void *problem, char *frag) { fixture *f = problem; f->cmp_bt[0] = -1; FRAG("cmp_block_table[0][0]"); }
static void i_cmp_range(void *problem, char *frag) { fixture *f = problem; f->cmp_bt[FMBC] = FNBC; FRAG("cmp_block_table[1][0]"); }
/* column 2 holds entry 4: valid for sequence 0 (NC 5) and used by token 0 although n_cmp(L 9) = 4 */
static void i_cmp_noncausal(void *problem, char *frag) { fixture *f = problem; f->cmp_bt[2] = -1; FRAG("cmp_block_table[0][2]"); }
static void i_cmp_cols(void *problem, char *frag) { fixture *f = problem; A.cmp_block_table.shape[1] = 2; FRAG("cmp_block_table"); }
/* dense: every entry 0 ... n_cmp(L) - 1 is needed, so column 1 of sequence 0 (entries 2, 3) too */
static void i_cmp_dense(void *problem, char *frag) { fixture *f = problem; A.cmp_mode = DSOPS_CMP_DENSE; FRAG("cmp_block_table[0][1]"); }
/* without cmp_topk_length token 1 counts 3 entries: entry 3 (column 1) becomes needed */
static void i_cmp_no_len(void *problem, char *frag) { fixture *f = problem; A.cmp_topk_length.data = NULL; FRAG("cmp_block_table[0][1]"); }
/* a wider window reaches position 3 of sequence 0, whose column 0 holds -1 */
static void i_ori_wider(void *problem, char *frag) { fixture *f = problem; A.win_size = 6; FRAG("ori_block_table[0][0]"); }

/* V9: aliasing */
static void al_out_q(void *problem, char *frag) { fixture *f = problem; A.out.data = f->q; FRAG("out"); }
static void al_out_ori(void *problem, char *frag) { fixture *f = problem; A.out.data = f->ori + 8; FRAG("out"); }
static void al_out_cmp(void *problem, char *frag) { fixture *f = problem; A.out.data = f->cmp + FD; FRAG("out"); }
static void al_out_idx(void *problem, char *frag) { fixture *f = problem; A.lse.data = NULL, A.out.data = f->idx; FRAG("out"); }
static void al_lse_sinks(void *problem, char *frag) { fixture *f = problem; A.lse.data = f->sinks; FRAG("lse"); }
static void al_lse_out(void *problem, char *frag) { fixture *f = problem; A.lse.data = f->out + 6; FRAG("lse"); }
static void al_max_lse(void *problem, char *frag) { fixture *f = problem; A.max_logits.data = f->lse + 1; FRAG("max_logits"); }
static void al_lse_cu(void *problem, char *frag) { fixture *f = problem; A.lse.data = f->cu; FRAG("lse"); }
static void al_lse_len(void *problem, char *frag) { fixture *f = problem; A.lse.data = f->len; FRAG("lse"); }
static void al_out_bt(void *problem, char *frag) { fixture *f = problem; A.out.data = f->ori_bt; FRAG("out"); }
static void al_lse_cmp_bt(void *problem, char *frag) { fixture *f = problem; A.lse.data = f->cmp_bt + 1; FRAG("lse"); }

/* one fixture: every row has variant 0 */
static const val_bad_case bad_cases[] = {
    {"null_q", 0, DSOPS_ERR_NULL, null_q},
    {"pool_layout_2", 0, DSOPS_ERR_PARAM, p_pool_layout},
    {"model1_with_bf16_pools", 0, DSOPS_ERR_DTYPE, model1_bf16_pools},
    {"model1_with_d64", 0, DSOPS_ERR_SHAPE, model1_d64},
    {"null_cu_seqlens_q", 0, DSOPS_ERR_NULL, null_cu},
    {"null_seqused_kv", 0, DSOPS_ERR_NULL, null_used},
    {"null_out", 0, DSOPS_ERR_NULL, null_out},
    {"null_ori_kv_with_window", 0, DSOPS_ERR_NULL, null_ori},
    {"null_ori_block_table_with_window", 0, DSOPS_ERR_NULL, null_ori_bt},
    {"null_ori_kv_win_size_1", 0, DSOPS_ERR_NULL, null_ori_win1},
    {"null_cmp_kv_sparse", 0, DSOPS_ERR_NULL, null_cmp},
    {"null_cmp_block_table_sparse", 0, DSOPS_ERR_NULL, null_cmp_bt},
    {"null_cmp_indices_sparse", 0, DSOPS_ERR_NULL, null_idx},
    {"null_cmp_kv_dense", 0, DSOPS_ERR_NULL, null_cmp_dense},
    {"null_cmp_block_table_dense", 0, DSOPS_ERR_NULL, null_cmp_bt_dense},
    {"rank_q", 0, DSOPS_ERR_SHAPE, rank_q},
    {"rank_cu_seqlens_q", 0, DSOPS_ERR_SHAPE, rank_cu},
    {"rank_seqused_kv", 0, DSOPS_ERR_SHAPE, rank_used},
    {"rank_ori_kv", 0, DSOPS_ERR_SHAPE, rank_ori},
    {"rank_ori_block_table", 0, DSOPS_ERR_SHAPE, rank_ori_bt},
    {"rank_cmp_kv", 0, DSOPS_ERR_SHAPE, rank_cmp},
    {"rank_cmp_block_table", 0, DSOPS_ERR_SHAPE, rank_cmp_bt},
    {"rank_cmp_indices", 0, DSOPS_ERR_SHAPE, rank_idx},
    {"rank_cmp_topk_length", 0, DSOPS_ERR_SHAPE, rank_len},
    {"rank_sinks", 0, DSOPS_ERR_SHAPE, rank_sinks},
    {"rank_out", 0, DSOPS_ERR_SHAPE, rank_out},
    {"rank_lse", 0, DSOPS_ERR_SHAPE, rank_lse},
    {"extent_ori_kv_d_mismatch", 0, DSOPS_ERR_SHAPE, ext_ori_d},
    {"extent_cmp_kv_d_mismatch", 0, DSOPS_ERR_SHAPE, ext_cmp_d},
    {"extent_d_0", 0, DSOPS_ERR_SHAPE, ext_q_d0},
    {"extent_n_0", 0, DSOPS_ERR_SHAPE, ext_q_n0},
    {"extent_q_inner_stride", 0, DSOPS_ERR_SHAPE, ext_q_inner},
    {"extent_out_inner_stride", 0, DSOPS_ERR_SHAPE, ext_out_inner},
    {"extent_ori_kv_inner_stride", 0, DSOPS_ERR_SHAPE, ext_ori_inner},
    {"extent_q_overflow", 0, DSOPS_ERR_SHAPE, ext_q_overflow},
    {"extent_out_t", 0, DSOPS_ERR_SHAPE, ext_out_t},
    {"extent_out_n", 0, DSOPS_ERR_SHAPE, ext_out_n},
    {"extent_out_d", 0, DSOPS_ERR_SHAPE, ext_out_d},
    {"extent_lse_t", 0, DSOPS_ERR_SHAPE, ext_lse_t},
    {"extent_lse_n", 0, DSOPS_ERR_SHAPE, ext_lse_n},
    {"extent_sinks_long", 0, DSOPS_ERR_SHAPE, ext_sinks},
    {"extent_sinks_short", 0, DSOPS_ERR_SHAPE, ext_sinks_short},
    {"extent_cmp_indices_t", 0, DSOPS_ERR_SHAPE, ext_idx_t},
    {"extent_cmp_indices_k_0", 0, DSOPS_ERR_SHAPE, ext_idx_k0},
    {"extent_cmp_topk_length_t", 0, DSOPS_ERR_SHAPE, ext_len_t},
    {"extent_seqused_kv_b", 0, DSOPS_ERR_SHAPE, ext_used_b},
    {"extent_ori_block_table_b", 0, DSOPS_ERR_SHAPE, ext_ori_bt_b},
    {"extent_cmp_block_table_b", 0, DSOPS_ERR_SHAPE, ext_cmp_bt_b},
    {"extent_ori_kv_block_size_0", 0, DSOPS_ERR_SHAPE, ext_ori_bs0},
    {"extent_cmp_kv_block_size_0", 0, DSOPS_ERR_SHAPE, ext_cmp_bs0},
    {"extent_cu_seqlens_q_0", 0, DSOPS_ERR_SHAPE, ext_cu_0},
    {"dtype_q", 0, DSOPS_ERR_DTYPE, dt_q},
    {"dtype_cu_seqlens_q", 0, DSOPS_ERR_DTYPE, dt_cu},
    {"dtype_seqused_kv", 0, DSOPS_ERR_DTYPE, dt_used},
    {"dtype_ori_kv", 0, DSOPS_ERR_DTYPE, dt_ori},
    {"dtype_ori_block_table", 0, DSOPS_ERR_DTYPE, dt_ori_bt},
    {"dtype_cmp_kv", 0, DSOPS_ERR_DTYPE, dt_cmp},
    {"dtype_cmp_block_table", 0, DSOPS_ERR_DTYPE, dt_cmp_bt},
    {"dtype_cmp_indices", 0, DSOPS_ERR_DTYPE, dt_idx},
    {"dtype_cmp_topk_length", 0, DSOPS_ERR_DTYPE, dt_len},
    {"dtype_sinks", 0, DSOPS_ERR_DTYPE, dt_sinks},
    {"dtype_out", 0, DSOPS_ERR_DTYPE, dt_out},
    {"dtype_lse", 0, DSOPS_ERR_DTYPE, dt_lse},
    {"dtype_max_logits", 0, DSOPS_ERR_DTYPE, dt_max},
    {"extent_max_logits_n", 0, DSOPS_ERR_SHAPE, ext_max_n},
    {"alias_max_logits_lse", 0, DSOPS_ERR_ALIAS, al_max_lse},
    {"dtype_invalid_value", 0, DSOPS_ERR_DTYPE, dt_invalid},
    {"param_softmax_scale_nan", 0, DSOPS_ERR_PARAM, p_scale_nan},
    {"param_softmax_scale_inf", 0, DSOPS_ERR_PARAM, p_scale_inf},
    {"param_softmax_scale_minus_inf", 0, DSOPS_ERR_PARAM, p_scale_ninf},
    {"param_win_size_negative", 0, DSOPS_ERR_PARAM, p_win_neg},
    {"param_cmp_ratio_0", 0, DSOPS_ERR_PARAM, p_ratio0},
    {"param_cmp_ratio_negative", 0, DSOPS_ERR_PARAM, p_ratio_neg},
    {"param_cmp_ratio_0_dense", 0, DSOPS_ERR_PARAM, p_ratio0_dense},
    {"param_p_tile_0_tiled", 0, DSOPS_ERR_PARAM, p_tile0},
    {"param_p_tile_negative_tiled", 0, DSOPS_ERR_PARAM, p_tile_neg},
    {"param_p_mode", 0, DSOPS_ERR_PARAM, p_pmode},
    {"param_p_mode_negative", 0, DSOPS_ERR_PARAM, p_pmode_neg},
    {"param_cmp_mode", 0, DSOPS_ERR_PARAM, p_cmode},
    {"param_cmp_mode_negative", 0, DSOPS_ERR_PARAM, p_cmode_neg},
    {"index_cu_seqlens_q_first", 0, DSOPS_ERR_INDEX, i_cu0},
    {"index_cu_seqlens_q_decreasing", 0, DSOPS_ERR_INDEX, i_cu_dec},
    {"index_cu_seqlens_q_last", 0, DSOPS_ERR_INDEX, i_cu_t},
    {"index_seqused_kv_negative", 0, DSOPS_ERR_INDEX, i_used_neg},
    {"index_cmp_topk_length_negative", 0, DSOPS_ERR_INDEX, i_len_neg},
    {"index_cmp_topk_length_int32_min", 0, DSOPS_ERR_INDEX, i_len_neg_min},
    {"index_ori_table_minus1_needed", 0, DSOPS_ERR_INDEX, i_ori_minus1},
    {"index_ori_table_out_of_range", 0, DSOPS_ERR_INDEX, i_ori_range},
    {"index_ori_table_seq1_minus1", 0, DSOPS_ERR_INDEX, i_ori_seq1},
    {"index_ori_table_too_few_columns", 0, DSOPS_ERR_INDEX, i_ori_cols},
    {"index_ori_table_wider_window", 0, DSOPS_ERR_INDEX, i_ori_wider},
    {"index_cmp_table_minus1_needed", 0, DSOPS_ERR_INDEX, i_cmp_minus1},
    {"index_cmp_table_out_of_range", 0, DSOPS_ERR_INDEX, i_cmp_range},
    {"index_cmp_table_noncausal_valid_index", 0, DSOPS_ERR_INDEX, i_cmp_noncausal},
    {"index_cmp_table_too_few_columns", 0, DSOPS_ERR_INDEX, i_cmp_cols},
    {"index_cmp_table_dense_needs_all", 0, DSOPS_ERR_INDEX, i_cmp_dense},
    {"index_cmp_table_count_without_length", 0, DSOPS_ERR_INDEX, i_cmp_no_len},
    {"alias_out_q", 0, DSOPS_ERR_ALIAS, al_out_q},
    {"alias_out_ori_kv", 0, DSOPS_ERR_ALIAS, al_out_ori},
    {"alias_out_cmp_kv", 0, DSOPS_ERR_ALIAS, al_out_cmp},
    {"alias_out_cmp_indices", 0, DSOPS_ERR_ALIAS, al_out_idx},
    {"alias_lse_sinks", 0, DSOPS_ERR_ALIAS, al_lse_sinks},
    {"alias_lse_out", 0, DSOPS_ERR_ALIAS, al_lse_out},
    {"alias_lse_cu_seqlens_q", 0, DSOPS_ERR_ALIAS, al_lse_cu},
    {"alias_lse_cmp_topk_length", 0, DSOPS_ERR_ALIAS, al_lse_len},
    {"alias_out_ori_block_table", 0, DSOPS_ERR_ALIAS, al_out_bt},
    {"alias_lse_cmp_block_table", 0, DSOPS_ERR_ALIAS, al_lse_cmp_bt},
};

/* ---- valid calls on the fixture (against the oracle) ----------------------------------------------- */

/* The oracle's run on a copy g of the fixture f (views moved into g). The flat fixtures of sas and compressor
 * take the same steps, each with its own operator and output that the oracle always reports. */
static void *oracle(void *problem)
{
    const fixture *f = problem;
    fixture *g = tu_memdup(f, sizeof *f);
    val_rebase_views("sas", &g->a, f, sizeof *f, g);
    if (!f->a.lse.data) /* the oracle always reports lse */
        g->a.lse = dsops_tensor_make(g->lse, DSOPS_FP32, 2, (int64_t[]){f->a.q.shape[0], FN});
    dsops_ref_sas(&g->a);
    return g;
}

/* The library's result on f against the oracle's on g: out within the normalised tolerance (the mode's for
 * tiled), lse within its tolerance, an absent lse untouched, nothing outside out and lse written. */
static void compare(void *problem, void *expected, const val_ok_case *c)
{
    const fixture *f = problem, *g = expected;
    const int has_lse = f->a.lse.data != NULL;
    const int64_t T = f->a.q.shape[0];
    float o[FT * FN * FD], r[FT * FN * FD];
    for (int64_t i = 0; i < T * FN * FD; i++)
        o[i] = tu_f32(f->out[i]), r[i] = tu_f32(g->out[i]);
    char l2[200];
    snprintf(l2, sizeof l2, "%s out", c->name);
    const tu_tol tol = f->a.p_mode == DSOPS_P_TILED ? (tu_tol){5e-4, 5e-4, 0.005} : (tu_tol){1e-4, 1.0 / 128, 0.005};
    tu_compare_close(l2, o, r, (size_t)(T * FN * FD), tol, NULL);
    if (has_lse) {
        snprintf(l2, sizeof l2, "%s lse", c->name);
        tu_compare_close(l2, f->lse, g->lse, (size_t)(T * FN), (tu_tol){1e-6, 8.01 / 65536, 0.005}, NULL);
    }
    /* untouched: out past T rows, lse (all of it when absent, past T rows otherwise), the tail */
    int ok = 1;
    for (int64_t i = T * FN * FD; i < FT * FN * FD; i++)
        ok &= f->out[i] == CASES_GUARD_BF16;
    for (int64_t i = has_lse ? T * FN : 0; i < FT * FN; i++) {
        uint32_t v;
        memcpy(&v, &f->lse[i], 4);
        ok &= v == CASES_GUARD_F32;
    }
    for (size_t i = 0; i < sizeof f->tail / 2; i++)
        ok &= f->tail[i] == CASES_GUARD_BF16;
    tu_check(ok, "%s: memory outside out / lse written (or lse written while absent)", c->name);
}

static void *make_problem(int variant)
{
    (void)variant;
    return make_fixture();
}
static dsops_status call(dsops_context *c, void *f) { return dsops_sas(c, &((fixture *)f)->a); }

/* a rejected call leaves every byte of the fixture as it was */
static const val_ops sas_ops = {
    .make = make_problem, .free = free, .call = call, .flat_bytes = sizeof(fixture), .oracle = oracle,
    .compare = compare, .free_expected = free,
};

static void v_unneeded_junk(void *problem) { fixture *f = problem; f->ori_bt[0] = 1000, f->cmp_bt[1] = -7, f->cmp_bt[FMBC + 2] = 2147483647; }
static void v_no_sinks(void *problem) { fixture *f = problem; f->a.sinks.data = NULL; }
static void v_no_lse(void *problem) { fixture *f = problem; f->a.lse.data = NULL; }
/* maps column 1 of sequence 0 (entries 2, 3) to the spare block 0 and gives that block finite rows */
static void use_spare_cmp_block(fixture *f)
{
    f->cmp_bt[1] = 0;
    for (int i = 0; i < FBSC * FD; i++)
        f->cmp[i] = tu_bf16((float)(i % 37) / 37.0f - 0.5f);
}
static void v_no_len_fixed(void *problem) { fixture *f = problem; f->a.cmp_topk_length.data = NULL, use_spare_cmp_block(f); }
static void v_len_zero(void *problem) { fixture *f = problem; f->len[0] = f->len[1] = f->len[2] = 0; }
static void v_len_large(void *problem) { fixture *f = problem; f->len[0] = f->len[1] = f->len[2] = 2147483647, use_spare_cmp_block(f); }
/* dense also needs entry 0 of sequence 1 (block 2, row 0) */
static void v_dense(void *problem)
{
    fixture *f = problem;
    f->a.cmp_mode = DSOPS_CMP_DENSE, use_spare_cmp_block(f);
    for (int d = 0; d < FD; d++)
        f->cmp[2 * FBSC * FD + d] = tu_bf16((float)(d % 11) / 11.0f - 0.5f);
}
static void v_tiled(void *problem) { fixture *f = problem; f->a.p_mode = DSOPS_P_TILED, f->a.p_tile = 1; }
static void v_fp32_tile0(void *problem) { fixture *f = problem; f->a.p_mode = DSOPS_P_FP32, f->a.p_tile = 0; }
static void v_normalised_tile0(void *problem) { fixture *f = problem; f->a.p_tile = -5; }
/* win_size 0: the window pool is not needed, so it may be absent (NULL) */
static void v_no_window(void *problem)
{
    fixture *f = problem;
    f->a.win_size = 0;
    f->a.ori_kv.data = NULL, f->a.ori_block_table.data = NULL;
}
/* win_size 0 with the pool present: nothing of it is read (its tables full of junk) */
static void v_no_window_junk(void *problem)
{
    fixture *f = problem;
    f->a.win_size = 0;
    for (int i = 0; i < FB * FMBW; i++)
        f->ori_bt[i] = -1;
}
/* cmp_mode none: compressed pool and indices may be absent, or present and ignored */
static void v_none_absent(void *problem)
{
    fixture *f = problem;
    f->a.cmp_mode = DSOPS_CMP_NONE;
    f->a.cmp_kv.data = NULL, f->a.cmp_block_table.data = NULL, f->a.cmp_indices.data = NULL;
    f->a.cmp_topk_length.data = NULL;
}
static void v_none_present(void *problem)
{
    fixture *f = problem;
    f->a.cmp_mode = DSOPS_CMP_NONE;
    f->cmp_bt[0] = f->cmp_bt[2] = -1; /* not looked at */
}
/* every index invalid and no window: every row lonely */
static void v_lonely(void *problem)
{
    fixture *f = problem;
    f->a.win_size = 0;
    for (int i = 0; i < FT * FK; i++)
        f->idx[i] = i % 2 ? -1 : 1000;
}
static void v_t0(void *problem)
{
    fixture *f = problem;
    f->cu[1] = f->cu[2] = 0;
    f->a.q.shape[0] = f->a.out.shape[0] = f->a.lse.shape[0] = f->a.max_logits.shape[0] = 0;
    f->a.cmp_indices.shape[0] = f->a.cmp_topk_length.shape[0] = 0;
}
static void v_b0(void *problem)
{
    fixture *f = problem;
    v_t0(f);
    f->a.cu_seqlens_q.shape[0] = 1;
    f->a.seqused_kv.shape[0] = 0;
    f->a.ori_block_table.shape[0] = f->a.cmp_block_table.shape[0] = 0;
}

static const val_ok_case ok_cases[] = {
    {"valid fixture as built", 0, NULL},
    {"valid unneeded table entries junk", 0, v_unneeded_junk},
    {"valid sinks absent", 0, v_no_sinks},
    {"valid lse absent", 0, v_no_lse},
    {"valid cmp_topk_length absent", 0, v_no_len_fixed},
    {"valid cmp_topk_length 0", 0, v_len_zero},
    {"valid cmp_topk_length int32 max", 0, v_len_large},
    {"valid dense", 0, v_dense},
    {"valid tiled p_tile 1", 0, v_tiled},
    {"valid fp32 p_tile 0", 0, v_fp32_tile0},
    {"valid normalised p_tile -5", 0, v_normalised_tile0},
    {"valid win_size 0 window pool absent", 0, v_no_window},
    {"valid win_size 0 window pool junk tables", 0, v_no_window_junk},
    {"valid cmp_mode none compressed pool absent", 0, v_none_absent},
    {"valid cmp_mode none compressed pool ignored", 0, v_none_present},
    {"valid all lonely", 0, v_lonely},
    {"valid T 0", 0, v_t0},
    {"valid B 0", 0, v_b0},
};

/* ---- tensors the mode does not use ------------------------------------------------------------------- */

/* cmp_topk_length and cmp_indices belong to sparse mode. Present in dense or none mode with extents that do
 * not match T, they may be ignored (DSOPS_OK) or rejected (DSOPS_ERR_SHAPE), but never read beyond their
 * declared extents (V1): the element just past the declared extent holds -1, which an out-of-extent read
 * would report as a negative count (DSOPS_ERR_INDEX). */
static void test_unused_sparse_tensors(void)
{
    if (!tu_selected("unused sparse tensors"))
        return;
    const dsops_cmp_mode modes[2] = {DSOPS_CMP_DENSE, DSOPS_CMP_NONE};
    for (int m = 0; m < 2; m++) {
        fixture *f = make_fixture();
        if (modes[m] == DSOPS_CMP_DENSE)
            v_dense(f); /* with finite rows for the dense entries */
        f->a.cmp_mode = modes[m];
        f->a.cmp_topk_length.shape[0] = 1;  /* T is 3 */
        f->len[1] = f->len[2] = -1;         /* outside the declared extent */
        f->a.cmp_indices.shape[0] = 1;
        dsops_status st = dsops_sas(ctx, &f->a);
        tu_check(st == DSOPS_OK || st == DSOPS_ERR_SHAPE,
                 "unused sparse tensors (cmp_mode %d): %s (\"%s\"): cmp_topk_length [1] (T 3) was read beyond its extent "
                 "or rejected for the wrong reason",
                 (int)modes[m], dsops_status_name(st), dsops_last_error());
        free(f);
    }
}

/* ---- docs/CASES.md v4_sas_edge_bad_table ------------------------------------------------------------------ */

/* -1 in a needed block-table entry of a generated case -> DSOPS_ERR_INDEX, out / lse untouched; one run per
 * pool: the window block of the last token's newest position, and (scfa) the block of a used index. */
static void test_bad_table_edge(void)
{
    const char *name = "v4_sas_edge_bad_table";
    if (!tu_selected(name))
        return;
    const dsops_sas_case *vc = dsops_sas_case_find("v4_scfa_b1_s16_kv130");
    if (!tu_check(vc != NULL, "%s: v4_scfa_b1_s16_kv130 is not in the case table", name))
        return;
    for (int pool = 0; pool < 2; pool++) {
        dsops_sas_problem *p = dsops_sas_problem_make(vc, tu_seed());
        if (!tu_check(p != NULL, "%s: problem generation failed", name))
            return;
        dsops_sas_args a = p->args;
        const int64_t T = a.q.shape[0], N = a.q.shape[1], D = a.q.shape[2];
        uint16_t *out = malloc((size_t)(T * N * D) * 2);
        float *lse = malloc((size_t)(T * N) * 4);
        if (!out || !lse)
            abort();
        for (int64_t i = 0; i < T * N * D; i++)
            out[i] = CASES_GUARD_BF16;
        memset(lse, 0xa5, (size_t)(T * N) * 4);
        a.out = dsops_tensor_make(out, DSOPS_BF16, 3, (int64_t[]){T, N, D});
        a.lse = dsops_tensor_make(lse, DSOPS_FP32, 2, (int64_t[]){T, N});
        int32_t *entry;
        const char *field;
        char frag[64];
        const int32_t used = ((const int32_t *)a.seqused_kv.data)[0];
        if (pool == 0) {
            /* position used - 1 (the last token's newest) */
            const int64_t col = (used - 1) / a.ori_kv.shape[1];
            entry = (int32_t *)a.ori_block_table.data + col * a.ori_block_table.stride[1];
            field = "ori_block_table";
            snprintf(frag, sizeof frag, "ori_block_table[0][%lld]", (long long)col);
        } else {
            /* the first index of the last token (used: its count is min(K, n_cmp(L)) >= 1 at seqused 130) */
            const int32_t idx = ((const int32_t *)a.cmp_indices.data)[(T - 1) * a.cmp_indices.stride[0]];
            const int64_t col = idx / a.cmp_kv.shape[1];
            entry = (int32_t *)a.cmp_block_table.data + col * a.cmp_block_table.stride[1];
            field = "cmp_block_table";
            snprintf(frag, sizeof frag, "cmp_block_table[0][%lld]", (long long)col);
        }
        *entry = -1;
        dsops_status st = dsops_sas(ctx, &a);
        const char *msg = dsops_last_error();
        int untouched = 1;
        for (int64_t i = 0; i < T * N * D; i++)
            untouched &= out[i] == CASES_GUARD_BF16;
        for (int64_t i = 0; i < T * N; i++) {
            uint32_t v;
            memcpy(&v, &lse[i], 4);
            untouched &= v == 0xa5a5a5a5u;
        }
        tu_check(st == DSOPS_ERR_INDEX && strstr(msg, frag) != NULL && untouched,
                 "%s (%s): %s (\"%s\"), expected DSOPS_ERR_INDEX naming %s; out and lse untouched: %d", name, field,
                 dsops_status_name(st), msg, frag, untouched);
        free(out), free(lse);
        dsops_sas_problem_free(p);
    }
}

/* ---- dsops_sas_init and NULL arguments ------------------------------------------------------------------- */

static void test_init_and_null(void)
{
    if (!tu_selected("init"))
        return;
    const float scale = 0.044194174f; /* 512^-0.5 */
    for (int p = DSOPS_PRESET_V4_FLASH; p <= DSOPS_PRESET_V4_PRO; p++)
        for (int v = DSOPS_SAS_SWA; v <= DSOPS_SAS_SCFA; v++) {
            dsops_sas_args a;
            memset(&a, 0x5a, sizeof a);
            dsops_status st = dsops_sas_init(&a, (dsops_preset)p, (dsops_sas_variant)v);
            int ok = st == DSOPS_OK && fabsf(a.softmax_scale - scale) <= 1e-8f && a.win_size == 128 &&
                     a.q.data == NULL && a.ori_kv.data == NULL && a.cmp_kv.data == NULL && a.sinks.data == NULL &&
                     a.lse.data == NULL && a.out.data == NULL && a.cmp_indices.data == NULL &&
                     a.cmp_topk_length.data == NULL;
            if (v == DSOPS_SAS_SWA)
                ok &= a.cmp_mode == DSOPS_CMP_NONE && a.p_mode == DSOPS_P_NORMALISED;
            else if (v == DSOPS_SAS_CFA)
                ok &= a.cmp_mode == DSOPS_CMP_DENSE && a.cmp_ratio == 128 && a.p_mode == DSOPS_P_TILED && a.p_tile == 128;
            else
                ok &= a.cmp_mode == DSOPS_CMP_SPARSE && a.cmp_ratio == 4 && a.p_mode == DSOPS_P_NORMALISED;
            tu_check(ok, "init: preset %d variant %d: %s, scale %.9g win %d cmp_mode %d ratio %d p_mode %d p_tile %d", p,
                     v, dsops_status_name(st), (double)a.softmax_scale, a.win_size, (int)a.cmp_mode, a.cmp_ratio,
                     (int)a.p_mode, a.p_tile);
        }
    dsops_sas_args a;
    memset(&a, 0x5a, sizeof a);
    dsops_status st = dsops_sas_init(&a, DSOPS_PRESET_V32, DSOPS_SAS_SCFA);
    tu_check(st == DSOPS_ERR_PARAM && a.cmp_mode == DSOPS_CMP_SPARSE && a.q.data == NULL,
             "init: preset v32 gives %s (expected DSOPS_ERR_PARAM with the struct filled)", dsops_status_name(st));
    st = dsops_sas_init(&a, DSOPS_PRESET_V4_FLASH, (dsops_sas_variant)3);
    tu_check(st == DSOPS_ERR_PARAM, "init: variant 3 gives %s", dsops_status_name(st));
    st = dsops_sas_init(&a, (dsops_preset)9, DSOPS_SAS_SWA);
    tu_check(st == DSOPS_ERR_PARAM, "init: preset 9 gives %s", dsops_status_name(st));
    tu_check(dsops_sas_init(NULL, DSOPS_PRESET_V4_FLASH, DSOPS_SAS_SWA) == DSOPS_ERR_NULL, "init: NULL args accepted");
    tu_check(dsops_sas(ctx, NULL) == DSOPS_ERR_NULL, "a NULL args pointer is not DSOPS_ERR_NULL");
}

/* The order of every validation program (tests/validation.h): init, the bad rows, the ok rows and its own cases. */
int main(int argc, char **argv)
{
    tu_init(argc, argv, 7);
    ctx = tu_context();
    test_init_and_null();
    val_run_bad(&sas_ops, ctx, bad_cases, VAL_COUNT(bad_cases));
    val_run_ok(&sas_ops, ctx, ok_cases, VAL_COUNT(ok_cases));
    test_unused_sparse_tensors();
    test_bad_table_edge();
    dsops_context_destroy(ctx);
    return tu_finish();
}
