// SPDX-License-Identifier: GPL-2.0
/* Hooks: attach an instance as a tcx link (Linux >= 6.6) or a clsact cls_bpf filter, count the droppers
 * on an interface, detach (in the namespace the instance was attached in). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/netlink.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>

#include "commands.h"
#include "die.h"
#include "loader.h"
#include "fecdrop.skel.h"

#define ATTACH_TCX_INGRESS 46 /* enum bpf_attach_type, newer than Debian's uapi headers */
#define ATTACH_TCX_EGRESS 47
#define FD_TC_PRIORITY 1 /* clsact: before the hook's other filters (a pass lets them run) */

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

/* ---------- what is on a hook ---------- */

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

/* Remove the clsact qdisc this instance created, unless a filter is still on it. */
static void destroy_qdisc_if_empty(const struct fd_attach *at)
{
	int ours = 0;

	if (at->created_qdisc && !clsact_filters(at->ifindex, 0, &ours) && !clsact_filters(at->ifindex, 1, &ours)) {
		LIBBPF_OPTS(bpf_tc_hook, qdisc, .ifindex = at->ifindex, .attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS);
		bpf_tc_hook_destroy(&qdisc);
	}
}

/* fecdrop hooks --dev IF [--netns PATH]: the number of droppers (tcx and clsact) on each hook, as JSON. */
void cmd_hooks(struct options *o)
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

void cmd_probe(void)
{
	printf("{\"tcx\": %s}\n", tcx_supported(1) ? "true" : "false");
}

/* ---------- attach ---------- */

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
	configure(in, &o->cfg, o->trace, o->table_len, 0);
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

	configure(in, &o->cfg, o->trace, o->table_len, 0);
	err = bpf_tc_hook_create(&hook);
	if (err && err != -EEXIST) {
		remove_pins(o->pin);
		die(1, "create the clsact qdisc on %s: %s", o->dev, strerror(-err));
	}
	at->created_qdisc = !err;
	save_attach(in->attach_fd, at); /* before the filter exists: a detach after a kill finds it */
	err = bpf_tc_attach(&hook, &opts);
	if (err) {
		destroy_qdisc_if_empty(at);
		remove_pins(o->pin);
		die(err == -EEXIST ? 2 : 1, "attach a filter (handle %#x, priority %u) to %s %s: %s", at->handle,
		    at->priority, o->dev, dir, strerror(-err));
	}
}

void cmd_attach(struct options *o)
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
	pin_or_die(in.flows_fd, o->pin, "flows");
	/* Until configure() resets the stream and sets the model, the program's model is "none" (zeroed
	 * .bss): it drops nothing, and the packets it sees then do not count. */
	if (at.hook == HOOK_TCX) {
		save_attach(in.attach_fd, &at);
		attach_tcx(skel, &in, o, at.ifindex);
	} else {
		attach_clsact(skel, &in, o, &at);
	}
	printf("{\"ifindex\": %u, \"hook\": \"%s\", \"handle\": %u, \"priority\": %u, \"created_qdisc\": %u}\n",
	       at.ifindex, hook_name(at.hook), at.handle, at.priority, at.created_qdisc);
}

/* ---------- detach ---------- */

/* Remove a clsact filter in its namespace, and the qdisc if this instance created it and nothing else
 * uses it. A namespace that is gone took the filter with it: nothing to do. */
static void detach_clsact(const struct fd_attach *at)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = at->ifindex, .attach_point = at->egress ? BPF_TC_EGRESS : BPF_TC_INGRESS);
	LIBBPF_OPTS(bpf_tc_opts, opts, .handle = at->handle, .priority = at->priority);
	const char *path = at->netns[0] ? at->netns : "/proc/self/ns/net";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
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
	destroy_qdisc_if_empty(at);
}

void cmd_detach(struct options *o)
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
