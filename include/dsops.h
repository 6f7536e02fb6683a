/*
 * dsops — fused inference operators of the DeepSeek sparse-attention models, for CPUs.
 *
 * The whole public API is in this header. Semantics of every operator are those of the
 * specification, docs/OPERATORS.md; this header repeats what a caller needs to use them. Section
 * numbers (§3.6) and rule IDs (V1-V10 validation, A1-A7 attention core) in this header and in the
 * sources are that document's anchors; named cases (v32_sfa_b4_s2_int8_kv64k, ...) are in docs/CASES.md.
 *
 * Conventions
 *  - Every call returns a dsops_status. On error, dsops_last_error() returns a message for the
 *    calling thread that names the offending field and value. An operator that fails has written
 *    nothing and read nothing outside the extents its tensors declare.
 *  - Tensors are views (dsops_tensor): data pointer, dtype, rank, shape and strides in elements.
 *    A tensor whose data pointer is NULL is "absent" (allowed only for optional tensors).
 *    Unless an operator says otherwise, the innermost dimension must have stride 1; the outer
 *    strides are free (so q_nope / q_rope may be views into one [T, N, Dc+Dr] tensor, and
 *    key_nope / key_rope views into one [NB, BS, Dc+Dr] cache).
 *  - A context carries the thread count, the instruction-set cap and a reusable scratch arena.
 *    One context serves one call at a time: a call on a context that another thread's call holds
 *    returns DSOPS_ERR_BUSY at once (nothing read or written); use one context per caller thread.
 *    Passing NULL as context uses a temporary context with the environment defaults.
 *  - Results are bitwise identical for identical inputs, instruction-set tier and any thread count.
 */
#ifndef DSOPS_H
#define DSOPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define DSOPS_API
#else
#define DSOPS_API __attribute__((visibility("default")))
#endif

#define DSOPS_VERSION_MAJOR 0
#define DSOPS_VERSION_MINOR 1
#define DSOPS_VERSION_PATCH 0

/* "MAJOR.MINOR.PATCH" of the library actually linked. */
DSOPS_API const char *dsops_version(void);

/* ---------------------------------------------------------------------------------------------
 * Status and errors
 * ------------------------------------------------------------------------------------------- */

typedef enum dsops_status {
    DSOPS_OK = 0,
    DSOPS_ERR_NULL = 1,        /* a required tensor or pointer is NULL */
    DSOPS_ERR_SHAPE = 2,       /* wrong rank, mismatched extents, zero extent, overflow, stride */
    DSOPS_ERR_DTYPE = 3,       /* dtype not allowed for this tensor */
    DSOPS_ERR_PARAM = 4,       /* scalar parameter out of range (non-finite scale, bad enum...) */
    DSOPS_ERR_INDEX = 5,       /* sequence descriptor, block table or slot out of range */
    DSOPS_ERR_ALIAS = 6,       /* an output overlaps another output or an input */
    DSOPS_ERR_NOMEM = 7,       /* scratch allocation failed, or the context's scratch limit refused it */
    DSOPS_ERR_UNSUPPORTED = 8, /* valid request this build cannot serve */
    DSOPS_ERR_BUSY = 9         /* the context is serving a call of another thread */
} dsops_status;

/* Upper-case name of a status ("DSOPS_ERR_INDEX"); "DSOPS_UNKNOWN_STATUS" for other values. */
DSOPS_API const char *dsops_status_name(dsops_status status);

/* Message of the last failed call on this thread ("" after a successful call). */
DSOPS_API const char *dsops_last_error(void);

/* ---------------------------------------------------------------------------------------------
 * Data types and tensor views
 * ------------------------------------------------------------------------------------------- */

typedef enum dsops_dtype {
    DSOPS_DTYPE_INVALID = 0,
    DSOPS_BF16 = 1,
    DSOPS_FP16 = 2,
    DSOPS_FP32 = 3,
    DSOPS_INT8 = 4,
    DSOPS_INT32 = 5,
    DSOPS_INT64 = 6,
    DSOPS_UINT8 = 7,
    DSOPS_FP8_E4M3 = 8 /* e4m3fn: S.EEEE.MMM, bias 7, no infinities, S.1111.111 NaN, largest 448 */
} dsops_dtype;
#define DSOPS_DTYPE_LAST DSOPS_FP8_E4M3

/* Bytes per element (0 for an invalid dtype). */
DSOPS_API size_t dsops_dtype_size(dsops_dtype dtype);
/* Lower-case name ("bf16", "int8", ...); "invalid" otherwise. */
DSOPS_API const char *dsops_dtype_name(dsops_dtype dtype);

#define DSOPS_MAX_DIMS 6

typedef struct dsops_tensor {
    void *data;                      /* first element; NULL = absent */
    dsops_dtype dtype;
    int ndim;                        /* 0 ... DSOPS_MAX_DIMS */
    int64_t shape[DSOPS_MAX_DIMS];
    int64_t stride[DSOPS_MAX_DIMS];  /* in elements, may be any value >= 0 */
} dsops_tensor;

/* A dense row-major view of `data` with the given shape (strides filled in). */
DSOPS_API dsops_tensor dsops_tensor_make(void *data, dsops_dtype dtype, int ndim, const int64_t *shape);

/* ---------------------------------------------------------------------------------------------
 * Number conversions (round to nearest, ties to even; NaN stays a quiet NaN with its sign;
 * fp16 keeps subnormals, |v| >= 65520 gives +-Inf)
 * ------------------------------------------------------------------------------------------- */

DSOPS_API void dsops_fp32_to_bf16(const float *src, uint16_t *dst, size_t n);
DSOPS_API void dsops_bf16_to_fp32(const uint16_t *src, float *dst, size_t n);
DSOPS_API void dsops_fp32_to_fp16(const float *src, uint16_t *dst, size_t n);
DSOPS_API void dsops_fp16_to_fp32(const uint16_t *src, float *dst, size_t n);

/* ---------------------------------------------------------------------------------------------
 * Instruction-set tiers and the context
 * ------------------------------------------------------------------------------------------- */

typedef enum dsops_isa {
    DSOPS_ISA_SCALAR = 0,      /* portable C */
    DSOPS_ISA_AVX2 = 1,        /* AVX2 + FMA + F16C */
    DSOPS_ISA_AVX512 = 2,      /* AVX-512 F + BW + DQ + VL */
    DSOPS_ISA_AVX512BF16 = 3   /* + AVX512_BF16 + AVX512_VNNI */
} dsops_isa;

#define DSOPS_ISA_COUNT 4

/* Highest tier this CPU and OS support (CPUID + XGETBV), detected once. */
DSOPS_API dsops_isa dsops_isa_detected(void);
/* "scalar", "avx2", "avx512", "avx512bf16". */
DSOPS_API const char *dsops_isa_name(dsops_isa isa);
/* Parses a tier name; DSOPS_ERR_PARAM for an unknown name, DSOPS_ERR_NULL for a NULL name or isa. */
DSOPS_API dsops_status dsops_isa_from_name(const char *name, dsops_isa *isa);

typedef struct dsops_context dsops_context;

/* The most threads a context takes (DSOPS_NUM_THREADS, dsops_context_set_threads, --threads alike). */
#define DSOPS_MAX_THREADS 4096

/* New context: threads from DSOPS_NUM_THREADS (else the OpenMP default), ISA cap from DSOPS_ISA
 * (else the detected tier), scratch limit from DSOPS_SCRATCH_LIMIT (else the default below). A bad
 * environment value is an error (DSOPS_ERR_PARAM). */
DSOPS_API dsops_status dsops_context_create(dsops_context **ctx);
DSOPS_API void dsops_context_destroy(dsops_context *ctx);
/* 1 <= threads <= DSOPS_MAX_THREADS, else DSOPS_ERR_PARAM. */
DSOPS_API dsops_status dsops_context_set_threads(dsops_context *ctx, int threads);
DSOPS_API int dsops_context_threads(const dsops_context *ctx);
/* Caps the tier used by this context; a cap above the detected tier is lowered to it. */
DSOPS_API dsops_status dsops_context_set_isa(dsops_context *ctx, dsops_isa cap);
/* The tier calls on this context actually use. */
DSOPS_API dsops_isa dsops_context_isa(const dsops_context *ctx);
/* The most bytes of scratch the context may hold (all its areas together); a call that would make it
 * hold more returns DSOPS_ERR_NOMEM before allocating or writing anything. The default is half the
 * machine's physical memory; DSOPS_SCRATCH_LIMIT sets it in bytes, with an optional K, M or G suffix
 * (powers of 1024). A limit of 0 is DSOPS_ERR_PARAM. Lowering the limit frees nothing: it applies when
 * a call next has to grow an area. */
