"""A reproduction pack: the designs a paper's experiments run on, the stack profiles, and the claims.

A pack is a folder ``reproduce/<name>/`` with two files (format: ``reproduce/README.md``):

- ``pack.toml``: ``[pack]`` (name, title, default profile), ``[papers.<id>]`` (the sources claims cite),
  ``[designs]`` (alias → design file; a design another issue still has to add is declared with
  ``needs`` and its claims are "not runnable here" until the file exists) and ``[profiles.<name>]``
  (argument overrides applied to the designs' labels: the paper's stack, today's defaults, …);
- ``claims.toml``: ``[[claim]]``, every quantitative statement of the paper the harness can test: its
  source (paper, section, figure, quote), the statistic, the comparison and threshold, the paper's
  printed numbers.

Everything is checked when the pack loads, against the design files themselves (labels, sizes,
factors), without building or running anything; a mistake is a SpecError naming the file and key.
A subset of its claims (``Pack.subset``: ``fecbench reproduce PACK --claims 'fig5-*'``) is a pack with fewer claims,
the same designs and profiles, and a record of how it was chosen.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from fecbench.host.paths import REPO_ROOT
from fecbench.inputs.directions import CLASS_DIRECTIONS
from fecbench.inputs.errors import SpecError, UserError
from fecbench.inputs.specs import Section, load_toml
from fecbench.runners.experiment.design import parse_size, resolve_path
from fecbench.verdicts import statistics
from fecbench.verdicts.statistics import ties
from fecbench.verdicts.statistics.error_control import FAMILY_WISE, RULES

PACKS_DIR = REPO_ROOT / "reproduce"

#: The claim statistics (``statistics.REGISTRY``): the choices of a claim's ``statistic``.
STATISTICS = statistics.NAMES
COMPARISONS = ("<", ">", "approx")
LOSS_CLASSES = ("no loss", "loss", "tail loss")
METRICS = ("dct_ms", "client_wall_ms", "file_e2e_ms", "bytes_app", "bytes_sent", "rebuffering_ms", "messages_late",
           "messages_corrupt", "coding_overhead")


@dataclass
class Source:
    paper: str
    section: str
    figure: str
    quote: str


@dataclass
class Claim:
    id: str
    text: str
    design: str
    statistic: str
    label: str
    baseline: str
    metric: str
    where: dict[str, Any]
    compare: str
    threshold: float
    tolerance: float
    source: Source
    params: dict[str, Any] = field(default_factory=dict)
    paper_value: float | None = None
    paper_text: str = ""
    printed: dict[str, float] = field(default_factory=dict)
    needs: str | None = None          # what a claim needs that this checkout lacks (set at load)
    tolerance_source: str = ""        # where its margin (tolerance) comes from
    note: str = ""                    # how it reads its passage, and what of the paper's setup differs
    dropped: str = ""                 # what the paper left out of its results (its setup record: ``fidelity``)
    # the average its passage states, judged through another statistic as a proxy: which average, and why no mean
    average_proxy: str = ""
    # the baseline's run at another point: the claim's point with these factors set (one label across two points)
    baseline_at: dict[str, float] = field(default_factory=dict)

    @property
    def stat(self) -> statistics.ClaimStatistic:
        """The claim's statistic, the object that answers everything about it."""
        return statistics.get(self.statistic)

    def sizes(self) -> list[int] | None:
        return self.where.get("size")


@dataclass
class Profile:
    name: str
    description: str
    sources: list[str]
    set: dict[str, str]
    unset: list[str]
    labels: list[str] | None          # None: every label whose implementation declares the argument
    label_map: dict[str, str] = field(default_factory=dict)   # a claim's label → the design label judged here

    def judged(self, claim: Claim) -> Claim:
        """The claim as this profile judges it: its labels through ``label_map`` (e.g. the paper's own code's
        labels in place of fecq's)."""
        if not self.label_map:
            return claim
        import dataclasses

        return dataclasses.replace(claim, label=self.label_map.get(claim.label, claim.label),
                                   baseline=self.label_map.get(claim.baseline, claim.baseline))


@dataclass
class DesignRef:
    alias: str
    path: Path
    needs: str | None                 # the design is another issue's: what it needs while it is absent
    labels: list[str] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    factors: list[str] = field(default_factory=list)
    workload: str = ""

    @property
    def present(self) -> bool:
        return self.path.is_file()


