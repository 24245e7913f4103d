"""The report's real-time messages section (thesis ch. 5): re-buffering and data received per
label (Figs. 5.7–5.19) and, on a multipath campaign, each multipath label against its single-path
twin (``fecbench.analysis.studies.multipath_study``; Figs. 5.24–5.26): the ratio of data received, the ratio against
the loss setting, the medians side by side and what each path carried and rebuilt."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from fecbench.analysis import baselines, ratios, results
from fecbench.analysis.studies import message_accounting, multipath_study, path_metrics
from fecbench.host.paths import slug

FIGURE_NOTES = {
    "rebuffering-ecdf": "ECDF of the total re-buffering time per label.",
    "data-received-ecdf": "ECDF of the amount of data received by the application per label.",
    "data-received-ratio-ecdf": "Per-run ratios: ECDF of the ratio of data received against the baseline on "
                                "identical (point, loss seed); above 1: more data than the baseline. Pairs with a "
                                "run that did not end ok are counted in each panel, not drawn.",
    "rebuffering-vs-owd": "Total re-buffering time against the one-way delay.",
    "message-fate": "Every message sent, per label: played on time, late, corrupted (some packets missing) or "
                    "lost (all missing); and per run, the packets FEC rebuilt and where the missing packets of the "
                    "bad messages went (lost in the network, dropped by the sender, never sent).",
    "multipath-data-received-ratio-ecdf": "Thesis Fig. 5.25 (inverted: multipath ÷ single path): per-run ratio of "
                                          "the data received by each multipath label to its single-path twin's "
                                          "(same arguments but the multipath ones) on the same point and loss "
                                          "seeds; above 1: multipath received more.",
}


def messages_section(tables: dict[str, pd.DataFrame], notes: dict[str, str], db: Path, frame: pd.DataFrame,
                     base: str | None, figure: Callable[..., None]) -> None:
    """Add the messages tables and figures of ``frame`` (all runs of ``db``) to ``tables``/``notes``;
    ``base``: the label the others are compared with on a single-path campaign."""
    from fecbench.analysis import figures

    messages = frame[frame["workload"] == "messages"]
    if not (messages["status"] == "ok").any():
        return
    figure("rebuffering-ecdf", figures.metric_ecdf(messages, "rebuffering_ms"))
    figure("data-received-ecdf", figures.metric_ecdf(messages, "bytes_app", log=False))
    tables["messages medians"] = _medians(messages)
    accounting = message_accounting.accounting(db)
    tables["messages accounting (sums)"] = message_accounting.summary(accounting)
    if not accounting.empty:
        figure("message-fate", figures.message_fate(accounting))
    impls = {k: v for k, v in baselines.recorded_impls(db).items() if k in set(messages["label"])}
    twins = multipath_study.twins(messages, impls)
    if twins:
        _multipath(tables, notes, db, messages, twins, figure)
        missing = [c for c in baselines.twins(impls) if c.kind == baselines.SINGLE_PATH and c.baseline is None]
        notes["multipath messages: each label against its single-path twin"] += "".join(
            f" {c.label}: not compared ({c.why})." for c in missing)
        return
    if len(messages["label"].unique()) > 1 and base in set(messages["label"]):
        pairs = ratios.pairs(messages, baseline=base, by=["point", "rep"], metric="bytes_app")
        tables[f"messages: pairs per label against {base}"] = ratios.accounting(pairs, by=["label"])
        if pairs["ratio"].notna().any():
            figure("data-received-ratio-ecdf", figures.ratio_ecdf(pairs))
    if "owd" in messages:
        figure("rebuffering-vs-owd", figures.metric_vs_factor(messages, "rebuffering_ms", "owd"))


def _medians(messages: pd.DataFrame) -> pd.DataFrame:
    rebuffering = results.medians(messages, "rebuffering_ms", by=["label"]).add_prefix("rebuffering_ms ")
    received = results.medians(messages, "bytes_app", by=["label"]).add_prefix("bytes_app ")
    return rebuffering.merge(received, left_on="rebuffering_ms label", right_on="bytes_app label").rename(
        columns={"rebuffering_ms label": "label"}).drop(columns="bytes_app label")


def _multipath(tables: dict[str, pd.DataFrame], notes: dict[str, str], db: Path, messages: pd.DataFrame,
               twins: dict[str, str], figure: Callable[..., None]) -> None:
    """Figs. 5.24–5.26 of the thesis: every multipath label against its single-path twin."""
    from fecbench.analysis import figures

    received = multipath_study.pairs(messages, "bytes_app", twin_of=twins)
    rebuffering = multipath_study.pairs(messages, "rebuffering_ms", twin_of=twins)
    name = "multipath messages: each label against its single-path twin"
    table = ratios.accounting(received, by=["label"]).merge(
        pd.DataFrame({"label": list(twins), "twin": list(twins.values())}), on="label")
    finished = received[received["outcome"] == "finished"]
    table["data received ratio median"] = table["label"].map(finished.groupby("label")["ratio"].median())
    for column, pairs, sign in (("share of pairs with more data", received, 1),
                                ("share of pairs with less re-buffering", rebuffering, -1),
                                ("share of pairs with more re-buffering", rebuffering, 1)):
        done = pairs[pairs["outcome"] == "finished"]
        above = sign * (done["value"] - done["baseline_value"]) > 0
        table[column] = table["label"].map(above.groupby(done["label"]).mean())
    tables[name] = table
    notes[name] = ("Each multipath label's twin is the single-path label with the same arguments but the "
                   "multipath ones; pairs share the point and loss seeds. Ratio: multipath ÷ single path "
                   "(thesis Fig. 5.25 shows single path ÷ round-robin).")
    if received["ratio"].notna().any():
        figure("multipath-data-received-ratio-ecdf", figures.ratio_ecdf(received),
               FIGURE_NOTES["multipath-data-received-ratio-ecdf"])
        factors = multipath_study.loss_factors(messages)
        for label in twins:
            if factors and received.loc[received["label"] == label, "ratio"].notna().any():
                figure(f"multipath-data-received-ratio-vs-loss-{slug(label)}",
                       figures.ratio_vs_factors(received, factors, label=label),
                       f"Data received {label} ÷ {twins[label]} per design point (median over its loss seeds) "
                       "against the loss and delay factors.")
    recovered = multipath_study.recoveries(path_metrics.path_metrics(db))
    if len(recovered):
        tables["multipath messages: per path, what the server sent and the client rebuilt"] = recovered
