"""The report's page: ``build`` writes the figures, tables and one self-contained HTML page of a campaign
(what each holds: the package's docstring, ``fecbench.analysis.report``)."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from fecbench.analysis import ratios, results, stats, tables
from fecbench.analysis.baselines import BASELINES_NOTE, comparisons, recorded_impls
from fecbench.analysis.baselines import table as baselines_table
from fecbench.analysis.report import accuracy as report_accuracy
from fecbench.analysis.report import caveats, evidence, sentences, versions
from fecbench.analysis.report import messages as report_messages
from fecbench.analysis.report import settings as report_settings
from fecbench.analysis.report.bto import bto_section
from fecbench.analysis.report.flows import flows_section
from fecbench.analysis.report.pages import pages_section
from fecbench.analysis.report.ratio_tables import headline_table, pivot_medians, point_table, share_text
from fecbench.analysis.studies import cross_stack, path_metrics
from fecbench.host.paths import slug
from fecbench.inputs.errors import UserError
from fecbench.records import db as dbmod
from fecbench.records.status import STATUSES
from fecbench.timekeeping import checks

FIGURE_NOTES = {
    "status": "Runs per label and status.",
    "fidelity": "Measured against configured RTT and bottleneck rate (dashed: identity).",
    "loss-fidelity": "Loss rate counted by the dropper against the loss model's long-run rate.",
    "dct-ecdf": "ECDF of the completion time (DCT: of a download, an upload or all request/response "
                "exchanges) per size.",
    "dct-point-ratio-ecdf": "Ratio of medians (Michel et al. 2019 §IV-B): per design point and size, the "
                            "median DCT of the label over the point's loss seeds divided by the baseline's over "
                            "the same seeds; ECDF over the points, below 1: faster than the baseline. A point "
                            "whose label median timed out is drawn at +∞ (the curve ends below 1), one whose "
                            "baseline median timed out at 0; each panel says how many pairs were censored or "
                            "excluded, and why.",
    "dct-ratio-ecdf": "Per-run ratios: ECDF of the DCT ratio between each label and the baseline on identical "
                      "(point, loss seed, size); below 1: faster. A pair whose label timed out is drawn at +∞, "
                      "one whose baseline timed out at 0; pairs where both timed out or a run failed are "
                      "counted in each panel.",
    **report_messages.FIGURE_NOTES,
}


#: Seed of the bootstrap intervals (``ratios.point_ratios``): the same database gives the same report.
REPORT_SEED = 2019
HEADLINE_NOTE = (
    "Statistic: per design point and file size, the median DCT of the label over the point's loss seeds "
    "divided by the baseline's median over the same seeds (ratio of medians, Michel et al. 2019 §IV-B); "
    "then, per label and size, the median of these per-point ratios and the share of points below 1 "
    "(label faster). A run that reached the design's timeout_s is censored there, not dropped: a median "
    "stays exact while fewer than half the runs of a side timed out; otherwise the point's ratio is only "
    "known to be ≥ or ≤ a bound (undefined when both sides' medians timed out), and the statistics over "
    "points are shown as ranges. Pairs with a failed, unsupported, interrupted or missing run are "
    "excluded from their point and counted. Per-point values with {level:.0%} intervals over the point's seeds "
    "(a percentile bootstrap, both runs of a seed resampled together, {n_boot} resamples, seed {seed}; none with "
    "fewer than {min_seeds} seeds: too few for it): {points_csv}; every pair: {pairs_csv}. The interval of a "
    "median over design points is over the points: two of their order statistics (distribution-free; none under "
    "6 points).")


@dataclass
class Report:
    """What ``build`` wrote: the HTML page, the figures (name → PNG path), the tables (the headline
    ones first on the page, with their notes) and other files (CSV)."""
    html: Path
    figures: dict[str, Path] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    headline: dict[str, pd.DataFrame] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    sentences: list[str] = field(default_factory=list)   # the page's opening (report.sentences)


def default_db(directory: str | Path = "results") -> Path:
    """The newest ``*.sqlite`` in ``directory`` (what ``report``, ``export`` use without a DB)."""
    return dbmod.newest(directory)


def choose_baseline(labels: list[str], preferred: tuple[str, ...]) -> str | None:
    for name in preferred:
        if name in labels:
            return name
    return labels[0] if labels else None


def build(db: str | Path, outdir: str | Path | None = None, *, baseline: str | None = None,
          progress=None, against: str | Path | None = None) -> Report:
    """Write the report of ``db`` into ``outdir`` and return what was written.

    ``baseline``: the label every other label is compared with; None: each label with its own stack's twins
    (``fecbench.analysis.baselines``: without FEC; on a single path), a label with neither with ``quic`` (else
    the first label) when of its stack; for messages runs ``udp`` when present. ``progress`` is called with
    each step's name (the CLI shows it). ``against``: another campaign of the design, drawn beside (report.versions).
    """
    import matplotlib

    matplotlib.use("Agg")  # files only, no display; before anything imports pyplot
    from fecbench.analysis import figures

    db = Path(db)
    frame = results.load(db)
    # The flagged runs taken as data, for the comparisons with and without them (report.evidence).
    with_flagged = results.load(db, include_fidelity=True) if frame["flagged"].any() else None
    if frame.empty:
        raise UserError(f"{db}: no runs recorded yet (is the campaign still planning?)")
    outdir = Path(outdir) if outdir is not None else db.parent / f"{db.stem}-report"
    outdir.mkdir(parents=True, exist_ok=True)
    step = progress or (lambda _name: None)
    report = Report(html=outdir / "index.html")
    notes: dict[str, str] = {}
    labels = frame.attrs["labels"]
    if baseline is not None and baseline not in labels:
        raise UserError(f"baseline label {baseline!r} has no runs in {db} (labels: {', '.join(labels)})")

    def figure(name: str, fig, note: str | None = None) -> None:
        step(name)
        report.figures[name] = figures.save(fig, outdir / f"{name}.png")
        notes[name] = note or FIGURE_NOTES.get(name.split("-vs-")[0], "")   # -vs-BASE: one per baseline

    _what_ran(report, db, frame, figure)
    downloads = frame[frame["workload"].isin(versions.WORKLOADS)]  # every workload with a DCT
    _paths(report, db, figure)
    groups: dict[str, list[str]] = {}
    if (downloads["status"] == "ok").any():
        groups = _downloads(report, db, downloads, labels, baseline, outdir, figure, with_flagged)
    if against is not None:
        versions.section(report, db, Path(against), downloads, groups, figure)
    messages_base = baseline or choose_baseline(labels, ("udp", "quic"))
    report_messages.messages_section(report.tables, report.notes, db, frame, messages_base, figure)
    report.sentences += sentences.messages(frame, messages_base)

    evidence.attempts_section(report.tables, report.notes, db, frame)
    flows_section(report.tables, report.notes, db, figure)
    pages_section(report.tables, report.notes, db, frame, figure, REPORT_SEED)
    bto_section(report.tables, report.notes, frame, figure)
    report_settings.losses_section(report.tables, report.notes, db, frame)
    report_settings.settings_section(report.tables, report.notes, db)
    report_settings.timelines_section(report.tables, report.notes, db, outdir, step)
    _loss_position(report, db, figure)
    _link_schedule(report, db)

    failures = frame[~frame["status"].isin(["ok", "pending"])]
    if not failures.empty:
        report.tables["runs not ok (first 30)"] = failures[
            ["point", "label", "workload", "size", "repetition", "status", "error"]].head(30)
    step("index.html")
    report.html.write_text(_html(db, frame, report, notes), encoding="utf-8")
    return report


def _what_ran(report: Report, db: Path, frame: pd.DataFrame, figure) -> None:
    """The campaigns, the runs per status, and whether the emulation held (fidelity, accuracy, losses)."""
    from fecbench.analysis import figures

    camps = results.campaigns(db)
    report.tables["campaigns"] = camps[["id", "name", "created_at", "design_hash", "git_sha", "seed",
                                        "repetitions", "topology", "link_backend"]].assign(
        design_hash=camps["design_hash"].str[:12])
    report.tables["runs per status"] = results.status_counts(frame)
    figure("status", figures.status_bars(frame))
    fid = tables.fidelity(db)
    if not fid.empty:
        figure("fidelity", figures.fidelity_scatter(fid))
        report.tables["fidelity"] = pd.DataFrame({
            # out of tolerance: the rows the run's own `network` check flags (one rule for run and report)
            "checks": [len(fid)], "out of tolerance": [sum(map(checks.named("network").flags, fid.to_dict("records")))],
            "median RTT measured/configured": [fid["rtt_ratio"].median()],
            "median rate measured/configured": [fid["rate_ratio"].median()]})
    report_accuracy.accuracy_section(report.tables, report.notes, db, frame, figure)
    link_stats = tables.link_stats(db)
    if link_stats["expected_loss"].notna().any():
        figure("loss-fidelity", figures.loss_fidelity(link_stats))


def _paths(report: Report, db: Path, figure) -> None:
    """Multipath runs: each path's share of the packets, and what each endpoint counted on each path."""
    from fecbench.analysis import figures

    traffic = tables.path_traffic(db)
    single_path = tables.single_path_label(traffic[traffic["workload"] == "download"])
    if single_path is not None:
        figure("path-share-down", figures.path_share(traffic),
               "Mean share of each run's server → client packets on each path, per label and file size.")
    per_path = path_metrics.path_metrics(db)
    if not per_path.empty:
        report.tables["per-path endpoint metrics (medians)"] = (
            per_path[per_path["status"] == "ok"].groupby(["label", "side", "path"])
            [["share_sent", "packets_sent", "repair_sent", "recovered", "lost", "congestion_events", "rtt_ms"]]
            .median().reset_index())
        report.notes["per-path endpoint metrics (medians)"] = (
            "What each endpoint counted on each path (multipath runs, fecbench export --table paths): share of "
            "its datagrams sent there, repairs sent, datagrams the peer lost there and FEC rebuilt, QUIC losses.")


