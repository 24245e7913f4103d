/*
 * delayline: a layer-2 bridge between two interfaces that delays every frame by a constant time
 * per direction (the userspace replacement for netem's delay on kernels without netem).
 *
 * One AF_PACKET socket per interface, batched recvmmsg, PACKET_VNET_HDR so offloaded
 * frames (GSO, partial checksums) cross unchanged, a FIFO per direction released at arrival + D
 * by a timerfd armed on the earliest head frame. Frames leave through the egress qdisc and clsact
 * of the other interface, so tbf and tc filters attached there apply.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "flows.h"
#include "queue.h"
#include "series.h"
#include "trace.h"

#define BATCH 64
#define SLOT_BYTES 2048            /* a 1500-byte MTU frame plus the virtio-net header */
#define OVERFLOW_BYTES (65536 + 1024) /* the rest of a GSO frame larger than a slot */
#define SOCKET_BUFFER_BYTES (32 << 20)
#define MAX_CLIENTS 16
#define CLIENT_LINE_BYTES 512
#define DEFAULT_MAX_QUEUE 100000
#define MAX_MAX_QUEUE 10000000
#define DEFAULT_RT_PRIORITY 10

/*
 * Lateness of a sent frame = when sendmsg was called - its release time (arrival + delay): what the
 * emulation added beyond the configured delay. Counted in buckets whose upper edges are these (µs;
 * the last bucket is everything above), so a quantile is known to its bucket's edge; since the
 * last `clear` command (the campaign runner clears at the start of each run).
 */
static const uint64_t late_edges_us[] = {5, 10, 20, 50, 100, 200, 300, 500, 750, 1000, 2000, 5000, 10000, 20000, 50000};
#define LATE_BUCKETS (sizeof(late_edges_us) / sizeof(late_edges_us[0]) + 1)

struct lateness {
	uint64_t hist[LATE_BUCKETS];
	uint64_t max_ns, sum_ns;
};

struct counters {
	uint64_t rx, tx, drop_queue, drop_egress, errors, max_queue;
	uint64_t flushed; /* frames discarded by a `flush` command (the previous run's, still queued) */
	uint64_t gso; /* frames that were GSO super-packets (offloads left on upstream) */
	uint64_t rx_errors; /* failed reads (no frame), e.g. ENETDOWN while the interface is down */
	uint64_t drop_link; /* frames a trace link's drop-tail queue refused (trace.h) */
};

/* One direction: frames read from rx_fd wait in q, then leave through tx_fd. */
struct direction {
	const char *name;
	int rx_fd, tx_fd;
	struct dl_queue q;
	uint64_t delay_ns;
	struct counters c;
	struct lateness late;
	bool tx_blocked; /* the socket's send buffer is full: wait for EPOLLOUT */
	struct dl_flows flows; /* per-flow arrivals and queue drops, when asked (`flows` command) */
	bool traced; /* a trace link: frames leave at the trace's delivery opportunities (`trace` command) */
	struct dl_trace trace;
	char trace_file[400];
	bool series_on; /* the delay follows a series (`delays` command) instead of delay_ns */
	struct dl_series series;
	char series_file[400];
	uint64_t last_release_ns; /* the latest release time given: a series' shorter delay never reorders */
};

struct client {
	int fd;
	size_t len;
	char line[CLIENT_LINE_BYTES];
};

static struct direction dir_ab = {.name = "ab"}, dir_ba = {.name = "ba"};
static int sock_a = -1, sock_b = -1, epfd = -1, timer_fd = -1, signal_fd = -1, listen_fd = -1;
static uint64_t timer_armed_ns; /* 0: disarmed */
static struct client clients[MAX_CLIENTS];
static uint8_t overflow[BATCH][OVERFLOW_BYTES];

static void usage(FILE *out)
{
	fprintf(out,
		"usage: delayline --if-a IFNAME --if-b IFNAME --delay-ab-us N --delay-ba-us N\n"
		"                 --control /path/ctl.sock [--max-queue PACKETS (default %d)]\n"
		"                 [--rt-priority N (SCHED_FIFO priority 1-99, 0: normal scheduling; default %d)]\n"
		"Bridges two interfaces at layer 2, delaying frames from A to B by delay-ab and\n"
		"from B to A by delay-ba (microseconds, at most %llu). Prints 'ready' once running;\n"
		"stops on SIGTERM or SIGINT. Control socket commands: 'set delay_ab_us=N delay_ba_us=N',\n"
		"'stats', 'clear', 'flush', 'flows ab|ba bin_us=N|off', 'flowstats',\n"
		"'trace ab|ba file=PATH [packets=N|bytes=N] [offset_ms=N]', 'trace ab|ba restart [offset_ms=N]|off',\n"
		"'delays ab|ba file=PATH [offset_ms=N]', 'delays ab|ba restart [offset_ms=N]|off'.\n",
		DEFAULT_MAX_QUEUE, DEFAULT_RT_PRIORITY, DL_MAX_DELAY_US);
}

