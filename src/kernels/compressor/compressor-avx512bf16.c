/* The compressor's gated pooling with AVX-512: 16 channels per step, the candidates' softmax weights
 * of those channels kept in `e` between the three passes (max, exp and sum, weighted sum). */
#include <immintrin.h>

#include "../attention/exp-simd.h"
#include "dispatch.h"

/* One step of 16 channels at offset d; m masks a tail. */
static inline __attribute__((always_inline)) __m512 pool16(const float *const *kv, const float *const *sc, int n,
                                                           int64_t d, __mmask16 m, float *e)
{
    __m512 mz = _mm512_set1_ps(-__builtin_inff());
    for (int r = 0; r < n; r++)
        mz = _mm512_max_ps(_mm512_maskz_loadu_ps(m, sc[r] + d), mz); /* NaN logits are skipped (unspecified) */
    __m512 sum = _mm512_setzero_ps();
    for (int r = 0; r < n; r++) {
        __m512 x = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, sc[r] + d), mz);
        __m512 v = exp512(x);
        v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x); /* keep NaN (all logits -Inf) */
        _mm512_store_ps(e + 16 * r, v);
        sum = _mm512_add_ps(sum, v);
    }
    __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), sum); /* e / sum as e * (1 / sum), spec §1.7 */
    __m512 acc = _mm512_setzero_ps();
    for (int r = 0; r < n; r++)
        acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, kv[r] + d),
                                               _mm512_mul_ps(_mm512_load_ps(e + 16 * r), inv)));
    return acc;
}

static void pool(const float *const *kv, const float *const *sc, int n, int64_t D, float *pooled, float *e)
{
    int64_t d = 0;
    for (; d + 16 <= D; d += 16)
        _mm512_storeu_ps(pooled + d, pool16(kv, sc, n, d, (__mmask16)0xffff, e));
    if (d < D) {
        __mmask16 m = (__mmask16)((1u << (D - d)) - 1u);
        _mm512_mask_storeu_ps(pooled + d, m, pool16(kv, sc, n, d, m, e));
    }
}

void dsops_compressor_kernels_init__avx512bf16(dsops_compressor_kernels *k)
{
    k->pool = pool;
}
