"""Each claim against its passage (reproduce/README.md, "Fidelity"): what the paper says, what is judged, and the
setup it is judged on, read from the pack's own data (the design file, the default profile, the claim), so the
table reports setups, never a default "as the paper".

A claim's setup record (``setup``): the stacks of its two labels with their arguments under the pack's default
profile (a label map followed), its sizes, the link of its cells (each factor's values, with units, at the design
points it keeps), the loss model and the directions it drops in, the runs a loss-class filter keeps and what
decides a run's class, how many runs stand for a point (the statistic's unit), what its statistic estimates (a
mean where the passage states an average, or the proxy it is judged through and why), what the paper dropped (the
claim's ``dropped``; "the paper states none" without one), the design's time limit against the time a run without
FEC is expected to take at the claim's cells (``runners.experiment.checks``: the share of those runs the limit cuts
off, or why it is not checked), and a share's tie margin with its source (``statistics.ties``). Every field is
filled for every claim of a present design (``tests/test_reproduce_claims.py``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import tomllib

from fecbench.verdicts.draws import claim_points, space_of
from fecbench.verdicts.pack import Claim, Pack

FIELDS = ("stack", "sizes", "link", "loss", "loss classes", "runs per point", "estimand", "the paper dropped",
          "time limit", "ties")


@dataclass
class Setup:
    stack: str
    sizes: str
    link: str
    loss: str
    classes: str
    runs: str
    estimand: str
    dropped: str
    limit: str
    ties: str

    def fields(self) -> tuple[str, ...]:
        return (self.stack, self.sizes, self.link, self.loss, self.classes, self.runs, self.estimand, self.dropped,
                self.limit, self.ties)

    def text(self) -> str:
        return "; ".join(f"{name}: {value}" for name, value in zip(FIELDS, self.fields(), strict=True))


def _size(value: Any) -> str:
    size = int(value)
    for unit, factor in (("MiB", 2 ** 20), ("MB", 10 ** 6), ("kB", 1000)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) else str(value)


def _link(claim: Claim, prepared: Any, factors: dict[str, Any]) -> str:
    """Each factor's values at the design points the claim keeps (with the design's unit), as the runs apply them."""
    points = [prepared.points[p] for p in claim_points(claim, space_of(prepared))]
    if not points:
        return "no design point kept"
    parts = []
    for name in points[0]:
        values = sorted({v for point in points for v in [point[name]]}, key=lambda v: (isinstance(v, str), v))
        spec = factors.get(name)
        unit = f" {spec['unit']}" if isinstance(spec, dict) and "unit" in spec else ""
        shown = ", ".join(_number(v) for v in values[:6]) + (f", … ({len(values)} values)" if len(values) > 6 else "")
        parts.append(f"{name} {shown}{unit}")
    return f"{len(points)} point(s): " + "; ".join(parts)


def _stack(pack: Pack, claim: Claim, impls: list[dict]) -> str:
    profile = pack.profiles.get(pack.default_profile)
    judged = profile.judged(claim) if profile is not None else claim
    parts = []
    for label in (judged.label, judged.baseline):
        impl = next((i for i in impls if i.get("label") == label), None)
        if impl is None:
            parts.append(f"{label} (not in the design)")
            continue
        args = dict(impl.get("args", {}))
        if profile is not None and (profile.labels is None or label in profile.labels):
            args.update(profile.set)
            for name in profile.unset:
                args.pop(name, None)
        shown = ", ".join(f"{k}={v}" for k, v in sorted(args.items())) or "its defaults"
        parts.append(f"{label} = {impl.get('name', '?')} ({shown})")
    return " ÷ ".join(parts) + (f" [profile {pack.default_profile}]" if profile is not None else "")


def _runs(claim: Claim) -> str:
    stat = claim.stat
    seeds = int(claim.params.get("min_seeds", 3))
    if stat.census:
        return f"every point on as many seeds as its own interval needs ({seeds} a round)"
    if stat.needs_points:
        return f"a block of {seeds} seed(s) per draw of a point" + (" (two points a draw)"
                                                                   if stat.points_per_observation == 2 else "")
    return "one seed per draw of a uniformly random cell" + (", each side's runs unpaired" if stat.reads != "pairs"
                                                             else "")


def _classes(claim: Claim) -> str:
    """Which runs a loss-class filter keeps, and what decides a run's class (``analysis.traces.data_loss``)."""
    kept = [f"{'both runs of a pair' if key == 'loss_class' else 'the baseline run'} in {' or '.join(classes)}"
            for key in ("loss_class", "baseline_class") if (classes := claim.where.get(key))]
    if not kept:
        return "no filter: every run of its cells"
    return (f"{'; '.join(kept)} ({claim.params.get('loss_direction', 'any')} direction), a run classed by the "
            "datagrams that carried the transfer's data (the sender's qlog matched to its dropper's records: no "
            "handshake, acknowledgement, repair or stats exchange); a run that cannot be classed so widens the "
            "interval as an unknown value")


def _estimand(claim: Claim) -> str:
    """What the statistic estimates, and whether the passage states an average (judged as one, or through a proxy)."""
    stat = claim.stat
    if "mean_cap" in claim.params:
        return (f"{stat.estimand_text} (a restricted mean, c = {claim.params['mean_cap']:g}: the passage states an "
                f"average; the cap: {claim.params['mean_cap_source']})")
    if stat.means:
        return f"{stat.estimand_text} (a mean: the passage states an average)"
    if claim.average_proxy:
        return f"{stat.estimand_text} (a proxy of the average the passage states: {claim.average_proxy})"
    return f"{stat.estimand_text} (the passage states no average)"


