"""The upload and request/response workloads on the harness side, without root: design parsing, run
keys and placeholders, the metrics contract (the implementation must report the verified bytes), the
minimum duration, and an implementation that does not declare the workload: its runs are recorded
`unsupported` (nothing started) while the others run (real Engine, Runner, SQLite and fake processes on
the in-memory testbed)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fecbench.host import cleanup
from fecbench.inputs.errors import SpecError
from fecbench.runners.executors.engine import Engine
from fecbench.runners.executors.progress import SilentReporter
from fecbench.runners.executors.selection import parse_retry
from fecbench.runners.executors.serial import SerialExecutor
from fecbench.runners.experiment.checks import min_duration_s
from fecbench.runners.experiment.descriptor import load_descriptor
from fecbench.runners.experiment.design import parse_design
from fecbench.runners.experiment.prepare import prepare
from fecbench.runners.experiment.runs import enumerate_runs
from fecbench.runners.run.run_metrics import MetricsError, collect_metrics
from tests.helpers.campaign import FAKE_DIR, ROOT, fecbench, rows
from tests.helpers.designs import BW_OWD_P, UNIFORM_P, Impl, design_file
from tests.helpers.fake_testbed import FakeTestbed

TQUIC = ROOT / "quic-impls" / "tquic" / "impl.toml"


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cleanup, "STATE_DIR", tmp_path / "state")


def uploading_fake(tmp_path: Path) -> Path:
    """A copy of the fake implementation's descriptor that also declares upload and reqresp (same fake.py)."""
    folder = tmp_path / "impls" / "fakeup"
    folder.mkdir(parents=True)
    text = (FAKE_DIR / "fake" / "impl.toml").read_text()
    text = text.replace('binary = "fake.py"', f'binary = "{FAKE_DIR / "fake" / "fake.py"}"')
    text = text.replace('workloads = ["download"]', 'workloads = ["download", "upload", "reqresp"]')
    download = text[text.index("[client.download]"):text.index("[check]")]
    upload = download.replace("client.download", "client.upload")
    reqresp = download.replace("client.download", "client.reqresp").replace("{size}", "{request}")
    (folder / "impl.toml").write_text(text.replace("[check]", upload + reqresp + "[check]"))
    return folder.parent


def write_design(tmp_path: Path, workload: str, impls: list[Impl], extra_dirs: list[Path] | None = None) -> Path:
    settings = {"impl_dirs": [FAKE_DIR, *(extra_dirs or [])]}
    return design_file(tmp_path / "w.toml", seed=5, timeout_s=10, settings=settings, points=2, factors=BW_OWD_P,
                       loss=UNIFORM_P, workload=workload, impls=impls)


FAKE: list[Impl] = ["fake"]
FAKEUP: list[Impl] = ["fakeup"]
REQRESP = 'kind = "reqresp"\nsizes = ["1kB", "16kB"]\nexchanges = 5\nresponse = "100B"'


def test_descriptors_declare_workloads() -> None:
    assert set(load_descriptor(ROOT / "quic-impls" / "fecq" / "impl.toml").workloads) == \
        {"download", "upload", "reqresp", "messages", "page"}
    assert load_descriptor(TQUIC).workloads == ["download"]
    assert load_descriptor(FAKE_DIR / "fake" / "impl.toml").workloads == ["download"]


