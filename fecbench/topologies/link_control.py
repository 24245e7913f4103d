"""Changing a shaped link of a running network: the one implementation behind the per-run configuration
(`Network.configure`, `Network.change_links`) and link schedules (`schedule_apply`, in a child process).

A `LinkEnd` is one direction of a shaped link as a process needs it to change the link; it is plain
data (JSON both ways), so the network hands it to another process (`Network.link_end`). A
`LinkControl` applies `LinkChange`s to a set of ends:

- delay: the delay element's control socket (`fecbench.delayline.DelayControl`; delayline backend),
  or `tc qdisc replace … netem` (netem backend);
- rate and queue: `tc qdisc replace … tbf` on the delay node's egress (`layout.shaping_commands`);
- loss probability (uniform model) and outages: the dropper's memory-mapped configuration
  (`fecbench.dropper.live`), in place: its stream keeps counting.

tc commands go to one `tc -batch` per delay node: started for the call, the nodes' in parallel
(between runs), or resident once `open` started it, so that a change during a run costs a pipe write.
"""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from fecbench.topologies.layout import shaping_commands
from fecbench.topologies.spec import Shaping

LinkKey = tuple[str, str]   # (link id, direction: "forward" = client → server, or "reverse")


class DelaySetter(Protocol):
    def set_delay(self, ab_ms: float | None = None, ba_ms: float | None = None) -> None: ...


@dataclass(frozen=True)
class DropperRef:
    """An attached dropper instance: its pin directory and the seed and stream it was set to."""
    pin: str
    seed: int
    stream: int


@dataclass(frozen=True)
class LinkEnd:
    """One direction of a shaped link of a running network."""
    link: str
    direction: str
    backend: str                     # netem | delayline
    node: str                        # the link's delay node (layout name)
    pid: int                         # a process in the delay node's namespace
    egress: str                      # the delay node's egress interface for this direction
    shaping: Shaping                 # delay, rate and queue the network set
    delayline: str | None = None     # the delay element's control socket (delayline backend)
    dropper: DropperRef | None = None

    @property
    def key(self) -> LinkKey:
        return (self.link, self.direction)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LinkEnd:
        dropper = data.get("dropper")
        return cls(**{**data, "shaping": Shaping(**data["shaping"]),
                      "dropper": DropperRef(**dropper) if dropper else None})


@dataclass(frozen=True)
class LinkChange:
    """A change of one direction of a link. `shaping`: the delay, rate and queue to set (None: keep);
    `loss_p`: the uniform loss model's probability, in place; `outage`: True drops every packet from
    now, False ends the outage; `restore_loss`: back to the loss configuration found when the
    control first touched the dropper."""
    shaping: Shaping | None = None
    loss_p: float | None = None
    outage: bool | None = None
    restore_loss: bool = False


