"""``fecbench report --open-notebook``: Jupyter in notebooks/ on a campaign database."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from fecbench.analysis import results
from fecbench.host.paths import NOTEBOOKS_DIR
from fecbench.inputs.errors import UserError


def jupyter_command() -> list[str]:
    """argv starting a Jupyter server with this Python (JupyterLab, else the classic notebook)."""
    for module in ("jupyterlab", "notebook"):
        if importlib.util.find_spec(module) is not None:
            return [sys.executable, "-m", module]
    raise UserError("Jupyter is not installed: .venv/bin/pip install jupyterlab (or open the notebooks in "
                    "notebooks/ with any Jupyter, after export FECBENCH_DB=<database>)")


def open_notebook(db: str | Path, notebooks: Path = NOTEBOOKS_DIR, port: int = 8888) -> int:
    """Start Jupyter in ``notebooks`` on ``db`` (FECBENCH_DB); returns Jupyter's exit status.

    It listens on 127.0.0.1 only: results machines are often shared, and a notebook server runs code.
    """
    db = Path(db).resolve()
    results.connect(db).close()  # a clear error now rather than in the first notebook cell
    argv = jupyter_command() + ["--notebook-dir", str(notebooks), "--ip", "127.0.0.1", "--port", str(port),
                                "--no-browser"]
    if os.geteuid() == 0:
        argv.append("--allow-root")
    env = dict(os.environ, FECBENCH_DB=str(db))
    print(f"starting Jupyter in {notebooks} on {db} (Ctrl-C to stop)")
    if shutil.which(argv[0]) is None:
        raise UserError(f"cannot run {argv[0]}")
    return subprocess.run(argv, env=env, check=False).returncode


def setup(db: str | Path | None, out: str | Path | None, include_fidelity: bool | None = None):
    """A notebook's first lines: its database (``db``, else $FECBENCH_DB, else the newest results/*.sqlite), where
    its figures go (``out``, else $FECBENCH_OUT, else ``<the database's folder>/<its stem>-notebooks/``), its
    runs (``results.load``; flagged runs taken as data with ``include_fidelity``, else $FECBENCH_INCLUDE_FIDELITY
    = 1), and a line saying so and what the comparisons will leave out. Parameters come from the environment as
    well as from the parameters cell: headless runs need no papermill (notebooks/README.md)."""
    from fecbench.analysis.report.page import default_db

    db = Path(db or os.environ.get("FECBENCH_DB") or default_db())
    out = Path(out or os.environ.get("FECBENCH_OUT") or db.parent / f"{db.stem}-notebooks")
    if include_fidelity is None:
        include_fidelity = os.environ.get("FECBENCH_INCLUDE_FIDELITY", "") in ("1", "true", "yes")
    out.mkdir(parents=True, exist_ok=True)
    runs = results.load(db, include_fidelity=include_fidelity)
    counts = runs["status"].value_counts()
    flagged = int(runs["flagged"].sum())
    left = ("flagged runs taken as data (include_fidelity)" if include_fidelity else
            f"{flagged} flagged run(s) left out of every comparison (include_fidelity = True takes them as data)")
    print(f"{db}: {len(runs)} runs ({', '.join(f'{s} {n}' for s, n in counts.items())}), labels "
          f"{', '.join(runs.attrs['labels'])}; {left}; figures go to {out}/")
    return db, out, runs


def show(fig, out: Path, name: str) -> None:
    """Save a notebook's figure as out/<name>.png and display it."""
    from IPython.display import display

    from fecbench.analysis import figures

    figures.save(fig, out / f"{name}.png")
    display(fig)
