/*
 * Fuzz target: the validation of every operator, driven only by the public operator descriptions
 * (dsops_op_count / dsops_op_at, include/dsops.h).
 *
 * The first input byte chooses the operator. A valid baseline is built from the description: each tensor's shape
 * comes from the bracket of its note ("[T, N, Dc]", "[N*(Dqn+64), Q]", ...), evaluated with small values of the
 * dimension symbols (T = 3, N = 2, Dc = 128, ...); inputs get the lowest dtype their mask allows; optional tensors
 * are present unless their note names them as part of another variant (", int8 ...", ", split_int8",
 * ", packed_int8"); the description's infer and output_shapes helpers then give the outputs. Index tensors get
 * values that make sense for their name (a partition for cu_seqlens_q, in-range block tables, distinct slots for
 * cache_index, ...). The rest of the input is a list of changes to that baseline: symbol values, scalar parameters,
 * presence, dtype, rank, extents and strides of tensors (zero, negative, padded, overlapping), single index values,
 * aliasing between tensors, the instruction-set tier, and a prepared-weights object made before the changes.
 *
 * Whatever the views describe, their memory is allocated to fit exactly (the fuzzer checks the library, not the
 * caller's honesty), so AddressSanitizer reports any access outside the declared extents. The call runs on a
 * context with 1 thread. Then:
 *  - on an error, every byte of every buffer is as it was (V1), and dsops_last_error() is not empty;
 *  - on success, no byte outside the output and in-out views has changed (inputs are only read), and
 *    dsops_last_error() is empty;
 *  - a success with a required tensor that V2 - V4 or V9 (§1.6) refuses (absent, a dtype outside its mask, a
 *    rank outside 0 ... 6, a negative extent or stride, an output sharing a byte with another required tensor or
 *    with itself, other than an exact alias the operator names) is a failure.
 * Inputs whose views would hold more than 2^20 elements (and less than 2^60, which V3 must refuse) or more than
 * 4 MiB, whose two largest views hold more than 2^26 elements together (multiplied: a bound on any operator's
 * work), or whose parameters ask for more work than that (sinkhorn_iters > 64, topk > 4096: valid but slow), are
 * skipped, so that every execution stays in milliseconds.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsops.h"
#include "fuzz_common.h"

#define MAX_TENSORS 40
#define MAX_SYMBOLS 48
#define MAX_ELEMENTS ((int64_t)1 << 20)  /* elements of one view that is actually worked on */
#define HUGE_ELEMENTS ((int64_t)1 << 60) /* from here on V3 refuses the view */
#define MAX_VIEW_BYTES ((int64_t)4 << 20)
#define MAX_WORK ((double)(1 << 26))     /* (largest view) x (second largest view), elements */

/* ---- the input as a stream of decisions (zeros once it is used up: the baseline) ---------------------------- */

typedef struct decisions {
    const uint8_t *p;
    size_t n;
} decisions;

static unsigned take_byte(decisions *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

static unsigned take(decisions *in, unsigned n) { return n ? take_byte(in) % n : 0; }

static uint32_t take_u32(decisions *in)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | take_byte(in);
    return v;
}

/* A deterministic generator for the bytes nobody decides (float payloads). */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---- dimension symbols and the notes' shape expressions -------------------------------------------------- */

typedef struct symbol {
    char name[16];
    int64_t value;
} symbol;

typedef struct symbols {
    symbol s[MAX_SYMBOLS];
    int n;
} symbols;

/* Small values that satisfy every operator's fixed requirements (Dr = 64, DI >= 64, D > 64, Dc % 128 = 0), with
 * as many blocks as B * MB, so that every sequence can own its blocks (the compressor's states need that). */
static int64_t symbol_default(const char *name)
{
    static const struct {
        const char *name;
        int64_t value;
    } table[] = {
        {"T", 3},    {"B", 2},    {"N", 2},    {"Dc", 128}, {"Dr", 64},  {"NB", 4},   {"BS", 4},   {"K", 4},
        {"MB", 2},   {"NI", 2},   {"DI", 64},  {"W", 64},   {"Q", 32},   {"H", 32},   {"Dqn", 16}, {"HC", 2},
        {"D", 128},  {"R", 4},    {"C", 1},    {"NO", 2},   {"NBS", 4},  {"BSS", 4},  {"NBS2", 4}, {"BSS2", 4},
        {"MBS", 2},  {"MBS2", 2}, {"NBW", 4},  {"BSW", 4},  {"MBW", 2},  {"NBC", 4},  {"BSC", 4},  {"MBC", 2},
        {"topk", 4}, {"group", 64},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].name, name))
            return table[i].value;
    return 2;
}

static symbol *symbol_find(symbols *st, const char *name, size_t len)
{
    for (int i = 0; i < st->n; i++)
        if (strlen(st->s[i].name) == len && !strncmp(st->s[i].name, name, len))
            return &st->s[i];
    if (st->n == MAX_SYMBOLS || len >= sizeof st->s[0].name)
        return NULL;
    symbol *s = &st->s[st->n++];
    memcpy(s->name, name, len);
    s->name[len] = '\0';
    s->value = symbol_default(s->name);
    return s;
}

static int64_t symbol_value(symbols *st, const char *name)
{
    symbol *s = symbol_find(st, name, strlen(name));
    return s ? s->value : 0;
}

/* Saturating arithmetic: the values are extents, kept within int64. */
static int64_t sat(double v) { return v > 9.0e18 ? INT64_MAX : v < -9.0e18 ? INT64_MIN : (int64_t)v; }

typedef struct expr {
    const char *p, *end;
    symbols *st;
} expr;

