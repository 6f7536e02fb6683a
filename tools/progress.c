/* Progress lines of `dsops bench` (see progress.h). */
#include "progress.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct {
    pthread_mutex_t lock;
    pthread_t watchdog;
    int running, quiet, tty, total, index, shown; /* shown: a status line is on the terminal */
    char name[96], what[96];
    double t0, phase_t0, budget, next_warning;
} pr = {.lock = PTHREAD_MUTEX_INITIALIZER};

static double clock_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The status text; caller holds the lock. */
static void print_status(const char *extra)
{
    const double el = clock_now() - pr.t0;
    if (pr.tty)
        fputs("\r\033[K", stderr);
    fprintf(stderr, "[%2d/%d %2d:%02d] %s: %s%s", pr.index + 1, pr.total, (int)el / 60, (int)el % 60, pr.name,
            pr.what, extra ? extra : "");
    if (pr.tty) {
        pr.shown = 1;
    } else {
        fputc('\n', stderr);
    }
    fflush(stderr);
}

static void *watch(void *unused)
{
    (void)unused;
    for (;;) {
        nanosleep(&(struct timespec){0, 250000000L}, NULL);
        pthread_mutex_lock(&pr.lock);
        if (!pr.running) {
            pthread_mutex_unlock(&pr.lock);
            return NULL;
        }
        const double now = clock_now(), in_phase = now - pr.phase_t0;
        if (pr.what[0] && in_phase > pr.budget && now >= pr.next_warning) {
            char extra[96];
            snprintf(extra, sizeof extra, " -- still running after %.0f s (over its %.0f s budget)", in_phase,
                     pr.budget);
            if (pr.tty) { /* keep the warning on screen: end the line */
                print_status(extra);
                fputc('\n', stderr);
                pr.shown = 0;
            } else {
                print_status(extra);
            }
            pr.next_warning = now + 15.0;
        } else if (pr.tty && pr.shown) {
            print_status(NULL); /* the clock moves */
        }
        pthread_mutex_unlock(&pr.lock);
    }
}

void progress_start(int total, int quiet)
{
    pthread_mutex_lock(&pr.lock);
    pr.quiet = quiet;
    pr.tty = isatty(2);
    pr.total = total;
    pr.index = 0;
    pr.t0 = clock_now();
    pr.what[0] = pr.name[0] = 0;
    if (!quiet && !pr.running && pthread_create(&pr.watchdog, NULL, watch, NULL) == 0)
        pr.running = 1;
    pthread_mutex_unlock(&pr.lock);
}

void progress_case(int index, const char *name)
{
    pthread_mutex_lock(&pr.lock);
    pr.index = index;
    snprintf(pr.name, sizeof pr.name, "%s", name);
    pr.what[0] = 0;
    pthread_mutex_unlock(&pr.lock);
}

void progress_phase(const char *what, double budget_s)
{
    pthread_mutex_lock(&pr.lock);
    snprintf(pr.what, sizeof pr.what, "%s", what);
    pr.phase_t0 = clock_now();
    pr.budget = budget_s;
    pr.next_warning = 0.0;
    if (!pr.quiet)
        print_status(NULL);
    pthread_mutex_unlock(&pr.lock);
}

void progress_budget(double budget_s)
{
    pthread_mutex_lock(&pr.lock);
    pr.budget = budget_s;
    pthread_mutex_unlock(&pr.lock);
}

void progress_clear(void)
{
    pthread_mutex_lock(&pr.lock);
    if (pr.tty && pr.shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        pr.shown = 0;
    }
    pthread_mutex_unlock(&pr.lock);
}

double progress_elapsed(void) { return clock_now() - pr.t0; }

void progress_stop(void)
{
    pthread_mutex_lock(&pr.lock);
    int was = pr.running;
    pr.running = 0;
    pthread_mutex_unlock(&pr.lock);
    if (was)
        pthread_join(pr.watchdog, NULL);
    progress_clear();
}
