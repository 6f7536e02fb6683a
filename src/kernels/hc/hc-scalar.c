/* hc kernels, scalar tier (being written). */
#include "dispatch.h"

const dsops_hc_kernels dsops_hc_kernels__scalar = {0};
