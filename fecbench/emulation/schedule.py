"""Link schedules: time-varying links (handovers, outages, delay and rate steps), as data.

A schedule is a TOML file a design names (``[design] schedule = "schedules/x.toml"``). Time 0 is
when the run's client starts; every change acts on one link (``direction``: forward = client →
server, reverse, or both) at given times or periodically:

```toml
[schedule]
description = "Starlink-like handover every 15 s"

[[change]]
link = "bottleneck"
every_s = 15.0            # periodic (first at start_s, default every_s; until_s: last one at most then)
# phase = "random"        # periodic: the first at start_s + U[0, every_s), drawn per run (see below)
# at_s = 1.0              # or one time, or a list: at_s = [1.0, 4.5]
direction = "both"        # forward | reverse | both (default)
outage_ms = [100, 300]    # drop every packet for this long: a number, or [low, high] drawn per occurrence
owd_ms = [25, 32, 28]     # new one-way delay: a number, or a list taken in turn per occurrence
# owd_delta_ms = 5        # or: the delay in force plus this
# bw_mbit = 50            # new rate; or bw_scale = 0.5 (times the rate in force)
# loss_p = 0.02           # new loss probability of the link's dropper (design loss model uniform)
# hold_ms = 2000          # undo the delay/rate/loss change after this long (default: keep it)
```

Changes compose: a change alters only what it names (a rate step keeps the delay in force, a delay step
the rate), relative changes (``owd_delta_ms``, ``bw_scale``) act on what is in force, and an undo takes
its own change away: what is in force then is what the changes still active make of the run's
configuration, in the order they were set (undone in reverse order, each undo restores what was in
force before its change). Outages overlap: the link is cut while any is on (`Layers`).

Random outage lengths are drawn from the run's loss seed (numpy's PCG64 seeded with
``[seed, change index]``): the same schedule and seed give the same lengths, and every implementation
of a repetition sees the same handovers (common random numbers).

With ``phase = "random"`` a periodic change is shifted per run by an offset drawn uniformly from
[0, every_s) (from ``[seed, change index, 1]``): a transfer far shorter than the period then meets an
occurrence with the probability a real one would (its duration ÷ the period), at any point of the
transfer, instead of never (first occurrence after the transfer) or always.

``Schedule.actions(horizon_s, seed)`` expands a schedule into timed ``Action`` s (pure: no network);
``fecbench.emulation.schedule_apply.ScheduleApplier`` applies them to a running network.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from fecbench.dropper.models import MODELS
from fecbench.emulation.spec import Shaping
from fecbench.inputs.directions import SCHEDULE_DIRECTIONS
from fecbench.inputs.errors import SpecError
from fecbench.inputs.specs import Section, load_toml

MAX_EVENTS = 100_000          # per run: a period of 1 ms over a 60 s run fits; a typo (every_s = 1e-6) does not
SETTINGS = ("owd_ms", "owd_delta_ms", "bw_mbit", "bw_scale", "loss_p")


@dataclass(frozen=True)
class Action:
    """One thing to do at ``at_s`` seconds after the client started."""
    at_s: float
    change: int                       # index of the [[change]] it comes from
    occurrence: int                   # 0, 1, … for periodic or listed times
    link: str
    directions: tuple[str, ...]       # ("forward",), ("reverse",) or both
    kind: str                         # outage-start | outage-end | set | undo
    params: dict[str, float] = field(default_factory=dict)


@dataclass
class Layers:
    """What is in force on one direction of a link during a run: its configuration (`base`), the set
    actions still active on top of it in the order they were set, and how many outages are on."""
    base: Shaping
    active: list[tuple[tuple[int, int], dict[str, float]]] = field(default_factory=list)
    outages: int = 0

    def step(self, action: Action) -> None:
        """Take one action: a set goes on top, an undo takes its set away, an outage starts or ends."""
        if action.kind == "outage-start":
            self.outages += 1
        elif action.kind == "outage-end":
            self.outages = max(0, self.outages - 1)
        elif action.kind == "set":
            self.active.append(((action.change, action.occurrence), dict(action.params)))
        elif action.kind == "undo":
            self.active = [a for a in self.active if a[0] != (action.change, action.occurrence)]

    def shaping(self) -> Shaping:
        owd, bw = self.base.owd, self.base.bw
        for _, values in self.active:
            owd = values.get("owd_ms", owd + values.get("owd_delta_ms", 0.0))
            if bw is not None:
                bw = values.get("bw_mbit", bw * values.get("bw_scale", 1.0))
        return replace(self.base, bw=bw, owd=max(0.0, owd))   # queue and trace as the run has them

    def loss_p(self) -> float | None:
        """The uniform loss probability in force, or None: the run's own loss model."""
        values = [v["loss_p"] for _, v in self.active if "loss_p" in v]
        return values[-1] if values else None

    def state(self) -> dict[str, Any]:
        """In force now, as recorded with each event: owd_ms, bw_mbit, loss_p (None: the run's model), outage."""
        shaping = self.shaping()
        return {"owd_ms": shaping.owd, "bw_mbit": shaping.bw, "loss_p": self.loss_p(), "outage": self.outages > 0}


