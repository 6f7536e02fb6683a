/* Alternatives beside the operators in `dsops bench` (see alternatives.h). */
#include "alternatives.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "safetensors.h"

#ifndef DSOPS_SOURCE_DIR
#define DSOPS_SOURCE_DIR "."
#endif

const char *alt_name(alt_kind k)
{
    return k == ALT_COMPOSITE ? "composite" : k == ALT_NUMPY ? "numpy" : "torch";
}

/* 1 if `python` can import `module` (quietly). */
static int has_module(const char *python, const char *module)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import %s' >/dev/null 2>&1", python, module);
    int rc = system(cmd);
    return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

const char *alt_python(alt_kind k)
{
    static int probed[ALT_KIND_COUNT];
    static const char *found[ALT_KIND_COUNT];
    if (k == ALT_COMPOSITE)
        return NULL;
    if (!probed[k]) {
        probed[k] = 1;
        const char *env = getenv("DSOPS_PYTHON");
        const char *candidates[3] = {env && *env ? env : NULL, "python3", "/usr/bin/python3"};
        const char *module = k == ALT_NUMPY ? "numpy" : "torch";
        for (int i = 0; i < 3 && !found[k]; i++)
            if (candidates[i] && has_module(candidates[i], module))
                found[k] = candidates[i];
    }
    return found[k];
}

/* A named tensor (absent ones are skipped) or metadata value of an inputs file. */
typedef struct named_tensor {
    const char *name;
    const dsops_tensor *tensor;
} named_tensor;
typedef struct named_value {
    const char *key;
    double value;
} named_value;

static int write_inputs(const char *path, const named_tensor *t, int nt, const named_value *m, int nm, char *why,
                        size_t cap)
{
    dsops_st_writer *w = dsops_st_writer_create();
    if (!w)
        return snprintf(why, cap, "out of memory"), -1;
    int bad = 0;
    for (int i = 0; i < nt && !bad; i++)
        bad = t[i].tensor->data && dsops_st_writer_add(w, t[i].name, t[i].tensor, why, cap);
    for (int i = 0; i < nm && !bad; i++) {
        char v[64];
        snprintf(v, sizeof v, "%.9g", m[i].value);
        bad = dsops_st_writer_set_metadata(w, m[i].key, v, why, cap);
    }
    bad = bad || dsops_st_writer_save(w, path, why, cap);
    dsops_st_writer_destroy(w);
    return bad ? -1 : 0;
}

int alt_write_sfa_inputs(const dsops_sparse_flash_attention_v32_args *a, const char *path, char *why, size_t cap)
{
    const named_tensor t[] = {{"q_nope", &a->q_nope},           {"q_rope", &a->q_rope},
                              {"key_nope", &a->key_nope},       {"key_nope_scale", &a->key_nope_scale},
                              {"key_rope", &a->key_rope},       {"topk_indices", &a->topk_indices},
                              {"topk_length", &a->topk_length}, {"block_table", &a->block_table},
                              {"cu_seqlens_q", &a->cu_seqlens_q}, {"seqused_kv", &a->seqused_kv}};
    const named_value m[] = {{"softmax_scale", a->softmax_scale}};
    return write_inputs(path, t, (int)(sizeof t / sizeof t[0]), m, 1, why, cap);
}

int alt_write_li_inputs(const dsops_lightning_indexer_args *a, const char *path, char *why, size_t cap)
{
    const named_tensor t[] = {{"q_idx", &a->q_idx},           {"q_idx_scale", &a->q_idx_scale},
                              {"weights", &a->weights},       {"key_cache", &a->key_cache},
                              {"key_scale_cache", &a->key_scale_cache}, {"block_table", &a->block_table},
                              {"cu_seqlens_q", &a->cu_seqlens_q}, {"seqused_kv", &a->seqused_kv}};
    const named_value m[] = {{"cmp_ratio", a->cmp_ratio}, {"topk", (double)a->topk_indices.shape[1]}};
    return write_inputs(path, t, (int)(sizeof t / sizeof t[0]), m, 2, why, cap);
}