def _downloads(report: Report, db: Path, downloads: pd.DataFrame, labels: list[str], baseline: str | None,
               outdir: Path, figure, with_flagged: pd.DataFrame | None) -> dict[str, list[str]]:
    """The runs with a DCT: their ECDF and medians, each label against its baselines (the headline, first
    sentences), the cross-stack table; returns the comparisons made (baseline -> labels compared with it)."""
    from fecbench.analysis import figures

    figure("dct-ecdf", figures.metric_ecdf(downloads, "dct_ms", per_size=True))
    report.tables["DCT medians (ms)"] = pivot_medians(ratios.censored_medians(downloads, "dct_ms"))
    report.notes["DCT medians (ms)"] = ("Median DCT per label and size over the runs that finished or timed "
                                        "out (censored at timeout_s: ≥ when half or more timed out).")
    # Each label against its own stack's twins (no FEC; single path), or every label against --baseline.
    impls, present = recorded_impls(db), sorted(set(downloads["label"]))
    default = choose_baseline(labels, ("quic",))
    groups, missing = comparisons(impls, present, default, baseline)
    if baseline is None:
        report.headline["comparisons: each label and its baselines"] = baselines_table(impls, present, default)
        report.notes["comparisons: each label and its baselines"] = BASELINES_NOTE
    findings: list[str] = []
    spreads = evidence.twin_spreads(evidence.attempts(db, downloads))   # --twins: how far a run repeats itself
    for base, compared in sorted(groups.items()):   # each label within its own implementation
        tag = "" if len(groups) == 1 else f"-vs-{slug(base)}"
        mine = downloads[downloads["label"].isin([base, *compared])]
        flagged = None if with_flagged is None else with_flagged[with_flagged["key"].isin(mine["key"])]
        findings += _download_ratios(report, mine, base, outdir, figure, tag, flagged, spreads)
    report.sentences[:0] = findings   # what the comparisons rest on, first
    report.sentences += caveats.multipath(db, downloads, impls)   # what a multipath comparison leaves out
    report.sentences += missing   # every comparison that cannot be made, and why
    cross_stack.section(report.headline, report.notes, downloads, seed=REPORT_SEED, impls=impls)  # two stacks
    return groups


