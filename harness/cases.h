/* Named cases of docs/CASES.md: shapes, data generators and work counters, shared by the tests and the
 * benchmark tool. */
#ifndef DSOPS_BENCH_CASES_H
#define DSOPS_BENCH_CASES_H

#include <stdint.h>

#include "dsops.h"

/* One sparse_flash_attention_v32 case. Sequences are uniform: S query tokens each, cu_seqlens_q[b] = b*S. */
typedef struct dsops_sfa_case {
    const char *name;        /* e.g. "v32_sfa_b4_s2_int8_kv64k" */
    int B, S;                /* sequences, query tokens per sequence */
    int seqused[128];        /* seqused_kv per sequence (B entries) */
    int N, Dc, Dr, K, BS;    /* heads, latent, rope, top-k width, block size */
    dsops_kv_layout layout;
    int with_lse;            /* lse requested */
    int nan_unread;          /* every cache row no token reads holds NaN (int8: NaN scales too): they must not
                              * reach any output */
    int ci;                  /* 1 if the case fits the CI budget of docs/CASES.md */
    const char *ci_variant;  /* for ci == 0: the name of its scaled-down "_ci" case */
} dsops_sfa_case;

/* A generated problem: args point into buffers owned by the problem. */
typedef struct dsops_sfa_problem {
    dsops_sfa_case c;
    dsops_sparse_flash_attention_v32_args args;  /* vendor parameters: softmax_scale = 576^-0.5 */
    int64_t T;               /* query tokens */
    int64_t NB, MB;          /* physical blocks, block-table columns */
    int64_t attended;        /* sum over tokens of used indices (the key-list lengths) */
    double flops;            /* FlashMLA convention: 2 * N * attended * (Dqk + Dv) */
    double gathered_bytes;   /* cache bytes of the used rows: attended * row bytes of the layout */
    void *buffers[16];       /* owned allocations (freed by dsops_sfa_problem_free) */
    int nbuffers;
} dsops_sfa_problem;

/* All named cases (full and _ci variants), in the order of docs/CASES.md. */
const dsops_sfa_case *dsops_sfa_cases(int *count);
/* The case named `name`, or NULL. */
const dsops_sfa_case *dsops_sfa_case_find(const char *name);
/* Allocates and fills a problem with the case's data distributions (docs/CASES.md "Data (seed 42)") from a
 * seeded generator; `seed` replaces the case seed. Returns NULL if memory runs out. */
dsops_sfa_problem *dsops_sfa_problem_make(const dsops_sfa_case *c, uint64_t seed);
void dsops_sfa_problem_free(dsops_sfa_problem *p);

/* One lightning_indexer case (V3.2 configuration with cmp_ratio 1, V4 configuration with cmp_ratio 4 over
 * compressed keys, or the AscendC example). Sequences are uniform: S tokens each. */
typedef struct dsops_li_case {
    const char *name;        /* e.g. "v32_li_int8_b4_s2_kv64k" */
    int B, S;
    int seqused[128];        /* seqused_kv per sequence (B entries) */
    int NI, DI, K, BS;       /* indexer heads, head dim, top-k width, block size */
    int cmp_ratio;
    int int8;                /* 1: int8 variant, 0: bf16 variant (or fp8 when fp8 is set) */
    int fp8;                 /* 1: fp8 variant on DeepGEMM's paged key layout (one buffer, two views) */
    int with_scores;         /* topk_scores requested */
    int logits_len;          /* > 0: the logits output [T, logits_len] requested */
    int ties;                /* every key row is a copy of one of 4 rows: scores tie in groups of thousands */
    int ci;
    const char *ci_variant;
} dsops_li_case;

typedef struct dsops_li_problem {
    dsops_li_case c;
    dsops_lightning_indexer_args args;
    int64_t T, NB, MB;
    int64_t scored;          /* sum over tokens of visible keys n_t */
    double ops;              /* 2 * NI * DI * scored (GOP for int8, GFLOP for bf16) */
    double key_bytes;        /* key bytes read: scored * (DI * elem + scale bytes) */
    void *buffers[16];
    int nbuffers;
} dsops_li_problem;