static void bad_argument(const char *fmt, const char *what)
{
	fprintf(stderr, "delayline: ");
	fprintf(stderr, fmt, what);
	fprintf(stderr, "\n");
	usage(stderr);
	exit(2);
}

static void fatal(const char *what)
{
	fprintf(stderr, "delayline: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void epoll_watch(int fd, uint32_t events, int op)
{
	struct epoll_event ev = {.events = events, .data.fd = fd};

	if (epoll_ctl(epfd, op, fd, &ev) < 0)
		fatal("epoll_ctl");
}

/* Socket events: always readable; writable only while a direction sending on it is blocked. */
static void update_socket_events(int fd)
{
	uint32_t events = EPOLLIN;

	if ((dir_ab.tx_fd == fd && dir_ab.tx_blocked) || (dir_ba.tx_fd == fd && dir_ba.tx_blocked))
		events |= EPOLLOUT;
	epoll_watch(fd, events, EPOLL_CTL_MOD);
}

static void set_buffer(int fd, int force_opt, int opt, int bytes)
{
	/* The FORCE variants ignore the sysctl caps (needs CAP_NET_ADMIN); fall back to the capped ones. */
	if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof(bytes)) < 0 &&
	    setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes)) < 0)
		fatal("setting a socket buffer size");
}

static int open_packet_socket(const char *ifname)
{
	int one = 1, ifindex = (int)if_nametoindex(ifname), fd;
	struct packet_mreq promisc = {.mr_type = PACKET_MR_PROMISC};
	struct sockaddr_ll addr = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL)};

	if (!ifindex)
		bad_argument("no interface %s in this network namespace", ifname);
	/* Protocol 0: receive nothing until bound to the interface. */
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		fatal("socket(AF_PACKET) (needs CAP_NET_RAW)");
	if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) < 0)
		fatal("PACKET_VNET_HDR");
	/* Our own sends on this interface must not come back as received frames. */
	if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) < 0)
		fatal("PACKET_IGNORE_OUTGOING");
	set_buffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, SOCKET_BUFFER_BYTES);
	set_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, SOCKET_BUFFER_BYTES);
	/* A bridge port sees frames for every address; dropped automatically when the socket closes. */
	promisc.mr_ifindex = ifindex;
	if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &promisc, sizeof(promisc)) < 0)
		fatal("PACKET_ADD_MEMBERSHIP promiscuous");
	addr.sll_ifindex = ifindex;
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
		fatal("bind to interface");
	return fd;
}

/* Count a frame (with its virtio-net header) in d's per-flow counters: arrived, or refused by the queue. */
static void count_flow(struct direction *d, const uint8_t *buf, uint32_t len, uint64_t arrival, bool dropped)
{
	struct dl_flow_key key;
	const uint32_t vnet = sizeof(struct virtio_net_hdr);

	if (!d->flows.counting || len < vnet || dl_flow_of(buf + vnet, len - vnet, &key) < 0)
		return;
	/* The frame's length from its Ethernet header on, as the dropper's skb->len counts it. */
	dl_flows_count(&d->flows, &key, arrival, len - vnet, dropped);
}

/*
 * A trace link's departure for a frame whose delay has passed (its release time): the opportunity its last
 * byte is served in, counted as mm-link counts a packet (its IP bytes and a tun header). False when the
 * link's drop-tail queue refuses it (counted as drop_link) or without memory (an error).
 */
static bool leaves_by_trace(struct direction *d, struct dl_slot *s)
{
	uint32_t ip_bytes = s->len - (uint32_t)(sizeof(struct virtio_net_hdr) + ETH_HLEN);
	int rc = dl_trace_enter(&d->trace, s->release_ns, ip_bytes + DL_TRACE_PACKET_OVERHEAD, &s->release_ns);

	if (rc == 1)
		d->c.drop_link++;
	else if (rc < 0)
		d->c.errors++;
	return rc == 0;
}

