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
 *   fecdrop flows   --pin DIR           JSON per-flow counters: [proto, sport, dport, bin, packets, bytes, dropped]
 *   fecdrop log     --pin DIR --out F   drain the verdict log (struct fd_record[]) into F
 *   fecdrop detach  --pin DIR           detach (tcx link; or clsact filter, in its namespace) and remove the pins
 *   fecdrop hooks   --dev IF [--netns PATH]   number of droppers on the interface's hooks (JSON)
 *   fecdrop probe                       does the kernel have tcx links? (JSON)
 *   fecdrop testrun MODEL --packets N --threads T --out F
 *                   BPF_PROG_TEST_RUN from T threads on T CPUs; F gets one byte per index (verdict)
 *   fecdrop reference MODEL --packets N --out F
 *                   the same file from the sequential model, without the kernel (any user)
 *   fecdrop bench   [--repeat N]        ns per packet of the empty program and of each model
 *   fecdrop selftest
 * MODEL: --model NAME --seed S --stream S --t PARAM=T ... (the model's thresholds by name, see models/)
 *        --table-len N (chained models: packets to pre-generate) --trace FILE (little-endian u64 indices)
 *        --flow-bin-ms MS (count packets per flow and MS-long time bin from this set on; default: off)
 *        --min-len N (frames shorter than N bytes pass untouched and take no index: unmatched; default 0)
 * FILTER: --proto N --port N --src ADDR --dst ADDR
 * Thresholds are integers in [0, 2^32] computed by the Python side (probability * 2^32, rounded).
 * Exit status: 0 ok, 2 user error (message on stderr), 1 anything else.
 *
 * Files (libbpf-bootstrap style: one BPF object, its skeleton, small user-space files by concept):
 *   shared.h       shared with the BPF program: configuration, counters, records, the hash
 *   fecdrop.bpf.c  the tc program (direct action), built into the skeleton build/fecdrop.skel.h
 *   empty.bpf.c    the empty tc program the benchmark compares with
 *   fecdrop.c      this command line: options, dispatch                    (commands.h)
 *   die.c          die(): print the error, exit 2 (user) or 1                (die.h)
 *   models.h       the loss models, one file each in models/: registered once, dispatched by id
 *   model.c        the models in user space: lookup, tables, sequential reference (model.h)
 *   loader.c       the skeleton, pinned maps, configure, reset, stats, log   (loader.h)
 *   attach.c       hooks: tcx link or clsact filter, hooks, probe, detach
 *   verify.c       BPF_PROG_TEST_RUN feeders and `testrun`                   (verify.h)
 *   bench.c        `bench`
 *   selftest.c     `selftest`: known answers (any user), kernel = model.c (root) */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <bpf/libbpf.h>

#include "commands.h"
#include "die.h"
#include "loader.h"
#include "model.h"

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

/* The model's thresholds: its defaults, then each --t NAME=T by the names its file gives them. */
static void set_thresholds(struct fd_config *c, const char **given, int n)
{
	const struct fd_model *m = model_by_id(c->model);

	memcpy(c->t, m->defaults, sizeof(c->t));
	for (int g = 0; g < n; g++) {
		const char *eq = strchr(given[g], '=');
		int i = 0;

		if (!eq)
			die(2, "--t %s: write NAME=THRESHOLD", given[g]);
		while (i < FD_MODEL_PARAMS && m->params[i] &&
		       (strncmp(m->params[i], given[g], eq - given[g]) || m->params[i][eq - given[g]]))
			i++;
		if (i == FD_MODEL_PARAMS || !m->params[i])
			die(2, "model %s has no parameter %.*s", m->name, (int)(eq - given[g]), given[g]);
		c->t[i] = parse_threshold(eq + 1, m->params[i]);
	}
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
		{"t", 1, 0, 1},		{"table-len", 1, 0, 6},	  {"trace", 1, 0, 7},	  {"proto", 1, 0, 8},
		{"port", 1, 0, 9},	{"src", 1, 0, 10},	  {"dst", 1, 0, 11},	  {"packets", 1, 0, 12},
		{"threads", 1, 0, 13},	{"out", 1, 0, 14},	  {"repeat", 1, 0, 15},	  {"hook", 1, 0, 16},
		{"handle", 1, 0, 17},	{"flow-bin-ms", 1, 0, 18}, {"min-len", 1, 0, 19}, {0, 0, 0, 0},
	};
	struct options o = {.egress = 1, .threads = 1};
	const char *thresholds[FD_MODEL_PARAMS * 2];
	int opt, n_thresholds = 0, table_len_given = 0;

	if (argc < 2)
		die(2, "usage: fecdrop attach|set|reset|stats|flows|log|detach|hooks|probe|testrun|reference|bench|selftest "
		       "[options]");
	o.cmd = argv[1];
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
			o.cfg.model = model_id(optarg);
			break;
		case 's': o.cfg.seed = parse_u64(optarg, "seed"); break;
		case 'S': o.cfg.stream = parse_u64(optarg, "stream"); break;
		case 1:
			if (n_thresholds == FD_MODEL_PARAMS * 2)
				die(2, "too many --t options");
			thresholds[n_thresholds++] = optarg;
			break;
		case 6:
			o.table_len = parse_u64(optarg, "table length");
			table_len_given = 1;
			break;
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
		case 18:
			o.cfg.flow_bin_ns = parse_u64(optarg, "flow bin") * 1000000ULL;
			if (!o.cfg.flow_bin_ns || o.cfg.flow_bin_ns > 3600000000000ULL)
				die(2, "flow bin must be 1 ms to 1 h");
			o.cfg.flows = 1;
			break;
		case 19:
			o.cfg.min_len = parse_u64(optarg, "minimum length");
			if (o.cfg.min_len > 65535)
				die(2, "minimum length %s beyond 65535 bytes", optarg);
			break;
		default: die(2, "bad option (see the comment at the top of fecdrop.c)");
		}
	}
	set_thresholds(&o.cfg, thresholds, n_thresholds);
	if (!table_len_given)
		o.table_len = model_by_id(o.cfg.model)->default_table_len;
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
		cmd_probe();
	else if (!strcmp(o.cmd, "testrun"))
		cmd_testrun(&o);
	else if (!strcmp(o.cmd, "reference"))
		cmd_reference(&o);
	else if (!strcmp(o.cmd, "bench"))
		cmd_bench(&o);
	else if (!strcmp(o.cmd, "set") || !strcmp(o.cmd, "reset") || !strcmp(o.cmd, "stats") ||
		 !strcmp(o.cmd, "log") || !strcmp(o.cmd, "flows")) {
		if (!o.pin)
			die(2, "%s needs --pin", o.cmd);
		if (!strcmp(o.cmd, "log"))
			cmd_log(&o);
		else if (!strcmp(o.cmd, "set"))
			cmd_set(&o);
		else if (!strcmp(o.cmd, "reset"))
			cmd_reset(&o);
		else if (!strcmp(o.cmd, "flows"))
			cmd_flows(&o);
		else
			cmd_stats(&o);
	} else {
		die(2, "unknown command %s", o.cmd);
	}
	return 0;
}
