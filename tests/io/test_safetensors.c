/*
 * safetensors reader and writer: round trips of every dtype (dense, strided, rank 0, empty), the
 * writer's layout promises (8-byte header alignment, no gaps, aligned tensors), and a table of malformed
 * files that must all be rejected with a message. Finally every truncation and many random byte
 * corruptions of a valid file are fed to the reader, which must answer without crashing (the CI runs
 * this program under AddressSanitizer).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <inttypes.h>
#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dsops.h"
#include "safetensors.h"
#include "test_util.h"

static char tmpdir[256];

static void path_in_tmp(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", tmpdir, name); }

static unsigned char *read_whole(const char *path, size_t *size)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    if (b != NULL && n > 0 && fread(b, 1, (size_t)n, fp) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(fp);
    *size = (size_t)n;
    return b;
}

static int write_whole(const char *path, const void *bytes, size_t n)
{
    FILE *fp = fopen(path, "wb");
    if (fp == NULL)
        return -1;
    size_t w = n ? fwrite(bytes, 1, n, fp) : 0;
    fclose(fp);
    return w == n ? 0 : -1;
}

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* ---- round trip ------------------------------------------------------------------------------- */

static const dsops_dtype all_dtypes[] = {DSOPS_BF16, DSOPS_FP16, DSOPS_FP32, DSOPS_INT8,
                                         DSOPS_UINT8, DSOPS_INT32, DSOPS_INT64};
#define N_DTYPES (sizeof all_dtypes / sizeof all_dtypes[0])

/* Expected dense bytes of a (possibly strided) view. */
static unsigned char *dense_bytes(const dsops_tensor *t, size_t *nbytes)
{
    size_t es = dsops_dtype_size(t->dtype);
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++)
        numel *= t->shape[d];
    unsigned char *out = malloc(numel > 0 ? (size_t)numel * es : 1);
    int64_t idx[DSOPS_MAX_DIMS] = {0};
    for (int64_t e = 0; e < numel; e++) {
        int64_t off = 0;
        for (int d = 0; d < t->ndim; d++)
            off += idx[d] * t->stride[d];
        memcpy(out + (size_t)e * es, (const unsigned char *)t->data + (size_t)off * es, es);
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d])
                break;
            idx[d] = 0;
        }
    }
    *nbytes = (size_t)numel * es;
    return out;
}

