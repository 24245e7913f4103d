"""A page's load time for real (root, Mininet, fecq) against a hand computation: a three-object page over a 40 ms,
50 Mbit/s network, the load time within 5 % of the critical path computed by hand and every activity started when
the graph's rules say. Timing: `make test` runs it alone (tests/conftest.py SERIAL_FILES)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fecbench.pages.graph import FORMAT, parse
from tests.helpers.campaign import ROOT, fecbench, rows
from tests.helpers.designs import NO_LOSS, design_file

FECQ = ROOT / "quic-impls" / "fecq" / "target" / "release" / "fecq"
RTT_MS, RATE_MBIT = 40.0, 50.0

#: The HTML (8 kB) is parsed for 150 ms from its first byte; 50 ms into that the parser asks for a script (6 kB),
#: which runs 200 ms once it is in; then an image (10 kB) is fetched. Every object fits the first congestion
#: window, so each download takes a round trip and its bytes' time: by hand (40 ms RTT, 50 Mbit/s) the HTML's
#: first byte at 40 ms, the script asked at 90, in at 131, run until 331, the image in at 373 ms.
HAND = {"format": FORMAT, "name": "hand", "load": "img",
        "activities": [{"id": "html", "kind": "download", "request": 300, "response": 8000},
                       {"id": "parse", "kind": "compute", "ms": 150},
                       {"id": "js", "kind": "download", "request": 300, "response": 6000},
                       {"id": "eval", "kind": "compute", "ms": 200},
                       {"id": "img", "kind": "download", "request": 300, "response": 10000}],
        "deps": [{"after": "html", "then": "parse", "on": "first_byte"},
                 {"after": "parse", "then": "js", "on": "start", "ms": 50},
                 {"after": "js", "then": "eval"},
                 {"after": "eval", "then": "img"}]}
BY_HAND_MS = RTT_MS + 50 + (RTT_MS + 6300 * 8 / (RATE_MBIT * 1e3)) + 200 + (RTT_MS + 10300 * 8 / (RATE_MBIT * 1e3))


@pytest.mark.require_root
def test_a_three_object_page_loads_in_the_time_computed_by_hand(tmp_path: Path) -> None:
    if not FECQ.exists():
        pytest.skip(f"{FECQ} is not built (make bootstrap)")
    (tmp_path / "hand.json").write_text(json.dumps(HAND))
    factors = {"bw": {"levels": [RATE_MBIT], "unit": "Mbit/s"}, "owd": {"levels": [RTT_MS / 2], "unit": "ms"}}
    design = design_file(tmp_path / "hand.toml", seed=3, timeout_s=30, method="factorial", repetitions=3,
                         factors=factors, loss=NO_LOSS, workload={"kind": "page", "page": "hand.json"},
                         impls=[("fecq", "quic", {"fec": "none"})])
    db = tmp_path / "hand.sqlite"
    out = fecbench("run", str(design), "--db", str(db))
    assert out.returncode == 0, out.stdout + out.stderr
    graph = parse(HAND)
    assert graph.modelled_load_ms(RTT_MS, RATE_MBIT * 1e3 / 8) == pytest.approx(BY_HAND_MS)
    measured = rows(db, "SELECT r.status, m.dct_ms, m.bytes_app, m.json FROM runs r JOIN metrics m "
                        "ON m.run_key = r.key")
    assert len(measured) == 3 and all(m["status"] == "ok" for m in measured)
    for m in measured:
        assert m["dct_ms"] == pytest.approx(BY_HAND_MS, rel=0.05), (m["dct_ms"], BY_HAND_MS)
        assert m["bytes_app"] == graph.app_bytes() == 24900
        report = {a["id"]: a for a in json.loads(m["json"])["page"]["activities"]}
        # The client kept the graph's rules: replayed with the downloads' own measured times, the schedule
        # starts every activity when the client did (its timers wait in 1 ms steps: a few ms over three of them).
        fetched = {k: (a["first_byte_ms"] - a["start_ms"], a["end_ms"] - a["start_ms"]) for k, a in report.items()
                   if a["kind"] == "download"}
        replay = graph.schedule(lambda act, fetched=fetched: fetched[act.id])
        for name, times in replay.items():
            assert report[name]["start_ms"] == pytest.approx(times.start, abs=5.0), (name, report[name], times)
        assert report["parse"]["end_ms"] - report["parse"]["start_ms"] == pytest.approx(150, abs=4.0)
