"""$FECBENCH_DELAYLINE_CPUS parsed without root: CPU lists like taskset's, clear errors otherwise."""

from __future__ import annotations

import os

import pytest

from fecbench.inputs.errors import UserError
from fecbench.timekeeping.delayline import CPUS_ENV, cpus_from_env


def test_unset_or_empty_means_no_pinning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CPUS_ENV, raising=False)
    assert cpus_from_env() is None
    monkeypatch.setenv(CPUS_ENV, " ")
    assert cpus_from_env() is None


def test_cpu_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    for raw, cpus in [("1", {1}), ("0,2-3", {0, 2, 3}), ("5-7, 0", {0, 5, 6, 7}), ("3-3", {3})]:
        monkeypatch.setenv(CPUS_ENV, raw)
        assert cpus_from_env() == cpus, raw


@pytest.mark.parametrize("raw", ["x", "1-", "3-1", "8", "-1", "0,,1", "1.5"])
def test_not_a_cpu_list_of_this_machine(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    monkeypatch.setenv(CPUS_ENV, raw)
    with pytest.raises(UserError, match=rf"{CPUS_ENV}: a list of CPUs of this machine \(0-7\)"):
        cpus_from_env()
