/* Implementation limits are reported as DSOPS_ERR_UNSUPPORTED, naming the field, before anything is read
 * or written: views declare huge extents over small buffers (never dereferenced when validation stops). */
#include <string.h>

#include "dsops.h"
#include "test_util.h"

static void expect_unsupported(dsops_status s, const char *what, const char *fragment)
{
    tu_check(s == DSOPS_ERR_UNSUPPORTED && strstr(dsops_last_error(), fragment) != NULL,
             "%s: status %s (%s), expected DSOPS_ERR_UNSUPPORTED naming '%s'", what, dsops_status_name(s),
             dsops_last_error(), fragment);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, 1);
    static uint16_t q[4 * 576], keys[4 * 576], out[4 * 512];
    static int32_t idx[64], table[4], cu[2] = {0, 1}, used[1] = {1};
    memset(out, 0x5a, sizeof out);

    /* sparse_flash_attention_v32: K above 2^24 */
    dsops_sparse_flash_attention_v32_args a;
    dsops_sparse_flash_attention_v32_init(&a, DSOPS_PRESET_V32);
    int64_t sq[3] = {1, 1, 512}, sr[3] = {1, 1, 64}, sk[3] = {1, 1, 512}, skr[3] = {1, 1, 64}, si[2] = {1, (1 << 24) + 1},
            sb[2] = {1, 1}, scu[1] = {2}, su[1] = {1};
    a.q_nope = dsops_tensor_make(q, DSOPS_BF16, 3, sq);
    a.q_rope = dsops_tensor_make(q + 512, DSOPS_BF16, 3, sr);
    a.key_nope = dsops_tensor_make(keys, DSOPS_BF16, 3, sk);
    a.key_rope = dsops_tensor_make(keys + 512, DSOPS_BF16, 3, skr);
    a.topk_indices = dsops_tensor_make(idx, DSOPS_INT32, 2, si);
    a.block_table = dsops_tensor_make(table, DSOPS_INT32, 2, sb);
    a.cu_seqlens_q = dsops_tensor_make(cu, DSOPS_INT32, 1, scu);
    a.seqused_kv = dsops_tensor_make(used, DSOPS_INT32, 1, su);
    a.out = dsops_tensor_make(out, DSOPS_BF16, 3, sq);
    expect_unsupported(dsops_sparse_flash_attention_v32(NULL, &a), "sfa K", "topk_indices.shape[1]");

    /* the same with more heads than supported */
    int64_t sqh[3] = {1, (1 << 20) + 1, 512}, srh[3] = {1, (1 << 20) + 1, 64}, si1[2] = {1, 4};
    a.q_nope = dsops_tensor_make(q, DSOPS_BF16, 3, sqh);
    a.q_rope = dsops_tensor_make(q, DSOPS_BF16, 3, srh);
    a.topk_indices = dsops_tensor_make(idx, DSOPS_INT32, 2, si1);
    expect_unsupported(dsops_sparse_flash_attention_v32(NULL, &a), "sfa N", "q_nope.shape[1]");

    /* lightning_indexer: K above 2^24, and more indexer heads than supported */
    dsops_lightning_indexer_args l;
    dsops_lightning_indexer_init(&l, DSOPS_PRESET_V32);
    int64_t lq[3] = {1, 4, 64}, lw[2] = {1, 4}, lk[3] = {1, 1, 64}, lo[2] = {1, (1 << 24) + 1};
    l.q_idx = dsops_tensor_make(q, DSOPS_BF16, 3, lq);
    l.weights = dsops_tensor_make(q + 256, DSOPS_BF16, 2, lw);
    l.key_cache = dsops_tensor_make(keys, DSOPS_BF16, 3, lk);
    l.block_table = a.block_table;
    l.cu_seqlens_q = a.cu_seqlens_q;
    l.seqused_kv = a.seqused_kv;
    l.topk_indices = dsops_tensor_make(idx, DSOPS_INT32, 2, lo);
    expect_unsupported(dsops_lightning_indexer(NULL, &l), "li K", "topk_indices.shape[1]");
    int64_t lqh[3] = {1, 65537, 64}, lwh[2] = {1, 65537}, lo1[2] = {1, 4};
    l.q_idx = dsops_tensor_make(q, DSOPS_BF16, 3, lqh);
    l.weights = dsops_tensor_make(q, DSOPS_BF16, 2, lwh);
    l.topk_indices = dsops_tensor_make(idx, DSOPS_INT32, 2, lo1);
    expect_unsupported(dsops_lightning_indexer(NULL, &l), "li NI", "q_idx");

    uint16_t fresh[4 * 512];
    memset(fresh, 0x5a, sizeof fresh);
    tu_check(memcmp(out, fresh, sizeof out) == 0, "out was written by a rejected call");
    return tu_finish();
}