@dataclass
class Pack:
    name: str
    title: str
    dir: Path
    papers: dict[str, str]
    designs: dict[str, DesignRef]
    profiles: dict[str, Profile]
    default_profile: str
    claims: list[Claim]
    smoke: bool = False               # a pack for CI (listed apart)
    cites_papers: bool = True         # its claims cite papers (a seed file), not a check of the procedure
    chosen: tuple[str, ...] = ()      # a subset's ``--claims`` values (``subset``); (): the whole pack
    whole: int = 0                    # a subset's: the claims of the whole pack
    error: str = FAMILY_WISE          # how its page's verdicts share α unless --error says (``error_control``)
    error_reason: str = ""            # why the pack chose that rule (pack.toml ``error_reason``)

    def error_rule(self, asked: str | None) -> tuple[str, str]:
        """The rule the page uses and why: ``--error`` where given, else the pack's choice with its reason."""
        if asked is not None:
            return asked, "chosen with --error"
        return self.error, self.error_reason or "the default"

    @property
    def judgeable(self) -> int:
        """The claims that can take a verdict here: those not runnable here (``needs``, fixed by the pack before any
        run) take none, so they can be no false verdict and take no share of the page's α."""
        return sum(1 for claim in self.claims if not claim.needs)

    def profile(self, name: str) -> Profile:
        if name not in self.profiles:
            raise UserError(f"--profile {name!r}: pack {self.name} has no such profile "
                            f"(allowed: {', '.join(self.profiles)})")
        return self.profiles[name]

    def subset(self, patterns: list[str] | tuple[str, ...]) -> Pack:
        """The pack with only the claims ``patterns`` choose (``--claims``: each a claim id or a shell-style glob,
        ``fnmatch``), in the pack's order; its designs and profiles unchanged. Everything downstream reads
        ``claims``, so the runs, the verdicts, the page's rows and its error level (α split over the chosen claims
        only) are the subset's; ``chosen`` and ``whole`` say so (``chosen_text``). A value that matches no claim is
        a UserError listing the pack's claim ids. No patterns: the pack itself."""
        patterns = tuple(dict.fromkeys(patterns))
        if not patterns:
            return self
        ids = [c.id for c in self.claims]
        for pattern in patterns:
            if not any(_chooses(pattern, cid) for cid in ids):
                raise UserError(f"--claims {pattern!r}: no claim of pack {self.name} is {pattern!r} or matches it "
                                f"(a claim id or a shell-style pattern such as 'fig5-*'; its claims: "
                                f"{', '.join(ids)})")
        kept = [c for c in self.claims if any(_chooses(p, c.id) for p in patterns)]
        return replace(self, claims=kept, chosen=self.chosen + patterns, whole=self.whole or len(self.claims))

    def chosen_text(self) -> str:
        """What a subset's verdicts say wherever they are shown, e.g. "12 of 33 claims chosen with --claims
        'fig5-*'"; "" for the whole pack."""
        if not self.chosen:
            return ""
        return (f"{len(self.claims)} of {self.whole} claims chosen with "
                + " ".join(f"--claims {shlex.quote(p)}" for p in self.chosen))

    def campaign_designs(self) -> dict[str, DesignRef]:
        """The designs a reproduction prepares and runs: all of the pack's; a subset's, those its claims are on (so
        that ``--full`` runs no design no chosen claim reads)."""
        if not self.chosen:
            return self.designs
        used = {c.design for c in self.claims}
        return {alias: ref for alias, ref in self.designs.items() if alias in used}


def _chooses(pattern: str, claim_id: str) -> bool:
    """Whether a ``--claims`` value chooses a claim: its id, or a shell-style pattern it matches (case-sensitive)."""
    return pattern == claim_id or fnmatchcase(claim_id, pattern)


def pack_names(root: Path = PACKS_DIR) -> list[str]:
    return sorted(p.name for p in root.iterdir() if (p / "pack.toml").is_file()) if root.is_dir() else []


