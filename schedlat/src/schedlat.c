// SPDX-License-Identifier: GPL-2.0
/* schedlat: loader and control tool of the scheduler-latency tracer (called by fecbench.timekeeping.schedlat).
 *
 *   schedlat attach DIR            load the BPF object, attach its three programs (BTF tracepoints) and
 *                                  pin the links and maps in DIR (a bpffs folder): they stay attached after
 *                                  this command exits; removing DIR detaches them
 *   schedlat track DIR CGID SLOT   count the threads of the cgroup whose v2 id is CGID in slot SLOT
 *   schedlat untrack DIR CGID      stop counting that cgroup
 *   schedlat read DIR SLOT         the slot's histograms and long waits' spans as JSON
 *   schedlat clear DIR SLOT        zero the slot
 *   schedlat layout                the shared layout as JSON (fecbench.timekeeping.schedlat checks it), any user
 *   schedlat selftest              known answers of the bucket function, any user
 * Exit status: 0 ok, 2 user error (message on stderr), 1 anything else. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "schedlat.h"
#include "schedlat.skel.h"

static const char *const PINS[] = {"link_wakeup", "link_wakeup_new", "link_switch", "groups", "starts", "results"};
#define NPINS (sizeof(PINS) / sizeof(PINS[0]))

static void die(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "schedlat: error: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(code);
}

static unsigned long long number(const char *text, const char *what)
{
	char *end;
	unsigned long long value;

	errno = 0;
	value = strtoull(text, &end, 10);
	if (errno || end == text || *end)
		die(2, "%s: not a number: %s", what, text);
	return value;
}

static int pinned(const char *dir, const char *name)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = bpf_obj_get(path);
	if (fd < 0)
		die(2, "no tracer pinned at %s (%s)", dir, strerror(errno));
	return fd;
}

static void unpin_all(const char *dir)
{
	char path[512];

	for (size_t i = 0; i < NPINS; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, PINS[i]);
		unlink(path);
	}
	rmdir(dir);
}

static void pin(int err, const char *dir, const char *name)
{
	if (err) {
		unpin_all(dir);
		die(1, "cannot pin %s in %s: %s", name, dir, strerror(-err));
	}
}

static int attach(const char *dir)
{
	struct schedlat_bpf *skel;
	struct bpf_link *links[3];
	char path[512];

	if (mkdir(dir, 0700) && errno != EEXIST)
		die(2, "cannot make %s: %s (is bpffs mounted?)", dir, strerror(errno));
	skel = schedlat_bpf__open_and_load();
	if (!skel) {
		rmdir(dir);
		die(1, "cannot load the BPF object (needs root, BTF and BPF tracing): %s", strerror(errno));
	}
	links[0] = bpf_program__attach(skel->progs.sl_wakeup);
	links[1] = bpf_program__attach(skel->progs.sl_wakeup_new);
	links[2] = bpf_program__attach(skel->progs.sl_switch);
	for (int i = 0; i < 3; i++) {
		if (!links[i]) {
			rmdir(dir);
			die(1, "cannot attach %s: %s", PINS[i], strerror(errno));
		}
	}
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, PINS[i]);
		pin(bpf_link__pin(links[i], path), dir, PINS[i]);
	}
	snprintf(path, sizeof(path), "%s/groups", dir);
	pin(bpf_map__pin(skel->maps.groups, path), dir, "groups");
	snprintf(path, sizeof(path), "%s/starts", dir);
	pin(bpf_map__pin(skel->maps.starts, path), dir, "starts");
	snprintf(path, sizeof(path), "%s/results", dir);
	pin(bpf_map__pin(skel->maps.results, path), dir, "results");
	/* The pins keep programs and maps alive; this process's references go with it. */
	for (int i = 0; i < 3; i++)
		bpf_link__disconnect(links[i]);
	printf("{\"pin\": \"%s\", \"slots\": %d}\n", dir, SL_SLOTS);
	return 0;
}

static struct sl_slot *map_slots(const char *dir, int writable)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	int fd = pinned(dir, "results");
	size_t size;
	void *p;

	if (bpf_obj_get_info_by_fd(fd, &info, &len) || info.value_size != sizeof(struct sl_slot) ||
	    info.max_entries != SL_SLOTS)
		die(2, "the tracer at %s was attached by another build of schedlat: remove it and attach again", dir);
	size = ((size_t)info.value_size * info.max_entries + 4095) & ~(size_t)4095;
	p = mmap(NULL, size, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		die(1, "mmap results: %s", strerror(errno));
	return p;
}

static __u32 slot_arg(const char *text)
{
	unsigned long long slot = number(text, "slot");

	if (slot >= SL_SLOTS)
		die(2, "slot %llu: expected 0 to %d", slot, SL_SLOTS - 1);
	return (__u32)slot;
}

static int track(const char *dir, const char *cgid, const char *slot_text)
{
	__u64 id = number(cgid, "cgroup id");
	__u32 slot = slot_arg(slot_text);
	int fd = pinned(dir, "groups");

	if (bpf_map_update_elem(fd, &id, &slot, BPF_ANY))
		die(1, "track cgroup %llu: %s", (unsigned long long)id, strerror(errno));
	return 0;
}

