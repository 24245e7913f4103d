// SPDX-License-Identifier: GPL-2.0
/* fecdrop: loader and control tool of the fecbench dropper (called by fecbench.dropper).
 *
 *   fecdrop attach  --dev IF --pin DIR [--netns PATH] [--direction egress|ingress] [--log-bytes N]
 *                   [--hook auto|tcx|clsact] [--handle H] MODEL FILTER
 *                   tcx: a pinned tcx link (Linux >= 6.6); clsact: a cls_bpf filter (direct action, priority
 *                   FD_TC_PRIORITY, handle H, default the program id) on the clsact qdisc, created if absent;
 *                   auto: tcx when the kernel has it (probed), else clsact
 *   fecdrop set     --pin DIR MODEL     new parameters; resets the stream (index 0, state Good)
 *   fecdrop reset   --pin DIR           resets the stream and the counters
 *   fecdrop stats   --pin DIR           JSON counters
 *   fecdrop log     --pin DIR --out F   drain the verdict log (struct fd_record[]) into F
 *   fecdrop detach  --pin DIR           detach (tcx link; or clsact filter, in its namespace) and remove the pins
 *   fecdrop hooks   --dev IF [--netns PATH]   number of droppers on the interface's hooks (JSON)
 *   fecdrop probe                       does the kernel have tcx links? (JSON)
 *   fecdrop testrun MODEL --packets N --threads T --out F
 *                   BPF_PROG_TEST_RUN from T threads on T CPUs; F gets one byte per index (verdict)
 *   fecdrop bench   [--repeat N]        ns per packet of the empty program and of each model
 *   fecdrop selftest
 * MODEL: --model none|uniform|ge|trace --seed S --stream S --t-drop T --t-p T --t-r T --t-k T --t-h T
 *        --table-len N (GE: packets to pre-generate) --trace FILE (little-endian u64 indices)
 * FILTER: --proto N --port N --src ADDR --dst ADDR
 * Thresholds are integers in [0, 2^32] computed by the Python side (probability * 2^32, rounded).
 * Exit status: 0 ok, 2 user error (message on stderr), 1 anything else. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/types.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/netlink.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include "fecdrop.h"
#include "fecdrop.skel.h"
#include "empty.skel.h"

#define ATTACH_TCX_INGRESS 46 /* enum bpf_attach_type, newer than Debian's uapi headers */
#define ATTACH_TCX_EGRESS 47
#define PROG_NAME "fecdrop"
#define FD_TC_PRIORITY 1 /* clsact: before the hook's other filters (a pass lets them run) */

enum { HOOK_AUTO, HOOK_TCX, HOOK_CLSACT };
static const char *hook_names[] = {"auto", "tcx", "clsact"};

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

static void die(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "fecdrop: error: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(code);
}

struct options {
	const char *cmd, *dev, *pin, *netns, *out, *trace;
	int egress, threads, log_bytes, hook;
	__u32 handle;
	__u64 packets, repeat;
	int have_model;
	struct fd_config cfg;
	__u64 table_len;
};

/* ---------- the model, sequentially (the same definition as the BPF program and model.py) ---------- */

static __u64 *alloc_table(void)
{
	__u64 *t = calloc(FD_TABLE_WORDS, sizeof(__u64));

	if (!t)
		die(1, "out of memory");
	return t;
}

/* Pre-generate the Gilbert-Elliott chain for indices [0, len): verdict in the current state, then the
 * transition. Returns the state and the loss-run length at index len. */
static void generate_ge(const struct fd_config *c, __u64 len, __u64 *drop, __u64 *state, __u64 *state_end,
			__u64 *run_end)
{
	__u64 s = 0, run = 0, dword = 0, sword = 0;

	for (__u64 i = 0; i < len; i++) {
		__u64 x = fecdrop_hash(c->key, i);
		__u32 uv = x >> 32, um = (__u32)x;
		int d = uv >= (s ? c->t_h : c->t_k);

		dword |= (__u64)d << (i & 63);
		sword |= s << (i & 63);
		run = d ? run + 1 : 0;
		s = s ? (um < c->t_r ? 0 : 1) : (um < c->t_p ? 1 : 0);
		if ((i & 63) == 63 || i + 1 == len) {
			drop[i >> 6] = dword;
			state[i >> 6] = sword;
			dword = sword = 0;
		}
	}
	*state_end = s;
	*run_end = run;
}

static void load_trace(const char *path, __u64 *drop, __u64 *len)
{
	FILE *f = fopen(path, "rb");
	__u64 idx, max = 0;
	int any = 0;

	if (!f)
		die(2, "cannot read trace file %s: %s", path, strerror(errno));
	while (fread(&idx, sizeof(idx), 1, f) == 1) {
		if (idx >= FD_TABLE_PACKETS)
			die(2, "trace index %llu is beyond the table (%llu packets)", idx, FD_TABLE_PACKETS);
		drop[idx >> 6] |= 1ULL << (idx & 63);
		if (idx + 1 > max)
			max = idx + 1;
		any = 1;
	}
	fclose(f);
	if (*len == 0)
		*len = any ? max : 0;
	if (*len < max)
		die(2, "trace length %llu is shorter than its last index + 1 (%llu)", *len, max);
}

/* Verdict of index i under the configuration, given the pre-generated table (for the self-test and
 * longest-burst statistics). */
static int table_has(const __u64 *t, __u64 i)
{
	return (t[i >> 6] >> (i & 63)) & 1;
}

/* Build the tables for a configuration: fills drop/state words [0, table_len) and the chain state. */
static void prepare_model(struct fd_config *c, const char *trace, __u64 table_len, __u64 *drop, __u64 *state)
{
	c->key = fecdrop_key(c->seed, c->stream);
	c->table_len = 0;
	c->chain_state0 = 0;
	c->chain_run0 = 0;
	if (c->model == FD_MODEL_GE) {
		if (table_len > FD_TABLE_PACKETS)
			table_len = FD_TABLE_PACKETS;
		generate_ge(c, table_len, drop, state, &c->chain_state0, &c->chain_run0);
		c->table_len = table_len;
	} else if (c->model == FD_MODEL_TRACE) {
		__u64 len = table_len;

		load_trace(trace, drop, &len);
		c->table_len = len;
	}
}

