/* Sequence descriptors shared by the operators over paged caches (spec §1.4, V6). */
#include "sequences.h"

#include "internal.h"

dsops_status dsops_check_sequence_tensors(const dsops_tensor *cu, const dsops_tensor *used, const dsops_tensor *table,
                                          int64_t *B, int64_t *MB)
{
    const unsigned i32 = DSOPS_DT(DSOPS_INT32);
    DSOPS_TRY(dsops_check_tensor(cu, "cu_seqlens_q", 1, i32, false));
    if (cu->shape[0] < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "cu_seqlens_q.shape[0] = 0, expected B + 1 >= 1");
    *B = cu->shape[0] - 1;
    DSOPS_TRY(dsops_check_tensor(used, "seqused_kv", 1, i32, false));
    DSOPS_TRY(dsops_check_dim(used, "seqused_kv", 0, *B, "B = cu_seqlens_q.shape[0] - 1"));
    DSOPS_TRY(dsops_check_tensor(table, "block_table", 2, i32, false));
    DSOPS_TRY(dsops_check_dim(table, "block_table", 0, *B, "B = cu_seqlens_q.shape[0] - 1"));
    *MB = table->shape[1];
    return DSOPS_OK;
}

dsops_status dsops_check_sequence_values(const dsops_tensor *cu, const dsops_tensor *used, const char *used_name,
                                         int64_t B, int64_t T)
{
    if (dsops_i32_at(cu, 0) != 0)
        return dsops_fail(DSOPS_ERR_INDEX, "cu_seqlens_q[0] = %d, expected 0", dsops_i32_at(cu, 0));
    for (int64_t b = 0; b < B; b++) {
        int32_t lo = dsops_i32_at(cu, b), hi = dsops_i32_at(cu, b + 1);
        if (hi < lo)
            return dsops_fail(DSOPS_ERR_INDEX, "cu_seqlens_q[%lld] = %d is below cu_seqlens_q[%lld] = %d",
                              (long long)(b + 1), hi, (long long)b, lo);
        if (dsops_i32_at(used, b) < 0)
            return dsops_fail(DSOPS_ERR_INDEX, "%s[%lld] = %d is negative", used_name, (long long)b, dsops_i32_at(used, b));
    }
    if (dsops_i32_at(cu, B) != T)
        return dsops_fail(DSOPS_ERR_INDEX, "cu_seqlens_q[%lld] = %d, expected T = %lld", (long long)B,
                          dsops_i32_at(cu, B), (long long)T);
    return DSOPS_OK;
}

void dsops_token_of(const dsops_tensor *cu, int64_t B, int64_t t, int64_t *b, int64_t *S, int64_t *i)
{
    int64_t lo = 0, hi = B; /* largest lo with cu[lo] <= t; cu[B] = T > t bounds it */
    while (hi - lo > 1) {
        int64_t mid = (lo + hi) / 2;
        if (dsops_i32_at(cu, mid) <= t)
            lo = mid;
        else
            hi = mid;
    }
    while (dsops_i32_at(cu, lo + 1) <= t) /* skip empty sequences that end at t */
        lo++;
    *b = lo;
    *S = dsops_i32_at(cu, lo + 1) - dsops_i32_at(cu, lo);
    *i = t - dsops_i32_at(cu, lo);
}

dsops_status dsops_check_topk_tensor(const dsops_tensor *t, const char *name, int64_t T, const char *t_from, int64_t *K)
{
    DSOPS_TRY(dsops_check_tensor(t, name, 2, DSOPS_DT(DSOPS_INT32), false));
    DSOPS_TRY(dsops_check_dim(t, name, 0, T, t_from));
    *K = t->shape[1];
    if (*K < 1)
        return dsops_fail(DSOPS_ERR_SHAPE, "%s.shape[1] = %lld (K), expected >= 1", name, (long long)*K);
    if (*K > (1 << 24))
        return dsops_fail(DSOPS_ERR_UNSUPPORTED, "%s.shape[1] = %lld (K), this build supports at most 2^24", name,
                          (long long)*K);
    return DSOPS_OK;
}
