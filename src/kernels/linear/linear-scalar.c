/* linear kernels, scalar tier (being written). */
#include "dispatch.h"

const dsops_linear_kernels dsops_linear_kernels__scalar = {0};