/* ---------- maps: open, mmap, configure ---------- */

struct instance {
	struct fecdrop_bpf__bss *bss;
	size_t bss_size;
	__u64 *drop, *state;
	int stats_fd, chain_fd, log_fd, attach_fd; /* attach_fd: -1 when not attached (testrun, bench) */
};

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

static int pinned(const char *dir, const char *name)
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

static void open_pinned(const char *dir, struct instance *in)
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
}

/* Index 0, state Good (or the saved state at the end of the table), counters zero. */
static void reset_stream(struct instance *in)
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
	__atomic_store_n(&in->bss->next_index, 0, __ATOMIC_SEQ_CST);
}

/* Write a new model into a live instance: tables first, then the configuration, then the reset. */
static void configure(struct instance *in, struct options *o, int keep_filter)
{
	struct fd_config c = o->cfg;

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
	if (c.model == FD_MODEL_TRACE)
		memset(in->drop, 0, FD_TABLE_WORDS * sizeof(__u64));
	prepare_model(&c, o->trace, o->table_len, in->drop, in->state);
	/* Packets passing during the switch are delivered; the new model starts at index 0. (Change
	 * parameters between runs: a packet racing with the reset may still take an index.) */
	__atomic_store_n(&in->bss->cfg.model, FD_MODEL_NONE, __ATOMIC_SEQ_CST);
	__u32 model = c.model;
	c.model = FD_MODEL_NONE;
	memcpy(&in->bss->cfg, &c, sizeof(c));
	reset_stream(in);
	__atomic_store_n(&in->bss->cfg.model, model, __ATOMIC_SEQ_CST);
}

static void instance_from_skel(struct fecdrop_bpf *skel, struct instance *in)
{
	in->bss = skel->bss;
	in->drop = map_mmap(bpf_map__fd(skel->maps.table_drop), NULL);
	in->state = map_mmap(bpf_map__fd(skel->maps.table_state), NULL);
	in->stats_fd = bpf_map__fd(skel->maps.stats);
	in->chain_fd = bpf_map__fd(skel->maps.chain);
	in->log_fd = bpf_map__fd(skel->maps.verdict_log);
	in->attach_fd = -1;
}

static struct fecdrop_bpf *load_skel(__u32 log_bytes)
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

/* ---------- stats ---------- */

/* Dropped packets, loss runs and the longest run of the sequence over [0, n). */
static void sequence_stats(const struct fd_config *c, const __u64 *drop, __u64 n, __u64 *dropped, __u64 *bursts,
			   __u64 *longest)
{
	__u64 run = 0, best = 0, drops = 0, runs = 0;

	for (__u64 i = 0; i < n; i++) {
		int d;

		if (c->model == FD_MODEL_UNIFORM)
			d = (fecdrop_hash(c->key, i) >> 32) < c->t_drop;
		else if (c->model == FD_MODEL_NONE)
			d = 0;
		else
			d = i < c->table_len && table_has(drop, i);
		runs += d && run == 0;
		drops += d;
		run = d ? run + 1 : 0;
		if (run > best)
			best = run;
	}
	*dropped = drops;
	*bursts = runs;
	*longest = best;
}

static const char *model_name(__u32 m)
{
	static const char *names[] = {"none", "uniform", "gilbert-elliott", "trace"};

	return m < 4 ? names[m] : "?";
}

static __u64 popcount_prefix(const __u64 *bits, __u64 n)
{
	__u64 count = 0;

	for (__u64 w = 0; w < n / 64; w++)
		count += __builtin_popcountll(bits[w]);
	if (n & 63)
		count += __builtin_popcountll(bits[n / 64] & ((1ULL << (n & 63)) - 1));
	return count;
}

static void print_stats(struct instance *in)
{
	int ncpu = libbpf_num_possible_cpus();
	struct fd_stats *per = calloc(ncpu, sizeof(*per)), sum = {};
	struct fd_config *c = &in->bss->cfg;
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
	}
	free(per);
	if (in->attach_fd >= 0 && !bpf_map_lookup_elem(in->attach_fd, &zero, &at) && at.hook <= HOOK_CLSACT)
		hook = hook_names[at.hook];
	index = __atomic_load_n(&in->bss->next_index, __ATOMIC_SEQ_CST);
	/* D[i] is a function of i: the longest loss run and the GE states of the stream so far are those
	 * of the sequence over [0, index); past the table, the chain counted them under its lock. */
	prefix = index;
	if (c->model == FD_MODEL_GE && prefix > c->table_len)
		prefix = c->table_len;
	sequence_stats(c, in->drop, prefix, &dropped, &bursts, &longest);
	if (c->model == FD_MODEL_GE) {
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
	       ", \"non_ip\": %llu, \"log_lost\": %llu, \"table_len\": %llu, \"t_drop\": %llu, \"t_p\": %llu"
	       ", \"t_r\": %llu, \"t_k\": %llu, \"t_h\": %llu}\n",
	       hook, model_name(c->model), c->seed, c->stream, index, index + sum.nonip + sum.unmatched, index,
	       sum.unmatched, dropped, c->model == FD_MODEL_GE ? index - bad : 0, bad, bursts, longest,
	       sum.gso, sum.nonip, sum.log_lost, c->table_len, c->t_drop, c->t_p, c->t_r, c->t_k, c->t_h);
}

/* ---------- attach / detach ---------- */

static const char *pin_names[] = {"bss", "table_drop", "table_state", "stats", "chain", "log", "attach", "link"};