/* Read frames from d's interface into its queue until the socket is empty (bounded per wake-up). */
static void receive(struct direction *d)
{
	static struct mmsghdr msgs[BATCH];
	static struct iovec iovs[BATCH][2];
	static struct sockaddr_ll from[BATCH];

	for (int round = 0; round < 16; round++) {
		uint32_t avail = dl_queue_reserve(&d->q, BATCH), keep = 0;
		bool discard = avail == 0; /* queue full: read into the overflow area, count as drops */
		uint32_t want = discard ? BATCH : avail;
		uint64_t arrival;
		int n;

		for (uint32_t i = 0; i < want; i++) {
			struct dl_slot *s = discard ? NULL : dl_queue_free_slot(&d->q, i);
			int k = 0;

			if (s)
				iovs[i][k++] = (struct iovec){s->buf, s->cap};
			iovs[i][k++] = (struct iovec){overflow[i], OVERFLOW_BYTES};
			msgs[i].msg_hdr = (struct msghdr){.msg_name = &from[i], .msg_namelen = sizeof(from[i]),
							  .msg_iov = iovs[i], .msg_iovlen = k};
		}
		n = recvmmsg(d->rx_fd, msgs, want, MSG_DONTWAIT, NULL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return;
			d->c.rx_errors++;
			return;
		}
		arrival = now_ns();
		for (int i = 0; i < n; i++) {
			uint32_t len = msgs[i].msg_len;
			struct dl_slot *s;

			if (from[i].sll_pkttype == PACKET_OUTGOING)
				continue; /* kernels that ignore PACKET_IGNORE_OUTGOING */
			d->c.rx++;
			if (discard) {
				d->c.drop_queue++;
				if (!(msgs[i].msg_hdr.msg_flags & MSG_TRUNC)) {
					count_flow(d, overflow[i], len, arrival, false);
					count_flow(d, overflow[i], len, arrival, true);
				}
				continue;
			}
			if ((msgs[i].msg_hdr.msg_flags & MSG_TRUNC) || len < sizeof(struct virtio_net_hdr) + ETH_HLEN) {
				d->c.errors++;
				continue;
			}
			s = dl_queue_free_slot(&d->q, i);
			if (len > s->cap) { /* a large GSO frame: its tail is in the overflow area */
				uint32_t head = s->cap;

				if (dl_slot_grow(s, len) < 0) {
					d->c.errors++;
					continue;
				}
				memcpy(s->buf + head, overflow[i], len - head);
			}
			if (((struct virtio_net_hdr *)s->buf)->gso_type != VIRTIO_NET_HDR_GSO_NONE)
				d->c.gso++;
			s->len = len;
			s->release_ns = arrival + (d->series_on ? dl_series_delay_ns(&d->series, arrival) : d->delay_ns);
			if (d->series_on && s->release_ns < d->last_release_ns)
				s->release_ns = d->last_release_ns; /* a FIFO: right after the frame ahead */
			d->last_release_ns = s->release_ns;
			s->arrival_ns = arrival;
			count_flow(d, s->buf, len, arrival, false);
			if (d->traced && !leaves_by_trace(d, s)) {
				count_flow(d, s->buf, len, arrival, true);
				continue;
			}
			if (keep != (uint32_t)i) { /* close the gap left by skipped frames */
				struct dl_slot *dst = dl_queue_free_slot(&d->q, keep), tmp = *dst;

				*dst = *s;
				*s = tmp;
			}
			keep++;
		}
		dl_queue_push(&d->q, keep);
		if (d->q.count > d->c.max_queue)
			d->c.max_queue = d->q.count;
		if (n < (int)want)
			return;
	}
}

/*
 * Send every due frame of d; stop when its socket's send buffer is full. One sendmsg per frame:
 * sendmmsg reports a failure after the first frame only as a short count and loses its errno, so a
 * frame the egress qdisc dropped (ENOBUFS) would be offered again, which a real router never does.
 */
static void count_lateness(struct lateness *l, uint64_t late_ns)
{
	size_t b = 0;

	while (b < LATE_BUCKETS - 1 && late_ns > late_edges_us[b] * 1000)
		b++;
	l->hist[b]++;
	l->sum_ns += late_ns;
	if (late_ns > l->max_ns)
		l->max_ns = late_ns;
}

static void release(struct direction *d, uint64_t now)
{
	if (d->tx_blocked)
		return;
	while (dl_queue_due(&d->q, now, 1)) {
		struct dl_slot *s = dl_queue_at(&d->q, 0);
		struct iovec iov = {s->buf, s->len};
		struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

		uint64_t sent_at = now_ns();

		if (sendmsg(d->tx_fd, &msg, MSG_DONTWAIT) >= 0) {
			d->c.tx++;
			count_lateness(&d->late, sent_at > s->release_ns ? sent_at - s->release_ns : 0);
		} else if (errno == EINTR) {
			continue;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			d->tx_blocked = true;
			update_socket_events(d->tx_fd);
			return;
		} else if (errno == ENOBUFS) {
			d->c.drop_egress++; /* the egress qdisc (e.g. tbf's queue limit) dropped it */
			count_flow(d, s->buf, s->len, s->arrival_ns, true);
		} else {
			d->c.errors++;
		}
		dl_queue_pop(&d->q, 1);
	}
}

