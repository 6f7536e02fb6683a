#include "test_util.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ref.h"

static const char *prog = "test";
static const char *filter = NULL;
static uint64_t seed = 42;
static int passed, failed, quick, verbose, replay_printed, list_only;

static int env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

void tu_init(int argc, char **argv, uint64_t default_seed)
{
    if (argc > 0 && argv[0])
        prog = argv[0];
    if (argc > 1 && argv[1] && *argv[1])
        filter = argv[1];
    seed = default_seed;
    const char *s = getenv("DSOPS_TEST_SEED");
    if (s && *s)
        seed = strtoull(s, NULL, 0);
    quick = env_flag("DSOPS_TEST_QUICK");
    verbose = env_flag("DSOPS_TEST_VERBOSE");
    list_only = env_flag("DSOPS_TEST_LIST");
    printf("%s: seed %" PRIu64 "%s%s%s\n", prog, seed, quick ? " (quick)" : "", filter ? ", filter " : "",
           filter ? filter : "");
    /* the tiers the tests compare with the oracles are the ones this CPU has; the others cannot run here */
    dsops_isa det = dsops_isa_detected();
    printf("tiers run:");
    for (int i = 0; i <= (int)det; i++)
        printf(" %s", dsops_isa_name((dsops_isa)i));
    printf("; skipped (the CPU lacks them):");
    for (int i = (int)det + 1; i < DSOPS_ISA_COUNT; i++)
        printf(" %s", dsops_isa_name((dsops_isa)i));
    printf("%s\n", (int)det + 1 < DSOPS_ISA_COUNT ? "" : " none");
}

uint64_t tu_seed(void) { return seed; }
int tu_quick(void) { return quick; }
int tu_verbose(void) { return verbose; }

/* 1 if `label` contains the n characters at f. */
static int contains(const char *label, const char *f, size_t n)
{
    for (const char *l = label; n > 0 && strlen(l) >= n; l++)
        if (strncmp(l, f, n) == 0)
            return 1;
    return 0;
}

int tu_selected(const char *label)
{
    if (list_only) {
        printf("label: %s\n", label ? label : "(none)");
        return 0;
    }
    if (!filter)
        return 1;
    if (!label)
        return 0;
    /* '|'-separated fragments: a label is selected when it contains none of the fragments written !fragment and,
     * if there are others, at least one of them */
    int includes = 0, included = 0;
    for (const char *f = filter; *f;) {
        const char *end = strchr(f, '|');
        size_t n = end ? (size_t)(end - f) : strlen(f);
        if (n > 1 && f[0] == '!') {
            if (contains(label, f + 1, n - 1))
                return 0;
        } else if (n > 0) {
            includes++;
            included |= contains(label, f, n);
        }
        if (!end)
            break;
        f = end + 1;
    }
    return includes == 0 || included;
}

int tu_check(int ok, const char *fmt, ...)
{
    if (ok) {
        passed++;
        return 1;
    }
    failed++;
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (!replay_printed) {
        replay_printed = 1;
        printf("      replay: DSOPS_TEST_SEED=%" PRIu64 "%s %s [label filter]\n", seed,
               quick ? " DSOPS_TEST_QUICK=1" : "", prog);
    }
    fflush(stdout);
    return 0;
}

int tu_finish(void)
{
    printf("%d passed, %d failed\n", passed, failed);
    fflush(stdout);
    return failed ? 1 : 0;
}

dsops_context *tu_context(void)
{
    dsops_context *ctx = NULL;
    if (dsops_context_create(&ctx) != DSOPS_OK) {
        printf("cannot create a context: %s\n", dsops_last_error());
        exit(1);
    }
    return ctx;
}

int tu_set_tier(dsops_context *ctx, dsops_isa isa)
{
    if (dsops_context_set_isa(ctx, isa) != DSOPS_OK)
        return 0;
    return tu_check(dsops_context_isa(ctx) == isa, "context tier %s not taken (got %s)", dsops_isa_name(isa),
                    dsops_isa_name(dsops_context_isa(ctx)));
}