static int64_t parse_sum(expr *e);

static void skip_spaces(expr *e)
{
    while (e->p < e->end && *e->p == ' ')
        e->p++;
}

static int64_t parse_factor(expr *e)
{
    skip_spaces(e);
    if (e->p < e->end && *e->p == '(') {
        e->p++;
        int64_t v = parse_sum(e);
        skip_spaces(e);
        if (e->p < e->end && *e->p == ')')
            e->p++;
        return v;
    }
    if (e->p < e->end && isdigit((unsigned char)*e->p)) {
        int64_t v = 0;
        while (e->p < e->end && isdigit((unsigned char)*e->p))
            v = sat((double)v * 10 + (*e->p++ - '0'));
        return v;
    }
    const char *start = e->p;
    while (e->p < e->end && (isalnum((unsigned char)*e->p) || *e->p == '_'))
        e->p++;
    if (e->p == start) { /* not an expression: give up on the rest */
        e->p = e->end;
        return 1;
    }
    symbol *s = symbol_find(e->st, start, (size_t)(e->p - start));
    return s ? s->value : 1;
}

/* parse_product and parse_sum: one loop per precedence level, alike in shape as in any recursive-descent
 * parser (each its own operators and arithmetic). */
static int64_t parse_product(expr *e)
{
    int64_t v = parse_factor(e);
    for (;;) {
        skip_spaces(e);
        if (e->p >= e->end || (*e->p != '*' && *e->p != '/'))
            return v;
        char op = *e->p++;
        int64_t w = parse_factor(e);
        v = op == '*' ? sat((double)v * (double)w) : w != 0 ? v / w : 0;
    }
}

static int64_t parse_sum(expr *e)
{
    int64_t v = parse_product(e);
    for (;;) {
        skip_spaces(e);
        if (e->p >= e->end || (*e->p != '+' && *e->p != '-'))
            return v;
        char op = *e->p++;
        int64_t w = parse_product(e);
        v = sat(op == '+' ? (double)v + (double)w : (double)v - (double)w);
    }
}

/* The shape in the first bracket of a note: its rank, or -1 when the note has none. With shape NULL only the
 * symbols are collected. */
static int note_shape(const char *note, symbols *st, int64_t *shape)
{
    if (note == NULL)
        return -1;
    const char *open = strchr(note, '['), *close = open ? strchr(open, ']') : NULL;
    if (open == NULL || close == NULL)
        return -1;
    int rank = 0;
    for (const char *p = open + 1; p < close && rank < DSOPS_MAX_DIMS;) {
        const char *comma = memchr(p, ',', (size_t)(close - p));
        const char *stop = comma ? comma : close;
        expr e = {p, stop, st};
        int64_t v = parse_sum(&e);
        if (shape != NULL)
            shape[rank] = v;
        rank++;
        p = stop + 1;
    }
    return rank;
}

/* ---- the tensors of one call ------------------------------------------------------------------------------- */

typedef struct view {
    const dsops_tensor_desc *desc;
    dsops_tensor *t;   /* in the call record */
    bool present;
    int buffer;        /* index into the buffers, or -1 */
    int64_t region;    /* byte offset of its lowest element in the buffer (a multiple of 8) */
    int64_t lo, hi;    /* lowest and highest element offset from t->data (elements) */
    int64_t numel;     /* elements (saturated), or -1 when the shape is not a valid one */
} view;

typedef struct buffer {
    unsigned char *data, *before, *written; /* contents, snapshot, 1 where an out / in-out view lies */
    int64_t size;
    bool has_in, has_out;
} buffer;

static bool is_output(dsops_arg_role r) { return r == DSOPS_ARG_OUT || r == DSOPS_ARG_OUT_OPT; }
static bool is_written(dsops_arg_role r) { return is_output(r) || r == DSOPS_ARG_INOUT || r == DSOPS_ARG_INOUT_OPT; }
static bool is_required(dsops_arg_role r) { return r == DSOPS_ARG_IN || r == DSOPS_ARG_INOUT || r == DSOPS_ARG_OUT; }

/* Dense row-major strides (extents <= 1 count as 1, as dsops_tensor_make does). */
static void dense_strides(dsops_tensor *t)
{
    int64_t s = 1;
    for (int d = (t->ndim > DSOPS_MAX_DIMS ? DSOPS_MAX_DIMS : t->ndim) - 1; d >= 0; d--) {
        t->stride[d] = s;
        s = sat((double)s * (double)(t->shape[d] > 1 ? t->shape[d] : 1));
    }
}

/* Element count and offset range of a view's memory; false when it is too large to allocate or to work on. */
static bool measure(view *v)
{
    const dsops_tensor *t = v->t;
    int nd = t->ndim < 0 ? 0 : t->ndim > DSOPS_MAX_DIMS ? DSOPS_MAX_DIMS : t->ndim;
    double numel = 1, lo = 0, hi = 0;
    bool negative = false;
    for (int d = 0; d < nd; d++) {
        if (t->shape[d] < 0)
            negative = true;
        numel *= (double)t->shape[d];
    }
    v->lo = v->hi = 0;
    if (negative || numel == 0) {
        v->numel = negative ? -1 : 0;
        return true;
    }
    for (int d = 0; d < nd; d++) {
        double reach = (double)(t->shape[d] - 1) * (double)t->stride[d];
        if (reach > 0)
            hi += reach;
        else
            lo += reach;
    }
    v->numel = sat(numel);
    size_t es = dsops_dtype_size(t->dtype) ? dsops_dtype_size(t->dtype) : 1;
    if ((hi - lo + 1) * (double)es > (double)MAX_VIEW_BYTES)
        return false;
    if (numel > (double)MAX_ELEMENTS && numel < (double)HUGE_ELEMENTS)
        return false;
    v->lo = (int64_t)lo;
    v->hi = (int64_t)hi;
    return true;
}

