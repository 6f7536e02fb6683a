/* Core API: number conversions (spec §2.1), tensor views, status / dtype / ISA names, the context and
 * its environment defaults. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsops.h"
#include "test_util.h"

/* One value through memcpy (a bit cast) or through the library's array conversions under test. */
#define ONE_VALUE(name, from_type, to_type, statement) \
    static to_type name(from_type in) { to_type out; statement; return out; }
ONE_VALUE(f32_of_bits, uint32_t, float, memcpy(&out, &in, 4))
ONE_VALUE(bits_of_f32, float, uint32_t, memcpy(&out, &in, 4))
ONE_VALUE(to_bf16, float, uint16_t, dsops_fp32_to_bf16(&in, &out, 1))
ONE_VALUE(to_fp16, float, uint16_t, dsops_fp32_to_fp16(&in, &out, 1))
ONE_VALUE(from_fp16, uint16_t, float, dsops_fp16_to_fp32(&in, &out, 1))

/* fp16 rounding computed independently in double: round to nearest even at the target precision */
static uint16_t fp16_expected(float f)
{
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    if (isnan(f))
        return 0; /* not used for NaN */
    if (a >= 65520.0)
        return sign | 0x7c00;
    if (a < 6.103515625e-05) { /* below 2^-14: multiples of 2^-24 */
        double q = nearbyint(a * 16777216.0);
        return sign | (uint16_t)q; /* q = 1024 encodes the smallest normal */
    }
    int e;
    double m = frexp(a, &e); /* a = m 2^e, m in [0.5, 1) */
    double q = nearbyint(m * 2048.0); /* 11 significant bits */
    if (q == 2048.0) {
        q = 1024.0;
        e++;
    }
    int biased = e - 1 + 15;
    return sign | (uint16_t)((biased << 10) | ((uint16_t)q - 1024));
}

static void test_bf16(void)
{
    struct {
        uint32_t in;
        uint16_t out;
        const char *what;
    } cases[] = {
        {0x3f800000u, 0x3f80, "1.0"},
        {0x3f808000u, 0x3f80, "tie below, even stays"},
        {0x3f818000u, 0x3f82, "tie above odd goes up to even"},
        {0x3f808001u, 0x3f81, "just above a tie"},
        {0x3f807fffu, 0x3f80, "just below a tie"},
        {0x80000000u, 0x8000, "-0"},
        {0x7f800000u, 0x7f80, "+Inf"},
        {0xff800000u, 0xff80, "-Inf"},
        {0x7f7fffffu, 0x7f80, "FLT_MAX overflows to +Inf"},
        {0xff7fffffu, 0xff80, "-FLT_MAX overflows to -Inf"},
        {0x7f7f7fffu, 0x7f7f, "largest value rounding down"},
        {0x00010000u, 0x0001, "subnormal kept"},
        {0x00008000u, 0x0000, "subnormal tie to even zero"},
        {0x00018000u, 0x0002, "subnormal tie to even two"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = to_bf16(f32_of_bits(cases[i].in));
        tu_check(h == cases[i].out, "bf16(0x%08x) = 0x%04x, expected 0x%04x (%s)", cases[i].in, h, cases[i].out,
                 cases[i].what);
    }
    /* NaN: quiet, sign kept */
    uint32_t nans[] = {0x7f800001u, 0xff800001u, 0x7fc00000u, 0xffffffffu, 0x7f812345u};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t h = to_bf16(f32_of_bits(nans[i]));
        int ok = (h & 0x7f80) == 0x7f80 && (h & 0x0040) && (h >> 15) == (nans[i] >> 31);
        tu_check(ok, "bf16(NaN 0x%08x) = 0x%04x: expected a quiet NaN with the same sign", nans[i], h);
    }
    /* every bf16 value widens exactly and converts back to itself (NaNs stay NaN) */
    int bad = -1;
    for (uint32_t v = 0; v < 65536; v++) {
        uint16_t h = (uint16_t)v, back;
        float f;
        dsops_bf16_to_fp32(&h, &f, 1);
        if (bits_of_f32(f) != (uint32_t)h << 16 && !((h & 0x7f80) == 0x7f80 && (h & 0x7f)))
            bad = (int)v;
        dsops_fp32_to_bf16(&f, &back, 1);
        int is_nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        if (is_nan ? !isnan(tu_f32(back)) : back != h)
            bad = (int)v;
    }
    tu_check(bad < 0, "bf16 round trip fails at 0x%04x", bad);
    /* random patterns against the test's own rounding */
    tu_rng r;
    tu_rng_seed(&r, tu_seed());
    float src[4096];
    uint16_t dst[4096];
    int mism = -1;
    for (int round = 0; round < 64 && mism < 0; round++) {
        for (int i = 0; i < 4096; i++)
            src[i] = f32_of_bits((uint32_t)tu_rng_u64(&r));
        dsops_fp32_to_bf16(src, dst, 4096);
        for (int i = 0; i < 4096 && mism < 0; i++) {
            if (isnan(src[i]) ? !((dst[i] & 0x7f80) == 0x7f80 && (dst[i] & 0x40)) : dst[i] != tu_bf16(src[i]))
                mism = i;
        }
        if (mism >= 0)
            tu_check(0, "bf16(0x%08x) = 0x%04x, expected 0x%04x", bits_of_f32(src[mism]), dst[mism], tu_bf16(src[mism]));
    }
    if (mism < 0)
        tu_check(1, "bf16 random");
}

