/* Native unit tests of the timing queue and the control-command parser. */
#include <stdio.h>
#include <string.h>

#include "control.h"
#include "queue.h"

static int failures;

#define CHECK(cond)                                                                  \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                                  \
		}                                                                    \
	} while (0)

/* Push n frames whose payload is their sequence number and whose release time is base + seq. */
static uint32_t push_seq(struct dl_queue *q, uint32_t first, uint32_t n, uint64_t base)
{
	uint32_t ready = dl_queue_reserve(q, n);

	for (uint32_t i = 0; i < ready; i++) {
		struct dl_slot *s = dl_queue_free_slot(q, i);
		uint32_t seq = first + i;

		memcpy(s->buf, &seq, sizeof(seq));
		s->len = sizeof(seq);
		s->release_ns = base + seq;
	}
	dl_queue_push(q, ready);
	return ready;
}

static uint32_t seq_at(struct dl_queue *q, uint32_t i)
{
	uint32_t seq;

	memcpy(&seq, dl_queue_at(q, i)->buf, sizeof(seq));
	return seq;
}

static void test_fifo_order_across_growth_and_wraparound(void)
{
	struct dl_queue q;
	uint32_t next_in = 0, next_out = 0;

	CHECK(dl_queue_init(&q, 100000, 64) == 0);
	/* Interleave pushes and pops so the head wraps around while the ring grows. */
	for (int round = 0; round < 200; round++) {
		next_in += push_seq(&q, next_in, 37, 1000);
		uint32_t pops = round % 3 ? 20 : 5;

		for (uint32_t i = 0; i < pops && q.count; i++) {
			CHECK(seq_at(&q, 0) == next_out);
			next_out++;
			dl_queue_pop(&q, 1);
		}
	}
	CHECK(q.count == next_in - next_out);
	CHECK(q.size >= q.count && (q.size & (q.size - 1)) == 0);
	for (uint32_t i = 0; i < q.count; i++)
		CHECK(seq_at(&q, i) == next_out + i);
	dl_queue_free(&q);
}

static void test_limit_is_never_exceeded(void)
{
	struct dl_queue q;

	CHECK(dl_queue_init(&q, 100, 64) == 0);
	CHECK(push_seq(&q, 0, 64, 0) == 64);
	CHECK(push_seq(&q, 64, 64, 0) == 36); /* only 36 places left */
	CHECK(q.count == 100);
	CHECK(dl_queue_reserve(&q, 64) == 0);
	dl_queue_pop(&q, 10);
	CHECK(dl_queue_reserve(&q, 64) == 10);
	CHECK(seq_at(&q, 0) == 10 && seq_at(&q, 89) == 99);
	dl_queue_free(&q);
}

static void test_due_releases_in_fifo_order_only(void)
{
	struct dl_queue q;
	uint64_t release[] = {100, 200, 150, 300};

	CHECK(dl_queue_init(&q, 10, 64) == 0);
	CHECK(dl_queue_reserve(&q, 4) == 4);
	for (uint32_t i = 0; i < 4; i++) {
		dl_queue_free_slot(&q, i)->release_ns = release[i];
		dl_queue_free_slot(&q, i)->len = 1;
	}
	dl_queue_push(&q, 4);
	CHECK(dl_queue_due(&q, 99, 64) == 0);
	CHECK(dl_queue_due(&q, 100, 64) == 1);
	/* The frame due at 150 waits behind the one due at 200: a delay change never reorders. */
	CHECK(dl_queue_due(&q, 160, 64) == 1);
	CHECK(dl_queue_due(&q, 250, 64) == 3);
	CHECK(dl_queue_due(&q, 250, 2) == 2);
	CHECK(dl_queue_due(&q, 1000, 64) == 4);
	dl_queue_pop(&q, 4);
	CHECK(dl_queue_due(&q, 1000, 64) == 0);
	dl_queue_free(&q);
}

