// SPDX-License-Identifier: GPL-2.0
/* The skeleton loader: one BPF object (fecdrop.bpf.c) whose maps are mmapped or pinned, configured with
 * a model, reset, and read back (set, reset, stats, log). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "commands.h"
#include "die.h"
#include "loader.h"
#include "model.h"
#include "fecdrop.skel.h"

const char *hook_name(__u32 hook)
{
	static const char *names[] = {"auto", "tcx", "clsact"};

	return hook <= HOOK_CLSACT ? names[hook] : "?";
}

/* ---------- maps: open, mmap, pin ---------- */

static void *map_mmap(int fd, size_t *size_out)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	size_t size;
	void *p;

	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		die(1, "map info: %s", strerror(errno));
	size = (size_t)info.value_size * info.max_entries;
	size = (size + 4095) & ~(size_t)4095;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		die(1, "mmap map: %s", strerror(errno));
	if (size_out)
		*size_out = size;
	return p;
}

int pinned(const char *dir, const char *name)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = bpf_obj_get(path);
	if (fd < 0)
		die(2, "no dropper pinned at %s (%s)", dir, strerror(errno));
	return fd;
}

/* An instance pinned by another build of this tool may lay its maps out differently: refuse it. */
static int check_layout(int fd, __u32 value_size, const char *dir)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);

	if (bpf_obj_get_info_by_fd(fd, &info, &len) || info.value_size != value_size)
		die(2, "the dropper at %s was attached by another build of fecdrop: detach it and attach again", dir);
	return fd;
}

void open_pinned(const char *dir, struct instance *in)
{
	check_layout(pinned(dir, "stats"), sizeof(struct fd_stats), dir);
	check_layout(pinned(dir, "chain"), sizeof(struct fd_chain), dir);
	in->bss = map_mmap(check_layout(pinned(dir, "bss"), sizeof(struct fecdrop_bpf__bss), dir), &in->bss_size);
	in->drop = map_mmap(pinned(dir, "table_drop"), NULL);
	in->state = map_mmap(pinned(dir, "table_state"), NULL);
	in->stats_fd = pinned(dir, "stats");
	in->chain_fd = pinned(dir, "chain");
	in->log_fd = pinned(dir, "log");
	in->attach_fd = check_layout(pinned(dir, "attach"), sizeof(struct fd_attach), dir);
	in->flows_fd = pinned(dir, "flows");
}

static const char *pin_names[] = {"bss", "table_drop", "table_state", "stats", "chain", "log", "attach", "link",
				  "flows"};

void remove_pins(const char *dir)
{
	char path[512];

	for (size_t i = 0; i < sizeof(pin_names) / sizeof(pin_names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, pin_names[i]);
		unlink(path);
	}
	rmdir(dir);
}

void pin_or_die(int fd, const char *dir, const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (bpf_obj_pin(fd, path)) {
		int err = errno;

		remove_pins(dir);
		die(1, "pin %s: %s", path, strerror(err));
	}
}

void save_attach(int fd, const struct fd_attach *at)
{
	__u32 zero = 0;

	if (bpf_map_update_elem(fd, &zero, at, BPF_ANY))
		die(1, "save attachment: %s", strerror(errno));
}

/* ---------- the skeleton ---------- */

struct fecdrop_bpf *load_skel(__u32 log_bytes)
{
	struct fecdrop_bpf *skel = fecdrop_bpf__open();

	if (!skel)
		die(1, "open BPF object: %s", strerror(errno));
	if (log_bytes && bpf_map__set_max_entries(skel->maps.verdict_log, log_bytes))
		die(1, "ring buffer size");
	if (fecdrop_bpf__load(skel))
		die(1, "load BPF program: %s", strerror(errno));
	return skel;
}

void instance_from_skel(struct fecdrop_bpf *skel, struct instance *in)
{
	in->bss = skel->bss;
	in->drop = map_mmap(bpf_map__fd(skel->maps.table_drop), NULL);
	in->state = map_mmap(bpf_map__fd(skel->maps.table_state), NULL);
	in->stats_fd = bpf_map__fd(skel->maps.stats);
	in->chain_fd = bpf_map__fd(skel->maps.chain);
	in->log_fd = bpf_map__fd(skel->maps.verdict_log);
	in->attach_fd = -1;
	in->flows_fd = bpf_map__fd(skel->maps.flows);
}

