/* FlashMLA's FP8 KV caches (spec §2.12): quantise bf16 rows into the V32 or MODEL1 byte layout and back.
 * Portable C, one pass over the tokens (a conversion helper, not a hot path): no threads, no scratch. */

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "dsops.h"
#include "internal.h"
#include "primitives.h"

/* What a layout fixes (spec §2.12). */
typedef struct fp8_geometry {
    int64_t dim, tiles, tile;  /* D, tile count, values per tile; D - tiles * tile = 64 rope values */
    int64_t token_bytes;       /* V32: the row of one token; MODEL1: the e4m3 + rope part of one token */
    int64_t scale_bytes;       /* MODEL1: the scale part of one token (7 ue8m0 + 1 zero) */
} fp8_geometry;

enum { ROPE = 64, E4M3_NAN = 0x7f };

static fp8_geometry geometry_of(dsops_fp8_cache_layout layout)
{
    if (layout == DSOPS_FP8_CACHE_V32)
        return (fp8_geometry){.dim = 576, .tiles = 4, .tile = 128, .token_bytes = 656, .scale_bytes = 0};
    return (fp8_geometry){.dim = 512, .tiles = 7, .tile = 64, .token_bytes = 576, .scale_bytes = 8};
}

/* fp32 -> e4m3fn, round to nearest even. |v| above 464 (whose nearest even neighbour would be 480, the NaN
 * pattern), Inf and NaN give the NaN pattern with v's sign; 464 itself rounds to 448. */
static uint8_t e4m3_from_f32(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    const uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x43f00000u) /* 480 and above, Inf, NaN */
        return sign | E4M3_NAN;
    if (a < 0x3c800000u) { /* below 2^-6: multiples of 2^-9, the count rounded to nearest even */
        float m = fabsf(v) * 512.0f; /* exact: a power-of-two scaling of a value below 8 */
        float r = (m + 0x1p23f) - 0x1p23f;
        return sign | (uint8_t)r;   /* 8 is the smallest normal, 0x08 */
    }
    a += ((uint32_t)(7 - 127) << 23) + 0x7ffffu + ((a >> 20) & 1u); /* rebias and round the 20 dropped bits */
    return sign | (uint8_t)(a >> 20);                                /* 464 <= |v| < 480 rounds to 0x7f: NaN */
}

/* The tile scale of §2.12 as the reference computes it: 2^ceil(log2(max(amax / 448, 1e-4))) in fp32;
 * NaN stays NaN (the clamp propagates it), Inf stays Inf. */
static float tile_scale(float amax)
{
    float inv = amax / 448.0f;
    if (isnan(inv) || isinf(inv))
        return inv;
    if (inv < 1e-4f)
        inv = 1e-4f;
    return exp2f(ceilf(log2f(inv)));
}

