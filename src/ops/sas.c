/* placeholder */
#include "internal.h"
dsops_status dsops_sas_init(dsops_sas_args *a, dsops_preset preset, dsops_sas_variant v) { (void)preset; (void)v; if (a) memset(a, 0, sizeof *a); return DSOPS_ERR_UNSUPPORTED; }
dsops_status dsops_sas(dsops_context *ctx, const dsops_sas_args *a) { (void)ctx; (void)a; return DSOPS_ERR_UNSUPPORTED; }
