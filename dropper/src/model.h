/* The loss models in user space: the tables the loader hands to the kernel and the sequential reference
 * its verdicts are checked against, each model's part in its file under models/ (registered in models.h);
 * pure C, no kernel needed. */
#ifndef FECDROP_MODEL_H
#define FECDROP_MODEL_H

#include <linux/bpf.h> /* struct bpf_spin_lock, used by shared.h */
#include <linux/types.h>

#include "shared.h"

/* What the loader knows of a model. */
struct fd_model {
	const char *name;                    /* as stats print it and fecbench records it */
	const char *option;                  /* fecdrop --model */
	const char *params[FD_MODEL_PARAMS]; /* threshold names, in cfg.t order (NULL: unused) */
	__u64 defaults[FD_MODEL_PARAMS];     /* thresholds when --t NAME=T is not given */
	__u64 example[FD_MODEL_PARAMS];      /* the thresholds `bench` and `selftest` use */
	__u64 default_table_len;             /* --table-len when not given (trace: 0 = last index + 1) */
	int chained;                         /* past its table the kernel's locked chain goes on, with states */
	/* Fill the decision table (and state table) and cfg's table_len and chain state; NULL: no table. */
	void (*prepare)(struct fd_config *c, const char *trace, __u64 table_len, __u64 *drop, __u64 *state);
	/* D[i] for a prepared configuration, for an index its table covers (or any, without a table). */
	int (*verdict)(const struct fd_config *c, const __u64 *drop, __u64 i);
};

/* D[i] of a model whose table holds its verdicts (a trace, a pre-generated chain): bit i, nothing past it. */
static inline int table_verdict(const struct fd_config *c, const __u64 *drop, __u64 i)
{
	return i < c->table_len && ((drop[i >> 6] >> (i & 63)) & 1);
}

#include "models.h"

/* The model of cfg.model (exit 1 for an unknown id); the id `fecdrop --model NAME` names (exit 2). */
const struct fd_model *model_by_id(__u32 id);
__u32 model_id(const char *option);

/* A zeroed bitmap of FD_TABLE_PACKETS bits (a decision table). */
__u64 *alloc_table(void);

/* Fill the configuration's key, table length and chain state, and the tables behind it (the model's
 * prepare; `trace`: its file, for models read from one). */
void prepare_model(struct fd_config *c, const char *trace, __u64 table_len, __u64 *drop, __u64 *state);

/* D[i] under a prepared configuration. */
int model_verdict(const struct fd_config *c, const __u64 *drop, __u64 i);

/* Dropped packets, loss runs and the longest run of the sequence over [0, n). */
void sequence_stats(const struct fd_config *c, const __u64 *drop, __u64 n, __u64 *dropped, __u64 *bursts,
		    __u64 *longest);

/* Set bits among the first n of a bitmap. */
__u64 popcount_prefix(const __u64 *bits, __u64 n);

#endif
