/* Native unit tests of the timing queue and the control-command parser. */
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "control.h"
#include "flows.h"
#include "queue.h"
#include "series.h"
#include "trace.h"

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
	CHECK(dl_parse_command("trace ba file=/t/x.down bytes=30000 offset_ms=12", &c, err, sizeof(err)) == 0);
	CHECK(c.kind == DL_CMD_TRACE && c.flow_dir == 1 && c.trace_action == DL_TRACE_LOAD && c.trace_limit == 30000 &&
	      c.trace_limit_in_bytes && c.trace_offset_ms == 12 && !strcmp(c.trace_path, "/t/x.down"));
	CHECK(dl_parse_command("trace ab file=/t/x packets=50", &c, err, sizeof(err)) == 0 && c.trace_limit == 50 &&
	      !c.trace_limit_in_bytes && c.flow_dir == 0);
	CHECK(dl_parse_command("trace ab restart offset_ms=5", &c, err, sizeof(err)) == 0 &&
	      c.trace_action == DL_TRACE_RESTART && c.trace_offset_ms == 5);
	CHECK(dl_parse_command("trace ab off", &c, err, sizeof(err)) == 0 && c.trace_action == DL_TRACE_OFF);
	CHECK(dl_parse_command("trace ab off offset_ms=5", &c, err, sizeof(err)) < 0);
	CHECK(dl_parse_command("trace ab packets=5", &c, err, sizeof(err)) < 0 && strstr(err, "file=PATH"));
	CHECK(dl_parse_command("trace ab file=/x packets=0", &c, err, sizeof(err)) < 0);
	CHECK(dl_parse_command("trace cd file=/x", &c, err, sizeof(err)) < 0 && strstr(err, "ab or ba"));
	CHECK(dl_parse_command("delays ab file=/a\"b", &c, err, sizeof(err)) < 0 && strstr(err, "delays: a path without"));
	CHECK(dl_parse_command("delays ab file=/s offset_ms=3", &c, err, sizeof(err)) == 0 && c.kind == DL_CMD_DELAYS &&
	      c.trace_offset_ms == 3 && !strcmp(c.trace_path, "/s"));
	CHECK(dl_parse_command("delays ab file=/s packets=3", &c, err, sizeof(err)) < 0 && strstr(err, "delays"));
	CHECK(dl_parse_command("traceidle ba", &c, err, sizeof(err)) == 0 && c.kind == DL_CMD_TRACEIDLE && c.flow_dir == 1);
	CHECK(dl_parse_command("traceidle ab x", &c, err, sizeof(err)) < 0 && dl_parse_command("traceidle", &c, err,
												   sizeof(err)) < 0);

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
	CHECK(dl_parse_command("flows ba bin_us=100000", &c, err, sizeof(err)) == 0);
	CHECK(c.kind == DL_CMD_FLOWS && c.flow_dir == 1 && !c.flows_off && c.flow_bin_us == 100000);
	CHECK(dl_parse_command("flows ab off", &c, err, sizeof(err)) == 0 && c.flow_dir == 0 && c.flows_off);
	CHECK(dl_parse_command("flows", &c, err, sizeof(err)) < 0 && strstr(err, "direction"));
	CHECK(dl_parse_command("flows up bin_us=5", &c, err, sizeof(err)) < 0 && strstr(err, "direction"));
	CHECK(dl_parse_command("flows ab", &c, err, sizeof(err)) < 0 && strstr(err, "bin_us=N or off"));
	CHECK(dl_parse_command("flows ab bin_us=0", &c, err, sizeof(err)) < 0);
	CHECK(dl_parse_command("flows ab bin_us=60000001", &c, err, sizeof(err)) < 0);
	CHECK(dl_parse_command("flows ab off now", &c, err, sizeof(err)) < 0 && strstr(err, "unexpected"));
	CHECK(dl_parse_command("flowstats", &c, err, sizeof(err)) == 0 && c.kind == DL_CMD_FLOWSTATS);
	CHECK(dl_parse_command("flowstats ab", &c, err, sizeof(err)) < 0);
}

/* An Ethernet frame carrying IPv4 (header length ihl words) with protocol proto and these L4 bytes. */
static uint32_t ipv4_frame(uint8_t *out, uint8_t proto, int ihl, const uint8_t *l4, uint32_t l4_len)
{
	memset(out, 0, 14 + 60);
	out[12] = 0x08;
	out[13] = 0x00;
	out[14] = (uint8_t)(0x40 | ihl);
	out[14 + 9] = proto;
	memcpy(out + 14 + ihl * 4, l4, l4_len);
	return 14 + (uint32_t)ihl * 4 + l4_len;
}

