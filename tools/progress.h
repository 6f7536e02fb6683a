/* Progress of a long `dsops bench` run, on standard error: which case runs, what it is doing, how far along
 * the run is and for how long; a phase that outlasts its budget says so while it runs (a watchdog thread).
 * On a terminal one status line is redrawn in place; otherwise (a log) each phase is one line.
 * Standard output is left to the results: call progress_clear() before printing a result line. */
#ifndef DSOPS_TOOLS_PROGRESS_H
#define DSOPS_TOOLS_PROGRESS_H

/* Starts the clock and the watchdog for a run of `total` cases; quiet = 1 prints nothing. */
void progress_start(int total, int quiet);
/* Case `index` (0-based) of the run begins. */
void progress_case(int index, const char *name);
/* The current case now does `what` (e.g. "timing at 2 threads"), expected to take at most budget_s seconds. */
void progress_phase(const char *what, double budget_s);
/* The current phase, now understood better (e.g. after a first timed call), is expected to take budget_s seconds
 * from its start. */
void progress_budget(double budget_s);
/* Removes the status line from a terminal (before a result line on standard output). */
void progress_clear(void);
/* Seconds since progress_start. */
double progress_elapsed(void);
/* Stops the watchdog and clears the status line. */
void progress_stop(void);

#endif