static void test_round_trip(void)
{
    tu_rng rng;
    tu_rng_seed(&rng, tu_seed());
    enum { MAXT = 64 };
    dsops_tensor views[MAXT];
    char names[MAXT][48];
    void *mem[MAXT];
    int nt = 0;

    for (size_t k = 0; k < N_DTYPES; k++) {
        dsops_dtype dt = all_dtypes[k];
        size_t es = dsops_dtype_size(dt);
        const char *dn = dsops_dtype_name(dt);
        /* dense [3, 5] */
        {
            int64_t shape[2] = {3, 5};
            mem[nt] = malloc(15 * es);
            for (size_t i = 0; i < 15 * es; i++)
                ((unsigned char *)mem[nt])[i] = (unsigned char)tu_rng_u64(&rng);
            views[nt] = dsops_tensor_make(mem[nt], dt, 2, shape);
            snprintf(names[nt], sizeof names[nt], "%s.dense", dn);
            nt++;
        }
        /* strided: every other column of a [4, 2, 6] buffer -> view [4, 2, 3], strides {13, 6, 2} (padded) */
        {
            size_t total = 4 * 13 + 8;
            mem[nt] = malloc(total * es);
            for (size_t i = 0; i < total * es; i++)
                ((unsigned char *)mem[nt])[i] = (unsigned char)tu_rng_u64(&rng);
            dsops_tensor v;
            memset(&v, 0, sizeof v);
            v.data = mem[nt];
            v.dtype = dt;
            v.ndim = 3;
            v.shape[0] = 4, v.shape[1] = 2, v.shape[2] = 3;
            v.stride[0] = 13, v.stride[1] = 6, v.stride[2] = 2;
            views[nt] = v;
            snprintf(names[nt], sizeof names[nt], "%s.strided", dn);
            nt++;
        }
        /* broadcast (stride 0) over rows */
        {
            mem[nt] = malloc(7 * es);
            for (size_t i = 0; i < 7 * es; i++)
                ((unsigned char *)mem[nt])[i] = (unsigned char)tu_rng_u64(&rng);
            dsops_tensor v;
            memset(&v, 0, sizeof v);
            v.data = mem[nt];
            v.dtype = dt;
            v.ndim = 2;
            v.shape[0] = 3, v.shape[1] = 7;
            v.stride[0] = 0, v.stride[1] = 1;
            views[nt] = v;
            snprintf(names[nt], sizeof names[nt], "%s.broadcast", dn);
            nt++;
        }
        /* rank 0 */
        {
            mem[nt] = malloc(es);
            for (size_t i = 0; i < es; i++)
                ((unsigned char *)mem[nt])[i] = (unsigned char)(0xa0 + i);
            views[nt] = dsops_tensor_make(mem[nt], dt, 0, NULL);
            snprintf(names[nt], sizeof names[nt], "%s.scalar", dn);
            nt++;
        }
        /* empty [0, 4] with NULL data */
        {
            int64_t shape[2] = {0, 4};
            mem[nt] = NULL;
            views[nt] = dsops_tensor_make(NULL, dt, 2, shape);
            snprintf(names[nt], sizeof names[nt], "%s.empty", dn);
            nt++;
        }
    }
    /* an odd-sized uint8 tensor first, so that a naive layout would misalign what follows */
    {
        int64_t shape[1] = {3};
        mem[nt] = malloc(3);
        memcpy(mem[nt], "xyz", 3);
        views[nt] = dsops_tensor_make(mem[nt], DSOPS_UINT8, 1, shape);
        snprintf(names[nt], sizeof names[nt], "odd_bytes");
        nt++;
    }

    char err[DSOPS_ST_ERRLEN];
    dsops_st_writer *w = dsops_st_writer_create();
    tu_check(w != NULL, "writer_create");
    for (int i = 0; i < nt; i++)
        tu_check(dsops_st_writer_add(w, names[i], &views[i], err, sizeof err) == 0, "add %s: %s", names[i], err);
    tu_check(dsops_st_writer_set_metadata(w, "operator", "test", err, sizeof err) == 0, "metadata: %s", err);
    tu_check(dsops_st_writer_set_metadata(w, "quoted \"key\"\n", "line1\nline2\t\\ \xc3\xa9", err, sizeof err) == 0,
             "metadata: %s", err);
    tu_check(dsops_st_writer_set_metadata(w, "operator", "replaced", err, sizeof err) == 0, "metadata: %s", err);

    /* writer rejects */
    int64_t one[1] = {1};
    dsops_tensor bad = dsops_tensor_make(NULL, DSOPS_FP32, 1, one);
    tu_check(dsops_st_writer_add(w, "nulldata", &bad, err, sizeof err) != 0 && err[0], "writer: NULL data rejected");
    tu_check(dsops_st_writer_add(w, names[0], &views[0], err, sizeof err) != 0 && strstr(err, "duplicate"),
             "writer: duplicate name rejected (%s)", err);
    tu_check(dsops_st_writer_add(w, "__metadata__", &views[0], err, sizeof err) != 0, "writer: __metadata__ rejected");
    tu_check(dsops_st_writer_add(w, "", &views[0], err, sizeof err) != 0, "writer: empty name rejected");
    dsops_tensor badt = views[0];
    badt.dtype = DSOPS_DTYPE_INVALID;
    tu_check(dsops_st_writer_add(w, "badtype", &badt, err, sizeof err) != 0, "writer: invalid dtype rejected");
    badt = views[0];
    badt.ndim = DSOPS_MAX_DIMS + 1;
    tu_check(dsops_st_writer_add(w, "badrank", &badt, err, sizeof err) != 0, "writer: bad rank rejected");

    char path[512];
    path_in_tmp(path, sizeof path, "round_trip.safetensors");
    tu_check(dsops_st_writer_save(w, path, err, sizeof err) == 0, "save: %s", err);

    /* a failed save creates nothing */
    char badpath[600];
    snprintf(badpath, sizeof badpath, "%s/no_such_dir/x.safetensors", tmpdir);
    tu_check(dsops_st_writer_save(w, badpath, err, sizeof err) != 0 && err[0], "save into a missing directory fails");
    tu_check(!file_exists(badpath), "failed save leaves no file");
    /* saving over an existing file replaces it */
    char over[512];
    path_in_tmp(over, sizeof over, "over.safetensors");
    write_whole(over, "garbage", 7);
    tu_check(dsops_st_writer_save(w, over, err, sizeof err) == 0, "save over an existing file: %s", err);

    /* layout promises */
    size_t fsize = 0;
    unsigned char *bytes = read_whole(path, &fsize);
    tu_check(bytes != NULL && fsize >= 8, "read back the written file");
    if (bytes != NULL && fsize >= 8) {
        uint64_t hlen = 0;
        for (int i = 7; i >= 0; i--)
            hlen = (hlen << 8) | bytes[i];
        tu_check((8 + hlen) % 8 == 0, "data section starts at a multiple of 8 (header %" PRIu64 ")", hlen);
        tu_check(hlen <= fsize - 8 && bytes[8] == '{', "header starts with '{'");
        size_t over_size = 0;
        unsigned char *ob = read_whole(over, &over_size);
        tu_check(ob != NULL && over_size == fsize && memcmp(ob, bytes, fsize) == 0, "replaced file is complete");
        free(ob);
        /* the data section has no gaps: its size is the sum of the tensors' sizes */
        size_t sum = 0;
        for (int i = 0; i < nt; i++) {
            size_t nb = 0;
            free(dense_bytes(&views[i], &nb));
            sum += nb;
        }
        tu_check(fsize - 8 - hlen == sum, "data section of %zu bytes holds exactly the tensors (%zu)",
                 (size_t)(fsize - 8 - hlen), sum);
    }

    dsops_st_file *f = NULL;
    int rc = dsops_st_open(path, &f, err, sizeof err);
    tu_check(rc == 0, "open round trip: %s", err);
    if (rc == 0) {
        tu_check(dsops_st_tensor_count(f) == (size_t)nt, "tensor count %zu", dsops_st_tensor_count(f));
        for (int i = 0; i < nt; i++) {
            tu_check(dsops_st_tensor_name(f, (size_t)i) != NULL && strcmp(dsops_st_tensor_name(f, (size_t)i), names[i]) == 0,
                     "tensor %d keeps its header position", i);
            const dsops_tensor *t = dsops_st_tensor(f, names[i]);
            if (!tu_check(t != NULL, "tensor %s present", names[i]))
                continue;
            int same_shape = t->dtype == views[i].dtype && t->ndim == views[i].ndim;
            for (int d = 0; same_shape && d < t->ndim; d++)
                same_shape = t->shape[d] == views[i].shape[d];
            tu_check(same_shape, "%s: dtype and shape", names[i]);
            tu_check(t->data != NULL, "%s: data pointer set", names[i]);
            size_t es = dsops_dtype_size(t->dtype);
            tu_check((uintptr_t)t->data % es == 0, "%s: data aligned to %zu", names[i], es);
            int64_t st = 1;
            int dense = 1;
            for (int d = t->ndim - 1; d >= 0; d--) {
                dense = dense && t->stride[d] == st;
                st *= t->shape[d];
            }
            tu_check(dense, "%s: dense strides", names[i]);
            size_t nb = 0;
            unsigned char *want = dense_bytes(&views[i], &nb);
            tu_check(nb == 0 || memcmp(want, t->data, nb) == 0, "%s: bytes round-trip", names[i]);
            free(want);
        }
        tu_check(dsops_st_tensor(f, "missing") == NULL, "absent name gives NULL");
        tu_check(dsops_st_metadata_count(f) == 2, "metadata count %zu", dsops_st_metadata_count(f));
        const char *op = dsops_st_metadata(f, "operator");
        tu_check(op != NULL && strcmp(op, "replaced") == 0, "metadata value replaced");
        const char *q = dsops_st_metadata(f, "quoted \"key\"\n");
        tu_check(q != NULL && strcmp(q, "line1\nline2\t\\ \xc3\xa9") == 0, "metadata escaping round-trips");
        tu_check(dsops_st_metadata(f, "nope") == NULL, "absent metadata key gives NULL");
        dsops_st_close(f);
    }
    free(bytes);
    dsops_st_writer_destroy(w);
    for (int i = 0; i < nt; i++)
        free(mem[i]);
    remove(path);
    remove(over);
}

