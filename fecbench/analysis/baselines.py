"""Which label each label is compared with: within its own implementation, changing one thing at a time.

A label calls for up to two comparisons (``twins``), each with a label of its **own implementation**:
- its **no-FEC twin**, when it has FEC (its implementation's code argument, the first of its descriptor's
  `fec_args`, is set and not `none`): the label whose FEC arguments are absent or `none` and whose every other
  argument is the same, multipath setting and paths included;
- its **single-path twin**, when it runs multipath (argument `multipath = "on"`): the label with multipath off,
  the same FEC code, and every argument it sets set to the same value in the multipath label (a multipath label
  adds its own: scheduler, paths, where repairs go); of several, the one setting the most (two equally close:
  none, said so).
A label with neither (no FEC, single path) is compared with the report's default baseline when that is
another label of its implementation, without FEC and on a single path too. The design's `baseline = "LABEL"`
of an `[[impl]]` replaces one of these: the single-path twin when the label runs multipath and LABEL does
not, else the no-FEC twin (or the default). A comparison that cannot be made says why (`Comparison.why`),
never a silent gap; ratios and headline sentences never pair two implementations unasked (the cross-stack
table does, on purpose, by FEC family: `family`).
Read from what each campaign recorded (its settings); campaigns recorded before the implementations' FEC
arguments were: arguments whose name holds "fec".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fecbench.analysis import results
from fecbench.analysis.results import DbLike
from fecbench.records import db as dbmod

#: The kinds of comparison: against the no-FEC twin, the single-path twin, the report's default baseline.
FEC, SINGLE_PATH, DEFAULT = "no-FEC twin", "single-path twin", "default baseline"


@dataclass(frozen=True)
class Comparison:
    """One comparison a label calls for: ``baseline`` (None: it cannot be made) and ``why`` (how it was
    chosen, or why there is none); ``named``: the design's own ``baseline``."""
    label: str
    kind: str
    baseline: str | None
    why: str
    named: bool = False


def recorded_impls(db: DbLike) -> dict[str, dict[str, Any]]:
    """label -> {name, args, fec_args?, baseline?}: each label's implementation and arguments as its runs
    recorded them, with what the campaigns' settings add (the newest campaign wins)."""
    settings = "settings_json" in results.table_columns(db, "campaigns")
    rows = [(row[0], row[1]) if settings else (None, row[0]) for row in results.rows(
        db, "campaigns", ["settings_json", "design_text"] if settings else ["design_text"], order_by=["id"])]
    runs = list({label: (label, impl, args) for label, impl, args in results.rows(
        db, "runs", ["label", "impl", "impl_args"], order_by=["label"])}.values())
    impls: dict[str, dict[str, Any]] = {label: {"name": impl, "args": json.loads(args or "{}")}
                                        for label, impl, args in runs}
    for settings_json, design_text in rows:
        for label, recorded in (dbmod.campaign_settings(settings_json, design_text).get("impls") or {}).items():
            impls.setdefault(label, {}).update(recorded)
    return impls


