"""fecbench.analysis figures and fecbench report/export, on databases written through fecbench.records.db."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from importlib.util import find_spec

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

from fecbench.analysis import figures, ratios, report, results, tables
from fecbench.analysis.export import export
from fecbench.analysis.report import notebook
from fecbench.inputs.errors import UserError
from tests.helpers.analysis_db import (
    CENSORED_TABLE,
    DOWNLOAD_LABELS,
    SIZES,
    make_download_db,
    make_messages_db,
    make_table_db,
    table_rows,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def download_db(tmp_path_factory):
    return make_download_db(tmp_path_factory.mktemp("an") / "d.sqlite", points=4, repetitions=2)


@pytest.fixture(scope="module")
def messages_db(tmp_path_factory):
    return make_messages_db(tmp_path_factory.mktemp("an") / "m.sqlite")


def visible_lines(ax):
    return [line for line in ax.get_lines() if line.get_visible()]


def is_reference_line(line, axis: str) -> bool:
    data = line.get_xdata() if axis == "x" else line.get_ydata()
    return len(data) == 2 and all(float(v) == 1.0 for v in data)


@pytest.mark.parametrize("size, text", [(1000, "1 kB"), (10_000, "10 kB"), (50_000, "50 kB"),
                                        (1_000_000, "1 MB"), (1500, "1.5 kB"), (512, "512 B"),
                                        (5_000_000, "5 MB"), (None, "messages"), (float("nan"), "messages"),
                                        (5 * 2 ** 20, "5 MiB"), (20 * 2 ** 20, "20 MiB"), (2 ** 30, "1 GiB")])
def test_format_size(size, text):
    assert figures.format_size(size) == text


def test_label_palette_is_stable_across_subsets():
    full = figures.label_palette(["udp", "quic", "quic-fec-rs"])
    assert figures.label_palette(["quic-fec-rs", "udp", "quic"]) == full
    assert len(set(full.values())) == 3
    sizes = figures.size_palette(SIZES)
    assert list(sizes) == ["1 kB", "10 kB", "50 kB", "1 MB"] and len(set(sizes.values())) == 4


def test_ratio_ecdf_one_panel_per_label_one_curve_per_size(download_db):
    pairs = results.paired(download_db)
    fig = figures.ratio_ecdf(pairs)
    assert isinstance(fig, Figure)
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.axison]
    assert [ax.get_title() for ax in panels] == [f"{lbl} vs quic" for lbl in sorted(DOWNLOAD_LABELS)
                                                  if lbl != "quic"]
    sizes = figures.size_palette(SIZES)
    for ax in panels:
        assert ax.get_xscale() == "log"
        assert sum(is_reference_line(line, "x") for line in ax.get_lines()) == 1  # ratio = 1
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert [text.rsplit(" (", 1)[0] for text in legend] == list(sizes)
        title = ax.get_title().split(" vs ")[0]   # each curve says how many pairs it is drawn from
        assert [int(text.rsplit("(", 1)[1].rstrip(")")) for text in legend] == [
            int(((pairs["label"] == title) & (pairs["size"] == size) & pairs["ratio"].notna()).sum())
            for size in SIZES]
        # Each size's curve has the size's colour in every panel, and reaches ECDF 1.
        curves = [line for line in visible_lines(ax) if not is_reference_line(line, "x")]
        assert len(curves) == len(SIZES)
        assert {to_rgb(line.get_color()) for line in curves} == {to_rgb(c) for c in sizes.values()}
        assert all(max(line.get_ydata()) == pytest.approx(1.0) for line in curves)


def test_ratio_vs_factors_panels(download_db):
    pairs = results.paired(download_db)
    mine = pairs[(pairs["label"] == "quic-fec-rs") & pairs["ratio"].notna()]
    for per_point, markers in ((False, len(mine)), (True, mine.groupby(["point", "size"]).ngroups)):
        fig = figures.ratio_vs_factors(pairs, label="quic-fec-rs", per_point=per_point)
        panels = [ax for ax in fig.axes if ax.axison]
        assert [ax.get_xlabel() for ax in panels] == [figures.factor_title(f) for f in pairs.attrs["factors"]]
        for ax in panels:
            assert sum(is_reference_line(line, "y") for line in ax.get_lines()) == 1
            assert sum(len(c.get_offsets()) for c in ax.collections) == markers
    # The per-point marker of (point 0, 1 MB) sits at the median ratio of its repetitions.
    ax = figures.ratio_vs_factors(pairs, ["bw"], label="quic-fec-rs").axes[0]
    offsets = np.concatenate([c.get_offsets() for c in ax.collections])
    sub = mine[(mine["point"] == 0) & (mine["size"] == 1_000_000)]
    assert any(np.isclose(x, sub["bw"].iloc[0]) and np.isclose(y, sub["ratio"].median()) for x, y in offsets)


def test_metric_ecdf_per_size_and_label_colours(download_db, messages_db):
    frame = results.load(download_db)
    fig = figures.metric_ecdf(frame, "dct_ms", per_size=True)
    panels = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title() for ax in panels] == ["1 kB", "10 kB", "50 kB", "1 MB"]
    colours = figures.label_palette(frame.attrs["labels"])
    for ax in panels:
        assert len(visible_lines(ax)) == len(DOWNLOAD_LABELS)
        assert {to_rgb(line.get_color()) for line in visible_lines(ax)} == {to_rgb(c) for c in colours.values()}
    # A label keeps its colour in a figure of another subset of the same database.
    only_fec = frame[frame["label"] == "quic-fec-rs"]
    ax = figures.metric_ecdf(only_fec, "dct_ms").axes[0]
    assert to_rgb(visible_lines(ax)[0].get_color()) == to_rgb(colours["quic-fec-rs"])
    messages = results.load(messages_db)
    ax = figures.metric_ecdf(messages, "bytes_app", log=False).axes[0]
    assert ax.get_xscale() == "linear" and len(visible_lines(ax)) == messages["label"].nunique()
    assert "MB" in ax.xaxis.get_major_formatter()(6_000_000, 0)


def test_overview_figures(download_db):
    frame = results.load(download_db)
    bars = figures.status_bars(frame).axes[0]
    widths = sum(patch.get_width() for patch in bars.patches)
    assert widths == len(frame)
    fig = figures.fidelity_scatter(tables.fidelity(download_db))
    assert [ax.get_title() for ax in fig.axes] == ["round-trip time", "bottleneck rate"]
    no_rate = tables.fidelity(download_db).assign(rate_configured_mbit=None, rate_measured_mbit=None)
    assert [ax.get_title() for ax in figures.fidelity_scatter(no_rate).axes if ax.axison] == ["round-trip time"]
    stats = tables.link_stats(download_db)
    ax = figures.loss_fidelity(stats).axes[0]
    assert ax.get_xlabel() == "loss rate of the model"
    # Runs with the same model are pooled: one marker per link direction and model.
    groups = stats.groupby(["link", "direction", "expected_loss"]).ngroups
    assert sum(len(c.get_offsets()) for c in ax.collections if c.get_offsets().size and
               type(c).__name__ == "PathCollection") == groups


def test_empty_inputs_give_a_note_not_an_exception(download_db):
    frame = results.load(download_db)
    pairs = results.paired(frame)
    for fig in (figures.ratio_ecdf(pairs.iloc[0:0]), figures.metric_ecdf(frame.iloc[0:0], "dct_ms"),
                figures.ratio_vs_factors(pairs.iloc[0:0]), figures.status_bars(frame.iloc[0:0]),
                figures.fidelity_scatter(tables.fidelity(download_db).iloc[0:0]),
                figures.metric_ecdf(frame, "rebuffering_ms")):
        texts = [t.get_text() for ax in fig.axes for t in ax.texts]
        assert any(text.startswith("no ") for text in texts)


def test_save_writes_png_and_leaves_global_style_alone(download_db, tmp_path):
    before = dict(matplotlib.rcParams)
    path = figures.save(figures.status_bars(results.load(download_db)), tmp_path / "sub" / "s.png")
    assert path.read_bytes().startswith(PNG_MAGIC)
    assert matplotlib.rcParams["font.size"] == before["font.size"]
    assert matplotlib.rcParams["axes.spines.top"] == before["axes.spines.top"]


def test_report_download_campaign(download_db, tmp_path):
    written = report.build(download_db, tmp_path / "rep")
    expected = {"status", "fidelity", "loss-fidelity", "exclusions", "dct-ecdf", "dct-point-ratio-ecdf",
                "dct-ratio-ecdf",
                "dct-ratio-vs-factors-quic-fec-rlc", "dct-ratio-vs-factors-quic-fec-rs",
                "dct-ratio-ecdf-quic-fec-rlc-vs-quic-fec-rs"}
    assert set(written.figures) == expected
    for path in written.figures.values():
        assert path.read_bytes().startswith(PNG_MAGIC) and path.stat().st_size > 1000
    page = written.html.read_text()
    sources = re.findall(r"src='([^']*)'", page)
    assert len(sources) == len(expected) and all(s.startswith("data:image/png;base64,") for s in sources)
    assert "DCT medians (ms)" in page and "runs not ok" in page
    assert "<link" not in page and "<script" not in page  # self-contained
    # The headline comes first and names its statistic; the data behind it is written beside the page.
    assert page.index("Headline") < page.index("runs per status")
    assert "ratio of medians label / quic per design point" in page and "Michel et al. 2019" in page
    headline = written.headline["DCT: ratio of medians label / quic per design point"]
    assert list(headline["label"]) == [lbl for lbl in sorted(DOWNLOAD_LABELS) if lbl != "quic" for _ in SIZES]
    assert set(written.files) == {"point-ratios.csv", "pairs.csv"}
    pairs = pd.read_csv(written.files["pairs.csv"])
    assert len(pairs) == len(results.load(download_db).query("label != 'quic'"))  # one pair per compared run
    assert "pairs.csv" in page


def test_report_messages_campaign_and_baseline(messages_db, tmp_path):
    written = report.build(messages_db, tmp_path / "rep")
    assert {"rebuffering-ecdf", "data-received-ecdf", "data-received-ratio-ecdf",
            "rebuffering-vs-owd"} <= set(written.figures)
    assert "messages medians" in written.tables
    with pytest.raises(UserError, match="baseline label 'tcp' has no runs"):
        report.build(messages_db, tmp_path / "rep2", baseline="tcp")


def test_report_default_output_dir(download_db, tmp_path):
    db = tmp_path / "camp.sqlite"
    db.write_bytes(download_db.read_bytes())
    written = report.build(db)
    assert written.html == tmp_path / "camp-report" / "index.html"
    assert report.default_db(tmp_path) == db
    with pytest.raises(UserError, match="no results database"):
        report.default_db(tmp_path / "nothing")


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_tidy(download_db, tmp_path, fmt):
    if fmt == "parquet" and find_spec("pyarrow") is None:
        pytest.skip("pyarrow not installed")
    target = export(download_db, fmt, tmp_path / f"runs.{fmt}")
    frame = pd.read_csv(target) if fmt == "csv" else pd.read_parquet(target)
    loaded = results.load(download_db)
    assert len(frame) == len(loaded) and list(frame.columns) == list(loaded.columns)
    assert frame["dct_ms"].sum() == pytest.approx(loaded["dct_ms"].sum())
    assert not list(tmp_path.glob("*.partial"))
    with pytest.raises(UserError, match="allowed: csv, parquet"):
        export(download_db, "xls")


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fecbench", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_cli_report_and_export(download_db, tmp_path):
    done = run_cli("report", str(download_db), "-o", str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "r" / "index.html").stat().st_size > 0
    done = run_cli("export", str(download_db), "--format", "csv", "-o", str(tmp_path / "x.csv"))
    assert done.returncode == 0 and (tmp_path / "x.csv").exists()
    for args in (["report", str(tmp_path / "missing.sqlite")], ["export", str(download_db), "--format", "xls"]):
        done = run_cli(*args)
        assert done.returncode == 2
        assert done.stderr.startswith("fecbench: error:") and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_open_notebook_without_jupyter_says_how_to_install(monkeypatch):
    monkeypatch.setattr(notebook.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UserError, match="pip install jupyterlab"):
        report.jupyter_command()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(find_spec("jupyterlab") is None, reason="JupyterLab is not installed (analysis extra)")
def test_open_notebook_starts_jupyter_on_localhost(download_db, tmp_path):
    """--open-notebook really serves the notebooks folder, on 127.0.0.1 only, until interrupted."""
    port = _free_port()
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"), "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"),
           "JUPYTER_DATA_DIR": str(tmp_path / "data"), "HOME": str(tmp_path)}
    server = subprocess.Popen([sys.executable, "-m", "fecbench", "report", "--open-notebook", "--port", str(port),
                               str(download_db)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=env, start_new_session=True)
    try:
        answer = None
        for _ in range(300):  # Jupyter takes a few seconds to start on a busy machine
            if server.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api", timeout=1) as response:
                    answer = json.loads(response.read())
                break
            except OSError:
                time.sleep(0.2)
        assert answer is not None and "version" in answer, server.stdout.read() if server.poll() is not None else ""
        listening = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True).stdout
        local_addresses = {line.split()[3] for line in listening.splitlines()}
        assert local_addresses == {f"127.0.0.1:{port}"}
    finally:
        os.killpg(server.pid, signal.SIGINT)
        os.killpg(server.pid, signal.SIGINT)  # Jupyter asks for confirmation on the first Ctrl-C
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


# --- censored ratios (fecbench.analysis.ratios) in the figures ----------------------------------------

@pytest.fixture(scope="module")
def hand_pairs(tmp_path_factory):
    db = make_table_db(tmp_path_factory.mktemp("an") / "hand.sqlite", table_rows(CENSORED_TABLE), timeout_s=10)
    return ratios.pairs(db, baseline="quic")


def note_text(ax) -> str:
    """The panel's notes with line breaks (wrapping) folded to single spaces."""
    return " ".join(" ".join(t.get_text() for t in ax.texts).split())


