/*
 * `dsops run` (see dsops_run.h): one generic driver over the library's operator descriptions
 * (dsops_op_find, include/dsops.h). A test may substitute another implementation per operator through
 * the overrides list.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "call_record.h"
#include "dsops_run.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

/* ---- driver ---------------------------------------------------------------------------------- */

#define RUN_ERR_USAGE "DSOPS_RUN_ERR_USAGE"
#define RUN_ERR_IO "DSOPS_RUN_ERR_IO"
#define RUN_EXIT_STATUS 1
#define RUN_EXIT_USAGE 2
#define RUN_EXIT_IO 3

static int run_fail(int code, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int run_fail(int code, const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "dsops run: %s: ", name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

static int run_fail_status(dsops_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run_fail_status(dsops_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "dsops run: %s: ", dsops_status_name(st));
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return RUN_EXIT_STATUS;
}

/* A failed library call: its status name and thread-local message. */
static int run_fail_library(dsops_status st, const char *what)
{
    const char *m = dsops_last_error();
    return run_fail_status(st, "%s%s%s", what, (m != NULL && m[0]) ? ": " : "", m != NULL ? m : "");
}


static const char *run_dir_name(dsops_arg_role d)
{
    switch (d) {
    case DSOPS_ARG_IN: return "in";
    case DSOPS_ARG_IN_OPT: return "in, optional";
    case DSOPS_ARG_INOUT: return "in-out";
    case DSOPS_ARG_INOUT_OPT: return "in-out, optional";
    case DSOPS_ARG_OUT: return "out";
    case DSOPS_ARG_OUT_OPT: return "out, optional";
    }
    return "?";
}

static bool run_is_input(dsops_arg_role d) { return d != DSOPS_ARG_OUT && d != DSOPS_ARG_OUT_OPT; }

/* "BF16 or I8" */
static void run_dtype_list(unsigned mask, char *buf, size_t len)
{
    buf[0] = '\0';
    size_t used = 0;
    for (int d = 1; d < 32; d++) {
        if (!(mask & DSOPS_DTYPE_BIT(d)))
            continue;
        const char *tag = dsops_st_dtype_tag((dsops_dtype)d);
        if (tag == NULL)
            continue;
        int n = snprintf(buf + used, len - used, "%s%s", used ? " or " : "", tag);
        if (n < 0 || (size_t)n >= len - used)
            break;
        used += (size_t)n;
    }
}

static void run_spelling_list(const dsops_enum_value *e, char *buf, size_t len)
{
    buf[0] = '\0';
    size_t used = 0;
    for (; e->spelling != NULL; e++) {
        int n = snprintf(buf + used, len - used, "%s%s", used ? "|" : "", e->spelling);
        if (n < 0 || (size_t)n >= len - used)
            break;
        used += (size_t)n;
    }
}


static const char *run_type_name(const dsops_param_desc *p, char *buf, size_t len)
{
    switch (p->type) {
    case DSOPS_PARAM_FLOAT: return "float";
    case DSOPS_PARAM_DOUBLE: return "double";
    case DSOPS_PARAM_INT: return "int";
    case DSOPS_PARAM_BOOL: return "true|false";
    case DSOPS_PARAM_ENUM: run_spelling_list(p->spellings, buf, len); return buf;
    }
    return "?";
}

void dsops_run_print_usage(FILE *fp)
{
    fprintf(fp,
            "usage: dsops run <operator> --in IN.safetensors --out OUT.safetensors\n"
            "                 [--set name=value]... [--threads N] [--isa scalar|avx2|avx512|avx512bf16]\n"
            "\n"
            "Tensors are read from IN under their argument names; parameters come from --set or from IN's\n"
            "__metadata__ (--set wins); --set preset=v32|v4_flash|v4_pro applies a preset's defaults first.\n"
            "OUT receives every output and in-out tensor; an output that exists in one variant only (qr_scale of\n"
            "mla_prolog_v32 and mla_prolog_v4, q_idx_scale of indexer_prolog_v32: int8 only) is in OUT only for\n"
            "that variant.\n"
            "swa, cfa and scfa are sas with that variant, whose defaults fill every parameter not given; sas takes\n"
            "the variant from --set variant=..., else from cmp_mode, else from the tensors (cmp_indices: scfa,\n"
            "cmp_kv: cfa, neither: swa).\n"
            "Errors: \"dsops run: <STATUS>: <message>\" on stderr, OUT untouched.\n");
    for (size_t i = 0; i < dsops_op_count(); i++) {
        const dsops_op_desc *op = dsops_op_at(i);
        if (op->variant_of != NULL) {
            fprintf(fp, "\n%s\n  %s --set variant=%s: the tensors and parameters of %s, this variant's defaults\n",
                    op->name, op->variant_of, op->name, op->variant_of);
            continue;
        }
        fprintf(fp, "\n%s\n  tensors:\n", op->name);
        for (size_t k = 0; k < op->n_tensors; k++) {
            char dts[64];
            run_dtype_list(op->tensors[k].dtypes, dts, sizeof dts);
            fprintf(fp, "    %-23s %-18s %-12s %s\n", op->tensors[k].name, run_dir_name(op->tensors[k].role), dts,
                    op->tensors[k].note != NULL ? op->tensors[k].note : "");
        }
        fprintf(fp, "  parameters:\n");
        for (size_t k = 0; k < op->n_params; k++) {
            char buf[128];
            fprintf(fp, "    %-16s %s%s%s%s\n", op->params[k].name, run_type_name(&op->params[k], buf, sizeof buf),
                    op->params[k].required ? "  (required)" : "", op->params[k].note != NULL ? "  " : "",
                    op->params[k].note != NULL ? op->params[k].note : "");
        }
        char buf[128];
        run_spelling_list(dsops_preset_spellings(), buf, sizeof buf);
        fprintf(fp, "    %-16s %s (default %s)\n", "preset", buf, dsops_enum_spelling(dsops_preset_spellings(), (int)op->default_preset));
    }
}

static bool run_parse_int(const char *s, long lo, long hi, long *v)
{
    if (s == NULL || *s == '\0')
        return false;
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || x < lo || x > hi)
        return false;
    *v = x;
    return true;
}

static bool run_parse_enum(const dsops_enum_value *e, const char *s, int *v)
{
    for (; e->spelling != NULL; e++)
        if (strcmp(e->spelling, s) == 0) {
            *v = e->value;
            return true;
        }
    return false;
}

/* Stores the text value of a parameter into the args struct. `source` names where it came from. */
static int run_set_param(void *args, const dsops_param_desc *p, const char *value, const char *source)
{
    char *dst = (char *)args + p->offset;
    switch (p->type) {
    case DSOPS_PARAM_FLOAT: {
        char *end;
        float f = strtof(value, &end);
        /* out-of-range and non-finite values pass: the operator judges them */
        if (*value == '\0' || *end != '\0')
            return run_fail_status(DSOPS_ERR_PARAM, "%s: %s = \"%.64s\" is not a number", source, p->name, value);
        if (p->size != sizeof f)
            return run_fail_status(DSOPS_ERR_PARAM, "%s: internal size mismatch", p->name);
        memcpy(dst, &f, sizeof f);
        return 0;
    }
    case DSOPS_PARAM_DOUBLE: {
        char *end;
        double d = strtod(value, &end);
        if (*value == '\0' || *end != '\0')
            return run_fail_status(DSOPS_ERR_PARAM, "%s: %s = \"%.64s\" is not a number", source, p->name, value);
        if (p->size != sizeof d)
            return run_fail_status(DSOPS_ERR_PARAM, "%s: internal size mismatch", p->name);
        memcpy(dst, &d, sizeof d);
        return 0;
    }
    case DSOPS_PARAM_INT: {
        long v;
        if (!run_parse_int(value, INT_MIN, INT_MAX, &v))
            return run_fail_status(DSOPS_ERR_PARAM, "%s: %s = \"%.64s\" is not an integer", source, p->name, value);
        int i = (int)v;
        if (p->size != sizeof i)
            return run_fail_status(DSOPS_ERR_PARAM, "%s: internal size mismatch", p->name);
        memcpy(dst, &i, sizeof i);
        return 0;
    }
    case DSOPS_PARAM_BOOL: {
        bool b;
        if (strcmp(value, "true") == 0 || strcmp(value, "1") == 0)
            b = true;
        else if (strcmp(value, "false") == 0 || strcmp(value, "0") == 0)
            b = false;
        else
            return run_fail_status(DSOPS_ERR_PARAM, "%s: %s = \"%.64s\" is not true or false", source, p->name, value);
        if (p->size == sizeof(bool)) {
            memcpy(dst, &b, sizeof b);
        } else if (p->size == sizeof(int)) {
            int i = b;
            memcpy(dst, &i, sizeof i);
        } else {
            return run_fail_status(DSOPS_ERR_PARAM, "%s: internal size mismatch", p->name);
        }
        return 0;
    }
    case DSOPS_PARAM_ENUM: {
        int v;
        if (!run_parse_enum(p->spellings, value, &v)) {
            char buf[128];
            run_spelling_list(p->spellings, buf, sizeof buf);
            return run_fail_status(DSOPS_ERR_PARAM, "%s: %s = \"%.64s\" is not one of %s", source, p->name, value, buf);
        }
        if (p->size != sizeof v)
            return run_fail_status(DSOPS_ERR_PARAM, "%s: internal size mismatch", p->name);
        memcpy(dst, &v, sizeof v);
        return 0;
    }
    }
    return run_fail_status(DSOPS_ERR_PARAM, "%s: unknown parameter type", p->name);
}

/* `--opt value` or `--opt=value`; advances *i past what it consumed. */
static int run_option_value(int argc, char **argv, int *i, const char *opt, const char **value)
{
    const char *a = argv[*i];
    size_t n = strlen(opt);
    if (strncmp(a, opt, n) != 0)
        return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != '\0')
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *value = argv[++*i];
    return 1;
}

