"""Implementation descriptors (`quic-impls/<name>/impl.toml`): loading, validation, argv templating.

The contract is documented in quic-impls/README.md. Everything a design can get wrong about an
implementation (unknown name, undeclared workload or argument, bad value, missing binary) is a
SpecError before the campaign starts.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fecbench.host.paths import REPO_ROOT
from fecbench.inputs.errors import SpecError, did_you_mean
from fecbench.inputs.specs import Section, load_toml
from fecbench.records.db import METRIC_COLUMNS
from fecbench.runners.experiment import implied
from fecbench.runners.experiment.argv_template import (
    PATH_LISTS,
    PLACEHOLDERS,
    check_template,
    fields,
    render,
)
from fecbench.runners.experiment.capture import CaptureArgs, parse_capture_args

WORKLOADS = ("download", "upload", "reqresp", "messages", "page")
METRIC_SOURCES = ("json", "regex", "measured")
ARG_TARGETS = ("server", "client", "both")

@dataclass
class ArgSpec:
    name: str
    argv: list[str] | dict[str, list[str]]   # a fragment with {value}, or one fragment per value
    to: str
    choices: list[Any] | None = None
    pattern: str | None = None
    default: str | int | float | None = None
    paths: bool = False             # the value is a number of paths: at most the topology's

    def fragment(self, value: object) -> list[str]:
        return self.argv[str(value)] if isinstance(self.argv, dict) else self.argv


@dataclass
class Descriptor:
    name: str
    path: Path                      # the impl.toml
    text: str
    description: str
    binary: str                     # as written
    client_binary: str | None
    version_argv: list[str]
    build: list[list[str]]
    workloads: list[str]
    codes: list[str]
    fec_args: list[str]
    multipath: bool
    args: dict[str, ArgSpec]
    server_argv: list[str]
    server_env: dict[str, str]
    server_setup: list[list[str]]   # argvs run (in the run folder) before the server starts
    server_files: bool
    ready_pattern: str | None
    ready_delay_s: float
    client_argv: dict[str, list[str]]
    client_env: dict[str, str]
    metrics_sources: list[str]      # one or more of METRIC_SOURCES, merged in this order
    metric_patterns: list[str] = field(default_factory=list)
    metric_scale: dict[str, float] = field(default_factory=dict)   # regex metric -> factor
    metric_stream: str = "both"
    required_metrics: list[str] = field(default_factory=list)
    # Typed metrics the stack cannot report (`[metrics] unavailable`): said where a table would show them empty.
    unavailable_metrics: list[str] = field(default_factory=list)
    download_file: str = "{download_path}"
    metric_files: list[str] = field(default_factory=list)   # more text for the patterns, after the client's
    check_argv: list[list[str]] = field(default_factory=list)   # [check] argv: validate arguments first
    capture: CaptureArgs = field(default_factory=CaptureArgs)   # [capture]: how to ask for qlog and keys
    implies: list[implied.Implication] = field(default_factory=list)   # [[implies]]: what arguments imply

    @property
    def dir(self) -> Path:
        return self.path.parent

    def resolve(self, binary: str | None) -> Path | None:
        """A binary's path: absolute, relative to the descriptor folder, or else a bare name on PATH."""
        if binary is None:
            return None
        path = Path(binary) if Path(binary).is_absolute() else self.dir / binary
        if path.is_file() and os.access(path, os.X_OK):
            return path
        if "/" not in binary:
            found = shutil.which(binary)
            return Path(found) if found else None
        return None

    def binaries(self) -> dict[str, Path | None]:
        names = {"binary": self.binary}
        if self.client_binary:
            names["client_binary"] = self.client_binary
        return {key: self.resolve(value) for key, value in names.items()}

    def missing_binaries(self) -> str | None:
        """What is not built, with a command that builds it as printed (from any folder); None: all built."""
        for key, path in self.binaries().items():
            if path is None:
                hint = " && ".join(shlex.join(os.path.normpath(a) if "/" in a else a for a in
                                              render(argv, {"dir": str(self.dir)}, {})) for argv in self.build)
                return (f"implementation {self.name!r}: binary {getattr(self, key)!r} not found or not executable"
                        + (f"; build it with: cd {shlex.quote(str(self.dir))} && {hint}" if hint else ""))
        return None

    def require_binaries(self) -> dict[str, Path]:
        missing = self.missing_binaries()
        if missing is not None:
            raise SpecError(self.path, "impl.binary", missing)
        return self.binaries()  # type: ignore[return-value]

    def validate_args(self, args: dict[str, Any], file: Path | str, key: str) -> dict[str, Any]:
        """Check a design's implementation arguments against the declared ones; fill defaults."""
        for name, value in args.items():
            spec = self.args.get(name)
            if spec is None:
                raise SpecError(file, f"{key}.{name}", f"implementation {self.name!r} has no argument {name!r}: "
                                f"nothing reads it{did_you_mean(name, sorted(self.args))}", sorted(self.args) or "none")
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise SpecError(file, f"{key}.{name}", f"must be a string or a number, got {value!r}")
            if spec.choices is not None and value not in spec.choices:
                raise SpecError(file, f"{key}.{name}", f"unknown value {value!r}{did_you_mean(value, spec.choices)}",
                                spec.choices)
            if spec.pattern is not None and not re.fullmatch(spec.pattern, str(value)):
                raise SpecError(file, f"{key}.{name}",
                                f"value {value!r} does not match {spec.pattern!r} ({self.path})")
        filled = {name: spec.default for name, spec in self.args.items() if spec.default is not None}
        filled.update(args)
        implied.refuse_overridden(self.implies, args, filled, self.name, file, key)
        return filled

    def check_paths(self, args: dict[str, Any], paths: int, file: Path | str, key: str) -> None:
        """A design's arguments against its topology's number of paths: a value whose fragment lists
        the paths ({client_addresses}, {server_addresses}) needs more than one path; a value of an
        argument declared `paths = true` (a number of paths) may not exceed the topology's."""
        for name, value in args.items():
            spec = self.args.get(name)
            if spec is None:
                continue
            used = {f for part in spec.fragment(value) for f in fields(part)} & PATH_LISTS
            if used and paths < 2:
                raise SpecError(file, f"{key}.{name}",
                                f"{name} = {value!r} is multipath (its arguments use "
                                f"{', '.join('{' + u + '}' for u in sorted(used))}) but the topology has "
                                "one path")
            if spec.paths and int(value) > paths:
                raise SpecError(file, f"{key}.{name}",
                                f"{value} paths asked for, the topology has {paths}")

    def arg_lists(self, args: dict[str, Any], values: dict[str, Any] | None = None) -> dict[str, list[str]]:
        """The argv fragments of the implementation arguments, per side, in declaration order.
        Fragments are formatted with the run's placeholder `values` plus {value}."""
        lists: dict[str, list[str]] = {"server_args": [], "client_args": []}
        for name, spec in self.args.items():
            if name not in args:
                continue
            template = spec.fragment(args[name])
            fragment = [part.format_map({**(values or {}), "value": args[name]}) for part in template]
            if spec.to in ("server", "both"):
                lists["server_args"].extend(fragment)
            if spec.to in ("client", "both"):
                lists["client_args"].extend(fragment)
        return lists

    def version(self) -> str:
        """The output of the version command ('' when it cannot run)."""
        values = {"dir": str(self.dir), **{k: str(v) for k, v in self.binaries().items() if v}}
        try:
            argv = render(self.version_argv, values, {})
            out = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
        except (KeyError, OSError, subprocess.TimeoutExpired) as exc:
            return f"unavailable: {exc}"
        return (out.stdout.strip() or out.stderr.strip())[:500]

    def fingerprint(self) -> dict[str, Any]:
        """What a campaign records about this implementation."""
        hashes = {}
        for key, path in self.binaries().items():
            hashes[key] = {"path": str(path) if path else None, "sha256": sha256_file(path) if path else None}
        # qlog_capable: what reading a run of it later needs to know, recorded so that no reader loads today's
        # descriptor to interpret an old database (issue 61).
        return {"descriptor_path": str(self.path), "descriptor": self.text, "version": self.version(),
                "binaries": hashes, "qlog_capable": self.capture.qlog_capable}


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _env(section: Section, file: Path) -> dict[str, str]:
    env = section.get("env", dict, {})
    for key, value in env.items():
        if not isinstance(value, str):
            raise SpecError(file, f"{section.key('env')}.{key}", "must be a string")
        check_template([value], file, f"{section.key('env')}.{key}", PLACEHOLDERS)
    return env