def curve_ends(ax) -> list[tuple[float, float]]:
    """(first y, last y) of each ECDF step curve of a panel (reference lines left out)."""
    return [(float(line.get_ydata()[0]), float(line.get_ydata()[-1])) for line in visible_lines(ax)
            if not is_reference_line(line, "x")]


def test_ratio_ecdf_draws_censored_pairs_beyond_the_axis_and_says_so(hand_pairs):
    fig = figures.ratio_ecdf(hand_pairs)
    ax = next(ax for ax in fig.axes if ax.axison)
    # 6 finished + 4 fec timed out (at +inf) + 4 quic timed out (at 0) = 14 pairs drawn.
    assert curve_ends(ax) == [pytest.approx((4 / 14, 10 / 14))]
    note = note_text(ax)
    assert "19 pairs: 6 finished" in note and "4 fec timed out (at +∞)" in note and "4 quic timed out (at 0)" in note
    assert "left out: both timed out 2, baseline missing 1, baseline unsupported 1, label failed 1" in note
    assert "per-run" in fig.get_suptitle()


def test_point_ratio_ecdf_names_its_statistic(hand_pairs):
    points = ratios.point_ratios(hand_pairs)
    fig = figures.point_ratio_ecdf(points)
    ax = next(ax for ax in fig.axes if ax.axison)
    assert curve_ends(ax) == [pytest.approx((1 / 3, 2 / 3))]  # exact, >= (at +inf), <= (at 0); undefined left out
    assert "ratio of median DCT fec / quic" == ax.get_xlabel()
    assert "ratio of medians per design point" in fig.get_suptitle() and "2–5 seeds per point" in fig.get_suptitle()
    note = note_text(ax)
    assert "4 points: 1 exact" in note and "left out: 1 undefined" in note
    assert "3 excluded: baseline missing 1, baseline unsupported 1, label failed 1" in note
    empty = figures.point_ratio_ecdf(points.iloc[0:0])
    assert any(t.get_text().startswith("no ") for ax in empty.axes for t in ax.texts)