DSOPS_API dsops_status dsops_context_set_scratch_limit(dsops_context *ctx, size_t bytes);
DSOPS_API size_t dsops_context_scratch_limit(const dsops_context *ctx);

/* ---------------------------------------------------------------------------------------------
 * Presets and shared enums
 * ------------------------------------------------------------------------------------------- */

typedef enum dsops_preset {
    DSOPS_PRESET_V32 = 0,       /* DeepSeek-V3.2-Exp */
    DSOPS_PRESET_V4_FLASH = 1,
    DSOPS_PRESET_V4_PRO = 2
} dsops_preset;

/* How attention probabilities are rounded (spec §2.10). */
typedef enum dsops_p_mode {
    DSOPS_P_NORMALISED = 0,  /* P = bf16(w / den) after the full softmax of the row (default) */
    DSOPS_P_TILED = 1,       /* flash-style: un-normalised bf16(w) per tile of p_tile entries */
    DSOPS_P_FP32 = 2         /* P = w / den kept in fp32 */
} dsops_p_mode;

/* Byte layout of the V3.2 latent cache (spec §4.1, §4.4). */
typedef enum dsops_kv_layout {
    DSOPS_KV_SPLIT_BF16 = 0,  /* key_nope [NB,BS,Dc] bf16 + key_rope [NB,BS,Dr] bf16 */
    DSOPS_KV_SPLIT_INT8 = 1,  /* key_nope [NB,BS,Dc] int8 + key_nope_scale [NB,BS,Dc/128] fp32 + key_rope bf16 */
    DSOPS_KV_PACKED_INT8 = 2, /* kv_packed [NB,BS,656] uint8: 512 int8 | 64 bf16 rope | 4 fp32 scales (dsops's
                                 own row, not FlashMLA's; formerly DSOPS_KV_PACKED656) */
    DSOPS_KV_FLASHMLA_FP8 = 3 /* kv_packed [NB,BS,656] uint8, FlashMLA's V32 FP8 row (spec §2.12):
                                 512 e4m3 | 4 fp32 power-of-two scales | 64 bf16 rope */
} dsops_kv_layout;
#define DSOPS_KV_PACKED656 DSOPS_KV_PACKED_INT8 /* the former name, kept for existing callers */

/* ---------------------------------------------------------------------------------------------
 * Shared primitives (spec §2.3 - §2.8)
 * ------------------------------------------------------------------------------------------- */

/* How a 64-element slice is rotated (spec §2.5.1). */
typedef enum dsops_rope_mode {
    DSOPS_ROPE_INTERLEAVED = 0,             /* pairs (2j, 2j+1) */
    DSOPS_ROPE_HALF = 1,                    /* pairs (j, j+32), NeoX */
    DSOPS_ROPE_INTERLEAVED_IN_HALF_OUT = 2  /* pairs (2j, 2j+1) in, real parts to j, imaginary to j+32 */
} dsops_rope_mode;

/* Layout of rotary tables (spec §2.5.2). */
typedef enum dsops_rope_layout {
    DSOPS_ROPE_PAIRS = 0,   /* c[2j] = c[2j+1] = cos(a_j): for interleaved */
    DSOPS_ROPE_HALVES = 1   /* c[j] = c[j+32] = cos(a_j): for half and interleaved_in_half_out */
} dsops_rope_layout;

/* rmsnorm: y = bf16(x / sqrt(mean(x^2) + eps) * weight). y may alias x exactly. */
typedef struct dsops_rmsnorm_args {
    dsops_tensor x;       /* [T, W] bf16 */
    dsops_tensor weight;  /* [W] bf16 or fp32, optional (absent: no weight) */
    dsops_tensor y;       /* [T, W] bf16, out */
    float eps;            /* finite, >= 0; default 1e-6 */
} dsops_rmsnorm_args;

DSOPS_API dsops_status dsops_rmsnorm_init(dsops_rmsnorm_args *args, dsops_preset preset);
DSOPS_API dsops_status dsops_rmsnorm(dsops_context *ctx, const dsops_rmsnorm_args *args);

/* rope_tables: cos / sin tables of 64 values per position; angle a_j = fp32(fp32(p) * freq_j) with
 * freq_j = 1 / base^(2j/64), optionally YaRN-corrected (spec §2.5.2). */
typedef struct dsops_rope_tables_args {
    dsops_tensor positions;        /* [T] int64 >= 0 */
    dsops_tensor cos;              /* [T, 64] bf16 or fp32, out */
    dsops_tensor sin;              /* [T, 64] bf16 or fp32 (same dtype as cos), out */
    double base;                   /* theta > 0 */
    int yarn;                      /* 1: apply YaRN with the four values below */
    double yarn_factor;            /* > 0 */
    double yarn_original_len;      /* > 0 */
    double yarn_beta_fast, yarn_beta_slow;  /* > 0 */
    dsops_rope_layout layout;
} dsops_rope_tables_args;

/* V3.2: base 10000, YaRN 40 / 4096 / 32 / 1, halves. V4 presets: the compressed layers' tables,
 * base 160000, YaRN 16 / 65536 / 32 / 1, pairs (ratio-0 layers: set yarn = 0, base = 10000). */
DSOPS_API dsops_status dsops_rope_tables_init(dsops_rope_tables_args *args, dsops_preset preset);
DSOPS_API dsops_status dsops_rope_tables(dsops_context *ctx, const dsops_rope_tables_args *args);

/* rope_apply: y[t,h,offset+e] = bf16(rot(x[t,h,offset:offset+64], cos[t], sin[t])[e]); every other
 * element is copied. y may alias x exactly. */
typedef struct dsops_rope_apply_args {
    dsops_tensor x;         /* [T, N, W] bf16 */
    dsops_tensor rope_cos;  /* [T, 64] bf16 or fp32 */
    dsops_tensor rope_sin;  /* [T, 64] bf16 or fp32 */
    dsops_tensor y;         /* [T, N, W] bf16, out */
    int rope_offset;        /* 0 <= offset <= W - 64 */
    dsops_rope_mode rope_mode;
    int rope_inverse;       /* 1: use -sin (inverse rotation) */
} dsops_rope_apply_args;

DSOPS_API dsops_status dsops_rope_apply(dsops_context *ctx, const dsops_rope_apply_args *args);

/* hadamard_matrix: fills m ([d, d] bf16 or fp32, d a power of two) with the normalised Sylvester
 * matrix (-1)^popcount(i & j) / sqrt(d). ctx as for every call (NULL: the environment defaults). */
DSOPS_API dsops_status dsops_hadamard_matrix(dsops_context *ctx, const dsops_tensor *m);

/* quant_q8: per group of G values, symmetric int8 (spec §2.7): scale = 1 / fp32(127 / amax),
 * q = rint(v * fp32(127 / amax)); all-zero groups give q = 0, scale 0; non-finite groups q = 0, scale NaN. */
typedef struct dsops_quant_q8_args {
    dsops_tensor x;      /* [R, W] bf16 or fp32 */
    dsops_tensor q;      /* [R, W] int8, out */
    dsops_tensor scale;  /* [R, W / G] fp32, out */
    int group;           /* G >= 1, W % G == 0 */
} dsops_quant_q8_args;

DSOPS_API dsops_status dsops_quant_q8(dsops_context *ctx, const dsops_quant_q8_args *args);

/* cache_store: for each t with cache_index[t] >= 0, row cache_index[t] of the cache viewed as
 * [NB * BS, W] receives src[t] (bf16 cache), its Q8 groups and scales (int8 cache) or its FlashMLA FP8 row
 * (uint8 cache, spec §2.12: [NB, BS, 656] for W 576, MODEL1 blocks [NB, BS, 584] for W 512). Duplicate or
 * out-of-range slots are errors found before anything is written. */
typedef struct dsops_cache_store_args {
    dsops_tensor src;          /* [T, W] bf16 */
    dsops_tensor cache_index;  /* [T] int64 */
    dsops_tensor cache;        /* [NB, BS, W] bf16 or int8; uint8 FP8 rows [NB, BS, 656 | 584]; in-out */
    dsops_tensor cache_scale;  /* [NB, BS, W / G] fp32 or fp16 (int8 cache only; [NB, BS] when G = W), in-out */
    int group;                 /* G for int8 caches (W % G == 0); 0 means W */
} dsops_cache_store_args;

DSOPS_API dsops_status dsops_cache_store(dsops_context *ctx, const dsops_cache_store_args *args);

/* FRACTAL_NZ <-> ND (spec §2.11), the blocked layout in which Ascend NPUs keep matmul weights. For the last two
 * dimensions [R, C] of an ND tensor with e-byte elements, C0 = 32 / e (16 for bf16 / fp16, 32 for int8 / uint8,
 * 8 for fp32 / int32, 4 for int64): the NZ tensor is [..., ceil(C / C0), ceil(R / 16) * 16, C0] and holds ND
 * element (..., r, c) at (..., c / C0, r, c % C0). The other NZ elements are padding: nd_to_fractal_nz writes
 * zeros there, fractal_nz_to_nd ignores them. Leading dimensions are the same in both tensors; any strides. */
