// SPDX-License-Identifier: GPL-2.0
/* fecbench's seeded packet dropper: a tc classifier, direct action, on a tcx link or a clsact
 * cls_bpf filter (the same program and return codes serve both hooks).
 *
 * Every IP packet that passes the filter gets the next stream index i (one atomic fetch-add) and the
 * verdict D[i] of the configured model, a pure function of (seed, stream, i): each model's kernel part
 * is its file in models/ (registered in models.h), dispatched on cfg.model below. */
/* UAPI headers, not vmlinux.h: no CO-RE relocations, so loading needs no kernel BTF parse (~10 ms) */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "shared.h"

/* Pass = TC_ACT_UNSPEC (cls_bpf) = TCX_NEXT (tcx): the hook's other filters and programs still run and
 * decide, and with none the packet passes. Drop = TC_ACT_SHOT = TCX_DROP. */
#define TC_PASS -1
#define TC_DROP 2

struct fd_config cfg = {};
__u64 next_index __attribute__((aligned(64))) = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, FD_TABLE_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} table_drop SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, FD_TABLE_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} table_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fd_stats);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fd_chain);
} chain SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* entries only for the flows and bins seen */
	__uint(max_entries, FD_FLOW_ENTRIES);
	__type(key, struct fd_flow_key);
	__type(value, struct fd_flow_count);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096); /* the loader resizes it when the verdict log is enabled */
} verdict_log SEC(".maps");

static __always_inline int table_bit(void *table, __u64 index)
{
	__u32 word = index >> 6;
	__u64 *bits = bpf_map_lookup_elem(table, &word);

	return bits ? (*bits >> (index & 63)) & 1 : 0;
}

static __always_inline int addr_equal(const __u8 *a, const __u8 *b, int len)
{
	for (int i = 0; i < 16; i++)
		if (i < len && a[i] != b[i])
			return 0;
	return 1;
}

/* Does the packet match the configured filter? Only called when a filter is set. */
static __noinline int filter_match(struct __sk_buff *skb, __u16 ethertype)
{
	__u8 src[16] = {}, dst[16] = {};
	__u32 l4_off, alen, family;
	__u8 proto;

	if (ethertype == ETH_P_IP) {
		struct iphdr ip;

		if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)))
			return 0;
		proto = ip.protocol;
		l4_off = ETH_HLEN + ip.ihl * 4;
		__builtin_memcpy(src, &ip.saddr, 4);
		__builtin_memcpy(dst, &ip.daddr, 4);
		alen = 4;
		family = 4;
		/* a non-first fragment carries no ports */
		if ((cfg.filter_flags & FD_FILTER_PORT) && (ip.frag_off & bpf_htons(0x1fff)))
			return 0;
	} else {
		struct ipv6hdr ip6;

		if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip6, sizeof(ip6)))
			return 0;
		proto = ip6.nexthdr;
		l4_off = ETH_HLEN + sizeof(ip6);
		__builtin_memcpy(src, &ip6.saddr, 16);
		__builtin_memcpy(dst, &ip6.daddr, 16);
		alen = 16;
		family = 6;
	}
	if ((cfg.filter_flags & FD_FILTER_PROTO) && proto != cfg.filter_proto)
		return 0;
	if (cfg.filter_flags & (FD_FILTER_SRC | FD_FILTER_DST)) {
		if (family != cfg.filter_family)
			return 0;
		if ((cfg.filter_flags & FD_FILTER_SRC) && !addr_equal(src, cfg.filter_src, alen))
			return 0;
		if ((cfg.filter_flags & FD_FILTER_DST) && !addr_equal(dst, cfg.filter_dst, alen))
			return 0;
	}
	if (cfg.filter_flags & FD_FILTER_PORT) {
		__be16 ports[2];

		if (proto != 6 && proto != 17 && proto != 132 && proto != 136)
			return 0; /* TCP, UDP, SCTP, UDP-Lite */
		if (bpf_skb_load_bytes(skb, l4_off, ports, sizeof(ports)))
			return 0;
		if (bpf_ntohs(ports[0]) != cfg.filter_port && bpf_ntohs(ports[1]) != cfg.filter_port)
			return 0;
	}
	return 1;
}

static __always_inline struct fd_stats *counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&stats, &zero);
}

/* The models' kernel parts: they see the configuration, the tables and the chain above. */
#include "models.h"

/* An ICMP or ICMPv6 error (destination unreachable, packet too big, time exceeded, parameter problem)
 * quotes the packet it reports: the ports of the flow it belongs to, read from the quote and swapped,
 * since the error travels back toward the quoted packet's sender (a flow's client that has exited
 * answers its server's last packets with port unreachable). The key is left as it is for any other packet. */
