"""The short, medium, cluster-short and failover chaos profiles as tests (``make
test-chaos``, which CI runs after ``make test``): every fault kind against the real
multi-process stack, and the checker must find nothing lost, duplicated or stuck and every
bound held. The short profile has every kind once on a light load; the medium one every
kind once under the long profile's load, a backlog (issue 32: liveness under a backlog;
issue 43: every kind, not nine);
cluster-short a three-server NATS cluster with R3 streams losing its stream leader and a
follower; failover a PostgreSQL primary killed and its synchronous standby promoted (about
a minute each).

The same runs are ``make chaos`` and ``make chaos PROFILE=medium``; ``make chaos
PROFILE=long`` is the long one, which ``.ci/run`` runs after these with a seed per run.
"""

from __future__ import annotations

import pytest

from tests.chaos.harness import run
from tests.chaos.profiles import PROFILES


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", ["short", "medium", "cluster-short", "failover"])
async def test_a_chaos_profile_loses_duplicates_and_strands_nothing(name: str) -> None:
    profile = PROFILES[name]
    report = await run(profile, seed=1, say=lambda line: None)

    assert set(report.faults) == set(profile.schedule or ())
    assert report.submitted > 100
    assert report.acknowledged == report.submitted
    assert (report.lost, report.duplicated, report.stuck) == ([], [], []), report.table()
    assert report.violations == [], report.table()
    assert sum(report.terminal.values()) == report.submitted
    if profile.join_every_s is not None:  # the join rule judged joins of every policy
        assert report.joins > 10, report.table()
        assert all(p in report.joins_detail for p in ("run: ran", "fail: ")), report.table()