typedef struct dsops_fractal_nz_args {
    dsops_tensor nd;  /* [..., R, C] */
    dsops_tensor nz;  /* [..., ceil(C / C0), ceil(R / 16) * 16, C0], the same dtype */
} dsops_fractal_nz_args;

/* Writes nz from nd. */
DSOPS_API dsops_status dsops_nd_to_fractal_nz(dsops_context *ctx, const dsops_fractal_nz_args *args);
/* Writes nd from nz. */
DSOPS_API dsops_status dsops_fractal_nz_to_nd(dsops_context *ctx, const dsops_fractal_nz_args *args);

/* FlashMLA's FP8 KV caches (spec §2.12), byte for byte: fp8_cache_quantize writes a cache from bf16 rows,
 * fp8_cache_dequantize writes the bf16 rows the cache stands for. Per token, the first D - 64 values are cut
 * into tiles; each tile's scale is the power of two 2^ceil(log2(max(amax / 448, 1e-4))) and its values are
 * stored as e4m3 (the "fn" format: no infinities, S.1111.111 is NaN, largest 448) of value / scale; the last
 * 64 values (rope) are kept as bf16. Dequantised: bf16(fp32(e4m3) * scale), rope copied. */
typedef enum dsops_fp8_cache_layout {
    DSOPS_FP8_CACHE_V32 = 0,   /* D 576, 4 tiles of 128; per token 656 B: 512 e4m3 | 4 fp32 scales | 64 bf16 */
    DSOPS_FP8_CACHE_MODEL1 = 1 /* D 512, 7 tiles of 64; per block: BS x (448 e4m3 | 64 bf16), then
                                  BS x (7 ue8m0 scales | 1 zero byte), then zero bytes to the block's end */
} dsops_fp8_cache_layout;

typedef struct dsops_fp8_cache_args {
    dsops_tensor kv;               /* [NB, BS, D] bf16: in for quantize, out for dequantize */
    dsops_tensor cache;            /* V32: [NB, BS, 656] uint8; MODEL1: [NB, BB] uint8 with BB >= BS * 584
                                      (FlashMLA: BS * 584 rounded up to a multiple of 576) */
    dsops_fp8_cache_layout layout; /* default V32 */
} dsops_fp8_cache_args;

/* Writes cache from kv (every byte of every block, padding zero). */
DSOPS_API dsops_status dsops_fp8_cache_quantize(dsops_context *ctx, const dsops_fp8_cache_args *args);
/* Writes kv from cache (padding bytes are not read). */
DSOPS_API dsops_status dsops_fp8_cache_dequantize(dsops_context *ctx, const dsops_fp8_cache_args *args);

/* ---------------------------------------------------------------------------------------------
 * sparse_flash_attention_v32 (spec §4.4)
 *
 * V3.2 sparse MLA attention in absorbed (MQA) form. Token t of sequence b (index i inside the
 * sequence, S_b tokens in this call) sees L = seqused_kv[b] - (S_b - 1 - i) cached tokens. It
 * attends to its top-k cached latents:
 *     cnt = min(K, max(L, 0), topk_length[t] if given)
 *     for j < cnt: idx = topk_indices[t][j] is used iff 0 <= idx < seqused_kv[b] (else skipped;
 *     duplicates count as often as they occur); its cache row is
 *     r = block_table[b][idx / BS] * BS + idx % BS
 *     key  K = [nope(r) ; rope(r)]  (Dqk = Dc + Dr), value V = nope(r)  (Dv = Dc), where an int8
 *     latent is dequantised as bf16(int8 * scale[group of 128]).
 * Per head h: s_e = fp32(dot(q_h, K_e) * softmax_scale); softmax in the chosen p_mode, with the sink
 * sinks[h] in the denominator when sinks is given; out[t,h] = bf16(sum_e P_e V_e);
 * lse[t,h] = max_e s_e + ln(sum_e exp(s_e - max)) (the sink excluded).
 * A token with no used index is "lonely": out = 0, lse = +Inf. A row (token, head) with keys whose logits
 * hold a NaN, reach +Inf or are all -Inf is "poisoned": out and lse are NaN (spec §2.10 A3).
 *
 * Errors: DSOPS_ERR_NULL (required tensor absent), _SHAPE (rank/extent; Dc % 128 for int8 layouts;
 * packed_int8 needs Dc = 512, Dr = 64), _DTYPE, _PARAM (non-finite softmax_scale, bad enum, p_tile < 1),
 * _INDEX (cu_seqlens_q not a valid partition of T, seqused_kv < 0, topk_length < 0, a used index whose
 * block-table column is >= MB or whose block is outside [0, NB)), _ALIAS (out / lse overlap an input
 * or each other), _NOMEM (scratch: about (K*(Dqk+Dv)*2 + N*K*6 + N*Dv*4) bytes per thread),
 * _UNSUPPORTED (implementation limits: N <= 2^20, Dc and Dr <= 65536, K <= 2^24).
 * ------------------------------------------------------------------------------------------- */

typedef struct dsops_sparse_flash_attention_v32_args {
    dsops_tensor q_nope;          /* [T, N, Dc] bf16 */
    dsops_tensor q_rope;          /* [T, N, Dr] bf16 */
    dsops_tensor key_nope;        /* [NB, BS, Dc] bf16 (split_bf16) or int8 (split_int8) */
    dsops_tensor key_nope_scale;  /* [NB, BS, Dc/128] fp32 (split_int8 only) */
    dsops_tensor key_rope;        /* [NB, BS, Dr] bf16 (split layouts) */
    dsops_tensor kv_packed;       /* [NB, BS, 656] uint8 (packed_int8 only) */
    dsops_tensor topk_indices;    /* [T, K] int32, logical token positions of the sequence */
    dsops_tensor topk_length;     /* [T] int32, optional */
    dsops_tensor sinks;           /* [N] fp32, optional: per-head sink logit (FlashMLA's attn_sink) */
    dsops_tensor block_table;     /* [B, MB] int32 */
    dsops_tensor cu_seqlens_q;    /* [B+1] int32 */
    dsops_tensor seqused_kv;      /* [B] int32 */
    dsops_tensor out;             /* [T, N, Dc] bf16, out */
    dsops_tensor lse;             /* [T, N] fp32, out, optional */
    dsops_tensor max_logits;      /* [T, N] fp32, out, optional: max_e s_e (-Inf lonely, NaN poisoned) */
    float softmax_scale;          /* finite; V3.2: 192^-0.5 * (0.1 ln 40 + 1)^2; vendor: 576^-0.5 */
    dsops_p_mode p_mode;          /* default normalised (vendor DIA golden: fp32) */
    int p_tile;                   /* tile length for DSOPS_P_TILED (>= 1), default 128 */
    dsops_kv_layout kv_layout;    /* default split_bf16 */
} dsops_sparse_flash_attention_v32_args;

/* Clears every tensor and fills the parameters with the preset's defaults. The V4 presets have no
 * such operator: DSOPS_ERR_PARAM (the struct is still filled with the V3.2 values). */
DSOPS_API dsops_status dsops_sparse_flash_attention_v32_init(dsops_sparse_flash_attention_v32_args *args,
                                                             dsops_preset preset);
DSOPS_API dsops_status dsops_sparse_flash_attention_v32(dsops_context *ctx,
                                                        const dsops_sparse_flash_attention_v32_args *args);

/* ---------------------------------------------------------------------------------------------
 * Prepared weights
 *
 * Operators with large linear maps (the prologs) run them through oneDNN matmuls. Packing a weight
 * for the matmul costs about as much as using it once, so a caller that runs a layer repeatedly
 * prepares its weights once (dsops_<op>_prepare) and passes the object in the args' `prepared`
 * member. A prepared object remembers the weight tensors it was made from (pointers, shapes, dtypes);
 * a call whose weights differ is rejected (DSOPS_ERR_PARAM). The weights' values must not change
 * while the object is used. Without a prepared object, each call packs the weights itself.
 * ------------------------------------------------------------------------------------------- */

typedef struct dsops_prepared dsops_prepared;

DSOPS_API void dsops_prepared_destroy(dsops_prepared *prepared);

