/* Micro-kernels of every tier against the scalar tier on random inputs: packed keys bit-exact (and read
 * back through the tier's own QK / PV), the row maximum with its NaN contract, dequantisation and bf16
 * rounding bit-exact, exp
 * within 2 ulp of a correctly rounded exp, QK, PV, the row dots and the compressor's pooling within fp32
 * reassociation error, the int8 row dots exact. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "ref.h"
#include "test_util.h"

static float rnd_bf16(tu_rng *r, float lo, float hi) { return tu_round_bf16(tu_rng_uniform(r, lo, hi)); }

/* distance in units in the last place between two finite floats of the same sign */
static int64_t ulp_distance(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    if (ia < 0)
        ia = INT32_MIN - ia;
    if (ib < 0)
        ib = INT32_MIN - ib;
    return llabs((long long)ia - (long long)ib);
}

static void test_exp(const dsops_kernel_table *t, tu_rng *r)
{
    enum { N = 4099 };
    float *s = malloc(N * 4), *w = malloc(N * 4);
    int64_t worst = 0;
    float worst_x = 0;
    for (int round = 0; round < 40; round++) {
        for (int i = 0; i < N; i++)
            s[i] = round < 20 ? tu_rng_uniform(r, -110.0f, 0.0f) : tu_rng_uniform(r, -1.0f, 0.0f);
        s[0] = 0.0f;
        s[1] = -INFINITY;
        s[2] = -87.5f; /* subnormal result */
        float l = t->attn.exp_sum(s, N, 0.0f, w);
        double ref_sum = 0;
        for (int i = 0; i < N; i++) {
            double e = exp((double)s[i]);
            float ref = (float)e;
            ref_sum += (double)w[i];
            int64_t d = ulp_distance(w[i], ref);
            if (d > worst) {
                worst = d;
                worst_x = s[i];
            }
        }
        tu_check(fabs((double)l - ref_sum) <= 1e-5 * ref_sum, "%s exp_sum: sum %.9g vs %.9g",
                 dsops_isa_name(t->isa), (double)l, ref_sum);
    }
    tu_check(worst <= 2, "%s exp: worst error %lld ulp at x = %.9g", dsops_isa_name(t->isa), (long long)worst,
             (double)worst_x);
    free(s);
    free(w);
}

/* row_max: the largest element, -Inf for n == 0, and NaN whenever some element is NaN, wherever it sits
 * (vector body, lane reduction, scalar tail); +Inf and all -Inf rows are returned as they are. */
static void test_row_max(const dsops_kernel_table *t, tu_rng *r)
{
    enum { MAXN = 70 };
    float s[MAXN];
    int bad_n = -1, bad_at = -1;
    for (int n = 0; n <= MAXN && bad_n < 0; n++) {
        for (int i = 0; i < n; i++)
            s[i] = tu_rng_uniform(r, -50.0f, 50.0f);
        float want = -INFINITY;
        for (int i = 0; i < n; i++)
            want = s[i] > want ? s[i] : want;
        float got = t->attn.row_max(s, n);
        if (got != want)
            bad_n = n;
        for (int at = 0; at < n && bad_n < 0; at++) { /* one NaN, at each position */
            float keep = s[at];
            s[at] = NAN;
            if (!isnan(t->attn.row_max(s, n)))
                bad_n = n, bad_at = at;
            s[at] = INFINITY;
            if (t->attn.row_max(s, n) != INFINITY)
                bad_n = n, bad_at = at;
            s[at] = keep;
        }
    }
    tu_check(bad_n < 0, "%s row_max: n %d, NaN / +Inf at %d not returned (or wrong maximum)", dsops_isa_name(t->isa),
             bad_n, bad_at);
    for (int i = 0; i < MAXN; i++)
        s[i] = -INFINITY;
    int all_neg_inf = 1;
    for (int n = 0; n <= MAXN; n++)
        all_neg_inf &= t->attn.row_max(s, n) == -INFINITY;
    tu_check(all_neg_inf, "%s row_max: a row of -Inf does not give -Inf", dsops_isa_name(t->isa));
    for (int i = 0; i < MAXN; i++)
        s[i] = NAN;
    int all_nan = 1;
    for (int n = 1; n <= MAXN; n++)
        all_nan &= isnan(t->attn.row_max(s, n));
    tu_check(all_nan, "%s row_max: a row of NaN does not give NaN", dsops_isa_name(t->isa));
}

