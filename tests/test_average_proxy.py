"""A passage that states an average, judged through a median as its proxy (issue 69, item 3): the verdict shows the
mean beside the value judged and says whether they sit on the same side of the threshold; the setup record says
what is estimated and why; a mean statistic is never called a proxy."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fecbench.inputs.errors import SpecError
from fecbench.inputs.specs import Section
from fecbench.verdicts import evaluate as ev
from fecbench.verdicts.pack import DesignRef, claims_of
from fecbench.verdicts.validation import fidelity

DESIGN = DesignRef("d", Path("/nonexistent/d.toml"), "absent here", labels=["fec", "quic"], sizes=[1000],
                   factors=["p"], workload="download")


def _claims(**keys: object) -> list:
    entry = {"id": "c", "text": "t", "design": "d", "statistic": "median_pair_ratio", "label": "fec",
             "baseline": "quic", "compare": "<", "threshold": 1.0,
             "source": {"paper": "x", "section": "§1", "quote": "on average FEC is faster"}, **keys}
    return claims_of(Section({"claim": [entry]}, Path("claims.toml")), {"x": "paper"}, {"d": DESIGN})


def _skewed(n: int = 90) -> pd.DataFrame:
    """A third of the pairs 5 times slower, the others 0.8: the median ratio 0.8, the mean 2.2."""
    ratio = np.where(np.arange(n) % 3 == 0, 5.0, 0.8)
    base = np.full(n, 100.0)
    value = base * ratio
    return pd.DataFrame({"draw": range(n), "value": value, "base": base, "ratio": ratio})


def test_the_mean_is_shown_beside_its_proxy_and_which_side_it_is_on() -> None:
    (claim,) = _claims(average_proxy="§1's average over runs; a mean below 1 needs the time limit as its bound")
    text = ev.proxy_text(claim, _skewed(), 0.8)
    assert "as the proxy of the average the passage states (§1's average" in text
    assert "the mean of 90 draws' ratios is 2.2" in text and "on the other side of the threshold" in text
    agreeing = dataclasses.replace(claim, compare=">", threshold=0.5)
    assert "on the same side of the threshold" in ev.proxy_text(agreeing, _skewed(), 0.8)
    censored = _skewed().assign(value=lambda f: np.where(f["draw"] == 0, np.inf, f["value"]))
    assert "1 censored draw(s) left out" in ev.proxy_text(claim, censored, 0.8)


def test_the_setup_record_says_what_is_estimated_and_why() -> None:
    (proxy,) = _claims(average_proxy="the paper's average")
    (plain,) = _claims()
    (mean,) = _claims(statistic="mean_point_ratio", compare=">")
    assert fidelity._estimand(proxy).endswith("(a proxy of the average the passage states: the paper's average)")
    assert fidelity._estimand(plain).endswith("(the passage states no average)")
    assert fidelity._estimand(mean).endswith("(a mean: the passage states an average)")
    assert fidelity._classes(plain) == "no filter: every run of its cells"
    (classed,) = _claims(where={"loss_class": ["loss", "tail loss"]})
    assert fidelity._classes(classed).startswith("both runs of a pair in loss or tail loss (any direction)")


def test_a_mean_statistic_is_no_proxy() -> None:
    with pytest.raises(SpecError, match="judges a mean: it is no proxy"):
        _claims(statistic="mean_point_ratio", compare=">", average_proxy="an average")