/* ue8m0 (an exponent byte, bias 127, 0xff NaN) of a power-of-two scale; NaN and Inf give 0xff. */
static uint8_t ue8m0_from_scale(float s)
{
    uint32_t u;
    memcpy(&u, &s, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return 0xff;
    return (uint8_t)((u >> 23) & 0xffu);
}

static dsops_status fp8_cache_check(const dsops_fp8_cache_args *a, fp8_geometry *g)
{
    if (!a)
        return dsops_fail(DSOPS_ERR_NULL, "args is NULL");
    if (a->layout != DSOPS_FP8_CACHE_V32 && a->layout != DSOPS_FP8_CACHE_MODEL1)
        return dsops_fail(DSOPS_ERR_PARAM, "layout = %d is not a dsops_fp8_cache_layout value", (int)a->layout);
    *g = geometry_of(a->layout);
    const dsops_tensor *kv = &a->kv, *c = &a->cache;
    DSOPS_TRY(dsops_check_tensor(kv, "kv", 3, DSOPS_DT(DSOPS_BF16), true));
    DSOPS_TRY(dsops_check_dim(kv, "kv", 2, g->dim, a->layout == DSOPS_FP8_CACHE_V32 ? "576 (V32)" : "512 (MODEL1)"));
    const int64_t NB = kv->shape[0], BS = kv->shape[1];
    if (a->layout == DSOPS_FP8_CACHE_V32) {
        DSOPS_TRY(dsops_check_tensor(c, "cache", 3, DSOPS_DT(DSOPS_UINT8), true));
        DSOPS_TRY(dsops_check_dim(c, "cache", 0, NB, "NB of kv"));
        DSOPS_TRY(dsops_check_dim(c, "cache", 1, BS, "BS of kv"));
        DSOPS_TRY(dsops_check_dim(c, "cache", 2, g->token_bytes, "656 bytes per token (V32)"));
    } else {
        DSOPS_TRY(dsops_check_tensor(c, "cache", 2, DSOPS_DT(DSOPS_UINT8), true));
        DSOPS_TRY(dsops_check_dim(c, "cache", 0, NB, "NB of kv"));
        const int64_t need = BS * (g->token_bytes + g->scale_bytes);
        if (c->shape[1] < need)
            return dsops_fail(DSOPS_ERR_SHAPE, "cache.shape[1] = %lld, expected >= BS * 584 = %lld (MODEL1)",
                              (long long)c->shape[1], (long long)need);
    }
    DSOPS_TRY(dsops_check_no_self_overlap(kv, "kv"));
    DSOPS_TRY(dsops_check_no_self_overlap(c, "cache"));
    return dsops_check_no_overlap(kv, "kv", c, "cache");
}

/* Byte j of token (n, b)'s e4m3 + rope part, and of its scale part (MODEL1). */
static uint8_t *token_byte(const dsops_fp8_cache_args *a, const fp8_geometry *g, int64_t n, int64_t b, int64_t j)
{
    const dsops_tensor *c = &a->cache;
    if (a->layout == DSOPS_FP8_CACHE_V32)
        return (uint8_t *)c->data + n * c->stride[0] + b * c->stride[1] + j * c->stride[2];
    return (uint8_t *)c->data + n * c->stride[0] + (b * g->token_bytes + j) * c->stride[1];
}

static uint8_t *scale_byte(const dsops_fp8_cache_args *a, const fp8_geometry *g, int64_t n, int64_t b, int64_t j)
{
    const dsops_tensor *c = &a->cache;
    const int64_t BS = a->kv.shape[1];
    return (uint8_t *)c->data + n * c->stride[0] + (BS * g->token_bytes + b * g->scale_bytes + j) * c->stride[1];
}

static uint16_t *kv_value(const dsops_fp8_cache_args *a, int64_t n, int64_t b, int64_t d)
{
    const dsops_tensor *kv = &a->kv;
    return (uint16_t *)kv->data + n * kv->stride[0] + b * kv->stride[1] + d * kv->stride[2];
}

/* The V32 scales are fp32 in the row (little-endian bytes after the 512 e4m3 values). */
static void put_f32(const dsops_fp8_cache_args *a, const fp8_geometry *g, int64_t n, int64_t b, int64_t j, float v)
{
    uint8_t bytes[4];
    memcpy(bytes, &v, 4);
    for (int k = 0; k < 4; k++)
        *token_byte(a, g, n, b, j + k) = bytes[k];
}

static float get_f32(const dsops_fp8_cache_args *a, const fp8_geometry *g, int64_t n, int64_t b, int64_t j)
{
    uint8_t bytes[4];
    for (int k = 0; k < 4; k++)
        bytes[k] = *token_byte(a, g, n, b, j + k);
    float v;
    memcpy(&v, bytes, 4);
    return v;
}

static void quantize_token(const dsops_fp8_cache_args *a, const fp8_geometry *g, int64_t n, int64_t b)
{
    const int64_t nope = g->tiles * g->tile;
    const bool v32 = a->layout == DSOPS_FP8_CACHE_V32;
    for (int64_t i = 0; i < g->tiles; i++) {
        float amax = 0.0f;
        bool nan = false;
        for (int64_t e = 0; e < g->tile; e++) {
            float v = dsops_bf16_value(*kv_value(a, n, b, i * g->tile + e));
            nan |= isnan(v);
            amax = fabsf(v) > amax ? fabsf(v) : amax;
        }
        const float scale = tile_scale(nan ? NAN : amax);
        for (int64_t e = 0; e < g->tile; e++) {
            float v = dsops_bf16_value(*kv_value(a, n, b, i * g->tile + e));
            *token_byte(a, g, n, b, i * g->tile + e) = e4m3_from_f32(v / scale);
        }
        if (v32)
            put_f32(a, g, n, b, nope + 4 * i, scale);
        else
            *scale_byte(a, g, n, b, i) = ue8m0_from_scale(scale);
    }
    const int64_t rope_at = v32 ? nope + 4 * g->tiles : nope; /* bytes */
    for (int64_t r = 0; r < ROPE; r++) {
        uint16_t h = *kv_value(a, n, b, nope + r);
        *token_byte(a, g, n, b, rope_at + 2 * r) = (uint8_t)(h & 0xffu);
        *token_byte(a, g, n, b, rope_at + 2 * r + 1) = (uint8_t)(h >> 8);
    }
    if (!v32)
        for (int64_t j = g->tiles; j < g->scale_bytes; j++)
            *scale_byte(a, g, n, b, j) = 0;
}

static void dequantize_token(const dsops_fp8_cache_args *a, const fp8_geometry *g, int64_t n, int64_t b)
{
    const int64_t nope = g->tiles * g->tile;
    const bool v32 = a->layout == DSOPS_FP8_CACHE_V32;
    for (int64_t i = 0; i < g->tiles; i++) {
        const float scale = v32 ? get_f32(a, g, n, b, nope + 4 * i) : dsops_ue8m0_value(*scale_byte(a, g, n, b, i));
        for (int64_t e = 0; e < g->tile; e++) {
            const float v = dsops_e4m3_value(*token_byte(a, g, n, b, i * g->tile + e));
            /* a NaN value keeps its own sign (as x86 arithmetic propagates the NaN operand) */
            *kv_value(a, n, b, i * g->tile + e) = dsops_bf16_round_bits(isnan(v) ? v : v * scale);
        }
    }
    const int64_t rope_at = v32 ? nope + 4 * g->tiles : nope;
    for (int64_t r = 0; r < ROPE; r++)
        *kv_value(a, n, b, nope + r) = (uint16_t)(*token_byte(a, g, n, b, rope_at + 2 * r) |
                                                  (*token_byte(a, g, n, b, rope_at + 2 * r + 1) << 8));
}

void dsops_fp8_v32_row(const uint16_t *row, uint8_t *dst)
{
    /* the cache layer's quantiser on a one-token [1, 1, 576] / [1, 1, 656] view */
    const int64_t ks[3] = {1, 1, 576}, cs[3] = {1, 1, 656};
    dsops_fp8_cache_args a = {.layout = DSOPS_FP8_CACHE_V32};
    a.kv = dsops_tensor_make((void *)row, DSOPS_BF16, 3, ks);
    a.cache = dsops_tensor_make(dst, DSOPS_UINT8, 3, cs);
    const fp8_geometry g = geometry_of(DSOPS_FP8_CACHE_V32);
    quantize_token(&a, &g, 0, 0);
}

void dsops_fp8_model1_row(const uint16_t *row, uint8_t *body, uint8_t *scales)
{
    /* a one-token block [1, 584]: its 576 body bytes, then its 8 scale bytes */
    uint8_t block[584];
    const int64_t ks[3] = {1, 1, 512}, cs[2] = {1, 584};
    dsops_fp8_cache_args a = {.layout = DSOPS_FP8_CACHE_MODEL1};
    a.kv = dsops_tensor_make((void *)row, DSOPS_BF16, 3, ks);
    a.cache = dsops_tensor_make(block, DSOPS_UINT8, 2, cs);
    const fp8_geometry g = geometry_of(DSOPS_FP8_CACHE_MODEL1);
    quantize_token(&a, &g, 0, 0);
    memcpy(body, block, 576);
    memcpy(scales, block + 576, 8);
}

/* Both directions: every token of every block, and (quantising MODEL1) the block's padding. */
static dsops_status fp8_cache_run(const dsops_fp8_cache_args *a, bool quantize)
{
    fp8_geometry g;
    DSOPS_TRY(fp8_cache_check(a, &g));
    dsops_clear_error();
    const int64_t NB = a->kv.shape[0], BS = a->kv.shape[1];
    for (int64_t n = 0; n < NB; n++) {
        for (int64_t b = 0; b < BS; b++)
            (quantize ? quantize_token : dequantize_token)(a, &g, n, b);
        if (quantize && a->layout == DSOPS_FP8_CACHE_MODEL1)
            for (int64_t j = BS * (g.token_bytes + g.scale_bytes); j < a->cache.shape[1]; j++)
                *((uint8_t *)a->cache.data + n * a->cache.stride[0] + j * a->cache.stride[1]) = 0;
    }
    return DSOPS_OK;
}

dsops_status dsops_fp8_cache_quantize(dsops_context *ctx, const dsops_fp8_cache_args *a)
{
    (void)ctx; /* one pass over the tokens: no threads, no scratch */
    return fp8_cache_run(a, true);
}

dsops_status dsops_fp8_cache_dequantize(dsops_context *ctx, const dsops_fp8_cache_args *a)
{
    (void)ctx;
    return fp8_cache_run(a, false);
}
