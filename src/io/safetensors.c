/* safetensors reader and writer: see safetensors.h for the format and the checks. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef NAME_MAX
#define NAME_MAX 255
#endif
#define ST_NAME_MAX NAME_MAX

/* Tensor bytes are exchanged as they lie in memory; the format is little-endian. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif

#define ST_ALIGN 64
/* Integers in the header are read through doubles: everything up to 2^53 is exact. */
#define ST_MAX_JSON_INT 9007199254740992.0

static void st_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void st_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---- dtype tags ------------------------------------------------------------------------------ */

static const struct {
    const char *tag;
    dsops_dtype dtype;
} st_tags[] = {
    {"BF16", DSOPS_BF16}, {"F16", DSOPS_FP16}, {"F32", DSOPS_FP32}, {"I8", DSOPS_INT8},
    {"U8", DSOPS_UINT8},  {"I32", DSOPS_INT32}, {"I64", DSOPS_INT64}, {"F8_E4M3", DSOPS_FP8_E4M3},
};
#define ST_NTAGS (sizeof st_tags / sizeof st_tags[0])

const char *dsops_st_dtype_tag(dsops_dtype dtype)
{
    for (size_t i = 0; i < ST_NTAGS; i++)
        if (st_tags[i].dtype == dtype)
            return st_tags[i].tag;
    return NULL;
}

dsops_dtype dsops_st_dtype_from_tag(const char *tag)
{
    if (tag == NULL)
        return DSOPS_DTYPE_INVALID;
    for (size_t i = 0; i < ST_NTAGS; i++)
        if (strcmp(st_tags[i].tag, tag) == 0)
            return st_tags[i].dtype;
    return DSOPS_DTYPE_INVALID;
}

/* ---- small helpers --------------------------------------------------------------------------- */

static void *st_aligned_alloc(size_t size)
{
    size_t rounded = (size + ST_ALIGN - 1) / ST_ALIGN * ST_ALIGN;
    if (rounded < size)
        return NULL;
    return aligned_alloc(ST_ALIGN, rounded == 0 ? ST_ALIGN : rounded);
}

static char *st_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

/* Element count of a shape; false on overflow of int64 or of size_t bytes. */
static bool st_count(int ndim, const int64_t *shape, size_t elem_size, int64_t *numel, uint64_t *bytes)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return false;
        if (shape[d] != 0 && n > INT64_MAX / shape[d])
            return false;
        n *= shape[d];
    }
    if (elem_size != 0 && (uint64_t)n > (uint64_t)SIZE_MAX / elem_size)
        return false;
    *numel = n;
    *bytes = (uint64_t)n * elem_size;
    return true;
}

/* ---- reader ---------------------------------------------------------------------------------- */

/* The header is read without building a JSON tree, in two passes over its text. The first checks the syntax
 * of the whole header and counts what the reader keeps: the top-level members and the bytes of the strings it
 * holds on to (member names and the strings of __metadata__). The second fills arrays of exactly those sizes
 * and judges every entry. What the reader holds is therefore a small multiple of the file, whatever the
 * header: the file itself, one record per tensor (its view and the offset of its name), one block with every
 * name and metadata string, and arrays of 32-bit indices for the sorts. 32 bits suffice because the header,
 * and so every count and offset in it, is at most DSOPS_ST_MAX_HEADER bytes. */
_Static_assert(DSOPS_ST_MAX_HEADER < UINT32_MAX, "offsets into the header are kept in 32 bits");

typedef struct st_entry {
    dsops_tensor view; /* data: inside the file, st_empty (no bytes), or an aligned copy listed in `copies` */
    uint32_t name;     /* offset of the name in `strings` */
} st_entry;

struct dsops_st_file {
    unsigned char *buf;  /* the whole file, ST_ALIGN-aligned */
    size_t size;
    unsigned char *data; /* the data section, inside buf */
    char *strings;       /* every tensor name, metadata key and metadata value, each NUL-terminated */
    st_entry *entries;   /* in the order of the header */
    size_t count;
    uint32_t *by_name;   /* entry indices sorted by name */
    uint32_t *meta_keys, *meta_values; /* offsets in `strings`, in the order of the header */
    size_t meta_count;
    void **copies;       /* aligned copies of tensors whose bytes are misaligned in the file */
    size_t n_copies;
};

/* A valid data pointer for tensors without elements. */
static _Alignas(ST_ALIGN) unsigned char st_empty[ST_ALIGN];

void dsops_st_close(dsops_st_file *f)
{
    if (f == NULL)
        return;
    for (size_t i = 0; i < f->n_copies; i++)
        free(f->copies[i]);
    free(f->copies);
    free(f->entries);
    free(f->by_name);
    free(f->meta_keys);
    free(f->meta_values);
    free(f->strings);
    free(f->buf);
    free(f);
}

/* Stable merge sort of n indices: n log n comparisons whatever the input, sequential passes over the arrays, and
 * n more indices of memory. False when that memory is not available. */
typedef int (*st_index_cmp)(const void *ctx, uint32_t a, uint32_t b);

static bool st_sort_indices(uint32_t *v, size_t n, st_index_cmp cmp, const void *ctx)
{
    enum { RUN = 8 }; /* runs sorted by insertion first: fewer passes */
    if (n < 2)
        return true;
    for (size_t lo = 0; lo < n; lo += RUN) {
        size_t hi = lo + RUN < n ? lo + RUN : n;
        for (size_t i = lo + 1; i < hi; i++) {
            uint32_t x = v[i];
            size_t k = i;
            for (; k > lo && cmp(ctx, v[k - 1], x) > 0; k--)
                v[k] = v[k - 1];
            v[k] = x;
        }
    }
    if (n <= RUN)
        return true;
    uint32_t *tmp = malloc(n * sizeof *tmp), *src = v, *dst = tmp;
    if (tmp == NULL)
        return false;
    for (size_t width = RUN; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi)
                dst[o++] = cmp(ctx, src[b], src[a]) < 0 ? src[b++] : src[a++];
            while (a < mid)
                dst[o++] = src[a++];
            while (b < hi)
                dst[o++] = src[b++];
        }
        uint32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != v)
        memcpy(v, src, n * sizeof *v);
    free(tmp);
    return true;
}

/* Bytes of a view the reader made (its shape passed st_count). */
static uint64_t st_view_bytes(const dsops_tensor *v)
{
    uint64_t n = dsops_dtype_size(v->dtype);
    for (int d = 0; d < v->ndim; d++)
        n *= (uint64_t)v->shape[d];
    return n;
}

static int st_cmp_entry_name(const void *ctx, uint32_t a, uint32_t b)
{
    const dsops_st_file *f = ctx;
    return strcmp(f->strings + f->entries[a].name, f->strings + f->entries[b].name);
}

static int st_cmp_entry_begin(const void *ctx, uint32_t a, uint32_t b)
{
    const dsops_st_file *f = ctx;
    const unsigned char *x = f->entries[a].view.data, *y = f->entries[b].view.data;
    return x < y ? -1 : x > y;
}

static int st_cmp_meta_key(const void *ctx, uint32_t a, uint32_t b)
{
    const dsops_st_file *f = ctx;
    return strcmp(f->strings + f->meta_keys[a], f->strings + f->meta_keys[b]);
}

static int st_cmp_block_string(const void *ctx, uint32_t a, uint32_t b)
{
    const char *block = ctx;
    return strcmp(block + a, block + b);
}

