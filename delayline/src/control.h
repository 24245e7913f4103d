/* The control protocol: one text command per line, one reply line. */
#ifndef DELAYLINE_CONTROL_H
#define DELAYLINE_CONTROL_H

#include <stddef.h>
#include <stdint.h>

/* Largest accepted delay: 60 s, far beyond any emulated path, small enough to never overflow. */
#define DL_MAX_DELAY_US 60000000ULL

/* Largest accepted per-flow time bin: 60 s. */
#define DL_MAX_FLOW_BIN_US 60000000ULL

enum dl_command_kind { DL_CMD_SET, DL_CMD_STATS, DL_CMD_CLEAR, DL_CMD_FLUSH, DL_CMD_FLOWS, DL_CMD_FLOWSTATS };

struct dl_command {
	enum dl_command_kind kind;
	int has_ab, has_ba;
	uint64_t delay_ab_us, delay_ba_us;
	/* flows: which direction (0 = ab, 1 = ba), off, or the bin width to count in from now */
	int flow_dir, flows_off;
	uint64_t flow_bin_us;
};

/*
 * Parse one line (without its newline; a trailing '\r' is ignored). Returns 0, or -1 with a
 * reason written to err.
 */
int dl_parse_command(const char *line, struct dl_command *cmd, char *err, size_t errlen);

/* Parse a decimal integer in [0, max] that makes up the whole string. 0 on success, -1 otherwise. */
int dl_parse_u64(const char *text, uint64_t max, uint64_t *out);

#endif
