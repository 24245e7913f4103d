/* The loss models computed sequentially in user space: the tables the loader hands to the kernel and
 * the reference its verdicts are checked against. The same definition as fecdrop.bpf.c and
 * fecbench/dropper/model.py (numpy); pure C, no kernel needed. */
#ifndef FECDROP_MODEL_H
#define FECDROP_MODEL_H

#include <linux/bpf.h> /* struct bpf_spin_lock, used by fecdrop.h */
#include <linux/types.h>

#include "fecdrop.h"

/* A zeroed bitmap of FD_TABLE_PACKETS bits (a decision table). */
__u64 *alloc_table(void);

/* Bit i of a table. */
static inline int table_has(const __u64 *t, __u64 i)
{
	return (t[i >> 6] >> (i & 63)) & 1;
}

/* Fill the configuration's key, table length and chain state, and the tables behind it: the drop and
 * state bits of the Gilbert-Elliott chain over [0, table_len), or the trace bitmap read from `trace`
 * (little-endian u64 indices; table_len 0: last index + 1). */
void prepare_model(struct fd_config *c, const char *trace, __u64 table_len, __u64 *drop, __u64 *state);

/* D[i] under a prepared configuration, for an index the table covers (GE, trace) or any index (none,
 * uniform). */
int model_verdict(const struct fd_config *c, const __u64 *drop, __u64 i);

/* Dropped packets, loss runs and the longest run of the sequence over [0, n). */
void sequence_stats(const struct fd_config *c, const __u64 *drop, __u64 n, __u64 *dropped, __u64 *bursts,
		    __u64 *longest);

/* Set bits among the first n of a bitmap. */
__u64 popcount_prefix(const __u64 *bits, __u64 n);

/* "none", "uniform", "gilbert-elliott", "trace" */
const char *model_name(__u32 m);

#endif
