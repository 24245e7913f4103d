"""What a stack's arguments imply beyond their own argv: a descriptor's ``[[implies]]`` tables.

A stack may do more with an option than its argv says: XQUIC's test programs schedule multipath FEC with their
``backup_fec`` scheduler (data on the first path, repairs on the others) whatever ``scheduler`` says. The
descriptor states it::

    [[implies]]
    when = { fec = ["xor", "rs", "pm"], multipath = ["on"] }   # every argument holds one of its values
    set = { scheduler = "backup_fec" }                          # what the stack then uses
    why = "its test programs schedule multipath FEC with backup_fec"

The arguments a label runs with stay as written (its keys and argv); the values implications change (``implied``)
are what the dry run shows, the campaign records (``implied`` in its settings' impls) and the report compares, so
that a FEC label's no-FEC twin that differs in the scheduler too says so. A design that writes a value an
implication overrides is refused (the stack would not use it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fecbench.inputs.errors import SpecError
from fecbench.inputs.specs import Section


@dataclass(frozen=True)
class Implication:
    when: dict[str, tuple[str, ...]]   # argument -> the values that bring the implication in (all arguments hold)
    sets: dict[str, str]               # argument -> the value the stack then uses
    why: str

    def holds(self, args: dict[str, Any]) -> bool:
        return all(str(args.get(name)) in values for name, values in self.when.items())

    def condition(self) -> str:
        return ", ".join(f"{name} {'/'.join(values)}" for name, values in self.when.items())


def parse(top: Section, path: Path, declared: set[str]) -> list[Implication]:
    """The descriptor's ``[[implies]]`` tables, each naming declared arguments only."""
    out = []
    for entry in top.sections("implies"):
        when, sets = entry.get("when", dict), entry.get("set", dict)
        for key, table in (("when", when), ("set", sets)):
            unknown = sorted(set(table) - declared)
            if unknown or not table:
                raise SpecError(path, entry.key(key), f"names no declared argument ({unknown[0]!r} is none)"
                                if unknown else "is empty: name the arguments", sorted(declared))
        if any(not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v) for v in when.values()):
            raise SpecError(path, entry.key("when"), "each argument takes a list of the values (strings) that "
                            "bring the implication in")
        if any(not isinstance(v, str) for v in sets.values()):
            raise SpecError(path, entry.key("set"), "each argument takes the value (a string) the stack then uses")
        out.append(Implication({k: tuple(v) for k, v in when.items()}, dict(sets), entry.get("why", str)))
        entry.done()
    return out


def implied(implications: list[Implication], args: dict[str, Any]) -> dict[str, dict[str, str]]:
    """argument -> {value, why} for the values an implication changed: what the record (``implied`` in a campaign's
    settings) and the dry run add to the arguments."""
    return {name: {"value": value, "why": f"{implication.why} (with {implication.condition()})"}
            for implication in implications if implication.holds(args)
            for name, value in implication.sets.items() if str(args.get(name)) != value}


def shown(implications: list[Implication], args: dict[str, Any]) -> str:
    """The arguments as the stack uses them, ``name=value`` each, an implied one with its reason."""
    changed = implied(implications, args)
    return " ".join(f"{name}={changed[name]['value']} [implied: {changed[name]['why']}; not {value}]"
                    if name in changed else f"{name}={value}" for name, value in sorted(args.items()))


def refuse_overridden(implications: list[Implication], written: dict[str, Any], filled: dict[str, Any],
                      stack: str, file: Path | str, key: str) -> None:
    """A written value the stack would not use: an implication that holds sets another."""
    for implication in implications:
        if not implication.holds(filled):
            continue
        for name, value in implication.sets.items():
            if name in written and str(written[name]) != value:
                raise SpecError(file, f"{key}.{name}", f"{stack} does not use {name} = {written[name]!r} with "
                                f"{implication.condition()}: it uses {value!r} ({implication.why}); leave "
                                f"{name} out")