const dsops_li_case *dsops_li_cases(int *count);
const dsops_li_case *dsops_li_case_find(const char *name);
/* Data per docs/CASES.md, chosen by the case name's prefix: "lightning_indexer, V3.2 configuration" (int8:
 * int8(N(0,1)) values with fp16 scales max(fp16(amax/127), 1e-3) and requantisation; weights fp16(N(0,1));
 * bf16: N(0,1) bf16), the V4 configuration (Q8 of N(0,1) vectors, fp16 scales, weights fp16(0.1 N(0,1)))
 * or the AscendC example (uniform int8, scales U(0,10), weights U(0,0.01)); fp8 cases take DeepGEMM's recipe
 * (queries e4m3(bf16(N(0,1))), keys e4m3(x / s) with s = max(amax, 1e-4) / 448 per key, weights fp32 N(0,1)). */
dsops_li_problem *dsops_li_problem_make(const dsops_li_case *c, uint64_t seed);
void dsops_li_problem_free(dsops_li_problem *p);

/* One mla_prolog_v32 case (spec §4.1, docs/CASES.md "mla_prolog_v32"). Sequences are uniform: S tokens each,
 * and the caches hold kv tokens of every sequence including the call's (the call's tokens are positions
 * kv - S ... kv - 1). */
typedef struct dsops_mlap_case {
    const char *name;        /* e.g. "v32_mla_prolog_int8_b4_s2_kv1k" */
    int B, S;                /* sequences, query tokens per sequence */
    int kv;                  /* tokens per sequence the caches hold (seqused_kv) */
    int H, Q, N, Dqn, Dc, BS;  /* hidden, q_lora_rank, heads, nope head dim, latent, block size (Dr = 64) */
    int int8_wq_b;           /* 1: int8 wq_b with per-channel scales, 0: bf16 wq_b */
    dsops_kv_layout layout;
    int ci;                  /* 1 if the case fits the CI budget of docs/CASES.md */
    const char *ci_variant;  /* for ci == 0: the name of its scaled-down "_ci" case */
} dsops_mlap_case;

/* A generated problem: args point into buffers owned by the problem. Caches start with random contents
 * in every row (so rows the call does not address can be checked for being untouched). */
typedef struct dsops_mlap_problem {
    dsops_mlap_case c;
    dsops_mla_prolog_v32_args args;  /* vendor parameters: eps_cq = eps_ckv = 1e-5, interleaved_in_half_out */
    int64_t T;               /* query tokens, B * S */
    int64_t NB, MB;          /* physical blocks, block-table columns */
    int32_t *block_table;    /* [B, MB] the random block table behind cache_index (-1 in unused columns) */
    int wq_b_int8;           /* wq_b is int8 (qr int8, qr_scale present) */
    double flops;            /* 2 * T * (H*Q + Q*N*(Dqn+64) + N*Dqn*Dc + H*(Dc+64)) */
    double weight_bytes;     /* bytes of wq_a, wq_b (+ scales), w_uk, wkv_a */
    void *buffers[32];       /* owned allocations (freed by dsops_mlap_problem_free) */
    int nbuffers;
} dsops_mlap_problem;

const dsops_mlap_case *dsops_mlap_cases(int *count);
const dsops_mlap_case *dsops_mlap_case_find(const char *name);
/* Data per docs/CASES.md "mla_prolog_v32" (seed 5): x U(-1,1) bf16; wq_a, wq_b, w_uk, wkv_a U(-0.1,0.1) bf16
 * (int8 wq_b: Q8 of the bf16 matrix per output channel, wq_b_scale its scales); gammas U(-1,1) bf16;
 * rope tables U(-0.1,0.1) bf16; cache_index[t] = slot of position kv - S + i through a random block
 * table. `seed` replaces the case seed. Returns NULL if memory runs out. */
dsops_mlap_problem *dsops_mlap_problem_make(const dsops_mlap_case *c, uint64_t seed);
void dsops_mlap_problem_free(dsops_mlap_problem *p);

/* One indexer_prolog_v32 case (spec §4.2, docs/CASES.md "indexer_prolog_v32"). Sequences are uniform: S tokens
 * each, and the key cache holds kv tokens of every sequence including the call's (the call's tokens are
 * positions kv - S ... kv - 1). */
