"""The multipath smoke design end to end (real Mininet, real droppers, real tquic plugged in by its
descriptor alone, and multipath fecq): every run ok with the downloaded size verified, multipath
runs carry the data on both paths and single-path runs on path 1 only; plus a failing `[server]
setup` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.campaign import FAKE_DIR, ROOT, fecbench, rows
from tests.helpers.designs import design_file

pytestmark = [pytest.mark.require_root, pytest.mark.slow]

DESIGN = ROOT / "designs" / "multipath-smoke.toml"


def _runs(db: Path) -> list[dict]:
    return rows(db, "SELECT r.*, m.dct_ms, m.bytes_app, m.client_wall_ms, m.json AS metrics_json "
                    "FROM runs r LEFT JOIN metrics m ON m.run_key = r.key ORDER BY r.point, r.label, r.size")


def test_all_runs_ok_with_verified_sizes(multipath_db: Path) -> None:
    from fecbench.runners.experiment.prepare import prepare

    runs = _runs(multipath_db)
    assert len(runs) == len(prepare(DESIGN).runs) == 24
    assert [(r["label"], r["status"], r["error"]) for r in runs if r["status"] != "ok"] == []
    assert {r["label"] for r in runs} == {"tquic-sp", "tquic-mp-minrtt", "fecq-mp-rs"}
    assert {r["size"] for r in runs} == {100_000, 1_000_000}
    for run in runs:
        # bytes_app: tquic, the size of the file the client dumped, checked by fecbench against the
        # request; fecq, the bytes its client verified.
        assert run["bytes_app"] == run["size"]
        extra = json.loads(run["metrics_json"])
        if run["label"].startswith("tquic"):
            assert extra["requests_ok"] == 1 and extra["client_recv_bytes"] > run["size"]
        else:
            assert extra["multipath"]["paths_established"] == 2 and len(extra["paths"]) == 2
        # dct_ms is the client's own request time (µs scaled to ms), inside its process lifetime.
        assert 0 < run["dct_ms"] < run["client_wall_ms"]
    impls = json.loads(rows(multipath_db, "SELECT impls_json FROM campaigns")[0]["impls_json"])
    assert impls["tquic-mp-minrtt"]["version"] == "client 1.6.0"
    assert all(f["ok"] == 1 for f in rows(multipath_db, "SELECT * FROM fidelity"))
    assert {f["path"] for f in rows(multipath_db, "SELECT path FROM fidelity")} == {1, 2}


def test_points_are_mirrored_per_path(multipath_db: Path) -> None:
    points = rows(multipath_db, "SELECT * FROM points ORDER BY point")
    assert len(points) == 4
    for first, mirror in zip(points[0::2], points[1::2], strict=True):
        for factor in ("bw", "owd", "p"):
            assert (mirror[f"{factor}_1"], mirror[f"{factor}_2"]) == (first[f"{factor}_2"], first[f"{factor}_1"])


def test_traffic_per_path(multipath_db: Path) -> None:
    """Data flows server → client (reverse). Multipath: both paths' droppers matched packets in both
    directions, and path 2 carried a real share of the 1 MB downloads; single path: path 1 only."""
    runs = {r["key"]: r for r in _runs(multipath_db)}
    stats: dict[str, dict[tuple[str, str], dict]] = {}
    for s in rows(multipath_db, "SELECT * FROM link_stats WHERE link IN ('path1', 'path2')"):
        stats.setdefault(s["run_key"], {})[(s["link"], s["direction"])] = s
    assert set(stats) == set(runs)
    for key, run in runs.items():
        matched = {where: s["matched"] for where, s in stats[key].items()}
        assert matched[("path1", "reverse")] > 0 and matched[("path1", "forward")] > 0, (run["label"], matched)
        if run["label"] == "tquic-sp":
            assert matched[("path2", "reverse")] == matched[("path2", "forward")] == 0, matched
            assert stats[key][("path2", "reverse")]["seen"] == 0
        else:
            assert matched[("path2", "reverse")] > 0 and matched[("path2", "forward")] > 0, matched
            if run["size"] == 1_000_000:
                share = matched[("path2", "reverse")] / (matched[("path2", "reverse")] + matched[("path1", "reverse")])
                assert share >= 0.05, (run["point"], share)
        # The droppers applied each path's own loss model, seeded by the run.
        model = json.loads(stats[key][("path2", "reverse")]["model"])
        assert model["seed"] == run["loss_seed"] and model["model"] == "uniform"


def test_failing_setup_command_fails_the_run(tmp_path: Path) -> None:
    """A descriptor whose `[server] setup` command fails: the run is `failed` with the reason, and the
    server never started (the campaign goes on)."""
    folder = tmp_path / "impls" / "badsetup"
    folder.mkdir(parents=True)
    descriptor = (FAKE_DIR / "fake" / "impl.toml").read_text()
    descriptor = descriptor.replace('binary = "fake.py"', f'binary = "{FAKE_DIR / "fake" / "fake.py"}"')
    descriptor = descriptor.replace("[server]\n", '[server]\nsetup = [["touch", "{run_dir}/setup-ran"], ["false"]]\n')
    (folder / "impl.toml").write_text(descriptor)
    design = design_file(tmp_path / "setup.toml", "badsetup", seed=5, timeout_s=5,
                         settings={"fidelity": "off", "impl_dirs": [tmp_path / "impls"]}, method="list",
                         file="points.csv", factors={"bw": (5, 20), "owd": (1, 5)}, impls=[("badsetup", "badsetup")])
    (tmp_path / "points.csv").write_text("bw,owd\n10,2\n")
    db = tmp_path / "setup.sqlite"
    out = fecbench("run", str(design), "--db", str(db))
    runs = rows(db, "SELECT * FROM runs") if db.exists() else []
    assert len(runs) == 1, out.stdout + out.stderr
    assert runs[0]["status"] == "failed"
    assert "server setup command false exited with status 1" in runs[0]["error"]
    # The commands ran in order, in the run's own folder (kept for a failed run), and no server started.
    run_dir = tmp_path / "setup.logs" / runs[0]["key"][:16]
    assert (run_dir / "setup-ran").exists() and not (run_dir / "server.out").exists()