/* ---------------------------------------------------------------------------------------------
 * mla_prolog_v32 (spec §4.1)
 *
 * Per token t: a = bf16(x wq_a^T); cq = bf16(RMSNorm(a; gamma_cq, eps_cq));
 *   bf16 wq_b: qb = bf16(cq wq_b^T), qr = cq
 *   int8 wq_b: (qr, qr_scale) = Q8(cq) per token; qb[n] = bf16((f32(qr . wq_b[n]) * qr_scale) * wq_b_scale[n])
 *   head h owns qb[h*(Dqn+Dr) ...]: q_nope[t,h] = bf16(qb_nope_h w_uk[h]) (absorbed, [Dc]);
 *   q_rope[t,h] = bf16(rot(qb_rope_h, rope_cos[t], rope_sin[t]));
 *   kva = bf16(x wkv_a^T); ckv = bf16(RMSNorm(kva[0:Dc]; gamma_ckv, eps_ckv));
 *   krope = bf16(rot(kva[Dc:Dc+64])); row cache_index[t] (if >= 0) of the kv caches receives ckv and
 *   krope in the chosen layout (int8 layouts: Q8 per 128 values of ckv).
 * Dr is 64. Errors: _NULL, _SHAPE (extents; Dc % 128 for int8 layouts; packed_int8: Dc 512; Q <= 131072
 * for int8 wq_b), _DTYPE, _PARAM (eps, enums, a prepared object made from other weights), _INDEX
 * (cache_index >= NB*BS or repeated among the non-negative values: nothing is written), _ALIAS, _NOMEM.
 * ------------------------------------------------------------------------------------------- */

typedef struct dsops_mla_prolog_v32_args {
    dsops_tensor x;               /* [T, H] bf16 */
    dsops_tensor wq_a;            /* [Q, H] bf16 */
    dsops_tensor gamma_cq;        /* [Q] bf16 or fp32 */
    dsops_tensor wq_b;            /* [N*(Dqn+64), Q] bf16 or int8 */
    dsops_tensor wq_b_scale;      /* [N*(Dqn+64)] fp32 (int8 wq_b only) */
    dsops_tensor w_uk;            /* [N, Dqn, Dc] bf16 */
    dsops_tensor wkv_a;           /* [Dc+64, H] bf16 */
    dsops_tensor gamma_ckv;       /* [Dc] bf16 or fp32 */
    dsops_tensor rope_cos;        /* [T, 64] bf16 or fp32 (halves tables for the V3.2 rope mode) */
    dsops_tensor rope_sin;        /* [T, 64] bf16 or fp32 */
    dsops_tensor cache_index;     /* [T] int64: global cache row, < 0 = do not write */
    dsops_tensor kv_cache;        /* [NB, BS, Dc] bf16 (split_bf16) or int8 (split_int8), in-out */
    dsops_tensor kv_scale_cache;  /* [NB, BS, Dc/128] fp32 (split_int8), in-out */
    dsops_tensor kr_cache;        /* [NB, BS, 64] bf16 (split layouts), in-out */
    dsops_tensor kv_packed;       /* [NB, BS, 656] uint8 (packed_int8), in-out */
    dsops_tensor q_nope;          /* [T, N, Dc] bf16, out */
    dsops_tensor q_rope;          /* [T, N, 64] bf16, out */
    dsops_tensor qr;              /* [T, Q] bf16 (bf16 wq_b) or int8 (int8 wq_b), out */
    dsops_tensor qr_scale;        /* [T] fp32, out (int8 wq_b only) */
    float eps_cq, eps_ckv;        /* V3.2: 1e-6 (vendor kernels 1e-5) */
    dsops_rope_mode rope_mode;    /* V3.2: interleaved_in_half_out */
    int rope_inverse;             /* V3.2: 0 */
    dsops_kv_layout kv_layout;    /* V3.2: split_bf16 */
    const dsops_prepared *prepared;  /* optional, from dsops_mla_prolog_v32_prepare */
} dsops_mla_prolog_v32_args;

DSOPS_API dsops_status dsops_mla_prolog_v32_init(dsops_mla_prolog_v32_args *args, dsops_preset preset);
/* Packs wq_a, wq_b, w_uk and wkv_a of `args` (only the weight tensors are read). */
DSOPS_API dsops_status dsops_mla_prolog_v32_prepare(dsops_context *ctx, const dsops_mla_prolog_v32_args *args,
                                                    dsops_prepared **prepared);
DSOPS_API dsops_status dsops_mla_prolog_v32(dsops_context *ctx, const dsops_mla_prolog_v32_args *args);

/* ---------------------------------------------------------------------------------------------
 * indexer_prolog_v32 (spec §4.2)
 *
 * The lightning indexer's query per head, per-head weights, and the indexer key written to the key
 * cache at cache_index. Variant from the dtypes: int8 (qr, idx_wq_b int8; Hadamard both sides; Q8 of
 * the query per head with fp16 scales and of the key with an fp16 scale) or bf16 (optional Hadamard).
 *   int8: qb = bf16((f32(qr . idx_wq_b[n]) * qr_scale) * idx_wq_b_scale[n]) viewed [NI, DI];
 *         u_h = [bf16(rot(qb_h[0:64])) ; qb_h[64:DI]]; (q_idx[t,h], s) = Q8(hadamard(u_h, hadamard_q));
 *         q_idx_scale = fp16(s)
 *   bf16: qb = bf16(qr idx_wq_b^T); q_idx[t,h] = hadamard_q ? hadamard(u_h, hadamard_q) : u_h
 *   both: k = bf16(LayerNorm(x idx_wk^T; ln_gamma_k, ln_beta_k, ln_eps)); k[0:64] = bf16(rot(k[0:64]));
 *         kk = hadamard(k, hadamard_k) (int8: required; then Q8 with an fp16 scale);
 *         weights = round(f32(bf16(x weights_proj^T)) * weights_scale) (fp16 for int8, bf16 for bf16)
 * where hadamard(v, Hm)[j] = bf16(sum_k v[k] Hm[k][j]). Requires DI >= 64.
 * ------------------------------------------------------------------------------------------- */

typedef struct dsops_indexer_prolog_v32_args {
    dsops_tensor x;                  /* [T, H] bf16 */
    dsops_tensor qr;                 /* [T, Q] int8 (int8 variant) or bf16 (bf16 variant) */
    dsops_tensor qr_scale;           /* [T] fp32 (int8 variant) */
    dsops_tensor idx_wq_b;           /* [NI*DI, Q] int8 or bf16 (as qr) */
    dsops_tensor idx_wq_b_scale;     /* [NI*DI] fp32 (int8 variant) */
    dsops_tensor idx_wk;             /* [DI, H] bf16 */
    dsops_tensor weights_proj;       /* [NI, H] bf16 */
    dsops_tensor ln_gamma_k;         /* [DI] bf16 or fp32 */
    dsops_tensor ln_beta_k;          /* [DI] bf16 or fp32 */
    dsops_tensor rope_cos;           /* [T, 64] bf16 or fp32 */
    dsops_tensor rope_sin;           /* [T, 64] bf16 or fp32 */
    dsops_tensor hadamard_q;         /* [DI, DI] bf16 or fp32 (int8: required; bf16: optional) */
    dsops_tensor hadamard_k;         /* [DI, DI] bf16 or fp32 (int8: required; bf16: optional) */
    dsops_tensor cache_index;        /* [T] int64, < 0 = do not write */
    dsops_tensor idx_k_cache;        /* [NB, BS, DI] int8 (int8) or bf16 (bf16), in-out */
    dsops_tensor idx_k_scale_cache;  /* [NB, BS] fp16 (int8), in-out */
    dsops_tensor q_idx;              /* [T, NI, DI] int8 or bf16, out */
    dsops_tensor q_idx_scale;        /* [T, NI] fp16, out (int8) */
    dsops_tensor weights;            /* [T, NI] fp16 (int8) or bf16 (bf16), out */
    float ln_eps;                    /* V3.2: 1e-6 */
    float weights_scale;             /* V3.2: 1 / sqrt(64 * 128); finite */
    dsops_rope_mode rope_mode;       /* V3.2: half */
    int rope_inverse;                /* V3.2: 0 */
    const dsops_prepared *prepared;  /* optional, from dsops_indexer_prolog_v32_prepare */
} dsops_indexer_prolog_v32_args;

DSOPS_API dsops_status dsops_indexer_prolog_v32_init(dsops_indexer_prolog_v32_args *args, dsops_preset preset);
/* Packs idx_wq_b, idx_wk, weights_proj and the Hadamard matrices of `args`. */
DSOPS_API dsops_status dsops_indexer_prolog_v32_prepare(dsops_context *ctx, const dsops_indexer_prolog_v32_args *args,
                                                        dsops_prepared **prepared);
DSOPS_API dsops_status dsops_indexer_prolog_v32(dsops_context *ctx, const dsops_indexer_prolog_v32_args *args);

