"""CancelJobs / RetryJobs' use case against fakes: what is refused before anything is read,
how a page's outcomes are put together, the page token, and the timeline's attribution."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from job_service.domain.lifecycle import RERUNNABLE, JobStatus
from job_service.domain.paging import PageTokens
from job_service.domain.selection import Actionable, Candidate, Cursor, JobFilter, JobSelection
from job_service.usecases.admin import Admin, attribution
from job_service.usecases.bulk import BulkActions, BulkRequest
from shared.errors import InvalidInput, JobNotRetryable, LiveChildExists
from shared.registry import Registry

T0 = datetime(2026, 12, 1, tzinfo=UTC)
IDS = [f"00000000-0000-4000-8000-{n:012d}" for n in range(6)]


class FakeStore:
    """Jobs in creation order; records what it was asked."""

    def __init__(self, statuses: Sequence[JobStatus]) -> None:
        self.jobs = [
            Candidate(IDS[n], T0 + timedelta(seconds=n), "synthetic", status, False)
            for n, status in enumerate(statuses)
        ]
        self.calls: list[str] = []
        self.untils: list[datetime | None] = []

    def _selected(self, selection: JobSelection, actionable: Actionable) -> list[Candidate]:
        found = []
        for job in self.jobs:
            changes = job.status in actionable.statuses
            if selection.job_ids and job.id in selection.job_ids:
                found.append(Candidate(job.id, job.created_at, job.job_type, job.status, changes))
            elif not selection.job_ids and changes:
                found.append(Candidate(job.id, job.created_at, job.job_type, job.status, True))
        return found

    async def count(self, selection: JobSelection, actionable: Actionable) -> int:
        self.calls.append("count")
        return sum(c.actionable for c in self._selected(selection, actionable))

    async def page(
        self, selection: JobSelection, actionable: Actionable, after: Cursor | None, limit: int
    ) -> tuple[list[Candidate], bool]:
        self.calls.append("page")
        self.untils.append(selection.until)
        return self._page(selection, actionable, after, limit)

    def _page(
        self, selection: JobSelection, actionable: Actionable, after: Cursor | None, limit: int
    ) -> tuple[list[Candidate], bool]:
        rest = [
            c
            for c in self._selected(selection, actionable)
            if after is None or (c.created_at, c.id) > (after.created_at, after.id)
        ]
        return rest[:limit], len(rest) > limit

    async def now(self) -> datetime:
        return T0 + timedelta(days=1)

    async def missing(self, job_ids: Sequence[str]) -> list[str]:
        self.calls.append("missing")
        known = {j.id for j in self.jobs}
        return sorted(set(job_ids) - known)

    async def cancel_page(
        self,
        selection: JobSelection,
        actionable: Actionable,
        after: Cursor | None,
        limit: int,
        reason: str,
    ) -> tuple[list[tuple[Candidate, JobStatus | None]], list[tuple[str, JobStatus]], bool]:
        self.calls.append(f"cancel_page {reason}")
        page, more = self._page(selection, actionable, after, limit)
        moved = {
            JobStatus.RUNNING: JobStatus.CANCEL_REQUESTED,
            JobStatus.QUEUED: JobStatus.CANCELLED,
        }
        return (
            [(c, moved.get(c.status)) for c in page],
            [("child", JobStatus.CANCEL_REQUESTED)],
            more,
        )


class FakeAdmin:
    """Admin.retry_job: refuses the job named in ``refuse``; Admin.check_filter: accepts."""

    def __init__(self, refuse: str = "") -> None:
        self.refuse = refuse
        self.retried: list[tuple[str, str]] = []
        self.since: list[datetime | None] = []

    def check_filter(self, where: JobFilter) -> None:
        pass

    async def retry_job(
        self, job_id: str, reason: str = "retry", *, since: datetime | None = None
    ) -> Any:
        if job_id == self.refuse:
            raise LiveChildExists("the parent already has a live child")
        self.retried.append((job_id, reason))
        self.since.append(since)
        return type("New", (), {"id": f"new-{job_id[-1]}"})()


class FakeNotifier:
    def __init__(self) -> None:
        self.sent: list[str] = []

    async def notify_cancel(self, job_id: str) -> None:
        if job_id == "child":
            raise ConnectionError("NATS is down")  # best effort: the call goes on
        self.sent.append(job_id)


class FakeWaker:
    woken = 0

    def wake(self, after_s: float = 0.0) -> None:
        self.woken += 1


def bulk(store: FakeStore, admin: FakeAdmin | None = None) -> tuple[BulkActions, FakeNotifier]:
    notifier = FakeNotifier()
    actions = BulkActions(
        Registry(),
        cast(Admin, admin or FakeAdmin()),
        store,
        PageTokens(b"k" * 32),
        notifier,
        FakeWaker(),
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
    store = FakeStore([JobStatus.QUEUED])
    actions, _ = bulk(store)
    for act in (actions.cancel_jobs, actions.retry_jobs):
        with pytest.raises(InvalidInput) as raised:
            await act(request(**fields))
        assert [v.field for v in raised.value.violations] == [field]
    assert store.calls == []


async def test_retry_answers_each_job_and_continues_after_the_last_one() -> None:
    store = FakeStore([JobStatus.FAILED, JobStatus.QUEUED, JobStatus.FAILED, JobStatus.CANCELLED])
    admin = FakeAdmin(refuse=IDS[2])
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
    store = FakeStore([JobStatus.FAILED] * 3)
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
    store = FakeStore([JobStatus.FAILED, JobStatus.RUNNING])
    admin = FakeAdmin()
    actions, _ = bulk(store, admin)

    page = await actions.retry_jobs(
        request(selection=JobSelection(job_ids=(IDS[0], IDS[1])), dry_run=True)
    )

    assert admin.retried == []
    assert (page.matched, page.retried, page.next_page_token) == (1, 1, "")
    assert isinstance(page.outcomes[1].error, JobNotRetryable)


async def test_cancel_tells_running_jobs_and_descendants_to_stop_even_if_one_notice_fails() -> None:
    store = FakeStore([JobStatus.RUNNING, JobStatus.QUEUED, JobStatus.SUCCEEDED])
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