static int64_t span_bytes(const view *v)
{
    size_t es = dsops_dtype_size(v->t->dtype) ? dsops_dtype_size(v->t->dtype) : 1;
    return v->numel > 0 ? (v->hi - v->lo + 1) * (int64_t)es : 0;
}

/* Calls f(offset in elements from data) for every element of a view (its numel <= MAX_ELEMENTS). */
typedef void (*element_fn)(void *ctx, const view *v, int64_t index, int64_t offset);

static void for_each_element(const view *v, element_fn f, void *ctx)
{
    const dsops_tensor *t = v->t;
    if (v->numel <= 0 || v->numel > MAX_ELEMENTS || t->ndim < 0 || t->ndim > DSOPS_MAX_DIMS)
        return;
    int64_t idx[DSOPS_MAX_DIMS] = {0};
    for (int64_t e = 0; e < v->numel; e++) {
        int64_t off = 0;
        for (int d = 0; d < t->ndim; d++)
            off += idx[d] * t->stride[d];
        f(ctx, v, e, off);
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d])
                break;
            idx[d] = 0;
        }
    }
}

/* ---- index values ------------------------------------------------------------------------------------------ */

typedef struct index_plan {
    int64_t n_blocks;   /* smallest NB* symbol: every block-table value below it is valid for every pool */
    int64_t max_seen;   /* tokens a sequence may see */
    int64_t slots;      /* NB * BS */
    int64_t tokens, sequences;
    int64_t *cu;        /* the partition written to cu_seqlens_q */
} index_plan;

static void write_int(const view *v, int64_t offset, int64_t value)
{
    unsigned char *p = (unsigned char *)v->t->data + offset * (int64_t)dsops_dtype_size(v->t->dtype);
    if (v->t->dtype == DSOPS_INT32) {
        int32_t x = (int32_t)value;
        memcpy(p, &x, sizeof x);
    } else if (v->t->dtype == DSOPS_INT64) {
        memcpy(p, &value, sizeof value);
    }
}

static bool ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

/* A value that makes sense for an index tensor of this name, for element `index` (row-major). */
static void fill_index(void *ctx, const view *v, int64_t index, int64_t offset)
{
    index_plan *pl = ctx;
    const char *name = v->desc->name;
    const int64_t inner = v->t->ndim >= 2 ? v->t->shape[v->t->ndim - 1] : 1, row = inner > 0 ? index / inner : 0;
    int64_t value;
    if (!strcmp(name, "cu_seqlens_q"))
        value = index < pl->sequences + 1 ? pl->cu[index] : pl->tokens;
    else if (ends_with(name, "block_table"))
        value = pl->n_blocks > 0 ? index % pl->n_blocks : 0; /* distinct blocks while B * MB <= NB */
    else if (!strcmp(name, "seqused_kv"))
        value = pl->max_seen;
    else if (ends_with(name, "indices"))
        value = index % 5 == 4 ? -1 : (index * 3 + row) % (pl->max_seen > 0 ? pl->max_seen : 1);
    else if (ends_with(name, "length"))
        value = inner > 0 ? index % (inner + 1) : 0;
    else if (!strcmp(name, "cache_index"))
        value = index < pl->slots ? (index * 5) % pl->slots : -1;
    else if (!strcmp(name, "positions"))
        value = index * 7;
    else if (!strcmp(name, "start_pos"))
        value = index * 4;
    else
        value = index % 4;
    write_int(v, offset, value);
}

/* ---- the operator call ------------------------------------------------------------------------------------- */

static dsops_context *ctx;
static int verbose; /* DSOPS_FUZZ_VERBOSE=1: one line per execution (operator, status, message); 2: every view too */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    verbose = getenv("DSOPS_FUZZ_VERBOSE") != NULL ? atoi(getenv("DSOPS_FUZZ_VERBOSE")) : 0;
    setenv("OMP_WAIT_POLICY", "passive", 1);
    unsetenv("DSOPS_ISA");
    unsetenv("DSOPS_NUM_THREADS");
    if (dsops_context_create(&ctx) != DSOPS_OK || dsops_context_set_threads(ctx, 1) != DSOPS_OK) {
        fprintf(stderr, "cannot make a context\n");
        exit(1);
    }
    return 0;
}

/* Exact aliases an operator names (V9): output `out` may be the identical view of input `in`. */
static bool exact_alias_allowed(const char *op, const char *out, const char *in)
{
    static const char *const allowed[][3] = {{"rmsnorm", "y", "x"}, {"rope_apply", "y", "x"}, {"hc_post", "out", "residual"}};
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        if (!strcmp(op, allowed[i][0]) && !strcmp(out, allowed[i][1]) && !strcmp(in, allowed[i][2]))
            return true;
    return false;
}

static bool same_view(const dsops_tensor *a, const dsops_tensor *b)
{
    if (a->data != b->data || a->ndim != b->ndim || a->dtype != b->dtype)
        return false;
    for (int d = 0; d < a->ndim && d < DSOPS_MAX_DIMS; d++)
        if (a->shape[d] != b->shape[d] || (a->shape[d] > 1 && a->stride[d] != b->stride[d]))
            return false;
    return true;
}

/* Byte owners for the overlap oracle: per buffer byte, the required view that addressed it first (+1), or 0. */
typedef struct owner_map {
    int16_t *owner[MAX_TENSORS];
    const view *views;
    int self;
    bool overlap;
    int other; /* the earlier view it overlaps */
} owner_map;