/* ---------------------------------------------------------------------------------------------
 * lightning_indexer (spec §3.6; V3.2 configuration §4.3)
 *
 * Index scores of every visible key for each query token, summed over the NI indexer heads, and
 * their top-k. Token t of sequence b (index i, S_b tokens in the call) sees L = seqused_kv[b] -
 * (S_b - 1 - i) original tokens and n = floor(max(L, 0) / cmp_ratio) keys; key j < n is row
 * block_table[b][j / BS] * BS + j % BS of key_cache (a token for V3.2, a compressed entry for V4).
 *
 * int8 variant (q_idx int8; fp16 intermediates are part of the contract):
 *     ws_h = fp16(q_idx_scale[t,h] * weights[t,h])
 *     d_hj = fp16(f32(max(sum_d q_idx[t,h,d] * key[j][d], 0)) * 2^-11)          exact int32 dot
 *     I[j] = (sum_h ws_h * d_hj) * key_scale[j]
 * bf16 variant (q_idx bf16):  I[j] = sum_h max(dot(q_idx[t,h], key[j]), 0) * weights[t,h]
 * fp8 variant (q_idx fp8_e4m3, DeepGEMM's indexer inputs; weights and key scales fp32):
 *     I[j] = (sum_h max(dot(q_idx[t,h], key[j]), 0) * weights[t,h]) * key_scale[j]
 *   DeepGEMM's paged key cache (per block: the BS x DI e4m3 values, then BS fp32 scales) is two views of
 *   one buffer: key_cache strides {BS*(DI+4), DI, 1}, key_scale_cache strides {BS*(DI+4)/4, 1} from byte
 *   BS*DI of the block (DI a multiple of 4).
 *
 * topk_indices[t] holds the indices of the min(n, K) largest I[j] in decreasing order (ties: lower
 * index first; NaN ranks below every number; -0 == +0), then -1; topk_scores[t] the selected scores,
 * then -Inf. Indices are logical positions, not cache rows. A token with n = 0 gets a row of -1.
 * logits (optional) [T, LMAX] fp32: row t holds I[0 .. n-1], then -Inf; every token must have n <= LMAX.
 *
 * Errors: _NULL, _SHAPE (rank / extents; NI, DI, K >= 1; DI <= 131072 for int8), _DTYPE (q_idx, weights,
 * key_cache and the scales must match the variant), _PARAM (cmp_ratio < 1; scales given to the bf16
 * variant, q_idx_scale to the fp8 variant), _INDEX (cu_seqlens_q, seqused_kv < 0, a visible key whose
 * block-table column is >= MB or whose block is outside [0, NB), a token seeing more than LMAX keys), _ALIAS, _NOMEM, _UNSUPPORTED (NI > 2^16, K > 2^24, more than 2^31
 * visible keys).
 * ------------------------------------------------------------------------------------------- */

typedef struct dsops_lightning_indexer_args {
    dsops_tensor q_idx;            /* [T, NI, DI] int8 (int8 variant), bf16 (bf16) or fp8_e4m3 (fp8) */
    dsops_tensor q_idx_scale;      /* [T, NI] fp16 (int8 variant only) */
    dsops_tensor weights;          /* [T, NI] fp16 (int8 variant), bf16 (bf16) or fp32 (fp8) */
    dsops_tensor key_cache;        /* [NB, BS, DI] the dtype of q_idx */
    dsops_tensor key_scale_cache;  /* [NB, BS] fp16 (int8 variant) or fp32 (fp8); absent for bf16 */
    dsops_tensor block_table;      /* [B, MB] int32 */
    dsops_tensor cu_seqlens_q;     /* [B+1] int32 */
    dsops_tensor seqused_kv;       /* [B] int32, original token counts including this call */
    dsops_tensor topk_indices;     /* [T, K] int32, out */
    dsops_tensor topk_scores;      /* [T, K] fp32, out, optional */
    int cmp_ratio;                 /* >= 1; V3.2: 1, V4: 4 */
    dsops_tensor logits;           /* [T, LMAX] fp32, out, optional: every score, -Inf past the visible keys */
} dsops_lightning_indexer_args;

/* Clears every tensor and sets cmp_ratio from the preset (V3.2: 1, V4: 4). */
DSOPS_API dsops_status dsops_lightning_indexer_init(dsops_lightning_indexer_args *args, dsops_preset preset);
DSOPS_API dsops_status dsops_lightning_indexer(dsops_context *ctx, const dsops_lightning_indexer_args *args);

/* ---------------------------------------------------------------------------------------------
 * sparse_attention_v32 (spec §4.5): one V3.2 attention layer, fused
 *
 *   1 mla_prolog_v32(x, ...)          -> q_nope, q_rope, qr (+qr_scale); writes the kv caches
 *   2 indexer_prolog_v32(x, qr, ...)  -> q_idx (+scale), weights;        writes the indexer key cache
 *   3 lightning_indexer(cmp_ratio 1, K = topk) over the indexer key cache -> top-k positions
 *   4 sparse_flash_attention_v32(q_nope, q_rope, kv caches, top-k)        -> out (, lse)
 * Each stage is exactly the stand-alone operator; stages 3 and 4 see the rows written by 1 and 2.
 * Every stage is validated before stage 1 writes anything. The variant follows the dtypes: bf16
 * (bf16 wq_b, idx_wq_b and indexer cache) or int8 (int8 wq_b, idx_wq_b and indexer cache; any
 * kv_layout). For the call's tokens to see their own keys, cache_index[t] must be the slot of the
 * token's position (not checked). Intermediate tensors live in the context's scratch.
 * ------------------------------------------------------------------------------------------- */

typedef struct dsops_sparse_attention_v32_args {
    dsops_tensor x;                  /* [T, H] bf16 */
    dsops_tensor cu_seqlens_q;       /* [B+1] int32 */
    dsops_tensor seqused_kv;         /* [B] int32 */
    dsops_tensor block_table;        /* [B, MB] int32, shared by every cache */
    dsops_tensor cache_index;        /* [T] int64 */
    dsops_tensor rope_cos, rope_sin; /* [T, 64] bf16 or fp32 (halves tables, both prologs) */
    /* stage 1 weights (as mla_prolog_v32) */
    dsops_tensor wq_a, gamma_cq, wq_b, wq_b_scale, w_uk, wkv_a, gamma_ckv;
    /* stage 2 weights (as indexer_prolog_v32) */
    dsops_tensor idx_wq_b, idx_wq_b_scale, idx_wk, weights_proj, ln_gamma_k, ln_beta_k, hadamard_q, hadamard_k;
    /* caches, in-out (layout of the kv cache by kv_layout, as mla_prolog_v32) */
    dsops_tensor kv_cache, kv_scale_cache, kr_cache, kv_packed;
    dsops_tensor idx_k_cache;        /* [NB, BS, DI] int8 or bf16 */
    dsops_tensor idx_k_scale_cache;  /* [NB, BS] fp16 (int8 variant) */
    /* outputs */
    dsops_tensor out;                /* [T, N, Dc] bf16 */
    dsops_tensor topk_indices;       /* [T, topk] int32, optional */
    dsops_tensor lse;                /* [T, N] fp32, optional */
    /* parameters (V3.2 defaults from dsops_sparse_attention_v32_init) */
    float mla_eps_cq, mla_eps_ckv;
    dsops_rope_mode mla_rope_mode;
    int mla_rope_inverse;
    float idx_ln_eps, weights_scale;
    dsops_rope_mode idx_rope_mode;
    int idx_rope_inverse;
    float softmax_scale;
    dsops_p_mode p_mode;
    int p_tile;
    dsops_kv_layout kv_layout;
    int topk;                        /* K >= 1, default 2048 */
    const dsops_prepared *prepared;  /* optional, from dsops_sparse_attention_v32_prepare */
} dsops_sparse_attention_v32_args;

DSOPS_API dsops_status dsops_sparse_attention_v32_init(dsops_sparse_attention_v32_args *args, dsops_preset preset);
/* Packs the weights of both prologs. */
DSOPS_API dsops_status dsops_sparse_attention_v32_prepare(dsops_context *ctx,
                                                          const dsops_sparse_attention_v32_args *args,
                                                          dsops_prepared **prepared);
DSOPS_API dsops_status dsops_sparse_attention_v32(dsops_context *ctx, const dsops_sparse_attention_v32_args *args);

