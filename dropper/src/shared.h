/* Shared between the BPF program (fecdrop.bpf.c) and every file of its loader: configuration, counters, records, the hash.
 *
 * The verdict of the i-th matching packet of a stream is D[i], a pure function of
 * (model, seed, stream, i): see fecdrop_hash(), the models in models/ (registered in models.h) and
 * the Python models in fecbench/dropper/models/, which must stay bit-identical to them. */
#ifndef FECDROP_SHARED_H
#define FECDROP_SHARED_H

/* A model's parameters: up to FD_MODEL_PARAMS 32-bit thresholds, named and ordered by its file in
 * models/ (registered in models.h). */
#define FD_MODEL_PARAMS 4

/* Decision table (trace bitmap, or the pre-generated Gilbert-Elliott sequence): 2^24 packets. */
#define FD_TABLE_BITS 24
#define FD_TABLE_PACKETS (1ULL << FD_TABLE_BITS)
#define FD_TABLE_WORDS (FD_TABLE_PACKETS / 64)

#define FD_FILTER_PROTO 1
#define FD_FILTER_PORT 2
#define FD_FILTER_SRC 4
#define FD_FILTER_DST 8

/* Configuration and the shared packet index, in the program's .bss (mmapped by the loader). */
struct fd_config {
	__u32 model;
	__u32 log;          /* 1: write (index, verdict, state, length) to the ring buffer */
	__u64 key;          /* fecdrop_key(seed, stream) */
	__u64 seed, stream; /* kept for `stats` */
	__u64 t[FD_MODEL_PARAMS]; /* the model's thresholds in [0, 2^32] ("event when u < t"), see models/ */
	__u64 table_len;    /* packets covered by the decision table */
	__u64 chain_state0; /* chained models: chain state and loss-run length at index table_len (for resets) */
	__u64 chain_run0;
	/* filter */
	__u32 filter_flags;
	__u32 filter_proto;
	__u32 filter_port;
	__u32 filter_family; /* 4 or 6 when an address is given */
	__u8 filter_src[16];
	__u8 filter_dst[16];
	/* per-flow counters (fecbench's competing flows): off when 0 */
	__u32 flows;
	__u32 flow_pad;
	__u64 flow_t0;      /* CLOCK_MONOTONIC ns when counting started (bin 0) */
	__u64 flow_bin_ns;  /* width of a time bin */
	/* Frames shorter than this (skb->len: IP packet and Ethernet header) pass untouched without an index, so
	 * ACK-only and probe packets whose number follows the timing do not shift which data packet the i-th
	 * verdict hits; 0: every packet takes one (set with the model: --min-len) */
	__u32 min_len;
	__u32 min_len_pad;
};

/* Per-flow counters, by time bin: what each flow (transport protocol and ports, as seen in this
 * direction) sent through the link and lost to the model, so that competing flows' shares over time and
 * their drops are known per flow. An ICMP error counts under the flow whose packet it quotes (its protocol
 * stays ICMP's). Only counted when cfg.flows is set. */
#define FD_FLOW_ENTRIES 16384

struct fd_flow_key {
	__u8 proto;
	__u8 pad;
	__u16 sport; /* host order */
	__u16 dport;
	__u16 pad2;
	__u32 bin;   /* (arrival - flow_t0) / flow_bin_ns */
};

struct fd_flow_count {
	__u64 packets;
	__u64 bytes;
	__u64 dropped;
};

/* Per-CPU counters of rare events; the loader sums them. Whatever follows from the index and the
 * deterministic sequence is derived by the loader instead: matched = index, seen = index + nonip +
 * unmatched, and dropped, bursts, longest burst and GE states over [0, index). */
struct fd_stats {
	__u64 nonip;     /* non-IP frames (always passed, never counted as matched) */
	__u64 unmatched; /* IP packets the filter (or min_len) let through untouched */
	__u64 gso;       /* skbs with gso_segs > 1 (one verdict would hit several wire packets) */
	__u64 log_lost;  /* verdict records the full ring buffer could not take */
	__u64 flow_lost; /* packets not counted per flow: the flow table was full */
};

/* A chained model's sequence beyond the decision table (Gilbert-Elliott), advanced under a lock. */
struct fd_chain {
	struct bpf_spin_lock lock;
	__u32 state;      /* 0 Good, 1 Bad: state of packet `next` */
	__u64 next;       /* index of the next packet served by the chain */
	__u64 run;        /* length of the loss run ending at next - 1 */
	__u64 longest;    /* longest loss run seen by the chain */
	__u64 bad;        /* packets the chain served in state Bad */
	__u64 dropped;    /* packets the chain dropped */
	__u64 bursts;     /* loss runs the chain started */
};

struct fd_record {
	__u64 index;
	__u8 verdict; /* 1 = dropped */
	__u8 state;   /* GE state (0 Good, 1 Bad); 0 for other models */
	__u16 pad;
	__u32 len;
};

#define FD_GOLDEN 0x9e3779b97f4a7c15ULL

static inline __u64 fecdrop_mix64(__u64 z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Per-instance key; any seed (0 included) and stream give a well-mixed key. */
static inline __u64 fecdrop_key(__u64 seed, __u64 stream)
{
	return fecdrop_mix64(fecdrop_mix64(seed ^ 0x6a09e667f3bcc909ULL) ^ stream);
}

/* 64 random bits for packet `index`: high 32 bits decide the verdict, low 32 the GE transition. */
static inline __u64 fecdrop_hash(__u64 key, __u64 index)
{
	return fecdrop_mix64(key + (index + 1) * FD_GOLDEN);
}

#endif
