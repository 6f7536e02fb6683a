/* In-register transposes for AVX2 kernels (the packers of the attention and indexer families).
 * Included only by kernel files compiled with -mavx2. */
#ifndef DSOPS_TRANSPOSE_AVX2_H
#define DSOPS_TRANSPOSE_AVX2_H

#include <immintrin.h>

/* Transposes 8 rows of 8 32-bit elements in place: r[i] element j -> r[j] element i. */
static inline __attribute__((always_inline)) void transpose8x8_epi32(__m256i r[8])
{
    __m256i a[8], b[8];
    for (int i = 0; i < 8; i += 2) {
        a[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        a[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        b[i] = _mm256_unpacklo_epi64(a[i], a[i + 2]);
        b[i + 1] = _mm256_unpackhi_epi64(a[i], a[i + 2]);
        b[i + 2] = _mm256_unpacklo_epi64(a[i + 1], a[i + 3]);
        b[i + 3] = _mm256_unpackhi_epi64(a[i + 1], a[i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2x128_si256(b[i], b[i + 4], 0x20);
        r[i + 4] = _mm256_permute2x128_si256(b[i], b[i + 4], 0x31);
    }
}

#endif
