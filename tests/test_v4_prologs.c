/* mla_prolog_v4 and indexer_prolog_v4 (spec §3.3, §3.5) against their oracles (ref/ref_mla_prolog_v4.c,
 * ref/ref_indexer_prolog_v4.c):
 *  - small problems on every instruction-set tier from scalar up to the detected one: both mla variants
 *    (bf16 / int8 wq_b), odd shapes (H 96, Q 80, N 3, D 65 / 128 / 512; NI 1 / 3, DI 64 / 96 / 128 with a
 *    random non-power-of-two "Hadamard" or the Sylvester matrix), the three rope modes with and without
 *    rope_inverse, gammas / tables / Hadamard in bf16 and fp32, padded (non-dense) views of x, the tables and
 *    every output, all-zero tokens and gamma_cq = 0 (qr 0, qr_scale 0, q 0), int8 weights at -128 / 127,
 *    weights overflowing fp16, T = 0 / 1 / 17;
 *  - tolerances of the spec: q, kv, bf16 qr 1e-4 / 2^-7 / 0.005; int8 qr and q_idx 1 / 0 / 0; qr_scale
 *    2.5e-5 / 0.005 / 0.005; q_idx_scale and weights 1e-4 / 0.007825 / 0.005 (q of a token whose qr row the
 *    library rounded differently, within the qr tolerance, is compared given the library's qr: m4_compare);
 *  - every output element written (a NaN / -128 sentinel must be gone) and every other byte of the output
 *    buffers (padding, guard zones before and after) untouched; padding of the inputs holds NaN;
 *  - a prepared object gives bitwise the results of the unprepared call; one made from other weights (or
 *    for the other operator) is rejected with DSOPS_ERR_PARAM before anything is written;
 *  - bitwise determinism for 1, 2 and 3 threads;
 *  - the oracles themselves against an independent fp64 evaluation of the Math on the small problems;
 *  - the case tables of docs/CASES.md ("mla_prolog_v4", "indexer_prolog_v4") and their generated data; the
 *    CI cases themselves run in tests/test_cases.c.
 * Usage: test_v4_prologs [label filter]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "problems.h"
#include "ref.h"
#include "run_common.h"
#include "test_util.h"

static dsops_context *ctx;

static const tu_tol TOL_BF16 = {1e-4, 1.0 / 128, 0.005};      /* q, kv, bf16 qr */
static const tu_tol TOL_INT8 = {1, 0, 0};                     /* int8 qr, q_idx */
static const tu_tol TOL_QR_SCALE = {2.5e-5, 0.005, 0.005};    /* qr_scale */
static const tu_tol TOL_IDX = {1e-4, 0.007825, 0.005};        /* q_idx_scale, weights */

#define LEAD 16   /* sentinel elements before every output view */
#define GUARD 67  /* sentinel elements after every output view */

/* ---- helpers ------------------------------------------------------------------------------------ */

static float f16_value(uint16_t h)
{
    float f;
    dsops_fp16_to_fp32(&h, &f, 1);
    return f;
}

/* Sentinel bits per dtype: NaN for the float types (an unwritten element cannot pass a comparison), -128
 * for int8 (Q8 never produces it). */
static void sentinel(dsops_dtype dt, unsigned char *pat)
{
    const uint32_t f32 = 0x7fa5a5a5u;
    const uint16_t bf = 0x7fa5u, hf = 0x7ea5u;
    switch (dt) {
    case DSOPS_FP32: memcpy(pat, &f32, 4); break;
    case DSOPS_BF16: memcpy(pat, &bf, 2); break;
    case DSOPS_FP16: memcpy(pat, &hf, 2); break;
    default: pat[0] = 0x80; break;
    }
}

/* ---- tensor views in test buffers ------------------------------------------------------------------- */

/* Strides of a [shape] view: dense, or padded (every outer stride larger than the dense one; the inner
 * stride stays 1, and 1-D views stay dense). Returns the elements the view spans. */
static int64_t view_strides(int ndim, const int64_t *shape, int padded, int64_t *stride)
{
    int64_t span = 1;
    stride[ndim - 1] = 1;
    for (int d = ndim - 2; d >= 0; d--)
        stride[d] = stride[d + 1] * (shape[d + 1] > 0 ? shape[d + 1] : 1) + (padded ? 3 + 2 * d : 0);
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0)
            return 0;
        span += (shape[d] - 1) * stride[d];
    }
    return span;
}

static unsigned char *elem_at(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    int64_t off = i0 * t->stride[0];
    if (t->ndim > 1)
        off += i1 * t->stride[1];
    if (t->ndim > 2)
        off += i2 * t->stride[2];
    return (unsigned char *)t->data + off * (int64_t)dsops_dtype_size(t->dtype);
}

static int64_t numel(const dsops_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

/* Element e (logical row-major order) of a view of rank <= 3. */
static unsigned char *elem_lin(const dsops_tensor *t, int64_t e)
{
    int64_t i[3] = {0, 0, 0};
    for (int d = t->ndim - 1; d >= 0; d--) {
        i[d] = e % t->shape[d];
        e /= t->shape[d];
    }
    return elem_at(t, i[0], i[1], i[2]);
}

static float get_f(const dsops_tensor *t, int64_t e)
{
    const unsigned char *p = elem_lin(t, e);
    switch (t->dtype) {
    case DSOPS_FP32: { float v; memcpy(&v, p, 4); return v; }
    case DSOPS_BF16: { uint16_t h; memcpy(&h, p, 2); return tu_f32(h); }
    case DSOPS_FP16: { uint16_t h; memcpy(&h, p, 2); return f16_value(h); }
    case DSOPS_INT8: return (float)*(const int8_t *)p;
    default: return NAN;
    }
}

static void set_f(const dsops_tensor *t, int64_t e, float v)
{
    unsigned char *p = elem_lin(t, e);
    if (t->dtype == DSOPS_FP32) {
        memcpy(p, &v, 4);
    } else if (t->dtype == DSOPS_FP16) {
        uint16_t h;
        dsops_fp32_to_fp16(&v, &h, 1);
        memcpy(p, &h, 2);
    } else if (t->dtype == DSOPS_INT8) {
        *(int8_t *)p = (int8_t)v;
    } else {
        uint16_t h = tu_bf16(v);
        memcpy(p, &h, 2);
    }
}

/* A buffer holding one view, with sentinel zones before and after it (outputs) or NaN padding (inputs). */
typedef struct obuf {
    const char *name;
    dsops_tensor t;
    unsigned char *buf;  /* whole buffer */
    size_t bytes;
    int owned;
} obuf;

static void ob_fill_sentinel(unsigned char *p, size_t bytes, dsops_dtype dt)
{
    unsigned char pat[4];
    const size_t es = dsops_dtype_size(dt);
    sentinel(dt, pat);
    for (size_t i = 0; i < bytes; i++)
        p[i] = pat[i % es];
}

static void ob_make(obuf *o, const char *name, dsops_dtype dt, int ndim, const int64_t *shape, int padded)
{
    memset(o, 0, sizeof *o);
    o->name = name;
    int64_t stride[3];
    const int64_t span = view_strides(ndim, shape, padded, stride);
    const size_t es = dsops_dtype_size(dt);
    o->bytes = (size_t)(LEAD + span + GUARD) * es;
    o->buf = tu_calloc(o->bytes, 1);
    o->owned = 1;
    ob_fill_sentinel(o->buf, o->bytes, dt);
    o->t = dsops_tensor_make(o->buf + LEAD * es, dt, ndim, shape);
    for (int d = 0; d < ndim; d++)
        o->t.stride[d] = stride[d];
}

static void ob_free(obuf *o)
{
    if (o->owned)
        free(o->buf);
    o->buf = NULL;
}

static void ob_poison(obuf *o) { ob_fill_sentinel(o->buf, o->bytes, o->t.dtype); }

/* The elements widened to fp32, in logical order (caller frees). */
static float *ob_widen(const obuf *o)
{
    const int64_t n = numel(&o->t);
    float *f = tu_calloc((size_t)n, sizeof(float));
    for (int64_t e = 0; e < n; e++)
        f[e] = get_f(&o->t, e);
    return f;
}

/* Every element differs from the sentinel (was written). */
static int ob_all_written(const obuf *o, const char *label)
{
    unsigned char pat[4];
    const size_t es = dsops_dtype_size(o->t.dtype);
    sentinel(o->t.dtype, pat);
    const int64_t n = numel(&o->t);
    int64_t missing = 0, first = -1;
    for (int64_t e = 0; e < n; e++)
        if (memcmp(elem_lin(&o->t, e), pat, es) == 0) {
            if (first < 0)
                first = e;
            missing++;
        }
    return tu_check(missing == 0, "%s %s: %lld of %lld elements not written (first %lld)", label, o->name,
                    (long long)missing, (long long)n, (long long)first);
}

/* Every byte of the buffer that is not an element of the view still holds the sentinel. */
static int ob_outside_kept(const obuf *o, const char *label)
{
    unsigned char pat[4];
    const size_t es = dsops_dtype_size(o->t.dtype);
    sentinel(o->t.dtype, pat);
    unsigned char *copy = tu_calloc(o->bytes, 1);
    memcpy(copy, o->buf, o->bytes);
    dsops_tensor v = o->t;
    v.data = copy + ((unsigned char *)o->t.data - o->buf);
    const int64_t n = numel(&v);
    for (int64_t e = 0; e < n; e++)
        memcpy(elem_lin(&v, e), pat, es);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < o->bytes; i++)
        if (copy[i] != pat[i % es]) {
            if (!bad)
                first = i;
            bad++;
        }
    free(copy);
    return tu_check(bad == 0, "%s %s: %zu bytes outside the view's elements changed (first at byte %zu of %zu)",
                    label, o->name, bad, first, o->bytes);
}