static void test_fp16(void)
{
    struct {
        float in;
        uint16_t out;
        const char *what;
    } cases[] = {
        {1.0f, 0x3c00, "1.0"},
        {-2.0f, 0xc000, "-2.0"},
        {65504.0f, 0x7bff, "max finite"},
        {65519.99f, 0x7bff, "65519.99 rounds down to 65504"},
        {65520.0f, 0x7c00, "65520 gives +Inf"},
        {-65520.0f, 0xfc00, "-65520 gives -Inf"},
        {1e6f, 0x7c00, "overflow"},
        {INFINITY, 0x7c00, "+Inf"},
        {-INFINITY, 0xfc00, "-Inf"},
        {0.0f, 0x0000, "+0"},
        {-0.0f, 0x8000, "-0"},
        {5.9604644775390625e-08f, 0x0001, "2^-24 smallest subnormal"},
        {2.98023223876953125e-08f, 0x0000, "2^-25 ties to even zero"},
        {4.4703483581542969e-08f, 0x0001, "1.5 * 2^-24 ... 0.75 ulp rounds up"},
        {8.9406967163085938e-08f, 0x0002, "1.5 * 2^-24 ties to even two"},
        {1.4901161193847656e-07f, 0x0002, "2.5 * 2^-24 ties to even two"},
        {6.097555160522461e-05f, 0x03ff, "largest subnormal"},
        {6.103515625e-05f, 0x0400, "smallest normal 2^-14"},
        {1.00048828125f, 0x3c00, "1 + 2^-11 ties to even"},
        {1.00146484375f, 0x3c02, "1 + 3 * 2^-11 ties to even (up)"},
        {1.0004883f, 0x3c00, "just below 1 + 2^-11"},
        {2049.0f, 0x6800, "2049 ties to 2048"},
        {2051.0f, 0x6802, "2051 ties to 2052"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = to_fp16(cases[i].in);
        tu_check(h == cases[i].out, "fp16(%.10g) = 0x%04x, expected 0x%04x (%s)", (double)cases[i].in, h,
                 cases[i].out, cases[i].what);
    }
    float nans[] = {NAN, -NAN, f32_of_bits(0x7f800001u), f32_of_bits(0xff812345u)};
    for (size_t i = 0; i < 4; i++) {
        uint16_t h = to_fp16(nans[i]);
        int ok = (h & 0x7c00) == 0x7c00 && (h & 0x0200) && (h >> 15) == (bits_of_f32(nans[i]) >> 31);
        tu_check(ok, "fp16(NaN 0x%08x) = 0x%04x: expected a quiet NaN with the same sign", bits_of_f32(nans[i]), h);
    }
    /* widening */
    tu_check(from_fp16(0x0001) == 5.9604644775390625e-08f, "fp16 0x0001 widens to %g", (double)from_fp16(0x0001));
    tu_check(from_fp16(0x03ff) == 6.097555160522461e-05f, "fp16 0x03ff widens to %g", (double)from_fp16(0x03ff));
    tu_check(from_fp16(0x7bff) == 65504.0f, "fp16 0x7bff widens to %g", (double)from_fp16(0x7bff));
    tu_check(isinf(from_fp16(0xfc00)) && from_fp16(0xfc00) < 0, "fp16 0xfc00 is not -Inf");
    tu_check(bits_of_f32(from_fp16(0x8000)) == 0x80000000u, "fp16 0x8000 is not -0");
    float fn = from_fp16(0xfe00);
    tu_check(isnan(fn) && signbit(fn), "fp16 0xfe00 is not a negative NaN");
    /* every fp16 value round-trips */
    int bad = -1;
    for (uint32_t v = 0; v < 65536; v++) {
        uint16_t h = (uint16_t)v;
        float f = from_fp16(h);
        uint16_t back = to_fp16(f);
        int is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (is_nan ? !isnan(f) || (back & 0x7c00) != 0x7c00 || !(back & 0x3ff) : back != h)
            bad = (int)v;
    }
    tu_check(bad < 0, "fp16 round trip fails at 0x%04x", bad);
    /* random values over the fp16 range against an independent double computation */
    tu_rng r;
    tu_rng_seed(&r, tu_seed() + 1);
    int mism = 0;
    for (int i = 0; i < 200000 && !mism; i++) {
        /* exponents from 2^-27 to 2^17, random mantissa and sign */
        uint32_t e = (uint32_t)tu_rng_int(&r, 127 - 27, 127 + 17);
        uint32_t u = ((uint32_t)tu_rng_int(&r, 0, 1) << 31) | (e << 23) | ((uint32_t)tu_rng_u64(&r) & 0x7fffffu);
        float f = f32_of_bits(u);
        uint16_t got = to_fp16(f), want = fp16_expected(f);
        if (got != want) {
            mism = 1;
            tu_check(0, "fp16(%.10g = 0x%08x) = 0x%04x, expected 0x%04x", (double)f, u, got, want);
        }
    }
    if (!mism)
        tu_check(1, "fp16 random");
}

static void test_tensor_and_names(void)
{
    int64_t shape[3] = {2, 3, 4};
    int dummy;
    dsops_tensor t = dsops_tensor_make(&dummy, DSOPS_BF16, 3, shape);
    tu_check(t.data == &dummy && t.dtype == DSOPS_BF16 && t.ndim == 3, "tensor_make: data / dtype / ndim");
    tu_check(t.shape[0] == 2 && t.shape[1] == 3 && t.shape[2] == 4, "tensor_make: shape");
    tu_check(t.stride[0] == 12 && t.stride[1] == 4 && t.stride[2] == 1, "tensor_make: strides %lld %lld %lld",
             (long long)t.stride[0], (long long)t.stride[1], (long long)t.stride[2]);
    int64_t s1[1] = {7};
    t = dsops_tensor_make(NULL, DSOPS_INT32, 1, s1);
    tu_check(t.data == NULL && t.stride[0] == 1 && t.shape[0] == 7, "tensor_make rank 1");
    t = dsops_tensor_make(&dummy, DSOPS_FP32, 0, NULL);
    tu_check(t.ndim == 0, "tensor_make rank 0");

    static const char *names[] = {"DSOPS_OK", "DSOPS_ERR_NULL", "DSOPS_ERR_SHAPE", "DSOPS_ERR_DTYPE",
                                  "DSOPS_ERR_PARAM", "DSOPS_ERR_INDEX", "DSOPS_ERR_ALIAS", "DSOPS_ERR_NOMEM",
                                  "DSOPS_ERR_UNSUPPORTED", "DSOPS_ERR_BUSY"};
    for (int s = 0; s <= 9; s++)
        tu_check(strcmp(dsops_status_name((dsops_status)s), names[s]) == 0, "status_name(%d) = %s", s,
                 dsops_status_name((dsops_status)s));
    tu_check(strcmp(dsops_status_name((dsops_status)99), "DSOPS_UNKNOWN_STATUS") == 0, "status_name(99) = %s",
             dsops_status_name((dsops_status)99));

    static const struct {
        dsops_dtype d;
        size_t size;
        const char *name;
    } dts[] = {{DSOPS_BF16, 2, "bf16"}, {DSOPS_FP16, 2, "fp16"},   {DSOPS_FP32, 4, "fp32"}, {DSOPS_INT8, 1, "int8"},
               {DSOPS_INT32, 4, "int32"}, {DSOPS_INT64, 8, "int64"}, {DSOPS_UINT8, 1, "uint8"},
               {DSOPS_DTYPE_INVALID, 0, "invalid"}};
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++)
        tu_check(dsops_dtype_size(dts[i].d) == dts[i].size && strcmp(dsops_dtype_name(dts[i].d), dts[i].name) == 0,
                 "dtype %d: size %zu name %s", (int)dts[i].d, dsops_dtype_size(dts[i].d), dsops_dtype_name(dts[i].d));

    static const char *isas[] = {"scalar", "avx2", "avx512", "avx512bf16"};
    for (int i = 0; i < DSOPS_ISA_COUNT; i++) {
        dsops_isa parsed = (dsops_isa)-1;
        tu_check(strcmp(dsops_isa_name((dsops_isa)i), isas[i]) == 0, "isa_name(%d) = %s", i,
                 dsops_isa_name((dsops_isa)i));
        tu_check(dsops_isa_from_name(isas[i], &parsed) == DSOPS_OK && parsed == (dsops_isa)i, "isa_from_name(%s)",
                 isas[i]);
    }
    dsops_isa parsed;
    tu_check(dsops_isa_from_name("avx3", &parsed) == DSOPS_ERR_PARAM, "isa_from_name(avx3) accepted");
    tu_check(dsops_isa_from_name("", &parsed) == DSOPS_ERR_PARAM, "isa_from_name(\"\") accepted");
    tu_check(dsops_isa_from_name(NULL, &parsed) == DSOPS_ERR_NULL, "isa_from_name(NULL) not DSOPS_ERR_NULL");
    tu_check(dsops_isa_from_name("avx2", NULL) == DSOPS_ERR_NULL, "isa_from_name(name, NULL) not DSOPS_ERR_NULL");
    tu_check((int)dsops_isa_detected() >= 0 && (int)dsops_isa_detected() < DSOPS_ISA_COUNT, "isa_detected out of range");
    char ver[32];
    snprintf(ver, sizeof ver, "%d.%d.%d", DSOPS_VERSION_MAJOR, DSOPS_VERSION_MINOR, DSOPS_VERSION_PATCH);
    tu_check(strcmp(dsops_version(), ver) == 0, "version %s, header says %s", dsops_version(), ver);
}

