/* gilbert-elliott(p, r, k, h): a two-state chain. Per packet, the verdict in the current state (deliver
 * when u_v < t(k) in Good, when u_v < t(h) in Bad), then the transition (Good -> Bad when u_m < t(p),
 * Bad -> Good when u_m < t(r)); start in Good. The loader pre-generates the chain into the decision table
 * (drop bit + state bit) and the program replays it by index; beyond the table the chain continues under
 * a spin lock (struct fd_chain) from the state the loader saved. */
#ifndef FECDROP_MODEL_GE_H
#define FECDROP_MODEL_GE_H

enum { GE_P, GE_R, GE_K, GE_H };

/* One packet of the chain from the random bits x: its verdict (1 = drop) in state *s, then the
 * transition. Shared by the kernel's locked chain and the loader's table. */
static inline int ge_step(const struct fd_config *c, __u64 x, __u64 *s)
{
	__u32 u_verdict = x >> 32, u_move = (__u32)x;
	int drop = u_verdict >= (*s ? c->t[GE_H] : c->t[GE_K]);

	*s = *s ? (u_move < c->t[GE_R] ? 0 : 1) : (u_move < c->t[GE_P] ? 1 : 0);
	return drop;
}

#ifdef __bpf__
/* The chain past the decision table, one packet at a time under the lock. */
static __noinline int ge_chain_step(__u64 *index, __u32 *state)
{
	__u32 zero = 0;
	struct fd_chain *c = bpf_map_lookup_elem(&chain, &zero);
	__u64 s;
	int drop;

	if (!c)
		return 0;
	bpf_spin_lock(&c->lock);
	__u64 i = c->next++;

	s = c->state;
	*state = s;
	drop = ge_step(&cfg, fecdrop_hash(cfg.key, i), &s);
	c->bad += *state;
	c->dropped += drop;
	if (drop) {
		c->bursts += c->run == 0;
		c->run++;
		if (c->run > c->longest)
			c->longest = c->run;
	} else {
		c->run = 0;
	}
	c->state = s;
	bpf_spin_unlock(&c->lock);
	*index = i;
	return drop;
}

static __always_inline int gilbert_elliott_drop(__u64 *index, __u32 *state)
{
	if (*index >= cfg.table_len)
		return ge_chain_step(index, state);
	if (cfg.log)
		*state = table_bit(&table_state, *index);
	return table_bit(&table_drop, *index);
}
#else
/* Pre-generate the chain for indices [0, table_len) (its drop and state bits), and save the state and
 * the loss-run length at index table_len, where the kernel's chain goes on. */
static inline void gilbert_elliott_prepare(struct fd_config *c, const char *trace, __u64 table_len, __u64 *drop,
					   __u64 *state)
{
	__u64 s = 0, run = 0, dword = 0, sword = 0;

	if (table_len > FD_TABLE_PACKETS)
		table_len = FD_TABLE_PACKETS;
	for (__u64 i = 0; i < table_len; i++) {
		__u64 was = s;
		int d = ge_step(c, fecdrop_hash(c->key, i), &s);

		dword |= (__u64)d << (i & 63);
		sword |= was << (i & 63);
		run = d ? run + 1 : 0;
		if ((i & 63) == 63 || i + 1 == table_len) {
			drop[i >> 6] = dword;
			state[i >> 6] = sword;
			dword = sword = 0;
		}
	}
	c->table_len = table_len;
	c->chain_state0 = s;
	c->chain_run0 = run;
}

static inline const struct fd_model *gilbert_elliott_model(void)
{
	static const struct fd_model m = {
		.name = "gilbert-elliott", .option = "ge", .params = {"p", "r", "k", "h"},
		.defaults = {[GE_K] = 1ULL << 32},
		.example = {(__u64)(0.05 * 4294967296.0), (__u64)(0.3 * 4294967296.0), (__u64)(0.99 * 4294967296.0),
			    (__u64)(0.2 * 4294967296.0)},
		.default_table_len = 1 << 20, .chained = 1,
		.prepare = gilbert_elliott_prepare, .verdict = table_verdict,
	};

	return &m;
}
#endif

#endif
