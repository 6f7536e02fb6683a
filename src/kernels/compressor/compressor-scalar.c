/* compressor kernels, scalar tier (being written). */
#include "dispatch.h"

const dsops_compressor_kernels dsops_compressor_kernels__scalar = {0};
