"""Changing a shaped link of a running network: the one implementation behind the per-run configuration
(`Network.configure`, `Network.change_links`) and link schedules (`schedule_apply`, in a child process).

A `LinkEnd` is one direction of a shaped link as a process needs it to change the link; it is plain
data (JSON both ways), so the network hands it to another process (`Network.link_end`). A
`LinkControl` applies `LinkChange`s to a set of ends, each part where it lives, cheapest first:

- loss probability (uniform model) and outages: the dropper's memory-mapped configuration
  (`fecbench.dropper.live`), in place: its stream keeps counting (a map write: microseconds);
- delay: the delay element's control socket (`fecbench.timekeeping.delayline.DelayControl`; delayline backend,
  acknowledged), or `tc qdisc replace … netem` (netem backend);
- rate and queue: `tc qdisc replace … tbf` and its child fifo on the delay node's egress
  (`layout.shaping_commands`), only the parts that change.

tc commands go to one `tc -j -batch` per delay node: started for the call, the nodes' in parallel
(between runs), or resident once `open` started (and warmed) it, so that a change during a run costs a
pipe write. Every batch ends by reading back what it changed (`qdisc show`): its answer is the moment the
change is in force, and what the kernel holds (`layout.built`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from fecbench.emulation.layout import built, changed_parts, shaping_commands
from fecbench.emulation.spec import Shaping
from fecbench.timekeeping.delayline import SIDE_OF

LinkKey = tuple[str, str]   # (link id, direction: "forward" = client → server, or "reverse")


#: How long a tc batch may take to answer before the change counts as failed.
TC_ANSWER_S = 10.0


class DelaySetter(Protocol):
    def set_delay(self, ab_ms: float | None = None, ba_ms: float | None = None) -> None: ...

    def set_trace(self, side: str, path: str | None, queue: int = 0, unit: str = "packets",
                  offset_ms: int = 0) -> None: ...

    def set_delays(self, side: str, path: str | None, offset_ms: int = 0) -> None: ...

    def stats(self) -> dict[str, Any]: ...


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
    control first touched the dropper. An outage and the loss probability are two sides of the
    dropper's state: a loss change during an outage takes effect when the outage ends."""
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