def _download_ratios(report: Report, downloads: pd.DataFrame, base: str, outdir: Path, figure, tag: str = "",
                     with_flagged: pd.DataFrame | None = None, spreads: pd.DataFrame | None = None) -> list[str]:
    """The headline (ratio of medians per point, timeouts censored), the pair accounting, the ratio
    figures and the CSV files of a campaign's downloads against ``base``; what the comparison rests on
    (report.evidence: exclusions by side, with and without the flagged runs, flagged against ok runs), whose
    findings it returns for the page's first sentences."""
    from fecbench.analysis import figures

    pairs = ratios.pairs(downloads, baseline=base, metric="dct_ms")
    points = ratios.point_ratios(pairs, seed=REPORT_SEED)
    report.sentences += [f"unpaired: {why}" for why in pairs.attrs.get("unpaired", {}).values()]
    report.sentences += sentences.downloads(points, pairs, base, spreads)
    findings = _evidence(report, pairs, downloads, base, tag, figure, with_flagged)
    name = f"DCT: ratio of medians label / {base} per design point"
    report.headline[name] = headline_table(ratios.summary(points))
    points_csv, pairs_csv = f"point-ratios{tag}.csv", f"pairs{tag}.csv"   # the files written below
    report.notes[name] = HEADLINE_NOTE.format(level=points.attrs["level"], n_boot=points.attrs["n_boot"],
                                              seed=REPORT_SEED, min_seeds=points.attrs["min_seeds"],
                                              points_csv=points_csv, pairs_csv=pairs_csv)
    accounting = ratios.accounting(pairs).reset_index()
    accounting["size"] = accounting["size"].map(figures.format_size)
    report.headline[f"DCT pairs against {base}: finished, timed out, excluded"] = accounting
    runs = ratios.run_summary(pairs)
    report.tables[f"DCT ratio label / {base}"] = pd.DataFrame({
        "label": runs["label"], "size": runs["size"].map(figures.format_size), "pairs": runs["pairs"],
        "excluded": runs["excluded"],
        "median per-run ratio": [stats.describe(b) for b in zip(runs["median_ratio_low"], runs["median_ratio_high"],
                                                                 strict=True)],
        "pairs with ratio < 1": [share_text(lo, hi) for lo, hi in zip(runs["below_1_low"], runs["below_1_high"],
                                                                  strict=True)]})
    report.notes[f"DCT ratio label / {base}"] = (
        "Per-run ratios (each pair of runs on the same point, loss seed and size), for comparison with the "
        "headline; a pair where one side timed out counts as a bound, one where both did as undefined.")
    if len(points) <= 24:  # a few fixed points (DA2GC, MSS): every point with its interval
        report.headline[f"DCT ratio of medians per point (label / {base})"] = point_table(points)
    for file, table in ((points_csv, points), (pairs_csv, pairs)):
        report.files[file] = outdir / file
        table.to_csv(outdir / file, index=False)
    if not pairs["outcome"].isin(["finished", "label timed out", "baseline timed out"]).any():
        return findings
    figure(f"dct-point-ratio-ecdf{tag}", figures.point_ratio_ecdf(points))
    figure(f"dct-ratio-ecdf{tag}", figures.ratio_ecdf(pairs))
    for label in sorted(points["label"].unique()):
        figure(f"dct-ratio-vs-factors-{slug(label)}{tag}", figures.ratio_vs_factors(points, label=label),
               f"Ratio of median DCTs {label} / {base} per design point against each design factor; bars: "
               f"{points.attrs['level']:.0%} bootstrap interval over the point's seeds; ▲/▼: the label's/the "
               "baseline's median timed out (bound).")
    others = sorted(set(downloads["label"]) - {base})
    if len(others) >= 2:  # two FEC variants against each other (Fig. 7: RLC / Reed-Solomon)
        fec_pairs = ratios.pairs(downloads, baseline=others[1], labels=[others[0]], metric="dct_ms")
        if fec_pairs["outcome"].isin(["finished", "label timed out", "baseline timed out"]).any():
            figure(f"dct-ratio-ecdf-{slug(others[0])}-vs-{slug(others[1])}", figures.ratio_ecdf(fec_pairs),
                   f"ECDF of the per-run DCT ratio {others[0]} / {others[1]} per file size (timeouts censored).")
    return findings