def test_ratio_vs_factors_marks_censored_points(hand_pairs):
    points = ratios.point_ratios(hand_pairs)
    fig = figures.ratio_vs_factors(points, ["bw"], label="fec")
    ax = fig.axes[0]
    marks = {}
    for collection in ax.collections:
        if type(collection).__name__ == "PathCollection" and len(collection.get_offsets()):
            marks[len(marks)] = collection.get_offsets().tolist()
    # Exact point 0 (bw 1) at 0.5, point 1 (bw 2) as ▲ at 10 000 / 120, point 2 (bw 3) as ▼ at 0.013.
    assert marks == {0: [[1.0, 0.5]], 1: [[2.0, pytest.approx(10_000 / 120)]], 2: [[3.0, pytest.approx(0.013)]]}
    assert "ratio of medians over the loss seeds" in fig.get_suptitle()
    assert "left out: 1 undefined" in " ".join(fig.get_supxlabel().split())
    # Factors that do not vary (owd, p, r, k, h of this table) get no panel.
    assert [ax.get_xlabel() for ax in figures.ratio_vs_factors(points, label="fec").axes if ax.axison] == \
        ["bandwidth (Mbit/s)"]


def test_metric_ecdf_censors_timeouts(tmp_path):
    frame = results.load(make_table_db(tmp_path / "h.sqlite", table_rows(CENSORED_TABLE), timeout_s=10))
    ax = figures.metric_ecdf(frame, "dct_ms").axes[0]
    ends = {line.get_label(): float(line.get_ydata()[-1]) for line in visible_lines(ax)}
    assert ends == {"fec (18)": pytest.approx(12 / 18), "quic (17)": pytest.approx(11 / 17)}  # timeouts at +inf
    assert "timed out (at +∞): fec 6 of 18, quic 6 of 17" in note_text(ax)
    # Not a duration: only finished runs, curves reach 1.
    ax = figures.metric_ecdf(frame, "packets_sent").axes[0]
    assert all(float(line.get_ydata()[-1]) == 1.0 for line in visible_lines(ax)) and not ax.texts


