"""The one interface for changing a link (fecbench.topologies.link_control), without root: which
commands a change gives per backend (the delay element for delays, tc for rate and queue, one batch
per delay node), what it reports, and the ends' JSON round trip. The real thing: test_schedule_net.py
and test_topology_net.py (root)."""

from __future__ import annotations

import json

import pytest

from fecbench.topologies import link_control
from fecbench.topologies.link_control import DropperRef, LinkChange, LinkControl, LinkEnd
from fecbench.topologies.spec import Shaping


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


@pytest.fixture
def tc_jobs(monkeypatch):
    jobs: list = []
    monkeypatch.setattr(link_control, "run_in_nodes", jobs.extend)
    return jobs


def test_delayline_backend_delays_by_the_element_rates_by_tc_one_command_per_element(tc_jobs):
    delay = Recorder()
    control = LinkControl([end("forward"), end("reverse")], delays={"bottleneck": delay})
    applied = control.apply({("bottleneck", "forward"): LinkChange(shaping=Shaping(10.0, 35.0, 50)),
                             ("bottleneck", "reverse"): LinkChange(shaping=Shaping(10.0, 25.0, 50))})
    assert delay.calls == [{"ab_ms": 35.0, "ba_ms": 25.0}] and tc_jobs == []
    assert applied[("bottleneck", "forward")] == {"owd_applied_ms": 35.0, "bw_applied_mbit": 10.0}
    assert control.current[("bottleneck", "reverse")].owd == 25.0
    control.apply({("bottleneck", "forward"): LinkChange(shaping=Shaping(5.0, 35.0, 50))})
    assert delay.calls[1:] == [] and len(tc_jobs) == 1
    pid, argv, text = tc_jobs[0]
    assert (pid, argv) == (4242, ["tc", "-batch", "-"]) and "tbf" in text and "bottleneck-f" in text
    control.apply({("bottleneck", "forward"): LinkChange(shaping=Shaping(5.0, 35.0, 50))})   # no change
    assert len(tc_jobs) == 1 and delay.calls[1:] == []


def test_netem_backend_replaces_netem_and_tbf_in_one_batch_per_node(tc_jobs):
    control = LinkControl([end("forward", "netem"), end("reverse", "netem")])
    control.apply({("bottleneck", "forward"): LinkChange(shaping=Shaping(10.0, 30.0, 50)),
                   ("bottleneck", "reverse"): LinkChange(shaping=Shaping(10.0, 30.0, 50))})
    assert len(tc_jobs) == 1
    text = tc_jobs[0][2]
    assert text.count("netem delay 30ms") == 2 and text.count("tbf") == 2


def test_a_loss_change_needs_the_dropper_and_ends_json_round_trip():
    control = LinkControl([LinkEnd.from_json(json.loads(json.dumps({**end("forward").to_json(), "dropper": None})))])
    with pytest.raises(RuntimeError, match="no dropper"):
        control.apply({("bottleneck", "forward"): LinkChange(outage=True)})
    original = end("reverse")
    assert LinkEnd.from_json(json.loads(json.dumps(original.to_json()))) == original