/* Appends the raw bytes of every element (logical order) to *dst (grown as needed). */
static void ob_gather(const obuf *o, unsigned char **dst, size_t *len)
{
    const size_t es = dsops_dtype_size(o->t.dtype);
    const int64_t n = numel(&o->t);
    *dst = realloc(*dst, *len + (size_t)n * es + 1);
    if (!*dst)
        exit(1);
    for (int64_t e = 0; e < n; e++)
        memcpy(*dst + *len + (size_t)e * es, elem_lin(&o->t, e), es);
    *len += (size_t)n * es;
}

static unsigned char *gather_all(const obuf *outs, int nout, size_t *len)
{
    unsigned char *g = NULL;
    *len = 0;
    for (int i = 0; i < nout; i++)
        ob_gather(&outs[i], &g, len);
    return g;
}

/* An input view in a fresh buffer whose padding (and the zones around the view) hold the NaN / -128
 * sentinel, so that a read outside the elements shows in the results. */
typedef struct inputs {
    obuf b[16];
    int n;
} inputs;

static dsops_tensor in_make(inputs *in, const char *name, dsops_dtype dt, int ndim, const int64_t *shape, int padded)
{
    obuf *o = &in->b[in->n++];
    ob_make(o, name, dt, ndim, shape, padded);
    return o->t;
}

static void in_free(inputs *in)
{
    for (int i = 0; i < in->n; i++)
        ob_free(&in->b[i]);
    in->n = 0;
}

static void fill_uniform(const dsops_tensor *t, tu_rng *r, float lo, float hi)
{
    const int64_t n = numel(t);
    for (int64_t e = 0; e < n; e++)
        set_f(t, e, tu_rng_uniform(r, lo, hi));
}

/* The inputs rope_cos, rope_sin [T, 64] of dtype dt, U(-1,1). */
static void in_rope_tables(inputs *in, dsops_dtype dt, int64_t T, int padded, tu_rng *r, dsops_tensor *cos,
                           dsops_tensor *sin)
{
    const int64_t s[2] = {T, 64};
    *cos = in_make(in, "rope_cos", dt, 2, s, padded);                           /* [T, 64] */
    *sin = in_make(in, "rope_sin", dt, 2, s, padded);                           /* [T, 64] */
    fill_uniform(cos, r, -1, 1);
    fill_uniform(sin, r, -1, 1);
}

/* Rows of w [rows, cols] int8 = Q8 (spec §2.7) of a row of values; scale [rows] fp32. The values are the
 * bf16 row amp * U(-1,1), or with amp 0 values from {-1, 0}: Q8 gives {-127, 0} with scale 1/127 (0 for a
 * zero row), the docs/CASES.md sign data. */
#define SIGN_DATA 0.0f /* the amp of fill_q8_rows for values from {-1, 0} */

static void fill_q8_rows(const dsops_tensor *w, const dsops_tensor *scale, tu_rng *r, float amp)
{
    const int64_t rows = w->shape[0], cols = w->shape[1];
    float *v = tu_calloc((size_t)cols, sizeof(float));
    int8_t *q = tu_calloc((size_t)cols, 1);
    for (int64_t i = 0; i < rows; i++) {
        for (int64_t k = 0; k < cols; k++)
            v[k] = amp != 0.0f ? tu_round_bf16(amp * tu_rng_uniform(r, -1, 1)) : (tu_rng_u64(r) & 1 ? -1.0f : 0.0f);
        float s;
        dsops_ref_q8_group(v, cols, q, &s);
        for (int64_t k = 0; k < cols; k++)
            *(int8_t *)elem_at(w, i, k, 0) = q[k];
        set_f(scale, i, s);
    }
    free(v);
    free(q);
}

/* Compares one output (library, widened) with the oracle's (dense, widened). */
static int compare_out(const char *label, const obuf *o, const float *ref, tu_tol tol)
{
    char l[400];
    snprintf(l, sizeof l, "%s %s", label, o->name);
    float *f = ob_widen(o);
    int ok = tu_compare_close(l, f, ref, (size_t)numel(&o->t), tol, NULL);
    free(f);
    return ok;
}

/* fp64 -> bf16 -> fp64, one rounding (the shadow evaluations below). */
static double rb(double v) { return (double)tu_f32(dsops_ref_bf16_from_f64(v)); }

/* The rotation of spec §2.5.1 on x[0..63] (fp64 products of fp32 values, then the sum rounded to fp32 as
 * the Math's one fp32 addition), written out per mode. */
static void shadow_rot(const double *x, const double *c, const double *s_in, dsops_rope_mode m, int inv, double *y)
{
    double s[64];
    for (int e = 0; e < 64; e++)
        s[e] = inv ? -s_in[e] : s_in[e];
    for (int j = 0; j < 32; j++) {
        if (m == DSOPS_ROPE_INTERLEAVED) {
            y[2 * j] = x[2 * j] * c[2 * j] - x[2 * j + 1] * s[2 * j];
            y[2 * j + 1] = x[2 * j + 1] * c[2 * j + 1] + x[2 * j] * s[2 * j + 1];
        } else if (m == DSOPS_ROPE_HALF) {
            y[j] = x[j] * c[j] - x[j + 32] * s[j];
            y[j + 32] = x[j + 32] * c[j + 32] + x[j] * s[j + 32];
        } else {
            y[j] = x[2 * j] * c[j] - x[2 * j + 1] * s[j];
            y[j + 32] = x[2 * j + 1] * c[j + 32] + x[2 * j] * s[j + 32];
        }
    }
}

/* Row t of the tables rope_cos, rope_sin [T, 64] as fp64 into c[64], s[64]. */
static void shadow_tables(const dsops_tensor *cos, const dsops_tensor *sin, int64_t t, double *c, double *s)
{
    for (int e = 0; e < 64; e++)
        c[e] = get_f(cos, t * 64 + e), s[e] = get_f(sin, t * 64 + e);
}

/* The rotation of the last 64 of v[0 .. n-1] in place, each result rounded to bf16. */
static void shadow_rot_tail(double *v, int64_t n, const double *c, const double *s, dsops_rope_mode m, int inv)
{
    double y[64];
    shadow_rot(v + n - 64, c, s, m, inv, y);
    for (int e = 0; e < 64; e++)
        v[n - 64 + e] = rb(y[e]);
}

/* Q8 of spec §2.7 in the spec's fp32 steps (the shadows feed it fp64 values rounded to fp32). */
static void shadow_q8(const double *v, int64_t n, double *q, double *scale)
{
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++)
        amax = fabsf((float)v[i]) > amax ? fabsf((float)v[i]) : amax;
    const float sq = 127.0f / amax;
    if (amax == 0.0f || isinf(sq)) {
        for (int64_t i = 0; i < n; i++)
            q[i] = 0;
        *scale = 0;
        return;
    }
    for (int64_t i = 0; i < n; i++)
        q[i] = rint((double)((float)v[i] * sq));
    *scale = (double)(1.0f / sq);
}

/* ==================================================================================================
 * either operator, as its description (dsops_op_find) sees it
 * ================================================================================================== */

/* Oracle results, dense and widened, in the order of the problem's outputs. */
typedef struct ref_outs {
    float *v[4];
} ref_outs;

typedef struct prolog prolog;

/* A problem of mla_prolog_v4 or indexer_prolog_v4 as the shared runs see it: the operator's description
 * (call, prepare, the record's tensors by name), the call record, its inputs and its outputs (each obuf
 * named as its member of the record), and what differs between the operators. The first member of each
 * operator's problem struct, which the problem's functions convert back. */
struct prolog {
    const dsops_op_desc *op;
    void *args;                /* the problem's call record */
    inputs in;
    obuf out[4];
    int nout;
    void (*oracle)(const void *args);
    /* the oracle's results against an independent fp64 evaluation (small problems) */
    void (*shadow)(const char *label, const prolog *pl, const ref_outs *r);
    /* the library's outputs on one tier against the oracle's: tolerances and exact edge results */
    void (*compare)(const char *label, const prolog *pl, const ref_outs *r);
};