static void remove_pins(const char *dir)
{
	char path[512];

	for (size_t i = 0; i < sizeof(pin_names) / sizeof(pin_names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, pin_names[i]);
		unlink(path);
	}
	rmdir(dir);
}

static int open_netns(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		die(2, "network namespace %s: %s", path, strerror(errno));
	return fd;
}

static void enter_netns(const char *path)
{
	int fd = open_netns(path);

	if (setns(fd, CLONE_NEWNET))
		die(2, "cannot enter network namespace %s: %s", path, strerror(errno));
	close(fd);
}

/* Does the kernel have tcx links (Linux >= 6.6)? Older kernels reject the attach type with EINVAL. */
static int tcx_supported(int ifindex)
{
	__u32 cnt = 0, flags = 0;

	return !bpf_prog_query(ifindex, ATTACH_TCX_EGRESS, 0, &flags, NULL, &cnt) || errno != EINVAL;
}

static int is_fecdrop(__u32 prog_id)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);
	int fd = bpf_prog_get_fd_by_id(prog_id), found;

	if (fd < 0)
		return 0;
	found = !bpf_obj_get_info_by_fd(fd, &info, &len) && !strcmp(info.name, PROG_NAME);
	close(fd);
	return found;
}

/* How many fecdrop programs are on this tcx hook? */
static int tcx_taken(int ifindex, int egress)
{
	__u32 ids[64], cnt = 64, flags = 0;
	int found = 0;

	if (bpf_prog_query(ifindex, egress ? ATTACH_TCX_EGRESS : ATTACH_TCX_INGRESS, 0, &flags, ids, &cnt))
		return 0;
	for (__u32 i = 0; i < cnt; i++)
		found += is_fecdrop(ids[i]);
	return found;
}

/* The filters on a clsact hook, by a netlink dump: returns how many there are (0 without a clsact
 * qdisc) and sets *ours to how many of them run a fecdrop program. */
static int clsact_filters(int ifindex, int egress, int *ours)
{
	struct {
		struct nlmsghdr nh;
		struct tcmsg tc;
	} req = {
		.nh = {.nlmsg_len = sizeof(req), .nlmsg_type = RTM_GETTFILTER,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1},
		.tc = {.tcm_family = AF_UNSPEC, .tcm_ifindex = ifindex,
		       .tcm_parent = TC_H_MAKE(TC_H_CLSACT, egress ? TC_H_MIN_EGRESS : TC_H_MIN_INGRESS)},
	};
	static char buf[32768];
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE), total = 0, done = 0;

	*ours = 0;
	if (fd < 0 || send(fd, &req, sizeof(req), 0) < 0)
		die(1, "netlink: %s", strerror(errno));
	while (!done) {
		int n = recv(fd, buf, sizeof(buf), 0);

		if (n <= 0)
			break;
		for (struct nlmsghdr *nh = (void *)buf; NLMSG_OK(nh, n); nh = NLMSG_NEXT(nh, n)) {
			struct tcmsg *tc = NLMSG_DATA(nh);
			int len = nh->nlmsg_len - NLMSG_LENGTH(sizeof(*tc));

			if (nh->nlmsg_type == NLMSG_DONE || nh->nlmsg_type == NLMSG_ERROR) {
				done = 1; /* an error: no clsact qdisc on the device */
				break;
			}
			if (nh->nlmsg_type != RTM_NEWTFILTER || !tc->tcm_handle)
				continue; /* handle 0: a classifier's own entry, not a filter */
			total++;
			for (struct rtattr *a = (void *)((char *)tc + NLMSG_ALIGN(sizeof(*tc))); RTA_OK(a, len);
			     a = RTA_NEXT(a, len)) {
				int inner = RTA_PAYLOAD(a);

				if (a->rta_type != TCA_OPTIONS)
					continue;
				for (struct rtattr *o = RTA_DATA(a); RTA_OK(o, inner); o = RTA_NEXT(o, inner))
					if (o->rta_type == TCA_BPF_ID)
						*ours += is_fecdrop(*(__u32 *)RTA_DATA(o));
			}
		}
	}
	close(fd);
	return total;
}

static int hook_taken(int ifindex, int egress)
{
	int ours = 0;

	clsact_filters(ifindex, egress, &ours);
	return tcx_taken(ifindex, egress) + ours;
}

/* fecdrop hooks --dev IF [--netns PATH]: the number of droppers (tcx and clsact) on each hook, as JSON. */
static void cmd_hooks(struct options *o)
{
	int ifindex;

	if (!o->dev)
		die(2, "hooks needs --dev");
	if (o->netns)
		enter_netns(o->netns);
	ifindex = if_nametoindex(o->dev);
	if (!ifindex)
		die(2, "unknown interface %s", o->dev);
	printf("{\"egress\": %d, \"ingress\": %d}\n", hook_taken(ifindex, 1), hook_taken(ifindex, 0));
}

static void pin_or_die(int fd, const char *dir, const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (bpf_obj_pin(fd, path)) {
		int err = errno;

		remove_pins(dir);
		die(1, "pin %s: %s", path, strerror(err));
	}
}

struct link_job {
	int prog_fd, ifindex, attach_type, fd, err;
};

static void *create_link(void *arg)
{
	struct link_job *j = arg;

	j->fd = bpf_link_create(j->prog_fd, j->ifindex, j->attach_type, NULL);
	j->err = j->fd < 0 ? errno : 0;
	return NULL;
}

static void save_attach(int fd, const struct fd_attach *at)
{
	__u32 zero = 0;

	if (bpf_map_update_elem(fd, &zero, at, BPF_ANY))
		die(1, "save attachment: %s", strerror(errno));
}

/* tcx: a link, created in a thread because it waits for an RCU grace period (~10 ms) that the model's
 * table generation can use. The pinned link keeps the program attached after we exit. */
