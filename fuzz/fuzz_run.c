/*
 * Fuzz target: `dsops run`, its command line and its tensor handling, through the driver the tool calls
 * (dsops_cmd_run, harness/dsops_run.h). Every input must end in an exit code of the documented set (0 success,
 * 1 a library status, 2 usage, 3 input/output); nothing may fault.
 *
 * After the run, the working folder is checked: no temporary file is left behind; a failed run has written no
 * file and left IN as it was; a successful run's files are readable safetensors files.
 *
 * Input format (text, then optionally a file):
 *   ARG\nARG\n...            the arguments after `dsops run`, one per line (the first is the operator name);
 *                            "@IN", "@OUT" and "@DIR" inside an argument stand for the input file, the output
 *                            file and the working folder of this process
 *   \0ST\0<bytes>            optional: the bytes of the input file @IN (without it, @IN does not exist)
 * For example "rmsnorm\n--in\n@IN\n--out\n@OUT\n--set\neps=1e-5\0ST\0<a safetensors file>".
 *
 * Kept cheap and confined: inputs are skipped (not run) when an argument names a path with '/' (each input runs
 * with the process's own folder as the current one, so every file it may touch is there), when --threads asks for more than 4 threads,
 * or when a `topk` (from --set or from IN's metadata) exceeds 4096; contexts get 1 thread unless --threads says
 * otherwise. Tensors come from IN, so their sizes are bounded by the input's.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dsops.h"
#include "dsops_run.h"
#include "fuzz_common.h"
#include "safetensors.h"

#define RUN_MAX_ARGS 64
#define RUN_MAX_THREADS 4
#define RUN_MAX_TOPK 4096

static const char file_marker[4] = {'\0', 'S', 'T', '\0'};

static char work_dir[512], in_path[600], out_path[600];

static int home_fd = -1; /* the folder the process started in: libFuzzer's relative paths point there */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    /* before the library (and OpenMP) read them */
    setenv("DSOPS_NUM_THREADS", "1", 1);
    setenv("OMP_WAIT_POLICY", "passive", 1);
    unsetenv("DSOPS_ISA");
    fuzz_make_work_dir(work_dir, sizeof work_dir, "dsops_fuzz_run");
    snprintf(in_path, sizeof in_path, "%s/in.safetensors", work_dir);
    snprintf(out_path, sizeof out_path, "%s/out.safetensors", work_dir);
    home_fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (home_fd < 0) {
        perror("the current folder");
        exit(1);
    }
    /* Each input runs inside the working folder, so a crash is saved while the current folder is that one:
     * unless the command line says where, crash files go to the folder the process started in. */
    bool has_prefix = false;
    for (int i = 1; i < *argc; i++)
        has_prefix = has_prefix || !strncmp((*argv)[i], "-artifact_prefix=", 17) ||
                     !strncmp((*argv)[i], "-exact_artifact_path=", 21);
    static char prefix[4200];
    char cwd[4096];
    if (!has_prefix && getcwd(cwd, sizeof cwd) != NULL) {
        snprintf(prefix, sizeof prefix, "-artifact_prefix=%s/", cwd);
        char **with = calloc((size_t)*argc + 2, sizeof *with);
        if (with != NULL) {
            memcpy(with, *argv, (size_t)*argc * sizeof *with);
            with[(*argc)++] = prefix;
            *argv = with; /* kept for the life of the process, as libFuzzer reads it */
        }
    }
    return 0;
}

/* `token` with every "@IN", "@OUT" and "@DIR" replaced; NULL when out of memory. */
static char *expand(const char *token)
{
    size_t cap = strlen(token) * 4 + 3 * sizeof out_path + 1, n = 0;
    char *out = malloc(cap);
    if (out == NULL)
        return NULL;
    for (const char *p = token; *p;) {
        const char *with = NULL;
        size_t skip = 0;
        if (!strncmp(p, "@IN", 3))
            with = in_path, skip = 3;
        else if (!strncmp(p, "@OUT", 4))
            with = out_path, skip = 4;
        else if (!strncmp(p, "@DIR", 4))
            with = work_dir, skip = 4;
        if (with != NULL) {
            size_t w = strlen(with);
            if (n + w + 1 > cap)
                break;
            memcpy(out + n, with, w);
            n += w;
            p += skip;
        } else {
            if (n + 2 > cap)
                break;
            out[n++] = *p++;
        }
    }
    out[n] = '\0';
    return out;
}

/* A name the writer gives its temporaries in this process: ".<base>.dsops-tmp-<pid>-<attempt>" (safetensors.c). */
static bool is_temporary(const char *name)
{
    const char *marker = NULL;
    for (const char *p = strstr(name, ".dsops-tmp-"); p != NULL; p = strstr(p + 1, ".dsops-tmp-"))
        marker = p;
    if (name[0] != '.' || marker == NULL || marker == name)
        return false;
    char *end;
    long pid = strtol(marker + 11, &end, 10);
    if (pid != (long)getpid() || *end != '-' || end[1] < '0' || end[1] > '9')
        return false;
    strtol(end + 1, &end, 10);
    return *end == '\0';
}

