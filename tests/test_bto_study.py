"""rQUIC's BTO sweep read as the paper's Figs. 12 and 13 (fecbench/analysis/studies/bto.py, figures.bto_sweep): each
coded run's ξ against the average of the baseline's runs at its point and size, its BTO by the rule its arguments
name."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from fecbench.analysis import figures
from fecbench.analysis.studies import bto

ARGS = {"rquic": {"fec": "none"}, "rquic-xor": {"fec": "xor"}, "rquic-xor-bto-rtt": {"fec": "xor", "bto_rtts": "1"},
        "rquic-xor-bto-100ms": {"fec": "xor", "bto_ms": "100"}, "rquic-xor-bto-400ms": {"fec": "xor", "bto_ms": "400"},
        "rquic-xor-bto-1600ms": {"fec": "xor", "bto_ms": "1600"}}


def _runs() -> pd.DataFrame:
    rows = []
    for point, owd in ((0, 50.0), (1, 200.0)):
        for label, args in ARGS.items():
            for rep, dct in enumerate((1000.0, 3000.0) if label == "rquic" else (400.0 + 100 * len(label), 900.0)):
                rows.append({"key": f"{point}{label}{rep}", "label": label, "impl": "rquic",
                             "impl_args": json.dumps(args), "point": point, "size": 5 << 20, "repetition": rep,
                             "owd": owd, "bw": 10.0, "p": 0.03, "status": "ok", "dct_ms": dct})
    rows.append({**rows[-1], "key": "failed", "status": "timeout", "dct_ms": None})
    rows.append({**rows[0], "key": "fecq", "impl": "fecq", "label": "quic-fec-xor"})   # another stack: not read
    return pd.DataFrame(rows)


def test_completion_rate_divides_by_the_baselines_average_and_names_the_bto() -> None:
    rates = bto.completion_rates(_runs())
    assert set(rates["label"]) == set(ARGS) - {"rquic"} and "failed" not in set(rates["key"])
    row = rates[(rates["label"] == "rquic-xor-bto-100ms") & (rates["point"] == 0)].iloc[0]
    assert row["xi"] == pytest.approx(row["dct_ms"] / 2000.0)          # Eq. 4: ÷ the baseline's average (1 and 3 s)
    by_label = rates[rates["point"] == 1].groupby("label")[["bto_ms", "bto_rule"]].first()
    assert by_label.loc["rquic-xor"].tolist() == [25.0, "rquic"]      # max_ack_delay − 1 ms
    assert by_label.loc["rquic-xor-bto-rtt"].tolist() == [400.0, "rtt"]   # 2 × owd
    assert by_label.loc["rquic-xor-bto-400ms"].tolist() == [400.0, "fixed"]
    summary = bto.rate_summary(rates)
    assert len(summary) == 2 * 5 and set(summary["runs"]) == {2}
    assert bto.completion_rates(_runs(), baseline="absent").empty


def test_the_sweep_figure_draws_a_panel_per_network_with_its_fit() -> None:
    fig = figures.bto_sweep(bto.completion_rates(_runs()))
    panels = [ax for ax in fig.axes if ax.axison]
    assert len(panels) == 2
    for ax in panels:   # the runs, the means, the 3rd-order fit (4 BTOs and more), the RTT and ξ = 1 lines
        assert any(line.get_label() == "3rd-order fit" for line in ax.get_lines())
        assert ax.get_xscale() == "log"
    empty = figures.bto_sweep(bto.completion_rates(_runs().iloc[:0]))
    assert not any(ax.axison for ax in empty.axes)


def test_the_report_shows_a_sweep_and_nothing_without_one() -> None:
    """`fecbench report`'s BTO section: the ξ table and the sweep figure where the rQUIC labels ran with two BTOs or
    more; nothing where they did not (every design but the sweeps)."""
    from fecbench.analysis.report.bto import bto_section

    tables: dict[str, pd.DataFrame] = {}
    notes: dict[str, str] = {}
    drawn: list[str] = []
    bto_section(tables, notes, _runs(), lambda name, fig, note: drawn.append(name))
    assert drawn == ["bto-sweep"] and len(tables["completion rate per buffer timeout"]) == 10
    runs = _runs()
    one_bto = runs[runs["label"].isin(["rquic", "rquic-xor"])]
    tables.clear()
    drawn.clear()
    bto_section(tables, notes, one_bto, lambda name, fig, note: drawn.append(name))
    assert tables == {} and drawn == []
