/* CPU feature detection (CPUID + XGETBV) and tier names. */
#include <stdatomic.h>

#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t read_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static dsops_isa detect(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return DSOPS_ISA_SCALAR;
    bool osxsave = c & (1u << 27), fma = c & (1u << 12), f16c = c & (1u << 29), avx = c & (1u << 28);
    if (!osxsave || !avx)
        return DSOPS_ISA_SCALAR;
    uint64_t xcr0 = read_xcr0();
    bool ymm_os = (xcr0 & 0x6) == 0x6;
    bool zmm_os = (xcr0 & 0xe6) == 0xe6; /* XMM, YMM, opmask, ZMM_Hi256, Hi16_ZMM */
    if (__get_cpuid_max(0, NULL) < 7)
        return DSOPS_ISA_SCALAR;
    __cpuid_count(7, 0, a, b, c, d);
    bool avx2 = b & (1u << 5);
    bool f = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30), vl = b & (1u << 31);
    bool vnni = c & (1u << 11);
    unsigned a1 = 0, b1, c1, d1;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    bool bf16 = a1 & (1u << 5);
    if (!(ymm_os && avx2 && fma && f16c))
        return DSOPS_ISA_SCALAR;
    if (!(zmm_os && f && dq && bw && vl))
        return DSOPS_ISA_AVX2;
    if (!(bf16 && vnni))
        return DSOPS_ISA_AVX512;
    return DSOPS_ISA_AVX512BF16;
}
#else
static dsops_isa detect(void) { return DSOPS_ISA_SCALAR; }
#endif

dsops_isa dsops_isa_detected(void)
{
    static atomic_int cached = -1;
    int v = atomic_load(&cached);
    if (v < 0) {
        v = (int)detect();
        atomic_store(&cached, v);
    }
    return (dsops_isa)v;
}

static const char *const isa_names[DSOPS_ISA_COUNT] = {"scalar", "avx2", "avx512", "avx512bf16"};

const char *dsops_isa_name(dsops_isa isa)
{
    if ((int)isa < 0 || (int)isa >= DSOPS_ISA_COUNT)
        return "invalid";
    return isa_names[isa];
}

dsops_status dsops_isa_from_name(const char *name, dsops_isa *isa)
{
    if (!name || !isa)
        return dsops_fail(DSOPS_ERR_NULL, "%s is NULL", !name ? "name" : "isa");
    for (int i = 0; i < DSOPS_ISA_COUNT; i++) {
        if (strcmp(name, isa_names[i]) == 0) {
            *isa = (dsops_isa)i;
            dsops_clear_error();
            return DSOPS_OK;
        }
    }
    return dsops_fail(DSOPS_ERR_PARAM, "isa \"%.64s\" is not one of scalar, avx2, avx512, avx512bf16", name);
}