def _evidence(report: Report, pairs: pd.DataFrame, downloads: pd.DataFrame, base: str, tag: str, figure,
              with_flagged: pd.DataFrame | None) -> list[str]:
    """Exclusions by side (a figure and a table), the headline with and without the flagged runs, flagged against
    ok runs: tables on the page, and the sentences of what differs (the page's first)."""
    from fecbench.analysis import figures

    findings = []
    lost = evidence.exclusions(pairs)
    if lost.empty:
        return findings
    name = f"exclusions by side against {base}"
    report.headline[name] = lost.drop(columns=["differ"])
    report.notes[name] = ("Per compared label, the pairs each side lost (a run failed, flagged, unsupported, "
                          "interrupted or missing) and why; Fisher's exact test of equal shares where they differ by "
                          "more than 5 points (else –). Shares that differ mean the runs left are not a sample of the "
                          "comparison: a label whose runs are flagged more often is compared on its luckier runs.")
    if (lost["label excluded"] + lost["baseline excluded"]).any():
        figure(f"exclusions{tag}", figures.exclusion_bars(lost),
               f"Share of pairs each side lost against {base}, per label (★: the shares differ).")
    findings += [evidence.exclusion_sentence(row) for _, row in lost[lost["differ"]].iterrows()]
    if with_flagged is not None and with_flagged["flagged"].any():
        labels = sorted(set(pairs["label"]))
        name = f"with and without flagged runs against {base}"
        without = evidence.headline(downloads, base, labels, REPORT_SEED)
        report.headline[name] = evidence.sensitivity(without, evidence.headline(with_flagged, base, labels,
                                                                               REPORT_SEED))
        report.notes[name] = ("The headline's median ratio over points, from the runs as judged (flagged runs left "
                              "out) and with the flagged runs' own outcomes taken as data (results.load(..., "
                              "include_fidelity=True)): where they differ, the flag decided the answer.")
        compared = evidence.flagged_vs_ok(with_flagged)
        if not compared.empty:
            name = f"flagged against ok runs ({base} comparison)"
            report.tables[name] = compared.assign(size=compared["size"].map(figures.format_size))
            report.notes[name] = ("Each flagged run's DCT over the median of the same label's ok runs at the same "
                                  "point and size: above 1, the flag removed slow runs (the ok runs alone understate "
                                  "the DCT); near 1, it removed good data. Sign test of as many above as below.")
            findings += [evidence.flagged_sentence(row) for _, row in compared[compared["differ"]].iterrows()]
    return findings