def _arg_argv(a: Section, file: Path, allowed: frozenset[str]) -> tuple[list[str] | dict[str, list[str]], list | None]:
    """An argument's argv: a fragment using {value} (and run placeholders), or a table giving each
    allowed value its own fragment (possibly empty: flags without a value); then the values are its keys."""
    names = allowed | {"value"}
    argv = a.get("argv", (list, dict))
    choices = a.get("choices", list, None)
    if isinstance(argv, list):
        return check_template(argv, file, a.key("argv"), names), choices
    if choices is not None:
        raise SpecError(file, a.key("choices"), "not with an argv table: its keys are the allowed values")
    if not argv:
        raise SpecError(file, a.key("argv"), "an argv table needs at least one value")
    for value, fragment in argv.items():
        if fragment != []:  # an empty fragment adds nothing (a flag's "off" value)
            check_template(fragment, file, f"{a.key('argv')}.{value}", names)
    return argv, list(argv)


def load_descriptor(path: str | Path, name: str | None = None) -> Descriptor:
    """Load and validate one impl.toml; the implementation's name is its folder's name."""
    path = Path(path)
    text = path.read_text() if path.exists() else ""
    top = Section(load_toml(path), path)
    name = name or path.parent.name
    impl = _impl_table(top.section("impl", required=True), path)
    allowed = PLACEHOLDERS if impl["client_binary"] else PLACEHOLDERS - {"client_binary"}
    caps = _capabilities(top.section("capabilities", required=True), path)
    args = _args(top.section("args"), path, allowed, caps["multipath"])
    if unknown := [arg for arg in caps["fec_args"] if arg not in args]:
        raise SpecError(path, "capabilities.fec_args", f"{unknown[0]!r} is not a declared argument", sorted(args))
    server = _server(top.section("server", required=True), path, allowed)
    client = _client(top.section("client", required=True), path, allowed, caps["workloads"])
    metrics = _metrics(top.section("metrics"), path, allowed)
    check = top.section("check")
    check_argv = check.get("argv", list, [])
    for i, argv in enumerate(check_argv):
        check_template(argv, path, f"{check.key('argv')}[{i}]", allowed)
    check.done()
    capture = parse_capture_args(top.section("capture"))
    for kind, sides in (("qlog", capture.qlog), ("keylog", capture.keylog), ("off", capture.off)):
        for side, argv in sides.items():   # formatted like the argvs (run placeholders, the capture's two)
            check_template(argv, path, f"capture.{kind}.{side}", allowed | {"qlog_dir", "keylog_file"})
    implies = implied.parse(top, path, set(args))
    top.done()
    return Descriptor(name=name, path=path, text=text, **impl, **caps, args=args, **server, **client, **metrics,
                      check_argv=check_argv, capture=capture, implies=implies)