/* Arm the timer on the earliest head frame still waiting. */
static void arm_timer(void)
{
	uint64_t next = 0;
	struct direction *dirs[2] = {&dir_ab, &dir_ba};
	struct itimerspec when = {0};

	for (int i = 0; i < 2; i++) {
		struct direction *d = dirs[i];

		if (d->q.count && !d->tx_blocked) {
			uint64_t t = dl_queue_at(&d->q, 0)->release_ns;

			if (!next || t < next)
				next = t;
		}
	}
	if (next == timer_armed_ns)
		return;
	if (next) {
		when.it_value.tv_sec = (time_t)(next / 1000000000ULL);
		when.it_value.tv_nsec = (long)(next % 1000000000ULL);
	}
	if (timerfd_settime(timer_fd, TFD_TIMER_ABSTIME, &when, NULL) < 0)
		fatal("timerfd_settime");
	timer_armed_ns = next;
}

/* A direction's trace link as JSON (null when it has none). */
static void format_trace(char *out, size_t n, const struct direction *d)
{
	const struct dl_trace *t = &d->trace;

	if (!d->traced) {
		snprintf(out, n, "null");
		return;
	}
	snprintf(out, n,
		 "{\"file\": \"%s\", \"lines\": %u, \"period_ms\": %" PRIu64 ", \"offset_ms\": %" PRIu64
		 ", \"started_ns\": %" PRIu64 ", \"loops\": %" PRIu64 ", \"limit\": %" PRIu64 ", \"unit\": \"%s\""
		 ", \"accepted\": %" PRIu64 ", \"accepted_bytes\": %" PRIu64 ", \"dropped\": %" PRIu64 "}",
		 d->trace_file, t->lines, t->period_ns / 1000000, t->offset_ns / 1000000, t->started_ns,
		 dl_trace_loops(t, now_ns()), t->limit, t->limit_in_bytes ? "bytes" : "packets", t->accepted,
		 t->accepted_bytes, t->dropped);
}

/* A direction's delay series as JSON (null when its delay is a constant). */
static void format_series(char *out, size_t n, const struct direction *d)
{
	const struct dl_series *s = &d->series;

	if (!d->series_on) {
		snprintf(out, n, "null");
		return;
	}
	snprintf(out, n,
		 "{\"file\": \"%s\", \"steps\": %u, \"period_ms\": %" PRIu64 ", \"offset_ms\": %" PRIu64
		 ", \"started_ns\": %" PRIu64 ", \"loops\": %" PRIu64 "}",
		 d->series_file, s->steps, s->period_ns / 1000000, s->offset_ns / 1000000, s->started_ns,
		 dl_series_loops(s, now_ns()));
}

static int format_counters(char *out, size_t n, const struct direction *d)
{
	const struct counters *c = &d->c;
	char hist[LATE_BUCKETS * 21 + 2], trace[1024], series[1024];
	size_t used = 0;

	format_trace(trace, sizeof(trace), d);
	format_series(series, sizeof(series), d);
	for (size_t b = 0; b < LATE_BUCKETS; b++)
		used += (size_t)snprintf(hist + used, sizeof(hist) - used, "%s%" PRIu64, b ? ", " : "", d->late.hist[b]);
	return snprintf(out, n,
			"{\"rx\": %" PRIu64 ", \"tx\": %" PRIu64 ", \"drop_queue\": %" PRIu64
			", \"drop_egress\": %" PRIu64 ", \"errors\": %" PRIu64 ", \"queue\": %u, \"max_queue\": %" PRIu64
			", \"limit\": %u, \"gso\": %" PRIu64 ", \"rx_errors\": %" PRIu64 ", \"flushed\": %" PRIu64
			", \"late_hist\": [%s], \"late_max_us\": %.3f, \"late_sum_us\": %.3f, \"drop_link\": %" PRIu64
			", \"trace\": %s, \"delays\": %s}",
			c->rx, c->tx, c->drop_queue, c->drop_egress, c->errors, d->q.count, c->max_queue, d->q.limit,
			c->gso, c->rx_errors, c->flushed, hist, (double)d->late.max_ns / 1e3,
			(double)d->late.sum_ns / 1e3, c->drop_link, trace, series);
}

static void format_edges(char *out, size_t n)
{
	size_t used = 0;

	for (size_t b = 0; b + 1 < LATE_BUCKETS; b++)
		used += (size_t)snprintf(out + used, n - used, "%s%" PRIu64, b ? ", " : "", late_edges_us[b]);
}

