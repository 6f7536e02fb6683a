/* Oracle of FlashMLA's FP8 KV caches (spec §2.12), written from the spec: e4m3 by choosing the nearest of
 * its 254 finite values, scales by their definition, every byte placed by its offset. */

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ref.h"
#include "ref_util.h"

/* The value of an e4m3fn byte (spec §2.12): S.EEEE.MMM, bias 7, E = 0 subnormal, S.1111.111 NaN. */
float dsops_ref_f32_from_e4m3(uint8_t b)
{
    int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7)
        return s ? -NAN : NAN;
    double v = e == 0 ? m / 8.0 * pow(2.0, -6) : (1.0 + m / 8.0) * pow(2.0, e - 7);
    return (float)(s ? -v : v);
}

/* The scale of a ue8m0 byte (§2.12): 2^(b - 127); 0xff is NaN. */
float dsops_ref_f32_from_ue8m0(uint8_t b) { return b == 0xff ? NAN : (float)ldexp(1.0, (int)b - 127); }

/* Nearest e4m3fn value, ties to the even byte; beyond 464 (halfway to 480, which e4m3fn lacks), Inf and NaN:
 * the NaN byte with v's sign. */
uint8_t dsops_ref_e4m3_from_f32(float v)
{
    uint8_t sign = signbit(v) ? 0x80 : 0x00;
    double a = fabs((double)v);
    if (isnan(v) || a > 464.0)
        return sign | 0x7f;
    /* the finite bytes 0 ... 0x7e ascend in value: the last one not above a, or the one after it if nearer */
    int lo = 0, hi = 0x7e;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if ((double)dsops_ref_f32_from_e4m3((uint8_t)mid) <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    int best = lo;
    if (lo < 0x7e) {
        double below = a - (double)dsops_ref_f32_from_e4m3((uint8_t)lo);
        double above = (double)dsops_ref_f32_from_e4m3((uint8_t)(lo + 1)) - a;
        if (above < below || (above == below && ((lo + 1) & 1) == 0))
            best = lo + 1;
    }
    return (uint8_t)(sign | best);
}

/* Layout facts of §2.12. */
static void geometry(dsops_fp8_cache_layout layout, int *tiles, int *tile, int *token_bytes)
{
    int v32 = layout == DSOPS_FP8_CACHE_V32;
    *tiles = v32 ? 4 : 7;
    *tile = v32 ? 128 : 64;
    *token_bytes = v32 ? 656 : 576;
}

static uint8_t *cache_at(const dsops_fp8_cache_args *a, int64_t n, int64_t b, int64_t j, int scale_part)
{
    const dsops_tensor *c = &a->cache;
    uint8_t *p = (uint8_t *)c->data;
    if (a->layout == DSOPS_FP8_CACHE_V32)
        return p + n * c->stride[0] + b * c->stride[1] + j * c->stride[2];
    int64_t BS = a->kv.shape[1];
    int64_t off = scale_part ? BS * 576 + b * 8 + j : b * 576 + j;
    return p + n * c->stride[0] + off * c->stride[1];
}

static uint16_t *kv_at(const dsops_fp8_cache_args *a, int64_t n, int64_t b, int64_t d)
{
    const dsops_tensor *t = &a->kv;
    return (uint16_t *)t->data + n * t->stride[0] + b * t->stride[1] + d * t->stride[2];
}

/* The smallest power of two >= max(amax / 448, 1e-4); NaN and Inf pass through. Found by doubling and halving,
 * on purpose not as the library computes it (exp2(ceil(log2(...))), the reference formula of FlashMLA). */
static float scale_of(float amax)
{
    float x = amax / 448.0f;
    if (isnan(x) || isinf(x))
        return x;
    if (x < 1e-4f)
        x = 1e-4f;
    float p = 1.0f;
    while (p < x)
        p *= 2.0f;
    while (p / 2.0f >= x)
        p /= 2.0f;
    return p;
}

void dsops_ref_fp8_cache_quantize(const dsops_fp8_cache_args *a)
{
    int tiles, tile, token_bytes;
    geometry(a->layout, &tiles, &tile, &token_bytes);
    int v32 = a->layout == DSOPS_FP8_CACHE_V32, nope = tiles * tile;
    int64_t NB = a->kv.shape[0], BS = a->kv.shape[1];
    for (int64_t n = 0; n < NB; n++) {
        if (!v32) /* zero the whole block first: padding and the eighth scale byte stay zero */
            for (int64_t j = 0; j < a->cache.shape[1]; j++)
                ((uint8_t *)a->cache.data)[n * a->cache.stride[0] + j * a->cache.stride[1]] = 0;
        for (int64_t b = 0; b < BS; b++) {
            for (int i = 0; i < tiles; i++) {
                float amax = 0.0f;
                int any_nan = 0;
                for (int e = 0; e < tile; e++) {
                    float v = dsops_ref_f32_from_bf16(*kv_at(a, n, b, i * tile + e));
                    if (isnan(v))
                        any_nan = 1;
                    else if (fabsf(v) > amax)
                        amax = fabsf(v);
                }
                float s = scale_of(any_nan ? NAN : amax);
                for (int e = 0; e < tile; e++) {
                    float v = dsops_ref_f32_from_bf16(*kv_at(a, n, b, i * tile + e));
                    *cache_at(a, n, b, i * tile + e, 0) = dsops_ref_e4m3_from_f32(v / s);
                }
                if (v32) {
                    uint8_t bytes[4];
                    memcpy(bytes, &s, 4);
                    for (int k = 0; k < 4; k++)
                        *cache_at(a, n, b, nope + 4 * i + k, 0) = bytes[k];
                } else {
                    uint32_t u;
                    memcpy(&u, &s, 4);
                    *cache_at(a, n, b, i, 1) = isnan(s) || isinf(s) ? 0xff : (uint8_t)(u >> 23);
                }
            }
            int rope_at = v32 ? nope + 4 * tiles : nope;
            for (int r = 0; r < 64; r++) {
                uint16_t h = *kv_at(a, n, b, nope + r);
                *cache_at(a, n, b, rope_at + 2 * r, 0) = (uint8_t)(h & 0xff);
                *cache_at(a, n, b, rope_at + 2 * r + 1, 0) = (uint8_t)(h >> 8);
            }
        }
    }
}

void dsops_ref_fp8_v32_row(const uint16_t *row, uint8_t *dst)
{
    int64_t ks[3] = {1, 1, 576}, cs[3] = {1, 1, 656};
    dsops_fp8_cache_args a = {.layout = DSOPS_FP8_CACHE_V32};
    a.kv = dsops_tensor_make((void *)row, DSOPS_BF16, 3, ks);
    a.cache = dsops_tensor_make(dst, DSOPS_UINT8, 3, cs);
    dsops_ref_fp8_cache_quantize(&a);
}

void dsops_ref_fp8_model1_row(const uint16_t *row, uint8_t *body, uint8_t *scales)
{
    uint8_t block[584];
    int64_t ks[3] = {1, 1, 512}, cs[2] = {1, 584};
    dsops_fp8_cache_args a = {.layout = DSOPS_FP8_CACHE_MODEL1};
    a.kv = dsops_tensor_make((void *)row, DSOPS_BF16, 3, ks);
    a.cache = dsops_tensor_make(block, DSOPS_UINT8, 2, cs);
    dsops_ref_fp8_cache_quantize(&a);
    memcpy(body, block, 576);
    memcpy(scales, block + 576, 8);
}

void dsops_ref_fp8_cache_dequantize(const dsops_fp8_cache_args *a)
{
    int tiles, tile, token_bytes;
    geometry(a->layout, &tiles, &tile, &token_bytes);
    int v32 = a->layout == DSOPS_FP8_CACHE_V32, nope = tiles * tile;
    int64_t NB = a->kv.shape[0], BS = a->kv.shape[1];
    for (int64_t n = 0; n < NB; n++)
        for (int64_t b = 0; b < BS; b++) {
            for (int i = 0; i < tiles; i++) {
                float s;
                if (v32) {
                    uint8_t bytes[4];
                    for (int k = 0; k < 4; k++)
                        bytes[k] = *cache_at(a, n, b, nope + 4 * i + k, 0);
                    memcpy(&s, bytes, 4);
                } else {
                    s = dsops_ref_f32_from_ue8m0(*cache_at(a, n, b, i, 1));
                }
                for (int e = 0; e < tile; e++) {
                    float v = dsops_ref_f32_from_e4m3(*cache_at(a, n, b, i * tile + e, 0));
                    *kv_at(a, n, b, i * tile + e) = dsops_ref_bf16_from_f32(isnan(v) ? v : v * s);
                }
            }
            int rope_at = v32 ? nope + 4 * tiles : nope;
            for (int r = 0; r < 64; r++)
                *kv_at(a, n, b, nope + r) = (uint16_t)(*cache_at(a, n, b, rope_at + 2 * r, 0) |
                                                       (*cache_at(a, n, b, rope_at + 2 * r + 1, 0) << 8));
        }
}
