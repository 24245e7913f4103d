/* One dropper instance: the skeleton loaded, its maps mmapped or pinned, configured and read. */
#ifndef FECDROP_LOADER_H
#define FECDROP_LOADER_H

#include <stdio.h>
#include <linux/bpf.h> /* struct bpf_spin_lock, used by shared.h */
#include <linux/types.h>

#include "shared.h"

struct fecdrop_bpf;
struct fecdrop_bpf__bss;

#define PROG_NAME "fecdrop"

enum { HOOK_AUTO, HOOK_TCX, HOOK_CLSACT };

/* "auto", "tcx", "clsact" */
const char *hook_name(__u32 hook);

/* Where an instance is attached, pinned next to its maps (as "attach") so that any later process can
 * detach it: a clsact filter, unlike a tcx link, is not removed with its pins. */
struct fd_attach {
	__u32 hook;          /* HOOK_TCX or HOOK_CLSACT */
	__u32 egress;
	__u32 ifindex;
	__u32 handle;        /* clsact: the filter's handle and priority */
	__u32 priority;
	__u32 created_qdisc; /* clsact: this instance created the clsact qdisc */
	__u64 netns_dev, netns_ino; /* the namespace's identity (its path may outlive it, e.g. a PID) */
	char netns[256];     /* namespace path ("" = the loader's own) */
	char dev[16];
};

struct instance {
	struct fecdrop_bpf__bss *bss;
	size_t bss_size;
	__u64 *drop, *state;
	int stats_fd, chain_fd, log_fd, attach_fd; /* attach_fd: -1 when not attached (testrun, bench) */
	int flows_fd;
};

/* A fresh program (not attached), its verdict ring buffer log_bytes long (0: the object's size). */
struct fecdrop_bpf *load_skel(__u32 log_bytes);
void instance_from_skel(struct fecdrop_bpf *skel, struct instance *in);

/* The instance pinned in dir; exit 2 when there is none, or one of another build's layout. */
void open_pinned(const char *dir, struct instance *in);

/* The pinned object dir/name (exit 2 when absent). */
int pinned(const char *dir, const char *name);

/* Pin fd as dir/name; on failure remove the instance's pins and exit 1. */
void pin_or_die(int fd, const char *dir, const char *name);

/* Remove every pin of an instance, then its directory. */
void remove_pins(const char *dir);

/* Store the attachment record in the instance's "attach" map. */
void save_attach(int fd, const struct fd_attach *at);

/* Index 0, state Good (or the saved state at the end of the table), counters zero, no flow counted. */
void reset_stream(struct instance *in);

/* Write a model (cfg, its trace file and table length) into a live instance: tables first, then the
 * configuration, then the reset. keep_filter: keep the instance's filter and log setting. */
void configure(struct instance *in, const struct fd_config *cfg, const char *trace, __u64 table_len,
	       int keep_filter);

/* The instance's counters, as one line of JSON. */
void print_stats(struct instance *in);

/* The per-flow counters, as one line of JSON. */
void print_flows(struct instance *in);

/* Verdict records drained from a ring buffer: into a file, or one verdict byte per index. */
struct log_sink {
	FILE *f;
	__u8 *verdicts; /* testrun: verdict per index (0xff = not seen) */
	__u64 n, records, duplicates, out_of_range;
};

/* ring_buffer_sample_fn for a struct log_sink */
int on_record(void *ctx, void *data, size_t size);

#endif