static void mark_owner(void *ctx_, const view *v, int64_t index, int64_t offset)
{
    (void)index;
    owner_map *m = ctx_;
    int64_t es = (int64_t)dsops_dtype_size(v->t->dtype);
    int64_t at = v->region + (offset - v->lo) * es;
    int16_t *own = m->owner[v->buffer];
    for (int64_t k = 0; k < es; k++) {
        if (own[at + k] != 0 && !m->overlap) {
            m->overlap = true;
            m->other = own[at + k] - 1;
        }
        own[at + k] = (int16_t)(m->self + 1);
    }
}

typedef struct mark_ctx {
    buffer *b;
} mark_ctx;

static void mark_written(void *ctx_, const view *v, int64_t index, int64_t offset)
{
    (void)index;
    mark_ctx *m = ctx_;
    int64_t es = (int64_t)dsops_dtype_size(v->t->dtype);
    memset(m->b->written + v->region + (offset - v->lo) * es, 1, (size_t)es);
}

/* Value menus for the changes. */
static int64_t extent_choice(unsigned k, int64_t now)
{
    static const int64_t menu[] = {0, 1, 2, 3, 63, 64, 65, 127, 128, 129, 512, 656, 1 << 16, (1 << 24) + 1,
                                   (int64_t)1 << 31, ((int64_t)1 << 32) + 1, (int64_t)1 << 60, (int64_t)1 << 62,
                                   INT64_MAX, -1, INT64_MIN};
    unsigned n = sizeof menu / sizeof menu[0];
    k %= n + 3;
    return k < n ? menu[k] : sat((double)now + (k == n ? 1 : k == n + 1 ? -1 : (double)now));
}

static int64_t stride_choice(unsigned k, int64_t now)
{
    static const int64_t menu[] = {0, 1, -1, 2, (int64_t)1 << 40, INT64_MAX, INT64_MIN, ((int64_t)1 << 60) + 1};
    unsigned n = sizeof menu / sizeof menu[0];
    k %= n + 3;
    return k < n ? menu[k] : k == n ? sat((double)now + 1) : k == n + 1 ? sat(-(double)now) : sat(2.0 * (double)now);
}

static int64_t symbol_choice(unsigned k)
{
    static const int64_t menu[] = {0, 1, 2, 3, 4, 5, 7, 8, 16, 32, 63, 64, 65, 128, 129, 256, 512, 1024};
    return menu[k % (sizeof menu / sizeof menu[0])];
}

