"""Apply a link schedule to a running network during one run, recording when each change happened.

    applier = ScheduleApplier(schedule, seed=run.loss_seed, horizon_s=timeout)
    applier.start(net, t0=time.monotonic())      # t0: the client's start
    ...                                          # the client runs
    events = applier.stop()                      # everything back as the run began; the applied events

Changes are applied in place, without rebuilding anything:
- outages and loss steps: the link's droppers, through their memory-mapped configuration
  (`fecbench.dropper.live`: the stream index keeps counting, so the seeded pattern is untouched
  outside outages, and each switch records the index at which it took effect);
- delay: the delayline's control socket (delayline backend) or `tc qdisc replace … netem`;
- rate: `tc qdisc replace … tbf` on the delay node's egress.
tc commands go to one resident `tc -batch` process per delay node, started before t0, so a change
costs a pipe write, not a process start.

One thread sleeps until each action's time (t0 + at_s), applies it, and records an event:
``scheduled_s`` (from the schedule), ``applied_s`` (when the change was done, seconds after t0),
``took_ms`` (how long applying took), and per kind the values set and the dropper indices. The
thread asks for real-time priority (SCHED_FIFO, as the delayline does) so that a loaded machine
delays it as little as possible; `stop()` undoes every change (events of kind ``restore``), so
the next run starts from the network its design point configured.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import threading
import time
from typing import Any

from fecbench.topologies.layout import shaping_commands
from fecbench.topologies.schedule import Action, Schedule

RT_PRIORITY = 5          # below the delayline's 10: the data path first
SPIN_S = 0.0005          # the last half millisecond before an action is busy-waited


class ScheduleApplier:
    """Applies one run's actions on a thread; `start(net, t0)` then `stop() -> events`."""

    def __init__(self, schedule: Schedule, seed: int, horizon_s: float) -> None:
        self.schedule = schedule
        self.actions: list[Action] = schedule.actions(horizon_s, seed)
        self.events: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._tc: dict[str, subprocess.Popen] = {}       # delay node name -> resident tc -batch
        self._live: dict[tuple[str, str], Any] = {}      # (link, direction) -> LiveConfig
        self._shaping: dict[tuple[str, str], Any] = {}   # (link, direction) -> current Shaping
        self._baseline: dict[tuple[str, str], Any] = {}
        self.t0 = 0.0

    # --- set up and tear down --------------------------------------------------------------
    @classmethod
    def for_run(cls, schedule: Schedule | None, net: Any, seed: int, horizon_s: float) -> ScheduleApplier | None:
        """The campaign's hook: None without a schedule, else an applier whose clock starts now."""
        if schedule is None:
            return None
        applier = cls(schedule, seed, horizon_s)
        applier.start(net)
        return applier

    def start(self, net: Any, t0: float | None = None) -> None:
        """Open what the actions need (droppers, tc), then start the clock at t0 (time.monotonic())."""
        from fecbench.dropper.live import LiveConfig

        self.net = net
        for action in self.actions:
            for direction in action.directions:
                key = (action.link, direction)
                needs_dropper = action.kind.startswith("outage") or "loss_p" in action.params
                if needs_dropper and key not in self._live:
                    dropper = net.droppers[key]
                    self._live[key] = LiveConfig(dropper.pin, dropper.seed, dropper.stream)
                if set(action.params) - {"loss_p", "length_ms"} and key not in self._shaping:
                    self._baseline[key] = self._shaping[key] = net.shaping[action.link][direction]
                    self._tc_for(action.link, direction)
        self.t0 = time.monotonic() if t0 is None else t0
        if self.actions:
            self._thread = threading.Thread(target=self._run, name="fecbench-schedule", daemon=True)
            self._thread.start()

    def _tc_for(self, link: str, direction: str) -> subprocess.Popen | None:
        """The resident tc of the link's delay node, when this change needs tc at all."""
        backend = self.net.backend
        needs_tc = backend == "netem" or self._baseline[(link, direction)].bw is not None
        node = self.net.layout.delay_nodes[link].name
        if needs_tc and node not in self._tc:
            self._tc[node] = subprocess.Popen(
                ["mnexec", "-a", str(self.net.nodes[node].pid), "tc", "-force", "-batch", "-"],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, bufsize=1)
        return self._tc.get(node)

    def stop(self) -> list[dict[str, Any]]:
        """Stop the clock, undo every change still in force, return the events (time order). Idempotent."""
        if self._stop.is_set():
            return self.events
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        for key, live in self._live.items():
            if live.changed():
                before, after = live.restore()
                self._event(None, key, "restore", {"dropper": True, "index_before": before, "index_after": after})
            live.close()
        for key, current in self._shaping.items():
            if current != self._baseline[key]:
                self._shape(key, self._baseline[key])
                base = self._baseline[key]
                self._event(None, key, "restore", {"owd_applied_ms": base.owd, "bw_applied_mbit": base.bw})
        for node, proc in self._tc.items():
            try:
                _, err = proc.communicate(timeout=10)   # closes tc's stdin: it exits
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            if err.strip():
                self.errors.append(f"tc on {node}: {err.strip()[:500]}")
        for error in self.errors:
            self.events.append({"seq": len(self.events), "kind": "error", "link": None, "direction": None,
                                "scheduled_s": None, "applied_s": None, "took_ms": None, "params": {"error": error}})
        self._live.clear()
        self._tc.clear()
        return self.events

    # --- the clock -------------------------------------------------------------------------
    def _run(self) -> None:
        with contextlib.suppress(OSError, AttributeError):   # not root, or no RT scheduling here
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RT_PRIORITY))
        for action in self.actions:
            deadline = self.t0 + action.at_s
            left = deadline - time.monotonic()
            if left > SPIN_S and self._stop.wait(left - SPIN_S):
                return
            while time.monotonic() < deadline:
                if self._stop.is_set():
                    return
            try:
                self._apply(action)
            except Exception as exc:  # noqa: BLE001 - recorded; the run goes on and stop() restores
                self.errors.append(f"{action.kind} on {action.link} at {action.at_s:g} s: {type(exc).__name__}: {exc}")

    def _apply(self, action: Action) -> None:
        for direction in action.directions:
            key = (action.link, direction)
            start = time.monotonic()
            if action.kind in ("outage-start", "outage-end"):
                before, after = self._live[key].outage(action.kind == "outage-start")
                params = {**action.params, "index_before": before, "index_after": after}
            else:
                params = self._set(key, action.params, undo=action.kind == "undo")
            self._event(action, key, action.kind, params, start)

    def _set(self, key: tuple[str, str], values: dict[str, float], undo: bool) -> dict[str, Any]:
        params: dict[str, Any] = dict(values)
        if "loss_p" in values:
            live = self._live[key]
            before, after = live.restore() if undo else live.set_uniform_p(values["loss_p"])
            params.update(index_before=before, index_after=after)
        if key in self._shaping:
            base, new = self._baseline[key], self._baseline[key]
            if not undo:
                owd = values.get("owd_ms", base.owd + values.get("owd_delta_ms", 0.0))
                bw = values.get("bw_mbit", base.bw * values.get("bw_scale", 1.0) if base.bw else None)
                new = dataclasses.replace(base, owd=max(0.0, owd), bw=bw)
            self._shape(key, new)
            params.update(owd_applied_ms=new.owd, bw_applied_mbit=new.bw)
        return params

    def _shape(self, key: tuple[str, str], new: Any) -> None:
        """Put one direction of a link at `new` (a Shaping): delay element, then tc."""
        link, direction = key
        old = self._shaping[key]
        dn = self.net.layout.delay_nodes[link]
        lines = []
        if self.net.backend == "delayline":
            if new.owd != old.owd:
                delayline = self.net.delaylines[link]
                delayline.set_delay(**({"ab_ms": new.owd} if direction == "forward" else {"ba_ms": new.owd}))
            if new.bw != old.bw and new.bw is not None:
                lines = shaping_commands(dn.egress(direction), new, "delayline")
        elif new != old:
            lines = shaping_commands(dn.egress(direction), new, "netem")
        if lines:
            tc = self._tc[dn.name]
            tc.stdin.write("".join(" ".join(cmd) + "\n" for cmd in lines))
            tc.stdin.flush()
        self._shaping[key] = new

    def _event(self, action: Action | None, key: tuple[str, str], kind: str, params: dict[str, Any],
               start: float | None = None) -> None:
        done = time.monotonic()
        self.events.append({
            "seq": len(self.events), "kind": kind, "link": key[0], "direction": key[1],
            "scheduled_s": None if action is None else action.at_s, "applied_s": done - self.t0,
            "took_ms": None if start is None else (done - start) * 1e3,
            "params": {**params, **({"change": action.change, "occurrence": action.occurrence} if action else {})}})
