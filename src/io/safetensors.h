/*
 * Reading and writing safetensors files (the tensor container of the command-line tool and tests).
 *
 * File layout:
 *   bytes [0, 8)        N, the header length, unsigned 64-bit little-endian
 *   bytes [8, 8+N)      a JSON object, optionally padded with trailing spaces:
 *                         { "<name>": { "dtype": "BF16", "shape": [2, 3], "data_offsets": [begin, end] },
 *                           ...,
 *                           "__metadata__": { "<key>": "<string value>", ... } }      (optional)
 *   bytes [8+N, size)   the data section; a tensor's bytes are [8+N+begin, 8+N+end), dense, row-major,
 *                       little-endian
 *
 * Supported dtype tags and their dsops types: BF16 bf16, F16 fp16, F32 fp32, I8 int8, U8 uint8,
 * I32 int32, I64 int64. Other tags of the format (F64, BOOL, F8_*, ...) are rejected by the reader.
 *
 * The reader checks the whole file before giving access to anything: header length inside the file
 * (and at most DSOPS_ST_MAX_HEADER bytes), JSON syntax (RFC 8259: strings in well-formed UTF-8 without raw
 * control characters, no unpaired surrogate escape, numbers without a leading zero or a plus sign) with nothing
 * but whitespace after the object, every entry an object with a known dtype, a shape of at most DSOPS_MAX_DIMS
 * non-negative integers whose element and byte counts do not overflow, data_offsets of two integers with
 * begin <= end <= size of the data section and end - begin = bytes of the shape, no two tensors overlapping,
 * no duplicate or empty names (the writer could not write them again), __metadata__ an object of strings with
 * no key twice. What other readers could read differently is refused: a UTF-8 byte-order mark, a \u0000 escape
 * in a string, a number with a fraction or an exponent (3.0 is not an extent), a key repeated inside a tensor
 * entry. Only regular files are opened (a FIFO would block). Gaps between tensors and bytes after the last one
 * are accepted (the format's reference writer never produces them, but they do no harm).
 *
 * The reader's memory is bounded by the file, whatever its header: besides the file's bytes it holds one record
 * per tensor and the decoded names and metadata strings, never a parse tree; about 4 times the file in all at
 * worst (a header of nothing but empty tensors). Its time grows with the header as n log n at worst (the sorts
 * that find duplicate names and keys).
 *
 * The writer lays tensors out without gaps, 8-byte types first, so that every tensor starts at an
 * offset aligned to its element size, and pads the header with spaces so that the data section starts
 * at a multiple of 8 bytes. It writes to a temporary file next to the destination and renames it over
 * the destination only when everything was written: a failed write never leaves a partial file.
 *
 * Functions that can fail return 0 on success and -1 on failure, with a message in `err` (a buffer of
 * `errlen` bytes, may be NULL) that names the file, the tensor and the offending value.
 */
#ifndef DSOPS_IO_SAFETENSORS_H
#define DSOPS_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "dsops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest header accepted by the reader (bytes). */
#define DSOPS_ST_MAX_HEADER ((uint64_t)100 * 1024 * 1024)
/* A message buffer that is always large enough. */
#define DSOPS_ST_ERRLEN 512

/* Safetensors tag of a dtype ("BF16", ...), NULL for a dtype the format cannot hold here. */
const char *dsops_st_dtype_tag(dsops_dtype dtype);
/* dtype of a tag; DSOPS_DTYPE_INVALID for an unknown or unsupported tag. */
dsops_dtype dsops_st_dtype_from_tag(const char *tag);

/* ---- reader ---------------------------------------------------------------------------------- */

typedef struct dsops_st_file dsops_st_file;

/* Reads and validates a whole file. On success *file owns the data; release with dsops_st_close. */
int dsops_st_open(const char *path, dsops_st_file **file, char *err, size_t errlen);
/* Same, from `size` bytes in memory (copied; the caller keeps its buffer). `label` names the source in
 * messages (NULL: "buffer"). */
int dsops_st_open_memory(const void *bytes, size_t size, const char *label, dsops_st_file **file, char *err,
                         size_t errlen);
void dsops_st_close(dsops_st_file *file);

/* Tensors in the order of the file's header. */
size_t dsops_st_tensor_count(const dsops_st_file *file);
const char *dsops_st_tensor_name(const dsops_st_file *file, size_t i);
/* Dense row-major view of tensor i, its data aligned to at least its element size (the file is held in
 * 64-byte aligned memory; a tensor whose bytes are misaligned there is copied to aligned memory). The
 * memory belongs to `file` and is writable; a tensor with zero elements still has a non-NULL data pointer. */
const dsops_tensor *dsops_st_tensor_at(const dsops_st_file *file, size_t i);
/* The tensor called `name`, or NULL. */
const dsops_tensor *dsops_st_tensor(const dsops_st_file *file, const char *name);

/* __metadata__ entries in the order of the file. */
size_t dsops_st_metadata_count(const dsops_st_file *file);
const char *dsops_st_metadata_key(const dsops_st_file *file, size_t i);
const char *dsops_st_metadata_value(const dsops_st_file *file, size_t i);
/* The value of `key`, or NULL. */
const char *dsops_st_metadata(const dsops_st_file *file, const char *key);

/* ---- writer ---------------------------------------------------------------------------------- */

typedef struct dsops_st_writer dsops_st_writer;

/* NULL when out of memory. */
dsops_st_writer *dsops_st_writer_create(void);
void dsops_st_writer_destroy(dsops_st_writer *writer);

/* Adds a tensor. The view may be strided (any strides >= 0; it is written dense, row-major); only the
 * view is recorded, so its data must stay valid until dsops_st_writer_save. Names must be unique,
 * non-empty and not "__metadata__"; the dtype must have a tag; data may be NULL only for zero elements. */
int dsops_st_writer_add(dsops_st_writer *writer, const char *name, const dsops_tensor *tensor, char *err,
                        size_t errlen);
/* Adds (or replaces) a metadata entry; both strings are copied. */
int dsops_st_writer_set_metadata(dsops_st_writer *writer, const char *key, const char *value, char *err,
                                 size_t errlen);
/* Writes the file (temporary file + rename). The writer can be saved again or destroyed afterwards. */
int dsops_st_writer_save(const dsops_st_writer *writer, const char *path, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* DSOPS_IO_SAFETENSORS_H */
