/* Call records reached through the library's operator descriptions (dsops_op_desc, include/dsops.h): the
 * tensors and parameters of any operator's args struct, without naming the operator. Shared by `dsops run`,
 * the case files of `dsops case` (case_file.h) and the generic test driver (tests/test_cases.c). */
#ifndef DSOPS_HARNESS_CALL_RECORD_H
#define DSOPS_HARNESS_CALL_RECORD_H

#include <stdbool.h>
#include <stddef.h>

#include "dsops.h"

/* The tensor a description entry names in a call record. */
dsops_tensor *record_tensor(void *args, const dsops_tensor_desc *d);

/* Roles: a tensor the call writes (outputs), one it reads and writes (caches, states). */
bool record_is_output(dsops_arg_role r);
bool record_is_inout(dsops_arg_role r);

/* Elements of a view (the product of its shape). */
size_t record_view_elements(const dsops_tensor *t);

/* Moves the elements of a view in row-major order between it and the dense buffer `dense`. */
typedef enum record_copy {
    RECORD_GATHER = 1,  /* view -> dense */
    RECORD_SCATTER = 0, /* dense -> view */
    RECORD_FILL = 2     /* every element of the view <- the first element of dense */
} record_copy;
void record_view_copy(dsops_tensor *t, unsigned char *dense, record_copy how);

/* The text of a parameter's value in a record, as `dsops run --set` reads it back; false when the value has no
 * such text (a tri-state flag still at "follow the tensors", which `dsops run` infers itself). */
bool record_format_param(const void *args, const dsops_param_desc *p, char *buf, size_t len);

#endif
