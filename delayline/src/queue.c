#include "queue.h"

#include <stdlib.h>
#include <string.h>

#define DL_QUEUE_INITIAL_SIZE 64

int dl_queue_init(struct dl_queue *q, uint32_t limit, uint32_t slot_bytes)
{
	memset(q, 0, sizeof(*q));
	q->limit = limit;
	q->slot_bytes = slot_bytes;
	q->size = DL_QUEUE_INITIAL_SIZE;
	q->slots = calloc(q->size, sizeof(*q->slots));
	return q->slots ? 0 : -1;
}

void dl_queue_free(struct dl_queue *q)
{
	if (q->slots)
		for (uint32_t i = 0; i < q->size; i++)
			free(q->slots[i].buf);
	free(q->slots);
	memset(q, 0, sizeof(*q));
}

/* Double the ring, copying the slots in queue order to the start of the new one. */
static int grow_ring(struct dl_queue *q)
{
	uint32_t size = q->size * 2;
	struct dl_slot *slots = calloc(size, sizeof(*slots));

	if (!slots)
		return -1;
	for (uint32_t i = 0; i < q->size; i++)
		slots[i] = q->slots[(q->head + i) & (q->size - 1)];
	free(q->slots);
	q->slots = slots;
	q->size = size;
	q->head = 0;
	return 0;
}

uint32_t dl_queue_reserve(struct dl_queue *q, uint32_t n)
{
	uint32_t room = q->limit - q->count;

	if (n > room)
		n = room;
	while (q->size - q->count < n && q->size < q->limit)
		if (grow_ring(q) < 0)
			break;
	if (n > q->size - q->count)
		n = q->size - q->count;
	for (uint32_t i = 0; i < n; i++) {
		struct dl_slot *s = dl_queue_free_slot(q, i);

		if (!s->buf) {
			s->buf = malloc(q->slot_bytes);
			if (!s->buf)
				return i;
			s->cap = q->slot_bytes;
		}
		s->len = 0;
	}
	return n;
}

struct dl_slot *dl_queue_free_slot(struct dl_queue *q, uint32_t i)
{
	return &q->slots[(q->head + q->count + i) & (q->size - 1)];
}

void dl_queue_push(struct dl_queue *q, uint32_t n)
{
	q->count += n;
}

struct dl_slot *dl_queue_at(struct dl_queue *q, uint32_t i)
{
	return &q->slots[(q->head + i) & (q->size - 1)];
}

void dl_queue_pop(struct dl_queue *q, uint32_t n)
{
	q->head = (q->head + n) & (q->size - 1);
	q->count -= n;
}

uint32_t dl_queue_due(const struct dl_queue *q, uint64_t now_ns, uint32_t max)
{
	uint32_t n = 0;

	while (n < q->count && n < max && q->slots[(q->head + n) & (q->size - 1)].release_ns <= now_ns)
		n++;
	return n;
}

int dl_slot_grow(struct dl_slot *s, uint32_t bytes)
{
	uint8_t *buf;

	if (bytes <= s->cap)
		return 0;
	buf = realloc(s->buf, bytes);
	if (!buf)
		return -1;
	s->buf = buf;
	s->cap = bytes;
	return 0;
}