/* ---------------------------------------------------------------------------------------------
 * hc_pre and hc_post (spec §3.1, §3.2): mHC hyper-connections of DeepSeek-V4
 *
 * hc_pre, per token t (all fp32): xf = the HC streams of x flattened stream-major (HC*H values);
 *   r = sqrt(sum(xf^2) / (HC*H) + norm_eps); mix = (xf hc_fn^T) / r  (M = (2+HC)*HC mixes);
 *   pre_i = sigmoid(mix[i] hc_scale[0] + hc_base[i]) + hc_eps; post_i = 2 sigmoid(mix[HC+i] hc_scale[1] + ...);
 *   comb = Sinkhorn of exp(A - rowmax) with A[a][c] = mix[2HC + a HC + c] hc_scale[2] + hc_base[...]
 *   (row normalisation + hc_eps, column normalisation, then sinkhorn_iters - 1 rounds of row and column
 *   normalisation with hc_eps in the denominators); y[t, d] = bf16(sum_i pre_i xf[i H + d]).
 * hc_post: out[t, j, d] = cast(post[t][j] x[t][d] + sum_i comb[t][i][j] residual[t][i][d]) (comb used
 * transposed); out may alias residual exactly.
 * ------------------------------------------------------------------------------------------- */

typedef struct dsops_hc_pre_args {
    dsops_tensor x;         /* [T, HC, H] bf16 */
    dsops_tensor hc_fn;     /* [M, HC*H] fp32, M = (2+HC)*HC */
    dsops_tensor hc_scale;  /* [3] fp32 */
    dsops_tensor hc_base;   /* [M] fp32 */
    dsops_tensor y;         /* [T, H] bf16, out */
    dsops_tensor post;      /* [T, HC] fp32, out */
    dsops_tensor comb;      /* [T, HC, HC] fp32, out */
    dsops_tensor pre;       /* [T, HC] fp32, out, optional */
    int sinkhorn_iters;     /* >= 1; V4: 20 */
    float norm_eps;         /* V4: 1e-6 */
    float hc_eps;           /* V4: 1e-6 */
    const dsops_prepared *prepared;  /* optional, from dsops_hc_pre_prepare */
} dsops_hc_pre_args;

DSOPS_API dsops_status dsops_hc_pre_init(dsops_hc_pre_args *args, dsops_preset preset);
/* Packs hc_fn of `args` (only hc_fn is read; HC from M = (2+HC)*HC) in the layout of ctx's tier (NULL ctx: the
 * detected tier); a call on a tier whose kernels use another layout packs its own copy. */
DSOPS_API dsops_status dsops_hc_pre_prepare(dsops_context *ctx, const dsops_hc_pre_args *args,
                                            dsops_prepared **prepared);
DSOPS_API dsops_status dsops_hc_pre(dsops_context *ctx, const dsops_hc_pre_args *args);

typedef struct dsops_hc_post_args {
    dsops_tensor x;         /* [T, H] bf16 or fp32 (sublayer output) */
    dsops_tensor residual;  /* [T, HC, H] same dtype as x */
    dsops_tensor post;      /* [T, HC] fp32 or bf16 */
    dsops_tensor comb;      /* [T, HC, HC] same dtype as post */
    dsops_tensor out;       /* [T, HC, H] same dtype as x, out (may alias residual exactly) */
} dsops_hc_post_args;

DSOPS_API dsops_status dsops_hc_post(dsops_context *ctx, const dsops_hc_post_args *args);

/* ---------------------------------------------------------------------------------------------
 * mla_prolog_v4 (spec §3.3): the DeepSeek-V4 attention prolog (writes no cache)
 *
 * Per token t (D = head dim, Dn = D - 64; rotation on the last 64 dims):
 *   bf16 wq_b: a = bf16(x wq_a^T); qr = bf16(RMSNorm(a; gamma_cq, eps_cq)); qb = bf16(qr wq_b^T)
 *   int8 wq_b: a = x wq_a^T (fp32); cq = RMSNorm(a; gamma_cq, eps_cq) (fp32); (qr, qr_scale) = Q8(cq);
 *              qb[n] = (f32(qr . wq_b[n]) * qr_scale) * wq_b_scale[n] (fp32)
 *   head h: qn = bf16(RMSNorm_unweighted(qb[h*D : h*D+D]; eps_qh)); q[t,h] = [qn[0:Dn] ; bf16(rot(qn[Dn:D]))]
 *   ka = x wkv^T (bf16-rounded in the bf16 variant); kn = bf16(RMSNorm(ka; gamma_ckv, eps_ckv));
 *   kv[t] = [kn[0:Dn] ; bf16(rot(kn[Dn:D]))]
 * N = rows of wq_b / D. Errors: _NULL, _SHAPE (extents; D > 64; Q <= 131072 for int8 wq_b), _DTYPE,
 * _PARAM (eps, enums, a prepared object made from other weights), _ALIAS, _NOMEM.
 * ------------------------------------------------------------------------------------------- */

typedef struct dsops_mla_prolog_v4_args {
    dsops_tensor x;           /* [T, H] bf16 */
    dsops_tensor wq_a;        /* [Q, H] bf16 */
    dsops_tensor gamma_cq;    /* [Q] bf16 or fp32 */
    dsops_tensor wq_b;        /* [N*D, Q] bf16 or int8 (the variant) */
    dsops_tensor wq_b_scale;  /* [N*D] fp32 (int8 wq_b only) */
    dsops_tensor wkv;         /* [D, H] bf16 */
    dsops_tensor gamma_ckv;   /* [D] bf16 or fp32 */
    dsops_tensor rope_cos;    /* [T, 64] bf16 or fp32 */
    dsops_tensor rope_sin;    /* [T, 64] bf16 or fp32 */
    dsops_tensor q;           /* [T, N, D] bf16, out */
    dsops_tensor kv;          /* [T, D] bf16, out */
    dsops_tensor qr;          /* [T, Q] bf16 (bf16 wq_b) or int8 (int8 wq_b), out */
    dsops_tensor qr_scale;    /* [T] fp32, out (int8 wq_b only) */
    float eps_cq, eps_ckv, eps_qh;  /* V4: 1e-6 */
    dsops_rope_mode rope_mode;      /* V4: interleaved */
    int rope_inverse;               /* V4: 0 */
    const dsops_prepared *prepared; /* optional, from dsops_mla_prolog_v4_prepare */
} dsops_mla_prolog_v4_args;

DSOPS_API dsops_status dsops_mla_prolog_v4_init(dsops_mla_prolog_v4_args *args, dsops_preset preset);
/* Packs wq_a, wq_b and wkv of `args` (only the weight tensors are read). */
DSOPS_API dsops_status dsops_mla_prolog_v4_prepare(dsops_context *ctx, const dsops_mla_prolog_v4_args *args,
                                                   dsops_prepared **prepared);
DSOPS_API dsops_status dsops_mla_prolog_v4(dsops_context *ctx, const dsops_mla_prolog_v4_args *args);

/* ---------------------------------------------------------------------------------------------
 * compressor (spec §3.4): gated pooling of every R consecutive positions into one compressed entry,
 * with paged fp32 state so that decode continues where prefill or earlier calls stopped
 *
 * Sequence b covers positions start_pos[b] ... start_pos[b] + S_b - 1 (token t = cu[b] + i at
 * position p = start_pos[b] + i). Per token: kvp = x wkv^T, scp = x wgate^T + ape[p % R] (fp32, C*D each);
 * both are stored in the states at the slot of p (slot = table[b][p / BSS] * BSS + p % BSS).
 * Window k closes when position (k+1)R - 1 is in the call; its entry pools, per channel d, the values
 * of positions kR ... kR+R-1 (channel C == 2: channel D + d of those and channel d of the previous
 * window's positions, skipping positions < 0) with softmax weights of their logits. Positions before
 * start_pos come from the states. Entry: y = bf16(RMSNorm(bf16(pool); norm_weight)); the last 64
 * dims rotated with table row r; optionally y = bf16(y hadamard); written to row r of out:
 *   packed: entries ordered by sequence then window; row_per_seq: r = b (at most one entry each).
 * Rows of out that receive no entry are zeroed; out_count[b] = number of entries of b.
 * Errors: _NULL, _SHAPE (extents, NO too small, row_per_seq with two entries in a sequence), _DTYPE,
 * _PARAM (explicit dim / ratio / overlap / rotate that disagree with the shapes, eps, enums, prepared),
 * _INDEX (cu_seqlens_q, start_pos < 0 or start_pos + S_b > 2^31 - 1, a needed state table entry out of
 * range, two sequences sharing a state row), _ALIAS, _NOMEM. On error nothing is written.
 * ------------------------------------------------------------------------------------------- */

typedef enum dsops_compressor_layout {
    DSOPS_COMPRESSOR_PACKED = 0,      /* entries ordered by sequence, then window */
    DSOPS_COMPRESSOR_ROW_PER_SEQ = 1  /* row b holds sequence b's entry (at most one per call) */
} dsops_compressor_layout;

