/*
 * Per-flow counters of one direction of the delay element: what each flow (transport protocol and
 * ports, read as fecbench's dropper reads them: an ICMP error counts under the flow whose packet it
 * quotes) brought to the bottleneck queue and what the queue refused, per time bin of its arrival.
 * The dropper sits before the delay element and counts what each flow offered the link; these counts
 * say which of a flow's packets the queue behind the delay then dropped (tbf's limit: drop_egress;
 * the delay element's own limit: drop_queue), so per-flow drops add up to the link's, tail drops
 * included, and a flow's throughput can count what got through the queue only.
 */
#ifndef DELAYLINE_FLOWS_H
#define DELAYLINE_FLOWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Entries per direction: flows × bins seen (a 60 s run at 100 ms bins with 10 flows is 6000). */
#define DL_FLOW_ENTRIES 16384

struct dl_flow_key {
	uint8_t proto;
	uint16_t sport, dport; /* host order; 0 for a protocol without ports */
	uint32_t bin;          /* (arrival - t0) / bin width */
};

struct dl_flow_entry {
	struct dl_flow_key key;
	bool used;
	uint64_t packets, bytes;          /* frames that arrived at the queue, and their bytes */
	uint64_t dropped, dropped_bytes;  /* those the queue refused (drop_egress or drop_queue) */
};

struct dl_flows {
	struct dl_flow_entry *entries; /* NULL until counting starts */
	uint32_t used;
	bool counting;
	uint64_t t0_ns, bin_ns;
	uint64_t lost; /* frames not counted: the table was full */
};

/*
 * The flow of an Ethernet frame (no virtio-net header): 0 and its key (bin 0) for an IPv4 or IPv6
 * packet, -1 for anything else (ARP: not counted, as the dropper does not count it).
 */
int dl_flow_of(const uint8_t *frame, uint32_t len, struct dl_flow_key *key);

/* Start counting afresh: bins of bin_ns from t0_ns. 0, or -1 without memory. */
int dl_flows_start(struct dl_flows *f, uint64_t t0_ns, uint64_t bin_ns);
/* Stop counting and forget everything. */
void dl_flows_stop(struct dl_flows *f);
void dl_flows_free(struct dl_flows *f);

/* A frame of `bytes` that arrived at arrival_ns: counted as arrived (dropped = false), or as refused
 * by the queue (dropped = true; it was counted as arrived already). Nothing when not counting. */
void dl_flows_count(struct dl_flows *f, const struct dl_flow_key *flow, uint64_t arrival_ns, uint32_t bytes,
		    bool dropped);

/*
 * The counters as JSON: {"counting": bool, "t0_ns": N, "bin_ns": N, "lost": N, "flows": [[proto, sport,
 * dport, bin, packets, bytes, dropped, dropped_bytes], ...]}. Returns a malloc'd string, or NULL without
 * memory.
 */
char *dl_flows_json(const struct dl_flows *f);

#endif