def _limit(claim: Claim, path: str) -> str:
    """The design's timeout_s against the expected time of the runs without FEC at the claim's lossy cells."""
    from fecbench.runners.experiment import checks

    prepared = _prepared(path)

    design = prepared.design
    head = f"timeout_s {design.timeout_s:g} s"
    if design.workload.kind == "messages":
        return f"{head} (a messages run lasts its {design.workload.duration:g} s)"
    if design.loss.model not in (checks.CHECKED_LOSS_MODEL, "none"):
        return (f"{head}; the baseline's expected time not checked ({design.loss.model} losses: the duration model "
                "was not compared with runs under them)")
    points = set(claim_points(claim, space_of(prepared)))
    sizes = {s for s in claim.sizes() or [] if isinstance(s, int)}
    expected = [seconds for (point, size), seconds in _expected_baseline(path).items()
                if point in points and (not sizes or size in sizes)]
    if not expected:
        return f"{head}; no lossy cell: at least {checks.SAFE_MULTIPLE:g}× each run's least duration (fecbench run)"
    worst = max(expected)
    share = checks.cut_off_share(design.timeout_s, worst)
    shown = "under 0.01 %" if share < 1e-4 else f"about {100 * share:.2g} %"
    seconds = f"{worst:.3g}" if worst < 100 else f"{worst:.0f}"
    return (f"{head}; without FEC expected at most {seconds} s at its lossy cells, so {shown} of those runs "
            "reach the limit")


def _ties(claim: Claim) -> str:
    """A share claim's tie margin and its source (``statistics.ties``); what other statistics do with equal values."""
    if not claim.stat.shares:
        return "not a share: no pair is counted as a win"
    return (f"a ratio within {100 * claim.params['tie_margin']:.3g} % of 1 is a tie, never a hit "
            f"({claim.params['tie_margin_source']})")


@functools.lru_cache(maxsize=64)
def _expected_baseline(path: str) -> dict[tuple[int, int | None], float]:
    """A design's expected baseline times per lossy cell (``checks.expected_baseline_s``), once per design."""
    from fecbench.runners.experiment import checks

    return checks.expected_baseline_s(_prepared(path))


@functools.lru_cache(maxsize=64)
def _prepared(path: str) -> Any:
    """A design's points, planned as a campaign plans them (unbuilt implementations allowed)."""
    from fecbench.runners.experiment.prepare import prepare

    return prepare(path, require_built=False)


def setup(pack: Pack, claim: Claim) -> Setup | None:
    """The claim's setup record, from its design file (None while the design is absent)."""
    ref = pack.designs.get(claim.design)
    if ref is None or not ref.present:
        return None
    design = tomllib.loads(ref.path.read_text())
    prepared = _prepared(str(ref.path))
    link = _link(claim, prepared, design.get("space", {}).get("factors", {}))
    loss = design.get("loss", {})
    directions = loss.get("directions", ["forward", "reverse"])
    model = loss.get("model", "none")
    loss_text = f"{model} on {' and '.join(directions)} (forward: client → server)" if model != "none" else "none"
    sizes = claim.sizes() or design.get("workload", {}).get("sizes") or []
    size_text = ", ".join(_size(s) if not isinstance(s, str) else s for s in sizes) or "the workload's"
    return Setup(_stack(pack, claim, design.get("impl", [])), size_text, link, loss_text, _classes(claim), _runs(claim),
                 _estimand(claim), claim.dropped or "the paper states none", _limit(claim, str(ref.path)), _ties(claim))


def fidelity_table(packs: list[Pack]) -> str:
    """Every claim of ``packs`` as a reader of the papers checks it: its quote (at most 20 words), what is judged
    (statistic, comparison, where), its reading (its note) and its setup record, as one Markdown table."""
    rows = ["| pack | claim | the paper says | judged | reading | setup here |", "|---|---|---|---|---|---|"]
    for pack in packs:
        for c in pack.claims:
            words = c.source.quote.split()
            quote = " ".join(words[:20]) + (" …" if len(words) > 20 else "")
            expected = (f"≈ {c.threshold:g} ± {c.tolerance:g}" if c.compare == "approx"
                        else f"{c.compare} {c.threshold:g}")
            where = ", ".join(f"{k} {v}" for k, v in c.where.items())
            base = c.baseline + (" at " + ", ".join(f"{k} = {v:g}" for k, v in c.baseline_at.items())
                                 if c.baseline_at else "")
            sides = c.label if c.stat.one_label else f"{c.label} ÷ {base}"
            judged = f"{c.statistic} ({c.metric}, {sides}{', ' + where if where else ''}) {expected}"
            record = setup(pack, c)
            reading = c.note or (f"not judged here: {c.needs}" if c.needs else "the passage as it reads")
            cells = [pack.name, c.id, f"{c.source.section} {c.source.figure}: “{quote}”", judged, reading,
                     record.text() if record else f"design absent: {c.needs or 'not in this checkout'}"]
            rows.append("| " + " | ".join(cell.replace("|", "/").replace("\n", " ") for cell in cells) + " |")
    return "\n".join(rows)
