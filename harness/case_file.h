/* Named cases as files: the inputs of a case's call in a safetensors file that `dsops run` replays, and the
 * outputs of such a run judged by the family's oracle check. `dsops case` (tools/dsops.c) is the command line;
 * tests/io/run_cases_check.py loops over every CI case with it, through `dsops run` and the oracle's
 * `dsops_ref_run`. */
#ifndef DSOPS_HARNESS_CASE_FILE_H
#define DSOPS_HARNESS_CASE_FILE_H

#include <stddef.h>

#include "bench_registry.h"

/* Writes every present input and in-out tensor of problem bp's call record (as before the call, dense) and every
 * parameter of operator `op` (metadata under the parameter's name, plus "operator" and "case") to path.
 * 0, or 1 with why. */
int case_file_write_inputs(const bench_problem *bp, const char *op, const char *case_name, const char *path,
                           char *why, size_t cap);

/* Reads the outputs and in-out tensors of a call of operator `op` from path (a `dsops run` OUT file) into problem
 * bp's call record and runs the family's check against the oracle. Every output and in-out the record holds must
 * be in the file with the record's dtype and shape. 0 when the check passes, else 1 with why. */
int case_file_check_outputs(const bench_problem *bp, const char *op, const char *path, char *why, size_t cap);

#endif
