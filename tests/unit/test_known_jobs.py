"""What a grant read of its job (type, version, owner) is kept for the job's submit (issue
42): a result of a job this replica granted is checked without reading the job's type
again; one it did not grant is read as before; the keeping is bounded."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from job_service.domain.attempts import Submission
from job_service.domain.grants import LockGrant
from job_service.domain.lifecycle import JobStatus
from job_service.usecases.known_jobs import KnownJob, KnownJobs
from job_service.usecases.leases import Leases
from job_service.usecases.rate_limits import RateReservations
from job_service.usecases.results import Results
from shared.output_hash import output_hash
from tests.support.fakes import FakeDispatcher, FakeLeaseStore, FakeRateLimitStore, FakeResultStore
from tests.unit.test_attempt_ends import REGISTRY, TOKEN

GRANTED = "00000000-0000-4000-8000-000000000301"
ELSEWHERE = "00000000-0000-4000-8000-000000000302"


def grant(job_id: str, version: str = "1") -> LockGrant:
    return LockGrant(
        job_id, "probe", TOKEN, 1, datetime.now(UTC), {}, "user-1", definition_version=version
    )


class CountingStore(FakeResultStore):
    def __init__(self, types: dict[str, str]) -> None:
        super().__init__(types, set(types))
        self.asked: list[list[str]] = []

    async def job_types(self, job_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        self.asked.append(list(job_ids))
        return await super().job_types(job_ids)


def test_a_granted_job_is_kept_until_taken_and_the_oldest_go_first() -> None:
    known = KnownJobs(limit=2)
    known.granted([grant("a"), grant("b"), grant("c")])
    assert known.take(["a", "b", "c"]) == {
        "b": KnownJob("probe", "1", "user-1"),
        "c": KnownJob("probe", "1", "user-1"),
    }
    assert known.take(["b", "c"]) == {}  # taken: forgotten
    known.granted([grant("d", version="")])  # a grant that did not read its version
    assert known.take(["d"]) == {}


async def test_a_submit_reads_the_type_only_of_jobs_not_granted_here() -> None:
    leases_store, rates, dispatcher = (
        FakeLeaseStore("probe"),
        FakeRateLimitStore(),
        FakeDispatcher(),
    )
    reservations = RateReservations(rates)
    leases = Leases(REGISTRY, leases_store, dispatcher, reservations)
    store = CountingStore({GRANTED: "probe", ELSEWHERE: "probe"})
    known = KnownJobs()
    known.granted([grant(GRANTED)])
    results = Results(REGISTRY, store, leases, dispatcher, reservations, known=known)

    answers = await results.submit_results(
        [Submission(j, TOKEN, {}, output_hash({}), []) for j in (GRANTED, ELSEWHERE)]
    )

    assert answers == [JobStatus.SUCCEEDED, JobStatus.SUCCEEDED]
    assert store.asked == [[ELSEWHERE]]