def _impl_table(impl: Section, path: Path) -> dict[str, Any]:
    """[impl]: what the implementation is, how it is built and versioned."""
    description = impl.get("description", str, "")
    binary = impl.get("binary", str)
    client_binary = impl.get("client_binary", str, None)
    version_argv = check_template(impl.get("version", list, ["{binary}", "--version"]), path,
                                  impl.key("version"), frozenset({"binary", "client_binary", "dir"}))
    build = impl.get("build", list, [])
    for i, argv in enumerate(build):
        check_template(argv, path, f"{impl.key('build')}[{i}]", frozenset({"dir"}))
    impl.done()
    return {"description": description, "binary": binary, "client_binary": client_binary,
            "version_argv": version_argv, "build": build}


def _capabilities(caps: Section, path: Path) -> dict[str, Any]:
    """[capabilities]: workloads, codes, multipath, the FEC arguments."""
    workloads = caps.get("workloads", list)
    for w in workloads:
        if w not in WORKLOADS:
            raise SpecError(path, caps.key("workloads"), f"unknown workload {w!r}", WORKLOADS)
    codes = caps.get("codes", list, ["none"])
    multipath = caps.get("multipath", bool, False)
    fec_args = caps.get("fec_args", list, [])  # the arguments that choose and tune FEC (the first: the code)
    caps.done()
    return {"workloads": workloads, "codes": codes, "multipath": multipath, "fec_args": fec_args}


