/* fp8_cache_quantize / fp8_cache_dequantize (FlashMLA's V32 and MODEL1 FP8 KV caches, spec §2.12) against the
 * oracle, byte for byte:
 *  - every e4m3 byte decodes as the oracle says, and every value rounds to the oracle's byte (all bf16 values
 *    and the rounding boundaries between e4m3 values);
 *  - whole caches of random rows, rows of tiny, huge, zero, NaN and Inf values, both layouts, padded and
 *    strided caches; dequantisation of those caches and of caches of random bytes;
 *  - dequantised values within half an e4m3 step of the row (scale x 2^-4 relative), rope exact;
 *  - cache_store into both row layouts against the oracle (padding tokens, rows not addressed untouched);
 *  - validation: bad layout, ranks, extents, dtypes, a MODEL1 block too short, overlap; nothing written. */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsops.h"
#include "ref.h"
#include "test_util.h"

static dsops_context *ctx;

static void test_e4m3_values(void)
{
    if (!tu_selected("e4m3"))
        return;
    /* decode through a one-token MODEL1 block whose scales are 2^0 (ue8m0 127): kv = bf16(e4m3 value) */
    int bad = 0;
    for (int b = 0; b < 256; b++) {
        float want = dsops_ref_f32_from_e4m3((uint8_t)b);
        uint8_t block[584] = {0};
        for (int j = 0; j < 448; j++)
            block[j] = (uint8_t)b;
        for (int i = 0; i < 7; i++)
            block[576 + i] = 127;
        uint16_t kv[512];
        dsops_fp8_cache_args a = {.layout = DSOPS_FP8_CACHE_MODEL1};
        int64_t ks[3] = {1, 1, 512}, cs[2] = {1, 584};
        a.kv = dsops_tensor_make(kv, DSOPS_BF16, 3, ks);
        a.cache = dsops_tensor_make(block, DSOPS_UINT8, 2, cs);
        if (dsops_fp8_cache_dequantize(ctx, &a) != DSOPS_OK)
            bad++;
        uint16_t w = dsops_ref_bf16_from_f32(want);
        bad += kv[0] != w && !(isnan(want) && isnan(tu_f32(kv[0])) && signbit(want) == signbit(tu_f32(kv[0])));
    }
    tu_check(bad == 0, "e4m3: the 256 bytes decode as the oracle's values (%d differ)", bad);

    /* encode: every finite bf16 value / 1 (scale 1 for amax 448) and the midpoints between e4m3 values */
    bad = 0;
    uint16_t row[576];
    uint8_t lib[656], ref[656];
    for (uint32_t h = 0; h < 65536; h += 64) {
        for (int j = 0; j < 512; j++) { /* 512 consecutive bf16 bit patterns, one value per tile at 448 */
            uint16_t v = (uint16_t)(h + (uint32_t)j / 8);
            float f = tu_f32(v);
            row[j] = (j % 128 == 0 || !(fabsf(f) <= 448.0f)) ? tu_bf16(448.0f) : v;
        }
        for (int j = 512; j < 576; j++)
            row[j] = (uint16_t)(h + (uint32_t)j);
        dsops_fp8_cache_args a = {.layout = DSOPS_FP8_CACHE_V32};
        int64_t ks[3] = {1, 1, 576}, cs[3] = {1, 1, 656};
        a.kv = dsops_tensor_make(row, DSOPS_BF16, 3, ks);
        a.cache = dsops_tensor_make(lib, DSOPS_UINT8, 3, cs);
        bad += dsops_fp8_cache_quantize(ctx, &a) != DSOPS_OK;
        a.cache.data = ref;
        dsops_ref_fp8_cache_quantize(&a);
        bad += memcmp(lib, ref, sizeof lib) != 0;
    }
    tu_check(bad == 0, "e4m3: every bf16 value up to 448 quantises to the oracle's bytes (%d rows differ)", bad);
    /* the values halfway between neighbouring e4m3 values and one ulp either side: ties to the even byte.
     * They are fp32 values, not bf16, so they are fed as quotients: kv holds bf16(2 v) with amax 448 * 2
     * (scale 2), which is exact for these values (at most 5 significant bits). */
    bad = 0;
    int probes_run = 0;
    for (int b = 0; b < 0x7e; b++) {
        float lo = dsops_ref_f32_from_e4m3((uint8_t)b), hi = dsops_ref_f32_from_e4m3((uint8_t)(b + 1));
        float mid = (lo + hi) / 2;
        for (int s = 0; s < 2; s++) {
            float v = s ? -mid : mid;
            uint16_t h = tu_bf16(2.0f * v);
            if (tu_f32(h) != 2.0f * v)
                continue; /* not a bf16 value: covered by the sweep above */
            for (int j = 0; j < 576; j++)
                row[j] = j == 0 ? tu_bf16(896.0f) : h;
            dsops_fp8_cache_args a = {.layout = DSOPS_FP8_CACHE_V32};
            int64_t ks[3] = {1, 1, 576}, cs[3] = {1, 1, 656};
            a.kv = dsops_tensor_make(row, DSOPS_BF16, 3, ks);
            a.cache = dsops_tensor_make(lib, DSOPS_UINT8, 3, cs);
            bad += dsops_fp8_cache_quantize(ctx, &a) != DSOPS_OK;
            uint8_t want = dsops_ref_e4m3_from_f32(v);
            bad += lib[1] != want || (want & 1) != 0; /* a tie lands on the even byte */
            probes_run++;
        }
    }
    tu_check(bad == 0 && probes_run > 100, "e4m3: %d midpoints between neighbours round to the even byte (%d wrong)",
             probes_run, bad);
}