static void attach_tcx(struct fecdrop_bpf *skel, struct instance *in, struct options *o, int ifindex)
{
	const char *dir = o->egress ? "egress" : "ingress";
	struct link_job job = {.prog_fd = bpf_program__fd(skel->progs.fecdrop), .ifindex = ifindex,
			       .attach_type = o->egress ? ATTACH_TCX_EGRESS : ATTACH_TCX_INGRESS};
	pthread_t thread;

	if (pthread_create(&thread, NULL, create_link, &job))
		die(1, "pthread_create");
	configure(in, o, 0);
	pthread_join(thread, NULL);
	if (job.fd < 0) {
		remove_pins(o->pin);
		die(job.err == EINVAL ? 2 : 1, "attach to %s %s: %s (tcx needs Linux >= 6.6: use the clsact hook)",
		    o->dev, dir, strerror(job.err));
	}
	pin_or_die(job.fd, o->pin, "link");
}

/* clsact: a cls_bpf filter in direct-action mode (libbpf's bpf_tc_* netlink API), on the clsact qdisc,
 * which is created when absent. The pinned attachment record says how to find the filter again. */
static void attach_clsact(struct fecdrop_bpf *skel, struct instance *in, struct options *o,
			  struct fd_attach *at)
{
	const char *dir = o->egress ? "egress" : "ingress";
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = at->ifindex, .attach_point = o->egress ? BPF_TC_EGRESS : BPF_TC_INGRESS);
	LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = bpf_program__fd(skel->progs.fecdrop), .handle = at->handle,
		    .priority = at->priority);
	int err;

	configure(in, o, 0);
	err = bpf_tc_hook_create(&hook);
	if (err && err != -EEXIST) {
		remove_pins(o->pin);
		die(1, "create the clsact qdisc on %s: %s", o->dev, strerror(-err));
	}
	at->created_qdisc = !err;
	save_attach(in->attach_fd, at); /* before the filter exists: a detach after a kill finds it */
	err = bpf_tc_attach(&hook, &opts);
	if (err) {
		int ours = 0;

		if (at->created_qdisc && !clsact_filters(at->ifindex, 0, &ours) && !clsact_filters(at->ifindex, 1, &ours)) {
			LIBBPF_OPTS(bpf_tc_hook, qdisc, .ifindex = at->ifindex, .attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS);
			bpf_tc_hook_destroy(&qdisc);
		}
		remove_pins(o->pin);
		die(err == -EEXIST ? 2 : 1, "attach a filter (handle %#x, priority %u) to %s %s: %s", at->handle,
		    at->priority, o->dev, dir, strerror(-err));
	}
}

static void cmd_attach(struct options *o)
{
	struct fd_attach at = {.egress = o->egress, .priority = FD_TC_PRIORITY};
	struct fecdrop_bpf *skel;
	struct instance in;
	struct stat ns;

	if (!o->dev || !o->pin)
		die(2, "attach needs --dev and --pin");
	if (o->netns) {
		if (strlen(o->netns) >= sizeof(at.netns))
			die(2, "namespace path too long: %s", o->netns);
		strcpy(at.netns, o->netns);
		enter_netns(o->netns); /* threads created from now on share this namespace */
	}
	if (stat("/proc/self/ns/net", &ns))
		die(1, "stat /proc/self/ns/net: %s", strerror(errno));
	at.netns_dev = ns.st_dev;
	at.netns_ino = ns.st_ino;
	at.ifindex = if_nametoindex(o->dev);
	if (!at.ifindex)
		die(2, "unknown interface %s%s%s", o->dev, o->netns ? " in namespace " : "", o->netns ? o->netns : "");
	snprintf(at.dev, sizeof(at.dev), "%s", o->dev);
	at.hook = o->hook != HOOK_AUTO ? o->hook : tcx_supported(at.ifindex) ? HOOK_TCX : HOOK_CLSACT;
	if (at.hook == HOOK_TCX && !tcx_supported(at.ifindex))
		die(2, "this kernel has no tcx links (Linux >= 6.6): use the clsact hook");
	if (hook_taken(at.ifindex, o->egress))
		die(2, "a dropper is already attached to %s %s", o->dev, o->egress ? "egress" : "ingress");
	skel = load_skel(o->log_bytes);
	instance_from_skel(skel, &in);
	in.attach_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "fd_attach", sizeof(__u32), sizeof(at), 1, NULL);
	if (in.attach_fd < 0)
		die(1, "create the attachment map: %s", strerror(errno));
	if (o->handle) {
		at.handle = o->handle;
	} else { /* the program's id: unique while the filter holds the program */
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);

		if (bpf_obj_get_info_by_fd(bpf_program__fd(skel->progs.fecdrop), &info, &len))
			die(1, "program info: %s", strerror(errno));
		at.handle = info.id;
	}
	if (mkdir(o->pin, 0700) && errno != EEXIST)
		die(1, "mkdir %s: %s", o->pin, strerror(errno));
	pin_or_die(bpf_map__fd(skel->maps.bss), o->pin, "bss");
	pin_or_die(bpf_map__fd(skel->maps.table_drop), o->pin, "table_drop");
	pin_or_die(bpf_map__fd(skel->maps.table_state), o->pin, "table_state");
	pin_or_die(in.stats_fd, o->pin, "stats");
	pin_or_die(in.chain_fd, o->pin, "chain");
	pin_or_die(in.log_fd, o->pin, "log");
	pin_or_die(in.attach_fd, o->pin, "attach");
	/* Until configure() resets the stream and sets the model, the program's model is "none" (zeroed
	 * .bss): it drops nothing, and the packets it sees then do not count. */
	if (at.hook == HOOK_TCX) {
		save_attach(in.attach_fd, &at);
		attach_tcx(skel, &in, o, at.ifindex);
	} else {
		attach_clsact(skel, &in, o, &at);
	}
	printf("{\"ifindex\": %u, \"hook\": \"%s\", \"handle\": %u, \"priority\": %u, \"created_qdisc\": %u}\n",
	       at.ifindex, hook_names[at.hook], at.handle, at.priority, at.created_qdisc);
}

