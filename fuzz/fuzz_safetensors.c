/*
 * Fuzz target: the safetensors reader on arbitrary bytes, and the writer on whatever the reader accepts.
 *
 * Every input goes to dsops_st_open_memory. A refusal must come with a message. A file that is accepted has
 * every byte of every tensor read (AddressSanitizer sees a view that reaches past the file), is written again
 * with the library's writer, and read back: the second reading must give the same tensors in the same order
 * (names, dtypes, shapes, bytes) and the same metadata. Writing the re-read file once more must give the same
 * bytes as the first write (the writer's layout depends only on the tensors). Any difference aborts.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dsops.h"
#include "fuzz_common.h"
#include "safetensors.h"

static char work_dir[512];
static char first_path[600], second_path[600];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_make_work_dir(work_dir, sizeof work_dir, "dsops_fuzz_st");
    snprintf(first_path, sizeof first_path, "%s/first.safetensors", work_dir);
    snprintf(second_path, sizeof second_path, "%s/second.safetensors", work_dir);
    return 0;
}

static size_t view_bytes(const dsops_tensor *t)
{
    size_t n = dsops_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++)
        n *= (size_t)t->shape[d];
    return n;
}

/* The writer's copy of everything `f` holds, saved to `path`. */
static void write_back(const dsops_st_file *f, const char *path)
{
    char err[DSOPS_ST_ERRLEN];
    dsops_st_writer *w = dsops_st_writer_create();
    if (w == NULL)
        fuzz_fail("writer_create returned NULL");
    for (size_t i = 0; i < dsops_st_tensor_count(f); i++)
        if (dsops_st_writer_add(w, dsops_st_tensor_name(f, i), dsops_st_tensor_at(f, i), err, sizeof err) != 0)
            fuzz_fail("the writer refuses tensor %zu of a file the reader accepted: %s", i, err);
    for (size_t i = 0; i < dsops_st_metadata_count(f); i++)
        if (dsops_st_writer_set_metadata(w, dsops_st_metadata_key(f, i), dsops_st_metadata_value(f, i), err,
                                         sizeof err) != 0)
            fuzz_fail("the writer refuses metadata %zu of a file the reader accepted: %s", i, err);
    if (dsops_st_writer_save(w, path, err, sizeof err) != 0)
        fuzz_fail("saving a file the reader accepted failed: %s", err);
    dsops_st_writer_destroy(w);
}

static void expect_same(const dsops_st_file *a, const dsops_st_file *b)
{
    if (dsops_st_tensor_count(a) != dsops_st_tensor_count(b))
        fuzz_fail("round trip: %zu tensors became %zu", dsops_st_tensor_count(a), dsops_st_tensor_count(b));
    for (size_t i = 0; i < dsops_st_tensor_count(a); i++) {
        const char *name = dsops_st_tensor_name(a, i);
        if (strcmp(name, dsops_st_tensor_name(b, i)) != 0)
            fuzz_fail("round trip: tensor %zu '%s' came back as '%s'", i, name, dsops_st_tensor_name(b, i));
        const dsops_tensor *x = dsops_st_tensor_at(a, i), *y = dsops_st_tensor_at(b, i);
        if (dsops_st_tensor(b, name) != y)
            fuzz_fail("round trip: lookup of '%s' does not find its own entry", name);
        if (x->dtype != y->dtype || x->ndim != y->ndim)
            fuzz_fail("round trip: '%s' dtype %d rank %d came back as dtype %d rank %d", name, (int)x->dtype, x->ndim,
                      (int)y->dtype, y->ndim);
        for (int d = 0; d < x->ndim; d++)
            if (x->shape[d] != y->shape[d])
                fuzz_fail("round trip: '%s' shape[%d] %lld came back as %lld", name, d, (long long)x->shape[d],
                          (long long)y->shape[d]);
        size_t n = view_bytes(x);
        if (n > 0 && memcmp(x->data, y->data, n) != 0)
            fuzz_fail("round trip: the bytes of '%s' changed", name);
    }
    if (dsops_st_metadata_count(a) != dsops_st_metadata_count(b))
        fuzz_fail("round trip: %zu metadata entries became %zu", dsops_st_metadata_count(a),
                  dsops_st_metadata_count(b));
    for (size_t i = 0; i < dsops_st_metadata_count(a); i++)
        if (strcmp(dsops_st_metadata_key(a, i), dsops_st_metadata_key(b, i)) != 0 ||
            strcmp(dsops_st_metadata_value(a, i), dsops_st_metadata_value(b, i)) != 0)
            fuzz_fail("round trip: metadata entry %zu changed", i);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[DSOPS_ST_ERRLEN];
    err[0] = '\0';
    dsops_st_file *f = NULL;
    if (dsops_st_open_memory(data, size, "input", &f, err, sizeof err) != 0) {
        if (f != NULL || err[0] == '\0')
            fuzz_fail("a refused file must leave no file and give a message");
        return 0;
    }
    /* every byte of every view lies inside memory the file owns, aligned to its element size */
    unsigned sum = 0;
    for (size_t i = 0; i < dsops_st_tensor_count(f); i++) {
        const dsops_tensor *t = dsops_st_tensor_at(f, i);
        if (t->data == NULL || (uintptr_t)t->data % dsops_dtype_size(t->dtype) != 0)
            fuzz_fail("tensor %zu has a NULL or misaligned data pointer", i);
        const unsigned char *p = t->data;
        for (size_t k = 0, n = view_bytes(t); k < n; k++)
            sum += p[k];
    }
    fuzz_sink(sum);

    write_back(f, first_path);
    dsops_st_file *g = NULL;
    if (dsops_st_open(first_path, &g, err, sizeof err) != 0)
        fuzz_fail("the reader refuses what the writer wrote from an accepted file: %s", err);
    expect_same(f, g);
    write_back(g, second_path);
    if (!fuzz_same_file(first_path, second_path))
        fuzz_fail("writing the re-read file gave other bytes than the first write");
    dsops_st_close(g);
    dsops_st_close(f);
    unlink(first_path);
    unlink(second_path);
    return 0;
}
