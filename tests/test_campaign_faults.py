"""A fake implementation that fails, hangs, exits 127, writes garbage: each run ends in the right status,
the campaign goes on, a rerun resumes by key, --retry re-runs only what it names (real Mininet, as root)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from campaign_helpers import fake_design, fecbench, rows

pytestmark = [pytest.mark.require_root, pytest.mark.slow]

EXPECTED = {
    "ok": ("ok", None),
    "fail": ("failed", "client exited with status 1"),
    "hang": ("timeout", "client still running"),
    "unsupported": ("unsupported", "status 127"),
    "garbage": ("failed", "not valid JSON"),
    "badtype": ("failed", "dct_ms must be a number"),
    "nometrics": ("failed", "no metrics file"),
    "serverdies": ("failed", "server exited with status 3"),
}
ARGS = {"ok": {}, "fail": {"behave": "fail"}, "hang": {"behave": "hang"},
        "unsupported": {"behave": "unsupported"}, "garbage": {"behave": "garbage"},
        "badtype": {"behave": "badtype"}, "nometrics": {"behave": "nometrics"},
        "serverdies": {"server_behave": "die"}}


def leftover_processes(marker: str) -> list[str]:
    """Command lines of live processes mentioning `marker` (the campaign's log folder is in their argv)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(cmdline)
    return found


def test_fault_statuses_resume_and_retry(tmp_path: Path) -> None:
    design = fake_design(tmp_path / "faults.toml", ARGS, points=2, timeout_s=2)
    db = tmp_path / "faults.sqlite"
    out = fecbench("run", str(design), "--db", str(db))
    assert out.returncode == 0, out.stdout + out.stderr

    runs = rows(db, "SELECT * FROM runs")
    assert len(runs) == 2 * len(ARGS)
    for run in runs:
        status, text = EXPECTED[run["label"]]
        assert run["status"] == status, (run["label"], run["error"])
        if text:
            assert text in run["error"], (run["label"], run["error"])
        assert run["attempts"] == 1 and run["finished_at"] and run["duration_s"] > 0
        assert run["link_backend"] and run["host"]
    assert all("listening" in (r["server_log_tail"] or "") for r in runs)
    assert all("fake client" in (r["client_log_tail"] or "") for r in runs if r["label"] != "serverdies")
    ok = rows(db, "SELECT m.* FROM metrics m JOIN runs r ON r.key = m.run_key WHERE r.label = 'ok'")
    assert len(ok) == 2 and all(m["dct_ms"] is not None and m["client_wall_ms"] > 0 for m in ok)
    assert rows(db, "SELECT COUNT(*) AS n FROM fidelity")[0]["n"] == len(runs)
    assert rows(db, "SELECT COUNT(*) AS n FROM link_stats")[0]["n"] == 2 * len(runs)  # both directions
    # No process of the campaign survives (the hanging client was killed with its group).
    assert not leftover_processes(str(tmp_path))

    campaign = rows(db, "SELECT * FROM campaigns")
    assert len(campaign) == 1 and campaign[0]["host_json"] and "fake" in campaign[0]["impls_json"]

    # Resume: nothing left to do, nothing duplicated.
    out = fecbench("run", str(design), "--db", str(db))
    assert out.returncode == 0 and "0 of 16 run(s) executed" in out.stdout.replace("\n", " ")
    assert len(rows(db, "SELECT * FROM runs")) == len(runs)

    # --retry failed re-runs the failed runs only, in place.
    out = fecbench("run", str(design), "--db", str(db), "--retry", "failed")
    assert out.returncode == 0, out.stderr
    after = {r["key"]: r for r in rows(db, "SELECT * FROM runs")}
    assert len(after) == len(runs), (out.stdout, rows(db, "SELECT key, label, status, campaign_id FROM runs"))
    for run in runs:
        expected_attempts = 2 if run["status"] == "failed" else 1
        assert after[run["key"]]["attempts"] == expected_attempts
        assert after[run["key"]]["status"] == run["status"]
    # One metrics row per run at most (retries replace theirs); client metrics for the ok runs only.
    assert len(rows(db, "SELECT * FROM metrics")) == len(runs)
    assert len(rows(db, "SELECT * FROM metrics WHERE json IS NOT NULL")) == 2

    status = fecbench("status", str(db), "--timing")
    assert status.returncode == 0 and "per-run overhead" in status.stdout and "failures by kind" in status.stdout