/* pl for a problem of operator `op` whose call record is args (set to the V4 defaults). */
static void prolog_init(prolog *pl, const char *op, void *args, void (*oracle)(const void *args),
                        void (*shadow)(const char *, const prolog *, const ref_outs *),
                        void (*compare)(const char *, const prolog *, const ref_outs *))
{
    pl->op = dsops_op_find(op);
    if (!pl->op || pl->op->init(args, DSOPS_PRESET_V4_FLASH) != DSOPS_OK) {
        printf("operator %s: no description or no V4 defaults (%s)\n", op, dsops_last_error());
        exit(1);
    }
    pl->args = args;
    pl->oracle = oracle, pl->shadow = shadow, pl->compare = compare;
}

/* The tensor member `name` of a call record of op. */
static dsops_tensor *member(const dsops_op_desc *op, void *args, const char *name)
{
    for (size_t i = 0; i < op->n_tensors; i++)
        if (strcmp(op->tensors[i].name, name) == 0)
            return (dsops_tensor *)((char *)args + op->tensors[i].offset);
    printf("%s has no tensor %s\n", op->name, name);
    exit(1);
}

/* An output [shape] in a sentinel-framed buffer, set as the record's member of that name. */
static void prolog_output(prolog *pl, const char *name, dsops_dtype dt, int ndim, const int64_t *shape, int padded)
{
    obuf *o = &pl->out[pl->nout++];
    ob_make(o, name, dt, ndim, shape, padded);
    *member(pl->op, pl->args, name) = o->t;
}

/* Frees the buffers and the problem that pl heads. */
static void prolog_free(prolog *pl)
{
    in_free(&pl->in);
    for (int i = 0; i < pl->nout; i++)
        ob_free(&pl->out[i]);
    free(pl);
}

/* A copy of the record with `prep` as its prepared object (caller frees). */
static void *prolog_record(const prolog *pl, const dsops_prepared *prep)
{
    void *b = tu_calloc(1, pl->op->args_size);
    memcpy(b, pl->args, pl->op->args_size);
    memcpy((char *)b + pl->op->prepared_offset, &prep, sizeof prep);
    return b;
}

/* One call of the library with `args` (the record or a variant of it): sentinels in the outputs first. */
static dsops_status prolog_call(prolog *pl, const void *args)
{
    for (int i = 0; i < pl->nout; i++)
        ob_poison(&pl->out[i]);
    return pl->op->call(ctx, args);
}

static dsops_status prolog_call_prepared(prolog *pl, const dsops_prepared *prep)
{
    void *b = prolog_record(pl, prep);
    const dsops_status st = prolog_call(pl, b);
    free(b);
    return st;
}

/* The oracle on the record, into dense outputs of the same shapes. */
static ref_outs prolog_reference(const prolog *pl)
{
    void *a = prolog_record(pl, NULL);
    obuf dense[4];
    for (int i = 0; i < pl->nout; i++) {
        const obuf *o = &pl->out[i];
        ob_make(&dense[i], o->name, o->t.dtype, o->t.ndim, o->t.shape, 0);
        *member(pl->op, a, o->name) = dense[i].t;
    }
    pl->oracle(a);
    ref_outs r = {{NULL, NULL, NULL, NULL}};
    for (int i = 0; i < pl->nout; i++) {
        r.v[i] = ob_widen(&dense[i]);
        ob_free(&dense[i]);
    }
    free(a);
    return r;
}

static void ref_free(ref_outs *r)
{
    for (int i = 0; i < 4; i++)
        free(r->v[i]);
}

/* The oracle's outputs against a shadow evaluation: shadow[i] (fp64, dense) for output i, with tols[i]. */
static void compare_shadow(const char *label, const prolog *pl, const ref_outs *r, double *const *shadow,
                           const tu_tol *tols)
{
    for (int i = 0; i < pl->nout; i++) {
        const size_t n = (size_t)numel(&pl->out[i].t);
        float *f = tu_calloc(n, sizeof(float));
        for (size_t e = 0; e < n; e++)
            f[e] = (float)shadow[i][e];
        char l[300];
        snprintf(l, sizeof l, "%s oracle vs fp64 shadow: %s", label, pl->out[i].name);
        tu_compare_close(l, r->v[i], f, n, tols[i], NULL);
        free(f);
    }
}

/* A prepared object made from the record's weights, then the call with it: bitwise the results the
 * unprepared call just left, and nothing written outside the outputs. */
static void check_prepared_equal(const char *label, prolog *pl)
{
    size_t n1, n2;
    unsigned char *g1 = gather_all(pl->out, pl->nout, &n1);
    dsops_prepared *prep = NULL;
    dsops_status st = pl->op->prepare(ctx, pl->args, &prep);
    if (tu_check(st == DSOPS_OK && prep, "%s: prepare: status %s (%s)", label, dsops_status_name(st), dsops_last_error())) {
        st = prolog_call_prepared(pl, prep);
        if (tu_check(st == DSOPS_OK, "%s prepared: status %s (%s)", label, dsops_status_name(st), dsops_last_error())) {
            unsigned char *g2 = gather_all(pl->out, pl->nout, &n2);
            char l[400];
            snprintf(l, sizeof l, "%s: the prepared call", label);
            tu_check_same_bytes(l, g2, n2, g1, n1, "the unprepared one");
            for (int i = 0; i < pl->nout; i++)
                ob_outside_kept(&pl->out[i], label);
            free(g2);
        }
        dsops_prepared_destroy(prep);
    }
    free(g1);
}

/* The call on the current tier: every output element written, nothing else touched, the operator's
 * comparison with the oracle; then the same with a prepared object. */
static void prolog_run_tier(prolog *pl, const ref_outs *r, const char *label)
{
    dsops_status st = prolog_call(pl, pl->args);
    if (!tu_check(st == DSOPS_OK, "%s: status %s (%s)", label, dsops_status_name(st), dsops_last_error()))
        return;
    for (int i = 0; i < pl->nout; i++) {
        ob_all_written(&pl->out[i], label);
        ob_outside_kept(&pl->out[i], label);
    }
    pl->compare(label, pl, r);
    check_prepared_equal(label, pl);
}

/* A labelled problem (made from the label's seed): the oracle, its shadow evaluation when the problem is
 * small, then every tier from scalar up. Frees the problem. */
static void prolog_run(const char *label, prolog *pl, int small)
{
    ref_outs r = prolog_reference(pl);
    if (small)
        pl->shadow(label, pl, &r);
    char l[300];
    for (int isa = -1; tu_next_tier(ctx, &isa, label, l, sizeof l);)
        prolog_run_tier(pl, &r, l);
    tu_set_tier(ctx, dsops_isa_detected());
    ref_free(&r);
    prolog_free(pl);
}

/* The call with args (a record holding a prepared object that does not fit it) is rejected with
 * DSOPS_ERR_PARAM, naming "prepared", before anything is written. */
static void expect_prepared_rejected(const char *label, prolog *pl, const void *args)
{
    dsops_status st = prolog_call(pl, args);
    tu_check(st == DSOPS_ERR_PARAM, "%s: status %s (%s), expected DSOPS_ERR_PARAM", label, dsops_status_name(st),
             dsops_last_error());
    tu_check(st == DSOPS_OK || strstr(dsops_last_error(), "prepared") != NULL, "%s: message \"%s\" lacks \"prepared\"",
             label, dsops_last_error());
    for (int i = 0; i < pl->nout; i++)
        ob_outside_kept(&pl->out[i], label); /* nothing written: every byte still the sentinel */
}

/* Weights that a prepared object packs, in groups swapped together (a weight and its scale). */
typedef struct weight_group {
    const char *name[2];
} weight_group;

/* prep (made from pl's weights) on calls of pl whose weights of one group are other's (same shapes, other
 * memory): each rejected; labels "<what> other <weight>". */
static void expect_other_weights_rejected(const char *what, prolog *pl, prolog *other, const dsops_prepared *prep,
                                          const weight_group *groups, int ngroups)
{
    for (int g = 0; g < ngroups; g++) {
        void *b = prolog_record(pl, prep);
        for (int k = 0; k < 2 && groups[g].name[k]; k++)
            *member(pl->op, b, groups[g].name[k]) = *member(other->op, other->args, groups[g].name[k]);
        char l[200];
        snprintf(l, sizeof l, "%s other %s", what, groups[g].name[0]);
        expect_prepared_rejected(l, pl, b);
        free(b);
    }
}

/* The call's output bytes, for rc_check_threads. */
static unsigned char *prolog_run_gather(void *problem, size_t *n, dsops_status *st)
{
    prolog *pl = problem;
    *st = prolog_call(pl, pl->args);
    return *st == DSOPS_OK ? gather_all(pl->out, pl->nout, n) : NULL;
}

/* ==================================================================================================
 * mla_prolog_v4
 * ================================================================================================== */

