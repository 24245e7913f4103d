"""The report's buffer-timeout section (a campaign whose rQUIC labels ran with different BTOs: designs/rquic2021-bto
*.toml): each label's completion rate ξ per point and the sweep as rQUIC 2021's Figs. 12 and 13 draw it
(``fecbench.analysis.studies.bto``)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from fecbench.analysis import figures
from fecbench.analysis.studies import bto

#: The label whose average ξ divides by: rQUIC without its coding, as the pack's designs name it.
BASELINE = "rquic"


def bto_section(tables: dict[str, pd.DataFrame], notes: dict[str, str], frame: pd.DataFrame,
                figure: Callable[..., None]) -> None:
    rates = bto.completion_rates(frame, baseline=BASELINE)
    if rates.empty or rates["bto_ms"].nunique() < 2:   # one BTO: nothing was swept
        return
    name = "completion rate per buffer timeout"
    tables[name] = bto.rate_summary(rates)
    notes[name] = (f"rQUIC's completion rate ξ (its completion time ÷ the average of {BASELINE}'s ok runs at the same "
                   "point and size: rQUIC 2021, Eq. 4) per label, with the decoder's buffer timeout (BTO) it ran with: "
                   "bto_ms fixed, bto_rtts times the point's RTT (2 × owd), or rQUIC's own rule (25 ms); mean (what "
                   "the paper plots) and median over ok runs.")
    figure("bto-sweep", figures.bto_sweep(rates),
           "ξ against the BTO per network (log axis): each run, the mean per BTO, a third-order least-squares fit "
           "through the means (the paper's thick lines) and the network's RTT dashed; below 1, faster than QUIC's "
           "average.")