/* Remove a clsact filter in its namespace, and the qdisc if this instance created it and nothing else
 * uses it. A namespace that is gone took the filter with it: nothing to do. */
static void detach_clsact(const struct fd_attach *at)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = at->ifindex, .attach_point = at->egress ? BPF_TC_EGRESS : BPF_TC_INGRESS);
	LIBBPF_OPTS(bpf_tc_opts, opts, .handle = at->handle, .priority = at->priority);
	const char *path = at->netns[0] ? at->netns : "/proc/self/ns/net";
	int fd = open(path, O_RDONLY | O_CLOEXEC), ours = 0;
	struct stat ns;

	if (fd < 0)
		return; /* the namespace is gone */
	if (fstat(fd, &ns) || ns.st_dev != at->netns_dev || ns.st_ino != at->netns_ino ||
	    (at->netns[0] && setns(fd, CLONE_NEWNET))) {
		close(fd); /* not the namespace we attached in (its PID or name reused), or cannot enter it */
		return;
	}
	close(fd);
	bpf_tc_detach(&hook, &opts); /* fails harmlessly when the interface is already gone */
	if (at->created_qdisc && !clsact_filters(at->ifindex, 0, &ours) && !clsact_filters(at->ifindex, 1, &ours)) {
		LIBBPF_OPTS(bpf_tc_hook, qdisc, .ifindex = at->ifindex, .attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS);
		bpf_tc_hook_destroy(&qdisc);
	}
}

static void cmd_detach(struct options *o)
{
	struct fd_attach at = {};
	char path[512];
	__u32 zero = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/attach", o->pin);
	fd = bpf_obj_get(path);
	if (fd >= 0 && !bpf_map_lookup_elem(fd, &zero, &at) && at.hook == HOOK_CLSACT)
		detach_clsact(&at);
	snprintf(path, sizeof(path), "%s/link", o->pin);
	fd = bpf_obj_get(path);
	if (fd >= 0) {
		bpf_link_detach(fd); /* fails harmlessly when the interface is already gone */
		close(fd);
	}
	remove_pins(o->pin);
}

/* ---------- verdict log ---------- */

struct log_sink {
	FILE *f;
	__u8 *verdicts; /* testrun: verdict per index (0xff = not seen) */
	__u64 n, records, duplicates, out_of_range;
};

static int on_record(void *ctx, void *data, size_t size)
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

static void cmd_log(struct options *o)
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

/* ---------- BPF_PROG_TEST_RUN ---------- */

/* Ethernet + IPv4 + UDP, 1200-byte payload (the benchmark's packet). */
static size_t build_packet(__u8 *buf)
{
	size_t payload = 1200, len = 14 + 20 + 8 + payload;

	memset(buf, 0, len);
	memcpy(buf, "\x02\0\0\0\0\x02\x02\0\0\0\0\x01\x08\x00", 14);
	buf[14] = 0x45;
	buf[16] = (20 + 8 + payload) >> 8;
	buf[17] = (20 + 8 + payload) & 0xff;
	buf[22] = 64;
	buf[23] = 17;
	memcpy(buf + 26, "\x0a\0\0\x01\x0a\0\0\x02", 8);
	buf[34] = 0x30; /* ports 12345 -> 4433 */
	buf[35] = 0x39;
	buf[36] = 0x11;
	buf[37] = 0x51;
	buf[38] = (8 + payload) >> 8;
	buf[39] = (8 + payload) & 0xff;
	return len;
}

struct feeder {
	pthread_t thread;
	int prog_fd, cpu;
	_Atomic __u64 *issued;
	__u64 total, fed;
	int failed;
	pthread_barrier_t *start; /* all feeders start together, so that they overlap */
};

static void *feed(void *arg)
{
	struct feeder *f = arg;
	__u8 pkt[1500];
	size_t len = build_packet(pkt);
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(f->cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (f->start)
		pthread_barrier_wait(f->start);
	for (;;) {
		__u64 start = atomic_fetch_add(f->issued, 16);

		if (start >= f->total)
			break;
		__u64 batch = f->total - start < 16 ? f->total - start : 16;
		LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt, .data_size_in = len, .repeat = batch);
		if (bpf_prog_test_run_opts(f->prog_fd, &opts)) {
			f->failed = errno;
			break;
		}
		f->fed += batch;
	}
	return NULL;
}

static __u32 ring_size_for(__u64 records)
{
	__u64 bytes = records * (sizeof(struct fd_record) + 8) + 4096, size = 4096;

	while (size < bytes)
		size <<= 1;
	if (size > (1ULL << 30))
		die(2, "too many packets for the verdict log");
	return size;
}

