/*
 * `dsops run`: runs one operator on the tensors of a safetensors file and writes its outputs to another.
 *
 *   dsops run <operator> --in IN --out OUT [--set name=value]... [--threads N] [--isa TIER]
 *
 * IN holds the operator's input tensors under their argument names (optional inputs may be absent);
 * scalar parameters come from `--set name=value` or from IN's __metadata__ (--set wins; metadata keys
 * that are not parameters are ignored). `--set preset=v32|v4_flash|v4_pro` selects the preset whose
 * defaults fill the parameters before any other value is applied (default: the operator's own model).
 * A parameter that no input determines and no preset fills (the top-k width `topk` of lightning_indexer,
 * which sizes its outputs) is required: without it the command is a usage error.
 * `swa`, `cfa` and `scfa` are names of `sas` with that variant (spec §1.9): the variant chooses the
 * defaults of every scalar parameter; `sas` takes it from `--set variant=swa|cfa|scfa`, else from cmp_mode
 * or the tensors present.
 * OUT receives every output (optional ones included) and every in-out tensor, plus metadata naming the
 * operator, the parameter values used, the library version, the ISA tier and the thread count. An output
 * that only one variant of an operator has (qr_scale of mla_prolog_v32 and mla_prolog_v4, q_idx_scale of
 * indexer_prolog_v32, both int8 only) is produced and written only by calls of that variant.
 *
 * Errors print "dsops run: <STATUS>: <message>" on standard error and leave OUT untouched: it is
 * written to a temporary file in OUT's folder, made durable (fsync), then renamed over OUT only on success,
 * keeping an existing OUT's mode; an empty OUT, a folder or a symbolic link is refused. OUT may name IN: IN
 * is read whole before the call, so it is replaced only by a complete result. <STATUS> is the library's status
 * name, or DSOPS_RUN_ERR_USAGE for a malformed command line and DSOPS_RUN_ERR_IO for a file that cannot
 * be read, parsed or written. Exit codes: 0 success, 1 a status of the library (including the tool's own
 * checks of tensor names, dtypes and parameter values, reported with the matching status), 2 usage,
 * 3 input/output.
 */
#ifndef DSOPS_TOOLS_RUN_H
#define DSOPS_TOOLS_RUN_H

#include <stdio.h>

#include "dsops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An implementation to run instead of the library's operator `op` (its name, or the name of the operator whose
 * variants it serves: "sas" covers swa / cfa / scfa), called with the call record whose first member is the
 * operator's args struct (dsops_op_desc, include/dsops.h). Tests substitute the reference implementations. */
typedef struct dsops_run_override {
    const char *op;   /* NULL ends a list */
    dsops_status (*call)(dsops_context *ctx, const void *args);
} dsops_run_override;

/* argv[0] is the operator name (or --help), the rest the options; overrides: NULL, or a list ended by a NULL op.
 * Returns the process exit code. */
int dsops_cmd_run(int argc, char **argv, const dsops_run_override *overrides);

/* Prints the synopsis and, per operator, its tensors and parameters. */
void dsops_run_print_usage(FILE *fp);

#ifdef __cplusplus
}
#endif

#endif /* DSOPS_TOOLS_RUN_H */
