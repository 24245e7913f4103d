// SPDX-License-Identifier: GPL-2.0
/* Verification: feed test packets to an unattached copy of the program with BPF_PROG_TEST_RUN, from
 * several threads on distinct CPUs, and collect the verdict logged for every index (`testrun`, which
 * fecbench.dropper.testrun compares with the numpy reference; the self-test compares with model.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "commands.h"
#include "die.h"
#include "loader.h"
#include "model.h"
#include "verify.h"
#include "fecdrop.skel.h"

size_t build_packet(__u8 *buf)
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

void *feed(void *arg)
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
	while (f->fed < f->total) {
		__u64 batch = f->total - f->fed < 16 ? f->total - f->fed : 16;
		LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt, .data_size_in = len, .repeat = batch);
		if (bpf_prog_test_run_opts(f->prog_fd, &opts)) {
			f->failed = errno;
			break;
		}
		f->fed += batch;
	}
	return NULL;
}

__u32 ring_size_for(__u64 records)
{
	__u64 bytes = records * (sizeof(struct fd_record) + 8) + 4096, size = 4096;

	while (size < bytes)
		size <<= 1;
	if (size > (1ULL << 30))
		die(2, "too many packets for the verdict log");
	return size;
}

/* fecdrop testrun MODEL --packets N --threads T --out F: one verdict byte per index into F, and a JSON
 * summary (records missing, duplicated or out of range; packets fed per thread; the counters). */
void cmd_testrun(struct options *o)
{
	struct log_sink sink = {};
	struct fecdrop_bpf *skel;
	struct instance in;
	struct feeder *f;
	struct ring_buffer *rb;
	int ncpu = libbpf_num_possible_cpus();
	__u64 missing = 0;
	FILE *out;

	if (!o->out || !o->packets)
		die(2, "testrun needs --packets and --out");
	skel = load_skel(ring_size_for(o->packets));
	instance_from_skel(skel, &in);
	o->cfg.log = 1;
	configure(&in, &o->cfg, o->trace, o->table_len, 0);
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
		__u64 share = o->packets / o->threads + ((__u64)t < o->packets % o->threads);

		f[t] = (struct feeder){.prog_fd = bpf_program__fd(skel->progs.fecdrop), .cpu = t % ncpu,
				       .total = share, .start = &start};
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