typedef struct dsops_idxp_case {
    const char *name;        /* e.g. "v32_idx_prolog_int8_b4_s2_kv64k" */
    int B, S;                /* sequences, query tokens per sequence */
    int kv;                  /* tokens per sequence the cache holds */
    int H, Q, NI, DI, BS;    /* hidden, q_lora_rank, indexer heads, indexer head dim, block size */
    int int8;                /* 1: int8 variant (qr, idx_wq_b int8; int8 key cache), 0: bf16 variant */
    int hadamard;            /* bf16 variant: 1 if hadamard_q / hadamard_k are given (int8: always) */
    dsops_rope_mode rope_mode;
    int unit_weights_scale;  /* 1: weights_scale = 1 (vendor DIA prolog); 0: 1 / sqrt(64 * 128) */
    int ci;                  /* 1 if the case fits the CI budget of docs/CASES.md */
    const char *ci_variant;  /* for ci == 0: the name of its scaled-down "_ci" case */
} dsops_idxp_case;

/* A generated problem: args point into buffers owned by the problem. The caches start with random
 * contents in every row (so rows the call does not address can be checked for being untouched). */
typedef struct dsops_idxp_problem {
    dsops_idxp_case c;
    dsops_indexer_prolog_v32_args args;  /* vendor parameters (spec §5): ln_eps 1e-6, the case's rope mode */
    int64_t T;               /* query tokens, B * S */
    int64_t NB, MB;          /* physical blocks, block-table columns */
    int32_t *block_table;    /* [B, MB] the random block table behind cache_index (-1 in unused columns) */
    double flops;            /* 2 * T * (Q*NI*DI + H*DI + H*NI + NI*DI*DI + DI*DI) (GOP for int8) */
    double weight_bytes;     /* bytes of idx_wq_b (+ scales), idx_wk, weights_proj and the Hadamard matrices */
    void *buffers[32];       /* owned allocations (freed by dsops_idxp_problem_free) */
    int nbuffers;
} dsops_idxp_problem;

const dsops_idxp_case *dsops_idxp_cases(int *count);
const dsops_idxp_case *dsops_idxp_case_find(const char *name);
/* Data per docs/CASES.md "indexer_prolog_v32" (seed 7): x U(-1,1) bf16; int8: qr, idx_wq_b int8 uniform in
 * [-128, 128), qr_scale, idx_wq_b_scale U(-1,1) fp32; bf16: qr, idx_wq_b U(-1,1) bf16; idx_wk,
 * weights_proj U(-1,1) bf16; ln_gamma_k 1, ln_beta_k 0 (bf16); rope tables cos / sin of random angles in
 * [0, 2pi) (bf16, element by element); Hadamard matrices U(-1,1) bf16; caches random in every row (int8
 * uniform with fp16 scales U(-1,1), or bf16 U(-1,1)); cache_index[t] = slot of position kv - S + i through
 * a random block table. `seed` replaces the case seed. Returns NULL if memory runs out. */
dsops_idxp_problem *dsops_idxp_problem_make(const dsops_idxp_case *c, uint64_t seed);
void dsops_idxp_problem_free(dsops_idxp_problem *p);


/* One sparse_attention_v32 case (spec §4.5, docs/CASES.md "sparse_attention_v32"): the fused V3.2 attention
 * layer. Sequence b has S query tokens (or S_each[b] when any S_each entry is nonzero), which are the
 * positions seqused[b] - S ... seqused[b] - 1 of the sequence: the caches hold the earlier positions
 * (the history) and the call writes its own rows at cache_index[t] = slot(b, position), so every token
 * sees its own key. */
typedef struct dsops_dia_case {
    const char *name;        /* e.g. "v32_dia_b4_s1_mixed" */
    int B, S;                /* sequences, query tokens per sequence */
    int S_each[128];         /* optional per-sequence token counts (all zero: S for every sequence) */
    int seqused[128];        /* seqused_kv per sequence, the call's tokens included (>= its token count) */
    int table_width;         /* block-table columns MB (0: the most blocks any sequence needs) */
    int H, Q, N, Dqn, Dc;    /* hidden, q_lora_rank, heads, nope head dim, latent (Dr = 64) */
    int NI, DI, K, BS;       /* indexer heads, indexer head dim, top-k width, block size */
    int int8;                /* 1: int8 variant (int8 wq_b, idx_wq_b and indexer cache, Hadamard matrices);
                              * 0: bf16 variant (bf16 weights and indexer cache, no Hadamard) */
    dsops_kv_layout layout;
    int ci;                  /* 1 if the case fits the CI budget of docs/CASES.md */
    const char *ci_variant;  /* for ci == 0: the name of its scaled-down "_ci" case */
} dsops_dia_case;