typedef struct m4_spec {
    int T, H, Q, N, D;
    int int8;                  /* int8 wq_b (Q8 per row of the bf16 draw) */
    dsops_rope_mode rope_mode;
    int rope_inverse;
    dsops_dtype gamma_dtype;   /* gamma_cq and gamma_ckv (0: bf16) */
    dsops_dtype gckv_dtype;    /* gamma_ckv only, overrides gamma_dtype (0: as gamma_dtype) */
    dsops_dtype table_dtype;   /* rope_cos, rope_sin (0: bf16) */
    int padded;                /* x, the tables and the 2-D / 3-D outputs with padded outer strides */
    int zero_tokens;           /* the first tokens' x rows are all zero */
    int zero_gamma_cq;         /* gamma_cq = 0: cq = 0 for every token */
    int int8_extreme;          /* int8 wq_b only -128 / 127 (scales 1e-3) */
    float eps_qh;              /* 0: the preset's */
} m4_spec;

typedef struct m4_problem {
    prolog pl;                 /* outputs q, kv, qr, qr_scale (int8) */
    m4_spec sp;
    dsops_mla_prolog_v4_args a;
} m4_problem;

/* q[t] from a given qr[t] (and, int8, qr_scale[t]): steps 3 (3'), 4, 5 of §3.3 in the oracle's order (fp32
 * sums in ascending k or exact int32 dots, two fp32 multiplies, fp32 RMSNorm, bf16, rotation). */
static void m4_q_from_qr(const dsops_mla_prolog_v4_args *a, int64_t t, const dsops_tensor *qr, float qs, float *q_row)
{
    const int64_t Q = a->wq_a.shape[0], D = a->wkv.shape[0], ND = a->wq_b.shape[0], N = ND / D;
    const int int8 = a->wq_b.dtype == DSOPS_INT8;
    float *qb = tu_calloc((size_t)ND, sizeof(float)), *v = tu_calloc((size_t)D, sizeof(float));
    float c[64], s[64], y[64];
    for (int e = 0; e < 64; e++)
        c[e] = get_f(&a->rope_cos, t * 64 + e), s[e] = get_f(&a->rope_sin, t * 64 + e);
    for (int64_t n = 0; n < ND; n++) {
        if (int8) {
            int32_t dot = 0;
            for (int64_t k = 0; k < Q; k++)
                dot += (int32_t) * (const int8_t *)elem_at(qr, t, k, 0) *
                       (int32_t) * (const int8_t *)elem_at(&a->wq_b, n, k, 0);
            qb[n] = ((float)dot * qs) * get_f(&a->wq_b_scale, n);
        } else {
            float acc = 0.0f;
            for (int64_t k = 0; k < Q; k++)
                acc += get_f(qr, t * Q + k) * get_f(&a->wq_b, n * Q + k);
            qb[n] = tu_round_bf16(acc);
        }
    }
    for (int64_t h = 0; h < N; h++) {
        dsops_ref_rmsnorm_row(qb + h * D, D, NULL, a->eps_qh, v);
        for (int64_t d = 0; d < D; d++)
            v[d] = tu_round_bf16(v[d]);
        dsops_ref_rope_row(v + D - 64, c, s, a->rope_mode, a->rope_inverse, y);
        for (int e = 0; e < 64; e++)
            v[D - 64 + e] = tu_round_bf16(y[e]);
        memcpy(q_row + h * D, v, sizeof(float) * (size_t)D);
    }
    free(qb);
    free(v);
}

/* Exact edge results: tokens with cq = 0 have qr 0, qr_scale 0 and q 0 (spec §3.3 "Edge semantics"). */
static void m4_check_zero_cq(const char *label, const m4_problem *p, int64_t tokens)
{
    const int64_t N = p->sp.N, D = p->sp.D, Q = p->sp.Q;
    int64_t bad = 0;
    for (int64_t t = 0; t < tokens; t++) {
        for (int64_t e = 0; e < N * D; e++)
            bad += get_f(&p->pl.out[0].t, t * N * D + e) != 0.0f;
        for (int64_t e = 0; e < Q; e++)
            bad += get_f(&p->pl.out[2].t, t * Q + e) != 0.0f;
        if (p->pl.nout > 3)
            bad += get_f(&p->pl.out[3].t, t) != 0.0f;
    }
    tu_check(bad == 0, "%s: %lld values of the all-zero-cq tokens (q, qr, qr_scale) are not 0", label, (long long)bad);
}

/* The library's outputs against the oracle: tolerances and the exact results of all-zero cq.
 * The library may legitimately round a qr element the other way (its fp32 sums of a = lin(x, wq_a) run in
 * another order; qr tolerance 1 / 0 / 0 for int8, one bf16 step for bf16). One such element moves q of the
 * whole token by ~1e-3 in absolute terms: beyond 1e-4 + 2^-7 |q| for the ~10 % of elements with |q| < 0.1
 * (int8) or for the rotated elements whose random-table rotation cancels (bf16). So q of a token whose qr
 * row differs is compared with the oracle's steps 3-5 applied to the library's qr row. */
static void m4_compare(const char *label, const prolog *pl, const ref_outs *r)
{
    const m4_problem *p = (const m4_problem *)pl;
    const dsops_mla_prolog_v4_args *a = &p->a;
    const obuf *outs = pl->out;
    const int int8 = p->sp.int8;
    const float *q_ref = r->v[0];
    float *qc = NULL;
    const int64_t T = outs[0].t.shape[0], ND = outs[0].t.shape[1] * outs[0].t.shape[2], Q = outs[2].t.shape[1];
    int64_t conditioned = 0;
    for (int64_t t = 0; t < T; t++) {
        int differs = 0;
        for (int64_t k = 0; k < Q && !differs; k++)
            differs = get_f(&outs[2].t, t * Q + k) != r->v[2][t * Q + k];
        if (!differs)
            continue;
        if (!qc) {
            qc = tu_calloc((size_t)(T * ND), sizeof(float));
            memcpy(qc, r->v[0], sizeof(float) * (size_t)(T * ND));
        }
        m4_q_from_qr(a, t, &outs[2].t, int8 ? get_f(&outs[3].t, t) : 0.0f, qc + t * ND);
        conditioned++;
    }
    if (qc) {
        q_ref = qc;
        if (tu_verbose())
            printf("  note %s: q of %lld token(s) compared given the library's qr row (it differs from the "
                   "oracle's within the qr tolerance)\n", label, (long long)conditioned);
    }
    compare_out(label, &outs[0], q_ref, TOL_BF16);
    compare_out(label, &outs[1], r->v[1], TOL_BF16);
    compare_out(label, &outs[2], r->v[2], int8 ? TOL_INT8 : TOL_BF16);
    if (pl->nout > 3)
        compare_out(label, &outs[3], r->v[3], TOL_QR_SCALE);
    free(qc);
    const int64_t zero_cq_tokens =
        p->sp.zero_gamma_cq ? p->sp.T : (p->sp.zero_tokens < p->sp.T ? p->sp.zero_tokens : p->sp.T);
    if (zero_cq_tokens > 0)
        m4_check_zero_cq(label, p, zero_cq_tokens);
}

/* out[n] = x[t] . w[n] for x [T, H], w [rows, H] (rounded to bf16 unless int8: the int8 variant keeps the
 * fp32 sum); returns the sum of the squares of out[0 .. rows-1], the RMSNorm that follows. */
static double shadow_proj(const dsops_tensor *x, const dsops_tensor *w, int64_t t, int int8, double *out)
{
    const int64_t H = x->shape[1], rows = w->shape[0];
    double sumsq = 0;
    for (int64_t n = 0; n < rows; n++) {
        double acc = 0;
        for (int64_t k = 0; k < H; k++)
            acc += (double)get_f(x, t * H + k) * get_f(w, n * H + k);
        out[n] = int8 ? acc : rb(acc);
        sumsq += out[n] * out[n];
    }
    return sumsq;
}

/* An independent fp64 evaluation of §3.3 on a small problem (the oracle's structure: head and dimension
 * mapping, the rotated slice, rounding points, the order of the scale multiplies). */