static void test_flow_of_frames(void)
{
	uint8_t frame[256], l4[64] = {0};
	struct dl_flow_key k;
	uint32_t len;

	/* UDP 4433 -> 5000 */
	l4[0] = 0x11; l4[1] = 0x51; l4[2] = 0x13; l4[3] = 0x88;
	len = ipv4_frame(frame, 17, 5, l4, 8);
	CHECK(dl_flow_of(frame, len, &k) == 0 && k.proto == 17 && k.sport == 4433 && k.dport == 5000);
	/* IP options: the ports after a 24-byte header */
	len = ipv4_frame(frame, 6, 6, l4, 20);
	CHECK(dl_flow_of(frame, len, &k) == 0 && k.proto == 6 && k.sport == 4433 && k.dport == 5000);
	/* a non-first fragment: no ports */
	len = ipv4_frame(frame, 17, 5, l4, 8);
	frame[14 + 7] = 0x10;
	CHECK(dl_flow_of(frame, len, &k) == 0 && k.proto == 17 && k.sport == 0 && k.dport == 0);
	/* ICMP port unreachable quoting UDP 5000 -> 4433: counted under 4433 -> 5000 */
	memset(l4, 0, sizeof(l4));
	l4[0] = 3; l4[1] = 3;
	l4[8] = 0x45; l4[8 + 9] = 17;
	l4[28] = 0x13; l4[29] = 0x88; l4[30] = 0x11; l4[31] = 0x51;
	len = ipv4_frame(frame, 1, 5, l4, 36);
	CHECK(dl_flow_of(frame, len, &k) == 0 && k.proto == 1 && k.sport == 4433 && k.dport == 5000);
	/* an echo request: ICMP without ports */
	l4[0] = 8;
	len = ipv4_frame(frame, 1, 5, l4, 36);
	CHECK(dl_flow_of(frame, len, &k) == 0 && k.proto == 1 && k.sport == 0 && k.dport == 0);
	/* ARP is not a flow; neither is a runt */
	frame[12] = 0x08; frame[13] = 0x06;
	CHECK(dl_flow_of(frame, 60, &k) < 0);
	CHECK(dl_flow_of(frame, 10, &k) < 0);
}

