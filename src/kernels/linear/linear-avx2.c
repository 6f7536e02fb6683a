/* linear kernels, avx2 tier (being written). */
#include "dispatch.h"

const dsops_linear_kernels dsops_linear_kernels__avx2 = {0};
