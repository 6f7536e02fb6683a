/* The attention core of spec §2.10 over a gathered key list, shared by the sparse / sliding-window /
 * compressed attention operators. An operator validates, builds the key list of one query token,
 * and calls dsops_attn_run for a range of heads; the core gathers the keys once into the two
 * packed layouts of src/kernels/attention/attention.h and runs QK, softmax and PV with the tier's kernels. */
#ifndef DSOPS_ATTENTION_CORE_H
#define DSOPS_ATTENTION_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "dispatch.h"
#include "dsops.h"

/* The key list of one query token, produced row by row by the operator. */
typedef struct dsops_attn_keys {
    /* writes the bf16 key of list entry j (dqk values, already dequantised) to dst */
    void (*row)(const void *src, int j, uint16_t *dst);
    /* optional: starts loading the cache bytes of entry j (called one batch of 16 ahead) */
    void (*prefetch)(const void *src, int j);
    const void *src;
} dsops_attn_keys;

typedef struct dsops_attn_shape {
    int dqk, dv;            /* key / value widths (dv <= dqk, V = K[0:dv]) */
    int nmax;               /* largest key list the scratch is sized for */
    int nh;                 /* heads per call */
    dsops_p_mode p_mode;
    int p_tile;             /* tile length for DSOPS_P_TILED */
    int p_first_max;        /* largest first tile a call may ask for (0: none) */
} dsops_attn_shape;

typedef struct dsops_attn_call {
    const uint16_t *q;      /* [nh][q_stride] bf16: query rows, dqk values + zero up to an even count */
    size_t q_stride;
    const float *sinks;     /* sinks[h * sinks_stride] fp32 or NULL */
    size_t sinks_stride;
    float scale;            /* softmax_scale */
    uint16_t *out;          /* out[h * out_stride + d], d < dv, bf16 */
    size_t out_stride;
    float *lse;             /* lse[h * lse_stride] or NULL */
    size_t lse_stride;
    float *max_logit;       /* max_logit[h * max_logit_stride] or NULL: the row's largest score */
    size_t max_logit_stride;
    int p_first;            /* DSOPS_P_TILED: length of the first tile (0: p_tile); <= shape->p_first_max */
} dsops_attn_call;

/* Work items of an attention operator: (token, chunk of heads). Heads are split only when there are fewer
 * tokens than threads (chunks of a multiple of 8 heads); a head's result does not depend on its chunk, so the
 * output is the same for any thread count. Sets *chunk_heads and *chunks; *threads is lowered to the item
 * count if larger; returns the item count T * chunks (item i: token i / chunks, chunk i % chunks). */
int64_t dsops_attn_plan_items(int64_t T, int64_t N, int *threads, int64_t *chunk_heads, int64_t *chunks);

/* Scratch bytes one concurrent dsops_attn_run needs (64-byte multiple). */
size_t dsops_attn_scratch_bytes(const dsops_attn_shape *shape);

/* The per-head tensors of an attention operator, all optional: sinks [N], lse and max_logits [T, N] fp32.
 * dsops_attn_check_heads validates them against T and N (named after the query tensor `qname`);
 * dsops_attn_bind_heads points call at heads h0 ... of token t in the ones present. */
dsops_status dsops_attn_check_heads(const dsops_tensor *sinks, const dsops_tensor *lse, const dsops_tensor *max_logits,
                                    int64_t T, int64_t N, const char *qname);
void dsops_attn_bind_heads(dsops_attn_call *call, const dsops_tensor *sinks, const dsops_tensor *lse,
                           const dsops_tensor *max_logits, int64_t t, int64_t h0);

/* Length of a packed query row (even, >= dqk). */
static inline int dsops_attn_q_width(int dqk) { return (dqk + 1) & ~1; }

/* Attends the n keys of `keys` (n <= shape->nmax) for shape->nh heads. */
void dsops_attn_run(const dsops_attention_kernels *k, const dsops_attn_shape *shape, const dsops_attn_call *call,
                    int n, const dsops_attn_keys *keys, void *scratch);

#endif