def _loss_position(report: Report, db: Path, figure) -> None:
    """With verdict logs: the Starlink table (median and p95 DCT per loss-position class and label)
    and a DCT ECDF per class (fecbench.analysis.studies.loss_position)."""
    from fecbench.analysis.figures import class_ecdf
    from fecbench.analysis.studies import loss_position

    classified = loss_position.classify_runs(db)
    if classified.empty or "dct_ms" not in classified or not classified["dct_ms"].notna().any():
        return
    k = classified.attrs["k"]
    direction = loss_position.data_direction(classified)
    where = loss_position.DIRECTION_NAMES[direction]
    name = f"DCT per loss position (ms; losses among the last {k} packets, {where})"
    report.tables[name] = loss_position.starlink_table(classified, direction=direction)
    report.notes[name] = (f"Runs with a verdict log, split as in Michel & Bonaventure's Starlink slides: all, "
                          f"with a dropped packet, with one among the last {k} packets the dropper saw "
                          f"({where}: the direction carrying the data, repairs included; notebook 05 shows each "
                          "direction). Timed-out runs "
                          "count at +∞ (inf: the quantile falls among them); failed runs are left out.")
    figure("loss-position", class_ecdf(classified, direction=direction),
           f"ECDF of the DCT per loss-position class and label ({where}); timed-out runs at +∞.")