/* Send a long reply whole (a client reads until the newline): wait for room, at most a second in all. */
static int send_all(int fd, const char *text, size_t len)
{
	int waited_ms = 0;

	while (len) {
		ssize_t n = send(fd, text, len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			text += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && waited_ms < 1000) {
			struct pollfd p = {.fd = fd, .events = POLLOUT};

			poll(&p, 1, 10);
			waited_ms += 10;
			continue;
		}
		return -1;
	}
	return 0;
}

/* `traceidle`: a trace link's idle opportunities per bin since its start, up to now (one line). */
static void reply_idle(struct client *cl, struct direction *d)
{
	struct dl_trace *t = &d->trace;
	uint64_t now = now_ns(), bins;
	size_t cap, len;
	char *line;

	if (!d->traced || !t->idle) {
		send(cl->fd, "error traceidle: this direction is no trace link\n", 49, MSG_NOSIGNAL | MSG_DONTWAIT);
		return;
	}
	dl_trace_settle(t, now);
	bins = (now - t->started_ns) / (DL_TRACE_IDLE_BIN_MS * 1000000ULL) + 1;
	if (bins > DL_TRACE_IDLE_BINS)
		bins = DL_TRACE_IDLE_BINS;
	cap = 160 + bins * 11;
	line = malloc(cap);
	if (!line) {
		send(cl->fd, "error out of memory\n", 20, MSG_NOSIGNAL | MSG_DONTWAIT);
		return;
	}
	len = (size_t)snprintf(line, cap, "{\"bin_ms\": %d, \"started_ns\": %" PRIu64 ", \"total\": %" PRIu64
			       ", \"idle\": [", DL_TRACE_IDLE_BIN_MS, t->started_ns, t->idle_total);
	for (uint64_t b = 0; b < bins; b++)
		len += (size_t)snprintf(line + len, cap - len, "%s%u", b ? ", " : "", t->idle[b]);
	len += (size_t)snprintf(line + len, cap - len, "]}\n");
	if (send_all(cl->fd, line, len) < 0) {
		close(cl->fd);
		cl->fd = -1;
	}
	free(line);
}

/* `flowstats`: both directions' per-flow counters, one line. */
static void reply_flows(struct client *cl)
{
	char *ab = dl_flows_json(&dir_ab.flows), *ba = dl_flows_json(&dir_ba.flows), *line = NULL;
	size_t len = 0;

	if (ab && ba) {
		len = strlen(ab) + strlen(ba) + 32;
		line = malloc(len);
	}
	if (line)
		len = (size_t)snprintf(line, len, "{\"ab\": %s, \"ba\": %s}\n", ab, ba);
	if (!line || send_all(cl->fd, line, len) < 0) {
		if (!line)
			send(cl->fd, "error out of memory\n", 20, MSG_NOSIGNAL | MSG_DONTWAIT);
		close(cl->fd);
		cl->fd = -1;
	}
	free(line);
	free(ab);
	free(ba);
}

/*
 * `trace`: load a trace (replacing the direction's previous one), restart it, or turn it off. Frames already
 * queued keep their release times: the runner flushes between runs, before it changes a link.
 */
static void set_trace(struct direction *d, const struct dl_command *cmd, char *reply, size_t n)
{
	char err[512];
	struct dl_trace loaded;

	if (cmd->trace_action == DL_TRACE_OFF) {
		dl_trace_free(&d->trace);
		d->traced = false;
		snprintf(reply, n, "ok\n");
		return;
	}
	if (cmd->trace_action == DL_TRACE_RESTART) {
		if (!d->traced) {
			snprintf(reply, n, "error trace %s restart: this direction has no trace\n", d->name);
			return;
		}
		dl_trace_start(&d->trace, now_ns(), cmd->trace_offset_ms * 1000000ULL);
		snprintf(reply, n, "ok\n");
		return;
	}
	if (dl_trace_load(&loaded, cmd->trace_path, err, sizeof(err)) < 0) {
		snprintf(reply, n, "error %s\n", err);
		return;
	}
	loaded.limit = cmd->trace_limit;
	loaded.limit_in_bytes = cmd->trace_limit_in_bytes;
	dl_trace_free(&d->trace);
	d->trace = loaded;
	snprintf(d->trace_file, sizeof(d->trace_file), "%s", cmd->trace_path);
	dl_trace_start(&d->trace, now_ns(), cmd->trace_offset_ms * 1000000ULL);
	d->traced = true;
	snprintf(reply, n, "ok %u %" PRIu64 "\n", d->trace.lines, d->trace.period_ns / 1000000);
}

