"""fecq's qlog (`--qlog-dir`, quic-impls/fecq/README.md "qlog and key log") read through
fecbench.analysis.traces.qlog as `fecbench explain` reads it: one trace per endpoint and connection, the stack's
packets and metrics and fecq's FEC events on one clock, per path on multipath. Runs `fecq loopback` (no root)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fecbench.analysis.traces import qlog

ROOT = Path(__file__).resolve().parent.parent
FECQ = ROOT / "quic-impls" / "fecq" / "target" / "release" / "fecq"

pytestmark = pytest.mark.skipif(not FECQ.exists(), reason="fecq is not built (make fecq)")


def _loopback(tmp_path: Path, *args: str) -> dict[str, qlog.QlogTrace]:
    folder = tmp_path / "qlog"
    out = subprocess.run([str(FECQ), "loopback", "--size", "400000", "--loss", "0.05", "--seed", "7",
                          "--qlog-dir", str(folder), "--out", str(tmp_path / "m.json"), *args],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    traces = {}
    for file in sorted(folder.iterdir()):
        [trace] = qlog.read(file)
        assert trace.skipped == 0, file
        traces[trace.vantage] = trace
    assert set(traces) == {"server", "client"}
    assert traces["server"].connection == traces["client"].connection      # the ODCID, both ends
    return traces


def _kinds(trace: qlog.QlogTrace) -> dict[str, int]:
    return trace.events["kind"].value_counts().to_dict()


def test_single_path_trace_has_stack_and_fec_events(tmp_path: Path) -> None:
    traces = _loopback(tmp_path, "--fec", "rs:30,20")
    server, client = traces["server"], traces["client"]
    kinds = _kinds(server)
    assert kinds["sent"] > 100 and kinds["metrics"] > 0 and kinds["repair_sent"] > 0, kinds
    assert _kinds(client).get("recovered", 0) > 0 and _kinds(client)["signalled"] == _kinds(client)["recovered"]
    events = server.events
    repairs = events[events["kind"] == "repair_sent"]
    assert repairs["block"].notna().all() and (repairs["path"] == 0).all()
    # one clock: repairs fall among the packets they protect, RTTs in ms (loopback: well under 50 ms)
    sent = events[events["kind"] == "sent"]
    assert sent["t_s"].min() <= repairs["t_s"].min() and repairs["t_s"].max() <= events["t_s"].max()
    srtt = events["srtt_ms"].dropna()
    assert srtt.iloc[0] == pytest.approx(333.0) and srtt.iloc[-1] < 50
    signalled = client.events[client.events["kind"] == "signalled"]
    assert set(signalled["trigger"]) == {"ce"}
    # both ends on the wall clock (reference_time), so that several endpoints' traces line up
    import time

    starts = [t.events["t_abs_s"].min() for t in (server, client)]
    assert server.events["t_abs_s"].notna().all() and abs(starts[0] - starts[1]) < 1.0
    assert abs(starts[0] - time.time()) < 120


def test_multipath_trace_names_paths(tmp_path: Path) -> None:
    traces = _loopback(tmp_path, "--fec", "xor:5", "--multipath", "--local-addresses", "127.0.0.1,127.0.0.2")
    server = traces["server"]
    assert server.paths == [1, 2]
    repairs = server.events[server.events["kind"] == "repair_sent"]
    assert set(repairs["path"]) == {1, 2} and repairs["block"].notna().all()
    assert _kinds(traces["client"]).get("recovered", 0) > 0


def test_without_the_option_nothing_is_written(tmp_path: Path) -> None:
    out = subprocess.run([str(FECQ), "loopback", "--size", "100000", "--fec", "xor:5",
                          "--out", str(tmp_path / "m.json")], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]
