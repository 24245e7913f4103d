"""A run's status: the one vocabulary of the engine, the database, `status` and the analyses."""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    PENDING = "pending"          # known, not run yet
    OK = "ok"
    FAILED = "failed"            # exit != 0, bad or missing metrics, the server died, a harness fault
    TIMEOUT = "timeout"          # ended by the design's time limit (the harness's or the implementation's own)
    UNSUPPORTED = "unsupported"  # the implementation said so (exit status 127)
    FIDELITY = "fidelity"        # the network measured did not match the design
    INTERRUPTED = "interrupted"  # Ctrl-C, a killed campaign or worker: redone by the next `fecbench run`
    RUNNING = "running"          # started, not finished: in flight, or left by a campaign process that died (the
    #                              next campaign on the database records it `interrupted`; to do, as one)


STATUSES: tuple[str, ...] = tuple(s.value for s in Status)
# What --retry may ask to run again (pending, interrupted and left-over running runs are always redone).
RETRYABLE: tuple[str, ...] = tuple(s.value for s in Status if s not in (Status.PENDING, Status.OK, Status.RUNNING))