static void test_rounding(const dsops_kernel_table *t, const dsops_kernel_table *ref, tu_rng *r)
{
    enum { N = 1000 };
    float w[N];
    uint16_t a[N], b[N];
    for (int i = 0; i < N; i++) {
        uint32_t u = (uint32_t)tu_rng_u64(r);
        memcpy(&w[i], &u, 4); /* every bit pattern: NaN, Inf, subnormals, ties */
    }
    w[0] = 1.00390625f; /* exact tie between two bf16 values: rounds to even */
    t->attn.scale_to_bf16(w, N, 1.0f, a);
    ref->attn.scale_to_bf16(w, N, 1.0f, b);
    tu_check(memcmp(a, b, sizeof a) == 0, "%s scale_to_bf16 differs from scalar", dsops_isa_name(t->isa));
    t->attn.store_bf16(w, N - 3, 1.0f, a);
    ref->attn.store_bf16(w, N - 3, 1.0f, b);
    tu_check(memcmp(a, b, (N - 3) * 2) == 0, "%s store_bf16 differs from scalar", dsops_isa_name(t->isa));

    int8_t q[512];
    float scales[4] = {0.01f, -3.5f, 1e-30f, 1e30f};
    for (int i = 0; i < 512; i++)
        q[i] = (int8_t)tu_rng_int(r, -128, 127);
    q[0] = -128;
    q[1] = 127;
    t->attn.dequant_int8(q, scales, 512, a);
    ref->attn.dequant_int8(q, scales, 512, b);
    tu_check(memcmp(a, b, 512 * 2) == 0, "%s dequant_int8 differs from scalar", dsops_isa_name(t->isa));
    /* non-finite scales (a kernel may treat them apart): 0 * Inf = NaN, 127 * 3e38 overflows */
    float bad_scales[4] = {INFINITY, NAN, -3e38f, 3e38f};
    q[2] = 0;
    t->attn.dequant_int8(q, bad_scales, 512, a);
    ref->attn.dequant_int8(q, bad_scales, 512, b);
    tu_check(memcmp(a, b, 512 * 2) == 0, "%s dequant_int8 (non-finite scales) differs from scalar",
             dsops_isa_name(t->isa));

    /* e4m3: all 256 bytes twice over, with powers of two, other scales, tiny scales (subnormal products)
     * and non-finite ones; the scalar tier against the bytes' values of spec §2.12 */
    uint8_t e[512];
    for (int i = 0; i < 512; i++)
        e[i] = (uint8_t)(i < 256 ? (uint64_t)i : tu_rng_u64(r));
    /* powers of two on both sides of 2^-117 (below it products can be subnormal: the SIMD tiers' shortcut for
     * exact products must not be taken) and up to 2^127 (products overflow) */
    const float e_scales[4][4] = {{1.0f, 0x1p-13f, 0x1p20f, 0.3f}, {-1.7e-3f, 1e-40f, 0x1p-140f, 3e37f},
                                  {INFINITY, NAN, -NAN, 0.0f}, {0x1p-117f, 0x1p-126f, 0x1p-120f, 0x1p127f}};
    for (int s = 0; s < 4; s++)
        for (int group = 64; group <= 128; group *= 2) { /* 64: 8 groups, the scales used twice over */
            const float *sc = e_scales[s];
            float twice[8];
            for (int g = 0; g < 8; g++)
                twice[g] = sc[g % 4];
            t->attn.dequant_e4m3(e, group == 64 ? twice : sc, group, 512, a);
            ref->attn.dequant_e4m3(e, group == 64 ? twice : sc, group, 512, b);
            tu_check(memcmp(a, b, 512 * 2) == 0, "%s dequant_e4m3 (scale set %d, group %d) differs from scalar",
                     dsops_isa_name(t->isa), s, group);
        }
    ref->attn.dequant_e4m3(e, e_scales[0], 128, 512, b);
    int wrong = 0;
    for (int i = 0; i < 512; i++) {
        float v = dsops_ref_f32_from_e4m3(e[i]), want = isnan(v) ? v : v * e_scales[0][i / 128];
        uint16_t w = dsops_ref_bf16_from_f32(want);
        wrong += b[i] != w;
    }
    tu_check(wrong == 0, "scalar dequant_e4m3 gives bf16(value * scale) of the spec (%d wrong)", wrong);
}

