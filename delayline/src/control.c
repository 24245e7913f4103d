#include "control.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dl_parse_u64(const char *text, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!isdigit((unsigned char)text[0]))
		return -1; /* strtoull would accept "-1", "+1" and leading spaces */
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

/* Copy the next space-separated word of *p into word (size n); returns its length, 0 at the end. */
static size_t next_word(const char **p, char *word, size_t n)
{
	const char *s = *p;
	size_t len = 0;

	while (*s == ' ' || *s == '\t')
		s++;
	while (*s && *s != ' ' && *s != '\t') {
		if (len + 1 < n)
			word[len] = *s;
		len++;
		s++;
	}
	word[len < n ? len : n - 1] = '\0';
	*p = s;
	return len;
}

/* The words after `trace`: a direction, then file=PATH with its queue and offset, restart [offset_ms=N], or off. */
static int parse_trace(const char *p, struct dl_command *cmd, enum dl_command_kind kind, char *err, size_t errlen)
{
	char word[512];
	int has_file = 0, has_queue = 0;
	const char *what = kind == DL_CMD_TRACE ? "trace" : "delays";

	cmd->kind = kind;
	if (!next_word(&p, word, sizeof(word)) || (strcmp(word, "ab") && strcmp(word, "ba"))) {
		snprintf(err, errlen, "%s needs a direction, ab or ba", what);
		return -1;
	}
	cmd->flow_dir = !strcmp(word, "ba");
	if (!next_word(&p, word, sizeof(word))) {
		snprintf(err, errlen, "%s %s needs file=PATH, restart or off", what, cmd->flow_dir ? "ba" : "ab");
		return -1;
	}
	cmd->trace_action = !strcmp(word, "off") ? DL_TRACE_OFF : !strcmp(word, "restart") ? DL_TRACE_RESTART
											   : DL_TRACE_LOAD;
	if (cmd->trace_action != DL_TRACE_LOAD)
		word[0] = '\0'; /* its first word was the action */
	do {
		uint64_t v;

		if (!word[0])
			continue;
		if (cmd->trace_action == DL_TRACE_LOAD && !strncmp(word, "file=", 5) && !has_file) {
			if (!word[5] || strlen(word + 5) >= sizeof(cmd->trace_path)) {
				snprintf(err, errlen, "%s: file= needs a path of at most %zu bytes", what,
					 sizeof(cmd->trace_path) - 1);
				return -1;
			}
			if (strpbrk(word + 5, "\"\\")) { /* the path goes into the JSON of `stats` as it is */
				snprintf(err, errlen, "%s: a path without quotes or backslashes, please", what);
				return -1;
			}
			strcpy(cmd->trace_path, word + 5);
			has_file = 1;
		} else if (cmd->trace_action == DL_TRACE_LOAD && !has_queue && kind == DL_CMD_TRACE &&
			   (!strncmp(word, "packets=", 8) || !strncmp(word, "bytes=", 6))) {
			cmd->trace_limit_in_bytes = word[0] == 'b';
			if (dl_parse_u64(strchr(word, '=') + 1, DL_MAX_TRACE_LIMIT, &v) < 0 || !v) {
				snprintf(err, errlen, "trace: %.64s: a queue of 1 to %llu", word, DL_MAX_TRACE_LIMIT);
				return -1;
			}
			cmd->trace_limit = v;
			has_queue = 1;
		} else if (cmd->trace_action != DL_TRACE_OFF && !strncmp(word, "offset_ms=", 10)) {
			if (dl_parse_u64(word + 10, DL_MAX_TRACE_OFFSET_MS, &v) < 0) {
				snprintf(err, errlen, "%s: offset_ms must be an integer from 0 to %llu", what,
					 DL_MAX_TRACE_OFFSET_MS);
				return -1;
			}
			cmd->trace_offset_ms = v;
		} else {
			snprintf(err, errlen, "%s: unexpected %.64s (%s ab|ba file=PATH%s [offset_ms=N], restart "
				 "[offset_ms=N], off)", what, word, what, kind == DL_CMD_TRACE ? " [packets=N|bytes=N]" : "");
			return -1;
		}
	} while (next_word(&p, word, sizeof(word)));
	if (cmd->trace_action == DL_TRACE_LOAD && !has_file) {
		snprintf(err, errlen, "%s: file=PATH, restart or off expected", what);
		return -1;
	}
	return 0;
}