/* A cache of the given layout for kv [NB, BS, D] with padding: V32 rows of 656 + pad bytes, MODEL1 blocks of
 * BB bytes. Returns the allocation; the tensor is set in a->cache. */
static uint8_t *make_cache(dsops_fp8_cache_args *a, int64_t NB, int64_t BS, int64_t pad, size_t *bytes)
{
    if (a->layout == DSOPS_FP8_CACHE_V32) {
        int64_t row = 656 + pad;
        *bytes = (size_t)(NB * BS * row);
        uint8_t *p = tu_alloc(*bytes);
        int64_t shape[3] = {NB, BS, 656};
        a->cache = dsops_tensor_make(p, DSOPS_UINT8, 3, shape);
        a->cache.stride[1] = row;
        a->cache.stride[0] = BS * row;
        return p;
    }
    int64_t BB = (BS * 584 + 575) / 576 * 576 + pad;
    *bytes = (size_t)(NB * BB);
    uint8_t *p = tu_alloc(*bytes);
    int64_t shape[2] = {NB, BB};
    a->cache = dsops_tensor_make(p, DSOPS_UINT8, 2, shape);
    return p;
}

/* Row contents: 0 random N(0, 1)-ish, 1 tiny (amax below 448e-4), 2 huge, 3 zeros, 4 one NaN per tile,
 * 5 one Inf per tile, 6 mixed tiles. */
static void fill_rows(uint16_t *kv, int64_t tokens, int64_t D, int kind, tu_rng *r)
{
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t d = 0; d < D; d++) {
            float v = tu_rng_uniform(r, -2.0f, 2.0f);
            int k = kind == 6 ? (int)((t + d / 64) % 6) : kind;
            if (k == 1)
                v *= 1e-6f;
            else if (k == 2)
                v *= 1e30f;
            else if (k == 3)
                v = 0.0f;
            else if (k == 4 && d % 61 == 5)
                v = (d & 1) ? NAN : -NAN;
            else if (k == 5 && d % 59 == 3)
                v = (d & 1) ? INFINITY : -INFINITY;
            kv[t * D + d] = tu_bf16(v);
        }
}

