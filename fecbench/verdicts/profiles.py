"""Stack profiles: a pack's designs with a profile's argument overrides, as ordinary design files.

A profile (``[profiles.<name>]`` of a pack) sets or removes implementation arguments on the designs'
labels: the paper's stack (windows, whether repairs count against the window, the recovery signal),
today's defaults, ... An argument is changed only on labels whose implementation declares it (tquic
has no ``repair_cc``), and only on the profile's ``labels`` when it names some.

Each (profile, design) becomes a design file of its own, ``<results>/<pack>/<profile>/<design>.toml``
(the design renamed ``<design>.<profile>``, a header saying where it comes from), with its database
beside it: an ordinary campaign that ``fecbench run FILE --db DB`` resumes and ``fecbench report DB``
reports. The labels stay the design's, so every profile is compared on the same claims.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from fecbench.host.paths import REPO_ROOT, RESULTS_DIR
from fecbench.inputs.specs import load_toml
from fecbench.runners.experiment.descriptor import find_descriptor
from fecbench.runners.experiment.design import resolve_path
from fecbench.verdicts.pack import DesignRef, Pack, Profile

DEFAULT_ROOT = RESULTS_DIR / "reproduce"


@dataclass
class Target:
    """One campaign of a pack: a design under a profile, its design file and database."""
    profile: str
    alias: str
    design: Path
    db: Path

    def resume_command(self) -> str:
        return f"fecbench run {_short(self.design)} --db {_short(self.db)}"


def _short(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def apply(data: dict[str, Any], profile: Profile, design_path: Path) -> dict[str, Any]:
    """The design's TOML data with the profile's overrides on its [[impl]] args (a new dict)."""
    out = {section: (dict(value) if isinstance(value, dict) else value) for section, value in data.items()}
    impls = []
    for entry in data.get("impl", []):
        entry = dict(entry)
        label = str(entry.get("label", entry.get("name")))
        if profile.labels is None or label in profile.labels:
            declared = _declared(str(entry["name"]), data, design_path)
            args = dict(entry.get("args", {}))
            args.update({k: v for k, v in profile.set.items() if k in declared})
            for key in profile.unset:
                args.pop(key, None)
            entry["args"] = args
        impls.append(entry)
    out["impl"] = impls
    return out


def _declared(name: str, data: dict[str, Any], design_path: Path) -> set[str]:
    dirs = [resolve_path(p, design_path) for p in data.get("design", {}).get("impl_dirs", [])]
    return set(find_descriptor(name, dirs, file=design_path, key="impl.name").args)


def target(pack: Pack, profile: Profile, ref: DesignRef, root: Path = DEFAULT_ROOT) -> Target:
    folder = root / pack.name / profile.name
    stem = ref.path.stem
    return Target(profile=profile.name, alias=ref.alias, design=folder / f"{stem}.toml", db=folder / f"{stem}.sqlite")


def write(pack: Pack, profile: Profile, ref: DesignRef, root: Path = DEFAULT_ROOT) -> Target:
    """Write the profile's version of a design (unchanged when its content is the same) and return it."""
    where = target(pack, profile, ref, root)
    data = apply(load_toml(ref.path), profile, ref.path)
    design = dict(data["design"])
    design["name"] = f"{design.get('name', ref.path.stem)}.{profile.name}"
    # Paths stay as written when they resolve the same from the new file's folder, else become absolute.
    for key in ("topology", "schedule"):
        if key in design:
            design[key] = _portable(str(design[key]), ref.path, where.design)
    if "impl_dirs" in design:
        design["impl_dirs"] = [_portable(str(p), ref.path, where.design) for p in design["impl_dirs"]]
    data["design"] = design
    header = "\n".join([
        f"# Written by `fecbench reproduce {pack.name}` from {_relative(ref.path)}, profile {profile.name!r}:",
        *[f"# {line}" for line in _wrap(profile.description)],
        *[f"# source: {s}" for s in profile.sources],
        f"# Resume or complete: {where.resume_command()}", ""])
    text = header + "\n" + tomli_w.dumps(data)
    where.design.parent.mkdir(parents=True, exist_ok=True)
    if not where.design.exists() or where.design.read_text() != text:
        where.design.write_text(text)
    return where


def _portable(value: str, original: Path, new: Path) -> str:
    before = resolve_path(value, original)
    return value if resolve_path(value, new) == before else str(before)


def _relative(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def _wrap(text: str, width: int = 100) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + ([line] if line else [])