void alt_run_python(alt_kind k, const char *op, const char *in_path, const char *out_path, int threads,
                    double budget_s, alt_result *r)
{
    memset(r, 0, sizeof *r);
    const char *python = alt_python(k);
    if (!python) {
        snprintf(r->why, sizeof r->why, "no python3 with %s", k == ALT_NUMPY ? "numpy" : "torch");
        r->unavailable = 1;
        return;
    }
    const char *script = getenv("DSOPS_ALTERNATIVES");
    char path[1024];
    if (!script || !*script) {
        snprintf(path, sizeof path, "%s/harness/alternatives.py", DSOPS_SOURCE_DIR);
        script = path;
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' '%s' %s %s '%s' '%s' --threads %d --budget %.3f 2>&1", python, script,
             alt_name(k), op, in_path, out_path, threads, budget_s);
    FILE *p = popen(cmd, "r");
    if (!p) {
        snprintf(r->why, sizeof r->why, "cannot start %s", python);
        return;
    }
    char line[512], last[512] = "";
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0])
            snprintf(last, sizeof last, "%s", line);
        double med;
        int runs;
        char version[48];
        if (sscanf(line, "median_s=%lf runs=%d version=%47[^\n]", &med, &runs, version) == 3) {
            r->ran = 1;
            r->median_s = med;
            snprintf(r->version, sizeof r->version, "%s", version);
        }
    }
    int rc = pclose(p);
    if (!r->ran || rc != 0) {
        r->ran = 0;
        snprintf(r->why, sizeof r->why, "%s failed: %.120s", alt_name(k), last);
    }
}

/* The tensor `name` of a file as fp32 values with `count` elements, or NULL (why says so). */
static dsops_st_file *open_fp32(const char *path, const char *name, size_t count, const float **values, alt_result *r)
{
    dsops_st_file *f = NULL;
    char err[DSOPS_ST_ERRLEN];
    if (dsops_st_open(path, &f, err, sizeof err)) {
        snprintf(r->why, sizeof r->why, "%.150s", err);
        return NULL;
    }
    const dsops_tensor *t = dsops_st_tensor(f, name);
    size_t n = 1;
    for (int d = 0; t && d < t->ndim; d++)
        n *= (size_t)t->shape[d];
    if (!t || t->dtype != DSOPS_FP32 || n != count) {
        snprintf(r->why, sizeof r->why, "output '%s' missing or of another dtype or size", name);
        dsops_st_close(f);
        return NULL;
    }
    *values = t->data;
    return f;
}

void alt_check_sfa_file(const char *out_path, const dsops_tensor *out_bf16, alt_result *r)
{
    size_t n = 1;
    for (int d = 0; d < out_bf16->ndim; d++)
        n *= (size_t)out_bf16->shape[d];
    const float *alt;
    dsops_st_file *f = open_fp32(out_path, "out", n, &alt, r);
    r->agrees = 0;
    if (!f)
        return;
    float *ours = malloc(sizeof(float) * n + 4);
    if (!ours) {
        dsops_st_close(f);
        snprintf(r->why, sizeof r->why, "out of memory");
        return;
    }
    dsops_bf16_to_fp32(out_bf16->data, ours, n);
    size_t outside = 0;
    double max_err = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)alt[i] - (double)ours[i]);
        outside += !(e <= 1e-4 + 0.005 * fabs((double)ours[i]));
        max_err = e > max_err ? e : max_err;
    }
    r->agrees = outside <= (size_t)floor(0.005 * (double)n + 0.5);
    snprintf(r->why, sizeof r->why, "%zu of %zu outside 1e-4 + 0.005|x|, max |diff| %.3g", outside, n, max_err);
    free(ours);
    dsops_st_close(f);
}

void alt_check_li_scores(const float *alt, const float *scores, int64_t T, int64_t K, alt_result *r)
{
    int64_t outside = 0;
    double max_err = 0.0;
    for (int64_t i = 0; i < T * K; i++) {
        double x = scores[i], y = alt[i];
        if (isinf(x) || isinf(y)) { /* padding past the visible keys: both or neither */
            outside += x != y;
            continue;
        }
        double e = fabs(x - y);
        outside += !(e <= 1e-5 + 1e-4 * fabs(x));
        max_err = e > max_err ? e : max_err;
    }
    r->agrees = outside == 0;
    snprintf(r->why, sizeof r->why, "%lld of %lld selected scores outside 1e-5 + 1e-4|x|, max |diff| %.3g",
             (long long)outside, (long long)(T * K), max_err);
}

void alt_check_li_file(const char *out_path, const float *scores, int64_t T, int64_t K, alt_result *r)
{
    const float *alt;
    dsops_st_file *f = open_fp32(out_path, "topk_scores", (size_t)(T * K), &alt, r);
    r->agrees = 0;
    if (!f)
        return;
    alt_check_li_scores(alt, scores, T, K, r);
    dsops_st_close(f);
}
