/* The timing queue: a FIFO of frames, each released at its arrival time + the direction's delay. */
#ifndef DELAYLINE_QUEUE_H
#define DELAYLINE_QUEUE_H

#include <stdint.h>

/* One queued frame (virtio-net header + Ethernet frame, as read from the packet socket). */
struct dl_slot {
	uint64_t release_ns; /* CLOCK_MONOTONIC time at which it may leave */
	uint64_t arrival_ns; /* when it was read (its per-flow time bin: flows.h) */
	uint8_t *buf;
	uint32_t len;
	uint32_t cap;
};

/*
 * A ring of slots grown by doubling (never holding more than `limit` frames). A slot keeps its
 * buffer after its frame left, so in steady state nothing is allocated and memory follows the
 * deepest queue seen, not the limit.
 */
struct dl_queue {
	struct dl_slot *slots;
	uint32_t size; /* ring size, a power of two */
	uint32_t head;
	uint32_t count;
	uint32_t limit;
	uint32_t slot_bytes; /* initial buffer size of a slot */
};

int dl_queue_init(struct dl_queue *q, uint32_t limit, uint32_t slot_bytes);
void dl_queue_free(struct dl_queue *q);

/*
 * Prepare up to n free slots behind the tail (growing the ring if needed, never beyond the limit)
 * and return how many are ready. Slot pointers stay valid until the next reserve.
 */
uint32_t dl_queue_reserve(struct dl_queue *q, uint32_t n);
/* The i-th free slot behind the tail (i < what reserve returned). */
struct dl_slot *dl_queue_free_slot(struct dl_queue *q, uint32_t i);
/* Append the first n free slots, which the caller filled. */
void dl_queue_push(struct dl_queue *q, uint32_t n);

/* The i-th queued frame from the head (i < count). */
struct dl_slot *dl_queue_at(struct dl_queue *q, uint32_t i);
/* Remove n frames from the head. */
void dl_queue_pop(struct dl_queue *q, uint32_t n);
/* How many head frames (at most max) may leave at now_ns. FIFO: stops at the first one not due. */
uint32_t dl_queue_due(const struct dl_queue *q, uint64_t now_ns, uint32_t max);

/* Grow a slot's buffer to at least bytes, keeping its contents. 0 on success, -1 without memory. */
int dl_slot_grow(struct dl_slot *s, uint32_t bytes);

#endif