/* `delays`: load a delay series (replacing the direction's constant delay), restart it, or turn it off. */
static void set_series(struct direction *d, const struct dl_command *cmd, char *reply, size_t n)
{
	char err[512];
	struct dl_series loaded;

	if (cmd->trace_action == DL_TRACE_OFF) {
		dl_series_free(&d->series);
		d->series_on = false;
		snprintf(reply, n, "ok\n");
		return;
	}
	if (cmd->trace_action == DL_TRACE_RESTART) {
		if (!d->series_on) {
			snprintf(reply, n, "error delays %s restart: this direction has no delay series\n", d->name);
			return;
		}
		dl_series_start(&d->series, now_ns(), cmd->trace_offset_ms * 1000000ULL);
		snprintf(reply, n, "ok\n");
		return;
	}
	if (dl_series_load(&loaded, cmd->trace_path, err, sizeof(err)) < 0) {
		snprintf(reply, n, "error %s\n", err);
		return;
	}
	dl_series_free(&d->series);
	d->series = loaded;
	snprintf(d->series_file, sizeof(d->series_file), "%s", cmd->trace_path);
	dl_series_start(&d->series, now_ns(), cmd->trace_offset_ms * 1000000ULL);
	d->series_on = true;
	snprintf(reply, n, "ok %u %" PRIu64 "\n", d->series.steps, d->series.period_ns / 1000000);
}

static void reply_to(struct client *cl, const char *line)
{
	char reply[8192];
	char err[512];
	struct dl_command cmd;

	if (dl_parse_command(line, &cmd, err, sizeof(err)) < 0) {
		snprintf(reply, sizeof(reply), "error %s\n", err);
	} else if (cmd.kind == DL_CMD_FLOWSTATS) {
		reply_flows(cl);
		return;
	} else if (cmd.kind == DL_CMD_TRACEIDLE) {
		reply_idle(cl, cmd.flow_dir ? &dir_ba : &dir_ab);
		return;
	} else if (cmd.kind == DL_CMD_FLOWS) {
		struct dl_flows *f = cmd.flow_dir ? &dir_ba.flows : &dir_ab.flows;

		if (cmd.flows_off)
			dl_flows_stop(f);
		if (!cmd.flows_off && dl_flows_start(f, now_ns(), cmd.flow_bin_us * 1000) < 0)
			snprintf(reply, sizeof(reply), "error out of memory\n");
		else
			snprintf(reply, sizeof(reply), "ok\n");
	} else if (cmd.kind == DL_CMD_SET) {
		if (cmd.has_ab)
			dir_ab.delay_ns = cmd.delay_ab_us * 1000;
		if (cmd.has_ba)
			dir_ba.delay_ns = cmd.delay_ba_us * 1000;
		snprintf(reply, sizeof(reply), "ok\n");
	} else if (cmd.kind == DL_CMD_CLEAR) {
		memset(&dir_ab.late, 0, sizeof(dir_ab.late));
		memset(&dir_ba.late, 0, sizeof(dir_ba.late));
		snprintf(reply, sizeof(reply), "ok\n");
	} else if (cmd.kind == DL_CMD_FLUSH) {
		/* Discard what both queues hold (the main loop then disarms the timer); counted, not sent. */
		uint64_t n = dir_ab.q.count + dir_ba.q.count;

		dir_ab.c.flushed += dir_ab.q.count;
		dl_queue_pop(&dir_ab.q, dir_ab.q.count);
		dir_ba.c.flushed += dir_ba.q.count;
		dl_queue_pop(&dir_ba.q, dir_ba.q.count);
		dl_trace_flush(&dir_ab.trace);
		dl_trace_flush(&dir_ba.trace);
		dir_ab.last_release_ns = dir_ba.last_release_ns = 0; /* nothing ahead of the next frame now */
		snprintf(reply, sizeof(reply), "ok %" PRIu64 "\n", n);
	} else if (cmd.kind == DL_CMD_TRACE) {
		set_trace(cmd.flow_dir ? &dir_ba : &dir_ab, &cmd, reply, sizeof(reply));
	} else if (cmd.kind == DL_CMD_DELAYS) {
		set_series(cmd.flow_dir ? &dir_ba : &dir_ab, &cmd, reply, sizeof(reply));
	} else {
		char ab[3072], ba[3072], edges[256];

		format_counters(ab, sizeof(ab), &dir_ab);
		format_counters(ba, sizeof(ba), &dir_ba);
		format_edges(edges, sizeof(edges));
		snprintf(reply, sizeof(reply), "{\"ab\": %s, \"ba\": %s, \"delay_ab_us\": %" PRIu64
			 ", \"delay_ba_us\": %" PRIu64 ", \"late_edges_us\": [%s]}\n",
			 ab, ba, dir_ab.delay_ns / 1000, dir_ba.delay_ns / 1000, edges);
	}
	/* Replies are short and clients read them: a client that does not is disconnected. */
	if (send(cl->fd, reply, strlen(reply), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		close(cl->fd);
		cl->fd = -1;
	}
}

static void close_client(struct client *cl)
{
	close(cl->fd);
	cl->fd = -1;
}

static void serve_client(struct client *cl)
{
	ssize_t n = recv(cl->fd, cl->line + cl->len, sizeof(cl->line) - 1 - cl->len, MSG_DONTWAIT);
	char *start, *nl;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		close_client(cl);
		return;
	}
	cl->len += (size_t)n;
	cl->line[cl->len] = '\0';
	start = cl->line;
	while (cl->fd >= 0 && (nl = strchr(start, '\n'))) {
		*nl = '\0';
		reply_to(cl, start);
		start = nl + 1;
	}
	if (cl->fd < 0)
		return;
	cl->len = strlen(start);
	memmove(cl->line, start, cl->len + 1);
	if (cl->len == sizeof(cl->line) - 1) {
		send(cl->fd, "error line too long\n", 20, MSG_NOSIGNAL | MSG_DONTWAIT);
		close_client(cl);
	}
}