/* What other readers would read differently is refused before parsing: a UTF-8 byte-order mark, a \u0000 escape
 * (it would cut a C string short), a number with a fraction or an exponent (3.0 is no extent). */
static int st_check_text(const char *label, const char *text, size_t n, char *err, size_t errlen)
{
    if (n >= 3 && (unsigned char)text[0] == 0xef && (unsigned char)text[1] == 0xbb && (unsigned char)text[2] == 0xbf) {
        st_err(err, errlen, "%s: header starts with a UTF-8 byte-order mark", label);
        return -1;
    }
    bool in_string = false;
    for (size_t i = 0; i < n; i++) {
        char c = text[i];
        if (in_string) {
            if (c == '"') {
                in_string = false;
            } else if (c == '\\' && i + 1 < n) {
                if (text[i + 1] == 'u' && i + 5 < n && !strncmp(text + i + 2, "0000", 4)) {
                    st_err(err, errlen, "%s: header has a \\u0000 escape (a NUL inside a string) at byte %zu", label, i);
                    return -1;
                }
                i++;
            }
        } else if (c == '"') {
            in_string = true;
        } else if (c == '.' || ((c == 'e' || c == 'E') && i > 0 && text[i - 1] >= '0' && text[i - 1] <= '9')) {
            st_err(err, errlen, "%s: header has a number with a fraction or an exponent at byte %zu (integers only)",
                   label, i);
            return -1;
        }
    }
    return 0;
}

/* ---- JSON text (RFC 8259, strings in strict UTF-8) ---- */

/* Nesting accepted inside the header (the entries need 3 levels; deeper values are only skipped). */
#define ST_JSON_MAX_DEPTH 128

typedef struct st_json {
    const char *text, *p, *end;
    const char *label;
    char *err;
    size_t errlen;
} st_json;

static bool st_json_fail(st_json *j, const char *what)
{
    st_err(j->err, j->errlen, "%s: header is not valid JSON (%s at byte %zu of %zu)", j->label, what,
           (size_t)(j->p - j->text), (size_t)(j->end - j->text));
    return false;
}

