"""Runner pure logic, without root: descriptors, design validation, run keys, CRN seeds, DB writes, metrics."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from fecbench.inputs.errors import SpecError
from fecbench.records import db as dbmod
from fecbench.records import run_records
from fecbench.runners.experiment.argv_template import render
from fecbench.runners.experiment.descriptor import load_descriptor
from fecbench.runners.experiment.design import parse_design, parse_size
from fecbench.runners.experiment.prepare import prepare
from fecbench.runners.experiment.runs import enumerate_runs, loss_seed, run_key
from fecbench.runners.run.run_metrics import MetricsError, from_json, from_patterns
from tests.helpers.designs import UNIFORM_P, design_file

ROOT = Path(__file__).resolve().parent.parent
FAKE_DIR = ROOT / "tests" / "fake_impl"
TOPOLOGY = ROOT / "topologies" / "single.toml"


def write_design(tmp_path: Path, *, impls: str | None = None, name: str = "d.toml",
                 workload: str = 'kind = "download"\nsizes = ["1kB", "50kB"]') -> Path:
    return design_file(tmp_path / name, "unit", repetitions=2, seed=7, settings={"impl_dirs": [FAKE_DIR]}, points=4,
                       factors={"bw": (5, 20), "owd": (5, 15), "p": (0.01, 0.05)}, loss=UNIFORM_P, workload=workload,
                       impls=impls if impls is not None else [("fake", "a"), ("fake", "b", {"behave": "ok"})])


# --- descriptors ---------------------------------------------------------------------------------

def test_fake_descriptor_loads_and_renders() -> None:
    d = load_descriptor(FAKE_DIR / "fake" / "impl.toml")
    assert d.name == "fake" and d.workloads == ["download"]
    args = d.validate_args({"behave": "hang", "server_behave": "die"}, "x", "impl.args")
    lists = d.arg_lists(args)
    assert lists == {"server_args": ["--behave", "die"], "client_args": ["--behave", "hang"]}
    argv = render(d.client_argv["download"], {"binary": "/b", "server_address": "10.0.0.1", "port": 5,
                                              "size": 1000, "metrics_path": "/m.json", "timeout_s": "9"}, lists)
    assert argv == ["/b", "client", "--server", "10.0.0.1:5", "--size", "1000", "--out", "/m.json",
                    "--timeout", "9", "--behave", "hang"]
    assert d.require_binaries()["binary"].name == "fake.py"


def test_descriptor_defaults_filled_and_bad_values_rejected() -> None:
    d = load_descriptor(FAKE_DIR / "fake" / "impl.toml")
    assert d.validate_args({}, "x", "k") == {"behave": "ok"}
    with pytest.raises(SpecError, match="unknown value 'explode'"):
        d.validate_args({"behave": "explode"}, "design.toml", "impl[0].args")
    with pytest.raises(SpecError, match="has no argument 'fec'"):
        d.validate_args({"fec": "rs:30,20"}, "design.toml", "impl[0].args")


def test_descriptor_unknown_placeholder_and_shell_string(tmp_path: Path) -> None:
    base = (FAKE_DIR / "fake" / "impl.toml").read_text()
    (tmp_path / "x").mkdir()
    bad = tmp_path / "x" / "impl.toml"
    bad.write_text(base.replace('"{server_address}:{port}", "{server_args}"', '"{nowhere}", "{server_args}"'))
    with pytest.raises(SpecError, match=r"unknown placeholder \{nowhere\}") as err:
        load_descriptor(bad)
    assert "server.argv" in str(err.value) and str(bad) in str(err.value)
    bad.write_text(base.replace('argv = ["{binary}", "server", "--listen", "{server_address}:{port}", "{server_args}"]',
                                'argv = "fake.py server --listen x"'))
    with pytest.raises(SpecError, match="never a shell string"):
        load_descriptor(bad)


def test_shipped_descriptors_are_valid() -> None:
    for path in sorted((ROOT / "quic-impls").glob("*/impl.toml")):
        d = load_descriptor(path)
        assert d.workloads and set(d.client_argv) == set(d.workloads)


# --- designs -------------------------------------------------------------------------------------

def test_parse_design(tmp_path: Path) -> None:
    design = parse_design(write_design(tmp_path))
    assert design.name == "unit" and design.repetitions == 2 and design.order == "random"
    assert [e.label for e in design.impls] == ["a", "b"]
    assert design.workload.sizes == [1000, 50000]
    assert design.loss.factor_refs() == {"p": "p"}


@pytest.mark.parametrize("text,unit", [("1kB", 1000), ("50kB", 50000), ("1MB", 10**6), ("64KiB", 65536),
                                       (1234, 1234), ("1.5MB", 1500000)])
def test_parse_size(text: object, unit: int) -> None:
    assert parse_size(text, Path("d"), "k") == unit


@pytest.mark.parametrize("impls,match", [
    ('[[impl]]\nname = "nosuch"\n', "unknown implementation 'nosuch'"),
    ('[[impl]]\nname = "fake"\n[[impl]]\nname = "fake"\n', "duplicate label 'fake'"),
    ('[[impl]]\nname = "fake"\nlabel = "rlc-2/3"\n', "label 'rlc-2/3': use letters, digits"),
    ('[[impl]]\nname = "fake"\nargs = { behave = "boom" }\n', "unknown value 'boom'"),
    ('[[impl]]\nname = "fake"\ncolour = "red"\n', "unknown key"),
    ("", "missing required array of tables"),
])
def test_design_errors_name_file_and_key(tmp_path: Path, impls: str, match: str) -> None:
    path = write_design(tmp_path, impls=impls)
    with pytest.raises(SpecError, match=match) as err:
        parse_design(path)
    assert str(path) in str(err.value)


def test_workload_not_declared(tmp_path: Path) -> None:
    # No implementation of the design has it: refused (one that lacks it among others runs
    # `unsupported`: tests/test_workloads.py).
    path = write_design(tmp_path, workload='kind = "messages"\nrate = 30')
    with pytest.raises(SpecError, match="declares workload 'messages'") as err:
        parse_design(path)
    assert "workload" in str(err.value)


def test_missing_binary(tmp_path: Path) -> None:
    impl_dir = tmp_path / "impls" / "ghost"
    impl_dir.mkdir(parents=True)
    (impl_dir / "impl.toml").write_text((FAKE_DIR / "fake" / "impl.toml").read_text()
                                        .replace('binary = "fake.py"', 'binary = "target/ghost"'))
    path = write_design(tmp_path, impls='[[impl]]\nname = "ghost"\n')
    path.write_text(path.read_text().replace(f'impl_dirs = ["{FAKE_DIR}"]', f'impl_dirs = ["{tmp_path / "impls"}"]'))
    parse_design(path)   # parsing never needs a build; preparing a campaign that runs does
    with pytest.raises(SpecError, match="binary 'target/ghost' not found"):
        prepare(path)
    prepared = prepare(path, require_built=False)   # a dry run: a warning with a command that runs as printed
    assert len(prepared.warnings) == 1 and "binary 'target/ghost' not found" in prepared.warnings[0]


def test_bad_loss_probability(tmp_path: Path) -> None:
    path = write_design(tmp_path)
    path.write_text(path.read_text().replace('p = "p"', "p = 1.5"))
    with pytest.raises(SpecError, match=r"loss\.p.*\[0, 1\]"):
        parse_design(path)


# --- runs, keys, seeds ---------------------------------------------------------------------------

def _points() -> dict[int, dict]:
    return {0: {"bw": 5.0, "owd": 10.0, "p": 0.01}, 1: {"bw": 20.0, "owd": 5.0, "p": 0.05},
            2: {"bw": 7.5, "owd": 12.0, "p": 0.02}}


def test_runs_keys_unique_and_stable(tmp_path: Path) -> None:
    design = parse_design(write_design(tmp_path))
    runs = enumerate_runs(design, _points(), "h1")
    assert len(runs) == 3 * 2 * 2 * 2  # points × repetitions × labels × sizes
    assert len({r.key for r in runs}) == len(runs)
    again = enumerate_runs(parse_design(write_design(tmp_path)), _points(), "h1")
    assert [r.key for r in runs] == [r.key for r in again]  # same order too (seeded shuffle)
    assert [r.index for r in runs] == list(range(len(runs)))
    assert {r.key for r in enumerate_runs(design, _points(), "h2")}.isdisjoint({r.key for r in runs})


def test_common_random_numbers(tmp_path: Path) -> None:
    """The loss seed depends on (design seed, point, repetition) only: equal across implementations."""
    design = parse_design(write_design(tmp_path))
    runs = enumerate_runs(design, _points(), "h")
    by_cell: dict[tuple[int, int], set[int]] = {}
    for r in runs:
        by_cell.setdefault((r.point, r.repetition), set()).add(r.loss_seed)
    assert all(len(seeds) == 1 for seeds in by_cell.values())
    assert len({next(iter(s)) for s in by_cell.values()}) == len(by_cell)  # cells differ
    assert loss_seed(7, 0, 0) == loss_seed(7, 0, 0) != loss_seed(8, 0, 0)
    assert 0 < loss_seed(7, 0, 0) < 2**63


def test_key_depends_on_args_and_not_on_run_control(tmp_path: Path) -> None:
    values = {"bw": 5.0}
    k1 = run_key("h", values, ("fecq", {"fec": "none"}, "quic"), {"kind": "download"}, 1000, 0)
    k2 = run_key("h", values, ("fecq", {"fec": "rs:30,20"}, "quic"), {"kind": "download"}, 1000, 0)
    assert k1 != k2
    path = write_design(tmp_path)
    h1 = parse_design(path).experiment_hash("topo")
    path.write_text(path.read_text().replace("seed = 7", "seed = 7\ntimeout_s = 99\norder = \"sequential\""))
    assert parse_design(path).experiment_hash("topo") == h1
    path.write_text(path.read_text().replace("seed = 7", "seed = 8"))
    assert parse_design(path).experiment_hash("topo") != h1
    assert parse_design(path).experiment_hash("other topology") != parse_design(path).experiment_hash("topo")


def test_sequential_order(tmp_path: Path) -> None:
    path = write_design(tmp_path)
    path.write_text(path.read_text().replace("seed = 7", "seed = 7\norder = \"sequential\""))
    runs = enumerate_runs(parse_design(path), _points(), "h")
    assert [r.point for r in runs] == sorted(r.point for r in runs)


def test_prepare_with_planner_and_topology(tmp_path: Path) -> None:
    from fecbench.runners.experiment.prepare import prepare

    prepared = prepare(write_design(tmp_path))
    assert len(prepared.points) == 4
    assert len(prepared.runs) == 4 * 2 * 2 * 2
    assert set(prepared.factor_types) >= {"bw", "owd", "p"}
    assert all(prepared.estimate(r) > 0 for r in prepared.runs)


def test_duration_model_follows_size_delay_and_loss_and_stops_at_the_time_limit(tmp_path: Path) -> None:
    """runs.estimate_seconds: longer with size, delay and loss; a 1 MB download at 5 % loss is loss-limited
    (Mathis: far slower than the bottleneck); never beyond timeout_s + the kill grace."""
    import dataclasses

    from fecbench.runners.experiment.runs import estimate_seconds, grace_s, mean_loss

    design = parse_design(write_design(tmp_path, workload='kind = "download"\nsizes = ["1kB", "1MB"]'))
    run = enumerate_runs(design, {0: {"bw": 10.0, "owd": 100.0, "p": 0.0}}, "h")[0]

    def est(size: int, **values: float) -> float:
        return estimate_seconds(dataclasses.replace(run, size=size, values={**run.values, **values}), design)

    assert est(1000) < est(50_000) < est(1_000_000)
    assert est(1000, owd=50.0) < est(1000) < est(1000, owd=200.0)
    assert est(1_000_000) < est(1_000_000, p=0.01) < est(1_000_000, p=0.05)
    lossless = est(1_000_000) - est(1000)                   # ~ 1 MB at 10 Mbit/s and slow start
    lossy = est(1_000_000, p=0.05) - est(1000, p=0.05)      # ~ 1 MB at 1200 B × 8 / 0.2 s × 1.5 / √0.05
    assert lossless < 2.5 and 15 < lossy < 30, (lossless, lossy)
    assert est(10**9, p=0.05) == design.timeout_s + grace_s(design.timeout_s)
    assert mean_loss(dataclasses.replace(run, values={**run.values, "p": 0.03}), design) == 0.03


def test_mean_loss_of_a_gilbert_elliott_link(tmp_path: Path) -> None:
    from fecbench.runners.experiment.runs import mean_loss

    path = write_design(tmp_path)
    path.write_text(path.read_text().replace('model = "uniform"\np = "p"',
                                             'model = "gilbert-elliott"\np = "p"\nr = 0.3\nk = 1.0\nh = 0.0'))
    design = parse_design(path)
    run = enumerate_runs(design, {0: {"bw": 10.0, "owd": 10.0, "p": 0.1}}, "h")[0]
    assert mean_loss(run, design) == pytest.approx(0.1 / 0.4)  # the share of time in Bad, all lost there


def test_prepare_rejects_unknown_loss_factor(tmp_path: Path) -> None:
    from fecbench.runners.experiment.prepare import prepare

    path = write_design(tmp_path)
    path.write_text(path.read_text().replace('p = "p"', 'p = "loss"'))
    with pytest.raises(SpecError, match="unknown factor 'loss'"):
        prepare(path)


# --- database --------------------------------------------------------------------------------------

def test_db_lifecycle_no_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    conn = dbmod.connect(path)
    with dbmod.transaction(conn):
        cid = dbmod.insert_campaign(conn, name="x", design_hash="h", host_json={"kernel": "k"})
        dbmod.ensure_factor_columns(conn, {"bw": "REAL", "fec": "TEXT"})
        dbmod.insert_points(conn, cid, [{"point": 0, "bw": 5.0, "fec": "rs"}])
    rows = [{"key": f"k{i}", "campaign_id": cid, "point": 0, "impl": "fake", "label": "a", "impl_args": "{}",
             "workload": "download", "size": 1000, "repetition": i, "loss_seed": 5} for i in range(3)]
    assert run_records.insert_pending_runs(conn, rows) == 3
    assert run_records.insert_pending_runs(conn, rows) == 0
    run_records.start_run(conn, "k0", "2026-01-01T00:00:00Z", "delayline", "host")
    assert run_records.run_statuses(conn)["k0"] == "running"  # a crash here leaves it resumable (to do again)
    run_records.finish_run(conn, "k0", status="ok", error=None, server_log_tail="s", client_log_tail="c",
                     finished_at="t", duration_s=1.5, metrics={"dct_ms": 12.5, "lost": 2, "extra": "x"},
                     client_wall_ms=100.0,
                     link_stats=[{"link": "bottleneck", "direction": "forward", "seen": 10, "dropped": 1,
                                  "model": {"seed": 5}}],
                     fidelity=[{"path": 1, "rtt_configured_ms": 20, "rtt_measured_ms": 20.1, "ok": True}])
    run_records.start_run(conn, "k0", "2026-01-01T00:00:01Z", "delayline", "host")  # a retry replaces results
    run_records.finish_run(conn, "k0", status="ok", error=None, server_log_tail="s", client_log_tail="c",
                     finished_at="t", duration_s=1.0, metrics={"dct_ms": 11.0}, client_wall_ms=90.0,
                     link_stats=[{"link": "bottleneck", "direction": "forward", "seen": 9}])
    ro = dbmod.open_readonly(path)
    assert ro.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 3
    run = dict(ro.execute("SELECT * FROM runs WHERE key='k0'").fetchone())
    assert run["attempts"] == 2 and run["status"] == "ok" and run["duration_s"] == 1.0
    metrics = ro.execute("SELECT dct_ms, client_wall_ms, json FROM metrics").fetchall()
    assert len(metrics) == 1 and metrics[0][0] == 11.0 and json.loads(metrics[0][2]) == {"dct_ms": 11.0}
    assert tuple(ro.execute("SELECT COUNT(*), SUM(seen) FROM link_stats").fetchone()) == (1, 9)
    assert ro.execute("SELECT COUNT(*) FROM fidelity").fetchone()[0] == 0
    assert ro.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(dbmod.SCHEMA_VERSION)
    assert ro.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        ro.execute("DELETE FROM runs")
    conn.close()
    assert dbmod.schema_version(dbmod.connect(path)) == dbmod.SCHEMA_VERSION  # reopening keeps data and version


def test_db_refuses_foreign_and_newer(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.sqlite"
    sqlite3.connect(foreign).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(dbmod.SchemaError, match="not a fecbench"):
        dbmod.connect(foreign)
    newer = tmp_path / "newer.sqlite"
    dbmod.connect(newer).execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(dbmod.SchemaError, match="newer"):
        dbmod.connect(newer)


# --- metrics ---------------------------------------------------------------------------------------

def test_metrics_parsing(tmp_path: Path) -> None:
    good = tmp_path / "m.json"
    good.write_text('{"dct_ms": 3.5, "lost": 1}')
    assert from_json(good) == {"dct_ms": 3.5, "lost": 1}
    with pytest.raises(MetricsError, match="no metrics file"):
        from_json(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(MetricsError, match="not valid JSON"):
        from_json(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(MetricsError, match="JSON object"):
        from_json(tmp_path / "list.json")
    text = "done: 50000 bytes in 123.4 ms\nlost 3\n"
    assert from_patterns([r"(?P<bytes_app>\d+) bytes in (?P<dct_ms>[\d.]+) ms", r"lost (?P<lost>\d+)"], text) == \
        {"bytes_app": 50000, "dct_ms": 123.4, "lost": 3}


# --- CLI -------------------------------------------------------------------------------------------

def _fecbench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fecbench", *args], capture_output=True, text=True, cwd=cwd,
                          check=False, timeout=120)


def test_cli_dry_run_and_errors(tmp_path: Path) -> None:
    path = write_design(tmp_path)
    out = _fecbench("run", str(path), "--dry-run", "--db", str(tmp_path / "x.sqlite"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "32 run(s) to do" in out.stdout and re.search(r"estimated [0-9.]+ (s|min) for 32", out.stdout)
    assert not (tmp_path / "x.sqlite").exists()  # a dry run writes nothing
    bad = write_design(tmp_path, impls='[[impl]]\nname = "fake"\nargs = { behave = "boom" }\n', name="bad.toml")
    out = _fecbench("run", str(bad), "--dry-run", cwd=tmp_path)
    assert out.returncode == 2
    assert "bad.toml" in out.stderr and "impl[0].args.behave" in out.stderr and "Traceback" not in out.stderr
    out = _fecbench("run", str(path), "--retry", "oops", "--dry-run", cwd=tmp_path)
    assert out.returncode == 2 and "--retry" in out.stderr
    out = _fecbench("run", str(path), "--link-backend", "carrier-pigeon", cwd=tmp_path)
    assert out.returncode == 2 and "--link-backend" in out.stderr
    foreign = tmp_path / "foreign.sqlite"
    sqlite3.connect(foreign).execute("CREATE TABLE t (x)").connection.commit()
    out = _fecbench("run", str(path), "--dry-run", "--db", str(foreign), cwd=tmp_path)
    assert out.returncode == 2 and "foreign.sqlite" in out.stderr and "Traceback" not in out.stderr


def test_shipped_designs_validate() -> None:
    """Every design in designs/ parses and plans (needs the built fecq binary)."""
    from fecbench.runners.experiment.prepare import prepare

    fecq = ROOT / "quic-impls" / "fecq" / "target" / "release" / "fecq"
    if not fecq.exists() or not (ROOT / "quic-impls" / "fecq" / "impl.toml").exists():
        pytest.skip("fecq is not built yet (make bootstrap)")
    # points × repetitions × labels × sizes
    expected = {"smoke": 4 * 2 * 2, "networking2019-uniform": 130 * 9 * 3 * 4,
                "networking2019-ge": 130 * 9 * 3 * 4, "networking2019-fixed": 2 * 50 * 2 * 4,
                "networking2019-nofec-cost": 130 * 9 * 3 * 4, "rquic2021": 15 * 10 * 6 * 2,
                "short-messages": 3 * 10 * 2 * 6, "thesis2018-realtime": 130 * 3 * 5,
                "thesis2018-realtime-desync2": 130 * 3 * 5,
                "thesis2018-realtime-delay": 11 * 3 * 3, "thesis2018-realtime-uniform": 130 * 3 * 5,
                "thesis2018-realtime-uniform-desync2": 130 * 3 * 5, "thesis2018-multipath-highrb": 65 * 2 * 3,
                "thesis2018-multipath-losses": 64 * 2 * 3, "starlink-uploads": 12 * 90 * 3 * 1,
                "bench-campaign": 32 * 1 * 2 * 2, "compare-backends": 4 * 1 * 2 * 2,
                "multipath-smoke": 4 * 1 * 3 * 2,
                "thesis2018-multipath-downloads": 130 * 3 * 5 * 3,
                "thesis2018-multipath": 130 * 2 * 6, "thesis2018-multipath-hetero": 130 * 2 * 3,
                "thesis2018-multipath-cut": 12 * 1 * 6, "flows-smoke": 2 * 1 * 1 * 1,
                "networking2019-fairness": 3 * 10 * 1 * 1, "networking2019-small": 2 * 16 * 3 * 2,
                "xquic-smoke": 2 * 1 * 4 * 1, "rquic-smoke": 2 * 1 * 2 * 1,
                "cross-stack-rquic": 2 * 8 * 7 * 2, "bench-capture-stacks": 1 * 20 * 4 * 2,
                "xquic-multipath-smoke": 2 * 1 * 3 * 1,
                "cross-stack": 3 * 20 * 4 * 3, "cross-stack-multipath": 4 * 10 * 5 * 2,
                "reproduce-smoke": 4 * 3 * 2 * 2, "geo-rs": 1 * 8 * 6 * 1,
                "explain-fairness": 3 * 1 * 1 * 1, "explain-rquic-wifi": 1 * 4 * 3 * 1,
                "da2gc-1kB-protect": 1 * 12 * 3 * 1, "twins-sources": 2 * 6 * 2 * 2,
                "rquic2021-lte-trace": 5 * 10 * 4 * 1, "pageload-small": 6 * 1 * 2 * 1,
                "rquic2021-pages": 15 * 10 * 5 * 1, "rquic2021-bto": 3 * 10 * 10 * 1,
                "rquic2021-bto-pages": 3 * 10 * 10 * 1}
    for name, count in expected.items():
        # As far as it can be without an optional stack built (XQUIC, rQUIC: not part of `make demo`); whether
        # each is runnable here: the test below.
        prepared = prepare(ROOT / "designs" / f"{name}.toml", require_built=False)
        assert len(prepared.runs) == count, name
    assert set(expected) == {d.stem for d in (ROOT / "designs").glob("*.toml")}  # every shipped design


def test_shipped_designs_have_their_stacks_built() -> None:
    """Every design's implementations are built here, or the test says which `make` target builds which."""
    from fecbench.runners.experiment.design import parse_design

    missing: dict[str, set[str]] = {}
    for path in sorted((ROOT / "designs").glob("*.toml")):
        for entry in parse_design(path).impls:
            if entry.descriptor.missing_binaries() is not None:
                missing.setdefault(entry.descriptor.name, set()).add(path.stem)
    if missing:
        pytest.skip("not built here (`make demo` builds fecq and tquic only): " + "; ".join(
            f"{name}: make {name} (used by {', '.join(sorted(designs))})" for name, designs in sorted(missing.items())))


