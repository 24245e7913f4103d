#include "flows.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ETH_HEADER 14
#define ETHERTYPE_IPV4 0x0800
#define ETHERTYPE_IPV6 0x86dd

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* An ICMP or ICMPv6 error quotes the packet it reports: the ports of that packet's flow, swapped (the
 * error travels back toward the quoted packet's sender), as fecbench's dropper reads them. */
static void quoted_ports(const uint8_t *l4, const uint8_t *end, uint8_t proto, struct dl_flow_key *key)
{
	const uint8_t *quote = l4 + 8;
	uint8_t quoted_proto;

	if (quote > end)
		return;
	if (proto == 1 && (l4[0] == 3 || l4[0] == 11 || l4[0] == 12)) {
		if (quote + 20 > end)
			return;
		quoted_proto = quote[9];
		quote += (quote[0] & 0x0f) * 4;
	} else if (proto == 58 && l4[0] >= 1 && l4[0] <= 4) {
		if (quote + 40 > end)
			return;
		quoted_proto = quote[6];
		quote += 40;
	} else {
		return;
	}
	if ((quoted_proto != 6 && quoted_proto != 17) || quote + 4 > end)
		return;
	key->sport = be16(quote + 2);
	key->dport = be16(quote);
}

int dl_flow_of(const uint8_t *frame, uint32_t len, struct dl_flow_key *key)
{
	const uint8_t *ip = frame + ETH_HEADER, *end = frame + len, *l4;
	uint16_t ethertype;

	memset(key, 0, sizeof(*key));
	if (len < ETH_HEADER)
		return -1;
	ethertype = be16(frame + 12);
	if (ethertype == ETHERTYPE_IPV4) {
		if (ip + 20 > end)
			return -1;
		key->proto = ip[9];
		if (be16(ip + 6) & 0x1fff)
			return 0; /* a non-first fragment carries no ports */
		l4 = ip + (ip[0] & 0x0f) * 4;
	} else if (ethertype == ETHERTYPE_IPV6) {
		if (ip + 40 > end)
			return -1;
		key->proto = ip[6];
		l4 = ip + 40;
	} else {
		return -1;
	}
	if ((key->proto == 6 || key->proto == 17) && l4 + 4 <= end) {
		key->sport = be16(l4);
		key->dport = be16(l4 + 2);
	} else if ((key->proto == 1 || key->proto == 58) && l4 + 1 <= end) {
		quoted_ports(l4, end, key->proto, key);
	}
	return 0;
}

int dl_flows_start(struct dl_flows *f, uint64_t t0_ns, uint64_t bin_ns)
{
	if (!f->entries) {
		f->entries = calloc(DL_FLOW_ENTRIES, sizeof(*f->entries));
		if (!f->entries)
			return -1;
	} else {
		memset(f->entries, 0, DL_FLOW_ENTRIES * sizeof(*f->entries));
	}
	f->used = 0;
	f->lost = 0;
	f->t0_ns = t0_ns;
	f->bin_ns = bin_ns ? bin_ns : 1;
	f->counting = true;
	return 0;
}

void dl_flows_stop(struct dl_flows *f)
{
	if (f->entries)
		memset(f->entries, 0, DL_FLOW_ENTRIES * sizeof(*f->entries));
	f->used = 0;
	f->lost = 0;
	f->counting = false;
}

void dl_flows_free(struct dl_flows *f)
{
	free(f->entries);
	memset(f, 0, sizeof(*f));
}

static uint32_t hash_key(const struct dl_flow_key *k)
{
	uint64_t h = ((uint64_t)k->proto << 56) ^ ((uint64_t)k->sport << 40) ^ ((uint64_t)k->dport << 24) ^ k->bin;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return (uint32_t)h;
}

static bool same(const struct dl_flow_key *a, const struct dl_flow_key *b)
{
	return a->proto == b->proto && a->sport == b->sport && a->dport == b->dport && a->bin == b->bin;
}

void dl_flows_count(struct dl_flows *f, const struct dl_flow_key *flow, uint64_t arrival_ns, uint32_t bytes,
		    bool dropped)
{
	struct dl_flow_key key;

	if (!f->counting || arrival_ns < f->t0_ns)
		return; /* not counting, or a frame that arrived before counting started */
	key = *flow;
	key.bin = (uint32_t)((arrival_ns - f->t0_ns) / f->bin_ns);
	/* Open addressing, linear probing; entries are never removed while counting. */
	for (uint32_t i = 0, at = hash_key(&key) & (DL_FLOW_ENTRIES - 1); i < DL_FLOW_ENTRIES;
	     i++, at = (at + 1) & (DL_FLOW_ENTRIES - 1)) {
		struct dl_flow_entry *e = &f->entries[at];

		if (!e->used) {
			if (dropped || f->used >= DL_FLOW_ENTRIES * 3 / 4)
				break; /* a drop of a frame never counted, or the table is full enough */
			*e = (struct dl_flow_entry){.key = key, .used = true};
			f->used++;
		} else if (!same(&e->key, &key)) {
			continue;
		}
		if (dropped) {
			e->dropped++;
			e->dropped_bytes += bytes;
		} else {
			e->packets++;
			e->bytes += bytes;
		}
		return;
	}
	f->lost++;
}

char *dl_flows_json(const struct dl_flows *f)
{
	/* ~90 bytes per entry at most (eight numbers), plus the head. */
	size_t cap = 256 + (size_t)f->used * 100, used;
	char *out = malloc(cap);

	if (!out)
		return NULL;
	used = (size_t)snprintf(out, cap, "{\"counting\": %s, \"t0_ns\": %" PRIu64 ", \"bin_ns\": %" PRIu64
				", \"lost\": %" PRIu64 ", \"flows\": [", f->counting ? "true" : "false", f->t0_ns,
				f->bin_ns, f->lost);
	for (uint32_t i = 0, n = 0; f->entries && i < DL_FLOW_ENTRIES; i++) {
		const struct dl_flow_entry *e = &f->entries[i];

		if (!e->used)
			continue;
		used += (size_t)snprintf(out + used, cap - used,
					 "%s[%u, %u, %u, %u, %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 "]",
					 n++ ? ", " : "", e->key.proto, e->key.sport, e->key.dport, e->key.bin,
					 e->packets, e->bytes, e->dropped, e->dropped_bytes);
	}
	snprintf(out + used, cap - used, "]}");
	return out;
}