static void test_caches(void)
{
    if (!tu_selected("caches"))
        return;
    tu_rng r;
    tu_rng_seed(&r, tu_label_seed("caches"));
    for (int layout = 0; layout < 2; layout++)
        for (int kind = 0; kind < 7; kind++)
            for (int pad = 0; pad < 2; pad++) {
                const int64_t NB = 3, BS = layout ? 61 : 5, D = layout ? 512 : 576;
                dsops_fp8_cache_args a = {.layout = (dsops_fp8_cache_layout)layout};
                uint16_t *kv = tu_alloc(sizeof(uint16_t) * (size_t)(NB * BS * D));
                fill_rows(kv, NB * BS, D, kind, &r);
                int64_t ks[3] = {NB, BS, D};
                a.kv = dsops_tensor_make(kv, DSOPS_BF16, 3, ks);
                size_t bytes;
                uint8_t *lib = make_cache(&a, NB, BS, pad ? 7 : 0, &bytes);
                memset(lib, 0xa5, bytes);
                uint8_t *ref = tu_memdup(lib, bytes);
                char label[64];
                snprintf(label, sizeof label, "%s kind %d pad %d", layout ? "model1" : "v32", kind, pad);
                tu_check_accepted(label, dsops_fp8_cache_quantize(ctx, &a));
                dsops_fp8_cache_args ra = a;
                ra.cache.data = ref;
                dsops_ref_fp8_cache_quantize(&ra);
                tu_check_same_bytes(label, lib, bytes, ref, bytes, "cache bytes against the oracle");

                /* back to rows: the oracle's rows exactly, and close to the input where it was finite */
                uint16_t *back = tu_alloc(sizeof(uint16_t) * (size_t)(NB * BS * D));
                uint16_t *rback = tu_alloc(sizeof(uint16_t) * (size_t)(NB * BS * D));
                dsops_fp8_cache_args da = a, rda = ra;
                da.kv.data = back;
                rda.kv.data = rback;
                tu_check_accepted(label, dsops_fp8_cache_dequantize(ctx, &da));
                dsops_ref_fp8_cache_dequantize(&rda);
                tu_check_same_bytes(label, back, sizeof(uint16_t) * (size_t)(NB * BS * D), rback,
                                    sizeof(uint16_t) * (size_t)(NB * BS * D), "rows against the oracle");
                if (kind <= 3) {
                    int64_t far = 0, rope_bad = 0, nope = D - 64;
                    /* e4m3 keeps 4 significant bits (half a step: 2^-4 relative) down to 2^-6 scale, below that
                     * steps of 2^-9 scale; the scale is under 2 amax / 448 (at least 2^-13); bf16 adds 2^-9 */
                    for (int64_t t = 0; t < NB * BS; t++) {
                        float amax = 0.0f;
                        for (int64_t d = 0; d < nope; d++)
                            amax = fmaxf(amax, fabsf(tu_f32(kv[t * D + d])));
                        const float floor_step = fmaxf(2.0f * amax / 448.0f, 0x1p-13f) * 0x1p-10f;
                        for (int64_t d = 0; d < D; d++) {
                            float x = tu_f32(kv[t * D + d]), y = tu_f32(back[t * D + d]);
                            if (d >= nope)
                                rope_bad += kv[t * D + d] != back[t * D + d];
                            else if (fabsf(x - y) > fabsf(x) * (0x1p-4f + 0x1p-8f) + floor_step)
                                far++;
                        }
                    }
                    tu_check(far == 0 && rope_bad == 0, "%s: round trip within half an e4m3 step (%lld far), rope"
                             " exact (%lld differ)", label, (long long)far, (long long)rope_bad);
                }
                free(kv), free(lib), free(ref), free(back), free(rback);
            }

    /* dequantising caches of random bytes (any scale, NaN patterns included) */
    for (int layout = 0; layout < 2; layout++) {
        const int64_t NB = 2, BS = 7, D = layout ? 512 : 576;
        dsops_fp8_cache_args a = {.layout = (dsops_fp8_cache_layout)layout};
        int64_t ks[3] = {NB, BS, D};
        uint16_t *kv = tu_alloc(sizeof(uint16_t) * (size_t)(NB * BS * D)),
                 *rkv = tu_alloc(sizeof(uint16_t) * (size_t)(NB * BS * D));
        a.kv = dsops_tensor_make(kv, DSOPS_BF16, 3, ks);
        size_t bytes;
        uint8_t *c = make_cache(&a, NB, BS, 3, &bytes);
        for (size_t i = 0; i < bytes; i++)
            c[i] = (uint8_t)tu_rng_u64(&r);
        if (layout == DSOPS_FP8_CACHE_V32) /* fp32 scales of random bits are any value: keep them in range */
            for (int64_t t = 0; t < NB * BS; t++)
                for (int i = 0; i < 4; i++) {
                    float s = ldexpf(tu_rng_uniform(&r, 0.5f, 1.0f), (int)tu_rng_int(&r, -30, 30));
                    memcpy(c + t * (656 + 3) + 512 + 4 * i, &s, 4);
                }
        dsops_fp8_cache_args ra = a;
        ra.kv.data = rkv;
        tu_check_accepted("random bytes", dsops_fp8_cache_dequantize(ctx, &a));
        dsops_ref_fp8_cache_dequantize(&ra);
        tu_check_same_bytes(layout ? "model1 random bytes" : "v32 random bytes", kv,
                            sizeof(uint16_t) * (size_t)(NB * BS * D), rkv, sizeof(uint16_t) * (size_t)(NB * BS * D),
                            "rows against the oracle");
        free(kv), free(rkv), free(c);
    }
}

