/*
 * A delay series: a direction's one-way delay following a measured series instead of a constant (e.g. a
 * satellite path's latency steps at each reconfiguration). Text, one line per step: `OFFSET_MS DELAY_MS`, the
 * delay (ms, decimals allowed) holding from that offset until the next line's; offsets never go back, the first
 * is 0, and the last line's offset ends the series, which then loops (its delay is not used).
 *
 * A frame's delay is the one in force when it arrives. The direction stays a FIFO: a frame whose delay ended
 * before the frame ahead of it leaves right after that one (a shortening delay does not reorder), and that wait is
 * the series', not the emulation's error.
 */
#ifndef DELAYLINE_SERIES_H
#define DELAYLINE_SERIES_H

#include <stddef.h>
#include <stdint.h>

#define DL_SERIES_MAX_STEPS 50000000U

struct dl_series {
	uint32_t *offset_ms; /* nondecreasing, offset_ms[0] == 0 */
	uint64_t *delay_ns;
	uint32_t steps; /* lines, the last one ending the series */
	uint64_t period_ns;
	int64_t base_ns; /* CLOCK_MONOTONIC time of the series' offset 0 in loop 0 */
	uint64_t offset_ns, started_ns; /* where in the series the last (re)start began, and when */
};

/* Parse a series (text in memory; `name` for messages). 0, or -1 with the reason (naming the line) in err. */
int dl_series_parse(struct dl_series *s, const char *text, const char *name, char *err, size_t errlen);
/* Read a series file. 0, or -1 with the reason in err. */
int dl_series_load(struct dl_series *s, const char *path, char *err, size_t errlen);
void dl_series_free(struct dl_series *s);
/* Start (or restart) the series so that `offset_ns` into it is `now_ns`. */
void dl_series_start(struct dl_series *s, uint64_t now_ns, uint64_t offset_ns);
/* The delay in force at `at_ns`. */
uint64_t dl_series_delay_ns(const struct dl_series *s, uint64_t at_ns);
/* Whole loops completed at now_ns. */
uint64_t dl_series_loops(const struct dl_series *s, uint64_t now_ns);

/* Read a whole text file (NUL-terminated, freed by the caller). NULL with the reason in err. */
char *dl_read_text(const char *path, char *err, size_t errlen);

#endif
