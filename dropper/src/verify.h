/* The program without a network: test packets fed with BPF_PROG_TEST_RUN (used by verify, bench and
 * the self-test). */
#ifndef FECDROP_VERIFY_H
#define FECDROP_VERIFY_H

#include <pthread.h>
#include <stdatomic.h>
#include <linux/types.h>

/* Ethernet + IPv4 + UDP, 1200-byte payload (1242 bytes, the benchmark's packet); buf holds 1500. */
size_t build_packet(__u8 *buf);

/* One thread feeding test packets, in batches taken from a shared counter, to a program. */
struct feeder {
	pthread_t thread;
	int prog_fd, cpu;
	_Atomic __u64 *issued;
	__u64 total, fed;
	int failed;
	pthread_barrier_t *start; /* all feeders start together, so that they overlap */
};

/* Thread body (or a plain call): feed packets until `total` are issued; sets failed to an errno. */
void *feed(void *arg);

/* Ring buffer bytes for the verdict records of `records` packets (exit 2 above 1 GiB). */
__u32 ring_size_for(__u64 records);

#endif