def load_pack(name_or_dir: str | Path, root: Path = PACKS_DIR) -> Pack:
    """The pack ``reproduce/<name>/`` (or a folder holding pack.toml and claims.toml), fully checked."""
    folder = Path(name_or_dir)
    if not (folder / "pack.toml").is_file():
        folder = root / str(name_or_dir)
    if not (folder / "pack.toml").is_file():
        raise UserError(f"no reproduction pack {str(name_or_dir)!r} (packs: {', '.join(pack_names(root)) or 'none'})")
    top = Section.load(folder / "pack.toml")
    head = top.section("pack", required=True)
    name = head.get("name", str, folder.name)
    title = head.get("title", str)
    default = head.get("default_profile", str)
    smoke = head.get("smoke", bool, False)
    error = head.get("error", str, FAMILY_WISE, choices=RULES)
    error_reason = head.get("error_reason", str, "")
    if "error" in head.data and not error_reason.strip():
        raise head.error("error_reason", "a pack that chooses its error rule says why (error_reason = \"...\")")
    head.done()
    papers_section = top.section("papers", required=True)
    papers, files = {}, []
    for paper_id in papers_section.data:
        paper = papers_section.section(paper_id)
        papers[paper_id] = paper.get("cite", str)
        files.append(paper.get("file", str, ""))
        paper.done()
    papers_section.done()
    designs = _designs(top.section("designs", required=True), folder / "pack.toml")
    profiles = _profiles(top.section("profiles", required=True), designs)
    if default not in profiles:
        raise head.error("default_profile", f"unknown profile {default!r}", list(profiles))
    top.done()
    claims = load_claims(folder / "claims.toml", papers, designs)
    return Pack(name=name, title=title, dir=folder, papers=papers, designs=designs, profiles=profiles,
                default_profile=default, claims=claims, smoke=smoke, cites_papers=any(files), error=error,
                error_reason=error_reason)


def _designs(section: Section, file: Path) -> dict[str, DesignRef]:
    out = {}
    for alias, value in section.data.items():
        section.get(alias, (str, dict))
        if isinstance(value, str):
            ref = DesignRef(alias, resolve_path(value, file), None)
        else:
            entry = section.section(alias)
            ref = DesignRef(alias, resolve_path(entry.get("path", str), file), entry.get("needs", str, None))
            entry.done()
        if ref.present:
            _describe(ref)
        elif ref.needs is None:
            raise section.error(alias, f"design file {ref.path} not found (a design still to come needs "
                                "`needs = \"what it waits for\"`)")
        out[alias] = ref
    if not out:
        raise section.error(None, "a pack needs at least one design")
    return out


def _describe(ref: DesignRef) -> None:
    """The labels, sizes, factors and workload of a design file, read without building anything."""
    data = load_toml(ref.path)
    ref.labels = [str(i.get("label", i.get("name"))) for i in data.get("impl", [])]
    workload = data.get("workload", {})
    ref.workload = str(workload.get("kind", "download"))
    ref.sizes = [parse_size(s, ref.path, "workload.sizes") for s in workload.get("sizes", [])]
    factors = data.get("space", {}).get("factors", {})
    ref.factors = []
    for fname, spec in factors.items():
        if isinstance(spec, dict) and spec.get("per_path"):
            ref.factors += [f"{fname}_1", f"{fname}_2"]
        else:
            ref.factors.append(fname)


def _profiles(section: Section, designs: dict[str, DesignRef]) -> dict[str, Profile]:
    out = {}
    for name in section.data:
        entry = section.section(name)
        values = entry.get("set", dict, {})
        bad = [k for k, v in values.items() if not isinstance(v, str)]
        if bad:
            raise entry.error("set", f"argument {bad[0]!r}: values are strings, as in a design's args")
        unset = entry.get("unset", list, [])
        labels = entry.get("labels", list, None)
        known = {label for ref in designs.values() for label in ref.labels}
        if labels is not None and (missing := [lbl for lbl in labels if lbl not in known]):
            raise entry.error("labels", f"no design of the pack has label {missing[0]!r}", sorted(known))
        label_map = entry.get("label_map", dict, {})
        if bad := [f"{k} = {v}" for k, v in label_map.items() if k not in known or v not in known]:
            raise entry.error("label_map", f"{bad[0]}: maps a claim's label to a design label, both of the pack's "
                              "designs", sorted(known))
        out[name] = Profile(name=name, description=entry.get("description", str),
                            sources=entry.get("sources", list, []), set=dict(values), unset=list(unset),
                            labels=labels, label_map={str(k): str(v) for k, v in label_map.items()})
        entry.done()
    if not out:
        raise section.error(None, "a pack needs at least one profile (its default: the paper's stack)")
    return out


