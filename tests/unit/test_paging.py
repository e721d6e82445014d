"""Page tokens (pure): round trip, bound to their scope, unforgeable; page sizes; and the
WatchHub's wake-up rule against a fake listing."""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from job_service.domain.checks import depth
from job_service.domain.jobs import Job
from job_service.domain.lifecycle import JobStatus
from job_service.domain.paging import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, PageTokens, page_size
from job_service.domain.selection import Cursor
from job_service.usecases.watch import WatchHub
from shared.errors import InvalidInput
from tests.support.fakes import FakeJobListingStore
from tests.support.fakes.jobs import job
from tests.support.wait import eventually

TOKENS = PageTokens(b"k" * 32)
SCOPE = {"listing": "jobs", "user_id": "alice"}
CURSOR = Cursor(datetime(2026, 11, 30, 1, 2, 3, 456789, tzinfo=UTC), "0b0e-id")


def test_a_token_reads_back_its_cursor() -> None:
    token = TOKENS.issue(SCOPE, {"jobs": CURSOR})
    assert TOKENS.read(token, SCOPE, ("jobs",)) == {"jobs": CURSOR}


def test_an_empty_token_starts_and_all_exhausted_parts_end() -> None:
    assert TOKENS.read("", SCOPE, ("a", "b")) == {"a": "start", "b": "start"}
    assert TOKENS.issue(SCOPE, {"a": None, "b": None}) == ""
    token = TOKENS.issue(SCOPE, {"a": None, "b": CURSOR})
    assert TOKENS.read(token, SCOPE, ("a", "b")) == {"a": None, "b": CURSOR}


@pytest.mark.parametrize(
    "scope",
    [
        {"listing": "jobs", "user_id": "mallory"},
        {"listing": "jobs", "user_id": "alice", "status": "failed"},
        {"listing": "dead_letters"},
    ],
)
def test_a_token_is_refused_in_another_scope(scope: dict[str, Any]) -> None:
    token = TOKENS.issue(SCOPE, {"jobs": CURSOR})
    with pytest.raises(InvalidInput):
        TOKENS.read(token, scope, ("jobs",))


def test_another_secret_does_not_accept_the_token() -> None:
    token = TOKENS.issue(SCOPE, {"jobs": CURSOR})
    with pytest.raises(InvalidInput):
        PageTokens(b"z" * 32).read(token, SCOPE, ("jobs",))


@given(st.text(max_size=200))
def test_no_made_up_token_is_accepted(token: str) -> None:
    with pytest.raises(InvalidInput):
        TOKENS.read(token or "x", SCOPE, ("jobs",))


@given(st.integers(0, 200), st.integers(0, 255))
def test_no_edited_token_is_accepted(position: int, byte: int) -> None:
    token = TOKENS.issue(SCOPE, {"jobs": CURSOR})
    payload, mac = token.split(".")
    raw = bytearray(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    index = position % len(raw)
    if raw[index] == byte:
        return
    raw[index] = byte
    edited = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode() + "." + mac
    with pytest.raises(InvalidInput):
        TOKENS.read(edited, SCOPE, ("jobs",))


def test_page_sizes() -> None:
    assert page_size(0) == DEFAULT_PAGE_SIZE
    assert page_size(7) == 7
    assert page_size(10**9) == MAX_PAGE_SIZE
    with pytest.raises(InvalidInput):
        page_size(-1)


def test_a_short_secret_is_refused() -> None:
    with pytest.raises(ValueError):
        PageTokens(b"short")


def test_inputdepth() -> None:
    assert depth(1) == 0
    assert depth({}) == 1
    assert depth({"a": [1, {"b": []}]}) == 4
    deep: Any = 0
    for _ in range(10_000):  # no recursion limit to hit
        deep = [deep]
    assert depth(deep) == 10_000


# --- WatchHub --------------------------------------------------------------------------


async def test_the_hub_sends_the_current_state_then_changes_until_terminal() -> None:
    listing = FakeJobListingStore()
    hub = WatchHub(listing)  # type: ignore[arg-type]
    listing.jobs["j1"] = job("j1", JobStatus.QUEUED)

    async def read() -> Job | None:
        return listing.jobs.get("j1")

    seen: list[JobStatus] = []

    async def watch() -> None:
        async for watched in hub.watch("j1", read):
            seen.append(watched.status)

    task = asyncio.create_task(watch())
    await eventually(lambda: hub.watching == 1)
    assert await hub.poll() == 0 and seen == [JobStatus.QUEUED]
    # a change before any poll is not lost: the watcher compares with what it sent
    listing.jobs["j1"] = job("j1", JobStatus.RUNNING, progress=0.5)
    await hub.poll()
    await eventually(lambda: len(seen) == 2)
    listing.jobs["j1"] = job("j1", JobStatus.SUCCEEDED, progress=1.0)
    await hub.poll()
    await asyncio.wait_for(task, 1)
    assert seen == [JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.SUCCEEDED]
    assert hub.watching == 0
    polls = len(listing.asked)
    await hub.poll()  # nobody watches: no query
    assert len(listing.asked) == polls
