/* The control protocol: one text command per line, one reply line. */
#ifndef DELAYLINE_CONTROL_H
#define DELAYLINE_CONTROL_H

#include <stddef.h>
#include <stdint.h>

/* Largest accepted delay: 60 s, far beyond any emulated path, small enough to never overflow. */
#define DL_MAX_DELAY_US 60000000ULL

/* Largest accepted per-flow time bin: 60 s. */
#define DL_MAX_FLOW_BIN_US 60000000ULL

/* Largest trace offset and queue limit accepted (a trace's offset: ~11.6 days; a queue: 2^32 packets or bytes). */
#define DL_MAX_TRACE_OFFSET_MS 1000000000ULL
#define DL_MAX_TRACE_LIMIT 4294967295ULL

enum dl_command_kind { DL_CMD_SET, DL_CMD_STATS, DL_CMD_CLEAR, DL_CMD_FLUSH, DL_CMD_FLOWS, DL_CMD_FLOWSTATS, DL_CMD_TRACE,
		       DL_CMD_DELAYS, DL_CMD_TRACEIDLE };
/* trace ab|ba file=PATH [packets=N | bytes=N] [offset_ms=N]; trace ab|ba restart [offset_ms=N]; trace ab|ba off;
   delays: the same without a queue (a delay series, series.h) */
enum dl_trace_action { DL_TRACE_LOAD, DL_TRACE_RESTART, DL_TRACE_OFF };

struct dl_command {
	enum dl_command_kind kind;
	int has_ab, has_ba;
	uint64_t delay_ab_us, delay_ba_us;
	/* flows: which direction (0 = ab, 1 = ba), off, or the bin width to count in from now */
	int flow_dir, flows_off;
	uint64_t flow_bin_us;
	/* trace, delays: direction as flow_dir; the file, mm-link's queue (trace; 0 = unlimited), where to start */
	enum dl_trace_action trace_action;
	char trace_path[400];
	uint64_t trace_limit, trace_offset_ms;
	int trace_limit_in_bytes;
};

/*
 * Parse one line (without its newline; a trailing '\r' is ignored). Returns 0, or -1 with a
 * reason written to err.
 */
int dl_parse_command(const char *line, struct dl_command *cmd, char *err, size_t errlen);

/* Parse a decimal integer in [0, max] that makes up the whole string. 0 on success, -1 otherwise. */
int dl_parse_u64(const char *text, uint64_t max, uint64_t *out);

#endif