def test_multipath_loss_per_path(tmp_path: Path) -> None:
    """On the 2-path topology, p = "p_{path}" gives each path's lossy link its own factor."""
    from fecbench.runners.experiment.prepare import prepare

    path = write_design(tmp_path)
    text = path.read_text().replace(str(TOPOLOGY), str(ROOT / "topologies" / "multipath.toml"))
    text = text.replace("bw = { low = 5, high = 20 }", "bw = { low = 5, high = 20, per_path = true }")
    text = text.replace("owd = { low = 5, high = 15 }", "owd = { low = 5, high = 15, per_path = true }")
    text = text.replace("p = { low = 0.01, high = 0.05 }", "p = { low = 0.01, high = 0.05, per_path = true }")
    path.write_text(text.replace('p = "p"', 'p = "p_{path}"'))
    prepared = prepare(path)
    assert {"p_1", "p_2", "bw_1", "bw_2"} <= set(prepared.factor_types)
    loss = prepared.design.loss
    point = prepared.points[0]
    assert loss.values(point, 1) == {"p": point["p_1"]} and loss.values(point, 2) == {"p": point["p_2"]}
    path.write_text(text.replace('p = "p"', 'p = "p"\nlinks = ["egress"]'))
    with pytest.raises(SpecError, match="no lossy link 'egress'"):
        prepare(path)


def test_homogeneous_paths_share_factors_but_not_loss_streams(tmp_path: Path) -> None:
    """On the 2-path topology, factors declared without per_path give both paths the same value:
    the same delay and loss parameters, each path's dropper on its own stream."""
    from fecbench.runners.experiment.prepare import prepare

    path = write_design(tmp_path)
    path.write_text(path.read_text().replace(str(TOPOLOGY), str(ROOT / "topologies" / "multipath.toml")))
    prepared = prepare(path)
    assert {"bw", "owd", "p"} <= set(prepared.factor_types) and "owd_1" not in prepared.factor_types
    point = prepared.points[0]
    shaping = prepared.topology.resolve(point)
    assert shaping["path1"]["forward"].owd == shaping["path2"]["forward"].owd == point["owd"]
    assert prepared.rtt_ms[0] == 2 * point["owd"]
    loss = prepared.design.loss
    assert loss.values(point, 1) == loss.values(point, 2) == {"p": point["p"]}