uint64_t tu_label_seed(const char *label)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *c = label; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
    return h ^ seed;
}

dsops_context *tu_announced_context(void)
{
    dsops_context *ctx = tu_context();
    printf("tiers: scalar ... %s, threads %d\n", dsops_isa_name(dsops_isa_detected()), dsops_context_threads(ctx));
    return ctx;
}

int tu_next_tier(dsops_context *ctx, int *isa, const char *label, char *tier_label, size_t n)
{
    while (++*isa <= (int)dsops_isa_detected()) {
        if (!tu_set_tier(ctx, (dsops_isa)*isa))
            continue;
        snprintf(tier_label, n, "%s [%s]", label, dsops_isa_name((dsops_isa)*isa));
        return 1;
    }
    return 0;
}

double tu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- generator: splitmix64 --------------------------------------------------------------------- */

void tu_rng_seed(tu_rng *r, uint64_t s) { r->s = s; }

uint64_t tu_rng_u64(tu_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float tu_rng_uniform(tu_rng *r, float lo, float hi)
{
    float u = (float)(tu_rng_u64(r) >> 40) * (1.0f / 16777216.0f);
    float v = lo + (hi - lo) * u;
    return v < hi ? v : lo;
}

int64_t tu_rng_int(tu_rng *r, int64_t lo, int64_t hi)
{
    if (hi <= lo)
        return lo;
    uint64_t span = (uint64_t)(hi - lo) + 1;
    return lo + (int64_t)(tu_rng_u64(r) % span);
}

/* ---- number formats ------------------------------------------------------------------------------ */

/* The oracle's rounding (ref/, written from the spec), not the library's: test_core checks
 * dsops_fp32_to_bf16 against it. */
uint16_t tu_bf16(float f) { return dsops_ref_bf16_from_f32(f); }

float tu_f32(uint16_t h) { return dsops_ref_f32_from_bf16(h); }

float tu_round_bf16(float f) { return tu_f32(tu_bf16(f)); }

float *tu_widen_bf16(const uint16_t *h, size_t n)
{
    float *f = tu_calloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++)
        f[i] = tu_f32(h[i]);
    return f;
}

/* ---- compare_close ------------------------------------------------------------------------------- */

int tu_compare_close(const char *label, const float *out, const float *ref, size_t n, tu_tol tol, tu_cmp *res)
{
    tu_cmp c;
    memset(&c, 0, sizeof c);
    c.numel = n;
    c.allowed = (size_t)floor(tol.ratio * (double)n + 0.5);
    double sxy = 0.0, sxx_yy = 0.0;
    double worst_excess = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        double o = out[i], r = ref[i];
        int bad;
        double err, excess;
        if (!isfinite(o) || !isfinite(r)) {
            /* both NaN, or the same infinity */
            bad = !((isnan(o) && isnan(r)) || (isinf(o) && isinf(r) && (o > 0) == (r > 0)));
            err = bad ? INFINITY : 0.0;
            excess = bad ? INFINITY : -INFINITY;
        } else {
            err = fabs(o - r);
            double bound = tol.atol + tol.rtol * fabs(r);
            bad = err > bound;
            excess = err - bound;
            sxy += o * r;
            sxx_yy += o * o + r * r;
        }
        if (bad)
            c.fails++;
        if (excess > worst_excess || i == 0) {
            worst_excess = excess;
            c.worst = i;
            c.worst_out = o;
            c.worst_ref = r;
            c.worst_err = err;
        }
    }
    c.cos_diff = sxx_yy > 0.0 ? 1.0 - 2.0 * sxy / sxx_yy : 0.0;
    int ok = c.fails <= c.allowed;
    if (res)
        *res = c;
    if (verbose || !ok)
        printf("  %s %s: %zu/%zu elements beyond %g + %g|ref| (allowed %zu), cos diff %.3g, worst [%zu] out %.9g "
               "ref %.9g (|diff| %.3g)\n",
               ok ? "ok  " : "FAIL", label, c.fails, n, tol.atol, tol.rtol, c.allowed, c.cos_diff, c.worst,
               c.worst_out, c.worst_ref, c.worst_err);
    tu_check(ok, "%s: compare_close failed", label);
    return ok;
}

