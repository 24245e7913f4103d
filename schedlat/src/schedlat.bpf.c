// SPDX-License-Identifier: GPL-2.0
/* schedlat: how long the threads of tracked cgroups waited for a CPU (schedlat.h says what is counted).
 *
 * Three programs on the scheduler's BTF tracepoints. sched_wakeup and sched_wakeup_new note when a thread
 * of a tracked cgroup became ready; sched_switch notes a tracked thread switched out while still
 * runnable (preempted) and, for the thread switched in, adds the time since it was noted to its slot's
 * histogram. A thread's cgroup is its cgroup in the unified (v2) hierarchy, which every kernel keeps,
 * whether cgroup v2 is the only hierarchy or mounted beside v1 controllers (fecbench.host.cgroups). */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "schedlat.h"

/* The kernel's types, only the fields read here: CO-RE relocates them against the running kernel's BTF. */
struct kernfs_node {
	__u64 id;
} __attribute__((preserve_access_index));

struct cgroup {
	struct kernfs_node *kn;
} __attribute__((preserve_access_index));

struct css_set {
	struct cgroup *dfl_cgrp;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	unsigned int __state;
	struct css_set *cgroups;
} __attribute__((preserve_access_index));

/* Before Linux 5.14 the state field was `long state`. */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

char LICENSE[] SEC("license") = "GPL";

/* cgroup id (the v2 cgroup directory's inode number) -> slot. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SL_GROUPS);
	__type(key, __u64);
	__type(value, __u32);
} groups SEC(".maps");

/* thread id -> when it became ready. LRU: a thread that exits while ready leaves no entry for long. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct sl_start);
} starts SEC(".maps");

/* The histograms, one slot per tracked cgroup; memory-mapped by the harness (read and cleared in place). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, SL_SLOTS);
	__type(key, __u32);
	__type(value, struct sl_slot);
} results SEC(".maps");

static __always_inline long task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return BPF_CORE_READ((struct task_struct___pre514 *)t, state);
}

static __always_inline void note_ready(struct task_struct *t, __u32 kind)
{
	__u64 id = BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
	__u32 *slot = bpf_map_lookup_elem(&groups, &id);
	struct sl_start start;
	__u32 tid;

	if (!slot)
		return;
	tid = BPF_CORE_READ(t, pid);
	start.ns = bpf_ktime_get_ns();
	start.slot = *slot;
	start.kind = kind;
	bpf_map_update_elem(&starts, &tid, &start, BPF_ANY);
}

static __always_inline void atomic_max(__u64 *where, __u64 value)
{
	for (int i = 0; i < 4; i++) {
		__u64 old = *where;

		if (value <= old || __sync_val_compare_and_swap(where, old, value) == old)
			return;
	}
}

/* A long wait's span, in the next free place (a place is taken once: writers on two CPUs never share one). */
static __always_inline void keep_span(struct sl_slot *slot, __u64 start_ns, __u64 end_ns)
{
	__u64 index = __sync_fetch_and_add(&slot->spans_seen, 1);

	if (index >= SL_SPANS)
		return;
	slot->spans[index].start_ns = start_ns;
	slot->spans[index].end_ns = end_ns;
}

static __always_inline void account(struct task_struct *t)
{
	__u32 tid = BPF_CORE_READ(t, pid);
	struct sl_start *start = bpf_map_lookup_elem(&starts, &tid);
	struct sl_slot *slot;
	struct sl_hist *hist;
	__u64 wait, start_ns;
	__u32 index, kind;

	if (!start)
		return;
	start_ns = start->ns;
	wait = bpf_ktime_get_ns() - start_ns;
	index = start->slot;
	kind = start->kind;
	bpf_map_delete_elem(&starts, &tid);
	slot = bpf_map_lookup_elem(&results, &index);
	if (!slot || kind >= SL_KINDS)
		return;
	hist = &slot->kind[kind];
	__sync_fetch_and_add(&hist->buckets[sl_bucket(wait)], 1);
	__sync_fetch_and_add(&hist->count, 1);
	__sync_fetch_and_add(&hist->sum_ns, wait);
	atomic_max(&hist->max_ns, wait);
	if (wait >= SL_SPAN_MIN_NS)
		keep_span(slot, start_ns, start_ns + wait);
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sl_wakeup, struct task_struct *p)
{
	note_ready(p, SL_WAKE);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sl_wakeup_new, struct task_struct *p)
{
	note_ready(p, SL_WAKE);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sl_switch, _Bool preempt, struct task_struct *prev, struct task_struct *next)
{
	if (task_state(prev) == 0) /* TASK_RUNNING: switched out while it could still run */
		note_ready(prev, SL_PREEMPT);
	account(next);
	return 0;
}
