/* compressor kernels, avx2 tier (being written). */
#include "dispatch.h"

const dsops_compressor_kernels dsops_compressor_kernels__avx2 = {0};