/* cache_store into FP8 rows (V32 [NB, BS, 656]; MODEL1 blocks viewed [NB, BS, 584] with a padded block length):
 * the oracle's bytes, padding tokens and unaddressed rows untouched; a uint8 cache of another row size refused. */
static void test_cache_store(void)
{
    if (!tu_selected("cache_store"))
        return;
    tu_rng r;
    tu_rng_seed(&r, tu_label_seed("cache_store"));
    for (int layout = 0; layout < 2; layout++) {
        const int64_t NB = 3, BS = 5, W = layout ? 512 : 576, T = 7;
        const int64_t row = layout ? 584 : 656, block = layout ? (BS * 584 + 575) / 576 * 576 : BS * 656;
        uint16_t *src = tu_alloc(sizeof(uint16_t) * (size_t)(T * W)); /* [T, W] bf16 */
        fill_rows(src, T, W, 6, &r);
        const int64_t slots[7] = {14, -1, 0, 9, 5, -3, 2}, ss[2] = {T, W}, is[1] = {T}, cs[3] = {NB, BS, row};
        const size_t bytes = (size_t)(NB * block);
        uint8_t *lib = tu_alloc(bytes);
        memset(lib, 0xa5, bytes);
        uint8_t *ref = tu_memdup(lib, bytes), *before = tu_memdup(lib, bytes);
        dsops_cache_store_args a = {0};
        a.src = dsops_tensor_make(src, DSOPS_BF16, 2, ss);
        a.cache_index = dsops_tensor_make((void *)slots, DSOPS_INT64, 1, is);
        a.cache = dsops_tensor_make(lib, DSOPS_UINT8, 3, cs);
        a.cache.stride[0] = block;
        const char *name = layout ? "cache_store model1" : "cache_store v32";
        tu_check_accepted(name, dsops_cache_store(ctx, &a));
        dsops_cache_store_args ra = a;
        ra.cache.data = ref;
        dsops_ref_cache_store(&ra);
        tu_check_same_bytes(name, lib, bytes, ref, bytes, "cache bytes against the oracle");
        /* only the five addressed rows may change */
        int64_t changed = 0;
        for (size_t i = 0; i < bytes; i++)
            changed += lib[i] != before[i];
        tu_check(changed > 0 && changed <= 5 * (row + 1), "%s: %lld bytes changed, at most the 5 addressed rows", name,
                 (long long)changed);
        /* each rule of a uint8 cache refused before anything is written */
        memcpy(ref, lib, bytes);
        float scale_buf[1];
        const int64_t one[1] = {1};
        struct {
            const char *what, *frag;
            dsops_status want;
        } bad[4] = {{"rows of another size", "cache.shape[2]", DSOPS_ERR_SHAPE},
                    {"src of another width", "src.shape[1]", DSOPS_ERR_SHAPE},
                    {"cache_scale given", "cache_scale", DSOPS_ERR_PARAM},
                    {"MODEL1 blocks overlapping", "strides", DSOPS_ERR_SHAPE}};
        for (int k = 0; k < (layout ? 4 : 3); k++) {
            dsops_cache_store_args b = a;
            if (k == 0)
                b.cache.shape[2] = layout ? 583 : 655;
            else if (k == 1)
                b.src.shape[1] = W - 64;
            else if (k == 2)
                b.cache_scale = dsops_tensor_make(scale_buf, DSOPS_FP32, 1, one);
            else
                b.cache.stride[0] = BS * 584 - 1;
            char label[96];
            snprintf(label, sizeof label, "%s: %s", name, bad[k].what);
            tu_check_rejected(label, dsops_cache_store(ctx, &b), bad[k].want, bad[k].frag);
            tu_check_unchanged(label, lib, ref, bytes, "cache written on error");
        }
        free(src), free(lib), free(ref), free(before);
    }
}

