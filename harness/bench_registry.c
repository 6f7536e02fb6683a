/* The benchmark registry (bench_registry.h): one array of the operator families (bench_family.h, one
 * harness/<family>.c each) and the generic functions that loop over it, for the tool and the tests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_family.h"
#include "cases_internal.h"

/* Every family, in the order of docs/CASES.md (the order of `dsops bench --list`). */
static const bench_family *const families[] = {
    &bench_family_sparse_flash_attention_v32,
    &bench_family_lightning_indexer,
    &bench_family_mla_prolog_v32,
    &bench_family_indexer_prolog_v32,
    &bench_family_sparse_attention_v32,
    /* DeepSeek-V4 */
    &bench_family_hc_pre,
    &bench_family_hc_post,
    &bench_family_mla_prolog_v4,
    &bench_family_indexer_prolog_v4,
    &bench_family_compressor,
    &bench_family_sas,
};

int bench_all_cases(bench_case_ref *out, int cap)
{
    int n = 0;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        const bench_family *fam = families[f];
        int count;
        const char *table = fam->cases(&count);
        for (int i = 0; i < count && n < cap; i++) {
            const char *entry = table + (size_t)i * fam->case_size;
            const char *name;
            int ci;
            memcpy(&name, entry, sizeof name); /* every case entry starts with its name */
            memcpy(&ci, entry + fam->ci_offset, sizeof ci);
            out[n++] = (bench_case_ref){.name = name, .ci = ci, .family = fam, .entry = entry};
        }
    }
    return n;
}

const char *bench_case_op(const bench_case_ref *c) { return c->family->op; }

int bench_make_problem(const bench_case_ref *c, bench_problem *bp, char *why, size_t cap)
{
    memset(bp, 0, sizeof *bp);
    return c->family->make_problem(c->entry, bp, why, cap);
}

void bench_case_vendor(const bench_case_ref *c, double *us, const char **label)
{
    *us = 0.0;
    *label = NULL;
    if (c->family->vendor)
        c->family->vendor(c->entry, us, label);
}

void bench_case_words(const bench_case_ref *c, char *op, size_t oc, char *sh, size_t sc, char *family, size_t fc)
{
    snprintf(family, fc, "%s", c->family->table_word);
    c->family->words(c->entry, op, oc, sh, sc);
}

void bench_list_case(const bench_case_ref *c) { c->family->list_line(c->entry, c->ci ? "" : "  (not in CI)"); }

int bench_op_selects(const char *what, const bench_case_ref *c)
{
    return !strcmp(what, c->family->op) || (c->family->selects && c->family->selects(what, c->entry));
}

void bench_case_note(const bench_case_ref *c, const bench_problem *bp, char *note, size_t cap)
{
    note[0] = 0;
    if (c->family->note)
        c->family->note(bp, note, cap);
}
