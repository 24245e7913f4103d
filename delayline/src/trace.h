/*
 * A trace link: a direction whose rate follows a packet-delivery trace in Mahimahi's format (one line per
 * millisecond offset at which 1504 bytes may leave; repeated lines are several opportunities in that
 * millisecond; the trace loops with the period of its last line), with mm-link's drop-tail queue.
 *
 * A frame enters the link when its delay has passed (dropper -> delay -> link, as tbf is on other links).
 * The link is a FIFO served only at opportunities, so a frame's departure is known when it enters: the
 * opportunity in which its last byte is served, given the frames before it. The delay element computes it
 * when the frame is read and holds the frame until then; the queue's occupancy at entry is likewise known.
 */
#ifndef DELAYLINE_TRACE_H
#define DELAYLINE_TRACE_H

#include <stddef.h>
#include <stdint.h>

/* Bytes one delivery opportunity serves: mm-link's PACKET_SIZE (a 1500-byte IP packet and its 4-byte tun header). */
#define DL_TRACE_OPPORTUNITY_BYTES 1504
/* What mm-link counts beyond a packet's IP bytes (the tun header it reads with each packet). */
#define DL_TRACE_PACKET_OVERHEAD 4
/* The most lines a trace may have (Mahimahi's longest published traces have a few million). */
#define DL_TRACE_MAX_LINES 100000000U

/* Idle opportunities (nothing waiting: lost) are counted per bin of this many ms since the trace's last start, for
   as many bins (an hour): what tells a run limited by the link from one limited by its sender. */
#define DL_TRACE_IDLE_BIN_MS 100
#define DL_TRACE_IDLE_BINS 36000

/* A frame in the link: when its service began (the opportunity it started in), when it leaves, its charge. */
struct dl_trace_frame {
	uint64_t start_ns, depart_ns;
	uint32_t bytes;
};

struct dl_trace {
	uint32_t *opp_ms; /* the trace: nondecreasing millisecond offsets */
	uint32_t lines;
	uint64_t period_ns; /* the last line's offset: the loop's length */
	int64_t base_ns; /* CLOCK_MONOTONIC time of the trace's millisecond 0 in loop 0 (before boot: negative) */
	uint64_t offset_ns; /* where in the trace the last (re)start began */
	uint64_t started_ns; /* CLOCK_MONOTONIC time of the last (re)start */
	/* mm-link's drop-tail: frames waiting (not the one being served), in packets or bytes; 0 = unlimited */
	uint64_t limit;
	int limit_in_bytes;
	/* the opportunity the last scheduled frame ended in (global index: loop × lines + line; -1 none), bytes left */
	int64_t current;
	uint32_t left;
	uint64_t last_entry_ns;
	/* frames that have not left at the last entry time: a ring grown by doubling */
	struct dl_trace_frame *ring;
	uint32_t ring_size, ring_head, ring_count;
	uint64_t waiting_bytes; /* sum of the ring's charges */
	/* counters since load */
	uint64_t accepted, dropped, accepted_bytes;
	/* opportunities nobody used, per bin since the last start; `classified`: the first one not yet known used or idle */
	uint32_t *idle;
	int64_t classified;
	uint64_t idle_total;
};

/* Read a Mahimahi trace file. 0, or -1 with the reason (naming the file and line) in err. */
int dl_trace_load(struct dl_trace *t, const char *path, char *err, size_t errlen);
/* The same from text in memory (the unit tests). */
int dl_trace_parse(struct dl_trace *t, const char *text, const char *name, char *err, size_t errlen);
void dl_trace_free(struct dl_trace *t);

/* Start (or restart) the trace so that `offset_ns` into it is `now_ns`; the link is empty afterwards. */
void dl_trace_start(struct dl_trace *t, uint64_t now_ns, uint64_t offset_ns);
/* Forget the frames in the link (they were discarded): the next frame finds an empty link. */
void dl_trace_flush(struct dl_trace *t);

/*
 * A frame of `bytes` (as mm-link counts it) entering the link at `entry_ns`: 0 with its departure time in
 * *depart_ns, or 1 when the drop-tail queue is full (the frame is dropped), or -1 without memory.
 * Entry times never go back (an earlier one counts as the latest seen: the link is a FIFO).
 */
int dl_trace_enter(struct dl_trace *t, uint64_t entry_ns, uint32_t bytes, uint64_t *depart_ns);

/* The CLOCK_MONOTONIC time of opportunity `index` (global: loop × lines + line). */
uint64_t dl_trace_opportunity_ns(const struct dl_trace *t, int64_t index);
/* Classify the opportunities up to now_ns that no frame used as idle (the rest are counted as frames use them). */
void dl_trace_settle(struct dl_trace *t, uint64_t now_ns);

/* How many whole loops of the trace have passed at now_ns since its start. */
uint64_t dl_trace_loops(const struct dl_trace *t, uint64_t now_ns);

#endif