def load_claims(path: Path, papers: dict[str, str], designs: dict[str, DesignRef]) -> list[Claim]:
    return claims_of(Section.load(path), papers, designs)


def claims_of(top: Section, papers: dict[str, str], designs: dict[str, DesignRef]) -> list[Claim]:
    """The ``[[claim]]`` tables of a claims file (already read), each checked."""
    claims: list[Claim] = []
    for entry in top.sections("claim", required=True):
        claim = _claim(entry, papers, designs)
        if any(c.id == claim.id for c in claims):
            raise entry.error("id", f"duplicate claim id {claim.id!r}")
        claims.append(claim)
    top.done()
    return claims


def _claim(entry: Section, papers: dict[str, str], designs: dict[str, DesignRef]) -> Claim:
    claim_id = entry.get("id", str)
    design = entry.get("design", str, choices=list(designs))
    ref = designs[design]
    statistic = entry.get("statistic", str, choices=STATISTICS)
    label = entry.get("label", str)
    one_label = statistics.get(statistic).one_label
    baseline = entry.get("baseline", str, label) if one_label else entry.get("baseline", str)
    if one_label and baseline != label:
        raise entry.error("baseline", f"{statistic} reads the label's own runs: it has no baseline (leave it out)")
    default_metric = "dct_ms" if ref.workload in ("download", "upload", "reqresp", "page", "") else "bytes_app"
    metric = entry.get("metric", str, default_metric, choices=METRICS)
    compare = entry.get("compare", str, choices=COMPARISONS)
    threshold = float(entry.get("threshold", float))
    tolerance = float(entry.get("tolerance", float, 0.0, min=0.0))
    if compare == "approx" and tolerance <= 0:
        raise entry.error("tolerance", "compare = \"approx\" needs a tolerance > 0 (value ≈ threshold ± tolerance)")
    tolerance_source = entry.get("tolerance_source", str, "")
    if tolerance > 0 and not tolerance_source.strip():
        raise entry.error("tolerance_source", "a tolerance needs its source: where the margin comes from (the "
                          "figure's readable resolution, a tolerance the paper states, a 'no difference' point)")
    src = entry.section("source", required=True)
    source = Source(paper=src.get("paper", str, choices=list(papers)), section=src.get("section", str),
                    figure=src.get("figure", str, ""), quote=src.get("quote", str))
    src.done()
    stat = statistics.get(statistic)
    params = _params(entry, stat, ref)
    # A flow claim's labels are the competing flows' (issue #26), not the design's [[impl]] labels.
    where = _where(entry, ref, *((label, baseline) if stat.reads != statistics.FLOWS else (None, None)))
    paper_value = entry.get("paper", float, None)
    printed = entry.get("printed", dict, {})
    if any(not isinstance(v, (int, float)) or isinstance(v, bool) for v in printed.values()):
        raise entry.error("printed", "the paper's printed numbers are numbers (name = value)")
    claim = Claim(id=claim_id, text=entry.get("text", str), design=design, statistic=statistic, label=label,
                  baseline=baseline, metric=metric, where=where, compare=compare, threshold=threshold,
                  tolerance=tolerance, source=source, params=params,
                  paper_value=None if paper_value is None else float(paper_value),
                  paper_text=entry.get("paper_text", str, ""), printed={k: float(v) for k, v in printed.items()},
                  tolerance_source=tolerance_source, note=entry.get("note", str, ""),
                  dropped=entry.get("dropped", str, ""), average_proxy=entry.get("average_proxy", str, ""),
                  needs=entry.get("needs", str, None), baseline_at=_baseline_at(entry, ref, stat))
    if label == baseline and not claim.baseline_at and not one_label:
        raise entry.error("baseline", f"the claim compares {label!r} with itself at the same points: name another "
                          "label, or the baseline's point (baseline_at = {{ factor = value }})")
    if claim.average_proxy and stat.means:
        raise entry.error("average_proxy", f"{statistic} judges a mean: it is no proxy (leave average_proxy out)")
    if "mean_cap" in params and params["mean_cap"] <= threshold + tolerance:
        raise entry.error("mean_cap", f"a restricted mean capped at {params['mean_cap']:g} can never be above the "
                          f"threshold's band ({threshold:g} + {tolerance:g}): set the cap above what the claim "
                          "compares, where few blocks reach it")
    if "mean_cap_source" in params and not params["mean_cap_source"].strip():
        raise entry.error("mean_cap_source", "a restricted mean's cap needs its source: why this cap, fixed before "
                          "any run")
    entry.done()
    if not ref.present:
        claim.needs = f"{ref.path.relative_to(REPO_ROOT) if ref.path.is_relative_to(REPO_ROOT) else ref.path} " \
                      f"({ref.needs})"
    return claim


