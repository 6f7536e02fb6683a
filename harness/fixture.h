/* Guarded buffers of the adversarial prolog problems (problems.h: mla_prolog_v32, indexer_prolog_v32), for the
 * tests that call the operators on them:
 *   - owned allocations and checked regions (buffers whose every byte, guard zones included, must keep its
 *     value unless a call may write it),
 *   - padded views in their own guarded buffers,
 *   - element access by up to three indices in any dtype the problems use (bf16, fp16, fp32, int8, uint8, e4m3),
 *   - sentinels before a call, snapshots, restores, and the first byte that changed since the snapshot. */
#ifndef DSOPS_HARNESS_FIXTURE_H
#define DSOPS_HARNESS_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "dsops.h"

#define TF_GUARD 64 /* bytes of guard zone on each side of an output or cache buffer */
#define TF_MAX_REGIONS 12
#define TF_MAX_BUFS 40

/* A buffer whose every byte is checked: outputs and caches, guard zones included. */
typedef struct tf_region {
    unsigned char *p;
    size_t n;
    unsigned char *snap;              /* contents before the call */
    int out;                          /* an output buffer: filled with the sentinel pattern before a call */
    unsigned char pat[4];             /* sentinel pattern (bf16 / fp16 0xdead, fp32 0xdeadbeef, else 0x80) */
    int period;                       /* bytes of the pattern */
} tf_region;

typedef struct tf_fixture {
    tf_region reg[TF_MAX_REGIONS];
    int nreg;
    void *bufs[TF_MAX_BUFS];          /* owned allocations */
    int nbufs;
    int big_guard;                    /* guard zones of tf_alloc_view as large as 8 views */
} tf_fixture;

/* A zeroed allocation freed by tf_free. */
void *tf_own(tf_fixture *f, size_t bytes);
/* Hands an allocation made elsewhere (malloc / calloc) to the fixture: tf_free frees it. */
void tf_adopt(tf_fixture *f, void *m);
/* Registers bytes [ptr, ptr + n) as a checked region; its sentinel pattern follows dt. */
void tf_add_region(tf_fixture *f, void *ptr, size_t n, int out, dsops_dtype dt);
/* A zeroed buffer of `bytes` between two TF_GUARD guard zones, registered whole as a checked region (sentinel
 * pattern of dt): the start of its usable bytes, for views laid out by hand that share one buffer. */
unsigned char *tf_alloc_region(tf_fixture *f, size_t bytes, int out, dsops_dtype dt);
/* Frees the snapshots and the owned allocations (not f itself). */
void tf_free(tf_fixture *f);

/* Strides of a view whose every dimension is padded by `pad` elements (innermost stride 1). */
dsops_tensor tf_view_of(void *data, dsops_dtype dt, int ndim, const int64_t *shape, int64_t pad);
/* Elements spanned by a view (0 for an empty one). */
int64_t tf_span_of(const dsops_tensor *t);
/* A view with padding `pad` in its own buffer with guard zones; registered as a region if `region`. */
dsops_tensor tf_alloc_view(tf_fixture *f, dsops_dtype dt, int ndim, const int64_t *shape, int64_t pad, int region,
                           int out);

/* Address / value of element (i0, i1, i2) of a view of up to three dimensions (unused indices ignored). */
unsigned char *tf_eaddr(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2);
float tf_getf(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2);
/* Stores v rounded to the view's dtype (int8: truncated). */
void tf_putf(const dsops_tensor *t, int64_t i0, int64_t i1, int64_t i2, float v);
/* Entry t of an int64 index vector. */
int64_t tf_get_index(const dsops_tensor *ci, int64_t t);

/* Visitors of the elements a call may write. */
typedef void (*tf_elem_fn)(void *ctx, unsigned char *addr, size_t size);
void tf_each_in_view(const dsops_tensor *t, tf_elem_fn fn, void *ctx);

/* tf_gather_fn appends the visited bytes to buf (grown by realloc; the caller frees buf). */
typedef struct tf_gather_ctx {
    unsigned char *buf;
    size_t n, cap;
} tf_gather_ctx;
void tf_gather_fn(void *ctx, unsigned char *addr, size_t size);

/* tf_restore_fn copies the visited bytes back from their region's snapshot (undoing allowed writes). */
typedef struct tf_restore_ctx {
    tf_fixture *f;
    int last;                         /* region of the previous element (searched first) */
    size_t outside;                   /* visited elements outside every region (a test bug) */
} tf_restore_ctx;
void tf_restore_fn(void *ctx, unsigned char *addr, size_t size);

/* Fills output regions with their sentinels (guard zones too) and snapshots every region. */
void tf_prepare_call(tf_fixture *f);
/* Restores every region to its snapshot. */
void tf_restore(tf_fixture *f);
/* 1 when some region differs from its snapshot: the first such region in *region and its first changed byte in
 * *byte; 0 when every region still equals its snapshot. */
int tf_first_change(const tf_fixture *f, int *region, size_t *byte);

#endif