static void set_param(decisions *in, void *record, const dsops_param_desc *p)
{
    char *dst = (char *)record + p->offset;
    unsigned k = take_byte(in);
    switch (p->type) {
    case DSOPS_PARAM_FLOAT:
    case DSOPS_PARAM_DOUBLE: {
        static const double menu[] = {0.0, -0.0, 1.0, -1.0, 1e-6, 1e-30, 1e30, 3.4e38, 1e300, NAN, INFINITY, -INFINITY, 0.5};
        double v = k < 200 ? menu[k % (sizeof menu / sizeof menu[0])] : (double)(int32_t)take_u32(in) / 1024.0;
        if (p->type == DSOPS_PARAM_FLOAT && p->size == sizeof(float)) {
            float f = (float)v;
            memcpy(dst, &f, sizeof f);
        } else if (p->size == sizeof(double)) {
            memcpy(dst, &v, sizeof v);
        }
        return;
    }
    case DSOPS_PARAM_INT:
    case DSOPS_PARAM_BOOL:
    case DSOPS_PARAM_ENUM: {
        static const int menu[] = {0, 1, -1, 2, 3, 4, 64, 127, 128, 129, 1 << 24, (1 << 24) + 1, INT32_MAX, INT32_MIN};
        int v = menu[k % (sizeof menu / sizeof menu[0])];
        if (p->type == DSOPS_PARAM_ENUM && k < 128 && p->spellings != NULL) {
            int count = 0;
            while (p->spellings[count].spelling != NULL)
                count++;
            if (count > 0)
                v = p->spellings[k % (unsigned)count].value;
        } else if (k >= 224) {
            v = (int)take_u32(in);
        }
        if (p->size == sizeof(int))
            memcpy(dst, &v, sizeof v);
        else if (p->size == sizeof(bool))
            *(bool *)dst = v & 1;
        return;
    }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decisions in = {data, size};
    const size_t n_ops = dsops_op_count();
    const dsops_op_desc *op = dsops_op_at(take(&in, (unsigned)n_ops));
    if (op == NULL || op->n_tensors > MAX_TENSORS || op->n_params > 64)
        return 0;

    /* record and preset */
    void *record = calloc(1, op->args_size);
    bool given[64] = {false};
    view views[MAX_TENSORS];
    buffer buffers[MAX_TENSORS];
    memset(views, 0, sizeof views);
    memset(buffers, 0, sizeof buffers);
    int n_buffers = 0;
    dsops_prepared *prepared = NULL;
    int64_t *cu = NULL;
    if (record == NULL)
        return 0;
    unsigned preset_pick = take(&in, 8);
    dsops_preset preset = preset_pick < 5 ? op->default_preset : (dsops_preset)(preset_pick - 5);
    (void)op->init(record, preset); /* a preset without this operator still fills the record */
    unsigned isa_pick = take(&in, 8);
    dsops_context_set_isa(ctx, isa_pick < 4 ? dsops_isa_detected() : (dsops_isa)(isa_pick - 4));

    /* symbols: collected from the notes, then changed */
    symbols st;
    st.n = 0;
    for (size_t k = 0; k < op->n_tensors; k++)
        note_shape(op->tensors[k].note, &st, NULL);
    for (size_t k = 0; k < op->n_params; k++)
        if (!strcmp(op->params[k].name, "group") || !strcmp(op->params[k].name, "topk"))
            symbol_find(&st, op->params[k].name, strlen(op->params[k].name));
    for (unsigned n = take(&in, 4); n > 0 && st.n > 0; n--) {
        symbol *s = &st.s[take(&in, (unsigned)st.n)];
        s->value = symbol_choice(take_byte(&in));
    }

    /* parameters: the symbols that are parameters, then changes */
    for (size_t k = 0; k < op->n_params; k++) {
        const dsops_param_desc *p = &op->params[k];
        if ((!strcmp(p->name, "group") || !strcmp(p->name, "topk")) && p->type == DSOPS_PARAM_INT && p->size == sizeof(int)) {
            int v = (int)symbol_value(&st, p->name);
            if (!strcmp(op->name, "lightning_indexer") && !strcmp(p->name, "topk"))
                v = (int)symbol_value(&st, "K");
            memcpy((char *)record + p->offset, &v, sizeof v);
            given[k] = true;
        }
    }
    for (unsigned n = take(&in, 4); n > 0 && op->n_params > 0; n--) {
        size_t k = take(&in, (unsigned)op->n_params);
        set_param(&in, record, &op->params[k]);
        given[k] = true;
    }
    for (size_t k = 0; k < op->n_params; k++) { /* valid values whose work has no bound: not for a quick run */
        const dsops_param_desc *p = &op->params[k];
        int v = 0;
        if (p->type == DSOPS_PARAM_INT && p->size == sizeof v)
            memcpy(&v, (char *)record + p->offset, sizeof v);
        if ((!strcmp(p->name, "sinkhorn_iters") && v > 64) || (!strcmp(p->name, "topk") && v > 4096))
            goto done;
    }

    /* inputs from the notes */
    for (size_t k = 0; k < op->n_tensors; k++) {
        const dsops_tensor_desc *d = &op->tensors[k];
        view *v = &views[k];
        v->desc = d;
        v->t = (dsops_tensor *)((char *)record + d->offset);
        v->buffer = -1;
        if (is_output(d->role))
            continue;
        int64_t shape[DSOPS_MAX_DIMS] = {0};
        int rank = note_shape(d->note, &st, shape);
        if (rank < 0)
            rank = 1, shape[0] = 1;
        dsops_dtype dt = DSOPS_DTYPE_INVALID;
        for (int b = 1; b < 16 && dt == DSOPS_DTYPE_INVALID; b++)
            if (d->dtypes & DSOPS_DTYPE_BIT(b))
                dt = (dsops_dtype)b;
        *v->t = dsops_tensor_make(NULL, dt, rank, shape);
        const char *note = d->note ? d->note : "";
        v->present = is_required(d->role) ||
                     !(strstr(note, ", int8") || strstr(note, ", split_int8") || strstr(note, ", packed_int8"));
        /* a non-NULL marker until the memory exists, so that infer sees which tensors are given */
        v->t->data = v->present ? (void *)v : NULL;
    }
    if (op->infer != NULL)
        op->infer(record, given);
    char msg[256];
    bool shapes_known = op->output_shapes(record, msg, sizeof msg) == DSOPS_OK;
    for (size_t k = 0; k < op->n_tensors; k++) {
        view *v = &views[k];
        if (!is_output(v->desc->role))
            continue;
        if (!shapes_known) {
            int64_t shape[DSOPS_MAX_DIMS] = {0};
            int rank = note_shape(v->desc->note, &st, shape);
            *v->t = dsops_tensor_make(NULL, DSOPS_DTYPE_INVALID, rank < 0 ? 1 : rank, shape);
            for (int b = 1; b < 16 && v->t->dtype == DSOPS_DTYPE_INVALID; b++)
                if (v->desc->dtypes & DSOPS_DTYPE_BIT(b))
                    v->t->dtype = (dsops_dtype)b;
        }
        v->present = v->t->dtype != DSOPS_DTYPE_INVALID;
        v->t->data = v->present ? (void *)v : NULL;
    }

    /* changes to the tensors */
    for (unsigned n = take(&in, 8); n > 0; n--) {
        view *v = &views[take(&in, (unsigned)op->n_tensors)];
        dsops_tensor *t = v->t, saved = *t;
        unsigned kind = take(&in, 9), a = take_byte(&in), b = take_byte(&in);
        int nd = t->ndim < 0 ? 0 : t->ndim > DSOPS_MAX_DIMS ? DSOPS_MAX_DIMS : t->ndim;
        switch (kind) {
        case 0: v->present = !v->present; break;
        case 1: t->dtype = (dsops_dtype)(a % 9); break; /* 0 and 8 are no dtype */
        case 2: {
            int count = 0, pick = (int)(a % 8);
            for (int bit = 1; bit < 16; bit++)
                if ((v->desc->dtypes & DSOPS_DTYPE_BIT(bit)) && count++ == pick)
                    t->dtype = (dsops_dtype)bit;
            break;
        }
        case 3: { /* rank: drop or add an outer dimension, or an out-of-range rank */
            int want = a < 200 ? (int)(a % 8) : (a % 2 ? -1 : 7);
            if (want >= 0 && want <= DSOPS_MAX_DIMS) {
                int64_t shape[DSOPS_MAX_DIMS] = {0};
                for (int d = 0; d < want; d++)
                    shape[d] = want - d <= nd ? t->shape[nd - (want - d)] : 1 + (int64_t)(b % 3);
                *t = dsops_tensor_make(t->data, t->dtype, want, shape);
            } else {
                t->ndim = want;
            }
            break;
        }
        case 4: /* one extent, dense strides */
            if (nd > 0) {
                t->shape[a % (unsigned)nd] = extent_choice(b, t->shape[a % (unsigned)nd]);
                dense_strides(t);
            }
            break;
        case 5: /* one stride */
            if (nd > 0)
                t->stride[a % (unsigned)nd] = stride_choice(b, t->stride[a % (unsigned)nd]);
            break;
        case 6: /* a broadcast dimension: any extent over stride 0 */
            if (nd > 0) {
                t->shape[a % (unsigned)nd] = extent_choice(b, t->shape[a % (unsigned)nd]);
                t->stride[a % (unsigned)nd] = 0;
            }
            break;
        case 7: /* padded rows: every outer stride grows */
            for (int d = 0; d + 1 < nd; d++)
                t->stride[d] = sat((double)t->stride[d] + 1 + (double)(a % 5));
            break;
        case 8: /* strided innermost dimension */
            if (nd > 0) {
                int64_t by = 2 + (int64_t)(a % 3);
                for (int d = 0; d < nd; d++)
                    t->stride[d] = sat((double)t->stride[d] * (double)by);
            }
            break;
        }
        if (!measure(v))
            *t = saved; /* too large for a quick execution: the change is dropped */
    }
    for (size_t k = 0; k < op->n_tensors; k++)
        if (!measure(&views[k]))
            goto done; /* the symbols made a view too large */

    /* aliasing: a written tensor placed on another tensor's memory, exactly or shifted */
    int alias_to[MAX_TENSORS];
    int64_t alias_shift[MAX_TENSORS];
    for (size_t k = 0; k < op->n_tensors; k++)
        alias_to[k] = -1, alias_shift[k] = 0;
    for (unsigned n = take(&in, 4); n > 0; n--) {
        unsigned i = take(&in, (unsigned)op->n_tensors), j = take(&in, (unsigned)op->n_tensors), how = take_byte(&in);
        if (i == j || !is_written(views[i].desc->role) || alias_to[j] >= 0 || alias_to[i] >= 0)
            continue;
        bool referenced = false; /* i must not already carry other tensors */
        for (size_t k = 0; k < op->n_tensors; k++)
            referenced = referenced || alias_to[k] == (int)i;
        if (referenced)
            continue;
        alias_to[i] = (int)j;
        if (how < 128) { /* the identical view, in its own dtype (of the same size) */
            const dsops_tensor saved = *views[i].t;
            *views[i].t = *views[j].t;
            views[i].t->data = saved.data;
            views[i].t->dtype = saved.dtype;
            if (dsops_dtype_size(saved.dtype) != dsops_dtype_size(views[j].t->dtype) || !measure(&views[i])) {
                alias_to[i] = -1;
                *views[i].t = saved;
                measure(&views[i]);
            }
        } else {
            alias_shift[i] = (int64_t)(how % 64) * 8;
        }
    }

    /* A bound on the work: no operator does more than (largest view) x (second largest view) multiply-adds (each
     * output element is at most a dot product over an extent of an input), so that product is kept small.
     * Views of 2^60 elements and more are left out: V3 refuses them, and one that is accepted runs into the
     * timeout, which is then a finding. */
    {
        double first = 0, second = 0;
        for (size_t k = 0; k < op->n_tensors; k++) {
            double n = views[k].present ? (double)views[k].numel : 0;
            if (n >= (double)HUGE_ELEMENTS)
                continue;
            if (n > first)
                second = first, first = n;
            else if (n > second)
                second = n;
        }
        if (first * second > (double)MAX_WORK)
            goto done;
    }

    /* buffers: one per tensor that is present and not placed on another */
    for (size_t k = 0; k < op->n_tensors; k++) {
        view *v = &views[k];
        if (!v->present || alias_to[k] >= 0)
            continue;
        v->buffer = n_buffers++;
        v->region = 0;
    }
    for (size_t k = 0; k < op->n_tensors; k++) {
        view *v = &views[k];
        if (!v->present || alias_to[k] < 0)
            continue;
        view *host = &views[alias_to[k]];
        if (!host->present) {
            v->buffer = n_buffers++;
            v->region = 0;
            continue;
        }
        v->buffer = host->buffer;
        v->region = host->region + alias_shift[k];
    }
    for (size_t k = 0; k < op->n_tensors; k++) {
        view *v = &views[k];
        if (!v->present)
            continue;
        buffer *b = &buffers[v->buffer];
        int64_t end = v->region + (span_bytes(v) > 0 ? span_bytes(v) : 1);
        if (end > b->size)
            b->size = end;
        if (is_written(v->desc->role))
            b->has_out = true;
        else
            b->has_in = true;
    }
    uint64_t seed = 0x5eed ^ (uint64_t)(op - dsops_op_at(0));
    for (int i = 0; i < n_buffers; i++) {
        buffer *b = &buffers[i];
        b->data = malloc((size_t)b->size); /* exact: a read past the end is reported */
        b->before = malloc((size_t)b->size);
        b->written = calloc(1, (size_t)b->size);
        if (b->data == NULL || b->before == NULL || b->written == NULL)
            goto done;
        for (int64_t k = 0; k < b->size; k += 8) {
            uint64_t r = mix(&seed);
            memcpy(b->data + k, &r, (size_t)(b->size - k < 8 ? b->size - k : 8));
        }
    }
    for (size_t k = 0; k < op->n_tensors; k++) {
        view *v = &views[k];
        size_t es = dsops_dtype_size(v->t->dtype) ? dsops_dtype_size(v->t->dtype) : 1;
        v->t->data = v->present ? buffers[v->buffer].data + v->region - v->lo * (int64_t)es : NULL;
    }
    if (take(&in, 16) == 1 && op->prepare != NULL) { /* weights packed before the index values and the call */
        if (op->prepare(ctx, record, &prepared) == DSOPS_OK)
            memcpy((char *)record + op->prepared_offset, &prepared, sizeof prepared);
        else
            prepared = NULL;
    }

    /* index values: a plan from the symbols, then single changes */
    index_plan plan;
    plan.tokens = symbol_value(&st, "T");
    plan.sequences = symbol_value(&st, "B");
    plan.n_blocks = INT64_MAX;
    for (int i = 0; i < st.n; i++)
        if (!strncmp(st.s[i].name, "NB", 2) && st.s[i].value < plan.n_blocks)
            plan.n_blocks = st.s[i].value;
    if (plan.n_blocks == INT64_MAX)
        plan.n_blocks = 1;
    /* the tokens each sequence sees: as many as the block tables cover, but at most 256 (the attention and the
     * indexer work on every visible key, which no view's size bounds) */
    plan.max_seen = symbol_value(&st, "MB") * symbol_value(&st, "BS");
    if (plan.max_seen <= 0 || plan.max_seen > (1 << 20))
        plan.max_seen = 8;
    if (plan.max_seen > 256)
        plan.max_seen = 256;
    plan.slots = symbol_value(&st, "NB") * symbol_value(&st, "BS");
    if (plan.slots <= 0 || plan.slots > (1 << 20))
        plan.slots = 1;
    if (plan.sequences < 0 || plan.sequences > (1 << 16))
        plan.sequences = 1;
    cu = calloc((size_t)plan.sequences + 1, sizeof *cu);
    if (cu == NULL)
        goto done;
    for (int64_t b = 0; b <= plan.sequences; b++) /* the tokens split as evenly as they go, the rest at the end */
        cu[b] = plan.sequences ? (plan.tokens > 0 ? plan.tokens : 0) * b / plan.sequences : 0;
    if (plan.sequences == 0)
        cu[0] = 0;
    plan.cu = cu;
    for (size_t k = 0; k < op->n_tensors; k++) {
        view *v = &views[k];
        if (v->present && (v->t->dtype == DSOPS_INT32 || v->t->dtype == DSOPS_INT64) && !is_output(v->desc->role))
            for_each_element(v, fill_index, &plan);
    }
    for (unsigned n = take(&in, 8); n > 0; n--) {
        view *v = &views[take(&in, (unsigned)op->n_tensors)];
        unsigned which = (unsigned)take_u32(&in), how = take_byte(&in);
        if (!v->present || v->numel <= 0 || v->numel > MAX_ELEMENTS || v->t->ndim < 0 || v->t->ndim > DSOPS_MAX_DIMS ||
            (v->t->dtype != DSOPS_INT32 && v->t->dtype != DSOPS_INT64))
            continue;
        static const int64_t menu[] = {-1, 0, 1, 2, -2, 3, 4, 7, 8, 64, 127, 128, INT32_MAX, INT32_MIN,
                                       (int64_t)1 << 31, INT64_MAX, INT64_MIN};
        int64_t value = how < 200 ? menu[how % (sizeof menu / sizeof menu[0])] : (int64_t)(how - 200) - 8;
        int64_t target = (int64_t)(which % (uint64_t)v->numel), offset = 0;
        int64_t idx[DSOPS_MAX_DIMS] = {0};
        for (int64_t rem = target, d = v->t->ndim - 1; d >= 0; d--) {
            idx[d] = rem % v->t->shape[d];
            rem /= v->t->shape[d];
        }
        for (int d = 0; d < v->t->ndim; d++)
            offset += idx[d] * v->t->stride[d];
        write_int(v, offset, value);
    }

    /* what may change on success: the bytes of the written views */
    for (size_t k = 0; k < op->n_tensors; k++) {
        view *v = &views[k];
        if (v->present && is_written(v->desc->role) && dsops_dtype_size(v->t->dtype) > 0) {
            mark_ctx m = {&buffers[v->buffer]};
            for_each_element(v, mark_written, &m);
        }
    }
    for (int i = 0; i < n_buffers; i++)
        memcpy(buffers[i].before, buffers[i].data, (size_t)buffers[i].size);

    if (verbose >= 2) {
        fprintf(stderr, "%s (isa %s%s):\n", op->name, dsops_isa_name(dsops_context_isa(ctx)), prepared ? ", prepared" : "");
        for (size_t k = 0; k < op->n_tensors; k++) {
            const view *v = &views[k];
            fprintf(stderr, "  %-24s %s", v->desc->name, v->present ? dsops_dtype_name(v->t->dtype) : "absent");
            if (v->present) {
                fprintf(stderr, " buffer %d +%lld rank %d shape [", v->buffer, (long long)v->region, v->t->ndim);
                for (int d = 0; d < v->t->ndim && d < DSOPS_MAX_DIMS; d++)
                    fprintf(stderr, "%s%lld", d ? ", " : "", (long long)v->t->shape[d]);
                fprintf(stderr, "] stride [");
                for (int d = 0; d < v->t->ndim && d < DSOPS_MAX_DIMS; d++)
                    fprintf(stderr, "%s%lld", d ? ", " : "", (long long)v->t->stride[d]);
                fprintf(stderr, "]");
            }
            fprintf(stderr, "\n");
        }
        for (size_t k = 0; k < op->n_params; k++) {
            const dsops_param_desc *p = &op->params[k];
            const char *at = (const char *)record + p->offset;
            if (p->type == DSOPS_PARAM_FLOAT && p->size == sizeof(float)) {
                float f;
                memcpy(&f, at, sizeof f);
                fprintf(stderr, "  %s = %g\n", p->name, (double)f);
            } else if (p->type == DSOPS_PARAM_DOUBLE && p->size == sizeof(double)) {
                double x;
                memcpy(&x, at, sizeof x);
                fprintf(stderr, "  %s = %g\n", p->name, x);
            } else if (p->size == sizeof(int)) {
                int i;
                memcpy(&i, at, sizeof i);
                fprintf(stderr, "  %s = %d\n", p->name, i);
            }
        }
    }
    dsops_status status = op->call(ctx, record);

    /* ---- the checks ---- */
    const char *message = dsops_last_error();
    if (verbose)
        fprintf(stderr, "%s: %s %s\n", op->name, dsops_status_name(status), message);
    if ((int)status < 0 || (int)status > DSOPS_ERR_UNSUPPORTED)
        fuzz_fail("%s returned %d, not a dsops_status", op->name, (int)status);
    if (status != DSOPS_OK && (message == NULL || message[0] == '\0'))
        fuzz_fail("%s failed with %s but left no message", op->name, dsops_status_name(status));
    if (status == DSOPS_OK && message != NULL && message[0] != '\0')
        fuzz_fail("%s succeeded but dsops_last_error() is \"%s\"", op->name, message);
    for (int i = 0; i < n_buffers; i++) {
        const buffer *b = &buffers[i];
        for (int64_t k = 0; k < b->size; k++)
            if (b->data[k] != b->before[k] && (status != DSOPS_OK || !b->written[k])) {
                const char *holder = "?";
                for (size_t t = 0; t < op->n_tensors; t++)
                    if (views[t].present && views[t].buffer == i && (holder[0] == '?' || is_written(views[t].desc->role)))
                        holder = views[t].desc->name;
                fuzz_fail("%s returned %s (%s) and changed byte %lld of the memory of '%s'%s", op->name,
                          dsops_status_name(status), message, (long long)k, holder,
                          status == DSOPS_OK ? ", outside every output view" : "");
            }
    }
    if (status == DSOPS_OK) {
        /* V2 - V4: a required tensor that must have been refused */
        for (size_t k = 0; k < op->n_tensors; k++) {
            const view *v = &views[k];
            const dsops_tensor *t = v->t;
            if (!is_required(v->desc->role))
                continue;
            if (!v->present)
                fuzz_fail("%s accepted an absent required tensor '%s'", op->name, v->desc->name);
            if (t->dtype <= DSOPS_DTYPE_INVALID || t->dtype > DSOPS_DTYPE_LAST || !(v->desc->dtypes & DSOPS_DTYPE_BIT(t->dtype)))
                fuzz_fail("%s accepted '%s' with dtype %d, outside its mask %#x", op->name, v->desc->name,
                          (int)t->dtype, v->desc->dtypes);
            if (t->ndim < 0 || t->ndim > DSOPS_MAX_DIMS)
                fuzz_fail("%s accepted '%s' with rank %d", op->name, v->desc->name, t->ndim);
            for (int d = 0; d < t->ndim; d++)
                if (t->shape[d] < 0 || (t->stride[d] < 0 && t->shape[d] > 1 && v->numel > 0))
                    fuzz_fail("%s accepted '%s' with shape[%d] = %lld, stride[%d] = %lld", op->name, v->desc->name, d,
                              (long long)t->shape[d], d, (long long)t->stride[d]);
        }
        /* V9 among the required tensors: every byte of a written view belongs to it alone */
        owner_map om;
        memset(&om, 0, sizeof om);
        om.views = views;
        bool ok = true;
        for (int i = 0; i < n_buffers && ok; i++)
            ok = (om.owner[i] = calloc((size_t)buffers[i].size, sizeof(int16_t))) != NULL;
        for (size_t k = 0; ok && k < op->n_tensors; k++) {
            const view *w = &views[k];
            if (!w->present || !is_required(w->desc->role) || !is_written(w->desc->role))
                continue;
            for (size_t j = 0; j < op->n_tensors; j++) {
                const view *u = &views[j];
                if (j == k || !u->present || !is_required(u->desc->role) || u->buffer != w->buffer)
                    continue;
                if (same_view(w->t, u->t) && exact_alias_allowed(op->name, w->desc->name, u->desc->name))
                    continue;
                memset(om.owner[w->buffer], 0, (size_t)buffers[w->buffer].size * sizeof(int16_t));
                om.self = (int)j;
                for_each_element(u, mark_owner, &om);
                om.overlap = false;
                om.self = (int)k;
                for_each_element(w, mark_owner, &om);
                if (om.overlap)
                    fuzz_fail("%s accepted '%s' sharing memory with '%s' (V9; data %p and %p)", op->name,
                              w->desc->name, op->tensors[om.other].name, w->t->data, views[om.other].t->data);
            }
            /* with itself */
            memset(om.owner[w->buffer], 0, (size_t)buffers[w->buffer].size * sizeof(int16_t));
            om.self = (int)k;
            om.overlap = false;
            for_each_element(w, mark_owner, &om);
            if (om.overlap)
                fuzz_fail("%s accepted '%s', whose elements share memory (V9)", op->name, w->desc->name);
        }
        for (int i = 0; i < n_buffers; i++)
            free(om.owner[i]);
    }

done:
    if (prepared != NULL)
        dsops_prepared_destroy(prepared);
    for (int i = 0; i < n_buffers; i++) {
        free(buffers[i].data);
        free(buffers[i].before);
        free(buffers[i].written);
    }
    free(cu);
    free(record);
    return 0;
}