/* Packing: bitwise the scalar tier's, and through each tier's own kernels: QK with one-hot queries (query d = unit vector d) reads every key value back, PV with one-hot weights
 * (row e = weight 1 on key e) every value row with its zero padding, exactly (one product by 1, the rest
 * by 0), so they must equal the staged rows. The scalar (bf16) layout is also checked element by element. */
static void test_pack(const dsops_kernel_table *t, const dsops_kernel_table *ref, tu_rng *r, int dqk, int dv)
{
    int qw = (dqk + 1) & ~1, dpairs = qw / 2, dvb = (dv + 15) / 16;
    size_t stride = (size_t)qw + 32, vps = 8 * 32 + 64, ost = (size_t)dvb * 16;
    uint16_t *rows = calloc(16 * stride, 2), *q = calloc((size_t)qw * qw, 2), *p = calloc(16 * 16, 2);
    uint16_t *kt = calloc((size_t)dpairs * 32, 2), *vp = calloc((size_t)dvb * vps, 2);
    uint16_t *kt_b = calloc((size_t)dpairs * 32, 2), *vp_b = calloc((size_t)dvb * vps, 2);
    float *pf = calloc(16 * 16, 4), *s = calloc((size_t)qw * 16, 4), *o = calloc(16 * ost, 4);
    for (int e = 0; e < 16; e++)
        for (int d = 0; d < qw; d++)
            rows[e * stride + d] = d < dqk ? tu_bf16(tu_rng_uniform(r, -2, 2)) : 0;
    for (int d = 0; d < qw; d++)
        q[(size_t)d * qw + d] = tu_bf16(1.0f);
    for (int e = 0; e < 16; e++) {
        p[e * 16 + e] = tu_bf16(1.0f);
        pf[e * 16 + e] = 1.0f;
    }
    t->attn.pack_keys(rows, stride, dpairs, dv, kt, vp, vps);
    t->attn.qk(q, (size_t)qw, qw, kt, 1, dpairs, 1.0f, s, 16);
    int kt_ok = 1;
    for (int d = 0; d < qw; d++)
        for (int e = 0; e < 16; e++)
            kt_ok &= s[d * 16 + e] == tu_f32(rows[e * stride + d]);
    tu_check(kt_ok, "%s pack_keys + qk do not give the keys back (dqk %d)", dsops_isa_name(t->isa), dqk);
    for (int mode = 0; mode < 2; mode++) {
        if (mode == 0)
            t->attn.pv_bf16(p, 16, 16, vp, vps, 8, dvb, o, ost);
        else
            t->attn.pv_fp32(pf, 16, 16, vp, vps, 8, dvb, o, ost);
        int vp_ok = 1;
        for (int e = 0; e < 16; e++)
            for (int d = 0; d < dvb * 16; d++)
                vp_ok &= o[e * ost + d] == (d < dv ? tu_f32(rows[e * stride + d]) : 0.0f);
        tu_check(vp_ok, "%s pack_keys + pv_%s do not give the values back (dv %d)", dsops_isa_name(t->isa),
                 mode ? "fp32" : "bf16", dv);
    }
    /* the scalar layout itself, element by element (spec of the layout in dispatch.h) */
    ref->attn.pack_keys(rows, stride, dpairs, dv, kt_b, vp_b, vps);
    tu_check(memcmp(kt, kt_b, (size_t)dpairs * 64) == 0, "%s pack_keys Kt (dqk %d) differs", dsops_isa_name(t->isa),
             dqk);
    int vp_same = 1;
    for (int blk = 0; blk < dvb; blk++)
        vp_same &= memcmp(vp + blk * vps, vp_b + blk * vps, 8 * 64) == 0;
    tu_check(vp_same, "%s pack_keys Vp (dv %d) differs", dsops_isa_name(t->isa), dv);
    int layout_ok = 1;
    for (int e = 0; e < 16; e++)
        for (int d = 0; d < qw; d++)
            layout_ok &= kt_b[(d / 2) * 32 + e * 2 + d % 2] == rows[e * stride + d];
    for (int blk = 0; blk < dvb; blk++)
        for (int e = 0; e < 16; e++)
            for (int i = 0; i < 16; i++) {
                int d = blk * 16 + i;
                uint16_t want = d < dv ? rows[e * stride + d] : 0;
                layout_ok &= vp_b[blk * vps + (e / 2) * 32 + i * 2 + e % 2] == want;
            }
    tu_check(layout_ok, "scalar pack_keys does not follow the documented layout (dqk %d, dv %d)", dqk, dv);
    free(rows);
    free(q);
    free(p);
    free(kt);
    free(vp);
    free(kt_b);
    free(vp_b);
    free(pf);
    free(s);
    free(o);
}