def _link_schedule(report: Report, db: Path) -> None:
    """A link schedule's changes: how many were applied, how close to their scheduled time, errors."""
    events = tables.link_events(db)
    timed = events[events["scheduled_s"].notna()].assign(abs_error_ms=lambda f: f["error_ms"].abs())
    if timed.empty:
        return
    name = "link schedule: changes applied"
    report.tables[name] = timed.groupby(["link", "direction", "kind"]).agg(
        changes=("seq", "size"), runs=("run_key", "nunique"), median_error_ms=("abs_error_ms", "median"),
        max_error_ms=("abs_error_ms", "max")).reset_index()
    failed = int((events["kind"] == "error").sum())
    report.notes[name] = (f"Changes of the link schedule as applied during the runs; error: applied - scheduled "
                          f"time (after the client's start). {failed} change(s) could not be applied "
                          "(results.link_events: kind error).")


def _html(db: Path, frame: pd.DataFrame, report: Report, notes: dict[str, str]) -> str:
    title = f"fecbench report: {db.name}"
    counts = frame["status"].value_counts()
    order = [s for s in STATUSES if s in counts] + [s for s in counts.index if s not in STATUSES]
    by_status = ", ".join(f"{counts[s]} {s}" for s in order)
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             "<style>body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}"
             "table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.9em}"
             "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}"
             "th{background:#f2f2f2}img{max-width:100%;border:1px solid #eee}"
             "figure{margin:1.5em 0}figcaption{color:#555;font-size:.9em}p.note{color:#444;font-size:.9em}"
             "</style></head><body>",
             f"<h1>{html.escape(title)}</h1>",
             f"<p>{len(frame)} runs ({by_status}); labels: {html.escape(', '.join(frame.attrs['labels']))}. "
             f"Generated {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} from "
             f"<code>{html.escape(str(db))}</code>.</p>"]
    if report.sentences:
        parts.append("<h2>In short</h2><ul>" + "".join(f"<li>{html.escape(s)}</li>" for s in report.sentences)
                     + "</ul>")
    for title, group in (("Headline", report.headline), ("Tables", report.tables)):
        if group:
            parts.append(f"<h2>{title}</h2>")
        for name, table in group.items():
            parts.append(f"<h3>{html.escape(name)}</h3>")
            if name in report.notes:
                parts.append(f"<p class='note'>{html.escape(report.notes[name])}</p>")
            parts.append(table.to_html(float_format=lambda v: f"{v:.4g}", na_rep="–", border=0,
                                       index=not isinstance(table.index, pd.RangeIndex),
                                       escape=name not in report_settings.LINK_TABLES))
    if report.files:
        links = ", ".join(f"<a href='{html.escape(p.name)}'>{html.escape(p.name)}</a>" for p in report.files.values())
        parts.append(f"<p>Data beside this page: {links}.</p>")
    parts.append("<h2>Figures</h2>")
    for name, path in report.figures.items():
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        parts.append(f"<figure><img alt='{html.escape(name)}' src='data:image/png;base64,{data}'>"
                     f"<figcaption><b>{html.escape(path.name)}</b> {html.escape(notes.get(name, ''))}"
                     "</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts)