def test_a_design_whose_implementations_lack_the_workload_is_refused(tmp_path: Path) -> None:
    path = write_design(tmp_path, 'kind = "upload"\nsizes = ["50kB"]', FAKE)
    with pytest.raises(SpecError, match="no implementation of this design declares workload 'upload'"):
        parse_design(path)
    out = fecbench("run", str(path), "--dry-run", cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "declares workload 'upload'" in out.stdout + out.stderr


def test_mixed_design_keeps_the_implementation_without_the_workload(tmp_path: Path) -> None:
    path = write_design(tmp_path, 'kind = "upload"\nsizes = ["50kB"]', FAKE + FAKEUP, [uploading_fake(tmp_path)])
    design = parse_design(path)
    assert [(e.label, e.supports("upload")) for e in design.impls] == [("fake", False), ("fakeup", True)]
    assert design.workload.params() == {"kind": "upload"}


def test_reqresp_parsing_keys_and_placeholders(tmp_path: Path) -> None:
    design = parse_design(write_design(tmp_path, REQRESP, FAKE + FAKEUP, [uploading_fake(tmp_path)]))
    w = design.workload
    assert (w.kind, w.sizes, w.exchanges, w.request, w.response) == ("reqresp", [1000, 16000], 5, None, 100)
    assert w.params() == {"kind": "reqresp", "exchanges": 5, "request": "size", "response": 100}
    assert w.placeholders(16000) == {"exchanges": 5, "request": 16000, "response": 100}
    runs = enumerate_runs(design, {0: {"bw": 5.0, "owd": 3.0, "p": 0.01}}, "h")
    assert len({r.key for r in runs}) == len(runs) == 4
    other = parse_design(write_design(tmp_path, REQRESP.replace('"100B"', '"200B"'), FAKE + FAKEUP,
                                      [uploading_fake(tmp_path / "again")]))
    assert not {r.key for r in runs} & {r.key for r in enumerate_runs(other, {0: {"bw": 5.0, "owd": 3.0,
                                                                                   "p": 0.01}}, "h")}


@pytest.mark.parametrize("workload,match", [
    ('kind = "reqresp"\nsizes = ["1kB"]\nrequest = "1kB"\nresponse = "2kB"', 'must be "size"'),
    ('kind = "reqresp"\nsizes = ["1kB"]\nexchanges = 0', "exchanges"),
    ('kind = "reqresp"\nsizes = ["1kB"]\nresponse = "lots"', "bad size"),
    ('kind = "upload"', "sizes"),
    ('kind = "uploads"\nsizes = ["1kB"]', "uploads"),
])
def test_workload_errors(tmp_path: Path, workload: str, match: str) -> None:
    with pytest.raises(SpecError, match=match):
        parse_design(write_design(tmp_path, workload, FAKE + FAKEUP, [uploading_fake(tmp_path)]))


def _collect(workload: str, metrics: str, tmp_path: Path, size: int = 1000) -> dict[str, Any]:
    (tmp_path / "metrics.json").write_text(metrics)
    descriptor = SimpleNamespace(metrics_sources=["json"], required_metrics=["dct_ms"])
    run = SimpleNamespace(workload=workload, size=size)
    values = {"metrics_path": str(tmp_path / "metrics.json"), "exchanges": 5, "request": size, "response": 100}
    return collect_metrics(descriptor, run, values, None)


def test_metrics_must_report_the_verified_bytes(tmp_path: Path) -> None:
    assert _collect("upload", '{"dct_ms": 9.5, "bytes_app": 1000}', tmp_path)["bytes_app"] == 1000
    with pytest.raises(MetricsError, match="must report bytes_app"):
        _collect("upload", '{"dct_ms": 9.5}', tmp_path)
    with pytest.raises(MetricsError, match="expected the requested 1000"):
        _collect("upload", '{"dct_ms": 9.5, "bytes_app": 999}', tmp_path)
    got = _collect("reqresp", '{"dct_ms": 9.5, "bytes_app": 5500, "exchange_ms": [5, 1, 4, 2, 3]}', tmp_path)
    # The harness adds the median and the nearest-rank p95 when the implementation did not.
    assert (got["exchange_ms"], got["exchange_median_ms"], got["exchange_p95_ms"]) == ([5, 1, 4, 2, 3], 3, 5)
    for times, match in (("[1, 2]", "lists 2 exchange"), ('[1, 2, 3, 4, "x"]', "list of times")):
        with pytest.raises(MetricsError, match=match):
            _collect("reqresp", f'{{"dct_ms": 9.5, "bytes_app": 5500, "exchange_ms": {times}}}', tmp_path)
    with pytest.raises(MetricsError, match="expected the requested 5500"):
        _collect("reqresp", '{"dct_ms": 9.5, "bytes_app": 4400}', tmp_path)


def test_reqresp_minimum_duration() -> None:
    # 5 exchanges of 2 kB at 1 Mbit/s over 100 ms RTT: 2 RTTs + 5 × (1 RTT + 16 ms).
    assert min_duration_s("reqresp", 2000, 100.0, 1.0, exchanges=5) == pytest.approx(0.2 + 5 * 0.116)
    assert min_duration_s("upload", 50_000, 100.0, 1.0) == pytest.approx(0.3 + 0.4)


def test_runs_without_the_workload_are_recorded_unsupported(tmp_path: Path) -> None:
    design = write_design(tmp_path, 'kind = "upload"\nsizes = ["1kB", "2kB"]', FAKE + FAKEUP,
                          [uploading_fake(tmp_path)])
    prepared = prepare(design)
    testbeds: list[FakeTestbed] = []

    def factory(topology: Any, values: dict[str, Any], backend: str | None) -> FakeTestbed:
        testbeds.append(FakeTestbed(topology, values, backend))
        return testbeds[-1]

    db = tmp_path / "w.sqlite"
    executor = SerialExecutor(prepared, db, link_backend=None, testbed_factory=factory)
    Engine(prepared, db, executor, SilentReporter()).run(parse_retry(None))
    runs = rows(db, "SELECT label, workload, status, error FROM runs")
    assert len(runs) == 8 and {r["workload"] for r in runs} == {"upload"}
    assert {r["status"] for r in runs if r["label"] == "fakeup"} == {"ok"}
    unsupported = [r for r in runs if r["label"] == "fake"]
    assert {r["status"] for r in unsupported} == {"unsupported"}
    assert all("does not declare workload 'upload'" in r["error"] for r in unsupported)
    clients = [argv for t in testbeds for role, argv in t.started if role == "client"]
    assert len(clients) == 4  # only fakeup's runs started anything: 2 points × 2 sizes


def test_dry_run_names_the_unsupported_label(tmp_path: Path) -> None:
    design = write_design(tmp_path, 'kind = "upload"\nsizes = ["1kB"]', FAKE + FAKEUP, [uploading_fake(tmp_path)])
    out = fecbench("run", str(design), "--dry-run", "--db", str(tmp_path / "d.sqlite"), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "fake: implementation 'fake' does not declare workload 'upload'" in out.stdout
    assert "fakeup: implementation" not in out.stdout
    assert prepare(design).estimate(next(r for r in prepare(design).runs if r.label == "fake")) == 0.0