/* QK and PV against a double-precision evaluation; error bound from the fp32 summation. */
static void test_dots(const dsops_kernel_table *t, tu_rng *r, int nh, int n, int dqk, int dv)
{
    int qw = (dqk + 1) & ~1, dpairs = qw / 2, ntiles = (n + 15) / 16, npairs = ntiles * 8, dvb = (dv + 15) / 16;
    size_t sst = (size_t)ntiles * 16 + 3, ost = (size_t)dvb * 16 + 5;
    uint16_t *q = calloc((size_t)nh * qw, 2), *keys = calloc((size_t)ntiles * 16 * qw, 2);
    uint16_t *kt = calloc((size_t)ntiles * dpairs * 32, 2), *vp = calloc((size_t)dvb * npairs * 32, 2);
    uint16_t *p = calloc((size_t)nh * ntiles * 16, 2);
    float *pf = calloc((size_t)nh * ntiles * 16, 4), *s = calloc((size_t)nh * sst, 4), *o = calloc((size_t)nh * ost, 4);
    for (int i = 0; i < nh; i++)
        for (int d = 0; d < dqk; d++)
            q[i * qw + d] = tu_bf16(rnd_bf16(r, -1, 1));
    for (int e = 0; e < n; e++)
        for (int d = 0; d < dqk; d++)
            keys[(size_t)e * qw + d] = tu_bf16(rnd_bf16(r, -1, 1));
    for (int tile = 0; tile < ntiles; tile++)
        t->attn.pack_keys(keys + (size_t)tile * 16 * qw, (size_t)qw, dpairs, dv,
                          kt + (size_t)tile * dpairs * 32, vp + (size_t)tile * 8 * 32, (size_t)npairs * 32);
    t->attn.qk(q, qw, nh, kt, ntiles, dpairs, 0.125f, s, sst);
    double worst = 0;
    for (int h = 0; h < nh; h++)
        for (int e = 0; e < n; e++) {
            double ref = 0, mag = 0;
            for (int d = 0; d < dqk; d++) {
                double x = (double)tu_f32(q[h * qw + d]) * (double)tu_f32(keys[(size_t)e * qw + d]);
                ref += x;
                mag += fabs(x);
            }
            double err = fabs((double)s[h * sst + e] - 0.125 * ref) / (0.125 * mag * dqk * 6e-8 + 1e-30);
            worst = err > worst ? err : worst;
        }
    tu_check(worst <= 1.0, "%s qk (nh %d, n %d, dqk %d): error %.3g of the fp32 bound", dsops_isa_name(t->isa), nh,
             n, dqk, worst);
    for (int h = 0; h < nh; h++)
        for (int e = 0; e < ntiles * 16; e++) {
            float v = e < n ? rnd_bf16(r, 0, 1) : 0.0f;
            p[h * ntiles * 16 + e] = tu_bf16(v);
            pf[h * ntiles * 16 + e] = v;
        }
    for (int mode = 0; mode < 2; mode++) {
        if (mode == 0)
            t->attn.pv_bf16(p, (size_t)ntiles * 16, nh, vp, (size_t)npairs * 32, (n + 1) / 2,
                            dvb, o, ost);
        else
            t->attn.pv_fp32(pf, (size_t)ntiles * 16, nh, vp, (size_t)npairs * 32, (n + 1) / 2,
                            dvb, o, ost);
        worst = 0;
        for (int h = 0; h < nh; h++)
            for (int d = 0; d < dvb * 16; d++) {
                double ref = 0, mag = 0;
                for (int e = 0; e < n; e++) {
                    double v = d < dv ? (double)tu_f32(keys[(size_t)e * qw + d]) : 0.0;
                    double x = (double)pf[h * ntiles * 16 + e] * v;
                    ref += x;
                    mag += fabs(x);
                }
                double err = fabs((double)o[h * ost + d] - ref) / (mag * n * 6e-8 + 1e-30);
                worst = err > worst ? err : worst;
            }
        tu_check(worst <= 1.0, "%s pv_%s (nh %d, n %d, dv %d): error %.3g of the fp32 bound", dsops_isa_name(t->isa),
                 mode ? "fp32" : "bf16", nh, n, dv, worst);
    }
    free(q);
    free(keys);
    free(kt);
    free(vp);
    free(p);
    free(pf);
    free(s);
    free(o);
}