static void test_flow_counts_by_bin(void)
{
	struct dl_flows f = {0};
	struct dl_flow_key a = {.proto = 17, .sport = 1, .dport = 2}, b = {.proto = 17, .sport = 3, .dport = 4};
	char *json;

	dl_flows_count(&f, &a, 1000, 100, false); /* not counting yet: nothing */
	CHECK(f.used == 0 && f.lost == 0);
	CHECK(dl_flows_start(&f, 1000, 100) == 0);
	dl_flows_count(&f, &a, 999, 100, false);  /* arrived before counting started: not counted */
	dl_flows_count(&f, &a, 1000, 100, false); /* bin 0 */
	dl_flows_count(&f, &a, 1099, 50, false);  /* bin 0 */
	dl_flows_count(&f, &a, 1099, 50, true);   /* the queue refused it */
	dl_flows_count(&f, &a, 1100, 70, false);  /* bin 1 */
	dl_flows_count(&f, &b, 1250, 10, false);  /* another flow, bin 2 */
	CHECK(f.used == 3 && f.lost == 0);
	json = dl_flows_json(&f);
	CHECK(json && strstr(json, "\"counting\": true, \"t0_ns\": 1000, \"bin_ns\": 100, \"lost\": 0"));
	CHECK(json && strstr(json, "[17, 1, 2, 0, 2, 150, 1, 50]"));
	CHECK(json && strstr(json, "[17, 1, 2, 1, 1, 70, 0, 0]"));
	CHECK(json && strstr(json, "[17, 3, 4, 2, 1, 10, 0, 0]"));
	free(json);
	/* A drop of a frame whose arrival was never counted (the table was full then) is lost, not invented. */
	dl_flows_count(&f, &b, 5000, 10, true);
	CHECK(f.used == 3 && f.lost == 1);
	/* The table fills to three quarters, then counts what it cannot hold as lost. */
	for (uint32_t bin = 0; bin < DL_FLOW_ENTRIES; bin++)
		dl_flows_count(&f, &b, 1000 + (uint64_t)bin * 100, 1, false);
	CHECK(f.used == DL_FLOW_ENTRIES * 3 / 4 && f.lost > 1);
	dl_flows_stop(&f);
	CHECK(!f.counting && f.used == 0);
	json = dl_flows_json(&f);
	CHECK(json && strstr(json, "\"counting\": false") && strstr(json, "\"flows\": []"));
	free(json);
	dl_flows_free(&f);
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

#define MS 1000000ULL
#define T0 (5000 * MS) /* the CLOCK_MONOTONIC time the tests start their traces at */

static struct dl_trace trace_of(const char *text)
{
	struct dl_trace t;
	char err[256];

	if (dl_trace_parse(&t, text, "test", err, sizeof(err)) < 0) {
		fprintf(stderr, "trace refused: %s\n", err);
		failures++;
	}
	dl_trace_start(&t, T0, 0);
	return t;
}

static void test_trace_files_are_checked(void)
{
	struct dl_trace t;
	char err[256];

	CHECK(dl_trace_parse(&t, "", "x", err, sizeof(err)) < 0 && strstr(err, "empty file"));
	CHECK(dl_trace_parse(&t, "0\n0\n", "x", err, sizeof(err)) < 0 && strstr(err, "lasts 0 ms"));
	CHECK(dl_trace_parse(&t, "5\n3\n", "x", err, sizeof(err)) < 0 && strstr(err, "line 2"));
	CHECK(dl_trace_parse(&t, "5\n\n6\n", "x", err, sizeof(err)) < 0 && strstr(err, "line 2"));
	CHECK(dl_trace_parse(&t, "5\n-6\n", "x", err, sizeof(err)) < 0);
	CHECK(dl_trace_parse(&t, "1\r\n2\r\n2\n", "x", err, sizeof(err)) == 0 && t.lines == 3 && t.period_ns == 2 * MS);
	dl_trace_free(&t);
}

/* One opportunity a millisecond: full-size packets leave one a millisecond, small ones share an opportunity. */
static void test_trace_serves_bytes_at_opportunities(void)
{
	struct dl_trace t = trace_of("1\n");
	uint64_t depart;

	for (int i = 1; i <= 5; i++)
		CHECK(dl_trace_enter(&t, T0, 1504, &depart) == 0 && depart == T0 + (uint64_t)i * MS);
	for (int i = 0; i < 4; i++) /* 4 × 376 bytes fill the 6th opportunity */
		CHECK(dl_trace_enter(&t, T0, 376, &depart) == 0 && depart == T0 + 6 * MS);
	CHECK(dl_trace_enter(&t, T0, 3000, &depart) == 0 && depart == T0 + 8 * MS); /* spans the 7th and 8th */
	/* a frame that enters after the link emptied waits for the next opportunity, never one in the past */
	CHECK(dl_trace_enter(&t, T0 + 20 * MS + 1, 100, &depart) == 0 && depart == T0 + 21 * MS);
	/* entering at an opportunity's instant misses it (as mm-link, which delivers before it reads) */
	CHECK(dl_trace_enter(&t, T0 + 30 * MS, 100, &depart) == 0 && depart == T0 + 31 * MS);
	/* of the 250 opportunities in 250 ms, frames used 10 (ms 1-8, 21, 31): the rest went by idle, per 100 ms */
	dl_trace_settle(&t, T0 + 250 * MS);
	CHECK(t.idle_total == 240 && t.idle[0] == 89 && t.idle[1] == 100 && t.idle[2] == 51 && t.idle[3] == 0);
	dl_trace_free(&t);
}

/* A gap in the trace stalls the link for its length; the trace loops with the period of its last line. */
static void test_trace_gaps_and_loops(void)
{
	struct dl_trace t = trace_of("1\n2\n1000\n");
	uint64_t depart;

	CHECK(dl_trace_enter(&t, T0, 1504, &depart) == 0 && depart == T0 + 1 * MS);
	CHECK(dl_trace_enter(&t, T0, 1504, &depart) == 0 && depart == T0 + 2 * MS);
	CHECK(dl_trace_enter(&t, T0, 1504, &depart) == 0 && depart == T0 + 1000 * MS);
	CHECK(dl_trace_enter(&t, T0, 1504, &depart) == 0 && depart == T0 + 1001 * MS);
	CHECK(dl_trace_loops(&t, T0 + 2500 * MS) == 2);
	/* started 999 ms into the trace: its last opportunity, then the next loop's first */
	dl_trace_start(&t, T0, 999 * MS);
	CHECK(dl_trace_enter(&t, T0, 1504, &depart) == 0 && depart == T0 + 1 * MS);
	CHECK(dl_trace_enter(&t, T0, 1504, &depart) == 0 && depart == T0 + 2 * MS);
	dl_trace_free(&t);
}

/* mm-link's drop-tail counts what waits, not the packet being served; in packets or in bytes. */
static void test_trace_drop_tail(void)
{
	struct dl_trace t = trace_of("10\n");
	uint64_t depart;
	int dropped = 0;

	t.limit = 3;
	for (int i = 0; i < 6; i++)
		dropped += dl_trace_enter(&t, T0, 1504, &depart) == 1;
	CHECK(dropped == 3 && t.accepted == 3 && t.dropped == 3);
	/* at 10 ms the first is being served (it left at once: one opportunity), at 15 ms two wait: room for one */
	CHECK(dl_trace_enter(&t, T0 + 15 * MS, 1504, &depart) == 0 && depart == T0 + 40 * MS);
	CHECK(dl_trace_enter(&t, T0 + 15 * MS, 1504, &depart) == 1);
	dl_trace_free(&t);

	t = trace_of("10\n");
	t.limit = 4000;
	t.limit_in_bytes = 1;
	dropped = 0;
	for (int i = 0; i < 4; i++)
		dropped += dl_trace_enter(&t, T0, 1504, &depart) == 1;
	CHECK(dropped == 2 && t.accepted == 2); /* 3008 bytes wait; a third would make 4512 */
	CHECK(dl_trace_enter(&t, T0, 900, &depart) == 0); /* 3908 */
	/* a frame being served (started, not left) no longer counts: at 10 ms + 1 the 2nd and the 900 wait */
	CHECK(dl_trace_enter(&t, T0 + 10 * MS + 1, 1504, &depart) == 0);
	dl_trace_flush(&t);
	CHECK(t.ring_count == 0 && dl_trace_enter(&t, T0 + 11 * MS, 1504, &depart) == 0 && depart == T0 + 20 * MS);
	dl_trace_free(&t);
}

/* A delay series: the step in force at each instant, looping; lines checked as the topology code checks them. */
static void test_delay_series(void)
{
	struct dl_series s;
	char err[256];

	CHECK(dl_series_parse(&s, "5 10\n9 20\n", "x", err, sizeof(err)) < 0 && strstr(err, "offset 0"));
	CHECK(dl_series_parse(&s, "0 10\n9 20\n5 1\n", "x", err, sizeof(err)) < 0 && strstr(err, "line 3"));
	CHECK(dl_series_parse(&s, "0 10\n", "x", err, sizeof(err)) < 0 && strstr(err, "two lines"));
	CHECK(dl_series_parse(&s, "0 -1\n5 1\n", "x", err, sizeof(err)) < 0 && strstr(err, "line 1"));
	CHECK(dl_series_parse(&s, "0 x\n5 1\n", "x", err, sizeof(err)) < 0);
	CHECK(dl_series_parse(&s, "0 70000\n5 1\n", "x", err, sizeof(err)) < 0);
	CHECK(dl_series_parse(&s, "0 27.5\n15000,40\n15000 45.25\r\n30000 0\n", "x", err, sizeof(err)) == 0);
	CHECK(s.steps == 4 && s.period_ns == 30000 * MS);
	dl_series_start(&s, T0, 0);
	CHECK(dl_series_delay_ns(&s, T0) == 27500000 && dl_series_delay_ns(&s, T0 + 15000 * MS - 1) == 27500000);
	CHECK(dl_series_delay_ns(&s, T0 + 15000 * MS) == 45250000); /* two steps at one offset: the later one */
	CHECK(dl_series_delay_ns(&s, T0 + 29999 * MS) == 45250000);
	CHECK(dl_series_delay_ns(&s, T0 + 30000 * MS) == 27500000 && dl_series_loops(&s, T0 + 61000 * MS) == 2);
	dl_series_start(&s, T0, 20000 * MS); /* 20 s in: the second step, then the loop's first after 10 s */
	CHECK(dl_series_delay_ns(&s, T0) == 45250000 && dl_series_delay_ns(&s, T0 + 10000 * MS) == 27500000);
	dl_series_free(&s);
}

int main(void)
{
	test_fifo_order_across_growth_and_wraparound();
	test_limit_is_never_exceeded();
	test_due_releases_in_fifo_order_only();
	test_slot_grow_keeps_contents();
	test_parse_commands();
	test_parse_numbers();
	test_flow_of_frames();
	test_flow_counts_by_bin();
	test_trace_files_are_checked();
	test_trace_serves_bytes_at_opportunities();
	test_trace_gaps_and_loops();
	test_trace_drop_tail();
	test_delay_series();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("delayline unit tests: all passed\n");
	return 0;
}
