"""Where runs execute: the campaign engine, one network, N networks, --jobs auto's calibration, a Dask cluster
(and who may talk to it), the host fingerprint.

Here, once: the machine a command chose for its runs (`Machine`) and the executor for it (`make_executor`);
`fecbench run`, `fecbench reproduce` and the twins of a campaign all make theirs so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fecbench.runners.executors.dask_security import CampaignSecurity
    from fecbench.runners.executors.engine import Executor
    from fecbench.runners.executors.progress import Reporter
    from fecbench.runners.experiment.prepare import Prepared


@dataclass
class Machine:
    """Where and how the runs execute: one network here, N networks here (None: --jobs auto), or a Dask cluster."""
    jobs: int | None = 1
    dask: str | None = None
    link_backend: str | None = None
    keep_logs: bool = False
    security: CampaignSecurity | None = None
    dashboard: bool = False
    recalibrate: bool = False
    jobs_pilot: int = 16
    # Learnt as campaigns run (a command that runs several plans the next ones with them): --jobs auto's calibration
    # once made (it chose `jobs`; every executor made on its choice records it), and the most workers a tls:// cluster
    # had ready.
    calibration: dict[str, Any] | None = None
    workers: int | None = None
    # --jobs auto in a command that runs several workload classes (`fecbench reproduce`): each class's calibration,
    # by its key (`calibrations.class_key`); empty for a command of one campaign.
    by_class: dict[str, dict[str, Any]] = field(default_factory=dict)


def make_executor(prepared: Prepared, db_path: Path, machine: Machine, jobs: int,
                  calibration: dict[str, Any] | None, reporter: Reporter, *, twins: bool = False) -> Executor:
    """A Dask executor when a cluster is named; N networks here when N > 1 or a calibration chose (its choice is
    recorded, even of one network); else one network here. ``twins``: its runs are twins (`fecbench run --twins`),
    whose run folders and artifacts go apart from their runs' (`serial.twin_log_root`)."""
    from fecbench.runners.executors.serial import SerialExecutor, twin_log_root

    executor: Any
    if machine.dask is not None:
        from fecbench.runners.executors.distributed import DaskExecutor

        executor = DaskExecutor(prepared, db_path, machine.dask, link_backend=machine.link_backend,
                                keep_logs=machine.keep_logs, reporter=reporter, security=machine.security,
                                dashboard=machine.dashboard)
    elif jobs > 1 or calibration is not None:
        from fecbench.runners.executors.jobs import JobsExecutor

        executor = JobsExecutor(prepared, db_path, jobs, link_backend=machine.link_backend,
                                keep_logs=machine.keep_logs, calibration=calibration)
    else:
        executor = SerialExecutor(prepared, db_path, link_backend=machine.link_backend, keep_logs=machine.keep_logs)
    if twins:
        executor.log_root = twin_log_root(db_path)   # every executor builds its runners from it when it starts
    return executor
