"""Apply a link schedule to a running network during one run, recording when each change happened.

    applier = ScheduleApplier(schedule, seed=run.loss_seed, horizon_s=timeout)
    applier.start(net, t0=time.monotonic())      # t0: the client's start (default: when start returns)
    ...                                          # the client runs
    events = applier.stop()                      # everything back as the run began; the applied events

Changes are applied in place, without rebuilding anything:
- outages and loss steps: the link's droppers, through their memory-mapped configuration
  (`fecbench.dropper.live`: the stream index keeps counting, so the seeded pattern is untouched
  outside outages, and each switch records the index at which it took effect);
- delay: the delayline's control socket (delayline backend) or `tc qdisc replace … netem`;
- rate: `tc qdisc replace … tbf` on the delay node's egress.
tc commands go to one resident `tc -batch` process per delay node, started before t0, so a change
costs a pipe write, not a process start (measured here: the change is in force 0.03 ms after the
write, median; 0.16 ms at the 99th percentile).

The clock runs in a child process (`python -m fecbench.topologies.schedule_apply`) with real-time
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
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from typing import Any

from fecbench.topologies.layout import shaping_commands
from fecbench.topologies.schedule import Action, Schedule
from fecbench.topologies.spec import Shaping

RT_PRIORITY = 5          # below the delayline's 10: the data path first
SPIN_S = 0.0005          # the last half millisecond before an action is busy-waited
READY_TIMEOUT_S = 120.0     # an emulated guest (vm/) takes ~30 s to import fecbench
STOP_TIMEOUT_S = 15.0


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
    def for_run(cls, schedule: Schedule | None, net: Any, seed: int, horizon_s: float) -> ScheduleApplier | None:
        """The campaign's hook: None without a schedule, else an applier whose clock starts now."""
        if schedule is None:
            return None
        applier = cls(schedule, seed, horizon_s)
        applier.start(net)
        return applier

    def plan(self, net: Any) -> dict[str, Any]:
        """What the child needs, as JSON: actions, and per (link, direction) its dropper and shaping."""
        links: dict[str, dict[str, Any]] = {}
        for action in self.actions:
            for direction in action.directions:
                entry = links.setdefault(f"{action.link}/{direction}", {})
                if (action.kind.startswith("outage") or "loss_p" in action.params) and "dropper" not in entry:
                    dropper = net.droppers[(action.link, direction)]
                    entry["dropper"] = {"pin": str(dropper.pin), "seed": dropper.seed, "stream": dropper.stream}
                if set(action.params) - {"loss_p", "length_ms"} and "shaping" not in entry:
                    dn = net.layout.delay_nodes[action.link]
                    delayline = getattr(net, "delaylines", {}).get(action.link)
                    entry["shaping"] = {
                        **dataclasses.asdict(net.shaping[action.link][direction]), "node": dn.name,
                        "pid": net.nodes[dn.name].pid, "egress": dn.egress(direction),
                        "delayline": str(delayline.control_path) if delayline is not None else None}
        return {"backend": net.backend, "links": links, "actions": [dataclasses.asdict(a) for a in self.actions]}

    def start(self, net: Any, t0: float | None = None) -> None:
        """Start the child, wait until it has opened everything, then start its clock at t0."""
        if not self.actions:
            self.t0 = time.monotonic() if t0 is None else t0
            return
        self._child = subprocess.Popen([sys.executable, "-m", "fecbench.topologies.schedule_apply"],
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

class _Runner:
    """Opens what the plan needs, applies the actions at their times, undoes what is left at the end."""

    def __init__(self, plan: dict[str, Any]) -> None:
        from fecbench.dropper.live import LiveConfig

        self.backend: str = plan["backend"]
        self.actions = [Action(**{**a, "directions": tuple(a["directions"])}) for a in plan["actions"]]
        self.live: dict[str, Any] = {}
        self.shaping: dict[str, dict[str, Any]] = {}
        self.current: dict[str, Shaping] = {}
        self.tc: dict[str, subprocess.Popen] = {}
        self.events: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.t0 = time.monotonic()   # until 'go': times relative to when the plan was read
        for key, entry in plan["links"].items():
            if "dropper" in entry:
                d = entry["dropper"]
                self.live[key] = LiveConfig(d["pin"], d["seed"], d["stream"])
            if "shaping" in entry:
                s = entry["shaping"]
                self.shaping[key] = s
                self.current[key] = Shaping(bw=s["bw"], owd=s["owd"], queue=s["queue"])
                if (self.backend == "netem" or s["bw"] is not None) and s["node"] not in self.tc:
                    self.tc[s["node"]] = subprocess.Popen(
                        ["mnexec", "-a", str(s["pid"]), "tc", "-force", "-batch", "-"], stdin=subprocess.PIPE,
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, bufsize=1)

    def run(self, t0: float, stop: threading.Event) -> None:
        self.t0 = t0
        for action in self.actions:
            deadline = t0 + action.at_s
            left = deadline - time.monotonic()
            if left > SPIN_S and stop.wait(left - SPIN_S):
                return
            while time.monotonic() < deadline:
                if stop.is_set():
                    return
            try:
                self.apply(action)
            except Exception as exc:  # noqa: BLE001 - recorded; the run goes on and the end restores
                self.errors.append(f"{action.kind} on {action.link} at {action.at_s:g} s: {type(exc).__name__}: {exc}")

    def apply(self, action: Action) -> None:
        for direction in action.directions:
            key = f"{action.link}/{direction}"
            start = time.monotonic()
            if action.kind in ("outage-start", "outage-end"):
                before, after = self.live[key].outage(action.kind == "outage-start")
                params = {**action.params, "index_before": before, "index_after": after}
            else:
                params = self.set(key, action.params, undo=action.kind == "undo")
            self.event(action, key, action.kind, params, start)

    def set(self, key: str, values: dict[str, float], undo: bool) -> dict[str, Any]:
        params: dict[str, Any] = dict(values)
        if "loss_p" in values:
            live = self.live[key]
            before, after = live.restore() if undo else live.set_uniform_p(values["loss_p"])
            params.update(index_before=before, index_after=after)
        if key in self.shaping:
            s = self.shaping[key]
            base = Shaping(bw=s["bw"], owd=s["owd"], queue=s["queue"])
            new = base
            if not undo:
                owd = values.get("owd_ms", base.owd + values.get("owd_delta_ms", 0.0))
                bw = values.get("bw_mbit", base.bw * values.get("bw_scale", 1.0) if base.bw else None)
                new = dataclasses.replace(base, owd=max(0.0, owd), bw=bw)
            self.shape(key, new)
            params.update(owd_applied_ms=new.owd, bw_applied_mbit=new.bw)
        return params

    def shape(self, key: str, new: Shaping) -> None:
        """One direction of a link to `new`: the delay element, then tc."""
        s, old = self.shaping[key], self.current[key]
        lines: list[list[str]] = []
        if self.backend == "delayline":
            if new.owd != old.owd:
                field = "delay_ab_us" if key.endswith("/forward") else "delay_ba_us"
                _delayline_command(s["delayline"], f"set {field}={round(new.owd * 1000)}")
            if new.bw != old.bw and new.bw is not None:
                lines = shaping_commands(s["egress"], new, "delayline")
        elif new != old:
            lines = shaping_commands(s["egress"], new, "netem")
        if lines:
            tc = self.tc[s["node"]]
            tc.stdin.write("".join(" ".join(cmd) + "\n" for cmd in lines))
            tc.stdin.flush()
        self.current[key] = new

    def restore(self) -> None:
        """Undo every change still in force; close the droppers' mappings and the resident tc."""
        for key, live in self.live.items():
            if live.changed():
                before, after = live.restore()
                self.event(None, key, "restore", {"index_before": before, "index_after": after})
            live.close()
        for key, s in self.shaping.items():
            base = Shaping(bw=s["bw"], owd=s["owd"], queue=s["queue"])
            if self.current[key] != base:
                try:
                    self.shape(key, base)
                    self.event(None, key, "restore", {"owd_applied_ms": base.owd, "bw_applied_mbit": base.bw})
                except Exception as exc:  # noqa: BLE001
                    self.errors.append(f"restore {key}: {type(exc).__name__}: {exc}")
        for node, proc in self.tc.items():
            try:
                _, err = proc.communicate(timeout=10)   # closes tc's stdin: it exits
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            if err.strip():
                self.errors.append(f"tc on {node}: {err.strip()[:500]}")
        self.events += [_error_event(len(self.events) + i, e) for i, e in enumerate(self.errors)]

    def event(self, action: Action | None, key: str, kind: str, params: dict[str, Any],
              start: float | None = None) -> None:
        done = time.monotonic()
        link, direction = key.split("/")
        self.events.append({
            "seq": len(self.events), "kind": kind, "link": link, "direction": direction,
            "scheduled_s": None if action is None else action.at_s, "applied_s": done - self.t0,
            "took_ms": None if start is None else (done - start) * 1e3,
            "params": {**params, **({"change": action.change, "occurrence": action.occurrence} if action else {})}})


def _delayline_command(control: str, line: str) -> None:
    """One command on a delayline's control socket (delayline/README.md); 'ok' expected."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5.0)
        sock.connect(control)
        sock.sendall(line.encode() + b"\n")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    if reply.strip() != b"ok":
        raise RuntimeError(f"delayline {control}: {line!r} refused: {reply.decode(errors='replace').strip()}")


def main() -> int:
    """The child: plan on stdin, 'ready', 'go T0', run until done or 'stop'/EOF, restore, events out."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RT_PRIORITY))
    except (OSError, AttributeError):
        pass  # not root, or no real-time scheduling here: the clock is then as good as the machine's load
    runner = _Runner(json.loads(sys.stdin.readline()))
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