/* ---- hand-made files -------------------------------------------------------------------------- */

/* 8-byte length + header + data (data bytes are 0, 1, 2, ...). hlen_override < 0: the real length. */
static unsigned char *make_file(const char *header, size_t header_len, int64_t hlen_override, size_t data_len,
                                size_t *size)
{
    *size = 8 + header_len + data_len;
    unsigned char *b = malloc(*size);
    uint64_t h = hlen_override >= 0 ? (uint64_t)hlen_override : (uint64_t)header_len;
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(h >> (8 * i));
    memcpy(b + 8, header, header_len);
    for (size_t i = 0; i < data_len; i++)
        b[8 + header_len + i] = (unsigned char)i;
    return b;
}

/* A file of header h and data_len data bytes (make_file) opened from memory. */
typedef struct in_memory {
    unsigned char *bytes;
    dsops_st_file *f;
} in_memory;

/* -> dsops_st_open_memory's result; close_in_memory(m) in either case. */
static int open_in_memory(in_memory *m, const char *h, size_t data_len, const char *name, char *err, size_t err_size)
{
    size_t n;
    m->bytes = make_file(h, strlen(h), -1, data_len, &n);
    m->f = NULL;
    return dsops_st_open_memory(m->bytes, n, name, &m->f, err, err_size);
}

static void close_in_memory(in_memory *m)
{
    dsops_st_close(m->f);
    free(m->bytes);
}