static void cmd_testrun(struct options *o)
{
	struct log_sink sink = {};
	struct fecdrop_bpf *skel;
	struct instance in;
	struct feeder *f;
	struct ring_buffer *rb;
	_Atomic __u64 issued = 0;
	int ncpu = libbpf_num_possible_cpus();
	__u64 missing = 0;
	FILE *out;

	if (!o->out || !o->packets)
		die(2, "testrun needs --packets and --out");
	skel = load_skel(ring_size_for(o->packets));
	instance_from_skel(skel, &in);
	o->cfg.log = 1;
	configure(&in, o, 0);
	sink.n = o->packets;
	sink.verdicts = malloc(o->packets);
	memset(sink.verdicts, 0xff, o->packets);
	rb = ring_buffer__new(in.log_fd, on_record, &sink, NULL);
	if (!rb)
		die(1, "open ring buffer: %s", strerror(errno));
	pthread_barrier_t start;

	pthread_barrier_init(&start, NULL, o->threads);
	f = calloc(o->threads, sizeof(*f));
	for (int t = 0; t < o->threads; t++) {
		f[t] = (struct feeder){.prog_fd = bpf_program__fd(skel->progs.fecdrop), .cpu = t % ncpu,
				       .issued = &issued, .total = o->packets, .start = &start};
		pthread_create(&f[t].thread, NULL, feed, &f[t]);
	}
	for (int t = 0; t < o->threads; t++) {
		while (pthread_tryjoin_np(f[t].thread, NULL) == EBUSY)
			ring_buffer__poll(rb, 10);
		if (f[t].failed)
			die(1, "BPF_PROG_TEST_RUN: %s", strerror(f[t].failed));
	}
	ring_buffer__consume(rb);
	for (__u64 i = 0; i < o->packets; i++)
		missing += sink.verdicts[i] == 0xff;
	out = fopen(o->out, "wb");
	if (!out || fwrite(sink.verdicts, 1, o->packets, out) != o->packets || fclose(out))
		die(2, "cannot write %s", o->out);
	printf("{\"packets\": %llu, \"threads\": %d, \"index\": %llu, \"records\": %llu, \"missing\": %llu"
	       ", \"duplicates\": %llu, \"out_of_range\": %llu, ",
	       o->packets, o->threads, in.bss->next_index, sink.records, missing, sink.duplicates,
	       sink.out_of_range);
	printf("\"fed_per_thread\": [");
	for (int t = 0; t < o->threads; t++)
		printf("%s%llu", t ? ", " : "", f[t].fed);
	printf("], \"stats\": ");
	fflush(stdout);
	print_stats(&in);
	printf("}\n");
	fecdrop_bpf__destroy(skel);
}

static double time_prog(int prog_fd, __u64 repeat)
{
	__u8 pkt[1500];
	size_t len = build_packet(pkt);
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt, .data_size_in = len, .repeat = repeat);

	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (bpf_prog_test_run_opts(prog_fd, &opts))
		die(1, "BPF_PROG_TEST_RUN: %s", strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* the kernel's own figure (opts.duration) is rounded down to whole ns: time the call instead */
	return ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / repeat;
}

/* One loaded program per variant; timed runs interleaved over several rounds, best of each kept, so
 * that load from other processes hits every variant alike. */
#define CHUNK 100000

static void cmd_bench(struct options *o)
{
	static const char *names[] = {"empty", "none", "uniform", "gilbert_elliott", "gilbert_elliott_locked",
				      "trace"};
	enum { EMPTY, NONE, UNIFORM, GE, GE_LOCKED, TRACE, VARIANTS };
	__u64 repeat = o->repeat ? o->repeat : 1000000;
	struct empty_bpf *empty = empty_bpf__open_and_load();
	struct fecdrop_bpf *skel[VARIANTS] = {};
	struct instance in[VARIANTS];
	double best[VARIANTS];
	int fd[VARIANTS];
	char trace_path[] = "/tmp/fecdrop-bench-XXXXXX";
	FILE *tf;

	if (!empty)
		die(1, "load empty program: %s", strerror(errno));
	fd[EMPTY] = bpf_program__fd(empty->progs.empty);
	/* trace: every 100th packet of the run */
	tf = fdopen(mkstemp(trace_path), "wb");
	for (__u64 i = 0; i < repeat && i < FD_TABLE_PACKETS; i += 100)
		fwrite(&i, sizeof(i), 1, tf);
	fclose(tf);
	for (int v = NONE; v < VARIANTS; v++) {
		struct options b = {.trace = trace_path, .table_len = repeat};
		struct fd_config *c = &b.cfg;

		c->seed = 1;
		c->t_k = 1ULL << 32;
		if (v == UNIFORM) {
			c->model = FD_MODEL_UNIFORM;
			c->t_drop = (__u64)(0.01 * 4294967296.0);
		} else if (v == GE || v == GE_LOCKED) {
			c->model = FD_MODEL_GE;
			c->t_p = (__u64)(0.05 * 4294967296.0);
			c->t_r = (__u64)(0.3 * 4294967296.0);
			c->t_k = (__u64)(0.99 * 4294967296.0);
			c->t_h = (__u64)(0.2 * 4294967296.0);
			b.table_len = v == GE ? repeat : 0;
		} else if (v == TRACE) {
			c->model = FD_MODEL_TRACE;
			b.table_len = repeat < FD_TABLE_PACKETS ? repeat : FD_TABLE_PACKETS;
		}
		skel[v] = load_skel(0);
		instance_from_skel(skel[v], &in[v]);
		configure(&in[v], &b, 0);
		fd[v] = bpf_program__fd(skel[v]->progs.fecdrop);
	}
	unlink(trace_path);
	for (int v = 0; v < VARIANTS; v++)
		best[v] = 1e18;
	/* each round runs `repeat` packets per variant in chunks of 10^5 timed separately: the fastest
	 * chunk is the one nothing else preempted (this machine is shared) */
	for (int round = 0; round < 5; round++) {
		for (int v = 0; v < VARIANTS; v++) {
			if (v != EMPTY)
				reset_stream(&in[v]);
			for (__u64 done = 0; done < repeat; done += CHUNK) {
				__u64 n = repeat - done < CHUNK ? repeat - done : CHUNK;
				double ns = time_prog(fd[v], n);

				if (ns < best[v])
					best[v] = ns;
			}
		}
	}
	/* BPF_PROG_TEST_RUN calls the program directly: the figures hold for both hooks (tcx, clsact), which
	 * run this same program; what the hooks themselves cost around it is not measured here. */
	printf("{\"repeat\": %llu, \"packet_bytes\": 1242, \"rounds\": 5, \"chunk\": %d"
	       ", \"hooks\": [\"tcx\", \"clsact\"], \"hook_note\": \"BPF_PROG_TEST_RUN runs the program without a hook; "
	       "tcx and clsact run the same program\"", repeat, CHUNK);
	for (int v = 0; v < VARIANTS; v++)
		printf(", \"%s_ns\": %.2f", names[v], best[v]);
	for (int v = NONE; v < VARIANTS; v++)
		printf(", \"%s_ratio\": %.3f", names[v], best[v] / best[EMPTY]);
	printf("}\n");
	for (int v = NONE; v < VARIANTS; v++)
		fecdrop_bpf__destroy(skel[v]);
	empty_bpf__destroy(empty);
}