def _args(args_section: Section, path: Path, allowed: frozenset[str], multipath: bool) -> dict[str, ArgSpec]:
    """[args.NAME]: the arguments a design may give, each checked."""
    args: dict[str, ArgSpec] = {}
    for arg_name in list(args_section.data):
        args[arg_name] = _arg(args_section.section(arg_name), arg_name, path, allowed, multipath)
    args_section.done()
    return args


def _arg(a: Section, arg_name: str, path: Path, allowed: frozenset[str], multipath: bool) -> ArgSpec:
    argv, choices = _arg_argv(a, path, allowed)
    spec = ArgSpec(
        name=arg_name,
        argv=argv,
        to=a.get("to", str, "both", choices=ARG_TARGETS),
        choices=choices,
        pattern=a.get("pattern", str, None),
        default=a.get("default", (str, int, float), None),
        paths=a.get("paths", bool, False),
    )
    if spec.paths and spec.pattern is None and spec.choices is None:
        raise SpecError(path, a.key("paths"), "a path count needs a pattern or choices of positive integers")
    fragments = spec.argv.values() if isinstance(spec.argv, dict) else [spec.argv]
    if not multipath and any(set(fields(part)) & PATH_LISTS for f in fragments for part in f):
        raise SpecError(path, a.key("argv"), "lists the paths ({client_addresses}/{server_addresses}) "
                        "but capabilities.multipath is false")
    if spec.default is not None and spec.choices is not None and spec.default not in spec.choices:
        raise SpecError(path, a.key("default"), f"unknown value {spec.default!r}", spec.choices)
    if spec.pattern is not None:
        _check_regex(spec.pattern, path, a.key("pattern"))
    a.done()
    return spec


def _check_regex(pattern: str, path: Path, key: str) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise SpecError(path, key, f"invalid regex: {exc}") from None


def _server(server: Section, path: Path, allowed: frozenset[str]) -> dict[str, Any]:
    """[server]: its argv, environment, setup commands and readiness."""
    server_argv = check_template(server.get("argv"), path, server.key("argv"), allowed)
    server_env = _env(server, path)
    server_setup = server.get("setup", list, [])
    for i, argv in enumerate(server_setup):
        check_template(argv, path, f"{server.key('setup')}[{i}]", allowed)
    server_files = server.get("files", bool, False)
    ready_pattern = server.get("ready", str, None)
    ready_delay_s = server.get("ready_delay_s", float, 0.0, min=0, max=60)
    if ready_pattern is not None:
        _check_regex(ready_pattern, path, server.key("ready"))
    server.done()
    return {"server_argv": server_argv, "server_env": server_env, "server_setup": server_setup,
            "server_files": server_files, "ready_pattern": ready_pattern, "ready_delay_s": ready_delay_s}


def _client(client: Section, path: Path, allowed: frozenset[str], workloads: list[str]) -> dict[str, Any]:
    """[client]: its environment and one [client.WORKLOAD] argv per declared workload."""
    client_argv: dict[str, list[str]] = {}
    client_env = _env(client, path)
    for workload in workloads:
        table = client.section(workload)
        if not table.data:
            raise SpecError(path, client.key(workload),
                            f"workload {workload!r} is declared in capabilities.workloads but has no "
                            f"[client.{workload}] table")
        client_argv[workload] = check_template(table.get("argv"), path, table.key("argv"), allowed)
        table.done()
    client.done()
    return {"client_argv": client_argv, "client_env": client_env}