def describe_state(state: dict[str, Any]) -> str:
    """What is in force on a direction, in words (`Layers.state`)."""
    if state["outage"]:
        return "cut (outage)"
    rate = "" if state["bw_mbit"] is None else f", {state['bw_mbit']:.4g} Mbit/s"
    loss = "model losses" if state["loss_p"] is None else f"loss p {state['loss_p']:g}"
    return f"owd {state['owd_ms']:.4g} ms{rate}, {loss}"


def timeline(actions: list[Action], base: dict[tuple[str, str], Shaping]) -> list[tuple[Action, str, dict[str, Any]]]:
    """After each action, per direction it acts on: what is in force there (`Layers.state`)."""
    layers = {key: Layers(shaping) for key, shaping in base.items()}
    out = []
    for action in actions:
        for direction in action.directions:
            layer = layers.setdefault((action.link, direction), Layers(Shaping(None, 0.0, 0)))
            layer.step(action)
            out.append((action, direction, layer.state()))
    return out


@dataclass
class Change:
    link: str
    directions: tuple[str, ...]
    times: list[float] | None         # one-shot times, or None when periodic
    every_s: float | None
    start_s: float
    until_s: float | None
    outage_ms: tuple[float, float] | None
    settings: dict[str, list[float]]  # each a list taken in turn per occurrence
    hold_ms: float | None
    key: str                          # "change[i]" for error messages
    random_phase: bool = False        # periodic: first occurrence at start_s + U[0, every_s) per run

    def occurrences(self, horizon_s: float, offset_s: float = 0.0) -> list[float]:
        if self.times is not None:
            return [t for t in self.times if t <= horizon_s]
        assert self.every_s is not None
        start = self.start_s + offset_s
        last = horizon_s if self.until_s is None else min(horizon_s, self.until_s)
        count = max(0, math.floor((last - start) / self.every_s + 1e-9) + 1)
        return [start + i * self.every_s for i in range(count)]

    def offset(self, seed: int, index: int) -> float:
        """This run's shift of a periodic change (0 unless ``phase = "random"``)."""
        if not self.random_phase or self.every_s is None:
            return 0.0
        return float(np.random.default_rng([seed & (2**63 - 1), index, 1]).uniform(0, self.every_s))