def run_in_nodes(jobs: list[tuple[int, list[str], str | None]]) -> None:
    """Run commands inside nodes (by PID) concurrently; raise with the first failure's stderr."""
    procs = []
    for pid, argv, stdin in jobs:
        p = subprocess.Popen(["mnexec", "-da", str(pid), *argv], stdin=subprocess.PIPE if stdin else None,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append((p, argv, stdin))
    errors = []
    for p, argv, stdin in procs:
        out, err = p.communicate(stdin)
        if p.returncode != 0:
            errors.append(f"{' '.join(argv)}: {(err or out).strip()}" + (f"\n{stdin}" if stdin else ""))
    if errors:
        raise RuntimeError("network configuration failed: " + "; ".join(errors))


class LinkControl:
    """Applies changes to the given ends; `current` is what each end's shaping is now."""

    def __init__(self, ends: Iterable[LinkEnd], delays: Mapping[str, DelaySetter] | None = None) -> None:
        self.ends = {end.key: end for end in ends}
        self.current: dict[LinkKey, Shaping] = {key: end.shaping for key, end in self.ends.items()}
        self._delays: dict[str, DelaySetter] = dict(delays or {})   # link id -> its delay element
        self._live: dict[LinkKey, Any] = {}                          # the droppers' configurations
        self._tc: dict[str, subprocess.Popen] = {}                   # node -> resident `tc -batch`
        self.errors: list[str] = []                                  # what the resident tc said

    def open(self, shaping: Iterable[LinkKey] = (), loss: Iterable[LinkKey] = ()) -> None:
        """Open now what later changes will need: a resident tc on the delay nodes of `shaping` ends
        (where tc may be needed), the dropper configurations of `loss` ends."""
        for key in loss:
            self._live_config(key)
        for key in shaping:
            end = self.ends[key]
            if (end.backend == "netem" or end.shaping.bw is not None) and end.node not in self._tc:
                self._tc[end.node] = subprocess.Popen(
                    ["mnexec", "-a", str(end.pid), "tc", "-force", "-batch", "-"], stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, bufsize=1)

    def _live_config(self, key: LinkKey) -> Any:
        if key not in self._live:
            from fecbench.dropper.live import LiveConfig

            dropper = self.ends[key].dropper
            if dropper is None:
                raise RuntimeError(f"link {key[0]} ({key[1]}) has no dropper")
            self._live[key] = LiveConfig(dropper.pin, dropper.seed, dropper.stream)
        return self._live[key]

    def _delay(self, link: str, path: str | None) -> DelaySetter:
        if link not in self._delays:
            from fecbench.delayline import DelayControl

            if path is None:
                raise RuntimeError(f"link {link} has no delay element")
            self._delays[link] = DelayControl(path, name=link)
        return self._delays[link]

    def apply(self, changes: Mapping[LinkKey, LinkChange]) -> dict[LinkKey, dict[str, Any]]:
        """Apply the changes (losses first, then delays, then tc: one batch per delay node); per end,
        what was set (owd_applied_ms, bw_applied_mbit; index_before, index_after of the dropper's stream)."""
        applied: dict[LinkKey, dict[str, Any]] = {key: {} for key in changes}
        delays: dict[str, dict[str, float]] = {}
        lines: dict[str, list[str]] = {}
        for key, change in changes.items():
            if change.outage is not None:
                before, after = self._live_config(key).outage(change.outage)
                applied[key].update(index_before=before, index_after=after)
            if change.loss_p is not None or change.restore_loss:
                live = self._live_config(key)
                before, after = live.restore() if change.restore_loss else live.set_uniform_p(change.loss_p)
                applied[key].update(index_before=before, index_after=after)
            if change.shaping is None:
                continue
            end, old, new = self.ends[key], self.current[key], change.shaping
            if end.backend == "delayline" and new.owd != old.owd:   # the delay element; tc for the rest
                delays.setdefault(end.link, {})["ab_ms" if end.direction == "forward" else "ba_ms"] = new.owd
            if (new.bw, new.queue) != (old.bw, old.queue) if end.backend == "delayline" else new != old:
                commands = shaping_commands(end.egress, new, end.backend)
                lines.setdefault(end.node, []).extend(" ".join(c) for c in commands)
            applied[key].update(owd_applied_ms=new.owd, bw_applied_mbit=new.bw)
        for link, values in delays.items():
            end = next(e for e in self.ends.values() if e.link == link)
            self._delay(link, end.delayline).set_delay(**values)
        self._run_tc({node: text for node, text in lines.items() if text})
        for key, change in changes.items():
            if change.shaping is not None:
                self.current[key] = change.shaping
        return applied

    def _run_tc(self, lines: dict[str, list[str]]) -> None:
        jobs = []
        for node, text in lines.items():
            if node in self._tc:
                self._tc[node].stdin.write("".join(line + "\n" for line in text))
                self._tc[node].stdin.flush()
            else:
                pid = next(e.pid for e in self.ends.values() if e.node == node)
                jobs.append((pid, ["tc", "-batch", "-"], "\n".join(text) + "\n"))
        if jobs:
            run_in_nodes(jobs)

    def loss_changed(self) -> list[LinkKey]:
        """The ends whose dropper configuration differs from what it was when first touched."""
        return [key for key, live in self._live.items() if live.changed()]

    def close(self) -> None:
        """Close the droppers' configurations and the resident tc (its complaints go to `errors`)."""
        for live in self._live.values():
            live.close()
        self._live.clear()
        for node, proc in self._tc.items():
            try:
                _, err = proc.communicate(timeout=10)   # closes tc's stdin: it exits
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            if err.strip():
                self.errors.append(f"tc on {node}: {err.strip()[:500]}")
        self._tc.clear()

    def __enter__(self) -> LinkControl:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
