"""Each label is compared within its own implementation (fecbench.analysis.baselines), and a headline
sentence whose interval holds 1 says "no clear difference" (the report once compared XQUIC with FEC
against fecq without it, changing two things at once, and said "faster at 3 of 4 points" of a tie)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from fecbench.analysis.baselines import FEC, SINGLE_PATH, baselines, comparisons, family, of_kind, twins
from fecbench.analysis.report import build, sentences
from fecbench.records import db as dbmod

FECQ = {"name": "fecq", "fec_args": ["fec", "signal"]}
XQUIC = {"name": "xquic", "fec_args": ["fec", "fec_rate"]}


def test_a_fec_label_is_compared_with_its_own_stack_without_fec() -> None:
    impls = {"quic": {**FECQ, "args": {"fec": "none", "cc": "cubic"}},
             "quic-rs": {**FECQ, "args": {"fec": "rs:30,20", "signal": "hide", "cc": "cubic"}},
             "quic-rs-bbr": {**FECQ, "args": {"fec": "rs:30,20", "cc": "bbr"}},   # two things differ
             "xquic": {**XQUIC, "args": {"fec": "none"}},
             "xquic-rs": {**XQUIC, "args": {"fec": "rs", "fec_rate": "0.5"}},
             "xquic-pm": {**XQUIC, "args": {"fec": "pm"}, "baseline": "quic"}}   # the design asked
    assert baselines(impls, default="quic") == {"quic": None, "quic-rs": "quic", "quic-rs-bbr": None,
                                                "xquic": None, "xquic-rs": "xquic", "xquic-pm": "quic"}
    groups, missing = comparisons(impls, sorted(impls), "quic")
    assert groups == {"quic": ["quic-rs", "xquic-pm"], "xquic": ["xquic-rs"]}
    assert missing == ["quic-rs-bbr: not compared with a no-FEC label: no fecq label without FEC and the same other "
                       "arguments (closest: quic differs in cc bbr against cubic) (set baseline = \"LABEL\" in its "
                       "[[impl]] to compare it with another)."]
    groups, missing = comparisons(impls, ["quic", "xquic-rs"], "quic")   # never across stacks
    assert groups == {} and missing[0].startswith("xquic-rs: not compared with a no-FEC label: no xquic label "
                                                  "without FEC (set")
    assert comparisons(impls, ["quic", "xquic-rs"], "quic", explicit="quic")[0] == {"quic": ["xquic-rs"]}


def _db(path: Path) -> Path:
    """A download campaign of fecq without FEC and XQUIC with FEC (labels quic, xquic-rs) on 4 points."""
    conn = dbmod.connect(path)
    conn.execute("INSERT INTO campaigns (id, name, design_text, design_hash, seed, repetitions) "
                 "VALUES (1, 'x', '[design]', 'h', 1, 3)")
    conn.execute("ALTER TABLE points ADD COLUMN bw REAL")
    rng = np.random.default_rng(1)
    for point in range(4):
        conn.execute("INSERT INTO points (campaign_id, point, bw) VALUES (1, ?, ?)", (point, 1.0 + point))
        for label, impl, args in (("quic", "fecq", {"fec": "none"}), ("xquic-rs", "xquic", {"fec": "rs"})):
            for rep in range(3):
                key = f"{label}{point}{rep}"
                conn.execute("INSERT INTO runs (key, campaign_id, point, impl, label, impl_args, workload, size, "
                             "repetition, loss_seed, status) VALUES (?, 1, ?, ?, ?, ?, 'download', 1000, ?, ?, "
                             "'ok')", (key, point, impl, label, json.dumps(args), rep, rep + 1))
                conn.execute("INSERT INTO metrics (run_key, dct_ms) VALUES (?, ?)", (key, 100 + rng.normal(0, 5)))
    conn.close()
    return path


def test_the_report_never_pairs_two_stacks_unasked(tmp_path: Path) -> None:
    written = build(_db(tmp_path / "x.sqlite"), tmp_path / "out")
    assert not any(name.startswith("DCT: ratio of medians") for name in written.headline)
    assert any(s.startswith("xquic-rs: not compared with a no-FEC label: no xquic label without FEC")
               for s in written.sentences)
    asked = build(tmp_path / "x.sqlite", tmp_path / "asked", baseline="quic")   # the user asks: compared
    assert "DCT: ratio of medians label / quic per design point" in asked.headline


def test_a_tie_is_no_clear_difference() -> None:
    points = pd.DataFrame({"label": "rs", "size": 1000, "workload": "download", "seeds": 3,
                           "ratio": [0.97, 1.02, 0.98, 1.01, 0.99, 1.03],
                           "ratio_low": [0.9, 0.95, 0.92, 0.96, 0.93, 0.97],
                           "ratio_high": [0.99, 1.08, 0.995, 1.06, 0.999, 1.09], "state": "exact"})
    pairs = pd.DataFrame({"label": "rs", "size": 1000, "outcome": ["finished"] * 18, "excluded_why": None})
    first = sentences.downloads(points, pairs, "quic")[0]
    assert first.startswith("rs: no clear difference from quic for 1 kB downloads (median ratio ")
    assert "faster at 3–6 of 6 design points" in first   # ratio_high < 1 at 3, ratio_low < 1 at 6
    slower = sentences.downloads(points.assign(ratio=points["ratio"] + 0.5, ratio_low=points["ratio_low"] + 0.5,
                                               ratio_high=points["ratio_high"] + 0.5), pairs, "quic")[0]
    assert slower.startswith("rs was slower than quic for 1 kB downloads")


#: Issue 62's two-path campaign: fecq and XQUIC, single path, multipath, multipath with RS and with XOR.
TWO_PATH = {"fecq-sp": ("fecq", {"fec": "none"}),
            "fecq-mp": ("fecq", {"fec": "none", "multipath": "on", "scheduler": "min-rtt"}),
            "fecq-mp-rs": ("fecq", {"fec": "rs:30,20", "multipath": "on", "scheduler": "min-rtt",
                                    "repair_path": "all"}),
            "fecq-mp-xor": ("fecq", {"fec": "xor:4", "multipath": "on", "scheduler": "min-rtt"}),
            "xquic-sp": ("xquic", {"multipath": "off"}),
            "xquic-mp": ("xquic", {"multipath": "on"}),
            "xquic-mp-rs": ("xquic", {"fec": "rs", "fec_rate": "0.5", "multipath": "on"}),
            "xquic-mp-xor": ("xquic", {"fec": "xor", "multipath": "on"})}
FEC_ARGS = {"fecq": ["fec", "fec_protect", "signal", "repair_path"], "xquic": ["fec", "fec_rate", "fec_block"]}


def _impls(labels: dict[str, tuple[str, dict]] = TWO_PATH) -> dict[str, dict]:
    return {label: {"name": impl, "args": args, "fec_args": FEC_ARGS[impl]} for label, (impl, args) in labels.items()}


def test_every_label_gets_its_own_stacks_twins_and_a_reason_when_it_has_none() -> None:
    """Issue 62: the single-path comparison was made for XQUIC only (one default baseline for the campaign), and
    "fecq-sp: no label of the same implementation without FEC" was said while fecq-mp was there."""
    found = {(c.label, c.kind): (c.baseline, c.why) for c in twins(_impls(), default="fecq-mp")}
    assert {k: v[0] for k, v in found.items()} == {
        ("fecq-mp", SINGLE_PATH): "fecq-sp",
        ("fecq-mp-rs", FEC): "fecq-mp", ("fecq-mp-rs", SINGLE_PATH): None,
        ("fecq-mp-xor", FEC): "fecq-mp", ("fecq-mp-xor", SINGLE_PATH): None,
        ("xquic-mp", SINGLE_PATH): "xquic-sp",
        ("xquic-mp-rs", FEC): "xquic-mp", ("xquic-mp-rs", SINGLE_PATH): None,
        ("xquic-mp-xor", FEC): "xquic-mp", ("xquic-mp-xor", SINGLE_PATH): None}
    assert found[("fecq-mp-rs", SINGLE_PATH)][1] == "no fecq label with the same FEC arguments and multipath off"
    groups, missing = comparisons(_impls(), sorted(TWO_PATH), "fecq-mp")
    assert groups == {"fecq-sp": ["fecq-mp"], "fecq-mp": ["fecq-mp-rs", "fecq-mp-xor"], "xquic-sp": ["xquic-mp"],
                      "xquic-mp": ["xquic-mp-rs", "xquic-mp-xor"]}
    assert not any(s.startswith(("fecq-sp", "xquic-sp")) for s in missing), missing
    assert "fecq-mp-rs: not compared with a single-path label: no fecq label with the same FEC arguments and " \
           "multipath off (set baseline = \"LABEL\" in its [[impl]] to compare it with another)." in missing
    # With a single-path RS label, fecq-mp-rs gets it (its own repair_path aside); XOR still has none.
    more = _impls({**TWO_PATH, "fecq-sp-rs": ("fecq", {"fec": "rs:30,20"}),
                   "fecq-sp-rs-15": ("fecq", {"fec": "rs:15,10"})})
    assert of_kind(twins(more), SINGLE_PATH) == {"fecq-mp": "fecq-sp", "fecq-mp-rs": "fecq-sp-rs",
                                                 "xquic-mp": "xquic-sp"}
    assert of_kind(twins(more), FEC)["fecq-sp-rs"] == "fecq-sp"


def test_the_no_fec_twin_keeps_the_multipath_setting_and_paths() -> None:
    impls = _impls({"sp": ("fecq", {}), "mp2": ("fecq", {"multipath": "on", "paths": "2"}),
                    "mp3": ("fecq", {"multipath": "on", "paths": "3"}),
                    "mp3-rs": ("fecq", {"multipath": "on", "paths": "3", "fec": "rs:30,20"}),
                    "sp-rs": ("fecq", {"multipath": "off", "fec": "rs:30,20", "signal": "hide"})})
    assert of_kind(twins(impls), FEC) == {"mp3-rs": "mp3", "sp-rs": "sp"}   # multipath off written or not


def test_the_design_names_a_baseline_per_label_for_either_twin() -> None:
    labels = {**TWO_PATH, "fecq-sp-rs": ("fecq", {"fec": "rs:30,20"})}
    impls = _impls(labels)
    impls["fecq-mp-rs"]["baseline"] = "fecq-sp"          # multipath off: replaces its single-path twin
    impls["xquic-mp-rs"]["baseline"] = "fecq-mp"         # multipath on: replaces its no-FEC twin (another stack, asked)
    found = {(c.label, c.kind): (c.baseline, c.named) for c in twins(impls)}
    assert found[("fecq-mp-rs", SINGLE_PATH)] == ("fecq-sp", True)
    assert found[("fecq-mp-rs", FEC)] == ("fecq-mp", False)
    assert found[("xquic-mp-rs", FEC)] == ("fecq-mp", True)
    assert found[("xquic-mp-rs", SINGLE_PATH)] == (None, False)


def test_fec_families_across_stacks() -> None:
    assert [family(_impls()[label]) for label in ("fecq-mp-rs", "xquic-mp-rs", "fecq-mp-xor", "xquic-mp-xor",
                                                  "fecq-mp")] == ["rs", "rs", "xor", "xor", None]
    assert family({"name": "fecq", "args": {"fec": "rlc:3,2,20"}}) == "rlc"


def _two_path_db(path: Path) -> Path:
    """The two-path campaign on 4 points × 3 seeds × 2 sizes: fecq's multipath halves its single path's DCT,
    XQUIC's takes 0.8 of its (slower) single path's; FEC changes nothing."""
    impls = _impls()
    conn = dbmod.connect(path)
    conn.execute("INSERT INTO campaigns (id, name, design_text, design_hash, seed, repetitions, settings_json) "
                 "VALUES (1, 'x', '[design]', 'h', 1, 3, ?)", (json.dumps({"timeout_s": 60, "impls": impls}),))
    conn.execute("ALTER TABLE points ADD COLUMN bw_1 REAL")
    conn.execute("ALTER TABLE points ADD COLUMN owd_2 REAL")
    rng = np.random.default_rng(2)
    for point in range(4):
        conn.execute("INSERT INTO points (campaign_id, point, bw_1, owd_2) VALUES (1, ?, ?, ?)",
                     (point, 1.0 + point, 10.0 * point))
        for rep in range(3):
            for size in (100_000, 1_000_000):
                base = rng.uniform(100, 200) * size / 100_000
                for label, (impl, args) in TWO_PATH.items():
                    dct = base * (1.4 if impl == "xquic" else 1.0) * (
                        (0.5 if impl == "fecq" else 0.8) if args.get("multipath") == "on" else 1.0)
                    key = f"{label}-{point}-{rep}-{size}"
                    conn.execute("INSERT INTO runs (key, campaign_id, point, impl, label, impl_args, workload, size, "
                                 "repetition, loss_seed, status) VALUES (?, 1, ?, ?, ?, ?, 'download', ?, ?, ?, 'ok')",
                                 (key, point, impl, label, json.dumps(args), size, rep, rep + 1))
                    conn.execute("INSERT INTO metrics (run_key, dct_ms) VALUES (?, ?)", (key, dct))
                    on_2 = 400 if args.get("multipath") == "on" else 0   # the data's packets on path 2
                    for number, packets in ((1, 800 - on_2), (2, on_2)):
                        conn.execute("INSERT INTO link_stats (run_key, link, direction, seen, matched, dropped, "
                                     "model) VALUES (?, ?, 'reverse', ?, ?, 0, ?)",
                                     (key, f"path{number}", packets, packets,
                                      json.dumps({"model": "uniform", "path": number})))
    conn.close()
    return path


def test_the_report_compares_each_stack_with_its_own_twins(tmp_path: Path) -> None:
    """Issue 62: each mp label against its own stack's sp, each FEC label against its own stack's no-FEC twin, the
    missing comparisons said, and the cross-stack rows RS with RS and XOR with XOR, each point's factors once."""
    written = build(_two_path_db(tmp_path / "two.sqlite"), tmp_path / "out")
    for base, label, ratio in (("fecq-sp", "fecq-mp", 0.5), ("xquic-sp", "xquic-mp", 0.8), ("fecq-mp", "fecq-mp-rs", 1),
                               ("xquic-mp", "xquic-mp-xor", 1)):
        table = written.headline[f"DCT: ratio of medians label / {base} per design point"].set_index("label")
        assert {float(v) for v in table.loc[[label], "median ratio over points"]} == {ratio}, (base, table)
    assert not any("no label of the same implementation" in s or s.startswith(("fecq-sp", "xquic-sp"))
                   for s in written.sentences), written.sentences
    assert any(s.startswith("fecq-mp-rs: not compared with a single-path label: no fecq label with the same FEC "
                            "arguments and multipath off") for s in written.sentences)
    listed = written.headline["comparisons: each label and its baselines"]
    assert set(zip(listed["label"], listed["compared with"], strict=True)) >= {
        ("fecq-mp", "fecq-sp"), ("xquic-mp", "xquic-sp"), ("fecq-mp-rs", "fecq-mp"), ("fecq-mp-rs", "–")}
    cross = written.headline["cross-stack: FEC ÷ no FEC per stack, per point"]
    assert len(cross) == 2 * 4 * 2   # (RS, XOR) × 4 points × 2 sizes, not 4 pairs of labels
    assert set(zip(cross["A: FEC ÷ no FEC"], cross["B: FEC ÷ no FEC"], strict=True)) == {
        ("fecq-mp-rs ÷ fecq-mp", "xquic-mp-rs ÷ xquic-mp"), ("fecq-mp-xor ÷ fecq-mp", "xquic-mp-xor ÷ xquic-mp")}
    assert set(cross["point"]) == {"0", "1", "2", "3"}
    where = written.headline["cross-stack: the points"]
    assert list(where.columns) == ["point", "bw_1", "owd_2"] and len(where) == 4


