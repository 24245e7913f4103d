"""What keeps the emulation's and the endpoints' time honest: the userspace delay element's Python side
(`delayline`), its per-run lateness and bound (`lateness`), the scheduler tracer (`schedlat`) and what it says
about a run's endpoints (`endpoint_timing`)."""
