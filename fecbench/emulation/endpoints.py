"""The network's endpoint hosts (client and server) and their cgroup (`fecbench.host.cgroups`): every process
started on them, through Mininet's popen or their shell, runs in the network's endpoint group; what popen starts
(servers, clients, probes) runs on the CPUs `fecbench.host.affinity` gives endpoints (every CPU, also the one the
harness keeps off), while the shell's configuration commands stay with the harness."""

from __future__ import annotations

import functools
from typing import Any

from fecbench.host import affinity, cgroups


@functools.cache
def host_class() -> Any:
    """Mininet's Host, for a client or server: what it starts begins in the network's endpoint group."""
    from mininet.node import Host

    class EndpointHost(Host):
        group: cgroups.EndpointGroup | None = None

        def popen(self, *args: Any, cgroup: cgroups.EndpointGroup | None = None, **kwargs: Any) -> Any:
            group = cgroup or self.group   # a competing flow's own group, else the network's
            if "mncmd" not in kwargs:
                # Joined before entering the host's namespaces: its mount namespace has a /sys of its own.
                joiner = group.joiner() if group is not None else []
                kwargs["mncmd"] = [*joiner, *placement(), "mnexec", "-da", str(self.pid)]
            return super().popen(*args, **kwargs)

    return EndpointHost


def make_group(name: str) -> tuple[cgroups.EndpointGroup | None, str | None]:
    """A network's endpoint group, or (None, why) when turned off or impossible on this machine."""
    if not cgroups.enabled():
        return None, f"endpoint timing turned off ({cgroups.ENV})"
    try:
        return cgroups.EndpointGroup.create(name), None
    except OSError as exc:
        return None, f"no endpoint cgroup: {exc}"


def placement() -> list[str]:
    """An argv prefix that starts a process on the endpoints' CPUs ([] where it would inherit them anyway)."""
    cpus = affinity.endpoint_cpus()
    return ["taskset", "-c", ",".join(map(str, cpus))] if cpus else []


def adopt(host: Any, group: cgroups.EndpointGroup) -> None:
    """Make `host` (an endpoint_host) start its processes in `group`, its shell (host.cmd) included."""
    host.group = group
    group.adopt(host.shell.pid)
