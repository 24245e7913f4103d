"""The pack's page: ``<results>/<pack>/index.html`` opens on the verdict table (a column per profile:
verdict, the statistic with its anytime-valid interval and level, the looks taken, why the claim
stopped), each claim linking to its section: source and quote, what was measured (and what the
anytime-valid interval is about, where that differs), and its figure drawn beside the paper's values
(left: the statistic with its anytime-valid interval per profile, the fixed-sample bootstrap interval
thin and grey, the claim's threshold or band and the paper's value; right: what it was computed
from). ``verdicts.json`` and ``verdicts.csv`` beside it hold the same table for scripts.
"""

from __future__ import annotations

import base64
import html
import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from fecbench.host.paths import slug
from fecbench.verdicts.evaluate import (
    AT_THRESHOLD,
    NOT_JUDGED,
    NOT_RUNNABLE,
    Verdict,
    expectation,
    paper_text,
    table,
)
from fecbench.verdicts.pack import Claim, Pack
from fecbench.verdicts.sequential import ALPHA
from fecbench.verdicts.statistics.error_control import FAMILY_WISE, level_text

COLOURS = {"holds": "#1a7f37", "fails": "#cf222e", AT_THRESHOLD: "#0969da", "inconclusive": "#9a6700",
           NOT_JUDGED: "#8250df", NOT_RUNNABLE: "#57606a"}


def describe(claim: Claim) -> str:
    text = claim.stat.describe(claim.params, claim.label, claim.baseline)
    if claim.stat.one_label:
        return f"{text} ({claim.metric}; label {claim.label})"
    at = "".join(f", at {k} = {v:g}" for k, v in claim.baseline_at.items())
    return f"{text} ({claim.metric}; label {claim.label}, baseline {claim.baseline}{at})"


