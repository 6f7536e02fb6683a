/* placeholder */
#include "internal.h"
dsops_status dsops_compressor_init(dsops_compressor_args *a, dsops_preset preset) { (void)preset; if (a) memset(a, 0, sizeof *a); return DSOPS_ERR_UNSUPPORTED; }
dsops_status dsops_compressor_prepare(dsops_context *ctx, const dsops_compressor_args *a, dsops_prepared **p) { (void)ctx; (void)a; *p = NULL; return DSOPS_ERR_UNSUPPORTED; }
dsops_status dsops_compressor(dsops_context *ctx, const dsops_compressor_args *a) { (void)ctx; (void)a; return DSOPS_ERR_UNSUPPORTED; }