/* ---------- configure, reset ---------- */

static void clear_flows(int fd)
{
	struct fd_flow_key key, next;
	int more = !bpf_map_get_next_key(fd, NULL, &key);

	while (more) {
		more = !bpf_map_get_next_key(fd, &key, &next);
		bpf_map_delete_elem(fd, &key);
		key = next;
	}
}

void reset_stream(struct instance *in)
{
	int ncpu = libbpf_num_possible_cpus();
	struct fd_stats *zeros = calloc(ncpu, sizeof(struct fd_stats));
	struct fd_chain ch = {};
	__u32 zero = 0;

	ch.state = in->bss->cfg.chain_state0;
	ch.run = in->bss->cfg.chain_run0;
	ch.next = in->bss->cfg.table_len;
	if (bpf_map_update_elem(in->chain_fd, &zero, &ch, BPF_ANY))
		die(1, "reset chain: %s", strerror(errno));
	if (bpf_map_update_elem(in->stats_fd, &zero, zeros, BPF_ANY))
		die(1, "reset stats: %s", strerror(errno));
	free(zeros);
	clear_flows(in->flows_fd);
	if (in->bss->cfg.flows) {
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		in->bss->cfg.flow_t0 = (__u64)now.tv_sec * 1000000000ULL + now.tv_nsec;
	}
	__atomic_store_n(&in->bss->next_index, 0, __ATOMIC_SEQ_CST);
}

void configure(struct instance *in, const struct fd_config *cfg, const char *trace, __u64 table_len,
	       int keep_filter)
{
	struct fd_config c = *cfg;

	if (keep_filter) {
		struct fd_config *old = &in->bss->cfg;

		c.filter_flags = old->filter_flags;
		c.filter_proto = old->filter_proto;
		c.filter_port = old->filter_port;
		c.filter_family = old->filter_family;
		memcpy(c.filter_src, old->filter_src, 16);
		memcpy(c.filter_dst, old->filter_dst, 16);
		c.log = old->log;
	}
	prepare_model(&c, trace, table_len, in->drop, in->state);
	/* Packets passing during the switch are delivered; the new model starts at index 0. (Change
	 * parameters between runs: a packet racing with the reset may still take an index.) */
	__atomic_store_n(&in->bss->cfg.model, FD_MODEL_NONE, __ATOMIC_SEQ_CST);
	__u32 model = c.model;
	c.model = FD_MODEL_NONE;
	memcpy(&in->bss->cfg, &c, sizeof(c));
	reset_stream(in);
	__atomic_store_n(&in->bss->cfg.model, model, __ATOMIC_SEQ_CST);
}

/* ---------- stats ---------- */

void print_stats(struct instance *in)
{
	int ncpu = libbpf_num_possible_cpus();
	struct fd_stats *per = calloc(ncpu, sizeof(*per)), sum = {};
	struct fd_config *c = &in->bss->cfg;
	const struct fd_model *m = model_by_id(c->model);
	struct fd_chain ch = {};
	__u32 zero = 0;
	__u64 index, longest, prefix, dropped, bursts, bad = 0;
	struct fd_attach at = {};
	const char *hook = "none";

	if (bpf_map_lookup_elem(in->stats_fd, &zero, per) || bpf_map_lookup_elem(in->chain_fd, &zero, &ch))
		die(1, "read counters: %s", strerror(errno));
	for (int i = 0; i < ncpu; i++) {
		sum.nonip += per[i].nonip;
		sum.unmatched += per[i].unmatched;
		sum.gso += per[i].gso;
		sum.log_lost += per[i].log_lost;
		sum.flow_lost += per[i].flow_lost;
	}
	free(per);
	if (in->attach_fd >= 0 && !bpf_map_lookup_elem(in->attach_fd, &zero, &at) && at.hook <= HOOK_CLSACT)
		hook = hook_name(at.hook);
	index = __atomic_load_n(&in->bss->next_index, __ATOMIC_SEQ_CST);
	/* D[i] is a function of i: the longest loss run and the chain states of the stream so far are those
	 * of the sequence over [0, index); past the table, the chain counted them under its lock. */
	prefix = index;
	if (m->chained && prefix > c->table_len)
		prefix = c->table_len;
	sequence_stats(c, in->drop, prefix, &dropped, &bursts, &longest);
	if (m->chained) {
		bad = popcount_prefix(in->state, prefix);
		if (index > c->table_len) {
			bad += ch.bad;
			dropped += ch.dropped;
			bursts += ch.bursts;
			if (ch.longest > longest)
				longest = ch.longest;
		}
	}
	printf("{\"hook\": \"%s\", \"model\": \"%s\", \"seed\": %llu, \"stream\": %llu, \"index\": %llu"
	       ", \"seen\": %llu, \"matched\": %llu, \"unmatched\": %llu, \"dropped\": %llu"
	       ", \"good\": %llu, \"bad\": %llu, \"bursts\": %llu, \"longest_burst\": %llu, \"gso\": %llu"
	       ", \"non_ip\": %llu, \"log_lost\": %llu, \"flow_lost\": %llu, \"table_len\": %llu, \"min_len\": %u"
	       ", \"thresholds\": {",
	       hook, m->name, c->seed, c->stream, index, index + sum.nonip + sum.unmatched, index, sum.unmatched,
	       dropped, m->chained ? index - bad : 0, bad, bursts, longest, sum.gso, sum.nonip, sum.log_lost,
	       sum.flow_lost, c->table_len, c->min_len);
	for (int i = 0; i < FD_MODEL_PARAMS && m->params[i]; i++)
		printf("%s\"%s\": %llu", i ? ", " : "", m->params[i], c->t[i]);
	printf("}}\n");
}

