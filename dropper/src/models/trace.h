/* trace(indices): D[i] = bit i of the decision table, read from a file of little-endian u64 indices
 * (no lock; past the trace's length nothing is dropped). */
#ifndef FECDROP_MODEL_TRACE_H
#define FECDROP_MODEL_TRACE_H

#ifdef __bpf__
static __always_inline int trace_drop(__u64 *index, __u32 *state)
{
	return *index < cfg.table_len && table_bit(&table_drop, *index);
}
#else
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "die.h"

static inline void trace_prepare(struct fd_config *c, const char *trace, __u64 table_len, __u64 *drop,
				 __u64 *state)
{
	FILE *f;
	__u64 idx, max = 0;
	int any = 0;

	if (!trace)
		die(2, "the trace model needs --trace FILE");
	f = fopen(trace, "rb");
	if (!f)
		die(2, "cannot read trace file %s: %s", trace, strerror(errno));
	memset(drop, 0, FD_TABLE_WORDS * sizeof(__u64));
	while (fread(&idx, sizeof(idx), 1, f) == 1) {
		if (idx >= FD_TABLE_PACKETS)
			die(2, "trace index %llu is beyond the table (%llu packets)", idx, FD_TABLE_PACKETS);
		drop[idx >> 6] |= 1ULL << (idx & 63);
		if (idx + 1 > max)
			max = idx + 1;
		any = 1;
	}
	fclose(f);
	if (table_len == 0)
		table_len = any ? max : 0; /* no length given: last index + 1 */
	if (table_len < max)
		die(2, "trace length %llu is shorter than its last index + 1 (%llu)", table_len, max);
	c->table_len = table_len;
}

static inline const struct fd_model *trace_model(void)
{
	static const struct fd_model m = {
		.name = "trace", .option = "trace", .prepare = trace_prepare, .verdict = table_verdict,
	};

	return &m;
}
#endif

#endif