def test_report_on_campaign_with_timeouts_hides_nothing(tmp_path):
    db = make_table_db(tmp_path / "h.sqlite", table_rows(CENSORED_TABLE), timeout_s=10)
    written = report.build(db, tmp_path / "rep")
    headline = written.headline["DCT: ratio of medians label / quic per design point"].iloc[0]
    assert (headline["median ratio over points"], headline["points with ratio < 1"]) == ("≥ 0.25", "50–75 %")
    assert (headline["pairs with a timeout"], headline["pairs excluded"]) == (10, 3)
    per_point = written.headline["DCT ratio of medians per point (label / quic)"]
    assert per_point["ratio of medians"].tolist() == ["0.5", "≥ 83.3", "≤ 0.013", "undefined"]
    assert per_point["excluded"].tolist() == ["0", "1 (label failed: 1)", "1 (baseline missing: 1)",
                                              "1 (baseline unsupported: 1)"]
    pairs = pd.read_csv(written.files["pairs.csv"])
    assert len(pairs) == len(CENSORED_TABLE) and pairs["outcome"].value_counts().to_dict() == {
        "finished": 6, "label timed out": 4, "baseline timed out": 4, "excluded": 3, "both timed out": 2}
    assert written.tables["DCT medians (ms)"].loc["fec", "1 kB"] == "145"
    page = written.html.read_text()
    assert "12 timeout" in page and "1 unsupported" in page and "censored" in page


