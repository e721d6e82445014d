"""CancelJobs / RetryJobs' use case against fakes: what is refused before anything is read,
how a page's outcomes are put together, the page token, and the timeline's attribution."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from job_service.domain.declared_types import JobTypes
from job_service.domain.lifecycle import RERUNNABLE, JobStatus
from job_service.domain.paging import PageTokens
from job_service.domain.selection import Candidate, JobFilter, JobSelection
from job_service.usecases.admin import Admin, attribution
from job_service.usecases.bulk import BulkActions, BulkRequest
from shared.errors import InvalidInput, JobNotRetryable, LiveChildExists
from tests.support.fakes import FakeAdmin, FakeBulkStore, FakeCancelNotifier, FakeDispatcher

T0 = datetime(2026, 12, 1, tzinfo=UTC)
IDS = [f"00000000-0000-4000-8000-{n:012d}" for n in range(6)]


def jobs_of(statuses: Sequence[JobStatus]) -> FakeBulkStore:
    """Jobs of these statuses, one a second from T0 (IDS in order); a cancelled page's
    descendant ("child") is moved with it."""
    jobs = [
        Candidate(IDS[n], T0 + timedelta(seconds=n), "synthetic", status, False)
        for n, status in enumerate(statuses)
    ]
    return FakeBulkStore(jobs, T0 + timedelta(days=1), [("child", JobStatus.CANCEL_REQUESTED)])


def bulk(
    store: FakeBulkStore, admin: FakeAdmin | None = None
) -> tuple[BulkActions, FakeCancelNotifier]:
    # the descendant's notice fails: NATS is down (the call goes on)
    notifier = FakeCancelNotifier(failing={"child"})
    actions = BulkActions(
        JobTypes(),
        cast(Admin, admin or FakeAdmin()),
        store,
        PageTokens(b"k" * 32),
        notifier,
        FakeDispatcher(),
    )
    return actions, notifier


def request(**fields: Any) -> BulkRequest:
    fields.setdefault("selection", JobSelection(JobFilter(user_id="alice")))
    return BulkRequest(principal="ops", **fields)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"selection": JobSelection()}, "selection"),
        ({"selection": JobSelection(JobFilter(user_id="a"), (IDS[0],))}, "selection.job_ids"),
        ({"selection": JobSelection(job_ids=(IDS[0],) * 1001)}, "selection.job_ids"),
        ({"selection": JobSelection(job_ids=(IDS[0], "nope"))}, "selection.job_ids"),
        ({"limit": -1}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"reason": "x" * 65}, "reason"),
        ({"reason": "a\nb"}, "reason"),
        ({"page_token": "a.b"}, "page_token"),
    ],
)
async def test_bad_requests_are_refused_before_anything_is_read(
    fields: dict[str, Any], field: str
) -> None:
    store = jobs_of([JobStatus.QUEUED])
    actions, _ = bulk(store)
    for act in (actions.cancel_jobs, actions.retry_jobs):
        with pytest.raises(InvalidInput) as raised:
            await act(request(**fields))
        assert [v.field for v in raised.value.violations] == [field]
    assert store.calls == []


async def test_retry_answers_each_job_and_continues_after_the_last_one() -> None:
    store = jobs_of([JobStatus.FAILED, JobStatus.QUEUED, JobStatus.FAILED, JobStatus.CANCELLED])
    admin = FakeAdmin({IDS[2]: LiveChildExists("the parent already has a live child")})
    actions, _ = bulk(store, admin)
    selection = JobSelection(job_ids=(IDS[3], IDS[0], IDS[1], IDS[2], IDS[5]))

    first = await actions.retry_jobs(request(selection=selection, limit=3, reason="fixed"))
    second = await actions.retry_jobs(
        request(selection=selection, limit=3, reason="fixed", page_token=first.next_page_token)
    )

    # the unknown id once, on the first page; then the jobs oldest first
    assert [o.job_id for o in first.outcomes] == [IDS[5], IDS[0], IDS[1], IDS[2]]
    assert [o.job_id for o in second.outcomes] == [IDS[3]]
    assert second.next_page_token == ""
    errors = {o.job_id: type(o.error).__name__ for o in first.outcomes if o.error}
    assert errors == {IDS[5]: "JobNotFound", IDS[2]: "LiveChildExists"}
    # the queued job went to Admin.retry_job too: RetryJob's own refusal answers it
    assert [j for j, _ in admin.retried] == [IDS[0], IDS[1], IDS[3]]
    assert {r for _, r in admin.retried} == {"admin ops: fixed"}
    assert (first.retried, second.retried) == (2, 1)


async def test_a_walk_is_pinned_to_its_first_call() -> None:
    """Every page of a walk selects the jobs created before its first call, and every
    retry it makes is refused when its original was retried since then (``since``)."""
    store = jobs_of([JobStatus.FAILED] * 3)
    admin = FakeAdmin()
    actions, _ = bulk(store, admin)
    began = await store.now()

    token, pages = "", 0
    while True:
        page = await actions.retry_jobs(request(limit=1, page_token=token))
        pages += 1
        token = page.next_page_token
        if not token:
            break

    assert pages == 3
    assert store.untils == [began] * 3
    assert admin.since == [began] * 3


async def test_a_dry_run_retry_predicts_by_status_and_retries_nothing() -> None:
    store = jobs_of([JobStatus.FAILED, JobStatus.RUNNING])
    admin = FakeAdmin()
    actions, _ = bulk(store, admin)

    page = await actions.retry_jobs(
        request(selection=JobSelection(job_ids=(IDS[0], IDS[1])), dry_run=True)
    )

    assert admin.retried == []
    assert (page.matched, page.retried, page.next_page_token) == (1, 1, "")
    assert isinstance(page.outcomes[1].error, JobNotRetryable)


async def test_cancel_tells_running_jobs_and_descendants_to_stop_even_if_one_notice_fails() -> None:
    store = jobs_of([JobStatus.RUNNING, JobStatus.QUEUED, JobStatus.SUCCEEDED])
    actions, notifier = bulk(store)

    page = await actions.cancel_jobs(
        request(selection=JobSelection(job_ids=tuple(IDS[:3])), reason="outage")
    )

    assert (page.cancelled, page.skipped) == ([IDS[0], IDS[1]], 1)
    assert notifier.sent == [IDS[0]]  # the descendant's notice failed; the call went on
    assert store.calls == ["cancel_page admin ops: outage"]


def test_the_timeline_names_the_principal_within_the_columns_size() -> None:
    assert attribution("ops") == "admin ops"
    assert attribution("ops", "provider outage") == "admin ops: provider outage"
    assert len(attribution("p" * 80, "r" * 64)) == 100


def test_a_retry_selects_what_retry_job_accepts() -> None:
    assert frozenset({JobStatus.FAILED, JobStatus.CANCELLED}) == RERUNNABLE
