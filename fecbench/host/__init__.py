"""What a run needs from the host it runs on: the checkout's paths (`paths`), the CPUs a campaign uses
(`affinity`), the bpf(2) calls made from Python (`bpfsys`), the endpoints' cgroups (`cgroups`), the marker every
started process inherits (`marks`) and the records by which `fecbench clean` undoes what a process made
(`cleanup`)."""