typedef struct dsops_compressor_args {
    dsops_tensor x;                        /* [T, H] bf16 */
    dsops_tensor cu_seqlens_q;             /* [B+1] int32 */
    dsops_tensor start_pos;                /* [B] int32 */
    dsops_tensor wkv;                      /* [C*D, H] bf16 */
    dsops_tensor wgate;                    /* [C*D, H] bf16 */
    dsops_tensor ape;                      /* [R, C*D] fp32 */
    dsops_tensor norm_weight;              /* [D] bf16 or fp32 */
    dsops_tensor hadamard;                 /* [D, D] bf16 or fp32, optional (given: rotate) */
    dsops_tensor rope_cos;                 /* [NO, 64] bf16 or fp32 (row r serves out row r) */
    dsops_tensor rope_sin;                 /* [NO, 64] bf16 or fp32 */
    dsops_tensor kv_state;                 /* [NBS, BSS, C*D] fp32, in-out */
    dsops_tensor score_state;              /* [NBS2, BSS2, C*D] fp32, in-out */
    dsops_tensor kv_state_block_table;     /* [B, MBS] int32 */
    dsops_tensor score_state_block_table;  /* [B, MBS2] int32 (may be the same array) */
    dsops_tensor out;                      /* [NO, D] bf16, out */
    dsops_tensor out_count;                /* [B] int32, out, optional */
    int dim;       /* 0: from the shapes; else must equal D */
    int ratio;     /* 0: from the shapes; else must equal R */
    int overlap;   /* -1: from the shapes (C == 2); 0 / 1 must agree */
    int rotate;    /* -1: from the shapes (hadamard given); 0 / 1 must agree */
    float norm_eps;                     /* V4: 1e-6 */
    dsops_rope_mode rope_mode;          /* V4: interleaved */
    int rope_inverse;                   /* V4: 0 */
    dsops_compressor_layout out_layout; /* V4: packed */
    const dsops_prepared *prepared;     /* optional, from dsops_compressor_prepare */
} dsops_compressor_args;

DSOPS_API dsops_status dsops_compressor_init(dsops_compressor_args *args, dsops_preset preset);
/* Packs wkv and wgate of `args`. */
DSOPS_API dsops_status dsops_compressor_prepare(dsops_context *ctx, const dsops_compressor_args *args,
                                                dsops_prepared **prepared);
DSOPS_API dsops_status dsops_compressor(dsops_context *ctx, const dsops_compressor_args *args);

/* ---------------------------------------------------------------------------------------------
 * indexer_prolog_v4 (spec §3.5): the V4 lightning-indexer query and weights (writes no cache)
 *
 * Per token t: qb = bf16((f32(qr . idx_wq_b[n]) * qr_scale[t]) * idx_wq_b_scale[n]) viewed [NI, DI];
 *   head h: u = [qb_h[0:DI-64] ; bf16(rot(qb_h[DI-64:DI]))]; hq = bf16(u hadamard);
 *   (q_idx[t,h], s) = Q8(hq), q_idx_scale[t,h] = fp16(s);
 *   weights[t,h] = fp16(f32(bf16(x . weights_proj[h])) * weights_scale).
 * NI from weights_proj, DI from hadamard. Errors: _NULL, _SHAPE (extents, DI >= 64, Q <= 131072),
 * _DTYPE, _PARAM (weights_scale not finite, enums, prepared), _ALIAS, _NOMEM.
 * ------------------------------------------------------------------------------------------- */

typedef struct dsops_indexer_prolog_v4_args {
    dsops_tensor qr;              /* [T, Q] int8 (from mla_prolog_v4, int8 variant) */
    dsops_tensor qr_scale;        /* [T] fp32 */
    dsops_tensor x;               /* [T, H] bf16 */
    dsops_tensor idx_wq_b;        /* [NI*DI, Q] int8 */
    dsops_tensor idx_wq_b_scale;  /* [NI*DI] fp32 */
    dsops_tensor weights_proj;    /* [NI, H] bf16 */
    dsops_tensor rope_cos;        /* [T, 64] bf16 or fp32 */
    dsops_tensor rope_sin;        /* [T, 64] bf16 or fp32 */
    dsops_tensor hadamard;        /* [DI, DI] bf16 or fp32 */
    dsops_tensor q_idx;           /* [T, NI, DI] int8, out */
    dsops_tensor q_idx_scale;     /* [T, NI] fp16, out */
    dsops_tensor weights;         /* [T, NI] fp16, out */
    float weights_scale;          /* V4: 1 / sqrt(64 * 128); finite */
    dsops_rope_mode rope_mode;    /* V4: interleaved */
    int rope_inverse;             /* V4: 0 (vendor op: 1) */
    const dsops_prepared *prepared;  /* optional, from dsops_indexer_prolog_v4_prepare */
} dsops_indexer_prolog_v4_args;

DSOPS_API dsops_status dsops_indexer_prolog_v4_init(dsops_indexer_prolog_v4_args *args, dsops_preset preset);
/* Packs idx_wq_b and weights_proj of `args`. */
DSOPS_API dsops_status dsops_indexer_prolog_v4_prepare(dsops_context *ctx, const dsops_indexer_prolog_v4_args *args,
                                                       dsops_prepared **prepared);
DSOPS_API dsops_status dsops_indexer_prolog_v4(dsops_context *ctx, const dsops_indexer_prolog_v4_args *args);

/* ---------------------------------------------------------------------------------------------
 * sas (spec §3.7): DeepSeek-V4 shared-KV sparse attention; swa, cfa and scfa are its presets
 *
 * Multi-query attention over one shared latent (K = V, D values including the rotated rope part) from up
 * to two paged pools. Token t of sequence b (index i, S_b tokens in the call) sees L = seqused_kv[b] -
 * (S_b - 1 - i) original tokens. Its key list, in order:
 *   window:     the last w = min(max(L, 0), win_size) positions L-w ... L-1 of ori_kv (oldest first);
 *   compressed: none; dense: entries 0 ... floor(max(L, 0) / cmp_ratio) - 1 of cmp_kv; sparse: the first
 *               cnt = min(K, floor(max(L, 0) / cmp_ratio), cmp_topk_length[t] if given) of cmp_indices[t],
 *               each used iff 0 <= idx < floor(seqused_kv[b] / cmp_ratio) (duplicates count each time).
 * Per head: the attention core of spec §2.10 with softmax_scale, the sink sinks[h] (if given) and p_mode
 * (tiled: the window entries are the first tile, the compressed entries follow in tiles of p_tile).
 * A token with an empty list is lonely: out = 0, lse = +Inf; a poisoned row (a NaN logit, a +Inf one, or all
 * -Inf) is NaN in out and lse (§2.10 A3).
 * Errors: _NULL (a required tensor, including the pool the mode needs), _SHAPE (extents; D shared by q and
 * the pools), _DTYPE, _PARAM (non-finite scale, win_size < 0, cmp_ratio < 1, p_tile < 1, enums), _INDEX (sequence
 * descriptors, cmp_topk_length < 0, a needed block-table entry out of range), _ALIAS, _NOMEM.
 * ------------------------------------------------------------------------------------------- */

typedef enum dsops_cmp_mode {
    DSOPS_CMP_NONE = 0,    /* window only (swa) */
    DSOPS_CMP_DENSE = 1,   /* every causal compressed entry (cfa) */
    DSOPS_CMP_SPARSE = 2   /* the compressed entries listed in cmp_indices (scfa) */
} dsops_cmp_mode;

typedef enum dsops_sas_variant {
    DSOPS_SAS_SWA = 0,     /* win_size 128, no compressed pool, p_mode normalised */
    DSOPS_SAS_CFA = 1,     /* win_size 128, dense, cmp_ratio 128, p_mode tiled (128) */
    DSOPS_SAS_SCFA = 2     /* win_size 128, sparse, cmp_ratio 4, p_mode normalised */
} dsops_sas_variant;

/* How the two pools of sas hold their rows. */
typedef enum dsops_sas_pool_layout {
    DSOPS_SAS_POOL_BF16 = 0,       /* [NB, BS, D] bf16 rows */
    DSOPS_SAS_POOL_MODEL1_FP8 = 1  /* FlashMLA's MODEL1 FP8 blocks (spec §2.12), D = 512: [NB, BS, 584] uint8 as
                                      FlashMLA views them, stride[0] the block's length in bytes (>= BS * 584),
                                      stride[1] 584, stride[2] 1; row b of a block: its 448 e4m3 and 64 bf16 at
                                      byte 576 b, its 7 ue8m0 scales at byte 576 BS + 8 b */
} dsops_sas_pool_layout;

