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

/* One tier's own tables (entries NULL where it has none). */
typedef struct tier_kernels {
    const dsops_attention_kernels *attn;
    const dsops_indexer_kernels *indexer;
    const dsops_linear_kernels *linear;
    const dsops_hc_kernels *hc;
    const dsops_compressor_kernels *compressor;
    const dsops_peak_kernels *peak;
} tier_kernels;

/* t becomes tier `isa`: its own kernels over the lower tier's that t holds. */
static void add_tier(dsops_kernel_table *t, dsops_isa isa, const tier_kernels *own)
{
    if (own) {
        OVERLAY(t->attn, *own->attn);
        OVERLAY(t->indexer, *own->indexer);
        OVERLAY(t->linear, *own->linear);
        OVERLAY(t->hc, *own->hc);
        OVERLAY(t->compressor, *own->compressor);
        OVERLAY(t->peak, *own->peak);
    }
    t->isa = isa;
    tables[isa] = *t;
}

static void build_tables(void)
{
    static const tier_kernels scalar = {&dsops_attention_kernels__scalar, &dsops_indexer_kernels__scalar,
                                        &dsops_linear_kernels__scalar, &dsops_hc_kernels__scalar,
                                        &dsops_compressor_kernels__scalar, &dsops_peak_kernels__scalar};
    const tier_kernels *avx2 = NULL, *avx512bf16 = NULL;
#ifdef DSOPS_HAVE_AVX2
    static const tier_kernels avx2_kernels = {&dsops_attention_kernels__avx2, &dsops_indexer_kernels__avx2,
                                              &dsops_linear_kernels__avx2, &dsops_hc_kernels__avx2,
                                              &dsops_compressor_kernels__avx2, &dsops_peak_kernels__avx2};
    avx2 = &avx2_kernels;
#endif
#ifdef DSOPS_HAVE_AVX512BF16
    static const tier_kernels avx512bf16_kernels = {
        &dsops_attention_kernels__avx512bf16, &dsops_indexer_kernels__avx512bf16, &dsops_linear_kernels__avx512bf16,
        &dsops_hc_kernels__avx512bf16,        &dsops_compressor_kernels__avx512bf16, &dsops_peak_kernels__avx512bf16};
    avx512bf16 = &avx512bf16_kernels;
#endif
    dsops_isa det = dsops_isa_detected();
    dsops_kernel_table t;
    memset(&t, 0, sizeof t);
    add_tier(&t, DSOPS_ISA_SCALAR, &scalar);
    if (det >= DSOPS_ISA_AVX2)
        add_tier(&t, DSOPS_ISA_AVX2, avx2);
    if (det >= DSOPS_ISA_AVX512) /* no AVX-512 (without BF16) kernels yet: that tier uses the AVX2 ones */
        add_tier(&t, DSOPS_ISA_AVX512, NULL);
    if (det >= DSOPS_ISA_AVX512BF16)
        add_tier(&t, DSOPS_ISA_AVX512BF16, avx512bf16);
}

const dsops_kernel_table *dsops_kernel_table_get(dsops_isa isa)
{
    pthread_once(&tables_once, build_tables);
    dsops_isa det = dsops_isa_detected();
    if ((int)isa < 0 || isa > det)
        isa = det;
    return &tables[isa];
}
