// SPDX-License-Identifier: GPL-2.0
/* The loss models, sequentially: decision tables for the kernel, and the reference verdicts that
 * `fecdrop reference` writes without touching the kernel (compared with the numpy model by
 * tests/test_dropper_model.py, as any user). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "die.h"
#include "model.h"

__u64 *alloc_table(void)
{
	__u64 *t = calloc(FD_TABLE_WORDS, sizeof(__u64));

	if (!t)
		die(1, "out of memory");
	return t;
}

/* Pre-generate the Gilbert-Elliott chain for indices [0, len): verdict in the current state, then the
 * transition. Returns the state and the loss-run length at index len. */
static void generate_ge(const struct fd_config *c, __u64 len, __u64 *drop, __u64 *state, __u64 *state_end,
			__u64 *run_end)
{
	__u64 s = 0, run = 0, dword = 0, sword = 0;

	for (__u64 i = 0; i < len; i++) {
		__u64 x = fecdrop_hash(c->key, i);
		__u32 uv = x >> 32, um = (__u32)x;
		int d = uv >= (s ? c->t_h : c->t_k);

		dword |= (__u64)d << (i & 63);
		sword |= s << (i & 63);
		run = d ? run + 1 : 0;
		s = s ? (um < c->t_r ? 0 : 1) : (um < c->t_p ? 1 : 0);
		if ((i & 63) == 63 || i + 1 == len) {
			drop[i >> 6] = dword;
			state[i >> 6] = sword;
			dword = sword = 0;
		}
	}
	*state_end = s;
	*run_end = run;
}

static void load_trace(const char *path, __u64 *drop, __u64 *len)
{
	FILE *f = fopen(path, "rb");
	__u64 idx, max = 0;
	int any = 0;

	if (!f)
		die(2, "cannot read trace file %s: %s", path, strerror(errno));
	while (fread(&idx, sizeof(idx), 1, f) == 1) {
		if (idx >= FD_TABLE_PACKETS)
			die(2, "trace index %llu is beyond the table (%llu packets)", idx, FD_TABLE_PACKETS);
		drop[idx >> 6] |= 1ULL << (idx & 63);
		if (idx + 1 > max)
			max = idx + 1;
		any = 1;
	}
	fclose(f);
	if (*len == 0)
		*len = any ? max : 0;
	if (*len < max)
		die(2, "trace length %llu is shorter than its last index + 1 (%llu)", *len, max);
}

void prepare_model(struct fd_config *c, const char *trace, __u64 table_len, __u64 *drop, __u64 *state)
{
	c->key = fecdrop_key(c->seed, c->stream);
	c->table_len = 0;
	c->chain_state0 = 0;
	c->chain_run0 = 0;
	if (c->model == FD_MODEL_GE) {
		if (table_len > FD_TABLE_PACKETS)
			table_len = FD_TABLE_PACKETS;
		generate_ge(c, table_len, drop, state, &c->chain_state0, &c->chain_run0);
		c->table_len = table_len;
	} else if (c->model == FD_MODEL_TRACE) {
		__u64 len = table_len;

		load_trace(trace, drop, &len);
		c->table_len = len;
	}
}

int model_verdict(const struct fd_config *c, const __u64 *drop, __u64 i)
{
	if (c->model == FD_MODEL_UNIFORM)
		return (fecdrop_hash(c->key, i) >> 32) < c->t_drop;
	if (c->model == FD_MODEL_NONE)
		return 0;
	return i < c->table_len && table_has(drop, i);
}

void sequence_stats(const struct fd_config *c, const __u64 *drop, __u64 n, __u64 *dropped, __u64 *bursts,
		    __u64 *longest)
{
	__u64 run = 0, best = 0, drops = 0, runs = 0;

	for (__u64 i = 0; i < n; i++) {
		int d = model_verdict(c, drop, i);

		runs += d && run == 0;
		drops += d;
		run = d ? run + 1 : 0;
		if (run > best)
			best = run;
	}
	*dropped = drops;
	*bursts = runs;
	*longest = best;
}

__u64 popcount_prefix(const __u64 *bits, __u64 n)
{
	__u64 count = 0;

	for (__u64 w = 0; w < n / 64; w++)
		count += __builtin_popcountll(bits[w]);
	if (n & 63)
		count += __builtin_popcountll(bits[n / 64] & ((1ULL << (n & 63)) - 1));
	return count;
}

const char *model_name(__u32 m)
{
	static const char *names[] = {"none", "uniform", "gilbert-elliott", "trace"};

	return m < 4 ? names[m] : "?";
}

/* fecdrop reference MODEL --packets N --out F: the verdicts D[0..N) as the loader computes them, one
 * byte per index like `testrun`, without the kernel. The Gilbert-Elliott chain is generated over all N
 * packets (--table-len only says where the kernel switches to its locked chain, which continues the
 * same chain). */
void cmd_reference(struct options *o)
{
	struct fd_config c = o->cfg;
	__u64 *drop, *state, drops = 0;
	__u8 *verdicts;
	FILE *out;

	if (!o->out || !o->packets)
		die(2, "reference needs --packets and --out");
	if (o->packets > FD_TABLE_PACKETS)
		die(2, "reference covers at most %llu packets", FD_TABLE_PACKETS);
	drop = alloc_table();
	state = alloc_table();
	verdicts = malloc(o->packets);
	if (!verdicts)
		die(1, "out of memory");
	prepare_model(&c, o->trace, c.model == FD_MODEL_GE ? o->packets : o->table_len, drop, state);
	for (__u64 i = 0; i < o->packets; i++) {
		verdicts[i] = model_verdict(&c, drop, i);
		drops += verdicts[i];
	}
	out = fopen(o->out, "wb");
	if (!out || fwrite(verdicts, 1, o->packets, out) != o->packets || fclose(out))
		die(2, "cannot write %s", o->out);
	printf("{\"packets\": %llu, \"model\": \"%s\", \"drops\": %llu, \"table_len\": %llu}\n", o->packets,
	       model_name(c.model), drops, c.table_len);
	free(verdicts);
	free(drop);
	free(state);
}