/* The working folder after a run that ended with exit code rc; IN held `file` (NULL: there was no IN). */
static void check_folder(int rc, const uint8_t *file, size_t file_len)
{
    DIR *d = opendir(work_dir);
    if (d == NULL)
        fuzz_fail("cannot list %s", work_dir);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const char *name = e->d_name;
        if (!strcmp(name, ".") || !strcmp(name, ".."))
            continue;
        if (is_temporary(name))
            fuzz_fail("a temporary file was left behind: %s", name);
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", work_dir, name);
        const bool is_in = !strcmp(path, in_path);
        if (rc != 0 && !is_in)
            fuzz_fail("a failed run (exit code %d) left the file %s", rc, name);
        if (rc != 0 && is_in && (file == NULL || !fuzz_file_is(path, file, file_len)))
            fuzz_fail("a failed run (exit code %d) changed IN", rc);
        if (rc == 0 && !(is_in && file != NULL && fuzz_file_is(path, file, file_len))) {
            dsops_st_file *f = NULL;
            char err[DSOPS_ST_ERRLEN];
            if (dsops_st_open(path, &f, err, sizeof err) != 0)
                fuzz_fail("a successful run wrote %s, which the reader refuses: %s", name, err);
            dsops_st_close(f);
        }
    }
    closedir(d);
}

/* A --threads value or a topk that would make one execution slow (parsed as the driver parses them). */
static bool too_costly(const char *value, long limit)
{
    char *end;
    long v = strtol(value, &end, 10);
    return end != value && v > limit;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_empty_dir(work_dir);

    /* split at the file marker */
    size_t text_len = size;
    const uint8_t *file = NULL;
    size_t file_len = 0;
    for (size_t i = 0; i + sizeof file_marker <= size; i++)
        if (!memcmp(data + i, file_marker, sizeof file_marker)) {
            text_len = i;
            file = data + i + sizeof file_marker;
            file_len = size - i - sizeof file_marker;
            break;
        }

    /* the arguments: one per line */
    char *text = malloc(text_len + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, text_len);
    text[text_len] = '\0';
    char *raw[RUN_MAX_ARGS];
    int argc = 0;
    for (char *p = text; argc < RUN_MAX_ARGS && text_len > 0;) {
        raw[argc++] = p;
        char *nl = strchr(p, '\n');
        if (nl == NULL)
            break;
        *nl = '\0';
        p = nl + 1;
    }

    bool skip = false;
    for (int i = 0; i < argc && !skip; i++) {
        const char *a = raw[i];
        skip = strchr(a, '/') != NULL;
        if (!strcmp(a, "--threads") && i + 1 < argc)
            skip = skip || too_costly(raw[i + 1], RUN_MAX_THREADS);
        if (!strncmp(a, "--threads=", 10))
            skip = skip || too_costly(a + 10, RUN_MAX_THREADS);
        const char *k = strstr(a, "topk=");
        if (k != NULL)
            skip = skip || too_costly(k + 5, RUN_MAX_TOPK);
    }
    if (!skip && file != NULL) {
        dsops_st_file *in = NULL;
        if (dsops_st_open_memory(file, file_len, "IN", &in, NULL, 0) == 0) {
            const char *topk = dsops_st_metadata(in, "topk");
            skip = topk != NULL && too_costly(topk, RUN_MAX_TOPK);
            dsops_st_close(in);
        }
        FILE *fp = skip ? NULL : fopen(in_path, "wb");
        if (fp != NULL) {
            if (file_len > 0 && fwrite(file, 1, file_len, fp) != file_len)
                skip = true;
            fclose(fp);
        }
    }

    char *argv[RUN_MAX_ARGS + 1];
    int expanded = 0;
    for (; !skip && expanded < argc; expanded++)
        if ((argv[expanded] = expand(raw[expanded])) == NULL)
            skip = true;
    if (!skip) {
        argv[argc] = NULL;
        if (chdir(work_dir) != 0) /* relative names land in the working folder */
            fuzz_fail("cannot enter %s", work_dir);
        int rc = dsops_cmd_run(argc, argv, NULL);
        if (fchdir(home_fd) != 0)
            fuzz_fail("cannot return to the starting folder");
        if (rc < 0 || rc > 3)
            fuzz_fail("dsops run exited with %d, outside the documented 0 ... 3", rc);
        check_folder(rc, file, file_len);
    }
    for (int i = 0; i < expanded; i++)
        free(argv[i]);
    free(text);
    return 0;
}