static void test_slot_grow_keeps_contents(void)
{
	struct dl_queue q;
	struct dl_slot *s;

	CHECK(dl_queue_init(&q, 4, 16) == 0);
	CHECK(dl_queue_reserve(&q, 1) == 1);
	s = dl_queue_free_slot(&q, 0);
	CHECK(s->cap == 16);
	memcpy(s->buf, "0123456789abcdef", 16);
	CHECK(dl_slot_grow(s, 70000) == 0);
	CHECK(s->cap == 70000 && !memcmp(s->buf, "0123456789abcdef", 16));
	dl_queue_free(&q);
}

static void test_parse_commands(void)
{
	struct dl_command c;
	char err[256];

	CHECK(dl_parse_command("stats", &c, err, sizeof(err)) == 0 && c.kind == DL_CMD_STATS);
	CHECK(dl_parse_command("stats\r", &c, err, sizeof(err)) == 0 && c.kind == DL_CMD_STATS);
	CHECK(dl_parse_command("set delay_ab_us=1500 delay_ba_us=0", &c, err, sizeof(err)) == 0);
	CHECK(c.kind == DL_CMD_SET && c.has_ab && c.has_ba && c.delay_ab_us == 1500 && c.delay_ba_us == 0);
	CHECK(dl_parse_command("set delay_ba_us=7", &c, err, sizeof(err)) == 0);
	CHECK(!c.has_ab && c.has_ba && c.delay_ba_us == 7);
	CHECK(dl_parse_command("set delay_ab_us=60000000", &c, err, sizeof(err)) == 0);

	CHECK(dl_parse_command("", &c, err, sizeof(err)) < 0);
	CHECK(dl_parse_command("reboot", &c, err, sizeof(err)) < 0 && strstr(err, "unknown command"));
	CHECK(dl_parse_command("set", &c, err, sizeof(err)) < 0);
	CHECK(dl_parse_command("set delay_ab_us=-1", &c, err, sizeof(err)) < 0);
	CHECK(dl_parse_command("set delay_ab_us=60000001", &c, err, sizeof(err)) < 0);
	CHECK(dl_parse_command("set delay_ab_us=12x", &c, err, sizeof(err)) < 0);
	CHECK(dl_parse_command("set delay_ab_us=", &c, err, sizeof(err)) < 0);
	CHECK(dl_parse_command("set rate=5", &c, err, sizeof(err)) < 0 && strstr(err, "unknown key"));
	CHECK(dl_parse_command("set delay_ab_us", &c, err, sizeof(err)) < 0);
	CHECK(dl_parse_command("stats now", &c, err, sizeof(err)) < 0);
	CHECK(dl_parse_command("clear", &c, err, sizeof(err)) == 0 && c.kind == DL_CMD_CLEAR);
	CHECK(dl_parse_command("clear all", &c, err, sizeof(err)) < 0 && strstr(err, "clear takes no arguments"));
	CHECK(dl_parse_command("flush", &c, err, sizeof(err)) == 0 && c.kind == DL_CMD_FLUSH);
	CHECK(dl_parse_command("flush now", &c, err, sizeof(err)) < 0 && strstr(err, "flush takes no arguments"));
}

static void test_parse_numbers(void)
{
	uint64_t v;

	CHECK(dl_parse_u64("0", 10, &v) == 0 && v == 0);
	CHECK(dl_parse_u64("10", 10, &v) == 0 && v == 10);
	CHECK(dl_parse_u64("11", 10, &v) < 0);
	CHECK(dl_parse_u64(" 1", 10, &v) < 0);
	CHECK(dl_parse_u64("+1", 10, &v) < 0);
	CHECK(dl_parse_u64("99999999999999999999999", UINT64_MAX, &v) < 0);
}

int main(void)
{
	test_fifo_order_across_growth_and_wraparound();
	test_limit_is_never_exceeded();
	test_due_releases_in_fifo_order_only();
	test_slot_grow_keeps_contents();
	test_parse_commands();
	test_parse_numbers();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("delayline unit tests: all passed\n");
	return 0;
}