static void st_json_ws(st_json *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static bool st_json_at(const st_json *j, char c) { return j->p < j->end && *j->p == c; }

/* For messages: what kind of value starts at `at`. */
static const char *st_json_kind(const st_json *j, const char *at)
{
    if (at >= j->end)
        return "missing";
    switch (*at) {
    case '{': return "an object";
    case '[': return "an array";
    case '"': return "a string";
    case 't':
    case 'f': return "a boolean";
    case 'n': return "null";
    default: return "a number";
    }
}

/* Bytes of the well-formed UTF-8 sequence at s (n available), 0 when malformed: overlong forms, surrogates and
 * values above U+10FFFF are malformed too. */
static size_t st_utf8_length(const unsigned char *s, size_t n)
{
    unsigned c = s[0], lo = 0x80, hi = 0xbf;
    size_t len;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if (s[k] < 0x80 || s[k] > 0xbf)
            return 0;
    return len;
}

/* The value of the four hex digits at s, or -1. */
static long st_hex4(const char *s)
{
    long v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The string whose opening quote is at j->p: checked, and its decoded bytes written to out[0, cap) when out is
 * not NULL (what does not fit is only counted). *len receives the decoded length, which never exceeds the
 * length of the text (quotes excluded). */
static bool st_json_string(st_json *j, char *out, size_t cap, size_t *len)
{
    if (!st_json_at(j, '"'))
        return st_json_fail(j, "expected a string");
    const char *s = j->p + 1;
    size_t n = 0;
    for (;;) {
        if (s >= j->end) {
            j->p = s;
            return st_json_fail(j, "unterminated string");
        }
        unsigned char c = (unsigned char)*s;
        if (c == '"')
            break;
        if (c < 0x20) {
            j->p = s;
            return st_json_fail(j, "control character inside a string");
        }
        unsigned char bytes[4];
        size_t k;
        if (c != '\\') {
            k = st_utf8_length((const unsigned char *)s, (size_t)(j->end - s));
            if (k == 0) {
                j->p = s;
                return st_json_fail(j, "malformed UTF-8 inside a string");
            }
            memcpy(bytes, s, k);
            s += k;
        } else {
            if (j->end - s < 2) {
                j->p = s;
                return st_json_fail(j, "unterminated string");
            }
            const char *simple = strchr("\"\\/bfnrt", s[1]);
            if (simple != NULL && s[1] != '\0') {
                static const char decoded[] = "\"\\/\b\f\n\r\t";
                bytes[0] = (unsigned char)decoded[simple - "\"\\/bfnrt"];
                k = 1;
                s += 2;
            } else if (s[1] == 'u') {
                long code = j->end - s >= 6 ? st_hex4(s + 2) : -1;
                if (code < 0) {
                    j->p = s;
                    return st_json_fail(j, "malformed \\u escape");
                }
                const char *next = s + 6;
                if (code >= 0xd800 && code <= 0xdbff) {
                    long low = j->end - next >= 6 && next[0] == '\\' && next[1] == 'u' ? st_hex4(next + 2) : -1;
                    if (low < 0xdc00 || low > 0xdfff) {
                        j->p = s;
                        return st_json_fail(j, "unpaired surrogate in a \\u escape");
                    }
                    code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
                    next += 6;
                } else if (code >= 0xdc00 && code <= 0xdfff) {
                    j->p = s;
                    return st_json_fail(j, "unpaired surrogate in a \\u escape");
                }
                if (code == 0) {
                    j->p = s;
                    return st_json_fail(j, "\\u0000 escape");
                }
                if (code < 0x80) {
                    bytes[0] = (unsigned char)code;
                    k = 1;
                } else if (code < 0x800) {
                    bytes[0] = (unsigned char)(0xc0 | (code >> 6));
                    bytes[1] = (unsigned char)(0x80 | (code & 0x3f));
                    k = 2;
                } else if (code < 0x10000) {
                    bytes[0] = (unsigned char)(0xe0 | (code >> 12));
                    bytes[1] = (unsigned char)(0x80 | ((code >> 6) & 0x3f));
                    bytes[2] = (unsigned char)(0x80 | (code & 0x3f));
                    k = 3;
                } else {
                    bytes[0] = (unsigned char)(0xf0 | (code >> 18));
                    bytes[1] = (unsigned char)(0x80 | ((code >> 12) & 0x3f));
                    bytes[2] = (unsigned char)(0x80 | ((code >> 6) & 0x3f));
                    bytes[3] = (unsigned char)(0x80 | (code & 0x3f));
                    k = 4;
                }
                s = next;
            } else {
                j->p = s;
                return st_json_fail(j, "unknown escape");
            }
        }
        for (size_t i = 0; i < k; i++, n++)
            if (out != NULL && n < cap)
                out[n] = (char)bytes[i];
    }
    j->p = s + 1;
    *len = n;
    return true;
}

/* The number at j->p, checked against JSON's grammar. *is_uint tells whether it is an integer in [0, 2^53]
 * (written without a sign, a fraction or an exponent), and *value is then its value. */
static bool st_json_number(st_json *j, bool *is_uint, uint64_t *value)
{
    const char *s = j->p, *e = j->end;
    bool negative = false, integral = true, too_big = false;
    uint64_t v = 0;
    if (s < e && *s == '-') {
        negative = true;
        s++;
    }
    if (s >= e || *s < '0' || *s > '9')
        return st_json_fail(j, "expected a value");
    if (*s == '0') {
        s++;
    } else {
        for (; s < e && *s >= '0' && *s <= '9'; s++) {
            uint64_t d = (uint64_t)(*s - '0');
            if (too_big || v > ((uint64_t)ST_MAX_JSON_INT - d) / 10)
                too_big = true;
            else
                v = v * 10 + d;
        }
    }
    if (s < e && *s == '.') {
        integral = false;
        if (++s >= e || *s < '0' || *s > '9') {
            j->p = s;
            return st_json_fail(j, "malformed number");
        }
        while (s < e && *s >= '0' && *s <= '9')
            s++;
    }
    if (s < e && (*s == 'e' || *s == 'E')) {
        integral = false;
        s++;
        if (s < e && (*s == '+' || *s == '-'))
            s++;
        if (s >= e || *s < '0' || *s > '9') {
            j->p = s;
            return st_json_fail(j, "malformed number");
        }
        while (s < e && *s >= '0' && *s <= '9')
            s++;
    }
    j->p = s;
    *is_uint = !negative && integral && !too_big;
    *value = v;
    return true;
}

static bool st_json_literal(st_json *j, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0)
        return st_json_fail(j, "expected a value");
    j->p += n;
    return true;
}

/* Checks the value at j->p (nesting level `depth`) and moves past it. With `strings`, adds the decoded length + 1
 * of every string inside; with `members`, counts the members (elements) of the value itself. */
static bool st_json_skip(st_json *j, int depth, size_t *strings, size_t *members)
{
    if (depth > ST_JSON_MAX_DEPTH)
        return st_json_fail(j, "nesting deeper than 128 levels");
    st_json_ws(j);
    if (j->p >= j->end)
        return st_json_fail(j, "expected a value");
    size_t n;
    bool is_uint;
    uint64_t v;
    switch (*j->p) {
    case '{':
    case '[': {
        const bool object = *j->p == '{';
        const char close = object ? '}' : ']';
        j->p++;
        st_json_ws(j);
        if (st_json_at(j, close)) {
            j->p++;
            return true;
        }
        for (;;) {
            st_json_ws(j);
            if (object) {
                if (!st_json_string(j, NULL, 0, &n))
                    return false;
                if (strings != NULL)
                    *strings += n + 1;
                st_json_ws(j);
                if (!st_json_at(j, ':'))
                    return st_json_fail(j, "expected ':'");
                j->p++;
            }
            if (!st_json_skip(j, depth + 1, strings, NULL))
                return false;
            if (members != NULL)
                (*members)++;
            st_json_ws(j);
            if (st_json_at(j, ',')) {
                j->p++;
                continue;
            }
            if (st_json_at(j, close)) {
                j->p++;
                return true;
            }
            return st_json_fail(j, object ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    case '"':
        if (!st_json_string(j, NULL, 0, &n))
            return false;
        if (strings != NULL)
            *strings += n + 1;
        return true;
    case 't': return st_json_literal(j, "true");
    case 'f': return st_json_literal(j, "false");
    case 'n': return st_json_literal(j, "null");
    default: return st_json_number(j, &is_uint, &v);
    }
}

/* Pass 1: the header is one JSON value followed by whitespace only, and that value is an object. Counts its
 * members and the bytes of the strings pass 2 keeps (every member name, and every string of __metadata__). */
static int st_scan_header(st_json *j, size_t *members, size_t *strings)
{
    st_json_ws(j);
    const char *value_at = j->p;
    bool ok = true;
    if (st_json_at(j, '{')) {
        j->p++;
        st_json_ws(j);
        if (st_json_at(j, '}'))
            j->p++;
        else
            for (;;) {
                st_json_ws(j);
                char key[16];
                size_t n;
                if (!(ok = st_json_string(j, key, sizeof key, &n)))
                    break;
                (*members)++;
                *strings += n + 1;
                const bool meta = n == 12 && memcmp(key, "__metadata__", 12) == 0;
                st_json_ws(j);
                if (!(ok = st_json_at(j, ':') || st_json_fail(j, "expected ':'")))
                    break;
                j->p++;
                if (!(ok = st_json_skip(j, 2, meta ? strings : NULL, NULL)))
                    break;
                st_json_ws(j);
                if (st_json_at(j, ',')) {
                    j->p++;
                    continue;
                }
                if (st_json_at(j, '}')) {
                    j->p++;
                    break;
                }
                ok = st_json_fail(j, "expected ',' or '}'");
                break;
            }
    } else {
        ok = st_json_skip(j, 1, NULL, NULL);
    }
    if (!ok)
        return -1;
    st_json_ws(j);
    if (j->p < j->end) {
        st_err(j->err, j->errlen, "%s: header has byte 0x%02x after its JSON value (offset %zu)", j->label,
               (unsigned)(unsigned char)*j->p, (size_t)(j->p - j->text));
        return -1;
    }
    if (*value_at != '{') {
        st_err(j->err, j->errlen, "%s: header is %s, expected a JSON object", j->label, st_json_kind(j, value_at));
        return -1;
    }
    return 0;
}

/* ---- pass 2 ---- */

/* The keys of one entry other than dtype, shape and data_offsets, decoded, to find one that appears twice. */
typedef struct st_scratch {
    char *text;        /* the keys, NUL-terminated one after the other */
    size_t used, cap;
    uint32_t *keys;    /* their offsets in text */
    size_t n_keys, keys_cap;
} st_scratch;

static bool st_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t cap2 = *cap ? *cap : 64;
    while (cap2 < need)
        cap2 *= 2;
    void *q = realloc(*p, cap2 * elem);
    if (q == NULL)
        return false;
    *p = q;
    *cap = cap2;
    return true;
}

/* Decodes the key at j->p into the scratch block (the header passed pass 1: only memory can fail). */
static bool st_scratch_key(st_json *j, st_scratch *s)
{
    const char *at = j->p;
    size_t n;
    if (!st_json_string(j, NULL, 0, &n))
        return false;
    if (!st_grow((void **)&s->text, &s->cap, s->used + n + 1, 1) ||
        !st_grow((void **)&s->keys, &s->keys_cap, s->n_keys + 1, sizeof *s->keys)) {
        st_err(j->err, j->errlen, "%s: out of memory", j->label);
        return false;
    }
    j->p = at;
    (void)st_json_string(j, s->text + s->used, n, &n);
    s->text[s->used + n] = '\0';
    s->keys[s->n_keys++] = (uint32_t)s->used;
    s->used += n + 1;
    return true;
}

/* What pass 2 gathers from one tensor entry before judging it. */
typedef struct st_fields {
    const char *dtype_at, *shape_at, *offsets_at; /* where each value starts; NULL when the key is absent */
    char dtype[40];                               /* the dtype string (cut at 39 bytes) */
    size_t dtype_len;
    int64_t shape[DSOPS_MAX_DIMS];
    size_t rank;
    size_t bad_dim;                               /* first element that is no integer in [0, 2^53], or rank */
    const char *bad_at, *bad_end;                 /* its text */
    size_t n_offsets;
    uint64_t offsets[2];
    bool offsets_ok;                              /* both of the first two are integers in [0, 2^53] */
    const char *repeated;                         /* a key that appears twice */
} st_fields;

/* The elements of the array at j->p: up to `keep` integers in [0, 2^53] stored to values, *count receives the
 * number of elements, *bad the index of the first that is not such an integer (else *count). */
static bool st_read_uints(st_json *j, uint64_t *values, size_t keep, size_t *count, size_t *bad, const char **bad_at,
                          const char **bad_end)
{
    *count = 0;
    *bad = SIZE_MAX;
    j->p++; /* '[' */
    st_json_ws(j);
    if (st_json_at(j, ']')) {
        j->p++;
    } else {
        for (;;) {
            st_json_ws(j);
            const char *at = j->p;
            bool is_uint = false;
            uint64_t v = 0;
            if (at < j->end && (*at == '-' || (*at >= '0' && *at <= '9'))) {
                if (!st_json_number(j, &is_uint, &v))
                    return false;
            } else if (!st_json_skip(j, 4, NULL, NULL)) {
                return false;
            }
            if (!is_uint && *bad == SIZE_MAX) {
                *bad = *count;
                *bad_at = at;
                *bad_end = j->p;
            }
            if (is_uint && *count < keep)
                values[*count] = v;
            (*count)++;
            st_json_ws(j);
            if (st_json_at(j, ',')) {
                j->p++;
                continue;
            }
            j->p++; /* ']' */
            break;
        }
    }
    if (*bad == SIZE_MAX)
        *bad = *count;
    return true;
}

/* Pass 2 over the value of tensor entry e (its name already set); judges it as the header comment says. */
static int st_build_entry(dsops_st_file *f, st_json *j, st_entry *e, uint64_t data_size, st_scratch *scratch)
{
    const char *label = j->label, *name = f->strings + e->name;
    char *err = j->err;
    size_t errlen = j->errlen;
    if (!st_json_at(j, '{')) {
        st_err(err, errlen, "%s: entry '%s' is %s, expected an object with dtype, shape and data_offsets", label, name,
               st_json_kind(j, j->p));
        return -1;
    }
    st_fields fl;
    memset(&fl, 0, sizeof fl);
    scratch->used = scratch->n_keys = 0;
    j->p++;
    st_json_ws(j);
    if (st_json_at(j, '}')) {
        j->p++;
    } else {
        for (;;) {
            st_json_ws(j);
            char key[16];
            size_t n;
            const char *key_at = j->p;
            if (!st_json_string(j, key, sizeof key, &n))
                return -1;
            const char **slot = n == 5 && !memcmp(key, "dtype", 5)           ? &fl.dtype_at
                                : n == 5 && !memcmp(key, "shape", 5)         ? &fl.shape_at
                                : n == 12 && !memcmp(key, "data_offsets", 12) ? &fl.offsets_at
                                                                              : NULL;
            if (slot == NULL) {
                j->p = key_at;
                if (!st_scratch_key(j, scratch))
                    return -1;
            } else if (*slot != NULL && fl.repeated == NULL) {
                fl.repeated = slot == &fl.dtype_at ? "dtype" : slot == &fl.shape_at ? "shape" : "data_offsets";
            }
            st_json_ws(j);
            j->p++; /* ':' */
            st_json_ws(j);
            const char *at = j->p;
            const bool first = slot != NULL && *slot == NULL;
            bool ok;
            if (first && slot == &fl.dtype_at && *at == '"') {
                ok = st_json_string(j, fl.dtype, sizeof fl.dtype - 1, &fl.dtype_len);
            } else if (first && slot == &fl.shape_at && *at == '[') {
                uint64_t dims[DSOPS_MAX_DIMS];
                ok = st_read_uints(j, dims, DSOPS_MAX_DIMS, &fl.rank, &fl.bad_dim, &fl.bad_at, &fl.bad_end);
                for (size_t d = 0; d < DSOPS_MAX_DIMS && d < fl.bad_dim; d++)
                    fl.shape[d] = (int64_t)dims[d];
            } else if (first && slot == &fl.offsets_at && *at == '[') {
                size_t bad;
                const char *bad_at, *bad_end;
                ok = st_read_uints(j, fl.offsets, 2, &fl.n_offsets, &bad, &bad_at, &bad_end);
                fl.offsets_ok = bad >= 2 && fl.n_offsets >= 2;
            } else {
                ok = st_json_skip(j, 3, NULL, NULL);
            }
            if (!ok)
                return -1;
            if (first)
                *slot = at;
            st_json_ws(j);
            if (st_json_at(j, ',')) {
                j->p++;
                continue;
            }
            j->p++; /* '}' */
            break;
        }
    }

    /* a repeated key: readers disagree on which value counts (first, last) */
    if (fl.repeated == NULL && scratch->n_keys > 1) {
        if (!st_sort_indices(scratch->keys, scratch->n_keys, st_cmp_block_string, scratch->text)) {
            st_err(err, errlen, "%s: out of memory", label);
            return -1;
        }
        for (size_t i = 1; i < scratch->n_keys && fl.repeated == NULL; i++)
            if (strcmp(scratch->text + scratch->keys[i - 1], scratch->text + scratch->keys[i]) == 0)
                fl.repeated = scratch->text + scratch->keys[i];
    }
    if (fl.repeated != NULL) {
        st_err(err, errlen, "%s: tensor '%s': key \"%.32s\" appears twice", label, name, fl.repeated);
        return -1;
    }

    if (fl.dtype_at == NULL || *fl.dtype_at != '"') {
        st_err(err, errlen, "%s: tensor '%s': dtype is %s, expected a string", label, name,
               fl.dtype_at ? st_json_kind(j, fl.dtype_at) : "missing");
        return -1;
    }
    fl.dtype[fl.dtype_len < sizeof fl.dtype - 1 ? fl.dtype_len : sizeof fl.dtype - 1] = '\0';
    dsops_dtype dtype = fl.dtype_len < sizeof fl.dtype - 1 ? dsops_st_dtype_from_tag(fl.dtype) : DSOPS_DTYPE_INVALID;
    if (dtype == DSOPS_DTYPE_INVALID) {
        st_err(err, errlen, "%s: tensor '%s': dtype \"%.32s\" is not supported (BF16, F16, F32, I8, U8, I32, I64)",
               label, name, fl.dtype);
        return -1;
    }

    if (fl.shape_at == NULL || *fl.shape_at != '[') {
        st_err(err, errlen, "%s: tensor '%s': shape is %s, expected an array of integers", label, name,
               fl.shape_at ? st_json_kind(j, fl.shape_at) : "missing");
        return -1;
    }
    if (fl.rank > DSOPS_MAX_DIMS) {
        st_err(err, errlen, "%s: tensor '%s': rank %zu exceeds the %d dimensions of a dsops tensor", label, name,
               fl.rank, DSOPS_MAX_DIMS);
        return -1;
    }
    if (fl.bad_dim < fl.rank) {
        const char *at = fl.bad_at;
        if (*at == '-' || (*at >= '0' && *at <= '9'))
            st_err(err, errlen, "%s: tensor '%s': shape[%zu] = %.*s is not a non-negative integer", label, name,
                   fl.bad_dim, (int)(fl.bad_end - at < 40 ? fl.bad_end - at : 40), at);
        else
            st_err(err, errlen, "%s: tensor '%s': shape[%zu] is %s, expected a non-negative integer", label, name,
                   fl.bad_dim, st_json_kind(j, at));
        return -1;
    }
    const int ndim = (int)fl.rank;
    int64_t numel;
    uint64_t nbytes;
    if (!st_count(ndim, fl.shape, dsops_dtype_size(dtype), &numel, &nbytes)) {
        st_err(err, errlen, "%s: tensor '%s': the element count of its shape overflows", label, name);
        return -1;
    }

    if (fl.offsets_at == NULL || *fl.offsets_at != '[' || fl.n_offsets != 2) {
        st_err(err, errlen, "%s: tensor '%s': data_offsets is %s, expected [begin, end]", label, name,
               fl.offsets_at == NULL         ? "missing"
               : *fl.offsets_at == '['       ? "an array whose length is not 2"
                                             : st_json_kind(j, fl.offsets_at));
        return -1;
    }
    if (!fl.offsets_ok) {
        st_err(err, errlen, "%s: tensor '%s': data_offsets must hold two non-negative integers", label, name);
        return -1;
    }
    const uint64_t begin = fl.offsets[0], end = fl.offsets[1];
    if (begin > end) {
        st_err(err, errlen, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] has begin > end", label, name,
               begin, end);
        return -1;
    }
    if (end > data_size) {
        st_err(err, errlen,
               "%s: tensor '%s': data_offsets end %" PRIu64 " is beyond the %" PRIu64 "-byte data section", label,
               name, end, data_size);
        return -1;
    }
    if (end - begin != nbytes) {
        st_err(err, errlen,
               "%s: tensor '%s': data_offsets span %" PRIu64 " bytes but %" PRId64 " %s elements need %" PRIu64,
               label, name, end - begin, numel, fl.dtype, nbytes);
        return -1;
    }
    /* bytes in place for now (the overlap check compares these pointers); misaligned ones are copied later */
    e->view = dsops_tensor_make(nbytes == 0 ? (void *)st_empty : (void *)(f->data + begin), dtype, ndim, fl.shape);
    return 0;
}

/* Pass 2 over the value of __metadata__: an object of strings, no key twice; the strings go to `strings`. */
static int st_build_metadata(dsops_st_file *f, st_json *j, size_t *used, size_t strings_total)
{
    if (!st_json_at(j, '{')) {
        st_err(j->err, j->errlen, "%s: __metadata__ is %s, expected an object of strings", j->label,
               st_json_kind(j, j->p));
        return -1;
    }
    const char *start = j->p;
    size_t n_members = 0;
    if (!st_json_skip(j, 2, NULL, &n_members))
        return -1;
    j->p = start;
    f->meta_keys = malloc((n_members ? n_members : 1) * sizeof *f->meta_keys);
    f->meta_values = malloc((n_members ? n_members : 1) * sizeof *f->meta_values);
    if (f->meta_keys == NULL || f->meta_values == NULL) {
        st_err(j->err, j->errlen, "%s: out of memory", j->label);
        return -1;
    }
    j->p++;
    st_json_ws(j);
    if (st_json_at(j, '}')) {
        j->p++;
        return 0;
    }
    for (;;) {
        st_json_ws(j);
        size_t n;
        char *key = f->strings + *used;
        if (!st_json_string(j, key, strings_total - *used, &n) || n >= strings_total - *used) {
            st_json_fail(j, "string block too small");
            return -1;
        }
        key[n] = '\0';
        *used += n + 1;
        st_json_ws(j);
        j->p++; /* ':' */
        st_json_ws(j);
        if (!st_json_at(j, '"')) {
            st_err(j->err, j->errlen, "%s: __metadata__ value of '%.64s' is %s, expected a string", j->label, key,
                   st_json_kind(j, j->p));
            return -1;
        }
        char *value = f->strings + *used;
        if (!st_json_string(j, value, strings_total - *used, &n) || n >= strings_total - *used) {
            st_json_fail(j, "string block too small");
            return -1;
        }
        value[n] = '\0';
        *used += n + 1;
        f->meta_keys[f->meta_count] = (uint32_t)(key - f->strings);
        f->meta_values[f->meta_count] = (uint32_t)(value - f->strings);
        f->meta_count++;
        st_json_ws(j);
        if (st_json_at(j, ',')) {
            j->p++;
            continue;
        }
        j->p++; /* '}' */
        break;
    }
    /* duplicate keys: sorted indices, then neighbours */
    uint32_t *sorted = malloc(f->meta_count * sizeof *sorted);
    if (sorted == NULL) {
        st_err(j->err, j->errlen, "%s: out of memory", j->label);
        return -1;
    }
    for (size_t i = 0; i < f->meta_count; i++)
        sorted[i] = (uint32_t)i;
    if (!st_sort_indices(sorted, f->meta_count, st_cmp_meta_key, f)) {
        st_err(j->err, j->errlen, "%s: out of memory", j->label);
        free(sorted);
        return -1;
    }
    for (size_t i = 1; i < f->meta_count; i++)
        if (st_cmp_meta_key(f, sorted[i - 1], sorted[i]) == 0) {
            st_err(j->err, j->errlen, "%s: duplicate __metadata__ key '%.64s'", j->label,
                   f->strings + f->meta_keys[sorted[i]]);
            free(sorted);
            return -1;
        }
    free(sorted);
    return 0;
}

static int st_parse(dsops_st_file *f, const char *label, char *err, size_t errlen)
{
    if (f->size < 8) {
        st_err(err, errlen, "%s: file is %zu bytes long; a safetensors file starts with an 8-byte header length",
               label, f->size);
        return -1;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | f->buf[i];
    if (hlen > DSOPS_ST_MAX_HEADER) {
        st_err(err, errlen, "%s: header length %" PRIu64 " is larger than the %" PRIu64 " bytes accepted", label, hlen,
               DSOPS_ST_MAX_HEADER);
        return -1;
    }
    if (hlen > f->size - 8) {
        st_err(err, errlen, "%s: header length %" PRIu64 " is beyond the end of the file (%zu bytes follow it)", label,
               hlen, f->size - 8);
        return -1;
    }
    const size_t hsize = (size_t)hlen;
    const uint64_t data_size = (uint64_t)(f->size - 8 - hsize);
    const char *text = (const char *)f->buf + 8;
    f->data = f->buf + 8 + hsize;
    if (st_check_text(label, text, hsize, err, errlen) != 0)
        return -1;

    /* pass 1: syntax, and the sizes of what pass 2 keeps */
    st_json j = {text, text, text + hsize, label, err, errlen};
    size_t members = 0, strings_total = 0;
    if (st_scan_header(&j, &members, &strings_total) != 0)
        return -1;

    /* pass 2: entries and metadata */
    f->entries = malloc((members ? members : 1) * sizeof *f->entries);
    f->strings = malloc(strings_total ? strings_total : 1);
    if (f->entries == NULL || f->strings == NULL) {
        st_err(err, errlen, "%s: out of memory for %zu entries", label, members);
        return -1;
    }
    st_scratch scratch;
    memset(&scratch, 0, sizeof scratch);
    int rc = -1;
    size_t used = 0;
    bool seen_meta = false;
    j.p = text;
    st_json_ws(&j);
    j.p++; /* '{' */
    st_json_ws(&j);
    if (!st_json_at(&j, '}'))
        for (;;) {
            st_json_ws(&j);
            size_t n;
            char *key = f->strings + used;
            if (!st_json_string(&j, key, strings_total - used, &n) || n >= strings_total - used) {
                st_json_fail(&j, "string block too small");
                goto done;
            }
            key[n] = '\0';
            st_json_ws(&j);
            j.p++; /* ':' */
            st_json_ws(&j);
            if (n == 12 && memcmp(key, "__metadata__", 12) == 0) {
                if (seen_meta) {
                    st_err(err, errlen, "%s: duplicate __metadata__ entry", label);
                    goto done;
                }
                seen_meta = true;
                if (st_build_metadata(f, &j, &used, strings_total) != 0)
                    goto done;
            } else {
                if (n == 0) { /* the writer refuses such a name: what is read can be written again */
                    st_err(err, errlen, "%s: a tensor has an empty name", label);
                    goto done;
                }
                used += n + 1;
                st_entry *e = &f->entries[f->count++];
                e->name = (uint32_t)(key - f->strings);
                if (st_build_entry(f, &j, e, data_size, &scratch) != 0)
                    goto done;
            }
            st_json_ws(&j);
            if (!st_json_at(&j, ','))
                break; /* '}' (pass 1) */
            j.p++;
        }

    /* duplicate names */
    f->by_name = malloc((f->count ? f->count : 1) * sizeof *f->by_name);
    if (f->by_name == NULL) {
        st_err(err, errlen, "%s: out of memory", label);
        goto done;
    }
    for (size_t i = 0; i < f->count; i++)
        f->by_name[i] = (uint32_t)i;
    if (!st_sort_indices(f->by_name, f->count, st_cmp_entry_name, f)) {
        st_err(err, errlen, "%s: out of memory", label);
        goto done;
    }
    for (size_t i = 1; i < f->count; i++)
        if (st_cmp_entry_name(f, f->by_name[i - 1], f->by_name[i]) == 0) {
            st_err(err, errlen, "%s: duplicate tensor name '%.128s'", label, f->strings + f->entries[f->by_name[i]].name);
            goto done;
        }

    /* overlaps (tensors without bytes occupy nothing) */
    {
        size_t m = 0, misaligned = 0;
        for (size_t i = 0; i < f->count; i++)
            m += f->entries[i].view.data != st_empty;
        uint32_t *order = malloc((m ? m : 1) * sizeof *order);
        if (order == NULL) {
            st_err(err, errlen, "%s: out of memory", label);
            goto done;
        }
        m = 0;
        for (size_t i = 0; i < f->count; i++)
            if (f->entries[i].view.data != st_empty) {
                order[m++] = (uint32_t)i;
                misaligned += (uintptr_t)f->entries[i].view.data % dsops_dtype_size(f->entries[i].view.dtype) != 0;
            }
        if (!st_sort_indices(order, m, st_cmp_entry_begin, f)) {
            st_err(err, errlen, "%s: out of memory", label);
            free(order);
            goto done;
        }
        for (size_t i = 1; i < m; i++) {
            const st_entry *a = &f->entries[order[i - 1]], *b = &f->entries[order[i]];
            const uint64_t a_begin = (uint64_t)((const unsigned char *)a->view.data - f->data);
            const uint64_t a_end = a_begin + st_view_bytes(&a->view);
            const uint64_t b_begin = (uint64_t)((const unsigned char *)b->view.data - f->data);
            if (b_begin < a_end) {
                const uint64_t b_bytes = st_view_bytes(&b->view);
                st_err(err, errlen,
                       "%s: tensors '%.100s' [%" PRIu64 ", %" PRIu64 ") and '%.100s' [%" PRIu64 ", %" PRIu64
                       ") overlap",
                       label, f->strings + a->name, a_begin, a_end, f->strings + b->name, b_begin, b_begin + b_bytes);
                free(order);
                goto done;
            }
        }
        free(order);

        /* data pointers: in place when aligned to the element size, else an aligned copy */
        if (misaligned > 0) {
            f->copies = malloc(misaligned * sizeof *f->copies);
            if (f->copies == NULL) {
                st_err(err, errlen, "%s: out of memory", label);
                goto done;
            }
        }
        for (size_t i = 0; i < f->count; i++) {
            st_entry *e = &f->entries[i];
            const size_t esize = dsops_dtype_size(e->view.dtype);
            if (e->view.data == st_empty || (uintptr_t)e->view.data % esize == 0)
                continue;
            const uint64_t nbytes = st_view_bytes(&e->view);
            void *copy = st_aligned_alloc((size_t)nbytes);
            if (copy == NULL) {
                st_err(err, errlen, "%s: out of memory copying tensor '%.128s'", label, f->strings + e->name);
                goto done;
            }
            memcpy(copy, e->view.data, (size_t)nbytes);
            f->copies[f->n_copies++] = copy;
            e->view.data = copy;
        }
    }
    rc = 0;

done:
    free(scratch.text);
    free(scratch.keys);
    return rc;
}

static int st_open_buffer(dsops_st_file *f, const char *label, dsops_st_file **file, char *err, size_t errlen)
{
    if (st_parse(f, label, err, errlen) != 0) {
        dsops_st_close(f);
        return -1;
    }
    *file = f;
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    return 0;
}

int dsops_st_open_memory(const void *bytes, size_t size, const char *label, dsops_st_file **file, char *err,
                         size_t errlen)
{
    if (label == NULL)
        label = "buffer";
    if (file == NULL || (bytes == NULL && size > 0)) {
        st_err(err, errlen, "%s: NULL argument", label);
        return -1;
    }
    *file = NULL;
    dsops_st_file *f = calloc(1, sizeof *f);
    if (f == NULL || (f->buf = st_aligned_alloc(size)) == NULL) {
        free(f);
        st_err(err, errlen, "%s: out of memory for %zu bytes", label, size);
        return -1;
    }
    if (size > 0)
        memcpy(f->buf, bytes, size);
    f->size = size;
    return st_open_buffer(f, label, file, err, errlen);
}

int dsops_st_open(const char *path, dsops_st_file **file, char *err, size_t errlen)
{
    if (path == NULL || file == NULL) {
        st_err(err, errlen, "NULL argument");
        return -1;
    }
    *file = NULL;
    /* non-blocking open: a FIFO or a device would block in open or read; only regular files are read */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        st_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st_err(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    FILE *fp = fdopen(fd, "rb");
    if (fp == NULL) {
        st_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if ((uint64_t)sb.st_size > (uint64_t)SIZE_MAX - ST_ALIGN) {
        st_err(err, errlen, "%s: file too large", path);
        fclose(fp);
        return -1;
    }
    size_t size = (size_t)sb.st_size;
    dsops_st_file *f = calloc(1, sizeof *f);
    if (f == NULL || (f->buf = st_aligned_alloc(size)) == NULL) {
        free(f);
        fclose(fp);
        st_err(err, errlen, "%s: out of memory for %zu bytes", path, size);
        return -1;
    }
    size_t got = size > 0 ? fread(f->buf, 1, size, fp) : 0;
    int rerr = ferror(fp);
    fclose(fp);
    if (got != size || rerr) {
        st_err(err, errlen, "%s: read %zu of %zu bytes", path, got, size);
        dsops_st_close(f);
        return -1;
    }
    f->size = size;
    return st_open_buffer(f, path, file, err, errlen);
}

size_t dsops_st_tensor_count(const dsops_st_file *f) { return f != NULL ? f->count : 0; }

const char *dsops_st_tensor_name(const dsops_st_file *f, size_t i)
{
    return f != NULL && i < f->count ? f->strings + f->entries[i].name : NULL;
}

const dsops_tensor *dsops_st_tensor_at(const dsops_st_file *f, size_t i)
{
    return f != NULL && i < f->count ? &f->entries[i].view : NULL;
}

const dsops_tensor *dsops_st_tensor(const dsops_st_file *f, const char *name)
{
    if (f == NULL || name == NULL)
        return NULL;
    size_t lo = 0, hi = f->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const st_entry *e = &f->entries[f->by_name[mid]];
        int c = strcmp(f->strings + e->name, name);
        if (c == 0)
            return &e->view;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

size_t dsops_st_metadata_count(const dsops_st_file *f) { return f != NULL ? f->meta_count : 0; }

const char *dsops_st_metadata_key(const dsops_st_file *f, size_t i)
{
    return f != NULL && i < f->meta_count ? f->strings + f->meta_keys[i] : NULL;
}

const char *dsops_st_metadata_value(const dsops_st_file *f, size_t i)
{
    return f != NULL && i < f->meta_count ? f->strings + f->meta_values[i] : NULL;
}

const char *dsops_st_metadata(const dsops_st_file *f, const char *key)
{
    if (f == NULL || key == NULL)
        return NULL;
    for (size_t i = 0; i < f->meta_count; i++)
        if (strcmp(f->strings + f->meta_keys[i], key) == 0)
            return f->strings + f->meta_values[i];
    return NULL;
}

/* ---- writer ---------------------------------------------------------------------------------- */

typedef struct st_wtensor {
    char *name;
    dsops_tensor view;
    uint64_t nbytes;
} st_wtensor;

struct dsops_st_writer {
    st_wtensor *tensors;
    size_t count, cap;
    char **meta_keys, **meta_values;
    size_t meta_count, meta_cap;
};

dsops_st_writer *dsops_st_writer_create(void) { return calloc(1, sizeof(dsops_st_writer)); }

void dsops_st_writer_destroy(dsops_st_writer *w)
{
    if (w == NULL)
        return;
    for (size_t i = 0; i < w->count; i++)
        free(w->tensors[i].name);
    for (size_t i = 0; i < w->meta_count; i++) {
        free(w->meta_keys[i]);
        free(w->meta_values[i]);
    }
    free(w->tensors);
    free(w->meta_keys);
    free(w->meta_values);
    free(w);
}

int dsops_st_writer_add(dsops_st_writer *w, const char *name, const dsops_tensor *t, char *err, size_t errlen)
{
    if (w == NULL || name == NULL || t == NULL) {
        st_err(err, errlen, "NULL argument");
        return -1;
    }
    if (name[0] == '\0' || strcmp(name, "__metadata__") == 0) {
        st_err(err, errlen, "invalid tensor name \"%s\"", name);
        return -1;
    }
    for (size_t i = 0; i < w->count; i++)
        if (strcmp(w->tensors[i].name, name) == 0) {
            st_err(err, errlen, "duplicate tensor name '%.128s'", name);
            return -1;
        }
    if (dsops_st_dtype_tag(t->dtype) == NULL) {
        st_err(err, errlen, "tensor '%.128s': dtype %d has no safetensors tag here", name, (int)t->dtype);
        return -1;
    }
    if (t->ndim < 0 || t->ndim > DSOPS_MAX_DIMS) {
        st_err(err, errlen, "tensor '%.128s': rank %d outside [0, %d]", name, t->ndim, DSOPS_MAX_DIMS);
        return -1;
    }
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] < 0 || t->stride[d] < 0) {
            st_err(err, errlen, "tensor '%.128s': negative extent or stride in dimension %d", name, d);
            return -1;
        }
    int64_t numel;
    uint64_t nbytes;
    if (!st_count(t->ndim, t->shape, dsops_dtype_size(t->dtype), &numel, &nbytes)) {
        st_err(err, errlen, "tensor '%.128s': element count overflows", name);
        return -1;
    }
    if (t->data == NULL && numel > 0) {
        st_err(err, errlen, "tensor '%.128s': data is NULL", name);
        return -1;
    }
    if (w->count == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 8;
        st_wtensor *p = realloc(w->tensors, cap * sizeof *p);
        if (p == NULL) {
            st_err(err, errlen, "out of memory");
            return -1;
        }
        w->tensors = p;
        w->cap = cap;
    }
    char *copy = st_strdup(name);
    if (copy == NULL) {
        st_err(err, errlen, "out of memory");
        return -1;
    }
    w->tensors[w->count].name = copy;
    w->tensors[w->count].view = *t;
    w->tensors[w->count].nbytes = nbytes;
    w->count++;
    return 0;
}

int dsops_st_writer_set_metadata(dsops_st_writer *w, const char *key, const char *value, char *err, size_t errlen)
{
    if (w == NULL || key == NULL || value == NULL) {
        st_err(err, errlen, "NULL argument");
        return -1;
    }
    char *v = st_strdup(value);
    if (v == NULL) {
        st_err(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < w->meta_count; i++)
        if (strcmp(w->meta_keys[i], key) == 0) {
            free(w->meta_values[i]);
            w->meta_values[i] = v;
            return 0;
        }
    if (w->meta_count == w->meta_cap) {
        size_t cap = w->meta_cap ? 2 * w->meta_cap : 8;
        char **k = realloc(w->meta_keys, cap * sizeof *k);
        if (k != NULL)
            w->meta_keys = k;
        char **vv = k != NULL ? realloc(w->meta_values, cap * sizeof *vv) : NULL;
        if (vv == NULL) {
            free(v);
            st_err(err, errlen, "out of memory");
            return -1;
        }
        w->meta_values = vv;
        w->meta_cap = cap;
    }
    char *k = st_strdup(key);
    if (k == NULL) {
        free(v);
        st_err(err, errlen, "out of memory");
        return -1;
    }
    w->meta_keys[w->meta_count] = k;
    w->meta_values[w->meta_count] = v;
    w->meta_count++;
    return 0;
}

/* Writes the elements of t densely, row-major. */
static bool st_write_dense(FILE *fp, const dsops_tensor *t)
{
    size_t esize = dsops_dtype_size(t->dtype);
    int nd = t->ndim;
    int64_t numel = 1;
    for (int d = 0; d < nd; d++)
        numel *= t->shape[d];
    if (numel == 0)
        return true;
    if (nd == 0)
        return fwrite(t->data, esize, 1, fp) == 1;
    int64_t inner = t->shape[nd - 1];
    int64_t rows = numel / inner;
    int64_t idx[DSOPS_MAX_DIMS] = {0};
    unsigned char tmp[4096];
    const unsigned char *base = t->data;
    for (int64_t r = 0; r < rows; r++) {
        int64_t off = 0;
        for (int d = 0; d < nd - 1; d++)
            off += idx[d] * t->stride[d];
        const unsigned char *row = base + (size_t)off * esize;
        if (t->stride[nd - 1] == 1) {
            if (fwrite(row, esize, (size_t)inner, fp) != (size_t)inner)
                return false;
        } else {
            size_t per = sizeof tmp / esize, k = 0;
            for (int64_t i = 0; i < inner; i++) {
                memcpy(tmp + k * esize, row + (size_t)(i * t->stride[nd - 1]) * esize, esize);
                if (++k == per || i == inner - 1) {
                    if (fwrite(tmp, esize, k, fp) != k)
                        return false;
                    k = 0;
                }
            }
        }
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < t->shape[d])
                break;
            idx[d] = 0;
        }
    }
    return true;
}

static cJSON *st_json_int(uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return cJSON_CreateRaw(buf);
}

/* The header JSON for the layout `offsets` (indexed like w->tensors). */
static char *st_header_json(const dsops_st_writer *w, const uint64_t *offsets)
{
    cJSON *root = cJSON_CreateObject();
    if (root == NULL)
        return NULL;
    bool ok = true;
    if (w->meta_count > 0) {
        cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
        ok = meta != NULL;
        for (size_t i = 0; ok && i < w->meta_count; i++)
            ok = cJSON_AddStringToObject(meta, w->meta_keys[i], w->meta_values[i]) != NULL;
    }
    for (size_t i = 0; ok && i < w->count; i++) {
        const st_wtensor *t = &w->tensors[i];
        cJSON *e = cJSON_AddObjectToObject(root, t->name);
        cJSON *shape = e != NULL ? cJSON_CreateArray() : NULL;
        cJSON *offs = shape != NULL ? cJSON_CreateArray() : NULL;
        ok = offs != NULL && cJSON_AddStringToObject(e, "dtype", dsops_st_dtype_tag(t->view.dtype)) != NULL;
        if (shape != NULL && !cJSON_AddItemToObject(e, "shape", shape)) {
            cJSON_Delete(shape);
            ok = false;
        }
        for (int d = 0; ok && d < t->view.ndim; d++)
            ok = cJSON_AddItemToArray(shape, st_json_int((uint64_t)t->view.shape[d]));
        ok = ok && cJSON_AddItemToArray(offs, st_json_int(offsets[i])) &&
             cJSON_AddItemToArray(offs, st_json_int(offsets[i] + t->nbytes));
        if (offs != NULL && !cJSON_AddItemToObject(e, "data_offsets", offs)) {
            cJSON_Delete(offs);
            ok = false;
        }
    }
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return text;
}

/* The temporary name of a save of `path`: in the same folder, ".<base>.dsops-tmp-<pid>-<attempt>", the base cut so
 * that the name stays within NAME_MAX; `prefix_len` receives the length of the part before the pid. */
static void st_temp_name(const char *path, long pid, unsigned attempt, char *out, size_t cap, size_t *prefix_len)
{
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path + 1) : 0;
    const char *base = path + dir_len;
    char suffix[64];
    snprintf(suffix, sizeof suffix, ".dsops-tmp-%ld-%u", pid, attempt);
    size_t room = ST_NAME_MAX - 1 - strlen(".dsops-tmp-") - 24; /* '.', the marker, pid and attempt digits */
    size_t keep = strlen(base) < room ? strlen(base) : room;
    snprintf(out, cap, "%.*s.%.*s%s", (int)dir_len, path, (int)keep, base, suffix);
    if (prefix_len)
        *prefix_len = dir_len + 1 + keep + strlen(".dsops-tmp-");
}

/* Removes the temporaries an earlier save of `path` left when its process died (their pid no longer runs). */
static void st_remove_stale_temps(const char *path)
{
    char probe[PATH_MAX + 64];
    size_t prefix_len = 0;
    st_temp_name(path, 0, 0, probe, sizeof probe, &prefix_len);
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path + 1) : 0;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", dir_len ? (int)dir_len : 1, dir_len ? path : ".");
    const char *name_prefix = probe + dir_len; /* ".<base>.dsops-tmp-" */
    size_t np = prefix_len - dir_len;
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, name_prefix, np) != 0)
            continue;
        char *end = NULL;
        long pid = strtol(e->d_name + np, &end, 10);
        if (pid <= 0 || !end || *end != '-' || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char full[PATH_MAX + 300];
        snprintf(full, sizeof full, "%.*s%s", (int)dir_len, path, e->d_name);
        unlink(full);
    }
    closedir(d);
}