typedef struct run_set {
    const char *name;
    const char *value;
    size_t name_len;
} run_set;

typedef struct run_state {
    const dsops_op_desc *op;
    dsops_st_file *in;
    void *args;
    void **out_data; /* per tensor desc: memory the tool allocated */
    dsops_context *ctx;
    dsops_st_writer *writer;
    run_set *sets;
    int n_sets;
    bool *given;
} run_state;

static void run_state_free(run_state *s)
{
    if (s->out_data != NULL && s->op != NULL)
        for (size_t k = 0; k < s->op->n_tensors; k++)
            free(s->out_data[k]);
    free(s->out_data);
    dsops_st_writer_destroy(s->writer);
    dsops_context_destroy(s->ctx);
    dsops_st_close(s->in);
    free(s->args);
    free(s->sets);
    free(s->given);
}

/* The --set value of `name`, else the metadata value, else NULL (last --set wins). */
static const char *run_lookup(const run_state *s, const char *name, const char **source)
{
    for (int k = s->n_sets - 1; k >= 0; k--)
        if (strlen(name) == s->sets[k].name_len && strncmp(s->sets[k].name, name, s->sets[k].name_len) == 0) {
            *source = "--set";
            return s->sets[k].value;
        }
    const char *m = dsops_st_metadata(s->in, name);
    if (m != NULL)
        *source = "IN __metadata__";
    return m;
}

