/* uniform(p): D[i] = hash(i).hi32 < t(p), every packet independently (stateless, no table, no lock). */
#ifndef FECDROP_MODEL_UNIFORM_H
#define FECDROP_MODEL_UNIFORM_H

#ifdef __bpf__
static __always_inline int uniform_drop(__u64 *index, __u32 *state)
{
	return (fecdrop_hash(cfg.key, *index) >> 32) < cfg.t[0];
}
#else
static inline int uniform_verdict(const struct fd_config *c, const __u64 *drop, __u64 i)
{
	return (fecdrop_hash(c->key, i) >> 32) < c->t[0];
}

static inline const struct fd_model *uniform_model(void)
{
	static const struct fd_model m = {
		.name = "uniform", .option = "uniform", .params = {"p"},
		.example = {(__u64)(0.01 * 4294967296.0)},
		.verdict = uniform_verdict,
	};

	return &m;
}
#endif

#endif
