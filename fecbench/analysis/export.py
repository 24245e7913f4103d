"""``fecbench export``: a tidy table of a results database written as CSV or Parquet.

Tables: ``runs`` (``results.load``: one row per run), ``paths`` (``path_metrics.path_metrics``: one row
per run, path and side of multipath runs), ``losses`` (``losses.run_losses``: one row per run, drops by
cause and the sender's declared losses), ``link-losses`` (per run, link and direction), ``artifacts``
(what each run kept to explain itself: qlog, key logs, packet captures, with their files) and ``dictionary``
(every column of ``runs``: its unit, source and meaning, ``fecbench.analysis.dictionary``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fecbench.analysis import dictionary, results
from fecbench.analysis.studies import path_metrics
from fecbench.analysis.traces import losses
from fecbench.inputs.errors import UserError

FORMATS = ("csv", "parquet")
TABLES = {"runs": results.load, "paths": path_metrics.path_metrics, "losses": losses.run_losses,
          "link-losses": losses.link_losses, "artifacts": results.artifacts,
          "dictionary": lambda db: dictionary.dictionary(results.load(db))}


def export(db: str | Path, fmt: str, path: str | Path | None = None, table: str = "runs") -> Path:
    """Write ``table`` of ``db`` as CSV or Parquet; returns the file written (default: the database path
    with ``.csv``/``.parquet``, ``-paths`` before it for the paths table). Never leaves a half-written file."""
    if fmt not in FORMATS:
        raise UserError(f"unknown export format {fmt!r} (allowed: {', '.join(FORMATS)})")
    if table not in TABLES:
        raise UserError(f"unknown export table {table!r} (allowed: {', '.join(TABLES)})")
    if fmt == "parquet" and importlib.util.find_spec("pyarrow") is None:
        raise UserError("Parquet export needs pyarrow: .venv/bin/pip install 'fecbench[analysis]'")
    db = Path(db)
    frame = TABLES[table](db)
    suffix = "" if table == "runs" else f"-{table}"
    target = Path(path) if path is not None else db.with_name(f"{db.stem}{suffix}.{fmt}")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    try:
        if fmt == "csv":
            frame.to_csv(partial, index=False)
        else:
            frame.to_parquet(partial, index=False)
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target
