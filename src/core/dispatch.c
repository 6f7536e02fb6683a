/* Builds the per-tier kernel tables once; the only global state of the library. */
#include <pthread.h>

#include "dispatch.h"
#include "internal.h"

static dsops_kernel_table tables[DSOPS_ISA_COUNT];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build_tables(void)
{
    dsops_kernel_table t;
    memset(&t, 0, sizeof t);
    dsops_attention_kernels_init__scalar(&t.attn);
    dsops_indexer_kernels_init__scalar(&t.indexer);
    dsops_peak_kernels_init__scalar(&t);
    t.isa = DSOPS_ISA_SCALAR;
    tables[DSOPS_ISA_SCALAR] = t;
#ifdef DSOPS_HAVE_AVX2
    dsops_attention_kernels_init__avx2(&t.attn);
    dsops_indexer_kernels_init__avx2(&t.indexer);
    dsops_peak_kernels_init__avx2(&t);
#endif
    t.isa = DSOPS_ISA_AVX2;
    tables[DSOPS_ISA_AVX2] = t;
    /* no AVX-512 (without BF16) kernels yet: that tier uses the AVX2 ones */
    t.isa = DSOPS_ISA_AVX512;
    tables[DSOPS_ISA_AVX512] = t;
#ifdef DSOPS_HAVE_AVX512BF16
    dsops_attention_kernels_init__avx512bf16(&t.attn);
    dsops_indexer_kernels_init__avx512bf16(&t.indexer);
    dsops_linear_kernels_init__avx512bf16(&t.linear);
    dsops_hc_kernels_init__avx512bf16(&t.hc);
    dsops_compressor_kernels_init__avx512bf16(&t.compressor);
    dsops_peak_kernels_init__avx512bf16(&t);
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