def _params(entry: Section, stat: statistics.ClaimStatistic, ref: DesignRef) -> dict[str, Any]:
    """Every claim's keys (``min_seeds``, ``loss_direction``) and the statistic's own (``stat.params``)."""
    params: dict[str, Any] = {"min_seeds": entry.get("min_seeds", int, 3, min=1, max=1000)}
    params.update(stat.read_params(entry, ref.factors if ref.present else None))
    if stat.shares:
        params["tie_margin"], params["tie_margin_source"] = ties.read(entry)
    params["loss_direction"] = entry.get("loss_direction", str, "any", choices=CLASS_DIRECTIONS)
    return params


def _baseline_at(entry: Section, ref: DesignRef, stat: statistics.ClaimStatistic) -> dict[str, float]:
    """Where the baseline's run is when it is not at the claim's own point: factor = value, each a number (e.g.
    QUIC at 3 % loss against QUIC at 0 %: label = baseline = "quic", where = { p = 0.03 }, baseline_at = { p = 0 })."""
    section = entry.section("baseline_at")
    out: dict[str, float] = {}
    for key in section.data:
        if ref.present and key not in ref.factors:
            raise section.error(key, f"design {ref.path.name} has no factor {key!r}", ref.factors)
        out[key] = float(section.get(key, float))
    section.done()
    if out and stat.reads == statistics.FLOWS:
        raise entry.error("baseline_at", "a competing-flows claim's two sides are its flows' points already")
    return out


def _where(entry: Section, ref: DesignRef, label: str | None, baseline: str | None) -> dict[str, Any]:
    if ref.present:
        for key, name in (("label", label), ("baseline", baseline)):
            if name is not None and name not in ref.labels:
                raise entry.error(key, f"design {ref.path.name} has no label {name!r}", ref.labels)
    section = entry.section("where")
    where: dict[str, Any] = {}
    for key, value in section.data.items():
        if key == "size":
            values = value if isinstance(value, list) else [value]
            sizes = [parse_size(v, section.file, section.key("size")) for v in values]
            if ref.present and (missing := [s for s in sizes if s not in ref.sizes]):
                raise section.error("size", f"design {ref.path.name} has no size {missing[0]} B", ref.sizes)
            where["size"] = sizes
        elif key in ("loss_class", "baseline_class"):
            values = value if isinstance(value, list) else [value]
            if bad := [v for v in values if v not in LOSS_CLASSES]:
                raise section.error(key, f"unknown loss class {bad[0]!r}", LOSS_CLASSES)
            where[key] = list(values)
        else:
            if ref.present and key not in ref.factors:
                raise section.error(key, f"design {ref.path.name} has no factor {key!r}", ref.factors + ["size"])
            where[key] = _factor_filter(section, key, value)
        section.get(key)
    section.done()
    return where


def _factor_filter(section: Section, key: str, value: Any) -> Any:
    """A number (equal), a list of numbers (any of them), or a table {min, max} (inclusive bounds)."""
    if isinstance(value, dict):
        bounds = Section(value, section.file, section.key(key))
        low = bounds.get("min", float, -math.inf)
        high = bounds.get("max", float, math.inf)
        bounds.done()
        return {"min": float(low), "max": float(high)}
    values = value if isinstance(value, list) else [value]
    if not values or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
        raise SpecError(section.file, section.key(key), f"bad filter {value!r}",
                        "a number, a list of numbers, or {min = …, max = …}")
    return [float(v) for v in values]
