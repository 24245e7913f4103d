"""Loss-position analysis (issue 18): the documented classes on hand-made verdict logs, the
Starlink-style table and its figure, and the report's section."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fecbench.analysis.figures.loss_position_plots import class_ecdf
from fecbench.analysis.studies import loss_position as lp
from tests.helpers.loss_position_db import EXPECTED, make_loss_position_db, records


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return make_loss_position_db(tmp_path_factory.mktemp("lp") / "uploads.sqlite")


def test_classify_documented_classes():
    assert lp.classify([]) == "no loss"
    assert lp.classify([0] * 30) == "no loss"
    assert lp.classify([1] + [0] * 29) == "loss"
    assert lp.classify([0] * 29 + [1]) == "tail loss"
    seq = [0] * 20
    seq[9] = 1                                        # the 11th packet from the end
    assert lp.classify(seq, k=10) == "loss" and lp.classify(seq, k=11) == "tail loss"
    assert lp.classify([1, 0, 0], k=10) == "tail loss"  # shorter than k: every packet is in the tail
    with pytest.raises(ValueError):
        lp.classify([0], k=0)


def test_summarise_sorts_by_index_and_filters_short_packets():
    log = records(20, [15], 1250, shuffle=3)
    assert list(log["index"]) != sorted(log["index"])
    assert lp.summarise(log) == {"class": "tail loss", "packets": 20, "drops": 1, "tail_drops": 1}
    # An upload's data packets, then acknowledgements: only the acks' loss is in the last 10 packets.
    mixed = np.concatenate([records(20, [5], 1250), records(10, [9], 60)])
    mixed["index"] = np.arange(30)
    assert lp.summarise(mixed)["class"] == "tail loss"
    assert lp.summarise(mixed, min_len=1000) == {"class": "loss", "packets": 20, "drops": 1, "tail_drops": 0}


def test_worst_class():
    assert lp.worst([]) == "no loss"
    assert lp.worst(["loss", "no loss"]) == "loss"
    assert lp.worst(["loss", "tail loss", "no loss"]) == "tail loss"


def test_hand_made_verdict_logs_give_the_documented_classes(db):
    classified = lp.classify_runs(db)
    got = {key.removeprefix("run-"): (row.class_forward, row.class_reverse, row.class_any)
           for key, row in zip(classified["key"], classified.itertuples(), strict=True)}
    assert got == EXPECTED
    g = classified.set_index("key").loc["run-g"]
    assert (g["packets_forward"], g["drops_forward"], g["packets_reverse"], g["drops_any"]) == (20, 1, 8, 2)
    # k = 11: run d's loss at position 9 moves into the tail
    assert lp.classify_runs(db, k=11).set_index("key").loc["run-d", "class_forward"] == "tail loss"


def test_starlink_table_nested_rows_medians_and_timeouts(db):
    table = lp.starlink_table(lp.classify_runs(db), direction="forward")
    assert list(table["class"]) == ["all transfers", "transfers with losses",
                                    "transfers with losses in the last 10 packets"]
    rows = table.set_index("class")
    # none: a 250, b 280, c 400, d 300, e timeout (+inf); failed run i never counts
    assert list(rows["runs none"]) == [5, 4, 2] and list(rows["runs fec"]) == [3, 2, 1]
    assert rows.loc["all transfers", "median none"] == 300.0
    assert rows.loc["transfers with losses", "median none"] == pytest.approx((300 + 400) / 2)
    assert math.isinf(rows.loc["transfers with losses in the last 10 packets", "median none"])
    assert math.isinf(rows.loc["all transfers", "p95 none"])
    assert rows.loc["transfers with losses in the last 10 packets", "median fec"] == 290.0
    # p95 of fec's 245, 270, 290: position 0.95 * 2 = 1.9
    assert rows.loc["all transfers", "p95 fec"] == pytest.approx(270 + 0.9 * (290 - 270))
    # any direction: run g's reverse tail loss moves it into the last row
    anyd = lp.starlink_table(lp.classify_runs(db), direction="any").set_index("class")
    assert anyd.loc["transfers with losses in the last 10 packets", "runs fec"] == 2


def test_quantile_censoring():
    assert lp.quantile(np.array([1.0, 2.0, 3.0]), 0.5) == 2.0
    assert lp.quantile(np.array([1.0, 2.0, math.inf]), 0.5) == 2.0
    assert math.isinf(lp.quantile(np.array([1.0, math.inf]), 0.5))
    assert math.isnan(lp.quantile(np.array([]), 0.5))


def test_class_ecdf_and_report_section(db, tmp_path):
    from fecbench.analysis import figures, report

    fig = class_ecdf(lp.classify_runs(db))
    assert len([ax for ax in fig.axes if ax.get_visible() and ax.lines]) == 3
    figures.save(fig, tmp_path / "x.png")
    built = report.build(db, tmp_path / "report")
    assert "loss-position" in built.figures
    html = (tmp_path / "report" / "index.html").read_text()
    assert "transfers with losses in the last 10 packets" in html
    # Uploads: the table classifies by the data direction (client → server), not by lost acknowledgements.
    classified = lp.classify_runs(db)
    assert lp.data_direction(classified) == "forward"
    (name,) = [n for n in built.tables if n.startswith("DCT per loss position")]
    assert "client → server" in name
    pd.testing.assert_frame_equal(built.tables[name], lp.starlink_table(classified, direction="forward"))


def test_no_verdict_logs_is_empty(tmp_path):
    from tests.helpers.analysis_db import make_download_db

    path = make_download_db(tmp_path / "d.sqlite", points=2, repetitions=1)
    assert lp.classify_runs(path).empty


def test_paired_tail_compares_the_same_seeds() -> None:
    """The baseline's tail-class runs against the other label's runs on the same seeds, whatever their class."""
    import math

    import pandas as pd

    from fecbench.analysis.studies.loss_position import paired_tail

    rows = []
    for rep, (base_class, base_dct, fec_class, fec_dct) in enumerate([
            ("tail loss", 400.0, "loss", 300.0), ("tail loss", 500.0, "no loss", 250.0),
            ("tail loss", 300.0, "tail loss", 330.0), ("loss", 200.0, "tail loss", 900.0),
            ("tail loss", 600.0, "loss", math.nan)]):
        rows.append({"design_hash": "d", "point": 0, "repetition": rep, "size": 50_000, "label": "quic",
                     "status": "ok", "dct_ms": base_dct, "class_any": base_class})
        rows.append({"design_hash": "d", "point": 0, "repetition": rep, "size": 50_000, "label": "tail",
                     "status": "timeout" if math.isnan(fec_dct) else "ok", "dct_ms": fec_dct, "class_any": fec_class})
    got = paired_tail(pd.DataFrame(rows), "quic").iloc[0]
    assert got["pairs"] == 4                                         # rep 3: the baseline lost no tail packet
    assert got["median_ratio"] == pytest.approx((0.75 + 1.1) / 2)    # 0.5, 0.75, 1.1, inf (the timeout)
    assert got["faster_share"] == 0.5 and got["median quic"] == 450.0 and math.isinf(got["p95 tail"])
