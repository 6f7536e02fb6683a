/* placeholder */
#include "internal.h"
dsops_status dsops_indexer_prolog_v4_init(dsops_indexer_prolog_v4_args *a, dsops_preset preset) { (void)preset; if (a) memset(a, 0, sizeof *a); return DSOPS_ERR_UNSUPPORTED; }
dsops_status dsops_indexer_prolog_v4_prepare(dsops_context *ctx, const dsops_indexer_prolog_v4_args *a, dsops_prepared **p) { (void)ctx; (void)a; *p = NULL; return DSOPS_ERR_UNSUPPORTED; }
dsops_status dsops_indexer_prolog_v4(dsops_context *ctx, const dsops_indexer_prolog_v4_args *a) { (void)ctx; (void)a; return DSOPS_ERR_UNSUPPORTED; }