def claim_figure(claim: Claim, verdicts: list[Verdict], path: Path) -> Path:
    from matplotlib.figure import Figure  # here: a reproduction that never draws need not import it

    fig = Figure(figsize=(10, 3.4))
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.3]})
    names = [v.profile for v in verdicts]
    for y, v in enumerate(verdicts):
        e, s = v.estimate, v.sequence
        if e is not None and e.has_interval and not math.isnan(e.value):
            value = _finite(e.value)
            left.errorbar([value], [y - 0.15], xerr=[[value - _finite(e.low)], [_finite(e.high) - value]],
                          fmt=".", ms=2, lw=0.8, capsize=2, color="#999")
        if s is None or math.isnan(s.value):
            left.text(0.02, y, f"{v.profile}: no anytime-valid value", transform=left.get_yaxis_transform(),
                      va="center")
            continue
        value = _finite(s.value)
        lo, hi = min(_finite(s.low), value), max(_finite(s.high), value)
        left.errorbar([value], [y], xerr=[[value - lo], [hi - value]], fmt="o", capsize=4, color=COLOURS[v.verdict])
    if claim.compare == "approx":
        left.axvspan(claim.threshold - claim.tolerance, claim.threshold + claim.tolerance, color="#ddf4ff",
                     label=f"claim: {expectation(claim)}")
    else:
        left.axvline(claim.threshold, color="#444", ls="--", label=f"claim: {expectation(claim)}")
        if claim.tolerance > 0:
            left.axvspan(claim.threshold - claim.tolerance, claim.threshold + claim.tolerance, color="#eeeeee",
                         label=f"at the threshold: ± {claim.tolerance:g}")
    if claim.paper_value is not None:
        left.plot([claim.paper_value], [len(verdicts) - 0.5], "*", ms=12, color="#8250df",
                  label=f"paper: {claim.paper_value:.3g}")
    left.set_yticks(range(len(names)), names)
    left.set_ylim(-0.7, len(names) - 0.2)
    left.set_xlabel("statistic, anytime-valid interval (grey: fixed-sample bootstrap)")
    left.legend(fontsize=7, loc="best", frameon=False)
    _samples(right, claim, verdicts)
    fig.suptitle(f"{claim.id}: {claim.text}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    return path


def _finite(value: float) -> float:
    return value if math.isfinite(value) else (1e6 if value > 0 else -1e6)


def _samples(ax: Any, claim: Claim, verdicts: list[Verdict]) -> None:
    """What the statistic was computed from, per profile: ECDFs of ratios or values, or the trend."""
    drawn = False
    for v in verdicts:
        samples = v.estimate.samples if v.estimate is not None else {}
        if "factor" in samples and len(samples["factor"]):
            ax.plot(samples["factor"], np.clip(samples["block_ratio"], 1e-3, 1e3), "o", ms=3, label=v.profile)
            ax.set_xlabel(str(claim.params.get("factor")))
            ax.set_ylabel(f"ratio of medians per block of {claim.params.get('min_seeds', 3)} seeds")
            drawn = True
            continue
        for key in ("ratio", "point_ratio", "block_ratio", "label", "baseline"):
            values = np.sort(np.asarray(samples.get(key, []), dtype=float))
            values = values[~np.isnan(values)]
            if values.size:
                shown = np.clip(values, None, np.nanmax(values[np.isfinite(values)]) * 1.5
                                if np.isfinite(values).any() else 1.0)
                ax.step(shown, np.arange(1, values.size + 1) / values.size, where="post",
                        label=f"{v.profile}: {key} ({values.size})")
                drawn = True
        ax.set_ylabel("ECDF")
        per = " per point" if "point_ratio" in samples else " per block" if "block_ratio" in samples else " per pair"
        ax.set_xlabel(f"{claim.metric}: label and baseline" if "label" in samples
                      else f"{claim.metric} of {claim.label}{per}" if claim.stat.one_label
                      else f"{claim.metric} ratio {claim.label} ÷ {claim.baseline}{per}")
    if claim.printed:
        text = "paper printed:\n" + "\n".join(f"{k} = {val:g}" for k, val in claim.printed.items())
        ax.text(1.02, 1.0, text, transform=ax.transAxes, fontsize=7, va="top")
    line = claim.stat.figure_line(claim.params)
    if line is not None and drawn:
        ax.axvline(line, color="#444", lw=0.8)
    if drawn:
        ax.legend(fontsize=7, frameon=False)
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)


def write(pack: Pack, names: list[str], verdicts: list[Verdict], targets: dict, outdir: Path, *,
          ran: list | None = None, budget: float | None = None, full: bool = False, rule: str = FAMILY_WISE) -> Path:
    """The page, its figures and verdicts.json / verdicts.csv in ``outdir``; the page's path. ``rule``: how the
    verdicts shared the page's α (``error_control``), which the page names."""
    import matplotlib

    matplotlib.use("Agg")
    outdir.mkdir(parents=True, exist_ok=True)
    frame = table(verdicts, names)
    frame.to_csv(outdir / "verdicts.csv", index=False)
    (outdir / "verdicts.json").write_text(json.dumps([{
        "claim": v.claim.id, "profile": v.profile, "verdict": v.verdict, "reason": v.reason, "stopped": v.stopped,
        "looks": v.looks, "level": 1 - v.alpha, "error_rule": rule, "statistic": v.claim.statistic, "audit": v.audit,
        "estimand": v.claim.stat.estimand_text,
        "value": None if v.sequence is None else _json(v.sequence.value),
        "cs": None if v.sequence is None else [_json(v.sequence.low), _json(v.sequence.high)],
        "n": None if v.sequence is None else v.sequence.n,
        "bootstrap_value": None if v.estimate is None else _json(v.estimate.value),
        "bootstrap_ci": None if v.estimate is None else [_json(v.estimate.low), _json(v.estimate.high)],
        "paper": v.claim.paper_value, "expected": expectation(v.claim),
        "subset": pack.chosen_text() or None} for v in verdicts], indent=1))
    figures = {}
    for claim in pack.claims:
        mine = [v for v in verdicts if v.claim.id == claim.id]
        if any(v.verdict != NOT_RUNNABLE for v in mine):
            figures[claim.id] = claim_figure(claim, mine, outdir / "figures" / f"{slug(claim.id)}.png")
    path = outdir / "index.html"
    path.write_text(_html(pack, names, verdicts, targets, figures, ran or [], budget, full, rule), encoding="utf-8")
    return path