static void m4_shadow_check(const char *label, const prolog *pl, const ref_outs *r)
{
    const dsops_mla_prolog_v4_args *a = pl->args;
    const int64_t T = a->x.shape[0], Q = a->wq_a.shape[0], D = a->wkv.shape[0];
    const int64_t ND = a->wq_b.shape[0], N = ND / D;
    const int int8 = a->wq_b.dtype == DSOPS_INT8;
    double *q = tu_calloc((size_t)(T * ND), 8), *kv = tu_calloc((size_t)(T * D), 8);
    double *qr = tu_calloc((size_t)(T * Q), 8);
    double *qs = tu_calloc((size_t)(T > 0 ? T : 1), 8), *av = tu_calloc((size_t)Q, 8), *cq = tu_calloc((size_t)Q, 8);
    double *qb = tu_calloc((size_t)ND, 8), *v = tu_calloc((size_t)D, 8);
    for (int64_t t = 0; t < T; t++) {
        double c[64], s[64];
        shadow_tables(&a->rope_cos, &a->rope_sin, t, c, s);
        const double ss = shadow_proj(&a->x, &a->wq_a, t, int8, av);
        const double rq = sqrt(ss / (double)Q + a->eps_cq);
        for (int64_t n = 0; n < Q; n++) {
            cq[n] = av[n] / rq * get_f(&a->gamma_cq, n);
            if (!int8)
                cq[n] = rb(cq[n]);
        }
        /* qr is compared on its own; the steps after it start from the oracle's qr row, so that one qr
         * element rounded the other way (fp64 here) does not move the whole token's q */
        const float *oqr = r->v[2] + t * Q;
        if (int8) {
            shadow_q8(cq, Q, qr + t * Q, &qs[t]);
            for (int64_t n = 0; n < ND; n++) {
                double dot = 0;
                for (int64_t k = 0; k < Q; k++)
                    dot += (double)oqr[k] * get_f(&a->wq_b, n * Q + k);
                qb[n] = dot * r->v[3][t] * get_f(&a->wq_b_scale, n);
            }
        } else {
            for (int64_t n = 0; n < Q; n++)
                qr[t * Q + n] = cq[n];
            for (int64_t n = 0; n < ND; n++) {
                double acc = 0;
                for (int64_t k = 0; k < Q; k++)
                    acc += (double)oqr[k] * get_f(&a->wq_b, n * Q + k);
                qb[n] = rb(acc);
            }
        }
        for (int64_t h = 0; h < N; h++) {
            double sh = 0;
            for (int64_t d = 0; d < D; d++)
                sh += qb[h * D + d] * qb[h * D + d];
            const double rh = sqrt(sh / (double)D + a->eps_qh);
            for (int64_t d = 0; d < D; d++)
                v[d] = rb(qb[h * D + d] / rh);
            shadow_rot_tail(v, D, c, s, a->rope_mode, a->rope_inverse);
            memcpy(q + t * ND + h * D, v, sizeof(double) * (size_t)D);
        }
        const double sk = shadow_proj(&a->x, &a->wkv, t, int8, v);
        const double rk = sqrt(sk / (double)D + a->eps_ckv);
        for (int64_t d = 0; d < D; d++)
            v[d] = rb(v[d] / rk * get_f(&a->gamma_ckv, d));
        shadow_rot_tail(v, D, c, s, a->rope_mode, a->rope_inverse);
        memcpy(kv + t * D, v, sizeof(double) * (size_t)D);
    }
    const tu_tol tols[4] = {TOL_BF16, TOL_BF16, int8 ? TOL_INT8 : TOL_BF16, TOL_QR_SCALE};
    compare_shadow(label, pl, r, (double *const[]){q, kv, qr, qs}, tols);
    free(q), free(kv), free(qr), free(qs), free(av), free(cq), free(qb), free(v);
}

static void m4_oracle(const void *args) { dsops_ref_mla_prolog_v4(args); }

static m4_problem *m4_make(const m4_spec *sp, uint64_t seed)
{
    m4_problem *p = tu_calloc(1, sizeof *p);
    prolog_init(&p->pl, "mla_prolog_v4", &p->a, m4_oracle, m4_shadow_check, m4_compare);
    p->sp = *sp;
    tu_rng r;
    tu_rng_seed(&r, seed);
    const int64_t T = sp->T, H = sp->H, Q = sp->Q, N = sp->N, D = sp->D, ND = N * D;
    const dsops_dtype gdt = sp->gamma_dtype ? sp->gamma_dtype : DSOPS_BF16;
    const dsops_dtype gkdt = sp->gckv_dtype ? sp->gckv_dtype : gdt;
    const dsops_dtype tdt = sp->table_dtype ? sp->table_dtype : DSOPS_BF16;
    dsops_mla_prolog_v4_args *a = &p->a;
    a->rope_mode = sp->rope_mode;
    a->rope_inverse = sp->rope_inverse;
    if (sp->eps_qh > 0)
        a->eps_qh = sp->eps_qh;

    int64_t s[3];
    s[0] = T, s[1] = H;
    a->x = in_make(&p->pl.in, "x", DSOPS_BF16, 2, s, sp->padded);                 /* [T, H] bf16 */
    fill_uniform(&a->x, &r, -1, 1);
    for (int64_t t = 0; t < sp->zero_tokens && t < T; t++)
        for (int64_t k = 0; k < H; k++)
            set_f(&a->x, t * H + k, 0.0f);
    s[0] = Q, s[1] = H;
    a->wq_a = in_make(&p->pl.in, "wq_a", DSOPS_BF16, 2, s, 0);                    /* [Q, H] bf16 */
    fill_uniform(&a->wq_a, &r, -0.1f, 0.1f);
    s[0] = Q;
    a->gamma_cq = in_make(&p->pl.in, "gamma_cq", gdt, 1, s, 0);                   /* [Q] */
    fill_uniform(&a->gamma_cq, &r, sp->zero_gamma_cq ? 0 : -1, sp->zero_gamma_cq ? 0 : 1);
    s[0] = ND, s[1] = Q;
    a->wq_b = in_make(&p->pl.in, "wq_b", sp->int8 ? DSOPS_INT8 : DSOPS_BF16, 2, s, 0); /* [N*D, Q] */
    if (sp->int8) {
        s[0] = ND;
        a->wq_b_scale = in_make(&p->pl.in, "wq_b_scale", DSOPS_FP32, 1, s, 0);   /* [N*D] fp32 */
        if (sp->int8_extreme) {
            for (int64_t e = 0; e < ND * Q; e++)
                set_f(&a->wq_b, e, tu_rng_u64(&r) & 1 ? 127.0f : -128.0f);
            for (int64_t e = 0; e < ND; e++)
                set_f(&a->wq_b_scale, e, 1e-3f);
        } else {
            fill_q8_rows(&a->wq_b, &a->wq_b_scale, &r, 0.1f);
        }
    } else {
        fill_uniform(&a->wq_b, &r, -0.1f, 0.1f);
    }
    s[0] = D, s[1] = H;
    a->wkv = in_make(&p->pl.in, "wkv", DSOPS_BF16, 2, s, 0);                      /* [D, H] bf16 */
    fill_uniform(&a->wkv, &r, -0.1f, 0.1f);
    s[0] = D;
    a->gamma_ckv = in_make(&p->pl.in, "gamma_ckv", gkdt, 1, s, 0);                /* [D] */
    fill_uniform(&a->gamma_ckv, &r, -1, 1);
    in_rope_tables(&p->pl.in, tdt, T, sp->padded, &r, &a->rope_cos, &a->rope_sin);

    s[0] = T, s[1] = N, s[2] = D;
    prolog_output(&p->pl, "q", DSOPS_BF16, 3, s, sp->padded);                  /* [T, N, D] bf16 */
    s[0] = T, s[1] = D;
    prolog_output(&p->pl, "kv", DSOPS_BF16, 2, s, sp->padded);                 /* [T, D] bf16 */
    s[0] = T, s[1] = Q;
    prolog_output(&p->pl, "qr", sp->int8 ? DSOPS_INT8 : DSOPS_BF16, 2, s, sp->padded); /* [T, Q] */
    if (sp->int8) {
        s[0] = T;
        prolog_output(&p->pl, "qr_scale", DSOPS_FP32, 1, s, 0);               /* [T] fp32 */
    }
    return p;
}

static void m4_run(const char *label, const m4_spec *sp)
{
    if (!tu_selected(label))
        return;
    m4_problem *p = m4_make(sp, tu_label_seed(label));
    prolog_run(label, &p->pl, (double)sp->T * sp->N * sp->D * sp->Q < 4e7);
}

/* T 5, H 96, Q 80, N 3, D 128 */
static m4_spec m4_base(int int8)
{
    m4_spec s;
    memset(&s, 0, sizeof s);
    s.T = 5, s.H = 96, s.Q = 80, s.N = 3, s.D = 128;
    s.int8 = int8;
    s.rope_mode = DSOPS_ROPE_INTERLEAVED;
    return s;
}