/* A generated problem: args point into buffers owned by the problem (out, topk_indices and lse are all
 * present). Parameters: the dsops V3.2 defaults of dsops_sparse_attention_v32_init, topk = K; the bf16
 * variant has the indexer prolog of the vendor DIA op (no Hadamard, weights_scale 1). */
typedef struct dsops_dia_problem {
    dsops_dia_case c;
    dsops_sparse_attention_v32_args args;
    int64_t T;               /* query tokens */
    int64_t NB, MB;          /* physical blocks, block-table columns */
    int32_t *block_table;    /* [B, MB] the random block table (-1 in unused columns) */
    int64_t visible;         /* sum over tokens of the visible keys L_t (keys the indexer scores) */
    int64_t attended;        /* sum over tokens of min(K, L_t) (keys the attention reads) */
    double flops_mla;        /* 2 T (H Q + Q N (Dqn+64) + N Dqn Dc + H (Dc+64))        (GOP where int8) */
    double flops_idx;        /* 2 T (Q NI DI + H DI + H NI) (+ 2 T (NI+1) DI DI with Hadamard matrices) */
    double flops_li;         /* 2 NI DI visible */
    double flops_sfa;        /* 2 N attended (Dc + 64 + Dc) */
    double flops;            /* the sum of the four */
    double weight_bytes;     /* bytes of the weights of both prologs */
    double cache_bytes;      /* cache bytes read: visible indexer rows + attended latent rows */
    void *buffers[48];       /* owned allocations (freed by dsops_dia_problem_free) */
    int nbuffers;
} dsops_dia_problem;

const dsops_dia_case *dsops_dia_cases(int *count);
const dsops_dia_case *dsops_dia_case_find(const char *name);
/* Data per docs/CASES.md "sparse_attention_v32" (seed 42): x U(-1,1) bf16; wq_a, wq_b, w_uk, wkv_a
 * U(-0.1,0.1) bf16 (int8 wq_b: Q8 per output channel); gamma_cq, gamma_ckv U(-1,1) bf16; idx_wq_b U(-1,1)
 * bf16 (int8: int8 uniform in [-128, 128) with scales U(-1,1)); idx_wk, weights_proj U(-1,1) bf16;
 * LayerNorm gamma 1, beta 0; rope tables U(-0.1,0.1) bf16; int8 variant: the normalised Sylvester Hadamard
 * matrices (bf16; U(-1,1) when DI is not a power of two). Caches random in every row, consistent with
 * the layout: latent U(-1,1) (int8 layouts quantised per 128-group), rope U(-1,1); indexer keys U(-1,1)
 * bf16, or their Q8 (spec §2.7) with fp16 scales. Block tables are a random permutation of the blocks.
 * `seed` replaces the case seed. Returns NULL if memory runs out or the case is malformed. */
dsops_dia_problem *dsops_dia_problem_make(const dsops_dia_case *c, uint64_t seed);
void dsops_dia_problem_free(dsops_dia_problem *p);

/* The arguments of the four stand-alone operators that make up a sparse_attention_v32 call (spec §4.5
 * steps 1-4), over the fused arguments `a`: weights, caches, block table, out and lse are a's; the
 * intermediates (q_nope, q_rope, qr, qr_scale, q_idx, q_idx_scale, weights and the top-k indices) live in
 * buffers owned by the stages. The stage arguments carry no prepared objects. Returns NULL if memory runs
 * out or `a` lacks a required weight. */
typedef struct dsops_dia_stages {
    dsops_mla_prolog_v32_args mla;
    dsops_indexer_prolog_v32_args idx;
    dsops_lightning_indexer_args li;
    dsops_sparse_flash_attention_v32_args sfa;
    void *buffers[8];
    int nbuffers;
} dsops_dia_stages;

dsops_dia_stages *dsops_dia_stages_make(const dsops_sparse_attention_v32_args *a);
void dsops_dia_stages_free(dsops_dia_stages *s);


/* ---- DeepSeek-V4 case families (docs/CASES.md "V4") ---------------------------------------------------
 * Every case carries the vendor's published time (vendor_us, 0 when none) and the vendor's label
 * ("PyPTO" or "AscendC", NULL when none) so that the benchmark prints them beside dsops's. */

/* One hc_pre case (spec §3.1). */
typedef struct dsops_hcpre_case {
    const char *name;        /* e.g. "v4_hc_pre_b64_s2" */
    int T, HC, H;
    int well_conditioned;    /* 1: AscendC data (x U(0,2), hc_fn U(0, 1/(4H)), scale/base U(0,2)): compare comb;
                              * 0: PyPTO data (everything U(-1,1)): comb is ill-conditioned, not compared */
    double vendor_us;
    const char *vendor;
    int ci;
    const char *ci_variant;
} dsops_hcpre_case;

