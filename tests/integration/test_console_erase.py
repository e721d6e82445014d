"""Erasing a user in the console (issue 44), against a real job_service: a dry run that
counts what would go and changes nothing, a refusal while the user's job waits, the
confirmed erase (cancelling first when asked) after which the job is gone; an operator's
token is refused at the dry run and changes nothing."""

from __future__ import annotations

import grpc
import httpx
import pytest

from job_service.app import JobServiceApp
from tests.integration.test_console import admin, console
from tests.integration.test_console_actions import hidden, shown
from tests.integration.test_console_read_only import operator, service
from tests.support.shared_stack import SharedStack, shared_stack
from tests.support.stack import Client, open_channel

__all__ = ["admin", "console", "operator", "service", "shared_stack"]


async def test_a_user_is_counted_then_erased_after_a_confirmation(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    client = shared_stack.client
    job = (await client.create(user_id="erase-me", sleep_ms=1)).job

    dry = await admin.get("/users/erase", params={"user_id": "erase-me"})
    assert dry.status_code == 200
    assert shown(dry.text, "erase-counted").startswith("Would go for erase-me : 1 job(s)")
    assert shown(dry.text, "erase-unfinished") == "1"
    assert (await client.get(job.id, "erase-me")).id == job.id  # a dry run changes nothing

    form = hidden(dry.text.split("<main>")[1])
    refused = await admin.post("/users/erase", data=form)  # not asked to cancel: refused
    assert "unfinished" in shown(refused.text, "erase-refused")
    done = await admin.post("/users/erase", data={**form, "cancel_running": "on"})
    assert done.status_code == 200
    assert "1 job(s) (0 artifacts" in shown(done.text, "erase-done")
    assert "1 job(s) cancelled first" in shown(done.text, "erase-done")
    with pytest.raises(grpc.aio.AioRpcError) as gone:
        await client.get(job.id, "erase-me")
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND


async def test_an_operator_cannot_even_count(
    service: JobServiceApp, operator: httpx.AsyncClient
) -> None:
    async with open_channel(f"127.0.0.1:{service.port}") as channel:
        client = Client(channel)
        job = (await client.create(user_id="ro-erase")).job
        refused = await operator.get("/users/erase", params={"user_id": "ro-erase"})
        assert refused.status_code == 403 and "Nothing was changed" in refused.text
        assert (await client.get(job.id, user_id="ro-erase")).id == job.id
