"""Where each declared job type's spec came from, as ``jobctl definitions`` and the
console's definitions page show it, against the fake AdminService: one row per declared
(type, version), which version is current, and which worker declared it first and last,
and when. (Against the real service: tests/e2e/test_jobctl.py and
tests/integration/test_console.py.)"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from durable_jobs_client.protos import admin_service_pb2 as apb
from durable_jobs_client.testing import FakeJobService

from console.app import Console
from console.sessions import SESSION_COOKIE
from console.settings import ConsoleSettings
from tests.unit.test_jobctl_lookup import run


def declared(
    job_type: str, version: str, first: tuple[str, int], last: tuple[str, int], current: bool
) -> apb.JobDefinitionInfo:
    """A declared (type, version): ``first`` and ``last`` are (worker, hour of 2026-12-06)."""
    info = apb.JobDefinitionInfo(
        job_type=job_type,
        version=version,
        queue="ai-batch",
        timeout_seconds=60,
        max_attempts=3,
        first_declared_by=first[0],
        last_declared_by=last[0],
        current=current,
    )
    info.first_declared_at.FromDatetime(datetime(2026, 12, 6, first[1], tzinfo=UTC))
    info.last_declared_at.FromDatetime(datetime(2026, 12, 6, last[1], tzinfo=UTC))
    return info


def fleet() -> FakeJobService:
    """synthetic 1.0.0 (declared by worker-a at 01:00, last at 03:00) beside 2.0.0 (the
    current one, worker-b at 02:00 and 04:00), and summarize 2 alone."""
    return FakeJobService(
        console_sessions={"session-7": "ops-ada"},
        definitions=[
            declared("synthetic", "1.0.0", ("worker-a", 1), ("worker-a", 3), current=False),
            declared("synthetic", "2.0.0", ("worker-b", 2), ("worker-b", 4), current=True),
            declared("summarize", "2", ("worker-c", 5), ("worker-d", 6), current=True),
        ],
    )


def test_jobctl_definitions_shows_each_version_its_origin_and_the_current_one() -> None:
    status, out = run(fleet().client(user_id="cli-user"), "definitions")

    assert status == 0
    header, *rows = out.splitlines()
    assert header.split() == [
        "TYPE",
        "VERSION",
        "CURRENT",
        "QUEUE",
        "TIMEOUT",
        "ATTEMPTS",
        "CONCURRENCY",
        "FIRST-DECLARED",
        "LAST-DECLARED",
    ]
    cells = [row.split() for row in rows]
    assert [(c[0], c[1], c[2]) for c in cells] == [
        ("synthetic", "1.0.0", "no"),
        ("synthetic", "2.0.0", "yes"),
        ("summarize", "2", "yes"),
    ]
    assert cells[0][7:] == [
        "2026-12-06T01:00:00Z",
        "by",
        "worker-a",
        "2026-12-06T03:00:00Z",
        "by",
        "worker-a",
    ]
    assert cells[2][7:] == [
        "2026-12-06T05:00:00Z",
        "by",
        "worker-c",
        "2026-12-06T06:00:00Z",
        "by",
        "worker-d",
    ]


def test_jobctl_definitions_json_carries_the_origin_fields() -> None:
    status, out = run(fleet().client(user_id="cli-user"), "definitions", "-o", "jsonl")

    assert status == 0
    lines = [line for line in out.splitlines() if line]
    first = json.loads(lines[0])
    assert first["first_declared_by"] == "worker-a" and first["last_declared_by"] == "worker-a"
    assert first["first_declared_at"].startswith("2026-12-06T01:00:00")
    assert first.get("current", False) is False  # proto3: a false bool is left out
    assert json.loads(lines[1])["current"] is True


def test_jobctl_definitions_with_none_declared_says_how_a_type_comes_to_exist() -> None:
    status, out = run(FakeJobService().client(user_id="cli-user"), "definitions")
    assert status == 0
    assert "no job types declared" in out and "worker declares" in out


@pytest.fixture
async def console() -> AsyncIterator[httpx.AsyncClient]:
    fake = fleet()
    app = Console(ConsoleSettings())

    def jobs(token: str) -> Any:
        return fake.client()

    app.jobs = jobs  # type: ignore[method-assign]
    transport = httpx.ASGITransport(app=app.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://console.test") as client:
        _, cookie = app.sessions.new("admin-token", "session-7")
        client.cookies.set(SESSION_COOKIE, cookie, domain="console.test")
        yield client


def row(page: str, element_id: str) -> str:
    found = re.search(rf'<tr id="{re.escape(element_id)}"[^>]*>(.*?)</tr>', page, re.S)
    assert found is not None, f"no row {element_id}"
    return found.group(1)


async def test_the_console_shows_each_version_its_origin_and_the_current_one(
    console: httpx.AsyncClient,
) -> None:
    page = (await console.get("/definitions")).text

    # each type's versions together (a type's rows are one tbody, the type's anchor)
    assert page.index('id="def-summarize"') < page.index('id="def-synthetic"')
    old, new = row(page, "def-synthetic@1.0.0"), row(page, "def-synthetic@2.0.0")
    assert "current" not in old and "current" in new
    assert "2026-12-06 01:00:00 UTC by <code>worker-a</code>" in old
    assert "2026-12-06 03:00:00 UTC by <code>worker-a</code>" in old
    assert "2026-12-06 02:00:00 UTC by <code>worker-b</code>" in new
    assert "2026-12-06 04:00:00 UTC by <code>worker-b</code>" in new
    summarize = row(page, "def-summarize@2")
    assert "worker-c" in summarize and "worker-d" in summarize
    # each version's schemas under its own heading
    assert 'id="schemas-synthetic@1.0.0"' in page and 'id="schemas-synthetic@2.0.0"' in page
