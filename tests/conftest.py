"""Shared pytest configuration: the `require_root` marker skips (with a reason) when not root."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (network namespaces, BPF, Mininet); run the tests as root")
    for item in items:
        if "require_root" in item.keywords:
            item.add_marker(skip)
