"""A loss burst at a quiet moment must not end a run that measured everything (fecq `--keepalive`).

The dropper's loss models advance per packet. When the application stops (the end of a messages
run: the server's `done` line, then the `stats` exchange), a burst of N server packets lasts N
probe rounds whose spacing doubles each time, so a burst of ~30 packets outlasts the idle timeout
and the run ends `failed: connection lost` after receiving every message (seen at the thesis's
long-burst points). With a PING every 0.2 s of silence the burst passes in seconds.

Real topology, trace dropper: a first lossless run finds the server's last message packet; the
next runs drop 40 server → client packets from two before it, with and without the keep-alive. The
start is early because a run's packet count before that point varies by one or two: a burst that
began after the `done` line let the run close normally (CI saw it). 40 lies between what the probes
alone send in the 8 s idle timeout (22-28 measured) and what they send with the keep-alive (55-58).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.campaign import FECQ, fecbench, rows
from tests.test_messages_accounting import data_indices, design

pytestmark = [pytest.mark.require_root, pytest.mark.slow]

BURST = 40
ARGS = 'mode = "datagram", fec = "none", cc = "none", idle_timeout = "8"'


def run(tmp: Path, name: str, drops: list[int], extra: str = "") -> tuple[dict, np.ndarray]:
    trace = tmp / f"{name}.txt"
    trace.write_text("\n".join(str(i) for i in (drops or [10_000_000])) + "\n")
    db = tmp / f"{name}.sqlite"
    out = fecbench("run", str(design(tmp / f"{name}.toml", trace, packets=8, args=f"{{ {ARGS}{extra} }}")),
                   "--db", str(db))
    assert out.returncode == 0, out.stdout + out.stderr
    [r] = rows(db, "SELECT r.status, r.error, m.json FROM runs r JOIN metrics m ON m.run_key = r.key")
    [log] = rows(db, "SELECT data FROM verdict_logs WHERE direction = 'reverse'")
    records = np.load(io.BytesIO(log["data"]), allow_pickle=False)
    return {**json.loads(r["json"] or "{}"), "status": r["status"], "error": r["error"]}, \
        records[np.argsort(records["index"], kind="stable")]


def test_a_burst_after_the_last_message_passes_with_the_keepalive(tmp_path: Path) -> None:
    if not FECQ.exists():
        pytest.skip("fecq is not built (make bootstrap)")
    base, log = run(tmp_path, "lossless", [])
    assert base["status"] == "ok" and base["keepalive_s"] == 0.2, base
    last = int(data_indices(log)[-1])
    cut = list(range(last - 2, last - 2 + BURST))
    kept, log = run(tmp_path, "keepalive", cut)
    assert kept["status"] == "ok", kept["error"]
    assert int(log["verdict"].sum()) == BURST  # the burst happened: every one of its packets dropped
    assert kept["messages_on_time"] >= 85, kept  # of 90: only the last message's neighbourhood may suffer
    without, log = run(tmp_path, "nokeepalive", cut, ', keepalive = "0"')
    assert without["status"] == "failed" and "connection lost" in without["error"], without
    assert without["keepalive_s"] == 0 and without["messages_on_time"] >= 85, without
    assert int(log["verdict"].sum()) < BURST  # the probes never got past the burst
