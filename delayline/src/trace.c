#include "trace.h"
#include "series.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_MS 1000000ULL

void dl_trace_free(struct dl_trace *t)
{
	free(t->opp_ms);
	free(t->ring);
	free(t->idle);
	memset(t, 0, sizeof(*t));
}

/* Append one opportunity (growing the array by doubling). */
static int append(struct dl_trace *t, uint32_t *cap, uint32_t ms)
{
	if (t->lines == *cap) {
		uint32_t grown = *cap ? *cap * 2 : 1024;
		uint32_t *more = realloc(t->opp_ms, (size_t)grown * sizeof(*more));

		if (!more)
			return -1;
		t->opp_ms = more;
		*cap = grown;
	}
	t->opp_ms[t->lines++] = ms;
	return 0;
}

int dl_trace_parse(struct dl_trace *t, const char *text, const char *name, char *err, size_t errlen)
{
	uint32_t cap = 0, line = 0;
	const char *p = text;

	memset(t, 0, sizeof(*t));
	while (*p) {
		const char *end = strchr(p, '\n');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char number[16];
		char *stop;
		unsigned long v;

		line++;
		if (len && p[len - 1] == '\r')
			len--;
		/* mm-link refuses empty lines; a file's final newline ends its last line, it is no empty line */
		if (!len || len >= sizeof(number) || !(p[0] >= '0' && p[0] <= '9')) {
			snprintf(err, errlen, "%s, line %u: expected a millisecond offset (a whole number), got '%.*s'",
				 name, line, (int)(len < 32 ? len : 32), p);
			goto fail;
		}
		memcpy(number, p, len);
		number[len] = '\0';
		errno = 0;
		v = strtoul(number, &stop, 10);
		if (errno || *stop || v > UINT32_MAX) {
			snprintf(err, errlen, "%s, line %u: '%s' is not a millisecond offset below 2^32", name, line, number);
			goto fail;
		}
		if (t->lines && v < t->opp_ms[t->lines - 1]) {
			snprintf(err, errlen, "%s, line %u: %lu ms is before the line above (%u ms): offsets never go back",
				 name, line, v, t->opp_ms[t->lines - 1]);
			goto fail;
		}
		if (t->lines >= DL_TRACE_MAX_LINES || append(t, &cap, (uint32_t)v) < 0) {
			snprintf(err, errlen, "%s: more than %u lines or out of memory", name, DL_TRACE_MAX_LINES);
			goto fail;
		}
		p += end ? (size_t)(end - p) + 1 : strlen(p);
	}
	if (!t->lines || !t->opp_ms[t->lines - 1]) {
		snprintf(err, errlen, "%s: %s", name, t->lines ? "the trace lasts 0 ms (its last line must be > 0)"
								 : "no delivery opportunities (an empty file)");
		goto fail;
	}
	t->period_ns = (uint64_t)t->opp_ms[t->lines - 1] * NS_PER_MS;
	t->current = -1;
	return 0;
fail:
	dl_trace_free(t);
	return -1;
}

int dl_trace_load(struct dl_trace *t, const char *path, char *err, size_t errlen)
{
	char *text = dl_read_text(path, err, errlen);
	int rc;

	memset(t, 0, sizeof(*t));
	if (!text)
		return -1;
	rc = dl_trace_parse(t, text, path, err, errlen);
	free(text);
	return rc;
}

uint64_t dl_trace_opportunity_ns(const struct dl_trace *t, int64_t index)
{
	uint64_t loop = (uint64_t)index / t->lines, line = (uint64_t)index % t->lines;

	return (uint64_t)(t->base_ns + (int64_t)(loop * t->period_ns + t->opp_ms[line] * NS_PER_MS));
}

uint64_t dl_trace_loops(const struct dl_trace *t, uint64_t now_ns)
{
	int64_t since = (int64_t)now_ns - t->base_ns;

	return since > 0 ? (uint64_t)since / t->period_ns : 0;
}

