"""``fecbench report --open-notebook``: Jupyter in notebooks/ on a campaign database."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from fecbench.analysis import results
from fecbench.errors import UserError
from fecbench.paths import NOTEBOOKS_DIR


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
