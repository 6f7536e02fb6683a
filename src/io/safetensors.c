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
    {"U8", DSOPS_UINT8},  {"I32", DSOPS_INT32}, {"I64", DSOPS_INT64},
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

/* A JSON number that is a non-negative integer not above 2^53. */
static bool st_json_uint(const cJSON *item, uint64_t *value)
{
    if (!cJSON_IsNumber(item))
        return false;
    double d = item->valuedouble;
    if (!(d >= 0.0 && d <= ST_MAX_JSON_INT) || d != (double)(uint64_t)d)
        return false;
    *value = (uint64_t)d;
    return true;
}

/* For messages: a short rendering of a JSON value. */
static const char *st_json_kind(const cJSON *item)
{
    if (item == NULL)
        return "missing";
    if (cJSON_IsObject(item))
        return "an object";
    if (cJSON_IsArray(item))
        return "an array";
    if (cJSON_IsString(item))
        return "a string";
    if (cJSON_IsNumber(item))
        return "a number";
    if (cJSON_IsBool(item))
        return "a boolean";
    if (cJSON_IsNull(item))
        return "null";
    return "an invalid value";
}

/* ---- reader ---------------------------------------------------------------------------------- */

typedef struct st_entry {
    char *name;
    dsops_tensor view;
    uint64_t begin, end; /* offsets inside the data section */
    void *copy;          /* owned aligned copy when the bytes in the file are misaligned */
} st_entry;

struct dsops_st_file {
    unsigned char *buf; /* the whole file, ST_ALIGN-aligned */
    size_t size;
    st_entry *entries;
    size_t count;
    st_entry **by_name; /* entries sorted by name */
    char **meta_keys;
    char **meta_values;
    size_t meta_count;
};

/* A valid data pointer for tensors without elements. */
static _Alignas(ST_ALIGN) unsigned char st_empty[ST_ALIGN];