static void test_mla_small(void)
{
    char label[160];
    for (int w = 0; w < 2; w++) {
        const char *v = w ? "int8" : "bf16";
        m4_spec s = m4_base(w);
        snprintf(label, sizeof label, "mla4_%s_h96_q80_n3_d128", v);
        m4_run(label, &s);
        s.D = 65; /* Dn = 1 */
        snprintf(label, sizeof label, "mla4_%s_h96_q80_n3_d65", v);
        m4_run(label, &s);
        for (int m = 0; m < 3; m++)
            for (int inv = 0; inv < 2; inv++) {
                s = m4_base(w);
                s.rope_mode = (dsops_rope_mode)m;
                s.rope_inverse = inv;
                s.table_dtype = (m + inv + w) % 2 ? DSOPS_FP32 : DSOPS_BF16;
                snprintf(label, sizeof label, "mla4_%s_rope_%s_inv%d_tables_%s", v, cases_rope_name((dsops_rope_mode)m), inv,
                         dsops_dtype_name(s.table_dtype));
                m4_run(label, &s);
            }
        s = m4_base(w);
        s.gamma_dtype = DSOPS_FP32;
        snprintf(label, sizeof label, "mla4_%s_gamma_fp32", v);
        m4_run(label, &s);
        s.gckv_dtype = DSOPS_BF16;
        s.table_dtype = DSOPS_FP32;
        snprintf(label, sizeof label, "mla4_%s_gamma_cq_fp32_gamma_ckv_bf16_tables_fp32", v);
        m4_run(label, &s);
        s = m4_base(w);
        s.padded = 1;
        s.T = 6;
        snprintf(label, sizeof label, "mla4_%s_padded_views", v);
        m4_run(label, &s);
        s = m4_base(w);
        s.zero_tokens = 2;
        snprintf(label, sizeof label, "mla4_%s_zero_tokens", v);
        m4_run(label, &s);
        s = m4_base(w);
        s.zero_gamma_cq = 1;
        snprintf(label, sizeof label, "mla4_%s_gamma_cq_zero", v);
        m4_run(label, &s);
        s = m4_base(w);
        s.eps_qh = 0.5f;
        snprintf(label, sizeof label, "mla4_%s_eps_qh_0.5", v);
        m4_run(label, &s);
        static const int Ts[3] = {0, 1, 17};
        for (int i = 0; i < 3; i++) {
            s = m4_base(w);
            s.T = Ts[i];
            s.N = i == 1 ? 1 : 3;
            snprintf(label, sizeof label, "mla4_%s_t%d_n%d", v, s.T, s.N);
            m4_run(label, &s);
        }
        /* the V4 head dim with several tiles in every dimension */
        s = m4_base(w);
        s.T = tu_quick() ? 3 : 7, s.H = 256, s.Q = 192, s.N = 2, s.D = 512;
        snprintf(label, sizeof label, "mla4_%s_h256_q192_n2_d512", v);
        m4_run(label, &s);
    }
    m4_spec s = m4_base(1);
    s.int8_extreme = 1;
    m4_run("mla4_int8_wq_b_extremes", &s);
}

/* ==================================================================================================
 * indexer_prolog_v4
 * ================================================================================================== */

typedef enum i4_had { HAD_RANDOM = 0, HAD_SYLVESTER = 1 } i4_had;

typedef struct i4_spec {
    int T, H, Q, NI, DI;
    dsops_rope_mode rope_mode;
    int rope_inverse;
    dsops_dtype table_dtype;   /* 0: bf16 */
    dsops_dtype had_dtype;     /* 0: bf16 */
    i4_had had;                /* random U(-1,1)/sqrt(DI) or the normalised Sylvester matrix (DI a power of 2) */
    int padded;                /* qr, x, the tables and the 2-D / 3-D outputs with padded outer strides */
    int zero_tokens;           /* the first tokens' qr rows are 0 with qr_scale 0 */
    int sign_data;             /* qr and idx_wq_b from {-1, 0} through Q8 (the docs/CASES.md data) */
    float weights_scale;       /* 0: the preset's */
} i4_spec;

typedef struct i4_problem {
    prolog pl;                 /* outputs q_idx, q_idx_scale, weights */
    i4_spec sp;
    dsops_indexer_prolog_v4_args a;
} i4_problem;

/* The library's outputs against the oracle: tolerances, and q_idx / q_idx_scale exactly 0 for the tokens
 * whose qr row is 0. */
static void i4_compare(const char *label, const prolog *pl, const ref_outs *r)
{
    const i4_problem *p = (const i4_problem *)pl;
    compare_out(label, &pl->out[0], r->v[0], TOL_INT8);
    compare_out(label, &pl->out[1], r->v[1], TOL_IDX);
    compare_out(label, &pl->out[2], r->v[2], TOL_IDX);
    const int64_t zt = p->sp.zero_tokens < p->sp.T ? p->sp.zero_tokens : p->sp.T;
    if (zt > 0) {
        /* qr = 0, qr_scale = 0: qf = 0, so q_idx = 0 and q_idx_scale = 0 exactly */
        int64_t bad = 0;
        const int64_t NI = p->sp.NI, DI = p->sp.DI;
        for (int64_t e = 0; e < zt * NI * DI; e++)
            bad += get_f(&pl->out[0].t, e) != 0.0f;
        for (int64_t e = 0; e < zt * NI; e++)
            bad += get_f(&pl->out[1].t, e) != 0.0f;
        tu_check(bad == 0, "%s: %lld values of q_idx / q_idx_scale of the zero tokens are not 0", label, (long long)bad);
    }
}

/* An independent fp64 evaluation of §3.5 on a small problem. */
static void i4_shadow_check(const char *label, const prolog *pl, const ref_outs *r)
{
    const dsops_indexer_prolog_v4_args *a = pl->args;
    const int64_t T = a->x.shape[0], H = a->x.shape[1], Q = a->qr.shape[1];
    const int64_t NI = a->weights_proj.shape[0], DI = a->hadamard.shape[0];
    double *qi = tu_calloc((size_t)(T * NI * DI), 8), *qs = tu_calloc((size_t)(T * NI), 8);
    double *w = tu_calloc((size_t)(T * NI), 8), *u = tu_calloc((size_t)DI, 8), *hq = tu_calloc((size_t)DI, 8);
    for (int64_t t = 0; t < T; t++) {
        double c[64], s[64];
        shadow_tables(&a->rope_cos, &a->rope_sin, t, c, s);
        for (int64_t h = 0; h < NI; h++) {
            for (int64_t d = 0; d < DI; d++) {
                const int64_t n = h * DI + d;
                double dot = 0;
                for (int64_t k = 0; k < Q; k++)
                    dot += (double)get_f(&a->qr, t * Q + k) * get_f(&a->idx_wq_b, n * Q + k);
                /* (dot * qr_scale) * idx_wq_b_scale: fp32 products, as the Math */
                u[d] = rb((double)(((float)dot * get_f(&a->qr_scale, t)) * get_f(&a->idx_wq_b_scale, n)));
            }
            shadow_rot_tail(u, DI, c, s, a->rope_mode, a->rope_inverse);
            for (int64_t j = 0; j < DI; j++) {
                double acc = 0;
                for (int64_t k = 0; k < DI; k++)
                    acc += u[k] * get_f(&a->hadamard, k * DI + j);
                hq[j] = rb(acc);
            }
            shadow_q8(hq, DI, qi + (t * NI + h) * DI, &qs[t * NI + h]);
            qs[t * NI + h] = f16_value(dsops_ref_fp16_from_f32((float)qs[t * NI + h]));
            double acc = 0;
            for (int64_t k = 0; k < H; k++)
                acc += (double)get_f(&a->x, t * H + k) * get_f(&a->weights_proj, h * H + k);
            w[t * NI + h] = f16_value(dsops_ref_fp16_from_f32((float)(rb(acc) * a->weights_scale)));
        }
    }
    const tu_tol tols[3] = {TOL_INT8, TOL_IDX, TOL_IDX};
    compare_shadow(label, pl, r, (double *const[]){qi, qs, w}, tols);
    free(qi), free(qs), free(w), free(u), free(hq);
}

static void i4_oracle(const void *args) { dsops_ref_indexer_prolog_v4(args); }

