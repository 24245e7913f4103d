/* Shared between the BPF program (schedlat.bpf.c) and its loader (schedlat.c), and read by
 * fecbench.timekeeping.schedlat, which checks the layout the loader prints (`schedlat layout`).
 *
 * What is measured, per slot (one slot per tracked cgroup: one network's endpoints): how long a
 * thread of the cgroup waited for a CPU once it could run.
 *   wake:    from its wake-up (sched_wakeup, sched_wakeup_new: a timer, a packet, a futex) to the
 *            context switch that put it on a CPU (as the well-known runqlat tool measures);
 *   preempt: from being switched out while still runnable (preempted) to running again.
 * Each kind: a log-linear histogram of the waits (8 buckets per power of two, from 1 µs up to 34 s),
 * their count, sum and maximum.
 * Both kinds: the first SL_SPANS waits of at least SL_SPAN_MIN_NS as [start, end] spans, and how many such
 * waits there were (more than SL_SPANS: not all kept). The harness takes the union of the spans' parts beyond
 * its bound: the time during which at least one thread of the group waited too long, which waits of several
 * threads at once count once (fecbench.timekeeping.endpoint_timing). */
#ifndef SCHEDLAT_H
#define SCHEDLAT_H

#define SL_SLOTS 256       /* cgroups tracked at once (networks of one fecbench process, their competing flows) */
#define SL_GROUPS 1024     /* entries of the cgroup id -> slot map */
#define SL_SUB_BITS 3
#define SL_SUB (1 << SL_SUB_BITS)
#define SL_MIN_SHIFT 10    /* waits below 2^10 ns share the first bucket */
#define SL_OCTAVES 25      /* 2^10 ns .. 2^35 ns (34 s): longer waits land in the last bucket */
#define SL_BUCKETS (SL_OCTAVES * SL_SUB)

#define SL_WAKE 0
#define SL_PREEMPT 1
#define SL_KINDS 2

#define SL_SPANS 1024
#define SL_SPAN_MIN_NS 1000000ULL   /* 1 ms: a bound below it is judged on the summed waits */

struct sl_span {
	__u64 start_ns;
	__u64 end_ns;
};

struct sl_hist {
	__u64 count;
	__u64 sum_ns;
	__u64 max_ns;
	__u64 pad;
	__u64 buckets[SL_BUCKETS];
};

struct sl_slot {
	struct sl_hist kind[SL_KINDS];
	__u64 spans_seen;   /* waits of at least SL_SPAN_MIN_NS, kept or not */
	__u64 pad;
	struct sl_span spans[SL_SPANS];
};

/* When a tracked thread became ready to run, and what it is counted as. */
struct sl_start {
	__u64 ns;
	__u32 slot;
	__u32 kind;
};

/* floor(log2(v)) for v > 0, without loops (the BPF verifier and the loader share it). */
static inline __attribute__((always_inline)) __u32 sl_log2(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

/* The bucket of a wait: octave m = floor(log2(ns)) and its next SL_SUB_BITS bits. Bucket b covers
 * [2^m + s * 2^(m-3), 2^m + (s+1) * 2^(m-3)) with m = b / 8 + 10, s = b % 8 (bucket 0 also below). */
static inline __attribute__((always_inline)) __u32 sl_bucket(__u64 ns)
{
	__u32 m, b;

	if (ns < (1ULL << SL_MIN_SHIFT))
		return 0;
	m = sl_log2(ns);
	b = (m - SL_MIN_SHIFT) * SL_SUB + (__u32)((ns >> (m - SL_SUB_BITS)) & (SL_SUB - 1));
	return b < SL_BUCKETS ? b : SL_BUCKETS - 1;
}

/* The upper edge (exclusive) of bucket b, in ns. */
static inline __attribute__((always_inline)) __u64 sl_upper_ns(__u32 b)
{
	__u32 m = b / SL_SUB + SL_MIN_SHIFT, s = b % SL_SUB;

	return (1ULL << m) + (__u64)(s + 1) * (1ULL << (m - SL_SUB_BITS));
}

#endif