def _looked(v: Verdict) -> str:
    return (f"{v.looks} look(s), stopped: {v.stopped}" + (f"; drift check: {v.drift}" if v.drift else "")
            + (f"; audit: {v.audit}" if v.audit else ""))


def _level(verdicts: list[Verdict], pack: Pack, names: list[str], rule: str) -> str:
    """The page's one statement of its error level, for the rule it used (``error_control``)."""
    alpha = min((v.alpha for v in verdicts), default=ALPHA)
    decided = sum(v.verdict in ("holds", "fails", AT_THRESHOLD) for v in verdicts)
    text = level_text(rule, ALPHA, pack.judgeable * len(names), alpha, decided)
    why = (f" The pack's rule (pack.toml): {pack.error_reason}" if rule == pack.error and pack.error_reason
           else "" if rule == pack.error else " Chosen with --error (the pack's own rule: "
           f"{pack.error}{': ' + pack.error_reason if pack.error_reason else ''}).")
    return f"<p><b>Error level.</b> {html.escape(subset_text(pack, names))}{text}{html.escape(why)}</p>"


def subset_text(pack: Pack, names: list[str]) -> str:
    """What a page of a subset of the pack's claims (``Pack.subset``) says before its error level: which claims, and
    that α is split over them alone; "" for the whole pack."""
    chosen = pack.chosen_text()
    if not chosen:
        return ""
    n = pack.judgeable
    per = f" in each of {len(names)} profiles" if len(names) > 1 else ""
    return (f"A subset: {chosen}; α split over the {n} of them that can take a verdict{per}, not over the pack's "
            f"claims, so these verdicts are the subset's and say nothing of the claims left out. ")


def hosts_text(targets: dict, budget: float | None) -> str:
    """Where the campaigns' runs ran (runs.host: one host, or a Dask cluster's worker hosts) and the machine time
    they took across those hosts; a budget is wall time, which H hosts turn into about H times as much machine
    time (designs/README.md, "Many hosts")."""
    from fecbench.analysis import results

    seconds: dict[str, float] = {}
    for target in targets.values():
        if target.db.exists():
            for host, duration in results.rows(target.db, "runs", ["host", "duration_s"]):
                if host and duration:
                    seconds[host] = seconds.get(host, 0.0) + duration
    if not seconds:
        return "No run has run yet."
    spent = sum(seconds.values())
    text = (f"The runs ran on {len(seconds)} host(s) ({', '.join(sorted(seconds))}): "
            f"{spent / 60:.1f} min of machine time across them")
    if budget:
        text += (f"; the budget, {budget / 60:g} min of wall time, buys up to {len(seconds) * budget / 60:g} min of "
                 f"machine time across {len(seconds)} host(s) running one run at a time each (more with several "
                 "workers per host)")
    return text + "."


def database_counts(db: Path) -> str:
    """A campaign database's runs per status, read as `fecbench status` reads them (the one source of counts)."""
    from collections import Counter

    from fecbench.analysis import results

    if not db.exists():
        return "no database yet"
    counts = Counter(status for (status,) in results.rows(db, "runs", ["status"]))
    return f"{sum(counts.values())} runs: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))