static i4_problem *i4_make(const i4_spec *sp, uint64_t seed)
{
    i4_problem *p = tu_calloc(1, sizeof *p);
    prolog_init(&p->pl, "indexer_prolog_v4", &p->a, i4_oracle, i4_shadow_check, i4_compare);
    p->sp = *sp;
    tu_rng r;
    tu_rng_seed(&r, seed);
    const int64_t T = sp->T, H = sp->H, Q = sp->Q, NI = sp->NI, DI = sp->DI;
    const dsops_dtype tdt = sp->table_dtype ? sp->table_dtype : DSOPS_BF16;
    const dsops_dtype hdt = sp->had_dtype ? sp->had_dtype : DSOPS_BF16;
    dsops_indexer_prolog_v4_args *a = &p->a;
    a->rope_mode = sp->rope_mode;
    a->rope_inverse = sp->rope_inverse;
    if (sp->weights_scale != 0.0f)
        a->weights_scale = sp->weights_scale;

    int64_t s[3];
    s[0] = T, s[1] = Q;
    a->qr = in_make(&p->pl.in, "qr", DSOPS_INT8, 2, s, sp->padded);                /* [T, Q] int8 */
    s[0] = T;
    a->qr_scale = in_make(&p->pl.in, "qr_scale", DSOPS_FP32, 1, s, 0);             /* [T] fp32 */
    s[0] = NI * DI, s[1] = Q;
    a->idx_wq_b = in_make(&p->pl.in, "idx_wq_b", DSOPS_INT8, 2, s, 0);             /* [NI*DI, Q] int8 */
    s[0] = NI * DI;
    a->idx_wq_b_scale = in_make(&p->pl.in, "idx_wq_b_scale", DSOPS_FP32, 1, s, 0); /* [NI*DI] fp32 */
    if (sp->sign_data) {
        fill_q8_rows(&a->qr, &a->qr_scale, &r, SIGN_DATA);
        fill_q8_rows(&a->idx_wq_b, &a->idx_wq_b_scale, &r, SIGN_DATA);
    } else {
        fill_q8_rows(&a->qr, &a->qr_scale, &r, 1.0f);
        fill_q8_rows(&a->idx_wq_b, &a->idx_wq_b_scale, &r, 0.1f);
    }
    for (int64_t t = 0; t < sp->zero_tokens && t < T; t++) {
        for (int64_t k = 0; k < Q; k++)
            set_f(&a->qr, t * Q + k, 0.0f);
        set_f(&a->qr_scale, t, 0.0f);
    }
    s[0] = T, s[1] = H;
    a->x = in_make(&p->pl.in, "x", DSOPS_BF16, 2, s, sp->padded);                  /* [T, H] bf16 */
    fill_uniform(&a->x, &r, -1, 1);
    s[0] = NI, s[1] = H;
    a->weights_proj = in_make(&p->pl.in, "weights_proj", DSOPS_BF16, 2, s, 0);     /* [NI, H] bf16 */
    fill_uniform(&a->weights_proj, &r, -0.1f, 0.1f);
    in_rope_tables(&p->pl.in, tdt, T, sp->padded, &r, &a->rope_cos, &a->rope_sin);
    s[0] = DI, s[1] = DI;
    a->hadamard = in_make(&p->pl.in, "hadamard", hdt, 2, s, 0);                    /* [DI, DI] */
    if (sp->had == HAD_SYLVESTER)
        dsops_ref_hadamard_matrix(&a->hadamard);
    else
        fill_uniform(&a->hadamard, &r, -1.0f / sqrtf((float)DI), 1.0f / sqrtf((float)DI));

    s[0] = T, s[1] = NI, s[2] = DI;
    prolog_output(&p->pl, "q_idx", DSOPS_INT8, 3, s, sp->padded);               /* [T, NI, DI] int8 */
    s[0] = T, s[1] = NI;
    prolog_output(&p->pl, "q_idx_scale", DSOPS_FP16, 2, s, sp->padded);         /* [T, NI] fp16 */
    prolog_output(&p->pl, "weights", DSOPS_FP16, 2, s, sp->padded);             /* [T, NI] fp16 */
    return p;
}

static void i4_run(const char *label, const i4_spec *sp)
{
    if (!tu_selected(label))
        return;
    i4_problem *p = i4_make(sp, tu_label_seed(label));
    prolog_run(label, &p->pl, (double)sp->T * sp->NI * sp->DI * (sp->Q + sp->DI) < 4e7);
}

/* T 5, H 96, Q 80, NI 3, DI 96 (random matrix). The case list below mirrors test_mla_small on purpose: a base
 * spec and one changed field per labelled problem, so that each label reads as its own case. */
static i4_spec i4_base(void)
{
    i4_spec s;
    memset(&s, 0, sizeof s);
    s.T = 5, s.H = 96, s.Q = 80, s.NI = 3, s.DI = 96;
    s.rope_mode = DSOPS_ROPE_INTERLEAVED;
    s.had = HAD_RANDOM;
    return s;
}

static void test_idx_small(void)
{
    char label[160];
    i4_spec s = i4_base();
    i4_run("idx4_h96_q80_ni3_di96_random", &s);
    s.DI = 64;
    s.had = HAD_SYLVESTER;
    i4_run("idx4_h96_q80_ni3_di64_sylvester", &s);
    s.DI = 128;
    i4_run("idx4_h96_q80_ni3_di128_sylvester", &s);
    s.had_dtype = DSOPS_FP32;
    i4_run("idx4_di128_sylvester_fp32", &s);
    s = i4_base();
    s.had_dtype = DSOPS_FP32;
    s.table_dtype = DSOPS_FP32;
    i4_run("idx4_di96_hadamard_fp32_tables_fp32", &s);
    for (int m = 0; m < 3; m++)
        for (int inv = 0; inv < 2; inv++) {
            s = i4_base();
            s.DI = 64 + 32 * ((m + inv) % 3); /* 64, 96, 128 */
            s.had = s.DI == 96 ? HAD_RANDOM : HAD_SYLVESTER;
            s.rope_mode = (dsops_rope_mode)m;
            s.rope_inverse = inv;
            s.table_dtype = inv ? DSOPS_FP32 : DSOPS_BF16;
            snprintf(label, sizeof label, "idx4_rope_%s_inv%d_di%d_tables_%s", cases_rope_name((dsops_rope_mode)m), inv, s.DI,
                     dsops_dtype_name(s.table_dtype));
            i4_run(label, &s);
        }
    s = i4_base();
    s.padded = 1;
    s.T = 6;
    i4_run("idx4_padded_views", &s);
    s = i4_base();
    s.zero_tokens = 2;
    i4_run("idx4_zero_tokens", &s);
    s = i4_base();
    s.sign_data = 1;
    s.rope_inverse = 1;
    i4_run("idx4_sign_data_vendor_params", &s);
    s = i4_base();
    s.weights_scale = 1.0f;
    i4_run("idx4_weights_scale_1", &s);
    s.weights_scale = -0.375f;
    i4_run("idx4_weights_scale_negative", &s);
    s.weights_scale = 3e5f; /* |w| * scale beyond 65520: fp16 +-Inf in both */
    i4_run("idx4_weights_overflow_fp16", &s);
    static const int Ts[3] = {0, 1, 17};
    for (int i = 0; i < 3; i++) {
        s = i4_base();
        s.T = Ts[i];
        s.NI = i == 1 ? 1 : 3;
        snprintf(label, sizeof label, "idx4_t%d_ni%d", s.T, s.NI);
        i4_run(label, &s);
    }
    /* the V4 head dim, several tiles in every dimension */
    s = i4_base();
    s.T = tu_quick() ? 3 : 9, s.H = 256, s.Q = 192, s.NI = 8, s.DI = 128, s.had = HAD_SYLVESTER;
    i4_run("idx4_h256_q192_ni8_di128", &s);
}

/* ==================================================================================================
 * prepared objects made from other weights
 * ================================================================================================== */

static const weight_group M4_WEIGHTS[3] = {{{"wq_a", NULL}}, {{"wq_b", "wq_b_scale"}}, {{"wkv", NULL}}};
static const weight_group I4_WEIGHTS[2] = {{{"idx_wq_b", "idx_wq_b_scale"}}, {{"weights_proj", NULL}}};

static void test_prepared_mismatch(void)
{
    if (!tu_selected("prepared_mismatch"))
        return;
    /* mla: prepared from p, each packed weight of the call swapped for q's (same shapes, other memory) */
    for (int w = 0; w < 2; w++) {
        m4_spec s = m4_base(w);
        m4_problem *p = m4_make(&s, tu_label_seed("prepared_mismatch_p"));
        m4_problem *q = m4_make(&s, tu_label_seed("prepared_mismatch_q"));
        dsops_prepared *prep = NULL;
        dsops_status st = dsops_mla_prolog_v4_prepare(ctx, &p->a, &prep);
        if (tu_check(st == DSOPS_OK && prep, "prepared_mismatch mla %s: prepare: %s (%s)", w ? "int8" : "bf16",
                     dsops_status_name(st), dsops_last_error())) {
            expect_other_weights_rejected(w ? "prepared_mismatch mla int8" : "prepared_mismatch mla bf16", &p->pl,
                                          &q->pl, prep, M4_WEIGHTS, 3);
            /* the same weights with other activations and outputs: valid, bitwise the unprepared result */
            dsops_mla_prolog_v4_args b = q->a;
            b.wq_a = p->a.wq_a, b.wq_b = p->a.wq_b, b.wq_b_scale = p->a.wq_b_scale, b.wkv = p->a.wkv;
            st = prolog_call(&q->pl, &b);
            size_t n1 = 0, n2 = 0;
            unsigned char *g1 = st == DSOPS_OK ? gather_all(q->pl.out, q->pl.nout, &n1) : NULL;
            b.prepared = prep;
            dsops_status st2 = prolog_call(&q->pl, &b);
            tu_check(st == DSOPS_OK && st2 == DSOPS_OK, "prepared_mismatch mla reuse with other activations: %s / %s (%s)",
                     dsops_status_name(st), dsops_status_name(st2), dsops_last_error());
            if (g1 && st2 == DSOPS_OK) {
                unsigned char *g2 = gather_all(q->pl.out, q->pl.nout, &n2);
                tu_check_same_bytes("prepared_mismatch mla reuse: the prepared result", g2, n2, g1, n1,
                                    "the unprepared one");
                free(g2);
            }
            free(g1);
            /* an mla object given to the indexer */
            i4_spec is = i4_base();
            i4_problem *ip = i4_make(&is, 3);
            dsops_indexer_prolog_v4_args ib = ip->a;
            ib.prepared = prep;
            expect_prepared_rejected("prepared_mismatch: an mla_prolog_v4 object given to indexer_prolog_v4", &ip->pl,
                                     &ib);
            prolog_free(&ip->pl);
            dsops_prepared_destroy(prep);
        }
        prolog_free(&p->pl);
        prolog_free(&q->pl);
    }
    /* indexer */
    i4_spec s = i4_base();
    i4_problem *p = i4_make(&s, tu_label_seed("prepared_mismatch_ip"));
    i4_problem *q = i4_make(&s, tu_label_seed("prepared_mismatch_iq"));
    dsops_prepared *prep = NULL;
    dsops_status st = dsops_indexer_prolog_v4_prepare(ctx, &p->a, &prep);
    if (tu_check(st == DSOPS_OK && prep, "prepared_mismatch idx: prepare: %s (%s)", dsops_status_name(st),
                 dsops_last_error())) {
        expect_other_weights_rejected("prepared_mismatch idx", &p->pl, &q->pl, prep, I4_WEIGHTS, 2);
        /* an indexer object given to mla */
        m4_spec ms = m4_base(1);
        m4_problem *mp = m4_make(&ms, 4);
        dsops_mla_prolog_v4_args mb = mp->a;
        mb.prepared = prep;
        expect_prepared_rejected("prepared_mismatch: an indexer_prolog_v4 object given to mla_prolog_v4", &mp->pl, &mb);
        prolog_free(&mp->pl);
        dsops_prepared_destroy(prep);
    }
    prolog_free(&p->pl);
    prolog_free(&q->pl);
}

