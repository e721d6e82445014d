"""The console with an operator token (the read-only role): every page of reads shows what
an admin sees; an action is refused with a page that says so, nothing changes, and the
operator stays signed in."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from console.app import Console
from console.settings import ConsoleSettings
from job_service.app import JobServiceApp
from tests.integration.test_console import csrf_of, http, sign_in
from tests.support.stack import TOKENS, Client, open_channel, running_job_service

OPERATOR_TOKEN = "console-operator-token-0"


@pytest.fixture
async def service(database_url: str, nats_url: str) -> AsyncIterator[JobServiceApp]:
    tokens = {**TOKENS, OPERATOR_TOKEN: {"principal": "ops-ada", "roles": ["operator"]}}
    async with running_job_service(database_url, nats_url, auth_tokens=json.dumps(tokens)) as app:
        yield app


@pytest.fixture
async def operator(service: JobServiceApp) -> AsyncIterator[httpx.AsyncClient]:
    console = Console(ConsoleSettings(job_service_target=f"127.0.0.1:{service.port}"))  # type: ignore[call-arg]
    app = console.app()
    async with console.lifespan(app):
        console.asgi = app  # type: ignore[attr-defined]
        async with http(console) as client:
            assert (await sign_in(client, OPERATOR_TOKEN)).status_code == 303
            yield client


async def test_an_operator_reads_every_page_and_changes_nothing(
    service: JobServiceApp, operator: httpx.AsyncClient
) -> None:
    async with open_channel(f"127.0.0.1:{service.port}") as channel:
        client = Client(channel)
        job = (await client.create(user_id="ro-user")).job
        for path in ("/", "/jobs", f"/jobs/{job.id}", "/queues", "/dead-letters", "/definitions"):
            page = await operator.get(path)
            assert page.status_code == 200, path
        assert job.id in (await operator.get("/jobs", params={"user_id": "ro-user"})).text
        csrf = await csrf_of(operator, f"/jobs/{job.id}/cancel")
        refused = await operator.post(f"/jobs/{job.id}/cancel", data={"csrf": csrf})
        assert refused.status_code == 403
        assert "Nothing was changed" in refused.text
        assert (await client.get(job.id, user_id="ro-user")).status == job.status
        # still signed in: the next page reads
        assert (await operator.get(f"/jobs/{job.id}")).status_code == 200
