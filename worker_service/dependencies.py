"""An attempt's dependency results: what ``ctx.dependency_results()`` returns.

A job that waited for others (CreateJob's ``depends_on``, or a join its parent's projection
created) reads how they ended from the job service's ``FetchDependencyResults``, under its
lease, page by page in job id order. Every dependency had ended before the job became
eligible, so the results cannot change while an attempt runs: one fetch serves all of the
attempt's calls. A job without dependencies (the lock answer's ``dependency_count`` is 0)
never calls at all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from shared.dependencies import DependencyOutput
from worker_service.domain.errors import ExecutorCallFailed, is_transient

# The job service's largest page: a join over 200 items takes two calls.
PAGE_SIZE = 100
# Transport hiccups are retried briefly, as for a credential; the lease bounds the attempt.
TRIES = 3
BACKOFF_S = 0.1

# One FetchDependencyResults call: the results after a job id ("": from the first), and
# whether there are more.
FetchPage = Callable[[str], Awaitable[tuple[Sequence[DependencyOutput], bool]]]


class DependencyResults:
    """The results of one attempt's dependencies, fetched at most once (concurrent callers
    share the fetch). ``LeaseLost`` from a fetch propagates: the caller stops the attempt;
    a fetch that failed otherwise is tried again by the next call."""

    def __init__(self, fetch_page: FetchPage, count: int) -> None:
        self._fetch_page = fetch_page
        self._count = count
        self._results: list[DependencyOutput] | None = None
        self._lock = asyncio.Lock()

    async def all(self) -> list[DependencyOutput]:
        if self._count <= 0:
            return []
        async with self._lock:
            if self._results is None:
                self._results = await self._fetch_all()
        return list(self._results)  # a copy: job code may sort or trim its own list

    async def _fetch_all(self) -> list[DependencyOutput]:
        results: list[DependencyOutput] = []
        after = ""
        while True:
            page, more = await self._page(after)
            results.extend(page)
            if not more:
                return results
            if not page or page[-1].job_id == after:
                # a page that does not move on would be asked for again forever
                raise ExecutorCallFailed(
                    f"FetchDependencyResults answered more after {after!r} without moving on"
                )
            after = page[-1].job_id

    async def _page(self, after: str) -> tuple[Sequence[DependencyOutput], bool]:
        backoff = BACKOFF_S
        for attempt in range(1, TRIES + 1):
            try:
                return await self._fetch_page(after)
            except Exception as exc:
                if not is_transient(exc) or attempt == TRIES:
                    raise
                await asyncio.sleep(backoff)
                backoff *= 2
        raise AssertionError("unreachable")  # the loop returns or raises