void print_flows(struct instance *in)
{
	struct fd_flow_key key, next;
	struct fd_flow_count count;
	int more = !bpf_map_get_next_key(in->flows_fd, NULL, &key), first = 1;

	printf("{\"counting\": %s, \"t0_ns\": %llu, \"bin_ns\": %llu, \"flows\": [", in->bss->cfg.flows ? "true" : "false",
	       (unsigned long long)in->bss->cfg.flow_t0, (unsigned long long)in->bss->cfg.flow_bin_ns);
	while (more) {
		more = !bpf_map_get_next_key(in->flows_fd, &key, &next);
		if (!bpf_map_lookup_elem(in->flows_fd, &key, &count)) {
			printf("%s[%u, %u, %u, %u, %llu, %llu, %llu]", first ? "" : ", ", key.proto, key.sport, key.dport,
			       key.bin, (unsigned long long)count.packets, (unsigned long long)count.bytes,
			       (unsigned long long)count.dropped);
			first = 0;
		}
		key = next;
	}
	printf("]}\n");
}

/* ---------- verdict log ---------- */

int on_record(void *ctx, void *data, size_t size)
{
	struct log_sink *s = ctx;
	const struct fd_record *r = data;

	s->records++;
	if (s->f)
		fwrite(r, sizeof(*r), 1, s->f);
	if (s->verdicts) {
		if (r->index >= s->n)
			s->out_of_range++;
		else if (s->verdicts[r->index] != 0xff)
			s->duplicates++;
		else
			s->verdicts[r->index] = r->verdict;
	}
	return 0;
}

/* ---------- commands on a pinned instance ---------- */

void cmd_set(struct options *o)
{
	struct instance in;

	open_pinned(o->pin, &in);
	if (!o->have_model)
		die(2, "set needs --model");
	configure(&in, &o->cfg, o->trace, o->table_len, 1);
}

void cmd_reset(struct options *o)
{
	struct instance in;

	open_pinned(o->pin, &in);
	reset_stream(&in);
}

void cmd_stats(struct options *o)
{
	struct instance in;

	open_pinned(o->pin, &in);
	print_stats(&in);
}

void cmd_flows(struct options *o)
{
	struct instance in;

	open_pinned(o->pin, &in);
	print_flows(&in);
}

void cmd_log(struct options *o)
{
	struct log_sink sink = {};
	struct ring_buffer *rb;

	if (!o->out)
		die(2, "log needs --out");
	sink.f = fopen(o->out, "wb");
	if (!sink.f)
		die(2, "cannot write %s: %s", o->out, strerror(errno));
	rb = ring_buffer__new(pinned(o->pin, "log"), on_record, &sink, NULL);
	if (!rb)
		die(1, "open ring buffer: %s", strerror(errno));
	ring_buffer__consume(rb);
	ring_buffer__free(rb);
	fclose(sink.f);
	printf("{\"records\": %llu}\n", sink.records);
}