static void accept_client(void)
{
	int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0)
		return;
	for (int i = 0; i < MAX_CLIENTS; i++) {
		if (clients[i].fd < 0) {
			clients[i] = (struct client){.fd = fd};
			epoll_watch(fd, EPOLLIN, EPOLL_CTL_ADD);
			return;
		}
	}
	send(fd, "error too many control clients\n", 31, MSG_NOSIGNAL | MSG_DONTWAIT);
	close(fd);
}

static int open_control_socket(const char *path)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	struct stat st;
	int fd;

	if (strlen(path) >= sizeof(addr.sun_path))
		bad_argument("--control path too long (at most 107 bytes): %s", path);
	strcpy(addr.sun_path, path);
	/* A socket left by a killed delayline would make bind fail; anything else at that path is kept. */
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		fatal("socket(AF_UNIX)");
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		fprintf(stderr, "delayline: cannot create control socket %s: %s\n", path, strerror(errno));
		exit(errno == ENOENT || errno == EADDRINUSE || errno == EACCES ? 2 : 1);
	}
	if (listen(fd, 8) < 0)
		fatal("listen");
	return fd;
}

static uint64_t parse_number(const char *option, const char *text, uint64_t min, uint64_t max)
{
	uint64_t v;

	if (dl_parse_u64(text, max, &v) < 0 || v < min) {
		fprintf(stderr, "delayline: %s must be an integer from %" PRIu64 " to %" PRIu64 ", got '%s'\n",
			option, min, max, text);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	enum { OPT_IF_A = 1, OPT_IF_B, OPT_AB, OPT_BA, OPT_CONTROL, OPT_MAX_QUEUE, OPT_RT_PRIORITY, OPT_HELP };
	static const struct option options[] = {
		{"if-a", required_argument, NULL, OPT_IF_A},
		{"if-b", required_argument, NULL, OPT_IF_B},
		{"delay-ab-us", required_argument, NULL, OPT_AB},
		{"delay-ba-us", required_argument, NULL, OPT_BA},
		{"control", required_argument, NULL, OPT_CONTROL},
		{"max-queue", required_argument, NULL, OPT_MAX_QUEUE},
		{"rt-priority", required_argument, NULL, OPT_RT_PRIORITY},
		{"help", no_argument, NULL, OPT_HELP},
		{0},
	};
	const char *if_a = NULL, *if_b = NULL, *control = NULL;
	uint64_t delay_ab = 0, delay_ba = 0, max_queue = DEFAULT_MAX_QUEUE, rt_priority = DEFAULT_RT_PRIORITY;
	bool have_ab = false, have_ba = false, running = true;
	sigset_t stop_signals;
	int opt;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case OPT_IF_A: if_a = optarg; break;
		case OPT_IF_B: if_b = optarg; break;
		case OPT_AB: delay_ab = parse_number("--delay-ab-us", optarg, 0, DL_MAX_DELAY_US); have_ab = true; break;
		case OPT_BA: delay_ba = parse_number("--delay-ba-us", optarg, 0, DL_MAX_DELAY_US); have_ba = true; break;
		case OPT_CONTROL: control = optarg; break;
		case OPT_MAX_QUEUE: max_queue = parse_number("--max-queue", optarg, 1, MAX_MAX_QUEUE); break;
		case OPT_RT_PRIORITY: rt_priority = parse_number("--rt-priority", optarg, 0, 99); break;
		case OPT_HELP: usage(stdout); return 0;
		default: bad_argument("unknown option or missing value: %s", argv[optind - 1]);
		}
	}
	if (optind < argc)
		bad_argument("unexpected argument: %s", argv[optind]);
	if (!if_a || !if_b || !have_ab || !have_ba || !control)
		bad_argument("%s", "--if-a, --if-b, --delay-ab-us, --delay-ba-us and --control are required");
	if (!strcmp(if_a, if_b))
		bad_argument("--if-a and --if-b must differ (both are %s)", if_a);
	if (!control[0])
		bad_argument("%s", "--control must be a path");

	/* Deliver stop signals through a signalfd so the loop sees them between batches. */
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGTERM);
	sigaddset(&stop_signals, SIGINT);
	sigprocmask(SIG_BLOCK, &stop_signals, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* Timer wake-ups as precise as the kernel allows (the default slack is 50 µs). */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	/*
	 * On a busy machine a normal-priority process woken by its timer may wait milliseconds for a CPU
	 * (p99 error 0.4-1.6 ms measured here, 0.05 ms with SCHED_FIFO). The loop only runs on events,
	 * and the kernel's real-time throttling still leaves other tasks 5 % of every CPU.
	 */
	if (rt_priority) {
		struct sched_param param = {.sched_priority = (int)rt_priority};

		if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &param) < 0)
			fprintf(stderr, "delayline: warning: no real-time priority (%s); delays may jitter under load\n",
				strerror(errno));
	}

	sock_a = open_packet_socket(if_a);
	sock_b = open_packet_socket(if_b);
	dir_ab = (struct direction){.name = "ab", .rx_fd = sock_a, .tx_fd = sock_b, .delay_ns = delay_ab * 1000};
	dir_ba = (struct direction){.name = "ba", .rx_fd = sock_b, .tx_fd = sock_a, .delay_ns = delay_ba * 1000};
	if (dl_queue_init(&dir_ab.q, (uint32_t)max_queue, SLOT_BYTES) < 0 ||
	    dl_queue_init(&dir_ba.q, (uint32_t)max_queue, SLOT_BYTES) < 0)
		fatal("allocating the queues");
	for (int i = 0; i < MAX_CLIENTS; i++)
		clients[i].fd = -1;

	epfd = epoll_create1(EPOLL_CLOEXEC);
	timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	signal_fd = signalfd(-1, &stop_signals, SFD_NONBLOCK | SFD_CLOEXEC);
	if (epfd < 0 || timer_fd < 0 || signal_fd < 0)
		fatal("creating epoll, timerfd or signalfd");
	listen_fd = open_control_socket(control);
	epoll_watch(sock_a, EPOLLIN, EPOLL_CTL_ADD);
	epoll_watch(sock_b, EPOLLIN, EPOLL_CTL_ADD);
	epoll_watch(timer_fd, EPOLLIN, EPOLL_CTL_ADD);
	epoll_watch(signal_fd, EPOLLIN, EPOLL_CTL_ADD);
	epoll_watch(listen_fd, EPOLLIN, EPOLL_CTL_ADD);

	printf("ready\n");
	fflush(stdout);

	while (running) {
		struct epoll_event events[8];
		int n = epoll_wait(epfd, events, 8, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			fatal("epoll_wait");
		}
		for (int i = 0; i < n; i++) {
			int fd = events[i].data.fd;
			uint32_t ev = events[i].events;

			if (fd == sock_a || fd == sock_b) {
				struct direction *in = fd == sock_a ? &dir_ab : &dir_ba;
				struct direction *out = fd == sock_a ? &dir_ba : &dir_ab;

				if (ev & EPOLLOUT && out->tx_blocked) {
					out->tx_blocked = false;
					update_socket_events(fd);
				}
				if (ev & (EPOLLIN | EPOLLERR))
					receive(in);
			} else if (fd == timer_fd) {
				uint64_t expirations;

				if (read(timer_fd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN)
					fatal("read timerfd");
				timer_armed_ns = 0; /* a fired absolute timer is disarmed */
			} else if (fd == signal_fd) {
				running = false;
			} else if (fd == listen_fd) {
				accept_client();
			} else {
				for (int c = 0; c < MAX_CLIENTS; c++)
					if (clients[c].fd == fd)
						serve_client(&clients[c]);
			}
		}
		uint64_t now = now_ns();

		release(&dir_ab, now);
		release(&dir_ba, now);
		arm_timer();
	}

	unlink(control);
	for (int c = 0; c < MAX_CLIENTS; c++)
		if (clients[c].fd >= 0)
			close(clients[c].fd);
	close(listen_fd);
	close(sock_a);
	close(sock_b);
	dl_queue_free(&dir_ab.q);
	dl_queue_free(&dir_ba.q);
	dl_flows_free(&dir_ab.flows);
	dl_flows_free(&dir_ba.flows);
	dl_trace_free(&dir_ab.trace);
	dl_trace_free(&dir_ba.trace);
	dl_series_free(&dir_ab.series);
	dl_series_free(&dir_ba.series);
	return 0;
}