def test_the_multipath_notebook_compares_each_stack_with_its_own_single_path(tmp_path: Path) -> None:
    """Issue 62: notebook 04 took XQUIC's single-path label as every label's baseline and divided fecq's runs by
    XQUIC's (0.707 where fecq's own ratio was 0.570); each multipath label against its own stack's, as the report."""
    import nbformat

    from tests.test_notebooks import execute, text_output

    nb = nbformat.read(Path(__file__).resolve().parent.parent / "notebooks" / "04-multipath.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(   # what the notebook compared, read back
        "import json\nprint('HEADLINE', json.dumps(headline[['label', 'baseline', 'size', "
        "'median ratio over points']].astype(str).values.tolist()))"))
    nbformat.write(nb, tmp_path / "04.ipynb")
    out = text_output(execute(tmp_path / "04.ipynb", _two_path_db(tmp_path / "two.sqlite"), tmp_path / "nb"))
    rows = json.loads(next(line for line in out.splitlines() if line.startswith("HEADLINE"))[len("HEADLINE "):])
    assert {(label, base, ratio) for label, base, _, ratio in rows} == {("fecq-mp", "fecq-sp", "0.5"),
                                                                       ("xquic-mp", "xquic-sp", "0.8")}, rows
    assert len(rows) == 4   # two sizes each