/* ---------- self-test ---------- */

static int check(int ok, const char *what)
{
	printf("%s %s\n", ok ? "ok  " : "FAIL", what);
	return ok ? 0 : 1;
}

/* Kernel verdicts equal the loader's sequential model, for each model (as root). */
static int selftest_kernel(void)
{
	struct fecdrop_bpf *skel = load_skel(ring_size_for(20000));
	struct options o = {.threads = 1, .packets = 20000};
	struct instance in;
	int fails = 0;

	instance_from_skel(skel, &in);
	char trace_path[] = "/tmp/fecdrop-selftest-XXXXXX";
	FILE *tf = fdopen(mkstemp(trace_path), "wb");

	for (__u64 i = 3; i < o.packets; i += i / 2 + 1) /* a sparse trace: 3, 5, 8, 13, ... */
		fwrite(&i, sizeof(i), 1, tf);
	fclose(tf);
	o.trace = trace_path;
	for (int m = FD_MODEL_UNIFORM; m <= FD_MODEL_TRACE; m++) {
		struct log_sink sink = {.n = o.packets, .verdicts = malloc(o.packets)};
		struct ring_buffer *rb = ring_buffer__new(in.log_fd, on_record, &sink, NULL);
		_Atomic __u64 issued = 0;
		struct feeder f = {.prog_fd = bpf_program__fd(skel->progs.fecdrop), .issued = &issued,
				   .total = o.packets};
		__u64 bad = 0, drops = 0;
		char what[128];

		memset(sink.verdicts, 0xff, o.packets);
		memset(&o.cfg, 0, sizeof(o.cfg));
		o.cfg = (struct fd_config){.model = m, .log = 1, .seed = 0, .stream = 3,
					   .t_drop = 1ULL << 29, .t_p = 1ULL << 28, .t_r = 1ULL << 30,
					   .t_k = 4000000000ULL, .t_h = 1ULL << 30};
		o.table_len = m == FD_MODEL_GE ? 5000 : 0; /* GE: the chain continues under the lock after 5000 */
		configure(&in, &o, 0);
		feed(&f);
		ring_buffer__consume(rb);
		ring_buffer__free(rb);
		__u64 *drop = alloc_table(), *state = alloc_table();
		struct fd_config c = o.cfg;

		prepare_model(&c, trace_path, m == FD_MODEL_GE ? o.packets : 0, drop, state);
		for (__u64 i = 0; i < o.packets; i++) {
			int want = m == FD_MODEL_UNIFORM ? (fecdrop_hash(c.key, i) >> 32) < c.t_drop : table_has(drop, i);

			bad += sink.verdicts[i] != want;
			drops += want;
		}
		snprintf(what, sizeof(what), "kernel verdicts = sequential model, %s, %llu packets, %llu drops",
			 model_name(m), o.packets, drops);
		fails += check(!bad && !f.failed && drops > 0 && drops < o.packets, what);
		free(drop);
		free(state);
		free(sink.verdicts);
	}
	unlink(trace_path);
	fecdrop_bpf__destroy(skel);
	return fails;
}

static int cmd_selftest(void)
{
	int fails = 0;

	/* known answers, shared with tests/test_dropper_model.py */
	fails += check(fecdrop_mix64(0) == 0, "mix64(0) == 0");
	fails += check(fecdrop_key(0, 0) != 0 && fecdrop_key(0, 0) != fecdrop_key(0, 1), "seed 0 gives a key");
	fails += check(fecdrop_hash(fecdrop_key(0, 0), 0) == 0x65ae880813f6f3dbULL, "hash(key(0, 0), 0) known answer");
	fails += check(fecdrop_hash(fecdrop_key(7, 1), 5) == 0x7beffa9b60d5f6b2ULL, "hash(key(7, 1), 5) known answer");
	if (geteuid() == 0)
		fails += selftest_kernel();
	else
		printf("skip kernel tests (not root)\n");
	printf("%s\n", fails ? "selftest FAILED" : "selftest passed");
	return fails ? 1 : 0;
}

/* ---------- command line ---------- */

static __u64 parse_u64(const char *s, const char *what)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || !*s || s[0] == '-')
		die(2, "bad %s: %s", what, s);
	return v;
}

static __u64 parse_threshold(const char *s, const char *what)
{
	__u64 v = parse_u64(s, what);

	if (v > (1ULL << 32))
		die(2, "%s threshold %s is above 2^32", what, s);
	return v;
}

static void parse_addr(const char *s, __u8 *out, struct fd_config *c)
{
	int family = strchr(s, ':') ? 6 : 4;

	memset(out, 0, 16);
	if (inet_pton(family == 6 ? AF_INET6 : AF_INET, s, out) != 1)
		die(2, "bad address %s", s);
	if (c->filter_family && c->filter_family != (__u32)family)
		die(2, "source and destination addresses must be of the same family");
	c->filter_family = family;
}

