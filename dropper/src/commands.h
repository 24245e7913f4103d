/* The loader's command line: parsed options (fecdrop.c) and the commands it dispatches to, each
 * implemented in the file of its concept. */
#ifndef FECDROP_COMMANDS_H
#define FECDROP_COMMANDS_H

#include <linux/bpf.h> /* struct bpf_spin_lock, used by shared.h */
#include <linux/types.h>

#include "shared.h"

struct options {
	const char *cmd, *dev, *pin, *netns, *out, *trace;
	int egress, threads, log_bytes, hook;
	__u32 handle;
	__u64 packets, repeat;
	int have_model;
	struct fd_config cfg;
	__u64 table_len;
};

/* attach.c: hooks (tcx link or clsact filter) */
void cmd_attach(struct options *o);
void cmd_detach(struct options *o);
void cmd_hooks(struct options *o);
void cmd_probe(void);

/* loader.c: a pinned instance */
void cmd_set(struct options *o);
void cmd_reset(struct options *o);
void cmd_stats(struct options *o);
void cmd_flows(struct options *o);
void cmd_log(struct options *o);

/* model.c: the sequential model, no kernel */
void cmd_reference(struct options *o);

/* verify.c, bench.c, selftest.c: the program without a network */
void cmd_testrun(struct options *o);
void cmd_bench(struct options *o);
int cmd_selftest(void);

#endif