/* The function that runs op: an override for its name (or for the operator it is a variant of), else its own. */
static dsops_status run_call(const dsops_op_desc *op, dsops_context *ctx, const void *args,
                             const dsops_run_override *overrides)
{
    for (const dsops_run_override *o = overrides; o && o->op; o++)
        if (!strcmp(o->op, op->name) || (op->variant_of && !strcmp(o->op, op->variant_of)))
            return o->call(ctx, args);
    return op->call(ctx, args);
}

static int run_main(run_state *s, int argc, char **argv, const dsops_run_override *overrides)
{
    const char *op_name = argv[0];
    const char *in_path = NULL, *out_path = NULL, *threads_str = NULL, *isa_str = NULL;

    if (strcmp(op_name, "--help") == 0 || strcmp(op_name, "-h") == 0) {
        dsops_run_print_usage(stdout);
        return 0;
    }
    s->op = dsops_op_find(op_name);
    if (s->op == NULL) {
        char names[512] = "";
        size_t used = 0;
        for (size_t i = 0; i < dsops_op_count(); i++) {
            int n = snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", dsops_op_at(i)->name);
            if (n < 0 || (size_t)n >= sizeof names - used)
                break;
            used += (size_t)n;
        }
        return run_fail(RUN_EXIT_USAGE, RUN_ERR_USAGE, "unknown operator \"%.64s\" (known: %s)", op_name, names);
    }
    const dsops_op_desc *op = s->op;

    s->sets = calloc((size_t)argc, sizeof *s->sets);
    if (s->sets == NULL)
        return run_fail_status(DSOPS_ERR_NOMEM, "out of memory");
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            dsops_run_print_usage(stdout);
            return 0;
        }
        if ((r = run_option_value(argc, argv, &i, "--in", &v)) != 0) {
            in_path = v;
        } else if ((r = run_option_value(argc, argv, &i, "--out", &v)) != 0) {
            out_path = v;
        } else if ((r = run_option_value(argc, argv, &i, "--threads", &v)) != 0) {
            threads_str = v;
        } else if ((r = run_option_value(argc, argv, &i, "--isa", &v)) != 0) {
            isa_str = v;
        } else if ((r = run_option_value(argc, argv, &i, "--set", &v)) != 0) {
            if (r > 0) {
                const char *eq = strchr(v, '=');
                if (eq == NULL || eq == v)
                    return run_fail(RUN_EXIT_USAGE, RUN_ERR_USAGE, "--set expects name=value, got \"%.64s\"", v);
                s->sets[s->n_sets].name = v;
                s->sets[s->n_sets].name_len = (size_t)(eq - v);
                s->sets[s->n_sets].value = eq + 1;
                s->n_sets++;
            }
        } else {
            return run_fail(RUN_EXIT_USAGE, RUN_ERR_USAGE, "unknown argument \"%.64s\" (see dsops run --help)", argv[i]);
        }
        if (r < 0)
            return run_fail(RUN_EXIT_USAGE, RUN_ERR_USAGE, "%s needs a value", argv[i]);
    }
    if (in_path == NULL || out_path == NULL)
        return run_fail(RUN_EXIT_USAGE, RUN_ERR_USAGE, "%s is required (dsops run %s --in IN --out OUT)",
                        in_path == NULL ? "--in" : "--out", op->name);
    if (!out_path[0] || out_path[strlen(out_path) - 1] == '/')
        return run_fail(RUN_EXIT_USAGE, RUN_ERR_USAGE, "--out \"%.64s\" is not a file name", out_path);

    /* --set names are checked before any file is touched */
    for (int k = 0; k < s->n_sets; k++) {
        const run_set *st = &s->sets[k];
        bool known = st->name_len == 6 && strncmp(st->name, "preset", 6) == 0;
        for (size_t p = 0; !known && p < op->n_params; p++)
            known = strlen(op->params[p].name) == st->name_len &&
                    strncmp(op->params[p].name, st->name, st->name_len) == 0;
        if (!known) {
            char names[512];
            size_t used = 0;
            names[0] = '\0';
            for (size_t p = 0; p < op->n_params; p++) {
                int n = snprintf(names + used, sizeof names - used, "%s, ", op->params[p].name);
                if (n < 0 || (size_t)n >= sizeof names - used)
                    break;
                used += (size_t)n;
            }
            return run_fail_status(DSOPS_ERR_PARAM, "%s has no parameter \"%.*s\" (parameters: %spreset)", op->name,
                                   (int)(st->name_len < 64 ? st->name_len : 64), st->name, names);
        }
    }
    long threads = 0;
    if (threads_str != NULL && !run_parse_int(threads_str, 1, DSOPS_MAX_THREADS, &threads))
        return run_fail_status(DSOPS_ERR_PARAM, "--threads %.32s: expected an integer in [1, %d]", threads_str,
                               DSOPS_MAX_THREADS);
    dsops_isa isa = DSOPS_ISA_SCALAR;
    if (isa_str != NULL && dsops_isa_from_name(isa_str, &isa) != DSOPS_OK)
        return run_fail_status(DSOPS_ERR_PARAM, "--isa %.32s: expected scalar, avx2, avx512 or avx512bf16", isa_str);

    char err[DSOPS_ST_ERRLEN];
    if (dsops_st_open(in_path, &s->in, err, sizeof err) != 0)
        return run_fail(RUN_EXIT_IO, RUN_ERR_IO, "%s", err);

    /* preset defaults */
    s->args = calloc(1, op->args_size);
    s->given = calloc(op->n_params ? op->n_params : 1, sizeof *s->given);
    s->out_data = calloc(op->n_tensors, sizeof *s->out_data);
    if (s->args == NULL || s->given == NULL || s->out_data == NULL)
        return run_fail_status(DSOPS_ERR_NOMEM, "out of memory");
    dsops_preset preset = op->default_preset;
    const char *src = NULL;
    const char *pv = run_lookup(s, "preset", &src);
    if (pv != NULL) {
        int v;
        if (!run_parse_enum(dsops_preset_spellings(), pv, &v)) {
            char buf[128];
            run_spelling_list(dsops_preset_spellings(), buf, sizeof buf);
            return run_fail_status(DSOPS_ERR_PARAM, "%s: preset = \"%.64s\" is not one of %s", src, pv, buf);
        }
        preset = (dsops_preset)v;
    }
    dsops_status st = op->init(s->args, preset);
    if (st != DSOPS_OK) {
        char what[64];
        snprintf(what, sizeof what, "preset %s", dsops_enum_spelling(dsops_preset_spellings(), (int)preset));
        return run_fail_library(st, what);
    }

    /* tensors of IN */
    for (size_t i = 0; i < dsops_st_tensor_count(s->in); i++) {
        const char *name = dsops_st_tensor_name(s->in, i);
        const dsops_tensor *t = dsops_st_tensor_at(s->in, i);
        const dsops_tensor_desc *d = NULL;
        for (size_t k = 0; k < op->n_tensors && d == NULL; k++)
            if (strcmp(op->tensors[k].name, name) == 0)
                d = &op->tensors[k];
        if (d == NULL)
            return run_fail_status(DSOPS_ERR_PARAM, "%s: tensor '%.64s' is not an argument of %s (see dsops run --help)",
                                   in_path, name, op->name);
        if (!run_is_input(d->role))
            continue; /* an output stored in IN (for example an expected result) is not an input */
        if (!(d->dtypes & DSOPS_DTYPE_BIT(t->dtype))) {
            char dts[64];
            run_dtype_list(d->dtypes, dts, sizeof dts);
            return run_fail_status(DSOPS_ERR_DTYPE, "%s: tensor '%.64s' is %s; %s takes %s", in_path, name,
                                   dsops_st_dtype_tag(t->dtype), op->name, dts);
        }
        *record_tensor(s->args, d) = *t;
    }
    for (size_t k = 0; k < op->n_tensors; k++) {
        const dsops_tensor_desc *d = &op->tensors[k];
        if ((d->role == DSOPS_ARG_IN || d->role == DSOPS_ARG_INOUT) && record_tensor(s->args, d)->data == NULL)
            return run_fail_status(DSOPS_ERR_NULL, "%s: required tensor '%s' of %s is missing", in_path, d->name,
                                   op->name);
    }

    /* parameters */
    for (size_t p = 0; p < op->n_params; p++) {
        const char *v = run_lookup(s, op->params[p].name, &src);
        if (v == NULL)
            continue;
        int rc = run_set_param(s->args, &op->params[p], v, src);
        if (rc != 0)
            return rc;
        s->given[p] = true;
    }
    for (size_t p = 0; p < op->n_params; p++)
        if (op->params[p].required && !s->given[p])
            return run_fail(RUN_EXIT_USAGE, RUN_ERR_USAGE,
                            "%s needs --set %s=VALUE (or '%s' in IN's __metadata__)%s%s", op->name,
                            op->params[p].name, op->params[p].name, op->params[p].note != NULL ? "; " : "",
                            op->params[p].note != NULL ? op->params[p].note : "");
    if (op->infer != NULL)
        op->infer(s->args, s->given);

    /* outputs */
    char msg[256] = "";
    st = op->output_shapes(s->args, msg, sizeof msg);
    if (st != DSOPS_OK)
        return run_fail_status(st, "%s", msg);
    for (size_t k = 0; k < op->n_tensors; k++) {
        const dsops_tensor_desc *d = &op->tensors[k];
        if (run_is_input(d->role))
            continue;
        dsops_tensor *t = record_tensor(s->args, d);
        if (d->role == DSOPS_ARG_OUT_OPT && t->dtype == DSOPS_DTYPE_INVALID)
            continue; /* an output the call's variant does not have: not produced, not in OUT */
        size_t esize = dsops_dtype_size(t->dtype);
        uint64_t bytes = esize;
        for (int dd = 0; dd < t->ndim; dd++) {
            if (t->shape[dd] < 0 || (t->shape[dd] > 0 && bytes > (uint64_t)SIZE_MAX / 2 / (uint64_t)t->shape[dd]))
                return run_fail_status(DSOPS_ERR_SHAPE, "output '%s': its size overflows", d->name);
            bytes *= (uint64_t)t->shape[dd];
        }
        size_t alloc = ((size_t)bytes + 63) / 64 * 64;
        s->out_data[k] = aligned_alloc(64, alloc ? alloc : 64);
        if (s->out_data[k] == NULL)
            return run_fail_status(DSOPS_ERR_NOMEM, "output '%s': cannot allocate %zu bytes", d->name, (size_t)bytes);
        memset(s->out_data[k], 0, alloc ? alloc : 64);
        *t = dsops_tensor_make(s->out_data[k], t->dtype, t->ndim, t->shape);
    }

    /* context and call */
    st = dsops_context_create(&s->ctx);
    if (st != DSOPS_OK)
        return run_fail_library(st, "context");
    if (threads_str != NULL && (st = dsops_context_set_threads(s->ctx, (int)threads)) != DSOPS_OK)
        return run_fail_library(st, "--threads");
    if (isa_str != NULL && (st = dsops_context_set_isa(s->ctx, isa)) != DSOPS_OK)
        return run_fail_library(st, "--isa");
    st = run_call(op, s->ctx, s->args, overrides);
    if (st != DSOPS_OK)
        return run_fail_library(st, op->name);

    /* OUT: outputs and in-out tensors, then what produced them */
    s->writer = dsops_st_writer_create();
    if (s->writer == NULL)
        return run_fail_status(DSOPS_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < op->n_tensors; k++) {
        const dsops_tensor_desc *d = &op->tensors[k];
        const dsops_tensor *t = record_tensor(s->args, d);
        if (d->role == DSOPS_ARG_IN || d->role == DSOPS_ARG_IN_OPT || t->data == NULL)
            continue;
        if (dsops_st_writer_add(s->writer, d->name, t, err, sizeof err) != 0)
            return run_fail(RUN_EXIT_IO, RUN_ERR_IO, "%s: %s", out_path, err);
    }
    char value[64];
    bool ok = dsops_st_writer_set_metadata(s->writer, "operator", op->name, err, sizeof err) == 0;
    for (size_t p = 0; ok && p < op->n_params; p++) {
        if (record_format_param(s->args, &op->params[p], value, sizeof value))
            ok = dsops_st_writer_set_metadata(s->writer, op->params[p].name, value, err, sizeof err) == 0;
    }
    snprintf(value, sizeof value, "%d", dsops_context_threads(s->ctx));
    ok = ok && dsops_st_writer_set_metadata(s->writer, "dsops_version", dsops_version(), err, sizeof err) == 0 &&
         dsops_st_writer_set_metadata(s->writer, "isa", dsops_isa_name(dsops_context_isa(s->ctx)), err,
                                      sizeof err) == 0 &&
         dsops_st_writer_set_metadata(s->writer, "threads", value, err, sizeof err) == 0;
    if (!ok)
        return run_fail(RUN_EXIT_IO, RUN_ERR_IO, "%s: %s", out_path, err);
    if (dsops_st_writer_save(s->writer, out_path, err, sizeof err) != 0)
        return run_fail(RUN_EXIT_IO, RUN_ERR_IO, "%s", err);
    return 0;
}

int dsops_cmd_run(int argc, char **argv, const dsops_run_override *overrides)
{
    if (argc < 1 || argv == NULL || argv[0] == NULL) {
        dsops_run_print_usage(stderr);
        return run_fail(RUN_EXIT_USAGE, RUN_ERR_USAGE, "missing operator name");
    }
    run_state s;
    memset(&s, 0, sizeof s);
    int rc = run_main(&s, argc, argv, overrides);
    run_state_free(&s);
    return rc;
}
