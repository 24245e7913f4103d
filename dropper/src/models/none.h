/* none: never drops (the dropper only counts packets). */
#ifndef FECDROP_MODEL_NONE_H
#define FECDROP_MODEL_NONE_H

#ifdef __bpf__
static __always_inline int none_drop(__u64 *index, __u32 *state)
{
	return 0;
}
#else
static inline int none_verdict(const struct fd_config *c, const __u64 *drop, __u64 i)
{
	return 0;
}

static inline const struct fd_model *none_model(void)
{
	static const struct fd_model m = {.name = "none", .option = "none", .verdict = none_verdict};

	return &m;
}
#endif

#endif
