/* The compressor's gated pooling with AVX-512: two passes over the candidates' rows, 16 channels per
 * instruction, per-channel state (maximum, sum, weighted sum) in a small buffer that stays in L1. */
#include <immintrin.h>

#include "../common/exp-simd.h"
#include "dispatch.h"

/* 16 values at p; masked loads (slower here even with a full mask) only for a tail. */
static inline __attribute__((always_inline)) __m512 load16(const float *p, __mmask16 m, int full)
{
    return full ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
}

/* sum += e, acc += a e for 16 channels, e = exp(z - max) (NaN kept when every logit is -Inf). */
static inline __attribute__((always_inline)) void exp_step(const float *a, const float *z, const float *mz, float *sum,
                                                           float *acc, __mmask16 m, int full)
{
    __m512 x = _mm512_sub_ps(load16(z, m, full), load16(mz, m, full));
    __m512 v = exp512(x);
    v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
    __m512 s = _mm512_add_ps(load16(sum, m, full), v), c = _mm512_add_ps(load16(acc, m, full), _mm512_mul_ps(load16(a, m, full), v));
    if (full) {
        _mm512_storeu_ps(sum, s);
        _mm512_storeu_ps(acc, c);
    } else {
        _mm512_mask_storeu_ps(sum, m, s);
        _mm512_mask_storeu_ps(acc, m, c);
    }
}

/* Two passes over the candidates, each reading whole rows front to back (the rows are C R separate
 * state rows, so channel-by-channel access would make them that many interleaved streams): the maximum
 * of the logits per channel; then exp, their sum and the weighted sum of the values together. Every
 * channel still sees its candidates in list order. e: 3 D floats (maximum, sum, weighted sum). */
static void pool(const float *const *kv, const float *const *sc, int n, int64_t D, float *pooled, float *e)
{
    float *mz = e, *sum = e + D, *acc = e + 2 * D;
    int64_t full = D / 16 * 16;
    __mmask16 tail = (__mmask16)((1u << (D - full)) - 1u);
    for (int64_t d = 0; d < D; d++) {
        mz[d] = -__builtin_inff();
        sum[d] = 0.0f;
        acc[d] = 0.0f;
    }
    for (int r = 0; r < n; r++) {
        int64_t d = 0;
        for (; d < full; d += 16) /* NaN logits are skipped (unspecified) */
            _mm512_storeu_ps(mz + d, _mm512_max_ps(load16(sc[r] + d, 0, 1), _mm512_loadu_ps(mz + d)));
        if (d < D)
            _mm512_mask_storeu_ps(mz + d, tail, _mm512_max_ps(load16(sc[r] + d, tail, 0), load16(mz + d, tail, 0)));
    }
    for (int r = 0; r < n; r++) {
        int64_t d = 0;
        for (; d < full; d += 16)
            exp_step(kv[r] + d, sc[r] + d, mz + d, sum + d, acc + d, 0, 1);
        if (d < D)
            exp_step(kv[r] + d, sc[r] + d, mz + d, sum + d, acc + d, tail, 0);
    }
    /* sum_r kv_r e_r / sum_r e_r: the same value as sum_r kv_r (e_r / sum) up to fp32 rounding (the
     * division distributed over the sum, spec §1.7) */
    for (int64_t d = 0; d < D; d++)
        pooled[d] = acc[d] * (1.0f / sum[d]);
}

const dsops_compressor_kernels dsops_compressor_kernels__avx512bf16 = {
    .pool = pool,
};