int main(int argc, char **argv)
{
	static struct option longopts[] = {
		{"dev", 1, 0, 'd'},	{"pin", 1, 0, 'P'},	  {"netns", 1, 0, 'n'},	  {"direction", 1, 0, 'D'},
		{"log-bytes", 1, 0, 'L'}, {"model", 1, 0, 'm'},	  {"seed", 1, 0, 's'},	  {"stream", 1, 0, 'S'},
		{"t-drop", 1, 0, 1},	{"t-p", 1, 0, 2},	  {"t-r", 1, 0, 3},	  {"t-k", 1, 0, 4},
		{"t-h", 1, 0, 5},	{"table-len", 1, 0, 6},	  {"trace", 1, 0, 7},	  {"proto", 1, 0, 8},
		{"port", 1, 0, 9},	{"src", 1, 0, 10},	  {"dst", 1, 0, 11},	  {"packets", 1, 0, 12},
		{"threads", 1, 0, 13},	{"out", 1, 0, 14},	  {"repeat", 1, 0, 15},	  {"hook", 1, 0, 16},
		{"handle", 1, 0, 17},	{0, 0, 0, 0},
	};
	struct options o = {.egress = 1, .threads = 1, .table_len = 1 << 20};
	struct instance in;
	int opt;

	if (argc < 2)
		die(2, "usage: fecdrop attach|set|reset|stats|log|detach|hooks|probe|testrun|bench|selftest [options]");
	o.cmd = argv[1];
	o.cfg.t_k = 1ULL << 32;
	optind = 2;
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'd': o.dev = optarg; break;
		case 'P': o.pin = optarg; break;
		case 'n': o.netns = optarg; break;
		case 'D':
			if (strcmp(optarg, "egress") && strcmp(optarg, "ingress"))
				die(2, "direction must be egress or ingress, not %s", optarg);
			o.egress = !strcmp(optarg, "egress");
			break;
		case 'L': o.log_bytes = parse_u64(optarg, "log size"); break;
		case 'm':
			o.have_model = 1;
			if (!strcmp(optarg, "none")) o.cfg.model = FD_MODEL_NONE;
			else if (!strcmp(optarg, "uniform")) o.cfg.model = FD_MODEL_UNIFORM;
			else if (!strcmp(optarg, "ge")) o.cfg.model = FD_MODEL_GE;
			else if (!strcmp(optarg, "trace")) o.cfg.model = FD_MODEL_TRACE;
			else die(2, "unknown model %s", optarg);
			break;
		case 's': o.cfg.seed = parse_u64(optarg, "seed"); break;
		case 'S': o.cfg.stream = parse_u64(optarg, "stream"); break;
		case 1: o.cfg.t_drop = parse_threshold(optarg, "drop"); break;
		case 2: o.cfg.t_p = parse_threshold(optarg, "p"); break;
		case 3: o.cfg.t_r = parse_threshold(optarg, "r"); break;
		case 4: o.cfg.t_k = parse_threshold(optarg, "k"); break;
		case 5: o.cfg.t_h = parse_threshold(optarg, "h"); break;
		case 6: o.table_len = parse_u64(optarg, "table length"); break;
		case 7: o.trace = optarg; break;
		case 8:
			o.cfg.filter_proto = parse_u64(optarg, "protocol");
			o.cfg.filter_flags |= FD_FILTER_PROTO;
			break;
		case 9:
			o.cfg.filter_port = parse_u64(optarg, "port");
			if (o.cfg.filter_port > 65535)
				die(2, "port %s out of range", optarg);
			o.cfg.filter_flags |= FD_FILTER_PORT;
			break;
		case 10: parse_addr(optarg, o.cfg.filter_src, &o.cfg); o.cfg.filter_flags |= FD_FILTER_SRC; break;
		case 11: parse_addr(optarg, o.cfg.filter_dst, &o.cfg); o.cfg.filter_flags |= FD_FILTER_DST; break;
		case 12: o.packets = parse_u64(optarg, "packet count"); break;
		case 13:
			o.threads = parse_u64(optarg, "thread count");
			if (o.threads < 1 || o.threads > 64)
				die(2, "threads must be in 1..64");
			break;
		case 14: o.out = optarg; break;
		case 15: o.repeat = parse_u64(optarg, "repeat"); break;
		case 16:
			if (!strcmp(optarg, "auto")) o.hook = HOOK_AUTO;
			else if (!strcmp(optarg, "tcx")) o.hook = HOOK_TCX;
			else if (!strcmp(optarg, "clsact")) o.hook = HOOK_CLSACT;
			else die(2, "hook must be auto, tcx or clsact, not %s", optarg);
			break;
		case 17:
			o.handle = parse_u64(optarg, "handle");
			if (!o.handle || o.handle != parse_u64(optarg, "handle"))
				die(2, "handle must be in 1..2^32-1");
			break;
		default: die(2, "bad option (see the comment at the top of fecdrop.c)");
		}
	}
	if (o.cfg.model == FD_MODEL_TRACE && !o.trace)
		die(2, "the trace model needs --trace FILE");
	if (o.cfg.model == FD_MODEL_TRACE && o.table_len == 1 << 20)
		o.table_len = 0; /* trace length: last index + 1 unless given */
	if (o.cfg.log)
		o.cfg.log = 1;
	if (o.log_bytes)
		o.cfg.log = 1;
	libbpf_set_print(NULL);

	if (!strcmp(o.cmd, "selftest"))
		return cmd_selftest();
	if (!strcmp(o.cmd, "attach"))
		cmd_attach(&o);
	else if (!strcmp(o.cmd, "detach"))
		cmd_detach(&o);
	else if (!strcmp(o.cmd, "hooks"))
		cmd_hooks(&o);
	else if (!strcmp(o.cmd, "probe"))
		printf("{\"tcx\": %s}\n", tcx_supported(1) ? "true" : "false");
	else if (!strcmp(o.cmd, "testrun"))
		cmd_testrun(&o);
	else if (!strcmp(o.cmd, "bench"))
		cmd_bench(&o);
	else if (!strcmp(o.cmd, "set") || !strcmp(o.cmd, "reset") || !strcmp(o.cmd, "stats") ||
		 !strcmp(o.cmd, "log")) {
		if (!o.pin)
			die(2, "%s needs --pin", o.cmd);
		if (!strcmp(o.cmd, "log")) {
			cmd_log(&o);
			return 0;
		}
		open_pinned(o.pin, &in);
		if (!strcmp(o.cmd, "set")) {
			if (!o.have_model)
				die(2, "set needs --model");
			configure(&in, &o, 1);
		} else if (!strcmp(o.cmd, "reset")) {
			reset_stream(&in);
		} else {
			print_stats(&in);
		}
	} else {
		die(2, "unknown command %s", o.cmd);
	}
	return 0;
}
