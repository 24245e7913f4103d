// SPDX-License-Identifier: GPL-2.0
/* Baseline for `fecbench dropper bench`: a tc program that passes everything, built like fecdrop. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("tc")
int empty(struct __sk_buff *skb)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
