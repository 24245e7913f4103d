"""Which label each label is compared with: within its own implementation, changing one thing at a time.

A label's baseline is the design's explicit `baseline = "label"` of its `[[impl]]`, else:
- a label with FEC (its implementation's code argument, the first of its descriptor's `fec_args`, is not
  `none`): the label of the same implementation whose FEC arguments are absent or `none` and whose other
  arguments are the same (FEC the only difference), else none;
- a label without FEC: the report's default baseline (single path, or `quic`) when that is a label of the
  same implementation, else none.
So ratios and headline sentences never pair two implementations (the cross-stack table does, on purpose).
Read from what each campaign recorded (its settings); campaigns recorded before the implementations' FEC
arguments were: arguments whose name holds "fec".
"""

from __future__ import annotations

import json
from typing import Any

from fecbench.analysis import results
from fecbench.analysis.results import DbLike
from fecbench.records import db as dbmod


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


def _fec_args(impl: dict[str, Any]) -> list[str]:
    declared = impl.get("fec_args")
    return list(declared) if declared is not None else sorted(k for k in impl.get("args", {}) if "fec" in k)


def has_fec(impl: dict[str, Any]) -> bool:
    fec = _fec_args(impl)
    return bool(fec) and str(impl.get("args", {}).get(fec[0], "none")) != "none"


def _rest(impl: dict[str, Any]) -> dict[str, Any]:
    fec = set(_fec_args(impl))
    return {k: v for k, v in impl.get("args", {}).items() if k not in fec}


def baselines(impls: dict[str, dict[str, Any]], default: str | None) -> dict[str, str | None]:
    """label -> the label it is compared with (None: none within its implementation)."""
    out: dict[str, str | None] = {}
    for label, impl in impls.items():
        if impl.get("baseline"):
            out[label] = impl["baseline"]
        elif has_fec(impl):
            twins = [other for other, o in impls.items() if other != label and o.get("name") == impl.get("name")
                     and not has_fec(o) and _rest(o) == _rest(impl)]
            out[label] = twins[0] if twins else None
        else:
            same = default is not None and default != label and impls.get(default, {}).get("name") == impl.get("name")
            out[label] = default if same else None
    return out


def comparisons(impls: dict[str, dict[str, Any]], present: list[str], default: str | None,
                explicit: str | None = None) -> tuple[dict[str, list[str]], list[str]]:
    """The report's comparisons among the labels `present`: baseline -> its compared labels, and the labels
    left unpaired. `explicit` (fecbench report --baseline): every label against it, as the user asked."""
    if explicit is not None:
        return {explicit: sorted(set(present) - {explicit})}, []
    groups: dict[str, list[str]] = {}
    unpaired = []
    chosen = baselines({k: v for k, v in impls.items() if k in present}, default)
    for label in sorted(present):
        base = chosen.get(label)
        if base is not None and base in present:
            groups.setdefault(base, []).append(label)
        elif label not in chosen.values() and label != default:
            unpaired.append(label)
    return groups, unpaired
