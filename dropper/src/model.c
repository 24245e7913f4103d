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

#define FD_MODEL_ENTRY(ID, file) [FD_MODEL_##ID] = file##_model,
static const struct fd_model *(*const models[FD_MODEL_COUNT])(void) = {FD_MODELS(FD_MODEL_ENTRY)};
#undef FD_MODEL_ENTRY

const struct fd_model *model_by_id(__u32 id)
{
	if (id >= FD_MODEL_COUNT)
		die(1, "unknown model id %u (a dropper of another build?)", id);
	return models[id]();
}

__u32 model_id(const char *option)
{
	for (__u32 id = 0; id < FD_MODEL_COUNT; id++)
		if (!strcmp(models[id]()->option, option))
			return id;
	die(2, "unknown model %s", option);
	return 0;
}

void prepare_model(struct fd_config *c, const char *trace, __u64 table_len, __u64 *drop, __u64 *state)
{
	const struct fd_model *m = model_by_id(c->model);

	c->key = fecdrop_key(c->seed, c->stream);
	c->table_len = 0;
	c->chain_state0 = 0;
	c->chain_run0 = 0;
	if (m->prepare)
		m->prepare(c, trace, table_len, drop, state);
}

int model_verdict(const struct fd_config *c, const __u64 *drop, __u64 i)
{
	return model_by_id(c->model)->verdict(c, drop, i);
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

/* fecdrop reference MODEL --packets N --out F: the verdicts D[0..N) as the loader computes them, one
 * byte per index like `testrun`, without the kernel. A chained model (Gilbert-Elliott) is generated over
 * all N packets (--table-len only says where the kernel switches to its locked chain, which continues the
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
	prepare_model(&c, o->trace, model_by_id(c.model)->chained ? o->packets : o->table_len, drop, state);
	for (__u64 i = 0; i < o->packets; i++) {
		verdicts[i] = model_verdict(&c, drop, i);
		drops += verdicts[i];
	}
	out = fopen(o->out, "wb");
	if (!out || fwrite(verdicts, 1, o->packets, out) != o->packets || fclose(out))
		die(2, "cannot write %s", o->out);
	printf("{\"packets\": %llu, \"model\": \"%s\", \"drops\": %llu, \"table_len\": %llu}\n", o->packets,
	       model_by_id(c.model)->name, drops, c.table_len);
	free(verdicts);
	free(drop);
	free(state);
}
