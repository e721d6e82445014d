"""ListJobs (a user's own) and AdminService.ListJobs (anyone's, filtered): newest first,
a page at a time, with page tokens that cannot be forged or carried to another listing."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import grpc
import pytest
from google.protobuf import timestamp_pb2

from job_service.domain.paging import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from shared.errors import InvalidInput, UnknownJobType
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.rpc_errors import error_from_rpc
from tests.support.stack import Client


async def _list(client: Client, user_id: str, size: int = 0, token: str = "") -> Any:
    return await client.jobs.ListJobs(
        jpb.ListJobsRequest(user_id=user_id, page_size=size, page_token=token)
    )


async def _refused(call: Any) -> tuple[grpc.StatusCode, Any]:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    return raised.value.code(), error_from_rpc(raised.value)


async def _create_many(client: Client, user_id: str, n: int) -> list[str]:
    return [(await client.create(user_id=user_id, sleep_ms=i)).job.id for i in range(n)]


async def test_pages_walk_a_users_jobs_newest_first_and_end(client: Client) -> None:
    mine = await _create_many(client, "alice", 7)
    await _create_many(client, "bob", 2)

    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        page = await _list(client, "alice", 3, token)
        pages += 1
        assert len(page.jobs) <= 3
        assert all(j.user_id == "alice" for j in page.jobs)
        assert all(j.output == j.output.__class__() for j in page.jobs)  # summaries
        seen += [j.id for j in page.jobs]
        token = page.next_page_token
        if not token:
            break
    assert pages == 3
    assert seen == list(reversed(mine))


async def test_the_default_page_and_the_maximum(client: Client, db: asyncpg.Connection) -> None:
    await _create_many(client, "carol", 3)
    page = await _list(client, "carol")
    assert len(page.jobs) == 3
    assert page.next_page_token == ""
    assert DEFAULT_PAGE_SIZE == 50
    # more than the maximum is served as the maximum, not refused
    huge = await _list(client, "carol", 2**31 - 1)
    assert len(huge.jobs) == 3
    assert MAX_PAGE_SIZE == 500


async def test_jobs_created_in_the_same_instant_are_neither_lost_nor_repeated(
    client: Client, db: asyncpg.Connection
) -> None:
    ids = await _create_many(client, "dave", 5)
    await db.execute("UPDATE jobs SET created_at = '2026-01-01T00:00:00Z'")
    seen = []
    token = ""
    while True:
        page = await _list(client, "dave", 2, token)
        seen += [j.id for j in page.jobs]
        token = page.next_page_token
        if not token:
            break
    assert sorted(seen) == sorted(ids)
    assert seen == sorted(ids, reverse=True)


async def test_a_negative_page_size_is_invalid(client: Client) -> None:
    code, error = await _refused(_list(client, "alice", -1))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert isinstance(error, InvalidInput)
    assert [v.field for v in error.violations] == ["page_size"]


def _tamper(token: str) -> str:
    payload, mac = token.split(".")
    raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    forged = raw.replace(b"2", b"3", 1) if b"2" in raw else raw + b" "
    return base64.urlsafe_b64encode(forged).rstrip(b"=").decode() + "." + mac


async def test_page_tokens_cannot_be_forged_or_carried_to_another_listing(
    client: Client,
) -> None:
    await _create_many(client, "alice", 3)
    await _create_many(client, "mallory", 3)
    token = (await _list(client, "alice", 1)).next_page_token
    assert token

    bad_tokens = {
        "another user's": _list(client, "mallory", 1, token),
        "edited": _list(client, "alice", 1, _tamper(token)),
        "made up": _list(client, "alice", 1, "eyJqb2JzIjpudWxsfQ.AAAAAAAAAAAAAAAAAAAAAA"),
        "garbage": _list(client, "alice", 1, "not a token; DROP TABLE jobs"),
        "huge": _list(client, "alice", 1, "x" * 5000),
        "admin listing": client.admin.ListJobs(
            apb.AdminListJobsRequest(job_type="synthetic", page_size=1, page_token=token)
        ),
    }
    for name, call in bad_tokens.items():
        code, error = await _refused(call)
        assert code is grpc.StatusCode.INVALID_ARGUMENT, name
        assert isinstance(error, InvalidInput), name
        assert [v.field for v in error.violations] == ["page_token"], name
    # the genuine token still works
    assert len((await _list(client, "alice", 1, token)).jobs) == 1


def _ts(value: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value)
    return stamp


async def test_admin_lists_every_users_jobs_with_filters(
    client: Client, db: asyncpg.Connection
) -> None:
    a = await _create_many(client, "alice", 3)
    b = await _create_many(client, "bob", 2)
    await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=b[0], user_id="bob"))
    await db.execute("UPDATE jobs SET created_at = '2025-06-01T00:00:00Z' WHERE id = $1", a[0])

    async def ids(**filters: Any) -> list[str]:
        out, token = [], ""
        while True:
            page = await client.admin.ListJobs(
                apb.AdminListJobsRequest(page_size=2, page_token=token, **filters)
            )
            out += [j.id for j in page.jobs]
            token = page.next_page_token
            if not token:
                return out

    assert set(await ids()) == set(a + b)
    assert set(await ids(user_id="bob")) == set(b)
    assert await ids(status=job_pb2.JOB_STATUS_CANCELLED) == [b[0]]
    assert set(await ids(job_type="synthetic", queue="ai-interactive")) == set(a + b)
    assert await ids(queue="ai-background") == []
    assert await ids(created_before=_ts(datetime(2026, 1, 1, tzinfo=UTC))) == [a[0]]
    now = datetime.now(UTC)
    recent = await ids(
        created_after=_ts(datetime(2026, 1, 1, tzinfo=UTC)),
        created_before=_ts(now + timedelta(minutes=5)),
    )
    assert set(recent) == set(a[1:] + b)


async def test_admin_filters_are_validated(client: Client) -> None:
    cases = {
        "job_type": (apb.AdminListJobsRequest(job_type="nope"), UnknownJobType),
        "queue": (apb.AdminListJobsRequest(queue="ai-nowhere"), InvalidInput),
        "status": (apb.AdminListJobsRequest(status=99), InvalidInput),  # type: ignore[arg-type]
        "range": (
            apb.AdminListJobsRequest(
                created_after=_ts(datetime(2026, 2, 1, tzinfo=UTC)),
                created_before=_ts(datetime(2026, 1, 1, tzinfo=UTC)),
            ),
            InvalidInput,
        ),
        "page_size": (apb.AdminListJobsRequest(page_size=-5), InvalidInput),
    }
    for name, (request, kind) in cases.items():
        code, error = await _refused(client.admin.ListJobs(request))
        # a type no worker declared is not found; the other filters are bad arguments
        expected = "NOT_FOUND" if kind is UnknownJobType else "INVALID_ARGUMENT"
        assert code.name == expected, name
        assert type(error) is kind, name


async def test_an_admin_page_token_is_bound_to_its_filters(client: Client) -> None:
    await _create_many(client, "alice", 3)
    first = await client.admin.ListJobs(apb.AdminListJobsRequest(user_id="alice", page_size=1))
    code, _ = await _refused(
        client.admin.ListJobs(
            apb.AdminListJobsRequest(user_id="bob", page_size=1, page_token=first.next_page_token)
        )
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT
