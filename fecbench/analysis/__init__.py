"""Everything that reads results: a campaign's database in, frames, statistics, figures and reports out.

Nothing here writes a database or runs anything; every reader opens the database read-only, so it works
while a campaign is still writing. The modules, from the data up:

- ``results``: the tidy runs frame (one row per run: factors, run, status, metrics, accuracy columns),
  campaigns, factors, per-group medians and status counts; ``tables``: the per-run measurement tables
  (dropper counters, per-path traffic, fidelity checks, lateness, endpoint timing, link events);
- ``path_metrics`` (what each endpoint counted on each path of a multipath run), ``message_accounting``
  (where each message of a messages run went, joined with the droppers' drops), ``loss_position``
  (downloads classed by where their losses fell, from the verdict logs);
- ``ratios`` (every pair of runs on identical conditions accounted for, per-point ratios of medians with
  bootstrap intervals) on ``stats`` (censored medians, bootstrap), and ``multipath_study`` (each multipath
  label against its single-path twin);
- ``figures``: one function per figure, on those frames (matplotlib without pyplot, seaborn);
- ``report``: the HTML report (``report.messages`` and ``report.accuracy`` are its sections), ``export``:
  CSV/Parquet tables, ``cli``: the ``fecbench report`` and ``fecbench export`` commands.
"""