def tc_batches(jobs: Mapping[int, str]) -> dict[int, list[str]]:
    """`tc -j -batch` inside nodes (by PID), concurrently: each job's non-empty output lines (one per
    `qdisc show`). RuntimeError with the failures' stderr."""
    procs = {pid: subprocess.Popen(["mnexec", "-da", str(pid), "tc", "-j", "-batch", "-"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for pid in jobs}
    out, errors = {}, []
    for pid, proc in procs.items():
        stdout, stderr = proc.communicate(jobs[pid])
        if proc.returncode != 0:
            errors.append(f"tc -batch: {(stderr or stdout).strip()}\n{jobs[pid]}")
        out[pid] = [line for line in stdout.splitlines() if line.strip()]
    if errors:
        raise RuntimeError("network configuration failed: " + "; ".join(errors))
    return out


class LinkControl:
    """Applies changes to the given ends; `current` is what each end's shaping is now."""

    def __init__(self, ends: Iterable[LinkEnd], delays: Mapping[str, DelaySetter] | None = None,
                 batches: Callable[[Mapping[int, str]], dict[int, list[str]]] = tc_batches) -> None:
        self.ends = {end.key: end for end in ends}
        self.current: dict[LinkKey, Shaping] = {key: end.shaping for key, end in self.ends.items()}
        self._delays: dict[str, DelaySetter] = dict(delays or {})   # link id -> its delay element
        self._live: dict[LinkKey, Any] = {}                          # the droppers' configurations
        self.dropper_state: dict[LinkKey, dict[str, Any]] = {}       # outage on, loss_p (None: the model's)
        self._tc: dict[str, subprocess.Popen] = {}                   # node -> resident `tc -j -batch`
        self._pending: dict[str, bytes] = {}                         # what it wrote beyond the answers read
        self._batches = batches                                      # tc for a call (no resident tc)
        self.errors: list[str] = []                                  # what the resident tc said

    def open(self, shaping: Iterable[LinkKey] = (), loss: Iterable[LinkKey] = ()) -> None:
        """Open now, and warm, what later changes will need, so that the first change of a run costs what
        the later ones do: the dropper configurations of `loss` ends; for `shaping` ends, the delay element
        (one round trip) and a resident tc on the delay nodes where tc may be needed (one read-back)."""
        for key in loss:
            self._live_config(key)
        for key in shaping:
            end = self.ends[key]
            if end.backend == "delayline" and end.delayline is not None:
                self._delay(end.link, end.delayline).stats()
            if (end.backend == "netem" or end.shaping.bw is not None) and end.node not in self._tc:
                self._tc[end.node] = subprocess.Popen(
                    ["mnexec", "-a", str(end.pid), "tc", "-j", "-force", "-batch", "-"], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
                self._resident(end.node, [], [end.egress])

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
            from fecbench.timekeeping.delayline import DelayControl

            if path is None:
                raise RuntimeError(f"link {link} has no delay element")
            self._delays[link] = DelayControl(path, name=link)
        return self._delays[link]

    def apply(self, changes: Mapping[LinkKey, LinkChange]) -> dict[LinkKey, dict[str, Any]]:
        """Apply the changes, cheapest first (losses and outages, then delays, then tc: one batch per delay
        node, only the parts that change). Per end, what was set (owd_applied_ms, bw_applied_mbit;
        index_before, index_after of the dropper's stream), `in_force` (CLOCK_MONOTONIC seconds at which
        each part it changed was in force: loss, delay, tc) and, where tc ran, `built`: what the kernel
        holds now (`layout.built`)."""
        applied: dict[LinkKey, dict[str, Any]] = {key: {} for key in changes}
        in_force: dict[LinkKey, dict[str, float]] = {key: {} for key in changes}
        delays: dict[str, dict[str, float]] = {}
        delayed: dict[str, list[LinkKey]] = {}
        lines: dict[str, list[str]] = {}
        shown: dict[str, list[LinkKey]] = {}
        for key, change in changes.items():
            if change.outage is None and change.loss_p is None and not change.restore_loss:
                continue
            state = self.dropper_state.setdefault(key, {"outage": False, "loss_p": None})
            if change.outage is not None:
                state["outage"] = change.outage
            if change.loss_p is not None or change.restore_loss:
                state["loss_p"] = None if change.restore_loss else change.loss_p
            before, after = self._live_config(key).set(state["outage"], state["loss_p"])
            applied[key].update(index_before=before, index_after=after)
            in_force[key]["loss"] = time.monotonic()
        for key, change in changes.items():
            if change.shaping is None:
                continue
            end, old, new = self.ends[key], self.current[key], change.shaping
            if new.delays != old.delays:   # a delay series (only the delay element has them: backend.select_backend)
                self._delay(end.link, end.delayline).set_delays(SIDE_OF[end.direction], new.delays)
                in_force[key]["delays"] = time.monotonic()
            if end.backend == "delayline" and new.owd != old.owd:   # the delay element; tc for the rest
                delays.setdefault(end.link, {})[f"{SIDE_OF[end.direction]}_ms"] = new.owd
                delayed.setdefault(end.link, []).append(key)
            if new.trace is not None:   # a trace link: its rate and queue are the delay element's too
                if (new.trace, new.queue, new.queue_unit) != (old.trace, old.queue, old.queue_unit):
                    self._delay(end.link, end.delayline).set_trace(SIDE_OF[end.direction], new.trace, new.queue,
                                                                  new.queue_unit)
                    in_force[key]["trace"] = time.monotonic()
                applied[key].update(owd_applied_ms=new.owd, bw_applied_mbit=None)
                continue
            parts = changed_parts(old, new, end.backend)
            if parts:
                lines.setdefault(end.node, []).extend(" ".join(c) for c in shaping_commands(end.egress, new,
                                                                                              end.backend, parts))
                shown.setdefault(end.node, []).append(key)
            applied[key].update(owd_applied_ms=new.owd, bw_applied_mbit=new.bw)
        for link, values in delays.items():
            end = next(e for e in self.ends.values() if e.link == link)
            self._delay(link, end.delayline).set_delay(**values)
            done = time.monotonic()
            for key in delayed[link]:
                in_force[key]["delay"] = done
        for key, (have, done) in self._run_tc(lines, shown).items():
            applied[key]["built"] = have
            in_force[key]["tc"] = done
        for key, change in changes.items():
            if change.shaping is not None:
                self.current[key] = change.shaping
            if in_force[key]:
                applied[key]["in_force"] = in_force[key]
        return applied

    def _run_tc(self, lines: dict[str, list[str]], shown: dict[str, list[LinkKey]]
                ) -> dict[LinkKey, tuple[dict[str, Any], float]]:
        """Each node's tc lines, then a read-back of each changed end's egress: per end, what the kernel
        holds and when it answered (the change is in force from then)."""
        out: dict[LinkKey, tuple[dict[str, Any], float]] = {}
        jobs: dict[int, str] = {}
        for node, text in lines.items():
            keys = shown[node]
            if node in self._tc:
                answers = self._resident(node, text, [self.ends[k].egress for k in keys])
                done = time.monotonic()
                out.update({key: (answer, done) for key, answer in zip(keys, answers, strict=True)})
            else:
                pid = self.ends[keys[0]].pid
                jobs[pid] = "".join(line + "\n" for line in text) + _shows(self.ends[k].egress for k in keys)
        if jobs:
            answers_by_pid = self._batches(jobs)
            done = time.monotonic()
            for keys in shown.values():
                pid = self.ends[keys[0]].pid
                if pid in jobs:
                    answers = answers_by_pid.get(pid, [])
                    for i, key in enumerate(keys):
                        out[key] = (_built(answers[i] if i < len(answers) else "", self.ends[key].egress), done)
        return out

    def _resident(self, node: str, text: list[str], egresses: list[str]) -> list[dict[str, Any]]:
        """Write lines and read-backs to a node's resident tc; what each read-back shows."""
        proc = self._tc[node]
        proc.stdin.write(("".join(line + "\n" for line in text) + _shows(egresses)).encode())
        proc.stdin.flush()
        # Read the answers from the pipe itself: a buffered reader could hold a line select() cannot see.
        fd, pending = proc.stdout.fileno(), self._pending.get(node, b"")
        deadline = time.monotonic() + TC_ANSWER_S
        while len([line for line in pending.split(b"\n")[:-1] if line.strip()]) < len(egresses):
            left = deadline - time.monotonic()
            chunk = os.read(fd, 1 << 16) if left > 0 and select.select([fd], [], [], left)[0] else b""
            if not chunk:
                raise RuntimeError(f"tc on {node} did not answer within {TC_ANSWER_S:g} s "
                                   f"(exit status {proc.poll()})")
            pending += chunk
        lines = [line for line in pending.split(b"\n")[:-1] if line.strip()]
        self._pending[node] = pending[pending.rindex(b"\n") + 1:]
        return [_built(line.decode(errors="replace"), egress) for line, egress in zip(lines, egresses, strict=True)]

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
                _, err = proc.communicate(timeout=10)   # closes tc's stdin: it exits (read-backs all read)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            text = err.decode(errors="replace").strip()
            if text:
                self.errors.append(f"tc on {node}: {text[:500]}")
        self._tc.clear()

    def __enter__(self) -> LinkControl:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _shows(egresses: Iterable[str]) -> str:
    return "".join(f"qdisc show dev {egress}\n" for egress in egresses)


def _built(line: str, egress: str) -> dict[str, Any]:
    try:
        shown = json.loads(line)
    except json.JSONDecodeError:
        return {}
    return built(shown if isinstance(shown, list) else [], egress)