def _json(value: float) -> float | str | None:
    if math.isnan(value):
        return None
    return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def _html(pack: Pack, names: list[str], verdicts: list[Verdict], targets: dict, figures: dict[str, Path],
          ran: list, budget: float | None, full: bool, rule: str) -> str:
    by = {(v.claim.id, v.profile): v for v in verdicts}
    run_text = "--full" if full else (f"--budget {budget / 60:g}m" if budget else "evaluation of the databases only")
    parts = [*_head(pack, names, verdicts, targets, budget, rule, run_text), *_verdicts_table(pack, names, by),
             *_profiles(pack, names), *_campaigns(targets, ran), *_claims(pack, names, by, figures),
             "</body></html>"]
    return "\n".join(parts)


def _head(pack: Pack, names: list[str], verdicts: list[Verdict], targets: dict, budget: float | None, rule: str,
          run_text: str) -> list[str]:
    """The page's head and its opening: the pack, how it ran, the hosts, the level verdicts are at."""
    esc = html.escape
    return [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{esc(pack.title)}</title><style>"
            "body{font-family:sans-serif;max-width:1250px;margin:2em auto;padding:0 1em;color:#222}"
            "table{border-collapse:collapse;font-size:.85em;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;"
            "padding:.25em .5em;vertical-align:top}th{background:#f2f2f2}.v{font-weight:bold;color:#fff;"
            "border-radius:3px;padding:0 .3em}blockquote{color:#555;border-left:3px solid #ccc;margin:.5em 0;"
            "padding-left:.8em}img{max-width:100%}p.small{font-size:.85em;color:#555}</style></head><body>",
            f"<h1>{esc(pack.title)}{esc(f' ({pack.chosen_text()})' if pack.chosen else '')}</h1>",
            f"<p>Pack <code>{esc(pack.name)}</code> ({esc(run_text)}); profiles: {esc(', '.join(names))} "
            f"(default {esc(pack.default_profile)}). Generated "
            f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}.</p>",
            f"<p>{esc(hosts_text(targets, budget))}</p>",
            _level(verdicts, pack, names, rule)]


def _verdicts_table(pack: Pack, names: list[str], by: dict) -> list[str]:
    """Verdicts: one row per claim, one column per profile, and how to read them."""
    esc = html.escape
    parts = ["<h2>Verdicts</h2><table><tr><th>claim</th><th>statement</th><th>expected</th>"
             "<th>the paper's value</th>" + "".join(f"<th>profile {esc(n)}</th>" for n in names) + "</tr>"]
    for claim in pack.claims:
        cells = []
        for name in names:
            v = by.get((claim.id, name))
            if v is None:
                cells.append("<td>–</td>")
                continue
            cells.append(f"<td><span class='v' style='background:{COLOURS[v.verdict]}'>{esc(v.verdict)}</span> "
                         f"{esc(v.interval_text())}<br><span class='small'>{esc(_looked(v))}<br>"
                         f"{esc(v.reason)}</span></td>")
        parts.append(f"<tr><td><a href='#{esc(slug(claim.id))}'>{esc(claim.id)}</a></td><td>{esc(claim.text)}</td>"
                     f"<td>{esc(expectation(claim))}</td><td>{esc(paper_text(claim))}</td>{''.join(cells)}</tr>")
    parts.append("</table><p class='small'>Each interval is a confidence sequence (reproduce/README.md, "
                 "\"Verdicts you can stop on\"): valid however often it is looked at, at the level stated above. "
                 "holds / fails: it lies on the claim's side of its threshold (inside the band for ≈) / entirely "
                 "on the other side; at the threshold: inside threshold ± tolerance, which no budget would move; "
                 "inconclusive: it straddles the threshold; not judged: the data break an assumption the interval "
                 "rests on (exclusions that differ between the two sides, or data that changed while they came). "
                 "Stopped: why the claim took no more runs (decided, at threshold, budget, not runnable, no "
                 "sequential test, no units left). Drift check: the claim's first half of draws against its "
                 "second.</p>")
    return parts


