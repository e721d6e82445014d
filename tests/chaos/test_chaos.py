"""The short and medium chaos profiles as tests (``make test-chaos``, which CI runs after
``make test``): every fault kind against the real multi-process stack, and the checker must
find nothing lost, duplicated or stuck and every bound held. The short profile has every
kind once on a light load; the medium one the long profile's kinds twice each under its
load, a backlog (issue 32: liveness under a backlog).

The same runs are ``make chaos`` and ``make chaos PROFILE=medium``; ``make chaos
PROFILE=long`` is the long one, by hand.
"""

from __future__ import annotations

import pytest

from tests.chaos.harness import run
from tests.chaos.profiles import PROFILES


@pytest.mark.slow
@pytest.mark.timeout(420)
async def test_the_short_chaos_profile_loses_duplicates_and_strands_nothing() -> None:
    report = await run(PROFILES["short"], seed=1, say=lambda line: None)

    assert set(report.faults) == set(PROFILES["short"].schedule or ())
    assert report.submitted > 100
    assert report.acknowledged == report.submitted
    assert (report.lost, report.duplicated, report.stuck) == ([], [], []), report.table()
    assert report.violations == [], report.table()
    assert sum(report.terminal.values()) == report.submitted


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_the_medium_chaos_profile_keeps_every_bound_under_a_backlog() -> None:
    report = await run(PROFILES["medium"], seed=1, say=lambda line: None)

    assert set(report.faults) == set(PROFILES["medium"].schedule or ())
    assert report.acknowledged == report.submitted
    assert (report.lost, report.duplicated, report.stuck) == ([], [], []), report.table()
    assert report.violations == [], report.table()
    assert sum(report.terminal.values()) == report.submitted