static void test_validation(void)
{
    if (!tu_selected("validation"))
        return;
    uint16_t kv[2 * 4 * 576] = {0};
    static uint8_t cache[2 * 4 * 656 + 4096];
    memset(cache, 0x5a, sizeof cache);
    uint8_t *before = tu_memdup(cache, sizeof cache);
    int64_t ks[3] = {2, 4, 576}, cs[3] = {2, 4, 656}, ks4[3] = {2, 4, 512}, cs4[2] = {2, 4 * 584 - 1};
    dsops_fp8_cache_args good = {.layout = DSOPS_FP8_CACHE_V32};
    good.kv = dsops_tensor_make(kv, DSOPS_BF16, 3, ks);
    good.cache = dsops_tensor_make(cache, DSOPS_UINT8, 3, cs);
    struct {
        const char *name;
        dsops_fp8_cache_args a;
        dsops_status want;
        const char *frag;
    } t[12];
    int n = 0;
    t[n].name = "bad layout", t[n].a = good, t[n].a.layout = (dsops_fp8_cache_layout)7, t[n].want = DSOPS_ERR_PARAM,
    t[n++].frag = "layout = 7";
    t[n].name = "kv D 512 for V32", t[n].a = good, t[n].a.kv.shape[2] = 512, t[n].want = DSOPS_ERR_SHAPE,
    t[n++].frag = "kv.shape[2]";
    t[n].name = "kv fp32", t[n].a = good, t[n].a.kv.dtype = DSOPS_FP32, t[n].want = DSOPS_ERR_DTYPE, t[n++].frag = "kv";
    t[n].name = "cache int8", t[n].a = good, t[n].a.cache.dtype = DSOPS_INT8, t[n].want = DSOPS_ERR_DTYPE,
    t[n++].frag = "cache";
    t[n].name = "cache 640 bytes a token", t[n].a = good, t[n].a.cache.shape[2] = 640, t[n].want = DSOPS_ERR_SHAPE,
    t[n++].frag = "cache.shape[2]";
    t[n].name = "cache NB 1", t[n].a = good, t[n].a.cache.shape[0] = 1, t[n].want = DSOPS_ERR_SHAPE,
    t[n++].frag = "cache.shape[0]";
    t[n].name = "kv absent", t[n].a = good, t[n].a.kv.data = NULL, t[n].want = DSOPS_ERR_NULL, t[n++].frag = "kv";
    t[n].name = "MODEL1 block short", t[n].a = good, t[n].a.layout = DSOPS_FP8_CACHE_MODEL1,
    t[n].a.kv = dsops_tensor_make(kv, DSOPS_BF16, 3, ks4), t[n].a.cache = dsops_tensor_make(cache, DSOPS_UINT8, 2, cs4),
    t[n].want = DSOPS_ERR_SHAPE, t[n++].frag = "BS * 584";
    t[n].name = "MODEL1 cache of rank 3", t[n].a = good, t[n].a.layout = DSOPS_FP8_CACHE_MODEL1,
    t[n].a.kv = dsops_tensor_make(kv, DSOPS_BF16, 3, ks4), t[n].want = DSOPS_ERR_SHAPE, t[n++].frag = "cache";
    t[n].name = "cache overlaps kv", t[n].a = good, t[n].a.cache.data = kv, t[n].want = DSOPS_ERR_ALIAS,
    t[n++].frag = "cache";
    for (int i = 0; i < n; i++)
        for (int dir = 0; dir < 2; dir++) {
            uint16_t kv_before[sizeof kv / 2];
            memcpy(kv_before, kv, sizeof kv);
            dsops_status st = dir ? dsops_fp8_cache_dequantize(ctx, &t[i].a) : dsops_fp8_cache_quantize(ctx, &t[i].a);
            char label[96];
            snprintf(label, sizeof label, "%s %s", dir ? "dequantize" : "quantize", t[i].name);
            tu_check_rejected(label, st, t[i].want, t[i].frag);
            tu_check_unchanged(label, cache, before, sizeof cache, "cache written on error");
            tu_check_unchanged(label, kv, kv_before, sizeof kv, "kv written on error");
        }
    tu_check_rejected("args NULL", dsops_fp8_cache_quantize(ctx, NULL), DSOPS_ERR_NULL, "args");
    free(before);
}

/* The usual test main (tests/test_util.h): seed, one context, the sections in order, the tally. */
int main(int argc, char **argv)
{
    tu_init(argc, argv, 656);
    ctx = tu_announced_context();
    test_e4m3_values();
    test_caches();
    test_cache_store();
    test_validation();
    dsops_context_destroy(ctx);
    return tu_finish();
}