def _profiles(pack: Pack, names: list[str]) -> list[str]:
    """Profiles: what each changes in the designs, and its sources."""
    esc = html.escape
    parts = ["<h2>Profiles</h2><ul>"]
    for name in names:
        profile = pack.profiles[name]
        overrides = ", ".join([f"{k} = {v}" for k, v in profile.set.items()] + [f"no {k}" for k in profile.unset])
        parts.append(f"<li><b>{esc(name)}</b>{' (default)' if name == pack.default_profile else ''}: "
                     f"{esc(profile.description)} <i>{esc(overrides or 'the designs as they are')}</i>"
                     + "".join(f"<br><span class='small'>source: {esc(s)}</span>" for s in profile.sources)
                     + "</li>")
    return parts


def _campaigns(targets: dict, ran: list) -> list[str]:
    """Campaigns: per profile and design, the runs started this time, the database now, how to resume."""
    esc = html.escape
    parts = ["</ul><h2>Campaigns</h2><table><tr><th>profile</th><th>design</th><th>runs started this time "
             "(their outcomes)</th><th>the database now (as fecbench status counts it)</th>"
             "<th>minutes (estimated)</th><th>resume or complete with</th></tr>"]
    done = {(r.target.profile, r.target.alias): r for r in ran}
    for key, target in targets.items():
        r = done.get(key)
        what = "none"
        if r:
            what = f"{r.selected} chosen" + (f" + {r.reruns} re-run(s) of flagged runs" if r.reruns else "") + (
                ": " + ", ".join(f"{k} {n}" for k, n in sorted(r.counts.items())) if r.counts else "")
            if r.out_of_time:
                what += f"; {r.out_of_time} left pending (budget)"
            if r.stopped:
                what += "; stopped at the budget's end"
        minutes = f"{r.seconds / 60:.1f} ({r.estimated / 60:.1f})" if r else "–"
        parts.append(f"<tr><td>{esc(key[0])}</td><td>{esc(key[1])}</td><td>{esc(what)}</td>"
                     f"<td>{esc(database_counts(target.db))}</td><td>{minutes}</td>"
                     f"<td><code>{esc(target.resume_command())}</code></td></tr>")
    return parts


def _claims(pack: Pack, names: list[str], by: dict, figures: dict[str, Path]) -> list[str]:
    """Claims: each with its passage, its statistic, its verdict per profile and its figure."""
    esc = html.escape
    parts = ["</table><h2>Claims</h2>"]
    for claim in pack.claims:
        src = claim.source
        parts.append(f"<h3 id='{esc(slug(claim.id))}'>{esc(claim.id)}: {esc(claim.text)}</h3>"
                     f"<p>{esc(pack.papers[src.paper])}, {esc(src.section)}"
                     f"{', ' + esc(src.figure) if src.figure else ''}:</p><blockquote>{esc(src.quote)}</blockquote>"
                     f"<p>Statistic: {esc(describe(claim))}; expected {esc(expectation(claim))}; "
                     f"where {esc(json.dumps(claim.where))}; design <code>{esc(claim.design)}</code>."
                     + (f" Margin ± {claim.tolerance:g}: {esc(claim.tolerance_source)}." if claim.tolerance else "")
                     + "</p>" + (f"<p class='small'>Reading: {esc(claim.note)}</p>" if claim.note else ""))
        for name in names:
            v = by.get((claim.id, name))
            if v is not None:
                parts.append(f"<p class='small'>{esc(name)}: <b>{esc(v.verdict)}</b> {esc(v.interval_text())} "
                             f"({esc(_looked(v))}; fixed-sample bootstrap 95 %: {esc(v.bootstrap_text())}) — "
                             f"{esc(v.reason)}</p>")
        if claim.id in figures:
            data = base64.b64encode(figures[claim.id].read_bytes()).decode("ascii")
            parts.append(f"<img alt='{esc(claim.id)}' src='data:image/png;base64,{data}'>")
    return parts
