"""``fecbench report`` and ``fecbench export``: a campaign database to figures, tables and tidy files.

``fecbench report [DB] [-o DIR] [--baseline LABEL]`` writes PNG figures and ONE self-contained HTML
page (``index.html``, images embedded as base64) with the campaign summary, runs per status, medians
and ratio tables. Default DB: the newest ``results/*.sqlite``; default DIR: ``results/<db stem>-report/``.
Figures (from :mod:`fecbench.analysis`, the same code as the notebooks):

- ``status.png``, ``fidelity.png``, ``loss-fidelity.png``: what ran and whether the emulation held;
- downloads: ``dct-ecdf.png`` (completion time per size); ``dct-point-ratio-ecdf.png`` (the
  headline: ECDF over the design points of the ratio of median DCTs label / baseline over each
  point's loss seeds, one curve per size — the statistic of the 2019 paper's Fig. 6, 7, 10);
  ``dct-ratio-ecdf.png`` (ECDF of the per-run ratios on identical point, seed and size — Fig. 5);
  ``dct-ratio-vs-factors-<label>.png`` (per-point ratios against each factor, bootstrap intervals)
  and, with two labels besides the baseline, ``dct-ratio-ecdf-<a>-vs-<b>.png`` (Fig. 7);
- messages (``fecbench.analysis.report.messages``): ``rebuffering-ecdf.png``, ``data-received-ecdf.png``
  (thesis Fig. 5.7–5.19), ``message-fate.png`` (where every message went),
  ``data-received-ratio-ecdf.png`` and ``rebuffering-vs-owd.png``; on a
  multipath campaign, each multipath label against its single-path twin instead
  (``multipath-data-received-ratio-ecdf.png``, ``multipath-data-received-ratio-vs-loss-<label>.png``:
  thesis Figs. 5.24–5.26) and what each path carried and rebuilt.
- with FEC labels of two implementations, each with its no-FEC twin (``designs/cross-stack.toml``):
  the cross-stack table, each stack's FEC ÷ no FEC per point and size side by side, whether the stacks
  agree, and the ratio of their ratios (``fecbench.analysis.studies.cross_stack``);
- with verdict logs (``verdict_log = true``): ``loss-position.png`` and the Starlink table, median
  and p95 DCT per loss-position class and label (``fecbench.analysis.studies.loss_position``).
- with a link schedule: a table of the changes applied per link, direction and kind, with the median
  and largest distance between applied and scheduled time (``results.link_events``).
- with ``--against OTHER.sqlite`` (another campaign of the design: another version of a stack or of fecbench):
  both side by side, ``versions-ratio-ecdf.png`` and ``versions-change-ecdf.png``, what changed between them
  first (``fecbench.analysis.report.versions``).

The page opens with plain-language sentences (``report.sentences``): per label and size, "faster than
BASE at X of Y points (median ratio R, 95 % interval [a, b])", and what was excluded; then the headline
table: per label and size, the median over the design points of
the per-point ratio of medians, the share of points where the label did better, and how many points
and pairs were censored or excluded and why (``fecbench.analysis.ratios``: a run that reached the design's
``timeout_s`` is censored there, never dropped; the bootstrap intervals are seeded with
``REPORT_SEED``, so a report is reproducible). ``point-ratios.csv`` and ``pairs.csv`` beside the
page hold every point's statistics and every pair (per-run ratios, outcomes, exclusion reasons); a campaign
compared against several baselines (each stack's own) gets a pair of files per baseline,
``point-ratios-vs-<baseline>.csv`` and ``pairs-vs-<baseline>.csv``, each headline's note naming its own.

``fecbench report --open-notebook [DB]`` starts Jupyter (JupyterLab, else the classic notebook) in
``notebooks/`` with ``FECBENCH_DB`` set to the database, which every notebook's parameters cell
reads. Jupyter's server is optional: without it the command says how to install it and exits 2.

``fecbench export [DB] --format csv|parquet [-o PATH]`` writes the tidy runs frame of
``results.load`` (one row per run: factors, run description, status, metrics); default
``results/<db stem>.csv`` or ``.parquet``.
"""

from fecbench.analysis.report.notebook import jupyter_command, open_notebook
from fecbench.analysis.report.page import (
                                           FIGURE_NOTES,
                                           HEADLINE_NOTE,
                                           REPORT_SEED,
                                           Report,
                                           build,
                                           choose_baseline,
                                           default_db,
                                           headline_table,
                                           point_table,
                                           slug,
)
from fecbench.analysis.report.versions import check_against

__all__ = ["FIGURE_NOTES", "HEADLINE_NOTE", "REPORT_SEED", "Report", "build", "check_against", "choose_baseline",
           "default_db",
           "headline_table", "jupyter_command", "open_notebook", "point_table", "slug"]