def test_the_download_notebook_compares_as_the_report_on_a_two_stack_multipath_database(tmp_path: Path) -> None:
    """Issue 62 (7): notebook 02 took one baseline ("quic", else the first label) for every label; on the two-stack
    multipath campaign it now makes the report's comparisons, each label against its own stack's twins, with the
    report's numbers."""
    import nbformat

    from tests.test_notebooks import execute, text_output

    db = _two_path_db(tmp_path / "two.sqlite")
    written = build(db, tmp_path / "report")
    nb = nbformat.read(Path(__file__).resolve().parent.parent / "notebooks" / "02-download-ratios.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import json\nprint('HEADLINE', json.dumps(headline_table(ratios.summary(points))[['label', 'size', "
        "'median ratio over points']].astype(str).values.tolist()))"))
    nbformat.write(nb, tmp_path / "02.ipynb")
    out = text_output(execute(tmp_path / "02.ipynb", db, tmp_path / "nb"))
    rows = json.loads(next(line for line in out.splitlines() if line.startswith("HEADLINE"))[len("HEADLINE "):])
    notebook = {(label, size): ratio for label, size, ratio in rows}
    report = {}
    for name, table in written.headline.items():
        if name.startswith("DCT: ratio of medians label / "):
            base = name[len("DCT: ratio of medians label / "):-len(" per design point")]
            report.update({(f"{label} ÷ {base}", str(size)): str(ratio) for label, size, ratio in
                           table[["label", "size", "median ratio over points"]].astype(str).values.tolist()})
    assert notebook == report and len(report) >= 8, (notebook, report)
    assert {"fecq-mp ÷ fecq-sp", "xquic-mp ÷ xquic-sp"} <= {label for label, _ in notebook}


def test_a_comparison_says_what_else_the_stack_changed_with_fec() -> None:
    """Issue 72 items 5 and 7: XQUIC's FEC labels on two paths run the backup_fec scheduler (recorded as
    ``implied``), so their no-FEC twin differs in the scheduler too, and the comparison says so."""
    why = "XQUIC's test programs schedule multipath FEC with backup_fec (with fec xor/rs/pm, multipath on)"
    impls = _impls()
    impls["xquic-mp-rs"]["implied"] = {"scheduler": {"value": "backup_fec", "why": why}}
    found = {(c.label, c.kind): c for c in twins(impls, default="fecq-mp")}
    rs = found[("xquic-mp-rs", FEC)]
    assert rs.baseline == "xquic-mp"
    assert rs.why.endswith("; as the stack runs them they differ in scheduler backup_fec against (unset) too "
                           f"({why})"), rs.why
    assert "differ in" not in found[("fecq-mp-rs", FEC)].why and "differ in" not in found[("xquic-mp-xor", FEC)].why