static int untrack(const char *dir, const char *cgid)
{
	__u64 id = number(cgid, "cgroup id");
	int fd = pinned(dir, "groups");

	if (bpf_map_delete_elem(fd, &id) && errno != ENOENT)
		die(1, "untrack cgroup %llu: %s", (unsigned long long)id, strerror(errno));
	return 0;
}

static void print_hist(const char *name, const struct sl_hist *h)
{
	printf("\"%s\": {\"count\": %llu, \"sum_ns\": %llu, \"max_ns\": %llu, \"buckets\": [", name,
	       (unsigned long long)h->count, (unsigned long long)h->sum_ns, (unsigned long long)h->max_ns);
	for (int b = 0; b < SL_BUCKETS; b++)
		printf("%s%llu", b ? ", " : "", (unsigned long long)h->buckets[b]);
	printf("]}");
}

static int read_slot(const char *dir, const char *slot_text, int clear)
{
	__u32 slot = slot_arg(slot_text);
	struct sl_slot *slots = map_slots(dir, clear);

	if (clear) {
		memset(&slots[slot], 0, sizeof(slots[slot]));
		return 0;
	}
	printf("{");
	print_hist("wake", &slots[slot].kind[SL_WAKE]);
	printf(", ");
	print_hist("preempt", &slots[slot].kind[SL_PREEMPT]);
	printf(", \"spans_seen\": %llu, \"spans\": [", (unsigned long long)slots[slot].spans_seen);
	for (__u64 i = 0; i < slots[slot].spans_seen && i < SL_SPANS; i++)
		printf("%s[%llu, %llu]", i ? ", " : "", (unsigned long long)slots[slot].spans[i].start_ns,
		       (unsigned long long)slots[slot].spans[i].end_ns);
	printf("]}\n");
	return 0;
}

static int layout(void)
{
	printf("{\"slots\": %d, \"buckets\": %d, \"slot_size\": %zu, \"kinds\": [\"wake\", \"preempt\"], "
	       "\"hist_size\": %zu, \"buckets_offset\": %zu, \"spans\": %d, \"span_min_ns\": %llu, "
	       "\"spans_seen_offset\": %zu, \"spans_offset\": %zu, \"upper_ns\": [",
	       SL_SLOTS, SL_BUCKETS, sizeof(struct sl_slot), sizeof(struct sl_hist),
	       (size_t)__builtin_offsetof(struct sl_hist, buckets), SL_SPANS, SL_SPAN_MIN_NS,
	       (size_t)__builtin_offsetof(struct sl_slot, spans_seen), (size_t)__builtin_offsetof(struct sl_slot, spans));
	for (int b = 0; b < SL_BUCKETS; b++)
		printf("%s%llu", b ? ", " : "", (unsigned long long)sl_upper_ns(b));
	printf("]}\n");
	return 0;
}

static int selftest(void)
{
	static const struct { __u64 ns; __u32 bucket; } known[] = {
		{0, 0}, {1023, 0}, {1024, 0}, {1151, 0}, {1152, 1}, {2047, 7}, {2048, 8},
		{1000000, 79}, {1048576, 80}, {(1ULL << 35) - 1, SL_BUCKETS - 1}, {~0ULL, SL_BUCKETS - 1},
	};
	int failed = 0;

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		__u32 got = sl_bucket(known[i].ns);

		if (got != known[i].bucket) {
			fprintf(stderr, "sl_bucket(%llu) = %u, expected %u\n", (unsigned long long)known[i].ns, got,
				known[i].bucket);
			failed++;
		}
	}
	/* Every bucket's values lie below its upper edge and at or above the previous edge. */
	for (__u32 b = 1; b < SL_BUCKETS; b++) {
		__u64 low = sl_upper_ns(b - 1), high = sl_upper_ns(b);

		if (low >= high || sl_bucket(low) != b || sl_bucket(high - 1) != b) {
			fprintf(stderr, "bucket %u: [%llu, %llu) maps to %u and %u\n", b, (unsigned long long)low,
				(unsigned long long)high, sl_bucket(low), sl_bucket(high - 1));
			failed++;
		}
	}
	printf("selftest: %s\n", failed ? "FAILED" : "ok");
	return failed ? 1 : 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: schedlat attach DIR | track DIR CGID SLOT | untrack DIR CGID | read DIR SLOT | "
			"clear DIR SLOT | layout | selftest\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "";

	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	if (!strcmp(cmd, "attach") && argc == 3)
		return attach(argv[2]);
	if (!strcmp(cmd, "track") && argc == 5)
		return track(argv[2], argv[3], argv[4]);
	if (!strcmp(cmd, "untrack") && argc == 4)
		return untrack(argv[2], argv[3]);
	if (!strcmp(cmd, "read") && argc == 4)
		return read_slot(argv[2], argv[3], 0);
	if (!strcmp(cmd, "clear") && argc == 4)
		return read_slot(argv[2], argv[3], 1);
	if (!strcmp(cmd, "layout") && argc == 2)
		return layout();
	if (!strcmp(cmd, "selftest") && argc == 2)
		return selftest();
	usage();
	return 2;
}