int dsops_st_writer_save(const dsops_st_writer *w, const char *path, char *err, size_t errlen)
{
    if (w == NULL || path == NULL) {
        st_err(err, errlen, "NULL argument");
        return -1;
    }
    /* refused before anything is written: no name, a folder, a symbolic link (replacing it would cut the link) */
    size_t path_len = strlen(path);
    if (path_len == 0 || path[path_len - 1] == '/' || path_len >= PATH_MAX) {
        st_err(err, errlen, "\"%.64s\": not a file name", path);
        return -1;
    }
    struct stat old;
    bool exists = lstat(path, &old) == 0;
    if (exists && S_ISLNK(old.st_mode)) {
        st_err(err, errlen, "%s: is a symbolic link; give the file it points to", path);
        return -1;
    }
    if (exists && !S_ISREG(old.st_mode)) {
        st_err(err, errlen, "%s: exists and is not a regular file", path);
        return -1;
    }
    st_remove_stale_temps(path);
    /* layout: largest elements first, otherwise in the order added; no gaps */
    size_t n = w->count;
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    uint64_t *offsets = malloc((n ? n : 1) * sizeof *offsets);
    char *header = NULL, *tmp = NULL;
    FILE *fp = NULL;
    int rc = -1;
    if (order == NULL || offsets == NULL) {
        st_err(err, errlen, "%s: out of memory", path);
        goto done;
    }
    size_t m = 0;
    for (size_t esize = 8; esize >= 1; esize /= 2)
        for (size_t i = 0; i < n; i++)
            if (dsops_dtype_size(w->tensors[i].view.dtype) == esize)
                order[m++] = i;
    uint64_t pos = 0;
    for (size_t k = 0; k < m; k++) {
        offsets[order[k]] = pos;
        pos += w->tensors[order[k]].nbytes;
    }

    header = st_header_json(w, offsets);
    if (header == NULL) {
        st_err(err, errlen, "%s: out of memory building the header", path);
        goto done;
    }
    size_t hlen = strlen(header);
    size_t padded = (hlen + 7) / 8 * 8; /* 8 + padded is a multiple of 8 */

    tmp = malloc(PATH_MAX + 64);
    if (tmp == NULL) {
        st_err(err, errlen, "%s: out of memory", path);
        goto done;
    }
    int fd = -1;
    for (unsigned attempt = 0; attempt < 1000 && fd < 0; attempt++) {
        st_temp_name(path, (long)getpid(), attempt, tmp, PATH_MAX + 64, NULL);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        st_err(err, errlen, "%s: cannot create a temporary file next to it: %s", path, strerror(errno));
        free(tmp);
        tmp = NULL;
        goto done;
    }
    if (exists) /* an existing file keeps its permissions */
        (void)fchmod(fd, old.st_mode & 07777);
    fp = fdopen(fd, "wb");
    if (fp == NULL) {
        close(fd);
        st_err(err, errlen, "%s: %s", path, strerror(errno));
        goto done;
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    bool ok = fwrite(len8, 1, 8, fp) == 8 && fwrite(header, 1, hlen, fp) == hlen;
    for (size_t i = hlen; ok && i < padded; i++)
        ok = fputc(' ', fp) != EOF;
    for (size_t k = 0; ok && k < m; k++)
        ok = st_write_dense(fp, &w->tensors[order[k]].view);
    /* durable before it becomes visible: the data reaches the disk, then the rename, then the folder's entry */
    if (ok && (fflush(fp) != 0 || fsync(fileno(fp)) != 0))
        ok = false;
    int werrno = errno;
    if (fclose(fp) != 0 && ok) {
        ok = false;
        werrno = errno;
    }
    fp = NULL;
    if (!ok) {
        st_err(err, errlen, "%s: write failed: %s", path, strerror(werrno));
        goto done;
    }
    if (rename(tmp, path) != 0) {
        st_err(err, errlen, "%s: cannot replace it: %s", path, strerror(errno));
        goto done;
    }
    free(tmp);
    tmp = NULL;
    {
        const char *slash = strrchr(path, '/');
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path + 1) : 1, slash ? path : ".");
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
    }
    rc = 0;

done:
    if (fp != NULL)
        fclose(fp);
    if (tmp != NULL) {
        unlink(tmp);
        free(tmp);
    }
    free(header);
    free(order);
    free(offsets);
    return rc;
}