static dsops_status create_with(const char *threads, const char *isa, int *t_out, dsops_isa *isa_out)
{
    if (threads)
        setenv("DSOPS_NUM_THREADS", threads, 1);
    else
        unsetenv("DSOPS_NUM_THREADS");
    if (isa)
        setenv("DSOPS_ISA", isa, 1);
    else
        unsetenv("DSOPS_ISA");
    dsops_context *ctx = (dsops_context *)0x1;
    dsops_status st = dsops_context_create(&ctx);
    if (st == DSOPS_OK) {
        *t_out = dsops_context_threads(ctx);
        *isa_out = dsops_context_isa(ctx);
        dsops_context_destroy(ctx);
    } else {
        tu_check(ctx == NULL, "context_create failed but left a context pointer");
    }
    return st;
}

static void test_context(void)
{
    const dsops_isa det = dsops_isa_detected();
    int th;
    dsops_isa isa;
    dsops_status st = create_with(NULL, NULL, &th, &isa);
    tu_check(st == DSOPS_OK && th >= 1 && isa == det, "defaults: %s, threads %d, isa %s", dsops_status_name(st), th,
             dsops_isa_name(isa));
    tu_check(st != DSOPS_OK || dsops_last_error()[0] == '\0', "last error \"%s\" after a successful create",
             dsops_last_error());
    st = create_with("3", "scalar", &th, &isa);
    tu_check(st == DSOPS_OK && th == 3 && isa == DSOPS_ISA_SCALAR, "DSOPS_NUM_THREADS=3 DSOPS_ISA=scalar: %s, %d, %s",
             dsops_status_name(st), th, dsops_isa_name(isa));
    st = create_with("1", "avx512bf16", &th, &isa);
    tu_check(st == DSOPS_OK && th == 1 && isa == det, "DSOPS_ISA=avx512bf16 on %s: %s, isa %s", dsops_isa_name(det),
             dsops_status_name(st), dsops_isa_name(isa));
    if (det >= DSOPS_ISA_AVX2) {
        st = create_with(NULL, "avx2", &th, &isa);
        tu_check(st == DSOPS_OK && isa == DSOPS_ISA_AVX2, "DSOPS_ISA=avx2: %s, isa %s", dsops_status_name(st),
                 dsops_isa_name(isa));
    }
    static const char *bad_threads[] = {"0", "-2", "abc", "3x", "99999999999"};
    for (size_t i = 0; i < sizeof bad_threads / sizeof bad_threads[0]; i++) {
        st = create_with(bad_threads[i], NULL, &th, &isa);
        tu_check(st == DSOPS_ERR_PARAM, "DSOPS_NUM_THREADS=%s: %s, expected DSOPS_ERR_PARAM", bad_threads[i],
                 dsops_status_name(st));
        tu_check(strstr(dsops_last_error(), "DSOPS_NUM_THREADS") != NULL, "DSOPS_NUM_THREADS=%s: message \"%s\"",
                 bad_threads[i], dsops_last_error());
    }
    st = create_with(NULL, "sse9", &th, &isa);
    tu_check(st == DSOPS_ERR_PARAM, "DSOPS_ISA=sse9: %s, expected DSOPS_ERR_PARAM", dsops_status_name(st));
    tu_check(strstr(dsops_last_error(), "DSOPS_ISA") != NULL, "DSOPS_ISA=sse9: message \"%s\"", dsops_last_error());
    unsetenv("DSOPS_NUM_THREADS");
    unsetenv("DSOPS_ISA");

    /* DSOPS_SCRATCH_LIMIT: bytes with an optional K / M / G suffix (powers of 1024) */
    static const struct {
        const char *text;
        size_t bytes; /* 0: refused */
    } limits[] = {{"4096", 4096},          {"64K", 65536}, {"2m", (size_t)2 << 20}, {"3G", (size_t)3 << 30},
                  {"0", 0},                {"-1", 0},      {"abc", 0},              {"5T", 0},
                  {"12Kb", 0},             {"K", 0},       {"99999999999999999999", 0},
                  {"17179869184G", 0}};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        setenv("DSOPS_SCRATCH_LIMIT", limits[i].text, 1);
        dsops_context *c = NULL;
        st = dsops_context_create(&c);
        if (limits[i].bytes)
            tu_check(st == DSOPS_OK && dsops_context_scratch_limit(c) == limits[i].bytes,
                     "DSOPS_SCRATCH_LIMIT=%s: %s, limit %zu, expected %zu", limits[i].text, dsops_status_name(st),
                     dsops_context_scratch_limit(c), limits[i].bytes);
        else
            tu_check(st == DSOPS_ERR_PARAM && strstr(dsops_last_error(), "DSOPS_SCRATCH_LIMIT") != NULL,
                     "DSOPS_SCRATCH_LIMIT=%s: %s (\"%s\"), expected DSOPS_ERR_PARAM naming the variable", limits[i].text,
                     dsops_status_name(st), dsops_last_error());
        dsops_context_destroy(c);
    }
    unsetenv("DSOPS_SCRATCH_LIMIT");

    dsops_context *ctx = NULL;
    if (!tu_check(dsops_context_create(&ctx) == DSOPS_OK, "context_create: %s", dsops_last_error()))
        return;
    tu_check(dsops_context_set_threads(ctx, 0) == DSOPS_ERR_PARAM, "set_threads(0) accepted");
    /* one limit for every way of setting the thread count (DSOPS_NUM_THREADS has it too) */
    tu_check(dsops_context_set_threads(ctx, DSOPS_MAX_THREADS + 1) == DSOPS_ERR_PARAM, "set_threads(%d) accepted",
             DSOPS_MAX_THREADS + 1);
    tu_check(dsops_context_set_threads(ctx, DSOPS_MAX_THREADS) == DSOPS_OK, "set_threads(%d) refused",
             DSOPS_MAX_THREADS);
    tu_check(dsops_context_set_threads(ctx, 5) == DSOPS_OK && dsops_context_threads(ctx) == 5, "set_threads(5)");
    tu_check(dsops_last_error()[0] == '\0', "last error \"%s\" after a successful set_threads", dsops_last_error());
    tu_check(dsops_context_set_isa(ctx, (dsops_isa)7) == DSOPS_ERR_PARAM, "set_isa(7) accepted");
    tu_check(dsops_context_set_isa(ctx, (dsops_isa)-1) == DSOPS_ERR_PARAM, "set_isa(-1) accepted");
    for (int i = 0; i < DSOPS_ISA_COUNT; i++) {
        tu_check(dsops_context_set_isa(ctx, (dsops_isa)i) == DSOPS_OK, "set_isa(%d)", i);
        dsops_isa want = (dsops_isa)i <= det ? (dsops_isa)i : det;
        tu_check(dsops_context_isa(ctx) == want, "set_isa(%s) gives %s, expected %s", dsops_isa_name((dsops_isa)i),
                 dsops_isa_name(dsops_context_isa(ctx)), dsops_isa_name(want));
    }
    dsops_context_destroy(ctx);
    dsops_context_destroy(NULL);
    tu_check(dsops_context_create(NULL) == DSOPS_ERR_NULL, "context_create(NULL) accepted");
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, 42);
    test_bf16();
    test_fp16();
    test_tensor_and_names();
    test_context();
    return tu_finish();
}
