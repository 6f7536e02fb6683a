/* The compressor's gated pooling with AVX2 + FMA: the two passes of the scalar tier, 8 channels per
 * instruction, the vector exp of exp-avx2.h (the avx512 tier's polynomial). */
#include <immintrin.h>

#include "../common/exp-avx2.h"
#include "dispatch.h"

#define INLINE static inline __attribute__((always_inline))

/* 8 channels from p; the tail (lanes of m set) with vmaskmov, which reads nothing past the row. */
INLINE __m256 load8(const float *p, __m256i m, int full)
{
    return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}

INLINE void store8(float *p, __m256 v, __m256i m, int full)
{
    if (full)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, m, v);
}

INLINE void max_step(const float *z, float *mz, __m256i m, int full)
{
    /* vmaxps returns its second operand when either is NaN: NaN logits are skipped, as in the scalar tier */
    store8(mz, _mm256_max_ps(load8(z, m, full), load8(mz, m, full)), m, full);
}

/* sum += e, acc += a e for 8 channels, e = exp(z - max) (NaN kept when every logit is -Inf). */
INLINE void exp_step(const float *a, const float *z, const float *mz, float *sum, float *acc, __m256i m, int full)
{
    __m256 x = _mm256_sub_ps(load8(z, m, full), load8(mz, m, full));
    __m256 v = _mm256_blendv_ps(dsops_exp8_avx2(x), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    store8(sum, _mm256_add_ps(load8(sum, m, full), v), m, full);
    store8(acc, _mm256_fmadd_ps(load8(a, m, full), v, load8(acc, m, full)), m, full);
}

/* e: 3 D floats (maximum, sum, weighted sum), as in the scalar tier. */
static void pool__avx2(const float *const *kv, const float *const *sc, int n, int64_t D, float *pooled, float *e)
{
    float *mz = e, *sum = e + D, *acc = e + 2 * D;
    int64_t full = D / 8 * 8;
    __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(D - full)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int64_t d = 0; d < D; d++) {
        mz[d] = -__builtin_inff();
        sum[d] = 0.0f;
        acc[d] = 0.0f;
    }
    for (int r = 0; r < n; r++) {
        const float *z = sc[r];
        int64_t d = 0;
        for (; d < full; d += 8)
            max_step(z + d, mz + d, tail, 1);
        if (d < D)
            max_step(z + d, mz + d, tail, 0);
    }
    for (int r = 0; r < n; r++) {
        const float *a = kv[r], *z = sc[r];
        int64_t d = 0;
        for (; d < full; d += 8)
            exp_step(a + d, z + d, mz + d, sum + d, acc + d, tail, 1);
        if (d < D)
            exp_step(a + d, z + d, mz + d, sum + d, acc + d, tail, 0);
    }
    for (int64_t d = 0; d < D; d++)
        pooled[d] = acc[d] * (1.0f / sum[d]);
}

const dsops_compressor_kernels dsops_compressor_kernels__avx2 = {
    .pool = pool__avx2,
};