def test_point_ratio_ecdf_counts_points_without_usable_pair(tmp_path):
    table = {(0, 0): (100, 50), (0, 1): (200, 100), (1, 0): (100, "failed"), (1, 1): (120, "failed")}
    points = ratios.point_ratios(ratios.pairs(make_table_db(tmp_path / "f.sqlite", table_rows(table))))
    ax = next(ax for ax in figures.point_ratio_ecdf(points).axes if ax.axison)
    assert curve_ends(ax) == [(0.0, 1.0)]  # the point with a usable pair, drawn
    assert "2 points: 1 exact left out: 1 without a usable pair" in note_text(ax)
    assert "2 excluded: label failed 2" in note_text(ax)


def test_the_dct_axis_names_the_workload() -> None:
    from fecbench.analysis.figures.style import metric_title

    frame = pd.DataFrame({"workload": ["upload", "upload"]})
    assert metric_title("dct_ms", frame) == "upload completion time (ms)"
    assert metric_title("dct_ms", frame.assign(workload="download")) == "download completion time (ms)"
    assert metric_title("dct_ms", pd.DataFrame({"workload": ["upload", "download"]})) == "completion time (ms)"
    assert metric_title("dct_ms") == "download completion time (ms)" and metric_title("rtt_ms", frame) == "RTT (ms)"
