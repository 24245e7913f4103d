/* The program without a network: test packets fed with BPF_PROG_TEST_RUN (used by verify, bench and
 * the self-test). */
#ifndef FECDROP_VERIFY_H
#define FECDROP_VERIFY_H

#include <pthread.h>
#include <linux/types.h>

/* Ethernet + IPv4 + UDP, 1200-byte payload (1242 bytes, the benchmark's packet); buf holds 1500. */
size_t build_packet(__u8 *buf);

/* One thread feeding its own share of the test packets, in batches, to a program. A fixed share (not
 * batches taken from a shared counter) makes every thread run the program: on a busy machine one thread
 * could otherwise take every batch before the other was scheduled. */
struct feeder {
	pthread_t thread;
	int prog_fd, cpu;
	__u64 total, fed;
	int failed;
	pthread_barrier_t *start; /* all feeders start together, so that they overlap */
};

/* Thread body (or a plain call): feed `total` packets; sets failed to an errno. */
void *feed(void *arg);

/* Ring buffer bytes for the verdict records of `records` packets (exit 2 above 1 GiB). */
__u32 ring_size_for(__u64 records);

#endif
