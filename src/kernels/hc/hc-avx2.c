/* hc kernels, avx2 tier (being written). */
#include "dispatch.h"

const dsops_hc_kernels dsops_hc_kernels__avx2 = {0};
