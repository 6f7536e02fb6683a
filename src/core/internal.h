/* Internal helpers shared by the library's sources: errors, number formats, tensor checks, scratch. */
#ifndef DSOPS_INTERNAL_H
#define DSOPS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "dsops.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* The calling thread's number inside an OpenMP parallel region (0 outside one or without OpenMP). */
static inline int dsops_thread_num(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* The number of threads in the current OpenMP team (1 outside a parallel region or without OpenMP). */
static inline int dsops_thread_count_here(void)
{
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/* ---- errors ---------------------------------------------------------------------------------- */

/* Records a formatted message for this thread and returns `status`. */
dsops_status dsops_fail(dsops_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dsops_clear_error(void);

#define DSOPS_TRY(expr)                       \
    do {                                      \
        dsops_status dsops_try_s_ = (expr);   \
        if (dsops_try_s_ != DSOPS_OK)         \
            return dsops_try_s_;              \
    } while (0)

/* ---- number formats (spec §2.1) -------------------------------------------------------------- */
/* One value at a time: dsops_bf16_value / dsops_fp16_value widen a bit pattern, dsops_bf16_round_bits /
 * dsops_fp16_round_bits round a float to one (the public dsops_bf16_to_fp32 and friends convert arrays). */

static inline float dsops_f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t dsops_bits_from_f32(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float dsops_bf16_value(uint16_t h) { return dsops_f32_from_bits((uint32_t)h << 16); }

/* Round to nearest even; NaN becomes a quiet NaN with its sign; overflow gives +-Inf. */
static inline uint16_t dsops_bf16_round_bits(float f)
{
    uint32_t u = dsops_bits_from_f32(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float dsops_round_bf16(float f) { return dsops_bf16_value(dsops_bf16_round_bits(f)); }

/* The scale a ue8m0 byte stands for (spec §2.12): 2^(b - 127), 0xff NaN (b 0 is the fp32 subnormal 2^-127). */
static inline float dsops_ue8m0_value(uint8_t b)
{
    return b == 0xffu ? dsops_f32_from_bits(0x7fc00000u) : dsops_f32_from_bits(b ? (uint32_t)b << 23 : 0x00400000u);
}

/* True when every e4m3 value times `scale` is an exact fp32 normal, zero, Inf or NaN (scale a power of two from
 * 2^-117 up: 4 significant bits, at least 2^-9 * 2^-117 = 2^-126 when not zero), so that its bf16 is its upper
 * half and the SIMD dequantisers may skip the rounding step. */
static inline bool dsops_e4m3_products_exact(float scale)
{
    const uint32_t u = dsops_bits_from_f32(scale), e = (u >> 23) & 0xffu;
    return (u & 0x7fffffu) == 0 && e >= 10 && e <= 254;
}

/* The value of an e4m3fn byte (spec §2.12): S.EEEE.MMM, bias 7, E = 0 subnormal, S.1111.111 a quiet NaN with
 * the byte's sign. Exact in fp32 (and bf16). */
static inline float dsops_e4m3_value(uint8_t b)
{
    const uint32_t sign = (uint32_t)(b & 0x80u) << 24, mag = b & 0x7fu;
    if (mag == 0x7fu)
        return dsops_f32_from_bits(sign | 0x7fc00000u);
    if (mag < 8u) /* subnormal: M * 2^-9 */
        return dsops_f32_from_bits(sign | dsops_bits_from_f32((float)mag * 0x1p-9f));
    return dsops_f32_from_bits(sign | ((mag << 20) + (120u << 23))); /* exponent rebiased from 7 to 127 */
}

/* fp16 <-> fp32: exact widening; round to nearest even with subnormals, |v| >= 65520 -> Inf. */
static inline float dsops_fp16_value(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13) | (man ? 0x00400000u : 0);
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else { /* subnormal: value = man * 2^-24, exact in fp32 */
        float v = (float)man * 5.9604644775390625e-8f;
        bits = sign | dsops_bits_from_f32(v);
    }
    return dsops_f32_from_bits(bits);
}

static inline uint16_t dsops_fp16_round_bits(float f)
{
    uint32_t u = dsops_bits_from_f32(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: keep sign and top payload bits, force quiet */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* |v| >= 65520 rounds to Inf (and Inf stays Inf) */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* below the smallest normal 2^-14: subnormal or zero */
        if (a < 0x33000000u) /* < 2^-25: rounds to zero (2^-25 exactly is a tie to even 0) */
            return sign;
        uint32_t e = a >> 23;
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* value = m * 2^(e-150); in units of 2^-24 that is m >> (126 - e) */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias exponent, round mantissa from 23 to 10 bits (carry may bump the exponent) */
    uint32_t r = a - 0x38000000u; /* exponent - 112 */
    r += 0x0fffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}


/* ---- tensors --------------------------------------------------------------------------------- */

static inline bool dsops_tensor_present(const dsops_tensor *t) { return t->data != NULL; }

/* Checks presence, rank, dtype (one of `dtypes`, a bit mask of 1u << dtype), non-negative extents,
 * innermost stride 1 when `need_unit_inner`, and that the element count fits in int64.
 * `name` is the argument name used in messages. */
dsops_status dsops_check_tensor(const dsops_tensor *t, const char *name, int ndim, unsigned dtypes,
                                bool need_unit_inner);
/* Checks t->shape[dim] == want ("name.shape[dim] = X, expected WANT (what)"). */
dsops_status dsops_check_dim(const dsops_tensor *t, const char *name, int dim, int64_t want, const char *what);
/* Bytes [lo, hi) spanned by a tensor (hi == lo for an empty one). */
void dsops_tensor_byte_range(const dsops_tensor *t, uintptr_t *lo, uintptr_t *hi);
/* ERR_ALIAS if the byte ranges of `a` and `b` overlap (empty or absent tensors never overlap). */
dsops_status dsops_check_no_overlap(const dsops_tensor *a, const char *an, const dsops_tensor *b, const char *bn);
/* V9 for one output: no two of its elements share memory (DSOPS_ERR_ALIAS). */
dsops_status dsops_check_no_self_overlap(const dsops_tensor *t, const char *name);

/* A named tensor of an operator's argument list. */
typedef struct dsops_named_tensor {
    const dsops_tensor *t;
    const char *name;
} dsops_named_tensor;

/* V9 for an operator: no output overlaps an input or another output. */
dsops_status dsops_check_outputs_apart(const dsops_named_tensor *outs, size_t nouts, const dsops_named_tensor *ins,
                                       size_t nins);

#define DSOPS_DT(x) (1u << (x))

/* dsops_dtype_size, inlined for address arithmetic on hot paths. */
static inline size_t dsops_elem_size(dsops_dtype dt)
{
    static const unsigned char size[DSOPS_DTYPE_LAST + 1] = {0, 2, 2, 4, 1, 4, 8, 1, 1};
    return (unsigned)dt <= DSOPS_DTYPE_LAST ? size[dt] : 0;
}

/* Element pointer helpers (strides in elements). */
static inline void *dsops_at1(const dsops_tensor *t, int64_t i0)
{
    return (char *)t->data + (size_t)(i0 * t->stride[0]) * dsops_elem_size(t->dtype);
}
static inline void *dsops_at2(const dsops_tensor *t, int64_t i0, int64_t i1)
{
    return (char *)t->data + (size_t)(i0 * t->stride[0] + i1 * t->stride[1]) * dsops_elem_size(t->dtype);
}
static inline void *dsops_at3(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    return (char *)t->data +
           (size_t)(i0 * t->stride[0] + i1 * t->stride[1] + i2 * t->stride[2]) * dsops_elem_size(t->dtype);
}

/* ---- context --------------------------------------------------------------------------------- */

struct dsops_context {
    int threads;
    dsops_isa isa;
    size_t scratch_limit; /* the most bytes the three areas below may hold together */
    _Atomic(const void *) owner; /* the calling thread's token while a call runs (see dsops_context_begin) */
    int depth;                   /* nested calls of that thread (a fused operator calling its stages) */
    void *scratch;        /* 64-byte aligned, grown on demand, reused between calls */
    size_t scratch_bytes;
    void *outer;          /* a fused operator's intermediates, kept apart from its stages' scratch */
    size_t outer_bytes;
    void *matmul;         /* the matmul layer's activation copies, kept apart from the operator's scratch */
    size_t matmul_bytes;
};

/* A context for one call: `ctx` itself, or a temporary one when ctx is NULL (released by
 * dsops_context_end). A context that another thread's call holds gives DSOPS_ERR_BUSY; the same
 * thread may nest calls (a fused operator runs its stages on its own context). */
dsops_status dsops_context_begin(dsops_context *ctx, dsops_context **use);
void dsops_context_end(dsops_context *ctx, dsops_context *use);
/* The thread count a call with `ctx` runs on: the context's, or the environment default for NULL. */
dsops_status dsops_context_thread_count(const dsops_context *ctx, int *threads);
/* Returns a 64-byte aligned scratch area of at least `bytes`, or NULL (message set; also when the
 * three areas together would exceed the context's scratch limit, checked before allocating). */
void *dsops_scratch(dsops_context *ctx, size_t bytes);
/* The same for a fused operator's intermediates: a second area that its stages' dsops_scratch calls
 * never move. */
void *dsops_scratch_outer(dsops_context *ctx, size_t bytes);
/* The same for the matmul layer (dsops_linear_run), whose callers keep their own scratch live. */
void *dsops_scratch_matmul(dsops_context *ctx, size_t bytes);

static inline size_t dsops_align64(size_t n) { return (n + 63) & ~(size_t)63; }

#endif