static void test_valid_edge_cases(void)
{
    char err[DSOPS_ST_ERRLEN];
    in_memory m;

    /* empty object, no data */
    tu_check(open_in_memory(&m, "{}", 0, "empty", err, sizeof err) == 0 && dsops_st_tensor_count(m.f) == 0,
             "empty header accepted: %s", err);
    close_in_memory(&m);

    /* trailing spaces and newline, a hole, bytes after the last tensor, metadata only strings */
    const char *h = "{\"__metadata__\":{\"k\":\"v\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}  \n ";
    int rc = open_in_memory(&m, h, 20, "hole", err, sizeof err);
    tu_check(rc == 0, "gaps and trailing bytes accepted: %s", err);
    if (rc == 0) {
        const dsops_tensor *t = dsops_st_tensor(m.f, "a");
        unsigned char want[8] = {8, 9, 10, 11, 12, 13, 14, 15};
        tu_check(t != NULL && memcmp(t->data, want, 8) == 0, "tensor bytes at their offset");
        tu_check(dsops_st_metadata(m.f, "k") && strcmp(dsops_st_metadata(m.f, "k"), "v") == 0, "metadata read");
    }
    close_in_memory(&m);

    /* misaligned F32 (data_offsets [1, 9]) is copied into aligned memory */
    h = "{\"u\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
        "\"f\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[1,9]},"
        "\"i\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[9,17]}}";
    rc = open_in_memory(&m, h, 17, "misaligned", err, sizeof err);
    tu_check(rc == 0, "misaligned tensors accepted: %s", err);
    if (rc == 0) {
        const dsops_tensor *t = dsops_st_tensor(m.f, "f");
        unsigned char want[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        tu_check(t != NULL && (uintptr_t)t->data % 4 == 0 && memcmp(t->data, want, 8) == 0,
                 "misaligned F32 copied aligned with its bytes");
        t = dsops_st_tensor(m.f, "i");
        unsigned char want8[8] = {9, 10, 11, 12, 13, 14, 15, 16};
        tu_check(t != NULL && (uintptr_t)t->data % 8 == 0 && memcmp(t->data, want8, 8) == 0,
                 "misaligned I64 copied aligned with its bytes");
    }
    close_in_memory(&m);

    /* escapes decode to UTF-8 (a surrogate pair to 4 bytes), other keys of an entry are ignored */
    h = "{\"caf\\u00e9\\ud83d\\ude00\\/\\n\":{\"dtype\":\"U8\",\"shape\":[1],\"x\":{\"y\":[true,false,null,-1]},"
        "\"data_offsets\":[0,1]}}";
    rc = open_in_memory(&m, h, 1, "escapes", err, sizeof err);
    tu_check(rc == 0 && dsops_st_tensor(m.f, "caf\xc3\xa9\xf0\x9f\x98\x80/\n") != NULL,
             "escaped name decoded, other keys ignored: %s", err);
    close_in_memory(&m);

    /* zero-size tensors may share offsets with others */
    h = "{\"a\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"z\":{\"dtype\":\"I32\",\"shape\":[0,3],\"data_offsets\":[0,0]},"
        "\"y\":{\"dtype\":\"BF16\",\"shape\":[2,0],\"data_offsets\":[4,4]}}";
    rc = open_in_memory(&m, h, 4, "zero-size", err, sizeof err);
    tu_check(rc == 0 && dsops_st_tensor(m.f, "z") != NULL && dsops_st_tensor(m.f, "z")->data != NULL,
             "zero-size tensors accepted with a non-NULL data pointer: %s", err);
    close_in_memory(&m);
}

typedef struct bad_case {
    const char *label;
    const char *header;   /* NULL: raw bytes case below */
    int64_t hlen;         /* < 0: the real header length */
    size_t data_len;
    const char *fragment; /* expected in the message */
} bad_case;

#define T32(off) "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":" off "}"

/* One row per malformed header, alike in shape only: each row is its own header text and expected message. */
static const bad_case bad_cases[] = {
    {"header length beyond the file", "{}", 1000, 0, "beyond the end"},
    {"header length absurd", "{}", INT64_MAX, 0, "larger than"},
    {"header length 2^32", "{}", (int64_t)1 << 32, 16, "larger than"},
    {"zero header length", "{}", 0, 2, "not valid JSON"},
    {"JSON does not parse", "{\"a\": ", -1, 0, "not valid JSON"},
    {"JSON garbage", "hello", -1, 0, "not valid JSON"},
    {"unterminated string", "{\"a", -1, 0, "not valid JSON"},
    {"trailing garbage", "{} x", -1, 0, "after its JSON"},
    {"two objects", "{}{}", -1, 0, "after its JSON"},
    {"header is an array", "[1, 2]", -1, 0, "expected a JSON object"},
    {"header is a string", "\"str\"", -1, 0, "expected a JSON object"},
    {"header is a number", "42", -1, 0, "expected a JSON object"},
    {"header is null", "null", -1, 0, "expected a JSON object"},
    {"entry is a number", "{\"a\": 5}", -1, 0, "expected an object"},
    {"entry is an array", "{\"a\": [0, 4]}", -1, 0, "expected an object"},
    {"entry is a string", "{\"a\": \"F32\"}", -1, 0, "expected an object"},
    {"dtype missing", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 4, "dtype"},
    {"dtype not a string", "{\"a\":{\"dtype\":3,\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 4, "dtype"},
    {"unknown dtype F64", "{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", -1, 8, "not supported"},
    {"unknown dtype BOOL", "{\"a\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[0,1]}}", -1, 1, "not supported"},
    {"lower-case dtype", "{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 4, "not supported"},
    {"empty dtype", "{\"a\":{\"dtype\":\"\",\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 4, "not supported"},
    {"shape missing", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", -1, 4, "shape"},
    {"shape a number", "{\"a\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", -1, 4, "shape"},
    {"shape an object", "{\"a\":{\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,4]}}", -1, 4, "shape"},
    {"shape negative", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", -1, 4, "shape[0]"},
    {"shape fractional", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", -1, 4, "fraction"},
    {"shape 1.0", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", -1, 4, "fraction"},
    {"byte-order mark", "\xef\xbb\xbf{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 4,
     "byte-order mark"},
    {"NUL escape in a name", "{\"a\\u0000x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 4,
     "u0000"},
    {"key twice in an entry", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"shape\":[2],\"data_offsets\":[0,4]}}", -1,
     4, "appears twice"},
    {"shape string", "{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", -1, 4, "shape[0]"},
    {"shape nested", "{\"a\":{\"dtype\":\"F32\",\"shape\":[[1]],\"data_offsets\":[0,4]}}", -1, 4, "shape[0]"},
    {"shape null", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,null],\"data_offsets\":[0,4]}}", -1, 4, "shape[1]"},
    {"shape huge", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,4]}}", -1, 4, "exponent"},
    {"shape 2^64", "{\"a\":{\"dtype\":\"U8\",\"shape\":[18446744073709551616],\"data_offsets\":[0,4]}}", -1, 4,
     "shape[0]"},
    {"rank 7", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", -1, 1, "rank 7"},
    {"element count overflows int64",
     "{\"a\":{\"dtype\":\"I8\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,4]}}", -1, 4, "overflow"},
    {"byte count overflows", "{\"a\":{\"dtype\":\"I64\",\"shape\":[2147483648,2147483648,2],\"data_offsets\":[0,4]}}",
     -1, 4, "overflow"},
    {"data_offsets missing", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", -1, 4, "data_offsets"},
    {"data_offsets a number", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":4}}", -1, 4, "data_offsets"},
    {"data_offsets one integer", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}", -1, 4,
     "data_offsets"},
    {"data_offsets three integers", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", -1, 8,
     "data_offsets"},
    {"data_offsets strings", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[\"0\",\"4\"]}}", -1, 4,
     "data_offsets"},
    {"data_offsets negative", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", -1, 4,
     "data_offsets"},
    {"data_offsets fractional", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0.5,4.5]}}", -1, 8,
     "data_offsets"},
    {"begin > end", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", -1, 8, "begin > end"},
    {"end beyond the data", "{\"a\":" T32("[0,8]") "}", -1, 4, "beyond"},
    {"end far beyond the data", "{\"a\":" T32("[9007199254740984,9007199254740992]") "}", -1, 4, "beyond"},
    {"byte size too small", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", -1, 8, "need 8"},
    {"byte size too large", "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 8, "need 4"},
    {"overlapping tensors", "{\"a\":" T32("[0,8]") ",\"b\":" T32("[4,12]") "}", -1, 12, "overlap"},
    {"identical ranges", "{\"a\":" T32("[0,8]") ",\"b\":" T32("[0,8]") "}", -1, 8, "overlap"},
    {"overlap out of order", "{\"b\":" T32("[6,14]") ",\"a\":" T32("[0,8]") ",\"c\":" T32("[14,22]") "}", -1, 22,
     "overlap"},
    {"duplicate names", "{\"a\":" T32("[0,8]") ",\"a\":" T32("[8,16]") "}", -1, 16, "duplicate"},
    {"metadata not an object", "{\"__metadata__\":\"x\"}", -1, 0, "__metadata__"},
    {"metadata an array", "{\"__metadata__\":[\"x\"]}", -1, 0, "__metadata__"},
    {"metadata value a number", "{\"__metadata__\":{\"k\":1}}", -1, 0, "expected a string"},
    {"metadata value null", "{\"__metadata__\":{\"k\":null}}", -1, 0, "expected a string"},
    {"metadata value an object", "{\"__metadata__\":{\"k\":{\"a\":\"b\"}}}", -1, 0, "expected a string"},
    {"metadata duplicate key", "{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", -1, 0, "duplicate"},
    {"metadata duplicate key, apart", "{\"__metadata__\":{\"k\":\"a\",\"j\":\"x\",\"i\":\"y\",\"k\":\"b\"}}", -1, 0, "duplicate"},
    {"metadata twice", "{\"__metadata__\":{},\"__metadata__\":{}}", -1, 0, "duplicate"},
    /* what the writer could not write again, or what other JSON readers refuse */
    {"empty tensor name", "{\"\":" T32("[0,8]") "}", -1, 8, "empty name"},
    {"control character in a name", "{\"a\x01\":" T32("[0,8]") "}", -1, 8, "not valid JSON"},
    {"malformed UTF-8 in a name", "{\"a\xff\":" T32("[0,8]") "}", -1, 8, "not valid JSON"},
    {"overlong UTF-8 in a name", "{\"a\xc0\xaf\":" T32("[0,8]") "}", -1, 8, "not valid JSON"},
    {"UTF-8 surrogate in a name", "{\"a\xed\xa0\x80\":" T32("[0,8]") "}", -1, 8, "not valid JSON"},
    {"unpaired surrogate escape", "{\"a\\ud800\":" T32("[0,8]") "}", -1, 8, "not valid JSON"},
    {"unknown escape", "{\"a\\x41\":" T32("[0,8]") "}", -1, 8, "not valid JSON"},
    {"number with a plus sign", "{\"a\":{\"dtype\":\"F32\",\"shape\":[+2],\"data_offsets\":[0,8]}}", -1, 8,
     "not valid JSON"},
    {"number with a leading zero", "{\"a\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", -1, 8,
     "not valid JSON"},
    {"minus zero extent", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-0],\"data_offsets\":[0,0]}}", -1, 0, "shape[0]"},
    {"trailing comma", "{\"a\":" T32("[0,8]") ",}", -1, 8, "not valid JSON"},
    {"control character as whitespace", "{\x01\"a\":" T32("[0,8]") "}", -1, 8, "not valid JSON"},
    {"other key twice in an entry",
     "{\"a\":{\"x\":1,\"dtype\":\"F32\",\"shape\":[2],\"y\":[],\"data_offsets\":[0,8],\"x\":{}}}", -1, 8,
     "appears twice"},
    {"other key twice, escaped", "{\"a\":{\"x\":1,\"dtype\":\"F32\",\"\\u0078\":2,\"shape\":[2],\"data_offsets\":[0,8]}}",
     -1, 8, "appears twice"},
};

static void expect_rejected(const char *label, const unsigned char *bytes, size_t n, const char *fragment)
{
    char err[DSOPS_ST_ERRLEN];
    err[0] = '\0';
    dsops_st_file *f = (dsops_st_file *)(uintptr_t)1;
    int rc = dsops_st_open_memory(bytes, n, label, &f, err, sizeof err);
    int ok = rc != 0 && f == NULL && err[0] != '\0' && (fragment == NULL || strstr(err, fragment) != NULL);
    tu_check(ok, "malformed file \"%s\" rejected with a message containing \"%s\" (rc %d, message \"%s\")", label,
             fragment ? fragment : "", rc, err);
    if (rc == 0)
        dsops_st_close(f);
    else if (tu_verbose())
        printf("  %s -> %s\n", label, err);
}

static void test_malformed(void)
{
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        size_t n;
        unsigned char *b = make_file(c->header, strlen(c->header), c->hlen, c->data_len, &n);
        expect_rejected(c->label, b, n, c->fragment);
        free(b);
    }

    /* short files */
    unsigned char z[8] = {2, 0, 0, 0, 0, 0, 0, 0};
    expect_rejected("empty file", z, 0, "8-byte");
    expect_rejected("5-byte file", z, 5, "8-byte");
    expect_rejected("length only, header missing", z, 8, "beyond the end");
    unsigned char ff[16];
    memset(ff, 0xff, sizeof ff);
    expect_rejected("header length 2^64-1", ff, sizeof ff, "larger than");

    /* a NUL byte inside the header */
    {
        const char h[] = "{}\0    ";
        size_t n;
        unsigned char *b = make_file(h, sizeof h - 1, -1, 0, &n);
        expect_rejected("NUL inside the header", b, n, "after its JSON");
        free(b);
        const char h2[] = "{\"a\0b\":" T32("[0,8]") "}";
        b = make_file(h2, sizeof h2 - 1, -1, 8, &n);
        char err[DSOPS_ST_ERRLEN];
        dsops_st_file *f = NULL;
        int rc = dsops_st_open_memory(b, n, "NUL in a name", &f, err, sizeof err);
        tu_check(rc != 0 || f != NULL, "NUL inside a key: answered without crashing");
        dsops_st_close(f);
        free(b);
    }

    /* nesting deeper than any parser stack should go */
    {
        size_t depth = 200000;
        char *h = malloc(depth + 1);
        memset(h, '[', depth);
        h[depth] = '\0';
        size_t n;
        unsigned char *b = make_file(h, depth, -1, 0, &n);
        expect_rejected("deeply nested arrays", b, n, "not valid JSON");
        free(b);
        free(h);
    }

    /* files that cannot be read */
    char err[DSOPS_ST_ERRLEN];
    dsops_st_file *f = NULL;
    char path[512];
    path_in_tmp(path, sizeof path, "does_not_exist.safetensors");
    tu_check(dsops_st_open(path, &f, err, sizeof err) != 0 && f == NULL && strstr(err, "cannot open"),
             "missing file rejected (%s)", err);
    tu_check(dsops_st_open(tmpdir, &f, err, sizeof err) != 0 && f == NULL && strstr(err, "regular file"),
             "directory rejected (%s)", err);
    path_in_tmp(path, sizeof path, "short.safetensors");
    write_whole(path, "abc", 3);
    tu_check(dsops_st_open(path, &f, err, sizeof err) != 0 && f == NULL && strstr(err, "8-byte"),
             "3-byte file on disk rejected (%s)", err);
    remove(path);
}

/* Every truncation and many random corruptions of a valid file: the reader answers, never crashes. */
static void test_corruptions(void)
{
    int64_t s2[2] = {3, 4};
    float fv[12];
    int32_t iv[12];
    uint16_t hv[12];
    for (int i = 0; i < 12; i++) {
        fv[i] = (float)i * 0.5f;
        iv[i] = i - 6;
        hv[i] = (uint16_t)(0x3f80 + i);
    }
    dsops_tensor a = dsops_tensor_make(fv, DSOPS_FP32, 2, s2);
    dsops_tensor b = dsops_tensor_make(iv, DSOPS_INT32, 2, s2);
    dsops_tensor c = dsops_tensor_make(hv, DSOPS_BF16, 2, s2);
    char err[DSOPS_ST_ERRLEN];
    dsops_st_writer *w = dsops_st_writer_create();
    dsops_st_writer_add(w, "a", &a, err, sizeof err);
    dsops_st_writer_add(w, "b", &b, err, sizeof err);
    dsops_st_writer_add(w, "c", &c, err, sizeof err);
    dsops_st_writer_set_metadata(w, "m", "v", err, sizeof err);
    char path[512];
    path_in_tmp(path, sizeof path, "corrupt.safetensors");
    tu_check(dsops_st_writer_save(w, path, err, sizeof err) == 0, "save: %s", err);
    dsops_st_writer_destroy(w);
    size_t n = 0;
    unsigned char *orig = read_whole(path, &n);
    remove(path);
    if (!tu_check(orig != NULL, "read back"))
        return;

    size_t rejected = 0, accepted = 0, unexplained = 0;
    for (size_t len = 0; len < n; len++) {
        dsops_st_file *f = NULL;
        err[0] = '\0';
        if (dsops_st_open_memory(orig, len, "truncated", &f, err, sizeof err) == 0) {
            accepted++;
            dsops_st_close(f);
        } else {
            rejected++;
            unexplained += err[0] == '\0';
        }
    }
    tu_check(accepted == 0 && unexplained == 0, "all %zu truncations rejected with a message", n);

    tu_rng rng;
    tu_rng_seed(&rng, tu_seed() ^ 0x5eed);
    unsigned char *buf = malloc(n);
    int iters = tu_quick() ? 2000 : 20000;
    accepted = rejected = unexplained = 0;
    for (int it = 0; it < iters; it++) {
        memcpy(buf, orig, n);
        int flips = 1 + (int)tu_rng_int(&rng, 0, 3);
        for (int k = 0; k < flips; k++) {
            size_t pos = (size_t)tu_rng_int(&rng, 0, (int64_t)n - 1);
            /* mostly the header: that is where the parser works */
            if (tu_rng_int(&rng, 0, 3) != 0 && n > 16)
                pos = (size_t)tu_rng_int(&rng, 0, (int64_t)(n < 200 ? n : 200) - 1);
            static const char chars[] = "{}[]\",:0123456789-.e \\";
            buf[pos] = tu_rng_int(&rng, 0, 1) ? (unsigned char)tu_rng_u64(&rng)
                                               : (unsigned char)chars[tu_rng_int(&rng, 0, sizeof chars - 2)];
        }
        dsops_st_file *f = NULL;
        err[0] = '\0';
        if (dsops_st_open_memory(buf, n, "corrupted", &f, err, sizeof err) == 0) {
            accepted++;
            /* touch every byte of every tensor (out-of-bounds reads show under AddressSanitizer) */
            unsigned sum = 0;
            for (size_t i = 0; i < dsops_st_tensor_count(f); i++) {
                const dsops_tensor *t = dsops_st_tensor_at(f, i);
                size_t nb = dsops_dtype_size(t->dtype);
                for (int d = 0; d < t->ndim; d++)
                    nb *= (size_t)t->shape[d];
                for (size_t k = 0; k < nb; k++)
                    sum += ((const unsigned char *)t->data)[k];
            }
            (void)sum;
            dsops_st_close(f);
        } else {
            rejected++;
            unexplained += err[0] == '\0';
        }
    }
    tu_check(unexplained == 0, "%d corruptions: %zu rejected with a message, %zu still valid", iters, rejected,
             accepted);
    free(buf);
    free(orig);
}

/* ---- headers with many entries ---------------------------------------------------------------- */

/* A file whose header holds n empty tensors ("t0": F32 [0], ...) and, in one more entry, `other_keys` keys besides
 * dtype, shape and data_offsets; returns its size (0 when it could not be written). Written as a stream, so that
 * making it costs the test no memory. */
static size_t write_many_entries(const char *path, size_t n, size_t other_keys)
{
    FILE *fp = fopen(path, "wb");
    if (fp == NULL)
        return 0;
    unsigned char len8[8] = {0};
    fwrite(len8, 1, 8, fp);
    fputc('{', fp);
    for (size_t i = 0; i < n; i++)
        fprintf(fp, "%s\"t%zu\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}", i ? "," : "", i);
    if (other_keys > 0) {
        fprintf(fp, "%s\"many_keys\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]", n ? "," : "");
        for (size_t k = 0; k < other_keys; k++)
            fprintf(fp, ",\"k%zu\":%zu", k, k);
        fputc('}', fp);
    }
    fputc('}', fp);
    long hlen = ftell(fp) - 8;
    fseek(fp, 0, SEEK_SET);
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    fwrite(len8, 1, 8, fp);
    int bad = ferror(fp);
    fclose(fp);
    return bad ? 0 : (size_t)hlen + 8;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Best of three reads of `path` (seconds), -1 when the file is not read with `count` tensors. */
static double time_read(const char *path, size_t count)
{
    double best = -1;
    for (int rep = 0; rep < 3; rep++) {
        char err[DSOPS_ST_ERRLEN];
        dsops_st_file *f = NULL;
        double t0 = now_seconds();
        int rc = dsops_st_open(path, &f, err, sizeof err);
        double t = now_seconds() - t0;
        size_t got = rc == 0 ? dsops_st_tensor_count(f) : 0;
        dsops_st_close(f);
        if (rc != 0 || got != count) {
            printf("  %s: %s (%zu tensors)\n", path, rc ? err : "wrong count", got);
            return -1;
        }
        if (best < 0 || t < best)
            best = t;
    }
    return best;
}

/* The reader's memory is a small multiple of the file, whatever the header: a header of many empty tensors costs
 * a record per tensor, not a parse tree (which took about 17 times the file). Measured as the growth of the peak
 * resident size of a child process that does nothing but read the file. */
static void test_many_entries_memory(void)
{
    const size_t n = tu_quick() ? 50000 : 200000;
    char path[512];
    path_in_tmp(path, sizeof path, "many_entries.safetensors");
    size_t file_size = write_many_entries(path, n, 0);
    if (!tu_check(file_size > 0, "write %s", path))
        return;
    int fds[2];
    if (!tu_check(pipe(fds) == 0, "pipe"))
        return;
    pid_t child = fork();
    if (child == 0) {
        close(fds[0]);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        long before_kb = ru.ru_maxrss;
        char err[DSOPS_ST_ERRLEN];
        dsops_st_file *f = NULL;
        long result[2] = {-1, 0};
        if (dsops_st_open(path, &f, err, sizeof err) == 0 && dsops_st_tensor_count(f) == n &&
            dsops_st_tensor(f, "t12345") != NULL) {
            getrusage(RUSAGE_SELF, &ru);
            result[0] = ru.ru_maxrss - before_kb;
            result[1] = ru.ru_maxrss;
        }
        dsops_st_close(f);
        ssize_t w = write(fds[1], result, sizeof result);
        _exit(w == (ssize_t)sizeof result ? 0 : 1);
    }
    close(fds[1]);
    long result[2] = {-1, 0};
    ssize_t got = read(fds[0], result, sizeof result);
    close(fds[0]);
    int status = 0;
    waitpid(child, &status, 0);
    remove(path);
    if (!tu_check(got == (ssize_t)sizeof result && result[0] >= 0, "the child read %zu empty tensors", n))
        return;
    const double growth = (double)result[0] * 1024.0, bound = 5.0 * (double)file_size + 16.0 * 1024 * 1024;
    tu_check(growth <= bound, "reading %zu empty tensors (a %zu-byte file) grew the peak resident size by %.1f MB "
             "(bound %.1f MB: 5 x the file + 16 MB)", n, file_size, growth / 1048576.0, bound / 1048576.0);
    if (tu_verbose())
        printf("  %zu empty tensors, %.1f MB file: peak resident size grew by %.1f MB\n", n,
               (double)file_size / 1048576.0, growth / 1048576.0);
}

/* Reading takes time linear in the number of tensors, and in the number of keys of one entry (a repeated key is
 * looked for by sorting, not by comparing every pair). */
static void test_many_entries_time(void)
{
    const size_t n = tu_quick() ? 10000 : 40000;
    char small[512], large[512];
    path_in_tmp(small, sizeof small, "entries_small.safetensors");
    path_in_tmp(large, sizeof large, "entries_large.safetensors");
    const struct {
        const char *what;
        size_t tensors, keys;
    } shapes[2] = {{"empty tensors", n, 0}, {"keys in one entry", 0, n}};
    for (int s = 0; s < 2; s++) {
        size_t a = write_many_entries(small, shapes[s].tensors, shapes[s].keys);
        size_t b = write_many_entries(large, 4 * shapes[s].tensors, 4 * shapes[s].keys);
        if (!tu_check(a > 0 && b > 0, "write the files"))
            continue;
        const size_t extra = shapes[s].keys > 0;
        double t1 = time_read(small, shapes[s].tensors + extra), t4 = time_read(large, 4 * shapes[s].tensors + extra);
        /* linear: about 4 times (a little more: the sorts, the caches); quadratic: 16 times */
        tu_check(t1 >= 0 && t4 >= 0 && t4 <= 10 * t1 + 0.1,
                 "%zu %s read in %.4f s, 4 times as many in %.4f s (bound: 10 times + 0.1 s)",
                 shapes[s].tensors + shapes[s].keys, shapes[s].what, t1, t4);
        if (tu_verbose())
            printf("  %zu %s: %.4f s, x4: %.4f s\n", shapes[s].tensors + shapes[s].keys, shapes[s].what, t1, t4);
        remove(small);
        remove(large);
    }
}

/* Count of entries of tmpdir whose name contains `part`. */
static int count_in_tmpdir(const char *part)
{
    int n = 0;
    DIR *d = opendir(tmpdir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        n += strstr(e->d_name, part) != NULL;
    if (d)
        closedir(d);
    return n;
}

/* Output files: atomic and durable replacement through a temporary in the same folder whose name fits NAME_MAX
 * for any OUT name, the mode of an existing OUT kept, symbolic links, folders and empty names refused before
 * anything is written, and temporaries left by a process that died removed by the next save. */
static void test_output_files(void)
{
    float v[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4};
    dsops_tensor t = dsops_tensor_make(v, DSOPS_FP32, 1, shape);
    dsops_st_writer *w = dsops_st_writer_create();
    char err[DSOPS_ST_ERRLEN] = "", path[700], link_path[700];
    if (!tu_check(w && dsops_st_writer_add(w, "v", &t, err, sizeof err) == 0, "writer: %s", err))
        return;
    /* a 250-character name: its temporary must still fit */
    char base[251];
    memset(base, 'n', 250);
    base[250] = 0;
    snprintf(path, sizeof path, "%s/%s", tmpdir, base);
    tu_check(dsops_st_writer_save(w, path, err, sizeof err) == 0, "a 250-character OUT name: %s", err);
    tu_check(count_in_tmpdir(".dsops-tmp-") == 0, "a temporary stayed behind after a save");
    unlink(path);
    /* an existing OUT keeps its mode */
    snprintf(path, sizeof path, "%s/mode.safetensors", tmpdir);
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
    chmod(path, 0600);
    struct stat sb;
    tu_check(dsops_st_writer_save(w, path, err, sizeof err) == 0 && stat(path, &sb) == 0 &&
                 (sb.st_mode & 07777) == 0600, "an existing 0600 OUT became %o (%s)", (unsigned)(sb.st_mode & 07777), err);
    /* a symbolic link is refused and stays a link */
    snprintf(link_path, sizeof link_path, "%s/link.safetensors", tmpdir);
    tu_check(symlink(path, link_path) == 0, "symlink");
    tu_check(dsops_st_writer_save(w, link_path, err, sizeof err) != 0 && strstr(err, "symbolic link") &&
                 lstat(link_path, &sb) == 0 && S_ISLNK(sb.st_mode), "a symbolic link OUT was not refused (%s)", err);
    unlink(link_path);
    /* no name, a folder */
    tu_check(dsops_st_writer_save(w, "", err, sizeof err) != 0 && strstr(err, "not a file name"), "empty OUT (%s)", err);
    tu_check(dsops_st_writer_save(w, tmpdir, err, sizeof err) != 0 && strstr(err, "not a regular file"),
             "a folder as OUT (%s)", err);
    /* a temporary of a process that no longer runs is removed by the next save of the same OUT */
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    char stale[800];
    snprintf(stale, sizeof stale, "%s/.mode.safetensors.dsops-tmp-%ld-0", tmpdir, (long)child);
    f = fopen(stale, "w");
    if (f)
        fclose(f);
    tu_check(count_in_tmpdir(".dsops-tmp-") == 1, "the stale temporary was not created");
    tu_check(dsops_st_writer_save(w, path, err, sizeof err) == 0 && count_in_tmpdir(".dsops-tmp-") == 0,
             "a dead process's temporary stayed (%s)", err);
    unlink(path);
    dsops_st_writer_destroy(w);
}

/* A FIFO (or any file that is not regular) is refused at once: reading it would block. */
static void test_not_regular(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/fifo", tmpdir);
    if (!tu_check(mkfifo(path, 0600) == 0, "mkfifo %s", path))
        return;
    dsops_st_file *f = NULL;
    char err[DSOPS_ST_ERRLEN] = "";
    tu_check(dsops_st_open(path, &f, err, sizeof err) != 0 && f == NULL && strstr(err, "not a regular file"),
             "a FIFO is refused without blocking (%s)", err);
    unlink(path);
    tu_check(dsops_st_open(tmpdir, &f, err, sizeof err) != 0 && strstr(err, "not a regular file"),
             "a directory is refused (%s)", err);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, 20240611);
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/dsops_st_XXXXXX", base != NULL && base[0] ? base : "/tmp");
    if (mkdtemp(tmpdir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    static const struct {
        const char *label; /* what a filter selects */
        void (*run)(void);
    } groups[] = {{"round_trip", test_round_trip},
                  {"valid", test_valid_edge_cases},
                  {"malformed", test_malformed},
                  {"corrupt", test_corruptions},
                  {"many_entries_memory", test_many_entries_memory},
                  {"many_entries_time", test_many_entries_time},
                  {"not_regular", test_not_regular},
                  {"output_files", test_output_files}};
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
        if (tu_selected(groups[i].label))
            groups[i].run();
    rmdir(tmpdir);
    return tu_finish();
}