/* Row-dot kernels (few-row linear maps from row-major weights, and from the lanes layout): int8 exact, bf16
 * within the fp32 bound.
 * Rows 0 and 1 of x and W sit at the int8 extremes (-128, 127): x 127 against W 127 makes every pair of
 * biased products 255 * 127 * 2, past what an int16 pair sum (vpmaddubsw) holds. */
static void test_rowdot(const dsops_kernel_table *t, tu_rng *r, int M, int N, int K)
{
    if (!tu_check(t->linear.rowdot_bf16 && t->linear.rowdot_s8 && t->linear.rowdot_bf16_lanes && t->linear.rowdot_s8_lanes,
                  "%s has no row-dot kernels", dsops_isa_name(t->isa)))
        return;
    size_t ldx = (size_t)K + 3, ldw = (size_t)K + 5, ldy = (size_t)N + 2;
    uint16_t *xb = calloc((size_t)M * ldx, 2), *wb = calloc((size_t)N * ldw, 2);
    int8_t *x8 = calloc((size_t)M * ldx, 1), *w8 = calloc((size_t)N * ldw, 1);
    uint8_t *xbias = calloc((size_t)M * (size_t)K, 1);
    int32_t *wsum = calloc((size_t)N, 4), *y8 = calloc((size_t)M * ldy, 4);
    float *yb = calloc((size_t)M * ldy, 4);
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) {
            xb[m * ldx + k] = tu_bf16(rnd_bf16(r, -1, 1));
            x8[m * ldx + k] = (int8_t)(m == 0 ? -128 : m == 1 ? 127 : tu_rng_int(r, -128, 127));
            xbias[(size_t)m * K + k] = (uint8_t)(x8[m * ldx + k] ^ 0x80);
        }
    for (int n = 0; n < N; n++) {
        int32_t sum = 0;
        for (int k = 0; k < K; k++) {
            wb[n * ldw + k] = tu_bf16(rnd_bf16(r, -1, 1));
            w8[n * ldw + k] = (int8_t)(n == 0 ? -128 : n == 1 ? 127 : tu_rng_int(r, -128, 127));
            sum += w8[n * ldw + k];
        }
        wsum[n] = sum * 128;
    }
    t->linear.rowdot_bf16(xb, ldx, M, wb, ldw, N, K, yb, ldy);
    /* the lanes form on the same weights (padding rows and a lone last value must add nothing) */
    uint16_t *wl = calloc(dsops_linear_lanes_elems(N, K) + 1, 2);
    float *yl = calloc((size_t)M * ldy, 4);
    dsops_linear_pack_lanes(wb, N, K, (int64_t)ldw, 1, wl);
    t->linear.rowdot_bf16_lanes(xb, ldx, M, wl, N, K, yl, ldy);
    t->linear.rowdot_s8(xbias, (size_t)K, M, w8, ldw, N, K, wsum, y8, ldy);
    int8_t *wl8 = calloc(dsops_linear_lanes_elems(N, K) + 1, 1);
    int32_t *yl8 = calloc((size_t)M * ldy, 4);
    dsops_linear_pack_lanes_s8(w8, N, K, (int64_t)ldw, 1, wl8);
    t->linear.rowdot_s8_lanes(xbias, (size_t)K, M, wl8, N, K, wsum, yl8, ldy);
    int exact = 1, exact_l = 1;
    double worst = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            int64_t ref8 = 0;
            double ref = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                ref8 += (int64_t)x8[m * ldx + k] * w8[n * ldw + k];
                double p = (double)tu_f32(xb[m * ldx + k]) * (double)tu_f32(wb[n * ldw + k]);
                ref += p;
                mag += fabs(p);
            }
            exact &= y8[m * ldy + n] == ref8;
            exact_l &= yl8[m * ldy + n] == ref8;
            double err = fabs((double)yb[m * ldy + n] - ref) / (mag * K * 6e-8 + 1e-30);
            double err_l = fabs((double)yl[m * ldy + n] - ref) / (mag * K * 6e-8 + 1e-30);
            worst = err > worst ? err : worst;
            worst = err_l > worst ? err_l : worst;
        }
    tu_check(exact, "%s rowdot_s8 (M %d, N %d, K %d) is not exact", dsops_isa_name(t->isa), M, N, K);
    tu_check(exact_l, "%s rowdot_s8_lanes (M %d, N %d, K %d) is not exact", dsops_isa_name(t->isa), M, N, K);
    tu_check(worst <= 1.0, "%s rowdot_bf16 / rowdot_bf16_lanes (M %d, N %d, K %d): error %.3g of the fp32 bound",
             dsops_isa_name(t->isa), M, N, K, worst);
    free(wl);
    free(yl);
    free(wl8);
    free(yl8);
    free(xb);
    free(wb);
    free(x8);
    free(w8);
    free(xbias);
    free(wsum);
    free(y8);
    free(yb);
}