@dataclass
class Schedule:
    file: str
    description: str
    changes: list[Change]

    def actions(self, horizon_s: float, seed: int) -> list[Action]:
        """Every action up to ``horizon_s`` (the run's time limit), in time order (stable)."""
        out: list[Action] = []
        for ci, change in enumerate(self.changes):
            rng = np.random.default_rng([seed & (2**63 - 1), ci])
            for n, at in enumerate(change.occurrences(horizon_s, change.offset(seed, ci))):
                if change.outage_ms is not None:
                    low, high = change.outage_ms
                    length = float(rng.uniform(low, high)) if high > low else low
                    out.append(Action(at, ci, n, change.link, change.directions, "outage-start",
                                      {"length_ms": length}))
                    out.append(Action(at + length / 1e3, ci, n, change.link, change.directions, "outage-end",
                                      {"length_ms": length}))
                if change.settings:
                    values = {k: v[n % len(v)] for k, v in change.settings.items()}
                    out.append(Action(at, ci, n, change.link, change.directions, "set", values))
                    if change.hold_ms is not None:
                        out.append(Action(at + change.hold_ms / 1e3, ci, n, change.link, change.directions,
                                          "undo", values))
                if len(out) > MAX_EVENTS:
                    raise SpecError(self.file, change.key, f"more than {MAX_EVENTS} events within "
                                    f"{horizon_s:g} s: is the period too short?")
        # An outage end before a start at the same time: back-to-back outages never overlap.
        order = {"outage-end": 0, "undo": 1, "set": 2, "outage-start": 3}
        return sorted(out, key=lambda a: (a.at_s, order[a.kind], a.change))

    def draws_per_run(self) -> bool:
        """Whether runs differ in their actions: a random phase or outage lengths drawn from each run's seed."""
        return any(c.random_phase or (c.outage_ms is not None and c.outage_ms[1] > c.outage_ms[0])
                   for c in self.changes)

    def check_topology(self, topology: Any, loss_model: str | None = None, design: str | Path | None = None) -> None:
        """Links exist; outages and loss changes need a lossy link (its droppers), delay and rate
        changes a shaped link; loss_p needs the design's loss model to be uniform."""
        ids = [link.id for link in topology.links]
        lossy = topology.lossy_links()
        for change in self.changes:
            if change.link not in ids:
                raise SpecError(self.file, f"{change.key}.link", f"no link {change.link!r} in {topology.file}", ids)
            link = topology.link(change.link)
            if (change.outage_ms is not None or "loss_p" in change.settings) and change.link not in lossy:
                raise SpecError(self.file, f"{change.key}.link", f"link {change.link!r} has no dropper: outages "
                                f"and loss changes need a lossy link (loss = true in {topology.file})", lossy)
            if set(change.settings) - {"loss_p"} and not link.shaped:
                raise SpecError(self.file, f"{change.key}.link", f"link {change.link!r} is not shaped (no bw or "
                                "owd): delay and rate changes act on its delay node")
            for direction in change.directions:
                spec = getattr(link, direction)
                if {"owd_ms", "owd_delta_ms"} & set(change.settings) and spec.delays is not None:
                    raise SpecError(self.file, f"{change.key}.owd", f"link {change.link!r} follows a delay series in "
                                    f"the {direction} direction: its delay is the series'")
                if ("bw_mbit" in change.settings or "bw_scale" in change.settings) and spec.bw is None:
                    raise SpecError(self.file, f"{change.key}.bw", f"link {change.link!r} has no rate limit in the "
                                    f"{direction} direction to change" + (" (its trace is its rate)" if spec.trace
                                                                          is not None else ""))
            if "loss_p" in change.settings and loss_model is not None and not MODELS[loss_model].changes_in_place:
                where = f" (design {design})" if design else ""
                in_place = [kind for kind, model in MODELS.items() if model.changes_in_place]
                raise SpecError(self.file, f"{change.key}.loss_p", f"loss changes are applied in place to a "
                                f"{' or '.join(in_place)} model; the design's loss model is {loss_model!r}{where}",
                                in_place)

    def canonical(self) -> str:
        """A stable text of what the schedule does (part of a campaign's experiment hash)."""
        # random_phase only when set: schedules written before it keep their hash (and run keys).
        return json.dumps([{k: v for k, v in vars(c).items() if k != "key" and (k != "random_phase" or v)}
                           for c in self.changes], sort_keys=True, default=list)


def _number_or_list(sec: Section, name: str, *, low: float, high: float, allow_list: bool) -> list[float] | None:
    if name not in sec:
        return None
    value = sec.get(name, (float, list))
    values = value if isinstance(value, list) else [value]
    if not values or (isinstance(value, list) and not allow_list):
        raise sec.error(name, "needs a number" + (" or a non-empty list of numbers" if allow_list else ""))
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not low <= v <= high:
            raise sec.error(name, f"must be {'numbers' if allow_list else 'a number'} in [{low:g}, {high:g}], "
                            f"got {v!r}")
    return [float(v) for v in values]