int tu_compare_close_part(const char *label, const char *part, const float *out, const float *ref, size_t n,
                          tu_tol tol)
{
    char name[400];
    snprintf(name, sizeof name, "%s %s", label, part);
    return tu_compare_close(name, out, ref, n, tol, NULL);
}

/* ---- validation tables --------------------------------------------------------------------------- */

int tu_has_fragment(const char *msg, const char *frag)
{
    if (!frag || !*frag)
        return 1;
    char alts[256];
    snprintf(alts, sizeof alts, "%s", frag);
    for (char *save = NULL, *a = strtok_r(alts, "|", &save); a; a = strtok_r(NULL, "|", &save))
        if (strstr(msg, a))
            return 1;
    return 0;
}

int tu_check_rejected(const char *name, dsops_status st, dsops_status want, const char *frag)
{
    const char *msg = dsops_last_error();
    tu_check(st == want, "%s: status %s, expected %s (message \"%s\")", name, dsops_status_name(st),
             dsops_status_name(want), msg);
    tu_check(st == DSOPS_OK || tu_has_fragment(msg, frag), "%s: message \"%s\" lacks \"%s\"", name, msg,
             frag ? frag : "");
    if (verbose)
        printf("  %-46s %s: %s\n", name, dsops_status_name(st), msg);
    return st != DSOPS_OK;
}

int tu_check_accepted(const char *name, dsops_status st)
{
    if (!tu_check(st == DSOPS_OK, "%s: status %s (%s), expected DSOPS_OK", name, dsops_status_name(st),
                  dsops_last_error()))
        return 0;
    tu_check(dsops_last_error()[0] == '\0', "%s: last error \"%s\" after a successful call", name, dsops_last_error());
    return 1;
}

void *tu_alloc(size_t n)
{
    const size_t size = n ? (n + 63) / 64 * 64 : 64; /* aligned_alloc wants a multiple of the alignment */
    void *p = aligned_alloc(64, size);
    if (!p) {
        printf("out of memory (%zu bytes)\n", n);
        exit(1);
    }
    memset(p, 0, size);
    return p;
}

void *tu_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        printf("out of memory (%zu x %zu bytes)\n", n, size);
        exit(1);
    }
    return p;
}

void *tu_memdup(const void *p, size_t n)
{
    void *q = tu_alloc(n);
    memcpy(q, p, n);
    return q;
}

int tu_check_unchanged(const char *name, const void *p, const void *before, size_t n, const char *why)
{
    const unsigned char *a = p, *b = before;
    size_t i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return tu_check(i == n, "%s: memory written %s (first changed byte: %zu of %zu)", name, why, i, n);
}

int64_t tu_first_difference(const void *a, const void *b, size_t n, size_t esz)
{
    const unsigned char *x = a, *y = b;
    for (size_t i = 0; i < n; i++)
        if (memcmp(x + i * esz, y + i * esz, esz) != 0)
            return (int64_t)i;
    return -1;
}

int tu_check_same_bytes(const char *label, const void *a, size_t na, const void *b, size_t nb, const char *what)
{
    if (na != nb)
        return tu_check(0, "%s: differs from %s (%zu bytes, expected %zu)", label, what, na, nb);
    const int64_t d = tu_first_difference(a, b, na, 1);
    return tu_check(d < 0, "%s: differs from %s (first differing byte %lld of %zu)", label, what, (long long)d, na);
}

void *tu_rebase(const void *p, const void *from, size_t n, void *to)
{
    const char *q = p, *b = from;
    if (!p || q < b || q >= b + n)
        return (void *)p;
    return (char *)to + (q - b);
}
