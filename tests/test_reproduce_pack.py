"""`fecbench reproduce smoke` end to end at a small budget (real Mininet, droppers, fecq), two profiles:
every claim gets a verdict for every profile, the design absent here is "not runnable here", the
campaigns are ordinary databases that `fecbench run` resumes, and the page opens on the verdicts.
It checks the machinery, never which verdict a claim gets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fecbench.verdicts.evaluate import NOT_RUNNABLE, VERDICTS
from fecbench.verdicts.pack import load_pack
from tests.helpers.campaign import fecbench, rows

pytestmark = [pytest.mark.require_root, pytest.mark.slow]
PROFILES = ["defaults", "repair-free"]
#: Budgets: `reproduce` keeps 20 s + 2 s per claim and profile aside for the verdicts (44 s here with two
#: profiles), and its preparation, first look and a Dask cluster's start come out of the rest; on a machine
#: as loaded as `make test`'s workers leave it, that took over 18 s, and 75 s budgets (31 s for runs) ended
#: before any campaign could start. These leave at least a minute for runs.
BUDGET_TWO_PROFILES = "120s"
BUDGET_ONE_PROFILE = "100s"
STOPPED_WHY = {"decided", "at threshold", "budget", "no units left", "no sequential test"}


def test_smoke_pack_gives_every_claim_a_verdict(tmp_path: Path) -> None:
    done = fecbench("reproduce", "smoke", "--budget", BUDGET_TWO_PROFILES, "--profile", PROFILES[0],
                    "--profile", PROFILES[1], "--results", str(tmp_path), timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    pack = load_pack("smoke")
    verdicts = json.loads((tmp_path / "smoke" / "verdicts.json").read_text())
    got = {(v["claim"], v["profile"]): v for v in verdicts}
    assert set(got) == {(c.id, p) for c in pack.claims for p in PROFILES}
    assert all(v["verdict"] in VERDICTS and (v["verdict"] != "inconclusive" or v["reason"]) for v in verdicts)
    assert {got[("absent-design", p)]["verdict"] for p in PROFILES} == {NOT_RUNNABLE}
    for profile in PROFILES:
        db = tmp_path / "smoke" / profile / "reproduce-smoke.sqlite"
        design = tmp_path / "smoke" / profile / "reproduce-smoke.toml"
        assert rows(db, "SELECT name FROM campaigns")[0]["name"] == f"reproduce-smoke.{profile}"
        ran = rows(db, "SELECT status, impl_args FROM runs WHERE status != 'pending'")
        assert ran, f"{profile}: no run within the budget"
        free = {json.loads(r["impl_args"]).get("repair_cc") for r in ran}
        assert free == ({"free"} if profile == "repair-free" else {None})
        # An ordinary campaign: `fecbench run` resumes it (nothing run here: --dry-run).
        resumed = fecbench("run", str(design), "--db", str(db), "--dry-run")
        assert resumed.returncode == 0 and "run(s) to do" in resumed.stdout
    page = (tmp_path / "smoke" / "index.html").read_text()
    assert page.index("<h2>Verdicts</h2>") < page.index("<h2>Claims</h2>")
    assert "href='#share-below'" in page and "id='share-below'" in page
    # Each claim says why it stopped, and how often it was looked at (once per batch and at the end).
    assert all(v["stopped"] in STOPPED_WHY and v["looks"] >= 2 for v in verdicts if v["verdict"] != NOT_RUNNABLE)
    # Evaluating again without running gives the same verdicts and intervals (one look more).
    again = fecbench("reproduce", "smoke", "--no-run", "--profile", PROFILES[0], "--profile", PROFILES[1],
                     "--results", str(tmp_path))
    assert again.returncode == 0, again.stderr[-2000:]
    later = json.loads((tmp_path / "smoke" / "verdicts.json").read_text())
    assert [v["looks"] for v in later] == [v["looks"] + 1 for v in verdicts]
    assert [_same(v) for v in later] == [_same(v) for v in verdicts]
    # The recordings replayed (`fecbench bench verdicts`), the page's verdicts shared false-discovery-wise: the
    # claims decided by machine time, then by name.
    bench = fecbench("bench", "verdicts", "smoke", "--results", str(tmp_path), "--budget", "5m",
                     "--compare-replays", "1", "--error", "fdr")
    said = " ".join(bench.stdout.split())
    assert bench.returncode == 0, bench.stderr[-2000:]
    assert "a false-discovery level over the page" in said and "decided at 5 min by the new allocator" in said
    bad = fecbench("bench", "verdicts", "smoke", "--results", str(tmp_path), "--error", "fdp")
    assert bad.returncode == 2 and "--error 'fdp': choose fwer or fdr" in bad.stderr


def _same(verdict: dict) -> dict:
    return {k: v for k, v in verdict.items() if k not in ("looks", "stopped")}


def test_reproduce_on_a_dask_cluster(tmp_path: Path) -> None:
    """`reproduce --dask local:2`: the pack's runs go to the cluster's workers (the campaign says so) and the
    claims get their verdicts as on one network."""
    done = fecbench("reproduce", "smoke", "--budget", BUDGET_ONE_PROFILE, "--dask", "local:2",
                    "--results", str(tmp_path), timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    db = tmp_path / "smoke" / PROFILES[0] / "reproduce-smoke.sqlite"
    host = json.loads(rows(db, "SELECT host_json FROM campaigns")[0]["host_json"])
    assert host["dask"] == "local:2" and len(host["hosts"]) == 1
    assert {r["executor"] for r in rows(db, "SELECT executor FROM sessions")} == {"Dask local:2"}
    assert rows(db, "SELECT count(*) AS n FROM runs WHERE status = 'ok'")[0]["n"] > 0
    verdicts = json.loads((tmp_path / "smoke" / "verdicts.json").read_text())
    assert all(v["verdict"] in VERDICTS for v in verdicts)


def test_reproduce_jobs_auto_reuses_this_machines_calibration(tmp_path: Path) -> None:
    """A kept calibration of this machine for the pack's workload class (here: 1 network, nothing to confirm)
    is reused by `reproduce --jobs auto` instead of calibrating, and recorded with the campaign."""
    import os

    from fecbench.runners.executors import calibrations
    from fecbench.runners.experiment.prepare import prepare

    store = tmp_path / "calibrations.json"
    os.environ[calibrations.STORE_ENV] = str(store)
    try:
        prepared = prepare(Path(__file__).resolve().parent.parent / "designs" / "reproduce-smoke.toml")
        calibrations.keep(prepared, None, {"chosen": 1, "rows": []})
        done = fecbench("reproduce", "smoke", "--budget", BUDGET_ONE_PROFILE, "--jobs", "auto",
                        "--results", str(tmp_path / "r"), timeout=600)
    finally:
        del os.environ[calibrations.STORE_ENV]
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "nothing to confirm" in done.stdout and "calibrating" in done.stdout
    db = tmp_path / "r" / "smoke" / PROFILES[0] / "reproduce-smoke.sqlite"
    calibration = json.loads(rows(db, "SELECT host_json FROM campaigns")[0]["host_json"])["jobs_calibration"]
    assert calibration["chosen"] == 1 and calibration["reused"]["design"] == "reproduce-smoke"


@pytest.mark.parametrize("args, says", [
    (["--jobs", "2", "--dask", "local:2"], "choose one"),
    (["--tls-cert", "x.pem"], "go with --dask"),
    (["--recalibrate"], "goes with --jobs auto"),
    (["--dask", "nohost"], "expected local:N"),
])
def test_reproduce_refuses_bad_machine_options(args: list[str], says: str) -> None:
    done = fecbench("reproduce", "smoke", "--dry-run", *args)
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr, done.stderr