def from_runs(runs: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """label -> {name, args} from a runs frame's ``impl`` and ``impl_args`` (no recorded FEC arguments: those
    whose name holds "fec"); prefer ``recorded_impls(db)`` where the database is at hand."""
    out: dict[str, dict[str, Any]] = {}
    for row in runs.drop_duplicates("label").itertuples(index=False):
        try:
            args = json.loads(row.impl_args) if isinstance(row.impl_args, str) and row.impl_args else {}
        except ValueError:
            args = {}
        out[str(row.label)] = {"name": row.impl, "args": args if isinstance(args, dict) else {}}
    return out


def _fec_args(impl: dict[str, Any]) -> list[str]:
    declared = impl.get("fec_args")
    return list(declared) if declared is not None else sorted(k for k in impl.get("args", {}) if "fec" in k)


def code(impl: dict[str, Any]) -> str:
    """The label's FEC code argument as written (``rs:30,20``, ``rs``, ``none``)."""
    fec = _fec_args(impl)
    return str(impl.get("args", {}).get(fec[0], "none")) if fec else "none"


def has_fec(impl: dict[str, Any]) -> bool:
    return code(impl) != "none"


def family(impl: dict[str, Any]) -> str | None:
    """The FEC code's family as every stack spells it (fecq ``rs:30,20``, XQUIC ``rs``: ``rs``; ``xor:4``:
    ``xor``; ``rlc:…``: ``rlc``), None without FEC."""
    return code(impl).split(":")[0].split(",")[0].strip().lower() if has_fec(impl) else None


def is_multipath(impl: dict[str, Any]) -> bool:
    """Whether a label's arguments ask for multipath (the descriptors' shared ``multipath`` argument)."""
    return str(impl.get("args", {}).get("multipath", "off")) == "on"


def _rest(impl: dict[str, Any]) -> dict[str, Any]:
    """The arguments but the FEC ones, multipath off written as absent."""
    fec = set(_fec_args(impl))
    return {k: v for k, v in impl.get("args", {}).items()
            if k not in fec and not (k == "multipath" and str(v) == "off")}


def _differs(a: dict[str, Any], b: dict[str, Any]) -> str:
    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return ", ".join(f"{k} {a.get(k, '(unset)')} against {b.get(k, '(unset)')}" for k in keys)


def _implied_too(impl: dict[str, Any], other: dict[str, Any]) -> str:
    """What else two labels differ in as their stack runs them (``implied`` in the campaign's record: values its
    descriptor's [[implies]] set, e.g. XQUIC's backup_fec scheduler with FEC), as a clause of a comparison's why."""
    def used(entry: dict[str, Any]) -> dict[str, Any]:
        return {**entry.get("args", {}), **{k: v["value"] for k, v in (entry.get("implied") or {}).items()}}

    mine, theirs = used(impl), used(other)
    names = sorted(k for k in set(impl.get("implied") or {}) | set(other.get("implied") or {})
                   if mine.get(k) != theirs.get(k))
    if not names:
        return ""
    why = "; ".join(dict.fromkeys(v["why"] for e in (impl, other) for k, v in (e.get("implied") or {}).items()
                                  if k in names))
    return "; as the stack runs them they differ in " + ", ".join(
        f"{k} {mine.get(k, '(unset)')} against {theirs.get(k, '(unset)')}" for k in names) + f" too ({why})"


def fec_twin(label: str, impls: dict[str, dict[str, Any]]) -> Comparison:
    """A FEC label's no-FEC twin (see above)."""
    impl = impls[label]
    name = impl.get("name")
    mine = [o for o, other in impls.items() if o != label and other.get("name") == name and not has_fec(other)]
    twins = [o for o in mine if _rest(impls[o]) == _rest(impl)]
    if len(twins) == 1:
        return Comparison(label, FEC, twins[0], f"the {name} label without FEC and the same other arguments"
                          + _implied_too(impl, impls[twins[0]]))
    why = (f"no {name} label without FEC" if not mine else
           f"no {name} label without FEC and the same other arguments (closest: " + "; ".join(
               f"{o} differs in {_differs(_rest(impl), _rest(impls[o]))}" for o in mine[:3]) + ")")
    return Comparison(label, FEC, None, why)


def single_path_twin(label: str, impls: dict[str, dict[str, Any]]) -> Comparison:
    """A multipath label's single-path twin (see above)."""
    impl = impls[label]
    name, args = impl.get("name"), impl.get("args", {})
    single = [o for o, other in impls.items() if other.get("name") == name and not is_multipath(other)
              and code(other) == code(impl)]
    fits = [o for o in single if all(args.get(k) == v for k, v in impls[o].get("args", {}).items()
                                     if k != "multipath")]
    closest = sorted(fits, key=lambda o: -len(impls[o].get("args", {})))
    if closest and (len(closest) == 1 or len(impls[closest[0]]["args"]) > len(impls[closest[1]]["args"])):
        return Comparison(label, SINGLE_PATH, closest[0], f"the {name} label with the same FEC arguments and "
                          "multipath off" + _implied_too(impl, impls[closest[0]]))
    if closest:
        return Comparison(label, SINGLE_PATH, None, f"{name} labels with the same FEC arguments and multipath off "
                          f"equally close: {', '.join(closest)} (name one: baseline = \"LABEL\")")
    detail = "; ".join(f"{o} differs in {_differs(args, impls[o].get('args', {}))}" for o in single[:3])
    return Comparison(label, SINGLE_PATH, None, f"no {name} label with the same FEC arguments and multipath off"
                      + (f" (closest: {detail})" if detail else ""))


def twins(impls: dict[str, dict[str, Any]], default: str | None = None) -> list[Comparison]:
    """Every comparison each label calls for, in label order (see above)."""
    out: list[Comparison] = []
    for label in sorted(impls):
        impl = impls[label]
        mine = ([fec_twin(label, impls)] if has_fec(impl) else []) + \
            ([single_path_twin(label, impls)] if is_multipath(impl) else [])
        if not mine:
            other = impls.get(default, {}) if default not in (None, label) else {}
            same = bool(other) and other.get("name") == impl.get("name") and not has_fec(other) \
                and is_multipath(other) == is_multipath(impl)
            mine = [Comparison(label, DEFAULT, default, "the report's default baseline")] if same else []
        named = impl.get("baseline")
        if named:
            kind = SINGLE_PATH if is_multipath(impl) and not is_multipath(impls.get(named, {})) else \
                FEC if has_fec(impl) else DEFAULT
            mine = [c for c in mine if c.kind != kind] + [Comparison(label, kind, named, "named in the design",
                                                                      named=True)]
        out += sorted(mine, key=lambda c: c.kind)
    return out


def baselines(impls: dict[str, dict[str, Any]], default: str | None) -> dict[str, str | None]:
    """label -> its first comparison's baseline (None: none within its implementation)."""
    out: dict[str, str | None] = {label: None for label in impls}
    for comparison in reversed(twins(impls, default)):
        out[comparison.label] = comparison.baseline if comparison.baseline is not None else out[comparison.label]
    return out


def of_kind(comparisons: list[Comparison], kind: str) -> dict[str, str]:
    """label -> baseline of the comparisons of one kind that can be made (e.g. ``SINGLE_PATH``)."""
    return {c.label: c.baseline for c in comparisons if c.kind == kind and c.baseline is not None}


def comparisons(impls: dict[str, dict[str, Any]], present: list[str], default: str | None,
                explicit: str | None = None) -> tuple[dict[str, list[str]], list[str]]:
    """The report's comparisons among the labels `present`: baseline -> its compared labels, and a sentence
    for each comparison that cannot be made, saying why. `explicit` (fecbench report --baseline): every label
    against it, as the user asked."""
    if explicit is not None:
        return {explicit: sorted(set(present) - {explicit})}, []
    groups: dict[str, list[str]] = {}
    missing = []
    chosen = twins({k: v for k, v in impls.items() if k in present}, default)
    for c in chosen:
        if c.baseline is not None and c.baseline in present:
            groups.setdefault(c.baseline, []).append(c.label)
        elif c.baseline is not None:
            missing.append(f"{c.label}: its {c.kind} {c.baseline} has no runs of this workload to compare it with.")
        else:
            missing.append(f"{c.label}: not compared with a {c.kind.replace(' twin', '')} label: {c.why} (set "
                           "baseline = \"LABEL\" in its [[impl]] to compare it with another).")
    compared = {c.label for c in chosen} | {c.baseline for c in chosen}
    missing += [f"{label}: compared with nothing: it has no FEC, runs single path, and no other "
                f"{impls.get(label, {}).get('name')} label differs from it in FEC or multipath alone."
                for label in sorted(present) if label not in compared and label in impls]
    return {base: sorted(set(labels)) for base, labels in groups.items()}, missing


def table(impls: dict[str, dict[str, Any]], present: list[str], default: str | None) -> pd.DataFrame:
    """Every comparison among ``present`` as the report lists it: label, kind, baseline (– none) and why."""
    rows = [{"label": c.label, "compared with": c.baseline or "–", "as its": c.kind, "why": c.why}
            for c in twins({k: v for k, v in impls.items() if k in present}, default)]
    return pd.DataFrame(rows, columns=["label", "compared with", "as its", "why"])


BASELINES_NOTE = ("Every comparison the headline makes, within one implementation: a FEC label against its no-FEC "
                  "twin (every other argument the same, multipath and paths included), a multipath label against "
                  "its single-path twin (same FEC code, multipath off); a comparison that cannot be made says why "
                  "(– : none). A design names another with baseline = \"LABEL\" in the label's [[impl]].")


def compared_pairs(runs: pd.DataFrame, impls: dict[str, dict[str, Any]], default: str | None,
                   explicit: str | None = None, metric: str = "dct_ms") -> tuple[pd.DataFrame, list[str]]:
    """The report's comparisons as one frame of ``ratios.pairs`` (what the notebooks read): each label against its
    own stack's twins, or every label against ``explicit``. With more than one baseline each pair's ``label`` is
    "LABEL ÷ BASE", so that a label compared twice (with FEC and multipath: its no-FEC and its single-path twin)
    stays two rows of every table and figure. Also the sentences of the comparisons that cannot be made."""
    from fecbench.analysis import ratios

    groups, missing = comparisons(impls, sorted(set(runs["label"])), default, explicit)
    frames = []
    for base, labels in sorted(groups.items()):
        pairs = ratios.pairs(runs[runs["label"].isin([base, *labels])], baseline=base, metric=metric)
        frames.append(pairs.assign(label=pairs["label"] + " ÷ " + base) if len(groups) > 1 else pairs)
    if len(frames) == 1:
        return frames[0], missing
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), missing