static int st_cmp_string(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int st_cmp_name(const void *a, const void *b)
{
    return strcmp((*(const st_entry *const *)a)->name, (*(const st_entry *const *)b)->name);
}

static int st_cmp_begin(const void *a, const void *b)
{
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return 0;
}

void dsops_st_close(dsops_st_file *f)
{
    if (f == NULL)
        return;
    for (size_t i = 0; i < f->count; i++) {
        free(f->entries[i].name);
        free(f->entries[i].copy);
    }
    for (size_t i = 0; i < f->meta_count; i++) {
        free(f->meta_keys[i]);
        free(f->meta_values[i]);
    }
    free(f->entries);
    free(f->by_name);
    free(f->meta_keys);
    free(f->meta_values);
    free(f->buf);
    free(f);
}

/* Parses one tensor entry into e (name already set). */
/* What other readers would read differently is refused before parsing: a UTF-8 byte-order mark (cJSON skips it), a
 * \u0000 escape (it would cut a C string short), a number with a fraction or an exponent (3.0 is no extent). */
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

static int st_parse_entry(const char *label, const cJSON *item, uint64_t data_size, st_entry *e, char *err,
                          size_t errlen)
{
    const char *name = e->name;
    if (!cJSON_IsObject(item)) {
        st_err(err, errlen, "%s: entry '%s' is %s, expected an object with dtype, shape and data_offsets", label,
               name, st_json_kind(item));
        return -1;
    }
    /* a repeated key: readers disagree on which value counts (first, last) */
    for (const cJSON *a = item->child; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next)
            if (a->string && b->string && !strcmp(a->string, b->string)) {
                st_err(err, errlen, "%s: tensor '%s': key \"%.32s\" appears twice", label, name, a->string);
                return -1;
            }
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *jo = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");

    if (!cJSON_IsString(jd) || jd->valuestring == NULL) {
        st_err(err, errlen, "%s: tensor '%s': dtype is %s, expected a string", label, name, st_json_kind(jd));
        return -1;
    }
    dsops_dtype dtype = dsops_st_dtype_from_tag(jd->valuestring);
    if (dtype == DSOPS_DTYPE_INVALID) {
        st_err(err, errlen, "%s: tensor '%s': dtype \"%.32s\" is not supported (BF16, F16, F32, I8, U8, I32, I64)",
               label, name, jd->valuestring);
        return -1;
    }

    if (!cJSON_IsArray(js)) {
        st_err(err, errlen, "%s: tensor '%s': shape is %s, expected an array of integers", label, name,
               st_json_kind(js));
        return -1;
    }
    int ndim = cJSON_GetArraySize(js);
    if (ndim > DSOPS_MAX_DIMS) {
        st_err(err, errlen, "%s: tensor '%s': rank %d exceeds the %d dimensions of a dsops tensor", label, name, ndim,
               DSOPS_MAX_DIMS);
        return -1;
    }
    int64_t shape[DSOPS_MAX_DIMS] = {0};
    int d = 0;
    const cJSON *dim;
    cJSON_ArrayForEach(dim, js)
    {
        uint64_t v;
        if (!st_json_uint(dim, &v)) {
            if (cJSON_IsNumber(dim))
                st_err(err, errlen, "%s: tensor '%s': shape[%d] = %g is not a non-negative integer", label, name, d,
                       dim->valuedouble);
            else
                st_err(err, errlen, "%s: tensor '%s': shape[%d] is %s, expected a non-negative integer", label, name,
                       d, st_json_kind(dim));
            return -1;
        }
        shape[d++] = (int64_t)v;
    }
    int64_t numel;
    uint64_t nbytes;
    size_t esize = dsops_dtype_size(dtype);
    if (!st_count(ndim, shape, esize, &numel, &nbytes)) {
        st_err(err, errlen, "%s: tensor '%s': the element count of its shape overflows", label, name);
        return -1;
    }

    if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2) {
        st_err(err, errlen, "%s: tensor '%s': data_offsets is %s, expected [begin, end]", label, name,
               cJSON_IsArray(jo) ? "an array whose length is not 2" : st_json_kind(jo));
        return -1;
    }
    uint64_t begin, end;
    if (!st_json_uint(cJSON_GetArrayItem(jo, 0), &begin) || !st_json_uint(cJSON_GetArrayItem(jo, 1), &end)) {
        st_err(err, errlen, "%s: tensor '%s': data_offsets must hold two non-negative integers", label, name);
        return -1;
    }
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
               label, name, end - begin, numel, jd->valuestring, nbytes);
        return -1;
    }

    e->begin = begin;
    e->end = end;
    e->view = dsops_tensor_make(NULL, dtype, ndim, shape);
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
    size_t hsize = (size_t)hlen;
    uint64_t data_size = (uint64_t)(f->size - 8 - hsize);
    unsigned char *data = f->buf + 8 + hsize;

    /* cJSON gets a NUL-terminated copy; a NUL inside the header ends the JSON early and is then caught
     * by the trailing-bytes check below. */
    char *text = malloc(hsize + 1);
    if (text == NULL) {
        st_err(err, errlen, "%s: out of memory for a %zu-byte header", label, hsize);
        return -1;
    }
    memcpy(text, f->buf + 8, hsize);
    text[hsize] = '\0';
    if (st_check_text(label, text, hsize, err, errlen) != 0) {
        free(text);
        return -1;
    }
    const char *parse_end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &parse_end, 0);
    if (root == NULL) {
        size_t at = parse_end != NULL && parse_end >= text ? (size_t)(parse_end - text) : 0;
        st_err(err, errlen, "%s: header is not valid JSON (error near byte %zu of %zu)", label, at, hsize);
        free(text);
        return -1;
    }
    int rc = -1;
    size_t end_at = (size_t)(parse_end - text);
    for (size_t i = end_at; i < hsize; i++) {
        char c = text[i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            st_err(err, errlen, "%s: header has byte 0x%02x after its JSON value (offset %zu)", label,
                   (unsigned)(unsigned char)c, i);
            goto done;
        }
    }
    if (!cJSON_IsObject(root)) {
        st_err(err, errlen, "%s: header is %s, expected a JSON object", label, st_json_kind(root));
        goto done;
    }

    size_t n_items = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, root) n_items++;
    f->entries = calloc(n_items ? n_items : 1, sizeof *f->entries);
    f->by_name = calloc(n_items ? n_items : 1, sizeof *f->by_name);
    if (f->entries == NULL || f->by_name == NULL) {
        st_err(err, errlen, "%s: out of memory", label);
        goto done;
    }

    bool seen_meta = false;
    cJSON_ArrayForEach(item, root)
    {
        const char *key = item->string != NULL ? item->string : "";
        if (strcmp(key, "__metadata__") == 0) {
            if (seen_meta) {
                st_err(err, errlen, "%s: duplicate __metadata__ entry", label);
                goto done;
            }
            seen_meta = true;
            if (!cJSON_IsObject(item)) {
                st_err(err, errlen, "%s: __metadata__ is %s, expected an object of strings", label,
                       st_json_kind(item));
                goto done;
            }
            size_t nm = 0;
            const cJSON *m;
            cJSON_ArrayForEach(m, item) nm++;
            f->meta_keys = calloc(nm ? nm : 1, sizeof *f->meta_keys);
            f->meta_values = calloc(nm ? nm : 1, sizeof *f->meta_values);
            if (f->meta_keys == NULL || f->meta_values == NULL) {
                st_err(err, errlen, "%s: out of memory", label);
                goto done;
            }
            cJSON_ArrayForEach(m, item)
            {
                const char *mk = m->string != NULL ? m->string : "";
                if (!cJSON_IsString(m) || m->valuestring == NULL) {
                    st_err(err, errlen, "%s: __metadata__ value of '%.64s' is %s, expected a string", label, mk,
                           st_json_kind(m));
                    goto done;
                }
                f->meta_keys[f->meta_count] = st_strdup(mk);
                f->meta_values[f->meta_count] = st_strdup(m->valuestring);
                f->meta_count++;
                if (f->meta_keys[f->meta_count - 1] == NULL || f->meta_values[f->meta_count - 1] == NULL) {
                    st_err(err, errlen, "%s: out of memory", label);
                    goto done;
                }
            }
            /* duplicate keys: sorted copies of the key pointers, then neighbours (n log n, as for names) */
            char **sorted = malloc(sizeof *sorted * (f->meta_count ? f->meta_count : 1));
            if (sorted == NULL) {
                st_err(err, errlen, "%s: out of memory", label);
                goto done;
            }
            memcpy(sorted, f->meta_keys, sizeof *sorted * f->meta_count);
            qsort(sorted, f->meta_count, sizeof *sorted, st_cmp_string);
            for (size_t j = 1; j < f->meta_count; j++)
                if (strcmp(sorted[j - 1], sorted[j]) == 0) {
                    st_err(err, errlen, "%s: duplicate __metadata__ key '%.64s'", label, sorted[j]);
                    free(sorted);
                    goto done;
                }
            free(sorted);
            continue;
        }
        st_entry *e = &f->entries[f->count];
        e->name = st_strdup(key);
        if (e->name == NULL) {
            st_err(err, errlen, "%s: out of memory", label);
            goto done;
        }
        f->by_name[f->count] = e;
        f->count++;
        if (st_parse_entry(label, item, data_size, e, err, errlen) != 0)
            goto done;
    }

    /* duplicate names */
    qsort(f->by_name, f->count, sizeof *f->by_name, st_cmp_name);
    for (size_t i = 1; i < f->count; i++)
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0) {
            st_err(err, errlen, "%s: duplicate tensor name '%.128s'", label, f->by_name[i]->name);
            goto done;
        }

    /* overlaps (tensors without bytes occupy nothing) */
    {
        st_entry **order = malloc((f->count ? f->count : 1) * sizeof *order);
        if (order == NULL) {
            st_err(err, errlen, "%s: out of memory", label);
            goto done;
        }
        size_t m = 0;
        for (size_t i = 0; i < f->count; i++)
            if (f->entries[i].end > f->entries[i].begin)
                order[m++] = &f->entries[i];
        qsort(order, m, sizeof *order, st_cmp_begin);
        for (size_t i = 1; i < m; i++) {
            const st_entry *a = order[i - 1], *b = order[i];
            if (b->begin < a->end) {
                st_err(err, errlen,
                       "%s: tensors '%.100s' [%" PRIu64 ", %" PRIu64 ") and '%.100s' [%" PRIu64 ", %" PRIu64
                       ") overlap",
                       label, a->name, a->begin, a->end, b->name, b->begin, b->end);
                free(order);
                goto done;
            }
        }
        free(order);
    }

    /* data pointers: in place when aligned to the element size, else an aligned copy */
    for (size_t i = 0; i < f->count; i++) {
        st_entry *e = &f->entries[i];
        size_t nbytes = (size_t)(e->end - e->begin);
        size_t esize = dsops_dtype_size(e->view.dtype);
        unsigned char *p = data + e->begin;
        if (nbytes == 0) {
            e->view.data = st_empty;
        } else if ((uintptr_t)p % esize == 0) {
            e->view.data = p;
        } else {
            e->copy = st_aligned_alloc(nbytes);
            if (e->copy == NULL) {
                st_err(err, errlen, "%s: out of memory copying tensor '%.128s'", label, e->name);
                goto done;
            }
            memcpy(e->copy, p, nbytes);
            e->view.data = e->copy;
        }
    }
    rc = 0;

done:
    cJSON_Delete(root);
    free(text);
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
    return f != NULL && i < f->count ? f->entries[i].name : NULL;
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
        const st_entry *e = f->by_name[mid];
        int c = strcmp(e->name, name);
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
    return f != NULL && i < f->meta_count ? f->meta_keys[i] : NULL;
}

const char *dsops_st_metadata_value(const dsops_st_file *f, size_t i)
{
    return f != NULL && i < f->meta_count ? f->meta_values[i] : NULL;
}

const char *dsops_st_metadata(const dsops_st_file *f, const char *key)
{
    if (f == NULL || key == NULL)
        return NULL;
    for (size_t i = 0; i < f->meta_count; i++)
        if (strcmp(f->meta_keys[i], key) == 0)
            return f->meta_values[i];
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
