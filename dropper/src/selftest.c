// SPDX-License-Identifier: GPL-2.0
/* fecdrop selftest (`make test`): the hash's known answers, shared with tests/test_dropper_model.py,
 * need no kernel and run as any user; as root, the kernel's verdicts for every model are also checked
 * against the sequential model (model.c) with BPF_PROG_TEST_RUN. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "commands.h"
#include "loader.h"
#include "model.h"
#include "verify.h"
#include "fecdrop.skel.h"

static int check(int ok, const char *what)
{
	printf("%s %s\n", ok ? "ok  " : "FAIL", what);
	return ok ? 0 : 1;
}

/* Kernel verdicts equal the sequential model, for each model (as root). */
static int selftest_kernel(void)
{
	struct fecdrop_bpf *skel = load_skel(ring_size_for(20000));
	__u64 packets = 20000;
	struct instance in;
	int fails = 0;

	instance_from_skel(skel, &in);
	char trace_path[] = "/tmp/fecdrop-selftest-XXXXXX";
	FILE *tf = fdopen(mkstemp(trace_path), "wb");

	for (__u64 i = 3; i < packets; i += i / 2 + 1) /* a sparse trace: 3, 5, 8, 13, ... */
		fwrite(&i, sizeof(i), 1, tf);
	fclose(tf);
	for (__u32 id = FD_MODEL_NONE + 1; id < FD_MODEL_COUNT; id++) { /* none drops nothing to compare */
		const struct fd_model *m = model_by_id(id);
		struct log_sink sink = {.n = packets, .verdicts = malloc(packets)};
		struct ring_buffer *rb = ring_buffer__new(in.log_fd, on_record, &sink, NULL);
		struct feeder f = {.prog_fd = bpf_program__fd(skel->progs.fecdrop), .total = packets};
		struct fd_config cfg = {.model = id, .log = 1, .seed = 0, .stream = 3};
		__u64 bad = 0, drops = 0;
		char what[128];

		memcpy(cfg.t, m->example, sizeof(cfg.t));
		memset(sink.verdicts, 0xff, packets);
		/* a chained model continues under the lock after 5000 */
		configure(&in, &cfg, trace_path, m->chained ? 5000 : 0, 0);
		feed(&f);
		ring_buffer__consume(rb);
		ring_buffer__free(rb);
		__u64 *drop = alloc_table(), *state = alloc_table();
		struct fd_config c = cfg;

		prepare_model(&c, trace_path, m->chained ? packets : 0, drop, state);
		for (__u64 i = 0; i < packets; i++) {
			int want = model_verdict(&c, drop, i);

			bad += sink.verdicts[i] != want;
			drops += want;
		}
		snprintf(what, sizeof(what), "kernel verdicts = sequential model, %s, %llu packets, %llu drops",
			 m->name, packets, drops);
		fails += check(!bad && !f.failed && drops > 0 && drops < packets, what);
		free(drop);
		free(state);
		free(sink.verdicts);
	}
	unlink(trace_path);
	fecdrop_bpf__destroy(skel);
	return fails;
}

int cmd_selftest(void)
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
