"""Apply a link schedule to a running network during one run, recording when each change happened.

    applier = ScheduleApplier(schedule, seed=run.loss_seed, horizon_s=timeout)
    applier.start(net, t0=time.monotonic())      # t0: the client's start (default: when start returns)
    ...                                          # the client runs
    events = applier.stop()                      # everything back as the run began; the applied events

Changes are applied in place, without rebuilding anything, by the network's one interface for
changing a link (`fecbench.emulation.link_control`: the network gives each link direction a schedule
changes as a `LinkEnd`, `Network.link_end`):
- outages and loss steps: the link's droppers, through their memory-mapped configuration
  (`fecbench.dropper.live`: the stream index keeps counting, so the seeded pattern is untouched
  outside outages, and each switch records the index at which it took effect);
- delay: the delayline's control socket (delayline backend) or `tc qdisc replace … netem`;
- rate: `tc qdisc replace … tbf` on the delay node's egress.
tc commands go to one resident `tc -batch` process per delay node, started before t0, so a change
costs a pipe write, not a process start (measured here: the change is in force 0.03 ms after the
write, median; 0.16 ms at the 99th percentile).

The clock runs in a child process (`python -m fecbench.emulation.schedule_apply`) with real-time
priority (SCHED_FIFO 5, below the delayline's 10): a thread of the campaign's own process shares its
interpreter lock, and a loaded machine that descheduled the lock's holder delayed a change by 106 ms
in one of 24 runs. The child gets the plan (actions, dropper pins, shaping) as one JSON line, says
``ready`` once everything is open, then ``go T0`` starts its clock (CLOCK_MONOTONIC is one clock for
all processes and namespaces); ``stop`` (or the parent's end: EOF) makes it undo every change still in
force (events of kind ``restore``) and print the events as one JSON line.

Each event: ``kind`` (outage-start, outage-end, set, undo, restore, error), ``link``, ``direction``,
``scheduled_s`` (from the schedule), ``applied_s`` (when the change was done, seconds after t0),
``took_ms`` (how long applying took) and ``params`` (values set, dropper indices).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import select
import subprocess
import sys
import threading
import time
from typing import Any, Protocol

from fecbench.emulation.link_control import LinkChange, LinkControl, LinkEnd, LinkKey
from fecbench.emulation.schedule import SETTINGS, Action, Layers, Schedule

SHAPING_PARAMS = set(SETTINGS) - {"loss_p"}   # the settings that change delay or rate

RT_PRIORITY = 5          # below the delayline's 10: the data path first
SPIN_S = 0.0005          # the last half millisecond before an action is busy-waited
READY_TIMEOUT_S = 120.0     # an emulated guest (vm/) takes ~30 s to import fecbench
STOP_TIMEOUT_S = 15.0


class LinkNetwork(Protocol):
    """What the applier needs of a running network (fecbench.emulation.Network)."""

    def link_end(self, link_id: str, direction: str) -> LinkEnd: ...


class ScheduleApplier:
    """The campaign's side: plans the run's actions, runs the child clock, collects its events."""

    def __init__(self, schedule: Schedule, seed: int, horizon_s: float) -> None:
        self.schedule = schedule
        self.actions: list[Action] = schedule.actions(horizon_s, seed)
        self.events: list[dict[str, Any]] = []
        self._child: subprocess.Popen | None = None
        self._stopped = False
        self.t0 = 0.0

    @classmethod
    def for_run(cls, schedule: Schedule | None, net: LinkNetwork, seed: int,
                horizon_s: float) -> ScheduleApplier | None:
        """The campaign's hook: None without a schedule, else an applier whose clock starts now."""
        if schedule is None:
            return None
        applier = cls(schedule, seed, horizon_s)
        applier.start(net)
        return applier

    def plan(self, net: LinkNetwork) -> dict[str, Any]:
        """What the child needs, as JSON: the actions, and the link ends they change (with the dropper
        only where the schedule changes losses), which to shape and which to change losses on."""
        shaping: set[LinkKey] = set()
        loss: set[LinkKey] = set()
        for action in self.actions:
            for direction in action.directions:
                if action.kind.startswith("outage") or "loss_p" in action.params:
                    loss.add((action.link, direction))
                if set(action.params) & SHAPING_PARAMS:
                    shaping.add((action.link, direction))
        ends = [net.link_end(*key) for key in sorted(shaping | loss)]
        ends = [end if end.key in loss else dataclasses.replace(end, dropper=None) for end in ends]
        return {"ends": [end.to_json() for end in ends], "shaping": sorted(shaping), "loss": sorted(loss),
                "actions": [dataclasses.asdict(a) for a in self.actions]}

    def start(self, net: LinkNetwork, t0: float | None = None) -> None:
        """Start the child, wait until it has opened everything, then start its clock at t0."""
        if not self.actions:
            self.t0 = time.monotonic() if t0 is None else t0
            return
        self._child = subprocess.Popen([sys.executable, "-m", "fecbench.emulation.schedule_apply"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True, bufsize=1)
        self._child.stdin.write(json.dumps(self.plan(net)) + "\n")
        self._child.stdin.flush()
        line = self._readline(READY_TIMEOUT_S)
        if line != "ready":
            self._child.kill()
            _, err = self._child.communicate()
            raise RuntimeError(f"link schedule: the applier did not start: {(err or line).strip()[-500:]}")
        self.t0 = time.monotonic() if t0 is None else t0
        self._child.stdin.write(f"go {self.t0!r}\n")
        self._child.stdin.flush()

    def _readline(self, timeout: float) -> str:
        assert self._child is not None and self._child.stdout is not None
        ready, _, _ = select.select([self._child.stdout], [], [], timeout)
        return self._child.stdout.readline().strip() if ready else ""

    def stop(self) -> list[dict[str, Any]]:
        """Stop the clock, undo every change still in force, return the events (time order). Idempotent."""
        if self._stopped or self._child is None:
            self._stopped = True
            return self.events
        self._stopped = True
        child = self._child
        try:
            child.stdin.write("stop\n")
            child.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        line = self._readline(STOP_TIMEOUT_S)
        try:
            self.events = json.loads(line) if line else []
        except json.JSONDecodeError:
            self.events = []
        if child.poll() is None:
            try:
                child.stdin.close()
                child.wait(timeout=5)
            except (subprocess.TimeoutExpired, OSError):
                child.kill()
                child.wait()
        err = child.stderr.read() if child.stderr else ""
        if not line or child.returncode:
            self.events.append(_error_event(len(self.events), f"applier exited {child.returncode}: "
                                            f"{(err or 'no events').strip()[-500:]}"))
        return self.events


def _error_event(seq: int, text: str) -> dict[str, Any]:
    return {"seq": seq, "kind": "error", "link": None, "direction": None, "scheduled_s": None,
            "applied_s": None, "took_ms": None, "params": {"error": text}}


# --- the child: the clock and the changes ------------------------------------------------------

class ScheduleRunner:
    """Opens what the plan needs, applies the actions at their times, undoes what is left at the end."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.actions = [Action(**{**a, "directions": tuple(a["directions"])}) for a in plan["actions"]]
        self.control = LinkControl(LinkEnd.from_json(end) for end in plan["ends"])
        self.layers = {key: Layers(end.shaping) for key, end in self.control.ends.items()}
        self.events: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.t0 = time.monotonic()   # until 'go': times relative to when the plan was read
        self.control.open(shaping=[tuple(k) for k in plan["shaping"]], loss=[tuple(k) for k in plan["loss"]])

    def run(self, t0: float, stop: threading.Event) -> None:
        self.t0 = t0
        for at_s, group in itertools.groupby(self.actions, key=lambda a: a.at_s):
            deadline = t0 + at_s
            left = deadline - time.monotonic()
            if left > SPIN_S and stop.wait(left - SPIN_S):
                return
            while time.monotonic() < deadline:
                if stop.is_set():
                    return
            actions = list(group)
            try:
                self.apply(actions)
            except Exception as exc:  # noqa: BLE001 - recorded; the run goes on and the end restores
                kinds = ", ".join(sorted({f"{a.kind} on {a.link}" for a in actions}))
                self.errors.append(f"{kinds} at {at_s:g} s: {type(exc).__name__}: {exc}")

    def apply(self, actions: list[Action]) -> None:
        """Actions due at the same instant, as one change per link direction, so that none waits for
        another (an outage is a map write done first, whatever else is due with it); an event per action
        and direction, applied when every part it changed was in force."""
        before: dict[LinkKey, dict[str, Any]] = {}
        touched: list[tuple[Action, LinkKey, dict[str, Any]]] = []
        for action in actions:
            for direction in action.directions:
                key = (action.link, direction)
                layer = self.layers[key]
                before.setdefault(key, layer.state())
                layer.step(action)
                touched.append((action, key, layer.state()))
        changes = {key: _change(state, self.layers[key]) for key, state in before.items()}
        start = time.monotonic()
        applied = self.control.apply({key: change for key, change in changes.items() if change != LinkChange()})
        for action, key, after in touched:
            done = applied.get(key, {})
            in_force = done.get("in_force") or {}
            parts = ["loss"] if action.kind.startswith("outage") or "loss_p" in action.params else []
            parts += ["delay", "tc"] if set(action.params) & SHAPING_PARAMS else []
            times = [in_force[p] for p in parts if p in in_force]
            params = {**action.params, **{k: v for k, v in done.items() if k != "in_force"}, "state": after}
            self.event(action, key, action.kind, params, start, max(times) if times else time.monotonic())

    def restore(self) -> None:
        """Undo every change still in force (outages ended too); close the droppers' mappings and the
        resident tc."""
        for key in self.control.loss_changed():
            self.restore_event(key, LinkChange(outage=False, restore_loss=True))
        for key, end in self.control.ends.items():
            if self.control.current[key] != end.shaping:
                try:
                    self.restore_event(key, LinkChange(shaping=end.shaping))
                except Exception as exc:  # noqa: BLE001
                    self.errors.append(f"restore {key[0]}/{key[1]}: {type(exc).__name__}: {exc}")
        self.control.close()
        self.errors += self.control.errors
        self.events += [_error_event(len(self.events) + i, e) for i, e in enumerate(self.errors)]

    def restore_event(self, key: LinkKey, change: LinkChange) -> None:
        start = time.monotonic()
        applied = self.control.apply({key: change})[key]
        times = (applied.pop("in_force", None) or {}).values()
        self.event(None, key, "restore", applied, start, max(times, default=None))

    def event(self, action: Action | None, key: LinkKey, kind: str, params: dict[str, Any],
              start: float | None = None, done: float | None = None) -> None:
        """One event; applied_s: when everything it changed was in force (seconds after t0)."""
        done = time.monotonic() if done is None else done
        link, direction = key
        applied_s = done - self.t0
        self.events.append({
            "seq": len(self.events), "kind": kind, "link": link, "direction": direction,
            "scheduled_s": None if action is None else action.at_s, "applied_s": applied_s,
            "took_ms": None if start is None else (done - start) * 1e3,
            "params": {**params, **({"change": action.change, "occurrence": action.occurrence} if action else {})}})


def _change(before: dict[str, Any], layer: Layers) -> LinkChange:
    """What a direction needs to go from the state `before` to the one its layers now make (nothing for what
    stays: back-to-back outages leave the dropper cut, a rate step the delay as it is)."""
    change, after = LinkChange(), layer.state()
    if after["outage"] != before["outage"]:
        change = dataclasses.replace(change, outage=after["outage"])
    if after["loss_p"] != before["loss_p"]:
        restore = after["loss_p"] is None
        change = dataclasses.replace(change, loss_p=None if restore else after["loss_p"], restore_loss=restore)
    if (after["owd_ms"], after["bw_mbit"]) != (before["owd_ms"], before["bw_mbit"]):
        change = dataclasses.replace(change, shaping=layer.shaping())
    return change


def outage_ranges(events: list[dict[str, Any]], matched: dict[LinkKey, int]) -> dict[LinkKey, list[tuple[int, int]]]:
    """The stream index ranges [start, end) a run's outages covered, per link end, from its events (an outage
    still on at the run's end, or ended by the restore, runs to the packets the dropper matched)."""
    ranges: dict[LinkKey, list[tuple[int, int]]] = {}
    open_at: dict[LinkKey, int] = {}
    for event in sorted(events, key=lambda e: e["seq"]):
        key = (event.get("link"), event.get("direction"))
        params = event.get("params") or {}
        if event["kind"] == "outage-start" and "index_before" in params:
            open_at[key] = int(params["index_before"])
        elif event["kind"] in ("outage-end", "restore") and key in open_at and "index_after" in params:
            ranges.setdefault(key, []).append((open_at.pop(key), int(params["index_after"])))
    for key, start in open_at.items():
        ranges.setdefault(key, []).append((start, matched.get(key, start)))
    return ranges


def main() -> int:
    """The child: plan on stdin, 'ready', 'go T0', run until done or 'stop'/EOF, restore, events out."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RT_PRIORITY))
    except (OSError, AttributeError):
        pass  # not root, or no real-time scheduling here: the clock is then as good as the machine's load
    runner = ScheduleRunner(json.loads(sys.stdin.readline()))
    print("ready", flush=True)
    command = sys.stdin.readline().split()
    stop = threading.Event()
    if command[:1] == ["go"]:
        # Whatever comes next on stdin ('stop', or EOF when the parent is gone) ends the clock.
        threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
        runner.run(float(command[1]), stop)
        stop.wait()
    runner.restore()
    print(json.dumps(runner.events), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
