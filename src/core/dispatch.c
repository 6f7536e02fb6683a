/* Builds the per-tier kernel tables once; the only global state of the library. This file is built
 * without ISA flags: it reads the tiers' const tables as data and fills only the tiers the CPU has. */
#include <pthread.h>

#include "dispatch.h"
#include "internal.h"

static dsops_kernel_table tables[DSOPS_ISA_COUNT];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

/* Every family table is a struct of function pointers only: copy the non-NULL ones of `src` over `dst`. */
typedef void (*any_function)(void);
#define OVERLAY(dst, src)                                                              \
    do {                                                                               \
        _Static_assert(sizeof(dst) % sizeof(any_function) == 0, "function pointers only"); \
        overlay(&(dst), &(src), sizeof(dst));                                          \
    } while (0)

static void overlay(void *dst, const void *src, size_t bytes)
{
    for (size_t off = 0; off < bytes; off += sizeof(any_function)) {
        any_function f;
        memcpy(&f, (const char *)src + off, sizeof f);
        if (f)
            memcpy((char *)dst + off, &f, sizeof f);
    }
}

static void build_tables(void)
{
    dsops_isa det = dsops_isa_detected();
    dsops_kernel_table t;
    memset(&t, 0, sizeof t);
    OVERLAY(t.attn, dsops_attention_kernels__scalar);
    OVERLAY(t.indexer, dsops_indexer_kernels__scalar);
    OVERLAY(t.linear, dsops_linear_kernels__scalar);
    OVERLAY(t.hc, dsops_hc_kernels__scalar);
    OVERLAY(t.compressor, dsops_compressor_kernels__scalar);
    OVERLAY(t.peak, dsops_peak_kernels__scalar);
    t.isa = DSOPS_ISA_SCALAR;
    tables[DSOPS_ISA_SCALAR] = t;
    if (det < DSOPS_ISA_AVX2)
        return;
#ifdef DSOPS_HAVE_AVX2
    OVERLAY(t.attn, dsops_attention_kernels__avx2);
    OVERLAY(t.indexer, dsops_indexer_kernels__avx2);
    OVERLAY(t.linear, dsops_linear_kernels__avx2);
    OVERLAY(t.hc, dsops_hc_kernels__avx2);
    OVERLAY(t.compressor, dsops_compressor_kernels__avx2);
    OVERLAY(t.peak, dsops_peak_kernels__avx2);
#endif
    t.isa = DSOPS_ISA_AVX2;
    tables[DSOPS_ISA_AVX2] = t;
    if (det < DSOPS_ISA_AVX512)
        return;
    /* no AVX-512 (without BF16) kernels yet: that tier uses the AVX2 ones */
    t.isa = DSOPS_ISA_AVX512;
    tables[DSOPS_ISA_AVX512] = t;
    if (det < DSOPS_ISA_AVX512BF16)
        return;
#ifdef DSOPS_HAVE_AVX512BF16
    OVERLAY(t.attn, dsops_attention_kernels__avx512bf16);
    OVERLAY(t.indexer, dsops_indexer_kernels__avx512bf16);
    OVERLAY(t.linear, dsops_linear_kernels__avx512bf16);
    OVERLAY(t.hc, dsops_hc_kernels__avx512bf16);
    OVERLAY(t.compressor, dsops_compressor_kernels__avx512bf16);
    OVERLAY(t.peak, dsops_peak_kernels__avx512bf16);
#endif
    t.isa = DSOPS_ISA_AVX512BF16;
    tables[DSOPS_ISA_AVX512BF16] = t;
}

const dsops_kernel_table *dsops_kernel_table_get(dsops_isa isa)
{
    pthread_once(&tables_once, build_tables);
    dsops_isa det = dsops_isa_detected();
    if ((int)isa < 0 || isa > det)
        isa = det;
    return &tables[isa];
}