typedef struct dsops_hcpre_problem {
    dsops_hcpre_case c;
    dsops_hc_pre_args args;  /* V4 defaults; pre present */
    double flops;            /* 2 T M HC H (the 24-mix reduction) */
    void *buffers[16];
    int nbuffers;
} dsops_hcpre_problem;

const dsops_hcpre_case *dsops_hcpre_cases(int *count);
const dsops_hcpre_case *dsops_hcpre_case_find(const char *name);
dsops_hcpre_problem *dsops_hcpre_problem_make(const dsops_hcpre_case *c, uint64_t seed);
void dsops_hcpre_problem_free(dsops_hcpre_problem *p);

/* One hc_post case (spec §3.2). */
typedef struct dsops_hcpost_case {
    const char *name;        /* e.g. "v4_hc_post_bench_t128" */
    int T, HC, H;
    dsops_dtype x_dtype;     /* x, residual and out: bf16 or fp32 */
    dsops_dtype post_dtype;  /* post and comb: bf16 or fp32 */
    float amplitude;         /* data U(-amplitude, amplitude) */
    double vendor_us;
    const char *vendor;
    int ci;
    const char *ci_variant;
} dsops_hcpost_case;

typedef struct dsops_hcpost_problem {
    dsops_hcpost_case c;
    dsops_hc_post_args args;
    double bytes;            /* bytes read and written (x, residual, post, comb, out) */
    void *buffers[16];
    int nbuffers;
} dsops_hcpost_problem;

const dsops_hcpost_case *dsops_hcpost_cases(int *count);
const dsops_hcpost_case *dsops_hcpost_case_find(const char *name);
dsops_hcpost_problem *dsops_hcpost_problem_make(const dsops_hcpost_case *c, uint64_t seed);
void dsops_hcpost_problem_free(dsops_hcpost_problem *p);

/* One mla_prolog_v4 case (spec §3.3, docs/CASES.md "mla_prolog_v4"; data seed 5). */
typedef struct dsops_mla4_case {
    const char *name;        /* e.g. "v4_mla_prolog_int8_t16" */
    int T, H, Q, N, D;
    int int8;                /* 1: int8 wq_b (Q8 per output channel of the bf16 draw) */
    double vendor_us;
    const char *vendor;
    int ci;
    const char *ci_variant;
} dsops_mla4_case;

typedef struct dsops_mla4_problem {
    dsops_mla4_case c;
    dsops_mla_prolog_v4_args args;  /* V4 defaults */
    double flops;            /* 2 T (H Q + Q N D + H D) (the GEMMs) */
    double weight_bytes;
    void *buffers[24];
    int nbuffers;
} dsops_mla4_problem;

const dsops_mla4_case *dsops_mla4_cases(int *count);
const dsops_mla4_case *dsops_mla4_case_find(const char *name);
dsops_mla4_problem *dsops_mla4_problem_make(const dsops_mla4_case *c, uint64_t seed);
void dsops_mla4_problem_free(dsops_mla4_problem *p);

/* One indexer_prolog_v4 case (spec §3.5, docs/CASES.md "indexer_prolog_v4"; data seed 42; vendor parameters:
 * rope_inverse = 1). */
typedef struct dsops_idxp4_case {
    const char *name;        /* e.g. "v4_idx_prolog_t128" */
    int T, H, Q, NI, DI;
    double vendor_us;
    const char *vendor;
    int ci;
    const char *ci_variant;
} dsops_idxp4_case;

typedef struct dsops_idxp4_problem {
    dsops_idxp4_case c;
    dsops_indexer_prolog_v4_args args;
    double flops;            /* 2 T (Q NI DI + H NI + NI DI DI) */
    double weight_bytes;
    void *buffers[24];
    int nbuffers;
} dsops_idxp4_problem;

const dsops_idxp4_case *dsops_idxp4_cases(int *count);
const dsops_idxp4_case *dsops_idxp4_case_find(const char *name);
dsops_idxp4_problem *dsops_idxp4_problem_make(const dsops_idxp4_case *c, uint64_t seed);
void dsops_idxp4_problem_free(dsops_idxp4_problem *p);

