"""`fecbench report THIS.sqlite --against OTHER.sqlite`: two campaigns of one design side by side (issue 60), so
that a results changelog line can show what moved between two versions of a stack or of fecbench.

What the section adds to THIS campaign's report, into the same folder and page:

- ``versions-ratio-ecdf.png`` (``-vs-BASE`` per baseline, as the report's own ratio figures): per compared label,
  the ECDF of its per-run DCT ratio ``label / baseline`` (``ratios.pairs``: runs on the same point, loss seed and
  size) in THIS campaign (solid) and in OTHER (dashed), one colour per size;
- ``versions-change-ecdf.png``: per label, the ECDF over run keys of THIS ÷ OTHER, each run of THIS against the
  run of OTHER with the same key and loss seed (``campaign_change.key_pairs``: the pairs `fecbench compare`
  takes its paired change from; flagged and failed runs left out and counted, timeouts censored);
- a table of both (per label and size: the median per-run ratio in each campaign, the median change by key)
  and one sentence per label and size saying it, first on the page; what changed between the two campaigns
  (``campaign_provenance``: software, builds, kernel, machine) as a table.

The two must be campaigns of one design: some run key in common, or the same design name; otherwise a
UserError (exit 2).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fecbench.analysis import ratios, results, stats
from fecbench.analysis.studies import campaign_change, campaign_provenance
from fecbench.inputs.errors import UserError

WORKLOADS = ("download", "upload", "reqresp", "page")   # the workloads with a DCT (the report's downloads)
RATIO_NOTE = ("Per-run DCT ratio label / baseline in each campaign (runs on the same point, loss seed and size), "
              "medians over the pairs that finished (a timeout counted as a bound); change by key: the median over "
              "run keys of this campaign's DCT ÷ the other's (same key and loss seed: the pairs of fecbench compare), "
              "flagged and failed runs left out.")


def _names(db: Path, against: Path) -> tuple[str, str]:
    this, other = db.name, against.name
    return (this, other) if this != other else (str(db), str(against))


def check_against(db: Path, against: Path) -> pd.DataFrame:
    """OTHER's runs, or a UserError when it is no results database or not a campaign of THIS one's design (said
    before anything is written)."""
    if not Path(against).is_file():
        raise UserError(f"--against {against}: no such results database")
    other = results.load(against)
    _same_design(db, results.load(db), against, other)
    return other


def _same_design(db: Path, frame: pd.DataFrame, against: Path, other: pd.DataFrame) -> None:
    if other.empty:
        raise UserError(f"--against {against}: no runs recorded")
    if set(frame["key"]) & set(other["key"]):
        return
    names = set(results.campaigns(db)["name"]), set(results.campaigns(against)["name"])
    if not names[0] & names[1]:
        raise UserError(f"--against {against}: not the same design as {db} (no run key in common; designs "
                        f"{', '.join(sorted(names[1]))} and {', '.join(sorted(names[0]))})")


def _median(pairs: pd.DataFrame) -> tuple[str, int]:
    used = pairs[pairs["outcome"] != "excluded"]
    if used.empty:
        return "–", 0
    return stats.describe((float(used["ratio_low"].median()), float(used["ratio_high"].median()))), len(used)


def section(report, db: Path, against: Path, downloads: pd.DataFrame, groups: dict[str, list[str]],
            figure) -> None:
    """Add the side-by-side section to ``report`` (``report.page.Report``): ``downloads`` THIS campaign's runs
    with a DCT, ``groups`` the report's comparisons (baseline -> compared labels), ``figure`` the page's."""
    from fecbench.analysis import figures

    other = check_against(db, against)
    this_name, other_name = _names(db, against)
    provenance = campaign_provenance.side_by_side(campaign_provenance.provenance(against),
                                                  campaign_provenance.provenance(db))
    first: dict[str, pd.DataFrame] = {}   # this section's tables open the page
    first[f"against {other_name}: what changed"] = pd.DataFrame(
        {"": ["≠" if r.differs else "" for r in provenance], "what": [r.name for r in provenance],
         other_name: [r.a for r in provenance], this_name: [r.b for r in provenance]})
    other = other[other["workload"].isin(WORKLOADS)]
    if downloads.empty or other.empty:
        report.headline = {**first, **report.headline}
        report.sentences.insert(0, f"against {other_name}: no runs with a completion time to compare.")
        return
    changes = campaign_change.key_pairs(other, downloads)
    changes = changes[~changes["excluded_why"].astype(str).str.contains("missing")]   # keys of one campaign only
    rows: dict[tuple[str, int], dict[str, object]] = {}
    for base, compared in sorted(groups.items()):
        tag = "" if len(groups) == 1 else f"-vs-{base}"
        sides = []
        for version, frame in ((this_name, downloads), (other_name, other)):
            mine = frame[frame["label"].isin([base, *compared])]
            if base in set(mine["label"]) and len(set(mine["label"])) > 1:
                sides.append(ratios.pairs(mine, baseline=base, metric="dct_ms").assign(version=version))
        if not sides:
            continue
        both = pd.concat(sides, ignore_index=True)
        both.attrs["metric"] = "dct_ms"
        figure(f"versions-ratio-ecdf{tag}", figures.versions_ratio_ecdf(both),
               f"Per-run DCT ratio of each label against {base}: {this_name} (solid) and {other_name} (dashed), "
               "one colour per size.")
        for (label, size), group in both.groupby(["label", "size"], sort=True):
            rows[(label, size)] = {"baseline": base, "here": _median(group[group["version"] == this_name]),
                                   "there": _median(group[group["version"] == other_name])}
    for (label, size), group in changes.groupby(["group_label", "size"], sort=True):
        rows.setdefault((label, size), {})["change"] = _median(group)
    table, said = [], []
    for (label, size), row in sorted(rows.items(), key=lambda item: (str(item[0][0]), item[0][1])):
        base, none = row.get("baseline", "–"), ("–", 0)
        (here, n_here), (there, n_there), (change, n_change) = (row.get(k, none) for k in ("here", "there", "change"))
        table.append({"label": label, "baseline": base, "size": figures.format_size(size),
                      f"median ratio, {this_name}": here, "pairs": n_here, f"median ratio, {other_name}": there,
                      "pairs ": n_there, f"DCT {this_name} ÷ {other_name} by key": change, "keys": n_change})
        said.append(f"against {other_name}: {label} at {figures.format_size(size)}: DCT here ÷ there by run key "
                    f"{change} ({n_change} keys)" + (f"; median per-run ratio {label} / {base} {here} here "
                                                     f"({n_here} pairs), {there} there ({n_there})" if n_here or n_there
                                                     else "") + ".")
    if not changes.empty:
        plot = changes.assign(label=changes["group_label"], baseline=changes["group_label"] + f" in {other_name}")
        plot.attrs["metric"] = "dct_ms"
        figure("versions-change-ecdf", figures.ratio_ecdf(
            plot, title=f"DCT of each run in {this_name} ÷ the run of {other_name} with the same key and loss seed"),
            f"ECDF over run keys of the DCT in {this_name} divided by the DCT of the same key in {other_name}; "
            "below 1: faster here. Runs left out (flagged, failed) and timeouts (bounds) are counted per panel.")
    if table:
        name = f"against {other_name}: per-run ratios in both campaigns"
        first[name] = pd.DataFrame(table)
        report.notes[name] = RATIO_NOTE
    report.headline = {**first, **report.headline}
    report.sentences[:0] = said
