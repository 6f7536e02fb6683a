/* The operator descriptions of the public API (dsops_op_*): every operator of the header is described once,
 * every offset lies inside its call record, names are unique, the preset initialiser runs, enum lists end,
 * variants name their operator, and a description drives a real call (rmsnorm) to the right answer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsops.h"
#include "test_util.h"

/* The operators and helpers of include/dsops.h that take tensors: each must be described. */
static const char *const expected[] = {
    "sparse_flash_attention_v32", "lightning_indexer", "mla_prolog_v32", "indexer_prolog_v32",
    "sparse_attention_v32", "hc_pre", "hc_post", "mla_prolog_v4", "indexer_prolog_v4", "compressor", "sas",
    "swa", "cfa", "scfa", "rmsnorm", "rope_tables", "rope_apply", "quant_q8", "cache_store"};

static void check_op(const dsops_op_desc *op)
{
    const char *n = op->name;
    tu_check(dsops_op_find(n) == op, "%s: dsops_op_find gives another entry", n);
    tu_check(op->args_size >= sizeof(dsops_tensor), "%s: args_size %zu", n, op->args_size);
    tu_check(op->init && op->output_shapes && op->call, "%s: init, output_shapes and call are required", n);
    int outputs = 0;
    for (size_t i = 0; i < op->n_tensors; i++) {
        const dsops_tensor_desc *t = &op->tensors[i];
        tu_check(t->name && t->name[0], "%s: tensor %zu has no name", n, i);
        tu_check(t->offset + sizeof(dsops_tensor) <= op->args_size && t->offset % sizeof(void *) == 0,
                 "%s.%s: offset %zu outside the %zu-byte record", n, t->name, t->offset, op->args_size);
        tu_check(t->role >= DSOPS_ARG_IN && t->role <= DSOPS_ARG_OUT_OPT, "%s.%s: role %d", n, t->name, (int)t->role);
        tu_check(t->role >= DSOPS_ARG_OUT || t->dtypes != 0, "%s.%s: an input accepts no dtype", n, t->name);
        outputs += t->role >= DSOPS_ARG_INOUT;
        for (size_t j = 0; j < i; j++)
            tu_check(strcmp(t->name, op->tensors[j].name) != 0, "%s: tensor %s described twice", n, t->name);
    }
    tu_check(outputs > 0, "%s: no output or in-out tensor", n);
    for (size_t i = 0; i < op->n_params; i++) {
        const dsops_param_desc *p = &op->params[i];
        tu_check(p->offset + p->size <= op->args_size && p->size > 0, "%s.%s: [%zu, +%zu) outside the record", n,
                 p->name, p->offset, p->size);
        if (p->type == DSOPS_PARAM_ENUM) {
            int k = 0;
            while (k < 64 && p->spellings && p->spellings[k].spelling)
                k++;
            tu_check(p->spellings && k > 0 && k < 64, "%s.%s: enum without a NULL-ended list", n, p->name);
        }
        for (size_t j = 0; j < op->n_tensors; j++)
            tu_check(strcmp(p->name, op->tensors[j].name) != 0, "%s: %s is a tensor and a parameter", n, p->name);
    }
    if (op->variant_of)
        tu_check(dsops_op_find(op->variant_of) != NULL, "%s: variant of unknown %s", n, op->variant_of);
    void *rec = calloc(1, op->args_size);
    tu_check(rec && op->init(rec, op->default_preset) == DSOPS_OK, "%s: init with its preset failed (%s)", n,
             dsops_last_error());
    free(rec);
}

/* rmsnorm through its description: y = x / sqrt(mean(x^2) + eps) * gamma, rounded to bf16. */
static void drive_rmsnorm(void)
{
    const dsops_op_desc *op = dsops_op_find("rmsnorm");
    if (!tu_check(op != NULL, "rmsnorm is not described"))
        return;
    enum { R = 2, W = 8 };
    uint16_t x[R * W], g[W], y[R * W];
    for (int i = 0; i < R * W; i++)
        x[i] = tu_bf16((float)(i % 5) - 2.0f);
    for (int i = 0; i < W; i++)
        g[i] = tu_bf16(1.0f + 0.125f * (float)i);
    char *rec = calloc(1, op->args_size);
    if (!tu_check(rec && op->init(rec, op->default_preset) == DSOPS_OK, "rmsnorm init"))
        return free(rec);
    int64_t xs[2] = {R, W}, gs[1] = {W};
    for (size_t i = 0; i < op->n_tensors; i++) {
        dsops_tensor *t = (dsops_tensor *)(rec + op->tensors[i].offset);
        if (!strcmp(op->tensors[i].name, "x"))
            *t = dsops_tensor_make(x, DSOPS_BF16, 2, xs);
        else if (!strcmp(op->tensors[i].name, "weight"))
            *t = dsops_tensor_make(g, DSOPS_BF16, 1, gs);
    }
    char msg[256] = "";
    dsops_status st = op->output_shapes(rec, msg, sizeof msg);
    tu_check(st == DSOPS_OK, "rmsnorm output_shapes: %s", msg);
    for (size_t i = 0; st == DSOPS_OK && i < op->n_tensors; i++) {
        dsops_tensor *t = (dsops_tensor *)(rec + op->tensors[i].offset);
        if (op->tensors[i].role == DSOPS_ARG_OUT) {
            tu_check(t->dtype == DSOPS_BF16 && t->ndim == 2 && t->shape[0] == R && t->shape[1] == W,
                     "rmsnorm %s: described as dtype %d rank %d", op->tensors[i].name, (int)t->dtype, t->ndim);
            t->data = y;
        }
    }
    float eps = 0.0f;
    for (size_t i = 0; i < op->n_params; i++)
        if (!strcmp(op->params[i].name, "eps"))
            memcpy(&eps, rec + op->params[i].offset, sizeof eps);
    if (st == DSOPS_OK && tu_check(op->call(NULL, rec) == DSOPS_OK, "rmsnorm call: %s", dsops_last_error())) {
        for (int r = 0; r < R; r++) {
            double ss = 0;
            for (int i = 0; i < W; i++)
                ss += (double)tu_f32(x[r * W + i]) * tu_f32(x[r * W + i]);
            double inv = 1.0 / sqrt(ss / W + eps);
            for (int i = 0; i < W; i++) {
                double want = tu_f32(x[r * W + i]) * inv * tu_f32(g[i]), got = tu_f32(y[r * W + i]);
                tu_check(fabs(got - want) <= 1e-4 + 0.01 * fabs(want), "rmsnorm y[%d][%d] = %g, expected %g", r, i,
                         got, want);
            }
        }
    }
    free(rec);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, 1);
    size_t count = dsops_op_count();
    tu_check(dsops_op_at(count) == NULL && dsops_op_find("no_such_operator") == NULL && dsops_op_find(NULL) == NULL,
             "lookups past the table must give NULL");
    for (size_t i = 0; i < count; i++)
        check_op(dsops_op_at(i));
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        tu_check(dsops_op_find(expected[i]) != NULL, "%s is not described", expected[i]);
    tu_check(!strcmp(dsops_enum_spelling(dsops_preset_spellings(), DSOPS_PRESET_V4_PRO), "v4_pro"),
             "preset spellings");
    drive_rmsnorm();
    return tu_finish();
}
