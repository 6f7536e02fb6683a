/* Status names and the thread-local last-error message. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

static _Thread_local char last_error[512];

const char *dsops_version(void) { return "0.1.0"; }

const char *dsops_status_name(dsops_status status)
{
    switch (status) {
    case DSOPS_OK: return "DSOPS_OK";
    case DSOPS_ERR_NULL: return "DSOPS_ERR_NULL";
    case DSOPS_ERR_SHAPE: return "DSOPS_ERR_SHAPE";
    case DSOPS_ERR_DTYPE: return "DSOPS_ERR_DTYPE";
    case DSOPS_ERR_PARAM: return "DSOPS_ERR_PARAM";
    case DSOPS_ERR_INDEX: return "DSOPS_ERR_INDEX";
    case DSOPS_ERR_ALIAS: return "DSOPS_ERR_ALIAS";
    case DSOPS_ERR_NOMEM: return "DSOPS_ERR_NOMEM";
    case DSOPS_ERR_UNSUPPORTED: return "DSOPS_ERR_UNSUPPORTED";
    case DSOPS_ERR_BUSY: return "DSOPS_ERR_BUSY";
    }
    return "DSOPS_UNKNOWN_STATUS";
}

const char *dsops_last_error(void) { return last_error; }

void dsops_clear_error(void) { last_error[0] = '\0'; }

dsops_status dsops_fail(dsops_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}