def _metrics(metrics: Section, path: Path, allowed: frozenset[str]) -> dict[str, Any]:
    """[metrics]: where a run's metrics come from, and what the stack cannot report."""
    sources = metrics.get("source", (str, list), "json")
    sources = [sources] if isinstance(sources, str) else sources
    for value in sources:
        if value not in METRIC_SOURCES:
            raise SpecError(path, metrics.key("source"), f"unknown metrics source {value!r}", METRIC_SOURCES)
    if not sources or len(set(sources)) != len(sources):
        raise SpecError(path, metrics.key("source"), "needs one source, or a list of distinct sources",
                        METRIC_SOURCES)
    patterns, scale = _metric_patterns(metrics, path, sources)
    stream = metrics.get("stream", str, "both", choices=("stdout", "stderr", "both"))
    required = metrics.get("required", list, [])
    unavailable = metrics.get("unavailable", list, [])
    for i, metric in enumerate(unavailable):
        if metric not in METRIC_COLUMNS:
            raise SpecError(path, f"{metrics.key('unavailable')}[{i}]", f"not a typed metric: {metric!r}",
                            sorted(METRIC_COLUMNS))
    download_file = metrics.get("download_file", str, "{download_path}")
    check_template([download_file], path, metrics.key("download_file"), allowed)
    files = metrics.get("files", list, [])
    for i, template in enumerate(files):
        if not isinstance(template, str):
            raise SpecError(path, f"{metrics.key('files')}[{i}]",
                            "must be a file template, e.g. '{run_dir}/server.out'")
        check_template([template], path, f"{metrics.key('files')}[{i}]", allowed)
    if files and "regex" not in sources:
        raise SpecError(path, metrics.key("files"), "only the regex source reads files: add 'regex' to source")
    metrics.done()
    return {"metrics_sources": sources, "metric_patterns": patterns, "metric_scale": scale, "metric_stream": stream,
            "required_metrics": required, "unavailable_metrics": list(unavailable), "download_file": download_file,
            "metric_files": files}


def _metric_patterns(metrics: Section, path: Path, sources: list[str]) -> tuple[list[str], dict[str, float]]:
    """[metrics] patterns (regexes with named groups) and the scale of their metrics."""
    patterns = metrics.get("patterns", list, [])
    for i, pattern in enumerate(patterns):
        try:
            compiled = re.compile(pattern)
        except (re.error, TypeError) as exc:
            raise SpecError(path, f"{metrics.key('patterns')}[{i}]", f"invalid regex: {exc}") from None
        if not compiled.groupindex:
            raise SpecError(path, f"{metrics.key('patterns')}[{i}]", "needs named groups (?P<metric>…)")
    if "regex" in sources and not patterns:
        raise SpecError(path, metrics.key("patterns"), "source = 'regex' needs at least one pattern")
    scale = metrics.get("scale", dict, {})
    groups = {name for pattern in patterns for name in re.compile(pattern).groupindex}
    for metric, factor in scale.items():
        if metric not in groups:
            raise SpecError(path, f"{metrics.key('scale')}.{metric}", "not a named group of the patterns",
                            sorted(groups) or "none")
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor > 0:
            raise SpecError(path, f"{metrics.key('scale')}.{metric}", f"must be a number > 0, got {factor!r}")
    return patterns, {k: float(v) for k, v in scale.items()}


def search_dirs(extra: list[Path] | None = None) -> list[Path]:
    """Where descriptors are looked for: design-given folders, $FECBENCH_IMPLS, the checkout's quic-impls."""
    dirs = list(extra or [])
    dirs += [Path(p) for p in os.environ.get("FECBENCH_IMPLS", "").split(":") if p]
    dirs.append(REPO_ROOT / "quic-impls")
    return dirs


def discover(extra: list[Path] | None = None) -> dict[str, Path]:
    """name -> impl.toml, first folder wins. A folder may itself hold impl.toml or hold <name>/impl.toml."""
    found: dict[str, Path] = {}
    for folder in search_dirs(extra):
        candidates = [folder / "impl.toml"] if (folder / "impl.toml").exists() else sorted(folder.glob("*/impl.toml"))
        for path in candidates:
            found.setdefault(path.parent.name, path)
    return found


def find_descriptor(name: str, extra: list[Path] | None = None, *, file: Path | str | None = None,
                    key: str | None = None) -> Descriptor:
    known = discover(extra)
    if name not in known:
        raise SpecError(file, key, f"unknown implementation {name!r}", sorted(known) or "none found")
    return load_descriptor(known[name])

