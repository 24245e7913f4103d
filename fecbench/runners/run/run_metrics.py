"""Getting a run's metrics back from the client, by the descriptor's source: json, regex or measured.

A client that exits 0 whatever happened (XQUIC's test client) reports its failures in its output: a
pattern group named ``error`` captures that text, and a run whose output (or `[metrics] files`) matches it
fails with it.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fecbench.records.db import METRIC_COLUMNS

if TYPE_CHECKING:
    from fecbench.runners.experiment.descriptor import Descriptor
    from fecbench.runners.experiment.runs import Run
    from fecbench.runners.run.testbed import RunProcess


class MetricsError(Exception):
    """The client exited 0 but its metrics are missing or unusable: the run is recorded as failed."""


def _check_types(metrics: dict[str, Any]) -> None:
    for name in METRIC_COLUMNS:
        if name not in metrics or metrics[name] is None:
            continue
        value = metrics[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise MetricsError(f"{name} must be a number, got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise MetricsError(f"{name} is not finite ({value!r})")


def _check_required(metrics: dict[str, Any], required: list[str]) -> None:
    missing = [name for name in required if metrics.get(name) is None]
    if missing:
        raise MetricsError(f"missing required metric(s): {', '.join(missing)}")


def from_json(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise MetricsError(f"the client wrote no metrics file ({path.name})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise MetricsError(f"cannot read {path.name}: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MetricsError(f"{path.name} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise MetricsError(f"{path.name} must hold a JSON object, got {type(data).__name__}")
    return data


#: The pattern group whose text (not a number) is the client's own account of a failure.
ERROR_GROUP = "error"


def from_patterns(patterns: list[str], text: str, scale: dict[str, float] | None = None) -> dict[str, Any]:
    """Named groups of the patterns as numbers (the last match wins), times their `scale` factor;
    the group `error` as text."""
    metrics: dict[str, Any] = {}
    for pattern in patterns:
        for match in re.finditer(pattern, text, re.MULTILINE):
            for name, value in match.groupdict().items():
                if value is None:
                    continue
                if name == ERROR_GROUP:
                    metrics[name] = value.strip()
                    continue
                try:
                    number = float(value) * (scale or {}).get(name, 1.0)
                except ValueError:
                    raise MetricsError(f"pattern group {name!r} matched {value!r}, not a number") from None
                metrics[name] = int(number) if number.is_integer() and METRIC_COLUMNS.get(name) == "INTEGER" \
                    else number
    return metrics


def _from_source(source: str, descriptor: Descriptor, run: Run, values: dict[str, Any],
                 client: RunProcess) -> dict[str, Any]:
    if source == "json":
        return from_json(Path(values["metrics_path"]))
    if source == "regex":
        stream = descriptor.metric_stream
        text = ""
        if stream in ("stdout", "both"):
            text += client.stdout_path.read_text(errors="replace")
        if stream in ("stderr", "both"):
            text += "\n" + client.stderr_path.read_text(errors="replace")
        for template in descriptor.metric_files:  # e.g. the server's output, a log the client wrote
            with contextlib.suppress(FileNotFoundError):
                text += "\n" + Path(template.format_map(values)).read_text(errors="replace")
        metrics = from_patterns(descriptor.metric_patterns, text, descriptor.metric_scale)
        if not metrics:
            also = "".join(f" or {Path(t).name}" for t in descriptor.metric_files)
            raise MetricsError(f"no metric pattern matched the client's output{also}")
        if isinstance(metrics.get(ERROR_GROUP), str):
            raise MetricsError(f"the implementation reported an error: {metrics[ERROR_GROUP][:500]}")
        return metrics
    metrics = {"dct_ms": client.wall_ms}
    if run.size is not None and run.workload == "download":
        target = Path(descriptor.download_file.format_map(values))
        if not target.is_file():
            raise MetricsError(f"downloaded file {target} is missing")
        got = target.stat().st_size
        if got != run.size:
            raise MetricsError(f"downloaded {got} bytes, expected {run.size}")
        metrics["bytes_app"] = got
    return metrics


def collect_metrics(descriptor: Descriptor, run: Run, values: dict[str, Any], client: RunProcess) -> dict[str, Any]:
    """The run's metrics, from each of the descriptor's sources in order (a later source's value of a
    metric replaces an earlier one's); raises MetricsError when they are unusable."""
    metrics: dict[str, Any] = {}
    for source in descriptor.metrics_sources:
        metrics.update(_from_source(source, descriptor, run, values, client))
    _check_types(metrics)
    _check_required(metrics, descriptor.required_metrics)
    expected = expected_bytes(run, values)
    if run.workload in ("upload", "reqresp", "page") and not isinstance(metrics.get("bytes_app"), int):
        # Only the implementation sees the data arrive: it must say it verified all of it.
        raise MetricsError(f"an {run.workload} run must report bytes_app (the bytes the receiving side verified)")
    if expected is not None and isinstance(metrics.get("bytes_app"), int) and metrics["bytes_app"] != expected:
        raise MetricsError(f"bytes_app = {metrics['bytes_app']}, expected the requested {expected}")
    if run.workload == "reqresp" and "exchange_ms" in metrics:
        _exchange_stats(metrics, int(values["exchanges"]))
    return metrics


def _exchange_stats(metrics: dict[str, Any], exchanges: int) -> None:
    """A reqresp run's per-exchange times (`exchange_ms`, one per exchange, in order): checked, and their
    median and nearest-rank 95th percentile (the ⌈0.95 n⌉-th smallest) added when the client did not."""
    times = metrics["exchange_ms"]
    if not isinstance(times, list) or not all(isinstance(t, (int, float)) and not isinstance(t, bool)
                                              and math.isfinite(t) and t >= 0 for t in times):
        raise MetricsError("exchange_ms must be a list of times in ms (numbers >= 0)")
    if len(times) != exchanges:
        raise MetricsError(f"exchange_ms lists {len(times)} exchange(s), the run had {exchanges}")
    ordered = sorted(times)
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    metrics.setdefault("exchange_median_ms", median)
    metrics.setdefault("exchange_p95_ms", ordered[max(1, math.ceil(0.95 * len(ordered))) - 1])


def expected_bytes(run: Run, values: dict[str, Any]) -> int | None:
    """The application bytes a complete run delivers: the size (download, upload), exchanges ×
    (request + response) (reqresp), the page's bytes (page: its size), None (messages)."""
    if run.workload == "reqresp":
        return int(values["exchanges"]) * (int(values["request"]) + int(values["response"]))
    return run.size


def partial_metrics(descriptor: Descriptor, values: dict[str, Any]) -> dict[str, Any] | None:
    """What a client that failed still reported in its JSON metrics file (e.g. fecq's `error` and the
    bytes that arrived), kept for the record; None when it wrote nothing usable. Never raises."""
    if "json" not in descriptor.metrics_sources:
        return None
    try:
        metrics = from_json(Path(values["metrics_path"]))
        _check_types(metrics)
    except MetricsError:
        return None
    return metrics