typedef struct dsops_sas_args {
    dsops_tensor q;                 /* [T, N, D] bf16 */
    dsops_tensor cu_seqlens_q;      /* [B+1] int32 */
    dsops_tensor seqused_kv;        /* [B] int32: original tokens per sequence, this call's included */
    dsops_tensor ori_kv;            /* [NBW, BSW, D] bf16 (or MODEL1 FP8 blocks): window pool (iff win_size > 0) */
    dsops_tensor ori_block_table;   /* [B, MBW] int32 */
    dsops_tensor cmp_kv;            /* [NBC, BSC, D] bf16 (or MODEL1 FP8 blocks): compressed pool (unless cmp_mode none) */
    dsops_tensor cmp_block_table;   /* [B, MBC] int32 */
    dsops_tensor cmp_indices;       /* [T, K] int32 (sparse): logical compressed indices, -1 = skip */
    dsops_tensor cmp_topk_length;   /* [T] int32, optional (sparse) */
    dsops_tensor sinks;             /* [N] fp32, optional */
    dsops_tensor out;               /* [T, N, D] bf16, out */
    dsops_tensor lse;               /* [T, N] fp32, out, optional */
    dsops_tensor max_logits;        /* [T, N] fp32, out, optional: max_e s_e (-Inf lonely, NaN poisoned) */
    float softmax_scale;            /* finite; V4: 512^-0.5 */
    int win_size;                   /* >= 0 (0: no window); V4: 128 */
    dsops_cmp_mode cmp_mode;
    int cmp_ratio;                  /* >= 1; cfa 128, scfa 4 */
    dsops_p_mode p_mode;            /* swa / scfa normalised, cfa tiled */
    int p_tile;                     /* >= 1 for p_mode tiled; cfa 128 */
    dsops_sas_pool_layout pool_layout; /* both pools; default bf16 */
} dsops_sas_args;

/* Clears every tensor and fills the parameters of `variant` (V4-Flash and V4-Pro presets are the same here;
 * K comes from cmp_indices). The V3.2 preset has no sas layer: DSOPS_ERR_PARAM (the struct is still filled). */
DSOPS_API dsops_status dsops_sas_init(dsops_sas_args *args, dsops_preset preset, dsops_sas_variant variant);
DSOPS_API dsops_status dsops_sas(dsops_context *ctx, const dsops_sas_args *args);

/* ---------------------------------------------------------------------------------------------
 * Machine peaks (used by the benchmark tool as the 100 % mark)
 * ------------------------------------------------------------------------------------------- */

typedef enum dsops_peak_kind {
    DSOPS_PEAK_BF16_DOT = 0,  /* bf16 dot products with fp32 accumulation, FLOP/s (2 per product) */
    DSOPS_PEAK_INT8_DOT = 1,  /* u8 x s8 dot products with int32 accumulation, OP/s (2 per product) */
    DSOPS_PEAK_FP32_FMA = 2,  /* fp32 fused multiply-adds, FLOP/s (2 per FMA) */
    DSOPS_PEAK_STREAM = 3     /* one core's memory stream: y = a x over arrays far larger than the caches,
                               * B/s counting the bytes read and the bytes written */
} dsops_peak_kind;
#define DSOPS_PEAK_KIND_COUNT 4

/* Runs a register-resident dot-product loop (or, for DSOPS_PEAK_STREAM, a streaming read-and-write loop
 * over 2 x 64 MiB) on the calling thread for about `seconds` with the best kernel of tier `isa` (capped to the
 * detected tier) and returns the best rate in GFLOP/s, GOP/s or GB/s. */
DSOPS_API dsops_status dsops_measure_peak(dsops_isa isa, dsops_peak_kind kind, double seconds, double *giga_per_s);

/* One line that says how matmuls with `dtype` weights (DSOPS_BF16, DSOPS_INT8 or DSOPS_FP32) run at tier
 * `isa` on this machine (oneDNN in the weights' type, oneDNN fp32 on weights widened once, or the tier's own
 * row-dot kernels, and which below how many rows), written to text[size]. */
DSOPS_API dsops_status dsops_matmul_path(dsops_isa isa, dsops_dtype dtype, char *text, size_t size);

/* ---------------------------------------------------------------------------------------------
 * Operator descriptions: every operator's tensors and parameters, for bindings and tools
 *
 * A binding (the `dsops run` tool, the Python package) drives any operator through its description
 * instead of knowing its args struct: allocate `args_size` zeroed bytes (the call record: the operator's
 * args struct, at offset 0, followed by the few values the description adds, such as lightning_indexer's
 * `topk`), call init(record, preset), set tensors and parameters at their offsets, call infer (when
 * present) with the parameters given, output_shapes to learn every output's dtype and shape, allocate
 * the outputs, then call(ctx, record). Variants with their own defaults (swa, cfa, scfa of sas) are entries
 * of their own whose variant_of names the operator.
 * ------------------------------------------------------------------------------------------- */

typedef enum dsops_arg_role {
    DSOPS_ARG_IN = 0,        /* required input */
    DSOPS_ARG_IN_OPT = 1,    /* optional input (NULL data: absent) */
    DSOPS_ARG_INOUT = 2,     /* required, read and updated in place (caches, states) */
    DSOPS_ARG_INOUT_OPT = 3, /* optional in-out */
    DSOPS_ARG_OUT = 4,       /* output */
    DSOPS_ARG_OUT_OPT = 5    /* optional output; output_shapes leaves its dtype DSOPS_DTYPE_INVALID when the call's
                              * variant has no such output (qr_scale of a bf16 prolog) */
} dsops_arg_role;

/* Bit of dtype d in a description's `dtypes` mask. */
#define DSOPS_DTYPE_BIT(d) (1u << (unsigned)(d))

typedef struct dsops_tensor_desc {
    const char *name;     /* the argument's name, as in the args struct */
    size_t offset;        /* of its dsops_tensor in the call record */
    dsops_arg_role role;
    unsigned dtypes;      /* accepted dtypes (DSOPS_DTYPE_BIT mask) */
    const char *note;     /* shape and use, e.g. "[T, N, Dc]"; may be NULL */
} dsops_tensor_desc;

typedef enum dsops_param_type {
    DSOPS_PARAM_FLOAT = 0,  /* float */
    DSOPS_PARAM_INT = 1,    /* int (or an integer of `size` bytes) */
    DSOPS_PARAM_BOOL = 2,   /* int 0 / 1 */
    DSOPS_PARAM_ENUM = 3,   /* an enum (int), spelled by `spellings` */
    DSOPS_PARAM_DOUBLE = 4  /* double */
} dsops_param_type;

typedef struct dsops_enum_value {
    const char *spelling;   /* NULL ends a list */
    int value;
} dsops_enum_value;

typedef struct dsops_param_desc {
    const char *name;
    dsops_param_type type;
    size_t offset, size;                /* of the member in the call record */
    const dsops_enum_value *spellings;  /* DSOPS_PARAM_ENUM: its values, ended by a NULL spelling */
    const char *note;                   /* may be NULL */
    bool required;                      /* no default: the caller must set it (lightning_indexer's topk) */
} dsops_param_desc;

typedef struct dsops_op_desc {
    const char *name;
    size_t args_size;                   /* bytes of the call record */
    const dsops_tensor_desc *tensors;
    size_t n_tensors;
    const dsops_param_desc *params;
    size_t n_params;
    dsops_preset default_preset;        /* the model the operator belongs to */
    /* Clears the record and fills the preset's parameter defaults. */
    dsops_status (*init)(void *args, dsops_preset preset);
    /* Optional: fills the parameters that were not given (given[i] for params[i]) and follow from the
     * tensors present (e.g. kv_layout from the caches given). */
    void (*infer)(void *args, const bool *given);
    /* Sets dtype, rank and shape of every output from the inputs and parameters (data stays NULL); on
     * error writes a message to msg[len]. */
    dsops_status (*output_shapes)(void *args, char *msg, size_t len);
    /* Runs the operator on the record. */
    dsops_status (*call)(dsops_context *ctx, const void *args);
    const char *variant_of;             /* swa / cfa / scfa: "sas"; else NULL */
    /* Operators with weights to pack once (NULL otherwise): packs the weights the record holds; the object goes
     * into the record's `prepared` member, at prepared_offset, for the calls with those weights. */
    dsops_status (*prepare)(dsops_context *ctx, const void *args, dsops_prepared **out);
    size_t prepared_offset;
} dsops_op_desc;

/* The described operators: count, i-th (NULL past the end), by name (NULL when unknown). */
DSOPS_API size_t dsops_op_count(void);
DSOPS_API const dsops_op_desc *dsops_op_at(size_t i);
DSOPS_API const dsops_op_desc *dsops_op_find(const char *name);
/* The spellings of dsops_preset ("v32", "v4_flash", "v4_pro"), ended by a NULL spelling. */
DSOPS_API const dsops_enum_value *dsops_preset_spellings(void);
/* The spelling of `value` in list e, or "?". */
DSOPS_API const char *dsops_enum_spelling(const dsops_enum_value *e, int value);

#ifdef __cplusplus
}
#endif

#endif /* DSOPS_H */
