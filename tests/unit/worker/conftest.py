"""The worker unit tests' shared fakes, one per test."""

from __future__ import annotations

import pytest

from .fakes import FakeExecutor, FakeSource, ProbeLog


@pytest.fixture
def probe() -> ProbeLog:
    return ProbeLog()


@pytest.fixture
def executor() -> FakeExecutor:
    return FakeExecutor()


@pytest.fixture
def source() -> FakeSource:
    return FakeSource()
