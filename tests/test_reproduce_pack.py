"""`fecbench reproduce smoke` end to end at a small budget (real Mininet, droppers, fecq), two profiles:
every claim gets a verdict for every profile, the design absent here is "not runnable here", the
campaigns are ordinary databases that `fecbench run` resumes, and the page opens on the verdicts.
It checks the machinery, never which verdict a claim gets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fecbench.reproduce.evaluate import NOT_RUNNABLE, VERDICTS
from fecbench.reproduce.pack import load_pack
from tests.helpers.campaign import fecbench, rows

pytestmark = [pytest.mark.require_root, pytest.mark.slow]
PROFILES = ["defaults", "repair-free"]
STOPPED_WHY = {"decided", "at threshold", "budget", "no units left", "no sequential test"}


def test_smoke_pack_gives_every_claim_a_verdict(tmp_path: Path) -> None:
    done = fecbench("reproduce", "smoke", "--budget", "75s", "--profile", PROFILES[0], "--profile", PROFILES[1],
                    "--results", str(tmp_path), timeout=600)
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


def _same(verdict: dict) -> dict:
    return {k: v for k, v in verdict.items() if k not in ("looks", "stopped")}