static __always_inline void quoted_ports(struct __sk_buff *skb, __u8 proto, __u32 l4_off, struct fd_flow_key *key)
{
	__u8 type, quoted_proto;
	__u32 quote_off = l4_off + 8; /* the quoted IP header follows the 8-byte ICMP header */
	__be16 ports[2];

	if (bpf_skb_load_bytes(skb, l4_off, &type, sizeof(type)))
		return;
	if (proto == 1 && (type == 3 || type == 11 || type == 12)) {
		struct iphdr ip;

		if (bpf_skb_load_bytes(skb, quote_off, &ip, sizeof(ip)))
			return;
		quoted_proto = ip.protocol;
		quote_off += ip.ihl * 4;
	} else if (proto == 58 && type >= 1 && type <= 4) {
		struct ipv6hdr ip6;

		if (bpf_skb_load_bytes(skb, quote_off, &ip6, sizeof(ip6)))
			return;
		quoted_proto = ip6.nexthdr;
		quote_off += sizeof(ip6);
	} else {
		return;
	}
	if ((quoted_proto != 6 && quoted_proto != 17) || bpf_skb_load_bytes(skb, quote_off, ports, sizeof(ports)))
		return;
	key->sport = bpf_ntohs(ports[1]);
	key->dport = bpf_ntohs(ports[0]);
}

/* Per-flow counters (cfg.flows): the packet's transport protocol and ports (an ICMP error's: those of the
 * flow it reports) and its time bin. Off the hot path of runs without competing flows. */
static __noinline void count_flow(struct __sk_buff *skb, __u16 ethertype, int drop)
{
	struct fd_flow_key key = {};
	struct fd_flow_count zero = {}, *count;
	struct fd_stats *st;
	__be16 ports[2] = {};
	__u32 l4_off;
	__u64 now = bpf_ktime_get_ns();

	if (ethertype == ETH_P_IP) {
		struct iphdr ip;

		if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)))
			return;
		key.proto = ip.protocol;
		l4_off = ETH_HLEN + ip.ihl * 4;
		if (ip.frag_off & bpf_htons(0x1fff))
			l4_off = 0; /* a non-first fragment carries no ports */
	} else {
		struct ipv6hdr ip6;

		if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip6, sizeof(ip6)))
			return;
		key.proto = ip6.nexthdr;
		l4_off = ETH_HLEN + sizeof(ip6);
	}
	if (l4_off && (key.proto == 6 || key.proto == 17) && !bpf_skb_load_bytes(skb, l4_off, ports, sizeof(ports))) {
		key.sport = bpf_ntohs(ports[0]);
		key.dport = bpf_ntohs(ports[1]);
	} else if (l4_off && (key.proto == 1 || key.proto == 58)) {
		quoted_ports(skb, key.proto, l4_off, &key);
	}
	if (now > cfg.flow_t0 && cfg.flow_bin_ns)
		key.bin = (now - cfg.flow_t0) / cfg.flow_bin_ns;
	count = bpf_map_lookup_elem(&flows, &key);
	if (!count) {
		bpf_map_update_elem(&flows, &key, &zero, BPF_NOEXIST);
		count = bpf_map_lookup_elem(&flows, &key);
	}
	if (!count) {
		st = counters();
		if (st)
			st->flow_lost++;
		return;
	}
	__sync_fetch_and_add(&count->packets, 1);
	__sync_fetch_and_add(&count->bytes, skb->len);
	if (drop)
		__sync_fetch_and_add(&count->dropped, 1);
}

/* The hot path touches only the shared index (one atomic add) and the model: counters that can be
 * derived (seen, matched, dropped, bursts, GE states) are derived by the loader; the others change on
 * rare events. A drop costs nothing extra, and the verdict leaves without a branch. */
SEC("tc")
int fecdrop(struct __sk_buff *skb)
{
	__u16 ethertype = bpf_ntohs(skb->protocol);
	struct fd_stats *st;
	__u32 state = 0;
	__u64 index;
	int drop = 0;

	if (ethertype != ETH_P_IP && ethertype != ETH_P_IPV6) {
		st = counters();
		if (st)
			st->nonip++;
		return TC_PASS; /* ARP and friends: never dropped, never counted as matched */
	}
	if (skb->len < cfg.min_len || (cfg.filter_flags && !filter_match(skb, ethertype))) {
		st = counters();
		if (st)
			st->unmatched++;
		return TC_PASS;
	}
	if (skb->gso_segs > 1) {
		st = counters();
		if (st)
			st->gso++;
	}

	index = __sync_fetch_and_add(&next_index, 1);
	switch (cfg.model) {
#define FD_MODEL_CASE(ID, file)                                                                                \
	case FD_MODEL_##ID:                                                                                    \
		drop = file##_drop(&index, &state);                                                            \
		break;
		FD_MODELS(FD_MODEL_CASE)
#undef FD_MODEL_CASE
	default:
		break;
	}
	if (cfg.flows)
		count_flow(skb, ethertype, drop);
	if (cfg.log) {
		struct fd_record rec = {.index = index, .verdict = drop, .state = state, .len = skb->len};

		if (bpf_ringbuf_output(&verdict_log, &rec, sizeof(rec), BPF_RB_NO_WAKEUP)) {
			st = counters();
			if (st)
				st->log_lost++; /* ring buffer full: the log is incomplete */
		}
	}
	return TC_PASS + drop * (TC_DROP - TC_PASS); /* drop is 0 or 1 */
}

char LICENSE[] SEC("license") = "GPL";