/* The first opportunity strictly after `at` (a packet arriving at an opportunity's instant misses it, as in mm-link). */
static int64_t first_after(const struct dl_trace *t, uint64_t at)
{
	uint64_t since = (uint64_t)((int64_t)at - t->base_ns), loop = since / t->period_ns;
	uint64_t within = since - loop * t->period_ns;
	uint32_t lo = 0, hi = t->lines;

	while (lo < hi) { /* the first line whose offset is beyond `within` */
		uint32_t mid = lo + (hi - lo) / 2;

		if ((uint64_t)t->opp_ms[mid] * NS_PER_MS > within)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (lo == t->lines) {
		loop++;
		lo = 0;
	}
	return (int64_t)(loop * t->lines + lo);
}

void dl_trace_flush(struct dl_trace *t)
{
	t->ring_head = t->ring_count = 0;
	t->waiting_bytes = 0;
	t->current = -1;
	t->left = 0;
}

void dl_trace_start(struct dl_trace *t, uint64_t now_ns, uint64_t offset_ns)
{
	dl_trace_flush(t);
	t->base_ns = (int64_t)now_ns - (int64_t)offset_ns;
	t->offset_ns = offset_ns;
	t->started_ns = t->last_entry_ns = now_ns;
	if (!t->idle)
		t->idle = calloc(DL_TRACE_IDLE_BINS, sizeof(*t->idle)); /* without memory: no idle counts */
	else
		memset(t->idle, 0, DL_TRACE_IDLE_BINS * sizeof(*t->idle));
	t->idle_total = 0;
	t->classified = first_after(t, now_ns);
}

/* Opportunities [t->classified, until) went by with nothing waiting: count them in their bins. */
static void count_idle(struct dl_trace *t, int64_t until)
{
	for (int64_t g = t->classified; g < until; g++) {
		uint64_t bin = (dl_trace_opportunity_ns(t, g) - t->started_ns) / (DL_TRACE_IDLE_BIN_MS * 1000000ULL);

		if (t->idle && bin < DL_TRACE_IDLE_BINS)
			t->idle[bin]++;
		t->idle_total++;
	}
	if (until > t->classified)
		t->classified = until;
}

void dl_trace_settle(struct dl_trace *t, uint64_t now_ns)
{
	/* the link is empty when its last frame's opportunity has passed: what came since then went unused */
	if (t->current < 0 || dl_trace_opportunity_ns(t, t->current) <= now_ns)
		count_idle(t, first_after(t, now_ns));
}

static struct dl_trace_frame *ring_at(const struct dl_trace *t, uint32_t i)
{
	return &t->ring[(t->ring_head + i) & (t->ring_size - 1)];
}

static int ring_push(struct dl_trace *t, struct dl_trace_frame frame)
{
	if (t->ring_count == t->ring_size) {
		uint32_t grown = t->ring_size ? t->ring_size * 2 : 256;
		struct dl_trace_frame *more = malloc((size_t)grown * sizeof(*more));

		if (!more || grown < t->ring_size) {
			free(more);
			return -1;
		}
		for (uint32_t i = 0; i < t->ring_count; i++)
			more[i] = *ring_at(t, i);
		free(t->ring);
		t->ring = more;
		t->ring_size = grown;
		t->ring_head = 0;
	}
	*ring_at(t, t->ring_count++) = frame;
	t->waiting_bytes += frame.bytes;
	return 0;
}

int dl_trace_enter(struct dl_trace *t, uint64_t entry_ns, uint32_t bytes, uint64_t *depart_ns)
{
	uint64_t waiting, waiting_bytes, start_ns;
	int64_t at;
	uint32_t need = bytes, left;

	if (entry_ns < t->last_entry_ns)
		entry_ns = t->last_entry_ns;
	t->last_entry_ns = entry_ns;
	/* the frames that have left by now are out of the link */
	while (t->ring_count && ring_at(t, 0)->depart_ns <= entry_ns) {
		t->waiting_bytes -= ring_at(t, 0)->bytes;
		t->ring_head = (t->ring_head + 1) & (t->ring_size - 1);
		t->ring_count--;
	}
	/* mm-link's queue holds the frames waiting, not the one being served (its `packet_in_transit_`) */
	waiting = t->ring_count;
	waiting_bytes = t->waiting_bytes;
	if (waiting && ring_at(t, 0)->start_ns <= entry_ns) {
		waiting--;
		waiting_bytes -= ring_at(t, 0)->bytes;
	}
	if (t->limit && (t->limit_in_bytes ? waiting_bytes + bytes > t->limit : waiting + 1 > t->limit)) {
		t->dropped++;
		return 1;
	}
	/* the rest of the opportunity the frame before ended in, if this one is there by then; else the next one */
	if (t->current >= 0 && dl_trace_opportunity_ns(t, t->current) > entry_ns) {
		at = t->left ? t->current : t->current + 1;
		left = t->left ? t->left : DL_TRACE_OPPORTUNITY_BYTES;
	} else {
		at = first_after(t, entry_ns);
		left = DL_TRACE_OPPORTUNITY_BYTES;
	}
	count_idle(t, at); /* opportunities before the one it starts in went by with nothing waiting */
	start_ns = dl_trace_opportunity_ns(t, at);
	while (need > left) {
		need -= left;
		at++;
		left = DL_TRACE_OPPORTUNITY_BYTES;
	}
	t->current = at;
	t->left = left - need;
	if (t->classified < at + 1)
		t->classified = at + 1; /* used by this frame (a later frame may share its last one) */
	*depart_ns = dl_trace_opportunity_ns(t, at);
	if (ring_push(t, (struct dl_trace_frame){start_ns, *depart_ns, bytes}) < 0)
		return -1;
	t->accepted++;
	t->accepted_bytes += bytes;
	return 0;
}