/* One compressor case (spec §3.4, docs/CASES.md "compressor"). */
typedef enum dsops_cmp_variant { DSOPS_CMP_C4A = 0, DSOPS_CMP_C4LI = 1, DSOPS_CMP_C128A = 2 } dsops_cmp_variant;

typedef struct dsops_cmp_case {
    const char *name;        /* e.g. "v4_cmp_c4a_b64_s2_sp255" */
    dsops_cmp_variant variant;  /* D, R, C, rotate: c4a 512/4/2/no, c4li 128/4/2/yes, c128a 512/128/1/no */
    int B;
    int S_each[8];           /* tokens per sequence; a single entry S_each[0] with the rest 0 is uniform */
    int start_pos;           /* the same for every sequence */
    int H;
    int vendor_data;         /* 1: the vendor's data and tables (rand data, zero states, the ring / pair block
                              * tables of docs/CASES.md, row_per_seq, NO = min(B S, B S / R + B));
                              * 0: the dsops data (weights U(-1,1) H^-0.5, x N(0,1), states kv 0 / score -Inf,
                              * packed, one block per 128 positions) */
    int norm_fp32;           /* norm_weight fp32 (else bf16) */
    int ring;                /* dsops data: every logical block of a sequence maps to one physical block */
    double vendor_us;
    const char *vendor;
    int ci;
    const char *ci_variant;
} dsops_cmp_case;

typedef struct dsops_cmp_problem {
    dsops_cmp_case c;
    dsops_compressor_args args;
    int64_t T, NO;
    int64_t entries;         /* entries the call writes (sum of count_b) */
    double flops;            /* 2 T H 2 C D (the projections) */
    double weight_bytes;
    void *buffers[32];
    int nbuffers;
} dsops_cmp_problem;

const dsops_cmp_case *dsops_cmp_cases(int *count);
const dsops_cmp_case *dsops_cmp_case_find(const char *name);
dsops_cmp_problem *dsops_cmp_problem_make(const dsops_cmp_case *c, uint64_t seed);
void dsops_cmp_problem_free(dsops_cmp_problem *p);


/* One sas case (spec §3.7, docs/CASES.md "sas: swa, cfa, scfa"): N 64, D 512, window 128, BS 128 in both pools unless named. */
typedef struct dsops_sas_case {
    const char *name;        /* e.g. "v4_scfa_b64_s2_kv8k" */
    dsops_sas_variant variant;
    int B, S;                /* sequences, query tokens per sequence (uniform unless S_each is set) */
    int S_each[8];           /* optional per-sequence token counts (all zero: S for every sequence) */
    int seqused[128];        /* seqused_kv per sequence */
    int N, D, K;             /* heads, latent width, top-k width (scfa) */
    int BSW, BSC;            /* block sizes of the window and compressed pools */
    int with_sinks, with_lse;
    int vendor_count;        /* scfa: cmp_topk_length = the vendor's count (docs/OPERATORS.md §3.7), else absent */
    int model1_fp8;          /* both pools as FlashMLA's MODEL1 FP8 blocks of the same bf16 rows (D 512) */
    uint64_t seed;           /* data seed of docs/CASES.md (42, or 0 for cfa) */
    double vendor_us;
    const char *vendor;
    int ci;
    const char *ci_variant;
} dsops_sas_case;

typedef struct dsops_sas_problem {
    dsops_sas_case c;
    dsops_sas_args args;     /* the variant's defaults (dsops_sas_init, V4-Flash) */
    int64_t T;
    int64_t attended;        /* sum over tokens of the key-list lengths */
    double flops;            /* 2 N attended (D + D): QK and PV */
    double kv_bytes;         /* bytes of the gathered rows: attended * D * 2 */
    void *buffers[24];
    int nbuffers;
} dsops_sas_problem;

const dsops_sas_case *dsops_sas_cases(int *count);
const dsops_sas_case *dsops_sas_case_find(const char *name);
/* Data per docs/CASES.md "sas: swa, cfa, scfa": q, ori_kv, cmp_kv, sinks U(-1,1) (bf16 / fp32); block tables a random
 * permutation of each pool's blocks; scfa indices as docs/CASES.md describes (the same row for every token of
 * a sequence, not causally restricted). `seed` replaces the case seed. NULL if memory runs out. */
dsops_sas_problem *dsops_sas_problem_make(const dsops_sas_case *c, uint64_t seed);
void dsops_sas_problem_free(dsops_sas_problem *p);

#endif
