/* Top-k without sorting the row. Each score maps to an order-preserving 32-bit key. A threshold is
 * guessed from a sample of the row (a key a little below the sample's estimate of the k-th largest);
 * one pass collects every entry at or above it, and if that gives at least k entries (and not too
 * many) only they are sorted: the true top k are all among them, so the result is exact. Otherwise a
 * radix select finds the k-th largest key digit by digit (11 + 11 + 10 bits) with histograms. */
#include <math.h>

#include "internal.h"
#include "topk.h"

/* Larger key = larger score; -0 and +0 share a key; NaN gets key 0, below every number (-Inf is
 * 0x007fffff). */
static inline uint32_t order_key(float f)
{
    uint32_t u = dsops_bits_from_f32(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return 0;
    if (u == 0x80000000u)
        u = 0;
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* About SAMPLE_TARGET sampled keys per row; at most CANDIDATE_FACTOR * k collected candidates before
 * falling back to the radix select. */
#define SAMPLE_TARGET 1024
#define CANDIDATE_FACTOR 2

static size_t candidate_capacity(int64_t n, int64_t k)
{
    int64_t m = n < k ? n : k;
    int64_t cap = CANDIDATE_FACTOR * m + 64;
    return (size_t)(cap < n ? cap : n);
}

size_t dsops_topk_scratch_bytes(int64_t n, int64_t k)
{
    size_t cap = candidate_capacity(n, k);
    /* radix candidates (n keys) or the sample; selected entries; the merge sort's second buffer (also
     * used to sort the sample) */
    return dsops_align64((size_t)n * 4 + SAMPLE_TARGET * 8) + dsops_align64(cap * 8) +
           dsops_align64((cap > SAMPLE_TARGET ? cap : SAMPLE_TARGET) * 8) + 64;
}

/* Sorts v[0..m) in decreasing order (bottom-up merge sort through tmp). */
static void sort_desc_u64(uint64_t *v, uint64_t *tmp, size_t m)
{
    uint64_t *src = v, *dst = tmp;
    for (size_t width = 1; width < m; width *= 2) {
        for (size_t lo = 0; lo < m; lo += 2 * width) {
            size_t mid = lo + width < m ? lo + width : m, hi = lo + 2 * width < m ? lo + 2 * width : m;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                dst[o++] = src[i] >= src[j] ? src[i++] : src[j++];
            while (i < mid)
                dst[o++] = src[i++];
            while (j < hi)
                dst[o++] = src[j++];
        }
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != v)
        memcpy(v, src, m * 8);
}

/* The k-th largest key (1 <= k <= n) and how many keys are strictly greater. */
static uint32_t kth_key(const float *scores, int64_t n, int64_t k, uint32_t *cand, int64_t *greater)
{
    static const int shift[3] = {21, 10, 0};
    static const uint32_t bins[3] = {2048, 2048, 1024};
    uint32_t prefix = 0, prefix_mask = 0;
    int64_t above = 0; /* keys known to be greater than the current prefix range */
    int64_t m = n;     /* candidates: keys whose high digits equal prefix */
    int64_t hist[2048];
    for (int pass = 0; pass < 3; pass++) {
        memset(hist, 0, sizeof hist);
        uint32_t digit_mask = bins[pass] - 1;
        if (pass == 0) {
            for (int64_t i = 0; i < n; i++)
                hist[(order_key(scores[i]) >> shift[0]) & digit_mask]++;
        } else {
            for (int64_t i = 0; i < m; i++)
                hist[(cand[i] >> shift[pass]) & digit_mask]++;
        }
        /* walk digits from the top until k is reached */
        int64_t need = k - above;
        uint32_t d = digit_mask;
        for (;; d--) {
            if (hist[d] >= need)
                break;
            need -= hist[d];
            above += hist[d];
        }
        prefix |= d << shift[pass];
        prefix_mask |= digit_mask << shift[pass];
        if (pass == 2)
            break;
        /* keep the candidates of digit d */
        int64_t c = 0;
        if (pass == 0) {
            for (int64_t i = 0; i < n; i++) {
                uint32_t key = order_key(scores[i]);
                if ((key & prefix_mask) == prefix)
                    cand[c++] = key;
            }
        } else {
            for (int64_t i = 0; i < m; i++)
                if ((cand[i] & prefix_mask) == prefix)
                    cand[c++] = cand[i];
        }
        m = c;
    }
    *greater = above;
    return prefix;
}

static inline uint64_t composite(uint32_t key, int64_t i) { return ((uint64_t)key << 32) | (uint32_t)~(uint32_t)i; }

/* Collects every entry with key >= thr into sel (at most cap); returns the count, or -1 if more. */
static int64_t collect_at_least(const float *scores, int64_t n, uint32_t thr, uint64_t *sel, int64_t cap)
{
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t key = order_key(scores[i]);
        if (key >= thr) {
            if (c == cap)
                return -1;
            sel[c++] = composite(key, i);
        }
    }
    return c;
}

/* A key that probably has between k and 2k entries at or above it: from a strided sample, the key
 * of rank ~1.25 * k * (sample / n) from the top. Returns 0 (no useful guess) for small rows. */
static uint32_t sampled_threshold(const float *scores, int64_t n, int64_t k, uint64_t *sample, uint64_t *tmp)
{
    int64_t stride = n / SAMPLE_TARGET;
    if (stride < 4)
        return 0;
    int64_t s = 0;
    for (int64_t i = stride / 2; i < n && s < SAMPLE_TARGET; i += stride)
        sample[s++] = order_key(scores[i]);
    int64_t rank = (k * s * 5) / (n * 4); /* 1.25 k of the row, in sample units */
    if (rank < 8 || rank >= s)
        return 0; /* too few sampled entries above the threshold to trust the estimate */
    sort_desc_u64(sample, tmp, (size_t)s);
    return (uint32_t)sample[rank];
}

void dsops_topk(const float *scores, int64_t n, int64_t k, int32_t *idx, float *out_scores, void *scratch)
{
    int64_t m = n < k ? n : k;
    int64_t cap = (int64_t)candidate_capacity(n, k);
    char *base = scratch;
    uint32_t *cand = (uint32_t *)base;   /* radix candidates [n] ... */
    uint64_t *sample = (uint64_t *)base; /* ... or the sample [SAMPLE_TARGET]: never both */
    uint64_t *sel = (uint64_t *)(base + dsops_align64((size_t)n * 4 + SAMPLE_TARGET * 8)); /* [cap] */
    uint64_t *tmp = (uint64_t *)((char *)sel + dsops_align64((size_t)cap * 8)); /* [max(cap, SAMPLE_TARGET)] */
    int64_t c = 0;
    if (m == n) {
        for (int64_t i = 0; i < n; i++)
            sel[c++] = composite(order_key(scores[i]), i);
    } else if (m > 0) {
        uint32_t guess = sampled_threshold(scores, n, m, sample, tmp);
        c = guess ? collect_at_least(scores, n, guess, sel, cap) : -1;
        if (c < m) {
            /* no guess, too few or too many at or above it: exact k-th key by radix select */
            int64_t greater;
            uint32_t thr = kth_key(scores, n, m, cand, &greater);
            int64_t equal_quota = m - greater;
            c = 0;
            for (int64_t i = 0; i < n && c < m; i++) {
                uint32_t key = order_key(scores[i]);
                if (key > thr || (key == thr && equal_quota-- > 0))
                    sel[c++] = composite(key, i);
            }
        }
    }
    /* composite: score key high, inverted index low, so one descending sort gives the spec's order;
     * entries beyond the m-th (from a generous threshold) are dropped */
    sort_desc_u64(sel, tmp, (size_t)c);
    if (c > m)
        c = m;
    for (int64_t j = 0; j < c; j++) {
        int32_t i = (int32_t)~(uint32_t)sel[j];
        idx[j] = i;
        if (out_scores)
            out_scores[j] = scores[i];
    }
    for (int64_t j = c; j < k; j++) {
        idx[j] = -1;
        if (out_scores)
            out_scores[j] = -INFINITY;
    }
}
