"""The short chaos profile in the suite: every fault kind once against the real
multi-process stack, and the checker must find nothing lost, duplicated or stuck.

The same run is ``make chaos``; ``make chaos PROFILE=long`` is the long one.
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
