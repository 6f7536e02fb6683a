/*
 * Small helpers shared by the fuzz targets: failing loudly, a private working folder per process, byte sinks.
 * Header-only (static functions) so that each target stays one translation unit plus this file.
 */
#ifndef DSOPS_FUZZ_COMMON_H
#define DSOPS_FUZZ_COMMON_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <dirent.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<sanitizer/common_interface_defs.h>)
#include <sanitizer/common_interface_defs.h>
#define FUZZ_HAVE_SANITIZER_REPORT 1
#endif
#endif

/* A broken property: the message, then abort() so that libFuzzer keeps the input as a crash. The message also
 * goes through the sanitizers' report channel, which stays open under -close_fd_mask (stderr does not). */
static void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn, unused));
static void fuzz_fail(const char *fmt, ...)
{
    char message[1024] = "dsops fuzz: ";
    size_t used = strlen(message);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message + used, sizeof message - used, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n%s\n", message);
#ifdef FUZZ_HAVE_SANITIZER_REPORT
    __sanitizer_report_error_summary(message);
#endif
    abort();
}

/* Keeps a value alive so that reads done only for the sanitizers are not optimised away. */
static volatile unsigned fuzz_sink_value;
static void __attribute__((unused)) fuzz_sink(unsigned v) { fuzz_sink_value += v; }

static char fuzz_dir_to_clean[512];

/* Removes every plain entry of `dir` (the targets create files only, never folders). */
static void __attribute__((unused)) fuzz_empty_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}

static void fuzz_remove_work_dir(void)
{
    if (fuzz_dir_to_clean[0]) {
        fuzz_empty_dir(fuzz_dir_to_clean);
        rmdir(fuzz_dir_to_clean);
    }
}

/* A new private folder for this process's files: under $TMPDIR if set, else /dev/shm (files there cost no disk
 * writes and fsync is free), else /tmp. Removed with its files when the process exits normally. */
static void __attribute__((unused)) fuzz_make_work_dir(char *out, size_t cap, const char *prefix)
{
    const char *base = getenv("TMPDIR");
    struct stat sb;
    if (base == NULL || base[0] == '\0')
        base = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(out, cap, "%s/%s_XXXXXX", base, prefix);
    if (mkdtemp(out) == NULL) {
        perror(out);
        exit(1);
    }
    snprintf(fuzz_dir_to_clean, sizeof fuzz_dir_to_clean, "%s", out);
    atexit(fuzz_remove_work_dir);
}

/* True when the file at `path` holds exactly the n bytes at `bytes`. */
static bool __attribute__((unused)) fuzz_file_is(const char *path, const unsigned char *bytes, size_t n)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        return false;
    size_t k = 0;
    bool same = true;
    for (int c; same && (c = fgetc(fp)) != EOF; k++)
        same = k < n && (unsigned char)c == bytes[k];
    fclose(fp);
    return same && k == n;
}

/* True when both files exist and hold the same bytes. */
static bool __attribute__((unused)) fuzz_same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa != NULL && fb != NULL;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        same = ca == cb;
        if (ca == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

#endif /* DSOPS_FUZZ_COMMON_H */