/* The compressor's pooling of n candidates over D channels against a double evaluation of the same softmax
 * (bound: fp32 rounding of the sums, 2-ulp exp), and against the scalar tier for the non-finite cases:
 * -Inf logits (some candidates of a channel, or all: NaN), +Inf values. Rows are allocated to their exact
 * length, and pooled / e are followed by guards. */
static void test_pool(const dsops_kernel_table *t, tu_rng *r, int n, int64_t D)
{
    if (!tu_check(t->compressor.pool != NULL, "%s has no compressor pool", dsops_isa_name(t->isa)))
        return;
    float **kv = calloc((size_t)n, sizeof *kv), **sc = calloc((size_t)n, sizeof *sc);
    size_t work = DSOPS_CMP_POOL_WORK(D);
    float *out = malloc((size_t)(D + 8) * 4), *ref = malloc((size_t)(D + 8) * 4), *e = malloc((work + 8) * 4);
    for (int i = 0; i < n; i++) {
        kv[i] = malloc((size_t)D * 4);
        sc[i] = malloc((size_t)D * 4);
        for (int64_t d = 0; d < D; d++) {
            kv[i][d] = tu_rng_uniform(r, -3, 3);
            sc[i][d] = tu_rng_uniform(r, -8, 8) + (d % 5 == 0 ? 60.0f : 0.0f); /* large logits for some channels */
            if ((i + d) % 7 == 3)
                sc[i][d] = -INFINITY;
        }
    }
    for (int i = 0; i < n; i++)
        sc[i][D - 1] = -INFINITY; /* every logit of the last channel -Inf: 0/0 */
    for (int64_t d = 0; d < D + 8; d++)
        out[d] = ref[d] = 12345.0f;
    for (size_t i = 0; i < work + 8; i++)
        e[i] = 12345.0f;
    const float *const *kvc = (const float *const *)kv, *const *scc = (const float *const *)sc;
    t->compressor.pool(kvc, scc, n, D, out, e);
    dsops_kernel_table_get(DSOPS_ISA_SCALAR)->compressor.pool(kvc, scc, n, D, ref, e);
    int guards = 1, nonfinite = 1;
    for (int64_t d = D; d < D + 8; d++)
        guards &= out[d] == 12345.0f;
    for (size_t i = work; i < work + 8; i++)
        guards &= e[i] == 12345.0f;
    double worst = 0;
    int64_t worst_d = 0;
    for (int64_t d = 0; d < D; d++) {
        if (!isfinite(out[d]) || !isfinite(ref[d])) {
            nonfinite &= isnan(out[d]) == isnan(ref[d]) && (isnan(out[d]) || out[d] == ref[d]);
            continue;
        }
        double m = -INFINITY, sum = 0, acc = 0, mag = 0;
        for (int i = 0; i < n; i++)
            m = sc[i][d] > m ? sc[i][d] : m;
        for (int i = 0; i < n; i++) {
            double p = exp((double)sc[i][d] - m);
            sum += p;
            acc += (double)kv[i][d] * p;
            mag += fabs((double)kv[i][d]) * p;
        }
        double err = fabs((double)out[d] - acc / sum) / ((mag / sum) * (n + 8) * 1.2e-7 + 1e-30);
        if (err > worst) {
            worst = err;
            worst_d = d;
        }
    }
    tu_check(guards, "%s pool (n %d, D %lld) writes past pooled or e", dsops_isa_name(t->isa), n, (long long)D);
    tu_check(nonfinite, "%s pool (n %d, D %lld): non-finite results differ from scalar", dsops_isa_name(t->isa), n,
             (long long)D);
    tu_check(isnan(out[D - 1]), "%s pool (n %d, D %lld): a channel of -Inf logits gives %g, not NaN",
             dsops_isa_name(t->isa), n, (long long)D, (double)out[D - 1]);
    tu_check(worst <= 1.0, "%s pool (n %d, D %lld): error %.3g of the fp32 bound at channel %lld",
             dsops_isa_name(t->isa), n, (long long)D, worst, (long long)worst_d);
    for (int i = 0; i < n; i++) {
        free(kv[i]);
        free(sc[i]);
    }
    free(kv);
    free(sc);
    free(out);
    free(ref);
    free(e);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, 11);
    tu_rng r;
    tu_rng_seed(&r, tu_seed());
    const dsops_kernel_table *scalar = dsops_kernel_table_get(DSOPS_ISA_SCALAR);
    for (int isa = DSOPS_ISA_SCALAR; isa <= (int)dsops_isa_detected(); isa++) {
        const dsops_kernel_table *t = dsops_kernel_table_get((dsops_isa)isa);
        test_exp(t, &r);
        test_row_max(t, &r);
        test_rounding(t, scalar, &r);
        int shapes[][2] = {{576, 512}, {512, 512}, {96, 64}, {33, 20}, {2, 1}, {40, 40}};
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            test_pack(t, scalar, &r, shapes[i][0], shapes[i][1]);
        int dots[][4] = {{128, 200, 576, 512}, {13, 37, 96, 64}, {1, 1, 2, 1}, {7, 16, 33, 20}, {9, 97, 576, 512}};
        for (size_t i = 0; i < sizeof dots / sizeof dots[0]; i++)
            test_dots(t, &r, dots[i][0], dots[i][1], dots[i][2], dots[i][3]);
        int rows[][3] = {{1, 1, 1},   {8, 37, 1536}, {16, 9, 100},   {5, 4, 64},
                         {3, 6, 33},  {13, 5, 130},  {2, 8, 4096},   {9, 300, 301}, /* lanes: 3 groups, 2 pair blocks */
                         {16, 129, 520}};
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
            test_rowdot(t, &r, rows[i][0], rows[i][1], rows[i][2]);
        for (int M = 1; M <= 16; M++) /* every row count of the row-dot path; odd N and K, tails of every length */
            test_rowdot(t, &r, M, 2 * M + 1 + (M % 4 == 0 ? 8 : 0), 977 + 2 * M);
        int pools[][2] = {{1, 64}, {8, 512}, {4, 65}, {128, 512}, {255, 100}, {3, 7}, {2, 1}};
        for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++)
            test_pool(t, &r, pools[i][0], pools[i][1]);
        double g = 0;
        tu_check(dsops_measure_peak((dsops_isa)isa, DSOPS_PEAK_BF16_DOT, 0.1, &g) == DSOPS_OK && g > 0,
                 "%s bf16 peak probe returned %g", dsops_isa_name((dsops_isa)isa), g);
        tu_check(dsops_measure_peak((dsops_isa)isa, DSOPS_PEAK_INT8_DOT, 0.1, &g) == DSOPS_OK && g > 0,
                 "%s int8 peak probe returned %g", dsops_isa_name((dsops_isa)isa), g);
        tu_check(dsops_measure_peak((dsops_isa)isa, DSOPS_PEAK_FP32_FMA, 0.1, &g) == DSOPS_OK && g > 0,
                 "%s fp32 peak probe returned %g", dsops_isa_name((dsops_isa)isa), g);
    }
    double g = 0;
    tu_check(dsops_measure_peak(DSOPS_ISA_SCALAR, DSOPS_PEAK_STREAM, 0.05, &g) == DSOPS_OK && g > 0,
             "memory stream probe returned %g (%s)", g, dsops_last_error());
    tu_check(dsops_measure_peak(DSOPS_ISA_SCALAR, (dsops_peak_kind)DSOPS_PEAK_KIND_COUNT, 0.02, &g) == DSOPS_ERR_PARAM &&
                 strstr(dsops_last_error(), "kind"),
             "an unknown peak kind is refused naming kind (%s)", dsops_last_error());
    return tu_finish();
}
