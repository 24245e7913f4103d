"""The one interface for changing a link (fecbench.emulation.link_control), without root: which
commands a change gives per backend (the delay element for delays, tc for rate and queue, one batch
per delay node), what it reports, and the ends' JSON round trip. The real thing: test_schedule_net.py
and test_topology_net.py (root)."""

from __future__ import annotations

import json

import pytest

from fecbench.emulation.link_control import DropperRef, LinkChange, LinkControl, LinkEnd
from fecbench.emulation.spec import Shaping


def end(direction: str, backend: str = "delayline", link: str = "bottleneck", bw: float | None = 10.0) -> LinkEnd:
    return LinkEnd(link=link, direction=direction, backend=backend, node=f"d-{link}", pid=4242,
                   egress=f"{link}-{direction[0]}", shaping=Shaping(bw=bw, owd=20.0, queue=50),
                   delayline="/run/x.sock" if backend == "delayline" else None,
                   dropper=DropperRef("/sys/fs/bpf/x", 7, 0))


class Recorder:
    def __init__(self) -> None:
        self.calls: list[dict] = []

    def set_delay(self, ab_ms: float | None = None, ba_ms: float | None = None) -> None:
        self.calls.append({k: v for k, v in (("ab_ms", ab_ms), ("ba_ms", ba_ms)) if v is not None})

    def stats(self) -> dict:
        return {}


class Batches:
    """Stands in for `tc -j -batch` in the delay nodes: records each job, answers every read-back with a tbf."""

    def __init__(self) -> None:
        self.jobs: list[dict[int, str]] = []

    def __call__(self, jobs):
        self.jobs.append(dict(jobs))
        return {pid: ['[{"kind": "tbf", "options": {"rate": 625000, "burst": 3028}}]'] * text.count("qdisc show")
                for pid, text in jobs.items()}


def test_delayline_backend_delays_by_the_element_rates_by_tc_one_command_per_element():
    delay, tc = Recorder(), Batches()
    control = LinkControl([end("forward"), end("reverse")], delays={"bottleneck": delay}, batches=tc)
    applied = control.apply({("bottleneck", "forward"): LinkChange(shaping=Shaping(10.0, 35.0, 50)),
                             ("bottleneck", "reverse"): LinkChange(shaping=Shaping(10.0, 25.0, 50))})
    assert delay.calls == [{"ab_ms": 35.0, "ba_ms": 25.0}] and tc.jobs == []
    forward = applied[("bottleneck", "forward")]
    assert (forward["owd_applied_ms"], forward["bw_applied_mbit"]) == (35.0, 10.0)
    assert set(forward["in_force"]) == {"delay"}
    assert control.current[("bottleneck", "reverse")].owd == 25.0
    applied = control.apply({("bottleneck", "forward"): LinkChange(shaping=Shaping(5.0, 35.0, 50))})
    assert delay.calls[1:] == [] and len(tc.jobs) == 1
    (pid, text), = tc.jobs[0].items()
    # Only the rate changed: one tbf line (no fifo line), then the read-back of that egress.
    assert pid == 4242 and text.count("tbf") == 1 and "fifo" not in text
    assert text.endswith("qdisc show dev bottleneck-f\n")
    assert applied[("bottleneck", "forward")]["built"] == {"rate_mbit": 5.0, "burst_bytes": 3028}
    assert set(applied[("bottleneck", "forward")]["in_force"]) == {"tc"}
    control.apply({("bottleneck", "forward"): LinkChange(shaping=Shaping(5.0, 35.0, 50))})   # no change
    assert len(tc.jobs) == 1 and delay.calls[1:] == []


def test_netem_backend_replaces_netem_and_tbf_in_one_batch_per_node():
    tc = Batches()
    control = LinkControl([end("forward", "netem"), end("reverse", "netem")], batches=tc)
    control.apply({("bottleneck", "forward"): LinkChange(shaping=Shaping(10.0, 30.0, 50)),
                   ("bottleneck", "reverse"): LinkChange(shaping=Shaping(10.0, 30.0, 50))})
    assert len(tc.jobs) == 1
    (text,) = tc.jobs[0].values()
    # The delay alone changed: netem lines only, the rate limiter and its queue untouched.
    assert text.count("netem delay 30ms") == 2 and "tbf" not in text and text.count("qdisc show") == 2


def test_a_loss_change_needs_the_dropper_and_ends_json_round_trip():
    control = LinkControl([LinkEnd.from_json(json.loads(json.dumps({**end("forward").to_json(), "dropper": None})))])
    with pytest.raises(RuntimeError, match="no dropper"):
        control.apply({("bottleneck", "forward"): LinkChange(outage=True)})
    original = end("reverse")
    assert LinkEnd.from_json(json.loads(json.dumps(original.to_json()))) == original