/* ==================================================================================================
 * determinism: 1, 2 and 3 threads, bitwise
 * ================================================================================================== */

static void test_threads(void)
{
    if (!tu_selected("threads"))
        return;
    const int tiers[2] = {DSOPS_ISA_SCALAR, (int)dsops_isa_detected()};
    for (int ti = 0; ti < (tiers[1] == tiers[0] ? 1 : 2); ti++) {
        if (!tu_set_tier(ctx, tiers[ti]))
            continue;
        for (int v = 0; v < 3; v++) {
            prolog *pl;
            if (v < 2) {
                m4_spec s = m4_base(v);
                s.T = 13, s.H = 256, s.Q = 192, s.N = 6, s.D = 128;
                pl = &m4_make(&s, tu_label_seed("threads") + (uint64_t)v)->pl;
            } else {
                i4_spec s = i4_base();
                s.T = 13, s.H = 256, s.Q = 192, s.NI = 6, s.DI = 128, s.had = HAD_SYLVESTER;
                pl = &i4_make(&s, tu_label_seed("threads") + 2)->pl;
            }
            char l[200];
            snprintf(l, sizeof l, "threads %s [%s]", v == 0 ? "mla4 bf16" : (v == 1 ? "mla4 int8" : "idx4"),
                     dsops_isa_name((dsops_isa)tiers[ti]));
            rc_check_threads(ctx, l, prolog_run_gather, pl);
            prolog_free(pl);
        }
    }
    tu_set_tier(ctx, dsops_isa_detected());
}

/* The case tables themselves: names, CI flags and _ci variants as in docs/CASES.md. */
static void test_case_tables(void)
{
    if (!tu_selected("case_tables"))
        return;
    int n;
    const dsops_mla4_case *mc = dsops_mla4_cases(&n);
    tu_check(n == 7, "case_tables: %d mla_prolog_v4 cases, expected 7", n);
    for (int i = 0; i < n; i++) {
        tu_check(dsops_mla4_case_find(mc[i].name) == &mc[i], "case_tables: %s not found by name", mc[i].name);
        tu_check(mc[i].ci || (mc[i].ci_variant && dsops_mla4_case_find(mc[i].ci_variant)),
                 "case_tables: %s is not CI and has no _ci variant", mc[i].name);
    }
    const dsops_mla4_case *b = dsops_mla4_case_find("v4_mla_prolog_b64_s2");
    tu_check(b && b->T == 128 && b->int8 && b->vendor_us == 130 && b->vendor && strcmp(b->vendor, "PyPTO") == 0,
             "case_tables: v4_mla_prolog_b64_s2 is not T 128, int8, 130 us PyPTO");
    const dsops_mla4_case *ci = dsops_mla4_case_find("v4_mla_prolog_int8_t512_ci");
    tu_check(ci && ci->T == 128 && ci->ci, "case_tables: v4_mla_prolog_int8_t512_ci is not T 128 / CI");
    const dsops_idxp4_case *ic = dsops_idxp4_cases(&n);
    tu_check(n == 4, "case_tables: %d indexer_prolog_v4 cases, expected 4", n);
    for (int i = 0; i < n; i++)
        tu_check(dsops_idxp4_case_find(ic[i].name) == &ic[i] && ic[i].ci, "case_tables: %s", ic[i].name);
    const dsops_idxp4_case *t = dsops_idxp4_case_find("v4_idx_prolog_t128");
    tu_check(t && t->vendor_us == 101 && t->NI == 64 && t->DI == 128, "case_tables: v4_idx_prolog_t128");
    tu_check(dsops_mla4_case_find("nope") == NULL && dsops_idxp4_case_find(NULL) == NULL, "case_tables: unknown names");
    /* generated data: int8 wq_b is Q8 per row (|q| <= 127, a row reaching 127), flops as documented */
    if (!tu_quick()) {
        dsops_mla4_problem *p = dsops_mla4_problem_make(dsops_mla4_case_find("v4_mla_prolog_int8_t4"), 5);
        if (tu_check(p != NULL, "case_tables: v4_mla_prolog_int8_t4 generation")) {
            const int8_t *w = p->args.wq_b.data;
            int ok = 1;
            for (int64_t row = 0; row < 8; row++) {
                int amax = 0;
                for (int64_t k = 0; k < 1024; k++) {
                    int v = w[row * 1024 + k] < 0 ? -w[row * 1024 + k] : w[row * 1024 + k];
                    amax = v > amax ? v : amax;
                }
                ok &= amax == 127 && ((const float *)p->args.wq_b_scale.data)[row] > 0;
            }
            tu_check(ok, "case_tables: int8 wq_b rows are not Q8 of their draws");
            const double want = 2.0 * 4 * (4096.0 * 1024 + 1024.0 * 64 * 512 + 4096.0 * 512);
            tu_check(fabs(p->flops - want) < 1.0, "case_tables: flops %.0f, expected %.0f", p->flops, want);
            tu_check(p->args.eps_qh == 1e-6f && p->args.rope_mode == DSOPS_ROPE_INTERLEAVED && p->args.rope_inverse == 0,
                     "case_tables: mla parameters are not the V4 defaults");
            dsops_mla4_problem_free(p);
        }
        dsops_idxp4_problem *q = dsops_idxp4_problem_make(dsops_idxp4_case_find("v4_idx_prolog_t64"), 42);
        if (tu_check(q != NULL, "case_tables: v4_idx_prolog_t64 generation")) {
            const int8_t *qr = q->args.qr.data;
            int ok = 1;
            for (int64_t e = 0; e < 64 * 1024; e++)
                ok &= qr[e] == 0 || qr[e] == -127;
            ok &= ((const float *)q->args.qr_scale.data)[0] == 1.0f / 127.0f;
            tu_check(ok, "case_tables: qr entries are not {-127, 0} with scale 1/127");
            const double want = 2.0 * 64 * (1024.0 * 64 * 128 + 4096.0 * 64 + 64.0 * 128 * 128);
            tu_check(fabs(q->flops - want) < 1.0, "case_tables: idx flops %.0f, expected %.0f", q->flops, want);
            tu_check(fabsf(q->args.weights_scale - 0.011048543f) < 1e-9f, "case_tables: weights_scale %.9g",
                     (double)q->args.weights_scale);
            tu_check(q->args.rope_inverse == 1, "case_tables: v4_idx_prolog_t64 does not carry the vendor parameter "
                     "rope_inverse = 1");
            dsops_idxp4_problem_free(q);
        }
    }
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, 5);
    ctx = tu_context();
    rc_set_threads(ctx, 2);
    printf("tiers: scalar ... %s, threads %d\n", dsops_isa_name(dsops_isa_detected()), dsops_context_threads(ctx));
    double t0 = tu_now();
    test_case_tables();
    test_mla_small();
    test_idx_small();
    double t1 = tu_now();
    test_prepared_mismatch();
    test_threads();
    printf("small problems %.1f s, prepared / threads %.1f s\n", t1 - t0, tu_now() - t1);
    dsops_context_destroy(ctx);
    return tu_finish();
}