def _change(sec: Section) -> Change:
    link = sec.get("link", str)
    direction = sec.get("direction", str, "both", choices=SCHEDULE_DIRECTIONS)
    directions = ("forward", "reverse") if direction == "both" else (direction,)
    at = sec.get("at_s", (float, list), None)
    every = sec.get("every_s", float, None, min=0.001)
    if (at is None) == (every is None):
        raise sec.error("at_s", "give either at_s (a time or a list of times) or every_s (a period)")
    times = None
    if at is not None:
        times = _number_or_list(sec, "at_s", low=0, high=86400, allow_list=True)
        if times != sorted(times) or len(set(times or [])) != len(times or []):
            raise sec.error("at_s", "times must increase")
        for name in ("start_s", "until_s"):
            if name in sec:
                raise sec.error(name, "only with every_s (a periodic change)")
    start = float(sec.get("start_s", float, every or 0.0, min=0, max=86400))
    phase = sec.get("phase", str, "fixed", choices=("fixed", "random"))
    if phase == "random" and every is None:
        raise sec.error("phase", "a random phase shifts a periodic change: give every_s")
    until = sec.get("until_s", float, None, min=0, max=86400)
    outage = _number_or_list(sec, "outage_ms", low=0.001, high=3_600_000, allow_list=True)
    if outage is not None and len(outage) not in (1, 2):
        raise sec.error("outage_ms", "a length, or [low, high] to draw one per occurrence")
    if outage is not None and len(outage) == 2 and outage[0] > outage[1]:
        raise sec.error("outage_ms", f"low must be ≤ high, got {outage}")
    settings: dict[str, list[float]] = {}
    bounds = {"owd_ms": (0, 60_000), "owd_delta_ms": (-60_000, 60_000), "bw_mbit": (0.001, 100_000),
              "bw_scale": (0.001, 1000), "loss_p": (0, 1)}
    for name in SETTINGS:
        values = _number_or_list(sec, name, low=bounds[name][0], high=bounds[name][1], allow_list=True)
        if values is not None:
            settings[name] = values
    for a, b in (("owd_ms", "owd_delta_ms"), ("bw_mbit", "bw_scale")):
        if a in settings and b in settings:
            raise sec.error(b, f"give {a} or {b}, not both")
    hold = sec.get("hold_ms", float, None, min=0.001, max=86_400_000)
    if hold is not None and not settings:
        raise sec.error("hold_ms", "undoes a delay, rate or loss change: give one")
    if outage is None and not settings:
        raise sec.error(None, "changes nothing: give outage_ms or a setting", ["outage_ms", *SETTINGS])
    # Occurrences of one change must not overlap (an outage still on when the next one starts).
    span = max((outage or [0.0])[-1], hold or 0.0) / 1e3
    gaps = [every] if every is not None else [b - a for a, b in zip(times or [], (times or [])[1:], strict=False)]
    if span and gaps and min(gaps) <= span:
        raise sec.error("every_s" if every is not None else "at_s", f"occurrences {min(gaps):g} s apart overlap "
                        f"their own outage or hold ({span * 1e3:g} ms)")
    sec.done()
    return Change(link=link, directions=directions, times=times, every_s=every, start_s=start, until_s=until,
                  outage_ms=(outage[0], outage[-1]) if outage else None, settings=settings, hold_ms=hold,
                  key=sec.path, random_phase=phase == "random")


def load_schedule(path: str | Path) -> Schedule:
    """Parse and validate a schedule file (SpecError naming the file and key on any problem)."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(path, None, "schedule file not found")
    root = Section(load_toml(path), path)
    head = root.section("schedule")
    description = head.get("description", str, "")
    head.done()
    changes = [_change(sec) for sec in root.sections("change", required=True)]
    root.done()
    return Schedule(str(path), description, changes)