int dl_parse_command(const char *line, struct dl_command *cmd, char *err, size_t errlen)
{
	char text[512], word[128];
	const char *p = text;
	size_t len = strlen(line);

	if (len >= sizeof(text)) {
		snprintf(err, errlen, "line too long");
		return -1;
	}
	memcpy(text, line, len + 1);
	if (len && text[len - 1] == '\r')
		text[len - 1] = '\0';
	memset(cmd, 0, sizeof(*cmd));

	if (!next_word(&p, word, sizeof(word))) {
		snprintf(err, errlen, "empty command (commands: set, stats, clear, flush, flows, flowstats, trace, delays)");
		return -1;
	}
	if (!strcmp(word, "stats") || !strcmp(word, "clear") || !strcmp(word, "flush") || !strcmp(word, "flowstats")) {
		enum dl_command_kind kind = !strcmp(word, "stats") ? DL_CMD_STATS
					    : !strcmp(word, "clear") ? DL_CMD_CLEAR
					    : !strcmp(word, "flush") ? DL_CMD_FLUSH : DL_CMD_FLOWSTATS;
		const char *name = kind == DL_CMD_STATS ? "stats" : kind == DL_CMD_CLEAR ? "clear"
				   : kind == DL_CMD_FLUSH ? "flush" : "flowstats";

		if (next_word(&p, word, sizeof(word))) {
			snprintf(err, errlen, "%s takes no arguments", name);
			return -1;
		}
		cmd->kind = kind;
		return 0;
	}
	if (!strcmp(word, "flows")) {
		/* flows ab|ba bin_us=N: count that direction's flows from now in bins of N µs; flows ab|ba off */
		uint64_t v;

		cmd->kind = DL_CMD_FLOWS;
		if (!next_word(&p, word, sizeof(word)) || (strcmp(word, "ab") && strcmp(word, "ba"))) {
			snprintf(err, errlen, "flows needs a direction, ab or ba");
			return -1;
		}
		cmd->flow_dir = !strcmp(word, "ba");
		if (!next_word(&p, word, sizeof(word))) {
			snprintf(err, errlen, "flows %s needs bin_us=N or off", cmd->flow_dir ? "ba" : "ab");
			return -1;
		}
		if (!strcmp(word, "off")) {
			cmd->flows_off = 1;
		} else if (strncmp(word, "bin_us=", 7) || dl_parse_u64(word + 7, DL_MAX_FLOW_BIN_US, &v) < 0 || !v) {
			snprintf(err, errlen, "flows: expected bin_us=N (1 to %llu) or off, got %.64s", DL_MAX_FLOW_BIN_US,
				 word);
			return -1;
		} else {
			cmd->flow_bin_us = v;
		}
		if (next_word(&p, word, sizeof(word))) {
			snprintf(err, errlen, "flows: unexpected %.64s", word);
			return -1;
		}
		return 0;
	}
	if (!strcmp(word, "traceidle")) {
		/* traceidle ab|ba: a trace link's idle opportunities per bin since its start */
		cmd->kind = DL_CMD_TRACEIDLE;
		if (next_word(&p, word, sizeof(word)))
			cmd->flow_dir = !strcmp(word, "ba");
		if ((strcmp(word, "ab") && strcmp(word, "ba")) || next_word(&p, word, sizeof(word))) {
			snprintf(err, errlen, "traceidle needs a direction, ab or ba, and nothing else");
			return -1;
		}
		return 0;
	}
	if (!strcmp(word, "trace") || !strcmp(word, "delays"))
		return parse_trace(p, cmd, word[0] == 't' ? DL_CMD_TRACE : DL_CMD_DELAYS, err, errlen);
	if (strcmp(word, "set")) {
		snprintf(err, errlen, "unknown command %.64s (commands: set, stats, clear, flush, flows, flowstats, trace, delays)",
			 word);
		return -1;
	}
	cmd->kind = DL_CMD_SET;
	while (next_word(&p, word, sizeof(word))) {
		char *eq = strchr(word, '=');
		uint64_t v;

		if (!eq) {
			snprintf(err, errlen, "expected key=value, got %.64s", word);
			return -1;
		}
		*eq = '\0';
		if (dl_parse_u64(eq + 1, DL_MAX_DELAY_US, &v) < 0) {
			snprintf(err, errlen, "%.32s must be an integer from 0 to %llu", word, DL_MAX_DELAY_US);
			return -1;
		}
		if (!strcmp(word, "delay_ab_us")) {
			cmd->has_ab = 1;
			cmd->delay_ab_us = v;
		} else if (!strcmp(word, "delay_ba_us")) {
			cmd->has_ba = 1;
			cmd->delay_ba_us = v;
		} else {
			snprintf(err, errlen, "unknown key %.64s (keys: delay_ab_us, delay_ba_us)", word);
			return -1;
		}
	}
	if (!cmd->has_ab && !cmd->has_ba) {
		snprintf(err, errlen, "set needs delay_ab_us=N and/or delay_ba_us=N");
		return -1;
	}
	return 0;
}
