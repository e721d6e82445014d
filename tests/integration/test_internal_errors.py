"""An unexpected exception is INTERNAL with a generic message and a request id; its detail
goes to the server log only."""

from __future__ import annotations

import logging
import re

import grpc
import pytest

from job_service.adapters.postgres.jobs import JobRepository
from shared.errors import InternalError
from shared.rpc_errors import error_from_rpc
from tests.support.stack import Client


async def test_a_bug_is_internal_with_a_request_id_and_no_detail(
    client: Client, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    job = (await client.create()).job

    async def broken(self: JobRepository, job_id: str, user_id: str | None) -> None:
        raise RuntimeError("secret detail: password=hunter2")

    monkeypatch.setattr(JobRepository, "get", broken)
    with caplog.at_level(logging.ERROR), pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.get(job.id)

    assert raised.value.code() is grpc.StatusCode.INTERNAL
    details = raised.value.details() or ""
    match = re.fullmatch(r"internal error; request id ([0-9a-f]{32})", details)
    assert match is not None
    assert isinstance(error_from_rpc(raised.value), InternalError)
    assert "hunter2" not in str(raised.value.trailing_metadata())
    logged = [r for r in caplog.records if match.group(1) in r.getMessage()]
    assert logged and "hunter2" in (logged[0].exc_text or "")
